//! fio-compatible reports of a finished run: JSON ([`json_report`]) and text
//! ([`text_report`]).

mod emit;
mod fmt;
mod json;
mod terse;
mod text;

use crate::job::DEFAULT_PERCENTILES;
use crate::stats::JobStats;
use crate::Ddir;

pub use fmt::{format_bytes, format_count, format_rate};
pub use json::json_report;
pub use terse::terse_report;
pub use text::text_report;

/// A finished run, as handed to the report functions.
///
/// `jobs` holds one entry per job thread, in start order. With `group_reporting`, the
/// reports merge the entries that share a `groupid` into one (named after the first), the
/// way fio does; otherwise each entry is reported on its own. Either way the "Run status
/// group" summary of the text report and fio's `bw_agg` are computed per `groupid`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Per-job statistics.
    pub jobs: Vec<JobStats>,
    /// fio's "global options": `(name, raw value)` pairs (e.g. `CommandLine::global_options`).
    pub global_options: Vec<(String, String)>,
    /// Merge jobs of the same group into one report entry.
    pub group_reporting: bool,
    /// Percentiles to report, ascending (fio's `percentile_list`).
    pub percentile_list: Vec<f64>,
    /// Report completion-latency percentiles (fio default on).
    pub clat_percentiles: bool,
    /// Report total-latency percentiles (fio default off).
    pub lat_percentiles: bool,
    /// Report submission-latency percentiles (fio default off).
    pub slat_percentiles: bool,
    /// Add histogram `bins` to latency objects that carry percentiles (`json+`).
    pub json_plus: bool,
    /// When the run ended, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Seconds the whole run took (fio's per-job "elapsed").
    pub elapsed_sec: u64,
    /// The lines fio prints as jobs start (see [`start_lines`]), first in the text report.
    pub start_lines: Vec<String>,
    /// How the text report writes its numbers (`kb_base`, `unit_base`,
    /// `significant_figures`).
    pub units: Units,
}

/// fio's `kb_base`, `unit_base` and `significant_figures`, as its text report uses them:
/// which prefixes come first (binary with 1024, decimal in brackets; the other way round
/// with 1000), bandwidths in bytes or bits, and the digits of every figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    /// 1024 or 1000.
    pub kb_base: u64,
    /// Bandwidths in bits per second (`unit_base=1`).
    pub bits: bool,
    /// Significant figures, 1 to 10.
    pub sig_figs: usize,
}

impl Default for Units {
    fn default() -> Units {
        Units {
            kb_base: 1024,
            bits: false,
            sig_figs: fmt::SIG_FIGS,
        }
    }
}

impl Units {
    /// Binary prefixes first (fio's `i2p`).
    pub(crate) fn pow2(self) -> bool {
        self.kb_base.is_power_of_two()
    }

    /// A bandwidth's unit.
    pub(crate) fn rate(self) -> fmt::Unit {
        if self.bits {
            fmt::Unit::BitPerSec
        } else {
            fmt::Unit::BytePerSec
        }
    }
}

impl Default for RunReport {
    fn default() -> Self {
        RunReport {
            jobs: Vec::new(),
            global_options: Vec::new(),
            group_reporting: false,
            percentile_list: DEFAULT_PERCENTILES.to_vec(),
            clat_percentiles: true,
            lat_percentiles: false,
            slat_percentiles: false,
            json_plus: false,
            timestamp_ms: 0,
            elapsed_sec: 0,
            start_lines: Vec::new(),
            units: Units::default(),
        }
    }
}

impl RunReport {
    /// The entries to report: the jobs as given, or merged per group with
    /// `group_reporting` (groups in order of first appearance).
    pub fn report_entries(&self) -> Vec<JobStats> {
        // fio's `stats=0`: the job is in no report and no group's summary.
        let shown = self.jobs.iter().filter(|j| !j.hidden);
        let mut merged: Vec<JobStats> = Vec::new();
        if !self.group_reporting {
            merged = shown.cloned().collect();
        } else {
            for job in shown {
                match merged.iter_mut().find(|m| m.groupid == job.groupid) {
                    Some(m) => m.merge(job),
                    None => merged.push(job.clone()),
                }
            }
        }
        for job in &mut merged {
            job.unify();
        }
        merged
    }

    /// The percentile list actually used: the configured one, capped at fio's 20 entries,
    /// or fio's default if empty.
    pub(crate) fn percentiles(&self) -> &[f64] {
        if self.percentile_list.is_empty() {
            &DEFAULT_PERCENTILES
        } else {
            let n = self.percentile_list.len().min(20);
            self.percentile_list
                .get(..n)
                .unwrap_or(&DEFAULT_PERCENTILES)
        }
    }
}

/// fio's per-group summary (`group_run_stats`) of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GroupDir {
    /// Shortest and longest runtime among the group's entries, ms.
    pub min_run: u64,
    pub max_run: u64,
    /// Lowest and highest per-entry bandwidth, bytes/s.
    pub min_bw: u64,
    pub max_bw: u64,
    /// Total bytes.
    pub io_bytes: u64,
    /// Aggregate bandwidth: total bytes over the longest runtime, bytes/s.
    pub agg: u64,
}

/// fio's per-group summary over all directions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupStats {
    pub groupid: u32,
    pub dirs: [GroupDir; 3],
    /// The strongest `unified_rw_reporting` of its entries (fio ORs them into the group).
    pub unified: crate::stats::Unified,
}

