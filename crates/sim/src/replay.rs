//! Replaying a blktrace capture through the simulator: each traced process
//! ([`mqblk_trace::replay::Replayable`]) becomes a job on a virtual CPU (the CPU it was traced
//! on), issuing the trace's queue (`Q`) events, in open or closed loop as the capture's
//! analysis describes.

use crate::workload::{IoReq, JobIo, Limit, Next, SimJob, Source};
use crate::SimRng;
use mqblk_core::{Nanos, ReqOp};
pub use mqblk_trace::replay::{IoRef, Mode, ProcessIo, Replayable, TracedIo, TracedReq, Wait};
use std::collections::VecDeque;

/// The jobs that replay `rep` on `nr_cpus` virtual CPUs (traced CPU modulo `nr_cpus`),
/// sectors wrapped into `capacity` when the device is smaller than the traced one. They
/// must be the run's jobs from index `first_job` on, in this order: a closed-loop replay
/// with `waits` names the I/O a process waits for by its job. Open loop ignores waits
/// (the traced times hold them).
pub fn jobs(
    rep: &Replayable,
    mode: Mode,
    speed: f64,
    nr_cpus: u16,
    capacity: u64,
    waits: bool,
    first_job: u32,
) -> Vec<SimJob> {
    rep.processes
        .iter()
        .map(|p| {
            let name = if p.name.is_empty() {
                format!("pid{}", p.pid)
            } else {
                format!("{}[{}]", p.name, p.pid)
            };
            let iodepth = match mode {
                Mode::Closed => p.max_inflight,
                // Open loop: never hold an I/O back for lack of depth.
                Mode::Open => 4096,
            };
            let source = Box::new(TraceSource {
                ios: p.ios.clone().into(),
                mode,
                speed,
                capacity,
                waits: (mode == Mode::Closed && waits).then_some(first_job),
                step: 0,
                unplugged: false,
            });
            let cpu = (p.cpu % nr_cpus as u32) as u16;
            let mut job = SimJob::new(
                name,
                cpu,
                iodepth,
                p.pid,
                Limit::default(),
                source,
                "replay",
            );
            // Under a plug, flushed where the trace shows it ([`TracedIo::new_plug`])
            // and whenever the process waits.
            job.batch = u32::MAX;
            job
        })
        .collect()
}

struct TraceSource {
    ios: VecDeque<TracedIo>,
    mode: Mode,
    speed: f64,
    capacity: u64,
    /// Closed loop with waits: the index of the first replay job.
    waits: Option<u32>,
    /// How far the front I/O got: 0 nothing asked, 1 its drain asked, 2 its wait asked, 3
    /// ready to issue.
    step: u8,
    /// The front I/O's plug flush was asked for.
    unplugged: bool,
}

impl Source for TraceSource {
    fn next(&mut self, _now: mqblk_core::Nanos, _rng: &mut SimRng) -> Next {
        let Some(&TracedIo {
            at,
            io,
            wait,
            new_plug,
        }) = self.ios.front()
        else {
            return Next::Done;
        };
        if new_plug && !self.unplugged {
            self.unplugged = true;
            return Next::Unplug;
        }
        if self.mode == Mode::Open {
            // Ask once for the traced time, then issue on the next call.
            if self.step == 0 {
                self.step = 2;
                return Next::Until(Nanos((at as f64 / self.speed) as u64));
            }
        } else if let Some(first) = self.waits {
            if self.step == 0 {
                self.step = 1;
                if wait.drain {
                    return Next::Drain;
                }
            }
            if self.step == 1 {
                self.step = 2;
                if let Some(a) = wait.after {
                    return Next::After(JobIo {
                        job: first + a.process,
                        io: a.index as u64,
                    });
                }
            }
            if self.step == 2 {
                self.step = 3;
                if wait.think_ns > 0 {
                    return Next::Think(Nanos(wait.think_ns));
                }
            }
        }
        self.ios.pop_front();
        self.step = 0;
        self.unplugged = false;
        let mut io = IoReq {
            op: io.op,
            sector: io.sector,
            nr_sectors: io.nr_sectors,
            flags: io.flags,
            ioprio: None,
        };
        if io.nr_sectors as u64 >= self.capacity {
            io.nr_sectors = 8;
        }
        if io.op != ReqOp::Flush && io.sector + io.nr_sectors as u64 > self.capacity {
            io.sector %= self.capacity - io.nr_sectors as u64;
        }
        Next::Io(io)
    }
}
