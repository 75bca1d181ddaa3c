//! `SimDriver`: the core's [`Driver`] over a [`DeviceModel`], with fault injection.
//!
//! `queue_rq` does not hand commands to the model at once: the engine first works out, from
//! the operation's CPU cost, *when* in virtual time the doorbell rang, and delivers each
//! command then ([`OpLog::take_staged`]). Completions go the other way: the engine lets
//! the model advance, [`SimDriver::advance`] files what finished as a raised interrupt, and
//! the core's `poll` on the interrupt CPU collects it.
//!
//! Faults mirror what real devices do to a block layer: refuse for a while (`BLK_STS_RESOURCE`
//! / `DEV_RESOURCE`), fail a command, lose one (only the request timeout ends it), or hand one
//! back for requeue. Planted bugs ([`Plant`]) exist to prove the checker catches them.

use crate::device::{Cmd, CompletionCpu, DeviceModel, DriverCost};
use crate::SimRng;
use mqblk_core::sync::Mutex;
use mqblk_core::FaultConfig;
use mqblk_core::{
    BlkStatus, CompletionBatch, Driver, EhReturn, HctxIdx, Nanos, QueueRqs, ReqFlags, Request,
    RqFlags, TraceAction, TraceEvent, Tracer,
};
use mqblk_models::media::{Content, Media, MediaPlant, MediaStats, Piece};
use mqblk_models::port::{Accept, Finished, ModelInfo, ModelPort};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the engine learns from one operation, in order: the core's events and the driver's
/// own work (each command posted, each doorbell).
#[derive(Copy, Clone, Debug)]
pub enum Step {
    Core(CoreStep),
    /// `queue_rq` accepted a command; `staged` indexes [`OpLog::take_staged`]'s list.
    QueueRq {
        hw: u16,
        staged: u32,
    },
    Doorbell {
        hw: u16,
    },
}

/// What the cost model needs of a core event (kept small: one is logged per event).
#[derive(Copy, Clone, Debug)]
pub struct CoreStep {
    pub action: mqblk_core::TraceAction,
    pub ctx: mqblk_core::CtxIdx,
    pub hctx: Option<HctxIdx>,
    /// The request goes through the elevator.
    pub sched: bool,
}

/// The operation log: the tracer the queue reports to, shared with the driver.
///
/// The steps go to a thread-local list rather than a locked one: a simulation runs on one
/// thread from start to end, and this sits on the hot path (several steps per request).
/// Each `Sim` drains the list after every operation, so simulations on different threads
/// (the test harness runs several) never see each other's steps.
#[derive(Default)]
pub struct OpLog {
    /// Where events also go (the `--trace` blktrace writer).
    forward: Option<Arc<dyn Tracer>>,
}

thread_local! {
    static STEPS: std::cell::RefCell<Vec<Step>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Commands `queue_rq` accepted during the operation in progress, for the engine to
    /// deliver at their doorbell's time (kept beside the steps, so no lock is taken).
    static STAGED: std::cell::RefCell<Vec<Staged>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl OpLog {
    pub fn new(forward: Option<Arc<dyn Tracer>>) -> OpLog {
        OpLog { forward }
    }
    fn push(&self, s: Step) {
        STEPS.with(|v| v.borrow_mut().push(s));
    }
    /// Moves the steps logged so far on this thread into `out` (cleared first).
    pub fn drain_into(&self, out: &mut Vec<Step>) {
        out.clear();
        STEPS.with(|v| std::mem::swap(&mut *v.borrow_mut(), out));
    }
    /// Files a command accepted by `queue_rq`; returns its index in the operation's list.
    fn stage(&self, s: Staged) -> u32 {
        STAGED.with(|v| {
            let mut v = v.borrow_mut();
            v.push(s);
            v.len() as u32 - 1
        })
    }
    /// Moves the commands staged so far on this thread into `out` (cleared first), indexed
    /// as the [`Step::QueueRq`] steps say.
    pub fn take_staged(&self, out: &mut Vec<Staged>) {
        out.clear();
        STAGED.with(|v| std::mem::swap(&mut *v.borrow_mut(), out));
    }
}

impl Tracer for OpLog {
    fn event(&self, ev: &TraceEvent) {
        self.push(Step::Core(CoreStep {
            action: ev.action,
            ctx: ev.ctx,
            hctx: ev.hctx,
            sched: ev.sched,
        }));
        if let Some(f) = &self.forward {
            f.event(ev);
        }
    }

    /// What the cost model needs, read from the request, without the whole event.
    #[inline]
    fn rq_event(&self, action: TraceAction, rq: &Request, now: Nanos) {
        self.push(Step::Core(CoreStep {
            action,
            ctx: rq.ctx,
            hctx: Some(rq.hctx),
            sched: rq.rq_flags.contains(RqFlags::USE_SCHED),
        }));
        if let Some(f) = &self.forward {
            f.rq_event(action, rq, now);
        }
    }
}

/// What goes wrong in the simulated driver beyond the device's own fault injection (the
/// null driver's, configured with the device: [`mqblk_device::DriverConfig::faults`]).
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Simulator only, per command (0.0 = never): `queue_rq` answers "busy"
    /// (`BLK_STS_RESOURCE`, or `DEV_RESOURCE` with commands in flight).
    pub busy: f64,
    /// Simulator only: `queue_rq` fails the command at once with an I/O error.
    pub fail_at_issue: f64,
}

