//! fio's JSON output (`--output-format=json`), for the subset of keys mqblk produces.

use super::emit::{render, Obj, J};
use super::fmt::ctime;
use super::{group_stats, percent_of_group, GroupDir, GroupStats, RunReport};
use crate::stats::{DirStats, JobStats, LatStat, SampleStat, Unified};
use crate::Ddir;

/// Keys of `iodepth_level`.
const LEVEL_KEYS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
/// Keys of `iodepth_submit` and `iodepth_complete`.
const BATCH_KEYS: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];
/// Keys of `latency_ns` and `latency_us`.
const LAT_KEYS: [&str; 10] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
];
/// Keys of `latency_ms`.
const LAT_MS_KEYS: [&str; 12] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
];

/// Renders the run as fio's JSON document: the same key names, key order and number
/// formatting (`%f` floats), so fio result scrapers can read it.
pub fn json_report(run: &RunReport) -> String {
    let entries = run.report_entries();
    let groups = group_stats(&entries);
    let mut root = Obj::new();
    root.string(
        "fio version",
        &format!("mqblk-{}", env!("CARGO_PKG_VERSION")),
    )
    .int("timestamp", run.timestamp_ms / 1000)
    .int("timestamp_ms", run.timestamp_ms)
    .string("time", &ctime(run.timestamp_ms / 1000));
    if !run.global_options.is_empty() {
        root.put("global options", options_object(&run.global_options));
    }
    let jobs = entries
        .iter()
        .map(|job| job_object(run, job, find_group(&groups, job.groupid)))
        .collect();
    root.put("jobs", J::Arr(jobs));
    render(&root.build())
}

/// The group summary of `groupid` (always present for report entries).
fn find_group(groups: &[GroupStats], groupid: u32) -> [GroupDir; 3] {
    groups
        .iter()
        .find(|g| g.groupid == groupid)
        .map_or([GroupDir::default(); 3], |g| g.dirs)
}

/// An options object; a repeated option keeps its first position and its last value.
fn options_object(options: &[(String, String)]) -> J {
    let mut pairs: Vec<(String, J)> = Vec::new();
    for (key, value) in options {
        let value = J::Str(value.clone());
        match pairs.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => pairs.push((key.clone(), value)),
        }
    }
    J::Obj(pairs)
}

/// One element of `jobs`.
fn job_object(run: &RunReport, job: &JobStats, group: [GroupDir; 3]) -> J {
    let mut o = Obj::new();
    o.string("jobname", &job.name)
        .int("groupid", u64::from(job.groupid))
        .int("job_start", job.job_start_ms)
        .put("error", J::Int(i128::from(job.error)))
        .int("eta", 0)
        .int("elapsed", run.elapsed_sec);
    if !job.job_options.is_empty() {
        o.put("job options", options_object(&job.job_options));
    }
    // fio's `unified_rw_reporting=mixed`: one direction, `mixed`, and no `sync`.
    let mixed_only = job.unified == Unified::Mixed;
    for dir in Ddir::ALL {
        let agg = group.get(dir.index()).map_or(0, |g| g.agg);
        if !mixed_only {
            o.put(dir.name(), dir_object(run, job.dir(dir), dir, agg));
        } else if dir == Ddir::Read {
            o.put("mixed", dir_object(run, job.dir(dir), dir, agg));
        }
    }
    if !mixed_only {
        o.put("sync", sync_object(run, job));
    }
    if let Some(m) = &job.mixed {
        let agg = group.iter().map(|g| g.agg).sum();
        o.put("mixed", dir_object(run, m, Ddir::Read, agg));
    }
    add_cpu(&mut o, job);
    add_distributions(&mut o, job);
    if let Some(ss) = &job.steadystate {
        o.put("steadystate", steady_object(ss));
    }
    if !job.description.is_empty() {
        o.string("desc", &job.description);
    }
    for (key, value) in &job.extra {
        o.put(key, J::from_serde(value));
    }
    o.build()
}

