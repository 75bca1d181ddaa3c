//! A submitting thread's handle on a queue.

use crate::clock::MonotonicClock;
use mqblk_core::{
    Bio, Clock, CompletionBatch, CtxIdx, HctxIdx, Nanos, RequestQueue, Submit, Submitter,
};
use std::sync::Arc;
use std::time::Duration;

/// A wait for completions that ends later than this is left to the driver to end (at the
/// completion, or its own bound); a shorter one is timed.
const WAIT_MAX: Duration = Duration::from_millis(1);

/// Owns one software queue of `queue` for the calling thread.
pub struct SubmitterHandle {
    queue: Arc<RequestQueue>,
    sub: Submitter,
    clock: MonotonicClock,
    /// Spins without finding a completion before the thread yields the CPU.
    spins_before_yield: u32,
}

impl SubmitterHandle {
    pub fn new(queue: Arc<RequestQueue>, ctx: CtxIdx, clock: MonotonicClock) -> SubmitterHandle {
        let sub = queue.submitter(ctx);
        SubmitterHandle {
            queue,
            sub,
            clock,
            spins_before_yield: 1,
        }
    }

    pub fn queue(&self) -> &Arc<RequestQueue> {
        &self.queue
    }
    pub fn ctx(&self) -> CtxIdx {
        self.sub.ctx
    }
    #[inline]
    pub fn now(&self) -> Nanos {
        self.clock.now()
    }
    pub fn clock(&self) -> &MonotonicClock {
        &self.clock
    }

    /// `blk_start_plug`.
    pub fn start_plug(&mut self) {
        self.sub.plug.start();
    }

    /// `blk_finish_plug`: everything plugged goes to the queue now.
    pub fn finish_plug(&mut self) {
        let now = self.clock.now();
        self.queue.finish_plug(&mut self.sub, now);
    }

    /// Submits a bio stamped with `now`. A bio that found no free tag comes back as `Err`:
    /// reap completions and try again.
    #[inline]
    pub fn submit_at(&mut self, bio: Bio, now: Nanos) -> Result<(), Bio> {
        match self.queue.submit_bio(&mut self.sub, bio, now) {
            Submit::Busy(bio) => Err(*bio),
            Submit::Queued | Submit::Merged | Submit::Failed | Submit::Done => Ok(()),
        }
    }

    /// Submits a bio, waiting (reaping completions) while no tag is free.
    pub fn submit(&mut self, mut bio: Bio) {
        loop {
            let now = self.clock.now();
            match self.submit_at(bio, now) {
                Ok(()) => return,
                Err(b) => {
                    bio = b;
                    // Issue what is plugged, then make room: reap or let others run.
                    self.queue.flush_plug(&mut self.sub, now);
                    if self.queue.poll(&mut self.sub, now) == 0 {
                        std::thread::yield_now();
                    }
                }
            }
        }
    }

    /// Bios completed so far (their `status` tells the outcome). Drain it after reaping.
    pub fn done(&mut self) -> &mut Vec<Bio> {
        &mut self.sub.done
    }

    /// Reaps without waiting; returns the number of completed bios held.
    pub fn poll(&mut self) -> usize {
        let now = self.clock.now();
        self.queue.poll(&mut self.sub, now)
    }

    /// Before the thread ends: reaps until nothing is left on a ring only this thread can
    /// reap ([`mqblk_core::Driver::inflight_owned`]: an io_uring it owns), where a queue run
    /// from this thread may have issued other submitters' requests. Their bios go to their
    /// submitters; this thread's own land in [`Self::done`].
    pub fn retire(&mut self) {
        let q = self.queue.clone();
        let mut batch = CompletionBatch::new();
        loop {
            let mut held = false;
            for h in (0..q.nr_hw_queues()).map(|h| HctxIdx(h as u16)) {
                if q.driver().inflight_owned(h) == 0 {
                    continue;
                }
                held = true;
                if q.poll_hctx(h, &mut batch, self.clock.now()) == 0
                    && !q.driver().wait(h, &|| false, None)
                {
                    std::thread::yield_now();
                }
            }
            if !held {
                break;
            }
        }
        self.poll();
    }

    /// Sleeps `ns` with nothing of its own in flight (a think time, a rate's gap), still
    /// bringing back what only this thread can as it completes: requests its queue runs
    /// issued for other submitters on a ring it owns ([`mqblk_core::Driver::inflight_owned`]),
    /// whose submitters wait for them.
    pub fn idle(&mut self, ns: u64) {
        let end = self.clock.now().0.saturating_add(ns);
        loop {
            self.poll();
            let now = self.clock.now().0;
            if now >= end {
                return;
            }
            let left = Duration::from_nanos(end - now);
            let q = &self.queue;
            let held = self
                .sub
                .hctxs()
                .iter()
                .find(|&&h| q.driver().inflight_owned(h) > 0);
            match held {
                Some(&h) if q.driver().wait(h, &|| false, Some(left)) => {}
                _ => {
                    std::thread::sleep(left);
                    return;
                }
            }
        }
    }

    /// Reaps until at least `min` completed bios are held (or `max_wait_ns` passed),
    /// spinning first and then yielding: completions come from the driver (polled here)
    /// or from other threads' runs.
    pub fn reap(&mut self, min: usize, max_wait_ns: u64) -> usize {
        let start = self.clock.now();
        let mut spins = 0u32;
        loop {
            let now = self.clock.now();
            let n = self.queue.poll(&mut self.sub, now);
            if n >= min || now.0.saturating_sub(start.0) >= max_wait_ns {
                return n;
            }
            spins += 1;
            if spins >= self.spins_before_yield {
                // Sleep until the device's "interrupt" where the driver can (io_uring), so
                // the CPU goes to whoever completes our I/O; otherwise just yield.
                spins = 0;
                // With nothing of ours on any ring (still in the scheduler, or on another
                // thread's ring), the wait is for the wake-up its completion brings.
                let q = &self.queue;
                let ctx = q.ctx(self.sub.ctx);
                let hctxs = self.sub.hctxs();
                let h = hctxs
                    .iter()
                    .find(|&&h| q.driver().inflight(h) > 0)
                    .or(hctxs.first());
                let left = max_wait_ns.saturating_sub(now.0.saturating_sub(start.0));
                let max = Some(Duration::from_nanos(left)).filter(|&d| d < WAIT_MAX);
                let slept = h.is_some_and(|&h| q.driver().wait(h, &|| ctx.has_remote(), max));
                if !slept {
                    std::thread::yield_now();
                }
            } else {
                std::hint::spin_loop();
            }
        }
    }
}
