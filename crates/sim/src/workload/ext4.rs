//! dbench's clients on ext4 and the journal thread that commits for them (jbd2), as
//! measured: the stream one client's loadfile gives the block layer, derived from a capture
//! made here, and the journal the clients share.
//!
//! dbench on ext4 here (`testdata/traces/dbench1-ext4`, `bash scripts/capture-corpus.sh
//! testdata/traces dbench1-ext4`: one client for two seconds on a fresh 2 GiB ext4 over a
//! loop device with direct I/O) reads nothing from the device; each of its `fsync`s writes
//! the file's dirty data itself (`WS`) and then either waits for jbd2 to commit the
//! transaction holding the inode (`ext4_sync_file` -> `jbd2_complete_transaction`: jbd2
//! writes the transaction's metadata blocks into the log under one plug, `WSM`, then,
//! once they are done, the commit record with PREFLUSH and FUA, `FWFSM`), or, when the
//! inode has nothing in an uncommitted transaction, flushes the cache itself (`FWS`:
//! `needs_barrier`, `blkdev_issue_flush`). Its `fsync`s repeat with dbench's period of 43.
//!
//! [`Ext4DbenchClient`] plays the loadfile and [`Jbd2`] is the journal thread, a job of its
//! own, as the kernel's is a task of its own with its own I/O priority (the no-merging-on-flash mail's "journaling
//! daemon enjoying a higher weight"). They meet in an [`Ext4Journal`]: a client's metadata
//! joins the running transaction when it issues its data write; its `fsync` asks for that
//! transaction's commit and sleeps until it is done; jbd2 takes the running transaction
//! (a new one starts), waits for its members' data writes (data=ordered:
//! `journal_finish_inode_data_buffers`), writes its blocks and then its commit record, and
//! wakes whoever waits. A client whose transaction is already committing waits for that
//! commit; one that asks meanwhile for the next transaction gets the next commit, which
//! starts as soon as the current one ends. So several clients' `fsync`s share a commit,
//! as jbd2's do.
//!
//! Not modelled: jbd2's periodic commit (`JBD2_DEFAULT_MAX_COMMIT_AGE`, 5 s, longer than
//! these runs), the extra flush an `fsync` issues when its transaction's commit record was
//! already on its way (`jbd2_trans_will_send_data_barrier`), checkpointing, and log space:
//! the log wraps. A transaction's blocks are those of its largest `fsync` alone, and of each
//! further one all but [`SHARED_BLOCKS`], at least one (its inode's table block). How many
//! blocks `fsync`s share is not in a capture (the trace shows log positions, not which
//! metadata each log block copies): three is our assumption, not a measurement, and with
//! the capture's blocks per `fsync` (6.6 on average) and the six-client capture's 2.7 data
//! writes a commit it makes 12.6 blocks, where that capture wrote 13.1.

use super::loadfile::{commonest, jitter, median, period, FileWrite, Spreads};
use super::{Gate, IoReq, Next, Source};
use crate::replay::{Replayable, TracedIo};
use crate::SimRng;
use mqblk_core::{Nanos, ReqFlags, ReqOp};
use mqblk_trace::TraceSet;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

/// dbench, one client, two seconds, on ext4 here (`scripts/capture-corpus.sh`,
/// `dbench1-ext4`).
const DBENCH1_EXT4_TRACE: [(&str, &[u8]); 2] = [
    (
        "dbench1-ext4.blktrace.0",
        include_bytes!("../../../../testdata/traces/dbench1-ext4.blktrace.0"),
    ),
    (
        "dbench1-ext4.blktrace.1",
        include_bytes!("../../../../testdata/traces/dbench1-ext4.blktrace.1"),
    ),
];

