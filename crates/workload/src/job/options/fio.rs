//! fio's own options, as fio 3.33's HOWTO names them, with their syntax, defaults and setters.

use super::*;

/// fio's own options, as fio 3.33's HOWTO names them, with their syntax, defaults and setters.
pub(super) static FIO: &[OptDef] = &[
    OptDef {
        name: "name",
        aliases: &[],
        default: "",
        help: "Job name; a job file's section name sets it too.",
        kind: Kind::Str {
            set: |j, v| j.name = v.to_string(),
        },
    },
    OptDef {
        name: "description",
        aliases: &[],
        default: "",
        help: "Free-form description printed with the job's results.",
        kind: Kind::Str {
            set: |j, v| j.description = v.to_string(),
        },
    },
    OptDef {
        name: "rw",
        aliases: &["readwrite"],
        default: "read",
        help: "I/O pattern: sequential or random reads, writes, or a mix.",
        kind: Kind::Custom {
            syntax: "read|write|randread|randwrite|randrw|readwrite|rw|trim|randtrim|trimwrite|randtrimwrite[:N]",
            set: set_rw,
        },
    },
    OptDef {
        name: "rwmixread",
        aliases: &[],
        default: "50",
        help: "Percentage of a mixed workload that is reads.",
        kind: Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.rwmixread = to_u32(v),
        },
    },
    OptDef {
        name: "rwmixwrite",
        aliases: &[],
        default: "50",
        help: "Percentage of a mixed workload that is writes (sets rwmixread to 100 minus it).",
        kind: Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.rwmixread = to_u32(100u64.saturating_sub(v)),
        },
    },
    OptDef {
        name: "bs",
        aliases: &["blocksize"],
        default: "4096",
        help: "Block size; 'r,w,t' gives one per direction, an empty slot keeps the default.",
        kind: Kind::Custom {
            syntax: "size[,size[,size]]",
            set: set_bs,
        },
    },
    OptDef {
        name: "bsrange",
        aliases: &["blocksize_range"],
        default: "",
        help: "Block sizes drawn from min-max (multiples of min, as fio); 'r,w,t' per direction.",
        kind: Kind::Custom {
            syntax: "min-max[,min-max[,min-max]]",
            set: set_bsrange,
        },
    },
    OptDef {
        name: "bssplit",
        aliases: &[],
        default: "",
        help: "Block sizes with their shares, e.g. 4k/10:64k/50:32k/40; ',' separates read,write,trim.",
        kind: Kind::Custom {
            syntax: "size/pct:size/pct...[,...]",
            set: set_bssplit,
        },
    },
    OptDef {
        name: "blockalign",
        aliases: &["ba"],
        default: "",
        help: "Random offsets are multiples of this (default: the job's block grid).",
        kind: Kind::Custom {
            syntax: "size[,size[,size]]",
            set: set_blockalign,
        },
    },
    OptDef {
        name: "random_distribution",
        aliases: &[],
        default: "random",
        help: "Where random I/O lands: random, zipf:THETA, pareto:H, normal:DEV, zoned:A/S:..., zoned_abs:A/SIZE:...",
        kind: Kind::Custom {
            syntax: "random|zipf:t|pareto:h|normal:dev|zoned:...|zoned_abs:...",
            set: set_random_distribution,
        },
    },
    OptDef {
        name: "rw_sequencer",
        aliases: &[],
        default: "sequential",
        help: "For rw=randread:N and the like, the N-1 I/Os after each random one: sequential (on from the one before) or identical (the same offset again).",
        kind: Kind::Enum {
            values: &["sequential", "identical"],
            set: |j, i| j.rw_identical = i == 1,
        },
    },
    OptDef {
        name: "percentage_random",
        aliases: &[],
        default: "100",
        help: "Share of a random job's I/Os at random offsets, the rest sequential; 'r,w,t' per direction.",
        kind: Kind::Custom {
            syntax: "pct[,pct[,pct]]",
            set: |j, t, o| {
                j.percentage_random = per_direction(t, 100, |v| {
                    v.parse::<u32>()
                        .ok()
                        .filter(|p| *p <= 100)
                        .ok_or_else(|| format!("'{v}' is not a percentage from 0 to 100"))
                })
                .map_err(|r| unsupported(o, t, r))?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "number_ios",
        aliases: &[],
        default: "0",
        help: "Stop after this many I/Os (0: no limit); never extends the job.",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.number_ios = v,
        },
    },
    OptDef {
        name: "io_size",
        aliases: &["io_limit"],
        default: "",
        help: "Bytes of I/O to do within the region of size (more than size loops over it), or N% of size.",
        kind: Kind::Custom {
            syntax: "size|N%",
            set: |j, t, o| {
                let (bytes, pct) = match in_zones(j, "io_size", t) {
                    true => (None, None),
                    false => size_or_percent(t, o)?,
                };
                j.io_size = bytes;
                j.io_size_pct = pct;
                Ok(())
            },
        },
    },
    OptDef {
        name: "loops",
        aliases: &[],
        default: "1",
        help: "Run the job this many times over.",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as u64,
            set: |j, v| j.loops = to_u32(v),
        },
    },
    OptDef {
        name: "startdelay",
        aliases: &[],
        default: "0",
        help: "Wait this long before starting (plain number = seconds); a range 1-5 draws per clone.",
        kind: Kind::Custom {
            syntax: "time[-time]",
            set: set_startdelay,
        },
    },
    OptDef {
        name: "thinktime",
        aliases: &[],
        default: "0",
        help: "After every thinktime_blocks I/Os, wait for them to complete, then this long (plain number = us).",
        kind: Kind::Time {
            unit_ns: 1_000,
            set: |j, v| j.thinktime_ns = v,
        },
    },
    OptDef {
        name: "thinktime_spin",
        aliases: &[],
        default: "0",
        help: "The part of thinktime spent spinning on the CPU (plain number = us).",
        kind: Kind::Time {
            unit_ns: 1_000,
            set: |j, v| j.thinktime_spin_ns = v,
        },
    },
    OptDef {
        name: "write_iolog",
        aliases: &[],
        default: "",
        help: "Log every I/O the job issues to this file, in fio's iolog version 3 format.",
        kind: Kind::Str {
            set: |j, v| j.write_iolog = opt_string(v),
        },
    },
    OptDef {
        name: "write_lat_log",
        aliases: &[],
        default: "",
        help: "Write PREFIX_lat/clat/slat.N.log: every I/O's latency in ns (or window means with log_avg_msec).",
        kind: Kind::Str {
            set: |j, v| j.logs.lat = opt_string(v),
        },
    },
    OptDef {
        name: "write_bw_log",
        aliases: &[],
        default: "",
        help: "Write PREFIX_bw.N.log: bandwidth in KiB/s.",
        kind: Kind::Str {
            set: |j, v| j.logs.bw = opt_string(v),
        },
    },
    OptDef {
        name: "write_iops_log",
        aliases: &[],
        default: "",
        help: "Write PREFIX_iops.N.log: I/Os per second.",
        kind: Kind::Str {
            set: |j, v| j.logs.iops = opt_string(v),
        },
    },
    OptDef {
        name: "log_offset",
        aliases: &[],
        default: "0",
        help: "Put each I/O's offset in the latency, bandwidth and IOPS logs (a column before the priority).",
        kind: Kind::Bool {
            set: |j, v| j.logs.offset = v,
        },
    },
    OptDef {
        name: "log_prio",
        aliases: &[],
        default: "0",
        help: "Log each I/O's priority value (0x4003 for be/3) instead of 1 for real-time, 0 otherwise.",
        kind: Kind::Bool {
            set: |j, v| j.logs.prio = v,
        },
    },
    OptDef {
        name: "write_hist_log",
        aliases: &[],
        default: "",
        help: "Write PREFIX_clat_hist.N.log: every log_hist_msec, each direction's completions per latency bin since its last line.",
        kind: Kind::Str {
            set: |j, v| j.logs.hist = opt_string(v),
        },
    },
    OptDef {
        name: "log_hist_msec",
        aliases: &[],
        default: "0",
        help: "How often the histogram log takes a line per direction, in ms (0: never).",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.logs.hist_msec = v,
        },
    },
    OptDef {
        name: "log_hist_coarseness",
        aliases: &[],
        default: "0",
        help: "Sum the histogram log's 1856 bins in groups of 2^N (0 to 6).",
        kind: Kind::Int {
            min: 0,
            max: 6,
            set: |j, v| j.logs.hist_coarseness = v as u32,
        },
    },
    OptDef {
        name: "per_job_logs",
        aliases: &[],
        default: "1",
        help: "Name log files with the job number (PREFIX_bw.N.log); 0: one file per prefix (PREFIX_bw.log) the clones append to.",
        kind: Kind::Bool {
            set: |j, v| j.logs.shared_files = !v,
        },
    },
    OptDef {
        name: "log_unix_epoch",
        aliases: &[],
        default: "0",
        help: "Log times in ms since the Unix epoch instead of since the job's start.",
        kind: Kind::Bool {
            set: |j, v| j.logs.unix_epoch = v,
        },
    },
    OptDef {
        name: "log_alternate_epoch",
        aliases: &[],
        default: "0",
        help: "Log times in ms since the epoch of log_alternate_epoch_clock_id's clock instead of since the job's start.",
        kind: Kind::Bool {
            set: |j, v| j.logs.alternate_epoch = v,
        },
    },
    OptDef {
        name: "log_alternate_epoch_clock_id",
        aliases: &[],
        default: "0",
        help: "The clock_gettime clock (0 CLOCK_REALTIME, 1 CLOCK_MONOTONIC, 7 CLOCK_BOOTTIME, ...) whose epoch log_unix_epoch and log_alternate_epoch count from.",
        kind: Kind::Int {
            min: 0,
            max: 11,
            set: |j, v| j.logs.epoch_clock = v as i32,
        },
    },
    OptDef {
        name: "log_max_value",
        aliases: &[],
        default: "0",
        help: "With log_avg_msec, log each window's largest latency instead of its mean.",
        kind: Kind::Bool {
            set: |j, v| j.logs.max_value = v,
        },
    },
    OptDef {
        name: "log_avg_msec",
        aliases: &[],
        default: "0",
        help: "Average log entries over windows of this many ms (0: a line per I/O).",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.logs.avg_ms = v,
        },
    },
    OptDef {
        name: "gtod_reduce",
        aliases: &[],
        default: "0",
        help: "Leave out slat, clat, lat and bandwidth measurements (all four disable_* options).",
        kind: Kind::Bool {
            set: |j, v| {
                j.disable_slat = v;
                j.disable_clat = v;
                j.disable_lat = v;
                j.disable_bw = v;
            },
        },
    },
    OptDef {
        name: "disable_slat",
        aliases: &[],
        default: "0",
        help: "Leave submission latency out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_slat = v,
        },
    },
    OptDef {
        name: "disable_clat",
        aliases: &[],
        default: "0",
        help: "Leave completion latency (and its percentiles) out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_clat = v,
        },
    },
    OptDef {
        name: "disable_lat",
        aliases: &[],
        default: "0",
        help: "Leave total latency out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_lat = v,
        },
    },
    OptDef {
        name: "disable_bw_measurement",
        aliases: &["disable_bw"],
        default: "0",
        help: "Leave the bandwidth and IOPS samples out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_bw = v,
        },
    },
    OptDef {
        name: "cpus_allowed_policy",
        aliases: &[],
        default: "split",
        help: "split: each clone on its own CPU of cpus_allowed; shared: every clone on any of them.",
        kind: Kind::Enum {
            values: &["split", "shared"],
            set: |j, i| j.cpus_allowed_shared = i == 1,
        },
    },
    OptDef {
        name: "sqthread_poll",
        aliases: &[],
        default: "0",
        help: "io_uring: a kernel thread polls each ring's submission queue (IORING_SETUP_SQPOLL).",
        kind: Kind::Bool {
            set: |j, v| j.sqthread_poll = v,
        },
    },
    OptDef {
        name: "sqthread_poll_cpu",
        aliases: &[],
        default: "",
        help: "io_uring with sqthread_poll: the CPU the polling kernel threads run on (IORING_SETUP_SQ_AFF).",
        kind: Kind::Int {
            min: 0,
            max: 4095,
            set: |j, v| j.sqthread_poll_cpu = Some(v as u32),
        },
    },
    OptDef {
        name: "registerfiles",
        aliases: &[],
        default: "0",
        help: "io_uring: the driver registers its files with each ring (IORING_REGISTER_FILES) and submits by index.",
        kind: Kind::Bool {
            set: |j, v| j.registerfiles = v,
        },
    },
    OptDef {
        name: "thinktime_blocks",
        aliases: &[],
        default: "1",
        help: "I/Os between think times: completed ones, or issued ones with thinktime_blocks_type=issue.",
        kind: Kind::Int {
            min: 1,
            max: u64::MAX,
            set: |j, v| {
                j.thinktime_blocks = v;
                j.thinktime_blocks_set = true;
            },
        },
    },
    OptDef {
        name: "thinktime_blocks_type",
        aliases: &[],
        default: "complete",
        help: "What thinktime_blocks counts: I/Os completed (fio's default) or issued.",
        kind: Kind::Enum {
            values: &["complete", "issue"],
            set: |j, v| j.thinktime_blocks_issue = v == 1,
        },
    },
    OptDef {
        name: "thinktime_iotime",
        aliases: &[],
        default: "0",
        help: "Think after this much I/O time instead (plain number = s); with thinktime_blocks set too, after whichever comes first.",
        kind: Kind::Time {
            unit_ns: SEC,
            set: |j, v| j.thinktime_iotime_ns = v,
        },
    },
    OptDef {
        name: "rate_ignore_thinktime",
        aliases: &[],
        default: "0",
        help: "Keep the rate's schedule through think times (the time thought counts as if issued at the rate) instead of catching up after them.",
        kind: Kind::Bool {
            set: |j, v| j.rate_ignore_thinktime = v,
        },
    },
    OptDef {
        name: "size",
        aliases: &[],
        default: "",
        help: "Bytes of I/O per job, or N% of the device; unset (or 0) means the device from offset to its end.",
        kind: Kind::Custom {
            syntax: "size|N%",
            set: |j, t, o| {
                let (bytes, pct) = match in_zones(j, "size", t) {
                    true => (None, None),
                    false => size_or_percent(t, o)?,
                };
                j.size = bytes.filter(|&v| v != 0);
                j.size_pct = pct;
                Ok(())
            },
        },
    },
    OptDef {
        name: "offset",
        aliases: &["fileoffset"],
        default: "0",
        help: "Byte offset where the job's I/O region starts, or N% of the device (aligned up to the block size).",
        kind: Kind::Custom {
            syntax: "size|N%",
            set: |j, t, o| {
                let (bytes, pct) = match in_zones(j, "offset", t) {
                    true => (None, None),
                    false => size_or_percent(t, o)?,
                };
                j.offset = bytes.unwrap_or(0);
                j.offset_pct = pct;
                Ok(())
            },
        },
    },
    OptDef {
        name: "offset_align",
        aliases: &[],
        default: "0",
        help: "Align a percentage offset= up to this many bytes (0: the smallest block size).",
        kind: Kind::Size {
            set: |j, v| j.offset_align = v,
        },
    },
    OptDef {
        name: "iodepth",
        aliases: &[],
        default: "1",
        help: "Number of I/Os kept in flight per job.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.iodepth = to_u32(v),
        },
    },
    OptDef {
        name: "iodepth_batch_submit",
        aliases: &["iodepth_batch"],
        default: "1",
        help: "Number of I/Os submitted at once.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.iodepth_batch_submit = to_u32(v),
        },
    },
    OptDef {
        name: "bwavgtime",
        aliases: &[],
        default: "500",
        help: "The window of each bandwidth sample (bw_min/max/mean in the report), ms.",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as u64,
            set: |j, v| j.bw_avg_ms = v,
        },
    },
    OptDef {
        name: "iopsavgtime",
        aliases: &[],
        default: "500",
        help: "The window of each IOPS sample (iops_min/max/mean in the report), ms.",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as u64,
            set: |j, v| j.iops_avg_ms = v,
        },
    },
    OptDef {
        name: "iodepth_low",
        aliases: &[],
        default: "0",
        help: "Once the queue is full, reap it down to this depth before filling it again (0: iodepth, fio's default).",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.iodepth_low = to_u32(v),
        },
    },
    OptDef {
        name: "iodepth_batch_complete_min",
        aliases: &["iodepth_batch_complete"],
        default: "1",
        help: "Minimum completions to wait for when reaping (0 = never wait).",
        kind: Kind::Int {
            min: 0,
            max: 65536,
            set: |j, v| j.iodepth_batch_complete_min = to_u32(v),
        },
    },
    OptDef {
        name: "iodepth_batch_complete_max",
        aliases: &[],
        default: "iodepth_batch_complete_min",
        help: "Maximum completions reaped at once (defaults to iodepth_batch_complete_min, as in fio).",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.iodepth_batch_complete_max = to_u32(v),
        },
    },
    OptDef {
        name: "numjobs",
        aliases: &[],
        default: "1",
        help: "Number of identical clones of this job, each a thread.",
        kind: Kind::Int {
            min: 1,
            max: 4096,
            set: |j, v| j.numjobs = to_u32(v),
        },
    },
    OptDef {
        name: "runtime",
        aliases: &["timeout"],
        default: "0",
        help: "Stop the job after this long (plain number = seconds; 0 = no limit).",
        kind: Kind::Time {
            unit_ns: SEC,
            set: |j, v| j.runtime_ns = v,
        },
    },
    OptDef {
        name: "time_based",
        aliases: &[],
        default: "0",
        help: "Loop over the region until runtime expires instead of stopping after size.",
        kind: Kind::Bool {
            set: |j, v| j.time_based = v,
        },
    },
    OptDef {
        name: "ramp_time",
        aliases: &[],
        default: "0",
        help: "Run this long before statistics start (plain number = seconds).",
        kind: Kind::Time {
            unit_ns: SEC,
            set: |j, v| j.ramp_time_ns = v,
        },
    },
    OptDef {
        name: "ioscheduler",
        aliases: &[],
        default: "",
        help: "I/O scheduler for the device queue (none, mq-deadline, kyber, ...).",
        kind: Kind::Str {
            set: |j, v| j.ioscheduler = opt_string(v),
        },
    },
    OptDef {
        name: "prioclass",
        aliases: &[],
        default: "",
        help: "I/O priority class: 1 realtime, 2 best-effort, 3 idle.",
        kind: Kind::Int {
            min: 1,
            max: 3,
            set: |j, v| j.prioclass = Some(to_u8(v)),
        },
    },
    OptDef {
        name: "prio",
        aliases: &[],
        default: "",
        help: "I/O priority level within the class, 0 (highest) to 7.",
        kind: Kind::Int {
            min: 0,
            max: 7,
            set: |j, v| j.prio = Some(to_u8(v)),
        },
    },
    OptDef {
        name: "cmdprio_percentage",
        aliases: &[],
        default: "",
        help: "Percent of reads and writes ('r,w' for each) issued at the priority of cmdprio_class/cmdprio instead of the job's (fio's io_uring/libaio option; default 0).",
        kind: Kind::Custom {
            syntax: "int[,int] (0-100)",
            set: |j, t, o| {
                j.cmdprio.percentage = Some(read_write_ints(o, t, 0, 100)?);
                Ok(())
            },
        },
    },
    OptDef {
        name: "cmdprio_class",
        aliases: &[],
        default: "",
        help: "Priority class of the I/Os cmdprio_percentage/cmdprio_bssplit pick: 1 realtime (the default), 2 best-effort, 3 idle ('r,w' for each).",
        kind: Kind::Custom {
            syntax: "int[,int] (1-3)",
            set: |j, t, o| {
                j.cmdprio.class = Some(read_write_ints(o, t, 1, 3)?.map(|v| v as u8));
                Ok(())
            },
        },
    },
    OptDef {
        name: "cmdprio",
        aliases: &[],
        default: "",
        help: "Priority level (0, the default and highest, to 7) of the I/Os cmdprio_percentage/cmdprio_bssplit pick ('r,w' for each).",
        kind: Kind::Custom {
            syntax: "int[,int] (0-7)",
            set: |j, t, o| {
                j.cmdprio.level = Some(read_write_ints(o, t, 0, 7)?.map(|v| v as u8));
                Ok(())
            },
        },
    },
    OptDef {
        name: "cmdprio_bssplit",
        aliases: &[],
        default: "",
        help: "Percent of I/Os of each block size at another priority: bs/pct[/class/level]:...; ',' separates reads and writes.",
        kind: Kind::Custom {
            syntax: "bs/pct[/class/level]:...[,...]",
            set: set_cmdprio_bssplit,
        },
    },
    OptDef {
        name: "cgroup",
        aliases: &[],
        default: "",
        help: "Charge the job's I/O to this cgroup (a path: grp or grp/sub); BFQ shares between groups by weight.",
        kind: Kind::Str {
            set: |j, v| j.cgroup = (!v.trim().is_empty()).then(|| v.trim().to_string()),
        },
    },
    OptDef {
        name: "cgroup_weight",
        aliases: &[],
        default: "",
        help: "Weight of the job's cgroup for BFQ (io.bfq.weight), 1 to 1000; default 100.",
        kind: Kind::Int {
            min: 1,
            max: 1000,
            set: |j, v| j.cgroup_weight = Some(v as u32),
        },
    },
    OptDef {
        name: "rate_iops",
        aliases: &[],
        default: "0",
        help: "Cap each direction at this many IOPS; 'r,w,t' per direction (0 or empty = unlimited).",
        kind: Kind::Custom {
            syntax: "int[,int[,int]]",
            set: |j, t, o| {
                j.rate_iops = rates(o, t, "an integer")?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "rate_min",
        aliases: &["ratemin"],
        default: "0",
        help: "End the job with an error when a direction's bandwidth over a rate_cycle falls below this, bytes/s; 'r,w,t' per direction.",
        kind: Kind::Custom {
            syntax: "size[,size[,size]]",
            set: |j, t, o| {
                j.rate_min = rates(o, t, "a size")?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "rate_iops_min",
        aliases: &[],
        default: "0",
        help: "End the job with an error when a direction's IOPS over a rate_cycle fall below this; 'r,w,t' per direction.",
        kind: Kind::Custom {
            syntax: "int[,int[,int]]",
            set: |j, t, o| {
                j.rate_iops_min = rates(o, t, "an integer")?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "rate_process",
        aliases: &[],
        default: "linear",
        help: "How a rate-limited job spaces its I/Os: linear (evenly) or poisson (exponential gaps, fio's own random stream).",
        kind: Kind::Enum {
            values: &["linear", "poisson"],
            set: |j, i| j.rate_poisson = i == 1,
        },
    },
    OptDef {
        name: "io_submit_mode",
        aliases: &[],
        default: "inline",
        help: "inline: a job ahead of its rate first waits for what it has in flight; offload: it issues at the rate's times whatever is in flight.",
        kind: Kind::Enum {
            values: &["inline", "offload"],
            set: |j, i| j.submit_offload = i == 1,
        },
    },
    OptDef {
        name: "rate_cycle",
        aliases: &["ratecycle"],
        default: "1000",
        help: "The window in ms over which rate_min and rate_iops_min are judged.",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as u64,
            set: |j, v| j.rate_cycle_ms = v,
        },
    },
    OptDef {
        name: "rate",
        aliases: &[],
        default: "0",
        help: "Cap each direction's bandwidth in bytes/s; 'r,w,t' per direction (rate=1m,500k).",
        kind: Kind::Custom {
            syntax: "size[,size[,size]]",
            set: |j, t, o| {
                j.rate = rates(o, t, "a size")?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "offset_increment",
        aliases: &[],
        default: "0",
        help: "Each clone's region starts this much after the previous clone's (offset + increment * clone number).",
        kind: Kind::Size {
            set: |j, v| j.offset_increment = v,
        },
    },
    OptDef {
        name: "randrepeat",
        aliases: &[],
        default: "1",
        help: "Seed the random generators predictably so runs repeat.",
        kind: Kind::Bool {
            set: |j, v| j.randrepeat = v,
        },
    },
    OptDef {
        name: "randseed",
        aliases: &[],
        default: "",
        help: "Explicit seed for the random generators.",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.randseed = Some(v),
        },
    },
    OptDef {
        name: "random_generator",
        aliases: &[],
        default: "tausworthe",
        help: "The generator of random offsets, as fio's: tausworthe (32-bit), lfsr (every block once without a map) or tausworthe64.",
        kind: Kind::Enum {
            values: &["tausworthe", "lfsr", "tausworthe64"],
            set: |j, i| {
                use crate::pattern::frand::RandomGenerator as G;
                j.random_generator = [G::Tausworthe, G::Lfsr, G::Tausworthe64][i];
            },
        },
    },
    OptDef {
        name: "unified_rw_reporting",
        aliases: &[],
        default: "none",
        help: "Report reads, writes and trims apart (none, 0), as one direction called mixed (mixed, 1), or apart and then as mixed (both, 2).",
        kind: Kind::Enum {
            values: &["none", "mixed", "both", "0", "1", "2"],
            set: |j, i| {
                use crate::stats::Unified as U;
                j.unified = [U::None, U::Mixed, U::Both][i % 3];
            },
        },
    },
    OptDef {
        name: "allrandrepeat",
        aliases: &[],
        default: "0",
        help: "Seed every random stream of the job (sizes, mix, offsets with randrepeat, ...) from its thread number alone, as fio's allrandrepeat.",
        kind: Kind::Bool {
            set: |j, v| j.allrandrepeat = v,
        },
    },
    OptDef {
        name: "exec_prerun",
        aliases: &[],
        default: "",
        help: "A shell command run as the job starts, its output in NAME.prerun.txt; if it fails the job does no I/O (as fio's).",
        kind: Kind::Str {
            set: |j, v| j.exec_prerun = opt_string(v),
        },
    },
    OptDef {
        name: "exec_postrun",
        aliases: &[],
        default: "",
        help: "A shell command run after the job ends, its output in NAME.postrun.txt.",
        kind: Kind::Str {
            set: |j, v| j.exec_postrun = opt_string(v),
        },
    },
    OptDef {
        name: "kb_base",
        aliases: &[],
        default: "1024",
        help: "1024: the text report gives binary units (KiB, MiB/s) first and decimal ones in brackets; 1000: decimal first.",
        kind: Kind::Enum {
            values: &["1024", "1000"],
            set: |j, i| j.units.kb_base = [1024, 1000][i],
        },
    },
    OptDef {
        name: "unit_base",
        aliases: &[],
        default: "0",
        help: "Bandwidths in the text report in bytes (0 or 8) or in bits (1).",
        kind: Kind::Enum {
            values: &["0", "8", "1"],
            set: |j, i| j.units.bits = i == 2,
        },
    },
    OptDef {
        name: "significant_figures",
        aliases: &[],
        default: "4",
        help: "Significant figures of the text report's numbers (1 to 10).",
        kind: Kind::Int {
            min: 1,
            max: 10,
            set: |j, v| j.units.sig_figs = v as usize,
        },
    },
    OptDef {
        name: "experimental_verify",
        aliases: &[],
        default: "0",
        help: "The verify pass replays the job's I/O and reads back each write as written (its size, in its order), as fio's experimental verify; sizes may then be drawn (bsrange, bssplit).",
        kind: Kind::Bool {
            set: |j, v| j.experimental_verify = v,
        },
    },
    OptDef {
        name: "unlink_each_loop",
        aliases: &[],
        default: "0",
        help: "Before each loop after the first, empty the job's files (fio unlinks and creates them again), those the run made only.",
        kind: Kind::Bool {
            set: |j, v| j.unlink_each_loop = v,
        },
    },
    OptDef {
        name: "verify_only",
        aliases: &[],
        default: "0",
        help: "Issue none of the job's writes (they are generated, as fio's dry run), then verify what they would have written: a check of an earlier run's data.",
        kind: Kind::Bool {
            set: |j, v| j.verify_only = v,
        },
    },
    OptDef {
        name: "verify_state_save",
        aliases: &[],
        default: "1",
        help: "A writing job with verify leaves local-NAME-INDEX-verify.state in the current directory as it ends: how many writes it issued, the last iodepth that completed.",
        kind: Kind::Bool {
            set: |j, v| j.verify_state_save = v,
        },
    },
    OptDef {
        name: "verify_state_load",
        aliases: &[],
        default: "0",
        help: "Read that state as the job starts (the job fails without it), and end the verify pass where the saved writes ended.",
        kind: Kind::Bool {
            set: |j, v| j.verify_state_load = v,
        },
    },
    OptDef {
        name: "stats",
        aliases: &[],
        default: "1",
        help: "0: leave the job out of the report, its group's summary included (its I/O still runs).",
        kind: Kind::Bool {
            set: |j, v| j.stats = v,
        },
    },
    OptDef {
        name: "bs_is_seq_rand",
        aliases: &[],
        default: "0",
        help: "Take bs=R,W as the sizes of sequential and of random I/Os instead of reads and writes.",
        kind: Kind::Bool {
            set: |j, v| j.bs_is_seq_rand = v,
        },
    },
    OptDef {
        name: "norandommap",
        aliases: &[],
        default: "0",
        help: "Pick random offsets without tracking coverage (blocks may repeat).",
        kind: Kind::Bool {
            set: |j, v| j.norandommap = v,
        },
    },
    OptDef {
        name: "verify",
        aliases: &[],
        default: "0",
        help: "Verify written data with a header and checksum per block (0/null = off; meta: the header alone).",
        kind: Kind::Enum {
            values: &[
                "crc32c", "crc32c-intel", "crc32", "crc64", "crc16", "crc7", "md5", "sha1",
                "sha256", "sha512", "xxhash", "meta", "0", "null", "pattern",
            ],
            set: |j, i| {
                j.verify = match i {
                    0 | 1 => VerifyMode::Crc32c,
                    2 => VerifyMode::Crc32,
                    3 => VerifyMode::Crc64,
                    4 => VerifyMode::Crc16,
                    5 => VerifyMode::Crc7,
                    6 => VerifyMode::Md5,
                    7 => VerifyMode::Sha1,
                    8 => VerifyMode::Sha256,
                    9 => VerifyMode::Sha512,
                    10 => VerifyMode::Xxhash,
                    11 => VerifyMode::Meta,
                    14 => VerifyMode::Pattern,
                    _ => VerifyMode::None,
                }
            },
        },
    },
    OptDef {
        name: "verify_pattern",
        aliases: &[],
        default: "",
        help: "The bytes verified blocks repeat after their header (checked on read); without verify=, a header and this pattern; with verify=pattern, the pattern alone. 0x hex, decimal, \"text\", 'file', concatenated.",
        kind: Kind::Custom {
            syntax: "0xHEX|N|\"text\"|'file'...",
            set: |j, t, o| {
                j.verify_pattern = Some(parse_pattern(t).map_err(|r| unsupported(o, t, r))?);
                Ok(())
            },
        },
    },
    OptDef {
        name: "buffer_pattern",
        aliases: &[],
        default: "",
        help: "The bytes written buffers repeat (when not verifying). 0x hex, decimal, \"text\", 'file', concatenated.",
        kind: Kind::Custom {
            syntax: "0xHEX|N|\"text\"|'file'...",
            set: |j, t, o| {
                j.buffer_pattern = Some(parse_pattern(t).map_err(|r| unsupported(o, t, r))?);
                Ok(())
            },
        },
    },
    OptDef {
        name: "zero_buffers",
        aliases: &[],
        default: "",
        help: "Written buffers carry zeroes (and are not scrambled).",
        kind: Kind::Bool {
            set: |j, v| j.buffers.zero_buffers = Some(v),
        },
    },
    OptDef {
        name: "refill_buffers",
        aliases: &[],
        default: "",
        help: "Fill every write's buffer with new data (on by default with buffer_compress_percentage or verify, unless given).",
        kind: Kind::Bool {
            set: |j, v| j.buffers.refill_buffers = Some(v),
        },
    },
    OptDef {
        name: "scramble_buffers",
        aliases: &[],
        default: "1",
        help: "Mark each 512-byte block of a write with its offset and time, so no two writes carry the same blocks (unless refilled, compressed or verified).",
        kind: Kind::Bool {
            set: |j, v| j.buffers.scramble_buffers = v,
        },
    },
    OptDef {
        name: "buffer_compress_percentage",
        aliases: &[],
        default: "0",
        help: "The share of each buffer_compress_chunk that is zeroes (or buffer_pattern), the rest random: data that compresses by that much.",
        kind: Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.buffers.compress_percentage = v as u32,
        },
    },
    OptDef {
        name: "buffer_compress_chunk",
        aliases: &[],
        default: "512",
        help: "The size of the chunks buffer_compress_percentage applies to.",
        kind: Kind::Size {
            set: |j, v| j.buffers.compress_chunk = v.min(u64::from(u32::MAX)) as u32,
        },
    },
    OptDef {
        name: "dedupe_percentage",
        aliases: &[],
        default: "0",
        help: "The share of written buffers that repeat earlier data (dedupe_mode says which).",
        kind: Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.buffers.dedupe_percentage = v as u32,
        },
    },
    OptDef {
        name: "dedupe_mode",
        aliases: &[],
        default: "repeat",
        help: "Where a repeating buffer's data comes from: repeat (the stream after the last new buffer), working_set (one of dedupe_working_set_percentage of the job's size in pages, drawn at random).",
        kind: Kind::Enum {
            values: &["repeat", "working_set"],
            set: |j, i| {
                j.buffers.dedupe_mode =
                    [crate::buffers::DedupeMode::Repeat, crate::buffers::DedupeMode::WorkingSet][i];
            },
        },
    },
    OptDef {
        name: "dedupe_working_set_percentage",
        aliases: &[],
        default: "5",
        help: "The working set of dedupe_mode=working_set, as a share of the job's size.",
        kind: Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.buffers.dedupe_working_set_percentage = v as u32,
        },
    },
    OptDef {
        name: "dedupe_global",
        aliases: &[],
        default: "0",
        help: "The dedupe working set is the run's, spread over every job that sets this, so jobs repeat each other's data.",
        kind: Kind::Bool {
            set: |j, v| j.buffers.dedupe_global = v,
        },
    },
    OptDef {
        name: "do_verify",
        aliases: &[],
        default: "1",
        help: "Run the verify phase after the write phase when verify is set.",
        kind: Kind::Bool {
            set: |j, v| j.do_verify = v,
        },
    },
    OptDef {
        name: "verify_interval",
        aliases: &[],
        default: "0",
        help: "Write a verify header every this many bytes of a block, each covering its piece (0: one per block); must divide the block size.",
        kind: Kind::Size {
            set: |j, v| j.verify_interval = v,
        },
    },
    OptDef {
        name: "verify_offset",
        aliases: &[],
        default: "0",
        help: "Put each verify header this many bytes into its piece, swapped with the data there (past the whole header, with room for it after: a value too small or too large is refused with the header's size).",
        kind: Kind::Size {
            set: |j, v| j.verify_offset = v,
        },
    },
    OptDef {
        name: "verify_fatal",
        aliases: &[],
        default: "0",
        help: "Stop checking a block read back at its first bad piece (by default every piece is checked and each bad one reported).",
        kind: Kind::Bool {
            set: |j, v| j.verify_fatal = v,
        },
    },
    OptDef {
        name: "verify_dump",
        aliases: &[],
        default: "0",
        help: "On a checksum or pattern mismatch, write the piece as read and as written to FILE.OFFSET.received and FILE.OFFSET.expected in the current directory.",
        kind: Kind::Bool {
            set: |j, v| j.verify_dump = v,
        },
    },
    OptDef {
        name: "verify_backlog",
        aliases: &[],
        default: "0",
        help: "With verify: after this many writes, wait for them and read them back before writing on (0: only at the end).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.verify_backlog = v,
        },
    },
    OptDef {
        name: "verify_backlog_batch",
        aliases: &[],
        default: "0",
        help: "How many of the backlog's oldest blocks each read-back checks (0: all of them).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.verify_backlog_batch = v,
        },
    },
    OptDef {
        name: "fsync",
        aliases: &[],
        default: "0",
        help: "Issue a flush after every this many writes (0 = never).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fsync = v,
        },
    },
    OptDef {
        name: "fdatasync",
        aliases: &[],
        default: "0",
        help: "Issue a flush after every this many writes as fio's fdatasync does (0 = never); fsync= goes first where both fall on the same write.",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fdatasync = v,
        },
    },
    OptDef {
        name: "end_fsync",
        aliases: &[],
        default: "0",
        help: "Issue a flush when the job ends.",
        kind: Kind::Bool {
            set: |j, v| j.end_fsync = v,
        },
    },
    OptDef {
        name: "sync",
        aliases: &[],
        default: "none",
        help: "Open for synchronous writes, as fio does: none/0, sync/1 (O_SYNC) or dsync (O_DSYNC); either way every write carries FUA, as the kernel's block-device writes do.",
        kind: Kind::Enum {
            values: &["none", "0", "sync", "1", "dsync"],
            set: |j, i| j.sync_writes = i >= 2,
        },
    },
    OptDef {
        name: "group_reporting",
        aliases: &[],
        default: "0",
        help: "Report all jobs of a group as one.",
        kind: Kind::Bool {
            set: |j, v| j.group_reporting = v,
        },
    },
    OptDef {
        name: "stonewall",
        aliases: &["wait_for_previous"],
        default: "0",
        help: "Wait for earlier jobs to finish before starting; starts a new group.",
        kind: Kind::Bool {
            set: |j, v| j.stonewall = v,
        },
    },
    OptDef {
        name: "wait_for",
        aliases: &[],
        default: "",
        help: "Start once every clone of the named job (defined above this one) has finished.",
        kind: Kind::Str {
            set: |j, v| j.wait_for = opt_string(v),
        },
    },
    OptDef {
        name: "flow",
        aliases: &[],
        default: "0",
        help: "Weight in flow control: the jobs of one flow_id issue in proportion to their weights (0: not in a flow).",
        kind: Kind::Int {
            min: 0,
            max: 1000,
            set: |j, v| j.flow = v as u32,
        },
    },
    OptDef {
        name: "flow_id",
        aliases: &[],
        default: "0",
        help: "The flow group of a job with flow=.",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.flow_id = v as u32,
        },
    },
    OptDef {
        name: "flow_sleep",
        aliases: &[],
        default: "0",
        help: "How long a job held back by flow control waits before trying again (microseconds; 0: retry at once).",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.flow_sleep_ns = v,
        },
    },
    OptDef {
        name: "latency_target",
        aliases: &[],
        default: "0",
        help: "Find the deepest queue whose I/Os complete within this total latency (microseconds unless given a unit): from depth 1 up to iodepth, a window at each.",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.latency_target_ns = v,
        },
    },
    OptDef {
        name: "latency_window",
        aliases: &[],
        default: "0",
        help: "How long each depth of the latency_target search runs (microseconds unless given a unit).",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.latency_window_ns = v,
        },
    },
    OptDef {
        name: "latency_percentile",
        aliases: &[],
        default: "100",
        help: "The share of a window's I/Os that must meet latency_target.",
        kind: Kind::Percent {
            set: |j, v| j.latency_percentile = v,
        },
    },
    OptDef {
        name: "latency_run",
        aliases: &[],
        default: "0",
        help: "Keep adjusting the depth to latency_target instead of ending once it is found.",
        kind: Kind::Bool {
            set: |j, v| j.latency_run = v,
        },
    },
    OptDef {
        name: "max_latency",
        aliases: &[],
        default: "0",
        help: "End the job with an error at the first I/O whose total latency exceeds this (microseconds unless given a unit; 0: no limit).",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.max_latency_ns = v,
        },
    },
    OptDef {
        name: "steadystate",
        aliases: &["ss"],
        default: "iops_slope:0.01%",
        help: "With ss_dur: end the job (its group with group_reporting) once IOPS or bandwidth holds steady: iops|bw (largest deviation from the window's mean) or iops_slope|bw_slope (the slope of its line), then :LIMIT, a % of the mean or absolute.",
        kind: Kind::Custom {
            syntax: "iops|iops_slope|bw|bw_slope:LIMIT[%]",
            set: |j, text, option| {
                j.steadystate = crate::steadystate::Criterion::parse(text)
                    .map_err(|e| bad_named(option, text, &e))?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "steadystate_duration",
        aliases: &["ss_dur"],
        default: "0",
        help: "The rolling window of one-second samples steady state is judged over (seconds unless given a unit; 0: off).",
        kind: Kind::Time {
            unit_ns: SEC,
            set: |j, v| j.ss_dur_ns = v,
        },
    },
    OptDef {
        name: "steadystate_ramp_time",
        aliases: &["ss_ramp"],
        default: "0",
        help: "How long after the job's start steady-state samples begin (seconds unless given a unit; they begin a second later).",
        kind: Kind::Time {
            unit_ns: SEC,
            set: |j, v| j.ss_ramp_ns = v,
        },
    },
    OptDef {
        name: "unlink",
        aliases: &[],
        default: "0",
        help: "Remove the job's files when the run ends: only those the run made (a file that was there before stays).",
        kind: Kind::Bool {
            set: |j, v| j.unlink = v,
        },
    },
    OptDef {
        name: "exitall",
        aliases: &[],
        default: "0",
        help: "When a job ends, terminate others (exit_what says which); set in any section, it holds for every job, as fio's.",
        kind: Kind::Bool {
            set: |j, v| j.exitall = v,
        },
    },
    OptDef {
        name: "exit_what",
        aliases: &[],
        default: "group",
        help: "Which jobs a job's end terminates: group (its reporting group), stonewall (every running job; the next stonewall's still run), all.",
        kind: Kind::Enum {
            values: &["group", "stonewall", "all"],
            set: |j, i| {
                j.exit_what = [ExitWhat::Group, ExitWhat::Stonewall, ExitWhat::All][i];
            },
        },
    },
    OptDef {
        name: "continue_on_error",
        aliases: &[],
        default: "none",
        help: "Go on after these I/O errors (EIO and EILSEQ, or ignore_error's): none, read, write, io, verify, all (0 none, 1 all); any other error ends the job.",
        kind: Kind::Enum {
            values: &["none", "read", "write", "io", "verify", "all", "0", "1"],
            set: |j, i| j.errors.continue_on = [0, 1, 2, 3, 4, 7, 0, 7][i],
        },
    },
    OptDef {
        name: "ignore_error",
        aliases: &[],
        default: "",
        help: "Errors to go on after, per type: READ,WRITE,VERIFY lists of errnos (EIO or 5) joined by ':'; a list also sets continue_on_error for its type.",
        kind: Kind::Custom {
            syntax: "errors[,errors[,errors]]",
            set: |j, t, o| ignore_error(&mut j.errors, t).map_err(|r| unsupported(o, t, r)),
        },
    },
    OptDef {
        name: "error_dump",
        aliases: &[],
        default: "1",
        help: "Print every I/O error, not only the one that ends the job.",
        kind: Kind::Bool {
            set: |j, v| j.error_dump = v,
        },
    },
    OptDef {
        name: "exitall_on_error",
        aliases: &[],
        default: "0",
        help: "When this job ends in error, terminate others (exit_what says which).",
        kind: Kind::Bool {
            set: |j, v| j.exitall_on_error = v,
        },
    },
    OptDef {
        name: "new_group",
        aliases: &[],
        default: "0",
        help: "Start a new reporting group at this job.",
        kind: Kind::Bool {
            set: |j, v| j.new_group = v,
        },
    },
    OptDef {
        name: "cpus_allowed",
        aliases: &[],
        default: "",
        help: "CPUs the job's threads may run on, e.g. 0-3,6.",
        kind: Kind::Custom {
            syntax: "cpu list",
            set: set_cpus_allowed,
        },
    },
    OptDef {
        name: "create_fsync",
        aliases: &[],
        default: "1",
        help: "Sync a file laid out before the job's I/O (always done; 0 is refused).",
        kind: Kind::Custom {
            syntax: "bool",
            set: set_create_fsync,
        },
    },
    OptDef {
        name: "cpumask",
        aliases: &[],
        default: "",
        help: "CPUs the job's threads may run on as a bit mask (34 or 0x22: CPUs 1 and 5); the same as cpus_allowed=1,5.",
        kind: Kind::Custom {
            syntax: "bit mask",
            set: set_cpumask,
        },
    },
    OptDef {
        name: "filename",
        aliases: &[],
        default: "",
        help: "The file or block device the job reads and writes (through mqblk's block layer, the uring driver); without it jobs run on the null device.",
        kind: Kind::Str {
            set: |j, v| j.filename = opt_string(v),
        },
    },
    OptDef {
        name: "directory",
        aliases: &[],
        default: "",
        help: "Directory of the job's file: filename= inside it, or fio's NAME.0.0 without filename= (one file per run).",
        kind: Kind::Str {
            set: |j, v| j.directory = opt_string(v),
        },
    },
    OptDef {
        name: "nrfiles",
        aliases: &["nr_files"],
        default: "1",
        help: "Files per job clone (a file set), named by filename_format, laid out one after another on the device.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.nrfiles = v as u32,
        },
    },
    OptDef {
        name: "filesize",
        aliases: &[],
        default: "",
        help: "Size of each file of the set (a range lo-hi is drawn per file); size= then caps the job's I/O.",
        kind: Kind::Custom {
            syntax: "size[-size]",
            set: set_filesize,
        },
    },
    OptDef {
        name: "filename_format",
        aliases: &[],
        default: "$jobname.$jobnum.$filenum",
        help: "Names of a file set's files: $jobname, $jobnum (the clone) and $filenum are replaced.",
        kind: Kind::Str {
            set: |j, v| j.filename_format = v.to_string(),
        },
    },
    OptDef {
        name: "file_service_type",
        aliases: &[],
        default: "roundrobin",
        help: "Which file of a set the next I/O goes to: roundrobin, sequential (each file to its end) or random (:N keeps N I/Os on a file); zipf:THETA, pareto:H, normal:DEV (gauss) skew the choice.",
        kind: Kind::Custom {
            syntax: "roundrobin|sequential|random[:N]|zipf:T|pareto:H|normal:D",
            set: set_file_service,
        },
    },
    OptDef {
        name: "openfiles",
        aliases: &[],
        default: "",
        help: "Files of a set open at once (unset: all): I/O goes to the open ones, and a finished file makes room for the next.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.openfiles = v as u32,
        },
    },
    OptDef {
        name: "fallocate",
        aliases: &[],
        default: "native",
        help: "How a file the job only writes is made: native/posix/keep/1 allocate its blocks, none/0/truncate leave it sparse (a file a job reads is written out).",
        kind: Kind::Enum {
            values: &["none", "native", "posix", "keep", "truncate", "0", "1"],
            set: |j, i| {
                j.fallocate = match i {
                    0 | 5 => Fallocate::None,
                    4 => Fallocate::Truncate,
                    _ => Fallocate::Native,
                }
            },
        },
    },
    OptDef {
        name: "allow_mounted_write",
        aliases: &[],
        default: "0",
        help: "Let a job write to a block device that is mounted, or one of whose partitions is (fio checks the device itself only); by default such a run is refused.",
        kind: Kind::Bool {
            set: |j, v| j.allow_mounted_write = v,
        },
    },
    OptDef {
        name: "allow_file_create",
        aliases: &[],
        default: "1",
        help: "Make a job's files that do not exist; 0: a missing file is an error.",
        kind: Kind::Bool {
            set: |j, v| j.allow_file_create = v,
        },
    },
    OptDef {
        name: "nowait",
        aliases: &[],
        default: "0",
        help: "Reads and writes carry REQ_NOWAIT (fio's RWF_NOWAIT): where no tag is free, or the bio would need splitting, it fails with EAGAIN instead of waiting.",
        kind: Kind::Bool {
            set: |j, v| j.nowait = v,
        },
    },
    OptDef {
        name: "read_iolog",
        aliases: &[],
        default: "",
        help: "The job's I/O is this fio I/O log's (version 2 or 3), in its order and at its pace; its files are the job's.",
        kind: Kind::Str {
            set: |j, v| j.read_iolog = opt_string(v),
        },
    },
    OptDef {
        name: "read_iolog_chunked",
        aliases: &[],
        default: "0",
        help: "fio reads the log in chunks to save memory; mqblk reads it whole, the same I/O.",
        kind: Kind::Bool {
            set: |j, v| j.read_iolog_chunked = v,
        },
    },
    OptDef {
        name: "replay_no_stall",
        aliases: &[],
        default: "0",
        help: "Replay the log as fast as it goes, in its order, not at its pace.",
        kind: Kind::Bool {
            set: |j, v| j.replay_options.no_stall = v,
        },
    },
    OptDef {
        name: "replay_time_scale",
        aliases: &[],
        default: "100",
        help: "Replay at this percent of the log's pace (200: twice as fast).",
        kind: Kind::Int {
            min: 1,
            max: 1_000_000,
            set: |j, v| j.replay_options.time_scale = v,
        },
    },
    OptDef {
        name: "replay_redirect",
        aliases: &[],
        default: "",
        help: "Replay every line of the log onto this one file or device.",
        kind: Kind::Str {
            set: |j, v| j.replay_options.redirect = opt_string(v),
        },
    },
    OptDef {
        name: "replay_scale",
        aliases: &[],
        default: "0",
        help: "Divide the log's offsets by this.",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.replay_options.scale = v,
        },
    },
    OptDef {
        name: "replay_align",
        aliases: &[],
        default: "0",
        help: "Align the log's offsets down to this power of two.",
        kind: Kind::Size {
            set: |j, v| j.replay_options.align = v,
        },
    },
    OptDef {
        name: "serialize_overlap",
        aliases: &[],
        default: "0",
        help: "A read or write that overlaps one in flight (by offset, as fio compares them) waits until what is in flight has completed.",
        kind: Kind::Bool {
            set: |j, v| j.serialize_overlap = v,
        },
    },
    OptDef {
        name: "opendir",
        aliases: &[],
        default: "",
        help: "Every regular file below this directory (subdirectories too, in the order it lists them) is one of the job's files.",
        kind: Kind::Str {
            set: |j, v| j.opendir = opt_string(v),
        },
    },
    OptDef {
        name: "fsync_on_close",
        aliases: &[],
        default: "0",
        help: "A writing job syncs each file as it closes: mid-run once its pass is done (a plain fsync, not in write_iolog, as fio's), and at each loop's end as end_fsync does.",
        kind: Kind::Bool {
            set: |j, v| j.fsync_on_close = v,
        },
    },
    OptDef {
        name: "file_append",
        aliases: &[],
        default: "0",
        help: "Start a regular file's I/O at its end as the run finds it (offset= its size); the file grows by size=.",
        kind: Kind::Bool {
            set: |j, v| j.file_append = v,
        },
    },
    OptDef {
        name: "fill_device",
        aliases: &["fill_fs"],
        default: "0",
        help: "Write until the file system is full (ENOSPC ends the job, not as an error); without size=, the file's size is the room left for it, and it is made empty, not laid out.",
        kind: Kind::Bool {
            set: |j, v| j.fill_device = v,
        },
    },
    OptDef {
        name: "overwrite",
        aliases: &[],
        default: "0",
        help: "Lay out a file a job only writes with data first, as one it reads, so its writes overwrite written blocks.",
        kind: Kind::Bool {
            set: |j, v| j.overwrite = v,
        },
    },
    OptDef {
        name: "create_only",
        aliases: &[],
        default: "0",
        help: "Lay out the job's files and issue no I/O.",
        kind: Kind::Bool {
            set: |j, v| j.create_only = v,
        },
    },
    OptDef {
        name: "create_on_open",
        aliases: &[],
        default: "0",
        help: "fio creates each file when it opens it; mqblk makes every file before the run starts.",
        kind: Kind::Bool {
            set: |j, v| j.create_on_open = v,
        },
    },
    OptDef {
        name: "zonemode",
        aliases: &[],
        default: "none",
        help: "strided: zonesize bytes of I/O in each zone of zonerange bytes, then the next zone (zoneskip further on); zbd: a zoned device's zones (or zones of zonesize emulated on a conventional one), writes at their write pointers; none: no zones.",
        kind: Kind::Custom {
            syntax: "none|strided|zbd",
            set: |j, t, o| match t {
                "none" => {
                    (j.zonemode_strided, j.zonemode_zbd) = (false, false);
                    Ok(())
                }
                "strided" => {
                    (j.zonemode_strided, j.zonemode_zbd) = (true, false);
                    Ok(())
                }
                "zbd" => {
                    (j.zonemode_strided, j.zonemode_zbd) = (false, true);
                    Ok(())
                }
                _ => Err(unsupported(o, t, "not none, strided or zbd")),
            },
        },
    },
    OptDef {
        name: "zonecapacity",
        aliases: &[],
        default: "0",
        help: "zonemode=zbd on a conventional device: the writable bytes of each emulated zone (0: zonesize).",
        kind: Kind::Size {
            set: |j, v| j.zonecapacity = v,
        },
    },
    OptDef {
        name: "read_beyond_wp",
        aliases: &[],
        default: "0",
        help: "zonemode=zbd: reads may go past a zone's write pointer (else they are moved below it, to a zone holding data).",
        kind: Kind::Bool {
            set: |j, v| j.read_beyond_wp = v,
        },
    },
    OptDef {
        name: "max_open_zones",
        aliases: &[],
        default: "0",
        help: "zonemode=zbd: zones written at once by all jobs on the device (0: the device's limit, or none).",
        kind: Kind::Int {
            min: 0,
            max: crate::zbd::ZBD_MAX_OPEN_ZONES as u64,
            set: |j, v| j.max_open_zones = v as u32,
        },
    },
    OptDef {
        name: "job_max_open_zones",
        aliases: &[],
        default: "0",
        help: "zonemode=zbd: zones one job writes at once (0: no limit of its own; needs max_open_zones).",
        kind: Kind::Int {
            min: 0,
            max: crate::zbd::ZBD_MAX_OPEN_ZONES as u64,
            set: |j, v| j.job_max_open_zones = v as u32,
        },
    },
    OptDef {
        name: "ignore_zone_limits",
        aliases: &[],
        default: "0",
        help: "zonemode=zbd: max_open_zones alone limits open zones, whatever the device's limit.",
        kind: Kind::Bool {
            set: |j, v| j.ignore_zone_limits = v,
        },
    },
    OptDef {
        name: "zone_reset_threshold",
        aliases: &[],
        default: "0",
        help: "zonemode=zbd: with zone_reset_frequency, the share (0 to 1) of the region's bytes written before zones start being reset.",
        kind: Kind::Custom {
            syntax: "fraction 0-1",
            set: |j, t, o| {
                j.zone_reset_threshold = fraction(o, t)?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "zone_reset_frequency",
        aliases: &[],
        default: "0",
        help: "zonemode=zbd: past zone_reset_threshold, reset the written zone once every 1/N writes (0: never).",
        kind: Kind::Custom {
            syntax: "fraction 0-1",
            set: |j, t, o| {
                j.zone_reset_frequency = fraction(o, t)?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "zonerange",
        aliases: &[],
        default: "0",
        help: "zonemode=strided: the size of one zone.",
        kind: Kind::Size {
            set: |j, v| j.zonerange = v,
        },
    },
    OptDef {
        name: "zonesize",
        aliases: &[],
        default: "0",
        help: "zonemode=strided: bytes of I/O in a zone before the next (each visit starts at the zone's start, as fio's); zonemode=zbd: the zone size (the device's, if zoned); sizes written Nz count these.",
        kind: Kind::Size {
            set: |j, v| j.zonesize = v,
        },
    },
    OptDef {
        name: "zoneskip",
        aliases: &[],
        default: "0",
        help: "zonemode=strided or zbd (sequential jobs): bytes skipped after each zone, before the next.",
        kind: Kind::Size {
            set: |j, v| j.zoneskip = v,
        },
    },
    OptDef {
        name: "direct",
        aliases: &[],
        default: "0",
        help: "fio's O_DIRECT flag: the file is opened O_DIRECT, and writes are synchronous (REQ_SYNC) as the kernel's direct I/O writes are.",
        kind: Kind::Bool {
            set: |j, v| j.direct = v,
        },
    },
    OptDef {
        name: "atomic",
        aliases: &[],
        default: "0",
        help: "fio's O_ATOMIC, which implies O_DIRECT; Linux has no O_ATOMIC and ignores the flag, so it is direct=1.",
        kind: Kind::Bool {
            set: |j, v| {
                if v {
                    j.direct = true;
                }
            },
        },
    },
    OptDef {
        name: "buffered",
        aliases: &[],
        default: "1",
        help: "The inverse of direct.",
        kind: Kind::Bool {
            set: |j, v| j.direct = !v,
        },
    },
    OptDef {
        name: "ioengine",
        aliases: &[],
        default: "",
        help: "fio I/O engine: block I/O engines run through mqblk's block layer on filename= (sync ones, psync by default, with one I/O in flight); null is the null device.",
        kind: Kind::Custom {
            syntax: "libaio|io_uring|posixaio|psync|sync|pvsync|pvsync2|vsync|mmap|splice|null",
            set: set_ioengine,
        },
    },
    OptDef {
        name: "thread",
        aliases: &[],
        default: "0",
        help: "Accepted for fio compatibility; jobs always run as threads.",
        kind: Kind::Bool {
            set: |j, v| j.thread = v,
        },
    },
    OptDef {
        name: "percentile_list",
        aliases: &[],
        default: "1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9:99.95:99.99",
        help: "Latency percentiles to report, colon separated, at most 20.",
        kind: Kind::Custom {
            syntax: "p:p:...",
            set: set_percentile_list,
        },
    },
    OptDef {
        name: "clat_percentiles",
        aliases: &[],
        default: "1",
        help: "Report completion-latency percentiles.",
        kind: Kind::Bool {
            set: |j, v| j.clat_percentiles = v,
        },
    },
    OptDef {
        name: "lat_percentiles",
        aliases: &[],
        default: "0",
        help: "Report total-latency percentiles.",
        kind: Kind::Bool {
            set: |j, v| j.lat_percentiles = v,
        },
    },
    OptDef {
        name: "slat_percentiles",
        aliases: &[],
        default: "0",
        help: "Report submission-latency percentiles.",
        kind: Kind::Bool {
            set: |j, v| j.slat_percentiles = v,
        },
    },
    OptDef {
        name: "fixedbufs",
        aliases: &[],
        default: "0",
        help: "io_uring registered buffers: the driver registers a buffer pool and the job's I/O uses READ_FIXED/WRITE_FIXED (driver=uring).",
        kind: Kind::Bool {
            set: |j, v| j.fixedbufs = v,
        },
    },
    OptDef {
        name: "iomem",
        aliases: &["mem"],
        default: "malloc",
        help: "What the I/O buffers are made of: 4 KiB pages (malloc, shm, mmap, mmapshared; mqblk's heap) or huge pages (shmhuge, or mmaphuge:FILE on hugetlbfs, created and removed), which the kernel counts as fewer segments.",
        kind: Kind::Custom {
            syntax: "malloc|shm|shmhuge|mmap[:FILE]|mmaphuge[:FILE]|mmapshared[:FILE]",
            set: set_iomem,
        },
    },
    OptDef {
        name: "hugepage-size",
        aliases: &[],
        default: "2m",
        help: "The huge page size of iomem=shmhuge and mmaphuge (a size the kernel offers: 2m or 1g on x86).",
        kind: Kind::Custom {
            syntax: "a power-of-two size from 64k to 1g",
            set: set_hugepage_size,
        },
    },
    OptDef {
        name: "hipri",
        aliases: &[],
        default: "0",
        help: "Use polled queues and poll for completions.",
        kind: Kind::Bool {
            set: |j, v| j.hipri = v,
        },
    },
];
