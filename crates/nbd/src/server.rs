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

/// One exported device.
pub struct Export {
    pub name: String,
    pub description: String,
    pub queue: Arc<RequestQueue>,
    /// Bytes.
    pub size: u64,
    pub read_only: bool,
    pub rotational: bool,
    /// Minimum block size (the queue's logical block size).
    pub min_block: u32,
    /// The largest payload clients are told (`NBD_INFO_BLOCK_SIZE`'s maximum); up to
    /// [`MAX_REQUEST_BYTES`] is served.
    pub max_payload: u32,
    /// Held while a change that does not cover whole blocks is read, patched and written
    /// back ([`serve_unaligned`]).
    rmw: Mutex<()>,
    /// Free software queues, and connections per hardware queue. A session holds one from
    /// the moment the server says yes to its export until it ends; there are as many as the
    /// export takes sessions (`max-connections`).
    free_ctx: Mutex<(Vec<u16>, Vec<u32>)>,
    pub stats: ExportStats,
}

/// One finished connection's figures: its software and hardware queue and what it moved.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ConnStats {
    pub ctx: u16,
    pub hctx: u16,
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub errors: u64,
}

/// What an answered request adds to a connection's and its export's figures.
enum Tally {
    Error,
    Read(u64),
    Written(u64),
    /// Answered without data moved (FLUSH, TRIM, WRITE_ZEROES).
    Other,
}

impl ConnStats {
    /// Counts one answered request.
    fn tally(&mut self, t: Tally) {
        self.requests += 1;
        match t {
            Tally::Error => self.errors += 1,
            Tally::Read(n) => self.bytes_read += n,
            Tally::Written(n) => self.bytes_written += n,
            Tally::Other => {}
        }
    }
}

#[derive(Default)]
pub struct ExportStats {
    /// Finished connections (the most recent 1024).
    pub per_connection: Mutex<Vec<ConnStats>>,
    /// Totals over finished sessions: each adds its own when it ends (`connections` when it
    /// starts), so no line is written by every connection per request.
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub errors: AtomicU64,
}

impl Export {
    /// An export over `queue`; its software queues are the connections' (one each).
    pub fn new(
        name: &str,
        description: &str,
        queue: Arc<RequestQueue>,
        read_only: bool,
        rotational: bool,
    ) -> Export {
        let limits = *queue.limits();
        let nr_ctx = queue.nr_ctx() as u16;
        Export {
            name: name.to_string(),
            description: description.to_string(),
            size: limits.capacity_sectors * 512,
            min_block: limits.logical_block_size,
            max_payload: 32 << 20,
            read_only,
            rotational,
            rmw: Mutex::new(()),
            free_ctx: Mutex::new(((0..nr_ctx).collect(), vec![0; queue.nr_hw_queues()])),
            queue,
            stats: ExportStats::default(),
        }
    }

    /// The transmission flags this export advertises. Every connection shares one queue and
    /// one backing device (no per-connection cache), and a flush reaches the device, so the
    /// effects of FLUSH and FUA are visible on every connection: CAN_MULTI_CONN holds.
    /// At most `n` sessions at once (software queues `0..n`; the rest of the queue's stay free
    /// for the server's own use, such as the final flush).
    pub fn with_sessions(self, n: usize) -> Export {
        let n = n.min(self.queue.nr_ctx()) as u16;
        *self.free_ctx.lock() = ((0..n).collect(), vec![0; self.queue.nr_hw_queues()]);
        self
    }

    /// A software queue for a new connection, on the hardware queue with the fewest
    /// connections (so connection i lands on hardware queue i mod N, as the kernel's nbd
    /// driver maps socket i to hardware queue i).
    fn take_ctx(&self) -> Option<u16> {
        let mut g = self.free_ctx.lock();
        let (free, per_hctx) = &mut *g;
        let hctx_of = |c: u16| {
            self.queue
                .map_queue(CtxIdx(c), mqblk_core::HctxType::Default)
                .0 as usize
        };
        let (i, &c) = free
            .iter()
            .enumerate()
            .min_by_key(|&(_, &c)| (per_hctx[hctx_of(c)], hctx_of(c), c))?;
        free.swap_remove(i);
        per_hctx[hctx_of(c)] += 1;
        Some(c)
    }

    fn put_ctx(&self, c: u16) {
        let h = self
            .queue
            .map_queue(CtxIdx(c), mqblk_core::HctxType::Default)
            .0 as usize;
        let mut g = self.free_ctx.lock();
        g.1[h] -= 1;
        g.0.push(c);
    }

    pub fn flags(&self, framing: Framing) -> u16 {
        let mut f = tflag::HAS_FLAGS
            | tflag::SEND_FLUSH
            | tflag::SEND_FUA
            | tflag::CAN_MULTI_CONN
            | tflag::SEND_CACHE;
        if self.read_only {
            f |= tflag::READ_ONLY;
        } else {
            // Zeroing is a hole punch or a zero-range call on files and a memset in memory:
            // never slower than writing zeroes, so FAST_ZERO requests are honoured.
            f |= tflag::SEND_TRIM | tflag::SEND_WRITE_ZEROES | tflag::SEND_FAST_ZERO;
        }
        if framing != Framing::Simple {
            // A read is always answered in one chunk.
            f |= tflag::SEND_DF;
        }
        if self.rotational {
            f |= tflag::ROTATIONAL;
        }
        f
    }
}

/// A byte stream to a client.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Inside TLS (after STARTTLS), over one of the others.
    Tls(crate::tls::TlsStream),
}

