//! `Request`: what the block layer schedules and a driver executes: one or more merged bios.
//!
//! Requests are preallocated, one per tag of the tag map they are allocated from (the kernel's
//! `static_rqs`), and named by a dense [`RqId`]. A request is owned by exactly one party at a
//! time (a plug, a software queue, the elevator, a dispatch list, the driver), and its state
//! machine is asserted on every transition:
//!
//! ```text
//! IDLE --start--> IN_FLIGHT --complete--> COMPLETE --free--> IDLE
//! IN_FLIGHT --requeue--> IDLE
//! ```

use crate::bio::{Bio, IoPrio, ReqFlags, ReqOp, SECTOR_SHIFT};
use crate::status::BlkStatus;
use crate::sync::{Mutex, MutexGuard};
use crate::{CtxIdx, HctxIdx, Nanos};
use crossbeam_utils::CachePadded;

/// A tag: an index into one tag map.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(pub u16);

impl Tag {
    /// No tag held (`BLK_MQ_NO_TAG`).
    pub const NONE: Tag = Tag(u16::MAX);
    /// True for [`Tag::NONE`].
    pub fn is_none(self) -> bool {
        self == Tag::NONE
    }
}

/// A request's identity: its index in the queue's request table. Dense, so elevators can keep
/// per-request side tables in a `Vec` indexed by it instead of embedding nodes in the request.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RqId(pub u32);

impl RqId {
    /// The index into the request table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// `enum mq_rq_state`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RqState {
    /// Allocated or free, not in the driver (`MQ_RQ_IDLE`).
    Idle,
    /// Issued to the driver (`MQ_RQ_IN_FLIGHT`).
    InFlight,
    /// The driver completed it (`MQ_RQ_COMPLETE`).
    Complete,
}

bitflags::bitflags! {
    /// The core's private request flags (`RQF_*`).
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
    pub struct RqFlags: u16 {
        /// Allocated from scheduler tags (`RQF_SCHED_TAGS`).
        const SCHED_TAGS = 1 << 0;
        /// Goes through the elevator (`RQF_USE_SCHED`).
        const USE_SCHED = 1 << 1;
        /// The driver already prepared it; a requeue bypasses the elevator (`RQF_DONTPREP`).
        const DONTPREP = 1 << 2;
        /// The timeout handler has seen it (`RQF_TIMED_OUT`).
        const TIMED_OUT = 1 << 3;
        /// Allocated from the reserved pool.
        const RESERVED = 1 << 4;
        /// Holds a driver budget token.
        const BUDGET = 1 << 5;
        /// Part of a PREFLUSH/FUA sequence, or the flush request itself (`RQF_FLUSH_SEQ`):
        /// never merged, and its completion goes to the flush state machine (`flush.rs`).
        const FLUSH_SEQ = 1 << 6;
        /// A write to a sequential zone under zone write plugging: its end lets the zone's
        /// next plugged write go (`RQF_ZONE_WRITE_PLUGGING`, `queue/zoned.rs`).
        const ZONE_WRITE_PLUGGING = 1 << 7;
    }
}

