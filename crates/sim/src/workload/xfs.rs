//! dbench's clients on XFS, as measured: the stream one client's loadfile gives the block
//! layer on XFS, derived from a capture made here, and the log the clients share.
//!
//! Both captures of dbench on this project's machine (ext4 and XFS) hold no reads (the page
//! cache serves them) and nothing but the clients' `fsync`s: each writes the file's dirty
//! data (`WS`, synchronous, from the client itself) and then either forces the log (`FWFSM`,
//! a log write with PREFLUSH and FUA) or, when there is nothing of the file left in the log,
//! flushes the cache (`FWS`, an empty flush). That is `xfs_file_fsync` on a single device:
//! `file_write_and_wait_range`, then `xfs_fsync_flush_log` while the inode is pinned in the
//! log (`xfs_ipincount`), then `blkdev_issue_flush` if the force wrote nothing.
//!
//! [`XfsLoadfile::measured`] is dbench's loadfile with one client
//! (`testdata/traces/dbench1-xfs`, `bash scripts/capture-corpus.sh testdata/traces
//! dbench1-xfs`: `dbench -t 2` on a fresh 2 GiB XFS on a loop device with direct I/O): it
//! repeats with a fixed period of `fsync`s, and each step of the period is the medians of
//! its repetitions. [`XfsDbenchClient`] plays it; the clients of one run share an [`XfsLog`],
//! where a log write carries every transaction committed since the last one, so a client
//! whose transaction another's log write already carried only flushes (93% of the
//! `fsync`s of `testdata/traces/dbench8-xfs`, 8 clients, follow that rule).
//!
//! A client's own time between its I/Os is CPU time (`Next::Compute`): clients sharing a
//! CPU take turns at it. Not modelled: the kernel's own CPU time beside it (the file
//! system's, the device's), a force waiting for a log write already in flight, a checkpoint
//! larger than one log buffer (written as one buffer's worth), and log space reservation.

use super::loadfile::{commonest, jitter, median, period, FileWrite, Spreads};
use super::{IoReq, Next, Source};
use crate::replay::Replayable;
use crate::SimRng;
use mqblk_core::{Nanos, ReqFlags, ReqOp};
use mqblk_trace::TraceSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// dbench, one client, two seconds, on XFS here (`scripts/capture-corpus.sh`, `dbench1-xfs`).
const DBENCH1_XFS_TRACE: [(&str, &[u8]); 2] = [
    (
        "dbench1-xfs.blktrace.0",
        include_bytes!("../../../../testdata/traces/dbench1-xfs.blktrace.0"),
    ),
    (
        "dbench1-xfs.blktrace.1",
        include_bytes!("../../../../testdata/traces/dbench1-xfs.blktrace.1"),
    ),
];

/// The same loadfile captured where the single-hctx dispatch patch's kernel twin runs dbench: Debian's 6.1 in a
/// QEMU guest under TCG, on a 1 GiB XFS over scsi_debug (every command 4 ms, marked
/// rotational), one client for 60 s (`scripts/guest-dbench-capture.sh --runtime=60`).
const DBENCH1_XFS_TCG_TRACE: [(&str, &[u8]); 2] = [
    (
        "dbench1-xfs-tcg.blktrace.0",
        include_bytes!("../../../../testdata/traces/dbench1-xfs-tcg.blktrace.0"),
    ),
    (
        "dbench1-xfs-tcg.blktrace.1",
        include_bytes!("../../../../testdata/traces/dbench1-xfs-tcg.blktrace.1"),
    ),
];

/// XFS's allocation groups on a single disk: xfsprogs' `calc_default_ag_geometry` gives a
/// device with no stripe geometry four from 128 MiB to 4 TiB (the capture's 2 GiB had four,
/// and so does our 1 TB disk if its card reports no stripe; one that does gets more, by
/// its stripe). The internal log starts the middle one, as the capture shows.
pub const XFS_AGS: u64 = 4;
/// The captures' file systems, in sectors: 2 GiB here, 1 GiB in the guest.
const CAPTURE_SECTORS: u64 = 2 << 21;
const GUEST_CAPTURE_SECTORS: u64 = 1 << 21;
/// The log's length (`mkfs.xfs`'s 64 MiB for the 2 GiB file system: the capture's data in
/// the middle group starts right after it).
const LOG_SECTORS: u64 = 131_072;
/// One log write is at most one in-core log buffer (32 KiB, `logbsize`'s default; the
/// largest log write of the 8-client capture).
const ICLOG_SECTORS: u64 = 64;
/// Each client's files lie this far apart in a group (one client's new files span under
/// 1,000 sectors from its group's start in the capture).
const CLIENT_SPACING: u64 = 1024;

