//! TLS for NBD (`NBD_OPT_STARTTLS`), on rustls.
//!
//! The protocol upgrades a connection in the middle of its option haggling: the server ACKs
//! STARTTLS in the clear, the TLS handshake follows on the same socket, and everything after
//! it (the rest of the options, then the session) runs inside TLS. A session here is a
//! reader thread and an I/O thread sharing one socket, which a rustls connection (one state
//! for both directions) cannot be split across. So an upgraded connection gets a proxy: one
//! thread owns the client's socket and the rustls state, and hands the session the other end
//! of a socket pair carrying plaintext. The session code is the same with and without TLS.
//! (nbdkit and qemu-nbd instead wrap the socket in their GnuTLS channel; the extra copy
//! through the pair costs less than the encryption itself.)
//!
//! Credentials follow nbdkit's and QEMU's `tls-creds-x509` layout, one directory:
//! `server-cert.pem` and `server-key.pem` (served), `ca-cert.pem` (needed to verify client
//! certificates, `--tls-verify-peer`). The same directory, with `client-cert.pem` and
//! `client-key.pem`, is what libnbd (`tls-certificates=DIR`) and QEMU
//! (`-object tls-creds-x509,dir=DIR,endpoint=client`) read on the client side;
//! [`make_certificates`] writes such a directory for tests and private setups.
//!
//! Pre-shared keys (nbdkit's `--tls-psk`) are not offered: rustls has no external-PSK
//! support (rustls/rustls#174).

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::server::Stream;

/// When the server offers TLS (nbdkit's `--tls=off|on|require`; the NBD spec's "no TLS",
/// "selective TLS" is not used: `On` offers it for every export, and `Require` is the spec's
/// forced TLS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// STARTTLS is refused (`NBD_REP_ERR_POLICY`).
    Off,
    /// A client may upgrade with STARTTLS, or stay in the clear.
    On,
    /// Every option but STARTTLS and ABORT is refused with `NBD_REP_ERR_TLS_REQD` until the
    /// client upgrades; `NBD_OPT_EXPORT_NAME` (which cannot carry an error) ends the
    /// connection.
    Require,
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" | "no" | "0" => Ok(TlsMode::Off),
            "on" | "yes" | "1" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            _ => Err(format!("'{s}': expected off, on or require")),
        }
    }
}

/// What a server offers: the mode and, unless it is `Off`, the rustls configuration.
#[derive(Clone)]
pub struct Tls {
    pub mode: TlsMode,
    pub config: Arc<ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).finish()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server's configuration from a credentials directory (see the module's header).
/// `verify_peer`: clients must present a certificate signed by `ca-cert.pem`.
pub fn server_config(dir: &Path, verify_peer: bool) -> Result<Arc<ServerConfig>, String> {
    let at = |name: &str| dir.join(name);
    let shown = |name: &str| at(name).display().to_string();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(at("server-cert.pem"))
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", shown("server-cert.pem")))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no certificate in it",
            shown("server-cert.pem")
        ));
    }
    let key = PrivateKeyDer::from_pem_file(at("server-key.pem"))
        .map_err(|e| format!("{}: {e}", shown("server-key.pem")))?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if verify_peer {
        let mut roots = RootCertStore::empty();
        let cas = CertificateDer::pem_file_iter(at("ca-cert.pem"))
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| {
                format!(
                    "{} (needed by --tls-verify-peer): {e}",
                    shown("ca-cert.pem")
                )
            })?;
        for ca in cas {
            roots
                .add(ca)
                .map_err(|e| format!("{}: {e}", shown("ca-cert.pem")))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| format!("{}: {e}", shown("ca-cert.pem")))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{}: {e}", shown("server-key.pem")))?;
    Ok(Arc::new(config))
}

