//! A queue's life (`bfq_get_queue`, `bfq_init_bfqq`, `bfq_put_queue`, `bfq_exit_bfqq`):
//! made for an issuer's first request, found for the next ones, freed once idle and unused.

use super::*;

impl State {
    pub(in crate::bfq) fn q(&mut self, id: u32) -> &mut Bq {
        self.queues[id as usize].as_mut().expect("live queue")
    }

    pub(in crate::bfq) fn qr(&self, id: u32) -> &Bq {
        self.queues[id as usize].as_ref().expect("live queue")
    }

    pub(in crate::bfq) fn new_queue(
        &mut self,
        key: Key,
        group: u32,
        rq: &ElvRq,
        sync: bool,
        now: Nanos,
        k: &Knobs,
    ) -> u32 {
        let class = class_index(rq.ioprio.class());
        let q = Bq {
            key,
            group,
            class,
            level: rq.ioprio.level(),
            base_weight: ioprio_to_weight(rq.ioprio.level()),
            sync,
            sorted: BTreeSet::new(),
            fifo: VecDeque::new(),
            next_rq: None,
            fifo_checked: false,
            dispatched: 0,
            allocated: 0,
            // `bfq_init_bfqq`: two thirds of the device's largest budget.
            budget: 2 * self.max_budget(k) / 3,
            max_budget: 2 * self.max_budget(k) / 3,
            parked: 0,
            in_tree: false,
            active_seq: 0,
            created: now,
            wr: Wr::default(),
            // `bfq_init_bfqq`: "tentatively mark as has_short_ttime" a sync queue not of the
            // idle class.
            short_ttime: sync && class != 2,
            // `bfq_init_bfqq`: the last completion "now", so a new queue has not been idle.
            ttime: TTime {
                last_end: now,
                ..TTime::default()
            },
            seek_history: 0,
            last_rq_end: rq.sector,
            // A new queue counts as long idle: it may be raised as interactive.
            last_idle: Nanos::ZERO,
            last_backlogged: now,
            service_from_backlogged: 0,
            first_io_time: now,
            // `bfq_init_bfqq`: "has consumed no bandwidth so far".
            soft_rt_next_start: now,
            softrt_update: false,
            waker: None,
            woken_at: Nanos::ZERO,
            tentative_waker: None,
            waker_hits: 0,
            waker_since: Nanos::ZERO,
            injected: 0,
            inject_limit: 0,
            last_serv_time: 0,
            decrease_time: now,
            counted: None,
            pending: false,
            // `bfq_init_bfqq` marks a new queue I/O bound.
            io_bound: true,
            io_start: now,
            idle: Nanos::ZERO,
            issuers: match key {
                Key::Sync(i) => vec![i],
                Key::Async(..) => Vec::new(),
            },
            split_coop: false,
            shared: false,
            pos_key: None,
            fresh: true,
            retire_at: None,
            in_large_burst: false,
            stable_merge: None,
            new_q: None,
            split_time: Nanos::ZERO,
            last_wr_start_finish: now,
            non_blocking_wait_rq: false,
            hole_left: 0,
        };
        let id = match self.free_slots.pop() {
            Some(i) => {
                self.queues[i as usize] = Some(q);
                i
            }
            None => {
                self.queues.push(Some(q));
                self.queues.len() as u32 - 1
            }
        };
        self.by_key.insert(key, id);
        id
    }

