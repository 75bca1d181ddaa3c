//! Shared fixtures for the scheduler tests: a device model whose timing the test controls, and
//! a small rig around a `RequestQueue` with a scheduler attached.
//!
//! `SimDriver` has a number of "slots" per hardware queue (how many requests it holds at
//! once). When they are full it either refuses the dispatch budget (`Full::Budget`, the way
//! SCSI limits a device's queue depth, so requests stay in the scheduler until a slot frees),
//! or answers `queue_rq` with `Resource` / `DevResource`. It logs every request it accepts, in
//! order, and completes them either when the test says so (`complete_next`) or after a fixed
//! virtual service time per operation. A seeded fault injector can refuse, fail or requeue.
//!
//! Time is virtual: the rig keeps `now` and only moves it forward when the test asks, or to
//! the next thing that is due (a device completion or a queue timer).

#![allow(dead_code)]

use mqblk_core::{
    Bio, BlkStatus, CompletionBatch, CtxIdx, Driver, Elevator, HctxIdx, IoPrio, IoPrioClass, Nanos,
    QueueConfig, ReqFlags, ReqOp, Request, RequestQueue, RqId, Submit, Submitter, TagSet,
    TagSetConfig,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

pub fn ms(n: u64) -> Nanos {
    Nanos::from_millis(n)
}

pub fn us(n: u64) -> Nanos {
    Nanos::from_micros(n)
}

pub const RT: IoPrio = IoPrio::new(IoPrioClass::Rt, 0);
pub const BE: IoPrio = IoPrio::new(IoPrioClass::Be, 4);
pub const IDLE: IoPrio = IoPrio::new(IoPrioClass::Idle, 7);

/// splitmix64, so every "random" workload and fault schedule is reproducible from a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }
    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < per_mille as u64
    }
}

/// What the device does when all its slots are taken.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Full {
    /// Refuse the dispatch budget (`get_budget` false): requests stay in the scheduler.
    Budget,
    /// Answer `queue_rq` with `BLK_STS_RESOURCE` (the core retries after 3 ms).
    Resource,
    /// Answer `queue_rq` with `BLK_STS_DEV_RESOURCE` (a completion re-runs the queue).
    DevResource,
}

/// One request the device accepted, as it saw it.
#[derive(Clone, Debug)]
pub struct Issue {
    pub hctx: HctxIdx,
    pub ctx: CtxIdx,
    pub id: RqId,
    pub op: ReqOp,
    pub sector: u64,
    pub nr_sectors: u32,
    pub ioprio: IoPrio,
    pub nr_bios: usize,
    /// The bios' `private` cookies, in request order.
    pub privates: Vec<u64>,
    pub at: Nanos,
}

impl Issue {
    pub fn class(&self) -> IoPrioClass {
        self.ioprio.class()
    }
}

