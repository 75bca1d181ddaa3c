//! Hardware queue runs and dispatch: busy answers from the driver, errors, stopped and busy
//! queues, requeue, timeouts, queue maps and tag lookup.

mod common;

use common::{bio4k, simple_queue, submit_ok, submitters, take_done, Mode, Reply, TestDriver};
use mqblk_core::queue::{DEFAULT_TIMEOUT, RESOURCE_DELAY};
use mqblk_core::tag::MapQueues;
use mqblk_core::{
    BlkStatus, CtxIdx, HctxIdx, HctxType, Nanos, QueueConfig, QueueMap, ReqFlags, ReqOp,
    RequestQueue, RqId, TagSet, TagSetConfig, TagSetFlags,
};

const T0: Nanos = Nanos::from_millis(10);

fn at(t: Nanos, plus: Nanos) -> Nanos {
    t.saturating_add(plus)
}

#[test]
fn resource_parks_the_request_and_it_is_reissued_after_the_delay() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    let h = q.hctx(HctxIdx(0));
    d.script(&[Reply::Resource, Reply::Resource]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 3, 77), T0);
    assert_eq!(d.nr_issues(), 1);
    assert!(sub.done.is_empty());
    assert_eq!(
        h.dispatch_list_len(),
        1,
        "the refused request waits on the dispatch list"
    );
    assert!(h.is_busy());
    // Nobody will restart the queue, so a re-run is armed at once (the kernel's async run).
    assert_eq!(h.run_armed_at(), Some(T0));
    assert_eq!(q.next_deadline(), Some(T0));

    q.poll(&mut sub, T0);
    assert_eq!(d.nr_issues(), 2, "the immediate re-run tried again");
    assert_eq!(h.dispatch_list_len(), 1);
    // Now RESTART is set; the driver is out of a resource nobody signals: retry after 3 ms.
    let retry = at(T0, RESOURCE_DELAY);
    assert_eq!(h.run_armed_at(), Some(retry));
    q.poll(&mut sub, Nanos(retry.0 - 1));
    q.timer(&mut sub, Nanos(retry.0 - 1));
    assert_eq!(d.nr_issues(), 2, "not before the delay");

    q.poll(&mut sub, retry);
    assert_eq!(d.nr_issues(), 3);
    assert_eq!(d.issues()[2].reply, Reply::Ok);
    assert_eq!(h.dispatch_list_len(), 0);
    assert_eq!(take_done(&mut sub), vec![(77, BlkStatus::Ok)]);
    for k in 1..5 {
        q.poll(&mut sub, at(retry, Nanos::from_millis(10 * k)));
    }
    assert!(sub.done.is_empty(), "completed exactly once");
    assert_eq!(d.nr_issues(), 3);
    assert_eq!(d.outcomes(77), vec![BlkStatus::Ok]);
    common::assert_whole(&q);
}

#[test]
fn dev_resource_waits_for_a_completion() {
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    let h = q.hctx(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 1, 1), T0);
    d.script(&[Reply::DevResource, Reply::DevResource]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 3, 2), T0);
    q.poll(&mut sub, T0);
    assert_eq!(d.nr_issues(), 3);
    assert_eq!(h.dispatch_list_len(), 1);
    assert_eq!(
        h.run_armed_at(),
        None,
        "DEV_RESOURCE: the driver's completion re-runs the queue, no timer"
    );
    q.poll(&mut sub, at(T0, Nanos::from_secs(1)));
    assert_eq!(d.nr_issues(), 3, "no retry without a completion");

    d.release(1);
    q.poll(&mut sub, at(T0, Nanos::from_secs(1)));
    assert_eq!(take_done(&mut sub), vec![(1, BlkStatus::Ok)]);
    assert_eq!(d.nr_issues(), 4, "the completion restarted the queue");
    assert_eq!(h.dispatch_list_len(), 0);
    d.release_all();
    q.poll(&mut sub, at(T0, Nanos::from_secs(1)));
    assert_eq!(take_done(&mut sub), vec![(2, BlkStatus::Ok)]);
    common::assert_whole(&q);
}

