//! The CPU cost model: what each core, elevator and driver step costs a virtual CPU, and the
//! locks those steps take, so that contention between CPUs appears in virtual time.
//!
//! Every operation a virtual CPU performs (submitting a bio, handling an interrupt, running
//! the timer) is executed for real on the shared core code, which reports its steps through
//! the tracer hook ([`crate::driver::Step`]). The engine then walks those steps in order and
//! charges each from this table. A step that needs a lock starts when the lock is free; if
//! another CPU held it last, the lock's cache line has to move (`line_ns`, or with a machine's
//! topology what a line costs between those two CPUs, [`crate::topology`]), and each CPU
//! still waiting for it makes the hand-off slower (`waiter_ns`), which is how a spinlock
//! collapses under contention. Lock hand-off is first come, first served in order of the
//! operations' start times.
//!
//! The defaults are per-request figures measured on this project's threaded runtime
//! (`mqblk bench --preset sched-cost` and `cargo bench -p mqblk-core`, see docs/bench.md):
//! `none` costs ~190 ns per request from submit to completion on the null driver, mq-deadline
//! ~200 ns more, kyber ~110 ns more. The application-side costs are fio's (`app_*`), and the
//! flat cache-line figure is a typical one (`--topology` puts a measured machine's in its
//! place). Everything can be overridden with `--cost name=value`.

use mqblk_core::{ElvCost, Nanos, TraceAction};

/// Whose CPU costs a run charges for the schedulers' hooks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CostProfile {
    /// mqblk's own hooks, as measured on the threaded runtime (`--preset=sched-cost`): to
    /// predict mqblk itself.
    #[default]
    Mqblk,
    /// The kernel's: each scheduler's measured CPU cost per request over `none`
    /// ([`KERNEL_OVER_NONE_NS`]), spread over its hooks in the proportions of mqblk's (which
    /// follow the kernel's functions), under the same locks. To predict the kernel.
    Kernel,
}

/// A cost profile or a `--cost` override refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    #[error("--cost-profile={0}: expected kernel or mqblk")]
    UnknownProfile(String),
    #[error("--cost {0}: expected name=value")]
    NotAssignment(String),
    #[error("--cost {assignment}: '{value}' is not a whole number of ns")]
    NotNanoseconds { assignment: String, value: String },
    #[error("--cost {assignment}: unknown cost '{name}' (known: {known})", known = CostTable::NAMES.join(", "))]
    UnknownCost { assignment: String, name: String },
    #[error("--kernel-costs {path}: {message}")]
    KernelCosts { path: String, message: String },
}

