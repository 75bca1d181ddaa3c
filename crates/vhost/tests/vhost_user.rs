//! The backend against a front-end of our own: a test client speaking vhost-user over the
//! socket (rust-vmm's `Frontend`), with guest memory in a memfd shared with the server and
//! split virtqueues it lays out itself, as a guest driver would. It checks the requests a
//! Linux guest sends, then what a hostile or broken driver may send (descriptors outside
//! guest memory, chains without a status byte, loops, oversized requests), and that the
//! server answers each with an error status or drops it, keeps serving, leaks no request,
//! takes a second front-end after the first hangs up, and stops when asked.

use mqblk_core::RequestQueue;
use mqblk_device::{DeviceConfig, DriverConfig, NullConfig};
use mqblk_vhost::BlkDevice;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vhost::vhost_user::message::{VhostUserConfigFlags, VhostUserProtocolFeatures};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use virtio_bindings::virtio_blk as vb;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

const MEM_BYTES: u64 = 16 << 20;
const QSIZE: u16 = 256;
const DEV_BYTES: u64 = 8 << 20;
/// Where request buffers start (the rings sit below).
const DATA: u64 = 1 << 20;
const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;
const F_INDIRECT: u16 = 4;
const F_EVENT_IDX: u64 = 1 << 29;

fn device(read_only: bool, nq: u16, threads: u16) -> BlkDevice {
    device_with(read_only, nq, threads, None)
}

/// A memory-backed null device under `scheduler` (`None`: the default).
fn device_with(read_only: bool, nq: u16, threads: u16, scheduler: Option<&str>) -> BlkDevice {
    let opts = DeviceConfig {
        nr_ctx: nq + 1,
        queue: mqblk_device::QueueSettings {
            scheduler: scheduler.map(str::to_string),
            ..Default::default()
        },
        ..DeviceConfig::new(DriverConfig::Null(NullConfig {
            memory_backed: true,
            size_bytes: DEV_BYTES,
            submit_queues: nq,
            ..NullConfig::default()
        }))
    };
    let dev = mqblk_device::build(&opts, nq as usize + 1).expect("device");
    let blk = BlkDevice::new("test", dev.queue, nq, 1024, read_only).expect("blk device");
    blk.with_threads(threads).expect("threads")
}

struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<mqblk_vhost::ServeReport, String>>>,
    dev: Arc<BlkDevice>,
    _dir: TempDir,
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn server(read_only: bool, nq: u16) -> Server {
    server_with_threads(read_only, nq, nq)
}

fn server_with_threads(read_only: bool, nq: u16, threads: u16) -> Server {
    serve_device(device(read_only, nq, threads))
}

fn serve_device(dev: BlkDevice) -> Server {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "mqblk-vhost-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let (listener, _owned) = mqblk_runtime::unix_socket::bind(&path, "test", false).unwrap();
    let dev = Arc::new(dev);
    let stop = Arc::new(AtomicBool::new(false));
    let (d, s) = (dev.clone(), stop.clone());
    let thread = std::thread::spawn(move || mqblk_vhost::serve(d, listener, s));
    Server {
        path,
        stop,
        thread: Some(thread),
        dev,
        _dir: TempDir(dir),
    }
}

