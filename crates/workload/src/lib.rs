//! Workload description and reporting for `mqblk bench`: fio job syntax, statistics, reports.
//!
//! The crate has three parts:
//! - [`job`] turns fio job files and fio-style command lines into validated [`JobSpec`]s.
//! - [`stats`] holds the per-job counters the runner fills in: fio's log-linear latency
//!   histogram ([`LatHist`]), latency summaries ([`LatStat`]), bandwidth/IOPS samples and
//!   the per-job aggregate ([`JobStats`]).
//! - [`job_driver`] decides what a resolved [`Job`] issues next, with the time passed in;
//!   the threaded runner and the simulator both drive jobs through it.
//! - [`report`] renders a finished run as fio-compatible JSON or fio-like human text.
//!
//! Nothing here panics on user input: every parse problem comes back as a [`JobError`]
//! whose `Display` is a single line naming the file and line (or command-line argument).

pub mod bio;
pub mod buffers;
pub mod cmdprio;
pub mod exec;
pub mod flow;
pub mod iolog;
pub mod iolog_replay;
pub mod job;
pub mod job_driver;
pub mod lat_target;
pub mod logs;
pub mod pattern;
pub mod plot;
pub mod report;
pub mod stats;
pub mod steadystate;
pub mod verify;
pub mod verify_state;
pub mod zbd;

pub use bio::CgroupError;
pub use job::{
    fio_option_table, no_effect_notes, option_table, options_help, parse_command_line,
    parse_job_file, parse_job_text, parse_size, parse_time_ns, resolve, validate, CommandLine,
    ErrorPolicy, Exit, ExitWhat, IoMem, IrqMode, Job, JobError, JobErrorKind, JobSpec, Location,
    OptDef, OutputFormat, RwMode, VerifyMode, DEFAULT_PERCENTILES,
};
pub use job_driver::{IoKind, JobDriver, JobIo, Next, Phase};
pub use report::{
    format_bytes, format_count, format_rate, group_ids, json_report, start_lines, terse_report,
    text_report, RunReport,
};
pub use stats::{DirStats, JobStats, LatHist, LatStat, RateSampler, SampleStat};

/// A file a run was asked to write (`write_iolog`, `write_lat_log` and the other fio logs,
/// `--plot` charts) could not be written: one line naming the option or path.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct WriteError {
    /// The option and path (`write_iolog=PATH`, `--plot=DIR`) or the path itself.
    pub what: String,
    /// What the file system said.
    #[source]
    pub source: std::io::Error,
}

impl WriteError {
    /// The error of writing `what`.
    pub fn new(what: impl Into<String>, source: std::io::Error) -> WriteError {
        WriteError {
            what: what.into(),
            source,
        }
    }
}

/// An I/O direction, used to index the per-direction arrays (`[read, write, trim]`).
///
/// The numbering matches fio's `DDIR_READ`, `DDIR_WRITE` and `DDIR_TRIM` so that arrays
/// indexed by it line up with fio's per-direction output order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ddir {
    /// Reads.
    Read = 0,
    /// Writes.
    Write = 1,
    /// Trims (discards).
    Trim = 2,
}

impl Ddir {
    /// All directions in fio's output order.
    pub const ALL: [Ddir; 3] = [Ddir::Read, Ddir::Write, Ddir::Trim];

    /// The direction fio counts a completed data request of operation `op` in: discards
    /// are trims, every other write-side operation a write.
    pub fn of_op(op: mqblk_core::ReqOp) -> Ddir {
        match op {
            mqblk_core::ReqOp::Read => Ddir::Read,
            mqblk_core::ReqOp::Discard => Ddir::Trim,
            _ => Ddir::Write,
        }
    }

    /// The array index of this direction.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The lower-case name fio uses as the JSON key and in the text report.
    pub fn name(self) -> &'static str {
        match self {
            Ddir::Read => "read",
            Ddir::Write => "write",
            Ddir::Trim => "trim",
        }
    }
}
