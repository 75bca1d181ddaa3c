//! The static table of every supported option, and how a value is applied to a job.

use super::error::JobErrorKind;
use super::spec::{
    ErrorPolicy, ExitWhat, Fallocate, FileService, FileServiceKind, IrqMode, JobSpec, RwMode,
    VerifyMode, DEFAULT_BS,
};
use super::value::{
    parse_bool, parse_bs_list, parse_cpu_list, parse_percent, parse_percentile_list, parse_size,
    parse_time_ns, BsList,
};
use crate::pattern::{parse_split, Distribution, SplitEntry};

mod device;
mod fio;
mod setters;
mod suggest;

use setters::*;
pub(crate) use suggest::suggest;

/// Nanoseconds per second: the implicit unit of fio's `runtime` and `ramp_time`.
const SEC: u64 = 1_000_000_000;

/// What `help` text says a size looks like; also the tail of the "is not a size" error.
const SIZE_SYNTAX: &str = "a size (expected a number with an optional k/m/g/t/p suffix)";
const INT_SYNTAX: &str = "an integer";
const TIME_SYNTAX: &str = "a time (expected a number with an optional d/h/m/s/ms/us/ns suffix)";
const BOOL_SYNTAX: &str = "a boolean (expected 0/1, true/false, yes/no or on/off)";
const PERCENT_SYNTAX: &str = "a percentage (expected a number from 0 to 100)";

/// An option's value type together with the setter that stores a parsed value.
///
/// Keeping the setter inside the kind means a table entry cannot pair, say, an integer
/// range with a boolean field: the types would not line up.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// An integer (fio's suffixes allowed) within `min..=max`.
    Int {
        min: u64,
        max: u64,
        set: fn(&mut JobSpec, u64),
    },
    /// A byte count.
    Size { set: fn(&mut JobSpec, u64) },
    /// A duration; a plain number is in units of `unit_ns`.
    Time {
        unit_ns: u64,
        set: fn(&mut JobSpec, u64),
    },
    /// A flag; a bare key means true.
    Bool { set: fn(&mut JobSpec, bool) },
    /// Free text.
    Str { set: fn(&mut JobSpec, &str) },
    /// One of a fixed list; the setter gets the index into `values`.
    Enum {
        values: &'static [&'static str],
        set: fn(&mut JobSpec, usize),
    },
    /// A percentage in 0..=100 (fractions allowed).
    Percent { set: fn(&mut JobSpec, f64) },
    /// Anything with its own syntax; the setter parses and reports errors itself.
    Custom {
        syntax: &'static str,
        set: fn(&mut JobSpec, &str, &str) -> Result<(), JobErrorKind>,
    },
}

/// One entry of the option table.
pub struct OptDef {
    /// The canonical (fio) name.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// The default as it would be written in a job file ("" when unset by default).
    pub default: &'static str,
    /// One line of help.
    pub help: &'static str,
    pub(crate) kind: Kind,
}

impl OptDef {
    /// A short description of the value syntax, e.g. `int 1..=65536` or `size`.
    pub fn kind_description(&self) -> String {
        match self.kind {
            Kind::Int { min, max, .. } if max == u64::MAX => format!("int >= {min}"),
            Kind::Int { min, max, .. } => format!("int {min}..={max}"),
            Kind::Size { .. } => "size".to_string(),
            Kind::Time { unit_ns, .. } if unit_ns == SEC => "time (s)".to_string(),
            Kind::Time { .. } => "time (ns)".to_string(),
            Kind::Bool { .. } => "bool".to_string(),
            Kind::Str { .. } => "str".to_string(),
            Kind::Enum { values, .. } => values.join("|"),
            Kind::Percent { .. } => "percent".to_string(),
            Kind::Custom { syntax, .. } => syntax.to_string(),
        }
    }

    /// Whether this is a boolean option (which may be written as a bare key).
    pub fn is_bool(&self) -> bool {
        matches!(self.kind, Kind::Bool { .. })
    }

    /// Whether `key` names this option (canonical name or alias, ASCII case-insensitive).
    pub fn matches(&self, key: &str) -> bool {
        self.name.eq_ignore_ascii_case(key)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(key))
    }
}

/// Saturating conversion for setters whose range is already bounded by the table.
fn to_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Saturating conversion for small-range setters.
fn to_u8(v: u64) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

/// Empty text means "unset" for optional string options.
fn opt_string(v: &str) -> Option<String> {
    (!v.is_empty()).then(|| v.to_string())
}

/// Every option `mqblk bench` understands: fio's first, then the device and tool ones.
fn all() -> impl Iterator<Item = &'static OptDef> + Clone {
    fio::FIO.iter().chain(device::DEVICE.iter())
}

/// The full option table, in the order `options_help` lists it.
pub fn option_table() -> impl Iterator<Item = &'static OptDef> + Clone {
    all()
}

/// The table index of the option `key` names, if any.
pub(crate) fn find(key: &str) -> Option<usize> {
    all().position(|d| d.matches(key))
}

/// The table entry at `index` (an index from [`find`]).
pub(crate) fn def(index: usize) -> Option<&'static OptDef> {
    all().nth(index)
}

