//! Freezing a queue and changing what only a frozen queue may change: the elevator
//! (`elevator_switch`, elevator.c) and `nr_requests` (`blk_mq_update_nr_requests`), and the
//! entry bookkeeping that makes both safe while other threads submit and reap
//! (`q_usage_counter` and the quiesce of blk-mq.c).
//!
//! The kernel's `blk_mq_freeze_queue` stops new bios at `bio_queue_enter` and waits until
//! every request has been freed; `blk_mq_quiesce_queue` then waits out every dispatch in
//! progress (SRCU), and the elevator and its tags are replaced. Here the part a switch
//! replaces is a [`QueueInner`] behind an `ArcSwap`; every method of [`RequestQueue`] runs
//! as an *entry* that pins one inner:
//! - a [`Submitter`] keeps the inner it last used and a per-Ctx entry count, odd while it is
//!   inside (one owner per Ctx, so a plain store: no shared line is written);
//! - a thread without one (a completion worker) holds a per-hardware-queue lock shared while
//!   inside, which the switcher takes exclusively once to wait it out.
//!
//! The core never waits: [`RequestQueue::freeze_start`] makes new bios come back
//! `Submit::Busy` (reap and retry, as for a full tag map), [`RequestQueue::freeze_drained`]
//! says when the entries that were running at the freeze have left and no request is
//! allocated, and only then [`RequestQueue::elevator_switch`] or
//! [`RequestQueue::set_nr_requests`] swap in a new inner. What a switch keeps (contexts,
//! fair-share users, flush machines, split bios) is shared between the two.

use super::*;
use crate::elevator::TunableError;
use crate::request::RequestTable;
use crate::sync::Confinement;
use std::ops::Deref;

/// `MAX_SCHED_RQ` (16 * `BLKDEV_DEFAULT_RQ`): the most scheduler requests per hardware queue
/// `nr_requests` may be set to while the queue runs with an elevator.
pub const MAX_SCHED_RQ: u32 = 16 * DEFAULT_RQ;
/// `BLKDEV_MIN_RQ`: the fewest.
pub const MIN_RQ: u32 = 4;

/// Why a runtime change (an elevator switch, a depth change) was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FreezeError {
    /// The change needs the queue frozen first.
    #[error("queue is not frozen: call freeze_start first")]
    NotFrozen,
    /// Requests are still allocated; the change waits until they are done.
    #[error("queue is frozen but not drained yet ({0} requests allocated): reap and retry")]
    NotDrained(u32),
    /// A depth outside the range the queue takes.
    #[error("nr_requests {value} out of range {min}..={max}")]
    NrRequests {
        /// The depth asked for.
        value: u32,
        /// The least it may be.
        min: u32,
        /// The most it may be.
        max: u32,
    },
    /// The new elevator refused a tunable carried over from the old one.
    #[error("the new elevator kept the old one's tunables but refused one: {0}")]
    Tunable(#[from] TunableError),
}

/// Entry counts of a queue, and the freeze state.
pub(crate) struct FreezeState {
    /// `mq_freeze_depth`: new bios are turned away while non-zero.
    depth: AtomicU32,
    /// Bumped after each swap of the inner; submitters reload theirs when it moves.
    gen: AtomicU64,
    /// Per Ctx: entries of its submitter, odd while one runs.
    ctx_seq: Box<[CachePadded<AtomicU64>]>,
    /// A simulation's queue is entered and frozen by its one thread, which needs no
    /// sequentially consistent store to see its own entries.
    confinement: Confinement,
    /// Per hardware queue, and one more for calls tied to none: held shared by each call of
    /// a thread without a submitter, taken exclusively once to wait those calls out.
    outside: Box<[CachePadded<parking_lot::RwLock<()>>]>,
    /// The entries running when the queue was frozen (`None` while not frozen); one change
    /// at a time (`q->elevator_lock`).
    at_freeze: Mutex<Option<Snapshot>>,
}

/// Where every submitter's entry count stood at one moment.
#[derive(Clone, Debug)]
struct Snapshot {
    ctx: Vec<u64>,
}

