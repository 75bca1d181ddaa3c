//! [`QueueReport`]: what a request queue did and how it was set, taken at the end of a run,
//! in one typed shape that `mqblk bench` and `mqblk sim` both report (the `mqblk_queue`
//! object of their JSON, the `hctx`, `sched` and `device` lines of their text).

use mqblk_core::{HctxIdx, RequestQueue};
use mqblk_sched::SchedStats;

/// One hardware queue's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct HctxCounts {
    /// Its index.
    pub hctx: usize,
    /// Requests inserted into it (or its scheduler).
    pub queued: u64,
    /// Requests issued to the driver.
    pub dispatched: u64,
    /// Of those, issued directly, bypassing the scheduler.
    pub direct: u64,
    pub completed: u64,
    pub requeued: u64,
    /// Queue runs.
    pub runs: u64,
    /// Times the driver answered busy.
    pub busy: u64,
}

/// A queue's settings and counters at the end of a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueReport {
    /// `queue/scheduler`: the one attached at the end (`none` without one).
    pub ioscheduler: String,
    /// `queue/rotational`, as the schedulers saw it (0 or 1).
    pub rotational: u8,
    pub nr_hw_queues: usize,
    /// `queue/nr_requests`.
    pub nr_requests: u32,
    /// `queue/max_sectors_kb`.
    pub max_sectors_kb: u32,
    /// `queue/write_cache`: `write back` or `write through`.
    pub write_cache: &'static str,
    /// `queue/fua` (0 or 1).
    pub fua: u8,
    /// Flush requests issued to the driver.
    pub flushes: u64,
    pub hctx: Vec<HctxCounts>,
    /// The scheduler's own statistics, tagged with its name.
    pub sched: SchedStats,
}

impl QueueReport {
    /// The report of `q` as it stands.
    pub fn of(q: &RequestQueue) -> QueueReport {
        let hctx = (0..q.nr_hw_queues())
            .map(|h| {
                let s = q.hctx(HctxIdx(h as u16)).stats.total();
                HctxCounts {
                    hctx: h,
                    queued: s.queued,
                    dispatched: s.issued,
                    direct: s.direct,
                    completed: s.completed,
                    requeued: s.requeued,
                    runs: s.run,
                    busy: s.busy,
                }
            })
            .collect();
        let lim = q.limits();
        let elv = q.elevator();
        QueueReport {
            ioscheduler: elv.as_ref().map_or("none", |e| e.name()).to_string(),
            rotational: u8::from(q.driver().rotational()),
            nr_hw_queues: q.nr_hw_queues(),
            nr_requests: q.nr_requests(),
            max_sectors_kb: lim.max_sectors / 2,
            write_cache: if lim.write_cache {
                "write back"
            } else {
                "write through"
            },
            fua: u8::from(lim.fua),
            flushes: q.flushes_issued(),
            hctx,
            sched: SchedStats::of(elv.as_deref()),
        }
    }

    /// The report as text lines: one per hardware queue, one per statistic of the
    /// scheduler, one with the device's settings.
    pub fn text_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .hctx
            .iter()
            .map(|s| {
                format!(
                    "hctx{}  : queued={}, dispatched={}, direct={}, completed={}, requeued={}, runs={}, busy={}",
                    s.hctx, s.queued, s.dispatched, s.direct, s.completed, s.requeued, s.runs, s.busy
                )
            })
            .collect();
        for (k, v) in self.sched.pairs() {
            lines.push(format!("sched  : {} {k}={v}", self.ioscheduler));
        }
        lines.push(format!(
            "device : rotational={}, hw_queues={}, nr_requests={}, max_sectors_kb={}, write_cache={}, fua={}, flushes={}",
            self.rotational,
            self.nr_hw_queues,
            self.nr_requests,
            self.max_sectors_kb,
            self.write_cache,
            self.fua,
            self.flushes
        ));
        lines
    }
}
