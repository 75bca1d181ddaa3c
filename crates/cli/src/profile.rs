//! `mqblk profile`: measures a device for the simulator. Each measurement is a short fio
//! job run through `mqblk bench` (io_uring, O_DIRECT, no scheduler in mqblk) on a file or
//! block device, through fio itself with `--fio=BIN` (the kernel's path, which is what
//! `mqblk twin --sim` predicts), or through `mqblk sim` on a device model
//! (`--device=MODEL`: the fitted model's own check); the figures and the queue's shape
//! from sysfs go to a TOML profile ([`mqblk_models::profile::Profile`]) that
//! `--device=profile:FILE.toml` fits a model to.

use crate::args::ProfileArgs;
use crate::CliError;
use mqblk_models::profile::{Measure, Profile, FLOOD_WRITES, FLOOD_WRITE_BYTES};
use mqblk_runtime::{children_cpu_time, machine_busy_ns, process_cpu_time};
use std::path::Path;
use std::time::Instant;

/// One measurement: its name, what it is, and its jobs (the first is the one measured).
struct Phase {
    name: &'static str,
    what: &'static str,
    op: &'static str,
    pattern: &'static str,
    bs: u64,
    iodepth: u32,
    /// Jobs side by side, each at `iodepth` (fio's `numjobs`).
    jobs: u32,
    /// Options of the measured job beyond rw, bs and iodepth.
    extra: &'static str,
    /// The write flood of the interference measurement beside it
    /// ([`mqblk_models::profile::FLOOD_WRITE_BYTES`], [`mqblk_models::profile::FLOOD_WRITES`]
    /// in flight), which the fit replays on the model.
    flood: bool,
    writes: bool,
}

const fn phase(
    name: &'static str,
    what: &'static str,
    op: &'static str,
    pattern: &'static str,
    bs: u64,
    iodepth: u32,
) -> Phase {
    Phase {
        name,
        what,
        op,
        pattern,
        bs,
        iodepth,
        jobs: 1,
        extra: "",
        flood: false,
        writes: false,
    }
}

/// The measurements, in the order they run: reads first (a block device is only read
/// unless `--write-ok`), then writes.
fn phases() -> Vec<Phase> {
    let mut v = vec![
        phase(
            "randread_4k_qd1",
            "random reads of 4 KiB, one at a time",
            "read",
            "random",
            4096,
            1,
        ),
        phase(
            "randread_128k_qd1",
            "random reads of 128 KiB, one at a time",
            "read",
            "random",
            128 << 10,
            1,
        ),
        phase(
            "read_128k_qd1",
            "sequential reads of 128 KiB, one at a time",
            "read",
            "sequential",
            128 << 10,
            1,
        ),
        // Two and four in flight from as many jobs at one each: one job's own time between
        // its I/Os can hold a device that is served by the host's CPUs (a loop device)
        // below what it serves with that many in flight.
        Phase {
            jobs: 2,
            ..phase(
                "randread_4k_qd1_jobs2",
                "random reads of 4 KiB, one at a time from each of 2 jobs",
                "read",
                "random",
                4096,
                1,
            )
        },
        Phase {
            jobs: 4,
            ..phase(
                "randread_4k_qd1_jobs4",
                "random reads of 4 KiB, one at a time from each of 4 jobs",
                "read",
                "random",
                4096,
                1,
            )
        },
        phase(
            "randread_4k_qd8",
            "random reads of 4 KiB, 8 in flight",
            "read",
            "random",
            4096,
            8,
        ),
        phase(
            "randread_4k_qd16",
            "random reads of 4 KiB, 16 in flight",
            "read",
            "random",
            4096,
            16,
        ),
        phase(
            "randread_4k_qd64",
            "random reads of 4 KiB, 64 in flight",
            "read",
            "random",
            4096,
            64,
        ),
        // As many in flight from four jobs at 16 each: where one submitter holds the
        // device below what several get from it (this machine's virtio disk: 4 x 16 gave
        // 1.03-1.96 times 1 x 64 in six alternating pairs), the fit takes the faster.
        Phase {
            jobs: 4,
            ..phase(
                "randread_4k_qd16_jobs4",
                "random reads of 4 KiB, 16 in flight from each of 4 jobs",
                "read",
                "random",
                4096,
                16,
            )
        },
        phase(
            "read_1m_qd16",
            "sequential reads of 1 MiB, 16 in flight: the read ceiling",
            "read",
            "sequential",
            1 << 20,
            16,
        ),
        phase(
            "randwrite_4k_qd1",
            "random writes of 4 KiB, one at a time",
            "write",
            "random",
            4096,
            1,
        ),
        phase(
            "randwrite_128k_qd1",
            "random writes of 128 KiB, one at a time",
            "write",
            "random",
            128 << 10,
            1,
        ),
        phase(
            "write_128k_qd1",
            "sequential writes of 128 KiB, one at a time",
            "write",
            "sequential",
            128 << 10,
            1,
        ),
        phase(
            "write_1m_qd16",
            "sequential writes of 1 MiB, 16 in flight: the write ceiling",
            "write",
            "sequential",
            1 << 20,
            16,
        ),
        // O_DSYNC: each write carries FUA; a device without FUA gets the write and a
        // flush after it (blk-flush.c), as a database log's writes reach it.
        Phase {
            extra: "sync=dsync\n",
            ..phase(
                "randwrite_4k_qd1_dsync",
                "random writes of 4 KiB, one at a time, O_DSYNC (FUA; without it, the write and a flush)",
                "write",
                "random",
                4096,
                1,
            )
        },
        // Where the device has FUA, the dsync writes above flush nothing: the flush is
        // measured by `fsync` after each write (only there: the syscall's own path is in it).
        Phase {
            extra: "fsync=1\n",
            ..phase(
                "randwrite_4k_qd1_fsync",
                "random writes of 4 KiB, one at a time, each followed by fsync (a flush)",
                "write",
                "random",
                4096,
                1,
            )
        },
        Phase {
            flood: true,
            ..phase(
                "randread_4k_qd1_under_writes",
                "random reads of 4 KiB, one at a time, beside sequential 1 MiB writes 4 in flight",
                "read",
                "random",
                4096,
                1,
            )
        },
    ];
    for p in &mut v {
        p.writes = p.op == "write" || p.flood;
    }
    v
}

