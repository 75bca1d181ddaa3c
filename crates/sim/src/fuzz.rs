//! `mqblk sim --seed N --fuzz`: one seed picks a whole random configuration (CPUs, device,
//! queues and depths, scheduler and tunables, merging, faults, jobs), runs it with the
//! invariants checked after every event, and reports a failure with the line that reproduces
//! it. TigerBeetle's VOPR is the model: many short runs, each a pure function of its seed.

use crate::device::{self, DeviceSpec};
use crate::driver::{Faults, Plant};
use crate::engine::{panic_text, Sim, SimConfig, SimError, SimResult};
use crate::workload::{
    DbenchClient, Ext4DbenchClient, Ext4Journal, FioSource, Jbd2, Limit, SimJob, XfsDbenchClient,
    XfsLog,
};
use crate::QueueSettings;
use crate::SimRng;
use mqblk_core::{Blkcg, BvecLayout, IoPrio, IoPrioClass, Nanos, NoMerges};
use mqblk_core::{FaultConfig, FaultSpec};
use mqblk_device::{DeviceConfig, DriverConfig, ModelConfig};
use mqblk_workload::RwMode;
use std::sync::Arc;

/// A configuration drawn from a seed, and its jobs.
pub struct FuzzCase {
    pub cfg: SimConfig,
    pub jobs: Vec<SimJob>,
    /// One line describing the configuration.
    pub summary: String,
}

fn pick_device(rng: &mut SimRng) -> DeviceSpec {
    // Models other than `null` are added as they exist; each gets its small-queue variants.
    // The zoned ones (`zns`, `smr`) are not drawn here: their cases come on seeds of their
    // own (see [`case_for`]), so every other seed keeps the configuration it had.
    let models: Vec<&str> = ["null", "hdd", "ssd", "emmc", "virtio", "raid"].to_vec();
    let model = *rng.pick(&models);
    let mut params = Vec::new();
    if model == "null" {
        params.push(("submit_queues".into(), rng.range(1, 4).to_string()));
        params.push((
            "hw_queue_depth".into(),
            rng.pick(&[1u64, 2, 4, 16, 64]).to_string(),
        ));
        params.push((
            "completion_nsec".into(),
            rng.pick(&[0u64, 1_000, 10_000, 100_000]).to_string(),
        ));
        params.push(("size".into(), "256m".into()));
    } else if model == "raid" {
        // Few queues and a small host limit: the budget path gets exercised and the
        // per-event checks stay cheap.
        params.push(("submit_queues".into(), rng.range(1, 8).to_string()));
        params.push(("queue_depth".into(), rng.pick(&[1u64, 4, 32]).to_string()));
        params.push(("can_queue".into(), rng.pick(&[1u64, 2, 16, 64]).to_string()));
        params.push(("ncq".into(), rng.pick(&[1u64, 4, 32]).to_string()));
        // With the write cache the model had before its default became write-through, so
        // flushes are sequenced (and no draw is added: every seed keeps its configuration).
        params.push(("write_cache".into(), "1".into()));
    } else if model == "hdd" {
        params.push(("ncq".into(), rng.pick(&[1u64, 32]).to_string()));
        params.push(("write_cache".into(), rng.below(2).to_string()));
    } else if model == "ssd" {
        params.push(("queueing".into(), rng.below(2).to_string()));
        params.push(("queue_depth".into(), rng.pick(&[1u64, 8, 128]).to_string()));
        params.push(("hw_queues".into(), rng.range(1, 4).to_string()));
        params.push(("wbuf_mb".into(), rng.pick(&[1u64, 64]).to_string()));
    } else if model == "emmc" {
        params.push(("async_prep".into(), rng.below(2).to_string()));
    } else if model == "virtio" {
        params.push(("num_queues".into(), rng.range(1, 4).to_string()));
        params.push(("queue_size".into(), rng.pick(&[2u64, 16, 128]).to_string()));
    }
    DeviceSpec {
        model: model.to_string(),
        params,
    }
}

/// Builds the case for `seed`.
pub fn case(seed: u64, plant: Option<Plant>) -> Result<FuzzCase, SimError> {
    case_for(seed, plant, None)
}

/// The case for `seed` with the scheduler forced to `scheduler` (everything else drawn as
/// for the unrestricted case, so a seed keeps its configuration).
pub fn case_for(
    seed: u64,
    plant: Option<Plant>,
    scheduler: Option<&str>,
) -> Result<FuzzCase, SimError> {
    case_drawn(seed, plant, scheduler, true)
}

/// [`case_for`] as it was before zoned cases came: every seed on the device it draws (the
/// crash runs' cases, whose O_DSYNC writer writes anywhere, which a zoned device refuses).
pub fn case_unzoned(
    seed: u64,
    plant: Option<Plant>,
    scheduler: Option<&str>,
) -> Result<FuzzCase, SimError> {
    case_drawn(seed, plant, scheduler, false)
}

