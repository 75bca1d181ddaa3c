//! TLS (`NBD_OPT_STARTTLS`) with a rustls client: forced TLS refuses everything in the clear,
//! the session inside TLS moves data, state agreed before the upgrade is forgotten, client
//! certificates are checked when asked, and clients that break TLS only hurt themselves.

mod common;

use common::{go_payload, option, read_n, reply, rig_full, Rig};
use mqblk_nbd::proto::{self, cmd, info, opt, rep, Request};
use mqblk_nbd::tls::{make_certificates, server_config, Tls, TlsMode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

type TlsStream = StreamOwned<ClientConnection, UnixStream>;

/// A fresh credentials directory (CA, server and client certificates).
fn creds(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mqblk-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    make_certificates(&dir, &["localhost".into()]).unwrap();
    dir
}

fn rig(name: &str, mode: TlsMode, verify_peer: bool) -> (Rig, PathBuf) {
    let dir = creds(name);
    let tls = Tls {
        mode,
        config: server_config(&dir, verify_peer).unwrap(),
    };
    let r = rig_full(
        name,
        false,
        8,
        8,
        Some(mqblk_nbd::server::IDLE_TIMEOUT),
        Some(tls),
    );
    (r, dir)
}

/// A client trusting `dir`'s CA, presenting `dir`'s client certificate if `cert`.
fn client_config(dir: &Path, cert: bool) -> Arc<ClientConfig> {
    client_config_from(dir, cert.then_some(dir))
}

/// A client trusting `ca_dir`'s CA, presenting `cert_dir`'s client certificate if any.
fn client_config_from(ca_dir: &Path, cert_dir: Option<&Path>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca_dir.join("ca-cert.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match cert_dir {
        Some(d) => {
            let chain: Vec<_> = CertificateDer::pem_file_iter(d.join("client-cert.pem"))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(d.join("client-key.pem")).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
        None => b.with_no_client_auth(),
    })
}

/// Connects and sends the client flags; the greeting is checked.
fn greet(sock: &Path) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let g = read_n(&mut s, 18);
    assert_eq!(&g[..8], &proto::NBDMAGIC.to_be_bytes());
    s.write_all(&(proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    s
}

/// STARTTLS (ACKed in the clear), then the TLS stream; the handshake runs on first use.
fn upgrade(mut s: UnixStream, config: Arc<ClientConfig>) -> TlsStream {
    option(&mut s, opt::STARTTLS, &[]);
    assert_eq!(reply(&mut s).0, rep::ACK);
    let conn = ClientConnection::new(config, ServerName::try_from("localhost").unwrap()).unwrap();
    StreamOwned::new(conn, s)
}

/// GO on "disk": the export's size from the replies.
fn go<S: Read + Write>(s: &mut S) -> u64 {
    option(s, opt::GO, &go_payload("disk", &[info::BLOCK_SIZE]));
    let mut size = 0;
    loop {
        let (t, d) = reply(s);
        if t == rep::ACK {
            return size;
        }
        assert_eq!(t, rep::INFO, "GO refused: {}", String::from_utf8_lossy(&d));
        if u16::from_be_bytes([d[0], d[1]]) == info::EXPORT {
            size = u64::from_be_bytes(d[2..10].try_into().unwrap());
        }
    }
}

fn request<S: Write>(s: &mut S, kind: u16, cookie: u64, offset: u64, length: u64, data: &[u8]) {
    let r = Request {
        flags: 0,
        kind,
        cookie,
        offset,
        length,
    };
    s.write_all(&proto::encode_request(&r)).unwrap();
    s.write_all(data).unwrap();
}

/// One simple reply: (cookie, error).
fn simple_reply<S: Read>(s: &mut S) -> (u64, u32) {
    let h = read_n(s, 16);
    assert_eq!(
        u32::from_be_bytes(h[..4].try_into().unwrap()),
        proto::SIMPLE_REPLY_MAGIC,
        "a simple reply"
    );
    (
        u64::from_be_bytes(h[8..16].try_into().unwrap()),
        u32::from_be_bytes(h[4..8].try_into().unwrap()),
    )
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// Writes, reads back and compares, with many requests in flight at once, then DISC.
fn round_trip<S: Read + Write>(s: &mut S, seed: u8) {
    const N: u64 = 16;
    const LEN: usize = 64 << 10;
    for i in 0..N {
        request(
            s,
            cmd::WRITE,
            i,
            i * LEN as u64,
            LEN as u64,
            &pattern(seed + i as u8, LEN),
        );
    }
    let mut done = 0;
    while done < N {
        assert_eq!(simple_reply(s).1, 0);
        done += 1;
    }
    request(s, cmd::FLUSH, 100, 0, 0, &[]);
    assert_eq!(simple_reply(s), (100, 0));
    for i in 0..N {
        request(s, cmd::READ, 200 + i, i * LEN as u64, LEN as u64, &[]);
    }
    for _ in 0..N {
        let (cookie, e) = simple_reply(s);
        assert_eq!(e, 0);
        let i = cookie - 200;
        assert_eq!(read_n(s, LEN), pattern(seed + i as u8, LEN), "request {i}");
    }
    request(s, cmd::DISC, 300, 0, 0, &[]);
}

/// Waits until every connection is gone; then no tag may be held.
fn settled(r: &Rig) {
    let t0 = Instant::now();
    while r.server.active() > 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "connections linger");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(r.queue.nr_allocated(), 0, "no tag leaked");
}

#[test]
fn forced_tls_refuses_the_clear_and_serves_inside_tls() {
    let (r, dir) = rig("forced", TlsMode::Require, false);
    let mut s = greet(&r.sock);
    // Nothing but STARTTLS and ABORT in the clear.
    for o in [opt::LIST, opt::GO, opt::INFO, opt::STRUCTURED_REPLY] {
        let payload = if matches!(o, opt::GO | opt::INFO) {
            go_payload("disk", &[])
        } else {
            Vec::new()
        };
        option(&mut s, o, &payload);
        assert_eq!(reply(&mut s).0, rep::ERR_TLS_REQD, "option {o}");
    }
    option(&mut s, opt::STARTTLS, b"junk");
    assert_eq!(reply(&mut s).0, rep::ERR_INVALID, "STARTTLS takes no data");
    let mut t = upgrade(s, client_config(&dir, false));
    assert_eq!(
        t.conn.peer_certificates().map(|c| c.len()),
        None,
        "the handshake has not run yet"
    );
    // Inside TLS: a second STARTTLS is an error, everything else works.
    option(&mut t, opt::STARTTLS, &[]);
    assert_eq!(reply(&mut t).0, rep::ERR_INVALID);
    assert!(
        t.conn.peer_certificates().is_some(),
        "the server's certificate"
    );
    assert_eq!(go(&mut t), 64 << 20);
    round_trip(&mut t, 7);
    drop(t);
    // EXPORT_NAME cannot carry TLS_REQD: the connection ends.
    let mut s = greet(&r.sock);
    option(&mut s, opt::EXPORT_NAME, b"disk");
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0, "closed without a reply");
    settled(&r);
}

#[test]
fn what_was_agreed_in_the_clear_is_forgotten_after_starttls() {
    // Selective mode: TLS is offered, the clear works too.
    let (r, dir) = rig("forget", TlsMode::On, false);
    let mut plain = greet(&r.sock);
    assert_eq!(go(&mut plain), 64 << 20, "a session in the clear");
    round_trip(&mut plain, 1);
    // Structured replies agreed before STARTTLS do not survive it: after GO inside TLS the
    // read reply is a simple one (nbdkit's CVE-2021-3716 kept them).
    let mut s = greet(&r.sock);
    option(&mut s, opt::STRUCTURED_REPLY, &[]);
    assert_eq!(reply(&mut s).0, rep::ACK);
    let mut t = upgrade(s, client_config(&dir, false));
    go(&mut t);
    request(&mut t, cmd::READ, 9, 0, 4096, &[]);
    assert_eq!(simple_reply(&mut t), (9, 0));
    assert_eq!(read_n(&mut t, 4096), pattern(1, 4096));
    request(&mut t, cmd::DISC, 10, 0, 0, &[]);
    drop(t);
    settled(&r);
}

#[test]
fn client_certificates_are_checked_when_peers_are_verified() {
    let (r, dir) = rig("verify", TlsMode::Require, true);
    // With the client certificate signed by the CA: served.
    let mut t = upgrade(greet(&r.sock), client_config(&dir, true));
    go(&mut t);
    round_trip(&mut t, 3);
    drop(t);
    // Without one, or with one from another CA: the handshake fails, nothing is served.
    let other = creds("verify-other");
    let mixed = client_config_from(&dir, Some(&other));
    for config in [client_config(&dir, false), mixed] {
        let mut t = upgrade(greet(&r.sock), config);
        option(&mut t, opt::LIST, &[]);
        let mut h = [0u8; 20];
        assert!(
            t.read_exact(&mut h).is_err(),
            "refused in the TLS handshake"
        );
    }
    settled(&r);
    let _ = std::fs::remove_dir_all(other);
}

#[test]
fn clients_that_break_tls_only_hurt_themselves() {
    let (r, dir) = rig("broken", TlsMode::Require, false);
    // A good session stays up throughout.
    let mut good = upgrade(greet(&r.sock), client_config(&dir, false));
    go(&mut good);
    // STARTTLS, then: garbage instead of a ClientHello; plaintext NBD options; half a
    // ClientHello and gone; a client that never starts the handshake and hangs up.
    let cases: [&dyn Fn(&mut UnixStream); 4] = [
        &|s| s.write_all(&[0x5a; 600]).unwrap(),
        &|s| {
            let mut o = proto::IHAVEOPT.to_be_bytes().to_vec();
            o.extend_from_slice(&opt::LIST.to_be_bytes());
            o.extend_from_slice(&0u32.to_be_bytes());
            s.write_all(&o).unwrap();
        },
        &|s| {
            // The first bytes of a TLS 1.2/1.3 ClientHello record.
            s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc])
                .unwrap()
        },
        &|_| {},
    ];
    for (i, case) in cases.iter().enumerate() {
        let mut s = greet(&r.sock);
        option(&mut s, opt::STARTTLS, &[]);
        assert_eq!(reply(&mut s).0, rep::ACK);
        case(&mut s);
        // The server ends a broken handshake itself; the clean hang-up ends it too.
        if i < 2 {
            let mut b = [0u8; 64];
            let t0 = Instant::now();
            loop {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => assert!(t0.elapsed() < Duration::from_secs(20), "case {i}"),
                }
            }
        }
        drop(s);
    }
    // The good session still works, and ends cleanly.
    round_trip(&mut good, 9);
    drop(good);
    settled(&r);
}

