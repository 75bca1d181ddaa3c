//! BFQ's decisions (`block/bfq-iosched.c`): budgets and their feedback, charging by time,
//! when idling pays, low-latency weight raising, injection while idling, and what BFQ learns
//! of the device (peak rate, internal queueing).
//!
//! - **Budgets** (`__bfq_bfqq_recalc_budget`): a synchronous queue that used its whole budget
//!   gets four times as much next time, one that timed out twice as much, one that ran dry
//!   what it used, one that was idled for in vain less; asynchronous queues always get the
//!   maximum. `max_budget` 0 means automatic: what the estimated peak rate serves in
//!   `timeout_sync` (`bfq_calc_max_budget`).
//! - **Charging by time** (`bfq_bfqq_charge_time`): a seeky queue on a disk, or one that timed
//!   out with a third of its budget left, is charged as if it had used the device for its
//!   whole slice at the peak rate, so slow queues get time, not bandwidth, fairness.
//!   Asynchronous service is charged three times over (`bfq_async_charge_factor`) unless the
//!   scenario is asymmetric.
//! - **Idling** (`bfq_better_to_idle`): a synchronous queue that ran dry is waited for when
//!   that boosts throughput (a disk without command queueing; or a disk, or a device
//!   without internal queueing, and a sequential queue with a short think time that is
//!   I/O bound, busy at least 80% of the last ~200 ms, `bfq_update_io_intensity`) or when
//!   service guarantees need it (weights differ among
//!   the queues with pending I/O, several classes or groups are busy, or it is raised).
//!   Never on a queueing SSD with equal weights (bfq-iosched.rst §2).
//! - **Weight raising** (`low_latency`): a queue becoming busy after 2 s idle, or new, is
//!   interactive: weight x30 for `wr_duration` (reference duration scaled by reference rate /
//!   peak rate, 3..25 s), cut short after `MAX_SERVICE_FROM_WR` sectors. A queue that comes
//!   back no earlier than its service at 7000 sectors/s allows is soft real-time: x3000 for
//!   300 ms, then back to interactive raising if that began earlier and is not over
//!   (`switch_back_to_interactive_wr`), as when its last 32 requests were all seeks.
//!   Queues created in a burst (8 in one group, each within 180 ms of the last) are not
//!   raised. A raised
//!   queue preempts a queue in service that is not.
//! - **Injection** (`bfq_choose_bfqq_for_injection`, `bfq_update_inject_limit`): while the
//!   in-service queue is idled for, other queues' requests are dispatched, at most
//!   `inject_limit` at a time (0 for a new queue); the limit grows while the in-service
//!   queue's service time stays under 1.5x what it was without injection, shrinks
//!   otherwise, and is measured again every second. Only a request whose issuer has no
//!   other one outstanding is timed (`bfq_add_request`), from its arrival to its completion
//!   (`waited_rq`): an issuer that keeps several requests queued never moves its limit.
//!
//! Injection lives in `inject`, the device estimates (peak rate, `hw_tag`) in `estimate`.

use super::groups::{GROUP_BIT, GROUP_CLASS};
use super::sched::ioprio_to_weight;
use super::sched::{Bq, Expire, Key, Knobs, RqInfo, State, Wr};
use mqblk_core::{IoPrio, Nanos, RqId};

mod estimate;
mod inject;

/// `bfq_default_max_budget`, until the peak rate is known.
pub const DEFAULT_MAX_BUDGET: u64 = 16 * 1024;
const MIN_MAX_BUDGET: u64 = 256;
/// `bfq_stats_min_budgets`: `budgets_assigned` converges on 256 (7/8 of it plus 32 per
/// turn), so this is reached at the 11th turn.
const STATS_MIN_BUDGETS: u32 = 194;
/// `BFQQ_SEEK_THR`: a request farther than this from the previous one is a seek.
const SEEK_THR: u64 = 8 * 100;
/// `BFQQ_SECT_THR_NONROT`: on flash only requests smaller than 32 KiB count as seeks
/// (`BFQ_RQ_SEEKY`).
const SECT_THR_NONROT: u64 = 2 * 32;
/// `BFQQ_SEEKY`: more than this many seeks among the last 32 requests make a queue seeky
/// (19, as the kernel has had since 4.19; older BFQ used 32/8).
pub const SEEKY_BITS: u32 = 19;
/// `bfq_async_charge_factor`.
const ASYNC_CHARGE: u64 = 3;
/// `bfq_wr_coeff`, `BFQ_SOFTRT_WEIGHT_FACTOR`, `bfq_wr_rt_max_time`, `bfq_wr_min_idle_time`,
/// `bfq_wr_max_softrt_rate`.
pub(super) const WR_COEFF: u32 = 30;
const SOFTRT_FACTOR: u32 = 100;
const WR_RT_MAX_TIME: Nanos = Nanos::from_millis(300);
const WR_MIN_IDLE: Nanos = Nanos::from_secs(2);
const WR_MAX_SOFTRT_RATE: u64 = 7000;
/// Interactive raising ends after this much service (`max_service_from_wr`: "slightly more
/// than 110K" sectors, 120000).
const MAX_SERVICE_FROM_WR: u64 = 120_000;
/// Reference peak rates (`ref_rate`: 14000 and 33000 in the kernel's unit, sectors per
/// microsecond << `BFQ_RATE_SHIFT` (16), here in sectors per second) and raising durations
/// for rotational and non-rotational devices; the raising lasts
/// `ref_duration * ref_rate / peak_rate`, and the peak rate starts at 2/3 of `ref_rate`.
const REF_RATE: [u64; 2] = [(14_000 * 1_000_000) >> 16, (33_000 * 1_000_000) >> 16];
const REF_WR_DURATION: [Nanos; 2] = [Nanos::from_millis(7000), Nanos::from_millis(2500)];
const WR_DURATION_MIN: Nanos = Nanos::from_secs(3);
const WR_DURATION_MAX: Nanos = Nanos::from_secs(25);
/// 4 jiffies.
const FOUR_JIFFIES: Nanos = Nanos(4 * mqblk_core::time::JIFFY.0);
/// `bfq_wr_min_inter_arr_async`.
const WR_MIN_INTER_ARR_ASYNC: Nanos = Nanos::from_millis(500);
/// `IOPRIO_BE_NR`: how many times a higher class's weights count over a lower's in
/// `bfqq_request_over_limit`.
const IOPRIO_BE_NR: u64 = 8;

