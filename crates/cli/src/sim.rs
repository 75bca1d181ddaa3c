//! `mqblk sim`: fio-compatible jobs under the deterministic simulator, and its fuzz mode.

use crate::args::{split_known, ScenarioArgs, SimOpts};
use crate::CliError;
use mqblk_sim::cost::{fmt_ns, CostTable};
use mqblk_sim::fuzz;
use mqblk_sim::{Sim, SimConfig, SimResult};
use mqblk_workload::parse_command_line;
use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Runs `mqblk sim ARGS`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            crate::args::print_error("sim", &e);
            2
        }
    }
}

/// A bad `mqblk sim` option as its one-line message (without the command's prefix).
fn opts_error(e: &clap::Error) -> String {
    let argv: Vec<String> = ["mqblk", "sim"].iter().map(|s| s.to_string()).collect();
    let line = crate::args::one_line_error(&argv, e);
    line.trim_start_matches("mqblk sim: ").to_string()
}

/// The job `mqblk sim` runs when none is given.
pub const DEFAULT_JOB: &str = "\
[global]
ioscheduler=mq-deadline
runtime=1
time_based

[randread-4k-qd32]
rw=randread
bs=4k
iodepth=32
";

fn run(args: &[String]) -> Result<i32, CliError> {
    let (a, rest) = match split_known::<SimOpts>(args) {
        Ok(x) => x,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            print!(
                "{}\nfio options (the same as mqblk bench):\n{}",
                e.render(),
                mqblk_workload::options_help()
            );
            return Ok(0);
        }
        Err(e) => return Err(opts_error(&e).into()),
    };
    let plant = a
        .plant
        .as_deref()
        .map(mqblk_sim::driver::Plant::parse)
        .transpose()?;
    let mut cost = CostTable::default();
    for c in &a.costs {
        if c == "help" {
            println!("{}", cost.dump().replace(' ', "\n"));
            return Ok(0);
        }
        cost.set(c)?;
    }
    if a.topology.as_deref() == Some("help") {
        for name in mqblk_sim::topology::Topology::PRESETS {
            if let Some(t) = mqblk_sim::topology::Topology::preset(name) {
                println!("{}\n  {}", t.describe(), t.source);
            }
        }
        println!(
            "custom: set every figure, e.g. custom,sockets=2,cores_per_llc=8,llc_ns=40,\
             socket_ns=40,remote_ns=130\nkeys: {}",
            mqblk_sim::topology::Topology::KEYS.join(", ")
        );
        return Ok(0);
    }
    if a.fuzz || a.crash {
        let mode = if a.crash { "--crash" } else { "--fuzz" };
        if let Some(p) = plant.filter(|p| p.durability() != a.crash) {
            return Err(format!(
                "--plant={}: that bug is for {}",
                p.arg(),
                if a.crash { "--fuzz" } else { "--crash" }
            )
            .into());
        }
        // Only the scheduler may be fixed; everything else is drawn from the seed.
        let mut sched = None;
        for x in &rest {
            match x.strip_prefix("--ioscheduler=") {
                Some(name) => {
                    let e = mqblk_sched::lookup(name).ok_or_else(|| {
                        format!(
                            "--ioscheduler={name}: unknown scheduler (known: {})",
                            mqblk_sched::names().join(", ")
                        )
                    })?;
                    sched = Some(e.name);
                }
                None => {
                    return Err(format!(
                        "{mode} picks its own configuration; '{x}' does not apply (only --ioscheduler does)"
                    ).into())
                }
            }
        }
        let set = RunSet {
            first: a.seed,
            runs: a.runs,
            verbose: a.v,
            plant,
            sched,
        };
        return Ok(if a.crash {
            run_crash(&set)
        } else {
            run_fuzz(&set)
        });
    }
    if plant.is_some() {
        return Err("--plant applies to --fuzz and --crash only".into());
    }
    let s = simulate(&a, cost, &rest)?;
    match &s.output_file {
        Some(p) => {
            std::fs::write(p, &s.out).map_err(|e| format!("--output={}: {e}", p.display()))?
        }
        None => std::io::stdout()
            .lock()
            .write_all(s.out.as_bytes())
            .map_err(|e| format!("writing the report: {e}"))?,
    }
    // Host figures vary from run to run, so they go to stderr, leaving stdout reproducible.
    eprintln!("{}", s.speed);
    for e in &s.errors {
        eprintln!("{e}");
    }
    Ok(s.code)
}

