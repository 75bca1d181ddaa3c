//! mq-deadline: the deadline I/O scheduler (`block/mq-deadline.c`,
//! Documentation/block/deadline-iosched.rst).
//!
//! Requests are kept per priority class (RT, BE, IDLE) and per direction in two orders: by
//! sector (to stream through the disk in batches of `fifo_batch`) and by arrival (each request
//! gets a deadline, `read_expire` or `write_expire`, after which it is served first). Reads
//! are preferred, but writes are forced after `writes_starved` read batches. Classes are
//! strict (RT before BE before IDLE) except that requests waiting longer than
//! `prio_aging_expire` are served regardless.
//!
//! The whole scheduler sits behind one lock (the kernel's `dd->lock`), and `dispatch_request`
//! may return a request of any hardware queue, so it is not `MQ_AWARE`: the core runs only the
//! submitter's hardware queue for it (the single-hctx dispatch patch).
//!
//! `nr_queued` per priority is kept as a plain counter updated at insert and finish (mq-deadline's O(1) queued count).
//! The benchmark-only tunable `queued_sum` switches to the older way of summing per-Ctx
//! counters on every dispatch decision, so the cost of that can be measured.

use mqblk_core::sync::{Mutex, MutexGuard};
use mqblk_core::{
    merge, Bio, BioMerge, Elevator, ElevatorInit, ElevatorType, ElvCost, ElvCtx, ElvFeatures,
    ElvRq, HctxIdx, IoPrioClass, LockScope, Nanos, NoMerges, ReqOp, RqId, TunableDesc, Tunables,
};
use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const READ: usize = 0;
const WRITE: usize = 1;
const NR_PRIO: usize = 3;
const PRIO_NAMES: [&str; NR_PRIO] = ["rt", "be", "idle"];

// Indices into the tunables table.
const T_READ_EXPIRE: usize = 0;
const T_WRITE_EXPIRE: usize = 1;
const T_WRITES_STARVED: usize = 2;
const T_FRONT_MERGES: usize = 3;
const T_FIFO_BATCH: usize = 4;
const T_PRIO_AGING: usize = 5;
const T_ASYNC_DEPTH: usize = 6;
const T_QUEUED_SUM: usize = 7;

static TUNABLES: [TunableDesc; 8] = [
    // The ranges are the kernel's store clamps (`STORE_JIFFIES`/`STORE_INT` in mq-deadline.c):
    // every value it keeps as given is taken; beyond them we refuse with a line rather than
    // clamp silently.
    TunableDesc { name: "read_expire", unit: "ms", default: 500, min: 0, max: i32::MAX as i64, help: "deadline of a read" },
    TunableDesc { name: "write_expire", unit: "ms", default: 5000, min: 0, max: i32::MAX as i64, help: "deadline of a write" },
    TunableDesc {
        name: "writes_starved",
        unit: "batches",
        default: 2,
        min: i32::MIN as i64,
        max: i32::MAX as i64,
        help: "read batches before a write batch is forced (0 or less: writes go whenever they wait)",
    },
    TunableDesc { name: "front_merges", unit: "bool", default: 1, min: 0, max: 1, help: "look up front merges" },
    TunableDesc {
        name: "fifo_batch",
        unit: "requests",
        default: 16,
        min: 0,
        max: i32::MAX as i64,
        help: "requests per sequential batch (0 as 1: every dispatch chooses afresh)",
    },
    TunableDesc {
        name: "prio_aging_expire",
        unit: "ms",
        default: 10_000,
        min: 0,
        max: i32::MAX as i64,
        help: "lower-priority requests older than this are served",
    },
    TunableDesc {
        name: "async_depth",
        unit: "requests",
        default: 128,
        min: 1,
        max: i32::MAX as i64,
        help: "scheduler tags usable by async or write requests (set to nr_requests at init)",
    },
    TunableDesc {
        name: "queued_sum",
        unit: "bool",
        default: 0,
        min: 0,
        max: 1,
        help: "mqblk benchmark-only: count queued requests by summing per-Ctx counters (before mq-deadline's O(1) queued count)",
    },
];

/// The scheduler's view of one request, indexed by `RqId` (the kernel keeps this in the
/// request itself: `rb_node`, `queuelist`, `fifo_time`, `elv.priv`).
#[derive(Copy, Clone, Debug, Default)]
struct DdRq {
    /// In the sort tree and FIFO, or on the dispatch list.
    queued: bool,
    on_dispatch_list: bool,
    /// Counted in `inserted` (so `finish` counts it completed). Requeues are not recounted.
    counted: bool,
    prio: u8,
    dir: u8,
    ctx: u16,
    sector: u64,
    end: u64,
    fifo_time: Nanos,
    /// Arrival order, the FIFO key.
    seq: u64,
    /// Zone write locking (before Linux 6.10): a write to a sequential zone
    /// (`blk_rq_is_seq_zoned_write`), and whether its dispatch locked the zone
    /// (`RQF_ZONE_WRITE_LOCKED`).
    seq_write: bool,
    zone_locked: bool,
    /// FIFO neighbours and back-merge hash chain, as `id + 1` (0 = none): the index links
    /// that replace the kernel's `queuelist` and `hash` list heads, so queueing a request
    /// allocates nothing.
    fifo_prev: u32,
    fifo_next: u32,
    hash_prev: u32,
    hash_next: u32,
}

/// Index links are `id + 1`, so that 0 (the `Default`) means "none".
fn link(id: RqId) -> u32 {
    id.0 + 1
}

fn unlink(l: u32) -> Option<RqId> {
    l.checked_sub(1).map(RqId)
}

/// A FIFO of requests linked through `DdRq::fifo_prev/next`, oldest first.
#[derive(Default, Clone, Copy)]
struct Fifo {
    head: u32,
    tail: u32,
    len: u32,
}

/// Buckets of the back-merge hash (keyed by end sector, like the kernel's `ELV_HASH`, but
/// larger: deep queues keep chains short).
const HASH_BUCKETS: usize = 1024;

fn hash_bucket(end: u64) -> usize {
    (end.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - HASH_BUCKETS.trailing_zeros())) as usize
}

/// mq-deadline's statistics (`MqDeadline::typed_stats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DdStats {
    /// How often `dd->lock` was taken, and how often another thread held it.
    pub lock_acquired: u64,
    /// See `lock_acquired`.
    pub lock_contended: u64,
    /// Per-CPU summing passes of `dd_queued` (with the `queued_sum` tunable).
    pub queued_sum_passes: u64,
    /// Per priority class.
    pub rt: DdClassStats,
    /// Best effort.
    pub be: DdClassStats,
    /// Idle.
    pub idle: DdClassStats,
}

