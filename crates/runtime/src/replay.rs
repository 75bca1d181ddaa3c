//! A blktrace capture ([`Replayable`]) replayed through the threaded runtime on a real
//! driver (`mqblk replay --driver=null|uring`). One thread per traced process, each with its own software queue, issuing the
//! process's queue events in closed loop (its traced concurrency, and the waits the trace
//! shows when asked) or open loop (its traced times, scaled), under a plug where the trace
//! shows one, as the simulator replays it.

use crate::{MonotonicClock, RunError, SubmitterHandle};
use mqblk_core::{Bio, BlkStatus, CtxIdx, IoBuf, Nanos, ReqOp};
use mqblk_device::DeviceConfig;
use mqblk_trace::replay::{Mode, Replayable};
use mqblk_workload::LatStat;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a threaded replay measured.
pub struct RealOutcome {
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    pub lat: LatStat,
    pub wall: Duration,
}

/// Which traced I/Os have completed, for processes that wait on another's
/// ([`mqblk_trace::replay::Wait`]); waiters sleep on `bell` between checks.
struct Board {
    done: Vec<Vec<AtomicBool>>,
    bell: (Mutex<()>, Condvar),
}

/// What one replay thread counts, and its in-flight I/O.
struct Tally {
    inflight: usize,
    ios: u64,
    bytes: u64,
    errors: u64,
    lat: LatStat,
}

/// Replays `rep` on a device built from `opts` (its `nr_ctx` set to one per process); in
/// closed loop with `waits`, each process waits where the trace shows it waited.
pub fn replay(
    rep: &Replayable,
    mut opts: DeviceConfig,
    mode: Mode,
    speed: f64,
    waits: bool,
) -> Result<RealOutcome, RunError> {
    let nr = rep.processes.len();
    opts.nr_ctx = nr as u16;
    let dev = mqblk_device::build(&opts, nr)?;
    let capacity = dev.queue.limits().capacity_sectors;
    let with_data = opts.stores_data();
    let waits = waits && mode == Mode::Closed;
    let board = Board {
        done: rep
            .processes
            .iter()
            // Kept only when some process may wait on another.
            .map(|p| {
                let n = if waits { p.ios.len() } else { 0 };
                (0..n).map(|_| AtomicBool::new(false)).collect()
            })
            .collect(),
        bell: (Mutex::new(()), Condvar::new()),
    };
    let clock = MonotonicClock::new();
    let start = Barrier::new(nr);
    let t0 = Instant::now();
    let results: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = rep
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (q, clock, start, board) = (dev.queue.clone(), clock.clone(), &start, &board);
                s.spawn(move || {
                    let mut h = SubmitterHandle::new(q, CtxIdx(i as u16), clock);
                    let depth = match mode {
                        Mode::Closed => p.max_inflight as usize,
                        Mode::Open => usize::MAX,
                    };
                    let mut t = Tally {
                        inflight: 0,
                        ios: 0,
                        bytes: 0,
                        errors: 0,
                        lat: LatStat::with_hist(),
                    };
                    let mine = &board.done[i];
                    start.wait();
                    let base = h.now().0;
                    // Held between I/Os the trace shows under one plug
                    // (`TracedIo::new_plug`), and flushed before any wait, as a task's
                    // plug is when it sleeps.
                    let mut plugged = false;
                    for (index, traced) in p.ios.iter().enumerate() {
                        let limit = if waits && traced.wait.drain { 1 } else { depth };
                        let due = base + (traced.at as f64 / speed) as u64;
                        let will_wait = (mode == Mode::Open && h.now().0 < due)
                            || t.inflight >= limit
                            || (waits && (traced.wait.after.is_some() || traced.wait.think_ns > 0));
                        if plugged && (traced.new_plug || will_wait) {
                            h.finish_plug();
                            plugged = false;
                        }
                        if mode == Mode::Open {
                            pass_time_until(due, &mut h, &mut t, mine, board);
                        }
                        while t.inflight >= limit {
                            h.reap(1, 1_000_000_000);
                            drain(&mut h, &mut t, mine, board);
                        }
                        if let Some(a) = traced.wait.after.filter(|_| waits) {
                            let flag = &board.done[a.process as usize][a.index as usize];
                            while !flag.load(Ordering::Acquire) {
                                h.poll();
                                drain(&mut h, &mut t, mine, board);
                                let g = board.bell.0.lock().unwrap_or_else(|e| e.into_inner());
                                if !flag.load(Ordering::Acquire) {
                                    // Our own completions need reaping meanwhile: a short nap.
                                    let _ =
                                        board.bell.1.wait_timeout(g, Duration::from_micros(200));
                                }
                            }
                        }
                        if waits && traced.wait.think_ns > 0 {
                            // The process's own work before it issued, as traced.
                            let due = h.now().0 + traced.wait.think_ns;
                            pass_time_until(due, &mut h, &mut t, mine, board);
                        }
                        let mut io = traced.io;
                        if io.op != ReqOp::Flush && io.sector + io.nr_sectors as u64 > capacity {
                            io.sector %= capacity.saturating_sub(io.nr_sectors as u64).max(1);
                        }
                        let mut bio = Bio::new(io.op, io.sector, io.nr_sectors)
                            .with_flags(io.flags)
                            .with_private(index as u64);
                        bio = bio.with_issuer(p.pid, 0);
                        if with_data && io.op.has_data() {
                            bio = bio.with_buf(IoBuf::new(io.nr_sectors as usize * 512));
                        }
                        if !plugged {
                            h.start_plug();
                            plugged = true;
                        }
                        h.submit(bio);
                        t.inflight += 1;
                    }
                    if plugged {
                        h.finish_plug();
                    }
                    while t.inflight > 0 {
                        h.reap(1, 1_000_000_000);
                        drain(&mut h, &mut t, mine, board);
                    }
                    t
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("replay thread"))
            .collect()
    });
    let wall = t0.elapsed();
    dev.queue.teardown();
    let mut out = RealOutcome {
        ios: 0,
        bytes: 0,
        errors: 0,
        lat: LatStat::with_hist(),
        wall,
    };
    for t in results {
        out.ios += t.ios;
        out.bytes += t.bytes;
        out.errors += t.errors;
        out.lat.merge(&t.lat);
    }
    Ok(out)
}