/// `DIV_ROUND_CLOSEST(limit * weight, wsum)`: a weight's share of `limit`.
fn round_share(limit: u64, weight: u64, wsum: u64) -> u64 {
    (limit * weight + wsum / 2) / wsum
}
/// `bfq_update_io_intensity`'s window.
const IO_INTENSITY_WINDOW: Nanos = Nanos::from_millis(200);
/// `bfq_burst_interval`, `bfq_large_burst_thresh`.
const BURST_INTERVAL: Nanos = Nanos::from_millis(180);
const LARGE_BURST: u32 = 8;
/// A queue split this recently is not counted in a burst.
const JUST_SPLIT: Nanos = Nanos::from_millis(10);
/// A queue of a large burst idle this long has finished its part of it.
const BURST_IDLE_LEAVE: Nanos = Nanos::from_secs(10);
/// `BFQ_HW_QUEUE_THRESHOLD`, `BFQ_HW_QUEUE_SAMPLES`.
const HW_QUEUE_THRESHOLD: u32 = 3;
const HW_QUEUE_SAMPLES: u32 = 32;
/// Peak-rate windows (`BFQ_RATE_MIN_SAMPLES`, `BFQ_RATE_MIN_INTERVAL`,
/// `BFQ_RATE_REF_INTERVAL`): a rate is computed from at least this many dispatches over at
/// least this long, and a window closes once it is this long.
const RATE_MIN_SAMPLES: u32 = 32;
const RATE_MIN_INTERVAL: Nanos = Nanos::from_millis(300);
const RATE_REF_INTERVAL: Nanos = Nanos::from_secs(1);
/// A dispatch after the device sat empty this long closes the window.
const RATE_IDLE_RESET: Nanos = Nanos::from_millis(100);
/// `BFQ_MIN_TT`: a dispatch this soon after a completion still counts as back to back.
const MIN_TT: Nanos = Nanos::from_millis(2);
/// Rates above this are not believed (20 M sectors/s).
const RATE_MAX: u64 = 20_000_000;
/// A request this soon after another queue's completion may have been woken by it; this
/// many times in a row make it the waker.
const WAKER_WINDOW: Nanos = Nanos::from_millis(4);
const WAKER_HITS: u32 = 3;
/// Injection is measured afresh this often.
const INJECT_RESET: Nanos = Nanos::from_secs(1);
/// `bfq_update_has_short_ttime`: a think-time state change starts the injection limit over
/// unless the limit fell less than this long ago (and the new state is short).
const INJECT_STATE_CHANGE: Nanos = Nanos::from_millis(100);
/// No measurement starts within this of the limit falling (`bfq_add_request`: 10 ms).
const INJECT_RECENT_DECREASE: Nanos = Nanos::from_millis(10);

/// `bfq_init_queue`: "begin by assuming, optimistically, that the device peak rate is equal
/// to 2/3 of the highest reference rate".
pub(super) fn initial_peak_rate(rotational: bool) -> u64 {
    REF_RATE[usize::from(!rotational)] * 2 / 3
}

impl State {
    /// `max_budget`, or when it is 0 what the peak rate serves in `timeout_sync`
    /// (`bfq_calc_max_budget`), the default until the rate is known.
    pub(super) fn max_budget(&self, k: &Knobs) -> u64 {
        // `bfq_max_budget`: the default until enough turns were handed out, whatever the
        // user set; then `bfqd->bfq_max_budget`.
        if self.budgets_assigned < STATS_MIN_BUDGETS {
            DEFAULT_MAX_BUDGET
        } else {
            self.raw_max_budget(k)
        }
    }

    /// `bfq_min_budget`: a 32nd of `bfq_max_budget`.
    pub(super) fn min_budget(&self, k: &Knobs) -> u64 {
        self.max_budget(k) / 32
    }

    /// `bfqd->bfq_max_budget` itself: the user's, or the default until the first
    /// peak-rate update (`update_thr_responsiveness_params`), then what the peak rate
    /// serves in `timeout_sync` (`bfq_calc_max_budget`).
    pub(super) fn raw_max_budget(&self, k: &Knobs) -> u64 {
        if k.user_max_budget > 0 {
            k.user_max_budget.max(64)
        } else if !self.dev.rate_measured {
            DEFAULT_MAX_BUDGET
        } else {
            (self.dev.peak_rate * k.timeout.0 / 1_000_000_000).clamp(MIN_MAX_BUDGET, 1 << 24)
        }
    }

    pub(super) fn is_seeky(&self, id: u32) -> bool {
        self.qr(id).seek_history.count_ones() > SEEKY_BITS
    }

