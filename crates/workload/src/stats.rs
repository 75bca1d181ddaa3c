//! Latency and throughput statistics, kept the way fio keeps them so reports match.
//!
//! - [`LatHist`]: fio's log-linear latency histogram (1856 bins over nanoseconds).
//! - [`LatStat`]: min/max/mean/stddev of a latency, optionally with a histogram.
//! - [`SampleStat`]: bandwidth or IOPS samples taken periodically by the runner.
//! - [`DirStats`] / [`JobStats`]: per-direction and per-job aggregates, mergeable for
//!   `group_reporting`.

use crate::Ddir;

/// Bits of a value kept exactly within each histogram group (fio's `FIO_IO_U_PLAT_BITS`).
pub const PLAT_BITS: u32 = 6;
/// Bins per group (fio's `FIO_IO_U_PLAT_VAL`).
pub const PLAT_VAL: u64 = 1 << PLAT_BITS;
/// Number of groups (fio's `FIO_IO_U_PLAT_GROUP_NR`).
pub const PLAT_GROUP_NR: usize = 29;
/// Total bins (fio's `FIO_IO_U_PLAT_NR`): 1856.
pub const PLAT_NR: usize = PLAT_GROUP_NR * PLAT_VAL as usize;

/// The histogram bin of a latency in nanoseconds.
///
/// Values below 128 have a bin each. Above that, the most significant bit picks a group
/// and the next 6 bits pick one of its 64 bins, so a bin is never wider than 1/64 of the
/// values in it. Values beyond the last group (about 17 s) share the last bin.
#[inline]
pub fn plat_val_to_idx(ns: u64) -> usize {
    let msb = 63 - (ns | 1).leading_zeros();
    if msb <= PLAT_BITS {
        return ns as usize;
    }
    let error_bits = msb - PLAT_BITS;
    let base = ((error_bits + 1) as usize) << PLAT_BITS;
    let offset = ((ns >> error_bits) & (PLAT_VAL - 1)) as usize;
    (base + offset).min(PLAT_NR - 1)
}

/// The value a bin stands for: the value itself below 128, else the middle of the bin's
/// range (fio's `plat_idx_to_val`, which reports and labels bins this way).
pub fn plat_idx_to_val(idx: usize) -> u64 {
    let idx = idx.min(PLAT_NR - 1);
    if idx < (PLAT_VAL as usize) << 1 {
        return idx as u64;
    }
    let error_bits = (idx >> PLAT_BITS) as u32 - 1;
    let base = 1u64 << (error_bits + PLAT_BITS);
    let k = idx as u64 % PLAT_VAL;
    base + (k << error_bits) + (1u64 << (error_bits - 1))
}

/// fio's log-linear latency histogram over nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatHist {
    bins: Box<[u64]>,
    samples: u64,
}

impl Default for LatHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatHist {
    /// An empty histogram; the only allocation it ever makes.
    pub fn new() -> Self {
        LatHist {
            bins: vec![0; PLAT_NR].into_boxed_slice(),
            samples: 0,
        }
    }

    /// Counts one latency: an index computation and an increment.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Counts `count` samples of the same latency.
    #[inline]
    pub fn record_n(&mut self, ns: u64, count: u64) {
        if let Some(bin) = self.bins.get_mut(plat_val_to_idx(ns)) {
            *bin = bin.saturating_add(count);
            self.samples = self.samples.saturating_add(count);
        }
    }

    /// Number of samples counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The raw bin counts, indexed like [`plat_val_to_idx`].
    pub fn bins(&self) -> &[u64] {
        &self.bins
    }

    /// The `p`-th percentile (0 < p ≤ 100) as fio computes it: the representative value
    /// of the first bin at which the running count reaches `p`% of all samples.
    /// `None` when the histogram is empty.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.samples == 0 {
            return None;
        }
        let target = p / 100.0 * self.samples as f64;
        let mut running = 0u64;
        for (idx, &count) in self.bins.iter().enumerate() {
            running = running.saturating_add(count);
            if running > 0 && running as f64 >= target {
                return Some(plat_idx_to_val(idx));
            }
        }
        self.last_nonempty().map(plat_idx_to_val)
    }

    /// Percentiles for each entry of `list`, in the same order.
    pub fn percentiles(&self, list: &[f64]) -> Vec<Option<u64>> {
        list.iter().map(|&p| self.percentile(p)).collect()
    }

    /// Adds another histogram's counts to this one.
    pub fn merge(&mut self, other: &LatHist) {
        for (mine, theirs) in self.bins.iter_mut().zip(other.bins.iter()) {
            *mine = mine.saturating_add(*theirs);
        }
        self.samples = self.samples.saturating_add(other.samples);
    }

    /// Non-empty bins as `(representative value, count)`, for json+ output.
    pub fn nonzero_bins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.bins
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (plat_idx_to_val(i), c))
    }

    fn last_nonempty(&self) -> Option<usize> {
        self.bins.iter().rposition(|&c| c > 0)
    }
}

