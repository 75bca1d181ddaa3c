//! Runs one fio job clone on the calling thread through its own software queue, with real
//! time: the threaded counterpart of the simulator's job loop.
//!
//! What the job issues and when it ends is decided by the job's [`JobDriver`] (shared with
//! the simulator); this module carries it out: bios with buffers and verify headers,
//! plugging for `iodepth_batch_submit`, reaping by `iodepth_batch_complete_min/max`, the
//! rate limit's sleeps, and measuring each I/O the way fio does.

use crate::{pin_current_thread, thread_cpu_time, CpuTime, MonotonicClock, SubmitterHandle};
use crossbeam_utils::CachePadded;
use mqblk_core::{Bio, BlkStatus, CtxIdx, IoBuf, IoPrio, Nanos, ReqOp, RequestQueue, SECTOR_SHIFT};
use mqblk_workload::buffers::BufferFiller;
use mqblk_workload::{verify, Ddir, Exit, Job, JobDriver, JobIo, Next};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

/// One job clone as the threaded runner runs it: the resolved job and where its bios go.
#[derive(Clone, Debug)]
pub struct RunJob {
    pub job: Job,
    /// The priority its bios carry (from `prioclass`/`prio`).
    pub ioprio: IoPrio,
    /// Move data (buffers on every bio): needed by memory-backed devices and verify.
    pub with_data: bool,
    pub ctx: CtxIdx,
    pub issuer: u32,
    /// The cgroup id its bios carry (0: the root).
    pub group: u32,
    /// Submit even single bios under a plug, as the kernel's `__submit_bio` does for every
    /// bio (`QueueSettings::submit_bio_plugs`) and its file systems for direct I/O
    /// (`__iomap_dio_rw`): a lone bio leaves the plug through `blk_mq_plug_issue_direct`
    /// (or an inline run with a scheduler), not through `blk_mq_submit_bio`'s busy check.
    pub plug_each: bool,
    /// What its writes carry, where data moves and the job writes (fio's buffer options).
    pub buffers: Option<BufferFiller>,
    /// `unlink_each_loop`: the job's files the run made (none that were there before it),
    /// emptied before each loop after the first.
    pub emptied_each_loop: Vec<String>,
    /// `verify_state_save` reaches a file: the job writes real files, whose data outlives
    /// the run (a memory-backed null device's does not).
    pub saves_verify_state: bool,
    /// How its buffers lie in physical memory (`iomem=`), for its bios without one.
    pub bvecs: mqblk_core::BvecLayout,
}

/// Latency samples of one direction, in nanoseconds.
/// fio's `verify_dump`: writes a bad piece as read (`FILE.OFFSET.received`) and as the job
/// wrote it (`FILE.OFFSET.expected`, made again from the job's seed) in the current
/// directory, `FILE` the base name of the job's file and `OFFSET` the piece's offset in
/// it, as fio's `dump_buf` names them; returns what to add to the mismatch's line.
fn dump_piece(job: &Job, at: u64, received: &[u8]) -> String {
    let Some((i, in_file)) = mqblk_workload::job::file_at(job.files.iter().map(|f| f.base), at)
    else {
        return String::new();
    };
    let file = &job.files[i];
    let name = std::path::Path::new(&file.name)
        .file_name()
        .map_or_else(|| file.name.clone(), |n| n.to_string_lossy().into_owned());
    let stem = format!("{name}.{in_file}");
    let mut expected = vec![0u8; received.len()];
    verify::fill(
        &mut expected,
        at,
        job.seed,
        job.verify_mode,
        job.verify_pattern.as_deref(),
    );
    let mut said = String::new();
    for (kind, data) in [("received", received), ("expected", &expected[..])] {
        let path = format!("{stem}.{kind}");
        said.push_str(&match std::fs::write(&path, data) {
            Ok(()) => format!("; {kind} data dumped as {path}"),
            Err(e) => format!("; {kind} data not dumped: {path}: {e}"),
        });
    }
    said
}

/// One measured I/O completion.
#[derive(Copy, Clone, Debug)]
pub struct Completed {
    pub dir: Ddir,
    pub bytes: u64,
    /// Byte offset on the device.
    pub offset: u64,
    /// When it completed, in nanoseconds since the job started.
    pub at_ns: u64,
    pub slat: u64,
    pub clat: u64,
    /// The priority fio counts it under (`io_u->ioprio`, [`Job::counted_ioprio`]).
    pub ioprio: u16,
}

pub trait LatSink {
    fn record(&mut self, io: Completed);
    /// An I/O failed with `errno`, `fatal` when it ended the job
    /// ([`mqblk_workload::JobStats::io_error`]).
    fn error(&mut self, errno: i32, fatal: bool);
    /// A flush completed after `lat` nanoseconds (fio's `sync` latency).
    fn sync(&mut self, lat: u64);
    /// A look at the job `at_ns` after its start, at least every millisecond while it is
    /// measured: the bandwidth and IOPS samples due are taken ([`mqblk_workload::RateSampler`]).
    fn sample(&mut self, at_ns: u64);
    /// A submission of `n` I/Os at queue depth `depth` (fio's `iodepth_submit`/`_level`).
    fn submitted(&mut self, n: u64, depth: u64);
    /// A reap that returned `n` completions (fio's `iodepth_complete`).
    fn completed(&mut self, n: u64);
    /// The job ended `at_ns` after it started.
    fn finish(&mut self, _at_ns: u64) {}
    /// The measurements start over (fio's `reset_all_stats`: the latency-target search's
    /// final window).
    fn restart(&mut self) {}
    /// The latency-target search ended at `depth` (fio's `latency_depth`).
    fn latency_depth(&mut self, _depth: u32) {}
}

