//! TLS for NBD (`NBD_OPT_STARTTLS`), on rustls.
//!
//! The protocol upgrades a connection in the middle of its option haggling: the server ACKs
//! STARTTLS in the clear, the TLS handshake follows on the same socket, and everything after
//! it (the rest of the options, then the session) runs inside TLS. A session is a reader
//! thread and whoever writes replies (the I/O thread, or the reader serving a request
//! itself), sharing one socket; a rustls connection is one state for both directions, so
//! [`TlsStream`] keeps it under a mutex that readers take only to feed what arrived and
//! take out plaintext (they wait for the socket without it) and writers take to encrypt and
//! send. The session code is the same with and without TLS.
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

use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use crate::server::Stream;

/// When the server offers TLS, as nbdkit's `--tls=off|on|require`: `Off` is the NBD spec's
/// no-TLS mode, `Require` its forced TLS; `On` offers TLS with every export reachable both
/// ways (the spec's selective TLS, where some exports need TLS, is not offered).
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

/// A TLS session on a client's socket, shared by every thread that uses the connection:
/// the handshake, then the session's reader and whoever writes replies. One rustls state
/// serves both directions, so it sits under a mutex; a reader waits for the socket without
/// it, and takes it only to feed what arrived and take out plaintext. Writers encrypt and
/// send under it, which keeps records in order.
struct Shared {
    sock: Stream,
    state: Mutex<State>,
}

struct State {
    conn: ServerConnection,
    /// Bytes read from the socket that rustls has not taken yet (it takes no more while its
    /// plaintext buffer is full).
    raw: Vec<u8>,
}

/// One thread's handle on a TLS connection ([`Stream::Tls`]): the shared session and a
/// buffer of its own for reading the socket (allocated on its first read: most clones only
/// write).
pub struct TlsStream {
    shared: Arc<Shared>,
    scratch: Vec<u8>,
}

/// Takes over `sock`, the client's socket right after the server ACKed STARTTLS. The TLS
/// handshake runs on the first read (the client speaks first); a failed one is an
/// `InvalidData` error, after the alert has been sent.
pub fn wrap(config: Arc<ServerConfig>, sock: Stream) -> io::Result<Stream> {
    let conn = ServerConnection::new(config).map_err(io::Error::other)?;
    Ok(Stream::Tls(TlsStream {
        shared: Arc::new(Shared {
            sock,
            state: Mutex::new(State {
                conn,
                raw: Vec::new(),
            }),
        }),
        scratch: Vec::new(),
    }))
}

/// Sends whatever rustls has queued (records, handshake flights, alerts).
fn send_tls(conn: &mut ServerConnection, sock: &Stream) -> io::Result<()> {
    let mut w = RawWriter(sock);
    while conn.wants_write() {
        conn.write_tls(&mut w)?;
    }
    Ok(())
}

struct RawWriter<'a>(&'a Stream);

impl Write for RawWriter<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.raw_write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsStream {
    pub(crate) fn try_clone(&self) -> TlsStream {
        TlsStream {
            shared: self.shared.clone(),
            scratch: Vec::new(),
        }
    }

    /// The client's socket underneath.
    pub(crate) fn socket(&self) -> &Stream {
        &self.shared.sock
    }

    /// A `close_notify` if the session is free to send one now (a writer stuck on a client
    /// that takes nothing must not hold this up), then the socket shut down both ways.
    pub(crate) fn shutdown(&self) {
        if let Some(mut st) = self.shared.state.try_lock() {
            st.conn.send_close_notify();
            let _ = send_tls(&mut st.conn, &self.shared.sock);
        }
        self.shared.sock.shutdown();
    }
}

impl Read for TlsStream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut st = self.shared.state.lock();
                let State { conn, raw } = &mut *st;
                // What arrived goes into rustls, as much as it takes (a record or so per
                // call); what it took leaves `raw` once, not after every call.
                let mut refused = None;
                let mut fed = 0;
                while fed < raw.len() {
                    match conn.read_tls(&mut &raw[fed..]) {
                        Ok(k) => fed += k,
                        // Its plaintext buffer is full: hand some out first.
                        Err(e) => {
                            refused = Some(e);
                            break;
                        }
                    }
                    if let Err(e) = conn.process_new_packets() {
                        // The alert rustls queued goes to the client, then this ends.
                        let _ = send_tls(conn, &self.shared.sock);
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("TLS: {e}"),
                        ));
                    }
                }
                raw.drain(..fed);
                match conn.reader().read(b) {
                    // Plaintext, or the end after the client's close_notify.
                    Ok(n) => {
                        send_tls(conn, &self.shared.sock)?;
                        return Ok(n);
                    }
                    // Nothing to hand out, yet rustls takes no more: it never will.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if let Some(e) = refused {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("TLS: {e}"),
                            ));
                        }
                    }
                    // The socket ended without a close_notify: the end all the same.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                    Err(e) => return Err(e),
                }
                // Nothing to hand out: what rustls has to say (the handshake's flights,
                // tickets) goes first, then wait for the client.
                send_tls(conn, &self.shared.sock)?;
            }
            if self.scratch.is_empty() {
                self.scratch = vec![0u8; 64 << 10];
            }
            let n = self.shared.sock.raw_read(&mut self.scratch)?;
            let mut st = self.shared.state.lock();
            if n == 0 {
                // Tell rustls the socket ended; the next round reports it.
                let _ = st.conn.read_tls(&mut io::empty());
            } else {
                st.raw.extend_from_slice(&self.scratch[..n]);
            }
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let mut st = self.shared.state.lock();
        let mut n = st.conn.writer().write(b)?;
        if n == 0 && !b.is_empty() {
            // rustls' buffer is full: send it, then there is room.
            send_tls(&mut st.conn, &self.shared.sock)?;
            n = st.conn.writer().write(b)?;
        }
        send_tls(&mut st.conn, &self.shared.sock)?;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
