//! The server over a real socket with a small client written from the spec: handshake,
//! every command, the multi-connection flush rule, and bad clients that must not hurt others.

mod common;

use common::{go_payload, option, read_n, reply, rig_full, Rig};
use mqblk_nbd::proto::{self, cflag, cmd, err, info, opt, rep, tflag, Request};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

struct Client {
    s: UnixStream,
    size: u64,
    flags: u16,
    next: u64,
}

fn greet(sock: &PathBuf) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    let g = read_n(&mut s, 18);
    assert_eq!(&g[..8], &proto::NBDMAGIC.to_be_bytes());
    s.write_all(&(proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    s
}

fn rig(name: &str, read_only: bool) -> Rig {
    rig_with(name, read_only, 8, 8)
}

/// A rig whose sessions close after `idle` with nothing in flight and nothing sent.
fn rig_idle(name: &str, idle: std::time::Duration) -> Rig {
    rig_full(name, false, 8, 8, Some(idle), None)
}

/// A rig whose export takes `sessions` sessions and whose server lets `handshakes` clients
/// negotiate at once.
fn rig_with(name: &str, read_only: bool, sessions: usize, handshakes: usize) -> Rig {
    rig_full(
        name,
        read_only,
        sessions,
        handshakes,
        Some(mqblk_nbd::server::IDLE_TIMEOUT),
        None,
    )
}

impl Client {
    fn connect(sock: &PathBuf) -> Client {
        Client::connect_asking(sock, &[info::BLOCK_SIZE, info::NAME])
    }

    /// A client that does not ask for block sizes (`NBD_INFO_BLOCK_SIZE`), as the
    /// reference suite's older clients: it may send any byte offset and length.
    fn connect_plain(sock: &PathBuf) -> Client {
        Client::connect_asking(sock, &[info::NAME])
    }

    fn connect_asking(sock: &PathBuf, infos: &[u16]) -> Client {
        Client::try_connect(sock, infos).expect("a session")
    }

    /// `None` if the export refuses the session (`NBD_REP_ERR_POLICY`; the attempt is
    /// aborted) or the server closes the connection before its greeting.
    fn try_connect(sock: &PathBuf, infos: &[u16]) -> Option<Client> {
        let mut s = UnixStream::connect(sock).unwrap();
        let mut g = [0u8; 18];
        s.read_exact(&mut g).ok()?;
        assert_eq!(&g[..8], &proto::NBDMAGIC.to_be_bytes());
        s.write_all(&(proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES).to_be_bytes())
            .unwrap();
        option(&mut s, opt::GO, &go_payload("disk", infos));
        let (mut size, mut flags, mut block) = (0, 0, None);
        loop {
            let (t, d) = reply(&mut s);
            if t == rep::ACK {
                break;
            }
            if t == rep::ERR_POLICY {
                option(&mut s, opt::ABORT, &[]);
                let _ = reply(&mut s);
                return None;
            }
            assert_eq!(t, rep::INFO);
            match u16::from_be_bytes([d[0], d[1]]) {
                info::EXPORT => {
                    size = u64::from_be_bytes(d[2..10].try_into().unwrap());
                    flags = u16::from_be_bytes([d[10], d[11]]);
                }
                info::BLOCK_SIZE => block = Some(d[2..].to_vec()),
                info::NAME => assert_eq!(&d[2..], b"disk"),
                _ => {}
            }
        }
        assert!(block.is_some(), "block sizes advertised, asked or not");
        Some(Client {
            s,
            size,
            flags,
            next: 1,
        })
    }

    fn send(&mut self, kind: u16, flags: u16, offset: u64, length: u32, data: &[u8]) -> u64 {
        let cookie = self.next;
        self.next += 1;
        let r = Request {
            flags,
            kind,
            cookie,
            offset,
            length: length as u64,
        };
        self.s.write_all(&proto::encode_request(&r)).unwrap();
        self.s.write_all(data).unwrap();
        cookie
    }

    /// Reads one simple reply: (cookie, error).
    fn recv(&mut self) -> (u64, u32) {
        let h = read_n(&mut self.s, 16);
        assert_eq!(
            u32::from_be_bytes(h[..4].try_into().unwrap()),
            proto::SIMPLE_REPLY_MAGIC
        );
        (
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
            u32::from_be_bytes(h[4..8].try_into().unwrap()),
        )
    }

    fn call(&mut self, kind: u16, flags: u16, offset: u64, length: u32, data: &[u8]) -> u32 {
        let c = self.send(kind, flags, offset, length, data);
        let (cookie, e) = self.recv();
        assert_eq!(cookie, c);
        e
    }

    fn read(&mut self, offset: u64, len: u32) -> Vec<u8> {
        let c = self.send(cmd::READ, 0, offset, len, &[]);
        let (cookie, e) = self.recv();
        assert_eq!((cookie, e), (c, 0));
        read_n(&mut self.s, len as usize)
    }

    fn disconnect(mut self) {
        self.send(cmd::DISC, 0, 0, 0, &[]);
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn every_command_and_the_flags() {
    let r = rig("cmds", false);
    let mut c = Client::connect(&r.sock);
    assert_eq!(c.size, 64 << 20);
    for f in [
        tflag::HAS_FLAGS,
        tflag::SEND_FLUSH,
        tflag::SEND_FUA,
        tflag::SEND_TRIM,
        tflag::SEND_WRITE_ZEROES,
        tflag::CAN_MULTI_CONN,
    ] {
        assert!(c.flags & f != 0, "flag {f:#x}");
    }
    let data = pattern(7, 65536);
    assert_eq!(c.call(cmd::WRITE, cflag::FUA, 1 << 20, 65536, &data), 0);
    assert_eq!(c.read(1 << 20, 65536), data);
    assert_eq!(c.call(cmd::FLUSH, 0, 0, 0, &[]), 0);
    assert_eq!(
        c.call(
            cmd::WRITE_ZEROES,
            cflag::NO_HOLE,
            (1 << 20) + 4096,
            8192,
            &[]
        ),
        0
    );
    let back = c.read(1 << 20, 16384);
    assert_eq!(&back[..4096], &data[..4096]);
    assert!(back[4096..12288].iter().all(|&b| b == 0));
    assert_eq!(&back[12288..], &data[12288..16384]);
    assert_eq!(c.call(cmd::TRIM, 0, 0, 1 << 20, &[]), 0);
    assert_eq!(c.call(cmd::CACHE, 0, 0, 4096, &[]), 0);
    // Errors: past the end, misaligned, unknown command or flag, oversized payload.
    assert_eq!(c.call(cmd::READ, 0, c.size, 4096, &[]), err::EINVAL);
    assert_eq!(
        c.call(cmd::WRITE, 0, c.size - 512, 1024, &[0; 1024]),
        err::ENOSPC
    );
    assert_eq!(c.call(cmd::READ, 0, 100, 512, &[]), err::EINVAL);
    assert_eq!(c.call(42, 0, 0, 512, &[]), err::EINVAL);
    assert_eq!(c.call(cmd::READ, 1 << 9, 0, 512, &[]), err::EINVAL);
    // Past the largest request served: the payload is read and refused, in step.
    let big = vec![0u8; (64 << 20) + 512];
    assert_eq!(
        c.call(cmd::WRITE, 0, 0, big.len() as u32, &big),
        err::EINVAL
    );
    // Still in step after all that.
    assert_eq!(c.read(1 << 20, 4096), data[..4096].to_vec());
    c.disconnect();
}

#[test]
fn many_requests_in_flight_on_one_connection() {
    let r = rig("pipeline", false);
    let mut c = Client::connect(&r.sock);
    let mut cookies = Vec::new();
    for i in 0..200u64 {
        let d = pattern(i as u8, 4096);
        cookies.push(c.send(cmd::WRITE, 0, i * 4096, 4096, &d));
    }
    let mut seen: Vec<u64> = (0..200)
        .map(|_| c.recv())
        .map(|(k, e)| {
            assert_eq!(e, 0);
            k
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, cookies, "every write answered once");
    for i in 0..200u64 {
        assert_eq!(c.read(i * 4096, 4096), pattern(i as u8, 4096));
    }
}

#[test]
fn list_info_unknown_and_abort() {
    let r = rig("opts", false);
    let mut s = greet(&r.sock);
    option(&mut s, opt::LIST, &[]);
    let (t, d) = reply(&mut s);
    assert_eq!(t, rep::SERVER);
    assert_eq!(&d[4..8], b"disk");
    assert_eq!(reply(&mut s).0, rep::ACK);
    option(&mut s, 999, b"whatever");
    assert_eq!(reply(&mut s).0, rep::ERR_UNSUP);
    option(&mut s, opt::INFO, &go_payload("nope", &[]));
    assert_eq!(reply(&mut s).0, rep::ERR_UNKNOWN);
    option(&mut s, opt::INFO, &[1, 2]);
    assert_eq!(reply(&mut s).0, rep::ERR_INVALID);
    option(&mut s, opt::ABORT, &[]);
    assert_eq!(reply(&mut s).0, rep::ACK);
}

#[test]
fn read_only_exports_refuse_writes() {
    let r = rig("ro", true);
    let mut c = Client::connect(&r.sock);
    assert!(c.flags & tflag::READ_ONLY != 0);
    assert_eq!(c.call(cmd::WRITE, 0, 0, 512, &[1; 512]), err::EPERM);
    assert_eq!(c.call(cmd::TRIM, 0, 0, 512, &[]), err::EPERM);
    assert_eq!(c.read(0, 512), vec![0; 512]);
}

#[test]
fn multi_conn_flush_makes_writes_visible_everywhere() {
    // nbdkit's pattern: write on one connection, flush on another, read on a third.
    let r = rig("multi", false);
    let mut a = Client::connect(&r.sock);
    let mut b = Client::connect(&r.sock);
    let mut c = Client::connect(&r.sock);
    let d = pattern(99, 8192);
    assert_eq!(a.call(cmd::WRITE, 0, 8192, 8192, &d), 0);
    assert_eq!(b.call(cmd::FLUSH, 0, 0, 0, &[]), 0);
    assert_eq!(c.read(8192, 8192), d);
    // FUA on one, read on another.
    let e = pattern(3, 4096);
    assert_eq!(c.call(cmd::WRITE, cflag::FUA, 0, 4096, &e), 0);
    assert_eq!(a.read(0, 4096), e);
}

#[test]
fn bad_clients_only_hurt_themselves() {
    let r = rig("bad", false);
    let mut good = Client::connect(&r.sock);
    // A bad option magic: that client is dropped.
    let mut s = greet(&r.sock);
    s.write_all(&[0xde; 16]).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "disconnected");
    // Bad client flags.
    let mut s = UnixStream::connect(&r.sock).unwrap();
    read_n(&mut s, 18);
    s.write_all(&0xffff_0000u32.to_be_bytes()).unwrap();
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    // A client that sends a write header and half its data, then vanishes.
    let mut v = Client::connect(&r.sock);
    v.send(cmd::WRITE, 0, 0, 65536, &[7; 1000]);
    drop(v);
    // A client that leaves with requests in flight.
    let mut w = Client::connect(&r.sock);
    for i in 0..50 {
        w.send(cmd::READ, 0, i * 65536, 65536, &[]);
    }
    drop(w);
    // A garbage request header.
    let mut g = Client::connect(&r.sock);
    g.s.write_all(&[0x55; 28]).unwrap();
    assert_eq!(g.s.read(&mut buf).unwrap_or(0), 0);
    // Random bytes at every stage, from a fixed seed.
    let mut x = 0x1234_5678u64;
    for _ in 0..50 {
        let mut s = UnixStream::connect(&r.sock).unwrap();
        let junk: Vec<u8> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let _ = s.write_all(&junk);
    }
    // The good client never noticed.
    let d = pattern(1, 4096);
    assert_eq!(good.call(cmd::WRITE, 0, 0, 4096, &d), 0);
    assert_eq!(good.read(0, 4096), d);
    good.disconnect();
    // Every connection ends; nothing stays allocated.
    let t0 = std::time::Instant::now();
    while r.server.active() > 0 {
        assert!(t0.elapsed().as_secs() < 20, "connections did not end");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(r.queue.nr_allocated(), 0, "no tag leaked");
}

/// A client that pipelines far more than the server holds and vanishes without reading a
/// reply: each time the connection ends, with its software queue, its tags and its slot
/// given back, however its reader and I/O sides were stuck; more such clients than the
/// export has slots leave it serving, and the server still stops.
#[test]
fn clients_that_pipeline_and_vanish_leak_nothing() {
    let r = rig("vanish", false);
    for round in 0..12 {
        let mut v = Client::connect(&r.sock);
        // 2,000 reads of 64 KiB: 125 MiB of replies, past both the request channel and the
        // connection's byte bound, while the socket's buffer takes a fraction of them.
        let mut burst = Vec::new();
        for i in 0..2000u64 {
            let req = Request {
                flags: 0,
                kind: cmd::READ,
                cookie: i + 1,
                offset: (i % 512) * 65536,
                length: 65536,
            };
            burst.extend_from_slice(&proto::encode_request(&req));
        }
        let _ = v.s.write_all(&burst);
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(v);
        let t0 = std::time::Instant::now();
        while r.server.active() > 0 {
            assert!(
                t0.elapsed().as_secs() < 10,
                "round {round}: the connection did not end"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    assert_eq!(r.queue.nr_allocated(), 0, "no tag leaked");
    let mut good = Client::connect(&r.sock);
    let d = pattern(3, 4096);
    assert_eq!(good.call(cmd::WRITE, 0, 0, 4096, &d), 0);
    assert_eq!(good.read(0, 4096), d);
    good.disconnect();
}

/// An export takes exactly its `max-connections` sessions: one more is told so during its
/// handshake (NBD_REP_ERR_POLICY on GO) and gets in once a session ends. Clients that
/// connect and never negotiate hold no session, and sessions do not count against the
/// handshake bound.
#[test]
fn sessions_are_bounded_per_export_and_idle_clients_hold_none() {
    // A handshake bound of five: two clients that never start theirs, and room for the
    // others' (a handshake counts until its thread has moved on, a moment after the ACK).
    let r = rig_with("admit", false, 2, 5);
    let idle: Vec<UnixStream> = (0..2)
        .map(|_| UnixStream::connect(&r.sock).unwrap())
        .collect();
    let a = Client::connect(&r.sock);
    let mut b = Client::connect(&r.sock);
    let mut s = greet(&r.sock);
    option(&mut s, opt::GO, &go_payload("disk", &[]));
    let (t, msg) = reply(&mut s);
    assert_eq!(t, rep::ERR_POLICY, "{}", String::from_utf8_lossy(&msg));
    // The refused client may still leave politely.
    option(&mut s, opt::ABORT, &[]);
    assert_eq!(reply(&mut s).0, rep::ACK);
    a.disconnect();
    let t0 = std::time::Instant::now();
    // Retry until the slot is back. A try may also find the handshake bound full for a
    // moment (the refused try before it is still closing): it sees the connection end
    // before the greeting, and tries again.
    let mut c = loop {
        if let Some(c) = Client::try_connect(&r.sock, &[info::BLOCK_SIZE]) {
            break c;
        }
        assert!(
            t0.elapsed().as_secs() < 10,
            "the freed session never came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let d = pattern(9, 4096);
    assert_eq!(c.call(cmd::WRITE, 0, 0, 4096, &d), 0);
    assert_eq!(b.read(0, 4096), d);
    drop(idle);
    b.disconnect();
    c.disconnect();
}

/// A write or write-zeroes past the end is out of space (the spec's ENOSPC); a read there
/// is invalid.
#[test]
fn past_the_end_writes_are_enospc() {
    let r = rig("end", false);
    let mut c = Client::connect(&r.sock);
    let end = c.size;
    assert_eq!(c.call(cmd::WRITE, 0, end, 4096, &[1; 4096]), err::ENOSPC);
    assert_eq!(
        c.call(cmd::WRITE_ZEROES, 0, end - 4096, 8192, &[]),
        err::ENOSPC
    );
    assert_eq!(c.call(cmd::READ, 0, end, 4096, &[]), err::EINVAL);
    c.disconnect();
}

/// Clients are told 32 MiB, but one that sends more, up to 64 MiB (nbdkit's bound; the
/// reference suite's `integrityhuge` sends 48 MiB), is served; past that, EINVAL.
#[test]
fn requests_past_the_advertised_maximum_are_served_up_to_64_mib() {
    let r = rig("huge", false);
    let mut c = Client::connect(&r.sock);
    let len = 48 << 20;
    let d: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    assert_eq!(c.call(cmd::WRITE, 0, 4096, len as u32, &d), 0);
    assert!(c.read(4096, len as u32) == d, "48 MiB read back");
    assert_eq!(c.call(cmd::READ, 0, 0, (64 << 20) + 4096, &[]), err::EINVAL);
    c.disconnect();
}

/// A client that did not ask for block sizes may read and write at any byte offset and
/// length (the protocol's default minimum block size is 1): served through whole blocks,
/// changes read-modify-written one at a time, so two connections writing different bytes of
/// one block both land. One that asked keeps to the blocks or gets EINVAL.
#[test]
fn clients_that_did_not_negotiate_sizes_get_byte_granularity() {
    let r = rig("bytes", false);
    let mut a = Client::connect_plain(&r.sock);
    let mut b = Client::connect_plain(&r.sock);
    let mut model = vec![0u8; 3 << 20];
    let d = pattern(5, 1000);
    assert_eq!(a.call(cmd::WRITE, 0, 1, 1000, &d), 0);
    model[1..1001].copy_from_slice(&d);
    // The reference suite's cfgsize read: 1,048,590 bytes at offset 1.
    let c = a.send(cmd::READ, 0, 1, 1_048_590, &[]);
    assert_eq!(a.recv(), (c, 0));
    assert!(read_n(&mut a.s, 1_048_590) == model[1..1_048_591]);
    // Two connections, interleaved single bytes of the same blocks, pipelined.
    let mut cookies = (Vec::new(), Vec::new());
    for i in 0..64u64 {
        let off = 2048 + 2 * i;
        cookies
            .0
            .push(a.send(cmd::WRITE, 0, off, 1, &[i as u8 + 1]));
        cookies
            .1
            .push(b.send(cmd::WRITE, 0, off + 1, 1, &[i as u8 + 101]));
        model[off as usize] = i as u8 + 1;
        model[off as usize + 1] = i as u8 + 101;
    }
    for c in cookies.0 {
        assert_eq!(a.recv(), (c, 0));
    }
    for c in cookies.1 {
        assert_eq!(b.recv(), (c, 0));
    }
    assert_eq!(a.call(cmd::WRITE_ZEROES, 0, 3, 7, &[]), 0);
    model[3..10].fill(0);
    assert_eq!(
        a.call(cmd::TRIM, 0, 100_001, 3, &[]),
        0,
        "a trim inside one block"
    );
    let c = b.send(cmd::READ, 0, 0, 4096, &[]);
    assert_eq!(b.recv(), (c, 0));
    assert!(
        read_n(&mut b.s, 4096) == model[..4096],
        "every byte as written"
    );
    let mut n = Client::connect(&r.sock);
    assert_eq!(n.call(cmd::READ, 0, 1, 512, &[]), err::EINVAL);
    n.disconnect();
    a.disconnect();
    b.disconnect();
}

/// A session with nothing in flight that sends nothing for the idle timeout is closed and
/// its slot given back; one that keeps sending stays.
#[test]
fn idle_sessions_are_closed_and_busy_ones_stay() {
    let r = rig_idle("idle", std::time::Duration::from_secs(1));
    let mut quiet = Client::connect(&r.sock);
    let mut chatty = Client::connect(&r.sock);
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_millis(3500) {
        assert_eq!(chatty.call(cmd::FLUSH, 0, 0, 0, &[]), 0);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let mut b = [0u8; 1];
    quiet
        .s
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    assert_eq!(
        quiet.s.read(&mut b).unwrap_or(0),
        0,
        "the idle session was closed"
    );
    let d = pattern(2, 4096);
    assert_eq!(chatty.call(cmd::WRITE, 0, 0, 4096, &d), 0);
    assert_eq!(chatty.read(0, 4096), d);
    chatty.disconnect();
    let t0 = std::time::Instant::now();
    while r.server.active() > 0 {
        assert!(t0.elapsed().as_secs() < 10, "sessions did not end");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A client that dies at any step of the protocol, by closing or by resetting (unread data
/// left behind), takes nothing with it: every connection ends, no tag or slot stays taken,
/// and a good client is served after each round. Then a soak of 10,000 such connections.
#[test]
fn clients_dying_at_every_protocol_step_leave_nothing_behind() {
    let r = rig("deaths", false);
    fn header(kind: u16, len: u64) -> Vec<u8> {
        proto::encode_request(&Request {
            flags: 0,
            kind,
            cookie: 1,
            offset: 0,
            length: len,
        })
        .to_vec()
    }
    // Each step: what the client sends before it dies.
    type Step = Box<dyn Fn(&PathBuf) -> UnixStream>;
    let steps: Vec<(&str, Step)> = vec![
        ("at connect", Box::new(|p| UnixStream::connect(p).unwrap())),
        (
            "after the greeting",
            Box::new(|p| {
                let mut s = UnixStream::connect(p).unwrap();
                read_n(&mut s, 18);
                s
            }),
        ),
        (
            "mid client flags",
            Box::new(|p| {
                let mut s = UnixStream::connect(p).unwrap();
                read_n(&mut s, 18);
                s.write_all(&[0, 0]).unwrap();
                s
            }),
        ),
        (
            "mid option header",
            Box::new(|p| {
                let mut s = greet(p);
                s.write_all(&proto::IHAVEOPT.to_be_bytes()).unwrap();
                s
            }),
        ),
        (
            "mid option data",
            Box::new(|p| {
                let mut s = greet(p);
                let mut b = proto::IHAVEOPT.to_be_bytes().to_vec();
                b.extend_from_slice(&opt::GO.to_be_bytes());
                b.extend_from_slice(&100u32.to_be_bytes());
                b.extend_from_slice(&[0; 10]);
                s.write_all(&b).unwrap();
                s
            }),
        ),
        (
            "after GO, replies unread",
            Box::new(|p| {
                let mut s = greet(p);
                option(&mut s, opt::GO, &go_payload("disk", &[info::BLOCK_SIZE]));
                s
            }),
        ),
        (
            "mid request header",
            Box::new(|p| {
                let mut c = Client::connect(p);
                c.s.write_all(&header(cmd::READ, 4096)[..10]).unwrap();
                c.s
            }),
        ),
        (
            "mid write payload",
            Box::new(|p| {
                let mut c = Client::connect(p);
                c.s.write_all(&header(cmd::WRITE, 1 << 20)).unwrap();
                c.s.write_all(&[9; 4096]).unwrap();
                c.s
            }),
        ),
        (
            "with reads in flight",
            Box::new(|p| {
                let mut c = Client::connect(p);
                for _ in 0..200 {
                    c.s.write_all(&header(cmd::READ, 1 << 20)).unwrap();
                }
                c.s
            }),
        ),
        (
            "with writes in flight",
            Box::new(|p| {
                let mut c = Client::connect(p);
                for _ in 0..8 {
                    c.s.write_all(&header(cmd::WRITE, 65536)).unwrap();
                    c.s.write_all(&[3; 65536]).unwrap();
                }
                c.s
            }),
        ),
    ];
    let wait_idle = |what: &str| {
        let t0 = std::time::Instant::now();
        while r.server.active() > 0 {
            assert!(
                t0.elapsed().as_secs() < 15,
                "{what}: the connection did not end"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(r.queue.nr_allocated(), 0, "{what}: a tag leaked");
    };
    for (what, step) in &steps {
        for reset in [false, true] {
            let s = step(&r.sock);
            if reset {
                // Unread data in the socket when it closes: the peer sees a reset.
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            drop(s);
            wait_idle(what);
        }
        let mut good = Client::connect(&r.sock);
        assert_eq!(good.call(cmd::FLUSH, 0, 0, 0, &[]), 0, "{what}");
        good.disconnect();
        wait_idle(what);
    }
    // The soak: 10,000 connections dying at the handshake and request steps in turn, a few
    // at a time, and every 500th with I/O in flight.
    let cheap = steps.len() - 3;
    for i in 0..10_000 {
        let k = if i % 500 == 499 {
            cheap + (i / 500) % 3
        } else {
            i % cheap
        };
        let (_, step) = &steps[k];
        drop(step(&r.sock));
        while r.server.active() >= 6 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    wait_idle("the soak");
    let mut good = Client::connect(&r.sock);
    let d = pattern(4, 4096);
    assert_eq!(good.call(cmd::WRITE, 0, 0, 4096, &d), 0);
    assert_eq!(good.read(0, 4096), d);
    good.disconnect();
}

/// Reads a structured (or, with `ext`, extended) reply chunk: (flags, type, cookie, payload).
fn chunk(s: &mut UnixStream, ext: bool) -> (u16, u16, u64, Vec<u8>) {
    if ext {
        let h = read_n(s, 32);
        assert_eq!(
            u32::from_be_bytes(h[..4].try_into().unwrap()),
            proto::EXT_REPLY_MAGIC
        );
        let len = u64::from_be_bytes(h[24..32].try_into().unwrap()) as usize;
        (
            u16::from_be_bytes([h[4], h[5]]),
            u16::from_be_bytes([h[6], h[7]]),
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
            read_n(s, len),
        )
    } else {
        let h = read_n(s, 20);
        assert_eq!(
            u32::from_be_bytes(h[..4].try_into().unwrap()),
            proto::STRUCTURED_REPLY_MAGIC
        );
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        (
            u16::from_be_bytes([h[4], h[5]]),
            u16::from_be_bytes([h[6], h[7]]),
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
            read_n(s, len),
        )
    }
}

fn meta_payload(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        d.extend_from_slice(&(q.len() as u32).to_be_bytes());
        d.extend_from_slice(q.as_bytes());
    }
    d
}

/// Negotiates structured replies (and extended headers with `ext`) and base:allocation.
fn negotiated(sock: &PathBuf, ext: bool) -> (UnixStream, u16) {
    let mut s = greet(sock);
    if ext {
        option(&mut s, opt::EXTENDED_HEADERS, &[]);
        assert_eq!(reply(&mut s).0, rep::ACK);
    }
    option(&mut s, opt::STRUCTURED_REPLY, &[]);
    assert_eq!(reply(&mut s).0, rep::ACK);
    option(&mut s, opt::LIST_META_CONTEXT, &meta_payload("disk", &[]));
    let (t, d) = reply(&mut s);
    assert_eq!(t, rep::META_CONTEXT);
    assert_eq!(&d[4..], proto::BASE_ALLOCATION.as_bytes());
    assert_eq!(reply(&mut s).0, rep::ACK);
    option(
        &mut s,
        opt::SET_META_CONTEXT,
        &meta_payload("disk", &["base:allocation", "qemu:nope"]),
    );
    let (t, d) = reply(&mut s);
    assert_eq!(
        (t, u32::from_be_bytes(d[..4].try_into().unwrap())),
        (rep::META_CONTEXT, proto::BASE_ALLOCATION_ID)
    );
    assert_eq!(reply(&mut s).0, rep::ACK);
    option(&mut s, opt::GO, &go_payload("disk", &[]));
    let mut flags = 0;
    loop {
        let (t, d) = reply(&mut s);
        if t == rep::ACK {
            break;
        }
        if u16::from_be_bytes([d[0], d[1]]) == info::EXPORT {
            flags = u16::from_be_bytes([d[10], d[11]]);
        }
    }
    (s, flags)
}

#[test]
fn structured_replies_and_block_status() {
    use mqblk_nbd::proto::chunk;
    let r = rig("structured", false);
    let (mut s, flags) = negotiated(&r.sock, false);
    assert!(flags & tflag::SEND_DF != 0 && flags & tflag::SEND_FAST_ZERO != 0);
    let d = pattern(5, 8192);
    let w = Request {
        flags: 0,
        kind: cmd::WRITE,
        cookie: 1,
        offset: 4096,
        length: 8192,
    };
    s.write_all(&proto::encode_request(&w)).unwrap();
    s.write_all(&d).unwrap();
    let (f, t, c, p) = chunk(&mut s, false);
    assert_eq!((f, t, c, p.len()), (chunk::FLAG_DONE, chunk::NONE, 1, 0));
    let rd = Request {
        flags: cflag::DF,
        kind: cmd::READ,
        cookie: 2,
        offset: 4096,
        length: 8192,
    };
    s.write_all(&proto::encode_request(&rd)).unwrap();
    let (f, t, c, p) = chunk(&mut s, false);
    assert_eq!((f, t, c), (chunk::FLAG_DONE, chunk::OFFSET_DATA, 2));
    assert_eq!(u64::from_be_bytes(p[..8].try_into().unwrap()), 4096);
    assert_eq!(&p[8..], &d[..]);
    // A read error comes as an ERROR chunk.
    let bad = Request {
        flags: 0,
        kind: cmd::READ,
        cookie: 3,
        offset: 1 << 40,
        length: 512,
    };
    s.write_all(&proto::encode_request(&bad)).unwrap();
    let (_, t, c, p) = chunk(&mut s, false);
    assert_eq!(
        (t, c, u32::from_be_bytes(p[..4].try_into().unwrap())),
        (chunk::ERROR, 3, err::EINVAL)
    );
    let bs = Request {
        flags: 0,
        kind: cmd::BLOCK_STATUS,
        cookie: 4,
        offset: 0,
        length: 1 << 20,
    };
    s.write_all(&proto::encode_request(&bs)).unwrap();
    let (f, t, c, p) = chunk(&mut s, false);
    assert_eq!((f, t, c), (chunk::FLAG_DONE, chunk::BLOCK_STATUS, 4));
    assert_eq!(
        u32::from_be_bytes(p[..4].try_into().unwrap()),
        proto::BASE_ALLOCATION_ID
    );
    // Extents as (length, flags): a hole before the 8 KiB written at 4096, data, a hole.
    let extents = |p: &[u8]| -> Vec<(u32, u32)> {
        p[4..]
            .chunks(8)
            .map(|e| {
                (
                    u32::from_be_bytes(e[..4].try_into().unwrap()),
                    u32::from_be_bytes(e[4..].try_into().unwrap()),
                )
            })
            .collect()
    };
    let hole = proto::state::HOLE | proto::state::ZERO;
    assert_eq!(
        extents(&p),
        vec![(4096, hole), (8192, 0), ((1 << 20) - 12288, hole)]
    );
    let z = Request {
        flags: cflag::FAST_ZERO,
        kind: cmd::WRITE_ZEROES,
        cookie: 5,
        offset: 4096,
        length: 4096,
    };
    s.write_all(&proto::encode_request(&z)).unwrap();
    assert_eq!(chunk(&mut s, false).1, chunk::NONE);
    // The zeroed page is a hole again, joining the one before; REQ_ONE asks for the first
    // extent only.
    let one = Request {
        flags: cflag::REQ_ONE,
        cookie: 6,
        ..bs
    };
    s.write_all(&proto::encode_request(&one)).unwrap();
    let (_, t, c, p) = chunk(&mut s, false);
    assert_eq!((t, c), (chunk::BLOCK_STATUS, 6));
    assert_eq!(extents(&p), vec![(8192, hole)]);
}

#[test]
fn extended_headers_carry_64_bit_lengths() {
    use mqblk_nbd::proto::chunk;
    let r = rig("extended", false);
    let (mut s, _) = negotiated(&r.sock, true);
    let d = pattern(9, 4096);
    let w = Request {
        flags: cflag::PAYLOAD_LEN,
        kind: cmd::WRITE,
        cookie: 7,
        offset: 0,
        length: 4096,
    };
    s.write_all(&proto::encode_ext_request(&w)).unwrap();
    s.write_all(&d).unwrap();
    let (f, t, c, _) = chunk(&mut s, true);
    assert_eq!((f, t, c), (chunk::FLAG_DONE, chunk::NONE, 7));
    let rd = Request {
        flags: 0,
        kind: cmd::READ,
        cookie: 8,
        offset: 0,
        length: 4096,
    };
    s.write_all(&proto::encode_ext_request(&rd)).unwrap();
    let (_, t, c, p) = chunk(&mut s, true);
    assert_eq!((t, c), (chunk::OFFSET_DATA, 8));
    assert_eq!(&p[8..], &d[..]);
    // An effect length above 4 GiB is fine for TRIM-like requests within the export.
    let bs = Request {
        flags: 0,
        kind: cmd::BLOCK_STATUS,
        cookie: 9,
        offset: 0,
        length: 64 << 20,
    };
    s.write_all(&proto::encode_ext_request(&bs)).unwrap();
    let (_, t, c, p) = chunk(&mut s, true);
    assert_eq!((t, c), (chunk::BLOCK_STATUS_EXT, 9));
    // The 4 KiB written are data; the rest of the memory export was never written: a hole
    // that reads as zeroes.
    let u64_at = |i: usize| u64::from_be_bytes(p[i..i + 8].try_into().unwrap());
    assert_eq!(
        u32::from_be_bytes(p[4..8].try_into().unwrap()),
        2,
        "two extents"
    );
    assert_eq!((u64_at(8), u64_at(16)), (4096, 0));
    assert_eq!(
        (u64_at(24), u64_at(32)),
        (
            (64 << 20) - 4096,
            u64::from(proto::state::HOLE | proto::state::ZERO)
        )
    );
    let z = Request {
        flags: 0,
        kind: cmd::WRITE_ZEROES,
        cookie: 10,
        offset: 0,
        length: 64 << 20,
    };
    s.write_all(&proto::encode_ext_request(&z)).unwrap();
    assert_eq!(chunk(&mut s, true).1, chunk::NONE);
}
