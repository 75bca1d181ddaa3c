//! The twin harness behind `mqblk twin`: one fio job file on a real block device, through the kernel's schedulers
//! (set in `/sys/block/DISK/queue/scheduler`, run with fio) and through mqblk's schedulers of
//! the same names over io_uring (the kernel's set to `none`), repeated and alternated; each
//! scheduler's effect over `none` in both stacks, side by side.
//!
//! An effect is a metric under a scheduler divided by the same metric under `none`, in the
//! same stack and the same repeat; the report gives its median and range over the repeats.
//! The device's scheduler and its `iosched/` tunables are put back on every exit path: a
//! guard restores them when the run ends, fails or is interrupted (SIGINT/SIGTERM stop the
//! child and end the run).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod resim;
mod suite;
pub use resim::{resim, ResimOptions};
pub use suite::{Suite, MANIFEST, MAX_REPEATS};

/// What a twin invocation runs: `mqblk twin`'s options.
#[derive(Clone, Debug)]
pub struct TwinOptions {
    /// One job file (or `suite`).
    pub jobfile: Option<PathBuf>,
    /// A suite directory with its `suite.toml`.
    pub suite: Option<PathBuf>,
    /// The file or block device both stacks run on.
    pub filename: PathBuf,
    /// The schedulers to compare with `none` (default: mq-deadline, kyber, bfq).
    pub schedulers: Option<Vec<String>>,
    /// Repeats of the whole round.
    pub repeats: u32,
    /// `SCHED:NAME=VALUE` tunables for one scheduler in both stacks.
    pub tunables: Vec<String>,
    /// The fio binary.
    pub fio: String,
    /// Add the simulator's prediction: the jobs in `mqblk sim` on a model fitted to the
    /// disk's profile (set it with `profile` too).
    pub sim: bool,
    /// The profile to fit (`None` with `sim`: one is made first, with the kernel at none).
    pub profile: Option<PathBuf>,
    /// The kernel's scheduler costs the simulator charges (`scripts/kernel-cost.sh --json`
    /// files; none: the built-in ones).
    pub kernel_costs: Vec<PathBuf>,
    /// The mqblk binary (its `bench` runs the mqblk side).
    pub mqblk: PathBuf,
    /// How long one run (fio, mqblk bench or sim, the profile) may take before it is
    /// stopped and run once more ([`RUN_TIMEOUT`] unless set).
    pub run_timeout: Duration,
}

/// The default bound on one run of a twin: the suite's workloads run for seconds and a
/// profile for at most 3 minutes, so a run past 5 is stuck.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// Why a twin run did not give its report.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// SIGINT or SIGTERM arrived; the device's scheduler and tunables are restored.
    #[error("interrupted; the device's scheduler is restored")]
    Interrupted,
    /// Not root: the kernel's scheduler cannot be set.
    #[error("needs root, to set the kernel's scheduler in /sys/block/DEV/queue/scheduler")]
    NotRoot,
    /// A job file, scheduler, tunable or manifest refused, or a step (sysfs, a child
    /// process, its report) that failed: one line saying which.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for TwinError {
    fn from(e: String) -> TwinError {
        TwinError::Failed(e)
    }
}

/// What a twin run gives: one job file's report, or a suite's.
#[derive(Debug)]
pub enum Outcome {
    One(Report),
    Suite(Suite),
}

impl Outcome {
    /// The report as a table.
    pub fn table(&self) -> String {
        match self {
            Outcome::One(r) => table(r),
            Outcome::Suite(s) => s.table(),
        }
    }

    /// The report as JSON.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Outcome::One(r) => serde_json::json!(r),
            Outcome::Suite(s) => serde_json::json!(s),
        }
    }
}

/// The disk whose queue the kernel's side runs on.
#[derive(Clone, Debug)]
struct Disk {
    /// `/sys/dev/block/MAJ:MIN` of the disk (a partition's parent), resolved.
    sys: PathBuf,
}

impl Disk {
    /// The disk under `path`: the device itself, a partition's disk, or for a regular file
    /// the disk its file system is on.
    fn of(path: &Path) -> Result<Disk, String> {
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(format!(
                "{}: a directory, not a block device or a file",
                path.display()
            ));
        }
        let sys = mqblk_drivers::sysfs::disk_dir_of_path(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if !sys.join("queue/scheduler").exists() {
            return Err(format!(
                "{}: {} has no queue/scheduler",
                path.display(),
                sys.display()
            ));
        }
        Ok(Disk { sys })
    }

