//! The skip rule, seen from outside: the test below runs its helper test in a child process
//! of this test binary, once as a local run and once as CI, and reads what it printed.

use std::process::Command;

/// Not a check by itself (ignored, so it never counts as a pass): asks for a tool no machine
/// has, as a test that needs one would; the test below runs it in a child process.
#[test]
#[ignore = "run by a_missing_tool_is_a_visible_skip_locally_and_a_failure_in_ci"]
fn helper_asks_for_a_missing_tool() {
    assert!(!mqblk_testkit::need_tools(
        "the helper",
        &["sh", "mqblk-no-such-tool", "fio-no-such-tool"]
    ));
}

fn child(ci: bool) -> std::process::Output {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "helper_asks_for_a_missing_tool",
        "--ignored",
        "--test-threads=1",
    ]);
    if ci {
        c.env("CI", "true");
    } else {
        c.env_remove("CI");
    }
    c.output().unwrap()
}

#[test]
fn a_missing_tool_is_a_visible_skip_locally_and_a_failure_in_ci() {
    let local = child(false);
    let err = String::from_utf8_lossy(&local.stderr);
    assert!(local.status.success(), "{err}");
    assert!(
        err.lines()
            .any(|l| l == "SKIP: the helper: mqblk-no-such-tool, fio-no-such-tool missing"),
        "the skip line, past the harness's capture: {err}"
    );
    let ci = child(true);
    let out = String::from_utf8_lossy(&ci.stdout);
    assert!(!ci.status.success(), "CI must fail: {out}");
    assert!(out.contains("CI cannot run the helper"), "{out}");
}
