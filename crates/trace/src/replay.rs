//! What a blktrace capture holds for replay: each traced process's queue (`Q`) events with
//! the concurrency it had and the waits the trace shows, which the simulator
//! (`mqblk_sim::replay`) and the threaded runtime (`mqblk_runtime::replay`) both replay.
//!
//! - *open loop*: each I/O is issued at its traced time (scaled by `speed`), whatever the
//!   device does; queueing shows as latency.
//! - *closed loop*: as fast as the device allows, but each process keeps at most as many I/Os
//!   in flight as it had in the trace, so its concurrency is the original's; and where the
//!   trace shows a process waiting, it waits in the replay too (see [`Wait`]).
//!
//! The original latencies come from pairing each `Q` with the `C` that covers its sectors.

use crate::format::{ta, tc};
use crate::TraceSet;
use mqblk_core::{ReqFlags, ReqOp};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// How a replay paces each process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each I/O at its traced time (scaled), whatever the device does.
    Open,
    /// As fast as the device allows, with the traced concurrency (and waits, when asked).
    Closed,
}

/// A traced I/O as the replay issues it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TracedReq {
    pub op: ReqOp,
    pub sector: u64,
    pub nr_sectors: u32,
    pub flags: ReqFlags,
}

/// One of a trace's I/Os: the `index`-th that `process` (an index into
/// [`Replayable::processes`]) queued.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct IoRef {
    pub process: u32,
    pub index: u32,
}

/// Where a traced process waited before it queued an I/O, as far as the trace shows it.
///
/// A process that queues an I/O with none of its own in flight was blocked or busy: it had
/// waited for everything it issued (`drain`). If another process's I/O completed after the
/// process's own last completion, one of those completions is taken as what woke it
/// (`after`): the newest *durability point* among them (a flush, or a write with PREFLUSH
/// or FUA: on a journaling file system a client's `fsync` returns when the journal
/// thread's commit record completes), else the newest of them (the journal thread starts a
/// commit when a client's data writes are done). Taking simply the newest completion made
/// a client that went on after the commit record wait for whichever other client's write
/// completed just before, a dependency between clients that was not there (in the
/// captured dbench, 310 of the clients' 1,800 waits). A coincidence (a process that was
/// computing, not waiting) still makes a wait that was not there, and a process that
/// waited with I/O of its own still in flight is not seen waiting. Every `after` points
/// back in the trace's time, so a replay that honours them cannot deadlock.
///
/// `think_ns` is the time from that completion (or the process's own last one) to the queue
/// event: the process's own work before it issued (CPU time, page-cache copies), which a
/// closed-loop replay keeps so the device is not the only thing that takes time.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Wait {
    pub drain: bool,
    pub after: Option<IoRef>,
    pub think_ns: u64,
}

/// One I/O a traced process queued.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TracedIo {
    /// Time from the trace's first event, ns.
    pub at: u64,
    pub io: TracedReq,
    pub wait: Wait,
    /// It starts a new plug: its process inserted requests (`I`) since its previous I/O,
    /// which a task holding a plug does only when the plug is flushed. I/Os queued with no
    /// insert of their process between them were submitted under one plug (`blk_start_plug`
    /// in writeback, a journal commit, a direct-I/O batch), where a bio that joins the
    /// request before it merges in the plug without reaching the scheduler
    /// (`blk_attempt_plug_merge`). The trace has no plug events of its own; an insert by
    /// the process is what shows the flush. A replaying job also flushes its plug whenever
    /// it waits, as a task's plug is flushed when it sleeps (`sched_submit_work` calls
    /// `blk_flush_plug`).
    pub new_plug: bool,
}

/// One process's I/O from the trace.
#[derive(Clone, Debug, Default)]
pub struct ProcessIo {
    pub pid: u32,
    pub name: String,
    pub cpu: u32,
    pub ios: Vec<TracedIo>,
    /// Most I/Os it had in flight at once in the trace.
    pub max_inflight: u32,
}

/// What a trace holds for replay.
#[derive(Clone, Debug, Default)]
pub struct Replayable {
    pub processes: Vec<ProcessIo>,
    /// Original Q-to-C latencies, in ns, of the I/Os whose completion the trace has.
    pub original_lat: Vec<u64>,
    pub total_ios: u64,
    /// Of `total_ios`, flushes (no data; not counted as I/Os in reports).
    pub flushes: u64,
    pub total_bytes: u64,
    /// The largest traced I/O, in bytes: the replaying queue must allow it in one request,
    /// as the traced device did.
    pub max_io_bytes: u64,
    /// Q events skipped (zero-length non-flush, or beyond what we can replay).
    pub skipped: u64,
    /// I/Os queued with nothing of their process in flight ([`Wait::drain`]).
    pub drains: u64,
    /// Of those, the ones that wait for another process's I/O ([`Wait::after`]).
    pub cross_waits: u64,
}

