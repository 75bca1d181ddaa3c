//! The job-file reader: INI sections, comments, includes and variable expansion.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::build::{build_job, Entry};
use super::error::{JobError, JobErrorKind, Location};
use super::spec::JobSpec;

/// Deepest include nesting accepted; deeper nesting is almost certainly a cycle.
pub(crate) const MAX_INCLUDE_DEPTH: usize = 16;

/// Largest job file read; it keeps `include /dev/zero` (or a mistyped huge file) from
/// exhausting memory. Real job files are a few kilobytes.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Problems listed at most; reading stops there (a file of garbage, or an include that
/// repeats itself, would otherwise list thousands).
const MAX_PROBLEMS: usize = 100;

/// What a job file yields.
pub(crate) struct Parsed {
    /// The jobs, in file order.
    pub jobs: Vec<JobSpec>,
    /// Every `[global]` option of the file (including included files), in order.
    pub globals: Vec<(String, String)>,
}

/// Parses job-file text. `overlay` holds command-line global options, which apply after
/// the file's `[global]` options and before each job's own options.
pub(crate) fn parse_text(name: &str, text: &str, overlay: &[Entry]) -> Result<Parsed, JobError> {
    let base = Path::new(name)
        .parent()
        .map_or_else(PathBuf::new, Path::to_path_buf);
    let mut reader = Reader {
        overlay,
        globals: Vec::new(),
        section: Section::None,
        jobs: Vec::new(),
        errors: Vec::new(),
        global_errors: 0,
    };
    reader.parse_source(name, text, &base, 0);
    reader.finish_section();
    if let Some(all) = JobError::collect(reader.errors) {
        return Err(all);
    }
    Ok(Parsed {
        jobs: reader.jobs,
        globals: reader.globals.iter().map(Entry::as_pair).collect(),
    })
}

/// Reads a job file with a size cap; errors are the `Io` kind with no location yet.
pub(crate) fn read_limited(path: &Path) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// The section the reader is in.
enum Section {
    /// Before the first header.
    None,
    /// Inside a `[global]` section.
    Global,
    /// Inside a job section.
    Job {
        name: String,
        header: Location,
        /// How many global entries existed when the job started: only those apply.
        globals_len: usize,
        entries: Vec<Entry>,
        /// How many problems had been found when the section started.
        errors_before: usize,
    },
}

/// Parser state that carries across included files.
struct Reader<'a> {
    overlay: &'a [Entry],
    globals: Vec<Entry>,
    section: Section,
    jobs: Vec<JobSpec>,
    /// Every problem found so far: reading goes on to the end of the input.
    errors: Vec<JobError>,
    /// How many of them are in `[global]` sections (they may affect every later job).
    global_errors: usize,
}

impl Reader<'_> {
    /// Parses the lines of one file (the top file or an included one), recording every
    /// problem and going on with the next line.
    fn parse_source(&mut self, file: &str, text: &str, base: &Path, depth: usize) {
        for (i, raw) in text.lines().enumerate() {
            if self.errors.len() >= MAX_PROBLEMS {
                return;
            }
            let loc = Location::File {
                name: file.to_string(),
                line: i + 1,
            };
            if let Err(e) = self.parse_line(raw, loc, base, depth) {
                self.record(e);
            }
        }
    }

    /// Keeps a problem, counting it against `[global]` when it was found there.
    fn record(&mut self, e: JobError) {
        if matches!(self.section, Section::Global) {
            self.global_errors += e.count();
        }
        self.errors.push(e);
    }

    /// Handles one line: blank/comment, section header, include, or option.
    fn parse_line(
        &mut self,
        raw: &str,
        loc: Location,
        base: &Path,
        depth: usize,
    ) -> Result<(), JobError> {
        let Some(line) = clean_line(raw) else {
            return Ok(());
        };
        if line.starts_with('[') {
            self.start_section(&line, loc);
            return Ok(());
        }
        if let Some(path) = include_target(&line) {
            self.include(path, loc, base, depth);
            return Ok(());
        }
        let res = match split_option(&line) {
            Some((key, value)) => self.add_option(key, value, loc),
            None => Err(JobError::new(loc, JobErrorKind::MalformedLine { line })),
        };
        res.map_err(|e| {
            let unset = unset_vars(raw);
            if unset.is_empty() {
                return e;
            }
            JobError::new(
                e.location,
                JobErrorKind::UnsetVariables {
                    names: unset
                        .iter()
                        .map(|n| format!("${{{n}}}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    inner: e.kind,
                },
            )
        })
    }

    /// Starts a `[name]` section, finishing the previous one.
    fn start_section(&mut self, line: &str, loc: Location) {
        self.finish_section();
        let name = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .map(str::trim);
        let problem = match name {
            None => Some(JobErrorKind::MalformedLine {
                line: line.to_string(),
            }),
            Some("") => Some(JobErrorKind::EmptySectionName {
                header: line.to_string(),
            }),
            Some(_) => None,
        };
        let errors_before = self.errors.len();
        if let Some(kind) = problem {
            // The options below a broken header are still checked, as a job's (the job
            // itself is not built: the file has an error anyway).
            self.errors.push(JobError::new(loc.clone(), kind));
        }
        self.section = match name {
            Some("global") => Section::Global,
            _ => Section::Job {
                name: name.unwrap_or_default().to_string(),
                header: loc,
                globals_len: self.globals.len(),
                entries: Vec::new(),
                errors_before,
            },
        };
    }

    /// Records one option in the current section.
    fn add_option(
        &mut self,
        key: &str,
        value: Option<&str>,
        loc: Location,
    ) -> Result<(), JobError> {
        let target = match &mut self.section {
            Section::None => {
                let option = key.to_string();
                return Err(JobError::new(
                    loc,
                    JobErrorKind::OptionOutsideSection { option },
                ));
            }
            Section::Global => &mut self.globals,
            Section::Job { entries, .. } => entries,
        };
        target.push(Entry::new(key, value, loc, &[])?);
        Ok(())
    }

    /// Builds the job of the section being closed, if it is a job section. A job whose
    /// own lines or `[global]` lines had problems is not built: its cross-field checks
    /// would judge values that are not what the user meant.
    fn finish_section(&mut self) {
        let Section::Job {
            name,
            header,
            globals_len,
            entries,
            errors_before,
        } = std::mem::replace(&mut self.section, Section::None)
        else {
            return;
        };
        if self.errors.len() > errors_before || self.global_errors > 0 {
            return;
        }
        let visible = self.globals.get(..globals_len).unwrap_or(&self.globals);
        let globals: Vec<&Entry> = visible.iter().chain(self.overlay.iter()).collect();
        match build_job(&name, &header, &globals, &entries) {
            Ok(job) => self.jobs.push(job),
            Err(e) => self.errors.push(e),
        }
    }

    /// Splices in an included file, resolved against the including file's directory.
    fn include(&mut self, path: &str, loc: Location, base: &Path, depth: usize) {
        if depth + 1 > MAX_INCLUDE_DEPTH {
            let kind = JobErrorKind::IncludeDepth {
                path: path.to_string(),
                limit: MAX_INCLUDE_DEPTH,
            };
            return self.record(JobError::new(loc, kind));
        }
        let resolved = base.join(path);
        let shown = resolved.display().to_string();
        let text = match read_limited(&resolved) {
            Ok(text) => text,
            Err(e) => {
                let kind = if e.kind() == std::io::ErrorKind::NotFound {
                    JobErrorKind::IncludeNotFound {
                        path: path.to_string(),
                        resolved: shown,
                    }
                } else {
                    JobErrorKind::Io {
                        path: shown,
                        message: e.to_string(),
                    }
                };
                return self.record(JobError::new(loc, kind));
            }
        };
        let next_base = resolved
            .parent()
            .map_or_else(PathBuf::new, Path::to_path_buf);
        self.parse_source(&shown, &text, &next_base, depth + 1);
    }
}

/// Strips comments and expands variables; `None` for lines with nothing left.
fn clean_line(raw: &str) -> Option<String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
        return None;
    }
    let expanded = expand_vars(strip_trailing_comment(trimmed));
    let line = expanded.trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// Cuts a trailing `; comment` or `# comment`. Only a `;`/`#` after whitespace starts a
