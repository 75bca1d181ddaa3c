//! `mqblk sim --crash`: power cuts in random configurations, and the planted bugs the oracle
//! must catch, each with a line that reproduces it.

mod common;
use common::{mqblk, text};

#[test]
fn crash_runs_find_nothing_in_the_block_layer() {
    let o = mqblk(&["sim", "--crash", "--seed=1", "--runs=3000"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(out.ends_with("3000 runs, 0 violations\n"), "{out}");
    // The runs judged something: writes completed, and most had to survive their cut.
    let err = text(&o.stderr);
    let figure = |before: &str| -> u64 {
        let head = err.split(before).next().unwrap_or("");
        head.rsplit(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no figure before '{before}' in {err}"))
    };
    let (written, required) = (
        figure(" writes completed"),
        figure(" of them had to survive"),
    );
    assert!(
        written > 100_000 && required > written / 2,
        "{written} writes, {required} required: {err}"
    );
}

/// Runs `--plant=BUG:1` over 1,000 seeds: it must be caught, and the first reproduce line
/// must report the same violation again.
fn caught(bug: &str) {
    let plant = format!("--plant={bug}:1");
    let o = mqblk(&["sim", "--crash", "--seed=1", "--runs=1000", &plant]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{bug} not caught: {out}");
    let last = out.lines().last().unwrap_or("");
    let n: u64 = last
        .strip_prefix("1000 runs, ")
        .and_then(|r| r.strip_suffix(" violations"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("last line: {last}"));
    assert!(n > 0, "{out}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("reproduce with: mqblk "))
        .unwrap_or_else(|| panic!("no reproduce line: {out}"));
    assert!(line.contains(&plant) && line.ends_with(" -v"), "{line}");
    let seed = line
        .split("--seed ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or("?");
    let args: Vec<&str> = line.split(' ').collect();
    let again = mqblk(&args);
    let a = text(&again.stdout);
    assert_eq!(again.status.code(), Some(1), "{a}");
    assert!(
        a.starts_with(&format!("seed {seed}: "))
            && a.contains("is lost from")
            && a.ends_with("1 runs, 1 violations\n"),
        "{a}"
    );
}

#[test]
fn a_flush_completed_before_its_writes_are_durable_is_caught() {
    caught("flush-early");
}

#[test]
fn fua_dropped_on_a_split_is_caught() {
    caught("fua-split-drop");
}

#[test]
fn a_write_reordered_past_a_flush_is_caught() {
    caught("reorder-past-flush");
}

#[test]
fn crash_mode_refuses_what_does_not_apply() {
    for (args, says) in [
        (
            vec!["sim", "--crash", "--plant=drop-completion:1"],
            "--plant=drop-completion:1: that bug is for --fuzz",
        ),
        (
            vec!["sim", "--fuzz", "--plant=flush-early:1"],
            "--plant=flush-early:1: that bug is for --crash",
        ),
        (
            vec!["sim", "--crash", "--bs=4k"],
            "--crash picks its own configuration; '--bs=4k' does not apply",
        ),
        (vec!["sim", "--crash", "--fuzz"], "cannot be used with"),
        (
            vec!["sim", "--crash", "--plant=torn:1"],
            "unknown bug 'torn'",
        ),
    ] {
        let o = mqblk(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
}
