//! MQFQ, multi-queue fair queueing (Hedayati, Shen, Scott and Marty, "Multi-Queue Fair
//! Queuing", USENIX ATC '19), as an mqblk scheduler written against the public elevator API
//! only: [`mqblk_core::Elevator`], [`mqblk_core::ElevatorType`] and
//! [`mqblk_sched::register`]. Nothing in mqblk names it; `register` adds it at run time and
//! every subcommand then takes `ioscheduler=mqfq`.
//!
//! What it keeps from the paper:
//! - **Fair queueing by start tags** (start-time fair queueing, §2): each flow (here a
//!   submitter, the request's `issuer`) gets a start tag `S = max(V, F_prev)` and a finish
//!   tag `F = S + cost` per request, with the cost its size in sectors; a hardware queue
//!   dispatches its smallest start tag first.
//! - **One queue per hardware queue** with a shared **virtual time** `V`, the smallest start
//!   tag queued anywhere (never moving back), instead of one global queue and its lock (§3).
//! - **The throttle** `T` (§3.1): a hardware queue whose smallest start tag is more than `T`
//!   ahead of `V` waits, so that no queue runs far ahead of the slowest.
//! - **The dispatch limit** `D` (§3.2): at most `D` requests in the device at once, so that
//!   requests wait here, where their order is decided, rather than in the device's queue.
//!
//! The defaults of `T` (256 KiB) and `D` (16 requests) are this example's choice, not
//! figures from the paper; both are tunables (`throttle_kb`, `max_inflight`).
//!
//! What it leaves out: the paper's scalable data structures (the token tree for `V`,
//! per-flow locks), which matter for millions of IOPS on many cores; weights (every flow
//! weighs the same).

