//! Behaviour of kyber (Documentation/block/kyber-iosched.rst, block/kyber-iosched.c): token
//! depths that follow latency feedback, per-hctx dispatch, domain batches, and the async
//! share of the scheduler tags, observed through a `SimDriver` in virtual time.

mod common;

use common::*;
use mqblk_core::{Bio, ElvFeatures, ReqOp, Submit, TunableError};

const KY: &str = "kyber";

/// Kinds of I/O in the closed-loop load, encoded in the top bits of each bio's cookie.
const KINDS: [ReqOp; 3] = [ReqOp::Read, ReqOp::Write, ReqOp::Discard];

fn kind_of(private: u64) -> usize {
    (private >> 40) as usize
}

/// A closed loop: keeps `target[k]` bios of each kind outstanding, at random sectors.
struct Load {
    target: [usize; 3],
    out: [usize; 3],
    seen: usize,
    n: u64,
    rng: Rng,
}

impl Load {
    fn new(target: [usize; 3]) -> Load {
        Load {
            target,
            out: [0; 3],
            seen: 0,
            n: 0,
            rng: Rng::new(42),
        }
    }

    fn top_up(&mut self, r: &mut Rig) {
        for b in &r.done[self.seen..] {
            self.out[kind_of(b.private)] -= 1;
        }
        self.seen = r.done.len();
        for (k, &op) in KINDS.iter().enumerate() {
            while self.out[k] < self.target[k] {
                self.n += 1;
                let sector = 8 * self.rng.below(1 << 24);
                let bio = Bio::new(op, sector, 8).with_private(((k as u64) << 40) | self.n);
                match r.submit(0, bio) {
                    Submit::Queued | Submit::Merged => self.out[k] += 1,
                    other => panic!("{op:?} refused: {other:?}"),
                }
            }
        }
    }

    /// Runs until `stop` holds or `until` passes; returns whether `stop` held.
    fn run(
        &mut self,
        r: &mut Rig,
        until: mqblk_core::Nanos,
        mut stop: impl FnMut(&Rig) -> bool,
    ) -> bool {
        loop {
            self.top_up(r);
            if stop(r) {
                return true;
            }
            if r.now > until {
                return false;
            }
            assert!(
                r.step(),
                "nothing due with I/O outstanding:\n{}",
                r.q.debug_state()
            );
        }
    }
}

/// A device with room for everything: only kyber's tokens limit what is in flight.
fn roomy_rig() -> Rig {
    Rig::new(RigCfg {
        depth: 1024,
        nr_requests: 1024,
        ..RigCfg::new(KY, 1024)
    })
}

#[test]
fn kyber_shrinks_write_depth_when_reads_miss_target_and_grows_back() {
    let mut r = roomy_rig();
    assert_eq!(
        (
            r.kyber_depth("read"),
            r.kyber_depth("write"),
            r.kyber_depth("discard")
        ),
        (256, 128, 64)
    );
    // Reads take 10 ms against their 2 ms target: congestion. Writes and discards are fast.
    r.drv.set_latency(ReqOp::Read, Some(ms(10)));
    r.drv.set_latency(ReqOp::Write, Some(ms(1)));
    r.drv.set_latency(ReqOp::Discard, Some(ms(1)));
    let mut load = Load::new([32, 16, 2]);
    let shrunk = load.run(&mut r, ms(5000), |r| {
        r.kyber_depth("write") < 128 && r.kyber_depth("discard") < 64
    });
    assert!(
        shrunk,
        "no throttling after {}:\n{}",
        r.now,
        r.elv().debug_state()
    );
    assert!(r.now < ms(2000), "throttling took until {}", r.now);
    // Domains that meet their target are throttled; reads, missing theirs, are not.
    assert_eq!(r.kyber_depth("read"), 256);
    // Keep the congestion a while: writes are squeezed further.
    let t = r.now.saturating_add(ms(1000));
    load.run(&mut r, t, |_| false);
    let squeezed = r.kyber_depth("write");
    assert!(squeezed <= 8, "write depth only down to {squeezed}");
    let in_use = r.kyber().in_use[1];
    assert!(
        in_use <= squeezed,
        "{in_use} write tokens in use above depth {squeezed}"
    );

    // Reads are fast again; writes now queue for their few tokens, so their total latency
    // (from allocation) misses the 10 ms target and their depth is let back up.
    r.drv.set_latency(ReqOp::Read, Some(ms(1)));
    r.drv.set_latency(ReqOp::Write, Some(ms(8)));
    load.target = [4, 256, 2];
    let mut seen = vec![squeezed];
    let t = r.now.saturating_add(ms(15_000));
    let regrown = load.run(&mut r, t, |r| {
        let d = r.kyber_depth("write");
        if seen.last() != Some(&d) {
            seen.push(d);
        }
        d == 128
    });
    assert!(
        regrown,
        "write depth went {seen:?} by {}:\n{}",
        r.now,
        r.elv().debug_state()
    );
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "write depth did not only grow: {seen:?}"
    );
    r.finish();
}

