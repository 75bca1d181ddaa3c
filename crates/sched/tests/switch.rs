//! Changing a running queue: freezing it, switching its elevator (`elevator_switch`) and its
//! `nr_requests` (`blk_mq_update_nr_requests`), and storing tunables, with I/O in flight and
//! from several threads at once.

use mqblk_core::{
    Bio, CtxIdx, FreezeError, IoBuf, Nanos, QueueConfig, ReqFlags, ReqOp, RequestQueue, Submit,
    Submitter, TagSet, MAX_SCHED_RQ,
};
use mqblk_drivers::{IrqMode, NullConfig, NullDevice};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A memory-backed null device with a write cache whose completions wait for a poll, so
/// requests stay allocated until the test reaps them.
fn queue(nr_hw: u16, sched: Option<&str>) -> Arc<RequestQueue> {
    queue_irq(nr_hw, sched, IrqMode::Softirq)
}

/// `irqmode=Timer` leaves completions in the device until someone polls for them.
fn queue_irq(nr_hw: u16, sched: Option<&str>, irqmode: IrqMode) -> Arc<RequestQueue> {
    let cfg = NullConfig {
        submit_queues: nr_hw,
        hw_queue_depth: 16,
        irqmode,
        completion_nsec: 20_000,
        memory_backed: true,
        cache_size_mb: 1,
        size_bytes: 64 << 20,
        ..Default::default()
    };
    let set = TagSet::new(cfg.tag_set_config()).expect("tag set");
    let limits = cfg.queue_limits();
    let dev = NullDevice::new(cfg).expect("null device");
    let elv = sched.map(|s| mqblk_sched::lookup(s).expect("a scheduler"));
    RequestQueue::new(
        set,
        dev,
        elv,
        QueueConfig {
            nr_ctx: nr_hw,
            limits,
            ..Default::default()
        },
    )
    .expect("queue")
}

fn write(block: u64, fill: u8, private: u64) -> Bio {
    let mut buf = IoBuf::new(4096);
    buf.as_mut_slice().fill(fill);
    Bio::new(ReqOp::Write, block * 8, 8)
        .with_buf(buf)
        .with_private(private)
}

fn read(block: u64, private: u64) -> Bio {
    Bio::new(ReqOp::Read, block * 8, 8)
        .with_buf(IoBuf::new(4096))
        .with_private(private)
}

/// Polls until `sub` has `n` completed bios.
fn reap(q: &RequestQueue, sub: &mut Submitter, n: usize) -> Vec<Bio> {
    for _ in 0..1000 {
        if sub.done.len() >= n {
            break;
        }
        q.poll(sub, Nanos(1));
    }
    assert!(
        sub.done.len() >= n,
        "only {} of {n} came back",
        sub.done.len()
    );
    std::mem::take(&mut sub.done)
}

#[test]
fn a_frozen_queue_turns_bios_away_and_switches_only_once_drained() {
    let q = queue(1, Some("mq-deadline"));
    let mut sub = q.submitter(CtxIdx(0));
    for i in 0..4 {
        assert!(matches!(
            q.submit_bio(&mut sub, write(i, i as u8, i), Nanos(1)),
            Submit::Queued | Submit::Merged
        ));
    }
    let kyber = mqblk_sched::lookup("kyber").unwrap();
    assert_eq!(q.elevator_switch(Some(kyber)), Err(FreezeError::NotFrozen));
    q.freeze_start();
    assert!(q.is_frozen());
    // New bios wait (`bio_queue_enter`); the four allocated requests still hold the switch.
    assert!(matches!(
        q.submit_bio(&mut sub, write(9, 9, 9), Nanos(1)),
        Submit::Busy(_)
    ));
    assert!(!q.freeze_drained());
    assert!(matches!(
        q.elevator_switch(Some(kyber)),
        Err(FreezeError::NotDrained(n)) if n > 0
    ));
    let done = reap(&q, &mut sub, 4);
    assert!(done.iter().all(|b| b.status.is_ok()));
    assert!(q.freeze_drained());
    q.elevator_switch(Some(kyber)).expect("switch");
    q.unfreeze();
    assert_eq!(q.elevator_name(), "kyber");
    // The data written under mq-deadline reads back through kyber.
    for i in 0..4 {
        q.submit_bio(&mut sub, read(i, 100 + i), Nanos(2));
    }
    for b in reap(&q, &mut sub, 4) {
        let i = b.private - 100;
        assert!(b
            .buf
            .as_ref()
            .unwrap()
            .as_slice()
            .iter()
            .all(|&x| x == i as u8));
    }
    q.check_invariants();
    q.teardown();
}

