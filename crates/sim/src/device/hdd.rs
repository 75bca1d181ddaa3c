//! `hdd`: a 7200 rpm SATA disk with one actuator.
//!
//! Positioning time is a seek that grows with the square root of the distance (track to
//! track 0.6 ms, full stroke 16 ms, so a random seek averages ~8.8 ms as datasheets of 1 TB
//! 7200 rpm disks give), then the rotational wait from the platter's real angle at that time
//! to the target sector's angle. Media rate falls linearly from the outer zone (200 MB/s) to
//! the inner (100 MB/s). After a read the drive keeps reading ahead into its buffer
//! (`readahead_kb`, 512 KiB), so a sequential reader is served from cache at interface speed
//! (600 MB/s, SATA III) once the data has passed under the head. Writes go to the write
//! cache (on by default) and complete after the transfer; the mechanical work of writing them
//! out still occupies the disk before later commands. FUA writes and flushes wait for it.
//! With `ncq=N` (N > 1) the disk holds up to N commands and serves the one it can reach
//! soonest (shortest positioning time first); `ncq=1` serves them in arrival order.
//!
//! Parameters: `size` (bytes, 1 TB), `rpm` (7200), `track_to_track_us` (600),
//! `full_stroke_us` (16000), `outer_mbs` (200), `inner_mbs` (100), `readahead_kb` (512),
//! `iface_mbs` (600), `cmd_us` (50, controller overhead per command), `ncq` (1),
//! `write_cache` (1), `queue_depth` (32: driver tags; the disk itself takes `ncq`).

use super::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use crate::rng::SimRng;
use mqblk_core::{BlkStatus, Nanos, ReqOp};
use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct HddParams {
    pub size: u64,
    pub rpm: u64,
    pub t2t_ns: u64,
    pub full_ns: u64,
    pub outer_mbs: u64,
    pub inner_mbs: u64,
    pub readahead_sectors: u64,
    pub iface_mbs: u64,
    pub cmd_ns: u64,
    pub ncq: u32,
    pub write_cache: bool,
    pub queue_depth: u32,
}

impl HddParams {
    pub fn from_params(p: &mut Params<'_>) -> Result<HddParams, String> {
        let hp = HddParams {
            size: p.u64("size", 1_000_000_000_000)?,
            rpm: p.u64("rpm", 7200)?,
            t2t_ns: p.u64("track_to_track_us", 600)? * 1000,
            full_ns: p.u64("full_stroke_us", 16_000)? * 1000,
            outer_mbs: p.u64("outer_mbs", 200)?,
            inner_mbs: p.u64("inner_mbs", 100)?,
            readahead_sectors: p.u64("readahead_kb", 512)? * 2,
            iface_mbs: p.u64("iface_mbs", 600)?,
            cmd_ns: p.u64("cmd_us", 50)? * 1000,
            ncq: p.u64("ncq", 1)? as u32,
            write_cache: p.bool("write_cache", true)?,
            queue_depth: p.u64("queue_depth", 32)? as u32,
        };
        if hp.size < 1 << 30 {
            return Err(format!("device hdd: size={}: at least 1 GiB", hp.size));
        }
        if !(1000..=20000).contains(&hp.rpm) {
            return Err(format!("device hdd: rpm={}: must be 1000..=20000", hp.rpm));
        }
        if hp.outer_mbs == 0 || hp.inner_mbs == 0 || hp.iface_mbs == 0 {
            return Err("device hdd: outer_mbs, inner_mbs and iface_mbs must be positive".into());
        }
        if hp.full_ns < hp.t2t_ns {
            return Err("device hdd: full_stroke_us must be at least track_to_track_us".into());
        }
        if !(1..=256).contains(&hp.ncq) || !(1..=4096).contains(&hp.queue_depth) {
            return Err("device hdd: ncq must be 1..=256 and queue_depth 1..=4096".into());
        }
        Ok(hp)
    }
}

/// The mechanism: head position, platter, cache. Shared with `raid`'s member disk.
pub struct Disk {
    p: HddParams,
    capacity: u64,
    rev_ns: u64,
    head: u64,
    /// The mechanism is busy until then (a command or write-back in progress).
    busy_until: u64,
    /// Read-ahead: sectors [ra_start, ra_end) stream in from `ra_time` at media rate.
    ra_start: u64,
    ra_end: u64,
    ra_time: u64,
    queue: VecDeque<(u16, Cmd, u64)>,
    /// The command in service: (hw, cmd, completion time).
    current: Option<(u16, Cmd, u64)>,
    /// Cached writes complete early; (hw, id, time) waiting to be reported.
    early: VecDeque<(u64, u16, u64)>,
    rng: SimRng,
    pub seeks: u64,
    pub cache_hits: u64,
    pub busy_ns: u64,
    pub completed: u64,
}

