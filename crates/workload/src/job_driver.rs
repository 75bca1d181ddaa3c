//! The job driver: what a job issues next, as a plain state machine with the time passed in.
//!
//! fio's I/O loop decides, for every slot of its queue depth, whether the job may issue now
//! (`rate_iops`), what (the pattern, the read/write mix, `fsync=N`'s flushes, the verify
//! pass, `end_fsync`) and when it is finished (`runtime` after `ramp_time`, one pass over
//! `size` unless `time_based`). [`JobDriver`] is that decision and nothing else: it never
//! reads a clock, sleeps or submits. The threaded runner (`mqblk bench`) asks it with real
//! time and the simulator with virtual time, so a job issues the same I/O in both; only
//! how the I/O is carried out differs.

use crate::iolog::IoLogEntry;
use crate::job::{Job, RwMode};
use crate::pattern::Generator;
use crate::Ddir;

/// What an I/O does.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    Read,
    Write,
    /// A cache flush (`fsync=N`, `end_fsync`).
    Flush,
    /// A discard (`rw=trim`, `randtrim`, `trimwrite`).
    Trim,
}

/// One I/O to issue; a flush has offset and length 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct JobIo {
    pub kind: IoKind,
    /// Byte offset on the device.
    pub offset: u64,
    pub len: u32,
    /// The issuing task waits for it (`REQ_SYNC`): flushes, and writes of an `O_DIRECT`
    /// job, which block/fops.c's `dio_bio_write_op` marks `REQ_OP_WRITE | REQ_SYNC |
    /// REQ_IDLE` (it adds `REQ_FUA` for `O_DSYNC`, which no supported option asks for);
    /// buffered writes reach the device from writeback, asynchronously. Reads go as plain
    /// `REQ_OP_READ` there: synchronous by their operation (`op_is_sync`), with no flag.
    pub sync: bool,
}

impl JobIo {
    const FLUSH: JobIo = JobIo {
        kind: IoKind::Flush,
        offset: 0,
        len: 0,
        sync: true,
    };
}

/// The driver's answer to "what now?".
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Issue this I/O (it counts as issued when returned).
    Io(JobIo),
    /// Nothing may be issued before this time (nanoseconds since the job started): the
    /// rate limit. Ask again then, or earlier after a completion.
    Until(u64),
    /// Wait until nothing of the job is in flight, then ask again (before the verify pass).
    Drain,
    /// The job issues nothing more; it ends when what is in flight completes.
    Done,
}

/// Where the job is in its life.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The main loop over the region.
    Main,
    /// Reading back what the main loop wrote (`verify` with `do_verify`).
    Verify,
    /// The final flush (`end_fsync`), if any.
    Finish,
    /// Nothing more to issue.
    Done,
}

/// One job clone's issuing decisions; see the module documentation.
#[derive(Clone, Debug)]
pub struct JobDriver {
    gen: Generator,
    rw: RwMode,
    bs: [u32; 2],
    grid: u64,
    base: u64,
    time_based: bool,
    /// When the main phase ends (ramp + runtime), in ns since the job started.
    end_ns: Option<u64>,
    ramp_ns: u64,
    /// `rate_iops` and `rate` per direction, and what each direction issued so far.
    rate_iops: [u64; 3],
    rate: [u64; 3],
    dir_ios: [u64; 3],
    dir_bytes: [u64; 3],
    /// An I/O generated but held back by its direction's rate.
    held: Option<JobIo>,
    fsync: u64,
    end_fsync: bool,
    verify_pass: bool,
    direct: bool,
    phase: Phase,
    /// I/Os (not flushes) issued so far.
    issued: u64,
    writes_since_sync: u64,
    flush_due: bool,
    /// With a verify pass: one bit per grid block the main phase wrote.
    written: Vec<u64>,
    verify_at: u64,
    drained: bool,
    /// The verify pass has issued its first read (everything before it has completed).
    verify_reading: bool,
    stopped: bool,
    /// `number_ios` (0: none), and the end by bytes or passes (see [`Job::io_bytes`]).
    number_ios: u64,
    io_bytes: Option<u64>,
    loops: u32,
    /// Passes finished and bytes issued by the main phase.
    passes: u32,
    main_bytes: u64,
    /// `thinktime`: after every `think_blocks` I/Os, drain, then wait `think_ns`.
    think_ns: u64,
    think_blocks: u64,
    since_think: u64,
    think: Think,
    /// `write_iolog`: every I/O issued, when asked for.
    log: Option<Vec<IoLogEntry>>,
    last_write: u64,
}

