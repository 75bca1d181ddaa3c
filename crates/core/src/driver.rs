//! The driver interface, shaped like the kernel's `struct blk_mq_ops`.
//!
//! A driver owns its hardware queues and is called through `&self` from any thread running a
//! hardware queue; it keeps per-hctx state behind its own per-hctx locks. It never calls back
//! into the queue: completions it can give at once (and requests it wants requeued) go into
//! the [`CompletionBatch`] it is handed, and the core processes them after `queue_rq` returns.

use crate::request::{Request, RqId};
use crate::status::BlkStatus;
use crate::{HctxIdx, Nanos};

/// Completions and requeues gathered from a driver, processed by the core in one batch.
#[derive(Debug, Default)]
pub struct CompletionBatch {
    pub(crate) done: Vec<(RqId, BlkStatus)>,
    pub(crate) requeue: Vec<RqId>,
    /// `queue_rq` stopped the hardware queue it was called for.
    pub(crate) stop: bool,
    /// Start every stopped hardware queue once the batch is processed.
    pub(crate) start_stopped: bool,
}

impl CompletionBatch {
    /// An empty batch.
    pub fn new() -> CompletionBatch {
        CompletionBatch {
            done: Vec::with_capacity(64),
            requeue: Vec::new(),
            stop: false,
            start_stopped: false,
        }
    }
    /// The request finished with `status` (`blk_mq_complete_request`).
    pub fn complete(&mut self, id: RqId, status: BlkStatus) {
        self.done.push((id, status));
    }
    /// The requests finished so far in this batch, in order, with their status.
    pub fn finished(&self) -> &[(RqId, BlkStatus)] {
        &self.done
    }
    /// The driver gives the request back to be issued again (`blk_mq_requeue_request`).
    pub fn requeue(&mut self, id: RqId) {
        self.requeue.push(id);
    }
    /// From `queue_rq`: stop the hardware queue it was called for (`blk_mq_stop_hw_queue`,
    /// as `virtio_queue_rq` does when the ring is full). Its runs dispatch nothing until a
    /// batch with [`CompletionBatch::start_stopped_queues`] is processed; the request that
    /// found no room waits on the dispatch list, and new ones on their software queues.
    pub fn stop_queue(&mut self) {
        self.stop = true;
    }
    /// Start and run every stopped hardware queue once this batch is processed
    /// (`blk_mq_start_stopped_hw_queues(q, true)`, as `virtblk_done` does after every
    /// interrupt that completed something).
    pub fn start_stopped_queues(&mut self) {
        self.start_stopped = true;
    }
    /// Requests in the batch, finished and requeued.
    pub fn len(&self) -> usize {
        self.done.len() + self.requeue.len()
    }
    /// True when the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty() && self.requeue.is_empty()
    }
}

/// How a driver takes the requests of a plug (whether it has `blk_mq_ops.queue_rqs`, and
/// what that does with a request the device has no room for).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum QueueRqs {
    /// No `queue_rqs`: the core issues them one by one through `queue_rq`
    /// (`blk_mq_issue_direct`), and the first the device turns away waits on the dispatch
    /// list with those after it.
    #[default]
    OneByOne,
    /// A `queue_rqs` that requeues each request the device has no room for and goes on with
    /// the rest (virtio-blk's `virtio_queue_rqs`: `virtblk_add_req_batch` calls
    /// `blk_mq_requeue_request` for each that does not fit the ring and never stops the
    /// queue). A requeued request waits on its software queue, where later bios can merge
    /// into it (`blk_mq_requeue_work` inserts it at the head).
    RequeueBusy,
}

/// One run of a device's allocation map, as `SEEK_DATA`/`SEEK_HOLE` or NBD's
/// `base:allocation` describe it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Its length in sectors.
    pub sectors: u64,
    /// Not allocated: writing may need space.
    pub hole: bool,
    /// Reads as zeroes.
    pub zero: bool,
}

