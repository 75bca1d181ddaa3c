//! [`DeviceConfig`] and [`QueueSettings`]: a device and its request queue, described once.

use crate::DeviceError;
use mqblk_core::{Nanos, NoMerges, TagSetConfig, TagSetFlags};
use mqblk_drivers::{FaultConfig, FaultSpec, NullConfig, UringConfig};
use mqblk_models::DeviceSpec;
use mqblk_workload::job::engine::EngineKind;
use mqblk_workload::job::{Fallocate, FileLayout, LayoutFile};
use mqblk_workload::JobSpec;
use std::sync::Arc;

/// What carries the I/O, with the driver's own settings (null_blk's parameters for the null
/// driver, fio's `io_uring` engine options for the uring driver, a model's spec).
#[derive(Clone, Debug, PartialEq)]
pub enum DriverConfig {
    /// The userspace `null_blk` (optionally memory-backed).
    Null(NullConfig),
    /// io_uring over a regular file or a block device.
    Uring(UringConfig),
    /// A device model (`hdd`, `ssd`, ...) serving I/O in real time; in the simulator every
    /// device is a model.
    Model(ModelConfig),
}

/// A device model and the faults its driver injects.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The model and its parameters (`hdd,ncq=32`, `ssd`, ...).
    pub spec: DeviceSpec,
    /// Injected as the null driver injects them (`fail_nth`, `timeout_prob`, ...).
    pub faults: FaultConfig,
}

impl DriverConfig {
    /// The driver's name as `driver=` takes it.
    pub fn name(&self) -> &'static str {
        match self {
            DriverConfig::Null(_) => "null",
            DriverConfig::Uring(_) => "uring",
            DriverConfig::Model(_) => "sim",
        }
    }

    /// The driver `driver=NAME` names, with its defaults.
    pub fn named(name: &str) -> Result<DriverConfig, DeviceError> {
        match name {
            "null" => Ok(DriverConfig::Null(NullConfig::default())),
            "uring" => Ok(DriverConfig::Uring(UringConfig::default())),
            "sim" => Ok(DriverConfig::Model(ModelConfig {
                spec: DeviceSpec::parse("hdd")?,
                faults: FaultConfig::default(),
            })),
            other => Err(DeviceError::UnknownDriver(other.to_string())),
        }
    }

    /// The faults the driver injects, to change (`None` for the uring driver, which has no
    /// injector).
    pub fn faults_mut(&mut self) -> Option<&mut FaultConfig> {
        match self {
            DriverConfig::Null(c) => Some(&mut c.faults),
            DriverConfig::Model(m) => Some(&mut m.faults),
            DriverConfig::Uring(_) => None,
        }
    }

    /// The faults the driver injects (none for the uring driver, which has no injector).
    pub fn faults(&self) -> FaultConfig {
        match self {
            DriverConfig::Null(c) => c.faults,
            DriverConfig::Model(m) => m.faults,
            DriverConfig::Uring(_) => FaultConfig::default(),
        }
    }
}