#[test]
fn driver_errors_end_the_bio_with_that_status() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    let errors = [
        BlkStatus::IoErr,
        BlkStatus::NotSupp,
        BlkStatus::Protection,
        BlkStatus::NoSpc,
        BlkStatus::Offline,
    ];
    for (i, &st) in errors.iter().enumerate() {
        d.script(&[Reply::Fail(st)]);
        submit_ok(
            &q,
            &mut sub,
            bio4k(ReqOp::Write, 2 * i as u64, i as u64),
            T0,
        );
        assert_eq!(take_done(&mut sub), vec![(i as u64, st)], "{st:?}");
    }
    assert_eq!(d.nr_issues(), errors.len(), "errors are not retried");
    assert_eq!(q.hctx(HctxIdx(0)).dispatch_list_len(), 0);
    common::assert_whole(&q);
}

#[test]
fn stopped_hctx_issues_nothing_until_started() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 16, 1);
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    assert!(q.hctx(HctxIdx(0)).is_stopped());
    for i in 0..6 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 2 * i, i), T0);
    }
    sub.plug.start();
    for i in 6..9 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 2 * i, i), T0);
    }
    q.finish_plug(&mut sub, T0);
    for s in [0, 1, 30, 100] {
        q.poll(&mut sub, at(T0, Nanos::from_secs(s)));
        q.timer(&mut sub, at(T0, Nanos::from_secs(s)));
    }
    q.run_hw_queues(Some(CtxIdx(0)), T0, &mut mqblk_core::CompletionBatch::new());
    assert_eq!(d.nr_issues(), 0, "a stopped queue issues nothing");
    assert!(q.hctx_has_pending(HctxIdx(0)));
    assert_eq!(
        q.ctx(CtxIdx(0)).lists.lock()[HctxType::Default as usize].len(),
        9
    );

    q.start_hw_queue(&mut sub, HctxIdx(0), at(T0, Nanos::from_secs(100)));
    let order: Vec<u64> = d.issues().iter().map(|x| x.privates[0]).collect();
    assert_eq!(
        order,
        (0..9).collect::<Vec<_>>(),
        "issued in submission order once started"
    );
    assert_eq!(take_done(&mut sub).len(), 9);
    assert!(!q.hctx_has_pending(HctxIdx(0)));
    common::assert_whole(&q);
}

#[test]
fn busy_hctx_queues_in_the_software_queue_and_dispatches_in_order() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 16, 1);
    let mut sub = q.submitter(CtxIdx(0));
    let h = q.hctx(HctxIdx(0));
    d.script(&[Reply::Resource; 4]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 0), T0);
    assert!(h.is_busy());
    for i in 1..4 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 2 * i, i), T0);
    }
    // Each submission ran the queue; the left-over went first and was refused, so the new
    // requests stayed behind it in the software queue.
    assert_eq!(d.nr_issues(), 4);
    assert!(d.issues().iter().all(|x| x.privates == vec![0]));
    assert_eq!(h.dispatch_list_len(), 1);
    let queued: Vec<RqId> = q.ctx(CtxIdx(0)).lists.lock()[0].iter().copied().collect();
    assert_eq!(queued.len(), 3);
    assert!(sub.done.is_empty());

    q.poll(&mut sub, at(T0, RESOURCE_DELAY));
    let order: Vec<u64> = d.issues()[4..].iter().map(|x| x.privates[0]).collect();
    assert_eq!(
        order,
        vec![0, 1, 2, 3],
        "the left-over first, then the software queue in order"
    );
    let ids: Vec<RqId> = d.issues()[5..].iter().map(|x| x.id).collect();
    assert_eq!(ids, queued);
    assert_eq!(take_done(&mut sub).len(), 4);
    common::assert_whole(&q);
}

