//! What the test suites share for tests that need something outside the build: an external
//! tool (blkparse, fio, nbdinfo, QEMU, ...), root, a loop device, a mounted file system.
//!
//! The rule is one for every test: where what a test needs is missing, it fails in CI (the
//! `CI` variable set: `.ci/run` installs every tool and runs as root) and elsewhere prints one
//! line, `SKIP: <test>: <why>`, and returns without checking anything. The line is written
//! straight to the process's standard error, past the test harness's capture, so a passing
//! run still shows it and `bash scripts/test` counts it in its last line.
//!
//! ```no_run
//! fn blkparse_reads_our_files() {
//!     if !mqblk_testkit::need_tools("blkparse_reads_our_files", &["blkparse"]) {
//!         return;
//!     }
//!     // ... run blkparse ...
//! }
//! ```

use std::io::Write;
use std::process::Command;

/// Whether this is a CI run (where everything a test needs must be there).
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `test` cannot run because `why`: a failure in CI, a visible skip elsewhere. The caller
/// returns after it.
pub fn missing(test: &str, why: &str) {
    assert!(!in_ci(), "CI cannot run {test}: {why}");
    skip(test, why);
}

/// `test` skips a check for a reason CI may have too (a kernel without a cgroup v1
/// hierarchy, a file system sysfs says nothing of): one visible line, never a failure.
pub fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr().lock(), "SKIP: {test}: {why}");
}

/// True when every tool of `tools` is installed; otherwise [`missing`] says which are not
/// (with the Debian packages that have them, where known) and this returns false.
pub fn need_tools(test: &str, tools: &[&str]) -> bool {
    let absent: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if absent.is_empty() {
        return true;
    }
    let packages: Vec<&str> = absent.iter().filter_map(|t| package_of(t)).collect();
    let why = if packages.is_empty() {
        format!("{} missing", absent.join(", "))
    } else {
        format!(
            "{} missing (apt-get install {})",
            absent.join(", "),
            packages.join(" ")
        )
    };
    missing(test, &why);
    false
}

/// True when the tests run as root and every tool of `tools` is installed; otherwise a
/// [`missing`] line and false.
pub fn need_root_and_tools(test: &str, tools: &[&str]) -> bool {
    if !is_root() {
        missing(test, "needs root");
        return false;
    }
    need_tools(test, tools)
}

/// Mounts debugfs at `/sys/kernel/debug` if its block directory is not there (root), for
/// tests that read a queue's state from it (`mqblk_drivers::sysfs::driver_tag_depth`);
/// false where it still is not (a kernel without debugfs: the caller says so with
/// [`skip`], no fault of the test's machine).
pub fn debugfs() -> bool {
    let block = std::path::Path::new("/sys/kernel/debug/block");
    if !block.exists() {
        let _ = Command::new("mount")
            .args(["-t", "debugfs", "none", "/sys/kernel/debug"])
            .output();
    }
    block.exists()
}

/// The I/O schedulers the running kernel has, as a block device's `queue/scheduler` lists
/// them (every blk-mq device lists every registered one); empty where no device shows any.
pub fn kernel_schedulers() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    for dev in dir.flatten() {
        if let Ok(s) = std::fs::read_to_string(dev.path().join("queue/scheduler")) {
            let names: Vec<String> = s
                .split_whitespace()
                .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
                .collect();
            if names.len() > 1 {
                return names;
            }
        }
    }
    Vec::new()
}

/// Whether the running kernel has the I/O scheduler `name`; where it does not, `test` says
/// it [`skip`]s what needs it. A kernel built without a scheduler (`CONFIG_IOSCHED_BFQ`
/// unset) is the machine's choice, not a missing tool, so this is never a failure in CI.
pub fn kernel_has_scheduler(test: &str, name: &str) -> bool {
    let have = kernel_schedulers();
    if have.iter().any(|s| s == name) {
        return true;
    }
    skip(
        test,
        &format!(
            "the kernel has no '{name}' I/O scheduler (it has: {})",
            have.join(", ")
        ),
    );
    false
}

/// The Debian package that installs `tool`, for the skip line.
fn package_of(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "blkparse" | "btt" => "blktrace",
        "fio" => "fio",
        "nbdinfo" | "nbdcopy" => "libnbd-bin",
        "qemu-img" | "qemu-io" | "qemu-nbd" => "qemu-utils",
        "qemu-system-x86_64" => "qemu-system-x86",
        "qemu-storage-daemon" => "qemu-system-common",
        "busybox" => "busybox-static",
        "perf" => "linux-perf",
        "dbench" => "dbench",
        "mkfs.ext4" => "e2fsprogs",
        "mkfs.xfs" => "xfsprogs",
        "losetup" => "mount",
        _ => return None,
    })
}