/// The request queue's settings: the `/sys/block/<dev>/queue/` knobs, with the kernel's
/// names, units and defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSettings {
    /// `scheduler`: a registered name or alias; `None` is the kernel's default for the
    /// device (see [`default_scheduler`]).
    pub scheduler: Option<String>,
    /// `iosched/NAME` values, unvalidated until the scheduler checks them.
    pub sched_tunables: Vec<(String, String)>,
    /// Scheduler tags per hardware queue (0: the kernel's `2 * min(queue_depth, 128)`).
    pub nr_requests: u32,
    pub nomerges: NoMerges,
    /// Largest request in KiB (0: the driver's limit).
    pub max_sectors_kb: u32,
    /// Most segments per request (0: the driver's limit).
    pub max_segments: u16,
    /// Run only the submitter's hardware queue for a scheduler that is not `MQ_AWARE`
    /// ("blk-mq: Improve performance of non-mq IO schedulers with multiple HW queues").
    pub sq_sched_dispatch: bool,
    /// Run all hardware queues after each completion batch, as SCSI's `scsi_run_queue`.
    pub run_all_on_complete: bool,
    /// Asynchronous runs are kblockd work the simulator executes on the hctx's CPU
    /// (`QueueConfig::kblockd_runs`).
    pub kblockd_runs: bool,
    /// Every bio is submitted under a plug, even a lone one, as `__submit_bio` does since
    /// Linux 6.10 ("block: add plug while submitting IO": "If plug is not used, add new plug
    /// here to cache nsecs time"; `block_plug` fires once per request here): a lone request
    /// leaves through `blk_mq_flush_plug_list`, so with a scheduler the queue runs inline
    /// and without one the request is issued directly unless the queue is stopped. Off, a
    /// lone bio takes `blk_mq_submit_bio`'s unplugged path (insert and an asynchronous run
    /// with a scheduler; the software queue while the queue is busy without one), as in
    /// the kernels before 6.10 the seed scenarios were written around.
    pub submit_bio_plugs: bool,
    /// Delayed runs of every queue push back pending ones, as before Linux 5.17
    /// (`QueueConfig::delay_run_rearms`).
    pub delay_run_rearms: bool,
    /// PREFLUSH and FUA writes go through the scheduler, as since Linux 6.5 (the default);
    /// off, they bypass it as before (`QueueConfig::flush_via_sched`).
    pub flush_via_sched: bool,
    /// A zoned device's writes are plugged per zone, as since Linux 6.10 (the default); off,
    /// mq-deadline's zone write locking keeps them in order, as before
    /// (`QueueConfig::zone_write_plugging`).
    pub zone_write_plugging: bool,
    /// Request timeout (`io_timeout`).
    pub timeout: Nanos,
}

impl Default for QueueSettings {
    fn default() -> QueueSettings {
        QueueSettings {
            scheduler: None,
            sched_tunables: Vec::new(),
            nr_requests: 0,
            nomerges: NoMerges::All,
            max_sectors_kb: 0,
            max_segments: 0,
            sq_sched_dispatch: true,
            run_all_on_complete: false,
            kblockd_runs: false,
            submit_bio_plugs: true,
            delay_run_rearms: false,
            flush_via_sched: true,
            zone_write_plugging: true,
            timeout: Nanos::from_secs(30),
        }
    }
}

impl QueueSettings {
    /// The queue settings a job's options give.
    pub fn from_job(s: &JobSpec) -> QueueSettings {
        QueueSettings {
            scheduler: s.ioscheduler.clone(),
            sched_tunables: s.sched_tunables.clone(),
            nr_requests: s.nr_requests,
            nomerges: match s.nomerges {
                0 => NoMerges::All,
                1 => NoMerges::Simple,
                _ => NoMerges::None,
            },
            max_sectors_kb: s.max_sectors_kb,
            max_segments: s.max_segments.min(u16::MAX as u32) as u16,
            sq_sched_dispatch: s.sq_sched_dispatch,
            flush_via_sched: s.flush_via_sched,
            zone_write_plugging: s.zone_write_plugging,
            ..QueueSettings::default()
        }
    }
}

/// The scheduler a queue gets when none is asked for, as the kernel's `elevator_set_default`
/// (`use_default_elevator`, formerly `elevator_get_default`) picks it: `none` for a driver
/// that sets `BLK_MQ_F_NO_SCHED_BY_DEFAULT` (loop, and our uring driver, which is a loop
/// device in userspace) or for several hardware queues with their own tags; mq-deadline for
/// one hardware queue or tags shared by all (`BLK_MQ_F_TAG_HCTX_SHARED`), as a SCSI disk,
/// an eMMC card, a single-queue virtio disk or null_blk get.
pub fn default_scheduler(set: &TagSetConfig) -> &'static str {
    if set.flags.contains(TagSetFlags::NO_SCHED_BY_DEFAULT) {
        return "none";
    }
    if set.nr_hw_queues() != 1 && !set.flags.contains(TagSetFlags::TAG_HCTX_SHARED) {
        return "none";
    }
    "mq-deadline"
}

