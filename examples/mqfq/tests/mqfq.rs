//! MQFQ through the `mqblk-mqfq` binary: by name in `sim`, `bench`, the fuzzer, the crash
//! runs, `serve` and `twin`, with its documented effect (fair shares of service between a
//! flow of large requests and one of small ones).

use std::process::Command;

fn mqfq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mqblk-mqfq"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run mqblk-mqfq")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Bytes per second of jobs `big` (128 KiB reads) and `small` (4 KiB reads), 16 in flight
/// each, on the simulated SSD under `sched`.
fn shares(sched: &str) -> (f64, f64) {
    let o = mqfq(&[
        "sim",
        "--device=ssd",
        &format!("--ioscheduler={sched}"),
        "--output-format=json",
        "--rw=randread",
        "--runtime=1",
        "--time_based",
        "--size=1g",
        "--iodepth=16",
        "--name=big",
        "--bs=128k",
        "--offset=0",
        "--name=small",
        "--bs=4k",
        "--offset=2g",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let bw = |i: usize| v["jobs"][i]["read"]["bw_bytes"].as_f64().expect("bw_bytes");
    assert_eq!(v["jobs"][0]["jobname"], "big");
    (bw(0), bw(1))
}

/// Fair queueing by size: under `none` the flow of 128 KiB reads takes nearly all the
/// bytes; under MQFQ the 4 KiB flow's share grows several times over.
#[test]
fn mqfq_gives_a_flow_of_small_reads_a_fairer_share_than_none() {
    let (big, small) = shares("none");
    let none_share = small / (big + small);
    let (big, small) = shares("mqfq");
    let mqfq_share = small / (big + small);
    assert!(
        mqfq_share > 2.5 * none_share,
        "the 4 KiB flow's share of bytes: none {none_share:.3}, mqfq {mqfq_share:.3}"
    );
}

#[test]
fn mqfq_runs_by_name_in_bench_sim_fuzz_and_crash_runs() {
    let o = mqfq(&["schedulers"]);
    let out = text(&o.stdout);
    assert!(
        out.contains("mqfq, MQ_AWARE") && out.contains("throttle_kb"),
        "{out}"
    );
    // Real time, the null device: its statistics come through the public API.
    let o = mqfq(&[
        "bench",
        "--ioscheduler=mqfq",
        "--sched.max_inflight=8",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--runtime=1",
        "--time_based",
        "--name=x",
    ]);
    let out = text(&o.stdout);
    assert!(
        o.status.success() && out.contains("mqfq dispatched="),
        "{out}{}",
        text(&o.stderr)
    );
    let o = mqfq(&[
        "sim",
        "--fuzz",
        "--ioscheduler=mqfq",
        "--seed=1",
        "--runs=300",
    ]);
    let out = text(&o.stdout);
    assert!(out.contains("300 runs from seed 1, 0 failed"), "{out}");
    let o = mqfq(&["sim", "--crash", "--ioscheduler=mqfq", "--runs=500"]);
    let out = text(&o.stdout);
    assert!(out.ends_with("500 runs, 0 violations\n"), "{out}");
    // The plain `mqblk` has no MQFQ: one line naming the known ones.
    let o = Command::new(env!("CARGO_BIN_EXE_mqblk-mqfq"))
        .args(["sim", "--ioscheduler=nope", "--rw=read", "--name=x"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(
        !o.status.success() && err.contains("mqfq") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_second_registration_is_refused() {
    mqblk_mqfq::register().expect("the first registration");
    let e = mqblk_mqfq::register().expect_err("a second registration");
    assert!(e.contains("'mqfq' is already registered"), "{e}");
    assert!(mqblk_sched::lookup("mqfq").is_some());
}

/// `serve` exports a device under MQFQ; a real NBD client writes and reads back through it.
#[test]
fn mqfq_serves_an_nbd_export() {
    let dir = std::env::temp_dir().join(format!("mqblk-mqfq-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("nbd.sock");
    let stats = dir.join("stats.json");
    let mut server = Command::new(env!("CARGO_BIN_EXE_mqblk-mqfq"))
        .args([
            "serve",
            &format!("--listen=unix:{}", sock.display()),
            "--size=8m",
            "--ioscheduler=mqfq",
            &format!("--stats={}", stats.display()),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(t0.elapsed().as_secs() < 10, "the server did not listen");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let uri = format!("nbd+unix:///mqblk?socket={}", sock.display());
    let qemu_io = Command::new("qemu-io")
        .args([
            "-f",
            "raw",
            "-c",
            "write -P 0x5c 0 1M",
            "-c",
            "read -P 0x5c 0 1M",
            &uri,
        ])
        .output();
    match qemu_io {
        Ok(o) => {
            let out = text(&o.stdout);
            assert!(
                o.status.success() && !out.contains("Pattern verification failed"),
                "{out}{}",
                text(&o.stderr)
            );
        }
        Err(_) if std::env::var_os("CI").is_some() => panic!("qemu-io missing in CI"),
        Err(_) => println!(
            "SKIP: mqfq_serves_an_nbd_export: qemu-io missing (apt-get install qemu-utils)"
        ),
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    assert!(server.wait().unwrap().success());
    let report = std::fs::read_to_string(&stats).unwrap();
    assert!(report.contains("\"mqfq\""), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `twin` runs MQFQ, which the kernel has not, through mqblk's stack on a real device beside
/// the kernel's `none` and BFQ: no kernel column for it, the kernel's for BFQ, its tunables
/// from `--sched`, and on the device too MQFQ shares bytes where `none` shares turns. With
/// `max_inflight=4` (D) the 4 KiB flow's 16 reads wait in MQFQ, whose start tags let it
/// catch up; at the default D=16 all 16 are in the device and MQFQ has nothing to order.
/// The device is a loop with direct I/O over a file on the disk the build is on, so that its
/// reads wait on that disk: over tmpfs the loop is as fast as its CPU, and the share is what
/// each flow's thread gets of two CPUs beside the worker that reaps for them and the loop's
/// own (0.021 under MQFQ at D=4 on one machine, 0.22-0.27 on another). Needs root,
/// losetup and fio (in CI `.ci/run` installs them).
#[test]
fn twin_runs_mqfq_through_mqblk_beside_the_kernel_s_schedulers() {
    let test = "twin_runs_mqfq_through_mqblk_beside_the_kernel_s_schedulers";
    if !mqblk_testkit::need_root_and_tools(test, &["losetup", "fio"]) {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mqblk-mqfq-twin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let img = dir.join("img");
    {
        // Every block written, so that each read is the disk's.
        use std::io::Write;
        let mut f = std::fs::File::create(&img).unwrap();
        let block: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        for _ in 0..256 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
    }
    let dev = mqblk_testkit::attach_loop_direct_io(&img).unwrap();
    let job = dir.join("flows.fio");
    std::fs::write(
        &job,
        "[global]\nioengine=io_uring\ndirect=1\nrw=randread\nruntime=2\ntime_based\n\n\
         [big]\nbs=128k\niodepth=16\nsize=96m\n\n[small]\nbs=4k\niodepth=16\noffset=128m\nsize=96m\n",
    )
    .unwrap();
    let name = dev.trim_start_matches("/dev/").to_string();
    let scheduler =
        || std::fs::read_to_string(format!("/sys/block/{name}/queue/scheduler")).unwrap();
    let before = scheduler();
    // The kernel's BFQ beside it, or kyber on a kernel built without BFQ.
    let beside = if mqblk_testkit::kernel_schedulers()
        .iter()
        .any(|s| s == "bfq")
    {
        "bfq"
    } else {
        "kyber"
    };
    let o = mqfq(&[
        "twin",
        &format!("--filename={dev}"),
        &format!("--schedulers=mqfq,{beside}"),
        "--sched=mqfq:max_inflight=4",
        "--repeats=3",
        "--output-format=json",
        job.to_str().unwrap(),
    ]);
    // A suite: MQFQ named in --schedulers joins every workload, whatever it lists.
    std::fs::write(
        dir.join("suite.toml"),
        format!("[[workload]]\nfile = \"flows.fio\"\nschedulers = [\"{beside}\"]\n"),
    )
    .unwrap();
    let suite = mqfq(&[
        "twin",
        &format!("--filename={dev}"),
        "--schedulers=mqfq",
        "--repeats=1",
        "--output-format=json",
        &format!("--suite={}", dir.display()),
    ]);
    let after = scheduler();
    mqblk_testkit::detach_loop(&dev);
    let _ = std::fs::remove_dir_all(&dir);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("the kernel has no 'mqfq'"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs: Vec<(String, String)> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[1].as_str().unwrap().to_string(),
                r[2].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut kinds = runs.clone();
    kinds.sort();
    kinds.dedup();
    assert!(
        kinds.len() == 5 && runs.len() == 15,
        "none and {beside} in both stacks, mqfq in mqblk's, three times each: {runs:?}"
    );
    assert!(
        !runs
            .iter()
            .any(|(stack, s)| stack == "kernel" && s == "mqfq"),
        "{runs:?}"
    );
    let iops = |sched: &str| {
        v["effects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["scheduler"] == sched && e["job"] == "small" && e["metric"] == "iops")
            .unwrap_or_else(|| panic!("no {sched} effect: {v}"))
            .clone()
    };
    assert!(
        iops("mqfq")["kernel"].is_null() && iops("mqfq")["mqblk"]["median"].as_f64().unwrap() > 0.0
    );
    assert!(iops(beside)["kernel"]["median"].as_f64().unwrap() > 0.0);
    let share = |sched: &str| {
        v["shares"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["scheduler"] == sched && s["job"] == "small")
            .unwrap()["mqblk"]["median"]
            .as_f64()
            .unwrap()
    };
    // Medians of three, three twins on the disk's loop: MQFQ 0.492-0.494 (byte-fair),
    // `none` 0.029-0.030, equal turns giving 4 KiB of every 132 (0.030); with two shell
    // loops spinning on both CPUs beside it, 0.454 and 0.036.
    let (fair, fifo) = (share("mqfq"), share("none"));
    assert!(
        fair > 0.25 && fair > 4.0 * fifo,
        "the 4 KiB flow's share of the bytes through mqblk's stack: {fair:.3} under MQFQ, {fifo:.3} under none"
    );
    assert_eq!(after, before, "the device's scheduler is put back");
    assert!(suite.status.success(), "{}", text(&suite.stderr));
    let v: serde_json::Value = serde_json::from_slice(&suite.stdout).unwrap();
    let rows = v["rows"].as_array().expect("the suite's rows");
    assert!(
        !rows.is_empty()
            && rows
                .iter()
                .all(|r| r["scheduler"] == "mqfq" && r["kernel"].is_null()),
        "{v}"
    );
}