impl Server {
    fn stop(&mut self) -> mqblk_vhost::ServeReport {
        self.stop.store(true, Ordering::Release);
        let t = self.thread.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !t.is_finished() {
            assert!(Instant::now() < deadline, "the server did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
        t.join().unwrap().expect("serve")
    }
    fn queue(&self) -> &Arc<RequestQueue> {
        &self.dev.queue
    }
}

/// A guest driver's side: memory, and per queue its ring positions.
struct Guest {
    fe: Frontend,
    mem: GuestMemoryMmap,
    kicks: Vec<EventFd>,
    _calls: Vec<EventFd>,
    next_avail: Vec<u16>,
    last_used: Vec<u16>,
    /// Next free buffer address.
    bump: u64,
    /// Offered chains wait for [`Guest::release`] before the guest publishes them.
    hold: bool,
}

fn ring_base(q: usize) -> u64 {
    q as u64 * 0x20000
}

impl Guest {
    fn connect(path: &Path, nq: usize) -> Guest {
        let mut fe = Frontend::connect(path, nq as u64).expect("connect");
        fe.set_owner().unwrap();
        let features = fe.get_features().unwrap();
        assert_ne!(features & 1 << vb::VIRTIO_BLK_F_MQ, 0);
        fe.set_features(features & !F_EVENT_IDX).unwrap();
        let proto = fe.get_protocol_features().unwrap();
        assert!(proto.contains(VhostUserProtocolFeatures::CONFIG));
        fe.set_protocol_features(proto).unwrap();
        assert_eq!(fe.get_queue_num().unwrap(), nq as u64);
        let memfd =
            nix::sys::memfd::memfd_create(c"guest", nix::sys::memfd::MemFdCreateFlag::empty())
                .unwrap();
        let file = File::from(memfd);
        file.set_len(MEM_BYTES).unwrap();
        let mem = GuestMemoryMmap::<()>::from_ranges_with_files(&[(
            GuestAddress(0),
            MEM_BYTES as usize,
            Some(FileOffset::new(file, 0)),
        )])
        .unwrap();
        let host = mem.get_host_address(GuestAddress(0)).unwrap() as u64;
        let region = mem.find_region(GuestAddress(0)).unwrap();
        let info = VhostUserMemoryRegionInfo::from_guest_region(region).unwrap();
        fe.set_mem_table(&[info]).unwrap();
        let (mut kicks, mut calls) = (Vec::new(), Vec::new());
        for q in 0..nq {
            let b = ring_base(q);
            fe.set_vring_num(q, QSIZE).unwrap();
            fe.set_vring_addr(
                q,
                &VringConfigData {
                    queue_max_size: QSIZE,
                    queue_size: QSIZE,
                    flags: 0,
                    desc_table_addr: host + b,
                    used_ring_addr: host + b + 0x8000,
                    avail_ring_addr: host + b + 0x4000,
                    log_addr: None,
                },
            )
            .unwrap();
            fe.set_vring_base(q, 0).unwrap();
            let kick = EventFd::new(0).unwrap();
            let call = EventFd::new(0).unwrap();
            fe.set_vring_kick(q, &kick).unwrap();
            fe.set_vring_call(q, &call).unwrap();
            fe.set_vring_enable(q, true).unwrap();
            kicks.push(kick);
            calls.push(call);
        }
        Guest {
            fe,
            mem,
            kicks,
            _calls: calls,
            next_avail: vec![0; nq],
            last_used: vec![0; nq],
            bump: DATA,
            hold: false,
        }
    }

    fn config(&mut self) -> Vec<u8> {
        let (_, data) = self
            .fe
            .get_config(0, 60, VhostUserConfigFlags::WRITABLE, &[0u8; 60])
            .unwrap();
        data
    }

    /// A buffer in guest memory holding `bytes`.
    fn buf(&mut self, bytes: &[u8]) -> u64 {
        let at = self.bump;
        self.bump += (bytes.len() as u64).div_ceil(64) * 64 + 64;
        assert!(self.bump < MEM_BYTES, "test ran out of guest memory");
        self.mem.write_slice(bytes, GuestAddress(at)).unwrap();
        at
    }

    /// Writes descriptors `first..` as one chain (or exactly as given with `raw`), offers
    /// the chain's head and kicks.
    fn offer(&mut self, q: usize, descs: &[(u64, u32, u16, u16)]) -> u16 {
        let b = ring_base(q);
        let first = (self.next_avail[q] as usize * 8 % QSIZE as usize) as u16;
        for (i, &(addr, len, flags, next)) in descs.iter().enumerate() {
            let at = b + (first as u64 + i as u64) * 16;
            self.mem.write_obj(addr, GuestAddress(at)).unwrap();
            self.mem.write_obj(len, GuestAddress(at + 8)).unwrap();
            self.mem.write_obj(flags, GuestAddress(at + 12)).unwrap();
            let next = if flags & F_NEXT != 0 && next == u16::MAX {
                first + i as u16 + 1
            } else {
                next
            };
            self.mem.write_obj(next, GuestAddress(at + 14)).unwrap();
        }
        let idx = self.next_avail[q];
        let avail = b + 0x4000;
        self.mem
            .write_obj(first, GuestAddress(avail + 4 + (idx % QSIZE) as u64 * 2))
            .unwrap();
        self.next_avail[q] = idx.wrapping_add(1);
        if !self.hold {
            self.release(q);
        }
        first
    }

    /// Publishes every chain offered on queue `q` (the avail index) and kicks.
    fn release(&mut self, q: usize) {
        let avail = ring_base(q) + 0x4000;
        self.mem
            .write_obj(self.next_avail[q], GuestAddress(avail + 2))
            .unwrap();
        self.kicks[q].write(1).unwrap();
    }

    /// Waits for the next used entry of queue `q`: (head, bytes written).
    fn used(&mut self, q: usize) -> (u16, u32) {
        let used = ring_base(q) + 0x8000;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let idx: u16 = self.mem.read_obj(GuestAddress(used + 2)).unwrap();
            if idx != self.last_used[q] {
                break;
            }
            assert!(Instant::now() < deadline, "no used entry on queue {q}");
            std::thread::sleep(Duration::from_millis(1));
        }
        let slot = used + 4 + (self.last_used[q] % QSIZE) as u64 * 8;
        self.last_used[q] = self.last_used[q].wrapping_add(1);
        (
            self.mem.read_obj::<u32>(GuestAddress(slot)).unwrap() as u16,
            self.mem.read_obj(GuestAddress(slot + 4)).unwrap(),
        )
    }

    /// A well-formed request: header, then `out` data, then `inn` bytes of room and the
    /// status byte. Returns (status, used length, the bytes read).
    fn request(
        &mut self,
        q: usize,
        kind: u32,
        sector: u64,
        out: &[u8],
        inn: u32,
    ) -> (u8, u32, Vec<u8>) {
        let mut h = Vec::new();
        h.extend_from_slice(&kind.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&sector.to_le_bytes());
        let hdr = self.buf(&h);
        let mut descs = vec![(hdr, 16, F_NEXT, u16::MAX)];
        if !out.is_empty() {
            let d = self.buf(out);
            descs.push((d, out.len() as u32, F_NEXT, u16::MAX));
        }
        let room = self.buf(&vec![0xeeu8; inn as usize]);
        if inn > 0 {
            descs.push((room, inn, F_NEXT | F_WRITE, u16::MAX));
        }
        let status = self.buf(&[0xff]);
        descs.push((status, 1, F_WRITE, 0));
        let head = self.offer(q, &descs);
        let (id, len) = self.used(q);
        assert_eq!(id, head);
        let mut data = vec![0u8; inn as usize];
        self.mem.read_slice(&mut data, GuestAddress(room)).unwrap();
        let s: u8 = self.mem.read_obj(GuestAddress(status)).unwrap();
        (s, len, data)
    }
}

fn range(sector: u64, n: u32, flags: u32) -> Vec<u8> {
    [
        sector.to_le_bytes().as_slice(),
        &n.to_le_bytes(),
        &flags.to_le_bytes(),
    ]
    .concat()
}

#[test]
fn a_guest_driver_reads_what_it_wrote_on_every_queue() {
    reads_what_it_wrote(server(false, 2));
}

#[test]
fn one_thread_serves_every_virtqueue_as_qemus_dataplane_does() {
    let s = server_with_threads(false, 4, 1);
    assert_eq!(s.dev.threads, 1);
    reads_what_it_wrote(s);
}

fn reads_what_it_wrote(mut s: Server) {
    let nq = s.dev.geometry.num_queues as usize;
    let mut g = Guest::connect(&s.path, nq);
    let cfg = g.config();
    assert_eq!(&cfg[0..8], &(DEV_BYTES / 512).to_le_bytes(), "capacity");
    assert_eq!(&cfg[34..36], &(nq as u16).to_le_bytes(), "num_queues");
    for q in 0..nq {
        let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 7 + q as u32) as u8).collect();
        let sector = 64 + q as u64 * 16;
        let (st, len, _) = g.request(q, vb::VIRTIO_BLK_T_OUT, sector, &pattern, 0);
        assert_eq!((st, len), (0, 1), "write on queue {q}");
        let (st, len, back) = g.request(q, vb::VIRTIO_BLK_T_IN, sector, &[], 8192);
        assert_eq!((st, len), (0, 8193), "read on queue {q}");
        assert_eq!(back, pattern, "data read back on queue {q}");
    }
    assert_eq!(g.request(0, vb::VIRTIO_BLK_T_FLUSH, 0, &[], 0).0, 0);
    let (st, len, id) = g.request(1, vb::VIRTIO_BLK_T_GET_ID, 0, &[], 20);
    assert_eq!((st, len), (0, 21));
    assert_eq!(&id[..11], b"mqblk-test\0");
    // WRITE_ZEROES over what was written reads back as zeroes.
    let (st, _, _) = g.request(0, vb::VIRTIO_BLK_T_WRITE_ZEROES, 0, &range(64, 16, 0), 0);
    assert_eq!(st, 0);
    let (st, _, back) = g.request(0, vb::VIRTIO_BLK_T_IN, 64, &[], 8192);
    assert_eq!(st, 0);
    assert!(back.iter().all(|&b| b == 0), "write-zeroes left data");
    // Both virtqueues carried requests, each through its own software queue.
    let stats = s.dev.stats();
    assert!(stats.iter().all(|v| v.requests >= 2), "{stats:?}");
    assert_ne!(stats[0].hctx, stats[1].hctx, "{stats:?}");
    drop(g);
    s.stop();
    assert_eq!(s.queue().nr_allocated(), 0, "requests left allocated");
}

