//! Tests of the JSON and text reports.

use serde_json::Value;

use super::*;
use crate::stats::LatHist;

/// Midnight-ish timestamp with milliseconds: Tue Nov 14 22:13:20 2023 UTC.
const TS_MS: u64 = 1_700_000_000_123;

/// A job that read 1000 blocks of 4 KiB in one second, with clat 1000..=1999 ns.
fn synthetic(name: &str) -> JobStats {
    let mut job = JobStats::new(name);
    job.pid = 42;
    let read = job.dir_mut(Ddir::Read);
    for i in 0..1000u64 {
        read.record_io(4096, 100 + i % 10, 1000 + i);
    }
    read.runtime_ns = 1_000_000_000;
    read.push_sample(2_048_000, 500, 500_000_000);
    read.push_sample(2_048_000, 500, 500_000_000);
    job.job_runtime_ns = 1_000_000_000;
    job.usr_cpu_ns = 250_000_000;
    job.sys_cpu_ns = 500_000_000;
    job.ctx_switches = 10;
    job.minf = 3;
    job.mark_depth(1, 1000);
    job.mark_submit(1);
    job.mark_complete(1);
    job.job_options = vec![("rw".to_string(), "randread".to_string())];
    job.extra
        .insert("hctx_dispatched".to_string(), serde_json::json!([1000, 0]));
    job.extra_lines.push("hctx0: dispatched=1000".to_string());
    job
}

