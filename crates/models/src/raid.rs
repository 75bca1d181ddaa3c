//! `raid`: a RAID host bus adapter with many hardware queues in front of one member disk, as
//! the single-hctx dispatch patch was measured on (a 64-queue card, one rotating disk, dbench on XFS).
//!
//! Every hardware queue feeds the controller's firmware, which handles one command at a time
//! (`ctrl_us` each, on the way in and again on the way out) and passes commands to the member
//! disk in arrival order, holding back those beyond the disk's own queue (`ncq`); the disk is
//! the [`super::hdd`] mechanism.
//! Completions return on the hardware queue the command came from. `can_queue` bounds the
//! commands in the adapter at once over all queues (the SCSI host's limit, shared by every
//! hardware queue as with `host_tagset`): the driver refuses more with its budget.
//!
//! Parameters: `submit_queues` (64), `queue_depth` (per hardware queue, 32), `can_queue`
//! (64), `ctrl_us` (30), and every `hdd` parameter for the member disk (its `ncq` defaults to
//! 32 here, as a SATA disk behind an HBA runs with NCQ, and `write_cache` to 0: the kernel
//! sees a write-through virtual disk). Sources in `crates/models/DEVICES.md`.

use crate::hdd::{ranged, Disk, HddParams};
use crate::ModelError;
use crate::SimRng;
use crate::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use mqblk_core::Nanos;
use std::collections::VecDeque;

pub struct RaidModel {
    disk: Disk,
    nr_hw: u16,
    depth: u32,
    can_queue: u32,
    ctrl_ns: u64,
    /// The firmware is busy until then.
    ctrl_free: u64,
    /// Commands through the firmware on the way in: (time at the disk, hw, cmd).
    inbound: VecDeque<(u64, u16, Cmd)>,
    /// Through the firmware, waiting for room in the disk's queue.
    backlog: VecDeque<(u16, Cmd)>,
    /// Completed at the disk, through the firmware on the way out.
    outbound: VecDeque<(u64, DevCompletion)>,
    outstanding: u32,
    scratch: Vec<DevCompletion>,
    peak: u32,
}

impl RaidModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<RaidModel, ModelError> {
        let nr_hw = ranged(p, "raid", "submit_queues", 64, 1, 1024)?;
        let depth = ranged(p, "raid", "queue_depth", 32, 1, 4096)?;
        let can_queue = ranged(p, "raid", "can_queue", 64, 1, 65_536)?;
        let ctrl_ns = ranged(p, "raid", "ctrl_us", 30, 0, 100_000)? * 1000;
        // A RAID controller's virtual disk answers no caching mode page, so the kernel takes
        // it as write-through (`sd_read_cache_type`: "Assuming drive cache: write through")
        // and sends it no flushes and no FUA; the member disk's cache is the controller's
        // business.
        let hp = HddParams::from_params(p, "raid", 32, false)?;
        Ok(RaidModel {
            disk: Disk::new(hp, "raid", rng)?,
            nr_hw: nr_hw as u16,
            depth: depth as u32,
            can_queue: can_queue as u32,
            ctrl_ns,
            ctrl_free: 0,
            inbound: VecDeque::new(),
            backlog: VecDeque::new(),
            outbound: VecDeque::new(),
            outstanding: 0,
            scratch: Vec::new(),
            peak: 0,
        })
    }

    /// Commands at the adapter at most so far (never more than `can_queue` when the driver
    /// respects [`DeviceModel::max_outstanding`]).
    pub fn peak_outstanding(&self) -> u32 {
        self.peak
    }

    /// Runs the firmware and the disk up to `now`: commands reach the disk, finished ones
    /// head back out.
    fn run_to(&mut self, now: u64) {
        loop {
            let next_in = self.inbound.front().map(|x| x.0);
            let next_disk = self.disk.next_event();
            let t = match (next_in, next_disk) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => return,
                },
            };
            if t > now {
                return;
            }
            if next_disk == Some(t) {
                self.scratch.clear();
                self.disk.advance(t, &mut self.scratch);
                for &c in &self.scratch {
                    let out = t.max(self.ctrl_free) + self.ctrl_ns;
                    self.ctrl_free = out;
                    self.outbound.push_back((out, c));
                }
            }
            while self.inbound.front().is_some_and(|x| x.0 <= t) {
                let (_, hw, cmd) = self.inbound.pop_front().expect("inbound command");
                self.backlog.push_back((hw, cmd));
            }
            while self.disk.outstanding() < self.disk.ncq() {
                let Some((hw, cmd)) = self.backlog.pop_front() else {
                    break;
                };
                self.disk.submit(hw, cmd, t);
            }
        }
    }
}

impl DeviceModel for RaidModel {
    fn name(&self) -> &'static str {
        "raid"
    }
    fn capacity_sectors(&self) -> u64 {
        self.disk.capacity()
    }
    fn rotational(&self) -> bool {
        true
    }
    /// The member disk's cache, seen through the HBA; FUA passed down as for `hdd`.
    fn write_cache(&self) -> bool {
        self.disk.write_cache()
    }
    fn fua(&self) -> bool {
        self.disk.write_cache()
    }
    fn nr_hw_queues(&self) -> u16 {
        self.nr_hw
    }
    fn queue_depth(&self) -> u32 {
        self.depth
    }
    fn max_outstanding(&self) -> u32 {
        self.can_queue
    }
    fn driver_cost(&self) -> DriverCost {
        DriverCost {
            queue_rq_ns: 1000,
            doorbell_ns: 300,
            irq_ns: 2000,
            hw_lock: false,
            lock_waiter_ns: 0,
            completions: crate::CompletionCpu::Mapped,
            complete_ns: 0,
            worker_wake_ns: 0,
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        self.run_to(now.0);
        self.outstanding += 1;
        self.peak = self.peak.max(self.outstanding);
        let at = now.0.max(self.ctrl_free) + self.ctrl_ns;
        self.ctrl_free = at;
        self.inbound.push_back((at, hw, cmd));
    }
    fn next_event(&self) -> Option<Nanos> {
        [
            self.inbound.front().map(|x| x.0),
            self.disk.next_event(),
            self.outbound.front().map(|x| x.0),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(Nanos)
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        self.run_to(now.0);
        while self.outbound.front().is_some_and(|x| x.0 <= now.0) {
            let (_, c) = self.outbound.pop_front().expect("outbound completion");
            self.outstanding -= 1;
            out.push(c);
        }
    }
    fn outstanding(&self) -> u32 {
        self.outstanding
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut s = self.disk.stats();
        s.push(("peak_outstanding", self.peak as u64));
        s
    }
}
