//! BFQ observed from the device (the shape of mq_deadline.rs): merges of bios into queued
//! requests, and the tunables with the kernel's names, units and defaults. Its scheduling
//! behaviour (weights, classes, idling, raising, queue merging) is tested in the simulator,
//! crates/sim/tests/bfq.rs.

mod common;

use common::*;
use mqblk_core::{Bio, HctxIdx, IoPrio, IoPrioClass, Nanos, ReqFlags, ReqOp, Submit, TunableError};

const BFQ: &str = "bfq";

#[test]
fn bfq_bio_merge_produces_one_request() {
    let mut r = Rig::simple(BFQ, 1);
    r.queue(0, read(0, 8, 1)); // keeps the device busy so the rest waits in the scheduler

    // Back merge: B starts where A ends.
    r.queue(0, read(1000, 8, 10));
    assert!(matches!(r.submit(0, read(1008, 8, 11)), Submit::Merged));
    // Front merge: D ends where C starts.
    r.queue(0, read(3008, 8, 20));
    assert!(matches!(r.submit(0, read(3000, 8, 21)), Submit::Merged));
    // A bio that fills the hole between two requests joins the first, which then absorbs
    // the second: three bios, one request.
    r.queue(0, read(5000, 8, 30));
    r.queue(0, read(5016, 8, 32));
    assert!(matches!(r.submit(0, read(5008, 8, 31)), Submit::Merged));
    // Another issuer's bio is no bio merge (`bfq_allow_bio_merge`); its request joins at
    // insert (`elv_attempt_insert_merge`). Another direction or class never merges.
    assert!(matches!(
        r.submit(0, read(1016, 8, 40).with_issuer(7, 0)),
        Submit::Queued
    ));
    r.queue(0, write(1016, 8, 41));
    r.queue(
        0,
        read(1016, 8, 42).with_ioprio(IoPrio::new(IoPrioClass::Rt, 0)),
    );
    r.q.check_invariants();

    // The raised sync queues are idled for (at least 20 ms, `bfq_arm_slice_timer`) and,
    // raised with a short think time, let no other queue be injected: the async write
    // waits for the idle timer.
    while r.drv.nr_issues() < 6 {
        if r.complete_next(1) == 0 {
            let t = r.next_event().expect("an idle timer is armed");
            r.advance_to(t);
        }
        r.q.check_invariants();
    }
    let got = r.issued_after_first();
    assert_eq!(
        got,
        [
            (1000, 24, vec![10, 11, 40]),
            (1016, 8, vec![41]),
            (1016, 8, vec![42]),
            (3000, 16, vec![21, 20]),
            (5000, 24, vec![30, 31, 32]),
        ]
    );
    let c = r.bfq().counters;
    assert_eq!((c.bio_merges, c.rq_merges), (3, 2));
    r.drain(us(10));
    r.assert_each_done_once([1, 10, 11, 20, 21, 30, 31, 32, 40, 41, 42]);
    r.finish();
}

#[test]
fn bfq_tunables_have_the_kernel_names_units_and_defaults() {
    let r = Rig::simple(BFQ, 1);
    let t = r.elv().tunables();
    for (name, value) in [
        ("slice_idle", 8),
        ("slice_idle_us", 8000),
        ("timeout_sync", 125),
        ("max_budget", 0),
        ("fifo_expire_sync", 125),
        ("fifo_expire_async", 250),
        ("back_seek_max", 16384),
        ("back_seek_penalty", 2),
        ("strict_guarantees", 0),
        ("low_latency", 1),
    ] {
        assert_eq!(t.show(name), Ok(value), "{name}");
    }
    let unit = |name: &str| t.descs().iter().find(|d| d.name == name).unwrap().unit;
    for (name, u) in [
        ("slice_idle_us", "us"),
        ("timeout_sync", "ms"),
        ("max_budget", "sectors"),
        ("fifo_expire_sync", "ms"),
        ("fifo_expire_async", "ms"),
        ("back_seek_max", "KiB"),
        ("strict_guarantees", "bool"),
        ("low_latency", "bool"),
    ] {
        assert_eq!(unit(name), u, "{name}");
    }
    assert_eq!(t.aliases()[0].unit, "ms");
    // slice_idle and slice_idle_us are one variable in two units.
    r.set("slice_idle", "3");
    assert_eq!(t.show("slice_idle_us"), Ok(3000));
    r.set("slice_idle_us", "2500");
    assert_eq!(t.show("slice_idle"), Ok(2));
    assert!(
        t.dump()
            .contains("slice_idle = 2 ms (same as slice_idle_us)"),
        "{}",
        t.dump()
    );
    // The kernel's ranges (its store clamps): slice_idle_us up to UINT_MAX, so slice_idle
    // (ms, the same variable) up to UINT_MAX / 1000 here (the kernel's ms store would take
    // up to INT_MAX ms, beyond what the us one can show); timeouts up to INT_MAX.
    t.store("timeout_sync", "2147483647").unwrap();
    t.store("timeout_sync", "125").unwrap();
    assert!(matches!(
        t.store("slice_idle", "4294968"),
        Err(TunableError::OutOfRange {
            name: "slice_idle",
            max: 4294967,
            ..
        })
    ));
    assert!(matches!(
        t.store("back_seek_penalty", "0"),
        Err(TunableError::OutOfRange { .. })
    ));
    assert!(t.store("low_latency", "yes").is_err());
}

#[test]
fn bfq_limits_writes_to_part_of_the_scheduler_tags() {
    // bfq_limit_depth: reads may take every tag, async writes half, sync writes three
    // quarters; while a queue is weight-raised, 3/16 and 6/16.
    let mut r = Rig::simple(BFQ, 1);
    let n = r.q.nr_requests();
    let depth = |r: &Rig, op, flags| r.elv().limit_depth(&Bio::new(op, 0, 8).with_flags(flags));
    assert_eq!(depth(&r, ReqOp::Read, ReqFlags::SYNC), u32::MAX);
    assert_eq!(depth(&r, ReqOp::Write, ReqFlags::empty()), n / 2);
    assert_eq!(depth(&r, ReqOp::Write, ReqFlags::SYNC), n * 3 / 4);
    // A new reader is raised as interactive while it has requests.
    r.queue(0, read(0, 8, 1));
    r.queue(0, read(5000, 8, 2));
    assert!(r.bfq().counters.wr_interactive >= 1);
    assert_eq!(depth(&r, ReqOp::Write, ReqFlags::empty()), n * 3 / 16);
    assert_eq!(depth(&r, ReqOp::Write, ReqFlags::SYNC), n * 6 / 16);
    r.drain(us(10));
    r.finish();
}

#[test]
fn bfq_raises_a_busy_async_queue_whose_writes_pause() {
    // `bfq_add_request`: a busy asynchronous queue that is not raised and gets a request
    // more than `bfq_wr_min_inter_arr_async` (500 ms) after its last arrival or expiry is
    // raised as interactive; sooner, or with low_latency off, it is not.
    let run = |gap_ms: u64, low_latency: &str| {
        let mut r = Rig::simple(BFQ, 1);
        r.set("low_latency", low_latency);
        // The device holds one command and completes nothing on its own: the async
        // queue stays busy with the second write queued behind the first.
        r.queue(0, write(0, 8, 1));
        r.queue(0, write(1000, 8, 2));
        r.advance_to(Nanos::from_millis(gap_ms));
        r.queue(0, write(2000, 8, 3));
        let raised = r.bfq().counters.wr_async;
        r.drain(us(10));
        r.finish();
        raised
    };
    assert_eq!(run(600, "1"), 1);
    assert_eq!(run(100, "1"), 0);
    assert_eq!(run(600, "0"), 0);
}

#[test]
fn bfq_nomerges_1_merges_only_into_the_one_hit_cache() {
    // `elv_merge` with `nomerges=1` tries only `q->last_merge` (the first request inserted
    // into an empty scheduler, or the last merged into), and BFQ takes it only from the
    // bio's own queue; with `nomerges=0` BFQ looks through the bio's queue.
    for (nomerges, deep) in [
        (mqblk_core::NoMerges::Simple, false),
        (mqblk_core::NoMerges::All, true),
    ] {
        let mut cfg = RigCfg::new(BFQ, 1);
        cfg.nomerges = nomerges;
        let mut r = Rig::new(cfg);
        r.queue(0, read(0, 8, 1)); // on the device
        r.queue(0, read(1000, 8, 10)); // the one-hit cache
        r.queue(0, read(5000, 8, 20));
        assert_eq!(
            matches!(r.submit(0, read(5008, 8, 21)), Submit::Merged),
            deep,
            "{nomerges:?}: a back merge away from the cache"
        );
        assert!(
            matches!(r.submit(0, read(1008, 8, 11)), Submit::Merged),
            "{nomerges:?}: the one-hit cache"
        );
        r.drain(us(10));
        r.finish();
    }
}

#[test]
fn bfq_a_newly_raised_queue_gets_a_short_first_turn() {
    // `bfq_update_bfqq_wr_on_rq_arrival`: a queue whose raising starts has its budget cut
    // to twice the minimum (`2 * bfq_min_budget`, 1024 sectors with the default maximum of
    // 16384), and `__bfq_bfqq_recalc_budget` keeps a raised queue's budgets there. Not
    // raised, the same queue starts with two thirds of the maximum (`bfq_init_bfqq`) and
    // takes all its 200 requests (1600 sectors) in one turn. On a slow device a turn also
    // ends at `timeout_sync` (125 ms), a raised queue's only after 30 of them
    // (`bfq_set_budget_timeout`: `weight / orig_weight`).
    let first_turn = |low_latency: &str, lat: Nanos| {
        let mut r = Rig::simple(BFQ, 1);
        r.set("low_latency", low_latency);
        for i in 0..200 {
            r.queue(0, read(100_000 + i * 16, 8, 1000 + i).with_issuer(1, 0));
        }
        // A second reader at a lower weight of its own (never raised, never preempting),
        // waiting its turn. Two reads: beside a raised queue (weight 40 x 30) its share of
        // the scheduler tags is 256 x 10 / 1210, two (`bfqq_request_over_limit`).
        let be7 = IoPrio::new(IoPrioClass::Be, 7);
        for i in 0..2 {
            r.queue(
                0,
                read(900_000 + i * 16, 8, 5000 + i)
                    .with_issuer(2, 0)
                    .with_ioprio(be7),
            );
        }
        r.drain(lat);
        let order: Vec<u64> = r.drv.issues().iter().map(|i| i.privates[0]).collect();
        r.finish();
        order.iter().take_while(|&&p| p < 5000).count()
    };
    assert_eq!(first_turn("1", us(100)), 1024 / 8);
    assert_eq!(first_turn("0", us(100)), 200);
    assert_eq!(first_turn("1", ms(10)), 1024 / 8);
    let timed_out = first_turn("0", ms(10));
    assert!((12..=14).contains(&timed_out), "{timed_out}");
}

