//! Sequencing PREFLUSH and FUA writes (block/blk-flush.c).
//!
//! A request that asks for a cache flush before its data (`PREFLUSH`, or an empty flush bio)
//! or for its data to be durable on completion (`FUA`) is broken into up to three steps,
//! PREFLUSH → DATA → POSTFLUSH, by what the device offers (`blk_insert_flush`):
//!
//! - no volatile write cache: nothing to flush. The flags were already dropped from the bio
//!   (`submit_bio_noacct`), and an empty flush completed without a request;
//! - a write cache and FUA: PREFLUSH becomes a flush request, FUA goes to the driver with
//!   the data;
//! - a write cache without FUA: PREFLUSH and FUA both become flush requests.
//!
//! Flushes are double buffered per hardware queue (`struct blk_flush_queue`): requests that
//! need a flush wait on the pending list; one flush request is in flight at a time (C1),
//! and it is held back while a sequence's data is in flight, so requests that shared a
//! PREFLUSH share the POSTFLUSH too (C2), unless the oldest has waited
//! [`FLUSH_PENDING_TIMEOUT`] (C3). When the flush completes every request that waited for it
//! moves on. The flush request is a slot of its own per hardware queue (`fq->flush_rq`); it
//! borrows the first waiter's tag (its driver tag without a scheduler, its scheduler tag
//! with one, taking a driver tag at dispatch), as `blk_kick_flush` does.
//!
//! Through the elevator or past it (`QueueConfig::flush_via_sched`). Since Linux 6.5 every
//! write with PREFLUSH or FUA is an elevator request (`RQF_USE_SCHED`): one that needs no
//! flush step (FUA on a device that honours it, or DATA with a POSTFLUSH to follow) is
//! inserted into the scheduler as any write, and a sequence's data step goes back in at the
//! head of the elevator from the requeue work (`blk_flush_complete_seq` moves it to the
//! requeue list, `blk_mq_requeue_work` inserts it `BLK_MQ_INSERT_AT_HEAD`); the data's
//! completion ends its time in the elevator (`finish_request`). Only the flush request
//! itself goes to the head of the dispatch list. Before 6.5 (the setting off), no
//! `op_is_flush` request went through the elevator: they and their data steps went to the
//! head of the hardware queue's dispatch list.
//!
//! A sequenced request is never merged (`RQF_FLUSH_SEQ`), and is completed twice, as in
//! the kernel: its data's completion moves the sequence on (`mq_flush_data_end_io`) and only
//! the end of the whole sequence hands its bio back.
//!
//! Where we differ: a FUA write the device honours is issued directly in the kernel, when
//! no scheduler is in use and a driver tag is free (`blk_mq_try_issue_directly`); here it
//! goes to the dispatch list and the queue is run. An empty flush bio is `ReqOp::Flush`
//! here, where Linux sends a `REQ_OP_WRITE|REQ_PREFLUSH` with no data, which since 6.5 also
//! takes `limit_depth`. The kernel accepts PREFLUSH and FUA only on writes; here FUA on a
//! discard or write-zeroes (which NBD allows) becomes a POSTFLUSH on a device with a write
//! cache.

use super::*;

/// The steps of a flush sequence (`REQ_FSEQ_*`).
pub(crate) mod fseq {
    pub const PREFLUSH: u8 = 1 << 0;
    pub const DATA: u8 = 1 << 1;
    pub const POSTFLUSH: u8 = 1 << 2;
    pub const DONE: u8 = 1 << 3;
    pub const ACTIONS: u8 = PREFLUSH | DATA | POSTFLUSH;
}

/// `FLUSH_PENDING_TIMEOUT` (5 * HZ): a flush waits no longer than this for sequences' data.
pub const FLUSH_PENDING_TIMEOUT: Nanos = Nanos::from_secs(5);

/// One hardware queue's flush state (`struct blk_flush_queue`).
#[derive(Debug, Default)]
pub(crate) struct FlushQueue {
    /// Requests waiting for a flush; `queue[pending_idx]` gathers, `queue[running_idx]`
    /// waits for the flush in flight when the two differ.
    queue: [Vec<RqId>; 2],
    pending_idx: usize,
    running_idx: usize,
    /// When the pending list last became non-empty.
    pending_since: Nanos,
    /// Sequences whose data step is in flight (C2).
    data_in_flight: u32,
    /// Without a scheduler: the request whose driver tag the flush in flight borrowed; the
    /// tag maps back to it when the flush ends (`fq->orig_rq` of older kernels).
    orig: Option<RqId>,
    /// Flush requests issued.
    pub(crate) issued: u64,
}

