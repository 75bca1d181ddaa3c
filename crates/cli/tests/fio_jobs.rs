//! fio job files as people write them for fio, run unchanged by `mqblk bench`: engines,
//! files, and the way problems are reported.

mod common;
use common::{mqblk, mqblk_in, text};
use std::path::PathBuf;
use std::process::{Command, Output};

/// A scratch directory of this test process, under the system's temporary directory.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mqblk-fio-jobs-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON report")
}

/// fio's IO depth distribution of the first job: the share at depth 1.
fn share_at_depth_1(report: &serde_json::Value) -> f64 {
    report["jobs"][0]["iodepth_level"]["1"]
        .as_f64()
        .expect("iodepth_level")
}

#[test]
fn block_engines_run_on_the_named_file_and_sync_ones_keep_one_io_in_flight() {
    let dir = scratch("engines");
    let data = dir.join("data");
    for (engine, sync) in [
        ("libaio", false),
        ("io_uring", false),
        ("posixaio", false),
        ("psync", true),
        ("sync", true),
        ("pvsync2", true),
        ("mmap", true),
    ] {
        let job = dir.join(format!("{engine}.fio"));
        std::fs::write(
            &job,
            format!(
                "[global]\nioengine={engine}\nfilename={}\nsize=16m\ndirect=1\n\n\
                 [randread]\nrw=randread\nbs=4k\niodepth=16\n",
                data.display()
            ),
        )
        .unwrap();
        let job = job.display().to_string();
        let report = json(&mqblk(&["bench", "--output-format=json", &job]));
        let read = &report["jobs"][0]["read"];
        assert_eq!(read["total_ios"].as_u64(), Some(4096), "{engine}: {read}");
        let at_1 = share_at_depth_1(&report);
        if sync {
            assert_eq!(
                at_1, 100.0,
                "{engine}: a synchronous engine has one I/O in flight"
            );
        } else {
            assert!(
                at_1 < 50.0,
                "{engine}: depth 16 reached, but {at_1}% at depth 1"
            );
        }
        let out = text(&mqblk(&["bench", &job]).stdout);
        assert!(
            out.starts_with(&format!(
                "randread: (g=0): rw=randread, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine={engine}, iodepth=16\n  mqblk: ioengine={engine} ran as block I/O through mqblk's queues"
            )),
            "{out}"
        );
    }
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 16 << 20);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_named_without_an_engine_runs_as_fios_default_psync() {
    let dir = scratch("default-engine");
    let f = format!("--filename={}", dir.join("data").display());
    let o = mqblk(&[
        "bench",
        "--output-format=json",
        &f,
        "--size=4m",
        "--name=r",
        "--rw=randread",
        "--iodepth=8",
    ]);
    let report = json(&o);
    assert_eq!(report["jobs"][0]["read"]["total_ios"].as_u64(), Some(1024));
    assert_eq!(share_at_depth_1(&report), 100.0);
    let out = text(&mqblk(&["bench", &f, "--size=4m", "--name=r"]).stdout);
    assert!(out.contains("ioengine=psync, iodepth=1\n"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_created_for_a_read_job_is_laid_out_with_data_and_one_for_writes_is_allocated() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch("layout");
    for (rw, name) in [("randread", "read"), ("write", "write")] {
        let path = dir.join(name);
        let f = format!("--filename={}", path.display());
        let rw = format!("--rw={rw}");
        let o = mqblk(&[
            "bench",
            "--ioengine=libaio",
            &f,
            "--size=8m",
            "--name=j",
            &rw,
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 8 << 20);
        assert!(
            meta.blocks() * 512 >= 8 << 20,
            "{name}: {} bytes allocated of 8 MiB",
            meta.blocks() * 512
        );
    }
    // Reads of the laid-out file reach written data, not zeroes of a hole.
    let data = std::fs::read(dir.join("read")).unwrap();
    let zero_pages = data
        .chunks(4096)
        .filter(|p| p.iter().all(|&b| b == 0))
        .count();
    assert_eq!(zero_pages, 0, "pages of zeroes in a laid-out file");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn engines_that_do_no_block_io_and_a_file_job_without_a_size_are_refused_in_one_line_each() {
    let o = mqblk(&["bench", "--ioengine=net", "--name=n"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("'net' is not supported: the net engine sends data over a network socket, not block I/O"),
        "{err}"
    );
    // Without a filename, fio's own (`x.0.0` in the current directory), which cannot be
    // made without a size.
    let o = mqblk(&["bench", "--ioengine=libaio", "--name=x"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("job 'x': file x.0.0: does not exist; give size="),
        "{err}"
    );
    assert!(!std::path::Path::new("x.0.0").exists());
    // The null engine is mqblk's null device, no file needed.
    let o = mqblk(&["bench", "--ioengine=null", "--name=x", "--size=1m"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// A job file naming a device that is not there, or a file in a directory that is not,
/// fails as fio's does, in one line naming the job file and the line that named it.
#[test]
fn a_missing_device_or_directory_is_named_with_the_line_that_named_it() {
    let dir = scratch("missing-dev");
    let job = dir.join("disk.fio");
    std::fs::write(
        &job,
        "[global]\nioengine=libaio\nrw=randread\n\n[disk]\nfilename=/dev/mqblk-no-such-disk\n\n\
         [set]\ndirectory=/mqblk-no-such-dir\nsize=1m\n",
    )
    .unwrap();
    let o = mqblk(&["bench", job.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("disk.fio:6: job 'disk': file /dev/mqblk-no-such-disk: does not exist"),
        "{err}"
    );
    std::fs::write(
        &job,
        "[set]\nioengine=psync\ndirectory=/mqblk-no-such-dir\nsize=1m\n",
    )
    .unwrap();
    let o = mqblk(&["bench", job.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("disk.fio:3: job 'set': directory /mqblk-no-such-dir of file /mqblk-no-such-dir/set.0.0 does not exist"),
        "{err}"
    );
    assert!(!std::path::Path::new("/mqblk-no-such-dir").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parse_only_checks_a_file_and_runs_nothing() {
    let dir = scratch("parse-only");
    let data = dir.join("data");
    let good = dir.join("good.fio");
    std::fs::write(
        &good,
        format!(
            "[global]\nioengine=libaio\nfilename={}\nsize=1g\n[a]\nrw=read\n[b]\nrw=write\nnumjobs=2\n",
            data.display()
        ),
    )
    .unwrap();
    let o = mqblk(&["bench", "--parse-only", &good.display().to_string()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "2 jobs (a, b), 3 threads: no problems\n");
    assert!(!data.exists(), "--parse-only created the job's file");
    // As fio's, it checks the options, not the machine: a device of another machine
    // parses, and the run is what fails, naming it.
    let other = dir.join("other.fio");
    std::fs::write(
        &other,
        "[global]\nioengine=libaio\nfilename=/dev/mqblk-no-such-disk\nnuma_cpu_nodes=0\n[a]\nrw=read\nruntime=1\n",
    )
    .unwrap();
    let other = other.display().to_string();
    let o = mqblk(&["bench", "--parse-only", &other]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        "accepted, no effect in mqblk: numa_cpu_nodes: jobs are not bound to NUMA nodes (cpus_allowed= pins them to CPUs)\n"
    );
    let o = mqblk(&["bench", &other]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("/dev/mqblk-no-such-disk: does not exist"),
        "{}",
        text(&o.stderr)
    );
    let bad = dir.join("bad.fio");
    std::fs::write(
        &bad,
        "[global]\nioengine=libaio\n; a comment\ntrim_backlog=4\n[a]\nrw=raed\nbs=4k\nlockfile=exclusive\n",
    )
    .unwrap();
    let bad = bad.display().to_string();
    let o = mqblk(&["bench", "--parse-only", &bad]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with(&format!("mqblk bench: {bad}:4: fio option 'trim_backlog'")));
    assert!(lines[1].starts_with(&format!("mqblk bench: {bad}:6: option 'rw': 'raed'")));
    assert!(lines[2].starts_with(&format!("mqblk bench: {bad}:8: fio option 'lockfile'")));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Writes a job file into `dir` and returns its path as text.
fn job_file(dir: &std::path::Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn stonewall_starts_a_job_after_the_ones_above_it_finish() {
    let dir = scratch("stonewall");
    // The reader checks what the writer wrote: with the stonewall it reads after all of
    // it is written; without, it races the writer and finds blocks not yet written.
    // The writer is held to 8000 IOPS (a quarter second for its 2048 blocks), so that
    // without the stonewall the reader surely starts while most blocks are unwritten.
    let body = "[global]\nmemory_backed=1\nverify=crc32c\nrandseed=7\nsize=8m\nbs=4k\n\
                [w]\nrw=write\ndo_verify=0\nrate_iops=8000\n[r]\nstonewall\nrw=randread\n";
    let with = job_file(&dir, "with.fio", body);
    let o = mqblk(&["bench", &with]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("verify : 2048 blocks checked, 0 mismatches"),
        "{out}"
    );
    assert!(
        out.contains("r: (groupid=1, jobs=1)"),
        "a stonewall starts a new group:\n{out}"
    );
    let without = job_file(&dir, "without.fio", &body.replace("stonewall\n", ""));
    let o = mqblk(&["bench", &without]);
    assert!(
        !o.status.success(),
        "the reader raced the writer and still found every block"
    );
    // In the simulator: the second job starts when the first ends, plus its startdelay.
    let sim = job_file(
        &dir,
        "sim.fio",
        "[global]\nruntime=1\ntime_based\nrw=randread\n[a]\n[b]\nstonewall\nstartdelay=500ms\n",
    );
    let report = json(&mqblk(&["sim", "--output-format=json", &sim]));
    assert_eq!(
        report["jobs"][1]["elapsed"].as_u64(),
        Some(3),
        "1 s + 0.5 s + 1 s, rounded up"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// fio's `wait_for`: a job starts once every clone of the named job has finished, without
/// waiting for the others of its group (as a stonewall would) or starting a new group.
#[test]
fn wait_for_starts_a_job_after_the_named_one_finishes() {
    let dir = scratch("wait-for");
    // As the stonewall test: the reader checks the writer's blocks only if it waits for
    // it; a third, long job beside them does not hold the reader back.
    let body = "[global]\nmemory_backed=1\nverify=crc32c\nrandseed=7\nsize=8m\nbs=4k\n\
                [w]\nrw=write\ndo_verify=0\nrate_iops=8000\nnumjobs=2\noffset_increment=0\n\
                [long]\nverify=0\nrw=read\nruntime=3\ntime_based\n\
                [r]\nwait_for=w\nrw=randread\n";
    let file = job_file(&dir, "wait.fio", body);
    let o = mqblk(&["bench", "--output-format=json", &file]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report = json(&o);
    let jobs = report["jobs"].as_array().unwrap();
    let r = jobs.iter().find(|j| j["jobname"] == "r").unwrap();
    assert_eq!(r["groupid"].as_u64(), Some(0), "wait_for keeps the group");
    assert_eq!(r["read"]["total_ios"].as_u64(), Some(2048));
    // It started once the writers were done (a quarter second), not after the long job's
    // 3 s (job_start: ms since the epoch).
    let start = |j: &serde_json::Value| j["job_start"].as_u64().unwrap();
    let long = jobs.iter().find(|j| j["jobname"] == "long").unwrap();
    let after = start(r) - start(long);
    assert!(
        (200..2000).contains(&after),
        "the reader started {after} ms in"
    );
    // In the simulator: a chain of three 1 s jobs takes as long as with stonewalls (the
    // run's elapsed time), longer than the three side by side.
    let elapsed = |name: &str, body: &str| {
        let f = job_file(&dir, name, body);
        json(&mqblk(&["sim", "--output-format=json", &f]))["jobs"][0]["elapsed"].as_u64()
    };
    let head = "[global]\nruntime=1\ntime_based\nrw=randread\n[a]\n";
    let chain = elapsed(
        "chain.fio",
        &format!("{head}[b]\nwait_for=a\n[c]\nwait_for=b\n"),
    );
    let walls = elapsed(
        "walls.fio",
        &format!("{head}[b]\nstonewall\n[c]\nstonewall\n"),
    );
    let side = elapsed("side.fio", &format!("{head}[b]\n[c]\n"));
    assert_eq!(chain, walls);
    assert!(chain > side, "{chain:?} {side:?}");
    // A name that is not above the job is refused, in one line.
    let bad = job_file(&dir, "bad.fio", "[a]\nwait_for=b\n[b]\n");
    let o = mqblk(&["bench", &bad]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("wait_for=b: no job of that name above"),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `buffer_pattern` writes fio's bytes (each pattern's first 16 bytes as fio 3.33 wrote them
/// to a file here, without the per-write marks of `scramble_buffers`), and `verify_pattern`
/// is written and checked, with or without a header.
#[test]
fn buffer_and_verify_patterns_write_fios_bytes_and_catch_a_change() {
    let dir = scratch("patterns");
    let data = dir.join("data");
    let f = format!("--filename={}", data.display());
    std::fs::write(dir.join("pat"), "HELLO").unwrap();
    let file_pat = format!("--buffer_pattern='{}'", dir.join("pat").display());
    for (pattern, want) in [
        (
            "--buffer_pattern=0xdeadbeef",
            &b"\xde\xad\xbe\xef\xde\xad\xbe\xef"[..],
        ),
        ("--buffer_pattern=12345", b"90909090"),
        ("--buffer_pattern=\"abc\"", b"abcabcab"),
        ("--buffer_pattern=0xaa\"xy\"", b"\xaaxy\xaaxy\xaaxy"),
        (file_pat.as_str(), b"HELLOHEL"),
    ] {
        let o = mqblk(&[
            "bench",
            "--name=b",
            "--ioengine=psync",
            &f,
            "--size=8k",
            "--rw=write",
            "--scramble_buffers=0",
            pattern,
        ]);
        assert!(o.status.success(), "{pattern}: {}", text(&o.stderr));
        let on_disk = std::fs::read(&data).unwrap();
        assert_eq!(&on_disk[..want.len()], want, "{pattern}");
        assert_eq!(
            on_disk[..4096],
            on_disk[4096..],
            "{pattern}: every block alike"
        );
        std::fs::remove_file(&data).unwrap();
    }
    // verify=pattern: the blocks are the pattern alone; a job reading them back with
    // another pattern finds the first differing byte.
    let write = |extra: &[&str]| {
        let mut a = vec![
            "bench",
            "--name=v",
            "--ioengine=psync",
            &f,
            "--size=64k",
            "--rw=write",
        ];
        a.extend_from_slice(extra);
        mqblk_in(&dir, &a)
    };
    let o = write(&["--verify=pattern", "--verify_pattern=0xabcd"]);
    assert!(
        text(&o.stdout).contains("verify : 16 blocks checked, 0 mismatches"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(std::fs::read(&data).unwrap()[..4], [0xab, 0xcd, 0xab, 0xcd]);
    let o = mqblk(&[
        "bench",
        "--name=v",
        "--ioengine=psync",
        &f,
        "--rw=read",
        "--verify=pattern",
        "--verify_pattern=0xabce",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o.stdout).contains("pattern mismatch at offset 1: read 0xcd, expected 0xce"),
        "{}",
        text(&o.stdout)
    );
    // verify_pattern alone: a header, then the pattern, both checked.
    let o = write(&["--verify_pattern=\"xyz\"", "--bs=8k"]);
    assert!(
        text(&o.stdout).contains("verify : 8 blocks checked, 0 mismatches"),
        "{}",
        text(&o.stdout)
    );
    // A bad pattern is one line naming the option.
    let o = write(&["--buffer_pattern=0xzz"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("buffer_pattern"),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// fio's flow control: the jobs of one flow_id issue in proportion to their weights. fio
/// 3.33 on this machine, `--ioengine=null --rw=randread --runtime=1 --time_based` with
/// `--rate_iops=20000` and `flow=3`/`flow=2` (`flow_sleep=100`): 20001 and 13335 I/Os.
#[test]
fn flow_splits_a_group_by_weight_in_bench_and_sim() {
    let dir = scratch("flow");
    let file = job_file(
        &dir,
        "flow.fio",
        "[global]\nrw=randread\nruntime=1\ntime_based\nrate_iops=20000\nflow_sleep=100\n\
         [a]\nflow=3\n[b]\nflow=2\n[other]\nflow=1\nflow_id=7\n",
    );
    // In real time a busy machine can keep one job's thread off the CPU for hundreds of
    // milliseconds; by fio's rules a job alone in its group runs unthrottled (and its rate
    // then lets it catch up), so a bench run may miss the ratio: up to three runs.
    let mut seen = Vec::new();
    for cmd in ["sim", "bench", "bench", "bench"] {
        let report = json(&mqblk(&[cmd, "--output-format=json", &file]));
        let ios = |i: usize| report["jobs"][i]["read"]["total_ios"].as_u64().unwrap() as f64;
        let ratio = ios(0) / ios(1);
        // Alone in its group, the third runs at its rate.
        assert!(ios(2) > 19_000.0, "{cmd}: other {}", ios(2));
        seen.push(format!("{cmd} {} / {}", ios(0), ios(1)));
        if (1.4..1.6).contains(&ratio) {
            if cmd == "bench" {
                break;
            }
        } else {
            assert_ne!(cmd, "sim", "sim: a/b = {ratio}");
        }
        assert!(seen.len() < 4, "a/b never 1.4..1.6: {seen:?}");
    }
    // In virtual time, unthrottled by rates: 8 to 1.
    let file = job_file(
        &dir,
        "flow8.fio",
        "[global]\nrw=randread\nruntime=1\ntime_based\n[a]\nflow=8\n[b]\nflow=1\n",
    );
    let report = json(&mqblk(&["sim", "--output-format=json", &file]));
    let ios = |i: usize| report["jobs"][i]["read"]["total_ios"].as_u64().unwrap() as f64;
    let ratio = ios(0) / ios(1);
    assert!((7.8..8.2).contains(&ratio), "sim: a/b = {ratio}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// fio's latency-target search: on the SSD model (about 257K IOPS at saturation, so its
/// latency grows with the depth), a 300 µs target met by 99% of the I/Os settles near
/// depth 34; fio's random offsets land on busy dies now and then, so the 99th percentile
/// is about twice the mean there (289 µs against 126 µs at depth 32). The report is the
/// final window at that depth. `max_latency` ends a job with fio's ETIMEDOUT.
#[test]
fn latency_target_finds_the_deepest_queue_within_the_target() {
    let args = [
        "--output-format=json",
        "--device=ssd",
        "--name=l",
        "--rw=randread",
        "--iodepth=64",
        "--latency_target=300us",
        "--latency_window=50ms",
        "--latency_percentile=99",
        "--runtime=10",
        "--time_based",
    ];
    for cmd in ["sim", "bench"] {
        let mut a = vec![cmd];
        a.extend_from_slice(&args);
        // In real time the search reads the machine's latencies: with the suite's other
        // tests busy on both cores a run can settle at depth 1, settle late, or its final
        // window run slower than the one that settled it (CI once saw a mean of 158 us
        // there), so `bench` gets up to three runs (the simulator's one is deterministic).
        let tries = if cmd == "bench" { 3 } else { 1 };
        let mut report = json(&mqblk(&a));
        for _ in 1..tries {
            let j = &report["jobs"][0];
            let d = j["latency_depth"].as_u64().unwrap();
            let mean = j["read"]["lat_ns"]["mean"].as_f64().unwrap();
            let ms = j["job_runtime"].as_u64().unwrap();
            if (28..=44).contains(&d) && mean < 300_000.0 && ms <= 1000 {
                break;
            }
            eprintln!(
                "{cmd}: depth {d}, mean {mean:.0} ns, settled after {ms} ms on a busy machine; running again"
            );
            report = json(&mqblk(&a));
        }
        let j = &report["jobs"][0];
        let depth = j["latency_depth"].as_u64().unwrap();
        // The simulator settles where the model says; in real time a third busy run in a row
        // may still settle shallower (CI once saw 27, 14 and 21 while the suite's other
        // tests held both cores), but a search that went nowhere stays at 1 and one that
        // overshot goes past 44.
        let depths = if cmd == "sim" { 28..=44 } else { 8..=44 };
        assert!(depths.contains(&depth), "{cmd}: depth {depth}");
        assert_eq!(j["latency_target"].as_u64(), Some(300), "{cmd}");
        assert_eq!(j["latency_window"].as_u64(), Some(50_000), "{cmd}");
        assert_eq!(j["latency_percentile"].as_f64(), Some(99.0), "{cmd}");
        // The report covers the final window (in real time a window there may miss and
        // the search move again before it settles), found well before the 10 s runtime.
        let runtime = j["job_runtime"].as_u64().unwrap();
        if cmd == "sim" {
            assert_eq!(runtime, 100);
        }
        assert!((50..=1000).contains(&runtime), "{cmd}: {runtime} ms");
        let mean = j["read"]["lat_ns"]["mean"].as_f64().unwrap();
        assert!(mean < 300_000.0, "{cmd}: mean {mean} ns");
    }
    // A device the target is far beyond: the job ends with ETIMEDOUT at depth 1.
    let o = mqblk(&[
        "sim",
        "--output-format=json",
        "--device=ssd",
        "--name=m",
        "--rw=randread",
        "--iodepth=8",
        "--max_latency=20us",
        "--runtime=1",
        "--time_based",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["jobs"][0]["error"].as_i64(), Some(110));
}

#[test]
fn io_counts_sizes_and_think_time_follow_the_job_file_in_bench_and_sim() {
    let dir = scratch("counts");
    let file = job_file(
        &dir,
        "counts.fio",
        "[global]\nsize=16m\n\
         [n]\nrw=randread\nnumber_ios=1000\n\
         [io]\nrw=read\nio_size=32m\n\
         [loops]\nrw=write\nsize=1m\nloops=3\n\
         [split]\nrw=randread\nbssplit=4k/60:64k/40\nnumber_ios=20000\nnorandommap\n\
         [range]\nrw=read\nbsrange=4k-16k\n",
    );
    for cmd in ["bench", "sim"] {
        let report = json(&mqblk(&[cmd, "--output-format=json", &file]));
        let jobs = report["jobs"].as_array().unwrap();
        let ios = |i: usize, d: &str| jobs[i][d]["total_ios"].as_u64().unwrap();
        let bytes = |i: usize, d: &str| jobs[i][d]["io_bytes"].as_u64().unwrap();
        assert_eq!(ios(0, "read"), 1000, "{cmd}: number_ios");
        assert_eq!(
            bytes(1, "read"),
            32 << 20,
            "{cmd}: io_size twice the region"
        );
        assert_eq!(bytes(2, "write"), 3 << 20, "{cmd}: loops");
        let mean = bytes(3, "read") as f64 / ios(3, "read") as f64;
        // 60% 4 KiB and 40% 64 KiB: 28.6 KiB on average (without the random map, which
        // cuts I/Os short at blocks already covered, as fio's does).
        assert!(
            (mean / 1024.0 - 28.6).abs() < 1.5,
            "{cmd}: bssplit mean {mean}"
        );
        assert_eq!(bytes(4, "read"), 16 << 20, "{cmd}: bsrange covers size");
        let mean = bytes(4, "read") as f64 / ios(4, "read") as f64;
        assert!(
            (mean / 1024.0 - 10.0).abs() < 1.0,
            "{cmd}: bsrange mean {mean}"
        );
    }
    // A think time of 1 ms after every I/O issued caps a job below 1000 IOPS whatever the
    // depth (counting completed I/Os, fio's default, the first burst fills the depth).
    let think = job_file(
        &dir,
        "think.fio",
        "[t]\nrw=randread\niodepth=16\nthinktime=1ms\nthinktime_blocks_type=issue\nruntime=1\ntime_based\n",
    );
    for cmd in ["bench", "sim"] {
        let report = json(&mqblk(&[cmd, "--output-format=json", &think]));
        let iops = report["jobs"][0]["read"]["iops"].as_f64().unwrap();
        assert!(
            (300.0..1000.0).contains(&iops),
            "{cmd}: {iops} IOPS with 1 ms think time"
        );
        assert_eq!(
            share_at_depth_1(&report),
            100.0,
            "{cmd}: one I/O between think times"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_ends_the_jobs_and_prints_the_results_so_far() {
    let child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args([
            "bench",
            "--output-format=json",
            "--name=long",
            "--rw=randread",
            "--runtime=60",
            "--time_based",
            "--irqmode=timer",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let t = std::time::Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert!(t.elapsed().as_secs() < 10, "took {:?} to stop", t.elapsed());
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("interrupted; results so far follow"));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON report");
    let ios = report["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    assert!(
        ios > 0,
        "the report holds the I/O done before the interrupt"
    );
}

/// A job that a stop cannot end (a request lost by the device: `timeout_nth`, the
/// request timeout 30 s away) still running 5 s after Ctrl-C gets the queue's state printed,
/// which shows the request the driver holds; a second Ctrl-C exits at once.
#[test]
fn a_job_stuck_after_ctrl_c_gets_the_queue_printed_and_a_second_one_exits() {
    let dir = scratch("stuck");
    let err_path = dir.join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args([
            "bench",
            "--name=stuck",
            "--rw=randread",
            "--size=1m",
            "--runtime=60",
            "--time_based",
            "--timeout_nth=50",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let signal = |pid: u32| {
        let ok = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    let t = std::time::Instant::now();
    signal(child.id());
    let said = loop {
        let e = std::fs::read_to_string(&err_path).unwrap_or_default();
        if e.contains("still running 5 s after the interrupt") || t.elapsed().as_secs() > 20 {
            break e;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        said.contains("1 of 1 jobs still running 5 s after the interrupt"),
        "{said}"
    );
    assert!(
        said.contains("issued 50 direct 0 completed 49"),
        "the lost request is the driver's: {said}"
    );
    assert!(t.elapsed().as_secs_f64() >= 4.9, "{:?}", t.elapsed());
    signal(child.id());
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed().as_secs() > 5 {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(130),
        "a second Ctrl-C exits"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fio_logs_and_plots_are_written_by_bench_and_sim() {
    let dir = scratch("logs");
    for cmd in ["bench", "sim"] {
        let prefix = dir.join(cmd).display().to_string();
        let plots = dir.join(format!("{cmd}-plots"));
        let plot = format!("--plot={}", plots.display());
        let lat = format!("--write_lat_log={prefix}");
        let bw = format!("--write_bw_log={prefix}");
        let iops = format!("--write_iops_log={prefix}");
        let o = mqblk(&[
            cmd,
            "--output-format=json",
            &plot,
            "--irqmode=timer",
            "--name=avg",
            "--rw=randread",
            "--runtime=1",
            "--time_based",
            &lat,
            &bw,
            &iops,
            "--log_avg_msec=250",
            "--name=each",
            "--rw=write",
            "--size=1m",
            "--log_offset=1",
            &lat,
        ]);
        let report = json(&o);
        // Job 1 averages over 250 ms windows: four lines per log, fio's five fields.
        for kind in ["lat", "clat", "slat", "bw", "iops"] {
            let text = std::fs::read_to_string(format!("{prefix}_{kind}.1.log")).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert!((3..=5).contains(&lines.len()), "{cmd} {kind}: {text}");
            let fields: Vec<&str> = lines[0].split(", ").collect();
            assert_eq!(fields.len(), 5, "{cmd} {kind}: {}", lines[0]);
            assert_eq!(fields[0], "250");
            assert_eq!(&fields[2..], ["0", "0", "0"]);
        }
        // The windows' median against the run's mean (one window alone may differ when
        // the machine is busy, this being a shared 2-core VM, and the last, cut short at
        // the end, carries few I/Os over a short time).
        let iops_lines = std::fs::read_to_string(format!("{prefix}_iops.1.log")).unwrap();
        let mut values: Vec<f64> = iops_lines
            .lines()
            .map(|l| l.split(", ").nth(1).unwrap().parse().unwrap())
            .collect();
        values.sort_by(f64::total_cmp);
        let logged = values[values.len() / 2];
        let reported = report["jobs"][0]["read"]["iops"].as_f64().unwrap();
        assert!(
            (logged / reported - 1.0).abs() < 0.2,
            "{cmd}: logged {logged} vs {reported} IOPS"
        );
        // Job 2 logs every I/O: 256 writes of 4 KiB, with their offsets (`log_offset`)
        // before the priority.
        let text = std::fs::read_to_string(format!("{prefix}_clat.2.log")).unwrap();
        assert_eq!(text.lines().count(), 256, "{cmd}");
        assert!(text.lines().all(|l| l.split(", ").nth(2) == Some("1")));
        assert!(
            text.lines().any(|l| l.ends_with(", 1, 4096, 1044480, 0")),
            "{cmd}: {text}"
        );
        for job in ["avg.1", "each.2"] {
            for chart in ["iops", "bw", "lat", "cdf"] {
                let svg =
                    std::fs::read_to_string(plots.join(format!("{job}.{chart}.svg"))).unwrap();
                assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
                assert!(svg.contains("<polyline"), "{cmd} {job} {chart}: no series");
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gtod_reduce_and_disable_options_leave_their_measurements_out() {
    let o = mqblk(&[
        "bench",
        "--name=g",
        "--gtod_reduce=1",
        "--rw=randread",
        "--size=4m",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("read: IOPS="), "{out}");
    for gone in [
        "slat (",
        "clat (",
        " lat (",
        "clat percentiles",
        "bw (",
        "iops        :",
    ] {
        assert!(
            !out.contains(gone),
            "'{gone}' reported with gtod_reduce:\n{out}"
        );
    }
    let report = json(&mqblk(&[
        "sim",
        "--output-format=json",
        "--name=d",
        "--disable_clat",
        "--rw=randread",
        "--size=4m",
    ]));
    let read = &report["jobs"][0]["read"];
    assert_eq!(read["clat_ns"]["N"].as_u64(), Some(0), "{read}");
    assert_eq!(read["slat_ns"]["N"].as_u64(), Some(1024), "{read}");
}

#[test]
fn io_uring_tuning_options_and_a_shared_cpu_set_run() {
    let dir = scratch("tuning");
    let f = format!("--filename={}", dir.join("data").display());
    let o = mqblk(&[
        "bench",
        "--ioengine=io_uring",
        &f,
        "--size=4m",
        "--sqthread_poll=1",
        "--cpus_allowed=0-1",
        "--cpus_allowed_policy=shared",
        "--numjobs=2",
        "--name=t",
        "--rw=randread",
        "--iodepth=8",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("t: (groupid=0, jobs=1)"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trim_patterns_discard_through_the_block_layer() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch("trim");
    let data = dir.join("data");
    let f = format!("--filename={}", data.display());
    // Lay the file out with data (a read job), then trim its first half.
    let o = mqblk(&[
        "bench",
        "--ioengine=libaio",
        &f,
        "--size=8m",
        "--name=fill",
        "--rw=read",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let before = std::fs::metadata(&data).unwrap().blocks() * 512;
    let report = json(&mqblk(&[
        "bench",
        "--output-format=json",
        "--ioengine=libaio",
        &f,
        "--name=trim",
        "--rw=trim",
        "--bs=1m",
        "--size=4m",
    ]));
    let trim = &report["jobs"][0]["trim"];
    assert_eq!(trim["total_ios"].as_u64(), Some(4), "{trim}");
    assert_eq!(trim["io_bytes"].as_u64(), Some(4 << 20));
    let after = std::fs::metadata(&data).unwrap().blocks() * 512;
    assert!(
        before - after >= 4 << 20,
        "trimming 4 MiB of a laid-out file freed {} bytes",
        before - after
    );
    // trimwrite: every block trimmed, then written, in bench and sim alike.
    for cmd in ["bench", "sim"] {
        let report = json(&mqblk(&[
            cmd,
            "--output-format=json",
            "--name=tw",
            "--rw=randtrimwrite",
            "--bs=64k",
            "--size=4m",
        ]));
        let job = &report["jobs"][0];
        assert_eq!(job["trim"]["total_ios"].as_u64(), Some(64), "{cmd}");
        assert_eq!(job["write"]["total_ios"].as_u64(), Some(64), "{cmd}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn directory_holds_the_jobs_file_as_fio_names_it() {
    let dir = scratch("directory");
    let d = format!("--directory={}", dir.display());
    let o = mqblk(&[
        "bench",
        "--ioengine=libaio",
        &d,
        "--size=4m",
        "--name=dj",
        "--rw=write",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::metadata(dir.join("dj.0.0")).unwrap().len(),
        4 << 20
    );
    let o = mqblk(&[
        "bench",
        "--ioengine=libaio",
        &d,
        "--filename=named",
        "--size=1m",
        "--name=n",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(dir.join("named").exists());
    let o = mqblk(&[
        "bench",
        "--ioengine=libaio",
        &d,
        "--size=1m",
        "--numjobs=2",
        "--name=set",
    ]);
    // fio makes a file per clone in a directory: set.0.0 and set.1.0.
    assert!(o.status.success(), "{}", text(&o.stderr));
    for clone in ["set.0.0", "set.1.0"] {
        assert_eq!(std::fs::metadata(dir.join(clone)).unwrap().len(), 1 << 20);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_verify_algorithm_writes_checks_and_catches_a_changed_block() {
    let dir = scratch("verify");
    let data = dir.join("data");
    let f = format!("--filename={}", data.display());
    for algo in [
        "md5", "sha1", "sha256", "sha512", "crc32", "crc64", "crc16", "crc7", "xxhash", "meta",
    ] {
        let v = format!("--verify={algo}");
        let o = mqblk_in(
            &dir,
            &[
                "bench",
                "--ioengine=libaio",
                &f,
                "--direct=1",
                "--size=4m",
                &v,
                "--name=w",
                "--rw=randwrite",
                "--bs=8k",
                "--iodepth=8",
            ],
        );
        let out = text(&o.stdout);
        assert!(o.status.success(), "{algo}: {out}{}", text(&o.stderr));
        assert!(
            out.contains("verify : 512 blocks checked, 0 mismatches"),
            "{algo}: {out}"
        );
    }
    // A block changed behind the job's back is caught when it is read back.
    let v = "--verify=sha256";
    let write = [
        "bench",
        "--ioengine=libaio",
        &f,
        "--size=4m",
        v,
        "--name=w",
        "--rw=write",
        "--bs=8k",
        "--do_verify=0",
    ];
    assert!(mqblk_in(&dir, &write).status.success());
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
        file.write_all_at(b"changed", 8192 * 100 + 4000).unwrap();
    }
    let o = mqblk(&[
        "bench",
        "--ioengine=libaio",
        &f,
        v,
        "--name=r",
        "--rw=read",
        "--bs=8k",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("verify: sha256 mismatch at offset 819200"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `unlink` removes the job's files when the run ends, but only those the run made: a file
/// that was there before (someone's data) stays, unlike fio's.
#[test]
fn unlink_removes_only_the_files_the_run_made() {
    let dir = scratch("unlink");
    let kept = dir.join("keep.0.0");
    std::fs::write(&kept, vec![7u8; 1 << 20]).unwrap();
    let d = format!("--directory={}", dir.display());
    let o = mqblk(&[
        "bench",
        &d,
        "--ioengine=psync",
        "--rw=write",
        "--bs=64k",
        "--size=1m",
        "--unlink=1",
        "--name=gone",
        "--numjobs=2",
        "--name=keep",
        "--output=/dev/null",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["keep.0.0"],
        "gone.0.0 and gone.1.0 removed, keep.0.0 kept"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The docs' fio option table is the one `mqblk bench --fio-options` prints from the option
/// table itself, so it says what this build does with each option: an implemented one
/// parses, one accepted without effect is noted, a refused one fails with its hint.
#[test]
fn the_fio_option_table_in_the_docs_is_what_mqblk_does() {
    let o = mqblk(&["bench", "--fio-options"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/fio-options.md"),
    )
    .unwrap();
    assert!(
        doc == table,
        "docs/fio-options.md is not current: run `mqblk bench --fio-options > docs/fio-options.md`"
    );
    for (option, value, row) in [
        ("buffer_compress_percentage", "50", "implemented"),
        ("nice", "5", "accepted, no effect: "),
        ("ss", "iops:1%", "implemented"),
        ("write_hist_log", "h", "implemented"),
        ("replay_no_stall", "1", "implemented"),
        ("trim_backlog", "4", "refused: trimming written blocks"),
    ] {
        assert!(
            table.contains(&format!("| `{option}` | {row}")),
            "{option}: {table}"
        );
        let arg = format!("--{option}={value}");
        let o = mqblk(&["bench", "--parse-only", "--name=x", "--ioengine=null", &arg]);
        let err = text(&o.stderr);
        match row {
            "implemented" => assert!(o.status.success(), "{option}: {err}"),
            r if r.starts_with("accepted") => {
                assert!(
                    o.status.success() && err.contains("accepted, no effect"),
                    "{err}"
                )
            }
            _ => assert_eq!(o.status.code(), Some(2), "{option}: {err}"),
        }
    }
}

/// A loop device over a scratch file with an ext4 file system mounted from it, taken down
/// when dropped.
struct MountedLoop {
    dev: String,
    mnt: PathBuf,
    dir: PathBuf,
}

impl MountedLoop {
    fn new(test: &str) -> MountedLoop {
        let dir = scratch(test);
        let img = dir.join("img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(32 << 20)
            .unwrap();
        let dev = mqblk_testkit::attach_loop(&img).unwrap();
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let made = MountedLoop { dev, mnt, dir };
        mqblk_testkit::mkfs_ext4_and_mount(&made.dev, &made.mnt).unwrap();
        made
    }
}

impl Drop for MountedLoop {
    fn drop(&mut self) {
        mqblk_testkit::umount(&self.mnt);
        mqblk_testkit::detach_loop(&self.dev);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// fio's `allow_mounted_write`: a job that would write a mounted block device is refused
/// before any I/O, in one line naming the mount, unless the job allows it; reading it is
/// fine.
#[test]
fn a_write_to_a_mounted_device_is_refused_unless_allowed() {
    let test = "a_write_to_a_mounted_device_is_refused_unless_allowed";
    if !mqblk_testkit::need_root_and_tools(test, &["losetup", "mkfs.ext4", "mount"]) {
        return;
    }
    let lo = MountedLoop::new("mounted");
    let file = format!("--filename={}", lo.dev);
    let job = [
        "bench",
        "--name=w",
        &file,
        "--rw=write",
        "--bs=4k",
        "--size=64k",
    ];
    let o = mqblk(&job);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{} is a mounted block device", lo.dev)),
        "{err}"
    );
    assert!(err.contains("allow_mounted_write=1"), "{err}");
    // Allowed, it runs (over the scratch file system, which nothing else uses).
    let o = mqblk(&[&job[..], &["--allow_mounted_write=1"]].concat());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let read = [
        "bench",
        "--name=r",
        &file,
        "--rw=read",
        "--bs=4k",
        "--size=64k",
    ];
    let o = mqblk(&read);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Character devices as fio uses them (its `steadystate.fio` writes `/dev/null` and reads
/// `/dev/zero`): sized by the job, read and written through mqblk's queues; without a
/// size, one line.
#[test]
fn a_character_device_is_read_and_written_at_the_jobs_size() {
    let o = mqblk(&[
        "bench",
        "--name=w",
        "--filename=/dev/null",
        "--rw=write",
        "--bs=128k",
        "--size=8m",
        "--output-format=json",
    ]);
    assert_eq!(json(&o)["jobs"][0]["write"]["io_bytes"], 8 << 20);
    let o = mqblk(&[
        "bench",
        "--name=r",
        "--filename=/dev/zero",
        "--rw=randread",
        "--bs=4k",
        "--size=1m",
        "--output-format=json",
    ]);
    assert_eq!(json(&o)["jobs"][0]["read"]["io_bytes"], 1 << 20);
    let o = mqblk(&["bench", "--name=r", "--filename=/dev/zero", "--rw=read"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--filename=/dev/zero: job 'r': filename=/dev/zero: is a character device, which has no size (give size=)"),
        "{err}"
    );
}

/// fio's `nowait`: reads carry `REQ_NOWAIT`, so on a device with 4 tags a depth-32 job's
/// reads that find no free tag fail with EAGAIN instead of waiting, ending the job with
/// fio's error 11, in bench and in the simulator alike; without it none fails, and with
/// `ignore_error=EAGAIN` the job reads on, counting them.
#[test]
fn nowait_fails_a_read_that_finds_no_tag_with_eagain() {
    let job = [
        "--name=x",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--size=64m",
        "--hw_queue_depth=4",
        "--output-format=json",
    ];
    for cmd in ["bench", "sim"] {
        let engine: &[&str] = if cmd == "bench" {
            &["--ioengine=null", "--irqmode=2", "--completion_nsec=20000"]
        } else {
            &[]
        };
        let run = |extra: &[&str]| -> serde_json::Value {
            let o = mqblk(&[&[cmd][..], &job, engine, extra].concat());
            let out = text(&o.stdout);
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{cmd} {extra:?}: {e}: {out}"))
        };
        let v = run(&[]);
        assert_eq!(v["jobs"][0]["error"], 0, "{cmd}");
        assert_eq!(v["jobs"][0]["read"]["total_ios"], 16384, "{cmd}");
        let v = run(&["--nowait=1"]);
        assert_eq!(v["jobs"][0]["error"], 11, "{cmd}: EAGAIN");
        assert!(
            v["jobs"][0]["read"]["total_ios"].as_u64().unwrap() < 64,
            "{cmd}"
        );
        let v = run(&[
            "--nowait=1",
            "--continue_on_error=read",
            "--ignore_error=EAGAIN",
        ]);
        let errs = v["jobs"][0]["total_err"].as_u64().unwrap();
        let ok = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
        assert!(
            errs > 0 && ok > 0 && ok + errs >= 16384,
            "{cmd}: {ok} read, {errs} failed"
        );
    }
}

/// A range given to `bs` is refused in one line that names `bsrange`, and `bsrange` takes it.
#[test]
fn a_block_size_range_given_to_bs_points_at_bsrange() {
    let o = mqblk(&["sim", "--rw=randread", "--bs=4k-64k", "--name=x"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("option 'bs': '4k-64k' is not supported: a range of block sizes is bsrange's (bsrange=MIN-MAX)"),
        "{err}"
    );
    let o = mqblk(&[
        "sim",
        "--rw=randread",
        "--bsrange=4k-64k",
        "--name=x",
        "--runtime=1ms",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}
