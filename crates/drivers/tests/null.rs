//! The null driver through a real `RequestQueue`: data integrity of the memory store, each
//! completion mode, fault injection, and configuration checks.

use mqblk_core::{
    Bio, BlkStatus, CtxIdx, Driver, HctxIdx, IoBuf, Nanos, QueueConfig, ReqFlags, ReqOp,
    RequestQueue, Submit, Submitter, TagSet, TagSetFlags,
};
use mqblk_drivers::{FaultConfig, FaultSpec, IrqMode, NullConfig, NullDevice, NullError};
use std::sync::Arc;

/// A small deterministic generator for test data and offsets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

struct Rig {
    q: Arc<RequestQueue>,
    subs: Vec<Submitter>,
    dev: Arc<NullDevice>,
    now: Nanos,
}

fn rig_ctx(cfg: NullConfig, nr_ctx: u16) -> Rig {
    let set = TagSet::new(cfg.tag_set_config()).unwrap();
    let limits = cfg.queue_limits();
    let dev = NullDevice::new(cfg).unwrap();
    let q = RequestQueue::new(
        set,
        dev.clone(),
        None,
        QueueConfig {
            nr_ctx,
            limits,
            ..Default::default()
        },
    )
    .unwrap();
    let subs = (0..nr_ctx).map(|c| q.submitter(CtxIdx(c))).collect();
    Rig {
        q,
        subs,
        dev,
        now: Nanos(1_000),
    }
}

fn rig(cfg: NullConfig) -> Rig {
    rig_ctx(cfg, 1)
}

impl Rig {
    fn sub(&mut self) -> &mut Submitter {
        &mut self.subs[0]
    }

    /// Submits one bio and polls, advancing the clock, until it comes back.
    /// A bio split into more pieces than there are tags comes back as its rest until the
    /// earlier pieces complete: it is polled for and submitted again.
    fn io(&mut self, bio: Bio) -> Bio {
        let now = self.now;
        let mut outcome = self.q.submit_bio(&mut self.subs[0], bio, now);
        while let Submit::Busy(rest) = outcome {
            assert!(rest.split.is_some(), "no tag for a lone bio");
            self.now = self.now.saturating_add(Nanos::from_micros(100));
            let now = self.now;
            self.q.poll(&mut self.subs[0], now);
            outcome = self.q.submit_bio(&mut self.subs[0], *rest, now);
        }
        for _ in 0..1000 {
            if let Some(bio) = self.subs[0].done.pop() {
                assert!(
                    self.subs[0].done.is_empty(),
                    "one bio submitted, several came back"
                );
                return bio;
            }
            self.now = self.now.saturating_add(Nanos::from_micros(100));
            let now = self.now;
            self.q.poll(&mut self.subs[0], now);
        }
        panic!("bio never completed:\n{}", self.q.debug_state());
    }

    fn write(&mut self, sector: u64, data: &[u8]) -> BlkStatus {
        let mut buf = IoBuf::new(data.len());
        buf.as_mut_slice().copy_from_slice(data);
        let bio = Bio::new(ReqOp::Write, sector, (data.len() / 512) as u32).with_buf(buf);
        self.io(bio).status
    }

    fn read(&mut self, sector: u64, nr_sectors: u32) -> Vec<u8> {
        let mut buf = IoBuf::new(nr_sectors as usize * 512);
        // Poison the buffer so a read that leaves it alone cannot pass for zeroes.
        buf.as_mut_slice().fill(0x5a);
        let bio = self.io(Bio::new(ReqOp::Read, sector, nr_sectors).with_buf(buf));
        assert_eq!(bio.status, BlkStatus::Ok, "read {sector}+{nr_sectors}");
        bio.buf
            .expect("a read gives its buffer back")
            .as_slice()
            .to_vec()
    }

    fn zero(&mut self, op: ReqOp, sector: u64, nr_sectors: u32) {
        assert_eq!(
            self.io(Bio::new(op, sector, nr_sectors)).status,
            BlkStatus::Ok
        );
    }

    /// The queue and the device hold nothing, and the queue tears down cleanly.
    fn assert_drained(&self) {
        assert_eq!(self.q.nr_allocated(), 0, "{}", self.q.debug_state());
        assert!(self.q.tag_set().all_free());
        for h in 0..self.q.nr_hw_queues() {
            assert_eq!(
                self.dev.inflight(HctxIdx(h as u16)),
                0,
                "hctx {h} still holds requests"
            );
            assert_eq!(self.dev.next_event(HctxIdx(h as u16)), None);
        }
        self.q.teardown();
    }
}

const MIB: u64 = 1 << 20;

fn memory_cfg() -> NullConfig {
    NullConfig {
        memory_backed: true,
        size_bytes: 8 * MIB,
        ..Default::default()
    }
}

// ----- memory backing -----------------------------------------------------------------------

