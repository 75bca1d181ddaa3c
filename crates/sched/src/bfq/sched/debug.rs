//! BFQ's state for `--dump-sched` and its invariants, checked by the simulator and the
//! fuzzer (as blk-mq-debugfs.c and bfq's own debug checks).

use super::*;

impl Bfq {
    pub(super) fn debug_state_text(&self) -> String {
        let k = self.knobs();
        let st = self.st.lock();
        let mut s = format!(
            "bfq: queued {} dispatch_list {:?} in_service {:?} service {} idle_until {:?} \
             in_driver {} hw_tag {:?} nonrot_with_queueing {} peak_rate {} sect/s max_budget {} \
             asymmetric {} wr_busy {}\n",
            st.nr_queued,
            st.dispatch,
            st.in_service,
            st.service,
            st.idle_until,
            st.dev.rq_in_driver,
            st.dev.hw_tag,
            st.dev.nonrot_with_queueing(),
            st.dev.peak_rate,
            st.max_budget(&k),
            st.asymmetric(),
            st.load.wr_busy,
        );
        for (i, g) in st.groups.slots.iter().enumerate() {
            let _ = writeln!(
                s,
                "  group {i} cgroup '/{}' parent {} weight {} pending_queues {} active [{} {} {}] vtime [{} {} {}]",
                self.blkcg.info(g.blkcg_id).path,
                g.parent,
                g.weight,
                g.pending_queues,
                g.trees[0].len(),
                g.trees[1].len(),
                g.trees[2].len(),
                g.trees[0].vtime(),
                g.trees[1].vtime(),
                g.trees[2].vtime(),
            );
        }
        for (i, q) in st.queues.iter().enumerate() {
            if let Some(q) = q {
                let _ = writeln!(
                    s,
                    "  q{i} {:?} group {} class {} weight {} (wr x{}) queued {} dispatched {} \
                     budget {}/{} in_tree {} seeky {} ttime {} us short_ttime {} inject_limit {} waker {:?} issuers {:?}{}",
                    q.key,
                    q.group,
                    q.class,
                    q.weight(),
                    q.wr.coeff.max(1),
                    q.sorted.len(),
                    q.dispatched,
                    q.budget,
                    q.max_budget,
                    q.in_tree,
                    q.seek_history.count_ones() > crate::bfq::policy::SEEKY_BITS,
                    q.ttime.mean / 1000,
                    q.short_ttime,
                    q.inject_limit,
                    q.waker,
                    q.issuers,
                    if q.split_coop { " split_coop" } else { "" },
                );
            }
        }
        s
    }

    pub(super) fn check_all_invariants(&self) {
        let st = self.st.lock();
        let queued: usize = st.queues.iter().flatten().map(|q| q.sorted.len()).sum();
        assert_eq!(queued as u32, st.nr_queued, "bfq: queued count out of step");
        let mut busy = [0u32; 3];
        let mut wr_busy = 0;
        for (i, q) in st.queues.iter().enumerate() {
            let Some(q) = q else { continue };
            assert_eq!(
                q.sorted.len(),
                q.fifo.len(),
                "bfq: q{i} sort and FIFO out of step"
            );
            let in_service = st.in_service == Some(i as u32);
            assert!(
                !(q.in_tree && in_service),
                "bfq: q{i} in the tree while in service"
            );
            assert_eq!(
                q.in_tree || in_service,
                st.groups.slots[q.group as usize].trees[q.class].is_active(i as u32),
                "bfq: q{i} tree membership out of step"
            );
            assert!(
                q.in_tree || in_service || q.sorted.is_empty(),
                "bfq: q{i} has requests but is neither in the tree nor in service"
            );
            if q.in_tree || in_service {
                busy[q.class] += 1;
                wr_busy += u32::from(q.wr.coeff > 1);
            }
            let pending = !q.sorted.is_empty() || q.dispatched > 0 || in_service || q.in_tree;
            assert_eq!(pending, q.pending, "bfq: q{i} pending count out of step");
            assert_eq!(
                pending && q.wr.coeff <= 1,
                q.counted.is_some(),
                "bfq: q{i} weight count out of step"
            );
            for &(sector, rq) in &q.sorted {
                let info = &st.rqs[rq as usize];
                assert!(
                    info.queued && info.queue == i as u32 && info.sector == sector,
                    "bfq: rq {rq} in q{i} misfiled"
                );
            }
            // `next_rq` is one of its queued requests, and there is one while any is queued.
            assert!(
                match q.next_rq {
                    Some(r) => q.sorted.contains(&(st.rqs[r as usize].sector, r)),
                    None => q.sorted.is_empty(),
                },
                "bfq: q{i}'s next request {:?} is not one of its own",
                q.next_rq
            );
            if let Some(s) = q.pos_key {
                assert!(
                    q.next_rq.is_some_and(|r| st.rqs[r as usize].sector == s)
                        && st.groups.slots[q.group as usize]
                            .pos_tree
                            .contains(s, i as u32),
                    "bfq: q{i}'s position key {s} is not its next request's"
                );
            }
        }
        assert_eq!(
            busy, st.load.busy_classes,
            "bfq: busy queues per class out of step"
        );
        assert_eq!(
            wr_busy, st.load.wr_busy,
            "bfq: weight-raised busy count out of step"
        );
        let mut parked = vec![0u32; st.queues.len()];
        for &rq in &st.dispatch {
            let info = &st.rqs[rq as usize];
            assert!(
                info.parked && !info.queued && !info.owned,
                "bfq: rq {rq} on the dispatch list is also elsewhere"
            );
            parked[info.queue as usize] += 1;
        }
        for (i, q) in st.queues.iter().enumerate() {
            let n = q.as_ref().map_or(0, |q| q.parked);
            assert_eq!(n, parked[i], "bfq: q{i}'s dispatch-list count out of step");
        }
        // `entity.allocated`: each queue's counted requests, and each group's its queues'.
        let mut allocated = vec![0u32; st.queues.len()];
        let mut in_group = vec![0u32; st.groups.slots.len()];
        for r in st.rqs.iter().filter(|r| r.counted) {
            allocated[r.queue as usize] += 1;
            let mut g = st.qr(r.queue).group;
            while g != 0 {
                in_group[g as usize] += 1;
                g = st.groups.slots[g as usize].parent;
            }
        }
        for (i, q) in st.queues.iter().enumerate() {
            let n = q.as_ref().map_or(0, |q| q.allocated);
            assert_eq!(n, allocated[i], "bfq: q{i}'s allocated count out of step");
        }
        for (g, grp) in st.groups.slots.iter().enumerate().skip(1) {
            assert_eq!(
                grp.allocated, in_group[g],
                "bfq: group {g}'s allocated count out of step"
            );
        }
        let counted: u32 = st.load.weights.iter().map(|e| e.1).sum();
        let pending = st
            .queues
            .iter()
            .flatten()
            .filter(|q| q.counted.is_some())
            .count() as u32;
        assert_eq!(counted, pending, "bfq: weights tree out of step");
        st.groups.check();
    }
}
