//! Runs jobs through the stack: one thread per job clone, each owning a software queue,
//! generating fio-style I/O and measuring it the way fio does.

use super::verify;
use mqblk_core::{Bio, BlkStatus, CtxIdx, IoBuf, IoPrio, Nanos, ReqOp, RequestQueue, SECTOR_SHIFT};
use mqblk_drivers::FixedPool;
use mqblk_runtime::{
    pin_current_thread, thread_cpu_time, CpuTime, MonotonicClock, SubmitterHandle,
};
use mqblk_workload::pattern::{Generator, Pattern};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

/// One job clone as the runner sees it (converted from a parsed job).
#[derive(Clone, Debug)]
pub struct RunJob {
    pub name: String,
    pub pattern: Pattern,
    pub rwmixread: u32,
    /// Block size of reads and of writes; offsets are on a grid of the larger.
    pub bs: [u32; 2],
    pub offset: u64,
    /// Bytes of the region (and of one pass).
    pub size: u64,
    pub iodepth: u32,
    pub batch_submit: u32,
    pub batch_complete_min: u32,
    /// The most completions handled per reap (`iodepth_batch_complete_max`).
    pub batch_complete_max: u32,
    pub runtime: Option<Nanos>,
    pub time_based: bool,
    pub ramp: Nanos,
    pub ioprio: IoPrio,
    pub rate_iops: u64,
    pub seed: u64,
    pub verify: bool,
    /// Read back and check what a write pass wrote (`do_verify`).
    pub do_verify: bool,
    /// A flush after every this many writes (fio's `fsync=N`; 0 = never).
    pub fsync_every: u64,
    /// A flush when the job ends (`end_fsync`).
    pub end_fsync: bool,
    /// Move data (buffers on every bio): needed by memory-backed devices and verify.
    pub with_data: bool,
    pub cpu: Option<usize>,
    pub ctx: CtxIdx,
    pub issuer: u32,
    /// The cgroup id its bios carry (0: the root).
    pub group: u32,
}

/// Latency samples of one direction, in nanoseconds.
pub trait LatSink {
    fn record(&mut self, write: bool, bytes: u64, slat: u64, clat: u64, lat: u64);
    fn error(&mut self, write: bool);
    /// A flush completed after `lat` nanoseconds (fio's `sync` latency).
    fn sync(&mut self, lat: u64);
    /// Called about every 500 ms with the I/Os and bytes completed in the window.
    fn sample(&mut self, window_ns: u64);
    /// A submission of `n` I/Os at queue depth `depth` (fio's `iodepth_submit`/`_level`).
    fn submitted(&mut self, n: u64, depth: u64);
    /// A reap that returned `n` completions (fio's `iodepth_complete`).
    fn completed(&mut self, n: u64);
}

/// What a job thread reports besides its latency samples.
#[derive(Clone, Debug, Default)]
pub struct JobOutcome {
    pub runtime_ns: u64,
    pub cpu: CpuTime,
    pub ios: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub verify_errors: Vec<String>,
    pub verified: u64,
}

/// Shared between the job threads and the progress display.
#[derive(Default)]
pub struct Progress {
    pub ios: AtomicU64,
    pub bytes: AtomicU64,
    pub stop: AtomicBool,
}

const SAMPLE_WINDOW: Nanos = Nanos::from_millis(500);

/// Per-batch bookkeeping: bios carry their batch number so slat/clat split at the moment the
/// batch finished submitting.
struct Batches {
    ends: Vec<u64>,
    seq: u64,
}

impl Batches {
    fn new(iodepth: u32) -> Batches {
        Batches {
            ends: vec![0; (iodepth as usize + 1).next_power_of_two()],
            seq: 0,
        }
    }
    fn end_of(&self, seq: u64) -> u64 {
        self.ends[(seq as usize) & (self.ends.len() - 1)]
    }
}

struct JobState<'a, S: LatSink> {
    job: &'a RunJob,
    h: SubmitterHandle,
    sink: S,
    out: JobOutcome,
    inflight: u32,
    free_bufs: Vec<IoBuf>,
    /// With verify: which write-size blocks of the range the job wrote (one bit each), so
    /// the verify pass reads back only those, as fio's verify log does for mixed jobs.
    written: Vec<u64>,
    batches: Batches,
    measure_from: u64,
    progress: &'a Progress,
    pending: Option<Bio>,
    /// Writes submitted since the last flush (`fsync=N`).
    writes_since_sync: u64,
    /// The last clock reading, and whether nothing happened since it was taken. Reading the
    /// clock is a visible part of the per-I/O cost on a null device, so each reading serves
    /// every purpose it can: a batch's end time is also the completion time of what
    /// completed inline, and the next loop's "now".
    now: u64,
    fresh: bool,
}

