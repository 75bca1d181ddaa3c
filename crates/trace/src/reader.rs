//! A trace as blktrace leaves it: `NAME.blktrace.0`, `NAME.blktrace.1`, ... (one per CPU),
//! each time-ordered on its own, merged here into one time-ordered stream.

use crate::format::{decode_all, ta, tn, Record};
use crate::TraceError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The records of every per-CPU file of one or more traces, merged by time (ties keep the
/// order of the files as given, then each file's own order).
#[derive(Debug, Default)]
pub struct TraceSet {
    pub records: Vec<Record>,
    pub files: Vec<PathBuf>,
}

/// The files a trace name stands for: the path itself when it is a file (one per-CPU file,
/// or a merged `blkparse -d` dump), else every `NAME.blktrace.N` beside it, by N.
pub fn files_of(name: &Path) -> Result<Vec<PathBuf>, TraceError> {
    if name.is_file() {
        return Ok(vec![name.to_path_buf()]);
    }
    let dir = name
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base = name
        .file_name()
        .ok_or_else(|| TraceError::NotAName(name.to_path_buf()))?
        .to_string_lossy()
        .into_owned();
    let prefix = format!("{base}.blktrace.");
    let entries = std::fs::read_dir(dir).map_err(|e| TraceError::io(dir, e))?;
    let mut numbered = Vec::new();
    for e in entries.flatten() {
        let fname = e.file_name().to_string_lossy().into_owned();
        if let Some(n) = fname
            .strip_prefix(&prefix)
            .and_then(|n| n.parse::<u32>().ok())
        {
            numbered.push((n, e.path()));
        }
    }
    if numbered.is_empty() {
        return Err(TraceError::NoFiles {
            name: name.to_path_buf(),
            prefix,
            dir: dir.to_path_buf(),
        });
    }
    numbered.sort();
    Ok(numbered.into_iter().map(|(_, p)| p).collect())
}

impl TraceSet {
    /// Reads the trace `name` (see [`files_of`]). One-line errors name the file and offset.
    pub fn open(name: &Path) -> Result<TraceSet, TraceError> {
        TraceSet::open_all(&[name])
    }

    /// Reads several traces as one, merged by time, as `blkparse -i A -i B` does.
    pub fn open_all<P: AsRef<Path>>(names: &[P]) -> Result<TraceSet, TraceError> {
        let mut files = Vec::new();
        for n in names {
            files.extend(files_of(n.as_ref())?);
        }
        let mut per_file = Vec::new();
        for f in &files {
            let bytes = std::fs::read(f).map_err(|e| TraceError::io(f, e))?;
            per_file.push(decode_all(&f.display().to_string(), &bytes)?);
        }
        Ok(TraceSet {
            records: merge(per_file),
            files,
        })
    }

    /// A trace held in memory (a program's embedded copy): each per-CPU file's name and
    /// bytes, merged by time as [`Self::open_all`] merges files.
    pub fn from_bytes(files: &[(&str, &[u8])]) -> Result<TraceSet, TraceError> {
        let mut per_file = Vec::new();
        for (name, bytes) in files {
            per_file.push(decode_all(name, bytes)?);
        }
        Ok(TraceSet {
            records: merge(per_file),
            files: files.iter().map(|(n, _)| PathBuf::from(n)).collect(),
        })
    }

    /// The queue (`Q`) events: what the applications submitted, the events a replay uses.
    pub fn queued(&self) -> impl Iterator<Item = &Record> {
        self.of(ta::QUEUE)
    }

    /// The completion (`C`) events: with the `Q` events, the original latencies.
    pub fn completed(&self) -> impl Iterator<Item = &Record> {
        self.of(ta::COMPLETE)
    }

    /// The events of one `__BLK_TA_*` action, in time order.
    pub fn of(&self, what: u32) -> impl Iterator<Item = &Record> {
        self.records
            .iter()
            .filter(move |r| !r.is_notify() && r.what() == what)
    }

    /// Per-action counts, by blkparse letter (notify records not counted).
    pub fn counts(&self) -> crate::Counts {
        let mut c = crate::Counts::new();
        for r in self.records.iter().filter(|r| !r.is_notify()) {
            *c.entry(r.letter()).or_insert(0) += 1;
        }
        c
    }

    /// Every event as blkparse prints it by default, in order (times from the first event,
    /// as blkparse counts them).
    pub fn blkparse_lines(&self) -> impl Iterator<Item = String> + '_ {
        let names = self.process_names();
        let genesis = self
            .records
            .iter()
            .filter(|r| !r.is_notify())
            .map(|r| r.time)
            .min()
            .unwrap_or(0);
        self.records
            .iter()
            .filter_map(move |r| r.blkparse_line(names.get(&r.pid).map(String::as_str), genesis))
    }

    /// The process names the trace's notify records give, by pid: the first one wins, as in
    /// blkparse's `add_ppm_hash` (the kernel writes one per task per trace anyway).
    pub fn process_names(&self) -> BTreeMap<u32, String> {
        let mut names = BTreeMap::new();
        for r in self
            .records
            .iter()
            .filter(|r| r.is_notify() && r.what() == tn::PROCESS)
        {
            if let Some(comm) = r.comm() {
                names.entry(r.pid).or_insert(comm);
            }
        }
        names
    }
}

/// Merges per-file record lists, each in time order, into one: by time, then device, then
/// sequence number, as blkparse's `trace_rb_insert` orders events (two CPUs' events at the
/// same nanosecond come out by their per-CPU sequence), then by file and place in it.
fn merge(per_file: Vec<Vec<Record>>) -> Vec<Record> {
    let mut all: Vec<(usize, usize, Record)> = per_file
        .into_iter()
        .enumerate()
        .flat_map(|(fi, recs)| recs.into_iter().enumerate().map(move |(i, r)| (fi, i, r)))
        .collect();
    all.sort_by_key(|(fi, i, r)| (r.time, r.device, r.sequence, *fi, *i));
    all.into_iter().map(|x| x.2).collect()
}
