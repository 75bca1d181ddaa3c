//! Bios into queued requests and requests into each other, within a queue
//! (`bfq_bio_merge`, `bfq_request_merge`, `bfq_requests_merged`, `attempt_front_merge`):
//! not queue merging, which is `merge`.

use super::*;

impl State {
    /// The queue a bio of this issuer would be queued in, if it exists (`bic_to_bfqq`).
    pub(super) fn queue_of_bio(&self, bio: &Bio) -> Option<u32> {
        let sync = is_sync(bio.op, bio.flags);
        let key = if sync {
            Key::Sync(bio.issuer)
        } else {
            let slot = self.groups.find_slot(bio.group)?;
            Key::Async(
                slot,
                class_index(bio.ioprio.class()) as u8,
                bio.ioprio.level(),
            )
        };
        self.by_key.get(&key).copied()
    }

    /// Merges `bio` into queued request `id` of queue `qid`, keeping the sort order.
    pub(super) fn merge_bio_into(
        &mut self,
        q: &ElvCtx<'_>,
        qid: u32,
        id: u32,
        bio: Bio,
        k: &Knobs,
    ) -> Result<(), Bio> {
        let mut rq = q.rqs.lock(RqId(id));
        merge::bio_attempt_merge(&mut rq, bio, q.limits)?;
        let (sector, end) = (rq.sector, rq.end_sector());
        drop(rq);
        let info = &mut self.rqs[id as usize];
        let (old, old_end) = (info.sector, info.end);
        (info.sector, info.end) = (sector, end);
        // The queue's seek position (`last_request_pos`) stays where the request ended
        // when it was inserted: the kernel moves it only in `bfq_rq_enqueued`, not when a
        // bio grows a queued request, so the next request after a back merge may count as
        // a seek.
        let _ = old_end;
        if old != sector {
            // `bfq_request_merged`: a front merge that moved the request before its
            // neighbour below may make it the queue's next request.
            let bq = self.q(qid);
            let passed = bq
                .sorted
                .range(..(old, id))
                .next_back()
                .is_some_and(|&(s, _)| sector < s);
            bq.sorted.remove(&(old, id));
            bq.sorted.insert((sector, id));
            if passed {
                let next = self.qr(qid).next_rq;
                let last = self.dev.last_dispatch_end;
                self.q(qid).next_rq = self.choose_req(next, Some(id), last, k);
                if self.qr(qid).next_rq != next {
                    self.updated_next_req(qid);
                }
            }
            // The kernel's position tree reads its queues' next requests' positions as
            // they are, so a front-merged next request moves its queue's key in place; ours
            // re-sorts it.
            self.pos_update(qid);
        }
        self.stats.bio_merges += 1;
        Ok(())
    }

    /// Folds the queued request starting at `end` into `id` (which ends there), if the merge
    /// rules allow; returns the folded request for the core to free.
    pub(super) fn fold_next(
        &mut self,
        q: &ElvCtx<'_>,
        qid: u32,
        id: u32,
        end: u64,
    ) -> Option<RqId> {
        let next = self
            .qr(qid)
            .sorted
            .range((end, 0)..(end + 1, 0))
            .map(|x| x.1)
            .find(|&n| n != id)?;
        if !self.fold(q, id, next) {
            return None;
        }
        // `bfq_requests_merged`: `next` leaves the queue, `id` takes its place as the next
        // request to serve if it had it, and the earlier of the two deadlines.
        let bq = self.q(qid);
        if bq.next_rq == Some(next) {
            bq.next_rq = Some(id);
        }
        bq.sorted.remove(&(end, next));
        let mut gone_deadline = Nanos::MAX;
        if let Some(i) = bq.fifo.iter().position(|&(r, _)| r == next) {
            gone_deadline = bq.fifo.remove(i).map_or(Nanos::MAX, |x| x.1);
        }
        if let Some(i) = bq.fifo.iter().position(|&(r, _)| r == id) {
            if gone_deadline < bq.fifo[i].1 {
                bq.fifo.remove(i);
                let at = bq.fifo.partition_point(|&(_, d)| d <= gone_deadline);
                bq.fifo.insert(at, (id, gone_deadline));
            }
        }
        self.uncount(next);
        let info = &mut self.rqs[next as usize];
        info.queued = false;
        info.owned = false;
        // `elv_merge_requests`: the one-hit cache names the request that absorbed `next`.
        self.last_merge = Some(id);
        self.nr_queued -= 1;
        self.pos_update(qid);
        self.stats.rq_merges += 1;
        Some(RqId(next))
    }

