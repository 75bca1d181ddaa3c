//! [`DeviceConfig`] and [`QueueSettings`]: a device and its request queue, described once.

use crate::DeviceError;
use mqblk_core::{Nanos, NoMerges, TagSetConfig, TagSetFlags};
use mqblk_drivers::{FaultConfig, FaultSpec, IrqMode};
use mqblk_models::DeviceSpec;
use mqblk_workload::job::engine::EngineKind;
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
    /// lays out such a file, else allocated.
    pub extend: mqblk_drivers::Extend,
    /// Reap completions from a worker thread per hardware queue.
    pub hctx_workers: bool,
    /// For the uring driver: a kernel thread polls each ring's submission queue (fio's
    /// `sqthread_poll`).
    pub sqpoll: bool,
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
            hctx_workers: false,
            sqpoll: false,
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
        let driver = match (s.engine(), s.driver.as_deref()) {
            // An explicit driver wins: a block engine on it only sets the depth.
            (_, Some(name)) => DriverKind::parse(name)?,
            (Some((_, EngineKind::Null)), None) => DriverKind::Null,
            // Every block I/O engine reads and writes the file through the uring driver.
            (Some((name, _)), None) => {
                if s.filename.is_none() {
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
        let (size_bytes, create_size) = if driver == DriverKind::Uring {
            real_file_size(s)?
        } else {
            (s.device_size(), None)
        };
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
            size_bytes,
            faults: FaultConfig {
                fail: spec(s.fail_nth, s.fail_prob),
                timeout: spec(s.timeout_nth, s.timeout_prob),
                requeue: spec(s.requeue_nth, s.requeue_prob),
                seed: s.fault_seed.unwrap_or(0),
            },
            queue: QueueSettings::from_job(s),
            filename: s.filename.clone(),
            direct: s.direct,
            create_size,
            extend: if s.rw.does_read() {
                mqblk_drivers::Extend::Write
            } else {
                mqblk_drivers::Extend::Allocate
            },
            hctx_workers: s.hctx_workers,
            sqpoll: s.sqthread_poll,
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
        let mut device = DeviceConfig::from_job(first)?;
        for s in &specs[1..] {
            let other = DeviceConfig::from_job(s)?;
            if let Some(what) = device.differs_from(&other) {
                return Err(DeviceError::Invalid(format!(
                    "job '{}': {what} differs from job '{}' (all jobs of a run share one device)",
                    s.name, first.name
                )));
            }
            device.size_bytes = device.size_bytes.max(other.size_bytes);
            device.create_size = device.create_size.max(other.create_size);
            if other.extend == mqblk_drivers::Extend::Write {
                device.extend = other.extend;
            }
        }
        Ok(device)
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
            filename,
            direct,
            create_size: _,
            extend: _,
            hctx_workers,
            sqpoll,
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
            ("filename", *filename == o.filename),
            ("direct", *direct == o.direct),
            ("hctx_workers", *hctx_workers == o.hctx_workers),
            ("sqthread_poll", *sqpoll == o.sqpoll),
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

/// Capacity and creation size of a real file or device, as fio sizes its files: `size`
/// (plus `offset`) creates or extends a regular file; without it the file is used as it is.
fn real_file_size(s: &JobSpec) -> Result<(u64, Option<u64>), DeviceError> {
    let path = s.filename.as_deref().ok_or_else(|| {
        DeviceError::Invalid(format!("job '{}': driver=uring needs filename=", s.name))
    })?;
    if let Some(size) = s.size {
        let want = s.last_offset().saturating_add(size);
        return Ok((want, Some(want)));
    }
    use std::io::{Seek, SeekFrom};
    let len = std::fs::File::open(path)
        .and_then(|mut f| f.seek(SeekFrom::End(0)))
        .map_err(|e| {
            DeviceError::Invalid(format!("filename={path}: {e} (give size= to create it)"))
        })?;
    if len == 0 {
        return Err(DeviceError::Invalid(format!(
            "filename={path}: is empty (give size= to extend it)"
        )));
    }
    Ok((len, None))
}