impl CostProfile {
    pub const NAMES: &'static [&'static str] = &["kernel", "mqblk"];

    pub fn parse(s: &str) -> Result<CostProfile, CostError> {
        match s {
            "kernel" => Ok(CostProfile::Kernel),
            "mqblk" => Ok(CostProfile::Mqblk),
            _ => Err(CostError::UnknownProfile(s.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CostProfile::Kernel => "kernel",
            CostProfile::Mqblk => "mqblk",
        }
    }

    /// The hook costs of scheduler `name` under this profile; `own` is mqblk's, `figures`
    /// the kernel's (which the kernel profile charges).
    pub fn elv_cost(self, name: &str, own: ElvCost, figures: &KernelCosts) -> ElvCost {
        let Some(kernel) = (self == CostProfile::Kernel)
            .then(|| figures.over_none_ns(name))
            .flatten()
        else {
            return own;
        };
        // The kernel's own lock structure where it differs from mqblk's: mq-deadline's
        // completion hook (`dd_finish_request`) only increments an atomic counter, outside
        // `dd->lock`; mqblk's takes the lock to keep its own bookkeeping.
        let lockless_complete = KERNEL_LOCKLESS_COMPLETE.contains(&name);
        // A request passes insert, dispatch and completion once each; a bio merge or an
        // empty dispatch probe replaces part of that path and scales alike. The hooks that
        // hold the lock are scaled to the time the kernel spends in its lock-holding
        // functions (`KERNEL_LOCKED_NS`); the rest of the measured cost is the path outside
        // any scheduler lock (`path_ns`). Without a lock measurement all of it goes to the
        // hooks.
        let locked_own = own.insert_ns
            + own.dispatch_ns
            + if lockless_complete {
                0
            } else {
                own.complete_ns
            };
        let per_request = own.insert_ns + own.dispatch_ns + own.complete_ns;
        if locked_own == 0 || per_request == 0 {
            return own;
        }
        let mut k = match figures.locked_ns(name) {
            Some(locked) => {
                let locked = locked.min(kernel);
                let mut k = scale_elv_cost(own, |ns| ns * locked / locked_own);
                let hooks = k.insert_ns + k.dispatch_ns + k.complete_ns;
                let path = kernel.saturating_sub(hooks);
                // Where the submitting task's share was measured, the path's part beyond
                // the submit-side hooks goes with the submission, the rest with the
                // completion, on the CPU that completes (`path_complete_ns`).
                k.path_ns = match figures.job_ns(name) {
                    Some(job) => job.saturating_sub(k.insert_ns + k.dispatch_ns).min(path),
                    None => path,
                };
                k.path_complete_ns = path - k.path_ns;
                k
            }
            None => scale_elv_cost(own, |ns| ns * kernel / per_request),
        };
        if lockless_complete {
            k.complete_lock = mqblk_core::LockScope::None;
        }
        k
    }
}

/// Schedulers whose completion hook the kernel runs without the scheduler's lock.
pub const KERNEL_LOCKLESS_COMPLETE: &[&str] = &["mq-deadline", "kyber"];

/// A scheduler's hook costs with every time passed through `f` (the lock scopes kept).
pub fn scale_elv_cost(c: ElvCost, f: impl Fn(u64) -> u64) -> ElvCost {
    ElvCost {
        insert_ns: f(c.insert_ns),
        dispatch_ns: f(c.dispatch_ns),
        probe_ns: f(c.probe_ns),
        complete_ns: f(c.complete_ns),
        merge_ns: f(c.merge_ns),
        path_ns: f(c.path_ns),
        path_complete_ns: f(c.path_complete_ns),
        ..c
    }
}

/// The kernel's CPU time per request over `none`, by scheduler, in ns: measured on this
/// project's machine (Linux 6.18, 2 vCPUs) with `bash scripts/kernel-cost.sh`: fio,
/// io_uring, 4k random reads at QD32, one job, on a loop device over tmpfs, the device's
/// scheduler switched between runs in rotated order; CPU time from /proc/stat over all CPUs
/// less the background, per I/O; the median over repeats of each repeat's difference from
/// `none`. Five repeats of 5 s on 2026-11-26: `none` 5.7-6.6 us per I/O, mq-deadline
/// 7.4-8.5, kyber 7.7-8.8, bfq 9.5-12.1 (docs/sim.md, "Cost profiles"). The difference
/// is the whole path's, not only the hooks': with a scheduler the kernel inserts and then
/// runs the queue where `none` issues directly. It is charged to the hooks, under the locks
/// the kernel's hooks take ([`KERNEL_LOCKLESS_COMPLETE`]), which makes the kernel profile's
/// lock contention an upper bound.
pub const KERNEL_OVER_NONE_NS: &[(&str, u64)] =
    &[("mq-deadline", 1806), ("kyber", 2218), ("bfq", 3890)];

/// Of that, the kernel's CPU time per request inside the functions that hold the scheduler's
/// lock (mq-deadline: `dd_insert_requests`, `dd_dispatch_request`, `dd_bio_merge`; kyber:
/// `kyber_insert_requests`, `kyber_dispatch_request`, `kyber_bio_merge`; BFQ: those three
/// and `bfq_finish_requeue_request`), inclusive of what they call: `scripts/kernel-cost.sh`
/// under `perf record` (all CPUs, cpu-clock at 4999 Hz, call graphs), the same fio job, the
/// mean of two runs on 2026-11-26 (5 s: 635, 537, 2751 ns; 3 s: 639, 394, 2686 ns).
/// Sampling slows every function alike, so these are upper bounds. The rest of
/// [`KERNEL_OVER_NONE_NS`] is charged outside any scheduler lock (`ElvCost::path_ns`).
pub const KERNEL_LOCKED_NS: &[(&str, u64)] = &[("mq-deadline", 637), ("kyber", 466), ("bfq", 2719)];

/// The kernel's CPU costs of its schedulers, per request, that the kernel profile charges:
/// [`KERNEL_OVER_NONE_NS`] and [`KERNEL_LOCKED_NS`] built in, or what `bash
/// scripts/kernel-cost.sh --json` measured on the machine a run is to predict
/// (`--kernel-costs=FILE`, [`KernelCosts::read`]). The figures follow the machine, not the
/// code: on this project's machine mq-deadline's and Kyber's about halved between 2026-11-26
/// and 2026-12-01, and runs minutes apart differ (docs/sim.md, "Cost profiles").
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelCosts {
    /// Over `none`, by scheduler, ns per request.
    pub over_none_ns: Vec<(String, u64)>,
    /// Of that, inside the functions that hold the scheduler's lock, ns per request.
    pub locked_ns: Vec<(String, u64)>,
    /// Of that, in the submitting task (fio's job's own CPU time over `none`'s), ns per
    /// request; the rest ran elsewhere (the completion softirq, a loop's worker).
    pub job_ns: Vec<(String, u64)>,
    /// The files the figures were read from; `None` for the built-in ones.
    pub source: Option<String>,
}

impl Default for KernelCosts {
    fn default() -> KernelCosts {
        let own = |t: &[(&str, u64)]| t.iter().map(|&(n, v)| (n.to_string(), v)).collect();
        KernelCosts {
            over_none_ns: own(KERNEL_OVER_NONE_NS),
            locked_ns: own(KERNEL_LOCKED_NS),
            job_ns: Vec::new(),
            source: None,
        }
    }
}

impl KernelCosts {
    fn of(t: &[(String, u64)], name: &str) -> Option<u64> {
        t.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// Scheduler `name`'s CPU time per request over `none`, if measured.
    pub fn over_none_ns(&self, name: &str) -> Option<u64> {
        KernelCosts::of(&self.over_none_ns, name)
    }

    /// Of that, the part under the scheduler's lock, if measured.
    pub fn locked_ns(&self, name: &str) -> Option<u64> {
        KernelCosts::of(&self.locked_ns, name)
    }

    /// Of that, the part in the submitting task, if measured.
    pub fn job_ns(&self, name: &str) -> Option<u64> {
        KernelCosts::of(&self.job_ns, name)
    }

    /// The figures of one or more runs of `scripts/kernel-cost.sh --json` (each a file):
    /// for each scheduler but `none`, the median over the files of its `over_none_ns` and,
    /// where every file has it (perf was there), of its `locked_ns_per_io`; likewise of its
    /// `job_over_none_ns` (files from before the script measured it lack it). Negative
    /// differences count as 0; a scheduler one file has and another lacks is an error, and
    /// one no file has keeps its built-in figures.
    pub fn read(paths: &[std::path::PathBuf]) -> Result<KernelCosts, CostError> {
        // Each file's name and, for each scheduler, its time over `none` and locked time.
        type Run = (String, Vec<(String, f64, Option<f64>, Option<f64>)>);
        let mut runs: Vec<Run> = Vec::new();
        for path in paths {
            let shown = path.display().to_string();
            let fail = |message: String| CostError::KernelCosts {
                path: shown.clone(),
                message,
            };
            let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                fail(format!(
                    "not the JSON of scripts/kernel-cost.sh --json: {e}"
                ))
            })?;
            let scheds = v["schedulers"]
                .as_object()
                .ok_or_else(|| fail("no \"schedulers\" object".to_string()))?;
            let mut figures = Vec::new();
            for (name, f) in scheds.iter().filter(|(n, _)| n.as_str() != "none") {
                let over = f["over_none_ns"].as_f64().ok_or_else(|| {
                    fail(format!("{name}: no over_none_ns (a run without `none`?)"))
                })?;
                figures.push((
                    name.clone(),
                    over,
                    f["locked_ns_per_io"].as_f64(),
                    f["job_over_none_ns"].as_f64(),
                ));
            }
            if figures.is_empty() {
                return Err(fail("no scheduler but none was measured".to_string()));
            }
            runs.push((shown, figures));
        }
        let Some((first, names)) = runs.first() else {
            return Ok(KernelCosts::default());
        };
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let m = if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            };
            m.max(0.0).round() as u64
        };
        let mut costs = KernelCosts {
            over_none_ns: Vec::new(),
            locked_ns: Vec::new(),
            job_ns: Vec::new(),
            source: Some(
                runs.iter()
                    .map(|(p, _)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        };
        for (name, ..) in names {
            let mut over = Vec::new();
            let mut locked = Vec::new();
            let mut job = Vec::new();
            for (path, figures) in &runs {
                let (_, o, l, j) = figures.iter().find(|f| &f.0 == name).ok_or_else(|| {
                    CostError::KernelCosts {
                        path: path.clone(),
                        message: format!("{name} is not measured here, as it is in {first}"),
                    }
                })?;
                over.push(*o);
                locked.extend(*l);
                job.extend(*j);
            }
            costs.over_none_ns.push((name.clone(), median(over)));
            if locked.len() == runs.len() {
                costs.locked_ns.push((name.clone(), median(locked)));
            }
            if job.len() == runs.len() {
                costs.job_ns.push((name.clone(), median(job)));
            }
        }
        let builtin = KernelCosts::default();
        for (name, v) in builtin.over_none_ns {
            if costs.over_none_ns(&name).is_none() {
                if let Some(locked) = KernelCosts::of(&builtin.locked_ns, &name) {
                    costs.locked_ns.push((name.clone(), locked));
                }
                costs.over_none_ns.push((name, v));
            }
        }
        Ok(costs)
    }
}

