//! Replaying a blktrace capture through the simulator: each traced process becomes a job on
//! a virtual CPU (the CPU it was traced on), issuing the trace's queue (`Q`) events.
//!
//! - *open loop*: each I/O is issued at its traced time (scaled by `speed`), whatever the
//!   device does; queueing shows as latency.
//! - *closed loop*: as fast as the device allows, but each process keeps at most as many I/Os
//!   in flight as it had in the trace, so its concurrency is the original's.
//!
//! The original latencies come from pairing each `Q` with the `C` that covers its sectors.

use crate::workload::{IoReq, Limit, Next, SimJob, Source};
use crate::SimRng;
use mqblk_core::{IoPrio, Nanos, ReqFlags, ReqOp};
use mqblk_trace::format::{ta, tc};
use mqblk_trace::TraceSet;
use std::collections::{BTreeMap, VecDeque};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Open,
    Closed,
}

/// One process's I/O from the trace.
#[derive(Clone, Debug, Default)]
pub struct ProcessIo {
    pub pid: u32,
    pub name: String,
    pub cpu: u32,
    /// (time from the trace's first event, the I/O).
    pub ios: Vec<(u64, IoReq)>,
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
    /// Extracts the queue events per process, their concurrency and original latencies.
    pub fn from_trace(set: &TraceSet) -> Replayable {
        let names = set.process_names();
        let t0 = set.records.first().map_or(0, |r| r.time);
        let mut procs: BTreeMap<u32, ProcessIo> = BTreeMap::new();
        // Pending queued I/O by start sector: (pid, queue time).
        let mut pending: BTreeMap<u64, VecDeque<(u32, u64)>> = BTreeMap::new();
        let mut inflight: BTreeMap<u32, u32> = BTreeMap::new();
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
                    p.ios.push((
                        r.time - t0,
                        IoReq {
                            op,
                            sector: r.sector,
                            nr_sectors: r.bytes / 512,
                            flags,
                        },
                    ));
                    out.total_ios += 1;
                    out.flushes += u64::from(op == ReqOp::Flush);
                    out.total_bytes += r.bytes as u64;
                    out.max_io_bytes = out.max_io_bytes.max(r.bytes as u64);
                    if op != ReqOp::Flush {
                        pending
                            .entry(r.sector)
                            .or_default()
                            .push_back((r.pid, r.time));
                    }
                    let n = inflight.entry(r.pid).or_insert(0);
                    *n += 1;
                    p.max_inflight = p.max_inflight.max(*n);
                }
                ta::COMPLETE => {
                    // The completed request covers every queued bio that starts inside it.
                    // Flush completions carry no range (and sector all ones).
                    if r.bytes == 0 {
                        continue;
                    }
                    let end = r.sector.saturating_add(r.bytes as u64 / 512);
                    let keys: Vec<u64> = pending.range(r.sector..end).map(|(k, _)| *k).collect();
                    for k in keys {
                        let q = pending.get_mut(&k).expect("key just seen");
                        if let Some((pid, qt)) = q.pop_front() {
                            out.original_lat.push(r.time.saturating_sub(qt));
                            if let Some(n) = inflight.get_mut(&pid) {
                                *n = n.saturating_sub(1);
                            }
                        }
                        if q.is_empty() {
                            pending.remove(&k);
                        }
                    }
                }
                _ => {}
            }
        }
        // Flushes and I/O without a completion in the trace leave counts behind; a
        // process's concurrency is at least one.
        out.processes = procs
            .into_values()
            .map(|mut p| {
                p.max_inflight = p.max_inflight.max(1);
                p
            })
            .collect();
        out
    }

    /// The jobs that replay it on `nr_cpus` virtual CPUs (traced CPU modulo `nr_cpus`),
    /// sectors wrapped into `capacity` when the device is smaller than the traced one.
    pub fn jobs(&self, mode: Mode, speed: f64, nr_cpus: u16, capacity: u64) -> Vec<SimJob> {
        self.processes
            .iter()
            .map(|p| SimJob {
                name: if p.name.is_empty() {
                    format!("pid{}", p.pid)
                } else {
                    format!("{}[{}]", p.name, p.pid)
                },
                cpu: (p.cpu % nr_cpus as u32) as u16,
                iodepth: match mode {
                    Mode::Closed => p.max_inflight,
                    // Open loop: never hold an I/O back for lack of depth.
                    Mode::Open => 4096,
                },
                batch: 1,
                issuer: p.pid,
                group: 0,
                ioprio: IoPrio::DEFAULT,
                start_at: Nanos::ZERO,
                barrier: 0,
                after: Vec::new(),
                limit: Limit::default(),
                ramp: Nanos::ZERO,
                batch_complete_min: 1,
                batch_complete_max: u32::MAX,
                source: Box::new(TraceSource {
                    ios: p.ios.clone().into(),
                    mode,
                    speed,
                    capacity,
                }),
                kind: "replay".into(),
                logs: None,
            })
            .collect()
    }
}

struct TraceSource {
    ios: VecDeque<(u64, IoReq)>,
    mode: Mode,
    speed: f64,
    capacity: u64,
}

impl Source for TraceSource {
    fn next(&mut self, _now: mqblk_core::Nanos, _rng: &mut SimRng) -> Next {
        let Some(&(t, mut io)) = self.ios.front() else {
            return Next::Done;
        };
        if self.mode == Mode::Open {
            let at = Nanos((t as f64 / self.speed) as u64);
            // Ask once for the wait, then issue on the next call.
            if !matches!(self.ios.front(), Some(&(tt, _)) if tt == u64::MAX) {
                self.ios.front_mut().expect("front").0 = u64::MAX;
                return Next::Until(at);
            }
        }
        self.ios.pop_front();
        if io.nr_sectors as u64 >= self.capacity {
            io.nr_sectors = 8;
        }
        if io.op != ReqOp::Flush && io.sector + io.nr_sectors as u64 > self.capacity {
            io.sector %= self.capacity - io.nr_sectors as u64;
        }
        Next::Io(io)
    }
}