impl FreezeState {
    pub(crate) fn new(nr_ctx: usize, nr_hw: usize) -> FreezeState {
        FreezeState {
            depth: AtomicU32::new(0),
            gen: AtomicU64::new(0),
            ctx_seq: (0..nr_ctx)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            confinement: Confinement::new(),
            outside: (0..=nr_hw)
                .map(|_| CachePadded::new(parking_lot::RwLock::new(())))
                .collect(),
            at_freeze: Mutex::new(None),
        }
    }

    fn snapshot(&self) -> Snapshot {
        // Entries of a confined queue store their counts without ordering against other
        // threads: only its own thread may read them (this panics on any other).
        self.confinement.confined();
        Snapshot {
            ctx: self
                .ctx_seq
                .iter()
                .map(|s| s.load(Ordering::SeqCst))
                .collect(),
        }
    }

    /// Every submitter entry that was running at `snap` has ended (the grace period of the
    /// kernel's `synchronize_rcu` in quiesce, and of `percpu_ref_kill`).
    fn passed(&self, snap: &Snapshot) -> bool {
        snap.ctx
            .iter()
            .zip(self.ctx_seq.iter())
            .all(|(&was, now)| was % 2 == 0 || now.load(Ordering::SeqCst) != was)
    }

    /// Waits until every entry running now has ended: the calls without a submitter by
    /// taking each of their locks once, the submitters' by spinning on their counts.
    /// Entries never wait on a frozen queue, so this is a matter of microseconds; on one
    /// thread it returns at once.
    fn wait_grace(&self) {
        for slot in self.outside.iter() {
            drop(slot.write());
        }
        let snap = self.snapshot();
        let mut spins = 0u32;
        while !self.passed(&snap) {
            spins += 1;
            if spins < 1024 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// A thread without a submitter inside the queue: its shared hold, and the inner it pinned.
struct Outside<'a> {
    _held: parking_lot::RwLockReadGuard<'a, ()>,
    inner: arc_swap::Guard<Arc<QueueInner>>,
}

/// The running elevator of a queue, held for as long as the caller looks at it (a switch
/// meanwhile does not free it).
pub struct ElevatorRef(Arc<QueueInner>);

impl Deref for ElevatorRef {
    type Target = dyn Elevator;
    fn deref(&self) -> &(dyn Elevator + 'static) {
        self.0
            .elevator
            .as_deref()
            .expect("ElevatorRef of a queue with an elevator")
    }
}

/// The request table of a queue, held as [`ElevatorRef`] holds the elevator.
pub struct RequestsRef(Arc<QueueInner>);

impl Deref for RequestsRef {
    type Target = RequestTable;
    fn deref(&self) -> &RequestTable {
        &self.0.rqs
    }
}

impl RequestQueue {
    /// Builds a queue on `set`, served by `driver`, with the scheduler `elv` (`None` for
    /// `none`). Every hardware queue of the set gets a hardware context.
    pub fn new(
        set: Arc<TagSet>,
        driver: Arc<dyn Driver>,
        elv: Option<&ElevatorType>,
        cfg: QueueConfig,
    ) -> Result<Arc<RequestQueue>, QueueError> {
        QueueInner::check_config(&cfg)?;
        let nr_hw = set.nr_hw_queues() as usize;
        let map = QueueMap::new(cfg.nr_ctx, set.cfg.maps);
        let p = QueueInner::persistent(&set, &map, &cfg);
        let mut limits = cfg.limits;
        limits.capacity_sectors = driver.capacity_sectors();
        limits.write_cache = driver.write_cache();
        // FUA means nothing without a cache to write through (`blk_validate_features`).
        limits.fua = limits.write_cache && driver.fua();
        let nr_requests = match cfg.nr_requests {
            0 => QueueInner::default_nr_requests(&set, elv.and_then(|e| e.init).is_some()),
            n => n,
        };
        for h in 0..nr_hw {
            driver.init_hctx(HctxIdx(h as u16), set.cfg.queue_depth);
        }
        set.add_queue();
        let inner = QueueInner::build(
            set.clone(),
            driver.clone(),
            Elv::of(elv),
            cfg.clone(),
            limits,
            nr_requests,
            p.clone(),
        );
        Ok(Arc::new(RequestQueue {
            inner: arc_swap::ArcSwap::from_pointee(inner),
            freeze: FreezeState::new(cfg.nr_ctx as usize, nr_hw),
            set,
            driver,
            limits,
            map,
            ctxs: p.ctxs,
            hctxs: p.hctxs,
            cfg,
        }))
    }

    // ----- entries ---------------------------------------------------------------------------

    /// Begins a call for `sub`'s Ctx and hands out the inner it should use.
    #[inline]
    fn enter(&self, sub: &mut Submitter) -> Arc<QueueInner> {
        sub.seq += 1;
        // SeqCst, so that a freezer reading the counts after raising the depth sees this
        // entry, or this entry sees the depth (`percpu_ref_tryget_live`); on one thread the
        // freezer is this thread, and program order is enough.
        let order = if self.freeze.confinement.confined() {
            Ordering::Relaxed
        } else {
            Ordering::SeqCst
        };
        self.freeze.ctx_seq[sub.ctx.0 as usize].store(sub.seq, order);
        let gen = self.freeze.gen.load(Ordering::SeqCst);
        if gen != sub.gen || sub.inner.is_none() {
            sub.inner = Some(self.inner.load_full());
            sub.gen = gen;
        }
        sub.inner.take().expect("a submitter's inner")
    }

    #[inline]
    fn exit(&self, sub: &mut Submitter, inner: Arc<QueueInner>) {
        sub.inner = Some(inner);
        sub.seq += 1;
        self.freeze.ctx_seq[sub.ctx.0 as usize].store(sub.seq, Ordering::Release);
    }

    /// Begins a call from a thread without a submitter, counted on `slot` (a hardware
    /// queue, or `None` for calls tied to none).
    #[inline]
    fn enter_outside(&self, slot: Option<HctxIdx>) -> Outside<'_> {
        let i = slot.map_or(self.freeze.outside.len() - 1, |h| h.0 as usize);
        // Task-fair: a waiting switcher is not starved by a stream of calls. No call is
        // made while the same thread holds a slot (entries do not nest).
        let held = self.freeze.outside[i].read();
        Outside {
            _held: held,
            inner: self.inner.load(),
        }
    }

    /// The current inner, for a look that touches no request.
    fn current(&self) -> Arc<QueueInner> {
        self.inner.load_full()
    }

    /// A submitter handle for software queue `ctx`.
    pub fn submitter(&self, ctx: CtxIdx) -> Submitter {
        let gen = self.freeze.gen.load(Ordering::SeqCst);
        let inner = self.inner.load_full();
        let mut sub = inner.submitter(ctx);
        sub.inner = Some(inner);
        sub.gen = gen;
        sub
    }

    /// Submits a bio (`blk_mq_submit_bio`): merge if possible, else allocate a request and
    /// plug it, insert it, or issue it directly. Completions that happen at once land in
    /// `sub.done`. While the queue is frozen the bio comes back as `Submit::Busy`
    /// (`bio_queue_enter` would sleep).
    pub fn submit_bio(&self, sub: &mut Submitter, bio: Bio, now: Nanos) -> Submit {
        self.submit(sub, bio, now, false)
    }

    /// `__submit_bio`: the bio goes under a plug of its own, started, submitted and finished
    /// here, unless the caller's plug is already open (then it joins that one, as
    /// `blk_start_plug` nests). What a lone bio meets in today's kernel
    /// (`QueueSettings::submit_bio_plugs`). A [`Submit::Busy`] answer leaves the plug
    /// open: the caller finishes it ([`Self::finish_plug`]) once it waits for a tag.
    pub fn submit_bio_plugged(&self, sub: &mut Submitter, bio: Bio, now: Nanos) -> Submit {
        self.submit(sub, bio, now, true)
    }

    fn submit(&self, sub: &mut Submitter, bio: Bio, now: Nanos, own_plug: bool) -> Submit {
        let inner = self.enter(sub);
        let r = if self.freeze.depth.load(Ordering::SeqCst) != 0 {
            Submit::Busy(Box::new(bio))
        } else if !own_plug || sub.plug.is_started() {
            inner.submit_bio(sub, bio, now)
        } else {
            sub.plug.start();
            let r = inner.submit_bio(sub, bio, now);
            // A task that sleeps for a tag (`blk_mq_get_tag`'s `io_schedule`) has its plug
            // flushed by the scheduler on the way (`sched_submit_work`:
            // `blk_flush_plug(plug, true)`, whose queue runs are asynchronous; the caller's
            // `finish_plug` runs them inline). So a bio short of a tag leaves the plug open
            // for the caller to finish once it waits, and a tag that flush frees wakes it.
            if !matches!(r, Submit::Busy(_)) {
                inner.finish_plug(sub, now);
            }
            r
        };
        self.exit(sub, inner);
        r
    }

    /// `blk_finish_plug` / `blk_mq_flush_plug_list`.
    pub fn finish_plug(&self, sub: &mut Submitter, now: Nanos) {
        let inner = self.enter(sub);
        inner.finish_plug(sub, now);
        self.exit(sub, inner);
    }

    /// Issues everything in the plug (it stays started).
    pub fn flush_plug(&self, sub: &mut Submitter, now: Nanos) {
        let inner = self.enter(sub);
        inner.flush_plug(sub, now);
        self.exit(sub, inner);
    }

    /// Reaps the driver's completions for this submitter's hardware queues, collects bios
    /// other threads completed for it, and services due timers. Returns the number of bios
    /// now waiting in `sub.done`.
    pub fn poll(&self, sub: &mut Submitter, now: Nanos) -> usize {
        let inner = self.enter(sub);
        let n = inner.poll(sub, now);
        self.exit(sub, inner);
        n
    }

    /// Reaps completions of one hardware queue from a thread with no software queue (a
    /// completion worker, the userspace interrupt handler). Bios go to their submitters.
    pub fn poll_hctx(&self, h: HctxIdx, batch: &mut CompletionBatch, now: Nanos) -> usize {
        let e = self.enter_outside(Some(h));
        e.inner.poll_hctx(h, batch, now)
    }

    /// Services everything time-driven that is due: delayed queue runs, the requeue work,
    /// request timeouts and the elevator's timer. Completions land as in [`Self::end_batch`].
    pub fn timer(&self, sub: &mut Submitter, now: Nanos) {
        let inner = self.enter(sub);
        inner.timer(sub, now);
        self.exit(sub, inner);
    }

    /// [`Self::timer`] for a thread that owns no software queue (a runtime worker): every
    /// completion is routed to its submitter's remote list.
    pub fn timer_detached(&self, batch: &mut CompletionBatch, now: Nanos) {
        let e = self.enter_outside(None);
        e.inner.timer_detached(batch, now);
    }

    /// The earliest time `timer` has work to do, if any.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let e = self.enter_outside(None);
        e.inner.next_deadline()
    }

