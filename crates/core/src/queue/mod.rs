//! `RequestQueue`: one block device's queue. This file holds the queue and its construction;
//! the rest of its life is in the files beside it, as the kernel splits blk-mq.c:
//! `submit.rs` (`blk_mq_submit_bio`: merging, allocation, plugging, insertion and issue),
//! `split.rs` (bios split to the limits, blk-merge.c), `freeze.rs` (the public methods of
//! [`RequestQueue`], freezing, elevator switches and depth changes),
//! `complete.rs` (ending and requeueing requests), `flush.rs` (PREFLUSH/FUA sequencing,
//! blk-flush.c), `tag_share.rs` (fair sharing of driver
//! tags, blk-mq-tag.c), `timeout.rs` (timers and timeouts, blk-timeout.c), `poll.rs`
//! (reaping the driver), `zoned.rs` (zone write plugging, blk-zoned.c) and `debug.rs`
//! (teardown, invariants, the dump: blk-mq-debugfs.c).
//!
//! The queue is shared by every submitter (`&self` everywhere). Each submitter brings its own
//! [`Submitter`]: its Ctx, its plug and scratch space, so the hot path allocates nothing. With
//! no scheduler and one hardware queue per submitter, the path takes only locks no other
//! submitter touches: the request slots of its own tag map and its own Ctx.

use crate::bio::{Bio, ReqFlags, ReqOp, SECTOR_SIZE};
use crate::blkcg::Blkcg;
use crate::cpumap::{HctxType, QueueMap};
use crate::ctx::Ctx;
use crate::driver::{CompletionBatch, Driver};
use crate::elevator::{BioMerge, Elevator, ElevatorInit, ElevatorInitFn, ElevatorType, ElvCtx};
use crate::hctx::{state, Hctx};
use crate::merge::{self, NoMerges, QueueLimits};
use crate::plug::Plug;
use crate::request::{ElvRq, RequestTable, RqFlags, RqId, RqState, Tag};
use crate::status::BlkStatus;
use crate::sync::Mutex;
use crate::tag::{TagSet, TagSetFlags, Tags};
use crate::trace::{TraceAction, TraceEvent, TraceHook};
use crate::{CtxIdx, HctxIdx, Nanos};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use thiserror::Error;

mod complete;
use complete::RequeueLists;
mod debug;
mod flush;
mod freeze;
mod poll;
mod split;
mod submit;
mod tag_share;
mod timeout;
pub(crate) mod zoned;

/// `BLK_MQ_RESOURCE_DELAY` and `BLK_MQ_BUDGET_DELAY`: 3 ms before re-running a queue that ran
/// out of a resource nobody will signal.
pub const RESOURCE_DELAY: Nanos = Nanos::from_millis(3);
/// The default request timeout (`30 * HZ`).
pub const DEFAULT_TIMEOUT: Nanos = Nanos::from_secs(30);
/// `BLKDEV_DEFAULT_RQ`.
pub const DEFAULT_RQ: u32 = 128;
/// How many requests at the tail of a software queue a bio may merge into (`blk_bio_list_merge`).
pub const CTX_MERGE_SCAN: usize = 8;
pub use flush::FLUSH_PENDING_TIMEOUT;
pub use freeze::{ElevatorRef, FreezeError, RequestsRef, MAX_SCHED_RQ, MIN_RQ};

