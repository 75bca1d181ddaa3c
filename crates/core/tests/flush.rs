//! The PREFLUSH/FUA state machine (block/blk-flush.c): what reaches the driver for each kind
//! of device, that concurrent flushes share one flush request, that a POSTFLUSH waits for
//! the data of other sequences (C2) but not forever (C3), and that a bio completes only when
//! its whole sequence has.

mod common;

use common::{bio4k, take_done, Mode, Reply, TestDriver};
use mqblk_core::{
    Bio, BlkStatus, CtxIdx, HctxIdx, Nanos, QueueConfig, ReqFlags, ReqOp, RequestQueue, Submit,
    Submitter, FLUSH_PENDING_TIMEOUT,
};
use std::sync::Arc;

const T0: Nanos = Nanos::from_millis(10);

/// What the driver was asked to do, in order: the op, whether FUA or PREFLUSH reached it,
/// and the bios' cookies.
fn seen(d: &TestDriver) -> Vec<(ReqOp, &'static str, Vec<u64>)> {
    d.issues()
        .iter()
        .map(|x| {
            let f = if x.flags.contains(ReqFlags::PREFLUSH) {
                "preflush"
            } else if x.flags.contains(ReqFlags::FUA) {
                "fua"
            } else {
                ""
            };
            (x.op, f, x.privates.clone())
        })
        .collect()
}

fn queue(d: &Arc<TestDriver>) -> Arc<RequestQueue> {
    common::simple_queue(d, 1, 16, 1)
}

fn submit(q: &RequestQueue, sub: &mut Submitter, bio: Bio, now: Nanos) {
    match q.submit_bio(sub, bio, now) {
        Submit::Queued => {}
        other => panic!("submit: {other:?}"),
    }
}

/// Polls until nothing is due at `now` (the requeue work that issues flushes and data steps).
fn settle(q: &RequestQueue, sub: &mut Submitter, now: Nanos) {
    for _ in 0..16 {
        q.poll(sub, now);
        if q.next_deadline().is_none_or(|t| t > now) {
            return;
        }
    }
    panic!("queue never settled\n{}", q.debug_state());
}

/// A device with a write cache but no FUA, holding two FUA writes' data (cookies 1 and 2).
fn two_fua_writes_without_fua() -> (Arc<TestDriver>, Arc<RequestQueue>, Submitter) {
    let d = TestDriver::with_cache(Mode::Hold, true, false);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    for (b, p) in [(0, 1), (8, 2)] {
        submit(
            &q,
            &mut sub,
            bio4k(ReqOp::Write, b, p).with_flags(ReqFlags::FUA),
            T0,
        );
    }
    settle(&q, &mut sub, T0);
    (d, q, sub)
}

fn flush(private: u64) -> Bio {
    Bio::new(ReqOp::Flush, 0, 0).with_private(private)
}

#[test]
fn without_a_write_cache_flushes_vanish_at_the_bio() {
    // submit_bio_noacct: no cache, nothing to flush; an empty flush ends without a request.
    let d = TestDriver::with_cache(Mode::Inline, false, false);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    assert!(matches!(q.submit_bio(&mut sub, flush(1), T0), Submit::Done));
    assert_eq!(take_done(&mut sub), vec![(1, BlkStatus::Ok)]);
    let w = bio4k(ReqOp::Write, 0, 2).with_flags(ReqFlags::PREFLUSH | ReqFlags::FUA);
    submit(&q, &mut sub, w, T0);
    settle(&q, &mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(2, BlkStatus::Ok)]);
    assert_eq!(seen(&d), vec![(ReqOp::Write, "", vec![2])]);
    assert_eq!(q.flushes_issued(), 0);
    common::assert_whole(&q);
}

#[test]
fn a_preflush_fua_write_on_a_fua_device_is_a_flush_then_a_fua_write() {
    let d = TestDriver::with_cache(Mode::Inline, true, true);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    let w = bio4k(ReqOp::Write, 0, 7).with_flags(ReqFlags::PREFLUSH | ReqFlags::FUA);
    submit(&q, &mut sub, w, T0);
    assert!(sub.done.is_empty(), "nothing completes before the flush");
    settle(&q, &mut sub, T0);
    assert_eq!(
        seen(&d),
        vec![
            (ReqOp::Flush, "preflush", vec![]),
            (ReqOp::Write, "fua", vec![7])
        ]
    );
    assert_eq!(take_done(&mut sub), vec![(7, BlkStatus::Ok)]);
    assert_eq!(q.flushes_issued(), 1);
    common::assert_whole(&q);
}

#[test]
fn a_fua_write_without_fua_support_completes_only_after_its_postflush() {
    let d = TestDriver::with_cache(Mode::Hold, true, false);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    submit(
        &q,
        &mut sub,
        bio4k(ReqOp::Write, 3, 5).with_flags(ReqFlags::FUA),
        T0,
    );
    settle(&q, &mut sub, T0);
    assert_eq!(seen(&d), vec![(ReqOp::Write, "", vec![5])], "FUA stripped");
    d.release(1);
    settle(&q, &mut sub, T0);
    assert!(sub.done.is_empty(), "the data is done, not the sequence");
    assert_eq!(seen(&d).len(), 2);
    assert_eq!(seen(&d)[1].0, ReqOp::Flush);
    d.release(1);
    settle(&q, &mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(5, BlkStatus::Ok)]);
    common::assert_whole(&q);
}

