//! Running hardware queues (`block/blk-mq-sched.c`, `blk_mq_dispatch_rq_list` in
//! `block/blk-mq.c`): which requests go to the driver, in what order, and what happens when
//! the driver, its budget or the tags say "not now".

use crate::driver::{CompletionBatch, QueueRqs};
use crate::elevator::ElvFeatures;
use crate::hctx::state;
use crate::queue::{QueueInner, RqRef, RESOURCE_DELAY};
use crate::request::{RqFlags, RqId};
use crate::status::BlkStatus;
use crate::trace::TraceAction;
use crate::{CtxIdx, HctxIdx, Nanos};
use std::sync::atomic::Ordering;

impl QueueInner {
    /// Runs one hardware queue (`blk_mq_run_hw_queue`, inline). As in the kernel, where
    /// `blk_mq_sched_dispatch_requests` runs under `blk_mq_run_dispatch_ops` with nothing
    /// excluding another CPU's run, several threads may run the same queue at once, each
    /// dispatching what it finds: the dispatch list, the software queues and the elevator
    /// keep their own locks, and the driver its own per-queue ones. So a thread issues its
    /// request itself, on its own driver context (the uring driver's ring of the thread),
    /// rather than leaving it to whichever thread is running the queue.
    pub fn run_hw_queue(&self, h: HctxIdx, now: Nanos, batch: &mut CompletionBatch) {
        let hctx = &self.hctxs[h.0 as usize];
        if hctx.is_stopped() {
            return;
        }
        hctx.stats.local().run.add(1);
        if let Some(t) = self.cfg.tracer.get() {
            t.event(&crate::trace::TraceEvent::run(h, now));
        }
        // The queue's scratch list if no other run has it, else one of this run's own.
        match hctx.run_scratch.try_lock() {
            Some(mut scratch) => self.sched_dispatch_requests(h, now, batch, &mut scratch),
            None => self.sched_dispatch_requests(h, now, batch, &mut Vec::new()),
        }
    }

    /// Runs "all" hardware queues (`blk_mq_run_hw_queues(q, false)`). With a scheduler that
    /// is not `MQ_AWARE` and several hardware queues, only the caller's default hardware
    /// queue runs, plus any queue with requests on its dispatch list: the scheduler's
    /// requests are queue-wide, so running every hctx would only contend on its lock (seed
    /// 000). Under `kblockd_runs` a queue runs inline only from a CPU of its own (`local`'s);
    /// the others' runs are armed as work, as `__blk_mq_delay_run_hw_queue` does when the
    /// current CPU is not in the hctx's mask.
    pub fn run_hw_queues(&self, local: Option<CtxIdx>, now: Nanos, batch: &mut CompletionBatch) {
        self.run_hw_queues_as(local, false, now, batch);
    }

    /// `blk_mq_run_hw_queues(q, true)`: as [`Self::run_hw_queues`], every run armed as work
    /// under `kblockd_runs`.
    pub(crate) fn run_hw_queues_async(
        &self,
        local: Option<CtxIdx>,
        now: Nanos,
        batch: &mut CompletionBatch,
    ) {
        self.run_hw_queues_as(local, true, now, batch);
    }

    fn run_hw_queues_as(
        &self,
        local: Option<CtxIdx>,
        asynchronous: bool,
        now: Nanos,
        batch: &mut CompletionBatch,
    ) {
        let sq_hctx = self.sq_hctx(local);
        // The queue `local`'s CPU may run inline, unless the run is asynchronous.
        let inline_ok = local
            .filter(|_| !asynchronous)
            .map(|c| self.ctxs[c.0 as usize].hctxs[0]);
        for hctx in self.hctxs.iter() {
            let h = hctx.idx;
            if sq_hctx.is_some_and(|sq| h != sq) && hctx.dispatch_list_len() == 0 {
                continue;
            }
            if !self.hctx_has_pending(h) {
                continue;
            }
            if self.cfg.kblockd_runs && inline_ok != Some(h) {
                self.arm_run_work(h, now);
            } else {
                self.run_hw_queue(h, now, batch);
            }
        }
    }

