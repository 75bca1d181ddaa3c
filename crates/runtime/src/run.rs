//! A run of fio jobs on real threads: the plan (one device for all jobs, one [`RunJob`]
//! per job clone on its own software queue), its execution (a thread per clone, started
//! together), the measurements in fio's shape ([`Sink`]) and a live progress line.

use crate::error::RunError;
use crate::{
    process_cpu_time, run_job, Completed, CpuTime, JobOutcome, LatSink, MonotonicClock, Progress,
    RunJob,
};
use mqblk_core::{Clock, IoBuf, RequestQueue};
use mqblk_device::{Device, DeviceConfig, DriverConfig};
use mqblk_workload::logs::JobLogs;
use mqblk_workload::steadystate::{MemberSpec, SteadyMonitor, TICK_NS as STEADY_TICK_NS};
use mqblk_workload::{Job, JobSpec, JobStats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long after an interrupt jobs may take to end before the queue's state is printed.
const STUCK_AFTER: Duration = Duration::from_secs(5);

/// What a run consists of: one device and the job clones on it.
pub struct Plan {
    pub device: DeviceConfig,
    pub jobs: Vec<RunJob>,
    /// For each clone, the index of the `JobSpec` it came from.
    pub spec_of: Vec<usize>,
    pub specs: Vec<JobSpec>,
    /// Set from outside (a signal handler) to end every job early, as fio does on its
    /// first Ctrl-C: what is in flight completes and the run reports what it measured.
    pub interrupt: Arc<AtomicBool>,
    /// Keep every job's time series (`--plot`), even where it writes no fio log.
    pub plot: bool,
}

impl Plan {
    pub fn from_specs(specs: &[JobSpec]) -> Result<Plan, RunError> {
        if specs.is_empty() {
            return Err(RunError::NoJobs);
        }
        let mut device = DeviceConfig::from_jobs(specs)?;
        device.check_real_files(specs)?;
        let total: usize = specs.iter().map(|s| s.numjobs.max(1) as usize).sum();
        let nr_ctx = if device.nr_ctx == 0 {
            total.max(1)
        } else {
            device.nr_ctx as usize
        };
        // Completions are routed to the software queue a bio came from, so each job clone
        // needs a software queue of its own.
        if nr_ctx < total {
            return Err(RunError::TooFewCtx {
                nr_ctx,
                clones: total,
            });
        }
        let entropy = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        // `unlink_each_loop` empties only files the run makes (none that are there now).
        let missing = |p: &String| !std::path::Path::new(p).exists();
        let capacity = device.capacity()?;
        // fio's zonemode=zbd: jobs take the zoned device's zone size, and share one zone
        // table per file.
        let zspecs = device.zoned_specs(specs)?;
        let mut resolved =
            mqblk_workload::resolve(&zspecs, &device.files, |_| Ok(capacity), entropy)?;
        mqblk_workload::zbd::setup(
            &mut resolved,
            device.zones().as_ref(),
            &device.files,
            capacity,
        )?;
        // Every bio goes under a plug: the kernel's `__submit_bio` starts one around each
        // (`QueueSettings::submit_bio_plugs`), and a file system plugs around every direct
        // I/O anyway (`__iomap_dio_rw`), so a regular file's jobs plug whatever the setting.
        let on_file = match &device.driver {
            DriverConfig::Uring(u) => std::fs::metadata(&u.path).map_or(true, |m| {
                !std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type())
            }),
            _ => false,
        };
        let plug_each = on_file || device.queue.submit_bio_plugs;
        let mut jobs = Vec::with_capacity(total);
        let mut spec_of = Vec::with_capacity(total);
        for job in resolved {
            let s = &specs[job.spec];
            if job.verify && job.bs.iter().any(|&b| b < 512) {
                return Err(RunError::VerifyBlockSize {
                    job: s.name.clone(),
                });
            }
            spec_of.push(job.spec);
            let k = job.index;
            jobs.push(RunJob {
                ioprio: job.bio_ioprio(),
                with_data: job.verify || device.stores_data(),
                ctx: mqblk_core::CtxIdx((k * nr_ctx / total.max(1)) as u16),
                issuer: k as u32 + 1,
                group: job.join_cgroup(&device.blkcg)?,
                plug_each,
                buffers: None,
                saves_verify_state: matches!(device.driver, DriverConfig::Uring(_)),
                bvecs: s.buffer_bvecs(),
                emptied_each_loop: match &device.driver {
                    DriverConfig::Uring(_) if job.unlink_each_loop => job
                        .files
                        .iter()
                        .map(|f| f.name.clone())
                        .filter(missing)
                        .collect(),
                    _ => Vec::new(),
                },
                job,
            });
        }
        // What writes carry, where data moves: a working set shared by the run's jobs
        // (`dedupe_global`) spans every clone's buffer stream, in thread order.
        let seeds: Vec<&mqblk_workload::pattern::frand::Seeds> =
            jobs.iter().map(|j| &j.job.seeds).collect();
        let fillers: Vec<Option<mqblk_workload::buffers::BufferFiller>> = jobs
            .iter()
            .enumerate()
            .map(|(k, j)| {
                let job = &j.job;
                (j.with_data && job.rw.does_write()).then(|| {
                    mqblk_workload::buffers::BufferFiller::new(
                        &job.buffers,
                        job.buffer_pattern.as_deref(),
                        &job.seeds,
                        job.min_bs[mqblk_workload::Ddir::Write.index()],
                        (&seeds, k),
                    )
                })
            })
            .collect();
        for (j, f) in jobs.iter_mut().zip(fillers) {
            j.buffers = f;
        }
        // One registered buffer per I/O any job can have in flight, of the largest block.
        match &mut device.driver {
            DriverConfig::Uring(u) if u.fixed_buffers => {
                u.fixed_buf_count = jobs.iter().map(|j| j.job.iodepth).sum();
                u.fixed_buf_size = jobs
                    .iter()
                    .map(|j| j.job.max_bs())
                    .max()
                    .unwrap_or(4096)
                    .next_multiple_of(4096);
            }
            _ => {}
        }
        Ok(Plan {
            device,
            jobs,
            spec_of,
            specs: specs.to_vec(),
            interrupt: Arc::default(),
            plot: false,
        })
    }
}

