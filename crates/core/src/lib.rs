//! mqblk-core: the Linux multi-queue block layer (blk-mq) re-created as a sans-I/O library.
//!
//! Frontends submit [`Bio`]s through a [`RequestQueue`] with a [`Submitter`] (one per
//! submitting thread, owning a software queue [`Ctx`]). The queue plugs, merges, allocates
//! [`Request`]s from lock-free tag maps ([`tag`]), hands them to an [`Elevator`] or straight to
//! hardware contexts ([`Hctx`]), and issues them to a [`Driver`]. Completions come back as
//! bios on the submitter's `done` list.
//!
//! Nothing here reads a clock, sleeps, spawns or does I/O: time is a [`Nanos`] argument, and
//! the runtime (threads, or the simulator) decides who calls what and when.

#![warn(missing_docs)]

pub mod bio;
pub mod blkcg;
pub mod cpumap;
pub mod ctx;
mod dispatch;
pub mod driver;
pub mod elevator;
pub mod fault;
pub mod hctx;
pub mod merge;
pub mod plug;
pub mod queue;
pub mod request;
pub mod status;
// Implements a raw lock: the crate's one module with `unsafe`.
#[allow(unsafe_code)]
pub mod sync;
pub mod tag;
pub mod time;
pub mod trace;
pub mod zoned;

pub use bio::{
    op_is_sync, Bio, BufHome, BvecLayout, HomePages, IoBuf, IoPrio, IoPrioClass, LentPages, Page,
    ReqFlags, ReqOp, SpareBufs, PAGE_BYTES, SECTOR_SHIFT, SECTOR_SIZE,
};
pub use blkcg::{Blkcg, BlkcgError, GroupInfo};
pub use cpumap::{HctxType, QueueMap};
pub use ctx::Ctx;
pub use driver::{CompletionBatch, Driver, EhReturn, Extent, IrqMode, QueueRqs, MAX_EXTENTS};
pub use elevator::{
    BioMerge, Elevator, ElevatorInit, ElevatorType, ElvCost, ElvCtx, ElvFeatures, HctxQueued,
    LockScope, TunableAlias, TunableDesc, TunableError, Tunables,
};
pub use fault::{FaultConfig, FaultError, FaultInjector, FaultSpec, Injected};
pub use hctx::Hctx;
pub use merge::{ElvMerge, NoMerges, QueueLimits};
pub use plug::Plug;
pub use queue::{
    ElevatorRef, FreezeError, QueueConfig, QueueError, RequestQueue, RequestsRef, Submit,
    Submitter, FLUSH_PENDING_TIMEOUT, MAX_SCHED_RQ, MIN_RQ,
};
pub use request::{ElvRq, Request, RequestTable, RqFlags, RqId, RqState, Tag};
pub use status::BlkStatus;
pub use tag::{MapQueues, TagSet, TagSetConfig, TagSetError, TagSetFlags, Tags};
pub use time::{Clock, Nanos};
pub use trace::{TraceAction, TraceEvent, TraceHook, Tracer};
pub use zoned::{
    Zone, ZoneCond, ZoneFault, ZoneMgmt, ZoneType, ZonedConfigError, ZonedDev, ZonedDevConfig,
    ZonedLimits,
};

/// Index of a software queue (a submitting CPU or thread).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CtxIdx(pub u16);

/// Index of a hardware queue.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HctxIdx(pub u16);