#[test]
fn malformed_requests_get_an_error_and_the_server_keeps_serving() {
    let mut s = server(false, 1);
    let mut g = Guest::connect(&s.path, 1);
    let io = |g: &mut Guest, kind, sector, out: &[u8], inn| g.request(0, kind, sector, out, inn);
    // Past the end, not in whole sectors, too large, an unknown type, bad ranges.
    assert_eq!(
        io(&mut g, vb::VIRTIO_BLK_T_IN, DEV_BYTES / 512, &[], 512).0,
        1
    );
    assert_eq!(io(&mut g, vb::VIRTIO_BLK_T_OUT, 0, &[1; 100], 0).0, 1);
    assert_eq!(io(&mut g, vb::VIRTIO_BLK_T_IN, u64::MAX - 1, &[], 512).0, 1);
    assert_eq!(io(&mut g, 77, 0, &[], 0).0, 2);
    assert_eq!(
        io(&mut g, vb::VIRTIO_BLK_T_DISCARD, 0, &range(0, 8, 1), 0).0,
        2
    );
    assert_eq!(
        io(
            &mut g,
            vb::VIRTIO_BLK_T_DISCARD,
            0,
            &range(u64::MAX, 8, 0),
            0
        )
        .0,
        1
    );
    assert_eq!(io(&mut g, vb::VIRTIO_BLK_T_DISCARD, 0, &[0; 5], 0).0, 1);
    // A 64 MiB read is refused before anything is allocated for it.
    let hdr = g.buf(&[0u8; 16]);
    let st = g.buf(&[0xff]);
    g.offer(
        0,
        &[
            (hdr, 16, F_NEXT, u16::MAX),
            (DATA, 64 << 20, F_NEXT | F_WRITE, u16::MAX),
            (st, 1, F_WRITE, 0),
        ],
    );
    g.used(0);
    assert_eq!(g.mem.read_obj::<u8>(GuestAddress(st)).unwrap(), 1);

    // The header outside guest memory: IOERR in the status byte.
    let st = g.buf(&[0xff]);
    g.offer(
        0,
        &[
            (MEM_BYTES + 4096, 16, F_NEXT, u16::MAX),
            (st, 1, F_WRITE, 0),
        ],
    );
    g.used(0);
    assert_eq!(g.mem.read_obj::<u8>(GuestAddress(st)).unwrap(), 1);
    // A read whose buffer is outside guest memory: IOERR, nothing written there.
    let mut h = vec![0u8; 16];
    h[8] = 8;
    let hdr = g.buf(&h);
    let st = g.buf(&[0xff]);
    g.offer(
        0,
        &[
            (hdr, 16, F_NEXT, u16::MAX),
            (u64::MAX - 100, 512, F_NEXT | F_WRITE, u16::MAX),
            (st, 1, F_WRITE, 0),
        ],
    );
    g.used(0);
    assert_eq!(g.mem.read_obj::<u8>(GuestAddress(st)).unwrap(), 1);
    // The status byte itself outside guest memory: returned with nothing written.
    let hdr = g.buf(&[0u8; 16]);
    g.offer(
        0,
        &[(hdr, 16, F_NEXT, u16::MAX), (MEM_BYTES, 1, F_WRITE, 0)],
    );
    assert_eq!(g.used(0).1, 0);
    // No writable descriptor at all: returned with nothing written.
    let hdr = g.buf(&[0u8; 16]);
    g.offer(0, &[(hdr, 16, 0, 0)]);
    assert_eq!(g.used(0).1, 0);
    // A chain whose `next` loops back onto itself ends at the ring size, not forever.
    let hdr = g.buf(&[0u8; 16]);
    let first = (g.next_avail[0] as usize * 8 % QSIZE as usize) as u16;
    g.offer(0, &[(hdr, 16, F_NEXT, first)]);
    assert_eq!(g.used(0).1, 0);
    // An indirect table of a length that is not whole descriptors.
    let table = g.buf(&[0u8; 40]);
    g.offer(0, &[(table, 40, F_INDIRECT, 0)]);
    assert_eq!(g.used(0).1, 0);

    // Still serving: a good request after all of that.
    let data = vec![0x5au8; 4096];
    assert_eq!(io(&mut g, vb::VIRTIO_BLK_T_OUT, 8, &data, 0).0, 0);
    let (st, _, back) = io(&mut g, vb::VIRTIO_BLK_T_IN, 8, &[], 4096);
    assert_eq!((st, back), (0, data));
    let errors: u64 = s.dev.stats().iter().map(|v| v.errors).sum();
    assert_eq!(errors, 14, "{:?}", s.dev.stats());
    drop(g);
    s.stop();
    assert_eq!(s.queue().nr_allocated(), 0);
}

