//! `mqblk twin --suite DIR`: the workloads `DIR/suite.toml` lists, each job file with its
//! own schedulers, and one table that judges every IOPS and p99 effect against the
//! kernel's.
//!
//! The judgement is the one a scheduler developer applies before trusting a result: where
//! the kernel's own effect is steady (its range over the repeats within 25% of its median),
//! mqblk's median must be within 25% of the kernel's; where the kernel itself spreads wider
//! than that, mqblk must show the kernel's direction (both above or both below `none`, or
//! within 25% of it).

use super::{baseline_keys, cell, spread, Effect, Report, Spread, Stack, Twin};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The manifest's name inside a suite directory.
pub const MANIFEST: &str = "suite.toml";

/// `suite.toml`: the suite's workloads, in the order they run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub workload: Vec<Entry>,
}

/// One workload: a job file beside the manifest and the schedulers it is run with.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub file: PathBuf,
    pub schedulers: Vec<String>,
    /// The fewest repeats this workload runs (the command's `--repeats` when more): for a
    /// workload whose kernel effect wanders more than a few repeats catch, so its range,
    /// and with it the row's rule, is measured rather than guessed from three draws.
    pub repeats: Option<u32>,
}

/// The most repeats a workload may ask for (as `--repeats`).
pub const MAX_REPEATS: u32 = 100;

/// A workload of the plan: its job file, its schedulers (`none` first) and its repeats.
pub(super) struct Planned {
    pub job: PathBuf,
    pub scheds: Vec<String>,
    pub repeats: u32,
}

impl Manifest {
    /// Reads `dir/suite.toml`; a problem is one line naming the file (and where in it).
    pub fn read(dir: &Path) -> Result<Manifest, crate::TwinError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: {e} (a suite directory lists its workloads there)",
                path.display()
            )
        })?;
        let m: Manifest = toml::from_str(&text).map_err(|e| {
            let msg = e.message().to_string();
            match e.span() {
                Some(sp) => {
                    let line = text[..sp.start].matches('\n').count() + 1;
                    format!("{}:{line}: {msg}", path.display())
                }
                None => format!("{}: {msg}", path.display()),
            }
        })?;
        if m.workload.is_empty() {
            return Err(format!("{}: lists no [[workload]]", path.display()).into());
        }
        Ok(m)
    }
}

/// Which job files run with which schedulers (`none` first in each) and how many times:
/// the manifest's, kept to the schedulers in `only` when given, each workload at least
/// `repeats` times. Every name, file and figure is checked here, before the first run.
pub(super) fn plan(
    twin: &Twin,
    dir: &Path,
    only: Option<&[String]>,
    repeats: u32,
) -> Result<Vec<Planned>, crate::TwinError> {
    let m = Manifest::read(dir)?;
    let canon = |s: &str| mqblk_sched::lookup(s).map(|t| t.name.to_string());
    let only: Option<Vec<String>> = match only {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|s| canon(s).ok_or_else(|| format!("--schedulers: unknown scheduler '{s}'")))
                .collect::<Result<_, _>>()?,
        ),
    };
    // A scheduler registered with mqblk (an out-of-tree one) is on no workload's list: named
    // in --schedulers, it joins every workload, beside the kernel's schedulers listed there.
    let own: Vec<String> = match &only {
        Some(o) => twin
            .schedulers(o, "--schedulers")?
            .into_iter()
            .filter(|s| !twin.in_kernel(s))
            .collect(),
        None => Vec::new(),
    };
    let manifest = dir.join(MANIFEST);
    let mut plan = Vec::new();
    for (i, w) in m.workload.iter().enumerate() {
        let what = format!(
            "{}: workload {} ({})",
            manifest.display(),
            i + 1,
            w.file.display()
        );
        let job = dir.join(&w.file);
        if !job.is_file() {
            return Err(format!("{what}: no such job file {}", job.display()).into());
        }
        mqblk_workload::parse_job_file(&job).map_err(|e| format!("{what}: {e}"))?;
        // Every name is checked, even where --schedulers leaves it out, so a broken
        // manifest shows; that the kernel offers it, only where it runs (a kernel built
        // without BFQ runs the rest of the suite with --schedulers=mq-deadline,kyber).
        let mut kept = Vec::new();
        for s in &w.schedulers {
            let name = canon(s).ok_or_else(|| format!("{what}: unknown scheduler '{s}'"))?;
            if only.as_ref().is_none_or(|o| o.contains(&name)) {
                kept.push(name);
            }
        }
        let mut scheds = twin.schedulers(&kept, &what).map_err(|e| match &only {
            None => format!("{e}; --schedulers=NAMES runs the workloads with the others"),
            Some(_) => e,
        })?;
        scheds.extend(own.iter().cloned());
        let own_repeats = match w.repeats {
            Some(n) if !(1..=MAX_REPEATS).contains(&n) => {
                return Err(format!("{what}: repeats = {n} is not in 1..={MAX_REPEATS}").into());
            }
            Some(n) => n,
            None => 0,
        };
        if scheds.len() > 1 {
            plan.push(Planned {
                job,
                scheds,
                repeats: repeats.max(own_repeats),
            });
        }
    }
    if plan.is_empty() {
        return Err(format!(
            "{}: no workload lists any of --schedulers",
            manifest.display()
        )
        .into());
    }
    Ok(plan)
}

