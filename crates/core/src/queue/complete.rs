//! The completion side: ending requests in batches, handing their bios back, putting tags,
//! re-running queues that waited, and requeueing (`blk_mq_end_request_batch`,
//! `blk_mq_requeue_request`, `blk_mq_requeue_work` in blk-mq.c).

use super::*;
use std::collections::VecDeque;

/// `q->requeue_list` and `q->flush_list`, under one lock as the kernel's `requeue_lock`.
#[derive(Default)]
pub(crate) struct RequeueLists {
    /// What the requeue work re-inserts, walked from the front: a request the driver gave
    /// back is added at the back (`blk_mq_requeue_request`), a flush sequence's data step
    /// at the front (`blk_flush_complete_seq`'s `list_move`).
    pub(crate) rqs: VecDeque<RqId>,
    /// Flush requests (`blk_kick_flush`), re-inserted after `rqs`.
    pub(crate) flushes: Vec<RqId>,
}

impl RequeueLists {
    pub(crate) fn is_empty(&self) -> bool {
        self.rqs.is_empty() && self.flushes.is_empty()
    }
}

impl QueueInner {
    /// Processes a batch of completions and requeues (`blk_mq_end_request_batch`), routing
    /// each bio back to the software queue it came from: into `done` for `local`, onto the
    /// owner's remote list otherwise. Queues whose RESTART bit was set, or that wait for a
    /// driver tag, are run again, and their inline completions processed in turn.
    pub fn end_batch(
        &self,
        local: Option<CtxIdx>,
        batch: &mut CompletionBatch,
        done: &mut Vec<Bio>,
        runs: &mut Vec<HctxIdx>,
        now: Nanos,
    ) {
        loop {
            if !batch.requeue.is_empty() {
                let ids = std::mem::take(&mut batch.requeue);
                for &id in &ids {
                    self.requeue_request(id, now);
                }
                batch.requeue = ids;
                batch.requeue.clear();
            }
            if std::mem::take(&mut batch.start_stopped) {
                self.start_stopped_hw_queues(now, batch);
            }
            if batch.done.is_empty() {
                // Zone write plug work the ended requests made due, and the bios it failed.
                if self.zone_work(local, done, now) {
                    continue;
                }
                break;
            }
            runs.clear();
            let mut entries = std::mem::take(&mut batch.done);
            for (id, status) in entries.drain(..) {
                self.end_request(id, status, local, done, runs, now);
            }
            batch.done = entries;
            self.collect_tag_waiters(runs);
            if self.elevator.is_some() {
                self.elevator_runs(local, runs);
                runs.sort_unstable();
                runs.dedup();
            }
            // All of these the kernel runs asynchronously (`blk_mq_sched_restart`, the tag
            // and token wake-ups, `bfq_schedule_dispatch`).
            let to_run = std::mem::take(runs);
            for &h in &to_run {
                self.run_hw_queue_async(h, now, batch);
            }
            *runs = to_run;
            if self.cfg.run_all_on_complete {
                // `scsi_run_queue_async`: only after a refused budget, and only the
                // completion that takes the count back to zero runs them.
                let old = self.budget_restarts.load(Ordering::Acquire);
                if old > 0
                    && self
                        .budget_restarts
                        .compare_exchange(old, 0, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                {
                    self.run_hw_queues_async(local, now, batch);
                }
            }
        }
    }

    /// `blk_mq_start_stopped_hw_queues(q, true)`: every stopped hardware queue is started
    /// and run asynchronously.
    fn start_stopped_hw_queues(&self, now: Nanos, batch: &mut CompletionBatch) {
        for hctx in self.hctxs.iter() {
            if hctx.clear_state(state::STOPPED) {
                self.run_hw_queue_async(hctx.idx, now, batch);
            }
        }
    }

    /// `end_batch` for a submitter's own batch: its bios land in its `done`.
    pub(crate) fn end_sub_batch(&self, sub: &mut Submitter, now: Nanos) {
        self.end_batch(
            Some(sub.ctx),
            &mut sub.batch,
            &mut sub.done,
            &mut sub.runs,
            now,
        );
    }

    /// Queues waiting for a driver tag are run once any was freed.
    pub(crate) fn collect_tag_waiters(&self, runs: &mut Vec<HctxIdx>) {
        if self.tag_waiters.load(Ordering::Acquire) == 0 {
            return;
        }
        for hctx in self.hctxs.iter() {
            if hctx.clear_state(state::TAG_WAITING) {
                self.tag_waiters.fetch_sub(1, Ordering::AcqRel);
                if !runs.contains(&hctx.idx) {
                    runs.push(hctx.idx);
                }
            }
        }
    }

    /// Ends one request (`blk_mq_end_request` + `blk_mq_free_request`) under a single lock
    /// of its slot: state, bios routed back, slot freed; then the elevator hooks and tags.
    /// A flush request, or the data of a flush sequence, goes to the flush state machine.
    pub(crate) fn end_request(
        &self,
        id: RqId,
        status: BlkStatus,
        local: Option<CtxIdx>,
        done: &mut Vec<Bio>,
        runs: &mut Vec<HctxIdx>,
        now: Nanos,
    ) {
        if id.0 >= self.flush_base {
            let mut ends = Vec::new();
            self.flush_end_io(id, status, now, &mut ends);
            self.end_flush_seqs(&mut ends, local, done, runs, now);
            return;
        }
        let mut rq = self.rqs.lock(id);
        assert_eq!(
            rq.state,
            RqState::InFlight,
            "{id:?}: completed while {:?} (twice, or never issued)",
            rq.state
        );
        self.mark_complete(&mut rq, status, now);
        if rq.rq_flags.contains(RqFlags::FLUSH_SEQ) {
            // Its data is done, not its sequence: the bio stays until the sequence ends.
            let tag = (rq.rq_flags.contains(RqFlags::SCHED_TAGS) && !rq.tag.is_none())
                .then(|| std::mem::replace(&mut rq.tag, Tag::NONE));
            let (ctx, h) = (rq.ctx, rq.hctx);
            // A data step that went through the elevator (6.5 on) is done with it here:
            // `__blk_mq_end_request` calls `finish_request` before `mq_flush_data_end_io`
            // and clears `RQF_USE_SCHED`, so the end of the sequence does not again.
            let sched = rq.rq_flags.contains(RqFlags::USE_SCHED).then(|| {
                rq.rq_flags.remove(RqFlags::USE_SCHED);
                rq.elv()
            });
            drop(rq);
            if let (Some(snap), Some(e)) = (sched, &self.elevator) {
                e.completed_request(&snap, now);
                e.finish_request(&snap);
            }
            if let Some(t) = tag {
                self.put_driver_tag(h, t, ctx);
            }
            let mut ends = Vec::new();
            self.flush_data_end_io(id, ctx, h, status, now, &mut ends);
            self.end_flush_seqs(&mut ends, local, done, runs, now);
            self.note_restart(h, runs);
            return;
        }
        self.route_bios(&mut rq, status, local, done);
        let released = Self::release_slot(&mut rq);
        drop(rq);
        if released.use_sched {
            if let Some(e) = &self.elevator {
                e.completed_request(&released.snap, now);
            }
        }
        self.hctxs[released.snap.hctx.0 as usize]
            .stats
            .local()
            .completed
            .add(1);
        self.free_released(&released, runs);
    }

    /// The end of an ended request's life once its slot is released: counted for its
    /// software queue, its tags put, its hardware queue re-run if it waited for one.
    #[inline]
    pub(crate) fn free_released(&self, released: &Released, runs: &mut Vec<HctxIdx>) {
        self.ctxs[released.snap.ctx.0 as usize]
            .stats
            .completed
            .add(1);
        self.finish_and_put_tags(released);
        self.note_restart(released.snap.hctx, runs);
    }

    /// COMPLETE with `status` at `now`, traced (`blk_update_request`'s `block_rq_complete`).
    #[inline]
    pub(crate) fn mark_complete(
        &self,
        rq: &mut crate::request::Request,
        status: BlkStatus,
        now: Nanos,
    ) {
        rq.state = RqState::Complete;
        rq.complete_ns = now;
        rq.status = status;
        if let Some(t) = self.cfg.tracer.get() {
            t.rq_event(TraceAction::Complete, rq, now);
        }
    }

    /// Hands a finished request's bios back with `status`: to `done` for the `local`
    /// software queue, to their owner's remote list otherwise, or to the original of a split.
    #[inline]
    pub(crate) fn route_bios(
        &self,
        rq: &mut crate::request::Request,
        status: BlkStatus,
        local: Option<CtxIdx>,
        done: &mut Vec<Bio>,
    ) {
        let zones = self.zones.as_ref();
        for mut bio in rq.bios.drain(..) {
            bio.status = status;
            if let Some(z) = zones {
                // `blk_zone_append_update_request_bio`: where a native append went.
                if rq.op == ReqOp::ZoneAppend {
                    bio.sector = rq.sector;
                }
                z.bio_endio(&mut bio);
            }
            self.route_bio(bio, local, done);
        }
        if let Some(z) = zones {
            if rq.rq_flags.contains(RqFlags::ZONE_WRITE_PLUGGING) {
                rq.rq_flags.remove(RqFlags::ZONE_WRITE_PLUGGING);
                z.finish_request(rq.sector);
            }
            self.end_plug_failures(local, done);
        }
    }

    /// Hands one ended bio back: to `done` for the `local` software queue, to its owner's
    /// remote list otherwise, or to the original of a split.
    #[inline]
    pub(crate) fn route_bio(&self, bio: Bio, local: Option<CtxIdx>, done: &mut Vec<Bio>) {
        if bio.split.is_some() {
            self.split_piece_done(bio, local, done);
        } else if Some(bio.ctx) == local {
            done.push(bio);
        } else {
            self.hand_remote(bio);
        }
    }

    /// Parks a finished bio on its software queue's remote list and wakes the thread that
    /// submits from there, if it is not this one.
    #[inline]
    pub(crate) fn hand_remote(&self, bio: Bio) {
        if let Some(owner) = self.ctxs[bio.ctx.0 as usize].push_remote(bio) {
            self.driver.wake_submitter(owner);
        }
    }

    /// `blk_mq_sched_restart`: a freed tag may unblock requests parked on the dispatch list.
    #[inline]
    pub(crate) fn note_restart(&self, h: HctxIdx, runs: &mut Vec<HctxIdx>) {
        let hctx = &self.hctxs[h.0 as usize];
        if hctx.test_state(state::SCHED_RESTART)
            && hctx.clear_state(state::SCHED_RESTART)
            && !runs.contains(&h)
        {
            runs.push(h);
        }
    }

    /// Gives a started request back to be issued again (`blk_mq_requeue_request`). It keeps
    /// its scheduler tag but not its driver tag; it is re-inserted at the head by the requeue
    /// work, which runs on the next `timer` call (at once: the requeue deadline is `now`).
    pub fn requeue_request(&self, id: RqId, now: Nanos) {
        let (h, snap, use_sched, drv_tag, ctx) = {
            let mut rq = self.rqs.lock(id);
            if let Some(t) = self.cfg.tracer.get() {
                t.rq_event(TraceAction::Requeue, &rq, now);
            }
            rq.unstart();
            let use_sched = rq.rq_flags.contains(RqFlags::USE_SCHED);
            let drv_tag = if rq.rq_flags.contains(RqFlags::SCHED_TAGS) && !rq.tag.is_none() {
                let t = rq.tag;
                rq.tag = Tag::NONE;
                Some(t)
            } else {
                None
            };
            (rq.hctx, rq.elv(), use_sched, drv_tag, rq.ctx)
        };
        if let Some(t) = drv_tag {
            self.put_driver_tag(h, t, ctx);
        }
        if use_sched {
            if let Some(e) = &self.elevator {
                e.requeue_request(&snap, now);
            }
        }
        self.hctxs[h.0 as usize].stats.local().requeued.add(1);
        self.requeue_list.lock().rqs.push_back(id);
        self.kick_requeue_work(ctx, now);
    }

    /// `blk_mq_kick_requeue_list`: the requeue work runs at once, as kblockd work on the
    /// kicking CPU (`kblockd_mod_delayed_work_on(WORK_CPU_UNBOUND, ...)`: the local one).
    /// That CPU is taken to be `ctx`'s, the request's own: its submitter, or the CPU its
    /// hardware queue interrupts, the same one where each CPU has a queue of its own.
    pub(crate) fn kick_requeue_work(&self, ctx: CtxIdx, now: Nanos) {
        self.requeue_ctx.store(u32::from(ctx.0), Ordering::Release);
        self.requeue_at.fetch_min(now.0, Ordering::AcqRel);
    }

    /// The software queue on whose CPU the requeue work is to run, if it is due and no
    /// worker has it yet; it is now handed to one.
    pub(crate) fn take_due_requeue(&self, now: Nanos) -> Option<CtxIdx> {
        if self.requeue_at.load(Ordering::Acquire) > now.0
            || self.requeue_queued.swap(true, Ordering::AcqRel)
        {
            return None;
        }
        let c = self.requeue_ctx.load(Ordering::Acquire);
        Some(CtxIdx(if c == u32::MAX { 0 } else { c as u16 }))
    }

    /// The requeue work, if it is due, no worker has it yet and it was kicked on `ctx`'s
    /// CPU; it is now handed to that CPU ([`Self::take_due_requeue`]).
    pub(crate) fn take_due_requeue_on(&self, ctx: CtxIdx, now: Nanos) -> bool {
        let c = self.requeue_ctx.load(Ordering::Acquire);
        let on = if c == u32::MAX { 0 } else { c as u16 };
        on == ctx.0 && self.take_due_requeue(now).is_some()
    }

    /// `blk_mq_requeue_work`: re-insert requeued requests at the head, then run the queues.
    /// As in 6.18, the requeue list is walked in the order the requests were requeued
    /// (`blk_mq_requeue_request` adds each at its tail) and each goes in at the head, so a
    /// batch requeued together comes back in reverse: the last one requeued goes first.
    /// Older kernels added each at the list's head (`blk_mq_add_to_requeue_list` with
    /// `at_head`, `RQF_SOFTBARRIER`) and so kept a batch's order.
    pub(crate) fn requeue_work(
        &self,
        local: Option<CtxIdx>,
        now: Nanos,
        batch: &mut CompletionBatch,
    ) {
        self.requeue_at.store(u64::MAX, Ordering::Release);
        self.requeue_queued.store(false, Ordering::Release);
        let (ids, flushes) = {
            let mut l = self.requeue_list.lock();
            (std::mem::take(&mut l.rqs), std::mem::take(&mut l.flushes))
        };
        for &id in ids.iter().chain(&flushes) {
            let (h, ctx, flags, op) = {
                let rq = self.rqs.lock(id);
                (rq.hctx, rq.ctx, rq.rq_flags, rq.op)
            };
            if flags.contains(RqFlags::DONTPREP) {
                self.bypass_insert(h, id, false, now);
            } else if op == ReqOp::Flush
                || !flags.contains(RqFlags::USE_SCHED) && flags.contains(RqFlags::SCHED_TAGS)
            {
                self.bypass_insert(h, id, true, now);
            } else if flags.contains(RqFlags::USE_SCHED) {
                self.insert_sched(h, &[id], true, now);
            } else {
                self.insert_ctx(ctx, h, &[id], true, now);
            }
        }
        if !ids.is_empty() || !flushes.is_empty() {
            self.run_hw_queues(local, now, batch);
        }
    }
}
