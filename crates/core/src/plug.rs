//! `Plug`: a submitter's private batch of requests (`struct blk_plug`).
//!
//! While a plug is started, new requests collect here instead of going to the queue, so
//! they can be merged cheaply with the last one and issued in one batch with a single
//! doorbell. The plug is flushed at `BLK_MAX_REQUEST_COUNT` requests (doubled when it spans
//! several hardware queues), when a request of at least `BLK_PLUG_FLUSH_SIZE` bytes is added,
//! or when the submitter finishes the plug (the kernel also flushes when the task sleeps;
//! a submitter here calls `finish_plug` before it waits).

use crate::request::RqId;
use crate::HctxIdx;

/// `BLK_MAX_REQUEST_COUNT`.
pub const MAX_REQUEST_COUNT: usize = 32;
/// `BLK_PLUG_FLUSH_SIZE`: 128 KiB.
pub const PLUG_FLUSH_SIZE: u64 = 128 * 1024;

/// A submitter's plug (`struct blk_plug`): requests held back while it is started, so bios merge in it and leave together at the flush (`blk_finish_plug`).
#[derive(Debug, Default)]
pub struct Plug {
    started: bool,
    pub(crate) list: Vec<(RqId, HctxIdx)>,
    /// The hardware queue of the first request, to notice a plug spanning several.
    first_hctx: Option<HctxIdx>,
    pub(crate) multiple_queues: bool,
    pub(crate) has_elevator: bool,
}

impl Plug {
    /// An empty plug, not started.
    pub fn new() -> Plug {
        Plug {
            list: Vec::with_capacity(2 * MAX_REQUEST_COUNT),
            ..Default::default()
        }
    }
    /// `blk_start_plug`.
    pub fn start(&mut self) {
        self.started = true;
    }
    /// True between `blk_start_plug` and the plug's flush.
    pub fn is_started(&self) -> bool {
        self.started
    }
    pub(crate) fn stop(&mut self) {
        self.started = false;
    }
    /// Requests held.
    pub fn len(&self) -> usize {
        self.list.len()
    }
    /// True when it holds no request.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    pub(crate) fn last(&self) -> Option<RqId> {
        self.list.last().map(|&(id, _)| id)
    }

    /// Adds a request and reports whether the plug should now be flushed.
    pub(crate) fn add(&mut self, id: RqId, hctx: HctxIdx, bytes: u64, mergeable: bool) -> bool {
        match self.first_hctx {
            None => self.first_hctx = Some(hctx),
            Some(h) if h != hctx => self.multiple_queues = true,
            Some(_) => {}
        }
        self.list.push((id, hctx));
        let limit = if self.multiple_queues {
            2 * MAX_REQUEST_COUNT
        } else {
            MAX_REQUEST_COUNT
        };
        self.list.len() >= limit || (mergeable && bytes >= PLUG_FLUSH_SIZE)
    }

    /// Empties the plug into `out`, in submission order.
    pub(crate) fn take(&mut self, out: &mut Vec<(RqId, HctxIdx)>) {
        out.append(&mut self.list);
        self.first_hctx = None;
        self.multiple_queues = false;
    }
}
