//! What the simulated CPUs run: job definitions and the I/O sources behind them.
//!
//! A [`SimJob`] is one submitting task pinned to a virtual CPU with an I/O depth and a
//! [`Source`] that says what to do next: an I/O, a pause ("think"), wait for everything in
//! flight (a synchronous point such as `fsync`), or stop. Sources exist for fio jobs (the same
//! generator `mqblk bench` uses) and for the seeds' workloads: dbench's clients on XFS (its
//! loadfile as measured, sharing one log) and on ext4 (with the journal thread, jbd2, that
//! commits for them: a job of its own, the two waiting for each other through [`Gate`]s), a
//! dbench-like client mix, a `dd`-like sequential reader and a `find`-like walk of small
//! random reads.

use crate::SimRng;
use mqblk_core::{IoPrio, Nanos, ReqFlags, ReqOp};
use mqblk_workload::pattern::Pattern;
use mqblk_workload::{Ddir, Job, JobDriver, JobSpec};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

mod ext4;
mod loadfile;
mod xfs;
pub use ext4::{
    journal_area, Ext4DbenchClient, Ext4Journal, Ext4Loadfile, Ext4Step, Jbd2, JournalCounts,
};
pub use loadfile::{FileWrite, LoadfileError};
pub use xfs::{XfsDbenchClient, XfsLoadfile, XfsLog, XfsStep, XFS_AGS};

/// One I/O to submit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct IoReq {
    pub op: ReqOp,
    pub sector: u64,
    pub nr_sectors: u32,
    pub flags: ReqFlags,
    /// The priority this I/O carries instead of its job's (fio's `cmdprio_*`).
    pub ioprio: Option<IoPrio>,
}

impl IoReq {
    /// A cache flush (`fsync`'s, a journal commit's).
    pub const FLUSH: IoReq = IoReq {
        op: ReqOp::Flush,
        sector: 0,
        nr_sectors: 0,
        flags: ReqFlags::SYNC,
        ioprio: None,
    };
}

/// The `io`-th I/O (from 0, in the order its source returned them) of the run's job `job`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct JobIo {
    pub job: u32,
    pub io: u64,
}

/// A count that some jobs' sources raise and other jobs wait for: the condition of a wait
/// queue, as a task sleeps in `wait_event` until another task's work makes it true
/// (`jbd2_log_wait_commit` for a transaction's commit, jbd2's own wait for a commit to be
/// asked). Shared by the sources of one run; a gate is equal only to itself.
#[derive(Debug, Default)]
pub struct Gate(AtomicU64);

impl Gate {
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }
    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    /// Raises the count to `n` if it is below (a count never goes down).
    pub fn raise_to(&self, n: u64) {
        self.0.fetch_max(n, Relaxed);
    }
}

impl PartialEq for Gate {
    fn eq(&self, other: &Gate) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for Gate {}

/// What a job does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    Io(IoReq),
    /// Pause this long before asking again (think time).
    Think(Nanos),
    /// Run this long on the job's CPU before asking again: user work (a client's page-cache
    /// copies between its I/Os), which the CPU's jobs take their turns at, one after
    /// another; the kernel's own work there (submissions, completions) goes on meanwhile,
    /// as interrupts preempt a task.
    Compute(Nanos),
    /// Wait until every I/O of the job has completed, then ask again.
    Drain,
    /// Wait until this long after the job's start (open-loop replay), then ask again.
    Until(Nanos),
    /// Wait until another job's I/O has completed (or that job ended without issuing it),
    /// then ask again: a task woken by another's I/O, as a replayed trace shows it.
    After(JobIo),
    /// Sleep until the gate's count reaches this, then ask again: a task waiting for
    /// another job's source to say its work is done (raised as that source is next asked).
    Await(Arc<Gate>, u64),
    /// Flush the job's plug, so what it holds goes to the scheduler, then ask again: where a
    /// replayed trace shows its process inserting what it had plugged (`blk_flush_plug`;
    /// the plug stays, as a task's does). Nothing without a plug (`batch` 1).
    Unplug,
    /// The job is finished.
    Done,
}