impl Faults {
    /// Whether the simulator-only faults are armed.
    pub fn at_issue(&self) -> bool {
        self.busy + self.fail_at_issue > 0.0
    }
}

/// Deliberate bugs, for tests that prove the checkers find them: the first two and the
/// last break the queue's invariants (`--fuzz`), the other three the durability rules
/// (`--crash`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Plant {
    /// The `n`th completion is never reported (a lost interrupt the driver does not know).
    DropCompletion(u64),
    /// The `n`th completion is reported twice.
    DoubleCompletion(u64),
    /// From the `n`th flush on, the device completes flushes without writing its cache
    /// back: a flush completed before the writes it covers are durable.
    FlushEarly(u64),
    /// From the `n`th command holding a piece of a split bio on, the driver sends it
    /// without FUA: FUA dropped on a split.
    FuaSplitDrop(u64),
    /// From the `n`th write on, the driver reports a write complete but requeues it
    /// inside, and it reaches the device's cache only after the next flush has finished:
    /// a requeued write reordered across a flush.
    ReorderPastFlush(u64),
    /// The `n`th write to a zoned device goes one 4 KiB block past where it was aimed: a
    /// write off its zone's write pointer, as a broken zone write plug would send.
    ZoneSkip(u64),
}

impl Plant {
    /// The bugs by name, as `--plant` spells them.
    pub const NAMES: [&'static str; 6] = [
        "drop-completion",
        "double-completion",
        "flush-early",
        "fua-split-drop",
        "reorder-past-flush",
        "zone-skip",
    ];

    /// `BUG:N`, as `--plant` takes it.
    pub fn parse(value: &str) -> Result<Plant, String> {
        let (bug, n) = value
            .split_once(':')
            .ok_or_else(|| format!("--plant={value}: expected BUG:N"))?;
        let n: u64 = n
            .parse()
            .map_err(|_| format!("--plant={value}: {n} is not a number"))?;
        Ok(match bug {
            "drop-completion" => Plant::DropCompletion(n),
            "double-completion" => Plant::DoubleCompletion(n),
            "flush-early" => Plant::FlushEarly(n),
            "fua-split-drop" => Plant::FuaSplitDrop(n),
            "reorder-past-flush" => Plant::ReorderPastFlush(n),
            "zone-skip" => Plant::ZoneSkip(n),
            _ => {
                return Err(format!(
                    "--plant={value}: unknown bug '{bug}' ({})",
                    Plant::NAMES.join(", ")
                ))
            }
        })
    }

    /// The `--plant` argument that plants this bug again.
    pub fn arg(&self) -> String {
        let (name, n) = match *self {
            Plant::DropCompletion(n) => (Plant::NAMES[0], n),
            Plant::DoubleCompletion(n) => (Plant::NAMES[1], n),
            Plant::FlushEarly(n) => (Plant::NAMES[2], n),
            Plant::FuaSplitDrop(n) => (Plant::NAMES[3], n),
            Plant::ReorderPastFlush(n) => (Plant::NAMES[4], n),
            Plant::ZoneSkip(n) => (Plant::NAMES[5], n),
        };
        format!("{name}:{n}")
    }

    /// Whether the bug breaks durability (what `--crash` checks) rather than the queue's
    /// invariants (what `--fuzz` checks).
    pub fn durability(&self) -> bool {
        matches!(
            self,
            Plant::FlushEarly(_) | Plant::FuaSplitDrop(_) | Plant::ReorderPastFlush(_)
        )
    }

