//! `mqblk replay`: a blktrace capture replayed through the stack in the simulator.

use crate::args::ReplayArgs;
use crate::CliError;
use mqblk_device::{DeviceConfig, DriverConfig, ModelConfig};
use mqblk_sim::replay::{Mode, Replayable};
use mqblk_sim::QueueSettings;
use mqblk_sim::{DeviceSpec, Sim, SimConfig};
use mqblk_trace::TraceSet;
use mqblk_workload::{json_report, text_report, Ddir, LatStat, RunReport};
use std::time::Instant;

pub fn main(args: ReplayArgs) -> i32 {
    match replay(args) {
        Ok((out, code)) => {
            print!("{out}");
            code
        }
        Err(e) => {
            eprintln!("mqblk replay: {e}");
            2
        }
    }
}

/// `mqblk ARGS` for replay without printing (the Python bindings): parses `args` as the
/// command line after `mqblk replay`.
pub fn replay_args(args: &[String]) -> Result<(String, i32), CliError> {
    use clap::Parser;
    let argv: Vec<String> = ["mqblk", "replay"]
        .iter()
        .map(|s| s.to_string())
        .chain(args.iter().cloned())
        .collect();
    let argv = crate::args::sched_args(argv);
    let cli = crate::args::Cli::try_parse_from(&argv)
        .map_err(|e| crate::args::one_line_error(&argv, &e))?;
    match cli.cmd {
        Some(crate::args::Cmd::Replay(a)) => replay(a),
        _ => Err("expected replay arguments".into()),
    }
}