/// How mqblk's effect compares with the kernel's.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The kernel's range is within 25% of its median, and mqblk's median within 25% of it.
    Within,
    /// The kernel's range is narrow, and mqblk's median more than 25% away from it.
    Off,
    /// The kernel's range is wider than 25%; mqblk holds its direction.
    WideHolds,
    /// The kernel's range is wider than 25%; mqblk goes the other way.
    WideOff,
    /// One stack has no figure (a job did no I/O in that direction).
    Missing,
}

/// The margin of both rules.
const MARGIN: f64 = 0.25;

impl Verdict {
    pub fn of(kernel: Option<Spread>, mqblk: Option<Spread>) -> Verdict {
        let (Some(k), Some(m)) = (kernel, mqblk) else {
            return Verdict::Missing;
        };
        if k.median <= 0.0 {
            return Verdict::Missing;
        }
        let close = (m.median / k.median - 1.0).abs() <= MARGIN;
        if (k.max - k.min) / k.median <= MARGIN {
            if close {
                Verdict::Within
            } else {
                Verdict::Off
            }
        } else {
            // An effect within the margin of 1 has no direction: mqblk holds it by being
            // within the margin of 1 too, or of the kernel's median.
            let side = |x: f64| {
                if x > 1.0 + MARGIN {
                    1
                } else if x < 1.0 / (1.0 + MARGIN) {
                    -1
                } else {
                    0
                }
            };
            if close || side(k.median) == side(m.median) {
                Verdict::WideHolds
            } else {
                Verdict::WideOff
            }
        }
    }

    fn label(self) -> &'static str {
        match self {
            Verdict::Within => "within 25%",
            Verdict::Off => "OFF",
            Verdict::WideHolds => "wide, holds",
            Verdict::WideOff => "wide, OFF",
            Verdict::Missing => "-",
        }
    }
}

/// The metrics the suite judges: what a scheduler does to throughput and to the tail.
const JUDGED: [&str; 2] = ["iops", "clat_p99_us"];

/// One judged effect.
#[derive(Debug, Serialize)]
pub struct Row {
    pub workload: String,
    #[serde(flatten)]
    pub effect: Effect,
    pub verdict: Verdict,
    /// The simulator's effect judged the same way against the kernel's (`--sim`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_verdict: Option<Verdict>,
}

/// The counts under the table.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub rows: usize,
    pub within: usize,
    pub off: usize,
    pub wide_holds: usize,
    pub wide_off: usize,
    pub missing: usize,
}