#[test]
fn a_switch_resets_tunables_and_nr_requests_but_a_depth_change_keeps_them() {
    let q = queue(1, Some("mq-deadline"));
    let e = q.elevator().unwrap();
    e.tunables().store("fifo_batch", "4").unwrap();
    drop(e);
    q.freeze_start();
    assert!(q.freeze_drained());
    // `queue_requests_store` with an elevator: below BLKDEV_MIN_RQ raised to it, past
    // MAX_SCHED_RQ refused.
    q.set_nr_requests(3).unwrap();
    assert_eq!(q.nr_requests(), 4);
    assert_eq!(
        q.set_nr_requests(MAX_SCHED_RQ + 1),
        Err(FreezeError::NrRequests {
            value: MAX_SCHED_RQ + 1,
            min: 4,
            max: MAX_SCHED_RQ
        })
    );
    // dd_depth_updated (6.18): async_depth follows nr_requests, whatever was written to it.
    q.elevator()
        .unwrap()
        .tunables()
        .store("async_depth", "10")
        .unwrap();
    q.set_nr_requests(64).unwrap();
    assert_eq!(q.nr_requests(), 64);
    assert_eq!(q.elevator().unwrap().tunables().show("fifo_batch"), Ok(4));
    assert_eq!(q.elevator().unwrap().tunables().show("async_depth"), Ok(64));
    // `elevator_switch`: a fresh instance, its defaults, and the default depth again
    // (`blk_mq_init_sched`: 2 * min(queue_depth, 128) = 32 here).
    q.elevator_switch(mqblk_sched::lookup("mq-deadline"))
        .unwrap();
    assert_eq!(q.elevator().unwrap().tunables().show("fifo_batch"), Ok(16));
    assert_eq!(q.nr_requests(), 32);
    q.elevator_switch(None).unwrap();
    assert!(q.elevator().is_none());
    // Without an elevator the driver tags are the limit.
    assert!(matches!(
        q.set_nr_requests(17),
        Err(FreezeError::NrRequests { max: 16, .. })
    ));
    // ... and a lower value limits them: 4 requests in flight, the fifth waits.
    q.set_nr_requests(4).unwrap();
    q.unfreeze();
    assert!(!q.is_frozen());
    let mut sub = q.submitter(CtxIdx(0));
    for i in 0..4 {
        assert!(matches!(
            q.submit_bio(&mut sub, write(2 * i, 1, i), Nanos(1)),
            Submit::Queued
        ));
    }
    assert!(matches!(
        q.submit_bio(&mut sub, write(20, 1, 9), Nanos(1)),
        Submit::Busy(_)
    ));
    assert_eq!(reap(&q, &mut sub, 4).len(), 4);
    q.teardown();
}

/// The kernel's `elevator_switch` under load: two threads write, flush and read back their
/// own blocks while a third cycles the queue through every scheduler, changes
/// `nr_requests` and stores tunables. Nothing is lost, nothing completes twice, every read
/// returns what was last written, and the invariants hold at the end.
#[test]
fn switching_elevators_under_load_loses_and_corrupts_nothing() {
    switch_under_load(false);
}

/// The same with a completion worker per hardware queue reaping beside the submitters (the
/// runtime's `CompletionMode::Worker`): calls without a submitter are waited out too.
#[test]
fn switching_under_load_with_completion_workers() {
    switch_under_load(true);
}