pub trait Source: Send {
    /// What the job does next, at `now` (virtual time since the job started).
    fn next(&mut self, now: Nanos, rng: &mut SimRng) -> Next;

    /// What the job issued, if it keeps fio's `write_iolog` (taking it empties it).
    fn take_iolog(&mut self) -> Vec<mqblk_workload::iolog::IoLogEntry> {
        Vec::new()
    }

    /// Zones the job reset (`zonemode=zbd`).
    fn zone_resets(&self) -> u64 {
        0
    }

    /// The depth the job may keep in flight now, where the source decides it (fio's
    /// `latency_target`); `None`: the job's `iodepth`.
    fn depth(&self) -> Option<u32> {
        None
    }

    /// A read or write of `bytes` at device offset `at` in direction `dir` completed at
    /// `now` after `lat_ns` in all (counted after the ramp).
    fn completed(&mut self, _now: Nanos, _lat_ns: u64, _dir: Ddir, _bytes: u64, _at: u64) {}

    /// Whether the statistics start over now (asking clears it).
    fn take_stats_reset(&mut self) -> bool {
        false
    }

    /// The error that ended the job, once, with the errno fio reports for it
    /// ([`JobDriver::take_error`]).
    fn take_error(&mut self) -> Option<(i32, String)> {
        None
    }

    /// The priority value an I/O whose bio `carried` this priority counts under in the
    /// report and the logs (fio's `io_u->ioprio`, [`Job::counted_ioprio`]); 0, fio's value
    /// without a priority, for a source that is not a fio job.
    fn counted_ioprio(&self, _carried: IoPrio) -> u16 {
        0
    }

    /// Another job's end terminates this one: its main phase ends at the next I/O it
    /// would issue (fio's `td->terminate`).
    fn stop(&mut self) {}

    /// An I/O (a read if `read`) failed with `errno`; the source ends the job unless it
    /// goes on after such errors ([`JobDriver::io_failed`]). Whether it goes on (a source
    /// of its own, as dbench's clients, always does).
    fn io_failed(&mut self, _read: bool, _errno: i32) -> bool {
        true
    }

    /// A read or write of `bytes` at device offset `at` failed (beside
    /// [`Source::io_failed`]).
    fn rw_failed(&mut self, _write: bool, _at: u64, _bytes: u64) {}

    /// Fills the report keys the source knows (`latency_target` and the like).
    fn describe(&self, _stats: &mut mqblk_workload::JobStats) {}
}

/// When a job stops, whichever limit comes first.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Limit {
    pub ios: Option<u64>,
    pub bytes: Option<u64>,
    /// Virtual run time from the job's start.
    pub time: Option<Nanos>,
}