/// One priority class's figures (the kernel's `dd_per_prio` and its `io_stats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DdClassStats {
    /// Inserted and not finished, in the scheduler or in the driver (`dd_queued`).
    pub queued: u32,
    /// Requests inserted.
    pub inserted: u64,
    /// Bios and requests merged into its requests.
    pub merged: u64,
    /// Requests dispatched.
    pub dispatched: u64,
    /// Requests completed.
    pub completed: u64,
}

impl DdStats {
    /// The figures by name, for reports that handle any scheduler.
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("lock_acquired", self.lock_acquired),
            ("lock_contended", self.lock_contended),
            ("queued_sum_passes", self.queued_sum_passes),
        ];
        for (names, c) in [
            (
                [
                    "rt_queued",
                    "rt_inserted",
                    "rt_merged",
                    "rt_dispatched",
                    "rt_completed",
                ],
                &self.rt,
            ),
            (
                [
                    "be_queued",
                    "be_inserted",
                    "be_merged",
                    "be_dispatched",
                    "be_completed",
                ],
                &self.be,
            ),
            (
                [
                    "idle_queued",
                    "idle_inserted",
                    "idle_merged",
                    "idle_dispatched",
                    "idle_completed",
                ],
                &self.idle,
            ),
        ] {
            let vals = [
                c.queued as u64,
                c.inserted,
                c.merged,
                c.dispatched,
                c.completed,
            ];
            v.extend(names.into_iter().zip(vals));
        }
        v
    }
}

#[derive(Default, Clone, Copy)]
struct Stats {
    inserted: u64,
    merged: u64,
    dispatched: u64,
    completed: u64,
}

#[derive(Default)]
struct PerPrio {
    dispatch: VecDeque<RqId>,
    /// By start sector, per direction (the kernel's rb-tree).
    sort: [BTreeSet<(u64, RqId)>; 2],
    /// By arrival, per direction.
    fifo: [Fifo; 2],
    latest_pos: [u64; 2],
    stats: Stats,
    /// Inserted and not yet finished, including requests in the driver (`dd_queued`).
    nr_queued: u32,
}

impl PerPrio {
    fn is_empty(&self) -> bool {
        self.dispatch.is_empty() && self.fifo[READ].len == 0 && self.fifo[WRITE].len == 0
    }
}

struct DdState {
    per_prio: [PerPrio; NR_PRIO],
    rqs: Vec<DdRq>,
    /// Per-Ctx, per-priority inserted and completed counts (the per-CPU counters of old).
    ctx_stats: Vec<[Stats; NR_PRIO]>,
    /// How many times `queued` summed the per-Ctx counters (with `queued_sum`), for cost
    /// models: each pass reads one counter line per Ctx.
    sum_passes: u64,
    /// Back-merge hash heads over all classes and directions (`id + 1`, 0 = empty).
    hash: Box<[u32]>,
    last_dir: usize,
    batching: u32,
    starved: u32,
    seq: u64,
    /// The one-hit merge cache (`q->last_merge`): the request last merged into, or the first
    /// inserted while it was empty; cleared when that request leaves the sort lists.
    last_merge: Option<RqId>,
    /// Zone write locking, on a zoned queue without zone write plugs (Linux before 6.10).
    zones: Option<ZoneLock>,
    /// Hardware queues to run once a zone unlocked with writes waiting
    /// (`blk_mq_sched_mark_restart_hctx` in `dd_finish_request`).
    restart: Vec<HctxIdx>,
    /// How often the lock was taken, counted under it.
    lock_acquired: u64,
}

/// mq-deadline's zone write locking before Linux 6.10 ("block: mq-deadline: Remove support
/// for zone write locking" took it out once the block layer plugged zone writes): a write to
/// a sequential zone locks the zone from its dispatch until it is freed, and writes to a
/// locked zone are passed over (`blk_req_can_dispatch_to_zone`), so a zone's writes reach
/// the device one at a time and in order.
struct ZoneLock {
    /// log2 of the zone size in sectors.
    shift: u32,
    nr_conv: u32,
    /// The zones a write holds (the disk's `seq_zones_wlock` bitmap).
    locked: std::collections::HashSet<u32>,
    /// `blk_queue_nonrot`: a rotating disk keeps a sequential write stream together, even
    /// across unlocked zones.
    nonrot: bool,
}

/// A snapshot of the tunables for one decision.
struct Knobs {
    fifo_expire: [Nanos; 2],
    writes_starved: i64,
    fifo_batch: u32,
    prio_aging: Nanos,
    queued_sum: bool,
}

/// The mq-deadline scheduler (`struct deadline_data`): per priority class a sorted tree and a FIFO per direction, under one lock.
pub struct MqDeadline {
    state: Mutex<DdState>,
    tunables: Tunables,
    /// Requests the scheduler holds, for a lockless `has_work`: changed only under the lock,
    /// by a load and a plain store (a locked read-modify-write would cost an atomic
    /// instruction per request for nothing).
    nr_held: AtomicU32,
    /// `DdState::restart` has queues to run.
    restart_due: std::sync::atomic::AtomicBool,
    /// How often another thread held the lock (`DdState::lock_acquired` counts the takes).
    lock_contended: AtomicU64,
}

fn prio_of(class: IoPrioClass) -> usize {
    match class {
        IoPrioClass::Rt => 0,
        IoPrioClass::Be | IoPrioClass::None => 1,
        IoPrioClass::Idle => 2,
    }
}

fn dir_of(op: ReqOp) -> usize {
    if op.is_read() {
        READ
    } else {
        WRITE
    }
}

