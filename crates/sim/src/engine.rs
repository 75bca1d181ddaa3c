//! The discrete-event loop: virtual time, virtual CPUs, and the core driven through them.
//!
//! Events are kept in a heap ordered by (virtual time, sequence number), so ties resolve in
//! the order they were scheduled and a run is a pure function of its configuration and seed.
//! Five kinds of event move a run forward:
//! - `Cpu(c)`: virtual CPU `c` runs one step: interrupt entry if one was raised, reaping
//!   (the core's `poll`), handing completed bios to its jobs, then submitting new bios.
//! - `Arrive`: a command reaches the device (its doorbell rang at this time).
//! - `Dev`: the device model's next internal event; finished commands raise interrupts.
//! - `Timer`: the queue's next deadline (delayed runs, requeue work, timeouts, the
//!   elevator's timer), run on CPU 0 as kblockd would.
//! - `Start(job)`: a job begins.
//!
//! Each CPU operation executes the shared core code at once (with `now` = the operation's
//! start) and is then charged from the cost model ([`crate::cost`]) step by step, locks
//! included; the CPU is busy until the charged end. Commands the operation posted reach the
//! device when their doorbell step ends.

use crate::cost::{core_cost, CostTable, LockState};
use crate::device::{self, DevCompletion, DeviceSpec, DriverCost};
use crate::driver::{Faults, OpLog, Plant, SimDriver, Staged, Step};
use crate::workload::{Next, SimJob};
use crate::SimRng;
use mqblk_core::{
    Bio, BlkStatus, Blkcg, CtxIdx, Driver, ElvCost, HctxIdx, HctxType, LockScope, Nanos,
    QueueLimits, ReqOp, RequestQueue, Submit, Submitter, TagSet, TagSetConfig, TraceAction,
    TraceHook, Tracer,
};
use mqblk_device::{new_queue, QueueSettings};
use mqblk_workload::{Ddir, JobStats};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Everything a run is made of, apart from its jobs.
#[derive(Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub nr_cpus: u16,
    /// The device model.
    pub device: DeviceSpec,
    /// The request queue over it: the same settings, and the same construction, as a
    /// real-time device's.
    pub queue: QueueSettings,
    pub faults: Faults,
    pub plant: Option<Plant>,
    pub cost: CostTable,
    /// Overrides the scheduler's default costs.
    pub elv_cost: Option<ElvCost>,
    /// Check the queue's invariants every this many events (0: only at the end).
    pub check_every: u64,
    /// Give up (a stall) past this much virtual time.
    pub max_time: Nanos,
    /// Also send every core event here (blktrace output).
    pub tracer: Option<Arc<dyn Tracer>>,
    /// The cgroups the jobs' `group` ids refer to (BFQ reads their weights).
    pub blkcg: Arc<Blkcg>,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 1,
            nr_cpus: 1,
            device: DeviceSpec {
                model: "null".into(),
                params: Vec::new(),
            },
            queue: QueueSettings::default(),
            faults: Faults::default(),
            plant: None,
            cost: CostTable::default(),
            elv_cost: None,
            check_every: 0,
            max_time: Nanos::from_secs(3600),
            tracer: None,
            blkcg: Arc::new(Blkcg::new()),
        }
    }
}

/// Why a run did not finish cleanly. `dump` is the state at the failure.
#[derive(Debug)]
pub enum SimError {
    /// The configuration cannot be built (bad device parameter, unknown scheduler...).
    Config(String),
    /// An invariant was violated.
    Invariant { msg: String, dump: String },
    /// Work is queued or in flight and nothing will move it.
    Stall { msg: String, dump: String },
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Config(m) => write!(f, "{m}"),
            SimError::Invariant { msg, .. } => write!(f, "invariant violated: {msg}"),
            SimError::Stall { msg, .. } => write!(f, "stall: {msg}"),
        }
    }
}

impl SimError {
    pub fn dump(&self) -> &str {
        match self {
            SimError::Config(_) => "",
            SimError::Invariant { dump, .. } | SimError::Stall { dump, .. } => dump,
        }
    }
}

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
    /// The scheduler's typed statistics at the end.
    pub sched: mqblk_sched::SchedStats,
    /// Per hardware queue: (runs, requests issued).
    pub hctx_stats: Vec<(u64, u64)>,
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

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Cpu(u16),
    /// A posted command (its slot in `in_transit`) reaches the device.
    Arrive {
        hw: u16,
        staged: u32,
    },
    Dev,
    Timer,
    Start(u32),
}

struct Cpu {
    sub: Submitter,
    jobs: Vec<u32>,
    busy_until: u64,
    busy_ns: u64,
    wake_at: Option<u64>,
    irqs: u32,
    woken_remote: bool,
    /// Jobs of this CPU that wait for a free tag.
    tag_wait: bool,
    /// Rotates which job submits first, so jobs sharing a CPU share it fairly.
    rr: usize,
}

