//! The seeds' experiments, reproduced in the simulator: `mqblk scenario NAME`.
//!
//! Each scenario builds its configurations, runs them (all from one seed), and returns a
//! table shaped like the seed's, the seed's own figures beside ours, a JSON form and an SVG
//! chart. `quick` shortens the runs (fewer points, less virtual time) for the test suite;
//! the direction of each result holds in both.

mod bfq_merge;
mod mmc;
mod nr_queued;
pub mod sensitivity;
mod single_hctx;
mod virtio;
mod zoned;

use crate::cost::CostProfile;
use crate::device::DeviceSpec;
use crate::engine::{Sim, SimConfig, SimResult};
use crate::workload::{FioSource, Limit, SimJob};
use mqblk_core::Nanos;
use mqblk_workload::RwMode;

/// Why a scenario or a sweep of one could not give its report.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// One of its runs failed (a stall, a violated invariant, a configuration refused);
    /// `dump` holds the first lines of the state at the failure.
    #[error("{source}{dump}")]
    Run {
        source: crate::SimError,
        dump: String,
    },
    /// `--trace`'s files could not be written.
    #[error("--trace={path}: {source}")]
    Trace {
        path: std::path::PathBuf,
        source: mqblk_trace::TraceError,
    },
    /// An embedded capture did not parse.
    #[error(transparent)]
    Capture(#[from] mqblk_trace::TraceError),
    /// An embedded capture gave no loadfile.
    #[error(transparent)]
    Loadfile(#[from] crate::workload::LoadfileError),
    #[error(transparent)]
    Model(#[from] mqblk_models::ModelError),
    /// A perturbation or an option the scenario cannot take.
    #[error("{0}")]
    Invalid(String),
    /// A run of a sweep (`--sensitivity`): which one, and why.
    #[error("{run}: {source}")]
    Sweep {
        run: String,
        source: Box<ScenarioError>,
    },
}

impl From<crate::SimError> for ScenarioError {
    /// A failed run, with the first 30 lines of its state dump.
    fn from(source: crate::SimError) -> ScenarioError {
        let dump: String = source
            .dump()
            .lines()
            .take(30)
            .map(|l| format!("\n{l}"))
            .collect();
        ScenarioError::Run { source, dump }
    }
}

/// How to run a scenario.
#[derive(Clone, Debug)]
pub struct ScenarioOpts {
    pub seed: u64,
    /// Fewer points and shorter runs (the test suite's setting).
    pub quick: bool,
    /// Restrict to these schedulers (empty: the scenario's own list).
    pub schedulers: Vec<String>,
    /// Whose scheduler costs are charged: the kernel's (the default here, to predict the
    /// kernel's results) or mqblk's own.
    pub profile: CostProfile,
    /// One model or cost parameter scaled in every run (`--sensitivity`).
    pub perturb: Option<Perturb>,
    /// Write each simulated run's events as a blktrace set (`--trace=PREFIX`).
    pub trace: Option<std::sync::Arc<TraceRuns>>,
}

/// `mqblk scenario --trace=PREFIX`: run N of the scenario (in the order runs start) goes to
/// `PREFIX.N.blktrace.*`, and a line on stderr says which device and scheduler it ran.
#[derive(Debug)]
pub struct TraceRuns {
    prefix: std::path::PathBuf,
    next: std::sync::atomic::AtomicUsize,
}

impl TraceRuns {
    pub fn new(prefix: &std::path::Path) -> TraceRuns {
        TraceRuns {
            prefix: prefix.to_path_buf(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The writer of the next run, and its name.
    fn writer(&self) -> (std::sync::Arc<mqblk_trace::TraceWriter>, std::path::PathBuf) {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut name = self.prefix.clone().into_os_string();
        name.push(format!(".{n}"));
        let name = std::path::PathBuf::from(name);
        (
            std::sync::Arc::new(mqblk_trace::TraceWriter::new(&name)),
            name,
        )
    }
}

/// A parameter scaled by a factor: a device model's physical parameter (as `--device`
/// spells it), a cost table entry (as `--cost` spells it), or `sched_cost`, every hook cost
/// of the scheduler under the run's cost profile.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Perturb {
    pub param: String,
    pub factor: f64,
}

/// The name of the perturbation that scales the scheduler's hook costs.
pub const SCHED_COST: &str = "sched_cost";
/// The name of the perturbation that scales every line cost of the run's machine
/// ([`crate::topology::Topology`]; none without one).
pub const TOPOLOGY_NS: &str = "topology_ns";

impl Perturb {
    /// Applies the perturbation to one run's configuration. A device parameter the run's
    /// model does not have is left alone (it is some other model's).
    fn apply(&self, cfg: &mut SimConfig) -> Result<(), ScenarioError> {
        if cfg.cost.scale(&self.param, self.factor) {
            return Ok(());
        }
        if self.param == TOPOLOGY_NS {
            if let Some(t) = &mut cfg.topology {
                for ns in [
                    &mut t.smt_ns,
                    &mut t.llc_ns,
                    &mut t.socket_ns,
                    &mut t.remote_ns,
                ] {
                    *ns = (*ns as f64 * self.factor).round() as u64;
                }
            }
            return Ok(());
        }
        if self.param == SCHED_COST {
            let Some(elv) = cfg
                .device
                .queue
                .scheduler
                .as_deref()
                .and_then(mqblk_sched::lookup)
            else {
                return Ok(());
            };
            let base = cfg
                .elv_cost
                .unwrap_or_else(|| cfg.profile.elv_cost(elv.name, elv.cost, &cfg.kernel_costs));
            cfg.elv_cost = Some(crate::cost::scale_elv_cost(base, |ns| {
                (ns as f64 * self.factor).round() as u64
            }));
            return Ok(());
        }
        let Some(spec) = cfg.device.model_spec_mut() else {
            return Err(ScenarioError::Invalid(format!(
                "--sensitivity: {}: the scenario's device is not a model",
                self.param
            )));
        };
        let read = mqblk_models::physical_params(spec)?;
        if let Some((_, v)) = read.iter().find(|(k, _)| *k == self.param) {
            let scaled = ((*v as f64) * self.factor).round() as u64;
            spec.params.retain(|(k, _)| *k != self.param);
            spec.params.push((self.param.clone(), scaled.to_string()));
        }
        Ok(())
    }
}

impl Default for ScenarioOpts {
    fn default() -> ScenarioOpts {
        ScenarioOpts {
            seed: 1,
            quick: false,
            schedulers: Vec::new(),
            profile: CostProfile::Kernel,
            perturb: None,
            trace: None,
        }
    }
}

/// The counters that show a mechanism at work in one run: lock waits, queue runs,
/// dispatch-list parks, budget refusals, the device's own counters (seeks, programs, ...)
/// and the scheduler's (idles, merges, ...).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Evidence {
    /// Time CPUs spent waiting for the scheduler's lock (`dd->lock`, `bfqd->lock`), summed.
    pub elevator_lock_wait_ms: f64,
    /// Acquisitions of it that found it held.
    pub elevator_lock_contended: u64,
    /// Waits for the driver's per-hardware-queue locks (virtio's virtqueue lock), summed.
    pub driver_lock_wait_ms: f64,
    pub hctx_runs: u64,
    /// Requests the hardware queues issued to the driver (runs per request issued is what
    /// the runs cost, and how many found nothing to do).
    pub issued: u64,
    /// Times a dispatch stopped and parked what was left on a hardware queue's dispatch list
    /// (busy driver, no budget, no tag).
    pub dispatch_parks: u64,
    /// `get_budget` refusals.
    pub budget_denied: u64,
    /// Armed runs pushed back by another queue's delayed re-run of every queue.
    pub runs_postponed: u64,
    /// Of those, the ones while the queue had work pending (a request waited longer).
    pub runs_postponed_pending: u64,
    pub device: Vec<(&'static str, u64)>,
    pub scheduler: Vec<(&'static str, u64)>,
}

impl Evidence {
    pub fn of(r: &SimResult) -> Evidence {
        let ms = |ns: u64| ns as f64 / 1e6;
        let elevator = r.locks.iter().find(|l| l.name == "elevator");
        Evidence {
            elevator_lock_wait_ms: elevator.map_or(0.0, |l| ms(l.wait_ns)),
            elevator_lock_contended: elevator.map_or(0, |l| l.contended),
            driver_lock_wait_ms: ms(r
                .locks
                .iter()
                .filter(|l| l.name.starts_with("hw"))
                .map(|l| l.wait_ns)
                .sum()),
            hctx_runs: r.hctx.iter().map(|h| h.runs).sum(),
            issued: r.hctx.iter().map(|h| h.issued).sum(),
            dispatch_parks: r.hctx.iter().map(|h| h.busy).sum(),
            budget_denied: r.driver.budget_denied,
            runs_postponed: r.hctx.iter().map(|h| h.postponed).sum(),
            runs_postponed_pending: r.hctx.iter().map(|h| h.postponed_pending).sum(),
            device: r.model_stats.clone(),
            scheduler: r.queue.sched.pairs(),
        }
    }

    /// One line: the block layer's counters, then those of the device's and the
    /// scheduler's named in `keep`.
    pub fn line(&self, keep: &[&str]) -> String {
        let named = |pairs: &[(&'static str, u64)]| -> String {
            pairs
                .iter()
                .filter(|(k, _)| keep.contains(k))
                .map(|(k, v)| format!(" {k} {v}"))
                .collect()
        };
        format!(
            "elevator lock wait {:.1} ms ({} contended), driver lock wait {:.1} ms, hctx runs {} for {} requests, dispatch-list parks {}, budget refused {};{}{}",
            self.elevator_lock_wait_ms,
            self.elevator_lock_contended,
            self.driver_lock_wait_ms,
            self.hctx_runs,
            self.issued,
            self.dispatch_parks,
            self.budget_denied,
            named(&self.device),
            named(&self.scheduler)
        )
    }
}

/// A finished scenario.
pub struct ScenarioReport {
    pub name: &'static str,
    pub title: String,
    /// Our table, shaped like the seed's.
    pub table: String,
    /// The seed's figures and how ours compare (direction and ratios).
    pub comparison: String,
    /// The counters of the runs the direction rests on ([`Evidence`]), and which mechanism
    /// they show drove the result.
    pub evidence: String,
    pub json: serde_json::Value,
    pub svg: String,
    /// True when our result points the same way as the seed's.
    pub direction_holds: bool,
    /// The ratio the direction rests on, and what it is the ratio of (the seed's value of
    /// it is in `comparison`).
    pub key_ratio: f64,
    pub key_label: String,
}

pub struct Scenario {
    /// The name `mqblk scenario` takes.
    pub name: &'static str,
    /// The subject of the kernel mail whose experiment it reproduces.
    pub mail: &'static str,
    /// What it runs, in a line.
    pub about: &'static str,
    /// The device the scenario runs on, as `--device` spells it (whose physical parameters
    /// `--sensitivity` varies, from the values it has there).
    pub model: &'static str,
    /// The machine its CPUs are (`--topology`), whose line costs `--sensitivity` varies
    /// too; `None`: the cost table's flat `line_ns`.
    pub topology: Option<&'static str>,
    pub run: fn(&ScenarioOpts) -> Result<ScenarioReport, ScenarioError>,
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "single-hctx-dispatch",
        mail: "blk-mq: Improve performance of non-mq IO schedulers with multiple HW queues",
        about: "dbench-like clients on a disk behind a 64-queue RAID HBA: MQ, SQ, MQ-patched",
        model: "raid",
        topology: Some(single_hctx::MACHINE),
        run: single_hctx::run,
    },
    Scenario {
        name: "mmc-blk-mq",
        mail: "multiqueue for MMC/SD third try",
        about:
            "dd and find on eMMC: legacy single queue with a scheduler vs blk-mq, async pre/post",
        model: "emmc",
        topology: None,
        run: mmc::run,
    },
    Scenario {
        name: "deadline-nr-queued",
        mail: "block/mq-deadline: Speed up the dispatch of low-priority requests",
        about: "96 of 128 CPUs reading 4k at QD128 through mq-deadline: per-CPU sums vs O(1) count",
        model: "ssd",
        topology: None,
        run: nr_queued::run,
    },
    Scenario {
        name: "virtio-multi-vq",
        mail: "block: virtio-blk: support multi vq per virtio-blk",
        about: "4 vCPUs, randread 4k QD64, jobs 2 and 4, virtio-blk with 1 vs 2 virtqueues",
        model: "virtio",
        topology: None,
        run: virtio::run,
    },
    Scenario {
        name: "bfq-no-merge",
        mail: "block, bfq: do not merge queues on flash storage with queueing",
        about: "dbench-like, 6 clients and a journal at higher weight on an SSD: BFQ with and without queue merging",
        model: bfq_merge::SSD,
        topology: None,
        run: bfq_merge::run,
    },
    Scenario {
        name: "zone-write-plugging",
        mail: "Zone write plugging",
        about: "4 zoned writers at QD128 beside a reader, mq-deadline on zns and smr: zone write locking (before 6.10) vs zone write plugging",
        model: "zns",
        topology: None,
        run: zoned::run,
    },
];

pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// Runs one configuration, with the options' perturbation applied; errors carry the state
/// dump's first lines.
pub(crate) fn run_sim(
    o: &ScenarioOpts,
    mut cfg: SimConfig,
    jobs: Vec<SimJob>,
) -> Result<SimResult, ScenarioError> {
    if let Some(p) = &o.perturb {
        p.apply(&mut cfg)?;
    }
    let traced = o.trace.as_ref().map(|t| {
        let (w, name) = t.writer();
        let model = cfg.device.model_spec().map_or_else(
            |e| e.to_string(),
            |s| {
                let params = s.params.iter().map(|(k, v)| format!(",{k}={v}"));
                format!("{}{}", s.model, params.collect::<String>())
            },
        );
        eprintln!(
            "trace {}: {} on {model}, {} jobs",
            name.display(),
            cfg.device.queue.scheduler.as_deref().unwrap_or("none"),
            jobs.len()
        );
        cfg.tracer = Some(w.clone());
        (w, name)
    });
    let r = Sim::new(cfg, jobs).and_then(Sim::run)?;
    if let Some((w, path)) = traced {
        w.finish()
            .map_err(|source| ScenarioError::Trace { path, source })?;
    }
    Ok(r)
}

/// The model `spec` under a queue with `queue`'s settings.
pub(crate) fn device(spec: &str, queue: crate::QueueSettings) -> mqblk_device::DeviceConfig {
    let spec = DeviceSpec::parse(spec).expect("scenario device specs are well-formed");
    mqblk_device::DeviceConfig::model(spec, queue)
}

/// An embedded capture (blktrace files by name) replayed closed-loop: each traced process a
/// job of its own with the concurrency it had, waiting where the trace shows it waited and
/// thinking as long as it did, on `nr_cpus` CPUs, sectors wrapped into `capacity`.
pub(crate) fn replayed_jobs(
    trace: &[(&str, &[u8])],
    nr_cpus: u16,
    capacity: u64,
) -> Result<Vec<SimJob>, ScenarioError> {
    let set = mqblk_trace::TraceSet::from_bytes(trace)?;
    Ok(crate::replay::jobs(
        &crate::replay::Replayable::from_trace(&set),
        crate::replay::Mode::Closed,
        1.0,
        nr_cpus,
        capacity,
        true,
        0,
    ))
}

/// `n` fio-style random-read jobs of `bs` at `qd`, on CPUs `0..n` (mod `nr_cpus`), for
/// `runtime` of virtual time.
pub(crate) fn randread_jobs(
    n: u32,
    nr_cpus: u16,
    bs: u32,
    qd: u32,
    span_bytes: u64,
    runtime: Nanos,
    seed: u64,
) -> Vec<SimJob> {
    (0..n)
        .map(|i| {
            SimJob::new(
                format!("randread.{i}"),
                (i % nr_cpus as u32) as u16,
                qd,
                i + 1,
                Limit {
                    time: Some(runtime),
                    ..Limit::default()
                },
                Box::new(FioSource::new(
                    RwMode::RandRead,
                    100,
                    bs,
                    0,
                    span_bytes,
                    seed.wrapping_add(i as u64),
                    0,
                )),
                "fio",
            )
        })
        .collect()
}

/// Total IOPS of a run, over the jobs' common runtime.
pub(crate) fn iops(r: &SimResult) -> f64 {
    r.jobs.iter().map(|j| j.iops()).sum()
}

pub(crate) fn kiops(v: f64) -> String {
    format!("{:.0}K", v / 1e3)
}
