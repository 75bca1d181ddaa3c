//! fio options mqblk knows by name but does not implement, each with what to do instead,
//! and fio options about fio's own process that mean nothing for block I/O through mqblk.
//!
//! A job file written for fio that uses one of the first is refused with the hint (every
//! such line at once, see [`JobError::more`](super::JobError::more)), instead of the bare
//! "unknown option" an unrelated typo gets. An option leaves that list when it is
//! implemented in the option table. One of the second is accepted, any value, and the run
//! says once that it has no effect and why ([`no_effect_notes`](super::no_effect_notes)).

/// `(fio option name, why it is refused and what to write instead)`.
static NOT_IMPLEMENTED: &[(&str, &str)] = &[
    // Files.
    // Timing and flow.
    // Patterns.
    (
        "rw_sequencer",
        "rw=randread:N always takes the next offset sequentially (fio's default)",
    ),
    // Data and verification.
    // Logs and reporting.
    (
        "write_hist_log",
        "histogram logs are not implemented; use --output-format=json+",
    ),
    ("per_job_logs", "logs are not implemented; remove the line"),
    (
        "read_iolog",
        "replaying an I/O log is `mqblk replay`; remove the line",
    ),
    // Engine- and OS-specific.
    ("cpumask", "use cpus_allowed= with a CPU list"),
    (
        "steadystate",
        "steady-state detection is not implemented; use runtime=",
    ),
    (
        "ss",
        "steady-state detection is not implemented; use runtime=",
    ),
];

/// `(fio option name, why it changes nothing in mqblk)`: fio's process, memory and clock
/// settings, which decide how fio itself runs, not what I/O reaches the block layer.
static NO_EFFECT: &[(&str, &str)] = &[
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
        "iomem",
        "I/O buffers are mqblk's own (page-aligned heap memory)",
    ),
    (
        "mem",
        "I/O buffers are mqblk's own (page-aligned heap memory)",
    ),
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
];

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
