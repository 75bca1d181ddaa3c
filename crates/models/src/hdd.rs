//! `hdd`: a 7200 rpm SATA disk with one actuator, a segmented read cache and a write cache.
//!
//! Geometry. Recording density is constant along the radius, so a track's capacity and the
//! media rate grow with its radius: `outer_mbs` at the outer edge (LBA 0) down to
//! `inner_mbs` at the inner edge. That fixes where every LBA sits: its radius, its cylinder
//! (`heads` surfaces per cylinder, as many cylinders as the capacity needs) and its angle on
//! the track.
//!
//! Positioning. A seek covering a fraction `d` of the stroke takes `track_to_track_us` for one
//! cylinder, grows with `sqrt(d)` while the arm accelerates (short seeks, up to a quarter of
//! the stroke) and linearly beyond (the arm coasts), reaching `full_stroke_us`; the two
//! coefficients are solved at build time so that the average over all pairs of cylinders
//! (the datasheets' weighted average) is `avg_seek_us`. Writes settle `write_settle_us`
//! longer. The rotational wait is the real one: the platter's angle follows from the virtual
//! time (`rpm`), the target sector's angle from its place on its track, and the head waits for
//! one to reach the other. Seek settle varies a little (up to a tenth of a track-to-track seek,
//! drawn from the model's generator).
//!
//! Read cache. `cache_segments` segments each hold one run of sectors. After a read from the
//! media the drive keeps reading ahead (`readahead_kb`) into that read's segment while it has
//! nothing else to do, and waits there when the window is full. A read that falls in a
//! segment, or starts inside the read-ahead's window or right where it ends, is served from
//! the buffer at interface speed (`iface_mbs`), once the read-ahead has brought its data
//! under the head, and pushes the read-ahead further. Any other media access stops the
//! read-ahead where it got to. Writes drop the segments they overlap.
//!
//! Write cache (`write_cache=1`, the default on SATA disks). A write that is not FUA completes
//! once it has crossed the link; the drive writes it to the media in the background, merging
//! writes that continue each other, until `dirty_limit_kb` of unwritten data make further
//! writes wait for the media. A flush completes when every write that came before it is on
//! the media.
//!
//! Command queueing. The drive serves, of the first `ncq` host commands and the cached writes
//! waiting near the head of its queue, the one it can reach soonest (cache hits first, then
//! the shortest seek plus rotation), except that the oldest host command goes next once it
//! has waited 500 ms, and nothing is reordered across a flush. With `ncq=1` the host issues
//! one command at a time (`max_outstanding` is `ncq`; `queue_depth` is the driver's tags per
//! hardware queue).
//!
//! Defaults and their sources are in `crates/models/DEVICES.md`.

use crate::ModelError;
use crate::SimRng;
use crate::{Cmd, DevCompletion, DeviceModel, DriverCost, Params};
use mqblk_core::{BlkStatus, Nanos, QueueLimits, ReqOp};
use std::collections::VecDeque;

/// Reads an integer parameter and checks its range, naming the key on error.
pub(super) fn ranged(
    p: &mut Params<'_>,
    _model: &str,
    key: &str,
    default: u64,
    lo: u64,
    hi: u64,
) -> Result<u64, ModelError> {
    p.ranged(key, default, lo, hi)
}

/// Seeks up to this fraction of the stroke follow the square-root law, longer ones are linear.
const SQRT_PART: f64 = 0.25;
/// A command that has waited this long is served next, whatever NCQ would pick.
const NCQ_AGE_NS: u64 = 500_000_000;
/// How far into the queue the drive looks for its next command.
const PICK_SCAN: usize = 64;
/// Cached writes that continue each other are written back as one, up to this many sectors.
const WRITEBACK_MERGE_MAX: u32 = 2048;

