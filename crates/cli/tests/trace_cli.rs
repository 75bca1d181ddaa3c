//! blktrace output, capture and replay from the command line, checked with blkparse and btt.

use mqblk_trace::TraceSet;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// Whether blkparse is there to check `test`'s trace: a failure in CI where it is not, a
/// visible skip elsewhere.
fn have_blkparse(test: &str) -> bool {
    mqblk_testkit::need_tools(test, &["blkparse"])
}

/// What `blkparse -i NAME` prints, or `None` when it is not installed.
fn blkparse(name: &Path) -> Option<String> {
    let o = Command::new("blkparse")
        .arg("-i")
        .arg(name.file_name()?)
        .arg("-D")
        .arg(name.parent()?)
        .output()
        .ok()?;
    Some(text(&o.stdout))
}

/// `blkparse`'s per-device totals: (reads+writes) queued, dispatched, completed, merged.
fn blkparse_totals(name: &Path) -> Option<[u64; 4]> {
    let out = blkparse(name)?;
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

fn counts_from(stderr: &str) -> BTreeMap<char, u64> {
    counts_in(
        stderr
            .lines()
            .find(|l| l.starts_with("trace: "))
            .expect("trace line"),
    )
}

#[test]
fn blkparse_and_btt_read_our_traces_and_agree_on_counts() {
    let d = tmpdir("ours");
    let base = d.join("sim");
    let o = mqblk(&[
        "sim",
        "--device=hdd,ncq=8",
        "--cpus=2",
        "--ioscheduler=mq-deadline",
        // Sequential, in two regions: btt pairs events by sector, so no sector may have two
        // I/Os (fio's readwrite reads and writes the same blocks).
        "--rw=write",
        "--bs=4k",
        "--iodepth=8",
        "--size=1m",
        "--name=a",
        "--name=b",
        "--offset=1m",
        &format!("--trace={}", base.display()),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ours = counts_from(&text(&o.stderr));
    // Two jobs of 256 I/Os each, whatever the device model's timing; sequential writes
    // merge, and each request completes once: every bio is a merge or a request.
    let merges = ours.get(&'M').copied().unwrap_or(0) + ours.get(&'F').copied().unwrap_or(0);
    assert!(merges > 0, "sequential writes merge: {ours:?}");
    assert!(
        ours[&'Q'] == 512 && ours[&'C'] + merges == ours[&'Q'],
        "{ours:?}"
    );
    // Our own reader agrees with what was written.
    let dump = mqblk(&["trace", "dump", &base.display().to_string()]);
    assert!(dump.status.success());
    assert!(text(&dump.stdout).contains(&format!("Q={}", ours[&'Q'])));
    if !have_blkparse("the blkparse and btt checks") {
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
    // btt follows merged bios to their request's completion: one Q2C per queued bio.
    assert_eq!(n, ours[&'Q'], "btt's Q2C count");
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

/// Closed-loop replay keeps the waits dbench's trace shows (clients waiting for jbd2's
/// commits and jbd2 for the clients), in the simulator and on a real driver; the report
/// counts them, and without them every process runs flat out and the replay ends sooner.
#[test]
fn replay_keeps_the_waits_the_dbench_trace_shows() {
    let trace = corpus("dbench6").display().to_string();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "replay",
            trace.as_str(),
            "--device=ssd",
            "--output-format=json",
        ];
        a.extend(extra);
        let o = mqblk(&a);
        assert!(o.status.success(), "{extra:?}: {}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let r = &v["mqblk_replay"];
        assert_eq!(r["trace_ios"], r["replayed_ios"], "{extra:?}: {r}");
        v
    };
    let runtime = |v: &serde_json::Value| {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["job_runtime"].as_u64().unwrap())
            .max()
            .unwrap()
    };
    let with = run(&[]);
    let w = &with["mqblk_replay"]["waits"];
    let (drains, others) = (
        w["drains"].as_u64().unwrap(),
        w["on_other_processes"].as_u64().unwrap(),
    );
    assert!(drains > 1000 && others > 1000 && others <= drains, "{w}");
    let without = run(&["--waits=none"]);
    assert!(without["mqblk_replay"].get("waits").is_none());
    assert!(
        runtime(&with) > runtime(&without),
        "{} ms with the waits, {} without",
        runtime(&with),
        runtime(&without)
    );
    let real = run(&["--driver=null", "--ioscheduler=bfq"]);
    assert_eq!(
        real["mqblk_replay"]["waits"]["drains"].as_u64(),
        Some(drains)
    );
    let o = mqblk(&["replay", trace.as_str(), "--waits=some"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--waits"), "{}", text(&o.stderr));
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

/// `mqblk trace dump` prints what blkparse prints, event for event, and merges traces.
#[test]
fn dump_prints_what_blkparse_prints() {
    let names = ["git-clone", "grep-tree", "file-copy", "cp-grep"];
    for name in names {
        let trace = corpus(name).display().to_string();
        let o = mqblk(&["trace", "dump", &trace]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        let (lines, summary) = out.trim_end().rsplit_once('\n').unwrap();
        let n = lines.lines().count();
        assert!(n > 100, "{name}: {n} lines");
        assert!(summary.starts_with(&format!("{n} events: ")), "{summary}");
        if let Some(theirs) = blkparse_lines(&corpus(name)) {
            let ours: Vec<&str> = lines.lines().collect();
            assert_eq!(ours, theirs, "{name}: dump vs blkparse");
        }
    }
    let both = mqblk(&[
        "trace",
        "dump",
        &corpus("grep-tree").display().to_string(),
        &corpus("file-copy.blktrace.1").display().to_string(),
    ]);
    assert!(both.status.success());
    let summary = text(&both.stdout).lines().last().unwrap().to_string();
    assert!(summary.starts_with("730 events: "), "{summary}");
    let none = mqblk(&["trace", "dump"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(text(&none.stderr)
        .starts_with("mqblk trace dump: the following required arguments were not provided"));
}

/// blkparse's event lines (summary cut off), or `None` when it is not installed.
fn blkparse_lines(name: &Path) -> Option<Vec<String>> {
    Some(
        blkparse(name)?
            .lines()
            .take_while(|l| !l.starts_with("CPU") && !l.is_empty())
            .map(|l| l.replace("[(null)]", "[]"))
            .collect(),
    )
}

/// Per-action counts in blkparse's event lines.
fn letter_counts(lines: &[String]) -> BTreeMap<char, u64> {
    let mut c = BTreeMap::new();
    for l in lines {
        let code = l.split_whitespace().nth(5).unwrap();
        let k = if code == "UT" {
            'T'
        } else {
            code.chars().next().unwrap()
        };
        *c.entry(k).or_insert(0) += 1;
    }
    c
}

/// `K=V K=V` inside the parentheses of `line` that hold them.
fn counts_in(line: &str) -> BTreeMap<char, u64> {
    let inner = line
        .split('(')
        .filter_map(|p| p.split_once(')'))
        .map(|(inner, _)| inner)
        .find(|inner| inner.contains('='))
        .unwrap_or_else(|| panic!("no counts in {line}"));
    inner
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.chars().next().unwrap(), v.parse().unwrap())
        })
        .collect()
}

/// Captures share tracefs (and whether it is mounted): one at a time in this binary.
static TRACEFS: Mutex<()> = Mutex::new(());
const TRACING: &str = "/sys/kernel/tracing";

/// Why a capture test cannot run here, if it cannot.
fn capture_unavailable() -> Option<String> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| text(&o.stdout).trim() == "0");
    if !root {
        return Some("needs root".into());
    }
    if !Path::new(TRACING).exists() {
        return Some(format!("no {TRACING} (a kernel without tracing)"));
    }
    for tool in ["losetup", "mkfs.ext4", "mount"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

/// The global tracing state a capture must leave as it found it: whether tracefs is
/// mounted and, if so, the global event list, clock and buffer size.
fn tracing_state() -> Option<[String; 3]> {
    let t = Path::new(TRACING);
    if !t.join("instances").is_dir() {
        return None;
    }
    let read = |f: &str| std::fs::read_to_string(t.join(f)).unwrap_or_default();
    Some([
        read("set_event"),
        read("trace_clock"),
        read("buffer_size_kb"),
    ])
}

/// A loop device over a fresh file, with an ext4 file system mounted (on its first
/// partition with `partition`); all undone on drop.
struct LoopFs {
    dir: PathBuf,
    dev: String,
    fs_dev: String,
    mnt: PathBuf,
}

impl LoopFs {
    fn new(name: &str, partition: bool) -> Result<LoopFs, String> {
        let dir = tmpdir(name);
        let img = dir.join("fs.img");
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(64 << 20).unwrap();
        if partition {
            // An MBR with one Linux partition from sector 2048 to the end.
            let mut mbr = [0u8; 512];
            mbr[446 + 4] = 0x83;
            mbr[446 + 8..446 + 12].copy_from_slice(&2048u32.to_le_bytes());
            mbr[446 + 12..446 + 16].copy_from_slice(&((64u32 << 11) - 2048).to_le_bytes());
            mbr[510] = 0x55;
            mbr[511] = 0xaa;
            use std::os::unix::fs::FileExt;
            f.write_all_at(&mbr, 0).unwrap();
        }
        let dev = mqblk_testkit::attach_loop(&img)?;
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let mut l = LoopFs {
            dir,
            fs_dev: dev.clone(),
            dev,
            mnt,
        };
        if partition {
            // partx adds the partition itself (BLKPG), also where the kernel does not scan
            // partition tables. A partition added so stays on the loop device after
            // `losetup -d` (its partscan is off), and partx cannot add it again: drop any
            // left from an earlier attachment first (and on drop, below).
            let partx = |op: &str| {
                Command::new("partx")
                    .args([op, &l.dev])
                    .status()
                    .is_ok_and(|s| s.success())
            };
            let _ = partx("-d");
            let ok = partx("-a");
            l.fs_dev = format!("{}p1", l.dev);
            if !ok || !Path::new(&l.fs_dev).exists() {
                return Err(format!("partx -a {} made no {}", l.dev, l.fs_dev));
            }
        }
        mqblk_testkit::mkfs_ext4_and_mount(&l.fs_dev, &l.mnt)?;
        Ok(l)
    }

    /// A real workload: copy a source tree in, write it out, read it back from a cold
    /// cache.
    fn workload(&self) {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        assert!(Command::new("cp")
            .arg("-r")
            .arg(&src)
            .arg(&self.mnt)
            .status()
            .unwrap()
            .success());
        let _ = Command::new("sync").status();
        let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
        let _ = Command::new("grep")
            .args(["-r", "fn "])
            .arg(&self.mnt)
            .output();
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        mqblk_testkit::umount(&self.mnt);
        if self.fs_dev != self.dev {
            // The partition partx added would outlive the attachment (see `LoopFs::new`).
            let _ = Command::new("partx").args(["-d", &self.dev]).status();
        }
        mqblk_testkit::detach_loop(&self.dev);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `mqblk trace capture` and waits until its tracefs instance has its events on.
fn start_capture(dev: &str, base: &Path, extra: &[&str]) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(["trace", "capture", &format!("--device={dev}")])
        .args(extra)
        .arg("-o")
        .arg(base)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let enable = Path::new(TRACING).join(format!(
        "instances/mqblk-{}/events/block/block_rq_complete/enable",
        child.id()
    ));
    let t0 = Instant::now();
    while std::fs::read_to_string(&enable).map_or(true, |s| s.trim() != "1")
        && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn leftover_instances() -> Vec<String> {
    std::fs::read_dir(Path::new(TRACING).join("instances"))
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("mqblk-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks a finished capture: its own counts, ours read back, blkparse's (counts and
/// lines) and the tracing state. Returns the trace.
fn check_capture(out: &Output, base: &Path, before: &Option<[String; 3]>) -> TraceSet {
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("captured "))
        .expect("a captured line");
    let said = counts_in(line);
    for k in ['Q', 'D', 'C'] {
        assert!(
            said.get(&k).copied().unwrap_or(0) > 0,
            "no {k} events: {line}"
        );
    }
    assert!(
        leftover_instances().is_empty(),
        "a tracefs instance was left"
    );
    assert_eq!(&tracing_state(), before, "the global tracing state changed");
    let set = TraceSet::open(base).unwrap();
    assert_eq!(set.counts(), said, "read back vs what the capture said");
    if let Some(theirs) = blkparse_lines(base) {
        assert_eq!(letter_counts(&theirs), said, "blkparse's per-action counts");
        let ours: Vec<String> = set.blkparse_lines().collect();
        assert_same_lines(&ours, &theirs);
    }
    set
}

/// Our dump's lines against blkparse's, failing with the first lines that differ (a whole
/// capture's dump is too long for a failure message to show).
fn assert_same_lines(ours: &[String], theirs: &[String]) {
    if let Some(i) = (0..ours.len().max(theirs.len())).find(|&i| ours.get(i) != theirs.get(i)) {
        let around = |v: &[String]| v[i.saturating_sub(2)..(i + 3).min(v.len())].join("\n");
        panic!(
            "dump vs blkparse: {} lines vs {}, first difference at line {i}:\nours:\n{}\nblkparse:\n{}",
            ours.len(),
            theirs.len(),
            around(ours),
            around(theirs)
        );
    }
}

/// Runs a capture of a fresh loop file system (on its partition with `partition`) while a
/// real workload runs, stops it with `signal`, and checks it (see [`check_capture`]).
/// `None`, with the reason printed, where captures cannot run.
fn capture_workload(
    test: &str,
    partition: bool,
    extra: &[&str],
    signal: &str,
) -> Option<(LoopFs, PathBuf, TraceSet)> {
    let fs = capture_unavailable()
        .map_or_else(|| LoopFs::new(test, partition), Err)
        .map_err(|why| mqblk_testkit::skip(test, &why))
        .ok()?;
    let _one = TRACEFS.lock().unwrap_or_else(|e| e.into_inner());
    let before = tracing_state();
    // The instance of a capture that was killed outright (no process has this pid): the
    // next capture removes it.
    let stale = Path::new(TRACING).join("instances/mqblk-999999999");
    if before.is_some() {
        std::fs::create_dir(&stale).unwrap();
    }
    let base = fs.dir.join("cap");
    let dev = if partition { &fs.fs_dev } else { &fs.dev };
    let cap = start_capture(dev, &base, extra);
    fs.workload();
    assert!(Command::new("kill")
        .args([signal, &cap.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = cap.wait_with_output().unwrap();
    let set = check_capture(&out, &base, &before);
    Some((fs, base, set))
}

#[test]
fn capture_a_loop_device_under_a_real_workload_until_ctrl_c() {
    let Some((_fs, base, _)) = capture_workload("capture-ctrl-c", false, &[], "-INT") else {
        return;
    };
    // The capture replays: every traced request, its bytes.
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
    assert_eq!(r["trace_bytes"], r["replayed_bytes"]);
}

#[test]
fn capture_a_partition_on_its_disk_like_blktrace() {
    // Stopped by SIGTERM this time (the duration is a bound that is not reached).
    let Some((_fs, _, set)) =
        capture_workload("capture-partition", true, &["--duration=60"], "-TERM")
    else {
        return;
    };
    // Every event is on the disk, inside the partition; remaps say where from.
    let part_end = 64u64 << 11;
    for r in set.records.iter().filter(|r| !r.is_notify()) {
        assert!(
            (2048..part_end).contains(&r.sector),
            "sector {} outside the partition",
            r.sector
        );
    }
    let remaps: Vec<_> = set.of(mqblk_trace::format::ta::REMAP).collect();
    assert!(!remaps.is_empty(), "no remap events");
    for a in remaps {
        let (_, to, from) = a.remap().unwrap();
        assert_eq!((to, from + 2048), (a.device, a.sector));
    }
}

#[test]
fn capture_refuses_what_is_not_a_block_device() {
    for (out, err) in [
        ("/tmp/x", "/dev/null: not a block device"),
        (
            "/nonexistent/x",
            "/nonexistent/x: the directory /nonexistent does not exist",
        ),
    ] {
        let o = mqblk(&["trace", "capture", "--device=/dev/null", "-o", out]);
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(
            text(&o.stderr).lines().last().unwrap(),
            format!("mqblk trace: {err}")
        );
    }
    for (args, err) in [
        (
            vec!["capture", "-o", "x"],
            "required arguments were not provided: --device <DEVICE>",
        ),
        (
            vec!["capture", "--device=/dev/sda"],
            "required arguments were not provided: --output <OUTPUT>",
        ),
        (
            vec!["capture", "--device=/dev/sda", "--duration=0", "-o", "x"],
            "invalid value '0' for '--duration <DURATION>': '0': expected a positive number",
        ),
        (
            vec!["capture", "--bogus"],
            "unexpected argument '--bogus' found",
        ),
    ] {
        let mut a = vec!["trace"];
        a.extend(args);
        let o = mqblk(&a);
        assert_eq!(o.status.code(), Some(2));
        let e = text(&o.stderr);
        assert!(
            e.starts_with("mqblk trace capture: ")
                && e.contains(err)
                && e.trim_end().ends_with("(mqblk trace capture --help)")
                && e.trim_end().lines().count() == 1,
            "{e}"
        );
    }
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
    if have_blkparse("bench_trace_output_is_read_by_blkparse") {
        let t = blkparse_totals(&base).expect("blkparse summary");
        // Two jobs reading the same 2 MiB at random now and then read neighbours at once,
        // and the second bio merges into the first one's request: a request per bio that
        // did not merge completes.
        assert_eq!(t[0], 1024, "blkparse totals {t:?}");
        assert_eq!(t[2] + t[3], 1024, "blkparse totals {t:?}");
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
    if have_blkparse("a_trace_without_events_on_cpu_0_is_still_read_by_blkparse") {
        let t = blkparse_totals(&base).expect("blkparse summary");
        assert_eq!(t[0], 256, "{t:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `mqblk trace stats NAME --output-format=json`: the first device's figures.
fn stats_of(name: &Path) -> serde_json::Value {
    let o = mqblk(&[
        "trace",
        "stats",
        &name.display().to_string(),
        "--output-format=json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["devices"][0].clone()
}

#[test]
fn trace_stats_sees_the_devices_time_and_the_schedulers_plugging() {
    // A null device that takes 200 us a request. One job at depth 4: four in the driver
    // at once, every one 200 us on the device, the device never empty. Two readers of one
    // request at a time, a heavier one (be/0) thinking 4 ms between reads: BFQ (without
    // weight raising, which would raise only the other, default-weight one) keeps the
    // device for the heavier one while it thinks (its weight makes the scenario
    // asymmetric), so the other's read sometimes waits on an idle device; mq-deadline
    // never leaves it idle with a request waiting.
    let d = tmpdir("stats");
    let run = |name: &str, extra: &[&str]| {
        let base = d.join(name);
        let mut args = vec![
            "sim",
            "--device=null,completion_nsec=200000",
            "--rw=randread",
            "--bs=4k",
            "--runtime=500ms",
        ];
        args.extend_from_slice(extra);
        let trace = format!("--trace={}", base.display());
        args.push(&trace);
        let o = mqblk(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        stats_of(&base)
    };
    let full = run("full", &["--iodepth=4", "--ioscheduler=none", "--name=s"]);
    let d2c = full["d2c_read_us"].as_f64().unwrap();
    assert!((d2c - 200.0).abs() < 5.0, "{full}");
    assert_eq!(full["max_in_driver"], 4, "{full}");
    assert!(full["busy"].as_f64().unwrap() > 0.99, "{full}");
    let waiting = |name: &str, tunable: &[&str]| {
        let sched = format!("--ioscheduler={name}");
        let mut extra = vec!["--iodepth=1", sched.as_str()];
        extra.extend_from_slice(tunable);
        extra.extend_from_slice(&[
            "--name=heavy",
            "--prioclass=2",
            "--prio=0",
            "--thinktime=4000",
            "--thinktime_blocks=1",
            "--name=light",
        ]);
        run(name, &extra)["waiting"].as_f64().unwrap()
    };
    let bfq = waiting("bfq", &["--sched.low_latency=0"]);
    let dl = waiting("mq-deadline", &[]);
    assert!(
        dl < 0.005,
        "mq-deadline left the device idle with work {dl}"
    );
    assert!(bfq > 0.02, "bfq {bfq} against mq-deadline {dl}");
    // Bad input: one line naming the file.
    let o = mqblk(&["trace", "stats", &d.join("nothing").display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1, "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_scenario_writes_each_runs_trace_when_asked() {
    let d = tmpdir("scenario");
    let prefix = d.join("run");
    let o = mqblk(&[
        "scenario",
        "mmc-blk-mq",
        "--quick",
        "--svg=-",
        &format!("--trace={}", prefix.display()),
    ]);
    assert!(
        o.status.success() || o.status.code() == Some(3),
        "{}",
        text(&o.stderr)
    );
    let err = text(&o.stderr);
    let runs: Vec<&str> = err.lines().filter(|l| l.starts_with("trace ")).collect();
    assert!(runs.len() >= 2, "{err}");
    assert!(runs[0].contains(" on emmc"), "{}", runs[0]);
    let s = stats_of(&d.join("run.0"));
    assert!(s["issued"].as_u64().unwrap() > 0, "{s}");
    let _ = std::fs::remove_dir_all(&d);
}