#[test]
fn bfq_a_requeued_request_goes_first_whoever_is_in_service() {
    // `bfq_insert_request` puts a request inserted at the head (a requeued one, from
    // `blk_mq_requeue_work`) on `bfqd->dispatch`, which `__bfq_dispatch_request` serves
    // before any queue: the requeued read of a queue not in service does not wait for that
    // queue's next turn.
    let mut r = Rig::simple(BFQ, 2);
    r.set("low_latency", "0");
    r.drv.set_faults(Some(Faults {
        rng: Rng::new(1),
        resource: 0,
        dev_resource: 0,
        io_err: 0,
        requeue: 1000,
        jitter: us(0),
    }));
    r.queue(0, read(500_000, 8, 100).with_issuer(2, 0));
    r.drv.set_faults(None);
    // A reader of a higher weight arrives and preempts the first one's queue.
    let be0 = IoPrio::new(IoPrioClass::Be, 0);
    for i in 0..6 {
        r.queue(0, read(i * 16, 8, i).with_issuer(1, 0).with_ioprio(be0));
    }
    assert_eq!(r.bfq().counters.preempted, 1);
    let before = r.drv.nr_issues();
    // The first read "completes" and is handed back; one of issuer 1's completes too.
    assert_eq!(r.complete_next(1), 1);
    r.advance_to(ms(1));
    assert_eq!(r.drv.requeued(), 1);
    assert_eq!(r.complete_next(1), 1);
    let next: Vec<u64> = r
        .drv
        .issues_from(before)
        .iter()
        .map(|i| i.privates[0])
        .collect();
    eprintln!("issued after the requeue: {next:?}");
    assert_eq!(
        next.first(),
        Some(&100),
        "the requeued read first: {next:?}"
    );
    r.drain(us(10));
    r.assert_each_done_once((0..6).chain([100]));
    r.finish();
}

#[test]
fn bfq_a_request_joins_the_queued_one_it_continues_at_insert_whatever_its_queue() {
    // Bios merge only within their own queue (`bfq_allow_bio_merge`), but a request being
    // inserted first tries `blk_mq_sched_try_insert_merge`: `elv_attempt_insert_merge`
    // folds it into the queued request that ends where it starts, the one-hit cache first,
    // then (nomerges=0) the elevator's hash, which holds every queue's requests.
    for (nomerges, merged) in [
        (mqblk_core::NoMerges::All, true),
        (mqblk_core::NoMerges::Simple, false),
        (mqblk_core::NoMerges::None, false),
    ] {
        let mut cfg = RigCfg::new(BFQ, 1);
        cfg.nomerges = nomerges;
        let mut r = Rig::new(cfg);
        r.queue(0, read(0, 8, 1)); // on the device
        r.queue(0, read(9000, 8, 2)); // the one-hit cache
        r.queue(0, read(1000, 8, 10).with_issuer(5, 0));
        // Another issuer's read continuing the last one: not a bio merge.
        assert!(matches!(
            r.submit(0, read(1008, 8, 11).with_issuer(6, 0)),
            Submit::Queued
        ));
        r.drain(us(10));
        let reqs = r.issued_after_first();
        let together = reqs.iter().any(|(_, _, p)| p == &vec![10, 11]);
        assert_eq!(together, merged, "{nomerges:?}: {reqs:?}");
        assert_eq!(r.bfq().counters.rq_merges, u64::from(merged));
        r.assert_each_done_once([1, 2, 10, 11]);
        r.finish();
    }
}

#[test]
fn bfq_a_turn_whose_time_runs_out_while_idling_ends_as_timed_out() {
    // `bfq_idle_slice_timer_body`: when the wait for the queue in service ends, its turn
    // ends as timed out if `timeout_sync` has passed since it began, so the turn's time is
    // charged (`bfq_bfqq_charge_time`: less than a third of its budget used) and its budget
    // doubled; otherwise as too idle, charged only what it moved. The queue is waited for
    // because the other one has a lower weight (`idling_needed_for_service_guarantees`).
    let turn_end = |service: Nanos| {
        let mut r = Rig::simple(BFQ, 1);
        r.set("low_latency", "0");
        let be0 = IoPrio::new(IoPrioClass::Be, 0);
        let be7 = IoPrio::new(IoPrioClass::Be, 7);
        r.queue(0, read(0, 8, 1).with_issuer(1, 0).with_ioprio(be0));
        for i in 0..4 {
            let bio = read(900_000 + i * 16, 8, 10 + i).with_issuer(2, 0);
            r.queue(0, bio.with_ioprio(be7));
        }
        r.advance_to(service);
        assert_eq!(r.complete_next(1), 1);
        let c = r.bfq().counters;
        assert_eq!((c.idles, c.expired_timeout, c.expired_too_idle), (1, 0, 0));
        // Meanwhile the other queue's requests are injected and complete.
        let c = loop {
            let c = r.bfq().counters;
            if c.expired_timeout + c.expired_too_idle > 0 {
                break c;
            }
            assert!(r.step(), "the idle timer is armed");
        };
        r.drain(us(10));
        r.assert_each_done_once([1, 10, 11, 12, 13]);
        r.finish();
        (c.expired_timeout, c.expired_too_idle, c.charged_time)
    };
    assert_eq!(turn_end(ms(10)), (0, 1, 0));
    assert_eq!(turn_end(ms(130)), (1, 0, 1));
}

#[test]
fn bfq_a_turn_whose_time_is_up_ends_at_a_completion_as_timed_out() {
    // `bfq_completed_request`: a queue in service that is not to be waited for ends its turn
    // at a completion once `timeout_sync` has passed as timed out, before asking whether it
    // has anything left (which would end it as "no more requests"). An async queue is never
    // waited for; with one write, its turn ends at that write's completion either way.
    let why = |service: Nanos| {
        let mut r = Rig::simple(BFQ, 1);
        r.set("low_latency", "0");
        r.queue(0, write(0, 8, 1));
        r.advance_to(service);
        assert_eq!(r.complete_next(1), 1);
        let c = r.bfq().counters;
        r.finish();
        (c.expired_timeout, c.expired_empty)
    };
    assert_eq!(why(ms(10)), (0, 1));
    assert_eq!(why(ms(130)), (1, 0));
}

#[test]
fn bfq_soft_rt_next_start_waits_for_the_queues_last_completion() {
    // `bfq_bfqq_expire` computes when a queue may next be raised as soft real-time
    // (`bfq_bfqq_softrt_next_start`: an idle slice and 4 jiffies from now at the earliest)
    // only if nothing of it is in flight; otherwise it marks the queue
    // (`bfq_mark_bfqq_softrt_update`) and `bfq_completed_request` computes it at the last
    // completion, except for a queue raised as interactive, whose value then stays as it
    // was. Two new readers (both raised as interactive) on a queueing SSD: the second
    // preempts the first, whose read is in flight (waiting for the first pays nothing: both
    // are raised, so `!bfq_better_to_idle`); that read completes at 10 ms, and the next
    // comes 1 ms later. Had the time been computed at the
    // expiry, it would lie 24 ms ahead and the reader would stay interactive; as it is, the
    // reader qualifies at once. (Made together on such a device, the two queues would
    // also be merged for good at once: stable merging is off here.)
    let mut r = Rig::simple(BFQ, 4);
    r.set("stable_merging", "0");
    r.queue(0, read(0, 8, 1).with_issuer(1, 0));
    r.queue(0, read(1_000_000, 8, 2).with_issuer(2, 0));
    let c = r.bfq().counters;
    assert_eq!((c.wr_interactive, c.preempted), (2, 1), "{c:?}");
    r.advance_to(ms(10));
    assert_eq!(r.complete_next(1), 1);
    r.advance_to(ms(11));
    r.queue(0, read(8, 8, 3).with_issuer(1, 0));
    assert_eq!(r.bfq().counters.wr_soft_rt, 1);
    r.drain(us(10));
    r.assert_each_done_once([1, 2, 3]);
    r.finish();
}

#[test]
fn bfq_finds_a_waker_even_for_a_queue_that_stays_busy() {
    // `bfq_add_request` calls `bfq_check_waker` for every request of a sync queue whose
    // issuer has no other one outstanding, busy queue or not: a queue whose request comes
    // within 4 ms of another queue's completion three times in a row (and which thinks long
    // enough not to count as short) gets that queue as its waker. Here the heavier reader
    // first thinks 20 ms after each of ten completions: longer than BFQ idles for it (8 ms
    // for the heavier of two weights), so it goes idle and each gap is a think-time sample
    // (`bfq_update_io_thinktime` samples only a queue that is not busy), a long one. Then it
    // thinks 5 ms, so BFQ is still waiting for it when its next read arrives: it never goes
    // idle, no more samples are taken, and only the per-arrival check can see that the
    // lighter queue's completions, injected meanwhile, come just before its reads.
    let mut r = Rig::simple(BFQ, 4);
    r.set("low_latency", "0");
    let be0 = IoPrio::new(IoPrioClass::Be, 0);
    let be7 = IoPrio::new(IoPrioClass::Be, 7);
    for i in 0..100 {
        r.queue(
            0,
            read(5_000_000 + i * 64, 8, i)
                .with_issuer(2, 0)
                .with_ioprio(be7),
        );
    }
    let heavy = |r: &mut Rig, n: u64| {
        let bio = read(n * 64, 8, 10_000 + n).with_issuer(1, 0);
        r.queue(0, bio.with_ioprio(be0));
    };
    heavy(&mut r, 0);
    r.drv.auto_complete(r.now, us(1000));
    let (mut sent, mut seen, mut due) = (1u64, 0usize, None::<Nanos>);
    let mut light = 100u64;
    while sent < 150 {
        let t = [r.next_event(), due]
            .into_iter()
            .flatten()
            .min()
            .expect("work");
        r.advance_to(t);
        if due.is_some_and(|d| d <= r.now) {
            heavy(&mut r, sent);
            sent += 1;
            due = None;
        }
        if r.done[seen..].iter().any(|b| b.private >= 10_000) {
            let think = if sent <= 10 { ms(20) } else { ms(5) };
            due = Some(r.now.saturating_add(think));
        }
        // The lighter reader stays backlogged: a new read for each one done, as far as its
        // share of the tags lets it (`bfq_limit_depth`).
        let light_done = r.done[seen..].iter().filter(|b| b.private < 10_000).count();
        for _ in 0..light_done {
            let bio = read(5_000_000 + light * 64, 8, light)
                .with_issuer(2, 0)
                .with_ioprio(be7);
            if !matches!(r.submit(0, bio), Submit::Queued) {
                break;
            }
            light += 1;
        }
        seen = r.done.len();
    }
    let c = r.bfq().counters;
    eprintln!("{c:?}");
    assert!(
        c.wakers >= 1,
        "no waker found: {c:?} {}",
        r.elv().debug_state()
    );
    r.drain(us(10));
    r.finish();
}