/// One simulation's report, as `mqblk sim` prints it.
pub struct Simulated {
    /// The report in the job's `--output-format` (text, or fio's JSON with `mqblk_sim`).
    pub out: String,
    /// Where `--output=FILE` asks it to go.
    pub output_file: Option<std::path::PathBuf>,
    /// The host-speed line (stderr: it varies from run to run).
    pub speed: String,
    /// 1 if a job saw errors, else 0.
    pub code: i32,
    /// A line per job clone that ended with an error, as `mqblk bench` prints them.
    pub errors: Vec<String>,
}

/// `mqblk sim ARGS` without printing: the same options and job files, the same report
/// (what the Python bindings call). `--fuzz` is refused here.
pub fn simulate_args(args: &[String]) -> Result<Simulated, CliError> {
    let (a, rest) = split_known::<SimOpts>(args).map_err(|e| opts_error(&e))?;
    if a.fuzz || a.crash || a.plant.is_some() {
        return Err("--fuzz, --crash and --plant run from the command line only".into());
    }
    let mut cost = CostTable::default();
    for c in &a.costs {
        cost.set(c)?;
    }
    simulate(&a, cost, &rest)
}

/// Runs the jobs of `rest` (fio options and job files) under the simulator.
fn simulate(a: &SimOpts, cost: CostTable, rest: &[String]) -> Result<Simulated, CliError> {
    if a.cpus.is_some_and(|n| n == 0 || n > 1024) {
        return Err(format!("--cpus={}: must be 1..=1024", a.cpus.unwrap_or(0)).into());
    }
    let mut cl = parse_command_line(rest)?;
    if cl.jobs.is_empty() {
        cl.add_job_text("default job", DEFAULT_JOB)?;
    }
    for note in mqblk_workload::no_effect_notes(&cl.jobs) {
        eprintln!("{note}");
    }
    // The device is described as `mqblk bench` describes it (the same job options); in
    // virtual time it is its model.
    let dev = mqblk_device::DeviceConfig::from_jobs_simulated(&cl.jobs)?;
    let model = dev.model_spec()?;
    let writer = crate::trace_cmd::TraceOut::open(cl.trace.as_deref());
    let nr_clones: u32 = cl.jobs.iter().map(|s| s.numjobs.max(1)).sum();
    let max_pinned = cl
        .jobs
        .iter()
        .flat_map(|s| s.cpus_allowed.iter().copied())
        .max()
        .map_or(0, |c| c + 1);
    let topology = a
        .topology
        .as_deref()
        .map(mqblk_sim::topology::Topology::parse)
        .transpose()?;
    // A machine's topology says how many CPUs it has.
    let nr_cpus = a.cpus.unwrap_or_else(|| match &topology {
        Some(t) => t.cpus() as u16,
        None => (nr_clones as usize).max(max_pinned).clamp(1, 1024) as u16,
    });
    // A zoned device's writers that all write at the write pointers (zonemode=zbd) must
    // never have one refused for its place: the run checks it.
    let zoned_in_order = cl.jobs.iter().all(|s| s.zonemode_zbd || !s.rw.does_write());
    let profile = mqblk_sim::cost::CostProfile::parse(&a.cost_profile)?;
    if !a.kernel_costs.is_empty() && profile != mqblk_sim::cost::CostProfile::Kernel {
        return Err("--kernel-costs needs --cost-profile=kernel".into());
    }
    let kernel_costs = mqblk_sim::cost::KernelCosts::read(&a.kernel_costs)?;
    let cfg = SimConfig {
        seed: a.seed,
        nr_cpus,
        zoned_in_order,
        device: dev,
        cost,
        topology,
        profile,
        kernel_costs,
        check_every: a.check_every,
        tracer: crate::trace_cmd::tracer_of(&writer),
        ..SimConfig::default()
    };
    // The model decides the capacity; build it once to learn it.
    let built = mqblk_sim::device::build(&model, mqblk_sim::SimRng::new(0))?;
    let capacity = built.capacity_sectors() * 512;
    let zones = mqblk_sim::jobs::zones_of(built.as_ref());
    let mut jobs = mqblk_sim::jobs::from_specs(
        &cl.jobs,
        nr_cpus,
        capacity,
        a.seed,
        &cfg.device.blkcg,
        zones.as_ref(),
    )?;
    if cl.plot.is_some() {
        for j in &mut jobs {
            j.logs
                .get_or_insert_with(|| mqblk_workload::logs::JobLogs::new(Default::default()));
        }
    }
    let model = model.model;
    let (seed, cpus) = (a.seed, cfg.nr_cpus);
    let profile = match (cfg.profile, &cfg.kernel_costs.source) {
        (mqblk_sim::cost::CostProfile::Kernel, Some(files)) => format!("kernel ({files})"),
        (p, _) => p.name().to_string(),
    };
    let machine = cfg
        .topology
        .as_ref()
        .map_or(String::new(), |t| format!(" topology {}", t.name));
    let host = Instant::now();
    let sim = Sim::new(cfg, jobs)?;
    let summary = format!(
        "sim: seed {seed} device {model} scheduler {} cpus {cpus}{machine} cost-profile {profile}",
        sim.scheduler()
    );
    let res = sim.run()?;
    // fio's files, in virtual time: the clones in the order the simulation ran them.
    let resolved = mqblk_sim::jobs::resolve(&cl.jobs, capacity, seed, zones.as_ref())?;
    let clones: Vec<_> = resolved
        .iter()
        .zip(&res.jobs)
        .map(|(job, r)| crate::report::CloneOut {
            job,
            iolog: &r.iolog,
            stats: &r.stats,
            logs: r.logs.as_ref(),
            start_ms: r.start.0 / 1_000_000,
        })
        .collect();
    crate::report::write_job_files(&cl, &clones)?;
    let host_s = host.elapsed().as_secs_f64();
    crate::trace_cmd::finish(&writer)?;
    let spec_of: Vec<usize> = resolved.iter().map(|r| r.spec).collect();
    let stats: Vec<_> = res.jobs.iter().map(|j| &j.stats).collect();
    let out = crate::report::render(
        &cl,
        crate::report::job_stats(&cl, &spec_of, &stats),
        &res.queue,
        // Virtual time: a report of the same seed is the same bytes.
        (res.end.0 / 1_000_000, res.end.0.div_ceil(1_000_000_000)),
        Some(crate::report::Section {
            key: "mqblk_sim",
            json: sim_json(&res),
            text: format!("{summary}\n{}", sim_text(&res)),
        }),
    )?;
    let speed = format!(
        "sim speed: {} requests in {:.3} host s = {:.2} M simulated requests per host second ({} events)",
        res.completed,
        host_s,
        res.completed as f64 / host_s.max(1e-9) / 1e6,
        res.events
    );
    let errors = res
        .jobs
        .iter()
        .zip(&spec_of)
        .filter(|(j, _)| j.errors > 0)
        .map(|(j, &s)| {
            format!(
                "error: {}: {} ({} I/O errors in this job)",
                cl.jobs[s].name, j.stats.error_text, j.errors
            )
        })
        .collect();
    Ok(Simulated {
        out,
        output_file: cl.output_file.clone(),
        speed,
        code: i32::from(res.jobs.iter().any(|j| j.errors > 0)),
        errors,
    })
}

