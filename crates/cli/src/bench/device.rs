//! Builds the device a bench run goes through: tag set, driver, scheduler and queue.

use mqblk_core::{Driver, QueueLimits, TagSetConfig};
use mqblk_core::{NoMerges, QueueConfig, RequestQueue, TagSet, TagSetFlags};
use mqblk_drivers::{
    FaultConfig, FaultSpec, IrqMode, NullConfig, NullDevice, UringConfig, UringDevice,
};
use std::sync::Arc;

/// Device and queue options of a run (ours, not fio's), with their defaults.
#[derive(Clone, Debug)]
pub struct DeviceOpts {
    pub driver: String,
    pub nr_hw_queues: u16,
    pub queue_depth: u32,
    pub nr_requests: u32,
    pub nr_ctx: u16,
    pub shared_tags: bool,
    pub blocking: bool,
    pub irqmode: IrqMode,
    pub completion_nsec: u64,
    pub memory_backed: bool,
    pub size_bytes: u64,
    pub faults: FaultConfig,
    pub max_sectors_kb: u32,
    pub max_segments: u16,
    pub nomerges: NoMerges,
    pub sq_sched_dispatch: bool,
    /// Run all hardware queues after each completion batch (SCSI's behaviour; seed 000).
    pub run_all_on_complete: bool,
    pub scheduler: String,
    pub sched_tunables: Vec<(String, String)>,
    /// For `driver=uring`: the file or block device, O_DIRECT, and the size to create or
    /// extend a regular file to (`None`: use it as it is).
    pub filename: Option<String>,
    pub direct: bool,
    pub create_size: Option<u64>,
    /// Reap completions from a worker thread per hardware queue (the runtime's
    /// `CompletionMode::Worker`) instead of only in the submitters.
    pub hctx_workers: bool,
    /// For `driver=uring`: register a pool of `fixed_buf_count` buffers of `fixed_buf_size`
    /// bytes (fio's `fixedbufs`).
    pub fixed_buffers: bool,
    pub fixed_buf_count: u32,
    pub fixed_buf_size: u32,
    /// For `driver=sim`: the simulator's device model serving real I/O in real time
    /// (`hdd,ncq=32`, `ssd`, ...).
    pub sim_device: Option<String>,
    /// The cgroups the jobs' I/O is charged to (fio's `cgroup`).
    pub blkcg: std::sync::Arc<mqblk_core::Blkcg>,
}

impl Default for DeviceOpts {
    fn default() -> DeviceOpts {
        DeviceOpts {
            driver: "null".into(),
            nr_hw_queues: 1,
            queue_depth: 64,
            nr_requests: 0,
            nr_ctx: 0,
            shared_tags: false,
            blocking: false,
            irqmode: IrqMode::None,
            completion_nsec: 10_000,
            memory_backed: false,
            size_bytes: 1 << 30,
            faults: FaultConfig {
                fail: FaultSpec::default(),
                timeout: FaultSpec::default(),
                requeue: FaultSpec::default(),
                seed: 0,
            },
            max_sectors_kb: 1280,
            max_segments: 128,
            nomerges: NoMerges::All,
            sq_sched_dispatch: true,
            run_all_on_complete: false,
            scheduler: "none".into(),
            sched_tunables: Vec::new(),
            filename: None,
            direct: false,
            create_size: None,
            hctx_workers: false,
            fixed_buffers: false,
            fixed_buf_count: 0,
            fixed_buf_size: 0,
            sim_device: None,
            blkcg: Default::default(),
        }
    }
}

/// A built device. `null` gives tests and tools the driver's own handles (data-corruption
/// faults, stored bytes).
pub struct Device {
    pub queue: Arc<RequestQueue>,
    pub null: Option<Arc<NullDevice>>,
    pub uring: Option<Arc<UringDevice>>,
}

/// The driver-specific half of a device: its tag set, the driver and its queue limits.
struct Built {
    set_cfg: TagSetConfig,
    driver: Arc<dyn Driver>,
    limits: QueueLimits,
    null: Option<Arc<NullDevice>>,
    uring: Option<Arc<UringDevice>>,
}

fn build_null(opts: &DeviceOpts) -> Result<Built, String> {
    let cfg = NullConfig {
        submit_queues: opts.nr_hw_queues,
        hw_queue_depth: opts.queue_depth,
        irqmode: opts.irqmode,
        completion_nsec: opts.completion_nsec,
        shared_tag_bitmap: opts.shared_tags,
        blocking: opts.blocking,
        memory_backed: opts.memory_backed,
        size_bytes: opts.size_bytes,
        faults: opts.faults,
        ..NullConfig::default()
    };
    cfg.validate().map_err(|e| e.to_string())?;
    let set_cfg = cfg.tag_set_config();
    let null = NullDevice::new(cfg).map_err(|e| e.to_string())?;
    let limits = null.config().queue_limits();
    Ok(Built {
        set_cfg,
        driver: null.clone(),
        limits,
        null: Some(null),
        uring: None,
    })
}