/// Seeded fault injection, odds in per mille per `queue_rq`.
#[derive(Clone, Debug)]
pub struct Faults {
    pub rng: Rng,
    pub resource: u32,
    pub dev_resource: u32,
    pub io_err: u32,
    /// Accept, then hand the request back with `CompletionBatch::requeue` when it "completes".
    pub requeue: u32,
    /// Random extra service time in `0..jitter`.
    pub jitter: Nanos,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Fate {
    Complete,
    Requeue,
}

#[derive(Debug)]
struct InFlight {
    seq: u64,
    hctx: HctxIdx,
    id: RqId,
    /// `None`: waits for the test (`complete_next`).
    done_at: Option<Nanos>,
    fate: Fate,
}

fn op_index(op: ReqOp) -> usize {
    match op {
        ReqOp::Read => 0,
        ReqOp::Write => 1,
        ReqOp::Flush => 2,
        ReqOp::Discard => 3,
        ReqOp::WriteZeroes => 4,
        // This device has no zones: the block layer refuses zone operations before it.
        ReqOp::ZoneAppend
        | ReqOp::ZoneReset
        | ReqOp::ZoneResetAll
        | ReqOp::ZoneOpen
        | ReqOp::ZoneClose
        | ReqOp::ZoneFinish => unreachable!("zone operation on a regular device"),
    }
}

struct DevState {
    full: Full,
    slots: Vec<usize>,
    /// Budget tokens handed to the core and not yet turned into an accepted request.
    reserved: Vec<usize>,
    inflight: Vec<InFlight>,
    /// Service time per operation; `None` means "when the test says".
    latency: [Option<Nanos>; 5],
    faults: Option<Faults>,
    issues: Vec<Issue>,
    seq: u64,
    refused: usize,
    failed: Vec<u64>,
    /// Flush requests failed (they carry no bio: their waiters fail with them).
    failed_flushes: usize,
    requeued: usize,
    /// `queue_rq` on one hctx with the budget of another (a scheduler that is not MQ-aware).
    cross_hctx_budget: usize,
    /// `queue_rq` in budget mode without any budget taken: a core bug.
    unbudgeted: usize,
    /// Requests accepted beyond the slots of their hctx.
    over_admitted: usize,
}

impl DevState {
    fn busy(&self, h: HctxIdx) -> usize {
        self.inflight.iter().filter(|r| r.hctx == h).count()
    }
    fn consume_budget(&mut self, h: HctxIdx) {
        let hi = h.0 as usize;
        if self.reserved[hi] > 0 {
            self.reserved[hi] -= 1;
        } else if let Some(other) = self.reserved.iter().position(|&r| r > 0) {
            self.reserved[other] -= 1;
            self.cross_hctx_budget += 1;
        } else {
            self.unbudgeted += 1;
        }
    }
}

pub struct SimDriver {
    st: Mutex<DevState>,
    capacity: u64,
    /// A volatile write cache that honours FUA (off: neither, so PREFLUSH and FUA vanish).
    cache_fua: std::sync::atomic::AtomicBool,
}

impl SimDriver {
    /// A device with `nr_hw` hardware queues of `slots` slots each, completing on command.
    pub fn new(nr_hw: u16, slots: usize, full: Full) -> Arc<SimDriver> {
        Arc::new(SimDriver {
            st: Mutex::new(DevState {
                full,
                slots: vec![slots; nr_hw as usize],
                reserved: vec![0; nr_hw as usize],
                inflight: Vec::new(),
                latency: [None; 5],
                faults: None,
                issues: Vec::new(),
                seq: 0,
                refused: 0,
                failed: Vec::new(),
                failed_flushes: 0,
                requeued: 0,
                cross_hctx_budget: 0,
                unbudgeted: 0,
                over_admitted: 0,
            }),
            capacity: 1 << 32,
            cache_fua: Default::default(),
        })
    }

    pub fn set_slots(&self, h: u16, slots: usize) {
        self.st.lock().slots[h as usize] = slots;
    }
    pub fn set_all_slots(&self, slots: usize) {
        self.st.lock().slots.iter_mut().for_each(|s| *s = slots);
    }
    /// Fixed service time for `op` (`None`: complete only on command).
    pub fn set_latency(&self, op: ReqOp, lat: Option<Nanos>) {
        self.st.lock().latency[op_index(op)] = lat;
    }
    pub fn set_all_latencies(&self, lat: Option<Nanos>) {
        self.st.lock().latency = [lat; 5];
    }
    pub fn set_faults(&self, f: Option<Faults>) {
        self.st.lock().faults = f;
    }

    /// Lets the `n` oldest requests waiting for the test complete at the next poll.
    pub fn complete_next(&self, n: usize) -> usize {
        let mut g = self.st.lock();
        let mut waiting: Vec<usize> = (0..g.inflight.len())
            .filter(|&i| g.inflight[i].done_at.is_none())
            .collect();
        waiting.sort_by_key(|&i| g.inflight[i].seq);
        let n = n.min(waiting.len());
        for &i in &waiting[..n] {
            g.inflight[i].done_at = Some(Nanos::ZERO);
        }
        n
    }

    /// Completes everything (now and in future) after `lat`, for draining a test.
    pub fn auto_complete(&self, now: Nanos, lat: Nanos) {
        let mut g = self.st.lock();
        g.latency = [Some(lat); 5];
        for r in g.inflight.iter_mut() {
            if r.done_at.is_none() {
                r.done_at = Some(now);
            }
        }
    }