/// What a job thread reports besides its latency samples.
#[derive(Clone, Debug, Default)]
pub struct JobOutcome {
    /// When the job started issuing (after `stonewall`, `wait_for` and `startdelay`), in
    /// ms since the epoch: fio's `job_start`.
    pub started_ms: u64,
    /// When it started in ms since the epoch of its logs' clock (`log_unix_epoch`,
    /// `log_alternate_epoch`; 0 where its logs count from its start).
    pub log_epoch_ms: u64,
    pub runtime_ns: u64,
    pub cpu: CpuTime,
    pub ios: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub verify_errors: Vec<String>,
    pub verified: u64,
    /// Zones the job reset (`zonemode=zbd`).
    pub zone_resets: u64,
    /// What the job issued, for `write_iolog` (empty unless asked for).
    pub iolog: Vec<mqblk_workload::iolog::IoLogEntry>,
}

/// Shared between the job threads and the progress display. Each job counts its own
/// completions on a cache line of its own, and the display sums them: one counter for all
/// jobs was a line every job wrote at every reap (17% of a job thread's time with two null
/// jobs at QD32). `stop`, read by every job on every loop, has a line of its own too.
#[derive(Default)]
pub struct Progress {
    counts: Box<[CachePadded<JobCount>]>,
    pub stop: CachePadded<AtomicBool>,
    /// The jobs that ended, for fio's `exitall` and `exitall_on_error`.
    pub ends: Ends,
    /// fio's `stonewall` and `wait_for`: jobs still running per barrier and job section
    /// (see [`Job::barrier`], [`Job::wait_for`]).
    pub stonewalls: Stonewalls,
}

/// The jobs that ended so far, in order, each with its [`Exit`] and whether it failed:
/// what a running job looks at to know whether another's end terminates it.
#[derive(Default)]
pub struct Ends {
    list: std::sync::Mutex<Vec<(Exit, bool)>>,
    count: std::sync::atomic::AtomicUsize,
}

impl Ends {
    /// A job with `exit` ended, in error if `failed`.
    pub fn post(&self, exit: Exit, failed: bool) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.push((exit, failed));
        self.count.store(l.len(), Ordering::Release);
    }

    /// How many ends are posted (cheap: a job compares it with what it saw).
    pub fn posted(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Whether an end posted from index `from` on terminates the job of `exit`, which
    /// started when `since` ends were posted (it runs for the ones posted after).
    pub fn ends(&self, exit: &Exit, from: usize, since: usize) -> bool {
        let l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.iter()
            .enumerate()
            .skip(from)
            .any(|(i, (e, failed))| e.ends(*failed, exit, i >= since))
    }
}

/// One job's completions and bytes so far, for the progress display and fio's
/// steady-state check, and the check's word to it.
#[derive(Default)]
pub struct JobCount {
    ios: AtomicU64,
    bytes: AtomicU64,
    /// When it started issuing, on the run's clock, plus one (0: not yet).
    started: AtomicU64,
    finished: AtomicBool,
    /// Its steady state was reached: it ends its main phase (fio's
    /// `fio_mark_td_terminate`).
    pub steady_stop: AtomicBool,
    /// The steady-state check's next tick, on the run's clock (0: none), and the counts as
    /// they stood at it, which the job posts (`marked` = the tick) at its first reap past
    /// it: a check woken late on a loaded machine still judges the second that ended at
    /// the tick, not one stretched by its lateness.
    mark_due: AtomicU64,
    marked: AtomicU64,
    ios_at_mark: AtomicU64,
    bytes_at_mark: AtomicU64,
}

impl JobCount {
    /// Asks the job to note its counts at `due` (a tick of the steady-state check, on the
    /// run's clock), for [`JobCount::steady_sample`] of that tick.
    pub fn mark_at(&self, due: u64) {
        self.mark_due.store(due, Ordering::Release);
    }

    /// The job as fio's steady-state check sees it at the tick `due` (the one last passed
    /// to [`JobCount::mark_at`]): its counts as they stood then, read after it. fio's
    /// helper reads them when it wakes; here a late wake-up does not move them.
    pub fn steady_sample(&self, due: u64) -> mqblk_workload::steadystate::Sample {
        let started = self.started.load(Ordering::Acquire);
        let at_mark = || {
            (
                self.ios_at_mark.load(Ordering::Relaxed),
                self.bytes_at_mark.load(Ordering::Relaxed),
            )
        };
        // Not yet posted: every completion counted so far was reaped before the tick
        // (a reap past it posts before it counts), unless it posted meanwhile, which a
        // second look sees (the counts are added with Release after the post).
        let (ios, bytes) = if self.marked.load(Ordering::Acquire) == due {
            at_mark()
        } else {
            let live = (
                self.ios.load(Ordering::Acquire),
                self.bytes.load(Ordering::Acquire),
            );
            if self.marked.load(Ordering::Acquire) == due {
                at_mark()
            } else {
                live
            }
        };
        mqblk_workload::steadystate::Sample {
            running: started > 0 && !self.finished.load(Ordering::Acquire),
            started_at: started.saturating_sub(1),
            ios,
            bytes,
        }
    }

