//! kyber: a latency-targeting scheduler (`block/kyber-iosched.c`,
//! Documentation/block/kyber-iosched.rst).
//!
//! Requests are split into four domains by operation (read, write, discard, other). Each
//! domain has a pool of tokens, the most requests of that kind allowed in the device at once.
//! Completions feed per-domain latency histograms; a timer compares their percentiles with the
//! targets (`read_lat_nsec`, `write_lat_nsec`) and resizes the pools: when some domain's I/O
//! latency shows congestion, domains meeting their target are throttled, and domains missing it
//! are given more room. Kyber does not sort by sector.
//!
//! It keeps its queues per hardware queue (and per Ctx within it), so it is `MQ_AWARE`: every
//! hardware queue may be run, and each returns only its own requests.

use mqblk_core::sync::Mutex;
use mqblk_core::{
    merge, Bio, BioMerge, Elevator, ElevatorInit, ElevatorType, ElvCost, ElvCtx, ElvFeatures,
    ElvRq, HctxIdx, LockScope, Nanos, ReqFlags, ReqOp, RqId, TunableDesc, Tunables,
};
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};

const NUM_DOMAINS: usize = 4;
/// Domains whose latency is measured (all but OTHER).
const NUM_LAT_DOMAINS: usize = 3;
const DOMAIN_NAMES: [&str; NUM_DOMAINS] = ["read", "write", "discard", "other"];
/// The most tokens each domain may ever have, and its starting depth (`kyber_depth`).
const DOMAIN_DEPTH: [u32; NUM_DOMAINS] = [256, 128, 64, 16];
/// Requests dispatched from one domain before moving to the next (`kyber_batch_size`).
const BATCH_SIZE: [u32; NUM_DOMAINS] = [16, 8, 1, 1];
/// The discard target is fixed, as in the kernel (5 s, not exposed).
const DISCARD_LAT: Nanos = Nanos::from_secs(5);
/// Latency buckets are `target / 4` wide: four "good" buckets, four "bad".
const LATENCY_SHIFT: u32 = 2;
const GOOD_BUCKETS: usize = 4;
const LATENCY_BUCKETS: usize = 8;
/// Latency types: total (from allocation) and I/O (from issue to the driver).
const TOTAL: usize = 0;
const IO: usize = 1;
/// Percentiles need this many samples, or a second since the first one.
const MIN_SAMPLES: u32 = 500;
const SAMPLE_WINDOW: Nanos = Nanos::from_secs(1);
/// The timer fires within this long after a completion (`HZ / 10`).
const TIMER_DELAY: Nanos = Nanos::from_millis(100);
/// Async requests may use this share of the scheduler tags (`KYBER_ASYNC_PERCENT`).
const ASYNC_PERCENT: u32 = 75;
const NO_TOKEN: u8 = u8::MAX;

static TUNABLES: [TunableDesc; 2] = [
    TunableDesc {
        name: "read_lat_nsec",
        unit: "ns",
        default: 2_000_000,
        min: 0,
        max: i64::MAX,
        help: "target latency of reads",
    },
    TunableDesc {
        name: "write_lat_nsec",
        unit: "ns",
        default: 10_000_000,
        min: 0,
        max: i64::MAX,
        help: "target latency of writes",
    },
];

/// `kyber_sched_domain`.
fn domain_of(op: ReqOp) -> usize {
    match op {
        ReqOp::Read => 0,
        ReqOp::Write => 1,
        ReqOp::Discard => 2,
        // Zone append and zone management are "other" too: only REQ_OP_WRITE is a write.
        ReqOp::Flush
        | ReqOp::WriteZeroes
        | ReqOp::ZoneAppend
        | ReqOp::ZoneReset
        | ReqOp::ZoneResetAll
        | ReqOp::ZoneOpen
        | ReqOp::ZoneClose
        | ReqOp::ZoneFinish => 3,
    }
}