/// Queue-level settings (the `/sys/block/<dev>/queue/` knobs that matter here).
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// Software queues (one per submitting thread or simulated CPU).
    pub nr_ctx: u16,
    /// Limits bios are checked, split and merged against.
    pub limits: QueueLimits,
    /// Which merges are tried (`nomerges`).
    pub nomerges: NoMerges,
    /// How long a request may be in the driver before its timeout handler runs (`io_timeout`).
    pub timeout: Nanos,
    /// Scheduler tags per hardware queue; 0 picks `2 * min(queue_depth, 128)`.
    pub nr_requests: u32,
    /// Run only the submitter's hardware queue for a scheduler that is not `MQ_AWARE`
    /// (the single-hctx dispatch patch). Off reproduces the behaviour before that change.
    pub sq_sched_dispatch: bool,
    /// Run "all" hardware queues from the completion path once the device has refused a
    /// budget since the last such run, as SCSI does (`scsi_run_queue_async`: only while
    /// `sdev->restarts`, which `scsi_mq_get_budget` raises on a refusal, is non-zero; Linux
    /// 5.10 on, so in the single-hctx dispatch patch's kernel too). With a scheduler that is not `MQ_AWARE` every
    /// hctx of the 64-queue RAID card the single-hctx dispatch patch was measured on then dispatches from the scheduler.
    pub run_all_on_complete: bool,
    /// Runs the kernel makes asynchronously (`blk_mq_run_hw_queue(hctx, true)`: BFQ's
    /// `bfq_schedule_dispatch`, SCHED_RESTART, tag and token wake-ups, SCSI's completion
    /// path; and `blk_mq_run_hw_queues(q, false)` from a CPU outside the hctx's mask, as the
    /// requeue work does) are armed as kblockd work (`hctx->run_work`) for the caller to
    /// execute ([`RequestQueue::take_due_runs`], [`RequestQueue::run_work`]) on the hctx's
    /// CPU after a worker's wake-up, instead of running inline; delayed ones come due on
    /// whole ticks (`time::HZ`). The requeue work, too, is left to the caller, to run on the
    /// CPU that kicked it ([`RequestQueue::take_due_requeue`],
    /// [`RequestQueue::requeue_work`]). The simulator turns it on where the race between
    /// those works is the experiment (the single-hctx dispatch patch); off, `timer` runs them at once.
    pub kblockd_runs: bool,
    /// `blk_mq_delay_run_hw_queues` re-arms a queue whose run is already pending
    /// (`mod_delayed_work`), pushing it back, as the kernel did until "blk-mq: avoid
    /// extending delays of active hctx from blk_mq_delay_run_hw_queues" (Linux 5.17): seed
    /// 000's kernel (5.10-rc6) did. Off: a pending run is left alone, as since then. Takes
    /// effect only with `kblockd_runs` (whose racing workers it needs; see
    /// `delay_run_hw_queues`).
    pub delay_run_rearms: bool,
    /// Writes with PREFLUSH or FUA go through the elevator, as since Linux 6.5 ("blk-mq: use
    /// the I/O scheduler for writes from the flush state machine"): they take
    /// `limit_depth` and `prepare_request`, a write that needs no flush step is inserted
    /// into the scheduler as any other, and a sequence's data step goes in at the head
    /// (`blk_mq_requeue_work`, "block: queue data commands from the flush state machine at
    /// the head"). Only the flush request itself (`REQ_OP_FLUSH`) bypasses it. Off: the
    /// routing before 6.5, where every `op_is_flush` request bypassed the scheduler to the
    /// head of the dispatch list (the seed mails' kernels).
    pub flush_via_sched: bool,
    /// A zoned device's writes are plugged per zone in the block layer, as since Linux 6.10
    /// (`blk-zoned.c`'s zone write plugging, which also emulates zone append). Off: as
    /// before, there are no plugs and the scheduler keeps a sequential zone's writes in
    /// order by letting one at a time go to the device (mq-deadline's zone write locking,
    /// [`ElevatorInit::zone_write_locking`]); zone append is the device's alone.
    pub zone_write_plugging: bool,
    /// Receives every request event (blktrace-style tracing, the simulator's cost model).
    pub tracer: TraceHook,
    /// The cgroup hierarchy bios name in `bio.group` (group schedulers read weights here).
    pub blkcg: Arc<Blkcg>,
}

impl Default for QueueConfig {
    fn default() -> QueueConfig {
        QueueConfig {
            nr_ctx: 1,
            limits: QueueLimits::default(),
            nomerges: NoMerges::All,
            timeout: DEFAULT_TIMEOUT,
            nr_requests: 0,
            sq_sched_dispatch: true,
            run_all_on_complete: false,
            kblockd_runs: false,
            delay_run_rearms: false,
            flush_via_sched: true,
            zone_write_plugging: true,
            tracer: TraceHook::default(),
            blkcg: Arc::new(Blkcg::new()),
        }
    }
}