    /// `blk_mq_run_hw_queue(hctx, true)`: armed as work under `kblockd_runs` if the queue has
    /// something to dispatch (the kernel's `need_run`), else run at once.
    pub(crate) fn run_hw_queue_async(&self, h: HctxIdx, now: Nanos, batch: &mut CompletionBatch) {
        if !self.cfg.kblockd_runs {
            self.run_hw_queue(h, now, batch);
        } else if self.hctx_has_pending(h) {
            self.arm_run_work(h, now);
        }
    }

    /// Queues hardware queue `h`'s run work now (`kblockd_mod_delayed_work_on(.., 0)`),
    /// unless the queue is stopped.
    fn arm_run_work(&self, h: HctxIdx, now: Nanos) {
        let hctx = &self.hctxs[h.0 as usize];
        if !hctx.is_stopped() {
            hctx.arm_run(now);
        }
    }

    /// The hardware queues the elevator asks to run (BFQ's `bfq_schedule_dispatch`, kyber's
    /// token wake-ups), onto `out`. A scheduler that is not `MQ_AWARE` asks for all of them,
    /// which the kernel does with `blk_mq_run_hw_queues`: under the single-CPU dispatch rule
    /// only the caller's queue runs, and those with requests on their dispatch lists.
    pub(crate) fn elevator_runs(&self, local: Option<CtxIdx>, out: &mut Vec<HctxIdx>) {
        let Some(e) = &self.elevator else {
            return;
        };
        let from = out.len();
        e.restart_hctxs(out);
        if let Some(sq) = self.sq_hctx(local) {
            let mut i = from;
            while i < out.len() {
                let h = out[i];
                if h == sq || self.hctxs[h.0 as usize].dispatch_list_len() > 0 {
                    i += 1;
                } else {
                    out.swap_remove(i);
                }
            }
        }
    }

    /// `blk_mq_delay_run_hw_queues`: arms a run of every hardware queue `delay` from `now`,
    /// leaving alone a queue whose run is already armed (`delayed_work_pending`: re-arming
    /// would let queues keep pushing each other's runs back). Under the single-CPU dispatch
    /// rule only `local`'s queue, and those with requests on their dispatch lists. With
    /// `delay_run_rearms` (the kernel before 5.17) a pending run is pushed back instead:
    /// one queue's empty dispatch can postpone another's due run again and again, until
    /// that queue's worker wins a race. Only with `kblockd_runs`: without workers the
    /// timer runs due queues in index order, so the lowest would win every race and a
    /// request on a higher queue's dispatch list could wait for ever (the fuzzer found it).
    pub(crate) fn delay_run_hw_queues(&self, local: Option<CtxIdx>, now: Nanos, delay: Nanos) {
        let sq = self.sq_hctx(local);
        let at = self.delayed(now, delay);
        for hctx in self.hctxs.iter() {
            if hctx.is_stopped() {
                continue;
            }
            if !(sq.is_none_or(|s| s == hctx.idx) || hctx.dispatch_list_len() > 0) {
                continue;
            }
            if self.cfg.delay_run_rearms && self.cfg.kblockd_runs {
                if hctx.run_at.load(Ordering::Acquire) < at.0 {
                    hctx.stats.local().postponed.add(1);
                    if self.hctx_has_pending(hctx.idx) {
                        hctx.stats.local().postponed_pending.add(1);
                    }
                }
                hctx.rearm_run(at);
            } else if hctx.run_armed_at().is_none() {
                hctx.arm_run(at);
            }
        }
    }

    /// When a run delayed by `delay` from `now` is due. Under `kblockd_runs` it is delayed
    /// work on the timer wheel: `msecs_to_jiffies` rounds the delay up to whole ticks, counted
    /// from the current tick, so runs armed within one tick come due together at a tick
    /// boundary (and race there). Without it, exactly `delay` later.
    fn delayed(&self, now: Nanos, delay: Nanos) -> Nanos {
        if !self.cfg.kblockd_runs {
            return now.saturating_add(delay);
        }
        let tick = crate::time::JIFFY.0;
        Nanos((now.0 / tick + delay.0.div_ceil(tick)).saturating_mul(tick))
    }