    /// The part of the bug the device's media carries out.
    fn media(&self) -> Option<MediaPlant> {
        match *self {
            Plant::FlushEarly(n) => Some(MediaPlant::FlushEarly(n)),
            Plant::ReorderPastFlush(n) => Some(MediaPlant::ReorderPastFlush(n)),
            _ => None,
        }
    }
}

#[derive(Copy, Clone, Debug)]
pub struct Staged {
    pub hw: u16,
    pub cmd: Cmd,
}

pub use mqblk_models::port::DriverStats;

struct State {
    /// The model, its queues' commands and completions, and the injected faults.
    port: ModelPort,
    /// Budget held: commands between `get_budget` and their completion (SCSI's `can_queue`).
    budget: u32,
    /// The simulator's own faults' draws.
    rng: SimRng,
    nth_completion: u64,
    /// With the media kept: each posted command's data, by request id, until it reaches
    /// the device.
    data: BTreeMap<u32, Vec<Piece>>,
    /// Commands holding a piece of a split bio, counted for [`Plant::FuaSplitDrop`].
    nth_split: u64,
    /// Writes to a zoned device, counted for [`Plant::ZoneSkip`].
    nth_zone_write: u64,
}

pub struct SimDriver {
    st: Mutex<State>,
    /// Per hardware queue: completions are raised and not yet polled. Read without the
    /// lock, so a poll of a quiet queue (every CPU step polls) takes no lock.
    has_raised: Vec<AtomicBool>,
    /// Whether a poll now may reap them: cleared while a CPU other than the one the
    /// completions were handed to steps ([`SimDriver::gate_polls`]).
    may_reap: AtomicBool,
    log: Arc<OpLog>,
    cost: DriverCost,
    info: ModelInfo,
    /// The device can hold more commands than there are driver tags: its budget can never
    /// run out, so it is not counted (one lock less per command).
    unlimited: bool,
    faults: Faults,
    plant: Option<Plant>,
}

impl SimDriver {
    /// Whether completions are reaped only on the CPU they were handed to: a single-queue
    /// device whose completions a worker thread handles ([`CompletionCpu::Worker`]). Its
    /// finished commands are the worker's to complete; a job's CPU polling the same
    /// hardware queue must not take them (elsewhere every CPU of the queue may, as an
    /// interrupt's CPU of the queue's mask).
    pub fn gate_polls(&self) -> bool {
        self.cost.completions == CompletionCpu::Worker && self.info.nr_hw_queues == 1
    }

    /// Lets polls reap raised completions, or not, until set again.
    pub fn set_may_reap(&self, may: bool) {
        self.may_reap.store(may, Ordering::Relaxed);
    }

    pub fn new(
        model: Box<dyn DeviceModel>,
        log: Arc<OpLog>,
        inject: &FaultConfig,
        faults: Faults,
        plant: Option<Plant>,
        rng: SimRng,
    ) -> SimDriver {
        let info = ModelInfo::of(model.as_ref());
        let nr_hw = info.nr_hw_queues;
        SimDriver {
            cost: model.driver_cost(),
            unlimited: info.unlimited(),
            info,
            faults,
            plant,
            log,
            has_raised: (0..nr_hw).map(|_| AtomicBool::new(false)).collect(),
            may_reap: AtomicBool::new(true),
            st: Mutex::new(State {
                port: ModelPort::new(model, inject),
                budget: 0,
                rng,
                nth_completion: 0,
                data: BTreeMap::new(),
                nth_split: 0,
                nth_zone_write: 0,
            }),
        }
    }

    pub fn cost(&self) -> DriverCost {
        self.cost
    }
    pub fn nr_hw_queues(&self) -> u16 {
        self.info.nr_hw_queues
    }
    pub fn queue_depth(&self) -> u32 {
        self.info.queue_depth
    }
    /// The model's queue limits ([`mqblk_models::DeviceModel::queue_limits`]).
    pub fn queue_limits(&self) -> mqblk_core::QueueLimits {
        self.info.limits
    }

