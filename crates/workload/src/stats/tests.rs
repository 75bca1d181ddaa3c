//! Tests of the histogram and statistics.

use proptest::prelude::*;

use super::*;

/// fio's error accounting: errors a job went on after count in `total_err` (the first
/// kept in `first_error`); the error that ended it is the job's `error` even after those,
/// the first such only (the I/O in flight with it fails too), and a restart of the
/// measurements keeps them all.
#[test]
fn the_error_that_ended_a_job_is_its_error_and_the_others_are_counted() {
    let mut j = JobStats::new("j");
    j.io_error(5, false);
    j.io_error(5, false);
    assert_eq!((j.error, j.total_err, j.first_error), (5, 2, 5));
    j.io_error(28, true);
    j.io_error(110, true);
    assert_eq!((j.error, j.total_err, j.first_error), (28, 2, 5));
    j.restart();
    assert_eq!((j.error, j.total_err, j.first_error), (28, 2, 5));
    let mut only_fatal = JobStats::new("k");
    only_fatal.io_error(5, true);
    assert_eq!((only_fatal.error, only_fatal.total_err), (5, 0));
}

#[test]
fn histogram_has_fio_geometry() {
    assert_eq!(PLAT_NR, 1856);
    assert_eq!(plat_val_to_idx(u64::MAX), PLAT_NR - 1);
    assert_eq!(plat_val_to_idx(1 << 40), PLAT_NR - 1);
    assert_eq!(plat_idx_to_val(PLAT_NR + 5), plat_idx_to_val(PLAT_NR - 1));
}

#[test]
fn exact_below_128() {
    for v in 0..128u64 {
        let idx = plat_val_to_idx(v);
        assert_eq!(idx, v as usize);
        assert_eq!(plat_idx_to_val(idx), v);
    }
    assert_eq!(plat_val_to_idx(128), 128);
    assert_eq!(plat_val_to_idx(129), 128);
    assert_eq!(plat_idx_to_val(128), 129);
}

#[test]
fn bins_are_monotonic() {
    let mut last = 0;
    for v in (0..1_000_000u64).step_by(7) {
        let idx = plat_val_to_idx(v);
        assert!(idx >= last);
        last = idx;
    }
}

#[test]
fn percentiles_of_known_distribution() {
    let mut h = LatHist::new();
    for v in 1..=100 {
        h.record(v);
    }
    assert_eq!(h.samples(), 100);
    assert_eq!(h.percentile(1.0), Some(1));
    assert_eq!(h.percentile(50.0), Some(50));
    assert_eq!(h.percentile(99.0), Some(99));
    assert_eq!(h.percentile(100.0), Some(100));
    assert_eq!(LatHist::new().percentile(50.0), None);

    let mut wide = LatHist::new();
    for v in 1..=100_000u64 {
        wide.record(v * 10);
    }
    for p in [10.0, 50.0, 90.0, 99.0, 99.9] {
        let exact = p / 100.0 * 1_000_000.0;
        let got = wide.percentile(p).expect("samples") as f64;
        assert!(
            (got - exact).abs() / exact <= 1.0 / 64.0,
            "p{p}: {got} vs {exact}"
        );
    }
}

#[test]
fn histogram_merge_equals_combined() {
    let (mut a, mut b, mut all) = (LatHist::new(), LatHist::new(), LatHist::new());
    for v in 0..5_000u64 {
        let ns = v * v;
        if v % 2 == 0 {
            a.record(ns);
        } else {
            b.record(ns);
        }
        all.record(ns);
    }
    a.merge(&b);
    assert_eq!(a, all);
    assert_eq!(a.nonzero_bins().map(|(_, c)| c).sum::<u64>(), 5_000);
}