impl Summary {
    fn count(&mut self, v: Verdict) {
        self.rows += 1;
        *match v {
            Verdict::Within => &mut self.within,
            Verdict::Off => &mut self.off,
            Verdict::WideHolds => &mut self.wide_holds,
            Verdict::WideOff => &mut self.wide_off,
            Verdict::Missing => &mut self.missing,
        } += 1;
    }

    /// The counts in words, for `who` (mqblk or the simulator).
    fn line(&self, who: &str) -> String {
        format!(
            "{} effects: the kernel steady in {} ({who} within 25% in {}, off in {}); the kernel spread wider than 25% in {} ({who} holds its direction in {}, not in {}){}",
            self.rows,
            self.within + self.off,
            self.within,
            self.off,
            self.wide_holds + self.wide_off,
            self.wide_holds,
            self.wide_off,
            if self.missing > 0 {
                format!("; {} without a figure in one stack", self.missing)
            } else {
                String::new()
            }
        )
    }
}

/// How far a stack's levels are from the kernel's, where effects (ratios within one
/// stack) cannot show it: each job's IOPS under `none` (the median of its repeats) over the
/// kernel's, across the suite's jobs and directions. A simulator whose device ran at a
/// different speed from the kernel's (a profile made while the device was slower or
/// faster than during the suite) compares its effects on another operating point.
#[derive(Debug, Default, Serialize)]
pub struct Levels {
    /// Jobs (and directions) with a kernel figure under `none`.
    pub jobs: usize,
    pub mqblk: Option<Spread>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim: Option<Spread>,
}

/// How far apart (either way) a stack's median level and the kernel's must be for the
/// table to say the device was not the same one.
pub const LEVELS_APART: f64 = 1.5;

impl Levels {
    pub(super) fn of(workloads: &[Report]) -> Levels {
        let (mut jobs, mut mqblk, mut sim) = (0, Vec::new(), Vec::new());
        for r in workloads {
            let level = |stack: Stack, job: &str, dir| {
                let iops: Vec<f64> = r
                    .runs
                    .iter()
                    .filter(|x| x.1 == stack && x.2 == "none")
                    .flat_map(|x| x.3.iter())
                    .filter(|f| f.job == job && f.dir == dir)
                    .map(|f| f.iops)
                    .collect();
                spread(&iops).map(|s| s.median)
            };
            for (job, dir) in baseline_keys(&r.runs) {
                let job = job.as_str();
                let Some(k) = level(Stack::Kernel, job, dir).filter(|&k| k > 0.0) else {
                    continue;
                };
                jobs += 1;
                mqblk.extend(level(Stack::Mqblk, job, dir).map(|m| m / k));
                sim.extend(level(Stack::Sim, job, dir).map(|s| s / k));
            }
        }
        Levels {
            jobs,
            mqblk: spread(&mqblk),
            sim: spread(&sim),
        }
    }

    /// The levels in words, and a warning where the simulator's are far from the kernel's.
    pub(super) fn line(&self) -> Option<String> {
        let cells: Vec<String> = [("mqblk", &self.mqblk), ("the simulator", &self.sim)]
            .into_iter()
            .filter(|(_, s)| s.is_some())
            .map(|(who, s)| format!("{who} {}", cell(s)))
            .collect();
        if cells.is_empty() {
            return None;
        }
        let mut line = format!(
            "levels under none (each job's IOPS over the kernel's, median [min-max] over {} jobs): {}",
            self.jobs,
            cells.join(", ")
        );
        if let Some(s) = self
            .sim
            .filter(|s| s.median > LEVELS_APART || s.median < 1.0 / LEVELS_APART)
        {
            line += &format!(
                "\nthe simulator's levels are x{:.2} of the kernel's: the device it modelled is not the one the suite ran on (a profile made while the device was slower or faster, or a model that misses its speed), so its effects are another operating point's; judge them again on a new profile: mqblk twin --resim SAVED.json --profile=NEW.toml",
                s.median
            );
        }
        Some(line)
    }
}