/// Summary of a latency: count, min, max, exact sum and sum of squares (so mean and
/// stddev need no floating-point accumulation), plus an optional histogram.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LatStat {
    /// Smallest sample (0 while empty).
    pub min: u64,
    /// Largest sample.
    pub max: u64,
    /// Number of samples.
    pub n: u64,
    /// Sum of samples (saturating).
    pub sum: u128,
    /// Sum of squared samples (saturating).
    pub sum_sq: u128,
    /// Histogram for percentiles, if kept.
    pub hist: Option<LatHist>,
}

impl LatStat {
    /// An empty summary without a histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty summary with a histogram.
    pub fn with_hist() -> Self {
        LatStat {
            hist: Some(LatHist::new()),
            ..Self::default()
        }
    }

    /// Adds one sample.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.min = if self.n == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.n += 1;
        self.sum = self.sum.saturating_add(u128::from(v));
        self.sum_sq = self.sum_sq.saturating_add(u128::from(v) * u128::from(v));
        if let Some(hist) = &mut self.hist {
            hist.record(v);
        }
    }

    /// The mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        self.sum as f64 / self.n as f64
    }

    /// The sample standard deviation (denominator n-1, like fio; 0 below two samples).
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = u128::from(self.n);
        // Exact integer arithmetic when it fits: a constant series gives exactly 0.
        let numerator = match self.sum.checked_mul(self.sum) {
            Some(square) => self.sum_sq.saturating_sub(square / n) as f64,
            None => {
                let mean = self.mean();
                (self.sum_sq as f64 - self.n as f64 * mean * mean).max(0.0)
            }
        };
        (numerator / (self.n - 1) as f64).sqrt()
    }

    /// The `p`-th percentile from the histogram, if there is one and it has samples.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        self.hist.as_ref()?.percentile(p)
    }

    /// Folds another summary into this one (histograms too, when both have one).
    pub fn merge(&mut self, other: &LatStat) {
        if other.n == 0 {
            return;
        }
        self.min = if self.n == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.n = self.n.saturating_add(other.n);
        self.sum = self.sum.saturating_add(other.sum);
        self.sum_sq = self.sum_sq.saturating_add(other.sum_sq);
        match (&mut self.hist, &other.hist) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.hist = Some(theirs.clone()),
            _ => {}
        }
    }
}

/// Periodic samples of a rate (bandwidth in KiB/s or IOPS), as fio's `bw_stat` and
/// `iops_stat`: min, max, and a running mean and variance (Welford).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SampleStat {
    /// Smallest sample (0 while empty).
    pub min: u64,
    /// Largest sample.
    pub max: u64,
    /// Number of samples.
    pub n: u64,
    /// Running mean.
    pub mean: f64,
    /// Running sum of squared deviations from the mean.
    pub m2: f64,
}

impl SampleStat {
    /// Adds one sample.
    pub fn record(&mut self, v: u64) {
        self.min = if self.n == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.n += 1;
        let x = v as f64;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Sample standard deviation (n-1 denominator; 0 below two samples).
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        (self.m2.max(0.0) / (self.n - 1) as f64).sqrt()
    }

    /// Merges for `group_reporting` the way fio does for rates: the jobs ran side by
    /// side, so their rates add up — min, max, mean and variance terms are summed rather
    /// than pooled.
    pub fn merge_sum(&mut self, other: &SampleStat) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = other.clone();
            return;
        }
        self.min = self.min.saturating_add(other.min);
        self.max = self.max.saturating_add(other.max);
        self.n = self.n.saturating_add(other.n);
        self.mean += other.mean;
        self.m2 += other.m2;
    }
}

/// `x` over `window_ns` as a rate per second (`None` for an empty window).
fn per_sec(x: u64, window_ns: u64) -> Option<u64> {
    let r = (u128::from(x) * 1_000_000_000).checked_div(u128::from(window_ns))?;
    Some(u64::try_from(r).unwrap_or(u64::MAX))
}

