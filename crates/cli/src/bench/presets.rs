//! Built-in experiments: `mqblk bench --preset=NAME`. Each runs a matrix of configurations
//! and prints one table, with the figures an issue asks for.

use crate::CliError;
use mqblk_runtime::{execute, Execution, Plan};
use mqblk_workload::{parse_job_text, CommandLine};

pub const NAMES: &[&str] = &[
    "null-none",
    "sched-cost",
    "single-hctx-dispatch",
    "deadline-nr-queued",
];

pub fn run(name: &str, cl: &CommandLine) -> Result<i32, CliError> {
    let runtime = cl
        .global_options
        .iter()
        .rev()
        .find(|(k, _)| k == "runtime")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "3".into());
    match name {
        "null-none" => null_none(&runtime),
        "sched-cost" => sched_cost(&runtime),
        "single-hctx-dispatch" => single_hctx_dispatch(&runtime),
        "deadline-nr-queued" => deadline_nr_queued(&runtime),
        _ => Err(format!(
            "--preset={name}: unknown preset (available: {})",
            NAMES.join(", ")
        )
        .into()),
    }
}

/// Runs one job-file text and returns the execution.
fn run_text(label: &str, text: &str) -> Result<Execution, CliError> {
    run_text_with(label, text, |_| {})
}

/// Runs one job-file text, letting the caller adjust the plan (device options that are not
/// job options, such as SCSI-like queue runs) before it runs.
fn run_text_with(
    label: &str,
    text: &str,
    adjust: impl FnOnce(&mut Plan),
) -> Result<Execution, CliError> {
    let specs = parse_job_text(label, text)?;
    let mut plan = Plan::from_specs(&specs)?;
    adjust(&mut plan);
    let exec = execute(&plan, false)?;
    exec.queue.teardown();
    Ok(exec)
}

/// Figures every preset row reports.
struct Row {
    iops: f64,
    busy_cores: f64,
    cpu_ns_per_io: f64,
}

fn row(exec: &Execution) -> Row {
    let ios = exec.total_ios().max(1) as f64;
    let wall_ns = exec.wall.as_nanos().max(1) as f64;
    let cpu_ns = exec.cpu.total_ns() as f64;
    Row {
        iops: ios * 1e9 / wall_ns,
        busy_cores: cpu_ns / wall_ns,
        cpu_ns_per_io: cpu_ns / ios,
    }
}

/// `none` on the null device (irqmode none), 4 KiB random reads at QD 1, 32 and 128 with 1
/// and 2 jobs, each job pinned to its own CPU on its own hardware queue.
fn null_none(runtime: &str) -> Result<i32, CliError> {
    println!("preset null-none: ioscheduler=none, driver=null irqmode=none, rw=randread bs=4k, runtime={runtime}s");
    println!(
        "{:>5} {:>5} {:>12} {:>11} {:>15} {:>14}",
        "jobs", "qd", "IOPS", "busy cores", "IOPS per core", "CPU ns/req"
    );
    let mut one_job = [0.0f64; 3];
    for jobs in [1u32, 2] {
        for (i, qd) in [1u32, 32, 128].into_iter().enumerate() {
            let text = format!(
                "[global]\ndriver=null\nioscheduler=none\nirqmode=none\nnr_hw_queues={jobs}\nqueue_depth={qd_dev}\n\
                 runtime={runtime}\ntime_based\nrw=randread\nbs=4k\ncpus_allowed=0-1\n\
                 [null-none-j{jobs}-qd{qd}]\niodepth={qd}\nnumjobs={jobs}\n",
                qd_dev = qd.max(64)
            );
            let r = row(&run_text("preset null-none", &text)?);
            let ratio = if jobs == 1 {
                one_job[i] = r.iops;
                String::new()
            } else {
                format!("   ({:.2}x one job)", r.iops / one_job[i].max(1.0))
            };
            println!(
                "{:>5} {:>5} {:>12.0} {:>11.2} {:>15.0} {:>14.1}{ratio}",
                jobs,
                qd,
                r.iops,
                r.busy_cores,
                r.iops / r.busy_cores.max(1e-9),
                r.cpu_ns_per_io
            );
        }
    }
    Ok(0)
}

/// A scheduler counter from its typed statistics, or 0.
fn sched_stat(exec: &Execution, name: &str) -> u64 {
    mqblk_sched::SchedStats::of(exec.queue.elevator().as_deref())
        .pairs()
        .into_iter()
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, v)| v)
}