impl FlushQueue {
    pub(crate) fn is_idle(&self) -> bool {
        self.queue.iter().all(Vec::is_empty) && !self.flush_in_flight() && self.data_in_flight == 0
    }
    /// A flush request is in flight (C1: at most one).
    pub(crate) fn flush_in_flight(&self) -> bool {
        self.pending_idx != self.running_idx
    }
    /// Every request waiting for a flush, pending or running.
    pub(crate) fn waiting(&self) -> impl Iterator<Item = RqId> + '_ {
        self.queue.iter().flatten().copied()
    }
}

/// `blk_flush_cur_seq`: the first step not yet done.
fn cur_seq(done: u8) -> u8 {
    1 << (!done).trailing_zeros()
}

/// `op_is_flush`: the request is (or carries) a flush or FUA.
#[inline]
pub(crate) fn op_is_flush(op: ReqOp, flags: ReqFlags) -> bool {
    op == ReqOp::Flush || flags.intersects(ReqFlags::PREFLUSH.union(ReqFlags::FUA))
}

impl QueueInner {
    /// The flush request slot of hardware queue `h` (after every tag-backed request).
    pub(crate) fn flush_rq_id(&self, h: usize) -> RqId {
        RqId(self.flush_base + h as u32)
    }

    /// The flush queue a request's sequence runs on (`blk_get_flush_queue`: the hardware
    /// queue its software queue maps flushes to).
    fn fq_index(&self, ctx: CtxIdx) -> usize {
        self.ctxs[ctx.0 as usize].hctxs[HctxType::Default as usize].0 as usize
    }

    /// The bio-level part of `submit_bio_noacct`: without a write cache, PREFLUSH and FUA
    /// mean nothing and are dropped. Returns true for an empty flush, which is then done.
    #[inline]
    pub(crate) fn strip_flush_flags(&self, bio: &mut Bio) -> bool {
        if self.limits.write_cache {
            return false;
        }
        bio.flags.remove(ReqFlags::PREFLUSH.union(ReqFlags::FUA));
        bio.op == ReqOp::Flush
    }

    /// `blk_insert_flush`: decide a flush request's steps and start its sequence. True if
    /// the state machine took the request; false if it goes on as a normal request (data
    /// only, or data with a POSTFLUSH to follow). Requests whose sequence ended at once are
    /// added to `ends`.
    pub(crate) fn insert_flush(
        &self,
        id: RqId,
        now: Nanos,
        ends: &mut Vec<(RqId, BlkStatus)>,
    ) -> bool {
        let (policy, ctx) = {
            let mut rq = self.rqs.lock(id);
            debug_assert_eq!(rq.bios.len(), 1, "{id:?}: a flush request was merged");
            let fua_dev = self.limits.fua && rq.op == ReqOp::Write;
            let mut policy = 0;
            if rq.nr_sectors > 0 {
                policy |= fseq::DATA;
            }
            if self.limits.write_cache {
                if rq.op == ReqOp::Flush || rq.cmd_flags.contains(ReqFlags::PREFLUSH) {
                    policy |= fseq::PREFLUSH;
                }
                if rq.cmd_flags.contains(ReqFlags::FUA) && !fua_dev {
                    policy |= fseq::POSTFLUSH;
                }
            }
            // What the driver sees: FUA only where it honours it; PREFLUSH never.
            rq.cmd_flags.remove(ReqFlags::PREFLUSH);
            if !fua_dev {
                rq.cmd_flags.remove(ReqFlags::FUA);
            }
            rq.cmd_flags.insert(ReqFlags::SYNC);
            rq.flush_seq = 0;
            if policy != fseq::DATA && policy != 0 {
                rq.rq_flags.insert(RqFlags::FLUSH_SEQ);
            }
            if policy == fseq::DATA | fseq::POSTFLUSH {
                // No PREFLUSH to wait for: the data goes on at once, a POSTFLUSH follows.
                rq.flush_seq = fseq::PREFLUSH;
            }
            (policy, rq.ctx)
        };
        match policy {
            0 => {
                ends.push((id, BlkStatus::Ok));
                true
            }
            fseq::DATA => false,
            p if p == fseq::DATA | fseq::POSTFLUSH => {
                self.flush_queues[self.fq_index(ctx)].lock().data_in_flight += 1;
                false
            }
            p => {
                let f = self.fq_index(ctx);
                let mut fq = self.flush_queues[f].lock();
                self.complete_seq(f, &mut fq, id, fseq::ACTIONS & !p, BlkStatus::Ok, now, ends);
                true
            }
        }
    }