/// The light (be/7, issuer 2) and heavy (be/0, issuer 1) readers of the merge tests, on a
/// one-slot device with early queue merging on everywhere. Two priorities, so their
/// requests never merge with each other's (`blk_rq_merge_ok` wants one I/O priority) and
/// only their queues can.
const LIGHT: IoPrio = IoPrio::new(IoPrioClass::Be, 7);
const HEAVY: IoPrio = IoPrio::new(IoPrioClass::Be, 0);

fn merging_rig() -> Rig {
    let r = Rig::simple(BFQ, 1);
    r.set("queue_merging", "2");
    r.set("low_latency", "0");
    r
}

/// One slot, queue merging by position forced on and stable merging off, so that only
/// cooperators merge; weight raising as `low_latency` says.
fn cooperator_rig(low_latency: &str) -> Rig {
    let r = Rig::simple(BFQ, 1);
    r.set("queue_merging", "2");
    r.set("stable_merging", "0");
    r.set("low_latency", low_latency);
    r
}

/// The light reader (issuer 2) reads the even 4 KiB stripes, then the heavy one (issuer 1)
/// the odd ones just behind it: one sequential stream between them.
fn interleave(r: &mut Rig) {
    interleave_from(r, (2, LIGHT), (1, HEAVY));
}

/// `first` (issuer, priority) reads the even 4 KiB stripes, then `second` the odd ones.
fn interleave_from(r: &mut Rig, first: (u32, IoPrio), second: (u32, IoPrio)) {
    for (k, (issuer, prio)) in [first, second].into_iter().enumerate() {
        for i in 0..4u64 {
            let (sector, private) = (i * 16 + 8 * k as u64, 100 * k as u64 + i);
            r.queue(
                0,
                read(sector, 8, private)
                    .with_issuer(issuer, 0)
                    .with_ioprio(prio),
            );
        }
    }
}

/// A merge counts by the weights of the two queues: the heavy reader sent to the light
/// reader's queue (the light one queued first and is in service) is a merge into a lighter
/// queue; the other way round, the light reader sent to the heavy one's, into a heavier
/// one. `bfq-no-merge`'s mechanism is the second ("the shared queue may inherit such a high
/// weight"); the scenario prints both.
#[test]
fn bfq_merges_are_counted_by_the_weights_of_the_queues() {
    for heavy_first in [false, true] {
        let mut r = merging_rig();
        if heavy_first {
            interleave_from(&mut r, (1, HEAVY), (2, LIGHT));
        } else {
            interleave(&mut r);
        }
        let c = r.bfq().counters;
        assert!(c.queue_merges >= 1, "{}", r.elv().debug_state());
        let (into, other) = if heavy_first {
            (c.merges_into_heavier, c.merges_into_lighter)
        } else {
            (c.merges_into_lighter, c.merges_into_heavier)
        };
        assert_eq!(
            (into, other),
            (c.queue_merges, 0),
            "heavy first: {heavy_first}\n{}",
            r.elv().debug_state()
        );
        r.drain(us(10));
        r.finish();
    }
}

#[test]
fn bfq_a_merged_queue_keeps_the_weight_of_the_queue_merged_into() {
    // `bfq_merge_bfqqs` passes on IO_bound, the waker and weight raising, never a weight:
    // a light reader's queue that a heavy reader's interleaved I/O merges into stays light
    // (a member's priority reaches a shared queue only through `bfq_check_ioprio_change`).
    // One slot: the light reader's reads wait in its queue, which is in service.
    let mut r = merging_rig();
    interleave(&mut r);
    assert!(
        r.bfq().counters.queue_merges >= 1,
        "{}",
        r.elv().debug_state()
    );
    let state = r.elv().debug_state();
    let shared = state
        .lines()
        .find(|l| l.contains("issuers [2, 1]") || l.contains("issuers [1, 2]"))
        .unwrap_or_else(|| panic!("no shared queue\n{state}"));
    // Weights: be/0 80, be/7 10 (`bfq_ioprio_to_weight`). The queue merged into is the
    // light reader's, which the heavy reader's first read found close to its own.
    assert!(shared.contains("Sync(2)"), "{shared}");
    assert!(shared.contains("weight 10 "), "{shared}");
    // The merge is a redirection of the heavy reader (`bfq_merge_bfqqs` for its io_cq):
    // its first read, queued before any merge (one busy queue: no search), stays in its
    // own queue, which nobody sends to any more.
    let old = state
        .lines()
        .find(|l| l.contains("Sync(1)"))
        .unwrap_or_else(|| panic!("the heavy reader's queue is gone\n{state}"));
    assert!(
        old.contains("queued 1 ") && old.contains("issuers []"),
        "{old}"
    );
    r.drain(us(10));
    r.finish();
}

#[test]
fn bfq_has_work_while_idling_on_an_empty_queue_only_as_before_5_19() {
    // One process's read completes and BFQ idles on its queue, now empty. `bfq_has_work`
    // counts queued requests since "block, bfq: make bfq_has_work() more accurate" (5.19):
    // nothing to do. Before, it counted busy queues, and the queue idled on is still busy,
    // so every queue run during the idle slice called dispatch for nothing (and re-ran every
    // hardware queue 3 ms later).
    for busy in [false, true] {
        let mut r = Rig::simple(BFQ, 1);
        if busy {
            r.set("has_work_busy", "1");
        }
        r.queue(0, read(0, 8, 1).with_issuer(1, 0));
        assert_eq!(r.complete_next(1), 1);
        assert_eq!(r.bfq().counters.idles, 1, "BFQ idles on the queue");
        assert_eq!(r.elv().has_work(HctxIdx(0)), busy, "has_work_busy={busy}");
        r.drain(us(10));
        r.assert_each_done_once([1]);
        r.finish();
    }
}

/// Linux 5.10's `hctx->elevator_queued`: `bfq_has_work` says no for a hardware queue with
/// no request inserted through it that is still unfinished; BFQ drops the count when a
/// started request finishes (`bfq_finish_requeue_request`), not at dispatch as mq-deadline
/// does, so a queue whose request is on the device still has work.
#[test]
fn bfq_has_work_per_hardware_queue_until_its_requests_finish_only_as_linux_5_10() {
    for counted in [false, true] {
        let mut r = Rig::new(RigCfg {
            nr_hw: 2,
            nr_ctx: 2,
            ..RigCfg::new(BFQ, 1)
        });
        if counted {
            r.set("elevator_queued", "1");
        }
        // Queue 0's device side takes nothing yet (the slots are per hardware queue).
        r.drv.set_slots(0, 0);
        r.queue(1, read(1000, 8, 1).with_issuer(1, 0));
        assert_eq!(r.drv.last_issue().map(|i| i.hctx.0), Some(1));
        r.queue(0, read(5000, 8, 2).with_issuer(2, 0));
        r.queue(0, read(5008 + 64, 8, 3).with_issuer(2, 0));
        assert_eq!(r.drv.nr_issues(), 1);
        let has = |r: &Rig, h| r.elv().has_work(HctxIdx(h));
        // Request 1 is on the device: queue 1 still counts it.
        assert!(has(&r, 0) && has(&r, 1), "elevator_queued={counted}");
        assert_eq!(r.complete_next(1), 1);
        // Finished: queue 1 has nothing of its own left, queue 0 two requests.
        assert!(has(&r, 0), "elevator_queued={counted}");
        assert_eq!(has(&r, 1), !counted, "elevator_queued={counted}");
        r.drv.set_slots(0, 1);
        r.drain(us(10));
        r.assert_each_done_once([1, 2, 3]);
        r.finish();
    }
}

/// `bfq_may_be_close_cooperator`: "if either of the queues has already been detected as
/// seeky, then merging it with the other queue is unlikely to lead to sequential I/O". The
/// same interleaved readers merge when the heavy one read sequentially before, and not when
/// it read far-apart blocks (more than 19 of its last 32 requests seeks: `BFQQ_SEEKY`).
#[test]
fn a_seeky_queue_is_never_merged_with_a_close_one() {
    for seeky in [false, true] {
        let mut r = merging_rig();
        // The heavy reader's history: 24 reads, one after the other or 1 GiB apart.
        for i in 0..24u64 {
            let sector = if seeky {
                (i + 1) << 21
            } else {
                (1 << 21) + i * 8
            };
            r.queue(
                0,
                read(sector, 8, 1000 + i)
                    .with_issuer(1, 0)
                    .with_ioprio(HEAVY),
            );
            assert_eq!(r.complete_next(1), 1);
        }
        // Past its idle slice, well within the merge window of 100 ms.
        r.advance_to(ms(30));
        interleave(&mut r);
        let merges = r.bfq().counters.queue_merges;
        if seeky {
            assert_eq!(merges, 0, "{}", r.elv().debug_state());
        } else {
            assert!(merges >= 1, "{}", r.elv().debug_state());
        }
        r.drain(us(10));
        r.finish();
    }
}

