//! BFQ's queues and its elevator operations (`block/bfq-iosched.c`): what a request does
//! from insertion to completion. The decisions live next door: budgets, idling, weight
//! raising, injection and device estimates in `policy`, cooperating queues in
//! `merge`, the hierarchy in [`super::groups`], the fair-queueing engine in
//! [`super::engine`].
//!
//! - Each issuer's synchronous requests go to a queue of its own; asynchronous ones share a
//!   queue per group and I/O priority (class and level), as BFQ's `async_bfqq`.
//! - Classes are strict: RT before BE before IDLE, except that IDLE is served at the first
//!   selection after it has waited 200 ms (`BFQ_CL_IDLE_TIMEOUT`), so it never starves; an
//!   IDLE queue in service gets one request per turn while another queue is busy.
//! - The queue in service keeps the device until its budget (sectors) is used, its budget
//!   timeout (`timeout_sync`) passes, it runs dry (after idling, when idling pays), or a
//!   weight-raised or higher-class queue preempts it.
//! - Within a queue: a request past its FIFO deadline first, else the next one ahead of the
//!   head position, or one behind it within `back_seek_max` when that is, weighted by
//!   `back_seek_penalty`, closer.

use super::groups::Groups;
use mqblk_core::op_is_sync as is_sync;
use mqblk_core::{
    merge, Bio, BioMerge, Blkcg, Elevator, ElevatorInit, ElevatorType, ElvCost, ElvCtx,
    ElvFeatures, ElvRq, HctxIdx, HctxQueued, IoPrioClass, LockScope, Nanos, NoMerges, ReqFlags,
    ReqOp, RqId, TunableAlias, TunableDesc, Tunables,
};
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

pub(super) const T_SLICE_IDLE_US: usize = 0;
pub(super) const T_TIMEOUT_SYNC: usize = 1;
pub(super) const T_MAX_BUDGET: usize = 2;
pub(super) const T_FIFO_SYNC: usize = 3;
pub(super) const T_FIFO_ASYNC: usize = 4;
pub(super) const T_BACK_SEEK_MAX: usize = 5;
pub(super) const T_BACK_SEEK_PENALTY: usize = 6;
pub(super) const T_STRICT: usize = 7;
pub(super) const T_LOW_LATENCY: usize = 8;
pub(super) const T_QUEUE_MERGING: usize = 9;
pub(super) const T_STABLE_MERGING: usize = 10;
pub(super) const T_HAS_WORK_BUSY: usize = 11;
pub(super) const T_ELEVATOR_QUEUED: usize = 12;
pub(super) const T_TAGS_BY_WEIGHT: usize = 13;
pub(super) const T_INJECT_WOKEN: usize = 14;

// The ranges are the kernel's store clamps (`STORE_FUNCTION`, `USEC_STORE_FUNCTION`,
// `bfq_timeout_sync_store`, `bfq_max_budget_store` in bfq-iosched.c): every value it keeps
// as given is taken; what it would clamp is refused in one line.
static TUNABLES: [TunableDesc; 15] = [
    TunableDesc {
        name: "slice_idle_us",
        unit: "us",
        default: 8000,
        min: 0,
        max: u32::MAX as i64,
        help: "how long a synchronous queue that ran dry is waited for (slice_idle in ms)",
    },
    TunableDesc {
        name: "timeout_sync",
        unit: "ms",
        default: 125,
        min: 1,
        max: i32::MAX as i64,
        help: "budget timeout: the longest a queue keeps the device per turn",
    },
    TunableDesc {
        name: "max_budget",
        unit: "sectors",
        default: 0,
        min: 0,
        max: i32::MAX as i64,
        help: "largest budget; 0 = automatic: what the estimated peak rate serves in timeout_sync",
    },
    TunableDesc {
        name: "fifo_expire_sync",
        unit: "ms",
        default: 125,
        min: 1,
        max: i32::MAX as i64,
        help: "a synchronous request older than this is served first",
    },
    TunableDesc {
        name: "fifo_expire_async",
        unit: "ms",
        default: 250,
        min: 1,
        max: i32::MAX as i64,
        help: "an asynchronous request older than this is served first",
    },
    TunableDesc {
        name: "back_seek_max",
        unit: "KiB",
        default: 16384,
        min: 0,
        max: i32::MAX as i64,
        help: "farthest a backward seek may go",
    },
    TunableDesc {
        name: "back_seek_penalty",
        unit: "factor",
        default: 2,
        min: 1,
        max: i32::MAX as i64,
        help: "how much farther a backward seek counts than a forward one",
    },
    TunableDesc {
        name: "strict_guarantees",
        unit: "bool",
        default: 0,
        min: 0,
        max: 1,
        help: "idle on every queue that runs dry and never inject: guarantees before throughput",
    },
    TunableDesc {
        name: "low_latency",
        unit: "bool",
        default: 1,
        min: 0,
        max: 1,
        help: "raise the weight of interactive and soft real-time queues; 0 ends all raising",
    },
    // Not a kernel attribute: the kernel decides queue merging by itself (auto). The other
    // two settings exist to measure what seed 004 changed: 2 merges on every device, as the
    // kernel did before it, 0 never merges.
    TunableDesc {
        name: "queue_merging",
        unit: "mode",
        default: 1,
        min: 0,
        max: 2,
        help: "merge cooperating queues: 0 never, 1 auto (not on non-rotational devices with queueing, seed 004), 2 always",
    },
    // Not a kernel attribute either: stable merging came with Linux 5.13 ("block, bfq: merge
    // bursts of newly-created queues"); 0 runs BFQ as kernels before it, as seed 004 did.
    TunableDesc {
        name: "stable_merging",
        unit: "bool",
        default: 1,
        min: 0,
        max: 1,
        help: "merge a new queue with the one its group made just before it (bfq_do_or_sched_stable_merge); 0 as kernels before 5.13",
    },
    // Not a kernel attribute: until "block, bfq: make bfq_has_work() more accurate" (Linux
    // 5.19) `bfq_has_work` said yes while any queue was busy, the in-service queue BFQ idles
    // on included, so every queue run during an idle slice found work, got none, and had
    // every hardware queue run again 3 ms later (seed 000's kernel, 5.10).
    TunableDesc {
        name: "has_work_busy",
        unit: "bool",
        default: 0,
        min: 0,
        max: 1,
        help: "has_work is true while any queue is busy, even one idled on with nothing queued; 1 as kernels before 5.19",
    },
    // Not a kernel attribute: Linux 5.10 only (see `HctxQueued`).
    TunableDesc {
        name: "elevator_queued",
        unit: "bool",
        default: 0,
        min: 0,
        max: 1,
        help: "has_work is false on a hardware queue with no request inserted through it and not yet finished; 1 as Linux 5.10",
    },
    // Not a kernel attribute: "bfq: Limit number of requests consumed by each cgroup"
    // (`bfqq_request_over_limit`) came with Linux 5.16; 0 runs BFQ as kernels before it,
    // such as the seeds' (5.2 and 5.10).
    TunableDesc {
        name: "tags_by_weight",
        unit: "bool",
        default: 1,
        min: 0,
        max: 1,
        help: "a queue or cgroup holding its weight's share of the scheduler tags gets one tag at a time (bfqq_request_over_limit); 0 as kernels before 5.16",
    },
    // Not a kernel attribute: "block, bfq: always inject I/O of queues blocked by wakers"
    // came with Linux 5.13; 0 runs BFQ as kernels before it, such as the seeds' (5.2, 5.10).
    TunableDesc {
        name: "inject_woken",
        unit: "bool",
        default: 1,
        min: 0,
        max: 1,
        help: "while idling for a queue, inject the I/O of a queue it wakes, whatever the injection limit; 0 as kernels before 5.13",
    },
];

/// `slice_idle` is the same variable as `slice_idle_us`, in milliseconds.
static ALIASES: [TunableAlias; 1] = [TunableAlias {
    name: "slice_idle",
    target: "slice_idle_us",
    unit: "ms",
    factor: 1000,
}];

/// The IDLE class is served at least this often (`BFQ_CL_IDLE_TIMEOUT`, HZ / 5).
const IDLE_CLASS_TIMEOUT: Nanos = Nanos::from_millis(200);
/// An idle queue whose issuer sent nothing for this long is freed.
const RETIRE_AFTER: Nanos = Nanos::from_secs(10);

/// `bfq_ioprio_to_weight`: ten per level, level 0 weighs 80 and the default level 4 weighs 40.
pub fn ioprio_to_weight(level: u8) -> u32 {
    (8 - level.min(7) as u32) * 10
}

fn class_index(c: IoPrioClass) -> usize {
    match c {
        IoPrioClass::Rt => 0,
        IoPrioClass::Idle => 2,
        _ => 1,
    }
}

/// A multiply-rotate hasher for the small integer keys of `by_key` (the std SipHash showed
/// up in profiles; these keys come from the submitter, not from the network).
#[derive(Default, Clone, Copy)]
pub(super) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_isize(&mut self, v: isize) {
        self.write_u64(v as u64);
    }
}

type KeyMap = HashMap<Key, u32, std::hash::BuildHasherDefault<KeyHasher>>;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Key {
    Sync(u32),
    /// Group slot, class, level.
    Async(u32, u8, u8),
}

/// Why a queue's turn ended (`enum bfqq_expiration`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Expire {
    /// Waited `slice_idle` for it in vain (`BFQQE_TOO_IDLE`).
    TooIdle,
    BudgetTimeout,
    BudgetExhausted,
    /// Ran dry and not worth waiting for (`BFQQE_NO_MORE_REQUESTS`).
    NoMoreRequests,
    Preempted,
}

/// Weight raising of one queue (`wr_coeff`, `wr_cur_max_time`, `last_wr_start_finish`).
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct Wr {
    pub coeff: u32,
    pub start: Nanos,
    pub max_time: Nanos,
    /// Sectors served while raised (interactive raising ends past `MAX_SERVICE_FROM_WR`).
    pub service: u64,
    pub soft_rt: bool,
    /// Soft real-time raising that began during an interactive one: when that began
    /// (`wr_start_at_switch_to_srt`), to go back to it if it is not over.
    pub interactive_start: Option<Nanos>,
}

/// Think time: how long the issuer takes to send its next request once its last one
/// completed (`struct bfq_ttime`), in fixed point as the kernel keeps it.
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct TTime {
    pub last_end: Nanos,
    pub samples: u64,
    pub total: u64,
    pub mean: u64,
}