/// How long a kblockd work takes from being queued to starting (`workqueue_queue_work` to
/// `workqueue_execute_start` of `blk_mq_run_work_fn`), as quantiles (fraction, us): measured
/// on this project's machine on 2026-11-26 (Linux 6.18, HZ=250) with tracefs, the workqueue
/// events filtered to `workqueue == "kblockd"`, while fio ran 2 jobs of 4 KiB random
/// reads and writes at QD8 (io_uring, direct) on a loop device under BFQ for 5 s: 192,609
/// works, median 3 us, 90% 6 us, 99% 20 us (the trace's clock has 1 us steps; the longest,
/// 1 ms, is left out above the 99.9th percentile).
pub const KBLOCKD_START_US: &[(f64, f64)] = &[
    (0.0, 1.0),
    (0.25, 2.0),
    (0.5, 3.0),
    (0.75, 4.0),
    (0.9, 6.0),
    (0.99, 20.0),
    (0.999, 36.0),
    (1.0, 36.0),
];

/// A kblockd work's start latency for a uniform draw `u` in [0, 1) ([`KBLOCKD_START_US`],
/// linear between its quantiles).
pub fn kblockd_start_ns(u: f64) -> u64 {
    let q = KBLOCKD_START_US;
    let i = q
        .iter()
        .position(|&(p, _)| p > u)
        .unwrap_or(q.len() - 1)
        .max(1);
    let ((p0, v0), (p1, v1)) = (q[i - 1], q[i]);
    let f = if p1 > p0 { (u - p0) / (p1 - p0) } else { 0.0 };
    ((v0 + f.clamp(0.0, 1.0) * (v1 - v0)) * 1000.0) as u64
}