/// A simulator device model driven by the wall clock.
fn build_sim(opts: &DeviceOpts) -> Result<Built, String> {
    let spec = mqblk_sim::DeviceSpec::parse(opts.sim_device.as_deref().unwrap_or("hdd"))?;
    let model = mqblk_sim::device::build(&spec, mqblk_sim::SimRng::new(1))?;
    let drv = Arc::new(mqblk_sim::realtime::RealtimeDriver::new(model));
    let set_cfg = TagSetConfig::new(drv.nr_hw_queues(), drv.queue_depth());
    let limits = QueueLimits {
        capacity_sectors: drv.capacity_sectors(),
        ..QueueLimits::default()
    };
    Ok(Built {
        set_cfg,
        driver: drv,
        limits,
        null: None,
        uring: None,
    })
}

fn build_uring(opts: &DeviceOpts) -> Result<Built, String> {
    let path = opts
        .filename
        .as_ref()
        .ok_or("driver=uring: needs filename= (a file or block device)")?;
    let cfg = UringConfig {
        path: path.into(),
        nr_hw_queues: opts.nr_hw_queues,
        queue_depth: opts.queue_depth,
        direct: opts.direct,
        size_bytes: opts.create_size,
        fixed_buffers: opts.fixed_buffers,
        fixed_buf_count: opts.fixed_buf_count,
        fixed_buf_size: opts.fixed_buf_size.max(4096),
        ..UringConfig::default()
    };

    cfg.validate().map_err(|e| e.to_string())?;
    let set_cfg = cfg.tag_set_config();
    let dev = UringDevice::open(cfg).map_err(|e| format!("filename={path}: {e}"))?;
    let limits = dev.queue_limits();
    Ok(Built {
        set_cfg,
        driver: dev.clone(),
        limits,
        null: None,
        uring: Some(dev),
    })
}

/// Builds the device for `nr_submitters` job threads. Errors are one line naming the option.
pub fn build(opts: &DeviceOpts, nr_submitters: usize) -> Result<Device, String> {
    build_traced(opts, nr_submitters, None)
}

/// [`build`], with the queue's events also going to `tracer` (`--trace`).
pub fn build_traced(
    opts: &DeviceOpts,
    nr_submitters: usize,
    tracer: Option<Arc<dyn mqblk_core::Tracer>>,
) -> Result<Device, String> {
    let elv = mqblk_sched::lookup(&opts.scheduler).ok_or_else(|| {
        format!(
            "ioscheduler '{}': unknown scheduler (available: {})",
            opts.scheduler,
            mqblk_sched::names().join(", ")
        )
    })?;
    let built = match opts.driver.as_str() {
        "null" => build_null(opts)?,
        "uring" => build_uring(opts)?,
        "sim" => build_sim(opts)?,
        other => {
            return Err(format!(
                "driver '{other}': unknown driver (available: null, uring, sim)"
            ))
        }
    };
    let mut set_cfg = built.set_cfg;
    if opts.shared_tags {
        set_cfg.flags = set_cfg.flags.union(TagSetFlags::TAG_HCTX_SHARED);
    }
    let set = TagSet::new(set_cfg).map_err(|e| e.to_string())?;
    let nr_ctx = if opts.nr_ctx == 0 {
        nr_submitters.max(1) as u16
    } else {
        opts.nr_ctx
    };
    let mut limits = built.limits;
    // Zero means "the block layer's default", as for null_blk's max_sectors.
    if opts.max_sectors_kb > 0 {
        limits.max_sectors = opts.max_sectors_kb.saturating_mul(2);
    }
    if opts.max_segments > 0 {
        limits.max_segments = opts.max_segments;
    }
    let qcfg = QueueConfig {
        nr_ctx,
        limits,
        nomerges: opts.nomerges,
        nr_requests: opts.nr_requests,
        sq_sched_dispatch: opts.sq_sched_dispatch,
        run_all_on_complete: opts.run_all_on_complete,
        tracer: mqblk_core::TraceHook(tracer),
        blkcg: opts.blkcg.clone(),
        ..QueueConfig::default()
    };
    let queue = RequestQueue::new(set, built.driver, Some(elv), qcfg).map_err(|e| e.to_string())?;
    apply_tunables(&queue, &opts.sched_tunables)?;
    Ok(Device {
        queue,
        null: built.null,
        uring: built.uring,
    })
}

/// Writes `sched.NAME=VALUE` options into the scheduler's tunables.
pub fn apply_tunables(queue: &RequestQueue, tunables: &[(String, String)]) -> Result<(), String> {
    for (name, value) in tunables {
        let elv = queue
            .elevator()
            .ok_or_else(|| format!("sched.{name}: scheduler 'none' has no tunables"))?;
        elv.tunables()
            .store(name, value)
            .map_err(|e| format!("sched.{name}: {e}"))?;
    }
    Ok(())
}