impl MqDeadline {
    /// mq-deadline for the queue `init` describes, with the kernel's defaults.
    pub fn new(init: &ElevatorInit) -> MqDeadline {
        let tunables = Tunables::new("mq-deadline", &TUNABLES);
        tunables
            .store("async_depth", &init.nr_requests.max(1).to_string())
            .expect("nr_requests is within async_depth's range");
        MqDeadline {
            state: Mutex::new(DdState {
                per_prio: Default::default(),
                rqs: vec![DdRq::default(); init.nr_rq_ids as usize],
                ctx_stats: vec![[Stats::default(); NR_PRIO]; init.nr_ctx as usize],
                sum_passes: 0,
                hash: vec![0; HASH_BUCKETS].into(),
                last_dir: READ,
                batching: 0,
                starved: 0,
                seq: 0,
                last_merge: None,
                zones: init
                    .limits
                    .zoned
                    .filter(|_| init.zone_write_locking)
                    .map(|z| ZoneLock {
                        shift: z.zone_sectors.trailing_zeros(),
                        nr_conv: z.nr_conv_zones,
                        locked: Default::default(),
                        nonrot: !init.rotational,
                    }),
                restart: Vec::new(),
                lock_acquired: 0,
            }),
            tunables,
            nr_held: AtomicU32::new(0),
            restart_due: Default::default(),
            lock_contended: AtomicU64::new(0),
        }
    }

    /// Takes `dd->lock`, counting how often another thread held it.
    fn lock(&self) -> MutexGuard<'_, DdState> {
        let mut g = match self.state.try_lock() {
            Some(g) => g,
            None => {
                self.lock_contended.fetch_add(1, Ordering::Relaxed);
                self.state.lock()
            }
        };
        g.lock_acquired += 1;
        g
    }

    /// The scheduler now holds `delta` requests more (or fewer); `_locked` proves the
    /// caller holds the lock, under which alone the count changes.
    fn add_held(&self, _locked: &mut DdState, delta: i32) {
        let held = self
            .nr_held
            .load(Ordering::Relaxed)
            .checked_add_signed(delta)
            .expect("held-request count");
        self.nr_held.store(held, Ordering::Release);
    }

    /// The scheduler's statistics.
    pub fn typed_stats(&self) -> DdStats {
        let (lock_acquired, lock_contended) = self.lock_stats();
        let st = self.lock();
        let class = |p: usize| {
            let pp = &st.per_prio[p];
            DdClassStats {
                queued: pp.nr_queued,
                inserted: pp.stats.inserted,
                merged: pp.stats.merged,
                dispatched: pp.stats.dispatched,
                completed: pp.stats.completed,
            }
        };
        DdStats {
            lock_acquired,
            lock_contended,
            queued_sum_passes: st.sum_passes,
            rt: class(0),
            be: class(1),
            idle: class(2),
        }
    }

    /// How often the scheduler lock was taken, and how often it was contended. Takes the
    /// lock (uncounted) to read the first: never call it with the lock held.
    pub fn lock_stats(&self) -> (u64, u64) {
        let acquired = self.state.lock().lock_acquired;
        (acquired, self.lock_contended.load(Ordering::Relaxed))
    }

    /// Merges `bio` into queued request `id` (at its front or back), re-sorts it, then
    /// tries to coalesce it with its sector neighbour. The bio comes back as `Err` when the
    /// merge rules refuse it.
    fn merge_into(
        &self,
        st: &mut DdState,
        q: &ElvCtx<'_>,
        id: RqId,
        bio: Bio,
        prio: usize,
        front: bool,
    ) -> Result<BioMerge, Bio> {
        let mut rq = q.rqs.lock(id);
        let refused = merge::bio_attempt_merge(&mut rq, bio, q.limits).err();
        let (sector, end) = (rq.sector, rq.end_sector());
        drop(rq);
        if let Some(b) = refused {
            return Err(b);
        }
        st.resort(id, sector, end);
        st.per_prio[prio].stats.merged += 1;
        let folded = if front {
            attempt_front_merge(st, q, id)
        } else {
            attempt_back_merge(st, q, id)
        };
        // `elv_merged_request` / `elv_merge_requests`: the one-hit cache names the request
        // that holds the bio now.
        st.last_merge = Some(folded.map_or(id, |(kept, _)| kept));
        let freed = folded.map(|(_, gone)| gone);
        // The folded-away request left the scheduler: it no longer counts as held (without
        // this `has_work` stayed true forever and the count drifted).
        if freed.is_some() {
            self.add_held(st, -1);
        }
        Ok(BioMerge::Merged { freed })
    }

    fn knobs(&self) -> Knobs {
        let ms = |i| Nanos::from_millis(self.tunables.get(i).max(0) as u64);
        Knobs {
            fifo_expire: [ms(T_READ_EXPIRE), ms(T_WRITE_EXPIRE)],
            writes_starved: self.tunables.get(T_WRITES_STARVED),
            fifo_batch: self.tunables.get(T_FIFO_BATCH) as u32,
            prio_aging: ms(T_PRIO_AGING),
            queued_sum: self.tunables.get(T_QUEUED_SUM) != 0,
        }
    }
}

impl DdState {
    /// `dd_queued`: inserted and not finished, in the scheduler or in the driver.
    fn queued(&mut self, prio: usize, sum: bool) -> u32 {
        if !sum {
            return self.per_prio[prio].nr_queued;
        }
        self.sum_passes += 1;
        self.summed(prio)
    }

    /// Queued requests of `prio` from the per-Ctx counters (the old `dd_queued`).
    fn summed(&self, prio: usize) -> u32 {
        let (ins, done) = self.ctx_stats.iter().fold((0u64, 0u64), |(i, c), s| {
            (i + s[prio].inserted, c + s[prio].completed)
        });
        (ins - done) as u32
    }

    fn add_rq(&mut self, id: RqId, r: DdRq) {
        self.rqs[id.index()] = DdRq { queued: true, ..r };
        self.index_add(id);
        self.fifo_insert(id);
    }

    /// Takes a request out of the sort tree, hash and FIFO (`deadline_remove_request`).
    fn del_rq(&mut self, id: RqId) -> DdRq {
        let r = self.rqs[id.index()];
        assert!(
            r.queued && !r.on_dispatch_list,
            "{id:?}: removed while not sorted"
        );
        self.index_del(id);
        self.fifo_remove(id);
        self.rqs[id.index()].queued = false;
        if self.last_merge == Some(id) {
            self.last_merge = None;
        }
        r
    }

    /// Re-indexes a queued request whose extent changed by a merge; its FIFO place stays.
    fn resort(&mut self, id: RqId, sector: u64, end: u64) {
        self.index_del(id);
        let r = &mut self.rqs[id.index()];
        r.sector = sector;
        r.end = end;
        self.index_add(id);
    }