    pub fn issues(&self) -> Vec<Issue> {
        self.st.lock().issues.clone()
    }
    pub fn nr_issues(&self) -> usize {
        self.st.lock().issues.len()
    }
    pub fn issues_from(&self, k: usize) -> Vec<Issue> {
        self.st.lock().issues[k..].to_vec()
    }
    pub fn last_issue(&self) -> Option<Issue> {
        self.st.lock().issues.last().cloned()
    }
    pub fn busy(&self, h: u16) -> usize {
        self.st.lock().busy(HctxIdx(h))
    }
    pub fn total_busy(&self) -> usize {
        self.st.lock().inflight.len()
    }
    pub fn refused(&self) -> usize {
        self.st.lock().refused
    }
    pub fn requeued(&self) -> usize {
        self.st.lock().requeued
    }
    /// Cookies of bios the device failed with `IoErr`.
    pub fn failed(&self) -> Vec<u64> {
        self.st.lock().failed.clone()
    }

    /// How many flush requests the device failed.
    pub fn failed_flushes(&self) -> usize {
        self.st.lock().failed_flushes
    }
    pub fn cross_hctx_budget(&self) -> usize {
        self.st.lock().cross_hctx_budget
    }
    pub fn over_admitted(&self) -> usize {
        self.st.lock().over_admitted
    }
    pub fn unbudgeted(&self) -> usize {
        self.st.lock().unbudgeted
    }
    /// The earliest time a request will complete on its own, on any hctx.
    pub fn next_completion(&self) -> Option<Nanos> {
        self.st
            .lock()
            .inflight
            .iter()
            .filter_map(|r| r.done_at)
            .min()
    }
}

impl Driver for SimDriver {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn write_cache(&self) -> bool {
        self.cache_fua.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn fua(&self) -> bool {
        self.cache_fua.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }

    fn get_budget(&self, h: HctxIdx) -> bool {
        let mut g = self.st.lock();
        if g.full != Full::Budget {
            return true;
        }
        let hi = h.0 as usize;
        if g.busy(h) + g.reserved[hi] < g.slots[hi] {
            g.reserved[hi] += 1;
            true
        } else {
            false
        }
    }

    fn put_budget(&self, h: HctxIdx) {
        let mut g = self.st.lock();
        if g.full == Full::Budget {
            // The kernel's budget is per queue: a request taken out of a scheduler that is not
            // MQ-aware by one hctx's run may give the token back on its own hctx.
            let hi = h.0 as usize;
            if g.reserved[hi] > 0 {
                g.reserved[hi] -= 1;
            } else {
                let other = g.reserved.iter().position(|&r| r > 0);
                let other = other
                    .unwrap_or_else(|| panic!("put_budget on hctx{hi} without a budget taken"));
                g.reserved[other] -= 1;
                g.cross_hctx_budget += 1;
            }
        }
    }

