//! `mqblk bench` arguments: fio-style `--opt=value` job options plus the tool's own.

use std::path::{Path, PathBuf};

use super::build::{build_job, Entry};
use super::error::{JobError, JobErrorKind, Location};
use super::ini;
use super::spec::JobSpec;

/// Report formats (`--output-format`): one or several of fio's, printed in fio's order
/// (terse, JSON, normal) when several are asked for (`normal,json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputFormat {
    /// fio's human-readable text.
    pub normal: bool,
    /// fio's JSON; `json_plus` adds latency histogram bins (`json+`).
    pub json: bool,
    pub json_plus: bool,
    /// fio's semicolon-separated `terse` lines (`--terse-version`, 3 by default).
    pub terse: bool,
}

impl OutputFormat {
    pub const NORMAL: OutputFormat = OutputFormat {
        normal: true,
        json: false,
        json_plus: false,
        terse: false,
    };
    pub const JSON: OutputFormat = OutputFormat {
        normal: false,
        json: true,
        json_plus: false,
        terse: false,
    };
    pub const JSON_PLUS: OutputFormat = OutputFormat {
        normal: false,
        json: true,
        json_plus: true,
        terse: false,
    };
    pub const TERSE: OutputFormat = OutputFormat {
        normal: false,
        json: false,
        json_plus: false,
        terse: true,
    };
}

impl Default for OutputFormat {
    fn default() -> OutputFormat {
        OutputFormat::NORMAL
    }
}

/// Everything `mqblk bench` was asked to do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CommandLine {
    /// All jobs: those of job files and those started with `--name=`, in argument order.
    pub jobs: Vec<JobSpec>,
    /// `--output-format=normal|json|json+|terse`, several comma-separated.
    pub output_format: OutputFormat,
    /// `--terse-version=N`, fio's 2 to 5 (0: fio's default, 3).
    pub terse_version: u32,
    /// `--output=FILE`: write the report there instead of standard output.
    pub output_file: Option<PathBuf>,
    /// `--dump-sched`: print scheduler state after the run.
    pub dump_sched: bool,
    /// `--preset=NAME`: a built-in workload chosen by name (resolved by the caller).
    pub preset: Option<String>,
    /// `--progress` / `--no-progress`; `None` means decide automatically.
    pub progress: Option<bool>,
    /// `--help` (or `-h`).
    pub help: bool,
    /// `--parse-only`: check the jobs and the device they describe, run nothing (fio's
    /// `--parse-only`).
    pub parse_only: bool,
    /// `--fio-options`: print what mqblk does with each of fio's options, run nothing.
    pub fio_options: bool,
    /// `--plot=DIR`: write SVG charts of each job clone there.
    pub plot: Option<PathBuf>,
    /// `--trace=NAME`: write the run's request events as blktrace files `NAME.blktrace.N`.
    pub trace: Option<PathBuf>,
    /// Global options for fio's JSON "global options": the command-line globals followed
    /// by every job file's `[global]` options, as `(name, raw value)`.
    pub global_options: Vec<(String, String)>,
    /// Command-line globals, kept so that job text added later gets them too.
    cli_globals: Vec<Entry>,
}

impl CommandLine {
    /// Parses job-file text (for example a preset's) as if it had been given as a job
    /// file on this command line, so the command-line globals apply to its jobs.
    pub fn add_job_text(&mut self, name_for_errors: &str, text: &str) -> Result<(), JobError> {
        let parsed = ini::parse_text(name_for_errors, text, &self.cli_globals)?;
        self.jobs.extend(parsed.jobs);
        self.global_options.extend(parsed.globals);
        Ok(())
    }

    /// Reads and adds a job file, like a positional argument.
    pub fn add_job_file(&mut self, path: &Path) -> Result<(), JobError> {
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
        let before = self.jobs.len();
        self.add_job_text(&shown, &text)?;
        if self.jobs.len() == before {
            return Err(JobError::new(
                Location::Path { name: shown },
                JobErrorKind::NoJobs,
            ));
        }
        Ok(())
    }
}