#[derive(Clone, Debug)]
pub struct HddParams {
    pub size: u64,
    pub rpm: u64,
    pub heads: u64,
    pub t2t_ns: u64,
    pub avg_seek_ns: u64,
    pub full_ns: u64,
    pub write_settle_ns: u64,
    pub outer_mbs: u64,
    pub inner_mbs: u64,
    pub readahead_sectors: u64,
    pub segments: usize,
    pub iface_mbs: u64,
    pub cmd_ns: u64,
    pub ncq: u32,
    pub write_cache: bool,
    pub dirty_limit_sectors: u64,
}

impl HddParams {
    /// The disk's parameters as `model` (`hdd`, or `raid` for its member disk) spells them;
    /// `ncq_default` is the NCQ depth and `cache_default` whether the kernel sees a
    /// volatile write cache, when the spec does not say.
    pub fn from_params(
        p: &mut Params<'_>,
        model: &str,
        ncq_default: u32,
        cache_default: bool,
    ) -> Result<HddParams, ModelError> {
        let us = 1000;
        let hp = HddParams {
            size: ranged(p, model, "size", 1_000_000_000_000, 1 << 30, 1 << 50)?,
            rpm: ranged(p, model, "rpm", 7200, 1000, 20_000)?,
            heads: ranged(p, model, "heads", 4, 1, 64)?,
            t2t_ns: ranged(p, model, "track_to_track_us", 1000, 1, 100_000)? * us,
            avg_seek_ns: ranged(p, model, "avg_seek_us", 8500, 1, 1_000_000)? * us,
            full_ns: ranged(p, model, "full_stroke_us", 15_000, 1, 1_000_000)? * us,
            write_settle_ns: ranged(p, model, "write_settle_us", 1000, 0, 100_000)? * us,
            outer_mbs: ranged(p, model, "outer_mbs", 210, 1, 100_000)?,
            inner_mbs: ranged(p, model, "inner_mbs", 100, 1, 100_000)?,
            readahead_sectors: ranged(p, model, "readahead_kb", 2048, 0, 1 << 20)? * 2,
            segments: ranged(p, model, "cache_segments", 16, 1, 256)? as usize,
            iface_mbs: ranged(p, model, "iface_mbs", 600, 1, 100_000)?,
            cmd_ns: ranged(p, model, "cmd_us", 50, 0, 100_000)? * us,
            ncq: ranged(p, model, "ncq", ncq_default as u64, 1, 256)? as u32,
            write_cache: p.bool("write_cache", cache_default)?,
            dirty_limit_sectors: ranged(p, model, "dirty_limit_kb", 8192, 4, 1 << 20)? * 2,
        };
        if hp.inner_mbs > hp.outer_mbs {
            return Err(ModelError::Invalid(format!(
                "device {model}: inner_mbs={}: must not exceed outer_mbs={}",
                hp.inner_mbs, hp.outer_mbs
            )));
        }
        if !(hp.t2t_ns < hp.avg_seek_ns && hp.avg_seek_ns < hp.full_ns) {
            return Err(ModelError::Invalid(format!(
                "device {model}: avg_seek_us={}: must lie between track_to_track_us={} and full_stroke_us={}",
                hp.avg_seek_ns / us,
                hp.t2t_ns / us,
                hp.full_ns / us
            )));
        }
        Ok(hp)
    }
}

/// The seek-time curve: `t2t` for one cylinder, `t2t + a (sqrt d - sqrt d1)` up to
/// [`SQRT_PART`], then a straight line to `full` at `d = 1`.
#[derive(Clone, Copy, Debug)]
struct SeekCurve {
    t2t: f64,
    a: f64,
    sqrt_d1: f64,
    s0: f64,
    c: f64,
}

impl SeekCurve {
    fn with_a(t2t: f64, full: f64, d1: f64, a: f64) -> SeekCurve {
        let sqrt_d1 = d1.sqrt();
        let s0 = t2t + a * (SQRT_PART.sqrt() - sqrt_d1);
        SeekCurve {
            t2t,
            a,
            sqrt_d1,
            s0,
            c: (full - s0) / (1.0 - SQRT_PART),
        }
    }

