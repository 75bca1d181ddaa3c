//! `virtio`: a virtio-blk disk in a VM with `num_queues` virtqueues (seed 003).
//!
//! Guest side, the driver posts each request to its hardware queue's virtqueue under that
//! virtqueue's lock and kicks the host (a VM exit) once per batch: [`DriverCost`] with
//! `hw_lock` makes the engine model that lock, so vCPUs sharing one virtqueue contend on it.
//! Host side, `iothreads` threads (default one, as QEMU's virtio-blk dataplane ran one
//! iothread per device; virtqueue `i` is served by thread `i mod iothreads`) each spend
//! `host_us` of CPU per request; the backing storage adds `backend_us` with ample
//! parallelism (a host NVMe device). The completion interrupt is injected into the guest
//! (`DriverCost::irq_ns`). A vCPU that has to wait for a virtqueue lock spins until
//! pause-loop exiting traps it and the host reschedules it: `lock_waiter_ns` per hand-off.
//!
//! Parameters: `num_queues` (1), `queue_size` (128), `iothreads` (1), `host_us` (5),
//! `backend_us` (40), `size` (bytes, 64 GiB), `kick_ns` (4000), `post_ns` (400),
//! `irq_ns` (3000), `lock_waiter_ns` (800). The defaults are calibrated so that the
//! `virtio-multi-vq` scenario lands near seed 003's figures; they are plausible for the
//! 2014 hardware of the seed, not measured.

use super::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use crate::rng::SimRng;
use mqblk_core::{BlkStatus, Nanos};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct VirtioModel {
    capacity: u64,
    nr_vq: u16,
    queue_size: u32,
    host_ns: u64,
    backend_ns: u64,
    cost: DriverCost,
    thread_free: Vec<u64>,
    done: BinaryHeap<Reverse<(u64, u64, u16, u64)>>,
    seq: u64,
    rng: SimRng,
    served: Vec<u64>,
}

impl VirtioModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<VirtioModel, String> {
        let nr_vq = p.u64("num_queues", 1)?;
        if !(1..=256).contains(&nr_vq) {
            return Err(format!(
                "device virtio: num_queues={nr_vq}: must be 1..=256"
            ));
        }
        let iothreads = p.u64("iothreads", 1)?;
        if !(1..=256).contains(&iothreads) {
            return Err(format!(
                "device virtio: iothreads={iothreads}: must be 1..=256"
            ));
        }
        let queue_size = p.u64("queue_size", 128)? as u32;
        if !(2..=4096).contains(&queue_size) {
            return Err("device virtio: queue_size must be 2..=4096".into());
        }
        Ok(VirtioModel {
            capacity: p.u64("size", 64 << 30)? / 512,
            nr_vq: nr_vq as u16,
            queue_size,
            host_ns: p.u64("host_us", 5)? * 1000,
            backend_ns: p.u64("backend_us", 40)? * 1000,
            cost: DriverCost {
                queue_rq_ns: p.u64("post_ns", 400)?,
                doorbell_ns: p.u64("kick_ns", 4000)?,
                irq_ns: p.u64("irq_ns", 3000)?,
                hw_lock: true,
                lock_waiter_ns: p.u64("lock_waiter_ns", 800)?,
            },
            thread_free: vec![0; iothreads as usize],
            done: BinaryHeap::new(),
            seq: 0,
            rng,
            served: vec![0; iothreads as usize],
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
        false
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
        let th = hw as usize % self.thread_free.len();
        let start = now.0.max(self.thread_free[th]);
        let host_done = start + self.host_ns;
        self.thread_free[th] = host_done;
        self.served[th] += 1;
        let jitter = self.rng.below(self.backend_ns / 10 + 1);
        let t = host_done + self.backend_ns + jitter;
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
        vec![("served", self.served.iter().sum())]
    }
}