/// The most extents a driver's [`Driver::block_status`] answer carries; the caller asks again
/// from where it ends.
pub const MAX_EXTENTS: usize = 1024;

/// What a driver's timeout handler decided (`enum blk_eh_timer_return`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EhReturn {
    /// The driver completed the request (into the batch) or will complete it.
    Done,
    /// Give the request another full timeout.
    ResetTimer,
}

/// How a device hands completions back (null_blk's `irqmode`): shared by the null driver
/// and the job option that configures it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum IrqMode {
    /// Complete inside `queue_rq`. This is our default, unlike the kernel's (softirq): in
    /// userspace there is no interrupt to model unless asked for, and inline completion is
    /// the cheapest path, which is what a null device is for.
    #[default]
    None,
    /// Queue the completion on the hardware queue; whoever polls that queue completes it,
    /// as the softirq or IPI that follows an interrupt would.
    Softirq,
    /// Complete `completion_nsec` after the request was issued, when the hardware queue is
    /// polled at or after that time.
    Timer,
}

impl IrqMode {
    /// The option value that selects this mode.
    pub fn name(self) -> &'static str {
        match self {
            IrqMode::None => "none",
            IrqMode::Softirq => "softirq",
            IrqMode::Timer => "timer",
        }
    }
}

/// A block driver (`struct blk_mq_ops`): what the queue calls to issue requests, and what it asks of the device. Every method is called through `&self` from any thread; a driver keeps its own per-hardware-queue locks, finishes requests into the [`CompletionBatch`] it is handed and never calls back into the queue.
pub trait Driver: Send + Sync {
    /// The driver's name in reports (`null`, `uring`, the model's name).
    fn name(&self) -> &'static str;

    /// Device capacity in 512-byte sectors.
    fn capacity_sectors(&self) -> u64;

    /// True for a rotational device (schedulers such as BFQ tune themselves by it).
    fn rotational(&self) -> bool {
        false
    }

    /// True if the device has a volatile write cache that a flush writes back
    /// (`BLK_FEAT_WRITE_CACHE`). Without one the block layer drops `PREFLUSH` and `FUA`, and
    /// completes empty flushes itself (`submit_bio_noacct`); the kernel's default is none.
    fn write_cache(&self) -> bool {
        false
    }

    /// True if the device honours `FUA` on writes itself (`BLK_FEAT_FUA`); otherwise the block
    /// layer follows each FUA write with a flush (`blk-flush.c`'s POSTFLUSH step).
    fn fua(&self) -> bool {
        false
    }

    /// Set up hardware queue `hctx` with `nr_tags` driver tags (`init_hctx`).
    fn init_hctx(&self, _hctx: HctxIdx, _nr_tags: u32) {}