    /// `blk_flush_complete_seq`: `id` finished the steps in `seq`; start its next one (wait
    /// for a flush, issue its data, or end it) and consider issuing a flush.
    #[allow(clippy::too_many_arguments)]
    fn complete_seq(
        &self,
        f: usize,
        fq: &mut FlushQueue,
        id: RqId,
        seq: u8,
        status: BlkStatus,
        now: Nanos,
        ends: &mut Vec<(RqId, BlkStatus)>,
    ) {
        let next = {
            let mut rq = self.rqs.lock(id);
            assert_eq!(
                rq.flush_seq & seq,
                0,
                "{id:?}: flush step {seq:#x} completed twice"
            );
            rq.flush_seq |= seq;
            if status.is_ok() {
                cur_seq(rq.flush_seq)
            } else {
                fseq::DONE
            }
        };
        match next {
            fseq::PREFLUSH | fseq::POSTFLUSH => {
                let pending = &mut fq.queue[fq.pending_idx];
                if pending.is_empty() {
                    fq.pending_since = now;
                }
                pending.push(id);
            }
            fseq::DATA => {
                // `list_move` to the requeue list's head: a sequence's data goes back in
                // ahead of requests the driver requeued.
                fq.data_in_flight += 1;
                self.requeue_list.lock().rqs.push_front(id);
                self.kick_requeue(id, now);
            }
            _ => ends.push((id, status)),
        }
        self.kick_flush(f, fq, now);
    }

    /// `blk_kick_flush`: issue a flush for the pending list if none is in flight (C1) and no
    /// sequence's data is (C2), unless the list has waited too long (C3).
    fn kick_flush(&self, f: usize, fq: &mut FlushQueue, now: Nanos) {
        let pi = fq.pending_idx;
        if pi != fq.running_idx || fq.queue[pi].is_empty() {
            return;
        }
        if fq.data_in_flight > 0 && now < fq.pending_since.saturating_add(FLUSH_PENDING_TIMEOUT) {
            return;
        }
        fq.pending_idx ^= 1;
        fq.issued += 1;
        let first = fq.queue[pi][0];
        let (tag, internal_tag, ctx, hctx, ioprio, issuer, group) = {
            let rq = self.rqs.lock(first);
            (
                rq.tag,
                rq.internal_tag,
                rq.ctx,
                rq.hctx,
                rq.ioprio,
                rq.issuer,
                rq.group,
            )
        };
        let fid = self.flush_rq_id(f);
        {
            let mut rq = self.rqs.lock(fid);
            assert!(
                !rq.allocated,
                "hctx {f}: a second flush issued while one is in flight"
            );
            assert!(rq.bios.is_empty());
            rq.allocated = true;
            rq.state = RqState::Idle;
            rq.op = ReqOp::Flush;
            rq.cmd_flags = ReqFlags::PREFLUSH;
            rq.rq_flags = RqFlags::FLUSH_SEQ;
            if self.elevator.is_some() {
                // Borrow the scheduler tag "just for cheating put/get driver tag".
                rq.rq_flags.insert(RqFlags::SCHED_TAGS);
                rq.internal_tag = internal_tag;
                rq.tag = Tag::NONE;
                fq.orig = None;
            } else {
                rq.tag = tag;
                rq.internal_tag = Tag::NONE;
                self.drv_rqs[self.set.map_index(hctx.0 as usize)][tag.0 as usize]
                    .store(fid.0, Ordering::Release);
                fq.orig = Some(first);
            }
            rq.ioprio = ioprio;
            rq.issuer = issuer;
            rq.group = group;
            rq.sector = 0;
            rq.nr_sectors = 0;
            rq.nr_segments = 0;
            rq.ctx = ctx;
            rq.hctx = hctx;
            rq.init_life(now);
        }
        self.requeue_list.lock().flushes.push(fid);
        self.kick_requeue(fid, now);
    }

    /// Has the requeue work run at once for `id`, already on a requeue list
    /// (`blk_mq_kick_requeue_list`).
    fn kick_requeue(&self, id: RqId, now: Nanos) {
        let ctx = self.rqs.lock(id).ctx;
        self.kick_requeue_work(ctx, now);
    }