/// comment, so values such as `filename=/dev/disk#1` survive.
fn strip_trailing_comment(line: &str) -> &str {
    let mut prev_space = false;
    for (i, c) in line.char_indices() {
        if prev_space && (c == ';' || c == '#') {
            return line.get(..i).unwrap_or(line).trim_end();
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// The path of an `include FILE` line.
fn include_target(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("include")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    Some(rest.trim())
}

/// Splits `key=value` (spaces around `=` allowed) or a bare `key`; `None` if the line is
/// neither (e.g. several words without `=`).
fn split_option(line: &str) -> Option<(&str, Option<&str>)> {
    let (key, value) = match line.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (line, None),
    };
    if key.is_empty() || key.contains(char::is_whitespace) {
        return None;
    }
    Some((key, value))
}

/// Keywords fio replaces without braces.
const RESERVED: [&str; 3] = ["ncpus", "pagesize", "mb_memory"];

/// Expands `${VAR}` from the environment (unset means empty) and the reserved
/// `$ncpus`, `$pagesize` and `$mb_memory`. Anything else after `$` is kept as written.
pub(crate) fn expand_vars(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(pos) = rest.find('$') {
        out.push_str(rest.get(..pos).unwrap_or(""));
        let after = rest.get(pos + 1..).unwrap_or("");
        rest = expand_one(after, &mut out);
    }
    out.push_str(rest);
    out
}

/// The `${NAME}` references in `line` whose variable is not set.
fn unset_vars(line: &str) -> Vec<&str> {
    line.split("${")
        .skip(1)
        .filter_map(|s| s.split_once('}').map(|(name, _)| name))
        // `var_os` may panic on such names; they expand to nothing (`env_value`).
        .filter(|name| {
            name.is_empty() || name.contains(['=', '\0']) || std::env::var_os(name).is_none()
        })
        .collect()
}

/// Expands the variable starting right after a `$`, appending to `out`; returns the text
/// after the variable.
fn expand_one<'a>(after: &'a str, out: &mut String) -> &'a str {
    if let Some(inner) = after.strip_prefix('{') {
        if let Some((name, tail)) = inner.split_once('}') {
            out.push_str(&env_value(name));
            return tail;
        }
    }
    for word in RESERVED {
        if let Some(tail) = after.strip_prefix(word) {
            out.push_str(&reserved_value(word));
            return tail;
        }
    }
    out.push('$');
    after
}

/// An environment variable's value, or "" when unset, not Unicode, or an impossible name.
fn env_value(name: &str) -> String {
    if name.is_empty() || name.contains(['=', '\0']) {
        return String::new();
    }
    std::env::var(name).unwrap_or_default()
}

/// The value of a reserved keyword.
fn reserved_value(word: &str) -> String {
    match word {
        "ncpus" => std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .to_string(),
        "pagesize" => "4096".to_string(),
        _ => mb_memory().map_or_else(String::new, |mb| mb.to_string()),
    }
}

/// Total memory in MiB from `/proc/meminfo`, if readable.
fn mb_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}
