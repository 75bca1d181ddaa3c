//! The elevator (I/O scheduler) interface, shaped like the kernel's `struct elevator_mq_ops`
//! (`block/elevator.h`), and the tunables table behind its sysfs attributes.
//!
//! An elevator is called through `&self` from any submitting or dispatching thread, and keeps
//! its own lock(s), as kernel schedulers do (`dd->lock`, kyber's per-hctx locks). Lock order:
//! an elevator may lock request slots (through [`ElvCtx::rqs`]) while holding its own lock; the
//! core never calls an elevator hook while it holds a slot lock. Hooks never call back into
//! the queue: anything the core must do afterwards (free a request merged away) is returned.

use crate::bio::Bio;
use crate::blkcg::Blkcg;
use crate::merge::{NoMerges, QueueLimits};
use crate::request::{ElvRq, RequestTable, RqId};
use crate::{HctxIdx, Nanos};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use thiserror::Error;

bitflags::bitflags! {
    /// Elevator feature flags (`ELEVATOR_F_*`).
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
    pub struct ElvFeatures: u32 {
        /// The scheduler keeps per-hardware-queue state and only returns requests of the hctx
        /// it is asked for, so every hctx may be run (kyber). Without it, and with several
        /// hardware queues, the core runs only the submitter's own hctx (the single-hctx dispatch patch,
        /// `QUEUE_FLAG_SQ_SCHED`).
        const MQ_AWARE = 1 << 0;
        /// The scheduler wants zoned sequential-write ordering (unused for now).
        const ZBD_SEQ_WRITE = 1 << 1;
    }
}

/// What an elevator is told when it is attached (`init_sched` + `init_hctx`).
#[derive(Clone, Debug)]
pub struct ElevatorInit {
    /// The name of the scheduler type being attached (`elevator_type`'s `elevator_name`):
    /// one init may serve several types.
    pub name: &'static str,
    /// Hardware queues of the queue.
    pub nr_hw_queues: u16,
    /// Software queues of the queue.
    pub nr_ctx: u16,
    /// Scheduler tags per hardware queue (`nr_requests`).
    pub nr_requests: u32,
    /// Size of the request-id space, for per-request side tables.
    pub nr_rq_ids: u32,
    /// The largest request-id space a later `nr_requests` change can give the queue
    /// ([`Elevator::depth_updated`]): tables the scheduler reads without its lock are
    /// sized for it once, so a depth change never reallocates them.
    pub max_rq_ids: u32,
    /// Driver tags per hardware queue.
    pub queue_depth: u32,
    /// The device is rotational (an HDD): BFQ and others adapt to it.
    pub rotational: bool,
    /// The queue's limits.
    pub limits: QueueLimits,
    /// A zoned queue without zone write plugs (Linux before 6.10,
    /// `QueueConfig::zone_write_plugging` off): a scheduler that keeps writes in order
    /// (mq-deadline's `ELEVATOR_F_ZBD_SEQ_WRITE`) locks a sequential zone from a write's
    /// dispatch to its end.
    pub zone_write_locking: bool,
    /// The block cgroups bios are charged to (`bio.group` is an id in it).
    pub blkcg: Arc<Blkcg>,
}

/// The view of the queue an elevator hook gets.
pub struct ElvCtx<'a> {
    /// The queue's requests, for the hook to lock the ones it holds.
    pub rqs: &'a RequestTable,
    /// The queue's limits, for merge checks.
    pub limits: &'a QueueLimits,
    /// Which merges the queue allows.
    pub nomerges: NoMerges,
}

/// The result of [`Elevator::bio_merge`].
#[derive(Debug)]
pub enum BioMerge {
    /// The bio is untouched and comes back for a new request.
    NotMerged(Bio),
    /// The bio joined a queued request; if that request then absorbed a neighbour, the
    /// neighbour's id is returned for the core to free.
    Merged {
        /// A neighbour absorbed by the grown request, for the core to free.
        freed: Option<RqId>,
    },
}