#[derive(Debug)]
pub(super) struct Bq {
    pub key: Key,
    pub group: u32,
    pub class: usize,
    /// The I/O priority level it was made with (names its process's asynchronous queue).
    pub level: u8,
    /// The weight from the I/O priority; the entity's weight is this times `wr.coeff`.
    /// A shared queue keeps the weight of the queue the others merged into (see `merge`).
    pub base_weight: u32,
    pub sync: bool,
    /// Queued requests by (sector, id), and in arrival order with their FIFO deadlines.
    pub sorted: BTreeSet<(u64, u32)>,
    pub fifo: VecDeque<(u32, Nanos)>,
    /// The request it serves next (`bfqq->next_rq`): chosen among the new one and this one
    /// at each arrival (`bfq_choose_req`), and among the neighbours of the one dispatched,
    /// or the FIFO's expired head, at each dispatch (`bfq_find_next_rq`). `None` exactly
    /// when nothing is queued.
    pub next_rq: Option<u32>,
    /// The FIFO was looked at in this turn (`BFQQF_fifo_expire`): `bfq_check_fifo` serves
    /// at most one expired request a turn, looked for at the turn's first dispatch.
    pub fifo_checked: bool,
    /// Dispatched and not yet completed.
    pub dispatched: u32,
    /// Its requests from insertion to finish (`entity.allocated`, `bfqq_request_allocated`),
    /// which `bfqq_request_over_limit` holds against its share of the scheduler tags.
    pub allocated: u32,
    /// The budget of its current or next turn (`entity.budget`), and the feedback value
    /// that sets it (`bfqq->max_budget`, `__bfq_bfqq_recalc_budget`).
    pub budget: u64,
    pub max_budget: u64,
    /// Its requests waiting on `bfqd->dispatch`; they keep it alive (the kernel's
    /// per-request reference).
    pub parked: u32,
    /// In the service tree (backlogged and not in service).
    pub in_tree: bool,
    /// [`State::active_seq`] when it last went into its tree.
    pub active_seq: u64,
    pub created: Nanos,
    pub wr: Wr,
    pub ttime: TTime,
    /// `has_short_ttime`: set from the think time at each arrival
    /// (`bfq_update_has_short_ttime`), held as resumed for `bfq_wr_min_idle_time` after a
    /// split.
    pub short_ttime: bool,
    /// One bit per recent request: was it far from the previous one (`seek_history`).
    pub seek_history: u32,
    /// End of the last request inserted (`last_request_pos`).
    pub last_rq_end: u64,
    /// When this queue last stopped being served or became idle.
    pub last_idle: Nanos,
    /// When it last became backlogged, and the service since (soft real-time detection).
    pub last_backlogged: Nanos,
    pub service_from_backlogged: u64,
    /// Its first service since it last became backlogged (`first_IO_time`, set in
    /// `bfq_bfqq_served`): merging is tried only in the `bfq_merge_time_limit` after it.
    pub first_io_time: Nanos,
    pub soft_rt_next_start: Nanos,
    /// `soft_rt_next_start` is due at the completion of its last request in flight
    /// (`bfq_bfqq_softrt_update`).
    pub softrt_update: bool,
    /// The queue whose completions this one's requests follow (`waker_bfqq`), and the
    /// candidate being confirmed.
    pub waker: Option<u32>,
    /// When it last went to the head of its waker's `woken_list`: its waker was set, or it
    /// became busy (`bfq_add_bfqq_busy`).
    pub woken_at: Nanos,
    pub tentative_waker: Option<u32>,
    pub waker_hits: u32,
    pub waker_since: Nanos,
    /// Sectors it received by injection, charged at the start of its next turn.
    pub injected: u64,
    pub inject_limit: u32,
    pub last_serv_time: u64,
    pub decrease_time: Nanos,
    /// The weight it is counted under in the asymmetry bookkeeping, while it has requests
    /// queued or in flight and is not raised; and whether its group counts it as pending.
    pub counted: Option<u32>,
    pub pending: bool,
    /// Busy at least 80% of the recent time (`IO_bound`, `bfq_update_io_intensity`): only
    /// such a sequential queue is worth idling for on a device that queues. The window
    /// starts at `io_start` and `idle` is its idle time, both halved past 200 ms.
    pub io_bound: bool,
    pub io_start: Nanos,
    pub idle: Nanos,
    /// Issuers whose synchronous requests this queue takes (more than one once merged).
    pub issuers: Vec<u32>,
    /// Turned seeky while shared: its issuers get queues of their own again.
    pub split_coop: bool,
    /// Some queue was merged into it: the kernel's `bfqq->pid = -1` (logged "SHARED"
    /// from then on, whoever is left in it), set in `bfq_merge_bfqqs`.
    pub shared: bool,
    /// Key in the group's position tree.
    pub pos_key: Option<u64>,
    /// Never busy yet: counts as interactive when it first is.
    pub fresh: bool,
    /// Idle and kept since then for its issuer (see `maybe_free`).
    pub retire_at: Option<Nanos>,
    /// Created in a burst of many queues (a `git grep`, a boot): not raised, not idled for.
    pub in_large_burst: bool,
    /// A stable merge into this queue is scheduled for later (`stable_merge_bfqq`).
    pub stable_merge: Option<u32>,
    /// The queue this one's issuers are to move to at their next request (`new_bfqq`,
    /// set by `bfq_setup_merge`).
    pub new_q: Option<u32>,
    /// When it was made for an issuer leaving a shared queue (`split_time`).
    pub split_time: Nanos,
    /// For a queue not raised, its last request arrival or expiry (`last_wr_start_finish`):
    /// an async queue still busy whose next request comes later than
    /// `bfq_wr_min_inter_arr_async` after it is raised.
    pub last_wr_start_finish: Nanos,
    /// `non_blocking_wait_rq`: a turn of it ended with it empty, neither timed out nor out
    /// of budget; it may come back in time to resume that turn
    /// (`bfq_bfqq_update_budg_for_activation`). Cleared only by an arrival that does not
    /// resume a turn: one that does leaves it set.
    pub non_blocking_wait_rq: bool,
    /// What a resumed turn would get: `entity->budget - entity->service` as the kernel
    /// leaves them (the sectors left of the turn that set the flag; the whole budget after a
    /// turn ended timed out or spent, which zeroes the service; none once the queue was
    /// emptied out of service).
    pub hole_left: u64,
}

impl Bq {
    pub fn weight(&self) -> u32 {
        self.base_weight * self.wr.coeff.max(1)
    }
    pub fn is_coop(&self) -> bool {
        self.issuers.len() > 1
    }
    /// Made by a split (`split_time` set) no more than `window` before `now`.
    pub fn split_within(&self, now: Nanos, window: Nanos) -> bool {
        self.split_time > Nanos::ZERO && now <= self.split_time.saturating_add(window)
    }
    /// `w` becomes its waker (`waker_bfqq`), any tentative one is dropped, and it goes to
    /// the head of `w`'s `woken_list` (`hlist_add_head(&bfqq->woken_list_node, ...)`, as
    /// `bfq_check_waker`, `bfq_init_rq` after a split and `bfq_merge_bfqqs` do).
    pub fn set_waker(&mut self, w: u32, now: Nanos) {
        self.waker = Some(w);
        self.tentative_waker = None;
        self.woken_at = now;
    }
}

/// An issuer's queue state kept while it shares a queue (`bfq_bfqq_save_state`).
#[derive(Copy, Clone, Debug)]
pub(super) struct Saved {
    pub wr: Wr,
    pub ttime: TTime,
    pub short_ttime: bool,
    /// The injection state (`saved_last_serv_time_ns`, `saved_inject_limit`,
    /// `saved_decrease_time_jif`).
    pub last_serv_time: u64,
    pub inject_limit: u32,
    pub decrease_time: Nanos,
    pub io_bound: bool,
    pub io_start: Nanos,
    pub idle: Nanos,
    pub in_large_burst: bool,
}

#[derive(Copy, Clone, Debug, Default)]
pub(super) struct RqInfo {
    pub queue: u32,
    pub sector: u64,
    pub end: u64,
    pub queued: bool,
    pub owned: bool,
    pub injected: bool,
    /// On `bfqd->dispatch`, inserted at the head.
    pub parked: bool,
    /// Its issuer (the kernel's `bfq_io_cq`), and whether it counts among the issuer's
    /// requests (`bic->requests`: from insertion to completion).
    pub issuer: u32,
    pub counted: bool,
    /// `REQ_META`: preferred as a queue's next request (`bfq_choose_req`).
    pub meta: bool,
}

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

/// Device estimates (`peak_rate`, `hw_tag`).
pub(super) struct Device {
    pub rotational: bool,
    /// Requests dispatched and not completed, all queues.
    pub rq_in_driver: u32,
    pub max_rq_in_driver: u32,
    pub hw_tag_samples: u32,
    /// Queues commands internally (more than 3 in flight seen); unknown until sampled,
    /// and assumed until then, as the kernel does.
    pub hw_tag: Option<bool>,
    /// Peak rate in sectors per second: 2/3 of the reference rate until measured.
    pub peak_rate: u64,
    /// A window has updated the peak rate (the automatic `max_budget` follows it from then).
    pub rate_measured: bool,
    /// The window: first dispatch, sectors, samples and back-to-back sequential samples,
    /// its length at the last dispatch, the largest request of the last 32
    /// (`first_dispatch`, `tot_sectors_dispatched`, `peak_rate_samples`,
    /// `sequential_samples`, `delta_from_first`, `last_rq_max_size`).
    pub rate_window_start: Nanos,
    pub rate_sectors: u64,
    pub rate_samples: u32,
    pub rate_seq_samples: u32,
    pub delta_from_first: Nanos,
    pub last_rq_max_size: u64,
    /// `last_position` and `last_dispatch`.
    pub last_dispatch_end: u64,
    /// Where the in-service queue's last dispatch ended (`in_serv_last_pos`): a request
    /// this close may join that queue (`bfq_setup_cooperator`).
    pub in_serv_last_pos: u64,
    pub last_dispatch: Nanos,
    /// The last completion (`bfqd->last_completion`).
    pub last_rate_completion: Nanos,
}

impl Device {
    /// `bfq_reset_rate_computation`: a new window from the dispatch of `next` sectors now,
    /// or an empty one filled by the next dispatch.
    pub fn reset_rate_window(&mut self, next: Option<u64>, now: Nanos) {
        match next {
            Some(sectors) => {
                // `last_dispatch` is the caller's (`update_peak_rate` sets it for every
                // dispatch).
                self.rate_window_start = now;
                self.rate_samples = 1;
                self.rate_seq_samples = 0;
                self.rate_sectors = sectors;
                self.last_rq_max_size = sectors;
                self.delta_from_first = Nanos::ZERO;
            }
            None => self.rate_samples = 0,
        }
    }

    pub fn nonrot_with_queueing(&self) -> bool {
        !self.rotational && self.hw_tag.unwrap_or(true)
    }
}

/// Pending queues per weight, busy queues per class, raised busy queues: what decides
/// whether the scenario is asymmetric (`weights_tree`, `busy_queues`, `wr_busy_queues`).
#[derive(Default)]
pub(super) struct Load {
    /// (weight, queues) pairs; there are few distinct weights, so a list beats a tree.
    pub weights: Vec<(u32, u32)>,
    pub busy_classes: [u32; 3],
    pub wr_busy: u32,
}

/// The measurement of the in-service queue's service time, for its injection limit
/// (`last_empty_occupied_ns`, `wait_dispatch`, `waited_rq`, `rqs_injected`).
#[derive(Default)]
pub(super) struct Inject {
    /// When the measured request arrived.
    pub occupied_at: Nanos,
    /// The next request the in-service queue dispatches is the one to time.
    pub wait_dispatch: bool,
    /// The request being timed, to its completion.
    pub waited_rq: Option<u32>,
    /// Requests were injected while it was timed.
    pub injected: bool,
}