/// The same loadfile captured where BFQ's no-merging-on-flash patch's kernel twin runs dbench
/// (`scripts/guest-seed004.sh`): Debian's 6.1 in a QEMU guest under TCG, one client for 30
/// s on a 1 GiB ext4 over scsi_debug (every command 100 us, 32 tags, non-rotational;
/// `scripts/guest-dbench-capture.sh --fs=ext4 --rotational=0 --delay-us=100 --tags=32
/// --runtime=30`).
const DBENCH1_EXT4_TCG_TRACE: [(&str, &[u8]); 2] = [
    (
        "dbench1-ext4-tcg.blktrace.0",
        include_bytes!("../../../../testdata/traces/dbench1-ext4-tcg.blktrace.0"),
    ),
    (
        "dbench1-ext4-tcg.blktrace.1",
        include_bytes!("../../../../testdata/traces/dbench1-ext4-tcg.blktrace.1"),
    ),
];

/// An ext4 block group: 32768 blocks of 4 KiB, in sectors.
const GROUP_SECTORS: u64 = 262_144;
/// Clients' files lie this far apart: with six clients the first files of the six were
/// allocated 256 sectors apart, one after another (`testdata/traces/dbench6`).
const CLIENT_SPACING: u64 = 256;
/// One journal block, in sectors.
const BLOCK: u32 = 8;

/// The journal of an ext4 file system of `fs_sectors`: where mke2fs puts it
/// (`get_midpoint_journal_block`: the group in the middle, at the start of its flex group of
/// 16 past the first 16) and how long (`ext2fs_default_journal_size`), in sectors.
pub fn journal_area(fs_sectors: u64) -> (u64, u64) {
    let blocks = fs_sectors / BLOCK as u64;
    let journal_blocks: u64 = match blocks {
        b if b < 32_768 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 4096 * 1024 => 16_384,
        b if b < 8192 * 1024 => 32_768,
        b if b < 16_384 * 1024 => 65_536,
        b if b < 32_768 * 1024 => 131_072,
        _ => 262_144,
    };
    let mut group = fs_sectors / 2 / GROUP_SECTORS;
    if group > 16 {
        group &= !15;
    }
    let len = journal_blocks * BLOCK as u64;
    let start = (group * GROUP_SECTORS).min(fs_sectors.saturating_sub(len));
    (start, len)
}

/// One `fsync` of the loadfile: the client's work before its data write, the write, and
/// how the `fsync` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ext4Step {
    pub write: FileWrite,
    pub sectors: u32,
    /// The `fsync` waited for a commit (else the client flushed the cache itself).
    pub commits: bool,
    /// For a new file: where the capture's client wrote it, in sectors.
    pub sector: u64,
    pub think_ns: u64,
    /// For a flush: the client's work between its write's completion and the flush.
    pub sync_think_ns: u64,
    /// The log blocks (4 KiB) the commit of this `fsync` alone wrote before its record.
    pub blocks: u32,
}

/// dbench's loadfile as ext4 turns it into block I/O, one client's, with jbd2's timing.
#[derive(Clone, Debug)]
pub struct Ext4Loadfile {
    pub steps: Vec<Ext4Step>,
    /// `fsync`s in the capture, the share of them that waited for a commit, and the share
    /// of its steps that repeat at the period.
    pub fsyncs: usize,
    pub committed: f64,
    pub repeat: f64,
    /// How far a think time strays from its step's median: uniformly within this fraction
    /// either way, which puts the 90th percentile where the capture's median step's is.
    pub think_spread: f64,
    /// jbd2's time from the data write that asked for a commit completing to its first log
    /// block queued (the client's `fsync` path and jbd2's wake-up), and from its log
    /// blocks' completion to the commit record queued; medians.
    pub jbd2_start_ns: u64,
    pub jbd2_record_ns: u64,
    /// The longest time since its file's last change at which a step of the capture
    /// flushed instead of committing. ext4 changes an inode's times on a write only once
    /// the clock has moved on (coarse timestamps), and an `fsync` after such a change has a
    /// transaction to wait for; the capture's client wrote its files again within this
    /// time. A flushing step further apart from its file's last change commits instead.
    pub flush_window_ns: u64,
}