/// `hctx->elevator_queued` of Linux 5.10 ("blk-mq, elevator: Count requests per hctx to
/// improve performance"; reverted in 5.11 by "Revert \"blk-mq, elevator: Count requests per
/// hctx to improve performance\"", the first patch of the series whose second is "blk-mq:
/// Improve performance of non-mq IO schedulers with multiple HW queues"). mq-deadline and
/// BFQ counted each request inserted through a hardware queue on that queue, and their
/// `has_work` said no for a queue with none counted, so kblockd's runs of every hardware
/// queue skipped the others. BFQ drops the count when a started request finishes or is
/// requeued (mq-deadline did at dispatch); a request folded into another at insert is
/// counted and never dropped (the kernel's leak: it is freed unstarted), so a queue's count
/// only ever errs upwards.
///
/// Only BFQ has it here (its `elevator_queued` attribute, not a kernel one). Our
/// mq-deadline has the priority classes of 5.14, which hold a lower class back while a
/// higher one is in flight; with the 5.10 counts that stalls (the fuzzer's seed 5970: the
/// only queue counting the waiting requests had dispatched other queues' requests and was
/// never run again), a combination no kernel had, so we leave it out there.
///
/// BFQ keeps the counts always; the attribute only decides whether `has_work` looks at
/// them, so switching it never leaves a count behind.
#[derive(Debug)]
pub struct HctxQueued {
    counts: Box<[crossbeam_utils::CachePadded<std::sync::atomic::AtomicU32>]>,
}

impl HctxQueued {
    /// Every count zero, for `nr_hw_queues` queues (at least one).
    pub fn new(nr_hw_queues: u16) -> HctxQueued {
        HctxQueued {
            counts: (0..nr_hw_queues.max(1))
                .map(|_| Default::default())
                .collect(),
        }
    }

    /// `atomic_inc(&hctx->elevator_queued)` in the scheduler's `insert_requests`.
    pub fn inc(&self, h: HctxIdx) {
        self.counts[h.0 as usize].fetch_add(1, Ordering::AcqRel);
    }

    /// `atomic_dec(&rq->mq_hctx->elevator_queued)`. Panics on a count that would go
    /// below zero: a request dropped that was never counted.
    pub fn dec(&self, h: HctxIdx) {
        let was = self.counts[h.0 as usize].fetch_sub(1, Ordering::AcqRel);
        assert!(was > 0, "elevator_queued of {h:?} dropped below zero");
    }

    /// The count of `h`.
    pub fn get(&self, h: HctxIdx) -> u32 {
        self.counts[h.0 as usize].load(Ordering::Acquire)
    }
}

/// The scheduler operations. Only `insert_requests`, `dispatch_request` and `has_work` are
/// mandatory, as in the kernel; the rest default to "nothing to do".
///
/// # Contracts
///
/// **Threads and locks.** Every hook may be called from several threads at once: the
/// submitting threads (one per software queue), the threads that reap completions, the
/// runners of other hardware queues, the queue's timer. The core holds no lock of the
/// scheduler's and no queue-wide lock when it calls one, so a scheduler keeps its state
/// behind its own lock (`dd->lock`, `bfqd->lock`), as in the kernel. The one thing the core
/// serialises is a hardware queue's run: `dispatch_request` for one `hctx` never runs twice
/// at once (the queue's run lock, `blk_mq_run_hw_queue`), though it runs beside inserts,
/// completions and other queues' dispatches; `has_work` is asked from anywhere. A request's own fields are
/// read and changed through `ElvCtx::rqs`, one request at a time; never hold the scheduler's
/// lock while waiting for something only another hook can give.
///
/// **Time.** `now` is the calling thread's clock in nanoseconds: virtual time in the
/// simulator, the queue's clock in a real-time run. Each thread's readings only grow, but
/// two threads' need not be in order: a request another thread inserted may carry a later
/// time than the dispatcher's `now` (mq-deadline's dispatch accounts for it).
///
/// **A request's life in the hooks.** `limit_depth`, then (with a tag) `prepare_request`:
/// allocated, not yet the scheduler's and on no list. `insert_requests`: the scheduler owns
/// it from here, until it hands it back from `dispatch_request` or folds it into another
/// by an insert merge (the folded one goes to `freed`). `requeue_request` and a second
/// `insert_requests`: the device gave it back before finishing it. `completed_request`:
/// the device finished it (a request that never reached the device gets none).
/// `finish_request`: it is being freed, completed or not; the last hook it sees.
/// `bio_merge` runs before allocation on the submitting thread and may grow a request the
/// scheduler still owns. `exit_sched` and `depth_updated` run with the queue frozen:
/// nothing is in flight or held.
pub trait Elevator: Send + Sync {
    /// The scheduler's name, as `queue/scheduler` shows it.
    fn name(&self) -> &'static str;
    /// What it declares to the core (`MQ_AWARE` and the like).
    fn features(&self) -> ElvFeatures;

    /// At allocation: the shallow depth (in scheduler tags) a request for `bio` may use, or
    /// `u32::MAX` for the whole map (`limit_depth`, called in the submitting task, whose I/O
    /// context is `bio`'s issuer). Called with no queue lock held.
    fn limit_depth(&self, _bio: &Bio) -> u32 {
        u32::MAX
    }

