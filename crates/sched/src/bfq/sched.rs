//! BFQ's queues and policy: per-issuer queues, budgets, idling, FIFO expiry and back seeks,
//! on top of the B-WF2Q+ engine ([`super::engine`]).
//!
//! - Each issuer's synchronous requests go to a queue of its own; asynchronous ones share a
//!   queue per I/O priority (class and level), as BFQ's `async_bfqq`.
//! - Classes are strict: RT queues before BE before IDLE, except that IDLE is served when it
//!   has waited 200 ms (`BFQ_CL_IDLE_TIMEOUT`), so it never starves.
//! - The queue in service keeps the device until its budget (sectors) is used, its budget
//!   timeout (`timeout_sync`) passes, or it runs dry. A synchronous queue that runs dry is
//!   waited for `slice_idle` (its next request usually follows), unless it has nothing in
//!   flight and never will; the wait ends early when it gets a request.
//! - Within a queue: a request past its FIFO deadline first, else the next one ahead of the
//!   head position, or one behind it within `back_seek_max` when that is, weighted by
//!   `back_seek_penalty`, closer.
//! - Budget feedback: a queue that used its whole budget gets twice as much next time (up to
//!   `max_budget`); one that timed out with little done gets half.
//!
//! Not yet (later stages of issue 6): cgroup-like groups, low_latency weight raising, queue
//! merging, injection while idling, automatic max_budget from the peak rate.

use super::engine::ServiceTree;
use mqblk_core::{
    BioMerge, Elevator, ElevatorInit, ElevatorType, ElvCtx, ElvFeatures, ElvRq, HctxIdx,
    IoPrioClass, Nanos, ReqFlags, RqId, TunableDesc, Tunables,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;

const T_SLICE_IDLE: usize = 0;
const T_TIMEOUT_SYNC: usize = 1;
const T_MAX_BUDGET: usize = 2;
const T_FIFO_SYNC: usize = 3;
const T_FIFO_ASYNC: usize = 4;
const T_BACK_SEEK_MAX: usize = 5;
const T_BACK_SEEK_PENALTY: usize = 6;
const T_STRICT: usize = 7;

static TUNABLES: [TunableDesc; 8] = [
    TunableDesc {
        name: "slice_idle",
        unit: "ms",
        default: 8,
        min: 0,
        max: 1000,
        help: "how long a synchronous queue that ran dry is waited for",
    },
    TunableDesc {
        name: "timeout_sync",
        unit: "ms",
        default: 125,
        min: 1,
        max: 10_000,
        help: "budget timeout: the longest a queue keeps the device per turn",
    },
    TunableDesc {
        name: "max_budget",
        unit: "sectors",
        default: 0,
        min: 0,
        max: 1 << 24,
        help: "largest budget; 0 = automatic (16384 sectors until peak-rate estimation exists)",
    },
    TunableDesc {
        name: "fifo_expire_sync",
        unit: "ms",
        default: 125,
        min: 1,
        max: 60_000,
        help: "a synchronous request older than this is served first",
    },
    TunableDesc {
        name: "fifo_expire_async",
        unit: "ms",
        default: 250,
        min: 1,
        max: 60_000,
        help: "an asynchronous request older than this is served first",
    },
    TunableDesc {
        name: "back_seek_max",
        unit: "KiB",
        default: 16384,
        min: 0,
        max: 1 << 30,
        help: "farthest a backward seek may go",
    },
    TunableDesc {
        name: "back_seek_penalty",
        unit: "factor",
        default: 2,
        min: 1,
        max: 1000,
        help: "how much farther a backward seek counts than a forward one",
    },
    TunableDesc {
        name: "strict_guarantees",
        unit: "bool",
        default: 0,
        min: 0,
        max: 1,
        help: "idle on every queue that runs dry, asynchronous ones too",
    },
];

/// Default budget when `max_budget` is 0 (the kernel's `bfq_default_max_budget`).
const DEFAULT_MAX_BUDGET: u64 = 16 * 1024;
const MIN_BUDGET: u64 = 64;
/// The IDLE class is served at least this often (`BFQ_CL_IDLE_TIMEOUT`, HZ / 5).
const IDLE_CLASS_TIMEOUT: Nanos = Nanos::from_millis(200);

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

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Sync(u32),
    Async(u8, u8),
}

