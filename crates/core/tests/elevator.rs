//! The scheduler path of the core, driven through a minimal FIFO elevator (`common::Fifo`):
//! scheduler tags, driver tags taken at dispatch, flushes bypassing the scheduler, requeue
//! through it, `limit_depth`, and the elevator's bio merge.

mod common;

use common::{bio4k, submit_ok, take_done, Mode, Reply, TestDriver, FIFO, FIFO_MQ};
use mqblk_core::tag::MapQueues;
use mqblk_core::time::JIFFY;
use mqblk_core::{
    Bio, CtxIdx, ElevatorType, HctxIdx, Nanos, QueueConfig, ReqOp, RequestQueue, RqFlags, Submit,
    TagSet, TagSetConfig,
};
use std::sync::Arc;

const T0: Nanos = Nanos::from_millis(5);

fn sched_queue(
    d: &Arc<TestDriver>,
    elv: &ElevatorType,
    depth: u32,
    nr_requests: u32,
    maps: MapQueues,
    nr_ctx: u16,
) -> Arc<RequestQueue> {
    let mut cfg = TagSetConfig::new(maps.default, depth);
    cfg.maps = maps;
    let qc = QueueConfig {
        nr_ctx,
        nr_requests,
        ..Default::default()
    };
    RequestQueue::new(TagSet::new(cfg).unwrap(), d.clone(), Some(elv), qc).unwrap()
}

/// A queue of `nr_hw` hardware queues, one software queue each, under `elv`, with the
/// single-CPU dispatch rule on or off and SCSI's completion-path re-run on or off.
fn multi_queue(
    d: &Arc<TestDriver>,
    elv: &ElevatorType,
    nr_hw: u16,
    sq: bool,
    run_all: bool,
) -> Arc<RequestQueue> {
    let qc = QueueConfig {
        sq_sched_dispatch: sq,
        run_all_on_complete: run_all,
        ..Default::default()
    };
    queue_of(d, elv, nr_hw, qc)
}

/// `nr_hw` hardware queues of 8 tags, one software queue each, 8 scheduler tags, the rest
/// from `qc`.
fn queue_of(
    d: &Arc<TestDriver>,
    elv: &ElevatorType,
    nr_hw: u16,
    qc: QueueConfig,
) -> Arc<RequestQueue> {
    let mut cfg = TagSetConfig::new(nr_hw, 8);
    cfg.maps = MapQueues {
        default: nr_hw,
        read: 0,
        poll: 0,
    };
    let qc = QueueConfig {
        nr_ctx: nr_hw,
        nr_requests: 8,
        ..qc
    };
    RequestQueue::new(TagSet::new(cfg).unwrap(), d.clone(), Some(elv), qc).unwrap()
}

/// Four hardware queues whose asynchronous runs are kblockd work (`kblockd_runs`).
fn kblockd_queue(d: &Arc<TestDriver>, elv: &ElevatorType, rearm: bool) -> Arc<RequestQueue> {
    let qc = QueueConfig {
        sq_sched_dispatch: false,
        kblockd_runs: true,
        delay_run_rearms: rearm,
        ..Default::default()
    };
    queue_of(d, elv, 4, qc)
}

/// Calls `f` with the queue's FIFO scheduler (the test's handle on its switches).
fn with_fifo(q: &RequestQueue, f: impl FnOnce(&common::Fifo)) {
    let e = q.elevator();
    f(e.as_deref()
        .and_then(|e| e.as_any().downcast_ref::<common::Fifo>())
        .expect("a FIFO queue"));
}

fn one_hctx() -> MapQueues {
    MapQueues {
        default: 1,
        read: 0,
        poll: 0,
    }
}