/// fio's `steadystate` object (`show_thread_status_json`).
fn steady_object(ss: &crate::steadystate::SteadyReport) -> J {
    let mut data = Obj::new();
    data.int("bw_mean", ss.bw_mean)
        .int("iops_mean", ss.iops_mean)
        .put(
            "iops",
            J::Arr(ss.iops.iter().map(|&v| J::Int(i128::from(v))).collect()),
        )
        .put(
            "bw",
            J::Arr(ss.bw.iter().map(|&v| J::Int(i128::from(v))).collect()),
        );
    let mut o = Obj::new();
    o.string("ss", &ss.crit.describe())
        .int("duration", ss.duration)
        .int("attained", u64::from(ss.attained))
        .string("criterion", &ss.crit.describe_value(ss.criterion))
        .float("max_deviation", ss.max_deviation)
        .float("slope", ss.slope)
        .put("data", data.build());
    o.build()
}

/// `job_runtime`, CPU percentages, context switches and faults.
fn add_cpu(o: &mut Obj, job: &JobStats) {
    let (usr, sys) = job.cpu_percent();
    o.int("job_runtime", job.job_runtime_ns / 1_000_000)
        .float("usr_cpu", usr)
        .float("sys_cpu", sys)
        .int("ctx", job.ctx_switches)
        .int("majf", job.majf)
        .int("minf", job.minf);
}

/// The depth and latency distributions, all in percent.
fn add_distributions(o: &mut Obj, job: &JobStats) {
    let total = job.total_rw_ios();
    let submits = job
        .iodepth_submit
        .iter()
        .fold(0, |a: u64, b| a.saturating_add(*b));
    let reaps = job
        .iodepth_complete
        .iter()
        .fold(0, |a: u64, b| a.saturating_add(*b));
    o.put(
        "iodepth_level",
        dist_object(&LEVEL_KEYS, &job.iodepth_level, total, 0.1),
    );
    o.put(
        "iodepth_submit",
        dist_object(&BATCH_KEYS, &job.iodepth_submit, submits, 0.1),
    );
    o.put(
        "iodepth_complete",
        dist_object(&BATCH_KEYS, &job.iodepth_complete, reaps, 0.1),
    );
    let buckets = job.latency_buckets();
    o.put(
        "latency_ns",
        dist_object(&LAT_KEYS, &buckets.ns, total, 0.01),
    );
    o.put(
        "latency_us",
        dist_object(&LAT_KEYS, &buckets.us, total, 0.01),
    );
    o.put(
        "latency_ms",
        dist_object(&LAT_MS_KEYS, &buckets.ms, total, 0.01),
    );
    // fio's latency-target keys (without a target: the job's iodepth, 0, 100, 0).
    o.int("latency_depth", u64::from(job.latency_depth))
        .int("latency_target", job.latency_target_us)
        .float("latency_percentile", job.latency_percentile)
        .int("latency_window", job.latency_window_us);
    if job.continue_on_error {
        o.int("total_err", job.total_err)
            .put("first_error", J::Int(i128::from(job.first_error)));
    }
}

/// Counts as percentages of `total`. Like fio, a nonzero count never shows as less
/// than `floor` percent, so rare events stay visible.
fn dist_object(keys: &[&str], counts: &[u64], total: u64, floor: f64) -> J {
    let mut o = Obj::new();
    for (key, &count) in keys.iter().zip(counts) {
        o.float(key, percent(count, total, floor));
    }
    o.build()
}

/// One distribution percentage (see [`dist_object`]).
pub(crate) fn percent(count: u64, total: u64, floor: f64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    let p = count as f64 * 100.0 / total as f64;
    if count > 0 && p < floor {
        floor
    } else {
        p
    }
}

