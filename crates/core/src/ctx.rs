//! `Ctx`: the per-submitter software queue (`struct blk_mq_ctx`).
//!
//! Each submitting thread (a "CPU" here) owns one. Without a scheduler, requests that cannot
//! be issued directly wait on the Ctx's list for their hardware queue; completions for bios
//! submitted from this Ctx by another thread are parked on `remote_done` until the owner
//! polls (the userspace stand-in for the kernel's completion IPI).

use crate::bio::Bio;
use crate::cpumap::HCTX_MAX_TYPES;
use crate::hctx::Counter;
use crate::request::RqId;
use crate::sync::Mutex;
use crate::{CtxIdx, HctxIdx};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Per-Ctx counters (the kernel's `rq_dispatched`, `rq_merged`, `rq_completed`).
#[derive(Default)]
pub struct CtxStats {
    /// Requests inserted into this software queue's lists.
    pub inserted: Counter,
    /// Bios merged into requests on its lists.
    pub merged: Counter,
    /// Requests taken from it for dispatch.
    pub dispatched: Counter,
    /// Requests completed that were submitted from it.
    pub completed: Counter,
}

/// A software queue (`struct blk_mq_ctx`): one per submitter, holding the requests it queued for each map type until a hardware queue run takes them.
pub struct Ctx {
    /// Its index in the queue's software queues.
    pub idx: CtxIdx,
    /// The hardware queue for each map type.
    pub hctxs: [HctxIdx; HCTX_MAX_TYPES],
    /// This Ctx's position in each of its hardware queues' `ctxs` (`index_hw`).
    pub index_hw: [u16; HCTX_MAX_TYPES],
    /// Pending requests, one list per map type (`rq_lists`).
    pub lists: Mutex<[VecDeque<RqId>; HCTX_MAX_TYPES]>,
    /// Bios completed by another thread, waiting for this Ctx's owner.
    pub remote_done: Mutex<Vec<Bio>>,
    /// Set when `remote_done` holds bios, so the owner looks without taking the lock.
    pub remote_pending: AtomicBool,
    /// The thread that last allocated a request here ([`crate::hctx::thread_number`]; 0
    /// before any): whom a hand-over to `remote_done` wakes.
    pub owner: AtomicU64,
    /// Tag allocation hints, driver tags and scheduler tags (the per-CPU `alloc_hint`).
    pub tag_hint: AtomicU32,
    /// The scheduler tags' allocation hint.
    pub sched_hint: AtomicU32,
    /// Its counters.
    pub stats: CtxStats,
}

impl Ctx {
    pub(crate) fn new(idx: CtxIdx, hctxs: [HctxIdx; HCTX_MAX_TYPES]) -> Ctx {
        Ctx {
            idx,
            hctxs,
            index_hw: [0; HCTX_MAX_TYPES],
            lists: Mutex::new(Default::default()),
            remote_done: Mutex::new(Vec::new()),
            remote_pending: AtomicBool::new(false),
            owner: AtomicU64::new(0),
            // Spread the hints so submitters start in different words of a shared map.
            tag_hint: AtomicU32::new(idx.0 as u32 * 16),
            sched_hint: AtomicU32::new(idx.0 as u32 * 16),
            stats: CtxStats::default(),
        }
    }

    /// Moves bios completed elsewhere into `out`.
    pub fn take_remote(&self, out: &mut Vec<Bio>) {
        if self.remote_pending.swap(false, Ordering::AcqRel) {
            out.append(&mut self.remote_done.lock());
        }
    }

    /// True when bios completed elsewhere wait to be taken.
    pub fn has_remote(&self) -> bool {
        self.remote_pending.load(Ordering::SeqCst)
    }

    /// Parks `bio` for the owner; returns the owner to wake: only when the list was empty
    /// (nothing parked since the owner last took it) and the owner is another thread. As
    /// `blk_mq_complete_send_ipi` sends its IPI only when `llist_add` finds the submitting
    /// CPU's `blk_cpu_done` list empty: one wake-up covers whatever joins the list before
    /// the owner takes it. `SeqCst` against the owner's `woken` check in `Driver::wait`,
    /// which reads the flag after announcing its sleep: one of the two sees the other.
    pub(crate) fn push_remote(&self, bio: Bio) -> Option<u64> {
        self.remote_done.lock().push(bio);
        if self.remote_pending.swap(true, Ordering::SeqCst) {
            return None;
        }
        let owner = self.owner.load(Ordering::Relaxed);
        (owner != 0 && owner != crate::hctx::thread_number()).then_some(owner)
    }

    /// Records the calling thread as the one that submits from here.
    #[inline]
    pub(crate) fn note_owner(&self, me: u64) {
        if self.owner.load(Ordering::Relaxed) != me {
            self.owner.store(me, Ordering::Relaxed);
        }
    }
}
