//! Injection: serving other queues' requests while the queue in service is idled for
//! (`bfq_choose_bfqq_for_injection`, the injection branch of `bfq_select_queue`), and the
//! adaptive limit on how many may be in flight (`bfq_update_inject_limit`).

use super::*;

impl State {
    /// A request of sync queue `id` arrives from an issuer with no other request
    /// (`bfq_add_request`, `RQ_BIC(rq)->requests <= 1`): it may reveal the queue's waker
    /// (`bfq_check_waker`, whether or not the queue was busy); once a second since the limit
    /// last fell the measurement starts over (`bfq_reset_inject_limit`); and if the queue
    /// is in service and the device is empty, or holds injected requests and there is a
    /// base time to compare with, this request's service time is measured from now
    /// (unless the limit fell in the last 10 ms). An issuer that keeps several requests
    /// queued is never measured: its limit stays where it is.
    pub(in crate::bfq) fn note_lone_arrival(&mut self, id: u32, now: Nanos, k: &Knobs) {
        // `bfq_check_waker`: whose completion this request followed.
        self.detect_waker(id, now, k);
        if now >= self.qr(id).decrease_time.saturating_add(INJECT_RESET) {
            self.reset_inject_limit(id, now);
        }
        let q = self.qr(id);
        let in_driver = self.dev.rq_in_driver;
        if self.in_service == Some(id)
            && (in_driver == 0 || (q.last_serv_time > 0 && self.inject.injected))
            && now >= q.decrease_time.saturating_add(INJECT_RECENT_DECREASE)
        {
            self.inject.occupied_at = now;
            self.inject.wait_dispatch = true;
            if in_driver == 0 {
                // Injection before this arrival does not slow this request down.
                self.inject.injected = false;
            }
        }
    }

    /// The next request of busy queue `c`, if it fits what is left of the queue's budget
    /// (service it got by injection counts against it; `bfq_bfqq_budget_left`).
    pub(super) fn next_within_budget(&self, c: u32) -> Option<u32> {
        let cq = self.queues[c as usize].as_ref()?;
        let rq = cq.next_rq.filter(|_| cq.in_tree)?;
        let info = &self.rqs[rq as usize];
        let charge = self.serv_to_charge(c, (info.end - info.sector).max(1));
        (charge <= cq.budget.saturating_sub(cq.injected)).then_some(rq)
    }