impl Ext4Loadfile {
    /// The loadfile from the embedded one-client capture made on this machine (derived
    /// once).
    pub fn measured() -> &'static Ext4Loadfile {
        static LOADFILE: OnceLock<Ext4Loadfile> = OnceLock::new();
        LOADFILE.get_or_init(|| Self::embedded(&DBENCH1_EXT4_TRACE))
    }

    /// The loadfile as BFQ's no-merging-on-flash patch's kernel twin runs it, in its guest under TCG (derived
    /// once): the client's and jbd2's own times are the emulated CPUs'.
    pub fn measured_in_guest() -> &'static Ext4Loadfile {
        static LOADFILE: OnceLock<Ext4Loadfile> = OnceLock::new();
        LOADFILE.get_or_init(|| Self::embedded(&DBENCH1_EXT4_TCG_TRACE))
    }

    fn embedded(trace: &[(&str, &[u8])]) -> Ext4Loadfile {
        let set = TraceSet::from_bytes(trace).expect("an embedded dbench capture parses");
        Ext4Loadfile::from_trace(&set).expect("an embedded dbench capture has a loadfile")
    }

    /// The loadfile of a capture of one dbench client on ext4: its `fsync`s in order (the
    /// data write, then jbd2's commit or the client's flush), the period they repeat with,
    /// and each step of the period as the medians of its repetitions. The think times are
    /// the replay's (`Wait::think_ns`): from the completion that woke the process.
    pub fn from_trace(set: &TraceSet) -> Result<Ext4Loadfile, super::LoadfileError> {
        let r = Replayable::from_trace(set);
        let client = r
            .busiest(|n| n == "dbench")
            .ok_or(super::LoadfileError::MissingProcess("dbench"))?;
        let jbd2 = r
            .busiest(|n| n.starts_with("jbd2/"))
            .ok_or(super::LoadfileError::MissingProcess("jbd2"))?;
        // Both processes' I/Os in the order they were queued.
        let mut ios: Vec<(bool, &TracedIo)> = client
            .ios
            .iter()
            .map(|io| (true, io))
            .chain(jbd2.ios.iter().map(|io| (false, io)))
            .collect();
        ios.sort_by_key(|(_, io)| io.at);
        struct Raw {
            sector: u64,
            sectors: u32,
            write: FileWrite,
            at: u64,
            think: u64,
            commits: Option<bool>,
            sync_think: u64,
            blocks: u32,
        }
        let (mut raw, mut starts, mut records) = (Vec::<Raw>::new(), Vec::new(), Vec::new());
        let mut last = None;
        for (from_client, io) in ios {
            let req = io.io;
            let durable = req.op == ReqOp::Flush || req.flags.contains(ReqFlags::FUA);
            let open = raw.last_mut().filter(|w| w.commits.is_none());
            match (from_client, req.op, durable) {
                (true, ReqOp::Write, false) if req.nr_sectors > 0 => {
                    // A write with no `fsync` of its own after it is not a step.
                    if open.is_some() {
                        raw.pop();
                    }
                    let write = FileWrite::after(last, req.sector);
                    last = Some((req.sector, req.nr_sectors));
                    raw.push(Raw {
                        sector: req.sector,
                        sectors: req.nr_sectors,
                        write,
                        at: io.at,
                        think: io.wait.think_ns,
                        commits: None,
                        sync_think: 0,
                        blocks: 0,
                    });
                }
                (true, ReqOp::Flush, _) => {
                    if let Some(w) = open {
                        w.commits = Some(false);
                        w.sync_think = io.wait.think_ns;
                    }
                }
                (false, ReqOp::Write, false) => {
                    if let Some(w) = open {
                        if w.blocks == 0 {
                            starts.push(io.wait.think_ns);
                        }
                        w.blocks += req.nr_sectors.div_ceil(BLOCK);
                    }
                }
                (false, ReqOp::Write, true) => {
                    if let Some(w) = open.filter(|w| w.blocks > 0) {
                        w.commits = Some(true);
                        records.push(io.wait.think_ns);
                    }
                }
                _ => {}
            }
        }
        raw.retain(|w| w.commits.is_some());
        // The longest a flushing step came after its file's last change (a committing step
        // writing the same file).
        let mut flush_window_ns = 0;
        let mut changed: Option<(u64, u64)> = None; // (file's first sector, when)
        let mut file = 0;
        for w in &raw {
            if w.write == FileWrite::New {
                file = w.sector;
            }
            match (w.commits, changed) {
                (Some(false), Some((f, at))) if f == file => {
                    flush_window_ns = flush_window_ns.max(w.at - at);
                }
                (Some(true), _) => changed = Some((file, w.at)),
                _ => {}
            }
        }
        // The period is found from what each step writes and how its `fsync` ends; where a
        // new file lands next to the last one (`FileWrite::Next` instead of `New`) is the
        // allocator's doing and varies more (in the guest's capture 12% of steps differ
        // from the step a period on in that alone), so each step takes its commonest.
        let symbols: Vec<_> = raw.iter().map(|w| (w.sectors, w.commits)).collect();
        let period = period(&symbols).ok_or(super::LoadfileError::NoPeriod(raw.len()))?;
        let mut spreads = Spreads::default();
        let steps = (0..period.0)
            .map(|ph| {
                let reps: Vec<&Raw> = raw.iter().skip(ph).step_by(period.0).collect();
                let (write, sectors, commits) =
                    commonest(reps.iter().map(|w| (w.write, w.sectors, w.commits)))
                        .expect("a step has repetitions");
                let commits = commits == Some(true);
                let sector = if write == FileWrite::New {
                    commonest(reps.iter().map(|w| w.sector)).expect("a step has repetitions")
                } else {
                    0
                };
                Ext4Step {
                    write,
                    sectors,
                    commits,
                    sector,
                    think_ns: spreads.median_of(reps.iter().map(|w| w.think).collect()),
                    sync_think_ns: median(reps.iter().map(|w| w.sync_think).collect()),
                    blocks: if commits {
                        median(
                            reps.iter()
                                .filter(|w| w.commits == Some(true))
                                .map(|w| u64::from(w.blocks))
                                .collect(),
                        ) as u32
                    } else {
                        0
                    },
                }
            })
            .collect();
        let committed = raw.iter().filter(|w| w.commits == Some(true)).count();
        Ok(Ext4Loadfile {
            steps,
            fsyncs: raw.len(),
            committed: committed as f64 / raw.len().max(1) as f64,
            repeat: period.1,
            think_spread: spreads.spread(),
            jbd2_start_ns: median(starts),
            jbd2_record_ns: median(records),
            flush_window_ns,
        })
    }
}