/// Prefix of scheduler tunables, which are passed through unvalidated.
pub(crate) const SCHED_PREFIX: &str = "sched.";

/// A human-readable list of every option: names, syntax, default and help, two lines
/// per option so that it stays readable in an 80-column terminal.
pub fn options_help() -> String {
    let mut out = String::from(
        "Job options (fio syntax: sizes take k/m/g/t/p suffixes, times d/h/m/s/ms/us/ns):\n",
    );
    for d in all() {
        let names = std::iter::once(d.name)
            .chain(d.aliases.iter().copied())
            .collect::<Vec<_>>()
            .join(" | ");
        let default = if d.default.is_empty() {
            "unset"
        } else {
            d.default
        };
        out.push_str(&format!(
            "  {names}  ({}, default {default})\n      {}\n",
            d.kind_description(),
            d.help
        ));
    }
    out.push_str("  sched.NAME=VALUE  (str)\n      Scheduler tunable, checked by the scheduler.\n");
    out
}

/// Applies `value` (None for a bare key) of option `d` to `job`.
/// The log options whose bare key takes the job's name as the prefix.
const LOGS_NAMED_AFTER_THE_JOB: [&str; 3] = ["write_bw_log", "write_lat_log", "write_iops_log"];

pub(crate) fn apply(
    d: &OptDef,
    job: &mut JobSpec,
    value: Option<&str>,
) -> Result<(), JobErrorKind> {
    if let Kind::Bool { set } = d.kind {
        let on = match value {
            None => true,
            Some(text) => parse_bool(text).ok_or_else(|| bad_value(d, text, BOOL_SYNTAX))?,
        };
        set(job, on);
        return Ok(());
    }
    // fio's logs without a prefix are named after the job (`jobname_type.x.log`).
    if value.is_none() && LOGS_NAMED_AFTER_THE_JOB.contains(&d.name) {
        let name = job.name.clone();
        return apply_text(d, job, &name);
    }
    let text = value.ok_or_else(|| JobErrorKind::MissingValue {
        option: d.name.to_string(),
    })?;
    apply_text(d, job, text.trim())
}

/// Applies the text value of a non-boolean option.
fn apply_text(d: &OptDef, job: &mut JobSpec, text: &str) -> Result<(), JobErrorKind> {
    match d.kind {
        Kind::Int { min, max, set } => {
            let v = parse_size(text).ok_or_else(|| bad_value(d, text, INT_SYNTAX))?;
            check_range(d, text, v, min, max)?;
            set(job, v);
        }
        Kind::Size { set } => set(
            job,
            parse_size(text).ok_or_else(|| bad_value(d, text, SIZE_SYNTAX))?,
        ),
        Kind::Time { unit_ns, set } => set(
            job,
            parse_time_ns(text, unit_ns).ok_or_else(|| bad_value(d, text, TIME_SYNTAX))?,
        ),
        Kind::Bool { set } => set(
            job,
            parse_bool(text).ok_or_else(|| bad_value(d, text, BOOL_SYNTAX))?,
        ),
        Kind::Str { set } => set(job, text),
        Kind::Enum { values, set } => set(job, enum_index(d, values, text)?),
        Kind::Percent { set } => set(job, percent(d, text)?),
        Kind::Custom { set, .. } => set(job, text, d.name)?,
    }
    Ok(())
}

/// The index of `text` among an enum option's values (ASCII case-insensitive).
fn enum_index(d: &OptDef, values: &[&str], text: &str) -> Result<usize, JobErrorKind> {
    values
        .iter()
        .position(|v| v.eq_ignore_ascii_case(text))
        .ok_or_else(|| JobErrorKind::NotOneOf {
            option: d.name.to_string(),
            value: text.to_string(),
            allowed: values.join(", "),
        })
}

/// Parses and range-checks a percentage.
fn percent(d: &OptDef, text: &str) -> Result<f64, JobErrorKind> {
    let v = parse_percent(text).ok_or_else(|| bad_value(d, text, PERCENT_SYNTAX))?;
    if v > 100.0 {
        return Err(out_of_range(d.name, text, "0", "100"));
    }
    Ok(v)
}

/// Refuses integers outside `min..=max`.
fn check_range(d: &OptDef, text: &str, v: u64, min: u64, max: u64) -> Result<(), JobErrorKind> {
    if v < min || v > max {
        return Err(out_of_range(
            d.name,
            text,
            &min.to_string(),
            &max.to_string(),
        ));
    }
    Ok(())
}

fn out_of_range(option: &str, text: &str, min: &str, max: &str) -> JobErrorKind {
    JobErrorKind::OutOfRange {
        option: option.to_string(),
        value: text.to_string(),
        min: min.to_string(),
        max: max.to_string(),
    }
}

fn bad_value(d: &OptDef, text: &str, expected: &str) -> JobErrorKind {
    bad_named(d.name, text, expected)
}

fn bad_named(option: &str, text: &str, expected: &str) -> JobErrorKind {
    JobErrorKind::BadValue {
        option: option.to_string(),
        value: text.to_string(),
        expected: expected.to_string(),
    }
}