    /// Adds a request to its class's sort tree and to the back-merge hash.
    fn index_add(&mut self, id: RqId) {
        let r = self.rqs[id.index()];
        self.per_prio[r.prio as usize].sort[r.dir as usize].insert((r.sector, id));
        let b = hash_bucket(r.end);
        let head = self.hash[b];
        if let Some(h) = unlink(head) {
            self.rqs[h.index()].hash_prev = link(id);
        }
        let e = &mut self.rqs[id.index()];
        (e.hash_prev, e.hash_next) = (0, head);
        self.hash[b] = link(id);
    }

    fn index_del(&mut self, id: RqId) {
        let r = self.rqs[id.index()];
        let removed = self.per_prio[r.prio as usize].sort[r.dir as usize].remove(&(r.sector, id));
        assert!(removed, "{id:?}: missing from the sort tree");
        match unlink(r.hash_prev) {
            Some(p) => self.rqs[p.index()].hash_next = r.hash_next,
            None => {
                let b = hash_bucket(r.end);
                assert_eq!(
                    self.hash[b],
                    link(id),
                    "{id:?}: missing from the merge hash"
                );
                self.hash[b] = r.hash_next;
            }
        }
        if let Some(n) = unlink(r.hash_next) {
            self.rqs[n.index()].hash_prev = r.hash_prev;
        }
    }

    /// A queued request of this class and direction ending at `end` (the hash back-merge
    /// lookup), other than `except`.
    fn hash_find(&self, end: u64, prio: usize, dir: usize, except: Option<RqId>) -> Option<RqId> {
        let mut cur = self.hash[hash_bucket(end)];
        while let Some(id) = unlink(cur) {
            let r = &self.rqs[id.index()];
            if r.end == end
                && r.prio as usize == prio
                && r.dir as usize == dir
                && Some(id) != except
            {
                return Some(id);
            }
            cur = r.hash_next;
        }
        None
    }

    /// Links a request into its FIFO by arrival order: at the tail for a new request,
    /// further in only when a merge gave it an older place.
    fn fifo_insert(&mut self, id: RqId) {
        let r = self.rqs[id.index()];
        let f = self.per_prio[r.prio as usize].fifo[r.dir as usize];
        let mut after = f.tail;
        while let Some(a) = unlink(after) {
            if self.rqs[a.index()].seq < r.seq {
                break;
            }
            after = self.rqs[a.index()].fifo_prev;
        }
        let before = match unlink(after) {
            Some(a) => self.rqs[a.index()].fifo_next,
            None => f.head,
        };
        let e = &mut self.rqs[id.index()];
        (e.fifo_prev, e.fifo_next) = (after, before);
        let f = &mut self.per_prio[r.prio as usize].fifo[r.dir as usize];
        match unlink(after) {
            Some(a) => self.rqs[a.index()].fifo_next = link(id),
            None => f.head = link(id),
        }
        match unlink(before) {
            Some(b) => self.rqs[b.index()].fifo_prev = link(id),
            None => f.tail = link(id),
        }
        f.len += 1;
    }

    fn fifo_remove(&mut self, id: RqId) {
        let r = self.rqs[id.index()];
        let f = &mut self.per_prio[r.prio as usize].fifo[r.dir as usize];
        match unlink(r.fifo_prev) {
            Some(p) => self.rqs[p.index()].fifo_next = r.fifo_next,
            None => f.head = r.fifo_next,
        }
        match unlink(r.fifo_next) {
            Some(n) => self.rqs[n.index()].fifo_prev = r.fifo_prev,
            None => f.tail = r.fifo_prev,
        }
        f.len -= 1;
        let e = &mut self.rqs[id.index()];
        (e.fifo_prev, e.fifo_next) = (0, 0);
    }

    /// `deadline_from_pos`: the request spanning the sweep position, else the first one at
    /// or after it in sector order.
    fn next_in_sort(&self, prio: usize, dir: usize) -> Option<RqId> {
        let pp = &self.per_prio[prio];
        let pos = pp.latest_pos[dir];
        let sort = &pp.sort[dir];
        if sort.len() <= 1 {
            // The common case at low depth (requests leave as they come): the one request
            // qualifies if it spans the position or starts at or after it.
            let &(sector, id) = sort.first()?;
            return (sector >= pos || self.rqs[id.index()].end > pos).then_some(id);
        }
        if let Some(&(_, id)) = sort.range(..(pos, RqId(0))).next_back() {
            if self.rqs[id.index()].end > pos {
                return Some(id);
            }
        }
        sort.range((pos, RqId(0))..).next().map(|&(_, id)| id)
    }

    fn fifo_head(&self, prio: usize, dir: usize) -> Option<RqId> {
        unlink(self.per_prio[prio].fifo[dir].head)
    }

    /// Zone write locking applies: a write direction on a queue that locks zones.
    fn locks_zones(&self, dir: usize) -> Option<&ZoneLock> {
        self.zones.as_ref().filter(|_| dir == WRITE)
    }

    /// `blk_req_can_dispatch_to_zone`: not a sequential zone's write, or its zone is free.
    fn can_dispatch_to_zone(&self, z: &ZoneLock, id: RqId) -> bool {
        let r = &self.rqs[id.index()];
        !r.seq_write || !z.locked.contains(&((r.sector >> z.shift) as u32))
    }

    /// The request after `id` in sector order (`deadline_latter_request`).
    fn latter(&self, id: RqId) -> Option<RqId> {
        let r = &self.rqs[id.index()];
        let sort = &self.per_prio[r.prio as usize].sort[r.dir as usize];
        sort.range((r.sector, id)..).nth(1).map(|&(_, n)| n)
    }

    /// `deadline_is_seq_write`: the request before `id` in sector order ends where it
    /// starts.
    fn follows_another(&self, id: RqId) -> bool {
        let r = &self.rqs[id.index()];
        let sort = &self.per_prio[r.prio as usize].sort[r.dir as usize];
        sort.range(..(r.sector, id))
            .next_back()
            .is_some_and(|&(_, p)| self.rqs[p.index()].end == r.sector)
    }

    /// `deadline_from_pos` on a zone-locking queue: the first write at or after the start
    /// of the zone holding `pos` (a requeued write may start below the last one
    /// dispatched).
    fn zoned_from_pos(&self, z: &ZoneLock, prio: usize, pos: u64) -> Option<RqId> {
        let start = pos >> z.shift << z.shift;
        self.per_prio[prio].sort[WRITE]
            .range((start, RqId(0))..)
            .next()
            .map(|&(_, id)| id)
    }