impl Stream {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) {
        let _ = match self {
            Stream::Tcp(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            Stream::Unix(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            Stream::Tls(t) => {
                t.socket().set_timeouts(read, write);
                Ok(())
            }
        };
    }
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(t) => Stream::Tls(t.try_clone()),
        })
    }
    pub(crate) fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(t) => {
                t.shutdown();
                Ok(())
            }
        };
    }
    /// Reads the socket itself (under TLS: its records), from any thread holding a clone.
    pub(crate) fn raw_read(&self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(b),
            Stream::Unix(s) => (&*s).read(b),
            Stream::Tls(t) => t.socket().raw_read(b),
        }
    }
    /// Writes the socket itself (under TLS: records rustls made).
    pub(crate) fn raw_write(&self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).write(b),
            Stream::Unix(s) => (&*s).write(b),
            Stream::Tls(t) => t.socket().raw_write(b),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(b),
            Stream::Unix(s) => s.read(b),
            Stream::Tls(t) => t.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(b),
            Stream::Unix(s) => s.write(b),
            Stream::Tls(t) => t.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

/// Where the server listens.
pub enum Listener {
    Tcp(TcpListener),
    /// A Unix socket and the path it was bound at, removed at exit if still ours.
    Unix(UnixListener, mqblk_runtime::unix_socket::OwnedSocket),
}

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

fn read_u32(s: &mut Stream) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn protocol(e: ProtoError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// What the handshake agreed on.
#[derive(Copy, Clone, Debug)]
struct Session {
    framing: Framing,
    /// `base:allocation` was selected (BLOCK_STATUS allowed).
    meta: bool,
    /// The client asked for `NBD_INFO_BLOCK_SIZE`, so it keeps to the block sizes we gave.
    /// One that did not may send requests at any byte offset and length (the protocol's
    /// default minimum block size is 1), served through whole blocks.
    sizes: bool,
}

/// The export a client chose, how it talks, and the software queue its session holds.
type Chosen = (Arc<Export>, Session, u16);

/// The handshake; `Ok(None)` when the client aborted or left. After STARTTLS, `s` is the
/// TLS session on the client's socket.
fn handshake(
    s: &mut Stream,
    exports: &[Arc<Export>],
    tls: Option<&Tls>,
) -> io::Result<Option<Chosen>> {
    s.write_all(&proto::greeting())?;
    let no_zeroes = proto::client_flags(read_u32(s)?).map_err(protocol)?;
    let mut structured = false;
    let mut extended = false;
    let mut meta = false;
    let mut sizes = false;
    let mut secure = false;
    let offered = tls.filter(|t| t.mode != TlsMode::Off);
    let required = offered.is_some_and(|t| t.mode == TlsMode::Require);
    loop {
        let mut h = [0u8; 16];
        s.read_exact(&mut h)?;
        let (option, len) = proto::option_header(&h).map_err(protocol)?;
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        if required && !secure && option != opt::STARTTLS && option != opt::ABORT {
            // Forced TLS: nothing but the upgrade (or leaving) in the clear. EXPORT_NAME
            // cannot carry the error, so the connection ends.
            if option == opt::EXPORT_NAME {
                return Ok(None);
            }
            s.write_all(&proto::option_reply(
                option,
                rep::ERR_TLS_REQD,
                b"this server requires TLS: send NBD_OPT_STARTTLS first",
            ))?;
            continue;
        }
        let framing = if extended {
            Framing::Extended
        } else if structured {
            Framing::Structured
        } else {
            Framing::Simple
        };
        let find = |name: &str| {
            exports
                .iter()
                .find(|e| e.name == name || (name.is_empty() && exports.len() == 1))
                .cloned()
        };
        let mut session = Session {
            framing,
            meta,
            sizes,
        };
        match option {
            opt::EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data).into_owned();
                // This option cannot carry an error: an unknown export (or the option after
                // extended headers, which forbid it) ends the connection.
                let Some(e) = find(&name).filter(|_| !extended) else {
                    return Ok(None);
                };
                // Nor can it say the export is full: the connection ends.
                let Some(ctx) = e.take_ctx() else {
                    return Ok(None);
                };
                let sent = s.write_all(&proto::export_name_reply(
                    e.size,
                    e.flags(framing),
                    no_zeroes,
                ));
                if let Err(err) = sent {
                    e.put_ctx(ctx);
                    return Err(err);
                }
                return Ok(Some((e, session, ctx)));
            }
            opt::ABORT => {
                let _ = s.write_all(&proto::option_reply(option, rep::ACK, &[]));
                return Ok(None);
            }
            opt::LIST => {
                if !data.is_empty() {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::ERR_INVALID,
                        b"LIST takes no data",
                    ))?;
                    continue;
                }
                for e in exports {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::SERVER,
                        &proto::rep_server(&e.name, &e.description),
                    ))?;
                }
                s.write_all(&proto::option_reply(option, rep::ACK, &[]))?;
            }
            opt::STRUCTURED_REPLY | opt::EXTENDED_HEADERS => {
                if !data.is_empty() {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::ERR_INVALID,
                        b"takes no data",
                    ))?;
                    continue;
                }
                if option == opt::STRUCTURED_REPLY {
                    structured = true;
                } else {
                    extended = true;
                }
                s.write_all(&proto::option_reply(option, rep::ACK, &[]))?;
            }
            opt::LIST_META_CONTEXT | opt::SET_META_CONTEXT => {
                let set = option == opt::SET_META_CONTEXT;
                if set && framing == Framing::Simple {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::ERR_INVALID,
                        b"negotiate structured replies first",
                    ))?;
                    continue;
                }
                let (name, queries) = match proto::parse_meta_request(&data) {
                    Ok(x) => x,
                    Err(e) => {
                        s.write_all(&proto::option_reply(
                            option,
                            rep::ERR_INVALID,
                            e.to_string().as_bytes(),
                        ))?;
                        continue;
                    }
                };
                if find(&name).is_none() {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::ERR_UNKNOWN,
                        b"no such export",
                    ))?;
                    continue;
                }
                let wanted = (!set && queries.is_empty())
                    || queries.iter().any(|q| {
                        q == proto::BASE_ALLOCATION || (!set && (q == "base:" || q == "base"))
                    });
                if set {
                    meta = wanted;
                }
                if wanted {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::META_CONTEXT,
                        &proto::rep_meta_context(proto::BASE_ALLOCATION_ID, proto::BASE_ALLOCATION),
                    ))?;
                }
                s.write_all(&proto::option_reply(option, rep::ACK, &[]))?;
            }
            opt::INFO | opt::GO => {
                let (name, wanted) = match proto::parse_info_request(&data) {
                    Ok(x) => x,
                    Err(e) => {
                        s.write_all(&proto::option_reply(
                            option,
                            rep::ERR_INVALID,
                            e.to_string().as_bytes(),
                        ))?;
                        continue;
                    }
                };
                let Some(e) = find(&name) else {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::ERR_UNKNOWN,
                        format!("no export named '{name}'").as_bytes(),
                    ))?;
                    continue;
                };
                if wanted.contains(&info::BLOCK_SIZE) {
                    sizes = true;
                    session.sizes = true;
                }
                // GO starts a session: it needs a free slot of the export, held from here.
                let ctx = if option == opt::GO {
                    let Some(ctx) = e.take_ctx() else {
                        s.write_all(&proto::option_reply(
                            option,
                            rep::ERR_POLICY,
                            format!(
                                "export '{}' has as many sessions as it takes; try again later",
                                e.name
                            )
                            .as_bytes(),
                        ))?;
                        continue;
                    };
                    Some(ctx)
                } else {
                    None
                };
                match (info_replies(s, option, &e, &wanted, framing), ctx) {
                    (Err(err), Some(c)) => {
                        e.put_ctx(c);
                        return Err(err);
                    }
                    (Err(err), None) => return Err(err),
                    (Ok(()), Some(c)) => return Ok(Some((e, session, c))),
                    (Ok(()), None) => {}
                }
            }
            opt::STARTTLS => {
                let Some(t) = offered else {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::ERR_POLICY,
                        b"TLS is not offered",
                    ))?;
                    continue;
                };
                if !data.is_empty() || secure {
                    s.write_all(&proto::option_reply(
                        option,
                        rep::ERR_INVALID,
                        if secure {
                            &b"TLS is already on"[..]
                        } else {
                            &b"STARTTLS takes no data"[..]
                        },
                    ))?;
                    continue;
                }
                s.write_all(&proto::option_reply(option, rep::ACK, &[]))?;
                *s = crate::tls::wrap(t.config.clone(), s.try_clone()?)?;
                secure = true;
                // What was agreed in the clear is forgotten (the spec; nbdkit's
                // CVE-2021-3716 was a structured-reply state kept across STARTTLS).
                (structured, extended, meta, sizes) = (false, false, false, false);
            }
            _ => {
                s.write_all(&proto::option_reply(option, rep::ERR_UNSUP, &[]))?;
            }
        }
    }
}

