//! fio's human-readable output (`--output-format=normal`).

use std::fmt::Write as _;

use super::fmt::{ctime, format_latency_value, num2str, num2str_from, Unit};
use super::json::percent;
use super::{group_stats, percent_of_group, GroupDir, GroupStats, RunReport};
use crate::stats::{DirStats, JobStats, LatStat, SampleStat, Unified};
use crate::Ddir;

/// Renders the run like fio's normal output: one block per report entry, then a
/// "Run status group" summary per group.
pub fn text_report(run: &RunReport) -> String {
    let entries = run.report_entries();
    let groups = group_stats(&entries);
    let mut out = String::new();
    for line in &run.start_lines {
        out.push_str(line);
        out.push('\n');
    }
    for job in &entries {
        let group = groups
            .iter()
            .find(|g| g.groupid == job.groupid)
            .map_or([GroupDir::default(); 3], |g| g.dirs);
        job_text(&mut out, run, job, &group);
    }
    for group in &groups {
        group_text(&mut out, group, run.units);
    }
    out
}

/// One job's block. Like fio, a job that did no I/O is skipped, unless it failed
/// (then its error line is the one thing worth showing).
fn job_text(out: &mut String, run: &RunReport, job: &JobStats, group: &[GroupDir; 3]) {
    let did_io = job.dirs.iter().any(|d| d.io_bytes > 0 || d.total_ios > 0);
    if !did_io && job.error == 0 {
        return;
    }
    header(out, run, job);
    let label = |dir: Ddir| match job.unified {
        Unified::Mixed => "mixed",
        _ => dir.name(),
    };
    for dir in Ddir::ALL {
        let agg = group.get(dir.index()).map_or(0, |g| g.agg);
        if job.dir(dir).io_bytes > 0 {
            let resets = (dir == Ddir::Write).then_some(job.nr_zone_resets);
            dir_text(out, run, job.dir(dir), label(dir), agg, resets);
        }
    }
    if let Some(m) = job.mixed.as_ref().filter(|m| m.io_bytes > 0) {
        dir_text(
            out,
            run,
            m,
            "mixed",
            group.iter().map(|g| g.agg).sum(),
            None,
        );
    }
    latency_lines(out, job);
    if job.sync.n > 0 {
        out.push_str("  fsync/fdatasync/sync_file_range/syncfs:\n");
        display_lat(out, "sync", &job.sync);
        if run.clat_percentiles || run.lat_percentiles {
            percentile_block(out, run, "sync", &job.sync);
        }
    }
    cpu_line(out, job);
    for line in &job.extra_lines {
        let _ = writeln!(out, "  {line}");
    }
    depth_lines(out, job, run.units);
}

/// `name: (groupid=0, jobs=1): err= 0: pid=N: <time>` and the description.
fn header(out: &mut String, run: &RunReport, job: &JobStats) {
    let err = if job.error_text.is_empty() {
        format!("{:2}", job.error)
    } else {
        format!("{:2} ({})", job.error, job.error_text)
    };
    let _ = writeln!(
        out,
        "{}: (groupid={}, jobs={}): err={err}: pid={}: {}",
        job.name,
        job.groupid,
        job.members,
        job.pid,
        ctime(run.timestamp_ms / 1000)
    );
    if !job.description.is_empty() {
        let _ = writeln!(out, "  Description  : [{}]", job.description);
    }
}