#[test]
fn memory_backed_reads_back_what_was_written() {
    let mut r = rig(memory_cfg());
    let nr_sectors = 8 * MIB / 512;
    // The device's contents as they should be; never-written sectors are zero.
    let mut shadow = vec![0u8; (8 * MIB) as usize];
    let mut rng = Rng(0x1234_5678);
    // Hand-picked extents: overlapping, page-straddling, single-sector, at both ends.
    let mut extents: Vec<(u64, u64)> = vec![
        (0, 8),
        (3, 5),
        (7, 17),
        (100, 1),
        (2047, 9),
        (4000, 256),
        (4100, 30),
        (nr_sectors - 9, 9),
    ];
    for _ in 0..300 {
        let len = 1 + rng.below(64);
        extents.push((rng.below(nr_sectors / 4 - len), len));
    }
    for &(sector, len) in &extents {
        let range = (sector * 512) as usize..((sector + len) * 512) as usize;
        let mut data = vec![0u8; range.len()];
        rng.fill(&mut data);
        assert_eq!(r.write(sector, &data), BlkStatus::Ok);
        shadow[range].copy_from_slice(&data);
    }
    for &(sector, len) in &extents {
        let range = (sector * 512) as usize..((sector + len) * 512) as usize;
        assert_eq!(
            r.read(sector, len as u32),
            shadow[range],
            "extent {sector}+{len}"
        );
    }
    // Everything, in maximal reads, including areas never written.
    for sector in (0..nr_sectors).step_by(2048) {
        let range = (sector * 512) as usize..((sector + 2048) * 512) as usize;
        assert_eq!(r.read(sector, 2048), shadow[range], "sweep at {sector}");
    }
    // Only written pages take memory.
    assert!(
        r.dev.stored_bytes() < 4 * MIB,
        "{} bytes stored",
        r.dev.stored_bytes()
    );
    r.assert_drained();
}

#[test]
fn never_written_sectors_read_as_zeroes() {
    let mut r = rig(memory_cfg());
    assert!(r.read(12345, 77).iter().all(|&b| b == 0));
    r.write(8, &[0xffu8; 512]);
    let around = r.read(0, 24);
    assert!(around[..4096].iter().all(|&b| b == 0));
    assert!(around[4096..4608].iter().all(|&b| b == 0xff));
    assert!(around[4608..].iter().all(|&b| b == 0));
    r.assert_drained();
}

#[test]
fn discard_and_write_zeroes_read_back_zeroes() {
    for op in [ReqOp::Discard, ReqOp::WriteZeroes] {
        let mut r = rig(memory_cfg());
        let mut data = vec![0u8; 64 * 512];
        Rng(7).fill(&mut data);
        r.write(0, &data);
        // Unaligned at both ends: sectors 3..45 cover parts of pages 0 and 5 and all between.
        r.zero(op, 3, 42);
        let back = r.read(0, 64);
        assert_eq!(back[..3 * 512], data[..3 * 512], "{op:?}: before the range");
        assert!(
            back[3 * 512..45 * 512].iter().all(|&b| b == 0),
            "{op:?}: the range"
        );
        assert_eq!(
            back[45 * 512..],
            data[45 * 512..],
            "{op:?}: after the range"
        );
        // Whole pages went away rather than being kept as zeroes.
        assert_eq!(r.dev.stored_bytes(), 4 * 4096, "{op:?}");
        // Zeroing what was never written is harmless.
        r.zero(op, 1000, 100);
        assert!(r.read(1000, 100).iter().all(|&b| b == 0));
        // And the range can be written again.
        r.write(8, &data[..512]);
        assert_eq!(r.read(8, 1), data[..512]);
        r.assert_drained();
    }
}

#[test]
fn flush_is_accepted() {
    let mut r = rig(memory_cfg());
    r.write(0, &[1u8; 4096]);
    assert_eq!(r.io(Bio::new(ReqOp::Flush, 0, 0)).status, BlkStatus::Ok);
    assert_eq!(r.read(0, 8), vec![1u8; 4096]);
    r.assert_drained();
}