    /// `bfq_bfqq_has_short_ttime`: the flag [`Self::update_has_short_ttime`] keeps.
    fn has_short_ttime(q: &Bq) -> bool {
        q.short_ttime
    }

    /// `bfq_update_has_short_ttime`, at each arrival after the think time is sampled: short
    /// until 80 samples are in, then while the mean think time is at most half of
    /// `slice_idle`. Not for an async or idle-class queue, nor with `slice_idle` 0 (no
    /// idling to decide), and not for `bfq_wr_min_idle_time` after a split ("Idle window
    /// just restored, statistics are meaningless"): the queue keeps the flag it resumed.
    /// A change of state before the queue's service time was measured, unless the limit
    /// fell in the last 100 ms and the new state is short, starts its injection limit over
    /// for the new state.
    fn update_has_short_ttime(&mut self, qid: u32, now: Nanos, k: &Knobs) {
        let q = self.qr(qid);
        if !q.sync || q.class == 2 || k.slice_idle == Nanos::ZERO {
            return;
        }
        if q.split_within(now, WR_MIN_IDLE) {
            return;
        }
        let short = q.ttime.samples <= 80 || q.ttime.mean <= k.slice_idle.0 / 2;
        let changed = short != std::mem::replace(&mut self.q(qid).short_ttime, short);
        let q = self.qr(qid);
        if changed
            && q.last_serv_time == 0
            && (now >= q.decrease_time.saturating_add(INJECT_STATE_CHANGE) || !short)
        {
            self.reset_inject_limit(qid, now);
        }
    }

    /// `bfq_reset_inject_limit`: the service time is to be measured again, and until then
    /// the limit is 0 for a queue that sends its next request quickly (it needs its own
    /// service time measured first) and 1 for one that thinks long.
    fn reset_inject_limit(&mut self, id: u32, now: Nanos) {
        let short = Self::has_short_ttime(self.qr(id));
        let q = self.q(id);
        q.last_serv_time = 0;
        q.inject_limit = u32::from(!short);
        q.decrease_time = now;
        self.inject.waited_rq = None;
    }

    /// How long to wait for queue `id`'s next request once it ran dry
    /// (`bfq_arm_slice_timer`): `slice_idle`, only `BFQ_MIN_TT` (2 ms) for a seeky queue that
    /// no guarantee needs idling for, at least 20 ms for a raised one.
    pub(super) fn slice_timer(&self, id: u32, k: &Knobs) -> Nanos {
        let q = self.qr(id);
        if self.is_seeky(id) && q.wr.coeff <= 1 && !self.asymmetric_for(Some(id)) {
            k.slice_idle.min(Nanos::from_millis(2))
        } else if q.wr.coeff > 1 {
            k.slice_idle.max(Nanos::from_millis(20))
        } else {
            k.slice_idle
        }
    }

    /// Weights differ among the queues with pending I/O, or several classes or groups are
    /// busy (`bfq_asymmetric_scenario`).
    pub(super) fn asymmetric(&self) -> bool {
        self.asymmetric_for(None)
    }

    /// The same, for idling on queue `id`: weights that differ do not count when `id` has the
    /// smallest of them (idling for it would protect nobody).
    pub(super) fn asymmetric_for(&self, id: Option<u32>) -> bool {
        let smallest = id
            .and_then(|i| self.qr(i).counted)
            .is_some_and(|w| self.load.weights.iter().all(|&(x, _)| x >= w));
        (self.load.weights.len() > 1 && !smallest)
            || self.load.busy_classes.iter().filter(|&&n| n > 0).count() > 1
            || self.groups.with_pending > 1
    }

    /// Service to charge for `sectors` of queue `id` (`bfq_serv_to_charge`).
    /// The scenario is judged for the queue (`bfq_asymmetric_scenario(bfqd, bfqq)`): an
    /// asynchronous queue of the smallest weight is charged the async factor even where
    /// other weights differ.
    pub(super) fn serv_to_charge(&self, id: u32, sectors: u64) -> u64 {
        let q = self.qr(id);
        if q.sync || q.wr.coeff > 1 || self.asymmetric_for(Some(id)) {
            sectors
        } else {
            sectors * ASYNC_CHARGE
        }
    }

    /// What the ending turn of queue `id` is charged: its service, or its time.
    pub(super) fn charge_for_turn(&mut self, id: u32, why: Expire, now: Nanos, k: &Knobs) -> u64 {
        let used = self.service;
        let q = self.qr(id);
        let left = q.budget.saturating_sub(used);
        // `bfq_bfqq_is_slow`: a seeky sync queue, or over a turn longer than 20 ms one that
        // got less than half the largest budget. The turn ends where idling began when it
        // timed out idling (`compensate`); a turn under 1 ms counts as one seek on a disk
        // (`slice_idle`) and as `BFQ_MIN_TT` (2 ms) elsewhere. Times are whole ms.
        let end = if why == Expire::TooIdle {
            self.last_idling_start.max(self.slice_start)
        } else {
            now
        };
        let delta = end.saturating_sub(self.slice_start);
        let mut slow = q.sync && self.is_seeky(id);
        let delta_ms = if delta < Nanos::from_millis(1) {
            if self.dev.rotational {
                k.slice_idle.0 / 1_000_000
            } else {
                2
            }
        } else {
            if q.sync && delta > Nanos::from_millis(20) {
                slow = used < self.max_budget(k) / 2;
            }
            delta.0 / 1_000_000
        };
        if q.wr.coeff > 1 || !(slow || (why == Expire::BudgetTimeout && left >= q.budget / 3)) {
            return used;
        }
        // `bfq_bfqq_charge_time`.
        let timeout_ms = (k.timeout.0 / 1_000_000).max(1);
        let by_time = self.max_budget(k) * delta_ms.min(timeout_ms) / timeout_ms;
        if by_time > used {
            self.stats.charged_time += 1;
            by_time
        } else {
            used
        }
    }

