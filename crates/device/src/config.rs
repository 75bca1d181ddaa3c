//! [`DeviceConfig`] and [`QueueSettings`]: a device and its request queue, described once.

use crate::DeviceError;
use mqblk_core::{Nanos, NoMerges, TagSetConfig, TagSetFlags};
use mqblk_drivers::{FaultConfig, FaultSpec, IrqMode};
use mqblk_models::DeviceSpec;
use mqblk_workload::job::engine::EngineKind;
use mqblk_workload::job::{Fallocate, FileLayout, LayoutFile};
use mqblk_workload::JobSpec;
use std::sync::Arc;

/// What carries the I/O.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DriverKind {
    /// The userspace `null_blk` (optionally memory-backed).
    Null,
    /// io_uring over a regular file or a block device.
    Uring,
    /// A device model (`hdd`, `ssd`, ...) serving I/O in real time; in the simulator every
    /// device is a model.
    Model,
}

impl DriverKind {
    /// Parses `driver=NAME`.
    pub fn parse(name: &str) -> Result<DriverKind, DeviceError> {
        match name {
            "null" => Ok(DriverKind::Null),
            "uring" => Ok(DriverKind::Uring),
            "sim" => Ok(DriverKind::Model),
            other => Err(DeviceError::UnknownDriver(other.to_string())),
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
    /// Delayed runs of every queue push back pending ones, as before Linux 5.17
    /// (`QueueConfig::delay_run_rearms`).
    pub delay_run_rearms: bool,
    /// PREFLUSH and FUA writes go through the scheduler, as since Linux 6.5 (the default);
    /// off, they bypass it as before (`QueueConfig::flush_via_sched`).
    pub flush_via_sched: bool,
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
            delay_run_rearms: false,
            flush_via_sched: true,
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
    pub driver: DriverKind,
    pub nr_hw_queues: u16,
    /// Tags per hardware queue (null_blk's `hw_queue_depth`).
    pub queue_depth: u32,
    /// Software queues (0: one per submitter).
    pub nr_ctx: u16,
    /// One tag set shared by all hardware queues (`BLK_MQ_F_TAG_HCTX_SHARED`).
    pub shared_tags: bool,
    /// The driver may sleep in `queue_rq` (`BLK_MQ_F_BLOCKING`).
    pub blocking: bool,
    pub irqmode: IrqMode,
    pub completion_nsec: u64,
    pub memory_backed: bool,
    /// null_blk's `cache_size` (MiB): non-zero gives the null device a write cache.
    pub cache_size_mb: u64,
    /// `/sys/block/DEV/queue/rotational` as the queue reports it to schedulers; `None`: the
    /// driver's own finding (sysfs of the disk under a file for uring, false for null).
    pub rotational: Option<bool>,
    /// For the uring driver: ring descriptors per hardware queue of a virtio-blk disk
    /// without indirect descriptors (`UringConfig::virtqueue_size`); `None` from sysfs.
    pub virtqueue_size: Option<u32>,
    /// Capacity in bytes (a real file's is its size, or `create_size`).
    pub size_bytes: u64,
    pub faults: FaultConfig,
    pub queue: QueueSettings,
    /// For the uring driver: the file or block device, O_DIRECT, and the size to create or
    /// extend a regular file to (`None`: use it as it is).
    pub filename: Option<String>,
    pub direct: bool,
    pub create_size: Option<u64>,
    /// How a regular file is grown to `create_size`: written out if a job reads it, as fio
    /// lays out such a file, else as `fallocate` says.
    pub extend: mqblk_drivers::Extend,
    /// The files the jobs name, laid out on the device (the first is `filename`; the uring
    /// driver opens the rest as [`DeviceConfig::more_files`]).
    pub files: FileLayout,
    /// Reap completions from a worker thread per hardware queue.
    pub hctx_workers: bool,
    /// For the uring driver: a kernel thread polls each ring's submission queue (fio's
    /// `sqthread_poll`).
    pub sqpoll: bool,
    /// The CPU of each SQPOLL thread (fio's `sqthread_poll_cpu`), if pinned.
    pub sqpoll_cpu: Option<u32>,
    /// For the uring driver: register the files with the rings (fio's `registerfiles`).
    pub register_files: bool,
    /// For the uring driver: the caller runs one thread per software queue, each polling
    /// while it has anything in flight and retiring before it ends
    /// (`SubmitterHandle::retire`), as `mqblk bench`'s jobs do, not `serve`'s sessions; the
    /// builder then gives each thread a ring of its own on each queue it reaps
    /// (`UringConfig::single_issuer`) where no scheduler, completion worker or SQPOLL
    /// thread hands one thread's requests to another. Not a job option.
    pub single_issuer: bool,
    /// For the uring driver: register `fixed_buf_count` buffers of `fixed_buf_size` bytes.
    pub fixed_buffers: bool,
    pub fixed_buf_count: u32,
    pub fixed_buf_size: u32,
    /// For a model: its spec (`hdd,ncq=32`, `ssd`, ...).
    pub model: Option<String>,
    /// The cgroups the I/O is charged to.
    pub blkcg: Arc<mqblk_core::Blkcg>,
}

impl Default for DeviceConfig {
    fn default() -> DeviceConfig {
        DeviceConfig {
            driver: DriverKind::Null,
            nr_hw_queues: 1,
            queue_depth: 64,
            nr_ctx: 0,
            shared_tags: false,
            blocking: false,
            irqmode: IrqMode::None,
            completion_nsec: 10_000,
            memory_backed: false,
            cache_size_mb: 0,
            rotational: None,
            virtqueue_size: None,
            size_bytes: 1 << 30,
            faults: FaultConfig::default(),
            queue: QueueSettings::default(),
            filename: None,
            direct: false,
            create_size: None,
            extend: mqblk_drivers::Extend::Sparse,
            files: FileLayout::default(),
            hctx_workers: false,
            sqpoll: false,
            sqpoll_cpu: None,
            register_files: false,
            single_issuer: false,
            fixed_buffers: false,
            fixed_buf_count: 0,
            fixed_buf_size: 0,
            model: None,
            blkcg: Default::default(),
        }
    }
}

impl DeviceConfig {
    /// The device a job's options describe (fio's `ioengine` picks the driver as `driver=`
    /// does). A real file's capacity is read from it unless `size` creates or extends it.
    pub fn from_job(s: &JobSpec) -> Result<DeviceConfig, DeviceError> {
        DeviceConfig::from_jobs(std::slice::from_ref(s))
    }

    /// The settings one job gives its device, without its files and their sizes.
    fn settings_of(s: &JobSpec) -> Result<DeviceConfig, DeviceError> {
        let driver = match (s.engine(), s.driver.as_deref()) {
            // An explicit driver wins: a block engine on it only sets the depth.
            (_, Some(name)) => DriverKind::parse(name)?,
            (Some((_, EngineKind::Null)), None) => DriverKind::Null,
            // Every block I/O engine reads and writes the file through the uring driver.
            (Some((name, _)), None) => {
                if s.filename.is_none() && s.directory.is_none() {
                    return Err(DeviceError::Invalid(format!(
                        "job '{}': ioengine={name} needs filename= or directory= (fio would make a file named after the job in the current directory; mqblk makes it only where told)",
                        s.name
                    )));
                }
                DriverKind::Uring
            }
            // A model named without a driver: the model serves the I/O.
            (None, None) if s.device.is_some() => DriverKind::Model,
            (None, None) => DriverKind::Null,
        };
        if driver == DriverKind::Model && s.rotational.is_some() {
            return Err(DeviceError::Invalid(format!(
                "job '{}': rotational= applies to the null and uring drivers; a device model has its own (hdd is rotational, ssd, emmc and virtio are not)",
                s.name
            )));
        }
        if driver != DriverKind::Uring && s.virtqueue_size.is_some() {
            return Err(DeviceError::Invalid(format!(
                "job '{}': virtqueue_size= applies to driver=uring (the virtio model has its own rings)",
                s.name
            )));
        }
        let spec = |every_nth, probability_pct| FaultSpec {
            every_nth,
            probability_pct,
        };
        Ok(DeviceConfig {
            driver,
            nr_hw_queues: s.nr_hw_queues as u16,
            queue_depth: s.queue_depth,
            nr_ctx: s.nr_ctx as u16,
            shared_tags: s.shared_tags,
            blocking: s.blocking,
            irqmode: match s.irqmode {
                mqblk_workload::IrqMode::None => IrqMode::None,
                mqblk_workload::IrqMode::Softirq => IrqMode::Softirq,
                mqblk_workload::IrqMode::Timer => IrqMode::Timer,
            },
            completion_nsec: s.completion_nsec,
            memory_backed: s.memory_backed,
            cache_size_mb: s.cache_size_mb,
            rotational: s.rotational,
            virtqueue_size: s.virtqueue_size,
            size_bytes: s.device_size(),
            faults: FaultConfig {
                fail: spec(s.fail_nth, s.fail_prob),
                timeout: spec(s.timeout_nth, s.timeout_prob),
                requeue: spec(s.requeue_nth, s.requeue_prob),
                seed: s.fault_seed.unwrap_or(0),
            },
            queue: QueueSettings::from_job(s),
            direct: s.direct,
            hctx_workers: s.hctx_workers,
            sqpoll: s.sqthread_poll,
            sqpoll_cpu: s.sqthread_poll_cpu,
            register_files: s.registerfiles,
            fixed_buffers: s.fixedbufs,
            model: s.device.clone(),
            ..DeviceConfig::default()
        })
    }

    /// The device of several jobs: they must agree on everything but the region each
    /// covers (fio's per-job `size` and `offset`); the device is as large as the largest
    /// needs.
    pub fn from_jobs(specs: &[JobSpec]) -> Result<DeviceConfig, DeviceError> {
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
            device.size_bytes = device.size_bytes.max(other.size_bytes);
        }
        // The files the jobs name, laid out on the device: real ones are sized by what is
        // on disk unless a job sizes them; on the null device or a model, a file without a
        // size stands for the job's whole device.
        let layout = if device.driver == DriverKind::Uring {
            FileLayout::plan(specs, |_, path| real_file_size(path))
        } else {
            FileLayout::plan(specs, |s, _| Ok(Some(s.device_size())))
        }
        .map_err(|e| DeviceError::Invalid(e.to_string()))?;
        if device.driver == DriverKind::Uring {
            let f = layout.files.first().ok_or_else(|| {
                DeviceError::Invalid(format!(
                    "job '{}': driver=uring needs filename=",
                    first.name
                ))
            })?;
            device.filename = Some(f.path.clone());
            device.create_size = f.sized.then_some(f.len);
            device.extend = extend_of(f);
            device.size_bytes = layout.end();
        } else {
            device.size_bytes = device.size_bytes.max(layout.end());
        }
        device.files = layout;
        Ok(device)
    }

    /// The device's files after the first, as the uring driver takes them.
    pub fn more_files(&self) -> Vec<mqblk_drivers::UringFile> {
        self.files
            .files
            .iter()
            .skip(1)
            .map(|f| mqblk_drivers::UringFile {
                path: f.path.clone().into(),
                base: f.base,
                size_bytes: f.sized.then_some(f.len),
                extend: extend_of(f),
            })
            .collect()
    }

    /// The first setting (by option name) in which `other` describes another device. The
    /// region (size), the registered-buffer pool (sized later from the jobs) and the cgroup
    /// registry (one per run) are not settings a job chooses apart from the others.
    fn differs_from(&self, o: &DeviceConfig) -> Option<&'static str> {
        // Destructured without `..`: a field added to the configuration must be placed here,
        // as compared or as deliberately left out.
        let DeviceConfig {
            driver,
            nr_hw_queues,
            queue_depth,
            nr_ctx,
            shared_tags,
            blocking,
            irqmode,
            completion_nsec,
            memory_backed,
            cache_size_mb,
            rotational,
            virtqueue_size,
            size_bytes: _,
            faults,
            queue,
            filename: _,
            files: _,
            direct,
            create_size: _,
            extend: _,
            hctx_workers,
            sqpoll,
            sqpoll_cpu,
            register_files,
            // Set by the runtime for the whole device, never by a job.
            single_issuer: _,
            fixed_buffers,
            fixed_buf_count: _,
            fixed_buf_size: _,
            model,
            blkcg: _,
        } = self;
        let checks = [
            ("driver", *driver == o.driver),
            ("nr_hw_queues", *nr_hw_queues == o.nr_hw_queues),
            ("queue_depth", *queue_depth == o.queue_depth),
            ("nr_ctx", *nr_ctx == o.nr_ctx),
            ("shared_tags", *shared_tags == o.shared_tags),
            ("blocking", *blocking == o.blocking),
            ("irqmode", *irqmode == o.irqmode),
            ("completion_nsec", *completion_nsec == o.completion_nsec),
            ("memory_backed", *memory_backed == o.memory_backed),
            ("cache_size", *cache_size_mb == o.cache_size_mb),
            ("rotational", *rotational == o.rotational),
            ("virtqueue_size", *virtqueue_size == o.virtqueue_size),
            ("fault injection", *faults == o.faults),
            (
                "the queue settings (ioscheduler, sched.*, nr_requests, nomerges, limits)",
                *queue == o.queue,
            ),
            ("direct", *direct == o.direct),
            ("hctx_workers", *hctx_workers == o.hctx_workers),
            ("sqthread_poll", *sqpoll == o.sqpoll),
            ("sqthread_poll_cpu", *sqpoll_cpu == o.sqpoll_cpu),
            ("registerfiles", *register_files == o.register_files),
            ("fixedbufs", *fixed_buffers == o.fixed_buffers),
            ("device", *model == o.model),
        ];
        checks.iter().find(|(_, same)| !same).map(|(what, _)| *what)
    }