    /// `elv_attempt_insert_merge`: folds the new request `id` (starting at `sector`) into
    /// the queued request ending there, the one-hit cache first, then (`nomerges=0`) any
    /// queue's, as the elevator's hash holds every queue's requests; `attempt_merge` asks
    /// BFQ nothing (no `bfq_allow_bio_merge`). One merge only, as since Linux 5.14. Where
    /// we differ: `bfq_requests_merged` also makes the new request's queue if it has none
    /// (`bfq_init_rq`); we do not, since the request never enters it.
    pub(super) fn insert_merge(&mut self, q: &ElvCtx<'_>, id: u32, sector: u64) -> bool {
        let ends_here = |st: &State, t: u32| {
            let r = &st.rqs[t as usize];
            t != id && r.queued && r.end == sector
        };
        let mut target = self.last_merge.filter(|&t| ends_here(self, t));
        if target.is_none_or(|t| !self.fold(q, t, id)) {
            if q.nomerges != NoMerges::All {
                return false;
            }
            target = self
                .back_merge_candidate(sector)
                .filter(|&t| ends_here(self, t));
            match target {
                Some(t) if self.fold(q, t, id) => {}
                _ => return false,
            }
        }
        self.last_merge = target;
        self.stats.rq_merges += 1;
        true
    }

    /// `bfq_setup_cooperator` for a synchronous request or bio of `issuer` at `sector`, sent
    /// to queue `qid`, with the merge it sets up carried out for `issuer`
    /// (`bfq_merge_bfqqs`): a merge set up earlier takes the issuer along first
    /// (`bfqq->new_bfqq`), then a stable merge that is due (off fast queueing devices), then
    /// a close cooperator. Returns the queue the I/O now goes to, if another.
    pub(super) fn cooperator(
        &mut self,
        qid: u32,
        issuer: u32,
        sector: u64,
        now: Nanos,
        k: &Knobs,
    ) -> Option<u32> {
        self.follow_merge(qid, issuer)
            .or_else(|| {
                self.delayed_stable_merge_allowed(k)
                    .then(|| self.delayed_stable_merge(qid, issuer, now))
                    .flatten()
            })
            .or_else(|| {
                self.merging_on
                    .then(|| self.setup_cooperator(qid, issuer, sector, now))
                    .flatten()
            })
    }

    /// Whether [`State::cooperator`] could redirect `bio`'s issuer from queue `qid`: a
    /// synchronous bio, and a pending merge, early merging on, or a stable merge scheduled
    /// on a device that allows one.
    pub(super) fn may_cooperate(&self, qid: u32, bio: &Bio, k: &Knobs) -> bool {
        let q = self.qr(qid);
        is_sync(bio.op, bio.flags)
            && (q.new_q.is_some()
                || self.merging_on
                || (q.stable_merge.is_some() && self.delayed_stable_merge_allowed(k)))
    }

    /// `bfq_allow_bio_merge`: may `bio`, bound for queue `*qid`, join queued request `t`?
    /// Not a synchronous bio into an asynchronous request; before deciding, the issuer's
    /// queue may be merged with a cooperating one (`*qid` follows), and then only a
    /// request of that queue will do.
    pub(super) fn allow_bio_merge(&mut self, qid: &mut u32, t: u32, bio: &Bio, k: &Knobs) -> bool {
        let sync = is_sync(bio.op, bio.flags);
        let t_queue = self.rqs[t as usize].queue;
        if sync && !self.qr(t_queue).sync {
            return false;
        }
        if sync {
            let now = self.now;
            if let Some(dst) = self.cooperator(*qid, bio.issuer, bio.sector, now, k) {
                *qid = dst;
            }
        }
        t_queue == *qid
    }

    /// `elv_rqhash_find`: a queued request of any queue that ends at `sector`.
    pub(super) fn back_merge_candidate(&self, sector: u64) -> Option<u32> {
        self.queues
            .iter()
            .flatten()
            .filter_map(|bq| bq.sorted.range(..(sector, 0)).next_back())
            .map(|&(_, t)| t)
            .find(|&t| self.rqs[t as usize].end == sector)
    }

    /// Folds request `next` into queued request `t` if the merge rules allow
    /// (`attempt_merge`'s checks and join); the caller takes `next` out of wherever it was.
    pub(super) fn fold(&mut self, q: &ElvCtx<'_>, t: u32, next: u32) -> bool {
        let mut a = q.rqs.lock(RqId(t));
        let mut b = q.rqs.lock(RqId(next));
        if !merge::req_merge_ok(&a, &b, q.limits) {
            return false;
        }
        merge::merge_requests(&mut a, &mut b);
        self.rqs[t as usize].end = a.end_sector();
        true
    }

    /// After a front merge into `id`: its predecessor in queue `qid` may now end where it
    /// starts, and absorbs it (`attempt_front_merge`).
    pub(super) fn fold_into_prev(&mut self, q: &ElvCtx<'_>, qid: u32, id: u32) -> Option<RqId> {
        let start = self.rqs[id as usize].sector;
        let prev = self
            .qr(qid)
            .sorted
            .range(..(start, 0))
            .next_back()
            .map(|x| x.1)
            .filter(|&p| self.rqs[p as usize].end == start)?;
        self.fold_next(q, qid, prev, start)
    }
}