/// One `fsync` of the loadfile: the client's work before its data write, the write, the
/// work between the write's completion and the `fsync`'s log force or flush, and whether
/// the write left the inode pinned (so the `fsync` forces the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XfsStep {
    pub write: FileWrite,
    pub sectors: u32,
    pub pins: bool,
    /// For a new file: its allocation group (relative to the client's first) and its offset
    /// in the group past anything mkfs put there (the log), in sectors.
    pub ag: u64,
    pub offset: u64,
    pub think_ns: u64,
    pub sync_think_ns: u64,
    /// The log write this step's transaction alone makes, in sectors (0 when it pins
    /// nothing).
    pub log_sectors: u32,
}

/// dbench's loadfile as XFS turns it into block I/O, one client's.
#[derive(Clone, Debug)]
pub struct XfsLoadfile {
    pub steps: Vec<XfsStep>,
    /// `fsync`s in the capture, the share of them that forced the log, and the share of
    /// its steps that repeat at the period.
    pub fsyncs: usize,
    pub forced: f64,
    pub repeat: f64,
    /// How far a think time strays from its step's median: uniformly within this fraction
    /// either way, which puts the 90th percentile where the capture's is (the median
    /// step's p90 over its median).
    pub think_spread: f64,
}

impl XfsLoadfile {
    /// The loadfile from the embedded one-client capture made on this machine (derived
    /// once).
    pub fn measured() -> &'static XfsLoadfile {
        static LOADFILE: OnceLock<XfsLoadfile> = OnceLock::new();
        LOADFILE.get_or_init(|| Self::embedded(&DBENCH1_XFS_TRACE, CAPTURE_SECTORS))
    }

    /// The loadfile as the single-hctx dispatch patch's kernel twin runs it, in its guest under TCG (derived
    /// once): the same steps, the clients' own time some twenty times as long.
    pub fn measured_in_guest() -> &'static XfsLoadfile {
        static LOADFILE: OnceLock<XfsLoadfile> = OnceLock::new();
        LOADFILE.get_or_init(|| Self::embedded(&DBENCH1_XFS_TCG_TRACE, GUEST_CAPTURE_SECTORS))
    }

    fn embedded(trace: &[(&str, &[u8])], fs_sectors: u64) -> XfsLoadfile {
        let set = TraceSet::from_bytes(trace).expect("an embedded dbench capture parses");
        XfsLoadfile::from_trace(&set, fs_sectors)
            .expect("an embedded dbench capture has a loadfile")
    }

    /// The loadfile of a capture of one dbench client on XFS over a file system of
    /// `fs_sectors`: its `fsync`s in order, the period they repeat with, and each step of
    /// the period as the medians of its repetitions (the commoner form where a step's write
    /// differed). The think times are the replay's (`Wait::think_ns`): from the completion
    /// that woke the client, its own but for the odd one of the file system's workers.
    pub fn from_trace(
        set: &TraceSet,
        fs_sectors: u64,
    ) -> Result<XfsLoadfile, super::LoadfileError> {
        let r = Replayable::from_trace(set);
        let p = r
            .busiest(|n| n == "dbench")
            .ok_or(super::LoadfileError::MissingProcess("dbench"))?;
        // Each data write with the flush or log write after it.
        struct Raw {
            sector: u64,
            sectors: u32,
            write: FileWrite,
            log: Option<u32>,
            think: u64,
            sync_think: u64,
        }
        let mut raw: Vec<Raw> = Vec::new();
        let mut open: Option<Raw> = None;
        let mut last: Option<(u64, u32)> = None;
        for io in &p.ios {
            let req = io.io;
            let durable = req.op == ReqOp::Flush || req.flags.contains(ReqFlags::FUA);
            if req.op == ReqOp::Write && !durable && req.nr_sectors > 0 {
                let write = FileWrite::after(last, req.sector);
                last = Some((req.sector, req.nr_sectors));
                open = Some(Raw {
                    sector: req.sector,
                    sectors: req.nr_sectors,
                    write,
                    log: None,
                    think: io.wait.think_ns,
                    sync_think: 0,
                });
            } else if durable {
                if let Some(mut w) = open.take() {
                    w.log = (req.op == ReqOp::Write).then_some(req.nr_sectors);
                    w.sync_think = io.wait.think_ns;
                    raw.push(w);
                }
            }
        }
        let symbol = |w: &Raw| (w.write, w.sectors, w.log.is_some());
        let symbols: Vec<_> = raw.iter().map(symbol).collect();
        let period = period(&symbols).ok_or(super::LoadfileError::NoPeriod(raw.len()))?;
        let ag_size = fs_sectors / XFS_AGS;
        let mut spreads = Spreads::default();
        let steps = (0..period.0)
            .map(|ph| {
                let reps: Vec<&Raw> = raw.iter().skip(ph).step_by(period.0).collect();
                let (write, sectors, pins) =
                    commonest(reps.iter().map(|r| symbol(r))).expect("a step has repetitions");
                let (ag, offset) = if write == FileWrite::New {
                    commonest(reps.iter().map(|r| {
                        let ag = r.sector / ag_size;
                        let past = if ag == XFS_AGS / 2 { LOG_SECTORS } else { 0 };
                        (ag, (r.sector % ag_size).saturating_sub(past))
                    }))
                    .expect("a step has repetitions")
                } else {
                    (0, 0)
                };
                let think_ns = spreads.median_of(reps.iter().map(|r| r.think).collect());
                XfsStep {
                    write,
                    sectors,
                    pins,
                    ag,
                    offset,
                    think_ns,
                    sync_think_ns: median(reps.iter().map(|r| r.sync_think).collect()),
                    log_sectors: if pins {
                        median(reps.iter().filter_map(|r| r.log.map(u64::from)).collect()) as u32
                    } else {
                        0
                    },
                }
            })
            .collect();
        Ok(XfsLoadfile {
            steps,
            fsyncs: raw.len(),
            forced: raw.iter().filter(|r| r.log.is_some()).count() as f64 / raw.len().max(1) as f64,
            repeat: period.1,
            think_spread: spreads.spread(),
        })
    }
}

