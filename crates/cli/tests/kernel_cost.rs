//! `scripts/kernel-cost.sh`, which measured the kernel cost profile of `mqblk sim
//! --cost-profile=kernel`, runs as the README shows it (shortened to one repeat of one
//! second): it needs root and fio, fails in CI without them (`.ci/run` installs fio) and is
//! skipped visibly elsewhere.

use std::path::Path;
use std::process::Command;

#[test]
fn the_kernel_cost_script_measures_every_scheduler_of_a_loop_device() {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let fio = Command::new("sh")
        .args(["-c", "command -v fio"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !(root && fio) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with fio installed"
        );
        eprintln!("SKIP kernel-cost.sh: needs root and fio");
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .args(["scripts/kernel-cost.sh", "--json", "1", "1"])
        .current_dir(&repo)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("mount") {
        // A container that refuses tmpfs mounts or loop devices cannot measure this.
        assert!(std::env::var_os("CI").is_none(), "{stderr}");
        eprintln!("SKIP kernel-cost.sh: {stderr}");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let scheds = v["schedulers"].as_object().unwrap();
    for s in ["none", "mq-deadline", "kyber", "bfq"] {
        let ns = scheds[s]["ns_per_io"].as_f64().unwrap();
        assert!(ns > 0.0, "{s}: {ns} ns per I/O\n{v}");
    }
    assert_eq!(scheds["none"]["over_none_ns"].as_f64(), Some(0.0));
}