use mqblk_core::{
    Elevator, ElevatorInit, ElevatorType, ElvCost, ElvCtx, ElvFeatures, ElvRq, HctxIdx, LockScope,
    Nanos, RqId, TunableDesc, Tunables,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The tunables, in sysfs style: name, unit, default and range.
static TUNABLES: [TunableDesc; 2] = [
    TunableDesc {
        name: "throttle_kb",
        unit: "KiB",
        default: 256,
        min: 4,
        max: 1 << 30,
        help: "T: how far (in KiB of service) a hardware queue may run ahead of the virtual time",
    },
    TunableDesc {
        name: "max_inflight",
        unit: "requests",
        default: 16,
        min: 1,
        max: 65536,
        help: "D: requests in the device at once",
    },
];

const THROTTLE_KB: usize = 0;
const MAX_INFLIGHT: usize = 1;

/// A queued request and its tags (in sectors of virtual service).
#[derive(Copy, Clone, Debug)]
struct Tagged {
    id: RqId,
    start: u64,
}

#[derive(Default, Debug)]
struct Flow {
    queued: VecDeque<Tagged>,
    /// The finish tag of its last request.
    last_finish: u64,
}

/// One hardware queue's flows.
#[derive(Default, Debug)]
struct HctxQueue {
    flows: BTreeMap<u32, Flow>,
}

impl HctxQueue {
    /// The flow whose head request has the smallest start tag, and that tag.
    fn first(&self) -> Option<(u32, u64)> {
        self.flows
            .iter()
            .filter_map(|(&f, fl)| fl.queued.front().map(|t| (f, t.start)))
            .min_by_key(|&(f, s)| (s, f))
    }
}

/// The scheduler.
pub struct Mqfq {
    queues: Box<[Mutex<HctxQueue>]>,
    /// Each hardware queue's smallest queued start tag (`u64::MAX`: none), read without its
    /// lock to find the virtual time.
    heads: Box<[AtomicU64]>,
    /// Requests queued per hardware queue (`has_work`).
    counts: Box<[AtomicU32]>,
    /// The virtual time so far (it never moves back).
    vtime: AtomicU64,
    /// Requests dispatched and not yet completed, requeued or freed, and which ones (by
    /// request id): a request the core ends another way still leaves the count.
    inflight: AtomicU32,
    in_device: Box<[std::sync::atomic::AtomicBool]>,
    /// Hardware queues that had work and were held back (throttle or limit): run again
    /// after the next completion.
    held: AtomicU64,
    dispatched: AtomicU64,
    throttled: AtomicU64,
    limited: AtomicU64,
    tunables: Tunables,
}

impl Mqfq {
    fn new(init: &ElevatorInit) -> Mqfq {
        let n = init.nr_hw_queues.max(1) as usize;
        Mqfq {
            queues: (0..n).map(|_| Mutex::default()).collect(),
            heads: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            counts: (0..n).map(|_| AtomicU32::new(0)).collect(),
            vtime: AtomicU64::new(0),
            inflight: AtomicU32::new(0),
            in_device: (0..init.max_rq_ids.max(init.nr_rq_ids))
                .map(|_| Default::default())
                .collect(),
            held: AtomicU64::new(0),
            dispatched: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            limited: AtomicU64::new(0),
            tunables: Tunables::new("mqfq", &TUNABLES),
        }
    }

    /// `V`: the smallest start tag queued on any hardware queue, never below what it was.
    fn virtual_time(&self) -> u64 {
        let least = self
            .heads
            .iter()
            .map(|h| h.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX);
        if least == u64::MAX {
            return self.vtime.load(Ordering::Acquire);
        }
        self.vtime.fetch_max(least, Ordering::AcqRel).max(least)
    }

    fn publish_head(&self, h: usize, q: &HctxQueue) {
        let head = q.first().map_or(u64::MAX, |(_, s)| s);
        self.heads[h].store(head, Ordering::Release);
    }

    fn hold(&self, h: usize) {
        self.held.fetch_or(1 << (h % 64), Ordering::AcqRel);
    }

    /// Request `id` left the device (completed, requeued or freed): counted once.
    fn left_device(&self, id: RqId) {
        if self.in_device[id.0 as usize].swap(false, Ordering::AcqRel) {
            let was = self.inflight.fetch_sub(1, Ordering::AcqRel);
            assert!(was > 0, "mqfq: {id:?} left the device with none in it");
        }
    }
}

fn init(init: &ElevatorInit) -> Box<dyn Elevator> {
    Box::new(Mqfq::new(init))
}

/// The scheduler's registration descriptor.
pub static MQFQ: ElevatorType = ElevatorType {
    name: "mqfq",
    alias: None,
    features: ElvFeatures::MQ_AWARE,
    tunables: &TUNABLES,
    aliases: &[],
    init: Some(init),
    // The simulator's CPU costs. Their sum per request (155 ns) is what `mqblk-mqfq bench
    // --preset=sched-cost` measured over `none` (+144 and +174 ns in two runs on this
    // project's machine, kyber +111 and +118 in the same runs); it is split between the hooks
    // as kyber's is. Insert and dispatch take the hardware queue's lock.
    cost: ElvCost {
        insert_ns: 50,
        insert_lock: LockScope::Hctx,
        dispatch_ns: 70,
        probe_ns: 15,
        dispatch_lock: LockScope::Hctx,
        complete_ns: 35,
        complete_lock: LockScope::None,
        merge_ns: 0,
        path_ns: 0,
        path_complete_ns: 0,
    },
};

/// Adds MQFQ to mqblk's schedulers (once; a second call says it is registered already).
pub fn register() -> Result<(), String> {
    mqblk_sched::register(&MQFQ)
}

impl Elevator for Mqfq {
    fn name(&self) -> &'static str {
        "mqfq"
    }

    fn features(&self) -> ElvFeatures {
        ElvFeatures::MQ_AWARE
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
        let h = hctx.0 as usize;
        let v = self.virtual_time();
        let mut queue = self.queues[h].lock();
        for &id in rqs {
            let (issuer, sectors) = {
                let rq = q.rqs.lock(id);
                (rq.issuer, u64::from(rq.nr_sectors.max(1)))
            };
            let flow = queue.flows.entry(issuer).or_default();
            if at_head {
                // A requeued request goes first, at the virtual time.
                flow.queued.push_front(Tagged { id, start: v });
            } else {
                let start = v.max(flow.last_finish);
                flow.last_finish = start + sectors;
                flow.queued.push_back(Tagged { id, start });
            }
        }
        self.counts[h].fetch_add(rqs.len() as u32, Ordering::AcqRel);
        self.publish_head(h, &queue);
    }

    fn dispatch_request(&self, _q: &ElvCtx<'_>, hctx: HctxIdx, _now: Nanos) -> Option<RqId> {
        let h = hctx.0 as usize;
        let mut queue = self.queues[h].lock();
        let (flow, start) = queue.first()?;
        let limit = self.tunables.get(MAX_INFLIGHT) as u32;
        if self.inflight.load(Ordering::Acquire) >= limit {
            self.limited.fetch_add(1, Ordering::Relaxed);
            self.hold(h);
            return None;
        }
        let t = self.tunables.get(THROTTLE_KB) as u64 * 2;
        if start > self.virtual_time().saturating_add(t) {
            self.throttled.fetch_add(1, Ordering::Relaxed);
            self.hold(h);
            return None;
        }
        let fl = queue.flows.get_mut(&flow).expect("the flow just found");
        let tagged = fl.queued.pop_front().expect("a flow with a head");
        if fl.queued.is_empty() && fl.last_finish <= self.vtime.load(Ordering::Acquire) {
            queue.flows.remove(&flow);
        }
        self.publish_head(h, &queue);
        self.counts[h].fetch_sub(1, Ordering::AcqRel);
        self.in_device[tagged.id.0 as usize].store(true, Ordering::Release);
        self.inflight.fetch_add(1, Ordering::AcqRel);
        self.dispatched.fetch_add(1, Ordering::Relaxed);
        Some(tagged.id)
    }

    fn has_work(&self, hctx: HctxIdx) -> bool {
        self.counts[hctx.0 as usize].load(Ordering::Acquire) > 0
    }

    fn completed_request(&self, rq: &ElvRq, _now: Nanos) {
        self.left_device(rq.id);
    }

    fn requeue_request(&self, rq: &ElvRq, _now: Nanos) {
        self.left_device(rq.id);
    }

    fn finish_request(&self, rq: &ElvRq) {
        self.left_device(rq.id);
    }

    fn restart_hctxs(&self, out: &mut Vec<HctxIdx>) {
        let held = self.held.swap(0, Ordering::AcqRel);
        if held != 0 {
            for h in 0..self.queues.len() {
                if held & 1 << (h % 64) != 0 {
                    out.push(HctxIdx(h as u16));
                }
            }
        }
    }

    fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("dispatched", self.dispatched.load(Ordering::Relaxed)),
            ("throttled", self.throttled.load(Ordering::Relaxed)),
            ("limited", self.limited.load(Ordering::Relaxed)),
            ("vtime", self.vtime.load(Ordering::Relaxed)),
        ]
    }

    fn debug_state(&self) -> String {
        let mut s = format!(
            "mqfq: vtime {} inflight {}\n",
            self.vtime.load(Ordering::Relaxed),
            self.inflight.load(Ordering::Relaxed)
        );
        for (h, q) in self.queues.iter().enumerate() {
            let q = q.lock();
            for (f, fl) in &q.flows {
                s += &format!(
                    "  hctx{h} flow {f}: {} queued, next start {:?}, last finish {}\n",
                    fl.queued.len(),
                    fl.queued.front().map(|t| t.start),
                    fl.last_finish
                );
            }
        }
        s
    }

    fn check_invariants(&self) {
        for (h, q) in self.queues.iter().enumerate() {
            let q = q.lock();
            let n: usize = q.flows.values().map(|f| f.queued.len()).sum();
            let counted = self.counts[h].load(Ordering::Acquire) as usize;
            assert_eq!(
                n, counted,
                "mqfq: hctx{h} holds {n} requests, counts {counted}"
            );
            let mut ids: Vec<RqId> = q
                .flows
                .values()
                .flat_map(|f| f.queued.iter().map(|t| t.id))
                .collect();
            ids.sort_unstable_by_key(|r| r.0);
            ids.dedup();
            assert_eq!(ids.len(), n, "mqfq: hctx{h} holds a request twice");
        }
    }

    fn exit_sched(&self) {
        for (h, c) in self.counts.iter().enumerate() {
            assert_eq!(
                c.load(Ordering::Acquire),
                0,
                "mqfq: exit with requests queued on hctx{h}"
            );
        }
    }

    fn depth_updated(&self, _nr_requests: u32, _nr_rq_ids: u32) {
        self.exit_sched();
    }
}