    /// With `QueueConfig::kblockd_runs`: the hardware queues whose armed run came due and
    /// has no worker yet, onto `out`. The caller executes each with [`Self::run_work`] on a
    /// CPU of the queue once a worker would be there; until then the run stays pending
    /// (a re-arm may still push it back) and out of [`Self::next_deadline`].
    pub fn take_due_runs(&self, now: Nanos, out: &mut Vec<HctxIdx>) {
        let e = self.enter_outside(None);
        e.inner.take_due_runs(now, out);
    }

    /// With `QueueConfig::kblockd_runs`: the software queue on whose CPU the requeue work
    /// (`blk_mq_requeue_work`) is to run, if it came due and has no worker yet. The caller
    /// executes it with [`Self::requeue_work`].
    pub fn take_due_requeue(&self, now: Nanos) -> Option<CtxIdx> {
        let e = self.enter_outside(None);
        e.inner.take_due_requeue(now)
    }

    /// Whether the requeue work is due and was kicked on `sub`'s CPU, where a kblockd worker
    /// woken for it preempts the task that kicked it: if so it is handed to that worker, and
    /// the caller executes it there with [`Self::requeue_work`] now, before the task goes on.
    pub fn take_due_requeue_here(&self, sub: &Submitter, now: Nanos) -> bool {
        let e = self.enter_outside(None);
        e.inner.take_due_requeue_on(sub.ctx, now)
    }

