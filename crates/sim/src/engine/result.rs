//! What a run produced: per job, per lock, the driver's and the scheduler's figures, and the
//! end of a run that assembles them.

use super::*;

/// A finished job's figures.
#[derive(Clone, Debug)]
pub struct JobResult {
    pub name: String,
    pub kind: String,
    pub cpu: u16,
    pub stats: JobStats,
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    pub start: Nanos,
    pub end: Nanos,
    /// What the job issued, for fio's `write_iolog` (empty unless the job asked).
    pub iolog: Vec<mqblk_workload::iolog::IoLogEntry>,
    /// fio's per-job logs and the `--plot` series, when asked for.
    pub logs: Option<mqblk_workload::logs::JobLogs>,
}

impl JobResult {
    pub fn runtime(&self) -> Nanos {
        self.end.saturating_sub(self.start)
    }
    pub fn iops(&self) -> f64 {
        let t = self.runtime().0.max(1) as f64 / 1e9;
        self.ios as f64 / t
    }
    pub fn bw_mbs(&self) -> f64 {
        let t = self.runtime().0.max(1) as f64 / 1e9;
        self.bytes as f64 / 1e6 / t
    }
    /// Mean completion latency over reads and writes, in ns.
    pub fn mean_lat_ns(&self) -> f64 {
        let (mut sum, mut n) = (0.0, 0u64);
        for d in [Ddir::Read, Ddir::Write] {
            let s = &self.stats.dir(d).lat;
            sum += s.mean() * s.n as f64;
            n += s.n;
        }
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    }
    pub fn max_lat_ns(&self) -> u64 {
        [Ddir::Read, Ddir::Write]
            .iter()
            .map(|&d| self.stats.dir(d).lat.max)
            .max()
            .unwrap_or(0)
    }
}

/// A lock's figures for the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LockReport {
    pub name: String,
    pub acquisitions: u64,
    pub contended: u64,
    pub wait_ns: u64,
    pub held_ns: u64,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct SimResult {
    pub jobs: Vec<JobResult>,
    /// Virtual time at the end.
    pub end: Nanos,
    pub events: u64,
    /// Bios completed.
    pub completed: u64,
    /// Per CPU: virtual ns spent busy.
    pub cpu_busy: Vec<u64>,
    pub locks: Vec<LockReport>,
    pub driver: crate::driver::DriverStats,
    pub model_stats: Vec<(&'static str, u64)>,
    /// The queue's settings and counters at the end, its scheduler's typed statistics
    /// among them, as `mqblk bench` reports a real queue's.
    pub queue: mqblk_device::QueueReport,
    /// Per hardware queue.
    pub hctx: Vec<HctxFigures>,
}

/// One hardware queue's figures at the end of a run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct HctxFigures {
    /// Queue runs.
    pub runs: u64,
    /// Requests the driver accepted.
    pub issued: u64,
    /// Times a dispatch stopped on a busy driver, no budget or no tag: the request waits on
    /// the hardware queue's dispatch list (`hctx->dispatch`), out of the scheduler's hands.
    pub busy: u64,
    /// Times an armed run was pushed back by another queue's delayed re-run of all
    /// (`delay_run_rearms`, the kernel before 5.17).
    pub postponed: u64,
    /// Of those, the ones while the queue had work pending.
    pub postponed_pending: u64,
}

impl SimResult {
    pub fn total_iops(&self) -> f64 {
        self.completed as f64 / (self.end.0.max(1) as f64 / 1e9)
    }
    pub fn total_bw_mbs(&self) -> f64 {
        let bytes: u64 = self.jobs.iter().map(|j| j.bytes).sum();
        bytes as f64 / 1e6 / (self.end.0.max(1) as f64 / 1e9)
    }
}

impl Sim {
    pub(super) fn finish(self) -> Result<SimResult, SimError> {
        let q = self.queue.clone();
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q.teardown())) {
            return Err(self.invariant(format!("at teardown: {}", panic_text(&p))));
        }
        let completed = self.jobs.iter().map(|j| j.ios + j.errors).sum::<u64>();
        let names = |i: usize, nr_hw: usize, nr_ctx: usize| -> String {
            if i == 0 {
                "elevator".into()
            } else if i <= nr_hw {
                format!("hctx{}", i - 1)
            } else if i <= nr_hw + nr_ctx {
                format!("ctx{}", i - 1 - nr_hw)
            } else {
                format!("hw{}", i - 1 - nr_hw - nr_ctx)
            }
        };
        let locks = self
            .locks
            .iter()
            .enumerate()
            .filter(|(_, l)| l.acquisitions > 0)
            .map(|(i, l)| LockReport {
                name: names(i, self.nr_hw, self.nr_ctx),
                acquisitions: l.acquisitions,
                contended: l.contended,
                wait_ns: l.wait_ns,
                held_ns: l.held_ns,
            })
            .collect();
        let hctx = (0..self.nr_hw)
            .map(|h| {
                let s = self.queue.hctx(HctxIdx(h as u16)).stats.total();
                HctxFigures {
                    runs: s.run,
                    issued: s.issued,
                    busy: s.busy,
                    postponed: s.postponed,
                    postponed_pending: s.postponed_pending,
                }
            })
            .collect();
        let end = self.jobs.iter().map(|j| j.end).max().unwrap_or(self.now);
        let steady = self.steady;
        let jobs = self
            .jobs
            .into_iter()
            .enumerate()
            .map(|(i, mut j): (usize, JobRun)| {
                j.stats.steadystate = steady.as_ref().and_then(|m| m.report(i));
                if let Some(logs) = &mut j.def.logs {
                    logs.finish(j.end.saturating_sub(j.start));
                }
                // Statistics start after the ramp (or where the job's source started them
                // over), as the threaded runner's do.
                j.start = (j.start + j.def.ramp.0)
                    .max(j.restarted_at.unwrap_or(0))
                    .min(j.end);
                if let Some(d) = j.def.source.depth() {
                    j.stats.latency_depth = d;
                }
                j.stats.nr_zone_resets = j.def.source.zone_resets();
                let rt = j.end.saturating_sub(j.start);
                j.stats.job_runtime_ns = rt;
                for d in 0..2 {
                    if j.stats.dirs[d].total_ios > 0 {
                        j.stats.dirs[d].runtime_ns = rt;
                    }
                }
                // The errno is the stats' own (`JobStats::io_error`); the text says what.
                if let Some(e) = j.error_text.take() {
                    j.stats.error_text = e;
                } else if j.errors > 0 {
                    j.stats.error_text = format!("{} I/O errors", j.errors);
                }
                let iolog = j.def.source.take_iolog();
                let logs = j.def.logs.take();
                JobResult {
                    iolog,
                    logs,
                    name: j.def.name,
                    kind: j.def.kind,
                    cpu: j.def.cpu,
                    stats: j.stats,
                    ios: j.ios,
                    bytes: j.bytes,
                    errors: j.errors,
                    start: Nanos(j.start),
                    end: Nanos(j.end),
                }
            })
            .collect();
        Ok(SimResult {
            jobs,
            end: Nanos(end),
            events: self.events,
            completed,
            cpu_busy: self.cpus.iter().map(|c| c.busy_ns).collect(),
            locks,
            driver: self.driver.stats(),
            model_stats: self.driver.model_stats(),
            queue: mqblk_device::QueueReport::of(&self.queue),
            hctx,
        })
    }
}
