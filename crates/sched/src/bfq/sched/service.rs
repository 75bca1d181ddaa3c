//! Service: queues into and out of the trees, the choice of the next queue and request,
//! expiry, the idle timer and the dispatch loop (`bfq_activate_bfqq`, `bfq_select_queue`,
//! `bfq_bfqq_expire`, `bfq_dispatch_rq_from_bfqq`, `bfq_idle_slice_timer`,
//! `__bfq_dispatch_request`).

use super::*;

impl State {
    /// Queue `id` becomes backlogged: into its group's tree; at its old place in virtual
    /// time when `backshift`, resuming a turn it left with budget when it ran dry
    /// (`__bfq_activate_entity` with `non_blocking_wait_rq`).
    pub(in crate::bfq) fn activate_at(&mut self, id: u32, backshift: bool) {
        self.active_seq += 1;
        let seq = self.active_seq;
        let q = self.q(id);
        debug_assert!(!q.in_tree);
        q.in_tree = true;
        q.active_seq = seq;
        let (group, class, weight, budget) = (q.group, q.class, q.weight(), q.budget);
        if q.wr.coeff > 1 {
            self.load.wr_busy += 1;
        }
        self.load.busy_classes[class] += 1;
        self.groups
            .activate(group, id, class, weight, budget, backshift);
    }

    /// Bookkeeping for a queue leaving the busy set (out of the tree, not in service).
    pub(in crate::bfq) fn became_idle(&mut self, id: u32, now: Nanos) {
        let q = self.q(id);
        q.last_idle = now;
        let (class, raised) = (q.class, q.wr.coeff > 1);
        self.load.busy_classes[class] -= 1;
        if raised {
            self.load.wr_busy -= 1;
        }
    }

    /// Ends the in-service queue's turn (`bfq_bfqq_expire`).
    pub(in crate::bfq) fn expire(&mut self, k: &Knobs, why: Expire, now: Nanos) {
        let Some(id) = self.in_service.take() else {
            return;
        };
        self.idle_until = None;
        // `bfq_bfqq_expire`: no service time is measured across turns.
        self.inject.injected = false;
        self.inject.wait_dispatch = false;
        self.inject.waited_rq = None;
        match why {
            Expire::TooIdle => self.stats.expired_too_idle += 1,
            Expire::BudgetTimeout => self.stats.expired_timeout += 1,
            Expire::BudgetExhausted => self.stats.expired_budget += 1,
            Expire::NoMoreRequests => self.stats.expired_empty += 1,
            Expire::Preempted => self.stats.preempted += 1,
        }
        // `bfq_bfqq_expire`: a queue not raised restarts its raising clock.
        if k.low_latency && self.qr(id).wr.coeff <= 1 {
            self.q(id).last_wr_start_finish = now;
        }
        // `__bfq_bfqq_expire`: a queue that ran dry leaves the tree, unless it was preempted
        // while idling for it is needed for its guarantees: then it stays busy, queued at
        // the place its turn's service gives it, and its next request is no new arrival
        // (it cannot preempt back for a service hole).
        let stays_busy = !self.qr(id).sorted.is_empty()
            || (why == Expire::Preempted && self.idling_needed_for_service_guarantees(id));
        let charged = self.charge_for_turn(id, why, now, k);
        // `bfq_bfqq_expire`: out of the tree, not out of budget or time, the queue is marked
        // `non_blocking_wait_rq` and what is left of the turn is kept for a prompt return
        // (`entity->budget` and `entity->service` as they are). Otherwise the turn's
        // service is zeroed and the flag left as it was: set by an earlier turn, it lets
        // the next prompt arrival resume with the whole budget (`bfq_bfqq_charge_time`
        // raised it to the time charged, if more). The budget of a queue with requests
        // left is then the next turn's, set below.
        let budget = self.qr(id).budget;
        let marks = !stays_busy && !matches!(why, Expire::BudgetTimeout | Expire::BudgetExhausted);
        self.recalc_budget(id, why, k);
        let q = self.q(id);
        q.non_blocking_wait_rq |= marks;
        q.hole_left = if marks {
            budget.saturating_sub(charged)
        } else if stays_busy {
            q.budget
        } else {
            budget.max(charged)
        };
        self.update_wr(id, now, k);
        if self.qr(id).is_coop() && self.is_seeky(id) {
            // A shared queue that went seeky: its issuers cooperate no more.
            self.q(id).split_coop = true;
        }
        // `bfq_bfqq_expire`: whatever the reason, a queue left without requests has the
        // earliest time it may be raised as soft real-time computed, at once if nothing of
        // it is in flight, else at its last completion (only then is it known to wait for
        // its I/O, the isochronous pattern soft real-time detection looks for).
        if k.low_latency && self.qr(id).sorted.is_empty() {
            if self.qr(id).dispatched == 0 {
                self.note_soft_rt_next_start(id, now, k);
            } else {
                self.q(id).softrt_update = true;
            }
        }
        let q = self.qr(id);
        let (group, class, budget, weight) = (q.group, q.class, q.budget, q.weight());
        self.groups.expire(
            group,
            id,
            class,
            charged,
            stays_busy.then_some((budget, weight)),
        );
        self.q(id).in_tree = stays_busy;
        if stays_busy {
            self.active_seq += 1;
            self.q(id).active_seq = self.active_seq;
        }
        if !stays_busy {
            self.became_idle(id, now);
        } else {
            self.q(id).last_idle = now;
        }
        if !self.qr(id).sorted.is_empty() {
            // `__bfq_bfqq_expire`: "resort priority tree of potential close cooperators".
            self.pos_update(id);
        }
        self.update_pending(id);
        self.maybe_free(id);
    }

