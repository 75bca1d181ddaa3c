//! A real Linux guest on `mqblk serve --vhost-user-blk`: `scripts/guest-test.sh` as the
//! README shows it, and `scripts/guest-reconnect.sh` (the server killed under the guest). The guest's virtio-blk driver sees two virtqueues as two blk-mq hardware
//! queues, fio in the guest writes a crc32c pattern from one job per virtqueue, a second
//! boot verifies it and discards a MiB (Linux's own DISCARD), and the server stops cleanly
//! on SIGTERM. It needs QEMU, busybox and
//! fio (the script installs them with apt-get, and `.ci/run` does so too) and Debian's cloud
//! kernel package; in CI a machine without them fails, elsewhere the test is skipped visibly.

mod common;
use common::{need_tools, run_repo_script};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// One guest at a time: guests run in parallel would share this machine's two cores, and
/// the seed test's direction needs the guest's vCPUs to run at once.
static ONE_GUEST: Mutex<()> = Mutex::new(());

/// The guard to boot guests under, or None (after a visible skip) where QEMU, busybox or
/// fio is missing and this is not CI (where `.ci/run` installs them).
fn ready(what: &str) -> Option<MutexGuard<'static, ()>> {
    let tools = [
        "qemu-system-x86_64",
        "qemu-storage-daemon",
        "busybox",
        "fio",
    ];
    if !need_tools(what, &tools) {
        return None;
    }
    Some(ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner()))
}

#[test]
fn a_linux_guest_writes_and_verifies_across_a_reboot_on_two_virtqueues() {
    guest_test(
        &["--num-queues=2"],
        &["PASS: 2 virtqueues", "0->hctx 0", "1->hctx 1"],
    );
}

#[test]
fn a_file_through_io_uring_and_mq_deadline_serves_the_guest_too() {
    guest_test(
        &[
            "--num-queues=1",
            "--driver=uring",
            "--ioscheduler=mq-deadline",
        ],
        &["PASS: 1 virtqueues", "0->hctx 0"],
    );
}

/// `scripts/guest-reconnect.sh`: the server killed three times with SIGKILL while fio writes
/// and verifies in the guest, each time started again; QEMU reconnects, the new server takes
/// up what was in flight (`--in-order`), the verify passes and the guest logs no I/O error.
#[test]
fn a_guest_keeps_its_data_across_three_kills_of_its_server() {
    let Some(_one_guest) = ready("guest-reconnect.sh") else {
        return;
    };
    let out = run_script("guest-reconnect.sh", &[]);
    let stdout = String::from_utf8_lossy(&out);
    assert!(
        stdout.contains("PASS: fio wrote 128 MiB with crc32c and verified it while the server was killed 3 times")
            && stdout.contains("no errors"),
        "{stdout}"
    );
}

/// Runs `scripts/guest-test.sh ARGS` and checks its output holds every one of `want`.
fn guest_test(args: &[&str], want: &[&str]) {
    let Some(_one_guest) = ready("guest-test.sh") else {
        return;
    };
    let out = run_script("guest-test.sh", args);
    let stdout = String::from_utf8_lossy(&out);
    // Each virtqueue went through its own hardware queue.
    for w in want {
        assert!(stdout.contains(w), "missing '{w}':\n{stdout}");
    }
}

/// Runs `scripts/NAME ARGS` and parses its JSON, or None where QEMU is missing outside CI.
fn guest_script(name: &str, args: &[&str]) -> Option<serde_json::Value> {
    let _one_guest = ready(name)?;
    Some(serde_json::from_slice(&run_script(name, args)).expect("JSON"))
}

/// What `scripts/NAME ARGS` printed, with this build's mqblk as `$MQBLK`; it must succeed.
fn run_script(name: &str, args: &[&str]) -> Vec<u8> {
    run_repo_script(&format!("scripts/{name}"), args)
}

