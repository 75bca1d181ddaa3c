//! What every driver over a device model keeps, whichever clock drives it: the model, the
//! commands each hardware queue has in it, the completions raised and not yet polled, and
//! the faults to inject (core's [`FaultInjector`], as the null driver injects them).
//!
//! Two drivers stand on it: the simulator's `SimDriver` (virtual time; commands reach the
//! model when their doorbell's step ends) and [`crate::RealtimeDriver`] (the wall clock;
//! commands reach the model in `queue_rq`). They differ only in when they call in here.

use crate::{Cmd, DevCompletion, DeviceModel};
use mqblk_core::{
    BlkStatus, CompletionBatch, FaultConfig, FaultInjector, Injected, Nanos, QueueLimits, QueueRqs,
    RqId,
};
use std::collections::{BTreeMap, BTreeSet};

/// What a driver over a model tells the block layer about the device, read once from the
/// model (the `Driver` identity every adapter reports without taking its lock).
#[derive(Copy, Clone, Debug)]
pub struct ModelInfo {
    pub name: &'static str,
    pub capacity_sectors: u64,
    pub rotational: bool,
    pub write_cache: bool,
    pub fua: bool,
    pub nr_hw_queues: u16,
    pub queue_depth: u32,
    /// Commands the device holds at once, over all hardware queues (at least 1).
    pub max_outstanding: u32,
    /// The queue limits its driver declares, with its capacity.
    pub limits: QueueLimits,
    /// How its driver takes a plug's requests: with a ring (`ring_descriptors`),
    /// virtio-blk's `virtio_queue_rqs`, which requeues what does not fit.
    pub queue_rqs: QueueRqs,
}

impl ModelInfo {
    pub fn of(model: &dyn DeviceModel) -> ModelInfo {
        ModelInfo {
            name: model.name(),
            capacity_sectors: model.capacity_sectors(),
            rotational: model.rotational(),
            write_cache: model.write_cache(),
            fua: model.fua(),
            nr_hw_queues: model.nr_hw_queues(),
            limits: QueueLimits {
                capacity_sectors: model.capacity_sectors(),
                ..model.queue_limits()
            },
            queue_depth: model.queue_depth(),
            max_outstanding: model.max_outstanding().max(1),
            queue_rqs: if model.ring_descriptors().is_some() {
                QueueRqs::RequeueBusy
            } else {
                QueueRqs::OneByOne
            },
        }
    }

    /// The device holds more commands than its hardware queues have tags: a budget could
    /// never run out.
    pub fn unlimited(&self) -> bool {
        self.max_outstanding >= self.nr_hw_queues as u32 * self.queue_depth
    }
}

/// What a driver over a model saw: commands queued and completed, and each fault injected.
#[derive(Default, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DriverStats {
    pub queued: u64,
    pub completed: u64,
    /// Refused with "busy" (`BLK_STS_RESOURCE`).
    pub busy: u64,
    /// Failed at issue (the simulator's own fault).
    pub failed: u64,
    /// Completed by the device with an I/O error.
    pub dev_errors: u64,
    /// Accepted and never completed: ended by the request timeout.
    pub lost: u64,
    /// Handed back for requeue from `queue_rq`, before reaching the device.
    pub requeued: u64,
    pub timeouts: u64,
    /// `get_budget` refused (the device's own queue was full).
    pub budget_denied: u64,
}

/// The fault decision for a command handed to `queue_rq`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Accept {
    /// Refuse it: `BLK_STS_RESOURCE`.
    Refuse,
    /// Accept it and never complete it (the timeout handler ends it).
    Lose,
    /// Accept it: it goes to the model.
    Take,
    /// No room in the ring for it (`DeviceModel::ring_descriptors`): refuse it until a
    /// completion frees some.
    NoRoom,
    /// Hand it back at once, before it reaches the device (null_blk's driver-driven
    /// requeue: `blk_mq_requeue_request` from `null_queue_rq`, which returns OK).
    Requeue,
}

/// A command the model finished, with what the driver reports for it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    pub hw: u16,
    pub id: RqId,
    pub status: BlkStatus,
}