#[test]
fn flushes_that_arrive_while_one_is_in_flight_share_the_next() {
    // C1: one flush in flight; everything that arrives meanwhile waits for one more.
    let d = TestDriver::with_cache(Mode::Hold, true, true);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    submit(&q, &mut sub, flush(1), T0);
    settle(&q, &mut sub, T0);
    for p in 2..=5 {
        submit(&q, &mut sub, flush(p), T0);
    }
    settle(&q, &mut sub, T0);
    assert_eq!(d.nr_issues(), 1, "a second flush waits for the first");
    d.release(1);
    settle(&q, &mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(1, BlkStatus::Ok)]);
    assert_eq!(d.nr_issues(), 2);
    d.release(1);
    settle(&q, &mut sub, T0);
    let done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
    assert_eq!(done, vec![2, 3, 4, 5]);
    assert_eq!(q.flushes_issued(), 2, "five flush bios, two flush requests");
    common::assert_whole(&q);
}

#[test]
fn a_postflush_waits_for_other_sequences_data_then_serves_them_all() {
    // C2: the first write's POSTFLUSH is held while the second's data is in flight, so one
    // flush covers both.
    let (d, q, mut sub) = two_fua_writes_without_fua();
    assert_eq!(d.nr_issues(), 2);
    d.release(1);
    settle(&q, &mut sub, T0);
    assert_eq!(
        d.nr_issues(),
        2,
        "no flush while the other write is in flight"
    );
    d.release(1);
    settle(&q, &mut sub, T0);
    assert_eq!(d.nr_issues(), 3);
    d.release(1);
    settle(&q, &mut sub, T0);
    assert_eq!(take_done(&mut sub).len(), 2);
    assert_eq!(q.flushes_issued(), 1);
    common::assert_whole(&q);
}

#[test]
fn a_waiting_flush_goes_after_the_pending_timeout_even_with_data_in_flight() {
    // C3: FLUSH_PENDING_TIMEOUT bounds how long C2 may hold a flush back.
    let (d, q, mut sub) = two_fua_writes_without_fua();
    d.release(1);
    settle(&q, &mut sub, T0);
    let before = Nanos(T0.0 + FLUSH_PENDING_TIMEOUT.0 - 1_000_000);
    submit(&q, &mut sub, flush(3), before);
    settle(&q, &mut sub, before);
    assert_eq!(
        d.nr_issues(),
        2,
        "held back: the other write's data is in flight"
    );
    let after = Nanos(T0.0 + FLUSH_PENDING_TIMEOUT.0 + 1_000_000);
    submit(&q, &mut sub, flush(4), after);
    settle(&q, &mut sub, after);
    assert_eq!(d.nr_issues(), 3, "issued: the pending list waited too long");
    assert_eq!(seen(&d)[2].0, ReqOp::Flush);
    d.release_all();
    settle(&q, &mut sub, after);
    d.release_all();
    settle(&q, &mut sub, after);
    let mut done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
    done.sort_unstable();
    assert_eq!(done, vec![1, 2, 3, 4]);
    common::assert_whole(&q);
}

#[test]
fn a_failed_preflush_fails_the_write_without_issuing_its_data() {
    let d = TestDriver::with_cache(Mode::Inline, true, true);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    d.script(&[Reply::Fail(BlkStatus::IoErr)]);
    let w = bio4k(ReqOp::Write, 0, 9).with_flags(ReqFlags::PREFLUSH);
    submit(&q, &mut sub, w, T0);
    settle(&q, &mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(9, BlkStatus::IoErr)]);
    assert_eq!(d.nr_issues(), 1, "only the flush was issued");
    common::assert_whole(&q);
}

#[test]
fn a_requeued_flush_is_issued_again_and_serves_its_waiters_once() {
    let d = TestDriver::with_cache(Mode::Inline, true, true);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    d.script(&[Reply::Requeue]);
    submit(&q, &mut sub, flush(1), T0);
    settle(&q, &mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(1, BlkStatus::Ok)]);
    assert_eq!(d.nr_issues(), 2);
    assert_eq!(q.flushes_issued(), 1);
    common::assert_whole(&q);
}

fn fifo_queue(d: &Arc<TestDriver>, flush_via_sched: bool) -> Arc<RequestQueue> {
    RequestQueue::new(
        common::tag_set(1, 4),
        d.clone(),
        Some(&common::FIFO),
        QueueConfig {
            nr_ctx: 1,
            flush_via_sched,
            ..QueueConfig::default()
        },
    )
    .unwrap()
}