#[test]
fn merged_bios_each_move_their_own_data() {
    let mut r = rig(memory_cfg());
    let mut rng = Rng(99);
    let mut all = vec![0u8; 16 * 4096];
    rng.fill(&mut all);
    let now = r.now;
    r.sub().plug.start();
    // Sixteen contiguous 4 KiB writes merge into one request with sixteen bios.
    let mut merged = 0;
    for (i, chunk) in all.chunks(4096).enumerate() {
        let mut buf = IoBuf::new(4096);
        buf.as_mut_slice().copy_from_slice(chunk);
        let bio = Bio::new(ReqOp::Write, i as u64 * 8, 8)
            .with_buf(buf)
            .with_private(i as u64);
        match r.q.submit_bio(&mut r.subs[0], bio, now) {
            Submit::Merged => merged += 1,
            Submit::Queued => {}
            other => panic!("{other:?}"),
        }
    }
    r.q.finish_plug(&mut r.subs[0], now);
    assert!(merged > 0, "the writes were expected to merge");
    assert_eq!(r.sub().done.len(), 16);
    assert!(r.sub().done.iter().all(|b| b.status == BlkStatus::Ok));
    r.sub().done.clear();
    // Read back through merged reads too.
    r.sub().plug.start();
    for i in 0..16u64 {
        let bio = Bio::new(ReqOp::Read, i * 8, 8)
            .with_buf(IoBuf::new(4096))
            .with_private(i);
        r.q.submit_bio(&mut r.subs[0], bio, now);
    }
    r.q.finish_plug(&mut r.subs[0], now);
    let mut done = std::mem::take(&mut r.sub().done);
    done.sort_by_key(|b| b.private);
    assert_eq!(done.len(), 16);
    for (i, bio) in done.iter().enumerate() {
        assert_eq!(bio.status, BlkStatus::Ok);
        assert_eq!(
            bio.buf.as_ref().unwrap().as_slice(),
            &all[i * 4096..(i + 1) * 4096],
            "bio {i}"
        );
    }
    r.assert_drained();
}

#[test]
fn data_bio_without_buffer_is_invalid_on_memory_device() {
    let mut r = rig(memory_cfg());
    assert_eq!(
        r.io(Bio::new(ReqOp::Write, 0, 8)).status,
        BlkStatus::Invalid
    );
    assert_eq!(r.io(Bio::new(ReqOp::Read, 0, 8)).status, BlkStatus::Invalid);
    assert_eq!(r.dev.stored_bytes(), 0, "a refused write stores nothing");
    r.assert_drained();

    // Without memory backing there is nothing to move, so no buffer is needed.
    let mut r = rig(NullConfig::default());
    assert_eq!(r.io(Bio::new(ReqOp::Write, 0, 8)).status, BlkStatus::Ok);
    assert_eq!(r.io(Bio::new(ReqOp::Read, 0, 8)).status, BlkStatus::Ok);
    r.assert_drained();
}

#[test]
fn block_size_reaches_the_queue_limits() {
    let mut r = rig(NullConfig {
        bs: 4096,
        ..memory_cfg()
    });
    assert_eq!(r.q.limits().logical_block_size, 4096);
    // A bio smaller than a logical block is refused by the queue before the driver.
    let bio = Bio::new(ReqOp::Write, 0, 1).with_buf(IoBuf::new(512));
    assert!(matches!(
        r.q.submit_bio(&mut r.subs[0], bio, Nanos(1)),
        Submit::Failed
    ));
    assert_eq!(r.sub().done.pop().unwrap().status, BlkStatus::Invalid);
    r.write(8, &[9u8; 4096]);
    assert_eq!(r.read(8, 8), vec![9u8; 4096]);
    r.assert_drained();
}

// ----- completion modes ----------------------------------------------------------------------

/// Submits `n` bios in one go and returns how many came back during submission.
fn submit_n(r: &mut Rig, n: u64, flags: ReqFlags) -> usize {
    let now = r.now;
    for i in 0..n {
        let bio = Bio::new(ReqOp::Write, i * 64, 8)
            .with_flags(flags)
            .with_private(i);
        assert!(matches!(
            r.q.submit_bio(&mut r.subs[0], bio, now),
            Submit::Queued
        ));
    }
    r.sub().done.len()
}

fn assert_all_ok(done: &[Bio], n: u64) {
    assert_eq!(done.len() as u64, n);
    let mut seen: Vec<u64> = done.iter().map(|b| b.private).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
    assert!(done.iter().all(|b| b.status == BlkStatus::Ok));
}

#[test]
fn irqmode_none_completes_inline() {
    let mut r = rig(NullConfig::default());
    for _ in 0..10 {
        assert_eq!(submit_n(&mut r, 32, ReqFlags::empty()), 32);
        let done = std::mem::take(&mut r.sub().done);
        assert_all_ok(&done, 32);
        assert_eq!(r.dev.inflight(HctxIdx(0)), 0);
    }
    r.assert_drained();
}

#[test]
fn irqmode_softirq_completes_on_poll() {
    let mut r = rig(NullConfig {
        irqmode: IrqMode::Softirq,
        ..Default::default()
    });
    assert_eq!(
        submit_n(&mut r, 48, ReqFlags::empty()),
        0,
        "nothing completes before a poll"
    );
    assert_eq!(r.dev.inflight(HctxIdx(0)), 48);
    assert_eq!(r.dev.next_event(HctxIdx(0)), None);
    let now = r.now;
    assert_eq!(r.q.poll(&mut r.subs[0], now), 48);
    let done = std::mem::take(&mut r.sub().done);
    assert_all_ok(&done, 48);
    r.assert_drained();
}

