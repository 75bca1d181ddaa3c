//! `mqblk replay --driver=null|uring`: a trace replayed through the threaded runtime on a
//! real driver. One thread per traced process, each with its own software queue, issuing the
//! process's queue events in closed loop (its traced concurrency) or open loop (its traced
//! times, scaled).

use mqblk_core::{Bio, BlkStatus, CtxIdx, IoBuf, Nanos, ReqOp};
use mqblk_device::{DeviceConfig, DriverKind};
use mqblk_runtime::{MonotonicClock, SubmitterHandle};
use mqblk_sim::replay::{Mode, Replayable};
use mqblk_workload::LatStat;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What a threaded replay measured.
pub struct RealOutcome {
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    pub lat: LatStat,
    pub wall: Duration,
}

/// Replays `rep` on a device built from `opts` (its `nr_ctx` set to one per process).
pub fn replay(
    rep: &Replayable,
    mut opts: DeviceConfig,
    mode: Mode,
    speed: f64,
) -> Result<RealOutcome, String> {
    let nr = rep.processes.len();
    opts.nr_ctx = nr as u16;
    let dev = mqblk_device::build(&opts, nr)?;
    let capacity = dev.queue.limits().capacity_sectors;
    let with_data = opts.driver == DriverKind::Uring || opts.memory_backed;
    let clock = MonotonicClock::new();
    let start = Barrier::new(nr);
    let t0 = Instant::now();
    let results: Vec<(u64, u64, u64, LatStat)> = std::thread::scope(|s| {
        let handles: Vec<_> = rep
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (q, clock, start) = (dev.queue.clone(), clock.clone(), &start);
                s.spawn(move || {
                    let mut h = SubmitterHandle::new(q, CtxIdx(i as u16), clock);
                    let depth = match mode {
                        Mode::Closed => p.max_inflight as usize,
                        Mode::Open => usize::MAX,
                    };
                    let (mut ios, mut bytes, mut errors) = (0u64, 0u64, 0u64);
                    let mut lat = LatStat::with_hist();
                    let mut inflight = 0usize;
                    start.wait();
                    let base = h.now().0;
                    for &(t, io) in &p.ios {
                        if mode == Mode::Open {
                            let due = base + (t as f64 / speed) as u64;
                            while h.now().0 < due {
                                h.poll();
                                drain(
                                    &mut h,
                                    &mut inflight,
                                    &mut ios,
                                    &mut bytes,
                                    &mut errors,
                                    &mut lat,
                                );
                                std::thread::sleep(Duration::from_micros(20));
                            }
                        }
                        while inflight >= depth {
                            h.reap(1, 1_000_000_000);
                            drain(
                                &mut h,
                                &mut inflight,
                                &mut ios,
                                &mut bytes,
                                &mut errors,
                                &mut lat,
                            );
                        }
                        let mut io = io;
                        if io.op != ReqOp::Flush && io.sector + io.nr_sectors as u64 > capacity {
                            io.sector %= capacity.saturating_sub(io.nr_sectors as u64).max(1);
                        }
                        let mut bio =
                            Bio::new(io.op, io.sector, io.nr_sectors).with_flags(io.flags);
                        bio = bio.with_issuer(p.pid, 0);
                        if with_data && io.op.has_data() {
                            bio = bio.with_buf(IoBuf::new(io.nr_sectors as usize * 512));
                        }
                        h.submit(bio);
                        inflight += 1;
                    }
                    while inflight > 0 {
                        h.reap(1, 1_000_000_000);
                        drain(
                            &mut h,
                            &mut inflight,
                            &mut ios,
                            &mut bytes,
                            &mut errors,
                            &mut lat,
                        );
                    }
                    (ios, bytes, errors, lat)
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
    for (i, b, e, l) in results {
        out.ios += i;
        out.bytes += b;
        out.errors += e;
        out.lat.merge(&l);
    }
    Ok(out)
}

fn drain(
    h: &mut SubmitterHandle,
    inflight: &mut usize,
    ios: &mut u64,
    bytes: &mut u64,
    errors: &mut u64,
    lat: &mut LatStat,
) {
    let now: Nanos = h.now();
    for bio in h.done().drain(..) {
        *inflight -= 1;
        *ios += 1;
        if bio.status == BlkStatus::Ok {
            *bytes += bio.bytes();
            lat.record(now.0.saturating_sub(bio.submit_ns.0));
        } else {
            *errors += 1;
        }
    }
}