#[test]
fn kyber_does_not_throttle_when_every_domain_meets_its_target() {
    let mut r = roomy_rig();
    // The same load as above, but with a read target the 10 ms reads meet.
    r.set("read_lat_nsec", "50000000");
    r.drv.set_latency(ReqOp::Read, Some(ms(10)));
    r.drv.set_latency(ReqOp::Write, Some(ms(1)));
    r.drv.set_latency(ReqOp::Discard, Some(ms(1)));
    let mut load = Load::new([32, 16, 2]);
    let changed = load.run(&mut r, ms(3000), |r| {
        (
            r.kyber_depth("read"),
            r.kyber_depth("write"),
            r.kyber_depth("discard"),
        ) != (256, 128, 64)
    });
    assert!(
        !changed,
        "depths changed without congestion:\n{}",
        r.elv().debug_state()
    );
    assert!(
        r.done.len() > 10_000,
        "too little I/O to judge: {}",
        r.done.len()
    );
    r.finish();
}

#[test]
fn kyber_is_mq_aware_and_dispatches_per_hctx() {
    // Two hardware queues, one Ctx on each; the device takes nothing until a queue opens.
    let mut r = Rig::new(RigCfg {
        nr_hw: 2,
        nr_ctx: 2,
        ..RigCfg::new(KY, 0)
    });
    assert!(r.elv().features().contains(ElvFeatures::MQ_AWARE));
    for i in 0..6 {
        r.queue(0, read(1000 + 64 * i, 8, i));
        r.queue(0, write(3000 + 64 * i, 8, 10 + i));
        r.queue(1, read(2000 + 64 * i, 8, 100 + i));
        r.queue(1, write(4000 + 64 * i, 8, 110 + i));
    }
    r.drv.set_slots(0, 64);
    r.advance_to(ms(5)); // past the delayed re-runs: both hctxs run
    let issues = r.drv.issues();
    assert_eq!(issues.len(), 12, "{}", r.q.debug_state());
    assert!(
        issues.iter().all(|i| i.hctx.0 == 0 && i.ctx.0 == 0),
        "hctx0 served another queue's request: {issues:?}"
    );
    assert_eq!(r.drv.cross_hctx_budget(), 0);
    assert!(r.elv().has_work(mqblk_core::HctxIdx(1)) && !r.elv().has_work(mqblk_core::HctxIdx(0)));

    r.drv.set_slots(1, 64);
    r.advance_to(ms(10));
    let issues = r.drv.issues_from(12);
    assert_eq!(issues.len(), 12);
    assert!(issues.iter().all(|i| i.hctx.0 == 1 && i.ctx.0 == 1));
    assert_eq!(r.drv.cross_hctx_budget(), 0);
    assert_eq!(r.drv.over_admitted(), 0);
    r.finish();
}

