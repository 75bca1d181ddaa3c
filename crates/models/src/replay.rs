//! A profile's job replayed on a model, on the device's side alone: the commands fio's jobs
//! send, split as the block layer splits them (`bio_split_rw` on the model's queue limits,
//! a page per segment as fio's buffers give), taken by the driver's ring where the model
//! has one ([`ModelPort`]) in the order they arrive, each job submitting again the moment
//! its I/O completes. The block layer's requeueing is not replayed: it puts each request of
//! a batch the ring refused back at the head (`blk_mq_requeue_work`), so they come back
//! reversed, and a ring's order here is not the simulator's.
//!
//! The fit uses it where a measurement gives a parameter in no closed form: the model's
//! commands share the device with whatever else is in flight, so the time a measured
//! read took beside a write flood is not the work the model should give it
//! ([`crate::profile::Profile::fit`]). The host's part (submission and completion on its
//! CPUs, a scheduler) is left out: a few microseconds against the milliseconds a read
//! beside the flood takes.

use crate::port::{Accept, ModelPort};
use crate::{Cmd, DeviceModel, SimRng};
use mqblk_core::{BvecLayout, CompletionBatch, FaultConfig, Nanos, ReqOp, RqId};
use std::collections::{HashMap, VecDeque};

/// One random 4 KiB read at a time beside sequential writes of `write_bytes`, `writes` in
/// flight (the profile's `randread_4k_qd1_under_writes`), on `model`, until `reads` reads
/// have completed: their mean latency, in ns. `None` if the model stops completing.
pub fn reads_beside_writes_ns(
    model: Box<dyn DeviceModel>,
    write_bytes: u64,
    writes: u32,
    reads: u64,
    seed: u64,
) -> Option<f64> {
    let mut r = Replay::new(model, seed);
    let pieces = r.split(ReqOp::Write, write_bytes);
    for _ in 0..writes {
        r.write(&pieces);
    }
    r.read();
    let (mut sum, mut done) = (0u128, 0u64);
    let mut out = Vec::new();
    while done < reads {
        let t = r.port.model.next_event()?;
        r.now = t;
        out.clear();
        r.complete(t, &mut out);
        for &(job, started) in &out {
            match job {
                Job::Read => {
                    sum += u128::from(t.0 - started);
                    done += 1;
                    r.read();
                }
                Job::Write => r.write(&pieces),
            }
        }
        r.drain(t);
    }
    Some(sum as f64 / reads as f64)
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Job {
    Read,
    Write,
}

/// An I/O fio issued: its job, when, and its pieces not yet completed.
struct Io {
    job: Job,
    at: u64,
    left: u32,
}

struct Replay {
    port: ModelPort,
    rng: SimRng,
    now: Nanos,
    ios: HashMap<u64, Io>,
    /// Piece id to its I/O.
    of: HashMap<u32, u64>,
    /// Per hardware queue, pieces its ring had no room for, in order (its dispatch list).
    waiting: Vec<VecDeque<Cmd>>,
    next_io: u64,
    next_piece: u32,
    /// Where the next write starts: the writes run through the device and start over at
    /// its start, as fio's sequential job does at the end of its file.
    next_write: u64,
}

impl Replay {
    fn new(model: Box<dyn DeviceModel>, seed: u64) -> Replay {
        let nr_hw = usize::from(model.nr_hw_queues().max(1));
        Replay {
            port: ModelPort::new(model, &FaultConfig::default()),
            rng: SimRng::new(seed),
            now: Nanos(0),
            ios: HashMap::new(),
            of: HashMap::new(),
            waiting: vec![VecDeque::new(); nr_hw],
            next_io: 0,
            next_piece: 0,
            next_write: 0,
        }
    }

    /// The sectors of each request an I/O of `bytes` becomes.
    fn split(&self, op: ReqOp, bytes: u64) -> Vec<u32> {
        let limits = self.port.model.queue_limits();
        let mut left = (bytes >> 9) as u32;
        let mut layout = BvecLayout::PAGES;
        let mut pieces = Vec::new();
        while left > 0 {
            let n = limits.split_sectors(op, 0, left, layout).clamp(1, left);
            pieces.push(n);
            layout = layout.advanced(u64::from(n) << 9);
            left -= n;
        }
        pieces
    }

    fn write(&mut self, pieces: &[u32]) {
        let len: u64 = pieces.iter().map(|&n| u64::from(n)).sum();
        if self.next_write + len > self.port.model.capacity_sectors() {
            self.next_write = 0;
        }
        let io = self.start(Job::Write, pieces.len() as u32);
        let mut s = self.next_write;
        self.next_write += len;
        for &n in pieces {
            self.send(io, 0, ReqOp::Write, s, n);
            s += u64::from(n);
        }
    }

    fn read(&mut self) {
        let blocks = (self.port.model.capacity_sectors() / 8).max(1);
        let sector = self.rng.below(blocks) * 8;
        let io = self.start(Job::Read, 1);
        // The two jobs run on two CPUs: where the device has a queue per CPU, the reads
        // take the second.
        let hw = (1 % self.waiting.len()) as u16;
        self.send(io, hw, ReqOp::Read, sector, 8);
    }

    fn start(&mut self, job: Job, left: u32) -> u64 {
        let io = self.next_io;
        self.next_io += 1;
        let at = self.now.0;
        self.ios.insert(io, Io { job, at, left });
        io
    }

    fn send(&mut self, io: u64, hw: u16, op: ReqOp, sector: u64, nr_sectors: u32) {
        let id = self.next_piece;
        self.next_piece = self.next_piece.wrapping_add(1);
        self.of.insert(id, io);
        let cmd = Cmd {
            id: u64::from(id),
            op,
            sector,
            nr_sectors,
            fua: false,
            group: 0,
        };
        self.waiting[usize::from(hw)].push_back(cmd);
        self.drain(self.now);
    }

    /// Hands the device what waits, in order on each hardware queue, while its ring has
    /// room.
    fn drain(&mut self, now: Nanos) {
        for hw in 0..self.waiting.len() {
            while let Some(&cmd) = self.waiting[hw].front() {
                let h = hw as u16;
                // Heap pages, as `split` laid the commands out.
                let segments = self
                    .port
                    .model
                    .queue_limits()
                    .phys_segments(BvecLayout::PAGES, cmd.bytes());
                if self.port.accept(h, RqId(cmd.id as u32), segments) != Accept::Take {
                    break;
                }
                self.waiting[hw].pop_front();
                self.port.deliver(h, cmd, now);
            }
        }
    }

    /// Runs the device to `t`; the fio I/Os that completed land in `out` with when each
    /// was issued.
    fn complete(&mut self, t: Nanos, out: &mut Vec<(Job, u64)>) {
        let mut finished = Vec::new();
        self.port.advance(t, &mut finished);
        let mut batch = CompletionBatch::new();
        for f in finished {
            self.port.raise(f);
        }
        for hw in 0..self.waiting.len() {
            self.port.poll(hw as u16, &mut batch);
        }
        for &(id, _) in batch.finished() {
            let io = self.of.remove(&id.0).expect("a piece sent");
            let e = self.ios.get_mut(&io).expect("an I/O issued");
            e.left -= 1;
            if e.left == 0 {
                let e = self.ios.remove(&io).expect("an I/O issued");
                out.push((e.job, e.at));
            }
        }
    }
}