    /// The queue a request of `rq`'s issuer goes to (`bfq_get_bfqq_handle_split`).
    pub(super) fn queue_for(&mut self, rq: &ElvRq, blkcg: &Blkcg, now: Nanos, k: &Knobs) -> u32 {
        let sync = is_sync(rq.op, rq.cmd_flags);
        let group = self.groups.slot_of(blkcg, rq.group);
        let key = if sync {
            Key::Sync(rq.issuer)
        } else {
            Key::Async(
                group,
                class_index(rq.ioprio.class()) as u8,
                rq.ioprio.level(),
            )
        };
        if let Some(&id) = self.by_key.get(&key) {
            let q = self.qr(id);
            if !(q.split_coop && q.is_coop()) || self.stably_merged.contains(&rq.issuer) {
                return id;
            }
            // The shared queue turned seeky: this issuer leaves it for a queue of its own,
            // which resumes the state its old queue had when it was merged, and takes the
            // shared queue's waker, at the head of that waker's `woken_list` (`bfq_init_rq`).
            let waker = self.qr(id).waker;
            self.split_issuer(id, rq.issuer);
            let nq = self.new_queue(key, group, rq, sync, now, k);
            self.resume_state(nq, rq.issuer, now);
            if let Some(w) = waker.filter(|&w| w != nq) {
                self.q(nq).set_waker(w, now);
            }
            self.note_creation(nq, now);
            return nq;
        }
        let id = self.new_queue(key, group, rq, sync, now, k);
        let id = if sync && k.stable_merging && k.merging != 0 {
            self.stable_merge_on_create(id, rq.issuer, now, k)
        } else {
            id
        };
        // A queue that joined an older one for good is no new queue (`bfq_init_rq` handles
        // bursts for just-created queues only).
        if self.qr(id).fresh {
            self.note_creation(id, now);
        }
        id
    }

    /// A queue with nothing queued, in flight or in service is freed, or, while an issuer's
    /// key still leads to it, kept for `RETIRE_AFTER` in case the issuer comes back, as the
    /// kernel keeps a process's queues for as long as the process holds them (its
    /// `bfq_io_cq`). An issuer's state (think time, seekiness, weight raising) lives there.
    pub(in crate::bfq) fn maybe_free(&mut self, id: u32) {
        let Some(q) = self.queues[id as usize].as_ref() else {
            return; // already freed by an expiry on the same path
        };
        if q.retire_at.is_some()
            || !(q.sorted.is_empty()
                && q.dispatched == 0
                && q.parked == 0
                && !q.in_tree
                && self.in_service != Some(id))
        {
            return;
        }
        let referenced = self.by_key.get(&q.key) == Some(&id)
            || q.issuers
                .iter()
                .any(|&i| self.by_key.get(&Key::Sync(i)) == Some(&id));
        if referenced {
            if q.retire_at.is_none() {
                let now = self.now;
                self.q(id).retire_at = Some(now);
                self.retiring.push_back((id, now));
            }
            return;
        }
        self.free_queue(id);
    }

    /// Frees queues kept idle for longer than `RETIRE_AFTER`.
    pub(super) fn retire_idle(&mut self) {
        while let Some(&(id, since)) = self.retiring.front() {
            if self.now.saturating_sub(since) < RETIRE_AFTER {
                break;
            }
            self.retiring.pop_front();
            let still = self.queues[id as usize].as_ref().is_some_and(|q| {
                q.retire_at == Some(since)
                    && q.sorted.is_empty()
                    && q.dispatched == 0
                    && q.parked == 0
                    && !q.in_tree
            });
            if still && self.in_service != Some(id) {
                self.free_queue(id);
            }
        }
    }

    pub(super) fn free_queue(&mut self, id: u32) {
        let q = self.qr(id);
        debug_assert!(q.counted.is_none() && !q.pending);
        let (key, group, class) = (q.key, q.group, q.class);
        let issuers = std::mem::take(&mut self.q(id).issuers);
        self.pos_remove(id);
        self.groups.tree(group, class).forget(id);
        if self.by_key.get(&key) == Some(&id) {
            self.by_key.remove(&key);
        }
        for i in issuers {
            if self.by_key.get(&Key::Sync(i)) == Some(&id) {
                self.by_key.remove(&Key::Sync(i));
                self.saved.remove(&i);
            }
        }
        // Ids are reused: nothing may keep pointing at this one.
        if self.groups.slots[group as usize].last_created == Some(id) {
            self.groups.slots[group as usize].last_created = None;
        }
        for q in self.queues.iter_mut().flatten() {
            if q.stable_merge == Some(id) {
                q.stable_merge = None;
            }
            if q.waker == Some(id) {
                q.waker = None;
            }
            if q.tentative_waker == Some(id) {
                q.tentative_waker = None;
            }
        }
        if self.last_completion.is_some_and(|(q, _)| q == id) {
            self.last_completion = None;
        }
        self.burst.list.retain(|&b| b != id);
        self.queues[id as usize] = None;
        self.free_slots.push(id);
    }
}