#[test]
fn scheduler_tags_and_driver_tags_at_dispatch() {
    for elv in [&FIFO, &FIFO_MQ] {
        let d = TestDriver::new(Mode::Hold);
        let q = sched_queue(&d, elv, 2, 8, one_hctx(), 1);
        assert_eq!(q.nr_requests(), 8);
        assert_eq!(
            q.requests().len(),
            9,
            "one request per scheduler tag, and the hardware queue's flush request"
        );
        let mut sub = q.submitter(CtxIdx(0));
        for i in 0..6 {
            submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2 * i, i), T0);
        }
        assert_eq!(
            d.nr_issues(),
            2,
            "only as many issued as there are driver tags"
        );
        assert_eq!(q.tag_set().tags[0].busy(), 2);
        for x in d.issues() {
            assert!(!x.tag.is_none());
            assert_eq!(q.tag_to_rq(HctxIdx(0), x.tag), Some(x.id));
            let rqs = q.requests();
            let rq = rqs.lock(x.id);
            assert!(
                !rq.internal_tag.is_none(),
                "a scheduler request keeps its scheduler tag"
            );
            assert!(
                rq.rq_flags.contains(RqFlags::SCHED_TAGS)
                    && rq.rq_flags.contains(RqFlags::USE_SCHED)
            );
        }
        let rqs = q.requests();
        let waiting = rqs.iter().filter(|s| {
            let rq = s.lock();
            rq.allocated && rq.tag.is_none()
        });
        assert_eq!(waiting.count(), 4, "the rest hold no driver tag");
        // Each completion frees a driver tag and restarts the queue.
        for k in 1..=4 {
            d.release(1);
            q.poll(&mut sub, T0);
            assert_eq!(sub.done.len(), k);
            assert_eq!(d.nr_issues(), 2 + k);
        }
        d.release_all();
        q.poll(&mut sub, T0);
        let order: Vec<u64> = d.issues().iter().map(|x| x.privates[0]).collect();
        assert_eq!(
            order,
            (0..6).collect::<Vec<_>>(),
            "{}: FIFO order",
            elv.name
        );
        assert_eq!(take_done(&mut sub).len(), 6);
        common::assert_whole(&q);
    }
}

#[test]
fn out_of_scheduler_tags_is_busy() {
    let d = TestDriver::new(Mode::Hold);
    let q = sched_queue(&d, &FIFO, 64, 4, one_hctx(), 1);
    let mut sub = q.submitter(CtxIdx(0));
    for i in 0..4 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2 * i, i), T0);
    }
    assert!(matches!(
        q.submit_bio(&mut sub, bio4k(ReqOp::Read, 100, 9), T0),
        Submit::Busy(_)
    ));
    d.release_all();
    q.poll(&mut sub, T0);
    assert_eq!(take_done(&mut sub).len(), 4);
    common::assert_whole(&q);
}

#[test]
fn limit_depth_caps_writes_but_not_reads() {
    // The FIFO limits writes to 3/4 of the scheduler tags.
    let d = TestDriver::new(Mode::Inline);
    let q = sched_queue(&d, &FIFO, 64, 8, one_hctx(), 1);
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    let mut queued = 0;
    for i in 0..8 {
        match q.submit_bio(&mut sub, bio4k(ReqOp::Write, 2 * i, i), T0) {
            Submit::Queued => queued += 1,
            Submit::Busy(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(queued, 6);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 100, 100), T0);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 102, 101), T0);
    assert!(matches!(
        q.submit_bio(&mut sub, bio4k(ReqOp::Read, 104, 102), T0),
        Submit::Busy(_)
    ));
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    assert_eq!(take_done(&mut sub).len(), 8);
    common::assert_whole(&q);
}

#[test]
fn flushes_bypass_the_scheduler() {
    let d = TestDriver::new(Mode::Inline);
    let q = sched_queue(&d, &FIFO, 8, 8, one_hctx(), 1);
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 0), T0);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 4, 1), T0);
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Flush, 0, 0).with_private(2),
        T0,
    );
    // The requeue work puts the flush request at the head of the dispatch list.
    q.poll(&mut sub, T0);
    assert_eq!(q.hctx(HctxIdx(0)).dispatch_list_len(), 1);
    let flush = q
        .requests()
        .iter()
        .map(|s| s.lock())
        .find(|rq| rq.allocated && rq.op == ReqOp::Flush)
        .map(|rq| {
            assert!(
                rq.rq_flags.contains(RqFlags::SCHED_TAGS),
                "a flush takes a scheduler tag"
            );
            assert!(
                !rq.rq_flags.contains(RqFlags::USE_SCHED),
                "but does not go through the scheduler"
            );
            rq.id
        });
    assert!(flush.is_some());
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    let order: Vec<(ReqOp, Option<u64>)> = d
        .issues()
        .iter()
        .map(|x| (x.op, x.privates.first().copied()))
        .collect();
    assert_eq!(
        order,
        vec![
            (ReqOp::Flush, None),
            (ReqOp::Write, Some(0)),
            (ReqOp::Write, Some(1))
        ]
    );
    assert_eq!(take_done(&mut sub).len(), 3);
    common::assert_whole(&q);
}

