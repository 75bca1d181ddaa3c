//! What the measured dbench models share: dbench's loadfile, as a file system turns it
//! into block I/O, repeats with a fixed period of `fsync`s (43 on ext4 and on XFS here), so
//! each step of the period is taken as the medians of its repetitions in a capture of one
//! client, and a client plays the steps in turn.

use crate::SimRng;
use mqblk_core::Nanos;

/// What a step's data write is, against the client's previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileWrite {
    /// A newly written file, placed where the file system allocates it.
    New,
    /// Right after the client's previous write (the same file, appended).
    Next,
    /// Over the client's previous write (the same block again).
    Same,
}

impl FileWrite {
    /// The kind of a write at `sector` after the client's previous one, `(sector, sectors)`.
    pub fn after(last: Option<(u64, u32)>, sector: u64) -> FileWrite {
        match last {
            Some((s, _)) if s == sector => FileWrite::Same,
            Some((s, n)) if s + n as u64 == sector => FileWrite::Next,
            _ => FileWrite::New,
        }
    }
}

/// The shortest period (2 to 200, at most a quarter of the sequence) at which at least 90%
/// of the symbols repeat, with that share.
pub(crate) fn period<K: PartialEq>(symbols: &[K]) -> Option<(usize, f64)> {
    (2..=200.min(symbols.len() / 4))
        .map(|p| {
            let same = (0..symbols.len() - p)
                .filter(|&i| symbols[i] == symbols[i + p])
                .count();
            (p, same as f64 / (symbols.len() - p) as f64)
        })
        .find(|&(_, share)| share >= 0.9)
}

/// The median (the upper one of an even count; 0 for none).
pub(crate) fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The value seen most often (the first of equals).
pub(crate) fn commonest<K: PartialEq + Copy>(items: impl Iterator<Item = K>) -> Option<K> {
    let mut counts: Vec<(K, usize)> = Vec::new();
    for k in items {
        match counts.iter_mut().find(|(c, _)| *c == k) {
            Some((_, n)) => *n += 1,
            None => counts.push((k, 1)),
        }
    }
    counts
        .iter()
        .rev()
        .max_by_key(|&&(_, n)| n)
        .map(|&(k, _)| k)
}

/// Collects, step by step, how far a step's think times stray from their median.
#[derive(Default)]
pub(crate) struct Spreads(Vec<f64>);

impl Spreads {
    /// The median of one step's think times, noting its 90th percentile over it.
    pub(crate) fn median_of(&mut self, mut think: Vec<u64>) -> u64 {
        think.sort_unstable();
        let m = think.get(think.len() / 2).copied().unwrap_or(0);
        if m > 0 {
            self.0.push(think[think.len() * 9 / 10] as f64 / m as f64);
        }
        m
    }

    /// The spread of a uniform jitter on [m(1-d), m(1+d)] whose 90th percentile,
    /// m(1 + 0.8d), is where the median step's is.
    pub(crate) fn spread(mut self) -> f64 {
        self.0.sort_by(f64::total_cmp);
        let p90_over_median = self.0.get(self.0.len() / 2).copied().unwrap_or(1.0);
        ((p90_over_median - 1.0) / 0.8).clamp(0.0, 0.9)
    }
}

/// A think time of median `ns`, drawn uniformly within `spread` of it either way.
pub(crate) fn jitter(ns: u64, spread: f64, rng: &mut SimRng) -> Nanos {
    Nanos((ns as f64 * (1.0 + spread * (2.0 * rng.unit() - 1.0))) as u64)
}

/// Why a capture yields no loadfile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadfileError {
    /// The capture has no process of this kind (`dbench`, `jbd2/...`).
    #[error("no {0} process in the capture")]
    MissingProcess(&'static str),
    /// The client's fsyncs do not repeat.
    #[error("{0} fsyncs with no period")]
    NoPeriod(usize),
}