/// `bfq_too_late_for_merging` counts `bfq_merge_time_limit` (100 ms) from a queue's first
/// service in its current backlogged period (`first_IO_time`, set in `bfq_bfqq_served` while
/// `service_from_backlogged` is 0, which `bfq_bfqq_handle_idle_busy_switch` resets). A
/// reader whose queue stayed busy for 120 ms (each read queued as the last completes, so
/// its queue is still in service, idled for) cannot be merged; the same reader after a
/// pause that let its queue go idle can, though it is older.
#[test]
fn the_merge_window_opens_again_each_time_a_queue_becomes_busy() {
    for pause in [false, true] {
        let mut r = merging_rig();
        for i in 0..24u64 {
            r.queue(
                0,
                read((1 << 21) + i * 8, 8, 1000 + i)
                    .with_issuer(1, 0)
                    .with_ioprio(HEAVY),
            );
            r.advance_to(ms(5 * i + 5));
            assert_eq!(r.complete_next(1), 1);
        }
        if pause {
            // Well past its idle slice: the turn ends and the queue goes idle. Then one
            // more read, served at once: a new backlogged period, with service in it.
            r.advance_to(ms(500));
            r.queue(
                0,
                read((1 << 21) + 24 * 8, 8, 2000)
                    .with_issuer(1, 0)
                    .with_ioprio(HEAVY),
            );
            assert_eq!(r.complete_next(1), 1);
        }
        interleave(&mut r);
        let merges = r.bfq().counters.queue_merges;
        if pause {
            assert!(merges >= 1, "{}", r.elv().debug_state());
        } else {
            assert_eq!(merges, 0, "{}", r.elv().debug_state());
        }
        r.drain(us(10));
        r.finish();
    }
}

/// `bfq_check_fifo` serves at most one expired request a turn: the FIFO is looked at when
/// a dispatch picks what comes next (`bfq_find_next_rq`), and marked looked at for the
/// rest of the turn (`BFQQF_fifo_expire`) whatever it found. Five reads of one process,
/// far apart; the first goes to the one-slot device at once, and picking its successor
/// uses up the turn's look (the FIFO holds only it). The others arrive behind it, the
/// next one chosen against where the head is (`bfq_choose_req`, backward seeks counted
/// double): 5. The device takes the next at 200 ms, every read expired by then
/// (`fifo_expire_sync` 125 ms). If the turn lasted (`timeout_sync` 500 ms) the queue goes
/// by position alone: 3, 2, 1 behind 5. If it ended at 125 ms (the default), the new turn
/// looks at the FIFO once: 1, the oldest, then on by position from there: 2, 3.
#[test]
fn bfq_serves_one_expired_request_a_turn_then_goes_by_position() {
    for (timeout, want) in [("500", [4u64, 5, 3, 2, 1]), ("125", [4, 5, 1, 2, 3])] {
        let mut r = Rig::simple(BFQ, 1);
        r.set("low_latency", "0");
        r.set("timeout_sync", timeout);
        // Arrival order, in MiB: 4, 1, 3, 5, 2.
        for (i, s) in [4u64, 1, 3, 5, 2].into_iter().enumerate() {
            r.queue(0, read(s << 11, 8, i as u64).with_issuer(1, 0));
        }
        r.advance_to(ms(200));
        r.complete_until_issued(5);
        let got: Vec<u64> = r.drv.issues().iter().map(|i| i.sector >> 11).collect();
        assert_eq!(
            got,
            want,
            "timeout_sync {timeout}: {}",
            r.elv().debug_state()
        );
        r.drain(us(10));
        r.finish();
    }
}

/// `bfq_allow_bio_merge` "takes advantage of [being asked] to perform an early merge of the
/// queues of possible cooperating processes": a bio that continues another process's
/// queued request is put to `bfq_setup_cooperator` before it may join it, and its issuer
/// is redirected to that queue there (the in-service one, whose last dispatch ended right
/// before it); the bio then joins the request, which is now in its own queue. Both readers
/// at one priority, so their I/O may share a request (`blk_rq_merge_ok`).
#[test]
fn bfq_a_bio_continuing_another_queues_request_merges_the_queues_first() {
    let mut r = cooperator_rig("0");
    // Reader 2 is served: its first read on the device, its second queued.
    r.queue(0, read(0, 8, 1).with_issuer(2, 0));
    r.queue(0, read(8, 8, 2).with_issuer(2, 0));
    // Reader 1 has a queue (busy with a read far away).
    r.queue(0, read(1 << 20, 8, 3).with_issuer(1, 0));
    assert_eq!(r.bfq().counters.queue_merges, 0);
    // Reader 1's next bio continues reader 2's queued read.
    match r.submit(0, read(16, 8, 4).with_issuer(1, 0)) {
        Submit::Merged => {}
        other => panic!("expected a bio merge, got {other:?}"),
    }
    assert_eq!(
        r.bfq().counters.queue_merges,
        1,
        "{}",
        r.elv().debug_state()
    );
    let state = r.elv().debug_state();
    assert!(
        state
            .lines()
            .any(|l| l.contains("Sync(2)") && l.contains("issuers [2, 1]")),
        "{state}"
    );
    r.drain(us(10));
    r.assert_each_done_once([1, 2, 3, 4]);
    // One request carried reads 2 and 4.
    assert!(
        r.drv.issues().iter().any(|i| i.privates == vec![2, 4]),
        "{:?}",
        r.drv.issues()
    );
    r.finish();
}

/// `bfqq_request_over_limit` (Linux 5.16): a queue holding its weight's share of the
/// scheduler tags (from insertion to finish) gets a depth of one, so one queue cannot take
/// the tags another needs. Beside a reader at be/0 (weight 80) whose read is on the device
/// (its queue in service, waited for: the weights differ), a reader at be/4 (weight 40) may
/// hold 64 x 40 / 120 = 21 of the 64 tags, and after that only what the tag map's depth-one
/// region has free (a tag or two); with the limit off (`tags_by_weight=0`, as kernels
/// before 5.16) all the 63 left. (Shares count the queues on the trees: had the be/0 queue
/// expired with its finish time behind the virtual time, the other would have them all.)
#[test]
fn bfq_a_queue_past_its_weights_share_of_the_tags_gets_one_at_a_time() {
    for (limit, want) in [("1", 21..=23), ("0", 63..=63)] {
        let mut r = Rig::new(RigCfg {
            nr_requests: 64,
            ..RigCfg::new(BFQ, 1)
        });
        r.set("low_latency", "0");
        r.set("tags_by_weight", limit);
        let heavy = IoPrio::new(IoPrioClass::Be, 0);
        r.queue(0, read(1 << 20, 8, 1).with_issuer(2, 0).with_ioprio(heavy));
        assert_tags_taken(r, limit, want, |i| {
            read(i * 64, 8, 100 + i).with_issuer(1, 0)
        });
    }
}

/// A queue that ran dry still counts for the tags' shares while it is on B-WF2Q+'s idle
/// tree (`on_st_or_in_serv`, its weight in `st->wsum`). A be/7 reader (weight 10) reads
/// once and queues a second read after a be/0 reader (weight 80) and a be/4 one (weight
/// 40) queued a read each. The be/0 reader's 32 KiB read goes next and is done; with
/// three weights in the sum while it was served, its finish time is ahead of the virtual
/// time when it runs dry, so it goes to the idle tree. The be/4 reader, in service now,
/// may then hold 64 x 40 / 130 = 20 of the 64 tags (and a tag or so of the map's
/// depth-one region); with the idle queue out of the sums its share was 64 x 40 / 50 =
/// 51, and it took 50 more beside the one it held.
#[test]
fn bfq_a_queue_on_the_idle_tree_keeps_its_share_of_the_tags() {
    let mut r = Rig::new(RigCfg {
        nr_requests: 64,
        ..RigCfg::new(BFQ, 1)
    });
    r.set("low_latency", "0");
    r.set("slice_idle_us", "0");
    let be = |l| IoPrio::new(IoPrioClass::Be, l);
    r.queue(0, read(1 << 26, 8, 1).with_issuer(3, 0).with_ioprio(be(7)));
    r.queue(0, read(1 << 24, 64, 2).with_issuer(2, 0).with_ioprio(be(0)));
    r.queue(0, read(0, 8, 3).with_issuer(1, 0).with_ioprio(be(4)));
    r.queue(
        0,
        read((1 << 26) + 8, 8, 4)
            .with_issuer(3, 0)
            .with_ioprio(be(7)),
    );
    r.complete_next(1);
    r.complete_next(1);
    let state = r.elv().debug_state();
    assert!(
        state.contains("in_service Some(2)"),
        "the be/4 reader is not in service\n{state}"
    );
    assert_tags_taken(r, "1", 19..=22, |i| {
        read(64 + i * 64, 8, 100 + i)
            .with_issuer(1, 0)
            .with_ioprio(be(4))
    });
}

/// Submits `bio(0)`, `bio(1)`, ... (64 at most) until one is refused a tag, checks that the
/// number queued is in `want`, then drains the rig.
fn assert_tags_taken(
    mut r: Rig,
    limit: &str,
    want: std::ops::RangeInclusive<usize>,
    bio: impl Fn(u64) -> Bio,
) {
    let mut taken = 0;
    for i in 0..64u64 {
        match r.submit(0, bio(i)) {
            Submit::Queued => taken += 1,
            Submit::Busy(_) => break,
            other => panic!("{other:?}"),
        }
    }
    assert!(
        want.contains(&taken),
        "tags_by_weight={limit}: {taken}\n{}",
        r.elv().debug_state()
    );
    r.drain(us(10));
    r.finish();
}

/// `bfqq_request_over_limit` takes the shares from the top down, and a cgroup over its share
/// limits its queues before their own shares do ("bfq: Limit number of requests consumed by
/// each cgroup"). Cgroup A (weight 300) has reader 2 waiting with reads queued; cgroup B
/// (weight 100) gets 16 of the 64 tags. In B, reader 3 (be/7, weight 10) holds 8 on the
/// device, still in service; reader 1 (be/4, weight 40) would get 16 x 40 / 50 = 13 by its
/// queue's share, but B holds 8 already: reader 1 gets 8, and a tag or so from the map's
/// depth-one region (by its queue's share alone it got 14). With no limit (`tags_by_weight=0`)
/// reader 1 takes the 52 left.
#[test]
fn bfq_a_cgroup_past_its_share_of_the_tags_limits_its_queues() {
    for (limit, want) in [("1", 8..=10), ("0", 52..=52)] {
        let blkcg = std::sync::Arc::new(mqblk_core::Blkcg::new());
        let a = blkcg.set_weight("/a", 300).unwrap();
        let b = blkcg.set_weight("/b", 100).unwrap();
        let mut r = Rig::new(RigCfg {
            nr_requests: 64,
            blkcg,
            ..RigCfg::new(BFQ, 8)
        });
        r.set("low_latency", "0");
        r.set("slice_idle_us", "0");
        r.set("tags_by_weight", limit);
        let be = |level| IoPrio::new(IoPrioClass::Be, level);
        for i in 0..8u64 {
            r.queue(
                0,
                read(i * 64, 8, 1 + i).with_issuer(3, b).with_ioprio(be(7)),
            );
        }
        assert_eq!(r.drv.nr_issues(), 8, "{}", r.elv().debug_state());
        for i in 0..4u64 {
            r.queue(
                0,
                read((1 << 20) + i * 64, 8, 20 + i)
                    .with_issuer(2, a)
                    .with_ioprio(be(4)),
            );
        }
        assert_tags_taken(r, limit, want, |i| {
            read((2 << 20) + i * 64, 8, 100 + i)
                .with_issuer(1, b)
                .with_ioprio(be(4))
        });
    }
}