pub struct ModelPort {
    pub model: Box<dyn DeviceModel>,
    /// Per hardware queue: commands accepted and not yet polled back (lost ones included).
    inflight: Vec<u32>,
    /// Per hardware queue: finished commands whose interrupt was raised, not yet polled.
    raised: Vec<Vec<Finished>>,
    inject: Vec<FaultInjector>,
    lost: BTreeSet<u32>,
    /// Accepted commands the device completes with an I/O error.
    dev_fail: BTreeSet<u32>,
    scratch: Vec<DevCompletion>,
    /// Descriptors per ring (`DeviceModel::ring_descriptors`), those in use per hardware
    /// queue, and what each command in flight holds.
    ring: Option<u32>,
    ring_used: Vec<u32>,
    ring_held: BTreeMap<u32, u32>,
    pub stats: DriverStats,
    /// What the device's storage holds, when a run asks (the simulator's power cuts).
    pub media: Option<crate::media::Media>,
}

impl ModelPort {
    pub fn new(model: Box<dyn DeviceModel>, faults: &FaultConfig) -> ModelPort {
        let nr_hw = model.nr_hw_queues();
        let ring = model.ring_descriptors();
        ModelPort {
            ring,
            ring_used: vec![0; nr_hw as usize],
            ring_held: BTreeMap::new(),
            model,
            inflight: vec![0; nr_hw as usize],
            raised: vec![Vec::new(); nr_hw as usize],
            inject: (0..nr_hw).map(|h| FaultInjector::new(faults, h)).collect(),
            lost: BTreeSet::new(),
            dev_fail: BTreeSet::new(),
            scratch: Vec::new(),
            stats: DriverStats::default(),
            media: None,
        }
    }

    /// Decides the fate of command `id` (of `segments` segments of data: the request's
    /// `nr_phys_segments`) handed to hardware queue `hw`, and counts it in.
    pub fn accept(&mut self, hw: u16, id: RqId, segments: u32) -> Accept {
        let h = hw as usize;
        if let Some(ring) = self.ring {
            // A descriptor per data segment, and the header's and the status's
            // (`virtblk_add_req`, `DeviceModel::ring_descriptors`); one that could never fit
            // takes the whole ring when it is empty, as the uring driver's ring does.
            let need = segments.saturating_add(2).min(ring);
            if self.ring_used[h] + need > ring {
                return Accept::NoRoom;
            }
            self.ring_used[h] += need;
            self.ring_held.insert(id.0, need);
        }
        let injected = self.inject[h].inject();
        match injected {
            Injected::Busy => {
                self.stats.busy += 1;
                self.release(h, id);
                return Accept::Refuse;
            }
            Injected::Requeue => {
                self.stats.requeued += 1;
                self.release(h, id);
                return Accept::Requeue;
            }
            _ => {}
        }
        self.inflight[h] += 1;
        self.stats.queued += 1;
        match injected {
            Injected::Timeout => {
                self.stats.lost += 1;
                self.lost.insert(id.0);
                return Accept::Lose;
            }
            Injected::Fail => {
                self.dev_fail.insert(id.0);
            }
            Injected::None | Injected::Busy | Injected::Requeue => {}
        }
        Accept::Take
    }

    /// An accepted command reaches the model at `now`.
    pub fn deliver(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        self.model.submit(hw, cmd, now);
    }

    /// [`ModelPort::deliver`] with the command's data, for the media when it is kept.
    pub fn deliver_data(
        &mut self,
        hw: u16,
        cmd: Cmd,
        pieces: Vec<crate::media::Piece>,
        now: Nanos,
    ) {
        if let Some(m) = &mut self.media {
            m.arrive(cmd.id, cmd.op, cmd.fua, pieces);
        }
        self.model.submit(hw, cmd, now);
    }

