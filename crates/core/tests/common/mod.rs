//! Shared test fixtures: a scriptable driver and small helpers to build queues.
//!
//! `TestDriver` records every `queue_rq` it sees and answers each call from a script, a
//! seeded fault injector, or its default (`Ok`). Accepted requests are completed at once
//! (`Mode::Inline`) or held until the test releases them; released requests are handed to
//! the core by the driver's `poll`, as a device's interrupt handler would. Requests that
//! "time out" are never completed: only the core's timeout scan ends them, through
//! `Driver::timeout`.

#![allow(dead_code)]

use mqblk_core::{
    Bio, BlkStatus, CompletionBatch, CtxIdx, Driver, EhReturn, HctxIdx, Nanos, QueueConfig,
    QueueRqs, ReqFlags, ReqOp, Request, RequestQueue, RqId, Submit, Submitter, Tag, TagSet,
    TagSetConfig,
};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// How the driver answers one `queue_rq`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Accept it; complete inline or hold it, per the driver's mode.
    Ok,
    /// `BLK_STS_RESOURCE`: not now, the core retries after a delay.
    Resource,
    /// `BLK_STS_DEV_RESOURCE`: not now, a completion on this hctx re-runs the queue. Turned
    /// into `Resource` when the driver has nothing in flight on that hctx.
    DevResource,
    /// End it with this error status.
    Fail(BlkStatus),
    /// Accept it, then hand it back with `CompletionBatch::requeue`.
    Requeue,
    /// Accept it and never complete it: only the timeout handler ends it.
    Timeout,
}

/// What happens to a request the driver accepted with `Reply::Ok`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Completed with `Ok` into the batch `queue_rq` was handed.
    #[default]
    Inline,
    /// Held until `release`; the next `poll` of its hctx completes it.
    Hold,
}

/// One `queue_rq` call as the driver saw it.
#[derive(Clone, Debug)]
pub struct Issue {
    pub hctx: HctxIdx,
    pub id: RqId,
    pub tag: Tag,
    pub sector: u64,
    pub nr_sectors: u32,
    pub op: ReqOp,
    pub flags: ReqFlags,
    pub nr_bios: usize,
    /// The `private` cookies of the request's bios, in order.
    pub privates: Vec<u64>,
    pub last: bool,
    pub reply: Reply,
    pub now: Nanos,
}

/// A seeded fault injector: per-mille odds of each reply, drawn per `queue_rq`.
#[derive(Clone, Debug)]
pub struct Chaos {
    pub rng: Rng,
    pub resource: u32,
    pub dev_resource: u32,
    pub io_err: u32,
    pub requeue: u32,
    pub timeout: u32,
    /// Odds that an accepted request is held rather than completed inline.
    pub hold: u32,
}

#[derive(Clone, Debug)]
struct Held {
    hctx: HctxIdx,
    id: RqId,
    tag: Tag,
    privates: Vec<u64>,
}

#[derive(Default)]
struct Inner {
    mode: Mode,
    script: VecDeque<Reply>,
    chaos: Option<Chaos>,
    issues: Vec<Issue>,
    commits: Vec<HctxIdx>,
    held: VecDeque<Held>,
    ready: VecDeque<(Held, BlkStatus)>,
    lost: Vec<Held>,
    /// Every status the driver ended a bio with (inline, released, failed or timed out).
    outcomes: HashMap<u64, Vec<BlkStatus>>,
    timeouts: usize,
    requeues: usize,
    /// Hctxs that answered DEV_RESOURCE and have not completed anything since.
    dev_waiting: std::collections::HashSet<HctxIdx>,
    /// Dispatch budget for the whole device (`get_budget`), as SCSI's per-LUN queue depth;
    /// `None` for no limit.
    budget: Option<usize>,
    /// Budget tokens taken and not yet attached to an issued request or given back.
    budget_free: usize,
    /// Budget tokens attached to requests the driver accepted; freed as it ends them.
    budget_in_use: usize,
    budget_refusals: usize,
}