#[test]
fn lat_stat_mean_stddev_and_merge() {
    let values = [2u64, 4, 4, 4, 5, 5, 7, 9];
    let mut all = LatStat::with_hist();
    let (mut a, mut b) = (LatStat::with_hist(), LatStat::new());
    for (i, &v) in values.iter().enumerate() {
        all.record(v);
        if i < 3 {
            a.record(v);
        } else {
            b.record(v);
        }
    }
    assert_eq!((all.min, all.max, all.n), (2, 9, 8));
    assert_eq!(all.mean(), 5.0);
    assert!((all.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    a.merge(&b);
    assert_eq!(
        (a.min, a.max, a.n, a.sum, a.sum_sq),
        (all.min, all.max, all.n, all.sum, all.sum_sq)
    );

    let mut constant = LatStat::new();
    for _ in 0..1000 {
        constant.record(123_456_789);
    }
    assert_eq!(constant.stddev(), 0.0);
    assert_eq!(LatStat::new().stddev(), 0.0);
    assert_eq!(LatStat::new().mean(), 0.0);
}

#[test]
fn lat_stat_merge_into_empty_takes_min() {
    let mut empty = LatStat::new();
    let mut other = LatStat::new();
    other.record(50);
    other.record(70);
    empty.merge(&other);
    assert_eq!((empty.min, empty.max), (50, 70));
}

#[test]
fn samples_and_rates() {
    let mut d = DirStats::new();
    d.push_sample(4096 * 1000, 1000, 1_000_000_000);
    d.push_sample(4096 * 500, 500, 500_000_000);
    d.push_sample(1, 1, 0);
    assert_eq!((d.bw.n, d.bw.min, d.bw.max), (2, 4000, 4000));
    assert_eq!((d.iops.min, d.iops.max, d.iops.mean), (1000, 1000, 1000.0));
    assert_eq!(d.iops.stddev(), 0.0);

    for _ in 0..1000 {
        d.record_io(4096, 100, 900);
    }
    d.runtime_ns = 1_000_000_000;
    assert_eq!(d.bw_bytes(), 4_096_000);
    assert_eq!(d.iops_value(), 1000.0);
    assert_eq!(d.lat.mean(), 1000.0);
    d.runtime_ns = 10;
    assert_eq!(d.runtime_ms(), 1);
}

#[test]
fn sample_stat_merge_sums_like_fio() {
    let (mut a, mut b) = (SampleStat::default(), SampleStat::default());
    for v in [10, 20] {
        a.record(v);
    }
    for v in [100, 300] {
        b.record(v);
    }
    a.merge_sum(&b);
    assert_eq!((a.min, a.max, a.n), (110, 320, 4));
    assert_eq!(a.mean, 215.0);
}

#[test]
fn latency_buckets_follow_fio_ranges() {
    let mut job = JobStats::new("j");
    for ns in [1, 3, 500, 999, 1_500, 900_000, 3_000_000, 5_000_000_000] {
        job.dir_mut(Ddir::Read).clat.record(ns);
    }
    let b = job.latency_buckets();
    assert_eq!(b.ns, [1, 1, 0, 0, 0, 0, 0, 0, 1, 1]);
    assert_eq!(b.us, [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(b.ms, [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
}

#[test]
fn depth_marks_and_job_merge() {
    let mut a = JobStats::new("a");
    a.mark_depth(1, 5);
    a.mark_depth(3, 1);
    a.mark_depth(64, 2);
    a.mark_submit(0);
    a.mark_submit(4);
    a.mark_complete(100);
    assert_eq!(a.iodepth_level, [5, 1, 0, 0, 0, 0, 2]);
    assert_eq!(a.iodepth_submit, [1, 1, 0, 0, 0, 0, 0]);
    assert_eq!(a.iodepth_complete, [0, 0, 0, 0, 0, 0, 1]);

    let mut b = JobStats::new("b");
    b.error = 5;
    b.dir_mut(Ddir::Write).record_io(512, 1, 2);
    b.dir_mut(Ddir::Write).runtime_ns = 7;
    b.usr_cpu_ns = 3;
    a.merge(&b);
    assert_eq!((a.name.as_str(), a.members, a.error), ("a", 2, 5));
    assert_eq!(a.dir(Ddir::Write).io_bytes, 512);
    assert_eq!(a.dir(Ddir::Write).runtime_ns, 7);
    assert_eq!(a.total_rw_ios(), 1);
    assert_eq!(a.usr_cpu_ns, 3);
}

proptest! {
    #[test]
    fn relative_error_at_most_one_64th(v in 128u64..(1u64 << 34)) {
        let rep = plat_idx_to_val(plat_val_to_idx(v));
        let err = rep.abs_diff(v) as f64 / v as f64;
        prop_assert!(err <= 1.0 / 64.0, "v={} rep={} err={}", v, rep, err);
    }

    #[test]
    fn record_never_panics(v in any::<u64>()) {
        let mut h = LatHist::new();
        h.record(v);
        h.record_n(v, u64::MAX);
        prop_assert!(h.percentile(99.0).is_some());
        let mut s = LatStat::with_hist();
        s.record(v);
        s.record(v);
        prop_assert!(s.stddev().is_finite());
    }
}

/// fio's samples: one per window that had completions, at the rate over the window; a
/// window with none gives none, and a look after several gives one for the first.
#[test]
fn rate_samples_are_one_per_window_with_io() {
    let mut s = crate::RateSampler::new(500, 250, 0);
    let mut j = JobStats::new("j");
    let io = |s: &mut crate::RateSampler, j: &mut JobStats, at_ms: u64| {
        s.tick(at_ms * 1_000_000, j);
        j.dirs[0].record_io(4096, 0, 1000);
    };
    // 100 I/Os in the first 500 ms, then nothing until 1200 ms.
    for k in 0..100 {
        io(&mut s, &mut j, k * 5);
    }
    io(&mut s, &mut j, 1200);
    let r = &j.dirs[0];
    assert_eq!(r.bw.n, 1, "one bandwidth sample: the first window's");
    assert_eq!(r.bw.min, 100 * 4096 * 2 / 1024);
    // 250 ms windows: 50 I/Os in each of the first two, then none.
    assert_eq!((r.iops.n, r.iops.min, r.iops.max), (2, 200, 200));
}
