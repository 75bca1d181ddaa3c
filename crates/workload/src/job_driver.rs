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
#[cfg(doc)]
use crate::job::JobFile;
use crate::job::{Job, RwMode, ThinkRule, EDQUOT, EIO, ENOSPC, ETIMEDOUT};
use crate::pattern::frand::{slot, FRand};
use crate::pattern::{FileSet, RateView};
use crate::Ddir;

/// What an I/O does.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    Read,
    Write,
    /// A cache flush (`fsync=N`, `end_fsync`).
    Flush,
    /// A cache flush fio issues as `fdatasync` (`fdatasync=N`): the same flush to the
    /// block layer, logged as `datasync`.
    Datasync,
    /// A discard (`rw=trim`, `randtrim`, `trimwrite`).
    Trim,
    /// A zone's write pointer reset (`REQ_OP_ZONE_RESET`, fio's `BLKRESETZONE` under
    /// `zonemode=zbd`): at the zone's start, length 0; not counted as I/O.
    ZoneReset,
}

/// One I/O to issue; a flush has offset and length 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct JobIo {
    pub kind: IoKind,
    /// Byte offset on the device.
    pub offset: u64,
    pub len: u32,
    /// Which of the job's files it goes to (its index in [`Job::files`]); for a flush, the
    /// file fio would sync (the device flushes as a whole).
    pub file: u32,
    /// The issuing task waits for it (`REQ_SYNC`): flushes, and writes of an `O_DIRECT`
    /// job, which block/fops.c's `dio_bio_write_op` marks `REQ_OP_WRITE | REQ_SYNC |
    /// REQ_IDLE`; buffered writes reach the device from writeback, asynchronously. Reads go
    /// as plain `REQ_OP_READ` there: synchronous by their operation (`op_is_sync`), with no
    /// flag.
    pub sync: bool,
    /// A write of an `O_SYNC`/`O_DSYNC` job (`sync=`): `dio_bio_write_op` adds `REQ_FUA`
    /// when `iocb_is_dsync`. A buffered one is written and then synced in the kernel
    /// (`generic_write_sync`); here it goes as one FUA write, which asks the same of the
    /// device.
    pub fua: bool,
    /// The priority this I/O carries instead of the job's (`cmdprio_*`), as
    /// `class << 13 | level`; drawn in [`JobDriver::next`].
    pub cmdprio: Option<u16>,
}