impl Disk {
    pub fn new(p: HddParams, rng: SimRng) -> Disk {
        Disk {
            capacity: p.size / 512,
            rev_ns: 60_000_000_000 / p.rpm,
            p,
            head: 0,
            busy_until: 0,
            ra_start: 0,
            ra_end: 0,
            ra_time: 0,
            queue: VecDeque::new(),
            current: None,
            early: VecDeque::new(),
            rng,
            seeks: 0,
            cache_hits: 0,
            busy_ns: 0,
            completed: 0,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Media rate at `lba` in bytes per ns.
    fn rate(&self, lba: u64) -> f64 {
        let f = lba as f64 / self.capacity as f64;
        let mbs = self.p.outer_mbs as f64 + (self.p.inner_mbs as f64 - self.p.outer_mbs as f64) * f;
        mbs * 1e6 / 1e9
    }

    fn seek_ns(&self, from: u64, to: u64) -> u64 {
        if from == to {
            return 0;
        }
        let frac = from.abs_diff(to) as f64 / self.capacity as f64;
        // Within a cylinder's worth of sectors: a head switch, no arm movement.
        if frac < 1e-6 {
            return self.p.t2t_ns / 4;
        }
        self.p.t2t_ns + ((self.p.full_ns - self.p.t2t_ns) as f64 * frac.sqrt()) as u64
    }

    /// The sector's angle as a fraction of a turn (sectors per track from the zone's rate).
    fn angle(&self, lba: u64) -> f64 {
        let spt = (self.rate(lba) * self.rev_ns as f64 / 512.0).max(1.0);
        (lba as f64 % spt) / spt
    }

    /// Positioning time to `lba` starting at `t`: seek then rotational wait.
    fn position_ns(&self, lba: u64, t: u64) -> u64 {
        let seek = self.seek_ns(self.head, lba);
        let at = t + seek;
        let platter = (at % self.rev_ns) as f64 / self.rev_ns as f64;
        let mut wait = self.angle(lba) - platter;
        if wait < 0.0 {
            wait += 1.0;
        }
        seek + (wait * self.rev_ns as f64) as u64
    }

    fn media_ns(&self, lba: u64, sectors: u32) -> u64 {
        (sectors as f64 * 512.0 / self.rate(lba)) as u64
    }

    fn iface_ns(&self, sectors: u32) -> u64 {
        sectors as u64 * 512 * 1000 / self.p.iface_mbs / 1000
    }

    pub fn submit(&mut self, hw: u16, cmd: Cmd, now: u64) {
        let dirty: u64 = self
            .queue
            .iter()
            .filter(|q| q.1.id == u64::MAX)
            .map(|q| q.1.nr_sectors as u64)
            .sum();
        // A full write cache (8 MiB of unwritten data) makes writes wait like reads.
        if cmd.op == ReqOp::Write && self.p.write_cache && !cmd.fua && dirty < 16384 {
            // Taken into the cache: done after the transfer; written out behind the scenes.
            let done = now + self.p.cmd_ns + self.iface_ns(cmd.nr_sectors);
            self.early.push_back((done, hw, cmd.id));
            self.queue.push_back((
                hw,
                Cmd {
                    id: u64::MAX,
                    ..cmd
                },
                now,
            ));
        } else {
            self.queue.push_back((hw, cmd, now));
        }
        self.start(now);
    }

    /// Starts the next command if the mechanism is idle.
    fn start(&mut self, now: u64) {
        if self.current.is_some() || self.queue.is_empty() {
            return;
        }
        let t = now.max(self.busy_until);
        // NCQ: of the first `ncq` commands, the one reachable soonest; ties by arrival.
        let window = (self.p.ncq as usize).min(self.queue.len());
        let pick = if window <= 1 {
            0
        } else {
            (0..window)
                .min_by_key(|&i| (self.position_ns(self.queue[i].1.sector, t), i))
                .unwrap_or(0)
        };
        let (hw, cmd, _) = self.queue.remove(pick).expect("picked from the queue");
        let done = self.service(cmd, t);
        self.busy_ns += done - t;
        self.busy_until = done;
        self.current = Some((hw, cmd, done));
    }

    /// When `cmd`, started at `t`, completes; moves the head.
    fn service(&mut self, cmd: Cmd, t: u64) -> u64 {
        let n = cmd.nr_sectors.max(1);
        match cmd.op {
            ReqOp::Read => {
                let end = cmd.sector + n as u64;
                if cmd.sector >= self.ra_start && end <= self.ra_end {
                    // In the read-ahead window: wait for the data to stream in if needed.
                    self.cache_hits += 1;
                    let avail =
                        self.ra_time + self.media_ns(self.ra_start, (end - self.ra_start) as u32);
                    let done = t.max(avail) + self.p.cmd_ns / 2 + self.iface_ns(n);
                    self.extend_readahead(end, done);
                    return done;
                }
                let pos = self.position_ns(cmd.sector, t + self.p.cmd_ns);
                if pos > self.p.t2t_ns / 4 {
                    self.seeks += 1;
                }
                // A little jitter in settle time, as real drives have.
                let jitter = self.rng.below(self.p.t2t_ns / 10 + 1);
                let media_done = t + self.p.cmd_ns + pos + jitter + self.media_ns(cmd.sector, n);
                self.head = end;
                self.ra_start = end;
                self.ra_end = (end + self.p.readahead_sectors).min(self.capacity);
                self.ra_time = media_done;
                media_done
                    + self
                        .iface_ns(n)
                        .saturating_sub(self.media_ns(cmd.sector, n))
            }
            ReqOp::Write | ReqOp::WriteZeroes => {
                let pos = self.position_ns(cmd.sector, t + self.p.cmd_ns);
                if pos > self.p.t2t_ns / 4 {
                    self.seeks += 1;
                }
                let done = t + self.p.cmd_ns + pos + self.media_ns(cmd.sector, n);
                self.head = cmd.sector + n as u64;
                // Writing over the read-ahead window invalidates it.
                self.ra_end = self.ra_start;
                done
            }
            // The cache is written through by the time a flush starts (writes occupy the
            // mechanism in order), so a flush costs a command; a discard is a no-op.
            ReqOp::Flush | ReqOp::Discard => t + self.p.cmd_ns,
        }
    }

    fn extend_readahead(&mut self, end: u64, t: u64) {
        // A sequential reader keeps the drive reading ahead.
        if self.ra_end < self.capacity && end + self.p.readahead_sectors / 2 > self.ra_end {
            self.ra_end = (end + self.p.readahead_sectors).min(self.capacity);
        }
        self.head = self.ra_end;
        let _ = t;
    }

    pub fn next_event(&self) -> Option<u64> {
        let a = self.current.map(|c| c.2);
        let b = self.early.front().map(|e| e.0);
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Completions up to `now`: (hw, id), in time order.
    pub fn advance(&mut self, now: u64, out: &mut Vec<(u16, u64)>) {
        loop {
            let cur = self.current.map(|c| c.2);
            let early = self.early.front().map(|e| e.0);
            let next = match (cur, early) {
                (Some(c), Some(e)) => c.min(e),
                (c, e) => match c.or(e) {
                    Some(t) => t,
                    None => return,
                },
            };
            if next > now {
                return;
            }
            if early == Some(next) {
                let (_, hw, id) = self.early.pop_front().expect("early write");
                self.completed += 1;
                out.push((hw, id));
                continue;
            }
            let (hw, cmd, done) = self.current.take().expect("current command");
            if cmd.id != u64::MAX {
                self.completed += 1;
                out.push((hw, cmd.id));
            }
            self.start(done);
        }
    }

    pub fn outstanding(&self) -> u32 {
        (self.queue.iter().filter(|q| q.1.id != u64::MAX).count()
            + usize::from(self.current.is_some_and(|c| c.1.id != u64::MAX))
            + self.early.len()) as u32
    }
}

pub struct HddModel {
    disk: Disk,
    ncq: u32,
    depth: u32,
    scratch: Vec<(u16, u64)>,
}

impl HddModel {
    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<HddModel, String> {
        let hp = HddParams::from_params(p)?;
        Ok(HddModel {
            ncq: hp.ncq,
            depth: hp.queue_depth,
            disk: Disk::new(hp, rng),
            scratch: Vec::new(),
        })
    }
}

impl DeviceModel for HddModel {
    fn name(&self) -> &'static str {
        "hdd"
    }
    fn capacity_sectors(&self) -> u64 {
        self.disk.capacity()
    }
    fn rotational(&self) -> bool {
        true
    }
    fn nr_hw_queues(&self) -> u16 {
        1
    }
    fn queue_depth(&self) -> u32 {
        self.depth
    }
    fn max_outstanding(&self) -> u32 {
        // Without NCQ the host issues one command at a time.
        self.ncq
    }
    fn driver_cost(&self) -> DriverCost {
        DriverCost {
            queue_rq_ns: 800,
            doorbell_ns: 200,
            irq_ns: 1500,
            hw_lock: false,
            lock_waiter_ns: 0,
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        self.disk.submit(hw, cmd, now.0);
    }
    fn next_event(&self) -> Option<Nanos> {
        self.disk.next_event().map(Nanos)
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        self.scratch.clear();
        self.disk.advance(now.0, &mut self.scratch);
        out.extend(self.scratch.iter().map(|&(hw, id)| DevCompletion {
            hw,
            id,
            status: BlkStatus::Ok,
        }));
    }
    fn outstanding(&self) -> u32 {
        self.disk.outstanding()
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("completed", self.disk.completed),
            ("seeks", self.disk.seeks),
            ("readahead_hits", self.disk.cache_hits),
            ("busy_ms", self.disk.busy_ns / 1_000_000),
        ]
    }
}