/// fio's bandwidth and IOPS samples (`add_bw_samples`, `add_iops_samples`): every
/// `bwavgtime` (`iopsavgtime`) ms, each direction that completed something since the last
/// sample gets one at its rate over the time since then (KiB/s, I/Os per second); a
/// direction with nothing done gets none. Looked at as the job runs, with its time since
/// the start.
#[derive(Debug, Clone)]
pub struct RateSampler {
    windows_ns: [u64; 2],
    /// Per kind (bandwidth, IOPS): the last sample's time and each direction's count then.
    last: [Option<u64>; 2],
    base: [[u64; 3]; 2],
    /// Before this time no window can have passed (a look at every completion costs two
    /// divisions otherwise).
    due: u64,
}

impl RateSampler {
    /// fio's slack: a sample may come up to 1 ms early (`LOG_MSEC_SLACK`).
    const SLACK_NS: u64 = 1_000_000;

    /// Samples every `bw_ms` and `iops_ms` ms from `from_ns` after the job's start (its
    /// ramp's end, where fio starts its windows over).
    pub fn new(bw_ms: u64, iops_ms: u64, from_ns: u64) -> RateSampler {
        RateSampler {
            windows_ns: [bw_ms.max(1) * 1_000_000, iops_ms.max(1) * 1_000_000],
            last: [Some(from_ns); 2],
            base: [[0; 3]; 2],
            due: 0,
        }
    }

    /// The statistics started over (the latency-target search): so do the windows, from
    /// the next look.
    pub fn restart(&mut self) {
        self.last = [None; 2];
        self.base = [[0; 3]; 2];
        self.due = 0;
    }

    /// Takes the samples due at `now` (ns since the job's start) into `stats`, before a
    /// completion at `now` is counted: a window that ended holds what completed before
    /// its end (with looks only at completions, as the simulator's, windows that passed
    /// without any give no sample, as fio's give none with nothing done).
    pub fn tick(&mut self, now: u64, stats: &mut JobStats) {
        if now < self.due {
            return;
        }
        self.sample(now, stats);
        // A window of kind k passes once `now - last + SLACK >= w`: from `last + w - SLACK`
        // on (at once for a window no longer than the slack).
        self.due = (0..2)
            .map(|k| match self.last[k] {
                Some(last) if self.windows_ns[k] > Self::SLACK_NS => {
                    last + self.windows_ns[k] - Self::SLACK_NS
                }
                _ => 0,
            })
            .min()
            .unwrap_or(0);
    }

    fn sample(&mut self, now: u64, stats: &mut JobStats) {
        for kind in 0..2 {
            let w = self.windows_ns[kind];
            let last = *self.last[kind].get_or_insert(now);
            let passed = (now.saturating_sub(last) + Self::SLACK_NS) / w;
            if passed == 0 {
                continue;
            }
            for (d, dir) in stats.dirs.iter_mut().enumerate() {
                let count = if kind == 0 {
                    dir.io_bytes
                } else {
                    dir.total_ios
                };
                let delta = count.saturating_sub(self.base[kind][d]);
                self.base[kind][d] = count;
                match (delta, kind) {
                    (0, _) => {}
                    (_, 0) => dir.push_bw_sample(delta, w),
                    _ => dir.push_iops_sample(delta, w),
                }
            }
            self.last[kind] = Some(last + passed * w);
        }
    }
}

/// Statistics of one I/O direction of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct DirStats {
    /// Bytes transferred.
    pub io_bytes: u64,
    /// Completed I/Os.
    pub total_ios: u64,
    /// I/Os that transferred less than asked.
    pub short_ios: u64,
    /// I/Os dropped (never completed).
    pub drop_ios: u64,
    /// Submission latency: from issue to the block layer accepting it.
    pub slat: LatStat,
    /// Completion latency: from submission to completion.
    pub clat: LatStat,
    /// Total latency: slat + clat.
    pub lat: LatStat,
    /// Time this direction was active, in nanoseconds.
    pub runtime_ns: u64,
    /// Bandwidth samples in KiB/s.
    pub bw: SampleStat,
    /// IOPS samples.
    pub iops: SampleStat,
    /// With `cmdprio_*`: each priority's latencies apart (fio's `clat_prio`), the job's own
    /// priority first; empty otherwise.
    pub prios: Vec<PrioLat>,
    /// `prios` hold total latencies (`lat_percentiles`), not completion latencies.
    pub prio_total: bool,
}