/// kyber's statistics (`Kyber::typed_stats`), per scheduling domain in the order read,
/// write, discard, other.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KyberStats {
    /// Each domain's current token depth (the sbitmap depth `kyber_resize_domain` sets).
    pub depth: [u32; NUM_DOMAINS],
    /// Tokens held now.
    pub in_use: [u32; NUM_DOMAINS],
    /// Depth changes the timer made (`kyber_timer_fn`).
    pub adjustments: u64,
}

impl KyberStats {
    /// The figures by name, for reports that handle any scheduler.
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        const DEPTH: [&str; NUM_DOMAINS] =
            ["read_depth", "write_depth", "discard_depth", "other_depth"];
        const USE: [&str; NUM_DOMAINS] = [
            "read_in_use",
            "write_in_use",
            "discard_in_use",
            "other_in_use",
        ];
        let mut v = vec![("adjustments", self.adjustments)];
        v.extend(DEPTH.into_iter().zip(self.depth.map(u64::from)));
        v.extend(USE.into_iter().zip(self.in_use.map(u64::from)));
        v
    }
}

/// A resizable pool of tokens (the kernel uses a resizable `sbitmap_queue`; only the count
/// matters), with its wake-up batching: hardware queues that found it empty wait, and are run
/// once `wake_batch` tokens have been freed while someone waited (`sbitmap_queue_wake_up`).
struct TokenPool {
    depth: AtomicU32,
    used: AtomicU32,
    /// Hardware queues waiting for a token (`ws_active`).
    waiters: AtomicU32,
    /// Tokens freed while someone waited, and those a wake-up has been paid with
    /// (`completion_cnt`, `wakeup_cnt`).
    completion_cnt: AtomicU32,
    wakeup_cnt: AtomicU32,
}

impl TokenPool {
    fn get(&self) -> bool {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used >= self.depth.load(Ordering::Relaxed) {
                return false;
            }
            match self.used.compare_exchange_weak(
                used,
                used + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(u) => used = u,
            }
        }
    }
    /// `sbq_calc_wake_batch`: an eighth of the depth, 1 to 8 (`SBQ_WAKE_BATCH`).
    fn wake_batch(&self) -> u32 {
        (self.depth.load(Ordering::Relaxed) / 8).clamp(1, 8)
    }

    /// Frees a token; true when it completes a wake batch, so the waiters are to be run.
    /// Where we differ: also when it was the last token in use, so that a waiter is never
    /// left behind when the depth grew past what is in flight (the batch is taken from the
    /// depth now, which the timer may have raised since the waiter began to wait).
    fn put(&self) -> bool {
        let prev = self.used.fetch_sub(1, Ordering::AcqRel);
        assert!(prev > 0, "kyber: token freed twice");
        if self.waiters.load(Ordering::Acquire) == 0 {
            return false;
        }
        let done = self.completion_cnt.fetch_add(1, Ordering::AcqRel) + 1;
        let batch = self.wake_batch();
        let mut woken = self.wakeup_cnt.load(Ordering::Acquire);
        loop {
            if done.wrapping_sub(woken) < batch {
                return prev == 1;
            }
            match self.wakeup_cnt.compare_exchange_weak(
                woken,
                woken.wrapping_add(batch),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(w) => woken = w,
            }
        }
    }
}

/// Per Ctx within a hardware queue: one list per domain (`kyber_ctx_queue`).
type Kcq = Mutex<[VecDeque<RqId>; NUM_DOMAINS]>;

/// Per hardware queue state (`kyber_hctx_data`).
struct Khd {
    /// Flushed requests waiting for a token, per domain.
    rqs: [VecDeque<RqId>; NUM_DOMAINS],
    cur_domain: usize,
    batching: u32,
}