    /// The budget of queue `id`'s next turn (`__bfq_bfqq_recalc_budget`): the feedback on
    /// its `max_budget` by how the turn ended, a raised queue held at twice the minimum,
    /// an asynchronous one at the device's largest; a backlogged queue's next turn gets
    /// it (at least its next request's charge), an empty one keeps its turn's budget
    /// until it has requests again (`update_budget_for_activation`). A preempted queue not
    /// raised changes nothing.
    pub(super) fn recalc_budget(&mut self, id: u32, why: Expire, k: &Knobs) {
        let min_budget = self.min_budget(k);
        let raw = self.raw_max_budget(k);
        let used = self.service;
        let capped = self.budgets_assigned >= STATS_MIN_BUDGETS && k.user_max_budget == 0;
        let q = self.qr(id);
        let mut b = if q.wr.coeff > 1 {
            2 * min_budget
        } else {
            q.max_budget
        };
        if q.sync && q.wr.coeff <= 1 {
            b = match why {
                Expire::TooIdle if q.dispatched > 0 => (b * 2).min(raw),
                Expire::TooIdle if b > 5 * min_budget => b - 4 * min_budget,
                Expire::TooIdle => min_budget,
                Expire::BudgetTimeout => (b * 2).min(raw),
                Expire::BudgetExhausted => (b * 4).min(raw),
                Expire::NoMoreRequests => used.max(min_budget),
                Expire::Preempted => return,
            };
        } else if !q.sync {
            b = raw;
        }
        if capped {
            b = b.min(raw);
        }
        self.q(id).max_budget = b;
        if !self.qr(id).sorted.is_empty() {
            self.q(id).budget = self.budget_for_next(id);
        }
    }

    /// `bfqq_request_over_limit`: whether queue `qid`, or a group above it, already holds
    /// at least its weight's share of `limit` requests (`entity.allocated`). Shares are taken
    /// from the top down, each of what the level above got: a group's of the weights in its
    /// parent's tree, the queue's of its group's trees of its own and every higher class,
    /// a higher class's sum counted 8 times over (`IOPRIO_BE_NR`) so that a light queue of
    /// a higher class gets more than a heavy one of a lower. Never while the queue, or a
    /// group above it, is off its tree (`on_st_or_in_serv`: neither backlogged, nor in
    /// service, nor idle with its finish time ahead): its request must get in to activate
    /// it. The sums count idle entities too, as `st->wsum` does.
    pub(super) fn request_over_limit(&self, qid: u32, limit: u32) -> bool {
        let q = self.qr(qid);
        let trees = &self.groups.slots[q.group as usize].trees;
        if !(trees[q.class].on_tree(qid) || self.in_service == Some(qid)) {
            return false;
        }
        // The kernel gathers the entities above first and gives up if any is off its tree.
        let mut g = q.group;
        while g != 0 {
            let parent = self.groups.slots[g as usize].parent;
            if !self.groups.slots[parent as usize].trees[GROUP_CLASS].on_tree(GROUP_BIT | g) {
                return false;
            }
            g = parent;
        }
        let Some(limit) = self.group_request_limit(q.group, u64::from(limit)) else {
            return true;
        };
        let wsum = trees[..=q.class]
            .iter()
            .fold(0, |sum, t| sum * IOPRIO_BE_NR + t.wsum());
        wsum > 0 && u64::from(q.allocated) >= round_share(limit, u64::from(q.weight()), wsum)
    }

    /// The requests group `g` may hold of the `limit` at the root, its share taken from the
    /// top down (`bfqq_request_over_limit`'s walk over the levels above the queue), or
    /// `None` if it or a group above it already holds its share. A level whose tree has no
    /// weight passes the limit on as it is.
    fn group_request_limit(&self, g: u32, limit: u64) -> Option<u64> {
        if g == 0 {
            return Some(limit);
        }
        let grp = &self.groups.slots[g as usize];
        let limit = self.group_request_limit(grp.parent, limit)?;
        let wsum = self.groups.slots[grp.parent as usize].trees[GROUP_CLASS].wsum();
        if wsum == 0 {
            return Some(limit);
        }
        let limit = round_share(limit, u64::from(grp.weight), wsum);
        (u64::from(grp.allocated) < limit).then_some(limit)
    }

    /// `bfq_updated_next_req`: a queued queue not in service whose next request changed
    /// gets the budget that request asks for, `max(max_budget, its charge, the service it
    /// already got by injection)`, and if that differs from its budget, its place on the
    /// tree follows (`bfq_requeue_bfqq`). A queue in service keeps its budget ("budgets
    /// cannot be changed after an entity has been selected").
    pub(super) fn updated_next_req(&mut self, id: u32) {
        if self.in_service == Some(id) || !self.qr(id).in_tree {
            return;
        }
        let Some(rq) = self.qr(id).next_rq else {
            return;
        };
        let info = &self.rqs[rq as usize];
        let charge = self.serv_to_charge(id, (info.end - info.sector).max(1));
        let q = self.qr(id);
        let budget = q.max_budget.max(charge).max(q.injected);
        if budget != q.budget {
            let (group, class) = (q.group, q.class);
            self.q(id).budget = budget;
            self.groups.rebudget(group, id, class, budget);
        }
    }