/// One priority's latencies in one direction (fio's `clat_prio_stat`).
#[derive(Debug, Clone, PartialEq)]
pub struct PrioLat {
    /// `class << 13 | level` (0 for a job without `prioclass`/`prio`).
    pub ioprio: u16,
    pub lat: LatStat,
}

impl Default for DirStats {
    fn default() -> Self {
        Self::new()
    }
}

impl DirStats {
    /// Empty statistics; all three latencies keep histograms so that any of fio's
    /// `clat/lat/slat_percentiles` can be reported.
    pub fn new() -> Self {
        DirStats {
            io_bytes: 0,
            total_ios: 0,
            short_ios: 0,
            drop_ios: 0,
            slat: LatStat::with_hist(),
            clat: LatStat::with_hist(),
            lat: LatStat::with_hist(),
            runtime_ns: 0,
            bw: SampleStat::default(),
            iops: SampleStat::default(),
            prios: Vec::new(),
            prio_total: false,
        }
    }

    /// Keeps the latencies of each priority in `prios` apart (fio's `clat_prio`, made by
    /// `fio_cmdprio_init` for the directions with a share): completion latencies, or total
    /// ones with `total` (`lat_percentiles`), with a histogram when `hist`.
    pub fn track_prios(&mut self, prios: &[u16], total: bool, hist: bool) {
        self.prio_total = total;
        self.prios = prios
            .iter()
            .map(|&ioprio| PrioLat {
                ioprio,
                lat: if hist {
                    LatStat::with_hist()
                } else {
                    LatStat::new()
                },
            })
            .collect();
    }

    /// [`Self::record_io`] for an I/O that carried priority `ioprio` (fio's `io_u->ioprio`):
    /// counted under it too when priorities are kept apart.
    #[inline]
    pub fn record_io_prio(&mut self, bytes: u64, slat_ns: u64, clat_ns: u64, ioprio: u16) {
        self.record_io(bytes, slat_ns, clat_ns);
        if self.prios.is_empty() {
            return;
        }
        let v = if self.prio_total {
            slat_ns.saturating_add(clat_ns)
        } else {
            clat_ns
        };
        if let Some(p) = self.prios.iter_mut().find(|p| p.ioprio == ioprio) {
            p.lat.record(v);
        }
    }

    /// The priorities with samples, when there are at least two (fio reports them apart
    /// only then, `get_nr_prios_with_samples`).
    pub fn reported_prios(&self) -> Vec<&PrioLat> {
        let with: Vec<&PrioLat> = self.prios.iter().filter(|p| p.lat.n > 0).collect();
        if with.len() >= 2 {
            with
        } else {
            Vec::new()
        }
    }

    /// Empty statistics keeping histograms only for the latencies whose percentiles will be
    /// reported (fio's `slat/clat/lat_percentiles`); a histogram update is a measurable part
    /// of the per-I/O cost when the device is a null one.
    pub fn with_percentiles(slat: bool, clat: bool, lat: bool) -> Self {
        let pick = |on: bool| {
            if on {
                LatStat::with_hist()
            } else {
                LatStat::new()
            }
        };
        DirStats {
            slat: pick(slat),
            clat: pick(clat),
            lat: pick(lat),
            ..Self::new()
        }
    }

    /// Records one completed I/O of `bytes` with its submission and completion latency.
    #[inline]
    pub fn record_io(&mut self, bytes: u64, slat_ns: u64, clat_ns: u64) {
        self.io_bytes = self.io_bytes.saturating_add(bytes);
        self.total_ios += 1;
        self.slat.record(slat_ns);
        self.clat.record(clat_ns);
        self.lat.record(slat_ns.saturating_add(clat_ns));
    }

    /// Records one bandwidth and one IOPS sample for a window with what completed in it.
    pub fn push_sample(&mut self, bytes_in_window: u64, ios_in_window: u64, window_ns: u64) {
        self.push_bw_sample(bytes_in_window, window_ns);
        self.push_iops_sample(ios_in_window, window_ns);
    }

    /// One bandwidth sample: `bytes` over a window of `window_ns`, in KiB/s.
    pub fn push_bw_sample(&mut self, bytes: u64, window_ns: u64) {
        if let Some(r) = per_sec(bytes, window_ns) {
            self.bw.record(r / 1024);
        }
    }