    /// `deadline_next_request`: the sweep's next request; on a zone-locking queue the first
    /// write from there whose zone is free, passing over a locked zone's writes (and on a
    /// rotating disk a whole sequential stream, `deadline_skip_seq_writes`).
    fn next_request(&self, prio: usize, dir: usize) -> Option<RqId> {
        let Some(z) = self.locks_zones(dir) else {
            return self.next_in_sort(prio, dir);
        };
        let mut rq = self.zoned_from_pos(z, prio, self.per_prio[prio].latest_pos[dir]);
        while let Some(id) = rq {
            if self.can_dispatch_to_zone(z, id) {
                break;
            }
            rq = if z.nonrot {
                self.latter(id)
            } else {
                let mut pos = self.rqs[id.index()].sector;
                let mut cur = Some(id);
                loop {
                    let Some(c) = cur else { break None };
                    let r = &self.rqs[c.index()];
                    if r.sector != pos {
                        break Some(c);
                    }
                    pos = r.end;
                    cur = self.latter(c);
                }
            };
        }
        rq
    }

    /// `deadline_fifo_request`: the oldest request; on a zone-locking queue the oldest
    /// write whose zone is free (or the zone's first write, if one below it waits), not
    /// breaking a sequential stream on a rotating disk.
    fn fifo_request(&self, prio: usize, dir: usize) -> Option<RqId> {
        let Some(z) = self.locks_zones(dir) else {
            return self.fifo_head(prio, dir);
        };
        let mut cur = self.per_prio[prio].fifo[dir].head;
        while let Some(id) = unlink(cur) {
            cur = self.rqs[id.index()].fifo_next;
            let mut rq = id;
            let sector = self.rqs[id.index()].sector;
            if let Some(first) = self.zoned_from_pos(z, prio, sector) {
                if self.rqs[first.index()].sector < sector {
                    rq = first;
                }
            }
            if self.can_dispatch_to_zone(z, rq) && (z.nonrot || !self.follows_another(rq)) {
                return Some(rq);
            }
        }
        None
    }

    /// `blk_req_zone_write_lock`: a sequential zone's write locks its zone as it leaves.
    fn zone_write_lock(&mut self, id: RqId) {
        let Some(z) = self.zones.as_mut() else {
            return;
        };
        let r = &mut self.rqs[id.index()];
        if r.seq_write {
            let zone = (r.sector >> z.shift) as u32;
            let fresh = z.locked.insert(zone);
            assert!(fresh, "{id:?}: zone {zone} locked twice");
            r.zone_locked = true;
        }
    }

    /// `blk_req_zone_write_unlock`.
    fn zone_write_unlock(&mut self, id: RqId) -> bool {
        let Some(z) = self.zones.as_mut() else {
            return false;
        };
        let r = &mut self.rqs[id.index()];
        if !std::mem::take(&mut r.zone_locked) {
            return false;
        }
        z.locked.remove(&((r.sector >> z.shift) as u32));
        true
    }

    /// `started_after`: the request arrived after `latest_start`.
    fn started_after(&self, id: RqId, k: &Knobs, latest_start: Nanos) -> bool {
        let r = &self.rqs[id.index()];
        let expire = if r.on_dispatch_list {
            Nanos::ZERO
        } else {
            k.fifo_expire[r.dir as usize]
        };
        r.fifo_time.saturating_sub(expire) > latest_start
    }

    /// `__dd_dispatch_request` for one priority: the dispatch list, then the current batch,
    /// then a new batch in the chosen direction, from the FIFO head if it expired.
    fn dispatch_prio(
        &mut self,
        prio: usize,
        k: &Knobs,
        now: Nanos,
        latest_start: Nanos,
    ) -> Option<RqId> {
        if let Some(&id) = self.per_prio[prio].dispatch.front() {
            if self.started_after(id, k, latest_start) {
                return None;
            }
            self.per_prio[prio].dispatch.pop_front();
            let r = &mut self.rqs[id.index()];
            r.on_dispatch_list = false;
            let (dir, sector) = (r.dir as usize, r.sector);
            self.per_prio[prio].latest_pos[dir] = sector;
            self.zone_write_lock(id);
            return Some(self.account_dispatch(prio, id));
        }
        let id = match self.next_request(prio, self.last_dir) {
            Some(id) if self.batching < k.fifo_batch => id,
            _ => {
                let dir = self.choose_dir(prio, k)?;
                let next = self.next_request(prio, dir);
                let expired = self
                    .fifo_head(prio, dir)
                    .is_some_and(|h| self.rqs[h.index()].fifo_time <= now);
                // With zone write locking, nothing may be dispatchable: every write waits
                // for its zone.
                let id = if expired || next.is_none() {
                    self.fifo_request(prio, dir)?
                } else {
                    next?
                };
                self.last_dir = dir;
                self.batching = 0;
                id
            }
        };
        if self.started_after(id, k, latest_start) {
            return None;
        }
        self.batching += 1;
        let r = self.del_rq(id);
        // The sweep continues from this request's start, as the kernel's `latest_pos`.
        self.per_prio[prio].latest_pos[r.dir as usize] = r.sector;
        self.zone_write_lock(id);
        Some(self.account_dispatch(prio, id))
    }

    /// Reads are preferred; writes go when no reads wait or after `writes_starved` read
    /// batches while writes waited.
    fn choose_dir(&mut self, prio: usize, k: &Knobs) -> Option<usize> {
        let pp = &self.per_prio[prio];
        let (reads, writes) = (pp.fifo[READ].len > 0, pp.fifo[WRITE].len > 0);
        if reads {
            if writes && i64::from(self.starved) >= k.writes_starved {
                self.starved = 0;
                return Some(WRITE);
            }
            if writes {
                self.starved += 1;
            }
            return Some(READ);
        }
        if writes {
            self.starved = 0;
            return Some(WRITE);
        }
        None
    }

    fn account_dispatch(&mut self, prio: usize, id: RqId) -> RqId {
        self.per_prio[prio].stats.dispatched += 1;
        let ctx = self.rqs[id.index()].ctx as usize;
        self.ctx_stats[ctx][prio].dispatched += 1;
        id
    }

    /// `dd_dispatch_prio_aged_requests`: with two or more classes busy, serve BE and IDLE
    /// requests that have waited longer than `prio_aging_expire`.
    fn dispatch_aged(&mut self, k: &Knobs, now: Nanos) -> Option<RqId> {
        let mut busy = 0;
        for p in 0..NR_PRIO {
            busy += usize::from(self.queued(p, k.queued_sum) > 0);
        }
        if busy < 2 || now < k.prio_aging {
            return None;
        }
        let latest_start = now.saturating_sub(k.prio_aging);
        (1..NR_PRIO).find_map(|p| self.dispatch_prio(p, k, now, latest_start))
    }