#[test]
fn a_read_only_device_refuses_changes() {
    let mut s = server(true, 1);
    let mut g = Guest::connect(&s.path, 1);
    let f = g.fe.get_features().unwrap();
    assert_ne!(f & 1 << vb::VIRTIO_BLK_F_RO, 0);
    assert_eq!(g.request(0, vb::VIRTIO_BLK_T_OUT, 0, &[1; 512], 0).0, 1);
    assert_eq!(
        g.request(0, vb::VIRTIO_BLK_T_WRITE_ZEROES, 0, &range(0, 8, 0), 0)
            .0,
        1
    );
    assert_eq!(g.request(0, vb::VIRTIO_BLK_T_IN, 0, &[], 512).0, 0);
    drop(g);
    s.stop();
}

#[test]
fn a_second_front_end_is_served_after_the_first_hangs_up_and_the_data_stays() {
    let mut s = server(false, 2);
    let mut g = Guest::connect(&s.path, 2);
    let data = vec![0xa7u8; 4096];
    assert_eq!(g.request(1, vb::VIRTIO_BLK_T_OUT, 800, &data, 0).0, 0);
    // Requests offered and never waited for: the front-end vanishes with them in the ring.
    for _ in 0..8 {
        let h = g.buf(&[0u8; 16]);
        let room = g.buf(&[0u8; 4096]);
        let st = g.buf(&[0xff]);
        g.offer(
            0,
            &[
                (h, 16, F_NEXT, u16::MAX),
                (room, 4096, F_NEXT | F_WRITE, u16::MAX),
                (st, 1, F_WRITE, 0),
            ],
        );
    }
    drop(g);
    let mut g = Guest::connect(&s.path, 2);
    let (st, _, back) = g.request(0, vb::VIRTIO_BLK_T_IN, 800, &[], 4096);
    assert_eq!((st, back), (0, data));
    drop(g);
    let report = s.stop();
    assert_eq!(report.connections, 2);
    assert_eq!(s.queue().nr_allocated(), 0);
}