    /// One IOPS sample: `ios` over a window of `window_ns`.
    pub fn push_iops_sample(&mut self, ios: u64, window_ns: u64) {
        if let Some(r) = per_sec(ios, window_ns) {
            self.iops.record(r);
        }
    }

    /// Runtime in whole milliseconds as fio reports it; a direction that did I/O in less
    /// than a millisecond counts as 1 ms so that its rates are not silently dropped.
    pub fn runtime_ms(&self) -> u64 {
        let ms = self.runtime_ns / 1_000_000;
        if ms == 0 && self.total_ios > 0 {
            1
        } else {
            ms
        }
    }

    /// Bandwidth in bytes/s: `1000 * io_bytes / runtime_ms` (0 without runtime).
    pub fn bw_bytes(&self) -> u64 {
        let ms = self.runtime_ms();
        if ms == 0 {
            return 0;
        }
        u64::try_from(u128::from(self.io_bytes) * 1000 / u128::from(ms)).unwrap_or(u64::MAX)
    }

    /// IOPS: `1000 * total_ios / runtime_ms` (0 without runtime).
    pub fn iops_value(&self) -> f64 {
        let ms = self.runtime_ms();
        if ms == 0 {
            return 0.0;
        }
        1000.0 * self.total_ios as f64 / ms as f64
    }

    /// Folds in another job's statistics for `group_reporting`.
    pub fn merge(&mut self, other: &DirStats) {
        self.io_bytes = self.io_bytes.saturating_add(other.io_bytes);
        self.total_ios = self.total_ios.saturating_add(other.total_ios);
        self.short_ios = self.short_ios.saturating_add(other.short_ios);
        self.drop_ios = self.drop_ios.saturating_add(other.drop_ios);
        self.slat.merge(&other.slat);
        self.clat.merge(&other.clat);
        self.lat.merge(&other.lat);
        // Jobs of a group run concurrently, so the group ran as long as its longest job.
        self.runtime_ns = self.runtime_ns.max(other.runtime_ns);
        self.bw.merge_sum(&other.bw);
        self.iops.merge_sum(&other.iops);
        // By priority value, new ones after those already there (`sum_clat_prio_stats`).
        for theirs in &other.prios {
            match self.prios.iter_mut().find(|p| p.ioprio == theirs.ioprio) {
                Some(mine) => mine.lat.merge(&theirs.lat),
                None => self.prios.push(theirs.clone()),
            }
        }
        self.prio_total |= other.prio_total;
    }
}

/// Counts of latencies per fio latency bucket, across all directions:
/// `ns`/`us` buckets end at 2, 4, 10, 20, 50, 100, 250, 500, 750, 1000 of their unit,
/// `ms` buckets add 2000 and `>=2000`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LatencyBuckets {
    /// Latencies below 1 µs.
    pub ns: [u64; 10],
    /// Latencies from 1 µs to below 1 ms.
    pub us: [u64; 10],
    /// Latencies from 1 ms up.
    pub ms: [u64; 12],
}

/// Upper bounds (exclusive) of fio's latency buckets within one unit.
const BUCKET_LIMITS: [u64; 11] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000];

/// The bucket of a value already scaled to its unit.
fn bucket_of(v: u64, last: usize) -> usize {
    BUCKET_LIMITS
        .iter()
        .position(|&limit| v < limit)
        .unwrap_or(last)
        .min(last)
}

impl LatencyBuckets {
    /// Adds `count` latencies of `ns` nanoseconds, bucketed like fio's
    /// `io_u_mark_latency`.
    pub fn add(&mut self, ns: u64, count: u64) {
        let slot = if ns < 1_000 {
            self.ns.get_mut(bucket_of(ns, 9))
        } else if ns < 1_000_000 {
            self.us.get_mut(bucket_of(ns / 1_000, 9))
        } else {
            self.ms.get_mut(bucket_of(ns / 1_000_000, 11))
        };
        if let Some(slot) = slot {
            *slot = slot.saturating_add(count);
        }
    }
}

/// The fio depth-bucket index of an in-flight depth: 1, 2, 4, 8, 16, 32, >=64.
fn depth_bucket(depth: u64) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

/// The fio batch-bucket index of a submit/complete batch size: 0, 4, 8, 16, 32, 64, >64.
fn batch_bucket(n: u64) -> usize {
    match n {
        0 => 0,
        1..=4 => 1,
        5..=8 => 2,
        9..=16 => 3,
        17..=32 => 4,
        33..=64 => 5,
        _ => 6,
    }
}

