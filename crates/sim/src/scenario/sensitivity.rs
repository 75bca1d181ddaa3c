//! `mqblk scenario NAME --sensitivity`: does a scenario's direction hold because of the
//! mechanism, or because of one parameter's value? Every physical parameter of the
//! scenario's device model ([`mqblk_models::is_physical`]: times, rates, speeds; counts and
//! sizes are the configurations being compared), every entry of the cost table, and the
//! scheduler's hook costs under the run's profile ([`SCHED_COST`]) and, on a scenario's
//! machine, its cache-line costs ([`TOPOLOGY_NS`]) are scaled by 0.7 and
//! 1.3, one at a time, and the unperturbed scenario runs with seeds 1..5. The runs are
//! independent and deterministic, so they go to all cores (`rayon`) and the table does not
//! depend on how many there are.

use super::ScenarioError;
use super::{Perturb, Scenario, ScenarioOpts, SCHED_COST, TOPOLOGY_NS};
use crate::cost::CostTable;
use rayon::prelude::*;
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The factors each parameter is scaled by.
pub const FACTORS: [f64; 2] = [0.7, 1.3];
/// The seeds the unperturbed scenario runs with.
pub const SEEDS: std::ops::RangeInclusive<u64> = 1..=5;

/// One run: a parameter scaled (or none: a seed run), and what came out.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SensRun {
    /// The scaled parameter, or `None` for an unperturbed run.
    pub param: Option<String>,
    /// The parameter's value before scaling (device parameters in the unit their name
    /// carries, costs in ns; none for `sched_cost`, which scales several).
    pub base: Option<u64>,
    pub factor: f64,
    pub seed: u64,
    pub holds: bool,
    pub ratio: f64,
}

/// The whole sweep.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sensitivity {
    pub scenario: &'static str,
    pub key_label: String,
    pub runs: Vec<SensRun>,
}

impl Sensitivity {
    /// Runs that did not hold the direction.
    pub fn failures(&self) -> impl Iterator<Item = &SensRun> {
        self.runs.iter().filter(|r| !r.holds)
    }

    /// One row per parameter (its ratio at 0.7x and 1.3x), then one per seed.
    pub fn table(&self) -> String {
        let mark = |h: bool| if h { "holds" } else { "FAILS" };
        let mut t = format!(
            "{}: {} at each parameter scaled by 0.7 and 1.3 (seed {})\n{:<22} {:>10} {:>16} {:>16}\n",
            self.scenario,
            self.key_label,
            self.runs
                .iter()
                .find(|r| r.param.is_some())
                .map_or(1, |r| r.seed),
            "parameter",
            "value",
            "x0.7",
            "x1.3"
        );
        // A parameter's runs are consecutive: one row each.
        for pair in self.runs.chunk_by(|a, b| a.param == b.param) {
            let Some(p) = &pair[0].param else {
                continue;
            };
            let cells: Vec<String> = pair
                .iter()
                .map(|x| format!("{:.3} {}", x.ratio, mark(x.holds)))
                .collect();
            let _ = writeln!(
                t,
                "{:<22} {:>10} {:>16} {:>16}",
                p,
                pair[0].base.map_or("-".into(), |b| b.to_string()),
                cells.first().map_or("", String::as_str),
                cells.get(1).map_or("", String::as_str)
            );
        }
        for r in self.runs.iter().filter(|r| r.param.is_none()) {
            let _ = writeln!(
                t,
                "{:<22} {:>10} {:>16}",
                format!("seed {}", r.seed),
                "",
                format!("{:.3} {}", r.ratio, mark(r.holds))
            );
        }
        let failed = self.failures().count();
        let _ = writeln!(
            t,
            "direction holds in {} of {} runs",
            self.runs.len() - failed,
            self.runs.len()
        );
        t
    }
}

/// The parameters `--sensitivity` scales for `sc`, with their unscaled values.
pub fn params(sc: &Scenario) -> Result<Vec<(String, Option<u64>)>, ScenarioError> {
    let spec = crate::device::DeviceSpec::parse(sc.model)?;
    let mut out: Vec<(String, Option<u64>)> = mqblk_models::physical_params(&spec)?
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect();
    let table = CostTable::default();
    for name in CostTable::NAMES {
        out.push((name.to_string(), table.get(name)));
    }
    out.push((SCHED_COST.to_string(), None));
    if sc.topology.is_some() {
        out.push((TOPOLOGY_NS.to_string(), None));
    }
    Ok(out)
}

/// Runs the sweep for `sc` from `base` (its seed is the perturbed runs' seed; its quick
/// flag, schedulers and profile apply to every run). `progress` is called after each run
/// with (done, total).
pub fn run(
    sc: &Scenario,
    base: &ScenarioOpts,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Sensitivity, ScenarioError> {
    let mut plan: Vec<(Option<String>, Option<u64>, f64, u64)> = Vec::new();
    for (p, v) in params(sc)? {
        for f in FACTORS {
            plan.push((Some(p.clone()), v, f, base.seed));
        }
    }
    for seed in SEEDS {
        plan.push((None, None, 1.0, seed));
    }
    let done = AtomicUsize::new(0);
    let total = plan.len();
    let mut key_label = String::new();
    let results: Vec<Result<(SensRun, String), ScenarioError>> = plan
        .into_par_iter()
        .map(|(param, base_value, factor, seed)| {
            let opts = ScenarioOpts {
                seed,
                perturb: param.clone().map(|param| Perturb { param, factor }),
                ..base.clone()
            };
            let rep = (sc.run)(&opts).map_err(|e| ScenarioError::Sweep {
                run: match &param {
                    Some(p) => format!("{} with {p} x{factor}", sc.name),
                    None => format!("{} seed {seed}", sc.name),
                },
                source: Box::new(e),
            })?;
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            Ok((
                SensRun {
                    param,
                    base: base_value,
                    factor,
                    seed,
                    holds: rep.direction_holds,
                    ratio: rep.key_ratio,
                },
                rep.key_label,
            ))
        })
        .collect();
    let mut runs = Vec::with_capacity(results.len());
    for r in results {
        let (run, label) = r?;
        key_label = label;
        runs.push(run);
    }
    Ok(Sensitivity {
        scenario: sc.name,
        key_label,
        runs,
    })
}
