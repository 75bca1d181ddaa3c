//! The checker: the queue's invariants and the accounting of every bio, checked during a
//! run; the state dump and the errors a failed run returns.

use super::*;

impl Sim {
    /// Jobs that finished issuing are marked finished once their last bio is back.
    pub(super) fn check(&mut self) -> Result<(), SimError> {
        let q = self.queue.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q.check_invariants()));
        if let Err(p) = r {
            return Err(self.invariant(panic_text(&p)));
        }
        // Every outstanding bio is accounted for: in the queue or at the driver, or (a split
        // bio whose rest waits for a tag) back with its job.
        let outstanding: u64 = self
            .jobs
            .iter()
            .map(|j| {
                j.inflight() as u64
                    - u64::from(j.pending.as_ref().is_some_and(|b| b.split.is_some()))
            })
            .sum();
        if outstanding > 0 && self.queue.nr_allocated() == 0 && !self.any_bio_parked() {
            return Err(self.invariant(format!(
                "{outstanding} bios outstanding but no request is allocated"
            )));
        }
        Ok(())
    }

    /// Completed bios waiting on a CPU's lists to be reaped.
    pub(super) fn any_bio_parked(&self) -> bool {
        self.cpus.iter().any(|c| !c.sub.done.is_empty())
            || (0..self.nr_ctx).any(|c| self.queue.ctx(CtxIdx(c as u16)).has_remote())
    }

    pub(super) fn dump(&self) -> String {
        let mut s = format!(
            "virtual time {} ns, events {}, completed {}\n",
            self.now, self.events, self.completed
        );
        for (i, j) in self.jobs.iter().enumerate() {
            s += &format!(
                "job {i} '{}' cpu {} inflight {} issued {} pending {} draining {} done_issuing {} finished {} first outstanding {:?}\n",
                j.def.name,
                j.def.cpu,
                j.inflight(),
                j.issued,
                j.pending.is_some(),
                j.draining,
                j.done_issuing,
                j.finished,
                j.outstanding.first()
            );
        }
        s += &self.queue.debug_state();
        s += "\n";
        s += &self.driver.debug_state();
        s
    }

    pub(super) fn invariant(&self, msg: String) -> SimError {
        SimError::Invariant {
            msg,
            dump: self.dump(),
        }
    }

    pub(super) fn stall(&self, msg: String) -> SimError {
        SimError::Stall {
            msg,
            dump: self.dump(),
        }
    }
}