/// Lets time pass until `due` (the submitter's clock), reaping meanwhile: naps while far
/// from it, spins for the last 100 us (a nap oversleeps by tens of microseconds).
fn pass_time_until(
    due: u64,
    h: &mut SubmitterHandle,
    t: &mut Tally,
    mine: &[AtomicBool],
    board: &Board,
) {
    loop {
        h.poll();
        drain(h, t, mine, board);
        let now = h.now().0;
        if now >= due {
            return;
        }
        if due - now > 100_000 {
            std::thread::sleep(Duration::from_micros(20));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Counts the thread's completions and marks them done on the board, ringing it for
/// processes that wait on them.
fn drain(h: &mut SubmitterHandle, t: &mut Tally, mine: &[AtomicBool], board: &Board) {
    let now: Nanos = h.now();
    let mut any = false;
    for bio in h.done().drain(..) {
        t.inflight -= 1;
        t.ios += 1;
        if bio.status == BlkStatus::Ok {
            t.bytes += bio.bytes();
            t.lat.record(now.0.saturating_sub(bio.submit_ns.0));
        } else {
            t.errors += 1;
        }
        if let Some(f) = mine.get(bio.private as usize) {
            f.store(true, Ordering::Release);
            any = true;
        }
    }
    if any {
        let _g = board.bell.0.lock().unwrap_or_else(|e| e.into_inner());
        board.bell.1.notify_all();
    }
}