/// Queues created close together (`burst_list`, `burst_size`, `large_burst`,
/// `last_ins_in_burst`, `burst_parent_entity`).
#[derive(Default)]
pub(super) struct Burst {
    pub list: Vec<u32>,
    pub size: u32,
    pub last_ins: Nanos,
    pub large: bool,
    /// The group the burst's queues belong to.
    pub group: Option<u32>,
}

pub(super) struct State {
    pub queues: Vec<Option<Bq>>,
    free_slots: Vec<u32>,
    /// Insertions into the active trees so far: each queue keeps the count at its last one,
    /// which orders the kernel's `active_list` (`bfq_active_insert` puts a queue at its
    /// head), the order injection scans candidates in.
    pub active_seq: u64,
    pub by_key: KeyMap,
    pub rqs: Vec<RqInfo>,
    pub groups: Groups,
    pub in_service: Option<u32>,
    /// Service the in-service queue received this turn.
    pub service: u64,
    pub slice_start: Nanos,
    /// When the turn in service times out (`bfqq->budget_timeout`).
    pub budget_timeout: Nanos,
    /// When the last wait for the in-service queue's next request began
    /// (`last_idling_start`).
    pub last_idling_start: Nanos,
    pub idle_until: Option<Nanos>,
    pub last_idle_class: Nanos,
    /// The IDLE class has waited its 200 ms: serve it at the next selection.
    pub idle_class_due: bool,
    pub nr_queued: u32,
    pub restart: bool,
    pub dev: Device,
    /// What decides whether the scenario is asymmetric.
    pub load: Load,
    /// Injection measurements of the in-service queue.
    pub inject: Inject,
    /// Queue merging is on for this device (tunable and `nonrot_with_queueing`).
    pub merging_on: bool,
    /// What merged-away queues were like, by issuer, for when they split again
    /// (`bfq_io_cq`'s `saved_*` fields).
    pub saved: HashMap<u32, Saved>,
    /// Issuers whose queue joined, or was joined by, another in a stable merge
    /// (`bfq_iocq_bfqq_data.stably_merged`, a process's, not a queue's): their I/O is never
    /// split off a shared queue, and may start a raising there. An issuer that joined the
    /// same shared queue later as a cooperator is not among them.
    pub stably_merged: HashSet<u32>,
    /// The queue of the last completed request, and when (waker detection).
    pub last_completion: Option<(u32, Nanos)>,
    /// The one-hit merge cache (`q->last_merge`): the request last merged into, or the first
    /// inserted while it was empty; cleared when that request leaves its queue.
    pub last_merge: Option<u32>,
    /// Requests inserted at the head (`bfqd->dispatch`), served before any queue.
    pub dispatch: VecDeque<u32>,
    /// Requests of each issuer from insertion to completion (`bic->requests`).
    pub bic_requests: HashMap<u32, u32, std::hash::BuildHasherDefault<KeyHasher>>,
    /// A decaying count of turns handed out (`budgets_assigned`): until it reaches
    /// `bfq_stats_min_budgets` every turn gets the default maximum budget.
    pub budgets_assigned: u32,
    /// Queues created close together.
    pub burst: Burst,
    /// Idle queues kept for their issuers, oldest first.
    retiring: VecDeque<(u32, Nanos)>,
    /// The time of the operation in progress.
    pub now: Nanos,
    pub stats: BfqCounters,
}

pub struct Bfq {
    pub(super) st: Mutex<State>,
    /// `nr_queued` and `wr_busy`, readable without the lock (`has_work`, `limit_depth`),
    /// published at the end of every operation that holds it.
    queued: AtomicU32,
    /// Busy queues (`bfq_tot_busy_queues`), for `has_work_busy`.
    busy: AtomicU32,
    /// Busy queues and entities on the idle trees: at most one, and a queue alone holds
    /// every share of the tags there is (`limit_depth` skips the lock). Only whether it is
    /// above one matters, so the idle trees are counted only with at most one queue busy.
    on_trees: AtomicU32,
    /// Requests inserted per hardware queue and not yet finished (Linux 5.10), and per
    /// request whether it is counted there: outside the lock, so the free of a request
    /// (`finish_request`) needs no lock.
    hctx_queued: HctxQueued,
    hctx_counted: Box<[AtomicBool]>,
    raised: AtomicU32,
    pub(super) tunables: Tunables,
    nr_hw: u16,
    nr_requests: AtomicU32,
    blkcg: Arc<Blkcg>,
}

/// The tunables, read once per operation.
pub(super) struct Knobs {
    pub slice_idle: Nanos,
    pub timeout: Nanos,
    pub user_max_budget: u64,
    pub fifo_sync: Nanos,
    pub fifo_async: Nanos,
    pub back_max: u64,
    pub back_penalty: u64,
    pub strict: bool,
    pub low_latency: bool,
    pub merging: u8,
    pub stable_merging: bool,
    pub inject_woken: bool,
}

impl Bfq {
    /// The scheduler's statistics.
    pub fn typed_stats(&self) -> BfqStats {
        let st = self.st.lock();
        BfqStats {
            counters: st.stats,
            peak_rate_sectors_per_s: st.dev.peak_rate,
            max_budget: st.max_budget(&self.knobs()),
            nonrot_with_queueing: st.dev.nonrot_with_queueing(),
            hw_tag: st.dev.hw_tag,
        }
    }

    pub fn new(init: &ElevatorInit) -> Bfq {
        Bfq {
            st: Mutex::new(State {
                queues: Vec::new(),
                free_slots: Vec::new(),
                active_seq: 0,
                by_key: KeyMap::default(),
                rqs: vec![RqInfo::default(); init.nr_rq_ids as usize],
                groups: Groups::new(),
                in_service: None,
                service: 0,
                slice_start: Nanos::ZERO,
                budget_timeout: Nanos::MAX,
                last_idling_start: Nanos::ZERO,
                idle_until: None,
                last_idle_class: Nanos::ZERO,
                idle_class_due: false,
                nr_queued: 0,
                restart: false,
                dev: Device {
                    rotational: init.rotational,
                    rq_in_driver: 0,
                    max_rq_in_driver: 0,
                    hw_tag_samples: 0,
                    hw_tag: None,
                    peak_rate: super::policy::initial_peak_rate(init.rotational),
                    rate_measured: false,
                    rate_window_start: Nanos::ZERO,
                    rate_sectors: 0,
                    rate_samples: 0,
                    rate_seq_samples: 0,
                    delta_from_first: Nanos::ZERO,
                    last_rq_max_size: 0,
                    last_dispatch_end: 0,
                    in_serv_last_pos: 0,
                    last_dispatch: Nanos::ZERO,
                    last_rate_completion: Nanos::ZERO,
                },
                load: Load::default(),
                inject: Inject::default(),
                merging_on: false,
                saved: HashMap::new(),
                stably_merged: HashSet::new(),
                last_completion: None,
                last_merge: None,
                dispatch: VecDeque::new(),
                bic_requests: HashMap::default(),
                budgets_assigned: 0,
                burst: Burst::default(),
                retiring: VecDeque::new(),
                now: Nanos::ZERO,
                stats: BfqCounters::default(),
            }),
            queued: AtomicU32::new(0),
            busy: AtomicU32::new(0),
            on_trees: AtomicU32::new(0),
            hctx_queued: HctxQueued::new(init.nr_hw_queues),
            // Sized for any depth `nr_requests` may later give (`depth_updated`).
            hctx_counted: (0..init.max_rq_ids.max(init.nr_rq_ids))
                .map(|_| AtomicBool::new(false))
                .collect(),
            raised: AtomicU32::new(0),
            tunables: Tunables::new("bfq", &TUNABLES).with_aliases(&ALIASES),
            nr_hw: init.nr_hw_queues,
            nr_requests: AtomicU32::new(init.nr_requests),
            blkcg: init.blkcg.clone(),
        }
    }

    /// `atomic_dec(&rq->mq_hctx->elevator_queued)` in `bfq_finish_requeue_request` (5.10),
    /// for a started request that finishes or is handed back.
    fn drop_hctx_count(&self, rq: &ElvRq) {
        if self.hctx_counted[rq.id.index()].swap(false, Ordering::AcqRel) {
            self.hctx_queued.dec(rq.hctx);
        }
    }

    /// Makes the lock-free mirrors of `st` current.
    fn publish(&self, st: &State) {
        self.queued
            .store(st.nr_queued + st.dispatch.len() as u32, Ordering::Release);
        let busy: u32 = st.load.busy_classes.iter().sum();
        self.busy.store(busy, Ordering::Release);
        // Counting the idle trees walks every group's: not while two queues are busy anyway.
        let idle = if busy > 1 {
            0
        } else {
            st.groups.idle_entities() as u32
        };
        self.on_trees.store(busy + idle, Ordering::Release);
        self.raised.store(st.load.wr_busy, Ordering::Release);
    }

    pub(super) fn knobs(&self) -> Knobs {
        let t = &self.tunables;
        let strict = t.get(T_STRICT) != 0;
        let mut slice_idle = Nanos::from_micros(t.get(T_SLICE_IDLE_US) as u64);
        if strict {
            // The kernel raises slice_idle to at least 8 ms with strict_guarantees.
            slice_idle = slice_idle.max(Nanos::from_millis(8));
        }
        Knobs {
            slice_idle,
            timeout: Nanos::from_millis(t.get(T_TIMEOUT_SYNC) as u64),
            user_max_budget: t.get(T_MAX_BUDGET) as u64,
            fifo_sync: Nanos::from_millis(t.get(T_FIFO_SYNC) as u64),
            fifo_async: Nanos::from_millis(t.get(T_FIFO_ASYNC) as u64),
            back_max: t.get(T_BACK_SEEK_MAX) as u64 * 2,
            back_penalty: t.get(T_BACK_SEEK_PENALTY) as u64,
            strict,
            low_latency: t.get(T_LOW_LATENCY) != 0,
            merging: t.get(T_QUEUE_MERGING) as u8,
            stable_merging: t.get(T_STABLE_MERGING) != 0,
            inject_woken: t.get(T_INJECT_WOKEN) != 0,
        }
    }
}

impl State {
    pub(super) fn q(&mut self, id: u32) -> &mut Bq {
        self.queues[id as usize].as_mut().expect("live queue")
    }

    pub(super) fn qr(&self, id: u32) -> &Bq {
        self.queues[id as usize].as_ref().expect("live queue")
    }