impl Phase {
    fn rw(&self) -> &'static str {
        match (self.op, self.pattern) {
            ("read", "random") => "randread",
            ("read", _) => "read",
            ("write", "random") => "randwrite",
            _ => "write",
        }
    }

    /// Runs the measurement is split into: [`RUNS`] one after another (fio's `stonewall`),
    /// each a third of its time, unless a job runs beside it.
    fn runs(&self) -> usize {
        if self.flood {
            1
        } else {
            RUNS
        }
    }

    /// The job file: `device` options in `[global]`, the measured job first, in
    /// [`Phase::runs`] sections of the same name.
    /// `ioscheduler=none` is mqblk's (no scheduler in its stack); fio's would switch the
    /// disk's own, so it is left out for fio.
    fn job_text(&self, device: &str, seconds: f64, fio: bool) -> String {
        let runs = self.runs();
        let mut s = global_section(device, seconds / runs as f64, fio);
        // Several jobs at once are reported as one (fio's `group_reporting`; each run is
        // its own group by its `stonewall`): rates summed, latencies over all their I/Os.
        let numjobs = if self.jobs > 1 {
            s.push_str("group_reporting\n");
            format!("numjobs={}\n", self.jobs)
        } else {
            String::new()
        };
        for r in 0..runs {
            s.push_str(&format!(
                "\n[{}]\n{}rw={}\nbs={}\niodepth={}\n{numjobs}{}",
                self.name,
                if r > 0 { "stonewall\n" } else { "" },
                self.rw(),
                self.bs,
                self.iodepth,
                self.extra
            ));
        }
        if self.flood {
            s.push_str(&format!(
                "\n[beside]\nrw=write\nbs={FLOOD_WRITE_BYTES}\niodepth={FLOOD_WRITES}\n"
            ));
        }
        s
    }
}

/// The `[global]` section every measurement's job file starts with: the device, no
/// scheduler in mqblk (fio's runs leave the kernel's as it is), and `seconds` of run.
fn global_section(device: &str, seconds: f64, fio: bool) -> String {
    let sched = if fio { "" } else { "ioscheduler=none\n" };
    format!(
        "[global]\n{device}{sched}time_based\nruntime={}ms\n",
        (seconds * 1000.0).round() as u64
    )
}