    /// `bfq_choose_req` (from the anticipatory scheduler): which of two requests of one
    /// queue to serve first with the head at `last`. A metadata request first; else the
    /// nearer, a request behind the head counting `back_seek_penalty` times its distance
    /// and only within `back_seek_max`; one farther behind than that "wraps" and goes
    /// last; of two that wrap, the lower. At equal distances the higher sector. (The kernel
    /// also puts a synchronous request before an asynchronous one; a queue's requests are
    /// all one or the other.)
    pub(in crate::bfq) fn choose_req(
        &self,
        a: Option<u32>,
        b: Option<u32>,
        last: u64,
        k: &Knobs,
    ) -> Option<u32> {
        let (a, b) = match (a, b) {
            (None, b) => return b,
            (Some(a), Some(b)) if a == b => return Some(b),
            (Some(a), None) => return Some(a),
            (Some(a), Some(b)) => (a, b),
        };
        let (ra, rb) = (&self.rqs[a as usize], &self.rqs[b as usize]);
        if ra.meta != rb.meta {
            return Some(if ra.meta { a } else { b });
        }
        let dist = |s: u64| {
            if s >= last {
                Some(s - last)
            } else if s + k.back_max >= last {
                Some((last - s) * k.back_penalty)
            } else {
                None
            }
        };
        let (s1, s2) = (ra.sector, rb.sector);
        Some(match (dist(s1), dist(s2)) {
            (Some(d1), Some(d2)) if d1 != d2 => {
                if d1 < d2 {
                    a
                } else {
                    b
                }
            }
            (Some(_), Some(_)) => {
                if s1 >= s2 {
                    a
                } else {
                    b
                }
            }
            (Some(_), None) => a,
            (None, Some(_)) => b,
            (None, None) => {
                if s1 <= s2 {
                    a
                } else {
                    b
                }
            }
        })
    }