    pub(super) fn new_queue(
        &mut self,
        key: Key,
        group: u32,
        rq: &ElvRq,
        sync: bool,
        now: Nanos,
        k: &Knobs,
    ) -> u32 {
        let class = class_index(rq.ioprio.class());
        let q = Bq {
            key,
            group,
            class,
            level: rq.ioprio.level(),
            base_weight: ioprio_to_weight(rq.ioprio.level()),
            sync,
            sorted: BTreeSet::new(),
            fifo: VecDeque::new(),
            next_rq: None,
            fifo_checked: false,
            dispatched: 0,
            allocated: 0,
            // `bfq_init_bfqq`: two thirds of the device's largest budget.
            budget: 2 * self.max_budget(k) / 3,
            max_budget: 2 * self.max_budget(k) / 3,
            parked: 0,
            in_tree: false,
            active_seq: 0,
            created: now,
            wr: Wr::default(),
            // `bfq_init_bfqq`: "tentatively mark as has_short_ttime" a sync queue not of the
            // idle class.
            short_ttime: sync && class != 2,
            // `bfq_init_bfqq`: the last completion "now", so a new queue has not been idle.
            ttime: TTime {
                last_end: now,
                ..TTime::default()
            },
            seek_history: 0,
            last_rq_end: rq.sector,
            // A new queue counts as long idle: it may be raised as interactive.
            last_idle: Nanos::ZERO,
            last_backlogged: now,
            service_from_backlogged: 0,
            first_io_time: now,
            // `bfq_init_bfqq`: "has consumed no bandwidth so far".
            soft_rt_next_start: now,
            softrt_update: false,
            waker: None,
            woken_at: Nanos::ZERO,
            tentative_waker: None,
            waker_hits: 0,
            waker_since: Nanos::ZERO,
            injected: 0,
            inject_limit: 0,
            last_serv_time: 0,
            decrease_time: now,
            counted: None,
            pending: false,
            // `bfq_init_bfqq` marks a new queue I/O bound.
            io_bound: true,
            io_start: now,
            idle: Nanos::ZERO,
            issuers: match key {
                Key::Sync(i) => vec![i],
                Key::Async(..) => Vec::new(),
            },
            split_coop: false,
            shared: false,
            pos_key: None,
            fresh: true,
            retire_at: None,
            in_large_burst: false,
            stable_merge: None,
            new_q: None,
            split_time: Nanos::ZERO,
            last_wr_start_finish: now,
            non_blocking_wait_rq: false,
            hole_left: 0,
        };
        let id = match self.free_slots.pop() {
            Some(i) => {
                self.queues[i as usize] = Some(q);
                i
            }
            None => {
                self.queues.push(Some(q));
                self.queues.len() as u32 - 1
            }
        };
        self.by_key.insert(key, id);
        id
    }

    /// The queue a request of `rq`'s issuer goes to (`bfq_get_bfqq_handle_split`).
    fn queue_for(&mut self, rq: &ElvRq, blkcg: &Blkcg, now: Nanos, k: &Knobs) -> u32 {
        let sync = is_sync(rq.op, rq.cmd_flags);
        let group = self.groups.slot_of(blkcg, rq.group);
        let key = if sync {
            Key::Sync(rq.issuer)
        } else {
            Key::Async(
                group,
                class_index(rq.ioprio.class()) as u8,
                rq.ioprio.level(),
            )
        };
        if let Some(&id) = self.by_key.get(&key) {
            let q = self.qr(id);
            if !(q.split_coop && q.is_coop()) || self.stably_merged.contains(&rq.issuer) {
                return id;
            }
            // The shared queue turned seeky: this issuer leaves it for a queue of its own,
            // which resumes the state its old queue had when it was merged, and takes the
            // shared queue's waker, at the head of that waker's `woken_list` (`bfq_init_rq`).
            let waker = self.qr(id).waker;
            self.split_issuer(id, rq.issuer);
            let nq = self.new_queue(key, group, rq, sync, now, k);
            self.resume_state(nq, rq.issuer, now);
            if let Some(w) = waker.filter(|&w| w != nq) {
                self.q(nq).set_waker(w, now);
            }
            self.note_creation(nq, now);
            return nq;
        }
        let id = self.new_queue(key, group, rq, sync, now, k);
        let id = if sync && k.stable_merging && k.merging != 0 {
            self.stable_merge_on_create(id, rq.issuer, now, k)
        } else {
            id
        };
        // A queue that joined an older one for good is no new queue (`bfq_init_rq` handles
        // bursts for just-created queues only).
        if self.qr(id).fresh {
            self.note_creation(id, now);
        }
        id
    }

    /// A queue with nothing queued, in flight or in service is freed, or, while an issuer's
    /// key still leads to it, kept for `RETIRE_AFTER` in case the issuer comes back, as the
    /// kernel keeps a process's queues for as long as the process holds them (its
    /// `bfq_io_cq`). An issuer's state (think time, seekiness, weight raising) lives there.
    pub(super) fn maybe_free(&mut self, id: u32) {
        let Some(q) = self.queues[id as usize].as_ref() else {
            return; // already freed by an expiry on the same path
        };
        if q.retire_at.is_some()
            || !(q.sorted.is_empty()
                && q.dispatched == 0
                && q.parked == 0
                && !q.in_tree
                && self.in_service != Some(id))
        {
            return;
        }
        let referenced = self.by_key.get(&q.key) == Some(&id)
            || q.issuers
                .iter()
                .any(|&i| self.by_key.get(&Key::Sync(i)) == Some(&id));
        if referenced {
            if q.retire_at.is_none() {
                let now = self.now;
                self.q(id).retire_at = Some(now);
                self.retiring.push_back((id, now));
            }
            return;
        }
        self.free_queue(id);
    }

    /// Frees queues kept idle for longer than `RETIRE_AFTER`.
    fn retire_idle(&mut self) {
        while let Some(&(id, since)) = self.retiring.front() {
            if self.now.saturating_sub(since) < RETIRE_AFTER {
                break;
            }
            self.retiring.pop_front();
            let still = self.queues[id as usize].as_ref().is_some_and(|q| {
                q.retire_at == Some(since)
                    && q.sorted.is_empty()
                    && q.dispatched == 0
                    && q.parked == 0
                    && !q.in_tree
            });
            if still && self.in_service != Some(id) {
                self.free_queue(id);
            }
        }
    }

    fn free_queue(&mut self, id: u32) {
        let q = self.qr(id);
        debug_assert!(q.counted.is_none() && !q.pending);
        let (key, group, class) = (q.key, q.group, q.class);
        let issuers = std::mem::take(&mut self.q(id).issuers);
        self.pos_remove(id);
        self.groups.tree(group, class).forget(id);
        if self.by_key.get(&key) == Some(&id) {
            self.by_key.remove(&key);
        }
        for i in issuers {
            if self.by_key.get(&Key::Sync(i)) == Some(&id) {
                self.by_key.remove(&Key::Sync(i));
                self.saved.remove(&i);
            }
        }
        // Ids are reused: nothing may keep pointing at this one.
        if self.groups.slots[group as usize].last_created == Some(id) {
            self.groups.slots[group as usize].last_created = None;
        }
        for q in self.queues.iter_mut().flatten() {
            if q.stable_merge == Some(id) {
                q.stable_merge = None;
            }
            if q.waker == Some(id) {
                q.waker = None;
            }
            if q.tentative_waker == Some(id) {
                q.tentative_waker = None;
            }
        }
        if self.last_completion.is_some_and(|(q, _)| q == id) {
            self.last_completion = None;
        }
        self.burst.list.retain(|&b| b != id);
        self.queues[id as usize] = None;
        self.free_slots.push(id);
    }

    /// Queue `id` becomes backlogged: into its group's tree; at its old place in virtual
    /// time when `backshift`, resuming a turn it left with budget when it ran dry
    /// (`__bfq_activate_entity` with `non_blocking_wait_rq`).
    pub(super) fn activate_at(&mut self, id: u32, backshift: bool) {
        self.active_seq += 1;
        let seq = self.active_seq;
        let q = self.q(id);
        debug_assert!(!q.in_tree);
        q.in_tree = true;
        q.active_seq = seq;
        let (group, class, weight, budget) = (q.group, q.class, q.weight(), q.budget);
        if q.wr.coeff > 1 {
            self.load.wr_busy += 1;
        }
        self.load.busy_classes[class] += 1;
        self.groups
            .activate(group, id, class, weight, budget, backshift);
    }

    /// Bookkeeping for a queue leaving the busy set (out of the tree, not in service).
    pub(super) fn became_idle(&mut self, id: u32, now: Nanos) {
        let q = self.q(id);
        q.last_idle = now;
        let (class, raised) = (q.class, q.wr.coeff > 1);
        self.load.busy_classes[class] -= 1;
        if raised {
            self.load.wr_busy -= 1;
        }
    }

    /// Ends the in-service queue's turn (`bfq_bfqq_expire`).
    pub(super) fn expire(&mut self, k: &Knobs, why: Expire, now: Nanos) {
        let Some(id) = self.in_service.take() else {
            return;
        };
        self.idle_until = None;
        // `bfq_bfqq_expire`: no service time is measured across turns.
        self.inject.injected = false;
        self.inject.wait_dispatch = false;
        self.inject.waited_rq = None;
        match why {
            Expire::TooIdle => self.stats.expired_too_idle += 1,
            Expire::BudgetTimeout => self.stats.expired_timeout += 1,
            Expire::BudgetExhausted => self.stats.expired_budget += 1,
            Expire::NoMoreRequests => self.stats.expired_empty += 1,
            Expire::Preempted => self.stats.preempted += 1,
        }
        // `bfq_bfqq_expire`: a queue not raised restarts its raising clock.
        if k.low_latency && self.qr(id).wr.coeff <= 1 {
            self.q(id).last_wr_start_finish = now;
        }
        // `__bfq_bfqq_expire`: a queue that ran dry leaves the tree, unless it was preempted
        // while idling for it is needed for its guarantees: then it stays busy, queued at
        // the place its turn's service gives it, and its next request is no new arrival
        // (it cannot preempt back for a service hole).
        let stays_busy = !self.qr(id).sorted.is_empty()
            || (why == Expire::Preempted && self.idling_needed_for_service_guarantees(id));
        let charged = self.charge_for_turn(id, why, now, k);
        // `bfq_bfqq_expire`: out of the tree, not out of budget or time, the queue is marked
        // `non_blocking_wait_rq` and what is left of the turn is kept for a prompt return
        // (`entity->budget` and `entity->service` as they are). Otherwise the turn's
        // service is zeroed and the flag left as it was: set by an earlier turn, it lets
        // the next prompt arrival resume with the whole budget (`bfq_bfqq_charge_time`
        // raised it to the time charged, if more). The budget of a queue with requests
        // left is then the next turn's, set below.
        let budget = self.qr(id).budget;
        let marks = !stays_busy && !matches!(why, Expire::BudgetTimeout | Expire::BudgetExhausted);
        self.recalc_budget(id, why, k);
        let q = self.q(id);
        q.non_blocking_wait_rq |= marks;
        q.hole_left = if marks {
            budget.saturating_sub(charged)
        } else if stays_busy {
            q.budget
        } else {
            budget.max(charged)
        };
        self.update_wr(id, now, k);
        if self.qr(id).is_coop() && self.is_seeky(id) {
            // A shared queue that went seeky: its issuers cooperate no more.
            self.q(id).split_coop = true;
        }
        // `bfq_bfqq_expire`: whatever the reason, a queue left without requests has the
        // earliest time it may be raised as soft real-time computed, at once if nothing of
        // it is in flight, else at its last completion (only then is it known to wait for
        // its I/O, the isochronous pattern soft real-time detection looks for).
        if k.low_latency && self.qr(id).sorted.is_empty() {
            if self.qr(id).dispatched == 0 {
                self.note_soft_rt_next_start(id, now, k);
            } else {
                self.q(id).softrt_update = true;
            }
        }
        let q = self.qr(id);
        let (group, class, budget, weight) = (q.group, q.class, q.budget, q.weight());
        self.groups.expire(
            group,
            id,
            class,
            charged,
            stays_busy.then_some((budget, weight)),
        );
        self.q(id).in_tree = stays_busy;
        if stays_busy {
            self.active_seq += 1;
            self.q(id).active_seq = self.active_seq;
        }
        if !stays_busy {
            self.became_idle(id, now);
        } else {
            self.q(id).last_idle = now;
        }
        if !self.qr(id).sorted.is_empty() {
            // `__bfq_bfqq_expire`: "resort priority tree of potential close cooperators".
            self.pos_update(id);
        }
        self.update_pending(id);
        self.maybe_free(id);
    }