/// `mqblk profile`.
pub fn main(a: ProfileArgs) -> i32 {
    match run(&a) {
        Ok(()) => 0,
        Err(e) => {
            crate::args::print_error("profile", &e);
            2
        }
    }
}

/// The queue's shape: sysfs of the disk under a real path, or the model's own.
struct Shape {
    disk: String,
    rotational: bool,
    write_cache: bool,
    fua: bool,
    nr_hw_queues: u32,
    nr_tags: u32,
    max_sectors_kb: u32,
    max_segments: u32,
    max_segment_size: u32,
    virtqueue_size: u32,
    /// A loop device's backing file (empty: not one).
    backing_file: String,
}

fn shape_of_path(path: &Path) -> Result<(Shape, Option<String>, bool), CliError> {
    use mqblk_drivers::sysfs;
    let m = std::fs::metadata(path).map_err(|e| CliError::io(path.display().to_string(), e))?;
    let block = std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type());
    let dir =
        sysfs::disk_dir_of_path(path).map_err(|e| CliError::io(path.display().to_string(), e))?;
    let q = sysfs::QueueShape::of_dir(&dir);
    let scheduler = sysfs::schedulers(&dir).ok().map(|(_, current)| current);
    if let (Some(d), Some(t)) = (sysfs::driver_tag_depth(&q.disk), q.nr_tags) {
        if d < t {
            eprintln!(
                "profile: warning: {} hands out {d} of its {t} driver tags (nr_requests once set under none, kept by the kernel across scheduler switches); the profile measures that (`mqblk twin` gives them back)",
                q.disk
            );
        }
    }
    Ok((
        Shape {
            disk: q.disk.clone(),
            rotational: q.rotational.unwrap_or(false),
            write_cache: q.write_cache.unwrap_or(false),
            fua: q.fua.unwrap_or(false),
            nr_hw_queues: q.nr_hw_queues.max(1),
            nr_tags: q.nr_tags.unwrap_or(64),
            max_sectors_kb: q.max_sectors_kb.unwrap_or(0),
            max_segments: q.max_segments.unwrap_or(0),
            max_segment_size: q.max_segment_size.unwrap_or(0),
            virtqueue_size: q.virtqueue_size.unwrap_or(0),
            backing_file: q.backing_file.clone().unwrap_or_default(),
        },
        scheduler,
        block,
    ))
}

/// A model's shape and capacity in bytes.
fn shape_of_model(spec: &str) -> Result<(Shape, u64), CliError> {
    let s = mqblk_models::DeviceSpec::parse(spec)?;
    let m = mqblk_models::build(&s, mqblk_models::SimRng::new(0))?;
    let lim = m.queue_limits();
    let shape = Shape {
        disk: spec.to_string(),
        rotational: m.rotational(),
        write_cache: m.write_cache(),
        fua: m.fua(),
        nr_hw_queues: m.nr_hw_queues() as u32,
        nr_tags: m.queue_depth(),
        max_sectors_kb: lim.max_sectors / 2,
        max_segments: lim.max_segments as u32,
        max_segment_size: lim.max_segment_size,
        virtqueue_size: m.ring_descriptors().unwrap_or(0),
        backing_file: String::new(),
    };
    Ok((shape, m.capacity_sectors() * 512))
}

/// A measurement with nothing beside it runs this many times, a third of its time each:
/// its 99th percentile is their median. One run's tail on a disk shared with other guests
/// is not the disk's (this machine's, profiled five times in single runs: 1.4-2.8 times
/// the mean at 16 reads in flight; 1.4-1.7 in the twin suite's own runs).
const RUNS: usize = 3;

