//! `emmc`: an eMMC card on an SD/MMC host controller, as in the MMC/SD blk-mq series (Ux500).
//!
//! The host keeps at most two requests at the card (queue depth 2, one hardware queue). Each
//! request goes through three phases:
//!
//! - the driver's *pre* hook on the host (DMA mapping, the bounce-buffer copy): `prep_us`
//!   plus `prep_ns_per_kb` per KiB;
//! - the card: the command and its response (`cmd_us`), the card's own access (a read fetches
//!   its flash pages, `access_us`, varying by up to a tenth: the card reads nothing ahead, so
//!   this is paid by sequential and random reads alike, as the seed's iozone shows 4 KiB reads
//!   at ~6 MB/s either way; a write programs, `write_us`), and the transfer at `read_mbs` or
//!   `write_mbs`. A write shorter than an allocation unit (`au_kb`) that does not continue
//!   the previous write makes the card copy the rest of the unit first, at `copy_mbs` (the
//!   seed's random writes: ~100 ms each at 4 KiB, falling to nothing at 512 KiB);
//! - the *post* hook (`post_us`, unmapping).
//!
//! With `async_prep=1` (the MMC stack's asynchronous requests) the next request's pre hook
//! runs while the current one is on the bus and the post hook overlaps the next transfer; with
//! `async_prep=0` each request's phases run after the previous request has finished.
//! Requests finish in the order they were issued. With `cache=1` the card has a volatile cache
//! and the block layer sends it flushes (each a command, `cmd_us`); without one (the default)
//! the block layer completes flushes itself. Defaults and sources: `crates/models/DEVICES.md`.

use crate::hdd::ranged;
use crate::ModelError;
use crate::SimRng;
use crate::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use mqblk_core::{BlkStatus, Nanos, QueueLimits, ReqOp};
use std::collections::VecDeque;

pub struct EmmcModel {
    capacity: u64,
    read_mbs: u64,
    write_mbs: u64,
    cmd_ns: u64,
    access_ns: u64,
    write_ns: u64,
    au_bytes: u64,
    copy_mbs: u64,
    prep_ns: u64,
    prep_per_kb: u64,
    post_ns: u64,
    async_prep: bool,
    /// The card has a volatile cache (`cache=1`): the block layer sends it flushes.
    cache: bool,
    /// The host CPU's pre hooks are done until then.
    host_free: u64,
    /// The card is busy until then.
    bus_free: u64,
    last_done: u64,
    /// Where the last write ended.
    write_end: u64,
    /// Scheduled completions, in order: (time, hw, id).
    done: VecDeque<(u64, u16, u64)>,
    rng: SimRng,
    reads: u64,
    writes: u64,
    copies: u64,
    /// Time the card spent on commands, and the part of the pre hooks' time that ran while
    /// the card was busy with an earlier request (hidden by `async_prep`), in ns.
    card_busy: u64,
    prep_hidden: u64,
}

