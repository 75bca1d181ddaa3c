//! fio's terse report (`--output-format=terse`, `--minimal`): one line per report entry,
//! fields separated by `;`, in the order of fio 3.33's `show_thread_status_terse_all`
//! (versions 2 to 5; 3 is fio's default), so scripts written for fio's terse output read
//! mqblk's. The disk-utilisation fields fio appends where it finds a disk under the files are
//! left out, as fio does where it finds none.

use std::fmt::Write as _;

use super::json::percent;
use super::{group_stats, RunReport};
use crate::stats::{DirStats, JobStats, LatStat, SampleStat, Unified};
use crate::Ddir;

/// fio's `FIO_IO_U_LIST_MAX_LEN`: the percentile fields every direction carries.
const PERCENTILE_FIELDS: usize = 20;

/// The terse report of `run` in fio's terse `version` (2 to 5; anything else is 3).
pub fn terse_report(run: &RunReport, version: u32) -> String {
    let ver = if (2..=5).contains(&version) {
        version
    } else {
        3
    };
    let entries = run.report_entries();
    let groups = group_stats(&entries);
    let mut out = String::new();
    for job in &entries {
        let agg = groups
            .iter()
            .find(|g| g.groupid == job.groupid)
            .map_or([0; 3], |g| g.dirs.map(|d| d.agg));
        entry(&mut out, run, job, agg, ver);
    }
    out
}

fn entry(out: &mut String, run: &RunReport, job: &JobStats, agg: [u64; 3], ver: u32) {
    if ver == 2 {
        let _ = write!(out, "2;{};{};{}", job.name, job.groupid, job.error);
    } else {
        let _ = write!(
            out,
            "{ver};mqblk-{};{};{};{}",
            env!("CARGO_PKG_VERSION"),
            job.name,
            job.groupid,
            job.error
        );
    }
    // With `unified_rw_reporting=mixed` the first direction is all of them, alone; with
    // `both` they follow the directions (fio's `show_thread_status_terse_all`).
    let mut dirs = vec![Ddir::Read];
    if job.unified != Unified::Mixed {
        dirs.push(Ddir::Write);
        if ver != 3 {
            dirs.push(Ddir::Trim);
        }
    }
    for d in dirs {
        direction(out, run, job.dir(d), agg[d.index()], ver);
    }
    if let Some(m) = &job.mixed {
        direction(out, run, m, agg.iter().sum(), ver);
    }
    let (usr, sys) = job.cpu_percent();
    let _ = write!(
        out,
        ";{usr:.6}%;{sys:.6}%;{};{};{}",
        job.ctx_switches, job.majf, job.minf
    );
    let total = job.total_rw_ios();
    for &n in &job.iodepth_level {
        let _ = write!(out, ";{:3.1}%", percent(n, total, 0.1));
    }
    // fio's `stat_calc_lat_nu`: the nanosecond buckets count in the first microsecond one.
    let b = job.latency_buckets();
    let ns: u64 = b.ns.iter().sum();
    for (i, &n) in b.us.iter().enumerate() {
        let mut p = percent(n, total, 0.01);
        if i == 0 && total > 0 {
            p += 100.0 * ns as f64 / total as f64;
        }
        let _ = write!(out, ";{p:3.2}%");
    }
    for &n in &b.ms {
        let _ = write!(out, ";{:3.2}%", percent(n, total, 0.01));
    }
    if job.continue_on_error {
        let _ = write!(out, ";{};{}", job.total_err, job.first_error);
    }
    if !job.description.is_empty() {
        if ver == 2 {
            out.push('\n');
        }
        let _ = write!(out, ";{}", job.description);
    }
    out.push('\n');
}

/// fio's `show_ddir_status_terse`.
fn direction(out: &mut String, run: &RunReport, s: &DirStats, agg: u64, ver: u32) {
    let runt = s.runtime_ms();
    let bw = (1000 * s.io_bytes).checked_div(runt).unwrap_or(0) / 1024;
    let iops = (1000 * s.total_ios).checked_div(runt).unwrap_or(0);
    let _ = write!(out, ";{};{bw};{iops};{runt}", s.io_bytes >> 10);
    lat(out, &s.slat);
    lat(out, &s.clat);
    let hist = if run.lat_percentiles {
        Some(&s.lat)
    } else if run.clat_percentiles {
        Some(&s.clat)
    } else {
        None
    };
    let list = run.percentiles();
    // fio's `calc_clat_percentiles` gives every entry of the list, 0 without samples.
    let shown = match hist {
        Some(_) => list.len().min(PERCENTILE_FIELDS),
        None => 0,
    };
    if let Some(h) = hist {
        for &p in &list[..shown] {
            let _ = write!(out, ";{p:.6}%={}", h.percentile(p).unwrap_or(0) / 1000);
        }
    }
    for _ in shown..PERCENTILE_FIELDS {
        out.push_str(";0%=0");
    }
    lat(out, &s.lat);
    samples_bw(out, &s.bw, agg);
    if ver == 5 {
        let _ = write!(out, ";{}", s.bw.n);
        let (min, max) = if s.iops.n > 0 {
            (s.iops.min, s.iops.max)
        } else {
            (0, 0)
        };
        let _ = write!(
            out,
            ";{min};{max};{:.6};{:.6};{}",
            s.iops.mean,
            s.iops.stddev(),
            s.iops.n
        );
    }
}

/// A latency's `min;max;mean;stddev` in microseconds (fio's `calc_lat`, divided by 1000).
fn lat(out: &mut String, l: &LatStat) {
    if l.n == 0 {
        out.push_str(";0;0;0.000000;0.000000");
    } else {
        let _ = write!(
            out,
            ";{};{};{:.6};{:.6}",
            l.min / 1000,
            l.max / 1000,
            l.mean() / 1000.0,
            l.stddev() / 1000.0
        );
    }
}

/// The bandwidth samples' `min;max;share of the group%;mean;stddev` (KiB/s).
fn samples_bw(out: &mut String, s: &SampleStat, agg: u64) {
    if s.n == 0 {
        out.push_str(";0;0;0.000000%;0.000000;0.000000");
        return;
    }
    let share = match agg / 1024 {
        0 => 100.0,
        a => (s.mean * 100.0 / a as f64).min(100.0),
    };
    let _ = write!(
        out,
        ";{};{};{share:.6}%;{:.6};{:.6}",
        s.min,
        s.max,
        s.mean,
        s.stddev()
    );
}