fn switch_under_load(with_workers: bool) {
    // With workers the device completes on a timer, so there is something for them to reap
    // beside the submitters' own polling.
    let irq = if with_workers {
        IrqMode::Timer
    } else {
        IrqMode::Softirq
    };
    let q = queue_irq(2, Some("mq-deadline"), irq);
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let now = move || Nanos(t0.elapsed().as_nanos() as u64 + 1);
    // What the completion workers reaped so far: the load goes on until they reaped
    // something (or 10 s passed), as on a busy machine the submitters' own polling can take
    // every completion of a short run.
    let reaped_so_far = Arc::new(AtomicUsize::new(0));
    let reapers: Vec<_> = (0..2u16)
        .filter(|_| with_workers)
        .map(|h| {
            let (q, stop, so_far) = (q.clone(), stop.clone(), reaped_so_far.clone());
            std::thread::spawn(move || {
                let mut batch = mqblk_core::CompletionBatch::new();
                let mut reaped = 0;
                while !stop.load(Ordering::Relaxed) {
                    let t = now();
                    let n = q.poll_hctx(mqblk_core::HctxIdx(h), &mut batch, t);
                    so_far.fetch_add(n, Ordering::Relaxed);
                    reaped += n;
                    if q.next_deadline().is_some_and(|d| d <= t) {
                        q.timer_detached(&mut batch, t);
                    }
                    std::thread::yield_now();
                }
                reaped
            })
        })
        .collect();
    let workers: Vec<_> = (0..2u16)
        .map(|c| {
            let (q, stop) = (q.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut sub = q.submitter(CtxIdx(c));
                let base = c as u64 * 4096;
                let mut seen = HashSet::new();
                let (mut issued, mut round) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) || round < 20 {
                    round += 1;
                    let fill = (round % 251) as u8;
                    // A batch of writes (every fourth with FUA), then an empty flush.
                    let mut bios: Vec<Bio> = (0..8)
                        .map(|i| {
                            let mut b = write(base + i, fill, issued + i);
                            if i % 4 == 3 {
                                b.flags |= ReqFlags::FUA;
                            }
                            b
                        })
                        .collect();
                    bios.push(
                        Bio::new(ReqOp::Flush, 0, 0)
                            .with_flags(ReqFlags::PREFLUSH)
                            .with_private(issued + 8),
                    );
                    issued += 9;
                    let mut back = submit_all(&q, &mut sub, bios, &now, with_workers);
                    let reads: Vec<Bio> = (0..8).map(|i| read(base + i, issued + i)).collect();
                    issued += 8;
                    back.extend(submit_all(&q, &mut sub, reads, &now, with_workers));
                    for b in back {
                        assert!(b.status.is_ok(), "{:?} failed: {:?}", b.op, b.status);
                        assert!(seen.insert(b.private), "bio {} completed twice", b.private);
                        if b.op == ReqOp::Read {
                            let data = b.buf.as_ref().unwrap().as_slice();
                            assert!(data.iter().all(|&x| x == fill), "round {round}: stale read");
                        }
                    }
                }
                assert_eq!(seen.len() as u64, issued, "every bio came back once");
                round
            })
        })
        .collect();
    let names = ["kyber", "bfq", "none", "mq-deadline"];
    let mut switches = 0;
    while switches < 12 {
        q.freeze_start();
        while !q.freeze_drained() {
            std::thread::sleep(Duration::from_micros(50));
        }
        let name = names[switches % names.len()];
        q.elevator_switch(mqblk_sched::lookup(name).filter(|_| name != "none"))
            .expect("switch");
        if name != "none" {
            q.set_nr_requests(8 + 8 * (switches as u32 % 3))
                .expect("nr_requests");
        }
        q.unfreeze();
        if let Some(e) = q.elevator() {
            // Tunables are stored while the queue runs, as through sysfs.
            let d = e.tunables().descs()[0];
            e.tunables().store(d.name, &d.default.to_string()).unwrap();
        }
        switches += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    let patience = Instant::now() + Duration::from_secs(10);
    while with_workers && reaped_so_far.load(Ordering::Relaxed) == 0 && Instant::now() < patience {
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let rounds = w.join().expect("a worker panicked");
        assert!(rounds >= 20);
    }
    let reaped: usize = reapers
        .into_iter()
        .map(|r| r.join().expect("a completion worker panicked"))
        .sum();
    assert!(
        !with_workers || reaped > 0,
        "the completion workers reaped nothing"
    );
    assert_eq!(q.elevator_name(), "mq-deadline");
    q.check_invariants();
    q.teardown();
}

