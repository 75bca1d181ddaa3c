//! `Hctx`: a hardware dispatch context (`struct blk_mq_hw_ctx`).

use crate::cpumap::HctxType;
use crate::request::RqId;
use crate::sync::Mutex;
use crate::{CtxIdx, HctxIdx, Nanos};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// `BLK_MQ_MAX_DISPATCH_ORDER`: dispatch batch sizes are counted in power-of-two buckets.
pub const MAX_DISPATCH_ORDER: usize = 7;

/// Hardware-queue state bits (`BLK_MQ_S_*`).
pub mod state {
    /// The driver stopped the queue (`BLK_MQ_S_STOPPED`): runs dispatch nothing until it starts it again.
    pub const STOPPED: u32 = 1 << 0;
    /// The queue counts as a user of a shared tag set (`BLK_MQ_S_TAG_ACTIVE`).
    pub const TAG_ACTIVE: u32 = 1 << 1;
    /// Run the queue again when a request completes (`BLK_MQ_S_SCHED_RESTART`).
    pub const SCHED_RESTART: u32 = 1 << 2;
    /// Waiting for a driver tag to free up (our stand-in for `dispatch_wait` being queued).
    pub const TAG_WAITING: u32 = 1 << 3;
}

/// A statistics counter that costs no locked instruction: with one submitter per hardware
/// queue (the fast path) it is exact; when several threads update one counter at once an
/// increment can be lost. The kernel keeps these per CPU for the same reason; these numbers
/// are for reports and dumps, never for decisions.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }
    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One thread's share of a hardware queue's counters (see [`HctxStats`]).
#[repr(align(128))]
#[derive(Default)]
pub struct HctxCounters {
    /// Requests handed to this hardware queue (inserted or issued).
    pub queued: Counter,
    /// Requests the driver accepted.
    pub issued: Counter,
    /// Requests completed.
    pub completed: Counter,
    /// Requests handed back for requeue.
    pub requeued: Counter,
    /// Queue runs.
    pub run: Counter,
    /// Direct issues that bypassed the software queue.
    pub direct: Counter,
    /// Dispatch batches by size: bucket 0 is empty runs, bucket i holds sizes in
    /// `[2^(i-1), 2^i)`, the last bucket everything larger.
    pub dispatched: [Counter; MAX_DISPATCH_ORDER],
    /// Times the driver answered `Resource`/`DevResource` or budget/tags ran out.
    pub busy: Counter,
    /// Times another queue's delayed re-run of every queue pushed this queue's armed run
    /// back (`QueueConfig::delay_run_rearms`).
    pub postponed: Counter,
    /// Of those, the push-backs while this queue had work its run would have looked at
    /// (`blk_mq_hctx_has_pending`): a request waited longer for it.
    pub postponed_pending: Counter,
}

/// The counters summed over every thread's share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HctxTotals {
    /// Requests handed to this hardware queue.
    pub queued: u64,
    /// Requests the driver accepted.
    pub issued: u64,
    /// Requests completed.
    pub completed: u64,
    /// Requests handed back for requeue.
    pub requeued: u64,
    /// Queue runs.
    pub run: u64,
    /// Direct issues that bypassed the software queue.
    pub direct: u64,
    /// Dispatch batches by size (see [`HctxCounters::dispatched`]).
    pub dispatched: [u64; MAX_DISPATCH_ORDER],
    /// Times the driver or its budget or tags turned requests away.
    pub busy: u64,
    /// Times another queue's delayed re-run pushed this queue's armed run back.
    pub postponed: u64,
    /// Of those, the push-backs while this queue had work pending.
    pub postponed_pending: u64,
}

/// Shards of [`HctxStats`]: threads are spread over them round-robin.
const SHARDS: usize = 8;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number ([`thread_number`]), 0 until it first asks. A constant
    /// initialiser keeps the hot read a plain thread-local load.
    static THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calling thread's number: unique in the process, never 0, handed out in turn as