struct JobRun {
    def: SimJob,
    rng: SimRng,
    started: bool,
    /// Outstanding bios, in slots named by their cookies.
    outstanding: Slab,
    next_seq: u64,
    issued: u64,
    issued_bytes: u64,
    pending: Option<Bio>,
    think_until: u64,
    /// Waiting at full depth for `batch_complete_min` completions.
    refilling: bool,
    draining: bool,
    done_issuing: bool,
    finished: bool,
    stats: JobStats,
    ios: u64,
    bytes: u64,
    errors: u64,
    start: u64,
    end: u64,
}

impl JobRun {
    fn inflight(&self) -> u32 {
        self.outstanding.len
    }
}

/// An outstanding bio: its sequence number and when and what it was submitted as.
#[derive(Copy, Clone, Debug)]
struct Slot {
    seq: u64,
    submit_start: u64,
    submit_end: u64,
    bytes: u64,
    op: ReqOp,
}

/// Outstanding bios by slot, reused through a free list (deterministic, no hashing). A bio's
/// cookie names its job, slot and sequence number, so a second completion of the same bio
/// finds its slot empty or holding another sequence number.
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    len: u32,
}

const SEQ_BITS: u32 = 32;
const SLOT_BITS: u32 = 20;

fn cookie(job: usize, slot: u32, seq: u64) -> u64 {
    ((job as u64) << (SEQ_BITS + SLOT_BITS))
        | ((slot as u64) << SEQ_BITS)
        | (seq & ((1 << SEQ_BITS) - 1))
}

fn uncookie(c: u64) -> (usize, u32, u64) {
    (
        (c >> (SEQ_BITS + SLOT_BITS)) as usize,
        ((c >> SEQ_BITS) & ((1 << SLOT_BITS) - 1)) as u32,
        c & ((1 << SEQ_BITS) - 1),
    )
}

impl Slab {
    fn insert(&mut self, s: Slot) -> u32 {
        self.len += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(s);
                i
            }
            None => {
                self.slots.push(Some(s));
                self.slots.len() as u32 - 1
            }
        }
    }
    /// Takes the slot if it holds `seq` (low bits as in the cookie).
    fn take(&mut self, i: u32, seq: u64) -> Option<Slot> {
        let e = self.slots.get_mut(i as usize)?;
        if e.is_some_and(|s| s.seq & ((1 << SEQ_BITS) - 1) == seq) {
            self.len -= 1;
            self.free.push(i);
            e.take()
        } else {
            None
        }
    }
    fn get_mut(&mut self, i: u32) -> Option<&mut Slot> {
        self.slots.get_mut(i as usize)?.as_mut()
    }
    fn first(&self) -> Option<&Slot> {
        self.slots.iter().flatten().next()
    }
}

/// One simulation: build it with [`Sim::new`], then [`Sim::run`].
pub struct Sim {
    cfg: SimConfig,
    queue: Arc<RequestQueue>,
    driver: Arc<SimDriver>,
    log: Arc<OpLog>,
    dcost: DriverCost,
    elv: ElvCost,
    /// mq-deadline's per-CPU sums (seed 002) are on: charge each summing pass it reports.
    track_sum_passes: bool,
    sum_passes: u64,
    cpus: Vec<Cpu>,
    jobs: Vec<JobRun>,
    irq_cpu: Vec<u16>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    now: u64,
    locks: Vec<LockState>,
    nr_hw: usize,
    nr_ctx: usize,
    dev_armed: Option<u64>,
    timer_armed: Option<u64>,
    last_timer_at: Option<u64>,
    events: u64,
    completed: u64,
    last_progress: u64,
    total_outstanding: u64,
    unfinished: usize,
    steps: Vec<Step>,
    staged: Vec<Staged>,
    /// Commands posted and not yet at the device, by key (a slot reused through `transit_free`).
    in_transit: Vec<Option<Staged>>,
    transit_free: Vec<u32>,
    pending_arrivals: Vec<u32>,
    dev_scratch: Vec<DevCompletion>,
    hw_scratch: Vec<u16>,
    wake_list: Vec<u16>,
}