/// Why a queue cannot be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum QueueError {
    /// No software queue.
    #[error("queue: nr_ctx must be at least 1")]
    NoCtx,
    /// A scheduler depth outside 1..=10240.
    #[error("queue: nr_requests {0} out of range 1..=10240")]
    NrRequests(u32),
    /// A logical block size that is not a power of two from 512 to 65536.
    #[error("queue: logical_block_size {0} must be a power of two between 512 and 65536")]
    BlockSize(u32),
    /// A request size limit under 4 KiB.
    #[error("queue: max_sectors {0} must be at least 8 (4 KiB)")]
    MaxSectors(u32),
    /// A zoned device whose zone size is not a power of two or not its `chunk_sectors`.
    #[error("queue: zone size {0} sectors must be a power of two and equal chunk_sectors ({1})")]
    ZoneSize(u32, u32),
}

/// The outcome of [`RequestQueue::submit_bio`].
#[derive(Debug)]
pub enum Submit {
    /// A request was allocated and queued, plugged or issued.
    Queued,
    /// The bio joined an existing request.
    Merged,
    /// No tag was free: the bio comes back. Reap completions and submit it again.
    Busy(Box<Bio>),
    /// The bio was refused (out of range, misaligned) and is already in `Submitter::done`
    /// with its status set.
    Failed,
    /// The bio needed no I/O and is already in `Submitter::done`, successful: an empty flush
    /// on a device without a write cache (`submit_bio_noacct`).
    Done,
}

/// A submitting thread's private state: its software queue, plug and scratch buffers.
///
/// Completions are routed to the software queue a bio was submitted from, so a Ctx must have
/// exactly one `Submitter` at a time (the kernel's per-CPU ctx is shared by the tasks on that
/// CPU; it routes per bio through `bi_end_io`, which this design replaces).
pub struct Submitter {
    /// Its software queue.
    pub ctx: CtxIdx,
    /// Its plug.
    pub plug: Plug,
    /// Completed bios of this submitter, in completion order. The owner drains it.
    pub done: Vec<Bio>,
    pub(crate) batch: CompletionBatch,
    pub(crate) scratch: Vec<(RqId, HctxIdx)>,
    /// One hardware queue's run of plugged requests on their way into the elevator.
    pub(crate) group: Vec<RqId>,
    pub(crate) runs: Vec<HctxIdx>,
    /// The distinct hardware queues this Ctx maps to.
    pub(crate) hctxs: Vec<HctxIdx>,
    /// The queue's switchable part as of `gen`, taken out while a call uses it.
    pub(crate) inner: Option<Arc<QueueInner>>,
    pub(crate) gen: u64,
    /// This Ctx's entry count: odd while one of the queue's methods runs for it.
    pub(crate) seq: u64,
}

impl Submitter {
    /// The hardware queues its software queue maps to.
    pub fn hctxs(&self) -> &[HctxIdx] {
        &self.hctxs
    }
}

/// A request reference that may carry its hardware queue along (the plug keeps both so
/// flushing it needs no extra lookup).
pub(crate) trait RqRef: Copy {
    fn rq(self) -> RqId;
}

impl RqRef for RqId {
    fn rq(self) -> RqId {
        self
    }
}

impl RqRef for (RqId, HctxIdx) {
    fn rq(self) -> RqId {
        self.0
    }
}

/// What allocation tells the submission path about a new request, read while its slot was
/// locked anyway.
struct NewRq {
    id: RqId,
    hctx: HctxIdx,
    bytes: u64,
    mergeable: bool,
    /// A request that bypasses the scheduler on a queue that has one (`op_is_flush`): to the
    /// head of the dispatch list.
    bypass: bool,
    /// A flush or FUA request, for the flush state machine (`op_is_flush`).
    flush: bool,
    /// The elevator's view, for requests that go through the scheduler.
    sched: Option<ElvRq>,
}

/// A freed request's tags and elevator view, released after its slot lock is dropped.
pub(crate) struct Released {
    id: RqId,
    tag: Tag,
    internal_tag: Tag,
    use_sched: bool,
    snap: ElvRq,
}

/// The tag map requests are allocated from, and where its requests start in the table.
struct AllocMap {
    tags: Arc<Tags>,
    base: u32,
}

/// The software and hardware contexts of a queue, as `build_contexts` makes them.
type Contexts = (Box<[CachePadded<Ctx>]>, Box<[CachePadded<Hctx>]>);