/// threads first ask. It spreads [`HctxStats`] over their shards, and names the thread
/// that owns a driver's per-thread state (the uring driver's single-issuer rings), where
/// `std::thread::current()` would clone an `Arc` at every call.
#[inline]
pub fn thread_number() -> u64 {
    THREAD.with(|t| match t.get() {
        0 => {
            let n = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            t.set(n);
            n
        }
        n => n,
    })
}

/// This thread's shard of [`HctxStats`]: threads are spread over them round-robin.
#[inline]
fn shard() -> usize {
    ((thread_number() - 1) % SHARDS as u64) as usize
}

/// Counters for the state dump and reports (the kernel's debugfs `dispatched`, `queued`,
/// `run`). Every submitter mapped to a hardware queue counts into it, so each thread counts
/// into a block of its own ([`HctxStats::local`], two cache lines holding all the counters
/// one request touches) and reads sum the blocks ([`HctxStats::total`]): two submitters
/// sharing a hardware queue do not pass a line back and forth at every request. The kernel
/// keeps such counters per CPU for the same reason. Threads past the eighth share blocks,
/// where an increment can be lost as with [`Counter`].
#[derive(Default)]
pub struct HctxStats {
    shards: [HctxCounters; SHARDS],
}

impl HctxStats {
    /// The calling thread's block, to count into.
    #[inline]
    pub fn local(&self) -> &HctxCounters {
        &self.shards[shard()]
    }

    /// Every thread's counts, summed.
    pub fn total(&self) -> HctxTotals {
        let mut t = HctxTotals::default();
        for s in &self.shards {
            t.queued += s.queued.get();
            t.issued += s.issued.get();
            t.completed += s.completed.get();
            t.requeued += s.requeued.get();
            t.run += s.run.get();
            t.direct += s.direct.get();
            for (a, c) in t.dispatched.iter_mut().zip(&s.dispatched) {
                *a += c.get();
            }
            t.busy += s.busy.get();
            t.postponed += s.postponed.get();
            t.postponed_pending += s.postponed_pending.get();
        }
        t
    }
}

impl HctxCounters {
    pub(crate) fn count_dispatch(&self, n: usize) {
        let bucket = if n == 0 {
            0
        } else {
            (usize::BITS - n.leading_zeros()) as usize
        };
        self.dispatched[bucket.min(MAX_DISPATCH_ORDER - 1)].add(1);
    }
}

/// A hardware dispatch context (`struct blk_mq_hw_ctx`): one per driver queue and map type, with the dispatch list, the map of its software queues with pending requests, its state bits and its run serialisation.
pub struct Hctx {
    /// Its index in the queue's hardware queues.
    pub idx: HctxIdx,
    /// The map type it serves.
    pub ty: HctxType,
    state: AtomicU32,
    /// Requests that must go before anything the elevator or the Ctxs hold: left-overs of
    /// earlier runs, flushes, requeued driver-prepared requests.
    pub(crate) dispatch: Mutex<VecDeque<RqId>>,
    pub(crate) dispatch_len: AtomicU32,
    /// The software queues mapped here, and a bitmap of those with pending requests.
    pub ctxs: Vec<CtxIdx>,
    pub(crate) ctx_map: Box<[AtomicU64]>,
    /// Round-robin cursor over `ctxs` for one-at-a-time dispatch.
    pub(crate) dispatch_from: AtomicU32,
    /// A run's scratch list for the elevator's batches, so dispatching allocates nothing;
    /// a run that finds it taken (another thread is running the queue) uses its own.
    pub(crate) run_scratch: Mutex<Vec<(RqId, HctxIdx)>>,
    /// A delayed run is armed for this time (`Nanos::MAX` = none).
    pub(crate) run_at: AtomicU64,
    /// The armed run's time came and its work waits on the worklist for a worker
    /// (`QueueConfig::kblockd_runs`): still pending, so a re-arm can take it back.
    pub(crate) run_queued: AtomicBool,
    /// EWMA of "the driver was busy" (`dispatch_busy`).
    pub(crate) dispatch_busy: AtomicU32,
    /// Its counters, per thread.
    pub stats: HctxStats,
}

