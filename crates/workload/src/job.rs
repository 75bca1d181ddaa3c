//! fio job files and command lines → [`JobSpec`]s.
//!
//! The accepted syntax is the subset of fio's documented in `protocols-crates.md` §2.2:
//! INI sections where `[global]` gives defaults to the jobs below it, `key=value` and bare
//! boolean keys, `;`/`#` comments, nested `include FILE`, `${VAR}` / `$ncpus` / `$pagesize`
//! expansion, and fio's number syntax (`4k` = 4096, `4ki` = 4000, `0x` hex, time suffixes).
//! Every supported option lives in one static table ([`option_table`]); anything else is
//! refused with a one-line [`JobError`] that names the file and line.

mod build;
mod cli;
pub mod engine;
mod error;
mod expr;
mod files;
mod fio_only;
mod ini;
mod options;
mod resolve;
mod spec;
mod value;

use std::path::Path;

pub use cli::{parse_command_line, CommandLine, OutputFormat};
pub use error::{JobError, JobErrorKind, Location};
pub use files::{at_files, FileLayout, LayoutFile, FILE_GAP};
pub use fio_only::fio_option_table;
pub use options::{option_table, options_help, OptDef};
pub use resolve::{file_at, resolve, Job, JobFile, ThinkRule};
pub use spec::{
    reporting_groups, ErrorPolicy, Exit, ExitWhat, Fallocate, FileService, FileServiceKind, IoMem,
    IrqMode, JobSpec, RwMode, VerifyMode, DEFAULT_HUGEPAGE_SIZE, DEFAULT_PERCENTILES, EDQUOT,
    EILSEQ, EIO, ENOSPC, ETIMEDOUT,
};
pub use value::{parse_size, parse_time_ns};

/// Reads and parses a fio job file.
///
/// Relative `include` lines are resolved against the directory of `path`, and errors name
/// the file as `path` was written.
pub fn parse_job_file(path: &Path) -> Result<Vec<JobSpec>, JobError> {
    let shown = path.display().to_string();
    let text = ini::read_limited(path).map_err(|e| {
        let kind = JobErrorKind::ReadFailed {
            message: e.to_string(),
        };
        JobError::new(
            Location::Path {
                name: shown.clone(),
            },
            kind,
        )
    })?;
    parse_job_text(&shown, &text)
}

/// Parses job-file text that did not come from a file on disk (or was already read).
///
/// `name_for_errors` appears in error messages as `name:line`; when it looks like a path,
/// its directory is also the base for relative `include` lines (otherwise the current
/// directory is).
pub fn parse_job_text(name_for_errors: &str, text: &str) -> Result<Vec<JobSpec>, JobError> {
    let parsed = ini::parse_text(name_for_errors, text, &[])?;
    Ok(parsed.jobs)
}

/// Cross-field checks that a single option cannot make on its own.
///
/// The parsers already call this for every job they return (reporting the section header
/// or `--name=` argument as the location); it is public so that callers who build or
/// modify a [`JobSpec`] by hand can check it too. The location of a returned error is the
/// job's name.
pub fn validate(job: &JobSpec) -> Result<(), JobError> {
    spec::check(job).map_err(|message| {
        JobError::new(
            Location::Job {
                name: job.name.clone(),
            },
            JobErrorKind::Invalid(message),
        )
    })
}

/// One line per fio option the jobs give that changes nothing in mqblk, each once:
/// `accepted, no effect in mqblk: OPTION: WHY` (the run prints them on standard error).
pub fn no_effect_notes(jobs: &[JobSpec]) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (name, why) in jobs.iter().flat_map(|j| j.no_effect.iter()) {
        if !seen.contains(&name.as_str()) {
            seen.push(name);
            out.push(format!("accepted, no effect in mqblk: {name}: {why}"));
        }
    }
    out
}

/// One line for the job file's jobs that name no engine, file, driver or device
/// ([`JobSpec::null_by_default`]): they run on mqblk's null device, not on files as fio's
/// would.
pub fn null_default_note(jobs: &[JobSpec]) -> Option<String> {
    let names: Vec<&str> = jobs
        .iter()
        .filter(|j| j.null_by_default())
        .map(|j| j.name.as_str())
        .collect();
    let first = names.first()?;
    let (who, verb) = match names.len() {
        1 => (format!("job '{first}'"), "names"),
        _ => (format!("jobs {}", names.join(", ")), "name"),
    };
    Some(format!(
        "note: {who} {verb} no ioengine= nor filename=: mqblk runs it on its null device, where fio would run psync on files {first}.0.0 and on in the current directory; give ioengine=psync for that"
    ))
}

#[cfg(test)]
mod tests;