    /// `dd_dispatch_request`: aged requests, then classes in order, stopping at the first
    /// class with requests queued anywhere (in the scheduler or the driver).
    fn dispatch(&mut self, k: &Knobs, now: Nanos) -> Option<RqId> {
        if let Some(id) = self.dispatch_aged(k, now) {
            return Some(id);
        }
        for p in 0..NR_PRIO {
            // Every queued request qualifies here. Passing `now` as the kernel does would be
            // wrong for us: `now` is the dispatching thread's reading, and another thread may
            // have inserted a request with a later one, which would then look "not started
            // yet" and stall until the delayed re-run.
            if let Some(id) = self.dispatch_prio(p, k, now, Nanos::MAX) {
                return Some(id);
            }
            if self.queued(p, k.queued_sum) > 0 {
                break;
            }
        }
        None
    }
}

impl Elevator for MqDeadline {
    fn name(&self) -> &'static str {
        "mq-deadline"
    }

    fn features(&self) -> ElvFeatures {
        ElvFeatures::default()
    }

    /// Reads (always synchronous) are never throttled; everything else may use
    /// `async_depth` tags.
    fn limit_depth(&self, bio: &Bio) -> u32 {
        if bio.op.is_read() {
            return u32::MAX;
        }
        self.tunables.get(T_ASYNC_DEPTH) as u32
    }

    fn bio_merge(&self, q: &ElvCtx<'_>, _hctx: HctxIdx, bio: Bio) -> BioMerge {
        // With nothing queued there is nothing to merge into: skip the lock.
        if q.nomerges == NoMerges::None
            || !bio.mergeable()
            || self.nr_held.load(Ordering::Acquire) == 0
        {
            return BioMerge::NotMerged(bio);
        }
        let front_merges = self.tunables.get(T_FRONT_MERGES) != 0;
        let mut st = self.lock();
        let (prio, dir) = (prio_of(bio.ioprio.class()), dir_of(bio.op));
        // `elv_merge`: the one-hit cache first, at either end whatever `front_merges` says
        // (`blk_try_merge` prefers the back); with `nomerges=1` that is all.
        let bio = match st.last_merge {
            Some(id) => {
                let r = &st.rqs[id.index()];
                let back = r.end == bio.sector;
                if back || r.sector == bio.end_sector() {
                    match self.merge_into(&mut st, q, id, bio, prio, !back) {
                        Ok(merged) => return merged,
                        Err(bio) => bio,
                    }
                } else {
                    bio
                }
            }
            None => bio,
        };
        if q.nomerges != NoMerges::All {
            return BioMerge::NotMerged(bio);
        }
        // Back merge: a request ending where the bio starts (the hash lookup).
        let bio = match st.hash_find(bio.sector, prio, dir, None) {
            Some(id) => match self.merge_into(&mut st, q, id, bio, prio, false) {
                Ok(merged) => return merged,
                Err(bio) => bio,
            },
            None => bio,
        };
        if !front_merges {
            return BioMerge::NotMerged(bio);
        }
        // Front merge: a request starting where the bio ends (`dd_request_merge`).
        let end = bio.end_sector();
        let front = st.per_prio[prio].sort[dir]
            .range((end, RqId(0))..=(end, RqId(u32::MAX)))
            .next();
        match front {
            Some(&(_, id)) => self
                .merge_into(&mut st, q, id, bio, prio, true)
                .unwrap_or_else(BioMerge::NotMerged),
            None => BioMerge::NotMerged(bio),
        }
    }

    fn insert_requests(
        &self,
        q: &ElvCtx<'_>,
        _hctx: HctxIdx,
        rqs: &[RqId],
        at_head: bool,
        now: Nanos,
        freed: &mut Vec<RqId>,
    ) {
        let k = self.knobs();
        let mut st = self.lock();
        for &id in rqs {
            let (prio, dir, ctx, sector, end, mergeable, op) = {
                let rq = q.rqs.lock(id);
                (
                    prio_of(rq.ioprio.class()),
                    dir_of(rq.op),
                    rq.ctx.0,
                    rq.sector,
                    rq.end_sector(),
                    rq.mergeable(),
                    rq.op,
                )
            };
            // A requeued write that held its zone lets it go (`dd_insert_request`).
            st.zone_write_unlock(id);
            let mut r = st.rqs[id.index()];
            assert!(!r.queued && !r.on_dispatch_list, "{id:?}: inserted twice");
            r.seq_write = st.zones.as_ref().is_some_and(|z| {
                matches!(op, ReqOp::Write | ReqOp::WriteZeroes)
                    && (sector >> z.shift) as u32 >= z.nr_conv
            });
            if !r.counted {
                r.counted = true;
                st.per_prio[prio].stats.inserted += 1;
                st.per_prio[prio].nr_queued += 1;
                st.ctx_stats[ctx as usize][prio].inserted += 1;
            }
            r.prio = prio as u8;
            r.dir = dir as u8;
            r.ctx = ctx;
            r.sector = sector;
            r.end = end;
            st.seq += 1;
            r.seq = st.seq;
            self.add_held(&mut st, 1);
            if at_head {
                r.fifo_time = now;
                r.on_dispatch_list = true;
                st.rqs[id.index()] = r;
                // `dd_insert_request`: `list_add` at the head of the dispatch list, so
                // requests inserted at head leave last in, first out.
                st.per_prio[prio].dispatch.push_front(id);
                continue;
            }
            // Insert merge (`elv_attempt_insert_merge`): fold into a queued request that ends
            // where this one starts, the one-hit cache first, then (`nomerges=0`) the hash.
            if q.nomerges != NoMerges::None {
                if let Some(target) = insert_merge_target(&st, q, prio, dir, id, sector) {
                    st.rqs[id.index()] = r;
                    let (s, e) = {
                        let t = q.rqs.lock(target);
                        (t.sector, t.end_sector())
                    };
                    st.resort(target, s, e);
                    st.per_prio[prio].stats.merged += 1;
                    st.last_merge = Some(target);
                    self.add_held(&mut st, -1);
                    freed.push(id);
                    continue;
                }
            }
            r.fifo_time = now.saturating_add(k.fifo_expire[dir]);
            st.add_rq(id, r);
            // Zone write locking inserts a zone's writes in the FIFO sorted by position: before
            // the zone's next write in sector order, if one is queued.
            if let (Some(z), true) = (st.zones.as_ref(), r.seq_write) {
                let shift = z.shift;
                if let Some(n) = st.latter(id) {
                    let next = st.rqs[n.index()];
                    if next.sector >> shift == sector >> shift && next.seq < st.rqs[id.index()].seq
                    {
                        st.fifo_remove(id);
                        st.rqs[id.index()].seq = next.seq;
                        st.fifo_insert(id);
                    }
                }
            }
            if st.last_merge.is_none() && mergeable {
                st.last_merge = Some(id);
            }
        }
    }

    fn dispatch_request(&self, _q: &ElvCtx<'_>, _hctx: HctxIdx, now: Nanos) -> Option<RqId> {
        let k = self.knobs();
        let mut st = self.lock();
        let id = st.dispatch(&k, now)?;
        self.add_held(&mut st, -1);
        Some(id)
    }

    fn has_work(&self, _hctx: HctxIdx) -> bool {
        self.nr_held.load(Ordering::Acquire) > 0
    }

    fn restart_hctxs(&self, out: &mut Vec<HctxIdx>) {
        // Looked at without the lock first: only a zone-locking queue ever has any.
        if self.restart_due.load(Ordering::Acquire)
            && self.restart_due.swap(false, Ordering::AcqRel)
        {
            let mut st = self.lock();
            out.append(&mut st.restart);
        }
    }

    fn finish_request(&self, rq: &ElvRq) {
        let mut st = self.lock();
        let r = &mut st.rqs[rq.id.index()];
        if !r.counted {
            return;
        }
        assert!(
            !r.queued && !r.on_dispatch_list,
            "{:?}: finished while still queued",
            rq.id
        );
        r.counted = false;
        let (prio, ctx) = (r.prio as usize, r.ctx as usize);
        // `dd_finish_request`: the zone is free again; writes waiting for it need the queue
        // run (`blk_mq_sched_mark_restart_hctx`).
        if st.zone_write_unlock(rq.id) && st.per_prio.iter().any(|p| p.fifo[WRITE].len > 0) {
            st.restart.push(rq.hctx);
            self.restart_due.store(true, Ordering::Release);
        }
        let pp = &mut st.per_prio[prio];
        pp.stats.completed += 1;
        assert!(
            pp.nr_queued > 0,
            "mq-deadline: nr_queued underflow in {}",
            PRIO_NAMES[prio]
        );
        pp.nr_queued -= 1;
        st.ctx_stats[ctx][prio].completed += 1;
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

    fn percpu_sum_passes(&self) -> Option<u64> {
        (self.tunables.get(T_QUEUED_SUM) != 0).then(|| self.lock().sum_passes)
    }

    fn debug_state(&self) -> String {
        let st = self.lock();
        let mut s = String::new();
        let (acq, cont) = (
            st.lock_acquired,
            self.lock_contended.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            s,
            "mq-deadline: batching {} starved {} last_dir {} async_depth {} lock taken {} contended {}",
            st.batching,
            st.starved,
            if st.last_dir == READ { "read" } else { "write" },
            self.tunables.get(T_ASYNC_DEPTH),
            acq,
            cont
        );
        let queued: Vec<String> = (0..NR_PRIO)
            .map(|p| st.per_prio[p].nr_queued.to_string())
            .collect();
        let _ = writeln!(s, "  queued (rt be idle): {}", queued.join(" "));
        for (p, pp) in st.per_prio.iter().enumerate() {
            let owned = pp.stats.dispatched + pp.stats.merged
                - pp.stats
                    .completed
                    .min(pp.stats.dispatched + pp.stats.merged);
            let _ = writeln!(
                s,
                "  {}: inserted {} merged {} dispatched {} completed {} owned_by_driver {} dispatch_list {}",
                PRIO_NAMES[p],
                pp.stats.inserted,
                pp.stats.merged,
                pp.stats.dispatched,
                pp.stats.completed,
                owned,
                pp.dispatch.len()
            );
            for (d, name) in [(READ, "read"), (WRITE, "write")] {
                let head = unlink(pp.fifo[d].head).map(|id| {
                    let r = &st.rqs[id.index()];
                    format!("{:?} sector {} deadline {}", id, r.sector, r.fifo_time)
                });
                let next = st
                    .next_in_sort(p, d)
                    .map(|id| format!("{:?} sector {}", id, st.rqs[id.index()].sector));
                let _ = writeln!(
                    s,
                    "    {name}{p}_fifo_list: {} queued, head {}; {name}{p}_next_rq: {}",
                    pp.fifo[d].len,
                    head.unwrap_or_else(|| "-".into()),
                    next.unwrap_or_else(|| "-".into())
                );
            }
        }
        s
    }

    fn check_invariants(&self) {
        let st = self.lock();
        if let Some(z) = &st.zones {
            // A zone is locked by exactly one write at the device (`seq_zones_wlock`).
            let holders = st.rqs.iter().filter(|r| r.zone_locked).count();
            assert_eq!(
                holders,
                z.locked.len(),
                "mq-deadline: {holders} writes hold {} locked zones",
                z.locked.len()
            );
        }
        let mut held = 0u32;
        for (p, pp) in st.per_prio.iter().enumerate() {
            for d in [READ, WRITE] {
                assert_eq!(
                    pp.sort[d].len(),
                    pp.fifo[d].len as usize,
                    "{}: sort tree and FIFO disagree",
                    PRIO_NAMES[p]
                );
                // Walk the FIFO: linked both ways, in arrival order, every entry sorted.
                let (mut cur, mut prev, mut n, mut last_seq) = (pp.fifo[d].head, 0u32, 0u32, 0u64);
                while let Some(id) = unlink(cur) {
                    let r = &st.rqs[id.index()];
                    assert_eq!(r.fifo_prev, prev, "{id:?}: FIFO back link broken");
                    assert!(r.seq > last_seq, "{id:?}: FIFO out of arrival order");
                    assert!(
                        pp.sort[d].contains(&(r.sector, id)),
                        "{id:?}: in the FIFO but not sorted"
                    );
                    (prev, cur, last_seq, n) = (cur, r.fifo_next, r.seq, n + 1);
                }
                assert_eq!(
                    prev, pp.fifo[d].tail,
                    "{}: FIFO tail is wrong",
                    PRIO_NAMES[p]
                );
                assert_eq!(n, pp.fifo[d].len, "{}: FIFO length is wrong", PRIO_NAMES[p]);
                for &(sector, id) in &pp.sort[d] {
                    let r = &st.rqs[id.index()];
                    assert!(
                        r.queued
                            && r.sector == sector
                            && r.prio as usize == p
                            && r.dir as usize == d
                    );
                    assert_eq!(
                        st.hash_find(r.end, p, d, None)
                            .map(|h| st.rqs[h.index()].end),
                        Some(r.end),
                        "{id:?}: sorted but not in the merge hash"
                    );
                }
                held += pp.sort[d].len() as u32;
            }
            held += pp.dispatch.len() as u32;
            assert_eq!(
                pp.nr_queued as u64,
                pp.stats.inserted - pp.stats.completed,
                "{}: nr_queued drifted from inserted - completed",
                PRIO_NAMES[p]
            );
            assert_eq!(
                st.summed(p),
                pp.nr_queued,
                "{}: per-Ctx counters disagree",
                PRIO_NAMES[p]
            );
        }
        assert_eq!(
            held,
            self.nr_held.load(Ordering::Acquire),
            "held-request count drifted"
        );
    }

    /// `dd_depth_updated`: `async_depth` becomes the new `nr_requests`, whatever was
    /// written to it (as in 6.18); the other tunables and the statistics stay.
    fn depth_updated(&self, nr_requests: u32, nr_rq_ids: u32) {
        self.tunables
            .store("async_depth", &nr_requests.max(1).to_string())
            .expect("nr_requests is within async_depth's range");
        let mut st = self.lock();
        // The ids name other requests now (none is allocated: the queue is drained).
        st.rqs = vec![DdRq::default(); nr_rq_ids as usize];
        st.last_merge = None;
    }

    fn exit_sched(&self) {
        self.check_invariants();
        let st = self.lock();
        for (p, pp) in st.per_prio.iter().enumerate() {
            assert!(
                pp.is_empty(),
                "mq-deadline: {} still holds requests at exit",
                PRIO_NAMES[p]
            );
            assert_eq!(
                pp.nr_queued, 0,
                "mq-deadline: {} has requests unfinished at exit",
                PRIO_NAMES[p]
            );
        }
    }
}

