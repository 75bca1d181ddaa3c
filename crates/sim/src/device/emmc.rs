//! `emmc`: an eMMC card on an SD/MMC host controller, as in seed 001 (Ux500).
//!
//! The host keeps at most two requests at the card (queue depth 2). Each request goes
//! through three phases: the driver's *pre* hook on the host CPU (DMA mapping, bounce-buffer
//! copy: `prep_us` + `prep_ns_per_kb` per KiB), the bus (command overhead `cmd_us`, an
//! internal access latency `random_us` unless the read continues where the last one ended,
//! and the transfer at `read_mbs`/`write_mbs`), and the *post* hook (`post_us`, unmapping).
//! With `async_prep=1` (the blk-mq MMC driver's asynchronous requests) the next request's pre
//! hook runs while the current one is on the bus and the post hook of a finished one overlaps
//! the next transfer; with `async_prep=0` the phases of consecutive requests run one after
//! another.
//!
//! Defaults: an eMMC 4.41 card of the Ux500 era: ~24 MB/s sequential reads on the bus (the
//! seed measured 22.7 MB/s for dd through the whole stack), ~1500 random 4 KiB reads/s.
//! Parameters: `size` (8 GiB), `read_mbs` (24), `write_mbs` (12), `cmd_us` (150),
//! `random_us` (350), `prep_us` (200), `prep_ns_per_kb` (4000), `post_us` (100),
//! `async_prep` (1).

use super::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use crate::rng::SimRng;
use mqblk_core::{BlkStatus, Nanos, ReqOp};
use std::collections::VecDeque;

pub struct EmmcModel {
    capacity: u64,
    read_mbs: u64,
    write_mbs: u64,
    cmd_ns: u64,
    random_ns: u64,
    prep_ns: u64,
    prep_per_kb: u64,
    post_ns: u64,
    async_prep: bool,
    host_free: u64,
    bus_free: u64,
    last_done: u64,
    last_end: u64,
    /// Scheduled completions, in order: (time, hw, id).
    done: VecDeque<(u64, u16, u64)>,
    rng: SimRng,
    sequential: u64,
    random: u64,
}

impl EmmcModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<EmmcModel, String> {
        let m = EmmcModel {
            capacity: p.u64("size", 8 << 30)? / 512,
            read_mbs: p.u64("read_mbs", 24)?,
            write_mbs: p.u64("write_mbs", 12)?,
            cmd_ns: p.u64("cmd_us", 150)? * 1000,
            random_ns: p.u64("random_us", 350)? * 1000,
            prep_ns: p.u64("prep_us", 200)? * 1000,
            prep_per_kb: p.u64("prep_ns_per_kb", 4000)?,
            post_ns: p.u64("post_us", 100)? * 1000,
            async_prep: p.bool("async_prep", true)?,
            host_free: 0,
            bus_free: 0,
            last_done: 0,
            last_end: u64::MAX,
            done: VecDeque::new(),
            rng,
            sequential: 0,
            random: 0,
        };
        if m.capacity < (64 << 20) / 512 {
            return Err("device emmc: size must be at least 64 MiB".into());
        }
        if m.read_mbs == 0 || m.write_mbs == 0 {
            return Err("device emmc: read_mbs and write_mbs must be positive".into());
        }
        Ok(m)
    }

    fn bus_ns(&mut self, cmd: &Cmd) -> u64 {
        let bytes = cmd.bytes();
        let (rate, access) = match cmd.op {
            ReqOp::Read => {
                let seq = cmd.sector == self.last_end;
                if seq {
                    self.sequential += 1;
                } else {
                    self.random += 1;
                }
                // Random accesses vary with where the card's mapping puts the page.
                let jitter = self.rng.below(self.random_ns / 5 + 1);
                (self.read_mbs, if seq { 0 } else { self.random_ns + jitter })
            }
            ReqOp::Write | ReqOp::WriteZeroes => (self.write_mbs, self.random_ns),
            ReqOp::Flush | ReqOp::Discard => (self.read_mbs, self.random_ns),
        };
        self.last_end = cmd.sector + cmd.nr_sectors as u64;
        self.cmd_ns + access + bytes * 1000 / rate
    }
}

impl DeviceModel for EmmcModel {
    fn name(&self) -> &'static str {
        "emmc"
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
    fn rotational(&self) -> bool {
        false
    }
    fn nr_hw_queues(&self) -> u16 {
        1
    }
    fn queue_depth(&self) -> u32 {
        2
    }
    fn max_outstanding(&self) -> u32 {
        2
    }
    fn driver_cost(&self) -> DriverCost {
        DriverCost {
            queue_rq_ns: 2000,
            doorbell_ns: 500,
            irq_ns: 3000,
            hw_lock: true,
            lock_waiter_ns: 0,
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        let prep = self.prep_ns + cmd.bytes() / 1024 * self.prep_per_kb;
        let bus = self.bus_ns(&cmd);
        let t = now.0;
        let end = if self.async_prep {
            let prep_end = t.max(self.host_free) + prep;
            let bus_end = prep_end.max(self.bus_free) + bus;
            self.bus_free = bus_end;
            let post_end = bus_end.max(prep_end) + self.post_ns;
            self.host_free = prep_end;
            post_end
        } else {
            let start = t.max(self.last_done);
            start + prep + bus + self.post_ns
        };
        // Requests finish in order on the one bus.
        let end = end.max(self.last_done);
        self.last_done = end;
        self.done.push_back((end, hw, cmd.id));
    }
    fn next_event(&self) -> Option<Nanos> {
        self.done.front().map(|d| Nanos(d.0))
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        while self.done.front().is_some_and(|d| d.0 <= now.0) {
            let (_, hw, id) = self.done.pop_front().expect("completion");
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
        vec![
            ("sequential_reads", self.sequential),
            ("random_accesses", self.random),
        ]
    }
}