/// Where the job is in a think time.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Think {
    /// Issuing.
    No,
    /// `thinktime_blocks` issued: wait for them to complete.
    Due,
    /// They completed: nothing before this time.
    Until(u64),
}

impl JobDriver {
    pub fn new(job: &Job) -> JobDriver {
        let grid = job.grid();
        let gen = Generator::new(&job.shape());
        let verify_pass = job.verify && job.do_verify && job.rw.does_write();
        JobDriver {
            written: if verify_pass {
                vec![0; gen.nr_blocks().div_ceil(64) as usize]
            } else {
                Vec::new()
            },
            gen,
            rw: job.rw,
            bs: job.bs,
            grid: grid as u64,
            base: job.offset,
            time_based: job.time_based,
            end_ns: job.runtime_ns.map(|r| r.saturating_add(job.ramp_ns)),
            ramp_ns: job.ramp_ns,
            rate_iops: job.rate_iops,
            rate: job.rate,
            dir_ios: [0; 3],
            dir_bytes: [0; 3],
            held: None,
            fsync: job.fsync,
            end_fsync: job.end_fsync,
            verify_pass,
            direct: job.direct,
            phase: Phase::Main,
            issued: 0,
            writes_since_sync: 0,
            flush_due: false,
            verify_at: 0,
            drained: false,
            verify_reading: false,
            stopped: false,
            number_ios: job.number_ios,
            io_bytes: job.io_bytes,
            loops: job.loops,
            passes: 0,
            main_bytes: 0,
            think_ns: job.thinktime_ns,
            think_blocks: job.thinktime_blocks.max(1),
            since_think: 0,
            think: Think::No,
            log: job.write_iolog.is_some().then(Vec::new),
            last_write: 0,
        }
    }

    /// What the job issued so far, for `write_iolog` (empty unless the job asks for it);
    /// taking it leaves the log empty.
    pub fn take_log(&mut self) -> Vec<IoLogEntry> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// What to do at `now`, noting an I/O in the log if the job keeps one.
    #[inline]
    pub fn next(&mut self, now: u64) -> Next {
        let next = self.decide(now);
        if let (Some(log), Next::Io(io)) = (&mut self.log, &next) {
            let offset = match io.kind {
                // fio logs a sync at the offset of the write before it.
                IoKind::Flush => self.last_write,
                _ => io.offset,
            };
            log.push(IoLogEntry {
                at_ns: now,
                kind: io.kind,
                offset,
                len: io.len,
            });
            if io.kind == IoKind::Write {
                self.last_write = io.offset;
            }
        }
        next
    }