    /// `max(max_budget, the next request's charge)`: the budget a turn starts with.
    pub(super) fn budget_for_next(&self, id: u32) -> u64 {
        let rq = self
            .qr(id)
            .next_rq
            .expect("a queue with requests has a next one");
        let info = &self.rqs[rq as usize];
        let charge = self.serv_to_charge(id, (info.end - info.sector).max(1));
        self.qr(id).max_budget.max(charge)
    }

    /// How long interactive raising lasts on this device (`bfq_wr_duration`).
    fn wr_duration(&self) -> Nanos {
        let i = usize::from(!self.dev.rotational);
        let r = self.dev.peak_rate.max(1);
        let d = Nanos((REF_WR_DURATION[i].0 as u128 * REF_RATE[i] as u128 / r as u128) as u64);
        d.max(WR_DURATION_MIN).min(WR_DURATION_MAX)
    }

    /// Ends the raising of busy queue `id` when its time is up (`bfq_update_wr_data`).
    pub(super) fn update_wr(&mut self, id: u32, now: Nanos, k: &Knobs) {
        let q = self.qr(id);
        if q.wr.coeff <= 1 {
            return;
        }
        if !k.low_latency || q.in_large_burst {
            self.end_wr(id, true);
        } else if now.saturating_sub(q.wr.start) > q.wr.max_time {
            self.end_or_switch_back_wr(id, now, true);
        }
        let q = self.qr(id);
        if q.wr.coeff > 1 && !q.wr.soft_rt && q.wr.service > MAX_SERVICE_FROM_WR {
            self.end_wr(id, true);
        }
    }

    /// `bfq_add_request` for a queue already busy: an asynchronous one not raised whose
    /// request comes more than `bfq_wr_min_inter_arr_async` after its last arrival or expiry
    /// is raised as interactive (its writes were held back). The caller moves the clock on
    /// at every arrival.
    pub(super) fn raise_async_on_arrival(&mut self, qid: u32, now: Nanos, k: &Knobs) {
        let d = self.wr_duration();
        let q = self.q(qid);
        if q.wr.coeff > 1 {
            return;
        }
        if k.low_latency
            && !q.sync
            && now.saturating_sub(q.last_wr_start_finish) > WR_MIN_INTER_ARR_ASYNC
        {
            q.wr = Wr {
                coeff: WR_COEFF,
                start: now,
                max_time: d,
                service: 0,
                soft_rt: false,
                interactive_start: None,
            };
            self.load.wr_busy += 1;
            self.stats.wr_async += 1;
            self.update_pending(qid);
        }
    }

    /// `bfq_bfqq_end_wr`. The end of interactive raising also forgets how much bandwidth
    /// the queue took meanwhile, so an application that loaded fast may be soft real-time
    /// at once.
    /// `busy`: the queue counts among the busy ones (`wr_busy`): in the tree, in service or
    /// being expired; a request arriving at an idle queue may end its raising too.
    fn end_wr(&mut self, id: u32, busy: bool) {
        let now = self.now;
        let q = self.q(id);
        if !q.wr.soft_rt {
            q.soft_rt_next_start = now;
        }
        q.last_wr_start_finish = now;
        self.q(id).wr = Wr::default();
        if busy {
            self.load.wr_busy -= 1;
        }
        self.stats.wr_ended += 1;
        self.update_pending(id);
    }

    /// Soft real-time raising that ends while the interactive raising it interrupted would
    /// still run goes back to that (`switch_back_to_interactive_wr`); any other ends.
    fn end_or_switch_back_wr(&mut self, id: u32, now: Nanos, busy: bool) {
        let w = self.qr(id).wr;
        let d = self.wr_duration();
        match w.interactive_start {
            Some(s) if w.soft_rt && now.saturating_sub(s) <= d => {
                self.q(id).wr = Wr {
                    coeff: WR_COEFF,
                    start: s,
                    max_time: d,
                    service: w.service,
                    soft_rt: false,
                    interactive_start: None,
                };
                self.stats.wr_switched_back += 1;
                self.update_pending(id);
            }
            _ => self.end_wr(id, busy),
        }
    }

    /// When queue `id`, just gone empty, may next count as soft real-time: no earlier than
    /// its service since it became busy allows at 7000 sectors/s, nor than an idle slice and 4
    /// jiffies from now, nor than before (`bfq_bfqq_softrt_next_start`).
    pub(super) fn note_soft_rt_next_start(&mut self, id: u32, now: Nanos, k: &Knobs) {
        let q = self.q(id);
        if !q.sorted.is_empty() || !k.low_latency {
            return;
        }
        let by_rate = q.last_backlogged.saturating_add(Nanos(
            q.service_from_backlogged * 1_000_000_000 / WR_MAX_SOFTRT_RATE,
        ));
        let soonest = now
            .saturating_add(k.slice_idle)
            .saturating_add(FOUR_JIFFIES);
        q.soft_rt_next_start = q.soft_rt_next_start.max(by_rate).max(soonest);
    }