impl Sim {
    pub fn new(cfg: SimConfig, jobs: Vec<SimJob>) -> Result<Sim, SimError> {
        let mut rng = SimRng::new(cfg.seed);
        if cfg.nr_cpus == 0 {
            return Err(SimError::Config("sim: at least one CPU is needed".into()));
        }
        if jobs.is_empty() {
            return Err(SimError::Config("sim: no jobs".into()));
        }
        let model = device::build(&cfg.device, rng.fork(1)).map_err(SimError::Config)?;
        let log = Arc::new(OpLog::new(cfg.tracer.clone()));
        let driver = Arc::new(SimDriver::new(
            model,
            log.clone(),
            cfg.faults,
            cfg.plant,
            rng.fork(2),
        ));
        let nr_hw = driver.nr_hw_queues();
        let set = TagSet::new(TagSetConfig::new(nr_hw, driver.queue_depth()))
            .map_err(|e| SimError::Config(format!("sim: tag set: {e}")))?;
        // Resolved by name or alias: the type carries its own hooks' costs and locks.
        let elv_type = mqblk_sched::lookup(&cfg.queue.scheduler).ok_or_else(|| {
            SimError::Config(format!(
                "sim: unknown scheduler '{}' (known: {})",
                cfg.queue.scheduler,
                mqblk_sched::names().join(", ")
            ))
        })?;
        let elv = cfg.elv_cost.unwrap_or(elv_type.cost);
        let limits = QueueLimits {
            capacity_sectors: driver.capacity_sectors(),
            ..QueueLimits::default()
        };
        let queue = new_queue(
            set,
            driver.clone(),
            &cfg.queue,
            cfg.nr_cpus,
            limits,
            TraceHook::new(log.clone()),
            cfg.blkcg.clone(),
        )
        .map_err(|e| SimError::Config(format!("sim: {e}")))?;
        // A scheduler that sums per-CPU counters says so; each pass is charged.
        let track_sum_passes = queue
            .elevator()
            .is_some_and(|e| e.percpu_sum_passes().is_some());
        let nr_ctx = cfg.nr_cpus as usize;
        let mut irq_cpu = vec![u16::MAX; nr_hw as usize];
        for c in 0..cfg.nr_cpus {
            let h = queue.map_queue(CtxIdx(c), HctxType::Default).0 as usize;
            if irq_cpu[h] == u16::MAX {
                irq_cpu[h] = c;
            }
        }
        for (h, c) in irq_cpu.iter_mut().enumerate() {
            if *c == u16::MAX {
                *c = (h % nr_ctx) as u16;
            }
        }
        let mut cpus: Vec<Cpu> = (0..cfg.nr_cpus)
            .map(|c| Cpu {
                sub: queue.submitter(CtxIdx(c)),
                jobs: Vec::new(),
                busy_until: 0,
                busy_ns: 0,
                wake_at: None,
                irqs: 0,
                woken_remote: false,
                tag_wait: false,
                rr: 0,
            })
            .collect();
        let mut runs = Vec::with_capacity(jobs.len());
        for (i, def) in jobs.into_iter().enumerate() {
            if def.cpu >= cfg.nr_cpus {
                return Err(SimError::Config(format!(
                    "sim: job '{}' is pinned to CPU {} but there are {} CPUs",
                    def.name, def.cpu, cfg.nr_cpus
                )));
            }
            if def.iodepth == 0 {
                return Err(SimError::Config(format!(
                    "sim: job '{}': iodepth must be at least 1",
                    def.name
                )));
            }
            cpus[def.cpu as usize].jobs.push(i as u32);
            runs.push(JobRun {
                rng: rng.fork(100 + i as u64),
                stats: JobStats::new(&def.name),
                def,
                started: false,
                outstanding: Slab::default(),
                next_seq: 0,
                issued: 0,
                issued_bytes: 0,
                pending: None,
                think_until: 0,
                refilling: false,
                draining: false,
                done_issuing: false,
                finished: false,
                ios: 0,
                bytes: 0,
                errors: 0,
                start: 0,
                end: 0,
            });
        }
        let nr_locks = 1 + nr_hw as usize + nr_ctx + nr_hw as usize;
        let unfinished = runs.len();
        Ok(Sim {
            dcost: driver.cost(),
            elv,
            track_sum_passes,
            sum_passes: 0,
            locks: (0..nr_locks).map(|_| LockState::new()).collect(),
            nr_hw: nr_hw as usize,
            nr_ctx,
            cfg,
            queue,
            driver,
            log,
            cpus,
            jobs: runs,
            irq_cpu,
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            dev_armed: None,
            timer_armed: None,
            last_timer_at: None,
            events: 0,
            completed: 0,
            last_progress: 0,
            total_outstanding: 0,
            unfinished,
            steps: Vec::with_capacity(64),
            staged: Vec::new(),
            in_transit: Vec::new(),
            transit_free: Vec::new(),
            pending_arrivals: Vec::new(),
            dev_scratch: Vec::new(),
            hw_scratch: Vec::new(),
            wake_list: Vec::new(),
        })
    }