    /// The device's budget for one more request (`blk_mq_get_dispatch_budget`); a refusal is
    /// counted for the completion path's re-run of every queue (SCSI's `sdev->restarts`,
    /// raised in `scsi_mq_get_budget`).
    fn get_budget(&self, h: HctxIdx) -> bool {
        let ok = self.driver.get_budget(h);
        if !ok {
            self.budget_restarts.fetch_add(1, Ordering::AcqRel);
        }
        ok
    }

    /// `blk_mq_get_sq_hctx`: the single hardware queue to run, when the rule applies and
    /// that queue is not stopped (a stopped one leaves every queue to run, as in the kernel).
    fn sq_hctx(&self, local: Option<CtxIdx>) -> Option<HctxIdx> {
        let elv = self.elevator.as_ref()?;
        // With 5.10's per-hctx request counts the rule steps aside: the local queue may
        // count none of the requests waiting, and no other queue would run (the series
        // that brought the rule reverted the counts first for that reason). Together they
        // never shipped; we run every queue as 5.10 did rather than stall.
        if elv.features().contains(ElvFeatures::MQ_AWARE)
            || self.hctxs.len() == 1
            || !self.cfg.sq_sched_dispatch
            || elv.counts_per_hctx()
        {
            return None;
        }
        let ctx = local.unwrap_or(CtxIdx(0));
        let h = self.ctxs[ctx.0 as usize].hctxs[0];
        (!self.hctxs[h.0 as usize].is_stopped()).then_some(h)
    }

    /// `blk_mq_hctx_has_pending`.
    pub fn hctx_has_pending(&self, h: HctxIdx) -> bool {
        let hctx = &self.hctxs[h.0 as usize];
        hctx.dispatch_list_len() > 0
            || hctx.any_ctx_pending()
            || self.elevator.as_ref().is_some_and(|e| e.has_work(h))
    }

    /// `blk_mq_sched_dispatch_requests`: left-overs first, then the elevator or the
    /// software queues.
    fn sched_dispatch_requests(
        &self,
        h: HctxIdx,
        now: Nanos,
        batch: &mut CompletionBatch,
        scratch: &mut Vec<(RqId, HctxIdx)>,
    ) {
        let hctx = &self.hctxs[h.0 as usize];
        let mut need_dispatch = hctx.is_busy();
        if hctx.dispatch_list_len() > 0 {
            let leftovers: Vec<RqId> = {
                let mut d = hctx.dispatch.lock();
                hctx.dispatch_len.store(0, Ordering::Release);
                d.drain(..).collect()
            };
            if !leftovers.is_empty() {
                // Keep RESTART set while requests sit on the dispatch list: a freed tag must
                // bring us back (blk_mq_sched_mark_restart_hctx).
                hctx.set_state(state::SCHED_RESTART);
                if self.dispatch_rq_list(h, &leftovers, false, now, batch) < leftovers.len() {
                    return;
                }
                need_dispatch = true;
            }
        }
        if self.elevator.is_some() {
            self.do_dispatch_sched(h, now, batch, scratch);
        } else if need_dispatch {
            self.do_dispatch_ctx(h, now, batch);
        } else {
            let ids = self.flush_busy_ctxs(h);
            if !ids.is_empty() {
                self.dispatch_rq_list(h, &ids, false, now, batch);
            }
        }
    }