/// `elv_attempt_insert_merge`: a queued request of the same class and direction that ends
/// where `id` starts, and may absorb it. On success `id`'s bios have moved into it.
fn insert_merge_target(
    st: &DdState,
    q: &ElvCtx<'_>,
    prio: usize,
    dir: usize,
    id: RqId,
    sector: u64,
) -> Option<RqId> {
    let one_hit = st.last_merge.filter(|&lm| {
        let r = &st.rqs[lm.index()];
        lm != id && r.end == sector && r.prio as usize == prio && r.dir as usize == dir
    });
    let target = match one_hit {
        Some(t) => t,
        None if q.nomerges == NoMerges::All => st.hash_find(sector, prio, dir, Some(id))?,
        None => return None,
    };
    let mut t = q.rqs.lock(target);
    let mut r = q.rqs.lock(id);
    if !merge::req_merge_ok(&t, &r, q.limits) {
        return None;
    }
    merge::merge_requests(&mut t, &mut r);
    Some(target)
}

/// After a back merge, `id` may now reach its sector-order successor: fold that one in
/// (`attempt_back_merge` → `dd_merged_requests`, which keeps the earlier deadline).
fn attempt_back_merge(st: &mut DdState, q: &ElvCtx<'_>, id: RqId) -> Option<(RqId, RqId)> {
    let r = st.rqs[id.index()];
    let &(_, next) = st.per_prio[r.prio as usize].sort[r.dir as usize]
        .range((r.end, RqId(0))..=(r.end, RqId(u32::MAX)))
        .find(|&&(_, n)| n != id)?;
    fold(st, q, id, next)
}