/// The replies to INFO or GO for export `e`: the information asked for, the block sizes and
/// size and flags always (our constraints differ from the defaults), then the ACK.
fn info_replies(
    s: &mut Stream,
    option: u32,
    e: &Export,
    wanted: &[u16],
    framing: Framing,
) -> io::Result<()> {
    if wanted.contains(&info::NAME) {
        s.write_all(&proto::option_reply(
            option,
            rep::INFO,
            &proto::info_text(info::NAME, &e.name),
        ))?;
    }
    if wanted.contains(&info::DESCRIPTION) && !e.description.is_empty() {
        s.write_all(&proto::option_reply(
            option,
            rep::INFO,
            &proto::info_text(info::DESCRIPTION, &e.description),
        ))?;
    }
    s.write_all(&proto::option_reply(
        option,
        rep::INFO,
        &proto::info_block_size(e.min_block, e.min_block.max(4096), e.max_payload),
    ))?;
    s.write_all(&proto::option_reply(
        option,
        rep::INFO,
        &proto::info_export(e.size, e.flags(framing)),
    ))?;
    s.write_all(&proto::option_reply(option, rep::ACK, &[]))
}

/// What the reader hands to the I/O thread.
enum Item {
    Req(Request, Option<IoBuf>),
    /// Answer with this error without touching the device: (cookie, offset, error).
    Fail(u64, u64, u32),
    /// Answer success at once (CACHE, zero-length requests): (cookie, offset).
    Ok(u64, u64),
    /// BLOCK_STATUS: (cookie, offset, length, only one extent wanted).
    Status(u64, u64, u64, bool),
    /// The client is gone or said goodbye.
    End,
    /// Nothing: wakes the I/O thread to reap what the reader submitted itself.
    Kick,
}

