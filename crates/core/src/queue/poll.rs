//! Reaping completions the driver holds (`blk_mq_poll`, and the interrupt side of a
//! runtime's completion worker).

use super::*;

impl QueueInner {
    /// Reaps the driver's completions for this submitter's hardware queues, collects bios
    /// other threads completed for it, and services due timers. Returns the number of bios
    /// now waiting in `sub.done`.
    pub fn poll(&self, sub: &mut Submitter, now: Nanos) -> usize {
        for i in 0..sub.hctxs.len() {
            self.driver.poll(sub.hctxs[i], now, &mut sub.batch);
        }
        if !sub.batch.is_empty() {
            self.end_sub_batch(sub, now);
        }
        self.ctxs[sub.ctx.0 as usize].take_remote(&mut sub.done);
        if self.next_deadline().is_some_and(|t| t <= now) {
            self.timer(sub, now);
        }
        sub.done.len()
    }

    /// Reaps completions of one hardware queue from a thread with no software queue (a
    /// completion worker, the userspace interrupt handler). Bios go to their submitters.
    pub fn poll_hctx(&self, h: HctxIdx, batch: &mut CompletionBatch, now: Nanos) -> usize {
        let n = self.driver.poll(h, now, batch);
        if !batch.is_empty() {
            let mut done = Vec::new();
            let mut runs = Vec::new();
            self.end_batch(None, batch, &mut done, &mut runs, now);
            debug_assert!(done.is_empty());
        }
        n
    }
}
