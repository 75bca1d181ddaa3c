//! Time-driven work: delayed queue runs, the requeue work, request timeouts and the
//! elevator's timer (blk-timeout.c, `blk_mq_timeout_work`), and the queue's next deadline.

use super::*;

impl QueueInner {
    /// Services everything time-driven that is due: delayed queue runs, the requeue work,
    /// request timeouts and the elevator's timer. Completions land as in [`Self::end_batch`].
    pub fn timer(&self, sub: &mut Submitter, now: Nanos) {
        self.timer_inner(Some(sub.ctx), &mut sub.batch, now);
        self.end_sub_batch(sub, now);
    }

    /// [`Self::timer`] for a thread that owns no software queue (a runtime worker): every
    /// completion is routed to its submitter's remote list.
    pub fn timer_detached(&self, batch: &mut CompletionBatch, now: Nanos) {
        self.timer_inner(None, batch, now);
        let mut done = Vec::new();
        let mut runs = Vec::new();
        self.end_batch(None, batch, &mut done, &mut runs, now);
        debug_assert!(done.is_empty());
    }

    pub(crate) fn timer_inner(
        &self,
        local: Option<CtxIdx>,
        batch: &mut CompletionBatch,
        now: Nanos,
    ) {
        // Under `kblockd_runs` the caller executes the requeue work and due runs as work on
        // their CPUs (`take_due_requeue`, `take_due_runs`, `run_work`).
        if !self.cfg.kblockd_runs {
            if self.requeue_at.load(Ordering::Acquire) <= now.0 {
                self.requeue_work(local, now, batch);
            }
            for hctx in self.hctxs.iter() {
                let at = hctx.run_at.load(Ordering::Acquire);
                if at <= now.0
                    && hctx
                        .run_at
                        .compare_exchange(at, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                {
                    self.run_hw_queue(hctx.idx, now, batch);
                }
            }
        }
        if self.next_timeout.load(Ordering::Acquire) <= now.0 {
            self.check_timeouts(now, batch);
        }
        if let Some(e) = &self.elevator {
            if e.next_timer().is_some_and(|t| t <= now) {
                e.timer(now);
                // A timer may end a wait the elevator imposed (BFQ's idling): run what it
                // names, as the kernel's timer handlers schedule a dispatch.
                let mut runs = Vec::new();
                self.elevator_runs(local, &mut runs);
                for h in runs {
                    self.run_hw_queue_async(h, now, batch);
                }
            }
        }
    }

    /// The earliest time `timer` has work to do, if any.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let mut t = if self.requeue_queued.load(Ordering::Acquire) {
            u64::MAX
        } else {
            self.requeue_at.load(Ordering::Acquire)
        };
        t = t.min(self.next_timeout.load(Ordering::Acquire));
        if let Some(t_elv) = self.elevator.as_ref().and_then(|e| e.next_timer()) {
            t = t.min(t_elv.0);
        }
        for hctx in self.hctxs.iter() {
            if !hctx.run_queued.load(Ordering::Acquire) {
                t = t.min(hctx.run_at.load(Ordering::Acquire));
            }
        }
        (t != u64::MAX).then_some(Nanos(t))
    }

    /// Under `kblockd_runs`: the hardware queues whose armed run is due and not yet handed
    /// to a worker, onto `out`; each is now queued (its timer fired, its work waits on the
    /// worklist, still pending).
    pub(crate) fn take_due_runs(&self, now: Nanos, out: &mut Vec<HctxIdx>) {
        for hctx in self.hctxs.iter() {
            if hctx.run_at.load(Ordering::Acquire) <= now.0
                && !hctx.run_queued.swap(true, Ordering::AcqRel)
            {
                out.push(hctx.idx);
            }
        }
    }

    /// Under `kblockd_runs`: the worker of hardware queue `h` starts its run work
    /// (`blk_mq_run_work_fn`). If the run was pushed back meanwhile (a re-arm took the work
    /// off the worklist) there is nothing to do; otherwise the run is no longer pending and
    /// the queue runs.
    pub(crate) fn run_work(&self, h: HctxIdx, now: Nanos, batch: &mut CompletionBatch) {
        let hctx = &self.hctxs[h.0 as usize];
        let at = hctx.run_at.load(Ordering::Acquire);
        if at > now.0 {
            return;
        }
        hctx.run_queued.store(false, Ordering::Release);
        if hctx
            .run_at
            .compare_exchange(at, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.run_hw_queue(h, now, batch);
        }
    }

    /// Starts a request for the driver: IDLE → IN_FLIGHT and its timeout armed.
    pub(crate) fn start_request(&self, rq: &mut crate::request::Request, now: Nanos) {
        rq.start(now, self.cfg.timeout);
        // Deadlines only grow, so this is nearly always a plain read of a line nobody writes.
        if rq.deadline_ns.0 < self.next_timeout.load(Ordering::Relaxed) {
            self.next_timeout
                .fetch_min(rq.deadline_ns.0, Ordering::AcqRel);
        }
    }

    /// `blk_mq_timeout_work`: hand requests past their deadline to the driver's timeout
    /// handler, then re-arm the rolling timer at the earliest remaining deadline.
    pub(crate) fn check_timeouts(&self, now: Nanos, batch: &mut CompletionBatch) {
        // Disarm before scanning, and only ever lower the timer afterwards: a request started
        // by another thread behind the scan (in a slot already visited) sees an unarmed timer
        // and arms it itself in `start_request`. Storing the result instead overwrote that,
        // leaving the request with no timeout at all (found by tests/faults.rs).
        self.next_timeout.store(u64::MAX, Ordering::Release);
        let mut next = now.saturating_add(self.cfg.timeout).0;
        let mut in_flight = false;
        for slot in self.rqs.iter() {
            let mut rq = slot.lock();
            if rq.state != RqState::InFlight || rq.rq_flags.contains(RqFlags::TIMED_OUT) {
                continue;
            }
            in_flight = true;
            if rq.deadline_ns > now {
                next = next.min(rq.deadline_ns.0);
                continue;
            }
            rq.rq_flags.insert(RqFlags::TIMED_OUT);
            let h = rq.hctx;
            match self.driver.timeout(h, &mut rq, now, batch) {
                crate::driver::EhReturn::Done => {}
                crate::driver::EhReturn::ResetTimer => {
                    rq.rq_flags.remove(RqFlags::TIMED_OUT);
                    rq.deadline_ns = now.saturating_add(self.cfg.timeout);
                    next = next.min(rq.deadline_ns.0);
                }
            }
        }
        if !in_flight {
            self.tag_idle();
        }
        if in_flight {
            self.next_timeout.fetch_min(next, Ordering::AcqRel);
        }
    }
}
