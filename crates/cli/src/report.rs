//! The run report `mqblk bench` and `mqblk sim` both print, assembled once: fio's per-job
//! figures with the command line's reporting options, the queue's [`QueueReport`] (the
//! `hctx`, `sched` and `device` lines; `mqblk_queue` in JSON), and the runner's own
//! [`Section`] (`mqblk_sim` for the simulator); and the per-job files fio writes beside it.

use crate::CliError;
use mqblk_device::QueueReport;
use mqblk_workload::iolog::{CloneLog, IoLogEntry};
use mqblk_workload::logs::JobLogs;
use mqblk_workload::{
    json_report, terse_report, text_report, CommandLine, Job, JobStats, RunReport,
};

/// One job clone's outputs, as either runner has them.
pub struct CloneOut<'a> {
    pub job: &'a Job,
    pub iolog: &'a [IoLogEntry],
    pub stats: &'a JobStats,
    pub logs: Option<&'a JobLogs>,
    /// When the clone started, in ms since the Unix epoch (the simulator's clock starts at
    /// 0): the base of `log_unix_epoch` times.
    pub start_ms: u64,
}

/// fio's per-job files of a run: `write_iolog`, the `write_*_log` files and `--plot`'s
/// charts (numbered from 1 in clone order, as fio numbers its logs).
pub fn write_job_files(cl: &CommandLine, clones: &[CloneOut]) -> Result<(), CliError> {
    let logs: Vec<_> = clones
        .iter()
        .filter_map(|c| {
            let path = c.job.write_iolog.clone()?;
            Some((path, CloneLog::of(c.job, c.iolog.to_vec())))
        })
        .collect();
    mqblk_workload::iolog::write_all(&logs)?;
    let mut written = std::collections::HashSet::new();
    for (i, c) in clones.iter().enumerate() {
        if let Some(logs) = c.logs {
            logs.write(i + 1, c.start_ms, &mut written)?;
        }
        if let Some(dir) = &cl.plot {
            mqblk_workload::logs::write_charts(dir, c.stats, i + 1, c.logs)?;
        }
    }
    Ok(())
}

/// Each clone's figures as its job section reports them: what the section disables
/// forgotten, its group (`new_group`, `stonewall`), description and options. `spec_of`
/// gives each clone's section.
pub fn job_stats(cl: &CommandLine, spec_of: &[usize], stats: &[&JobStats]) -> Vec<JobStats> {
    let groups = mqblk_workload::group_ids(&cl.jobs, spec_of);
    stats
        .iter()
        .zip(spec_of)
        .zip(groups)
        .map(|((st, &spec), group)| {
            let spec = &cl.jobs[spec];
            let mut st = (*st).clone();
            st.forget(
                spec.disable_slat,
                spec.disable_clat,
                spec.disable_lat,
                spec.disable_bw,
            );
            st.groupid = group;
            st.description = spec.description.clone();
            st.unified = spec.unified;
            st.hidden = !spec.stats;
            st.job_options = spec.set_options.clone();
            st
        })
        .collect()
}

/// A runner's own part of the report: the key and value of its JSON object and its text,
/// printed after fio's.
pub struct Section {
    pub key: &'static str,
    pub json: serde_json::Value,
    pub text: String,
}

/// The report of `jobs` (from [`job_stats`]) in each format the command line asks for, in
/// fio's order: fio's terse lines; fio's JSON with the queue's report as `mqblk_queue` and
/// the runner's `section`; fio's text with the queue's lines in the first job's block, then
/// the runner's `section`.
pub fn render(
    cl: &CommandLine,
    mut jobs: Vec<JobStats>,
    queue: &QueueReport,
    timestamps: (u64, u64),
    section: Option<Section>,
) -> Result<String, CliError> {
    let (timestamp_ms, elapsed_sec) = timestamps;
    let first = &cl.jobs[0];
    if let Some(j) = jobs.iter_mut().find(|j| !j.hidden) {
        j.extra_lines.extend(queue.text_lines());
    }
    let report = RunReport {
        jobs,
        global_options: cl.global_options.clone(),
        group_reporting: cl.jobs.iter().any(|s| s.group_reporting),
        percentile_list: first.percentile_list.clone(),
        clat_percentiles: first.clat_percentiles,
        lat_percentiles: first.lat_percentiles,
        slat_percentiles: first.slat_percentiles,
        json_plus: cl.output_format.json_plus,
        timestamp_ms,
        start_lines: mqblk_workload::start_lines(&cl.jobs),
        elapsed_sec,
        units: first.units,
    };
    // fio's order when several formats are asked for: terse, JSON, normal.
    let f = cl.output_format;
    let mut out = String::new();
    if f.terse {
        out.push_str(&terse_report(&report, cl.terse_version));
    }
    if f.json {
        let mut v: serde_json::Value = serde_json::from_str(&json_report(&report))
            .map_err(|e| format!("internal: report JSON: {e}"))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("mqblk_queue".into(), serde_json::json!(queue));
            if let Some(sec) = &section {
                o.insert(sec.key.into(), sec.json.clone());
            }
        }
        out.push_str(
            &serde_json::to_string_pretty(&v).map_err(|e| format!("internal: report JSON: {e}"))?,
        );
        out.push('\n');
    }
    if f.normal {
        out.push_str(&text_report(&report));
        if let Some(sec) = &section {
            out.push('\n');
            out.push_str(&sec.text);
        }
    }
    Ok(out)
}
