//! fio options mqblk knows by name but does not implement, each with what to do instead,
//! and fio options about fio's own process that mean nothing for block I/O through mqblk.
//!
//! A job file written for fio that uses one of the first is refused with the hint (every
//! such line at once, see [`JobError::more`](super::JobError::more)), instead of the bare
//! "unknown option" an unrelated typo gets. An option leaves that list when it is
//! implemented in the option table. One of the second is accepted, any value, and the run
//! says once that it has no effect and why ([`no_effect_notes`](super::no_effect_notes)).

/// Reasons several refused options share.
const TRIM_VERIFY: &str =
    "trimming written blocks to verify them is not done; use rw=trimwrite or randtrim";
const MERGE: &str = "merging blktrace logs is not done; replay each with `mqblk replay`";
const UNALIGNED: &str =
    "a block layer moves whole 512-byte sectors, so sizes stay multiples of the smallest";

/// `(fio option name, why it is refused and what to write instead)`.
static NOT_IMPLEMENTED: &[(&str, &str)] = &[
    // Files.
    (
        "lockfile",
        "jobs sharing a file are not serialised by a lock; give each its own region (offset=)",
    ),
    // Timing and flow.
    (
        "profile",
        "fio's built-in profiles are not here; write the job out as options",
    ),
    // Patterns.
    ("bs_unaligned", UNALIGNED),
    ("blocksize_unaligned", UNALIGNED),
    // Data and verification.
    ("trim_percentage", TRIM_VERIFY),
    ("trim_verify_zero", TRIM_VERIFY),
    ("trim_backlog", TRIM_VERIFY),
    ("trim_backlog_batch", TRIM_VERIFY),
    // Logs and reporting.
    ("merge_blktrace_file", MERGE),
    ("merge_blktrace_iters", MERGE),
    ("merge_blktrace_scalars", MERGE),
    (
        "block_error_percentiles",
        "trim error histograms are not kept",
    ),
    // Engine- and OS-specific.
    (
        "hipri_percentage",
        "pvsync2's share of RWF_HIPRI I/Os is not drawn; hipri=1 polls them all",
    ),
];

/// `(fio option name, why it changes nothing in mqblk)`: fio's process, memory and clock
/// settings, which decide how fio itself runs, not what I/O reaches the block layer.
static NO_EFFECT: &[(&str, &str)] = &[
    (
        "replay_skip",
        "fio skips I/O types of a blktrace capture it replays; a fio I/O log is replayed whole (a capture is `mqblk replay`'s)",
    ),
    (
        "nice",
        "process CPU priority is not applied (I/O priority is prioclass=/prio=)",
    ),
    (
        "numa_cpu_nodes",
        "jobs are not bound to NUMA nodes (cpus_allowed= pins them to CPUs)",
    ),
    ("numa_mem_policy", "buffers are not placed by NUMA policy"),
    (
        "log_compression",
        "logs are kept uncompressed in memory; the files are the same",
    ),
    (
        "log_store_compressed",
        "logs are written uncompressed, PREFIX_*.log rather than .log.fz",
    ),
    (
        "gtod_cpu",
        "there is no time-keeping thread; each job reads the clock",
    ),
    (
        "clocksource",
        "mqblk reads the monotonic clock (clock_gettime)",
    ),
    (
        "threads",
        "an option of fio's tiobench profile, which a job file does not use (nor does fio)",
    ),
    (
        "invalidate",
        "there is no page cache to drop: I/O goes through mqblk's block layer",
    ),
    (
        "pre_read",
        "there is no page cache to fill: reads reach the device either way",
    ),
    ("lockmem", "memory is not locked"),
    (
        "verify_async",
        "blocks read back are checked in the job's own thread, as they complete",
    ),
    (
        "create_serialize",
        "how fio orders laying out the jobs' files, which changes no I/O they issue",
    ),
    ("iomem_align", "I/O buffers are page aligned"),
    ("mem_align", "I/O buffers are page aligned"),
    (
        "percentage_sequential",
        "deprecated in fio 3.33, which ignores it too (percentage_random= sets the mix)",
    ),
    ("rwmixcycle", "deprecated in fio 3.33, which ignores it too"),
    (
        "softrandommap",
        "the random map is always made (fio's fallback when it cannot allocate one)",
    ),
    ("uid", "jobs run as the user who runs mqblk"),
    ("gid", "jobs run in the group of the user who runs mqblk"),
    ("gpu_dev_id", "I/O buffers are host memory"),
    (
        "log_compression_cpus",
        "logs are written uncompressed, by the job's own thread",
    ),
    (
        "disk_util",
        "the kernel's disk statistics are not part of mqblk's report (its queues' are, with -v)",
    ),
    (
        "cgroup_nodelete",
        "a job's cgroup is mqblk's model of one; nothing is made on the host to delete",
    ),
    ("verifysort", "deprecated in fio 3.33, which ignores it too"),
    ("verifysort_nr", "deprecated in fio 3.33, which ignores it too"),
    ("flow_watermark", "deprecated in fio 3.33, which ignores it too"),
    (
        "write_barrier",
        "fio 3.33 marks every Nth write for it, but none of its engines reads the mark",
    ),
    (
        "unique_filename",
        "it names the files of fio's network client/server mode, which mqblk has not",
    ),
    (
        "verify_async_cpus",
        "blocks read back are checked in the job's own thread (see verify_async)",
    ),
    (
        "log_entries",
        "logs grow as they need (it sizes fio's first allocation)",
    ),
    (
        "userspace_reap",
        "libaio's reaping of its ring from user space; mqblk reaps its own completion queues",
    ),
    (
        "nonvectored",
        "io_uring's choice of the vectored or the plain read/write opcode, which makes the same bio",
    ),
    (
        "force_async",
        "io_uring's IOSQE_ASYNC hands a submission to a kernel worker; mqblk submits through its own queues",
    ),
    (
        "cmd_type",
        "a command type of fio's sg engine; mqblk issues block requests",
    ),
    (
        "fadvise_hint",
        "the hint is for the page cache's readahead and caching, and mqblk's I/O goes past it",
    ),
    (
        "sync_file_range",
        "it writes back dirty page-cache pages without a cache flush, and mqblk's writes leave none",
    ),
    (
        "uncached",
        "RWF_UNCACHED drops buffered I/O's pages after it, and mqblk's I/O goes past the page cache",
    ),
    (
        "write_hint",
        "mqblk's bios carry no write-lifetime hint (the kernel passes one only to devices with streams)",
    ),
];