/// The XFS log the clients of one run share: the log writes issued, the transactions
/// waiting for the next one, and where its head is.
#[derive(Default)]
pub struct XfsLog {
    /// Log writes issued so far (the checkpoint sequence).
    writes: AtomicU64,
    /// Log space of the transactions committed since the last log write.
    pending: AtomicU64,
    head: AtomicU64,
    /// `fsync`s the clients made.
    fsyncs: AtomicU64,
}

impl XfsLog {
    /// (log writes, `fsync`s) so far: the share of `fsync`s that forced the log.
    pub fn forces(&self) -> (u64, u64) {
        (self.writes.load(Relaxed), self.fsyncs.load(Relaxed))
    }
}

/// A dbench client on XFS, playing [`XfsLoadfile::measured`] from its first step (dbench's
/// clients start together): for each `fsync`, the client's work, its data write, the work
/// before the log force, then a log write (PREFLUSH|FUA at the log's head, carrying every
/// transaction committed since the last one) or an empty cache flush: a flush when its
/// write pinned nothing, or when another client's log write went out after its transaction
/// committed (at its data write's completion) and so carried it.
///
/// The file system spans the device: [`XFS_AGS`] allocation groups, the log at the start
/// of the middle one; client `i`'s directories start `i` groups on from the capture's.
///
/// Its job's `iodepth` must be 1, as a dbench client's is: the source is asked again only
/// once its I/O has completed, and takes that as the moment its transaction committed.
pub struct XfsDbenchClient {
    loadfile: &'static XfsLoadfile,
    log: Arc<XfsLog>,
    capacity: u64,
    client: u64,
    step: usize,
    phase: Phase,
    /// The client's last data write (sector, sectors).
    last: (u64, u32),
    /// Log writes issued when this client's transaction committed, if it pinned the inode.
    committed_at: Option<u64>,
}