/// `bfq_select_queue`'s first injection choice: while the in-service queue is idled for,
/// its own process's asynchronous I/O goes out at once, whatever the injection limit
/// (`bic->bfqq[0]`, a request of that process at its head). A new reader, raised as
/// interactive, is idled for while its read is on the device (raised beside a queue that is
/// not); a write of its own goes out meanwhile, and another process's write in the same
/// asynchronous queue waits (a raised queue with a short think time takes no general
/// injection).
#[test]
fn bfq_injects_the_idled_for_process_own_async_io_first() {
    for (writer, issued) in [(1u32, 2), (2, 1)] {
        let mut r = Rig::simple(BFQ, 2);
        r.queue(0, read(0, 8, 1).with_issuer(1, 0));
        r.queue(0, write(1 << 20, 8, 2).with_issuer(writer, 0));
        assert_eq!(
            r.drv.nr_issues(),
            issued,
            "writer {writer}: {}",
            r.elv().debug_state()
        );
        r.drain(us(10));
        r.finish();
    }
}

/// `bfq_select_queue`'s third injection choice (Linux 5.13, "always inject I/O of queues
/// blocked by wakers"): while the in-service queue is idled for, a queue it wakes gets its
/// I/O in whatever the injection limit, since it only has I/O when the waker is served.
/// Reader B (be/5, never raised) first thinks 20 ms after each of its reads, longer than
/// BFQ idles for it, so each gap is a think-time sample (`bfq_update_io_thinktime` skips a
/// busy queue) and a long one. Reader W (new, so raised) then sends 85 reads each the moment
/// the last completes: a short think time, which two later pauses of 20 ms do not undo
/// (`bfq_update_has_short_ttime` at each arrival). Three times B sends a read 1 ms after
/// one of W's completes, while W is idled for (raised beside a queue that is not): the
/// third makes W its waker (`bfq_check_waker`), and that read goes out at once; with
/// `inject_woken=0` (before 5.13) it waits, as a raised queue with a short think time
/// takes no general injection.
#[test]
fn bfq_injects_a_queue_the_idled_for_one_wakes() {
    for (woken, at_once) in [("1", true), ("0", false)] {
        let mut r = Rig::simple(BFQ, 1);
        r.set("inject_woken", woken);
        let be5 = IoPrio::new(IoPrioClass::Be, 5);
        let b = |i: u64| {
            read((1 << 22) + i * 8, 8, 100 + i)
                .with_issuer(2, 0)
                .with_ioprio(be5)
        };
        let w = |i: u64| read(i * 8, 8, 1000 + i).with_issuer(1, 0);
        let mut t = ms(0);
        for i in 0..85 {
            r.advance_to(t);
            r.queue(0, b(i));
            assert_eq!(r.complete_next(1), 1);
            t = t.saturating_add(ms(20));
        }
        r.advance_to(t);
        for i in 0..85 {
            r.queue(0, w(i));
            assert_eq!(r.complete_next(1), 1);
        }
        for round in 0..3u64 {
            if round > 0 {
                t = t.saturating_add(ms(20));
                r.advance_to(t);
            }
            r.queue(0, w(100 + round));
            assert_eq!(r.complete_next(1), 1);
            t = r.now.saturating_add(ms(1));
            r.advance_to(t);
            let before = r.drv.nr_issues();
            r.queue(0, b(100 + round));
            if round < 2 {
                // Not yet woken by W, which is idled for: B's read goes out when that ends.
                assert_eq!(r.drv.nr_issues(), before, "{}", r.elv().debug_state());
                t = t.saturating_add(ms(40));
                r.advance_to(t);
                assert_eq!(r.complete_next(1), 1, "{}", r.elv().debug_state());
            } else {
                assert_eq!(r.bfq().counters.wakers, 1, "{}", r.elv().debug_state());
                let went = r.drv.nr_issues() > before;
                assert_eq!(
                    went,
                    at_once,
                    "inject_woken={woken}: {}",
                    r.elv().debug_state()
                );
            }
        }
        r.drain(us(10));
        r.finish();
    }
}

/// `bfq_update_hw_tag` returns at once while `hw_tag` is 1: a device once seen with more than
/// three commands in flight is taken to queue commands for good, though BFQ may later keep
/// it shallow (and the largest number in flight, which caps the injection limit, is no
/// longer reset). Ours sampled on and, with at most three in flight over a window of
/// samples, took it back, which turned queue merging on again on an SSD (`bfq-no-merge`'s dbench
/// model merged 118 times with merging meant to be off).
#[test]
fn bfq_keeps_a_device_queueing_once_it_has_seen_it_queue() {
    let mut r = Rig::simple(BFQ, 8);
    let mut next = 0u64;
    let mut one_more = |r: &mut Rig| {
        r.queue(0, read(next * 64, 8, next).with_issuer(1, 0));
        next += 1;
    };
    for _ in 0..8 {
        one_more(&mut r);
    }
    // Eight in flight at every completion: a window of valid samples says it queues (an
    // unknown `hw_tag` is taken to queue too, so the verdict itself is checked).
    for _ in 0..40 {
        assert_eq!(r.complete_next(1), 1);
        one_more(&mut r);
    }
    let state = r.elv().debug_state();
    assert!(state.contains("hw_tag Some(true)"), "{state}");
    assert!(r.bfq().nonrot_with_queueing, "{}", r.elv().debug_state());
    // Now at most three in the device, five waiting in BFQ: still valid samples (more than
    // three in flight or queued), each seeing three in flight.
    r.drv.set_slots(0, 3);
    for _ in 0..80 {
        r.complete_next(1);
        one_more(&mut r);
    }
    assert!(r.bfq().nonrot_with_queueing, "{}", r.elv().debug_state());
    r.drain(us(10));
    r.finish();
}

/// `bfq_bfqq_handle_idle_busy_switch`: a raising starts only for a queue of one process or
/// one shared by a stable merge (`bfqq->bic || stably_merged`); queues merged as cooperators
/// are kept out of it. Two readers at the default priority, interleaved close together (no
/// request of one adjoins the other's), are merged with raising off; then, raising on, the
/// shared queue comes back from three seconds idle (interactive by its idleness) beside a
/// new reader: only the new reader is raised.
/// Issuers 1 and 2 read interleaved 4 KiB blocks of one region: their queues merge as
/// cooperators.
fn merge_two_issuers(r: &mut Rig) {
    for (k, issuer) in [1u32, 2].into_iter().enumerate() {
        for i in 0..4u64 {
            let sector = i * 32 + 16 * k as u64;
            r.queue(
                0,
                read(sector, 8, 100 * k as u64 + i).with_issuer(issuer, 0),
            );
        }
    }
    assert!(
        r.bfq().counters.queue_merges >= 1,
        "{}",
        r.elv().debug_state()
    );
}

#[test]
fn bfq_a_queue_shared_by_cooperators_is_not_raised() {
    let mut r = cooperator_rig("0");
    merge_two_issuers(&mut r);
    r.drain(us(10));
    r.set("low_latency", "1");
    r.advance_to(r.now.saturating_add(ms(3000)));
    r.queue(0, read(4096, 8, 500).with_issuer(2, 0));
    r.queue(0, read(1 << 20, 8, 501).with_issuer(3, 0));
    let c = r.bfq().counters;
    assert_eq!(
        (c.wr_interactive, c.wr_soft_rt),
        (1, 0),
        "{}",
        r.elv().debug_state()
    );
    r.finish();
}

/// Issuers 1 and 2 merge as cooperators, their shared queue turns seeky (scattered reads of
/// both, served one at a time), and issuer 2's next read, 50 ms later, splits it off into a
/// queue of its own. Returns when.
fn split_issuer_2(r: &mut Rig) -> Nanos {
    merge_two_issuers(r);
    for i in 0..40u64 {
        let issuer = 1 + (i % 2) as u32;
        r.queue(
            0,
            read((i * 7919 % 997) * 4096, 8, 1000 + i).with_issuer(issuer, 0),
        );
        r.drain(us(10));
    }
    let split_at = r.now.saturating_add(ms(50));
    r.advance_to(split_at);
    r.queue(0, read(1 << 22, 8, 2000).with_issuer(2, 0));
    r.drain(us(10));
    assert_eq!(
        r.bfq().counters.queue_splits,
        1,
        "{}",
        r.elv().debug_state()
    );
    split_at
}

/// The word after `field` on the state dump's line of issuer `issuer`'s own queue (one
/// with no other issuer).
fn queue_field(r: &Rig, issuer: u32, field: &str) -> String {
    let state = r.elv().debug_state();
    let line = state
        .lines()
        .find(|l| l.contains(&format!("issuers [{issuer}]")))
        .unwrap_or_else(|| panic!("no queue of issuer {issuer} alone\n{state}"));
    line.split(&format!(" {field} "))
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .unwrap_or_else(|| panic!("no {field} in {line}"))
        .to_string()
}

/// Issuer `issuer`'s own queue, as the state dump shows: its mean think time in us, and
/// whether it counts as short.
fn ttime_of(r: &Rig, issuer: u32) -> (u64, bool) {
    let mean = queue_field(r, issuer, "ttime");
    let mean = mean
        .parse()
        .unwrap_or_else(|_| panic!("think time {mean:?} is no number"));
    (mean, queue_field(r, issuer, "short_ttime") == "true")
}

