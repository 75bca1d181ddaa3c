//! blktrace output, capture and replay from the command line, checked with blkparse and btt.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mqblk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(args)
        .output()
        .expect("running mqblk")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mqblk-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/traces")
        .join(name)
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("-h").output().is_ok()
}

/// `blkparse`'s per-device totals: (reads+writes) queued, dispatched, completed, merged.
fn blkparse_totals(name: &Path) -> Option<[u64; 4]> {
    let o = Command::new("blkparse")
        .arg("-i")
        .arg(name.file_name()?)
        .arg("-D")
        .arg(name.parent()?)
        .output()
        .ok()?;
    let out = text(&o.stdout);
    let mut t = [0u64; 4];
    // The "Total" block follows the per-CPU ones; when there is one CPU it is all there is.
    let block = out.rsplit_once("Total (").map_or(out.as_str(), |(_, b)| b);
    for line in block.lines() {
        for (i, key) in ["Queued:", "Dispatches:", "Completed:", "Merges:"]
            .iter()
            .enumerate()
        {
            for part in line.split('\t') {
                if let Some((_, v)) = part.split_once(key) {
                    let n: u64 = v.trim().split(',').next()?.trim().parse().ok()?;
                    t[i] += n;
                }
            }
        }
    }
    Some(t)
}