    fn name(&self) -> String {
        self.sys
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn scheduler_file(&self) -> PathBuf {
        self.sys.join("queue/scheduler")
    }

    /// The schedulers the kernel offers and the one in use (`[name]`).
    fn schedulers(&self) -> Result<(Vec<String>, String), String> {
        mqblk_drivers::sysfs::schedulers(&self.sys)
            .map_err(|e| format!("{}: {e}", self.scheduler_file().display()))
    }

    fn set_scheduler(&self, name: &str) -> Result<(), String> {
        let f = self.scheduler_file();
        std::fs::write(&f, name).map_err(|e| format!("{}: writing {name}: {e}", f.display()))
    }

    /// The current scheduler's tunables, as (name, value).
    fn tunables(&self) -> Vec<(String, String)> {
        let dir = self.sys.join("queue/iosched");
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut out: Vec<(String, String)> = rd
            .flatten()
            .filter_map(|e| {
                let v = std::fs::read_to_string(e.path()).ok()?;
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    v.trim().to_string(),
                ))
            })
            .collect();
        out.sort();
        out
    }

    /// The disk's queue as mqblk options, so mqblk's queue over it has the same shape: its
    /// hardware queues and driver tags per queue (`mq/N/nr_tags`). Its request bounds
    /// (`max_sectors_kb`, `max_segments`, `max_segment_size`) and a virtio ring without
    /// indirect descriptors the uring driver reads from sysfs itself
    /// (`UringDevice::queue_limits`, `virtqueue_size=auto`).
    fn queue_shape(&self) -> Vec<String> {
        let shape = mqblk_drivers::sysfs::QueueShape::of_dir(&self.sys);
        let mut out = Vec::new();
        if shape.nr_hw_queues > 0 {
            out.push(format!("--nr_hw_queues={}", shape.nr_hw_queues));
        }
        if let Some(t) = shape.nr_tags {
            out.push(format!("--queue_depth={t}"));
        }
        out
    }

    /// Sets `none` and gives the device all its driver tags
    /// ([`mqblk_drivers::sysfs::restore_driver_tags`]), as mqblk's queue over it gets
    /// (`--queue_depth=nr_tags`); says so when debugfs showed fewer in use.
    fn full_driver_tags(&self) -> Result<(), String> {
        self.set_scheduler("none")?;
        let before = mqblk_drivers::sysfs::driver_tag_depth(&self.name());
        let nr_tags = mqblk_drivers::sysfs::restore_driver_tags(&self.sys)
            .map_err(|e| format!("{}: giving it all its driver tags: {e}", self.name()))?;
        if let Some(d) = before.filter(|&d| d < nr_tags) {
            eprintln!(
                "twin: {} handed out {d} of its {nr_tags} driver tags (nr_requests set under none, which the kernel keeps across scheduler switches); set to {nr_tags}",
                self.name()
            );
        }
        Ok(())
    }

    fn set_tunable(&self, name: &str, value: &str) -> Result<(), String> {
        let f = self.sys.join("queue/iosched").join(name);
        std::fs::write(&f, value).map_err(|e| format!("{}: writing {value}: {e}", f.display()))
    }
}

/// Puts the disk's scheduler and its tunables back when dropped.
struct Restore {
    disk: Disk,
    scheduler: String,
    tunables: Vec<(String, String)>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        // Switching resets the tunables to their defaults; then the saved values go back.
        // `none` first, so the switch happens even when the original is already set.
        let _ = self.disk.set_scheduler("none");
        if let Err(e) = self.disk.set_scheduler(&self.scheduler) {
            eprintln!("mqblk twin: restoring the scheduler: {e}");
        }
        for (k, v) in &self.tunables {
            // Some attributes are read-only or refuse their own reading back; skip those.
            let _ = self.disk.set_tunable(k, v);
        }
    }
}

/// The kernel's side of the job file's `cgroup` / `cgroup_weight` pairs. fio cannot set a
/// weight BFQ reads (it writes `blkio.weight`, which only CFQ had), so twin makes each
/// cgroup itself with the weight in `blkio.bfq.weight` (cgroup v1) or `io.bfq.weight` (v2),
/// fio runs the job in it (`cgroup=`, kept with `cgroup_nodelete`) from a copy of the job
/// file without `cgroup_weight`, and the cgroups are removed when twin ends.
struct Cgroups {
    /// (directory, weight file, weight) per cgroup.
    groups: Vec<(PathBuf, &'static str, u32)>,
    /// The job file fio reads: the user's without `cgroup_weight` lines.
    fio_job: PathBuf,
}

impl Cgroups {
    /// `None` when no job sets a cgroup weight.
    fn of(jobfile: &Path) -> Result<Option<Cgroups>, String> {
        let specs = mqblk_workload::parse_job_file(jobfile).map_err(|e| e.to_string())?;
        let mut wanted: Vec<(String, u32)> = Vec::new();
        for s in &specs {
            if let (Some(cg), Some(w)) = (&s.cgroup, s.cgroup_weight) {
                if !wanted.iter().any(|(c, _)| c == cg) {
                    wanted.push((cg.trim_matches('/').to_string(), w));
                }
            }
        }
        if wanted.is_empty() {
            return Ok(None);
        }
        // fio puts a job into the blkio hierarchy (v1) if there is one, else the unified one.
        let (root, file) = if Path::new("/sys/fs/cgroup/blkio/cgroup.procs").exists() {
            (PathBuf::from("/sys/fs/cgroup/blkio"), "blkio.bfq.weight")
        } else if Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() {
            (PathBuf::from("/sys/fs/cgroup/unified"), "io.bfq.weight")
        } else {
            (PathBuf::from("/sys/fs/cgroup"), "io.bfq.weight")
        };
        let text =
            std::fs::read_to_string(jobfile).map_err(|e| format!("{}: {e}", jobfile.display()))?;
        let kept: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("cgroup_weight"))
            .map(|l| format!("{l}\n"))
            .collect();
        let fio_job = std::env::temp_dir().join(format!("mqblk-twin-{}.fio", std::process::id()));
        std::fs::write(&fio_job, kept).map_err(|e| format!("{}: {e}", fio_job.display()))?;
        Ok(Some(Cgroups {
            groups: wanted
                .into_iter()
                .map(|(c, w)| (root.join(c), file, w))
                .collect(),
            fio_job,
        }))
    }

    /// Makes each cgroup (again) with its weight, before a kernel run.
    fn prepare(&self) -> Result<(), String> {
        for (dir, file, w) in &self.groups {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let f = dir.join(file);
            std::fs::write(&f, w.to_string()).map_err(|e| {
                format!(
                    "{}: {e} (is BFQ's cgroup support, CONFIG_BFQ_GROUP_IOSCHED, there?)",
                    f.display()
                )
            })?;
        }
        Ok(())
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.fio_job);
        // Deepest first; a cgroup still holding a task stays (rmdir refuses it).
        for (dir, _, _) in self.groups.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A direction of I/O, as fio's report names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    Read,
    Write,
}

impl Dir {
    /// fio's name for it, its report's key.
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
        }
    }
}

impl std::fmt::Display for Dir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// One job's figures for one direction in one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Figures {
    job: String,
    dir: Dir,
    iops: f64,
    bw_kib: f64,
    clat_mean_us: f64,
    clat_p50_us: f64,
    clat_p99_us: f64,
}