pub struct SimJob {
    pub name: String,
    pub cpu: u16,
    pub iodepth: u32,
    /// Bios submitted under one plug (fio's `iodepth_batch_submit`).
    pub batch: u32,
    pub issuer: u32,
    pub group: u32,
    pub ioprio: IoPrio,
    pub start_at: Nanos,
    /// fio's `stonewall`: the job starts (`start_at` later) once every job of a lower
    /// barrier has finished.
    pub barrier: u32,
    /// fio's `wait_for`: and once these jobs (indices into the run's jobs) have finished.
    pub after: Vec<u32>,
    /// Which jobs its end terminates (fio's `exitall`, `exit_what`, `exitall_on_error`),
    /// and its reporting group.
    pub exit: mqblk_workload::Exit,
    /// fio's per-job logs and the `--plot` series, when asked for.
    pub logs: Option<mqblk_workload::logs::JobLogs>,
    pub limit: Limit,
    /// Completions before this time since the start are not counted (fio's `ramp_time`).
    pub ramp: Nanos,
    /// Once the job's depth is full, it issues again only when this many have completed
    /// (fio's `iodepth_batch_complete_min`; 1 = at every completion).
    pub batch_complete_min: u32,
    /// fio's `iodepth_low`: a full queue is reaped down to this depth (`iodepth`: one
    /// completion, or `batch_complete_min`, refills it).
    pub iodepth_low: u32,
    /// fio's `bwavgtime` and `iopsavgtime`: the report's bandwidth and IOPS sample
    /// windows, ms.
    pub bw_avg_ms: u64,
    pub iops_avg_ms: u64,
    /// The most completions one reap handles (fio's `iodepth_batch_complete_max`); only
    /// the reported completion distribution shows it, the simulated timing does not.
    pub batch_complete_max: u32,
    pub source: Box<dyn Source>,
    /// A label the report groups jobs by (`dbench`, `journal`, a fio job name).
    pub kind: String,
    /// fio's steady-state detection (`ss_dur`), and whether its reporting group (in
    /// `exit`) reaches it as one (`group_reporting`).
    pub steady: Option<mqblk_workload::steadystate::SteadySpec>,
    pub group_reporting: bool,
    /// fio's `exec_prerun` and `exec_postrun` (run in host time as the job starts and
    /// ends in virtual time).
    pub exec_prerun: Option<String>,
    pub exec_postrun: Option<String>,
    /// How its buffers lie in physical memory (fio's `iomem=`), over which the core counts
    /// its bios' segments: heap pages that seldom adjoin, or huge pages. Each buffer starts
    /// at a huge page's start, where the threaded runtime's follow one another in one area.
    pub bvecs: mqblk_core::BvecLayout,
}

impl SimJob {
    /// A job on `cpu` issuing from `source` with up to `iodepth` in flight, one bio per
    /// submission, from its start until `limit`; everything else at fio's defaults.
    pub fn new(
        name: String,
        cpu: u16,
        iodepth: u32,
        issuer: u32,
        limit: Limit,
        source: Box<dyn Source>,
        kind: &str,
    ) -> SimJob {
        SimJob {
            name,
            cpu,
            iodepth,
            batch: 1,
            issuer,
            group: 0,
            ioprio: IoPrio::DEFAULT,
            start_at: Nanos::ZERO,
            barrier: 0,
            exit: Default::default(),
            after: Vec::new(),
            limit,
            ramp: Nanos::ZERO,
            batch_complete_min: 1,
            batch_complete_max: u32::MAX,
            iodepth_low: iodepth,
            bw_avg_ms: 500,
            iops_avg_ms: 500,
            source,
            kind: kind.into(),
            logs: None,
            steady: None,
            group_reporting: false,
            exec_prerun: None,
            exec_postrun: None,
            bvecs: mqblk_core::BvecLayout::PAGES,
        }
    }
}

/// A fio job: what it issues and when it ends is its [`JobDriver`]'s decision, the same
/// one `mqblk bench`'s threads follow in real time.
pub struct FioSource {
    driver: JobDriver,
    /// The job, for its per-priority statistics (`cmdprio_*`).
    job: Job,
    /// `latency_target`, `latency_window` (µs) and `latency_percentile`, for the report.
    latency: (u64, u64, f64),
}

impl FioSource {
    /// The source of a resolved fio job.
    pub fn of(job: &Job) -> FioSource {
        let (target, window, pct) = job
            .latency_target
            .map_or((0, 0, 100.0), |(t, w, p, _)| (t / 1000, w / 1000, p));
        FioSource {
            driver: JobDriver::new(job),
            job: job.clone(),
            latency: (target, window, pct),
        }
    }

