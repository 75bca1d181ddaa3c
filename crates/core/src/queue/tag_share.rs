//! Driver tags shared by several queues or hardware queues: who counts as an active user,
//! and each user's fair share (`hctx_may_queue`, `__blk_mq_tag_busy`, `__blk_mq_tag_idle` in
//! blk-mq-tag.c).

use super::*;

impl QueueInner {
    pub(super) fn user(&self, h: HctxIdx) -> &ActiveUser {
        if self.users.len() == 1 {
            &self.users[0]
        } else {
            &self.users[h.0 as usize]
        }
    }

    /// `hctx_may_queue`: with a shared tag set, each active user gets a fair share.
    pub(crate) fn may_queue(&self, h: HctxIdx) -> bool {
        if !self.set.is_shared() {
            return true;
        }
        let tags = &self.set.tags[h.0 as usize];
        self.user(h).nr_active.load(Ordering::Relaxed) < tags.fair_share()
    }

    /// `blk_mq_tag_busy` plus the active count of a newly taken driver tag.
    pub(crate) fn driver_tag_busy(&self, h: HctxIdx) {
        if !self.set.is_shared() {
            return;
        }
        let u = self.user(h);
        if !u.active.load(Ordering::Relaxed) && !u.active.swap(true, Ordering::AcqRel) {
            self.set.tags[h.0 as usize]
                .active_queues
                .fetch_add(1, Ordering::AcqRel);
        }
        u.nr_active.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes a driver tag at dispatch for a request allocated from scheduler tags.
    pub(crate) fn get_driver_tag(&self, h: HctxIdx, rq: &mut crate::request::Request) -> bool {
        if !rq.tag.is_none() {
            return true;
        }
        if !self.may_queue(h) {
            return false;
        }
        let hint = &self.ctxs[rq.ctx.0 as usize].tag_hint;
        let Some(t) = self.set.tags[h.0 as usize].get(hint, false, u32::MAX) else {
            return false;
        };
        self.driver_tag_busy(h);
        rq.tag = Tag(t as u16);
        self.set_drv_rq(self.set.map_index(h.0 as usize), t, rq.id);
        true
    }

    /// `__blk_mq_put_driver_tag`; `ctx` is the request's software queue, whose hint the
    /// free moves.
    pub(crate) fn put_driver_tag(&self, h: HctxIdx, tag: Tag, ctx: CtxIdx) {
        self.set.tags[h.0 as usize].put(tag.0 as u32, &self.ctxs[ctx.0 as usize].tag_hint);
        if self.set.is_shared() {
            self.user(h).nr_active.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Ends shared-tag activity of users with nothing in flight (`__blk_mq_tag_idle`).
    pub(crate) fn tag_idle(&self) {
        for (i, u) in self.users.iter().enumerate() {
            if u.nr_active.load(Ordering::Acquire) == 0 && u.active.swap(false, Ordering::AcqRel) {
                self.set.tags[i]
                    .active_queues
                    .fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}