/// The tool's own options, offered as suggestions for misspelled arguments.
const TOOL_OPTIONS: [&str; 11] = [
    "parse-only",
    "fio-options",
    "plot",
    "output-format",
    "trace",
    "output",
    "dump-sched",
    "preset",
    "progress",
    "no-progress",
    "help",
];

/// A job started with `--name=`, collected before the globals are all known.
struct CliJob {
    name: String,
    header: Location,
    entries: Vec<Entry>,
}

/// What the arguments asked for, in order, before building jobs.
enum Item {
    /// A positional job file.
    File(String),
    /// A `--name=` job (index into the job list).
    Job(usize),
}

/// Parses `mqblk bench` arguments (without the program and subcommand names).
///
/// `--opt=value` and bare `--flag` (a boolean) are fio job options; `--name=x` starts a
/// new job and the options after it belong to that job; options before the first
/// `--name` are global and apply to every job, including those of job files (after the
/// files' own `[global]` sections). Other arguments are job files, whose jobs are added
/// where they appear; `--` makes all later arguments job files.
pub fn parse_command_line(args: &[String]) -> Result<CommandLine, JobError> {
    let mut cl = CommandLine::default();
    let mut jobs: Vec<CliJob> = Vec::new();
    let mut items = Vec::new();
    let mut positional_only = false;
    let mut errors = Vec::new();
    for arg in args {
        if positional_only || arg == "-" || !arg.starts_with('-') {
            items.push(Item::File(arg.clone()));
        } else if arg == "--" {
            positional_only = true;
        } else {
            match classify(arg, &mut cl, jobs.last_mut()) {
                Ok(Some(new_job)) => {
                    jobs.push(new_job);
                    items.push(Item::Job(jobs.len() - 1));
                }
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
    }
    cl.global_options = cl.cli_globals.iter().map(Entry::as_pair).collect();
    // With a bad argument, job files are still read for their own problems, but jobs are
    // not built: their cross-field checks would judge values the user did not mean.
    let build = errors.is_empty();
    build_all(&mut cl, &items, &jobs, build, &mut errors);
    match JobError::collect(errors) {
        Some(all) => Err(all),
        None => Ok(cl),
    }
}

/// Handles one option argument: a tool option, a new job, or a job/global option.
/// Returns the new job when the argument is `--name=`.
fn classify(
    arg: &str,
    cl: &mut CommandLine,
    current: Option<&mut CliJob>,
) -> Result<Option<CliJob>, JobError> {
    let loc = Location::CommandLine {
        arg: arg.to_string(),
    };
    if arg == "-h" {
        cl.help = true;
        return Ok(None);
    }
    let body = arg
        .strip_prefix("--")
        .unwrap_or_else(|| arg.trim_start_matches('-'));
    let (key, value) = match body.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (body, None),
    };
    if tool_option(key, value, cl, &loc)? {
        return Ok(None);
    }
    if key == "name" {
        return new_job(value, loc).map(Some);
    }
    let entry = Entry::new(key, value, loc, &TOOL_OPTIONS)?;
    match current {
        Some(job) => job.entries.push(entry),
        None => cl.cli_globals.push(entry),
    }
    Ok(None)
}

/// Starts a `--name=` job.
fn new_job(value: Option<&str>, loc: Location) -> Result<CliJob, JobError> {
    let name = value.unwrap_or("").trim();
    if name.is_empty() {
        return Err(JobError::new(loc, JobErrorKind::EmptyJobName));
    }
    let entry = Entry::new("name", Some(name), loc.clone(), &[])?;
    Ok(CliJob {
        name: name.to_string(),
        header: loc,
        entries: vec![entry],
    })
}

/// Applies a tool option if `key` is one; returns whether it was.
fn tool_option(
    key: &str,
    value: Option<&str>,
    cl: &mut CommandLine,
    loc: &Location,
) -> Result<bool, JobError> {
    let normalized = key.replace('_', "-").to_ascii_lowercase();
    match normalized.as_str() {
        "output-format" => cl.output_format = output_format(value, loc)?,
        "minimal" => {
            if flag(key, value, loc)? {
                cl.output_format = OutputFormat::TERSE;
            }
        }
        "terse-version" => {
            let v = required(key, value, loc)?;
            cl.terse_version = match v.parse::<u32>() {
                Ok(n @ 2..=5) => n,
                _ => {
                    return Err(JobError::new(
                        loc.clone(),
                        JobErrorKind::NotOneOf {
                            option: "terse-version".to_string(),
                            value: v.to_string(),
                            allowed: "2, 3, 4, 5".to_string(),
                        },
                    ))
                }
            };
        }
        "output" => cl.output_file = Some(PathBuf::from(required(key, value, loc)?)),
        "preset" => cl.preset = Some(required(key, value, loc)?.to_string()),
        "trace" => cl.trace = Some(PathBuf::from(required(key, value, loc)?)),
        "dump-sched" => cl.dump_sched = flag(key, value, loc)?,
        "progress" => cl.progress = Some(flag(key, value, loc)?),
        "no-progress" => cl.progress = Some(!flag(key, value, loc)?),
        "help" => cl.help = flag(key, value, loc)?,
        "parse-only" => cl.parse_only = flag(key, value, loc)?,
        "fio-options" => cl.fio_options = flag(key, value, loc)?,
        "plot" => cl.plot = Some(PathBuf::from(required(key, value, loc)?)),
        _ => return Ok(false),
    }
    Ok(true)
}

/// The value of a tool option that needs one.
fn required<'a>(key: &str, value: Option<&'a str>, loc: &Location) -> Result<&'a str, JobError> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v.trim()),
        _ => Err(JobError::new(
            loc.clone(),
            JobErrorKind::MissingValue {
                option: key.to_string(),
            },
        )),
    }
}