/// The journal of one file system, shared by its clients and its jbd2: the running
/// transaction, the commits asked for and done, and what they wrote.
pub struct Ext4Journal {
    st: Mutex<JournalState>,
    /// The newest transaction whose commit a client asked for (`j_commit_request`).
    asked: Arc<Gate>,
    /// The newest transaction committed (`j_commit_sequence`).
    committed: Arc<Gate>,
    /// The newest closed transaction whose members' data writes are all done.
    data_done: Arc<Gate>,
    /// The log's place on the device, (start, sectors).
    log: (u64, u64),
    /// The loadfile its clients play and whose jbd2 timing its jbd2 keeps.
    loadfile: &'static Ext4Loadfile,
}

#[derive(Default)]
struct JournalState {
    /// The running transaction's id (`j_running_transaction->t_tid`), from 1.
    running: u64,
    /// The most blocks one of its members (`fsync`s waiting for it) wrote alone, and the
    /// members' own blocks beside the shared ones ([`own_blocks`]).
    max_blocks: u32,
    own_blocks: u32,
    /// Data writes in flight, by transaction.
    data_inflight: BTreeMap<u64, u32>,
    head: u64,
    commits: u64,
    fsyncs: u64,
    flushes: u64,
    blocks: u64,
}

/// What a journal's run did: commits, the `fsync`s that asked for them and the ones that
/// flushed instead, and the log blocks written (commit records not counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalCounts {
    pub commits: u64,
    pub fsyncs: u64,
    pub flushes: u64,
    pub blocks: u64,
}

