//! Option entries as written, and building a [`JobSpec`] from them.
//!
//! Both front ends (job files and the command line) turn each `key=value` into an
//! [`Entry`] as soon as they see it, which checks the value right there so the error can
//! name the exact line or argument. A job is then built by replaying its global entries
//! and its own entries, in order, onto the defaults.

use super::error::{JobError, JobErrorKind, Location};
use super::fio_only;
use super::options::{self, SCHED_PREFIX};
use super::spec::{self, JobSpec, VerifyMode};

/// What an entry sets.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    /// The option at this index of the option table.
    Opt(usize),
    /// A scheduler tunable (the name after `sched.`).
    Sched(String),
    /// A fio option that changes nothing here, and why.
    NoEffect(&'static str, &'static str),
}

/// One option as written, already checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// The canonical option name (or `sched.NAME`), used in reports.
    pub key: String,
    /// The value as written; `None` for a bare key.
    pub value: Option<String>,
    /// Where it was written.
    pub loc: Location,
    target: Target,
}

impl Entry {
    /// Resolves `key`, checks `value` against the option's syntax, and records where it
    /// came from. `extra_names` are additional names to suggest for unknown keys.
    pub fn new(
        key: &str,
        value: Option<&str>,
        loc: Location,
        extra_names: &[&str],
    ) -> Result<Entry, JobError> {
        let target = resolve(key, extra_names).map_err(|k| JobError::new(loc.clone(), k))?;
        let canonical = match &target {
            Target::Opt(i) => options::def(*i).map_or(key, |d| d.name).to_string(),
            Target::Sched(name) => format!("{SCHED_PREFIX}{name}"),
            Target::NoEffect(name, _) => name.to_string(),
        };
        let entry = Entry {
            key: canonical,
            value: value.map(str::to_string),
            loc,
            target,
        };
        entry.apply(&mut JobSpec::default())?;
        Ok(entry)
    }

    /// Whether this entry sets the option with canonical name `name`.
    pub fn sets(&self, name: &str) -> bool {
        self.key == name
    }

    /// The `(name, raw value)` pair used for fio's "job options"/"global options".
    pub fn as_pair(&self) -> (String, String) {
        (self.key.clone(), self.value.clone().unwrap_or_default())
    }

    /// Stores this entry's value into `job`.
    pub fn apply(&self, job: &mut JobSpec) -> Result<(), JobError> {
        let result = match &self.target {
            Target::Opt(i) => match options::def(*i) {
                Some(d) => options::apply(d, job, self.value.as_deref()),
                None => Ok(()),
            },
            Target::Sched(name) => {
                set_tunable(job, name, self.value.as_deref().unwrap_or("1"));
                Ok(())
            }
            Target::NoEffect(name, why) => {
                if !job.no_effect.iter().any(|(n, _)| n == name) {
                    job.no_effect.push((name.to_string(), why.to_string()));
                }
                Ok(())
            }
        };
        result.map_err(|k| JobError::new(self.loc.clone(), k))
    }
}

/// Finds what `key` names: a table option or a `sched.NAME` tunable.
fn resolve(key: &str, extra_names: &[&str]) -> Result<Target, JobErrorKind> {
    if let Some(i) = options::find(key) {
        return Ok(Target::Opt(i));
    }
    if let Some((name, why)) = fio_only::no_effect(key) {
        return Ok(Target::NoEffect(name, why));
    }
    if let Some(hint) = fio_only::hint(key) {
        return Err(JobErrorKind::NotImplemented {
            name: key.to_string(),
            hint: hint.to_string(),
        });
    }
    match key.strip_prefix(SCHED_PREFIX) {
        Some(name) if !name.is_empty() => Ok(Target::Sched(name.to_string())),
        _ => Err(JobErrorKind::UnknownOption {
            name: key.to_string(),
            suggestion: options::suggest(key, extra_names),
        }),
    }
}

/// Sets a scheduler tunable, replacing an earlier value of the same name so that a
/// job's own setting overrides a global one.
fn set_tunable(job: &mut JobSpec, name: &str, value: &str) {
    match job.sched_tunables.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = value.to_string(),
        None => job
            .sched_tunables
            .push((name.to_string(), value.to_string())),
    }
}

/// `names` join the job's `filename` list (a `:` in a name escaped, as fio reads it).
fn add_filenames(job: &mut JobSpec, names: &[String]) {
    let listed: Vec<String> = names.iter().map(|f| f.replace(':', "\\:")).collect();
    let listed = listed.join(":");
    job.filename = Some(match job.filename.take() {
        Some(names) => format!("{names}:{listed}"),
        None => listed,
    });
}