fn run_of(jobs: Vec<JobStats>) -> RunReport {
    RunReport {
        jobs,
        global_options: vec![("iodepth".to_string(), "1".to_string())],
        timestamp_ms: TS_MS,
        elapsed_sec: 1,
        ..RunReport::default()
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{text}"))
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn json_has_fio_shape_and_values() {
    let text = json_report(&run_of(vec![synthetic("j")]));
    let v = parse(&text);
    assert_eq!(
        keys(&v),
        [
            "fio version",
            "timestamp",
            "timestamp_ms",
            "time",
            "global options",
            "jobs"
        ]
    );
    assert_eq!(
        v["fio version"],
        format!("mqblk-{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(v["timestamp"], 1_700_000_000u64);
    assert_eq!(v["timestamp_ms"], TS_MS);
    assert_eq!(v["time"], "Tue Nov 14 22:13:20 2023");
    assert_eq!(v["global options"]["iodepth"], "1");

    let job = &v["jobs"][0];
    let job_keys = keys(job);
    let expected_start = [
        "jobname",
        "groupid",
        "job_start",
        "error",
        "eta",
        "elapsed",
        "job options",
        "read",
        "write",
        "trim",
        "sync",
        "job_runtime",
        "usr_cpu",
        "sys_cpu",
        "ctx",
        "majf",
        "minf",
        "iodepth_level",
        "iodepth_submit",
        "iodepth_complete",
        "latency_ns",
        "latency_us",
        "latency_ms",
        "latency_depth",
        "latency_target",
        "latency_percentile",
        "latency_window",
        "hctx_dispatched",
    ];
    assert_eq!(job_keys, expected_start);
    assert_eq!(job["job options"]["rw"], "randread");
    assert_eq!(job["hctx_dispatched"][0], 1000);

    let read = &job["read"];
    assert!(read["iops"].is_f64());
    assert_eq!(read["iops"].as_f64(), Some(1000.0));
    assert!(read["bw"].is_u64());
    assert_eq!(read["bw"], 4000);
    assert_eq!(read["bw_bytes"], 4_096_000);
    assert_eq!(read["io_kbytes"], 4000);
    assert_eq!(read["runtime"], 1000);
    assert_eq!(read["total_ios"], 1000);

    let mut hist = LatHist::new();
    (1000..2000).for_each(|v| hist.record(v));
    let p99 = &read["clat_ns"]["percentile"]["99.000000"];
    assert!(p99.is_u64());
    assert_eq!(p99.as_u64(), hist.percentile(99.0));
    assert!((1970..=2000).contains(&p99.as_u64().unwrap_or(0)));
    assert_eq!(keys(&read["clat_ns"]["percentile"]).len(), 17);
    assert_eq!(read["clat_ns"]["min"], 1000);
    assert_eq!(read["clat_ns"]["max"], 1999);
    assert_eq!(read["clat_ns"]["N"], 1000);

    assert!(read["lat_ns"]["mean"].is_f64());
    assert_eq!(read["lat_ns"]["mean"].as_f64(), Some(1604.0));
    assert!(read["lat_ns"].get("percentile").is_none());
    assert!(read["slat_ns"].get("percentile").is_none());
    assert!(read["clat_ns"].get("bins").is_none());
    assert_eq!(read["bw_samples"], 2);
    assert_eq!(read["bw_mean"].as_f64(), Some(4000.0));
    assert_eq!(read["bw_agg"].as_f64(), Some(100.0));
    assert_eq!(read["iops_min"], 1000);

    let write = &job["write"];
    assert_eq!(write["total_ios"], 0);
    assert_eq!(write["iops"].as_f64(), Some(0.0));
    assert!(write["clat_ns"].get("percentile").is_none());
    assert_eq!(keys(&job["sync"]), ["total_ios", "lat_ns"]);

    assert_eq!(job["usr_cpu"].as_f64(), Some(25.0));
    assert_eq!(job["sys_cpu"].as_f64(), Some(50.0));
    assert_eq!(job["job_runtime"], 1000);
    assert_eq!(job["iodepth_level"]["1"].as_f64(), Some(100.0));
    assert_eq!(job["iodepth_submit"]["4"].as_f64(), Some(100.0));
    assert_eq!(job["latency_us"]["2"].as_f64(), Some(100.0));
    assert_eq!(
        keys(&job["latency_ms"]).last().map(String::as_str),
        Some(">=2000")
    );
}

#[test]
fn json_floats_have_six_decimals() {
    let text = json_report(&run_of(vec![synthetic("j")]));
    assert!(text.contains("\"iops\" : 1000.000000,"), "{text}");
    assert!(text.contains("\"99.000000\" : "));
    assert!(text.starts_with("{\n  \"fio version\" : \"mqblk-"));
    for line in text.lines() {
        let Some((_, value)) = line.split_once(" : ") else {
            continue;
        };
        let value = value.trim_end_matches(',');
        if value.starts_with('"') || !value.contains('.') {
            continue;
        }
        let decimals = value.split('.').nth(1).map_or(0, str::len);
        assert_eq!(decimals, 6, "float with wrong precision: {line}");
    }
}

#[test]
fn json_escapes_strings_and_keeps_valid() {
    let mut job = synthetic("we\"ird\\name\n");
    job.extra
        .insert("ratio".to_string(), serde_json::json!(0.5));
    let v = parse(&json_report(&run_of(vec![job])));
    assert_eq!(v["jobs"][0]["jobname"], "we\"ird\\name\n");
    assert_eq!(v["jobs"][0]["ratio"].as_f64(), Some(0.5));
    let empty = parse(&json_report(&RunReport::default()));
    assert_eq!(empty["jobs"].as_array().map(Vec::len), Some(0));
}

#[test]
fn json_plus_adds_bins() {
    let mut run = run_of(vec![synthetic("j")]);
    run.json_plus = true;
    let v = parse(&json_report(&run));
    let bins = v["jobs"][0]["read"]["clat_ns"]["bins"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let total: u64 = bins.values().filter_map(Value::as_u64).sum();
    assert_eq!(total, 1000);
}

#[test]
fn group_reporting_merges_jobs() {
    let mut run = run_of(vec![synthetic("a"), synthetic("b")]);
    let separate = parse(&json_report(&run));
    assert_eq!(separate["jobs"].as_array().map(Vec::len), Some(2));
    assert_eq!(separate["jobs"][1]["read"]["bw_agg"].as_f64(), Some(50.0));

    run.group_reporting = true;
    let merged = parse(&json_report(&run));
    assert_eq!(merged["jobs"].as_array().map(Vec::len), Some(1));
    let read = &merged["jobs"][0]["read"];
    assert_eq!(merged["jobs"][0]["jobname"], "a");
    assert_eq!(read["total_ios"], 2000);
    assert_eq!(read["iops"].as_f64(), Some(2000.0));
    assert_eq!(read["bw_mean"].as_f64(), Some(8000.0));
    assert_eq!(read["bw_agg"].as_f64(), Some(100.0));
    assert!(text_report(&run).contains("a: (groupid=0, jobs=2): err= 0"));
}

#[test]
fn text_report_reads_like_fio() {
    let text = text_report(&run_of(vec![synthetic("j")]));
    let expected_lines = [
        "j: (groupid=0, jobs=1): err= 0: pid=42: Tue Nov 14 22:13:20 2023",
        "  read: IOPS=1000, BW=4000KiB/s (4096kB/s)(4000KiB/1000msec)",
        "    slat (nsec): min=100, max=109, avg=104.50, stdev= 2.87",
        "    clat (nsec): min=1000, max=1999, avg=1499.50, stdev=288.82",
        "     lat (nsec): min=1100, max=2108, avg=1604.00, stdev=288.86",
        "    clat percentiles (nsec):",
        "   bw (  KiB/s): min= 4000, max= 4000, per=100.00%, avg=4000.00, stdev= 0.00, samples=2",
        "   iops        : min= 1000, max= 1000, avg=1000.00, stdev= 0.00, samples=2",
        "  lat (usec)   : 2=100.00%",
        "  cpu          : usr=25.00%, sys=50.00%, ctx=10, majf=0, minf=3",
        "  hctx0: dispatched=1000",
        "  IO depths    : 1=100.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%",
        "     issued rwts: total=1000,0,0,0 short=0,0,0,0 dropped=0,0,0,0",
        "Run status group 0 (all jobs):",
        "   READ: bw=4000KiB/s (4096kB/s), 4000KiB/s-4000KiB/s (4096kB/s-4096kB/s), io=4000KiB (4096kB), run=1000-1000msec",
    ];
    let lines: Vec<&str> = text.lines().collect();
    for want in expected_lines {
        assert!(lines.contains(&want), "missing line {want:?} in:\n{text}");
    }
    let cpu = lines
        .iter()
        .position(|l| l.starts_with("  cpu"))
        .unwrap_or(0);
    assert_eq!(lines.get(cpu + 1), Some(&"  hctx0: dispatched=1000"));
    assert!(text.contains("     |  1.00th=["), "{text}");
    assert!(text.contains(" 99.99th=["), "{text}");
    let block: Vec<&&str> = lines.iter().filter(|l| l.starts_with("     |")).collect();
    assert_eq!(block.len(), 5, "17 percentiles at 4 per row:\n{text}");
}

#[test]
fn text_percentile_scaling_and_units() {
    let mut job = JobStats::new("slow");
    let read = job.dir_mut(Ddir::Read);
    for i in 0..100u64 {
        read.record_io(1 << 20, 5_000, 3_000_000 + i * 2_000_000);
    }
    read.runtime_ns = 10_000_000_000;
    let text = text_report(&run_of(vec![job]));
    assert!(text.contains("    clat (msec): min=3, max=201,"), "{text}");
    assert!(text.contains("    clat percentiles (msec):"), "{text}");
    assert!(
        text.contains("  lat (msec)   : 4=1.00%, 10=3.00%, 20=5.00%, 50=15.00%, 100=25.00%"),
        "{text}"
    );
}

#[test]
fn text_skips_idle_jobs_but_shows_errors() {
    let idle = JobStats::new("idle");
    let mut failed = JobStats::new("failed");
    failed.error = 5;
    failed.error_text = "Input/output error".to_string();
    let text = text_report(&run_of(vec![idle, failed]));
    assert!(!text.contains("idle:"));
    assert!(text.contains("failed: (groupid=0, jobs=1): err= 5 (Input/output error): pid=0"));
}

/// fio's per-priority latencies (`clat_prio`): with two priorities that have I/Os, a
/// direction's report gives each apart, the job's own first (`clat prio 0/0`, then
/// `clat prio 1/0` with its share of the I/Os in its percentile block; JSON `prios` with
/// class, level and its own `clat_ns`); with one only, neither report lists them; merged
/// jobs add them up by priority.
#[test]
fn each_priority_with_ios_is_reported_apart_as_fios_clat_prio() {
    let job = |rt: u64| {
        let mut j = JobStats::new("p");
        let read = j.dir_mut(Ddir::Read);
        read.track_prios(&[0, 1 << 13], false, true);
        for i in 0..100u64 {
            let prio = if i < rt { 1 << 13 } else { 0 };
            read.record_io_prio(4096, 100, 10_000 + i, prio);
        }
        read.runtime_ns = 1_000_000_000;
        j
    };
    let run = RunReport {
        clat_percentiles: true,
        ..run_of(vec![job(25)])
    };
    let text = text_report(&run);
    assert!(
        text.contains("    clat prio 0/0 (nsec): min=10025"),
        "{text}"
    );
    assert!(
        text.contains("    clat prio 1/0 (nsec): min=10000, max=10024"),
        "{text}"
    );
    assert!(
        text.contains("clat prio 1/0 (25.00% of IOs) percentiles"),
        "{text}"
    );
    let v = parse(&json_report(&run));
    let prios = v["jobs"][0]["read"]["prios"].as_array().unwrap().clone();
    let got: Vec<(u64, u64, u64)> = prios
        .iter()
        .map(|p| {
            (
                p["prioclass"].as_u64().unwrap(),
                p["prio"].as_u64().unwrap(),
                p["clat_ns"]["N"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [(0, 0, 75), (1, 0, 25)]);
    assert!(prios[1]["clat_ns"]["percentile"].is_object());
    let one = run_of(vec![job(0)]);
    assert!(!text_report(&one).contains("prio"));
    assert!(parse(&json_report(&one))["jobs"][0]["read"]
        .get("prios")
        .is_none());
    let mut merged = job(25);
    merged.merge(&job(50));
    let read = merged.dir(Ddir::Read);
    let n: Vec<(u16, u64)> = read.prios.iter().map(|p| (p.ioprio, p.lat.n)).collect();
    assert_eq!(n, [(0, 125), (1 << 13, 75)]);
}