#[test]
fn guest_bench_compares_mqblk_with_qemu_and_qemu_storage_daemon() {
    let Some(v) = guest_script(
        "guest-bench.sh",
        &[
            "--rounds=1",
            "--runtime=1",
            "--vcpus=2",
            "--num-queues=2",
            "--numjobs=2",
            "--size=64",
            "--json",
        ],
    ) else {
        return;
    };
    let rows = v["rows"].as_array().unwrap();
    let backends: Vec<&str> = rows
        .iter()
        .map(|r| r["backend"].as_str().unwrap())
        .collect();
    assert_eq!(backends, ["mqblk", "qemu", "qsd"], "{v}");
    for r in rows {
        assert!(r["iops"].as_f64().unwrap() > 100.0, "{r}");
        assert!(r["host_cpu_us_per_req"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn the_seed_003_script_runs_the_mails_job_on_one_and_two_virtqueues() {
    // --check: the script fails unless 2 virtqueues beat 1 by 10% at numjobs 4 (measured
    // here: 2.73x at 2 rounds of 5 s).
    let Some(v) = guest_script(
        "guest-seed003.sh",
        &["--rounds=1", "--runtime=2", "--json", "--check"],
    ) else {
        return;
    };
    assert_eq!(v["direction_holds"], true, "{v}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    for r in rows {
        assert!(r["ours_1vq"].as_f64().unwrap() > 100.0, "{r}");
        assert!(r["ours_2vq"].as_f64().unwrap() > 100.0, "{r}");
    }
    assert_eq!(rows[1]["mail_2vq"].as_f64().unwrap(), 199e3);
}

#[test]
fn the_seed_000_script_runs_dbench_on_the_stock_and_the_patched_kernel() {
    // Debian's 5.10 (stock) and 6.1 (patched) kernels, scsi_debug with one hardware queue
    // per vCPU or one, BFQ and none. What must hold whatever the noise: each mode ran on the
    // kernel it names, MQ modes had a hardware queue per vCPU and every one of them ran,
    // SQ one, and dbench moved data in every case.
    let Some(v) = guest_script(
        "guest-seed000.sh",
        &[
            "--runtime=4",
            "--clients=4",
            "--schedulers=bfq,none",
            "--json",
        ],
    ) else {
        return;
    };
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "{v}");
    for r in rows {
        let (mode, kernel) = (r["mode"].as_str().unwrap(), r["kernel"].as_str().unwrap());
        let want_kernel = if matches!(mode, "MQ" | "SQ") {
            "5.10"
        } else {
            "6.1"
        };
        assert_eq!(kernel, want_kernel, "{r}");
        let queues = if mode.starts_with("MQ") { 2 } else { 1 };
        assert_eq!(r["hctxs"], queues, "{r}");
        assert_eq!(r["hctxs_run"].as_f64().unwrap(), queues as f64, "{r}");
        assert!(r["mb_per_s"].as_f64().unwrap() > 0.5, "{r}");
        assert!(r["hctx_runs"].as_f64().unwrap() > 10.0, "{r}");
    }
    for k in ["stock_5_10_over_none", "patched_6_1_over_none"] {
        assert!(v["verdict"][k]["bfq"].as_f64().unwrap() > 0.0, "{v}");
    }
}

#[test]
fn the_seed_004_script_runs_bfq_with_and_without_the_patch_on_one_kernel() {
    // scripts/guest-seed004.sh: Debian's 6.1 in a guest, BFQ built twice from its source
    // (as the kernel has it, and with `nonrot_with_queueing` held false: merging as before
    // the mail's patch), mq-deadline beside them, jbd2 at be/0. What must hold whatever the
    // noise: the two BFQ runs loaded different modules, BFQ's own log shows each merging
    // queues (the kernel's merges only the clients' queues made together, stable merging;
    // measured 0-3 a run, the other 0-15), and dbench moved data in every case. The
    // throughput ratios are printed, not asserted: under TCG the guest's emulated CPUs, not
    // the disk, set dbench's pace (docs/results/seeds.md, "`bfq-no-merge`, asked of the kernel with and without
    // its patch"). `--hw-tag` reads BFQ's `hw_tag` and `nonrot_with_queueing` with a kprobe.
    let Some(v) = guest_script(
        "guest-seed004.sh",
        &[
            "--runtime=6",
            "--rounds=2",
            "--prios=0",
            "--delay-us=2000",
            "--merges",
            "--hw-tag",
            "--json",
        ],
    ) else {
        return;
    };
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    let row = |case: &str| rows.iter().find(|r| r["case"] == case).unwrap();
    let (stock, merging) = (row("stock"), row("merging"));
    assert_ne!(stock["module"], merging["module"], "{v}");
    // The kprobe reads the fields the patch is about: with merging kept the flag is never
    // set; the kernel's own sets it exactly while BFQ has not found the disk without
    // queueing (`nonrot && hw_tag`, where -1, undecided, keeps the value it started with).
    assert_eq!(merging["flag_share"].as_f64(), Some(0.0), "{merging}");
    assert_eq!(merging["nonrot_with_queueing"][0], 0, "{merging}");
    assert!(stock["flag_share"].as_f64().unwrap() > 0.0, "{stock}");
    let hw = stock["hw_tag"][0].as_i64().unwrap();
    assert!((-1..=1).contains(&hw), "{stock}");
    assert_eq!(
        stock["nonrot_with_queueing"][0],
        i64::from(hw != 0),
        "{stock}"
    );
    assert_eq!(row("mq-deadline")["module"], "built-in", "{v}");
    // Counted over both rounds: one short run in a TCG guest has once made none.
    for r in [stock, merging] {
        let merges: i64 = r["merge_runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_i64().unwrap())
            .sum();
        assert!(merges >= 1, "{r}");
    }
    for r in rows {
        assert_eq!(r["jbd2_prio"], 0, "{r}");
        assert!(r["mb_per_s"].as_f64().unwrap() > 0.5, "{r}");
    }
    assert!(
        v["verdict"]["be0"]["without_over_with_merging"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn the_guest_capture_script_traces_dbench_on_xfs_inside_the_twin() {
    // scripts/guest-dbench-capture.sh: dbench with one client on XFS over scsi_debug in
    // Debian's 6.1 guest, traced by `mqblk trace capture` in the guest and brought out as
    // blktrace files. What must hold: the files parse, and they hold the client's own data
    // writes (`WS`) and log forces (`FWFSM`), as the loadfile of `single-hctx-dispatch`'s twin needs.
    guest_capture(&[], "dbench");
}

#[test]
fn the_guest_capture_script_traces_dbench_on_ext4_as_seed_004_s_guest_runs_it() {
    // The same with `bfq-no-merge`'s guest's shape (`--fs=ext4 --rotational=0 --delay-us=100
    // --tags=32`): on ext4 the client writes its data (`WS`) and jbd2 the commit records
    // (`FWFSM`), as `Ext4Loadfile::from_trace` needs.
    guest_capture(
        &["--fs=ext4", "--rotational=0", "--delay-us=100", "--tags=32"],
        "jbd2/sda-8",
    );
}

/// Runs the capture script with `args` for 4 s and checks the trace: dbench's data writes
/// and `logger`'s PREFLUSH|FUA log writes, at least ten of each. (2 s gave four of each on
/// a machine whose TCG guest took 50 ms a flush.)
fn guest_capture(args: &[&str], logger: &str) {
    let Some(_one_guest) = ready("guest-dbench-capture.sh") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "mqblk-guest-capture-{}-{}",
        std::process::id(),
        args.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let name = dir.join("dbench1").display().to_string();
    let mut all = vec!["--runtime=4"];
    all.extend_from_slice(args);
    all.push(&name);
    // A TCG guest of the stock kernel has once hung here, booted, until its timeout (the
    // other capture and this one's rerun took 22 s): a guest that does not finish its job is
    // booted once more, and a second hang fails the test.
    let first = Command::new("bash")
        .arg("scripts/guest-dbench-capture.sh")
        .args(&all)
        .env("MQBLK", env!("CARGO_BIN_EXE_mqblk"))
        .current_dir(common::repo())
        .output()
        .unwrap();
    if !first.status.success() {
        let err = String::from_utf8_lossy(&first.stderr);
        assert!(
            err.contains("the guest did not finish its job"),
            "guest-dbench-capture.sh failed:\n{err}"
        );
        eprintln!("guest capture: the guest hung; booting it once more");
        run_script("guest-dbench-capture.sh", &all);
    }
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!files.is_empty(), "no trace files in {}", dir.display());
    let dump = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(["trace", "dump"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let text = String::from_utf8_lossy(&dump.stdout);
    let queued = |rwbs: &str, by: &str| {
        text.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 7 && f[5] == "Q" && f[6] == rwbs && l.ends_with(&format!("[{by}]"))
            })
            .count()
    };
    let (ws, log) = (queued("WS", "dbench"), queued("FWFSM", logger));
    assert!(
        ws >= 10 && log >= 10,
        "WS {ws}, FWFSM {log}\n{}",
        &text[text.len().saturating_sub(2000)..]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
