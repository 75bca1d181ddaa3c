//! Runs of one hardware queue from several threads at once (`blk_mq_run_hw_queue`): a
//! thread that finds the queue being run by another still dispatches its own request,
//! rather than leaving it to the thread that is running.

use mqblk_core::{
    Bio, BlkStatus, CompletionBatch, CtxIdx, Driver, HctxIdx, Nanos, QueueConfig, ReqOp, Request,
    RequestQueue, Submit, TagSet, TagSetConfig,
};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

/// Completes every request inline, but holds the thread that issues sector 0 inside
/// `queue_rq` until the test opens the gate; records which thread issued each sector.
#[derive(Default)]
struct GateDriver {
    state: Mutex<Gate>,
    changed: Condvar,
}

#[derive(Default)]
struct Gate {
    open: bool,
    holding: bool,
    issued: Vec<(u64, ThreadId)>,
}

impl Driver for GateDriver {
    fn name(&self) -> &'static str {
        "gate"
    }
    fn capacity_sectors(&self) -> u64 {
        1 << 21
    }
    fn queue_rq(
        &self,
        _hctx: HctxIdx,
        rq: &mut Request,
        _last: bool,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus {
        let mut g = self.state.lock();
        g.issued.push((rq.sector, std::thread::current().id()));
        if rq.sector == 0 {
            g.holding = true;
            self.changed.notify_all();
            while !g.open {
                self.changed.wait(&mut g);
            }
            g.holding = false;
        }
        done.complete(rq.id, BlkStatus::Ok);
        BlkStatus::Ok
    }
}

/// A read of 8 sectors at `sector` from software queue `ctx`, plugged as every bio is;
/// queued, and with what completed into the submitter's batch.
fn read(q: &RequestQueue, ctx: u16, sector: u64, now: u64) -> mqblk_core::Submitter {
    let mut sub = q.submitter(CtxIdx(ctx));
    let r = q.submit_bio_plugged(
        &mut sub,
        Bio::new(ReqOp::Read, sector, 8).with_private(sector + 1),
        Nanos(now),
    );
    assert!(matches!(r, Submit::Queued), "{r:?}");
    sub
}

#[test]
fn a_thread_dispatches_its_own_request_while_another_runs_the_queue() {
    let d = Arc::new(GateDriver::default());
    let set = TagSet::new(TagSetConfig::new(1, 16)).unwrap();
    let elv = mqblk_sched::lookup("mq-deadline").unwrap();
    let q = RequestQueue::new(
        set,
        d.clone(),
        Some(elv),
        QueueConfig {
            nr_ctx: 2,
            ..Default::default()
        },
    )
    .unwrap();
    // Thread A's read is issued by A's own run, which then stays inside `queue_rq`.
    let qa = q.clone();
    let a = std::thread::spawn(move || read(&qa, 0, 0, 1).done.len());
    {
        let mut g = d.state.lock();
        while !g.holding {
            let timed_out = d
                .changed
                .wait_for(&mut g, Duration::from_secs(10))
                .timed_out();
            assert!(!timed_out, "thread A never reached queue_rq");
        }
    }
    // The queue is being run by A: this thread's read still goes out, from this thread,
    // before A's run returns.
    let sub = read(&q, 1, 800, 2);
    {
        let mut g = d.state.lock();
        assert!(g.holding, "A is still inside queue_rq");
        assert_eq!(
            g.issued,
            vec![(0, a.thread().id()), (800, std::thread::current().id())],
            "each read issued by its own thread"
        );
        g.open = true;
        d.changed.notify_all();
    }
    assert_eq!(
        sub.done.len(),
        1,
        "completed inline into this thread's batch"
    );
    assert_eq!(a.join().unwrap(), 1);
}