    /// A worker on `sub`'s CPU executes the requeue work: requeued requests go back, and the
    /// hardware queues run (inline only `sub`'s own).
    pub fn requeue_work(&self, sub: &mut Submitter, now: Nanos) {
        let inner = self.enter(sub);
        inner.requeue_work(Some(sub.ctx), now, &mut sub.batch);
        inner.end_sub_batch(sub, now);
        self.exit(sub, inner);
    }

    /// A worker executes hardware queue `h`'s run work (`blk_mq_run_work_fn`) on `sub`'s
    /// CPU: the queue runs unless its run was pushed back since it came due.
    pub fn run_work(&self, h: HctxIdx, sub: &mut Submitter, now: Nanos) {
        let inner = self.enter(sub);
        inner.run_work(h, now, &mut sub.batch);
        inner.end_sub_batch(sub, now);
        self.exit(sub, inner);
    }

    /// Ends the requests a driver reported in `batch` (`blk_mq_end_request_batch`): bios of
    /// `local`'s software queue go to `done`, others to their submitter's remote list, and
    /// hardware queues that should run again to `runs`.
    pub fn end_batch(
        &self,
        local: Option<CtxIdx>,
        batch: &mut CompletionBatch,
        done: &mut Vec<Bio>,
        runs: &mut Vec<HctxIdx>,
        now: Nanos,
    ) {
        let e = self.enter_outside(None);
        e.inner.end_batch(local, batch, done, runs, now);
    }