    /// `bfq_find_next_rq`: the request to serve after `last` (still queued), dispatched
    /// now from queue `id`. The FIFO's head if it expired and the FIFO was not yet looked
    /// at this turn (`bfq_check_fifo`, which marks it looked at either way); else the
    /// better of `last`'s neighbours by position (the next one wrapping round to the
    /// lowest), seen from where `last` starts.
    pub(super) fn find_next_rq(
        &mut self,
        id: u32,
        last: u32,
        now: Nanos,
        k: &Knobs,
    ) -> Option<u32> {
        use std::ops::Bound::{Excluded, Unbounded};
        let q = self.q(id);
        if !std::mem::replace(&mut q.fifo_checked, true) {
            if let Some(&(head, deadline)) = q.fifo.front() {
                if head != last && now >= deadline {
                    return Some(head);
                }
            }
        }
        let key = (self.rqs[last as usize].sector, last);
        let q = self.qr(id);
        let prev = q.sorted.range(..key).next_back().map(|x| x.1);
        let next = q
            .sorted
            .range((Excluded(key), Unbounded))
            .next()
            .or_else(|| q.sorted.first().filter(|&&x| x != key))
            .map(|x| x.1);
        self.choose_req(next, prev, key.0, k)
    }

    /// Takes request `rq` out of queue `id` for dispatch; returns the sectors it moves.
    pub(in crate::bfq) fn take(&mut self, id: u32, rq: u32, now: Nanos, k: &Knobs) -> u64 {
        let info = self.rqs[rq as usize];
        // `bfq_remove_request`.
        if self.qr(id).next_rq == Some(rq) {
            let next = self.find_next_rq(id, rq, now, k);
            self.q(id).next_rq = next;
        }
        let q = self.q(id);
        q.sorted.remove(&(info.sector, rq));
        if q.sorted.is_empty() {
            q.next_rq = None;
        }
        if q.fifo.front().map(|x| x.0) == Some(rq) {
            q.fifo.pop_front();
        } else if let Some(i) = q.fifo.iter().position(|&(r, _)| r == rq) {
            q.fifo.remove(i);
        }
        q.dispatched += 1;
        self.rqs[rq as usize].queued = false;
        if self.last_merge == Some(rq) {
            self.last_merge = None;
        }
        self.nr_queued -= 1;
        self.pos_update(id);
        let sectors = (info.end - info.sector).max(1);
        self.note_dispatch(info.sector, sectors, now);
        if self.in_service == Some(id) {
            // `bfq_update_peak_rate`: where the in-service queue's I/O ended.
            self.dev.in_serv_last_pos = info.end;
        }
        sectors
    }

    /// Chooses the next queue to serve, by class then B-WF2Q+ down the hierarchy.
    pub(super) fn select(&mut self, now: Nanos) -> Option<u32> {
        let idle_busy = self.load.busy_classes[2] > 0;
        let idle_due = idle_busy
            && (self.idle_class_due
                || now.saturating_sub(self.last_idle_class) >= IDLE_CLASS_TIMEOUT);
        let id = self.groups.select(idle_due)?;
        if self.qr(id).class == 2 {
            self.last_idle_class = now;
            self.idle_class_due = false;
            self.stats.idle_class_served += 1;
        }
        Some(id)
    }

    /// Queue `id` gets the device (`bfq_set_in_service_queue`).
    pub(super) fn set_in_service(&mut self, id: u32, now: Nanos, k: &Knobs) {
        self.in_service = Some(id);
        // `__bfq_set_in_service_queue`. Where the previous queue's I/O ended says nothing
        // about this one's until it dispatches: forgotten, so that a request near it does
        // not merge its queue into this one ("bfq: Avoid false bfq queue merging").
        self.dev.in_serv_last_pos = 0;
        self.q(id).fifo_checked = false;
        self.budgets_assigned = (self.budgets_assigned * 7 + 256) / 8;
        self.idle_until = None;
        self.slice_start = now;
        self.update_wr(id, now, k);
        // `bfq_set_budget_timeout`: a raised queue's turn may last its raising factor times
        // longer (`weight / orig_weight`), a soft real-time one's as long as anyone's.
        let wr = self.qr(id).wr;
        let coeff = if wr.soft_rt {
            1
        } else {
            u64::from(wr.coeff.max(1))
        };
        self.budget_timeout = now.saturating_add(Nanos(k.timeout.0.saturating_mul(coeff)));
        let q = self.q(id);
        q.in_tree = false;
        // Service it received by injection since its last turn counts against this one.
        self.service = std::mem::take(&mut q.injected);
    }