impl Inner {
    fn inflight(&self, h: HctxIdx) -> usize {
        self.held.iter().filter(|x| x.hctx == h).count()
            + self.ready.iter().filter(|x| x.0.hctx == h).count()
            + self.lost.iter().filter(|x| x.hctx == h).count()
    }
    fn in_flight(&self) -> impl Iterator<Item = &Held> {
        self.held
            .iter()
            .chain(self.ready.iter().map(|x| &x.0))
            .chain(self.lost.iter())
    }
    /// The driver is done with an accepted request: its budget token goes back.
    fn end_budget(&mut self) {
        if self.budget.is_some() {
            assert!(
                self.budget_in_use > 0,
                "budget: request ended without a token"
            );
            self.budget_in_use -= 1;
        }
    }
    fn record(&mut self, privates: &[u64], st: BlkStatus) {
        for &p in privates {
            self.outcomes.entry(p).or_default().push(st);
        }
    }
}

pub struct TestDriver {
    inner: Mutex<Inner>,
    capacity: u64,
    write_cache: bool,
    fua: bool,
    /// Answer for a full device as virtio-blk does: `queue_rq` stops the queue, a
    /// completion starts it, and a plug's requests go through a requeueing `queue_rqs`.
    virtio: std::sync::atomic::AtomicBool,
}

impl TestDriver {
    /// A driver with a write cache that honours FUA (an NVMe SSD with a volatile cache).
    pub fn new(mode: Mode) -> Arc<TestDriver> {
        TestDriver::with_cache(mode, true, true)
    }
    /// A driver with or without a write cache, with or without FUA.
    pub fn with_cache(mode: Mode, write_cache: bool, fua: bool) -> Arc<TestDriver> {
        Arc::new(TestDriver {
            inner: Mutex::new(Inner {
                mode,
                ..Default::default()
            }),
            capacity: 1 << 24,
            write_cache,
            fua,
            virtio: Default::default(),
        })
    }
    /// Behave as virtio-blk does when the device is full (see the field).
    pub fn set_virtio(&self, on: bool) {
        self.virtio.store(on, std::sync::atomic::Ordering::Relaxed);
    }
    fn is_virtio(&self) -> bool {
        self.virtio.load(std::sync::atomic::Ordering::Relaxed)
    }
    pub fn set_mode(&self, mode: Mode) {
        self.inner.lock().mode = mode;
    }
    /// Answers the next `queue_rq` calls with `replies`, in order, before the default.
    pub fn script(&self, replies: &[Reply]) {
        self.inner.lock().script.extend(replies.iter().copied());
    }
    pub fn script_len(&self) -> usize {
        self.inner.lock().script.len()
    }
    pub fn set_chaos(&self, chaos: Option<Chaos>) {
        self.inner.lock().chaos = chaos;
    }
    pub fn issues(&self) -> Vec<Issue> {
        self.inner.lock().issues.clone()
    }
    pub fn nr_issues(&self) -> usize {
        self.inner.lock().issues.len()
    }
    pub fn clear_issues(&self) {
        self.inner.lock().issues.clear();
    }
    /// Issues the driver accepted (replied Ok, Requeue or Timeout to).
    pub fn accepted(&self) -> Vec<Issue> {
        self.issues()
            .into_iter()
            .filter(|i| matches!(i.reply, Reply::Ok | Reply::Requeue | Reply::Timeout))
            .collect()
    }
    pub fn commits(&self) -> usize {
        self.inner.lock().commits.len()
    }
    pub fn nr_held(&self) -> usize {
        self.inner.lock().held.len()
    }
    pub fn nr_lost(&self) -> usize {
        self.inner.lock().lost.len()
    }
    pub fn held_ids(&self) -> Vec<RqId> {
        self.inner.lock().held.iter().map(|h| h.id).collect()
    }
    /// True while some hctx answered DEV_RESOURCE and has completed nothing since: its
    /// refused requests legitimately wait for that completion.
    pub fn dev_resource_pending(&self) -> bool {
        !self.inner.lock().dev_waiting.is_empty()
    }
    /// Limits the dispatch budget to `n` tokens for the whole device.
    pub fn set_budget(&self, n: Option<usize>) {
        let mut g = self.inner.lock();
        assert_eq!(
            g.budget_free + g.budget_in_use,
            0,
            "budget changed while tokens are out"
        );
        g.budget = n;
    }
    /// Budget tokens out (taken and not yet given back), and how often one was refused.
    pub fn budget_out(&self) -> (usize, usize) {
        let g = self.inner.lock();
        (g.budget_free + g.budget_in_use, g.budget_refusals)
    }
    pub fn timeouts(&self) -> usize {
        self.inner.lock().timeouts
    }
    pub fn requeues(&self) -> usize {
        self.inner.lock().requeues
    }
    /// Completes the `n` oldest held requests with `status` at the next poll of their hctx.
    pub fn release_with(&self, n: usize, status: BlkStatus) -> usize {
        let mut g = self.inner.lock();
        let n = n.min(g.held.len());
        for _ in 0..n {
            let h = g.held.pop_front().expect("held");
            g.ready.push_back((h, status));
        }
        n
    }
    pub fn release(&self, n: usize) -> usize {
        self.release_with(n, BlkStatus::Ok)
    }
    pub fn release_all(&self) -> usize {
        self.release(usize::MAX)
    }
    /// Statuses the driver ended the bio with cookie `private` with (normally exactly one).
    pub fn outcomes(&self, private: u64) -> Vec<BlkStatus> {
        self.inner
            .lock()
            .outcomes
            .get(&private)
            .cloned()
            .unwrap_or_default()
    }
    pub fn all_outcomes(&self) -> HashMap<u64, Vec<BlkStatus>> {
        self.inner.lock().outcomes.clone()
    }
}