struct Hctx {
    khd: Mutex<Khd>,
    /// One software queue per Ctx, indexed by Ctx index.
    kcqs: Box<[Kcq]>,
    /// Requests in the kcqs per domain (the kernel's `kcq_map` bits, as counts).
    kcq_pending: [AtomicU32; NUM_DOMAINS],
    /// Requests held by this hctx in total, for a lockless `has_work`.
    held: AtomicU32,
    /// This hctx found a domain out of tokens and waits on it (`domain_wait`, per domain).
    waiting: [AtomicBool; NUM_DOMAINS],
}

/// Latency histograms being filled, per domain and type.
struct Histograms {
    buckets: [[[AtomicU32; LATENCY_BUCKETS]; 2]; NUM_LAT_DOMAINS],
}

/// The kyber scheduler (`struct kyber_queue_data` with its per-hctx data): token pools per domain, sized by the latency it measures against its targets.
pub struct Kyber {
    tunables: Tunables,
    tokens: [TokenPool; NUM_DOMAINS],
    /// The domain whose token each request holds, by request id.
    token_of: Box<[AtomicU8]>,
    hctxs: Box<[Hctx]>,
    async_depth: AtomicU32,
    hist: Histograms,
    /// Timer state, only touched by `timer` (the kernel's timer function is serialised too).
    timer_state: Mutex<TimerState>,
    timer_at: AtomicU64,
    /// Each domain's last p99 bucket (-1 none), kept for the next congestion event.
    domain_p99: [AtomicI32; NUM_LAT_DOMAINS],
    adjustments: AtomicU64,
    /// A domain's waiters are due a wake-up (`kyber_domain_wake`): `restart_hctxs` runs them.
    woken: [AtomicBool; NUM_DOMAINS],
    wake_pending: AtomicBool,
}

#[derive(Default)]
struct TimerState {
    /// Aggregated buckets awaiting enough samples.
    buckets: [[[u32; LATENCY_BUCKETS]; 2]; NUM_LAT_DOMAINS],
    /// When each domain's sampling window closes (`latency_timeout`); `None` = not started.
    window_end: [Option<Nanos>; NUM_LAT_DOMAINS],
}

impl Kyber {
    /// The scheduler's statistics.
    pub fn typed_stats(&self) -> KyberStats {
        KyberStats {
            depth: std::array::from_fn(|d| self.tokens[d].depth.load(Ordering::Relaxed)),
            in_use: std::array::from_fn(|d| self.tokens[d].used.load(Ordering::Relaxed)),
            adjustments: self.adjustments.load(Ordering::Relaxed),
        }
    }

    /// Kyber for the queue `init` describes, with the kernel's defaults.
    pub fn new(init: &ElevatorInit) -> Kyber {
        let hctxs = (0..init.nr_hw_queues)
            .map(|_| Hctx {
                khd: Mutex::new(Khd {
                    rqs: Default::default(),
                    cur_domain: 0,
                    batching: 0,
                }),
                kcqs: (0..init.nr_ctx)
                    .map(|_| Mutex::new(Default::default()))
                    .collect(),
                kcq_pending: Default::default(),
                held: AtomicU32::new(0),
                waiting: Default::default(),
            })
            .collect();
        Kyber {
            tunables: Tunables::new("kyber", &TUNABLES),
            tokens: DOMAIN_DEPTH.map(|d| TokenPool {
                depth: AtomicU32::new(d),
                used: AtomicU32::new(0),
                waiters: AtomicU32::new(0),
                completion_cnt: AtomicU32::new(0),
                wakeup_cnt: AtomicU32::new(0),
            }),
            // Sized for any depth `nr_requests` may later give (`depth_updated`).
            token_of: (0..init.max_rq_ids.max(init.nr_rq_ids))
                .map(|_| AtomicU8::new(NO_TOKEN))
                .collect(),
            hctxs,
            async_depth: AtomicU32::new(async_depth(init.nr_requests)),
            hist: Histograms {
                buckets: Default::default(),
            },
            timer_state: Mutex::new(TimerState::default()),
            timer_at: AtomicU64::new(u64::MAX),
            domain_p99: [AtomicI32::new(-1), AtomicI32::new(-1), AtomicI32::new(-1)],
            adjustments: AtomicU64::new(0),
            woken: Default::default(),
            wake_pending: AtomicBool::new(false),
        }
    }

