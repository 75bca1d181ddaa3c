//! One command-line parser: every subcommand and sub-subcommand has `--help`, options take
//! their value after `=` or as the next argument alike, and bad arguments are one line.

use std::process::Command;

fn mqblk(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        vec!["--help"],
        vec!["bench", "--help"],
        vec!["sim", "--help"],
        vec!["scenario", "--help"],
        vec!["replay", "--help"],
        vec!["trace", "--help"],
        vec!["trace", "capture", "--help"],
        vec!["trace", "dump", "--help"],
        vec!["serve", "--help"],
    ] {
        let o = mqblk(&sub);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{sub:?}: {}", text(&o.stderr));
        assert!(
            out.to_lowercase().contains("usage"),
            "{sub:?} printed no usage:\n{out}"
        );
    }
    // bench and sim list fio's options too.
    for sub in ["bench", "sim"] {
        let out = text(&mqblk(&[sub, "--help"]).stdout);
        assert!(out.contains("rwmixread") && out.contains("iodepth_batch_complete_min"));
    }
}

#[test]
fn values_after_equals_or_as_the_next_argument() {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/traces/grep-tree"
    );
    let a = mqblk(&[
        "replay",
        trace,
        "--device",
        "ssd",
        "--ioscheduler",
        "deadline",
        "--output-format",
        "json",
    ]);
    let b = mqblk(&[
        "replay",
        trace,
        "--device=ssd",
        "--ioscheduler=deadline",
        "--output-format=json",
    ]);
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(text(&a.stdout), text(&b.stdout));
    let s1 = mqblk(&[
        "sim",
        "--seed",
        "5",
        "--name=x",
        "--rw=randread",
        "--runtime=10ms",
        "--time_based",
    ]);
    let s2 = mqblk(&[
        "sim",
        "--name=x",
        "--rw=randread",
        "--runtime=10ms",
        "--time_based",
        "--seed=5",
    ]);
    assert!(s1.status.success(), "{}", text(&s1.stderr));
    assert_eq!(text(&s1.stdout), text(&s2.stdout));
}

#[test]
fn bad_arguments_are_one_line_naming_the_command() {
    for (args, want) in [
        (vec!["frob"], "mqblk: unrecognized subcommand 'frob'"),
        (
            vec!["replay"],
            "mqblk replay: the following required arguments",
        ),
        (
            vec!["replay", "t", "--mode=sideways"],
            "mqblk replay: invalid value 'sideways'",
        ),
        (
            vec!["scenario", "--seed=x"],
            "mqblk scenario: invalid value 'x'",
        ),
        (
            vec!["serve", "--bogus"],
            "mqblk serve: unexpected argument '--bogus'",
        ),
        (
            vec!["sim", "--cpus=0"],
            "mqblk sim: --cpus=0: must be 1..=1024",
        ),
        (
            vec!["sim", "--plant=eat:3"],
            "mqblk sim: --plant=eat:3: unknown bug 'eat'",
        ),
    ] {
        let o = mqblk(&args);
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(
            e.starts_with(want) && e.trim_end().lines().count() == 1,
            "{args:?}: {e}"
        );
    }
}