    pub fn queue(&self) -> &Arc<RequestQueue> {
        &self.queue
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    fn wake(&mut self, c: u16, t: u64) {
        let cpu = &mut self.cpus[c as usize];
        let at = t.max(cpu.busy_until);
        if cpu.wake_at.is_none_or(|w| w > at) {
            cpu.wake_at = Some(at);
            self.push(at, Ev::Cpu(c));
        }
    }

    fn arm_dev(&mut self, next: Option<Nanos>) {
        if let Some(t) = next {
            let t = t.0.max(self.now);
            if self.dev_armed.is_none_or(|a| a > t) {
                self.dev_armed = Some(t);
                self.push(t, Ev::Dev);
            }
        }
    }

    fn arm_timer(&mut self) {
        if let Some(t) = self.queue.next_deadline() {
            let mut t = t.0.max(self.now);
            // A deadline still due right after the timer ran at this very time would spin
            // virtual time in place: step it forward by a microsecond.
            if self.last_timer_at.is_some_and(|l| t <= l) {
                t = self.last_timer_at.unwrap_or(0) + 1_000;
            }
            if self.timer_armed.is_none_or(|a| a > t) {
                self.timer_armed = Some(t);
                self.push(t, Ev::Timer);
            }
        }
    }

    /// Runs the simulation to the end and checks it. Core assertion failures panic; callers
    /// that want to survive them (the fuzzer) run this under `catch_unwind`.
    pub fn run(mut self) -> Result<SimResult, SimError> {
        // A simulation that panicked on this thread may have left steps behind.
        self.log.drain_into(&mut self.steps);
        self.steps.clear();
        for j in 0..self.jobs.len() {
            let t = self.jobs[j].def.start_at.0;
            self.push(t, Ev::Start(j as u32));
        }
        // A slow disk with a long queue can go seconds between completions; the kernel's own
        // timeout (30 s by default) is the real bound.
        let stall_after = self
            .cfg
            .queue
            .timeout
            .0
            .saturating_mul(3)
            .max(10_000_000_000);
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            debug_assert!(t >= self.now, "time went backwards");
            self.now = t;
            self.events += 1;
            if t > self.cfg.max_time.0 {
                return Err(self.stall(format!(
                    "virtual time passed the limit of {} s",
                    self.cfg.max_time.0 / 1_000_000_000
                )));
            }
            match ev {
                Ev::Start(j) => {
                    let job = &mut self.jobs[j as usize];
                    job.started = true;
                    job.start = t;
                    let c = job.def.cpu;
                    self.wake(c, t);
                }
                Ev::Cpu(c) => {
                    if self.cpus[c as usize].wake_at != Some(t) {
                        continue;
                    }
                    self.cpus[c as usize].wake_at = None;
                    if self.cpus[c as usize].busy_until > t {
                        self.wake(c, t);
                        continue;
                    }
                    self.cpu_step(c, t)?;
                }
                Ev::Arrive { hw, staged } => {
                    if self.dev_armed.is_some_and(|a| a <= t) {
                        self.dev_tick(t);
                    }
                    let s = self.in_transit[staged as usize]
                        .take()
                        .expect("a command arrived twice");
                    self.transit_free.push(staged);
                    debug_assert_eq!(s.hw, hw);
                    let next = self.driver.submit_to_model(hw, s.cmd, Nanos(t));
                    self.arm_dev(next);
                }
                Ev::Dev => {
                    if self.dev_armed != Some(t) {
                        continue;
                    }
                    self.dev_tick(t);
                }
                Ev::Timer => {
                    if self.timer_armed != Some(t) {
                        continue;
                    }
                    self.timer_armed = None;
                    self.last_timer_at = Some(t);
                    let start = t.max(self.cpus[0].busy_until);
                    let end = self.op(0, start + self.cfg.cost.timer_ns, |q, sub, now| {
                        q.timer(sub, now)
                    });
                    self.cpus[0].busy_ns += end - start;
                    self.cpus[0].busy_until = end;
                    if !self.cpus[0].sub.done.is_empty() {
                        self.wake(0, end);
                    }
                }
            }
            self.arm_timer();
            if self.cfg.check_every > 0 && self.events % self.cfg.check_every == 0 {
                self.check()?;
            }
            if self.unfinished == 0 {
                break;
            }
            if self.total_outstanding > 0 && t.saturating_sub(self.last_progress) > stall_after {
                return Err(self.stall(format!(
                    "no bio completed for {} ms of virtual time while some are in flight",
                    (t - self.last_progress) / 1_000_000
                )));
            }
        }
        if !self.jobs.iter().all(|j| j.finished) {
            return Err(self.stall("no event left while jobs are unfinished".into()));
        }
        self.check()?;
        self.finish()
    }

    fn dev_tick(&mut self, t: u64) {
        self.dev_armed = None;
        let (mut scratch, mut hws) = (
            std::mem::take(&mut self.dev_scratch),
            std::mem::take(&mut self.hw_scratch),
        );
        let next = self.driver.advance(Nanos(t), &mut scratch, &mut hws);
        for &hw in &hws {
            let c = self.irq_cpu[hw as usize];
            self.cpus[c as usize].irqs += 1;
            self.wake(c, t);
        }
        self.dev_scratch = scratch;
        self.hw_scratch = hws;
        self.arm_dev(next);
    }