    /// The latency target of a measured domain.
    fn target(&self, domain: usize) -> Nanos {
        match domain {
            0 => Nanos(self.tunables.get(0) as u64),
            1 => Nanos(self.tunables.get(1) as u64),
            _ => DISCARD_LAT,
        }
    }

    /// Current token depth of each domain.
    pub fn depths(&self) -> [u32; NUM_DOMAINS] {
        std::array::from_fn(|d| self.tokens[d].depth.load(Ordering::Relaxed))
    }

    fn record(&self, domain: usize, ty: usize, target: Nanos, latency: u64) {
        let divisor = (target.0 >> LATENCY_SHIFT).max(1);
        let bucket = (latency.saturating_sub(1) / divisor).min(LATENCY_BUCKETS as u64 - 1) as usize;
        self.hist.buckets[domain][ty][bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// `calculate_percentile`: the bucket holding the percentile once enough samples are in,
    /// then the domain's buckets start over.
    fn percentile(
        ts: &mut TimerState,
        domain: usize,
        ty: usize,
        pct: u32,
        now: Nanos,
    ) -> Option<usize> {
        let buckets = &mut ts.buckets[domain][ty];
        let samples: u32 = buckets.iter().sum();
        if samples == 0 {
            return None;
        }
        let end = *ts.window_end[domain].get_or_insert(now.saturating_add(SAMPLE_WINDOW));
        if samples < MIN_SAMPLES && now < end {
            return None;
        }
        ts.window_end[domain] = None;
        let mut want = (samples * pct).div_ceil(100);
        let mut bucket = 0;
        while bucket < LATENCY_BUCKETS - 1 {
            if buckets[bucket] >= want {
                break;
            }
            want -= buckets[bucket];
            bucket += 1;
        }
        *buckets = [0; LATENCY_BUCKETS];
        Some(bucket)
    }

    /// Moves every pending request of `domain` from the kcqs to the hctx's list.
    fn flush_kcqs(hc: &Hctx, khd: &mut Khd, domain: usize) {
        for kcq in hc.kcqs.iter() {
            let mut lists = kcq.lock();
            let n = lists[domain].len() as u32;
            if n > 0 {
                khd.rqs[domain].extend(lists[domain].drain(..));
                hc.kcq_pending[domain].fetch_sub(n, Ordering::AcqRel);
            }
        }
    }

    /// `kyber_dispatch_cur_domain`: a request of the current domain, if a token can be had.
    /// Requests stay in the kcqs until a token is available so they can still merge.
    fn dispatch_cur_domain(&self, hc: &Hctx, khd: &mut Khd) -> Option<RqId> {
        let d = khd.cur_domain;
        if khd.rqs[d].is_empty() && hc.kcq_pending[d].load(Ordering::Acquire) == 0 {
            return None;
        }
        if !self.get_domain_token(hc, d) {
            return None;
        }
        if khd.rqs[d].is_empty() {
            Self::flush_kcqs(hc, khd, d);
        }
        let Some(id) = khd.rqs[d].pop_front() else {
            self.tokens[d].put();
            return None;
        };
        let prev = self.token_of[id.index()].swap(d as u8, Ordering::AcqRel);
        assert_eq!(prev, NO_TOKEN, "{id:?}: dispatched while holding a token");
        khd.batching += 1;
        Some(id)
    }

    /// `kyber_get_domain_token`: a token of domain `d`, or this hctx waits on the domain (and
    /// tries once more, in case one was freed before it got on the wait queue). A hctx that
    /// gets a token while waiting stops waiting.
    fn get_domain_token(&self, hc: &Hctx, d: usize) -> bool {
        let t = &self.tokens[d];
        let mut ok = t.get();
        if !ok && !hc.waiting[d].swap(true, Ordering::AcqRel) {
            t.waiters.fetch_add(1, Ordering::AcqRel);
            ok = t.get();
        }
        if ok && hc.waiting[d].swap(false, Ordering::AcqRel) {
            t.waiters.fetch_sub(1, Ordering::AcqRel);
        }
        ok
    }

    fn release_token(&self, id: RqId) {
        let d = self.token_of[id.index()].swap(NO_TOKEN, Ordering::AcqRel);
        if d != NO_TOKEN && self.tokens[d as usize].put() {
            self.woken[d as usize].store(true, Ordering::Release);
            self.wake_pending.store(true, Ordering::Release);
        }
    }
}

impl Elevator for Kyber {
    fn name(&self) -> &'static str {
        "kyber"
    }

    fn features(&self) -> ElvFeatures {
        ElvFeatures::MQ_AWARE
    }

    /// Async requests are limited to 75% of the scheduler tags, leaving room for sync ones.
    fn limit_depth(&self, bio: &Bio) -> u32 {
        let sync = bio.op.is_read()
            || bio.flags.intersects(
                ReqFlags::SYNC
                    .union(ReqFlags::FUA)
                    .union(ReqFlags::PREFLUSH),
            );
        if sync {
            u32::MAX
        } else {
            self.async_depth.load(Ordering::Relaxed)
        }
    }

    /// `blk_bio_list_merge` on the submitting Ctx's queue for the bio's domain.
    fn bio_merge(&self, q: &ElvCtx<'_>, hctx: HctxIdx, bio: Bio) -> BioMerge {
        if !bio.mergeable() {
            return BioMerge::NotMerged(bio);
        }
        let hc = &self.hctxs[hctx.0 as usize];
        let d = domain_of(bio.op);
        let lists = hc.kcqs[bio.ctx.0 as usize].lock();
        let mut bio = bio;
        for &id in lists[d].iter().rev().take(8) {
            let mut rq = q.rqs.lock(id);
            match merge::bio_attempt_merge(&mut rq, bio, q.limits) {
                Ok(_) => return BioMerge::Merged { freed: None },
                Err(b) => bio = b,
            }
        }
        BioMerge::NotMerged(bio)
    }

    fn insert_requests(
        &self,
        q: &ElvCtx<'_>,
        hctx: HctxIdx,
        rqs: &[RqId],
        at_head: bool,
        _now: Nanos,
        _freed: &mut Vec<RqId>,
    ) {
        let hc = &self.hctxs[hctx.0 as usize];
        for &id in rqs {
            let (d, ctx) = {
                let rq = q.rqs.lock(id);
                (domain_of(rq.op), rq.ctx.0 as usize)
            };
            let mut lists = hc.kcqs[ctx].lock();
            if at_head {
                lists[d].push_front(id);
            } else {
                lists[d].push_back(id);
            }
            hc.kcq_pending[d].fetch_add(1, Ordering::AcqRel);
            hc.held.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// `kyber_dispatch_request`: continue the current domain's batch, else round-robin.
    fn dispatch_request(&self, _q: &ElvCtx<'_>, hctx: HctxIdx, _now: Nanos) -> Option<RqId> {
        let hc = &self.hctxs[hctx.0 as usize];
        let mut khd = hc.khd.lock();
        let mut found = None;
        if khd.batching < BATCH_SIZE[khd.cur_domain] {
            found = self.dispatch_cur_domain(hc, &mut khd);
        }
        if found.is_none() {
            khd.batching = 0;
            for _ in 0..NUM_DOMAINS {
                khd.cur_domain = (khd.cur_domain + 1) % NUM_DOMAINS;
                found = self.dispatch_cur_domain(hc, &mut khd);
                if found.is_some() {
                    break;
                }
            }
        }
        if found.is_some() {
            hc.held.fetch_sub(1, Ordering::AcqRel);
        }
        found
    }

    fn has_work(&self, hctx: HctxIdx) -> bool {
        self.hctxs[hctx.0 as usize].held.load(Ordering::Acquire) > 0
    }

    /// Latency feedback: total latency from allocation, I/O latency from issue.
    fn completed_request(&self, rq: &ElvRq, now: Nanos) {
        let d = domain_of(rq.op);
        if d >= NUM_LAT_DOMAINS {
            return;
        }
        let target = self.target(d);
        self.record(d, TOTAL, target, now.0.saturating_sub(rq.alloc_ns.0));
        self.record(d, IO, target, now.0.saturating_sub(rq.io_start_ns.0));
        self.timer_at
            .fetch_min(now.saturating_add(TIMER_DELAY).0, Ordering::AcqRel);
    }

    fn finish_request(&self, rq: &ElvRq) {
        self.release_token(rq.id);
    }

    fn requeue_request(&self, rq: &ElvRq, _now: Nanos) {
        self.release_token(rq.id);
    }

    fn restart_hctxs(&self, out: &mut Vec<HctxIdx>) {
        // `__sbitmap_queue_wake_up`: up to a batch of waiters per completed batch. Where we
        // differ: the kernel spreads waiters over 8 wait queues and starts at a rotating one;
        // here they are taken in hardware queue order.
        if !self.wake_pending.swap(false, Ordering::AcqRel) {
            return;
        }
        for d in 0..NUM_DOMAINS {
            if !self.woken[d].swap(false, Ordering::AcqRel) {
                continue;
            }
            let mut n = self.tokens[d].wake_batch();
            for (h, hc) in self.hctxs.iter().enumerate() {
                if n == 0 {
                    break;
                }
                if hc.waiting[d].swap(false, Ordering::AcqRel) {
                    self.tokens[d].waiters.fetch_sub(1, Ordering::AcqRel);
                    if !out.contains(&HctxIdx(h as u16)) {
                        out.push(HctxIdx(h as u16));
                    }
                    n -= 1;
                }
            }
        }
    }

    fn next_timer(&self) -> Option<Nanos> {
        match self.timer_at.load(Ordering::Acquire) {
            u64::MAX => None,
            t => Some(Nanos(t)),
        }
    }

    /// `kyber_timer_fn`: congestion is a p90 I/O latency above target in any domain; then
    /// each domain with a p99 total latency is resized to `depth * (p99_bucket + 1) / 4` if
    /// congested or above target.
    // Lint only (clippy 1.95 `-D warnings` refused the crate): one domain index walks several
    // parallel per-domain tables here, which reads clearer than zipped iterators.
    #[allow(clippy::needless_range_loop)]
    fn timer(&self, now: Nanos) {
        self.timer_at.store(u64::MAX, Ordering::Release);
        let mut ts = self.timer_state.lock();
        for (d, per_domain) in self.hist.buckets.iter().enumerate() {
            for (ty, buckets) in per_domain.iter().enumerate() {
                for (b, c) in buckets.iter().enumerate() {
                    ts.buckets[d][ty][b] += c.swap(0, Ordering::AcqRel);
                }
            }
        }
        let mut bad = false;
        for d in 0..NUM_LAT_DOMAINS {
            if Self::percentile(&mut ts, d, IO, 90, now).is_some_and(|p90| p90 >= GOOD_BUCKETS) {
                bad = true;
            }
        }
        for d in 0..NUM_LAT_DOMAINS {
            let mut p99 = Self::percentile(&mut ts, d, TOTAL, 99, now).map_or(-1, |b| b as i32);
            // Domains fill their windows at different times: remember the last p99 for the
            // next congestion event, and use it only once.
            if bad {
                if p99 < 0 {
                    p99 = self.domain_p99[d].load(Ordering::Relaxed);
                }
                self.domain_p99[d].store(-1, Ordering::Relaxed);
            } else if p99 >= 0 {
                self.domain_p99[d].store(p99, Ordering::Relaxed);
            }
            if p99 < 0 || !(bad || p99 as usize >= GOOD_BUCKETS) {
                continue;
            }
            let depth = self.tokens[d].depth.load(Ordering::Relaxed);
            let new = ((depth * (p99 as u32 + 1)) >> LATENCY_SHIFT).clamp(1, DOMAIN_DEPTH[d]);
            if new != depth {
                self.tokens[d].depth.store(new, Ordering::Relaxed);
                self.adjustments.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Keep sampling while any window is open.
        if ts.window_end.iter().any(Option::is_some) {
            self.timer_at
                .fetch_min(now.saturating_add(TIMER_DELAY).0, Ordering::AcqRel);
        }
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

    // Lint only (clippy 1.95 `-D warnings` refused the crate): one domain index walks several
    // parallel per-domain tables here, which reads clearer than zipped iterators.
    #[allow(clippy::needless_range_loop)]
    fn debug_state(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "kyber: async_depth {} adjustments {}",
            self.async_depth.load(Ordering::Relaxed),
            self.adjustments.load(Ordering::Relaxed)
        );
        for d in 0..NUM_DOMAINS {
            let t = &self.tokens[d];
            let _ = writeln!(
                s,
                "  {}_tokens: depth {} (max {}) in use {}",
                DOMAIN_NAMES[d],
                t.depth.load(Ordering::Relaxed),
                DOMAIN_DEPTH[d],
                t.used.load(Ordering::Relaxed)
            );
        }
        for d in 0..NUM_LAT_DOMAINS {
            for (ty, name) in [(TOTAL, "total"), (IO, "io")] {
                let b: Vec<String> = self.hist.buckets[d][ty]
                    .iter()
                    .map(|c| c.load(Ordering::Relaxed).to_string())
                    .collect();
                let _ = writeln!(
                    s,
                    "  {}_{name}_latency buckets (target/4 wide): [{}]",
                    DOMAIN_NAMES[d],
                    b.join(" ")
                );
            }
        }
        for (h, hc) in self.hctxs.iter().enumerate() {
            let khd = hc.khd.lock();
            let rqs: Vec<String> = (0..NUM_DOMAINS)
                .map(|d| khd.rqs[d].len().to_string())
                .collect();
            let pend: Vec<String> = (0..NUM_DOMAINS)
                .map(|d| hc.kcq_pending[d].load(Ordering::Relaxed).to_string())
                .collect();
            let _ = writeln!(
                s,
                "  hctx{h}: cur_domain {} batching {} rqs [{}] kcq [{}]",
                DOMAIN_NAMES[khd.cur_domain],
                khd.batching,
                rqs.join(" "),
                pend.join(" ")
            );
        }
        s
    }

    fn check_invariants(&self) {
        for (h, hc) in self.hctxs.iter().enumerate() {
            let khd = hc.khd.lock();
            let mut held = 0u32;
            for d in 0..NUM_DOMAINS {
                let in_kcqs: usize = hc.kcqs.iter().map(|k| k.lock()[d].len()).sum();
                assert_eq!(
                    in_kcqs as u32,
                    hc.kcq_pending[d].load(Ordering::Acquire),
                    "hctx{h}: kcq count drifted"
                );
                held += (in_kcqs + khd.rqs[d].len()) as u32;
            }
            assert_eq!(
                held,
                hc.held.load(Ordering::Acquire),
                "hctx{h}: held count drifted"
            );
        }
        let holders: u32 = self
            .token_of
            .iter()
            .filter(|t| t.load(Ordering::Acquire) != NO_TOKEN)
            .count() as u32;
        let used: u32 = self
            .tokens
            .iter()
            .map(|t| t.used.load(Ordering::Acquire))
            .sum();
        assert_eq!(
            holders, used,
            "kyber: tokens in use disagree with their holders"
        );
    }

    /// `kyber_depth_updated`: asynchronous requests may take `KYBER_ASYNC_PERCENT` of the
    /// new depth; the token pools and latency history stay.
    fn depth_updated(&self, nr_requests: u32, nr_rq_ids: u32) {
        assert!(
            nr_rq_ids as usize <= self.token_of.len(),
            "kyber: request ids past max_rq_ids"
        );
        self.async_depth
            .store(async_depth(nr_requests), Ordering::Relaxed);
    }

    fn exit_sched(&self) {
        self.check_invariants();
        for (h, hc) in self.hctxs.iter().enumerate() {
            assert_eq!(
                hc.held.load(Ordering::Acquire),
                0,
                "kyber: hctx{h} still holds requests at exit"
            );
        }
        for (d, t) in self.tokens.iter().enumerate() {
            assert_eq!(
                t.used.load(Ordering::Acquire),
                0,
                "kyber: {} tokens still held at exit",
                DOMAIN_NAMES[d]
            );
        }
    }
}

/// `kqd->async_depth`: `KYBER_ASYNC_PERCENT` of the scheduler tags.
fn async_depth(nr_requests: u32) -> u32 {
    (nr_requests * ASYNC_PERCENT / 100).max(1)
}

fn init(init: &ElevatorInit) -> Box<dyn Elevator> {
    Box::new(Kyber::new(init))
}

/// Kyber's registration (`kyber_sched`): name, tunables, hook costs.
pub const KYBER: ElevatorType = ElevatorType {
    name: "kyber",
    alias: None,
    features: ElvFeatures::MQ_AWARE,
    tunables: &TUNABLES,
    aliases: &[],
    init: Some(init),
    // Measured with `mqblk bench --preset=sched-cost`; inserts and bio merges take the
    // per-ctx list lock, dispatch the per-hctx domain lock, completion only atomics.
    cost: ElvCost {
        insert_ns: 35,
        insert_lock: LockScope::Ctx,
        dispatch_ns: 45,
        probe_ns: 15,
        dispatch_lock: LockScope::Hctx,
        complete_ns: 35,
        complete_lock: LockScope::None,
        merge_ns: 30,
        path_ns: 0,
        path_complete_ns: 0,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(depth: u32) -> TokenPool {
        TokenPool {
            depth: AtomicU32::new(depth),
            used: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            completion_cnt: AtomicU32::new(0),
            wakeup_cnt: AtomicU32::new(0),
        }
    }

    #[test]
    fn waiters_are_woken_once_a_batch_of_tokens_is_freed() {
        // The "other" domain's 16 tokens: sbq_calc_wake_batch gives 16 / 8 = 2.
        let t = pool(16);
        assert_eq!(t.wake_batch(), 2);
        assert_eq!(pool(256).wake_batch(), 8, "SBQ_WAKE_BATCH caps it");
        assert_eq!(pool(4).wake_batch(), 1);
        for _ in 0..16 {
            assert!(t.get());
        }
        assert!(!t.get());
        // Nobody waits: frees count for nothing.
        assert!(!t.put());
        assert!(t.get());
        t.waiters.fetch_add(1, Ordering::AcqRel);
        assert!(!t.put(), "one freed token is half a batch");
        assert!(t.put(), "the second completes it");
        assert!(!t.put());
        assert!(t.put());
        // With the depth raised past what is in flight, the last token out still wakes.
        t.depth.store(256, Ordering::Relaxed);
        let in_use = t.used.load(Ordering::Relaxed);
        let woke: Vec<bool> = (0..in_use).map(|_| t.put()).collect();
        assert_eq!(woke.last(), Some(&true), "{woke:?}");
    }
}
