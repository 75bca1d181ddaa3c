//! fio's latency-target search (`latency_target`, `latency_window`, `latency_percentile`,
//! `latency_run`) and its latency limit (`max_latency`), as plain state driven by the job
//! driver.
//!
//! As fio 3.33's `io_u.c` does it (`lat_target_init`, `lat_target_check`,
//! `lat_target_success`, `__lat_target_failed`): the job starts at depth 1, with `iodepth`
//! as the ceiling. Every `latency_window` it counts the I/Os that completed in the window
//! and those whose total latency exceeded the target: if the share within the target is at
//! least `latency_percentile`, the depth goes up (doubling until a window first fails,
//! then halfway to the lowest depth that failed), else down (halfway to the highest depth
//! that passed), after the I/O in flight completes. With `latency_percentile=100` a single
//! I/O over the target ramps down at once, and one at depth 1 ends the job with an error.
//! Once the depth stops moving, the statistics are reset and one more window runs at it,
//! then the job ends (`latency_run=1` keeps adjusting instead). The depth is fio's
//! `latency_depth` in the report.

/// The search's state; see the module documentation.
#[derive(Clone, Debug)]
pub struct LatTarget {
    target_ns: u64,
    window_ns: u64,
    percentile: f64,
    run: bool,
    ceiling: u32,
    qd: u32,
    low: u32,
    high: u32,
    window_start: u64,
    ios_at_start: u64,
    failed: u64,
    end_run: bool,
}

/// What a step of the search asks of the job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Let what is in flight complete before issuing at the new depth.
    pub quiesce: bool,
    /// Start the statistics over (the final window at the depth found).
    pub reset_stats: bool,
    /// The job is done.
    pub done: bool,
    /// The job fails with this error (fio's `ETIMEDOUT`).
    pub error: Option<String>,
}

impl LatTarget {
    /// A search under `target_ns` with windows of `window_ns`, up to `iodepth`.
    pub fn new(
        target_ns: u64,
        window_ns: u64,
        percentile: f64,
        run: bool,
        iodepth: u32,
    ) -> LatTarget {
        LatTarget {
            target_ns,
            window_ns,
            percentile,
            run,
            ceiling: iodepth.max(1),
            qd: 1,
            low: 1,
            high: iodepth.max(1),
            window_start: 0,
            ios_at_start: 0,
            failed: 0,
            end_run: false,
        }
    }

    /// The depth the job may have in flight now.
    pub fn depth(&self) -> u32 {
        self.qd
    }

    fn new_cycle(&mut self, now: u64, ios: u64) {
        self.window_start = now;
        self.ios_at_start = ios;
        self.failed = 0;
    }

    /// An I/O completed at `now` after `lat_ns` in all (`ios`: completed so far, this one
    /// included).
    pub fn completed(&mut self, now: u64, lat_ns: u64, ios: u64) -> Effects {
        if lat_ns <= self.target_ns {
            return Effects::default();
        }
        if self.percentile < 100.0 {
            self.failed += 1;
            return Effects::default();
        }
        if self.qd == 1 {
            return Effects {
                error: Some(format!(
                    "latency of {lat_ns} ns exceeds latency_target {} ns at depth 1",
                    self.target_ns
                )),
                ..Effects::default()
            };
        }
        self.ramp_down(now, ios)
    }

    /// `__lat_target_failed`: halfway down to the highest depth that passed.
    fn ramp_down(&mut self, now: u64, ios: u64) -> Effects {
        if self.qd == 1 {
            return Effects::default();
        }
        self.high = self.qd;
        if self.qd == self.low {
            self.low -= 1;
        }
        self.qd = (self.qd + self.low) / 2;
        self.new_cycle(now, ios);
        Effects {
            quiesce: true,
            ..Effects::default()
        }
    }

    /// `lat_target_check`, before the job issues at `now`: a window that has run its
    /// length decides the next depth.
    pub fn check(&mut self, now: u64, ios: u64) -> Effects {
        if now.saturating_sub(self.window_start) < self.window_ns {
            return Effects::default();
        }
        let done = ios - self.ios_at_start;
        if done == 0 {
            return Effects::default();
        }
        let within = (done - self.failed.min(done)) as f64 * 100.0 / done as f64;
        if within < self.percentile {
            return self.ramp_down(now, ios);
        }
        // `lat_target_success`: double until a window fails, then halfway to the lowest
        // depth that failed.
        let qd = self.qd;
        self.low = qd;
        self.qd = if self.high != self.ceiling {
            (qd + self.high) / 2
        } else {
            qd.saturating_mul(2)
        }
        .min(self.ceiling);
        let mut fx = Effects::default();
        if !self.run && self.qd == qd {
            if self.end_run {
                fx.done = true;
            } else {
                fx.quiesce = true;
                fx.reset_stats = true;
                self.end_run = true;
            }
        }
        self.new_cycle(now, ios);
        fx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_then_bisects_then_runs_a_final_window() {
        // Depths up to 8 pass a 1 ms target; 16 fails (every I/O late).
        let mut t = LatTarget::new(1_000_000, 100, 100.0, false, 32);
        let (mut now, mut ios, mut seen) = (0, 0, Vec::new());
        for _ in 0..40 {
            seen.push(t.depth());
            let late = t.depth() > 8;
            ios += 1;
            now += 100;
            let fx = t.completed(now, if late { 2_000_000 } else { 1000 }, ios);
            if fx.quiesce {
                continue;
            }
            let fx = t.check(now, ios);
            if fx.done {
                break;
            }
        }
        seen.dedup();
        // 1, 2, 4, 8, 16 (fails), halfway back to 12 (fails), 10, 9, then 8 holds.
        assert_eq!(seen[..5], [1, 2, 4, 8, 16]);
        assert_eq!(*seen.last().unwrap(), 8, "{seen:?}");
    }

    #[test]
    fn a_late_io_at_depth_one_is_an_error_and_a_percentile_tolerates_some() {
        let mut t = LatTarget::new(1000, 10_000, 100.0, false, 4);
        assert!(t.completed(10, 5000, 1).error.is_some());
        let mut t = LatTarget::new(1000, 100, 90.0, false, 4);
        for i in 1..=10 {
            let lat = if i == 1 { 5000 } else { 10 };
            assert!(t.completed(i * 10, lat, i).error.is_none());
        }
        t.check(100, 10);
        assert_eq!(t.depth(), 2, "9 of 10 within: 90% passes");
    }
}