#[derive(Debug)]
struct Bq {
    key: Key,
    class: usize,
    weight: u32,
    sync: bool,
    /// Queued requests by (sector, id), and in arrival order with their FIFO deadlines.
    sorted: BTreeSet<(u64, u32)>,
    fifo: VecDeque<(u32, Nanos)>,
    /// Dispatched and not yet completed.
    dispatched: u32,
    budget: u64,
    /// In the service tree (backlogged and not in service).
    in_tree: bool,
    /// Where the head ended after its last dispatch.
    last_pos: u64,
}

#[derive(Copy, Clone, Debug, Default)]
struct RqInfo {
    queue: u32,
    sector: u64,
    end: u64,
    queued: bool,
    owned: bool,
}

#[derive(Default)]
struct Stats {
    dispatched: u64,
    expired_budget: u64,
    expired_timeout: u64,
    expired_empty: u64,
    idles: u64,
    idle_class_served: u64,
}

struct State {
    queues: Vec<Option<Bq>>,
    free_slots: Vec<u32>,
    by_key: BTreeMap<Key, u32>,
    rqs: Vec<RqInfo>,
    trees: [ServiceTree; 3],
    in_service: Option<u32>,
    service: u64,
    slice_start: Nanos,
    idle_until: Option<Nanos>,
    last_idle_class: Nanos,
    /// The IDLE class has waited its 200 ms: serve it at the next selection.
    idle_class_due: bool,
    nr_queued: u32,
    restart: bool,
    stats: Stats,
}

pub struct Bfq {
    st: Mutex<State>,
    tunables: Tunables,
    nr_hw: u16,
}

struct Knobs {
    slice_idle: Nanos,
    timeout: Nanos,
    max_budget: u64,
    fifo_sync: Nanos,
    fifo_async: Nanos,
    back_max: u64,
    back_penalty: u64,
    strict: bool,
}

impl Bfq {
    pub fn new(init: &ElevatorInit) -> Bfq {
        Bfq {
            st: Mutex::new(State {
                queues: Vec::new(),
                free_slots: Vec::new(),
                by_key: BTreeMap::new(),
                rqs: vec![RqInfo::default(); init.nr_rq_ids as usize],
                trees: Default::default(),
                in_service: None,
                service: 0,
                slice_start: Nanos::ZERO,
                idle_until: None,
                last_idle_class: Nanos::ZERO,
                idle_class_due: false,
                nr_queued: 0,
                restart: false,
                stats: Stats::default(),
            }),
            tunables: Tunables::new("bfq", &TUNABLES),
            nr_hw: init.nr_hw_queues,
        }
    }

    fn knobs(&self) -> Knobs {
        let t = &self.tunables;
        let mb = t.get(T_MAX_BUDGET) as u64;
        Knobs {
            slice_idle: Nanos::from_millis(t.get(T_SLICE_IDLE) as u64),
            timeout: Nanos::from_millis(t.get(T_TIMEOUT_SYNC) as u64),
            max_budget: if mb == 0 {
                DEFAULT_MAX_BUDGET
            } else {
                mb.max(MIN_BUDGET)
            },
            fifo_sync: Nanos::from_millis(t.get(T_FIFO_SYNC) as u64),
            fifo_async: Nanos::from_millis(t.get(T_FIFO_ASYNC) as u64),
            back_max: t.get(T_BACK_SEEK_MAX) as u64 * 2,
            back_penalty: t.get(T_BACK_SEEK_PENALTY) as u64,
            strict: t.get(T_STRICT) != 0,
        }
    }
}

impl State {
    fn q(&mut self, id: u32) -> &mut Bq {
        self.queues[id as usize].as_mut().expect("live queue")
    }