/// The regular files below `dir` into `out`, subdirectories as they come, in the order the
/// directory lists its entries (fio's `recurse_dir`); symbolic links are passed over.
fn files_below(dir: &std::path::Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_file() {
            out.push(entry.path().to_string_lossy().into_owned());
        } else if kind.is_dir() {
            files_below(&entry.path(), out)?;
        }
    }
    Ok(())
}

/// Builds and validates one job: defaults, then `globals` in order, then `own`.
///
/// `header` is where the job starts (its `[section]` line or `--name=` argument) and is
/// the location reported for cross-field problems.
pub(crate) fn build_job(
    name: &str,
    header: &Location,
    globals: &[&Entry],
    own: &[Entry],
) -> Result<JobSpec, JobError> {
    let mut job = JobSpec {
        name: name.to_string(),
        ..JobSpec::default()
    };
    for entry in globals.iter().copied().chain(own.iter()) {
        entry.apply(&mut job)?;
    }
    let all = || globals.iter().copied().chain(own.iter());
    job.from_job_file = matches!(header, Location::File { .. });
    job.files_at = all()
        .rfind(|e| e.sets("filename") || e.sets("directory") || e.sets("opendir"))
        .map(|e| e.loc.clone());
    // fio's `read_iolog`: the log's files are the job's, its directions the job's `rw`
    // and its largest I/Os the job's block sizes.
    if let Some(path) = job.read_iolog.clone() {
        let at = all()
            .rfind(|e| e.sets("read_iolog"))
            .map_or_else(|| header.clone(), |e| e.loc.clone());
        let bad = |m: String| JobError::new(at.clone(), JobErrorKind::Invalid(m));
        let align = job.replay_options.align;
        if align != 0 && !align.is_power_of_two() {
            return Err(bad(format!("replay_align={align}: not a power of two")));
        }
        let log = crate::iolog_replay::ReplayLog::read(&path, &job.replay_options).map_err(bad)?;
        job.filename = None;
        add_filenames(&mut job, &log.files);
        job.files_at = Some(at);
        job.rw = match log.directions() {
            (true, true) => spec::RwMode::ReadWrite,
            (false, true) => spec::RwMode::Write,
            _ => spec::RwMode::Read,
        };
        let [r, w] = log.max_len().map(|l| u64::from(l.max(512)));
        job.bs = [r, w, w];
        job.replay = Some(std::sync::Arc::new(log));
    }
    // fio's `opendir` (`add_dir_files`): the files below the directory join the job's.
    if let (Some(dir), Some(at)) = (job.opendir.clone(), job.files_at.clone()) {
        let mut found = Vec::new();
        files_below(std::path::Path::new(&dir), &mut found).map_err(|e| {
            JobError::new(
                at.clone(),
                JobErrorKind::Invalid(format!("opendir={dir}: {e}")),
            )
        })?;
        if found.is_empty() {
            let m = format!("opendir={dir}: no regular file below it");
            return Err(JobError::new(at, JobErrorKind::Invalid(m)));
        }
        add_filenames(&mut job, &found);
    }
    if !all().any(|e| e.sets("iodepth_batch_complete_max")) {
        // fio's default for the reap limit is `iodepth_batch_complete_min` (fio's HOWTO:
        // "By default it is equal to iodepth_batch_complete_min value"), so fio reaps one
        // completion at a time and refills the depth at once; known only once every option
        // has been applied.
        job.iodepth_batch_complete_max = job.iodepth_batch_complete_min.max(1);
    }
    // fio's verify_pattern without verify= writes a header and the pattern, and checks both.
    if job.verify_pattern.is_some() && job.verify == VerifyMode::None {
        job.verify = VerifyMode::Meta;
    }
    // Sizes written as zones (`size=2z`) count `zonesize` units, as fio's strided zones do;
    // with zonemode=zbd and no zonesize, the device's zones once it is known
    // ([`crate::zbd::apply_zone_size`]).
    let deferred = job.zonemode_zbd && job.zonesize == 0;
    let counts = if deferred {
        Vec::new()
    } else {
        std::mem::take(&mut job.zone_counts)
    };
    for (option, n) in counts {
        if !(job.zonemode_strided || job.zonemode_zbd) || job.zonesize == 0 {
            let m = format!(
                "{option}={n}z: sizes in zones need zonemode=strided or zbd, and zonesize (fio counts them in zonesize units)"
            );
            return Err(JobError::new(header.clone(), JobErrorKind::Invalid(m)));
        }
        let bytes = n.saturating_mul(job.zonesize);
        match option {
            "size" => job.size = Some(bytes).filter(|&b| b > 0),
            "offset" => job.offset = bytes,
            _ => job.io_size = Some(bytes),
        }
    }
    job.global_options = globals.iter().map(|e| e.as_pair()).collect();
    job.set_options = own.iter().map(Entry::as_pair).collect();
    spec::check(&job).map_err(|m| JobError::new(header.clone(), JobErrorKind::Invalid(m)))?;
    Ok(job)
}