#[test]
fn requeue_goes_back_through_the_scheduler_at_the_head() {
    let d = TestDriver::new(Mode::Inline);
    let q = sched_queue(&d, &FIFO, 1, 8, one_hctx(), 1);
    let mut sub = q.submitter(CtxIdx(0));
    d.script(&[Reply::Requeue]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 0), T0);
    assert_eq!(
        q.tag_set().tags[0].busy(),
        0,
        "a requeued request gives back its driver tag"
    );
    q.stop_hw_queue(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2, 1), T0);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 4, 2), T0);
    q.timer(&mut sub, T0);
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    let order: Vec<u64> = d.issues().iter().map(|x| x.privates[0]).collect();
    assert_eq!(
        order,
        vec![0, 0, 1, 2],
        "the requeued request goes ahead of those queued after it"
    );
    assert_eq!(take_done(&mut sub).len(), 3);
    assert_eq!(q.hctx(HctxIdx(0)).stats.total().requeued, 1);
    common::assert_whole(&q);
}

#[test]
fn the_scheduler_merges_bios() {
    let d = TestDriver::new(Mode::Inline);
    let q = sched_queue(&d, &FIFO, 8, 8, one_hctx(), 1);
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 0), T0);
    for b in 1..4 {
        assert!(matches!(
            q.submit_bio(&mut sub, bio4k(ReqOp::Write, b, b), T0),
            Submit::Merged
        ));
    }
    assert!(matches!(
        q.submit_bio(&mut sub, bio4k(ReqOp::Read, 4, 4), T0),
        Submit::Queued
    ));
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    let is = d.issues();
    assert_eq!(is.len(), 2);
    assert_eq!((is[0].nr_sectors, is[0].nr_bios), (32, 4));
    assert_eq!(take_done(&mut sub).len(), 5);
    common::assert_whole(&q);
}

#[test]
fn a_queue_wide_scheduler_runs_only_the_submitters_hctx() {
    // Two hctxs, one per submitter. A request of submitter 1 is requeued; the requeue work
    // runs "all" hardware queues. For a scheduler that is not MQ-aware only the submitter's
    // own hctx runs; without that rule hctx 0 runs first and, the scheduler being
    // queue-wide, dispatches the request onto hctx 1 itself. An MQ-aware scheduler has no
    // work for hctx 0, so it is not run either way.
    for (elv, sq, hctx0_runs) in [
        (&FIFO, true, false),
        (&FIFO, false, true),
        (&FIFO_MQ, true, false),
    ] {
        let d = TestDriver::new(Mode::Inline);
        let q = multi_queue(&d, elv, 2, sq, false);
        let mut sub = q.submitter(CtxIdx(1));
        d.script(&[Reply::Requeue]);
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 7), T0);
        let runs0 = q.hctx(HctxIdx(0)).stats.total().run;
        q.timer(&mut sub, T0);
        let is = d.issues();
        assert_eq!(is.len(), 2);
        assert!(
            is.iter().all(|x| x.hctx == HctxIdx(1)),
            "issued on its own hctx"
        );
        assert_eq!(take_done(&mut sub), vec![(7, mqblk_core::BlkStatus::Ok)]);
        let ran = q.hctx(HctxIdx(0)).stats.total().run > runs0;
        assert_eq!(
            ran, hctx0_runs,
            "{} sq_sched_dispatch={sq}: did hctx 0 run?",
            elv.name
        );
        common::assert_whole(&q);
    }
}

