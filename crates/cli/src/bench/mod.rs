//! `mqblk bench`: fio-compatible jobs through the stack.
//!
//! The command line and job files are parsed by `mqblk-workload` into `JobSpec`s; this module
//! turns them into one device (driver, tag set, scheduler, queue) and one `RunJob` per job
//! clone, runs every clone on its own thread with its own software queue, and hands the
//! measurements back to `mqblk-workload` for fio-style text or JSON.

mod presets;

use crate::CliError;
use mqblk_runtime::{execute, execute_on, Execution, Plan};
use mqblk_workload::{parse_command_line, CommandLine, JobStats, OutputFormat};
use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The job `mqblk bench` runs when none is given: 4 KiB random reads at QD32 on a null
/// device for 3 seconds.
pub const DEFAULT_JOB: &str = "\
[global]
driver=null
ioscheduler=none
runtime=3
time_based

[randread-4k-qd32]
rw=randread
bs=4k
iodepth=32
";

/// Runs `mqblk bench ARGS`; returns the process exit code.
pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            crate::args::print_error("bench", &e);
            2
        }
    }
}

fn run(args: &[String]) -> Result<i32, CliError> {
    let mut cl = parse_command_line(args)?;
    if cl.help {
        print!("{}", usage());
        return Ok(0);
    }
    if cl.fio_options {
        print!("{}", mqblk_workload::fio_option_table());
        return Ok(0);
    }
    if let Some(name) = cl.preset.clone() {
        return presets::run(&name, &cl);
    }
    for note in mqblk_workload::no_effect_notes(&cl.jobs) {
        eprintln!("{note}");
    }
    if cl.parse_only {
        return parse_only(&cl);
    }
    let plan = plan_of(&mut cl)?;
    // fio's Ctrl-C: the first ends the jobs and the report shows what they did; a second
    // one exits at once.
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let flag = plan.interrupt.clone();
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone());
        let _ = signal_hook::flag::register(sig, flag);
    }
    let show_progress = cl
        .progress
        .unwrap_or_else(|| std::io::stdout().is_terminal());
    let b = bench_plan(&cl, &plan, show_progress)?;
    null_default_note(&cl);
    write_output(&cl, &b.out)?;
    if let Some(d) = &b.debug {
        eprint!("{d}");
    }
    Ok(b.code)
}

/// One benchmark's report, as `mqblk bench` prints it.
pub struct Benched {
    /// The report in the job's `--output-format`.
    pub out: String,
    /// The exit code: 0, or 1 after I/O or verify errors.
    pub code: i32,
    /// `--dump-sched` with a JSON report: the queue state, for stderr.
    debug: Option<String>,
}

/// `mqblk bench ARGS` without printing (the Python bindings): the same jobs on the same
/// devices, no progress line, no signal handling. `--help`, `--preset` and `--parse-only`
/// are the command line's.
pub fn bench_args(args: &[String]) -> Result<Benched, CliError> {
    bench_args_until(args, Arc::default())
}

/// [`bench_args`], ended early (as by fio's first Ctrl-C: what is in flight completes and
/// the report shows what was measured) once `interrupt` is set.
pub fn bench_args_until(args: &[String], interrupt: Arc<AtomicBool>) -> Result<Benched, CliError> {
    let mut cl = parse_command_line(args)?;
    if cl.help || cl.preset.is_some() || cl.parse_only {
        return Err("--help, --preset and --parse-only run from the command line only".into());
    }
    let mut plan = plan_of(&mut cl)?;
    plan.interrupt = interrupt;
    bench_plan(&cl, &plan, false)
}

/// The plan of the command line's jobs (the default job where none is given).
fn plan_of(cl: &mut CommandLine) -> Result<Plan, CliError> {
    if cl.jobs.is_empty() {
        cl.add_job_text("default job", DEFAULT_JOB)?;
    }
    let mut plan = Plan::from_specs(&cl.jobs)?;
    plan.plot = cl.plot.is_some();
    Ok(plan)
}