#[test]
fn stopping_the_server_ends_tls_sessions_in_flight_and_idle() {
    let (r, dir) = rig("stop", TlsMode::Require, false);
    // One session idle inside TLS, one with reads in flight, one mid-handshake.
    let mut idle = upgrade(greet(&r.sock), client_config(&dir, false));
    go(&mut idle);
    let mut busy = upgrade(greet(&r.sock), client_config(&dir, false));
    go(&mut busy);
    for i in 0..32 {
        request(&mut busy, cmd::READ, i, i * 65536, 65536, &[]);
    }
    let mut half = greet(&r.sock);
    option(&mut half, opt::STARTTLS, &[]);
    assert_eq!(reply(&mut half).0, rep::ACK);
    // The client takes its replies while the server stops (one that does not is dropped
    // after 30 s, as in the clear).
    let replies = std::thread::spawn(move || {
        for _ in 0..32 {
            assert_eq!(simple_reply(&mut busy).1, 0);
            read_n(&mut busy, 65536);
        }
        busy
    });
    let t0 = Instant::now();
    let mut r = r;
    r.server
        .stop
        .store(true, std::sync::atomic::Ordering::Release);
    r.thread.take().unwrap().join().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "stopped in {:?}",
        t0.elapsed()
    );
    // The reads in flight were answered before the end.
    let busy = replies.join().expect("every read answered");
    assert_eq!(r.server.active(), 0);
    assert_eq!(r.queue.nr_allocated(), 0, "no tag leaked");
    drop((idle, half, busy));
}