/// What a phase's runs gave, from fio's JSON: rates and the mean over the runs (the mean
/// latency weighted by each run's I/Os), the median of their 99th percentiles. A run of
/// several jobs is one entry of the report ([`Phase::job_text`]).
fn measured(p: &Phase, json: &str) -> Result<Measure, CliError> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("internal: {}'s report: {e}", p.name))?;
    let f = |x: &serde_json::Value| x.as_f64().unwrap_or(0.0);
    let runs: Vec<&serde_json::Value> = v["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|j| j["jobname"] == p.name)
        .map(|j| &j[p.op])
        .collect();
    if runs.len() != p.runs() {
        return Err(format!(
            "internal: {}'s report has {} runs of it, not {}",
            p.name,
            runs.len(),
            p.runs()
        )
        .into());
    }
    let n = runs.len() as f64;
    let ios: f64 = runs.iter().map(|d| f(&d["total_ios"])).sum();
    let mean_ns = if ios > 0.0 {
        runs.iter()
            .map(|d| f(&d["clat_ns"]["mean"]) * f(&d["total_ios"]))
            .sum::<f64>()
            / ios
    } else {
        runs.iter().map(|d| f(&d["clat_ns"]["mean"])).sum::<f64>() / n
    };
    let p99: Vec<f64> = runs
        .iter()
        .map(|d| f(&d["clat_ns"]["percentile"]["99.000000"]) / 1e3)
        .collect();
    let p99_us = mqblk_twin::spread(&p99).map_or(0.0, |s| s.median);
    let p99_runs = if p99.len() > 1 { p99 } else { Vec::new() };
    Ok(Measure {
        name: p.name.to_string(),
        what: p.what.to_string(),
        op: p.op.to_string(),
        pattern: p.pattern.to_string(),
        bs: p.bs,
        iodepth: p.iodepth,
        jobs: p.jobs,
        iops: runs.iter().map(|d| f(&d["iops"])).sum::<f64>() / n,
        mbs: runs.iter().map(|d| f(&d["bw_bytes"])).sum::<f64>() / n / 1e6,
        mean_us: mean_ns / 1e3,
        p99_us,
        p99_runs,
    })
}