/// Writes a private CA and certificates signed by it into `dir` (created if missing):
/// `ca-cert.pem`, `ca-key.pem`, `server-cert.pem`/`server-key.pem` for `hostnames` (names
/// or IP addresses), `client-cert.pem`/`client-key.pem`. For tests and private setups; a
/// file that already exists is left alone and reported.
pub fn make_certificates(dir: &Path, hostnames: &[String]) -> Result<(), String> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    let shown = dir.display();
    std::fs::create_dir_all(dir).map_err(|e| format!("{shown}: {e}"))?;
    let names = [
        "ca-cert.pem",
        "ca-key.pem",
        "server-cert.pem",
        "server-key.pem",
        "client-cert.pem",
        "client-key.pem",
    ];
    if let Some(n) = names.iter().find(|n| dir.join(n).exists()) {
        return Err(format!(
            "{}: exists; not overwritten (choose an empty directory)",
            dir.join(n).display()
        ));
    }
    let e = |e: rcgen::Error| format!("making certificates: {e}");
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "mqblk private CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(e)?).map_err(e)?;
    let leaf = |sans: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let mut p = CertificateParams::new(sans).map_err(e)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate().map_err(e)?;
        let cert = p.signed_by(&key, &ca).map_err(e)?;
        Ok::<_, String>((cert.pem(), key.serialize_pem()))
    };
    let hosts = if hostnames.is_empty() {
        vec!["localhost".to_string()]
    } else {
        hostnames.to_vec()
    };
    let server = leaf(
        hosts.clone(),
        &hosts[0],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let client = leaf(
        Vec::new(),
        "mqblk client",
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    let files = [
        ("ca-cert.pem", ca.pem()),
        ("ca-key.pem", ca.key().serialize_pem()),
        ("server-cert.pem", server.0),
        ("server-key.pem", server.1),
        ("client-cert.pem", client.0),
        ("client-key.pem", client.1),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        let mode = if name.ends_with("-key.pem") {
            0o600
        } else {
            0o644
        };
        write_new(&path, text.as_bytes(), mode).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn write_new(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    f.write_all(data)
}

/// Plaintext the proxy holds for the session before it stops reading TLS records.
const HOLD: usize = 256 << 10;
/// How long the proxy waits for a client that neither reads nor writes while it has bytes
/// to hand over, before it gives up on it.
const STUCK: Duration = Duration::from_secs(30);

/// Takes over `net`, the client's socket right after the server ACKed STARTTLS, and returns
/// the session's plaintext end and the proxy thread. The TLS handshake runs in the proxy;
/// if it fails, the plaintext end reads EOF. The proxy ends when both sides are done: the
/// client closed (its end of the pair reads EOF) and the session closed its end (the client
/// gets a `close_notify`), or a side failed.
pub fn start(config: Arc<ServerConfig>, net: Stream) -> io::Result<(UnixStream, JoinHandle<()>)> {
    let (session, ours) = UnixStream::pair()?;
    let conn = ServerConnection::new(config).map_err(io::Error::other)?;
    let h = std::thread::Builder::new()
        .name("nbd-tls".into())
        .spawn(move || {
            if let Err(e) = proxy(conn, net, ours) {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::UnexpectedEof
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::BrokenPipe
                ) {
                    eprintln!("mqblk serve: TLS: {e}");
                }
            }
        })?;
    Ok((session, h))
}

/// Moves bytes between the client's TLS stream and the session's plaintext socket until
/// both are done. Both sockets are non-blocking; `poll` waits for whichever can move.
fn proxy(mut conn: ServerConnection, mut net: Stream, mut local: UnixStream) -> io::Result<()> {
    net.set_nonblocking(true)?;
    local.set_nonblocking(true)?;
    // Plaintext from the client not yet taken by the session, and from the session not yet
    // taken by rustls.
    let mut to_session: Vec<u8> = Vec::new();
    let mut from_session: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    // The client sent its last byte (EOF or close_notify); the session closed its end.
    let (mut net_done, mut local_done) = (false, false);
    let mut told_session = false;
    let mut close_sent = false;
    loop {
        // Towards the client: the session's plaintext into rustls (which bounds what it
        // buffers), records out to the socket, again until one of them stalls. Stopping
        // after one round would leave plaintext here with nothing polled to move it.
        loop {
            let before = from_session.len();
            if !from_session.is_empty() {
                let n = conn.writer().write(&from_session)?;
                from_session.drain(..n);
            }
            if local_done && from_session.is_empty() && !close_sent {
                conn.send_close_notify();
                close_sent = true;
            }
            let mut wrote = false;
            let mut blocked = false;
            while conn.wants_write() {
                match conn.write_tls(&mut net) {
                    Ok(_) => wrote = true,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        blocked = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if from_session.is_empty() || blocked || (!wrote && from_session.len() == before) {
                break;
            }
        }
        // Towards the session: what rustls decrypted, through `to_session` (at most
        // `HOLD`), into the socket pair, until rustls has no more or the session's socket
        // is full.
        loop {
            while to_session.len() < HOLD && !net_done {
                match conn.reader().read(&mut buf) {
                    Ok(0) => net_done = true,
                    Ok(n) => to_session.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // EOF without close_notify: the client is gone; what it sent stays valid.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => net_done = true,
                    Err(e) => return Err(e),
                }
            }
            if to_session.is_empty() {
                break;
            }
            match local.write(&to_session) {
                Ok(n) => {
                    to_session.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The session is gone: nothing more is wanted from the client.
                Err(_) => {
                    to_session.clear();
                    net_done = true;
                    local_done = true;
                }
            }
        }
        if net_done && to_session.is_empty() && !told_session {
            let _ = local.shutdown(std::net::Shutdown::Write);
            told_session = true;
        }
        if local_done && from_session.is_empty() && !close_sent {
            conn.send_close_notify();
            close_sent = true;
            while conn.wants_write() {
                match conn.write_tls(&mut net) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
        if close_sent && !conn.wants_write() {
            net.shutdown();
            return Ok(());
        }
        // Wait for whatever can move next.
        let mut net_ev = PollFlags::empty();
        if !net_done && to_session.len() < HOLD && conn.wants_read() {
            net_ev |= PollFlags::POLLIN;
        }
        if conn.wants_write() {
            net_ev |= PollFlags::POLLOUT;
        }
        let mut local_ev = PollFlags::empty();
        if !local_done && from_session.is_empty() {
            local_ev |= PollFlags::POLLIN;
        }
        if !to_session.is_empty() {
            local_ev |= PollFlags::POLLOUT;
        }
        let pending = conn.wants_write() || !to_session.is_empty();
        // A side with nothing to wait for is left out: poll reports a hang-up whatever one
        // asks for, and would spin.
        let (net_ready, local_ready) = {
            let mut fds = Vec::with_capacity(2);
            if !net_ev.is_empty() {
                fds.push(PollFd::new(net.as_fd(), net_ev));
            }
            if !local_ev.is_empty() {
                fds.push(PollFd::new(local.as_fd(), local_ev));
            }
            if fds.is_empty() {
                // Nothing can move any more (both sides done, or stuck on each other).
                net.shutdown();
                return Ok(());
            }
            let timeout = if pending {
                PollTimeout::try_from(STUCK).unwrap_or(PollTimeout::MAX)
            } else {
                PollTimeout::NONE
            };
            match poll(&mut fds, timeout) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client took nothing for 30 s",
                    ))
                }
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = |i: usize| fds[i].revents().unwrap_or(PollFlags::empty());
            match (net_ev.is_empty(), local_ev.is_empty()) {
                (false, false) => (ready(0), ready(1)),
                (false, true) => (ready(0), PollFlags::empty()),
                _ => (PollFlags::empty(), ready(0)),
            }
        };
        let gone = PollFlags::POLLHUP | PollFlags::POLLERR;
        if net_ready.intersects(PollFlags::POLLIN | gone) && net_ev.contains(PollFlags::POLLIN) {
            match conn.read_tls(&mut net) {
                Ok(0) => net_done = true,
                Ok(_) => {
                    if let Err(e) = conn.process_new_packets() {
                        // Send the alert rustls queued, then give up on the client.
                        let _ = conn.write_tls(&mut net);
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        } else if net_ready.intersects(gone) {
            // Hung up or failed while only writing was wanted: nothing reaches the client.
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the client hung up",
            ));
        }
        if local_ready.intersects(PollFlags::POLLIN | gone) && local_ev.contains(PollFlags::POLLIN)
        {
            match local.read(&mut buf) {
                Ok(0) => local_done = true,
                Ok(n) => from_session.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => local_done = true,
            }
        }
    }
}