/// One direction: the IOPS/BW line, latencies, percentiles and sample statistics.
fn dir_text(
    out: &mut String,
    run: &RunReport,
    d: &DirStats,
    label: &str,
    group_agg: u64,
    zone_resets: Option<u64>,
) {
    let runtime = d.runtime_ms();
    if runtime == 0 {
        return;
    }
    let bw = d.bw_bytes();
    let iops =
        u64::try_from(u128::from(d.total_ios) * 1000 / u128::from(runtime)).unwrap_or(u64::MAX);
    // fio's `show_ddir_status`: `kb_base` picks which prefixes come first, `unit_base`
    // bytes or bits, `significant_figures` the digits.
    let u = run.units;
    let _ = writeln!(
        out,
        "  {label}: IOPS={}, BW={} ({})({}/{runtime}msec){}",
        num2str(iops, u.sig_figs, false, Unit::None),
        num2str(bw, u.sig_figs, u.pow2(), u.rate()),
        num2str(bw, u.sig_figs, !u.pow2(), u.rate()),
        num2str(d.io_bytes, u.sig_figs, u.pow2(), Unit::Byte),
        // fio's `zbd_write_status`, after every write line.
        zone_resets.map_or(String::new(), |n| format!("; {n} zone resets"))
    );
    display_lat(out, "slat", &d.slat);
    display_lat(out, "clat", &d.clat);
    display_lat(out, " lat", &d.lat);
    // fio's `clat_prio`: each priority's latencies, when at least two have some.
    let prios = d.reported_prios();
    let kind = if d.prio_total { "lat" } else { "clat" };
    for p in &prios {
        let name = format!("{kind} prio {}/{}", p.ioprio >> 13, p.ioprio & 7);
        display_lat(out, &name, &p.lat);
    }
    let blocks = [
        (run.slat_percentiles, "slat", &d.slat),
        (run.clat_percentiles, "clat", &d.clat),
        (run.lat_percentiles, "lat", &d.lat),
    ];
    for (on, name, stat) in blocks {
        if on {
            percentile_block(out, run, name, stat);
        }
    }
    if run.clat_percentiles || run.lat_percentiles {
        let all = if d.prio_total { d.lat.n } else { d.clat.n }.max(1);
        for p in &prios {
            let name = format!(
                "{kind} prio {}/{} ({:.2}% of IOs)",
                p.ioprio >> 13,
                p.ioprio & 7,
                100.0 * p.lat.n as f64 / all as f64
            );
            percentile_block(out, run, &name, &p.lat);
        }
    }
    bw_line(out, &d.bw, group_agg, u);
    iops_line(out, &d.iops);
}

/// `    clat (usec): min=..., max=..., avg=..., stdev=...`, in the unit fio would pick.
fn display_lat(out: &mut String, name: &str, stat: &LatStat) {
    if stat.n == 0 {
        return;
    }
    let (mut min, mut max, mut mean, mut dev) = (stat.min, stat.max, stat.mean(), stat.stddev());
    let unit = if min > 2_000_000 && max > 99_999_999 && dev > 1_000_000.0 {
        (min, max, mean, dev) = (min / 1_000_000, max / 1_000_000, mean / 1e6, dev / 1e6);
        "msec"
    } else if min > 2_000 && max > 99_999 && dev > 1_000.0 {
        (min, max, mean, dev) = (min / 1_000, max / 1_000, mean / 1e3, dev / 1e3);
        "usec"
    } else {
        "nsec"
    };
    let _ = writeln!(
        out,
        "    {name} ({unit}): min={}, max={}, avg={mean:5.2}, stdev={dev:5.2}",
        format_latency_value(min),
        format_latency_value(max)
    );
}

/// Decimals needed to print every percentile exactly (fio counts the digits written in
/// `percentile_list`; the default list needs 2).
fn percentile_precision(list: &[f64]) -> usize {
    let needed = |p: f64| {
        (0..6)
            .find(|&d| format!("{p:.d$}").parse::<f64>().ok() == Some(p))
            .unwrap_or(6)
    };
    list.iter().map(|&p| needed(p)).max().unwrap_or(0)
}

/// The `clat percentiles (usec):` block, laid out in rows like fio's.
fn percentile_block(out: &mut String, run: &RunReport, name: &str, stat: &LatStat) {
    let Some(hist) = stat.hist.as_ref().filter(|h| stat.n > 0 && h.samples() > 0) else {
        return;
    };
    let list = run.percentiles();
    let values: Vec<u64> = list
        .iter()
        .map(|&p| hist.percentile(p).unwrap_or(0))
        .collect();
    let minv = values.iter().copied().min().unwrap_or(0);
    let maxv = values.iter().copied().max().unwrap_or(0);
    let (scale, divisor, unit) = if minv > 2_000_000 && maxv > 99_999_999 {
        (2, 1_000_000, "msec")
    } else if minv > 2_000 && maxv > 99_999 {
        (1, 1_000, "usec")
    } else {
        (0, 1, "nsec")
    };
    let _ = write!(out, "    {name} percentiles ({unit}):\n     |");
    let layout = Layout::new(list, maxv / divisor);
    write_percentile_rows(out, list, &values, scale, &layout);
}

/// Column widths of the percentile block.
struct Layout {
    precision: usize,
    time_width: usize,
    per_line: usize,
}

