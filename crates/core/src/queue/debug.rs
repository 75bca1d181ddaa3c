//! Teardown, invariant checks and the state dump (blk-mq-debugfs.c's attributes).

use super::*;

impl QueueInner {
    /// Asserts the queue is empty and whole, then detaches the elevator (`exit_sched`): no
    /// request allocated, every tag free, every list empty. Call once all I/O has completed.
    pub fn teardown(&self) {
        self.check_invariants();
        assert_eq!(
            self.nr_allocated(),
            0,
            "teardown with requests still allocated"
        );
        for am in &self.alloc_maps {
            assert_eq!(am.tags.busy(), 0, "teardown with tags still held");
        }
        for hctx in self.hctxs.iter() {
            assert_eq!(
                hctx.dispatch_list_len(),
                0,
                "teardown with a non-empty dispatch list"
            );
            assert!(
                !hctx.any_ctx_pending(),
                "teardown with pending software queues"
            );
        }
        assert!(
            self.requeue_list.lock().is_empty(),
            "teardown with requests on the requeue list"
        );
        assert_eq!(
            self.splits.lock().len(),
            0,
            "teardown with a split bio not completed (its rest never resubmitted?)"
        );
        for (h, fq) in self.flush_queues.iter().enumerate() {
            assert!(
                fq.lock().is_idle(),
                "teardown with hctx {h}'s flush machine busy: {:?}",
                *fq.lock()
            );
        }
        if let Some(e) = &self.elevator {
            e.exit_sched();
        }
        if !self.torn_down.swap(true, Ordering::AcqRel) {
            self.set.del_queue();
        }
    }

    /// Cross-checks the request table against the tag maps and lists: every allocated
    /// request holds exactly the tag that names it, free requests hold none, and the count of
    /// allocated requests matches. O(requests): for tests and the simulator.
    pub fn check_invariants(&self) {
        let mut allocated = 0u32;
        for (m, am) in self.alloc_maps.iter().enumerate() {
            for t in 0..am.tags.nr_tags {
                let rq = self.rqs.lock(RqId(am.base + t));
                let held = am.tags.busy() > 0 && self.tag_held(am, t);
                if rq.allocated {
                    allocated += 1;
                    assert!(
                        held,
                        "map {m}: {:?} allocated but its tag {t} is free",
                        rq.id
                    );
                } else {
                    assert_eq!(
                        rq.state,
                        RqState::Idle,
                        "{:?}: free but {:?}",
                        rq.id,
                        rq.state
                    );
                    assert!(rq.bios.is_empty(), "{:?}: free with bios", rq.id);
                }
            }
        }
        let _ = allocated;
        // A flush request's slot is in use exactly while its queue has a flush in flight.
        for (h, fq) in self.flush_queues.iter().enumerate() {
            let fq = fq.lock();
            let rq = self.rqs.lock(self.flush_rq_id(h));
            assert_eq!(
                rq.allocated,
                fq.flush_in_flight(),
                "hctx {h}: flush request allocated {} against its flush queue {:?}",
                rq.allocated,
                *fq
            );
            for id in fq.waiting() {
                let w = self.rqs.lock(id);
                assert!(
                    w.allocated && w.rq_flags.contains(RqFlags::FLUSH_SEQ),
                    "hctx {h}: {id:?} waits for a flush but is not in a flush sequence"
                );
            }
        }
        if let Some(e) = &self.elevator {
            e.check_invariants();
        }
    }

    pub(super) fn tag_held(&self, am: &AllocMap, t: u32) -> bool {
        if t < am.tags.nr_reserved {
            am.tags.reserved.sb.test(t)
        } else {
            am.tags.bitmap.sb.test(t - am.tags.nr_reserved)
        }
    }

    /// A human dump of the queue state: per hardware queue counters and lists, then the
    /// elevator's own dump.
    pub fn debug_state(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "queue: {} hctx, {} ctx, nr_requests {}, allocated {}, scheduler {}",
            self.hctxs.len(),
            self.ctxs.len(),
            self.nr_requests,
            self.nr_allocated(),
            self.elevator.as_ref().map(|e| e.name()).unwrap_or("none")
        );
        for hctx in self.hctxs.iter() {
            let st = hctx.stats.total();
            let _ = writeln!(
                s,
                "hctx{} ({}): queued {} issued {} direct {} completed {} requeued {} runs {} busy {} dispatch_list {} restart {} stopped {} run_armed {} postponed {}{}",
                hctx.idx.0,
                hctx.ty.name(),
                st.queued,
                st.issued,
                st.direct,
                st.completed,
                st.requeued,
                st.run,
                st.busy,
                hctx.dispatch_list_len(),
                hctx.test_state(state::SCHED_RESTART) as u8,
                hctx.is_stopped() as u8,
                hctx.run_armed_at().map_or("-".to_string(), |t| t.0.to_string()),
                st.postponed,
                if hctx.run_queued.load(Ordering::Acquire) {
                    " (with a worker)"
                } else {
                    ""
                },
            );
        }
        if let Some(e) = &self.elevator {
            s.push_str(&e.debug_state());
        }
        s
    }
}