#[test]
fn busy_dispatch_is_round_robin_over_software_queues() {
    // Two submitters on one hctx. While the hctx is busy it takes one request at a time,
    // alternating between software queues rather than draining one first.
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 32, 2);
    let mut subs = submitters(&q);
    d.script(&[Reply::Resource; 7]);
    submit_ok(&q, &mut subs[0], bio4k(ReqOp::Write, 1000, 1000), T0);
    for i in 0..3 {
        submit_ok(&q, &mut subs[0], bio4k(ReqOp::Write, 2 * i, i), T0);
        submit_ok(
            &q,
            &mut subs[1],
            bio4k(ReqOp::Write, 100 + 2 * i, 10 + i),
            T0,
        );
    }
    assert_eq!(d.script_len(), 0);
    let before = d.nr_issues();
    q.poll(&mut subs[0], at(T0, RESOURCE_DELAY));
    let order: Vec<u64> = d.issues()[before..].iter().map(|x| x.privates[0]).collect();
    assert_eq!(order, vec![1000, 0, 10, 1, 11, 2, 12]);
    q.poll(&mut subs[1], at(T0, RESOURCE_DELAY));
    assert_eq!(subs[0].done.len(), 4);
    assert_eq!(subs[1].done.len(), 3);
    common::assert_whole(&q);
}

#[test]
fn requeued_requests_are_issued_again_and_complete_once() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    d.script(&[Reply::Requeue, Reply::Requeue]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 5, 5), T0);
    assert!(sub.done.is_empty());
    assert_eq!(
        q.next_deadline(),
        Some(T0),
        "the requeue work is due at once"
    );
    q.poll(&mut sub, T0);
    q.poll(&mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(5, BlkStatus::Ok)]);
    let is = d.issues();
    assert_eq!(is.len(), 3);
    assert!(
        is.iter().all(|x| x.id == is[0].id && x.tag == is[0].tag),
        "the request keeps its tag"
    );
    assert_eq!(q.hctx(HctxIdx(0)).stats.total().requeued, 2);
    q.poll(&mut sub, at(T0, Nanos::from_secs(60)));
    assert!(sub.done.is_empty());
    common::assert_whole(&q);
}

#[test]
fn requeue_goes_ahead_of_queued_requests() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    d.script(&[Reply::Requeue]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 1, 1), T0);
    q.stop_hw_queue(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 3, 2), T0);
    q.timer(&mut sub, T0);
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    let order: Vec<u64> = d.issues().iter().map(|x| x.privates[0]).collect();
    assert_eq!(order, vec![1, 1, 2]);
    assert_eq!(take_done(&mut sub).len(), 2);
    common::assert_whole(&q);
}

#[test]
fn timeouts_end_lost_requests_and_reset_live_ones() {
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    d.script(&[Reply::Timeout]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 0), T0);
    submit_ok(
        &q,
        &mut sub,
        bio4k(ReqOp::Write, 2, 1),
        at(T0, Nanos::from_secs(1)),
    );
    let deadline = at(T0, DEFAULT_TIMEOUT);
    assert_eq!(q.next_deadline(), Some(deadline));
    q.poll(&mut sub, Nanos(deadline.0 - 1));
    assert!(sub.done.is_empty());
    q.poll(&mut sub, deadline);
    assert_eq!(take_done(&mut sub), vec![(0, BlkStatus::Timeout)]);
    assert_eq!(d.timeouts(), 1);
    // The held request's deadline comes a second later; the driver resets its timer.
    let second = at(deadline, Nanos::from_secs(1));
    assert_eq!(q.next_deadline(), Some(second));
    q.poll(&mut sub, second);
    assert!(sub.done.is_empty());
    assert_eq!(d.timeouts(), 1);
    assert_eq!(
        q.next_deadline(),
        Some(at(second, DEFAULT_TIMEOUT)),
        "re-armed for another full timeout"
    );
    d.release_all();
    q.poll(&mut sub, second);
    assert_eq!(take_done(&mut sub), vec![(1, BlkStatus::Ok)]);
    assert_eq!(d.outcomes(0), vec![BlkStatus::Timeout]);
    assert_eq!(d.outcomes(1), vec![BlkStatus::Ok]);
    // Nothing in flight: the timer stops.
    q.poll(&mut sub, at(second, DEFAULT_TIMEOUT));
    assert_eq!(q.next_deadline(), None);
    common::assert_whole(&q);
}

