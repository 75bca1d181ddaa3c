//! `ssd`: a flash SSD with channels × dies, an internal command queue and a write buffer.
//!
//! A command first passes the controller (one command at a time, `ctrl_ns` each, 3.578 us:
//! this is what caps 4 KiB random reads at the 279,500 IOPS the datasheet of the default
//! drive, an Intel DC P4500 1.0 TB, gives; not the 258K of the mail on mq-deadline's O(1) queued count, which its scenario reproduces),
//! then works on the die its LBA stripes to: a read takes the die for `read_us` (60) and then
//! the channel for the transfer; writes land in the DRAM write buffer (`wbuf_mb`, 64) and
//! complete after the transfer, and the buffer drains in the background by programming pages
//! (`program_us`, 700) onto the dies, which delays reads queued behind a program on the same
//! die. A full buffer makes writes wait for room. Commands to idle dies proceed while others
//! wait: that is the internal reordering a queueing device does. With `queueing=0` the
//! device takes one command at a time (no internal queue; `nonrot_with_queueing` false).
//!
//! Parameters: `size` (bytes, 1.0 TB), `channels` (8), `dies` (per channel, 4),
//! `read_us` (60), `program_us` (700), `page_kb` (16), `channel_mbs` (800), `ctrl_ns` (3578),
//! `wbuf_mb` (64), `queue_depth` (per hardware queue, 128), `hw_queues` (1), `queueing` (1),
//! `mdts_kb` (0: the controller reports no transfer limit; `nvme id-ctrl` gives a drive's),
//! `rotational` (0: the flag the queue reports to schedulers, as `/sys/block/DEV/queue/
//! rotational`, which a user may set on any Linux device; the flash behind it is unchanged).

