//! A device model as a real-time driver: the simulator's models serving real I/O paths
//! (`mqblk serve --driver=sim`, `mqblk bench --driver=sim`) with the wall clock as their time.
//!
//! Commands reach the model when `queue_rq` is called; completions are handed back by `poll`
//! once the clock has passed their finish time, like null_blk in timer mode but with the
//! model's service times. The model, its queues and the injected faults are the
//! [`ModelPort`] the simulator's driver stands on too. The model keeps no data: reads return whatever the buffer held
//! (zeroes for fresh buffers), as `null` does without `memory_backed`.

use crate::port::{Accept, DriverStats, Finished, ModelInfo, ModelPort};
use crate::{Cmd, DeviceModel};
use mqblk_core::{
    BlkStatus, CompletionBatch, Driver, EhReturn, FaultConfig, HctxIdx, Nanos, QueueRqs, ReqFlags,
    Request,
};
use parking_lot::Mutex;

struct State {
    port: ModelPort,
    finished: Vec<Finished>,
    /// Commands in the device, over all hardware queues (its `max_outstanding`).
    outstanding: u32,
}

pub struct RealtimeDriver {
    st: Mutex<State>,
    info: ModelInfo,
}

impl RealtimeDriver {
    /// The model behind a driver, with the drivers' fault injection.
    pub fn new(model: Box<dyn DeviceModel>, faults: &FaultConfig) -> RealtimeDriver {
        RealtimeDriver {
            info: ModelInfo::of(model.as_ref()),
            st: Mutex::new(State {
                port: ModelPort::new(model, faults),
                finished: Vec::new(),
                outstanding: 0,
            }),
        }
    }

    pub fn nr_hw_queues(&self) -> u16 {
        self.info.nr_hw_queues
    }

    pub fn queue_depth(&self) -> u32 {
        self.info.queue_depth
    }

    /// The model's queue limits ([`crate::DeviceModel::queue_limits`]).
    pub fn queue_limits(&self) -> mqblk_core::QueueLimits {
        self.info.limits
    }

    /// What the driver saw, faults included.
    pub fn stats(&self) -> DriverStats {
        self.st.lock().port.stats.clone()
    }

    /// Lets the model run to `now` and raises what finished.
    fn advance(st: &mut State, now: Nanos) {
        let mut finished = std::mem::take(&mut st.finished);
        finished.clear();
        st.port.advance(now, &mut finished);
        for &f in &finished {
            st.port.raise(f);
        }
        st.finished = finished;
    }
}

impl Driver for RealtimeDriver {
    fn name(&self) -> &'static str {
        self.info.name
    }
    fn report_zones(&self, sector: u64, nr: usize) -> Option<Vec<mqblk_core::zoned::Zone>> {
        self.st.lock().port.model.report_zones(sector, nr)
    }
    fn capacity_sectors(&self) -> u64 {
        self.info.capacity_sectors
    }
    fn rotational(&self) -> bool {
        self.info.rotational
    }
    fn write_cache(&self) -> bool {
        self.info.write_cache
    }
    fn fua(&self) -> bool {
        self.info.fua
    }

    fn queue_rq(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        _last: bool,
        now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus {
        let mut st = self.st.lock();
        if st.outstanding >= self.info.max_outstanding {
            // The device is full: a completion on this queue re-runs it, else retry later.
            return st.port.busy(hctx.0);
        }
        match st.port.accept(hctx.0, rq.id, u32::from(rq.nr_segments)) {
            Accept::Refuse => return BlkStatus::Resource,
            // The ring is full: a completion on this queue frees room and re-runs it.
            Accept::NoRoom => return st.port.no_room(hctx.0, done),
            Accept::Lose => return BlkStatus::Ok,
            Accept::Requeue => {
                done.requeue(rq.id);
                return BlkStatus::Ok;
            }
            Accept::Take => {}
        }
        Self::advance(&mut st, now);
        st.port.deliver(
            hctx.0,
            Cmd {
                id: rq.id.0 as u64,
                op: rq.op,
                sector: rq.sector,
                nr_sectors: rq.nr_sectors,
                fua: rq.cmd_flags.contains(ReqFlags::FUA),
                group: rq.group,
            },
            now,
        );
        st.outstanding += 1;
        BlkStatus::Ok
    }

    fn poll(&self, hctx: HctxIdx, now: Nanos, done: &mut CompletionBatch) -> usize {
        let mut st = self.st.lock();
        Self::advance(&mut st, now);
        let n = st.port.poll(hctx.0, done);
        st.outstanding -= n as u32;
        n
    }

    fn timeout(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> EhReturn {
        if self.st.lock().port.timeout(hctx.0, rq.id, done) {
            EhReturn::Done
        } else {
            EhReturn::ResetTimer
        }
    }

    fn next_event(&self, _hctx: HctxIdx) -> Option<Nanos> {
        self.st.lock().port.model.next_event()
    }

    fn queue_rqs(&self) -> QueueRqs {
        self.info.queue_rqs
    }

    fn holds_requests(&self, hctx: HctxIdx) -> bool {
        self.st.lock().port.inflight(hctx.0) > 0
    }

    fn inflight(&self, hctx: HctxIdx) -> usize {
        self.st.lock().port.inflight(hctx.0) as usize
    }
}