/// The simulator's own section of the text report.
pub fn sim_text(r: &SimResult) -> String {
    let mut s = format!(
        "virtual time {}, {} requests, {:.0} IOPS, {:.1} MB/s, {} events\n",
        fmt_ns(r.end),
        r.completed,
        r.total_iops(),
        r.total_bw_mbs(),
        r.events
    );
    let busy: Vec<String> = r
        .cpu_busy
        .iter()
        .map(|&b| format!("{:.0}%", 100.0 * b as f64 / r.end.0.max(1) as f64))
        .collect();
    s += &format!("cpu busy: {}\n", busy.join(" "));
    if !r.locks.is_empty() {
        s += "locks: name acquisitions contended wait held\n";
        for l in &r.locks {
            s += &format!(
                "  {:<10} {:>9} {:>9} {:>10} {:>10}\n",
                l.name,
                l.acquisitions,
                l.contended,
                fmt_ns(mqblk_core::Nanos(l.wait_ns)),
                fmt_ns(mqblk_core::Nanos(l.held_ns))
            );
        }
    }
    let pairs = |v: serde_json::Value| -> String {
        v.as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    s += &format!("driver: {}\n", pairs(serde_json::json!(r.driver)));
    if !r.model_stats.is_empty() {
        let m: Vec<String> = r
            .model_stats
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        s += &format!("device: {}\n", m.join(" "));
    }
    s
}

/// The simulator's own section of the JSON report.
#[derive(serde::Serialize)]
struct SimSection<'a> {
    virtual_time_ns: u64,
    requests: u64,
    events: u64,
    iops: f64,
    cpu_busy_ns: &'a [u64],
    locks: &'a [mqblk_sim::engine::LockReport],
    driver: &'a mqblk_sim::driver::DriverStats,
    device: std::collections::BTreeMap<&'static str, u64>,
}