    /// Sync queue `qid` was just created: burst detection (`bfq_handle_burst`, called from
    /// `bfq_init_rq` while a burst is under way or no queue is busy). Queues of one group
    /// made less than 180 ms apart form a burst; the 8th makes it large, and a large burst's
    /// queues are neither raised nor idled for. A burst that begins while other queues are
    /// busy does not count its first queue.
    pub(super) fn note_creation(&mut self, qid: u32, now: Nanos) {
        let q = self.qr(qid);
        let busy: u32 = self.load.busy_classes.iter().sum();
        let just_split = q.split_within(now, JUST_SPLIT);
        if !q.sync
            || !(self.burst.size > 0 || busy == 0)
            || q.in_large_burst
            || self.burst.list.contains(&qid)
            || just_split
        {
            return;
        }
        let group = q.group;
        if now.saturating_sub(self.burst.last_ins) > BURST_INTERVAL
            || self.burst.group != Some(group)
        {
            // `bfq_reset_burst_list`.
            self.burst.large = false;
            self.burst.list.clear();
            if busy == 0 {
                self.burst.list.push(qid);
                self.burst.size = 1;
            } else {
                self.burst.size = 0;
            }
            self.burst.group = Some(group);
        } else if self.burst.large {
            self.q(qid).in_large_burst = true;
        } else {
            // `bfq_add_to_burst`.
            self.burst.size += 1;
            if self.burst.size == LARGE_BURST {
                self.burst.large = true;
                for id in std::mem::take(&mut self.burst.list) {
                    if let Some(q) = self.queues.get_mut(id as usize).and_then(|q| q.as_mut()) {
                        q.in_large_burst = true;
                    }
                }
                self.q(qid).in_large_burst = true;
            } else {
                self.burst.list.push(qid);
            }
        }
        self.burst.last_ins = now;
    }

    /// A request arrived for queue `qid`: think time, its short-or-long state and seek
    /// history (`bfq_update_io_thinktime`, `bfq_update_has_short_ttime`,
    /// `bfq_update_io_seektime`).
    pub(super) fn note_arrival(&mut self, qid: u32, sector: u64, end: u64, now: Nanos, k: &Knobs) {
        self.update_io_intensity(qid, now);
        let nonrot = !self.dev.rotational;
        // `bfq_update_io_thinktime` samples only a queue with nothing in flight that is not
        // busy: not one in its tree, and not the in-service queue idled for (a gap shorter
        // than the idling window is never a sample).
        let busy = self.in_service == Some(qid) || self.qr(qid).in_tree;
        let q = self.q(qid);
        if q.dispatched == 0 && q.sorted.is_empty() && !q.fresh && !busy {
            let elapsed = now
                .saturating_sub(q.ttime.last_end)
                .0
                .min(2 * k.slice_idle.0);
            let t = &mut q.ttime;
            t.samples = (7 * t.samples + 256) / 8;
            t.total = (7 * t.total + 256 * elapsed) / 8;
            t.mean = (t.total + 128) / t.samples.max(1);
        }
        self.update_has_short_ttime(qid, now, k);
        let q = self.q(qid);
        let far = sector.abs_diff(q.last_rq_end) > SEEK_THR;
        let seek = far && (!nonrot || end - sector < SECT_THR_NONROT);
        q.seek_history = (q.seek_history << 1) | u32::from(seek);
        q.last_rq_end = end;
        // A soft real-time queue whose last 32 requests were all seeks is no player
        // (`bfq_update_io_seektime`, `BFQQ_TOTALLY_SEEKY`).
        if q.wr.coeff > 1 && q.wr.soft_rt && q.seek_history == u32::MAX {
            let busy = self.qr(qid).in_tree || self.in_service == Some(qid);
            self.end_or_switch_back_wr(qid, now, busy);
        }
    }

    /// `bfq_update_io_intensity`, for a request arriving at sync queue `qid`: the queue is
    /// I/O bound if it was idle (empty, nothing in flight) at most a fifth of the window.
    fn update_io_intensity(&mut self, qid: u32, now: Nanos) {
        let q = self.q(qid);
        if !q.sync {
            return;
        }
        let window = now.saturating_sub(q.io_start);
        if q.sorted.is_empty() && q.dispatched == 0 {
            q.idle = q.idle.saturating_add(now.saturating_sub(q.ttime.last_end));
        }
        if q.fresh {
            return;
        }
        q.io_bound = q.idle.0.saturating_mul(5) <= window.0;
        if window > IO_INTENSITY_WINDOW {
            q.io_start = Nanos(now.0 - window.0 / 2);
            q.idle = Nanos(q.idle.0 / 2);
        }
    }