#[test]
fn an_empty_dispatch_arms_a_run_of_every_hardware_queue_in_3_ms() {
    // `__blk_mq_do_dispatch_sched`: has_work says yes, dispatch hands out nothing (BFQ
    // idling): "kick it ourselves" with `blk_mq_delay_run_hw_queues(q, BLK_MQ_BUDGET_DELAY)`.
    // Every hardware queue gets a run 3 ms later; under the single-CPU dispatch rule only the
    // kicking queue's. The run then dispatches what the scheduler releases meanwhile.
    for sq in [false, true] {
        let d = TestDriver::new(Mode::Inline);
        let q = multi_queue(&d, &FIFO, 4, sq, false);
        with_fifo(&q, |f| f.set_plugged(true));
        let mut sub = q.submitter(CtxIdx(1));
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 7), T0);
        assert!(d.issues().is_empty());
        let due = Some(T0.saturating_add(Nanos::from_millis(3)));
        let armed: Vec<bool> = (0..4)
            .map(|h| q.hctx(HctxIdx(h)).run_armed_at() == due)
            .collect();
        let want = if sq {
            vec![false, true, false, false]
        } else {
            vec![true; 4]
        };
        assert_eq!(armed, want, "sq_sched_dispatch={sq}");
        with_fifo(&q, |f| f.set_plugged(false));
        q.timer(&mut sub, T0.saturating_add(Nanos::from_millis(3)));
        assert_eq!(d.issues().len(), 1, "sq_sched_dispatch={sq}");
        assert_eq!(take_done(&mut sub), vec![(7, mqblk_core::BlkStatus::Ok)]);
        common::assert_whole(&q);
    }
}

#[test]
fn a_delayed_rerun_pushes_back_another_queues_pending_run_only_as_before_5_17() {
    // Four hardware queues, runs as kblockd work. The FIFO says it has work and hands out
    // nothing (BFQ idling), so hctx 1's run kicks a re-run of every queue 3 ms (a tick) on.
    // When those come due, hctx 0's worker starts first, gets nothing again and kicks once
    // more. Before "blk-mq: avoid extending delays of active hctx from
    // blk_mq_delay_run_hw_queues" (Linux 5.17) that re-arms the other three runs, still
    // pending on the worklist, a tick on, so hctx 1's worker finds nothing to run; since then
    // they are left alone and hctx 1 runs.
    for rearm in [false, true] {
        let d = TestDriver::new(Mode::Inline);
        let q = kblockd_queue(&d, &FIFO, rearm);
        with_fifo(&q, |f| f.set_plugged(true));
        let mut sub1 = q.submitter(CtxIdx(1));
        submit_ok(&q, &mut sub1, bio4k(ReqOp::Read, 0, 7), T0);
        // The submission's own run is kblockd work too (`blk_mq_run_hw_queue(hctx, true)`
        // after the insert), due at once on hctx 1's worker.
        let mut due = Vec::new();
        q.take_due_runs(T0, &mut due);
        assert_eq!(due, vec![HctxIdx(1)], "rearm={rearm}");
        q.run_work(HctxIdx(1), &mut sub1, T0);
        // As delayed work the 3 ms are whole ticks from the current one (`msecs_to_jiffies`:
        // one tick at HZ=250), so the re-run is due at the next tick boundary.
        let next_tick = |t: Nanos| Nanos((t.0 / JIFFY.0 + 1) * JIFFY.0);
        let t1 = next_tick(T0);
        assert_eq!(q.next_deadline(), Some(t1));
        due.clear();
        q.take_due_runs(t1, &mut due);
        assert_eq!(due, (0..4).map(HctxIdx).collect::<Vec<_>>());
        // Handed to workers: no longer a deadline of the timer's.
        assert_eq!(q.next_deadline(), None, "rearm={rearm}");
        let runs = |q: &RequestQueue, h: u16| q.hctx(HctxIdx(h)).stats.total().run;
        let mut sub0 = q.submitter(CtxIdx(0));
        q.run_work(HctxIdx(0), &mut sub0, t1);
        assert_eq!(runs(&q, 0), 1);
        let before = runs(&q, 1);
        q.run_work(
            HctxIdx(1),
            &mut sub1,
            t1.saturating_add(Nanos::from_micros(2)),
        );
        let postponed: u64 = (0..4)
            .map(|h| q.hctx(HctxIdx(h)).stats.total().postponed)
            .sum();
        if rearm {
            assert_eq!(runs(&q, 1), before, "hctx 1's run was pushed back");
            assert_eq!(postponed, 3);
            let t2 = next_tick(t1);
            assert_eq!(q.hctx(HctxIdx(1)).run_armed_at(), Some(t2));
            assert_eq!(q.next_deadline(), Some(t2));
        } else {
            assert_eq!(runs(&q, 1), before + 1, "hctx 1 ran");
            assert_eq!(postponed, 0);
        }
        // Released, the request goes on the next run of any queue.
        with_fifo(&q, |f| f.set_plugged(false));
        let t3 = t1.saturating_add(Nanos::from_millis(10));
        due.clear();
        q.take_due_runs(t3, &mut due);
        for &h in &due {
            q.run_work(h, &mut sub1, t3);
        }
        assert_eq!(d.issues().len(), 1, "rearm={rearm}");
        take_done(&mut sub1);
        common::assert_whole(&q);
    }
}

