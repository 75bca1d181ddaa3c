//! Built-in experiments: `mqblk bench --preset=NAME`. Each runs a matrix of configurations
//! and prints one table, with the figures an issue asks for.

use super::{execute, Execution, Plan};
use mqblk_workload::{parse_job_text, CommandLine};

pub const NAMES: &[&str] = &["null-none"];

pub fn run(name: &str, cl: &CommandLine) -> Result<i32, String> {
    let runtime = cl
        .global_options
        .iter()
        .rev()
        .find(|(k, _)| k == "runtime")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "3".into());
    match name {
        "null-none" => null_none(&runtime),
        _ => Err(format!(
            "--preset={name}: unknown preset (available: {})",
            NAMES.join(", ")
        )),
    }
}

/// Runs one job-file text and returns the execution.
fn run_text(label: &str, text: &str) -> Result<Execution, String> {
    let specs = parse_job_text(label, text).map_err(|e| e.to_string())?;
    let plan = Plan::from_specs(&specs)?;
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
fn null_none(runtime: &str) -> Result<i32, String> {
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