    /// Adds completions reaped at `now`, first posting the counts as they stood at a tick
    /// just passed.
    fn add(&self, now: u64, ios: u64, bytes: u64) {
        let due = self.mark_due.load(Ordering::Acquire);
        if due != 0 && now >= due && self.marked.load(Ordering::Relaxed) != due {
            self.ios_at_mark
                .store(self.ios.load(Ordering::Relaxed), Ordering::Relaxed);
            self.bytes_at_mark
                .store(self.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
            self.marked.store(due, Ordering::Release);
        }
        self.ios.fetch_add(ios, Ordering::Release);
        self.bytes.fetch_add(bytes, Ordering::Release);
    }
}

impl Progress {
    /// For `jobs` jobs, numbered from 0 (the `slot` each passes to [`run_job`]).
    pub fn for_jobs(jobs: usize) -> Progress {
        Progress {
            counts: (0..jobs).map(|_| CachePadded::default()).collect(),
            ..Progress::default()
        }
    }

    /// Job `slot`'s counts.
    pub fn count(&self, slot: usize) -> Option<&JobCount> {
        self.counts.get(slot).map(|c| &**c)
    }

    /// Jobs that have not returned from [`run_job`] yet.
    pub fn unfinished(&self) -> usize {
        self.counts
            .iter()
            .filter(|c| !c.finished.load(Ordering::Acquire))
            .count()
    }

    /// Completions and bytes of all jobs so far.
    pub fn totals(&self) -> (u64, u64) {
        self.counts.iter().fold((0, 0), |(i, b), c| {
            (
                i + c.ios.load(Ordering::Relaxed),
                b + c.bytes.load(Ordering::Relaxed),
            )
        })
    }
}

/// Jobs not yet finished per `stonewall` barrier and per job section: a job waits until
/// every job of a lower barrier has finished, and every clone of its `wait_for` job.
#[derive(Debug, Default)]
pub struct Stonewalls {
    running: std::sync::Mutex<Running>,
    changed: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct Running {
    barriers: Vec<u32>,
    specs: Vec<u32>,
}

fn count(v: &mut Vec<u32>, i: usize) {
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v[i] += 1;
}

impl Stonewalls {
    /// Counts the jobs of each barrier and job section (before any starts).
    pub fn set<'a>(&self, jobs: impl Iterator<Item = &'a Job>) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        *running = Running::default();
        for j in jobs {
            count(&mut running.barriers, j.barrier as usize);
            count(&mut running.specs, j.spec);
        }
    }

    /// Waits until `job` may start (every job of a lower barrier finished, and every clone
    /// of its `wait_for` job), or `stop` is set.
    pub fn wait_turn(&self, job: &Job, stop: &AtomicBool) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let blocked = |r: &Running| {
            r.barriers.iter().take(job.barrier as usize).any(|&n| n > 0)
                || job
                    .wait_for
                    .is_some_and(|w| r.specs.get(w).is_some_and(|&n| n > 0))
        };
        while !stop.load(Ordering::Relaxed) && blocked(&running) {
            running = self
                .changed
                .wait_timeout(running, std::time::Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// `job` has finished.
    pub fn finish(&self, job: &Job) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = running.barriers.get_mut(job.barrier as usize) {
            *n = n.saturating_sub(1);
        }
        if let Some(n) = running.specs.get_mut(job.spec) {
            *n = n.saturating_sub(1);
        }
        self.changed.notify_all();
    }
}

const SAMPLE_LOOK: Nanos = Nanos::from_millis(1);

/// Per-batch bookkeeping, so that slat and clat split at the moment a bio's batch finished
/// submitting: each bio carries its batch's slot (in `private`), and a slot is freed once
/// the last of its bios completed. A bio may stay in flight while any number of later
/// batches go out (a write the ring turned away, waiting on the dispatch list while others
/// pass it), so a batch's end is kept for as long as one of its bios is out, not in a ring
/// of the last few batches (which gave such a bio a later batch's end: the wait counted as
/// submission latency, up to seconds of it, and came out of its completion latency).
struct Batches {
    /// Per slot: when its batch finished submitting, and its bios still in flight.
    slots: Vec<BatchSlot>,
    free: Vec<u32>,
    /// The slot of the batch being submitted.
    open: u32,
}

#[derive(Copy, Clone, Default)]
struct BatchSlot {
    end: u64,
    live: u32,
}

impl Batches {
    fn new(iodepth: u32) -> Batches {
        let mut slots = Vec::with_capacity(iodepth as usize + 1);
        slots.push(BatchSlot::default());
        Batches {
            slots,
            free: Vec::new(),
            open: 0,
        }
    }
    /// A bio of the open batch went in flight.
    fn went_in(&mut self) {
        self.slots[self.open as usize].live += 1;
    }
    /// The open batch finished submitting at `end`; the next one opens (a batch with
    /// nothing in flight stays open).
    fn close(&mut self, end: u64) {
        let open = &mut self.slots[self.open as usize];
        if open.live == 0 {
            return;
        }
        open.end = end;
        self.open = match self.free.pop() {
            Some(k) => k,
            None => {
                self.slots.push(BatchSlot::default());
                self.slots.len() as u32 - 1
            }
        };
        self.slots[self.open as usize] = BatchSlot::default();
    }
    /// A bio of batch `slot` completed: its batch's end (`None` if the batch is still
    /// being submitted, a completion inline in it).
    fn completed(&mut self, slot: u64) -> Option<u64> {
        let k = slot as u32;
        let s = &mut self.slots[k as usize];
        // Every bio that went in flight completes once (`handle`): a slot counted down
        // past zero is a bio completed twice or one that never went in.
        s.live = s
            .live
            .checked_sub(1)
            .unwrap_or_else(|| panic!("batch slot {k}: a bio completed that never went in"));
        if k == self.open {
            return None;
        }
        if s.live == 0 {
            self.free.push(k);
        }
        Some(s.end)
    }
}

/// How a submission round ended.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Round {
    /// Submitted what the depth and batch allowed (or found no tag).
    Go,
    /// The rate limit: nothing before this time since the job started.
    Until(u64),
    /// The driver waits for everything in flight (the verify pass follows).
    Drain,
    /// Nothing more to issue.
    Done,
}