const METRICS: [&str; 5] = [
    "iops",
    "bw_kib",
    "clat_mean_us",
    "clat_p50_us",
    "clat_p99_us",
];

impl Figures {
    fn metric(&self, m: &str) -> f64 {
        match m {
            "iops" => self.iops,
            "bw_kib" => self.bw_kib,
            "clat_mean_us" => self.clat_mean_us,
            "clat_p50_us" => self.clat_p50_us,
            _ => self.clat_p99_us,
        }
    }
}

/// The per-job figures of a fio-format JSON report (fio's own, or mqblk bench's).
fn figures(json: &[u8], who: &str) -> Result<Vec<Figures>, String> {
    let v: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| format!("{who}: its JSON output does not parse: {e}"))?;
    let jobs = v["jobs"]
        .as_array()
        .ok_or_else(|| format!("{who}: no jobs in its JSON output"))?;
    let mut out = Vec::new();
    for j in jobs {
        let name = j["jobname"].as_str().unwrap_or("?").to_string();
        for dir in [Dir::Read, Dir::Write] {
            let d = &j[dir.name()];
            if d["total_ios"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            let pct = |p: &str| d["clat_ns"]["percentile"][p].as_f64().unwrap_or(0.0) / 1000.0;
            out.push(Figures {
                job: name.clone(),
                dir,
                iops: d["iops"].as_f64().unwrap_or(0.0),
                bw_kib: d["bw"].as_f64().unwrap_or(0.0),
                clat_mean_us: d["clat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0,
                clat_p50_us: pct("50.000000"),
                clat_p99_us: pct("99.000000"),
            });
        }
    }
    if out.is_empty() {
        return Err(format!("{who}: the jobs did no I/O"));
    }
    Ok(out)
}

/// Which stack a run went through.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Stack {
    Kernel,
    Mqblk,
    /// The simulator on the disk's fitted model.
    Sim,
}

/// Whether `t` is a scheduler registered with mqblk at run time (`mqblk_sched::register`,
/// an out-of-tree one such as `examples/mqfq`'s), not one of the kernel's own that mqblk
/// rebuilds. The kernel has no twin of it: twin runs it through mqblk's stacks only, beside
/// the kernel's schedulers. A kernel scheduler the disk does not offer is refused instead (a
/// module not loaded, most likely).
fn is_mqblk_own(t: &mqblk_sched::ElevatorType) -> bool {
    !mqblk_sched::REGISTRY.iter().any(|b| b.name == t.name)
}

/// A scheduler's tunables for this run, by scheduler name.
fn tunables_for<'a>(
    t: &'a [(String, String, String)],
    sched: &str,
) -> Vec<&'a (String, String, String)> {
    t.iter().filter(|(s, _, _)| s == sched).collect()
}

fn parse_tunables(raw: &[String]) -> Result<Vec<(String, String, String)>, String> {
    raw.iter()
        .map(|t| {
            let (sched, kv) = t
                .split_once(':')
                .ok_or_else(|| format!("--sched={t}: expected SCHED:NAME=VALUE"))?;
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--sched={t}: expected SCHED:NAME=VALUE"))?;
            Ok((sched.to_string(), k.to_string(), v.to_string()))
        })
        .collect()
}

/// Runs the command `make` builds to its end, or kills it when `stop` is raised. A run
/// still going after `timeout` is stopped (SIGTERM, which ends fio's and mqblk's jobs and
/// lets them report, then SIGKILL 10 s later, or `timeout` if shorter) and made and run
/// once more, said on stderr; a second one that outlasts it fails the twin with a line
/// naming it.
fn run_child(
    mut make: impl FnMut() -> Result<Command, TwinError>,
    who: &str,
    stop: &AtomicBool,
    timeout: Duration,
) -> Result<Vec<u8>, TwinError> {
    match run_child_once(make()?, who, stop, timeout)? {
        Some(out) => Ok(out),
        None => {
            eprintln!(
                "twin: {who} still running after {} s: stopped; running it once more",
                timeout.as_secs()
            );
            run_child_once(make()?, who, stop, timeout)?.ok_or_else(|| {
                format!(
                    "{who} still running after {} s, twice (--run-timeout): stopped",
                    timeout.as_secs()
                )
                .into()
            })
        }
    }
}

/// Prints what a run stopped at its timeout wrote on stderr (mqblk bench says there what
/// its stuck jobs wait for), once its pipe has closed; not waited for past 2 s, as a
/// grandchild may still hold the pipe.
fn show_stderr(who: &str, errors: std::thread::JoinHandle<Vec<u8>>) {
    let t = Instant::now();
    while !errors.is_finished() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !errors.is_finished() {
        return;
    }
    let err = errors.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&err);
    for line in err.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("twin: {who}: {line}");
    }
}

/// One run of [`run_child`]: its stdout, or `None` if it outlasted `timeout` and was stopped.
fn run_child_once(
    mut cmd: Command,
    who: &str,
    stop: &AtomicBool,
    timeout: Duration,
) -> Result<Option<Vec<u8>>, TwinError> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {who}: {e}"))?;
    // Drain both pipes on threads so a large report or a chatty child cannot fill a pipe
    // and stall.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let reader = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let errors = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let mut terminated: Option<Instant> = None;
    let status = loop {
        if stop.load(Ordering::Relaxed) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TwinError::Interrupted);
        }
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {who}: {e}").into()),
        }
        match terminated {
            None if started.elapsed() >= timeout => {
                // Not yet reaped, so the pid is still the child's.
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status();
                terminated = Some(Instant::now());
            }
            Some(t) if t.elapsed() >= timeout.min(Duration::from_secs(10)) => {
                let _ = child.kill();
                let _ = child.wait();
                show_stderr(who, errors);
                return Ok(None);
            }
            _ => {}
        }
    };
    if terminated.is_some() {
        show_stderr(who, errors);
        return Ok(None);
    }
    let stdout = reader.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&errors.join().unwrap_or_default()).into_owned();
    if !status.success() {
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("{who} failed ({status}): {first}").into());
    }
    Ok(Some(stdout))
}