#[test]
fn queue_map_default_spread() {
    let spread = |nr_ctx: u16, maps: MapQueues, ty: HctxType| -> Vec<u16> {
        let m = QueueMap::new(nr_ctx, maps);
        assert_eq!(m.nr_ctx(), nr_ctx as usize);
        (0..nr_ctx).map(|c| m.hctx(ty, CtxIdx(c)).0).collect()
    };
    let only = |n| MapQueues {
        default: n,
        read: 0,
        poll: 0,
    };
    assert_eq!(spread(4, only(2), HctxType::Default), vec![0, 0, 1, 1]);
    assert_eq!(spread(4, only(4), HctxType::Default), vec![0, 1, 2, 3]);
    assert_eq!(
        spread(7, only(3), HctxType::Default),
        vec![0, 0, 0, 1, 1, 2, 2]
    );
    assert_eq!(spread(8, only(1), HctxType::Default), vec![0; 8]);
    assert_eq!(
        spread(2, only(4), HctxType::Default),
        vec![0, 1],
        "more hctxs than ctxs: the rest idle"
    );
    // Without READ or POLL queues those types use the default map.
    assert_eq!(spread(4, only(2), HctxType::Read), vec![0, 0, 1, 1]);
    assert_eq!(spread(4, only(2), HctxType::Poll), vec![0, 0, 1, 1]);
    let rw = MapQueues {
        default: 2,
        read: 2,
        poll: 1,
    };
    assert_eq!(spread(4, rw, HctxType::Default), vec![0, 0, 1, 1]);
    assert_eq!(spread(4, rw, HctxType::Read), vec![2, 2, 3, 3]);
    assert_eq!(spread(4, rw, HctxType::Poll), vec![4, 4, 4, 4]);
    assert_eq!(HctxType::of(ReqOp::Read, ReqFlags::empty()), HctxType::Read);
    assert_eq!(
        HctxType::of(ReqOp::Write, ReqFlags::empty()),
        HctxType::Default
    );
    assert_eq!(HctxType::of(ReqOp::Read, ReqFlags::POLLED), HctxType::Poll);
}