fn serve_connection(
    mut s: Stream,
    exports: &[Arc<Export>],
    handshaking: &AtomicUsize,
    idle: Option<Duration>,
    tls: Option<&Tls>,
) -> io::Result<()> {
    // A client may not stall the handshake, nor leave replies unread, for long.
    s.set_timeouts(Some(HANDSHAKE_TIMEOUT), Some(IO_TIMEOUT));
    let chosen = handshake(&mut s, exports, tls);
    handshaking.fetch_sub(1, Ordering::AcqRel);
    match chosen {
        Ok(Some((export, session, ctx))) => {
            // Whatever way the session ends, its software queue is free again after it.
            let res = serve_session(s, &export, session, ctx, idle);
            export.put_ctx(ctx);
            res
        }
        Ok(None) => {
            s.shutdown();
            Ok(())
        }
        Err(e) => {
            s.shutdown();
            Err(e)
        }
    }
}

/// Serves one session on software queue `ctx` of `export` until it ends.
fn serve_session(
    s: Stream,
    export: &Arc<Export>,
    session: Session,
    ctx: u16,
    idle: Option<Duration>,
) -> io::Result<()> {
    // Between requests a client may stay idle up to `idle`: the reader wakes every
    // `IDLE_POLL` to look.
    s.set_timeouts(idle.map(|_| IDLE_POLL), Some(IO_TIMEOUT));
    export.stats.connections.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = sync_channel::<Item>(MAX_INFLIGHT);
    let mut rd = s.try_clone()?;
    let ex = export.clone();
    let shared = Arc::new(Shared::default());
    let shared_r = shared.clone();
    let cs = ConnStats {
        ctx,
        hctx: export
            .queue
            .map_queue(CtxIdx(ctx), mqblk_core::HctxType::Default)
            .0,
        ..ConnStats::default()
    };
    let state = Arc::new(Mutex::new(IoState::new(
        s.try_clone()?,
        export.clone(),
        ctx,
        session.framing,
        cs,
    )));
    let state_r = state.clone();
    let reader = std::thread::Builder::new()
        .name("nbd-read".into())
        .spawn(move || {
            let mut patient = Patient {
                s: &mut rd,
                idle,
                last: std::time::Instant::now(),
                busy: &shared_r.busy,
            };
            // Buffered: a pipelining client's requests come many to a `recv`, and the
            // replies of those served here go out together once the buffer runs dry.
            let mut buffered = io::BufReader::with_capacity(READ_BUFFER, &mut patient);
            let end = read_requests(&mut buffered, &ex, session, &tx, &shared_r, &state_r);
            if let Err(e) = end {
                // A client that closes without NBD_CMD_DISC (fio's engine does) is normal,
                // and so is a reader told to stop because the I/O side is done.
                if !shared_r.closing.load(Ordering::Acquire)
                    && !matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                    )
                    && e.kind() != io::ErrorKind::TimedOut
                {
                    eprintln!("mqblk serve: {}: {e}", ex.name);
                }
            }
            let _ = tx.send(Item::End);
        })?;
    let res = io_loop(&state, &rx, &shared);
    // Every way out of the I/O side (client gone, unread replies past the timeout, DISC)
    // must also end the reader, wherever it waits: on the socket (shut down), on a full
    // request channel (its receiver dropped) or for payload room (`closing`).
    shared.closing.store(true, Ordering::Release);
    s.shutdown();
    drop(rx);
    let _ = reader.join();
    let cs = std::mem::take(&mut state.lock().cs);
    let mut log = export.stats.per_connection.lock();
    let t = &export.stats;
    t.requests
        .fetch_add(shared.parsed.load(Ordering::Relaxed), Ordering::Relaxed);
    t.bytes_read.fetch_add(cs.bytes_read, Ordering::Relaxed);
    t.bytes_written
        .fetch_add(cs.bytes_written, Ordering::Relaxed);
    t.errors.fetch_add(cs.errors, Ordering::Relaxed);
    if log.len() >= 1024 {
        log.remove(0);
    }
    log.push(cs);
    res
}

/// What a session's reader and I/O thread share.
struct Shared {
    /// Payload bytes (write data read in, read data to come) held against `MAX_CONN_BYTES`.
    held: AtomicU64,
    /// Requests handed to the I/O side and not yet answered: a session waiting for them is
    /// not idle.
    busy: AtomicUsize,
    /// The I/O side is done: a reader waiting for payload room gives up.
    closing: AtomicBool,
    /// Requests read (DISC, CACHE and BLOCK_STATUS too), for the export's total.
    parsed: AtomicU64,
    /// Buffers of answered writes, which the reader reads the next payloads into: no fresh
    /// pages allocated and zeroed per WRITE. Its own lock, so the reader never waits for the
    /// session's state to get one.
    write_bufs: Mutex<SpareBufs>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            held: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            parsed: AtomicU64::new(0),
            write_bufs: Mutex::new(
                SpareBufs::new(MAX_INFLIGHT).bytes_at_most(MAX_CONN_BYTES as usize),
            ),
        }
    }
}

/// The reader's side of the socket, which waits out read timeouts (`IDLE_POLL`) while the
/// session is busy or has not been idle for `idle`, and then ends it with `TimedOut`.
struct Patient<'a> {
    s: &'a mut Stream,
    idle: Option<Duration>,
    last: std::time::Instant,
    busy: &'a AtomicUsize,
}

