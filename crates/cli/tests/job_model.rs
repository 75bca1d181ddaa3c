//! One job model: the same fio job files run by `mqblk bench` (threads, real time) and by
//! `mqblk sim` (virtual time) issue the same I/O: the same operations, flags, offsets and
//! sizes in the same order, and under a rate limit the same count within a margin.

use mqblk_trace::TraceSet;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mqblk-jobmodel-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One queued bio as the blktrace shows it: RWBS, sector, bytes.
type Queued = (String, u64, u32);

/// Runs `mqblk CMD JOBFILE --trace=...` and returns the queued bios per issuer, in issue
/// order, and the JSON report.
fn run(cmd: &str, job: &str, extra: &[&str]) -> (BTreeMap<u32, Vec<Queued>>, serde_json::Value) {
    run_job(cmd, job, extra, false)
}

/// [`run`] with no other test's run beside it (see [`RUNS`]).
fn run_alone(cmd: &str, job: &str) -> (BTreeMap<u32, Vec<Queued>>, serde_json::Value) {
    run_job(cmd, job, &[], true)
}

fn run_job(
    cmd: &str,
    job: &str,
    extra: &[&str],
    alone: bool,
) -> (BTreeMap<u32, Vec<Queued>>, serde_json::Value) {
    let file = examples().join(job).display().to_string();
    let args: Vec<&str> = std::iter::once(file.as_str())
        .chain(extra.iter().copied())
        .collect();
    let tag = format!("{cmd}-{}", job.replace('.', "-"));
    if alone {
        let _alone = RUNS.write().unwrap_or_else(|e| e.into_inner());
        run_unlocked(cmd, &tag, &args)
    } else {
        run_args(cmd, &tag, &args)
    }
}

/// Held shared by every run and alone by [`run_alone`], the rate test's real-time run: a rate-limited
/// mixed job picks each direction by the wall clock, so the other tests' runs on the same
/// two cores must not make its clock late.
static RUNS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs `mqblk CMD ARGS --trace=...`; see [`run`].
fn run_args(
    cmd: &str,
    tag: &str,
    args: &[&str],
) -> (BTreeMap<u32, Vec<Queued>>, serde_json::Value) {
    let _shared = RUNS.read().unwrap_or_else(|e| e.into_inner());
    run_unlocked(cmd, tag, args)
}

fn run_unlocked(
    cmd: &str,
    tag: &str,
    args: &[&str],
) -> (BTreeMap<u32, Vec<Queued>>, serde_json::Value) {
    let d = scratch(tag);
    let base = d.join("t");
    let out = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .arg(cmd)
        .args(args)
        .arg(format!("--trace={}", base.display()))
        .arg("--output-format=json")
        .output()
        .unwrap();
    // 1: the run finished and some I/O failed (fault injection).
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "mqblk {cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let set = TraceSet::open(&base).unwrap();
    let mut per: BTreeMap<u32, Vec<Queued>> = BTreeMap::new();
    for r in set.queued() {
        per.entry(r.pid)
            .or_default()
            .push((r.rwbs(), r.sector, r.bytes));
    }
    let _ = std::fs::remove_dir_all(&d);
    (per, json)
}

