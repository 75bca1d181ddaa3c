//! The one error type of job parsing and its one-line rendering.

use std::fmt;

/// Where a problem was found, rendered as the prefix of the error line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A line of a job file (or of text parsed as one): `jobs.fio:12`.
    File {
        /// The file name as the user wrote it (or the name given for in-memory text).
        name: String,
        /// The 1-based line number.
        line: usize,
    },
    /// A whole file, for problems such as being unreadable: `jobs.fio`.
    Path {
        /// The file name as the user wrote it.
        name: String,
    },
    /// One command-line argument: `command line: --iodepth=0`.
    CommandLine {
        /// The argument exactly as given.
        arg: String,
    },
    /// A job as a whole, for [`validate`](super::validate) on a hand-built spec: `job 'x'`.
    Job {
        /// The job's name.
        name: String,
    },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File { name, line } => write!(f, "{}:{line}", one_line(name)),
            Location::Path { name } => write!(f, "{}", one_line(name)),
            Location::CommandLine { arg } => write!(f, "command line: {}", one_line(arg)),
            Location::Job { name } => write!(f, "job '{}'", one_line(name)),
        }
    }
}

/// A job-file or command-line problem; `Display` is one line per problem: `location: what`.
///
/// A job file is read to its end however many problems it has, so that a user fixes them
/// all in one go (fio stops at the first): the first is `location`/`kind`, the rest are in
/// [`more`](JobError::more), in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct JobError {
    /// Where the problem is.
    pub location: Location,
    /// What the problem is (boxed to keep `Result<_, JobError>` small on the happy path).
    pub kind: Box<JobErrorKind>,
    /// Further problems found in the same input, each with no `more` of its own.
    pub more: Vec<JobError>,
}

impl JobError {
    /// Pairs a problem with its location.
    pub fn new(location: Location, kind: JobErrorKind) -> Self {
        JobError {
            location,
            kind: Box::new(kind),
            more: Vec::new(),
        }
    }

    /// All problems as one error (the first leads), or `None` for an empty list.
    pub fn collect(errors: Vec<JobError>) -> Option<JobError> {
        let mut all = errors.into_iter().flat_map(JobError::into_problems);
        let mut first = all.next()?;
        first.more = all.collect();
        Some(first)
    }

    /// Every problem, the first one first, each on its own.
    pub fn problems(&self) -> impl Iterator<Item = (&Location, &JobErrorKind)> {
        std::iter::once((&self.location, &*self.kind))
            .chain(self.more.iter().map(|e| (&e.location, &*e.kind)))
    }

    /// How many problems this error carries.
    pub fn count(&self) -> usize {
        1 + self.more.len()
    }

    fn into_problems(mut self) -> Vec<JobError> {
        let more = std::mem::take(&mut self.more);
        std::iter::once(self).chain(more).collect()
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (location, kind)) in self.problems().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{location}: {kind}")?;
        }
        Ok(())
    }
}

impl std::error::Error for JobError {}