/// Per-step costs in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct CostTable {
    /// `Q`: bio setup, plug and merge checks.
    pub bio_ns: u64,
    /// `M`/`F`: a successful bio merge.
    pub merge_ns: u64,
    /// `G`: request allocation (tag get).
    pub getrq_ns: u64,
    /// `I` without a scheduler: the software queue insert.
    pub insert_ns: u64,
    /// A hardware queue run's fixed overhead.
    pub run_ns: u64,
    /// `D`: starting a request and taking its driver tag.
    pub issue_ns: u64,
    /// `C`: ending a request and freeing it.
    pub complete_ns: u64,
    /// `R`: a requeue.
    pub requeue_ns: u64,
    /// One pass of the timer (requeue work, timeout scan, delayed runs).
    pub timer_ns: u64,
    /// A cache line moving between CPUs (a lock or counter last touched elsewhere), for
    /// every pair alike; a machine's topology (`SimConfig::topology`) replaces it.
    pub line_ns: u64,
    /// Extra hand-off delay per CPU spinning on a contended lock.
    pub waiter_ns: u64,
    /// Reading one other CPU's per-CPU counter line (the per-CPU sums mq-deadline's O(1) queued count removed: 128 CPUs, two
    /// counters each, 2.5 us per `dd_queued` in the mail, about 10 ns a line).
    pub percpu_line_ns: u64,
    /// The application's own work per I/O submitted (fio's io_u setup, system call share).
    pub app_submit_ns: u64,
    /// The application's work per I/O reaped.
    pub app_reap_ns: u64,
    /// Waking a task that sleeps for its completions (IPI and scheduler), charged to the
    /// woken CPU once per task: a loop's worker completing for two jobs wakes both.
    pub wake_ns: u64,
}

impl Default for CostTable {
    fn default() -> CostTable {
        CostTable {
            bio_ns: 40,
            merge_ns: 40,
            getrq_ns: 30,
            insert_ns: 25,
            run_ns: 30,
            issue_ns: 40,
            complete_ns: 55,
            requeue_ns: 120,
            timer_ns: 300,
            line_ns: 100,
            waiter_ns: 40,
            percpu_line_ns: 10,
            app_submit_ns: 400,
            app_reap_ns: 150,
            wake_ns: 1500,
        }
    }
}