#[test]
fn irqmode_timer_completes_after_completion_nsec() {
    let cfg = NullConfig {
        irqmode: IrqMode::Timer,
        completion_nsec: 50_000,
        ..Default::default()
    };
    let mut r = rig(cfg);
    let t0 = r.now;
    let due = t0.saturating_add(Nanos(50_000));
    assert_eq!(submit_n(&mut r, 40, ReqFlags::empty()), 0);
    assert_eq!(r.dev.inflight(HctxIdx(0)), 40);
    assert_eq!(r.dev.next_event(HctxIdx(0)), Some(due));
    for t in [t0.0, t0.0 + 1, due.0 - 1] {
        assert_eq!(
            r.q.poll(&mut r.subs[0], Nanos(t)),
            0,
            "completed early at {t}"
        );
    }
    // A second wave issued later falls due later.
    r.now = Nanos(t0.0 + 20_000);
    assert_eq!(submit_n(&mut r, 10, ReqFlags::empty()), 0);
    assert_eq!(r.q.poll(&mut r.subs[0], due), 40);
    assert_eq!(r.dev.next_event(HctxIdx(0)), Some(Nanos(due.0 + 20_000)));
    assert_eq!(r.dev.inflight(HctxIdx(0)), 10);
    assert_eq!(r.q.poll(&mut r.subs[0], Nanos(due.0 + 20_000)), 50);
    let done = std::mem::take(&mut r.sub().done);
    assert_eq!(done.len(), 50);
    assert!(done.iter().all(|b| b.status == BlkStatus::Ok));
    r.assert_drained();
}

#[test]
fn poll_queues_complete_only_on_poll() {
    // Polled I/O waits for a poll even when the device otherwise completes inline.
    let mut r = rig(NullConfig {
        poll_queues: 1,
        ..Default::default()
    });
    assert_eq!(r.q.nr_hw_queues(), 2);
    assert_eq!(submit_n(&mut r, 16, ReqFlags::POLLED), 0);
    assert_eq!(r.dev.inflight(HctxIdx(1)), 16);
    assert_eq!(r.dev.inflight(HctxIdx(0)), 0);
    // Unpolled I/O on the same device still completes inline.
    let bio = Bio::new(ReqOp::Read, 0, 8).with_private(100);
    r.q.submit_bio(&mut r.subs[0], bio, Nanos(1));
    assert_eq!(r.sub().done.pop().map(|b| b.private), Some(100));
    let now = r.now;
    assert_eq!(r.q.poll(&mut r.subs[0], now), 16);
    let done = std::mem::take(&mut r.sub().done);
    assert_all_ok(&done, 16);
    r.assert_drained();
}

#[test]
fn pending_request_is_not_ended_by_the_timeout_handler() {
    // A request the device still holds (not one it chose to lose) only gets more time.
    for faults in [
        FaultConfig::default(),
        FaultConfig {
            fail: FaultSpec::every(1000),
            ..Default::default()
        },
    ] {
        let mut r = rig(NullConfig {
            irqmode: IrqMode::Softirq,
            faults,
            ..Default::default()
        });
        assert_eq!(submit_n(&mut r, 1, ReqFlags::empty()), 0);
        // The timer alone, without reaping the driver, runs the timeout scan.
        let late = r.now.saturating_add(Nanos::from_secs(31));
        r.q.timer(&mut r.subs[0], late);
        assert!(r.sub().done.is_empty());
        assert_eq!(r.dev.inflight(HctxIdx(0)), 1);
        assert_eq!(r.q.poll(&mut r.subs[0], late), 1);
        assert_eq!(r.sub().done.pop().unwrap().status, BlkStatus::Ok);
        r.assert_drained();
    }
}

// ----- fault injection -----------------------------------------------------------------------

#[derive(Debug, Default, PartialEq)]
struct Tally {
    ok: u64,
    ioerr: u64,
    timeout: u64,
    /// Final status of each bio, by its cookie.
    statuses: Vec<BlkStatus>,
    requeued: u64,
    busy: u64,
}