/// Submits every bio, retrying those that come back busy (no tag, or the queue frozen)
/// after reaping, and returns them all once completed.
/// `patient`: wait 50 us before each poll, so the completion workers spinning beside the
/// submitters reap their share (BFQ's tag shares make submitters wait for tags often, and
/// a submitter that always polls first could leave the workers nothing).
fn submit_all(
    q: &RequestQueue,
    sub: &mut Submitter,
    bios: Vec<Bio>,
    now: &dyn Fn() -> Nanos,
    patient: bool,
) -> Vec<Bio> {
    let n = bios.len();
    let mut out = Vec::new();
    let wait = || {
        if patient {
            std::thread::sleep(Duration::from_micros(50));
        }
    };
    for bio in bios {
        let mut next = Some(bio);
        while let Some(bio) = next.take() {
            if let Submit::Busy(b) = q.submit_bio(sub, bio, now()) {
                next = Some(*b);
                wait();
                q.poll(sub, now());
                out.append(&mut sub.done);
                std::thread::yield_now();
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while out.len() + sub.done.len() < n {
        assert!(Instant::now() < deadline, "bios lost: {} of {n}", out.len());
        wait();
        q.poll(sub, now());
    }
    out.append(&mut sub.done);
    out
}

/// `blk_mq_update_nr_requests` keeps the elevator and calls its `depth_updated`: what the
/// scheduler learned of the queue's I/O (here BFQ's counters, and kyber's depth for
/// asynchronous requests) survives a depth change, where an elevator switch starts over.
#[test]
fn a_depth_change_keeps_the_elevator_and_its_state() {
    for sched in ["bfq", "kyber", "mq-deadline"] {
        let q = queue(1, Some(sched));
        let mut sub = q.submitter(CtxIdx(0));
        for i in 0..8 {
            q.submit_bio(&mut sub, write(i, 1, i), Nanos(1));
        }
        assert_eq!(reap(&q, &mut sub, 8).len(), 8);
        // What the scheduler counted of the I/O (its lock's own counters aside).
        let counted = |q: &RequestQueue| -> Vec<(&'static str, u64)> {
            mqblk_sched::SchedStats::of(q.elevator().as_deref())
                .pairs()
                .into_iter()
                .filter(|(k, _)| !k.starts_with("lock_"))
                .collect()
        };
        let stats = counted(&q);
        q.freeze_start();
        assert!(q.freeze_drained());
        q.set_nr_requests(8).unwrap();
        q.unfreeze();
        assert_eq!(q.nr_requests(), 8);
        assert_eq!(counted(&q), stats, "{sched}: state kept");
        if sched == "kyber" {
            // kyber_depth_updated: KYBER_ASYNC_PERCENT (75) of the new depth.
            let d = q.elevator().unwrap().debug_state();
            assert!(d.contains("async_depth 6 "), "{d}");
        }
        // I/O runs on with the new depth, every request id within the elevator's tables.
        for round in 0..3 {
            for i in 0..8 {
                assert!(matches!(
                    q.submit_bio(&mut sub, read(i, 100 + i), Nanos(2 + round)),
                    Submit::Queued | Submit::Merged
                ));
            }
            assert_eq!(reap(&q, &mut sub, 8).len(), 8);
        }
        q.check_invariants();
        // Deeper than at the start: the tables were sized for it.
        q.freeze_start();
        assert!(q.freeze_drained());
        q.set_nr_requests(MAX_SCHED_RQ).unwrap();
        q.unfreeze();
        // (Reads: BFQ would give the writes' queue a share of the tags beside the raised
        // reader's queue it still has, bfqq_request_over_limit.)
        for i in 0..40 {
            let r = q.submit_bio(&mut sub, read(2 * i, 200 + i), Nanos(9));
            assert!(
                matches!(r, Submit::Queued | Submit::Merged),
                "{sched}: read {i}: {r:?}"
            );
        }
        assert_eq!(reap(&q, &mut sub, 40).len(), 40);
        q.check_invariants();
        // A switch starts over.
        q.freeze_start();
        assert!(q.freeze_drained());
        q.elevator_switch(mqblk_sched::lookup(sched)).unwrap();
        q.unfreeze();
        let fresh = counted(&q);
        if sched != "kyber" {
            // (Kyber's counters are its domain depths, which no I/O here moves.)
            assert_ne!(fresh, stats, "{sched}: a switch makes a fresh elevator");
        }
        q.teardown();
    }
}