    /// The model that stands for this device in the simulator: the one `device=` names, or
    /// for the null driver a null model with the same queues, depth, completion time and
    /// size.
    pub fn model_spec(&self) -> Result<DeviceSpec, DeviceError> {
        if let Some(m) = &self.model {
            // A model named with `device=` stands for the device whatever the driver.
            return Ok(DeviceSpec::parse(m)?);
        }
        match self.driver {
            DriverKind::Model => Ok(DeviceSpec::parse(self.model.as_deref().unwrap_or("hdd"))?),
            DriverKind::Null => Ok(DeviceSpec::parse(&format!(
                "null,submit_queues={},hw_queue_depth={},completion_nsec={},size={},cache_size={}",
                self.nr_hw_queues.max(1),
                self.queue_depth.max(1),
                self.completion_nsec,
                self.size_bytes,
                self.cache_size_mb
            ))?),
            DriverKind::Uring => Err(DeviceError::Invalid(format!(
                "{}: a real file cannot be simulated; describe its device with --device=MODEL",
                self.filename.as_deref().unwrap_or("driver=uring")
            ))),
        }
    }
}

/// How a file the run makes is laid out: written out if a job reads it (fio's "Laying out
/// IO file"), else as `fallocate` says.
fn extend_of(f: &LayoutFile) -> mqblk_drivers::Extend {
    use mqblk_drivers::Extend;
    match (f.read, f.fallocate) {
        (true, _) => Extend::Write,
        (false, Fallocate::Native) => Extend::Allocate,
        (false, Fallocate::None | Fallocate::Truncate) => Extend::Sparse,
    }
}

/// The size of a real file or block device a job uses as it is (`None`: it does not exist).
fn real_file_size(path: &str) -> Result<Option<u64>, String> {
    use std::io::{Seek, SeekFrom};
    let len = match std::fs::File::open(path) {
        Ok(mut f) => f.seek(SeekFrom::End(0)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => Err(e),
    }
    .map_err(|e| format!("filename={path}: {e}"))?;
    if len == 0 {
        return Err(format!(
            "filename={path}: is empty (give size= to extend it)"
        ));
    }
    Ok(Some(len))
}