/// What every measurement of one twin invocation shares: the disk, what it offers, the
/// tunables asked for, and the progress over the whole invocation.
struct Twin<'a> {
    a: &'a TwinOptions,
    disk: Disk,
    offered: Vec<String>,
    tunables: Vec<(String, String, String)>,
    stop: &'a AtomicBool,
    /// Runs done and to do, for the progress lines.
    done: usize,
    total: usize,
    /// The profile the simulator's stack fits its model to (`--sim`).
    profile: Option<PathBuf>,
    /// The CPUs the kernel's runs have ([`host_cpus`]).
    cpus: u16,
}

impl Twin<'_> {
    /// `none` and then each named scheduler the kernel offers, by its canonical name;
    /// `what` names where the names came from in an error.
    fn schedulers(&self, names: &[String], what: &str) -> Result<Vec<String>, String> {
        let mut scheds = vec!["none".to_string()];
        for s in names {
            let Some(t) = mqblk_sched::lookup(s) else {
                return Err(format!("{what}: unknown scheduler '{s}'"));
            };
            let name = t.name.to_string();
            if !self.offered.contains(&name) && !is_mqblk_own(t) {
                return Err(format!(
                    "{what}: the kernel offers no '{name}' on {} (it has: {})",
                    self.disk.name(),
                    self.offered.join(", ")
                ));
            }
            if !scheds.contains(&name) {
                scheds.push(name);
            }
        }
        Ok(scheds)
    }

    /// The runs one job file takes with `scheds` (`none` included), `repeats` times.
    fn runs_of(&self, scheds: &[String], repeats: u32) -> usize {
        repeats as usize
            * scheds
                .iter()
                .map(|s| self.stacks(0, s).len())
                .sum::<usize>()
    }

    /// Whether the kernel has scheduler `s` (else it is one registered with mqblk at run
    /// time, an out-of-tree scheduler, which runs in mqblk's stacks only).
    fn in_kernel(&self, s: &str) -> bool {
        self.offered.iter().any(|o| o == s)
    }

    /// Profiles the device with the kernel at `none` (quick: the jobs' device, measured in
    /// about half a minute), into a file named on standard error for `--profile` next time.
    /// `writes`: some planned job writes, so the device is the jobs' to overwrite anyway,
    /// and the profile measures writes on a block device too (`--write-ok`).
    fn make_profile(&self, writes: bool) -> Result<PathBuf, TwinError> {
        let a = self.a;
        let out = std::env::temp_dir().join(format!(
            "mqblk-twin-{}-{}.toml",
            self.disk.name(),
            std::process::id()
        ));
        self.disk.set_scheduler("none")?;
        eprintln!(
            "twin: profiling {} with the kernel at none for the simulator's model",
            a.filename.display()
        );
        // Through fio, the kernel's own path: the model is to predict the kernel, and on a
        // device the CPUs serve (a loop device over tmpfs) mqblk's stack measures another
        // device (docs/results/profile.md).
        let make = || {
            let mut cmd = Command::new(&a.mqblk);
            cmd.arg("profile")
                .arg(format!("--filename={}", a.filename.display()))
                .arg(format!("--fio={}", a.fio))
                .arg("--quick")
                .arg(format!("--output={}", out.display()));
            if writes {
                cmd.arg("--write-ok");
            }
            Ok(cmd)
        };
        run_child(make, "mqblk profile", self.stop, a.run_timeout)?;
        eprintln!(
            "twin: the profile is {} (--profile={0} reuses it)",
            out.display()
        );
        Ok(out)
    }

    /// The stacks of repeat `r` under scheduler `sched`, in the order they run
    /// (alternating from one repeat to the next); the kernel's only if it has `sched`.
    fn stacks(&self, r: u32, sched: &str) -> Vec<Stack> {
        let mut v = vec![Stack::Kernel, Stack::Mqblk];
        if !self.in_kernel(sched) {
            v.remove(0);
        }
        if self.a.sim {
            v.push(Stack::Sim);
        }
        if r % 2 == 1 {
            v.reverse();
        }
        v
    }

    /// One run of `jobfile` through `stack` with scheduler `sched`.
    fn run_once(
        &self,
        jobfile: &Path,
        stack: Stack,
        sched: &str,
        cgroups: Option<&Cgroups>,
        repeat: u32,
    ) -> Result<(Vec<Figures>, String), TwinError> {
        let a = self.a;
        let disk = &self.disk;
        let tunables = &self.tunables;
        let filename = format!("--filename={}", a.filename.display());
        let mut line = String::new();
        // Made again for a second try after a run that outlasted --run-timeout.
        let make = || -> Result<Command, TwinError> {
            let cmd = match stack {
                Stack::Kernel => {
                    disk.set_scheduler(sched)?;
                    for (_, k, v) in tunables_for(tunables, sched) {
                        disk.set_tunable(k, v)?;
                    }
                    let mut cmd = Command::new(&a.fio);
                    cmd.arg("--output-format=json").arg(&filename);
                    match cgroups {
                        Some(cg) => {
                            cg.prepare()?;
                            cmd.arg("--cgroup_nodelete=1").arg(&cg.fio_job);
                        }
                        None => {
                            cmd.arg(jobfile);
                        }
                    }
                    cmd
                }
                Stack::Mqblk => {
                    disk.set_scheduler("none")?;
                    let shape = disk.queue_shape();
                    bench_command(&a.mqblk, &filename, &shape, sched, tunables, jobfile)
                }
                Stack::Sim => {
                    let side = SimSide {
                        mqblk: &a.mqblk,
                        profile: self.profile.as_ref().expect("a profile for the sim stack"),
                        kernel_costs: &a.kernel_costs,
                        cpus: self.cpus,
                    };
                    sim_command(&side, repeat, sched, tunables, jobfile)
                }
            };
            line = command_line(&cmd);
            Ok(cmd)
        };
        let who = match stack {
            Stack::Kernel => format!("fio ({sched} in the kernel)"),
            Stack::Mqblk => format!("mqblk bench ({sched})"),
            Stack::Sim => format!("mqblk sim ({sched})"),
        };
        let out = run_child(make, &who, self.stop, a.run_timeout)?;
        Ok((figures(&out, &who)?, line))
    }

    /// `repeats` rounds of `jobfile` under `scheds` through every stack, and what they show.
    fn measure(
        &mut self,
        jobfile: &Path,
        scheds: &[String],
        repeats: u32,
    ) -> Result<Report, TwinError> {
        let cgroups = Cgroups::of(jobfile)?;
        let name = jobfile
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut runs = Vec::new();
        let mut commands = Commands::default();
        for r in 0..repeats {
            // Alternate the order from one repeat to the next, so a drift of the machine over
            // the run does not side with one scheduler or one stack.
            let mut order: Vec<&String> = scheds.iter().collect();
            if r % 2 == 1 {
                order.reverse();
            }
            for s in order {
                for stack in self.stacks(r, s) {
                    self.done += 1;
                    let via = match stack {
                        Stack::Kernel => "kernel (fio)",
                        Stack::Mqblk => "mqblk (io_uring, kernel at none)",
                        Stack::Sim => "simulator (the disk's fitted model)",
                    };
                    eprintln!(
                        "twin: [{}/{}] {name} repeat {} {s} through the {via}",
                        self.done,
                        self.total,
                        r + 1
                    );
                    let (f, line) = self.run_once(jobfile, stack, s, cgroups.as_ref(), r)?;
                    commands.note(stack, line);
                    runs.push((r, stack, s.clone(), f));
                }
            }
        }
        let about = (
            jobfile.display().to_string(),
            self.a.filename.display().to_string(),
            self.disk.name(),
            repeats,
            self.cpus,
        );
        Ok(Report::of_runs(about, scheds.to_vec(), runs, commands))
    }
}

