//! `mqblk twin --resim=SAVED.json`: the simulator's stack of a saved twin result run again,
//! on a model fitted to a profile given now, and judged against the kernel's figures the
//! result saved. No device, no root: a model can be improved and held against the same
//! kernel runs as often as wanted, and a result measured on one machine judged on another.
//!
//! The saved result is a `--output-format=json` report of one job file or of a suite; its
//! kernel and mqblk runs are kept as they are, its simulator runs (if it had any) replaced.
//! The job files are read from the paths the result names, as the twin was given them.

use super::{
    command_line, figures, host_cpus, parse_tunables, run_child, sim_command, Commands, Figures,
    Outcome, Report, SimSide, Stack, TwinError,
};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// What `--resim` runs.
#[derive(Clone, Debug)]
pub struct ResimOptions {
    /// The saved result (`mqblk twin ... --output-format=json`).
    pub saved: PathBuf,
    /// The profile the simulator's model is fitted to.
    pub profile: PathBuf,
    /// `SCHED:NAME=VALUE` tunables, as the saved run was given them.
    pub tunables: Vec<String>,
    /// The kernel's scheduler costs the simulator charges (none: the built-in ones).
    pub kernel_costs: Vec<PathBuf>,
    /// The mqblk binary (its `sim` runs the simulator's stack).
    pub mqblk: PathBuf,
    /// How long one simulator run may take before it is stopped and run once more.
    pub run_timeout: std::time::Duration,
}

/// One job file's saved runs.
#[derive(Deserialize)]
struct SavedReport {
    jobfile: String,
    filename: String,
    disk: String,
    repeats: u32,
    /// The CPUs the kernel's runs had; saved results from before it was recorded ran on
    /// a machine like this one, as far as anyone knows.
    #[serde(default)]
    cpus: Option<u16>,
    schedulers: Vec<String>,
    runs: Vec<(u32, Stack, String, Vec<Figures>)>,
    /// What each stack ran; none in results from before it was recorded.
    #[serde(default)]
    commands: Commands,
}

/// A saved suite: its workloads' reports (the rows are judged again).
#[derive(Deserialize)]
struct SavedSuite {
    workloads: Vec<SavedReport>,
}

/// Runs the simulator's stack of `o.saved` again on `o.profile` and judges it.
pub fn resim(o: &ResimOptions, stop: &AtomicBool) -> Result<Outcome, TwinError> {
    let tunables = parse_tunables(&o.tunables)?;
    // Read and fitted before anything runs: a bad profile stops nothing.
    mqblk_models::profile::Profile::read(&o.profile.display().to_string())
        .map_err(|e| e.to_string())?;
    let saved = o.saved.display();
    let text = std::fs::read_to_string(&o.saved).map_err(|e| format!("{saved}: {e}"))?;
    let not_saved = |e: serde_json::Error| {
        format!("{saved}: not a result of mqblk twin --output-format=json ({e})")
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(not_saved)?;
    let suite = value.get("workloads").is_some();
    let reports: Vec<SavedReport> = if suite {
        serde_json::from_value::<SavedSuite>(value)
            .map_err(not_saved)?
            .workloads
    } else {
        vec![serde_json::from_value(value).map_err(not_saved)?]
    };
    for r in &reports {
        if !Path::new(&r.jobfile).is_file() {
            return Err(format!(
                "{}: no such job file (named by {saved}; run from where the twin ran)",
                r.jobfile
            )
            .into());
        }
        if !r.runs.iter().any(|x| x.1 == Stack::Kernel) {
            return Err(format!("{saved}: {} has no kernel runs to judge by", r.jobfile).into());
        }
    }
    let total: usize = reports
        .iter()
        .map(|r| r.repeats as usize * r.schedulers.len())
        .sum();
    let mut done = 0;
    let mut out = Vec::new();
    for r in reports {
        let name = Path::new(&r.jobfile)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cpus = r.cpus.unwrap_or_else(host_cpus);
        let mut runs: Vec<_> = r.runs.into_iter().filter(|x| x.1 != Stack::Sim).collect();
        let mut commands = r.commands.without_sim();
        for repeat in 0..r.repeats {
            for sched in &r.schedulers {
                done += 1;
                eprintln!(
                    "twin: [{done}/{total}] {name} repeat {} {sched} through the simulator",
                    repeat + 1
                );
                let mut line = String::new();
                let make = || {
                    let side = SimSide {
                        mqblk: &o.mqblk,
                        profile: &o.profile,
                        kernel_costs: &o.kernel_costs,
                        cpus,
                    };
                    let cmd = sim_command(&side, repeat, sched, &tunables, Path::new(&r.jobfile));
                    line = command_line(&cmd);
                    Ok(cmd)
                };
                let who = format!("mqblk sim ({sched})");
                let f = figures(&run_child(make, &who, stop, o.run_timeout)?, &who)?;
                commands.note(Stack::Sim, line);
                runs.push((repeat, Stack::Sim, sched.clone(), f));
            }
        }
        let about = (r.jobfile, r.filename, r.disk, r.repeats, cpus);
        out.push(Report::of_runs(about, r.schedulers, runs, commands));
    }
    Ok(if suite {
        Outcome::Suite(crate::suite::Suite::of(out))
    } else {
        Outcome::One(out.pop().expect("one saved report"))
    })
}