    /// What to do at `now` (nanoseconds since the job started).
    #[inline]
    fn decide(&mut self, now: u64) -> Next {
        loop {
            match self.phase {
                Phase::Main => {
                    if self.stopped || self.end_ns.is_some_and(|e| now >= e) {
                        self.end_main();
                        continue;
                    }
                    // An I/O held back by its rate counts as issued already.
                    let held_n = u64::from(self.held.is_some());
                    let held_b = self.held.map_or(0, |h| u64::from(h.len));
                    if self.number_ios > 0 && self.issued - held_n >= self.number_ios {
                        self.end_main();
                        continue;
                    }
                    let done = self.main_bytes - held_b;
                    if !self.time_based && self.io_bytes.is_some_and(|b| done >= b) {
                        self.end_main();
                        continue;
                    }
                    if self.held.is_none() && self.gen.pass_done() {
                        self.passes += 1;
                        // Without time_based a job ends after `loops` passes over `size`, or
                        // once it issued `io_size` (times `loops`) bytes; a verify job checks
                        // one pass (fio's verify log covers what was written).
                        let more = match self.io_bytes {
                            _ if self.verify_pass => false,
                            _ if self.time_based => true,
                            Some(_) => true,
                            None => self.passes < self.loops,
                        };
                        if more {
                            self.gen.rewind();
                        } else {
                            self.end_main();
                            continue;
                        }
                    }
                    // fio's thinktime (`handle_thinktime`): the I/O in flight completes
                    // (`io_u_quiesce`), then the job waits.
                    match self.think {
                        Think::No => {}
                        Think::Due => {
                            if !std::mem::replace(&mut self.drained, true) {
                                return Next::Drain;
                            }
                            self.drained = false;
                            self.think = Think::Until(now.saturating_add(self.think_ns));
                            continue;
                        }
                        Think::Until(t) if now < t => return Next::Until(t),
                        Think::Until(_) => self.think = Think::No,
                    }
                    // A flush `fsync=N` made due goes before the next I/O; once the job has
                    // issued all it will, none follows (fio checks the end first, so its last
                    // `fsync=N` never comes; `end_fsync` is the one that does).
                    if std::mem::take(&mut self.flush_due) {
                        return Next::Io(JobIo::FLUSH);
                    }
                    // fio's rate_iops and rate, per direction: the next I/O waits until its
                    // direction is back within both (an I/O and its bytes per their share of
                    // a second since the start).
                    let io = match self.held.take() {
                        Some(io) => io,
                        None => self.main_io(),
                    };
                    let d = match io.kind {
                        IoKind::Read => 0,
                        IoKind::Trim => 2,
                        _ => 1,
                    };
                    let at = |count: u64, per_s: u64| -> u64 {
                        if per_s == 0 {
                            return 0;
                        }
                        (count as u128 * 1_000_000_000 / per_s as u128).min(u64::MAX as u128) as u64
                    };
                    let due = at(self.dir_ios[d], self.rate_iops[d])
                        .max(at(self.dir_bytes[d], self.rate[d]));
                    if due > now {
                        self.held = Some(io);
                        return Next::Until(due);
                    }
                    self.dir_ios[d] += 1;
                    self.dir_bytes[d] += u64::from(io.len);
                    return Next::Io(io);
                }
                Phase::Verify => {
                    if !std::mem::replace(&mut self.drained, true) {
                        return Next::Drain;
                    }
                    while self.verify_at < self.gen.nr_blocks() {
                        let offset = self.gen.block_offset(self.verify_at);
                        self.verify_at += 1;
                        let b = (offset - self.base) / self.grid;
                        if self.written[(b / 64) as usize] & (1 << (b % 64)) != 0 {
                            self.issued += 1;
                            self.verify_reading = true;
                            return Next::Io(JobIo {
                                kind: IoKind::Read,
                                offset,
                                len: self.bs[1],
                                sync: false,
                            });
                        }
                    }
                    self.phase = Phase::Finish;
                }
                Phase::Finish => {
                    self.phase = Phase::Done;
                    if self.end_fsync {
                        return Next::Io(JobIo::FLUSH);
                    }
                }
                Phase::Done => return Next::Done,
            }
        }
    }

    #[inline]
    fn main_io(&mut self) -> JobIo {
        let io = self.gen.next_io();
        self.issued += 1;
        self.main_bytes += u64::from(io.len);
        if self.think_ns > 0 {
            self.since_think += 1;
            if self.since_think >= self.think_blocks {
                self.since_think = 0;
                self.think = Think::Due;
            }
        }
        let write = io.dir == Ddir::Write;
        if write {
            if self.verify_pass {
                let b = (io.offset - self.base) / self.grid;
                self.written[(b / 64) as usize] |= 1 << (b % 64);
            }
            if self.fsync > 0 {
                self.writes_since_sync += 1;
                if self.writes_since_sync >= self.fsync {
                    self.writes_since_sync = 0;
                    self.flush_due = true;
                }
            }
        }
        JobIo {
            kind: match io.dir {
                Ddir::Read => IoKind::Read,
                Ddir::Write => IoKind::Write,
                Ddir::Trim => IoKind::Trim,
            },
            offset: io.offset,
            len: io.len,
            sync: write && self.direct,
        }
    }

    fn end_main(&mut self) {
        self.phase = if self.verify_pass && !self.stopped {
            Phase::Verify
        } else {
            Phase::Finish
        };
    }

