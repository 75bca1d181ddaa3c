//! A device model as a real-time driver: the simulator's models serving real I/O paths
//! (`mqblk serve --driver=sim`, `mqblk bench --driver=sim`) with the wall clock as their time.
//!
//! Commands reach the model when `queue_rq` is called; completions are handed back by `poll`
//! once the clock has passed their finish time, like null_blk in timer mode but with the
//! model's service times. The model keeps no data: reads return whatever the buffer held
//! (zeroes for fresh buffers), as `null` does without `memory_backed`.

use crate::Cmd;
use crate::{DevCompletion, DeviceModel};
use mqblk_core::{BlkStatus, CompletionBatch, Driver, HctxIdx, Nanos, ReqFlags, Request, RqId};
use parking_lot::Mutex;

struct State {
    model: Box<dyn DeviceModel>,
    /// Completions the model has produced, per hardware queue, not yet polled.
    ready: Vec<Vec<(RqId, BlkStatus)>>,
    scratch: Vec<DevCompletion>,
    inflight: Vec<u32>,
    outstanding: u32,
}

pub struct RealtimeDriver {
    st: Mutex<State>,
    name: &'static str,
    capacity: u64,
    rotational: bool,
    nr_hw: u16,
    depth: u32,
    max_outstanding: u32,
}

impl RealtimeDriver {
    pub fn new(model: Box<dyn DeviceModel>) -> RealtimeDriver {
        let nr_hw = model.nr_hw_queues();
        RealtimeDriver {
            name: model.name(),
            capacity: model.capacity_sectors(),
            rotational: model.rotational(),
            depth: model.queue_depth(),
            max_outstanding: model.max_outstanding().max(1),
            nr_hw,
            st: Mutex::new(State {
                model,
                ready: vec![Vec::new(); nr_hw as usize],
                scratch: Vec::new(),
                inflight: vec![0; nr_hw as usize],
                outstanding: 0,
            }),
        }
    }

    pub fn nr_hw_queues(&self) -> u16 {
        self.nr_hw
    }

    pub fn queue_depth(&self) -> u32 {
        self.depth
    }

    fn advance(st: &mut State, now: Nanos) {
        let mut scratch = std::mem::take(&mut st.scratch);
        scratch.clear();
        st.model.advance(now, &mut scratch);
        for c in &scratch {
            st.ready[c.hw as usize].push((RqId(c.id as u32), c.status));
        }
        st.scratch = scratch;
    }
}

impl Driver for RealtimeDriver {
    fn name(&self) -> &'static str {
        self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
    fn rotational(&self) -> bool {
        self.rotational
    }

    fn queue_rq(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        _last: bool,
        now: Nanos,
        _done: &mut CompletionBatch,
    ) -> BlkStatus {
        let mut st = self.st.lock();
        let h = hctx.0 as usize;
        if st.outstanding >= self.max_outstanding {
            // The device is full: a completion on this queue re-runs it, else retry later.
            return if st.inflight[h] > 0 {
                BlkStatus::DevResource
            } else {
                BlkStatus::Resource
            };
        }
        Self::advance(&mut st, now);
        st.model.submit(
            hctx.0,
            Cmd {
                id: rq.id.0 as u64,
                op: rq.op,
                sector: rq.sector,
                nr_sectors: rq.nr_sectors,
                fua: rq.cmd_flags.contains(ReqFlags::FUA),
            },
            now,
        );
        st.inflight[h] += 1;
        st.outstanding += 1;
        BlkStatus::Ok
    }

    fn poll(&self, hctx: HctxIdx, now: Nanos, done: &mut CompletionBatch) -> usize {
        let mut st = self.st.lock();
        Self::advance(&mut st, now);
        let h = hctx.0 as usize;
        let ready = std::mem::take(&mut st.ready[h]);
        let n = ready.len();
        for &(id, status) in &ready {
            done.complete(id, status);
        }
        st.inflight[h] -= n as u32;
        st.outstanding -= n as u32;
        let mut ready = ready;
        ready.clear();
        st.ready[h] = ready;
        n
    }

    fn next_event(&self, _hctx: HctxIdx) -> Option<Nanos> {
        self.st.lock().model.next_event()
    }

    fn inflight(&self, hctx: HctxIdx) -> usize {
        self.st.lock().inflight[hctx.0 as usize] as usize
    }
}