/// Everything reported for one job (or one group, after [`JobStats::merge`]).
#[derive(Debug, Clone, PartialEq)]
pub struct JobStats {
    /// Job name.
    pub name: String,
    /// Reporting group.
    pub groupid: u32,
    /// Number of job threads folded into these statistics (fio's `jobs=`).
    pub members: u32,
    /// First error (an errno value; 0 = none).
    pub error: i32,
    /// Text of the first error, shown next to it.
    pub error_text: String,
    /// The job goes on after some errors (`continue_on_error`): the report then carries
    /// `total_err` and `first_error`, as fio's.
    pub continue_on_error: bool,
    /// I/O errors the job went on after, and the errno of the first (fio's
    /// `update_error_count`); the error that ended it is `error`.
    pub total_err: u64,
    pub first_error: i32,
    /// `error` is the error that ended the job (the first such: the I/O in flight with it
    /// may fail too).
    pub error_fatal: bool,
    /// Process id shown in the text header.
    pub pid: u32,
    /// The job's description, if any.
    pub description: String,
    /// Job start, milliseconds since the Unix epoch.
    pub job_start_ms: u64,
    /// Per-direction statistics, indexed by [`Ddir`].
    pub dirs: [DirStats; 3],
    /// Flush latencies (`fsync`, `end_fsync`); its `n` is the number of flushes.
    pub sync: LatStat,
    /// Zones `zonemode=zbd` reset (fio's `nr_zone_resets`, shown after the write line).
    pub nr_zone_resets: u64,
    /// Wall time the job ran, in nanoseconds.
    pub job_runtime_ns: u64,
    /// User CPU time, in nanoseconds.
    pub usr_cpu_ns: u64,
    /// System CPU time, in nanoseconds.
    pub sys_cpu_ns: u64,
    /// Context switches.
    pub ctx_switches: u64,
    /// Major page faults.
    pub majf: u64,
    /// Minor page faults.
    pub minf: u64,
    /// The depth fio's latency-target search would report (`latency_depth`): without a
    /// latency target, the job's `iodepth`.
    pub latency_depth: u32,
    /// The job's `latency_target` and `latency_window` (microseconds, as fio prints them;
    /// 0: none) and `latency_percentile`.
    pub latency_target_us: u64,
    pub latency_window_us: u64,
    pub latency_percentile: f64,
    /// I/Os submitted while the in-flight depth was 1, 2, 4, 8, 16, 32, >=64.
    pub iodepth_level: [u64; 7],
    /// Submit calls by batch size 0, 4, 8, 16, 32, 64, >64.
    pub iodepth_submit: [u64; 7],
    /// Reap calls by batch size 0, 4, 8, 16, 32, 64, >64.
    pub iodepth_complete: [u64; 7],
    /// Options set in the job's own section, for the JSON "job options".
    pub job_options: Vec<(String, String)>,
    /// Extra per-job JSON keys (e.g. per-hctx dispatch counts), appended to the job.
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// Extra human-readable lines, printed after the `cpu` line of the text report.
    pub extra_lines: Vec<String>,
    /// fio's steady-state detection, when the job asked for it (`ss_dur`): the window of
    /// the job, or of its group with `group_reporting`.
    pub steadystate: Option<crate::steadystate::SteadyReport>,
    /// fio's `unified_rw_reporting`, and with `both` the directions taken together
    /// (made by [`JobStats::unify`] for the report).
    pub unified: Unified,
    pub mixed: Option<DirStats>,
    /// fio's `stats=0`: the job is not reported.
    pub hidden: bool,
}

/// fio's `unified_rw_reporting`: the directions reported apart (`none`), as one `mixed`
/// direction in the place of reads (`mixed`), or apart and then together (`both`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub enum Unified {
    #[default]
    None,
    Mixed,
    Both,
}