fn job_totals(json: &serde_json::Value) -> Vec<(u64, u64, u64)> {
    json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["read"]["io_bytes"].as_u64().unwrap(),
                j["write"]["io_bytes"].as_u64().unwrap(),
                j["sync"]["total_ios"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn bench_and_sim_issue_the_same_bios_for_the_same_job_files() {
    for job in [
        "mixed.fio",
        "verify.fio",
        "seq-regions.fio",
        "database.fio",
        "zipf-cache.fio",
        "fileset.fio",
        "zoned.fio",
    ] {
        let (real, real_json) = run("bench", job, &[]);
        let (sim, sim_json) = run("sim", job, &[]);
        assert!(!real.is_empty(), "{job}: nothing traced");
        assert_eq!(
            real.keys().collect::<Vec<_>>(),
            sim.keys().collect::<Vec<_>>(),
            "{job}: issuers"
        );
        for (pid, ios) in &real {
            let s = &sim[pid];
            assert_eq!(ios.len(), s.len(), "{job}: issuer {pid}: bio count");
            if let Some(i) = (0..ios.len()).find(|&i| ios[i] != s[i]) {
                panic!(
                    "{job}: issuer {pid}: bio {i} differs: bench {:?}, sim {:?}",
                    ios[i], s[i]
                );
            }
        }
        assert_eq!(
            job_totals(&real_json),
            job_totals(&sim_json),
            "{job}: bytes read, written and flushes per job"
        );
        eprintln!(
            "{job}: {} issuers, {} bios each side, identical",
            real.len(),
            real.values().map(Vec::len).sum::<usize>()
        );
    }
}

#[test]
fn split_block_sizes_flushes_and_verify_reach_both_runners() {
    let (real, _) = run("bench", "mixed.fio", &[]);
    for ios in real.values() {
        let reads = ios.iter().filter(|q| q.0.starts_with('R')).count();
        let writes: Vec<_> = ios.iter().filter(|q| q.0.starts_with('W')).collect();
        let flushes = ios.iter().filter(|q| q.0.starts_with('F')).count();
        assert!(reads > 0 && !writes.is_empty());
        assert!(writes.iter().all(|w| w.2 == 65536), "64 KiB writes");
        assert!(ios
            .iter()
            .filter(|q| q.0.starts_with('R'))
            .all(|r| r.2 == 4096));
        assert_eq!(flushes, writes.len() / 16 + 1, "fsync=16 and end_fsync");
    }
    let (sim, _) = run("sim", "verify.fio", &[]);
    let ios = sim.values().next().unwrap();
    let writes = ios.iter().filter(|q| q.0.starts_with('W')).count();
    let reads = ios.iter().filter(|q| q.0.starts_with('R')).count();
    assert_eq!(
        (writes, reads),
        (256, 256),
        "4 MiB in 16 KiB blocks, then read back"
    );
}

#[test]
fn a_rate_limit_gives_the_same_count_in_real_and_virtual_time() {
    let (real, real_json) = run_alone("bench", "rate.fio");
    let (sim, sim_json) = run("sim", "rate.fio", &[]);
    let (r, s) = (&real[&1], &sim[&1]);
    // 200 reads and 200 writes a second over the ramp and the run (1.1 s): up to 442 I/Os,
    // a few less as a 50/50 draw lets one direction run ahead and wait (the job waits with
    // it, as fio's thread does); the real clock may be a few late.
    assert!((420..=443).contains(&s.len()), "sim issued {}", s.len());
    assert!(
        r.len().abs_diff(s.len()) <= 8,
        "bench issued {}, sim {}",
        r.len(),
        s.len()
    );
    let n = r.len().min(s.len());
    // A mixed job under rates picks each I/O's direction by how far each direction is
    // behind its schedule (fio's `rate_ddir`): a real clock running late on a loaded
    // machine can tip one choice near the end, after which the directions differ (the
    // offsets still come from the same stream). Up to there the bios are the same.
    let same = r[..n]
        .iter()
        .zip(&s[..n])
        .take_while(|(a, b)| a == b)
        .count();
    assert!(
        same >= n * 3 / 4,
        "the same bios in the same order: the first difference at {same} of {n}: bench {:?}, sim {:?}",
        r.get(same),
        s.get(same)
    );
    // Statistics leave the ramp out in both: ~400 I/Os counted, not ~440.
    for json in [&real_json, &sim_json] {
        let j = &json["jobs"][0];
        let ios =
            j["read"]["total_ios"].as_u64().unwrap() + j["write"]["total_ios"].as_u64().unwrap();
        assert!((375..=410).contains(&ios), "counted after the ramp: {ios}");
    }
}

/// Every job option that shapes what a job issues, set on a base job: the simulator issues
/// exactly what the threaded runner issues (every bio, in order, per issuer), and the
/// option changed it. Options that shape only timing (iodepth, batching), the device or the
/// report are covered elsewhere (the device options by `DeviceConfig::from_jobs`, the
/// rate and ramp by the rate test above).
#[test]
fn each_option_changes_the_simulated_run_as_it_changes_the_real_one() {
    let base_job = [
        "--name=j",
        "--rw=randrw",
        "--bs=4k",
        "--size=1m",
        "--iodepth=4",
        "--memory_backed",
        // A write cache, so fsync= and end_fsync= reach the device.
        "--cache_size=1",
    ];
    let streams = |tag: &str, extra: &[&str]| {
        let args: Vec<&str> = base_job.iter().chain(extra).copied().collect();
        let (real, _) = run_args("bench", &format!("b-{tag}"), &args);
        let (sim, _) = run_args("sim", &format!("s-{tag}"), &args);
        assert_eq!(real, sim, "{extra:?}: bench and sim issued different bios");
        real
    };
    let base = streams("base", &[]);
    for (i, opt) in [
        &["--rw=read"][..],
        &["--rw=write"],
        &["--rw=randread"],
        &["--rw=randwrite"],
        &["--rw=readwrite"],
        &["--rwmixread=80"],
        &["--rwmixwrite=80"],
        &["--bs=8k"],
        &["--bs=4k,16k"],
        &["--size=512k"],
        &["--offset=1m"],
        &["--numjobs=2"],
        &["--randseed=5"],
        &["--fsync=4"],
        &["--end_fsync=1"],
        &["--verify=crc32c"],
        &["--rw=randwrite", "--verify=crc32c", "--do_verify=0"],
        &["--direct=1"],
        &["--prioclass=1", "--prio=0", "--ioscheduler=bfq"],
        &["--cgroup=a", "--cgroup_weight=200", "--ioscheduler=bfq"],
    ]
    .iter()
    .enumerate()
    {
        let got = streams(&format!("o{i}"), opt);
        let same_bios = got == base;
        // Priority and cgroup do not change what is issued, only how it is scheduled: they
        // must reach the bios (the schedulers' own tests show what they do), so these are
        // checked to leave the stream alone.
        let scheduling_only = opt
            .iter()
            .any(|o| o.starts_with("--prio") || o.starts_with("--cgroup"));
        assert_eq!(
            same_bios,
            scheduling_only,
            "{opt:?}: {}",
            if same_bios {
                "changed nothing that was issued"
            } else {
                "changed the bios"
            }
        );
    }
}

/// The job's fault options inject the same faults in both: every 10th request of the null
/// device fails, in real and in virtual time.
#[test]
fn fault_options_fail_the_same_requests_in_bench_and_sim() {
    let args = [
        "--name=f",
        "--rw=randread",
        "--size=4m",
        "--iodepth=8",
        "--fail_nth=10",
        "--continue_on_error=all",
    ];
    let (_, real) = run_args("bench", "fault-b", &args);
    let (_, sim) = run_args("sim", "fault-s", &args);
    // A device model in real time injects through the same port as in the simulator.
    let on_model: Vec<&str> = args.iter().copied().chain(["--device=ssd"]).collect();
    let (_, model) = run_args("bench", "fault-m", &on_model);
    for (what, json) in [
        ("bench", &real),
        ("sim", &sim),
        ("bench on a model", &model),
    ] {
        let j = &json["jobs"][0];
        assert_eq!(j["error"], 5, "{what}: EIO");
        assert_eq!(
            j["read"]["total_ios"],
            1024 - 102,
            "{what}: 102 of 1024 failed"
        );
        // fio's keys of a job that goes on after errors.
        assert_eq!(
            (&j["total_err"], &j["first_error"]),
            (&102.into(), &5.into())
        );
    }
    // Without continue_on_error the first error ends the job, as fio's: one read at a time,
    // the 10th fails and nothing follows it, in bench and sim alike.
    let first = ["--name=f", "--rw=randread", "--size=4m", "--fail_nth=10"];
    for cmd in ["bench", "sim"] {
        let (_, json) = run_args(cmd, &format!("fault-first-{cmd}"), &first);
        let j = &json["jobs"][0];
        assert_eq!(j["error"], 5, "{cmd}: {j}");
        assert_eq!(j["read"]["total_ios"], 9, "{cmd}: {j}");
        assert!(
            j["total_err"].is_null(),
            "{cmd}: fio shows it only with continue_on_error"
        );
    }
}

/// fio's I/O depth distributions come out of the simulator as out of the threaded runner:
/// batches of 4 submitted, and with `iodepth_batch_complete_min=8` completions collected 8
/// at a time (a null device that completes after 10 µs, so completions are not inline).
#[test]
fn iodepth_batching_shows_in_both_reports() {
    let args = [
        "--irqmode=timer",
        "--name=d",
        "--rw=randread",
        "--iodepth=16",
        "--iodepth_batch_submit=4",
        "--iodepth_batch_complete_min=8",
        "--runtime=200ms",
        "--time_based",
    ];
    let (_, real) = run_args("bench", "depth-b", &args);
    let (_, sim) = run_args("sim", "depth-s", &args);
    for (what, json) in [("bench", &real), ("sim", &sim)] {
        let j = &json["jobs"][0];
        let pct = |dist: &str, bucket: &str| j[dist][bucket].as_f64().unwrap_or(0.0);
        assert!(
            pct("iodepth_submit", "4") > 95.0,
            "{what}: {}",
            j["iodepth_submit"]
        );
        assert!(
            pct("iodepth_complete", "8") > 90.0,
            "{what}: {}",
            j["iodepth_complete"]
        );
    }
}

/// fio's `zonemode=zbd` on the null device's zoned mode (`examples/zbd.fio`: sixteen random
/// writers, at most 32 zones open, then a sequential reader): in bench every write reaches
/// the device at its zone's write pointer (the zoned null device fails any other, and a
/// failure would show in the report), full zones are reset on the way, and the reader
/// reads what is there; the simulator runs the same file on zones it emulates.
#[test]
fn zoned_writers_reach_the_zoned_null_device_in_order_in_bench_and_run_in_sim() {
    for cmd in ["bench", "sim"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mqblk"))
            .args([cmd, "--output-format=json"])
            .arg(examples().join("zbd.fio"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mqblk {cmd} zbd.fio: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let jobs = json["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 2, "{cmd}: the writers' group and the reader");
        for j in jobs {
            assert_eq!(j["error"], 0, "{cmd}: {}", j["jobname"]);
        }
        let written = jobs[0]["write"]["io_bytes"].as_u64().unwrap();
        let read = jobs[1]["read"]["io_bytes"].as_u64().unwrap();
        // More than the 1 GiB device holds was written (zones were reset), and the reader
        // found data below the write pointers, never more than the device.
        assert!(written > 1 << 30, "{cmd}: {written} bytes written");
        assert!(read > 0 && read <= 1 << 30, "{cmd}: {read} bytes read");
    }
}