fn case_drawn(
    seed: u64,
    plant: Option<Plant>,
    scheduler: Option<&str>,
    zoned_seeds: bool,
) -> Result<FuzzCase, SimError> {
    let mut rng = SimRng::new(seed ^ 0xf022);
    let nr_cpus = rng.range(1, 6) as u16;
    let device = pick_device(&mut rng);
    let scheds = mqblk_sched::names();
    let drawn = rng.pick(&scheds).to_string();
    let scheduler = scheduler.map_or(drawn, str::to_string);
    let mut sched_tunables = Vec::new();
    if let Some(e) = mqblk_sched::lookup(&scheduler) {
        for t in e.tunables {
            if rng.below(3) != 0 {
                continue;
            }
            let hi = t.max.min(t.default.saturating_mul(4).max(t.min + 1));
            // A range that reaches far below zero (writes_starved) is drawn near zero.
            let lo = t.min.max(-hi);
            let v = match rng.below(4) {
                0 => lo,
                1 => t.default,
                _ => lo + rng.below((hi - lo).max(0) as u64 + 1) as i64,
            };
            sched_tunables.push((t.name.to_string(), v.to_string()));
        }
    }
    // The simulator's own faults at issue and the driver's injected ones, drawn in that
    // order (a seed's draws are its reproduction).
    let (faults, inject) = if rng.below(3) == 0 {
        (Faults::default(), FaultConfig::default())
    } else {
        let mut p = || {
            if rng.below(2) == 0 {
                0.0
            } else {
                rng.unit() * 0.05
            }
        };
        let pct = |x: f64| FaultSpec::probability(x * 100.0);
        let faults = Faults {
            busy: p(),
            fail_at_issue: p(),
        };
        let inject = FaultConfig {
            fail: pct(p()),
            timeout: pct(p()),
            requeue: pct(p()),
            seed: rng.below(u64::MAX),
        };
        (faults, inject)
    };
    let nomerges = *rng.pick(&[NoMerges::None, NoMerges::Simple, NoMerges::All]);
    // A small cgroup hierarchy with random weights for the group schedulers.
    let blkcg = Arc::new(Blkcg::new());
    let mut groups = vec![0u32];
    for path in ["a", "a/b", "c"] {
        let w = rng.range(1, 1000) as u32;
        groups.push(blkcg.set_weight(path, w).expect("valid weight"));
    }
    let queue = QueueSettings {
        scheduler: Some(scheduler.clone()),
        sched_tunables: sched_tunables.clone(),
        nr_requests: *rng.pick(&[0u32, 0, 1, 4, 32]),
        nomerges,
        max_sectors_kb: *rng.pick(&[16u32, 64, 1280]),
        sq_sched_dispatch: rng.below(2) == 0,
        run_all_on_complete: rng.below(3) == 0,
        timeout: Nanos::from_millis(rng.range(20, 200)),
        ..QueueSettings::default()
    };
    let mut cfg = SimConfig {
        seed,
        nr_cpus,
        device: DeviceConfig {
            driver: DriverConfig::Model(ModelConfig {
                spec: device.clone(),
                faults: inject,
            }),
            queue,
            blkcg,
            ..DeviceConfig::default()
        },
        faults,
        plant,
        check_every: 1,
        // A net, not the stall test (the engine's: no completion for three request
        // timeouts): the slowest draws run for minutes of virtual time (an eMMC taking
        // 256 KiB writes split small, nearly each one an allocation-unit copy of ~100 ms:
        // seed 1214 needs more than 600 s, seed 12857 with `--ioscheduler=bfq` too).
        max_time: Nanos::from_secs(3600),
        ..SimConfig::default()
    };
    let nr_jobs = rng.range(1, 4);
    let mut jobs = Vec::new();
    // dbench's clients on XFS of this case share one log; on ext4, one journal, and jbd2
    // (added after the drawn jobs) commits for them.
    let xfs = Arc::new(XfsLog::default());
    let ext4 = Ext4Journal::new(1 << 19);
    let mut ext4_clients = false;
    // What each job drew (its pattern and block size), for a zoned case's jobs.
    let mut drawn_io = Vec::new();
    for j in 0..nr_jobs {
        let cpu = rng.below(nr_cpus as u64) as u16;
        let ios = rng.range(50, 400);
        let (source, kind, iodepth): (Box<dyn crate::workload::Source>, &str, u32) =
            if rng.below(5) == 0 {
                // Every third seed's dbench clients are XFS's (log writes with PREFLUSH and
                // FUA, empty flushes), chosen without a draw so that every seed's
                // configuration stays what it was before they came.
                if seed % 3 == 2 {
                    let c = XfsDbenchClient::new(j, 1 << 19, xfs.clone());
                    (Box::new(c), "dbench-xfs", 1)
                } else if seed % 6 == 3 {
                    // Half of the rest are ext4's, likewise without a draw (the seeds the
                    // BFQ regression tests name are none of these).
                    ext4_clients = true;
                    let c = Ext4DbenchClient::new(j, 1 << 19, ext4.clone());
                    (Box::new(c), "dbench-ext4", 1)
                } else {
                    (Box::new(DbenchClient::new(j, 1 << 19)), "dbench", 1)
                }
            } else {
                let rw = *rng.pick(&[
                    RwMode::Read,
                    RwMode::Write,
                    RwMode::RandRead,
                    RwMode::RandWrite,
                    RwMode::RandRw,
                    RwMode::ReadWrite,
                ]);
                let bs = *rng.pick(&[512u32, 4096, 8192, 65536, 262144]);
                let fsync = *rng.pick(&[0u64, 0, 1, 8]);
                drawn_io.push((j, rw, bs));
                (
                    Box::new(FioSource::new(rw, 50, bs, 0, 64 << 20, seed ^ j, fsync)),
                    "fio",
                    *rng.pick(&[1u32, 2, 8, 32, 128]),
                )
            };
        let class = *rng.pick(&[
            IoPrioClass::Rt,
            IoPrioClass::Be,
            IoPrioClass::Be,
            IoPrioClass::Idle,
        ]);
        jobs.push(SimJob {
            name: format!("job{j}"),
            cpu,
            iodepth,
            batch: *rng.pick(&[1u32, 1, 4, 16]),
            issuer: j as u32 + 1,
            group: *rng.pick(&groups),
            ioprio: IoPrio::new(class, rng.below(8) as u8),
            start_at: Nanos(rng.below(1_000_000)),
            barrier: 0,
            exit: Default::default(),
            after: Vec::new(),
            // An ext4 client stops at a time instead (its drawn I/O count's worth at 1 ms
            // each), as jbd2 does: one stopped between its write and its `fsync` would
            // leave the transaction it joined waiting for its data.
            limit: if kind == "dbench-ext4" {
                Limit {
                    time: Some(Nanos(ios * EXT4_IO_NS)),
                    ..Limit::default()
                }
            } else {
                Limit {
                    ios: Some(ios),
                    ..Limit::default()
                }
            },
            ramp: Nanos::ZERO,
            batch_complete_min: (*rng.pick(&[1u32, 1, 2, 4])).min(iodepth),
            batch_complete_max: u32::MAX,
            iodepth_low: iodepth,
            bw_avg_ms: 500,
            iops_avg_ms: 500,
            source,
            kind: kind.into(),
            logs: None,
            steady: None,
            group_reporting: false,
            exec_prerun: None,
            exec_postrun: None,
            // Heap pages or huge pages (`iomem=shmhuge`): segment counts of both kinds.
            // (by the job's parity, leaving the draws of every other setting as they were).
            bvecs: if j % 2 == 0 {
                BvecLayout::PAGES
            } else {
                BvecLayout {
                    run: 2 << 20,
                    skip: 0,
                }
            },
        });
    }
    // Every tenth seed (chosen without a draw, so every other seed's configuration stays what
    // it was) runs on a zoned device, `zns` or `smr` with small zones, its fio jobs writing
    // at the zones' write pointers (fio's zonemode=zbd) and its dbench clients turned into
    // such writers: the device fails any write off a write pointer, and the run with it.
    let mut device = device;
    if zoned_seeds && seed % 10 == 9 {
        let zoned = zoned_case(seed, &mut jobs, &drawn_io, &mut cfg)?;
        device = zoned;
        ext4_clients = false;
    }
    if ext4_clients {
        // jbd2, drawing nothing, with no limit of its own: it ends asleep once every other
        // job has (nobody is left to ask it for a commit).
        let mut jbd = SimJob::new(
            "jbd2".into(),
            0,
            1,
            nr_jobs as u32 + 1,
            Limit::default(),
            Box::new(Jbd2::new(ext4.clone())),
            "journal",
        );
        jbd.ioprio = IoPrio::new(IoPrioClass::Be, 0);
        jobs.push(jbd);
    }
    let dev = std::iter::once(device.model.clone())
        .chain(device.params.iter().map(|(k, v)| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(",");
    let tun = sched_tunables
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    // Drawn last, so the draws above (and the cases they made) stay as they were.
    cfg.device.queue.kblockd_runs = rng.below(3) == 0;
    cfg.device.queue.delay_run_rearms = rng.below(2) == 0;
    cfg.device.queue.flush_via_sched = rng.below(2) == 0;
    let summary = format!(
        "cpus={nr_cpus} device={dev} sched={scheduler}[{tun}] nr_requests={} nomerges={nomerges:?} sq_dispatch={} run_all={} kblockd_runs={} delay_run_rearms={} flush_via_sched={} faults={:?} jobs={} ({})",
        cfg.device.queue.nr_requests,
        cfg.device.queue.sq_sched_dispatch,
        cfg.device.queue.run_all_on_complete,
        cfg.device.queue.kblockd_runs,
        cfg.device.queue.delay_run_rearms,
        cfg.device.queue.flush_via_sched,
        cfg.faults,
        jobs.len(),
        jobs.iter().map(|j| j.kind.as_str()).collect::<Vec<_>>().join(",")
    );
    Ok(FuzzCase { cfg, jobs, summary })
}

/// Turns the case into a zoned one (see [`case_for`]): the device becomes `zns` or `smr`
/// with 16 MiB zones, and each job a `zonemode=zbd` writer or reader over 64 MiB of its
/// own, with its drawn pattern and block size (a dbench client's writes become random
/// 4 KiB writes). Returns the device.
fn zoned_case(
    seed: u64,
    jobs: &mut [SimJob],
    drawn: &[(u64, RwMode, u32)],
    cfg: &mut SimConfig,
) -> Result<DeviceSpec, SimError> {
    let spec = if (seed / 10) % 2 == 0 {
        "zns,zone_mb=16,zone_cap_mb=12,max_open=4,max_active=6"
    } else {
        "smr,zone_mb=16,nr_conv=2,ncq=32"
    };
    let device = DeviceSpec::parse(spec)?;
    let model = device::build(&device, SimRng::new(0))?;
    let zones = crate::jobs::zones_of(model.as_ref());
    let capacity = model.capacity_sectors() * 512;
    let specs: Vec<mqblk_workload::JobSpec> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let (rw, bs) = drawn
                .iter()
                .find(|d| d.0 == i as u64)
                .map_or((RwMode::RandWrite, 4096), |d| (d.1, d.2.max(4096)));
            let mut s = FioSource::spec(rw, 50, bs, (i as u64) << 26, 64 << 20, seed ^ i as u64, 0);
            s.name = j.name.clone();
            s.zonemode_zbd = true;
            s.direct = true;
            s.max_open_zones = 2;
            s
        })
        .collect();
    let resolved = crate::jobs::resolve(&specs, capacity, seed, zones.as_ref())?;
    for (j, job) in jobs.iter_mut().zip(&resolved) {
        j.source = Box::new(FioSource::of(job));
        j.kind = "fio-zbd".into();
        j.iodepth = j.iodepth.max(1);
    }
    cfg.zoned_in_order = true;
    if let DriverConfig::Model(m) = &mut cfg.device.driver {
        m.spec = device.clone();
    }
    Ok(device)
}