/// fio 3.33's options by name and alias: those of `options.c` and of the block-I/O engines
/// mqblk runs (io_uring, libaio, the sync family), as the fio option table in the docs
/// lists them ([`fio_option_table`]).
static FIO_OPTIONS: &[&str] = &[
    "allow_file_create",
    "allow_mounted_write",
    "allrandrepeat",
    "atomic",
    "ba",
    "block_error_percentiles",
    "blockalign",
    "blocksize",
    "blocksize_range",
    "blocksize_unaligned",
    "bs",
    "bs_is_seq_rand",
    "bs_unaligned",
    "bsrange",
    "bssplit",
    "buffer_compress_chunk",
    "buffer_compress_percentage",
    "buffer_pattern",
    "buffered",
    "bwavgtime",
    "cgroup",
    "cgroup_nodelete",
    "cgroup_weight",
    "clat_percentiles",
    "clocksource",
    "cmd_type",
    "cmdprio",
    "cmdprio_bssplit",
    "cmdprio_class",
    "cmdprio_percentage",
    "continue_on_error",
    "cpumask",
    "cpus_allowed",
    "cpus_allowed_policy",
    "create_fsync",
    "create_on_open",
    "create_only",
    "create_serialize",
    "dedupe_global",
    "dedupe_mode",
    "dedupe_percentage",
    "dedupe_working_set_percentage",
    "description",
    "direct",
    "directory",
    "disable_bw",
    "disable_bw_measurement",
    "disable_clat",
    "disable_lat",
    "disable_slat",
    "disk_util",
    "do_verify",
    "end_fsync",
    "error_dump",
    "exec_postrun",
    "exec_prerun",
    "exit_what",
    "exitall",
    "exitall_on_error",
    "experimental_verify",
    "fadvise_hint",
    "fallocate",
    "fdatasync",
    "file_append",
    "file_service_type",
    "filename",
    "filename_format",
    "fileoffset",
    "filesize",
    "fill_device",
    "fill_fs",
    "fixedbufs",
    "flow",
    "flow_id",
    "flow_sleep",
    "flow_watermark",
    "force_async",
    "fsync",
    "fsync_on_close",
    "gid",
    "gpu_dev_id",
    "group_reporting",
    "gtod_cpu",
    "gtod_reduce",
    "hipri",
    "hipri_percentage",
    "hugepage-size",
    "ignore_error",
    "ignore_zone_limits",
    "invalidate",
    "io_limit",
    "io_size",
    "io_submit_mode",
    "iodepth",
    "iodepth_batch",
    "iodepth_batch_complete",
    "iodepth_batch_complete_max",
    "iodepth_batch_complete_min",
    "iodepth_batch_submit",
    "iodepth_low",
    "ioengine",
    "iomem",
    "iomem_align",
    "iopsavgtime",
    "ioscheduler",
    "job_max_open_zones",
    "kb_base",
    "lat_percentiles",
    "latency_percentile",
    "latency_run",
    "latency_target",
    "latency_window",
    "lockfile",
    "lockmem",
    "log_alternate_epoch",
    "log_alternate_epoch_clock_id",
    "log_avg_msec",
    "log_compression",
    "log_compression_cpus",
    "log_entries",
    "log_hist_coarseness",
    "log_hist_msec",
    "log_max_value",
    "log_offset",
    "log_prio",
    "log_store_compressed",
    "log_unix_epoch",
    "loops",
    "max_latency",
    "max_open_zones",
    "mem",
    "mem_align",
    "merge_blktrace_file",
    "merge_blktrace_iters",
    "merge_blktrace_scalars",
    "name",
    "new_group",
    "nice",
    "nonvectored",
    "norandommap",
    "nowait",
    "nr_files",
    "nrfiles",
    "numa_cpu_nodes",
    "numa_mem_policy",
    "number_ios",
    "numjobs",
    "offset",
    "offset_align",
    "offset_increment",
    "opendir",
    "openfiles",
    "overwrite",
    "per_job_logs",
    "percentage_random",
    "percentage_sequential",
    "percentile_list",
    "pre_read",
    "prio",
    "prioclass",
    "profile",
    "ramp_time",
    "random_distribution",
    "random_generator",
    "randrepeat",
    "randseed",
    "rate",
    "rate_cycle",
    "rate_ignore_thinktime",
    "rate_iops",
    "rate_iops_min",
    "rate_min",
    "rate_process",
    "ratecycle",
    "ratemin",
    "read_beyond_wp",
    "read_iolog",
    "read_iolog_chunked",
    "readwrite",
    "refill_buffers",
    "registerfiles",
    "replay_align",
    "replay_no_stall",
    "replay_redirect",
    "replay_scale",
    "replay_skip",
    "replay_time_scale",
    "runtime",
    "rw",
    "rw_sequencer",
    "rwmixcycle",
    "rwmixread",
    "rwmixwrite",
    "scramble_buffers",
    "serialize_overlap",
    "significant_figures",
    "size",
    "slat_percentiles",
    "softrandommap",
    "sqthread_poll",
    "sqthread_poll_cpu",
    "ss",
    "ss_dur",
    "ss_ramp",
    "startdelay",
    "stats",
    "steadystate",
    "steadystate_duration",
    "steadystate_ramp_time",
    "stonewall",
    "sync",
    "sync_file_range",
    "thinktime",
    "thinktime_blocks",
    "thinktime_blocks_type",
    "thinktime_iotime",
    "thinktime_spin",
    "thread",
    "time_based",
    "timeout",
    "trim_backlog",
    "trim_backlog_batch",
    "trim_percentage",
    "trim_verify_zero",
    "uid",
    "uncached",
    "unified_rw_reporting",
    "unique_filename",
    "unit_base",
    "unlink",
    "unlink_each_loop",
    "userspace_reap",
    "verify",
    "verify_async",
    "verify_async_cpus",
    "verify_backlog",
    "verify_backlog_batch",
    "verify_dump",
    "verify_fatal",
    "verify_interval",
    "verify_offset",
    "verify_only",
    "verify_pattern",
    "verify_state_load",
    "verify_state_save",
    "verifysort",
    "verifysort_nr",
    "wait_for",
    "wait_for_previous",
    "write_barrier",
    "write_bw_log",
    "write_hint",
    "write_hist_log",
    "write_iolog",
    "write_iops_log",
    "write_lat_log",
    "zero_buffers",
    "zone_reset_frequency",
    "zone_reset_threshold",
    "zonecapacity",
    "zonemode",
    "zonerange",
    "zonesize",
    "zoneskip",
];

