//! Plugging: when a plug is flushed, and how the batch reaches the driver (`last`,
//! `commit_rqs`).

mod common;

use common::{bio4k, simple_queue, submit_ok, take_done, Mode, Reply, TestDriver};
use mqblk_core::plug::{MAX_REQUEST_COUNT, PLUG_FLUSH_SIZE};
use mqblk_core::queue::RESOURCE_DELAY;
use mqblk_core::tag::MapQueues;
use mqblk_core::{
    Bio, BlkStatus, CtxIdx, HctxIdx, Nanos, QueueConfig, ReqOp, RequestQueue, Submit, TagSet,
    TagSetConfig, SECTOR_SIZE,
};

const NOW: Nanos = Nanos(1_000);

/// Non-contiguous 4 KiB blocks: every other one, so no two plugged bios merge.
fn scattered(i: u64) -> u64 {
    2 * i + 1
}

#[test]
fn flushes_at_max_request_count() {
    assert_eq!(MAX_REQUEST_COUNT, 32);
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 128, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..31 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, scattered(i), i), NOW);
        assert_eq!(d.nr_issues(), 0, "flushed after {} requests", i + 1);
        assert_eq!(sub.plug.len(), i as usize + 1);
    }
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, scattered(31), 31), NOW);
    let is = d.issues();
    assert_eq!(is.len(), 32, "the 32nd request flushes the plug");
    assert!(
        sub.plug.is_empty() && sub.plug.is_started(),
        "a threshold flush keeps the plug started"
    );
    for (i, x) in is.iter().enumerate() {
        assert_eq!(x.sector, scattered(i as u64) * 8, "submission order");
        assert_eq!(
            x.last,
            i == 31,
            "last only on the final request of the batch"
        );
    }
    assert_eq!(
        d.commits(),
        0,
        "a batch that ends with last=true needs no commit_rqs"
    );
    assert_eq!(take_done(&mut sub).len(), 32);

    // The rest waits for finish_plug.
    for i in 32..37 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, scattered(i), i), NOW);
    }
    assert_eq!(d.nr_issues(), 32);
    q.finish_plug(&mut sub, NOW);
    assert!(!sub.plug.is_started());
    let is = d.issues();
    assert_eq!(is.len(), 37);
    let lasts: Vec<bool> = is[32..].iter().map(|x| x.last).collect();
    assert_eq!(lasts, vec![false, false, false, false, true]);
    assert_eq!(take_done(&mut sub).len(), 5);

    // Without a plug every request goes alone, with last set.
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 999, 99), NOW);
    let is = d.issues();
    assert_eq!(is.len(), 38);
    assert!(is[37].last);
    common::assert_whole(&q);
}

#[test]
fn merged_bios_do_not_count_towards_the_limit() {
    // 32 requests' worth of bios that all merge into one: no threshold flush.
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 128, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..40 {
        submit_ok(
            &q,
            &mut sub,
            Bio::new(ReqOp::Write, i * 2, 2).with_private(i),
            NOW,
        );
    }
    assert_eq!(sub.plug.len(), 1);
    assert_eq!(d.nr_issues(), 0);
    q.finish_plug(&mut sub, NOW);
    assert_eq!(d.issues()[0].nr_bios, 40);
    assert_eq!(take_done(&mut sub).len(), 40);
    common::assert_whole(&q);
}

#[test]
fn a_big_request_flushes_at_once() {
    assert_eq!(PLUG_FLUSH_SIZE, 128 * 1024);
    let big = (PLUG_FLUSH_SIZE / SECTOR_SIZE) as u32;
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..3 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, scattered(i), i), NOW);
    }
    // Just under the size: stays plugged.
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Read, 10_000, big - 1).with_private(3),
        NOW,
    );
    assert_eq!(d.nr_issues(), 0);
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Read, 20_000, big).with_private(4),
        NOW,
    );
    let is = d.issues();
    assert_eq!(
        is.len(),
        5,
        "a request of BLK_PLUG_FLUSH_SIZE flushes the plug"
    );
    assert_eq!(
        (is[4].sector, is[4].nr_sectors, is[4].last),
        (20_000, big, true)
    );
    assert!(is[..4].iter().all(|x| !x.last));
    assert_eq!(take_done(&mut sub).len(), 5);
    q.finish_plug(&mut sub, NOW);
    assert_eq!(d.nr_issues(), 5, "nothing left to flush");
    common::assert_whole(&q);
}