impl QueueSettings {
    /// The elevator type these settings ask for on tag set `set` (its default when none is
    /// named); an unknown name is an error, never "no scheduler".
    pub fn elevator_type(
        &self,
        set: &TagSetConfig,
    ) -> Result<&'static mqblk_core::ElevatorType, DeviceError> {
        let name = self
            .scheduler
            .as_deref()
            .unwrap_or_else(|| default_scheduler(set));
        mqblk_sched::lookup(name).ok_or_else(|| DeviceError::UnknownScheduler {
            name: name.to_string(),
            available: mqblk_sched::names().join(", "),
        })
    }
}

/// A device and the queue over it: everything a run, an export or a replay needs to build
/// it, in real time or in the simulator.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// What carries the I/O.
    pub driver: DriverConfig,
    /// The request queue above the driver.
    pub queue: QueueSettings,
    /// Software queues (0: one per submitter).
    pub nr_ctx: u16,
    /// For a null or uring device, the model that stands for it in the simulator
    /// (`device=`); a model driver is its own.
    pub sim_model: Option<DeviceSpec>,
    /// The files the jobs name, laid out on the device (for the uring driver the first is
    /// its `path` and the rest its `more_files`).
    pub files: FileLayout,
    /// Reap completions from a worker thread per hardware queue.
    pub hctx_workers: bool,
    /// The cgroups the I/O is charged to.
    pub blkcg: Arc<mqblk_core::Blkcg>,
}

impl Default for DeviceConfig {
    /// A null device of 1 GiB (the job model's default device size) with one hardware
    /// queue of 64 tags.
    fn default() -> DeviceConfig {
        DeviceConfig::new(DriverConfig::Null(NullConfig {
            size_bytes: 1 << 30,
            ..NullConfig::default()
        }))
    }
}

/// What the jobs' device is planned for.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Plan {
    /// A run on real files: they are looked at, sized, made.
    Run,
    /// fio's `--parse-only`: the options, not the files.
    ParseOnly,
    /// The simulator: a model stands for the device, and a real file without one is refused.
    Simulate,
}

/// The simulator's refusal of a real file (`what` names it): only a model can stand for a
/// device in virtual time.
fn not_simulated(what: &str) -> DeviceError {
    DeviceError::Invalid(format!(
        "{what}: a real file cannot be simulated; describe its device with --device=MODEL"
    ))
}

impl DeviceConfig {
    /// `driver` under a queue with the default settings.
    pub fn new(driver: DriverConfig) -> DeviceConfig {
        DeviceConfig {
            driver,
            queue: QueueSettings::default(),
            nr_ctx: 0,
            sim_model: None,
            files: FileLayout::default(),
            hctx_workers: false,
            blkcg: Default::default(),
        }
    }

    /// The model `spec` (without faults) under a queue with `queue`'s settings.
    pub fn model(spec: DeviceSpec, queue: QueueSettings) -> DeviceConfig {
        DeviceConfig {
            queue,
            ..DeviceConfig::new(DriverConfig::Model(ModelConfig {
                spec,
                faults: FaultConfig::default(),
            }))
        }
    }

    /// The device a job's options describe (fio's `ioengine` picks the driver as `driver=`
    /// does). A real file's capacity is read from it unless `size` creates or extends it.
    pub fn from_job(s: &JobSpec) -> Result<DeviceConfig, DeviceError> {
        DeviceConfig::from_jobs(std::slice::from_ref(s))
    }