impl Driver for TestDriver {
    fn name(&self) -> &'static str {
        "test"
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }

    fn write_cache(&self) -> bool {
        self.write_cache
    }

    fn fua(&self) -> bool {
        self.fua
    }

    fn queue_rq(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        last: bool,
        now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus {
        let mut g = self.inner.lock();
        let mut hold = g.mode == Mode::Hold;
        let scripted = g.script.pop_front();
        let mut reply = match (scripted, &mut g.chaos) {
            (Some(r), _) => r,
            (None, None) => Reply::Ok,
            (None, Some(c)) => {
                let x = c.rng.below(1000) as u32;
                hold = c.rng.chance(c.hold);
                let odds = [
                    (c.resource, Reply::Resource),
                    (c.dev_resource, Reply::DevResource),
                    (c.io_err, Reply::Fail(BlkStatus::IoErr)),
                    (c.requeue, Reply::Requeue),
                    (c.timeout, Reply::Timeout),
                ];
                let mut acc = 0;
                let mut pick = Reply::Ok;
                for (p, r) in odds {
                    acc += p;
                    if x < acc {
                        pick = r;
                        break;
                    }
                }
                pick
            }
        };
        // DEV_RESOURCE promises a re-run when something completes on this hctx; with nothing
        // in flight there is nothing to keep that promise, so a real driver says RESOURCE.
        if reply == Reply::DevResource && g.inflight(hctx) == 0 {
            reply = Reply::Resource;
        }
        // The core must never hand over a request, or a driver tag of this hctx, that the
        // driver still holds.
        for h in g.in_flight() {
            assert_ne!(
                h.id, rq.id,
                "{:?} issued while the driver still holds it",
                rq.id
            );
            assert!(
                h.hctx != hctx || h.tag != rq.tag,
                "driver tag {:?} of {hctx:?} issued twice",
                rq.tag
            );
        }
        if g.budget.is_some() {
            // The core takes a token before issuing; on Resource it gives it back itself,
            // otherwise the token stays with the request until the driver ends it.
            assert!(
                g.budget_free > 0,
                "{:?} issued without a budget token",
                rq.id
            );
            if !matches!(reply, Reply::Resource | Reply::DevResource) {
                g.budget_free -= 1;
                g.budget_in_use += 1;
            }
        }
        let privates: Vec<u64> = rq.bios.iter().map(|b| b.private).collect();
        g.issues.push(Issue {
            hctx,
            id: rq.id,
            tag: rq.tag,
            sector: rq.sector,
            nr_sectors: rq.nr_sectors,
            op: rq.op,
            flags: rq.cmd_flags,
            nr_bios: rq.bios.len(),
            privates: privates.clone(),
            last,
            reply,
            now,
        });
        match reply {
            Reply::Ok => {
                if hold {
                    g.held.push_back(Held {
                        hctx,
                        id: rq.id,
                        tag: rq.tag,
                        privates,
                    });
                } else {
                    g.dev_waiting.remove(&hctx);
                    g.end_budget();
                    g.record(&privates, BlkStatus::Ok);
                    done.complete(rq.id, BlkStatus::Ok);
                }
                BlkStatus::Ok
            }
            Reply::Resource => BlkStatus::Resource,
            Reply::DevResource => {
                g.dev_waiting.insert(hctx);
                if self.is_virtio() {
                    done.stop_queue();
                }
                BlkStatus::DevResource
            }
            Reply::Fail(st) => {
                g.dev_waiting.remove(&hctx);
                g.end_budget();
                g.record(&privates, st);
                st
            }
            Reply::Requeue => {
                g.end_budget();
                g.requeues += 1;
                done.requeue(rq.id);
                BlkStatus::Ok
            }
            Reply::Timeout => {
                g.lost.push(Held {
                    hctx,
                    id: rq.id,
                    tag: rq.tag,
                    privates,
                });
                BlkStatus::Ok
            }
        }
    }

    fn commit_rqs(&self, hctx: HctxIdx) {
        self.inner.lock().commits.push(hctx);
    }

    fn get_budget(&self, _hctx: HctxIdx) -> bool {
        let mut g = self.inner.lock();
        let Some(limit) = g.budget else { return true };
        if g.budget_free + g.budget_in_use >= limit {
            g.budget_refusals += 1;
            return false;
        }
        g.budget_free += 1;
        true
    }

    fn put_budget(&self, _hctx: HctxIdx) {
        let mut g = self.inner.lock();
        if g.budget.is_some() {
            assert!(g.budget_free > 0, "put_budget without a budget token taken");
            g.budget_free -= 1;
        }
    }

    fn timeout(
        &self,
        _hctx: HctxIdx,
        rq: &mut Request,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> EhReturn {
        let mut g = self.inner.lock();
        match g.lost.iter().position(|h| h.id == rq.id) {
            Some(i) => {
                let h = g.lost.swap_remove(i);
                g.end_budget();
                g.dev_waiting.remove(&h.hctx);
                g.record(&h.privates, BlkStatus::Timeout);
                g.timeouts += 1;
                done.complete(h.id, BlkStatus::Timeout);
                EhReturn::Done
            }
            // Held requests will complete once released: give them more time.
            None => EhReturn::ResetTimer,
        }
    }

    fn poll(&self, hctx: HctxIdx, _now: Nanos, done: &mut CompletionBatch) -> usize {
        let mut g = self.inner.lock();
        let mut n = 0;
        let mut keep = VecDeque::new();
        while let Some((h, st)) = g.ready.pop_front() {
            if h.hctx == hctx {
                g.dev_waiting.remove(&hctx);
                g.end_budget();
                g.record(&h.privates, st);
                done.complete(h.id, st);
                n += 1;
            } else {
                keep.push_back((h, st));
            }
        }
        g.ready = keep;
        if n > 0 && self.is_virtio() {
            done.start_stopped_queues();
        }
        n
    }

    fn queue_rqs(&self) -> QueueRqs {
        if self.is_virtio() {
            QueueRqs::RequeueBusy
        } else {
            QueueRqs::OneByOne
        }
    }

    fn holds_requests(&self, hctx: HctxIdx) -> bool {
        self.inner.lock().inflight(hctx) > 0
    }

    fn inflight(&self, hctx: HctxIdx) -> usize {
        self.inner.lock().inflight(hctx)
    }
}

/// splitmix64: a tiny seeded generator, so fault schedules are reproducible.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < per_mille as u64
    }
}