    /// A job looping over `[offset, offset + size)` in `bs` blocks until the [`SimJob`]'s
    /// [`Limit`] stops it, with a flush after every `fsync` writes (0: never); the
    /// shorthand the scenarios and tests build their jobs with.
    pub fn new(
        rw: Pattern,
        rwmixread: u32,
        bs: u32,
        offset: u64,
        size: u64,
        seed: u64,
        fsync: u64,
    ) -> FioSource {
        FioSource::of_spec(FioSource::spec(
            rw, rwmixread, bs, offset, size, seed, fsync,
        ))
    }

    /// The job [`FioSource::new`] runs, to change before [`FioSource::of_spec`].
    pub fn spec(
        rw: Pattern,
        rwmixread: u32,
        bs: u32,
        offset: u64,
        size: u64,
        seed: u64,
        fsync: u64,
    ) -> JobSpec {
        JobSpec {
            name: "fio".into(),
            rw,
            rwmixread,
            bs: [bs as u64; 3],
            size: Some(size),
            offset,
            time_based: true,
            randseed: Some(seed),
            fsync,
            // A job built in code goes on after its errors, so faults and timeouts are
            // exercised to the end (a job file ends at its first, as fio's).
            errors: mqblk_workload::ErrorPolicy::go_on_after_any(),
            ..JobSpec::default()
        }
    }

    /// The source of a job over its own region (`offset` and `size` set), such as
    /// [`FioSource::spec`] makes.
    pub fn of_spec(spec: JobSpec) -> FioSource {
        let end = spec.offset + spec.size.unwrap_or(0);
        let jobs = mqblk_workload::resolve(&[spec], &Default::default(), |_| Ok(end), 0)
            .expect("a plain fio job over its own region resolves");
        FioSource::of(&jobs[0])
    }
}

impl Source for FioSource {
    fn take_iolog(&mut self) -> Vec<mqblk_workload::iolog::IoLogEntry> {
        self.driver.take_log()
    }

    fn depth(&self) -> Option<u32> {
        self.driver.search_depth()
    }

    fn zone_resets(&self) -> u64 {
        self.driver.zone_resets()
    }

    fn completed(&mut self, now: Nanos, lat_ns: u64, dir: Ddir, bytes: u64, at: u64) {
        self.driver.completed(now.0, lat_ns, dir, bytes, at);
    }

    fn take_stats_reset(&mut self) -> bool {
        self.driver.take_stats_reset()
    }

    fn stop(&mut self) {
        self.driver.stop();
    }

    fn io_failed(&mut self, read: bool, errno: i32) -> bool {
        self.driver.io_failed(read, errno)
    }

    fn rw_failed(&mut self, write: bool, at: u64, bytes: u64) {
        self.driver.rw_failed(write, at, bytes);
    }

    fn take_error(&mut self) -> Option<(i32, String)> {
        self.driver.take_error()
    }

    fn counted_ioprio(&self, carried: IoPrio) -> u16 {
        self.job.counted_ioprio(carried)
    }

    fn describe(&self, stats: &mut mqblk_workload::JobStats) {
        (
            stats.latency_target_us,
            stats.latency_window_us,
            stats.latency_percentile,
        ) = self.latency;
        stats.continue_on_error = self.driver.continues_on_errors();
        self.job.track_prios(stats, true);
    }

    #[inline]
    fn next(&mut self, now: Nanos, _rng: &mut SimRng) -> Next {
        match self.driver.next(now.0) {
            mqblk_workload::Next::Io(io) => {
                let (op, flags) = self.job.bio_flags(&io);
                Next::Io(IoReq {
                    op,
                    sector: io.offset >> 9,
                    nr_sectors: io.len >> 9,
                    flags,
                    ioprio: io.cmdprio.map(IoPrio),
                })
            }
            mqblk_workload::Next::Until(t) => Next::Until(Nanos(t)),
            mqblk_workload::Next::Drain => Next::Drain,
            mqblk_workload::Next::Done => Next::Done,
        }
    }
}