    /// A request was just allocated for this scheduler (`prepare_request`).
    fn prepare_request(&self, _rq: &ElvRq) {}

    /// Try to merge `bio` into a queued request before a request is allocated (`bio_merge`).
    /// `hctx` is the hardware queue the bio maps to from its submitter's Ctx (`bio.ctx`).
    fn bio_merge(&self, _q: &ElvCtx<'_>, _hctx: HctxIdx, bio: Bio) -> BioMerge {
        BioMerge::NotMerged(bio)
    }

    /// Take ownership of `rqs`, all mapped to `hctx` (`insert_requests`). `at_head` is set for
    /// requeued or urgent requests. Requests folded into others by an insert merge are pushed
    /// to `freed` for the core to release.
    fn insert_requests(
        &self,
        q: &ElvCtx<'_>,
        hctx: HctxIdx,
        rqs: &[RqId],
        at_head: bool,
        now: Nanos,
        freed: &mut Vec<RqId>,
    );

    /// The next request to issue for `hctx`, or none (`dispatch_request`). Called once per
    /// budget token. A scheduler that is not `MQ_AWARE` may return a request of another hctx.
    fn dispatch_request(&self, q: &ElvCtx<'_>, hctx: HctxIdx, now: Nanos) -> Option<RqId>;

    /// Cheap check whether `dispatch_request` could return something (`has_work`). It may be
    /// stale: a true answer followed by no request makes the core arm a delayed re-run.
    fn has_work(&self, hctx: HctxIdx) -> bool;

    /// Whether `has_work` counts requests per hardware queue ([`HctxQueued`], Linux 5.10's
    /// `elevator_queued`, switched on by the scheduler's `elevator_queued` attribute).
    fn counts_per_hctx(&self) -> bool {
        false
    }

    /// The device finished the request (`completed_request`); latency feedback goes here.
    fn completed_request(&self, _rq: &ElvRq, _now: Nanos) {}

    /// The request is being freed, completed or not (`finish_request`).
    fn finish_request(&self, _rq: &ElvRq) {}

    /// The request goes back to the scheduler (`requeue_request`), at `now`.
    fn requeue_request(&self, _rq: &ElvRq, _now: Nanos) {}

    /// Hardware queues to run because something they waited for was freed (kyber's domain
    /// tokens: the kernel's token wait queues, whose wake-up runs the waiting hctx). Called by
    /// the core after each completion batch; push onto `out`.
    fn restart_hctxs(&self, _out: &mut Vec<HctxIdx>) {}

    /// When the scheduler wants `timer` called (kyber arms it from `completed_request`).
    fn next_timer(&self) -> Option<Nanos> {
        None
    }

    /// Periodic work (kyber's depth adjustment), called once `next_timer` has passed.
    fn timer(&self, _now: Nanos) {}

    /// The sysfs-like tunables.
    fn tunables(&self) -> &Tunables;

    /// The scheduler as its own type, for callers that know it (its typed statistics).
    fn as_any(&self) -> &dyn std::any::Any;

    /// Its statistics, each a name and a count (what the kernel's debugfs and sysfs show),
    /// for reports that do not know the scheduler's own type. None by default.
    fn stats(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Per-CPU counter sums done so far: each pass reads one counter line per software
    /// queue (mq-deadline's `dd_queued` before "mq-deadline: Make dd_queued O(1)"), which the
    /// simulator charges. `None`: the scheduler keeps no per-CPU counters to sum.
    fn percpu_sum_passes(&self) -> Option<u64> {
        None
    }

    /// A human dump of the internal state (the debugfs attributes).
    fn debug_state(&self) -> String;

    /// Asserts the scheduler's internal invariants (called by tests and the simulator).
    fn check_invariants(&self) {}

    /// Detach: the scheduler must be empty (`exit_sched`). Panics if it still holds requests.
    fn exit_sched(&self);

    /// `depth_updated` (`blk_mq_update_nr_requests`): the queue, frozen and drained, now
    /// has `nr_requests` scheduler requests per map and request ids below `nr_rq_ids` (at
    /// most the init's `max_rq_ids`). The scheduler keeps its state (its queues and what
    /// it has learned of them, its tunables) and redoes only what it derives from the
    /// depth.
    fn depth_updated(&self, nr_requests: u32, nr_rq_ids: u32);
}

/// Builds a scheduler instance for a queue (`init_sched`).
pub type ElevatorInitFn = fn(&ElevatorInit) -> Box<dyn Elevator>;

/// The registration descriptor of a scheduler (`struct elevator_type`).
pub struct ElevatorType {
    /// The name `queue/scheduler` takes.
    pub name: &'static str,
    /// A second name (`deadline` for `mq-deadline`, `elevator_alias`).
    pub alias: Option<&'static str>,
    /// Its features.
    pub features: ElvFeatures,
    /// Its tunables (`elevator_attrs`).
    pub tunables: &'static [TunableDesc],
    /// Second names of tunables in other units (BFQ's `slice_idle` beside `slice_idle_us`).
    pub aliases: &'static [TunableAlias],
    /// Builds an instance; `None` for `none`, which has no elevator object at all.
    pub init: Option<ElevatorInitFn>,
    /// CPU cost of its hooks and the locks they take (the simulator's cost model).
    pub cost: ElvCost,
}

/// One tunable: the kernel's sysfs name, unit and default.
#[derive(Copy, Clone, Debug)]
pub struct TunableDesc {
    /// The sysfs name (`iosched/NAME`).
    pub name: &'static str,
    /// Unit of the value as written to sysfs ("ms", "ns", "requests", "bool", ...).
    pub unit: &'static str,
    /// The kernel's default.
    pub default: i64,
    /// The least value a store keeps.
    pub min: i64,
    /// The most value a store keeps.
    pub max: i64,
    /// One line saying what it does.
    pub help: &'static str,
}

/// Why a tunable cannot be read or written.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TunableError {
    /// No tunable of that name.
    #[error("unknown tunable '{name}' for {sched} (known: {known})")]
    Unknown {
        /// The scheduler.
        sched: &'static str,
        /// The name asked for.
        name: String,
        /// The names it has, for the message.
        known: String,
    },
    /// A value that is not an integer.
    #[error("tunable '{name}': '{value}' is not an integer")]
    NotANumber {
        /// The tunable.
        name: &'static str,
        /// The text given.
        value: String,
    },
    /// A value outside the range the kernel's store keeps.
    #[error("tunable '{name}': {value} out of range {min}..={max} ({unit})")]
    OutOfRange {
        /// The tunable.
        name: &'static str,
        /// The value given.
        value: i64,
        /// The least it keeps.
        min: i64,
        /// The most it keeps.
        max: i64,
        /// Its unit.
        unit: &'static str,
    },
}

/// A second sysfs name for a tunable in another unit, as BFQ's `slice_idle` (ms) beside
/// `slice_idle_us`: both read and write the same variable. The alias's value is the target's
/// divided by `factor`.
#[derive(Copy, Clone, Debug)]
pub struct TunableAlias {
    /// The alias's sysfs name.
    pub name: &'static str,
    /// The tunable it reads and writes.
    pub target: &'static str,
    /// The alias's unit.
    pub unit: &'static str,
    /// The target's value is the alias's times this.
    pub factor: i64,
}

/// The current values of a scheduler's tunables, readable and writable while it runs.
pub struct Tunables {
    sched: &'static str,
    descs: &'static [TunableDesc],
    aliases: &'static [TunableAlias],
    values: Box<[AtomicI64]>,
}

impl Tunables {
    /// The defaults of scheduler `sched`'s tunables `descs`.
    pub fn new(sched: &'static str, descs: &'static [TunableDesc]) -> Tunables {
        Tunables {
            sched,
            descs,
            aliases: &[],
            values: descs.iter().map(|d| AtomicI64::new(d.default)).collect(),
        }
    }
    /// With second names for some tunables (see [`TunableAlias`]).
    pub fn with_aliases(mut self, aliases: &'static [TunableAlias]) -> Tunables {
        for a in aliases {
            assert!(
                self.descs.iter().any(|d| d.name == a.target) && a.factor > 0,
                "alias {} of unknown tunable {}",
                a.name,
                a.target
            );
        }
        self.aliases = aliases;
        self
    }
    /// The tunables' second names.
    pub fn aliases(&self) -> &'static [TunableAlias] {
        self.aliases
    }
    /// The tunables' descriptors, in index order.
    pub fn descs(&self) -> &'static [TunableDesc] {
        self.descs
    }
    /// The value of tunable `i` (its index in the descriptor table).
    #[inline]
    pub fn get(&self, i: usize) -> i64 {
        self.values[i].load(Ordering::Relaxed)
    }
    fn index(&self, name: &str) -> Result<usize, TunableError> {
        self.descs
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| TunableError::Unknown {
                sched: self.sched,
                name: name.to_string(),
                known: self
                    .descs
                    .iter()
                    .map(|d| d.name)
                    .chain(self.aliases.iter().map(|a| a.name))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
    fn alias(&self, name: &str) -> Option<&'static TunableAlias> {
        self.aliases.iter().find(|a| a.name == name)
    }
    /// The value of the tunable or alias `name`, as reading its sysfs file gives it.
    pub fn show(&self, name: &str) -> Result<i64, TunableError> {
        if let Some(a) = self.alias(name) {
            return Ok(self.get(self.index(a.target)?) / a.factor);
        }
        Ok(self.get(self.index(name)?))
    }
    /// Parses and stores a value, refusing it with its valid range when out of bounds.
    pub fn store(&self, name: &str, value: &str) -> Result<(), TunableError> {
        let (i, factor, shown_as) = match self.alias(name) {
            Some(a) => (self.index(a.target)?, a.factor, Some(a)),
            None => (self.index(name)?, 1, None),
        };
        let d = &self.descs[i];
        let v: i64 = value.trim().parse().map_err(|_| TunableError::NotANumber {
            name: shown_as.map_or(d.name, |a| a.name),
            value: value.to_string(),
        })?;
        if let Some(a) = shown_as {
            let (min, max) = ((d.min + factor - 1) / factor, d.max / factor);
            if v < min || v > max {
                return Err(TunableError::OutOfRange {
                    name: a.name,
                    value: v,
                    min,
                    max,
                    unit: a.unit,
                });
            }
            self.values[i].store(v * factor, Ordering::Relaxed);
            return Ok(());
        }
        if v < d.min || v > d.max {
            return Err(TunableError::OutOfRange {
                name: d.name,
                value: v,
                min: d.min,
                max: d.max,
                unit: d.unit,
            });
        }
        self.values[i].store(v, Ordering::Relaxed);
        Ok(())
    }
    /// `name = value unit` lines, in table order.
    pub fn dump(&self) -> String {
        self.descs
            .iter()
            .enumerate()
            .map(|(i, d)| format!("{} = {} {}\n", d.name, self.get(i), d.unit))
            .chain(self.aliases.iter().map(|a| {
                let v = self.show(a.name).unwrap_or(0);
                format!("{} = {} {} (same as {})\n", a.name, v, a.unit, a.target)
            }))
            .collect()
    }
}