impl JobIo {
    const FLUSH: JobIo = JobIo {
        kind: IoKind::Flush,
        offset: 0,
        len: 0,
        file: 0,
        sync: true,
        fua: false,
        cmdprio: None,
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

/// fio's `check_min_rate`: each direction's bandwidth (or IOPS) judged over windows of
/// `rate_cycle`, from 2 s after the ramp (fio's settle time), in time since the ramp.
#[derive(Clone, Debug, Default)]
struct MinRate {
    bytes_min: [u64; 3],
    iops_min: [u64; 3],
    cycle_ns: u64,
    done_bytes: [u64; 3],
    done_ios: [u64; 3],
    /// What was done at the last check, and when (`last_rate_check_*`).
    last_bytes: [u64; 3],
    last_ios: [u64; 3],
    last_at: [u64; 3],
}

/// fio's settle time before a minimum rate is judged.
const MIN_RATE_SETTLE_NS: u64 = 2_000_000_000;

impl MinRate {
    /// An I/O completed at `now` (ns since the ramp): the failure, if a direction fell
    /// below its floor over the window that just closed. As `__check_min_rate`, every
    /// direction that has done I/O is looked at, a window shorter than `rate_cycle` is
    /// left to grow, and rates are whole bytes (I/Os) per second over whole milliseconds.
    fn completed(&mut self, now: u64, dir: Ddir, bytes: u64) -> Option<String> {
        if self.bytes_min == [0; 3] && self.iops_min == [0; 3] {
            return None;
        }
        let d = dir.index();
        self.done_bytes[d] += bytes;
        self.done_ios[d] += 1;
        if now < MIN_RATE_SETTLE_NS {
            return None;
        }
        for d in 0..3 {
            if self.done_bytes[d] == 0 || (self.bytes_min[d] == 0 && self.iops_min[d] == 0) {
                continue;
            }
            if self.last_bytes[d] != 0 || self.last_ios[d] != 0 {
                let spent_ms = now.saturating_sub(self.last_at[d]) / 1_000_000;
                if spent_ms == 0 || spent_ms * 1_000_000 < self.cycle_ns {
                    continue;
                }
                if self.bytes_min[d] > 0 {
                    let rate = (self.done_bytes[d] - self.last_bytes[d]) * 1000 / spent_ms;
                    if rate < self.bytes_min[d] {
                        return Some(format!(
                            "rate_min={}B/s not met, got {rate}B/s",
                            self.bytes_min[d]
                        ));
                    }
                } else {
                    let iops = (self.done_ios[d] - self.last_ios[d]) * 1000 / spent_ms;
                    if iops < self.iops_min[d] {
                        return Some(format!(
                            "rate_iops_min={} not met, got {iops} IOPS",
                            self.iops_min[d]
                        ));
                    }
                }
            }
            self.last_bytes[d] = self.done_bytes[d];
            self.last_ios[d] = self.done_ios[d];
            self.last_at[d] = now;
        }
        None
    }
}

/// One job clone's issuing decisions; see the module documentation.
#[derive(Clone, Debug)]
pub struct JobDriver {
    gen: FileSet,
    rw: RwMode,
    bs: [u32; 2],
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
    /// `io_submit_mode=inline`: ahead of its rate the job first waits for what it has in
    /// flight.
    rate_quiesce: bool,
    /// Nothing of the job is in flight: its last answer was [`Next::Drain`] and no I/O has
    /// gone since. Every "what is in flight completes first" (a think time, the rate,
    /// a loop's end, the verify pass, a close-time sync, an overlap, emptying files) asks
    /// this one fact instead of keeping a flag of its own.
    quiet: bool,
    /// A mixed job with a rate on some direction (`rate_iops`, `rate`): its next I/O's
    /// direction is picked with the rates in view (fio's `rate_ddir`).
    mixed_rates: bool,
    /// `rate_process=poisson`: per direction, fio's `poisson_state` stream, the mean gap
    /// in whole microseconds (`1000000 / iops`), and when the next I/O may go, in us
    /// (`last_usec`).
    poisson: Option<Box<[(FRand, u64, u64); 3]>>,
    fsync: u64,
    fdatasync: u64,
    end_fsync: bool,
    verify_pass: bool,
    direct: bool,
    /// `sync=`: writes carry FUA.
    sync_writes: bool,
    phase: Phase,
    /// I/Os (not flushes) issued so far.
    issued: u64,
    /// `issued` when the current pass began.
    pass_start: u64,
    /// Writes issued, which `fsync` and `fdatasync` count (fio's `io_issues[DDIR_WRITE]`).
    writes_issued: u64,
    /// The flush due before the next I/O, if one is.
    flush_due: Option<IoKind>,
    /// With a verify pass: one bit per grid block the main phase wrote.
    written: Vec<u64>,
    verify_at: u64,
    /// Written blocks in the order first written, for a verify pass that reads them back in
    /// that order (fio's `io_hist_list`: a sequential job, or a random one with a random
    /// map); `None` where fio keeps its history sorted by offset (an rbtree: random writes
    /// without a map, which may overwrite), read back in block order.
    write_order: Option<Vec<(u32, u64)>>,
    /// `experimental_verify`: the generator as the job started, replayed by the verify
    /// pass, and the bytes written the pass reads back (fio's `verify_bytes`).
    replay: Option<Box<FileSet>>,
    replay_left: u64,
    /// Another of fio's loops follows the current one's end.
    more_loops: bool,
    /// `unlink_each_loop`; the files are to be emptied before the next loop's I/O, and may
    /// be now (the job's answer was the drain that empties them).
    unlink_each_loop: bool,
    unlink_due: bool,
    unlink_now: bool,
    /// `fill_device` ([`Self::fill_ended`]).
    fill_device: bool,
    /// `read_iolog`: where the replay of the log is; the job's I/O is the log's.
    log_replay: Option<crate::iolog_replay::Cursor>,
    /// `fsync_on_close`: files closed mid-run, each synced once what is in flight has
    /// completed (fio's `td_io_close_file`); the last I/O was a flush (fio's
    /// `last_was_sync`, which skips that sync); the next I/O stays out of `write_iolog`
    /// (fio's is a plain `fsync(2)`, not an I/O unit it logs).
    fsync_on_close: bool,
    /// `serialize_overlap`: the reads and writes in flight, `(offset in its file, length)`
    /// (fio compares offsets alone, whatever the file).
    in_flight: Option<Vec<(u64, u64)>>,
    close_flushes: std::collections::VecDeque<u32>,
    last_was_sync: bool,
    unlogged: bool,
    /// `verify_only`: the main phase generates the job's I/O and issues none of it (fio's
    /// `do_dry_run`).
    dry_run: bool,
    /// `verify_state_save`: per file, the offsets of the last `iodepth` writes that
    /// completed, oldest first (fio's `last_write_comp`).
    write_comps: Option<Vec<std::collections::VecDeque<u64>>>,
    /// `verify_state_load`: the state that bounds the verify pass, and the verify reads
    /// completed so far (fio's `io_blocks[DDIR_READ]`).
    verify_stop: Option<std::sync::Arc<crate::verify_state::VerifyState>>,
    verify_done: u64,
    /// The verify pass has issued its first read (everything before it has completed).
    verify_reading: bool,
    /// `verify_backlog`: written blocks not yet read back, oldest first, and where the job
    /// is in reading some back.
    backlog_every: u64,
    backlog_batch: u64,
    backlog: std::collections::VecDeque<(u32, u64)>,
    backlog_state: Backlog,
    /// fio's flow control: the job's group, the I/Os it issued in it, whether it is in
    /// the group (from its first question to its end, fio's thread start to exit), and the
    /// `flow_sleep` due once a hold has drained what was in flight.
    flow: Option<crate::flow::Flow>,
    flow_mine: u64,
    flow_state: FlowState,
    flow_pause: Option<u64>,
    /// fio's latency-target search and `max_latency`; the job's `iodepth`; I/Os completed
    /// so far; and what the search asked of the runner (drain first, start the statistics
    /// over, the job's error).
    lat: Option<crate::lat_target::LatTarget>,
    max_latency_ns: u64,
    iodepth: u32,
    completed_ios: u64,
    lat_quiesce: bool,
    stats_reset: bool,
    /// The error that ended the job, until the runner takes it; set once per job.
    error: Option<(i32, String)>,
    failed: bool,
    /// `rate_min` / `rate_iops_min`.
    min_rate: MinRate,
    /// `continue_on_error` / `ignore_error`.
    errors: crate::ErrorPolicy,
    stopped: bool,
    /// `number_ios` (0: none), and the end by bytes or passes (see [`Job::io_bytes`]).
    number_ios: u64,
    io_bytes: Option<u64>,
    loops: u32,
    /// Passes finished and bytes issued by the main phase.
    passes: u32,
    main_bytes: u64,
    /// `thinktime`: after `think_blocks` I/Os (see [`ThinkRule`]), drain, then wait
    /// `think_ns`.
    think_ns: u64,
    think_blocks: u64,
    think_rule: ThinkRule,
    think: Think,
    /// fio's `io_issues` and `io_blocks` summed over the directions (the latter zeroed when
    /// the ramp ends, as fio's `reset_all_stats` does), the count at the last think
    /// (`last_thinktime_blocks`) and when it was (`last_thinktime`, with
    /// `thinktime_iotime`).
    issued_rw: u64,
    done_rw: u64,
    ramp_reset: bool,
    think_mark: u64,
    last_think_at: u64,
    /// An I/O was issued since the last look at the think triggers, and its direction (fio
    /// looks once after each issue).
    think_check: Option<usize>,
    /// The smallest block size per direction (a rate's bytes per I/O).
    min_bs: [u32; 3],
    /// `cmdprio_*`: the shares at other priorities and fio's `prio_state` stream.
    cmdprio: Option<(crate::cmdprio::CmdPrio, FRand)>,
    /// `write_iolog`: every I/O issued, when asked for.
    log: Option<Vec<IoLogEntry>>,
    /// Where each file lies on the device, and the offset in its file of the last write
    /// (fio logs a flush at it).
    bases: Vec<u64>,
    last_write: u64,
    /// `end_fsync`: flushes issued so far (one per file, as fio syncs each).
    end_flushes: u32,
    /// `zonemode=zbd` (see [`crate::zbd`]): the job's zone state; an I/O drawn and waiting
    /// (for the job's I/O in flight, or a zone reset) to be aimed at its zone, and where
    /// its adjustment goes on; resets due before the next I/O (their zones' device offsets), and
    /// whether one was issued (it completes before anything else goes out); whether the
    /// loop's `zbd_file_reset` is due.
    zbd: Option<crate::zbd::ZbdState>,
    zbd_hold: Option<(usize, crate::pattern::Io, crate::zbd::Resume)>,
    zbd_resets: std::collections::VecDeque<u64>,
    zbd_reset_out: bool,
    zbd_loop_reset: bool,
}

/// A job's membership of its flow group.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum FlowState {
    /// Not yet started.
    Out,
    In,
    /// Ended; it never joins again.
    Left,
}

/// Where the job is in reading its backlog back (`verify_backlog`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Backlog {
    /// Writing.
    Idle,
    /// The backlog is full: waiting for its writes to complete.
    Draining,
    /// Reading this many more of the oldest blocks back.
    Reading(u64),
    /// Waiting for those reads to complete before writing on.
    Settling,
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
        let gen = FileSet::new(
            &job.shapes(),
            job.file_service.clone(),
            job.openfiles,
            job.verify,
        );
        let verify_pass = job.verify && job.do_verify && job.rw.does_write();
        let in_write_order = !job.rw.is_random() || gen.keeps_random_map();
        let replay = (verify_pass && job.experimental_verify).then(|| Box::new(gen.clone()));
        JobDriver {
            written: if verify_pass {
                vec![0; gen.nr_blocks().div_ceil(64) as usize]
            } else {
                Vec::new()
            },
            gen,
            rw: job.rw,
            bs: job.bs,
            time_based: job.time_based,
            end_ns: job.runtime_ns.map(|r| r.saturating_add(job.ramp_ns)),
            ramp_ns: job.ramp_ns,
            rate_iops: job.rate_iops,
            rate: job.rate,
            dir_ios: [0; 3],
            dir_bytes: [0; 3],
            held: None,
            rate_quiesce: !job.submit_offload,
            quiet: false,
            mixed_rates: job.rw.is_mixed() && job.rate_iops.iter().chain(&job.rate).any(|&r| r > 0),
            poisson: job.rate_poisson.then(|| {
                Box::new(std::array::from_fn(|d| {
                    let purpose = [slot::POISSON, slot::POISSON2, slot::POISSON3][d];
                    // `usec_for_io`: a byte rate in I/Os of the smallest block size.
                    let bps = job.rate[d].max(job.rate_iops[d] * u64::from(job.min_bs[d]));
                    let iops = bps / u64::from(job.min_bs[d].max(1));
                    let gap = 1_000_000u64.checked_div(iops).unwrap_or(0);
                    (job.seeds.state32(purpose), gap, 0)
                }))
            }),
            fsync: job.fsync,
            fdatasync: job.fdatasync,
            end_fsync: job.end_fsync,
            verify_pass,
            direct: job.direct,
            sync_writes: job.sync_writes,
            // fio's `create_only`: the set-up (the file layout, done for the whole run)
            // and nothing else.
            phase: if job.create_only {
                Phase::Done
            } else {
                Phase::Main
            },
            issued: 0,
            pass_start: 0,
            writes_issued: 0,
            flush_due: None,
            verify_at: 0,
            write_order: (verify_pass && in_write_order).then(Vec::new),
            replay,
            replay_left: 0,
            more_loops: false,
            unlink_each_loop: job.unlink_each_loop,
            unlink_due: false,
            unlink_now: false,
            fill_device: job.fill_device,
            log_replay: job.replay.clone().map(crate::iolog_replay::Cursor::new),
            fsync_on_close: job.fsync_on_close && job.rw.does_write(),
            in_flight: job.serialize_overlap.then(Vec::new),
            close_flushes: Default::default(),
            last_was_sync: false,
            unlogged: false,
            dry_run: job.verify_only && job.rw.does_write(),
            write_comps: (job.verify_state_save
                && job.verify
                && job.rw.does_write()
                && !job.verify_only)
                .then(|| vec![Default::default(); job.files.len()]),
            verify_stop: job.verify_state.clone(),
            verify_done: 0,
            verify_reading: false,
            backlog_every: if verify_pass && !job.verify_only {
                job.verify_backlog
            } else {
                0
            },
            backlog_batch: job.verify_backlog_batch,
            backlog: std::collections::VecDeque::new(),
            backlog_state: Backlog::Idle,
            flow: job.flow.clone(),
            flow_mine: 0,
            flow_state: FlowState::Out,
            flow_pause: None,
            lat: job.latency_target.map(|(target, window, pct, run)| {
                crate::lat_target::LatTarget::new(target, window, pct, run, job.iodepth)
            }),
            max_latency_ns: job.max_latency_ns,
            iodepth: job.iodepth,
            completed_ios: 0,
            lat_quiesce: false,
            stats_reset: false,
            error: None,
            failed: false,
            errors: job.errors.clone(),
            min_rate: MinRate {
                bytes_min: job.rate_min,
                iops_min: job.rate_iops_min,
                cycle_ns: job.rate_cycle_ns.max(1),
                ..MinRate::default()
            },
            stopped: false,
            number_ios: job.number_ios,
            io_bytes: job.io_bytes,
            loops: job.loops,
            passes: 0,
            main_bytes: 0,
            think_ns: job.thinktime_ns,
            think_blocks: job.thinktime_blocks.max(1),
            think_rule: job.think,
            think: Think::No,
            issued_rw: 0,
            done_rw: 0,
            ramp_reset: job.ramp_ns == 0,
            think_mark: 0,
            last_think_at: 0,
            think_check: None,
            min_bs: job.min_bs,
            cmdprio: job
                .cmdprio
                .clone()
                .map(|c| (c, job.seeds.state32(slot::PRIO_CMDS))),
            log: job.write_iolog.is_some().then(Vec::new),
            bases: job.files.iter().map(|f| f.base).collect(),
            last_write: 0,
            end_flushes: 0,
            zbd: job.zbd.clone().map(|z| crate::zbd::ZbdState::new(job, z)),
            zbd_hold: None,
            zbd_resets: Default::default(),
            zbd_reset_out: false,
            zbd_loop_reset: true,
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
        let mut next = self.decide(now);
        if let (Next::Io(io), Some((c, rng))) = (&mut next, &mut self.cmdprio) {
            // fio draws as the engine queues each read and write (`fio_ioring_queue`),
            // which is the order they are issued in.
            let dir = match io.kind {
                IoKind::Read => Some(Ddir::Read),
                IoKind::Write => Some(Ddir::Write),
                _ => None,
            };
            io.cmdprio = dir.and_then(|d| c.pick(rng, d, io.len));
        }
        match next {
            Next::Io(_) => self.quiet = false,
            Next::Drain => self.quiet = true,
            _ => {}
        }
        if let Next::Io(io) = &next {
            self.last_was_sync = matches!(io.kind, IoKind::Flush | IoKind::Datasync);
            let rel = io.offset.saturating_sub(self.bases[io.file as usize]);
            let logged = !std::mem::take(&mut self.unlogged);
            if let (Some(log), true) = (&mut self.log, logged) {
                log.push(IoLogEntry {
                    at_ns: now,
                    kind: io.kind,
                    file: io.file,
                    // fio logs a flush at the offset of the write before it.
                    offset: if matches!(io.kind, IoKind::Flush | IoKind::Datasync) {
                        self.last_write
                    } else {
                        rel
                    },
                    len: io.len,
                });
            }
            if io.kind == IoKind::Write {
                self.last_write = rel;
            }
        }
        next
    }

