//! Cooperating queues (early queue merge, `bfq_setup_cooperator`, `bfq_merge_bfqqs`,
//! `bfq_split_bfqq`), and stable merging of queues made together
//! (`bfq_do_or_sched_stable_merge`, `bfq_setup_stable_merge`).
//!
//! Issuers whose own I/O looks random but whose I/O together is sequential (several
//! threads reading interleaved parts of one file) are served best from one queue, ordered by
//! position. Each group keeps a tree of where its queues' next requests start
//! (`rq_pos_tree`); a new synchronous request close (within `CLOSE_THR` sectors) to where
//! the in-service queue's last dispatch ended, or to another queue's next request,
//! redirects its issuer to that queue, as the kernel does: the issuer's queue keeps what it
//! has queued and is served until it runs dry, its other issuers follow at their next
//! request, and no weight changes. A shared queue that turns seeky is marked at expiry, and
//! each of its issuers gets a queue of its own again with its next request.
//!
//! Merging is only tried within `MERGE_TIME_LIMIT` of a queue's first service since it last
//! became busy (cooperators show up together), and not at all on non-rotational devices
//! with internal queueing, whose own scheduling already makes interleaved I/O sequential
//! (`nonrot_with_queueing`, BFQ's no-merging-on-flash patch); the position tree is not even kept up to date there,
//! which is the cost that seed saves.

use super::sched::{Key, Knobs, Saved, State, Wr};
use mqblk_core::Nanos;

/// `bfq_activation_stable_merging`: a queue made this soon after the group's last one may be
/// merged with it for good.
const STABLE_MERGE_WINDOW: Nanos = Nanos::from_millis(600);
/// `bfq_burst_interval`: only a queue made this soon after it is merged (at once, or later).
const STABLE_MERGE_BURST: Nanos = Nanos::from_millis(180);
/// `bfq_late_stable_merging`: a scheduled stable merge waits this long after the queue was
/// made (or split), so its I/O can show whether it is better left alone.
const LATE_STABLE_MERGE: Nanos = Nanos::from_millis(600);

/// `BFQQ_CLOSE_THR`: how near, in sectors, a request must be to count as cooperating.
const CLOSE_THR: u64 = 8 * 1024;
/// `bfq_merge_time_limit` (HZ / 10).
const MERGE_TIME_LIMIT: Nanos = Nanos::from_millis(100);

impl State {
    pub(super) fn merging_enabled(&self, k: &Knobs) -> bool {
        match k.merging {
            0 => false,
            2 => true,
            _ => !self.dev.nonrot_with_queueing(),
        }
    }

    /// A stable merge scheduled at a queue's creation is carried out later only where early
    /// merging may run at all (`bfq_setup_cooperator`: not on fast queueing devices). Both
    /// rest on `bfqd->nonrot_with_queueing`, which `queue_merging=2` takes as false, as a
    /// kernel built with the flag held false does (`scripts/guest-seed004.sh`).
    pub(super) fn delayed_stable_merge_allowed(&self, k: &Knobs) -> bool {
        self.merging_enabled(k)
    }

    /// `bfq_too_late_for_merging`: a queue first served more than `MERGE_TIME_LIMIT` ago
    /// in its current backlogged period is not merged (cooperators show up together).
    /// The period starts afresh each time the queue becomes busy again, so a queue that
    /// runs dry often (a process waiting on each of its reads, or on each `fsync`) may be
    /// merged at any age.
    fn too_late(&self, id: u32, now: Nanos) -> bool {
        let q = self.qr(id);
        q.service_from_backlogged > 0 && now.saturating_sub(q.first_io_time) > MERGE_TIME_LIMIT
    }

    /// `bfq_may_be_close_cooperator`: `new` is not too late, neither is of the idle class,
    /// both have one class, neither is seeky (merging it is unlikely to give sequential
    /// I/O), both are synchronous. (Ours also keeps a shared queue marked for splitting
    /// out, as its issuers are about to leave it.)
    fn may_be_close_cooperator(&self, id: u32, new: u32, now: Nanos) -> bool {
        let (a, b) = (self.qr(id), self.qr(new));
        !self.too_late(new, now)
            && a.class != 2
            && b.class != 2
            && a.class == b.class
            && !self.is_seeky(id)
            && !self.is_seeky(new)
            && a.sync
            && b.sync
            && !b.split_coop
    }