    /// A command reaches the device (its doorbell rang at `now`). Returns the model's next
    /// event, or the rule a zoned device saw broken (a write off its zone's write pointer,
    /// which zone write plugging must never send).
    pub fn submit_to_model(&self, hw: u16, cmd: Cmd, now: Nanos) -> Result<Option<Nanos>, String> {
        let mut st = self.st.lock();
        if st.port.media.is_some() {
            let pieces = st.data.remove(&(cmd.id as u32)).unwrap_or_default();
            st.port.deliver_data(hw, cmd, pieces, now);
        } else {
            st.port.deliver(hw, cmd, now);
        }
        if self.info.limits.zoned.is_some() {
            if let Some(v) = st.port.model.take_zone_violation() {
                return Err(v);
            }
        }
        Ok(st.port.model.next_event())
    }

    /// Keeps what the device's storage holds from now on ([`Media`]), for a power cut.
    pub fn keep_media(&self) {
        let mut st = self.st.lock();
        let unit = self.info.limits.physical_block_size;
        let plant = self.plant.and_then(|p| p.media());
        st.port.media = Some(Media::new(self.info.write_cache, unit, plant));
    }

    /// The power fails now: what the device's medium holds afterwards, and what its
    /// storage saw. `None` unless [`SimDriver::keep_media`] was called.
    pub fn power_cut(&self, rng: &mut SimRng) -> Option<(Content, MediaStats, usize)> {
        let st = self.st.lock();
        let m = st.port.media.as_ref()?;
        Some((m.power_cut(rng), m.stats, m.in_flight()))
    }

    pub fn model_next_event(&self) -> Option<Nanos> {
        self.st.lock().port.model.next_event()
    }

    /// Lets the model run to `now` and raises an interrupt for each finished command; the
    /// hardware queues that got one land in `hws`, each once, in order. Returns the model's
    /// next event.
    pub fn advance(
        &self,
        now: Nanos,
        scratch: &mut Vec<Finished>,
        hws: &mut Vec<u16>,
    ) -> Option<Nanos> {
        let mut st = self.st.lock();
        scratch.clear();
        hws.clear();
        st.port.advance(now, scratch);
        for &f in scratch.iter() {
            st.nth_completion += 1;
            let n = st.nth_completion;
            let times = match self.plant {
                Some(Plant::DropCompletion(k)) if k == n => 0,
                Some(Plant::DoubleCompletion(k)) if k == n => 2,
                _ => 1,
            };
            for _ in 0..times {
                st.port.raise(f);
            }
            if times > 0 {
                self.has_raised[f.hw as usize].store(true, Ordering::Release);
            }
            if !hws.contains(&f.hw) {
                hws.push(f.hw);
            }
        }
        st.port.model.next_event()
    }

    /// A human dump of the driver for failure reports.
    pub fn debug_state(&self) -> String {
        let st = self.st.lock();
        format!(
            "driver {}: budget {}/{} {}",
            self.info.name,
            st.budget,
            self.info.max_outstanding,
            st.port.debug_state()
        )
    }

    pub fn stats(&self) -> DriverStats {
        self.st.lock().port.stats.clone()
    }

    pub fn model_stats(&self) -> Vec<(&'static str, u64)> {
        self.st.lock().port.model.stats()
    }

    /// Commands the device or the lost set still holds, over all hardware queues.
    pub fn total_inflight(&self) -> u32 {
        self.st.lock().port.total_inflight()
    }

    /// `n` commands left the device: their budget is free again.
    fn put_budgets(&self, st: &mut State, n: u32) {
        if !self.unlimited {
            assert!(
                st.budget >= n,
                "{n} completions with a budget of {} held",
                st.budget
            );
            st.budget -= n;
        }
    }
}

