//! Tests of job-file and command-line parsing.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

/// A fresh scratch directory for tests that need files (unique per test and process).
fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mqblk-workload-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent");
    }
    std::fs::write(path, text).expect("write test file");
}

/// The one-line error for job text named `jobs.fio`.
fn file_err(text: &str) -> String {
    match parse_job_text("jobs.fio", text) {
        Ok(jobs) => panic!("expected an error, got {jobs:?}"),
        Err(e) => e.to_string(),
    }
}

/// The one-line error for a command line.
fn cli_err(args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    match parse_command_line(&args) {
        Ok(cl) => panic!("expected an error, got {cl:?}"),
        Err(e) => e.to_string(),
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const REALISTIC: &str = "\
; A realistic job file.
# Both comment styles work.
[global]
rw=randread
bs=4k
iodepth = 8   ; a trailing comment
include inc/common.fio
filename=${HOME}/dev${MQBLK_WORKLOAD_TEST_SURELY_UNSET}

[job1]
size=1m
numjobs=2
time_based
runtime=10

[job2]
rw=randwrite
bs=64k
iodepth=$ncpus
sched.fifo_batch=16
";

#[test]
fn realistic_job_file() {
    let dir = scratch_dir("realistic");
    write(
        &dir.join("inc/common.fio"),
        "ioengine=io_uring\ninclude deeper.fio\n",
    );
    write(&dir.join("inc/deeper.fio"), "direct=1 # nested include\n");
    let main = dir.join("jobs.fio");
    write(&main, REALISTIC);

    let jobs = parse_job_file(&main).expect("parses");
    assert_eq!(jobs.len(), 2);
    let home = std::env::var("HOME").unwrap_or_default();

    let j1 = &jobs[0];
    assert_eq!(j1.name, "job1");
    assert_eq!(j1.rw, RwMode::RandRead);
    assert_eq!(j1.bs, [4096; 3]);
    assert_eq!(j1.iodepth, 8);
    assert_eq!(
        j1.iodepth_batch_complete_max, 1,
        "fio: iodepth_batch_complete_min"
    );
    assert_eq!(j1.size, Some(1 << 20));
    assert_eq!(j1.numjobs, 2);
    assert!(j1.time_based);
    assert_eq!(j1.runtime_ns, 10_000_000_000);
    assert_eq!(j1.ioengine.as_deref(), Some("io_uring"));
    assert!(j1.direct);
    assert_eq!(j1.filename, Some(format!("{home}/dev")));
    assert_eq!(
        j1.set_options,
        pairs(&[
            ("size", "1m"),
            ("numjobs", "2"),
            ("time_based", ""),
            ("runtime", "10")
        ])
    );
    let global_names: Vec<&str> = j1.global_options.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        global_names,
        ["rw", "bs", "iodepth", "ioengine", "direct", "filename"]
    );

    let j2 = &jobs[1];
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    assert_eq!(j2.rw, RwMode::RandWrite);
    assert_eq!(j2.bs, [65536; 3]);
    assert_eq!(j2.iodepth, ncpus);
    assert_eq!(j2.sched_tunables, pairs(&[("fifo_batch", "16")]));
    assert_eq!(j2.sched_tunable("fifo_batch"), Some("16"));
    assert_eq!(j2.size, None);
    assert_eq!(j2.device_size(), 1 << 30);
}

#[test]
fn globals_apply_only_to_jobs_below() {
    let text = "[a]\n[global]\niodepth=4\n[b]\n[global]\nbs=8k\n[c]\niodepth=2\n";
    let jobs = parse_job_text("x.fio", text).expect("parses");
    let depths: Vec<u32> = jobs.iter().map(|j| j.iodepth).collect();
    let sizes: Vec<u64> = jobs.iter().map(|j| j.bs[0]).collect();
    assert_eq!(depths, [1, 4, 2]);
    assert_eq!(sizes, [4096, 4096, 8192]);
}

#[test]
fn option_values_and_aliases() {
    let text = "[j]\nreadwrite=rw\nrwmixwrite=30\nblocksize=4k,64k\nverify=crc32c-intel\n\
                cpus_allowed=0-3,6\npercentile_list=99:50\nirqmode=2\ncompletion_nsec=5us\n\
                fail_prob=2.5%\niodepth_batch=1\nbuffered=0\nprioclass=2\nprio=7\noffset=0x1000\n\
                dev_size=2g\nramp_time=500ms\n";
    let jobs = parse_job_text("x.fio", text).expect("parses");
    let j = &jobs[0];
    assert_eq!(j.rw, RwMode::ReadWrite);
    assert_eq!(j.rwmixread, 70);
    assert_eq!(j.bs, [4096, 65536, 65536]);
    assert_eq!(j.max_bs(), 65536);
    assert_eq!(j.verify, VerifyMode::Crc32c);
    assert_eq!(j.cpus_allowed, vec![0, 1, 2, 3, 6]);
    assert_eq!(j.percentile_list, vec![50.0, 99.0]);
    assert_eq!(j.irqmode, IrqMode::Timer);
    assert_eq!(j.completion_nsec, 5_000);
    assert_eq!(j.fail_prob, 2.5);
    assert!(j.direct);
    assert_eq!((j.prioclass, j.prio), (Some(2), Some(7)));
    assert_eq!(j.offset, 4096);
    assert_eq!(j.dev_size, Some(2 << 30));
    assert_eq!(j.ramp_time_ns, 500_000_000);
    assert_eq!(j.set_options[0], ("rw".to_string(), "rw".to_string()));
}

/// fio's `cpumask`: bit N allows CPU N, decimal or hexadecimal; a mask with no CPU among
/// the low 32 bits is refused, naming the option.
#[test]
fn cpumask_is_a_cpu_list_by_bits() {
    for (mask, cpus) in [("34", vec![1, 5]), ("0x3", vec![0, 1]), ("1", vec![0])] {
        let jobs = parse_job_text("x.fio", &format!("[j]\ncpumask={mask}\n")).expect("parses");
        assert_eq!(jobs[0].cpus_allowed, cpus, "{mask}");
    }
    for bad in ["0", "x", "0x100000000"] {
        let e = parse_job_text("x.fio", &format!("[j]\ncpumask={bad}\n")).unwrap_err();
        assert!(e.to_string().contains("cpumask"), "{bad}: {e}");
    }
}

/// `create_fsync=1` is what mqblk does with a file it lays out (syncs it), so it is taken;
/// `0` would leave the file unsynced and is refused, naming the option.
#[test]
fn create_fsync_takes_fios_default_and_refuses_0() {
    assert!(parse_job_text("x.fio", "[j]\ncreate_fsync=1\n").is_ok());
    let e = parse_job_text("x.fio", "[j]\ncreate_fsync=0\n").unwrap_err();
    assert!(e.to_string().contains("create_fsync"), "{e}");
    assert!(e.to_string().contains("always synced"), "{e}");
}

#[test]
fn verify_only_is_refused_with_time_based_as_its_writes_would_never_end() {
    let text = "[j]\nrw=write\nsize=1m\nverify=crc32c\nverify_only=1\n";
    assert!(parse_job_text("x.fio", text).is_ok());
    let e = parse_job_text("x.fio", &format!("{text}time_based\nruntime=1\n")).unwrap_err();
    assert!(e.to_string().contains("verify_only with time_based"), "{e}");
    // A job that only reads has no writes to generate.
    assert!(parse_job_text("x.fio", "[j]\nrw=read\nverify_only=1\ntime_based\n").is_ok());
}

#[test]
fn defaults_in_table_match_jobspec_default() {
    let base = JobSpec::default();
    for d in option_table() {
        let computed = d.default == "iodepth_batch_complete_min";
        let unset = d.default.is_empty() && d.kind_description() != "str";
        if computed || unset {
            continue;
        }
        let mut job = JobSpec::default();
        options::apply(d, &mut job, Some(d.default)).expect("default parses");
        // Whether thinktime_blocks was written is not a value.
        job.thinktime_blocks_set = base.thinktime_blocks_set;
        assert_eq!(job, base, "default of option '{}'", d.name);
    }
}

#[test]
fn options_help_lists_every_option() {
    let help = options_help();
    for d in option_table() {
        assert!(help.contains(d.name), "{} missing from help", d.name);
    }
    assert!(help.contains("sched.NAME"));
}

#[test]
fn error_unknown_option_with_suggestion() {
    let text = "[job]\n\n\n\n\n\n\n\n\n\n\nrwmixred=50\n";
    assert_eq!(
        file_err(text),
        "jobs.fio:12: unknown option 'rwmixred' (did you mean 'rwmixread'?)"
    );
    assert_eq!(
        file_err("[job]\nfoobarbaz=1\n"),
        "jobs.fio:2: unknown option 'foobarbaz'"
    );
}

#[test]
fn error_malformed_line() {
    let text = "[job]\n\n\n\n\n\nfoo bar baz\n";
    assert_eq!(
        file_err(text),
        "jobs.fio:7: malformed line 'foo bar baz': expected key=value, a bare key, or [section]"
    );
    assert_eq!(
        file_err("[job\n"),
        "jobs.fio:1: malformed line '[job': expected key=value, a bare key, or [section]"
    );
}

#[test]
fn error_out_of_range() {
    assert_eq!(
        file_err("[job]\n\niodepth=0\n"),
        "jobs.fio:3: option 'iodepth': value '0' out of range 1..=65536"
    );
    assert_eq!(
        file_err("[job]\nnumjobs=0\n"),
        "jobs.fio:2: option 'numjobs': value '0' out of range 1..=4096"
    );
    assert_eq!(
        file_err("[job]\nfail_prob=150\n"),
        "jobs.fio:2: option 'fail_prob': value '150' out of range 0..=100"
    );
}

#[test]
fn error_not_one_of() {
    assert_eq!(
        file_err("[job]\n\n\nrw=randomread\n"),
        "jobs.fio:4: option 'rw': 'randomread' is not one of read, write, randread, randwrite, randrw, readwrite, rw, trim, randtrim, trimwrite, randtrimwrite"
    );
    assert_eq!(
        file_err("[job]\nverify=sha3-256\n"),
        "jobs.fio:2: option 'verify': 'sha3-256' is not one of crc32c, crc32c-intel, crc32, crc64, crc16, crc7, md5, sha1, sha256, sha512, xxhash, meta, 0, null, pattern"
    );
}

#[test]
fn error_bad_values() {
    let text = "[job]\n\n\n\n\n\n\n\nbs=4q\n";
    assert_eq!(
        file_err(text),
        "jobs.fio:9: option 'bs': '4q' is not a size (expected a number with an optional k/m/g/t/p suffix)"
    );
    assert_eq!(
        file_err("[job]\nruntime=10x\n"),
        "jobs.fio:2: option 'runtime': '10x' is not a time (expected a number with an optional d/h/m/s/ms/us/ns suffix)"
    );
    assert_eq!(
        file_err("[job]\ndirect=maybe\n"),
        "jobs.fio:2: option 'direct': 'maybe' is not a boolean (expected 0/1, true/false, yes/no or on/off)"
    );
    assert_eq!(
        file_err("[job]\niodepth=lots\n"),
        "jobs.fio:2: option 'iodepth': 'lots' is not an integer"
    );
    assert_eq!(
        file_err("[job]\niodepth\n"),
        "jobs.fio:2: option 'iodepth' needs a value"
    );
    assert_eq!(
        file_err("[job]\nrw=randtrim:x\n"),
        "jobs.fio:2: option 'rw': 'randtrim:x' is not MODE or MODE:N (N a size for sequential modes, a count for random ones)"
    );
    assert_eq!(
        file_err("[job]\nrw=randread:x\n"),
        "jobs.fio:2: option 'rw': 'randread:x' is not MODE or MODE:N (N a size for sequential modes, a count for random ones)"
    );
}

#[test]
fn pattern_options_parse_as_fio_writes_them() {
    let jobs = parse_job_text(
        "jobs.fio",
        "[a]\nrw=randread:8\nbsrange=4k-16k,8k-8k\nblockalign=8k\nrandom_distribution=zipf:1.1\n\
         number_ios=100\nio_size=2g\nloops=3\nstartdelay=1-3\nthinktime=50\nthinktime_blocks=4\n\
         [b]\nrw=read:64k\nbssplit=4k/50:8k/50,64k\nbs=16k\n[c]\nbsrange=4k-8k\nbs=16k\n",
    )
    .unwrap();
    let a = &jobs[0];
    assert_eq!((a.rw, a.rw_modifier), (RwMode::RandRead, 8));
    assert_eq!(a.bsrange, Some([(4096, 16384), (8192, 8192), (8192, 8192)]));
    assert_eq!(a.bs_for(crate::Ddir::Read), 16384);
    assert_eq!(a.blockalign, Some([8192; 3]));
    assert_eq!(a.number_ios, 100);
    assert_eq!((a.io_size, a.loops), (Some(2 << 30), 3));
    assert_eq!(a.startdelay_ns, (1_000_000_000, 3_000_000_000));
    assert_eq!((a.thinktime_ns, a.thinktime_blocks), (50_000, 4));
    let b = &jobs[1];
    assert_eq!(b.rw_modifier, 64 << 10);
    // bssplit wins over a later bs, as in fio; bs after bsrange replaces it.
    assert_eq!(b.bs_for(crate::Ddir::Write), 65536);
    assert!(!b.sizes_for(crate::Ddir::Read).is_fixed());
    assert_eq!(jobs[2].bs_for(crate::Ddir::Read), 16384);
    assert!(jobs[2].sizes_for(crate::Ddir::Read).is_fixed());
    let err = file_err("[a]\nbsrange=4k\nrandom_distribution=zipf:1\nbssplit=4k/x\n");
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(file_err("[a]\nbsrange=1k-4k\nverify=crc32c\n").contains("verify with bsrange"));
}

#[test]
fn error_structure() {
    assert_eq!(
        file_err("rw=read\n[job]\n"),
        "jobs.fio:1: option 'rw' appears before any [section]"
    );
    assert_eq!(file_err("[ ]\n"), "jobs.fio:1: empty section name '[ ]'");
    assert_eq!(
        file_err("[job]\ninclude missing.fio\n"),
        "jobs.fio:2: include file 'missing.fio' not found (looked for 'missing.fio')"
    );
}

#[test]
fn error_include_cycle() {
    let dir = scratch_dir("cycle");
    let path = dir.join("self.fio");
    write(&path, "[job]\ninclude self.fio\n");
    let err = parse_job_file(&path).expect_err("cycle").to_string();
    let expected = format!(
        "{}:2: include of 'self.fio' nests deeper than 16 levels (an include cycle?)",
        path.display()
    );
    assert_eq!(err, expected);
}

#[test]
fn error_include_names_including_file() {
    let dir = scratch_dir("missing-include");
    write(&dir.join("a.fio"), "[job]\ninclude sub/b.fio\n");
    write(&dir.join("sub/b.fio"), "; b\ninclude nope.fio\n");
    let err = parse_job_file(&dir.join("a.fio"))
        .expect_err("missing")
        .to_string();
    let b = dir.join("sub/b.fio");
    let nope = dir.join("sub/nope.fio");
    let expected = format!(
        "{}:2: include file 'nope.fio' not found (looked for '{}')",
        b.display(),
        nope.display()
    );
    assert_eq!(err, expected);
}

#[test]
fn error_cross_field() {
    assert_eq!(
        file_err("[job]\nbs=1000\n"),
        "jobs.fio:1: read block size 1000 is not a nonzero multiple of 512"
    );
    assert_eq!(
        file_err("[job]\nsize=1k\n"),
        "jobs.fio:1: size=1024 is smaller than the block size 4096"
    );
    assert_eq!(
        file_err("[job]\niodepth_batch_submit=4\n"),
        "jobs.fio:1: iodepth_batch_submit=4 is larger than iodepth=1"
    );
    assert_eq!(
        file_err("[job]\niodepth=4\niodepth_batch_complete_min=3\niodepth_batch_complete_max=2\n"),
        "jobs.fio:1: iodepth_batch_complete_min=3 is larger than iodepth_batch_complete_max=2"
    );
    let job = JobSpec {
        name: "x".to_string(),
        iodepth_batch_complete_max: 2,
        ..JobSpec::default()
    };
    assert_eq!(
        validate(&job).expect_err("invalid").to_string(),
        "job 'x': iodepth_batch_complete_max=2 is larger than iodepth=1"
    );
    assert!(validate(&JobSpec::default()).is_ok());
}

#[test]
fn errors_are_one_line() {
    let err = file_err("[job]\nrw=a\u{7}b\n");
    assert!(!err.contains('\u{7}'));
    let long = format!("[job]\nfilename {}\n", "x".repeat(500));
    let err = file_err(&long);
    assert!(err.len() < 200, "{err}");
}

#[test]
fn command_line_jobs() {
    let cl = parse_command_line(&args(&[
        "--rw=randread",
        "--iodepth=4",
        "--name=a",
        "--bs=8k",
        "--name=b",
        "--rw=write",
        "--group_reporting",
        "--output-format=json",
        "--output=out.json",
        "--dump-sched",
        "--no-progress",
        "--preset=fast",
    ]))
    .expect("parses");
    assert_eq!(cl.jobs.len(), 2);
    let (a, b) = (&cl.jobs[0], &cl.jobs[1]);
    assert_eq!(
        (a.name.as_str(), a.rw, a.iodepth, a.bs[0]),
        ("a", RwMode::RandRead, 4, 8192)
    );
    assert_eq!(
        (b.name.as_str(), b.rw, b.iodepth, b.bs[0]),
        ("b", RwMode::Write, 4, 4096)
    );
    assert!(b.group_reporting && !a.group_reporting);
    assert_eq!(a.set_options, pairs(&[("name", "a"), ("bs", "8k")]));
    assert_eq!(
        a.global_options,
        pairs(&[("rw", "randread"), ("iodepth", "4")])
    );
    assert_eq!(cl.global_options, a.global_options);
    assert_eq!(cl.output_format, OutputFormat::JSON);
    assert_eq!(cl.output_file, Some(PathBuf::from("out.json")));
    assert!(cl.dump_sched);
    assert_eq!(cl.progress, Some(false));
    assert_eq!(cl.preset.as_deref(), Some("fast"));
    assert!(!cl.help);
}

#[test]
fn command_line_globals_override_file_globals() {
    let dir = scratch_dir("cli-file");
    let path = dir.join("jobs.fio");
    write(&path, "[global]\niodepth=8\nbs=8k\n[x]\n[y]\niodepth=2\n");
    let path_arg = path.display().to_string();
    let cl = parse_command_line(&args(&[&path_arg, "--iodepth=16", "--progress"])).expect("parses");
    let depths: Vec<u32> = cl.jobs.iter().map(|j| j.iodepth).collect();
    assert_eq!(depths, [16, 2]);
    assert!(cl.jobs.iter().all(|j| j.bs[0] == 8192));
    assert_eq!(cl.progress, Some(true));
    assert_eq!(
        cl.global_options,
        pairs(&[("iodepth", "16"), ("iodepth", "8"), ("bs", "8k")])
    );
}

#[test]
fn command_line_preset_text_gets_globals() {
    let mut cl = parse_command_line(&args(&["--iodepth=32", "--preset=p"])).expect("parses");
    assert!(cl.jobs.is_empty());
    cl.add_job_text("preset p", "[p]\nrw=randread\n")
        .expect("preset parses");
    assert_eq!(cl.jobs[0].iodepth, 32);
    assert_eq!(cl.jobs[0].rw, RwMode::RandRead);
}

#[test]
fn command_line_errors() {
    assert_eq!(
        cli_err(&["--iodepth=0"]),
        "command line: --iodepth=0: option 'iodepth': value '0' out of range 1..=65536"
    );
    assert_eq!(
        cli_err(&["--iodepht=4"]),
        "command line: --iodepht=4: unknown option 'iodepht' (did you mean 'iodepth'?)"
    );
    assert_eq!(
        cli_err(&["--outptu=x"]),
        "command line: --outptu=x: unknown option 'outptu' (did you mean 'output'?)"
    );
    assert_eq!(
        cli_err(&["--output-format=xml"]),
        "command line: --output-format=xml: option 'output-format': 'xml' is not one of normal, json, json+, terse (or several, comma-separated)"
    );
    assert_eq!(
        cli_err(&["--name="]),
        "command line: --name=: empty job name"
    );
    assert_eq!(
        cli_err(&["--bs"]),
        "command line: --bs: option 'bs' needs a value"
    );
    assert_eq!(
        cli_err(&["--name=x", "--bs=1000"]),
        "command line: --name=x: read block size 1000 is not a nonzero multiple of 512"
    );
    let missing = cli_err(&["/nonexistent/mqblk/jobs.fio"]);
    assert!(
        missing.starts_with("/nonexistent/mqblk/jobs.fio: cannot read job file: "),
        "{missing}"
    );
    let direct = parse_job_file(Path::new("/nonexistent/mqblk/x.fio")).expect_err("missing");
    assert!(matches!(*direct.kind, JobErrorKind::ReadFailed { .. }));
}

#[test]
fn command_line_tool_flags() {
    let cl = parse_command_line(&args(&["-h"])).expect("parses");
    assert!(cl.help);
    let cl = parse_command_line(&args(&["--help", "--output-format=json+"])).expect("parses");
    assert!(cl.help);
    assert_eq!(cl.output_format, OutputFormat::JSON_PLUS);
}

proptest! {
    #[test]
    fn parse_job_text_never_panics(text in "\\PC*") {
        let _ = parse_job_text("fuzz.fio", &text);
    }

    #[test]
    fn parse_job_text_never_panics_on_ini_like_input(
        text in "([\\[\\]=;#$ {}a-z0-9_.:,%\\-]{0,20}\n){0,12}"
    ) {
        let _ = parse_job_text("fuzz.fio", &text);
    }

    #[test]
    fn parse_command_line_never_panics(list in prop::collection::vec("--[a-z_=0-9:,.-]{0,16}", 0..6)) {
        let _ = parse_command_line(&list);
    }

    #[test]
    fn size_round_trips(n in 0u64..1_000_000, idx in 0usize..12) {
        const SUFFIXES: [(&str, u64); 12] = [
            ("", 1), ("b", 1), ("k", 1 << 10), ("KB", 1 << 10), ("m", 1 << 20), ("g", 1 << 30),
            ("t", 1 << 40), ("ki", 1_000), ("MiB", 1_000_000), ("gi", 1_000_000_000),
            ("Ti", 1_000_000_000_000), ("p", 1 << 50),
        ];
        let (suffix, mult) = SUFFIXES[idx];
        let text = format!("{n}{suffix}");
        prop_assert_eq!(parse_size(&text), n.checked_mul(mult));
    }

    #[test]
    fn plain_sizes_round_trip(n in any::<u64>()) {
        prop_assert_eq!(parse_size(&n.to_string()), Some(n));
        prop_assert_eq!(parse_size(&format!("0x{n:x}")), Some(n));
    }
}

/// A job file without a job section is an error naming the file, not a run of the default
/// job; the default job is only for a command line that names no job.
#[test]
fn a_job_file_without_jobs_is_refused() {
    let dir = std::env::temp_dir().join(format!("mqblk-nojobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in [
        ("empty.fio", ""),
        ("global.fio", "; only globals\n[global]\nbs=4k\n"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let args = vec![p.display().to_string()];
        let e = parse_command_line(&args).unwrap_err();
        assert_eq!(*e.kind, JobErrorKind::NoJobs, "{name}");
        assert!(e.to_string().contains(name), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A value that fails because a `${VAR}` in it is unset (it expands to nothing, as in fio)
/// says which variable.
#[test]
fn an_unset_variable_is_named_when_its_line_fails() {
    let e = parse_job_text("t", "[j]\nsize=${MQBLK_TEST_SURELY_UNSET_SIZE}\n").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("${MQBLK_TEST_SURELY_UNSET_SIZE} not set"),
        "{msg}"
    );
    assert!(msg.contains("'size'"), "{msg}");
}

#[test]
fn every_problem_of_a_file_is_listed_at_once_in_file_order() {
    let text = "[global]\nioengine=io_uring\ntrim_backlog=4\n\n[a]\nrw=randread\nbogus_opt=1\n\
                iodepth=0\n[b]\nbs=1000\n[c]\nlockfile=exclusive\nrw=randwrite\n";
    let err = parse_job_text("jobs.fio", text).expect_err("problems");
    let lines: Vec<String> = err.to_string().lines().map(str::to_string).collect();
    assert_eq!(err.count(), 4, "{lines:#?}");
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].starts_with("jobs.fio:3: fio option 'trim_backlog' is not implemented by mqblk: ")
    );
    assert_eq!(lines[1], "jobs.fio:7: unknown option 'bogus_opt'");
    assert!(lines[2].starts_with("jobs.fio:8: option 'iodepth': value '0' out of range"));
    // Job b has no problem of its own, but the bad [global] line above it means its
    // cross-field check (bs=1000) is not judged; job c's own line is listed.
    assert!(lines[3].starts_with("jobs.fio:12: fio option 'lockfile' is not implemented"));
    assert!(!lines.iter().any(|l| l.contains("1000")), "{lines:#?}");
}

#[test]
fn a_cross_field_problem_is_listed_beside_line_problems_of_other_jobs() {
    let err = parse_job_text("jobs.fio", "[a]\nbs=1000\n[b]\nzzq=1\n[c]\nsize=1k\n")
        .expect_err("problems")
        .to_string();
    assert_eq!(
        err,
        "jobs.fio:1: read block size 1000 is not a nonzero multiple of 512\n\
         jobs.fio:4: unknown option 'zzq'\n\
         jobs.fio:5: size=1024 is smaller than the block size 4096"
    );
}

#[test]
fn command_line_and_job_file_problems_are_listed_together() {
    let dir = scratch_dir("cli-many");
    let path = dir.join("j.fio");
    write(&path, "[j]\nrw=sideways\nzonemode=zigzag\n");
    let path = path.display().to_string();
    let err = cli_err(&["--iodepht=4", &path, "--name=x", "--bs=3q"]);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(lines[0].starts_with(
        "command line: --iodepht=4: unknown option 'iodepht' (did you mean 'iodepth'?)"
    ));
    assert!(lines[1].starts_with("command line: --bs=3q:"), "{err}");
    assert!(
        lines[2].starts_with(&format!("{path}:2: option 'rw'")),
        "{err}"
    );
    assert!(
        lines[3].starts_with(&format!(
            "{path}:3: option 'zonemode': 'zigzag' is not supported"
        )),
        "{err}"
    );
}

#[test]
fn a_file_of_garbage_lists_at_most_a_hundred_problems() {
    let text: String = (0..1000).map(|i| format!("[j{i}]\nnope{i}=1\n")).collect();
    let err = parse_job_text("jobs.fio", &text).expect_err("garbage");
    assert_eq!(err.count(), 100);
}

#[test]
fn percentages_and_expressions_size_a_job_as_fio_does() {
    let jobs = parse_job_text(
        "jobs.fio",
        "[a]\ndev_size=64m\nsize=50%\noffset=10%\nio_size=200%\nbs=(4*1024)\nruntime=(60*5)s\n\
         thinktime=(250*2)\n",
    )
    .unwrap();
    let a = &jobs[0];
    assert_eq!(
        (a.size, a.size_pct, a.offset_pct),
        (None, Some(50.0), Some(10.0))
    );
    assert_eq!(a.bs, [4096; 3]);
    assert_eq!(a.runtime_ns, 300_000_000_000);
    // A time expression without a unit is in microseconds, as fio reads it.
    assert_eq!(a.thinktime_ns, 500_000);
    let r = resolve(&jobs, &Default::default(), |_| Ok(64 << 20), 0).unwrap();
    // 10% of 64 MiB, aligned up to the 4 KiB block size; 50% of the device; twice that.
    assert_eq!(r[0].files[0].offset, 6_713_344);
    assert_eq!(r[0].files[0].size, 32 << 20);
    assert_eq!(r[0].io_bytes, Some(64 << 20));
    let err = file_err("[a]\nsize=150%\nbs=(4*\n");
    assert_eq!(err.lines().count(), 2, "{err}");
}

/// fio's process, memory and clock options are accepted, whatever their value, and named
/// once each with why they change nothing; the options around them still apply.
#[test]
fn fio_process_options_are_accepted_without_effect_and_said_once() {
    let jobs = parse_job_text(
        "jobs.fio",
        "[global]\nnuma_cpu_nodes=0-1\nnice=-5\nthreads=1\nbs=8k\n\
         [a]\nnuma_mem_policy=bind:0\nnice=3\n[b]\nlockmem=1m\nclocksource=cpu\n",
    )
    .unwrap();
    assert_eq!(jobs[0].bs[0], 8192);
    let notes = no_effect_notes(&jobs);
    let names: Vec<&str> = notes
        .iter()
        .map(|n| n.split(':').nth(1).unwrap().trim())
        .collect();
    assert_eq!(
        names,
        [
            "numa_cpu_nodes",
            "nice",
            "threads",
            "numa_mem_policy",
            "lockmem",
            "clocksource"
        ],
        "{notes:?}"
    );
    assert!(notes[0].starts_with("accepted, no effect in mqblk: numa_cpu_nodes: "));
    // A typo of one is still an unknown option.
    assert!(file_err("[a]\nnuma_cpu_node=0\n").contains("unknown option 'numa_cpu_node'"));
}

/// `iomem=` (`mem=`) names what buffers are made of, as fio's does: huge kinds lay a job's
/// bios out in runs of `hugepage-size`, the others in heap pages; bad kinds, a file where
/// none goes, and a size the kernel could not offer are one clear line each.
#[test]
fn iomem_sets_how_buffers_lie_in_memory() {
    use crate::job::IoMem;
    let jobs = parse_job_text(
        "m.fio",
        "[a]\n[b]\niomem=shmhuge\n[c]\nmem=mmaphuge:/dev/hugepages/x\nhugepage-size=1g\n[d]\niomem=mmap:/tmp/f\n",
    )
    .unwrap();
    assert_eq!(jobs[0].iomem, IoMem::Malloc);
    assert_eq!(jobs[0].buffer_bvecs(), mqblk_core::BvecLayout::PAGES);
    assert_eq!(jobs[1].iomem, IoMem::Huge { file: None });
    assert_eq!(jobs[1].buffer_bvecs().run, 2 << 20);
    assert_eq!(
        jobs[2].iomem,
        IoMem::Huge {
            file: Some("/dev/hugepages/x".into())
        }
    );
    assert_eq!(jobs[2].buffer_bvecs().run, 1 << 30);
    assert_eq!(jobs[3].buffer_bvecs(), mqblk_core::BvecLayout::PAGES);
    assert!(no_effect_notes(&jobs).is_empty());
    for (text, says) in [
        ("iomem=cudamalloc", "rdma"),
        ("iomem=hugepages", "malloc, shm, shmhuge"),
        ("iomem=shmhuge:/x", "only the mmap kinds"),
        ("iomem=mmaphuge:", "a file after"),
        ("hugepage-size=3m", "power of two"),
        ("hugepage-size=4k", "power of two"),
        ("hugepage-size=2g", "power of two"),
    ] {
        let err = file_err(&format!("[a]\n{text}\n"));
        assert!(err.contains(says), "{text}: {err}");
        assert_eq!(err.lines().count(), 1, "{text}: {err}");
    }
}

/// A log option without a prefix names its files after the job, as fio's do.
#[test]
fn a_bare_log_option_takes_the_job_s_name() {
    let jobs = parse_job_text("jobs.fio", "[seq-read]\nwrite_bw_log\nwrite_lat_log=lat\n").unwrap();
    assert_eq!(jobs[0].logs.bw.as_deref(), Some("seq-read"));
    assert_eq!(jobs[0].logs.lat.as_deref(), Some("lat"));
    assert!(file_err("[a]\nwrite_iolog\n").contains("needs a value"));
}

/// `rate_min` (`ratemin`), `rate_iops_min` and `rate_cycle` (`ratecycle`) parse per
/// direction, and a floor above its cap or beside a cap of the other kind is refused, as
/// fio's `fixup_options` refuses them.
#[test]
fn minimum_rates_parse_and_a_floor_above_its_cap_is_refused() {
    let jobs = parse_job_text(
        "jobs.fio",
        "[a]\nratemin=1m,2m\nratecycle=250\n[b]\nrate_iops_min=,50\nrate_iops=,100\n",
    )
    .unwrap();
    assert_eq!(jobs[0].rate_min, [1 << 20, 2 << 20, 2 << 20]);
    assert_eq!(jobs[0].rate_cycle_ms, 250);
    assert_eq!(jobs[1].rate_iops_min, [0, 50, 50]);
    assert!(
        file_err("[a]\nrate=1m\nrate_min=2m\n").contains("minimum rate exceeds the rate (read)")
    );
    assert!(file_err("[a]\nrate_iops=100\nrate_min=2m\n").contains("mutually exclusive"));
}

/// `exitall` in one section holds for every job (fio's global flag); the group a job's end
/// reaches is fio's `groupid` (one more at each `stonewall` or `new_group`); `exit_what`
/// picks the group, every running job, or all; `exitall_on_error` only on an error.
#[test]
fn exitall_reaches_the_jobs_fio_s_terminate_reaches() {
    let specs = parse_job_text(
        "jobs.fio",
        "[a]\nexitall\n[b]\n[c]\nnew_group\nexit_what=stonewall\n[d]\nstonewall\nexit_what=all\n[e]\nexitall_on_error\n",
    )
    .unwrap();
    let jobs = resolve(&specs, &Default::default(), |_| Ok(1 << 30), 0).unwrap();
    let e: Vec<Exit> = jobs.iter().map(|j| j.exit).collect();
    assert_eq!(
        e.iter().map(|x| x.groupid).collect::<Vec<_>>(),
        [0, 0, 1, 2, 2]
    );
    assert!(e.iter().all(|x| x.on_end), "exitall is the run's");
    // a's end (group): b, not c.
    assert!(e[0].ends(false, &e[1], true) && !e[0].ends(false, &e[2], true));
    // c's end (stonewall): whatever runs, not what has not started.
    assert!(e[2].ends(false, &e[0], true) && !e[2].ends(false, &e[3], false));
    // d's end (all): even a job still to start.
    assert!(e[3].ends(false, &e[0], false));
    let quiet = parse_job_text("jobs.fio", "[a]\nexitall_on_error\n[b]\n").unwrap();
    let q = resolve(&quiet, &Default::default(), |_| Ok(1 << 30), 0).unwrap();
    assert!(!q[0].exit.ends(false, &q[1].exit, true));
    assert!(q[0].exit.ends(true, &q[1].exit, true));
    assert!(!q[1].exit.ends(true, &q[0].exit, true));
}

/// `continue_on_error` and `ignore_error` as fio's `td_non_fatal_error` reads them: the type
/// of an error (verify for EILSEQ, read, else write), its bit, and its list (EIO and EILSEQ
/// by default; `ignore_error`'s replaces it and sets the bit).
#[test]
fn errors_a_job_goes_on_after_are_fio_s() {
    let policy = |text: &str| parse_job_text("jobs.fio", text).unwrap()[0].errors.clone();
    let none = policy("[a]\n");
    assert!(
        !none.non_fatal(true, 5),
        "by default the first error ends the job"
    );
    let reads = policy("[a]\ncontinue_on_error=read\n");
    assert!(reads.non_fatal(true, 5) && !reads.non_fatal(false, 5));
    assert!(
        !reads.non_fatal(true, 28),
        "ENOSPC is not in the default list"
    );
    assert!(!reads.non_fatal(true, 84), "EILSEQ is a verify error");
    let all = policy("[a]\ncontinue_on_error=1\n");
    assert!(all.non_fatal(false, 5) && all.non_fatal(true, 84));
    // enospc-pressure.fio's: writes go on after ENOSPC (and only that).
    let enospc = policy("[a]\ncontinue_on_error=write\nignore_error=,ENOSPC\n");
    assert!(enospc.non_fatal(false, 28) && !enospc.non_fatal(false, 5));
    assert!(!enospc.non_fatal(true, 5));
    let numbers = policy("[a]\nignore_error=EIO:-28\n");
    assert!(numbers.non_fatal(true, 28) && numbers.non_fatal(true, 5));
    assert!(file_err("[a]\nignore_error=EWHAT\n").contains("unknown error EWHAT"));
}

/// fio's `td_steadystate_init`: the jobs of one reporting group share their steady-state
/// settings; a job that differs is refused with both names, and a new group may differ.
#[test]
fn steady_state_settings_must_agree_within_a_reporting_group() {
    let specs = parse_job_text("ss.fio", "[a]\nss=iops:5%\nss_dur=3\n[b]\n").unwrap();
    let err = resolve(&specs, &Default::default(), |_| Ok(1 << 30), 0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("job 'b'") && err.contains("job 'a'") && err.contains("steadystate"),
        "{err}"
    );
    let specs = parse_job_text("ss.fio", "[a]\nss=iops:5%\nss_dur=3\n[b]\nnew_group\n").unwrap();
    let jobs = resolve(&specs, &Default::default(), |_| Ok(1 << 30), 0).unwrap();
    assert_eq!(jobs[0].steady.map(|s| s.dur_s), Some(3));
    assert!(jobs[1].steady.is_none());
}

/// A file a `fill_device` job fills takes the room it is given (what the runner's `stat`
/// says), is made empty rather than laid out, and a later job that names it without a size
/// reads it as long as it is when that job starts, in whole blocks.
#[test]
fn a_filled_file_is_read_as_far_as_it_goes_when_the_next_job_starts() {
    let text = "[w]\nfilename=d\nrw=write\nbs=64k\nfill_device=1\n\
                [r]\nstonewall\nfilename=d\nrw=read\nbs=64k\n";
    let specs = parse_job_text("x.fio", text).unwrap();
    let room = 8u64 << 20;
    let layout = FileLayout::plan(&specs, |s, _| Ok(s.fills_the_room().then_some(room))).unwrap();
    assert_eq!(layout.files.len(), 1);
    assert!(layout.files[0].grows && layout.files[0].sized);
    assert_eq!(layout.files[0].len, room);
    let jobs = resolve(&specs, &layout, |_| Ok(room), 0).unwrap();
    assert!(!jobs[0].files[0].to_eof);
    assert!(jobs[1].files[0].to_eof);
    assert_eq!(jobs[1].files[0].size, room);
    // The writer stopped 100 KiB short: the reader's region ends at the last whole block.
    let now = room - 100 * 1024;
    let r = jobs[1].sized_at_start(|_| Some(now)).unwrap();
    assert_eq!(r.files[0].size, now / 65536 * 65536);
    let e = jobs[1].sized_at_start(|_| Some(4096)).unwrap_err();
    assert!(e.contains("file d holds 4096 bytes"), "{e}");
}

/// A job file's job with no engine, file, driver or device runs on the null device, which
/// a note says once for all of them (fio would write files); the command line's and one
/// naming an engine get none.
#[test]
fn jobs_that_name_no_engine_nor_file_get_one_note() {
    let jobs = parse_job_text(
        "t.fio",
        "[a]\nrw=read\n[b]\nrw=write\n[c]\nioengine=psync\nsize=1m\n",
    )
    .unwrap();
    let note = null_default_note(&jobs).unwrap();
    assert!(
        note.starts_with("note: jobs a, b name no ioengine= nor filename="),
        "{note}"
    );
    assert!(note.contains("psync on files a.0.0"), "{note}");
    let jobs = parse_job_text("t.fio", "[c]\nioengine=psync\nsize=1m\n").unwrap();
    assert_eq!(null_default_note(&jobs), None);
}

/// `read_iolog`: the log's files become the job's, its directions the job's `rw` and its
/// largest I/Os its block sizes; a `replay_align` that is not a power of two and a missing
/// log are refused at the line that named them.
#[test]
fn a_replayed_log_gives_the_job_its_files_directions_and_sizes() {
    let dir = std::env::temp_dir().join(format!("mqblk-readiolog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("src.log");
    std::fs::write(
        &log,
        "fio version 3 iolog\n0 a add\n0 b add\n10 a write 0 8192\n20 b write 4096 4096\n",
    )
    .unwrap();
    let text = format!("[r]\nread_iolog={}\n", log.display());
    let jobs = parse_job_text("x.fio", &text).unwrap();
    assert_eq!(jobs[0].filename.as_deref(), Some("a:b"));
    assert_eq!(jobs[0].rw, RwMode::Write);
    assert_eq!(jobs[0].bs[1], 8192);
    let e = parse_job_text("x.fio", &format!("{text}replay_align=3000\n")).unwrap_err();
    assert!(
        e.to_string()
            .contains("replay_align=3000: not a power of two"),
        "{e}"
    );
    let e = parse_job_text("x.fio", "[r]\nread_iolog=/nonexistent/log\n").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("x.fio:2: read_iolog=/nonexistent/log: "),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
