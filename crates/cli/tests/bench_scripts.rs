//! The comparisons with fio that README's benchmark section shows run as written, in a short
//! form (one round of one-second runs) with this build's `mqblk`: `bench/vs-fio.sh` (fio's
//! io_uring engine against the uring driver) and `bench/null-scaling.sh` (fio's null engine
//! against the null device, and two jobs over one), and `bench/sim-speed.sh` (the simulator's
//! requests per host second, and its instructions per request under valgrind). Only what they
//! print is checked, never a speed: speed targets live in the benchmarks themselves. fio and
//! valgrind are needed; CI installs them (`.ci/run`), elsewhere their absence is a visible skip.

mod common;
use common::{need_tools, repo, run_repo_script_env};

/// Runs `bash bench/NAME ARGS` with this build's mqblk (and `env`) and returns its stdout, or
/// None (a visible skip) without fio outside CI.
fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    run_with(name, "fio", args, env)
}

/// [`run`] for a script that needs `tool` rather than fio.
fn run_with(name: &str, tool: &str, args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    if !need_tools(&format!("bench/{name}"), &[tool]) {
        return None;
    }
    let out = run_repo_script_env(&format!("bench/{name}"), args, env);
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The line of the first round a script printed.
fn first_round(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("round 1"))
        .unwrap_or_else(|| panic!("no round line:\n{out}"))
}

/// The number after `key` on `line`.
fn number_after(line: &str, key: &str) -> f64 {
    let rest = &line[line
        .find(key)
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"))
        + key.len()..];
    rest.split_whitespace()
        .next()
        .and_then(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no number after {key:?} in {line:?}"))
}

/// With `BASE` set (here to this very build), every round also runs one job of that build
/// and the summary gives ours over it.
#[test]
fn the_null_scaling_script_prints_each_round_and_every_ratio() {
    let Some(out) = run(
        "null-scaling.sh",
        &["1", "1"],
        &[("BASE", env!("CARGO_BIN_EXE_mqblk"))],
    ) else {
        return;
    };
    let round = first_round(&out);
    for key in [
        "fio null",
        "1 job",
        "base 1 job",
        "ours",
        "2 jobs 2 hctx",
        "2 jobs 1 hctx",
    ] {
        assert!(number_after(round, key) > 0.0, "{key}: {round}");
    }
    for label in [
        "1 job / fio's null engine",
        "2 jobs on 2 hctx / 1 job",
        "2 jobs on 1 hctx / 1 job",
        "1 job / 1 job of BASE",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} summary:\n{out}"));
        let (median, smallest) = (number_after(line, "median"), number_after(line, "smallest"));
        // One round: its median is its only value.
        assert!(median > 0.0 && median == smallest, "{line}");
    }
}

#[test]
fn the_io_uring_comparison_prints_iops_and_cpu_per_io_of_every_workload() {
    let Some(out) = run("vs-fio.sh", &["", "64m", "1", "1"], &[]) else {
        return;
    };
    let workloads = [
        "randread 4k qd32 1 job ",
        "randread 4k qd32 2 jobs ",
        "randread 4k qd32 2 jobs 1 hctx",
        "randread 4k qd4 4 jobs 1 hctx",
        "read 128k qd8 1 job",
        "randread 4k qd32 fixedbufs",
    ];
    for w in workloads {
        let row = out
            .lines()
            .find(|l| l.starts_with(w) && l.contains("rep 1"))
            .unwrap_or_else(|| panic!("no row for {w:?}:\n{out}"));
        assert!(
            number_after(row, "fio") > 0.0 && number_after(row, "mqblk") > 0.0,
            "{row}"
        );
        assert!(number_after(row, "ratio") > 0.0, "{row}");
        // CPU per I/O is measured, so never zero: both tools use the CPU to move data.
        assert!(number_after(row, "cpu") > 0.0, "{row}");
        let summary = out
            .lines()
            .find(|l| l.starts_with(w) && l.contains("median"))
            .unwrap_or_else(|| panic!("no median for {w:?}:\n{out}"));
        assert_eq!(
            number_after(summary, "median mqblk/fio"),
            number_after(row, "ratio"),
            "{summary}"
        );
        assert!(number_after(summary, "cpu per I/O") > 0.0, "{summary}");
    }
}

/// Runs `bash bench/NAME ARGS` with a `BASE` that is not a program: refused in one line
/// before anything runs (no fio or valgrind needed).
fn refuses_a_base_that_is_not_a_program(name: &str, args: &[&str]) {
    let out = std::process::Command::new("bash")
        .arg(format!("bench/{name}"))
        .args(args)
        .env("MQBLK", env!("CARGO_BIN_EXE_mqblk"))
        .env("BASE", "/nonexistent/mqblk")
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        format!("{name}: BASE=/nonexistent/mqblk is not an executable")
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_null_scaling_script_refuses_a_base_that_is_not_a_program() {
    refuses_a_base_that_is_not_a_program("null-scaling.sh", &["1", "1"]);
}

/// The simulator's speed script, one short round against this very build as `BASE`: every
/// scheduler's round figure, its ratio and its summary; and the instructions per simulated
/// request, which do not depend on the machine's mood: a deterministic simulation counted
/// twice by the same build gives the same count, so ours over BASE is exactly 1.
#[test]
fn the_sim_speed_script_prints_speed_ratios_and_instructions_per_request() {
    let me = env!("CARGO_BIN_EXE_mqblk");
    let Some(out) = run_with(
        "sim-speed.sh",
        "valgrind",
        &["200ms", "1"],
        &[
            ("BASE", me),
            ("INSTRUCTIONS", "1"),
            ("INSTR_RUNTIMES", "10ms 30ms"),
        ],
    ) else {
        return;
    };
    let round = first_round(&out);
    for s in ["none", "mq-deadline"] {
        assert!(number_after(round, &format!("{s} ")) > 0.0, "{s}: {round}");
        let summary = out
            .lines()
            .find(|l| l.starts_with(&format!("{s} ")) && l.contains("median"))
            .unwrap_or_else(|| panic!("no summary for {s}:\n{out}"));
        assert!(number_after(summary, "median") > 0.0, "{summary}");
        let (ratio, smallest) = (
            number_after(summary, "over BASE median"),
            number_after(summary, "smallest"),
        );
        // One round: its median is its only value.
        assert!(ratio > 0.0 && ratio == smallest, "{summary}");
        let count = out
            .lines()
            .find(|l| l.starts_with(&format!("{s}:")))
            .unwrap_or_else(|| panic!("no instruction count for {s}:\n{out}"));
        let (ours, base) = (number_after(count, ":"), number_after(count, "BASE"));
        // Thousands of instructions carry a request through the queue and the model.
        assert!(ours > 1000.0, "{count}");
        assert_eq!(ours, base, "the same build counted twice: {count}");
        assert_eq!(number_after(count, "ours"), 1.0, "{count}");
    }
}

#[test]
fn the_sim_speed_script_refuses_a_base_that_is_not_a_program() {
    refuses_a_base_that_is_not_a_program("sim-speed.sh", &["100ms", "1"]);
}