#[test]
fn the_requeue_work_runs_on_the_kicking_cpu_as_kblockd_work() {
    // `blk_mq_kick_requeue_list` queues the requeue work on the local CPU's kblockd worker;
    // its `blk_mq_run_hw_queues(q, false)` runs that CPU's own hardware queue inline. With
    // `kblockd_runs` the timer leaves it to the caller, who learns the CPU (the requeued
    // request's own) and runs it there: the request goes out on its queue at once, with no
    // run of its queue left pending behind it.
    let d = TestDriver::new(Mode::Inline);
    let q = kblockd_queue(&d, &FIFO_MQ, false);
    let mut sub = q.submitter(CtxIdx(2));
    d.script(&[Reply::Requeue]);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 7), T0);
    // Inserted into the scheduler, the request waits for its queue's run, kblockd work on
    // CPU 2 (`blk_mq_run_hw_queue(hctx, true)`).
    assert!(d.issues().is_empty());
    let mut due = Vec::new();
    q.take_due_runs(T0, &mut due);
    assert_eq!(due, vec![HctxIdx(2)]);
    q.run_work(HctxIdx(2), &mut sub, T0);
    assert_eq!(d.issues().len(), 1);
    // The timer does not run it; it is due, on CPU 2's worker.
    let mut other = q.submitter(CtxIdx(0));
    q.timer(&mut other, T0);
    assert_eq!(d.issues().len(), 1, "the timer left the requeue work alone");
    assert_eq!(q.take_due_requeue(T0), Some(CtxIdx(2)));
    assert_eq!(q.take_due_requeue(T0), None, "handed to one worker only");
    assert!(
        q.next_deadline().is_none_or(|t| t > T0),
        "no longer a deadline of the timer's"
    );
    q.requeue_work(&mut sub, T0);
    let is = d.issues();
    assert_eq!(is.len(), 2);
    assert!(
        is.iter().all(|x| x.hctx == HctxIdx(2)),
        "issued on its own hctx"
    );
    assert_eq!(
        q.hctx(HctxIdx(2)).run_armed_at(),
        None,
        "run inline, not armed"
    );
    assert_eq!(take_done(&mut sub), vec![(7, mqblk_core::BlkStatus::Ok)]);
    common::assert_whole(&q);
}

#[test]
fn a_schedule_dispatch_runs_only_the_local_queue_under_the_single_cpu_rule() {
    // BFQ's `bfq_schedule_dispatch` is `blk_mq_run_hw_queues`: every hardware queue, or under
    // the rule of "blk-mq: Improve performance of non-mq IO schedulers with multiple HW
    // queues" only the current CPU's.
    for sq in [false, true] {
        let d = TestDriver::new(Mode::Inline);
        let q = multi_queue(&d, &FIFO, 4, sq, false);
        with_fifo(&q, |f| f.schedule_dispatch());
        let mut sub = q.submitter(CtxIdx(2));
        // Keep every queue "pending" (the FIFO has work for all of them) while the
        // completion of the request below asks for the runs.
        q.stop_hw_queue(HctxIdx(0));
        let runs = |q: &RequestQueue| -> Vec<u64> {
            (0..4)
                .map(|h| q.hctx(HctxIdx(h)).stats.total().run)
                .collect()
        };
        let before = runs(&q);
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 7), T0);
        let after = runs(&q);
        let ran: Vec<bool> = (0..4).map(|h| after[h] > before[h]).collect();
        let want = if sq {
            vec![false, false, true, false]
        } else {
            vec![false, true, true, true]
        };
        assert_eq!(ran, want, "sq_sched_dispatch={sq}: which queues ran");
        q.start_hw_queue(&mut sub, HctxIdx(0), T0);
        take_done(&mut sub);
        common::assert_whole(&q);
    }
}

