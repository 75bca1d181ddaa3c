//! `mqblk profile` and the model fitted to a profile (`--device=profile:FILE.toml`), as a
//! user runs them: a model profiled in the simulator and fitted again reproduces its
//! source's figures and a scheduler's effect; a file on this machine's disk is profiled
//! through io_uring; bad profiles get one line.

mod common;
use common::{mqblk, refused_in_one_line, text};
use std::path::{Path, PathBuf};

/// A scratch directory on the disk (not tmpfs: a profile needs a block queue under it).
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The JSON report of `mqblk sim` of `job` (options) on `device` under `sched`.
fn sim_json(device: &str, sched: &str, job: &[&str]) -> serde_json::Value {
    let dev = format!("--device={device}");
    let sch = format!("--ioscheduler={sched}");
    let mut args = vec!["sim", &dev, &sch, "--output-format=json"];
    args.extend_from_slice(job);
    let o = mqblk(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `mqblk sim` of `job` (options) on `device` under `sched`: each job's IOPS.
fn iops(device: &str, sched: &str, job: &[&str]) -> Vec<f64> {
    sim_json(device, sched, job)["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["read"]["iops"].as_f64().unwrap() + j["write"]["iops"].as_f64().unwrap())
        .collect()
}

fn within(a: f64, b: f64, margin: f64) -> bool {
    (a / b - 1.0).abs() <= margin
}

/// Profile the `ssd` model, fit a model to the profile, simulate again: the fitted model
/// gives the source's figures where the profile measured them, and BFQ's effect on a
/// reader beside a write flood (what `mqblk twin` compares) within 10%.
#[test]
fn a_profiled_model_fitted_again_reproduces_its_figures_and_a_schedulers_effect() {
    let dir = scratch("profile-model");
    let file = dir.join("ssd.toml");
    let out = format!("--output={}", file.display());
    let o = mqblk(&["profile", "--device=ssd", "--quick", &out]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    // Sixteen measurements, and the fsync pair since the ssd model has FUA.
    assert!(
        err.contains("[17/17]"),
        "progress for every measurement: {err}"
    );
    let toml = std::fs::read_to_string(&file).unwrap();
    assert!(
        toml.contains("# random reads of 4 KiB, one at a time"),
        "{toml}"
    );
    // Four jobs at one each are measured as one measurement, their IOPS summed: on the
    // ssd model, whose units serve four reads side by side, about four times one alone's.
    let profile: toml::Value = toml::from_str(&toml).unwrap();
    let measure = |name: &str| {
        profile["measure"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("{name} is not in {toml}"))
            .clone()
    };
    let (alone, four) = (measure("randread_4k_qd1"), measure("randread_4k_qd1_jobs4"));
    assert_eq!(four["jobs"].as_integer(), Some(4), "{toml}");
    let ratio = four["iops"].as_float().unwrap() / alone["iops"].as_float().unwrap();
    assert!(
        ratio > 3.0 && ratio <= 4.4,
        "four jobs at {ratio:.2} x one alone: {toml}"
    );
    // The fitted parameters, as a user reads them: a line each, and the same in JSON.
    let fit_arg = format!("--fit={}", file.display());
    let o = mqblk(&["profile", &fit_arg]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines = text(&o.stdout);
    for want in [
        "served together, times one alone",
        "a read's wake when none is in flight",
        "random read alone",
        "transfer path, reads / writes",
        "share of a command's time that varies",
        "share of the path's time that varies, reads / writes",
        "completions reported",
    ] {
        assert!(lines.contains(want), "{want}: {lines}");
    }
    let o = mqblk(&["profile", &fit_arg, "--output-format=json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let fit: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The ssd model's lone read is its fastest: no wake, and no depth served faster than
    // its count in flight allows.
    assert_eq!(fit["read_wake_ns"].as_f64(), Some(0.0), "{fit}");
    for pair in fit["speedup"].as_array().unwrap() {
        let (d, c) = (pair[0].as_f64().unwrap(), pair[1].as_f64().unwrap());
        assert!(c >= 1.0 && c <= d, "speedup {c} at {d}: {fit}");
    }
    // The JSON carries every depth the profile measured, and the text says what the JSON
    // does: a 4 KiB read alone is the base plus 4096 bytes' worth.
    let depths: Vec<u64> = fit["speedup"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_u64().unwrap())
        .collect();
    assert_eq!(depths, [1, 2, 4, 8, 16, 64], "{fit}");
    let k4_us = (fit["read_base_ns"].as_f64().unwrap()
        + 4096.0 * fit["read_ns_per_byte"].as_f64().unwrap())
        / 1e3;
    let k4_line = lines
        .lines()
        .find(|l| l.starts_with("random read alone"))
        .unwrap();
    assert!(
        k4_line.ends_with(&format!("(4 KiB: {k4_us:.1} us)")),
        "{k4_line} against {k4_us:.1} us"
    );
    let fitted = format!("profile:{}", file.display());
    for job in [
        ["--rw=randread", "--bs=4k", "--iodepth=1"],
        ["--rw=read", "--bs=1m", "--iodepth=16"],
        ["--rw=randread", "--bs=4k", "--iodepth=16"],
    ] {
        let mut j = job.to_vec();
        j.extend(["--runtime=300ms", "--time_based", "--name=x"]);
        let (src, fit) = (iops("ssd", "none", &j)[0], iops(&fitted, "none", &j)[0]);
        assert!(
            within(fit, src, 0.10),
            "{job:?}: ssd {src:.0} IOPS, fitted {fit:.0}"
        );
    }
    // A QD1 reader beside a 128 KiB write flood: BFQ's effect on the reader over none.
    let flood = [
        "--runtime=1s",
        "--time_based",
        "--size=4g",
        "--name=reader",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=1",
        "--name=writer",
        "--rw=write",
        "--bs=128k",
        "--iodepth=16",
    ];
    let effect = |dev: &str| iops(dev, "bfq", &flood)[0] / iops(dev, "none", &flood)[0];
    let (src, fit) = (effect("ssd"), effect(&fitted));
    assert!(
        src > 5.0,
        "BFQ protects the reader on the source model: x{src:.1}"
    );
    assert!(
        within(fit, src, 0.10),
        "BFQ's effect: ssd x{src:.1}, fitted x{fit:.1}"
    );

    // Where the completions are handled: a model measured no CPU, so the queue's (CPU 0,
    // beside the job); a CPU that took them all in the profile, there; a loop device's
    // worker, the queue's CPU while it is idle (one read at a time: the job waits), another
    // while the job's is busy (32 at a time).
    assert!(toml.contains("completion_cpus = []"), "{toml}");
    // 20 ms of random 4 KiB reads under `none` on the profile as `edit` leaves it, with
    // `extra` options (the CPUs, the depth, the jobs, a cost).
    let sim_edited = |edit: &dyn Fn(&str) -> String, extra: &[&str]| {
        let f = dir.join("edited.toml");
        std::fs::write(&f, edit(&toml)).unwrap();
        let base = ["--rw=randread", "--bs=4k", "--runtime=20ms", "--time_based"];
        let job: Vec<&str> = extra
            .iter()
            .chain(&base)
            .copied()
            .chain(["--name=x"])
            .collect();
        sim_json(&format!("profile:{}", f.display()), "none", &job)
    };
    let run = |edit: &dyn Fn(&str) -> String, depth: &str| -> (Vec<u64>, u64) {
        let v = sim_edited(edit, &["--cpus=2", depth]);
        let busy = v["mqblk_sim"]["cpu_busy_ns"].as_array().unwrap();
        let ios = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
        (busy.iter().map(|b| b.as_u64().unwrap()).collect(), ios)
    };
    let busy = |edit: &dyn Fn(&str) -> String, depth: &str| run(edit, depth).0;
    let mapped = busy(&|t| t.to_string(), "--iodepth=1");
    assert!(mapped[0] > 0 && mapped[1] == 0, "{mapped:?}");
    let on_1 = busy(
        &|t| t.replace("completion_cpus = []", "completion_cpus = [0.0, 1.0]"),
        "--iodepth=1",
    );
    assert!(on_1[1] > 0, "{on_1:?}");
    let to_worker = |t: &str| t.replace("backing_file = \"\"", "backing_file = \"/x.img\"");
    let worker = busy(&to_worker, "--iodepth=32");
    assert!(worker[1] > 0, "{worker:?}");
    let worker_idle = busy(&to_worker, "--iodepth=1");
    assert!(worker_idle[0] > 0 && worker_idle[1] == 0, "{worker_idle:?}");
    // The worker's CPU time per read, as measured outside the load generator, is spent on
    // the CPU that completes the read: one at a time, CPU 0 is busy 20 us more per read.
    assert!(toml.contains("outside_cpu_ns = 0"), "{toml}");
    let per_read = |(busy, ios): (Vec<u64>, u64)| busy[0] as f64 / ios.max(1) as f64;
    let without = per_read(run(&to_worker, "--iodepth=1"));
    let with = per_read(run(
        &|t| to_worker(t).replace("outside_cpu_ns = 0", "outside_cpu_ns = 20000"),
        "--iodepth=1",
    ));
    assert!(
        within(with - without, 20_000.0, 0.05),
        "CPU 0 per read: {without:.0} ns, with the worker's 20 us {with:.0} ns"
    );
    // The worker wakes each job it completed a read for, on its own CPU too: two jobs one
    // read at a time on one CPU pay a wake-up per read (before, only a wake-up from
    // another CPU was charged, so none here).
    let per_read_woken = |wake: &str| {
        let v = sim_edited(
            &to_worker,
            &["--cpus=1", "--numjobs=2", "--iodepth=1", wake],
        );
        let s = &v["mqblk_sim"];
        s["cpu_busy_ns"][0].as_f64().unwrap() / s["requests"].as_f64().unwrap()
    };
    let (asleep, woken) = (
        per_read_woken("--cost=wake_ns=0"),
        per_read_woken("--cost=wake_ns=20000"),
    );
    assert!(
        within(woken - asleep, 20_000.0, 0.05),
        "CPU 0 per read: {asleep:.0} ns without wake-ups, {woken:.0} ns at 20 us each"
    );
    // One worker (`loop_process_work` on one CPU at a time), 20 us a command, 32 commands at
    // a time: it stays on the CPU beside the job's and serves at most 50K reads a second;
    // and it reads outside the scheduler's lock, which BFQ holds a few microseconds a read.
    let f = dir.join("worker.toml");
    std::fs::write(
        &f,
        to_worker(&toml).replace("outside_cpu_ns = 0", "outside_cpu_ns = 20000"),
    )
    .unwrap();
    let job = [
        "--cpus=2",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--runtime=20ms",
        "--time_based",
        "--name=x",
    ];
    let v = sim_json(&format!("profile:{}", f.display()), "bfq", &job);
    let s = &v["mqblk_sim"];
    let busy: Vec<u64> = s["cpu_busy_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    let (iops, requests) = (s["iops"].as_f64().unwrap(), s["requests"].as_f64().unwrap());
    assert!(iops <= 50_000.0 * 1.04, "one worker: {iops:.0} IOPS");
    assert!(busy[1] as f64 >= 0.9 * 20e6, "the worker's CPU: {busy:?}");
    let held = s["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "elevator")
        .map(|l| l["held_ns"].as_f64().unwrap())
        .unwrap();
    assert!(
        held / requests < 10_000.0,
        "BFQ's lock held {:.0} ns per read",
        held / requests
    );
    // The kernel's BFQ costs 20 us a read over none, 1 us of it under its lock: where fio's
    // job spent 1 us of it, the rest goes with the completion onto the worker's CPU; where
    // the job spent it all, it stays on the job's.
    let job_cpu_per_read = |in_job: u64| {
        let kc = dir.join(format!("kernel-costs-{in_job}.json"));
        std::fs::write(
            &kc,
            format!(
                r#"{{"schedulers": {{"none": {{"over_none_ns": 0}}, "bfq": {{"over_none_ns": 20000,
                    "locked_ns_per_io": 1000, "job_over_none_ns": {in_job}}}}}}}"#
            ),
        )
        .unwrap();
        let kc = format!("--kernel-costs={}", kc.display());
        let mut args = job.to_vec();
        args.extend(["--cost-profile=kernel", kc.as_str()]);
        let v = sim_json(&format!("profile:{}", f.display()), "bfq", &args);
        let s = &v["mqblk_sim"];
        s["cpu_busy_ns"][0].as_f64().unwrap() / s["requests"].as_f64().unwrap()
    };
    let (elsewhere, in_job) = (job_cpu_per_read(1000), job_cpu_per_read(20_000));
    assert!(
        elsewhere * 4.0 < in_job,
        "the job's CPU per read: {elsewhere:.0} ns with 1 us of BFQ's cost in the job, {in_job:.0} ns with all of it"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mqblk profile --quick` of a new 64 MiB file in a scratch directory, with `extra`
/// arguments: the directory, the data file and the profile's text, or `None` (a visible
/// skip) where the build directory is not on a disk.
fn profile_file(name: &str, extra: &[&str]) -> Option<(PathBuf, PathBuf, String)> {
    let dir = scratch(name);
    let data = dir.join("data");
    let file = dir.join("profile.toml");
    let (f, out) = (
        format!("--filename={}", data.display()),
        format!("--output={}", file.display()),
    );
    let mut args = vec!["profile", &f, "--size=64m", "--quick", &out];
    args.extend_from_slice(extra);
    let o = mqblk(&args);
    let err = text(&o.stderr);
    if !o.status.success() && err.contains("no block queue in sysfs") {
        mqblk_testkit::skip(name, "the build directory is not on a disk");
        return None;
    }
    assert!(o.status.success(), "{err}");
    let p = std::fs::read_to_string(&file).unwrap();
    assert_eq!(p.matches("[[measure]]").count(), 16, "{p}");
    // Every measurement but the reads beside the flood ran three times: their tails listed.
    let runs: Vec<&str> = p
        .lines()
        .filter(|l| l.starts_with("p99_runs = ["))
        .collect();
    assert_eq!(runs.len(), 15, "{p}");
    assert!(runs.iter().all(|l| l.matches(',').count() == 2), "{runs:?}");
    // Each such measurement's p99 is the median of its runs'.
    let parsed = mqblk_models::profile::Profile::parse("profile.toml", &p).unwrap();
    for m in parsed.measure.iter().filter(|m| !m.p99_runs.is_empty()) {
        let mut r = m.p99_runs.clone();
        r.sort_by(f64::total_cmp);
        assert!(
            (m.p99_us - r[1]).abs() < 0.01,
            "{}: {} of {r:?}",
            m.name,
            m.p99_us
        );
    }
    // Where the disk's completions ran, each CPU's share (none where they did not go
    // through the block softirq); the disk is not a loop device.
    let shares = &parsed.completion_cpus;
    assert!(
        shares.is_empty() || (shares.iter().sum::<f64>() - 1.0).abs() < 0.01,
        "{p}"
    );
    assert!(parsed.backing_file.is_empty(), "{p}");
    // The load generator's own CPU per read was measured, one at a time well above 64 at a
    // time (it sleeps and wakes for each read; here 31 us against 3 us through io_uring).
    let (one, deep) = (parsed.generator_cpu_ns, parsed.generator_cpu_deep_ns);
    assert!(
        deep > 0.0 && one > 1.5 * deep,
        "generator: {one} / {deep} ns, {p}"
    );
    // Every figure the profile keeps was read: none is zero.
    for key in ["iops = ", "mean_us = ", "p99_us = "] {
        assert!(
            !p.lines()
                .any(|l| l.starts_with(key) && l[key.len()..].trim() == "0.0"),
            "a zero {key}in {p}"
        );
    }
    // The fitted model simulates.
    let got = iops(
        &format!("profile:{}", file.display()),
        "mq-deadline",
        &[
            "--rw=randread",
            "--bs=4k",
            "--iodepth=8",
            "--runtime=100ms",
            "--time_based",
            "--name=x",
        ],
    );
    assert!(got[0] > 0.0, "{got:?}");
    Some((dir, data, p))
}

/// A file on this machine's disk profiled through io_uring: every measurement ran, the
/// queue's shape came from sysfs, the fitted model simulates, and the file is left as made.
/// A device that holds its completions back (this machine's virtio disk, measured by
/// `mqblk profile --fio=fio --filename=FILE` on 2026-12-03): its fitted model holds them
/// too, and profiling that model measures it again; without the figure the same model
/// completes each read when it is done, and profiling it says so.
#[test]
fn held_completions_are_measured_again_on_the_model_fitted_to_them() {
    let dir = scratch("profile-held");
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/profiles/vda-2026-12-03.toml"
    );
    let disk = std::fs::read_to_string(source).unwrap();
    let line = disk
        .lines()
        .find(|l| l.starts_with("held_completions = "))
        .expect("the disk's profile has its held completions");
    let measured: f64 = line["held_completions = ".len()..].parse().unwrap();
    assert!(measured >= 0.5, "{line}");
    let without = dir.join("not-held.toml");
    std::fs::write(&without, disk.replace(line, "")).unwrap();
    // The fitted parameters say which.
    let says = |profile: &Path| {
        let o = mqblk(&["profile", &format!("--fit={}", profile.display())]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
            .lines()
            .find(|l| l.starts_with("completions reported"))
            .unwrap()
            .to_string()
    };
    assert!(says(Path::new(source)).ends_with("held until no command is left, then all together"));
    assert!(says(&without).ends_with("each when done"));
    // Profiling each fitted model measures what it does.
    let held_of = |profile: &Path, name: &str| -> Option<f64> {
        let out = dir.join(name);
        let o = mqblk(&[
            "profile",
            &format!("--device=profile:{}", profile.display()),
            "--quick",
            &format!("--output={}", out.display()),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let p: toml::Value = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        p.get("held_completions").map(|h| h.as_float().unwrap())
    };
    let again = held_of(Path::new(source), "held-again.toml");
    assert!(again.is_some_and(|h| h >= 0.9), "{again:?}");
    let apart = held_of(&without, "not-held-again.toml");
    assert!(apart.is_some_and(|h| h < 0.3), "{apart:?}");
}

/// A model gives back the reads beside a write flood its device was measured with: the
/// profile's `randread_4k_qd1_under_writes` (one random 4 KiB read at a time beside
/// sequential 1 MiB writes 4 in flight), run by `mqblk sim` under `none` as the two-job
/// file it was measured with, within 15% of the measured mean. The device is a loop with direct I/O over
/// a file on this machine's disk (`losetup --direct-io=on`, profiled by `mqblk profile
/// --fio=fio --filename=/dev/loop1 --write-ok` on 2026-12-04). Taking the measured excess
/// as the read's own work, as though it had the device to itself, the model's reads took
/// 7.9 ms against the 3.7 measured: on the model they share the device with the writes.
#[test]
fn a_fitted_model_gives_back_the_reads_beside_writes_it_was_measured_with() {
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/profiles/loopdisk-2026-12-04.toml"
    );
    let profile: toml::Value = toml::from_str(&std::fs::read_to_string(source).unwrap()).unwrap();
    let measured = profile["measure"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"].as_str() == Some("randread_4k_qd1_under_writes"))
        .expect("the profile measured reads beside writes")["mean_us"]
        .as_float()
        .unwrap();
    let dir = scratch("profile-beside");
    let job = dir.join("beside.fio");
    std::fs::write(
        &job,
        "[global]\nruntime=3\ntime_based\n\n[writes]\nrw=write\nbs=1m\niodepth=4\n\n\
         [reads]\nrw=randread\nbs=4k\niodepth=1\n",
    )
    .unwrap();
    let report = sim_json(
        &format!("profile:{source}"),
        "none",
        &[job.to_str().unwrap()],
    );
    let reads = report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobname"] == "reads")
        .unwrap();
    let model = reads["read"]["clat_ns"]["mean"].as_f64().unwrap() / 1e3;
    assert!(
        within(model, measured, 0.15),
        "the model's reads beside the writes took {model:.0} us, the device's {measured:.0} us"
    );
    // `mqblk profile --fit` shows the value replayed and the one read off the measurement.
    let o = mqblk(&["profile", &format!("--fit={source}")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let shown = text(&o.stdout);
    let line = shown
        .lines()
        .find(|l| l.starts_with("a read slowed per MiB of writes in flight"))
        .unwrap();
    assert!(
        line.contains("(replayed on the model;")
            && line.contains("read straight off the measurement)"),
        "{line}"
    );
}

#[test]
fn a_file_on_the_disk_is_profiled_through_io_uring() {
    let Some((dir, data, p)) = profile_file("profile-file", &[]) else {
        return;
    };
    assert!(
        p.contains("writes = true") && p.contains("nr_tags = "),
        "{p}"
    );
    assert!(p.contains("engine = \"mqblk bench\""), "{p}");
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 64 << 20);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--fio=BIN` runs the same measurements through fio, the kernel's own path (what `mqblk
/// twin --sim` profiles with): the profile names fio's version as its engine and fits, and
/// a binary that is not fio is refused in one line naming it. fio must be installed in CI.
#[test]
fn a_file_is_profiled_through_fio_when_asked() {
    if !mqblk_testkit::need_tools("the profile through fio", &["fio"]) {
        return;
    }
    let Some((dir, data, p)) = profile_file("profile-fio", &["--fio=fio"]) else {
        return;
    };
    assert!(p.contains("engine = \"fio-"), "{p}");
    // Refused before anything runs.
    let f = format!("--filename={}", data.display());
    let o = mqblk(&["profile", "--fio=/bin/false", &f, "--size=64m", "--quick"]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/bin/false: not fio"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile that cannot be read, parsed or fitted is refused in one line naming it.
#[test]
fn bad_profiles_get_one_line() {
    let dir = scratch("profile-bad");
    let missing = dir.join("none.toml");
    let truncated = dir.join("truncated.toml");
    std::fs::write(&truncated, "path = \"x\"\ndisk = \"y\"\n").unwrap();
    let short = dir.join("short.toml");
    let o = mqblk(&["profile", "--device=null", "--quick"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The same profile without its first measurement.
    let whole = text(&o.stdout);
    let cut = whole.replacen("name = \"randread_4k_qd1\"", "name = \"renamed\"", 1);
    std::fs::write(&short, cut).unwrap();
    // Four jobs of none each: no reads in flight.
    let no_jobs = dir.join("no-jobs.toml");
    assert!(whole.contains("jobs = 4\n"), "{whole}");
    std::fs::write(&no_jobs, whole.replacen("jobs = 4\n", "jobs = 0\n", 1)).unwrap();
    // A held-completions share that is no share.
    let not_share = dir.join("not-share.toml");
    assert!(!whole.contains("held_completions"), "{whole}");
    let over = whole.replacen(
        "\n[[measure]]",
        "\nheld_completions = 1.5\n\n[[measure]]",
        1,
    );
    std::fs::write(&not_share, over).unwrap();
    for (f, want) in [
        (&missing, "none.toml: No such file"),
        (&truncated, "truncated.toml:1: missing field"),
        (&short, "measurement 'randread_4k_qd1' is missing"),
        (
            &no_jobs,
            "measurement 'randread_4k_qd1_jobs4': jobs must be positive",
        ),
        (
            &not_share,
            "not-share.toml: held_completions = 1.5 is not a share in [0, 1]",
        ),
    ] {
        let dev = format!("--device=profile:{}", f.display());
        let fit = format!("--fit={}", f.display());
        refused_in_one_line(&["sim", &dev, "--runtime=10ms", "--name=x"], want);
        refused_in_one_line(&["profile", &fit], want);
    }
    let o = mqblk(&["profile", "--device=null", "--output-format=json"]);
    assert!(text(&o.stderr).contains("--output-format is for --fit=PROFILE"));
    let o = mqblk(&["profile", "--quick"]);
    assert!(text(&o.stderr).contains("--filename=PATH (or --device=MODEL) is needed"));
    let _ = std::fs::remove_dir_all(&dir);
}