impl Read for Patient<'_> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.s.read(b) {
                Ok(n) => {
                    self.last = std::time::Instant::now();
                    return Ok(n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    let Some(idle) = self.idle else {
                        return Err(e);
                    };
                    if self.busy.load(Ordering::Acquire) > 0 {
                        self.last = std::time::Instant::now();
                    } else if self.last.elapsed() >= idle {
                        eprintln!(
                            "mqblk serve: a session idle for {} s closed (--idle-timeout)",
                            idle.as_secs()
                        );
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "idle"));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Reads requests until DISC, EOF or a protocol error.
fn read_requests<R: Read>(
    s: &mut io::BufReader<R>,
    e: &Export,
    session: Session,
    tx: &std::sync::mpsc::SyncSender<Item>,
    shared: &Shared,
    state: &Mutex<IoState>,
) -> io::Result<()> {
    let (held, closing, busy) = (&shared.held, &shared.closing, &shared.busy);
    let extended = session.framing == Framing::Extended;
    loop {
        if s.buffer().is_empty() {
            // The next read may wait for the client: what was served here goes out first.
            // (If the I/O thread holds the state, it sends everything before letting go.)
            if let Some(mut st) = state.try_lock() {
                st.flush();
            }
        }
        let r = if extended {
            let mut h = [0u8; 32];
            s.read_exact(&mut h)?;
            proto::parse_ext_request(&h).map_err(protocol)?
        } else {
            let mut h = [0u8; 28];
            s.read_exact(&mut h)?;
            proto::parse_request(&h).map_err(protocol)?
        };
        shared.parsed.fetch_add(1, Ordering::Relaxed);
        let send = |item| deliver(item, tx, shared, state);
        if r.kind == cmd::DISC {
            return Ok(());
        }
        // A payload must be consumed whatever we answer, to stay in step: a compact WRITE
        // carries `length` bytes, an extended request carries them iff PAYLOAD_LEN is set.
        let has_payload = if extended {
            r.flags & cflag::PAYLOAD_LEN != 0
        } else {
            r.kind == cmd::WRITE
        };
        if extended && r.kind == cmd::WRITE && !has_payload {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "extended WRITE without PAYLOAD_LEN",
            ));
        }
        // Hold back while this connection's payload bytes are at their bound.
        let cost = held_bytes(&r);
        while cost > 0
            && held.load(Ordering::Acquire) > 0
            && held.load(Ordering::Acquire) + cost > MAX_CONN_BYTES
        {
            if closing.load(Ordering::Acquire) {
                return Err(io::Error::other("connection closing"));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        let mut data = None;
        if has_payload {
            if r.kind != cmd::WRITE || r.length > MAX_REQUEST_BYTES {
                io::copy(&mut s.take(r.length), &mut io::sink())?;
                send(Item::Fail(r.cookie, r.offset, err::EINVAL))?;
                continue;
            }
            let mut buf = shared.write_bufs.lock().take(r.length as usize);
            s.read_exact(buf.as_mut_slice())?;
            data = Some(buf);
        }
        match check(e, session, &r) {
            Some(code) => send(Item::Fail(r.cookie, r.offset, code))?,
            None if r.kind == cmd::BLOCK_STATUS => send(Item::Status(
                r.cookie,
                r.offset,
                r.length,
                r.flags & cflag::REQ_ONE != 0,
            ))?,
            None if r.kind == cmd::CACHE || (r.length == 0 && r.kind != cmd::FLUSH) => {
                send(Item::Ok(r.cookie, r.offset))?
            }
            None => {
                held.fetch_add(cost, Ordering::AcqRel);
                busy.fetch_add(1, Ordering::AcqRel);
                send(Item::Req(r, data))?
            }
        }
    }
}

/// Payload bytes a request holds against the connection's bound (`MAX_CONN_BYTES`) while it
/// is served: a READ's data to come or a WRITE's data read in. Taken when the reader hands
/// it over and given back when it is answered, so both sides compute it here.
fn held_bytes(r: &Request) -> u64 {
    if matches!(r.kind, cmd::READ | cmd::WRITE) && r.length <= MAX_REQUEST_BYTES {
        r.length
    } else {
        0
    }
}

/// The request starts and ends on the export's block boundaries.
fn aligned(e: &Export, r: &Request) -> bool {
    let b = e.min_block as u64;
    r.offset % b == 0 && r.length % b == 0
}

/// The error a request gets without reaching the device, if any.
fn check(e: &Export, session: Session, r: &Request) -> Option<u32> {
    if r.flags & !cflag::KNOWN != 0 {
        return Some(err::EINVAL);
    }
    let allowed = match r.kind {
        cmd::READ => {
            cflag::FUA
                | if session.framing != Framing::Simple {
                    cflag::DF
                } else {
                    0
                }
        }
        cmd::WRITE_ZEROES => cflag::FUA | cflag::NO_HOLE | cflag::FAST_ZERO,
        cmd::BLOCK_STATUS => cflag::FUA | cflag::REQ_ONE,
        _ => cflag::FUA,
    } | if session.framing == Framing::Extended {
        cflag::PAYLOAD_LEN
    } else {
        0
    };
    if r.flags & !allowed != 0 {
        return Some(err::EINVAL);
    }
    match r.kind {
        cmd::READ | cmd::WRITE | cmd::TRIM | cmd::WRITE_ZEROES | cmd::CACHE => {}
        cmd::BLOCK_STATUS if session.meta => {}
        cmd::FLUSH => return (r.offset != 0 || r.length != 0).then_some(err::EINVAL),
        _ => return Some(err::EINVAL),
    }
    let writes = matches!(r.kind, cmd::WRITE | cmd::TRIM | cmd::WRITE_ZEROES);
    if writes && e.read_only {
        return Some(err::EPERM);
    }
    if r.offset.saturating_add(r.length) > e.size {
        // Writing past the end is out of space (the spec's ENOSPC for WRITE and
        // WRITE_ZEROES); anything else there is an invalid request.
        return Some(if matches!(r.kind, cmd::WRITE | cmd::WRITE_ZEROES) {
            err::ENOSPC
        } else {
            err::EINVAL
        });
    }
    if session.sizes && !aligned(e, r) {
        return Some(err::EINVAL);
    }
    if r.kind == cmd::READ && r.length > MAX_REQUEST_BYTES {
        return Some(err::EINVAL);
    }
    None
}

fn nbd_error(s: BlkStatus) -> u32 {
    match s {
        BlkStatus::Ok => 0,
        BlkStatus::NoSpc => err::ENOSPC,
        BlkStatus::Protection => err::EPERM,
        BlkStatus::Invalid => err::EINVAL,
        BlkStatus::NotSupp => err::ENOTSUP,
        _ => err::EIO,
    }
}

/// A request in flight: its cookie, whether it returns data, how many bios are out, and the
/// first error among them.
struct Pending {
    cookie: u64,
    offset: u64,
    /// Payload bytes it holds against the connection's bound.
    cost: u64,
    read: bool,
    bios: u32,
    error: u32,
}

/// The I/O side of a session: its software queue, the requests in flight and the replies
/// being gathered. The I/O thread holds it to serve what the reader queued and to reap; the
/// reader holds it to serve a request itself when nobody else does ([`deliver`]), which
/// saves the hand-over (a wake-up and two context switches) whenever the device completes
/// at submission (memory, null). Whoever lets it go with replies gathered sends them first,
/// unless it is the reader with more requests already buffered.
struct IoState {
    s: Stream,
    e: Arc<Export>,
    framing: Framing,
    h: SubmitterHandle,
    slots: Vec<Option<Pending>>,
    free: Vec<usize>,
    inflight: usize,
    /// The client is gone: replies are dropped, requests still run to completion.
    dead: bool,
    /// No more requests are taken (the reader ended, or the client is gone).
    ended: bool,
    /// The I/O thread has returned: nothing may be submitted any more.
    closed: bool,
    out: Vec<u8>,
    /// Read buffers kept for reuse.
    spare: SpareBufs,
    chunk: u64,
    cs: ConnStats,
}

impl IoState {
    fn new(s: Stream, e: Arc<Export>, ctx: u16, framing: Framing, cs: ConnStats) -> IoState {
        let chunk = (e.queue.limits().max_sectors as u64).min(1 << 16) * 512;
        IoState {
            s,
            h: SubmitterHandle::new(e.queue.clone(), CtxIdx(ctx), MonotonicClock::new()),
            e,
            framing,
            slots: Vec::new(),
            free: Vec::new(),
            inflight: 0,
            dead: false,
            ended: false,
            closed: false,
            out: Vec::with_capacity(1 << 16),
            spare: SpareBufs::new(MAX_INFLIGHT).bytes_at_most(MAX_CONN_BYTES as usize),
            chunk,
            cs,
        }
    }

    /// Serves one item from the reader: an answer gathered in `out`, or requests submitted.
    fn take(&mut self, item: Item, shared: &Shared) {
        let (held, busy) = (&shared.held, &shared.busy);
        let (framing, chunk) = (self.framing, self.chunk);
        let IoState {
            e,
            h,
            slots,
            free,
            inflight,
            ended,
            out,
            spare,
            cs,
            ..
        } = self;
        let e: &Export = e;
        match item {
            Item::End => *ended = true,
            Item::Kick => {}
            Item::Ok(cookie, offset) => {
                proto::reply_no_data(framing, cookie, offset, 0, out);
            }
            Item::Status(cookie, offset, len, one) => {
                let extents = allocation(e, offset, len, one);
                proto::block_status_reply(framing, cookie, offset, &extents, out);
            }
            Item::Fail(cookie, offset, code) => {
                cs.tally(Tally::Error);
                proto::reply_no_data(framing, cookie, offset, code, out);
            }
            Item::Req(r, data) if !aligned(e, &r) => {
                // Only from a client that did not negotiate block sizes (`check`).
                let (code, bytes) = serve_unaligned(h, e, &r, data);
                held.fetch_sub(held_bytes(&r), Ordering::AcqRel);
                busy.fetch_sub(1, Ordering::AcqRel);
                if code != 0 {
                    cs.tally(Tally::Error);
                    proto::reply_no_data(framing, r.cookie, r.offset, code, out);
                } else if let Some(b) = bytes {
                    cs.tally(Tally::Read(b.len() as u64));
                    proto::read_reply_header(framing, r.cookie, r.offset, b.len() as u64, out);
                    out.extend_from_slice(&b);
                } else {
                    cs.tally(if r.kind == cmd::WRITE {
                        Tally::Written(r.length)
                    } else {
                        Tally::Other
                    });
                    proto::reply_no_data(framing, r.cookie, r.offset, 0, out);
                }
            }
            Item::Req(r, data) => {
                let slot = free.pop().unwrap_or_else(|| {
                    slots.push(None);
                    slots.len() - 1
                });
                // Reads reuse the buffers of earlier reads: no allocation and no zeroing
                // of fresh pages per request.
                let data = if r.kind == cmd::READ {
                    Some(spare.take(r.length as usize))
                } else {
                    data
                };
                let bios = submit(h, e, &r, data, slot as u64, chunk);
                slots[slot] = Some(Pending {
                    cookie: r.cookie,
                    offset: r.offset,
                    cost: held_bytes(&r),
                    read: r.kind == cmd::READ,
                    bios,
                    error: 0,
                });
                *inflight += 1;
            }
        }
    }

    /// Reaps completions (waiting up to 200 us for one with `wait`) and answers the requests
    /// they finish.
    fn reap(&mut self, wait: bool, shared: &Shared) {
        if self.inflight == 0 {
            return;
        }
        if wait {
            self.h.reap(1, 200_000);
        } else {
            self.h.poll();
        }
        let (held, busy) = (&shared.held, &shared.busy);
        let framing = self.framing;
        let IoState {
            s,
            h,
            slots,
            free,
            inflight,
            dead,
            ended,
            out,
            spare,
            cs,
            ..
        } = self;
        let mut done = std::mem::take(h.done());
        for mut bio in done.drain(..) {
            let slot = bio.private as usize;
            let Some(p) = slots[slot].as_mut() else {
                continue;
            };
            p.bios -= 1;
            if p.error == 0 {
                p.error = nbd_error(bio.status);
            }
            if p.bios > 0 {
                continue;
            }
            let p = slots[slot].take().expect("pending");
            free.push(slot);
            *inflight -= 1;
            held.fetch_sub(p.cost, Ordering::AcqRel);
            busy.fetch_sub(1, Ordering::AcqRel);
            if p.error != 0 {
                cs.tally(Tally::Error);
                proto::reply_no_data(framing, p.cookie, p.offset, p.error, out);
            } else if p.read {
                let buf = bio.buf.as_ref().expect("a read carries its buffer");
                cs.tally(Tally::Read(buf.len() as u64));
                proto::read_reply_header(framing, p.cookie, p.offset, buf.len() as u64, out);
                if buf.len() >= 64 * 1024 {
                    // Large data goes straight from the bio's buffer to the socket.
                    if !*dead && (s.write_all(out).is_err() || s.write_all(buf.as_slice()).is_err())
                    {
                        *dead = true;
                        *ended = true;
                    }
                    out.clear();
                } else {
                    out.extend_from_slice(buf.as_slice());
                }
            } else {
                cs.tally(if bio.op == ReqOp::Write {
                    Tally::Written(bio.bytes())
                } else {
                    Tally::Other
                });
                proto::reply_no_data(framing, p.cookie, p.offset, 0, out);
            }
            // Its data has been copied out or written: the buffer can serve the next read,
            // or take the next write's payload.
            if let Some(b) = bio.buf.take() {
                if p.read {
                    spare.give(b);
                } else if bio.op == ReqOp::Write {
                    shared.write_bufs.lock().give(b);
                }
            }
        }
        *h.done() = done;
    }

    /// Sends the replies gathered; a client that cannot take them is gone.
    fn flush(&mut self) {
        if !self.out.is_empty() {
            if !self.dead && self.s.write_all(&self.out).is_err() {
                self.dead = true;
                self.ended = true;
            }
            self.out.clear();
        }
    }
}

/// The reader's hand-over of one item: served here at once when the I/O state is free and
/// the I/O thread has not returned, else queued for the I/O thread (woken by a `Kick` when
/// something served here is still in flight).
fn deliver(
    item: Item,
    tx: &std::sync::mpsc::SyncSender<Item>,
    shared: &Shared,
    state: &Mutex<IoState>,
) -> io::Result<()> {
    let gone = || io::Error::other("I/O thread gone");
    let Some(mut st) = state.try_lock() else {
        return tx.send(item).map_err(|_| gone());
    };
    if st.closed || st.ended {
        // The client stopped taking replies, or the session is over: not worth a line.
        return Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "the session is over",
        ));
    }
    st.take(item, shared);
    st.reap(false, shared);
    let pending = st.inflight > 0;
    drop(st);
    if pending {
        tx.send(Item::Kick).map_err(|_| gone())?;
    }
    Ok(())
}