/// `read`, `write` or `trim`.
fn dir_object(run: &RunReport, d: &DirStats, dir: Ddir, group_agg: u64) -> J {
    let bw_bytes = d.bw_bytes();
    let mut o = Obj::new();
    o.int("io_bytes", d.io_bytes)
        .int("io_kbytes", d.io_bytes >> 10)
        .int("bw_bytes", bw_bytes)
        .int("bw", bw_bytes / 1024)
        .float("iops", d.iops_value())
        .int("runtime", d.runtime_ms())
        .int("total_ios", d.total_ios)
        .int("short_ios", d.short_ios)
        .int("drop_ios", d.drop_ios);
    o.put("slat_ns", lat_object(run, &d.slat, run.slat_percentiles));
    o.put("clat_ns", lat_object(run, &d.clat, run.clat_percentiles));
    o.put("lat_ns", lat_object(run, &d.lat, run.lat_percentiles));
    let prios = d.reported_prios();
    if dir != Ddir::Trim && !prios.is_empty() {
        // fio's `clat_prio`: completion latencies, or total ones with `lat_percentiles`.
        let key = if d.prio_total { "lat_ns" } else { "clat_ns" };
        let pct = run.clat_percentiles || run.lat_percentiles;
        let list = prios
            .iter()
            .map(|p| {
                let mut e = Obj::new();
                e.int("prioclass", u64::from(p.ioprio >> 13))
                    .int("prio", u64::from(p.ioprio & 7));
                e.put(key, lat_object(run, &p.lat, pct));
                e.build()
            })
            .collect();
        o.put("prios", J::Arr(list));
    }
    add_samples(&mut o, "bw", &d.bw, Some(group_agg));
    add_samples(&mut o, "iops", &d.iops, None);
    o.build()
}

/// `bw_*` (with `bw_agg` when `group_agg` is given) or `iops_*` sample statistics.
fn add_samples(o: &mut Obj, prefix: &str, s: &SampleStat, group_agg: Option<u64>) {
    let (min, max) = if s.n > 0 { (s.min, s.max) } else { (0, 0) };
    o.int(&format!("{prefix}_min"), min)
        .int(&format!("{prefix}_max"), max);
    if let Some(agg) = group_agg {
        let share = if s.n > 0 {
            percent_of_group(s.mean, agg)
        } else {
            0.0
        };
        o.float("bw_agg", share);
    }
    let dev_key = if prefix == "bw" {
        "bw_dev"
    } else {
        "iops_stddev"
    };
    o.float(&format!("{prefix}_mean"), s.mean)
        .float(dev_key, s.stddev())
        .int(&format!("{prefix}_samples"), s.n);
}

/// `sync`: only `total_ios` and `lat_ns`.
fn sync_object(run: &RunReport, job: &JobStats) -> J {
    let mut o = Obj::new();
    o.int("total_ios", job.sync.n);
    let pct = run.clat_percentiles || run.lat_percentiles;
    o.put("lat_ns", lat_object(run, &job.sync, pct));
    o.build()
}

/// A latency object: `min`, `max`, `mean`, `stddev`, `N`, and `percentile` (plus `bins`
/// for json+) when percentiles are on and there are samples.
fn lat_object(run: &RunReport, stat: &LatStat, percentiles: bool) -> J {
    let mut o = Obj::new();
    o.int("min", stat.min)
        .int("max", stat.max)
        .float("mean", stat.mean())
        .float("stddev", stat.stddev())
        .int("N", stat.n);
    let hist = stat
        .hist
        .as_ref()
        .filter(|h| percentiles && stat.n > 0 && h.samples() > 0);
    if let Some(hist) = hist {
        let mut p = Obj::new();
        for &pct in run.percentiles() {
            p.int(&format!("{pct:.6}"), hist.percentile(pct).unwrap_or(0));
        }
        o.put("percentile", p.build());
        if run.json_plus {
            let mut bins = Obj::new();
            for (value, count) in hist.nonzero_bins() {
                bins.int(&value.to_string(), count);
            }
            o.put("bins", bins.build());
        }
    }
    o.build()
}
