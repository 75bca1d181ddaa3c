//! Where random I/O lands: fio's `random_distribution` (uniform, zipf, pareto, normal,
//! zoned, zoned_abs), drawn as fio 3.33 draws it.
//!
//! The skewed ones are fio's generators (`lib/zipf.c`, `lib/gauss.c`) with their own
//! 32-bit Tausworthe state: a rank is drawn with the distribution's shape, scattered by
//! fio's 64-bit golden-ratio hash and moved by a random offset (or, with a `:center`
//! after the parameter, that fraction of the region), so the hot blocks are the very ones
//! fio picks for the same job. The zoned ones pick a zone with the job's zone generator
//! and draw uniformly inside it with the job's offset generator ([`super::Generator`]).

use super::frand::{hash_u64, FRand};
use super::PatternError;

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
    pub fn parse(
        text: &str,
        parse_size: impl Fn(&str) -> Option<u64>,
    ) -> Result<Self, PatternError> {
        let text = text.trim();
        let (kind, rest) = match text.split_once(':') {
            Some((k, r)) => (k.trim().to_ascii_lowercase(), Some(r.trim())),
            None => (text.to_ascii_lowercase(), None),
        };
        let number = |s: &str| -> Result<f64, PatternError> {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| PatternError::NotNumber(s.to_string()))
        };
        // `VALUE[:CENTER]` of the skewed distributions.
        let value_center = |rest: Option<&str>| -> Result<(f64, Option<f64>), PatternError> {
            let rest = rest.ok_or_else(|| PatternError::NeedsValue(kind.clone()))?;
            let (v, c) = match rest.split_once(':') {
                Some((v, c)) => (v, Some(c)),
                None => (rest, None),
            };
            let center = match c {
                Some(c) => {
                    let c = number(c)?;
                    if !(0.0..=1.0).contains(&c) {
                        return Err(PatternError::Center(c));
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
                    return Err(PatternError::ZipfTheta);
                }
                Ok(Distribution::Zipf { theta, center })
            }
            "pareto" => {
                let (h, center) = value_center(rest)?;
                if h <= 0.0 || h >= 1.0 {
                    return Err(PatternError::ParetoH);
                }
                Ok(Distribution::Pareto { h, center })
            }
            "normal" | "gauss" => {
                let (dev, center) = value_center(rest)?;
                if !(0.0..100.0).contains(&dev) {
                    return Err(PatternError::NormalDeviation);
                }
                Ok(Distribution::Normal { dev, center })
            }
            "zoned" | "zoned_abs" => {
                let rest = rest.ok_or_else(|| PatternError::NeedsZones(kind.clone()))?;
                if rest.contains(',') {
                    return Err(PatternError::ZonesPerDirection);
                }
                let mut zones = Vec::new();
                for z in rest.split(':') {
                    let (a, s) = z
                        .split_once('/')
                        .ok_or_else(|| PatternError::NotZone(z.to_string()))?;
                    zones.push((number(a)?, s.trim()));
                }
                let access: f64 = zones.iter().map(|z| z.0).sum();
                if (access - 100.0).abs() > 1e-6 || zones.iter().any(|z| z.0 < 0.0) {
                    return Err(PatternError::AccessShares(access));
                }
                if kind == "zoned" {
                    // A zone without a size (`20/`) shares what the others leave, in whole
                    // percent, as fio's `zone_split_ddir` divides it.
                    let given = zones
                        .iter()
                        .filter(|z| !z.1.is_empty())
                        .map(|z| number(z.1))
                        .collect::<Result<Vec<_>, PatternError>>()?;
                    let missing = zones.len() - given.len();
                    let rest_each = if missing > 0 {
                        ((100.0 - given.iter().sum::<f64>()) / missing as f64).floor()
                    } else {
                        0.0
                    };
                    let zones = zones
                        .into_iter()
                        .map(|(a, s)| Ok((a, if s.is_empty() { rest_each } else { number(s)? })))
                        .collect::<Result<Vec<_>, PatternError>>()?;
                    let size: f64 = zones.iter().map(|z| z.1).sum();
                    if (size - 100.0).abs() > 1e-6 || zones.iter().any(|z| z.1 < 0.0) {
                        return Err(PatternError::ZoneSizes(size));
                    }
                    Ok(Distribution::Zoned(zones))
                } else {
                    let zones = zones
                        .into_iter()
                        .map(|(a, s)| {
                            parse_size(s)
                                .map(|b| (a, b))
                                .ok_or_else(|| PatternError::NotSize(s.to_string()))
                        })
                        .collect::<Result<Vec<_>, PatternError>>()?;
                    Ok(Distribution::ZonedAbs(zones))
                }
            }
            _ => Err(PatternError::UnknownDistribution),
        }
    }
}