/// A block request (`struct request`).
#[derive(Debug)]
pub struct Request {
    /// Its index in the request table.
    pub id: RqId,
    /// Driver tag, or `Tag::NONE` until dispatch when a scheduler is attached.
    pub tag: Tag,
    /// Scheduler tag (`internal_tag`), or `Tag::NONE` without a scheduler.
    pub internal_tag: Tag,
    /// Where it is in its life (`rq->state`).
    pub state: RqState,
    /// True from allocation until free. A tag handed out twice trips the assertion on this.
    pub allocated: bool,
    /// The operation.
    pub op: ReqOp,
    /// The bios' flags, unioned as they merge (`cmd_flags`).
    pub cmd_flags: ReqFlags,
    /// The block layer's own flags (`rq_flags`: `RQF_*`).
    pub rq_flags: RqFlags,
    /// Its I/O priority.
    pub ioprio: IoPrio,
    /// The issuer of its first bio.
    pub issuer: u32,
    /// Its group (cgroup id).
    pub group: u32,
    /// First sector.
    pub sector: u64,
    /// Length in sectors.
    pub nr_sectors: u32,
    /// Physical segments, as `max_segments` counts them (`nr_phys_segments`).
    pub nr_segments: u16,
    /// The software queue it was allocated from.
    pub ctx: CtxIdx,
    /// The hardware queue it goes to.
    pub hctx: HctxIdx,
    /// The thread that allocated it ([`crate::hctx::thread_number`]), which waits for its
    /// bios; 0 for the queue's own flush requests. A driver that completes it on another
    /// thread may have to wake that one. The kernel keeps the submitting CPU instead, in
    /// the request's software queue, and compares it with the completing CPU to decide on
    /// an IPI (`blk_mq_complete_need_ipi`, with `rq_affinity` set); our software queues
    /// are not tied to threads, so the request keeps the thread.
    pub submitter: u64,
    /// The merged bios in sector order.
    pub bios: Vec<Bio>,
    /// When it was allocated (`start_time_ns`).
    pub alloc_ns: Nanos,
    /// When it was inserted into the scheduler or a list.
    pub insert_ns: Nanos,
    /// When it was issued to the driver (`io_start_time_ns`).
    pub io_start_ns: Nanos,
    /// When the driver completed it.
    pub complete_ns: Nanos,
    /// Timeout deadline while in flight.
    pub deadline_ns: Nanos,
    /// How it ended.
    pub status: BlkStatus,
    /// The steps of its PREFLUSH/FUA sequence done so far (`rq->flush.seq`, `REQ_FSEQ_*`).
    pub flush_seq: u8,
}

impl Request {
    fn new(id: RqId) -> Request {
        Request {
            id,
            tag: Tag::NONE,
            internal_tag: Tag::NONE,
            state: RqState::Idle,
            allocated: false,
            op: ReqOp::Read,
            cmd_flags: ReqFlags::empty(),
            rq_flags: RqFlags::default(),
            ioprio: IoPrio::DEFAULT,
            issuer: 0,
            group: 0,
            sector: 0,
            nr_sectors: 0,
            nr_segments: 0,
            ctx: CtxIdx(0),
            hctx: HctxIdx(0),
            submitter: 0,
            bios: Vec::with_capacity(2),
            alloc_ns: Nanos::ZERO,
            insert_ns: Nanos::ZERO,
            io_start_ns: Nanos::ZERO,
            complete_ns: Nanos::ZERO,
            deadline_ns: Nanos::MAX,
            status: BlkStatus::Ok,
            flush_seq: 0,
        }
    }

    /// The sector after its last.
    pub fn end_sector(&self) -> u64 {
        self.sector + self.nr_sectors as u64
    }
    /// Its length in bytes.
    pub fn bytes(&self) -> u64 {
        (self.nr_sectors as u64) << SECTOR_SHIFT
    }
    /// `rq_mergeable`: flush, write-zeroes, requests with no-merge flags and requests in a
    /// flush sequence (`RQF_NOMERGE_FLAGS`) never merge.
    pub fn mergeable(&self) -> bool {
        !self.cmd_flags.intersects(ReqFlags::NOMERGE_FLAGS)
            && !self.rq_flags.contains(RqFlags::FLUSH_SEQ)
            && matches!(self.op, ReqOp::Read | ReqOp::Write | ReqOp::Discard)
    }
    /// True if the request is synchronous ([`crate::op_is_sync`]).
    pub fn is_sync(&self) -> bool {
        crate::op_is_sync(self.op, self.cmd_flags)
    }
    /// Starts a new life at `now` (`blk_mq_rq_ctx_init`): fresh timestamps, no deadline, no
    /// status, no flush steps done.
    #[inline]
    pub(crate) fn init_life(&mut self, now: Nanos) {
        self.alloc_ns = now;
        self.insert_ns = now;
        self.io_start_ns = Nanos::ZERO;
        self.complete_ns = Nanos::ZERO;
        self.deadline_ns = Nanos::MAX;
        self.status = BlkStatus::Ok;
        self.flush_seq = 0;
    }