/// The I/O thread: serves what the reader queued, reaps, and sends replies, until the reader
/// has ended and nothing is in flight.
fn io_loop(state: &Mutex<IoState>, rx: &Receiver<Item>, shared: &Shared) -> io::Result<()> {
    loop {
        let mut st = state.lock();
        if st.ended && st.inflight == 0 {
            st.flush();
            st.closed = true;
            return Ok(());
        }
        if st.inflight == 0 {
            // Nothing to reap: wait for the reader without holding the state.
            st.flush();
            drop(st);
            let item = match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(i) => i,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => Item::End,
            };
            st = state.lock();
            st.take(item, shared);
        }
        let mut got = 0;
        while !st.ended && got < MAX_INFLIGHT {
            match rx.try_recv() {
                Ok(i) => st.take(i, shared),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => st.take(Item::End, shared),
            }
            got += 1;
        }
        let wait = st.out.is_empty();
        st.reap(wait, shared);
        st.flush();
    }
}

/// The `base:allocation` extents of `len` bytes from `offset`: the driver's holes and data
/// (`Driver::block_status`), or one data extent where it cannot tell or the range is not
/// in whole sectors (a client that did not negotiate block sizes). With `one`
/// (`NBD_CMD_FLAG_REQ_ONE`) only the first.
fn allocation(e: &Export, offset: u64, len: u64, one: bool) -> Vec<(u64, u32)> {
    let whole = offset % 512 == 0 && len % 512 == 0;
    let found = whole
        .then(|| e.queue.driver().block_status(offset / 512, len / 512))
        .flatten()
        .filter(|x| !x.is_empty());
    let Some(extents) = found else {
        return vec![(len, 0)];
    };
    let take = if one { 1 } else { extents.len() };
    extents
        .iter()
        .take(take)
        .map(|x| {
            let flags = if x.hole { proto::state::HOLE } else { 0 }
                | if x.zero { proto::state::ZERO } else { 0 };
            (x.sectors * 512, flags)
        })
        .collect()
}

