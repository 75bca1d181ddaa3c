//! `mqblk twin` on a loop device: both stacks run and give effects, the device's scheduler
//! and tunables come back after a run and after Ctrl-C, and it refuses without root. Needs
//! root, losetup and fio: missing, the tests fail in CI (where `.ci/run` installs them) and
//! are skipped visibly elsewhere.

mod common;
use common::{mqblk, refused_in_one_line, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether twin can run here (root, losetup and fio): a failure in CI where it cannot, a
/// visible skip elsewhere.
fn skip(test: &str) -> bool {
    !mqblk_testkit::need_root_and_tools(test, &["losetup", "fio"])
}

/// The scheduler a test runs beside mq-deadline, and a tunable of it: BFQ where the kernel
/// has it, kyber on a kernel built without it (these tests check twin, not BFQ).
fn other_scheduler() -> (&'static str, &'static str) {
    if mqblk_testkit::kernel_schedulers()
        .iter()
        .any(|s| s == "bfq")
    {
        ("bfq", "bfq:low_latency=0")
    } else {
        ("kyber", "kyber:read_lat_nsec=1000000")
    }
}

/// A loop device over a scratch file, detached and removed on drop.
struct Loop {
    dir: PathBuf,
    dev: String,
}

impl Loop {
    fn new(name: &str) -> Loop {
        let dir = std::env::temp_dir().join(format!("mqblk-twin-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(128 << 20)
            .unwrap();
        let dev = mqblk_testkit::attach_loop(&img).unwrap();
        Loop { dir, dev }
    }
    fn queue(&self) -> PathBuf {
        Path::new("/sys/block")
            .join(Path::new(&self.dev).file_name().unwrap())
            .join("queue")
    }
    fn scheduler(&self) -> String {
        let s = std::fs::read_to_string(self.queue().join("scheduler")).unwrap();
        s.split_whitespace()
            .find(|w| w.starts_with('['))
            .unwrap()
            .trim_matches(|c| c == '[' || c == ']')
            .to_string()
    }
    fn job(&self, runtime: &str) -> PathBuf {
        let p = self.dir.join("job.fio");
        std::fs::write(
            &p,
            format!(
                "[global]\nioengine=io_uring\ndirect=1\nsize=64m\nruntime={runtime}\ntime_based\n\n\
                 [reader]\nrw=randread\nbs=4k\niodepth=8\n"
            ),
        )
        .unwrap();
        p
    }
}

impl Loop {
    /// One repeat of `mqblk twin` on this device with `args`, its JSON report.
    fn twin_json(&self, args: &[&str], job: &Path) -> serde_json::Value {
        let dev = format!("--filename={}", self.dev);
        let mut all = vec!["twin", &dev, "--repeats=1", "--output-format=json"];
        all.extend_from_slice(args);
        all.push(job.to_str().unwrap());
        let o = mqblk(&all);
        assert!(o.status.success(), "{}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    }
}

impl Loop {
    fn name(&self) -> &str {
        Path::new(&self.dev).file_name().unwrap().to_str().unwrap()
    }
    fn nr_tags(&self) -> u32 {
        let f = Path::new("/sys/block")
            .join(self.name())
            .join("mq/0/nr_tags");
        std::fs::read_to_string(f).unwrap().trim().parse().unwrap()
    }
    /// Under `none`, `nr_requests` = `n`: the driver tags' bitmap is resized to it.
    fn set_driver_tags(&self, n: u32) {
        std::fs::write(self.queue().join("scheduler"), "none").unwrap();
        std::fs::write(self.queue().join("nr_requests"), (n - 1).max(4).to_string()).unwrap();
        std::fs::write(self.queue().join("nr_requests"), n.to_string()).unwrap();
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // The device outlives `losetup -d`: leave it with every driver tag for its next user.
        let q = self.queue();
        let _ = std::fs::write(q.join("scheduler"), "none");
        let _ = mqblk_drivers::sysfs::restore_driver_tags(q.parent().unwrap());
        mqblk_testkit::detach_loop(&self.dev);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn twin_compares_both_stacks_and_puts_the_scheduler_back() {
    if skip("twin_compares_both_stacks_and_puts_the_scheduler_back") {
        return;
    }
    let l = Loop::new("run");
    // A scheduler with a tunable changed from its default: both must come back.
    std::fs::write(l.queue().join("scheduler"), "mq-deadline").unwrap();
    std::fs::write(l.queue().join("iosched/read_expire"), "123").unwrap();
    // (Kept in jiffies: it reads back rounded to the tick.)
    let expire = std::fs::read_to_string(l.queue().join("iosched/read_expire")).unwrap();
    let job = l.job("1");
    let (other, tunable) = other_scheduler();
    let v = l.twin_json(
        &[
            &format!("--schedulers=mq-deadline,{other}"),
            &format!("--sched={tunable}"),
        ],
        &job,
    );
    assert_eq!(
        v["schedulers"],
        serde_json::json!(["none", "mq-deadline", other])
    );
    assert_eq!(
        v["runs"].as_array().unwrap().len(),
        6,
        "3 schedulers x 2 stacks"
    );
    for sched in ["mq-deadline", other] {
        let e = v["effects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["scheduler"] == sched && e["metric"] == "iops" && e["dir"] == "read")
            .unwrap_or_else(|| panic!("no {sched} iops effect: {v}"));
        for stack in ["kernel", "mqblk"] {
            let m = e[stack]["median"].as_f64().unwrap();
            assert!(m > 0.05 && m < 20.0, "{sched} {stack}: effect {m}");
        }
    }
    assert_eq!(l.scheduler(), "mq-deadline", "the scheduler is put back");
    assert_eq!(
        std::fs::read_to_string(l.queue().join("iosched/read_expire")).unwrap(),
        expire,
        "and its tunables"
    );
    // The table form names both stacks.
    let o = mqblk(&[
        "twin",
        &format!("--filename={}", l.dev),
        "--schedulers=kyber",
        "--repeats=1",
        job.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("kernel") && out.contains("mqblk") && out.contains("kyber"),
        "{out}"
    );
    assert_eq!(l.scheduler(), "mq-deadline");
}

/// nr_requests written under `none` resizes the driver tags' bitmap, and a scheduler switch
/// later resets the nr_requests sysfs shows but not the bitmap: a loop device once set to 4
/// under none hands out 4 tags under every scheduler while sysfs reads 128 or more. The
/// kernel's `none` then punts most io_uring reads to its io-wq workers (no tag without
/// waiting), and every scheduler looks faster than `none`. Twin gives the kernel's `none` all
/// its driver tags, as mqblk's queue gets, and says so.
#[test]
fn twin_gives_the_kernel_s_none_every_driver_tag() {
    let test = "twin_gives_the_kernel_s_none_every_driver_tag";
    if skip(test) {
        return;
    }
    let l = Loop::new("tags");
    let nr_tags = l.nr_tags();
    l.set_driver_tags(4);
    std::fs::write(l.queue().join("scheduler"), "mq-deadline").unwrap();
    let depth = |name: &str| {
        mqblk_testkit::debugfs()
            .then(|| mqblk_drivers::sysfs::driver_tag_depth(name))
            .flatten()
    };
    let Some(before) = depth(l.name()) else {
        mqblk_testkit::skip(test, "debugfs cannot be read");
        return;
    };
    assert_eq!(
        before, 4,
        "the kernel kept the bitmap at 4 under mq-deadline"
    );
    let job = l.job("1");
    let o = mqblk(&[
        "twin",
        &format!("--filename={}", l.dev),
        "--schedulers=mq-deadline",
        "--repeats=1",
        job.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("handed out 4 of its {nr_tags} driver tags")),
        "{err}"
    );
    assert_eq!(depth(l.name()), Some(nr_tags));
    assert_eq!(l.scheduler(), "mq-deadline", "the scheduler is put back");
}

#[test]
fn ctrl_c_stops_twin_and_puts_the_scheduler_back() {
    if skip("ctrl_c_stops_twin_and_puts_the_scheduler_back") {
        return;
    }
    let l = Loop::new("int");
    let before = l.scheduler();
    let job = l.job("30");
    let child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args([
            "twin",
            &format!("--filename={}", l.dev),
            &format!("--schedulers={}", other_scheduler().0),
            "--repeats=1",
        ])
        .arg(&job)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it get into a run (fio started on the kernel's side), then interrupt.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let t = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "it stopped promptly");
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("restored"), "{}", text(&o.stderr));
    assert_eq!(l.scheduler(), before);
}

#[test]
fn twin_refuses_without_root_and_bad_arguments_in_one_line() {
    if skip("twin_refuses_without_root_and_bad_arguments_in_one_line") {
        return;
    }
    let l = Loop::new("bad");
    let job = l.job("1");
    let dev = format!("--filename={}", l.dev);
    for (args, want) in [
        (vec!["--schedulers=cfq"], "unknown scheduler 'cfq'"),
        (vec!["--sched=bfq-low_latency"], "SCHED:NAME=VALUE"),
    ] {
        let mut all = vec!["twin", &dev];
        all.extend(args);
        all.push(job.to_str().unwrap());
        refused_in_one_line(&all, want);
    }
    let o = mqblk(&["twin", "--filename=/proc/version", job.to_str().unwrap()]);
    assert!(
        text(&o.stderr).contains("has no block queue")
            || text(&o.stderr).contains("not a block device"),
        "{}",
        text(&o.stderr)
    );
    // As nobody: one line saying it needs root, and the device untouched.
    if Command::new("setpriv").arg("--version").output().is_ok() {
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_mqblk"))
            .args(["twin", &dev, job.to_str().unwrap()])
            .output()
            .unwrap();
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains("needs root") && e.trim_end().lines().count() == 1,
            "{e}"
        );
    }
}

/// Jobs with `cgroup` and `cgroup_weight`: twin makes the kernel's cgroups with BFQ's weight
/// (fio cannot) and removes them afterwards. Needs the cgroup v1 blkio hierarchy, as on
/// this project's machine; elsewhere it says so and returns.
#[test]
fn twin_gives_the_kernel_the_jobs_cgroup_weights_and_cleans_up() {
    if skip("twin_gives_the_kernel_the_jobs_cgroup_weights_and_cleans_up") {
        return;
    }
    let blkio = Path::new("/sys/fs/cgroup/blkio");
    if !blkio.join("cgroup.procs").exists() {
        mqblk_testkit::skip(
            "twin_gives_the_kernel_the_jobs_cgroup_weights_and_cleans_up",
            &format!("no cgroup v1 blkio hierarchy at {}", blkio.display()),
        );
        return;
    }
    // The weights are BFQ's (`blkio.bfq.weight`).
    if !mqblk_testkit::kernel_has_scheduler(
        "twin_gives_the_kernel_the_jobs_cgroup_weights_and_cleans_up",
        "bfq",
    ) {
        return;
    }
    let l = Loop::new("cg");
    let job = l.dir.join("cg.fio");
    let pid = std::process::id();
    std::fs::write(
        &job,
        format!(
            "[global]\nioengine=io_uring\ndirect=1\nsize=32m\nruntime=1\ntime_based\nrw=randread\nbs=4k\niodepth=4\n\n\
             [heavy]\ncgroup=mqblk-test-{pid}-a\ncgroup_weight=200\n\n\
             [light]\ncgroup=mqblk-test-{pid}-b\ncgroup_weight=100\noffset=64m\n"
        ),
    )
    .unwrap();
    let v = l.twin_json(&["--schedulers=bfq"], &job);
    assert_eq!(
        v["shares"].as_array().unwrap().len(),
        4,
        "2 jobs x (none, bfq)"
    );
    for g in ["a", "b"] {
        assert!(
            !blkio.join(format!("mqblk-test-{pid}-{g}")).exists(),
            "cgroup {g} removed"
        );
    }
}

/// `--suite DIR`: every workload of `DIR/suite.toml` with its own schedulers, one judged
/// row per IOPS and p99 effect, `--schedulers` keeping to the workloads that list them;
/// a broken manifest refused before the device is touched.
#[test]
fn twin_suite_runs_each_workload_with_its_schedulers_and_judges_every_effect() {
    if skip("twin_suite_runs_each_workload_with_its_schedulers_and_judges_every_effect") {
        return;
    }
    let l = Loop::new("suite");
    std::fs::write(l.queue().join("scheduler"), "kyber").unwrap();
    let suite = l.dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let job = |rw: &str, jobs: &[&str]| {
        let mut s = format!(
            "[global]\nioengine=io_uring\ndirect=1\nsize=32m\nruntime=1\ntime_based\nrw={rw}\nbs=4k\niodepth=4\n"
        );
        for (i, j) in jobs.iter().enumerate() {
            s += &format!("\n[{j}]\noffset={}m\n", 32 * i);
        }
        s
    };
    std::fs::write(suite.join("reads.fio"), job("randread", &["r"])).unwrap();
    std::fs::write(suite.join("two.fio"), job("randwrite", &["w0", "w1"])).unwrap();
    let other = other_scheduler().0;
    std::fs::write(
        suite.join("suite.toml"),
        format!(
            "[[workload]]\nfile = \"reads.fio\"\nschedulers = [\"mq-deadline\"]\n\n\
             [[workload]]\nfile = \"two.fio\"\nschedulers = [\"deadline\", \"{other}\"]\nrepeats = 2\n"
        ),
    )
    .unwrap();
    let dev = format!("--filename={}", l.dev);
    let dir = format!("--suite={}", suite.display());
    let o = mqblk(&["twin", &dev, &dir, "--repeats=1", "--output-format=json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = v["workloads"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(
        w[0]["schedulers"],
        serde_json::json!(["none", "mq-deadline"])
    );
    assert_eq!(
        w[1]["schedulers"],
        serde_json::json!(["none", "mq-deadline", other])
    );
    // A workload's own `repeats` raises its rounds above --repeats (two.fio: 2 rounds of
    // 3 schedulers in 2 stacks); the others keep the command's.
    assert_eq!(w[0]["repeats"], 1);
    assert_eq!(w[1]["repeats"], 2);
    assert_eq!(
        w[1]["runs"].as_array().unwrap().len(),
        2 * 3 * 2,
        "{}",
        w[1]
    );
    // Rows: reads.fio 1 scheduler x 1 job x 2 metrics; two.fio 2 x 2 x 2.
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 + 8, "{v}");
    assert_eq!(v["summary"]["rows"], 10);
    for r in rows {
        assert!(
            ["within", "off", "wide_holds", "wide_off"].contains(&r["verdict"].as_str().unwrap()),
            "{r}"
        );
        assert!(r["kernel"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["mqblk"]["median"].as_f64().unwrap() > 0.0, "{r}");
    }
    let n = &v["summary"];
    let sum: u64 = ["within", "off", "wide_holds", "wide_off", "missing"]
        .iter()
        .map(|k| n[k].as_u64().unwrap())
        .sum();
    assert_eq!(sum, 10);
    assert_eq!(l.scheduler(), "kyber", "the scheduler is put back");

    // --schedulers keeps to the workloads listing them; the table says how rows fared.
    let only = format!("--schedulers={other}");
    let o = mqblk(&["twin", &dev, &dir, "--repeats=1", &only]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("twin suite: 1 workloads") && out.contains(", 2 repeats;"),
        "{out}"
    );
    assert!(out.contains("two") && !out.contains("reads "), "{out}");
    assert!(out.contains("4 effects"), "{out}");

    // A manifest naming a scheduler nobody has, or a missing job: one line, nothing run.
    let refused = |manifest: &str| -> String {
        std::fs::write(suite.join("suite.toml"), manifest).unwrap();
        let o = mqblk(&["twin", &dev, &dir]);
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{e}");
        e
    };
    let e = refused("[[workload]]\nfile = \"reads.fio\"\nschedulers = [\"cfq\"]\n");
    assert!(
        e.contains("suite.toml: workload 1 (reads.fio): unknown scheduler 'cfq'")
            && e.trim_end().lines().count() == 1,
        "{e}"
    );
    let e = refused(&format!(
        "[[workload]]\nfile = \"reads.fio\"\nschedulers = [\"{other}\"]\nrepeats = 0\n"
    ));
    assert!(
        e.contains("suite.toml: workload 1 (reads.fio): repeats = 0 is not in 1..=100")
            && e.trim_end().lines().count() == 1,
        "{e}"
    );
    let e = refused(&format!(
        "[[workload]]\nfile = \"gone.fio\"\nschedulers = [\"{other}\"]\n"
    ));
    assert!(
        e.contains("no such job file") && e.contains("gone.fio"),
        "{e}"
    );
    let o = mqblk(&["twin", &dev]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--suite"), "{}", text(&o.stderr));
    assert_eq!(l.scheduler(), "kyber");
}

/// `--sim` adds the simulator's prediction: the device profiled first (with the kernel at
/// none, its scheduler put back after), the jobs simulated on the fitted model under each
/// scheduler, a third column beside the kernel's and mqblk's; a bad `--profile` stops
/// twin before anything runs.
#[test]
fn twin_sim_adds_the_fitted_models_prediction() {
    if skip("twin_sim_adds_the_fitted_models_prediction") {
        return;
    }
    let l = Loop::new("sim");
    let other = other_scheduler().0;
    std::fs::write(l.queue().join("scheduler"), "mq-deadline").unwrap();
    let job = l.job("1");
    let dev = format!("--filename={}", l.dev);
    let o = mqblk(&[
        "twin",
        &dev,
        "--repeats=1",
        "--output-format=json",
        "--sim",
        &format!("--schedulers={other}"),
        job.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The profile it made is named; a block device is only read without --write-ok.
    let made = err
        .lines()
        .find_map(|l| l.strip_prefix("twin: the profile is "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no profile named: {err}"));
    let profile = std::fs::read_to_string(made).unwrap();
    assert!(profile.contains("writes = false"), "{profile}");
    // Measured through fio, the kernel's path the model is to predict.
    assert!(profile.contains("engine = \"fio-"), "{profile}");
    assert_eq!(
        profile.matches("[[measure]]").count(),
        10,
        "the ten read measurements only: {profile}"
    );
    let _ = std::fs::remove_file(made);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "2 schedulers x 3 stacks");
    assert_eq!(runs.iter().filter(|r| r[1] == "sim").count(), 2, "{v}");
    // What each stack ran, to run again by hand: fio on the device, mqblk bench reaped by a
    // completion worker, the simulator on the profile.
    let line = |stack: &str| {
        v["commands"][stack]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("kernel").contains("fio ") && line("kernel").contains(&dev),
        "{}",
        v["commands"]
    );
    assert!(
        line("mqblk").contains(" bench ") && line("mqblk").contains("--hctx_workers=1"),
        "{}",
        v["commands"]
    );
    assert!(
        line("sim").contains(" sim ") && line("sim").contains(&format!("--device=profile:{made}")),
        "{}",
        v["commands"]
    );
    let e = v["effects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["scheduler"] == other && e["metric"] == "iops" && e["dir"] == "read")
        .unwrap_or_else(|| panic!("no {other} iops effect: {v}"));
    let sim = e["sim"]["median"].as_f64().unwrap();
    assert!(sim > 0.05 && sim < 20.0, "{other} sim effect {sim}");
    assert_eq!(l.scheduler(), "mq-deadline", "the scheduler is put back");
    let bad = l.dir.join("bad.toml");
    std::fs::write(&bad, "disk = 1\n").unwrap();
    refused_in_one_line(
        &[
            "twin",
            &format!("--filename={}", l.dev),
            &format!("--profile={}", bad.display()),
            job.to_str().unwrap(),
        ],
        "bad.toml:1:",
    );
    assert_eq!(l.scheduler(), "mq-deadline");
}

/// A saved result's kernel and mqblk runs, a fake simulator run among them.
fn saved_runs() -> serde_json::Value {
    let fig = |iops: f64, p99: f64| {
        serde_json::json!([{"job": "r", "dir": "read", "iops": iops, "bw_kib": iops * 4.0,
            "clat_mean_us": 50.0, "clat_p50_us": 45.0, "clat_p99_us": p99}])
    };
    serde_json::json!([
        [0, "kernel", "none", fig(1000.0, 100.0)],
        [0, "kernel", "bfq", fig(800.0, 200.0)],
        [0, "mqblk", "none", fig(1000.0, 100.0)],
        [0, "mqblk", "bfq", fig(900.0, 150.0)],
        [0, "sim", "none", fig(1.0, 1.0)],
        [0, "sim", "bfq", fig(1000.0, 1000.0)],
    ])
}

/// `--resim`: a saved result's simulator stack runs again on a profile given now and is
/// judged against the kernel's saved figures, as one job file's report and as a suite's;
/// no device and no root. A file that is not a saved result, a job file no longer there
/// and a missing --profile get one line.
#[test]
fn resim_runs_the_simulator_again_against_the_saved_kernel_figures() {
    let dir = std::env::temp_dir().join(format!("mqblk-resim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("ssd.toml");
    let o = mqblk(&[
        "profile",
        "--device=ssd",
        "--quick",
        &format!("--output={}", profile.display()),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let job = dir.join("r.fio");
    std::fs::write(
        &job,
        "[r]\nrw=randread\nbs=4k\niodepth=4\nsize=64m\nruntime=100ms\ntime_based\n",
    )
    .unwrap();
    let report = serde_json::json!({
        "jobfile": job.display().to_string(), "filename": "/dev/x", "disk": "x",
        "repeats": 1, "schedulers": ["none", "bfq"], "runs": saved_runs(),
        "effects": [], "shares": [],
        "commands": {"kernel": "fio K", "mqblk": "mqblk bench M", "sim": "mqblk sim OLD"},
    });
    let one = dir.join("one.json");
    std::fs::write(&one, report.to_string()).unwrap();
    let with_profile = format!("--profile={}", profile.display());
    // `--resim` of a saved result on the profile, as JSON.
    let resim = |saved: &Path| {
        mqblk(&[
            "twin",
            &format!("--resim={}", saved.display()),
            &with_profile,
            "--output-format=json",
        ])
    };
    let o = resim(&one);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("[2/2] r.fio repeat 1 bfq through the simulator"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "{v}");
    let sim_none = runs
        .iter()
        .find(|r| r[1] == "sim" && r[2] == "none")
        .unwrap();
    assert!(
        sim_none[3][0]["iops"].as_f64().unwrap() > 1000.0,
        "the saved simulator runs are replaced: {sim_none}"
    );
    let e = v["effects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["metric"] == "iops")
        .unwrap();
    assert_eq!(e["kernel"]["median"].as_f64().unwrap(), 0.8, "{e}");
    assert_eq!(e["mqblk"]["median"].as_f64().unwrap(), 0.9, "{e}");
    let sim = e["sim"]["median"].as_f64().unwrap();
    assert!(sim > 0.5 && sim < 1.5, "a reader alone under bfq: x{sim}");
    // The saved stacks' command lines stay; the simulator's is the one that ran now.
    let c = &v["commands"];
    assert_eq!(
        (c["kernel"].as_str(), c["mqblk"].as_str()),
        (Some("fio K"), Some("mqblk bench M")),
        "{c}"
    );
    let sim_line = c["sim"].as_str().unwrap_or_default();
    assert!(
        sim_line.contains(" sim ")
            && sim_line.contains(&with_profile.replace("--profile=", "--device=profile:")),
        "{c}"
    );
    // A result saved without its CPU count is taken to come from a machine like this one.
    let host = std::thread::available_parallelism().unwrap().get();
    assert_eq!(v["cpus"].as_u64(), Some(host as u64), "{v}");

    // The simulation gets the CPUs the kernel's runs had: with one, a job pinned to the
    // second CPU cannot run (as fio's would not on a machine of one CPU).
    let pinned = dir.join("pinned.fio");
    std::fs::write(
        &pinned,
        "[p]\nrw=randread\nbs=4k\niodepth=1\nsize=64m\nruntime=100ms\ntime_based\ncpus_allowed=1\n",
    )
    .unwrap();
    let mut one_cpu = report.clone();
    one_cpu["cpus"] = 1.into();
    one_cpu["jobfile"] = pinned.display().to_string().into();
    let saved_one_cpu = dir.join("one-cpu.json");
    std::fs::write(&saved_one_cpu, one_cpu.to_string()).unwrap();
    let o = mqblk(&[
        "twin",
        &format!("--resim={}", saved_one_cpu.display()),
        &with_profile,
    ]);
    let err = text(&o.stderr);
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        !o.status.success() && last.contains("cpus_allowed names CPU 1, but the simulation has 1"),
        "{err}"
    );
    one_cpu["cpus"] = 2.into();
    std::fs::write(&saved_one_cpu, one_cpu.to_string()).unwrap();
    let o = resim(&saved_one_cpu);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 2, "{v}");

    // A suite: its rows judged again, the simulator's counted.
    let suite = dir.join("suite.json");
    std::fs::write(
        &suite,
        serde_json::json!({"rows": [], "summary": {}, "workloads": [report]}).to_string(),
    )
    .unwrap();
    let o = resim(&suite);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["rows"], 2, "iops and p99 judged: {v}");
    assert_eq!(v["sim_summary"]["rows"], 2, "{v}");
    assert!(v["rows"][0]["sim_verdict"].is_string(), "{v}");

    // Bad input, one line each.
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"jobs\": []}").unwrap();
    refused_in_one_line(
        &[
            "twin",
            &format!("--resim={}", junk.display()),
            &with_profile,
        ],
        "not a result of mqblk twin --output-format=json",
    );
    std::fs::remove_file(&job).unwrap();
    refused_in_one_line(
        &["twin", &format!("--resim={}", one.display()), &with_profile],
        "r.fio: no such job file",
    );
    refused_in_one_line(
        &["twin", &format!("--resim={}", one.display())],
        "--profile",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A job file whose buffers are huge pages (`iomem=shmhuge`): twin reserves the pages both
/// stacks need (fio's and mqblk's, run one after the other), both runs use them, and the
/// reservation is given back after.
#[test]
fn twin_reserves_huge_pages_for_an_iomem_job_and_gives_them_back() {
    let test = "twin_reserves_huge_pages_for_an_iomem_job_and_gives_them_back";
    if skip(test) {
        return;
    }
    let sizes = Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB");
    let read = |f: &str| -> u64 {
        std::fs::read_to_string(sizes.join(f)).map_or(0, |s| s.trim().parse().unwrap_or(0))
    };
    if !sizes.exists() {
        mqblk_testkit::missing(test, "the kernel offers no 2 MiB huge pages");
        return;
    }
    let (nr_before, free_before) = (read("nr_hugepages"), read("free_hugepages"));
    let l = Loop::new("huge");
    let job = l.dir.join("huge.fio");
    std::fs::write(
        &job,
        "[global]\nioengine=io_uring\ndirect=1\nsize=64m\nruntime=1\ntime_based\niomem=shmhuge\n\n\
         [writer]\nrw=write\nbs=128k\niodepth=16\noffset=0\nsize=32m\n\n\
         [reader]\nrw=randread\nbs=4k\niodepth=1\noffset=32m\nsize=32m\n",
    )
    .unwrap();
    let dev = format!("--filename={}", l.dev);
    let o = mqblk(&[
        "twin",
        &dev,
        "--schedulers=mq-deadline",
        "--repeats=1",
        "--output-format=json",
        job.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Writer: 2 MiB of buffers, one page and two of fio's slack; reader: one and two.
    if free_before < 6 {
        assert!(
            err.contains("twin: 6 huge pages of 2048 kB reserved for the run"),
            "{err}"
        );
    }
    assert_eq!(
        read("nr_hugepages"),
        nr_before,
        "the reservation is given back"
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = j["runs"].as_array().expect("runs");
    for stack in ["kernel", "mqblk"] {
        let iops: f64 = runs
            .iter()
            .filter(|r| r[1] == stack)
            .flat_map(|r| r[3].as_array().unwrap().iter())
            .map(|m| m["iops"].as_f64().unwrap())
            .sum();
        assert!(iops > 0.0, "{stack} ran: {j}");
    }
}