/// Who counts as one user of a shared tag map for fair sharing.
struct ActiveUser {
    active: AtomicBool,
    nr_active: AtomicU32,
}

/// One block device's queue (`struct request_queue`). What an elevator switch replaces (the
/// elevator, the scheduler tags, the request table) lives in a `QueueInner` the queue swaps
/// while frozen (`freeze.rs`); everything else outlives the switch and is shared by both.
pub struct RequestQueue {
    inner: arc_swap::ArcSwap<QueueInner>,
    freeze: freeze::FreezeState,
    set: Arc<TagSet>,
    driver: Arc<dyn Driver>,
    cfg: QueueConfig,
    limits: QueueLimits,
    map: QueueMap,
    ctxs: Arc<[CachePadded<Ctx>]>,
    hctxs: Arc<[CachePadded<Hctx>]>,
}

/// Where a new configuration's elevator comes from.
pub(crate) enum Elv {
    /// None (`none`).
    None,
    /// A fresh instance (`blk_mq_init_sched`).
    Init(ElvMaker),
    /// The running one, told of its new depth (`blk_mq_update_nr_requests`), with how it
    /// was made.
    Keep(Arc<dyn Elevator>, ElvMaker),
}

/// How an elevator is made: its type's init and name (the kernel's `init_sched` gets the
/// `elevator_type` too).
#[derive(Copy, Clone)]
pub(crate) struct ElvMaker {
    init: ElevatorInitFn,
    name: &'static str,
}

impl Elv {
    /// An instance of `elv`, or none for `none` (a type without an init).
    pub(crate) fn of(elv: Option<&ElevatorType>) -> Elv {
        match elv.and_then(|e| e.init.map(|init| (init, e.name))) {
            Some((init, name)) => Elv::Init(ElvMaker { init, name }),
            None => Elv::None,
        }
    }
}

/// The parts of a queue an elevator switch or an `nr_requests` change rebuilds, with shared
/// handles on the rest. Every blk-mq mechanism is written against this; [`RequestQueue`]'s
/// methods only pick the current one and keep switches out while they run.
pub(crate) struct QueueInner {
    pub(crate) set: Arc<TagSet>,
    pub(crate) cfg: QueueConfig,
    pub(crate) limits: QueueLimits,
    pub(crate) ctxs: Arc<[CachePadded<Ctx>]>,
    pub(crate) hctxs: Arc<[CachePadded<Hctx>]>,
    pub(crate) rqs: RequestTable,
    alloc_maps: Vec<AllocMap>,
    /// Per hardware queue: the index in `alloc_maps` it allocates requests from.
    hctx_alloc: Vec<u16>,
    /// Per distinct driver map: driver tag → request, for drivers that complete by tag and
    /// for requests whose driver tag was taken at dispatch (`tags->rqs[]`).
    drv_rqs: Vec<Box<[AtomicU32]>>,
    pub(crate) driver: Arc<dyn Driver>,
    /// Shared with the configuration an `nr_requests` change replaces this one with: the
    /// kernel keeps the elevator across it (`depth_updated`).
    pub(crate) elevator: Option<Arc<dyn Elevator>>,
    /// How `elevator` was made, to make it again at another `nr_requests`.
    elv_init: Option<ElvMaker>,
    pub(crate) nr_requests: u32,
    /// Fair-share accounting: per hardware queue, or one for the queue with host-wide tags.
    users: Arc<[ActiveUser]>,
    requeue_list: Mutex<RequeueLists>,
    requeue_at: AtomicU64,
    /// The software queue whose CPU last kicked the requeue work (`u32::MAX`: none), where a
    /// caller executing it as kblockd work runs it (`kblockd_runs`).
    requeue_ctx: AtomicU32,
    /// The requeue work is due and handed to a worker (`kblockd_runs`).
    requeue_queued: AtomicBool,
    next_timeout: AtomicU64,
    /// Hardware queues waiting for a driver tag.
    pub(crate) tag_waiters: Arc<AtomicU32>,
    /// Budget refusals since the completion path last ran every hardware queue (SCSI's
    /// `sdev->restarts`; see `QueueConfig::run_all_on_complete`).
    pub(crate) budget_restarts: AtomicU32,
    torn_down: Arc<AtomicBool>,
    /// Originals of bios split at `max_sectors`, waiting for their pieces (`split.rs`).
    pub(crate) splits: Arc<Mutex<split::SplitTable>>,
    /// Per hardware queue: its PREFLUSH/FUA state machine (`hctx->fq`, `flush.rs`).
    flush_queues: Arc<[CachePadded<Mutex<flush::FlushQueue>>]>,
    /// A zoned device's write plugs (`zoned.rs`).
    pub(crate) zones: Option<Arc<zoned::ZoneWplugs>>,
    /// The first of the flush requests' slots, one per hardware queue, after the requests
    /// tags name.
    flush_base: u32,
}