/// A tag set of `nr_hw` hardware queues of `depth` tags each.
pub fn tag_set(nr_hw: u16, depth: u32) -> Arc<TagSet> {
    TagSet::new(TagSetConfig::new(nr_hw, depth)).expect("tag set")
}

/// A `none` queue on a fresh tag set.
pub fn queue(
    driver: &Arc<TestDriver>,
    nr_hw: u16,
    depth: u32,
    cfg: QueueConfig,
) -> Arc<RequestQueue> {
    RequestQueue::new(tag_set(nr_hw, depth), driver.clone(), None, cfg).expect("queue")
}

/// A `none` queue with `nr_ctx` software queues and default limits.
pub fn simple_queue(
    driver: &Arc<TestDriver>,
    nr_hw: u16,
    depth: u32,
    nr_ctx: u16,
) -> Arc<RequestQueue> {
    queue(
        driver,
        nr_hw,
        depth,
        QueueConfig {
            nr_ctx,
            ..QueueConfig::default()
        },
    )
}

pub fn submitters(q: &RequestQueue) -> Vec<Submitter> {
    (0..q.nr_ctx())
        .map(|c| q.submitter(CtxIdx(c as u16)))
        .collect()
}

/// A 4 KiB bio at 4 KiB block `block`, tagged with `private`.
pub fn bio4k(op: ReqOp, block: u64, private: u64) -> Bio {
    Bio::new(op, block * 8, 8).with_private(private)
}