    /// Queue `qid` has requests again (`bfq_bfqq_handle_idle_busy_switch`): raise its weight
    /// if it is interactive or soft real-time, put it in its tree, and let it preempt the
    /// queue in service if it deserves the device more.
    pub(super) fn idle_to_busy(&mut self, qid: u32, issuer: u32, now: Nanos, k: &Knobs) {
        let q = self.q(qid);
        let idle_for_long = q.fresh || now.saturating_sub(q.last_idle) >= WR_MIN_IDLE;
        // Only synchronous queues are raised: nobody waits on asynchronous writes.
        let eligible = k.low_latency && q.sync && q.class != 2 && !q.in_large_burst;
        // Only queues of the default weight are raised, interactive or soft real-time: a
        // weight set on purpose (an I/O priority) is the user's (`new_weight == 40` in
        // `bfq_bfqq_handle_idle_busy_switch`).
        let default_weight = q.base_weight == ioprio_to_weight(IoPrio::DEFAULT.level());
        let interactive = eligible && idle_for_long && default_weight;
        let soft_rt = eligible
            && q.seek_history != u32::MAX
            && default_weight
            && q.dispatched == 0
            && now > q.soft_rt_next_start;
        // Idle for 10 s after a burst it was part of: its part of that burst is over.
        let leaves_burst = !q.fresh
            && idle_for_long
            && now.saturating_sub(q.last_idle) > BURST_IDLE_LEAVE
            && q.in_large_burst;
        if leaves_burst {
            q.in_large_burst = false;
        }
        q.fresh = false;
        q.retire_at = None;
        q.last_backlogged = now;
        q.woken_at = now;
        q.service_from_backlogged = 0;
        q.softrt_update = false;
        let old = q.wr;
        // A queue made when its issuer left a shared queue (`split_time`) keeps what it
        // resumed for `bfq_wr_min_idle_time`: its arrivals start, renew, switch and end no
        // raising until then (`bfq_bfqq_handle_idle_busy_switch` calls
        // `bfq_update_bfqq_wr_on_rq_arrival` only once `split_time + bfq_wr_min_idle_time`
        // has passed).
        if !q.split_within(now, WR_MIN_IDLE) {
            self.update_wr_on_rq_arrival(qid, issuer, interactive, soft_rt, now);
        }
        if leaves_burst {
            self.burst.list.retain(|&b| b != qid);
        }
        // `bfq_bfqq_update_budg_for_activation`: back in time (within three idle slices of
        // its last completion) after running dry with budget left, it resumes that turn at
        // its old place, and may preempt to recover the service hole.
        // Otherwise its turn starts afresh with `max(max_budget, next request's charge)`.
        // Then a queue whose raising starts now gets at most twice the minimum budget, to
        // keep its turn close to its backlog (`bfq_update_bfqq_wr_on_rq_arrival`).
        let q = self.q(qid);
        let arrived_in_time = now <= q.ttime.last_end.saturating_add(Nanos(3 * k.slice_idle.0));
        // The flag stays set when the turn is resumed ("We do not clear the flag
        // non_blocking_wait_rq here").
        let wants_to_preempt = q.non_blocking_wait_rq && arrived_in_time && q.hole_left > 0;
        if wants_to_preempt {
            q.budget = q.hole_left.min(q.max_budget);
        } else {
            q.non_blocking_wait_rq = false;
            let b = self.budget_for_next(qid);
            self.q(qid).budget = b;
        }
        if old.coeff <= 1 && self.qr(qid).wr.coeff > 1 {
            let cap = 2 * self.min_budget(k);
            let q = self.q(qid);
            q.budget = q.budget.min(cap);
        }
        self.activate_at(qid, wants_to_preempt);
        self.update_pending(qid);
        let Some(s) = self.in_service else { return };
        if s == qid {
            return;
        }
        // The end of `bfq_bfqq_handle_idle_busy_switch`: preempt for a service hole (if at
        // least as raised), for a higher class or weight, or because idling for the queue
        // in service no longer pays; and only if the root's next entity is not the one in
        // service (`next_queue_may_preempt`).
        let hole = wants_to_preempt && self.qr(qid).wr.coeff >= self.qr(s).wr.coeff;
        let preempt = (hole || self.higher_class_or_weight(qid, s) || !self.better_to_idle(s, k))
            && self.groups.next_may_preempt(self.qr(s).group);
        if preempt {
            self.expire(k, Expire::Preempted, now);
            self.restart = true;
        }
    }

    /// `bfq_update_bfqq_wr_on_rq_arrival`: the raising of queue `qid`, just busy again, as
    /// its arrival finds it `interactive` or `soft_rt`: started if it has none, restarted
    /// as interactive, ended for a queue of a large burst, or switched to soft real-time.
    fn update_wr_on_rq_arrival(
        &mut self,
        qid: u32,
        issuer: u32,
        interactive: bool,
        soft_rt: bool,
        now: Nanos,
    ) {
        let wr_duration = self.wr_duration();
        // A raising starts only for a queue of one issuer, or for the request of an issuer
        // that came to its shared queue by a stable merge: queues merged as cooperators are
        // kept out of it (`bfqq->bic || RQ_BIC(rq)->stably_merged` in
        // `bfq_bfqq_handle_idle_busy_switch`; `bfq_init_rq` sets `bfqq->bic` while one
        // process holds the queue, and a queue whose issuers all moved on has none).
        let may_start = self.qr(qid).issuers.len() == 1 || self.stably_merged.contains(&issuer);
        let q = self.q(qid);
        let old = q.wr;
        // What changed, counted once the queue is no longer borrowed.
        let (mut n_interactive, mut n_soft_rt, mut n_ended) = (0, 0, 0);
        let interactive_wr = |service| Wr {
            coeff: WR_COEFF,
            start: now,
            max_time: wr_duration,
            service,
            soft_rt: false,
            interactive_start: None,
        };
        if old.coeff <= 1 {
            if may_start && (interactive || soft_rt) {
                q.wr = if interactive {
                    n_interactive += 1;
                    interactive_wr(0)
                } else {
                    n_soft_rt += 1;
                    Wr {
                        coeff: WR_COEFF * SOFTRT_FACTOR,
                        start: now,
                        max_time: WR_RT_MAX_TIME,
                        service: 0,
                        soft_rt: true,
                        interactive_start: None,
                    }
                };
            }
        } else if interactive {
            // Idle long again: the interactive raising starts over.
            q.wr = interactive_wr(old.service);
            n_interactive += 1;
        } else if q.in_large_burst {
            q.wr = Wr::default();
            n_ended += 1;
        } else if soft_rt {
            // A player (also one raised as interactive until now) is raised as one, and
            // remembers when its interactive raising began.
            let interactive_start = if old.soft_rt {
                old.interactive_start
            } else {
                Some(old.start)
            };
            q.wr = Wr {
                coeff: WR_COEFF * SOFTRT_FACTOR,
                start: now,
                max_time: WR_RT_MAX_TIME,
                service: old.service,
                soft_rt: true,
                interactive_start,
            };
            n_soft_rt += 1;
        }
        self.stats.wr_interactive += n_interactive;
        self.stats.wr_soft_rt += n_soft_rt;
        self.stats.wr_ended += n_ended;
    }