/// `losetup --find --show IMAGE`: the loop device made over the file `image`.
pub fn attach_loop(image: &std::path::Path) -> Result<String, String> {
    losetup(image, &[])
}

/// `losetup --find --show --direct-io=on IMAGE`: a loop device whose reads and writes reach
/// the file's own device (the page cache bypassed), so that it is as slow as that device
/// rather than as the CPU copying pages. Its blocks must have been written: a read of a hole
/// or of an unwritten extent costs the file system no I/O.
pub fn attach_loop_direct_io(image: &std::path::Path) -> Result<String, String> {
    losetup(image, &["--direct-io=on"])
}

fn losetup(image: &std::path::Path, extra: &[&str]) -> Result<String, String> {
    let o = Command::new("losetup")
        .args(["--find", "--show"])
        .args(extra)
        .arg(image)
        .output()
        .map_err(|e| format!("losetup: {e}"))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(format!("losetup {}: {}", image.display(), err.trim()));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// `losetup -d DEV`, for a test's cleanup (a failure is not the test's).
pub fn detach_loop(dev: &str) {
    let _ = Command::new("losetup").args(["-d", dev]).status();
}

/// `mkfs.ext4 -q DEV`, then `mount DEV DIR`.
pub fn mkfs_ext4_and_mount(dev: &str, dir: &std::path::Path) -> Result<(), String> {
    let ran = |c: &mut Command| c.status().is_ok_and(|s| s.success());
    if !ran(Command::new("mkfs.ext4").args(["-q", dev])) {
        return Err(format!("mkfs.ext4 {dev} failed"));
    }
    if !ran(Command::new("mount").arg(dev).arg(dir)) {
        return Err(format!("mount {dev} {} failed", dir.display()));
    }
    Ok(())
}

/// `mount -t tmpfs -o size=MIBm tmpfs DIR`: a file system of `mib` MiB, for a test that
/// fills one.
pub fn mount_tmpfs(dir: &std::path::Path, mib: u32) -> Result<(), String> {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(())
        .ok_or_else(|| format!("mount -t tmpfs on {} failed", dir.display()))
}

/// `umount DIR`, for a test's cleanup (a failure is not the test's).
pub fn umount(dir: &std::path::Path) {
    let _ = Command::new("umount").arg(dir).status();
}

/// `cmd`'s output, as [`Command::output`] gives it, but a child still running after `limit`
/// is killed and the test fails with what it printed so far. A hung child (a deadlock in the
/// program under test) then ends its test instead of holding the whole run, and does not
/// outlive it.
pub fn output_within(cmd: &mut Command, limit: std::time::Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};

    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    // Each stream is read as it comes, so a killed child's last words are there to show,
    // even where a grandchild keeps the pipe open.
    let collect = |mut r: Box<dyn Read + Send>| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let into = buf.clone();
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&chunk[..n]);
            }
        });
        (buf, reader)
    };
    let (out, out_reader) = collect(Box::new(child.stdout.take().expect("piped stdout")));
    let (err, err_reader) = collect(Box::new(child.stderr.take().expect("piped stderr")));
    let take =
        |b: &Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()));
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < limit => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{cmd:?} was still running after {} s and was killed; it printed:\n{}\n{}",
                    limit.as_secs(),
                    String::from_utf8_lossy(&take(&out)),
                    String::from_utf8_lossy(&take(&err))
                );
            }
            Err(e) => panic!("waiting for {cmd:?}: {e}"),
        }
    };
    let _ = out_reader.join();
    let _ = err_reader.join();
    std::process::Output {
        status,
        stdout: take(&out),
        stderr: take(&err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_child_that_finishes_gives_its_output_and_status() {
        let o = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(30),
        );
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
    }

    #[test]
    fn a_child_past_its_limit_is_killed_and_its_words_are_shown() {
        let pidfile = std::env::temp_dir().join(format!("testkit-hang-{}", std::process::id()));
        let script = format!(
            "echo $$ > {}; echo started; exec sleep 600",
            pidfile.display()
        );
        let r = std::panic::catch_unwind(|| {
            output_within(
                Command::new("sh").args(["-c", &script]),
                Duration::from_millis(500),
            )
        });
        let msg = *r
            .expect_err("a hung child fails the test")
            .downcast::<String>()
            .unwrap();
        assert!(
            msg.contains("was killed") && msg.contains("started"),
            "{msg}"
        );
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        let _ = std::fs::remove_file(&pidfile);
        assert!(
            !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
            "the child outlived its limit"
        );
    }
}