#[test]
fn finish_plug_flushes_everything_in_order() {
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..10 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, scattered(i), i), NOW);
    }
    assert_eq!(d.nr_issues(), 0);
    assert_eq!(q.nr_allocated(), 10, "plugged requests hold their tags");
    q.flush_plug(&mut sub, NOW);
    assert!(sub.plug.is_started(), "flush_plug keeps the plug");
    assert_eq!(d.nr_issues(), 10);
    assert_eq!(d.nr_held(), 10);
    assert_eq!(
        d.issues().iter().map(|x| x.privates[0]).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    q.finish_plug(&mut sub, NOW);
    assert_eq!(d.nr_issues(), 10, "an empty plug flushes nothing");
    d.release_all();
    q.poll(&mut sub, NOW);
    assert_eq!(take_done(&mut sub).len(), 10);
    common::assert_whole(&q);
}

#[test]
fn plug_across_hardware_queues_flushes_at_twice_the_count() {
    // Reads go to hctx 1 (READ map), writes to hctx 0: a plug spanning both holds 64.
    let mut cfg = TagSetConfig::new(1, 128);
    cfg.maps = MapQueues {
        default: 1,
        read: 1,
        poll: 0,
    };
    let d = TestDriver::new(Mode::Inline);
    let q = RequestQueue::new(
        TagSet::new(cfg).unwrap(),
        d.clone(),
        None,
        QueueConfig::default(),
    )
    .unwrap();
    let mut sub = q.submitter(CtxIdx(0));
    assert_eq!(sub.hctxs(), &[HctxIdx(0), HctxIdx(1)]);
    sub.plug.start();
    for i in 0..63 {
        let op = if i % 2 == 0 {
            ReqOp::Write
        } else {
            ReqOp::Read
        };
        submit_ok(&q, &mut sub, bio4k(op, scattered(i), i), NOW);
    }
    assert_eq!(d.nr_issues(), 0, "a plug over two hctxs holds up to 64");
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, scattered(63), 63), NOW);
    let is = d.issues();
    assert_eq!(is.len(), 64);
    // Each run of one hctx is a batch of its own: every request ends a batch here.
    assert!(is.iter().all(|x| x.last));
    for x in &is {
        let want = if x.op == ReqOp::Read {
            HctxIdx(1)
        } else {
            HctxIdx(0)
        };
        assert_eq!(x.hctx, want);
    }
    assert_eq!(take_done(&mut sub).len(), 64);
    q.finish_plug(&mut sub, NOW);
    common::assert_whole(&q);
}

#[test]
fn resource_mid_batch_commits_and_parks_the_rest() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..10 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, scattered(i), i), NOW);
    }
    d.script(&[Reply::Ok, Reply::Ok, Reply::Ok, Reply::Resource]);
    q.finish_plug(&mut sub, NOW);
    let is = d.issues();
    assert_eq!(is.len(), 4, "dispatch stops at the first Resource");
    assert!(
        is.iter().all(|x| !x.last),
        "none of these was the last of the batch"
    );
    assert_eq!(
        d.commits(),
        1,
        "the doorbell is rung for the 3 queued with last=false"
    );
    assert_eq!(take_done(&mut sub).len(), 3);
    assert_eq!(
        q.hctx(HctxIdx(0)).dispatch_list_len(),
        7,
        "the refused request and the rest are parked"
    );

    // The parked requests go again, in order, as one batch.
    q.poll(&mut sub, NOW.saturating_add(RESOURCE_DELAY));
    let is = d.issues();
    assert_eq!(is.len(), 11);
    let again: Vec<u64> = is[4..].iter().map(|x| x.privates[0]).collect();
    assert_eq!(again, vec![3, 4, 5, 6, 7, 8, 9]);
    let lasts: Vec<bool> = is[4..].iter().map(|x| x.last).collect();
    assert_eq!(lasts, vec![false, false, false, false, false, false, true]);
    assert_eq!(d.commits(), 1);
    let mut done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
    done.sort_unstable();
    assert_eq!(done, (3..10).collect::<Vec<_>>());
    common::assert_whole(&q);
}