/// A whole suite's result: every workload's report, the judged rows and their counts.
#[derive(Debug, Serialize)]
pub struct Suite {
    pub rows: Vec<Row>,
    pub summary: Summary,
    /// The simulator's verdicts counted (`--sim`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_summary: Option<Summary>,
    pub levels: Levels,
    pub workloads: Vec<Report>,
}

impl Suite {
    pub(super) fn of(workloads: Vec<Report>) -> Suite {
        let mut rows = Vec::new();
        let mut summary = Summary::default();
        let mut sim_summary: Option<Summary> = None;
        for r in &workloads {
            let workload = Path::new(&r.jobfile)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            for e in r.effects.iter().filter(|e| JUDGED.contains(&e.metric)) {
                let verdict = Verdict::of(e.kernel, e.mqblk);
                summary.count(verdict);
                let sim_verdict = e.sim.map(|_| Verdict::of(e.kernel, e.sim));
                if let Some(v) = sim_verdict {
                    sim_summary.get_or_insert_with(Summary::default).count(v);
                }
                rows.push(Row {
                    workload: workload.clone(),
                    effect: e.clone(),
                    verdict,
                    sim_verdict,
                });
            }
        }
        Suite {
            rows,
            summary,
            sim_summary,
            levels: Levels::of(&workloads),
            workloads,
        }
    }

