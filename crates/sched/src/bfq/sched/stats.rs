//! What BFQ counts, typed (`BfqStats`, `BfqCounters`), for reports and `--dump-sched`.

/// BFQ's statistics (`Bfq::typed_stats`): its counters and the device estimates they led to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BfqStats {
    /// Its event counters.
    #[serde(flatten)]
    pub counters: BfqCounters,
    /// The measured peak rate (`bfq_update_peak_rate`), sectors per second.
    pub peak_rate_sectors_per_s: u64,
    /// The budget cap in sectors (automatic from the peak rate unless set).
    pub max_budget: u64,
    /// The device queues commands and does not rotate (`nonrot_with_queueing`).
    pub nonrot_with_queueing: bool,
    /// Whether BFQ has seen the device queue commands (`hw_tag`: more than three in the
    /// driver within its samples); `None` until it has decided (the kernel's -1).
    pub hw_tag: Option<bool>,
}

impl BfqStats {
    /// The figures by name, for reports that handle any scheduler.
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("dispatched", c.dispatched),
            ("expired_budget", c.expired_budget),
            ("expired_timeout", c.expired_timeout),
            ("expired_too_idle", c.expired_too_idle),
            ("expired_empty", c.expired_empty),
            ("preempted", c.preempted),
            ("idles", c.idles),
            ("idle_class_served", c.idle_class_served),
            ("injected", c.injected),
            ("wr_interactive", c.wr_interactive),
            ("wr_soft_rt", c.wr_soft_rt),
            ("wr_ended", c.wr_ended),
            ("wr_switched_back", c.wr_switched_back),
            ("wr_async", c.wr_async),
            ("queue_merges", c.queue_merges),
            ("stable_merges", c.stable_merges),
            ("merges_into_heavier", c.merges_into_heavier),
            ("merges_into_lighter", c.merges_into_lighter),
            ("shared_queues_made", c.shared_queues_made),
            ("queue_splits", c.queue_splits),
            ("charged_time", c.charged_time),
            ("peak_rate_updates", c.peak_rate_updates),
            ("wakers", c.wakers),
            ("bio_merges", c.bio_merges),
            ("rq_merges", c.rq_merges),
            ("peak_rate_sectors_per_s", self.peak_rate_sectors_per_s),
            ("max_budget", self.max_budget),
            ("nonrot_with_queueing", self.nonrot_with_queueing as u64),
            ("hw_tag_decided", u64::from(self.hw_tag.is_some())),
            ("hw_tag", u64::from(self.hw_tag == Some(true))),
        ]
    }
}

/// BFQ's event counters (part of [`BfqStats`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BfqCounters {
    /// Requests dispatched.
    pub dispatched: u64,
    /// Turns that ended with the budget spent (`BFQQE_BUDGET_EXHAUSTED`).
    pub expired_budget: u64,
    /// Turns that ended at the budget timeout (`BFQQE_BUDGET_TIMEOUT`).
    pub expired_timeout: u64,
    /// Turns that ended after idling in vain (`BFQQE_TOO_IDLE`).
    pub expired_too_idle: u64,
    /// Turns that ended with nothing left to serve (`BFQQE_NO_MORE_REQUESTS`).
    pub expired_empty: u64,
    /// Turns that ended because another queue preempted (`BFQQE_PREEMPTED`).
    pub preempted: u64,
    /// Idle windows armed for a queue that ran dry (`bfq_arm_slice_timer`).
    pub idles: u64,
    /// Turns given to the idle class because it had waited `BFQ_CL_IDLE_TIMEOUT`.
    pub idle_class_served: u64,
    /// Requests dispatched from another queue while the one in service was idled for.
    pub injected: u64,
    /// Interactive raisings started.
    pub wr_interactive: u64,
    /// Soft real-time raisings started.
    pub wr_soft_rt: u64,
    /// Raisings that ended.
    pub wr_ended: u64,
    /// Soft real-time raising that went back to the interactive raising it interrupted.
    pub wr_switched_back: u64,
    /// Busy asynchronous queues raised after a pause in their arrivals.
    pub wr_async: u64,
    /// Queue merges (all), and those of them that were stable merges.
    pub queue_merges: u64,
    /// Of the queue merges, the stable ones.
    pub stable_merges: u64,
    /// Queue merges that sent an issuer to a queue of a higher weight than its own (it
    /// "inherits" that weight, in the words of "block, bfq: do not merge queues on flash
    /// storage with queueing"), and to one of a lower weight (its own is lost while it is
    /// there); ours, not the kernel's. Weights as set by I/O priority, before raising.
    pub merges_into_heavier: u64,
    /// See `merges_into_heavier`.
    pub merges_into_lighter: u64,
    /// Merges into a queue never merged into before (one that becomes shared: the merges
    /// the kernel's log names a pid for, not SHARED).
    pub shared_queues_made: u64,
    /// Issuers split off a shared queue that turned seeky.
    pub queue_splits: u64,
    /// Turns charged by time rather than by sectors (`bfq_bfqq_charge_time`).
    pub charged_time: u64,
    /// Peak-rate estimates updated (`bfq_update_peak_rate`).
    pub peak_rate_updates: u64,
    /// Wakers confirmed (`bfq_check_waker`: three detections).
    pub wakers: u64,
    /// Bios merged into queued requests.
    pub bio_merges: u64,
    /// Requests merged into queued requests.
    pub rq_merges: u64,
}
