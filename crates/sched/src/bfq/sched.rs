//! BFQ's queues and its elevator operations (`block/bfq-iosched.c`): what a request does
//! from insertion to completion. This file holds the state, the request accounting and the
//! elevator hooks; beside it, by concern: `tunables` (the sysfs attributes), `stats`,
//! `queue` (a queue's life), `service` (selection, expiry, idling and the dispatch loop),
//! `rq_merge` (bios and requests merged within a queue) and `debug` (the state dump and the
//! invariants). The decisions live next door: budgets, idling, weight raising, injection
//! and device estimates in `policy`, cooperating queues in `merge`, the hierarchy in
//! [`super::groups`], the fair-queueing engine in [`super::engine`].
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
use mqblk_core::sync::Mutex;
use mqblk_core::{
    merge, Bio, BioMerge, Blkcg, Elevator, ElevatorInit, ElevatorType, ElvCost, ElvCtx,
    ElvFeatures, ElvRq, HctxIdx, HctxQueued, IoPrioClass, LockScope, Nanos, NoMerges, ReqFlags,
    ReqOp, RqId, TunableAlias, TunableDesc, Tunables,
};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

mod debug;
mod queue;
mod rq_merge;
mod service;
mod stats;
mod tunables;

pub(in crate::bfq) use tunables::*;

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

pub use stats::{BfqCounters, BfqStats};

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

/// The BFQ scheduler (`struct bfq_data`): one lock over its queues, groups and trees, with the counts `has_work` and `limit_depth` read without it.
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

    /// BFQ for the queue `init` describes, with the kernel's defaults.
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

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.typed_stats().pairs()
    }

    fn debug_state(&self) -> String {
        self.debug_state_text()
    }

    fn check_invariants(&self) {
        self.check_all_invariants()
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

/// BFQ's registration (`iosched_bfq_mq`): name, tunables, hook costs.
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
        path_complete_ns: 0,
    },
};
