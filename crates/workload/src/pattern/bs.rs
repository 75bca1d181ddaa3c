//! The size of each I/O in one direction: fio's `bs`, `bsrange` and `bssplit`.

use super::frand::FRand;

/// How a job picks the size of its next I/O in one direction.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockSizes {
    /// Every I/O is this size (`bs=`).
    Fixed(u32),
    /// `bsrange=min-max`: a multiple of `min` up to `max`, as fio 3.33 draws it
    /// (`get_next_buflen`): `min` plus a uniform fraction of `max`, rounded down to a
    /// multiple of `min` and capped at `max`, so `4k-16k` gives 4, 8, 12 and 16 KiB a
    /// quarter each and `4k-10k` gives 4 and 8 KiB 40% each and 10 KiB 20% (measured with
    /// fio's `write_iolog`, `norandommap`).
    Range { min: u32, max: u32 },
    /// `bssplit=`: sizes with their shares, as fio orders and draws them: entries sorted by
    /// share (stably), a draw in `0..100` takes the first whose running sum exceeds it, and
    /// a draw past the sum takes the last (so shares summing to less than 100 give the rest
    /// to the largest share, and ones summing to more cut the last short).
    Split(Vec<SplitEntry>),
}

/// One `bssplit` entry: a size and its share in hundredths of a percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitEntry {
    pub size: u32,
    pub share: u32,
}

impl BlockSizes {
    /// The smallest size this can give.
    pub fn min(&self) -> u32 {
        match self {
            BlockSizes::Fixed(b) => *b,
            BlockSizes::Range { min, .. } => *min,
            BlockSizes::Split(v) => v.iter().map(|e| e.size).min().unwrap_or(512),
        }
    }

    /// The largest size this can give.
    pub fn max(&self) -> u32 {
        match self {
            BlockSizes::Fixed(b) => *b,
            BlockSizes::Range { max, .. } => *max,
            BlockSizes::Split(v) => v.iter().map(|e| e.size).max().unwrap_or(512),
        }
    }

    /// Whether every I/O has the same size.
    pub fn is_fixed(&self) -> bool {
        self.min() == self.max()
    }

    /// The size of the next I/O, drawn as fio's `get_next_buflen` draws it from the
    /// direction's size generator: `fits(len)` says whether an I/O of `len` bytes ends in
    /// the region (fio's `io_u_fits`); sizes that do not are drawn again. 0 when not even
    /// the smallest fits.
    #[inline]
    pub fn pick(&self, rand: &mut FRand, fits: impl Fn(u64) -> bool) -> u32 {
        let (min, max) = (u64::from(self.min()), u64::from(self.max()));
        if min == max {
            return min as u32;
        }
        if !fits(min) {
            return 0;
        }
        let frand_max = rand.max();
        // fio loops until a size fits; a split whose fitting sizes have no share could
        // loop forever there, so the smallest size ends the search after many tries.
        for _ in 0..100_000 {
            let r = rand.rand();
            let mut len = match self {
                BlockSizes::Fixed(b) => u64::from(*b),
                BlockSizes::Range { .. } => {
                    min + (max as f64 * (r as f64 / (frand_max as f64 + 1.0))) as u64
                }
                BlockSizes::Split(entries) => {
                    // fio keeps whole percentages.
                    let mut len = 0;
                    let mut perc = 0u64;
                    for e in entries {
                        let p = u64::from(e.share / 100);
                        if p == 0 {
                            continue;
                        }
                        len = u64::from(e.size);
                        perc += p;
                        if r / perc <= frand_max / 100 && fits(len) {
                            break;
                        }
                    }
                    len
                }
            };
            if min.is_power_of_two() {
                len &= !(min - 1);
            } else {
                len -= len % min;
            }
            len = len.min(max);
            if fits(len) {
                return len as u32;
            }
        }
        min as u32
    }
}