    /// Puts a request back for a later dispatch (`blk_mq_requeue_request`).
    pub fn requeue_request(&self, id: RqId, now: Nanos) {
        let e = self.enter_outside(None);
        e.inner.requeue_request(id, now);
    }

    /// Runs hardware queue `h` (`blk_mq_run_hw_queue`).
    pub fn run_hw_queue(&self, h: HctxIdx, now: Nanos, batch: &mut CompletionBatch) {
        let e = self.enter_outside(Some(h));
        e.inner.run_hw_queue(h, now, batch);
    }

    /// Runs every hardware queue with work (`blk_mq_run_hw_queues`).
    pub fn run_hw_queues(&self, local: Option<CtxIdx>, now: Nanos, batch: &mut CompletionBatch) {
        let e = self.enter_outside(None);
        e.inner.run_hw_queues(local, now, batch);
    }

    /// Whether hardware queue `h` has anything to dispatch (`blk_mq_hctx_has_pending`).
    pub fn hctx_has_pending(&self, h: HctxIdx) -> bool {
        let e = self.enter_outside(Some(h));
        e.inner.hctx_has_pending(h)
    }

    /// Stops a hardware queue (`blk_mq_stop_hw_queue`): it is not run until started again.
    pub fn stop_hw_queue(&self, h: HctxIdx) {
        let e = self.enter_outside(Some(h));
        e.inner.stop_hw_queue(h);
    }

    /// Starts a stopped hardware queue and runs it (`blk_mq_start_stopped_hw_queue`).
    pub fn start_hw_queue(&self, sub: &mut Submitter, h: HctxIdx, now: Nanos) {
        let inner = self.enter(sub);
        inner.start_hw_queue(sub, h, now);
        self.exit(sub, inner);
    }

    /// Asserts the queue is empty and whole, then detaches the elevator (`exit_sched`): no
    /// request allocated, every tag free, every list empty. Call once all I/O has completed.
    pub fn teardown(&self) {
        let e = self.enter_outside(None);
        e.inner.teardown();
    }

