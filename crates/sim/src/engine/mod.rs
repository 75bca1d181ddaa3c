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
//! - `Work`: with `kblockd_runs`, a kblockd worker starts a while after its work came due
//!   (drawn from the kernel's start latencies measured here, so which of several due queues
//!   runs first is a race, as between the kernel's per-CPU workers): a hardware queue's run
//!   on the queue's CPU, or the requeue work on the CPU that kicked it.
//! - `Start(job)`: a job begins.
//!
//! Each CPU operation executes the shared core code at once (with `now` = the operation's
//! start) and is then charged from the cost model ([`crate::cost`]) step by step, locks
//! included; the CPU is busy until the charged end. Commands the operation posted reach the
//! device when their doorbell step ends.
//!
//! This file holds the configuration, the event loop and the device's events; the rest is
//! beside it: `cpu.rs` (a CPU's step: reaping and submitting for its jobs), `charge.rs`
//! (charging an operation's steps and locks), `check.rs` (the checker, dumps, errors) and
//! `result.rs` (what a run produced).

mod charge;
mod check;
mod cpu;
mod result;

pub use result::{HctxFigures, JobResult, LockReport, SimResult};

use crate::cost::{core_cost, kblockd_start_ns, CostProfile, CostTable, KernelCosts, LockState};
use crate::crash::{stamp, Crash, CrashReport, Oracle};
use crate::device::{self, CompletionCpu, DeviceSpec, DriverCost};
use crate::driver::{Faults, OpLog, Plant, SimDriver, Staged, Step};
use crate::workload::{Gate, JobIo, Next, SimJob};
use crate::SimRng;
use mqblk_core::{
    Bio, BlkStatus, CtxIdx, ElvCost, HctxIdx, HctxType, LockScope, Nanos, ReqOp, RequestQueue,
    Submit, Submitter, TagSet, TagSetConfig, TraceAction, TraceHook, Tracer,
};
use mqblk_device::{new_queue, DeviceConfig, QueueSettings};
use mqblk_workload::steadystate::{
    MemberSpec, Sample as SteadySample, SteadyMonitor, TICK_NS as STEADY_TICK_NS,
};
use mqblk_workload::{Ddir, JobStats};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Everything a run is made of, apart from its jobs.
#[derive(Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub nr_cpus: u16,
    /// The device and the request queue over it, as a real-time run describes them: in
    /// virtual time the device is its model ([`DeviceConfig::model_spec`]), with the
    /// driver's fault injection, and the queue is built as a real-time device's. Its
    /// cgroups are the ones the jobs' `group` ids refer to (BFQ reads their weights).
    pub device: DeviceConfig,
    /// The simulator's own faults at issue.
    pub faults: Faults,
    pub plant: Option<Plant>,
    /// Every job writes a zoned device only at its zones' write pointers (fio's
    /// zonemode=zbd): a write the device refuses for starting elsewhere then broke the
    /// block layer's zone write plugging, and ends the run as a broken invariant. Without
    /// it such a write is the job's own doing (the kernel sends the first write to an empty
    /// zone wherever it starts) and fails with an I/O error, as on a real device.
    pub zoned_in_order: bool,
    pub cost: CostTable,
    /// The machine's CPUs and what a cache line costs between two of them (`None`: the
    /// cost table's `line_ns` between any two).
    pub topology: Option<crate::topology::Topology>,
    /// Whose scheduler hook costs are charged: mqblk's own or the kernel's.
    pub profile: CostProfile,
    /// The kernel's figures, for the kernel profile.
    pub kernel_costs: KernelCosts,
    /// Overrides the scheduler's costs (whatever the profile).
    pub elv_cost: Option<ElvCost>,
    /// Check the queue's invariants every this many events (0: only at the end).
    pub check_every: u64,
    /// Give up (a stall) past this much virtual time.
    pub max_time: Nanos,
    /// Also send every core event here (blktrace output).
    pub tracer: Option<Arc<dyn Tracer>>,
    /// Cut the power during the run and check what survives ([`Sim::run_to_cut`]).
    pub crash: Option<Crash>,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 1,
            nr_cpus: 1,
            device: DeviceConfig::model(
                DeviceSpec {
                    model: "null".into(),
                    params: Vec::new(),
                },
                QueueSettings::default(),
            ),
            faults: Faults::default(),
            plant: None,
            zoned_in_order: false,
            cost: CostTable::default(),
            topology: None,
            profile: CostProfile::default(),
            kernel_costs: KernelCosts::default(),
            elv_cost: None,
            check_every: 0,
            max_time: Nanos::from_secs(3600),
            tracer: None,
            crash: None,
        }
    }
}

