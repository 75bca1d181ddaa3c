//! Charging an operation: the core calls run at once, then each step they logged is
//! charged from the cost table, under the lock it takes (`LockState` reservations), and
//! commands posted to the device arrive when their doorbell step ends.

use super::*;
use crate::topology::LineCost;

impl Sim {
    #[inline]
    pub(super) fn lock_of(
        &self,
        scope: LockScope,
        ctx: CtxIdx,
        hctx: Option<HctxIdx>,
    ) -> Option<usize> {
        match scope {
            LockScope::None => None,
            LockScope::Queue => Some(0),
            LockScope::Hctx => Some(1 + hctx.map_or(0, |h| h.0 as usize)),
            LockScope::Ctx => Some(1 + self.nr_hw + ctx.0 as usize),
        }
    }

    #[inline]
    pub(super) fn hw_lock(&self, hw: u16) -> Option<usize> {
        self.dcost
            .hw_lock
            .then_some(1 + self.nr_hw + self.nr_ctx + hw as usize)
    }

    #[inline]
    pub(super) fn charge(&mut self, c: u16, t: u64, ns: u64, lock: Option<usize>) -> u64 {
        match lock {
            Some(l) => {
                let hw_lock = l > self.nr_hw + self.nr_ctx;
                let waiter = if hw_lock && self.dcost.lock_waiter_ns > 0 {
                    self.dcost.lock_waiter_ns
                } else {
                    self.cfg.cost.waiter_ns
                };
                let line = match &self.cfg.topology {
                    Some(m) => LineCost::Machine(m),
                    None => LineCost::Flat(self.cfg.cost.line_ns),
                };
                self.locks[l].acquire(c, t, ns, self.now, line, waiter)
            }
            None => t + ns,
        }
    }

    /// Runs `f` on CPU `c` from virtual time `start`, charges its steps, delivers the
    /// commands it posted, and returns when the CPU is done with it.
    pub(super) fn op(
        &mut self,
        c: u16,
        start: u64,
        f: impl FnOnce(&RequestQueue, &mut Submitter, Nanos),
    ) -> u64 {
        // Disjoint fields: the queue is only read, the CPU's submitter is only written.
        f(&self.queue, &mut self.cpus[c as usize].sub, Nanos(start));
        self.queue_touched = true;
        let mut steps = std::mem::take(&mut self.steps);
        self.log.drain_into(&mut steps);
        // The commands the operation's `QueueRq` steps index (none if it posted none).
        self.log.take_staged(&mut self.staged);
        let has_elv = self.has_elv;
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

    #[inline]
    pub(super) fn elv_sum_passes(&self) -> u64 {
        self.queue
            .elevator()
            .and_then(|e| e.percpu_sum_passes())
            .unwrap_or(0)
    }

    /// Charges an operation's steps from `start`; see [`Sim::op`].
    pub(super) fn op_steps(
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
                        TraceAction::Issue if ev.sched => {
                            // The scheduler path's part outside its lock (the kernel
                            // profile's; 0 for mqblk's own).
                            if self.elv.path_ns > 0 {
                                cur = self.charge(c, cur, self.elv.path_ns, None);
                            }
                            (
                                base + self.elv.dispatch_ns + sum_per_step,
                                self.lock_of(self.elv.dispatch_lock, ev.ctx, ev.hctx),
                            )
                        }
                        TraceAction::Complete => {
                            completions += 1;
                            if ev.ctx.0 != c && !self.wake_list.contains(&ev.ctx.0) {
                                self.wake_list.push(ev.ctx.0);
                            }
                            // The driver's own work per completion on this CPU (a loop
                            // device's worker reading the data), before the request ends
                            // and outside any lock the scheduler's hook takes.
                            if self.dcost.complete_ns > 0 {
                                cur = self.charge(c, cur, self.dcost.complete_ns, None);
                            }
                            // The scheduler path's part the kernel spends outside the
                            // submitting task (the kernel profile's; 0 for mqblk's own).
                            if ev.sched && self.elv.path_complete_ns > 0 {
                                cur = self.charge(c, cur, self.elv.path_complete_ns, None);
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
                        TraceAction::Requeue => {
                            self.cpus[c as usize].requeued = true;
                            (base, None)
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
                self.push(cur, Ev::Arrive(k));
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

    #[inline]
    pub(super) fn ring(&mut self, hw: u16, t: u64) {
        let mut i = 0;
        while i < self.pending_arrivals.len() {
            let k = self.pending_arrivals[i];
            let s = self.in_transit[k as usize].expect("posted command in transit");
            if s.hw == hw {
                self.push(t, Ev::Arrive(k));
                self.pending_arrivals.remove(i);
            } else {
                i += 1;
            }
        }
    }

    #[inline]
    pub(super) fn completed_progress(&mut self, t: u64) {
        self.last_progress = self.last_progress.max(t);
    }
}
