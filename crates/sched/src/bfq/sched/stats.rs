//! What BFQ counts, typed (`BfqStats`, `BfqCounters`), for reports and `--dump-sched`.

/// BFQ's statistics (`Bfq::typed_stats`): its counters and the device estimates they led to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BfqStats {
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
    pub dispatched: u64,
    pub expired_budget: u64,
    pub expired_timeout: u64,
    pub expired_too_idle: u64,
    pub expired_empty: u64,
    pub preempted: u64,
    pub idles: u64,
    pub idle_class_served: u64,
    pub injected: u64,
    pub wr_interactive: u64,
    pub wr_soft_rt: u64,
    pub wr_ended: u64,
    /// Soft real-time raising that went back to the interactive raising it interrupted.
    pub wr_switched_back: u64,
    /// Busy asynchronous queues raised after a pause in their arrivals.
    pub wr_async: u64,
    /// Queue merges (all), and those of them that were stable merges.
    pub queue_merges: u64,
    pub stable_merges: u64,
    /// Queue merges that sent an issuer to a queue of a higher weight than its own (it
    /// "inherits" that weight, in the words of "block, bfq: do not merge queues on flash
    /// storage with queueing"), and to one of a lower weight (its own is lost while it is
    /// there); ours, not the kernel's. Weights as set by I/O priority, before raising.
    pub merges_into_heavier: u64,
    pub merges_into_lighter: u64,
    /// Merges into a queue never merged into before (one that becomes shared: the merges
    /// the kernel's log names a pid for, not SHARED).
    pub shared_queues_made: u64,
    pub queue_splits: u64,
    pub charged_time: u64,
    pub peak_rate_updates: u64,
    pub wakers: u64,
    pub bio_merges: u64,
    pub rq_merges: u64,
}