/// Replays as `mqblk replay` does; returns the report (text or JSON) and the exit code.
pub fn replay(args: ReplayArgs) -> Result<(String, i32), CliError> {
    use std::fmt::Write as _;
    let mut out = String::new();
    let trace = args.trace;
    let device = args.device;
    let sched = args.ioscheduler;
    let tunables = args.tunables.clone();
    let mode = if args.mode == "open" {
        Mode::Open
    } else {
        Mode::Closed
    };
    let speed = args.speed;
    let waits = args.waits == "inferred";
    if args.cpus.is_some_and(|n| n == 0 || n > 1024) {
        return Err(format!("--cpus={}: expected 1..=1024", args.cpus.unwrap_or(0)).into());
    }
    let cpus = args.cpus;
    let seed = args.seed;
    let out_trace = args.out_trace;
    let json = args.output_format == "json";
    let set = TraceSet::open(&trace)?;
    let rep = Replayable::from_trace(&set);
    if rep.total_ios == 0 {
        return Err(format!("{}: no queue (Q) events to replay", trace.display()).into());
    }
    // One device for either replay: a model in virtual time (`--driver=sim`, the default),
    // or the null or uring driver in real time.
    let end = rep
        .processes
        .iter()
        .flat_map(|p| {
            p.ios
                .iter()
                .map(|t| (t.io.sector + t.io.nr_sectors as u64) * 512)
        })
        .max()
        .unwrap_or(0);
    let driver = match DriverConfig::named(args.driver.as_deref().unwrap_or("sim"))? {
        DriverConfig::Uring(u) => DriverConfig::Uring(mqblk_drivers::UringConfig {
            path: args
                .filename
                .ok_or("--driver=uring needs --filename=PATH")?
                .into(),
            queue_depth: 128,
            direct: true,
            size_bytes: args.size,
            ..u
        }),
        // A null device as large as the traced range (it stores nothing).
        DriverConfig::Null(n) => DriverConfig::Null(mqblk_drivers::NullConfig {
            hw_queue_depth: 128,
            size_bytes: args
                .size
                .unwrap_or(end.max(1 << 30).next_multiple_of(1 << 20)),
            ..n
        }),
        DriverConfig::Model(m) => DriverConfig::Model(ModelConfig {
            spec: DeviceSpec::parse(&device)?,
            ..m
        }),
    };
    let dev = DeviceConfig {
        queue: QueueSettings {
            scheduler: Some(sched.clone()),
            sched_tunables: tunables,
            // The traced device took I/Os this large in one request; so must ours.
            max_sectors_kb: (rep.max_io_bytes.div_ceil(1024) as u32).max(1280),
            ..QueueSettings::default()
        },
        ..DeviceConfig::new(driver)
    };
    if !matches!(dev.driver, DriverConfig::Model(_)) {
        return replay_threaded(&trace, &rep, dev, mode, speed, waits, json);
    }
    let max_cpu = rep.processes.iter().map(|p| p.cpu).max().unwrap_or(0);
    let nr_cpus = cpus.unwrap_or((max_cpu + 1).min(1024) as u16);
    let capacity = dev.capacity()? / 512;
    let writer = crate::trace_cmd::TraceOut::open(out_trace.as_deref());
    let cfg = SimConfig {
        seed,
        nr_cpus,
        device: dev,
        check_every: 1000,
        tracer: crate::trace_cmd::tracer_of(&writer),
        ..SimConfig::default()
    };
    let jobs = mqblk_sim::replay::jobs(&rep, mode, speed, nr_cpus, capacity, waits, 0);
    let host = Instant::now();
    let res = Sim::new(cfg, jobs).and_then(Sim::run)?;
    let host_s = host.elapsed().as_secs_f64();
    crate::trace_cmd::finish(&writer)?;
    // Flushes move no data and are not counted as I/Os in the report.
    let replayed_ios: u64 = res.jobs.iter().map(|j| j.ios + j.errors).sum::<u64>() + rep.flushes;
    let replayed_bytes: u64 = res.jobs.iter().map(|j| j.bytes).sum();
    let mut lat = LatStat::with_hist();
    for j in &res.jobs {
        for d in [Ddir::Read, Ddir::Write] {
            lat.merge(&j.stats.dir(d).lat);
        }
    }
    let mut orig = rep.original_lat.clone();
    orig.sort_unstable();
    let pct = |v: &[u64], p: f64| -> Option<u64> {
        (!v.is_empty()).then(|| v[((p / 100.0) * (v.len() - 1) as f64).round() as usize])
    };
    let points = [50.0, 90.0, 99.0, 99.9];
    let report = RunReport {
        jobs: res.jobs.iter().map(|j| j.stats.clone()).collect(),
        global_options: Vec::new(),
        group_reporting: false,
        percentile_list: mqblk_workload::DEFAULT_PERCENTILES.to_vec(),
        clat_percentiles: true,
        lat_percentiles: false,
        slat_percentiles: false,
        json_plus: false,
        timestamp_ms: res.end.0 / 1_000_000,
        elapsed_sec: res.end.0.div_ceil(1_000_000_000),
        start_lines: Vec::new(),
        units: Default::default(),
    };
    let ms = |v: Option<u64>| v.map_or("-".to_string(), |x| format!("{:.3}", x as f64 / 1e6));
    if json {
        let mut v: serde_json::Value =
            serde_json::from_str(&json_report(&report)).map_err(|e| e.to_string())?;
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "mqblk_replay".into(),
                serde_json::json!(ReplaySummary {
                    trace: trace.display().to_string(),
                    driver: None,
                    scheduler: None,
                    mode: mode_name(mode),
                    waits: wait_counts(mode, waits, &rep),
                    trace_ios: rep.total_ios,
                    trace_bytes: rep.total_bytes,
                    replayed_ios,
                    replayed_bytes,
                    skipped: Some(rep.skipped),
                    errors: None,
                    wall_s: None,
                    events_per_s: None,
                    original_lat_ns: points.iter().map(|&p| pct(&orig, p)).collect(),
                    replayed_lat_ns: points.iter().map(|&p| lat.percentile(p)).collect(),
                    percentiles: points.to_vec(),
                }),
            );
        }
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        out.push_str(&text_report(&report));
        let _ = writeln!(
            out,
            "\nreplay: {} ({} processes, {}): {} I/Os / {} bytes in the trace, {} / {} replayed, {} skipped",
            trace.display(),
            rep.processes.len(),
            mode_text(mode, speed, waits, &rep),
            rep.total_ios,
            rep.total_bytes,
            replayed_ios,
            replayed_bytes,
            rep.skipped
        );
        let _ = writeln!(
            out,
            "latency (ms)     {:>9} {:>9} {:>9} {:>9} {:>9}",
            "p50", "p90", "p99", "p99.9", "max"
        );
        let _ = writeln!(
            out,
            "original Q->C    {:>9} {:>9} {:>9} {:>9} {:>9}   ({} paired)",
            ms(pct(&orig, 50.0)),
            ms(pct(&orig, 90.0)),
            ms(pct(&orig, 99.0)),
            ms(pct(&orig, 99.9)),
            ms(orig.last().copied()),
            orig.len()
        );
        let _ = writeln!(
            out,
            "replayed {:<9}{:>9} {:>9} {:>9} {:>9} {:>9}",
            sched,
            ms(lat.percentile(50.0)),
            ms(lat.percentile(90.0)),
            ms(lat.percentile(99.0)),
            ms(lat.percentile(99.9)),
            ms((lat.n > 0).then_some(lat.max))
        );
        let _ = writeln!(out, "\n{}", crate::sim::sim_text(&res));
    }
    eprintln!(
        "replay speed: {} events in {:.3} host s = {:.0} trace events per host second",
        rep.total_ios,
        host_s,
        rep.total_ios as f64 / host_s.max(1e-9)
    );
    Ok((out, i32::from(replayed_ios != rep.total_ios)))
}

/// What a replay did, beside the fio-style report (`mqblk_replay` in the JSON).
#[derive(serde::Serialize)]
struct ReplaySummary {
    trace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    driver: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduler: Option<String>,
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    waits: Option<WaitCounts>,
    trace_ios: u64,
    trace_bytes: u64,
    replayed_ios: u64,
    replayed_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    events_per_s: Option<f64>,
    original_lat_ns: Vec<Option<u64>>,
    replayed_lat_ns: Vec<Option<u64>>,
    percentiles: Vec<f64>,
}