/// `bfq_update_has_short_ttime` leaves a queue split off a shared one with the think-time
/// state it resumed for `bfq_wr_min_idle_time` (2 s: "Idle window just restored,
/// statistics are meaningless"), whatever its think time meanwhile. Issuer 2 resumes its
/// state from before the merge (a new queue: short), then reads every 20 ms: by 1.8 s its
/// mean think time is long on 90 samples, and the flag is still short; its first read past
/// the 2 s makes it long. (Ours read the statistics at every use until 2026-11-27.)
#[test]
fn bfq_a_queue_split_off_a_shared_one_keeps_its_think_time_state_for_two_seconds() {
    let mut r = cooperator_rig("0");
    let split_at = split_issuer_2(&mut r);
    assert!(ttime_of(&r, 2).1, "{}", r.elv().debug_state());
    for i in 0..90u64 {
        r.advance_to(split_at.saturating_add(ms(20 * (i + 1))));
        r.queue(0, read((1 << 24) + i * 4096, 8, 3000 + i).with_issuer(2, 0));
        r.drain(us(10));
    }
    let (mean, short) = ttime_of(&r, 2);
    assert!(
        mean > 4_000 && short,
        "a long think time ({mean} us) is to be held short until 2 s after the split\n{}",
        r.elv().debug_state()
    );
    r.advance_to(split_at.saturating_add(ms(2100)));
    r.queue(0, read(1 << 25, 8, 4000).with_issuer(2, 0));
    r.drain(us(10));
    assert!(!ttime_of(&r, 2).1, "{}", r.elv().debug_state());
    r.finish();
}

/// A queue made when its issuer leaves a shared queue that turned seeky starts no raising
/// for `bfq_wr_min_idle_time` (2 s) after the split: `bfq_bfqq_handle_idle_busy_switch`
/// updates raising only once `split_time + bfq_wr_min_idle_time` has passed. Its issuer,
/// back after 100 ms with one small read (soft real-time by its rate), is not raised; after
/// the 2 s it is, as any queue idle that long.
#[test]
fn bfq_a_queue_split_off_a_shared_one_is_not_raised_for_two_seconds() {
    let mut r = cooperator_rig("1");
    let split_at = split_issuer_2(&mut r);
    let before = r.bfq().counters;
    // The idle slice for it runs out, and its turn ends.
    r.advance_to(split_at.saturating_add(ms(30)));
    r.advance_to(split_at.saturating_add(ms(100)));
    r.queue(0, read(1 << 23, 8, 2001).with_issuer(2, 0));
    r.drain(us(10));
    let c = r.bfq().counters;
    assert_eq!(
        (c.wr_interactive, c.wr_soft_rt),
        (before.wr_interactive, before.wr_soft_rt),
        "raised within 2 s of its split\n{}",
        r.elv().debug_state()
    );
    // Past the 2 s, the same small read raises it again.
    r.advance_to(split_at.saturating_add(ms(2200)));
    r.advance_to(split_at.saturating_add(ms(2300)));
    r.queue(0, read(1 << 24, 8, 2002).with_issuer(2, 0));
    let c = r.bfq().counters;
    assert_eq!(
        c.wr_interactive + c.wr_soft_rt,
        before.wr_interactive + before.wr_soft_rt + 1,
        "not raised 2 s after its split\n{}",
        r.elv().debug_state()
    );
    r.drain(us(10));
    r.finish();
}

/// Issuer 3 reads, thinks 8 ms, and reads again right after a read of issuer 1 completes,
/// twelve times: issuer 1's queue is found as its waker (`bfq_check_waker`), unless that
/// queue is shared (issuers 1 and 2 merged into it), whose completions clear the last
/// completed queue instead (`bfq_completed_request`: "a false waker will unjustly steal
/// bandwidth to its supposedly woken queue").
fn wakers_found_after(r: &mut Rig) -> u64 {
    for round in 0..12u64 {
        r.queue(0, read(1 << 24, 8, 3000 + round).with_issuer(3, 0));
        r.drain(us(100));
        r.advance_to(r.now.saturating_add(ms(8)));
        r.queue(0, read(round * 64, 8, 4000 + round).with_issuer(1, 0));
        r.drain(us(100));
        r.advance_to(r.now.saturating_add(us(500)));
    }
    r.drain(us(100));
    r.bfq().counters.wakers
}

/// Issuer `waker` reads, and 0.5 ms after its read completes issuer `woken` reads, then
/// thinks 8 ms: one arrival of `woken` that `bfq_check_waker` sees follow `waker`'s
/// completion.
fn wake(r: &mut Rig, waker: u32, woken: u32, n: u64) {
    r.queue(
        0,
        read((u64::from(waker) << 20) + n * 64, 8, 5000 + n).with_issuer(waker, 0),
    );
    r.drain(us(100));
    r.advance_to(r.now.saturating_add(us(500)));
    r.queue(
        0,
        read((1 << 24) + n * 64, 8, 6000 + n).with_issuer(woken, 0),
    );
    r.drain(us(100));
    r.advance_to(r.now.saturating_add(ms(8)));
}

/// One slot, no queue merging and no weight raising: the rig of the waker tests, where
/// only the order of completions and arrivals decides.
fn waker_rig() -> Rig {
    let r = Rig::simple(BFQ, 1);
    r.set("low_latency", "0");
    r.set("queue_merging", "0");
    r
}

/// [`wake`] until BFQ has found a waker (at most ten times): returns the reads of `woken`
/// it took.
fn wake_until_a_waker(r: &mut Rig, waker: u32, woken: u32) -> u64 {
    let mut reads = 0;
    while r.bfq().counters.wakers == 0 && reads < 10 {
        wake(r, waker, woken, reads);
        reads += 1;
    }
    reads
}

/// The waker of issuer `issuer`'s own queue, as the state dump shows it.
fn waker_of(r: &Rig, issuer: u32) -> String {
    queue_field(r, issuer, "waker")
}

/// `__bfq_insert_request` samples the think time and updates `has_short_ttime` before
/// `bfq_add_request` checks for a waker, so the arrival whose think time makes the queue's
/// mean long is already checked. Issuer 3 thinks 8 ms between reads, each 0.5 ms after one
/// of issuer 1's completes: its fourth read brings its samples past 80 with a long mean and
/// counts as the first wake-up; the sixth confirms issuer 1. Checked before the update (ours
/// until 2026-11-27), the fourth did not count and the seventh confirmed it.
#[test]
fn bfq_checks_for_a_waker_with_the_think_time_of_the_same_arrival() {
    let mut r = waker_rig();
    let reads = wake_until_a_waker(&mut r, 1, 3);
    assert_eq!(reads, 6, "{}", r.elv().debug_state());
    r.finish();
}

/// Since "bfq: Allow current waker to defend against a tentative one" (Linux 5.19)
/// `bfq_check_waker` no longer ignores the current waker's wake-ups: one of them restarts the
/// count of a tentative rival, and three confirm the waker again. Issuer 1 becomes issuer
/// 3's waker (once its think time is known to be long); then issuer 2, 1, 2, 2 wake it:
/// with the current waker ignored, issuer 2 had its three in a row and took over; now it
/// has two, and issuer 1 stays. Three more of issuer
/// 1's confirm it once more (counted as a waker set, as the kernel logs "set waker").
#[test]
fn bfq_the_current_waker_defends_against_a_tentative_one() {
    let mut r = waker_rig();
    // Until issuer 3's think time is known to be long (a new queue counts as short), its
    // arrivals are not checked: at most a few more than the three wake-ups.
    wake_until_a_waker(&mut r, 1, 3);
    assert_eq!(r.bfq().counters.wakers, 1, "{}", r.elv().debug_state());
    let first = waker_of(&r, 3);
    assert_ne!(first, "None", "{}", r.elv().debug_state());
    for (n, w) in [2u32, 1, 2, 2].into_iter().enumerate() {
        wake(&mut r, w, 3, 10 + n as u64);
    }
    assert_eq!(
        (r.bfq().counters.wakers, waker_of(&r, 3)),
        (1, first.clone()),
        "the tentative waker took over\n{}",
        r.elv().debug_state()
    );
    for n in 0..3 {
        wake(&mut r, 1, 3, 20 + n);
    }
    assert_eq!(
        (r.bfq().counters.wakers, waker_of(&r, 3)),
        (2, first),
        "{}",
        r.elv().debug_state()
    );
    r.finish();
}

#[test]
fn bfq_a_shared_queue_is_nobodys_waker() {
    let mut r = waker_rig();
    let alone = wakers_found_after(&mut r);
    r.finish();
    assert!(alone >= 1, "issuer 1's own queue is not found as the waker");
    let mut r = cooperator_rig("0");
    merge_two_issuers(&mut r);
    r.drain(us(10));
    let shared = wakers_found_after(&mut r);
    assert_eq!(
        shared,
        0,
        "a shared queue became a waker\n{}",
        r.elv().debug_state()
    );
    r.finish();
}

/// `bfq_bfqq_save_state` keeps a process's injection state when its queue joins a shared
/// one, and `bfq_bfqq_resume_state` gives it back on the split: the measured service time,
/// the injection limit and when the limit last fell. Issuer 2 reads alone, 20 ms apart, on
/// an empty device: its service time is measured and its limit becomes 1; merged with
/// issuer 1 and split off again it has that limit, where a queue made fresh has 0.
#[test]
fn bfq_a_queue_split_off_a_shared_one_resumes_its_injection_limit() {
    let mut r = cooperator_rig("0");
    for i in 0..4u64 {
        r.advance_to(r.now.saturating_add(ms(20)));
        r.queue(0, read((1 << 26) + i * 4096, 8, 7000 + i).with_issuer(2, 0));
        r.drain(us(100));
    }
    let limit = |r: &Rig| queue_field(r, 2, "inject_limit");
    assert_eq!(limit(&r), "1", "{}", r.elv().debug_state());
    split_issuer_2(&mut r);
    assert_eq!(limit(&r), "1", "{}", r.elv().debug_state());
    r.finish();
}

/// A queue made when its issuer leaves a shared queue takes the shared queue's waker
/// (`bfq_init_rq`: `bfqq->waker_bfqq = old_bfqq->waker_bfqq`, at the head of the waker's
/// `woken_list`), so the journal that wakes a process goes on being injected for it after
/// the split. Issuer 5 becomes issuer 2's waker; issuers 1 and 2 then merge as cooperators
/// and issuer 2 is split off again.
#[test]
fn bfq_a_queue_split_off_a_shared_one_keeps_its_waker() {
    let mut r = cooperator_rig("0");
    wake_until_a_waker(&mut r, 5, 2);
    let w = waker_of(&r, 2);
    assert_ne!(w, "None", "{}", r.elv().debug_state());
    split_issuer_2(&mut r);
    assert_eq!(waker_of(&r, 2), w, "{}", r.elv().debug_state());
    r.finish();
}