#[test]
fn stop_ends_a_connected_front_end_and_the_socket_stays_the_callers() {
    let mut s = server(false, 1);
    let mut g = Guest::connect(&s.path, 1);
    assert_eq!(g.request(0, vb::VIRTIO_BLK_T_FLUSH, 0, &[], 0).0, 0);
    // The front-end is still connected when the server is told to stop.
    let report = s.stop();
    assert_eq!(report.connections, 1);
    assert!(
        g.fe.get_features().is_err(),
        "the connection outlived the server"
    );
    assert!(s.path.exists(), "serve removed a socket it does not own");
}

/// The heads of `n` 4 KiB requests offered on queue 0 at once, writes and then reads, and
/// the heads in the order the server returned them, under mq-deadline (which dispatches
/// the reads first, so they complete before writes made available earlier).
fn answer_order(in_order: bool, n: usize) -> (Vec<u16>, Vec<u16>) {
    let mut s = serve_device(device_with(false, 1, 1, Some("mq-deadline")).with_in_order(in_order));
    let mut g = Guest::connect(&s.path, 1);
    let mut offered = Vec::new();
    // All at once: the server takes them in one pass, with all of them in flight.
    g.hold = true;
    for i in 0..n {
        let write = i < n / 2;
        let kind = if write {
            vb::VIRTIO_BLK_T_OUT
        } else {
            vb::VIRTIO_BLK_T_IN
        };
        let mut h = Vec::new();
        h.extend_from_slice(&kind.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&(i as u64 * 64).to_le_bytes());
        let hdr = g.buf(&h);
        let data = g.buf(&[0x5au8; 4096]);
        let st = g.buf(&[0xff]);
        let flags = if write { F_NEXT } else { F_NEXT | F_WRITE };
        offered.push(g.offer(
            0,
            &[
                (hdr, 16, F_NEXT, u16::MAX),
                (data, 4096, flags, u16::MAX),
                (st, 1, F_WRITE, 0),
            ],
        ));
    }
    g.release(0);
    let answered = (0..n).map(|_| g.used(0).0).collect();
    drop(g);
    s.stop();
    assert_eq!(s.queue().nr_allocated(), 0);
    (offered, answered)
}