    /// Ends the main phase at the next call (a stop request: the progress display's
    /// interrupt, a runner shutting down). No verify pass follows; `end_fsync` still does.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether a read completing now is one the job checks against its verify headers:
    /// every read of the verify pass (which starts once the main phase's I/O has drained),
    /// and every read of a job that only reads.
    pub fn checks_reads(&self) -> bool {
        self.verify_reading || !self.rw.does_write()
    }

    /// Whether an I/O completing at `now` counts in the statistics (past `ramp_time`).
    #[inline]
    pub fn measures(&self, now: u64) -> bool {
        now >= self.ramp_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{parse_job_text, resolve};

    fn driver(text: &str) -> JobDriver {
        let specs = parse_job_text("t", text).unwrap();
        let jobs = resolve(&specs, |_| Ok(1 << 30), 0).unwrap();
        JobDriver::new(&jobs[0])
    }

    /// Issues until Done (draining is instant), at a fixed time.
    fn all(d: &mut JobDriver, now: u64) -> Vec<JobIo> {
        let mut v = Vec::new();
        loop {
            match d.next(now) {
                Next::Io(io) => v.push(io),
                Next::Drain => {}
                Next::Done => return v,
                Next::Until(t) => panic!("rate limited until {t}"),
            }
        }
    }

    #[test]
    fn one_pass_then_done_and_split_block_sizes() {
        let mut d = driver("[j]\nrw=randrw\nbs=4k,64k\nsize=1m\n");
        let ios = all(&mut d, 0);
        // One pass is `size` bytes of I/O, reads and writes together (fio's io_size); the
        // last I/O starts below it.
        let bytes: u64 = ios.iter().map(|io| u64::from(io.len)).sum();
        assert!(
            (1 << 20..(1 << 20) + 65536).contains(&bytes),
            "{bytes} bytes"
        );
        for io in &ios {
            let want = if io.kind == IoKind::Write {
                65536
            } else {
                4096
            };
            assert_eq!(io.len, want);
            assert_eq!(io.offset % 65536, 0);
        }
    }

    #[test]
    fn number_ios_io_size_and_loops_end_the_job_as_fio_does() {
        let count = |text: &str| all(&mut driver(text), 0).len();
        // number_ios stops early but never extends the job.
        assert_eq!(count("[j]\nsize=1m\nnumber_ios=10\n"), 10);
        assert_eq!(count("[j]\nsize=64k\nnumber_ios=1000\n"), 16);
        // io_size below size stops early; above it passes over the region again.
        assert_eq!(count("[j]\nsize=1m\nio_size=64k\n"), 16);
        assert_eq!(count("[j]\nrw=randread\nsize=64k\nio_size=256k\n"), 64);
        assert_eq!(count("[j]\nsize=64k\nloops=3\n"), 48);
        assert_eq!(count("[j]\nsize=64k\nio_size=32k\nloops=3\n"), 24);
    }

    #[test]
    fn rate_and_rate_iops_hold_each_direction_to_its_own_cap() {
        // rate=1m: one 4 KiB read per 1/256 s.
        let mut d = driver("[j]\nrw=read\nrate=1m\nruntime=1\ntime_based\n");
        assert!(matches!(d.next(0), Next::Io(_)));
        assert_eq!(d.next(0), Next::Until(3_906_250));
        assert!(matches!(d.next(3_906_250), Next::Io(_)));
        // Reads capped at 100 IOPS, writes free: in 10 ms of a 50/50 mix, one read and
        // every write drawn until the second read holds the job.
        let mut d = driver("[j]\nrw=randrw\nrate_iops=100,0\nruntime=1\ntime_based\n");
        let mut kinds = Vec::new();
        while let Next::Io(io) = d.next(0) {
            kinds.push(io.kind);
        }
        assert_eq!(
            kinds.iter().filter(|k| **k == IoKind::Read).count(),
            1,
            "{kinds:?}"
        );
        assert_eq!(d.next(0), Next::Until(10_000_000));
        assert!(matches!(
            d.next(10_000_000),
            Next::Io(JobIo {
                kind: IoKind::Read,
                ..
            })
        ));
    }

    #[test]
    fn offset_increment_spaces_the_clones_regions() {
        let specs = parse_job_text(
            "t",
            "[j]\nnumjobs=3\nsize=1m\noffset=4k\noffset_increment=2m\n",
        )
        .unwrap();
        assert_eq!(specs[0].device_size(), (4 << 10) + (4 << 20) + (1 << 20));
        let jobs = resolve(&specs, |_| Ok(8 << 20), 0).unwrap();
        let offsets: Vec<u64> = jobs.iter().map(|j| j.offset).collect();
        assert_eq!(
            offsets,
            [4 << 10, (4 << 10) + (2 << 20), (4 << 10) + (4 << 20)]
        );
        assert!(resolve(&specs, |_| Ok(4 << 20), 0).is_err());
    }

    #[test]
    fn thinktime_waits_for_the_ios_then_the_time() {
        let mut d = driver("[j]\nsize=64k\niodepth=8\nthinktime=1ms\nthinktime_blocks=3\n");
        for _ in 0..3 {
            assert!(matches!(d.next(0), Next::Io(_)));
        }
        // Three issued: wait for them, then 1 ms from when they completed.
        assert_eq!(d.next(0), Next::Drain);
        assert_eq!(d.next(5_000), Next::Until(1_005_000));
        assert_eq!(d.next(600_000), Next::Until(1_005_000));
        assert!(matches!(d.next(1_005_000), Next::Io(_)));
    }

    #[test]
    fn fsync_every_n_writes_and_end_fsync() {
        let mut d = driver("[j]\nrw=write\nsize=40k\nfsync=3\nend_fsync=1\n");
        let kinds: Vec<IoKind> = all(&mut d, 0).iter().map(|i| i.kind).collect();
        use IoKind::*;
        assert_eq!(
            kinds,
            vec![
                Write, Write, Write, Flush, Write, Write, Write, Flush, Write, Write, Write, Flush,
                Write, Flush
            ]
        );
    }

    #[test]
    fn rate_iops_spaces_issues() {
        let mut d = driver("[j]\nrw=randread\nrate_iops=100\nruntime=1\ntime_based\n");
        assert!(matches!(d.next(0), Next::Io(_)));
        assert_eq!(d.next(0), Next::Until(10_000_000));
        assert!(matches!(d.next(10_000_000), Next::Io(_)));
        // Over the whole second, 100 I/Os at 1 ms steps.
        let mut d = driver("[j]\nrw=randread\nrate_iops=100\nruntime=1\ntime_based\n");
        let mut n = 0;
        for ms in 0..2000u64 {
            while let Next::Io(_) = d.next(ms * 1_000_000) {
                n += 1;
            }
        }
        assert_eq!(n, 100);
    }

    #[test]
    fn verify_reads_back_exactly_the_written_blocks_after_a_drain() {
        let mut d = driver("[j]\nrw=randrw\nrwmixread=50\nsize=256k\nverify=crc32c\n");
        let mut written = Vec::new();
        loop {
            match d.next(0) {
                Next::Io(io) if io.kind == IoKind::Write => written.push(io.offset),
                Next::Io(_) => {}
                Next::Drain => break,
                other => panic!("{other:?} before the verify pass"),
            }
        }
        assert_eq!(d.phase(), Phase::Verify);
        assert!(
            !d.checks_reads(),
            "main-phase reads still completing are not checked"
        );
        let mut read = Vec::new();
        while let Next::Io(io) = d.next(0) {
            assert_eq!(io.kind, IoKind::Read);
            read.push(io.offset);
            assert!(d.checks_reads());
        }
        written.sort();
        written.dedup();
        read.sort();
        assert_eq!(read, written);
    }

    #[test]
    fn runtime_counts_after_the_ramp_and_stop_ends_main() {
        let mut d = driver("[j]\nrw=read\nramp_time=1\nruntime=2\ntime_based\n");
        assert!(!d.measures(999_999_999));
        assert!(d.measures(1_000_000_000));
        assert!(matches!(d.next(2_999_999_999), Next::Io(_)));
        assert_eq!(d.next(3_000_000_000), Next::Done);
        let mut d = driver("[j]\nrw=read\ntime_based\nruntime=10\nend_fsync=1\n");
        d.stop();
        assert_eq!(d.next(0), Next::Io(JobIo::FLUSH));
        assert_eq!(d.next(0), Next::Done);
    }
}