/// Virtual time an ext4 client runs for per I/O of its drawn count.
const EXT4_IO_NS: u64 = 1_000_000;

/// The outcome of one fuzz run.
pub struct FuzzOutcome {
    pub seed: u64,
    pub summary: String,
    pub result: Result<SimResult, String>,
    /// The state dump at the failure.
    pub dump: String,
}

/// Runs the case for `seed`; a panic in the core counts as a failure, not a crash.
pub fn run_one(seed: u64, plant: Option<Plant>) -> FuzzOutcome {
    run_one_for(seed, plant, None)
}

/// [`run_one`] with the scheduler forced.
pub fn run_one_for(seed: u64, plant: Option<Plant>, scheduler: Option<&str>) -> FuzzOutcome {
    let (summary, result, dump) = guarded(|| case_for(seed, plant, scheduler), Sim::run);
    FuzzOutcome {
        seed,
        summary,
        result,
        dump,
    }
}

/// Builds a case with `build` and runs it with `run`, a panic in either counted as the
/// run's failure: (the case's summary, the outcome, the state dump at a failure).
pub(crate) fn guarded<R>(
    build: impl FnOnce() -> Result<FuzzCase, SimError> + std::panic::UnwindSafe,
    run: impl FnOnce(Sim) -> Result<R, SimError>,
) -> (String, Result<R, String>, String) {
    let c = match std::panic::catch_unwind(build) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return (String::new(), Err(e.to_string()), String::new()),
        Err(p) => {
            return (
                String::new(),
                Err(format!("panic building the case: {}", panic_text(&p))),
                String::new(),
            )
        }
    };
    let summary = c.summary.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        Sim::new(c.cfg, c.jobs).and_then(run)
    }));
    match r {
        Ok(Ok(res)) => (summary, Ok(res), String::new()),
        Ok(Err(e)) => {
            let dump = e.dump().to_string();
            (summary, Err(e.to_string()), dump)
        }
        Err(p) => (
            summary,
            Err(format!("panic: {}", panic_text(&p))),
            String::new(),
        ),
    }
}