#[test]
fn kyber_async_writes_limited_to_75_percent_of_sched_tags() {
    // 64 driver tags: nr_requests defaults to 128 scheduler tags. The device is stalled.
    let mut r = Rig::new(RigCfg {
        nr_requests: 0,
        ..RigCfg::new(KY, 0)
    });
    assert_eq!(r.q.nr_requests(), 128);
    let mut n = 0u64;
    loop {
        match r.submit(0, write(64 * n, 8, n)) {
            Submit::Queued => n += 1,
            Submit::Busy(_) => break,
            other => panic!("{other:?}"),
        }
        assert!(n <= 128);
    }
    assert_eq!(n, 96, "async writes got {n} of 128 scheduler tags");
    // The last quarter is kept for synchronous I/O.
    r.queue(0, read(1 << 20, 8, 1000));
    for k in 0..31 {
        r.queue(0, sync_write((1 << 21) + 64 * k, 8, 2000 + k));
    }
    assert!(
        matches!(r.submit(0, sync_write(1 << 22, 8, 3000)), Submit::Busy(_)),
        "more than nr_requests"
    );
    assert!(matches!(
        r.submit(0, write(1 << 23, 8, 3001)),
        Submit::Busy(_)
    ));
    // Once the device drains, async writes get tags again.
    r.drv.set_all_slots(256);
    r.drain(us(10));
    assert!(matches!(
        r.submit(0, write(1 << 23, 8, 3001)),
        Submit::Queued
    ));
    r.finish();
}

#[test]
fn kyber_limits_in_flight_requests_per_domain_to_its_tokens() {
    let mut r = Rig::new(RigCfg {
        depth: 512,
        nr_requests: 512,
        ..RigCfg::new(KY, 512)
    });
    for i in 0..30 {
        r.queue(0, Bio::new(ReqOp::WriteZeroes, 64 * i, 8).with_private(i));
    }
    for i in 0..80 {
        r.queue(
            0,
            Bio::new(ReqOp::Discard, 100_000 + 64 * i, 8).with_private(100 + i),
        );
    }
    for i in 0..300 {
        r.queue(0, read(1_000_000 + 64 * i, 8, 1000 + i));
    }
    r.advance_to(ms(1));
    let count = |r: &Rig, op| r.drv.issues().iter().filter(|i| i.op == op).count();
    // OTHER 16, DISCARD 64, READ 256 tokens.
    assert_eq!(
        (
            count(&r, ReqOp::WriteZeroes),
            count(&r, ReqOp::Discard),
            count(&r, ReqOp::Read)
        ),
        (16, 64, 256),
        "{}",
        r.elv().debug_state()
    );
    // Freed tokens wake the waiting hardware queue in batches of an eighth of the domain's
    // depth (`sbitmap_queue_wake_up`'s `wake_batch`: 2 for the 16 OTHER tokens), and a
    // dispatch that found no token sets no RESTART (the kernel's): one completion lets
    // nothing go, the second wakes the queue and two requests of that domain go.
    let first = r.drv.issues()[0].op;
    assert_eq!(first, ReqOp::WriteZeroes);
    let before = count(&r, first);
    r.complete_next(1);
    assert_eq!(count(&r, first), before, "{}", r.elv().debug_state());
    r.complete_next(1);
    assert_eq!(count(&r, first), before + 2, "{}", r.elv().debug_state());
    r.finish();
}

#[test]
fn kyber_alternates_domains_in_batches_of_16_reads_and_8_writes() {
    let mut r = Rig::simple(KY, 1);
    r.queue(0, read(1 << 30, 8, 0)); // in the device; starts a read batch
                                     // Descending sectors: kyber keeps arrival order within a domain, it does not sort.
    for i in 0..40u64 {
        r.queue(0, read(1_000_000 - 64 * i, 8, 1 + i));
        r.queue(0, write(2_000_000 - 64 * i, 8, 100 + i));
    }
    while r.drv.nr_issues() < 81 {
        assert_eq!(r.complete_next(1), 1);
    }
    let issues = r.drv.issues();
    let mut lens: Vec<usize> = Vec::new();
    for (k, i) in issues.iter().enumerate() {
        if k == 0 || issues[k - 1].op != i.op {
            lens.push(0);
        }
        *lens.last_mut().unwrap() += 1;
    }
    // 41 reads, 40 writes: R16 W8 R16 W8 R9, then the writes that are left.
    assert_eq!(lens, [16, 8, 16, 8, 9, 24]);
    let reads: Vec<u64> = issues
        .iter()
        .filter(|i| i.op == ReqOp::Read)
        .map(|i| i.privates[0])
        .collect();
    assert_eq!(
        reads,
        (0..41).collect::<Vec<_>>(),
        "reads left in arrival order"
    );
    let writes: Vec<u64> = issues
        .iter()
        .filter(|i| i.op == ReqOp::Write)
        .map(|i| i.privates[0])
        .collect();
    assert_eq!(writes, (100..140).collect::<Vec<_>>());
    r.finish();
}