fn counts_from(stderr: &str) -> std::collections::BTreeMap<char, u64> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("trace: "))
        .expect("trace line");
    let inner = line.rsplit_once('(').unwrap().1.trim_end_matches(')');
    inner
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.chars().next().unwrap(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn blkparse_and_btt_read_our_traces_and_agree_on_counts() {
    let d = tmpdir("ours");
    let base = d.join("sim");
    let o = mqblk(&[
        "sim",
        "--device=hdd,ncq=8",
        "--cpus=2",
        "--numjobs=2",
        "--ioscheduler=mq-deadline",
        "--rw=randrw",
        "--bs=4k",
        "--iodepth=8",
        "--runtime=300ms",
        "--time_based",
        "--name=t",
        &format!("--trace={}", base.display()),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ours = counts_from(&text(&o.stderr));
    assert!(ours[&'Q'] > 50 && ours[&'Q'] == ours[&'C'], "{ours:?}");
    // Our own reader agrees with what was written.
    let dump = mqblk(&["trace", "dump", &base.display().to_string()]);
    assert!(dump.status.success());
    assert!(text(&dump.stdout).contains(&format!("Q={}", ours[&'Q'])));
    if !have("blkparse") {
        eprintln!("SKIP blkparse/btt checks: blkparse is not installed (apt-get install blktrace)");
        return;
    }
    let t = blkparse_totals(&base).expect("blkparse summary");
    let merged = ours.get(&'M').copied().unwrap_or(0) + ours.get(&'F').copied().unwrap_or(0);
    assert_eq!(
        t,
        [ours[&'Q'], ours[&'D'], ours[&'C'], merged],
        "blkparse totals vs ours"
    );
    // btt wants blkparse's merged binary dump.
    let bin = d.join("sim.bin");
    let st = Command::new("blkparse")
        .args(["-i", "sim", "-O", "-d"])
        .arg(&bin)
        .current_dir(&d)
        .status()
        .unwrap();
    assert!(st.success());
    // btt leaves .dat files in its working directory.
    let btt = Command::new("btt")
        .arg("-i")
        .arg(&bin)
        .current_dir(&d)
        .output()
        .unwrap();
    let out = text(&btt.stdout);
    let q2c = out
        .lines()
        .find(|l| l.starts_with("Q2C"))
        .unwrap_or_else(|| panic!("btt printed no Q2C:\n{out}"));
    let n: u64 = q2c.split_whitespace().last().unwrap().parse().unwrap();
    assert_eq!(n, ours[&'C'], "btt's Q2C count");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn corpus_traces_replay_every_request() {
    // cp-grep: a reader's bio merges into a writer's request from another CPU (a wakeup the
    // simulator once missed).
    for name in ["git-clone", "grep-tree", "file-copy", "cp-grep"] {
        let trace = corpus(name);
        let o = mqblk(&[
            "replay",
            &trace.display().to_string(),
            "--device=hdd",
            "--output-format=json",
        ]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let r = &v["mqblk_replay"];
        assert!(r["trace_ios"].as_u64().unwrap() > 50, "{name}: {r}");
        assert_eq!(r["trace_ios"], r["replayed_ios"], "{name}");
        assert_eq!(r["trace_bytes"], r["replayed_bytes"], "{name}");
        assert!(
            r["original_lat_ns"][0].as_u64().is_some(),
            "{name}: original latencies"
        );
        assert!(text(&o.stderr).contains("trace events per host second"));
    }
}

#[test]
fn replay_modes_and_schedulers_run_and_are_reproducible() {
    let trace = corpus("grep-tree").display().to_string();
    for args in [
        vec!["--mode=open", "--speed=2"],
        vec!["--ioscheduler=kyber"],
        vec!["--ioscheduler=none", "--device=ssd"],
    ] {
        let mut a = vec!["replay", trace.as_str()];
        a.extend(args.iter().copied());
        let x = mqblk(&a);
        let y = mqblk(&a);
        assert!(x.status.success(), "{args:?}: {}", text(&x.stderr));
        assert_eq!(text(&x.stdout), text(&y.stdout), "{args:?}");
        assert!(text(&x.stdout).contains("original Q->C"));
    }
}

#[test]
fn damaged_traces_give_one_line_errors() {
    let d = tmpdir("bad");
    let good = std::fs::read(corpus("file-copy.blktrace.0")).unwrap();
    std::fs::write(d.join("cut.blktrace.0"), &good[..good.len() - 7]).unwrap();
    let mut bad = good.clone();
    bad[48 + 2] ^= 0xff;
    std::fs::write(d.join("magic.blktrace.0"), &bad).unwrap();
    for (name, needle) in [
        ("cut", "truncated record"),
        ("magic", "bad magic"),
        ("missing", "no trace files"),
    ] {
        let o = mqblk(&["replay", &d.join(name).display().to_string()]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(needle) && err.trim_end().lines().count() == 1,
            "{name}: {err}"
        );
        if name != "missing" {
            assert!(
                err.contains(&format!("{name}.blktrace.0: offset ")),
                "{err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn capture_a_loop_device_under_a_real_workload() {
    let skip = |why: &str| eprintln!("SKIP capture_a_loop_device_under_a_real_workload: {why}");
    if !Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| text(&o.stdout).trim() == "0")
    {
        return skip("needs root");
    }
    if !Path::new("/sys/kernel/tracing").exists() {
        return skip("no /sys/kernel/tracing");
    }
    let d = tmpdir("capture");
    let img = d.join("fs.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let lo = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&img)
        .output();
    let Some(lo) = lo.ok().filter(|o| o.status.success()) else {
        return skip("losetup failed (no loop devices here)");
    };
    let dev = text(&lo.stdout).trim().to_string();
    let mnt = d.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let ok = Command::new("mkfs.ext4")
        .args(["-q", &dev])
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("mount")
            .arg(&dev)
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        let _ = Command::new("losetup").args(["-d", &dev]).status();
        return skip("mkfs.ext4 or mount failed");
    }
    let base = d.join("cap");
    let cap = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args([
            "trace",
            "capture",
            &format!("--device={dev}"),
            "--duration=3",
            "-o",
        ])
        .arg(&base)
        .spawn()
        .unwrap();
    // Start the workload only once the capture's tracefs instance exists and has had a
    // moment to enable its events (a loaded machine can take a while to get there).
    let t0 = std::time::Instant::now();
    let started = || {
        std::fs::read_dir("/sys/kernel/tracing/instances")
            .map(|r| {
                r.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("mqblk-"))
            })
            .unwrap_or(false)
    };
    while !started() && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // A real workload: copy a source tree in and read it back from a cold cache.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let _ = Command::new("cp").arg("-r").arg(&src).arg(&mnt).status();
    let _ = Command::new("sync").status();
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
    let _ = Command::new("grep").args(["-r", "fn "]).arg(&mnt).output();
    let out = cap.wait_with_output().unwrap();
    let _ = Command::new("umount").arg(&mnt).status();
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    assert!(out.status.success());
    let leftover = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|r| {
            r.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("mqblk-"))
        })
        .unwrap_or(false);
    assert!(!leftover, "the capture left its tracefs instance behind");
    let replay = mqblk(&[
        "replay",
        &base.display().to_string(),
        "--output-format=json",
    ]);
    assert!(replay.status.success(), "{}", text(&replay.stderr));
    let v: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    let r = &v["mqblk_replay"];
    assert!(r["trace_ios"].as_u64().unwrap() > 10, "{r}");
    assert_eq!(r["trace_ios"], r["replayed_ios"]);
    if have("blkparse") {
        let t = blkparse_totals(&base).expect("blkparse read the capture");
        assert!(t[0] > 10, "blkparse saw {t:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn corpus_traces_replay_on_real_drivers() {
    let d = tmpdir("real");
    let file = d.join("dev.img");
    for (name, extra) in [
        ("git-clone", vec!["--driver=null"]),
        (
            "grep-tree",
            vec!["--driver=null", "--mode=open", "--speed=50"],
        ),
        ("cp-grep", vec!["--driver=null", "--ioscheduler=kyber"]),
        ("file-copy", vec!["--driver=uring", "--size=256m"]),
    ] {
        let trace = corpus(name).display().to_string();
        let f = format!("--filename={}", file.display());
        let mut a = vec!["replay", trace.as_str(), "--output-format=json"];
        a.extend(extra.iter().copied());
        if extra.contains(&"--driver=uring") {
            a.push(&f);
        }
        let o = mqblk(&a);
        assert!(
            o.status.success(),
            "{name}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let r = &v["mqblk_replay"];
        assert_eq!(r["trace_ios"], r["replayed_ios"], "{name}: {r}");
        assert_eq!(r["trace_bytes"], r["replayed_bytes"], "{name}: {r}");
        assert_eq!(r["errors"], 0, "{name}: {r}");
    }
    let bad = mqblk(&[
        "replay",
        &corpus("grep-tree").display().to_string(),
        "--driver=uring",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("needs --filename"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bench_trace_output_is_read_by_blkparse() {
    let d = tmpdir("bench");
    let base = d.join("b");
    let o = mqblk(&[
        "bench",
        "--numjobs=2",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=4",
        "--size=2m",
        "--name=b",
        &format!("--trace={}", base.display()),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ours = counts_from(&text(&o.stderr));
    assert_eq!(ours[&'Q'], 1024, "two jobs of 512 reads: {ours:?}");
    assert!(d.join("b.blktrace.0").exists() && d.join("b.blktrace.1").exists());
    if have("blkparse") {
        let t = blkparse_totals(&base).expect("blkparse summary");
        assert_eq!((t[0], t[2]), (1024, 1024), "blkparse totals {t:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_trace_without_events_on_cpu_0_is_still_read_by_blkparse() {
    // blkparse stops at the first missing NAME.blktrace.N; submitter 0 saw nothing here.
    let d = tmpdir("cpu1");
    let base = d.join("t");
    let o = mqblk(&[
        "sim",
        "--cpus=2",
        "--cpus_allowed=1",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=4",
        "--size=1m",
        "--name=one",
        &format!("--trace={}", base.display()),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        d.join("t.blktrace.0").exists(),
        "an empty file for submitter 0"
    );
    assert_eq!(std::fs::metadata(d.join("t.blktrace.0")).unwrap().len(), 0);
    if have("blkparse") {
        let t = blkparse_totals(&base).expect("blkparse summary");
        assert_eq!(t[0], 256, "{t:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