/// Median, smallest and largest of a set of effects.
#[derive(Copy, Clone, Debug, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The median (of the middle two for an even count), smallest and largest of the finite
/// figures in `xs`; `None` if there is none.
pub fn spread(xs: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// One line of the comparison: a scheduler's effect over `none` on one job, direction and
/// metric, in each stack.
#[derive(Clone, Debug, Serialize)]
pub struct Effect {
    pub scheduler: String,
    pub job: String,
    pub dir: Dir,
    /// `iops`, `bw`, `clat_mean_us`, `clat_p99_us`...
    pub metric: &'static str,
    pub kernel: Option<Spread>,
    pub mqblk: Option<Spread>,
    /// The simulator's prediction, with `--sim`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim: Option<Spread>,
}

/// Everything a twin run of one job file measured.
#[derive(Debug, Serialize)]
pub struct Report {
    jobfile: String,
    filename: String,
    disk: String,
    repeats: u32,
    /// The CPUs the kernel's runs had (the simulator's runs get as many).
    cpus: u16,
    schedulers: Vec<String>,
    /// Every run's figures: (repeat, stack, scheduler, figures).
    runs: Vec<(u32, Stack, String, Vec<Figures>)>,
    effects: Vec<Effect>,
    /// Each job's part of the run's total bandwidth, by scheduler: how a scheduler splits
    /// the device between jobs (weights, classes), which effects over `none` do not show.
    shares: Vec<Share>,
    /// The command line each stack ran.
    commands: Commands,
}

/// The command line each stack ran, as it ran for its first run (the others differ only
/// in the scheduler: `--ioscheduler` for mqblk's stacks, `queue/scheduler` in sysfs for the
/// kernel's; and the simulator's `--seed`): what to run again by hand, and how mqblk's side
/// ran (`--hctx_workers=1`, [`bench_command`]), which results saved before it do not say.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Commands {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mqblk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sim: Option<String>,
}

impl Commands {
    /// Keeps `line` as `stack`'s command unless it has one.
    pub(crate) fn note(&mut self, stack: Stack, line: String) {
        let slot = match stack {
            Stack::Kernel => &mut self.kernel,
            Stack::Mqblk => &mut self.mqblk,
            Stack::Sim => &mut self.sim,
        };
        slot.get_or_insert(line);
    }

    /// Forgets the simulator's (its runs are made again).
    pub(crate) fn without_sim(self) -> Commands {
        Commands { sim: None, ..self }
    }
}