/// Drives `total` bios through the device from `nr_ctx` submitters, each keeping up to 32
/// in flight, polling and moving the clock on, jumping past the request timeout whenever
/// nothing completes. Checks that every bio comes back exactly once and that the queue and
/// the device end empty.
fn drive(cfg: NullConfig, nr_ctx: u16, total: u64) -> Tally {
    const WINDOW: u64 = 32;
    let mut r = rig_ctx(cfg, nr_ctx);
    let capacity = r.dev.capacity_sectors();
    let mut rng = Rng(0xfeed);
    let mut statuses: Vec<Option<BlkStatus>> = vec![None; total as usize];
    let mut next = 0u64;
    let mut completed = 0u64;
    let mut outstanding = vec![0u64; nr_ctx as usize];
    let mut held: Vec<Option<Bio>> = (0..nr_ctx).map(|_| None).collect();
    let mut rounds = 0;
    while completed < total {
        rounds += 1;
        assert!(
            rounds < 200_000,
            "no progress: {completed} of {total} back\n{}",
            r.q.debug_state()
        );
        let mut got = 0;
        for c in 0..nr_ctx as usize {
            while outstanding[c] < WINDOW {
                let bio = match held[c].take() {
                    Some(bio) => bio,
                    None if next < total => {
                        let op = if rng.below(3) == 0 {
                            ReqOp::Read
                        } else {
                            ReqOp::Write
                        };
                        // Mostly scattered, sometimes following the previous bio so that
                        // requests waiting on a busy queue can merge.
                        let sector = if next % 4 == 1 {
                            (next - 1) * 8 % capacity + 8
                        } else {
                            rng.below(capacity / 8) * 8
                        };
                        next += 1;
                        Bio::new(op, sector.min(capacity - 8), 8).with_private(next - 1)
                    }
                    None => break,
                };
                match r.q.submit_bio(&mut r.subs[c], bio, r.now) {
                    Submit::Queued | Submit::Merged | Submit::Done => outstanding[c] += 1,
                    Submit::Busy(bio) => {
                        held[c] = Some(*bio);
                        break;
                    }
                    Submit::Failed => panic!("bio refused by the queue"),
                }
            }
            r.q.poll(&mut r.subs[c], r.now);
            for bio in r.subs[c].done.drain(..) {
                let slot = &mut statuses[bio.private as usize];
                assert!(slot.is_none(), "bio {} came back twice", bio.private);
                *slot = Some(bio.status);
                outstanding[c] -= 1;
                completed += 1;
                got += 1;
            }
        }
        let step = if got == 0 {
            Nanos::from_secs(31)
        } else {
            Nanos::from_micros(500)
        };
        r.now = r.now.saturating_add(step);
    }
    assert!(held.iter().all(Option::is_none));
    let mut tally = Tally::default();
    for s in &statuses {
        let s = s.expect("every bio came back");
        match s {
            BlkStatus::Ok => tally.ok += 1,
            BlkStatus::IoErr => tally.ioerr += 1,
            BlkStatus::Timeout => tally.timeout += 1,
            other => panic!("unexpected status {other:?}"),
        }
        tally.statuses.push(s);
    }
    for h in 0..r.q.nr_hw_queues() {
        let st = r.q.hctx(HctxIdx(h as u16)).stats.total();
        tally.requeued += st.requeued;
        tally.busy += st.busy;
    }
    r.assert_drained();
    tally
}

fn faulty(irqmode: IrqMode, faults: FaultConfig) -> NullConfig {
    NullConfig {
        irqmode,
        faults,
        ..Default::default()
    }
}

const MODES: [IrqMode; 3] = [IrqMode::None, IrqMode::Softirq, IrqMode::Timer];

#[test]
fn fail_every_nth_fails_exactly_those() {
    for mode in MODES {
        let t = drive(
            faulty(
                mode,
                FaultConfig {
                    fail: FaultSpec::every(10),
                    ..Default::default()
                },
            ),
            1,
            2000,
        );
        // Nothing is retried or merged, so exactly every tenth request fails.
        assert_eq!(t.ioerr, 200, "{mode:?}");
        assert_eq!(t.ok, 1800, "{mode:?}");
        assert_eq!(t.requeued + t.timeout, 0, "{mode:?}");
    }
}

#[test]
fn fail_with_probability() {
    for mode in MODES {
        let t = drive(
            faulty(
                mode,
                FaultConfig {
                    fail: FaultSpec::probability(10.0),
                    seed: 3,
                    ..Default::default()
                },
            ),
            1,
            4000,
        );
        assert!(
            (250..550).contains(&t.ioerr),
            "{mode:?}: {} failures in 4000 at 10%",
            t.ioerr
        );
        assert_eq!(t.timeout, 0);
    }
}

#[test]
fn timeout_every_nth_is_ended_by_the_timeout_handler() {
    for mode in MODES {
        let t = drive(
            faulty(
                mode,
                FaultConfig {
                    timeout: FaultSpec::every(16),
                    ..Default::default()
                },
            ),
            1,
            1600,
        );
        assert_eq!(t.timeout, 100, "{mode:?}");
        assert_eq!(t.ok, 1500, "{mode:?}");
        assert_eq!(t.ioerr, 0);
    }
}

#[test]
fn timeout_with_probability() {
    for mode in MODES {
        let t = drive(
            faulty(
                mode,
                FaultConfig {
                    timeout: FaultSpec::probability(5.0),
                    seed: 11,
                    ..Default::default()
                },
            ),
            1,
            2000,
        );
        assert!(
            (50..160).contains(&t.timeout),
            "{mode:?}: {} timeouts in 2000 at 5%",
            t.timeout
        );
    }
}