    /// The mean over seek distances weighted as between two uniformly random cylinders
    /// (density `2 (1 - d)`), in closed form.
    fn mean(&self) -> f64 {
        let d0 = SQRT_PART;
        let l = 1.0 - d0;
        let short = (self.t2t - self.a * self.sqrt_d1) * (2.0 * d0 - d0 * d0)
            + self.a * 2.0 * (2.0 / 3.0 * d0.powf(1.5) - 2.0 / 5.0 * d0.powf(2.5));
        let long = self.s0 * l * l + self.c * l * l * l / 3.0;
        short + long
    }

    /// Solves for the square-root coefficient that gives the wanted mean (the mean is linear
    /// in it).
    fn fit(p: &HddParams, model: &str, d1: f64) -> Result<SeekCurve, ModelError> {
        let (t2t, avg, full) = (p.t2t_ns as f64, p.avg_seek_ns as f64, p.full_ns as f64);
        let m0 = SeekCurve::with_a(t2t, full, d1, 0.0).mean();
        let m1 = SeekCurve::with_a(t2t, full, d1, 1.0).mean();
        let a = (avg - m0) / (m1 - m0);
        let curve = SeekCurve::with_a(t2t, full, d1, a);
        if !(a >= 0.0 && curve.c >= 0.0) {
            return Err(ModelError::Invalid(format!(
                "device {model}: avg_seek_us={}: no seek curve from track_to_track_us={} to full_stroke_us={} has that average",
                p.avg_seek_ns / 1000,
                p.t2t_ns / 1000,
                p.full_ns / 1000
            )));
        }
        Ok(curve)
    }

