//! A trace as blktrace leaves it: `NAME.blktrace.0`, `NAME.blktrace.1`, ... (one per CPU),
//! each time-ordered on its own, merged here into one time-ordered stream.

use crate::format::{decode_all, ta, Record};
use std::path::{Path, PathBuf};

/// The records of every per-CPU file of one trace, merged by time (ties by CPU, then by
/// each file's own order).
#[derive(Debug, Default)]
pub struct TraceSet {
    pub records: Vec<Record>,
    pub files: Vec<PathBuf>,
}

impl TraceSet {
    /// Reads `NAME.blktrace.N` for every N present, given `NAME` (with its directory), or a
    /// single file given its own path. One-line errors name the file and offset.
    pub fn open(name: &Path) -> Result<TraceSet, String> {
        let mut files = Vec::new();
        if name.is_file() {
            files.push(name.to_path_buf());
        } else {
            let dir = name
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let base = name
                .file_name()
                .ok_or_else(|| format!("{}: not a trace name", name.display()))?
                .to_string_lossy()
                .into_owned();
            let prefix = format!("{base}.blktrace.");
            let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
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
            numbered.sort();
            files.extend(numbered.into_iter().map(|(_, p)| p));
            if files.is_empty() {
                return Err(format!(
                    "{}: no trace files ({prefix}N) in {}",
                    name.display(),
                    dir.display()
                ));
            }
        }
        let mut per_file = Vec::new();
        for f in &files {
            let bytes = std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
            let recs = decode_all(&f.display().to_string(), &bytes).map_err(|e| e.to_string())?;
            per_file.push(recs);
        }
        let mut records: Vec<(u64, usize, usize, Record)> = per_file
            .into_iter()
            .enumerate()
            .flat_map(|(fi, recs)| {
                recs.into_iter()
                    .enumerate()
                    .map(move |(i, r)| (r.time, fi, i, r))
            })
            .collect();
        records.sort_by_key(|(t, fi, i, _)| (*t, *fi, *i));
        Ok(TraceSet {
            records: records.into_iter().map(|x| x.3).collect(),
            files,
        })
    }

    /// The queue (`Q`) events: what the applications submitted, the events a replay uses.
    pub fn queued(&self) -> impl Iterator<Item = &Record> {
        self.records
            .iter()
            .filter(|r| !r.is_notify() && r.what() == ta::QUEUE)
    }

    /// Per-action counts, by blkparse letter (notify records not counted).
    pub fn counts(&self) -> crate::Counts {
        let mut c = crate::Counts::new();
        for r in self.records.iter().filter(|r| !r.is_notify()) {
            *c.entry(r.letter()).or_insert(0) += 1;
        }
        c
    }

    /// The process names the trace's notify records give, by pid.
    pub fn process_names(&self) -> std::collections::BTreeMap<u32, String> {
        self.records
            .iter()
            .filter(|r| r.is_notify() && r.what() == crate::format::tn::PROCESS)
            .map(|r| {
                let end = r.pdu.iter().position(|&b| b == 0).unwrap_or(r.pdu.len());
                (r.pid, String::from_utf8_lossy(&r.pdu[..end]).into_owned())
            })
            .collect()
    }
}