/// The waits a closed-loop replay honoured ([`mqblk_sim::replay::Wait`]).
#[derive(serde::Serialize)]
struct WaitCounts {
    /// I/Os queued with nothing of their process in flight: it waited for its own first.
    drains: u64,
    /// Of those, the ones that also waited for another process's completion.
    on_other_processes: u64,
}

fn wait_counts(mode: Mode, waits: bool, rep: &Replayable) -> Option<WaitCounts> {
    (mode == Mode::Closed && waits).then_some(WaitCounts {
        drains: rep.drains,
        on_other_processes: rep.cross_waits,
    })
}

/// "closed mode, waits as traced (...)", "closed mode, no waits", "open mode x2".
fn mode_text(mode: Mode, speed: f64, waits: bool, rep: &Replayable) -> String {
    match (mode, wait_counts(mode, waits, rep)) {
        (Mode::Open, _) => format!("open mode x{speed}"),
        (_, Some(w)) => format!(
            "closed mode, waits as traced: {} drains, {} on another process",
            w.drains, w.on_other_processes
        ),
        _ => "closed mode, no waits".into(),
    }
}

fn mode_name(mode: Mode) -> &'static str {
    if mode == Mode::Open {
        "open"
    } else {
        "closed"
    }
}

/// Percentiles of a sorted list.
fn pct(v: &[u64], p: f64) -> Option<u64> {
    (!v.is_empty()).then(|| v[((p / 100.0) * (v.len() - 1) as f64).round() as usize])
}

fn replay_threaded(
    trace: &std::path::Path,
    rep: &Replayable,
    opts: DeviceConfig,
    mode: Mode,
    speed: f64,
    waits: bool,
    json: bool,
) -> Result<(String, i32), CliError> {
    use std::fmt::Write as _;
    let mut text = String::new();
    let driver = opts.driver.name().to_string();
    let sched = opts.queue.scheduler.clone().unwrap_or_default();
    let out = mqblk_runtime::replay::replay(rep, opts, mode, speed, waits)?;
    let mut orig = rep.original_lat.clone();
    orig.sort_unstable();
    let points = [50.0, 90.0, 99.0, 99.9];
    let ms = |v: Option<u64>| v.map_or("-".to_string(), |x| format!("{:.3}", x as f64 / 1e6));
    let rate = rep.total_ios as f64 / out.wall.as_secs_f64().max(1e-9);
    if json {
        let v = serde_json::json!({
            "mqblk_replay": ReplaySummary {
                trace: trace.display().to_string(),
                driver: Some(driver.clone()),
                scheduler: Some(sched.clone()),
                mode: mode_name(mode),
                waits: wait_counts(mode, waits, rep),
                trace_ios: rep.total_ios,
                trace_bytes: rep.total_bytes,
                replayed_ios: out.ios,
                replayed_bytes: out.bytes,
                skipped: None,
                errors: Some(out.errors),
                wall_s: Some(out.wall.as_secs_f64()),
                events_per_s: Some(rate),
                original_lat_ns: points.iter().map(|&p| pct(&orig, p)).collect(),
                replayed_lat_ns: points.iter().map(|&p| out.lat.percentile(p)).collect(),
                percentiles: points.to_vec(),
            }
        });
        let _ = writeln!(
            text,
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        let _ = writeln!(
            text,
            "replay: {} ({} processes, {}, driver {driver}, scheduler {sched}): {} I/Os / {} bytes in the trace, {} / {} replayed, {} errors, {:.3} s",
            trace.display(),
            rep.processes.len(),
            mode_text(mode, speed, waits, rep),
            rep.total_ios,
            rep.total_bytes,
            out.ios,
            out.bytes,
            out.errors,
            out.wall.as_secs_f64()
        );
        let _ = writeln!(
            text,
            "latency (ms)     {:>9} {:>9} {:>9} {:>9}",
            "p50", "p90", "p99", "p99.9"
        );
        let _ = writeln!(
            text,
            "original Q->C    {:>9} {:>9} {:>9} {:>9}",
            ms(pct(&orig, 50.0)),
            ms(pct(&orig, 90.0)),
            ms(pct(&orig, 99.0)),
            ms(pct(&orig, 99.9))
        );
        let _ = writeln!(
            text,
            "replayed         {:>9} {:>9} {:>9} {:>9}",
            ms(out.lat.percentile(50.0)),
            ms(out.lat.percentile(90.0)),
            ms(out.lat.percentile(99.0)),
            ms(out.lat.percentile(99.9))
        );
    }
    eprintln!(
        "replay speed: {} events in {:.3} s = {rate:.0} trace events per second",
        rep.total_ios,
        out.wall.as_secs_f64()
    );
    Ok((text, i32::from(out.ios != rep.total_ios || out.errors != 0)))
}