    /// Dispatches request `rq` of queue `id`, charging `charge` sectors of service to it.
    pub(super) fn dispatch_from(
        &mut self,
        id: u32,
        rq: u32,
        charge: u64,
        now: Nanos,
        k: &Knobs,
    ) -> RqId {
        // `bfq_dispatch_rq_from_bfqq`: the request to time for the injection limit.
        if std::mem::take(&mut self.inject.wait_dispatch) {
            self.inject.waited_rq = Some(rq);
        }
        let sectors = self.take(id, rq, now, k);
        self.served(id, sectors, now);
        let q = self.q(id);
        if q.wr.coeff > 1 {
            q.wr.service += sectors;
        }
        let (group, class) = (q.group, q.class);
        self.service += charge;
        self.groups.served(group, class, charge);
        self.stats.dispatched += 1;
        RqId(rq)
    }

    /// `bfq_bfqq_served`'s account of the service since queue `id` became backlogged.
    pub(in crate::bfq) fn served(&mut self, id: u32, sectors: u64, now: Nanos) {
        let q = self.q(id);
        if q.service_from_backlogged == 0 {
            q.first_io_time = now;
        }
        q.service_from_backlogged += sectors;
    }

    /// Keeps the asymmetry bookkeeping of queue `id` in step with whether it has requests
    /// queued or in flight or being served, and with its weight. As in the kernel's `queue_weights_tree`, a
    /// weight-raised queue is not counted by weight (raising has its own idling rule), but
    /// its group still has a pending queue.
    pub(in crate::bfq) fn update_pending(&mut self, id: u32) {
        // The queue in service counts until its turn ends, even between its requests (it is
        // still "busy" in the kernel's terms).
        let in_service = self.in_service == Some(id);
        let q = self.qr(id);
        let pending = !q.sorted.is_empty() || q.dispatched > 0 || in_service || q.in_tree;
        let want = (pending && q.wr.coeff <= 1).then(|| q.weight());
        if want == q.counted && pending == q.pending {
            return;
        }
        let (old, was_pending, group) = (q.counted, q.pending, q.group);
        if old != want {
            if let Some(w) = old {
                let i = self
                    .load
                    .weights
                    .iter()
                    .position(|&(x, _)| x == w)
                    .expect("counted weight");
                self.load.weights[i].1 -= 1;
                if self.load.weights[i].1 == 0 {
                    self.load.weights.swap_remove(i);
                }
            }
            if let Some(w) = want {
                match self.load.weights.iter_mut().find(|(x, _)| *x == w) {
                    Some(e) => e.1 += 1,
                    None => self.load.weights.push((w, 1)),
                }
            }
        }
        let g = &mut self.groups.slots[group as usize];
        match (was_pending, pending) {
            (false, true) => {
                g.pending_queues += 1;
                if g.pending_queues == 1 {
                    self.groups.with_pending += 1;
                }
            }
            (true, false) => {
                g.pending_queues -= 1;
                if g.pending_queues == 0 {
                    self.groups.with_pending -= 1;
                }
            }
            _ => {}
        }
        let q = self.q(id);
        q.counted = want;
        q.pending = pending;
    }

    /// `bfq_bfqq_must_idle`: queue `id` has nothing queued and is worth waiting for.
    pub(super) fn must_idle(&self, id: u32, k: &Knobs) -> bool {
        self.qr(id).sorted.is_empty() && self.better_to_idle(id, k)
    }

    /// `bfq_may_expire_for_budg_timeout`: the turn's time is up (`bfq_bfqq_budget_timeout`,
    /// due at the timeout itself), unless we are waiting for the queue with less than a
    /// third of its budget left: it got little service for its time, probably from the
    /// wait itself, and is not to be punished for it.
    pub(super) fn may_expire_for_budget_timeout(&self, id: u32, now: Nanos) -> bool {
        let q = self.qr(id);
        let left = q.budget.saturating_sub(self.service);
        now >= self.budget_timeout && (self.idle_until.is_none() || left >= q.budget / 3)
    }