/// `cmd` as a shell would take it: the program and its arguments, each quoted where it
/// holds anything but letters, digits and `-_./=:,+@%`.
fn command_line(cmd: &Command) -> String {
    let word = |w: &std::ffi::OsStr| {
        let w = w.to_string_lossy();
        if !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
        {
            w.into_owned()
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    };
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(word)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Report {
    /// A report of `runs` under `schedulers` (`none` among them), with the effects and
    /// shares they show; `about` is (job file, file or device, disk, repeats, CPUs), and
    /// `commands` what each stack ran.
    fn of_runs(
        about: (String, String, String, u32, u16),
        schedulers: Vec<String>,
        runs: Vec<(u32, Stack, String, Vec<Figures>)>,
        commands: Commands,
    ) -> Report {
        let (jobfile, filename, disk, repeats, cpus) = about;
        Report {
            commands,
            effects: effects(&runs, &schedulers),
            shares: shares(&runs, &schedulers),
            jobfile,
            filename,
            disk,
            repeats,
            cpus,
            schedulers,
            runs,
        }
    }
}

/// A job's part of the total bandwidth of its runs under one scheduler.
#[derive(Debug, Serialize)]
struct Share {
    scheduler: String,
    job: String,
    kernel: Option<Spread>,
    mqblk: Option<Spread>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sim: Option<Spread>,
}

/// Every job's share of the bandwidth (reads and writes together), per scheduler.
fn shares(runs: &[(u32, Stack, String, Vec<Figures>)], scheds: &[String]) -> Vec<Share> {
    let mut jobs: Vec<String> = Vec::new();
    for f in runs.iter().flat_map(|x| x.3.iter()) {
        if !jobs.contains(&f.job) {
            jobs.push(f.job.clone());
        }
    }
    if jobs.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for s in scheds {
        for job in &jobs {
            let of = |stack: Stack| -> Vec<f64> {
                runs.iter()
                    .filter(|x| x.1 == stack && &x.2 == s)
                    .filter_map(|x| {
                        let total: f64 = x.3.iter().map(|f| f.bw_kib).sum();
                        let mine: f64 =
                            x.3.iter().filter(|f| &f.job == job).map(|f| f.bw_kib).sum();
                        (total > 0.0).then(|| mine / total)
                    })
                    .collect()
            };
            out.push(Share {
                scheduler: s.clone(),
                job: job.clone(),
                kernel: spread(&of(Stack::Kernel)),
                mqblk: spread(&of(Stack::Mqblk)),
                sim: spread(&of(Stack::Sim)),
            });
        }
    }
    out
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Runs the twin: every job file through both stacks under each scheduler, `repeats`
/// times, alternating; the device's scheduler and tunables are restored on every exit.
/// `stop` (set by a signal handler) ends it early.
pub fn run(a: &TwinOptions, stop: &AtomicBool) -> Result<Outcome, TwinError> {
    if !is_root() {
        return Err(TwinError::NotRoot);
    }
    let disk = Disk::of(&a.filename)?;
    let (offered, original) = disk.schedulers()?;
    let mut twin = Twin {
        a,
        tunables: parse_tunables(&a.tunables)?,
        disk: disk.clone(),
        offered,
        stop,
        done: 0,
        total: 0,
        profile: a.profile.clone(),
        cpus: host_cpus(),
    };
    if let Some(p) = &a.profile {
        // Read and fitted before anything runs: a bad profile stops nothing.
        mqblk_models::profile::Profile::read(&p.display().to_string())
            .map_err(|e| e.to_string())?;
    }
    let default = ["mq-deadline", "kyber", "bfq"].map(String::from).to_vec();
    // Everything is checked before the first run; then the device's state is saved.
    let plan = match (&a.suite, &a.jobfile) {
        (Some(dir), _) => suite::plan(&twin, dir, a.schedulers.as_deref(), a.repeats)?,
        (None, Some(job)) => {
            let names = a.schedulers.as_deref().unwrap_or(&default);
            vec![suite::Planned {
                job: job.clone(),
                scheds: twin.schedulers(names, "--schedulers")?,
                repeats: a.repeats,
            }]
        }
        (None, None) => return Err("a job file or --suite DIR is needed".to_string().into()),
    };
    for p in &plan {
        if !p.job.is_file() {
            return Err(format!("{}: no such job file", p.job.display()).into());
        }
    }
    twin.total = plan
        .iter()
        .map(|p| twin.runs_of(&p.scheds, p.repeats))
        .sum();
    let mut own: Vec<&String> = plan
        .iter()
        .flat_map(|p| &p.scheds)
        .filter(|s| !twin.in_kernel(s))
        .collect();
    own.dedup();
    for s in own {
        eprintln!(
            "twin: the kernel has no '{s}' (a scheduler registered with mqblk): its effects come from mqblk's stacks only, beside the kernel's schedulers'"
        );
    }
    let restore = Restore {
        tunables: disk.tunables(),
        disk,
        scheduler: original,
    };
    // The kernel's `none` gets every driver tag, as mqblk's queue does.
    restore.disk.full_driver_tags()?;
    // Huge pages for the job files whose buffers are made of them (`iomem=shmhuge`), given
    // back after.
    let _huge = reserve_huge_pages(&plan)?;
    // Made once the device's state is saved, so its scheduler is put back after.
    if a.sim && twin.profile.is_none() {
        let writes = plan.iter().any(|p| {
            mqblk_workload::parse_job_file(&p.job)
                .is_ok_and(|specs| specs.iter().any(|j| j.rw.does_write()))
        });
        twin.profile = Some(twin.make_profile(writes)?);
    }
    let mut reports = Vec::new();
    for p in &plan {
        reports.push(twin.measure(&p.job, &p.scheds, p.repeats)?);
    }
    drop(restore);
    Ok(if a.suite.is_some() {
        Outcome::Suite(suite::Suite::of(reports))
    } else {
        Outcome::One(reports.pop().expect("one job file, one report"))
    })
}

/// Huge pages enough for the most any one job file of `plan` asks of each size (its files
/// run one after another, and fio and mqblk never at once): per job clone its `iodepth`
/// buffers of its largest block, and two more for fio's own (measured, not read from fio's
/// source: fio 3.33 ran `read-beside-writes-huge.fio`'s two jobs with six pages free and
/// not with five, where their buffers fill three).
fn reserve_huge_pages(
    plan: &[suite::Planned],
) -> Result<Vec<mqblk_drivers::hugemem::HugeReservation>, String> {
    let mut need: std::collections::BTreeMap<u64, u64> = Default::default();
    for p in plan {
        let Ok(specs) = mqblk_workload::parse_job_file(&p.job) else {
            continue;
        };
        let mut file: std::collections::BTreeMap<u64, u64> = Default::default();
        for j in specs.iter().filter(|j| j.iomem.is_huge()) {
            let per_clone = mqblk_drivers::hugemem::arena_pages(
                j.iodepth.max(1) as usize,
                j.max_bs() as usize,
                j.hugepage_size,
            ) + 2;
            *file.entry(j.hugepage_size).or_default() += per_clone * j.numjobs.max(1) as u64;
        }
        for (size, n) in file {
            let e = need.entry(size).or_default();
            *e = (*e).max(n);
        }
    }
    let mut held = Vec::new();
    for (size, n) in need {
        if let Some(r) = mqblk_drivers::hugemem::reserve(size, n)
            .map_err(|e| format!("twin: huge pages for iomem=: {e}"))?
        {
            eprintln!(
                "twin: {n} huge pages of {} kB reserved for the run",
                size >> 10
            );
            held.push(r);
        }
    }
    Ok(held)
}

/// What every simulator run of a twin is given besides the job file and scheduler.
pub(crate) struct SimSide<'a> {
    pub mqblk: &'a Path,
    /// The profile the model is fitted to.
    pub profile: &'a Path,
    /// The kernel's scheduler costs to charge (none: the built-in ones).
    pub kernel_costs: &'a [PathBuf],
    /// The CPUs the kernel's runs had: the simulation gets as many, so that jobs share
    /// them as the kernel's fio processes did (`mqblk sim` would give each job its own).
    pub cpus: u16,
}

/// The CPUs this machine gives its processes (the kernel's side of a twin runs here).
pub(crate) fn host_cpus() -> u16 {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(1024) as u16)
}

/// mqblk's run of `jobfile` under `sched` on the disk (`filename` is the `--filename=`
/// argument, `shape` the disk's queue shape as bench options). The disk's completions are
/// reaped by a completion worker per hardware queue (`hctx_workers=1`), not by the jobs'
/// threads: the kernel ends a disk's requests in its interrupt, on the interrupt's CPU
/// (virtio-blk's `virtblk_done`), and restarts a queue the driver stopped from kblockd
/// there (`blk_mq_start_stopped_hw_queues(q, true)`, an asynchronous run), while fio only
/// collects what is done (this machine's `vda` interrupts one CPU only). Where the jobs reaped
/// for themselves, the writer beside the 128 KiB flood refilled each gap in the ring
/// before a waiting large request could take it and the queue stayed in small requests
/// (docs/results/investigations.md, "A write that waits the whole run under `none`").
fn bench_command(
    mqblk: &Path,
    filename: &str,
    shape: &[String],
    sched: &str,
    tunables: &[(String, String, String)],
    jobfile: &Path,
) -> Command {
    let mut cmd = Command::new(mqblk);
    cmd.args(["bench", "--output-format=json", "--ioengine=io_uring"])
        .arg(filename)
        .args(shape)
        .arg("--hctx_workers=1")
        .arg(format!("--ioscheduler={sched}"))
        .args(sched_args(tunables, sched))
        .arg(jobfile);
    cmd
}

/// `sched`'s tunables as `--sched.NAME=VALUE` options, as bench and sim both take them.
fn sched_args(tunables: &[(String, String, String)], sched: &str) -> Vec<String> {
    tunables_for(tunables, sched)
        .into_iter()
        .map(|(_, k, v)| format!("--sched.{k}={v}"))
        .collect()
}

/// The simulator's run of `jobfile` for `repeat` under `sched`: virtual time, the jobs as
/// written (their cgroups too) on the model fitted to the profile, on the kernel's CPU
/// count, the kernel's CPU costs charged, a seed per repeat.
fn sim_command(
    side: &SimSide,
    repeat: u32,
    sched: &str,
    tunables: &[(String, String, String)],
    jobfile: &Path,
) -> Command {
    let mut cmd = Command::new(side.mqblk);
    cmd.args(["sim", "--output-format=json", "--cost-profile=kernel"])
        .arg(format!("--device=profile:{}", side.profile.display()))
        .arg(format!("--seed={}", repeat + 1))
        .arg(format!("--cpus={}", side.cpus))
        .arg(format!("--ioscheduler={sched}"));
    for f in side.kernel_costs {
        cmd.arg(format!("--kernel-costs={}", f.display()));
    }
    cmd.args(sched_args(tunables, sched)).arg(jobfile);
    cmd
}

/// The (job, direction) pairs the baseline (`none`) has in any stack, in the order they
/// first appear.
fn baseline_keys(runs: &[(u32, Stack, String, Vec<Figures>)]) -> Vec<(String, Dir)> {
    runs.iter()
        .filter(|x| x.2 == "none")
        .flat_map(|x| x.3.iter().map(|f| (f.job.clone(), f.dir)))
        .fold(Vec::new(), |mut acc, k| {
            if !acc.contains(&k) {
                acc.push(k);
            }
            acc
        })
}

/// Effects over `none`, paired by repeat and stack.
fn effects(runs: &[(u32, Stack, String, Vec<Figures>)], scheds: &[String]) -> Vec<Effect> {
    let find = |r: u32, stack: Stack, s: &str| {
        runs.iter()
            .find(|x| x.0 == r && x.1 == stack && x.2 == s)
            .map(|x| &x.3)
    };
    let repeats: Vec<u32> = {
        let mut v: Vec<u32> = runs.iter().map(|x| x.0).collect();
        v.dedup();
        v
    };
    let keys = baseline_keys(runs);
    let mut out = Vec::new();
    for s in scheds.iter().filter(|s| *s != "none") {
        for (job, dir) in &keys {
            for metric in METRICS {
                let ratios = |stack: Stack| -> Vec<f64> {
                    repeats
                        .iter()
                        .filter_map(|&r| {
                            let pick = |fs: &Vec<Figures>| {
                                fs.iter()
                                    .find(|f| &f.job == job && f.dir == *dir)
                                    .map(|f| f.metric(metric))
                            };
                            let base = pick(find(r, stack, "none")?)?;
                            let x = pick(find(r, stack, s)?)?;
                            (base > 0.0).then(|| x / base)
                        })
                        .collect()
                };
                out.push(Effect {
                    scheduler: s.clone(),
                    job: job.clone(),
                    dir: *dir,
                    metric,
                    kernel: spread(&ratios(Stack::Kernel)),
                    mqblk: spread(&ratios(Stack::Mqblk)),
                    sim: spread(&ratios(Stack::Sim)),
                });
            }
        }
    }
    out
}

/// An effect as the tables show it: median and range.
fn cell(x: &Option<Spread>) -> String {
    match x {
        Some(v) => format!("x{:.2} [{:.2}-{:.2}]", v.median, v.min, v.max),
        None => "-".to_string(),
    }
}

/// A stack's median effect over the kernel's.
fn ratio(kernel: Option<Spread>, other: Option<Spread>) -> String {
    match (kernel, other) {
        (Some(k), Some(m)) if k.median > 0.0 => format!("{:.2}", m.median / k.median),
        _ => "-".to_string(),
    }
}

fn table(r: &Report) -> String {
    let mut s = format!(
        "twin: {} (disk {}), {} repeats; effect = metric under the scheduler / under none, median [min-max]\n",
        r.filename, r.disk, r.repeats
    );
    let sim = r.effects.iter().any(|e| e.sim.is_some());
    s += &format!(
        "{:<12} {:<16} {:<5} {:<13} {:>24} {:>24} {:>8}{}\n",
        "scheduler",
        "job",
        "dir",
        "metric",
        "kernel",
        "mqblk",
        "mq/kern",
        if sim {
            format!(" {:>24} {:>8}", "sim", "sim/kern")
        } else {
            String::new()
        }
    );
    for e in &r.effects {
        let sim_cells = if sim {
            format!(" {:>24} {:>8}", cell(&e.sim), ratio(e.kernel, e.sim))
        } else {
            String::new()
        };
        s += &format!(
            "{:<12} {:<16} {:<5} {:<13} {:>24} {:>24} {:>8}{sim_cells}\n",
            e.scheduler,
            e.job,
            e.dir,
            e.metric,
            cell(&e.kernel),
            cell(&e.mqblk),
            ratio(e.kernel, e.mqblk)
        );
    }
    if !r.shares.is_empty() {
        s += "\nshare of the bandwidth by job, median [min-max]\n";
        s += &format!(
            "{:<12} {:<16} {:>24} {:>24}{}\n",
            "scheduler",
            "job",
            "kernel",
            "mqblk",
            if sim {
                format!(" {:>24}", "sim")
            } else {
                String::new()
            }
        );
        let pct = |x: &Option<Spread>| match x {
            Some(v) => format!(
                "{:.1}% [{:.1}-{:.1}]",
                100.0 * v.median,
                100.0 * v.min,
                100.0 * v.max
            ),
            None => "-".to_string(),
        };
        for sh in &r.shares {
            let sim_cell = if sim {
                format!(" {:>24}", pct(&sh.sim))
            } else {
                String::new()
            };
            s += &format!(
                "{:<12} {:<16} {:>24} {:>24}{sim_cell}\n",
                sh.scheduler,
                sh.job,
                pct(&sh.kernel),
                pct(&sh.mqblk)
            );
        }
    }
    if let Some(l) = suite::Levels::of(std::slice::from_ref(r)).line() {
        s += &format!("\n{l}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report's command lines paste into a shell as they ran.
    #[test]
    fn a_command_line_quotes_what_a_shell_would_split() {
        let mut cmd = Command::new("/usr/bin/fio");
        cmd.args(["--output-format=json", "--filename=/a b/c", "it's.fio", ""]);
        assert_eq!(
            command_line(&cmd),
            r#"/usr/bin/fio --output-format=json '--filename=/a b/c' 'it'\''s.fio' ''"#
        );
    }

    /// mqblk's side reaps the disk through a completion worker, the stand-in for the
    /// kernel's interrupt and kblockd, and the job file comes last (bench takes options
    /// before it).
    #[test]
    fn mqblk_s_side_reaps_through_a_completion_worker() {
        let tunables = vec![(
            "kyber".to_string(),
            "read_lat_nsec".to_string(),
            "1000000".to_string(),
        )];
        let cmd = bench_command(
            Path::new("mqblk"),
            "--filename=/dev/x",
            &["--nr_hw_queues=1".to_string()],
            "kyber",
            &tunables,
            Path::new("job.fio"),
        );
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.contains(&"--hctx_workers=1".to_string()), "{args:?}");
        assert!(
            args.contains(&"--sched.read_lat_nsec=1000000".to_string()),
            "{args:?}"
        );
        assert_eq!(args.first().map(String::as_str), Some("bench"), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("job.fio"), "{args:?}");
    }

    fn sh(script: String) -> impl FnMut() -> Result<Command, TwinError> {
        move || {
            let mut c = Command::new("sh");
            c.args(["-c", &script]);
            Ok(c)
        }
    }

    /// A run that hangs once is stopped at the timeout and its second run's report is
    /// the one taken.
    #[test]
    fn a_run_past_its_timeout_is_stopped_and_run_once_more() {
        let mark = std::env::temp_dir().join(format!("mqblk-twin-retry-{}", std::process::id()));
        let _ = std::fs::remove_file(&mark);
        let script = format!(
            "if [ -e {0} ]; then echo second; else touch {0}; sleep 60; fi",
            mark.display()
        );
        let t0 = Instant::now();
        let out = run_child(
            sh(script),
            "a child",
            &AtomicBool::new(false),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&out).trim(), "second");
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
        let _ = std::fs::remove_file(&mark);
    }

    /// A run that hangs twice, SIGTERM ignored, is killed each time and the twin fails
    /// with one line naming it.
    #[test]
    fn a_run_that_hangs_twice_fails_with_a_line_naming_it() {
        let t0 = Instant::now();
        let e = run_child(
            sh("trap '' TERM; sleep 60".into()),
            "mqblk bench (bfq)",
            &AtomicBool::new(false),
            Duration::from_secs(1),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "mqblk bench (bfq) still running after 1 s, twice (--run-timeout): stopped"
        );
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    }
}