impl Hctx {
    pub(crate) fn new(idx: HctxIdx, ty: HctxType, ctxs: Vec<CtxIdx>) -> Hctx {
        let words = ctxs.len().div_ceil(64).max(1);
        Hctx {
            idx,
            ty,
            state: AtomicU32::new(0),
            dispatch: Mutex::new(VecDeque::new()),
            dispatch_len: AtomicU32::new(0),
            ctxs,
            ctx_map: (0..words).map(|_| AtomicU64::new(0)).collect(),
            dispatch_from: AtomicU32::new(0),
            run_scratch: Mutex::new(Vec::new()),
            run_at: AtomicU64::new(u64::MAX),
            run_queued: AtomicBool::new(false),
            dispatch_busy: AtomicU32::new(0),
            stats: HctxStats::default(),
        }
    }

    /// True when state bit `bit` ([`state`]) is set.
    pub fn test_state(&self, bit: u32) -> bool {
        self.state.load(Ordering::Acquire) & bit != 0
    }
    pub(crate) fn set_state(&self, bit: u32) -> bool {
        self.state.fetch_or(bit, Ordering::AcqRel) & bit != 0
    }
    pub(crate) fn clear_state(&self, bit: u32) -> bool {
        self.state.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }

    /// True while the driver has the queue stopped.
    pub fn is_stopped(&self) -> bool {
        self.test_state(state::STOPPED)
    }

    /// `dispatch_busy` as the kernel uses it: the EWMA is non-zero.
    pub fn is_busy(&self) -> bool {
        self.dispatch_busy.load(Ordering::Relaxed) != 0
    }

    /// `blk_mq_update_dispatch_busy`: `ewma = (ewma * 7 + (busy ? 16 : 0)) / 8`.
    pub(crate) fn update_dispatch_busy(&self, busy: bool) {
        let ewma = self.dispatch_busy.load(Ordering::Relaxed);
        if ewma == 0 && !busy {
            return;
        }
        let next = (ewma * 7 + if busy { 1 << 4 } else { 0 }) / 8;
        self.dispatch_busy.store(next, Ordering::Relaxed);
    }

    pub(crate) fn mark_ctx_pending(&self, pos: u16) {
        let (w, b) = (pos as usize / 64, pos % 64);
        if self.ctx_map[w].load(Ordering::Relaxed) & (1 << b) == 0 {
            self.ctx_map[w].fetch_or(1 << b, Ordering::AcqRel);
        }
    }

    /// True if the software queue at `pos` may hold requests (`blk_mq_hctx_has_pending`
    /// for one Ctx): set when one is inserted, cleared once its list is drained.
    pub(crate) fn ctx_pending(&self, pos: u16) -> bool {
        let (w, b) = (pos as usize / 64, pos % 64);
        self.ctx_map[w].load(Ordering::Acquire) & (1 << b) != 0
    }

    pub(crate) fn any_ctx_pending(&self) -> bool {
        self.ctx_map.iter().any(|w| w.load(Ordering::Acquire) != 0)
    }

    /// Requests on the dispatch list.
    pub fn dispatch_list_len(&self) -> u32 {
        self.dispatch_len.load(Ordering::Acquire)
    }

    /// Arms a run at `at` unless an earlier one is armed (`blk_mq_delay_run_hw_queue`).
    pub(crate) fn arm_run(&self, at: Nanos) {
        self.run_at.fetch_min(at.0, Ordering::AcqRel);
    }

    /// `mod_delayed_work` on a pending run: it now runs at `at`, later or not, and a work
    /// already on the worklist is taken back off it (`try_to_grab_pending`).
    pub(crate) fn rearm_run(&self, at: Nanos) {
        self.run_at.store(at.0, Ordering::Release);
        self.run_queued.store(false, Ordering::Release);
    }

    /// When its armed delayed run comes due, if one is armed.
    pub fn run_armed_at(&self) -> Option<Nanos> {
        match self.run_at.load(Ordering::Acquire) {
            u64::MAX => None,
            t => Some(Nanos(t)),
        }
    }
}