    /// `flush_end_io`: the flush request of hardware queue `f` completed. Every request that
    /// waited for it moves to its next step; those whose sequence ended are added to `ends`.
    pub(crate) fn flush_end_io(
        &self,
        fid: RqId,
        status: BlkStatus,
        now: Nanos,
        ends: &mut Vec<(RqId, BlkStatus)>,
    ) {
        let f = (fid.0 - self.flush_base) as usize;
        let mut fq = self.flush_queues[f].lock();
        let (hctx, tag, fctx) = {
            let mut rq = self.rqs.lock(fid);
            assert_eq!(
                rq.state,
                RqState::InFlight,
                "{fid:?}: flush completed while {:?} (twice, or never issued)",
                rq.state
            );
            self.mark_complete(&mut rq, status, now);
            // Freed, but not through `free_released`: its scheduler tag was borrowed, and
            // its driver tag is put (with a scheduler) or handed back (without) below.
            let r = Self::release_slot(&mut rq);
            (r.snap.hctx, r.tag, r.snap.ctx)
        };
        self.hctxs[hctx.0 as usize].stats.local().completed.add(1);
        if self.elevator.is_some() {
            if !tag.is_none() {
                self.put_driver_tag(hctx, tag, fctx);
            }
        } else if let Some(orig) = fq.orig.take() {
            // The borrowed driver tag names its owner again.
            self.drv_rqs[self.set.map_index(hctx.0 as usize)][tag.0 as usize]
                .store(orig.0, Ordering::Release);
        }
        let ri = fq.running_idx;
        assert_ne!(
            fq.pending_idx, ri,
            "hctx {f}: a flush completed that was never issued"
        );
        fq.running_idx ^= 1;
        let mut running = std::mem::take(&mut fq.queue[ri]);
        for &id in &running {
            let seq = cur_seq(self.rqs.lock(id).flush_seq);
            assert!(
                seq == fseq::PREFLUSH || seq == fseq::POSTFLUSH,
                "{id:?}: waited for a flush in step {seq:#x}"
            );
            self.complete_seq(f, &mut fq, id, seq, status, now, ends);
        }
        running.clear();
        fq.queue[ri] = running;
    }

    /// `mq_flush_data_end_io`, for a request whose lock the caller dropped after marking it
    /// complete (and, with a scheduler, putting its driver tag): its data step is done.
    pub(crate) fn flush_data_end_io(
        &self,
        id: RqId,
        ctx: CtxIdx,
        hctx: HctxIdx,
        status: BlkStatus,
        now: Nanos,
        ends: &mut Vec<(RqId, BlkStatus)>,
    ) {
        self.hctxs[hctx.0 as usize].stats.local().completed.add(1);
        let f = self.fq_index(ctx);
        let mut fq = self.flush_queues[f].lock();
        assert!(
            fq.data_in_flight > 0,
            "{id:?}: flush data completed, none in flight"
        );
        fq.data_in_flight -= 1;
        self.complete_seq(f, &mut fq, id, fseq::DATA, status, now, ends);
    }

    /// The end of a flush sequence (`blk_mq_end_request` from `blk_flush_complete_seq`'s
    /// DONE): hand the bio back and free the request. It is idle (it never reached the
    /// driver) or complete (its data did).
    pub(crate) fn end_flush_seq(
        &self,
        id: RqId,
        status: BlkStatus,
        local: Option<CtxIdx>,
        done: &mut Vec<Bio>,
        runs: &mut Vec<HctxIdx>,
        now: Nanos,
    ) {
        let released = {
            let mut rq = self.rqs.lock(id);
            assert!(
                rq.state != RqState::InFlight,
                "{id:?}: flush sequence ended while its data is in flight"
            );
            self.mark_complete(&mut rq, status, now);
            self.route_bios(&mut rq, status, local, done);
            Self::release_slot(&mut rq)
        };
        self.free_released(&released, runs);
    }

    /// Ends requests whose flush sequence is over.
    pub(crate) fn end_flush_seqs(
        &self,
        ends: &mut Vec<(RqId, BlkStatus)>,
        local: Option<CtxIdx>,
        done: &mut Vec<Bio>,
        runs: &mut Vec<HctxIdx>,
        now: Nanos,
    ) {
        for (id, status) in ends.drain(..) {
            self.end_flush_seq(id, status, local, done, runs, now);
        }
    }

    /// Requests waiting in the flush state machines for a flush (pending or in flight).
    pub fn flush_waiters(&self) -> usize {
        self.flush_queues
            .iter()
            .map(|fq| fq.lock().waiting().count())
            .sum()
    }

    /// Flush requests issued on each hardware queue, for statistics.
    pub fn flushes_issued(&self) -> u64 {
        self.flush_queues.iter().map(|fq| fq.lock().issued).sum()
    }
}