    /// Cross-checks the request table against the tag maps and lists. O(requests): for tests
    /// and the simulator.
    pub fn check_invariants(&self) {
        let e = self.enter_outside(None);
        e.inner.check_invariants();
    }

    /// The state dump (blk-mq-debugfs.c's attributes).
    pub fn debug_state(&self) -> String {
        let e = self.enter_outside(None);
        e.inner.debug_state()
    }

    /// A zoned queue's zones from the one holding `sector`, at most `nr`, as the driver
    /// reports them (`blkdev_report_zones`); a zone whose write plug lost track of its
    /// write pointer after a failed write takes it up from the report
    /// (`disk_zone_wplug_sync_wp_offset`). `None` for a regular device.
    pub fn report_zones(&self, sector: u64, nr: usize) -> Option<Vec<crate::zoned::Zone>> {
        let e = self.enter_outside(None);
        e.inner.limits.zoned?;
        let zones = e.inner.driver.report_zones(sector, nr)?;
        // Without zone write plugs (before Linux 6.10) the report is the device's alone.
        let Some(z) = e.inner.zones.as_ref() else {
            return Some(zones);
        };
        for zone in &zones {
            z.sync_zone(zone);
        }
        let mut done = Vec::new();
        e.inner.end_plug_failures(None, &mut done);
        debug_assert!(
            done.is_empty(),
            "no bio ends locally without a software queue"
        );
        Some(zones)
    }

    /// Zone write plugging's figures: bios waiting on plugs, and writes the plugs failed
    /// before they reached the device. `None` for a regular device.
    pub fn zone_plug_stats(&self) -> Option<(usize, u64)> {
        let e = self.enter_outside(None);
        let z = e.inner.zones.as_ref()?;
        Some((z.plugged(), z.refused()))
    }

    /// The write pointer the block layer keeps for zone `zno`, as sectors from its start,
    /// while the zone has a write plug.
    pub fn zone_wp_offset(&self, zno: u32) -> Option<u64> {
        let e = self.enter_outside(None);
        e.inner.zones.as_ref()?.wp_offset(zno)
    }

    /// Requests waiting in the flush machines.
    pub fn flush_waiters(&self) -> usize {
        let e = self.enter_outside(None);
        e.inner.flush_waiters()
    }

    /// Flush requests issued since the queue was made.
    pub fn flushes_issued(&self) -> u64 {
        let e = self.enter_outside(None);
        e.inner.flushes_issued()
    }

    // ----- accessors -------------------------------------------------------------------------