    /// `bfq_choose_req` (from the anticipatory scheduler): which of two requests of one
    /// queue to serve first with the head at `last`. A metadata request first; else the
    /// nearer, a request behind the head counting `back_seek_penalty` times its distance
    /// and only within `back_seek_max`; one farther behind than that "wraps" and goes
    /// last; of two that wrap, the lower. At equal distances the higher sector. (The kernel
    /// also puts a synchronous request before an asynchronous one; a queue's requests are
    /// all one or the other.)
    pub(super) fn choose_req(
        &self,
        a: Option<u32>,
        b: Option<u32>,
        last: u64,
        k: &Knobs,
    ) -> Option<u32> {
        let (a, b) = match (a, b) {
            (None, b) => return b,
            (Some(a), Some(b)) if a == b => return Some(b),
            (Some(a), None) => return Some(a),
            (Some(a), Some(b)) => (a, b),
        };
        let (ra, rb) = (&self.rqs[a as usize], &self.rqs[b as usize]);
        if ra.meta != rb.meta {
            return Some(if ra.meta { a } else { b });
        }
        let dist = |s: u64| {
            if s >= last {
                Some(s - last)
            } else if s + k.back_max >= last {
                Some((last - s) * k.back_penalty)
            } else {
                None
            }
        };
        let (s1, s2) = (ra.sector, rb.sector);
        Some(match (dist(s1), dist(s2)) {
            (Some(d1), Some(d2)) if d1 != d2 => {
                if d1 < d2 {
                    a
                } else {
                    b
                }
            }
            (Some(_), Some(_)) => {
                if s1 >= s2 {
                    a
                } else {
                    b
                }
            }
            (Some(_), None) => a,
            (None, Some(_)) => b,
            (None, None) => {
                if s1 <= s2 {
                    a
                } else {
                    b
                }
            }
        })
    }

    /// `bfq_find_next_rq`: the request to serve after `last` (still queued), dispatched
    /// now from queue `id`. The FIFO's head if it expired and the FIFO was not yet looked
    /// at this turn (`bfq_check_fifo`, which marks it looked at either way); else the
    /// better of `last`'s neighbours by position (the next one wrapping round to the
    /// lowest), seen from where `last` starts.
    fn find_next_rq(&mut self, id: u32, last: u32, now: Nanos, k: &Knobs) -> Option<u32> {
        use std::ops::Bound::{Excluded, Unbounded};
        let q = self.q(id);
        if !std::mem::replace(&mut q.fifo_checked, true) {
            if let Some(&(head, deadline)) = q.fifo.front() {
                if head != last && now >= deadline {
                    return Some(head);
                }
            }
        }
        let key = (self.rqs[last as usize].sector, last);
        let q = self.qr(id);
        let prev = q.sorted.range(..key).next_back().map(|x| x.1);
        let next = q
            .sorted
            .range((Excluded(key), Unbounded))
            .next()
            .or_else(|| q.sorted.first().filter(|&&x| x != key))
            .map(|x| x.1);
        self.choose_req(next, prev, key.0, k)
    }

    /// Takes request `rq` out of queue `id` for dispatch; returns the sectors it moves.
    pub(super) fn take(&mut self, id: u32, rq: u32, now: Nanos, k: &Knobs) -> u64 {
        let info = self.rqs[rq as usize];
        // `bfq_remove_request`.
        if self.qr(id).next_rq == Some(rq) {
            let next = self.find_next_rq(id, rq, now, k);
            self.q(id).next_rq = next;
        }
        let q = self.q(id);
        q.sorted.remove(&(info.sector, rq));
        if q.sorted.is_empty() {
            q.next_rq = None;
        }
        if q.fifo.front().map(|x| x.0) == Some(rq) {
            q.fifo.pop_front();
        } else if let Some(i) = q.fifo.iter().position(|&(r, _)| r == rq) {
            q.fifo.remove(i);
        }
        q.dispatched += 1;
        self.rqs[rq as usize].queued = false;
        if self.last_merge == Some(rq) {
            self.last_merge = None;
        }
        self.nr_queued -= 1;
        self.pos_update(id);
        let sectors = (info.end - info.sector).max(1);
        self.note_dispatch(info.sector, sectors, now);
        if self.in_service == Some(id) {
            // `bfq_update_peak_rate`: where the in-service queue's I/O ended.
            self.dev.in_serv_last_pos = info.end;
        }
        sectors
    }

    /// Chooses the next queue to serve, by class then B-WF2Q+ down the hierarchy.
    fn select(&mut self, now: Nanos) -> Option<u32> {
        let idle_busy = self.load.busy_classes[2] > 0;
        let idle_due = idle_busy
            && (self.idle_class_due
                || now.saturating_sub(self.last_idle_class) >= IDLE_CLASS_TIMEOUT);
        let id = self.groups.select(idle_due)?;
        if self.qr(id).class == 2 {
            self.last_idle_class = now;
            self.idle_class_due = false;
            self.stats.idle_class_served += 1;
        }
        Some(id)
    }

    /// Queue `id` gets the device (`bfq_set_in_service_queue`).
    fn set_in_service(&mut self, id: u32, now: Nanos, k: &Knobs) {
        self.in_service = Some(id);
        // `__bfq_set_in_service_queue`. Where the previous queue's I/O ended says nothing
        // about this one's until it dispatches: forgotten, so that a request near it does
        // not merge its queue into this one ("bfq: Avoid false bfq queue merging").
        self.dev.in_serv_last_pos = 0;
        self.q(id).fifo_checked = false;
        self.budgets_assigned = (self.budgets_assigned * 7 + 256) / 8;
        self.idle_until = None;
        self.slice_start = now;
        self.update_wr(id, now, k);
        // `bfq_set_budget_timeout`: a raised queue's turn may last its raising factor times
        // longer (`weight / orig_weight`), a soft real-time one's as long as anyone's.
        let wr = self.qr(id).wr;
        let coeff = if wr.soft_rt {
            1
        } else {
            u64::from(wr.coeff.max(1))
        };
        self.budget_timeout = now.saturating_add(Nanos(k.timeout.0.saturating_mul(coeff)));
        let q = self.q(id);
        q.in_tree = false;
        // Service it received by injection since its last turn counts against this one.
        self.service = std::mem::take(&mut q.injected);
    }

    /// Dispatches request `rq` of queue `id`, charging `charge` sectors of service to it.
    fn dispatch_from(&mut self, id: u32, rq: u32, charge: u64, now: Nanos, k: &Knobs) -> RqId {
        // `bfq_dispatch_rq_from_bfqq`: the request to time for the injection limit.
        if std::mem::take(&mut self.inject.wait_dispatch) {
            self.inject.waited_rq = Some(rq);
        }
        let sectors = self.take(id, rq, now, k);
        self.served(id, sectors, now);
        let q = self.q(id);
        if q.wr.coeff > 1 {
            q.wr.service += sectors;
        }
        let (group, class) = (q.group, q.class);
        self.service += charge;
        self.groups.served(group, class, charge);
        self.stats.dispatched += 1;
        RqId(rq)
    }

    /// `bfq_bfqq_served`'s account of the service since queue `id` became backlogged.
    pub(super) fn served(&mut self, id: u32, sectors: u64, now: Nanos) {
        let q = self.q(id);
        if q.service_from_backlogged == 0 {
            q.first_io_time = now;
        }
        q.service_from_backlogged += sectors;
    }

    /// Keeps the asymmetry bookkeeping of queue `id` in step with whether it has requests
    /// queued or in flight or being served, and with its weight. As in the kernel's `queue_weights_tree`, a
    /// weight-raised queue is not counted by weight (raising has its own idling rule), but
    /// its group still has a pending queue.
    pub(super) fn update_pending(&mut self, id: u32) {
        // The queue in service counts until its turn ends, even between its requests (it is
        // still "busy" in the kernel's terms).
        let in_service = self.in_service == Some(id);
        let q = self.qr(id);
        let pending = !q.sorted.is_empty() || q.dispatched > 0 || in_service || q.in_tree;
        let want = (pending && q.wr.coeff <= 1).then(|| q.weight());
        if want == q.counted && pending == q.pending {
            return;
        }
        let (old, was_pending, group) = (q.counted, q.pending, q.group);
        if old != want {
            if let Some(w) = old {
                let i = self
                    .load
                    .weights
                    .iter()
                    .position(|&(x, _)| x == w)
                    .expect("counted weight");
                self.load.weights[i].1 -= 1;
                if self.load.weights[i].1 == 0 {
                    self.load.weights.swap_remove(i);
                }
            }
            if let Some(w) = want {
                match self.load.weights.iter_mut().find(|(x, _)| *x == w) {
                    Some(e) => e.1 += 1,
                    None => self.load.weights.push((w, 1)),
                }
            }
        }
        let g = &mut self.groups.slots[group as usize];
        match (was_pending, pending) {
            (false, true) => {
                g.pending_queues += 1;
                if g.pending_queues == 1 {
                    self.groups.with_pending += 1;
                }
            }
            (true, false) => {
                g.pending_queues -= 1;
                if g.pending_queues == 0 {
                    self.groups.with_pending -= 1;
                }
            }
            _ => {}
        }
        let q = self.q(id);
        q.counted = want;
        q.pending = pending;
    }

    /// The queue a bio of this issuer would be queued in, if it exists (`bic_to_bfqq`).
    fn queue_of_bio(&self, bio: &Bio) -> Option<u32> {
        let sync = is_sync(bio.op, bio.flags);
        let key = if sync {
            Key::Sync(bio.issuer)
        } else {
            let slot = self.groups.find_slot(bio.group)?;
            Key::Async(
                slot,
                class_index(bio.ioprio.class()) as u8,
                bio.ioprio.level(),
            )
        };
        self.by_key.get(&key).copied()
    }

