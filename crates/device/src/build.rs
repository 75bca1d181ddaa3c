//! Builds a [`DeviceConfig`] with real threads and the wall clock: tag set, driver,
//! scheduler and queue. [`new_queue`] is the part the simulator shares: the queue over a
//! tag set and a driver, with the scheduler resolved by name or alias and its tunables set.

use crate::config::{DeviceConfig, DriverConfig, ModelConfig, QueueSettings};
use crate::DeviceError;
use mqblk_core::{Blkcg, Driver, QueueLimits, TagSetConfig, TraceHook};
use mqblk_core::{QueueConfig, RequestQueue, TagSet};
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

fn build_null(cfg: &NullConfig) -> Result<Built, DeviceError> {
    cfg.validate()?;
    let set_cfg = cfg.tag_set_config();
    let null = NullDevice::new(cfg.clone())?;
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
fn build_model(m: &ModelConfig) -> Result<Built, DeviceError> {
    m.faults.validate()?;
    let model = mqblk_models::build(&m.spec, mqblk_models::SimRng::new(1))?;
    let drv = Arc::new(mqblk_models::RealtimeDriver::new(model, &m.faults));
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

fn build_uring(
    opts: &DeviceConfig,
    cfg: &UringConfig,
    nr_ctx: u16,
    nr_submitters: usize,
) -> Result<Built, DeviceError> {
    let path = cfg.path.display().to_string();
    if path.is_empty() {
        return Err(DeviceError::Invalid(
            "driver=uring: needs filename= (a file or block device)".into(),
        ));
    }
    let mut cfg = UringConfig {
        fixed_buf_size: cfg.fixed_buf_size.max(4096),
        ..cfg.clone()
    };
    let uring = |source| DeviceError::Uring {
        path: path.clone(),
        source,
    };
    cfg.validate().map_err(uring)?;
    let set_cfg = cfg.tag_set_config();
    // Rings of their own for the threads that reap each queue (`UringConfig::
    // single_issuer`, asked for by the runtime): only where the submitters, one per
    // software queue, are all that reaps (no completion workers, no SQPOLL thread). A
    // request one submitter's queue run dispatched for another (a scheduler hands them
    // over all the time) completes on the runner's ring, which reaps it when it next
    // enters the kernel (at once if it sleeps there) and wakes its submitter
    // (`Driver::wake_submitter`).
    cfg.single_issuer = cfg.single_issuer
        && !cfg.sqpoll
        && !opts.hctx_workers
        && usize::from(nr_ctx) >= nr_submitters;
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
    let nr_ctx = if opts.nr_ctx == 0 {
        nr_submitters.max(1) as u16
    } else {
        opts.nr_ctx
    };
    let built = match &opts.driver {
        DriverConfig::Null(c) => build_null(c)?,
        DriverConfig::Uring(c) => build_uring(opts, c, nr_ctx, nr_submitters)?,
        DriverConfig::Model(m) => build_model(m)?,
    };
    let set = TagSet::new(built.set_cfg)?;
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
        zone_write_plugging: settings.zone_write_plugging,
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
