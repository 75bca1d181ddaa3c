//! Where random I/O lands: fio's `random_distribution` (uniform, zipf, pareto, normal,
//! zoned, zoned_abs) as a sampler of block numbers.
//!
//! The skewed ones follow fio's generators (`lib/zipf.c`, `lib/gauss.c`): a rank is drawn
//! with the distribution's shape, then spread over the region by a multiplier plus a random
//! offset, so the hot blocks lie spread out rather than at the start (fio's default; a
//! `:center` given after the parameter replaces the random offset by that fraction of the
//! region, as in fio). Zoned distributions are not scattered: each zone is its stretch of
//! the region, in order. The spreading is ours, not fio's hash, so the hot blocks are other
//! ones than fio's for the same seed; how much I/O each share of blocks gets is the same.

use super::Rng;

/// fio's cap on the terms summed for zipf's normalisation constant (`ZIPF_MAX_GEN`).
const ZIPF_MAX_GEN: u64 = 10_000_000;

/// Uniform draws summed per normal sample (fio's `GAUSS_ITERS`).
const GAUSS_ITERS: u64 = 12;

/// fio's `random_distribution=`.
#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    /// `random`: every block alike (the default).
    Uniform,
    /// `zipf:theta` (theta > 0, not 1).
    Zipf { theta: f64, center: Option<f64> },
    /// `pareto:h` (0 < h < 1).
    Pareto { h: f64, center: Option<f64> },
    /// `normal:dev` (or `gauss`): dev in percent of the region, 0 <= dev < 100.
    Normal { dev: f64, center: Option<f64> },
    /// `zoned:A/S:...`: A percent of the I/O to the next S percent of the region.
    Zoned(Vec<(f64, f64)>),
    /// `zoned_abs:A/SIZE:...`: A percent of the I/O to the next SIZE bytes.
    ZonedAbs(Vec<(f64, u64)>),
}

impl Distribution {
    /// Whether blocks are drawn independently of each other (every distribution but the
    /// uniform one: fio uses no random map for them).
    pub fn is_skewed(&self) -> bool {
        !matches!(self, Distribution::Uniform)
    }

    /// Parses fio's syntax; `parse_size` reads `zoned_abs` sizes.
    pub fn parse(text: &str, parse_size: impl Fn(&str) -> Option<u64>) -> Result<Self, String> {
        let text = text.trim();
        let (kind, rest) = match text.split_once(':') {
            Some((k, r)) => (k.trim().to_ascii_lowercase(), Some(r.trim())),
            None => (text.to_ascii_lowercase(), None),
        };
        let number = |s: &str| -> Result<f64, String> {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("'{s}' is not a number"))
        };
        // `VALUE[:CENTER]` of the skewed distributions.
        let value_center = |rest: Option<&str>| -> Result<(f64, Option<f64>), String> {
            let rest = rest.ok_or_else(|| format!("{kind} needs a value ({kind}:VALUE)"))?;
            let (v, c) = match rest.split_once(':') {
                Some((v, c)) => (v, Some(c)),
                None => (rest, None),
            };
            let center = match c {
                Some(c) => {
                    let c = number(c)?;
                    if !(0.0..=1.0).contains(&c) {
                        return Err(format!("center {c} is outside 0.0..=1.0"));
                    }
                    Some(c)
                }
                None => None,
            };
            Ok((number(v)?, center))
        };
        match kind.as_str() {
            "random" if rest.is_none() => Ok(Distribution::Uniform),
            "zipf" => {
                let (theta, center) = value_center(rest)?;
                if theta <= 0.0 || theta == 1.0 {
                    return Err("zipf theta must be above 0 and other than 1".into());
                }
                Ok(Distribution::Zipf { theta, center })
            }
            "pareto" => {
                let (h, center) = value_center(rest)?;
                if h <= 0.0 || h >= 1.0 {
                    return Err("pareto h must lie between 0 and 1".into());
                }
                Ok(Distribution::Pareto { h, center })
            }
            "normal" | "gauss" => {
                let (dev, center) = value_center(rest)?;
                if !(0.0..100.0).contains(&dev) {
                    return Err("normal deviation must be at least 0 and below 100".into());
                }
                Ok(Distribution::Normal { dev, center })
            }
            "zoned" | "zoned_abs" => {
                let rest = rest.ok_or_else(|| format!("{kind} needs zones ({kind}:A/S:...)"))?;
                if rest.contains(',') {
                    return Err("one zone list for all directions is supported".into());
                }
                let mut zones = Vec::new();
                for z in rest.split(':') {
                    let (a, s) = z
                        .split_once('/')
                        .ok_or_else(|| format!("zone '{z}' is not ACCESS/SIZE"))?;
                    zones.push((number(a)?, s.trim()));
                }
                let access: f64 = zones.iter().map(|z| z.0).sum();
                if (access - 100.0).abs() > 1e-6 || zones.iter().any(|z| z.0 < 0.0) {
                    return Err(format!("zone access shares add up to {access}%, not 100%"));
                }
                if kind == "zoned" {
                    let zones = zones
                        .into_iter()
                        .map(|(a, s)| Ok((a, number(s)?)))
                        .collect::<Result<Vec<_>, String>>()?;
                    let size: f64 = zones.iter().map(|z| z.1).sum();
                    if (size - 100.0).abs() > 1e-6 || zones.iter().any(|z| z.1 < 0.0) {
                        return Err(format!("zone sizes add up to {size}%, not 100%"));
                    }
                    Ok(Distribution::Zoned(zones))
                } else {
                    let zones = zones
                        .into_iter()
                        .map(|(a, s)| {
                            parse_size(s)
                                .map(|b| (a, b))
                                .ok_or_else(|| format!("'{s}' is not a size"))
                        })
                        .collect::<Result<Vec<_>, String>>()?;
                    Ok(Distribution::ZonedAbs(zones))
                }
            }
            _ => Err(
                "expected random, zipf:THETA, pareto:H, normal:DEV, zoned:A/S:... or zoned_abs:A/SIZE:..."
                    .into(),
            ),
        }
    }
}