    /// What to do at `now` (nanoseconds since the job started).
    #[inline]
    fn decide(&mut self, now: u64) -> Next {
        if let (Some(f), FlowState::Out) = (&self.flow, self.flow_state) {
            f.join();
            self.flow_state = FlowState::In;
        }
        let next = self.decide_inner(now);
        if let (Some(z), Next::Done) = (&self.zbd, next) {
            z.release_all();
        }
        if let (Some(f), FlowState::In, Next::Done) = (&self.flow, self.flow_state, next) {
            self.flow_state = FlowState::Left;
            f.leave(std::mem::take(&mut self.flow_mine));
        }
        next
    }

    #[inline]
    fn decide_inner(&mut self, now: u64) -> Next {
        loop {
            match self.phase {
                Phase::Main => {
                    // The runner empties the files at this drain ([`Self::take_unlink`]);
                    // a runner without files lets it pass.
                    if std::mem::take(&mut self.unlink_due) {
                        self.unlink_now = true;
                        return Next::Drain;
                    }
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
                        // once it issued `io_size` (times `loops`) bytes. A time-based job
                        // wraps around in place (fio's `do_io` goes on); any other pass is
                        // one of fio's loops (`thread_main`'s `keep_running`): its I/O
                        // completes, `end_fsync` and the verify pass follow, then the next.
                        let more = match self.io_bytes {
                            _ if self.time_based => true,
                            Some(_) => true,
                            None => self.passes < self.loops,
                        };
                        if more && self.time_based {
                            self.pass_start = self.issued;
                            self.gen.rewind(false);
                        } else {
                            self.more_loops = more;
                            self.end_main();
                            continue;
                        }
                    }
                    // fio's `do_dry_run` (`verify_only`): every I/O of the job is taken
                    // and completed at once, without rates, think times or flushes; the
                    // writes are remembered for the verify pass.
                    if self.dry_run {
                        self.flush_due = None;
                        if self.main_io().is_none()
                            && (self.issued == self.pass_start || !self.gen.pass_done())
                        {
                            self.end_main();
                        }
                        continue;
                    }
                    // fio's thinktime (`handle_thinktime`): once an issue (and what it
                    // reaped) meets a trigger, the I/O in flight completes (`io_u_quiesce`),
                    // then the job waits.
                    if let Some(d) = self.think_check.take() {
                        self.check_think(now, d);
                    }
                    match self.think {
                        Think::No => {}
                        Think::Due => {
                            if !self.quiet {
                                return Next::Drain;
                            }
                            self.think = Think::Until(now.saturating_add(self.think_ns));
                            continue;
                        }
                        Think::Until(t) if now < t => return Next::Until(t),
                        Think::Until(_) => self.think = Think::No,
                    }
                    // fio's verify_backlog: once that many written blocks wait to be read
                    // back, they complete, the oldest are read back, and those complete.
                    if let Some(next) = self.backlog_step() {
                        return next;
                    }
                    // fio's latency-target search: a window that has run its length moves
                    // the depth; a lower depth first lets what is in flight complete.
                    if let Some(l) = &mut self.lat {
                        let fx = l.check(now, self.completed_ios);
                        self.apply(fx);
                        if self.stopped {
                            continue;
                        }
                    }
                    if std::mem::take(&mut self.lat_quiesce) {
                        return Next::Drain;
                    }
                    // fio's flow control (`flow_threshold_exceeded`, checked before every
                    // I/O unit): a job ahead of its share waits for what it has in flight,
                    // then flow_sleep. An I/O held by its rate already passed the check.
                    if let Some(ns) = self.flow_pause.take() {
                        return Next::Until(now.saturating_add(ns));
                    }
                    if let (Some(f), None) = (&self.flow, self.held) {
                        if !f.admit(&mut self.flow_mine) {
                            if f.sleep_ns == 0 {
                                return Next::Until(now.saturating_add(crate::flow::RETRY_NS));
                            }
                            self.flow_pause = Some(f.sleep_ns);
                            return Next::Drain;
                        }
                    }
                    // `fsync_on_close`: a file closed mid-run is synced once what is in
                    // flight completes (fio syncs as the file's last reference drops).
                    if let Some(&file) = self.close_flushes.front() {
                        if !self.quiet {
                            return Next::Drain;
                        }
                        self.close_flushes.pop_front();
                        if !self.last_was_sync {
                            self.unlogged = true;
                            return Next::Io(self.flush(file));
                        }
                        continue;
                    }
                    // A flush `fsync=N` made due goes before the next I/O; once the job has
                    // issued all it will, none follows (fio checks the end first, so its last
                    // `fsync=N` never comes; `end_fsync` is the one that does).
                    if let Some(kind) = self.flush_due.take() {
                        let file = self.gen.pick() as u32;
                        return Next::Io(JobIo {
                            kind,
                            ..self.flush(file)
                        });
                    }
                    // fio's rate_iops and rate, per direction: the next I/O waits until its
                    // direction is back within both (an I/O and its bytes per their share of
                    // a second since the start).
                    // A mixed job picks the direction of its next I/O with the rates in
                    // view (fio's `rate_ddir`).
                    if self.held.is_none() && self.mixed_rates {
                        let due = [self.due(0), self.due(1)];
                        self.gen.set_rate(Some(RateView { now, due }));
                    }
                    let io = match self.held.take() {
                        Some(io) => io,
                        // fio's `read_iolog_get`: the log's next I/O, at its time.
                        None if self.log_replay.is_some() => match self.replay_io(now) {
                            Some(Ok(io)) => io,
                            Some(Err(t)) => return Next::Until(t),
                            None => {
                                self.end_main();
                                continue;
                            }
                        },
                        None if self.zbd.is_some() => match self.zbd_step(now) {
                            Ok(Some(io)) => io,
                            Err(next) => return next,
                            Ok(None) => {
                                if self.issued == self.pass_start || !self.gen.pass_done() {
                                    self.end_main();
                                }
                                continue;
                            }
                        },
                        None => match self.main_io() {
                            Some(io) => io,
                            // fio found no next I/O: the pass is over (a pass that issued
                            // nothing ends the job rather than start another).
                            None => {
                                if self.issued == self.pass_start || !self.gen.pass_done() {
                                    self.end_main();
                                }
                                continue;
                            }
                        },
                    };
                    // A file closed on the way to this I/O is synced before it.
                    if !self.close_flushes.is_empty() {
                        self.held = Some(io);
                        continue;
                    }
                    let d = match io.kind {
                        IoKind::Read => 0,
                        IoKind::Trim => 2,
                        _ => 1,
                    };
                    let due = self.due(d);
                    if due > now {
                        self.held = Some(io);
                        // fio's `rate_ddir`: inline, what is in flight completes first.
                        if self.rate_quiesce && !self.quiet {
                            return Next::Drain;
                        }
                        return Next::Until(due);
                    }
                    // fio's `serialize_overlap` (`io_u_submit`): a read or write that
                    // overlaps one in flight waits. fio reaps and asks again; here what is
                    // in flight completes (so a failed I/O, never reported complete, leaves
                    // no stale range behind).
                    if let (Some(flight), IoKind::Read | IoKind::Write) = (&self.in_flight, io.kind)
                    {
                        let rel = io.offset.saturating_sub(self.bases[io.file as usize]);
                        let end = rel + u64::from(io.len);
                        if flight.iter().any(|&(o, l)| rel < o + l && o < end) {
                            if !self.quiet {
                                self.held = Some(io);
                                return Next::Drain;
                            }
                            self.in_flight.as_mut().map(Vec::clear);
                        }
                        if let Some(f) = &mut self.in_flight {
                            f.push((rel, u64::from(io.len)));
                        }
                    }
                    self.dir_ios[d] += 1;
                    self.dir_bytes[d] += u64::from(io.len);
                    if let Some(p) = &mut self.poisson {
                        // `usec_for_io`: the next I/O one exponential gap later, as fio
                        // computes it (the gap in whole us times a float logarithm).
                        let (state, gap, last) = &mut p[d];
                        if *gap > 0 {
                            let draw = (*gap as f32) * -(state.rand_0_1() as f32).ln();
                            *last += draw as u64;
                        }
                    }
                    return Next::Io(io);
                }
                Phase::Verify => {
                    // Entered from `Finish` with nothing in flight.
                    // A block that failed its check ends the pass (fio's EILSEQ ends the
                    // job unless `continue_on_error` covers it), as does a stop request.
                    if self.stopped {
                        self.phase = self.next_loop();
                        continue;
                    }
                    // fio's experimental verify (`do_verify`): the job's I/O generated
                    // again from its start, each write turned into a read of the same
                    // place and size, the rest passed over, until what was written has
                    // been read (counted at issue: fio counts at completion, the same at
                    // a depth of one).
                    if let Some(r) = self.replay.as_deref_mut() {
                        // fio's `rw_min_bs`: the smaller of the reads' and writes' sizes.
                        let min = u64::from(self.min_bs[0].min(self.min_bs[1]).max(1));
                        while self.replay_left >= min {
                            let Some((file, io)) = r.next_io() else {
                                break;
                            };
                            if io.dir != Ddir::Write {
                                continue;
                            }
                            if self.stops_before(file, io.offset) {
                                break;
                            }
                            self.replay_left = self.replay_left.saturating_sub(u64::from(io.len));
                            self.issued += 1;
                            self.verify_reading = true;
                            return Next::Io(JobIo {
                                kind: IoKind::Read,
                                offset: io.offset,
                                len: io.len,
                                file: file as u32,
                                sync: false,
                                fua: false,
                                cmdprio: None,
                            });
                        }
                        self.phase = self.next_loop();
                        continue;
                    }
                    while self.verify_at < self.gen.nr_blocks() {
                        let (file, offset) = match &self.write_order {
                            Some(order) => match order.get(self.verify_at as usize) {
                                Some(&(f, o)) => (f as usize, o),
                                None => break,
                            },
                            None => self.gen.block_offset(self.verify_at),
                        };
                        let b = self.gen.block_index(file, offset);
                        self.verify_at += 1;
                        if self.written[(b / 64) as usize] & (1 << (b % 64)) != 0 {
                            if self.stops_before(file, offset) {
                                break;
                            }
                            self.issued += 1;
                            self.verify_reading = true;
                            return Next::Io(JobIo {
                                kind: IoKind::Read,
                                offset,
                                len: self.bs[1],
                                file: file as u32,
                                sync: false,
                                fua: false,
                                cmdprio: None,
                            });
                        }
                    }
                    self.phase = self.next_loop();
                }
                Phase::Finish => {
                    // The end of fio's `do_io`: what is in flight completes, then (but
                    // after an error) `end_fsync` syncs every file of the job, in order,
                    // and those complete before the verify pass or the next loop (fio's
                    // `fio_file_fsync` waits for each).
                    let flushes = (self.end_fsync || self.fsync_on_close) && !self.failed;
                    let more = !self.stopped && (self.verify_pass || self.more_loops);
                    if (flushes || more) && self.end_flushes == 0 && !self.quiet {
                        return Next::Drain;
                    }
                    if flushes && (self.end_flushes as usize) < self.bases.len() {
                        self.end_flushes += 1;
                        return Next::Io(self.flush(self.end_flushes - 1));
                    }
                    if more && !self.quiet {
                        return Next::Drain;
                    }
                    self.end_flushes = 0;
                    self.phase = if self.verify_pass && !self.stopped {
                        Phase::Verify
                    } else {
                        self.next_loop()
                    };
                }
                Phase::Done => return Next::Done,
            }
        }
    }

    /// The next step of reading the backlog back, if the job is in one or one is due.
    /// fio at `iodepth=1` (`--rw=randwrite --verify_backlog=4`, its `write_iolog`): four
    /// writes, the same four blocks read in write order, four more writes, ...; with
    /// `verify_backlog_batch=2` the two oldest are read each time the backlog is full, and
    /// the end's verify pass reads what is left.
    fn backlog_step(&mut self) -> Option<Next> {
        loop {
            match self.backlog_state {
                Backlog::Idle => {
                    if self.backlog_every == 0 || (self.backlog.len() as u64) < self.backlog_every {
                        return None;
                    }
                    self.backlog_state = Backlog::Draining;
                    return Some(Next::Drain);
                }
                Backlog::Draining => {
                    let n = match self.backlog_batch {
                        0 => self.backlog.len() as u64,
                        b => b,
                    };
                    self.verify_reading = true;
                    self.backlog_state = Backlog::Reading(n);
                }
                Backlog::Reading(left) => {
                    let front = if left > 0 {
                        self.backlog.pop_front()
                    } else {
                        None
                    };
                    let Some((file, offset)) = front else {
                        self.backlog_state = Backlog::Settling;
                        return Some(Next::Drain);
                    };
                    self.backlog_state = Backlog::Reading(left - 1);
                    // Read back now: the end's verify pass leaves it out.
                    let b = self.gen.block_index(file as usize, offset);
                    self.written[(b / 64) as usize] &= !(1 << (b % 64));
                    self.issued += 1;
                    return Some(Next::Io(JobIo {
                        kind: IoKind::Read,
                        offset,
                        len: self.bs[1],
                        file,
                        sync: false,
                        fua: false,
                        cmdprio: None,
                    }));
                }
                Backlog::Settling => {
                    self.verify_reading = false;
                    self.backlog_state = Backlog::Idle;
                    return None;
                }
            }
        }
    }

    /// fio's `verify_state_should_stop`: with a loaded verify state, whether the verify
    /// pass ends before reading back `offset` of `file`.
    fn stops_before(&self, file: usize, offset: u64) -> bool {
        self.verify_stop
            .as_ref()
            .is_some_and(|s| s.stops_before(self.verify_done, file, offset))
    }

    /// How far the job's writes went, for `verify_state_save` (fio's `get_all_io_list`):
    /// `None` unless the job writes with verify and keeps the state.
    pub fn verify_state(
        &self,
        name: &str,
        index: usize,
    ) -> Option<crate::verify_state::VerifyState> {
        let comps = self.write_comps.as_ref()?;
        Some(crate::verify_state::VerifyState::new(
            name,
            index,
            self.writes_issued,
            self.iodepth,
            comps.iter().map(|c| c.iter().copied().collect()).collect(),
        ))
    }

    /// The job ends with error `e` (the first one only), `ETIMEDOUT` as fio reports a
    /// latency missed.
    fn fail(&mut self, e: String) {
        self.fail_with(ETIMEDOUT, e);
    }

    /// The job ends with errno `errno` and error `e` (the first one only).
    fn fail_with(&mut self, errno: i32, e: String) {
        if !std::mem::replace(&mut self.failed, true) {
            self.error = Some((errno, e));
        }
        self.stopped = true;
    }

    /// What the latency-target search asked for.
    fn apply(&mut self, fx: crate::lat_target::Effects) {
        self.lat_quiesce |= fx.quiesce;
        self.stats_reset |= fx.reset_stats;
        if fx.done {
            self.stopped = true;
        }
        if let Some(e) = fx.error {
            self.fail(e);
        }
    }

    /// The depth the job may keep in flight now: `iodepth`, or the latency-target search's.
    pub fn depth(&self) -> u32 {
        self.search_depth().unwrap_or(self.iodepth)
    }

    /// The latency-target search's depth, if the job has one.
    pub fn search_depth(&self) -> Option<u32> {
        self.lat.as_ref().map(|l| l.depth())
    }

    /// A read, write or trim of `bytes` at device offset `at` in direction `dir` completed
    /// at `now` after `lat_ns` in all (fio's `lat`: from when the job took it to its
    /// completion), counted after `ramp_time`, as fio's `account_io_completion` does;
    /// during the ramp it only counts towards `thinktime_blocks` (fio's `io_blocks`).
    pub fn completed(&mut self, now: u64, lat_ns: u64, dir: Ddir, bytes: u64, at: u64) {
        if let (Ddir::Read | Ddir::Write, Some(z)) = (dir, &mut self.zbd) {
            z.io_done(dir == Ddir::Write, at, bytes, true);
        }
        // The file and offset in it, where something keeps count of completions by file.
        let file = if self.write_comps.is_some() || self.in_flight.is_some() {
            crate::job::file_at(self.bases.iter().copied(), at)
        } else {
            None
        };
        if let (Ddir::Write, Some(comps), Some((f, off))) = (dir, &mut self.write_comps, file) {
            let c = &mut comps[f];
            if c.len() >= self.iodepth.max(1) as usize {
                c.pop_front();
            }
            c.push_back(off);
        }
        if let (Some(flight), Some((_, off))) = (&mut self.in_flight, file) {
            let done = (off, bytes);
            if let Some(i) = flight.iter().position(|&r| r == done) {
                flight.swap_remove(i);
            }
        }
        if dir == Ddir::Read && self.phase == Phase::Verify {
            self.verify_done += 1;
        }
        if !self.ramp_reset && now >= self.ramp_ns {
            self.ramp_reset = true;
            self.done_rw = 0;
        }
        self.done_rw += 1;
        if now < self.ramp_ns {
            return;
        }
        self.completed_ios += 1;
        if let Some(e) = self.min_rate.completed(now - self.ramp_ns, dir, bytes) {
            self.fail_with(EIO, e);
        }
        if self.max_latency_ns > 0 && lat_ns > self.max_latency_ns {
            let e = format!(
                "latency of {lat_ns} ns exceeds max_latency {} ns",
                self.max_latency_ns
            );
            self.fail(e);
        }
        if let Some(l) = &mut self.lat {
            let fx = l.completed(now, lat_ns, self.completed_ios);
            self.apply(fx);
        }
    }

    /// Whether the statistics start over now (the latency-target search's final window);
    /// asking clears it.
    pub fn take_stats_reset(&mut self) -> bool {
        std::mem::take(&mut self.stats_reset)
    }

    /// Zones the job reset (`zonemode=zbd`; fio's `nr_zone_resets`).
    pub fn zone_resets(&self) -> u64 {
        self.zbd.as_ref().map_or(0, |z| z.resets)
    }

    /// A read or write (`write`) of `bytes` at device offset `at` failed (the runner says
    /// so beside [`Self::io_failed`]): `zonemode=zbd` lets go of its zone.
    pub fn rw_failed(&mut self, write: bool, at: u64, bytes: u64) {
        if let Some(z) = &mut self.zbd {
            z.io_done(write, at, bytes, false);
        }
    }

    /// An I/O (a read if `read`) failed with `errno`: unless `continue_on_error` covers it
    /// (fio's `td_non_fatal_error`) the main phase ends, as fio's job does at its first
    /// error. Whether the job goes on.
    pub fn io_failed(&mut self, read: bool, errno: i32) -> bool {
        let goes_on = self.errors.non_fatal(read, errno);
        if !goes_on {
            self.stopped = true;
        }
        goes_on
    }

    /// fio's `fill_device`: a write that found the file system full (`ENOSPC`, `EDQUOT`)
    /// ends the job as planned, not as an error; whether this `errno` did.
    pub fn fill_ended(&mut self, errno: i32) -> bool {
        let full = self.fill_device && (errno == ENOSPC || errno == EDQUOT);
        if full {
            self.stopped = true;
        }
        full
    }

    /// Whether the job goes on after some errors ([`crate::ErrorPolicy::continues`]).
    pub fn continues_on_errors(&self) -> bool {
        self.errors.continues()
    }

    /// The error that ended the job, once, with the errno fio reports for it: `max_latency`
    /// exceeded or `latency_target` missed at depth 1 (`ETIMEDOUT`), `rate_min` or
    /// `rate_iops_min` not met (`EIO`).
    pub fn take_error(&mut self) -> Option<(i32, String)> {
        self.error.take()
    }

    /// A flush of file `file` (a flush reaches the whole device; the file is what fio
    /// names in its log).
    fn flush(&self, file: u32) -> JobIo {
        JobIo {
            file,
            ..JobIo::FLUSH
        }
    }

    /// When direction `d` (0 read, 1 write, 2 trim) may issue next, in ns since the job's
    /// start (fio's `rate_next_io_time`): its I/Os and bytes so far at their rates, or the
    /// Poisson process's next time.
    fn due(&self, d: usize) -> u64 {
        let at = |count: u64, per_s: u64| -> u64 {
            if per_s == 0 {
                return 0;
            }
            (count as u128 * 1_000_000_000 / per_s as u128).min(u64::MAX as u128) as u64
        };
        match &self.poisson {
            Some(p) if p[d].1 > 0 => p[d].2.saturating_mul(1000),
            _ => at(self.dir_ios[d], self.rate_iops[d]).max(at(self.dir_bytes[d], self.rate[d])),
        }
    }

    /// fio's `handle_thinktime` after an issue in direction `d`: a think is due once
    /// `thinktime_blocks` I/Os completed (or were issued) since the last, or with
    /// `thinktime_iotime` that much time passed since it; `rate_ignore_thinktime` counts
    /// the time to think as if its I/Os had been issued at the rate (less one block, so the
    /// job issues at once after), as fio adds them to `rate_io_issue_bytes`.
    fn check_think(&mut self, now: u64, d: usize) {
        let r = self.think_rule;
        let mut stall = false;
        if r.iotime_ns > 0 {
            if now.saturating_sub(self.last_think_at) >= r.iotime_ns + self.think_ns {
                stall = true;
            } else if !r.by_blocks {
                return;
            }
        }
        let b = if r.count_issued {
            self.issued_rw
        } else {
            self.done_rw
        };
        if b >= self.think_mark + self.think_blocks {
            stall = true;
        }
        if !stall {
            return;
        }
        self.think = Think::Due;
        self.think_mark = b;
        if r.iotime_ns > 0 {
            self.last_think_at = now;
        }
        let bs = u64::from(self.min_bs[d].max(1));
        let bps = self.rate[d].max(self.rate_iops[d] * bs);
        if r.rate_ignore && bps > 0 {
            let total_us = self.think_ns / 1000;
            let missed = bps * total_us / 1_000_000;
            let us_per_op = bs * 1_000_000 / bps;
            let over = if us_per_op <= total_us { bs } else { 0 };
            let credit = missed.saturating_sub(over);
            self.dir_bytes[d] += credit;
            self.dir_ios[d] += credit / bs;
            if let Some(p) = &mut self.poisson {
                p[d].2 += total_us;
            }
        }
    }

    #[inline]
    /// The next I/O of the main phase; `None` where the generator ended its pass early.
    fn main_io(&mut self) -> Option<JobIo> {
        let (file, io) = self.draw()?;
        Some(self.account(file, io))
    }

    /// The next I/O fio's `fill_io_u` draws, before `zonemode=zbd` aims it.
    fn draw(&mut self) -> Option<(usize, crate::pattern::Io)> {
        let (file, io) = self.gen.next_io()?;
        if self.fsync_on_close {
            let closed = self.gen.take_closed();
            self.close_flushes
                .extend(closed.into_iter().map(|f| f as u32));
        }
        Some((file, io))
    }

    /// The I/O as it goes out, counted as a main-phase I/O.
    fn account(&mut self, file: usize, io: crate::pattern::Io) -> JobIo {
        self.issued += 1;
        self.main_bytes += u64::from(io.len);
        if self.think_ns > 0 {
            self.issued_rw += 1;
            self.think_check = Some(io.dir.index());
        }
        let write = io.dir == Ddir::Write;
        if write {
            self.replay_left += u64::from(io.len);
            if self.verify_pass {
                let b = self.gen.block_index(file, io.offset);
                let first = self.written[(b / 64) as usize] & (1 << (b % 64)) == 0;
                self.written[(b / 64) as usize] |= 1 << (b % 64);
                if let (true, Some(order)) = (first, &mut self.write_order) {
                    order.push((file as u32, io.offset));
                }
                if self.backlog_every > 0 {
                    self.backlog.push_back((file as u32, io.offset));
                }
            }
            // fio's `get_rw_ddir`: an fsync at every multiple of `fsync`, else an fdatasync
            // at every multiple of `fdatasync`.
            self.writes_issued += 1;
            let w = self.writes_issued;
            if self.fsync > 0 && w % self.fsync == 0 {
                self.flush_due = Some(IoKind::Flush);
            } else if self.fdatasync > 0 && w % self.fdatasync == 0 {
                self.flush_due = Some(IoKind::Datasync);
            }
        }
        let kind = match io.dir {
            Ddir::Read => IoKind::Read,
            Ddir::Write => IoKind::Write,
            Ddir::Trim => IoKind::Trim,
        };
        self.job_io(kind, file as u32, io.offset, io.len)
    }

    /// `zonemode=zbd`'s next step in the main phase: an I/O aimed at its zone (`Ok(Some)`),
    /// the end of the file's pass (`Ok(None)`: fio found no next I/O, or none it can make),
    /// or what the job does first (`Err`: a zone reset to issue, a drain of its I/O in
    /// flight, a wait for another job's zone).
    fn zbd_step(&mut self, now: u64) -> Result<Option<JobIo>, Next> {
        use crate::zbd::{Adjusted, Resume, ZbdIo};
        if std::mem::take(&mut self.zbd_loop_reset) {
            let resets = self
                .zbd
                .as_mut()
                .map(|z| z.file_reset())
                .unwrap_or_default();
            self.zbd_resets.extend(resets);
        }
        // A zone reset completes before anything else goes out (fio's ioctl waits).
        if self.zbd_reset_out || !self.zbd_resets.is_empty() {
            if !self.quiet {
                return Err(Next::Drain);
            }
            self.zbd_reset_out = false;
            if let Some(offset) = self.zbd_resets.pop_front() {
                return Err(self.zbd_reset(offset));
            }
        }
        let (file, io, resume) = match self.zbd_hold.take() {
            Some(h) => h,
            None => match self.draw() {
                Some((file, io)) => (file, io, Resume::Start),
                None => return Ok(None),
            },
        };
        let quiet = self.quiet;
        let Some(z) = self.zbd.as_mut() else {
            return Ok(Some(self.account(file, io)));
        };
        let zio = ZbdIo {
            write: io.dir == Ddir::Write,
            file,
            offset: io.offset,
            len: io.len,
        };
        match z.adjust(zio, resume, quiet) {
            Adjusted::Accept { offset, len } => {
                let cut =
                    self.gen
                        .zbd_issued(file, io.dir, offset, u64::from(io.len), u64::from(len));
                if io.dir == Ddir::Write {
                    z.cut(file, offset, u64::from(len), cut);
                }
                let len = cut;
                let io = crate::pattern::Io {
                    dir: io.dir,
                    offset,
                    len: len as u32,
                };
                Ok(Some(self.account(file, io)))
            }
            // fio's `io_u_eof`: the file's pass is over (the job goes on to its next loop,
            // as fio's `keep_running` does while bytes are left), or with an error the job.
            Adjusted::Eof(Some(e)) => {
                self.fail_with(EIO, format!("zonemode=zbd: {e}"));
                self.end_main();
                Err(Next::Drain)
            }
            Adjusted::Eof(None) => {
                self.gen.end_pass(file);
                Ok(None)
            }
            Adjusted::Quiesce(r) => {
                self.zbd_hold = Some((file, io, r));
                Err(Next::Drain)
            }
            Adjusted::Spin(r) => {
                self.zbd_hold = Some((file, io, r));
                Err(Next::Until(now.saturating_add(crate::zbd::SPIN_NS)))
            }
            Adjusted::Reset { offset, resume } => {
                self.zbd_hold = Some((file, io, resume));
                Err(self.zbd_reset(offset))
            }
        }
    }

    /// A reset of the zone at device offset `offset`, issued and waited for; fio's log
    /// does not show it.
    fn zbd_reset(&mut self, offset: u64) -> Next {
        self.zbd_reset_out = true;
        self.unlogged = true;
        let file = crate::job::file_at(self.bases.iter().copied(), offset).map_or(0, |(f, _)| f);
        Next::Io(JobIo {
            kind: IoKind::ZoneReset,
            offset,
            len: 0,
            file: file as u32,
            sync: true,
            fua: false,
            cmdprio: None,
        })
    }

    /// An I/O of the job's at device offset `offset`, as it goes out: a flush, or a write
    /// of a `direct` or `sync=` job, synchronous; a `sync=` write with FUA.
    fn job_io(&self, kind: IoKind, file: u32, offset: u64, len: u32) -> JobIo {
        let write = kind == IoKind::Write;
        JobIo {
            kind,
            offset,
            len,
            file,
            sync: matches!(kind, IoKind::Flush | IoKind::Datasync)
                || write && (self.direct || self.sync_writes),
            fua: write && self.sync_writes,
            cmdprio: None,
        }
    }

    /// The replayed log's next I/O at `now` (`Err`: not before that time; `None`: the log
    /// is done), counted as a main-phase I/O.
    fn replay_io(&mut self, now: u64) -> Option<Result<JobIo, u64>> {
        let (kind, file, offset, len) = match self.log_replay.as_mut()?.next(now) {
            crate::iolog_replay::Due::End => return None,
            crate::iolog_replay::Due::Wait(t) => return Some(Err(t)),
            crate::iolog_replay::Due::Io {
                kind,
                file,
                offset,
                len,
            } => (kind, file, offset, len),
        };
        let file = file.min(self.bases.len().saturating_sub(1) as u32);
        if matches!(kind, IoKind::Read | IoKind::Write | IoKind::Trim) {
            self.issued += 1;
            self.main_bytes += u64::from(len);
        }
        if kind == IoKind::Write {
            self.writes_issued += 1;
        }
        // A flush has no offset of its own (fio's log gives the last write's).
        let flush = matches!(kind, IoKind::Flush | IoKind::Datasync);
        let at = self.bases[file as usize] + if flush { 0 } else { offset };
        Some(Ok(self.job_io(kind, file, at, len)))
    }

    fn end_main(&mut self) {
        self.phase = Phase::Finish;
    }

    /// After a loop's end and verify pass: the next loop if one is due (fio's
    /// `keep_running`), its files emptied first with `unlink_each_loop` and the verify
    /// log started over; else the end.
    fn next_loop(&mut self) -> Phase {
        if !std::mem::take(&mut self.more_loops) || self.stopped {
            return Phase::Done;
        }
        self.pass_start = self.issued;
        self.gen.rewind(true);
        self.zbd_loop_reset = true;
        if self.verify_pass {
            self.written.fill(0);
            if let Some(order) = &mut self.write_order {
                order.clear();
            }
            self.verify_at = 0;
            self.verify_done = 0;
            self.verify_reading = false;
            if self.replay.is_some() {
                self.replay = Some(Box::new(self.gen.clone()));
                self.replay_left = 0;
            }
        }
        self.unlink_due = self.unlink_each_loop;
        Phase::Main
    }

    /// Whether the job's files are to be emptied now (`unlink_each_loop`: a new loop
    /// begins and nothing of the job is in flight); asking clears it. A runner without
    /// files (the simulator) need not ask.
    pub fn take_unlink(&mut self) -> bool {
        std::mem::take(&mut self.unlink_now)
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
        let jobs = resolve(&specs, &Default::default(), |_| Ok(1 << 30), 0).unwrap();
        JobDriver::new(&jobs[0])
    }

    /// fio's `check_min_rate`: nothing is judged in the 2 s after the ramp, the first look
    /// after it only starts a window, and a window of `rate_cycle` below the floor ends the
    /// job with `EIO` and fio's message; a window at the floor does not.
    #[test]
    fn a_rate_below_rate_min_over_a_cycle_ends_the_job_after_the_settle_time() {
        const MS: u64 = 1_000_000;
        // 4 KiB every 10 ms: 400 KiB/s (409,600 B/s).
        let run = |floor: &str| {
            let mut d = driver(&format!(
                "[j]\nrw=read\nbs=4k\nrate_min={floor}\nramp_time=1\n"
            ));
            let mut at = None;
            for i in 0..500u64 {
                let now = 1000 * MS + i * 10 * MS;
                d.completed(now, 100_000, Ddir::Read, 4096, 0);
                if let Some(e) = d.take_error() {
                    at = Some((now, e));
                    break;
                }
            }
            at
        };
        let (now, (errno, e)) = run("500k").expect("400 KiB/s is below 500 KiB");
        assert_eq!(errno, EIO);
        assert_eq!(e, "rate_min=512000B/s not met, got 409600B/s");
        // Ramp 1 s + settle 2 s starts the window; it is judged a cycle (1 s) later.
        assert_eq!(now, 4000 * MS);
        assert!(run("400k").is_none(), "409,600 B/s meets 400 KiB/s");
    }

    /// `rate_process=poisson`: the I/Os go at fio's `usec_for_io` times from the job's own
    /// `poisson_state` stream: exponential gaps whose mean is the rate's (here within 3%
    /// over 2,000 I/Os, and their spread that of an exponential, where the linear process
    /// has none). fio 3.33's log of the same job (`--ioengine=null --rw=randread --bs=4k
    /// --rate_iops=50 --rate_process=poisson`, seeds by default) issues its first reads at
    /// 47.1, 56.6, 62.8, 84.0 and 159.1 ms: the times below plus its sleep's overshoot
    /// (mqblk bench's own log of the job: 46, 56, 62, 83, 159 ms).
    #[test]
    fn a_poisson_rate_spaces_ios_as_fio_s_stream_does() {
        let mut d = driver(
            "[j]\nrw=randread\nbs=4k\nrate_iops=50\nrate_process=poisson\nio_submit_mode=offload\nruntime=100\ntime_based\n",
        );
        let mut times = Vec::new();
        let mut now = 0;
        while times.len() < 2000 {
            match d.next(now) {
                Next::Io(_) => times.push(now),
                Next::Until(t) => now = t,
                other => panic!("{other:?}"),
            }
        }
        let ms: Vec<u64> = times[1..6].iter().map(|t| t / 1_000_000).collect();
        assert_eq!(ms, [46, 56, 62, 83, 158]);
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((mean / 20e6 - 1.0).abs() < 0.03, "mean gap {mean} ns");
        assert!((sd / mean - 1.0).abs() < 0.1, "spread {}", sd / mean);
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
        // fio 3.33 (`--ioengine=null --rw=randrw --bs=4k,64k --size=1m`, its write_iolog)
        // ends this pass after 12 I/Os and 356352 bytes: its random map has a bit per 4 KiB,
        // but a write marks and looks up bits in 64 KiB units, so a write soon finds the
        // next free bit past the 16 it may start at, and the file is done.
        let bytes: u64 = ios.iter().map(|io| u64::from(io.len)).sum();
        assert_eq!((ios.len(), bytes), (12, 356_352));
        for io in &ios {
            let want = if io.kind == IoKind::Write {
                65536
            } else {
                4096
            };
            assert_eq!(io.len, want);
            // Each direction at multiples of its own size, as fio's `ba[]` are.
            assert_eq!(io.offset % u64::from(want), 0);
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
        assert_eq!(d.next(0), Next::Drain);
        assert_eq!(d.next(0), Next::Until(3_906_250));
        assert!(matches!(d.next(3_906_250), Next::Io(_)));
        // Reads capped at 100 IOPS, writes free: a 50/50 mix whose reads are ahead of
        // their rate gives way to writes, which are always due (fio's `rate_ddir`): of 50
        // I/Os at 0 ms one is a read, and of 50 at 10 ms one more.
        let mut d = driver("[j]\nrw=randrw\nrate_iops=100,0\nruntime=1\ntime_based\n");
        for now in [0, 10_000_000] {
            let reads = (0..50)
                .map(|_| match d.next(now) {
                    Next::Io(io) => io.kind,
                    other => panic!("at {now}: {other:?}"),
                })
                .filter(|k| *k == IoKind::Read)
                .count();
            assert_eq!(reads, 1, "at {now}");
        }
    }

    #[test]
    fn offset_increment_spaces_the_clones_regions() {
        let specs = parse_job_text(
            "t",
            "[j]\nnumjobs=3\nsize=1m\noffset=4k\noffset_increment=2m\n",
        )
        .unwrap();
        assert_eq!(specs[0].device_size(), (4 << 10) + (4 << 20) + (1 << 20));
        let jobs = resolve(&specs, &Default::default(), |_| Ok(8 << 20), 0).unwrap();
        let offsets: Vec<u64> = jobs.iter().map(|j| j.files[0].offset).collect();
        assert_eq!(
            offsets,
            [4 << 10, (4 << 10) + (2 << 20), (4 << 10) + (4 << 20)]
        );
        assert!(resolve(&specs, &Default::default(), |_| Ok(4 << 20), 0).is_err());
    }

    #[test]
    fn thinktime_waits_for_the_ios_then_the_time() {
        let mut d = driver(
            "[j]\nsize=64k\niodepth=8\nthinktime=1ms\nthinktime_blocks=3\nthinktime_blocks_type=issue\n",
        );
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
    fn thinktime_counts_completions_by_default_and_can_go_by_time() {
        // fio's default `thinktime_blocks_type=complete`: issues go on until three have
        // completed (looked at after each issue, with what it reaped).
        let mut d = driver("[j]\nsize=64k\niodepth=8\nthinktime=1ms\nthinktime_blocks=3\n");
        for _ in 0..5 {
            assert!(matches!(d.next(0), Next::Io(_)));
        }
        for _ in 0..3 {
            d.completed(1_000, 1_000, Ddir::Read, 4096, 0);
        }
        assert_eq!(d.next(1_000), Next::Drain);
        // `thinktime_iotime` alone: a think after 2 ms of I/O plus the think time.
        let mut d = driver("[j]\nsize=64m\nthinktime=1ms\nthinktime_iotime=2ms\n");
        let mut t = 0;
        while let Next::Io(_) = d.next(t) {
            d.completed(t + 100_000, 100_000, Ddir::Read, 4096, 0);
            t += 100_000;
        }
        // fio measures from the last think's start: iotime plus the think time.
        assert_eq!(t, 3_000_000);
    }

    #[test]
    fn rate_ignore_thinktime_keeps_the_rates_schedule() {
        // 1000 IOPS with a 10 ms think after every 5 issues: catching up, the job issues
        // back to back after a think; ignoring it, the think counts as 10 I/Os issued less
        // one, so the next goes 1 ms after the think.
        for opt in ["", "rate_ignore_thinktime=1\n"] {
            let mut d = driver(&format!(
                "[j]\nsize=64m\nrate_iops=1000\nrate_process=linear\nio_submit_mode=offload\nthinktime=10ms\nthinktime_blocks=5\nthinktime_blocks_type=issue\n{opt}"
            ));
            let mut t = 0;
            let mut times = Vec::new();
            while times.len() < 7 {
                match d.next(t) {
                    Next::Io(_) => times.push(t),
                    Next::Until(u) => t = u,
                    Next::Drain => {}
                    other => panic!("{other:?}"),
                }
            }
            if opt.is_empty() {
                // Behind its schedule after the think: the 6th and 7th go at once.
                assert_eq!(times[5], times[6], "{times:?}");
            } else {
                assert_eq!(times[6] - times[5], 1_000_000, "{times:?}");
            }
        }
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
    fn sync_writes_carry_fua_and_reads_do_not() {
        // dio_bio_write_op: O_DIRECT writes are REQ_SYNC, and REQ_FUA when iocb_is_dsync.
        for (opt, fua) in [
            ("", false),
            ("sync=0\n", false),
            ("sync=none\n", false),
            ("sync=1\n", true),
            ("sync=sync\n", true),
            ("sync=dsync\n", true),
        ] {
            let mut d = driver(&format!("[j]\nrw=randrw\ndirect=1\nsize=64k\n{opt}"));
            let ios = all(&mut d, 0);
            assert!(ios.iter().any(|i| i.kind == IoKind::Read), "{opt}");
            for io in &ios {
                let write = io.kind == IoKind::Write;
                assert_eq!(io.fua, write && fua, "{opt}: {io:?}");
                assert_eq!(io.sync, write, "{opt}: {io:?}");
            }
        }
        // Buffered O_SYNC writes are synced as they go (generic_write_sync): still sync.
        let mut d = driver("[j]\nrw=write\nsize=16k\nsync=dsync\n");
        assert!(all(&mut d, 0).iter().all(|i| i.sync && i.fua));
        let mut d = driver("[j]\nrw=write\nsize=16k\n");
        assert!(all(&mut d, 0).iter().all(|i| !i.sync && !i.fua));
    }

    #[test]
    fn rate_iops_spaces_issues() {
        let mut d = driver("[j]\nrw=randread\nrate_iops=100\nruntime=1\ntime_based\n");
        assert!(matches!(d.next(0), Next::Io(_)));
        // fio's `rate_ddir` inline: ahead of its rate, the job first lets what is in flight
        // complete (`io_u_quiesce`), then sleeps.
        assert_eq!(d.next(0), Next::Drain);
        assert_eq!(d.next(0), Next::Until(10_000_000));
        assert!(matches!(d.next(10_000_000), Next::Io(_)));
        // Behind its rate it issues without waiting for anything.
        assert!(matches!(d.next(30_000_000), Next::Io(_)));
        assert!(matches!(d.next(30_000_000), Next::Io(_)));
        // Offloaded, it only sleeps.
        let mut d = driver(
            "[j]\nrw=randread\nrate_iops=100\nio_submit_mode=offload\nruntime=1\ntime_based\n",
        );
        assert!(matches!(d.next(0), Next::Io(_)));
        assert_eq!(d.next(0), Next::Until(10_000_000));
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
        // The main phase's I/O completes (the end of fio's `do_io`), then the pass reads.
        assert_eq!(d.phase(), Phase::Finish);
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

    /// `verify_only`: the same job issues none of its reads or writes, nor the flushes of
    /// `fsync=N`, and reads back exactly what a writing run wrote, in its order; a block
    /// that fails its check ends the pass.
    #[test]
    fn verify_only_reads_back_what_the_writing_run_wrote_and_issues_nothing_else() {
        let text = "[j]\nrw=randrw\nrwmixread=50\nsize=256k\nverify=crc32c\nfsync=3\n";
        let mut w = driver(text);
        let mut written = Vec::new();
        while let Next::Io(io) = w.next(0) {
            if io.kind == IoKind::Write && !written.contains(&io.offset) {
                written.push(io.offset);
            }
        }
        let mut v = driver(&format!("{text}verify_only=1\n"));
        let ios = all(&mut v, 0);
        assert!(ios.iter().all(|io| io.kind == IoKind::Read), "{ios:?}");
        let read: Vec<u64> = ios.iter().map(|io| io.offset).collect();
        assert_eq!(read, written);
        let mut v = driver(&format!("{text}verify_only=1\n"));
        assert_eq!(v.next(0), Next::Drain);
        assert!(matches!(v.next(0), Next::Io(_)));
        assert!(!v.io_failed(true, crate::job::EILSEQ));
        assert_eq!(v.next(0), Next::Done);
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
        // What is in flight completes first (the end of fio's `do_io`).
        assert_eq!(d.next(0), Next::Drain);
        assert_eq!(d.next(0), Next::Io(JobIo::FLUSH));
        assert_eq!(d.next(0), Next::Done);
    }

    /// A job with files, laid out as `mqblk bench` lays them out (nothing on disk: every
    /// file here is sized by its options).
    fn files_driver(text: &str) -> (Job, JobDriver) {
        use crate::job::FileLayout;
        let specs = parse_job_text("t", text).unwrap();
        let layout = FileLayout::plan(&specs, |_, _| {
            Err(std::io::Error::other("unsized: every file here has a size"))
        })
        .unwrap();
        let jobs = resolve(&specs, &layout, |_| Ok(1 << 30), 0).unwrap();
        let d = JobDriver::new(&jobs[0]);
        (jobs[0].clone(), d)
    }

    /// `(file number, offset in the file in 4 KiB blocks, kind)` of everything issued.
    fn file_ios(job: &Job, d: &mut JobDriver) -> Vec<(u32, u64, IoKind)> {
        all(d, 0)
            .iter()
            .map(|io| {
                let rel = io.offset.saturating_sub(job.files[io.file as usize].base);
                (io.file, rel / 4096, io.kind)
            })
            .collect()
    }

    /// `fsync_on_close` with one file open at a time (fio 3.33 under strace: three
    /// fsyncs, the first before the second file's first write): the first file is synced
    /// as it closes, once its writes have completed, and that sync stays out of the log as
    /// fio's plain `fsync(2)` does; at the end every file is synced as `end_fsync` would,
    /// logged.
    #[test]
    fn fsync_on_close_syncs_a_file_as_it_closes_and_every_file_at_the_end() {
        use IoKind::{Flush as F, Write as W};
        let (job, mut d) = files_driver(
            "[j]\nrw=write\nbs=4k\nnrfiles=2\nfilesize=8k\nopenfiles=1\nfsync_on_close=1\nwrite_iolog=x\n",
        );
        let mut seen = Vec::new();
        loop {
            match d.next(0) {
                Next::Io(io) => {
                    let rel = io.offset.saturating_sub(job.files[io.file as usize].base);
                    seen.push(format!("{:?} {} {}", io.kind, io.file, rel / 4096));
                }
                Next::Drain => seen.push("drain".into()),
                Next::Done => break,
                other => panic!("{other:?}"),
            }
        }
        let f = |k: IoKind, file: u32, b: u64| format!("{k:?} {file} {b}");
        let want = [
            f(W, 0, 0),
            f(W, 0, 1),
            "drain".into(),
            f(F, 0, 0),
            f(W, 1, 0),
            f(W, 1, 1),
            "drain".into(),
            f(F, 0, 0),
            f(F, 1, 0),
        ];
        assert_eq!(seen, want);
        let logged: Vec<IoKind> = d.take_log().iter().map(|e| e.kind).collect();
        assert_eq!(logged, [W, W, W, W, F, F]);
    }

    /// `serialize_overlap`: the same I/Os in the same order, but one that overlaps an I/O
    /// still in flight waits for what is in flight to complete first; one whose overlap
    /// completed goes at once.
    #[test]
    fn serialize_overlap_waits_for_an_overlapping_io_in_flight() {
        let text = "[j]\nrw=randwrite\nnorandommap\nbs=4k\nsize=16k\nnumber_ios=24\ntime_based\nruntime=1\n";
        let plain: Vec<u64> = all(&mut driver(text), 0)
            .iter()
            .map(|io| io.offset)
            .collect();
        let mut d = driver(&format!("{text}serialize_overlap=1\n"));
        let (mut seen, mut flight, mut drains) = (Vec::new(), Vec::<u64>::new(), 0);
        loop {
            match d.next(0) {
                Next::Io(io) => {
                    assert!(
                        !flight.contains(&io.offset),
                        "{} overlaps one in flight",
                        io.offset
                    );
                    flight.push(io.offset);
                    seen.push(io.offset);
                    // The first of each pair completes at once.
                    if seen.len() % 2 == 1 {
                        d.completed(0, 1, Ddir::Write, 4096, io.offset);
                        flight.retain(|&o| o != io.offset);
                    }
                }
                Next::Drain => {
                    drains += 1;
                    flight.clear();
                }
                Next::Done => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, plain, "the same I/Os, in order");
        // Four blocks, random offsets: some overlap, and not every I/O waits.
        assert!(drains > 1 && drains < 12, "{drains} waits");
    }

    #[test]
    fn a_file_set_is_served_as_fio_serves_it() {
        use IoKind::{Flush as F, Read as R, Write as W};
        // fio 3.33, --ioengine=null --write_iolog: the same sequences, file by file.
        let (j, mut d) = files_driver("[j]\nnrfiles=3\nfilesize=8k\nrw=read\n");
        assert_eq!(
            file_ios(&j, &mut d),
            vec![
                (0, 0, R),
                (1, 0, R),
                (2, 0, R),
                (0, 1, R),
                (1, 1, R),
                (2, 1, R)
            ]
        );
        let (j, mut d) =
            files_driver("[j]\nnrfiles=3\nfilesize=8k\nrw=read\nfile_service_type=sequential\n");
        let files: Vec<u32> = file_ios(&j, &mut d).iter().map(|x| x.0).collect();
        assert_eq!(files, vec![0, 0, 1, 1, 2, 2]);
        // Two of four open: the first two alternate, then the last two.
        let (j, mut d) = files_driver("[j]\nnrfiles=4\nfilesize=8k\nrw=read\nopenfiles=2\n");
        let files: Vec<u32> = file_ios(&j, &mut d).iter().map(|x| x.0).collect();
        assert_eq!(files, vec![0, 1, 0, 1, 2, 3, 2, 3]);
        // roundrobin:2 keeps two I/Os on a file.
        let (j, mut d) =
            files_driver("[j]\nnrfiles=2\nfilesize=16k\nrw=read\nfile_service_type=roundrobin:2\n");
        let files: Vec<u32> = file_ios(&j, &mut d).iter().map(|x| x.0).collect();
        assert_eq!(files, vec![0, 0, 1, 1, 0, 0, 1, 1]);
        // A flush takes the turn of the file it lands on; end_fsync syncs every file.
        let (j, mut d) =
            files_driver("[j]\nnrfiles=2\nfilesize=16k\nrw=write\nfsync=3\nend_fsync=1\n");
        assert_eq!(
            file_ios(&j, &mut d),
            vec![
                (0, 0, W),
                (1, 0, W),
                (0, 1, W),
                (1, 0, F),
                (0, 2, W),
                (1, 1, W),
                (0, 3, W),
                (1, 0, F),
                (1, 2, W),
                (1, 3, W),
                (0, 0, F),
                (1, 0, F),
            ]
        );
        // With filesize, size= is the job's I/O: 5 blocks over the three files.
        let (j, mut d) = files_driver("[j]\nnrfiles=3\nfilesize=64k\nsize=20k\nrw=read\n");
        assert_eq!(file_ios(&j, &mut d).len(), 5);
        // Random offsets cover each file's blocks once per pass.
        let (j, mut d) =
            files_driver("[j]\nnrfiles=3\nfilesize=32k\nrw=randread\nfile_service_type=random\n");
        let mut per_file = [Vec::new(), Vec::new(), Vec::new()];
        for (f, b, _) in file_ios(&j, &mut d) {
            per_file[f as usize].push(b);
        }
        for blocks in &mut per_file {
            blocks.sort();
            assert_eq!(*blocks, (0..8).collect::<Vec<u64>>());
        }
    }

    #[test]
    fn files_lie_apart_on_the_device_and_jobs_naming_one_file_share_it() {
        use crate::job::{FileLayout, FILE_GAP};
        let text = "[a]\nfilename=/d/x:/d/y\\:z\nsize=128k\n[b]\nfilename=/d/x\nsize=1m\n\
                    [c]\ndirectory=/d\nnrfiles=2\nfilesize=8k-64k\nbs=8k\n";
        let specs = parse_job_text("t", text).unwrap();
        let layout = FileLayout::plan(&specs, |_, _| {
            Err(std::io::Error::other("unsized: every file here has a size"))
        })
        .unwrap();
        let names: Vec<&str> = layout.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["/d/x", "/d/y:z", "/d/c.0.0", "/d/c.0.1"]);
        // x holds b's megabyte; each file starts a gap after the one before.
        assert_eq!(layout.files[0].len, 1 << 20);
        assert_eq!(layout.files[1].base, 2 * FILE_GAP);
        assert_eq!(layout.files[2].base, 4 * FILE_GAP);
        for f in &layout.files[2..] {
            assert!(
                (8192..=65536).contains(&f.len) && f.len % 8192 == 0,
                "{f:?}"
            );
        }
        let jobs = resolve(&specs, &layout, |_| Ok(1 << 30), 0).unwrap();
        assert_eq!(jobs[0].files.len(), 2);
        assert_eq!(jobs[0].files[1].offset, 2 * FILE_GAP);
        assert_eq!(
            jobs[0].files[1].size,
            64 << 10,
            "size= is split over the files"
        );
        assert_eq!(jobs[1].files[0].base, 0, "b's file is a's first");
    }

    #[test]
    fn strided_zones_visit_each_zone_from_its_start_as_fio() {
        // fio 3.33: --size=1m --bs=4k --zonemode=strided --zonerange=256k --zonesize=16k
        // reads blocks 0-3, 64-67, 128-131, 192-195, then 0-3 again.
        let mut d = driver("[j]\nsize=1m\nzonemode=strided\nzonerange=256k\nzonesize=16k\n");
        let blocks: Vec<u64> = all(&mut d, 0).iter().map(|io| io.offset / 4096).collect();
        assert_eq!(blocks.len(), 256, "size= bytes in all");
        assert_eq!(
            blocks[..20],
            [0, 1, 2, 3, 64, 65, 66, 67, 128, 129, 130, 131, 192, 193, 194, 195, 0, 1, 2, 3]
        );
        // zoneskip moves each zone further; Nz counts zonesize units.
        let mut d = driver(
            "[j]\nsize=256k\nio_size=4z\nzonemode=strided\nzonerange=64k\nzonesize=8k\nzoneskip=64k\n",
        );
        let blocks: Vec<u64> = all(&mut d, 0).iter().map(|io| io.offset / 4096).collect();
        assert_eq!(blocks, [0, 1, 32, 33, 0, 1, 32, 33]);
        let specs = parse_job_text("t", "[j]\nsize=2z\n")
            .unwrap_err()
            .to_string();
        assert!(specs.contains("need zonemode=strided"), "{specs}");
    }

    #[test]
    fn verify_backlog_reads_back_as_fio_does_at_depth_one() {
        // fio 3.33, --rw=write --size=64k --bs=4k --verify=crc32c --verify_backlog=4
        // --verify_backlog_batch=2: its write_iolog, block by block.
        let mut d = driver(
            "[j]\nrw=write\nsize=64k\nverify=crc32c\nverify_backlog=4\nverify_backlog_batch=2\n",
        );
        let fio = "w0 w1 w2 w3 r0 r1 w4 w5 r2 r3 w6 w7 r4 r5 w8 w9 r6 r7 w10 w11 r8 r9 \
                   w12 w13 r10 r11 w14 w15 r12 r13 r14 r15";
        let ours: Vec<String> = all(&mut d, 0)
            .iter()
            .map(|io| {
                let k = if io.kind == IoKind::Write { "w" } else { "r" };
                format!("{k}{}", io.offset / 4096)
            })
            .collect();
        assert_eq!(ours.join(" "), fio);
        // Without a batch: the whole backlog, in write order, at random offsets too.
        let mut d = driver("[j]\nrw=randwrite\nsize=64k\nverify=crc32c\nverify_backlog=4\n");
        let ios = all(&mut d, 0);
        assert_eq!(ios.len(), 32);
        for group in ios.chunks(8) {
            let (w, r) = group.split_at(4);
            assert!(w.iter().all(|io| io.kind == IoKind::Write));
            assert!(r.iter().all(|io| io.kind == IoKind::Read));
            let offs = |v: &[JobIo]| v.iter().map(|io| io.offset).collect::<Vec<_>>();
            assert_eq!(offs(w), offs(r));
        }
    }

    #[test]
    fn verify_reads_back_in_write_order_with_a_random_map_and_by_offset_without() {
        // fio 3.33 (`--ioengine=null --rw=randwrite --size=64k --verify=crc32c`, its
        // write_iolog): with the random map its history is a list, read back in the order
        // written; with norandommap a tree by offset.
        for (extra, in_write_order) in [("", true), ("norandommap=1\n", false)] {
            let mut d = driver(&format!(
                "[j]\nrw=randwrite\nsize=64k\nverify=crc32c\n{extra}"
            ));
            let ios = all(&mut d, 0);
            let (w, r): (Vec<_>, Vec<_>) = ios.iter().partition(|io| io.kind == IoKind::Write);
            let offs = |v: &[&JobIo]| v.iter().map(|io| io.offset).collect::<Vec<_>>();
            let mut want: Vec<u64> = offs(&w);
            if !in_write_order {
                want.sort_unstable();
                want.dedup();
            }
            assert_eq!(offs(&r), want, "{extra}");
        }
    }

    #[test]
    fn a_skewed_file_choice_favours_some_files_and_ends_after_the_set_s_bytes() {
        // fio 3.33 with 10 files of 256 KiB: 640 reads in all, as here; a finished file
        // starts over instead of closing.
        let (j, mut d) = files_driver(
            "[j]\nnrfiles=10\nfilesize=256k\nrw=randread\nfile_service_type=zipf:1.2\n",
        );
        let ios = file_ios(&j, &mut d);
        assert_eq!(ios.len(), 640);
        let mut per = [0u32; 10];
        for (f, _, _) in &ios {
            per[*f as usize] += 1;
        }
        per.sort_unstable();
        // fio's own split of those reads over the files (its write_iolog): zipf over 1024
        // unhashed ranges a file puts most on one.
        assert_eq!(per, [1, 1, 2, 3, 3, 5, 9, 12, 23, 581]);
        // A bad parameter is refused with the option's name.
        let e = parse_job_text("t", "[j]\nfile_service_type=zipf:x\n").unwrap_err();
        assert!(e.to_string().contains("file_service_type"), "{e}");
    }
}