    fn at(&self, d: f64) -> f64 {
        if d <= SQRT_PART {
            self.t2t + self.a * (d.sqrt() - self.sqrt_d1).max(0.0)
        } else {
            self.s0 + self.c * (d - SQRT_PART)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Host,
    /// A cached write going to the media; its host command has completed.
    WriteBack,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    hw: u16,
    cmd: Cmd,
    arrived: u64,
    kind: Kind,
    /// Where `cmd.sector` is, worked out once on arrival.
    place: Place,
}

/// Where a sector is on the platters: its cylinder, its angle on the track (a fraction of a
/// turn) and the media rate there (bytes per ns).
#[derive(Clone, Copy, Debug)]
struct Place {
    cyl: u64,
    angle: f64,
    rate: f64,
}

/// The mechanism as the drive sees it when choosing what to do next at `t`.
#[derive(Clone, Copy, Debug)]
struct Snapshot {
    t: u64,
    head_cyl: u64,
    stream: Option<Stream>,
}

/// One read-cache segment: sectors `[start, end)` are in the buffer.
#[derive(Clone, Copy, Debug, Default)]
struct Segment {
    start: u64,
    end: u64,
    used: u64,
}

/// The read-ahead in progress into segment `seg`: sectors from `lba` come under the head
/// from time `at` on, up to `limit`.
#[derive(Clone, Copy, Debug)]
struct Stream {
    seg: usize,
    lba: u64,
    at: u64,
    limit: u64,
}

/// The mechanism: actuator, platters, buffer. Shared with `raid`'s member disk.
pub struct Disk {
    p: HddParams,
    capacity: u64,
    rev_ns: u64,
    /// Inner radius over outer radius (= inner over outer media rate).
    k: f64,
    cylinders: f64,
    seek: SeekCurve,
    /// The LBA under the head when the mechanism last stopped.
    head: u64,
    queue: VecDeque<Pending>,
    /// The command in service and when it completes.
    current: Option<(Pending, u64)>,
    /// Cached writes acknowledged to the host: (time, hw, id), in time order.
    early: VecDeque<(u64, u16, u64)>,
    /// The host link is busy until then (cached writes cross it one after another).
    link_free: u64,
    segs: Vec<Segment>,
    stream: Option<Stream>,
    stamp: u64,
    /// Cached sectors not yet on the media.
    dirty: u64,
    host_outstanding: u32,
    rng: SimRng,
    pub seeks: u64,
    pub cache_hits: u64,
    pub busy_ns: u64,
    pub completed: u64,
    pub written_back: u64,
}

impl Disk {
    pub fn new(p: HddParams, model: &str, rng: SimRng) -> Result<Disk, ModelError> {
        let rev_ns = 60_000_000_000 / p.rpm;
        // Mean bytes per track over the cylinders (the rate falls linearly with the radius).
        let track_bytes = (p.outer_mbs + p.inner_mbs) as f64 / 2.0 * 1e6 * rev_ns as f64 / 1e9;
        let cylinders = (p.size as f64 / (track_bytes * p.heads as f64)).max(1.0);
        let seek = SeekCurve::fit(&p, model, 1.0 / cylinders)?;
        Ok(Disk {
            capacity: p.size / 512,
            rev_ns,
            k: p.inner_mbs as f64 / p.outer_mbs as f64,
            cylinders,
            seek,
            segs: vec![Segment::default(); p.segments],
            p,
            head: 0,
            queue: VecDeque::new(),
            current: None,
            early: VecDeque::new(),
            link_free: 0,
            stream: None,
            stamp: 0,
            dirty: 0,
            host_outstanding: 0,
            rng,
            seeks: 0,
            cache_hits: 0,
            busy_ns: 0,
            completed: 0,
            written_back: 0,
        })
    }

    /// `write_cache=1`: writes are acknowledged from the drive's cache.
    pub fn write_cache(&self) -> bool {
        self.p.write_cache
    }
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn ncq(&self) -> u32 {
        self.p.ncq
    }

    /// Radius (outer edge 1) of the track holding `lba`: the sectors outside radius `r` are
    /// proportional to `1 - r^2`.
    fn radius(&self, lba: u64) -> f64 {
        let f = (lba as f64 / self.capacity as f64).min(1.0);
        (1.0 - f * (1.0 - self.k * self.k)).sqrt()
    }

    /// The fraction of the stroke from the outer edge to `lba`'s cylinder.
    fn stroke(&self, lba: u64) -> f64 {
        if self.k >= 1.0 {
            return lba as f64 / self.capacity as f64;
        }
        (1.0 - self.radius(lba)) / (1.0 - self.k)
    }

    fn cylinder(&self, lba: u64) -> u64 {
        ((self.stroke(lba) * self.cylinders) as u64).min(self.cylinders as u64 - 1)
    }

    /// `lba`'s cylinder, its angle (its offset from the start of the cylinder, in sectors per
    /// track of that cylinder) and the media rate there.
    fn place(&self, lba: u64) -> Place {
        let cyl = self.cylinder(lba);
        let x = cyl as f64 / self.cylinders;
        let r = 1.0 - x * (1.0 - self.k);
        let first = if self.k >= 1.0 {
            x * self.capacity as f64
        } else {
            (1.0 - r * r) / (1.0 - self.k * self.k) * self.capacity as f64
        };
        let rate = self.p.outer_mbs as f64 * r * 1e-3;
        let spt = (rate * self.rev_ns as f64 / 512.0).max(1.0);
        Place {
            cyl,
            angle: ((lba as f64 - first).max(0.0) / spt).fract(),
            rate,
        }
    }

    /// Media rate on `lba`'s cylinder in bytes per ns.
    fn rate(&self, lba: u64) -> f64 {
        self.place(lba).rate
    }

    /// Seek time between two cylinders, in ns.
    fn seek_cyl(&self, a: u64, b: u64) -> u64 {
        if a == b {
            return 0;
        }
        self.seek.at(a.abs_diff(b) as f64 / self.cylinders) as u64
    }

    /// Seek time between two LBAs, in ns (no rotation): 0 on the same cylinder.
    pub fn seek_ns(&self, from: u64, to: u64) -> u64 {
        self.seek_cyl(self.cylinder(from), self.cylinder(to))
    }

    fn snapshot(&self, t: u64) -> Snapshot {
        Snapshot {
            t,
            head_cyl: self.cylinder(self.head_at(t)),
            stream: self.stream_for(t),
        }
    }

    /// Where the head is at `t`: the read-ahead moves it along.
    fn head_at(&self, t: u64) -> u64 {
        match self.stream {
            Some(s) => self.filled(s, t),
            None => self.head,
        }
    }

    /// How far the read-ahead `s` has read by `t`.
    fn filled(&self, s: Stream, t: u64) -> u64 {
        if t <= s.at {
            return s.lba;
        }
        let got = ((t - s.at) as f64 * self.rate(s.lba) / 512.0) as u64;
        (s.lba + got).min(s.limit)
    }

    /// Positioning time to `to` from cylinder `from` starting at `t`: seek (plus `settle`
    /// extra if the arm moves), then rotation.
    fn position_ns(&self, from: u64, to: Place, t: u64, write: bool, settle: u64) -> u64 {
        let mut seek = self.seek_cyl(from, to.cyl);
        if seek > 0 {
            seek += settle;
            if write {
                seek += self.p.write_settle_ns;
            }
        }
        seek + self.rotation_ns(to.angle, t + seek)
    }

    /// How long after `t` a sector at `angle` comes under a head on its track.
    fn rotation_ns(&self, angle: f64, t: u64) -> u64 {
        let platter = (t % self.rev_ns) as f64 / self.rev_ns as f64;
        let mut wait = angle - platter;
        if wait < 0.0 {
            wait += 1.0;
        }
        let rot = (wait * self.rev_ns as f64) as u64;
        // Rounding must not turn "right under the head" into a full turn.
        if self.rev_ns.saturating_sub(rot) < 1000 {
            0
        } else {
            rot
        }
    }

    fn media_ns(&self, lba: u64, sectors: u64) -> u64 {
        (sectors as f64 * 512.0 / self.rate(lba)) as u64
    }

    fn iface_ns(&self, sectors: u64) -> u64 {
        sectors * 512 * 1000 / self.p.iface_mbs
    }

    /// The read-ahead as a read at `t` finds it: one that has reached its limit waits there
    /// (the segment is full) and resumes when the next sector comes round.
    fn stream_for(&self, t: u64) -> Option<Stream> {
        let s = self.stream?;
        if self.filled(s, t) < s.limit {
            return Some(s);
        }
        Some(Stream {
            lba: s.limit,
            at: t + self.rotation_ns(self.place(s.limit).angle, t),
            ..s
        })
    }

    /// The segment serving a read of `[s, e)` at `t`, and when its data is all in the buffer.
    /// A read that starts inside the read-ahead's window, or right where it ends, rides on it.
    fn lookup(&self, stream: Option<Stream>, s: u64, e: u64) -> Option<(usize, u64)> {
        if let Some(st) = stream {
            let seg = self.segs[st.seg];
            if s >= seg.start && s <= st.limit {
                let at = if e <= st.lba {
                    0
                } else {
                    st.at + self.media_ns(st.lba, e - st.lba)
                };
                return Some((st.seg, at));
            }
        }
        self.segs
            .iter()
            .position(|g| s >= g.start && e <= g.end && g.end > g.start)
            .map(|i| (i, 0))
    }

    /// Stops the read-ahead at `t`, keeping what it read.
    fn stop_stream(&mut self, t: u64) {
        if let Some(s) = self.stream.take() {
            let got = self.filled(s, t);
            self.segs[s.seg].end = got;
            self.head = got;
        }
    }

    /// Drops the segments holding any of `[s, e)` (and the read-ahead heading there).
    fn invalidate(&mut self, s: u64, e: u64, now: u64) {
        for i in 0..self.segs.len() {
            let g = self.segs[i];
            let reading = self.stream.filter(|x| x.seg == i);
            let end = reading.map_or(g.end, |x| x.limit.max(g.end));
            if g.start < e && s < end {
                if reading.is_some() {
                    self.stop_stream(now);
                }
                self.segs[i] = Segment::default();
            }
        }
    }

    pub fn submit(&mut self, hw: u16, cmd: Cmd, now: u64) {
        self.host_outstanding += 1;
        let n = cmd.nr_sectors as u64;
        let cached = cmd.op == ReqOp::Write
            && self.p.write_cache
            && !cmd.fua
            && (self.dirty == 0 || self.dirty + n <= self.p.dirty_limit_sectors);
        if matches!(cmd.op, ReqOp::Write | ReqOp::WriteZeroes) {
            self.invalidate(cmd.sector, cmd.sector + n, now);
        }
        if cached {
            // Acknowledged once across the link; written to the media behind the scenes.
            let done = now.max(self.link_free) + self.p.cmd_ns + self.iface_ns(n);
            self.link_free = done;
            self.early.push_back((done, hw, cmd.id));
            self.dirty += n;
            if let Some(last) = self.queue.back_mut() {
                if last.kind == Kind::WriteBack
                    && last.cmd.sector + last.cmd.nr_sectors as u64 == cmd.sector
                    && last.cmd.nr_sectors + cmd.nr_sectors <= WRITEBACK_MERGE_MAX
                {
                    last.cmd.nr_sectors += cmd.nr_sectors;
                    self.start(now);
                    return;
                }
            }
            self.queue.push_back(Pending {
                hw,
                cmd,
                arrived: now,
                kind: Kind::WriteBack,
                place: self.place(cmd.sector),
            });
        } else {
            self.queue.push_back(Pending {
                hw,
                cmd,
                arrived: now,
                kind: Kind::Host,
                place: self.place(cmd.sector),
            });
        }
        self.start(now);
    }

    /// When the media work for `q` can begin if the mechanism takes it at `t`: the drive
    /// decodes a command while it waits in the queue, so only a command that arrives to an
    /// idle drive pays `cmd_us` up front.
    fn ready_at(&self, q: &Pending, t: u64) -> u64 {
        match q.kind {
            Kind::Host => t.max(q.arrived + self.p.cmd_ns),
            Kind::WriteBack => t,
        }
    }

    /// What serving `q` first would cost from the snapshot: 0 for cache hits and commands
    /// that do not touch the media, else the positioning time.
    fn access_ns(&self, q: &Pending, now: &Snapshot) -> u64 {
        let n = q.cmd.nr_sectors.max(1) as u64;
        let t = now.t;
        let write = match q.cmd.op {
            ReqOp::Read => {
                if let Some((_, at)) = self.lookup(now.stream, q.cmd.sector, q.cmd.sector + n) {
                    return at.saturating_sub(t);
                }
                false
            }
            ReqOp::Write | ReqOp::WriteZeroes | ReqOp::ZoneAppend => true,
            // This model has no zones: the block layer never sends it zone commands.
            ReqOp::Flush
            | ReqOp::Discard
            | ReqOp::ZoneReset
            | ReqOp::ZoneResetAll
            | ReqOp::ZoneOpen
            | ReqOp::ZoneClose
            | ReqOp::ZoneFinish => return 0,
        };
        let t0 = self.ready_at(q, t);
        t0 - t + self.position_ns(now.head_cyl, q.place, t0, write, 0)
    }

    /// The queue index to serve next: of the first `ncq` host commands and the cached writes
    /// among the first [`PICK_SCAN`] entries, the one reachable soonest; never past a flush;
    /// the oldest host command first once it has waited [`NCQ_AGE_NS`].
    fn pick(&self, t: u64) -> usize {
        if self.queue.len() <= 1 {
            return 0;
        }
        let now = self.snapshot(t);
        let mut best = (u64::MAX, 0);
        let mut hosts = 0;
        for (i, q) in self.queue.iter().take(PICK_SCAN).enumerate() {
            if q.cmd.op == ReqOp::Flush {
                return if i == 0 { 0 } else { best.1 };
            }
            if q.kind == Kind::Host {
                if hosts == 0 && t.saturating_sub(q.arrived) > NCQ_AGE_NS {
                    return i;
                }
                hosts += 1;
                if hosts > self.p.ncq {
                    continue;
                }
            }
            let cost = self.access_ns(q, &now);
            if cost < best.0 {
                best = (cost, i);
            }
        }
        best.1
    }

    /// Starts the next command if the mechanism is idle.
    fn start(&mut self, now: u64) {
        if self.current.is_some() || self.queue.is_empty() {
            return;
        }
        let i = self.pick(now);
        let q = self.queue.remove(i).expect("picked from the queue");
        let done = self.service(&q, now);
        self.busy_ns += done - now;
        self.current = Some((q, done));
    }

    /// When `q`, started at `t`, completes; moves the head and the buffer.
    fn service(&mut self, q: &Pending, t: u64) -> u64 {
        let cmd = q.cmd;
        let n = cmd.nr_sectors.max(1) as u64;
        let end = cmd.sector + n;
        let write = match cmd.op {
            ReqOp::Read => {
                self.stamp += 1;
                if let Some((seg, at)) = self.lookup(self.stream_for(t), cmd.sector, end) {
                    self.cache_hits += 1;
                    self.segs[seg].used = self.stamp;
                    let done = t.max(q.arrived + self.p.cmd_ns / 2).max(at) + self.iface_ns(n);
                    self.extend_stream(seg, end, t);
                    return done;
                }
                false
            }
            ReqOp::Write | ReqOp::WriteZeroes | ReqOp::ZoneAppend => true,
            // Everything queued before a flush is on the media when it starts (nothing is
            // reordered across it), so it costs a command; a discard is a no-op here.
            ReqOp::Flush
            | ReqOp::Discard
            | ReqOp::ZoneReset
            | ReqOp::ZoneResetAll
            | ReqOp::ZoneOpen
            | ReqOp::ZoneClose
            | ReqOp::ZoneFinish => return self.ready_at(q, t),
        };
        let t0 = self.ready_at(q, t);
        let settle = self.settle_jitter();
        let from = self.cylinder(self.head_at(t0));
        if from != q.place.cyl {
            self.seeks += 1;
        }
        let pos = self.position_ns(from, q.place, t0, write, settle);
        self.stop_stream(t0);
        self.head = end;
        let media = (n as f64 * 512.0 / q.place.rate) as u64;
        let media_done = t0 + pos + media;
        if write {
            if q.kind == Kind::WriteBack {
                self.dirty -= n.min(self.dirty);
                self.written_back += n;
            }
            return media_done;
        }
        // The read's data and its read-ahead go to the least recently used segment.
        let seg = (0..self.segs.len())
            .min_by_key(|&i| self.segs[i].used)
            .unwrap_or(0);
        self.segs[seg] = Segment {
            start: cmd.sector,
            end,
            used: self.stamp,
        };
        if self.p.readahead_sectors > 0 && end < self.capacity {
            self.stream = Some(Stream {
                seg,
                lba: end,
                at: media_done,
                limit: (end + self.p.readahead_sectors).min(self.capacity),
            });
        }
        media_done + self.iface_ns(n).saturating_sub(media)
    }

    /// How much longer than the curve this seek's settling takes (used only if the arm moves).
    fn settle_jitter(&mut self) -> u64 {
        self.rng.below(self.p.t2t_ns / 10 + 1)
    }

    /// A read served from segment `seg` up to `end`, at `t`: a sequential reader keeps the
    /// drive reading ahead; the segment keeps at most two read-aheads' worth behind it.
    fn extend_stream(&mut self, seg: usize, end: u64, t: u64) {
        let ra = self.p.readahead_sectors;
        let Some(mut s) = self.stream_for(t).filter(|s| s.seg == seg) else {
            return;
        };
        if end + ra / 2 > s.limit {
            s.limit = (end + ra).min(self.capacity);
        }
        let g = &mut self.segs[seg];
        g.start = g.start.max(s.limit.saturating_sub(2 * ra)).min(end);
        self.stream = Some(s);
    }

    pub fn next_event(&self) -> Option<u64> {
        let a = self.current.map(|c| c.1);
        let b = self.early.front().map(|e| e.0);
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Pushes the host commands finished by `now` onto `out`, in time order.
    pub fn advance(&mut self, now: u64, out: &mut Vec<DevCompletion>) {
        loop {
            let cur = self.current.map(|c| c.1);
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
                self.report(hw, id, out);
                continue;
            }
            let (q, done) = self.current.take().expect("current command");
            if q.kind == Kind::Host {
                self.report(q.hw, q.cmd.id, out);
            }
            self.start(done);
        }
    }

    fn report(&mut self, hw: u16, id: u64, out: &mut Vec<DevCompletion>) {
        self.completed += 1;
        self.host_outstanding -= 1;
        out.push(DevCompletion {
            hw,
            id,
            status: BlkStatus::Ok,
        });
    }

    /// Host commands accepted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.host_outstanding
    }

    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("completed", self.completed),
            ("seeks", self.seeks),
            ("readahead_hits", self.cache_hits),
            ("written_back_sectors", self.written_back),
            ("busy_ms", self.busy_ns / 1_000_000),
        ]
    }
}