/// Where a client is in one `fsync` of its loadfile: what it does when asked next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Its own work before the data write.
    Work,
    /// The data write.
    Write,
    /// The data write completed (its transaction committed); its work before the `fsync`.
    Committed,
    /// The `fsync`'s log write or flush.
    Fsync,
}

impl XfsDbenchClient {
    /// Client `client` of a run whose clients share `log`, on a file system of `capacity`
    /// sectors, playing the loadfile measured on this machine.
    pub fn new(client: u64, capacity: u64, log: Arc<XfsLog>) -> XfsDbenchClient {
        Self::playing(XfsLoadfile::measured(), client, capacity, log)
    }

    /// The same, playing `loadfile`.
    pub fn playing(
        loadfile: &'static XfsLoadfile,
        client: u64,
        capacity: u64,
        log: Arc<XfsLog>,
    ) -> XfsDbenchClient {
        XfsDbenchClient {
            loadfile,
            log,
            capacity,
            client,
            step: 0,
            phase: Phase::Work,
            last: (0, 8),
            committed_at: None,
        }
    }

    fn ag_size(&self) -> u64 {
        self.capacity / XFS_AGS
    }

    fn think(&self, ns: u64, rng: &mut SimRng) -> Nanos {
        jitter(ns, self.loadfile.think_spread, rng)
    }
}

impl Source for XfsDbenchClient {
    fn next(&mut self, _now: Nanos, rng: &mut SimRng) -> Next {
        let st = self.loadfile.steps[self.step];
        match self.phase {
            Phase::Work => {
                self.phase = Phase::Write;
                Next::Compute(self.think(st.think_ns, rng))
            }
            Phase::Write => {
                self.phase = Phase::Committed;
                let sector = match st.write {
                    FileWrite::Same => self.last.0,
                    FileWrite::Next => self.last.0 + self.last.1 as u64,
                    FileWrite::New => {
                        let ag = (st.ag + self.client) % XFS_AGS;
                        let past_log = if ag == XFS_AGS / 2 { LOG_SECTORS } else { 0 };
                        ag * self.ag_size()
                            + past_log
                            + (self.client * CLIENT_SPACING) % (self.ag_size() / 2)
                            + st.offset
                    }
                };
                let sector = sector.min(self.capacity.saturating_sub(st.sectors as u64));
                self.last = (sector, st.sectors);
                Next::Io(IoReq {
                    op: ReqOp::Write,
                    sector,
                    nr_sectors: st.sectors,
                    flags: ReqFlags::SYNC,
                    ioprio: None,
                })
            }
            Phase::Committed => {
                // The write completed: its transaction is in the log, waiting for a force.
                self.phase = Phase::Fsync;
                self.committed_at = st.pins.then(|| {
                    self.log.pending.fetch_add(st.log_sectors as u64, Relaxed);
                    self.log.writes.load(Relaxed)
                });
                Next::Compute(self.think(st.sync_think_ns, rng))
            }
            Phase::Fsync => {
                self.phase = Phase::Work;
                self.step = (self.step + 1) % self.loadfile.steps.len();
                self.log.fsyncs.fetch_add(1, Relaxed);
                let force = self
                    .committed_at
                    .take()
                    .is_some_and(|at| self.log.writes.load(Relaxed) == at);
                if !force {
                    return Next::Io(IoReq::FLUSH);
                }
                self.log.writes.fetch_add(1, Relaxed);
                let len = self.log.pending.swap(0, Relaxed).clamp(1, ICLOG_SECTORS);
                let at = self.log.head.fetch_add(len, Relaxed) % (LOG_SECTORS - ICLOG_SECTORS);
                Next::Io(IoReq {
                    op: ReqOp::Write,
                    sector: self.ag_size() * (XFS_AGS / 2) + at,
                    nr_sectors: len as u32,
                    flags: ReqFlags::SYNC
                        .union(ReqFlags::PREFLUSH)
                        .union(ReqFlags::FUA),
                    ioprio: None,
                })
            }
        }
    }
}
