//! Request events, for blktrace-style tracing and for the simulator's CPU cost model.
//!
//! The core reports what happens to bios and requests at the points where the kernel's block
//! tracepoints fire (`trace_block_bio_queue`, `trace_block_rq_insert`, `..._issue`,
//! `..._complete`, `..._requeue`, the merge and getrq events). A [`Tracer`] set in
//! [`crate::QueueConfig::tracer`] receives each one synchronously, on the thread that caused
//! it. With no tracer the cost is one branch per event site.

use crate::bio::{Bio, ReqFlags, ReqOp};
use crate::request::{Request, RqFlags, RqId};
use crate::status::BlkStatus;
use crate::{CtxIdx, HctxIdx, Nanos};
use std::sync::Arc;

/// What happened. The letters are blktrace's action codes; [`TraceAction::Run`] has none
/// (blktrace does not record queue runs) and exists for cost models.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceAction {
    /// `Q`: a bio entered the queue.
    Queue,
    /// `M`: a bio merged at the back of a request.
    BackMerge,
    /// `F`: a bio merged at the front of a request.
    FrontMerge,
    /// `G`: a request was allocated for a bio.
    GetRq,
    /// `I`: a request was inserted into the scheduler or a software queue.
    Insert,
    /// `D`: a request was issued to the driver.
    Issue,
    /// `C`: a request completed.
    Complete,
    /// `R`: a request came back to be issued again (driver busy, or a requeue).
    Requeue,
    /// A hardware queue run (one pass of `sched_dispatch_requests`); `sector` is 0.
    Run,
}

impl TraceAction {
    /// blktrace's one-letter code (`-` for [`TraceAction::Run`]).
    pub fn letter(self) -> char {
        match self {
            TraceAction::Queue => 'Q',
            TraceAction::BackMerge => 'M',
            TraceAction::FrontMerge => 'F',
            TraceAction::GetRq => 'G',
            TraceAction::Insert => 'I',
            TraceAction::Issue => 'D',
            TraceAction::Complete => 'C',
            TraceAction::Requeue => 'R',
            TraceAction::Run => '-',
        }
    }
}

/// One event. Bio events (`Q`, `M`, `F`) carry the bio's range; request events the
/// request's, which grows as bios merge into it.
#[derive(Copy, Clone, Debug)]
pub struct TraceEvent {
    /// What happened (`Q`, `G`, `I`, `D`, `C`, ...).
    pub action: TraceAction,
    /// When.
    pub time: Nanos,
    /// The operation.
    pub op: ReqOp,
    /// Its flags.
    pub flags: ReqFlags,
    /// First sector.
    pub sector: u64,
    /// Length in sectors.
    pub nr_sectors: u32,
    /// The issuer (process) id of the bio or of the request's first bio.
    pub issuer: u32,
    /// The software queue the bio was submitted from.
    pub ctx: CtxIdx,
    /// The hardware queue, where one is known (request events).
    pub hctx: Option<HctxIdx>,
    /// The request, for request events.
    pub rq: Option<RqId>,
    /// The request goes through the elevator.
    pub sched: bool,
    /// For `C`: the outcome.
    pub status: BlkStatus,
}

impl TraceEvent {
    pub(crate) fn of_bio(action: TraceAction, bio: &Bio, ctx: CtxIdx, now: Nanos) -> TraceEvent {
        TraceEvent {
            action,
            time: now,
            op: bio.op,
            flags: bio.flags,
            sector: bio.sector,
            nr_sectors: bio.nr_sectors,
            issuer: bio.issuer,
            ctx,
            hctx: None,
            rq: None,
            sched: false,
            status: BlkStatus::Ok,
        }
    }

    /// Event `action` of request `rq` at `now`.
    pub fn of_rq(action: TraceAction, rq: &Request, now: Nanos) -> TraceEvent {
        TraceEvent {
            action,
            time: now,
            op: rq.op,
            flags: rq.cmd_flags,
            sector: rq.sector,
            nr_sectors: rq.nr_sectors,
            issuer: rq.issuer,
            ctx: rq.ctx,
            hctx: Some(rq.hctx),
            rq: Some(rq.id),
            sched: rq.rq_flags.contains(RqFlags::USE_SCHED),
            status: rq.status,
        }
    }

    pub(crate) fn run(h: HctxIdx, now: Nanos) -> TraceEvent {
        TraceEvent {
            action: TraceAction::Run,
            time: now,
            op: ReqOp::Read,
            flags: ReqFlags::empty(),
            sector: 0,
            nr_sectors: 0,
            issuer: 0,
            ctx: CtxIdx(0),
            hctx: Some(h),
            rq: None,
            sched: false,
            status: BlkStatus::Ok,
        }
    }
}

/// Receives the queue's events. Called inline on the hot path: keep it short.
pub trait Tracer: Send + Sync {
    /// Called with each event as it happens.
    fn event(&self, ev: &TraceEvent);
    /// A request's event (getrq, insert, issue, complete, requeue): by default the whole
    /// [`TraceEvent`] made from the request and handed to [`Tracer::event`]; a tracer that
    /// needs less of it reads the request itself (the simulator's cost log, several of
    /// these per request).
    #[inline]
    fn rq_event(&self, action: TraceAction, rq: &Request, now: Nanos) {
        self.event(&TraceEvent::of_rq(action, rq, now));
    }
}

/// The tracer slot of a [`crate::QueueConfig`] (an `Arc` so configurations stay `Clone`).
#[derive(Clone, Default)]
pub struct TraceHook(pub Option<Arc<dyn Tracer>>);

impl TraceHook {
    /// A slot holding tracer `t`.
    pub fn new(t: Arc<dyn Tracer>) -> TraceHook {
        TraceHook(Some(t))
    }
    #[inline]
    pub(crate) fn get(&self) -> Option<&dyn Tracer> {
        self.0.as_deref()
    }
}

impl std::fmt::Debug for TraceHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Some(tracer)"
        } else {
            "None"
        })
    }
}