/// A dbench-like client (dbench's NetBench-derived mix as a file system might turn it into
/// block I/O): small sequential reads from the client's files, small writes to them,
/// metadata writes to the inode and directory area, and a journal commit (a write to the
/// shared log followed by a flush) for each `fsync`. Every operation is synchronous (depth
/// 1). The mix is not measured: dbench's own clients on ext4 and on XFS, as captured here,
/// read nothing from the device and write only through their `fsync`s
/// ([`XfsDbenchClient`] and [`Ext4DbenchClient`] are that, measured). The fuzzer keeps it as
/// a mix of reads, writes and flushes, its writes asynchronous (as writeback's).
pub struct DbenchClient {
    /// The client's private file area, in sectors.
    area: (u64, u64),
    /// The shared metadata area (inodes, directories), in sectors.
    meta: (u64, u64),
    /// The shared journal, written sequentially; the position is shared through `journal_at`
    /// by the scenario, approximated per client by striding.
    journal: (u64, u64),
    journal_pos: u64,
    /// The file being read or written and the position in it.
    file: u64,
    pos: u64,
    /// Steps left of a journal commit (write, then flush).
    commit: u8,
}

/// Sizes of a dbench-like client's file set.
const DB_FILE_SECTORS: u64 = 2048; // 1 MiB files
const DB_IO_SECTORS: [u32; 4] = [8, 8, 16, 32];

impl DbenchClient {
    /// Client `i` of a file system laid out as: metadata at the start, the journal next, then
    /// one area per client.
    pub fn new(i: u64, capacity: u64) -> DbenchClient {
        let meta = (2048, 1 << 20); // 512 MiB of metadata from 1 MiB on
        let journal = (meta.0 + meta.1, 1 << 18); // a 128 MiB log
        let first = journal.0 + journal.1;
        let per_client = 1u64 << 21; // 1 GiB per client
        let span = (capacity.saturating_sub(first)).max(per_client);
        let start = first + (i * per_client) % (span - per_client + 1);
        DbenchClient {
            area: (start, per_client),
            meta,
            journal,
            journal_pos: (i * 64) % journal.1,
            file: 0,
            pos: 0,
            commit: 0,
        }
    }
}

impl Source for DbenchClient {
    fn next(&mut self, _now: Nanos, rng: &mut SimRng) -> Next {
        match self.commit {
            2 => {
                self.commit = 1;
                let len = 8 * rng.range(1, 4) as u32;
                let s = self.journal.0 + self.journal_pos;
                self.journal_pos = (self.journal_pos + len as u64) % (self.journal.1 - 64);
                return Next::Io(IoReq {
                    op: ReqOp::Write,
                    sector: s,
                    nr_sectors: len,
                    flags: ReqFlags::SYNC,
                    ioprio: None,
                });
            }
            1 => {
                self.commit = 0;
                return Next::Io(IoReq::FLUSH);
            }
            _ => {}
        }
        let pick = rng.below(100);
        if pick < 5 || self.pos >= DB_FILE_SECTORS {
            // Open another file.
            self.file = rng.below(self.area.1 / DB_FILE_SECTORS);
            self.pos = 0;
        }
        let len = *rng.pick(&DB_IO_SECTORS);
        let file_sector = self.area.0 + self.file * DB_FILE_SECTORS + self.pos;
        if pick < 45 {
            self.pos += len as u64;
            Next::Io(IoReq {
                op: ReqOp::Read,
                sector: file_sector,
                nr_sectors: len,
                flags: ReqFlags::SYNC,
                ioprio: None,
            })
        } else if pick < 70 {
            self.pos += len as u64;
            Next::Io(IoReq {
                op: ReqOp::Write,
                sector: file_sector,
                nr_sectors: len,
                flags: ReqFlags::empty(),
                ioprio: None,
            })
        } else if pick < 92 {
            let s = self.meta.0 + rng.below(self.meta.1 / 8) * 8;
            Next::Io(IoReq {
                op: if pick < 82 { ReqOp::Read } else { ReqOp::Write },
                sector: s,
                nr_sectors: 8,
                flags: ReqFlags::SYNC,
                ioprio: None,
            })
        } else {
            self.commit = 2;
            Next::Drain
        }
    }
}

