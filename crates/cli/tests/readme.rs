//! Every command README.md and the guides in `docs/` show runs as written: each `sh` block
//! runs as a bash script (`set -euo pipefail`) with this build's `mqblk` first on the PATH,
//! from a directory where `examples/` and `testdata/` are the repository's, README's first,
//! then each guide's in [`GUIDES`] order (a guide's blocks may use files an earlier block of
//! the same guide made). A block that needs a tool which is not installed fails in CI (where
//! `.ci/run` installs it) and is skipped visibly elsewhere.

mod common;
use common::{need_tools, repo};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The guides in `docs/`, in the order their blocks run.
const GUIDES: [&str; 14] = [
    "bench.md",
    "fio-options.md",
    "twin.md",
    "sim.md",
    "durability.md",
    "profile.md",
    "scenario.md",
    "serve-nbd.md",
    "vhost-user-blk.md",
    "python.md",
    "trace.md",
    "schedulers.md",
    "library.md",
    "fidelity.md",
];

/// The `sh` blocks of README.md and then of every guide, each with the file it is in.
fn blocks() -> Vec<(String, String)> {
    let mut files = vec![repo().join("README.md")];
    files.extend(GUIDES.iter().map(|g| repo().join("docs").join(g)));
    let mut out = Vec::new();
    for f in files {
        let name = f.strip_prefix(repo()).unwrap_or(&f).display().to_string();
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.extend(sh_blocks(&text).into_iter().map(|b| (name.clone(), b)));
    }
    out
}

/// Every guide in `docs/` is one [`GUIDES`] runs: a new guide's commands are not left out.
#[test]
fn every_guide_is_run() {
    let mut found: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    found.sort();
    let mut listed: Vec<String> = GUIDES.iter().map(|g| g.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed, "docs/*.md and the guides this test runs");
}

/// The `sh` blocks of one Markdown text, in order.
fn sh_blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match (&mut cur, line.trim_end()) {
            (None, "```sh") => cur = Some(String::new()),
            (Some(b), "```") => {
                out.push(std::mem::take(b));
                cur = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// Blocks not run here, each with the reason and where it is covered instead.
fn not_run(block: &str) -> Option<&'static str> {
    if block.starts_with("cargo run") {
        Some("the build-and-run line is `mqblk bench` (run below); the suite is `bash scripts/test` itself")
    } else if block.starts_with("bash scripts/kernel-cost.sh") {
        Some("two minutes of measurement; kernel_scripts.rs runs the script in a one-second form")
    } else if block.starts_with("bash scripts/dbench-twin.sh") {
        Some("minutes of dbench; kernel_scripts.rs runs the script with 2 s runs, one round, with --merges and --device-stats, with --rotational and with --wbt-lat-usec")
    } else if block.starts_with("mqblk twin --suite") {
        Some("half an hour per device; twin_cli.rs runs a suite of two workloads on a loop device")
    } else if block.starts_with("bash scripts/find-twin.sh") {
        Some("20 s of measurement; kernel_scripts.rs runs the script with 2,000 files")
    } else if block.starts_with("python3 -m venv") {
        Some(
            "downloads from PyPI; python/test.sh installs the package with pip the same way (into target/pyenv) and runs its tests",
        )
    } else if block.starts_with("bash scripts/guest-bench.sh") {
        Some("minutes of guest boots; guest.rs runs both scripts with one short round, the seed direction checked")
    } else if block.starts_with("bash scripts/guest-seed000.sh") {
        Some("minutes of dbench in guests of two kernels; guest.rs runs the script with 4 s runs, one round")
    } else if block.starts_with("bash scripts/guest-seed004.sh") {
        Some("minutes of dbench in a guest; guest.rs runs the script with 6 s runs, one round, merges counted and BFQ's hw_tag read")
    } else if block.starts_with("bash scripts/guest-dbench-capture.sh") {
        Some("90 s of dbench in a guest; guest.rs runs the script with a 2 s run and reads its trace")
    } else if block.starts_with("bash scripts/guest-test.sh") {
        Some("boots a guest twice; guest.rs runs the script")
    } else if block.starts_with("python examples/python/prio_aging.py") {
        Some("needs the Python package installed; python/tests/test_scheduler.py runs the tutorial's scheduler and sweep")
    } else if block.starts_with("cargo build --release -p mqblk-mqfq") {
        Some("builds the example scheduler; examples/mqfq/tests runs its binary in sim, bench, the fuzzer, the crash runs, serve and twin")
    } else if block.starts_with("bash scripts/guest-reconnect.sh") {
        Some("boots a guest and kills its server three times; guest.rs runs the script")
    } else if block.contains("trace capture --device=/dev/loop0") {
        Some("needs root and an attached /dev/loop0; trace_cli's capture test captures a loop device it sets up")
    } else {
        None
    }
}

#[test]
fn every_readme_and_guide_command_runs_as_written() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_mqblk"));
    let dir = std::env::temp_dir().join(format!("mqblk-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for sub in ["examples", "testdata"] {
        std::os::unix::fs::symlink(repo().join(sub).canonicalize().unwrap(), dir.join(sub))
            .unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Files the README's commands create; removed afterwards only if they were not there
    // before (a user's own /tmp/data is left alone).
    let scratch_files = [
        "/tmp/data",
        "/tmp/disk.img",
        "/tmp/twin.img",
        "/tmp/twin-profile.toml",
        "/tmp/twin.json",
        "/tmp/profile.img",
        "/tmp/readme-nbd.sock",
        "/tmp/zoned.sock",
    ];
    let ours: Vec<&str> = scratch_files
        .into_iter()
        .filter(|f| !Path::new(f).exists())
        .collect();
    let blocks = blocks();
    assert!(
        blocks.len() >= 20,
        "README.md and the guides have {} sh blocks",
        blocks.len()
    );
    let mut ran = 0;
    for (file, block) in &blocks {
        if let Some(why) = not_run(block) {
            eprintln!(
                "not run ({file}): {}: {why}",
                block.lines().next().unwrap_or("")
            );
            continue;
        }
        let tools: Vec<&str> = ["blkparse", "nbdinfo", "nbdcopy", "fio", "qemu-img"]
            .into_iter()
            .filter(|t| block.lines().any(|l| l.trim_start().starts_with(t)))
            .collect();
        let what = format!("a block of {file} ({})", block.lines().next().unwrap_or(""));
        if !need_tools(&what, &tools) {
            continue;
        }
        let script = format!("set -euo pipefail\n{block}");
        let started = std::time::Instant::now();
        let out = Command::new("timeout")
            .args(["600", "bash", "-c", &script])
            .current_dir(&dir)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{file}: block failed ({:?}):\n{block}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "ran ({file}, {:.1} s): {}",
            started.elapsed().as_secs_f64(),
            block.lines().next().unwrap_or("")
        );
        ran += 1;
    }
    // What `cargo run --release -p mqblk -- bench` runs.
    let o = Command::new(&bin).arg("bench").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("IOPS="));
    eprintln!("ran {ran} blocks of README.md and the guides, and the default bench");
    for f in ours {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