fn with_fifo(q: &RequestQueue, f: impl FnOnce(&common::Fifo)) {
    let e = q.elevator();
    f(e.as_deref()
        .and_then(|e| e.as_any().downcast_ref::<common::Fifo>())
        .expect("a FIFO queue"));
}

#[test]
fn sequenced_requests_keep_the_elevator_s_books_and_give_back_every_tag() {
    // The FIFO test scheduler panics if a request it never prepared is inserted, completed or
    // finished, or one is finished twice. Since 6.5 a PREFLUSH|FUA write is prepared at
    // allocation and its data step goes through it (finished when the data completes, not
    // again at the end of the sequence); before, no `op_is_flush` request reached it. Either
    // way the flush request borrows a scheduler tag and takes a driver tag at dispatch.
    for via_sched in [true, false] {
        for fua in [true, false] {
            let d = TestDriver::with_cache(Mode::Hold, true, fua);
            let q = fifo_queue(&d, via_sched);
            let mut sub = q.submitter(CtxIdx(0));
            submit(&q, &mut sub, bio4k(ReqOp::Read, 40, 1), T0);
            let w = bio4k(ReqOp::Write, 0, 2).with_flags(ReqFlags::PREFLUSH | ReqFlags::FUA);
            submit(&q, &mut sub, w, T0);
            submit(&q, &mut sub, flush(3), T0);
            for _ in 0..8 {
                settle(&q, &mut sub, T0);
                q.check_invariants();
                d.release_all();
            }
            settle(&q, &mut sub, T0);
            let mut done: Vec<u64> = take_done(&mut sub).iter().map(|x| x.0).collect();
            done.sort_unstable();
            assert_eq!(done, vec![1, 2, 3], "fua={fua}");
            let flushes = seen(&d).iter().filter(|x| x.0 == ReqOp::Flush).count();
            assert_eq!(flushes as u64, q.flushes_issued());
            // Without FUA the write's POSTFLUSH and the flush bio, which waited behind the
            // write's data (C2), share the second flush.
            assert_eq!(flushes, 2, "fua={fua}: {:?}", seen(&d));
            common::assert_whole(&q);
        }
    }
}

#[test]
fn since_6_5_a_fua_write_waits_in_the_scheduler_like_any_write() {
    // On a device that honours FUA a FUA write needs no flush step (`blk_insert_flush`
    // returns false): since 6.5 it is an elevator request and is inserted into the
    // scheduler, so a scheduler holding its requests back holds it too. Before 6.5 it went
    // past the scheduler to the dispatch list and reached the device at once.
    for (via_sched, issued) in [(true, 0), (false, 1)] {
        let d = TestDriver::with_cache(Mode::Hold, true, true);
        let q = fifo_queue(&d, via_sched);
        let mut sub = q.submitter(CtxIdx(0));
        with_fifo(&q, |f| f.set_plugged(true));
        let w = bio4k(ReqOp::Write, 0, 1).with_flags(ReqFlags::FUA);
        submit(&q, &mut sub, w, T0);
        settle(&q, &mut sub, T0);
        assert_eq!(d.nr_issues(), issued, "flush_via_sched={via_sched}");
        // The scheduler's empty dispatch armed a re-run 3 ms on.
        with_fifo(&q, |f| f.set_plugged(false));
        let t = T0.saturating_add(Nanos::from_millis(3));
        q.timer(&mut sub, t);
        d.release_all();
        settle(&q, &mut sub, t);
        assert_eq!(seen(&d), vec![(ReqOp::Write, "fua", vec![1])]);
        assert_eq!(take_done(&mut sub).len(), 1);
        common::assert_whole(&q);
    }
}

#[test]
fn flushes_are_issued_from_the_head_of_the_dispatch_list() {
    // blk_mq_insert_request puts REQ_OP_FLUSH at the head of hctx->dispatch; a PREFLUSH
    // write that arrives while that flush is pending waits for the next one.
    let d = TestDriver::new(Mode::Inline);
    let q = queue(&d);
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    submit(&q, &mut sub, bio4k(ReqOp::Write, 0, 0), T0);
    submit(&q, &mut sub, bio4k(ReqOp::Write, 2, 1), T0);
    submit(&q, &mut sub, flush(2), T0);
    let w = bio4k(ReqOp::Write, 4, 3).with_flags(ReqFlags::PREFLUSH);
    submit(&q, &mut sub, w, T0);
    q.poll(&mut sub, T0);
    assert_eq!(
        q.hctx(HctxIdx(0)).dispatch_list_len(),
        1,
        "one flush, at the head"
    );
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    settle(&q, &mut sub, T0);
    assert_eq!(
        seen(&d),
        vec![
            (ReqOp::Flush, "preflush", vec![]),
            (ReqOp::Write, "", vec![0]),
            (ReqOp::Write, "", vec![1]),
            (ReqOp::Flush, "preflush", vec![]),
            (ReqOp::Write, "", vec![3]),
        ]
    );
    assert_eq!(take_done(&mut sub).len(), 4);
    common::assert_whole(&q);
}