/// Parses one direction's `bssplit` list (`4k/10:64k/50:32k/40`; an entry without a share
/// gets an even part of what the others leave). `parse_size` reads a size.
pub fn parse_split(
    text: &str,
    parse_size: impl Fn(&str) -> Option<u64>,
) -> Result<Vec<SplitEntry>, super::PatternError> {
    let mut entries = Vec::new();
    let mut missing = Vec::new();
    let mut given: u32 = 0;
    for part in text.split(':').map(str::trim) {
        let (size, share) = match part.split_once('/') {
            Some((s, p)) => (s.trim(), Some(p.trim())),
            None => (part, None),
        };
        let size = parse_size(size)
            .filter(|&s| s > 0 && s % 512 == 0 && s <= u64::from(u32::MAX / 2))
            .ok_or_else(|| super::PatternError::NotBlockSize(size.to_string()))?;
        let share = match share {
            Some(p) => {
                let pct: f64 = p
                    .trim_end_matches('%')
                    .parse()
                    .ok()
                    .filter(|v: &f64| (0.0..=100.0).contains(v))
                    .ok_or_else(|| super::PatternError::NotPercentage(p.to_string()))?;
                let hundredths = (pct * 100.0).round() as u32;
                given += hundredths;
                hundredths
            }
            None => {
                missing.push(entries.len());
                0
            }
        };
        entries.push(SplitEntry {
            size: size as u32,
            share,
        });
    }
    if !missing.is_empty() {
        let rest = 10_000u32.saturating_sub(given);
        let each = rest / missing.len() as u32;
        for &i in &missing {
            if let Some(e) = entries.get_mut(i) {
                e.share = each;
            }
        }
    }
    // fio sorts by share (`bs_cmp`); a stable sort keeps equal shares in written order.
    entries.sort_by_key(|e| e.share);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(b: &BlockSizes) -> std::collections::BTreeMap<u32, f64> {
        let mut rng = FRand::new(3, false);
        let n = 200_000;
        let mut m = std::collections::BTreeMap::new();
        for _ in 0..n {
            *m.entry(b.pick(&mut rng, |_| true)).or_insert(0.0) += 100.0 / n as f64;
        }
        m
    }

    fn close(got: &std::collections::BTreeMap<u32, f64>, want: &[(u32, f64)]) {
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (size, pct) in want {
            let g = got.get(size).copied().unwrap_or(0.0);
            assert!(
                (g - pct).abs() < 0.6,
                "{size}: {g:.2}% vs fio's {pct}% ({got:?})"
            );
        }
    }

    #[test]
    fn bsrange_gives_fios_measured_mix() {
        // Each expectation is what fio 3.33 issued for the same range (write_iolog).
        close(
            &shares(&BlockSizes::Range {
                min: 4096,
                max: 16384,
            }),
            &[(4096, 25.0), (8192, 25.0), (12288, 25.0), (16384, 25.0)],
        );
        close(
            &shares(&BlockSizes::Range {
                min: 4096,
                max: 10240,
            }),
            &[(4096, 40.0), (8192, 40.0), (10240, 20.0)],
        );
        close(
            &shares(&BlockSizes::Range {
                min: 3072,
                max: 9216,
            }),
            &[(3072, 33.3), (6144, 33.3), (9216, 33.3)],
        );
    }

    #[test]
    fn bssplit_gives_fios_measured_mix() {
        let split = |t: &str| BlockSizes::Split(parse_split(t, crate::parse_size).unwrap());
        // Each expectation is what fio 3.33 issued for the same list (write_iolog).
        close(
            &shares(&split("4k/50:8k/30")),
            &[(4096, 70.0), (8192, 30.0)],
        );
        close(
            &shares(&split("8k/70:4k/50")),
            &[(4096, 50.0), (8192, 50.0)],
        );
        close(
            &shares(&split("4k/50:8k:16k")),
            &[(4096, 50.0), (8192, 25.0), (16384, 25.0)],
        );
        close(
            &shares(&split("16k/20:4k/20:8k/20")),
            &[(4096, 20.0), (8192, 60.0), (16384, 20.0)],
        );
        close(
            &shares(&split("4k/10:8k/60:16k/60")),
            &[(4096, 10.0), (8192, 60.0), (16384, 30.0)],
        );
        close(&shares(&split("4k/100:8k/0")), &[(4096, 100.0)]);
        assert!(parse_split("4k/x", crate::parse_size).is_err());
        assert!(parse_split("3/50", crate::parse_size).is_err());
    }
}