    fn queue_rq(
        &self,
        h: HctxIdx,
        rq: &mut Request,
        _last: bool,
        now: Nanos,
        _done: &mut CompletionBatch,
    ) -> BlkStatus {
        let mut g = self.st.lock();
        let hi = h.0 as usize;
        if g.full != Full::Budget && g.busy(h) >= g.slots[hi] {
            g.refused += 1;
            return if g.full == Full::Resource {
                BlkStatus::Resource
            } else {
                BlkStatus::DevResource
            };
        }
        let privates: Vec<u64> = rq.bios.iter().map(|b| b.private).collect();
        let mut fate = Fate::Complete;
        let mut jitter = Nanos::ZERO;
        let busy = g.busy(h);
        if let Some(f) = g.faults.as_mut() {
            if f.jitter.0 > 0 {
                jitter = Nanos(f.rng.below(f.jitter.0));
            }
            let x = f.rng.below(1000) as u32;
            let (r, d, e) = (
                f.resource,
                f.resource + f.dev_resource,
                f.resource + f.dev_resource + f.io_err,
            );
            if x < d {
                g.refused += 1;
                // DEV_RESOURCE promises a re-run on a completion of this hctx: only honest
                // when something is in flight there.
                return if x < r || busy == 0 {
                    BlkStatus::Resource
                } else {
                    BlkStatus::DevResource
                };
            }
            if x < e {
                if g.full == Full::Budget {
                    g.consume_budget(h);
                }
                g.failed.extend_from_slice(&privates);
                if rq.op == ReqOp::Flush {
                    g.failed_flushes += 1;
                }
                return BlkStatus::IoErr;
            }
            if x < e + f.requeue {
                fate = Fate::Requeue;
            }
        }
        if g.full == Full::Budget {
            g.consume_budget(h);
        }
        if busy >= g.slots[hi] {
            g.over_admitted += 1;
        }
        let done_at =
            g.latency[op_index(rq.op)].map(|l| now.saturating_add(l).saturating_add(jitter));
        g.seq += 1;
        let seq = g.seq;
        g.inflight.push(InFlight {
            seq,
            hctx: h,
            id: rq.id,
            done_at,
            fate,
        });
        g.issues.push(Issue {
            hctx: h,
            ctx: rq.ctx,
            id: rq.id,
            op: rq.op,
            sector: rq.sector,
            nr_sectors: rq.nr_sectors,
            ioprio: rq.ioprio,
            nr_bios: rq.bios.len(),
            privates,
            at: now,
        });
        BlkStatus::Ok
    }