/// What mqblk does with each of fio 3.33's options, as a Markdown table (`mqblk bench
/// --fio-options`, docs/fio-options.md): implemented, accepted without effect (and why),
/// or refused (and what to write instead).
pub fn fio_option_table() -> String {
    let mut rows = Vec::new();
    let (mut done, mut none, mut refused) = (0, 0, 0);
    for &name in FIO_OPTIONS {
        let what = if super::options::find(name).is_some() {
            done += 1;
            "implemented".to_string()
        } else if let Some((_, why)) = no_effect(name) {
            none += 1;
            format!("accepted, no effect: {why}")
        } else if let Some(h) = hint(name) {
            refused += 1;
            format!("refused: {h}")
        } else {
            refused += 1;
            "refused: unknown option".to_string()
        };
        rows.push(format!("| `{name}` | {what} |"));
    }
    format!(
        "# fio 3.33's options in mqblk\n\n\
         Each option of fio 3.33 (the names and aliases of its `options.c`, and the options of \
         the io_uring, libaio and sync engines), and what `mqblk bench` and `mqblk sim` do \
         with it: {done} implemented, {none} accepted without effect (the run says so once), \
         {refused} refused with a line naming the file and line. Made by `mqblk bench \
         --fio-options`; `mqblk bench --help` gives each implemented option's syntax and \
         default.\n\n| option | in mqblk |\n|---|---|\n{}\n",
        rows.join("\n")
    )
}

/// Why fio option `key` (any case) is accepted without effect, if it is.
pub(crate) fn no_effect(key: &str) -> Option<(&'static str, &'static str)> {
    NO_EFFECT
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
        .copied()
}

/// The hint for a fio option mqblk does not implement, if `key` is one (any case).
pub(crate) fn hint(key: &str) -> Option<&'static str> {
    NOT_IMPLEMENTED
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
        .map(|(_, hint)| *hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_listed_option_is_also_implemented() {
        for (name, _) in NOT_IMPLEMENTED.iter().chain(NO_EFFECT) {
            assert!(
                super::super::options::find(name).is_none(),
                "{name} is in the option table and in the not-implemented list"
            );
        }
    }
}
