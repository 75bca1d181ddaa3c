//! `raid`: a RAID host bus adapter with many hardware queues in front of one member disk, as
//! in seed 000 (a 64-queue card, one rotating disk, dbench on XFS).
//!
//! Every hardware queue feeds the controller, which adds its own per-command overhead
//! (`ctrl_us`, 30) on the way in and passes commands to the member disk (an [`super::hdd`]
//! mechanism with its own NCQ window) in arrival order; completions return on the hardware
//! queue the command came from. `can_queue` bounds the commands in the adapter at once over
//! all queues (the SCSI host's limit; the driver refuses beyond it with its budget).
//!
//! Parameters: `submit_queues` (64), `queue_depth` (per hardware queue, 32), `can_queue`
//! (64), `ctrl_us` (30), and every `hdd` parameter for the member disk (its `ncq` defaults to
//! 32 here, as a SAS/SATA disk behind an HBA runs with NCQ).

use super::hdd::{Disk, HddParams};
use super::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use crate::rng::SimRng;
use mqblk_core::{BlkStatus, Nanos};
use std::collections::VecDeque;

pub struct RaidModel {
    disk: Disk,
    nr_hw: u16,
    depth: u32,
    can_queue: u32,
    ctrl_ns: u64,
    /// Commands crossing the controller on the way in: (time at the disk, hw, cmd).
    inbound: VecDeque<(u64, u16, Cmd)>,
    /// Completed at the disk, crossing the controller on the way out.
    outbound: VecDeque<(u64, u16, u64)>,
    outstanding: u32,
    scratch: Vec<(u16, u64)>,
    peak: u32,
}

impl RaidModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<RaidModel, String> {
        let nr_hw = p.u64("submit_queues", 64)?;
        let depth = p.u64("queue_depth", 32)?;
        let can_queue = p.u64("can_queue", 64)?;
        let ctrl_ns = p.u64("ctrl_us", 30)? * 1000;
        if !(1..=1024).contains(&nr_hw) || !(1..=4096).contains(&depth) || can_queue == 0 {
            return Err(
                "device raid: submit_queues 1..=1024, queue_depth 1..=4096, can_queue >= 1".into(),
            );
        }
        // The member disk runs with NCQ unless told otherwise.
        let mut hp = HddParams::from_params(p)?;
        if !p_has(p, "ncq") {
            hp.ncq = 32;
        }
        Ok(RaidModel {
            disk: Disk::new(hp, rng),
            nr_hw: nr_hw as u16,
            depth: depth as u32,
            can_queue: can_queue as u32,
            ctrl_ns,
            inbound: VecDeque::new(),
            outbound: VecDeque::new(),
            outstanding: 0,
            scratch: Vec::new(),
            peak: 0,
        })
    }

    /// Feeds the disk what has crossed the controller by `now`, and collects the disk's
    /// completions into `outbound`.
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
                for &(hw, id) in &self.scratch {
                    self.outbound.push_back((t + self.ctrl_ns, hw, id));
                }
            }
            while self.inbound.front().is_some_and(|x| x.0 <= t) {
                let (at, hw, cmd) = self.inbound.pop_front().expect("inbound command");
                self.disk.submit(hw, cmd, at);
            }
        }
    }
}

fn p_has(p: &mut Params<'_>, key: &str) -> bool {
    p.u64(key, u64::MAX).is_ok_and(|v| v != u64::MAX)
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
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        self.run_to(now.0);
        self.outstanding += 1;
        self.peak = self.peak.max(self.outstanding);
        let at = now.0 + self.ctrl_ns;
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
            let (_, hw, id) = self.outbound.pop_front().expect("outbound completion");
            self.outstanding -= 1;
            out.push(DevCompletion {
                hw,
                id,
                status: BlkStatus::Ok,
            });
        }
    }
    fn outstanding(&self) -> u32 {
        self.outstanding
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("completed", self.disk.completed),
            ("seeks", self.disk.seeks),
            ("readahead_hits", self.disk.cache_hits),
            ("busy_ms", self.disk.busy_ns / 1_000_000),
            ("peak_outstanding", self.peak as u64),
        ]
    }
}
