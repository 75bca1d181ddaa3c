//! A real Linux guest on `mqblk serve --vhost-user-blk`: `scripts/guest-test.sh` as the
//! README shows it. The guest's virtio-blk driver sees two virtqueues as two blk-mq hardware
//! queues, fio in the guest writes a crc32c pattern from one job per virtqueue, a second
//! boot verifies it, and the server stops cleanly on SIGTERM. It needs QEMU, busybox and
//! fio (the script installs them with apt-get, and `.ci/run` does so too) and Debian's cloud
//! kernel package; in CI a machine without them fails, elsewhere the test is skipped visibly.

use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_linux_guest_writes_and_verifies_across_a_reboot_on_two_virtqueues() {
    let tools = ["qemu-system-x86_64", "busybox", "fio"];
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs {missing:?} (.ci/run)"
        );
        eprintln!("SKIP guest-test.sh: needs {missing:?} (apt-get install qemu-system-x86 busybox-static fio)");
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .args(["scripts/guest-test.sh", "--num-queues=2"])
        .env("MQBLK", env!("CARGO_BIN_EXE_mqblk"))
        .current_dir(&repo)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("PASS: 2 virtqueues"),
        "guest-test.sh failed:\n{stdout}\n{stderr}"
    );
    // Each virtqueue went through its own hardware queue.
    assert!(
        stdout.contains("0->hctx 0") && stdout.contains("1->hctx 1"),
        "{stdout}"
    );
}