/// CPU nanoseconds per request of each scheduler against `none`, 4 KiB random reads at
/// QD32 on the null device, one job. BFQ runs twice: as the kernel runs it on such a device
/// (non-rotational with queueing: no queue merging, BFQ's no-merging-on-flash patch) and with the merging path
/// forced on, to show what BFQ's no-merging-on-flash patch saves.
fn sched_cost(runtime: &str) -> Result<i32, CliError> {
    println!("preset sched-cost: driver=null irqmode=none, rw=randread bs=4k iodepth=32, 1 job, runtime={runtime}s");
    println!(
        "{:>16} {:>12} {:>12} {:>14}",
        "scheduler", "IOPS", "CPU ns/req", "over none"
    );
    let mut base = 0.0;
    let mut rows = vec![
        ("none", "none", ""),
        ("mq-deadline", "mq-deadline", ""),
        ("kyber", "kyber", ""),
        ("bfq", "bfq", ""),
        ("bfq+merging", "bfq", "sched.queue_merging=2\n"),
    ];
    // Schedulers registered at run time (a program built on mqblk's) get a row each too.
    for e in mqblk_sched::all() {
        if !mqblk_sched::REGISTRY.iter().any(|b| b.name == e.name) {
            rows.push((e.name, e.name, ""));
        }
    }
    for (label, sched, extra) in rows {
        let text = format!(
            "[global]\ndriver=null\nirqmode=none\nruntime={runtime}\ntime_based\ncpus_allowed=0\n\
             [{label}]\nioscheduler={sched}\n{extra}rw=randread\nbs=4k\niodepth=32\n"
        );
        let r = row(&run_text("preset sched-cost", &text)?);
        if sched == "none" {
            base = r.cpu_ns_per_io;
        }
        println!(
            "{:>16} {:>12.0} {:>12.1} {:>+13.1}ns",
            label,
            r.iops,
            r.cpu_ns_per_io,
            r.cpu_ns_per_io - base
        );
    }
    Ok(0)
}

/// mq-deadline's O(1) queued count ("block/mq-deadline: Speed up the dispatch of low-priority requests"): 128 software queues, two submitters spread
/// over them, sequential 4 KiB reads at QD128, counting queued requests by summing per-Ctx
/// counters on every dispatch decision (before) versus the O(1) counter (after).
fn deadline_nr_queued(runtime: &str) -> Result<i32, CliError> {
    println!("preset deadline-nr-queued: mq-deadline, nr_ctx=128 (2 submitters spread over them), rw=read bs=4k iodepth=128, runtime={runtime}s");
    println!("{:>22} {:>12} {:>12}", "dd_queued", "IOPS", "CPU ns/req");
    let mut iops = [0.0f64; 2];
    for (i, (label, sum)) in [("sum per-Ctx (before)", 1), ("O(1) nr_queued (after)", 0)]
        .into_iter()
        .enumerate()
    {
        let text = format!(
            "[global]\ndriver=null\nirqmode=none\nnr_ctx=128\nqueue_depth=128\nioscheduler=mq-deadline\n\
             sched.queued_sum={sum}\nruntime={runtime}\ntime_based\ncpus_allowed=0-1\n\
             [deadline-nr-queued]\nrw=read\nbs=4k\niodepth=128\nnumjobs=2\n"
        );
        let r = row(&run_text("preset deadline-nr-queued", &text)?);
        iops[i] = r.iops;
        println!("{:>22} {:>12.0} {:>12.1}", label, r.iops, r.cpu_ns_per_io);
    }
    println!(
        "after / before IOPS: {:.2} (the mail: 183K -> 258K, 1.41)",
        iops[1] / iops[0].max(1.0)
    );
    Ok(0)
}

/// The single-hctx dispatch patch ("blk-mq: Improve performance of non-mq IO schedulers with multiple HW queues"): mq-deadline with 2
/// submitters on a null device whose completions run all hardware queues, as SCSI's do.
/// MQ runs every hardware queue; SQ has one; MQ-patched runs only the submitter's.
fn single_hctx_dispatch(runtime: &str) -> Result<i32, CliError> {
    println!("preset single-hctx-dispatch: mq-deadline, 2 submitters, rw=randread bs=4k iodepth=32, completions run all hctxs, runtime={runtime}s");
    println!(
        "{:>11} {:>6} {:>12} {:>12} {:>14} {:>14}",
        "mode", "hctxs", "IOPS", "CPU ns/req", "lock taken", "contended"
    );
    let cases: &[(&str, u32, bool)] = &[
        ("SQ", 1, true),
        ("MQ", 8, false),
        ("MQ-patched", 8, true),
        ("MQ", 64, false),
        ("MQ-patched", 64, true),
    ];
    for &(mode, hw, sq) in cases {
        let text = format!(
            "[global]\ndriver=null\nirqmode=none\nnr_hw_queues={hw}\nnr_ctx=64\nioscheduler=mq-deadline\n\
             sq_sched_dispatch={}\nruntime={runtime}\ntime_based\ncpus_allowed=0-1\n\
             [single-hctx-dispatch]\nrw=randread\nbs=4k\niodepth=32\nnumjobs=2\n",
            u8::from(sq)
        );
        let exec = run_text_with("preset single-hctx-dispatch", &text, |p| {
            p.device.queue.run_all_on_complete = true
        })?;
        let r = row(&exec);
        println!(
            "{:>11} {:>6} {:>12.0} {:>12.1} {:>14} {:>14}",
            mode,
            hw,
            r.iops,
            r.cpu_ns_per_io,
            sched_stat(&exec, "lock_acquired"),
            sched_stat(&exec, "lock_contended")
        );
    }
    Ok(0)
}