/// After a front merge, `id`'s sector-order predecessor may now reach it.
fn attempt_front_merge(st: &mut DdState, q: &ElvCtx<'_>, id: RqId) -> Option<(RqId, RqId)> {
    let r = st.rqs[id.index()];
    let prev = st.hash_find(r.sector, r.prio as usize, r.dir as usize, Some(id))?;
    fold(st, q, prev, id)
}

/// Merges `next` into `rq` if the rules allow; returns `(rq, next)`, `next` for the core to
/// free.
fn fold(st: &mut DdState, q: &ElvCtx<'_>, rq: RqId, next: RqId) -> Option<(RqId, RqId)> {
    {
        let mut a = q.rqs.lock(rq);
        let mut b = q.rqs.lock(next);
        if !merge::req_merge_ok(&a, &b, q.limits) {
            return None;
        }
        merge::merge_requests(&mut a, &mut b);
    }
    let gone = st.del_rq(next);
    st.index_del(rq);
    st.rqs[rq.index()].end = gone.end;
    if gone.fifo_time < st.rqs[rq.index()].fifo_time {
        // The merged request takes the earlier deadline and the FIFO place that goes with it.
        st.fifo_remove(rq);
        let keep = &mut st.rqs[rq.index()];
        (keep.fifo_time, keep.seq) = (gone.fifo_time, gone.seq);
        st.fifo_insert(rq);
    }
    st.index_add(rq);
    st.per_prio[gone.prio as usize].stats.merged += 1;
    Some((rq, next))
}

fn init(init: &ElevatorInit) -> Box<dyn Elevator> {
    Box::new(MqDeadline::new(init))
}

/// mq-deadline's registration (`mq_deadline`): name, alias, tunables, hook costs.
pub const MQ_DEADLINE: ElevatorType = ElevatorType {
    name: "mq-deadline",
    alias: Some("deadline"),
    features: ElvFeatures::empty(),
    tunables: &TUNABLES,
    aliases: &[],
    init: Some(init),
    // Measured on this project's machine with `mqblk bench --preset=sched-cost` (mqblk's
    // own hooks, not the kernel's); every hook runs under `dd->lock`.
    cost: ElvCost {
        insert_ns: 70,
        insert_lock: LockScope::Queue,
        dispatch_ns: 80,
        probe_ns: 30,
        dispatch_lock: LockScope::Queue,
        complete_ns: 50,
        complete_lock: LockScope::Queue,
        merge_ns: 40,
        path_ns: 0,
        path_complete_ns: 0,
    },
};