/// Runs one job clone to completion and returns its sink and outcome.
pub fn run_job<S: LatSink>(
    q: Arc<RequestQueue>,
    clock: MonotonicClock,
    job: &RunJob,
    mut sink: S,
    start: &Barrier,
    progress: &Progress,
    pool: Option<FixedPool>,
) -> (S, JobOutcome) {
    let mut out = JobOutcome::default();
    if let Some(cpu) = job.cpu {
        if let Err(e) = pin_current_thread(cpu) {
            out.first_error = Some(format!("{}: cpus_allowed: {e}", job.name));
        }
    }
    let max_bs = job.bs[0].max(job.bs[1]);
    // With registered buffers, the job's buffers come from the device's pool, so its I/O
    // goes as READ_FIXED/WRITE_FIXED; they return to the pool when the job ends.
    let free_bufs = if job.with_data {
        (0..job.iodepth)
            .map(|_| {
                pool.as_ref()
                    .and_then(|p| p.alloc(max_bs as usize))
                    .unwrap_or_else(|| IoBuf::new(max_bs as usize))
            })
            .collect()
    } else {
        Vec::new()
    };
    let h = SubmitterHandle::new(q, job.ctx, clock);
    start.wait();
    let t0 = h.now().0;
    let cpu0 = thread_cpu_time();
    sink.sample(0);
    let mut st = JobState {
        job,
        h,
        sink,
        out,
        inflight: 0,
        free_bufs,
        written: if job.verify {
            vec![0; (job.size / job.bs[1].max(1) as u64).div_ceil(64) as usize]
        } else {
            Vec::new()
        },
        batches: Batches::new(job.iodepth),
        measure_from: t0 + job.ramp.0,
        progress,
        pending: None,
        writes_since_sync: 0,
        now: t0,
        fresh: true,
    };
    let mut gen = Generator::new(
        job.pattern,
        job.rwmixread,
        max_bs,
        job.offset,
        job.size,
        job.seed,
    );
    st.main_phase(&mut gen, t0);
    if job.verify
        && job.do_verify
        && job.pattern.does_write()
        && !progress.stop.load(Ordering::Relaxed)
    {
        st.verify_phase(&gen);
    }
    if job.end_fsync {
        st.submit_flush();
    }
    st.drain();
    let t1 = st.h.now().0;
    st.out.cpu = thread_cpu_time().since(cpu0);
    st.out.runtime_ns = t1.saturating_sub(st.measure_from.min(t1));
    let JobState { sink, out, .. } = st;
    (sink, out)
}