/// One phase through fio: its JSON report, or fio's own complaint in one line.
fn run_fio(fio: &Path, args: &[String]) -> Result<String, CliError> {
    let out = std::process::Command::new(fio)
        .args(args)
        .output()
        .map_err(|e| CliError::io(fio.display().to_string(), e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let why = match err.lines().find(|l| !l.trim().is_empty()) {
            Some(line) => format!("{}: {line}", out.status),
            None => out.status.to_string(),
        };
        return Err(format!("{}: {why}", fio.display()).into());
    }
    String::from_utf8(out.stdout)
        .map_err(|_| format!("{}: a report that is not UTF-8", fio.display()).into())
}

/// What `fio --version` says (`fio-3.33`), the profile's engine; asked before anything
/// runs, so a binary that is not fio is refused at once.
fn fio_version(fio: &Path) -> Result<String, CliError> {
    let out = std::process::Command::new(fio)
        .arg("--version")
        .output()
        .map_err(|e| CliError::io(fio.display().to_string(), e))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !version.starts_with("fio-") {
        return Err(format!(
            "{}: not fio (`{0} --version` said {version:?}, {})",
            fio.display(),
            out.status
        )
        .into());
    }
    Ok(version)
}

fn run(a: &ProfileArgs) -> Result<(), CliError> {
    if a.fit.is_none() && a.output_format.is_some() {
        return Err("--output-format is for --fit=PROFILE; a measured profile is TOML".into());
    }
    if let Some(path) = &a.fit {
        let name = path.display().to_string();
        let fit = Profile::read(&name)
            .and_then(|p| p.fit(&name))
            .map_err(|e| e.to_string())?;
        if a.output_format.as_deref() == Some("json") {
            let text = serde_json::to_string_pretty(&fit).map_err(|e| format!("internal: {e}"))?;
            println!("{text}");
        } else {
            print!("{}", fit.describe());
        }
        return Ok(());
    }
    let seconds = if a.quick { 1.5 } else { 6.5 };
    let tmp = std::env::temp_dir().join(format!("mqblk-profile-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| CliError::io(tmp.display().to_string(), e))?;
    let result = measure(a, seconds, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    let profile = result?;
    let text = profile.to_toml();
    // The file must read back as a profile a model can be fitted to.
    Profile::parse("the profile", &text).map_err(|e| format!("internal: {e}"))?;
    match &a.output {
        Some(out) => {
            std::fs::write(out, &text).map_err(|e| CliError::io(out.display().to_string(), e))?;
            eprintln!("profile: written to {}", out.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

fn measure(a: &ProfileArgs, seconds: f64, tmp: &Path) -> Result<Profile, CliError> {
    let engine = match &a.fio {
        Some(fio) => fio_version(fio)?,
        None => mqblk_models::profile::BENCH_ENGINE.to_string(),
    };
    let (shape, device, path, writes, size) = match (&a.filename, &a.device) {
        (Some(_), Some(_)) => {
            return Err(
                "give --filename=PATH (a real device) or --device=MODEL (a model), not both".into(),
            )
        }
        (None, None) => return Err("--filename=PATH (or --device=MODEL) is needed".into()),
        (Some(f), None) => {
            let exists = f.exists();
            let size = match (a.size, exists) {
                (Some(s), _) => s,
                (None, true) => {
                    use std::io::{Seek, SeekFrom};
                    std::fs::File::open(f)
                        .and_then(|mut h| h.seek(SeekFrom::End(0)))
                        .map_err(|e| CliError::io(f.display().to_string(), e))?
                }
                (None, false) => {
                    return Err(format!(
                        "{}: does not exist; give --size=SIZE to create it",
                        f.display()
                    )
                    .into())
                }
            };
            if size < (64 << 20) {
                return Err(format!(
                    "{}: {size} bytes; profiling needs at least 64 MiB",
                    f.display()
                )
                .into());
            }
            // A file is made (or checked) where its parent is; the shape is its disk's.
            let probe = match f.parent() {
                _ if exists => f.clone(),
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => ".".into(),
            };
            let (shape, sched, block) = shape_of_path(&probe)?;
            if let Some(s) = sched.filter(|s| s != "none") {
                eprintln!(
                    "profile: the kernel's scheduler on {} is {s}; its cost is in the figures (set it to none to measure the device alone)",
                    shape.disk
                );
            }
            let writes = !block || a.write_ok;
            if block && !a.write_ok {
                eprintln!("profile: {} is a block device: reads only (--write-ok to measure writes too; they overwrite its first {size} bytes)", f.display());
            }
            let device = format!(
                "ioengine=io_uring\ndirect=1\nfilename={}\nsize={size}\n",
                f.display()
            );
            (shape, device, f.display().to_string(), writes, size)
        }
        (None, Some(m)) => {
            let (shape, capacity) = shape_of_model(m)?;
            let size = a.size.unwrap_or((4u64 << 30).min(capacity));
            let device = format!("device={m}\nsize={size}\n");
            (shape, device, format!("model {m}"), true, size)
        }
    };
    let phases: Vec<Phase> = phases()
        .into_iter()
        .filter(|p| writes || !p.writes)
        .filter(|p| shape.fua || p.name != "randwrite_4k_qd1_fsync")
        .collect();
    let started = Instant::now();
    let mut measures = Vec::new();
    let mut completion_cpus = Vec::new();
    let (mut outside_cpu_ns, mut outside_cpu_deep_ns) = (0.0, 0.0);
    let (mut generator_cpu_ns, mut generator_cpu_deep_ns) = (0.0, 0.0);
    for (i, p) in phases.iter().enumerate() {
        // Where the device's completions run, and the CPU time they take outside the load
        // generator, counted over the one-job random reads one at a time; that time again
        // 64 at a time.
        let real = a.filename.is_some();
        let counted = real && p.name == "randread_4k_qd1";
        let deep = real && p.name == "randread_4k_qd64";
        let before = counted.then(block_softirqs).flatten();
        let cpu_before =
            (counted || deep).then(|| (machine_busy_ns(), generator_cpu_time_ns(a.fio.is_some())));
        let job = tmp.join(format!("{}.fio", p.name));
        std::fs::write(&job, p.job_text(&device, seconds, a.fio.is_some()))
            .map_err(|e| CliError::io(job.display().to_string(), e))?;
        let args = vec![
            job.display().to_string(),
            "--output-format=json".to_string(),
        ];
        let json = if a.device.is_some() {
            crate::sim::simulate_args(&args)?.out
        } else if let Some(fio) = &a.fio {
            run_fio(fio, &args)?
        } else {
            crate::bench::bench_args(&args)?.out
        };
        let m = measured(p, &json)?;
        if let (Some(b), Some(e)) = (before, block_softirqs()) {
            completion_cpus = completion_shares(&b, &e, m.iops * seconds);
        }
        if let Some((Some(busy), generator)) = cpu_before {
            if let Some(busy_after) = machine_busy_ns() {
                let ios = (m.iops * seconds).max(1.0);
                let own = generator_cpu_time_ns(a.fio.is_some()).saturating_sub(generator) as f64;
                let outside = busy_after.saturating_sub(busy) as f64 - own;
                let (outside, own) = ((outside / ios).max(0.0), own / ios);
                if deep {
                    (outside_cpu_deep_ns, generator_cpu_deep_ns) = (outside, own);
                } else {
                    (outside_cpu_ns, generator_cpu_ns) = (outside, own);
                }
            }
        }
        eprintln!(
            "profile: [{}/{}] {}: {:.0} IOPS, {:.1} MB/s, {:.1} us mean, {:.1} us p99 ({:.0} s)",
            i + 1,
            phases.len(),
            p.what,
            m.iops,
            m.mbs,
            m.mean_us,
            m.p99_us,
            started.elapsed().as_secs_f64()
        );
        measures.push(m);
    }
    let held_completions = held_probe(a, &device, &shape.disk, &measures, tmp);
    if let Some(h) = held_completions {
        eprintln!(
            "profile: [held] {:.0}% of staggered reads completed together ({} s)",
            100.0 * h,
            started.elapsed().as_secs_f64().round()
        );
    }
    Ok(Profile {
        path,
        engine,
        disk: shape.disk,
        size_bytes: size,
        phase_s: seconds,
        writes,
        rotational: shape.rotational,
        write_cache: shape.write_cache,
        fua: shape.fua,
        nr_hw_queues: shape.nr_hw_queues,
        nr_tags: shape.nr_tags,
        max_sectors_kb: shape.max_sectors_kb,
        max_segments: shape.max_segments,
        max_segment_size: shape.max_segment_size,
        virtqueue_size: shape.virtqueue_size,
        backing_file: shape.backing_file,
        completion_cpus,
        outside_cpu_ns,
        outside_cpu_deep_ns,
        generator_cpu_ns,
        generator_cpu_deep_ns,
        held_completions,
        measure: measures,
    })
}

/// How long the held-completions probe runs, s.
const HELD_PROBE_S: f64 = 1.0;

/// Whether the device holds completions back ([`Profile::held_completions`]): one job
/// reading one random 4 KiB block at a time, so that the device always has a read on it,
/// and beside it a second job's reads arriving at random (`rate_process=poisson`) at a
/// third of the rate one at a time reached, each landing at a random point of the first
/// job's read; traced through the kernel's block tracepoints (a real device: `mqblk trace
/// capture`'s way, which needs root and tracefs) or the simulator's own trace (a model).
/// `None`, with a line saying why, where it cannot be measured.
fn held_probe(
    a: &ProfileArgs,
    device: &str,
    disk: &str,
    measures: &[Measure],
    tmp: &Path,
) -> Option<f64> {
    let alone = measures.iter().find(|m| m.name == "randread_4k_qd1")?;
    let rate = (alone.iops / 3.0).round().max(1.0);
    let job = tmp.join("held.fio");
    let text = format!(
        "{}rw=randread\nbs=4k\niodepth=1\n\n[busy]\n\n[arriving]\nrate_iops={rate}\nrate_process=poisson\n",
        global_section(device, HELD_PROBE_S, a.fio.is_some())
    );
    let trace = tmp.join("held");
    let mut args = vec![
        job.display().to_string(),
        "--output-format=json".to_string(),
    ];
    let result = std::fs::write(&job, text)
        .map_err(|e| CliError::io(job.display().to_string(), e))
        .and_then(|()| {
            if a.device.is_some() {
                args.push(format!("--trace={}", trace.display()));
                crate::sim::simulate_args(&args).map(|_| ())
            } else {
                traced(Path::new(&format!("/dev/{disk}")), &trace, || {
                    match &a.fio {
                        Some(fio) => run_fio(fio, &args).map(|_| ()),
                        None => crate::bench::bench_args(&args).map(|_| ()),
                    }
                })
            }
        })
        .and_then(|()| {
            mqblk_trace::TraceSet::open(&trace).map_err(|e| CliError::from(e.to_string()))
        });
    let set = match result {
        Ok(set) => set,
        Err(e) => {
            eprintln!("profile: completions held back or not: not measured ({e})");
            return None;
        }
    };
    let stats = mqblk_trace::stats::device_stats(&set.records);
    let held = stats.iter().max_by_key(|d| d.issued)?;
    if held.held.is_none() {
        eprintln!(
            "profile: completions held back or not: not measured ({} reads still on the device when another came 30 us or more later; {} needed)",
            held.held_pairs,
            mqblk_trace::stats::HELD_MIN_PAIRS
        );
    }
    held.held
}

/// Runs `work` while the kernel's block events of `dev` are captured to `out`.
fn traced(
    dev: &Path,
    out: &Path,
    work: impl FnOnce() -> Result<(), CliError>,
) -> Result<(), CliError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let capture = s.spawn(|| mqblk_trace::capture::capture(dev, None, out, &stop));
        // Time for the capture to set up its tracefs instance before the work starts.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let worked = if capture.is_finished() {
            Ok(())
        } else {
            work()
        };
        stop.store(true, Ordering::Relaxed);
        let captured = capture
            .join()
            .map_err(|_| CliError::from("the capture thread panicked".to_string()))?
            .map_err(|e| CliError::from(e.to_string()))?;
        worked?;
        if captured.lost > 0 {
            return Err(format!("the capture lost {} events", captured.lost).into());
        }
        Ok(())
    })
}

/// The load generator's user and system CPU time so far, in ns: fio's, the children run to
/// their end, or this process's own when `mqblk bench` runs in it.
fn generator_cpu_time_ns(fio: bool) -> u64 {
    if fio {
        children_cpu_time().total_ns()
    } else {
        process_cpu_time().total_ns()
    }
}

/// Each CPU's count of block completion softirqs (the `BLOCK:` row of `/proc/softirqs`),
/// if it can be read. A single-queue disk's completions go through it on the CPU that took
/// the interrupt (`blk_mq_complete_request_remote`: `blk_mq_raise_softirq` when
/// `nr_hw_queues == 1`), unless its one hardware queue maps one CPU only and completes on
/// it, or the CPUs share no cache and the completion is sent to the submitter's instead
/// (`blk_mq_complete_need_ipi`, where the softirq runs too).
fn block_softirqs() -> Option<Vec<u64>> {
    let text = std::fs::read_to_string("/proc/softirqs").ok()?;
    softirq_row(&text, "BLOCK")
}

/// The counts of softirq `name` in the text of `/proc/softirqs`.
fn softirq_row(text: &str, name: &str) -> Option<Vec<u64>> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{name}:")))?;
    let (_, counts) = line.split_once(':')?;
    counts.split_whitespace().map(|c| c.parse().ok()).collect()
}

/// Each CPU's share of the block completions counted between `before` and `after`, given
/// the I/Os the measurement completed; empty where fewer than half of them went through
/// the block softirq (the device completes them where its interrupts are, uncounted).
fn completion_shares(before: &[u64], after: &[u64], ios: f64) -> Vec<f64> {
    let deltas: Vec<u64> = after
        .iter()
        .zip(before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let total: u64 = deltas.iter().sum();
    if before.len() != after.len() || total == 0 || (total as f64) < ios / 2.0 {
        return Vec::new();
    }
    deltas.iter().map(|&d| d as f64 / total as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFTIRQS: &str = "                    CPU0       CPU1
          HI:          1          0
       TIMER:    1234567    2345678
      NET_RX:         10         20
       BLOCK:   69325095   93766321
    IRQ_POLL:          0          0
";

    #[test]
    fn the_block_row_is_read_per_cpu() {
        assert_eq!(
            softirq_row(SOFTIRQS, "BLOCK"),
            Some(vec![69325095, 93766321])
        );
        assert_eq!(softirq_row(SOFTIRQS, "TASKLET"), None);
        assert_eq!(softirq_row("       BLOCK:   12   x\n", "BLOCK"), None);
    }

    #[test]
    fn completions_are_shared_by_cpu_only_when_most_went_through_the_softirq() {
        // 1000 I/Os, all completed on CPU 1 (a single-queue disk's interrupt there).
        assert_eq!(
            completion_shares(&[100, 200], &[100, 1200], 1000.0),
            vec![0.0, 1.0]
        );
        assert_eq!(
            completion_shares(&[0, 0], &[300, 900], 1000.0),
            vec![0.25, 0.75]
        );
        // A few hundred of 10,000: another device's, not this one's.
        assert!(completion_shares(&[0, 0], &[100, 200], 10_000.0).is_empty());
        assert!(completion_shares(&[0], &[10, 20], 20.0).is_empty());
    }
}