impl GroupStats {
    /// fio's `show_mixed_group_stats`: the directions that ran, summed (bytes and
    /// aggregate bandwidth) and spanned (bandwidths and runtimes).
    pub fn mixed(&self) -> GroupDir {
        let ran: Vec<&GroupDir> = self.dirs.iter().filter(|d| d.max_run > 0).collect();
        GroupDir {
            min_run: ran.iter().map(|d| d.min_run).min().unwrap_or(0),
            max_run: ran.iter().map(|d| d.max_run).max().unwrap_or(0),
            min_bw: ran.iter().map(|d| d.min_bw).min().unwrap_or(0),
            max_bw: ran.iter().map(|d| d.max_bw).max().unwrap_or(0),
            io_bytes: ran.iter().map(|d| d.io_bytes).sum(),
            agg: ran.iter().map(|d| d.agg).sum(),
        }
    }
}

/// Computes the group summaries from the report entries, in order of first appearance.
pub(crate) fn group_stats(entries: &[JobStats]) -> Vec<GroupStats> {
    let mut groups: Vec<GroupStats> = Vec::new();
    for job in entries {
        let pos = match groups.iter().position(|g| g.groupid == job.groupid) {
            Some(pos) => pos,
            None => {
                groups.push(GroupStats {
                    groupid: job.groupid,
                    dirs: [GroupDir::default(); 3],
                    unified: job.unified,
                });
                groups.len() - 1
            }
        };
        if let Some(group) = groups.get_mut(pos) {
            group.unified = group.unified.max(job.unified);
            add_to_group(group, job);
        }
    }
    for group in &mut groups {
        for d in &mut group.dirs {
            if d.max_run > 0 {
                d.agg = u64::try_from(u128::from(d.io_bytes) * 1000 / u128::from(d.max_run))
                    .unwrap_or(u64::MAX);
            }
        }
    }
    groups
}

/// Adds one entry's directions to its group.
fn add_to_group(group: &mut GroupStats, job: &JobStats) {
    for dir in Ddir::ALL {
        let stats = job.dir(dir);
        let run = stats.runtime_ms();
        if run == 0 {
            continue;
        }
        let Some(g) = group.dirs.get_mut(dir.index()) else {
            continue;
        };
        let bw = stats.bw_bytes();
        let first = g.max_run == 0;
        g.min_run = if first { run } else { g.min_run.min(run) };
        g.max_run = g.max_run.max(run);
        g.min_bw = if first { bw } else { g.min_bw.min(bw) };
        g.max_bw = g.max_bw.max(bw);
        g.io_bytes = g.io_bytes.saturating_add(stats.io_bytes);
    }
}

/// fio's `bw_agg` / `per=`: this entry's mean sampled bandwidth (KiB/s) as a percentage
/// of its group's aggregate, capped at 100 (100 when the aggregate is tiny).
pub(crate) fn percent_of_group(mean_kib: f64, group_agg_bytes: u64) -> f64 {
    if group_agg_bytes <= 1024 {
        return 100.0;
    }
    // fio passes the mean through an `int` parameter here, dropping its fraction.
    (mean_kib.trunc() * 100.0 / (group_agg_bytes as f64 / 1024.0)).min(100.0)
}

#[cfg(test)]
mod tests;

/// fio's reporting group of each job clone: a job with `stonewall` or `new_group` starts a
/// new group; `spec_of` gives each clone's job (an index into `specs`), in run order.
pub fn group_ids(specs: &[crate::JobSpec], spec_of: &[usize]) -> Vec<u32> {
    let groups = crate::job::reporting_groups(specs);
    spec_of.iter().map(|&spec| groups[spec]).collect()
}

/// The lines fio prints as its jobs start, one per job section (`name: (g=0): rw=read,
/// bs=(R) 4096B-4096B, ..., ioengine=psync, iodepth=1`, then `...` for further clones),
/// each followed, where the job names an engine, by how mqblk ran it.
pub fn start_lines(specs: &[crate::JobSpec]) -> Vec<String> {
    use crate::job::engine::EngineKind;
    let mut out = Vec::new();
    let groups = crate::job::reporting_groups(specs);
    for (i, s) in specs.iter().enumerate() {
        let group = groups[i];
        let bs = |d: crate::Ddir| {
            let b = s.bs_for(d);
            format!("{b}B-{b}B")
        };
        let engine = s.engine();
        // Without an engine, mqblk's own driver runs the job: named where fio names its
        // engine.
        let runner = match engine {
            Some((name, _)) => format!("ioengine={name}"),
            None => {
                let model = s.device.as_ref().map(|_| "sim");
                format!("driver={}", s.driver.as_deref().or(model).unwrap_or("null"))
            }
        };
        out.push(format!(
            "{}: (g={group}): rw={}, bs=(R) {}, (W) {}, (T) {}, {runner}, iodepth={}",
            s.name,
            s.rw.as_str(),
            bs(crate::Ddir::Read),
            bs(crate::Ddir::Write),
            bs(crate::Ddir::Trim),
            s.iodepth,
        ));
        if let Some((name, kind)) = engine {
            let how = match kind {
                EngineKind::Null => "as I/O to mqblk's null device".to_string(),
                EngineKind::Async => format!(
                    "as block I/O through mqblk's queues, up to {} in flight",
                    s.effective_iodepth()
                ),
                EngineKind::Sync => "as block I/O through mqblk's queues, one I/O in flight \
                                     (a synchronous engine, as in fio)"
                    .to_string(),
            };
            out.push(format!("  mqblk: ioengine={name} ran {how}"));
        }
        if s.numjobs > 1 {
            out.push("...".to_string());
        }
    }
    out
}
