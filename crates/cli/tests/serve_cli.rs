//! `mqblk serve` against real NBD clients from Debian's packages (libnbd-bin, qemu-utils, fio).
//! Each check skips with a printed reason when its client is not installed.

use mqblk_testkit::{missing, need_tools};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// Whether fio is installed with its nbd engine; where it is not, a failure in CI and a
/// visible skip elsewhere.
fn fio_nbd(test: &str) -> bool {
    let engine_ok = Command::new("fio")
        .arg("--enghelp")
        .output()
        .is_ok_and(|o| text(&o.stdout).lines().any(|l| l.trim() == "nbd"));
    if !engine_ok {
        missing(
            test,
            "fio with the nbd engine missing (apt-get install fio)",
        );
    }
    engine_ok
}

struct Serve {
    child: Option<Child>,
    sock: PathBuf,
    dir: PathBuf,
}

impl Serve {
    fn start(name: &str, extra: &[&str]) -> Serve {
        let dir = std::env::temp_dir().join(format!("mqblk-serve-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("nbd.sock");
        let mut args = vec![
            "serve".to_string(),
            format!("--listen=unix:{}", sock.display()),
            format!("--stats={}", dir.join("stats.json").display()),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
            .args(&args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !sock.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve {
            child: Some(child),
            sock,
            dir,
        }
    }

    fn uri(&self) -> String {
        format!("nbd+unix:///mqblk?socket={}", self.sock.display())
    }

    /// SIGTERM, wait, and return the server's stderr and the stats file.
    fn stop(mut self) -> (String, serde_json::Value) {
        let mut child = self.child.take().unwrap();
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "server did not exit on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stats = std::fs::read_to_string(self.dir.join("stats.json")).unwrap();
        (text(&out.stderr), serde_json::from_str(&stats).unwrap())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits (10 s at most) until a server accepts connections on the unix socket `sock`.
fn listening(sock: &Path) {
    let t0 = Instant::now();
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no server listening on {}",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd).args(args).output().unwrap()
}

fn random_file(path: &Path, len: usize, seed: u64) {
    let mut x = seed | 1;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, data).unwrap();
}

#[test]
fn nbdinfo_sees_size_flags_and_block_sizes() {
    if !need_tools("nbdinfo_sees_size_flags_and_block_sizes", &["nbdinfo"]) {
        return;
    }
    let s = Serve::start(
        "info",
        &["--size=64m", "--export=mqblk", "--description=test"],
    );
    let o = run("nbdinfo", &[&s.uri()]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for needle in [
        "export-size: 67108864",
        "can_multi_conn: true",
        "can_flush: true",
        "can_fua: true",
        "can_trim: true",
        "can_zero: true",
        "is_read_only: false",
        "block_size_minimum: 512",
        "block_size_maximum: 33554432",
    ] {
        assert!(out.contains(needle), "missing {needle}:\n{out}");
    }
    let l = run("nbdinfo", &["--list", &s.uri()]);
    assert!(
        text(&l.stdout).contains("export=\"mqblk\""),
        "{}",
        text(&l.stdout)
    );
    let (err, stats) = s.stop();
    assert!(err.contains("final flush ok"), "{err}");
    assert!(stats["connections"].as_u64().unwrap() >= 1, "{stats}");
}

#[test]
fn nbdcopy_in_and_out_with_multi_conn_keeps_every_byte() {
    if !need_tools(
        "nbdcopy_in_and_out_with_multi_conn_keeps_every_byte",
        &["nbdcopy"],
    ) {
        return;
    }
    let s = Serve::start(
        "copy",
        &["--size=48m", "--hw-queues=2", "--ioscheduler=mq-deadline"],
    );
    let src = s.dir.join("src.bin");
    let back = s.dir.join("back.bin");
    random_file(&src, 48 << 20, 11);
    let o = run(
        "nbdcopy",
        &["--connections=4", &src.display().to_string(), &s.uri()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(
        "nbdcopy",
        &["--connections=4", &s.uri(), &back.display().to_string()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        std::fs::read(&src).unwrap() == std::fs::read(&back).unwrap(),
        "the copy differs"
    );
    let (_, stats) = s.stop();
    assert_eq!(stats["errors"], 0);
    let conns = stats["per_connection"].as_array().unwrap();
    assert!(conns.len() >= 2, "{stats}");
    let written: u64 = conns
        .iter()
        .map(|c| c["bytes_written"].as_u64().unwrap())
        .sum();
    assert_eq!(written, 48 << 20, "{stats}");
    // Connections are placed over both hardware queues (how nbdcopy spreads its work over
    // them is its own affair: on two cores one connection often does it all).
    let placed: std::collections::BTreeSet<u64> =
        conns.iter().map(|c| c["hctx"].as_u64().unwrap()).collect();
    assert_eq!(
        placed.into_iter().collect::<Vec<_>>(),
        vec![0, 1],
        "connections spread over both hardware queues: {stats}"
    );
    // The queue's report: every hardware queue completed what it dispatched, and the
    // scheduler is named with its statistics.
    let queue = &stats["queue"];
    assert_eq!(queue["ioscheduler"], "mq-deadline", "{stats}");
    assert_eq!(queue["sched"]["scheduler"], "mq-deadline", "{stats}");
    for h in queue["hctx"].as_array().unwrap() {
        assert_eq!(h["completed"], h["dispatched"], "{stats}");
    }
    assert!(
        queue["sched"]["be"]["dispatched"].as_u64().unwrap() > 0,
        "{stats}"
    );
}

#[test]
fn qemu_img_and_qemu_io_read_back_patterns() {
    if !need_tools(
        "qemu_img_and_qemu_io_read_back_patterns",
        &["qemu-img", "qemu-io"],
    ) {
        return;
    }
    let s = Serve::start("qemu", &["--size=32m"]);
    let uri = s.uri();
    let o = run(
        "qemu-io",
        &[
            "-f",
            "raw",
            "-c",
            "write -P 0xa5 1M 256k",
            "-c",
            "write -z 2M 64k",
            "-c",
            "flush",
            &uri,
        ],
    );
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let o = run(
        "qemu-io",
        &[
            "-f",
            "raw",
            "-c",
            "read -P 0xa5 1M 256k",
            "-c",
            "read -P 0 2M 64k",
            &uri,
        ],
    );
    let out = text(&o.stdout);
    assert!(
        o.status.success() && !out.contains("Pattern verification failed"),
        "{out}{}",
        text(&o.stderr)
    );
    let img = s.dir.join("img.raw");
    let o = run(
        "qemu-img",
        &[
            "convert",
            "-f",
            "raw",
            "-O",
            "raw",
            &uri,
            &img.display().to_string(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let data = std::fs::read(&img).unwrap();
    assert_eq!(data.len(), 32 << 20);
    assert!(data[1 << 20..(1 << 20) + (256 << 10)]
        .iter()
        .all(|&b| b == 0xa5));
    let back = s.dir.join("back.raw");
    random_file(&back, 32 << 20, 5);
    let o = run(
        "qemu-img",
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            &back.display().to_string(),
            &uri,
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(
        "qemu-img",
        &[
            "compare",
            "-f",
            "raw",
            "-F",
            "raw",
            &back.display().to_string(),
            &uri,
        ],
    );
    assert!(
        o.status.success(),
        "qemu-img compare: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    s.stop();
}

/// A server killed with SIGKILL three times during a copy and started again on the same
/// file and socket: QEMU's NBD client (`reconnect-delay`) reconnects each time, resends what
/// was not answered, and the copy ends with every byte on the file.
#[test]
fn qemu_reconnects_to_a_restarted_server_and_nothing_acknowledged_is_lost() {
    if !need_tools(
        "qemu_reconnects_to_a_restarted_server_and_nothing_acknowledged_is_lost",
        &["qemu-img"],
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("mqblk-serve-{}-reconnect", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("nbd.sock");
    let file = dir.join("disk.img");
    let src = dir.join("src.raw");
    random_file(&src, 48 << 20, 11);
    let start = |replace: bool| -> Child {
        let mut args = vec![
            "serve".to_string(),
            format!("--listen=unix:{}", sock.display()),
            "--driver=uring".into(),
            format!("--filename={}", file.display()),
            "--size=48m".into(),
        ];
        if replace {
            args.push("--replace-stale-socket".into());
        }
        let child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
            .args(&args)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        listening(&sock);
        child
    };
    let mut server = start(false);
    // Rate-limited so that the copy lasts about 6 s and the kills fall inside it.
    let target = format!(
        "driver=raw,file.driver=nbd,file.server.type=unix,file.server.path={},file.export=mqblk,file.reconnect-delay=30",
        sock.display()
    );
    let mut copy = Command::new("qemu-img")
        .args([
            "convert",
            "-n",
            "-r",
            "8M",
            "-f",
            "raw",
            "--target-image-opts",
            &src.display().to_string(),
            &target,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut kills = 0;
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1200));
        if copy.try_wait().unwrap().is_some() {
            break;
        }
        server.kill().unwrap();
        server.wait().unwrap();
        kills += 1;
        std::thread::sleep(Duration::from_millis(300));
        server = start(true);
    }
    let out = copy.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "qemu-img convert: {}",
        text(&out.stderr)
    );
    assert_eq!(
        kills, 3,
        "the copy ended before the third kill: make it slower"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    assert!(server.wait().unwrap().success());
    assert!(
        std::fs::read(&file).unwrap() == std::fs::read(&src).unwrap(),
        "the file differs from what was copied to it"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// TLS with the real clients: libnbd (nbdinfo, nbdcopy) and QEMU (qemu-io, qemu-img) with
/// certificates from `mqblk tls-certs`, client certificates verified; clients in the clear
/// and without a client certificate refused.
#[test]
fn tls_with_nbdinfo_nbdcopy_and_qemu() {
    if !need_tools(
        "tls_with_nbdinfo_nbdcopy_and_qemu",
        &["nbdinfo", "nbdcopy", "qemu-io", "qemu-img"],
    ) {
        return;
    }
    let creds = std::env::temp_dir().join(format!("mqblk-tls-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&creds);
    let o = run(
        env!("CARGO_BIN_EXE_mqblk"),
        &["tls-certs", &creds.display().to_string()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Run again: nothing is overwritten, one line says so.
    let again = run(
        env!("CARGO_BIN_EXE_mqblk"),
        &["tls-certs", &creds.display().to_string()],
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("exists; not overwritten"));
    let dir = creds.display().to_string();
    let s = Serve::start(
        "tls",
        &[
            "--size=32m",
            "--tls=require",
            "--tls-verify-peer",
            &format!("--tls-certificates={dir}"),
        ],
    );
    let sock = s.sock.display().to_string();
    let tls_uri = format!("nbds+unix:///mqblk?socket={sock}&tls-certificates={dir}");
    let o = run("nbdinfo", &["--size", &tls_uri]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), (32u64 << 20).to_string());
    // In the clear: refused (TLS_REQD), and so is a client whose directory has only the CA.
    let o = run("nbdinfo", &["--size", &s.uri()]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("TLS"), "{}", text(&o.stderr));
    let ca_only = s.dir.join("ca-only");
    std::fs::create_dir_all(&ca_only).unwrap();
    std::fs::copy(creds.join("ca-cert.pem"), ca_only.join("ca-cert.pem")).unwrap();
    let o = run(
        "nbdinfo",
        &[
            "--size",
            &format!(
                "nbds+unix:///mqblk?socket={sock}&tls-certificates={}",
                ca_only.display()
            ),
        ],
    );
    assert!(!o.status.success(), "no client certificate: refused");
    // Data through TLS both ways, four connections.
    let src = s.dir.join("src.raw");
    random_file(&src, 32 << 20, 11);
    let back = s.dir.join("back.raw");
    for (from, to) in [
        (src.display().to_string(), tls_uri.clone()),
        (tls_uri.clone(), back.display().to_string()),
    ] {
        let o = run("nbdcopy", &["--connections=4", &from, &to]);
        assert!(
            o.status.success(),
            "nbdcopy {from} {to}: {}",
            text(&o.stderr)
        );
    }
    assert!(std::fs::read(&src).unwrap() == std::fs::read(&back).unwrap());
    // QEMU's client, its x509 credentials from the same directory.
    let object = format!("tls-creds-x509,id=tls0,dir={dir},endpoint=client");
    let image = format!(
        "driver=nbd,server.type=unix,server.path={sock},export=mqblk,tls-creds=tls0,tls-hostname=localhost"
    );
    let o = run(
        "qemu-io",
        &[
            "--object",
            &object,
            "--image-opts",
            &image,
            "-c",
            "write -P 0x3c 4M 128k",
            "-c",
            "read -P 0x3c 4M 128k",
        ],
    );
    let out = text(&o.stdout);
    assert!(
        o.status.success() && !out.contains("Pattern verification failed"),
        "{out}{}",
        text(&o.stderr)
    );
    let img = s.dir.join("qemu.raw");
    let o = run(
        "qemu-img",
        &[
            "convert",
            "-O",
            "raw",
            "--object",
            &object,
            "--image-opts",
            &image,
            &img.display().to_string(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let data = std::fs::read(&img).unwrap();
    let mut want = std::fs::read(&src).unwrap();
    want[4 << 20..(4 << 20) + (128 << 10)].fill(0x3c);
    assert!(
        data == want,
        "qemu-img read back what nbdcopy and qemu-io wrote"
    );
    let (err, _) = s.stop();
    assert!(err.contains("nbds+unix://"), "{err}");
    let _ = std::fs::remove_dir_all(&creds);
}

/// Bad TLS settings stop the server before it binds anything, with one line.
#[test]
fn bad_tls_settings_are_one_line_errors() {
    let dir = std::env::temp_dir().join(format!("mqblk-tls-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("server-cert.pem"), "not a certificate\n").unwrap();
    let sock = dir.join("s.sock");
    let listen = format!("--listen=unix:{}", sock.display());
    let certs = format!("--tls-certificates={}", dir.display());
    for (args, says) in [
        (vec!["--tls=require"], "needs --tls-certificates"),
        (vec!["--tls=maybe"], "expected off, on or require"),
        (vec![certs.as_str()], "server-cert.pem"),
    ] {
        let mut a = vec!["serve", listen.as_str()];
        a.extend(args.iter().copied());
        let o = run(env!("CARGO_BIN_EXE_mqblk"), &a);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!sock.exists(), "nothing bound");
    }
    // The same keys under a config file's [server].
    let cfg = dir.join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nlisten = [\"unix:{}\"]\ntls = \"require\"\ntls-verify-peer = true\n\n[export.a]\nsize = \"16m\"\n",
            sock.display()
        ),
    )
    .unwrap();
    let o = run(
        env!("CARGO_BIN_EXE_mqblk"),
        &["serve", &format!("--config={}", cfg.display())],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("needs --tls-certificates"),
        "{}",
        text(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fio_nbd_engine_verifies_with_one_and_four_jobs() {
    if !fio_nbd("fio_nbd_engine_verifies_with_one_and_four_jobs") {
        return;
    }
    let s = Serve::start("fio", &["--size=128m", "--hw-queues=2"]);
    for nj in ["1", "4"] {
        // fio leaves verify state files in its working directory.
        let o = Command::new("fio")
            .current_dir(&s.dir)
            .args([
                "--name=v",
                "--ioengine=nbd",
                &format!("--uri={}", s.uri()),
                "--rw=randwrite",
                "--bs=4k",
                "--iodepth=32",
                "--size=16m",
                "--offset_increment=16m",
                &format!("--numjobs={nj}"),
                "--verify=crc32c",
                "--group_reporting",
                "--output-format=json",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "numjobs={nj}: {}", text(&o.stderr));
        // fio may print notes before its JSON.
        let out = text(&o.stdout);
        let json = &out[out.find('{').unwrap_or(0)..];
        let v: serde_json::Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"));
        let j = &v["jobs"][0];
        assert_eq!(j["error"], 0, "numjobs={nj}: {j}");
        assert!(j["write"]["io_bytes"].as_u64().unwrap() > 0);
    }
    s.stop();
}

#[test]
fn read_only_export_and_bad_flags() {
    let o = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(["serve", "--listen=bogus"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("expected tcp:HOST:PORT or unix:PATH"));
    let o = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(["serve", "--driver=uring"])
        .output()
        .unwrap();
    assert!(text(&o.stderr).contains("needs --filename"));
    if !need_tools("read_only_export_and_bad_flags", &["qemu-io"]) {
        return;
    }
    let s = Serve::start("ro", &["--read-only", "--size=8m"]);
    let o = run(
        "qemu-io",
        &["-f", "raw", "-r", "-c", "read -P 0 0 64k", &s.uri()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run("qemu-io", &["-f", "raw", "-c", "write -P 1 0 4k", &s.uri()]);
    let all = text(&o.stdout) + &text(&o.stderr);
    assert!(
        !o.status.success()
            || all.contains("failed")
            || all.contains("read-only")
            || all.contains("Read-only"),
        "a write to a read-only export must fail: {all}"
    );
    s.stop();
}

#[test]
fn a_config_file_declares_several_exports() {
    let dir = std::env::temp_dir().join(format!("mqblk-serve-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("nbd.sock");
    let cfg = dir.join("serve.toml");
    let admin = dir.join("admin.sock");
    let _ = std::fs::remove_file(&admin);
    std::fs::write(
        &cfg,
        format!(
            "# two exports\n[server]\nlisten = [\"unix:{}\"]\nadmin = \"{}\"\n\n[export.fast]\nsize = \"16m\"\nhw-queues = 2\n\n[export.slow]\ndescription = \"the other one\"\nsize = \"8m\"\nioscheduler = \"mq-deadline\"\nsched = {{ fifo_batch = 8 }}\nread-only = true\n",
            sock.display(),
            admin.display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(["serve", &format!("--config={}", cfg.display())])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The file's control socket shows each export's scheduler and its tunables.
    while !admin.exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no admin socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = ctl(&admin, &["show", "slow/queue/scheduler"]);
    assert!(text(&o.stdout).contains("[mq-deadline]"), "{o:?}");
    let o = ctl(&admin, &["show", "slow/queue/iosched/fifo_batch"]);
    assert_eq!(text(&o.stdout).trim(), "8", "{o:?}");
    if mqblk_testkit::have("nbdinfo") {
        let l = run(
            "nbdinfo",
            &["--list", &format!("nbd+unix:///?socket={}", sock.display())],
        );
        let out = text(&l.stdout);
        assert!(
            out.contains("export=\"fast\"") && out.contains("export=\"slow\""),
            "{out}"
        );
        let s = run(
            "nbdinfo",
            &[&format!("nbd+unix:///slow?socket={}", sock.display())],
        );
        let out = text(&s.stdout);
        assert!(
            out.contains("export-size: 8388608") && out.contains("is_read_only: true"),
            "{out}"
        );
    } else {
        missing(
            "the export listing",
            "nbdinfo missing (apt-get install libnbd-bin)",
        );
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("export 'fast'") && err.contains("export 'slow'"),
        "{err}"
    );
    // Bad config files: one line naming the file and what is wrong.
    let bad = |body: &str, want: &str| {
        std::fs::write(&cfg, body).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_mqblk"))
            .args(["serve", &format!("--config={}", cfg.display())])
            .output()
            .unwrap();
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains(want) && e.trim_end().lines().count() == 1,
            "{body:?}: {e}"
        );
    };
    bad(
        "[export.a]\nsize = \"1m\"\nbogus = 3\n",
        "serve.toml:3: unknown field `bogus`, expected one of `description`",
    );
    bad(
        "[export.a]\nsize = \"1m\"\nsize = 2\n",
        "duplicate key `size` in table `export.a`",
    );
    bad(
        "[export.a]\nhw-queues = \"two\"\n",
        "serve.toml:2: invalid type: string \"two\", expected u16",
    );
    bad(
        "[export.a]\nsize = \"1q\"\n",
        "serve.toml:2: '1q' is not a size",
    );
    bad(
        "[export.a]\nfilename = \"/tmp/x\"\n",
        "serve.toml: export 'a': filename applies only to the uring driver",
    );
    // The INI syntax of earlier versions is refused with a line saying what to write.
    bad(
        "[export a]\nsize = 1m\n",
        "[export NAME] is the INI syntax mqblk no longer reads; write [export.NAME] tables in TOML",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_simulated_disk_serves_in_real_time() {
    if !need_tools(
        "a_simulated_disk_serves_in_real_time",
        &["qemu-io", "nbdinfo"],
    ) {
        return;
    }
    let s = Serve::start(
        "sim",
        &[
            "--driver=sim",
            "--device=hdd,ncq=8",
            "--ioscheduler=mq-deadline",
        ],
    );
    let o = run("nbdinfo", &[&s.uri()]);
    let out = text(&o.stdout);
    assert!(
        out.contains("is_rotational: true") && out.contains("export-size: 1000000000000"),
        "{out}"
    );
    let o = run(
        "qemu-io",
        &[
            "-f",
            "raw",
            "-c",
            "read 0 64k",
            "-c",
            "write 1M 64k",
            "-c",
            "flush",
            &s.uri(),
        ],
    );
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let (_, stats) = s.stop();
    assert_eq!(stats["errors"], 0, "{stats}");
}

fn ctl(admin: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .arg("ctl")
        .arg(format!("--admin={}", admin.display()))
        .args(args)
        .output()
        .unwrap()
}

/// `elevator_switch` from a running server: while fio writes and verifies through NBD, the
/// admin socket cycles the export through every scheduler, changes `nr_requests` and a
/// tunable; fio's verify passes and `show` reports each change. Bad requests get one line
/// and the server keeps serving.
#[test]
fn the_admin_socket_switches_schedulers_while_fio_verifies() {
    if !fio_nbd("the_admin_socket_switches_schedulers_while_fio_verifies") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("mqblk-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let admin = dir.join("admin.sock");
    let s = Serve::start(
        "admin",
        &[
            "--size=128m",
            "--hw-queues=2",
            "--ioscheduler=mq-deadline",
            &format!("--admin={}", admin.display()),
        ],
    );
    let t0 = Instant::now();
    while !admin.exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no admin socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let show = |p: &str| {
        let o = ctl(&admin, &["show", p]);
        assert!(o.status.success(), "show {p}: {}", text(&o.stderr));
        text(&o.stdout).trim().to_string()
    };
    assert_eq!(
        show("mqblk/queue/scheduler"),
        "none [mq-deadline] kyber bfq"
    );
    let fio = Command::new("fio")
        .current_dir(&s.dir)
        .args([
            "--name=v",
            "--ioengine=nbd",
            &format!("--uri={}", s.uri()),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=32",
            "--size=32m",
            "--numjobs=2",
            "--offset_increment=32m",
            "--verify=crc32c",
            "--loops=8",
            "--output-format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fio = fio;
    std::thread::sleep(Duration::from_millis(200));
    for (i, sched) in ["kyber", "bfq", "none", "mq-deadline", "bfq"]
        .iter()
        .enumerate()
    {
        let o = ctl(&admin, &["store", "mqblk/queue/scheduler", sched]);
        assert!(o.status.success(), "{sched}: {}", text(&o.stderr));
        let shown = show("mqblk/queue/scheduler");
        assert!(shown.contains(&format!("[{sched}]")), "{shown}");
        if *sched != "none" {
            let nr = (16 + 16 * i).to_string();
            let o = ctl(&admin, &["store", "mqblk/queue/nr_requests", &nr]);
            assert!(o.status.success(), "{}", text(&o.stderr));
            assert_eq!(show("mqblk/queue/nr_requests"), nr);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        fio.try_wait().unwrap().is_none(),
        "fio ended before the switches did: they were not made under load"
    );
    let o = ctl(&admin, &["store", "mqblk/queue/iosched/slice_idle_us", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(show("mqblk/queue/iosched/slice_idle_us"), "0");
    // Refusals: one line each, exit 1, and the export goes on.
    for (args, says) in [
        (
            vec!["store", "mqblk/queue/scheduler", "cfq"],
            "no scheduler 'cfq'",
        ),
        (
            vec!["store", "mqblk/queue/nr_requests", "100000"],
            "out of range 4..=",
        ),
        (vec!["show", "other/queue/scheduler"], "no export 'other'"),
        (
            vec!["store", "mqblk/queue/iosched/nope", "1"],
            "unknown tunable 'nope'",
        ),
    ] {
        let o = ctl(&admin, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = text(&o.stderr);
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    let out = fio.wait_with_output().unwrap();
    assert!(out.status.success(), "fio: {}", text(&out.stderr));
    let o = text(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&o[o.find('{').unwrap_or(0)..]).unwrap();
    for j in v["jobs"].as_array().unwrap() {
        assert_eq!(j["error"], 0, "{j}");
    }
    let (_, stats) = s.stop();
    assert_eq!(stats["errors"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--listen=unix:PATH` never takes a path that is not its own: a regular file there is
/// refused and left as it was, a live server's socket is refused, and a stale socket (a
/// server killed without cleaning up) only goes with `--replace-stale-socket`. At exit the
/// server removes its own socket and nothing else.
#[test]
fn a_unix_listen_path_that_is_not_ours_is_refused() {
    let serve = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mqblk"))
            .arg("serve")
            .args(args)
            .output()
            .unwrap()
    };
    let s = Serve::start("sockpath", &["--size=1m"]);
    let data = s.dir.join("data");
    std::fs::write(&data, b"someone's data").unwrap();
    let o = serve(&[&format!("--listen=unix:{}", data.display())]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("is not a socket"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read(&data).unwrap(), b"someone's data");
    let live = format!("--listen=unix:{}", s.sock.display());
    let o = serve(&[&live, "--replace-stale-socket"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("is listening"),
        "{}",
        text(&o.stderr)
    );
    let (sock, dir) = (s.sock.clone(), s.dir.clone());
    // Killed without a chance to clean up: the socket file stays, stale.
    let mut s = s;
    let mut child = s.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(sock.exists());
    let o = serve(&[&live]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("stale socket"),
        "{}",
        text(&o.stderr)
    );
    let mut again = Command::new(env!("CARGO_BIN_EXE_mqblk"))
        .args(["serve", &live, "--replace-stale-socket", "--size=1m"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    listening(&sock);
    let _ = Command::new("kill")
        .args(["-TERM", &again.id().to_string()])
        .status();
    assert!(again.wait().unwrap().success());
    assert!(!sock.exists(), "the server left its own socket behind");
    assert!(data.exists());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nbdinfo --map` sees what is stored: a discarded range and one never written are holes
/// reading as zeroes, on a memory export and on a sparse file through io_uring
/// (`SEEK_HOLE`).
#[test]
fn nbdinfo_map_shows_discarded_ranges_as_holes() {
    if !need_tools(
        "nbdinfo_map_shows_discarded_ranges_as_holes",
        &["nbdinfo", "qemu-io"],
    ) {
        return;
    }
    for (name, extra) in [("map-mem", vec![]), ("map-file", vec!["--driver=uring"])] {
        let dir = std::env::temp_dir().join(format!("mqblk-map-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = format!("--filename={}", dir.join("disk.img").display());
        let mut args = vec!["--size=8m"];
        args.extend(extra.iter().copied());
        if !extra.is_empty() {
            args.push(&file);
        }
        let s = Serve::start(name, &args);
        let o = run(
            "qemu-io",
            &[
                "-f",
                "raw",
                "-c",
                "write -P 7 0 2M",
                "-c",
                "discard 1M 512k",
                &s.uri(),
            ],
        );
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let o = run("nbdinfo", &["--map", &s.uri()]);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        // Lines: offset, length, type number, description.
        let map: Vec<(u64, u64, u32)> = out
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some((
                    f.first()?.parse().ok()?,
                    f.get(1)?.parse().ok()?,
                    f.get(2)?.parse().ok()?,
                ))
            })
            .collect();
        let kind_at = |off: u64| {
            map.iter()
                .find(|&&(o, l, _)| o <= off && off < o + l)
                .map(|&(_, _, t)| t)
        };
        assert_eq!(kind_at(0), Some(0), "{name}: written data:\n{out}");
        assert_eq!(
            kind_at((1 << 20) + 4096),
            Some(3),
            "{name}: the discarded range:\n{out}"
        );
        assert_eq!(kind_at(3 << 20), Some(3), "{name}: never written:\n{out}");
        s.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Connects to a server's Unix socket, retrying while it is bound but not yet listening
/// (the file appears at `bind`, before `listen`).
fn connect_unix(sock: &std::path::Path) -> std::os::unix::net::UnixStream {
    let t0 = Instant::now();
    loop {
        match std::os::unix::net::UnixStream::connect(sock) {
            Ok(c) => return c,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{}: {e}",
                    sock.display()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{}: {e}", sock.display()),
        }
    }
}

/// A client that hangs up in its handshake (a probe, a client giving up) has only left: no
/// line. A protocol violation gets one, naming it.
#[test]
fn handshake_hang_ups_are_quiet_and_violations_are_one_line() {
    use std::io::{Read, Write};
    let s = Serve::start("quiet", &["--size=16m"]);
    let mut greeting = [0u8; 18];
    for _ in 0..3 {
        let mut c = connect_unix(&s.sock);
        c.read_exact(&mut greeting).unwrap();
    }
    let mut c = connect_unix(&s.sock);
    c.read_exact(&mut greeting).unwrap();
    c.write_all(&3u32.to_be_bytes()).unwrap();
    c.write_all(b"not an option header").unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    let (err, _) = s.stop();
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("connection:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("bad option magic"), "{err}");
}