fn sim_json(r: &SimResult) -> serde_json::Value {
    serde_json::json!(SimSection {
        virtual_time_ns: r.end.0,
        requests: r.completed,
        events: r.events,
        iops: r.total_iops(),
        cpu_busy_ns: &r.cpu_busy,
        locks: &r.locks,
        driver: &r.driver,
        device: r.model_stats.iter().copied().collect(),
    })
}

/// The options of a reproduce line beyond the seed: the planted bug and the scheduler.
fn reproduce_flags(plant: Option<mqblk_sim::driver::Plant>, sched: Option<&str>) -> String {
    let p = plant
        .map(|p| format!(" --plant={}", p.arg()))
        .unwrap_or_default();
    let s = sched
        .map(|s| format!(" --ioscheduler={s}"))
        .unwrap_or_default();
    format!("{p}{s}")
}

/// The runs `--fuzz` or `--crash` asked for.
#[derive(Copy, Clone)]
struct RunSet<'a> {
    first: u64,
    runs: u64,
    verbose: bool,
    plant: Option<mqblk_sim::driver::Plant>,
    sched: Option<&'a str>,
}

fn run_fuzz(set: &RunSet) -> i32 {
    let RunSet {
        first,
        runs,
        verbose,
        plant,
        sched,
    } = *set;
    // A core assertion that fires is reported as this run's failure, with its message; the
    // default hook would print it (and a backtrace) a second time.
    std::panic::set_hook(Box::new(|_| {}));
    let host = Instant::now();
    let mut failed = 0u64;
    let mut requests = 0u64;
    for seed in first..first.saturating_add(runs) {
        let o = fuzz::run_one_for(seed, plant, sched);
        match &o.result {
            Ok(r) => requests += r.completed,
            Err(e) => {
                failed += 1;
                println!("seed {seed}: FAILED: {e}");
                println!("  config: {}", o.summary);
                if verbose && !o.dump.is_empty() {
                    println!("{}", o.dump);
                }
                println!(
                    "reproduce with: mqblk sim --seed {seed} --fuzz --runs 1{} -v",
                    reproduce_flags(plant, sched)
                );
            }
        }
        let done = seed - first + 1;
        if done % 500 == 0 || done == runs {
            eprint!("\rfuzz: {done}/{runs} runs, {failed} failed");
        }
    }
    let secs = host.elapsed().as_secs_f64();
    eprintln!();
    println!(
        "fuzz: {runs} runs from seed {first}, {failed} failed, {requests} requests in {secs:.2} host s ({:.2} M requests/s)",
        requests as f64 / secs.max(1e-9) / 1e6
    );
    i32::from(failed > 0)
}