    fn lock_of(&self, scope: LockScope, ctx: CtxIdx, hctx: Option<HctxIdx>) -> Option<usize> {
        match scope {
            LockScope::None => None,
            LockScope::Queue => Some(0),
            LockScope::Hctx => Some(1 + hctx.map_or(0, |h| h.0 as usize)),
            LockScope::Ctx => Some(1 + self.nr_hw + ctx.0 as usize),
        }
    }

    fn hw_lock(&self, hw: u16) -> Option<usize> {
        self.dcost
            .hw_lock
            .then_some(1 + self.nr_hw + self.nr_ctx + hw as usize)
    }

    fn charge(&mut self, c: u16, t: u64, ns: u64, lock: Option<usize>) -> u64 {
        match lock {
            Some(l) => {
                let hw_lock = l > self.nr_hw + self.nr_ctx;
                let waiter = if hw_lock && self.dcost.lock_waiter_ns > 0 {
                    self.dcost.lock_waiter_ns
                } else {
                    self.cfg.cost.waiter_ns
                };
                self.locks[l].acquire(c, t, ns, self.now, &self.cfg.cost, waiter)
            }
            None => t + ns,
        }
    }

    /// Runs `f` on CPU `c` from virtual time `start`, charges its steps, delivers the
    /// commands it posted, and returns when the CPU is done with it.
    fn op(
        &mut self,
        c: u16,
        start: u64,
        f: impl FnOnce(&RequestQueue, &mut Submitter, Nanos),
    ) -> u64 {
        // Disjoint fields: the queue is only read, the CPU's submitter is only written.
        f(&self.queue, &mut self.cpus[c as usize].sub, Nanos(start));
        let mut steps = std::mem::take(&mut self.steps);
        self.log.drain_into(&mut steps);
        if steps.iter().any(|s| matches!(s, Step::QueueRq { .. })) {
            self.driver.take_staged(&mut self.staged);
        }
        let has_elv = self.queue.elevator().is_some();
        // Per-CPU summing passes (one counter line per CPU each) are spread over the
        // operation's scheduler steps, all under the scheduler's dispatch lock.
        let mut sum_extra = 0u64;
        let mut sum_steps = 0u64;
        if self.track_sum_passes {
            let passes = self.elv_sum_passes();
            let delta = passes - self.sum_passes;
            self.sum_passes = passes;
            sum_extra = delta * self.nr_ctx as u64 * self.cfg.cost.percpu_line_ns;
            sum_steps = steps
                .iter()
                .filter(|s| {
                    matches!(s, Step::Core(e) if e.action == TraceAction::Run
                        || (e.action == TraceAction::Issue && e.sched))
                })
                .count() as u64;
            if sum_steps == 0 && sum_extra > 0 {
                let l = self.lock_of(self.elv.dispatch_lock, CtxIdx(c), None);
                let end = self.charge(c, start, sum_extra, l);
                return self.op_steps(c, end, steps, has_elv, 0);
            }
        }
        let per_step = sum_extra.checked_div(sum_steps).unwrap_or(0);
        self.op_steps(c, start, steps, has_elv, per_step)
    }

    fn elv_sum_passes(&self) -> u64 {
        self.queue
            .elevator()
            .and_then(|e| e.percpu_sum_passes())
            .unwrap_or(0)
    }