impl Driver for SimDriver {
    fn name(&self) -> &'static str {
        self.info.name
    }
    fn report_zones(&self, sector: u64, nr: usize) -> Option<Vec<mqblk_core::zoned::Zone>> {
        self.st.lock().port.model.report_zones(sector, nr)
    }
    fn capacity_sectors(&self) -> u64 {
        self.info.capacity_sectors
    }
    fn rotational(&self) -> bool {
        self.info.rotational
    }
    fn write_cache(&self) -> bool {
        self.info.write_cache
    }
    fn fua(&self) -> bool {
        self.info.fua
    }

    fn get_budget(&self, _hctx: HctxIdx) -> bool {
        if self.unlimited {
            return true;
        }
        let mut st = self.st.lock();
        if st.budget >= self.info.max_outstanding {
            st.port.stats.budget_denied += 1;
            return false;
        }
        st.budget += 1;
        true
    }

    fn put_budget(&self, _hctx: HctxIdx) {
        if self.unlimited {
            return;
        }
        let mut st = self.st.lock();
        assert!(st.budget > 0, "put_budget with no budget held");
        st.budget -= 1;
    }

    fn queue_rq(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        last: bool,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus {
        let mut st = self.st.lock();
        if self.faults.at_issue() {
            if st.rng.chance(self.faults.busy) {
                st.port.stats.busy += 1;
                // DEV_RESOURCE promises a re-run from a completion, so only with one to come.
                return st.port.busy(hctx.0);
            }
            if st.rng.chance(self.faults.fail_at_issue) {
                st.port.stats.failed += 1;
                // The core ends a failed request itself; its budget is ours to drop.
                self.put_budgets(&mut st, 1);
                return BlkStatus::IoErr;
            }
        }
        match st.port.accept(hctx.0, rq.id, u32::from(rq.nr_segments)) {
            Accept::Refuse => return BlkStatus::Resource,
            // The ring is full: a completion on this queue frees room and re-runs it.
            Accept::NoRoom => return st.port.no_room(hctx.0, done),
            Accept::Lose => {
                drop(st);
                if last {
                    self.log.push(Step::Doorbell { hw: hctx.0 });
                }
                return BlkStatus::Ok;
            }
            Accept::Requeue => {
                // Never staged: the device does not see it, and its budget is free again
                // (null_blk's requeue, from `queue_rq` itself).
                self.put_budgets(&mut st, 1);
                done.requeue(rq.id);
                return BlkStatus::Ok;
            }
            Accept::Take => {}
        }
        let mut cmd = Cmd {
            id: rq.id.0 as u64,
            op: rq.op,
            sector: rq.sector,
            nr_sectors: rq.nr_sectors,
            fua: rq.cmd_flags.contains(ReqFlags::FUA),
            group: rq.group,
        };
        if let (Some(Plant::ZoneSkip(n)), Some(_), mqblk_core::ReqOp::Write) =
            (self.plant, self.info.limits.zoned, rq.op)
        {
            st.nth_zone_write += 1;
            if st.nth_zone_write == n {
                cmd.sector += 8;
            }
        }
        if st.port.media.is_some() && rq.op.is_write() && rq.op != mqblk_core::ReqOp::Flush {
            if let Some(Plant::FuaSplitDrop(n)) = self.plant {
                if rq.bios.iter().any(|b| b.split.is_some()) {
                    st.nth_split += 1;
                    if st.nth_split >= n {
                        cmd.fua = false;
                    }
                }
            }
            // The data each bio carries, as the device will take it.
            let pieces = rq
                .bios
                .iter()
                .map(|b| Piece {
                    sector: b.sector,
                    nr_sectors: b.nr_sectors,
                    stamp: crate::crash::stamp(b.private),
                })
                .collect();
            st.data.insert(rq.id.0, pieces);
        }
        drop(st);
        let staged = self.log.stage(Staged { hw: hctx.0, cmd });
        self.log.push(Step::QueueRq { hw: hctx.0, staged });
        if last {
            self.log.push(Step::Doorbell { hw: hctx.0 });
        }
        BlkStatus::Ok
    }

    fn commit_rqs(&self, hctx: HctxIdx) {
        self.log.push(Step::Doorbell { hw: hctx.0 });
    }

    fn timeout(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> EhReturn {
        let mut st = self.st.lock();
        if st.port.timeout(hctx.0, rq.id, done) {
            self.put_budgets(&mut st, 1);
            EhReturn::Done
        } else {
            // Still in the device: it will complete; a slow device is not an error.
            EhReturn::ResetTimer
        }
    }

    fn poll(&self, hctx: HctxIdx, _now: Nanos, done: &mut CompletionBatch) -> usize {
        let h = hctx.0 as usize;
        if !self.has_raised[h].load(Ordering::Acquire) || !self.may_reap.load(Ordering::Relaxed) {
            return 0;
        }
        let mut st = self.st.lock();
        self.has_raised[h].store(false, Ordering::Release);
        let n = st.port.poll(hctx.0, done);
        self.put_budgets(&mut st, n as u32);
        n
    }

    fn queue_rqs(&self) -> QueueRqs {
        self.info.queue_rqs
    }

    fn holds_requests(&self, hctx: HctxIdx) -> bool {
        self.st.lock().port.inflight(hctx.0) > 0
    }

    fn inflight(&self, hctx: HctxIdx) -> usize {
        self.st.lock().port.inflight(hctx.0) as usize
    }
}