    /// Merges `bio` into queued request `id` of queue `qid`, keeping the sort order.
    fn merge_bio_into(
        &mut self,
        q: &ElvCtx<'_>,
        qid: u32,
        id: u32,
        bio: Bio,
        k: &Knobs,
    ) -> Result<(), Bio> {
        let mut rq = q.rqs.lock(RqId(id));
        merge::bio_attempt_merge(&mut rq, bio, q.limits)?;
        let (sector, end) = (rq.sector, rq.end_sector());
        drop(rq);
        let info = &mut self.rqs[id as usize];
        let (old, old_end) = (info.sector, info.end);
        (info.sector, info.end) = (sector, end);
        // The queue's seek position (`last_request_pos`) stays where the request ended
        // when it was inserted: the kernel moves it only in `bfq_rq_enqueued`, not when a
        // bio grows a queued request, so the next request after a back merge may count as
        // a seek.
        let _ = old_end;
        if old != sector {
            // `bfq_request_merged`: a front merge that moved the request before its
            // neighbour below may make it the queue's next request.
            let bq = self.q(qid);
            let passed = bq
                .sorted
                .range(..(old, id))
                .next_back()
                .is_some_and(|&(s, _)| sector < s);
            bq.sorted.remove(&(old, id));
            bq.sorted.insert((sector, id));
            if passed {
                let next = self.qr(qid).next_rq;
                let last = self.dev.last_dispatch_end;
                self.q(qid).next_rq = self.choose_req(next, Some(id), last, k);
                if self.qr(qid).next_rq != next {
                    self.updated_next_req(qid);
                }
            }
            // The kernel's position tree reads its queues' next requests' positions as
            // they are, so a front-merged next request moves its queue's key in place; ours
            // re-sorts it.
            self.pos_update(qid);
        }
        self.stats.bio_merges += 1;
        Ok(())
    }

    /// Folds the queued request starting at `end` into `id` (which ends there), if the merge
    /// rules allow; returns the folded request for the core to free.
    fn fold_next(&mut self, q: &ElvCtx<'_>, qid: u32, id: u32, end: u64) -> Option<RqId> {
        let next = self
            .qr(qid)
            .sorted
            .range((end, 0)..(end + 1, 0))
            .map(|x| x.1)
            .find(|&n| n != id)?;
        if !self.fold(q, id, next) {
            return None;
        }
        // `bfq_requests_merged`: `next` leaves the queue, `id` takes its place as the next
        // request to serve if it had it, and the earlier of the two deadlines.
        let bq = self.q(qid);
        if bq.next_rq == Some(next) {
            bq.next_rq = Some(id);
        }
        bq.sorted.remove(&(end, next));
        let mut gone_deadline = Nanos::MAX;
        if let Some(i) = bq.fifo.iter().position(|&(r, _)| r == next) {
            gone_deadline = bq.fifo.remove(i).map_or(Nanos::MAX, |x| x.1);
        }
        if let Some(i) = bq.fifo.iter().position(|&(r, _)| r == id) {
            if gone_deadline < bq.fifo[i].1 {
                bq.fifo.remove(i);
                let at = bq.fifo.partition_point(|&(_, d)| d <= gone_deadline);
                bq.fifo.insert(at, (id, gone_deadline));
            }
        }
        self.uncount(next);
        let info = &mut self.rqs[next as usize];
        info.queued = false;
        info.owned = false;
        // `elv_merge_requests`: the one-hit cache names the request that absorbed `next`.
        self.last_merge = Some(id);
        self.nr_queued -= 1;
        self.pos_update(qid);
        self.stats.rq_merges += 1;
        Some(RqId(next))
    }

    /// `elv_attempt_insert_merge`: folds the new request `id` (starting at `sector`) into
    /// the queued request ending there, the one-hit cache first, then (`nomerges=0`) any
    /// queue's, as the elevator's hash holds every queue's requests; `attempt_merge` asks
    /// BFQ nothing (no `bfq_allow_bio_merge`). One merge only, as since Linux 5.14. Where
    /// we differ: `bfq_requests_merged` also makes the new request's queue if it has none
    /// (`bfq_init_rq`); we do not, since the request never enters it.
    fn insert_merge(&mut self, q: &ElvCtx<'_>, id: u32, sector: u64) -> bool {
        let ends_here = |st: &State, t: u32| {
            let r = &st.rqs[t as usize];
            t != id && r.queued && r.end == sector
        };
        let mut target = self.last_merge.filter(|&t| ends_here(self, t));
        if target.is_none_or(|t| !self.fold(q, t, id)) {
            if q.nomerges != NoMerges::All {
                return false;
            }
            target = self
                .back_merge_candidate(sector)
                .filter(|&t| ends_here(self, t));
            match target {
                Some(t) if self.fold(q, t, id) => {}
                _ => return false,
            }
        }
        self.last_merge = target;
        self.stats.rq_merges += 1;
        true
    }

    /// `bfq_setup_cooperator` for a synchronous request or bio of `issuer` at `sector`, sent
    /// to queue `qid`, with the merge it sets up carried out for `issuer`
    /// (`bfq_merge_bfqqs`): a merge set up earlier takes the issuer along first
    /// (`bfqq->new_bfqq`), then a stable merge that is due (off fast queueing devices), then
    /// a close cooperator. Returns the queue the I/O now goes to, if another.
    fn cooperator(
        &mut self,
        qid: u32,
        issuer: u32,
        sector: u64,
        now: Nanos,
        k: &Knobs,
    ) -> Option<u32> {
        self.follow_merge(qid, issuer)
            .or_else(|| {
                self.delayed_stable_merge_allowed(k)
                    .then(|| self.delayed_stable_merge(qid, issuer, now))
                    .flatten()
            })
            .or_else(|| {
                self.merging_on
                    .then(|| self.setup_cooperator(qid, issuer, sector, now))
                    .flatten()
            })
    }

    /// Whether [`State::cooperator`] could redirect `bio`'s issuer from queue `qid`: a
    /// synchronous bio, and a pending merge, early merging on, or a stable merge scheduled
    /// on a device that allows one.
    fn may_cooperate(&self, qid: u32, bio: &Bio, k: &Knobs) -> bool {
        let q = self.qr(qid);
        is_sync(bio.op, bio.flags)
            && (q.new_q.is_some()
                || self.merging_on
                || (q.stable_merge.is_some() && self.delayed_stable_merge_allowed(k)))
    }

    /// `bfq_allow_bio_merge`: may `bio`, bound for queue `*qid`, join queued request `t`?
    /// Not a synchronous bio into an asynchronous request; before deciding, the issuer's
    /// queue may be merged with a cooperating one (`*qid` follows), and then only a
    /// request of that queue will do.
    fn allow_bio_merge(&mut self, qid: &mut u32, t: u32, bio: &Bio, k: &Knobs) -> bool {
        let sync = is_sync(bio.op, bio.flags);
        let t_queue = self.rqs[t as usize].queue;
        if sync && !self.qr(t_queue).sync {
            return false;
        }
        if sync {
            let now = self.now;
            if let Some(dst) = self.cooperator(*qid, bio.issuer, bio.sector, now, k) {
                *qid = dst;
            }
        }
        t_queue == *qid
    }

    /// `elv_rqhash_find`: a queued request of any queue that ends at `sector`.
    fn back_merge_candidate(&self, sector: u64) -> Option<u32> {
        self.queues
            .iter()
            .flatten()
            .filter_map(|bq| bq.sorted.range(..(sector, 0)).next_back())
            .map(|&(_, t)| t)
            .find(|&t| self.rqs[t as usize].end == sector)
    }

    /// Folds request `next` into queued request `t` if the merge rules allow
    /// (`attempt_merge`'s checks and join); the caller takes `next` out of wherever it was.
    fn fold(&mut self, q: &ElvCtx<'_>, t: u32, next: u32) -> bool {
        let mut a = q.rqs.lock(RqId(t));
        let mut b = q.rqs.lock(RqId(next));
        if !merge::req_merge_ok(&a, &b, q.limits) {
            return false;
        }
        merge::merge_requests(&mut a, &mut b);
        self.rqs[t as usize].end = a.end_sector();
        true
    }

    /// After a front merge into `id`: its predecessor in queue `qid` may now end where it
    /// starts, and absorbs it (`attempt_front_merge`).
    fn fold_into_prev(&mut self, q: &ElvCtx<'_>, qid: u32, id: u32) -> Option<RqId> {
        let start = self.rqs[id as usize].sector;
        let prev = self
            .qr(qid)
            .sorted
            .range(..(start, 0))
            .next_back()
            .map(|x| x.1)
            .filter(|&p| self.rqs[p as usize].end == start)?;
        self.fold_next(q, qid, prev, start)
    }

    /// Request `rq` counts among its issuer's (`bic->requests++` in `bfq_init_rq`).
    /// And it counts among its queue's and that queue's groups' (`bfqq_request_allocated`
    /// in `bfq_init_rq`), for the queue it finally goes to.
    fn count(&mut self, rq: u32, issuer: u32) {
        let info = &mut self.rqs[rq as usize];
        info.issuer = issuer;
        info.counted = true;
        let qid = info.queue;
        *self.bic_requests.entry(issuer).or_default() += 1;
        self.allocated(qid, true);
    }

    /// One request more or fewer for queue `id` and each group above it (not the root,
    /// which has no entity).
    fn allocated(&mut self, id: u32, more: bool) {
        let step = |n: &mut u32| *n = if more { *n + 1 } else { *n - 1 };
        let q = self.q(id);
        step(&mut q.allocated);
        let mut g = q.group;
        while g != 0 {
            let grp = &mut self.groups.slots[g as usize];
            step(&mut grp.allocated);
            g = grp.parent;
        }
    }

    /// Request `rq` is done with, completed or merged away (`bic->requests--`).
    fn uncount(&mut self, rq: u32) {
        let info = &mut self.rqs[rq as usize];
        if !std::mem::take(&mut info.counted) {
            return;
        }
        let (issuer, qid) = (info.issuer, info.queue);
        self.allocated(qid, false);
        if let Some(n) = self.bic_requests.get_mut(&issuer) {
            *n -= 1;
            if *n == 0 {
                self.bic_requests.remove(&issuer);
            }
        }
    }

    /// Adds request `rq` to queue `qid` (`bfq_add_request`).
    pub(super) fn add_request(
        &mut self,
        qid: u32,
        rq: u32,
        sector: u64,
        deadline: Nanos,
        k: &Knobs,
    ) {
        let q = self.q(qid);
        q.sorted.insert((sector, rq));
        if q.fifo.back().is_none_or(|&(_, d)| d <= deadline) {
            q.fifo.push_back((rq, deadline));
        } else {
            // Requests moved in from a merged queue keep their own deadlines.
            let i = q.fifo.partition_point(|&(_, d)| d <= deadline);
            q.fifo.insert(i, (rq, deadline));
        }
        self.rqs[rq as usize].queue = qid;
        // Is the new request a better one to serve next, seen from where the device's last
        // dispatch ended (`bfqd->last_position`)?
        let prev = self.qr(qid).next_rq;
        let next = self.choose_req(prev, Some(rq), self.dev.last_dispatch_end, k);
        self.q(qid).next_rq = next;
        if next != prev {
            // `bfq_add_request`, for a queue already busy (a queue becoming busy gets its
            // budget when it is activated).
            self.updated_next_req(qid);
            self.pos_update(qid);
        }
    }