impl JobStats {
    /// Empty statistics for a job called `name` (one member, group 0).
    pub fn new(name: &str) -> Self {
        JobStats {
            name: name.to_string(),
            groupid: 0,
            members: 1,
            error: 0,
            error_text: String::new(),
            continue_on_error: false,
            total_err: 0,
            first_error: 0,
            error_fatal: false,
            pid: 0,
            description: String::new(),
            job_start_ms: 0,
            dirs: [DirStats::new(), DirStats::new(), DirStats::new()],
            sync: LatStat::with_hist(),
            nr_zone_resets: 0,
            job_runtime_ns: 0,
            usr_cpu_ns: 0,
            sys_cpu_ns: 0,
            ctx_switches: 0,
            majf: 0,
            minf: 0,
            latency_depth: 1,
            latency_target_us: 0,
            latency_window_us: 0,
            latency_percentile: 100.0,
            iodepth_level: [0; 7],
            iodepth_submit: [0; 7],
            iodepth_complete: [0; 7],
            job_options: Vec::new(),
            extra: serde_json::Map::new(),
            steadystate: None,
            extra_lines: Vec::new(),
            unified: Unified::None,
            mixed: None,
            hidden: false,
        }
    }

    /// The report's view of `unified_rw_reporting` (fio's `sum_thread_stats` into a
    /// `UNIFIED_MIXED` thread_stat): with `mixed` every direction folded into the first,
    /// with `both` the folded ones kept beside the directions.
    pub fn unify(&mut self) {
        let folded = || {
            let mut m = self.dirs[0].clone();
            m.merge(&self.dirs[1]);
            m.merge(&self.dirs[2]);
            m
        };
        match self.unified {
            Unified::None => {}
            Unified::Mixed => {
                let m = folded();
                let fresh = |d: &DirStats| {
                    DirStats::with_percentiles(
                        d.slat.hist.is_some(),
                        d.clat.hist.is_some(),
                        d.lat.hist.is_some(),
                    )
                };
                self.dirs = [m, fresh(&self.dirs[1]), fresh(&self.dirs[2])];
            }
            Unified::Both => self.mixed = Some(folded()),
        }
    }

    /// Starts the measurements over (fio's `reset_all_stats`, at the latency-target
    /// search's final window), keeping what describes the job and which percentiles it
    /// keeps.
    pub fn restart(&mut self) {
        let mut fresh = JobStats::new(&self.name);
        for (f, d) in fresh.dirs.iter_mut().zip(&self.dirs) {
            *f = DirStats::with_percentiles(
                d.slat.hist.is_some(),
                d.clat.hist.is_some(),
                d.lat.hist.is_some(),
            );
            let prios: Vec<u16> = d.prios.iter().map(|p| p.ioprio).collect();
            let hist = d.prios.first().is_some_and(|p| p.lat.hist.is_some());
            f.track_prios(&prios, d.prio_total, hist);
        }
        fresh.latency_depth = self.latency_depth;
        fresh.latency_target_us = self.latency_target_us;
        fresh.latency_window_us = self.latency_window_us;
        fresh.latency_percentile = self.latency_percentile;
        fresh.job_options = std::mem::take(&mut self.job_options);
        fresh.unified = self.unified;
        fresh.hidden = self.hidden;
        fresh.description = std::mem::take(&mut self.description);
        // Errors are the job's, not the measurement window's.
        fresh.error = self.error;
        fresh.error_text = std::mem::take(&mut self.error_text);
        fresh.error_fatal = self.error_fatal;
        fresh.continue_on_error = self.continue_on_error;
        fresh.total_err = self.total_err;
        fresh.first_error = self.first_error;
        *self = fresh;
    }

    /// The statistics of one direction.
    pub fn dir(&self, dir: Ddir) -> &DirStats {
        &self.dirs[dir.index()]
    }

    /// The statistics of one direction, for updating.
    pub fn dir_mut(&mut self, dir: Ddir) -> &mut DirStats {
        &mut self.dirs[dir.index()]
    }

    /// Notes that `nr` I/Os were submitted while `depth` were in flight.
    pub fn mark_depth(&mut self, depth: u64, nr: u64) {
        if let Some(slot) = self.iodepth_level.get_mut(depth_bucket(depth)) {
            *slot = slot.saturating_add(nr);
        }
    }

    /// Forgets the measurements a job asked fio not to take (`disable_slat`,
    /// `disable_clat`, `disable_lat`, `disable_bw_measurement`; `gtod_reduce` is all four):
    /// they report as not measured, as fio's do.
    pub fn forget(&mut self, slat: bool, clat: bool, lat: bool, bw: bool) {
        for d in &mut self.dirs {
            if slat {
                d.slat = LatStat::new();
            }
            if clat {
                d.clat = LatStat::new();
            }
            if lat {
                d.lat = LatStat::new();
            }
            if bw {
                d.bw = SampleStat::default();
                d.iops = SampleStat::default();
            }
        }
    }