impl Ext4Journal {
    /// The journal of an ext4 file system spanning `fs_sectors` of the device, whose
    /// clients play [`Ext4Loadfile::measured`].
    pub fn new(fs_sectors: u64) -> Arc<Ext4Journal> {
        Self::with_loadfile(fs_sectors, Ext4Loadfile::measured())
    }

    /// The same with the clients playing `loadfile` (e.g.
    /// [`Ext4Loadfile::measured_in_guest`]).
    pub fn with_loadfile(fs_sectors: u64, loadfile: &'static Ext4Loadfile) -> Arc<Ext4Journal> {
        Arc::new(Ext4Journal {
            loadfile,
            st: Mutex::new(JournalState {
                running: 1,
                ..JournalState::default()
            }),
            asked: Gate::new(),
            committed: Gate::new(),
            data_done: Gate::new(),
            log: journal_area(fs_sectors),
        })
    }

    pub fn counts(&self) -> JournalCounts {
        let st = self.state();
        JournalCounts {
            commits: st.commits,
            fsyncs: st.fsyncs,
            flushes: st.flushes,
            blocks: st.blocks,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, JournalState> {
        // The simulator runs one job at a time; a poisoned lock means a panic elsewhere,
        // and the state it guards is still whole.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client's metadata joins the running transaction as it issues its data write;
    /// returns the transaction.
    fn join(&self, blocks: u32) -> u64 {
        let mut st = self.state();
        st.own_blocks += own_blocks(blocks);
        st.max_blocks = st.max_blocks.max(blocks);
        let tid = st.running;
        *st.data_inflight.entry(tid).or_default() += 1;
        tid
    }

    /// A member's data write of `tid` completed: the client asks for its commit.
    fn written(&self, tid: u64) {
        let mut st = self.state();
        st.fsyncs += 1;
        let left = st.data_inflight.get_mut(&tid).map(|n| {
            *n -= 1;
            *n
        });
        if left == Some(0) {
            st.data_inflight.remove(&tid);
            if tid < st.running {
                self.data_done.raise_to(tid);
            }
        }
        self.asked.raise_to(tid);
    }

    /// jbd2 takes the running transaction for its commit (`jbd2_journal_commit_transaction`
    /// switches to a new one): its id and its blocks.
    fn close(&self) -> (u64, u32) {
        let mut st = self.state();
        let tid = st.running;
        // The largest member's blocks, and the others' own.
        let blocks = (st.max_blocks + st.own_blocks)
            .saturating_sub(own_blocks(st.max_blocks))
            .max(1);
        st.running += 1;
        st.own_blocks = 0;
        st.max_blocks = 0;
        if !st.data_inflight.contains_key(&tid) {
            self.data_done.raise_to(tid);
        }
        (tid, blocks)
    }

    /// Where the next `sectors` of log go (the log wraps).
    fn append(&self, sectors: u32) -> u64 {
        let mut st = self.state();
        let at = st.head % (self.log.1 - sectors as u64).max(1);
        st.head = at + sectors as u64;
        self.log.0 + at
    }
}

/// The log blocks the `fsync`s of one transaction share, taken as the descriptor block and
/// the two allocation blocks of one block group a write touches (the block bitmap, the
/// group descriptor). An assumption, not measured: some commits of the one-client capture
/// wrote two blocks in all, so not every commit holds all three.
const SHARED_BLOCKS: u32 = 3;

/// Of an `fsync`'s `blocks` alone, those another's commit does not write anyway: at least
/// its inode's table block.
fn own_blocks(blocks: u32) -> u32 {
    blocks.saturating_sub(SHARED_BLOCKS).max(1)
}

/// A dbench client on ext4, playing [`Ext4Loadfile::measured`] from its first step (dbench's
/// clients start together): its work, its data write (its metadata joining the running
/// transaction), then the `fsync`'s wait for that transaction's commit, or its flush.
///
/// Client `i`'s new files lie `i` x 256 sectors past the capture's. Its job's `iodepth` must
/// be 1, as a dbench client's is (the source is asked again only once its I/O has
/// completed), and it should stop at a time, with its jbd2: one stopped by an I/O count
/// between its data write and its `fsync` leaves the transaction it joined waiting for its
/// data, and jbd2 asleep until the run's end.
pub struct Ext4DbenchClient {
    /// Its journal, which also holds the loadfile it plays.
    journal: Arc<Ext4Journal>,
    capacity: u64,
    client: u64,
    step: usize,
    phase: Phase,
    /// The client's last data write (sector, sectors).
    last: (u64, u32),
    /// The transaction holding this `fsync`'s metadata, if it commits.
    tid: Option<u64>,
    /// When the client's file last changed (its last committing step's write).
    changed_at: Option<Nanos>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The client's own work before its data write.
    Work,
    /// The data write.
    Write,
    /// The write completed: ask for the commit, or work before the flush.
    Written,
    /// The flush.
    Flush,
}

impl Ext4DbenchClient {
    /// Client `i` of a file system spanning `capacity` sectors, sharing `journal`.
    pub fn new(client: u64, capacity: u64, journal: Arc<Ext4Journal>) -> Ext4DbenchClient {
        Ext4DbenchClient {
            journal,
            capacity,
            client,
            step: 0,
            phase: Phase::Work,
            last: (0, 0),
            tid: None,
            changed_at: None,
        }
    }
}

impl Source for Ext4DbenchClient {
    fn next(&mut self, now: Nanos, rng: &mut SimRng) -> Next {
        let lf = self.journal.loadfile;
        let st = lf.steps[self.step];
        match self.phase {
            Phase::Work => {
                self.phase = Phase::Write;
                Next::Compute(jitter(st.think_ns, lf.think_spread, rng))
            }
            Phase::Write => {
                self.phase = Phase::Written;
                let sector = match st.write {
                    FileWrite::Same => self.last.0,
                    FileWrite::Next => self.last.0 + self.last.1 as u64,
                    FileWrite::New => st.sector + self.client * CLIENT_SPACING,
                };
                let sector = sector.min(self.capacity.saturating_sub(st.sectors as u64));
                self.last = (sector, st.sectors);
                let stale = self
                    .changed_at
                    .is_none_or(|at| now.0.saturating_sub(at.0) > lf.flush_window_ns);
                self.tid = (st.commits || stale).then(|| {
                    self.changed_at = Some(now);
                    self.journal.join(st.blocks.max(1))
                });
                Next::Io(IoReq {
                    op: ReqOp::Write,
                    sector,
                    nr_sectors: st.sectors,
                    flags: ReqFlags::SYNC,
                    ioprio: None,
                })
            }
            Phase::Written => match self.tid.take() {
                Some(tid) => {
                    self.phase = Phase::Work;
                    self.step = (self.step + 1) % lf.steps.len();
                    self.journal.written(tid);
                    Next::Await(self.journal.committed.clone(), tid)
                }
                None => {
                    self.phase = Phase::Flush;
                    Next::Compute(jitter(st.sync_think_ns, lf.think_spread, rng))
                }
            },
            Phase::Flush => {
                self.phase = Phase::Work;
                self.step = (self.step + 1) % lf.steps.len();
                self.journal.state().flushes += 1;
                Next::Io(IoReq::FLUSH)
            }
        }
    }
}

/// ext4's journal thread (`kjournald2`): sleeps until a commit is asked for, takes the
/// running transaction, waits for its members' data, writes its blocks (one plugged,
/// merged write) and then its commit record (PREFLUSH|FUA), and wakes the waiters. Its
/// job's `iodepth` must be at least 1; it waits for its own writes.
pub struct Jbd2 {
    /// Its journal, which also holds the loadfile whose jbd2 timing it keeps.
    journal: Arc<Ext4Journal>,
    phase: Jbd2Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Jbd2Phase {
    /// Asleep until a commit newer than the last is asked for.
    Idle,
    /// Committing transaction `tid` of `blocks`: waiting for its members' data.
    Data { tid: u64, blocks: u32 },
    /// Its blocks are on their way: wait for them.
    Blocks { tid: u64 },
    /// They are done: the work before the commit record.
    Record { tid: u64 },
    /// The commit record.
    RecordIo { tid: u64 },
    /// The record is on its way: wait for it.
    Commit { tid: u64 },
    /// The transaction is committed: wake its waiters.
    Done { tid: u64 },
}

impl Jbd2 {
    pub fn new(journal: Arc<Ext4Journal>) -> Jbd2 {
        Jbd2 {
            journal,
            phase: Jbd2Phase::Idle,
        }
    }
}

impl Source for Jbd2 {
    fn next(&mut self, _now: Nanos, rng: &mut SimRng) -> Next {
        let j = self.journal.clone();
        let lf = self.journal.loadfile;
        match self.phase {
            Jbd2Phase::Idle => {
                let done = j.committed.get();
                if j.asked.get() <= done {
                    return Next::Await(j.asked.clone(), done + 1);
                }
                let (tid, blocks) = j.close();
                self.phase = Jbd2Phase::Data { tid, blocks };
                Next::Compute(jitter(lf.jbd2_start_ns, lf.think_spread, rng))
            }
            Jbd2Phase::Data { tid, blocks } => {
                if j.data_done.get() < tid {
                    return Next::Await(j.data_done.clone(), tid);
                }
                self.phase = Jbd2Phase::Blocks { tid };
                j.state().blocks += blocks as u64;
                let sectors = blocks * BLOCK;
                Next::Io(IoReq {
                    op: ReqOp::Write,
                    sector: j.append(sectors),
                    nr_sectors: sectors,
                    flags: ReqFlags::SYNC.union(ReqFlags::META),
                    ioprio: None,
                })
            }
            Jbd2Phase::Blocks { tid } => {
                self.phase = Jbd2Phase::Record { tid };
                Next::Drain
            }
            Jbd2Phase::Record { tid } => {
                self.phase = Jbd2Phase::RecordIo { tid };
                Next::Compute(jitter(lf.jbd2_record_ns, lf.think_spread, rng))
            }
            Jbd2Phase::RecordIo { tid } => {
                // `journal_submit_commit_record`: PREFLUSH|FUA on a journal with barriers
                // (ext4's default) and no async commit.
                self.phase = Jbd2Phase::Commit { tid };
                Next::Io(IoReq {
                    op: ReqOp::Write,
                    sector: j.append(BLOCK),
                    nr_sectors: BLOCK,
                    flags: ReqFlags::SYNC
                        .union(ReqFlags::META)
                        .union(ReqFlags::PREFLUSH)
                        .union(ReqFlags::FUA),
                    ioprio: None,
                })
            }
            Jbd2Phase::Commit { tid } => {
                self.phase = Jbd2Phase::Done { tid };
                Next::Drain
            }
            Jbd2Phase::Done { tid } => {
                j.state().commits += 1;
                j.committed.raise_to(tid);
                self.phase = Jbd2Phase::Idle;
                // Nothing in flight: asked again at once (the engine wakes the waiters
                // between the two asks).
                Next::Drain
            }
        }
    }
}
