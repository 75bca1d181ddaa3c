//! `mqblk bench` as a user runs it: the real binary, its output and its errors.

mod common;
use common::{mqblk, mqblk_in, text};
use std::process::Command;

fn job_file(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mqblk-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn randread_4k_qd32_prints_fio_like_text() {
    let o = mqblk(&[
        "bench",
        "--runtime=300ms",
        "--name=rr",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--time_based",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}{}", out, text(&o.stderr));
    for needle in [
        "rr: (groupid=0, jobs=1): err= 0",
        "read: IOPS=",
        "clat percentiles (nsec)",
        "99.00th=[",
        "cpu          :",
        "hctx0  :",
        "Run status group 0",
    ] {
        assert!(out.contains(needle), "missing '{needle}' in:\n{out}");
    }
}

#[test]
fn json_output_has_fio_keys() {
    let o = mqblk(&[
        "bench",
        "--output-format=json",
        "--runtime=300ms",
        "--name=rr",
        "--rw=randread",
        "--iodepth=32",
        "--time_based",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("output parses as JSON");
    let job = &v["jobs"][0];
    assert_eq!(job["jobname"], "rr");
    let read = &job["read"];
    assert!(read["iops"].as_f64().unwrap() > 1000.0, "{read}");
    assert!(read["bw"].as_u64().unwrap() > 0);
    assert!(read["clat_ns"]["percentile"]["99.000000"].is_u64());
    assert!(read["lat_ns"]["mean"].is_f64());
    assert!(read["total_ios"].as_u64().unwrap() > 0);
    assert_eq!(job["write"]["total_ios"], 0);
    // No ioscheduler given: the kernel's default for one hardware queue
    // (`elevator_set_default`), as null_blk gets.
    assert_eq!(v["mqblk_queue"]["ioscheduler"], "mq-deadline");
    let raw = text(&o.stdout);
    assert!(
        raw.contains("\"99.000000\""),
        "percentile keys use fio's %f form"
    );
}

#[test]
fn a_job_file_with_supported_options_runs_unchanged() {
    let f = job_file(
        "ok.fio",
        "; a comment\n[global]\nioscheduler=mq-deadline\nsched.fifo_batch=8\nruntime=200ms\ntime_based\nnr_hw_queues=2\n\
         group_reporting\n\n[readers]\nrw=randread\nbs=4k\niodepth=16\nnumjobs=2\nprioclass=2\nprio=4\n\n\
         [writer]\nrw=write\nbs=64k\niodepth=4\nrate_iops=500\n",
    );
    let o = mqblk(&["bench", f.to_str().unwrap(), "--dump-sched"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}{}", out, text(&o.stderr));
    assert!(
        out.contains("mq-deadline: batching"),
        "dump-sched shows the scheduler state:\n{out}"
    );
    assert!(out.contains("WRITE: bw="), "{out}");
}

#[test]
fn bad_input_gets_one_line_naming_where_and_what() {
    let cases: &[(&str, &str)] = &[
        (
            "[global]\nrw=randread\n[a]\nrwmixred=3\n",
            "bad1.fio:4: unknown option 'rwmixred' (did you mean 'rwmixread'?)",
        ),
        (
            "[a]\nthis is not an option line\n",
            "bad2.fio:2: malformed line",
        ),
        ("[a]\niodepth=0\n", "bad3.fio:2: option 'iodepth'"),
        (
            "[a]\nioscheduler=mq-deadline\nsched.read_expire=-5\n",
            "read_expire",
        ),
        (
            "[global]\nioscheduler=bfq\n[a]\ncgroup=db\ncgroup_weight=300\n[b]\ncgroup=/db/\ncgroup_weight=100\n",
            "job 'b': cgroup '/db/': weight 100 conflicts with the weight 300 set before",
        ),
        (
            "[a]\ncgroup=x\ncgroup_weight=1001\n",
            "bad6.fio:3: option 'cgroup_weight'",
        ),
    ];
    for (i, (body, want)) in cases.iter().enumerate() {
        let f = job_file(&format!("bad{}.fio", i + 1), body);
        let o = mqblk(&["bench", f.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "case {i}: {err}");
        assert!(err.contains(want), "case {i}: expected '{want}' in: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "case {i}: one line, got: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = mqblk(&[
        "bench",
        "--ioscheduler=mq-deadline",
        "--sched.fifo_batch=-1",
        "--name=x",
    ]);
    let err = text(&o.stderr);
    assert!(
        err.contains("fifo_batch") && err.contains("out of range 0..="),
        "{err}"
    );
}

#[test]
fn garbage_never_panics() {
    let inputs = [
        "[",
        "]",
        "[a]\n=",
        "[a]\nbs=",
        "[a]\nbs=4q",
        "include /nonexistent\n[a]",
        "[a]\nsize=99999999999999999999999",
        "\u{0}\u{ff}[a]\nrw=\n",
    ];
    for (i, body) in inputs.iter().enumerate() {
        let f = job_file(&format!("garbage{i}.fio"), body);
        let o = mqblk(&["bench", f.to_str().unwrap(), "--runtime=50ms"]);
        let err = text(&o.stderr);
        assert!(!err.contains("panicked"), "input {i} {body:?}: {err}");
    }
    for args in [
        &["bench", "--bs"][..],
        &["bench", "--rw=sideways"],
        &["bench", "--preset=nope"],
        &["frobnicate"],
    ] {
        let o = mqblk(args);
        assert!(!o.status.success(), "{args:?}");
        assert!(!text(&o.stderr).contains("panicked"), "{args:?}");
    }
}

#[test]
fn verify_on_memory_backed_null_reports_no_mismatch() {
    let o = mqblk(&[
        "bench",
        "--memory_backed",
        "--name=v",
        "--rw=randwrite",
        "--bs=4k",
        "--size=8m",
        "--verify=crc32c",
        "--iodepth=16",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("verify : 2048 blocks checked, 0 mismatches"),
        "{out}"
    );
}

/// `verify_offset` moves each header into its block and the blocks still check out; an
/// offset that would overlap the header, or leave it no room, is refused naming the option.
#[test]
fn verify_offset_moves_the_header_and_bad_offsets_are_refused() {
    let o = mqblk(&[
        "bench",
        "--memory_backed",
        "--name=v",
        "--rw=randwrite",
        "--bs=8k",
        "--size=4m",
        "--verify=crc32c",
        "--verify_offset=4k",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("verify : 512 blocks checked, 0 mismatches"),
        "{out}"
    );
    for bad in ["--verify_offset=50", "--verify_offset=8150"] {
        let o = mqblk(&[
            "bench",
            "--name=v",
            "--rw=write",
            "--bs=8k",
            "--verify=md5",
            bad,
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            text(&o.stderr).contains("verify_offset="),
            "{bad}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn fault_injection_run_completes_and_reports_errors() {
    let o = mqblk(&[
        "bench",
        "--fail_nth=50",
        "--requeue_nth=7",
        "--name=f",
        "--rw=randread",
        "--size=4m",
        "--iodepth=8",
    ]);
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "I/O errors make the run fail: {err}"
    );
    assert!(err.contains("I/O error"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn uring_on_a_real_file_writes_verifies_and_reads_back() {
    let dir = std::env::temp_dir().join(format!("mqblk-uring-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data");
    let f = format!("--filename={}", file.display());
    let o = mqblk_in(
        &dir,
        &[
            "bench",
            "--ioengine=io_uring",
            &f,
            "--size=8m",
            "--name=w",
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=16",
            "--verify=crc32c",
            "--fsync=32",
            "--end_fsync",
        ],
    );
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("verify : 2048 blocks checked, 0 mismatches"),
        "{out}"
    );
    assert!(
        out.contains("sync (usec)") || out.contains("sync (nsec)") || out.contains("sync (msec)"),
        "fsync latency reported:\n{out}"
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        8 << 20,
        "the file was created at size="
    );
    // A second run reads the same blocks back and checks them, with O_DIRECT.
    let o = mqblk(&[
        "bench",
        "--driver=uring",
        &f,
        "--direct=1",
        "--name=r",
        "--rw=read",
        "--bs=4k",
        "--iodepth=16",
        "--verify=crc32c",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("verify : 2048 blocks checked, 0 mismatches"),
        "{out}"
    );
    let o = mqblk(&["bench", "--driver=uring", "--name=x"]);
    assert!(
        text(&o.stderr).contains("needs filename="),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_scheduler_runs_on_the_uring_driver() {
    let dir = std::env::temp_dir().join(format!("mqblk-uring-sched-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = format!("--filename={}", dir.join("data").display());
    for sched in ["none", "mq-deadline", "kyber"] {
        let s = format!("--ioscheduler={sched}");
        let o = mqblk(&[
            "bench",
            "--driver=uring",
            &f,
            "--size=4m",
            &s,
            "--nr_hw_queues=2",
            "--numjobs=2",
            "--name=m",
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=8",
            "--verify=crc32c",
            "--do_verify=0",
            // No verify state left in the test's working directory.
            "--verify_state_save=0",
        ]);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{sched}: {out}{}", text(&o.stderr));
        assert!(
            out.contains("READ: bw=") && out.contains("WRITE: bw="),
            "{sched}: {out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `virtqueue_size=N`: the uring driver holds requests back while a virtio ring without
/// indirect descriptors would be full, so they wait (and merge) in the scheduler, as in the
/// kernel over such a disk; `0` turns it off and nothing merges. A bad size is one line.
#[test]
fn a_full_virtqueue_holds_writes_back_in_the_scheduler_where_they_merge() {
    let dir = std::env::temp_dir().join(format!("mqblk-virtqueue-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = format!("--filename={}", dir.join("data").display());
    let run = |vq: &str| {
        let o = mqblk(&[
            "bench",
            "--ioengine=io_uring",
            &f,
            "--size=16m",
            "--name=w",
            "--rw=write",
            "--bs=16k",
            "--iodepth=16",
            "--ioscheduler=mq-deadline",
            vq,
            "--output-format=json",
        ]);
        assert!(o.status.success(), "{vq}: {}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let (job, queue) = (&v["jobs"][0], &v["mqblk_queue"]);
        (
            job["write"]["total_ios"].as_u64().unwrap(),
            queue["hctx"][0]["queued"].as_u64().unwrap(),
            queue["hctx"][0]["busy"].as_u64().unwrap(),
            queue["sched"]["be"]["merged"].as_u64().unwrap(),
        )
    };
    // 16 KiB takes 4 + 2 descriptors: three requests fill a ring of 20, and a request holds
    // at most 18 pages.
    let (ios, requests, busy, merged) = run("--virtqueue_size=20");
    assert_eq!(ios, 1024);
    assert!(busy > 0, "the ring was never full");
    assert!(
        merged > 0 && requests < ios,
        "{requests} requests for {ios} writes, {merged} merges"
    );
    let (ios, requests, busy, merged) = run("--virtqueue_size=0");
    assert_eq!((ios, requests, busy, merged), (1024, 1024, 0, 0));
    let o = mqblk(&["bench", "--ioengine=io_uring", &f, "--virtqueue_size=2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("'virtqueue_size': value '2' out of range"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn completions_reaped_by_hctx_workers_reach_their_submitters() {
    // softirq: the null device completes only when a hardware queue is polled; with
    // hctx_workers the per-hctx threads poll and route each bio back to its submitter.
    let o = mqblk(&[
        "bench",
        "--irqmode=softirq",
        "--hctx_workers",
        "--memory_backed",
        "--nr_hw_queues=2",
        "--numjobs=2",
        "--name=w",
        "--rw=randwrite",
        "--bs=4k",
        "--size=4m",
        "--iodepth=16",
        "--verify=crc32c",
        "--iodepth_batch_complete_max=4",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert_eq!(
        out.matches("verify : 1024 blocks checked, 0 mismatches")
            .count(),
        2,
        "{out}"
    );
}

#[test]
fn rate_iops_caps_the_rate_even_when_the_device_is_idle() {
    let o = mqblk(&[
        "bench",
        "--output-format=json",
        "--rate_iops=2000",
        "--runtime=500ms",
        "--time_based",
        "--name=r",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ios = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    // 2000/s for 0.5 s: never more than the budget (+1 for the first I/O), and not starved.
    assert!(ios <= 1001, "rate limit exceeded: {ios} I/Os");
    assert!(ios >= 500, "rate limiter starved the job: {ios} I/Os");
}

#[test]
fn progress_line_shows_live_iops_when_asked() {
    let o = mqblk(&[
        "bench",
        "--progress",
        "--runtime=1500ms",
        "--time_based",
        "--name=p",
    ]);
    assert!(o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("[1 jobs]") && err.contains("IOPS") && err.contains("eta"),
        "{err:?}"
    );
    let o = mqblk(&[
        "bench",
        "--no-progress",
        "--runtime=1200ms",
        "--time_based",
        "--name=p",
    ]);
    assert!(
        !text(&o.stderr).contains("IOPS"),
        "no progress line unless asked or on a terminal"
    );
}

/// The JSON report of a 4 KiB `--fixedbufs=1` job with O_DIRECT through io_uring on a
/// scratch file (`mqblk-TAG-PID/dev.img`, removed afterwards), plus `args`; the run must
/// succeed.
fn fixedbufs_json(tag: &str, args: &[&str]) -> serde_json::Value {
    let dir = std::env::temp_dir().join(format!("mqblk-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let filename = format!("--filename={}", dir.join("dev.img").display());
    let mut all = vec![
        "bench",
        "--ioengine=io_uring",
        &filename,
        "--direct=1",
        "--fixedbufs=1",
        "--bs=4k",
    ];
    all.extend_from_slice(args);
    all.extend(["--name=fb", "--output-format=json", "--verify_state_save=0"]);
    let o = mqblk(&all);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn fixedbufs_on_a_real_file_verifies_and_uses_registered_buffers() {
    let v = fixedbufs_json(
        "fixedbufs",
        &[
            "--size=16m",
            "--rw=randrw",
            "--iodepth=16",
            "--verify=crc32c",
        ],
    );
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert!(job["verified_blocks"].as_u64().unwrap() > 1000, "{job}");
    assert_eq!(job["verify_errors"], 0);
    let fixed = job["uring_fixed_ios"].as_u64().unwrap();
    assert!(
        fixed >= 4096,
        "every I/O of the job from registered buffers: {job}"
    );
    assert_eq!(job["uring_plain_ios"], 0);
}

/// Two jobs on one hardware queue each get a ring of their own, and each ring counts the
/// registered-buffer I/O issued on it: the job's figure is the sum over every ring.
#[test]
fn fixedbufs_counts_every_ring_of_a_shared_hardware_queue() {
    let v = fixedbufs_json(
        "fixedbufs2",
        &[
            "--size=8m",
            "--rw=randwrite",
            "--iodepth=8",
            "--numjobs=2",
            "--nr_hw_queues=1",
        ],
    );
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{v}");
    let ios: u64 = jobs
        .iter()
        .map(|j| j["write"]["total_ios"].as_u64().unwrap())
        .sum();
    assert_eq!(ios, 2 * 2048, "{v}");
    let fixed = jobs[0]["uring_fixed_ios"].as_u64().unwrap();
    assert!(
        fixed >= ios,
        "both jobs' I/O counted, on both rings: {fixed} < {ios}"
    );
    assert_eq!(jobs[0]["uring_plain_ios"], 0);
}

#[test]
fn fixedbufs_needs_the_uring_driver() {
    let o = mqblk(&["bench", "--fixedbufs=1", "--name=x", "--runtime=10ms"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("fixedbufs") && err.trim_end().lines().count() == 1,
        "{err}"
    );
}

#[test]
fn jobs_are_charged_to_their_cgroups_under_bfq() {
    // Each job's bios carry its group: BFQ's state dump shows the hierarchy with the weight
    // set by cgroup_weight, and each job's queue in its own group.
    let o = mqblk(&[
        "bench",
        "--driver=null",
        "--ioscheduler=bfq",
        "--rw=randread",
        "--iodepth=4",
        "--runtime=200ms",
        "--time_based",
        "--dump-sched",
        "--name=a",
        "--cgroup=db",
        "--cgroup_weight=300",
        "--name=b",
        "--cgroup=db/log",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.contains("group 1 cgroup '/db' parent 0 weight 300"),
        "{out}"
    );
    assert!(
        out.contains("group 2 cgroup '/db/log' parent 1 weight 100"),
        "{out}"
    );
    assert!(out.contains("Sync(1) group 1 "), "{out}");
    assert!(out.contains("Sync(2) group 2 "), "{out}");
}

/// 2, 8 and 32 MiB blocks work on every driver: the block layer splits them at
/// `max_sectors` (`bio_split_to_limits`) and completes each as one bio. Written with
/// verify on the memory-backed null driver and on a file through io_uring (O_DIRECT), read
/// from a device model in real time, and simulated.
#[test]
fn blocks_of_2_8_and_32_mib_work_on_every_driver() {
    let dir = std::env::temp_dir().join(format!("mqblk-bigbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data");
    let f = format!("--filename={}", file.display());
    for bs in ["2m", "8m", "32m"] {
        let blocks = (64 << 20) / mqblk_workload::parse_size(bs).unwrap();
        let checked = format!("verify : {blocks} blocks checked, 0 mismatches");
        let bs_opt = format!("--bs={bs}");
        let common = [
            "--name=big",
            "--rw=write",
            "--size=64m",
            "--iodepth=4",
            "--verify_state_save=0",
        ];
        for driver in [
            &["--memory_backed"][..],
            &["--driver=uring", &f, "--direct=1"],
        ] {
            let mut args = vec!["bench", &bs_opt, "--verify=crc32c"];
            args.extend_from_slice(&common);
            args.extend_from_slice(driver);
            let o = mqblk(&args);
            let out = text(&o.stdout);
            assert!(o.status.success(), "{args:?}: {out}{}", text(&o.stderr));
            assert!(out.contains(&checked), "{args:?}: {out}");
        }
        let size = format!("--size={}", 8 * mqblk_workload::parse_size(bs).unwrap());
        for cmd in ["bench", "sim"] {
            let o = mqblk(&[
                cmd,
                "--device=ssd",
                &bs_opt,
                "--name=big",
                "--rw=read",
                &size,
                "--iodepth=2",
                "--output-format=json",
            ]);
            assert!(o.status.success(), "{cmd} {bs}: {}", text(&o.stderr));
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let read = &v["jobs"][0]["read"];
            assert_eq!(read["total_ios"], 8, "{cmd} {bs}: {read}");
            assert_eq!(v["jobs"][0]["error"], 0, "{cmd} {bs}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file's queue reports the rotational flag of the disk its file system is on (the
/// kernel's BFQ sees that disk, `/sys/dev/block/MAJ:MIN/queue/rotational` of `st_dev`),
/// `rotational=` overrides it, and a device model refuses it (it has its own).
#[test]
fn a_file_reports_its_disks_rotational_flag_unless_overridden() {
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("mqblk-rot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data");
    let f = format!("--filename={}", file.display());
    let dev = std::fs::metadata(&dir).unwrap().dev();
    let (major, minor) = (libc_major(dev), libc_minor(dev));
    let sys = format!("/sys/dev/block/{major}:{minor}");
    let want = ["queue/rotational", "../queue/rotational"]
        .iter()
        .find_map(|p| std::fs::read_to_string(format!("{sys}/{p}")).ok())
        .map_or(0, |s| u64::from(s.trim() == "1"));
    let run = |rot: Option<&str>| {
        let mut args = vec![
            "bench",
            "--ioengine=io_uring",
            &f,
            "--size=4m",
            "--name=r",
            "--rw=randread",
            "--runtime=50ms",
            "--time_based",
            "--output-format=json",
        ];
        let r;
        if let Some(v) = rot {
            r = format!("--rotational={v}");
            args.push(&r);
        }
        let o = mqblk(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let v = run(None);
    let (queue, job) = (&v["mqblk_queue"], &v["jobs"][0]);
    assert_eq!(
        queue["rotational"].as_u64(),
        Some(want),
        "sysfs of {sys} says {want}"
    );
    let rotational = |v: Option<&str>| run(v)["mqblk_queue"]["rotational"].as_u64();
    assert_eq!(rotational(Some("0")), Some(0));
    assert_eq!(rotational(Some("1")), Some(1));
    // The disk under the file is reported, and a regular file counts as write-back cached.
    assert_eq!(queue["write_cache"], "write back");
    if let Ok(dir) = std::fs::canonicalize(&sys) {
        let disk = if dir.join("partition").exists() {
            dir.parent().unwrap().to_path_buf()
        } else {
            dir
        };
        let name = disk.file_name().unwrap().to_string_lossy().into_owned();
        let backing = job["backing"].as_str().unwrap_or_else(|| panic!("{job}"));
        assert!(
            backing.starts_with(&format!("{name}: hw_queues=")),
            "{backing} (disk {name})"
        );
    } else {
        mqblk_testkit::skip("the backing check", &format!("{sys} not in sysfs (tmpfs?)"));
    }
    let o = mqblk(&["sim", "--device=hdd", "--rotational=0", "--name=x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("device model has its own"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// glibc's `gnu_dev_major` / `gnu_dev_minor`.
fn libc_major(dev: u64) -> u64 {
    ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)
}
fn libc_minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev >> 12) & !0xff)
}

/// Fewer driver tags than the job's depth on a device that completes only when polled
/// (irqmode=timer): a bio waiting for a tag, whole or the rest of a split one, must not
/// stop the job from reaping (it spun forever without polling before).
#[test]
fn a_bio_waiting_for_a_tag_does_not_stall_the_job() {
    for bs in ["4k", "8m"] {
        let bs = format!("--bs={bs}");
        let o = Command::new("timeout")
            .args([
                "60",
                env!("CARGO_BIN_EXE_mqblk"),
                "bench",
                "--ioscheduler=none",
            ])
            .args([&bs, "--queue_depth=2", "--iodepth=4", "--irqmode=timer"])
            .args([
                "--rw=randrw",
                "--size=256m",
                "--runtime=200ms",
                "--time_based",
            ])
            .args(["--name=x", "--output-format=json"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{bs}: {:?} {}",
            o.status,
            text(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            v["jobs"][0]["read"]["total_ios"].as_u64().unwrap() > 0,
            "{bs}"
        );
    }
}

/// `verify_interval`, `verify_fatal`, `verify_dump`: 16 KiB blocks written with a header
/// every 4 KiB; a byte flipped in the third piece of the second block and one in its fourth
/// are two mismatches, each at its piece's offset, one with `verify_fatal`; with
/// `verify_dump` each bad piece is written out in the current directory as read and as
/// written (`FILE.OFFSET.received`, `.expected`), the two differing in the flipped byte.
#[test]
fn verify_interval_finds_the_bad_piece_and_verify_dump_writes_it_out() {
    let dir = std::env::temp_dir().join(format!("mqblk-vdump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let f = format!("--filename={}", data.display());
    let job = |extra: &[&str], rw: &str| {
        let mut args = vec![
            "bench",
            "--ioengine=psync",
            &f,
            "--size=64k",
            "--name=v",
            "--bs=16k",
            "--verify=crc32c",
            "--verify_interval=4k",
            rw,
        ];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_mqblk"))
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = job(&["--do_verify=0"], "--rw=write");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut bytes = std::fs::read(&data).unwrap();
    let (third, fourth) = (16384 + 2 * 4096, 16384 + 3 * 4096);
    bytes[third + 100] ^= 0x40;
    bytes[fourth + 200] ^= 0x40;
    std::fs::write(&data, &bytes).unwrap();
    let all = text(&job(&[], "--rw=read").stderr);
    for at in [third, fourth] {
        assert!(all.contains(&format!("mismatch at offset {at}")), "{all}");
    }
    let fatal = text(&job(&["--verify_fatal=1", "--verify_dump=1"], "--rw=read").stderr);
    assert!(
        fatal.contains(&format!("mismatch at offset {third}")),
        "{fatal}"
    );
    assert!(!fatal.contains(&format!("offset {fourth}")), "{fatal}");
    let received = std::fs::read(dir.join(format!("data.{third}.received"))).unwrap();
    let expected = std::fs::read(dir.join(format!("data.{third}.expected"))).unwrap();
    assert_eq!(received, bytes[third..third + 4096]);
    let differ: Vec<usize> = (0..4096).filter(|&i| received[i] != expected[i]).collect();
    assert_eq!(differ, [100], "{fatal}");
    assert!(!dir.join(format!("data.{fourth}.received")).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `iomem=shmhuge`: the job's buffers are huge pages, through which its data goes and is
/// verified like any other; huge pages of a size nobody reserved are one line naming the job
/// and how to reserve them, before any I/O.
#[test]
fn huge_page_buffers_carry_data_and_a_shortage_is_one_line() {
    let test = "huge_page_buffers_carry_data_and_a_shortage_is_one_line";
    let dir = std::env::temp_dir().join(format!("mqblk-huge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = format!("--filename={}", dir.join("huge.dat").display());
    let job = [
        "bench",
        file.as_str(),
        "--size=4m",
        "--name=w",
        "--rw=write",
        "--bs=128k",
        "--iodepth=4",
        "--iomem=shmhuge",
    ];
    let gib_free =
        std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
    if gib_free == 0 {
        let o = mqblk(&[&job[..], &["--hugepage-size=1g"]].concat());
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(
            err.contains("w: iomem=shmhuge") && err.contains("vm.nr_hugepages"),
            "{err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let reserved = match mqblk_drivers::hugemem::reserve(2 << 20, 1) {
        Ok(r) => r,
        Err(e) => {
            mqblk_testkit::missing(test, &format!("no huge pages to map: {e}"));
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    let o = mqblk(
        &[
            &job[..],
            &["--verify=crc32c", "--do_verify=1", "--verify_state_save=0"],
        ]
        .concat(),
    );
    drop(reserved);
    let _ = std::fs::remove_dir_all(&dir);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(out.contains("w: (groupid=0, jobs=1): err= 0"), "{out}");
}