    /// The settings one job gives its device, without its files and their sizes.
    fn settings_of(s: &JobSpec) -> Result<DeviceConfig, DeviceError> {
        let invalid = |m: String| DeviceError::Invalid(format!("job '{}': {m}", s.name));
        let name = match (s.engine(), s.driver.as_deref()) {
            // An explicit driver wins: a block engine on it only sets the depth.
            (_, Some(name)) => name,
            (Some((_, EngineKind::Null)), None) => "null",
            // A model named for a job with no file: the model serves the I/O whatever the
            // engine (a job file written for a real disk, simulated as it is).
            (Some(_), None)
                if s.device.is_some() && s.filename.is_none() && s.directory.is_none() =>
            {
                "sim"
            }
            // Every block I/O engine reads and writes the file through the uring driver: the
            // one the job names, or fio's `NAME.CLONE.FILE` in the current directory.
            (Some(_), None) => "uring",
            // A model named without a driver: the model serves the I/O.
            (None, None) if s.device.is_some() => "sim",
            (None, None) => "null",
        };
        let spec = |every_nth, probability_pct| FaultSpec {
            every_nth,
            probability_pct,
        };
        let faults = FaultConfig {
            fail: spec(s.fail_nth, s.fail_prob),
            timeout: spec(s.timeout_nth, s.timeout_prob),
            requeue: spec(s.requeue_nth, s.requeue_prob),
            seed: s.fault_seed.unwrap_or(0),
        };
        let model = s.device.as_deref().map(DeviceSpec::parse).transpose()?;
        let mut sim_model = None;
        let driver = match DriverConfig::named(name)? {
            DriverConfig::Null(d) => {
                sim_model = model;
                DriverConfig::Null(NullConfig {
                    submit_queues: s.nr_hw_queues as u16,
                    hw_queue_depth: s.queue_depth,
                    irqmode: s.irqmode,
                    completion_nsec: s.completion_nsec,
                    shared_tag_bitmap: s.shared_tags,
                    blocking: s.blocking,
                    memory_backed: s.memory_backed,
                    cache_size_mb: s.cache_size_mb,
                    rotational: s.rotational.unwrap_or(false),
                    size_bytes: s.device_size(),
                    faults,
                    zoned: s.zoned,
                    zone: s.zone,
                    ..d
                })
            }
            DriverConfig::Uring(d) => {
                if faults.is_enabled() {
                    return Err(invalid(
                        "fault injection (fail_*, timeout_*, requeue_*) needs driver=null or a model, not driver=uring".into(),
                    ));
                }
                sim_model = model;
                DriverConfig::Uring(UringConfig {
                    nr_hw_queues: s.nr_hw_queues as u16,
                    queue_depth: s.queue_depth,
                    direct: s.direct,
                    sqpoll: s.sqthread_poll,
                    sqpoll_cpu: s.sqthread_poll_cpu,
                    register_files: s.registerfiles,
                    fixed_buffers: s.fixedbufs,
                    rotational: s.rotational,
                    virtqueue_size: s.virtqueue_size,
                    ..d
                })
            }
            DriverConfig::Model(m) => {
                if s.rotational.is_some() {
                    return Err(invalid(
                        "rotational= applies to the null and uring drivers; a device model has its own (hdd is rotational, ssd, emmc and virtio are not)".into(),
                    ));
                }
                DriverConfig::Model(ModelConfig {
                    spec: model.unwrap_or(m.spec),
                    faults,
                })
            }
        };
        if s.shared_tags && !matches!(driver, DriverConfig::Null(_)) {
            return Err(invalid(format!(
                "shared_tags applies to driver=null (null_blk's shared_tag_bitmap), not driver={}",
                driver.name()
            )));
        }
        if !matches!(driver, DriverConfig::Uring(_)) {
            if s.virtqueue_size.is_some() {
                return Err(invalid(
                    "virtqueue_size= applies to driver=uring (the virtio model has its own rings)"
                        .into(),
                ));
            }
            if s.fixedbufs {
                return Err(invalid(
                    "fixedbufs: needs ioengine=io_uring (driver=uring)".into(),
                ));
            }
        }
        Ok(DeviceConfig {
            driver,
            queue: QueueSettings::from_job(s),
            nr_ctx: s.nr_ctx as u16,
            sim_model,
            hctx_workers: s.hctx_workers,
            ..DeviceConfig::default()
        })
    }

    /// The device of several jobs: they must agree on everything but the region each
    /// covers (fio's per-job `size` and `offset`); the device is as large as the largest
    /// needs.
    pub fn from_jobs(specs: &[JobSpec]) -> Result<DeviceConfig, DeviceError> {
        DeviceConfig::plan_jobs(specs, Plan::Run)
    }

    /// [`Self::from_jobs`] for the simulator: a run whose I/O goes to a real file, with no
    /// model to stand for its device, is refused as such before its files are looked for
    /// (otherwise a job without a size would be told to give one, only to be refused next).
    pub fn from_jobs_simulated(specs: &[JobSpec]) -> Result<DeviceConfig, DeviceError> {
        DeviceConfig::plan_jobs(specs, Plan::Simulate)
    }