impl Layout {
    fn new(list: &[f64], max_scaled: u64) -> Self {
        let precision = percentile_precision(list);
        let digits = max_scaled.checked_ilog10().map_or(1, |d| d as usize + 1);
        let time_width = digits.max(5);
        let per_line = ((80 - 7) / (precision + 10 + time_width)).max(1);
        Layout {
            precision,
            time_width,
            per_line,
        }
    }
}

/// The ` 99.00th=[  123],` entries, `per_line` to a row.
fn write_percentile_rows(
    out: &mut String,
    list: &[f64],
    values: &[u64],
    scale: u32,
    layout: &Layout,
) {
    let (prec, tw, per_line) = (layout.precision, layout.time_width, layout.per_line);
    let last = list.len().saturating_sub(1);
    for (j, (&p, &v)) in list.iter().zip(values).enumerate() {
        if j != 0 && j % per_line == 0 {
            out.push_str("     |");
        }
        // fio rounds up when scaling down, so a bin is never reported below its value.
        let scaled = (0..scale).fold(v, |acc, _| acc.saturating_add(999) / 1000);
        let end = if j == last { '\n' } else { ',' };
        let _ = write!(out, " {p:>w$.prec$}th=[{scaled:>tw$}]{end}", w = prec + 3);
        if j != last && j % per_line == per_line - 1 {
            out.push('\n');
        }
    }
}

/// `   bw (  KiB/s): min=..., max=..., per=..%, avg=..., stdev=..., samples=..`.
/// The samples are KiB/s whatever `kb_base` says (as fio's JSON has them); fio's text
/// labels them `kB` with `kb_base=1000`, and above `kb_base` squared divides them by
/// `kb_base` and labels them `MiB` either way (`unit_base` never reaches this line: fio
/// compares it with 1 where it holds `N2S_BITPERSEC`).
fn bw_line(out: &mut String, s: &SampleStat, group_agg: u64, u: super::Units) {
    if s.n == 0 {
        return;
    }
    let per = percent_of_group(s.mean, group_agg);
    let (mut min, mut max, mut mean, mut dev) = (s.min, s.max, s.mean, s.stddev());
    let mut unit = if u.pow2() { "KiB" } else { "kB" };
    let base = u.kb_base;
    if mean > (base * base) as f64 {
        (min, max, mean, dev) = (
            min / base,
            max / base,
            mean / base as f64,
            dev / base as f64,
        );
        unit = "MiB";
    }
    let _ = writeln!(
        out,
        "   bw ({unit:>5}/s): min={min:5}, max={max:5}, per={per:3.2}%, avg={mean:5.2}, stdev={dev:5.2}, samples={}",
        s.n
    );
}

/// `   iops        : min=..., max=..., avg=..., stdev=..., samples=..`.
fn iops_line(out: &mut String, s: &SampleStat) {
    if s.n == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "   iops        : min={:5}, max={:5}, avg={:5.2}, stdev={:5.2}, samples={}",
        s.min,
        s.max,
        s.mean,
        s.stddev(),
        s.n
    );
}

/// The `lat (nsec)   : 250=0.01%, ...` bucket lines, five buckets per line.
fn latency_lines(out: &mut String, job: &JobStats) {
    const KEYS: [&str; 12] = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
    ];
    let total = job.total_rw_ios();
    let buckets = job.latency_buckets();
    let units: [(&str, &[u64]); 3] = [
        ("nsec", &buckets.ns),
        ("usec", &buckets.us),
        ("msec", &buckets.ms),
    ];
    for (unit, counts) in units {
        let shown: Vec<String> = KEYS
            .iter()
            .zip(counts)
            .filter(|(_, &c)| c > 0)
            .map(|(key, &c)| format!("{key}={:3.2}%", percent(c, total, 0.01)))
            .collect();
        for chunk in shown.chunks(5) {
            let _ = writeln!(out, "  lat ({unit})   : {}", chunk.join(", "));
        }
    }
}

/// `  cpu          : usr=..%, sys=..%, ctx=.., majf=.., minf=..`.
fn cpu_line(out: &mut String, job: &JobStats) {
    let (usr, sys) = job.cpu_percent();
    let _ = writeln!(
        out,
        "  cpu          : usr={usr:3.2}%, sys={sys:3.2}%, ctx={}, majf={}, minf={}",
        job.ctx_switches, job.majf, job.minf
    );
}

