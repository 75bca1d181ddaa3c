//! The device estimates BFQ learns as it dispatches and completes: the peak rate and from it
//! the automatic `max_budget` (`bfq_update_peak_rate`, `bfq_reset_rate_computation`), and
//! whether the device queues commands (`hw_tag`, in `bfq_update_hw_tag`).

use super::*;

impl State {
    /// A request is going to the device: who occupies it, and the peak-rate window
    /// (`bfq_update_peak_rate`).
    pub(in crate::bfq) fn note_dispatch(&mut self, sector: u64, sectors: u64, now: Nanos) {
        self.dev.rq_in_driver += 1;
        self.update_peak_rate(sector, sectors, now);
    }

    /// `bfq_update_peak_rate`: sample a dispatch; once a window is long enough, or the
    /// device sat empty too long, compute its rate (`bfq_update_rate_reset`).
    pub(super) fn update_peak_rate(&mut self, sector: u64, sectors: u64, now: Nanos) {
        let nonrot = !self.dev.rotational;
        let d = &mut self.dev;
        if d.rate_samples == 0 {
            d.reset_rate_window(Some(sectors), now);
        } else if now.saturating_sub(d.last_dispatch) > RATE_IDLE_RESET && d.rq_in_driver == 1 {
            // `rq_in_driver` already counts this dispatch: the device was empty.
            self.update_rate_reset(Some(sectors), now);
        } else {
            d.rate_samples += 1;
            let far = sector.abs_diff(d.last_dispatch_end) > SEEK_THR;
            let seeky = far && (!nonrot || sectors < SECT_THR_NONROT);
            let back_to_back =
                d.rq_in_driver > 1 || now.saturating_sub(d.last_rate_completion) < MIN_TT;
            if back_to_back && !seeky {
                d.rate_seq_samples += 1;
            }
            d.rate_sectors += sectors;
            d.last_rq_max_size = if d.rate_samples % 32 != 0 {
                d.last_rq_max_size.max(sectors)
            } else {
                sectors
            };
            d.delta_from_first = now.saturating_sub(d.rate_window_start);
            if d.delta_from_first >= RATE_REF_INTERVAL {
                self.update_rate_reset(Some(sectors), now);
            }
        }
        let d = &mut self.dev;
        d.last_dispatch_end = sector + sectors;
        d.last_dispatch = now;
    }

    /// `bfq_update_rate_reset`: the window's rate, if it has enough samples over enough
    /// time, updates the peak rate through a low-pass filter weighted by how sequential the
    /// window was, unless the window was mostly random and no faster than the peak rate
    /// already is; then a new window starts (with the dispatch `next`, if one is happening).
    pub(super) fn update_rate_reset(&mut self, next: Option<u64>, now: Nanos) {
        let d = &mut self.dev;
        if d.rate_samples >= RATE_MIN_SAMPLES && d.delta_from_first >= RATE_MIN_INTERVAL {
            let span = d
                .delta_from_first
                .max(d.last_rate_completion.saturating_sub(d.rate_window_start));
            let rate = d.rate_sectors * 1_000_000_000 / span.0.max(1);
            let mostly_random = d.rate_seq_samples * 4 < d.rate_samples * 3;
            if !(mostly_random && rate <= d.peak_rate || rate > RATE_MAX) {
                let weight = 9 * d.rate_seq_samples as u64 / d.rate_samples as u64;
                let divisor = 10 - weight;
                d.peak_rate = (d.peak_rate * (divisor - 1) / divisor + rate / divisor).max(1);
                d.rate_measured = true;
                self.stats.peak_rate_updates += 1;
            }
        }
        self.dev.reset_rate_window(next, now);
    }

    /// A request came back from the device: internal queueing detection, injection limit
    /// (`bfq_update_hw_tag`, `bfq_update_inject_limit`).
    pub(in crate::bfq) fn note_completion(&mut self, info: &RqInfo, now: Nanos) {
        // A window limited by idling on a queue with few requests says nothing of the
        // device's queueing, and is not sampled.
        let idling_limited = self.in_service.is_some_and(|id| {
            let q = self.qr(id);
            Self::has_short_ttime(q)
                && q.dispatched + (q.sorted.len() as u32) < HW_QUEUE_THRESHOLD
                && self.dev.rq_in_driver < HW_QUEUE_THRESHOLD
        });
        let d = &mut self.dev;
        d.max_rq_in_driver = d.max_rq_in_driver.max(d.rq_in_driver);
        // Once queueing is seen it is never unseen (`if (bfqd->hw_tag == 1) return;`), and
        // from then on the largest number ever in flight (which caps the injection limit)
        // is no longer reset. A verdict comes on the 33rd valid sample
        // (`hw_tag_samples++ < BFQ_HW_QUEUE_SAMPLES`).
        if d.hw_tag != Some(true)
            && d.rq_in_driver + self.nr_queued > HW_QUEUE_THRESHOLD
            && !idling_limited
        {
            let seen = d.hw_tag_samples;
            d.hw_tag_samples += 1;
            if seen >= HW_QUEUE_SAMPLES {
                d.hw_tag = Some(d.max_rq_in_driver > HW_QUEUE_THRESHOLD);
                d.hw_tag_samples = 0;
                d.max_rq_in_driver = 0;
            }
        }
        self.dev.rq_in_driver = self.dev.rq_in_driver.saturating_sub(1);
        // `bfq_completed_request`: a shared queue is no waker candidate ("a false waker
        // will unjustly steal bandwidth to its supposedly woken queue"): its completion
        // clears the last completed queue rather than becoming it.
        let shared = self.queues[info.queue as usize]
            .as_ref()
            .is_some_and(|q| q.is_coop());
        self.last_completion = (!shared).then_some((info.queue, now));
        // A completion so late that the device served under 1/1024 sector per microsecond
        // (about 977 sectors/s) ends the rate window at the previous event
        // (`bfq_completed_request`).
        let d = &self.dev;
        let delta_us = now.saturating_sub(d.last_rate_completion).0 / 1000;
        // (max_size << 16) / delta_us < 1 << 6, without the division.
        if delta_us > MIN_TT.0 / 1000 && d.last_rq_max_size << 10 < delta_us {
            self.update_rate_reset(None, now);
        }
        self.dev.last_rate_completion = now;
    }
}