    /// `blk_mq_do_dispatch_sched`: pull requests from the elevator, one budget token each,
    /// and issue them in batches. A scheduler may hand out requests of other hardware
    /// queues; each is issued on its own queue.
    fn do_dispatch_sched(
        &self,
        h: HctxIdx,
        now: Nanos,
        batch: &mut CompletionBatch,
        list: &mut Vec<(RqId, HctxIdx)>,
    ) {
        let elv = self
            .elevator
            .as_ref()
            .expect("do_dispatch_sched without elevator");
        let hctx = &self.hctxs[h.0 as usize];
        let max_dispatch = if hctx.is_busy() {
            1
        } else {
            self.nr_requests as usize
        };
        let ectx = self.elv_ctx();
        loop {
            list.clear();
            let (mut kick, mut no_budget) = (false, false);
            while list.len() < max_dispatch {
                if hctx.dispatch_list_len() > 0 {
                    // Flushes and left-overs arrived: let them go first on the next run.
                    hctx.arm_run(now);
                    break;
                }
                if !elv.has_work(h) {
                    break;
                }
                if !self.get_budget(h) {
                    no_budget = true;
                    break;
                }
                match elv.dispatch_request(&ectx, h, now) {
                    Some(id) => {
                        let mut rq = self.rqs.lock(id);
                        rq.rq_flags.insert(RqFlags::BUDGET);
                        list.push((id, rq.hctx));
                    }
                    None => {
                        self.driver.put_budget(h);
                        // "Kick it ourselves": has_work said yes but nothing came out.
                        kick = true;
                        break;
                    }
                }
            }
            if no_budget && list.is_empty() {
                // Only SCSI has budgets in the kernel, and its completion path runs the
                // queues again once a budget was refused (`scsi_run_queue_async`): RESTART
                // re-runs this queue at a completion, and the delayed run covers a device
                // that never frees one. An empty dispatch (below) sets no RESTART, as in the
                // kernel (`__blk_mq_do_dispatch_sched`): what the scheduler holds back (an
                // in-flight higher class, a token) waits for the delayed re-run, a new
                // request's run, or the scheduler's own wake-up (kyber's token waits).
                hctx.set_state(state::SCHED_RESTART);
                hctx.arm_run(self.delayed(now, RESOURCE_DELAY));
            }
            if kick && list.is_empty() {
                // `__blk_mq_do_dispatch_sched`: has_work said yes and nothing came out ("kick
                // it ourselves"): every hardware queue runs again after BLK_MQ_BUDGET_DELAY
                // (`blk_mq_delay_run_hw_queues`). The run executes on a CPU of this queue,
                // whose software queue is the "current CPU" of the single-CPU rule.
                let local = hctx.ctxs.first().copied();
                self.delay_run_hw_queues(local, now, RESOURCE_DELAY);
            }
            if list.is_empty() {
                return;
            }
            if !self.dispatch_by_hctx(h, list, now, batch) {
                return;
            }
        }
    }

    /// Issues a scheduler batch grouped by each request's own hardware queue. Returns false
    /// if some request could not be issued.
    fn dispatch_by_hctx(
        &self,
        h: HctxIdx,
        list: &mut [(RqId, HctxIdx)],
        now: Nanos,
        batch: &mut CompletionBatch,
    ) -> bool {
        if list.iter().all(|&(_, x)| x == h) {
            return self.dispatch_rq_list(h, list, false, now, batch) == list.len();
        }
        list.sort_by_key(|&(_, x)| x);
        let mut all = true;
        let mut i = 0;
        while i < list.len() {
            let x = list[i].1;
            let n = list[i..].iter().take_while(|&&(_, y)| y == x).count();
            all &= self.dispatch_rq_list(x, &list[i..i + n], false, now, batch) == n;
            i += n;
        }
        all
    }

    /// `blk_mq_do_dispatch_ctx`: when the driver is busy, take one request at a time,
    /// round-robin over the software queues, so no queue monopolises the driver.
    fn do_dispatch_ctx(&self, h: HctxIdx, now: Nanos, batch: &mut CompletionBatch) {
        let hctx = &self.hctxs[h.0 as usize];
        let ty = hctx.ty as usize;
        let n = hctx.ctxs.len();
        loop {
            if hctx.dispatch_list_len() > 0 {
                return;
            }
            let start = hctx.dispatch_from.load(Ordering::Relaxed) as usize % n.max(1);
            let mut picked = None;
            for k in 0..n {
                let pos = (start + k) % n;
                let c = &self.ctxs[hctx.ctxs[pos].0 as usize];
                let mut lists = c.lists.lock();
                if let Some(id) = lists[ty].pop_front() {
                    if lists[ty].is_empty() {
                        hctx.ctx_map[pos / 64].fetch_and(!(1u64 << (pos % 64)), Ordering::AcqRel);
                    }
                    hctx.dispatch_from
                        .store(((pos + 1) % n) as u32, Ordering::Relaxed);
                    picked = Some(id);
                    break;
                }
            }
            let Some(id) = picked else { return };
            if self.dispatch_rq_list(h, &[id], false, now, batch) == 0 {
                return;
            }
        }
    }