    /// The number of hardware queues.
    pub fn nr_hw_queues(&self) -> usize {
        self.hctxs.len()
    }
    /// The number of software queues.
    pub fn nr_ctx(&self) -> usize {
        self.ctxs.len()
    }
    /// Hardware queue `h`.
    pub fn hctx(&self, h: HctxIdx) -> &Hctx {
        &self.hctxs[h.0 as usize]
    }
    /// Software queue `c`.
    pub fn ctx(&self, c: CtxIdx) -> &Ctx {
        &self.ctxs[c.0 as usize]
    }
    /// The queue's limits.
    pub fn limits(&self) -> &QueueLimits {
        &self.limits
    }
    /// The queue's configuration as it now stands.
    pub fn config(&self) -> &QueueConfig {
        &self.cfg
    }
    /// The tag set its driver tags come from.
    pub fn tag_set(&self) -> &Arc<TagSet> {
        &self.set
    }
    /// Its driver.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }
    /// Per-type hardware queue of a software queue.
    pub fn map_queue(&self, ctx: CtxIdx, ty: HctxType) -> HctxIdx {
        self.ctxs[ctx.0 as usize].hctxs[ty as usize]
    }
    /// The software-queue → hardware-queue maps.
    pub fn queue_map(&self) -> &QueueMap {
        &self.map
    }
    /// The running elevator, `None` for `none`.
    pub fn elevator(&self) -> Option<ElevatorRef> {
        let inner = self.current();
        inner.elevator.is_some().then(|| ElevatorRef(inner))
    }
    /// The name of the running elevator (`none` without one).
    pub fn elevator_name(&self) -> &'static str {
        self.current()
            .elevator
            .as_ref()
            .map_or("none", |e| e.name())
    }
    /// The request table of the running configuration.
    pub fn requests(&self) -> RequestsRef {
        RequestsRef(self.current())
    }
    /// The scheduler tags per hardware queue (`nr_requests`).
    pub fn nr_requests(&self) -> u32 {
        self.current().nr_requests
    }
    /// Requests allocated and not yet freed. O(requests): it scans the table rather than
    /// keep a queue-wide counter that every submitter would write.
    pub fn nr_allocated(&self) -> u32 {
        self.current().nr_allocated()
    }
    /// The request holding driver tag `tag` of hardware queue `hctx` (`blk_mq_tag_to_rq`).
    pub fn tag_to_rq(&self, hctx: HctxIdx, tag: Tag) -> Option<RqId> {
        self.current().tag_to_rq(hctx, tag)
    }

    // ----- freezing and switching ------------------------------------------------------------

    /// `blk_freeze_queue_start`: from now on new bios come back `Submit::Busy` until as many
    /// [`Self::unfreeze`] calls. Requests already allocated go on to complete.
    pub fn freeze_start(&self) {
        let mut at = self.freeze.at_freeze.lock();
        if self.freeze.depth.fetch_add(1, Ordering::SeqCst) == 0 {
            *at = Some(self.freeze.snapshot());
        }
    }

    /// `blk_mq_unfreeze_queue`: undoes one [`Self::freeze_start`].
    pub fn unfreeze(&self) {
        let mut at = self.freeze.at_freeze.lock();
        let was = self.freeze.depth.load(Ordering::SeqCst);
        assert!(was > 0, "unfreeze of a queue that is not frozen");
        if was == 1 {
            *at = None;
        }
        self.freeze.depth.store(was - 1, Ordering::SeqCst);
    }

    /// Whether the queue is frozen.
    pub fn is_frozen(&self) -> bool {
        self.freeze.depth.load(Ordering::SeqCst) != 0
    }

    /// The condition `blk_mq_freeze_queue_wait` sleeps on, tested once: the queue is
    /// frozen, the submissions that were running when it froze have ended, and no request is
    /// allocated (none plugged, queued, in flight or waiting for a flush). Someone must keep
    /// reaping completions meanwhile, as the submitters of a runtime do.
    pub fn freeze_drained(&self) -> bool {
        self.drain_state().is_ok()
    }

    fn drain_state(&self) -> Result<(), FreezeError> {
        self.drained_at(&self.freeze.at_freeze.lock())
    }

    /// [`Self::drain_state`] under the freeze lock the caller holds.
    fn drained_at(&self, at: &Option<Snapshot>) -> Result<(), FreezeError> {
        let Some(snap) = at.as_ref() else {
            return Err(FreezeError::NotFrozen);
        };
        if !self.freeze.passed(snap) {
            return Err(FreezeError::NotDrained(self.nr_allocated()));
        }
        let inner = self.current();
        let n = inner.nr_allocated();
        if n != 0 || !inner.is_drained() {
            return Err(FreezeError::NotDrained(n));
        }
        Ok(())
    }

    /// `elevator_switch`: replaces the elevator of a frozen, drained queue (`None` for
    /// `none`). The new one starts with its default tunables and the default `nr_requests`
    /// (`blk_mq_init_sched`; the tag set's depth for `none`), as a write to
    /// `queue/scheduler` does. The old elevator's
    /// `exit_sched` runs; threads still inside the queue finish with the old configuration
    /// (it has no requests) before this returns. The caller unfreezes.
    pub fn elevator_switch(&self, elv: Option<&ElevatorType>) -> Result<(), FreezeError> {
        let nr = QueueInner::default_nr_requests(&self.set, elv.and_then(|e| e.init).is_some());
        self.replace_inner(Elv::of(elv), nr)
    }

    /// `queue_requests_store` / `blk_mq_update_nr_requests` on a frozen, drained queue: with
    /// an elevator, `MIN_RQ..=MAX_SCHED_RQ` scheduler requests per hardware queue, new
    /// scheduler tags, and the same elevator, its state and tunables kept, told of the new
    /// depth (`depth_updated`: mq-deadline's `async_depth` becomes `nr_requests` again,
    /// kyber's and BFQ's limits follow); without one, at most the tag set's queue depth,
    /// which is what the driver tags allow anyway. The caller unfreezes.
    ///
    /// As 6.18's `queue_requests_store`: the current value changes nothing, a value below
    /// `BLKDEV_MIN_RQ` (4) is raised to it, and one past the limit is refused.
    pub fn set_nr_requests(&self, nr: u32) -> Result<(), FreezeError> {
        let cur = self.current();
        if nr == cur.nr_requests {
            return Ok(());
        }
        let nr = nr.max(MIN_RQ);
        let max = match cur.elv_init {
            Some(_) => MAX_SCHED_RQ.max(cur.nr_requests),
            None => self.set.cfg.queue_depth,
        };
        if !(MIN_RQ..=max).contains(&nr) {
            return Err(FreezeError::NrRequests {
                value: nr,
                min: MIN_RQ,
                max,
            });
        }
        let elv = match (&cur.elevator, cur.elv_init) {
            (Some(e), Some(init)) => Elv::Keep(e.clone(), init),
            _ => Elv::None,
        };
        drop(cur);
        self.replace_inner(elv, nr)
    }

    fn replace_inner(&self, elv: Elv, nr_requests: u32) -> Result<(), FreezeError> {
        // Held throughout: no unfreeze and no other change meanwhile.
        let at = self.freeze.at_freeze.lock();
        self.drained_at(&at)?;
        let old = self.current();
        let kept = matches!(elv, Elv::Keep(..));
        let new = QueueInner::build(
            self.set.clone(),
            self.driver.clone(),
            elv,
            self.cfg.clone(),
            self.limits,
            nr_requests,
            old.persistent_parts(),
        );
        // Fresh software-queue hints: the old ones may point past the new maps' depth.
        for c in self.ctxs.iter() {
            c.sched_hint.store(c.idx.0 as u32 * 16, Ordering::Relaxed);
        }
        self.inner.store(Arc::new(new));
        self.freeze.gen.fetch_add(1, Ordering::SeqCst);
        if !kept {
            if let Some(e) = &old.elevator {
                e.exit_sched();
            }
        }
        // Quiesce: whoever entered with the old inner leaves before anything is submitted
        // to the new one.
        self.freeze.wait_grace();
        Ok(())
    }
}