    /// `bfq_pos_tree_add_move`: queue `id`'s entry in its group's position tree, keyed by
    /// where its next request starts. None for a queue too late for merging (it could not
    /// be merged anyway), of the idle class, or with nothing queued, and none while
    /// another queue holds that very key (the kernel's lookup finds that one and leaves
    /// this queue out). Asynchronous queues are in it too; `bfq_may_be_close_cooperator`
    /// turns them down when found. Called where the kernel calls it: when a queue's next
    /// request changes or one of its requests leaves, and when its turn ends with
    /// requests left; each call takes the queue out and puts it back, as the kernel's
    /// does, which reshapes the tree even when the key stays.
    pub(super) fn pos_update(&mut self, id: u32) {
        let q = self.qr(id);
        if !self.merging_on && q.pos_key.is_none() {
            // Not kept where merging is off (every dispatch comes here).
            return;
        }
        let want = if self.merging_on && q.class != 2 && !self.too_late(id, self.now) {
            q.next_rq.map(|r| self.rqs[r as usize].sector)
        } else {
            None
        };
        let (old, group) = (q.pos_key, q.group);
        let tree = &mut self.groups.slots[group as usize].pos_tree;
        if old.is_some() {
            tree.remove(id);
        }
        let key = want.filter(|&s| tree.insert(s, id));
        self.q(id).pos_key = key;
    }

    pub(super) fn pos_remove(&mut self, id: u32) {
        let q = self.qr(id);
        if q.pos_key.is_some() {
            let g = q.group;
            self.groups.slots[g as usize].pos_tree.remove(id);
            self.q(id).pos_key = None;
        }
    }

    /// `bfq_setup_merge`'s target for `qid` starting at `start`: the end of the chain of
    /// pending merges from there (`new_bfqq->new_bfqq`, "skip interim queue merges"), if
    /// it does not lead back to `qid` ("avoid a circular list") and some issuer of `qid`'s
    /// group still sends to it. The kernel's pending merge holds a reference on its
    /// target; ours does not, so a target freed meanwhile (its slot perhaps reused) fails
    /// the same test.
    fn merge_target(&self, qid: u32, start: u32) -> Option<u32> {
        let mut dst = start;
        for _ in 0..self.queues.len() {
            if dst == qid {
                return None;
            }
            let q = self.queues[dst as usize].as_ref()?;
            match q.new_q {
                Some(n) => dst = n,
                None => {
                    let live = q.sync && !q.issuers.is_empty() && q.group == self.qr(qid).group;
                    return live.then_some(dst);
                }
            }
        }
        None
    }

    /// A merge already set up for queue `qid` (`bfqq->new_bfqq`): `issuer`, sending its
    /// next request, moves to its target (`bfq_setup_cooperator`'s first step, then
    /// `bfq_merge_bfqqs`). Returns where the request goes.
    pub(super) fn follow_merge(&mut self, qid: u32, issuer: u32) -> Option<u32> {
        let start = self.qr(qid).new_q?;
        let Some(dst) = self.merge_target(qid, start) else {
            self.q(qid).new_q = None;
            return None;
        };
        self.redirect(qid, dst, issuer);
        Some(dst)
    }