#[test]
fn kyber_tunables_readable_and_settable_and_refused_out_of_range() {
    let mut r = Rig::simple(KY, 1);
    r.queue(0, read(0, 8, 1));
    r.queue(0, read(64, 8, 2));
    let t = r.elv().tunables();
    assert_eq!(t.show("read_lat_nsec"), Ok(2_000_000));
    assert_eq!(t.show("write_lat_nsec"), Ok(10_000_000));
    t.store("read_lat_nsec", "1000000").unwrap();
    t.store("write_lat_nsec", "20000000").unwrap();
    assert_eq!(t.show("read_lat_nsec"), Ok(1_000_000));
    assert_eq!(t.show("write_lat_nsec"), Ok(20_000_000));
    // The kernel takes any u64 (`kyber_lat_store`): 0 too; a negative number is refused.
    t.store("read_lat_nsec", "0").unwrap();
    let e = t.store("read_lat_nsec", "-1").unwrap_err();
    assert!(
        matches!(e, TunableError::OutOfRange { min: 0, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains(&format!("0..={}", i64::MAX)), "{e}");
    t.store("read_lat_nsec", "1000000").unwrap();
    assert!(matches!(
        t.store("write_lat_nsec", "10ms"),
        Err(TunableError::NotANumber { .. })
    ));
    let msg = t.store("discard_lat_nsec", "1").unwrap_err().to_string();
    assert!(
        msg.contains("read_lat_nsec") && msg.contains("write_lat_nsec"),
        "{msg}"
    );
    assert_eq!(t.show("read_lat_nsec"), Ok(1_000_000));
    r.finish();
}

#[test]
fn kyber_every_request_completes_once_under_faults() {
    for seed in 0..16 {
        chaos_run(KY, seed);
    }
}

/// Tokens freed by completions on one hardware queue run the hardware queue that waited for
/// them at once (the kernel's token wait queue), not after the 3 ms delayed re-run, but only
/// once a wake batch of them was freed (`sbitmap_queue_wake_up`: an eighth of the depth).
#[test]
fn kyber_a_batch_of_tokens_freed_on_another_hctx_runs_the_waiting_hctx() {
    let mut r = Rig::new(RigCfg {
        nr_hw: 2,
        nr_ctx: 2,
        ..RigCfg::new(KY, 64)
    });
    // The OTHER domain has 16 tokens: hctx1 takes them all.
    for i in 0..16 {
        r.queue(1, Bio::new(ReqOp::WriteZeroes, 64 * i, 8).with_private(i));
    }
    assert_eq!(r.drv.nr_issues(), 16);
    r.queue(0, Bio::new(ReqOp::WriteZeroes, 10_000, 8).with_private(99));
    assert_eq!(r.drv.nr_issues(), 16, "hctx0's request waits for a token");
    // One of hctx1's requests completes; no virtual time passes. The OTHER domain's wake
    // batch is 16 / 8 = 2: one freed token wakes nobody.
    r.complete_next(1);
    assert_eq!(r.drv.nr_issues(), 16, "{}", r.elv().debug_state());
    r.complete_next(1);
    assert_eq!(r.drv.nr_issues(), 17, "{}", r.elv().debug_state());
    assert_eq!(r.drv.last_issue().unwrap().hctx.0, 0);
    r.finish();
}
