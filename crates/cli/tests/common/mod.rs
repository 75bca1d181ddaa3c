//! Helpers shared by the command-line tests that run the repository's scripts and the tools
//! they need.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The longest one `mqblk` command of these tests may take (a twin suite's few minutes,
/// with room for a slow machine) before it counts as hung and is killed.
pub const MQBLK_LIMIT: std::time::Duration = std::time::Duration::from_secs(900);

/// `mqblk ARGS`, this build's binary, with its output.
pub fn mqblk(args: &[&str]) -> std::process::Output {
    mqblk_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_mqblk")).args(args),
        MQBLK_LIMIT,
    )
}

/// `mqblk ARGS` run in `dir`, for a job that leaves files in its working directory (a
/// writing job with `verify=` leaves its verify state there, as fio's does).
pub fn mqblk_in(dir: &Path, args: &[&str]) -> std::process::Output {
    mqblk_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_mqblk"))
            .args(args)
            .current_dir(dir),
        MQBLK_LIMIT,
    )
}

/// Output bytes as text.
pub fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// `mqblk ARGS` is refused as bad input: exit status 2 and one line on stderr that says
/// `want`.
pub fn refused_in_one_line(args: &[&str], want: &str) {
    let o = mqblk(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(want) && err.trim_end().lines().count() == 1,
        "{want}: {args:?}: {err}"
    );
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use mqblk_testkit::{have, missing, need_root_and_tools, need_tools};

/// What `bash PATH ARGS` printed, run from the repository's root with this build's mqblk as
/// `$MQBLK`; the script must succeed.
pub fn run_repo_script(path: &str, args: &[&str]) -> Vec<u8> {
    run_repo_script_env(path, args, &[])
}

/// [`run_repo_script`] with more variables in the script's environment.
pub fn run_repo_script_env(path: &str, args: &[&str], env: &[(&str, &str)]) -> Vec<u8> {
    let out = Command::new("bash")
        .arg(path)
        .args(args)
        .env("MQBLK", env!("CARGO_BIN_EXE_mqblk"))
        .envs(env.iter().copied())
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{path} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