    /// `bfq_bfqq_higher_class_or_weight`: a better class, or a higher weight (raising
    /// included); queues of different groups compare their groups' weights.
    fn higher_class_or_weight(&self, a: u32, b: u32) -> bool {
        let (qa, qb) = (self.qr(a), self.qr(b));
        if qa.class < qb.class {
            return true;
        }
        if qa.group == qb.group {
            return qa.weight() > qb.weight();
        }
        let w = |q: &Bq| match q.group {
            0 => q.weight(),
            g => self.groups.weight_of(g),
        };
        w(qa) > w(qb)
    }

    /// Queue `qid` got a request again soon after another queue's request completed. Three
    /// times in a row from the same queue make that queue its waker (`bfq_check_waker`):
    /// an issuer that writes through one queue and waits for it before reading through its
    /// own, as a file system's fsync does.
    /// Only a queue that thinks long can be waiting for another: one with a short think
    /// time is never checked. The three hits must come within 128 idle slices of the first.
    /// The current waker's wake-ups count like any other's ("bfq: Allow current waker to
    /// defend against a tentative one", Linux 5.19): each restarts the count a tentative
    /// rival had, and three of them confirm it again, which puts the queue back at the head
    /// of its waker's `woken_list`.
    fn detect_waker(&mut self, qid: u32, now: Nanos, k: &Knobs) {
        let Some((w, at)) = self.last_completion else {
            return;
        };
        if w == qid
            || now.saturating_sub(at) >= WAKER_WINDOW
            || self.queues[w as usize].is_none()
            || Self::has_short_ttime(self.qr(qid))
        {
            return;
        }
        let q = self.q(qid);
        let window = Nanos(128 * k.slice_idle.0);
        if q.tentative_waker == Some(w) && now.saturating_sub(q.waker_since) <= window {
            q.waker_hits += 1;
        } else {
            q.tentative_waker = Some(w);
            q.waker_hits = 1;
            q.waker_since = now;
        }
        if q.waker_hits == WAKER_HITS {
            q.set_waker(w, now);
            self.stats.wakers += 1;
        }
    }

    /// Whether to keep the device for queue `id`, which ran dry (`bfq_better_to_idle`).
    /// In the kernel's order: no idling for a queue no process uses any more (its issuers
    /// were redirected by a queue merge: `bfqq_process_refs`), then `strict_guarantees`
    /// idles for anything, then no idling without `slice_idle`, for an async queue or for
    /// the idle class.
    pub(super) fn better_to_idle(&self, id: u32, k: &Knobs) -> bool {
        let q = self.qr(id);
        if q.issuers.is_empty() {
            return false;
        }
        if k.strict {
            return true;
        }
        if k.slice_idle == Nanos::ZERO || q.class == 2 || !q.sync {
            return false;
        }
        // `idling_boosts_thr_without_issues`: not while any queue is raised, so that raised
        // queues get the device's requests first; a raised queue is idled for only where
        // its guarantees need it (`idling_needed_for_service_guarantees`). So two new
        // sequential readers on a disk, both raised as interactive for their first
        // seconds, are not idled for, and seek.
        self.idling_boosts_thr_without_issues(id) || self.idling_needed_for_service_guarantees(id)
    }

    /// `idling_needed_for_service_guarantees`, whatever the think time: queue `id` is raised
    /// while queues that are not are busy (or the device holds many other requests), the
    /// scenario is asymmetric (`bfq_asymmetric_scenario`), or it is the only busy queue.
    pub(super) fn idling_needed_for_service_guarantees(&self, id: u32) -> bool {
        let q = self.qr(id);
        if q.issuers.is_empty() {
            return false;
        }
        let busy: u32 = self.load.busy_classes.iter().sum();
        (q.wr.coeff > 1 && (self.load.wr_busy < busy || self.dev.rq_in_driver >= q.dispatched + 4))
            || self.asymmetric_for(Some(id))
            || busy == 1
    }

    /// `idling_boosts_thr_without_issues`: idling for queue `id` boosts the throughput (a
    /// disk without command queueing, or a disk or a device without queueing and a
    /// sequential queue with a short think time), and no queue is raised, so raised queues
    /// get the device's requests first. No queue a process still uses, no idling.
    pub(super) fn idling_boosts_thr_without_issues(&self, id: u32) -> bool {
        let q = self.qr(id);
        if q.issuers.is_empty() {
            return false;
        }
        let hw_tag = self.dev.hw_tag.unwrap_or(true);
        let rot_without_queueing = self.dev.rotational && !hw_tag;
        let seq_io_bound = !self.is_seeky(id) && q.io_bound && Self::has_short_ttime(q);
        let boosts = rot_without_queueing || ((self.dev.rotational || !hw_tag) && seq_io_bound);
        boosts && self.load.wr_busy == 0
    }
}