    /// Request `rq` left the device, done or handed back (`bfq_completed_request`).
    fn completed(&mut self, rq: u32, now: Nanos, k: &Knobs) {
        let info = self.rqs[rq as usize];
        if !info.owned {
            return;
        }
        self.rqs[rq as usize].owned = false;
        // `bfq_finish_requeue_request`: the request being timed for the injection limit
        // is back (before the device's count drops), and its issuer has one fewer.
        if self.inject.waited_rq == Some(rq) {
            self.update_inject_limit(info.queue, now);
        }
        self.uncount(rq);
        self.note_completion(&info, now);
        let q = self.q(info.queue);
        q.dispatched = q.dispatched.saturating_sub(1);
        q.ttime.last_end = now;
        // `bfq_completed_request`: the deferred `soft_rt_next_start`, for a queue not
        // raised as interactive.
        let softrt_due = q.softrt_update
            && q.dispatched == 0
            && q.sorted.is_empty()
            && q.wr.coeff != super::policy::WR_COEFF;
        if softrt_due {
            self.note_soft_rt_next_start(info.queue, now, k);
        }
        self.update_pending(info.queue);
        // `bfq_completed_request`, for the queue in service: if it has run dry and is worth
        // waiting for, wait (the timer starts once its last request is back); else end its
        // turn if its time is up, or if it has nothing left to send.
        if self.in_service == Some(info.queue) {
            let id = info.queue;
            if self.must_idle(id, k) {
                if self.qr(id).dispatched == 0 && self.idle_until.is_none() {
                    self.arm_idle_timer(id, now, k);
                }
            } else if self.may_expire_for_budget_timeout(id, now) {
                self.expire(k, Expire::BudgetTimeout, now);
                self.restart = true;
            } else if self.qr(id).sorted.is_empty() {
                self.expire(k, Expire::NoMoreRequests, now);
                self.restart = true;
            }
        }
        self.maybe_free(info.queue);
    }

    /// `bfq_bfqq_must_idle`: queue `id` has nothing queued and is worth waiting for.
    fn must_idle(&self, id: u32, k: &Knobs) -> bool {
        self.qr(id).sorted.is_empty() && self.better_to_idle(id, k)
    }

    /// `bfq_may_expire_for_budg_timeout`: the turn's time is up (`bfq_bfqq_budget_timeout`,
    /// due at the timeout itself), unless we are waiting for the queue with less than a
    /// third of its budget left: it got little service for its time, probably from the
    /// wait itself, and is not to be punished for it.
    fn may_expire_for_budget_timeout(&self, id: u32, now: Nanos) -> bool {
        let q = self.qr(id);
        let left = q.budget.saturating_sub(self.service);
        now >= self.budget_timeout && (self.idle_until.is_none() || left >= q.budget / 3)
    }

    /// Starts waiting for queue `id`'s next request (`bfq_arm_slice_timer`).
    fn arm_idle_timer(&mut self, id: u32, now: Nanos, k: &Knobs) {
        let sl = self.slice_timer(id, k);
        self.idle_until = Some(now.saturating_add(sl));
        self.last_idling_start = now;
        self.stats.idles += 1;
    }

    /// The wait for the queue in service ended without a request
    /// (`bfq_idle_slice_timer_body`): its turn ends as timed out if its time is up as well
    /// (then charged the time it waited), else as too idle.
    fn idle_timer_expired(&mut self, k: &Knobs, now: Nanos) {
        let why = if now >= self.budget_timeout {
            Expire::BudgetTimeout
        } else {
            Expire::TooIdle
        };
        self.expire(k, why, now);
    }

    /// The next request to issue (`__bfq_dispatch_request`).
    fn dispatch(&mut self, k: &Knobs, now: Nanos) -> Option<RqId> {
        // Requests inserted at the head (requeued ones) go first, outside every queue's
        // turn and budget, counted as their queue's (`__bfq_dispatch_request`).
        if let Some(rq) = self.dispatch.pop_front() {
            let info = &mut self.rqs[rq as usize];
            info.parked = false;
            info.owned = true;
            let qid = info.queue;
            let q = self.q(qid);
            q.parked -= 1;
            q.dispatched += 1;
            self.dev.rq_in_driver += 1;
            self.update_pending(qid);
            self.stats.dispatched += 1;
            return Some(RqId(rq));
        }
        // With strict_guarantees the device serves one request at a time, the only way to
        // make a queueing device keep BFQ's order (`bfqd->tot_rq_in_driver > 0`).
        if k.strict && self.dev.rq_in_driver > 0 {
            return None;
        }
        loop {
            let Some(id) = self.in_service else {
                let id = self.select(now)?;
                self.set_in_service(id, now, k);
                continue;
            };
            // `bfq_select_queue`: a turn whose time is up ends, unless the queue ran dry and
            // is worth waiting for.
            if self.may_expire_for_budget_timeout(id, now) && !self.must_idle(id, k) {
                self.expire(k, Expire::BudgetTimeout, now);
                continue;
            }
            if let Some(rq) = self.qr(id).next_rq {
                let info = self.rqs[rq as usize];
                let charge = self.serv_to_charge(id, (info.end - info.sector).max(1));
                let budget = self.qr(id).budget;
                if self.service > 0 && self.service + charge > budget {
                    self.expire(k, Expire::BudgetExhausted, now);
                    continue;
                }
                let rq = self.dispatch_from(id, rq, charge, now, k);
                // `bfq_dispatch_rq_from_bfqq`: an idle-class queue gets one request per turn
                // while any other queue waits, its turn ending as if its budget ran out.
                if self.qr(id).class == 2 && self.load.busy_classes.iter().sum::<u32>() > 1 {
                    self.expire(k, Expire::BudgetExhausted, now);
                }
                return Some(rq);
            }
            // Ran dry. Wait for it when that pays (`bfq_better_to_idle`): until its requests
            // in flight complete, then `slice_idle` for the issuer's next request, armed at
            // that completion (`bfq_completed_request`). Meanwhile other queues' requests
            // may be injected. A queue in service with nothing queued, nothing in flight and
            // no wait armed ends its turn here (`bfq_select_queue`: neither
            // `wait_request` nor `dispatched != 0`): as a queue preempted while BFQ idled
            // for it (kept busy for its guarantees) is when it next comes into service. (Ours
            // armed the wait here too until 2026-11-27, eighth session; the kernel's log of
            // seed 004's twin, rotational without raising, shows such a queue, jbd2's,
            // expire at once 201 times in 5 s and wait in vain 14 times, where ours waited
            // in vain 1,613 times a second.)
            match self.idle_until {
                Some(t) if t <= now => {
                    self.idle_timer_expired(k, now);
                    continue;
                }
                Some(_) => {}
                None if self.qr(id).dispatched != 0 && self.better_to_idle(id, k) => {}
                None => {
                    self.expire(k, Expire::NoMoreRequests, now);
                    continue;
                }
            }
            return self.inject(id, k, now);
        }
    }
}