    /// `bfq_setup_cooperator`: for a synchronous request of `issuer` at `sector`, queue
    /// `qid` is redirected to the in-service queue if the request is close to where that
    /// one's head is, or else to the queue of the group whose next request is closest
    /// (`bfq_find_close_cooperator`), both subject to `bfq_may_be_close_cooperator`;
    /// `bfq_setup_merge` then follows that queue's own pending merge and gives up on a
    /// cycle. Not while `qid` is too late for merging, nor with one queue busy. The
    /// direction is always `qid` to the other, also when `qid` is the one in service:
    /// "we are in the context of the process owning bfqq". Returns where the request goes.
    pub(super) fn setup_cooperator(
        &mut self,
        qid: u32,
        issuer: u32,
        sector: u64,
        now: Nanos,
    ) -> Option<u32> {
        if self.too_late(qid, now) || self.load.busy_classes.iter().sum::<u32>() == 1 {
            return None;
        }
        let group = self.qr(qid).group;
        let candidate = self
            .in_service
            .filter(|&s| {
                s != qid
                    && self.qr(s).group == group
                    && self.dev.in_serv_last_pos.abs_diff(sector) <= CLOSE_THR
                    && self.may_be_close_cooperator(qid, s, now)
            })
            .or_else(|| {
                self.find_close_cooperator(group, qid, sector)
                    .filter(|&c| self.may_be_close_cooperator(qid, c, now))
            })?;
        let dst = self.merge_target(qid, candidate)?;
        self.redirect(qid, dst, issuer);
        Some(dst)
    }

    /// `bfq_find_close_cooperator` (`bfqq_find_close`): the queue of `group` whose next
    /// request starts at `sector`; else the tree's node under whose empty child `sector`
    /// would go, if its key is within `CLOSE_THR`; else that node's neighbour on the far
    /// side of `sector`, if close. None if what it finds is `qid` itself.
    fn find_close_cooperator(&self, group: u32, qid: u32, sector: u64) -> Option<u32> {
        use super::pos_tree::Lookup;
        let tree = &self.groups.slots[group as usize].pos_tree;
        let close = |r| tree.key(r).abs_diff(sector) <= CLOSE_THR;
        let found = match tree.lookup(sector) {
            Lookup::Exact(q) => Some(q),
            Lookup::Parent(None) => None,
            Lookup::Parent(Some(p)) if close(p) => Some(tree.queue(p)),
            Lookup::Parent(Some(p)) => {
                let other = if tree.key(p) < sector {
                    tree.next(p)
                } else {
                    tree.prev(p)
                };
                other.filter(|&r| close(r)).map(|r| tree.queue(r))
            }
        };
        found.filter(|&id| id != qid)
    }