/// What went wrong. Values quoted in messages are shortened and stripped of control
/// characters so that the rendered error always stays on one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobErrorKind {
    /// The option name is not in the table; `suggestion` is a close match, if any.
    #[error("unknown option '{}'{}", one_line(name), suggestion_text(suggestion))]
    UnknownOption {
        /// The name as written.
        name: String,
        /// A known option within edit distance 2.
        suggestion: Option<String>,
    },
    /// A fio option that mqblk knows but does not implement; `hint` says what to do.
    #[error("fio option '{}' is not implemented by mqblk: {hint}", one_line(name))]
    NotImplemented {
        /// The name as written.
        name: String,
        /// Why, and what to write instead.
        hint: String,
    },
    /// A job-file line that is neither a section, an option nor an include.
    #[error(
        "malformed line '{}': expected key=value, a bare key, or [section]",
        one_line(line)
    )]
    MalformedLine {
        /// The offending line (trimmed).
        line: String,
    },
    /// A number outside the option's allowed range.
    #[error(
        "option '{option}': value '{}' out of range {min}..={max}",
        one_line(value)
    )]
    OutOfRange {
        /// The option's canonical name.
        option: String,
        /// The value as written.
        value: String,
        /// The smallest allowed value, as text.
        min: String,
        /// The largest allowed value, as text.
        max: String,
    },
    /// A value outside an option's fixed list of choices.
    #[error("option '{option}': '{}' is not one of {allowed}", one_line(value))]
    NotOneOf {
        /// The option's canonical name.
        option: String,
        /// The value as written.
        value: String,
        /// The allowed values, comma separated.
        allowed: String,
    },
    /// A value that does not have the option's syntax (size, time, boolean, ...).
    #[error("option '{option}': '{}' is not {expected}", one_line(value))]
    BadValue {
        /// The option's canonical name.
        option: String,
        /// The value as written.
        value: String,
        /// What was expected, e.g. `a size (expected a number with ...)`.
        expected: String,
    },
    /// A valid-looking value that this implementation deliberately does not support.
    #[error("option '{option}': '{}' is not supported: {reason}", one_line(value))]
    Unsupported {
        /// The option's canonical name.
        option: String,
        /// The value as written.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A non-boolean option written as a bare key (or `--opt` without `=value`).
    #[error("option '{option}' needs a value")]
    MissingValue {
        /// The option's canonical name.
        option: String,
    },
    /// A job-file option before the first `[section]` header.
    #[error("option '{}' appears before any [section]", one_line(option))]
    OptionOutsideSection {
        /// The option name as written.
        option: String,
    },
    /// A `[]` (or `[   ]`) section header.
    #[error("empty section name '{}'", one_line(header))]
    EmptySectionName {
        /// The header as written.
        header: String,
    },
    /// `--name=` without a name on the command line.
    #[error("empty job name")]
    EmptyJobName,
    /// An `include` whose file does not exist.
    #[error(
        "include file '{}' not found (looked for '{}')",
        one_line(path),
        one_line(resolved)
    )]
    IncludeNotFound {
        /// The path as written after `include`.
        path: String,
        /// The path after resolving it against the including file's directory.
        resolved: String,
    },
    /// Includes nested deeper than the limit, most likely a cycle.
    #[error(
        "include of '{}' nests deeper than {limit} levels (an include cycle?)",
        one_line(path)
    )]
    IncludeDepth {
        /// The path as written after `include`.
        path: String,
        /// The nesting limit.
        limit: usize,
    },
    /// A job file with no job section: fio runs nothing, and neither do we (the default
    /// job is only for a command line that names no job at all).
    #[error("no jobs: the file has no [section] other than [global]")]
    NoJobs,
    /// A problem with a line that used environment variables that are not set, which expand
    /// to nothing as in fio: the message names them.
    #[error("{inner} ({names} not set in the environment: it expands to nothing)")]
    UnsetVariables {
        /// The references as written (`${NAME}`), comma separated.
        names: String,
        /// The problem itself.
        inner: Box<JobErrorKind>,
    },
    /// The job file itself could not be read (the location names it).
    #[error("cannot read job file: {message}")]
    ReadFailed {
        /// The operating system's message.
        message: String,
    },
    /// An included file that exists but could not be read.
    #[error("cannot read '{}': {message}", one_line(path))]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// A cross-field check of [`validate`](super::validate) failed.
    #[error("{0}")]
    Invalid(String),
}

/// The `(did you mean 'x'?)` tail of an unknown-option message.
fn suggestion_text(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean '{s}'?)"),
        None => String::new(),
    }
}

/// Longest user text quoted in a message; longer text is cut so one bad line cannot
/// produce a screen-filling error.
const MAX_QUOTED: usize = 80;

/// Makes user text safe to quote in a one-line message: control characters (which could
/// break the line or the terminal) are escaped and very long text is shortened.
pub(crate) fn one_line(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == MAX_QUOTED {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