impl Elevator for Bfq {
    fn name(&self) -> &'static str {
        "bfq"
    }

    fn features(&self) -> ElvFeatures {
        ElvFeatures::default()
    }

    /// `bfq_limit_depth`: asynchronous I/O may take half of the scheduler tags and
    /// synchronous writes three quarters, so reads always find some; while a queue is
    /// weight-raised, 3/16 and 6/16. And the issuer's queue for this kind of I/O, if it
    /// (or a group above it) already holds its weight's share of what this request could
    /// take (`bfqq_request_over_limit`), gets a depth of one tag, so that one queue or
    /// cgroup cannot take the tags another needs for its share.
    fn limit_depth(&self, bio: &Bio) -> u32 {
        let n = self.nr_requests.load(Ordering::Relaxed).max(4);
        let depth = if bio.op.is_read() {
            u32::MAX
        } else {
            let raised = self.raised.load(Ordering::Acquire) > 0;
            let d = match (is_sync(bio.op, bio.flags), raised) {
                (false, false) => n / 2,
                (true, false) => n * 3 / 4,
                (false, true) => n * 3 / 16,
                (true, true) => n * 6 / 16,
            };
            d.max(1)
        };
        // A queue alone holds every share there is (and no more tags than the map has):
        // skip the lock unless two or more entities are on the trees, busy or idle (the
        // count as last published).
        if self.tunables.get(T_TAGS_BY_WEIGHT) == 0 || self.on_trees.load(Ordering::Acquire) <= 1 {
            return depth;
        }
        let st = self.st.lock();
        let over = st
            .queue_of_bio(bio)
            .is_some_and(|qid| st.request_over_limit(qid, depth.min(n)));
        if over {
            1
        } else {
            depth
        }
    }

    /// `bfq_bio_merge`: `elv_merge`'s candidates in its order (the one-hit cache, from any
    /// queue; with `nomerges=0` the hash's request ending where the bio starts, from any
    /// queue; a request of the bio's own queue starting where it ends,
    /// `bfq_request_merge`), each put to `elv_bio_merge_ok`, whose BFQ part
    /// (`bfq_allow_bio_merge`) first tries to merge the issuer's queue with a cooperating
    /// one (`bfq_setup_cooperator` on the bio) and then allows the merge only into a request
    /// of the queue the bio now goes to. The first candidate that passes and lies next to
    /// the bio decides. Times for the cooperator checks are the last the scheduler saw
    /// (this hook is given none).
    fn bio_merge(&self, q: &ElvCtx<'_>, _hctx: HctxIdx, bio: Bio) -> BioMerge {
        if q.nomerges == NoMerges::None
            || !bio.mergeable()
            || self.queued.load(Ordering::Acquire) == 0
        {
            return BioMerge::NotMerged(bio);
        }
        let k = self.knobs();
        let mut st = self.st.lock();
        // `bfqd->bio_bfqq`: without a queue for the bio's issuer no merge is allowed.
        let Some(mut qid) = st.queue_of_bio(&bio) else {
            return BioMerge::NotMerged(bio);
        };
        for stage in 0..3 {
            // `elv_merge`'s candidates in its order; with `nomerges=1` the cache alone.
            let t = match stage {
                0 => st.last_merge.filter(|&t| st.rqs[t as usize].queued),
                _ if q.nomerges != NoMerges::All => None,
                1 => st.back_merge_candidate(bio.sector),
                _ => {
                    let end = bio.end_sector();
                    let own = &st.qr(qid).sorted;
                    own.range((end, 0)..(end + 1, 0)).next().map(|x| x.1)
                }
            };
            let Some(t) = t else { continue };
            let (back, front) = {
                let r = &st.rqs[t as usize];
                (r.end == bio.sector, r.sector == bio.end_sector())
            };
            // A candidate the bio cannot join matters only for the merge of queues its
            // check may set up; skipped unlocked where none can be.
            if !back && !front && !st.may_cooperate(qid, &bio, &k) {
                continue;
            }
            let ok = merge::rq_merge_ok(&q.rqs.lock(RqId(t)), &bio);
            if !ok || !st.allow_bio_merge(&mut qid, t, &bio, &k) {
                continue;
            }
            if !back && !front {
                // The one-hit cache, passed but not adjoining: on to the hash.
                continue;
            }
            // `blk_mq_sched_try_merge`: the bio joins this candidate or none.
            return match st.merge_bio_into(q, qid, t, bio, &k) {
                Ok(()) => {
                    st.last_merge = Some(t);
                    // `attempt_back_merge` / `attempt_front_merge`, as after any bio merge.
                    let freed = if back {
                        let end = st.rqs[t as usize].end;
                        st.fold_next(q, qid, t, end)
                    } else {
                        st.fold_into_prev(q, qid, t)
                    };
                    self.publish(&st);
                    BioMerge::Merged { freed }
                }
                Err(b) => BioMerge::NotMerged(b),
            };
        }
        BioMerge::NotMerged(bio)
    }

    fn insert_requests(
        &self,
        q: &ElvCtx<'_>,
        hctx: HctxIdx,
        rqs: &[RqId],
        at_head: bool,
        now: Nanos,
        freed: &mut Vec<RqId>,
    ) {
        let k = self.knobs();
        let mut st = self.st.lock();
        st.now = now;
        st.retire_idle();
        st.groups.refresh_weights(&self.blkcg);
        st.merging_on = st.merging_enabled(&k);
        for &id in rqs {
            // `bfq_insert_requests` (5.10): counted on the queue it came through, also when
            // it is folded into another here and freed unstarted (never dropped then).
            self.hctx_queued.inc(hctx);
            let e = q.rqs.lock(id).elv();
            // `blk_mq_sched_try_insert_merge`: a request that starts where a queued one
            // ends joins it, whichever queue that one is in, before BFQ sees it.
            if !at_head && q.nomerges != NoMerges::None && st.insert_merge(q, id.0, e.sector) {
                freed.push(id);
                continue;
            }
            let mut qid = st.queue_for(&e, &self.blkcg, now, &k);
            let end = e.sector + e.nr_sectors as u64;
            assert!(
                !st.rqs[id.index()].queued && !st.rqs[id.index()].parked,
                "{id:?}: inserted twice"
            );
            if at_head {
                // `bfq_insert_request`: at the head of `bfqd->dispatch`, in no queue, no
                // arrival seen by the queue it belongs to (`bfq_init_rq` only).
                st.rqs[id.index()] = RqInfo {
                    queue: qid,
                    sector: e.sector,
                    end,
                    parked: true,
                    ..RqInfo::default()
                };
                st.count(id.0, e.issuer);
                self.hctx_counted[id.index()].store(true, Ordering::Release);
                let q = st.q(qid);
                q.parked += 1;
                q.retire_at = None;
                st.dispatch.push_front(id.0);
                continue;
            }
            let sync = st.qr(qid).sync;
            let deadline = now.saturating_add(if sync { k.fifo_sync } else { k.fifo_async });
            st.rqs[id.index()] = RqInfo {
                queue: qid,
                sector: e.sector,
                end,
                queued: true,
                owned: true,
                meta: e.cmd_flags.contains(ReqFlags::META),
                ..RqInfo::default()
            };
            self.hctx_counted[id.index()].store(true, Ordering::Release);
            st.nr_queued += 1;
            // A stable merge scheduled when the queue was made, done once it has shown what
            // it is (`bfq_setup_cooperator`'s first step, off fast queueing devices).
            // Interleaved I/O of cooperating issuers goes to one queue
            // (`bfq_setup_cooperator`): a merge set up earlier takes this issuer along first
            // (`bfqq->new_bfqq`), then a stable merge that is due, then a close cooperator.
            if sync {
                if let Some(dst) = st.cooperator(qid, e.issuer, e.sector, now, &k) {
                    qid = dst;
                }
            }
            // Counted for the queue it goes to (`__bfq_insert_request` moves the count from
            // the issuer's old queue to a cooperator's).
            st.rqs[id.index()].queue = qid;
            st.count(id.0, e.issuer);
            // `__bfq_insert_request`: think time, its short-or-long state and seek history
            // first, then `bfq_add_request`, whose waker check and injection bookkeeping read
            // that state.
            st.note_arrival(qid, e.sector, end, now, &k);
            if st.qr(qid).sync && st.bic_requests.get(&e.issuer).copied().unwrap_or(0) <= 1 {
                st.note_lone_arrival(qid, now, &k);
            }
            st.add_request(qid, id.0, e.sector, deadline, &k);
            let mergeable = !e.cmd_flags.intersects(ReqFlags::NOMERGE_FLAGS)
                && matches!(e.op, ReqOp::Read | ReqOp::Write | ReqOp::Discard);
            if st.last_merge.is_none() && mergeable {
                st.last_merge = Some(id.0);
            }
            st.update_pending(qid);
            let old_coeff = st.qr(qid).wr.coeff;
            let bq = st.qr(qid);
            if st.in_service == Some(qid) || bq.in_tree {
                st.raise_async_on_arrival(qid, now, &k);
            }
            let bq = st.qr(qid);
            if st.in_service == Some(qid) {
                // The queue we were idling for has work again.
                st.idle_until = None;
            } else if !bq.in_tree {
                st.idle_to_busy(qid, e.issuer, now, &k);
            }
            // The end of `bfq_add_request`: a queue not raised before or after this arrival
            // notes its time, idle-to-busy included, so an asynchronous queue's next request
            // is measured from this one, not from before a pause.
            let bq = st.q(qid);
            if k.low_latency && (old_coeff <= 1 || bq.wr.coeff <= 1) {
                bq.last_wr_start_finish = now;
            }
        }
        self.publish(&st);
    }

    fn dispatch_request(&self, _q: &ElvCtx<'_>, _hctx: HctxIdx, now: Nanos) -> Option<RqId> {
        let k = self.knobs();
        let mut st = self.st.lock();
        st.now = now;
        let rq = st.dispatch(&k, now);
        self.publish(&st);
        rq
    }

    fn counts_per_hctx(&self) -> bool {
        self.tunables.get(T_ELEVATOR_QUEUED) != 0
    }

    /// `bfq_has_work`: requests queued here or on `bfqd->dispatch`; with `has_work_busy`,
    /// as before Linux 5.19, any busy queue instead of queued requests.
    /// With `elevator_queued`, as Linux 5.10, only for a hardware queue with requests
    /// inserted through it and not finished.
    fn has_work(&self, hctx: HctxIdx) -> bool {
        if self.counts_per_hctx() && self.hctx_queued.get(hctx) == 0 {
            return false;
        }
        self.queued.load(Ordering::Acquire) > 0
            || (self.tunables.get(T_HAS_WORK_BUSY) != 0 && self.busy.load(Ordering::Acquire) > 0)
    }

    fn completed_request(&self, rq: &ElvRq, now: Nanos) {
        let k = self.knobs();
        let mut st = self.st.lock();
        st.now = now;
        self.drop_hctx_count(rq);
        st.completed(rq.id.0, now, &k);
        self.publish(&st);
    }

    /// `bfq_finish_requeue_request` of a request never started (one merged away): its
    /// `elevator_queued` count stays, as in 5.10.
    fn finish_request(&self, rq: &ElvRq) {
        self.hctx_counted[rq.id.index()].store(false, Ordering::Release);
    }

    fn requeue_request(&self, rq: &ElvRq, now: Nanos) {
        // `bfq_finish_requeue_request`: a started request handed back counts as completed
        // (`bfq_completed_request`); it then comes back through `insert_requests` at the
        // head, onto `bfqd->dispatch`.
        let k = self.knobs();
        let mut st = self.st.lock();
        st.now = now;
        self.drop_hctx_count(rq);
        st.completed(rq.id.0, now, &k);
        self.publish(&st);
    }

    fn restart_hctxs(&self, out: &mut Vec<HctxIdx>) {
        let mut st = self.st.lock();
        if std::mem::take(&mut st.restart) {
            out.extend((0..self.nr_hw).map(HctxIdx));
        }
    }

    fn next_timer(&self) -> Option<Nanos> {
        let st = self.st.lock();
        // Once the IDLE class is due it needs no more timer: the next selection serves it.
        let idle_class = (st.load.busy_classes[2] > 0 && !st.idle_class_due)
            .then(|| st.last_idle_class.saturating_add(IDLE_CLASS_TIMEOUT));
        match (st.idle_until, idle_class) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn timer(&self, now: Nanos) {
        let k = self.knobs();
        let mut st = self.st.lock();
        st.now = now;
        if st.idle_until.is_some_and(|t| t <= now) {
            st.idle_timer_expired(&k, now);
        }
        if st.load.busy_classes[2] > 0
            && now.saturating_sub(st.last_idle_class) >= IDLE_CLASS_TIMEOUT
        {
            // Served at the next selection (`bfq_lookup_next_entity`), as in the kernel: the
            // queue in service keeps its turn (no preemption for the IDLE class).
            st.idle_class_due = true;
        }
        // Idling ended, or the IDLE class is due: the hardware queues must run.
        st.restart = true;
        self.publish(&st);
    }

    fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.typed_stats().pairs()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn debug_state(&self) -> String {
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
                    q.seek_history.count_ones() > super::policy::SEEKY_BITS,
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

    fn check_invariants(&self) {
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

    /// `bfq_depth_updated`: the tag limits of `bfq_limit_depth` follow the new depth
    /// (`bfq_update_depths`); the queues, groups and everything learned of them stay.
    fn depth_updated(&self, nr_requests: u32, nr_rq_ids: u32) {
        assert!(
            nr_rq_ids as usize <= self.hctx_counted.len(),
            "bfq: request ids past max_rq_ids"
        );
        self.nr_requests.store(nr_requests, Ordering::Relaxed);
        let mut st = self.st.lock();
        assert!(
            st.nr_queued == 0,
            "bfq: a depth change with requests queued"
        );
        // The ids name other requests now (none is allocated: the queue is drained).
        st.rqs = vec![RqInfo::default(); nr_rq_ids as usize];
        st.last_merge = None;
    }

    fn exit_sched(&self) {
        let st = self.st.lock();
        assert_eq!(st.nr_queued, 0, "bfq: exit with requests queued");
        assert!(
            st.dispatch.is_empty(),
            "bfq: exit with requests on its dispatch list"
        );
    }
}

fn init(init: &ElevatorInit) -> Box<dyn Elevator> {
    Box::new(Bfq::new(init))
}

pub const BFQ: ElevatorType = ElevatorType {
    name: "bfq",
    alias: None,
    features: ElvFeatures::empty(),
    tunables: &TUNABLES,
    aliases: &ALIASES,
    init: Some(init),
    // Measured with `mqblk bench --preset=sched-cost`; every hook runs under `bfqd->lock`.
    cost: ElvCost {
        insert_ns: 150,
        insert_lock: LockScope::Queue,
        dispatch_ns: 200,
        probe_ns: 60,
        dispatch_lock: LockScope::Queue,
        complete_ns: 150,
        complete_lock: LockScope::Queue,
        merge_ns: 60,
        path_ns: 0,
    },
};