/// Draws block numbers in `0..n` with a [`Distribution`]'s shape.
#[derive(Debug, Clone)]
pub(crate) struct Sampler {
    n: u64,
    kind: Kind,
    /// Where rank 0 lands (fio's `rand_off`).
    offset: u64,
    /// The spread: rank r lands `r * mul` blocks on (mod n), `mul` coprime with n and
    /// near n/phi, so neighbouring ranks land far apart and no two ranks share a block
    /// (fio multiplies by a golden-ratio constant to the same end).
    mul: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Uniform,
    Zipf {
        theta: f64,
        zetan: f64,
        eta: f64,
        alpha: f64,
    },
    Pareto {
        pow: f64,
    },
    Normal {
        width: u64,
    },
    /// Zones as (cumulative access share, first block, blocks), in order.
    Zones(Vec<(f64, u64, u64)>),
}

impl Sampler {
    /// A sampler over `n` blocks of `block` bytes each.
    pub(crate) fn new(dist: &Distribution, n: u64, block: u64, rng: &mut Rng) -> Sampler {
        let n = n.max(1);
        let offset_of = |center: &Option<f64>, rng: &mut Rng| match center {
            Some(c) => (c * (n - 1) as f64) as u64,
            None => rng.below(n),
        };
        let (kind, offset) = match dist {
            Distribution::Uniform => (Kind::Uniform, 0),
            Distribution::Zipf { theta, center } => {
                let terms = n.min(ZIPF_MAX_GEN);
                let zetan: f64 = (1..=terms).map(|i| (i as f64).powf(-theta)).sum();
                let zeta2 = 1.0 + 0.5f64.powf(*theta);
                // Gray et al.'s inverse for the zipf CDF, as fio's `zipf_next` uses it.
                let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
                let kind = Kind::Zipf {
                    theta: *theta,
                    zetan,
                    eta,
                    alpha: 1.0 / (1.0 - theta),
                };
                (kind, offset_of(center, rng))
            }
            Distribution::Pareto { h, center } => {
                let pow = h.ln() / (1.0 - h).ln();
                (Kind::Pareto { pow }, offset_of(center, rng))
            }
            Distribution::Normal { dev, center } => {
                let width = ((n as f64 * dev) / 100.0).ceil() as u64;
                let kind = Kind::Normal {
                    width: width.min(n / 2),
                };
                (kind, offset_of(center, rng))
            }
            Distribution::Zoned(zones) => {
                let mut out = Vec::new();
                let (mut acc, mut first) = (0.0, 0u64);
                for (access, size) in zones {
                    let blocks = ((n as f64 * size / 100.0).round() as u64).min(n - first);
                    acc += access;
                    out.push((acc, first, blocks));
                    first += blocks;
                }
                (Kind::Zones(out), 0)
            }
            Distribution::ZonedAbs(zones) => {
                let mut out = Vec::new();
                let (mut acc, mut first) = (0.0, 0u64);
                for (access, bytes) in zones {
                    let blocks = (bytes / block.max(1)).min(n - first);
                    acc += access;
                    out.push((acc, first, blocks));
                    first += blocks;
                }
                (Kind::Zones(out), 0)
            }
        };
        let mut mul = ((n as f64) * 0.618_033_988_75) as u64 | 1;
        while n > 1 && super::gcd(mul, n) != 1 {
            mul += 2;
        }
        Sampler {
            n,
            kind,
            offset,
            mul: mul % n.max(2),
        }
    }