/// A tool flag: bare means true, otherwise a boolean value.
fn flag(key: &str, value: Option<&str>, loc: &Location) -> Result<bool, JobError> {
    let Some(text) = value else {
        return Ok(true);
    };
    super::value::parse_bool(text).ok_or_else(|| {
        let kind = JobErrorKind::BadValue {
            option: key.to_string(),
            value: text.to_string(),
            expected: "a boolean (expected 0/1, true/false, yes/no or on/off)".to_string(),
        };
        JobError::new(loc.clone(), kind)
    })
}

/// Parses `--output-format`: one of `normal`, `json`, `json+` (histogram bins added to
/// the JSON) and `terse`, or several comma-separated, as fio takes them.
fn output_format(value: Option<&str>, loc: &Location) -> Result<OutputFormat, JobError> {
    let text = required("output-format", value, loc)?;
    let mut f = OutputFormat {
        normal: false,
        json: false,
        json_plus: false,
        terse: false,
    };
    for part in text.split(',') {
        match part.trim().to_ascii_lowercase().as_str() {
            "normal" => f.normal = true,
            "json" => f.json = true,
            "json+" => (f.json, f.json_plus) = (true, true),
            "terse" => f.terse = true,
            _ => {
                return Err(JobError::new(
                    loc.clone(),
                    JobErrorKind::NotOneOf {
                        option: "output-format".to_string(),
                        value: text.to_string(),
                        allowed: "normal, json, json+, terse (or several, comma-separated)"
                            .to_string(),
                    },
                ))
            }
        }
    }
    Ok(f)
}

/// Builds every job in argument order, now that all command-line globals are known
/// (`--name=` jobs only if `build`), adding every problem to `errors`.
fn build_all(
    cl: &mut CommandLine,
    items: &[Item],
    jobs: &[CliJob],
    build: bool,
    errors: &mut Vec<JobError>,
) {
    for item in items {
        let result = match item {
            Item::File(path) => cl.add_job_file(Path::new(path)),
            Item::Job(i) if build => {
                let Some(job) = jobs.get(*i) else { continue };
                let globals: Vec<&Entry> = cl.cli_globals.iter().collect();
                build_job(&job.name, &job.header, &globals, &job.entries)
                    .map(|spec| cl.jobs.push(spec))
            }
            Item::Job(_) => Ok(()),
        };
        if let Err(e) = result {
            errors.push(e);
        }
    }
}
