//! The tracer hook: which events a request's life produces, in order.

mod common;

use common::{bio4k, queue, submit_ok, take_done, Mode, Reply, TestDriver};
use mqblk_core::{
    BlkStatus, CtxIdx, Nanos, QueueConfig, ReqOp, TraceAction, TraceEvent, TraceHook, Tracer,
};
use parking_lot::Mutex;
use std::sync::Arc;

#[derive(Default)]
struct Log(Mutex<Vec<TraceEvent>>);

impl Tracer for Log {
    fn event(&self, ev: &TraceEvent) {
        self.0.lock().push(*ev);
    }
}

impl Log {
    /// The letters of the events so far, queue runs left out.
    fn letters(&self) -> String {
        self.0
            .lock()
            .iter()
            .filter(|e| e.action != TraceAction::Run)
            .map(|e| e.action.letter())
            .collect()
    }
}

fn traced(d: &Arc<TestDriver>) -> (Arc<mqblk_core::RequestQueue>, Arc<Log>) {
    let log = Arc::new(Log::default());
    let cfg = QueueConfig {
        tracer: TraceHook::new(log.clone()),
        ..QueueConfig::default()
    };
    (queue(d, 1, 32, cfg), log)
}

#[test]
fn direct_issue_is_queue_getrq_issue_complete() {
    let d = TestDriver::new(Mode::Inline);
    let (q, log) = traced(&d);
    let mut sub = q.submitter(CtxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 10, 1), Nanos(5));
    assert_eq!(log.letters(), "QGDC");
    let evs = log.0.lock().clone();
    assert!(evs.iter().all(|e| e.sector == 80 && e.nr_sectors == 8));
    assert!(evs.iter().all(|e| e.time == Nanos(5)));
    assert_eq!(take_done(&mut sub), vec![(1, BlkStatus::Ok)]);
}

#[test]
fn plugged_merge_and_insert_are_traced() {
    let d = TestDriver::new(Mode::Hold);
    let (q, log) = traced(&d);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 10, 1), Nanos(1));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 11, 2), Nanos(2));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 9, 3), Nanos(3));
    assert_eq!(
        log.letters(),
        "QGQMQF",
        "back merge then front merge into the plugged request"
    );
    q.finish_plug(&mut sub, Nanos(4));
    d.release_all();
    q.poll(&mut sub, Nanos(9));
    let evs = log.0.lock().clone();
    let issue = evs.iter().find(|e| e.action == TraceAction::Issue).unwrap();
    assert_eq!(
        (issue.sector, issue.nr_sectors),
        (72, 24),
        "D carries the merged request"
    );
    let c = evs
        .iter()
        .find(|e| e.action == TraceAction::Complete)
        .unwrap();
    assert_eq!((c.time, c.status), (Nanos(9), BlkStatus::Ok));
    assert_eq!(take_done(&mut sub).len(), 3);
}

#[test]
fn busy_driver_shows_a_requeue_before_the_reissue() {
    let d = TestDriver::new(Mode::Inline);
    d.script(&[Reply::Resource]);
    let (q, log) = traced(&d);
    let mut sub = q.submitter(CtxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 1, 1), Nanos(1));
    assert_eq!(log.letters(), "QGDR");
    q.timer(&mut sub, Nanos(10_000_000));
    assert_eq!(log.letters(), "QGDRDC");
    assert_eq!(take_done(&mut sub), vec![(1, BlkStatus::Ok)]);
}

/// A bio handed back for want of a tag and submitted again is traced as queued once, as the
/// kernel's task sleeps for the tag after `trace_block_bio_queue`: one tag, two bios, the
/// second retried after the first completes.
#[test]
fn a_bio_retried_for_a_tag_is_traced_queued_once() {
    let d = TestDriver::new(Mode::Hold);
    let log = Arc::new(Log::default());
    let cfg = QueueConfig {
        tracer: TraceHook::new(log.clone()),
        ..QueueConfig::default()
    };
    let q = queue(&d, 1, 1, cfg);
    let mut sub = q.submitter(CtxIdx(0));
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 10, 1), Nanos(1));
    let second = match q.submit_bio(&mut sub, bio4k(ReqOp::Read, 20, 2), Nanos(2)) {
        mqblk_core::Submit::Busy(b) => *b,
        other => panic!("expected no tag, got {other:?}"),
    };
    assert_eq!(d.release(1), 1);
    q.poll(&mut sub, Nanos(3));
    submit_ok(&q, &mut sub, second, Nanos(4));
    let queued: Vec<u64> = log
        .0
        .lock()
        .iter()
        .filter(|e| e.action == TraceAction::Queue)
        .map(|e| e.sector)
        .collect();
    assert_eq!(queued, vec![80, 160], "{}", log.letters());
}