    /// Charges an operation's steps from `start`; see [`Sim::op`].
    fn op_steps(
        &mut self,
        c: u16,
        start: u64,
        steps: Vec<Step>,
        has_elv: bool,
        sum_per_step: u64,
    ) -> u64 {
        let mut cur = start;
        let mut completions = 0u32;
        self.wake_list.clear();
        for step in &steps {
            match *step {
                Step::Core(ev) => {
                    let cost = &self.cfg.cost;
                    let base = core_cost(cost, ev.action);
                    let (ns, lock) = match ev.action {
                        TraceAction::BackMerge | TraceAction::FrontMerge if has_elv => (
                            base + self.elv.merge_ns,
                            self.lock_of(self.elv.insert_lock, ev.ctx, ev.hctx),
                        ),
                        TraceAction::Insert if ev.sched => (
                            base + self.elv.insert_ns,
                            self.lock_of(self.elv.insert_lock, ev.ctx, ev.hctx),
                        ),
                        TraceAction::Insert => {
                            (base, self.lock_of(LockScope::Ctx, ev.ctx, ev.hctx))
                        }
                        TraceAction::Run if has_elv => (
                            base + self.elv.probe_ns + sum_per_step,
                            self.lock_of(self.elv.dispatch_lock, ev.ctx, ev.hctx),
                        ),
                        TraceAction::Issue if ev.sched => (
                            base + self.elv.dispatch_ns + sum_per_step,
                            self.lock_of(self.elv.dispatch_lock, ev.ctx, ev.hctx),
                        ),
                        TraceAction::Complete => {
                            completions += 1;
                            if ev.ctx.0 != c && !self.wake_list.contains(&ev.ctx.0) {
                                self.wake_list.push(ev.ctx.0);
                            }
                            if ev.sched {
                                (
                                    base + self.elv.complete_ns,
                                    self.lock_of(self.elv.complete_lock, ev.ctx, ev.hctx),
                                )
                            } else {
                                (base, None)
                            }
                        }
                        _ => (base, None),
                    };
                    cur = self.charge(c, cur, ns, lock);
                }
                Step::QueueRq { hw, staged } => {
                    let lock = self.hw_lock(hw);
                    cur = self.charge(c, cur, self.dcost.queue_rq_ns, lock);
                    let cmd = Some(self.staged[staged as usize]);
                    let key = match self.transit_free.pop() {
                        Some(k) => {
                            self.in_transit[k as usize] = cmd;
                            k
                        }
                        None => {
                            self.in_transit.push(cmd);
                            self.in_transit.len() as u32 - 1
                        }
                    };
                    self.pending_arrivals.push(key);
                }
                Step::Doorbell { hw } => {
                    let lock = self.hw_lock(hw);
                    cur = self.charge(c, cur, self.dcost.doorbell_ns, lock);
                    self.ring(hw, cur);
                }
            }
        }
        // A posted command whose doorbell did not ring in this operation (a driver that
        // relies on a later `commit_rqs`) reaches the device when the operation ends.
        if !self.pending_arrivals.is_empty() {
            let keys = std::mem::take(&mut self.pending_arrivals);
            for &k in &keys {
                let s = self.in_transit[k as usize].expect("posted command in transit");
                self.push(
                    cur,
                    Ev::Arrive {
                        hw: s.hw,
                        staged: k,
                    },
                );
            }
            self.pending_arrivals = keys;
            self.pending_arrivals.clear();
        }
        self.steps = steps;
        if completions > 0 {
            self.completed_progress(cur);
            // A completed request hands each of its bios back to the software queue it came
            // from, and merged bios may come from CPUs other than the request's: look at
            // every CPU's remote list, not only at the completing requests' CPUs (found by
            // replaying a captured trace, where a reader's bio merged into a writer's request).
            for w in 0..self.nr_ctx as u16 {
                if w != c && self.queue.ctx(CtxIdx(w)).has_remote() && !self.wake_list.contains(&w)
                {
                    self.wake_list.push(w);
                }
            }
            let woken = std::mem::take(&mut self.wake_list);
            for &w in &woken {
                self.cpus[w as usize].woken_remote = true;
                self.wake(w, cur);
            }
            self.wake_list = woken;
            for w in 0..self.cpus.len() {
                if self.cpus[w].tag_wait {
                    self.cpus[w].tag_wait = false;
                    self.wake(w as u16, cur);
                }
            }
        }
        cur
    }

    fn ring(&mut self, hw: u16, t: u64) {
        let mut i = 0;
        while i < self.pending_arrivals.len() {
            let k = self.pending_arrivals[i];
            let s = self.in_transit[k as usize].expect("posted command in transit");
            if s.hw == hw {
                self.push(t, Ev::Arrive { hw, staged: k });
                self.pending_arrivals.remove(i);
            } else {
                i += 1;
            }
        }
    }

    fn completed_progress(&mut self, t: u64) {
        self.last_progress = self.last_progress.max(t);
    }

    /// One step of CPU `c`: interrupts, reaping, completions to jobs, new submissions.
    fn cpu_step(&mut self, c: u16, t: u64) -> Result<(), SimError> {
        let ci = c as usize;
        let mut cur = t;
        let irqs = std::mem::take(&mut self.cpus[ci].irqs);
        cur += irqs as u64 * self.dcost.irq_ns;
        if std::mem::take(&mut self.cpus[ci].woken_remote) {
            cur += self.cfg.cost.wake_ns;
        }
        cur = self.op(c, cur, |q, sub, now| {
            q.poll(sub, now);
        });
        cur = self.reap(c, cur)?;
        cur = self.submit_all(c, cur)?;
        let cpu = &mut self.cpus[ci];
        cpu.busy_ns += cur - t;
        cpu.busy_until = cur;
        // Anything the operations left for this CPU (inline completions) is handled next.
        if !self.cpus[ci].sub.done.is_empty() || self.cpus[ci].irqs > 0 {
            self.wake(c, cur);
        }
        Ok(())
    }