/// Submits and insists the bio was accepted (queued or merged).
pub fn submit_ok(q: &RequestQueue, sub: &mut Submitter, bio: Bio, now: Nanos) {
    match q.submit_bio(sub, bio, now) {
        Submit::Queued | Submit::Merged => {}
        other => panic!("submit refused: {other:?}"),
    }
}

/// Cookies of every bio the submitter got back, in completion order, draining `done`.
pub fn take_done(sub: &mut Submitter) -> Vec<(u64, BlkStatus)> {
    sub.done.drain(..).map(|b| (b.private, b.status)).collect()
}

/// The cookies of every bio held by an allocated request of the queue, sorted.
pub fn bios_in_queue(q: &RequestQueue) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for slot in q.requests().iter() {
        let rq = slot.lock();
        if rq.allocated {
            v.extend(rq.bios.iter().map(|b| b.private));
        } else {
            assert!(rq.bios.is_empty(), "{:?}: free request with bios", rq.id);
        }
    }
    v.sort_unstable();
    v
}

/// Asserts the queue is empty and whole, then tears it down.
pub fn assert_whole(q: &RequestQueue) {
    q.check_invariants();
    assert_eq!(
        q.nr_allocated(),
        0,
        "requests still allocated:\n{}",
        q.debug_state()
    );
    assert!(
        q.tag_set().all_free(),
        "tags still held:\n{}",
        q.debug_state()
    );
    q.teardown();
}

// ----- a minimal FIFO scheduler ------------------------------------------------------------

/// A first-in first-out scheduler with one list per hardware queue, to drive the core's
/// scheduler paths (scheduler tags, driver tags taken at dispatch, requeue through the
/// elevator). It back-merges bios into the tail request of each list, limits writes to 3/4 of
/// the scheduler tags, and checks that the core calls its hooks consistently: every request
/// is prepared once and finished once, only prepared requests are inserted, completed or
/// requeued, and nothing is left at exit.
pub struct Fifo {
    mq_aware: bool,
    write_depth: u32,
    lists: Mutex<Vec<VecDeque<RqId>>>,
    /// Prepared and not yet finished.
    live: Mutex<std::collections::HashSet<RqId>>,
    tunables: mqblk_core::Tunables,
    /// While set, dispatch hands out nothing though there is work (BFQ idling for a queue).
    plugged: std::sync::atomic::AtomicBool,
    /// Asks at the next completion to run every hardware queue (`bfq_schedule_dispatch`).
    schedule_dispatch: std::sync::atomic::AtomicBool,
}