/// One job clone's measurements, in fio's shape.
pub struct Sink {
    pub stats: JobStats,
    sampler: mqblk_workload::RateSampler,
    /// fio's per-job logs and the `--plot` series, when asked for.
    pub logs: Option<JobLogs>,
}

impl Sink {
    fn new(job: &Job, spec: &JobSpec, plot: bool) -> Sink {
        let mut stats = JobStats::new(&job.name);
        stats.latency_depth = spec.iodepth;
        stats.latency_target_us = spec.latency_target_ns / 1000;
        stats.latency_window_us = spec.latency_window_ns / 1000;
        stats.latency_percentile = spec.latency_percentile;
        stats.continue_on_error = spec.errors.continues();
        for d in stats.dirs.iter_mut() {
            *d = mqblk_workload::DirStats::with_percentiles(
                spec.slat_percentiles,
                spec.clat_percentiles,
                spec.lat_percentiles,
            );
        }
        job.track_prios(&mut stats, spec.clat_percentiles || spec.lat_percentiles);
        Sink {
            stats,
            sampler: mqblk_workload::RateSampler::new(job.bw_avg_ms, job.iops_avg_ms, job.ramp_ns),
            logs: (plot || spec.logs.any()).then(|| JobLogs::new(spec.logs.clone())),
        }
    }
}

impl LatSink for Sink {
    #[inline]
    fn record(&mut self, io: Completed) {
        let Completed {
            dir,
            bytes,
            slat,
            clat,
            ..
        } = io;
        let d = dir.index();
        self.stats.dirs[d].record_io_prio(bytes, slat, clat, io.ioprio);
        if let Some(logs) = &mut self.logs {
            logs.io(io.at_ns, dir, bytes, io.offset, slat, clat, io.ioprio);
        }
    }
    fn error(&mut self, errno: i32, fatal: bool) {
        self.stats.io_error(errno, fatal);
    }
    fn sync(&mut self, lat: u64) {
        self.stats.sync.record(lat);
    }
    fn submitted(&mut self, n: u64, depth: u64) {
        self.stats.mark_submit(n);
        self.stats.mark_depth(depth, n);
    }
    fn completed(&mut self, n: u64) {
        self.stats.mark_complete(n);
    }
    fn finish(&mut self, at_ns: u64) {
        if let Some(logs) = &mut self.logs {
            logs.finish(at_ns);
        }
    }
    fn restart(&mut self) {
        self.stats.restart();
        self.sampler.restart();
    }
    fn latency_depth(&mut self, depth: u32) {
        self.stats.latency_depth = depth;
    }
    fn sample(&mut self, at_ns: u64) {
        self.sampler.tick(at_ns, &mut self.stats);
    }
}

/// The result of running a plan.
pub struct Execution {
    pub queue: Arc<RequestQueue>,
    pub device: Device,
    pub results: Vec<(Sink, JobOutcome)>,
    pub wall: Duration,
    pub cpu: CpuTime,
    pub started_ms: u64,
}