use crate::hdd::ranged;
use crate::ModelError;
use crate::SimRng;
use crate::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use mqblk_core::{BlkStatus, Nanos, QueueLimits, ReqOp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

pub struct SsdModel {
    capacity: u64,
    channels: u32,
    dies_per_ch: u32,
    read_ns: u64,
    program_ns: u64,
    page_sectors: u64,
    channel_mbs: u64,
    ctrl_ns: u64,
    wbuf_sectors: u64,
    depth: u32,
    nr_hw: u16,
    queueing: bool,
    /// The controller's largest transfer (MDTS) in KiB; 0: none reported.
    mdts_kb: u32,
    rotational: bool,
    ctrl_free: u64,
    die_free: Vec<u64>,
    ch_free: Vec<u64>,
    /// Buffered sectors not yet programmed.
    dirty: u64,
    /// When the last page program scheduled so far finishes (what a flush waits for).
    last_program: u64,
    /// Commands waiting for the controller or (with queueing off) for the previous one.
    waiting: VecDeque<(u64, u16, Cmd)>,
    /// Writes waiting for buffer room.
    blocked: VecDeque<(u16, Cmd)>,
    /// Scheduled completions: (time, order, hw, id).
    done: BinaryHeap<Reverse<(u64, u64, u16, u64)>>,
    /// Buffer drain events: (time a page program finishes, sectors freed).
    drains: BinaryHeap<Reverse<(u64, u64)>>,
    seq: u64,
    busy: bool,
    outstanding: u32,
    rng: SimRng,
    reads: u64,
    writes: u64,
    programs: u64,
}

impl SsdModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<SsdModel, ModelError> {
        let m = "ssd";
        let size = ranged(p, m, "size", 1_000_000_000_000, 1 << 30, 1 << 50)?;
        let channels = ranged(p, m, "channels", 8, 1, 64)? as u32;
        let dies = ranged(p, m, "dies", 4, 1, 64)? as u32;
        let page_kb = ranged(p, m, "page_kb", 16, 4, 64)?;
        Ok(SsdModel {
            capacity: size / 512,
            channels,
            dies_per_ch: dies,
            read_ns: ranged(p, m, "read_us", 60, 1, 100_000)? * 1000,
            program_ns: ranged(p, m, "program_us", 700, 1, 100_000)? * 1000,
            page_sectors: page_kb * 2,
            channel_mbs: ranged(p, m, "channel_mbs", 800, 1, 100_000)?,
            ctrl_ns: ranged(p, m, "ctrl_ns", 3578, 0, 10_000_000)?,
            wbuf_sectors: ranged(p, m, "wbuf_mb", 64, 0, 1 << 20)? * 2048,
            depth: ranged(p, m, "queue_depth", 128, 1, 4096)? as u32,
            nr_hw: ranged(p, m, "hw_queues", 1, 1, 256)? as u16,
            queueing: p.bool("queueing", true)?,
            mdts_kb: ranged(p, m, "mdts_kb", 0, 0, 1 << 22)? as u32,
            rotational: p.bool("rotational", false)?,
            ctrl_free: 0,
            die_free: vec![0; (channels * dies) as usize],
            ch_free: vec![0; channels as usize],
            dirty: 0,
            last_program: 0,
            waiting: VecDeque::new(),
            blocked: VecDeque::new(),
            done: BinaryHeap::new(),
            drains: BinaryHeap::new(),
            seq: 0,
            busy: false,
            outstanding: 0,
            rng,
            reads: 0,
            writes: 0,
            programs: 0,
        })
    }

    fn die_of(&self, sector: u64) -> usize {
        let page = sector / self.page_sectors;
        // Pages stripe across channels first, then dies.
        (page % (self.channels * self.dies_per_ch) as u64) as usize
    }

    fn xfer_ns(&self, sectors: u64) -> u64 {
        sectors * 512 * 1000 / self.channel_mbs
    }

    fn finish(&mut self, t: u64, hw: u16, id: u64) {
        self.seq += 1;
        self.done.push(Reverse((t, self.seq, hw, id)));
    }

    /// Runs one command through the controller and flash, starting no earlier than `t`.
    fn process(&mut self, t: u64, hw: u16, cmd: Cmd) {
        let start = t.max(self.ctrl_free);
        self.ctrl_free = start + self.ctrl_ns;
        let t0 = self.ctrl_free;
        let n = cmd.nr_sectors.max(1) as u64;
        match cmd.op {
            ReqOp::Read => {
                self.reads += 1;
                // Each page of the read on its die, transfers on the die's channel.
                let mut end = t0;
                let mut s = cmd.sector;
                let last = cmd.sector + n;
                while s < last {
                    let page_end = (s / self.page_sectors + 1) * self.page_sectors;
                    let chunk = page_end.min(last) - s;
                    let d = self.die_of(s);
                    let ch = d % self.channels as usize;
                    let jitter = self.rng.below(self.read_ns / 20 + 1);
                    let read_done = t0.max(self.die_free[d]) + self.read_ns + jitter;
                    self.die_free[d] = read_done;
                    let x = read_done.max(self.ch_free[ch]) + self.xfer_ns(chunk);
                    self.ch_free[ch] = x;
                    end = end.max(x);
                    s += chunk;
                }
                self.finish(end, hw, cmd.id);
            }
            ReqOp::Write | ReqOp::WriteZeroes | ReqOp::ZoneAppend => {
                self.writes += 1;
                // A write larger than the whole buffer goes through once the buffer is empty.
                if self.dirty > 0 && self.dirty + n > self.wbuf_sectors {
                    self.blocked.push_back((hw, cmd));
                    return;
                }
                self.dirty += n;
                let ch = self.die_of(cmd.sector) % self.channels as usize;
                let x = t0.max(self.ch_free[ch]) + self.xfer_ns(n);
                self.ch_free[ch] = x;
                // Program the buffered data page by page onto the dies, in the background.
                let mut s = cmd.sector;
                let last = cmd.sector + n;
                let mut programmed = x;
                while s < last {
                    let page_end = (s / self.page_sectors + 1) * self.page_sectors;
                    let chunk = page_end.min(last) - s;
                    let d = self.die_of(s);
                    let p = x.max(self.die_free[d]) + self.program_ns * chunk / self.page_sectors;
                    programmed = programmed.max(p);
                    self.die_free[d] = p;
                    self.last_program = self.last_program.max(p);
                    self.programs += 1;
                    self.drains.push(Reverse((p, chunk)));
                    s += chunk;
                }
                let fua_end = if cmd.fua { programmed } else { x };
                self.finish(fua_end, hw, cmd.id);
            }
            ReqOp::Flush => {
                // Done when everything buffered is on flash.
                self.finish(self.last_program.max(t0), hw, cmd.id);
            }
            // This model has no zones: the block layer never sends it zone commands.
            ReqOp::Discard
            | ReqOp::ZoneReset
            | ReqOp::ZoneResetAll
            | ReqOp::ZoneOpen
            | ReqOp::ZoneClose
            | ReqOp::ZoneFinish => self.finish(t0, hw, cmd.id),
        }
    }

    fn next_internal(&self) -> Option<u64> {
        [
            self.done.peek().map(|r| r.0 .0),
            self.drains.peek().map(|r| r.0 .0),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

impl DeviceModel for SsdModel {
    /// `nvme_set_ctrl_limits` for NVMe over PCIe as of Linux 6.18: segments must meet at the
    /// controller's 4 KiB pages (`virt_boundary_mask`, the PRP rule) and may be of any
    /// size; at most 256 of them (`NVME_MAX_SEGS`, a page of SGL descriptors); requests up
    /// to the controller's MDTS and the driver's `NVME_MAX_KB_SZ` (8 MiB), capped by the
    /// block layer's default.
    fn queue_limits(&self) -> QueueLimits {
        let hw_kb = match self.mdts_kb {
            0 => 8192,
            kb => kb.min(8192),
        };
        let defaults = QueueLimits::default();
        QueueLimits {
            max_segments: 256,
            max_segment_size: u32::MAX,
            virt_boundary_mask: 4095,
            max_sectors: defaults.max_sectors.min(hw_kb * 2),
            ..defaults
        }
    }
    fn name(&self) -> &'static str {
        "ssd"
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }
    fn rotational(&self) -> bool {
        self.rotational
    }
    /// The DRAM write buffer is a volatile cache; NVMe writes carry FUA.
    fn write_cache(&self) -> bool {
        true
    }
    fn fua(&self) -> bool {
        true
    }
    fn nr_hw_queues(&self) -> u16 {
        self.nr_hw
    }
    fn queue_depth(&self) -> u32 {
        self.depth
    }
    fn max_outstanding(&self) -> u32 {
        if self.queueing {
            self.depth * self.nr_hw as u32
        } else {
            1
        }
    }
    fn driver_cost(&self) -> DriverCost {
        DriverCost {
            queue_rq_ns: 250,
            doorbell_ns: 100,
            irq_ns: 1000,
            hw_lock: false,
            lock_waiter_ns: 0,
            completions: crate::CompletionCpu::Mapped,
            complete_ns: 0,
            worker_wake_ns: 0,
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        self.outstanding += 1;
        if self.queueing {
            self.process(now.0, hw, cmd);
        } else {
            self.waiting.push_back((now.0, hw, cmd));
            if !self.busy {
                self.busy = true;
                let (t, hw, cmd) = self.waiting.pop_front().expect("just queued");
                self.process(t, hw, cmd);
            }
        }
    }
    fn next_event(&self) -> Option<Nanos> {
        self.next_internal().map(Nanos)
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        while let Some(t) = self.next_internal().filter(|&t| t <= now.0) {
            if self.drains.peek().is_some_and(|r| r.0 .0 == t) {
                let Reverse((_, n)) = self.drains.pop().expect("drain");
                self.dirty -= n;
                // Room in the buffer: admit blocked writes.
                while let Some(&(hw, cmd)) = self.blocked.front() {
                    if self.dirty > 0 && self.dirty + cmd.nr_sectors as u64 > self.wbuf_sectors {
                        break;
                    }
                    self.blocked.pop_front();
                    self.writes -= 1;
                    self.process(t, hw, cmd);
                }
                continue;
            }
            let Reverse((t, _, hw, id)) = self.done.pop().expect("completion");
            self.outstanding -= 1;
            out.push(DevCompletion {
                hw,
                id,
                status: BlkStatus::Ok,
            });
            if !self.queueing {
                self.busy = false;
                if let Some((_, hw, cmd)) = self.waiting.pop_front() {
                    self.busy = true;
                    self.process(t, hw, cmd);
                }
            }
        }
    }
    fn outstanding(&self) -> u32 {
        self.outstanding
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("reads", self.reads),
            ("writes", self.writes),
            ("page_programs", self.programs),
            ("buffered_sectors", self.dirty),
        ]
    }
}