/// `--in-order`: whatever order the requests complete in, the guest gets them back in the
/// order it made them available, so the used index marks where a restarted server resumes.
#[test]
fn in_order_answers_requests_in_the_order_offered_though_they_complete_out_of_order() {
    // 32 chains of 8 descriptors fill the 256-entry ring.
    let (offered, answered) = answer_order(false, 32);
    let mut sorted = answered.clone();
    sorted.sort_unstable();
    let mut want = offered.clone();
    want.sort_unstable();
    assert_eq!(sorted, want, "every request answered once");
    assert_ne!(
        answered, offered,
        "the reads did not overtake the writes: the check below would prove nothing"
    );
    let (offered, answered) = answer_order(true, 32);
    assert_eq!(answered, offered);
}

/// A host-managed zoned device (null_blk's zoned mode: 8 zones of 1 MiB, the first
/// conventional, two open at most) answers the zone commands as Linux's virtio_blk sends
/// them (`virtblk_setup_cmd`, `virtblk_report_zones`): the feature and the zoned
/// configuration, a report, writes at the write pointer only, a zone append that says where
/// it went, open, finish, reset and reset-all, with the zone statuses of virtio 1.2.
#[test]
fn a_zoned_device_answers_the_zone_commands_a_linux_guest_sends() {
    const ZONE: u64 = 2048;
    let opts = DeviceConfig {
        nr_ctx: 2,
        queue: mqblk_device::QueueSettings {
            scheduler: Some("mq-deadline".into()),
            ..Default::default()
        },
        ..DeviceConfig::new(DriverConfig::Null(NullConfig {
            memory_backed: true,
            size_bytes: DEV_BYTES,
            zoned: true,
            zone: mqblk_core::ZonedDevConfig {
                zone_sectors: ZONE,
                nr_conv: 1,
                max_open: 2,
                ..Default::default()
            },
            ..NullConfig::default()
        }))
    };
    let dev = mqblk_device::build(&opts, 2).expect("device");
    let blk = BlkDevice::new("zoned", dev.queue, 1, 1024, false).expect("blk device");
    let mut s = serve_device(blk);
    let fe = Frontend::connect(&s.path, 1).expect("connect");
    fe.set_owner().unwrap();
    let features = fe.get_features().unwrap();
    assert_ne!(features & 1 << vb::VIRTIO_BLK_F_ZONED, 0, "{features:#x}");
    assert_eq!(features & 1 << vb::VIRTIO_BLK_F_DISCARD, 0, "{features:#x}");
    drop(fe);
    let mut g = Guest::connect(&s.path, 1);
    let (_, cfg) =
        g.fe.get_config(0, 96, VhostUserConfigFlags::WRITABLE, &[0u8; 96])
            .unwrap();
    let u32_at = |at: usize| u32::from_le_bytes(cfg[at..at + 4].try_into().unwrap());
    assert_eq!(u32_at(72), ZONE as u32, "zone_sectors");
    assert_eq!((u32_at(76), u32_at(80)), (2, 0), "max open, max active");
    assert!(u32_at(84) > 0, "max_append_sectors");
    assert_eq!(u32_at(88), 512, "write_granularity");
    assert_eq!(cfg[92], vb::VIRTIO_BLK_Z_HM as u8, "model");

    // A report of every zone: the conventional one, then seven empty ones.
    let report = |g: &mut Guest, sector: u64, n: u32| {
        let (st, _, b) = g.request(0, vb::VIRTIO_BLK_T_ZONE_REPORT, sector, &[], 64 + 64 * n);
        assert_eq!(st, 0, "report from {sector}");
        let nr = u64::from_le_bytes(b[0..8].try_into().unwrap()) as usize;
        (0..nr)
            .map(|i| {
                let d = &b[64 + i * 64..128 + i * 64];
                let w = |o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap());
                (w(8), w(16), d[24] as u32, d[25] as u32) // start, wp, type, state
            })
            .collect::<Vec<_>>()
    };
    let all = report(&mut g, 0, 16);
    assert_eq!(all.len(), 8);
    assert_eq!(
        (all[0].2, all[0].3),
        (vb::VIRTIO_BLK_ZT_CONV, vb::VIRTIO_BLK_ZS_NOT_WP)
    );
    for (i, z) in all.iter().enumerate().skip(1) {
        assert_eq!(
            *z,
            (
                i as u64 * ZONE,
                i as u64 * ZONE,
                vb::VIRTIO_BLK_ZT_SWR,
                vb::VIRTIO_BLK_ZS_EMPTY
            )
        );
    }
    assert_eq!(
        report(&mut g, 3 * ZONE + 5, 2).len(),
        2,
        "a report starts at the zone of its sector"
    );

    // Writes at the write pointer only; a zone append goes to it and says where.
    let data = vec![0x3cu8; 4096];
    assert_eq!(g.request(0, vb::VIRTIO_BLK_T_OUT, ZONE, &data, 0).0, 0);
    assert_eq!(
        g.request(0, vb::VIRTIO_BLK_T_OUT, ZONE, &data, 0).0,
        vb::VIRTIO_BLK_S_IOERR as u8
    );
    let appended = vec![0xa5u8; 4096];
    let (st, len, at) = g.request(0, vb::VIRTIO_BLK_T_ZONE_APPEND, ZONE, &appended, 8);
    assert_eq!((st, len), (0, 9));
    assert_eq!(
        u64::from_le_bytes(at.try_into().unwrap()),
        ZONE + 8,
        "where the append went"
    );
    let (st, _, back) = g.request(0, vb::VIRTIO_BLK_T_IN, ZONE + 8, &[], 4096);
    assert_eq!((st, back), (0, appended));
    assert_eq!(
        report(&mut g, ZONE, 1)[0],
        (
            ZONE,
            ZONE + 16,
            vb::VIRTIO_BLK_ZT_SWR,
            vb::VIRTIO_BLK_ZS_IOPEN
        )
    );

    // Open limits: two zones open at most; an implicitly open zone gives way, explicit ones
    // do not.
    let cmd = |g: &mut Guest, kind, sector| g.request(0, kind, sector, &[], 0).0;
    assert_eq!(cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_OPEN, 2 * ZONE), 0);
    assert_eq!(cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_OPEN, 3 * ZONE), 0);
    assert_eq!(
        cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_OPEN, 4 * ZONE),
        vb::VIRTIO_BLK_S_ZONE_OPEN_RESOURCE as u8
    );
    assert_eq!(report(&mut g, ZONE, 1)[0].3, vb::VIRTIO_BLK_ZS_CLOSED);
    assert_eq!(
        cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_OPEN, 2 * ZONE + 1),
        vb::VIRTIO_BLK_S_ZONE_INVALID_CMD as u8
    );
    assert_eq!(
        cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_RESET, 0),
        vb::VIRTIO_BLK_S_ZONE_INVALID_CMD as u8,
        "a conventional zone has no write pointer"
    );
    // A zone append longer than max_append_sectors, as QEMU answers it.
    let too_long = vec![0u8; (u32_at(84) as usize + 8) * 512];
    assert_eq!(
        g.request(0, vb::VIRTIO_BLK_T_ZONE_APPEND, 2 * ZONE, &too_long, 8)
            .0,
        vb::VIRTIO_BLK_S_ZONE_INVALID_CMD as u8
    );
    // Finish fills a zone; reset empties one; reset-all empties every one.
    assert_eq!(cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_FINISH, 2 * ZONE), 0);
    assert_eq!(report(&mut g, 2 * ZONE, 1)[0].3, vb::VIRTIO_BLK_ZS_FULL);
    assert_eq!(cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_RESET, ZONE), 0);
    assert_eq!(
        report(&mut g, ZONE, 1)[0],
        (ZONE, ZONE, vb::VIRTIO_BLK_ZT_SWR, vb::VIRTIO_BLK_ZS_EMPTY)
    );
    assert_eq!(
        g.request(0, vb::VIRTIO_BLK_T_OUT, ZONE, &data, 0).0,
        0,
        "written again from its start"
    );
    assert_eq!(cmd(&mut g, vb::VIRTIO_BLK_T_ZONE_RESET_ALL, 0), 0);
    assert!(report(&mut g, ZONE, 7)
        .iter()
        .all(|z| z.3 == vb::VIRTIO_BLK_ZS_EMPTY && z.1 == z.0));
    drop(g);
    s.stop();
    assert_eq!(s.queue().nr_allocated(), 0);

    // A device that is not zoned knows no zone command.
    let mut s = server(false, 1);
    let mut g = Guest::connect(&s.path, 1);
    assert_eq!(
        g.request(0, vb::VIRTIO_BLK_T_ZONE_REPORT, 0, &[], 128).0,
        vb::VIRTIO_BLK_S_UNSUPP as u8
    );
    drop(g);
    s.stop();
}