    /// Notes one submit call that submitted `nr` I/Os.
    pub fn mark_submit(&mut self, nr: u64) {
        if let Some(slot) = self.iodepth_submit.get_mut(batch_bucket(nr)) {
            *slot = slot.saturating_add(1);
        }
    }

    /// Notes one reap call that collected `nr` completions.
    pub fn mark_complete(&mut self, nr: u64) {
        if let Some(slot) = self.iodepth_complete.get_mut(batch_bucket(nr)) {
            *slot = slot.saturating_add(1);
        }
    }

    /// Completed I/Os over all directions (fio's denominator for distributions).
    /// User and system CPU time as percentages of the job's run time (fio's `usr_cpu`,
    /// `sys_cpu`; 0 without a run time).
    pub fn cpu_percent(&self) -> (f64, f64) {
        let pct = |ns: u64| match self.job_runtime_ns {
            0 => 0.0,
            rt => ns as f64 * 100.0 / rt as f64,
        };
        (pct(self.usr_cpu_ns), pct(self.sys_cpu_ns))
    }

    pub fn total_rw_ios(&self) -> u64 {
        self.dirs
            .iter()
            .map(|d| d.total_ios)
            .fold(0, u64::saturating_add)
    }

    /// fio's latency buckets, derived from the completion-latency histograms of all
    /// directions. Each bin counts at its representative value, so a bucket boundary
    /// can be off by at most one bin width (≤ 1/64 of the value).
    pub fn latency_buckets(&self) -> LatencyBuckets {
        let mut buckets = LatencyBuckets::default();
        for hist in self.dirs.iter().filter_map(|d| d.clat.hist.as_ref()) {
            for (value, count) in hist.nonzero_bins() {
                buckets.add(value, count);
            }
        }
        buckets
    }

    /// An I/O failed with `errno`: `fatal` when it ended the job (fio's `td_verror`), else
    /// one the job went on after (`update_error_count`). `error` comes out as fio's
    /// `sum_thread_stats` makes it: the first fatal errno, or without one the first the job
    /// went on after.
    pub fn io_error(&mut self, errno: i32, fatal: bool) {
        if fatal {
            if !self.error_fatal {
                self.error = errno;
                self.error_fatal = true;
            }
            return;
        }
        self.total_err += 1;
        if self.first_error == 0 {
            self.first_error = errno;
        }
        if self.error == 0 {
            self.error = errno;
        }
    }

    /// Folds another job into this one for `group_reporting`. Identity fields (name,
    /// pid, options, extras) stay those of the first job, as in fio.
    pub fn merge(&mut self, other: &JobStats) {
        if self.error == 0 && other.error != 0 {
            self.error = other.error;
            self.error_text = other.error_text.clone();
        }
        self.continue_on_error |= other.continue_on_error;
        self.total_err = self.total_err.saturating_add(other.total_err);
        if self.first_error == 0 {
            self.first_error = other.first_error;
        }
        self.members = self.members.saturating_add(other.members);
        for (mine, theirs) in self.dirs.iter_mut().zip(other.dirs.iter()) {
            mine.merge(theirs);
        }
        self.sync.merge(&other.sync);
        self.merge_counters(other);
        // The members of a group share its window; fio takes the last member's.
        if other.steadystate.is_some() {
            self.steadystate = other.steadystate.clone();
        }
    }

    /// The additive counters of [`merge`](Self::merge).
    fn merge_counters(&mut self, other: &JobStats) {
        self.job_runtime_ns = self.job_runtime_ns.saturating_add(other.job_runtime_ns);
        self.nr_zone_resets = self.nr_zone_resets.saturating_add(other.nr_zone_resets);
        self.usr_cpu_ns = self.usr_cpu_ns.saturating_add(other.usr_cpu_ns);
        self.sys_cpu_ns = self.sys_cpu_ns.saturating_add(other.sys_cpu_ns);
        self.ctx_switches = self.ctx_switches.saturating_add(other.ctx_switches);
        self.majf = self.majf.saturating_add(other.majf);
        self.minf = self.minf.saturating_add(other.minf);
        add_arrays(&mut self.iodepth_level, &other.iodepth_level);
        add_arrays(&mut self.iodepth_submit, &other.iodepth_submit);
        add_arrays(&mut self.iodepth_complete, &other.iodepth_complete);
    }
}

fn add_arrays(dst: &mut [u64; 7], src: &[u64; 7]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = d.saturating_add(*s);
    }
}

#[cfg(test)]
mod tests;