#[test]
fn requeue_exercises_both_busy_and_driver_requeue() {
    for mode in MODES {
        for requeue in [FaultSpec::every(5), FaultSpec::probability(20.0)] {
            let t = drive(
                faulty(
                    mode,
                    FaultConfig {
                        requeue,
                        seed: 5,
                        ..Default::default()
                    },
                ),
                1,
                2000,
            );
            // Requeued requests are retried until they get through: all succeed.
            assert_eq!(t.ok, 2000, "{mode:?} {requeue:?}");
            assert!(t.busy > 0, "{mode:?} {requeue:?}: no Resource answers");
            assert!(t.requeued > 0, "{mode:?} {requeue:?}: no driver requeues");
        }
    }
}

fn combined(seed: u64) -> FaultConfig {
    FaultConfig {
        fail: FaultSpec {
            every_nth: 13,
            probability_pct: 2.0,
        },
        timeout: FaultSpec {
            every_nth: 29,
            probability_pct: 1.0,
        },
        requeue: FaultSpec {
            every_nth: 7,
            probability_pct: 3.0,
        },
        seed,
    }
}

#[test]
fn combined_faults_every_bio_comes_back_once() {
    for mode in MODES {
        let t = drive(faulty(mode, combined(42)), 1, 3000);
        assert!(t.ioerr > 0 && t.timeout > 0 && t.ok > 0, "{mode:?}: {t:?}");
        assert!(t.busy > 0 && t.requeued > 0, "{mode:?}");
    }
}

#[test]
fn combined_faults_on_several_queues() {
    for mode in MODES {
        for shared_tag_bitmap in [false, true] {
            let cfg = NullConfig {
                submit_queues: 4,
                shared_tag_bitmap,
                ..faulty(mode, combined(9))
            };
            let t = drive(cfg, 4, 4000);
            assert!(
                t.ioerr > 0 && t.timeout > 0,
                "{mode:?} shared={shared_tag_bitmap}: {t:?}"
            );
        }
    }
}

#[test]
fn combined_faults_with_memory_backing() {
    // Writes and reads without buffers would be invalid on a memory device, so give the
    // driver something to do: a data pass with faults on must still come back whole.
    let cfg = NullConfig {
        memory_backed: true,
        size_bytes: 4 * MIB,
        ..faulty(IrqMode::Softirq, combined(1))
    };
    let mut r = rig(cfg);
    let mut seen = vec![false; 256];
    let mut rounds = 0;
    let mut next = 0u64;
    while seen.iter().any(|s| !s) {
        rounds += 1;
        assert!(rounds < 10_000);
        while next < 256 && r.q.nr_allocated() < 32 {
            let bio = Bio::new(ReqOp::Write, next * 8, 8)
                .with_buf(IoBuf::new(4096))
                .with_private(next);
            match r.q.submit_bio(&mut r.subs[0], bio, r.now) {
                Submit::Busy(_) => break,
                _ => next += 1,
            }
        }
        let got = r.q.poll(&mut r.subs[0], r.now);
        for bio in r.subs[0].done.drain(..) {
            assert!(!seen[bio.private as usize]);
            seen[bio.private as usize] = true;
            assert!(matches!(
                bio.status,
                BlkStatus::Ok | BlkStatus::IoErr | BlkStatus::Timeout
            ));
        }
        r.now = r.now.saturating_add(if got == 0 {
            Nanos::from_secs(31)
        } else {
            Nanos::from_micros(10)
        });
    }
    r.assert_drained();
}

#[test]
fn faults_are_reproducible_from_the_seed() {
    for mode in MODES {
        let a = drive(faulty(mode, combined(77)), 1, 1500);
        let b = drive(faulty(mode, combined(77)), 1, 1500);
        assert_eq!(a, b, "{mode:?}: same seed, different run");
    }
    let a = drive(faulty(IrqMode::None, combined(1)), 1, 1500);
    let b = drive(faulty(IrqMode::None, combined(2)), 1, 1500);
    assert_ne!(
        a.statuses, b.statuses,
        "the seed should change which requests fail"
    );
}

// ----- configuration -------------------------------------------------------------------------

#[test]
fn defaults_match_null_blk() {
    let cfg = NullConfig::default();
    cfg.validate().unwrap();
    assert_eq!(
        (cfg.submit_queues, cfg.poll_queues, cfg.hw_queue_depth),
        (1, 0, 64)
    );
    assert_eq!(cfg.irqmode, IrqMode::None);
    assert_eq!(cfg.completion_nsec, 10_000);
    assert_eq!(cfg.size_bytes, 250 << 30);
    assert_eq!((cfg.bs, cfg.max_sectors), (512, 0));
    assert!(!cfg.memory_backed && !cfg.rotational && !cfg.blocking && !cfg.shared_tag_bitmap);
    assert!(!cfg.faults.is_enabled());

    let dev = NullDevice::new(cfg).unwrap();
    assert_eq!(dev.name(), "null");
    assert_eq!(dev.capacity_sectors(), 250 << 21);
    assert!(!dev.rotational());
    assert!(NullDevice::new(NullConfig {
        rotational: true,
        ..Default::default()
    })
    .unwrap()
    .rotational());
}

