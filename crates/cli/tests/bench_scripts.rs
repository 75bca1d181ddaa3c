//! The comparisons with fio that README's benchmark section shows run as written, in a short
//! form (one round of one-second runs) with this build's `mqblk`: `bench/vs-fio.sh` (fio's
//! io_uring engine against the uring driver) and `bench/null-scaling.sh` (fio's null engine
//! against the null device, and two jobs over one). Only what they print is checked, never a
//! speed: speed targets live in the benchmarks themselves. fio is needed; CI installs it
//! (`.ci/run`), elsewhere its absence is a visible skip.

mod common;
use common::{need_tools, repo, run_repo_script_env};

/// Runs `bash bench/NAME ARGS` with this build's mqblk (and `env`) and returns its stdout, or
/// None (a visible skip) without fio outside CI.
fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    if !need_tools(&format!("bench/{name}"), &["fio"]) {
        return None;
    }
    let out = run_repo_script_env(&format!("bench/{name}"), args, env);
    Some(String::from_utf8_lossy(&out).into_owned())
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
    let round = out
        .lines()
        .find(|l| l.starts_with("round 1"))
        .unwrap_or_else(|| panic!("no round line:\n{out}"));
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

/// A `BASE` that is not a program is refused in one line before anything runs (no fio
/// needed).
#[test]
fn the_null_scaling_script_refuses_a_base_that_is_not_a_program() {
    let out = std::process::Command::new("bash")
        .args(["bench/null-scaling.sh", "1", "1"])
        .env("MQBLK", env!("CARGO_BIN_EXE_mqblk"))
        .env("BASE", "/nonexistent/mqblk")
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "null-scaling.sh: BASE=/nonexistent/mqblk is not an executable"
    );
    assert!(out.stdout.is_empty());
}