impl Execution {
    pub fn total_ios(&self) -> u64 {
        self.results.iter().map(|(_, o)| o.ios).sum()
    }
}

/// Builds the device and runs every job clone on its own thread.
pub fn execute(plan: &Plan, show_progress: bool) -> Result<Execution, RunError> {
    execute_on(build_device(plan, None)?, plan, show_progress)
}

/// Builds the plan's device, its events going to `tracer` if given. Each job clone is one
/// thread on a software queue of its own that drains what it has in flight before it ends,
/// so the device may give each hardware queue's ring to the thread that alone enters it
/// (`UringConfig::single_issuer`).
pub fn build_device(
    plan: &Plan,
    tracer: Option<Arc<dyn mqblk_core::Tracer>>,
) -> Result<Device, RunError> {
    let mut d = plan.device.clone();
    if let DriverConfig::Uring(u) = &mut d.driver {
        u.single_issuer = true;
    }
    Ok(mqblk_device::build_traced(&d, plan.jobs.len(), tracer)?)
}

/// Runs a plan on an existing device (whose software queues must cover the plan's Ctxs).
pub fn execute_on(device: Device, plan: &Plan, show_progress: bool) -> Result<Execution, RunError> {
    let queue = device.queue.clone();
    let pool = device.uring.as_ref().and_then(|u| u.buf_pool().cloned());
    let clock = MonotonicClock::new();
    // Dropped (stopped and joined) when this function returns, after every job finished.
    let _workers = plan
        .device
        .hctx_workers
        .then(|| crate::CompletionWorkers::start(&queue, &clock));
    if let Some(j) = plan
        .jobs
        .iter()
        .find(|j| j.ctx.0 as usize >= queue.nr_ctx())
    {
        return Err(RunError::NoCtx {
            job: j.job.name.clone(),
            ctx: j.ctx.0,
        });
    }
    // `iomem=shmhuge` and `mmaphuge`: each job's buffers in a huge-page area of its own,
    // `iodepth` buffers of its largest block, as fio lays out its area.
    let mut arenas = Vec::with_capacity(plan.jobs.len());
    for (j, &spec) in plan.jobs.iter().zip(&plan.spec_of) {
        let s = &plan.specs[spec];
        arenas.push(match &s.iomem {
            mqblk_workload::IoMem::Huge { file } if j.with_data => {
                // A file per clone: each clone maps its own, as fio's processes do.
                let file = file.as_ref().map(|f| {
                    if plan.jobs.len() > 1 {
                        std::path::PathBuf::from(format!("{f}.{}", j.issuer))
                    } else {
                        std::path::PathBuf::from(f)
                    }
                });
                Some(mqblk_drivers::HugeArena::new(
                    &format!("{}: iomem={}", j.job.name, s.iomem),
                    j.job.iodepth.max(1) as usize,
                    j.job.max_bs() as usize,
                    s.hugepage_size,
                    file.as_deref(),
                )?)
            }
            _ => None,
        });
    }
    let progress = Progress::for_jobs(plan.jobs.len());
    progress.stonewalls.set(plan.jobs.iter().map(|j| &j.job));
    let members: Vec<MemberSpec> = plan.jobs.iter().map(|j| MemberSpec::of(&j.job)).collect();
    let steady = SteadyMonitor::new(&members).map_err(RunError::Steady)?;
    let start = Barrier::new(plan.jobs.len() + 1);
    let started_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let (results, wall, cpu) = std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .jobs
            .iter()
            .zip(&plan.spec_of)
            .enumerate()
            .zip(&arenas)
            .map(|((slot, (job, &spec)), arena)| {
                let (q, c, p, b) = (queue.clone(), clock.clone(), &progress, &start);
                let sink = Sink::new(&job.job, &plan.specs[spec], plan.plot);
                // With registered buffers, the job's buffers come from the device's pool, so
                // its I/O goes as READ_FIXED/WRITE_FIXED; they return to the pool when the
                // job ends.
                let max_bs = job.job.max_bs() as usize;
                let bufs = if job.with_data {
                    (0..job.job.iodepth)
                        .map(|_| {
                            match arena {
                                Some(a) => a.take(max_bs),
                                None => pool.as_ref().and_then(|p| p.alloc(max_bs)),
                            }
                            .unwrap_or_else(|| IoBuf::new(max_bs))
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                std::thread::Builder::new()
                    .name(format!("mqblk-job-{}", job.issuer))
                    .spawn_scoped(scope, move || run_job(q, c, job, sink, b, p, slot, bufs))
                    .expect("spawning a job thread")
            })
            .collect();
        let cpu0 = process_cpu_time();
        // fio's helper thread starts before the jobs: its ticks count from here.
        let ticks_from = clock.now().0;
        start.wait();
        let t0 = Instant::now();
        let progress_ref = &progress;
        let ticker =
            show_progress.then(|| scope.spawn(move || progress_line(progress_ref, plan, t0)));
        // fio's helper thread checks for steady state every second from the start.
        let steady = steady.map(|mut m| {
            let clock = clock.clone();
            scope.spawn(move || {
                let first = ticks_from;
                let mut k = 1u64;
                let counts = || (0..plan.jobs.len()).filter_map(|i| progress_ref.count(i));
                counts().for_each(|c| c.mark_at(first + STEADY_TICK_NS));
                while !progress_ref.stop.load(Ordering::Acquire) {
                    let due = first + k * STEADY_TICK_NS;
                    let now = clock.now().0;
                    if now < due {
                        std::thread::sleep(Duration::from_nanos((due - now).min(20_000_000)));
                        continue;
                    }
                    let samples: Vec<_> = counts().map(|c| c.steady_sample(due)).collect();
                    counts().for_each(|c| c.mark_at(due + STEADY_TICK_NS));
                    // Judged at the tick's own time: a thread woken late (a loaded machine)
                    // must not count a job's ramp as over a tick early.
                    for j in m.tick(due, &samples) {
                        if let Some(c) = progress_ref.count(j) {
                            c.steady_stop.store(true, Ordering::Release);
                        }
                    }
                    k += 1;
                }
                m
            })
        });
        // The interrupt reaches the jobs through their stop flag. Jobs still running
        // `STUCK_AFTER` later wait for something a stop cannot end (a request that does
        // not complete): the queue's state goes to stderr once, to say where it is; a
        // second signal ends the process.
        let queue = &queue;
        scope.spawn(move || {
            let mut stopped_at = None;
            loop {
                match stopped_at {
                    None if progress_ref.stop.load(Ordering::Acquire) => break,
                    None if plan.interrupt.load(Ordering::Relaxed) => {
                        progress_ref.stop.store(true, Ordering::Release);
                        stopped_at = Some(Instant::now());
                    }
                    Some(_) if progress_ref.unfinished() == 0 => break,
                    Some(t) if t.elapsed() >= STUCK_AFTER => {
                        let left = progress_ref.unfinished();
                        eprintln!(
                            "mqblk: {left} of {} jobs still running {} s after the interrupt (a second one exits at once); the queue:\n{}",
                            plan.jobs.len(),
                            STUCK_AFTER.as_secs(),
                            queue.debug_state()
                        );
                        break;
                    }
                    _ => {}
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let mut results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("a job thread panicked"))
            .collect();
        let wall = t0.elapsed();
        let cpu = process_cpu_time().since(cpu0);
        progress.stop.store(true, Ordering::Release);
        if let Some(t) = ticker {
            let _ = t.join();
        }
        if let Some(Ok(m)) = steady.map(|t| t.join()) {
            for (i, (sink, _)) in results.iter_mut().enumerate() {
                sink.stats.steadystate = m.report(i);
            }
        }
        (results, wall, cpu)
    });
    Ok(Execution {
        queue,
        device,
        results,
        wall,
        cpu,
        started_ms,
    })
}

/// The live one-line display: IOPS and bandwidth over the last second, and time left.
fn progress_line(progress: &Progress, plan: &Plan, t0: Instant) {
    let total = plan
        .jobs
        .iter()
        .filter_map(|j| j.job.runtime_ns.map(|r| r + j.job.ramp_ns))
        .max();
    let (mut last_ios, mut last_bytes, mut last_t) = (0u64, 0u64, t0);
    let mut shown = false;
    while !progress.stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(100));
        if last_t.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let (ios, bytes) = progress.totals();
        let dt = last_t.elapsed().as_secs_f64();
        let eta = total.map(|t| (t as f64 / 1e9 - t0.elapsed().as_secs_f64()).max(0.0));
        eprint!(
            "\r[{} jobs] {} IOPS, {}  elapsed {:.0}s{}   ",
            plan.jobs.len(),
            mqblk_workload::format_count(((ios - last_ios) as f64 / dt) as u64),
            mqblk_workload::format_rate(((bytes - last_bytes) as f64 / dt) as u64),
            t0.elapsed().as_secs_f64(),
            eta.map(|e| format!(", eta {e:.0}s")).unwrap_or_default()
        );
        shown = true;
        (last_ios, last_bytes, last_t) = (ios, bytes, Instant::now());
    }
    if shown {
        eprint!("\r{:78}\r", "");
    }
}
