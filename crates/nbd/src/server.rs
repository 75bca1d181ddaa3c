//! The NBD server: exports backed by a `RequestQueue`, one software queue per connection.
//!
//! Each connection is a submitter of its own: it takes a free software queue (Ctx) of the
//! export's queue, which maps it to a hardware queue, so N connections spread over the
//! hardware queues as the kernel's nbd driver spreads its sockets. Per connection a reader
//! thread parses requests (and write payloads) and an I/O thread reaps completions and
//! writes the replies in completion order; the Ctx and what is in flight are an `IoState`
//! both can hold. The reader serves a request itself (submits, polls, gathers the reply)
//! when the state is free, and hands it over a bounded channel only when the I/O thread
//! holds it. A client that disappears leaves its requests to complete (their replies are
//! dropped); the Ctx is released only when nothing of it is in flight.
//!
//! This file holds the limits and the accept loop; beside it, by stage: `export`,
//! `transport` (streams and listeners), `handshake` (option haggling), `transmission` (the
//! reader and its checks), `io_state` (submission, completion and replies) and `rmw`
//! (requests not in whole blocks), as nbdkit splits its server into `connections.c`,
//! `protocol-handshake-newstyle.c` and `protocol.c`.

use crate::proto::{self, cflag, cmd, err, info, opt, rep, tflag, Framing, ProtoError, Request};
use crate::tls::{Tls, TlsMode};
use mqblk_core::{Bio, BlkStatus, CtxIdx, IoBuf, ReqFlags, ReqOp, RequestQueue, SpareBufs};
use mqblk_runtime::{MonotonicClock, SubmitterHandle};
use parking_lot::Mutex;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

mod export;
mod handshake;
mod io_state;
mod rmw;
mod transmission;
mod transport;

use export::*;
pub use export::{ConnStats, Export, ExportStats};
use handshake::*;
use io_state::*;
use rmw::*;
use transmission::*;
pub use transport::{Listener, Stream};

/// Requests a connection may have read but not yet replied to.
pub const MAX_INFLIGHT: usize = 64;
/// Payload bytes (write data read in, read data to come) a connection may hold at once: its
/// memory bound. One request larger than this is still served, alone.
pub const MAX_CONN_BYTES: u64 = 64 << 20;
/// The largest READ or WRITE served (nbdkit's bound). Clients are told 32 MiB, the size the
/// protocol asks clients to keep to; one that did not ask may send more (the reference
/// suite's `integrityhuge` sends up to 48 MiB).
pub const MAX_REQUEST_BYTES: u64 = 64 << 20;
/// How long a client may leave a handshake step or a reply unread before it is dropped.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Clients at once in their handshake (`mqblk serve`'s bound): idle clients that never
/// finish one cannot keep others out for longer than [`HANDSHAKE_TIMEOUT`], and hold no
/// export's session slot.
pub const MAX_HANDSHAKES: usize = 64;
/// How long a session may sit with nothing in flight and nothing sent before it is closed,
/// unless the operator says otherwise (`mqblk serve --idle-timeout`). An hour: long enough
/// for a mounted file system's quiet spells, short enough that forgotten sessions give their
/// slots back.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
/// How often a reader waiting for a request looks at the idle clock.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// How often the server looks at its stop flag (set by SIGINT/SIGTERM).
const STOP_POLL: Duration = Duration::from_millis(50);
/// The reader's buffer: a pipelining client's requests are parsed from it, many per
/// `recv`.
const READ_BUFFER: usize = 64 << 10;
/// How long a client may take over each step of its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server: exports and the shutdown flag.
pub struct Server {
    pub exports: Vec<Arc<Export>>,
    /// A session with no request in flight that sends nothing for this long is closed;
    /// `None` keeps idle sessions forever. Default [`IDLE_TIMEOUT`].
    pub idle_timeout: Option<Duration>,
    /// Clients at once in their handshake; more are closed at once. Sessions do not count:
    /// each export bounds its own ([`Export::with_sessions`]).
    pub max_handshakes: usize,
    /// TLS offered or required (`NBD_OPT_STARTTLS`); `None` refuses it.
    pub tls: Option<crate::tls::Tls>,
    pub stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
    handshaking: Arc<AtomicUsize>,
}