#[test]
fn requests_go_to_the_mapped_hardware_queue() {
    let mut cfg = TagSetConfig::new(2, 16);
    cfg.maps = MapQueues {
        default: 2,
        read: 2,
        poll: 0,
    };
    let d = TestDriver::new(Mode::Hold);
    let q = RequestQueue::new(
        TagSet::new(cfg).unwrap(),
        d.clone(),
        None,
        QueueConfig {
            nr_ctx: 4,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(q.nr_hw_queues(), 4);
    let mut subs = submitters(&q);
    for (c, sub) in subs.iter_mut().enumerate() {
        let c = c as u64;
        submit_ok(&q, sub, bio4k(ReqOp::Write, 10 * c, c), T0);
        submit_ok(&q, sub, bio4k(ReqOp::Read, 10 * c + 2, 100 + c), T0);
        submit_ok(&q, sub, bio4k(ReqOp::Discard, 10 * c + 4, 200 + c), T0);
    }
    for x in d.issues() {
        let c = x.privates[0] % 100;
        let want = match x.op {
            ReqOp::Read => 2 + c / 2,
            _ => c / 2,
        };
        assert_eq!(x.hctx, HctxIdx(want as u16), "{x:?}");
        assert_eq!(
            q.map_queue(CtxIdx(c as u16), HctxType::of(x.op, ReqFlags::empty())),
            x.hctx
        );
    }
    assert_eq!(subs[3].hctxs(), &[HctxIdx(1), HctxIdx(3)]);
    // Each hctx allocates from its own tag map.
    for h in 0..4 {
        let busy = q.tag_set().tags[h].busy();
        assert_eq!(busy, if h < 2 { 4 } else { 2 }, "hctx {h}");
    }
    d.release_all();
    for sub in subs.iter_mut() {
        q.poll(sub, T0);
        assert_eq!(sub.done.len(), 3);
    }
    common::assert_whole(&q);
}

#[test]
fn completions_are_routed_to_the_submitting_software_queue() {
    // Two submitters share one hctx; whoever reaps the hctx, each bio lands with its owner.
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 16, 2);
    let mut subs = submitters(&q);
    submit_ok(&q, &mut subs[0], bio4k(ReqOp::Read, 0, 0), T0);
    submit_ok(&q, &mut subs[1], bio4k(ReqOp::Read, 2, 1), T0);
    d.release_all();
    q.poll(&mut subs[0], T0);
    assert_eq!(take_done(&mut subs[0]), vec![(0, BlkStatus::Ok)]);
    assert!(q
        .ctx(CtxIdx(1))
        .remote_pending
        .load(std::sync::atomic::Ordering::Acquire));
    q.poll(&mut subs[1], T0);
    assert_eq!(take_done(&mut subs[1]), vec![(1, BlkStatus::Ok)]);
    common::assert_whole(&q);
}

#[test]
fn tag_to_rq_maps_driver_tags_to_requests() {
    for shared in [false, true] {
        let mut cfg = TagSetConfig::new(2, 8);
        if shared {
            cfg.flags = TagSetFlags::TAG_HCTX_SHARED;
        }
        let d = TestDriver::new(Mode::Hold);
        let q = RequestQueue::new(
            TagSet::new(cfg).unwrap(),
            d.clone(),
            None,
            QueueConfig {
                nr_ctx: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let mut subs = submitters(&q);
        for i in 0..6u64 {
            let c = (i % 2) as usize;
            submit_ok(&q, &mut subs[c], bio4k(ReqOp::Write, 2 * i, i), T0);
        }
        let is = d.issues();
        assert_eq!(is.len(), 6);
        let mut tags: Vec<(usize, u16)> = Vec::new();
        for x in &is {
            assert!(!x.tag.is_none());
            assert_eq!(
                q.tag_to_rq(x.hctx, x.tag),
                Some(x.id),
                "shared {shared}: {x:?}"
            );
            assert_eq!(q.requests().lock(x.id).tag, x.tag);
            tags.push((if shared { 0 } else { x.hctx.0 as usize }, x.tag.0));
        }
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(
            tags.len(),
            6,
            "shared {shared}: a driver tag is held by one request per map"
        );
        d.release_all();
        for sub in subs.iter_mut() {
            q.poll(sub, T0);
        }
        for x in &is {
            assert_eq!(
                q.tag_to_rq(x.hctx, x.tag),
                None,
                "a freed tag maps to nothing"
            );
        }
        assert_eq!(
            q.tag_to_rq(HctxIdx(0), mqblk_core::Tag(100)),
            None,
            "beyond the depth"
        );
        common::assert_whole(&q);
    }
}

#[test]
fn busy_when_tags_run_out() {
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 4, 1);
    let mut sub = q.submitter(CtxIdx(0));
    for i in 0..4 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2 * i, i), T0);
    }
    let bio = match q.submit_bio(&mut sub, bio4k(ReqOp::Read, 100, 4), T0) {
        mqblk_core::Submit::Busy(b) => *b,
        other => panic!("expected Busy, got {other:?}"),
    };
    assert_eq!(bio.private, 4, "the bio comes back untouched");
    d.release(1);
    q.poll(&mut sub, T0);
    submit_ok(&q, &mut sub, bio, T0);
    d.release_all();
    q.poll(&mut sub, T0);
    let mut done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
    done.sort_unstable();
    assert_eq!(done, vec![0, 1, 2, 3, 4]);
    common::assert_whole(&q);
}

#[test]
fn teardown_refuses_a_busy_queue() {
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 4, 1);
    let mut sub = q.submitter(CtxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 0), T0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q.teardown()));
    assert!(r.is_err(), "teardown with a request in flight must panic");
    d.release_all();
    q.poll(&mut sub, T0);
    common::assert_whole(&q);
}