/// `mqblk sim --crash`: crash runs from consecutive seeds, on every core of the host (each
/// run is a pure function of its seed; the reports print in seed order).
fn run_crash(set: &RunSet) -> i32 {
    use mqblk_sim::crash;
    use std::sync::atomic::{AtomicU64, Ordering};
    // Seeds stop at the last u64, as --fuzz's do.
    let (first, runs) = (set.first, set.runs.min(u64::MAX - set.first));
    std::panic::set_hook(Box::new(|_| {}));
    let host = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let (mut violated, mut failed, mut mid_run) = (0u64, 0u64, 0u64);
    let (mut writes, mut required) = (0u64, 0u64);
    let mut done = 0u64;
    const CHUNK: u64 = 512;
    while done < runs {
        let n = CHUNK.min(runs - done);
        let base = first.saturating_add(done);
        let next = AtomicU64::new(0);
        let mut outcomes: Vec<(u64, crash::CrashOutcome)> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads.min(n))
                .map(|_| {
                    s.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= n {
                                return mine;
                            }
                            mine.push((i, crash::run_one(base + i, set.plant, set.sched)));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_default())
                .collect()
        });
        outcomes.sort_by_key(|(i, _)| *i);
        for (_, o) in &outcomes {
            let seed = o.seed;
            let reproduce = || {
                println!("  config: {}", o.summary);
                println!(
                    "reproduce with: mqblk sim --crash --seed {seed} --runs 1{} -v",
                    reproduce_flags(set.plant, set.sched)
                );
            };
            match &o.result {
                Ok(r) => {
                    writes += r.writes_completed as u64;
                    required += r.writes_required as u64;
                    mid_run += u64::from(r.mid_run);
                    if !r.violations.is_empty() {
                        violated += 1;
                        println!(
                            "seed {seed}: {} violation(s) after a power cut at {} ({}): {}",
                            r.violations.len(),
                            fmt_ns(mqblk_core::Nanos(r.cut_at_ns)),
                            if r.mid_run {
                                "mid-run"
                            } else {
                                "at the run's end"
                            },
                            r.violations[0]
                        );
                        if set.verbose {
                            for v in &r.violations[1..] {
                                println!("  {v}");
                            }
                        }
                        reproduce();
                    } else if set.verbose && runs == 1 {
                        println!(
                            "seed {seed}: power cut at {} ({}): {} writes completed ({} had to survive) and {} flushes, {} data commands in the device, {} extents on the medium; media {:?}",
                            fmt_ns(mqblk_core::Nanos(r.cut_at_ns)),
                            if r.mid_run { "mid-run" } else { "at the run's end" },
                            r.writes_completed,
                            r.writes_required,
                            r.flushes_completed,
                            r.in_flight,
                            r.extents,
                            r.media
                        );
                        println!("  config: {}", o.summary);
                    }
                }
                Err(e) => {
                    failed += 1;
                    println!("seed {seed}: FAILED before the cut: {e}");
                    if set.verbose && !o.dump.is_empty() {
                        println!("{}", o.dump);
                    }
                    reproduce();
                }
            }
        }
        done += n;
        eprint!("\rcrash: {done}/{runs} runs, {violated} with violations");
    }
    eprintln!();
    let secs = host.elapsed().as_secs_f64();
    eprintln!(
        "crash: {runs} runs from seed {first} in {secs:.1} host s on {threads} threads; {mid_run} cut mid-run; {writes} writes completed, {required} of them had to survive"
    );
    if failed > 0 {
        println!("{failed} runs failed before the cut (the queue's invariants or a stall)");
    }
    println!("{runs} runs, {violated} violations");
    i32::from(violated > 0 || failed > 0)
}

/// `mqblk scenario NAME --json`.
#[derive(serde::Serialize)]
struct ScenarioJson<'a> {
    scenario: &'a str,
    title: &'a str,
    seed: u64,
    quick: bool,
    cost_profile: mqblk_sim::cost::CostProfile,
    direction_holds: bool,
    results: &'a serde_json::Value,
    /// The counters of the runs the direction rests on, and the mechanism they show.
    evidence: &'a str,
}

/// A scenario's report as `mqblk scenario NAME --json` prints it.
fn scenario_value(
    rep: &mqblk_sim::scenario::ScenarioReport,
    opts: &mqblk_sim::scenario::ScenarioOpts,
) -> serde_json::Value {
    serde_json::json!(ScenarioJson {
        scenario: rep.name,
        title: &rep.title,
        seed: opts.seed,
        quick: opts.quick,
        cost_profile: opts.profile,
        direction_holds: rep.direction_holds,
        results: &rep.json,
        evidence: &rep.evidence,
    })
}

/// A scenario by name, or the error listing the known ones.
fn find_scenario(name: &str) -> Result<&'static mqblk_sim::scenario::Scenario, String> {
    mqblk_sim::scenario::find(name).ok_or_else(|| {
        let known: Vec<&str> = mqblk_sim::scenario::SCENARIOS
            .iter()
            .map(|s| s.name)
            .collect();
        format!("unknown scenario '{name}' (known: {})", known.join(", "))
    })
}