    /// Issue one started request (`queue_rq`). `last` says no more requests follow in this
    /// batch, so the doorbell can be rung. `Resource`/`DevResource` mean "not now": the
    /// request comes back to the core untouched. Any other non-`Ok` status ends it with that
    /// error. A driver that finishes the request at once pushes it to `done`.
    fn queue_rq(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        last: bool,
        now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus;

    /// How the driver takes a plug's requests (`queue_rqs`); the core calls `queue_rq` for
    /// each either way, and this says what a `Resource`/`DevResource` answer then means.
    fn queue_rqs(&self) -> QueueRqs {
        QueueRqs::OneByOne
    }

    /// True while the device holds requests of `hctx` whose completion will start stopped
    /// queues ([`CompletionBatch::start_stopped_queues`]). The core asks after stopping a
    /// queue for a driver that asked it to: with nothing held, nothing would start it
    /// again, so it starts it at once. (virtio-blk stops and starts its queue under the
    /// virtqueue's lock, which closes that window in the kernel.)
    fn holds_requests(&self, _hctx: HctxIdx) -> bool {
        false
    }

    /// Ring the doorbell for requests queued with `last == false` (`commit_rqs`).
    fn commit_rqs(&self, _hctx: HctxIdx) {}

    /// Device-level admission (`get_budget`); `false` means "try later".
    fn get_budget(&self, _hctx: HctxIdx) -> bool {
        true
    }
    /// Gives back a budget [`Driver::get_budget`] granted (`put_budget`).
    fn put_budget(&self, _hctx: HctxIdx) {}

    /// A request exceeded its timeout (`timeout`). The default re-arms the timer, as the
    /// kernel does for drivers without a handler.
    fn timeout(
        &self,
        _hctx: HctxIdx,
        _rq: &mut Request,
        _now: Nanos,
        _done: &mut CompletionBatch,
    ) -> EhReturn {
        EhReturn::ResetTimer
    }

    /// Reap finished requests of `hctx` (`poll`, and the interrupt handler's work).
    fn poll(&self, _hctx: HctxIdx, _now: Nanos, _done: &mut CompletionBatch) -> usize {
        0
    }

    /// When `poll` will next have something for `hctx` (timer-driven completions).
    fn next_event(&self, _hctx: HctxIdx) -> Option<Nanos> {
        None
    }

    /// Blocks the calling thread until `poll` of `hctx` may find something, `woken` turns
    /// true, or `max` passed; returns whether it slept (if not, the caller yields). Only
    /// runtimes call this, never the core: it is how a submitter sleeps until the
    /// "interrupt" instead of spinning against the threads the device needs (io_uring's
    /// kernel workers). A completion of the thread's may also be reaped by another thread
    /// and handed to its software queue (`Ctx::has_remote`): `woken` says whether that
    /// happened, and a driver that sleeps must ask it after it has made itself wakeable by
    /// [`Driver::wake_submitter`], so a hand-over between the caller's last look and its
    /// sleep is not slept through. `max`, if given, is when the caller has work of its own
    /// (the end of a think time); without it a driver may still bound a sleep that nothing
    /// it knows of will end. The default does not sleep.
    fn wait(
        &self,
        _hctx: HctxIdx,
        _woken: &dyn Fn() -> bool,
        _max: Option<std::time::Duration>,
    ) -> bool {
        false
    }

    /// Another thread reaped a request of `submitter`'s (a [`crate::hctx::thread_number`])
    /// and handed its bios to that thread's software queue: wake it if it sleeps in
    /// [`Driver::wait`]. The kernel interrupts the submitting CPU for a remote completion
    /// (`blk_mq_complete_send_ipi`); io_uring posts a task's completion as task work that
    /// wakes it. The default does nothing (its `wait` does not sleep).
    fn wake_submitter(&self, _submitter: u64) {}

    /// The allocation of the `nr_sectors` from `sector`: runs from `sector` on, at least one,
    /// at most [`MAX_EXTENTS`], adjacent runs of the same kind joined; they may cover less than
    /// asked. `None` when the driver cannot tell (callers then report data). It may enter the
    /// kernel (`lseek`), so the sans-I/O core never calls it.
    fn block_status(&self, _sector: u64, _nr_sectors: u64) -> Option<Vec<Extent>> {
        None
    }

    /// Up to `nr` zones from the one holding `sector` (`report_zones`), for a zoned device;
    /// `None` for a regular one. A zoned driver also declares its zones in its queue
    /// limits ([`crate::QueueLimits::zoned`]).
    fn report_zones(&self, _sector: u64, _nr: usize) -> Option<Vec<crate::zoned::Zone>> {
        None
    }

    /// Requests issued to `hctx` and not yet handed back, of those the calling thread's
    /// `poll` reaps (all of them, for a driver whose queues any thread may reap).
    fn inflight(&self, _hctx: HctxIdx) -> usize {
        0
    }

    /// Requests in flight on `hctx` that only the calling thread can bring back, because
    /// the device completes them only when that thread asks (an io_uring a thread owns). A
    /// thread that issued any must keep polling `hctx` until none is left before it ends
    /// (`SubmitterHandle::retire` in the runtime). The default: none.
    fn inflight_owned(&self, _hctx: HctxIdx) -> usize {
        0
    }
}