impl Fifo {
    fn build(init: &mqblk_core::ElevatorInit, mq_aware: bool) -> Box<dyn mqblk_core::Elevator> {
        Box::new(Fifo {
            mq_aware,
            write_depth: (init.nr_requests * 3 / 4).max(1),
            lists: Mutex::new((0..init.nr_hw_queues).map(|_| VecDeque::new()).collect()),
            live: Mutex::new(Default::default()),
            tunables: mqblk_core::Tunables::new("fifo", &[]),
            plugged: Default::default(),
            schedule_dispatch: Default::default(),
        })
    }

    /// Asks the core to run every hardware queue at the next completion.
    pub fn schedule_dispatch(&self) {
        self.schedule_dispatch
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Makes dispatch hand out nothing (true) or resume (false).
    pub fn set_plugged(&self, on: bool) {
        self.plugged.store(on, std::sync::atomic::Ordering::SeqCst);
    }
    fn assert_live(&self, id: RqId, what: &str) {
        assert!(
            self.live.lock().contains(&id),
            "fifo: {what} of {id:?}, which was never prepared or already finished"
        );
    }
}

fn fifo_init(init: &mqblk_core::ElevatorInit) -> Box<dyn mqblk_core::Elevator> {
    Fifo::build(init, false)
}

fn fifo_mq_init(init: &mqblk_core::ElevatorInit) -> Box<dyn mqblk_core::Elevator> {
    Fifo::build(init, true)
}

/// One queue-wide FIFO: may hand out requests of any hctx (like mq-deadline).
pub static FIFO: mqblk_core::ElevatorType = mqblk_core::ElevatorType {
    name: "fifo",
    alias: None,
    features: mqblk_core::ElvFeatures::empty(),
    tunables: &[],
    aliases: &[],
    init: Some(fifo_init),
    cost: mqblk_core::ElvCost::NONE,
};

/// Per-hctx FIFOs (like kyber).
pub static FIFO_MQ: mqblk_core::ElevatorType = mqblk_core::ElevatorType {
    name: "fifo-mq",
    alias: None,
    features: mqblk_core::ElvFeatures::MQ_AWARE,
    tunables: &[],
    aliases: &[],
    init: Some(fifo_mq_init),
    cost: mqblk_core::ElvCost::NONE,
};

impl mqblk_core::Elevator for Fifo {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn name(&self) -> &'static str {
        if self.mq_aware {
            "fifo-mq"
        } else {
            "fifo"
        }
    }

    fn features(&self) -> mqblk_core::ElvFeatures {
        if self.mq_aware {
            mqblk_core::ElvFeatures::MQ_AWARE
        } else {
            mqblk_core::ElvFeatures::empty()
        }
    }

    fn limit_depth(&self, bio: &mqblk_core::Bio) -> u32 {
        if bio.op == ReqOp::Write {
            self.write_depth
        } else {
            u32::MAX
        }
    }

    fn prepare_request(&self, rq: &mqblk_core::ElvRq) {
        assert!(
            self.live.lock().insert(rq.id),
            "fifo: {:?} prepared twice",
            rq.id
        );
    }

    fn bio_merge(
        &self,
        q: &mqblk_core::ElvCtx<'_>,
        hctx: HctxIdx,
        bio: Bio,
    ) -> mqblk_core::BioMerge {
        if q.nomerges == mqblk_core::NoMerges::None {
            return mqblk_core::BioMerge::NotMerged(bio);
        }
        // The one-hit check: the tail request of the bio's own hctx.
        let lists = self.lists.lock();
        let Some(&tail) = lists[hctx.0 as usize].back() else {
            return mqblk_core::BioMerge::NotMerged(bio);
        };
        let mut rq = q.rqs.lock(tail);
        match mqblk_core::merge::bio_attempt_merge(&mut rq, bio, q.limits) {
            Ok(_) => mqblk_core::BioMerge::Merged { freed: None },
            Err(b) => mqblk_core::BioMerge::NotMerged(b),
        }
    }

