//! A trace as blktrace leaves it: `NAME.blktrace.0`, `NAME.blktrace.1`, ... (one per CPU),
//! each time-ordered on its own, merged here into one time-ordered stream.

use crate::format::{decode_all, ta, tn, Record};
use crate::TraceError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The records of every per-CPU file of one or more traces, merged by time as blkparse merges
/// them (see `merge`: at equal times the file already giving events goes on).
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

/// Merges per-file record lists into one, as blkparse merges its input files
/// (`do_file`: one stream per per-CPU file, `ms_sort`, `ms_resort`): the streams are kept
/// ordered by the time of their next event; the first stream gives its next event and stays
/// first unless that stream's following event is later (strictly) than the second stream's;
/// a stream that has to move goes behind every stream whose next event is at the same time
/// or earlier, as does each new stream, in file order. So events at the same time come out
/// by which file got there first, not by CPU or sequence; a file's own events keep their
/// order in it. Notify records are not events to blkparse (it handles them as it reads);
/// here they come out just before the event that follows them in their file, those after a
/// file's last event when the file ends.
fn merge(per_file: Vec<Vec<Record>>) -> Vec<Record> {
    // Each file's records, and where its next event (non-notify record) is.
    struct Stream {
        recs: std::vec::IntoIter<Record>,
        pending: Vec<Record>,
        head: Option<Record>,
    }
    impl Stream {
        /// Moves the notify records before the next event to `pending` and that event to
        /// `head` (none at the file's end).
        fn prime(&mut self) {
            self.head = None;
            for r in self.recs.by_ref() {
                if r.is_notify() {
                    self.pending.push(r);
                } else {
                    self.head = Some(r);
                    break;
                }
            }
        }
        fn time(&self) -> u64 {
            self.head.as_ref().map_or(u64::MAX, |r| r.time)
        }
    }
    let total = per_file.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total);
    let mut streams: Vec<Stream> = per_file
        .into_iter()
        .map(|recs| Stream {
            recs: recs.into_iter(),
            pending: Vec::new(),
            head: None,
        })
        .collect();
    // `ms_sort`: behind every listed stream whose next event is no later.
    let insert = |order: &mut Vec<usize>, streams: &[Stream], s: usize| {
        let t = streams[s].time();
        let at = order.partition_point(|&o| streams[o].time() <= t);
        order.insert(at, s);
    };
    let mut order: Vec<usize> = Vec::with_capacity(streams.len());
    for s in 0..streams.len() {
        streams[s].prime();
        if streams[s].head.is_some() {
            insert(&mut order, &streams, s);
        } else {
            out.append(&mut streams[s].pending);
        }
    }
    while let Some(&s) = order.first() {
        let st = &mut streams[s];
        out.append(&mut st.pending);
        out.extend(st.head.take());
        st.prime();
        if st.head.is_none() {
            out.append(&mut st.pending);
            order.remove(0);
        } else if order.len() > 1 && streams[s].time() > streams[order[1]].time() {
            // `ms_resort`
            order.remove(0);
            insert(&mut order, &streams, s);
        }
    }
    out
}