/// The `IO depths`, `submit`, `complete` and `issued rwts` lines.
fn depth_lines(out: &mut String, job: &JobStats, units: super::Units) {
    let sum = |a: &[u64; 7]| a.iter().fold(0u64, |x, y| x.saturating_add(*y));
    let row = |keys: [&str; 7], counts: &[u64; 7], total: u64| {
        keys.iter()
            .zip(counts)
            .map(|(k, &c)| format!("{k}={:3.1}%", percent(c, total, 0.1)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let levels = ["1", "2", "4", "8", "16", "32", ">=64"];
    let batches = ["0", "4", "8", "16", "32", "64", ">=64"];
    let _ = writeln!(
        out,
        "  IO depths    : {}",
        row(levels, &job.iodepth_level, job.total_rw_ios())
    );
    let _ = writeln!(
        out,
        "     submit    : {}",
        row(batches, &job.iodepth_submit, sum(&job.iodepth_submit))
    );
    let _ = writeln!(
        out,
        "     complete  : {}",
        row(batches, &job.iodepth_complete, sum(&job.iodepth_complete))
    );
    let [r, w, t] = &job.dirs;
    let _ = writeln!(
        out,
        "     issued rwts: total={},{},{},{} short={},{},{},0 dropped={},{},{},0",
        r.total_ios,
        w.total_ios,
        t.total_ios,
        job.sync.n,
        r.short_ios,
        w.short_ios,
        t.short_ios,
        r.drop_ios,
        w.drop_ios,
        t.drop_ios
    );
    if job.continue_on_error {
        let _ = writeln!(
            out,
            "     errors    : total={}, first_error={}/<{}>",
            job.total_err,
            job.first_error,
            std::io::Error::from_raw_os_error(job.first_error)
                .to_string()
                .split(" (os error")
                .next()
                .unwrap_or_default()
        );
    }
    if let Some(ss) = &job.steadystate {
        // fio's `show_ss_normal`: the window's means, bandwidth passed in KiB.
        let u = units;
        let kib = ss.bw_mean / 1024;
        let _ = writeln!(
            out,
            "  steadystate  : attained={}, bw={} ({}), iops={}, {}{}={:.3}{}",
            if ss.attained { "yes" } else { "no" },
            num2str_from(kib, u.sig_figs, 1, u.pow2(), u.rate()),
            num2str_from(kib, u.sig_figs, 1, !u.pow2(), u.rate()),
            num2str(ss.iops_mean, u.sig_figs, false, Unit::None),
            if ss.crit.iops { "iops" } else { "bw" },
            if ss.crit.slope { " slope" } else { " mean dev" },
            ss.criterion,
            if ss.crit.pct { "%" } else { "" }
        );
    }
}

/// `Run status group N (all jobs):` and one line per direction that ran.
fn group_text(out: &mut String, group: &GroupStats, u: super::Units) {
    const LABELS: [&str; 3] = ["   READ", "  WRITE", "   TRIM"];
    let _ = writeln!(out, "\nRun status group {} (all jobs):", group.groupid);
    let mixed = (group.unified == Unified::Both).then(|| group.mixed());
    let lines = LABELS
        .iter()
        .zip(&group.dirs)
        .map(|(label, d)| match group.unified {
            Unified::Mixed => ("  MIXED", d),
            _ => (*label, d),
        });
    for (label, d) in lines.chain(mixed.as_ref().map(|m| ("  MIXED", m))) {
        if d.max_run == 0 {
            continue;
        }
        let i2p = u.pow2();
        let rate = |v: u64, pow2: bool| num2str(v, u.sig_figs, pow2, u.rate());
        let bytes = |v: u64, pow2: bool| num2str(v, u.sig_figs, pow2, Unit::Byte);
        let _ = writeln!(
            out,
            "{label}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={}-{}msec",
            rate(d.agg, i2p),
            rate(d.agg, !i2p),
            rate(d.min_bw, i2p),
            rate(d.max_bw, i2p),
            rate(d.min_bw, !i2p),
            rate(d.max_bw, !i2p),
            bytes(d.io_bytes, i2p),
            bytes(d.io_bytes, !i2p),
            d.min_run,
            d.max_run
        );
    }
}
