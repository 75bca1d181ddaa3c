//! `virtio`: a virtio-blk disk in a VM with `num_queues` virtqueues (the multi-virtqueue virtio-blk series).
//!
//! Guest side, the driver posts each request to its hardware queue's virtqueue under that
//! virtqueue's lock and kicks the host (a VM exit) once per batch: [`DriverCost`] with
//! `hw_lock` makes the engine model that lock, so vCPUs sharing one virtqueue contend on it.
//! Host side, `iothreads` threads (default one, as QEMU 2.0's dataplane ran one iothread per
//! device and the seed kept both virtqueues on it; virtqueue `i` is served by thread
//! `i mod iothreads`) each spend `host_us` of CPU per request, one request at a time; then
//! the backing storage (a host NVMe device) takes `backend_us` (varying by up to a tenth) on
//! the first of its `backend_depth` parallel units that is free. The completion interrupt is
//! injected into the guest (`DriverCost::irq_ns`). A vCPU that has to wait for a virtqueue
//! lock spins until pause-loop exiting traps it and the host reschedules it:
//! `lock_waiter_ns` per hand-off.
//!
//! Parameters: `num_queues` (1), `queue_size` (128), `iothreads` (1), `host_us` (5),
//! `backend_us` (40), `backend_depth` (64), `size` (bytes, 64 GiB), `kick_ns` (4000),
//! `post_ns` (400), `irq_ns` (3000), `lock_waiter_ns` (800), `rotational` (1: Linux's
//! virtio_blk leaves the disk rotational, as this machine's `vda` reports it; the
//! schedulers' idling and BFQ's choices depend on it). The defaults are calibrated so
//! that the `virtio-multi-vq` scenario points the way the multi-virtqueue virtio-blk series does; sources in
//! `crates/models/DEVICES.md`.

use crate::hdd::ranged;
use crate::ModelError;
use crate::SimRng;
use crate::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use mqblk_core::{BlkStatus, Nanos, QueueLimits};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct VirtioModel {
    capacity: u64,
    rotational: bool,
    nr_vq: u16,
    queue_size: u32,
    host_ns: u64,
    backend_ns: u64,
    cost: DriverCost,
    /// Per iothread: busy until then.
    thread_free: Vec<u64>,
    /// The backing device's parallel units: when each is free.
    backend: BinaryHeap<Reverse<u64>>,
    /// Scheduled completions: (time, order, hw, id).
    done: BinaryHeap<Reverse<(u64, u64, u16, u64)>>,
    seq: u64,
    rng: SimRng,
    served: u64,
}

impl VirtioModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<VirtioModel, ModelError> {
        let m = "virtio";
        let nr_vq = ranged(p, m, "num_queues", 1, 1, 256)?;
        let iothreads = ranged(p, m, "iothreads", 1, 1, 256)? as usize;
        let queue_size = ranged(p, m, "queue_size", 128, 2, 32_768)? as u32;
        let backend_depth = ranged(p, m, "backend_depth", 64, 1, 65_536)? as usize;
        Ok(VirtioModel {
            capacity: ranged(p, m, "size", 64 << 30, 1 << 20, 1 << 50)? / 512,
            rotational: ranged(p, m, "rotational", 1, 0, 1)? == 1,
            nr_vq: nr_vq as u16,
            queue_size,
            host_ns: ranged(p, m, "host_us", 5, 0, 10_000)? * 1000,
            backend_ns: ranged(p, m, "backend_us", 40, 0, 1_000_000)? * 1000,
            cost: DriverCost {
                queue_rq_ns: ranged(p, m, "post_ns", 400, 0, 1_000_000)?,
                doorbell_ns: ranged(p, m, "kick_ns", 4000, 0, 1_000_000)?,
                irq_ns: ranged(p, m, "irq_ns", 3000, 0, 1_000_000)?,
                hw_lock: true,
                lock_waiter_ns: ranged(p, m, "lock_waiter_ns", 800, 0, 1_000_000)?,
                completions: crate::CompletionCpu::Mapped,
                complete_ns: 0,
                worker_wake_ns: 0,
            },
            thread_free: vec![0; iothreads],
            backend: (0..backend_depth).map(|_| Reverse(0)).collect(),
            done: BinaryHeap::new(),
            seq: 0,
            rng,
            served: 0,
        })
    }
}

impl DeviceModel for VirtioModel {
    fn name(&self) -> &'static str {
        "virtio"
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
    fn rotational(&self) -> bool {
        self.rotational
    }
    /// QEMU's default cache mode is writeback (`VIRTIO_BLK_F_FLUSH`); virtio-blk has no FUA, so
    /// the guest follows FUA writes with a flush (this machine's own vda: `write back`, `fua` 0).
    fn write_cache(&self) -> bool {
        true
    }
    fn fua(&self) -> bool {
        false
    }
    /// `virtblk_probe`: as many segments as the device's `seg_max`, which QEMU sets to the
    /// queue size less the request's header and status descriptors (`seg_max_adjust`; this
    /// machine's 256-descriptor `vda`: `max_segments` 254), segments unbounded in size
    /// (QEMU offers no `VIRTIO_BLK_F_SIZE_MAX`: `max_segment_size` 4294967295 on `vda`),
    /// no hardware bound on the request size (`max_sectors` is the block layer's cap), and
    /// QEMU's discard limits as `vda` reports them (`discard_max_bytes` 1 GiB, granularity
    /// 4 KiB).
    fn queue_limits(&self) -> QueueLimits {
        QueueLimits {
            max_segments: self.queue_size.saturating_sub(2).clamp(1, u16::MAX as u32) as u16,
            max_segment_size: u32::MAX,
            max_discard_sectors: 1 << 21,
            discard_granularity: 4096,
            ..QueueLimits::default()
        }
    }
    fn nr_hw_queues(&self) -> u16 {
        self.nr_vq
    }
    fn queue_depth(&self) -> u32 {
        self.queue_size
    }
    fn driver_cost(&self) -> DriverCost {
        self.cost
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        // Virtqueue `hw` is served by iothread `hw mod iothreads`, one request at a time.
        let th = hw as usize % self.thread_free.len();
        let host_done = now.0.max(self.thread_free[th]) + self.host_ns;
        self.thread_free[th] = host_done;
        self.served += 1;
        // Then the backing device, on its first free unit.
        let Reverse(free) = self.backend.pop().unwrap_or(Reverse(0));
        let jitter = self.rng.below(self.backend_ns / 10 + 1);
        let t = host_done.max(free) + self.backend_ns + jitter;
        self.backend.push(Reverse(t));
        self.seq += 1;
        self.done.push(Reverse((t, self.seq, hw, cmd.id)));
    }
    fn next_event(&self) -> Option<Nanos> {
        self.done.peek().map(|r| Nanos(r.0 .0))
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        while self.done.peek().is_some_and(|r| r.0 .0 <= now.0) {
            let Reverse((_, _, hw, id)) = self.done.pop().expect("completion");
            out.push(DevCompletion {
                hw,
                id,
                status: BlkStatus::Ok,
            });
        }
    }
    fn outstanding(&self) -> u32 {
        self.done.len() as u32
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("served", self.served)]
    }
}
