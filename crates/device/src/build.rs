//! Builds a [`DeviceConfig`] with real threads and the wall clock: tag set, driver,
//! scheduler and queue. [`new_queue`] is the part the simulator shares: the queue over a
//! tag set and a driver, with the scheduler resolved by name or alias and its tunables set.

use crate::config::{DeviceConfig, DriverKind, QueueSettings};
use crate::DeviceError;
use mqblk_core::{Blkcg, Driver, QueueLimits, TagSetConfig, TraceHook};
use mqblk_core::{QueueConfig, RequestQueue, TagSet, TagSetFlags};
use mqblk_drivers::{NullConfig, NullDevice, UringConfig, UringDevice};
use std::sync::Arc;

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

fn build_null(opts: &DeviceConfig) -> Result<Built, DeviceError> {
    let cfg = NullConfig {
        submit_queues: opts.nr_hw_queues,
        hw_queue_depth: opts.queue_depth,
        irqmode: opts.irqmode,
        completion_nsec: opts.completion_nsec,
        shared_tag_bitmap: opts.shared_tags,
        blocking: opts.blocking,
        memory_backed: opts.memory_backed,
        cache_size_mb: opts.cache_size_mb,
        rotational: opts.rotational.unwrap_or(false),
        size_bytes: opts.size_bytes,
        faults: opts.faults,
        ..NullConfig::default()
    };
    cfg.validate()?;
    let set_cfg = cfg.tag_set_config();
    let null = NullDevice::new(cfg)?;
    let limits = null.config().queue_limits();
    Ok(Built {
        set_cfg,
        driver: null.clone(),
        limits,
        null: Some(null),
        uring: None,
    })
}

/// A device model driven by the wall clock.
fn build_model(opts: &DeviceConfig) -> Result<Built, DeviceError> {
    let spec = opts.model_spec()?;
    let model = mqblk_models::build(&spec, mqblk_models::SimRng::new(1))?;
    let drv = Arc::new(mqblk_models::RealtimeDriver::new(model, &opts.faults));
    let set_cfg = TagSetConfig::new(drv.nr_hw_queues(), drv.queue_depth());
    let limits = drv.queue_limits();
    Ok(Built {
        set_cfg,
        driver: drv,
        limits,
        null: None,
        uring: None,
    })
}

/// The tag set a device's driver asks for, with `shared_tags` applied.
fn with_shared_tags(opts: &DeviceConfig, mut set_cfg: TagSetConfig) -> TagSetConfig {
    if opts.shared_tags {
        set_cfg.flags = set_cfg.flags.union(TagSetFlags::TAG_HCTX_SHARED);
    }
    set_cfg
}