/// Why a run did not finish cleanly. `dump` is the state at the failure.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configuration cannot be built (bad job or CPU settings...).
    #[error("{0}")]
    Config(String),
    /// The device model's parameters.
    #[error(transparent)]
    Model(#[from] mqblk_models::ModelError),
    /// The jobs' options (as `mqblk bench` would refuse them).
    #[error(transparent)]
    Job(#[from] mqblk_workload::JobError),
    /// A job's cgroup.
    #[error(transparent)]
    Cgroup(#[from] mqblk_workload::CgroupError),
    /// The queue over the model (scheduler, tunables, limits).
    #[error("sim: {0}")]
    Device(#[from] mqblk_device::DeviceError),
    /// An invariant was violated.
    #[error("invariant violated: {msg}")]
    Invariant { msg: String, dump: String },
    /// Work is queued or in flight and nothing will move it.
    #[error("stall: {msg}")]
    Stall { msg: String, dump: String },
}

impl SimError {
    pub fn dump(&self) -> &str {
        match self {
            SimError::Invariant { dump, .. } | SimError::Stall { dump, .. } => dump,
            _ => "",
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ev {
    Cpu(u16),
    /// A posted command (its slot in `in_transit`) reaches the device.
    Arrive(u32),
    Dev,
    Timer,
    Start(u32),
    /// A kblockd worker starts (`QueueSettings::kblockd_runs`).
    Work(Work),
    /// fio's steady-state check, every second ([`SteadyMonitor`]).
    Steady,
}

/// What a kblockd worker executes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Work {
    /// Hardware queue `h`'s run work (`blk_mq_run_work_fn`).
    Run(u16),
    /// The requeue work (`blk_mq_requeue_work`), on this CPU.
    Requeue(u16),
}

impl Ev {
    /// Bits an event takes in its heap entry, below the sequence number: a 3-bit kind and
    /// a 21-bit payload. A heap entry is one 128-bit integer, the time above the sequence
    /// and event, so its sifts make one comparison each, in (time, sequence) order.
    const BITS: u32 = 24;
    const PAYLOAD: u64 = (1 << 21) - 1;

    #[inline]
    fn pack(self) -> u64 {
        let (kind, payload) = match self {
            Ev::Cpu(c) => (0, u64::from(c)),
            Ev::Arrive(k) => (1, u64::from(k)),
            Ev::Dev => (2, 0),
            Ev::Timer => (3, 0),
            Ev::Start(j) => (4, u64::from(j)),
            Ev::Work(Work::Run(h)) => (5, u64::from(h)),
            Ev::Work(Work::Requeue(c)) => (6, u64::from(c)),
            Ev::Steady => (7, 0),
        };
        // In-flight commands and jobs are far fewer than 2^21; more would be a bug.
        assert!(
            payload <= Self::PAYLOAD,
            "event payload {payload} too large"
        );
        (kind << 21) | payload
    }

    #[inline]
    fn unpack(x: u64) -> Ev {
        let payload = x & Self::PAYLOAD;
        match (x >> 21) & 7 {
            0 => Ev::Cpu(payload as u16),
            1 => Ev::Arrive(payload as u32),
            2 => Ev::Dev,
            3 => Ev::Timer,
            4 => Ev::Start(payload as u32),
            5 => Ev::Work(Work::Run(payload as u16)),
            6 => Ev::Work(Work::Requeue(payload as u16)),
            _ => Ev::Steady,
        }
    }
}

struct Cpu {
    sub: Submitter,
    jobs: Vec<u32>,
    busy_until: u64,
    busy_ns: u64,
    /// Its jobs' user work (`Next::Compute`) is taken until then.
    user_until: u64,
    wake_at: Option<u64>,
    irqs: u32,
    woken_remote: bool,
    /// A device's worker woke here from sleep ([`DriverCost::worker_wake_ns`]).
    worker_woken: bool,
    /// Jobs of this CPU that wait for a free tag.
    tag_wait: bool,
    /// An operation here requeued a request since its tasks last looked for the requeue
    /// work ([`Sim::kblockd_preempts`]).
    requeued: bool,
    /// Rotates which job submits first, so jobs sharing a CPU share it fairly.
    rr: usize,
}

struct JobRun {
    def: SimJob,
    rng: SimRng,
    started: bool,
    /// Its start is scheduled (its barrier opened and what it waits for finished).
    start_due: bool,
    /// Outstanding bios, in slots named by their cookies.
    outstanding: Slab,
    next_seq: u64,
    issued: u64,
    issued_bytes: u64,
    pending: Option<Bio>,
    /// The index (its source's order) of the I/O in `pending`.
    pending_index: u64,
    /// When the I/O in `pending` was first submitted: the time it sleeps for a tag is part
    /// of its latency, as the submitter's sleep in `blk_mq_get_tag` is part of the
    /// system call fio and dbench time.
    pending_since: Option<u64>,
    /// Which of its I/Os have completed, for jobs that wait on them ([`Next::After`]).
    completed: Completed,
    /// The other job's I/O, or the gate, it waits for.
    waiting_for: Option<Awaited>,
    think_until: u64,
    /// Waiting at full depth for `batch_complete_min` completions.
    refilling: bool,
    /// Completions since the job last issued (fio's completion distribution).
    reaped: u64,
    draining: bool,
    done_issuing: bool,
    finished: bool,
    stats: JobStats,
    ios: u64,
    bytes: u64,
    /// Reads, writes and trims completed since the start, ramp included (fio's
    /// `io_blocks` and `io_bytes`, what steady state samples).
    done_ios: u64,
    done_bytes: u64,
    /// fio's bandwidth and IOPS samples, from the ramp's end.
    sampler: mqblk_workload::RateSampler,
    errors: u64,
    start: u64,
    end: u64,
    /// When the job's source started the statistics over (fio's latency-target search),
    /// and the error that ended it, if any.
    restarted_at: Option<u64>,
    error_text: Option<String>,
}

/// What a job sleeps for ([`Next::After`], [`Next::Await`]).
pub(super) enum Awaited {
    Io(JobIo),
    Gate(Arc<Gate>, u64),
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
    /// The I/O's index in the order its source returned them.
    index: u64,
    submit_start: u64,
    submit_end: u64,
    bytes: u64,
    op: ReqOp,
}

/// The I/O indices of a job that have completed: all below `below`, and those in `above`
/// (completions out of order; as many as were in flight at once).
#[derive(Default)]
struct Completed {
    below: u64,
    above: std::collections::BTreeSet<u64>,
}

impl Completed {
    fn mark(&mut self, i: u64) {
        if i == self.below {
            self.below += 1;
            while self.above.remove(&self.below) {
                self.below += 1;
            }
        } else if i > self.below {
            self.above.insert(i);
        }
    }
    fn has(&self, i: u64) -> bool {
        i < self.below || self.above.contains(&i)
    }
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
    /// mq-deadline's per-CPU sums (before its O(1) queued count) are on: charge each summing pass it reports.
    track_sum_passes: bool,
    sum_passes: u64,
    cpus: Vec<Cpu>,
    jobs: Vec<JobRun>,
    irq_cpu: Vec<u16>,
    /// time << 64 | sequence << [`Ev::BITS`] | packed event, least first.
    heap: BinaryHeap<Reverse<u128>>,
    seq: u64,
    now: u64,
    locks: Vec<LockState>,
    nr_hw: usize,
    nr_ctx: usize,
    dev_armed: Option<u64>,
    timer_armed: Option<u64>,
    last_timer_at: Option<u64>,
    events: u64,
    /// Events left before the next invariant check (`check_every`; 0: none).
    until_check: u64,
    completed: u64,
    last_progress: u64,
    total_outstanding: u64,
    unfinished: usize,
    /// Jobs waiting for another job's I/O or for a gate, and of those for a gate (which a
    /// source may raise whenever it is asked: only then is each ask followed by a look).
    nr_waiting: u32,
    nr_gate_waiting: u32,
    steps: Vec<Step>,
    staged: Vec<Staged>,
    /// Commands posted and not yet at the device, by key (a slot reused through `transit_free`).
    in_transit: Vec<Option<Staged>>,
    transit_free: Vec<u32>,
    pending_arrivals: Vec<u32>,
    dev_scratch: Vec<mqblk_models::port::Finished>,
    hw_scratch: Vec<u16>,
    /// A worker-completed device's worker ([`CompletionCpu::Worker`]): the CPU it last ran
    /// on, and until when it is busy there with the completions it was handed.
    worker: Option<(u16, u64)>,
    /// [`SimDriver::gate_polls`].
    gate_polls: bool,
    /// Scratch: the jobs a CPU step's completions wake (`wake_ns` each).
    woken_jobs: Vec<usize>,
    wake_list: Vec<u16>,
    /// Draws the kblockd workers' wake-ups.
    work_rng: SimRng,
    due_runs: Vec<HctxIdx>,
    /// The queue has a scheduler (the simulator never switches it).
    has_elv: bool,
    /// fio's steady-state detection, when a job asks for it.
    steady: Option<SteadyMonitor>,
    /// An operation ran on the queue since the timer was last armed: only then can its
    /// next deadline have moved.
    queue_touched: bool,
    /// With a power cut due: what the submitters were told, the commands the device has
    /// finished, and whether the cut has come.
    oracle: Option<Oracle>,
    dev_finished: u64,
    cut: bool,
}

impl Sim {
    /// Builds a simulation. It runs on the thread that builds it: its queue's locks are
    /// confined to that thread ([`mqblk_core::sync`]), one thread running the whole machine.
    pub fn new(cfg: SimConfig, jobs: Vec<SimJob>) -> Result<Sim, SimError> {
        let _one_thread = mqblk_core::sync::confine_to_this_thread();
        let mut rng = SimRng::new(cfg.seed);
        if cfg.nr_cpus == 0 {
            return Err(SimError::Config("sim: at least one CPU is needed".into()));
        }
        if jobs.is_empty() {
            return Err(SimError::Config("sim: no jobs".into()));
        }
        if let Some(t) = cfg
            .topology
            .as_ref()
            .filter(|t| cfg.nr_cpus as u32 > t.cpus())
        {
            return Err(SimError::Config(format!(
                "sim: {} CPUs, but the topology {} has {}",
                cfg.nr_cpus,
                t.name,
                t.cpus()
            )));
        }
        let model = device::build(&cfg.device.model_spec()?, rng.fork(1))?;
        let log = Arc::new(OpLog::new(cfg.tracer.clone()));
        let inject = cfg.device.driver.faults();
        inject
            .validate()
            .map_err(|e| SimError::Config(format!("sim: {e}")))?;
        let driver = Arc::new(SimDriver::new(
            model,
            log.clone(),
            &inject,
            cfg.faults,
            cfg.plant,
            rng.fork(2),
        ));
        let gate_polls = driver.gate_polls();
        if cfg.crash.is_some() {
            driver.keep_media();
        }
        let nr_hw = driver.nr_hw_queues();
        let set = TagSet::new(TagSetConfig::new(nr_hw, driver.queue_depth()))
            .map_err(|e| SimError::Config(format!("sim: tag set: {e}")))?;
        // Resolved by name or alias: the type carries its own hooks' costs and locks.
        let elv_type = cfg
            .device
            .queue
            .elevator_type(&set.cfg)
            .map_err(|e| SimError::Config(format!("sim: {e}")))?;
        let elv = cfg.elv_cost.unwrap_or_else(|| {
            cfg.profile
                .elv_cost(elv_type.name, elv_type.cost, &cfg.kernel_costs)
        });
        let limits = driver.queue_limits();
        let queue = new_queue(
            set,
            driver.clone(),
            &cfg.device.queue,
            cfg.nr_cpus,
            limits,
            TraceHook::new(log.clone()),
            cfg.device.blkcg.clone(),
        )?;
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
                user_until: 0,
                busy_ns: 0,
                wake_at: None,
                irqs: 0,
                woken_remote: false,
                worker_woken: false,
                tag_wait: false,
                requeued: false,
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
            let sampler =
                mqblk_workload::RateSampler::new(def.bw_avg_ms, def.iops_avg_ms, def.ramp.0);
            runs.push(JobRun {
                rng: rng.fork(100 + i as u64),
                stats: {
                    let mut s = JobStats {
                        latency_depth: def.iodepth,
                        ..JobStats::new(&def.name)
                    };
                    def.source.describe(&mut s);
                    s
                },
                def,
                started: false,
                start_due: false,
                outstanding: Slab::default(),
                next_seq: 0,
                issued: 0,
                issued_bytes: 0,
                pending: None,
                pending_index: 0,
                pending_since: None,
                completed: Completed::default(),
                waiting_for: None,
                think_until: 0,
                refilling: false,
                reaped: 0,
                draining: false,
                done_issuing: false,
                finished: false,
                ios: 0,
                bytes: 0,
                done_ios: 0,
                done_bytes: 0,
                sampler,
                errors: 0,
                start: 0,
                end: 0,
                restarted_at: None,
                error_text: None,
            });
        }
        let nr_locks = 1 + nr_hw as usize + nr_ctx + nr_hw as usize;
        let unfinished = runs.len();
        let has_elv = queue.elevator().is_some();
        let members: Vec<MemberSpec> = runs
            .iter()
            .map(|r| MemberSpec {
                steady: r.def.steady,
                group: r.def.exit.groupid,
                group_reporting: r.def.group_reporting,
            })
            .collect();
        let steady = SteadyMonitor::new(&members).map_err(SimError::Config)?;
        let cfg_crash = cfg.crash.is_some();
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
            until_check: 0,
            completed: 0,
            last_progress: 0,
            total_outstanding: 0,
            unfinished,
            nr_waiting: 0,
            nr_gate_waiting: 0,
            steps: Vec::with_capacity(64),
            staged: Vec::new(),
            in_transit: Vec::new(),
            transit_free: Vec::new(),
            pending_arrivals: Vec::new(),
            dev_scratch: Vec::new(),
            hw_scratch: Vec::new(),
            worker: None,
            gate_polls,
            woken_jobs: Vec::new(),
            wake_list: Vec::new(),
            work_rng: rng.fork(3),
            due_runs: Vec::new(),
            has_elv,
            queue_touched: true,
            steady,
            oracle: cfg_crash.then(Oracle::default),
            dev_finished: 0,
            cut: false,
        })
    }

    pub fn queue(&self) -> &Arc<RequestQueue> {
        &self.queue
    }

    /// The scheduler the queue runs: the one asked for, or the device's default.
    pub fn scheduler(&self) -> &'static str {
        self.queue.elevator().map_or("none", |e| e.name())
    }

    #[inline]
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        let key = (self.seq << Ev::BITS) | ev.pack();
        self.heap
            .push(Reverse((u128::from(t) << 64) | u128::from(key)));
    }

    #[inline]
    fn wake(&mut self, c: u16, t: u64) {
        let cpu = &mut self.cpus[c as usize];
        let at = t.max(cpu.busy_until);
        if cpu.wake_at.is_none_or(|w| w > at) {
            cpu.wake_at = Some(at);
            self.push(at, Ev::Cpu(c));
        }
    }

    #[inline]
    fn arm_dev(&mut self, next: Option<Nanos>) {
        if let Some(t) = next {
            let t = t.0.max(self.now);
            if self.dev_armed.is_none_or(|a| a > t) {
                self.dev_armed = Some(t);
                self.push(t, Ev::Dev);
            }
        }
    }

    #[inline]
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

    /// Schedules the start of every job of `barrier` that waits for nothing unfinished,
    /// each `start_at` after `t`.
    pub(crate) fn start_barrier(&mut self, barrier: u32, t: u64) {
        for j in 0..self.jobs.len() {
            if self.jobs[j].def.barrier == barrier {
                self.start_if_ready(j, t);
            }
        }
    }

    /// Schedules job `j`'s start `start_at` after `t` if every job it waits for
    /// (`wait_for`) has finished and it is not scheduled yet.
    fn start_if_ready(&mut self, j: usize, t: u64) {
        let ready = self.jobs[j]
            .def
            .after
            .iter()
            .all(|&k| self.jobs.get(k as usize).is_none_or(|o| o.finished));
        if ready && !self.jobs[j].start_due {
            self.jobs[j].start_due = true;
            let at = t + self.jobs[j].def.start_at.0;
            self.push(at, Ev::Start(j as u32));
        }
    }

    /// Whether a job waiting for `w` may go on: the I/O completed, or its job will never
    /// issue it; the gate reached the count.
    fn wait_over(&self, w: &Awaited) -> bool {
        match w {
            Awaited::Io(w) => {
                let Some(o) = self.jobs.get(w.job as usize) else {
                    return true;
                };
                o.completed.has(w.io) || (o.done_issuing && w.io >= o.issued)
            }
            Awaited::Gate(g, n) => g.get() >= *n,
        }
    }

    /// Wakes the CPUs of jobs whose awaited I/O is done or whose gate opened.
    pub(super) fn wake_waiters(&mut self, t: u64) {
        if self.nr_waiting == 0 {
            return;
        }
        for k in 0..self.jobs.len() {
            if let Some(w) = &self.jobs[k].waiting_for {
                if self.wait_over(w) {
                    let c = self.jobs[k].def.cpu;
                    self.wake(c, t);
                }
            }
        }
    }

    /// A job's wait `w` is over (or given up): it no longer counts as waiting.
    fn wait_ended(&mut self, w: &Awaited) {
        self.nr_waiting -= 1;
        if matches!(w, Awaited::Gate(..)) {
            self.nr_gate_waiting -= 1;
        }
    }

    /// Whether every job but `j` has finished (none is left to raise a gate `j` waits on).
    fn alone(&self, j: usize) -> bool {
        self.jobs
            .iter()
            .enumerate()
            .all(|(k, o)| k == j || o.finished)
    }

    /// Wakes the CPUs of jobs whose gate opened (a source raised it as it was asked); the
    /// jobs waiting for I/O are woken by its completion.
    pub(super) fn wake_gate_waiters(&mut self, t: u64) {
        for k in 0..self.jobs.len() {
            if let Some(w @ Awaited::Gate(..)) = &self.jobs[k].waiting_for {
                if self.wait_over(w) {
                    let c = self.jobs[k].def.cpu;
                    self.wake(c, t);
                }
            }
        }
    }

    /// Job `j` finished at `t`: the jobs waiting for it in an open barrier may start, and
    /// the last job of a barrier out opens the next (fio's `stonewall`).
    pub(crate) fn job_finished(&mut self, j: usize, t: u64) {
        // fio's `exitall` / `exitall_on_error`: the jobs its end terminates end their main
        // phase at the next I/O they would issue; one not started yet ends as it starts.
        let exit = self.jobs[j].def.exit;
        let failed = self.jobs[j].errors > 0 || self.jobs[j].error_text.is_some();
        for k in 0..self.jobs.len() {
            let o = &mut self.jobs[k];
            if k != j && !o.finished && exit.ends(failed, &o.def.exit, o.started) {
                o.def.source.stop();
            }
        }
        self.wake_waiters(t);
        // A job asleep on a gate with no one left to raise it ends.
        for k in 0..self.jobs.len() {
            if matches!(self.jobs[k].waiting_for, Some(Awaited::Gate(..))) && self.alone(k) {
                let c = self.jobs[k].def.cpu;
                self.wake(c, t);
            }
        }
        let barrier = self.jobs[j].def.barrier;
        let open = |jobs: &[JobRun], b: u32| jobs.iter().all(|o| o.def.barrier >= b || o.finished);
        for k in 0..self.jobs.len() {
            let waits = self.jobs[k].def.after.contains(&(j as u32));
            if waits && open(&self.jobs, self.jobs[k].def.barrier) {
                self.start_if_ready(k, t);
            }
        }
        if self
            .jobs
            .iter()
            .all(|o| o.def.barrier != barrier || o.finished)
        {
            self.start_barrier(barrier + 1, t);
        }
    }

    /// Runs the simulation to the end and checks it. Core assertion failures panic; callers
    /// that want to survive them (the fuzzer) run this under `catch_unwind`.
    pub fn run(mut self) -> Result<SimResult, SimError> {
        let _one_thread = mqblk_core::sync::confine_to_this_thread();
        self.event_loop()?;
        if !self.jobs.iter().all(|j| j.finished) {
            return Err(self.stall("no event left while jobs are unfinished".into()));
        }
        self.check()?;
        self.finish()
    }

    /// Runs the simulation until its power cut ([`SimConfig::crash`]), or to its end if
    /// that comes first, cuts the power and checks what the device's medium holds against
    /// what the submitters were told ([`crate::crash`]). The queue's invariants are checked
    /// at the cut.
    pub fn run_to_cut(mut self) -> Result<CrashReport, SimError> {
        let Some(crash) = self.cfg.crash else {
            return Err(SimError::Config("sim: no power cut configured".into()));
        };
        let _one_thread = mqblk_core::sync::confine_to_this_thread();
        self.event_loop()?;
        let mid_run = self.cut;
        if !mid_run && !self.jobs.iter().all(|j| j.finished) {
            return Err(self.stall("no event left while jobs are unfinished".into()));
        }
        self.check()?;
        let mut rng = SimRng::new(crash.seed);
        let (content, media, in_flight) = self
            .driver
            .power_cut(&mut rng)
            .expect("the media is kept for a power cut");
        let oracle = self.oracle.take().unwrap_or_default();
        let verdict = oracle.check(&content);
        Ok(CrashReport {
            cut_at_ns: self.now,
            mid_run,
            writes_completed: oracle.writes_completed(),
            writes_required: verdict.required,
            flushes_completed: oracle.flushes_completed(),
            in_flight,
            extents: content.len(),
            media,
            violations: verdict.violations,
        })
    }

    /// Runs events until every job has finished, the power is cut, or no event is left.
    fn event_loop(&mut self) -> Result<(), SimError> {
        // A simulation that panicked on this thread may have left steps behind.
        self.log.drain_into(&mut self.steps);
        self.steps.clear();
        self.log.take_staged(&mut self.staged);
        self.staged.clear();
        // Jobs behind a `stonewall` start when the barrier before them empties.
        let first = self.jobs.iter().map(|j| j.def.barrier).min().unwrap_or(0);
        self.start_barrier(first, 0);
        if self.steady.is_some() {
            self.push(STEADY_TICK_NS, Ev::Steady);
        }
        // A slow disk with a long queue can go seconds between completions; the kernel's own
        // timeout (30 s by default) is the real bound.
        let stall_after = self
            .cfg
            .device
            .queue
            .timeout
            .0
            .saturating_mul(3)
            .max(10_000_000_000);
        self.until_check = self.cfg.check_every;
        while let Some(Reverse(entry)) = self.heap.pop() {
            let (t, ev) = ((entry >> 64) as u64, Ev::unpack(entry as u64));
            debug_assert!(t >= self.now, "time went backwards");
            self.now = t;
            self.events += 1;
            // Every `check_every`th event is checked once it is handled (not one that
            // turns out stale and is skipped).
            let check_due = self.until_check == 1;
            if self.until_check > 0 {
                self.until_check -= 1;
                if check_due {
                    self.until_check = self.cfg.check_every;
                }
            }
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
                    // fio's `exec_prerun` (run now, in host time): if it fails the job
                    // issues nothing.
                    if let Some(cmd) = &job.def.exec_prerun {
                        if !mqblk_workload::exec::run_hook(&job.def.name, cmd, "prerun") {
                            job.done_issuing = true;
                        }
                    }
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
                Ev::Arrive(staged) => {
                    if self.dev_armed.is_some_and(|a| a <= t) {
                        self.dev_tick(t);
                    }
                    let s = self.in_transit[staged as usize]
                        .take()
                        .expect("a command arrived twice");
                    self.transit_free.push(staged);
                    let next = match self.driver.submit_to_model(s.hw, s.cmd, Nanos(t)) {
                        Ok(next) => next,
                        Err(v) if self.cfg.zoned_in_order => return Err(self.invariant(v)),
                        Err(_) => self.driver.model_next_event(),
                    };
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
                    if self.cfg.device.queue.kblockd_runs {
                        self.queue_due_work(end);
                    }
                }
                Ev::Steady => {
                    self.steady_check(t);
                    if self.unfinished > 0 {
                        self.push(t + STEADY_TICK_NS, Ev::Steady);
                    }
                }
                Ev::Work(w) => {
                    // The worker runs once the CPU is free (a kblockd worker is high
                    // priority, but what the CPU is doing is a few microseconds of
                    // block-layer work at most).
                    let c = match w {
                        Work::Requeue(c) => c,
                        Work::Run(h) => self.irq_cpu[h as usize],
                    };
                    let start = t.max(self.cpus[c as usize].busy_until);
                    let end = self.op(c, start, |q, sub, now| match w {
                        Work::Requeue(_) => q.requeue_work(sub, now),
                        Work::Run(h) => q.run_work(HctxIdx(h), sub, now),
                    });
                    let cpu = &mut self.cpus[c as usize];
                    cpu.busy_ns += end - start;
                    cpu.busy_until = end;
                    if !cpu.sub.done.is_empty() {
                        self.wake(c, end);
                    }
                }
            }
            if std::mem::take(&mut self.queue_touched) {
                self.arm_timer();
            }
            if check_due {
                self.check()?;
            }
            if self.unfinished == 0 || self.cut {
                break;
            }
            if self.total_outstanding > 0 && t.saturating_sub(self.last_progress) > stall_after {
                return Err(self.stall(format!(
                    "no bio completed for {} ms of virtual time while some are in flight",
                    (t - self.last_progress) / 1_000_000
                )));
            }
        }
        Ok(())
    }

    /// Hands the due requeue work and every due hardware-queue run to their workers: the
    /// requeue work starts on the CPU that kicked it, a run on the queue's first CPU (the
    /// kernel's `blk_mq_hctx_next_cpu` rotates over the queue's CPUs every
    /// `BLK_MQ_CPU_WORK_BATCH` runs; the scenarios that use this map one CPU per queue), each
    /// after a start latency drawn from the kernel's, measured here
    /// ([`crate::cost::KBLOCKD_START_US`]).
    fn queue_due_work(&mut self, t: u64) {
        if let Some(c) = self.queue.take_due_requeue(Nanos(t)) {
            let at = t + kblockd_start_ns(self.work_rng.unit());
            self.push(at, Ev::Work(Work::Requeue(c.0)));
        }
        let mut due = std::mem::take(&mut self.due_runs);
        due.clear();
        self.queue.take_due_runs(Nanos(t), &mut due);
        for &h in &due {
            let at = t + kblockd_start_ns(self.work_rng.unit());
            self.push(at, Ev::Work(Work::Run(h.0)));
        }
        self.due_runs = due;
    }

    /// fio's helper thread's steady-state check at `t`: the jobs whose window held
    /// steady end their main phase at the next I/O they would issue.
    fn steady_check(&mut self, t: u64) {
        let Some(m) = &mut self.steady else { return };
        let samples: Vec<SteadySample> = self
            .jobs
            .iter()
            .map(|j| SteadySample {
                running: j.started && !j.finished,
                started_at: j.start,
                ios: j.done_ios,
                bytes: j.done_bytes,
            })
            .collect();
        for k in m.tick(t, &samples) {
            let j = &mut self.jobs[k];
            if !j.finished {
                j.def.source.stop();
                let c = j.def.cpu;
                self.wake(c, t);
            }
        }
    }

    /// The CPU that handles hardware queue `hw`'s completions at `t`
    /// ([`DriverCost::completions`]).
    fn completion_cpu(&mut self, hw: u16, t: u64) -> u16 {
        let mapped = self.irq_cpu[hw as usize];
        match self.dcost.completions {
            CompletionCpu::Mapped => mapped,
            CompletionCpu::Cpu(c) => c % self.cfg.nr_cpus,
            CompletionCpu::Worker => {
                let idle = |c: u16| {
                    let cpu = &self.cpus[c as usize];
                    cpu.busy_until <= t && cpu.wake_at.is_none() && cpu.irqs == 0
                };
                let hosts_job = |c: u16| self.jobs.iter().any(|j| j.def.cpu == c && !j.finished);
                // A worker still going through the commands it was handed takes this one
                // too, where it runs (`loop_process_work` loops until its list is empty),
                // unless it shares that CPU with a job while another CPU with none is idle:
                // the CPU scheduler's load balancing moves it there.
                if let Some((w, until)) = self.worker {
                    if until > t || self.cpus[w as usize].irqs > 0 {
                        let free = (0..self.cfg.nr_cpus).find(|&c| idle(c) && !hosts_job(c));
                        let c = match free {
                            Some(c) if hosts_job(w) => c,
                            _ => w,
                        };
                        self.worker = Some((c, until));
                        return c;
                    }
                }
                // Asleep: woken where the CPU scheduler places it (`select_idle_sibling`):
                // its previous CPU if idle, else the queue's, else any idle one, else the
                // previous.
                let prev = self.worker.map_or(mapped, |(w, _)| w);
                let c = [prev, mapped]
                    .into_iter()
                    .find(|&c| idle(c))
                    .or_else(|| (0..self.cfg.nr_cpus).find(|&c| idle(c)))
                    .unwrap_or(prev);
                self.worker = Some((c, t));
                self.cpus[c as usize].worker_woken = true;
                c
            }
        }
    }

    fn dev_tick(&mut self, t: u64) {
        self.dev_armed = None;
        let (mut scratch, mut hws) = (
            std::mem::take(&mut self.dev_scratch),
            std::mem::take(&mut self.hw_scratch),
        );
        let next = self.driver.advance(Nanos(t), &mut scratch, &mut hws);
        if let Some(c) = self.cfg.crash {
            self.dev_finished += scratch.len() as u64;
            self.cut |= self.dev_finished >= c.cut_after;
        }
        for &hw in &hws {
            let c = self.completion_cpu(hw, t);
            self.cpus[c as usize].irqs += 1;
            self.wake(c, t);
        }
        self.dev_scratch = scratch;
        self.hw_scratch = hws;
        self.arm_dev(next);
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