    fn poll(&self, h: HctxIdx, now: Nanos, done: &mut CompletionBatch) -> usize {
        let mut g = self.st.lock();
        let mut due: Vec<InFlight> = Vec::new();
        let mut i = 0;
        while i < g.inflight.len() {
            let r = &g.inflight[i];
            if r.hctx == h && r.done_at.is_some_and(|t| t <= now) {
                due.push(g.inflight.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|r| (r.done_at, r.seq));
        for r in &due {
            match r.fate {
                Fate::Complete => done.complete(r.id, BlkStatus::Ok),
                Fate::Requeue => {
                    g.requeued += 1;
                    done.requeue(r.id);
                }
            }
        }
        due.len()
    }

    fn next_event(&self, h: HctxIdx) -> Option<Nanos> {
        self.st
            .lock()
            .inflight
            .iter()
            .filter(|r| r.hctx == h)
            .filter_map(|r| r.done_at)
            .min()
    }

    fn inflight(&self, h: HctxIdx) -> usize {
        self.st.lock().busy(h)
    }
}

/// How to build a rig.
#[derive(Clone, Debug)]
pub struct RigCfg {
    pub sched: &'static str,
    pub nr_hw: u16,
    pub nr_ctx: u16,
    /// Driver tags per hardware queue.
    pub depth: u32,
    /// Scheduler tags per hardware queue (0: the kernel default `2 * min(depth, 128)`).
    pub nr_requests: u32,
    pub slots: usize,
    pub full: Full,
    /// The queue's `nomerges` knob.
    pub nomerges: mqblk_core::NoMerges,
    /// The cgroups the queue's bios name (`Bio::group`), with their weights.
    pub blkcg: Arc<mqblk_core::Blkcg>,
    /// The device has a write cache and honours FUA.
    pub cache_fua: bool,
    /// `QueueConfig::flush_via_sched` (PREFLUSH and FUA writes through the scheduler).
    pub flush_via_sched: bool,
    /// The queue's limits (a zoned queue's zones among them).
    pub limits: mqblk_core::QueueLimits,
    /// `QueueConfig::zone_write_plugging` (Linux 6.10 on; off: the scheduler's zone write
    /// locking).
    pub zone_write_plugging: bool,
}

impl RigCfg {
    pub fn new(sched: &'static str, slots: usize) -> RigCfg {
        RigCfg {
            sched,
            nr_hw: 1,
            nr_ctx: 1,
            depth: 64,
            nr_requests: 256,
            slots,
            full: Full::Budget,
            nomerges: mqblk_core::NoMerges::All,
            blkcg: Arc::new(mqblk_core::Blkcg::new()),
            cache_fua: false,
            flush_via_sched: true,
            limits: Default::default(),
            zone_write_plugging: true,
        }
    }
}

/// A queue with a scheduler on a `SimDriver`, one submitter per Ctx, and virtual time.
pub struct Rig {
    pub q: Arc<RequestQueue>,
    pub drv: Arc<SimDriver>,
    pub subs: Vec<Submitter>,
    pub now: Nanos,
    /// Every bio handed back so far, from every submitter.
    pub done: Vec<Bio>,
    /// Bios the queue took (queued or merged) and that must come back.
    pub accepted: usize,
    /// The queue's elevator (a rig never switches it).
    elv: mqblk_core::ElevatorRef,
}

impl Rig {
    pub fn new(cfg: RigCfg) -> Rig {
        let drv = SimDriver::new(cfg.nr_hw, cfg.slots, cfg.full);
        drv.cache_fua
            .store(cfg.cache_fua, std::sync::atomic::Ordering::Relaxed);
        let set = TagSet::new(TagSetConfig::new(cfg.nr_hw, cfg.depth)).expect("tag set");
        let elv =
            mqblk_sched::lookup(cfg.sched).unwrap_or_else(|| panic!("no scheduler {}", cfg.sched));
        let q = RequestQueue::new(
            set,
            drv.clone(),
            Some(elv),
            QueueConfig {
                nr_ctx: cfg.nr_ctx,
                nr_requests: cfg.nr_requests,
                nomerges: cfg.nomerges,
                blkcg: cfg.blkcg,
                flush_via_sched: cfg.flush_via_sched,
                limits: cfg.limits,
                zone_write_plugging: cfg.zone_write_plugging,
                ..Default::default()
            },
        )
        .expect("queue");
        let subs = (0..cfg.nr_ctx).map(|c| q.submitter(CtxIdx(c))).collect();
        let elv = q.elevator().expect("a scheduler is attached");
        Rig {
            elv,
            q,
            drv,
            subs,
            now: Nanos::ZERO,
            done: Vec::new(),
            accepted: 0,
        }
    }

    /// One hctx, one Ctx, `slots` slots refusing budget when full, completion on command.
    pub fn simple(sched: &'static str, slots: usize) -> Rig {
        Rig::new(RigCfg::new(sched, slots))
    }

    pub fn elv(&self) -> &dyn Elevator {
        &*self.elv
    }

    /// Stores a tunable, which must be accepted.
    pub fn set(&self, name: &str, value: &str) {
        self.elv()
            .tunables()
            .store(name, value)
            .unwrap_or_else(|e| panic!("store {name}={value}: {e}"));
    }

    pub fn submit(&mut self, ctx: usize, bio: Bio) -> Submit {
        let r = self.q.submit_bio(&mut self.subs[ctx], bio, self.now);
        if matches!(r, Submit::Queued | Submit::Merged | Submit::Done) {
            self.accepted += 1;
        }
        self.collect();
        r
    }

    /// Submits and insists the bio was taken as a new request.
    pub fn queue(&mut self, ctx: usize, bio: Bio) {
        match self.submit(ctx, bio) {
            Submit::Queued => {}
            other => panic!("expected a new request, got {other:?}"),
        }
    }

    fn collect(&mut self) {
        for s in self.subs.iter_mut() {
            self.done.append(&mut s.done);
        }
    }

    /// Polls every submitter at the current time (reaps completions, runs due timers).
    pub fn poll(&mut self) {
        for s in self.subs.iter_mut() {
            self.q.poll(s, self.now);
        }
        // A completion reaped by one submitter may belong to another: collect those too.
        for s in self.subs.iter_mut() {
            self.q.poll(s, self.now);
        }
        self.collect();
    }

    /// Moves time forward to `t` (never back) and polls.
    pub fn advance_to(&mut self, t: Nanos) {
        self.now = self.now.max(t);
        self.poll();
    }

    /// Lets the oldest `n` held requests complete, and polls.
    pub fn complete_next(&mut self, n: usize) -> usize {
        let k = self.drv.complete_next(n);
        self.poll();
        k
    }

    /// Completes one request at a time, checking the queue's invariants after each, until
    /// the device has accepted `n` requests.
    pub fn complete_until_issued(&mut self, n: usize) {
        while self.drv.nr_issues() < n {
            assert_eq!(
                self.complete_next(1),
                1,
                "stalled:\n{}",
                self.q.debug_state()
            );
            self.q.check_invariants();
        }
    }

    /// Every request the device accepted after the first, as (sector, sectors, the privates
    /// of its bios in order), sorted: what merging made of the bios.
    pub fn issued_after_first(&self) -> Vec<(u64, u32, Vec<u64>)> {
        let mut got: Vec<_> = self.drv.issues()[1..]
            .iter()
            .map(|i| (i.sector, i.nr_sectors, i.privates.clone()))
            .collect();
        got.sort();
        got
    }

    /// The next time something is due: a device completion or a queue timer.
    pub fn next_event(&self) -> Option<Nanos> {
        match (self.drv.next_completion(), self.q.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Advances to the next event and polls. False if nothing is pending at all.
    pub fn step(&mut self) -> bool {
        match self.next_event() {
            Some(t) => {
                self.advance_to(t);
                true
            }
            None => false,
        }
    }

    pub fn outstanding(&self) -> usize {
        self.accepted - self.done.len()
    }

    /// Runs until every accepted bio came back, completing everything after `lat`.
    pub fn drain(&mut self, lat: Nanos) {
        self.drv.auto_complete(self.now, lat);
        self.poll();
        let mut steps = 0u64;
        while self.outstanding() > 0 {
            steps += 1;
            assert!(
                steps < 5_000_000,
                "drain made no progress:\n{}",
                self.q.debug_state()
            );
            if !self.step() {
                panic!(
                    "{} bios outstanding and nothing will happen:\n{}",
                    self.outstanding(),
                    self.q.debug_state()
                );
            }
        }
    }

    /// Asserts each cookie in `expected` came back exactly once and nothing else did.
    pub fn assert_each_done_once(&self, expected: impl IntoIterator<Item = u64>) {
        let mut seen: HashMap<u64, usize> = HashMap::new();
        for b in &self.done {
            *seen.entry(b.private).or_default() += 1;
        }
        let mut n = 0;
        for p in expected {
            n += 1;
            assert_eq!(
                seen.get(&p).copied().unwrap_or(0),
                1,
                "bio {p} completed {:?} times",
                seen.get(&p)
            );
        }
        assert_eq!(self.done.len(), n, "more completions than bios submitted");
    }

    /// Drains, then checks the queue and the scheduler are whole and detaches the scheduler.
    pub fn finish(mut self) {
        self.drain(us(10));
        self.q.check_invariants();
        assert_eq!(self.drv.total_busy(), 0);
        assert_eq!(self.drv.unbudgeted(), 0, "queue_rq without a budget");
        self.q.teardown();
    }

    /// The attached scheduler as its own type.
    pub fn elv_as<T: 'static>(&self) -> &T {
        self.elv()
            .as_any()
            .downcast_ref::<T>()
            .expect("the scheduler is of that type")
    }

    /// kyber's statistics.
    pub fn kyber(&self) -> mqblk_sched::KyberStats {
        self.elv_as::<mqblk_sched::kyber::Kyber>().typed_stats()
    }

    /// The current token depth of a kyber domain (read, write, discard, other).
    pub fn kyber_depth(&self, domain: &str) -> u32 {
        let d = ["read", "write", "discard", "other"]
            .iter()
            .position(|n| *n == domain)
            .expect("a kyber domain");
        self.kyber().depth[d]
    }

    /// mq-deadline's statistics.
    pub fn deadline(&self) -> mqblk_sched::DdStats {
        self.elv_as::<mqblk_sched::mq_deadline::MqDeadline>()
            .typed_stats()
    }

    /// mq-deadline's queued requests per class (rt, be, idle): `dd_queued`.
    pub fn deadline_queued(&self) -> [u32; 3] {
        let s = self.deadline();
        [s.rt.queued, s.be.queued, s.idle.queued]
    }

    /// BFQ's statistics.
    pub fn bfq(&self) -> mqblk_sched::BfqStats {
        self.elv_as::<mqblk_sched::bfq::Bfq>().typed_stats()
    }
}

/// A read of `nr` sectors at `sector`, tagged `private`.
pub fn read(sector: u64, nr: u32, private: u64) -> Bio {
    Bio::new(ReqOp::Read, sector, nr).with_private(private)
}

/// An async (not SYNC) write.
pub fn write(sector: u64, nr: u32, private: u64) -> Bio {
    Bio::new(ReqOp::Write, sector, nr).with_private(private)
}

pub fn sync_write(sector: u64, nr: u32, private: u64) -> Bio {
    write(sector, nr, private).with_flags(ReqFlags::SYNC)
}

/// True if `xs` is strictly ascending.
pub fn ascending(xs: &[u64]) -> bool {
    xs.windows(2).all(|w| w[0] < w[1])
}

/// The sectors of a run of issues.
pub fn sectors(issues: &[Issue]) -> Vec<u64> {
    issues.iter().map(|i| i.sector).collect()
}

/// The first cookie of each issued request.
pub fn firsts(issues: &[Issue]) -> Vec<u64> {
    issues.iter().map(|i| i.privates[0]).collect()
}

/// A seeded random workload under fault injection: four Ctxs submitting reads, writes (async,
/// sync, FUA), discards, write-zeroes and flushes of every class, often contiguous so they
/// merge; a small tag space so submitters see `Busy`; a device that refuses (by budget or by
/// status), fails with `IoErr` and requeues after accepting. Checks that every bio comes back
/// exactly once with the status the device gave it, and that the queue and the scheduler
/// are whole at the end (`check_invariants`, `teardown` → `exit_sched`).
pub fn chaos_run(sched: &'static str, seed: u64) {
    use std::collections::VecDeque;
    let mut rng = Rng::new(seed);
    let nr_hw = if sched == "kyber" {
        2
    } else {
        1 + (seed % 2) as u16
    };
    let full = [Full::Budget, Full::Resource, Full::DevResource][rng.below(3) as usize];
    let slots = 1 + rng.below(6) as usize;
    let mut r = Rig::new(RigCfg {
        sched,
        nr_hw,
        nr_ctx: 4,
        depth: 16,
        nr_requests: 24,
        slots,
        full,
        // Every third seed with only the one-hit merge cache (`nomerges=1`).
        nomerges: if seed % 3 == 2 {
            mqblk_core::NoMerges::Simple
        } else {
            mqblk_core::NoMerges::All
        },
        blkcg: Arc::new(mqblk_core::Blkcg::new()),
        // Half the seeds on a device with a write cache and FUA, so PREFLUSH and FUA
        // writes go through the flush state machine; of those, half route them through the
        // scheduler (Linux 6.5 on) and half past it.
        cache_fua: seed % 4 < 2,
        flush_via_sched: seed % 2 == 0,
        limits: Default::default(),
        zone_write_plugging: true,
    });
    r.drv.set_all_latencies(Some(us(100)));
    r.drv.set_faults(Some(Faults {
        rng: Rng::new(seed.wrapping_mul(31).wrapping_add(7)),
        resource: 40,
        dev_resource: 30,
        io_err: 25,
        requeue: 50,
        jitter: us(1500),
    }));
    if sched == "mq-deadline" {
        r.set("prio_aging_expire", "100");
        r.set("fifo_batch", &(1 + rng.below(8)).to_string());
        r.set("writes_starved", &rng.below(3).to_string());
    }
    const TOTAL: u64 = 1200;
    let mut pending: Vec<VecDeque<Bio>> = (0..4).map(|_| VecDeque::new()).collect();
    let mut last_end = [0u64; 4];
    let mut last_start = [0u64; 4];
    let mut holes: [Option<(u64, u32)>; 4] = [None; 4];
    let mut next = 0u64;
    let mut busy_seen = 0usize;
    let mut iter = 0u64;
    loop {
        iter += 1;
        assert!(
            iter < 2_000_000,
            "seed {seed}: no progress\n{}",
            r.q.debug_state()
        );
        for _ in 0..rng.below(5) {
            if next == TOTAL {
                break;
            }
            let c = rng.below(4) as usize;
            let mut nr = 8 * (1 + rng.below(4) as u32);
            // Contiguous runs (back merges), bios just before the last one (front merges),
            // and holes filled later (a merge that makes two queued requests one).
            let sector = match (rng.below(100), holes[c].take()) {
                (0..=29, Some((s, n))) => {
                    nr = n;
                    s
                }
                (_, h) => {
                    holes[c] = h;
                    match rng.below(100) {
                        0..=39 => last_end[c],
                        40..=49 => last_start[c].saturating_sub(nr as u64),
                        50..=59 => {
                            holes[c] = Some((last_end[c], nr));
                            last_end[c] + nr as u64
                        }
                        _ => 8 * rng.below(1 << 22),
                    }
                }
            };
            last_start[c] = sector;
            let mut bio = match rng.below(100) {
                0..=44 => Bio::new(ReqOp::Read, sector, nr),
                45..=64 => Bio::new(ReqOp::Write, sector, nr),
                65..=76 => Bio::new(ReqOp::Write, sector, nr).with_flags(ReqFlags::SYNC),
                77..=79 => Bio::new(ReqOp::Write, sector, nr).with_flags(ReqFlags::FUA),
                80..=88 => Bio::new(ReqOp::Discard, sector, nr),
                89..=93 => Bio::new(ReqOp::WriteZeroes, sector, nr),
                _ => Bio::new(ReqOp::Flush, 0, 0),
            };
            last_end[c] = sector + nr as u64;
            let prio = match rng.below(10) {
                0..=1 => RT,
                2..=6 => BE,
                7 => IoPrio::new(IoPrioClass::None, 0),
                _ => IDLE,
            };
            bio = bio.with_ioprio(prio).with_private(next);
            next += 1;
            pending[c].push_back(bio);
        }
        for (c, queue) in pending.iter_mut().enumerate() {
            while let Some(bio) = queue.pop_front() {
                match r.submit(c, bio) {
                    Submit::Queued | Submit::Merged | Submit::Done => {}
                    Submit::Busy(b) => {
                        busy_seen += 1;
                        queue.push_front(*b);
                        break;
                    }
                    Submit::Failed => panic!("seed {seed}: bio refused"),
                }
            }
        }
        let waiting = pending.iter().map(VecDeque::len).sum::<usize>();
        if next == TOTAL && waiting == 0 && r.outstanding() == 0 {
            break;
        }
        let jump = r.now.saturating_add(Nanos(rng.below(us(400).0)));
        match r.next_event() {
            Some(t) => r.advance_to(t.min(jump).max(r.now)),
            None if r.outstanding() > 0 || waiting > 0 => {
                panic!(
                    "seed {seed}: {} bios outstanding, {waiting} waiting, nothing due:\n{}",
                    r.outstanding(),
                    r.q.debug_state()
                )
            }
            None => r.advance_to(jump),
        }
        if iter % 64 == 0 {
            r.q.check_invariants();
        }
    }
    assert!(busy_seen > 0, "seed {seed}: the tag space never filled");
    assert!(
        r.drv.requeued() > 0 && r.drv.refused() > 0 && !r.drv.failed().is_empty(),
        "seed {seed}: faults not exercised"
    );
    r.assert_each_done_once(0..TOTAL);
    let failed: std::collections::HashSet<u64> = r.drv.failed().into_iter().collect();
    assert_eq!(
        failed.len(),
        r.drv.failed().len(),
        "seed {seed}: a bio failed twice"
    );
    for b in &r.done {
        let want = if failed.contains(&b.private) {
            BlkStatus::IoErr
        } else {
            BlkStatus::Ok
        };
        // A flush bio waits on a flush request, which carries no bio of its own: when the
        // device failed one, every flush that waited for it fails too (`flush_end_io`).
        if b.op == ReqOp::Flush && b.status == BlkStatus::IoErr && r.drv.failed_flushes() > 0 {
            continue;
        }
        assert_eq!(b.status, want, "seed {seed}: bio {} status", b.private);
    }
    r.finish();
}