/// What a queue keeps across elevator switches: its contexts, fair-share users, flush
/// machines and split bios (each idle or empty while the queue is frozen, but counted).
#[derive(Clone)]
struct Persistent {
    ctxs: Arc<[CachePadded<Ctx>]>,
    hctxs: Arc<[CachePadded<Hctx>]>,
    users: Arc<[ActiveUser]>,
    tag_waiters: Arc<AtomicU32>,
    torn_down: Arc<AtomicBool>,
    splits: Arc<Mutex<split::SplitTable>>,
    flush_queues: Arc<[CachePadded<Mutex<flush::FlushQueue>>]>,
    zones: Option<Arc<zoned::ZoneWplugs>>,
}

impl QueueInner {
    /// `nr_requests` when `cfg` leaves it 0: with an elevator
    /// `2 * min(queue_depth, BLKDEV_DEFAULT_RQ)` (`blk_mq_init_sched`), without one the tag
    /// set's depth (`blk_mq_init_allocated_queue`).
    pub(crate) fn default_nr_requests(set: &TagSet, use_sched: bool) -> u32 {
        if use_sched {
            2 * set.cfg.queue_depth.min(DEFAULT_RQ)
        } else {
            set.cfg.queue_depth
        }
    }

    /// Everything a switch keeps, made once for a new queue.
    fn persistent(set: &TagSet, map: &QueueMap, cfg: &QueueConfig) -> Persistent {
        let nr_hw = set.nr_hw_queues() as usize;
        let (ctxs, hctxs) = Self::build_contexts(map, set, cfg.nr_ctx);
        let host_shared = set.cfg.flags.contains(TagSetFlags::TAG_HCTX_SHARED);
        let nr_users = if host_shared { 1 } else { nr_hw };
        Persistent {
            ctxs: ctxs.into(),
            hctxs: hctxs.into(),
            users: (0..nr_users)
                .map(|_| ActiveUser {
                    active: AtomicBool::new(false),
                    nr_active: AtomicU32::new(0),
                })
                .collect(),
            tag_waiters: Arc::new(AtomicU32::new(0)),
            torn_down: Arc::new(AtomicBool::new(false)),
            splits: Arc::new(Mutex::new(split::SplitTable::default())),
            flush_queues: (0..nr_hw)
                .map(|_| CachePadded::new(Mutex::new(flush::FlushQueue::default())))
                .collect(),
            zones: cfg
                .limits
                .zoned
                .filter(|_| cfg.zone_write_plugging)
                .map(|z| Arc::new(zoned::ZoneWplugs::new(z))),
        }
    }