    fn reap(&mut self, c: u16, mut cur: u64) -> Result<u64, SimError> {
        let ci = c as usize;
        if self.cpus[ci].sub.done.is_empty() {
            return Ok(cur);
        }
        let done = std::mem::take(&mut self.cpus[ci].sub.done);
        let mut done = done;
        for bio in done.drain(..) {
            cur += self.cfg.cost.app_reap_ns;
            let (j, slot, seq) = uncookie(bio.private);
            let Some(job) = self.jobs.get_mut(j) else {
                return Err(self.invariant(format!(
                    "a completed bio carries an unknown job cookie {:#x}",
                    bio.private
                )));
            };
            let Some(Slot {
                submit_start: s0,
                submit_end: s1,
                bytes,
                op,
                ..
            }) = job.outstanding.take(slot, seq)
            else {
                return Err(self.invariant(format!(
                    "job {j} bio {seq} (sector {}) completed twice, or was never submitted",
                    bio.sector
                )));
            };
            if op != bio.op || bytes != bio.bytes() {
                return Err(self.invariant(format!(
                    "job {j} bio {seq}: completed as {:?} {} bytes, submitted as {op:?} {bytes}",
                    bio.op,
                    bio.bytes()
                )));
            }
            let measured = cur >= job.start + job.def.ramp.0;
            if bio.status != BlkStatus::Ok {
                job.errors += 1;
            } else if op == ReqOp::Flush && measured {
                // fio's `sync` latency: the flushes of `fsync=N` and `end_fsync`.
                job.stats.sync.record(cur.saturating_sub(s0));
            } else if op.has_data() && measured {
                job.ios += 1;
                job.bytes += bytes;
                let d = if op == ReqOp::Read {
                    Ddir::Read
                } else {
                    Ddir::Write
                };
                job.stats
                    .dir_mut(d)
                    .record_io(bytes, s1 - s0, cur.saturating_sub(s1));
            }
            job.end = cur;
            self.total_outstanding -= 1;
        }
        self.cpus[ci].sub.done = done;
        Ok(cur)
    }

    fn submit_all(&mut self, c: u16, mut cur: u64) -> Result<u64, SimError> {
        let ci = c as usize;
        let n = self.cpus[ci].jobs.len();
        if n == 0 {
            return Ok(cur);
        }
        let first = self.cpus[ci].rr % n;
        self.cpus[ci].rr = self.cpus[ci].rr.wrapping_add(1);
        for k in 0..n {
            let j = self.cpus[ci].jobs[(first + k) % n] as usize;
            cur = self.submit_job(c, j, cur)?;
        }
        Ok(cur)
    }

    fn submit_job(&mut self, c: u16, j: usize, mut cur: u64) -> Result<u64, SimError> {
        let ci = c as usize;
        {
            let job = &mut self.jobs[j];
            if !job.started || job.finished {
                return Ok(cur);
            }
            if job.draining {
                if job.inflight() > 0 {
                    return Ok(cur);
                }
                job.draining = false;
            }
        }
        let batch = self.jobs[j].def.batch.max(1);
        let plugged = batch > 1;
        if plugged {
            self.cpus[ci].sub.plug.start();
        }
        let mut in_batch = 0;
        loop {
            let job = &mut self.jobs[j];
            if job.done_issuing {
                break;
            }
            if job.inflight() >= job.def.iodepth {
                // Full: like fio, wait for `iodepth_batch_complete_min` completions before
                // issuing again.
                job.refilling = job.def.batch_complete_min > 1;
                break;
            }
            if job.refilling {
                if job.def.iodepth - job.inflight() < job.def.batch_complete_min {
                    break;
                }
                job.refilling = false;
            }
            if job.think_until > cur {
                let at = job.think_until;
                self.wake(c, at);
                break;
            }
            let bio = match job.pending.take() {
                Some(b) => b,
                None => {
                    let lim = job.def.limit;
                    let over = lim.ios.is_some_and(|n| job.issued >= n)
                        || lim.bytes.is_some_and(|b| job.issued_bytes >= b)
                        || lim.time.is_some_and(|d| cur >= job.start + d.0);
                    if over {
                        job.done_issuing = true;
                        break;
                    }
                    match job.def.source.next(Nanos(cur - job.start), &mut job.rng) {
                        Next::Done => {
                            job.done_issuing = true;
                            break;
                        }
                        Next::Think(d) => {
                            job.think_until = cur + d.0.max(1);
                            continue;
                        }
                        Next::Until(t) => {
                            let at = job.start + t.0;
                            if at > cur {
                                job.think_until = at;
                            }
                            continue;
                        }
                        Next::Drain => {
                            if job.inflight() > 0 {
                                job.draining = true;
                                break;
                            }
                            continue;
                        }
                        Next::Io(io) => {
                            job.issued += 1;
                            job.issued_bytes += io.nr_sectors as u64 * 512;
                            Bio::new(io.op, io.sector, io.nr_sectors)
                                .with_flags(io.flags)
                                .with_ioprio(job.def.ioprio)
                                .with_issuer(job.def.issuer, job.def.group)
                        }
                    }
                }
            };
            let job = &mut self.jobs[j];
            let seq = job.next_seq;
            job.next_seq += 1;
            let slot = job.outstanding.insert(Slot {
                seq,
                submit_start: cur,
                submit_end: cur,
                bytes: bio.bytes(),
                op: bio.op,
            });
            let bio = bio.with_private(cookie(j, slot, seq));
            self.total_outstanding += 1;
            cur += self.cfg.cost.app_submit_ns;
            let start = cur;
            let mut outcome = None;
            cur = self.op(c, cur, |q, sub, now| {
                outcome = Some(q.submit_bio(sub, bio, now));
            });
            match outcome.expect("submit ran") {
                Submit::Queued | Submit::Merged | Submit::Failed => {
                    if let Some(e) = self.jobs[j].outstanding.get_mut(slot) {
                        e.submit_start = start;
                        e.submit_end = cur;
                    }
                }
                Submit::Busy(bio) => {
                    // No tag: sleep until one frees (sbitmap's wait queue).
                    self.jobs[j].outstanding.take(slot, seq);
                    self.total_outstanding -= 1;
                    self.jobs[j].pending = Some(bio);
                    self.cpus[ci].tag_wait = true;
                    break;
                }
            }
            in_batch += 1;
            if plugged && in_batch >= batch {
                cur = self.op(c, cur, |q, sub, now| q.flush_plug(sub, now));
                in_batch = 0;
            }
        }
        if plugged {
            cur = self.op(c, cur, |q, sub, now| q.finish_plug(sub, now));
        }
        // Inline completions (and errors) land in `done` during submission.
        if !self.cpus[ci].sub.done.is_empty() {
            self.wake(c, cur);
        }
        let job = &mut self.jobs[j];
        if job.done_issuing && job.inflight() == 0 && job.pending.is_none() && !job.finished {
            job.finished = true;
            self.unfinished -= 1;
            job.end = job.end.max(cur);
        }
        Ok(cur)
    }