    fn insert_requests(
        &self,
        q: &mqblk_core::ElvCtx<'_>,
        hctx: HctxIdx,
        rqs: &[RqId],
        at_head: bool,
        _now: Nanos,
        _freed: &mut Vec<RqId>,
    ) {
        let mut lists = self.lists.lock();
        for &id in rqs {
            self.assert_live(id, "insert");
            let rq = q.rqs.lock(id);
            assert_eq!(rq.hctx, hctx, "fifo: {id:?} inserted on the wrong hctx");
            assert_eq!(
                rq.state,
                mqblk_core::RqState::Idle,
                "fifo: {id:?} inserted while {:?}",
                rq.state
            );
        }
        let list = &mut lists[hctx.0 as usize];
        if at_head {
            for &id in rqs.iter().rev() {
                list.push_front(id);
            }
        } else {
            list.extend(rqs.iter().copied());
        }
    }

    fn dispatch_request(
        &self,
        _q: &mqblk_core::ElvCtx<'_>,
        hctx: HctxIdx,
        _now: Nanos,
    ) -> Option<RqId> {
        if self.plugged.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let mut lists = self.lists.lock();
        if self.mq_aware {
            return lists[hctx.0 as usize].pop_front();
        }
        let n = lists.len();
        (0..n).find_map(|k| lists[(hctx.0 as usize + k) % n].pop_front())
    }

    fn has_work(&self, hctx: HctxIdx) -> bool {
        let lists = self.lists.lock();
        if self.mq_aware {
            !lists[hctx.0 as usize].is_empty()
        } else {
            lists.iter().any(|l| !l.is_empty())
        }
    }

    fn completed_request(&self, rq: &mqblk_core::ElvRq, _now: Nanos) {
        self.assert_live(rq.id, "completion");
    }

    fn restart_hctxs(&self, out: &mut Vec<HctxIdx>) {
        if self
            .schedule_dispatch
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            let n = self.lists.lock().len() as u16;
            out.extend((0..n).map(HctxIdx));
        }
    }

    fn finish_request(&self, rq: &mqblk_core::ElvRq) {
        assert!(
            self.live.lock().remove(&rq.id),
            "fifo: {:?} finished but not live",
            rq.id
        );
    }

    fn requeue_request(&self, rq: &mqblk_core::ElvRq, _now: Nanos) {
        self.assert_live(rq.id, "requeue");
    }

    fn tunables(&self) -> &mqblk_core::Tunables {
        &self.tunables
    }

    fn debug_state(&self) -> String {
        let lists = self.lists.lock();
        format!(
            "fifo: queued {:?}, live {}\n",
            lists.iter().map(|l| l.len()).collect::<Vec<_>>(),
            self.live.lock().len()
        )
    }

    fn check_invariants(&self) {
        let lists = self.lists.lock();
        let mut seen = std::collections::HashSet::new();
        for l in lists.iter() {
            for &id in l {
                assert!(seen.insert(id), "fifo: {id:?} queued twice");
                assert!(
                    self.live.lock().contains(&id),
                    "fifo: {id:?} queued but not live"
                );
            }
        }
    }

    fn depth_updated(&self, _nr_requests: u32, _nr_rq_ids: u32) {
        assert!(
            self.lists.lock().iter().all(|l| l.is_empty()),
            "fifo: a depth change with queued requests"
        );
    }

    fn exit_sched(&self) {
        assert!(
            self.lists.lock().iter().all(|l| l.is_empty()),
            "fifo: exit with queued requests"
        );
        assert!(
            self.live.lock().is_empty(),
            "fifo: exit with {} live requests",
            self.live.lock().len()
        );
    }
}