/// Marks the bios of [`serve_unaligned`], which waits for them itself.
const UNALIGNED: u64 = u64::MAX;

/// Serves a request that does not start and end on the export's block boundaries, from a
/// client that did not negotiate block sizes: through the whole blocks it touches, read and
/// (for a change) written back with the new bytes in place, synchronously and under the
/// export's lock for such changes, so two of them on one block never interleave. A TRIM
/// keeps to the whole blocks inside its range (it is only a hint). Returns the NBD error (0
/// for success) and, for a read, the bytes asked for. Completions of the connection's other
/// requests that come meanwhile stay in `h.done()` for the caller.
fn serve_unaligned(
    h: &mut SubmitterHandle,
    e: &Export,
    r: &Request,
    data: Option<IoBuf>,
) -> (u32, Option<Vec<u8>>) {
    let b = e.min_block as u64;
    let (start, end) = (r.offset / b * b, (r.offset + r.length).div_ceil(b) * b);
    let fua = r.flags & cflag::FUA != 0;
    let mut wait = |h: &mut SubmitterHandle, bio: Bio| -> Bio {
        h.submit(bio.with_private(UNALIGNED));
        loop {
            if let Some(i) = h.done().iter().position(|x| x.private == UNALIGNED) {
                return h.done().swap_remove(i);
            }
            let held = h.done().len();
            h.reap(held + 1, 200_000);
        }
    };
    let sectors = ((end - start) / 512) as u32;
    let read_span = |h: &mut SubmitterHandle,
                     wait: &mut dyn FnMut(&mut SubmitterHandle, Bio) -> Bio| {
        let bio = wait(
            h,
            Bio::new(ReqOp::Read, start / 512, sectors)
                .with_buf(IoBuf::new((end - start) as usize)),
        );
        (nbd_error(bio.status), bio.buf)
    };
    let skip = (r.offset - start) as usize;
    let len = r.length as usize;
    match r.kind {
        cmd::READ => {
            let (code, buf) = read_span(h, &mut wait);
            if code != 0 {
                return (code, None);
            }
            let buf = buf.expect("a read carries its buffer");
            (0, Some(buf.as_slice()[skip..skip + len].to_vec()))
        }
        cmd::WRITE | cmd::WRITE_ZEROES => {
            let _one_at_a_time = e.rmw.lock();
            let (code, buf) = read_span(h, &mut wait);
            if code != 0 {
                return (code, None);
            }
            let mut buf = buf.expect("a read carries its buffer");
            let dst = &mut buf.as_mut_slice()[skip..skip + len];
            match &data {
                Some(d) if r.kind == cmd::WRITE => dst.copy_from_slice(d.as_slice()),
                _ => dst.fill(0),
            }
            let mut bio = Bio::new(ReqOp::Write, start / 512, sectors).with_buf(buf);
            if fua {
                bio = bio.with_flags(ReqFlags::FUA);
            }
            (nbd_error(wait(h, bio).status), None)
        }
        cmd::TRIM => {
            let (inner_start, inner_end) =
                (r.offset.div_ceil(b) * b, (r.offset + r.length) / b * b);
            if inner_end <= inner_start {
                return (0, None);
            }
            let bio = Bio::new(
                ReqOp::Discard,
                inner_start / 512,
                ((inner_end - inner_start) / 512) as u32,
            );
            (nbd_error(wait(h, bio).status), None)
        }
        _ => (err::EINVAL, None),
    }
}