/// `bfq_select_queue` waits for a queue in service that ran dry only while its requests are
/// in flight or once its wait is armed (at its last completion); one brought back into
/// service with nothing queued and nothing in flight ends its turn at once (`BFQQE_NO_MORE_REQUESTS`).
/// Reader A (be/4) is preempted while waited for by the heavier B (be/0) and stays busy (a
/// lighter C waits, so the weights differ); once B's wait ends in vain A comes back into
/// service empty and is expired there, and C is served. (Ours waited `slice_idle` for A
/// there until 2026-11-27.) And `__bfq_set_in_service_queue` forgets where
/// the last queue's I/O ended (`in_serv_last_pos = 0`, "bfq: Avoid false bfq queue
/// merging"): reader D's read next to where B's read ended merges D's queue into nobody's.
#[test]
fn bfq_a_queue_back_in_service_with_nothing_to_do_ends_its_turn_at_once() {
    let mut r = cooperator_rig("0");
    let be = |l| IoPrio::new(IoPrioClass::Be, l);
    r.queue(0, read(0, 8, 1).with_issuer(1, 0).with_ioprio(be(4)));
    r.queue(0, read(1 << 26, 8, 2).with_issuer(3, 0).with_ioprio(be(7)));
    r.complete_next(1);
    r.queue(0, read(1 << 28, 8, 3).with_issuer(2, 0).with_ioprio(be(0)));
    r.complete_next(1);
    let empty = r.bfq().counters.expired_empty;
    // B is waited for in vain; A comes back into service, empty, and its turn ends.
    r.advance_to(r.now.saturating_add(ms(30)));
    let state = r.elv().debug_state();
    assert!(
        state.contains("in_service Some(1)") && r.bfq().counters.expired_empty > empty,
        "A is still in service, or C is not\n{state}"
    );
    r.queue(
        0,
        read((1 << 28) + 16, 8, 4)
            .with_issuer(4, 0)
            .with_ioprio(be(4)),
    );
    assert_eq!(
        r.bfq().counters.queue_merges,
        0,
        "{}",
        r.elv().debug_state()
    );
    r.drain(us(10));
    r.finish();
}

/// Each queue's issuers, sorted, as the state dump lists them.
fn issuer_sets(r: &Rig) -> Vec<Vec<u32>> {
    let state = r.elv().debug_state();
    let mut sets: Vec<Vec<u32>> = state
        .lines()
        .filter_map(|l| l.split("issuers [").nth(1)?.split(']').next())
        .map(|list| {
            let mut v: Vec<u32> = list
                .split(", ")
                .filter_map(|x| x.trim().parse().ok())
                .collect();
            v.sort_unstable();
            v
        })
        .filter(|v| !v.is_empty())
        .collect();
    sets.sort();
    sets
}

/// `stably_merged` belongs to a process (`bfq_iocq_bfqq_data`), not to a queue: the two
/// issuers of a stable merge never leave their shared queue, but an issuer that joined
/// them later as a cooperator leaves it like any other once it turns seeky (`bfq_init_rq`
/// checks the requesting process's flag). Issuers 1 and 2 start together on a queueing
/// SSD; with merging forced on, BFQ treats the device as one without queueing (the flag
/// `nonrot_with_queueing` held false, as in the kernel `scripts/guest-seed004.sh` builds),
/// so their stable merge is scheduled and done at issuer 2's first request after 600 ms,
/// not at once (`bfq_do_or_sched_stable_merge`); later issuer 3 reads next to issuer 1 and
/// the three end in one queue (the shared one is redirected to issuer 3's,
/// `bfq_setup_merge`'s direction); then all three read at random, the queue turns seeky,
/// and only issuer 3 gets a queue of its own again. With the flag on the queue (ours until
/// 2026-11-27) nobody left, and in `single-hctx-dispatch`'s twin 7 of 8 dbench clients ended in one
/// queue for good.
#[test]
fn bfq_only_the_issuers_of_a_stable_merge_stay_merged_for_good() {
    let mut r = Rig::simple(BFQ, 4);
    r.set("queue_merging", "2");
    r.set("low_latency", "0");
    r.queue(0, read(0, 8, 1).with_issuer(1, 0));
    r.queue(0, read(1 << 24, 8, 2).with_issuer(2, 0));
    r.drain(us(10));
    let state = r.elv().debug_state();
    assert_eq!(
        r.bfq().counters.stable_merges,
        0,
        "scheduled, not done: {state}"
    );
    // Past `LATE_STABLE_MERGE` and the stable-merge window: issuer 2's next request
    // carries out the scheduled merge, and issuer 3 can only join as a cooperator.
    r.advance_to(r.now.saturating_add(ms(700)));
    r.queue(0, read((1 << 24) + 8, 8, 3).with_issuer(2, 0));
    r.drain(us(10));
    let state = r.elv().debug_state();
    assert_eq!(r.bfq().counters.stable_merges, 1, "{state}");
    for i in 0..4u64 {
        r.queue(0, read(64 + i * 32, 8, 10 + i).with_issuer(1, 0));
        r.queue(0, read(80 + i * 32, 8, 20 + i).with_issuer(3, 0));
    }
    r.queue(0, read((1 << 24) + 64, 8, 30).with_issuer(2, 0));
    r.drain(us(10));
    assert_eq!(
        issuer_sets(&r),
        [vec![1, 2, 3]],
        "{}",
        r.elv().debug_state()
    );
    for i in 0..60u64 {
        let issuer = 1 + (i % 3) as u32;
        r.queue(
            0,
            read((i * 7919 % 997) * 40_960, 8, 1000 + i).with_issuer(issuer, 0),
        );
        r.drain(us(10));
    }
    // Its turn ends (waited for in vain) with the queue seeky: marked for splitting; then
    // each issuer sends one more read.
    r.advance_to(r.now.saturating_add(ms(50)));
    for (i, issuer) in [3u32, 1, 2].into_iter().enumerate() {
        r.queue(
            0,
            read((1 << 22) * (i as u64 + 1), 8, 2000 + i as u64).with_issuer(issuer, 0),
        );
        r.drain(us(10));
    }
    assert_eq!(
        r.bfq().counters.queue_splits,
        1,
        "{}",
        r.elv().debug_state()
    );
    assert_eq!(
        issuer_sets(&r),
        [vec![1, 2], vec![3]],
        "{}",
        r.elv().debug_state()
    );
    r.finish();
}

#[test]
fn bfq_a_turn_begun_to_recover_a_service_hole_leaves_the_right_to_recover_one_again() {
    // `bfq_bfqq_update_budg_for_activation` leaves `non_blocking_wait_rq` set when a queue
    // comes back in time to recover a service hole ("We do not clear the flag ... here"),
    // and `bfq_bfqq_expire` neither sets nor clears it when a turn ends timed out or with
    // its budget spent: it only zeroes the turn's service. So a queue whose recovered turn
    // times out while it is empty, and that comes back within three idle slices, may
    // preempt again, with what its budget holds. Two readers of one weight, idled for
    // whatever their pattern (`strict_guarantees`), one slot: A's first turn ends too idle
    // (empty: the flag is set), A comes back and preempts B, A's one read then takes 130
    // ms (past `timeout_sync`) and its turn ends timed out after the idle wait, and A
    // comes back 13 ms after that read's completion: it preempts B again.
    let mut r = Rig::simple(BFQ, 1);
    r.set("low_latency", "0");
    r.set("strict_guarantees", "1");
    r.set("stable_merging", "0");
    let (a, b) = (1, 2);
    r.queue(0, read(0, 8, 1).with_issuer(a, 0));
    for i in 0..40 {
        r.queue(0, read(1_000_000 + i * 64, 8, 100 + i).with_issuer(b, 0));
    }
    r.advance_to(ms(1));
    assert_eq!(r.complete_next(1), 1);
    // A is waited for in vain; B takes the device.
    r.advance_to(ms(10));
    let c = r.bfq().counters;
    assert_eq!((c.expired_too_idle, c.preempted), (1, 0), "{c:?}");
    // B's read on the device completes; A comes back in time and preempts B.
    assert_eq!(r.complete_next(1), 1);
    r.advance_to(ms(12));
    r.queue(0, read(8, 8, 2).with_issuer(a, 0));
    assert_eq!(r.bfq().counters.preempted, 1);
    // B's read dispatched before the preemption, then A's, which takes 130 ms.
    r.advance_to(ms(13));
    assert_eq!(r.complete_next(1), 1);
    r.advance_to(ms(143));
    assert_eq!(r.complete_next(1), 1);
    r.advance_to(ms(152));
    let c = r.bfq().counters;
    assert_eq!(c.expired_timeout, 1, "{c:?}\n{}", r.elv().debug_state());
    r.advance_to(ms(156));
    r.queue(0, read(16, 8, 3).with_issuer(a, 0));
    assert_eq!(
        r.bfq().counters.preempted,
        2,
        "A did not preempt B\n{}",
        r.elv().debug_state()
    );
    r.drain(us(10));
    r.finish();
}

#[test]
fn bfq_a_queue_of_another_priority_made_among_others_splits_their_stable_merges() {
    // `bfq_do_or_sched_stable_merge`: a sync queue made within the burst interval of the
    // last one made, at its priority, merges into it at once on a device that queues and
    // does not rotate; a queue of another priority becomes the last one made instead, so
    // the queues after it start a second shared queue. As dbench's clients and jbd2 (at
    // be/0) on ext4 here: three clients, jbd2, three more: 4 merges into 2 shared queues
    // (`shared_queues_made`), as the kernel's log shows in most runs of `bfq-no-merge`'s twin.
    // (Reads here, for sync queues: the writes of ours are async unless marked sync.)
    let mut r = Rig::simple(BFQ, 8);
    let be0 = IoPrio::new(IoPrioClass::Be, 0);
    for (i, issuer) in [1u32, 2, 3, 9, 4, 5, 6].into_iter().enumerate() {
        let bio = read(u64::from(issuer) << 20, 8, i as u64).with_issuer(issuer, 0);
        r.queue(
            0,
            if issuer == 9 {
                bio.with_ioprio(be0)
            } else {
                bio
            },
        );
    }
    let c = r.bfq().counters;
    assert_eq!(
        (c.queue_merges, c.shared_queues_made),
        (4, 2),
        "{}",
        r.elv().debug_state()
    );
    assert_eq!(
        issuer_sets(&r)
            .into_iter()
            .filter(|s| s.len() > 1)
            .collect::<Vec<_>>(),
        vec![vec![1, 2, 3], vec![4, 5, 6]]
    );
    r.drain(us(10));
    r.finish();
}

/// The think time of a debug_state line's queue `q`, in microseconds.
fn ttime_us(r: &Rig, q: u32) -> u64 {
    let state = r.elv().debug_state();
    let line = state
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("q{q} ")))
        .unwrap_or_else(|| panic!("no q{q} in {state}"));
    line.split("ttime ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no ttime in {line}"))
}