    fn queue_for(&mut self, rq: &ElvRq, k: &Knobs) -> u32 {
        let sync = rq.op.is_read() || rq.cmd_flags.contains(ReqFlags::SYNC);
        let class = class_index(rq.ioprio.class());
        let key = if sync {
            Key::Sync(rq.issuer)
        } else {
            Key::Async(class as u8, rq.ioprio.level())
        };
        if let Some(&id) = self.by_key.get(&key) {
            return id;
        }
        let q = Bq {
            key,
            class,
            weight: ioprio_to_weight(rq.ioprio.level()),
            sync,
            sorted: BTreeSet::new(),
            fifo: VecDeque::new(),
            dispatched: 0,
            budget: k.max_budget,
            in_tree: false,
            last_pos: 0,
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

    /// Frees a queue with nothing queued, in flight or in service.
    fn maybe_free(&mut self, id: u32) {
        let q = self.queues[id as usize].as_ref().expect("live queue");
        if q.sorted.is_empty() && q.dispatched == 0 && !q.in_tree && self.in_service != Some(id) {
            let (key, class) = (q.key, q.class);
            self.trees[class].forget(id);
            self.by_key.remove(&key);
            self.queues[id as usize] = None;
            self.free_slots.push(id);
        }
    }

    /// Ends the in-service queue's turn.
    fn expire(&mut self, k: &Knobs, timed_out: bool) {
        let Some(id) = self.in_service.take() else {
            return;
        };
        self.idle_until = None;
        let used = self.service;
        let (class, backlogged, budget) = {
            let q = self.q(id);
            // Budget feedback: a queue that used it all gets more, one that timed out less.
            if used >= q.budget {
                q.budget = (q.budget * 2).min(k.max_budget);
            } else if timed_out {
                q.budget = (q.budget / 2).max(MIN_BUDGET);
            }
            (q.class, !q.sorted.is_empty(), q.budget)
        };
        self.trees[class].expire(id, used, backlogged.then_some(budget));
        self.q(id).in_tree = backlogged;
        self.maybe_free(id);
    }

    /// The next request of queue `id`: FIFO-expired first, else by position.
    fn pick(&self, id: u32, k: &Knobs, now: Nanos) -> u32 {
        let q = self.queues[id as usize].as_ref().expect("live queue");
        if let Some(&(rq, deadline)) = q.fifo.front() {
            if deadline <= now {
                return rq;
            }
        }
        let pos = q.last_pos;
        let ahead = q.sorted.range((pos, 0)..).next().copied();
        let behind = q.sorted.range(..(pos, 0)).next_back().copied();
        match (ahead, behind) {
            (Some(a), Some(b)) => {
                let fwd = a.0 - pos;
                let back = pos - b.0;
                if back <= k.back_max && back * k.back_penalty < fwd {
                    b.1
                } else {
                    a.1
                }
            }
            (Some(a), None) => a.1,
            (None, Some(b)) => b.1,
            (None, None) => unreachable!("pick from an empty queue"),
        }
    }

    fn take(&mut self, id: u32, rq: u32) {
        let info = self.rqs[rq as usize];
        let q = self.q(id);
        q.sorted.remove(&(info.sector, rq));
        if let Some(i) = q.fifo.iter().position(|&(r, _)| r == rq) {
            q.fifo.remove(i);
        }
        q.dispatched += 1;
        q.last_pos = info.end;
        self.rqs[rq as usize].queued = false;
        self.nr_queued -= 1;
    }

    /// Chooses the next queue to serve, by class then B-WF2Q+.
    fn select(&mut self, now: Nanos) -> Option<u32> {
        let idle_due = !self.trees[2].is_empty()
            && (self.idle_class_due
                || now.saturating_sub(self.last_idle_class) >= IDLE_CLASS_TIMEOUT);
        let order: [usize; 3] = if idle_due { [2, 0, 1] } else { [0, 1, 2] };
        for c in order {
            if let Some(id) = self.trees[c].select() {
                if c == 2 {
                    self.last_idle_class = now;
                    self.idle_class_due = false;
                    self.stats.idle_class_served += 1;
                }
                return Some(id);
            }
        }
        None
    }
}

impl Elevator for Bfq {
    fn name(&self) -> &'static str {
        "bfq"
    }

    fn features(&self) -> ElvFeatures {
        ElvFeatures::default()
    }

    fn bio_merge(&self, _q: &ElvCtx<'_>, _hctx: HctxIdx, bio: mqblk_core::Bio) -> BioMerge {
        BioMerge::NotMerged(bio)
    }

    fn insert_requests(
        &self,
        q: &ElvCtx<'_>,
        _hctx: HctxIdx,
        rqs: &[RqId],
        at_head: bool,
        now: Nanos,
        _freed: &mut Vec<RqId>,
    ) {
        let k = self.knobs();
        let mut st = self.st.lock();
        for &id in rqs {
            let e = q.rqs.lock(id).elv();
            let qid = st.queue_for(&e, &k);
            let deadline = if at_head {
                now
            } else {
                now.saturating_add(if st.queues[qid as usize].as_ref().expect("q").sync {
                    k.fifo_sync
                } else {
                    k.fifo_async
                })
            };
            let end = e.sector + e.nr_sectors as u64;
            let info = &mut st.rqs[id.index()];
            assert!(!info.queued, "{id:?}: inserted twice");
            *info = RqInfo {
                queue: qid,
                sector: e.sector,
                end,
                queued: true,
                owned: true,
            };
            st.nr_queued += 1;
            let in_service = st.in_service == Some(qid);
            let bq = st.q(qid);
            bq.sorted.insert((e.sector, id.0));
            if at_head {
                bq.fifo.push_front((id.0, deadline));
            } else {
                bq.fifo.push_back((id.0, deadline));
            }
            if in_service {
                // The queue we were idling for has work again.
                st.idle_until = None;
            } else if !bq.in_tree {
                bq.in_tree = true;
                let (class, weight, budget) = (bq.class, bq.weight, bq.budget);
                st.trees[class].activate(qid, weight, budget);
            }
        }
    }

    fn dispatch_request(&self, _q: &ElvCtx<'_>, _hctx: HctxIdx, now: Nanos) -> Option<RqId> {
        let k = self.knobs();
        let mut st = self.st.lock();
        loop {
            if let Some(id) = st.in_service {
                let (empty, sync, dispatched) = {
                    let q = st.q(id);
                    (q.sorted.is_empty(), q.sync, q.dispatched)
                };
                if !empty {
                    let budget = st.queues[id as usize].as_ref().expect("q").budget;
                    if st.service >= budget {
                        st.stats.expired_budget += 1;
                        st.expire(&k, false);
                        continue;
                    }
                    if now.saturating_sub(st.slice_start) > k.timeout {
                        st.stats.expired_timeout += 1;
                        st.expire(&k, true);
                        continue;
                    }
                    let rq = st.pick(id, &k, now);
                    st.take(id, rq);
                    let n = st.rqs[rq as usize].end - st.rqs[rq as usize].sector;
                    st.service += n.max(1);
                    let class = st.q(id).class;
                    st.trees[class].served(n.max(1));
                    st.stats.dispatched += 1;
                    return Some(RqId(rq));
                }
                // Ran dry. A synchronous queue is waited for: first until its requests in
                // flight complete, then `slice_idle` for the same issuer's next request
                // (armed at that completion, or now if nothing is in flight).
                let may_idle = (sync || k.strict) && k.slice_idle > Nanos::ZERO;
                match st.idle_until {
                    Some(t) if t > now => return None,
                    Some(_) => {
                        st.stats.expired_empty += 1;
                        st.expire(&k, false);
                        continue;
                    }
                    None if may_idle && dispatched > 0 => return None,
                    None if may_idle => {
                        st.idle_until = Some(now.saturating_add(k.slice_idle));
                        st.stats.idles += 1;
                        return None;
                    }
                    None => {
                        st.stats.expired_empty += 1;
                        st.expire(&k, false);
                        continue;
                    }
                }
            }
            let id = st.select(now)?;
            st.q(id).in_tree = false;
            st.in_service = Some(id);
            st.service = 0;
            st.slice_start = now;
            st.idle_until = None;
        }
    }

    fn has_work(&self, _hctx: HctxIdx) -> bool {
        self.st.lock().nr_queued > 0
    }

    fn completed_request(&self, rq: &ElvRq, now: Nanos) {
        let k = self.knobs();
        let mut st = self.st.lock();
        let info = st.rqs[rq.id.index()];
        if !info.owned {
            return;
        }
        st.rqs[rq.id.index()].owned = false;
        let q = st.q(info.queue);
        q.dispatched = q.dispatched.saturating_sub(1);
        let (drained, sync) = (q.dispatched == 0 && q.sorted.is_empty(), q.sync);
        // The in-service queue's last request is back and nothing else of it is queued:
        // start waiting for its issuer's next request (`bfq_arm_slice_timer`).
        if st.in_service == Some(info.queue)
            && drained
            && (sync || k.strict)
            && k.slice_idle > Nanos::ZERO
            && st.idle_until.is_none()
        {
            st.idle_until = Some(now.saturating_add(k.slice_idle));
            st.stats.idles += 1;
        }
        st.maybe_free(info.queue);
    }

    fn requeue_request(&self, rq: &ElvRq) {
        // It comes back through insert_requests; it is no longer in flight.
        let mut st = self.st.lock();
        let info = st.rqs[rq.id.index()];
        if info.owned && !info.queued {
            let q = st.q(info.queue);
            q.dispatched = q.dispatched.saturating_sub(1);
        }
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
        let idle_class = (!st.trees[2].is_empty() && !st.idle_class_due)
            .then(|| st.last_idle_class.saturating_add(IDLE_CLASS_TIMEOUT));
        match (st.idle_until, idle_class) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn timer(&self, now: Nanos) {
        let k = self.knobs();
        let mut st = self.st.lock();
        if st.idle_until.is_some_and(|t| t <= now) {
            st.stats.expired_empty += 1;
            st.expire(&k, false);
        }
        if !st.trees[2].is_empty() && now.saturating_sub(st.last_idle_class) >= IDLE_CLASS_TIMEOUT {
            st.idle_class_due = true;
        }
        // Idling ended, or the IDLE class is due: the hardware queues must run.
        st.restart = true;
    }

    fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let st = self.st.lock();
        vec![
            ("dispatched", st.stats.dispatched),
            ("expired_budget", st.stats.expired_budget),
            ("expired_timeout", st.stats.expired_timeout),
            ("expired_empty", st.stats.expired_empty),
            ("idles", st.stats.idles),
            ("idle_class_served", st.stats.idle_class_served),
        ]
    }

    fn debug_state(&self) -> String {
        let st = self.st.lock();
        let mut s = format!(
            "bfq: queued {} in_service {:?} service {} idle_until {:?}\n",
            st.nr_queued, st.in_service, st.service, st.idle_until
        );
        for (i, q) in st.queues.iter().enumerate() {
            if let Some(q) = q {
                let _ = writeln!(
                    s,
                    "  q{i} {:?} class {} weight {} queued {} dispatched {} budget {} in_tree {}",
                    q.key,
                    q.class,
                    q.weight,
                    q.sorted.len(),
                    q.dispatched,
                    q.budget,
                    q.in_tree
                );
            }
        }
        s
    }

    fn check_invariants(&self) {
        let st = self.st.lock();
        let queued: usize = st.queues.iter().flatten().map(|q| q.sorted.len()).sum();
        assert_eq!(queued as u32, st.nr_queued, "bfq: queued count out of step");
        for (i, q) in st.queues.iter().enumerate() {
            let Some(q) = q else { continue };
            assert_eq!(
                q.sorted.len(),
                q.fifo.len(),
                "bfq: q{i} sort and FIFO out of step"
            );
            let in_service = st.in_service == Some(i as u32);
            assert_eq!(
                q.in_tree || in_service,
                st.trees[q.class].is_active(i as u32),
                "bfq: q{i} tree membership out of step"
            );
        }
        for t in &st.trees {
            t.check();
        }
    }

    fn exit_sched(&self) {
        let st = self.st.lock();
        assert_eq!(st.nr_queued, 0, "bfq: exit with requests queued");
    }
}

fn init(init: &ElevatorInit) -> Box<dyn Elevator> {
    Box::new(Bfq::new(init))
}

pub const BFQ: ElevatorType = ElevatorType {
    name: "bfq",
    alias: None,
    features: ElvFeatures(0),
    tunables: &TUNABLES,
    init: Some(init),
};