impl EmmcModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<EmmcModel, ModelError> {
        let m = "emmc";
        let us = 1000;
        Ok(EmmcModel {
            capacity: ranged(p, m, "size", 8 << 30, 64 << 20, 1 << 44)? / 512,
            // From the seed's iozone (16 MiB records, direct), not from its dd figure, which
            // the mmc-blk-mq scenario reproduces: crates/models/DEVICES.md.
            read_mbs: ranged(p, m, "read_mbs", 25, 1, 10_000)?,
            write_mbs: ranged(p, m, "write_mbs", 8, 1, 10_000)?,
            cmd_ns: ranged(p, m, "cmd_us", 100, 0, 100_000)? * us,
            access_ns: ranged(p, m, "access_us", 250, 0, 100_000)? * us,
            write_ns: ranged(p, m, "write_us", 1200, 0, 1_000_000)? * us,
            au_bytes: ranged(p, m, "au_kb", 512, 4, 1 << 20)? * 1024,
            copy_mbs: ranged(p, m, "copy_mbs", 5, 1, 10_000)?,
            prep_ns: ranged(p, m, "prep_us", 100, 0, 100_000)? * us,
            prep_per_kb: ranged(p, m, "prep_ns_per_kb", 4000, 0, 1_000_000)?,
            post_ns: ranged(p, m, "post_us", 50, 0, 100_000)? * us,
            async_prep: p.bool("async_prep", true)?,
            cache: p.bool("cache", false)?,
            host_free: 0,
            bus_free: 0,
            last_done: 0,
            write_end: 0,
            done: VecDeque::new(),
            rng,
            reads: 0,
            writes: 0,
            copies: 0,
            card_busy: 0,
            prep_hidden: 0,
        })
    }

    /// The card's time for `cmd`: command, access, transfer.
    fn card_ns(&mut self, cmd: &Cmd) -> u64 {
        let bytes = cmd.bytes();
        match cmd.op {
            ReqOp::Read => {
                self.reads += 1;
                let jitter = self.rng.below(self.access_ns / 10 + 1);
                self.cmd_ns + self.access_ns + jitter + bytes * 1000 / self.read_mbs
            }
            ReqOp::Write | ReqOp::WriteZeroes | ReqOp::ZoneAppend => {
                self.writes += 1;
                let copy = if cmd.sector != self.write_end && bytes < self.au_bytes {
                    self.copies += 1;
                    (self.au_bytes - bytes) * 1000 / self.copy_mbs
                } else {
                    0
                };
                self.write_end = cmd.sector + cmd.nr_sectors as u64;
                self.cmd_ns + self.write_ns + copy + bytes * 1000 / self.write_mbs
            }
            ReqOp::Discard => self.cmd_ns + self.access_ns,
            // The card has no zones; the block layer never sends it zone commands.
            ReqOp::Flush
            | ReqOp::ZoneReset
            | ReqOp::ZoneResetAll
            | ReqOp::ZoneOpen
            | ReqOp::ZoneClose
            | ReqOp::ZoneFinish => self.cmd_ns,
        }
    }
}

impl DeviceModel for EmmcModel {
    /// `mmc_setup_queue` over the Ux500's host (`mmci`, variant `ux500`: 24 length bits,
    /// 2048-byte blocks): 128 segments (`NR_SG`) of up to the 16 MiB a transfer may be, and
    /// requests of `min(max_blk_count, max_req_size / 512)` = 8191 sectors.
    fn queue_limits(&self) -> QueueLimits {
        let max_req = (1u32 << 24) - 1;
        QueueLimits {
            max_segments: 128,
            max_segment_size: max_req / 512 * 512,
            max_sectors: (max_req >> 11).min(max_req / 512),
            ..QueueLimits::default()
        }
    }
    fn name(&self) -> &'static str {
        "emmc"
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
    fn rotational(&self) -> bool {
        false
    }
    /// The MMC driver enables the block layer's write cache only for a card that has one
    /// (`mmc_cache_enabled`: eMMC 4.5 and later with a cache size in EXT_CSD), without FUA
    /// unless the card offers reliable writes; the seed does not say, so none by default.
    fn write_cache(&self) -> bool {
        self.cache
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
            completions: crate::CompletionCpu::Mapped,
            complete_ns: 0,
            worker_wake_ns: 0,
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        let prep = self.prep_ns + cmd.bytes() / 1024 * self.prep_per_kb;
        let card = self.card_ns(&cmd);
        let t = now.0;
        let end = if self.async_prep {
            // Pre hooks run one after another on the host, each as soon as its request is
            // there; the card takes a prepared request when it is free.
            let prep_start = t.max(self.host_free);
            let prep_end = prep_start + prep;
            self.prep_hidden += prep_end.min(self.bus_free).saturating_sub(prep_start);
            self.host_free = prep_end;
            let card_end = prep_end.max(self.bus_free) + card;
            self.bus_free = card_end;
            card_end + self.post_ns
        } else {
            t.max(self.last_done) + prep + card + self.post_ns
        };
        self.card_busy += card;
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
            ("reads", self.reads),
            ("writes", self.writes),
            ("au_copies", self.copies),
            ("card_busy_ms", self.card_busy / 1_000_000),
            ("prep_hidden_ms", self.prep_hidden / 1_000_000),
        ]
    }
}