    /// `bfq_merge_bfqqs` for one issuer: `issuer`'s requests go to `dst` from now on, with
    /// the state its queue had saved for when it leaves again. `src` keeps what it has
    /// queued and is served as before until it runs dry; once no issuer sends to it, it
    /// leaves the service tree if empty (`bfq_release_process_ref`) and is freed when
    /// nothing of it is left. IO_bound, the waker and weight raising pass to `dst` (raising
    /// only to a queue not raised; `src` loses its own); no weight changes: a member's
    /// priority reaches a shared queue only when that member's I/O priority changes
    /// (`bfq_check_ioprio_change`), so it "inherits" a higher weight, in the words of
    /// "block, bfq: do not merge queues on flash storage with queueing", when the heavier
    /// queue is the one the others move to.
    pub(super) fn redirect(&mut self, src: u32, dst: u32, issuer: u32) {
        let save = |q: &super::sched::Bq| Saved {
            wr: q.wr,
            ttime: q.ttime,
            short_ttime: q.short_ttime,
            last_serv_time: q.last_serv_time,
            inject_limit: q.inject_limit,
            decrease_time: q.decrease_time,
            io_bound: q.io_bound,
            io_start: q.io_start,
            idle: q.idle,
            in_large_burst: q.in_large_burst,
        };
        // `bfq_bfqq_save_state` of both: each issuer that owned a queue alone keeps what it
        // was, for when it is split off again.
        let (src_weight, dst_weight) = (self.qr(src).base_weight, self.qr(dst).base_weight);
        let s = save(self.qr(src));
        self.saved.insert(issuer, s);
        if let [owner] = self.qr(dst).issuers[..] {
            let d = save(self.qr(dst));
            self.saved.insert(owner, d);
        }
        if self.qr(src).io_bound {
            self.q(dst).io_bound = true;
        }
        self.q(src).io_bound = false;
        // The waker of `src`'s issuers may inject for the shared queue too.
        if let Some(w) = self.qr(src).waker.filter(|&w| w != dst) {
            if self.qr(dst).waker.is_none() {
                let now = self.now;
                self.q(dst).set_waker(w, now);
            }
        }
        // Weight raising passes to a queue not raised, and leaves `src` either way.
        let busy = |st: &State, id: u32| st.qr(id).in_tree || st.in_service == Some(id);
        let (sw, dw) = (self.qr(src).wr, self.qr(dst).wr);
        if dw.coeff <= 1 && sw.coeff > 1 {
            let finish = self.qr(src).last_wr_start_finish;
            let d = self.q(dst);
            d.wr = sw;
            d.last_wr_start_finish = finish;
            if busy(self, dst) {
                self.load.wr_busy += 1;
            }
        }
        if sw.coeff > 1 {
            self.q(src).wr = Wr::default();
            if busy(self, src) {
                self.load.wr_busy -= 1;
            }
        }
        self.by_key.insert(Key::Sync(issuer), dst);
        // `bfqq->new_bfqq`: `src`'s other issuers follow at their next request.
        self.q(src).new_q = Some(dst);
        self.q(src).issuers.retain(|&i| i != issuer);
        let d = self.q(dst);
        if !d.issuers.contains(&issuer) {
            d.issuers.push(issuer);
        }
        d.split_coop = false;
        let q = self.qr(src);
        if q.issuers.is_empty() && q.in_tree && q.sorted.is_empty() && self.in_service != Some(src)
        {
            let (g, c, got) = (q.group, q.class, q.injected);
            self.groups.deactivate(g, src, c, got);
            self.q(src).in_tree = false;
            self.became_idle(src, Nanos::ZERO);
        }
        self.update_pending(src);
        self.update_pending(dst);
        self.maybe_free(src);
        self.stats.queue_merges += 1;
        if !std::mem::replace(&mut self.q(dst).shared, true) {
            self.stats.shared_queues_made += 1;
        }
        match dst_weight.cmp(&src_weight) {
            std::cmp::Ordering::Greater => self.stats.merges_into_heavier += 1,
            std::cmp::Ordering::Less => self.stats.merges_into_lighter += 1,
            std::cmp::Ordering::Equal => {}
        }
    }

    /// `issuer` leaves shared queue `id` (`bfq_split_bfqq`): its next request gets a queue of
    /// its own.
    pub(super) fn split_issuer(&mut self, id: u32, issuer: u32) {
        let q = self.q(id);
        q.issuers.retain(|&i| i != issuer);
        if q.issuers.len() <= 1 {
            q.split_coop = false;
        }
        self.by_key.remove(&Key::Sync(issuer));
        self.update_pending(id);
        self.stats.queue_splits += 1;
    }
}

impl State {
    /// Stable merging (`bfq_do_or_sched_stable_merge`): queue `qid`, just made for a new
    /// issuer, joins the sync queue its group made last if that was made within
    /// `STABLE_MERGE_BURST` with the same priority: the flows of one application (fio's
    /// `numjobs`) need no protection from each other. On a fast queueing device the merge
    /// happens now; otherwise it is scheduled, and done after `LATE_STABLE_MERGE` unless
    /// idling then boosts the queue's throughput (sequential I/O on a disk). Returns the
    /// queue the issuer's I/O goes to.
    pub(super) fn stable_merge_on_create(
        &mut self,
        qid: u32,
        issuer: u32,
        now: Nanos,
        k: &Knobs,
    ) -> u32 {
        let group = self.qr(qid).group;
        let last = self.groups.slots[group as usize]
            .last_created
            .filter(|&l| l != qid && self.queues[l as usize].is_some());
        let fits = last.filter(|&l| {
            let (a, b) = (self.qr(l), self.qr(qid));
            now.saturating_sub(a.created) <= STABLE_MERGE_WINDOW
                && a.class == b.class
                && a.base_weight == b.base_weight
                && a.sync
        });
        let Some(last) = fits else {
            self.groups.slots[group as usize].last_created = Some(qid);
            return qid;
        };
        if now.saturating_sub(self.qr(last).created) > STABLE_MERGE_BURST {
            return qid;
        }
        // `bfq_do_or_sched_stable_merge` merges now only where `nonrot_with_queueing` holds,
        // which merging forced on (`queue_merging=2`) takes as false.
        if self.merging_enabled(k) || !self.dev.nonrot_with_queueing() {
            self.q(qid).stable_merge = Some(last);
            return qid;
        }
        // `bfq_setup_merge`: only into a queue some issuer still uses.
        if self.qr(last).issuers.is_empty() || self.in_service == Some(qid) {
            return qid;
        }
        // The issuer it was just made for goes to `last` instead.
        self.mark_stably_merged(last, issuer);
        self.redirect(qid, last, issuer);
        self.stats.stable_merges += 1;
        last
    }