#[test]
fn resource_on_the_first_request_needs_no_commit() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..4 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, scattered(i), i), NOW);
    }
    d.script(&[Reply::Resource]);
    q.finish_plug(&mut sub, NOW);
    assert_eq!(d.nr_issues(), 1);
    assert_eq!(
        d.commits(),
        0,
        "nothing was queued, so there is no doorbell to ring"
    );
    q.poll(&mut sub, NOW.saturating_add(RESOURCE_DELAY));
    assert_eq!(take_done(&mut sub).len(), 4);
    common::assert_whole(&q);
}

#[test]
fn errors_mid_batch_end_the_request_and_commit() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for i in 0..5 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, scattered(i), i), NOW);
    }
    d.script(&[
        Reply::Ok,
        Reply::Fail(BlkStatus::IoErr),
        Reply::Ok,
        Reply::Fail(BlkStatus::NoSpc),
    ]);
    q.finish_plug(&mut sub, NOW);
    assert_eq!(d.nr_issues(), 5, "an error does not stop the batch");
    assert_eq!(d.commits(), 1, "errors in a batch ring the doorbell");
    let mut done = take_done(&mut sub);
    done.sort_unstable_by_key(|x| x.0);
    let statuses: Vec<BlkStatus> = done.iter().map(|x| x.1).collect();
    assert_eq!(
        statuses,
        vec![
            BlkStatus::Ok,
            BlkStatus::IoErr,
            BlkStatus::Ok,
            BlkStatus::NoSpc,
            BlkStatus::Ok
        ]
    );
    common::assert_whole(&q);
}

/// A read held in flight (its completion frees room), then a plug of three writes to
/// blocks 10, 20 and 30 of which the device has no room for the first.
fn plug_into_a_full_device(
    d: &std::sync::Arc<TestDriver>,
) -> (std::sync::Arc<RequestQueue>, mqblk_core::Submitter) {
    let q = simple_queue(d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 1000, 100), NOW);
    sub.plug.start();
    for (i, block) in [10, 20, 30].into_iter().enumerate() {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, block, i as u64), NOW);
    }
    d.script(&[Reply::DevResource]);
    q.finish_plug(&mut sub, NOW);
    (q, sub)
}

/// A write held in flight, then a write from a queue run that the device has no room for
/// (on a virtio disk `virtio_queue_rq` stops the queue).
fn refuse_a_queue_run(
    d: &std::sync::Arc<TestDriver>,
) -> (std::sync::Arc<RequestQueue>, mqblk_core::Submitter) {
    let q = simple_queue(d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 10, 0), NOW);
    d.script(&[Reply::DevResource]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 20, 1), NOW);
    (q, sub)
}