/// `dd if=dev of=/dev/null bs=...`: sequential reads from `start` (in sectors).
pub struct DdSource {
    pub next_sector: u64,
    pub bs_sectors: u32,
    pub end: u64,
}

impl Source for DdSource {
    fn next(&mut self, _now: Nanos, _rng: &mut SimRng) -> Next {
        if self.next_sector >= self.end {
            return Next::Done;
        }
        let n = (self.bs_sectors as u64).min(self.end - self.next_sector) as u32;
        let s = self.next_sector;
        self.next_sector += n as u64;
        Next::Io(IoReq {
            op: ReqOp::Read,
            sector: s,
            nr_sectors: n,
            flags: ReqFlags::SYNC,
            ioprio: None,
        })
    }
}

/// `find . > /dev/null`: walks directories, reading each directory's blocks and then the
/// inode blocks of its entries: short runs of 4 KiB reads at random places in the metadata
/// area, with a little locality inside a directory.
pub struct FindSource {
    meta: (u64, u64),
    run_left: u32,
    at: u64,
}

impl FindSource {
    pub fn new(meta_start: u64, meta_sectors: u64) -> FindSource {
        FindSource {
            meta: (meta_start, meta_sectors.max(64)),
            run_left: 0,
            at: 0,
        }
    }
}

impl Source for FindSource {
    fn next(&mut self, _now: Nanos, rng: &mut SimRng) -> Next {
        if self.run_left == 0 {
            self.at = self.meta.0 + rng.below(self.meta.1 / 8 - 8) * 8;
            self.run_left = rng.range(1, 4) as u32;
        }
        self.run_left -= 1;
        let s = self.at;
        // Inode blocks of one directory lie near each other, not always adjacent.
        self.at += 8 * rng.range(1, 3);
        Next::Io(IoReq {
            op: ReqOp::Read,
            sector: s.min(self.meta.0 + self.meta.1 - 8),
            nr_sectors: 8,
            flags: ReqFlags::SYNC,
            ioprio: None,
        })
    }
}

/// One of `ways` threads reading a file in interleaved stripes: thread `part` reads stripes
/// `part`, `part + ways`, ... of `stripe_sectors` each, so each thread's I/O has gaps but all
/// of it together is sequential (the cooperating issuers BFQ merges). After `switch_after`
/// reads (if set) it reads at random places of the file instead: the cooperation stops.
pub struct InterleavedSource {
    pub start: u64,
    pub file_sectors: u64,
    pub stripe_sectors: u32,
    pub ways: u64,
    pub part: u64,
    pub switch_after: Option<u64>,
    next_stripe: u64,
    done: u64,
}

impl InterleavedSource {
    pub fn new(start: u64, file_sectors: u64, stripe_sectors: u32, ways: u64, part: u64) -> Self {
        InterleavedSource {
            start,
            file_sectors,
            stripe_sectors,
            ways: ways.max(1),
            part,
            switch_after: None,
            next_stripe: part,
            done: 0,
        }
    }
}

impl Source for InterleavedSource {
    fn next(&mut self, _now: Nanos, rng: &mut SimRng) -> Next {
        let stripes = (self.file_sectors / self.stripe_sectors as u64).max(1);
        let stripe = if self.switch_after.is_some_and(|n| self.done >= n) {
            rng.below(stripes)
        } else {
            if self.next_stripe >= stripes {
                self.next_stripe = self.part;
            }
            let s = self.next_stripe;
            self.next_stripe += self.ways;
            s
        };
        self.done += 1;
        Next::Io(IoReq {
            op: ReqOp::Read,
            sector: self.start + stripe * self.stripe_sectors as u64,
            nr_sectors: self.stripe_sectors,
            flags: ReqFlags::SYNC,
            ioprio: None,
        })
    }
}