    /// The next block number, in `0..n`.
    #[inline]
    pub(crate) fn next(&self, rng: &mut Rng) -> u64 {
        let n = self.n;
        let rank = match &self.kind {
            Kind::Uniform => return rng.below(n),
            Kind::Zipf {
                theta,
                zetan,
                eta,
                alpha,
            } => {
                let u = unit(rng);
                let uz = u * zetan;
                let value = if uz < 1.0 {
                    1
                } else if uz < 1.0 + 0.5f64.powf(*theta) {
                    2
                } else {
                    1 + (n as f64 * (eta * u - eta + 1.0).powf(*alpha)) as u64
                };
                value.clamp(1, n) - 1
            }
            Kind::Pareto { pow } => ((n - 1) as f64 * unit(rng).powf(*pow)) as u64,
            Kind::Normal { width } => {
                // The sum of GAUSS_ITERS uniform steps of `width` centred on rank 0 (an
                // Irwin-Hall sum: close to normal, with `width` its standard deviation).
                let mut sum: i64 = 0;
                for _ in 0..GAUSS_ITERS {
                    sum += rng.below((*width).max(1)) as i64 - (*width / 2) as i64;
                }
                sum.rem_euclid(n as i64) as u64
            }
            Kind::Zones(zones) => {
                let draw = unit(rng) * 100.0;
                let zone = zones
                    .iter()
                    .find(|z| draw < z.0 && z.2 > 0)
                    .or_else(|| zones.iter().rev().find(|z| z.2 > 0));
                return match zone {
                    Some(&(_, first, blocks)) => first + rng.below(blocks),
                    None => rng.below(n),
                };
            }
        };
        super::affine_mod(rank, self.mul, self.offset, n)
    }
}

/// A uniform draw in `[0, 1)`.
#[inline]
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The share of draws that land on the most-hit `top` percent of blocks.
    fn top_share(dist: &Distribution, n: u64, draws: u64, top: f64) -> f64 {
        let mut rng = Rng::new(11);
        let s = Sampler::new(dist, n, 4096, &mut rng);
        let mut hits = vec![0u64; n as usize];
        for _ in 0..draws {
            hits[s.next(&mut rng) as usize] += 1;
        }
        hits.sort_unstable_by(|a, b| b.cmp(a));
        let k = ((n as f64) * top / 100.0).ceil() as usize;
        hits[..k].iter().sum::<u64>() as f64 / draws as f64 * 100.0
    }

    #[test]
    fn skew_is_what_the_distribution_says() {
        let n = 16384;
        let uniform = top_share(&Distribution::Uniform, n, 200_000, 10.0);
        assert!(uniform < 17.0, "{uniform}");
        let zipf = |t| {
            top_share(
                &Distribution::Zipf {
                    theta: t,
                    center: None,
                },
                n,
                200_000,
                10.0,
            )
        };
        let (z08, z12) = (zipf(0.8), zipf(1.2));
        assert!(
            z08 > 50.0 && z12 > z08,
            "zipf top 10%: 0.8 {z08:.1}, 1.2 {z12:.1}"
        );
        let zoned = Distribution::parse("zoned:90/10:10/90", crate::parse_size).unwrap();
        let z = top_share(&zoned, n, 200_000, 10.0);
        assert!((z - 90.0).abs() < 1.0, "zoned 90/10: {z:.1}");
    }

    #[test]
    fn parse_refuses_what_fio_refuses() {
        let p = |t| Distribution::parse(t, crate::parse_size);
        assert_eq!(p("random"), Ok(Distribution::Uniform));
        assert!(p("zipf:1").is_err());
        assert!(p("pareto:1.5").is_err());
        assert!(p("normal:100").is_err());
        assert!(p("zoned:50/10:40/90").is_err());
        assert!(p("zoned:50/10:50/80").is_err());
        assert!(p("lognormal:2").is_err());
        assert_eq!(
            p("zoned_abs:60/1m:40/3m"),
            Ok(Distribution::ZonedAbs(vec![
                (60.0, 1 << 20),
                (40.0, 3 << 20)
            ]))
        );
        assert_eq!(
            p("zipf:1.2:0.5"),
            Ok(Distribution::Zipf {
                theta: 1.2,
                center: Some(0.5)
            })
        );
    }
}