/// fio's skewed generators (`struct zipf_state`, `struct gauss_state`): block numbers in
/// `0..nranges` with the distribution's shape.
#[derive(Debug, Clone)]
pub(crate) struct Sampler {
    nranges: u64,
    kind: Kind,
    rand: FRand,
    rand_off: u64,
    /// fio's `disable_hash`: ranks are not scattered (its file choice).
    no_hash: bool,
}

#[derive(Debug, Clone)]
enum Kind {
    Zipf { theta: f64, zeta2: f64, zetan: f64 },
    Pareto { pow: f64 },
    Normal { stddev: u32 },
}

impl Sampler {
    /// fio's `zipf_init`, `pareto_init` or `gauss_init` over `nranges` ranges with the
    /// 32-bit `seed`; `None` for the distributions fio draws otherwise (uniform, zoned).
    pub(crate) fn new(dist: &Distribution, nranges: u64, seed: u32) -> Option<Sampler> {
        let mut rand = FRand::new(u64::from(seed), false);
        // fio's `shared_rand_init`: the offset is drawn even when a center replaces it.
        let shared = |rand: &mut FRand, center: &Option<f64>| {
            let drawn = rand.rand();
            match center {
                Some(c) => (nranges as f64 * c) as u64,
                None => drawn,
            }
        };
        let (kind, rand_off) = match dist {
            Distribution::Uniform | Distribution::Zoned(_) | Distribution::ZonedAbs(_) => {
                return None
            }
            Distribution::Zipf { theta, center } => {
                let off = shared(&mut rand, center);
                let zeta2 = 1.0f64.powf(*theta) + 0.5f64.powf(*theta);
                let mut zetan = 0.0;
                for i in 0..nranges.min(ZIPF_MAX_GEN) {
                    zetan += (1.0 / (i + 1) as f64).powf(*theta);
                }
                (
                    Kind::Zipf {
                        theta: *theta,
                        zeta2,
                        zetan,
                    },
                    off,
                )
            }
            Distribution::Pareto { h, center } => {
                let off = shared(&mut rand, center);
                (
                    Kind::Pareto {
                        pow: h.ln() / (1.0 - h).ln(),
                    },
                    off,
                )
            }
            Distribution::Normal { dev, center } => {
                let mut stddev = 0u32;
                if *dev != 0.0 {
                    stddev = ((nranges as f64 * dev) / 100.0).ceil() as u32;
                    stddev = stddev.min((nranges / 2) as u32);
                }
                // fio keeps gauss's offset in an unsigned int.
                let off = match center {
                    None => 0,
                    Some(c) => u64::from((nranges as f64 * (c - 0.5)) as i64 as u32),
                };
                (Kind::Normal { stddev }, off)
            }
        };
        Some(Sampler {
            nranges,
            kind,
            rand,
            rand_off,
            no_hash: false,
        })
    }

    /// fio's `zipf_disable_hash`/`gauss_disable_hash`, for the choice of a file.
    pub(crate) fn without_hash(mut self) -> Sampler {
        self.no_hash = true;
        self
    }