/// virtio-blk's way with a full ring, as of 6.18: a plug's request that does not fit is
/// requeued by `virtio_queue_rqs` (`virtblk_add_req_batch`) while the rest still go, and the
/// queue runs on; a queue run that finds the ring full stops the queue (`virtio_queue_rq`)
/// until a completion starts it (`virtblk_done`). The requeued request waits on its software
/// queue meanwhile (`blk_mq_requeue_work` inserts it at the head, and a stopped queue does
/// not take it from there), so a later bio merges into it; on the dispatch list, where a
/// driver without `queue_rqs` leaves it, none could.
#[test]
fn a_plugged_request_without_room_is_requeued_where_later_bios_merge_into_it() {
    let d = TestDriver::new(Mode::Hold);
    d.set_virtio(true);
    let (q, mut sub) = plug_into_a_full_device(&d);
    let h = HctxIdx(0);
    let is = d.issues();
    assert_eq!(
        is.iter().map(|x| x.sector / 8).collect::<Vec<_>>(),
        vec![1000, 10, 20, 30],
        "the requests after the refused one are still tried"
    );
    assert_eq!(d.nr_held(), 3, "the read and the two writes that fit");
    assert!(!q.hctx(h).is_stopped(), "queue_rqs does not stop the queue");
    assert_eq!(
        q.hctx(h).dispatch_list_len(),
        0,
        "nothing waits on the dispatch list"
    );

    // A read alone, from a queue run: the device is still full, and the queue stops.
    d.script(&[Reply::DevResource]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2000, 200), NOW);
    assert!(q.hctx(h).is_stopped(), "virtio_queue_rq stops the queue");
    assert_eq!(q.hctx(h).dispatch_list_len(), 1);

    // The requeue work puts the write back on its software queue; the stopped queue
    // leaves it there, and the next write merges into it.
    q.timer(&mut sub, NOW);
    assert_eq!(d.nr_issues(), 5, "a stopped queue issues nothing");
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 11, 3), NOW);
    assert_eq!(d.nr_issues(), 5);

    // A completion starts the queue: the read from the dispatch list first, then the
    // write with both bios.
    d.release(1);
    q.poll(&mut sub, NOW);
    let is = d.issues();
    assert!(!q.hctx(h).is_stopped(), "the completion started the queue");
    assert_eq!(
        is[5..]
            .iter()
            .map(|x| (x.sector / 8, x.nr_sectors, x.nr_bios))
            .collect::<Vec<_>>(),
        vec![(2000, 8, 1), (10, 16, 2)]
    );
    d.release_all();
    q.poll(&mut sub, NOW);
    let mut done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
    done.sort_unstable();
    assert_eq!(done, vec![0, 1, 2, 3, 100, 200], "every bio ends once");
    common::assert_whole(&q);
}

/// A plug's requests reach a driver with `queue_rqs` even while its queue is stopped:
/// `__blk_mq_flush_list` looks only at quiescing, and `virtio_queue_rqs` adds whatever fits
/// the ring. On a virtio disk whose ring a write flood keeps full (the queue stopped most of
/// the time), an O_DIRECT read, plugged by `__iomap_dio_rw` and `__submit_bio`, still goes
/// in when its few descriptors fit. Without `queue_rqs` (`blk_mq_request_issue_directly`)
/// it waits on its software queue until a completion starts the queue.
#[test]
fn a_plugged_request_reaches_queue_rqs_while_the_queue_is_stopped() {
    for virtio in [true, false] {
        let d = TestDriver::new(Mode::Hold);
        d.set_virtio(virtio);
        let (q, mut sub) = refuse_a_queue_run(&d);
        let h = HctxIdx(0);
        if !virtio {
            // Without `queue_rqs` nothing stops this queue: stop it as a driver would.
            q.stop_hw_queue(h);
        }
        assert!(q.hctx(h).is_stopped());
        let before = d.nr_issues();
        sub.plug.start();
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 1000, 2), NOW);
        q.finish_plug(&mut sub, NOW);
        if virtio {
            assert_eq!(d.nr_issues(), before + 1, "the read went to queue_rqs");
            assert_eq!(d.issues().last().unwrap().sector, 8000);
        } else {
            assert_eq!(d.nr_issues(), before, "the read waits for the queue");
        }
        assert!(q.hctx(h).is_stopped(), "the queue stays stopped either way");
        if !virtio {
            q.start_hw_queue(&mut sub, h, NOW);
            assert_eq!(d.issues().last().unwrap().sector, 8000, "the read goes now");
        }
        for _ in 0..3 {
            d.release_all();
            q.poll(&mut sub, NOW);
        }
        let mut done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
        done.sort_unstable();
        assert_eq!(done, vec![0, 1, 2], "virtio={virtio}: every bio ends once");
        common::assert_whole(&q);
    }
}