/// `bfq_update_io_thinktime` returns at once for a busy queue: a lone reader that thinks
/// 5 ms after each read, while BFQ idles for it (8 ms), is never idle when its next read
/// comes, so no gap is sampled and its think time stays 0. Sampling every gap would give
/// 5 ms, and a think time biased short (which gates waker detection and injection).
#[test]
fn bfq_samples_think_time_only_for_a_queue_that_is_not_busy() {
    let mut r = Rig::simple(BFQ, 1);
    r.set("low_latency", "0");
    let mut t = ms(0);
    for i in 0..20u64 {
        r.advance_to(t);
        r.queue(0, read(i * 8, 8, i).with_issuer(1, 0));
        assert_eq!(r.complete_next(1), 1);
        t = r.now.saturating_add(ms(5));
    }
    assert_eq!(ttime_us(&r, 0), 0, "{}", r.elv().debug_state());
    // Gaps longer than the idle window end the turn first: those are sampled (capped at
    // twice slice_idle).
    for i in 20..40u64 {
        t = r.now.saturating_add(ms(30));
        r.advance_to(t);
        r.queue(0, read(i * 8, 8, i).with_issuer(1, 0));
        assert_eq!(r.complete_next(1), 1);
    }
    let mean = ttime_us(&r, 0);
    assert!((12_000..=16_500).contains(&mean), "{mean} us");
    r.drain(us(10));
    r.finish();
}

/// The end of `bfq_add_request` notes the arrival time of every request of a queue not
/// raised, idle-to-busy ones included: an asynchronous queue that comes back after a long
/// pause is measured from its first new write, so its second one, 10 ms later, does not
/// raise it (`bfq_wr_min_inter_arr_async` is 500 ms). Noting only busy arrivals raised it x30.
#[test]
fn bfq_does_not_raise_an_async_queue_on_its_second_write_after_a_pause() {
    let mut r = Rig::simple(BFQ, 1);
    r.queue(0, write(0, 8, 1).with_issuer(1, 0));
    assert_eq!(r.complete_next(1), 1);
    r.advance_to(ms(1000));
    // A reader holds the one slot, so the writes stay queued and their queue busy.
    r.queue(0, read(1 << 20, 8, 2).with_issuer(2, 0));
    r.queue(0, write(1000, 8, 3).with_issuer(1, 0));
    r.advance_to(ms(1010));
    r.queue(0, write(2000, 8, 4).with_issuer(1, 0));
    assert_eq!(r.bfq().counters.wr_async, 0, "{}", r.elv().debug_state());
    // 600 ms after that, still busy: raised, as the kernel raises a held-back writer.
    r.advance_to(ms(1610));
    r.queue(0, write(3000, 8, 5).with_issuer(1, 0));
    assert_eq!(r.bfq().counters.wr_async, 1, "{}", r.elv().debug_state());
    r.drain(us(10));
    r.finish();
}

/// `bfq_serv_to_charge` asks `bfq_asymmetric_scenario(bfqd, bfqq)` of the queue itself:
/// weights that differ do not make the scenario asymmetric for the queue of the smallest
/// weight, so an asynchronous be/7 writer beside a be/4 reader is charged three times its
/// sectors (`bfq_async_charge_factor`), not once.
#[test]
fn bfq_charges_the_lightest_async_queue_three_times_its_sectors() {
    let mut r = Rig::simple(BFQ, 2);
    r.set("low_latency", "0");
    r.set("slice_idle", "0");
    let be = |level| IoPrio::new(IoPrioClass::Be, level);
    r.queue(0, read(0, 8, 1).with_issuer(2, 0).with_ioprio(be(4)));
    r.queue(0, write(1 << 20, 8, 2).with_issuer(1, 0).with_ioprio(be(7)));
    let state = r.elv().debug_state();
    assert!(state.contains("service 24 "), "{state}");
    r.drain(us(10));
    r.finish();
}

/// `bfq_better_to_idle` and `idling_needed_for_service_guarantees` return false at once
/// for a queue no process uses any more (`bfqq_process_refs`): after the heavy reader's
/// issuer is redirected to the light reader's queue, its old queue still holds a request;
/// served, it runs dry and is expired at once, where waiting for it (the weights differ)
/// would hold the device idle for nothing.
#[test]
fn bfq_does_not_idle_for_a_queue_no_process_uses_any_more() {
    let mut r = merging_rig();
    interleave(&mut r);
    assert_eq!(
        r.bfq().counters.queue_merges,
        1,
        "{}",
        r.elv().debug_state()
    );
    assert_eq!(r.complete_next(1), 1);
    assert_eq!(r.complete_next(1), 1);
    let c = r.bfq().counters;
    assert_eq!(
        (c.idles, c.expired_empty),
        (0, 1),
        "{}",
        r.elv().debug_state()
    );
    r.drain(us(10));
    r.finish();
}

/// `bfq_update_io_seektime` compares each inserted request with where the queue's last
/// inserted request ended (`last_request_pos`, set in `bfq_rq_enqueued`); a bio merged at
/// the back of a queued request does not move it. A writer whose 4 KiB requests each grow
/// by a 500 KiB back merge before the next arrives, 4 KiB past the grown end, is seeky.
#[test]
fn bfq_seek_history_ignores_back_merges() {
    let mut r = Rig::simple(BFQ, 1);
    r.set("low_latency", "0");
    r.set("queue_merging", "0");
    // Holds the one slot, so the requests below stay queued and can grow.
    r.queue(0, read(1 << 30, 8, 1).with_issuer(2, 0));
    let mut at = 0u64;
    for i in 0..32u64 {
        r.queue(0, sync_write(at, 8, 10 + 2 * i).with_issuer(1, 0));
        let grown = r.submit(0, sync_write(at + 8, 1000, 11 + 2 * i).with_issuer(1, 0));
        assert!(matches!(grown, Submit::Merged), "{grown:?}");
        at += 1016;
    }
    let state = r.elv().debug_state();
    let line = state.lines().find(|l| l.contains("Sync(1)")).expect(&state);
    assert!(line.contains("issuers [1]"), "{state}");
    assert!(line.contains("seeky true"), "{state}");
    r.drain(us(10));
    r.finish();
}

/// `bfq_choose_bfqq_for_injection` scans every active queue (`active_list`), whatever its
/// group: two readers in two cgroups of equal weight, one read at a time each. Groups with
/// pending I/O make the scenario asymmetric, so BFQ idles for the reader in service, and
/// the other group's reads go out in those gaps once the injection limit is up. Looking
/// only in the in-service queue's group, nothing is ever injected.
#[test]
fn bfq_injects_from_another_cgroup() {
    let blkcg = std::sync::Arc::new(mqblk_core::Blkcg::new());
    let a = blkcg.set_weight("/a", 100).unwrap();
    let b = blkcg.set_weight("/b", 100).unwrap();
    let mut r = Rig::new(RigCfg {
        blkcg,
        ..RigCfg::new(BFQ, 4)
    });
    r.set("low_latency", "0");
    let mut next = [1u64, 1];
    let reader = |k: usize, n: u64| {
        let (issuer, group) = [(1, a), (2, b)][k];
        read(
            (k as u64) << 30 | (n * 4096 % (1 << 29)),
            8,
            (k as u64) << 32 | n,
        )
        .with_issuer(issuer, group)
    };
    for k in 0..2 {
        r.queue(0, reader(k, 0));
    }
    r.drv.auto_complete(r.now, us(100));
    let mut seen = 0;
    while r.now < ms(500) {
        let Some(t) = r.next_event() else { break };
        r.advance_to(t);
        // Each reader sends its next read 50 us after its last one completes.
        let done: Vec<u64> = r.done[seen..].iter().map(|b| b.private >> 32).collect();
        seen = r.done.len();
        if !done.is_empty() {
            r.advance_to(r.now.saturating_add(us(50)));
            for k in done {
                let k = k as usize;
                r.queue(0, reader(k, next[k]));
                next[k] += 1;
            }
        }
    }
    let c = r.bfq().counters;
    assert!(c.injected > 100, "{c:?}\n{}", r.elv().debug_state());
    r.drain(us(10));
    r.finish();
}

/// `bfq_updated_next_req`: when a larger request becomes the next one of a queue that waits
/// for its turn, the queue's budget grows to what that request asks for (past its
/// `max_budget`), and its finish time with it (`bfq_requeue_bfqq`), so a queue that would
/// have finished after it now finishes first. Issuers 2 and 3 each had a turn of one read
/// (which left their queues' `max_budget` at `bfq_min_budget`, 512 sectors), then wait
/// behind issuer 1's read with one read each; issuer 3, whose queue is due first, goes
/// first, unless a 1024-sector read becomes its next one.
#[test]
fn bfq_a_waiting_queue_whose_next_request_asks_more_finishes_later() {
    let first_after = |big: bool| -> u64 {
        let mut r = Rig::simple(BFQ, 1);
        r.set("low_latency", "0");
        r.set("slice_idle", "0");
        r.set("queue_merging", "0");
        r.set("stable_merging", "0");
        for (i, issuer) in [2u32, 3].into_iter().enumerate() {
            r.queue(
                0,
                read(3_000_000 + i as u64 * 8, 8, 10 + i as u64).with_issuer(issuer, 0),
            );
            r.drain(us(10));
        }
        // From here the device holds what it gets until the test lets it complete.
        r.drv.set_all_latencies(None);
        r.queue(0, read(0, 8, 1).with_issuer(1, 0));
        r.queue(0, read(1_000_000, 8, 2).with_issuer(2, 0));
        r.queue(0, read(2_000_000, 8, 3).with_issuer(3, 0));
        assert_eq!(queue_field(&r, 3, "budget"), "512/512");
        if big {
            // Nearer the device's last position than issuer 3's queued read: its next one.
            r.queue(0, read(500_000, 1024, 4).with_issuer(3, 0));
            assert_eq!(queue_field(&r, 3, "budget"), "1024/512");
        }
        let before = r.drv.nr_issues();
        assert_eq!(r.complete_next(1), 1);
        r.advance_to(Nanos(r.now.0 + 100_000));
        let first = r.drv.issues_from(before)[0].privates[0];
        r.drain(us(10));
        r.finish();
        first
    };
    assert_eq!(first_after(false), 3);
    assert_eq!(
        first_after(true),
        2,
        "issuer 3's grown budget puts it after issuer 2"
    );
}
