//! `mqblk._mqblk`: the native half of the Python package. Each function runs what the
//! matching `mqblk` subcommand runs (the same Rust functions, the same options) and hands
//! back its JSON; the Python half (`python/mqblk/__init__.py`) turns that into objects and
//! DataFrames. The GIL is released while a simulation runs, so threads of one process run
//! simulations in parallel.

#![deny(unsafe_code)]

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    _mqblk,
    MqblkError,
    PyValueError,
    "A bad job, option or name: the one-line message `mqblk` prints."
);

/// Runs `f` without the GIL (other Python threads go on meanwhile); its error becomes an
/// `MqblkError` with the message `mqblk` prints.
fn detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, mqblk::CliError> + Send,
) -> PyResult<T> {
    py.detach(f).map_err(|e| MqblkError::new_err(e.to_string()))
}

mod sched;

create_exception!(
    _mqblk,
    SchedulerError,
    MqblkError,
    "A Python scheduler's hook raised, or broke the elevator contract: the message names the scheduler, the hook and the request; the hook's own exception is the cause."
);

/// `mqblk sim ARGS --output-format=json`: the report as JSON text. A Python scheduler's
/// failure ends the run and comes back as a `SchedulerError` whose cause is the hook's
/// exception.
#[pyfunction]
fn sim(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    let run = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            mqblk::sim::simulate_args(&args).map(|s| s.out)
        }))
    });
    run_result(py, run, sched::take_failure())
}

/// A run's outcome for Python: a Python scheduler's failure (`failed`: its exception and
/// where) as a `SchedulerError` caused by it, then the command's own error as an
/// `MqblkError`; any other panic goes on unwinding.
fn run_result(
    py: Python<'_>,
    run: std::thread::Result<Result<String, mqblk::CliError>>,
    failed: Option<(PyErr, String)>,
) -> PyResult<String> {
    if let Some((err, at)) = failed {
        let e = SchedulerError::new_err(format!("{at}: {err}"));
        e.set_cause(py, Some(err));
        return Err(e);
    }
    match run {
        Ok(r) => r.map_err(|e| MqblkError::new_err(e.to_string())),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// `mqblk sim --fuzz` over `runs` seeds from `seed` with `scheduler` forced: the failures as
/// JSON (`[{"seed", "error", "config", "reproduce"}]`), an empty list when every run held.
#[pyfunction]
fn fuzz(py: Python<'_>, scheduler: String, seed: u64, runs: u64) -> PyResult<String> {
    let fails = py.detach(|| {
        let mut fails = Vec::new();
        for s in seed..seed.saturating_add(runs) {
            let o = mqblk_sim::fuzz::run_one_for(s, None, Some(&scheduler));
            let hook = sched::take_failure().map(|(e, at)| format!("{at}: {e}"));
            if let Err(e) = o.result {
                fails.push(serde_json::json!({
                    "seed": s,
                    "error": hook.unwrap_or(e),
                    "config": o.summary,
                    "reproduce": format!("mqblk.fuzz(scheduler=..., seed={s}, runs=1)"),
                }));
            }
        }
        fails
    });
    Ok(serde_json::Value::Array(fails).to_string())
}

/// `mqblk bench ARGS`: the report's text (give `--output-format=json`). A Python
/// scheduler's hooks run on the job threads; the first that fails ends the run early and
/// comes back as a `SchedulerError` whose cause is the hook's exception.
#[pyfunction]
#[pyo3(name = "bench")]
fn bench_run(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    let rt = sched::RealTime::default();
    let run = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sched::real_time(&rt, || {
                mqblk::bench::bench_args_until(&args, rt.stop.clone()).map(|b| b.out)
            })
        }))
    });
    let failed = rt
        .failed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .or_else(sched::take_failure);
    run_result(py, run, failed)
}

/// `mqblk replay ARGS`: the report's text (give `--output-format=json`).
#[pyfunction]
fn replay(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    detached(py, || mqblk::replay::replay_args(&args).map(|(out, _)| out))
}

/// `mqblk scenario NAME --json`: the report as JSON text.
#[pyfunction]
#[pyo3(signature = (name, seed=1, quick=false, cost_profile="kernel".to_string()))]
fn scenario(
    py: Python<'_>,
    name: String,
    seed: u64,
    quick: bool,
    cost_profile: String,
) -> PyResult<String> {
    detached(py, || {
        mqblk::sim::scenario_json(&name, seed, quick, &cost_profile).map(|v| v.to_string())
    })
}

/// The scenarios (`mqblk scenario list`): (name, the kernel mail's subject, what it shows).
#[pyfunction]
fn scenarios() -> Vec<(String, String, String)> {
    mqblk_sim::scenario::SCENARIOS
        .iter()
        .map(|s| (s.name.into(), s.mail.into(), s.about.into()))
        .collect()
}

/// The I/O schedulers and their tunables (`mqblk schedulers`) as JSON text.
#[pyfunction]
fn schedulers() -> String {
    let v: Vec<serde_json::Value> = mqblk_sched::all()
        .into_iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name,
                "alias": e.alias,
                "mq_aware": e.features.contains(mqblk_core::ElvFeatures::MQ_AWARE),
                "tunables": e.tunables.iter().map(|t| serde_json::json!({
                    "name": t.name,
                    "default": t.default,
                    "unit": t.unit,
                    "min": t.min,
                    "max": t.max,
                    "help": t.help,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::Value::Array(v).to_string()
}

#[pymodule]
fn _mqblk(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(scenario, m)?)?;
    m.add_function(wrap_pyfunction!(bench_run, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(fuzz, m)?)?;
    m.add_function(wrap_pyfunction!(sched::register_scheduler, m)?)?;
    m.add_class::<sched::PyRequest>()?;
    m.add_class::<sched::TunableValues>()?;
    m.add("MqblkError", m.py().get_type::<MqblkError>())?;
    m.add("SchedulerError", m.py().get_type::<SchedulerError>())?;
    // A Python scheduler's failure stops its run with a panic the caller turns back into
    // the exception; the default hook would print it to stderr as well.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let ours = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|m| m.starts_with(sched::STOP));
        if !ours {
            previous(info);
        }
    }));
    // Out-of-tree Rust schedulers built in (python/Cargo.toml's features), by name from here on.
    #[cfg(feature = "mqfq")]
    mqblk_mqfq::register().map_err(MqblkError::new_err)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
