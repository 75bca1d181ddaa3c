//! `TraceWriter`: the core's request events written as blktrace files, one per submitter
//! (software queue) as blktrace writes one per CPU, so `blkparse -i NAME` and `btt` read them.

use crate::format::{mkdev, ta, tc, Record};
use crate::TraceError;
use mqblk_core::{BlkStatus, ReqFlags, ReqOp, TraceAction, TraceEvent, Tracer};
use parking_lot::Mutex;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The device number our records carry (blkparse prints it as `252,0`).
pub const DEVICE: u32 = mkdev(252, 0);

/// Per-action counts of what was written, by blkparse letter.
pub type Counts = BTreeMap<char, u64>;

struct Out {
    file: BufWriter<File>,
    sequence: u32,
}

struct State {
    files: BTreeMap<u16, Out>,
    t0: Option<u64>,
    pids: BTreeSet<u32>,
    counts: Counts,
    buf: Vec<u8>,
    /// The first write that failed; nothing more is written after it.
    error: Option<TraceError>,
}

/// Writes `NAME.blktrace.N` files for the events it is given. Errors (a full disk) are kept
/// and reported by [`TraceWriter::finish`]; tracing never fails the I/O it records.
pub struct TraceWriter {
    base: PathBuf,
    st: Mutex<State>,
}

impl TraceWriter {
    /// Traces go to `NAME.blktrace.N` next to `base` (`base` = `dir/NAME`).
    pub fn new(base: &Path) -> TraceWriter {
        TraceWriter {
            base: base.to_path_buf(),
            st: Mutex::new(State {
                files: BTreeMap::new(),
                t0: None,
                pids: BTreeSet::new(),
                counts: Counts::new(),
                buf: Vec::with_capacity(256),
                error: None,
            }),
        }
    }

    /// The file of submitter `n`.
    pub fn file_of(&self, n: u16) -> PathBuf {
        let name = self
            .base
            .file_name()
            .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
        self.base.with_file_name(format!("{name}.blktrace.{n}"))
    }

    /// Writes one record as it is (its time already relative to the trace's start) to file
    /// `n`, numbering it in that file's sequence. Notify records are not counted.
    pub fn record(&self, n: u16, rec: Record) {
        self.put(&mut self.st.lock(), n, rec);
    }

    fn put(&self, st: &mut State, n: u16, rec: Record) {
        if st.error.is_some() {
            return;
        }
        let letter = (!rec.is_notify()).then(|| rec.letter());
        if let Err(e) = self.write(st, n, rec) {
            st.error = Some(TraceError::io(&self.file_of(n), e));
            return;
        }
        if let Some(l) = letter {
            *st.counts.entry(l).or_insert(0) += 1;
        }
    }

    /// The files of the trace: `NAME.blktrace.0` up to the highest written.
    pub fn files(&self) -> Vec<PathBuf> {
        let last = self
            .st
            .lock()
            .files
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0);
        (0..=last).map(|n| self.file_of(n)).collect()
    }

    /// Flushes every file; returns the per-action counts written, or the first error.
    pub fn finish(&self) -> Result<Counts, TraceError> {
        let mut st = self.st.lock();
        // blkparse stops at the first missing NAME.blktrace.N: give every file number below
        // the highest one a file, empty if it saw nothing (and a trace without events its
        // empty file 0).
        let last = st.files.keys().next_back().copied().unwrap_or(0);
        for n in 0..=last {
            if !st.files.contains_key(&n) {
                let path = self.file_of(n);
                if let Err(e) = File::create(&path) {
                    st.error.get_or_insert(TraceError::io(&path, e));
                }
            }
        }
        let mut failed = None;
        for (&n, out) in st.files.iter_mut() {
            if let Err(e) = out.file.flush() {
                failed = Some(TraceError::io(&self.file_of(n), e));
                break;
            }
        }
        if let Some(e) = failed {
            st.error.get_or_insert(e);
        }
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(st.counts.clone()),
        }
    }

    fn write(&self, st: &mut State, cpu: u16, mut rec: Record) -> io::Result<()> {
        let out = match st.files.entry(cpu) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(slot) => {
                let path = self.file_of(cpu);
                let f = File::create(&path)?;
                slot.insert(Out {
                    file: BufWriter::with_capacity(1 << 16, f),
                    sequence: 0,
                })
            }
        };
        out.sequence += 1;
        rec.sequence = out.sequence;
        st.buf.clear();
        rec.encode(&mut st.buf);
        out.file.write_all(&st.buf)
    }
}

/// The category bits of an operation (`__blk_add_trace`'s `ddir_act` and flag masks).
pub fn categories(op: ReqOp, flags: ReqFlags) -> u32 {
    let mut c = if op.is_write() { tc::WRITE } else { tc::READ };
    match op {
        ReqOp::Discard => c |= tc::DISCARD,
        ReqOp::Flush => c |= tc::FLUSH,
        _ => {}
    }
    if flags.contains(ReqFlags::PREFLUSH) {
        c |= tc::FLUSH;
    }
    if flags.contains(ReqFlags::FUA) {
        c |= tc::FUA;
    }
    if flags.contains(ReqFlags::SYNC) {
        c |= tc::SYNC;
    }
    if flags.contains(ReqFlags::META) {
        c |= tc::META;
    }
    tc::act(c)
}

/// The errno a completion status stands for (`blk_status_to_errno`, made positive).
pub fn errno_of(s: BlkStatus) -> u16 {
    s.to_errno().unsigned_abs() as u16
}

impl Tracer for TraceWriter {
    fn event(&self, ev: &TraceEvent) {
        let (what, cat) = match ev.action {
            TraceAction::Queue => (ta::QUEUE, tc::QUEUE),
            TraceAction::BackMerge => (ta::BACKMERGE, tc::QUEUE),
            TraceAction::FrontMerge => (ta::FRONTMERGE, tc::QUEUE),
            TraceAction::GetRq => (ta::GETRQ, tc::QUEUE),
            TraceAction::Insert => (ta::INSERT, tc::QUEUE),
            TraceAction::Issue => (ta::ISSUE, tc::ISSUE),
            TraceAction::Complete => (ta::COMPLETE, tc::COMPLETE),
            TraceAction::Requeue => (ta::REQUEUE, tc::REQUEUE),
            TraceAction::Run => return,
        };
        let mut st = self.st.lock();
        if st.error.is_some() {
            return;
        }
        let t0 = *st.t0.get_or_insert(ev.time.0);
        let cpu = ev.ctx.0;
        let pid = ev.issuer;
        let time = ev.time.0.saturating_sub(t0);
        if st.pids.insert(pid) {
            // Name the process so blkparse shows `[mqblk-N]`.
            let note = Record::process_name(pid, &format!("mqblk-{pid}"), DEVICE, cpu.into(), time);
            self.put(&mut st, cpu, note);
        }
        let rec = Record {
            time,
            sector: ev.sector,
            bytes: ev.nr_sectors * 512,
            action: what | tc::act(cat) | categories(ev.op, ev.flags),
            pid,
            device: DEVICE,
            cpu: cpu.into(),
            error: if ev.action == TraceAction::Complete {
                errno_of(ev.status)
            } else {
                0
            },
            ..Record::empty()
        };
        self.put(&mut st, cpu, rec);
    }
}

/// `Q=10 G=10 ...`: counts in blkparse's letters, in a fixed order.
pub fn summary(c: &Counts) -> String {
    c.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