impl Drop for RequestQueue {
    /// A request still with the driver may have its buffers written by the device (a real
    /// io_uring driver's kernel) after we are gone: rather than free them under it, the
    /// request table is leaked. Only a queue dropped without draining pays this.
    fn drop(&mut self) {
        let inner = self.inner.load_full();
        let in_flight = inner
            .rqs
            .iter()
            .any(|slot| slot.lock().state == RqState::InFlight);
        if !inner.torn_down.swap(true, Ordering::AcqRel) {
            self.set.del_queue();
        }
        if in_flight {
            std::mem::forget(inner);
        }
    }
}

impl QueueInner {
    /// Nothing waits anywhere in this configuration: no requeued request, no busy flush
    /// machine, no dispatch list or software queue holding a request, no bio on a zone
    /// write plug (a plugged bio keeps its reference on the queue, `q_usage_counter`, so a
    /// freeze waits for it to be issued and to complete).
    pub(crate) fn is_drained(&self) -> bool {
        self.zones.as_ref().is_none_or(|z| z.plugged() == 0)
            && self.requeue_list.lock().is_empty()
            && self.flush_queues.iter().all(|fq| fq.lock().is_idle())
            && self
                .hctxs
                .iter()
                .all(|h| h.dispatch_list_len() == 0 && !h.any_ctx_pending())
    }
}