#[test]
fn tag_set_config_follows_the_knobs() {
    let cfg = NullConfig {
        submit_queues: 3,
        poll_queues: 2,
        hw_queue_depth: 128,
        shared_tag_bitmap: true,
        blocking: true,
        ..Default::default()
    };
    let ts = cfg.tag_set_config();
    assert_eq!((ts.maps.default, ts.maps.read, ts.maps.poll), (3, 0, 2));
    assert_eq!(ts.queue_depth, 128);
    assert!(ts.flags.contains(TagSetFlags::TAG_HCTX_SHARED));
    assert!(ts.flags.contains(TagSetFlags::BLOCKING));
    let set = TagSet::new(ts).unwrap();
    assert_eq!(set.distinct_maps(), 1);
    let plain = NullConfig::default().tag_set_config();
    assert_eq!(plain.flags, TagSetFlags::default());
    assert_eq!(
        NullConfig {
            max_sectors: 256,
            ..Default::default()
        }
        .queue_limits()
        .max_sectors,
        256
    );
}

#[test]
fn invalid_configs_name_the_knob_in_one_line() {
    let d = NullConfig::default;
    let bad_fault = |f: FaultConfig| NullConfig { faults: f, ..d() };
    let cases: Vec<(NullConfig, &str)> = vec![
        (
            NullConfig {
                submit_queues: 0,
                ..d()
            },
            "submit_queues",
        ),
        (
            NullConfig {
                submit_queues: 5000,
                ..d()
            },
            "submit_queues",
        ),
        (
            NullConfig {
                poll_queues: 5000,
                ..d()
            },
            "poll_queues",
        ),
        (
            NullConfig {
                hw_queue_depth: 0,
                ..d()
            },
            "hw_queue_depth",
        ),
        (
            NullConfig {
                hw_queue_depth: 20_000,
                ..d()
            },
            "hw_queue_depth",
        ),
        (NullConfig { bs: 1000, ..d() }, "bs"),
        (NullConfig { bs: 8192, ..d() }, "bs"),
        (
            NullConfig {
                size_bytes: 0,
                ..d()
            },
            "size_bytes",
        ),
        (
            NullConfig {
                size_bytes: 4097,
                bs: 4096,
                ..d()
            },
            "size_bytes",
        ),
        (
            NullConfig {
                max_sectors: 4,
                ..d()
            },
            "max_sectors",
        ),
        (
            bad_fault(FaultConfig {
                fail: FaultSpec::probability(150.0),
                ..Default::default()
            }),
            "faults.fail",
        ),
        (
            bad_fault(FaultConfig {
                timeout: FaultSpec::probability(-1.0),
                ..Default::default()
            }),
            "faults.timeout",
        ),
        (
            bad_fault(FaultConfig {
                timeout: FaultSpec::probability(f64::NAN),
                ..Default::default()
            }),
            "faults.timeout",
        ),
        (
            bad_fault(FaultConfig {
                requeue: FaultSpec::every(1),
                ..Default::default()
            }),
            "faults.requeue",
        ),
        (
            bad_fault(FaultConfig {
                requeue: FaultSpec::probability(100.0),
                ..Default::default()
            }),
            "faults.requeue",
        ),
    ];
    for (cfg, knob) in cases {
        let err = cfg.validate().expect_err(knob);
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{msg:?}");
        assert!(msg.contains(knob), "{msg:?} does not name {knob}");
        assert!(NullDevice::new(cfg).is_err(), "{knob}");
    }
    assert_eq!(
        NullConfig {
            hw_queue_depth: 0,
            ..d()
        }
        .validate(),
        Err(NullError::HwQueueDepth(0))
    );
    // The boundaries themselves are fine.
    for cfg in [
        NullConfig {
            submit_queues: 1024,
            poll_queues: 1024,
            hw_queue_depth: 10240,
            ..d()
        },
        NullConfig {
            bs: 4096,
            size_bytes: 4096,
            max_sectors: 8,
            ..d()
        },
        bad_fault(FaultConfig {
            fail: FaultSpec::probability(100.0),
            timeout: FaultSpec::every(1),
            ..Default::default()
        }),
        bad_fault(FaultConfig {
            requeue: FaultSpec {
                every_nth: 2,
                probability_pct: 99.0,
            },
            ..Default::default()
        }),
    ] {
        cfg.validate().unwrap();
    }
}

