//! `mqblk serve --vhost-user-blk` from the command line and from a config file: the socket,
//! the virtqueue-to-hardware-queue map in `--stats`, SIGTERM, and bad input. The protocol
//! itself is tested in `crates/vhost/tests` and with a real guest in `guest.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn mqblk(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mqblk-vhost-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn wait_for(p: &Path) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{} never appeared",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_config_file_serves_one_export_to_a_vm_and_one_over_nbd() {
    let d = scratch("cfg");
    let (nbd, vm) = (d.join("nbd.sock"), d.join("vm.sock"));
    let cfg = d.join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nlisten = [\"unix:{}\"]\nstats = \"{}\"\n\n\
             [export.disk]\nsize = \"16m\"\n\n\
             [export.vm]\nsize = \"32m\"\nvhost-user-blk = \"{}\"\nnum-queues = 2\nvq-threads = 1\nioscheduler = \"mq-deadline\"\n",
            nbd.display(),
            d.join("stats.json").display(),
            vm.display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(["serve", &format!("--config={}", cfg.display())])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&nbd);
    wait_for(&vm);
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("export 'vm' (33554432 bytes) as vhost-user-blk on")
            && err.contains("(2 virtqueues on 1 threads over 2 hardware queues)"),
        "{err}"
    );
    assert!(
        err.contains("export 'disk' (16777216 bytes) on nbd+unix"),
        "{err}"
    );
    assert!(
        !err.contains("export 'vm' (33554432 bytes) on nbd"),
        "{err}"
    );
    assert!(
        err.contains("export 'vm': 0 front-end connections"),
        "{err}"
    );
    assert!(!vm.exists(), "the server left its vhost-user socket behind");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("stats.json")).unwrap()).unwrap();
    let vm_stats = stats
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["export"] == "vm")
        .unwrap();
    let vqs = vm_stats["virtqueues"].as_array().unwrap();
    let hctx: Vec<u64> = vqs.iter().map(|v| v["hctx"].as_u64().unwrap()).collect();
    assert_eq!(hctx, [0, 1], "{vm_stats}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_vhost_flags_get_one_line_and_touch_nothing() {
    let d = scratch("bad");
    let o = mqblk(&["serve", "--num-queues=2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--vhost-user-blk"), "{}", stderr(&o));
    let sock = d.join("s");
    let o = mqblk(&[
        "serve",
        &format!("--vhost-user-blk={}", sock.display()),
        "--listen=unix:/tmp/x.sock",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    let o = mqblk(&[
        "serve",
        &format!("--vhost-user-blk={}", sock.display()),
        "--num-queues=0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("num-queues=0 must be 1..=64"),
        "{}",
        stderr(&o)
    );
    // A regular file at the path is refused and left as it was.
    let file = d.join("precious");
    std::fs::write(&file, b"keep me").unwrap();
    let o = mqblk(&["serve", &format!("--vhost-user-blk={}", file.display())]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("exists and is not a socket"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // A zoned export: over vhost-user-blk only, null_blk's zone checks, zone flags with it.
    let vhost = format!("--vhost-user-blk={}", sock.display());
    for (args, want) in [
        (
            vec!["--zoned", "--listen=unix:/tmp/x.sock"],
            "zoned needs vhost-user-blk",
        ),
        (
            vec![vhost.as_str(), "--zoned", "--zone-size=3m"],
            "zone_size must be a power of two",
        ),
        (
            vec![
                vhost.as_str(),
                "--zoned",
                "--driver=uring",
                "--filename=/tmp/x",
            ],
            "zoned applies to the memory and null drivers",
        ),
        (vec![vhost.as_str(), "--zone-size=4m"], "--zoned"),
    ] {
        let o = mqblk(&[vec!["serve"], args].concat());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(want) && err.trim().lines().count() == 1,
            "{err}"
        );
    }
    assert!(!sock.exists());
    let _ = std::fs::remove_dir_all(&d);
}