    /// The parts of a queue that depend on its elevator and `nr_requests`: the tag maps
    /// requests come from (the scheduler's own with an elevator, `blk_mq_init_sched`; the
    /// driver's without), the request table and the elevator itself (`elevator_init`).
    fn build(
        set: Arc<TagSet>,
        driver: Arc<dyn Driver>,
        elv: Elv,
        cfg: QueueConfig,
        limits: QueueLimits,
        nr_requests: u32,
        p: Persistent,
    ) -> QueueInner {
        let nr_hw = set.nr_hw_queues() as usize;
        let host_shared = set.cfg.flags.contains(TagSetFlags::TAG_HCTX_SHARED);
        let elv_init = match &elv {
            Elv::None => None,
            Elv::Init(init) => Some(*init),
            Elv::Keep(_, init) => Some(*init),
        };
        let use_sched = elv_init.is_some();
        let (alloc_maps, hctx_alloc) = if use_sched {
            Self::sched_maps(
                nr_hw,
                nr_requests,
                host_shared,
                set.cfg.flags.contains(TagSetFlags::TAG_RR),
            )
        } else {
            Self::driver_maps(&set)
        };
        let nr_rq_ids = alloc_maps
            .last()
            .map(|m| m.base + m.tags.nr_tags)
            .unwrap_or(0);
        let drv_rqs = (0..set.distinct_maps())
            .map(|_| {
                (0..set.cfg.queue_depth)
                    .map(|_| AtomicU32::new(u32::MAX))
                    .collect()
            })
            .collect();
        let elevator = match elv {
            Elv::None => None,
            Elv::Init(maker) => {
                // The most `queue_requests_store` may later set: MAX_SCHED_RQ, or more if
                // the queue starts deeper.
                let maps = if host_shared { 1 } else { nr_hw as u32 };
                let max_rq_ids = maps * freeze::MAX_SCHED_RQ.max(nr_requests);
                Some(Arc::from((maker.init)(&ElevatorInit {
                    name: maker.name,
                    nr_hw_queues: nr_hw as u16,
                    nr_ctx: cfg.nr_ctx,
                    nr_requests,
                    nr_rq_ids,
                    max_rq_ids,
                    queue_depth: set.cfg.queue_depth,
                    rotational: driver.rotational(),
                    limits,
                    zone_write_locking: limits.zoned.is_some() && !cfg.zone_write_plugging,
                    blkcg: cfg.blkcg.clone(),
                })))
            }
            Elv::Keep(e, _) => {
                e.depth_updated(nr_requests, nr_rq_ids);
                Some(e)
            }
        };
        QueueInner {
            rqs: RequestTable::new(nr_rq_ids + nr_hw as u32),
            flush_queues: p.flush_queues,
            flush_base: nr_rq_ids,
            set,
            limits,
            ctxs: p.ctxs,
            hctxs: p.hctxs,
            alloc_maps,
            hctx_alloc,
            drv_rqs,
            driver,
            elevator,
            elv_init,
            nr_requests,
            users: p.users,
            requeue_list: Mutex::new(RequeueLists::default()),
            requeue_at: AtomicU64::new(u64::MAX),
            requeue_ctx: AtomicU32::new(u32::MAX),
            requeue_queued: AtomicBool::new(false),
            next_timeout: AtomicU64::new(u64::MAX),
            tag_waiters: p.tag_waiters,
            budget_restarts: AtomicU32::new(0),
            torn_down: p.torn_down,
            splits: p.splits,
            zones: p.zones,
            cfg,
        }
    }

    /// Shares what outlives a switch with the queue that replaces this one.
    fn persistent_parts(&self) -> Persistent {
        Persistent {
            ctxs: self.ctxs.clone(),
            hctxs: self.hctxs.clone(),
            users: self.users.clone(),
            tag_waiters: self.tag_waiters.clone(),
            torn_down: self.torn_down.clone(),
            splits: self.splits.clone(),
            flush_queues: self.flush_queues.clone(),
            zones: self.zones.clone(),
        }
    }

    fn check_config(cfg: &QueueConfig) -> Result<(), QueueError> {
        if cfg.nr_ctx == 0 {
            return Err(QueueError::NoCtx);
        }
        if cfg.nr_requests > crate::tag::MAX_DEPTH {
            return Err(QueueError::NrRequests(cfg.nr_requests));
        }
        let lbs = cfg.limits.logical_block_size;
        if !lbs.is_power_of_two() || !(512..=65536).contains(&lbs) {
            return Err(QueueError::BlockSize(lbs));
        }
        if cfg.limits.max_sectors < 8 {
            return Err(QueueError::MaxSectors(cfg.limits.max_sectors));
        }
        if let Some(z) = &cfg.limits.zoned {
            if !z.zone_sectors.is_power_of_two() || cfg.limits.chunk_sectors != z.zone_sectors {
                return Err(QueueError::ZoneSize(
                    z.zone_sectors,
                    cfg.limits.chunk_sectors,
                ));
            }
        }
        Ok(())
    }