/// Submits the bios of one request; returns how many.
fn submit(
    h: &mut SubmitterHandle,
    e: &Export,
    r: &Request,
    data: Option<IoBuf>,
    slot: u64,
    chunk: u64,
) -> u32 {
    let fua = r.flags & cflag::FUA != 0;
    let sector = r.offset / 512;
    let mk = |op: ReqOp, sector: u64, sectors: u32| {
        let mut b = Bio::new(op, sector, sectors).with_private(slot);
        if fua && op != ReqOp::Flush && op != ReqOp::Read {
            b = b.with_flags(ReqFlags::FUA);
        }
        b
    };
    match r.kind {
        cmd::READ => {
            let buf = data.unwrap_or_else(|| IoBuf::new(r.length as usize));
            let bio = mk(ReqOp::Read, sector, (r.length / 512) as u32).with_buf(buf);
            h.submit(bio);
            1
        }
        cmd::WRITE => {
            let mut bio = mk(ReqOp::Write, sector, (r.length / 512) as u32);
            if let Some(d) = data {
                bio = bio.with_buf(d);
            }
            h.submit(bio);
            1
        }
        cmd::FLUSH => {
            h.submit(mk(ReqOp::Flush, 0, 0));
            1
        }
        _ => {
            // TRIM and WRITE_ZEROES may cover gigabytes: one bio per `chunk`.
            let op = if r.kind == cmd::TRIM {
                ReqOp::Discard
            } else {
                ReqOp::WriteZeroes
            };
            let mut n = 0;
            let mut off = r.offset;
            let end = r.offset + r.length;
            while off < end {
                let len = chunk.min(end - off);
                h.submit(mk(op, off / 512, (len / 512) as u32));
                off += len;
                n += 1;
            }
            let _ = e;
            n
        }
    }
}