    /// Lets the model run to `now`; what finished lands in `out`, in completion order, with
    /// the faults decided at issue applied.
    pub fn advance(&mut self, now: Nanos, out: &mut Vec<Finished>) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        self.model.advance(now, &mut scratch);
        for c in &scratch {
            let id = RqId(c.id as u32);
            let mut status = c.status;
            if self.dev_fail.remove(&id.0) && status.is_ok() {
                status = BlkStatus::IoErr;
                self.stats.dev_errors += 1;
            }
            if let Some(m) = &mut self.media {
                m.finish(c.id, status.is_ok());
            }
            out.push(Finished {
                hw: c.hw,
                id,
                status,
            });
        }
        self.scratch = scratch;
    }

    /// Raises `f`'s interrupt on its hardware queue: the next poll there reports it.
    pub fn raise(&mut self, f: Finished) {
        self.raised[f.hw as usize].push(f);
    }

    /// Reports the raised completions of `hw` into `done`; returns how many.
    pub fn poll(&mut self, hw: u16, done: &mut CompletionBatch) -> usize {
        let h = hw as usize;
        let raised = std::mem::take(&mut self.raised[h]);
        let n = raised.len();
        for f in &raised {
            self.finish_one(h, f.id);
            self.stats.completed += 1;
            done.complete(f.id, f.status);
        }
        let mut raised = raised;
        raised.clear();
        self.raised[h] = raised;
        if n > 0 && self.ring.is_some() {
            // `virtblk_done`: room again, so a queue stopped for the lack of it runs.
            done.start_stopped_queues();
        }
        n
    }

    /// What `queue_rq` answers when the ring has no room for a command
    /// ([`Accept::NoRoom`]): virtio-blk's, which also stops the queue until a completion
    /// (`virtio_queue_rq` on -ENOSPC).
    pub fn no_room(&self, hw: u16, done: &mut CompletionBatch) -> BlkStatus {
        done.stop_queue();
        self.busy(hw)
    }

    /// The request timeout of command `id`: a lost command ends here with
    /// `BLK_STS_TIMEOUT` (true); any other is still in the device and will complete.
    pub fn timeout(&mut self, hw: u16, id: RqId, done: &mut CompletionBatch) -> bool {
        if !self.lost.remove(&id.0) {
            return false;
        }
        self.stats.timeouts += 1;
        self.finish_one(hw as usize, id);
        done.complete(id, BlkStatus::Timeout);
        if self.ring.is_some() {
            // Its descriptors are free: a queue stopped for the lack of room runs again, as
            // `virtblk_done` restarts stopped queues once something completed. The kernel's
            // virtio-blk has no `timeout` hook (`virtio_mq_ops`), so `blk_mq_rq_timed_out`
            // only re-arms its timer; a lost command ending here is the model's fault
            // injection, completed as a driver that aborts it (`nvme_timeout`) would.
            done.start_stopped_queues();
        }
        true
    }

    fn finish_one(&mut self, h: usize, id: RqId) {
        assert!(
            self.inflight[h] > 0,
            "hctx {h}: a completion with nothing in flight"
        );
        self.inflight[h] -= 1;
        self.release(h, id);
    }

    /// Frees the ring descriptors command `id` held.
    fn release(&mut self, h: usize, id: RqId) {
        if let Some(n) = self.ring_held.remove(&id.0) {
            self.ring_used[h] -= n;
        }
    }

    /// Commands accepted on `hw` and not yet polled back.
    pub fn inflight(&self, hw: u16) -> u32 {
        self.inflight[hw as usize]
    }

    /// What `queue_rq` answers when hardware queue `hw` cannot take a command now:
    /// `DEV_RESOURCE`, which promises a re-run from a completion, while one is to come on
    /// this queue, else `RESOURCE` (the block layer retries after a delay,
    /// `blk_mq_dispatch_rq_list`'s `BLK_MQ_RESOURCE_DELAY`).
    pub fn busy(&self, hw: u16) -> BlkStatus {
        if self.inflight(hw) > 0 {
            BlkStatus::DevResource
        } else {
            BlkStatus::Resource
        }
    }

    /// Commands the device or the lost set hold, over all hardware queues.
    pub fn total_inflight(&self) -> u32 {
        self.inflight.iter().sum()
    }

    /// A human dump for failure reports.
    pub fn debug_state(&self) -> String {
        format!(
            "inflight {:?} lost {:?} model outstanding {} next {:?} raised {:?}\n  stats {:?}\n  model {:?}",
            self.inflight,
            self.lost,
            self.model.outstanding(),
            self.model.next_event(),
            self.raised.iter().map(Vec::len).collect::<Vec<_>>(),
            self.stats,
            self.model.stats()
        )
    }
}