impl Server {
    pub fn new(exports: Vec<Arc<Export>>, max_handshakes: usize) -> Server {
        Server {
            exports,
            idle_timeout: Some(IDLE_TIMEOUT),
            max_handshakes,
            tls: None,
            stop: Arc::new(AtomicBool::new(false)),
            active: Arc::new(AtomicUsize::new(0)),
            handshaking: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Connections open now: in their handshake or in a session.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// Accepts on `l` until the server stops, starting a thread per connection.
    fn accept_loop(&self, l: &Listener, conns: &Mutex<Vec<(std::thread::JoinHandle<()>, Stream)>>) {
        let mut failing = false;
        loop {
            let s = match l {
                Listener::Tcp(t) => t.accept().map(|(s, _)| {
                    let _ = s.set_nodelay(true);
                    Stream::Tcp(s)
                }),
                Listener::Unix(u, _) => u.accept().map(|(s, _)| Stream::Unix(s)),
            };
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let s = match s {
                Ok(s) => {
                    failing = false;
                    s
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors (EMFILE, ENFILE) or memory: say so once, and back
                    // off instead of spinning on the error.
                    if !failing {
                        eprintln!("mqblk serve: accept: {e} (backing off until it clears)");
                    }
                    failing = true;
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            if self.handshaking.load(Ordering::Acquire) >= self.max_handshakes {
                // Too many clients in their handshake: refuse at once. Sessions do not count
                // here; each export bounds its own.
                s.shutdown();
                continue;
            }
            let Ok(keep) = s.try_clone() else {
                continue;
            };
            self.active.fetch_add(1, Ordering::AcqRel);
            self.handshaking.fetch_add(1, Ordering::AcqRel);
            let exports = self.exports.clone();
            let active = self.active.clone();
            let handshaking = self.handshaking.clone();
            let idle = self.idle_timeout;
            let tls = self.tls.clone();
            let spawned = std::thread::Builder::new()
                .name("nbd-conn".into())
                .spawn(move || {
                    let end = s.try_clone();
                    match serve_connection(s, &exports, &handshaking, idle, tls.as_ref()) {
                        // A client that hangs up in its handshake (a probe, `nbdinfo`
                        // giving up) has only left.
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::UnexpectedEof
                                    | io::ErrorKind::ConnectionReset
                                    | io::ErrorKind::BrokenPipe
                            ) => {}
                        Err(e) => eprintln!("mqblk serve: connection: {e}"),
                        Ok(()) => {}
                    }
                    // The client sees the end now, though the server's handle on the socket
                    // lives on until the list of connections is next pruned.
                    if let Ok(end) = end {
                        end.shutdown();
                    }
                    active.fetch_sub(1, Ordering::AcqRel);
                });
            match spawned {
                Ok(h) => {
                    let mut c = conns.lock();
                    c.retain(|(h, _)| !h.is_finished());
                    c.push((h, keep));
                }
                Err(e) => {
                    // The closure (and the connection) is gone with the error.
                    self.active.fetch_sub(1, Ordering::AcqRel);
                    self.handshaking.fetch_sub(1, Ordering::AcqRel);
                    eprintln!("mqblk serve: starting a connection thread: {e}");
                }
            }
        }
    }

    /// Accepts and serves clients until `stop` is set; then waits for every connection to
    /// finish its requests and returns. Each connection runs on threads of its own.
    pub fn run(&self, listeners: Vec<Listener>) -> io::Result<()> {
        // One thread per listener blocks in `accept`; this one watches the stop flag (set
        // from a signal handler, so it cannot wake anyone itself) and, once it is set, wakes
        // the acceptors by connecting to them.
        let conns: Mutex<Vec<(std::thread::JoinHandle<()>, Stream)>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| -> io::Result<()> {
            let mut acceptors = Vec::new();
            for l in &listeners {
                let conns = &conns;
                acceptors.push(
                    std::thread::Builder::new()
                        .name("nbd-accept".into())
                        .spawn_scoped(scope, move || self.accept_loop(l, conns))?,
                );
            }
            while !self.stop.load(Ordering::Acquire) && !acceptors.iter().all(|a| a.is_finished()) {
                std::thread::sleep(STOP_POLL);
            }
            self.stop.store(true, Ordering::Release);
            for l in &listeners {
                wake(l);
            }
            for a in acceptors {
                let _ = a.join();
            }
            Ok(())
        })?;
        let conns = conns.into_inner();
        // Shutting down: stop reading from clients; in-flight requests complete and their
        // replies go out; then every connection ends.
        for (_, s) in &conns {
            if let Stream::Tcp(t) = s {
                let _ = t.shutdown(Shutdown::Read);
            } else if let Stream::Unix(u) = s {
                let _ = u.shutdown(Shutdown::Read);
            }
        }
        for (h, _) in conns {
            let _ = h.join();
        }
        for l in listeners {
            if let Listener::Unix(_, owned) = l {
                owned.remove();
            }
        }
        Ok(())
    }
}

/// Wakes a thread blocked in `accept` on `l` by connecting to it (the connection is dropped
/// at once, the acceptor sees the stop flag).
fn wake(l: &Listener) {
    match l {
        Listener::Tcp(t) => {
            if let Ok(mut a) = t.local_addr() {
                if a.ip().is_unspecified() {
                    a.set_ip(match a.ip() {
                        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                    });
                }
                let _ = std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1));
            }
        }
        Listener::Unix(_, owned) => {
            let _ = UnixStream::connect(owned.path());
        }
    }
}