    /// `blk_mq_map_swqueue`: link every Ctx to its hardware queue of each type.
    fn build_contexts(map: &QueueMap, set: &TagSet, nr_ctx: u16) -> Contexts {
        let m = set.cfg.maps;
        let nr_hw = set.nr_hw_queues();
        let ty_of = |h: u16| {
            if h < m.default {
                HctxType::Default
            } else if h < m.default + m.read {
                HctxType::Read
            } else {
                HctxType::Poll
            }
        };
        let types = [HctxType::Default, HctxType::Read, HctxType::Poll];
        let mut hctx_ctxs: Vec<Vec<CtxIdx>> = vec![Vec::new(); nr_hw as usize];
        let mut ctxs = Vec::with_capacity(nr_ctx as usize);
        for c in 0..nr_ctx {
            let ctx_idx = CtxIdx(c);
            let hs = types.map(|t| map.hctx(t, ctx_idx));
            let mut ctx = Ctx::new(ctx_idx, hs);
            for (t, h) in hs.iter().enumerate() {
                let list = &mut hctx_ctxs[h.0 as usize];
                let pos = match list.iter().position(|&x| x == ctx_idx) {
                    Some(p) => p,
                    None => {
                        list.push(ctx_idx);
                        list.len() - 1
                    }
                };
                ctx.index_hw[t] = pos as u16;
            }
            ctxs.push(CachePadded::new(ctx));
        }
        let hctxs = (0..nr_hw)
            .map(|h| {
                CachePadded::new(Hctx::new(
                    HctxIdx(h),
                    ty_of(h),
                    std::mem::take(&mut hctx_ctxs[h as usize]),
                ))
            })
            .collect();
        (ctxs.into(), hctxs)
    }

    fn driver_maps(set: &TagSet) -> (Vec<AllocMap>, Vec<u16>) {
        let mut base = 0;
        let maps = (0..set.distinct_maps())
            .map(|m| {
                let am = AllocMap {
                    tags: set.tags[m].clone(),
                    base,
                };
                base += set.tags[m].nr_tags;
                am
            })
            .collect();
        let idx = (0..set.nr_hw_queues() as usize)
            .map(|h| set.map_index(h) as u16)
            .collect();
        (maps, idx)
    }

    fn sched_maps(
        nr_hw: usize,
        nr_requests: u32,
        shared: bool,
        rr: bool,
    ) -> (Vec<AllocMap>, Vec<u16>) {
        let n = if shared { 1 } else { nr_hw };
        let maps = (0..n)
            .map(|m| AllocMap {
                tags: Arc::new(Tags::new(nr_requests, 0, rr)),
                base: m as u32 * nr_requests,
            })
            .collect();
        let idx = (0..nr_hw)
            .map(|h| if shared { 0 } else { h as u16 })
            .collect();
        (maps, idx)
    }

    /// Requests allocated and not yet freed. O(requests): it scans the table rather than
    /// keep a queue-wide counter that every submitter would write.
    pub fn nr_allocated(&self) -> u32 {
        self.rqs.iter().filter(|slot| slot.lock().allocated).count() as u32
    }
    /// The request holding driver tag `tag` of hardware queue `hctx` (`blk_mq_tag_to_rq`),
    /// `None` once the tag is free. A free leaves the entry as it was, as the kernel leaves
    /// `tags->rqs[tag]`: the tag map says whether it is held.
    pub fn tag_to_rq(&self, hctx: HctxIdx, tag: Tag) -> Option<RqId> {
        let m = self.set.map_index(hctx.0 as usize);
        let entry = self.drv_rqs[m].get(tag.0 as usize)?;
        if !self.set.tags[hctx.0 as usize].is_held(tag.0 as u32) {
            return None;
        }
        match entry.load(Ordering::Acquire) {
            u32::MAX => None,
            id => Some(RqId(id)),
        }
    }