fn op_of(action: u32, bytes: u32) -> Option<(ReqOp, ReqFlags)> {
    let has = |c| action & tc::act(c) != 0;
    let mut flags = ReqFlags::empty();
    if has(tc::SYNC) {
        flags = flags.union(ReqFlags::SYNC);
    }
    if has(tc::FUA) {
        flags = flags.union(ReqFlags::FUA);
    }
    let op = if has(tc::DISCARD) {
        ReqOp::Discard
    } else if has(tc::WRITE) {
        if bytes == 0 {
            if has(tc::FLUSH) {
                ReqOp::Flush
            } else {
                return None;
            }
        } else {
            if has(tc::FLUSH) {
                flags = flags.union(ReqFlags::PREFLUSH);
            }
            ReqOp::Write
        }
    } else if bytes > 0 {
        ReqOp::Read
    } else {
        return None;
    };
    Some((op, flags))
}

impl Replayable {
    /// The process with the most I/Os among those whose name `named` accepts (one client of
    /// a capture, its journal thread).
    pub fn busiest(&self, named: impl Fn(&str) -> bool) -> Option<&ProcessIo> {
        self.processes
            .iter()
            .filter(|p| named(&p.name))
            .max_by_key(|p| p.ios.len())
    }

    /// Extracts the queue events per process, their concurrency, the waits the trace shows
    /// and the original latencies.
    pub fn from_trace(set: &TraceSet) -> Replayable {
        let names = set.process_names();
        let t0 = set.records.first().map_or(0, |r| r.time);
        let mut procs: BTreeMap<u32, ProcessIo> = BTreeMap::new();
        // Queued data I/O waiting for its completion, by start sector: (pid, queue time,
        // index in its process).
        let mut pending: BTreeMap<u64, VecDeque<(u32, u64, u32)>> = BTreeMap::new();
        // Queued flushes (no range): a flush completion ends every one queued before it.
        // blk-flush.c's `blk_kick_flush` issues one flush for all requests pending when it
        // is kicked, so a flush queued while another is running waits for the next one; the
        // trace does not say when a flush was issued (a flush has no D with a sector to
        // pair), so the replay counts it ended by the first flush completion after it.
        let mut pending_flushes: VecDeque<(u32, u64, u32)> = VecDeque::new();
        // The data I/O last completed at each start sector: a write with PREFLUSH or FUA
        // completes its data, then (after a post-flush) the whole request again, with no
        // length; the second is when its issuer hears of it.
        let mut completed_at: HashMap<u64, (u32, u32)> = HashMap::new();
        let mut inflight: BTreeMap<u32, u32> = BTreeMap::new();
        // Completions numbered in trace order: the newest (number, pid, index), and each
        // process's own newest number.
        let mut done_seq = 0u64;
        let mut newest: Option<(u64, u32, u32, u64)> = None;
        // The same for the newest durability point: a flush's completion, or the end of a
        // write with PREFLUSH or FUA (a journal's commit record).
        let mut newest_durable: Option<(u64, u32, u32, u64)> = None;
        let mut own_newest: HashMap<u32, (u64, u64)> = HashMap::new();
        // Processes that inserted a request since their last queued I/O (a plug flushed).
        let mut flushed: HashSet<u32> = HashSet::new();
        let mut out = Replayable::default();
        for r in set.records.iter().filter(|r| !r.is_notify()) {
            match r.what() {
                ta::QUEUE => {
                    let Some((op, flags)) = op_of(r.action, r.bytes) else {
                        out.skipped += 1;
                        continue;
                    };
                    let p = procs.entry(r.pid).or_insert_with(|| ProcessIo {
                        pid: r.pid,
                        name: names.get(&r.pid).cloned().unwrap_or_default(),
                        cpu: r.cpu,
                        ..ProcessIo::default()
                    });
                    let n = inflight.entry(r.pid).or_insert(0);
                    let mut wait = Wait::default();
                    if *n == 0 && !p.ios.is_empty() {
                        wait.drain = true;
                        out.drains += 1;
                    }
                    if *n == 0 {
                        let own = own_newest.get(&r.pid).copied();
                        let mut woken_at = own.map(|(_, t)| t);
                        // Someone else's durability point since the process's own last
                        // completion is what an fsync waits for; failing one, the newest
                        // completion of anyone else.
                        let other = |c: Option<(u64, u32, u32, u64)>| {
                            c.filter(|&(seq, pid, _, _)| {
                                pid != r.pid && own.is_none_or(|(o, _)| seq > o)
                            })
                        };
                        if let Some((_, pid, index, t)) = other(newest_durable).or(other(newest)) {
                            // The process index is known once every process is: pid for
                            // now, mapped below.
                            wait.after = Some(IoRef {
                                process: pid,
                                index,
                            });
                            woken_at = Some(t);
                            out.cross_waits += 1;
                        }
                        wait.think_ns = woken_at.map_or(0, |t| r.time.saturating_sub(t));
                    }
                    let index = p.ios.len() as u32;
                    let new_plug = flushed.remove(&r.pid) || p.ios.is_empty();
                    p.ios.push(TracedIo {
                        at: r.time - t0,
                        io: TracedReq {
                            op,
                            sector: r.sector,
                            nr_sectors: r.bytes / 512,
                            flags,
                        },
                        wait,
                        new_plug,
                    });
                    out.total_ios += 1;
                    out.flushes += u64::from(op == ReqOp::Flush);
                    out.total_bytes += r.bytes as u64;
                    out.max_io_bytes = out.max_io_bytes.max(r.bytes as u64);
                    if op == ReqOp::Flush {
                        pending_flushes.push_back((r.pid, r.time, index));
                    } else {
                        pending
                            .entry(r.sector)
                            .or_default()
                            .push_back((r.pid, r.time, index));
                    }
                    *n += 1;
                    p.max_inflight = p.max_inflight.max(*n);
                }
                ta::INSERT => {
                    flushed.insert(r.pid);
                }
                ta::COMPLETE => {
                    let mut finished = |pid: u32, index: u32, qt: Option<u64>| {
                        let durable = procs.get(&pid).is_some_and(|p| {
                            let io = p.ios[index as usize].io;
                            io.op == ReqOp::Flush
                                || io.flags.contains(ReqFlags::FUA)
                                || io.flags.contains(ReqFlags::PREFLUSH)
                        });
                        if let Some(qt) = qt {
                            out.original_lat.push(r.time.saturating_sub(qt));
                            if let Some(n) = inflight.get_mut(&pid) {
                                *n = n.saturating_sub(1);
                            }
                        }
                        done_seq += 1;
                        newest = Some((done_seq, pid, index, r.time));
                        if durable {
                            newest_durable = newest;
                        }
                        own_newest.insert(pid, (done_seq, r.time));
                    };
                    if r.bytes == 0 {
                        if r.sector == u64::MAX {
                            // A flush's completion (no range): it serves the flushes queued.
                            for (pid, qt, index) in pending_flushes.drain(..) {
                                finished(pid, index, Some(qt));
                            }
                        } else if let Some(&(pid, index)) = completed_at.get(&r.sector) {
                            // The end of a PREFLUSH/FUA write's sequence.
                            finished(pid, index, None);
                        }
                        continue;
                    }
                    // The completed request covers every queued bio that starts inside it.
                    let end = r.sector.saturating_add(r.bytes as u64 / 512);
                    let keys: Vec<u64> = pending.range(r.sector..end).map(|(k, _)| *k).collect();
                    for k in keys {
                        let q = pending.get_mut(&k).expect("key just seen");
                        if let Some((pid, qt, index)) = q.pop_front() {
                            finished(pid, index, Some(qt));
                            completed_at.insert(k, (pid, index));
                        }
                        if q.is_empty() {
                            pending.remove(&k);
                        }
                    }
                }
                _ => {}
            }
        }
        // I/O without a completion in the trace leaves counts behind; a process's
        // concurrency is at least one.
        let index_of: HashMap<u32, u32> = procs
            .keys()
            .enumerate()
            .map(|(i, &pid)| (pid, i as u32))
            .collect();
        out.processes = procs
            .into_values()
            .map(|mut p| {
                p.max_inflight = p.max_inflight.max(1);
                for t in &mut p.ios {
                    if let Some(a) = &mut t.wait.after {
                        a.process = index_of[&a.process];
                    }
                }
                p
            })
            .collect();
        out
    }
}
