//! BFQ's sysfs tunables (`bfq_attrs` in bfq-iosched.c): their names, units, defaults
//! and the ranges the kernel's store functions keep as given.

use super::*;

pub(in crate::bfq) const T_SLICE_IDLE_US: usize = 0;
pub(in crate::bfq) const T_TIMEOUT_SYNC: usize = 1;
pub(in crate::bfq) const T_MAX_BUDGET: usize = 2;
pub(in crate::bfq) const T_FIFO_SYNC: usize = 3;
pub(in crate::bfq) const T_FIFO_ASYNC: usize = 4;
pub(in crate::bfq) const T_BACK_SEEK_MAX: usize = 5;
pub(in crate::bfq) const T_BACK_SEEK_PENALTY: usize = 6;
pub(in crate::bfq) const T_STRICT: usize = 7;
pub(in crate::bfq) const T_LOW_LATENCY: usize = 8;
pub(in crate::bfq) const T_QUEUE_MERGING: usize = 9;
pub(in crate::bfq) const T_STABLE_MERGING: usize = 10;
pub(in crate::bfq) const T_HAS_WORK_BUSY: usize = 11;
pub(in crate::bfq) const T_ELEVATOR_QUEUED: usize = 12;
pub(in crate::bfq) const T_TAGS_BY_WEIGHT: usize = 13;
pub(in crate::bfq) const T_INJECT_WOKEN: usize = 14;

// The ranges are the kernel's store clamps (`STORE_FUNCTION`, `USEC_STORE_FUNCTION`,
// `bfq_timeout_sync_store`, `bfq_max_budget_store` in bfq-iosched.c): every value it keeps
// as given is taken; what it would clamp is refused in one line.
pub(super) static TUNABLES: [TunableDesc; 15] = [
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
    // two settings exist to measure what BFQ's no-merging-on-flash patch changed: 2 merges on every device, as the
    // kernel did before it, 0 never merges.
    TunableDesc {
        name: "queue_merging",
        unit: "mode",
        default: 1,
        min: 0,
        max: 2,
        help: "merge cooperating queues: 0 never, 1 auto (not on non-rotational devices with queueing, BFQ's no-merging-on-flash patch), 2 always",
    },
    // Not a kernel attribute either: stable merging came with Linux 5.13 ("block, bfq: merge
    // bursts of newly-created queues"); 0 runs BFQ as kernels before it, as the no-merging-on-flash patch's kernel did.
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
    // every hardware queue run again 3 ms later (the single-hctx dispatch patch's kernel, 5.10).
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
pub(super) static ALIASES: [TunableAlias; 1] = [TunableAlias {
    name: "slice_idle",
    target: "slice_idle_us",
    unit: "ms",
    factor: 1000,
}];