    /// Records that `id` holds driver tag `tag` of map `m` (`tags->rqs[tag] = rq`). The
    /// entry is written only when it changes: without a scheduler each tag always names
    /// the same request, and submitters sharing a map would otherwise write each other's
    /// lines of the array on every request.
    #[inline]
    pub(crate) fn set_drv_rq(&self, m: usize, tag: u32, id: RqId) {
        let entry = &self.drv_rqs[m][tag as usize];
        if entry.load(Ordering::Relaxed) != id.0 {
            entry.store(id.0, Ordering::Release);
        }
    }
    pub(crate) fn elv_ctx(&self) -> ElvCtx<'_> {
        ElvCtx {
            rqs: &self.rqs,
            limits: &self.limits,
            nomerges: self.cfg.nomerges,
        }
    }

    /// A submitter handle for software queue `ctx`.
    pub fn submitter(&self, ctx: CtxIdx) -> Submitter {
        assert!(
            (ctx.0 as usize) < self.ctxs.len(),
            "no software queue {ctx:?}"
        );
        let c = &self.ctxs[ctx.0 as usize];
        let mut hctxs: Vec<HctxIdx> = Vec::new();
        for h in c.hctxs {
            if !hctxs.contains(&h) {
                hctxs.push(h);
            }
        }
        Submitter {
            ctx,
            plug: Plug::new(),
            done: Vec::with_capacity(256),
            batch: CompletionBatch::new(),
            scratch: Vec::with_capacity(64),
            group: Vec::with_capacity(64),
            runs: Vec::new(),
            hctxs,
            inner: None,
            gen: 0,
            seq: 0,
        }
    }

    // ----- submission ------------------------------------------------------------------------

    /// Reports `action` for each request of `ids` to the tracer, if there is one.
    #[inline]
    pub(crate) fn trace_ids(
        &self,
        action: TraceAction,
        ids: impl Iterator<Item = RqId>,
        now: Nanos,
    ) {
        if let Some(t) = self.cfg.tracer.get() {
            for id in ids {
                t.rq_event(action, &self.rqs.lock(id), now);
            }
        }
    }

    /// Frees a request whose bios were merged into another (it never reached the driver).
    fn free_merged(&self, id: RqId) {
        let released = {
            let mut rq = self.rqs.lock(id);
            assert!(
                rq.bios.is_empty(),
                "{id:?}: freed after merge with bios left"
            );
            assert_eq!(rq.state, RqState::Idle);
            Self::release_slot(&mut rq)
        };
        self.ctxs[released.snap.ctx.0 as usize].stats.merged.add(1);
        self.finish_and_put_tags(&released);
    }

    /// Marks a slot free and returns what must be released once its lock is dropped. The
    /// tags are put only after the elevator's `finish_request`, so the slot cannot be
    /// reallocated while the elevator still knows it.
    fn release_slot(rq: &mut crate::request::Request) -> Released {
        assert!(rq.allocated, "{:?}: freed twice", rq.id);
        let r = Released {
            id: rq.id,
            tag: rq.tag,
            internal_tag: rq.internal_tag,
            use_sched: rq.rq_flags.contains(RqFlags::USE_SCHED),
            snap: rq.elv(),
        };
        rq.allocated = false;
        rq.state = RqState::Idle;
        rq.deadline_ns = Nanos::MAX;
        rq.tag = Tag::NONE;
        rq.internal_tag = Tag::NONE;
        rq.rq_flags = RqFlags::default();
        r
    }

    /// `__blk_mq_free_request`: the elevator's `finish_request`, then the tags.
    fn finish_and_put_tags(&self, r: &Released) {
        if r.use_sched {
            if let Some(e) = &self.elevator {
                e.finish_request(&r.snap);
            }
        }
        let h = r.snap.hctx;
        let c = r.snap.ctx;
        if !r.tag.is_none() {
            self.put_driver_tag(h, r.tag, c);
        }
        if !r.internal_tag.is_none() {
            self.alloc_maps[self.hctx_alloc[h.0 as usize] as usize]
                .tags
                .put(r.internal_tag.0 as u32, &self.ctxs[c.0 as usize].sched_hint);
        }
        debug_assert!(r.id.0 < self.rqs.len() as u32);
    }

    /// Stops a hardware queue (`blk_mq_stop_hw_queue`): it is not run until started again.
    pub fn stop_hw_queue(&self, h: HctxIdx) {
        let hctx = &self.hctxs[h.0 as usize];
        hctx.set_state(state::STOPPED);
        hctx.run_at.store(u64::MAX, Ordering::Release);
    }

    /// Starts a stopped hardware queue and runs it (`blk_mq_start_stopped_hw_queue`).
    pub fn start_hw_queue(&self, sub: &mut Submitter, h: HctxIdx, now: Nanos) {
        self.hctxs[h.0 as usize].clear_state(state::STOPPED);
        self.run_hw_queue(h, now, &mut sub.batch);
        self.end_sub_batch(sub, now);
    }
}