fn build_uring(
    opts: &DeviceConfig,
    nr_ctx: u16,
    nr_submitters: usize,
) -> Result<Built, DeviceError> {
    let path = opts.filename.as_ref().ok_or_else(|| {
        DeviceError::Invalid("driver=uring: needs filename= (a file or block device)".into())
    })?;
    let cfg = UringConfig {
        path: path.into(),
        nr_hw_queues: opts.nr_hw_queues,
        queue_depth: opts.queue_depth,
        direct: opts.direct,
        size_bytes: opts.create_size,
        extend: opts.extend,
        sqpoll: opts.sqpoll,
        sqpoll_cpu: opts.sqpoll_cpu,
        register_files: opts.register_files,
        fixed_buffers: opts.fixed_buffers,
        fixed_buf_count: opts.fixed_buf_count,
        fixed_buf_size: opts.fixed_buf_size.max(4096),
        rotational: opts.rotational,
        virtqueue_size: opts.virtqueue_size,
        more_files: opts.more_files(),
        ..UringConfig::default()
    };

    let uring = |source| DeviceError::Uring {
        path: path.clone(),
        source,
    };
    cfg.validate().map_err(uring)?;
    let set_cfg = cfg.tag_set_config();
    // Rings of their own for the threads that reap each queue (`DeviceConfig::
    // single_issuer`): only where the submitters, one per software queue, are all that
    // reaps (no completion workers, no SQPOLL thread) and no scheduler hands one
    // submitter's requests to another's queue run: those would wait on the runner's ring
    // until it next enters the kernel.
    let mut cfg = cfg;
    cfg.single_issuer = opts.single_issuer
        && !opts.sqpoll
        && !opts.hctx_workers
        && usize::from(nr_ctx) >= nr_submitters
        && opts
            .queue
            .elevator_type(&with_shared_tags(opts, set_cfg.clone()))?
            .name
            == "none";
    let dev = UringDevice::open(cfg).map_err(uring)?;
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
pub fn build(opts: &DeviceConfig, nr_submitters: usize) -> Result<Device, DeviceError> {
    build_traced(opts, nr_submitters, None)
}

/// [`build`], with the queue's events also going to `tracer` (`--trace`).
pub fn build_traced(
    opts: &DeviceConfig,
    nr_submitters: usize,
    tracer: Option<Arc<dyn mqblk_core::Tracer>>,
) -> Result<Device, DeviceError> {
    if opts.faults.is_enabled() && opts.driver == DriverKind::Uring {
        return Err(DeviceError::Invalid(
            "fault injection (fail_*, timeout_*, requeue_*) needs driver=null or a model, not driver=uring".into(),
        ));
    }
    opts.faults.validate()?;
    let nr_ctx = if opts.nr_ctx == 0 {
        nr_submitters.max(1) as u16
    } else {
        opts.nr_ctx
    };
    let built = match opts.driver {
        DriverKind::Null => build_null(opts)?,
        DriverKind::Uring => build_uring(opts, nr_ctx, nr_submitters)?,
        DriverKind::Model => build_model(opts)?,
    };
    let set = TagSet::new(with_shared_tags(opts, built.set_cfg))?;
    let queue = new_queue(
        set,
        built.driver,
        &opts.queue,
        nr_ctx,
        built.limits,
        TraceHook(tracer),
        opts.blkcg.clone(),
    )?;
    Ok(Device {
        queue,
        null: built.null,
        uring: built.uring,
    })
}

/// The request queue over `set` and `driver` with `settings`: the scheduler looked up by
/// name or alias (an unknown one is an error, never "no scheduler"), the settings' limits
/// over the driver's `limits` (zero keeps the driver's), and the tunables stored.
pub fn new_queue(
    set: Arc<TagSet>,
    driver: Arc<dyn Driver>,
    settings: &QueueSettings,
    nr_ctx: u16,
    mut limits: QueueLimits,
    tracer: TraceHook,
    blkcg: Arc<Blkcg>,
) -> Result<Arc<RequestQueue>, DeviceError> {
    let elv = settings.elevator_type(&set.cfg)?;
    if settings.max_sectors_kb > 0 {
        limits.max_sectors = settings.max_sectors_kb.saturating_mul(2);
    }
    if settings.max_segments > 0 {
        limits.max_segments = settings.max_segments;
    }
    let qcfg = QueueConfig {
        nr_ctx,
        limits,
        nomerges: settings.nomerges,
        timeout: settings.timeout,
        nr_requests: settings.nr_requests,
        sq_sched_dispatch: settings.sq_sched_dispatch,
        run_all_on_complete: settings.run_all_on_complete,
        kblockd_runs: settings.kblockd_runs,
        delay_run_rearms: settings.delay_run_rearms,
        flush_via_sched: settings.flush_via_sched,
        tracer,
        blkcg,
    };
    let queue = RequestQueue::new(set, driver, Some(elv), qcfg)?;
    apply_tunables(&queue, &settings.sched_tunables)?;
    Ok(queue)
}

/// Writes `sched.NAME=VALUE` options into the scheduler's tunables.
pub fn apply_tunables(
    queue: &RequestQueue,
    tunables: &[(String, String)],
) -> Result<(), DeviceError> {
    for (name, value) in tunables {
        let elv = queue.elevator().ok_or_else(|| {
            DeviceError::Invalid(format!("sched.{name}: scheduler 'none' has no tunables"))
        })?;
        elv.tunables()
            .store(name, value)
            .map_err(|source| DeviceError::Tunable {
                name: name.clone(),
                source,
            })?;
    }
    Ok(())
}