/// A batch the driver requeued comes back ahead of what was queued after it, the last one
/// requeued first: 6.18's `blk_mq_requeue_work` takes the requeue list from its head and
/// inserts each request at the software queue's head.
#[test]
fn requeued_batch_goes_back_reversed_ahead_of_queued_requests() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..3 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2 * i, i), T0);
    }
    d.script(&[Reply::Requeue, Reply::Requeue, Reply::Requeue]);
    q.finish_plug(&mut sub, T0);
    q.stop_hw_queue(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 100, 3), T0);
    q.timer(&mut sub, T0);
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    let order: Vec<u64> = d.issues().iter().map(|x| x.privates[0]).collect();
    assert_eq!(
        order,
        vec![0, 1, 2, 2, 1, 0, 3],
        "requeued requests go back at the head, the last requeued first"
    );
    assert_eq!(take_done(&mut sub).len(), 4);
    common::assert_whole(&q);
}

#[test]
fn busy_hctx_takes_new_requests_through_the_software_queue() {
    // While the dispatch-busy average is non-zero a new request is inserted and the queue
    // run, rather than issued directly; once it decays, direct issue resumes.
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    let h = q.hctx(HctxIdx(0));
    d.script(&[Reply::Resource]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 0), T0);
    q.poll(&mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(0, BlkStatus::Ok)]);
    assert!(h.is_busy());
    assert_eq!(h.stats.total().direct, 0);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2, 1), T0);
    assert_eq!(
        take_done(&mut sub),
        vec![(1, BlkStatus::Ok)],
        "issued at once all the same"
    );
    assert_eq!(h.stats.total().direct, 0, "not a direct issue while busy");
    assert!(!h.is_busy());
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 4, 2), T0);
    assert_eq!(take_done(&mut sub), vec![(2, BlkStatus::Ok)]);
    assert_eq!(h.stats.total().direct, 1);
    common::assert_whole(&q);
}

/// The kernel issues a new request two ways. From a plug (`blk_mq_plug_issue_direct`, how a
/// file system submits direct I/O) it goes straight to the driver unless the queue is
/// stopped, even past requests the driver turned away that wait on the dispatch list; without
/// a plug (`blk_mq_submit_bio`) a queue that has been busy takes it through the software
/// queue and runs, so it goes after them.
#[test]
fn a_plugged_request_passes_the_dispatch_list_and_an_unplugged_one_queues_behind_it() {
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 8, 1);
    let mut sub = q.submitter(CtxIdx(0));
    let h = q.hctx(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 0), T0);
    d.script(&[Reply::DevResource]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2, 1), T0);
    assert_eq!(h.dispatch_list_len(), 1, "bio 1 waits for a completion");
    assert!(h.is_busy());
    let direct = h.stats.total().direct;

    sub.plug.start();
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 4, 2), T0);
    q.finish_plug(&mut sub, T0);
    assert_eq!(
        h.stats.total().direct,
        direct + 1,
        "the plugged request went direct"
    );
    assert_eq!(h.dispatch_list_len(), 1, "bio 1 still waits");
    let order: Vec<u64> = d.accepted().iter().map(|i| i.privates[0]).collect();
    assert_eq!(order, vec![0, 2], "bio 2 passed bio 1");

    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 6, 3), T0);
    assert_eq!(
        h.stats.total().direct,
        direct + 1,
        "unplugged on a busy queue: not direct"
    );
    let order: Vec<u64> = d.accepted().iter().map(|i| i.privates[0]).collect();
    assert_eq!(order, vec![0, 2, 1, 3], "the run issued bio 1 before bio 3");
    d.release_all();
    q.poll(&mut sub, T0);
    let mut done: Vec<u64> = take_done(&mut sub).into_iter().map(|(p, _)| p).collect();
    done.sort();
    assert_eq!(done, vec![0, 1, 2, 3]);
    common::assert_whole(&q);
}