    /// The next range number, in `0..nranges` (`zipf_next`, `pareto_next`, `gauss_next`).
    pub(crate) fn next(&mut self) -> u64 {
        let n = self.nranges.max(1);
        let val = match self.kind {
            Kind::Zipf {
                theta,
                zeta2,
                zetan,
            } => {
                let alpha = 1.0 / (1.0 - theta);
                let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
                let rand_uni = self.rand.rand() as f64 / f64::from(u32::MAX);
                let rand_z = rand_uni * zetan;
                let val: u64 = if rand_z < 1.0 {
                    1
                } else if rand_z < 1.0 + 0.5f64.powf(theta) {
                    2
                } else {
                    1 + (n as f64 * (eta * rand_uni - eta + 1.0).powf(alpha)) as u64
                };
                val.wrapping_sub(1)
            }
            Kind::Pareto { pow } => {
                let r = self.rand.rand() as f64 / f64::from(u32::MAX);
                ((n - 1) as f64 * r.powf(pow)) as u64
            }
            Kind::Normal { stddev } => {
                let mut sum: u64 = 0;
                for _ in 0..GAUSS_ITERS {
                    sum = sum.wrapping_add(self.rand.rand() % (n + 1));
                }
                sum = sum.div_ceil(GAUSS_ITERS);
                if stddev != 0 {
                    let r = self.rand.rand();
                    let vr = (f64::from(stddev) * (r as f64 / 4_294_967_296.0)) as i32;
                    let mut dev = vr.wrapping_sub((stddev / 2) as i32);
                    while (dev as i64 as u64).wrapping_add(sum) >= n {
                        dev /= 2;
                    }
                    sum = sum.wrapping_add(dev as i64 as u64);
                }
                sum
            }
        };
        let val = if self.no_hash { val } else { hash_u64(val) };
        val.wrapping_add(self.rand_off) % n
    }
}

/// fio's zone index (`__td_zone_gen_index`): for each of the 100 access percentiles, the
/// zone it falls in, as (start, end) in percent of the region (`zoned`) or in bytes
/// (`zoned_abs`). fio keeps whole percentages.
pub(crate) fn zone_index(dist: &Distribution) -> Option<Vec<(u64, u64)>> {
    let zones: Vec<(u32, u64)> = match dist {
        Distribution::Zoned(z) => z.iter().map(|&(a, s)| (a as u32, s as u64)).collect(),
        Distribution::ZonedAbs(z) => z.iter().map(|&(a, s)| (a as u32, s)).collect(),
        _ => return None,
    };
    let mut index = vec![(0, u64::MAX); 100];
    let (mut aprev, mut sprev) = (0usize, 0u64);
    for (access, size) in zones {
        for slot in index.iter_mut().skip(aprev).take(access as usize) {
            *slot = (sprev, sprev + size);
        }
        aprev += access as usize;
        sprev += size;
    }
    Some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The share of draws that land on the most-hit `top` percent of blocks.
    fn top_share(dist: &Distribution, n: u64, draws: u64, top: f64) -> f64 {
        let mut s = Sampler::new(dist, n, 11).unwrap();
        let mut hits = vec![0u64; n as usize];
        for _ in 0..draws {
            hits[s.next() as usize] += 1;
        }
        hits.sort_unstable_by(|a, b| b.cmp(a));
        let k = ((n as f64) * top / 100.0).ceil() as usize;
        hits[..k].iter().sum::<u64>() as f64 / draws as f64 * 100.0
    }

    #[test]
    fn skew_is_what_the_distribution_says() {
        let n = 16384;
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
        let normal = |dev| {
            top_share(
                &Distribution::Normal { dev, center: None },
                n,
                200_000,
                10.0,
            )
        };
        assert!(
            normal(5.0) > normal(40.0),
            "a narrower normal is more skewed"
        );
        let index =
            zone_index(&Distribution::parse("zoned:90/10:10/90", crate::parse_size).unwrap());
        let index = index.unwrap();
        assert_eq!(index[0], (0, 10));
        assert_eq!(index[89], (0, 10));
        assert_eq!(index[90], (10, 100));
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
        // A zone without a size takes what the others leave (fio's examples/rand-zones.fio).
        assert_eq!(
            p("zoned:50/5:30/15:20/"),
            Ok(Distribution::Zoned(vec![
                (50.0, 5.0),
                (30.0, 15.0),
                (20.0, 80.0)
            ]))
        );
        assert_eq!(
            p("zoned:40/:40/:20/10"),
            Ok(Distribution::Zoned(vec![
                (40.0, 45.0),
                (40.0, 45.0),
                (20.0, 10.0)
            ]))
        );
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