impl CostTable {
    /// The names `set` accepts.
    pub const NAMES: &'static [&'static str] = &[
        "bio_ns",
        "merge_ns",
        "getrq_ns",
        "insert_ns",
        "run_ns",
        "issue_ns",
        "complete_ns",
        "requeue_ns",
        "timer_ns",
        "line_ns",
        "waiter_ns",
        "percpu_line_ns",
        "app_submit_ns",
        "app_reap_ns",
        "wake_ns",
    ];

    fn field(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "bio_ns" => &mut self.bio_ns,
            "merge_ns" => &mut self.merge_ns,
            "getrq_ns" => &mut self.getrq_ns,
            "insert_ns" => &mut self.insert_ns,
            "run_ns" => &mut self.run_ns,
            "issue_ns" => &mut self.issue_ns,
            "complete_ns" => &mut self.complete_ns,
            "requeue_ns" => &mut self.requeue_ns,
            "timer_ns" => &mut self.timer_ns,
            "line_ns" => &mut self.line_ns,
            "waiter_ns" => &mut self.waiter_ns,
            "percpu_line_ns" => &mut self.percpu_line_ns,
            "app_submit_ns" => &mut self.app_submit_ns,
            "app_reap_ns" => &mut self.app_reap_ns,
            "wake_ns" => &mut self.wake_ns,
            _ => return None,
        })
    }

    /// Overrides one entry from `name=value`.
    pub fn set(&mut self, assignment: &str) -> Result<(), CostError> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| CostError::NotAssignment(assignment.to_string()))?;
        let v: u64 = v.trim().parse().map_err(|_| CostError::NotNanoseconds {
            assignment: assignment.to_string(),
            value: v.to_string(),
        })?;
        let f = self.field(k.trim()).ok_or_else(|| CostError::UnknownCost {
            assignment: assignment.to_string(),
            name: k.to_string(),
        })?;
        *f = v;
        Ok(())
    }

    /// Multiplies one entry by `factor` (rounded to the nearest ns); false if there is no
    /// entry of that name.
    pub fn scale(&mut self, name: &str, factor: f64) -> bool {
        match self.field(name) {
            Some(f) => {
                *f = (*f as f64 * factor).round() as u64;
                true
            }
            None => false,
        }
    }

    /// One entry by name.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.clone().field(name).map(|v| *v)
    }

    pub fn dump(&self) -> String {
        Self::NAMES
            .iter()
            .map(|n| format!("{n}={}", self.get(n).unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A modelled lock: the intervals it is held for, in virtual time.
///
/// Operations are executed in the order of their start times, but one operation can hold a
/// lock several times over a stretch of virtual time. Keeping the reserved intervals (rather
/// than only "free from") lets an acquisition that comes earlier in virtual time take the
/// lock in a gap before a later reservation, as a CPU grabbing a free spinlock would.
#[derive(Clone, Debug, Default)]
pub struct LockState {
    /// Held intervals (start, end, cpu), sorted by start, none ending before the engine's
    /// current time.
    held: std::collections::VecDeque<(u64, u64, u16)>,
    pub acquisitions: u64,
    pub contended: u64,
    pub wait_ns: u64,
    pub held_ns: u64,
}

impl LockState {
    pub fn new() -> LockState {
        LockState::default()
    }

    /// `cpu` wants the lock at `t` for `hold` ns; the engine's clock is at `now` (no later
    /// request can come before it). Returns when `cpu` lets go.
    pub fn acquire(
        &mut self,
        cpu: u16,
        t: u64,
        hold: u64,
        now: u64,
        line: crate::topology::LineCost,
        waiter_ns: u64,
    ) -> u64 {
        while self.held.front().is_some_and(|h| h.1 <= now) {
            self.held.pop_front();
        }
        self.acquisitions += 1;
        // Where and after whom it is taken: when every reservation is over by `t` (the
        // common case), at `t` after the last holder; otherwise wherever the walk finds room.
        let (s, prev_cpu, waited_behind, pos) = match self.held.back() {
            Some(&(_, end, _)) if end > t => self.first_fit(cpu, t, hold, line, waiter_ns),
            last => (t, last.map(|b| b.2), 0, self.held.len()),
        };
        if s > t {
            self.contended += 1;
        }
        let start = s + Self::taking_cost(cpu, s > t, prev_cpu, waited_behind, line, waiter_ns);
        self.wait_ns += start - t;
        let end = start + hold;
        self.held_ns += hold;
        if pos == self.held.len() {
            self.held.push_back((s, end, cpu));
        } else {
            self.held.insert(pos, (s, end, cpu));
        }
        end
    }

    /// What taking the lock costs `cpu` before its hold starts: the cache line moves if
    /// another CPU held it last, and having waited (`waited`) costs a hand-off for each
    /// other CPU's hold it waited behind, one at least.
    fn taking_cost(
        cpu: u16,
        waited: bool,
        prev_cpu: Option<u16>,
        waited_behind: u64,
        line: crate::topology::LineCost,
        waiter_ns: u64,
    ) -> u64 {
        let moved = prev_cpu.map_or(0, |p| line.between(p, cpu));
        let handoffs = if waited {
            waiter_ns * waited_behind.max(1)
        } else {
            0
        };
        moved + handoffs
    }

    /// The walk of [`LockState::acquire`] when the lock is still held at `t`: the first gap
    /// at or after `t` that fits `hold` and what taking it there costs. The reservations are
    /// disjoint and sorted, so their ends are sorted too: those over before `t` are skipped by
    /// a binary search (an operation reserves many in a row, each after the last), and the
    /// last of them was the previous holder. Returns where the hold starts before its extra
    /// costs, the CPU that held the lock last, how many other CPUs' holds it waited behind,
    /// and the index its reservation goes in at. Out of line, so that `acquire`'s common
    /// case stays short.
    #[inline(never)]
    fn first_fit(
        &self,
        cpu: u16,
        t: u64,
        hold: u64,
        line: crate::topology::LineCost,
        waiter_ns: u64,
    ) -> (u64, Option<u16>, u64, usize) {
        let mut s = t;
        let first = self.held.partition_point(|h| h.1 <= t);
        let mut prev_cpu: Option<u16> = first.checked_sub(1).map(|i| self.held[i].2);
        let mut waited_behind = 0u64;
        for (i, &(hs, he, hc)) in (first..).zip(self.held.range(first..)) {
            if he <= s {
                prev_cpu = Some(hc);
                continue;
            }
            // The gap must hold what taking it at `s` costs as well as the hold.
            let need =
                hold + Self::taking_cost(cpu, s > t, prev_cpu, waited_behind, line, waiter_ns);
            if s + need <= hs {
                return (s, prev_cpu, waited_behind, i);
            }
            s = s.max(he);
            prev_cpu = Some(hc);
            if hc != cpu {
                waited_behind += 1;
            }
        }
        (s, prev_cpu, waited_behind, self.held.len())
    }
}

/// The base cost of a core event over `none`.
pub fn core_cost(c: &CostTable, a: TraceAction) -> u64 {
    match a {
        TraceAction::Queue => c.bio_ns,
        TraceAction::BackMerge | TraceAction::FrontMerge => c.merge_ns,
        TraceAction::GetRq => c.getrq_ns,
        TraceAction::Insert => c.insert_ns,
        TraceAction::Issue => c.issue_ns,
        TraceAction::Complete => c.complete_ns,
        TraceAction::Requeue => c.requeue_ns,
        TraceAction::Run => c.run_ns,
    }
}

/// Virtual time as a readable figure.
pub fn fmt_ns(t: Nanos) -> String {
    let ns = t.0;
    if ns >= 10_000_000_000 {
        format!("{:.1}s", ns as f64 / 1e9)
    } else if ns >= 10_000_000 {
        format!("{:.1}ms", ns as f64 / 1e6)
    } else if ns >= 10_000 {
        format!("{:.1}us", ns as f64 / 1e3)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scheduler's own hook costs, all under its queue lock.
    fn own_hooks() -> ElvCost {
        ElvCost {
            insert_ns: 70,
            insert_lock: mqblk_core::LockScope::Queue,
            dispatch_ns: 80,
            probe_ns: 30,
            dispatch_lock: mqblk_core::LockScope::Queue,
            complete_ns: 50,
            complete_lock: mqblk_core::LockScope::Queue,
            merge_ns: 40,
            path_ns: 0,
            path_complete_ns: 0,
        }
    }

    #[test]
    fn a_lock_is_taken_at_once_when_free_waited_for_when_held_and_gaps_are_used() {
        let line = crate::topology::LineCost::Flat(10);
        let mut l = LockState::new();
        // Free: taken at once, no line to move the first time.
        assert_eq!(l.acquire(0, 100, 50, 0, line, 5), 150);
        // Free again at 200, last held by CPU 0: the same CPU pays nothing, another the line.
        assert_eq!(l.acquire(0, 200, 50, 0, line, 5), 250);
        assert_eq!(l.acquire(1, 300, 50, 0, line, 5), 360);
        assert_eq!((l.contended, l.wait_ns), (0, 10));
        // Held by CPU 1 until 360: CPU 0 waits, then pays the line and one waiter's hand-off.
        assert_eq!(l.acquire(0, 320, 20, 0, line, 5), 360 + 10 + 5 + 20);
        assert_eq!(l.contended, 1);
        // An acquisition earlier in virtual time takes the gap before 300 (after CPU 0's
        // reservation ending at 250), where it fits.
        assert_eq!(l.acquire(0, 260, 20, 0, line, 5), 280);
        // One that does not fit in the gap waits for the end of the reservations, and pays
        // the line and a hand-off for each of CPU 0's two reservations it waited behind.
        assert_eq!(l.acquire(1, 255, 100, 0, line, 5), 395 + 10 + 2 * 5 + 100);
        assert_eq!(l.acquisitions, 6);
    }

    /// A gap is taken only where it holds what taking the lock there costs, the hand-off
    /// charged for having waited included, so reservations never overlap.
    #[test]
    fn a_gap_must_hold_the_hand_off_it_charges() {
        let line = crate::topology::LineCost::Flat(10);
        // CPU 0 holds 100-110, CPU 1 has 200-260 reserved.
        let two_holds = || {
            let mut l = LockState::new();
            assert_eq!(l.acquire(0, 100, 10, 0, line, 5), 110);
            assert_eq!(l.acquire(1, 200, 50, 0, line, 5), 260);
            l
        };
        // CPU 0 at 105 waits for its own hold to end at 110 and pays one hand-off (5): 88 ns
        // would end at 203, past CPU 1's reservation from 200, so it goes after that one
        // (the line from CPU 1, one hand-off behind it).
        assert_eq!(
            two_holds().acquire(0, 105, 88, 0, line, 5),
            260 + 10 + 5 + 88
        );
        // 83 ns fit: 110 + 5 + 83 = 198.
        assert_eq!(two_holds().acquire(0, 105, 83, 0, line, 5), 198);
    }

    #[test]
    fn the_kernel_profile_puts_the_measured_locked_time_under_the_lock_and_the_rest_outside() {
        let own = own_hooks();
        let builtin = KernelCosts::default();
        let k = CostProfile::Kernel.elv_cost("mq-deadline", own, &builtin);
        let of = |t: &[(&str, u64)]| t.iter().find(|(n, _)| *n == "mq-deadline").unwrap().1;
        let (measured, locked) = (of(KERNEL_OVER_NONE_NS), of(KERNEL_LOCKED_NS));
        // Everything the kernel spends over `none` is charged, ...
        let per_request = k.insert_ns + k.dispatch_ns + k.complete_ns + k.path_ns;
        assert!(
            per_request.abs_diff(measured) <= 2,
            "{per_request} vs {measured}"
        );
        // ... the hooks under `dd->lock` (insert and dispatch) as long as the kernel's
        // lock-holding functions take, the rest outside.
        let under = k.insert_ns + k.dispatch_ns;
        assert!(
            under.abs_diff(locked) <= 2,
            "{under} under the lock vs {locked}"
        );
        assert!(k.path_ns > 0 && k.path_ns < measured);
        let ratio = k.insert_ns as f64 / k.dispatch_ns as f64;
        assert!(
            (ratio - 70.0 / 80.0).abs() < 0.01,
            "insert/dispatch {ratio}"
        );
        assert!(k.probe_ns > own.probe_ns && k.merge_ns > own.merge_ns);
        assert_eq!(k.dispatch_lock, own.dispatch_lock);
        // `dd_finish_request` is an atomic increment outside `dd->lock`.
        assert_eq!(k.complete_lock, mqblk_core::LockScope::None);
        let m = CostProfile::Mqblk.elv_cost("mq-deadline", own, &builtin);
        assert_eq!(m.complete_lock, mqblk_core::LockScope::Queue);
        // mqblk's own profile, and schedulers the kernel has no figure for, keep their own.
        assert_eq!(
            CostProfile::Mqblk.elv_cost("mq-deadline", own, &builtin),
            own
        );
        assert_eq!(CostProfile::Kernel.elv_cost("none", own, &builtin), own);
        assert!(CostProfile::parse("linux").is_err());
    }

    #[test]
    fn kblockd_start_latency_follows_the_measured_quantiles() {
        assert_eq!(kblockd_start_ns(0.0), 1000);
        assert_eq!(kblockd_start_ns(0.5), 3000);
        assert_eq!(kblockd_start_ns(0.9), 6000);
        assert_eq!(kblockd_start_ns(0.999_999), 36_000);
        // Between quantiles, linear; never decreasing.
        assert_eq!(kblockd_start_ns(0.95), 6000 + (14_000.0 * 5.0 / 9.0) as u64);
        let mut last = 0;
        for i in 0..1000 {
            let v = kblockd_start_ns(i as f64 / 1000.0);
            assert!(v >= last, "at {i}: {v} < {last}");
            last = v;
        }
    }

    /// Where the kernel-cost runs measured the submitting task's share, the path outside
    /// the scheduler's lock is split: what fio's job spent beyond the submit-side hooks
    /// goes with the submission, the rest with the completion; the total stays the
    /// kernel's. Files without the share charge it all with the submission, as before.
    #[test]
    fn the_submitting_tasks_share_stays_with_the_submission_and_the_rest_goes_with_the_completion()
    {
        let own = own_hooks();
        let figures = |job: Option<u64>| KernelCosts {
            over_none_ns: vec![("bfq".into(), 3600)],
            locked_ns: vec![("bfq".into(), 1400)],
            job_ns: job.map(|j| ("bfq".into(), j)).into_iter().collect(),
            source: None,
        };
        let split = |job| {
            let c = CostProfile::Kernel.elv_cost("bfq", own, &figures(job));
            assert_eq!(c.insert_ns + c.dispatch_ns + c.complete_ns, 1400, "{c:?}");
            (c.insert_ns + c.dispatch_ns, c.path_ns, c.path_complete_ns)
        };
        // The hooks scaled to the locked 1,400 ns: insert 490 and dispatch 560 on the
        // submit side, the completion's 350.
        assert_eq!(split(Some(1500)), (1050, 450, 1750));
        assert_eq!(split(None), (1050, 2200, 0));
        assert_eq!(split(Some(500)), (1050, 0, 2200), "less than its hooks");
        assert_eq!(split(Some(9000)), (1050, 2200, 0), "more than the whole");
        // Read from the files as the median where every file has it.
        let dir = std::env::temp_dir().join(format!("mqblk-kc-job-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |i: usize, job: &str| {
            let path = dir.join(format!("run{i}.json"));
            let text = format!(
                r#"{{"schedulers": {{"none": {{"over_none_ns": 0}},
                    "bfq": {{"over_none_ns": 3600, "locked_ns_per_io": 1400{job}}}}}}}"#
            );
            std::fs::write(&path, text).unwrap();
            path
        };
        let all = [
            file(1, r#", "job_over_none_ns": 900"#),
            file(2, r#", "job_over_none_ns": 1500"#),
            file(3, r#", "job_over_none_ns": 1100"#),
        ];
        assert_eq!(KernelCosts::read(&all).unwrap().job_ns("bfq"), Some(1100));
        let older = file(4, "");
        let mixed = KernelCosts::read(&[all[0].clone(), older]).unwrap();
        assert_eq!(mixed.job_ns("bfq"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Several runs of the kernel-cost script give each figure's median; a locked time
    /// only where every run measured it; a file that is not the script's is said in one
    /// line naming it.
    #[test]
    fn kernel_costs_are_the_median_of_the_runs_given() {
        let dir = std::env::temp_dir().join(format!("mqblk-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = |i: usize, dd: f64, kyber: f64, locked: Option<f64>| {
            let lk = locked.map_or("null".to_string(), |v| v.to_string());
            let text = format!(
                r#"{{"schedulers": {{
                    "none": {{"ns_per_io": 6000, "over_none_ns": 0, "locked_ns_per_io": null}},
                    "mq-deadline": {{"ns_per_io": 7000, "over_none_ns": {dd}, "locked_ns_per_io": 300}},
                    "kyber": {{"ns_per_io": 7000, "over_none_ns": {kyber}, "locked_ns_per_io": {lk}}}
                }}}}"#
            );
            let path = dir.join(format!("run{i}.json"));
            std::fs::write(&path, text).unwrap();
            path
        };
        let paths = [
            run(1, 976.0, 552.0, Some(298.0)),
            run(2, 770.0, 886.0, None),
            run(3, 854.0, -20.0, Some(248.0)),
        ];
        let k = KernelCosts::read(&paths).unwrap();
        assert_eq!(k.over_none_ns("mq-deadline"), Some(854));
        assert_eq!(k.over_none_ns("kyber"), Some(552));
        assert_eq!(k.locked_ns("mq-deadline"), Some(300));
        assert_eq!(k.locked_ns("kyber"), None);
        assert_eq!(k.over_none_ns("none"), None);
        // BFQ, which no file measured, keeps its built-in figures.
        let builtin = KernelCosts::default();
        assert_eq!(k.over_none_ns("bfq"), builtin.over_none_ns("bfq"));
        assert_eq!(k.locked_ns("bfq"), builtin.locked_ns("bfq"));
        // The kernel profile charges them: all of kyber's over `none` goes to its path
        // and hooks (each scaled in whole ns).
        let own = ElvCost {
            insert_ns: 40,
            insert_lock: mqblk_core::LockScope::Queue,
            dispatch_ns: 40,
            probe_ns: 10,
            dispatch_lock: mqblk_core::LockScope::Queue,
            complete_ns: 20,
            complete_lock: mqblk_core::LockScope::None,
            merge_ns: 10,
            path_ns: 0,
            path_complete_ns: 0,
        };
        let c = CostProfile::Kernel.elv_cost("kyber", own, &k);
        let charged = c.insert_ns + c.dispatch_ns + c.complete_ns + c.path_ns;
        assert!(charged.abs_diff(552) <= 3, "{charged}");
        // Built in without any file; the figures' median of one file is its own.
        assert_eq!(KernelCosts::read(&[]).unwrap(), KernelCosts::default());
        let one = KernelCosts::read(&paths[..1]).unwrap();
        assert_eq!(one.over_none_ns("mq-deadline"), Some(976));
        // Refused, in one line naming the file.
        let bad = dir.join("bad.json");
        for (text, says) in [
            ("not json", "not the JSON of scripts/kernel-cost.sh --json"),
            ("{}", "no \"schedulers\" object"),
            (
                r#"{"schedulers": {"bfq": {"ns_per_io": 1}}}"#,
                "bfq: no over_none_ns",
            ),
        ] {
            std::fs::write(&bad, text).unwrap();
            let e = KernelCosts::read(std::slice::from_ref(&bad))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("--kernel-costs {}: ", bad.display()))
                    && e.contains(says)
                    && !e.contains('\n'),
                "{e}"
            );
        }
        let missing = dir.join("missing.json");
        let e = KernelCosts::read(std::slice::from_ref(&missing))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
