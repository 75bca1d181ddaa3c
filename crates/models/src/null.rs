//! `null`: every command takes a fixed time, any number at once (null_blk in timer mode).
//!
//! Parameters: `submit_queues` (hardware queues, default 1), `hw_queue_depth` (default 64),
//! `completion_nsec` (default 10000, null_blk's default timer), `size` (bytes, default 1 GiB;
//! null_blk's `gb=250` would only slow nothing down and hide range bugs), `cache_size` (MiB,
//! default 0: non-zero declares a write cache that honours FUA, so flushes reach the device),
//! `rotational` (0: the flag the queue reports to schedulers, as `/sys/block/DEV/queue/
//! rotational`, which a user may set on null_blk or scsi_debug; nothing else changes),
//! `flush_nsec` (unset: a flush is a command like any other, as null_blk's timer makes it):
//! how long a cache flush takes when something was written since the last one; one with
//! nothing written since completes at once. scsi_debug does this (`resp_sync_cache`
//! answers at once without `write_since_sync`; with it, `scsi_debug_queuecommand` hands
//! `schedule_resp` a twentieth of START STOP UNIT's second for SYNCHRONIZE CACHE,
//! `F_SYNC_DELAY`, `mult_frac(USER_HZ, HZ, 20 * USER_HZ)` jiffies: 12 at HZ=250, 48 ms,
//! whenever `ndelay` is above 10 us), which the kernel twins' guests measure (a flush's
//! queue-to-completion time 48.9 ms in `testdata/traces/dbench1-ext4-tcg`, 53.1 in
//! `dbench1-xfs-tcg`).

use crate::ModelError;
use crate::SimRng;
use crate::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use mqblk_core::{BlkStatus, Nanos, ReqOp};
use std::collections::VecDeque;

pub struct NullModel {
    nr_hw: u16,
    depth: u32,
    latency: u64,
    /// `flush_nsec`, if given.
    flush_latency: Option<u64>,
    /// A write came since the last flush (scsi_debug's `write_since_sync`).
    written: bool,
    capacity: u64,
    /// (finish time, hw, id) in finish order, ties in arrival order. Every command takes
    /// the same time, so arrivals in time order only ever append; one that arrives with an
    /// earlier clock reading (threads racing in real time) is put in its place.
    pending: VecDeque<(u64, u16, u64)>,
    completed: u64,
    cache: bool,
    rotational: bool,
}

impl NullModel {
    pub fn new(nr_hw: u16, depth: u32, latency: Nanos, capacity_bytes: u64) -> NullModel {
        NullModel {
            nr_hw: nr_hw.max(1),
            depth: depth.max(1),
            latency: latency.0,
            flush_latency: None,
            written: false,
            capacity: capacity_bytes / 512,
            pending: VecDeque::new(),
            completed: 0,
            cache: false,
            rotational: false,
        }
    }

    pub fn from_params(p: &mut Params<'_>, _rng: SimRng) -> Result<NullModel, ModelError> {
        let nr_hw = p.u64("submit_queues", 1)?;
        if !(1..=1024).contains(&nr_hw) {
            return Err(ModelError::Invalid(format!(
                "device null: submit_queues={nr_hw}: must be 1..=1024"
            )));
        }
        let depth = p.u64("hw_queue_depth", 64)?;
        if !(1..=4096).contains(&depth) {
            return Err(ModelError::Invalid(format!(
                "device null: hw_queue_depth={depth}: must be 1..=4096"
            )));
        }
        let lat = p.u64("completion_nsec", 10_000)?;
        let size = p.u64("size", 1 << 30)?;
        // As the null driver: any non-zero multiple of its 512-byte block.
        if size == 0 || size % 512 != 0 {
            return Err(ModelError::Invalid(format!(
                "device null: size={size}: must be a non-zero multiple of 512"
            )));
        }
        let mut m = NullModel::new(nr_hw as u16, depth as u32, Nanos(lat), size);
        m.cache = p.u64("cache_size", 0)? > 0;
        m.rotational = p.bool("rotational", false)?;
        m.flush_latency = p.opt_u64("flush_nsec")?;
        Ok(m)
    }
}

impl DeviceModel for NullModel {
    fn name(&self) -> &'static str {
        "null"
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
    fn rotational(&self) -> bool {
        self.rotational
    }
    fn write_cache(&self) -> bool {
        self.cache
    }
    fn fua(&self) -> bool {
        self.cache
    }
    fn nr_hw_queues(&self) -> u16 {
        self.nr_hw
    }
    fn queue_depth(&self) -> u32 {
        self.depth
    }
    fn driver_cost(&self) -> DriverCost {
        DriverCost {
            queue_rq_ns: 30,
            doorbell_ns: 0,
            irq_ns: 100,
            hw_lock: false,
            lock_waiter_ns: 0,
            completions: crate::CompletionCpu::Mapped,
            complete_ns: 0,
            worker_wake_ns: 0,
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        self.written |= cmd.op != ReqOp::Flush && cmd.op.is_write();
        let latency = match (cmd.op, self.flush_latency) {
            (ReqOp::Flush, Some(f)) => {
                if std::mem::take(&mut self.written) {
                    f
                } else {
                    0
                }
            }
            _ => self.latency,
        };
        let done = now.0 + latency;
        if self.pending.back().is_none_or(|b| b.0 <= done) {
            self.pending.push_back((done, hw, cmd.id));
        } else {
            let at = self.pending.partition_point(|p| p.0 <= done);
            self.pending.insert(at, (done, hw, cmd.id));
        }
    }
    fn next_event(&self) -> Option<Nanos> {
        self.pending.front().map(|p| Nanos(p.0))
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        while let Some(&(t, hw, id)) = self.pending.front() {
            if t > now.0 {
                break;
            }
            self.pending.pop_front();
            self.completed += 1;
            out.push(DevCompletion {
                hw,
                id,
                status: BlkStatus::Ok,
            });
        }
    }
    fn outstanding(&self) -> u32 {
        self.pending.len() as u32
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("completed", self.completed)]
    }
}