/// Runs a plan: the device, the jobs, their logs and charts, and the report.
fn bench_plan(cl: &CommandLine, plan: &Plan, show_progress: bool) -> Result<Benched, CliError> {
    // fio's `unlink`: the files of such jobs that are not there yet, which the run makes
    // and may remove; a file that was there stays.
    let mut made: Vec<String> = Vec::new();
    for s in cl.jobs.iter().filter(|s| s.unlink) {
        for f in s.all_file_names() {
            if !std::path::Path::new(&f).exists() && !made.contains(&f) {
                made.push(f);
            }
        }
    }
    let writer = crate::trace_cmd::TraceOut::open(cl.trace.as_deref());
    let exec = match &writer {
        Some(w) => {
            let device = mqblk_runtime::build_device(plan, Some(w.tracer()))?;
            execute_on(device, plan, show_progress)?
        }
        None => execute(plan, show_progress)?,
    };
    crate::trace_cmd::finish(&writer)?;
    for f in &made {
        match std::fs::remove_file(f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("mqblk bench: unlink={f}: {e}"),
        }
    }
    if plan.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("mqblk bench: interrupted; results so far follow");
    }
    let clones: Vec<_> = plan
        .jobs
        .iter()
        .zip(&exec.results)
        .map(|(rj, (sink, out))| crate::report::CloneOut {
            job: &rj.job,
            iolog: &out.iolog,
            stats: &sink.stats,
            logs: sink.logs.as_ref(),
            start_ms: match out.log_epoch_ms {
                0 => started_ms(out, &exec),
                t => t,
            },
        })
        .collect();
    crate::report::write_job_files(cl, &clones)?;
    let mut out = crate::report::render(
        cl,
        job_reports(cl, plan, &exec),
        &mqblk_device::QueueReport::of(&exec.queue),
        (
            exec.started_ms + exec.wall.as_millis() as u64,
            exec.wall.as_secs().max(1),
        ),
        None,
    )?;
    if cl.dump_sched && cl.output_format == OutputFormat::NORMAL {
        out.push_str("\nscheduler and hardware queue state:\n");
        out.push_str(&exec.queue.debug_state());
        if let Some(null) = &exec.device.null {
            out.push_str(&format!("null: {} bytes stored\n", null.stored_bytes()));
        }
    }
    let debug = (cl.dump_sched && cl.output_format != OutputFormat::NORMAL)
        .then(|| exec.queue.debug_state());
    exec.queue.teardown();
    Ok(Benched {
        out,
        code: report_failures(&exec),
        debug,
    })
}

/// `--parse-only`: the jobs parsed and the device they describe checked, nothing opened,
/// created or run (as fio's: a file named need not exist here); one line saying what was
/// found.
/// Says once, for jobs that will run, which of them run on the null device where fio would
/// write files ([`mqblk_workload::job::null_default_note`]).
fn null_default_note(cl: &CommandLine) {
    if let Some(note) = mqblk_workload::job::null_default_note(&cl.jobs) {
        eprintln!("{note}");
    }
}

fn parse_only(cl: &CommandLine) -> Result<i32, CliError> {
    if cl.jobs.is_empty() {
        return Err("--parse-only: no jobs given (name a job file or --name=)".into());
    }
    mqblk_device::DeviceConfig::from_jobs_parse_only(&cl.jobs)?;
    null_default_note(cl);
    let names: Vec<&str> = cl.jobs.iter().map(|j| j.name.as_str()).collect();
    let clones: u32 = cl.jobs.iter().map(|j| j.numjobs.max(1)).sum();
    println!(
        "{} job{} ({}), {clones} thread{}: no problems",
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", "),
        if clones == 1 { "" } else { "s" }
    );
    Ok(0)
}

fn write_output(cl: &CommandLine, out: &str) -> Result<(), CliError> {
    match &cl.output_file {
        Some(path) => std::fs::write(path, out)
            .map_err(|e| CliError::io(format!("--output={}", path.display()), e)),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(out.as_bytes())
                .map_err(|e| CliError::io("writing the report", e))
        }
    }
}