/// The dispatch-busy average (`blk_mq_update_dispatch_busy`) moves with queue runs and with
/// requests issued one at a time (`__blk_mq_issue_directly` decays it for each one that
/// goes), not with a plug handed to `queue_rqs` (`__blk_mq_flush_list`): on a virtio disk a
/// queue the full ring made busy stays busy through plugged requests that fit, while without
/// `queue_rqs` a plug of two that go takes it back to idle.
#[test]
fn queue_rqs_leaves_the_dispatch_busy_average_alone() {
    for virtio in [true, false] {
        let d = TestDriver::new(Mode::Hold);
        d.set_virtio(virtio);
        let (q, mut sub) = refuse_a_queue_run(&d);
        let h = HctxIdx(0);
        assert!(
            q.hctx(h).is_busy(),
            "virtio={virtio}: the refusal made it busy"
        );
        let plugs = if virtio { 2 } else { 1 };
        for p in 0..plugs {
            sub.plug.start();
            for i in 0..2u64 {
                let n = 2 + 2 * p + i;
                submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 1000 + 10 * n, n), NOW);
            }
            q.finish_plug(&mut sub, NOW);
        }
        assert_eq!(
            d.nr_held(),
            1 + 2 * plugs as usize,
            "virtio={virtio}: the reads went"
        );
        assert_eq!(
            q.hctx(h).is_busy(),
            virtio,
            "virtio={virtio}: busy after the plugged requests went"
        );
        for _ in 0..3 {
            d.release_all();
            q.poll(&mut sub, NOW);
        }
        let mut done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
        done.sort_unstable();
        let want: Vec<u64> = (0..2 + 2 * plugs).collect();
        assert_eq!(done, want, "virtio={virtio}: every bio ends once");
        common::assert_whole(&q);
    }
}

/// The same full device without a requeueing `queue_rqs` (`blk_mq_issue_direct`): the
/// refused request and those after it wait on the dispatch list, and the queue runs on.
#[test]
fn without_queue_rqs_a_refused_plugged_request_waits_on_the_dispatch_list() {
    let d = TestDriver::new(Mode::Hold);
    let (q, mut sub) = plug_into_a_full_device(&d);
    assert_eq!(d.nr_issues(), 2, "dispatch stops at the refused request");
    assert!(!q.hctx(HctxIdx(0)).is_stopped());
    assert_eq!(q.hctx(HctxIdx(0)).dispatch_list_len(), 3);
    d.release_all();
    q.poll(&mut sub, NOW);
    d.release_all();
    q.poll(&mut sub, NOW);
    assert_eq!(take_done(&mut sub).len(), 4);
    common::assert_whole(&q);
}

/// `__submit_bio`'s plug of its own (`submit_bio_plugged`): the bio leaves through a plug
/// flush at once; inside a caller's plug it joins that one; a bio short of a tag leaves the
/// plug open for its caller to finish once it waits, so the tag the flush frees is seen.
#[test]
fn a_lone_bio_gets_a_plug_of_its_own() {
    let d = TestDriver::new(Mode::Hold);
    let q = simple_queue(&d, 1, 1, 1);
    let mut sub = q.submitter(CtxIdx(0));
    let r = q.submit_bio_plugged(&mut sub, bio4k(ReqOp::Read, scattered(0), 0), NOW);
    assert!(matches!(r, Submit::Queued), "{r:?}");
    assert_eq!(d.nr_issues(), 1, "issued by the plug's own flush");
    assert!(!sub.plug.is_started(), "and the plug is finished");

    // The only tag is held: the next bio is refused and its plug stays open.
    let r = q.submit_bio_plugged(&mut sub, bio4k(ReqOp::Read, scattered(1), 1), NOW);
    assert!(matches!(r, Submit::Busy(_)), "{r:?}");
    assert!(sub.plug.is_started() && sub.plug.is_empty());
    q.finish_plug(&mut sub, NOW);
    assert!(!sub.plug.is_started());
    d.release_all();
    q.poll(&mut sub, NOW);
    assert_eq!(take_done(&mut sub), vec![(0, BlkStatus::Ok)]);

    // Inside the caller's plug it waits for the caller's flush.
    sub.plug.start();
    let r = q.submit_bio_plugged(&mut sub, bio4k(ReqOp::Read, scattered(2), 2), NOW);
    assert!(matches!(r, Submit::Queued), "{r:?}");
    assert_eq!(d.nr_issues(), 1, "held in the caller's plug");
    assert!(sub.plug.is_started());
    q.finish_plug(&mut sub, NOW);
    assert_eq!(d.nr_issues(), 2);
    d.release_all();
    q.poll(&mut sub, NOW);
    assert_eq!(take_done(&mut sub), vec![(2, BlkStatus::Ok)]);
    common::assert_whole(&q);
}