    /// What a run on real files checks before it starts, beyond [`Self::from_jobs`] (which
    /// the simulator shares, whose files are not real): every file's directory exists
    /// (fio makes files, not directories), and a job that writes does not write a mounted
    /// block device (fio's `check_mount_writes`) unless it sets `allow_mounted_write`.
    pub fn check_real_files(&self, specs: &[JobSpec]) -> Result<(), DeviceError> {
        if !matches!(self.driver, DriverConfig::Uring(_)) {
            return Ok(());
        }
        for s in specs.iter().filter(|s| s.has_files()) {
            let refuse = |m: String| {
                Err(DeviceError::Invalid(
                    mqblk_workload::job::at_files(s, m).to_string(),
                ))
            };
            for clone in 0..s.numjobs.max(1) {
                for p in s.file_names(clone) {
                    // fio: "DIR is not a directory".
                    let dir = std::path::Path::new(&p).parent();
                    if let Some(d) = dir.filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
                        return refuse(format!(
                            "directory {} of file {p} does not exist (the run makes files, not directories)",
                            d.display()
                        ));
                    }
                    // fio checks the device itself; here a mounted partition counts too.
                    if !s.rw.does_write() || s.allow_mounted_write {
                        continue;
                    }
                    if let Some((src, on)) = mounted(&p) {
                        return refuse(format!(
                            "{p} is a mounted block device ({src} on {on}); writing it would corrupt that file system (allow_mounted_write=1 to go on)"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Self::from_jobs`] as fio's `--parse-only` checks: the options, not the files. A
    /// file that does not exist (or cannot be looked at) stands for as much as the job
    /// would use, so a job file naming `/dev/sdX` of another machine parses here too; its
    /// run is what fails, naming the file.
    pub fn from_jobs_parse_only(specs: &[JobSpec]) -> Result<DeviceConfig, DeviceError> {
        DeviceConfig::plan_jobs(specs, Plan::ParseOnly)
    }

    fn plan_jobs(specs: &[JobSpec], plan: Plan) -> Result<DeviceConfig, DeviceError> {
        let parse_only = plan == Plan::ParseOnly;
        let first = specs
            .first()
            .ok_or_else(|| DeviceError::Invalid("no jobs given".into()))?;
        let mut device = DeviceConfig::settings_of(first)?;
        for s in &specs[1..] {
            let other = DeviceConfig::settings_of(s)?;
            if let Some(what) = device.differs_from(&other) {
                return Err(DeviceError::Invalid(format!(
                    "job '{}': {what} differs from job '{}' (all jobs of a run share one device)",
                    s.name, first.name
                )));
            }
            if let (DriverConfig::Null(d), DriverConfig::Null(o)) =
                (&mut device.driver, &other.driver)
            {
                d.size_bytes = d.size_bytes.max(o.size_bytes);
            }
        }
        if let (Plan::Simulate, DriverConfig::Uring(_), None) =
            (plan, &device.driver, &device.sim_model)
        {
            let file = first.file_names(0).into_iter().next().unwrap_or_default();
            return Err(not_simulated(&format!("job '{}': {file}", first.name)));
        }
        // The files the jobs name, laid out on the device: real ones are sized by what is
        // on disk unless a job sizes them; on the null device or a model, a file without a
        // size stands for the job's whole device.
        let layout = if let DriverConfig::Uring(_) = device.driver {
            FileLayout::plan(specs, |s, path| match real_file_size(path) {
                _ if s.file_append => Ok(match std::fs::metadata(path) {
                    Ok(m) if m.is_file() => Some(m.len()),
                    Ok(_) => None,
                    Err(_) => Some(0),
                }),
                _ if s.fills_the_room() && !parse_only => fill_size(path).map(Some),
                Ok(Some(len)) => Ok(Some(len)),
                _ if parse_only => Ok(Some(s.device_size())),
                other => other,
            })
        } else {
            FileLayout::plan(specs, |s, _| Ok((!s.file_append).then(|| s.device_size())))
        }
        .map_err(|e| DeviceError::Invalid(e.to_string()))?;
        // fio's `allow_file_create=0`: a job may only use files that are there.
        if let (DriverConfig::Uring(_), false) = (&device.driver, parse_only) {
            for s in specs.iter().filter(|s| !s.allow_file_create) {
                for clone in 0..s.numjobs.max(1) {
                    if let Some(p) = s
                        .file_names(clone)
                        .into_iter()
                        .find(|p| !std::path::Path::new(p).exists())
                    {
                        return Err(DeviceError::Invalid(format!(
                            "job '{}': file {p} does not exist and allow_file_create=0 forbids making it",
                            s.name
                        )));
                    }
                }
            }
        }
        match &mut device.driver {
            DriverConfig::Uring(u) => {
                let f = layout.files.first().ok_or_else(|| {
                    DeviceError::Invalid(format!(
                        "job '{}': driver=uring needs filename=",
                        first.name
                    ))
                })?;
                u.path = f.path.clone().into();
                u.size_bytes = f.sized.then_some(f.len);
                u.extend = extend_of(f);
                u.more_files = layout
                    .files
                    .iter()
                    .skip(1)
                    .map(|f| mqblk_drivers::UringFile {
                        path: f.path.clone().into(),
                        base: f.base,
                        size_bytes: f.sized.then_some(f.len),
                        extend: extend_of(f),
                    })
                    .collect();
            }
            DriverConfig::Null(d) => d.size_bytes = d.size_bytes.max(layout.end()),
            DriverConfig::Model(_) => {}
        }
        device.files = layout;
        Ok(device)
    }

    /// The first setting (by option name) in which `other` describes another device. The
    /// region (sizes and files), the registered-buffer pool (sized later from the jobs) and
    /// the cgroup registry (one per run) are not settings a job chooses apart from the
    /// others.
    fn differs_from(&self, o: &DeviceConfig) -> Option<&'static str> {
        // Destructured without `..`: a field added to a configuration must be placed here,
        // as compared or as deliberately left out.
        let DeviceConfig {
            driver,
            queue,
            nr_ctx,
            sim_model,
            files: _,
            hctx_workers,
            blkcg: _,
        } = self;
        let mut checks = vec![
            ("driver", driver.name() == o.driver.name()),
            (
                "the queue settings (ioscheduler, sched.*, nr_requests, nomerges, limits)",
                *queue == o.queue,
            ),
            ("nr_ctx", *nr_ctx == o.nr_ctx),
            ("device", *sim_model == o.sim_model),
            ("hctx_workers", *hctx_workers == o.hctx_workers),
        ];
        match (driver, &o.driver) {
            (DriverConfig::Null(a), DriverConfig::Null(b)) => {
                let NullConfig {
                    submit_queues,
                    poll_queues,
                    hw_queue_depth,
                    irqmode,
                    completion_nsec,
                    shared_tags,
                    shared_tag_bitmap,
                    blocking,
                    memory_backed,
                    cache_size_mb,
                    size_bytes: _,
                    bs,
                    rotational,
                    max_sectors,
                    faults,
                    zoned,
                    zone,
                } = a;
                checks.extend([
                    ("nr_hw_queues", *submit_queues == b.submit_queues),
                    ("poll_queues", *poll_queues == b.poll_queues),
                    ("queue_depth", *hw_queue_depth == b.hw_queue_depth),
                    ("irqmode", *irqmode == b.irqmode),
                    ("completion_nsec", *completion_nsec == b.completion_nsec),
                    ("tags shared across devices", *shared_tags == b.shared_tags),
                    ("shared_tags", *shared_tag_bitmap == b.shared_tag_bitmap),
                    ("blocking", *blocking == b.blocking),
                    ("memory_backed", *memory_backed == b.memory_backed),
                    ("cache_size", *cache_size_mb == b.cache_size_mb),
                    ("bs", *bs == b.bs),
                    ("rotational", *rotational == b.rotational),
                    ("max_sectors", *max_sectors == b.max_sectors),
                    ("fault injection", *faults == b.faults),
                    ("zoned", *zoned == b.zoned),
                    (
                        "zone_size, zone_capacity, zone_nr_conv, zone_max_open, zone_max_active or zone_append_max_sectors",
                        *zone == b.zone,
                    ),
                ]);
            }
            (DriverConfig::Uring(a), DriverConfig::Uring(b)) => {
                let UringConfig {
                    path: _,
                    nr_hw_queues,
                    queue_depth,
                    direct,
                    read_only,
                    sqpoll,
                    sqpoll_cpu,
                    register_files,
                    iopoll,
                    size_bytes: _,
                    extend: _,
                    fixed_buffers,
                    fixed_buf_count: _,
                    fixed_buf_size: _,
                    rotational,
                    virtqueue_size,
                    more_files: _,
                    // Set by the runtime for the whole device, never by a job.
                    single_issuer: _,
                } = a;
                checks.extend([
                    ("nr_hw_queues", *nr_hw_queues == b.nr_hw_queues),
                    ("queue_depth", *queue_depth == b.queue_depth),
                    ("direct", *direct == b.direct),
                    ("readonly", *read_only == b.read_only),
                    ("sqthread_poll", *sqpoll == b.sqpoll),
                    ("sqthread_poll_cpu", *sqpoll_cpu == b.sqpoll_cpu),
                    ("registerfiles", *register_files == b.register_files),
                    ("hipri", *iopoll == b.iopoll),
                    ("fixedbufs", *fixed_buffers == b.fixed_buffers),
                    ("rotational", *rotational == b.rotational),
                    ("virtqueue_size", *virtqueue_size == b.virtqueue_size),
                ]);
            }
            (DriverConfig::Model(a), DriverConfig::Model(b)) => {
                let ModelConfig { spec, faults } = a;
                checks.extend([
                    ("device", *spec == b.spec),
                    ("fault injection", *faults == b.faults),
                ]);
            }
            _ => {}
        }
        checks.iter().find(|(_, same)| !same).map(|(what, _)| *what)
    }

    /// The model that stands for this device in the simulator: the one `device=` names, or
    /// for the null driver a null model with the same queues, depth, completion time, cache
    /// and size.
    pub fn model_spec(&self) -> Result<DeviceSpec, DeviceError> {
        if let Some(m) = &self.sim_model {
            return Ok(m.clone());
        }
        match &self.driver {
            DriverConfig::Model(m) => Ok(m.spec.clone()),
            DriverConfig::Null(c) => Ok(DeviceSpec::parse(&format!(
                "null,submit_queues={},hw_queue_depth={},completion_nsec={},size={},cache_size={}",
                c.submit_queues.max(1),
                c.hw_queue_depth.max(1),
                c.completion_nsec,
                c.size_bytes,
                c.cache_size_mb
            ))?),
            DriverConfig::Uring(u) => Err(not_simulated(&u.path.display().to_string())),
        }
    }

    /// The model of a model driver, or the one `device=` names for another (`None`: there
    /// is none to change).
    pub fn model_spec_mut(&mut self) -> Option<&mut DeviceSpec> {
        match (&mut self.sim_model, &mut self.driver) {
            (Some(m), _) => Some(m),
            (None, DriverConfig::Model(m)) => Some(&mut m.spec),
            _ => None,
        }
    }

    /// The device's capacity in bytes as the jobs see it: the null device's size, the extent
    /// of the files laid out on a real device, a model's own capacity.
    pub fn capacity(&self) -> Result<u64, DeviceError> {
        match &self.driver {
            DriverConfig::Null(c) => Ok(c.size_bytes),
            DriverConfig::Uring(_) => Ok(self.files.end()),
            DriverConfig::Model(m) => {
                let model = mqblk_models::build(&m.spec, mqblk_models::SimRng::new(0))?;
                Ok(model.capacity_sectors() * 512)
            }
        }
    }

    /// Whether the device keeps what is written, so a job's buffers must carry data: a
    /// memory-backed null device or a real file.
    pub fn stores_data(&self) -> bool {
        match &self.driver {
            DriverConfig::Null(c) => c.memory_backed,
            DriverConfig::Uring(_) => true,
            DriverConfig::Model(_) => false,
        }
    }

    /// A zoned device's zones as it reports them when new, and its open-zone limit (0:
    /// none); `None` for a device that is not zoned (or a zoned configuration the device
    /// will refuse, with its own error). Runs use it for fio's `zonemode=zbd`.
    pub fn zones(&self) -> Option<mqblk_workload::zbd::DeviceZones> {
        match &self.driver {
            DriverConfig::Null(c) => {
                let dev = c.zoned_dev()?.ok()?;
                Some(mqblk_workload::zbd::DeviceZones {
                    zones: dev.report(0, usize::MAX),
                    max_open: c.zone.max_open,
                })
            }
            _ => None,
        }
    }

    /// Before a run resolves its jobs: fio's `zonemode=zbd` jobs take the device's zone
    /// size (see [`mqblk_workload::zbd::apply_zone_size`]), where any asks for it.
    pub fn zoned_specs(&self, specs: &[JobSpec]) -> Result<Vec<JobSpec>, DeviceError> {
        let mut out = specs.to_vec();
        if specs.iter().any(|s| s.zonemode_zbd) {
            let zone = self
                .zones()
                .and_then(|z| z.zones.first().map(|f| f.len << mqblk_core::SECTOR_SHIFT));
            mqblk_workload::zbd::apply_zone_size(&mut out, zone)
                .map_err(|e| DeviceError::Invalid(e.to_string()))?;
        }
        Ok(out)
    }
}

/// How a file the run makes is laid out: written out if a job reads it (fio's "Laying out
/// IO file"), else as `fallocate` says.
fn extend_of(f: &LayoutFile) -> mqblk_drivers::Extend {
    use mqblk_drivers::Extend;
    match (f.read || f.overwrite, f.fallocate) {
        _ if f.grows => Extend::Grow,
        (true, _) => Extend::Write,
        (false, Fallocate::Native) => Extend::Allocate,
        (false, Fallocate::None | Fallocate::Truncate) => Extend::Sparse,
    }
}

/// Where block device `path`, or one of its partitions, is mounted: the mounted device and
/// its mount point (from `/proc/self/mounts`, devices compared by their kernel names, so
/// a symlink such as `/dev/disk/by-id/...` is the device it names); `None` for anything
/// that is not a block device.
fn mounted(path: &str) -> Option<(String, String)> {
    use std::os::unix::fs::FileTypeExt;
    let name_of = |p: &str| -> Option<String> {
        let real = std::fs::canonicalize(p).ok()?;
        if !std::fs::metadata(&real).ok()?.file_type().is_block_device() {
            return None;
        }
        Some(real.file_name()?.to_string_lossy().into_owned())
    };
    let ours = name_of(path)?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (src, on) = (f.next()?, f.next()?);
        let theirs = name_of(src)?;
        let partition = std::path::Path::new("/sys/class/block")
            .join(&ours)
            .join(&theirs)
            .exists();
        (theirs == ours || partition).then(|| (src.to_string(), on.to_string()))
    })
}

/// The bytes a `fill_device` job may write to `path`: a block device's size, or a file's
/// length and the room its file system has left for it (`statvfs`'s blocks available to
/// the user), which fio's job writes into until ENOSPC.
fn fill_size(path: &str) -> std::io::Result<u64> {
    let p = std::path::Path::new(path);
    if let Ok(m) = std::fs::metadata(p) {
        if std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()) {
            return real_file_size(path).map(|l| l.unwrap_or(0));
        }
    }
    let len = std::fs::metadata(p).map_or(0, |m| m.len());
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    Ok(len + mqblk_drivers::fs_available(dir)?)
}

/// The size of a real file or block device a job uses as it is (`None`: it does not exist).
fn real_file_size(path: &str) -> std::io::Result<Option<u64>> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::FileTypeExt;
    if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is a character device, which has no size (give size=)",
        ));
    }
    let len = match std::fs::File::open(path) {
        Ok(mut f) => f.seek(SeekFrom::End(0))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if len == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is empty (give size= to extend it)",
        ));
    }
    Ok(Some(len))
}