    /// `blk_mq_flush_busy_ctxs`: take every pending request of every software queue mapped
    /// here, in Ctx order.
    fn flush_busy_ctxs(&self, h: HctxIdx) -> Vec<RqId> {
        let hctx = &self.hctxs[h.0 as usize];
        let ty = hctx.ty as usize;
        let mut out = Vec::new();
        for (w, word) in hctx.ctx_map.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let ctx = hctx.ctxs[w * 64 + b];
                out.extend(self.ctxs[ctx.0 as usize].lists.lock()[ty].drain(..));
            }
        }
        out
    }

    /// `blk_mq_dispatch_rq_list`: issue `ids` on hardware queue `h`, in order, until the
    /// driver, its budget or the driver tags refuse. Requests not issued go to the tail of
    /// the dispatch list and a re-run is arranged. Returns how many were issued (errors
    /// included: those are ended, not retried). `plugged` is a plug's list without a
    /// scheduler, which the kernel hands to the driver's `queue_rqs` where it has one: then
    /// a request the device has no room for is requeued and the rest still tried
    /// ([`QueueRqs::RequeueBusy`]).
    pub(crate) fn dispatch_rq_list<T: RqRef>(
        &self,
        h: HctxIdx,
        ids: &[T],
        plugged: bool,
        now: Nanos,
        batch: &mut CompletionBatch,
    ) -> usize {
        let hctx = &self.hctxs[h.0 as usize];
        let requeue_busy = plugged && self.driver.queue_rqs() == QueueRqs::RequeueBusy;
        let mut issued = 0usize;
        let mut queued = 0usize;
        let mut errors = 0usize;
        let mut needs_resource = false;
        let mut no_budget = false;
        for (i, id) in ids.iter().map(|r| r.rq()).enumerate() {
            let mut rq = self.rqs.lock(id);
            if !rq.rq_flags.contains(RqFlags::BUDGET) {
                if !self.get_budget(h) {
                    no_budget = true;
                    break;
                }
                rq.rq_flags.insert(RqFlags::BUDGET);
            }
            if !self.get_driver_tag(h, &mut rq) && !self.retry_driver_tag(h, &mut rq) {
                rq.rq_flags.remove(RqFlags::BUDGET);
                self.driver.put_budget(h);
                // RESTART or TAG_WAITING is set: a freed tag re-runs us.
                break;
            }
            self.start_request(&mut rq, now);
            let tracer = self.cfg.tracer.get();
            if let Some(t) = tracer {
                t.rq_event(TraceAction::Issue, &rq, now);
            }
            let last = i + 1 == ids.len();
            let status = self.driver.queue_rq(h, &mut rq, last, now, batch);
            // Whether this call asked for its queue to be stopped; none carries over.
            let stop = std::mem::take(&mut batch.stop);
            match status {
                BlkStatus::Ok => queued += 1,
                BlkStatus::Resource | BlkStatus::DevResource if requeue_busy => {
                    // `virtblk_add_req_batch`: `blk_mq_requeue_request` for this one (it
                    // keeps its driver tag, `requeue_request` un-starts it), on with the
                    // next; `queue_rqs` never stops the queue.
                    rq.rq_flags.remove(RqFlags::BUDGET);
                    self.driver.put_budget(h);
                    batch.requeue(id);
                    issued += 1;
                    continue;
                }
                status @ (BlkStatus::Resource | BlkStatus::DevResource) => {
                    // The kernel traces the way back as a requeue (`__blk_mq_requeue_request`).
                    if let Some(t) = tracer {
                        t.rq_event(TraceAction::Requeue, &rq, now);
                    }
                    rq.unstart();
                    if rq.rq_flags.contains(RqFlags::SCHED_TAGS) {
                        let t = rq.tag;
                        rq.tag = crate::request::Tag::NONE;
                        self.put_driver_tag(h, t, rq.ctx);
                    }
                    rq.rq_flags.remove(RqFlags::BUDGET);
                    self.driver.put_budget(h);
                    needs_resource = status == BlkStatus::Resource;
                    if stop {
                        self.stop_for_driver(h);
                    }
                    break;
                }
                status => {
                    errors += 1;
                    batch.complete(id, status);
                }
            }
            rq.rq_flags.remove(RqFlags::BUDGET);
            issued += 1;
        }
        // One thread-local lookup for the batch's counters.
        let counters = hctx.stats.local();
        counters.issued.add(queued as u64);
        counters.count_dispatch(queued);
        let left = &ids[issued..];
        if (!left.is_empty() || errors > 0) && queued > 0 {
            self.driver.commit_rqs(h);
        }
        let busy = !left.is_empty();
        if busy {
            self.park_leftovers(h, left, now, needs_resource || no_budget);
        }
        if requeue_busy {
            // `__blk_mq_flush_list` hands the list to `queue_rqs`, which leaves the
            // dispatch-busy average alone.
        } else if plugged {
            // `blk_mq_issue_direct`: `__blk_mq_issue_directly` updates it per request.
            for _ in 0..queued + errors {
                hctx.update_dispatch_busy(false);
            }
            if busy {
                hctx.update_dispatch_busy(true);
            }
        } else {
            hctx.update_dispatch_busy(busy);
        }
        issued
    }

    /// `blk_mq_mark_tag_wait` with one retry: record that this hardware queue waits for a
    /// driver tag, so the next free runs it, then try once more to close the race with a
    /// free that happened in between.
    fn retry_driver_tag(&self, h: HctxIdx, rq: &mut crate::request::Request) -> bool {
        let hctx = &self.hctxs[h.0 as usize];
        if !self.set.is_shared() {
            hctx.set_state(state::SCHED_RESTART);
        } else if !hctx.set_state(state::TAG_WAITING) {
            self.tag_waiters.fetch_add(1, Ordering::AcqRel);
        }
        self.get_driver_tag(h, rq)
    }

    /// The driver stopped queue `h` from `queue_rq` (`blk_mq_stop_hw_queue`). If the device
    /// holds none of its requests no completion will start it again: start it at once.
    /// (The check comes after the stop, so a completion in between either finds the queue
    /// stopped and starts it, or leaves the device empty for this check to see.)
    fn stop_for_driver(&self, h: HctxIdx) {
        let hctx = &self.hctxs[h.0 as usize];
        hctx.set_state(state::STOPPED);
        std::sync::atomic::fence(Ordering::SeqCst);
        if !self.driver.holds_requests(h) {
            hctx.clear_state(state::STOPPED);
        }
    }

    /// Left-overs go to the tail of the dispatch list; then decide how the queue gets run
    /// again: at once if RESTART was consumed meanwhile (a tag was freed while we were
    /// busy) or no one will wake us for a tag, after `RESOURCE_DELAY` if the driver or the
    /// budget ran out, else when a request completes (RESTART).
    fn park_leftovers<T: RqRef>(&self, h: HctxIdx, left: &[T], now: Nanos, resource: bool) {
        let hctx = &self.hctxs[h.0 as usize];
        hctx.stats.local().busy.add(1);
        {
            let mut d = hctx.dispatch.lock();
            d.extend(left.iter().map(|r| r.rq()));
            hctx.dispatch_len.store(d.len() as u32, Ordering::Release);
        }
        // Without a pending RESTART (it was consumed by a completion meanwhile, or never set)
        // nobody will run us: try again at once. With one, a free brings us back; if what ran
        // out was the driver or its budget, also poll after a delay in case nothing frees.
        let restart = hctx.test_state(state::SCHED_RESTART) || hctx.test_state(state::TAG_WAITING);
        if !restart {
            hctx.arm_run(now);
        } else if resource {
            hctx.arm_run(self.delayed(now, RESOURCE_DELAY));
        }
    }
}