/// Which lock a scheduler hook runs under, for the simulator's lock model.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LockScope {
    /// No lock (atomics only).
    None,
    /// One lock for the whole queue (mq-deadline's `dd->lock`, BFQ's `bfqd->lock`).
    Queue,
    /// One per hardware queue (kyber's per-hctx domain lock).
    Hctx,
    /// One per software queue (kyber's per-ctx bio-merge lists; `none`'s ctx lists).
    Ctx,
}

/// What a scheduler's hooks cost a CPU beyond `none`'s path, and the lock each runs under.
/// The simulator charges these; each [`ElevatorType`] carries its own, so a scheduler is
/// costed the same whatever name or alias selected it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ElvCost {
    /// CPU per request inserted (`insert_requests`), in ns.
    pub insert_ns: u64,
    /// The lock `insert_requests` takes.
    pub insert_lock: LockScope,
    /// CPU per request dispatched (`dispatch_request`), in ns.
    pub dispatch_ns: u64,
    /// A dispatch attempt that finds nothing (every run of a hctx asks once).
    pub probe_ns: u64,
    /// The lock `dispatch_request` takes.
    pub dispatch_lock: LockScope,
    /// CPU per request completed (`completed_request`, `finish_request`), in ns.
    pub complete_ns: u64,
    /// The lock the completion hooks take.
    pub complete_lock: LockScope,
    /// CPU per bio offered for a merge (`bio_merge`), in ns.
    pub merge_ns: u64,
    /// Per request, the scheduler path's cost outside any scheduler lock: the kernel inserts
    /// and then runs the queue where `none` issues directly, takes a driver tag at dispatch,
    /// frees two tags. Charged once per dispatched request, before the dispatch hook. 0 in
    /// mqblk's own costs, whose hooks are measured whole.
    pub path_ns: u64,
    /// Per request, the part of that path the kernel spends outside the submitting task
    /// (the completion softirq, a loop device's worker): charged with the completion on
    /// the CPU that completes it, before the completion hook. 0 where not measured.
    pub path_complete_ns: u64,
}

impl ElvCost {
    /// No scheduler: inserts go to the software queue under its lock, nothing else.
    pub const NONE: ElvCost = ElvCost {
        insert_ns: 0,
        insert_lock: LockScope::Ctx,
        dispatch_ns: 0,
        probe_ns: 0,
        dispatch_lock: LockScope::None,
        complete_ns: 0,
        complete_lock: LockScope::None,
        merge_ns: 0,
        path_ns: 0,
        path_complete_ns: 0,
    };
}