struct JobState<'a, S: LatSink> {
    rj: &'a RunJob,
    job: &'a Job,
    buffers: Option<BufferFiller>,
    driver: JobDriver,
    h: SubmitterHandle,
    sink: S,
    out: JobOutcome,
    inflight: u32,
    free_bufs: Vec<IoBuf>,
    batches: Batches,
    t0: u64,
    progress: &'a Progress,
    count: &'a JobCount,
    pending: Option<Bio>,
    /// Completions reaped and not yet handled (beyond `iodepth_batch_complete_max`).
    reaped: VecDeque<Bio>,
    /// The last clock reading, and whether nothing happened since it was taken. Reading the
    /// clock is a visible part of the per-I/O cost on a null device, so each reading serves
    /// every purpose it can: a batch's end time is also the completion time of what
    /// completed inline, and the next loop's "now".
    now: u64,
    fresh: bool,
    /// When the latency-target search restarted the measurements, if it did.
    restarted_at: Option<u64>,
    /// Ends of other jobs posted when this one started, and the ones it has looked at.
    ends_at_start: usize,
    ends_seen: usize,
}

/// Runs one job clone to completion and returns its sink and outcome. `bufs` are the
/// buffers its I/O uses when it moves data (one per I/O in flight; registered ones for
/// `fixedbufs`); more are made if they run out. It counts its completions in `progress`'s
/// slot `slot`.
#[allow(clippy::too_many_arguments)]
pub fn run_job<S: LatSink>(
    q: Arc<RequestQueue>,
    clock: MonotonicClock,
    rj: &RunJob,
    sink: S,
    start: &Barrier,
    progress: &Progress,
    slot: usize,
    bufs: Vec<IoBuf>,
) -> (S, JobOutcome) {
    let job = &rj.job;
    let mut out = JobOutcome::default();
    let pinned = if !job.cpus_shared.is_empty() {
        Some(crate::pin_current_thread_to(&job.cpus_shared))
    } else {
        job.cpu.map(pin_current_thread)
    };
    if let Some(Err(e)) = pinned {
        out.first_error = Some(format!("{}: cpus_allowed: {e}", job.name));
    }
    let h = SubmitterHandle::new(q, rj.ctx, clock);
    start.wait();
    progress.stonewalls.wait_turn(job, &progress.stop);
    // fio's `startdelay`: the job starts (and its clock with it) this much later; a stop
    // request cuts the wait short.
    let delay_end = h.now().0.saturating_add(job.start_delay_ns);
    while job.start_delay_ns > 0 && !progress.stop.load(Ordering::Relaxed) {
        let left = delay_end.saturating_sub(h.now().0);
        if left == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_nanos(left.min(10_000_000)));
    }
    // fio sizes a job's files as it starts (`setup_files`): a file a job above filled ends
    // where it ends now.
    let sized;
    let mut sized_ok = true;
    let job = if job.files.iter().any(|f| f.to_eof) {
        match job.sized_at_start(|p| std::fs::metadata(p).ok().map(|m| m.len())) {
            Ok(j) => {
                sized = j;
                &sized
            }
            Err(e) => {
                out.errors += 1;
                out.first_error = Some(format!("{}: {e}", job.name));
                sized_ok = false;
                job
            }
        }
    } else {
        job
    };
    // fio's `exec_prerun`, run in `thread_main` before the job's clock starts
    // (`set_epoch_time`): a job whose command fails does no I/O, without an error.
    let prerun_ok = sized_ok
        && job
            .exec_prerun
            .as_ref()
            .is_none_or(|cmd| mqblk_workload::exec::run_hook(&job.name, cmd, "prerun"));
    let t0 = h.now().0;
    progress.counts[slot]
        .started
        .store(t0 + 1, Ordering::Release);
    out.started_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    if job.logs.epoch_based() {
        out.log_epoch_ms = crate::cpu::clock_ms(job.logs.epoch_clock).unwrap_or(out.started_ms);
    }
    let cpu0 = thread_cpu_time();
    // fio fills each of a writing job's buffers once as it starts (`init_io_u_buffers`).
    let mut buffers = rj.buffers.clone();
    let mut bufs = bufs;
    if let Some(f) = &mut buffers {
        for b in &mut bufs {
            f.fill(b.as_mut_slice());
        }
    }
    let mut st = JobState {
        rj,
        job,
        buffers,
        driver: JobDriver::new(job),
        h,
        sink,
        out,
        inflight: 0,
        free_bufs: bufs,
        batches: Batches::new(job.iodepth),
        t0,
        progress,
        count: &progress.counts[slot],
        pending: None,
        reaped: VecDeque::new(),
        now: t0,
        fresh: true,
        restarted_at: None,
        ends_at_start: progress.ends.posted(),
        ends_seen: 0,
    };
    if prerun_ok {
        st.run();
    }
    st.drain();
    // Requests of other jobs that this thread's queue runs issued on its own rings.
    st.h.retire();
    let t1 = st.h.now().0;
    st.out.cpu = thread_cpu_time().since(cpu0);
    // From the ramp's end, or from where the latency-target search restarted the
    // measurements.
    let measure_from = (t0 + job.ramp_ns).max(st.restarted_at.unwrap_or(0));
    st.sink.latency_depth(st.driver.depth());
    st.out.runtime_ns = t1.saturating_sub(measure_from.min(t1));
    st.out.iolog = st.driver.take_log();
    st.out.zone_resets = st.driver.zone_resets();
    // fio's `verify_state_save`, as the job's thread ends.
    let state = rj
        .saves_verify_state
        .then(|| st.driver.verify_state(&job.name, job.index))
        .flatten();
    if let Some(state) = state {
        if let Err(e) = state.save(std::path::Path::new("")) {
            eprintln!("{}: {e}", job.name);
        }
    }
    st.sink.finish(t1.saturating_sub(t0));
    let JobState { sink, out, .. } = st;
    if let Some(cmd) = &job.exec_postrun {
        mqblk_workload::exec::run_hook(&job.name, cmd, "postrun");
    }
    // Posted before the barrier opens, so the next stonewall's jobs see it as they start.
    progress
        .ends
        .post(job.exit, out.errors > 0 || out.first_error.is_some());
    progress.stonewalls.finish(job);
    progress.counts[slot]
        .finished
        .store(true, Ordering::Release);
    (sink, out)
}