/// Prints I/O and verify errors (one line each, the first few) and picks the exit code.
fn report_failures(exec: &Execution) -> i32 {
    let mut failed = false;
    for (_, out) in &exec.results {
        if let Some(e) = &out.first_error {
            eprintln!("error: {e} ({} I/O errors in this job)", out.errors);
            failed = true;
        }
        for e in out.verify_errors.iter().take(10) {
            eprintln!("{e}");
            failed = true;
        }
        if out.verify_errors.len() > 10 {
            eprintln!(
                "... and {} more verify errors",
                out.verify_errors.len() - 10
            );
        }
    }
    i32::from(failed)
}

fn usage() -> String {
    format!(
        "usage: mqblk bench [JOBFILE...] [--OPTION=VALUE...] [--name=JOB --OPTION=VALUE...]\n\
         \n\
         Runs fio-compatible jobs through mqblk. Options before the first --name are global.\n\
         Without jobs it runs the built-in default (4k random reads, QD32, 3 s, null device).\n\
         \n\
         tool options: --output-format=normal|json|json+  --output=FILE  --dump-sched\n\
         \x20             --parse-only (check the jobs, run nothing)  --plot=DIR (SVG charts)\n\
         \x20             --fio-options (what mqblk does with each of fio's options)\n\
         \x20             --progress / --no-progress  --preset=NAME ({})  --help\n\
         schedulers:   {}\n\
         \n\
         job options:\n{}",
        presets::NAMES.join(", "),
        mqblk_sched::names().join(", "),
        mqblk_workload::options_help()
    )
}

/// When a clone started, ms since the Unix epoch (the run's start for one that never did).
fn started_ms(out: &mqblk_runtime::JobOutcome, exec: &Execution) -> u64 {
    match out.started_ms {
        0 => exec.started_ms,
        t => t,
    }
}