impl<S: LatSink> JobState<'_, S> {
    fn deadline_passed(&self, now: u64, t0: u64) -> bool {
        match self.job.runtime {
            Some(rt) => now >= t0 + self.job.ramp.0 + rt.0,
            None => false,
        }
    }

    fn main_phase(&mut self, gen: &mut Generator, t0: u64) {
        let job = self.job;
        let mut last_sample = t0;
        loop {
            let now = if std::mem::take(&mut self.fresh) {
                self.now
            } else {
                self.h.now().0
            };
            if self.progress.stop.load(Ordering::Relaxed) || self.deadline_passed(now, t0) {
                break;
            }
            if gen.pass_done() {
                // Without time_based a job ends after one pass over `size` (or at runtime).
                if !job.time_based || job.verify {
                    break;
                }
                gen.rewind();
            }
            let allowed = self.rate_allowance(now, t0);
            let room = job.iodepth - self.inflight;
            let want = room.min(job.batch_submit.max(1)).min(allowed);
            if want > 0 && !gen.pass_done() {
                self.submit_batch(gen, want);
            }
            if want == 0 && self.inflight == 0 && allowed == 0 {
                // Rate-limited with nothing in flight: sleep until the next I/O is due.
                self.sleep_until_next_slot(now, t0);
                continue;
            }
            let min = if self.inflight >= job.iodepth || want == 0 {
                job.batch_complete_min.max(1) as usize
            } else {
                0
            };
            self.reap(min);
            if now >= last_sample + SAMPLE_WINDOW.0 {
                if now >= self.measure_from {
                    self.sink.sample(now - last_sample);
                }
                last_sample = now;
            }
        }
    }

    /// Sleeps until `rate_iops` allows the next I/O (at most 1 ms, so the loop still sees the
    /// runtime end and stop requests promptly).
    fn sleep_until_next_slot(&mut self, now: u64, t0: u64) {
        let next =
            t0 + (self.out.ios + self.inflight as u64) * 1_000_000_000 / self.job.rate_iops.max(1);
        let wait = next.saturating_sub(now).clamp(1_000, 1_000_000);
        std::thread::sleep(std::time::Duration::from_nanos(wait));
    }

    /// `rate_iops`: how many more I/Os may start now.
    fn rate_allowance(&self, now: u64, t0: u64) -> u32 {
        if self.job.rate_iops == 0 {
            return u32::MAX;
        }
        let budget = (now - t0) as u128 * self.job.rate_iops as u128 / 1_000_000_000 + 1;
        budget
            .saturating_sub(self.out.ios as u128 + self.inflight as u128)
            .min(u32::MAX as u128) as u32
    }

    fn make_bio(&mut self, write: bool, offset: u64, len: u32) -> Bio {
        let op = if write { ReqOp::Write } else { ReqOp::Read };
        let mut bio = Bio::new(op, offset >> SECTOR_SHIFT, len >> SECTOR_SHIFT)
            .with_ioprio(self.job.ioprio)
            .with_issuer(self.job.issuer, self.job.group)
            .with_private(self.batches.seq);
        if self.job.with_data {
            let mut buf = self
                .free_bufs
                .pop()
                .unwrap_or_else(|| IoBuf::new(len as usize));
            buf.set_len(len as usize);
            if write && self.job.verify {
                verify::fill(buf.as_mut_slice(), offset, self.job.seed);
                let b = (offset - self.job.offset) / self.job.bs[1] as u64;
                if let Some(w) = self.written.get_mut((b / 64) as usize) {
                    *w |= 1 << (b % 64);
                }
            }
            bio = bio.with_buf(buf);
        }
        bio
    }

    fn submit_batch(&mut self, gen: &mut Generator, want: u32) {
        let plug = want > 1;
        if plug {
            self.h.start_plug();
        }
        let mut submitted = 0;
        for _ in 0..want {
            let bio = match self.pending.take() {
                Some(b) => b,
                None => {
                    let io = gen.next_io();
                    let len = self.job.bs[usize::from(io.write)];
                    self.make_bio(io.write, io.offset, len)
                }
            };
            let write = bio.op == ReqOp::Write;
            if !self.submit_one(bio) {
                break;
            }
            submitted += 1;
            if write {
                self.writes_since_sync += 1;
                if self.job.fsync_every > 0 && self.writes_since_sync >= self.job.fsync_every {
                    self.writes_since_sync = 0;
                    self.submit_flush();
                }
            }
        }
        if plug {
            self.h.finish_plug();
        }
        self.finish_batch(submitted);
    }

    /// Submits one bio; false if it found no tag (it is kept for the next round).
    fn submit_one(&mut self, bio: Bio) -> bool {
        let now = self.h.now();
        match self.h.submit_at(bio, now) {
            Ok(()) => {
                self.inflight += 1;
                true
            }
            Err(b) => {
                self.pending = Some(b);
                false
            }
        }
    }

    /// Submits a flush, waiting for a tag if need be (`fsync=N`, `end_fsync`).
    fn submit_flush(&mut self) {
        let mut bio = Bio::new(ReqOp::Flush, 0, 0)
            .with_issuer(self.job.issuer, self.job.group)
            .with_private(self.batches.seq);
        loop {
            let now = self.h.now();
            match self.h.submit_at(bio, now) {
                Ok(()) => {
                    self.inflight += 1;
                    return;
                }
                Err(b) => {
                    bio = b;
                    self.reap(1);
                }
            }
        }
    }

    fn finish_batch(&mut self, submitted: u32) {
        if submitted > 0 {
            let end = self.h.now().0;
            (self.now, self.fresh) = (end, true);
            self.sink.submitted(submitted as u64, self.inflight as u64);
            let len = self.batches.ends.len();
            self.batches.ends[(self.batches.seq as usize) & (len - 1)] = end;
            self.batches.seq += 1;
        }
    }

    fn reap(&mut self, min: usize) {
        // Completions that happened inline during the batch just submitted are timed at the
        // batch's end; anything reaped later gets a fresh reading.
        let inline = self.fresh && self.h.done().len() >= min.max(1);
        if !inline {
            // Like fio, reap only once the queue is full (or nothing more can be submitted);
            // until then, completions that already arrived are taken as they are.
            if min > 0 {
                self.h.reap(min, 1_000_000_000);
            }
            if self.h.done().is_empty() {
                return;
            }
            (self.now, self.fresh) = (self.h.now().0, true);
        }
        let now = self.now;
        let mut done = std::mem::take(self.h.done());
        // Handle at most `iodepth_batch_complete_max`; the rest wait for the next reap.
        let max = (self.job.batch_complete_max as usize).max(1);
        let rest = if done.len() > max {
            done.split_off(max)
        } else {
            Vec::new()
        };
        let (mut n, mut bytes) = (0u64, 0u64);
        for mut bio in done.drain(..) {
            self.inflight -= 1;
            n += 1;
            let write = bio.op.is_write();
            let len = bio.bytes();
            bytes += len;
            if bio.op == ReqOp::Flush {
                n -= 1;
                if bio.status == BlkStatus::Ok {
                    self.sink.sync(now.saturating_sub(bio.submit_ns.0));
                } else {
                    self.note_error(&bio);
                }
                continue;
            }
            if bio.status != BlkStatus::Ok {
                self.note_error(&bio);
                if let Some(buf) = bio.buf.take() {
                    self.free_bufs.push(buf);
                }
                continue;
            }
            // A read-only job checks what it reads; a job that writes checks its own blocks in
            // the verify pass instead (its reads may hit blocks it never wrote), as fio does.
            if self.job.verify && !write && !self.job.pattern.does_write() {
                self.check_block(&bio);
            }
            if now >= self.measure_from {
                let submit = bio.submit_ns.0;
                let end = self.batches.end_of(bio.private).max(submit);
                self.sink.record(
                    write,
                    len,
                    end - submit,
                    now.saturating_sub(end),
                    now.saturating_sub(submit),
                );
            }
            if let Some(buf) = bio.buf.take() {
                self.free_bufs.push(buf);
            }
        }
        *self.h.done() = done;
        self.h.done().extend(rest);
        self.sink.completed(n);
        self.out.ios += n;
        self.progress.ios.fetch_add(n, Ordering::Relaxed);
        self.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Checks a block read back against its verify header.
    fn check_block(&mut self, bio: &Bio) {
        let off = bio.sector << SECTOR_SHIFT;
        match bio.buf.as_ref() {
            Some(buf) => match verify::check(buf.as_slice(), off) {
                Ok(()) => self.out.verified += 1,
                Err(e) => self
                    .out
                    .verify_errors
                    .push(format!("{}: {e}", self.job.name)),
            },
            None => self.out.verify_errors.push(format!(
                "{}: verify: read at offset {off} carried no data",
                self.job.name
            )),
        }
    }

    fn note_error(&mut self, bio: &Bio) {
        self.out.errors += 1;
        self.sink.error(bio.op.is_write());
        if self.out.first_error.is_none() {
            self.out.first_error = Some(format!(
                "{}: {} of {} bytes at offset {} failed: {} (errno {})",
                self.job.name,
                bio.op.name(),
                bio.bytes(),
                bio.sector << SECTOR_SHIFT,
                bio.status,
                bio.status.to_errno()
            ));
        }
    }

    /// Waits for everything in flight.
    fn drain(&mut self) {
        while self.inflight > 0 {
            self.reap(1);
        }
    }

    /// fio's `do_verify`: read back every block the write pass wrote, in the same order, and
    /// check each one.
    fn verify_phase(&mut self, gen: &Generator) {
        self.drain();
        let bs = self.job.bs[1];
        let mut i = 0u64;
        let mut checking: Vec<Bio> = Vec::new();
        while i < gen.nr_blocks() || self.inflight > 0 {
            while i < gen.nr_blocks() && self.inflight < self.job.iodepth {
                let off = gen.block_offset(i);
                let b = (off - self.job.offset) / bs as u64;
                if self
                    .written
                    .get((b / 64) as usize)
                    .is_some_and(|w| w & (1 << (b % 64)) == 0)
                {
                    // Never written by this job (a mixed job's reads left it alone).
                    i += 1;
                    continue;
                }
                let bio = self.make_bio(false, off, bs);
                let now = self.h.now();
                match self.h.submit_at(bio, now) {
                    Ok(()) => {
                        self.inflight += 1;
                        i += 1;
                    }
                    Err(b) => {
                        if let Some(buf) = b.buf {
                            self.free_bufs.push(buf);
                        }
                        break;
                    }
                }
            }
            self.h.reap(1, 1_000_000_000);
            checking.append(self.h.done());
            for mut bio in checking.drain(..) {
                self.inflight -= 1;
                if bio.status == BlkStatus::Ok {
                    self.check_block(&bio);
                } else {
                    self.note_error(&bio);
                }
                if let Some(buf) = bio.buf.take() {
                    self.free_bufs.push(buf);
                }
            }
        }
    }
}