    /// The snapshot elevator hooks receive.
    pub fn elv(&self) -> ElvRq {
        ElvRq {
            id: self.id,
            op: self.op,
            cmd_flags: self.cmd_flags,
            ioprio: self.ioprio,
            issuer: self.issuer,
            group: self.group,
            sector: self.sector,
            nr_sectors: self.nr_sectors,
            ctx: self.ctx,
            hctx: self.hctx,
            alloc_ns: self.alloc_ns,
            io_start_ns: self.io_start_ns,
            complete_ns: self.complete_ns,
        }
    }

    /// IDLE → IN_FLIGHT (`blk_mq_start_request`).
    pub(crate) fn start(&mut self, now: Nanos, timeout: Nanos) {
        assert!(self.allocated, "{:?}: started while not allocated", self.id);
        assert_eq!(self.state, RqState::Idle, "{:?}: started twice", self.id);
        self.state = RqState::InFlight;
        self.io_start_ns = now;
        self.deadline_ns = now.saturating_add(timeout);
        self.rq_flags.remove(RqFlags::TIMED_OUT);
    }

    /// IN_FLIGHT → IDLE, for a request the driver refused or asked to requeue.
    pub(crate) fn unstart(&mut self) {
        assert_eq!(
            self.state,
            RqState::InFlight,
            "{:?}: requeued while not in flight",
            self.id
        );
        self.state = RqState::Idle;
        self.deadline_ns = Nanos::MAX;
        self.rq_flags.remove(RqFlags::TIMED_OUT);
    }
}

/// What elevator hooks that run after the request lock is dropped get to see.
#[derive(Copy, Clone, Debug)]
pub struct ElvRq {
    /// As [`Request::id`].
    pub id: RqId,
    /// As [`Request::op`].
    pub op: ReqOp,
    /// As [`Request::cmd_flags`].
    pub cmd_flags: ReqFlags,
    /// As [`Request::ioprio`].
    pub ioprio: IoPrio,
    /// As [`Request::issuer`].
    pub issuer: u32,
    /// As [`Request::group`].
    pub group: u32,
    /// As [`Request::sector`].
    pub sector: u64,
    /// As [`Request::nr_sectors`].
    pub nr_sectors: u32,
    /// As [`Request::ctx`].
    pub ctx: CtxIdx,
    /// As [`Request::hctx`].
    pub hctx: HctxIdx,
    /// As [`Request::alloc_ns`].
    pub alloc_ns: Nanos,
    /// As [`Request::io_start_ns`].
    pub io_start_ns: Nanos,
    /// As [`Request::complete_ns`].
    pub complete_ns: Nanos,
}

/// The preallocated requests of a queue, indexed by [`RqId`].
///
/// Each slot has its own lock. Lock order: an elevator's lock, or a software queue's list
/// lock, may be held while taking a slot lock, never the reverse; the core never calls into
/// an elevator while holding a slot lock.
pub struct RequestTable {
    slots: Box<[CachePadded<Mutex<Request>>]>,
}

impl RequestTable {
    pub(crate) fn new(nr: u32) -> RequestTable {
        let slots = (0..nr)
            .map(|i| CachePadded::new(Mutex::new(Request::new(RqId(i)))))
            .collect();
        RequestTable { slots }
    }
    /// Requests in the table.
    pub fn len(&self) -> usize {
        self.slots.len()
    }
    /// True for a table of no requests.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    /// Locks one request. Panics on an id this table never issued (a programmer error).
    pub fn lock(&self, id: RqId) -> MutexGuard<'_, Request> {
        self.slots[id.index()].lock()
    }
    /// Every slot, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Mutex<Request>> {
        self.slots.iter().map(|s| &**s)
    }
}