/// `mqblk scenario NAME --json` without printing (what the Python bindings call).
pub fn scenario_json(
    name: &str,
    seed: u64,
    quick: bool,
    cost_profile: &str,
) -> Result<serde_json::Value, CliError> {
    let opts = mqblk_sim::scenario::ScenarioOpts {
        quick,
        seed,
        schedulers: Vec::new(),
        profile: mqblk_sim::cost::CostProfile::parse(cost_profile)?,
        perturb: None,
        trace: None,
    };
    let sc = find_scenario(name)?;
    let rep = (sc.run)(&opts)?;
    Ok(scenario_value(&rep, &opts))
}

/// `mqblk scenario NAME --sensitivity`: the sweep, its table (or JSON), exit 3 if the
/// direction fails in any run.
fn sensitivity(
    sc: &mqblk_sim::scenario::Scenario,
    opts: &mqblk_sim::scenario::ScenarioOpts,
    json: bool,
    host: Instant,
) -> Result<i32, CliError> {
    // A line rewritten in place on a terminal; in a log, a line at every tenth of the runs.
    let tty = std::io::stderr().is_terminal();
    let progress = |done: usize, total: usize| {
        if tty {
            eprint!("\rscenario {}: sensitivity {done}/{total} runs", sc.name);
        } else if done * 10 / total != (done - 1) * 10 / total {
            eprintln!("scenario {}: sensitivity {done}/{total} runs", sc.name);
        }
    };
    let s = mqblk_sim::scenario::sensitivity::run(sc, opts, &progress)?;
    eprintln!(
        "\rscenario {}: sensitivity, {} runs in {:.1} host s",
        sc.name,
        s.runs.len(),
        host.elapsed().as_secs_f64()
    );
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", s.table());
    }
    Ok(if s.failures().next().is_none() { 0 } else { 3 })
}

/// Runs `mqblk scenario`.
pub fn scenario_main(args: ScenarioArgs) -> i32 {
    match scenario(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mqblk scenario: {e}");
            2
        }
    }
}

fn scenario(args: ScenarioArgs) -> Result<i32, CliError> {
    let opts = mqblk_sim::scenario::ScenarioOpts {
        quick: args.quick,
        seed: args.seed,
        schedulers: args.schedulers,
        profile: mqblk_sim::cost::CostProfile::parse(&args.cost_profile)?,
        perturb: None,
        trace: args
            .trace
            .as_deref()
            .map(|p| std::sync::Arc::new(mqblk_sim::scenario::TraceRuns::new(p))),
    };
    let (name, svg, json) = (args.name, args.svg, args.json);
    let name = name.ok_or("which scenario? (mqblk scenario list)")?;
    if name == "list" {
        for s in mqblk_sim::scenario::SCENARIOS {
            println!("{:<22} \"{}\"\n{:<22} {}", s.name, s.mail, "", s.about);
        }
        return Ok(0);
    }
    let sc = find_scenario(&name)?;
    eprintln!(
        "scenario {}: running (seed {}, cost profile {})...",
        sc.name,
        opts.seed,
        opts.profile.name()
    );
    let host = Instant::now();
    if args.sensitivity {
        return sensitivity(sc, &opts, json, host);
    }
    let rep = (sc.run)(&opts)?;
    eprintln!(
        "scenario {}: done in {:.1} host s",
        sc.name,
        host.elapsed().as_secs_f64()
    );
    if json {
        let v = scenario_value(&rep, &opts);
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{}\n\n{}\n{}\n{}",
            rep.title, rep.table, rep.comparison, rep.evidence
        );
        println!(
            "direction of the seed's result: {}",
            if rep.direction_holds {
                "holds"
            } else {
                "does NOT hold"
            }
        );
    }
    let path = svg.unwrap_or_else(|| format!("{}.svg", rep.name));
    if path != "-" {
        std::fs::write(&path, &rep.svg).map_err(|e| format!("--svg={path}: {e}"))?;
        eprintln!("chart written to {path}");
    }
    Ok(if rep.direction_holds { 0 } else { 3 })
}