impl<S: LatSink> JobState<'_, S> {
    /// Whether another job's end, posted since this one last looked, terminates it
    /// (fio's `exitall`, `exit_what`, `exitall_on_error`).
    fn terminated(&mut self) -> bool {
        let n = self.progress.ends.posted();
        if n == self.ends_seen {
            return false;
        }
        let hit = self
            .progress
            .ends
            .ends(&self.job.exit, self.ends_seen, self.ends_at_start);
        self.ends_seen = n;
        hit
    }

    fn run(&mut self) {
        let job = self.job;
        let mut last_sample = self.t0;
        loop {
            let now = if std::mem::take(&mut self.fresh) {
                self.now
            } else {
                self.h.now().0
            };
            if self.progress.stop.load(Ordering::Relaxed)
                || self.count.steady_stop.load(Ordering::Relaxed)
                || self.terminated()
            {
                self.driver.stop();
            }
            let depth = self.driver.depth();
            let room = depth.saturating_sub(self.inflight);
            let round = if room > 0 || self.rest_waits() {
                self.submit_batch(room.min(job.batch_submit), now - self.t0)
            } else {
                Round::Go
            };
            match round {
                Round::Done if self.pending.is_none() => return,
                Round::Drain => {
                    self.drain();
                    if self.driver.take_unlink() {
                        self.empty_files();
                    }
                    continue;
                }
                Round::Until(t) if self.inflight == 0 => {
                    // Rate-limited with nothing in flight: sleep until the next I/O is due (at
                    // most 1 ms, so the loop still sees the runtime end and stop requests).
                    let wait = (self.t0 + t).saturating_sub(now).clamp(1_000, 1_000_000);
                    self.h.idle(wait);
                    continue;
                }
                _ => {}
            }
            // A bio waiting for a tag (a whole one, or a split one's rest) needs completions
            // reaped before it can go on, whatever the depth: with fewer tags than iodepth,
            // or other jobs holding them, the queue is never "full" here but nothing moves
            // unless we poll (a timer-mode or io_uring device completes only when polled).
            let waits_for_tag = self.pending.is_some() && self.inflight > 0;
            let full = self.inflight >= depth;
            let min = if full || round != Round::Go || waits_for_tag {
                job.batch_complete_min.max(1) as usize
            } else {
                0
            };
            self.reap(min);
            // fio's `wait_for_completions`: a full queue is reaped down to `iodepth_low`,
            // `iodepth_batch_complete_min` at a time.
            while full && self.inflight > job.iodepth_low.min(depth) && !self.rest_waits() {
                self.reap(min);
            }
            if now >= last_sample + SAMPLE_LOOK.0 {
                if self.driver.measures(now - self.t0) {
                    self.sink.sample(now - self.t0);
                }
                last_sample = now;
            }
        }
    }

    /// True when the bio waiting for a tag is the rest of a split one (in flight already).
    fn rest_waits(&self) -> bool {
        self.pending.as_ref().is_some_and(|b| b.split.is_some())
    }

    fn make_bio(&mut self, io: JobIo) -> Bio {
        let (op, flags) = self.job.bio_flags(&io);
        let (offset, len) = (io.offset, io.len);
        let mut bio = Bio::new(op, offset >> SECTOR_SHIFT, len >> SECTOR_SHIFT)
            .with_flags(flags)
            .with_ioprio(io.cmdprio.map_or(self.rj.ioprio, IoPrio))
            .with_issuer(self.rj.issuer, self.rj.group)
            .with_bvecs(self.rj.bvecs);
        if self.rj.with_data && op.has_data() {
            let mut buf = self.free_bufs.pop().unwrap_or_else(|| {
                let mut b = IoBuf::new(len as usize);
                if let Some(f) = &mut self.buffers {
                    f.fill(b.as_mut_slice());
                }
                b
            });
            buf.set_len(len as usize);
            if op == ReqOp::Write && self.job.verify {
                verify::fill_pieces(
                    buf.as_mut_slice(),
                    offset,
                    self.job.seed,
                    self.job.verify_mode,
                    self.job.verify_pattern.as_deref(),
                    self.job.verify_interval,
                    self.job.verify_offset,
                );
            } else if let (ReqOp::Write, Some(f)) = (op, &mut self.buffers) {
                f.before_write(buf.as_mut_slice(), offset, self.now.saturating_sub(self.t0));
            }
            bio = bio.with_buf(buf);
        }
        bio
    }

    /// Submits `bio` now. Returns whether a bio newly went in flight (counted in
    /// `inflight`), and whether all of it went in. What found no tag waits in `pending`:
    /// a whole bio, or the rest of a split one whose first pieces went in (it counts as in
    /// flight from then on; its pieces complete through our reaping).
    fn submit(&mut self, bio: Bio) -> (bool, bool) {
        let was_rest = bio.split.is_some();
        let now = self.h.now();
        // A new bio belongs to the batch it goes in with (one that waited for a tag, to
        // the batch that finally took it); the rest of a split one keeps its original's.
        let bio = if was_rest {
            bio
        } else {
            bio.with_private(u64::from(self.batches.open))
        };
        let (new, whole) = match self.h.submit_at(bio, now) {
            Ok(()) => (!was_rest, true),
            Err(b) => {
                let partly_in = b.split.is_some() && !was_rest;
                self.pending = Some(b);
                (partly_in, false)
            }
        };
        if new {
            self.batches.went_in();
        }
        self.inflight += u32::from(new);
        (new, whole)
    }

    /// Submits up to `want` bios under one plug; says why it stopped if not for depth.
    fn submit_batch(&mut self, want: u32, rel: u64) -> Round {
        let plug = want > 1 || self.rj.plug_each;
        if plug {
            self.h.start_plug();
        }
        let mut submitted = 0;
        let mut round = Round::Go;
        // The rest of a split bio (already in flight) carries on before anything new.
        if let Some(rest) = self.pending.take_if(|b| b.split.is_some()) {
            self.submit(rest);
        }
        while submitted < want && self.pending.as_ref().is_none_or(|b| b.split.is_none()) {
            let bio = match self.pending.take() {
                Some(b) => b,
                None => match self.driver.next(rel) {
                    Next::Io(io) => self.make_bio(io),
                    Next::Until(t) => {
                        round = Round::Until(t);
                        break;
                    }
                    Next::Drain => {
                        round = Round::Drain;
                        break;
                    }
                    Next::Done => {
                        round = Round::Done;
                        break;
                    }
                },
            };
            let (new, whole) = self.submit(bio);
            submitted += u32::from(new);
            if !whole {
                break;
            }
        }
        if plug {
            self.h.finish_plug();
        }
        self.finish_batch(submitted);
        if self.pending.is_some() && self.inflight == 0 {
            // No tag and nothing of ours to reap: others hold them; give them a moment.
            std::thread::yield_now();
        }
        round
    }

    fn finish_batch(&mut self, submitted: u32) {
        if submitted > 0 {
            let end = self.h.now().0;
            (self.now, self.fresh) = (end, true);
            self.sink.submitted(submitted as u64, self.inflight as u64);
            self.batches.close(end);
        }
    }

    /// Completions held: reaped and not yet handled, and handed back by the queue since.
    fn held(&mut self) -> usize {
        self.reaped.len() + self.h.done().len()
    }

    fn reap(&mut self, min: usize) {
        // Completions that happened inline during the batch just submitted are timed at the
        // batch's end; anything reaped later gets a fresh reading.
        let inline = self.fresh && self.held() >= min.max(1);
        if !inline {
            // Like fio, reap only once the queue is full (or nothing more can be submitted);
            // until then, completions that already arrived are taken as they are.
            let need = min.saturating_sub(self.reaped.len());
            if need > 0 {
                // While a split bio's rest waits for a tag, its pieces' completions free
                // tags without completing a bio: poll once and go back to resubmit it.
                let wait = if self.rest_waits() { 0 } else { 1_000_000_000 };
                self.h.reap(need, wait);
            }
            if self.held() == 0 {
                return;
            }
            (self.now, self.fresh) = (self.h.now().0, true);
        }
        let now = self.now;
        let measured = self.driver.measures(now - self.t0);
        let checks = self.job.verify && self.driver.checks_reads();
        let (mut n, mut bytes) = (0u64, 0u64);
        let max = self.job.batch_complete_max as usize;
        let mut done = std::mem::take(self.h.done());
        if self.reaped.is_empty() && done.len() <= max {
            // All of it, in the order reaped (the common case: nothing left over).
            for bio in done.drain(..) {
                if let Some(len) = self.handle(bio, now, measured, checks) {
                    (n, bytes) = (n + 1, bytes + len);
                }
            }
        } else {
            // At most `iodepth_batch_complete_max` (fio's default: one), oldest first; the
            // rest wait here for the next reap, as fio leaves them in the ring's CQ. They
            // wait in a ring buffer: taking them from the front of the queue's vector, or
            // splitting it, moved every later one at every reap.
            self.reaped.extend(done.drain(..));
            for _ in 0..max {
                let Some(bio) = self.reaped.pop_front() else {
                    break;
                };
                if let Some(len) = self.handle(bio, now, measured, checks) {
                    (n, bytes) = (n + 1, bytes + len);
                }
            }
        }
        *self.h.done() = done;
        self.sink.completed(n);
        if self.driver.take_stats_reset() {
            self.sink.restart();
            self.restarted_at = Some(now);
        }
        if let Some((errno, e)) = self.driver.take_error() {
            self.out.errors += 1;
            self.sink.error(errno, true);
            self.out
                .first_error
                .get_or_insert(format!("{}: {e}", self.job.name));
        }
        self.out.ios += n;
        self.count.add(now, n, bytes);
    }

    /// Accounts one completed bio (of `reap`'s batch, timed `now`); returns its length
    /// when it counts as an I/O done (anything but a flush).
    fn handle(&mut self, mut bio: Bio, now: u64, measured: bool, checks: bool) -> Option<u64> {
        self.inflight -= 1;
        // Completed inline while its batch was still going out: timed at the completion.
        let batch_end = self.batches.completed(bio.private).unwrap_or(now);
        let write = bio.op.is_write();
        if bio.op == ReqOp::Flush {
            if bio.status == BlkStatus::Ok {
                if measured {
                    self.sink.sync(now.saturating_sub(bio.submit_ns.0));
                }
            } else {
                self.note_error(&bio);
            }
            return None;
        }
        // A zone reset (`zonemode=zbd`'s) is not an I/O the job counts.
        if bio.op == ReqOp::ZoneReset {
            if bio.status != BlkStatus::Ok {
                self.note_error(&bio);
            }
            return None;
        }
        let len = bio.bytes();
        if bio.status != BlkStatus::Ok {
            self.note_error(&bio);
        } else {
            // A read-only job checks what it reads; a job that writes checks its own
            // blocks in the verify pass instead (its reads may hit blocks it never
            // wrote), as fio does.
            if checks && !write {
                self.check_block(&bio);
            }
            if matches!(bio.op, ReqOp::Read | ReqOp::Write) {
                // fio's latency_target and max_latency judge the total latency (after the
                // ramp; the driver counts every completion for think times).
                let lat = now.saturating_sub(bio.submit_ns.0);
                let dir = if write { Ddir::Write } else { Ddir::Read };
                self.driver.completed(
                    now.saturating_sub(self.t0),
                    lat,
                    dir,
                    len,
                    bio.sector << SECTOR_SHIFT,
                );
            }
            if measured {
                let submit = bio.submit_ns.0;
                let end = batch_end.max(submit);
                let dir = Ddir::of_op(bio.op);
                self.sink.record(Completed {
                    dir,
                    bytes: len,
                    offset: bio.sector << SECTOR_SHIFT,
                    at_ns: now.saturating_sub(self.t0),
                    slat: end - submit,
                    clat: now.saturating_sub(end),
                    ioprio: self.job.counted_ioprio(bio.ioprio),
                });
            }
        }
        if let Some(buf) = bio.buf.take() {
            self.free_bufs.push(buf);
        }
        Some(len)
    }

    /// fio's `unlink_each_loop` as a new loop begins: each file the run made is emptied,
    /// as unlinking it and creating it again would leave it, but through the same open
    /// file the rings use. A failure ends the job with its error, as fio's does.
    fn empty_files(&mut self) {
        for path in &self.rj.emptied_each_loop {
            let r = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(0));
            if let Err(e) = r {
                self.out.errors += 1;
                self.out
                    .first_error
                    .get_or_insert(format!("{}: unlink_each_loop: {path}: {e}", self.job.name));
                self.driver.stop();
            }
        }
    }

    /// Checks a block read back against its verify headers (one per `verify_interval`),
    /// each bad piece reported (the first only with `verify_fatal`) and with `verify_dump`
    /// written out as read and as expected.
    fn check_block(&mut self, bio: &Bio) {
        let off = bio.sector << SECTOR_SHIFT;
        let Some(buf) = bio.buf.as_ref() else {
            self.out.verify_errors.push(format!(
                "{}: verify: read at offset {off} carried no data",
                self.job.name
            ));
            return;
        };
        let job = self.job;
        let bad = verify::check_pieces(
            buf.as_slice(),
            off,
            job.verify_mode,
            job.verify_pattern.as_deref(),
            job.verify_interval,
            job.verify_offset,
            job.verify_fatal,
        );
        if bad.is_empty() {
            self.out.verified += 1;
        } else {
            // fio's verify failure: EILSEQ, which ends the job unless `continue_on_error`
            // covers verify errors (then it counts in `total_err`).
            self.out.errors += 1;
            let goes_on = self.driver.io_failed(true, mqblk_workload::job::EILSEQ);
            self.sink.error(mqblk_workload::job::EILSEQ, !goes_on);
        }
        for p in bad {
            let mut line = format!("{}: {}", job.name, p.error);
            if job.verify_dump && p.error.is_data() {
                let piece = &buf.as_slice()[p.start..p.start + p.len];
                line.push_str(&dump_piece(job, off + p.start as u64, piece));
            }
            self.out.verify_errors.push(line);
        }
    }

    /// An I/O failed: counted, reported, and unless `continue_on_error` covers it (fio's
    /// `td_non_fatal_error`) the job ends, as fio's does at its first error.
    fn note_error(&mut self, bio: &Bio) {
        let errno = bio.status.to_errno();
        // Whatever the error means to the job, the I/O is over: zonemode=zbd lets go of its
        // zone (a full file ending a fill_device job included).
        if matches!(bio.op, ReqOp::Read | ReqOp::Write) {
            let at = bio.sector << SECTOR_SHIFT;
            self.driver
                .rw_failed(bio.op == ReqOp::Write, at, bio.bytes());
        }
        if self.driver.fill_ended(errno) {
            return;
        }
        self.out.errors += 1;
        let goes_on = self.driver.io_failed(bio.op == ReqOp::Read, errno);
        self.sink.error(errno, !goes_on);
        if self.out.first_error.is_none() {
            self.out.first_error = Some(format!(
                "{}: {} of {} bytes at offset {} failed: {} (errno {})",
                self.job.name,
                bio.op.name(),
                bio.bytes(),
                bio.sector << SECTOR_SHIFT,
                bio.status,
                errno
            ));
        }
    }

    /// Waits for everything in flight, and submits a bio that was waiting for a tag.
    fn drain(&mut self) {
        loop {
            if let Some(bio) = self.pending.take() {
                if self.submit(bio).0 {
                    self.finish_batch(1);
                }
            }
            if self.inflight == 0 && self.pending.is_none() {
                return;
            }
            if self.inflight == 0 {
                std::thread::yield_now();
            } else {
                self.reap(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Batches, JobCount};

    /// A bio that stays in flight while many later batches go out and complete keeps its own
    /// batch's end: its wait is completion latency, not submission latency.
    #[test]
    fn a_bio_outliving_many_batches_keeps_its_batchs_end() {
        let mut b = Batches::new(32);
        let slow = u64::from(b.open);
        b.went_in();
        b.close(1_000);
        for i in 0..1_000u64 {
            let slot = u64::from(b.open);
            assert_ne!(slot, slow, "batch {i} reused the slow bio's slot");
            b.went_in();
            b.close(2_000 + i);
            assert_eq!(b.completed(slot), Some(2_000 + i));
        }
        assert_eq!(b.completed(slow), Some(1_000));
        // Slots are reused once free: a depth of one batch in flight needs two slots.
        assert!(b.slots.len() <= 3, "{} slots", b.slots.len());
    }

    /// A completion with no bio of its batch in flight is a broken invariant, said at once.
    #[test]
    #[should_panic(expected = "a bio completed that never went in")]
    fn a_completion_beyond_what_went_in_is_refused() {
        let mut b = Batches::new(4);
        let slot = u64::from(b.open);
        b.went_in();
        b.close(10);
        assert_eq!(b.completed(slot), Some(10));
        b.completed(slot);
    }

    /// A batch in which nothing went in stays open; a bio completed while its batch is still
    /// going out has no end yet.
    #[test]
    fn an_empty_batch_stays_open_and_an_inline_completion_has_no_end() {
        let mut b = Batches::new(4);
        let first = b.open;
        b.close(10);
        assert_eq!(b.open, first);
        b.went_in();
        b.went_in();
        assert_eq!(b.completed(u64::from(first)), None);
        b.close(20);
        assert_ne!(b.open, first);
        assert_eq!(b.completed(u64::from(first)), Some(20));
    }

    /// The steady-state check reads the counts as they stood at its tick, however late it
    /// reads them: completions reaped after the tick are left out.
    #[test]
    fn a_steady_sample_holds_the_counts_at_its_tick() {
        let c = JobCount::default();
        c.mark_at(1_000);
        c.add(400, 10, 40_960);
        // Before any reap past the tick, the live counts are the tick's.
        assert_eq!(c.steady_sample(1_000).ios, 10);
        c.add(1_200, 5, 20_480);
        c.add(1_900, 5, 20_480);
        let s = c.steady_sample(1_000);
        assert_eq!((s.ios, s.bytes), (10, 40_960), "the check woke at 1.9 us");
        c.mark_at(2_000);
        assert_eq!(c.steady_sample(2_000).ios, 20);
        c.add(2_500, 1, 4_096);
        assert_eq!(c.steady_sample(2_000).ios, 20);
    }
}