/// `bio_split_to_limits`: a bio larger than a request may be (8192 sectors here, the
/// kernel's default cap, and 128 segments of a heap buffer's 4 KiB pages) goes to the driver
/// as pieces of at most that, and comes back once, whole, with its data: 2, 8 and 32 MiB, in
/// every completion mode, and the first again at the end.
#[test]
fn bios_larger_than_max_sectors_are_split_and_complete_once() {
    for mode in MODES {
        let mut r = rig(NullConfig {
            memory_backed: true,
            irqmode: mode,
            size_bytes: 128 << 20,
            ..NullConfig::default()
        });
        let lim = r.q.limits();
        assert_eq!(lim.max_sectors, mqblk_core::merge::BLK_DEF_MAX_SECTORS_CAP);
        // A heap buffer's pages count a segment each.
        let max = (lim.max_sectors as u64).min(lim.max_segments as u64 * 8);
        assert_eq!(max, 1024);
        let mut rng = Rng(7);
        let mut sector = 0u64;
        let mut first = Vec::new();
        for mib in [2u64, 8, 32] {
            let bytes = (mib << 20) as usize;
            let mut data = vec![0u8; bytes];
            rng.fill(&mut data);
            let issued = r.q.hctx(HctxIdx(0)).stats.total().issued;
            assert_eq!(r.write(sector, &data), BlkStatus::Ok, "{mib} MiB, {mode:?}");
            let pieces = r.q.hctx(HctxIdx(0)).stats.total().issued - issued;
            assert_eq!(
                pieces,
                (bytes as u64 / 512).div_ceil(max),
                "{mib} MiB went as pieces of 128 pages"
            );
            assert!(
                r.read(sector, (bytes / 512) as u32) == data,
                "{mib} MiB read back, {mode:?}"
            );
            if first.is_empty() {
                first = data;
            }
            sector += bytes as u64 / 512;
        }
        // The pieces' buffers are kept for later pieces: the first region, read again
        // through buffers that held other data since, is still its own.
        assert!(
            r.read(0, (first.len() / 512) as u32) == first,
            "2 MiB read again, {mode:?}"
        );
        r.q.teardown();
    }
}

/// A split bio that runs out of tags part way comes back as its rest (its original's
/// cookie, no buffer of its own); resubmitted, the original completes once with all its
/// data, as a task that slept in tag allocation carries on.
#[test]
fn a_split_bio_short_of_tags_comes_back_as_its_rest() {
    let mut r = rig(NullConfig {
        memory_backed: true,
        irqmode: IrqMode::Timer,
        hw_queue_depth: 2,
        size_bytes: 64 << 20,
        // Pieces of 1280 KiB: seven for 8 MiB.
        max_sectors: 2560,
        ..NullConfig::default()
    });
    let mut data = vec![0u8; 8 << 20];
    Rng(3).fill(&mut data);
    let mut buf = IoBuf::new(data.len());
    buf.as_mut_slice().copy_from_slice(&data);
    let bio = Bio::new(ReqOp::Write, 2048, (data.len() / 512) as u32)
        .with_buf(buf)
        .with_private(42);
    let now = r.now;
    let mut rest = match r.q.submit_bio(&mut r.subs[0], bio, now) {
        Submit::Busy(rest) => *rest,
        other => panic!("8 MiB on 2 tags went in at once: {other:?}"),
    };
    let mut returns = 1;
    let done = loop {
        assert_eq!(rest.private, 42, "the rest keeps the original's cookie");
        assert!(rest.buf.is_none() && rest.split.is_some());
        assert!(rest.sector > 2048 && rest.end_sector() == 2048 + 16384);
        r.now = r.now.saturating_add(Nanos::from_micros(100));
        let now = r.now;
        r.q.poll(&mut r.subs[0], now);
        assert!(
            r.subs[0].done.is_empty(),
            "completed before its rest went in"
        );
        match r.q.submit_bio(&mut r.subs[0], rest, now) {
            Submit::Busy(b) => {
                rest = *b;
                returns += 1;
            }
            Submit::Queued => break r.io_wait(),
            other => panic!("{other:?}"),
        }
    };
    assert!(returns >= 2, "two tags cannot take 7 pieces in one go");
    assert_eq!((done.private, done.status), (42, BlkStatus::Ok));
    assert_eq!(done.nr_sectors, 16384, "the original, whole");
    assert!(r.read(2048, 16384) == data);
    r.q.teardown();
}

impl Rig {
    /// Polls until one bio comes back.
    fn io_wait(&mut self) -> Bio {
        for _ in 0..1000 {
            if let Some(bio) = self.subs[0].done.pop() {
                assert!(self.subs[0].done.is_empty(), "several came back");
                return bio;
            }
            self.now = self.now.saturating_add(Nanos::from_micros(100));
            let now = self.now;
            self.q.poll(&mut self.subs[0], now);
        }
        panic!("bio never completed:\n{}", self.q.debug_state());
    }
}