    /// A stable merge of `issuer` into queue `target` is about to happen: `issuer` is
    /// stably merged, and so is `target`'s owner if it has one alone (`bfqq_data->
    /// stably_merged` and `new_bfqq->bic`'s in `bfq_setup_stable_merge`; a shared queue
    /// has no `bic`, so its issuers that came as cooperators stay splittable).
    fn mark_stably_merged(&mut self, target: u32, issuer: u32) {
        self.stably_merged.insert(issuer);
        if let [owner] = self.qr(target).issuers[..] {
            self.stably_merged.insert(owner);
        }
    }

    /// The scheduled stable merge of queue `qid`, once it is due (`bfq_setup_stable_merge`);
    /// the queue its request goes to if it happened.
    pub(super) fn delayed_stable_merge(
        &mut self,
        qid: u32,
        issuer: u32,
        now: Nanos,
    ) -> Option<u32> {
        let q = self.qr(qid);
        let target = q.stable_merge?;
        if q.fresh
            || now.saturating_sub(q.split_time) <= LATE_STABLE_MERGE
            || now.saturating_sub(q.created) <= LATE_STABLE_MERGE
        {
            return None;
        }
        // Done or given up now, either way.
        self.q(qid).stable_merge = None;
        // `bfq_setup_stable_merge`: not where idling would boost the queue's throughput
        // without issues (`idling_boosts_thr_without_issues`, which says no while any queue
        // is raised, as new queues of a burst are).
        if self.idling_boosts_thr_without_issues(qid)
            || self.qr(qid).issuers.is_empty()
            || self.qr(target).issuers.is_empty()
            || self.qr(target).group != self.qr(qid).group
        {
            return None;
        }
        // `bfq_setup_stable_merge` through `bfq_setup_merge`: `qid` to the target, as
        // every merge goes.
        self.mark_stably_merged(target, issuer);
        self.redirect(qid, target, issuer);
        self.stats.stable_merges += 1;
        Some(target)
    }

    /// A queue just made for `issuer` on leaving a shared queue takes back what its old
    /// queue was (`bfq_bfqq_resume_state`); it is not new, so not interactive by novelty.
    pub(super) fn resume_state(&mut self, id: u32, issuer: u32, now: Nanos) {
        let saved = self.saved.remove(&issuer);
        let q = self.q(id);
        q.fresh = false;
        q.last_idle = now;
        q.split_time = now;
        if let Some(s) = saved {
            // Raising that ran out while shared is not resumed.
            let wr_left = s.wr.coeff > 1 && now.saturating_sub(s.wr.start) <= s.wr.max_time;
            q.wr = if wr_left { s.wr } else { Wr::default() };
            q.ttime = s.ttime;
            q.short_ttime = s.short_ttime;
            q.last_serv_time = s.last_serv_time;
            q.inject_limit = s.inject_limit;
            q.decrease_time = s.decrease_time;
            q.io_bound = s.io_bound;
            q.io_start = s.io_start;
            q.idle = s.idle;
            q.in_large_burst = s.in_large_burst;
        }
    }
}