    /// While the in-service queue `id` is idled for, another queue's request
    /// (`bfq_select_queue`'s four choices, in order): its own process's asynchronous I/O
    /// (`bic->bfqq[0]`, for a queue not shared); the queue whose completions wake it; a
    /// queue it wakes; none of which waits for the injection limit, as holding them back
    /// helps nobody; else any other within the limit (`bfq_choose_bfqq_for_injection`).
    /// Of the queues it wakes only the head of its `woken_list` is tried: the one whose waker
    /// was set, or which became busy, last (`inject_woken`, Linux 5.13).
    pub(in crate::bfq) fn inject(&mut self, id: u32, k: &Knobs, now: Nanos) -> Option<RqId> {
        if k.strict || self.nr_queued == 0 {
            return None;
        }
        let q = self.qr(id);
        let own_async = match (q.key, &q.issuers[..]) {
            (Key::Sync(issuer), [only]) if *only == issuer => self
                .by_key
                .get(&Key::Async(q.group, q.class as u8, q.level))
                .and_then(|&a| Some((a, self.next_within_budget(a)?)))
                .filter(|&(_, rq)| self.rqs[rq as usize].issuer == issuer),
            _ => None,
        };
        let waker = || q.waker.and_then(|w| Some((w, self.next_within_budget(w)?)));
        let blocked = || {
            let woken = |j: u32| {
                self.queues[j as usize]
                    .as_ref()
                    .filter(|x| x.waker == Some(id))
            };
            let head = (0..self.queues.len() as u32)
                .filter_map(|j| Some((woken(j)?.woken_at, j)))
                .max()?
                .1;
            Some((head, self.next_within_budget(head)?))
        };
        let blocked = || k.inject_woken.then(blocked).flatten();
        let (c, rq) = match own_async.or_else(waker).or_else(blocked) {
            Some(pick) => pick,
            None => {
                // `bfq_select_queue`: no injection for a queue that delivers more without
                // other I/O in the middle (idling boosts its throughput, as for a sequential
                // reader on a disk), nor for a raised one with a short think time unless
                // several are raised.
                let short = Self::has_short_ttime(q);
                if self.idling_boosts_thr_without_issues(id)
                    || !(q.wr.coeff <= 1 || self.load.wr_busy > 1 || !short)
                {
                    return None;
                }
                // `bfq_choose_bfqq_for_injection`: nothing while the device holds the limit's
                // worth of requests, the in-service queue's own included
                // (`tot_rq_in_driver`). The kernel's raise of a zero limit to one after a
                // whole idle slice compares jiffies with `bfq_slice_idle` in nanoseconds, so
                // it never fires there, and not here either.
                if self.dev.rq_in_driver >= q.inject_limit {
                    return None;
                }
                // A raised queue with a short think time lets only raised queues in.
                let always = q.wr.coeff <= 1 || !short;
                // Every active queue of every group, most recently inserted first (the
                // `active_list`): the first with a request that fits its budget, passing
                // over a large request on a non-rotational device with anything in flight.
                let mut active: Vec<(u64, u32)> = self
                    .queues
                    .iter()
                    .enumerate()
                    .filter_map(|(j, x)| {
                        let x = x.as_ref()?;
                        (x.in_tree && j as u32 != id).then_some((x.active_seq, j as u32))
                    })
                    .collect();
                active.sort_unstable_by(|a, b| b.cmp(a));
                let pick = active.into_iter().find_map(|(_, c)| {
                    if !(always || self.qr(c).wr.coeff > 1) {
                        return None;
                    }
                    let rq = self.next_within_budget(c)?;
                    let next = self.rqs[rq as usize];
                    let sectors = (next.end - next.sector).max(1);
                    let large = sectors >= SECT_THR_NONROT;
                    if !self.dev.rotational && large && self.dev.rq_in_driver >= 1 {
                        return None;
                    }
                    Some((c, rq))
                });
                let (c, rq) = pick?;
                self.inject.injected = true;
                (c, rq)
            }
        };
        self.rqs[rq as usize].injected = true;
        let sectors = self.take(c, rq, now, k);
        self.served(c, sectors, now);
        let cq = self.q(c);
        cq.injected += sectors;
        let (group, class, empty, got) = (cq.group, cq.class, cq.sorted.is_empty(), cq.injected);
        self.groups.served(group, class, sectors);
        if !empty {
            // `bfq_dispatch_rq_from_bfqq` charges the service before `bfq_remove_request`
            // moves the queue's next request.
            self.updated_next_req(c);
        }
        if empty {
            self.groups.deactivate(group, c, class, got);
            // `bfq_remove_request`: a queue emptied while not in service has its budget and
            // service reset ("to avoid inconsistencies"), so what it was given by injection
            // does not count against its next turn, and its next request starts a fresh
            // one (no service hole to recover).
            let cq = self.q(c);
            cq.in_tree = false;
            cq.injected = 0;
            cq.budget = 0;
            cq.hole_left = 0;
            self.became_idle(c, now);
        }
        self.update_pending(c);
        self.stats.injected += 1;
        self.stats.dispatched += 1;
        Some(RqId(rq))
    }

    /// The request being timed came back (`bfq_update_inject_limit`): its service time,
    /// from its arrival, raises the limit while it stays under 1.5 times the base time
    /// (measured with nothing injected), lowers it otherwise; it becomes the base time if
    /// it is the first or a shorter one, or was measured alone.
    pub(in crate::bfq) fn update_inject_limit(&mut self, id: u32, now: Nanos) {
        let tot = now.saturating_sub(self.inject.occupied_at).0;
        self.inject.waited_rq = None;
        let in_driver = self.dev.rq_in_driver;
        let max_in_driver = self.dev.max_rq_in_driver;
        let injected = std::mem::take(&mut self.inject.injected);
        let q = self.q(id);
        let old = q.inject_limit;
        if q.last_serv_time > 0 && injected {
            let threshold = q.last_serv_time * 3 / 2;
            if tot >= threshold && old > 0 {
                q.inject_limit -= 1;
                q.decrease_time = now;
            } else if tot < threshold && old <= max_in_driver {
                q.inject_limit += 1;
            }
        }
        if (q.last_serv_time == 0 && in_driver == 1) || tot < q.last_serv_time {
            if q.last_serv_time == 0 {
                q.inject_limit = old.max(1);
            }
            q.last_serv_time = tot.max(1);
        } else if !injected && in_driver == 1 {
            q.last_serv_time = tot.max(1);
        }
    }
}