pub struct HddModel {
    disk: Disk,
    depth: u32,
}

impl HddModel {
    /// A disk of `hp` with `depth` driver tags, named `name` in errors.
    pub fn with_params(
        hp: HddParams,
        depth: u32,
        name: &'static str,
        rng: SimRng,
    ) -> Result<HddModel, ModelError> {
        Ok(HddModel {
            depth,
            disk: Disk::new(hp, name, rng)?,
        })
    }

    pub fn from_params(p: &mut Params<'_>, rng: SimRng) -> Result<HddModel, ModelError> {
        let hp = HddParams::from_params(p, "hdd", 1, true)?;
        let depth = ranged(p, "hdd", "queue_depth", 32, 1, 4096)? as u32;
        Ok(HddModel {
            depth,
            disk: Disk::new(hp, "hdd", rng)?,
        })
    }

    /// Seek time between two sectors in ns, without rotation (for tests and reports).
    pub fn seek_ns(&self, from: u64, to: u64) -> u64 {
        self.disk.seek_ns(from, to)
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
    /// libahci's SCSI host: 168 scatter-gather entries (`AHCI_MAX_SG`), segments of the SCSI
    /// default 64 KiB (`scsi_host_alloc` gives `BLK_MAX_SEGMENT_SIZE` when the host template
    /// sets none), and an Advanced Format drive's 4 KiB physical sectors behind 512-byte
    /// logical ones (an assumption, marked `[A]` in DEVICES.md).
    fn queue_limits(&self) -> QueueLimits {
        QueueLimits {
            max_segments: 168,
            physical_block_size: 4096,
            ..QueueLimits::default()
        }
    }
    /// A SATA disk with its cache on; libata passes FUA down (its `fua` parameter, on by default
    /// since "ata: libata: Enable fua support by default").
    fn write_cache(&self) -> bool {
        self.disk.write_cache()
    }
    fn fua(&self) -> bool {
        self.disk.write_cache()
    }
    fn nr_hw_queues(&self) -> u16 {
        1
    }
    fn queue_depth(&self) -> u32 {
        self.depth
    }
    fn max_outstanding(&self) -> u32 {
        // The disk holds `ncq` commands; without NCQ the host issues one at a time.
        self.disk.ncq()
    }
    fn driver_cost(&self) -> DriverCost {
        DriverCost {
            queue_rq_ns: 800,
            doorbell_ns: 200,
            irq_ns: 1500,
            hw_lock: false,
            lock_waiter_ns: 0,
            completions: crate::CompletionCpu::Mapped,
            complete_ns: 0,
            worker_wake_ns: 0,
        }
    }
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        self.disk.submit(hw, cmd, now.0);
    }
    fn next_event(&self) -> Option<Nanos> {
        self.disk.next_event().map(Nanos)
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        self.disk.advance(now.0, out);
    }
    fn outstanding(&self) -> u32 {
        self.disk.outstanding()
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.disk.stats()
    }
}