    /// The one table: a row per judged effect, then the counts.
    pub fn table(&self) -> String {
        let (disk, file) = self
            .workloads
            .first()
            .map(|r| (r.disk.as_str(), r.filename.as_str()))
            .unwrap_or_default();
        // The suite's repeats, and the workloads that asked for more.
        let base = self.workloads.iter().map(|r| r.repeats).min().unwrap_or(0);
        let mut repeats = format!("{base} repeats");
        let more: Vec<String> = self
            .workloads
            .iter()
            .filter(|r| r.repeats > base)
            .map(|r| {
                let name = Path::new(&r.jobfile)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| r.jobfile.clone());
                format!("{} for {name}", r.repeats)
            })
            .collect();
        if !more.is_empty() {
            repeats += &format!(" ({})", more.join(", "));
        }
        let mut s = format!(
            "twin suite: {} workloads on {file} (disk {disk}), {repeats}; effect = metric under the scheduler / under none, median [min-max]\n",
            self.workloads.len()
        );
        let sim = self.sim_summary.is_some();
        s += &format!(
            "{:<24} {:<11} {:<12} {:<5} {:<6} {:>22} {:>22} {:>7}  {:<11}{}\n",
            "workload",
            "scheduler",
            "job",
            "dir",
            "metric",
            "kernel",
            "mqblk",
            "mq/kern",
            "verdict",
            if sim {
                format!(" {:>22} {:>8}  verdict", "sim", "sim/kern")
            } else {
                String::new()
            }
        );
        for r in &self.rows {
            let e = &r.effect;
            let metric = if e.metric == "iops" { "iops" } else { "p99" };
            let sim_cells = match r.sim_verdict {
                Some(v) if sim => format!(
                    " {:>22} {:>8}  {}",
                    super::cell(&e.sim),
                    super::ratio(e.kernel, e.sim),
                    v.label()
                ),
                _ => String::new(),
            };
            s += &format!(
                "{:<24} {:<11} {:<12} {:<5} {:<6} {:>22} {:>22} {:>7}  {:<11}{sim_cells}\n",
                r.workload,
                e.scheduler,
                e.job,
                e.dir,
                metric,
                super::cell(&e.kernel),
                super::cell(&e.mqblk),
                super::ratio(e.kernel, e.mqblk),
                r.verdict.label()
            );
        }
        s += &format!("\n{}\n", self.summary.line("mqblk"));
        if let Some(n) = &self.sim_summary {
            s += &format!("{}\n", n.line("the simulator"));
        }
        if let Some(l) = self.levels.line() {
            s += &format!("{l}\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(median: f64, min: f64, max: f64) -> Option<Spread> {
        Some(Spread { median, min, max })
    }

    #[test]
    fn a_steady_kernel_effect_must_be_met_within_25_percent() {
        let k = sp(2.0, 1.9, 2.1);
        assert_eq!(Verdict::of(k, sp(2.4, 2.0, 3.0)), Verdict::Within);
        assert_eq!(Verdict::of(k, sp(1.55, 1.5, 1.6)), Verdict::Within);
        assert_eq!(Verdict::of(k, sp(2.6, 2.5, 2.7)), Verdict::Off);
        assert_eq!(Verdict::of(k, sp(1.4, 1.3, 1.5)), Verdict::Off);
        assert_eq!(Verdict::of(k, None), Verdict::Missing);
    }

    #[test]
    fn a_spread_kernel_effect_needs_only_its_direction() {
        // 0.5 to 1.5 around 1.0: wider than 25%.
        let up = sp(3.0, 2.0, 4.0);
        assert_eq!(Verdict::of(up, sp(1.5, 1.4, 1.6)), Verdict::WideHolds);
        assert_eq!(Verdict::of(up, sp(0.7, 0.6, 0.8)), Verdict::WideOff);
        let down = sp(0.3, 0.1, 0.5);
        assert_eq!(Verdict::of(down, sp(0.6, 0.5, 0.7)), Verdict::WideHolds);
        assert_eq!(Verdict::of(down, sp(1.0, 0.9, 1.1)), Verdict::WideOff);
        // No direction in the kernel: mqblk must show none either.
        let flat = sp(1.05, 0.7, 1.4);
        assert_eq!(Verdict::of(flat, sp(0.9, 0.8, 1.0)), Verdict::WideHolds);
        assert_eq!(Verdict::of(flat, sp(2.0, 1.9, 2.1)), Verdict::WideOff);
    }

    /// On a kernel built without BFQ, the workloads listing only BFQ are left out by
    /// `--schedulers=mq-deadline,kyber` and the rest planned; without it, the one line names
    /// the scheduler and says how to run the rest.
    #[test]
    fn a_kernel_without_bfq_runs_the_rest_of_the_suite() {
        let dir = std::env::temp_dir().join(format!("mqblk-suite-nobfq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.fio"), "[r]\nrw=randread\nsize=1m\n").unwrap();
        std::fs::write(
            dir.join(MANIFEST),
            "[[workload]]\nfile = \"a.fio\"\nschedulers = [\"bfq\"]\n\n\
             [[workload]]\nfile = \"a.fio\"\nschedulers = [\"mq-deadline\", \"bfq\"]\n",
        )
        .unwrap();
        let a = crate::TwinOptions {
            jobfile: None,
            suite: Some(dir.clone()),
            filename: "/dev/loop0".into(),
            schedulers: None,
            repeats: 3,
            tunables: Vec::new(),
            fio: "fio".into(),
            sim: false,
            profile: None,
            kernel_costs: Vec::new(),
            mqblk: "mqblk".into(),
            run_timeout: crate::RUN_TIMEOUT,
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let twin = Twin {
            a: &a,
            disk: crate::Disk {
                sys: "/sys/dev/block/7:0".into(),
            },
            offered: ["none", "mq-deadline", "kyber"].map(String::from).to_vec(),
            tunables: Vec::new(),
            stop: &stop,
            done: 0,
            total: 0,
            profile: None,
            cpus: 2,
        };
        let only = ["mq-deadline", "kyber"].map(String::from);
        let p = plan(&twin, &dir, Some(&only), 3).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].scheds, ["none", "mq-deadline"]);
        let e = plan(&twin, &dir, None, 3).err().unwrap().to_string();
        assert!(
            e.contains("workload 1 (a.fio): the kernel offers no 'bfq'")
                && e.contains("--schedulers=NAMES runs the workloads with the others"),
            "{e}"
        );
        // A name nobody has is refused even where --schedulers leaves it out.
        std::fs::write(
            dir.join(MANIFEST),
            "[[workload]]\nfile = \"a.fio\"\nschedulers = [\"cfq\", \"kyber\"]\n",
        )
        .unwrap();
        let e = plan(&twin, &dir, Some(&only[1..]), 3)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown scheduler 'cfq'"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The header gives the suite's repeats and names each workload that asked for more.
    #[test]
    fn the_table_names_the_workloads_with_more_repeats() {
        let report = |jobfile: &str, repeats| Report {
            jobfile: jobfile.into(),
            filename: "f".into(),
            disk: "d".into(),
            repeats,
            cpus: 2,
            schedulers: vec!["none".into(), "bfq".into()],
            runs: Vec::new(),
            effects: Vec::new(),
            shares: Vec::new(),
            commands: Default::default(),
        };
        let suite = Suite::of(vec![
            report("examples/twin/a.fio", 3),
            report("examples/twin/b.fio", 8),
            report("examples/twin/c.fio", 3),
        ]);
        let table = suite.table();
        assert!(
            table.contains("3 workloads on f (disk d), 3 repeats (8 for b.fio);"),
            "{table}"
        );
        let same = Suite::of(vec![report("a.fio", 3), report("c.fio", 3)]).table();
        assert!(same.contains(", 3 repeats;"), "{same}");
    }

    /// With `--sim` each row also judges the simulator's effect against the kernel's by the
    /// same rule, and the table counts those verdicts on a line of their own.
    #[test]
    fn the_simulators_effects_are_judged_and_counted_beside_mqblks() {
        let effect = |metric, kernel, mqblk, sim| Effect {
            scheduler: "bfq".into(),
            job: "r".into(),
            dir: crate::Dir::Read,
            metric,
            kernel,
            mqblk,
            sim,
        };
        let report = Report {
            jobfile: "w.fio".into(),
            filename: "f".into(),
            disk: "d".into(),
            repeats: 3,
            cpus: 2,
            schedulers: vec!["none".into(), "bfq".into()],
            runs: Vec::new(),
            effects: vec![
                effect(
                    "iops",
                    sp(2.0, 1.9, 2.1),
                    sp(2.1, 2.0, 2.2),
                    sp(3.0, 3.0, 3.0),
                ),
                effect(
                    "clat_p99_us",
                    sp(0.5, 0.45, 0.55),
                    sp(0.5, 0.5, 0.5),
                    sp(0.55, 0.55, 0.55),
                ),
                effect("clat_mean_us", sp(0.5, 0.5, 0.5), None, sp(0.5, 0.5, 0.5)),
            ],
            shares: Vec::new(),
            commands: Default::default(),
        };
        let s = Suite::of(vec![report]);
        let verdicts: Vec<_> = s.rows.iter().map(|r| (r.verdict, r.sim_verdict)).collect();
        assert_eq!(
            verdicts,
            [
                (Verdict::Within, Some(Verdict::Off)),
                (Verdict::Within, Some(Verdict::Within)),
            ],
            "only iops and p99 are judged"
        );
        let sim = s.sim_summary.as_ref().expect("counted");
        assert_eq!((sim.rows, sim.within, sim.off), (2, 1, 1));
        let table = s.table();
        assert!(
            table.contains("the simulator within 25% in 1, off in 1"),
            "{table}"
        );
        assert!(
            table.contains("sim/kern") && table.contains("1.50"),
            "{table}"
        );
        // Without --sim, no simulator column or count.
        let mut plain = Suite::of(Vec::new());
        plain.sim_summary = None;
        assert!(!plain.table().contains("sim/kern"));
    }

    /// Each job's IOPS under `none` over the kernel's, the median over repeats first: the
    /// table says how far each stack's levels are, and warns where the simulator's device
    /// ran at another speed (effects alone, ratios within one stack, would not show it).
    #[test]
    fn the_levels_under_none_are_each_stacks_over_the_kernels() {
        let fig = |job: &str, iops| crate::Figures {
            job: job.into(),
            dir: crate::Dir::Read,
            iops,
            bw_kib: iops * 4.0,
            clat_mean_us: 1.0,
            clat_p50_us: 1.0,
            clat_p99_us: 2.0,
        };
        let run =
            |r, stack, sched: &str, a, b| (r, stack, sched.into(), vec![fig("a", a), fig("b", b)]);
        let report = |sim_a| Report {
            jobfile: "w.fio".into(),
            filename: "f".into(),
            disk: "d".into(),
            repeats: 3,
            cpus: 2,
            schedulers: vec!["none".into(), "kyber".into()],
            runs: vec![
                run(0, Stack::Kernel, "none", 100.0, 10.0),
                run(1, Stack::Kernel, "none", 120.0, 10.0),
                run(2, Stack::Kernel, "none", 110.0, 12.0),
                // Another scheduler's level is not the baseline's.
                run(0, Stack::Kernel, "kyber", 1.0, 1.0),
                run(0, Stack::Mqblk, "none", 99.0, 10.0),
                run(1, Stack::Mqblk, "none", 121.0, 11.0),
                run(0, Stack::Sim, "none", sim_a, 5.0),
            ],
            effects: Vec::new(),
            shares: Vec::new(),
            commands: Default::default(),
        };
        let s = Suite::of(vec![report(330.0)]);
        let l = &s.levels;
        assert_eq!(l.jobs, 2);
        let mq = l.mqblk.unwrap();
        assert!(
            (mq.median - (110.0 / 110.0 + 10.5 / 10.0) / 2.0).abs() < 1e-9,
            "{l:?}"
        );
        let sim = l.sim.unwrap();
        assert_eq!((sim.min, sim.max), (0.5, 3.0), "{l:?}");
        let table = s.table();
        assert!(table.contains("over 2 jobs): mqblk x1.02"), "{table}");
        assert!(
            table.contains("the simulator's levels are x1.75"),
            "{table}"
        );
        // Within the bound: no warning.
        let table = Suite::of(vec![report(110.0)]).table();
        assert!(
            table.contains("the simulator x0.75") && !table.contains("not the one"),
            "{table}"
        );
    }

    #[test]
    fn the_examples_suite_lists_parseable_jobs_with_known_schedulers() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/twin");
        let m = Manifest::read(&dir).unwrap();
        assert!(m.workload.len() >= 16, "{} workloads", m.workload.len());
        for w in &m.workload {
            let job = dir.join(&w.file);
            mqblk_workload::parse_job_file(&job)
                .unwrap_or_else(|e| panic!("{}: {e}", job.display()));
            assert!(!w.schedulers.is_empty(), "{}", w.file.display());
            for s in &w.schedulers {
                assert!(
                    mqblk_sched::lookup(s).is_some(),
                    "{}: {s}",
                    w.file.display()
                );
            }
        }
        // Every job file of the directory but the one-second demo is in the suite.
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".fio") && n != "quick.fio")
            .collect();
        files.sort();
        let mut listed: Vec<String> = m
            .workload
            .iter()
            .map(|w| w.file.display().to_string())
            .collect();
        listed.sort();
        assert_eq!(files, listed);
    }

    #[test]
    fn a_broken_manifest_is_one_line_naming_the_file_and_line() {
        let dir = std::env::temp_dir().join(format!("mqblk-suite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(MANIFEST),
            "[[workload]]\nfile = \"a.fio\"\nschedulers = [\"bfq\"]\nweight = 3\n",
        )
        .unwrap();
        let e = Manifest::read(&dir).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("suite.toml:4"), "{e}");
        assert!(e.contains("weight"), "{e}");
        std::fs::write(dir.join(MANIFEST), "").unwrap();
        let e = Manifest::read(&dir).unwrap_err().to_string();
        assert!(e.contains("suite.toml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