/// Each job clone's figures in fio's report shape, with what a real-time run measures
/// beside the simulator's (CPU use, start times, verification, the device's buffers).
fn job_reports(cl: &CommandLine, plan: &Plan, exec: &Execution) -> Vec<JobStats> {
    let stats: Vec<&JobStats> = exec.results.iter().map(|(sink, _)| &sink.stats).collect();
    let mut jobs = crate::report::job_stats(cl, &plan.spec_of, &stats);
    for (i, (st, (_, out))) in jobs.iter_mut().zip(&exec.results).enumerate() {
        st.job_start_ms = started_ms(out, exec);
        st.job_runtime_ns = out.runtime_ns;
        st.usr_cpu_ns = out.cpu.user_ns;
        st.nr_zone_resets = out.zone_resets;
        st.sys_cpu_ns = out.cpu.sys_ns;
        st.ctx_switches = out.cpu.ctx_switches;
        st.majf = out.cpu.major_faults;
        st.minf = out.cpu.minor_faults;
        st.pid = std::process::id();
        for d in 0..2 {
            if st.dirs[d].total_ios > 0 {
                st.dirs[d].runtime_ns = out.runtime_ns;
            }
        }
        if let Some(e) = &out.first_error {
            st.error_text = e.clone();
        } else if let Some(e) = out.verify_errors.first() {
            st.error_text = e.clone();
        }
        if !out.verify_errors.is_empty() {
            st.error = st.error.max(1);
        }
        if plan.jobs[i].job.verify {
            st.extra_lines.push(format!(
                "verify : {} blocks checked, {} mismatches",
                out.verified,
                out.verify_errors.len()
            ));
            st.extra
                .insert("verified_blocks".into(), out.verified.into());
            st.extra.insert(
                "verify_errors".into(),
                (out.verify_errors.len() as u64).into(),
            );
        }
    }
    if let Some(first) = jobs.first_mut() {
        if let Some(shape) = exec.device.uring.as_ref().and_then(|u| u.backing()) {
            first
                .extra_lines
                .push(format!("backing: {}", shape.describe()));
            first
                .extra
                .insert("backing".into(), shape.describe().into());
        }
        if let Some(pool) = exec.device.uring.as_ref().and_then(|u| u.buf_pool()) {
            let (fixed, plain) = exec
                .device
                .uring
                .as_ref()
                .map_or((0, 0), |u| u.fixed_stats());
            first.extra_lines.push(format!(
                "uring   : registered buffers {} x {} KiB; {fixed} I/Os from them, {plain} from others",
                pool.len(),
                pool.buf_size() / 1024
            ));
            first.extra.insert("uring_fixed_ios".into(), fixed.into());
            first.extra.insert("uring_plain_ios".into(), plain.into());
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        Plan::from_specs(&mqblk_workload::parse_job_text("test", text).unwrap()).unwrap()
    }

    const WRITE: &str =
        "[w]\nmemory_backed\nrw=randwrite\nbs=4k\nsize=1m\niodepth=8\nverify=crc32c\ndo_verify=0\n";
    const READ: &str =
        "[r]\nmemory_backed\nrw=randread\nbs=4k\nsize=1m\niodepth=8\nverify=crc32c\n";

    #[test]
    fn verify_passes_on_untouched_data() {
        let p =
            plan("[v]\nmemory_backed\nrw=randwrite\nbs=4k\nsize=1m\niodepth=16\nverify=crc32c\n");
        let exec = execute(&p, false).unwrap();
        let out = &exec.results[0].1;
        assert_eq!(
            out.verified, 256,
            "every written block is read back and checked"
        );
        assert!(out.verify_errors.is_empty(), "{:?}", out.verify_errors);
        exec.queue.teardown();
    }

    #[test]
    fn verify_catches_a_corrupted_block() {
        // Reading on past a bad block (`continue_on_error=verify`) finds it and the rest;
        // by default the job ends at it with fio's EILSEQ.
        for (extra, verified) in [("continue_on_error=verify\n", Some(255)), ("", None)] {
            let write = plan(WRITE);
            let device = mqblk_device::build(&write.device, 1).unwrap();
            let null = device.null.clone().unwrap();
            let exec = execute_on(device, &write, false).unwrap();
            assert_eq!(exec.total_ios(), 256);
            assert!(null.corrupt(77 * 4096 + 1000), "block 77 was written");
            let read = plan(&format!("{READ}{extra}"));
            let device = mqblk_device::Device {
                queue: exec.queue.clone(),
                null: Some(null),
                uring: None,
            };
            let exec = execute_on(device, &read, false).unwrap();
            let out = &exec.results[0].1;
            match verified {
                Some(n) => assert_eq!(out.verified, n),
                None => assert!(out.verified < 255, "{} verified", out.verified),
            }
            assert_eq!(out.verify_errors.len(), 1, "{:?}", out.verify_errors);
            assert!(
                out.verify_errors[0].contains(&format!("offset {}", 77 * 4096)),
                "{}",
                out.verify_errors[0]
            );
            assert_eq!(exec.results[0].0.stats.error, 84, "fio's EILSEQ");
            assert_eq!(
                report_failures(&exec),
                1,
                "a verify failure makes the run fail"
            );
            exec.queue.teardown();
        }
    }

    #[test]
    fn jobs_with_different_devices_are_refused() {
        let specs =
            mqblk_workload::parse_job_text("t", "[a]\nnr_hw_queues=2\n[b]\nnr_hw_queues=1\n")
                .unwrap();
        let e = Plan::from_specs(&specs).err().unwrap().to_string();
        assert!(
            e.contains("job 'b': nr_hw_queues differs from job 'a'"),
            "{e}"
        );
    }

    #[test]
    fn jobs_may_cover_different_regions_of_one_device() {
        let specs = mqblk_workload::parse_job_text(
            "t",
            "[a]\nsize=1m\n[b]\noffset=4m\nsize=2m\n[c]\nsize=3m\n",
        )
        .unwrap();
        let p = Plan::from_specs(&specs).unwrap();
        assert_eq!(
            p.device.capacity().unwrap(),
            6 << 20,
            "as large as the largest needs"
        );
        let sizes: Vec<_> = p
            .jobs
            .iter()
            .map(|j| (j.job.files[0].offset, j.job.files[0].size))
            .collect();
        assert_eq!(sizes, vec![(0, 1 << 20), (4 << 20, 2 << 20), (0, 3 << 20)]);
    }

    /// Every job plugs every bio: on a regular file as a file system plugs around direct
    /// I/O, and on any device as the kernel's `__submit_bio` does (`submit_bio_plugs`).
    #[test]
    fn jobs_plug_every_bio() {
        let dir = std::env::temp_dir().join(format!("mqblk-plug-each-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("data");
        let on_file = plan(&format!(
            "[f]\nioengine=io_uring\nfilename={}\nsize=1m\n",
            f.display()
        ));
        assert!(on_file.jobs.iter().all(|j| j.plug_each));
        assert!(plan("[n]\nsize=1m\n").jobs.iter().all(|j| j.plug_each));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Each job gets rings of its own (single issuer), whether it has a hardware queue to
    /// itself or shares one, with a scheduler (which hands one job's requests to another's
    /// queue run) or without, and the run completes on them; with completion workers,
    /// which reap every queue, the jobs keep the shared rings.
    #[test]
    fn rings_belong_to_their_job_unless_workers_reap_for_them() {
        let dir = std::env::temp_dir().join(format!("mqblk-owned-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("data");
        let job = |extra: &str| {
            plan(&format!(
                "[f]\nioengine=io_uring\nfilename={}\nsize=1m\nrw=randwrite\nbs=4k\niodepth=4\nnumjobs=2\n{extra}",
                f.display()
            ))
        };
        for (extra, owned) in [
            ("nr_hw_queues=2\nioscheduler=none\n", true),
            ("nr_hw_queues=1\nioscheduler=none\n", true),
            ("nr_hw_queues=2\nioscheduler=kyber\n", true),
            ("nr_hw_queues=1\nioscheduler=mq-deadline\n", true),
            ("nr_hw_queues=1\nioscheduler=bfq\nhctx_workers=1\n", false),
        ] {
            let p = job(extra);
            let device = mqblk_runtime::build_device(&p, None).unwrap();
            let uring = device.uring.clone().unwrap();
            assert_eq!(uring.config().single_issuer, owned, "{extra:?}");
            let exec = execute_on(device, &p, false).unwrap();
            assert_eq!(exec.total_ios(), 512, "{extra:?}");
            let rings: usize = (0..uring.config().nr_hw_queues)
                .map(|h| uring.owned_rings(mqblk_core::HctxIdx(h)))
                .sum();
            assert_eq!(rings, if owned { 2 } else { 0 }, "{extra:?}");
            exec.queue.teardown();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_job_past_the_device_end_is_refused() {
        let specs = mqblk_workload::parse_job_text("t", "[a]\ndev_size=1m\nsize=2m\n").unwrap();
        let e = Plan::from_specs(&specs).err().unwrap().to_string();
        assert!(e.contains("runs past the device"), "{e}");
    }

    #[test]
    fn mixed_reads_and_writes_are_counted_per_direction_and_every_io_completes() {
        let p = plan("[m]\nmemory_backed\nrw=randrw\nrwmixread=70\nbs=4k\nsize=4m\niodepth=16\nnumjobs=2\nnr_hw_queues=2\n");
        let exec = execute(&p, false).unwrap();
        for (sink, out) in &exec.results {
            let (r, w) = (sink.stats.dirs[0].total_ios, sink.stats.dirs[1].total_ios);
            assert_eq!(r + w, 1024, "one pass over 4 MiB in 4 KiB blocks");
            assert_eq!(out.ios, 1024);
            assert!((600..830).contains(&r), "about 70% reads, got {r}");
        }
        exec.queue.teardown();
    }
}
