//! mqblk's device and queue options (drivers, hardware queues, faults, queue limits), in a job
//! file beside fio's.

use super::*;

/// mqblk's device and queue options (drivers, hardware queues, faults, queue limits), in a job
pub(super) static DEVICE: &[OptDef] = &[
    OptDef {
        name: "driver",
        aliases: &[],
        default: "",
        help: "Block driver that serves the job's device (null, uring, sim); unset, ioengine= and filename= decide (the null device without them).",
        kind: Kind::Str {
            set: |j, v| j.driver = opt_string(v),
        },
    },
    OptDef {
        name: "device",
        aliases: &[],
        default: "",
        help: "Device model and its parameters (hdd, ssd, emmc, virtio, raid, null; e.g. hdd,ncq=32): what driver=sim serves and what mqblk sim simulates.",
        kind: Kind::Str {
            set: |j, v| j.device = (!v.is_empty()).then(|| v.to_string()),
        },
    },
    OptDef {
        name: "nr_hw_queues",
        aliases: &[],
        default: "1",
        help: "Number of hardware queues of the device.",
        kind: Kind::Int {
            min: 1,
            max: 1024,
            set: |j, v| j.nr_hw_queues = to_u32(v),
        },
    },
    OptDef {
        name: "queue_depth",
        aliases: &["hw_queue_depth"],
        default: "64",
        help: "Tags per hardware queue (null_blk's hw_queue_depth).",
        kind: Kind::Int {
            min: 1,
            max: 10240,
            set: |j, v| j.queue_depth = to_u32(v),
        },
    },
    OptDef {
        name: "nr_requests",
        aliases: &[],
        default: "0",
        help: "Scheduler request limit per queue (0 = kernel default).",
        kind: Kind::Int {
            min: 0,
            max: 65536,
            set: |j, v| j.nr_requests = to_u32(v),
        },
    },
    OptDef {
        name: "nr_ctx",
        aliases: &[],
        default: "0",
        help: "Number of software contexts (0 = one per job thread).",
        kind: Kind::Int {
            min: 0,
            max: 4096,
            set: |j, v| j.nr_ctx = to_u32(v),
        },
    },
    OptDef {
        name: "shared_tags",
        aliases: &[],
        default: "0",
        help: "Share one tag set among all hardware queues.",
        kind: Kind::Bool {
            set: |j, v| j.shared_tags = v,
        },
    },
    OptDef {
        name: "blocking",
        aliases: &[],
        default: "0",
        help: "The driver may sleep while queueing (BLK_MQ_F_BLOCKING).",
        kind: Kind::Bool {
            set: |j, v| j.blocking = v,
        },
    },
    OptDef {
        name: "irqmode",
        aliases: &[],
        default: "none",
        // null_blk defaults to softirq, but a userspace device has no interrupt cost to
        // model, so completing inline is the honest default; softirq/timer are opt-in.
        help: "Completion mode: none/0 inline, softirq/1 deferred, timer/2 after completion_nsec.",
        kind: Kind::Enum {
            values: &["none", "softirq", "timer", "0", "1", "2"],
            set: |j, i| {
                j.irqmode = match i % 3 {
                    0 => IrqMode::None,
                    1 => IrqMode::Softirq,
                    _ => IrqMode::Timer,
                }
            },
        },
    },
    OptDef {
        name: "completion_nsec",
        aliases: &[],
        default: "10000",
        help: "Completion delay for irqmode=timer (plain number = nanoseconds).",
        kind: Kind::Time {
            unit_ns: 1,
            set: |j, v| j.completion_nsec = v,
        },
    },
    OptDef {
        name: "memory_backed",
        aliases: &[],
        default: "0",
        help: "Store written data so that reads return it.",
        kind: Kind::Bool {
            set: |j, v| j.memory_backed = v,
        },
    },
    OptDef {
        name: "zoned",
        aliases: &[],
        default: "0",
        help: "driver=null: null_blk's zoned mode, a host-managed zoned device (writes at each zone's write pointer, zone reset/open/close/finish/append).",
        kind: Kind::Bool {
            set: |j, v| j.zoned = v,
        },
    },
    OptDef {
        name: "zone_size",
        aliases: &[],
        default: "256",
        help: "driver=null, zoned=1: null_blk's zone_size in MB, a power of two.",
        kind: Kind::Int {
            min: 1,
            max: 1 << 20,
            set: |j, v| j.zone.zone_sectors = v << 11,
        },
    },
    OptDef {
        name: "zone_capacity",
        aliases: &[],
        default: "0",
        help: "driver=null, zoned=1: null_blk's zone_capacity in MB, writable bytes of a zone (0: the zone size).",
        kind: Kind::Int {
            min: 0,
            max: 1 << 20,
            set: |j, v| j.zone.zone_capacity = v << 11,
        },
    },
    OptDef {
        name: "zone_nr_conv",
        aliases: &[],
        default: "0",
        help: "driver=null, zoned=1: null_blk's zone_nr_conv, conventional zones at the device's start.",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.zone.nr_conv = to_u32(v),
        },
    },
    OptDef {
        name: "zone_max_open",
        aliases: &[],
        default: "0",
        help: "driver=null, zoned=1: null_blk's zone_max_open, zones open at once (0: no limit).",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.zone.max_open = to_u32(v),
        },
    },
    OptDef {
        name: "zone_max_active",
        aliases: &[],
        default: "0",
        help: "driver=null, zoned=1: null_blk's zone_max_active, zones open or closed at once (0: no limit).",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.zone.max_active = to_u32(v),
        },
    },
    OptDef {
        name: "zone_append_max_sectors",
        aliases: &[],
        default: "2147483647",
        help: "driver=null, zoned=1: null_blk's zone_append_max_sectors (0: the block layer emulates zone append with writes).",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as u64,
            set: |j, v| j.zone.append_max_sectors = to_u32(v),
        },
    },
    OptDef {
        name: "cache_size",
        aliases: &[],
        default: "0",
        help: "null_blk's cache_size in MiB: non-zero gives the null device a volatile write cache (write_cache \"write back\", FUA honoured), so flushes reach it; 0, the default, has none and the block layer completes flushes itself.",
        kind: Kind::Int {
            min: 0,
            max: 1 << 20,
            set: |j, v| j.cache_size_mb = v,
        },
    },
    OptDef {
        name: "rotational",
        aliases: &[],
        default: "auto",
        help: "Whether the device is rotational, as /sys/block/DEV/queue/rotational (auto: what sysfs says for a file's or device's disk under driver=uring, 0 for null).",
        kind: Kind::Enum {
            values: &["auto", "0", "1"],
            set: |j, i| j.rotational = [None, Some(false), Some(true)][i],
        },
    },
    OptDef {
        name: "virtqueue_size",
        aliases: &[],
        default: "auto",
        help: "driver=uring: descriptors in each ring of a virtio-blk disk under the file that lacks indirect descriptors; a request holds one per 4 KiB page plus two, and waits in the queue while the ring is full, as in virtio_queue_rq (auto: derived from sysfs, none for other disks; 0: no limit).",
        kind: Kind::Custom {
            syntax: "auto|N",
            set: set_virtqueue_size,
        },
    },
    OptDef {
        name: "dev_size",
        aliases: &[],
        default: "",
        help: "Device capacity (default: offset+size when size is set, else 1 GiB).",
        kind: Kind::Size {
            set: |j, v| j.dev_size = Some(v),
        },
    },
    OptDef {
        name: "fail_nth",
        aliases: &[],
        default: "0",
        help: "Fail every Nth request (0 = off).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fail_nth = v,
        },
    },
    OptDef {
        name: "timeout_nth",
        aliases: &[],
        default: "0",
        help: "Let every Nth request time out (0 = off).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.timeout_nth = v,
        },
    },
    OptDef {
        name: "requeue_nth",
        aliases: &[],
        default: "0",
        help: "Requeue every Nth request (0 = off).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.requeue_nth = v,
        },
    },
    OptDef {
        name: "fail_prob",
        aliases: &[],
        default: "0",
        help: "Percent chance that a request fails.",
        kind: Kind::Percent {
            set: |j, v| j.fail_prob = v,
        },
    },
    OptDef {
        name: "timeout_prob",
        aliases: &[],
        default: "0",
        help: "Percent chance that a request times out.",
        kind: Kind::Percent {
            set: |j, v| j.timeout_prob = v,
        },
    },
    OptDef {
        name: "requeue_prob",
        aliases: &[],
        default: "0",
        help: "Percent chance that a request is requeued.",
        kind: Kind::Percent {
            set: |j, v| j.requeue_prob = v,
        },
    },
    OptDef {
        name: "fault_seed",
        aliases: &[],
        default: "",
        help: "Seed for fault injection's random generator.",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fault_seed = Some(v),
        },
    },
    OptDef {
        name: "max_sectors_kb",
        aliases: &[],
        default: "0",
        help: "Largest request in KiB (0 = driver default).",
        kind: Kind::Int {
            min: 0,
            max: 1 << 20,
            set: |j, v| j.max_sectors_kb = to_u32(v),
        },
    },
    OptDef {
        name: "max_segments",
        aliases: &[],
        default: "0",
        help: "Most data segments per request (0 = driver default).",
        kind: Kind::Int {
            min: 0,
            max: 65535,
            set: |j, v| j.max_segments = to_u32(v),
        },
    },
    OptDef {
        name: "nomerges",
        aliases: &[],
        default: "0",
        help: "Merging: 0 all, 1 only simple one-hit merges, 2 none.",
        kind: Kind::Int {
            min: 0,
            max: 2,
            set: |j, v| j.nomerges = to_u8(v),
        },
    },
    OptDef {
        name: "sq_sched_dispatch",
        aliases: &[],
        default: "1",
        help: "For a scheduler that is not MQ-aware, run only the submitter's hardware queue (the single-hctx dispatch patch); 0 runs them all.",
        kind: Kind::Bool {
            set: |j, v| j.sq_sched_dispatch = v,
        },
    },
    OptDef {
        name: "flush_via_sched",
        aliases: &[],
        default: "1",
        help: "PREFLUSH and FUA writes (a journal's commit records, NBD and vhost clients' FUA writes) go through the I/O scheduler, as since Linux 6.5; 0 sends them past it to the dispatch list, as before.",
        kind: Kind::Bool {
            set: |j, v| j.flush_via_sched = v,
        },
    },
    OptDef {
        name: "zone_write_plugging",
        aliases: &[],
        default: "1",
        help: "A zoned device's writes wait per zone in the block layer's zone write plugs, one at a time to the device, as since Linux 6.10; 0: no plugs, and mq-deadline locks a zone while a write to it is at the device (its zone write locking, as before 6.10).",
        kind: Kind::Bool {
            set: |j, v| j.zone_write_plugging = v,
        },
    },
    OptDef {
        name: "hctx_workers",
        aliases: &[],
        default: "0",
        help: "One completion worker thread per hardware queue reaps the driver and routes completions to submitters.",
        kind: Kind::Bool {
            set: |j, v| j.hctx_workers = v,
        },
    },
];