    /// Starts waiting for queue `id`'s next request (`bfq_arm_slice_timer`).
    pub(super) fn arm_idle_timer(&mut self, id: u32, now: Nanos, k: &Knobs) {
        let sl = self.slice_timer(id, k);
        self.idle_until = Some(now.saturating_add(sl));
        self.last_idling_start = now;
        self.stats.idles += 1;
    }

    /// The wait for the queue in service ended without a request
    /// (`bfq_idle_slice_timer_body`): its turn ends as timed out if its time is up as well
    /// (then charged the time it waited), else as too idle.
    pub(super) fn idle_timer_expired(&mut self, k: &Knobs, now: Nanos) {
        let why = if now >= self.budget_timeout {
            Expire::BudgetTimeout
        } else {
            Expire::TooIdle
        };
        self.expire(k, why, now);
    }

    /// The next request to issue (`__bfq_dispatch_request`).
    pub(super) fn dispatch(&mut self, k: &Knobs, now: Nanos) -> Option<RqId> {
        // Requests inserted at the head (requeued ones) go first, outside every queue's
        // turn and budget, counted as their queue's (`__bfq_dispatch_request`).
        if let Some(rq) = self.dispatch.pop_front() {
            let info = &mut self.rqs[rq as usize];
            info.parked = false;
            info.owned = true;
            let qid = info.queue;
            let q = self.q(qid);
            q.parked -= 1;
            q.dispatched += 1;
            self.dev.rq_in_driver += 1;
            self.update_pending(qid);
            self.stats.dispatched += 1;
            return Some(RqId(rq));
        }
        // With strict_guarantees the device serves one request at a time, the only way to
        // make a queueing device keep BFQ's order (`bfqd->tot_rq_in_driver > 0`).
        if k.strict && self.dev.rq_in_driver > 0 {
            return None;
        }
        loop {
            let Some(id) = self.in_service else {
                let id = self.select(now)?;
                self.set_in_service(id, now, k);
                continue;
            };
            // `bfq_select_queue`: a turn whose time is up ends, unless the queue ran dry and
            // is worth waiting for.
            if self.may_expire_for_budget_timeout(id, now) && !self.must_idle(id, k) {
                self.expire(k, Expire::BudgetTimeout, now);
                continue;
            }
            if let Some(rq) = self.qr(id).next_rq {
                let info = self.rqs[rq as usize];
                let charge = self.serv_to_charge(id, (info.end - info.sector).max(1));
                let budget = self.qr(id).budget;
                if self.service > 0 && self.service + charge > budget {
                    self.expire(k, Expire::BudgetExhausted, now);
                    continue;
                }
                let rq = self.dispatch_from(id, rq, charge, now, k);
                // `bfq_dispatch_rq_from_bfqq`: an idle-class queue gets one request per turn
                // while any other queue waits, its turn ending as if its budget ran out.
                if self.qr(id).class == 2 && self.load.busy_classes.iter().sum::<u32>() > 1 {
                    self.expire(k, Expire::BudgetExhausted, now);
                }
                return Some(rq);
            }
            // Ran dry. Wait for it when that pays (`bfq_better_to_idle`): until its requests
            // in flight complete, then `slice_idle` for the issuer's next request, armed at
            // that completion (`bfq_completed_request`). Meanwhile other queues' requests
            // may be injected. A queue in service with nothing queued, nothing in flight and
            // no wait armed ends its turn here (`bfq_select_queue`: neither
            // `wait_request` nor `dispatched != 0`): as a queue preempted while BFQ idled
            // for it (kept busy for its guarantees) is when it next comes into service. (The
            // kernel's BFQ log of dbench on a rotational loop device shows such a queue,
            // jbd2's, expire at once 201 times in 5 s: docs/results/investigations.md.)
            match self.idle_until {
                Some(t) if t <= now => {
                    self.idle_timer_expired(k, now);
                    continue;
                }
                Some(_) => {}
                None if self.qr(id).dispatched != 0 && self.better_to_idle(id, k) => {}
                None => {
                    self.expire(k, Expire::NoMoreRequests, now);
                    continue;
                }
            }
            return self.inject(id, k, now);
        }
    }
}