#[test]
fn the_completion_path_runs_every_queue_only_after_a_refused_budget() {
    // SCSI's `scsi_run_queue_async` (Linux 5.10 on): a completion runs every hardware queue
    // only while `sdev->restarts`, raised when `scsi_mq_get_budget` refuses, is non-zero.
    let d = TestDriver::new(Mode::Hold);
    let q = multi_queue(&d, &FIFO, 2, false, true);
    d.set_budget(Some(2));
    let mut sub = q.submitter(CtxIdx(0));
    let runs1 = |q: &RequestQueue| q.hctx(HctxIdx(1)).stats.total().run;
    // Work waits in the scheduler (hctx 0 stopped) but no budget was refused: the
    // completion runs no other queue (before Linux 5.10 SCSI ran them all every time).
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 1), T0);
    q.stop_hw_queue(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 100, 9), T0);
    let before = runs1(&q);
    d.release(1);
    q.poll(&mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(1, mqblk_core::BlkStatus::Ok)]);
    assert_eq!(runs1(&q), before, "no refusal, no run of hctx 1");
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    d.release_all();
    q.poll(&mut sub, T0);
    assert_eq!(take_done(&mut sub), vec![(9, mqblk_core::BlkStatus::Ok)]);
    d.set_budget(Some(1));
    // Three requests, one budget: the others are refused, so the first's completion runs
    // every queue that has work (hctx 1 too: the FIFO is queue-wide) once hctx 0's own
    // restart has taken the budget back.
    for b in 2..5 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 2 * b, b), T0);
    }
    assert_eq!(d.nr_held(), 1);
    let before = runs1(&q);
    d.release(1);
    q.poll(&mut sub, T0);
    assert!(
        runs1(&q) > before,
        "a refused budget: the completion ran hctx 1"
    );
    assert_eq!(d.nr_held(), 1, "the next request went");
    for _ in 0..2 {
        d.release_all();
        q.poll(&mut sub, T0);
    }
    assert_eq!(take_done(&mut sub).len(), 3);
    common::assert_whole(&q);
}

#[test]
fn a_stopped_local_queue_leaves_every_queue_to_run() {
    // `blk_mq_get_sq_hctx` returns no queue when the current CPU's is stopped, and
    // `blk_mq_run_hw_queues` then runs every queue that is not: the scheduler's request to
    // run the queues (`bfq_schedule_dispatch`) reaches hctx 1, which hands out the request
    // waiting in the queue-wide FIFO.
    let d = TestDriver::new(Mode::Hold);
    let q = multi_queue(&d, &FIFO, 2, true, false);
    let mut sub = q.submitter(CtxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 0, 5), T0);
    q.stop_hw_queue(HctxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 8, 6), T0);
    assert_eq!(d.nr_issues(), 1, "hctx 0 is stopped");
    with_fifo(&q, |f| f.schedule_dispatch());
    let runs1 = q.hctx(HctxIdx(1)).stats.total().run;
    d.release(1);
    q.poll(&mut sub, T0);
    assert!(
        q.hctx(HctxIdx(1)).stats.total().run > runs1,
        "hctx 1 ran in place of the stopped local queue"
    );
    assert_eq!(d.nr_issues(), 2, "the FIFO handed over the waiting request");
    q.start_hw_queue(&mut sub, HctxIdx(0), T0);
    d.release_all();
    q.poll(&mut sub, T0);
    assert_eq!(take_done(&mut sub).len(), 2);
    common::assert_whole(&q);
}