    /// Jobs that finished issuing are marked finished once their last bio is back.
    fn check(&mut self) -> Result<(), SimError> {
        let q = self.queue.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q.check_invariants()));
        if let Err(p) = r {
            return Err(self.invariant(panic_text(&p)));
        }
        // Every outstanding bio is accounted for: in the queue or at the driver.
        let outstanding: u64 = self.jobs.iter().map(|j| j.inflight() as u64).sum();
        if outstanding > 0 && self.queue.nr_allocated() == 0 && !self.any_bio_parked() {
            return Err(self.invariant(format!(
                "{outstanding} bios outstanding but no request is allocated"
            )));
        }
        Ok(())
    }

    /// Completed bios waiting on a CPU's lists to be reaped.
    fn any_bio_parked(&self) -> bool {
        self.cpus.iter().any(|c| !c.sub.done.is_empty())
            || (0..self.nr_ctx).any(|c| self.queue.ctx(CtxIdx(c as u16)).has_remote())
    }

    fn dump(&self) -> String {
        let mut s = format!(
            "virtual time {} ns, events {}, completed {}\n",
            self.now, self.events, self.completed
        );
        for (i, j) in self.jobs.iter().enumerate() {
            s += &format!(
                "job {i} '{}' cpu {} inflight {} issued {} pending {} draining {} done_issuing {} finished {} first outstanding {:?}\n",
                j.def.name,
                j.def.cpu,
                j.inflight(),
                j.issued,
                j.pending.is_some(),
                j.draining,
                j.done_issuing,
                j.finished,
                j.outstanding.first()
            );
        }
        s += &self.queue.debug_state();
        s += "\n";
        s += &self.driver.debug_state();
        s
    }

    fn invariant(&self, msg: String) -> SimError {
        SimError::Invariant {
            msg,
            dump: self.dump(),
        }
    }

    fn stall(&self, msg: String) -> SimError {
        SimError::Stall {
            msg,
            dump: self.dump(),
        }
    }

    fn finish(self) -> Result<SimResult, SimError> {
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
        let hctx_stats = (0..self.nr_hw)
            .map(|h| {
                let s = &self.queue.hctx(HctxIdx(h as u16)).stats;
                (s.run.get(), s.issued.get())
            })
            .collect();
        let end = self.jobs.iter().map(|j| j.end).max().unwrap_or(self.now);
        let jobs = self
            .jobs
            .into_iter()
            .map(|mut j| {
                // Statistics start after the ramp, as the threaded runner's do.
                j.start = (j.start + j.def.ramp.0).min(j.end);
                let rt = j.end.saturating_sub(j.start);
                j.stats.job_runtime_ns = rt;
                for d in 0..2 {
                    if j.stats.dirs[d].total_ios > 0 {
                        j.stats.dirs[d].runtime_ns = rt;
                    }
                }
                if j.errors > 0 {
                    j.stats.error = 5; // EIO, as fio reports a job that saw I/O errors
                    j.stats.error_text = format!("{} I/O errors", j.errors);
                }
                JobResult {
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
            sched: mqblk_sched::SchedStats::of(self.queue.elevator()),
            hctx_stats,
        })
    }
}

/// The message of a caught panic.
pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".into()
    }
}
