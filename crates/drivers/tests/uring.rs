//! The io_uring driver through a real `RequestQueue`, on real files and loop devices: data
//! integrity (direct and buffered, several hardware queues, merged requests, flushes,
//! discard and write-zeroes), errors as values (read-only, a full file system, a file or
//! device that shrank under us), and configuration checks.
//!
//! Tests needing privileges (losetup, mount) print why they skip when they cannot run.

use mqblk_core::{
    Bio, BlkStatus, CtxIdx, Driver, HctxIdx, IoBuf, Nanos, QueueConfig, ReqFlags, ReqOp,
    RequestQueue, Submit, Submitter, TagSet,
};
use mqblk_drivers::{BackingKind, UringConfig, UringDevice, UringError, OWNED_RINGS};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// How long any one wait for completions may take before the test fails: real I/O on a
/// local file takes microseconds, so this only bounds a hang.
const DEADLINE: Duration = Duration::from_secs(30);

/// A small deterministic generator for test data and offsets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        for chunk in v.chunks_mut(8) {
            let x = self.next().to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
        v
    }
}

// ----- scratch files, loop devices, tmpfs ------------------------------------------------------

/// A directory under the system temp dir, removed with everything in it on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqblk-uring-{}-{}-{name}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a command; `Err` carries a one-line reason (not installed, or its stderr).
fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd} not runnable: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A loop device over a file, detached on drop unless the test detached it.
struct LoopDev {
    dev: String,
    /// Detached once already. Detaching again could hit another test's device: once ours is
    /// gone, `losetup -f` hands its number to the next caller.
    detached: bool,
}

impl LoopDev {
    fn attach(backing: &Path) -> Result<LoopDev, String> {
        let dev = run("losetup", &["-f", "--show", backing.to_str().unwrap()])?;
        Ok(LoopDev {
            dev,
            detached: false,
        })
    }
    fn path(&self) -> PathBuf {
        PathBuf::from(&self.dev)
    }
    fn detach(&mut self) -> Result<String, String> {
        self.detached = true;
        run("losetup", &["-d", &self.dev])
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.detach();
        }
    }
}

/// A loop device over a fresh file of `size` bytes, or why there is none.
fn loop_device(dir: &TempDir, size: u64) -> Result<LoopDev, String> {
    let backing = dir.file("backing.img");
    std::fs::File::create(&backing)
        .and_then(|f| f.set_len(size))
        .map_err(|e| format!("backing file: {e}"))?;
    LoopDev::attach(&backing)
}

/// A tmpfs of a given size mounted on a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: TempDir,
}

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Result<Tmpfs, String> {
        let dir = TempDir::new(name);
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
                dir.0.to_str().unwrap(),
            ],
        )?;
        Ok(Tmpfs { dir })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if run("umount", &[self.dir.0.to_str().unwrap()]).is_err() {
            let _ = run("umount", &["-l", self.dir.0.to_str().unwrap()]);
        }
    }
}

/// Says why a test did not run (a mount or loop device this machine refuses), on a line
/// `bash scripts/test` counts.
fn skip(test: &str, why: &str) {
    mqblk_testkit::skip(test, why);
}

// ----- the rig ---------------------------------------------------------------------------------

struct Rig {
    q: Arc<RequestQueue>,
    subs: Vec<Submitter>,
    dev: Arc<UringDevice>,
    now: Nanos,
}

fn rig_ctx(cfg: UringConfig, nr_ctx: u16) -> Rig {
    let set = TagSet::new(cfg.tag_set_config()).unwrap();
    let dev = UringDevice::open(cfg).unwrap();
    let q = RequestQueue::new(
        set,
        dev.clone(),
        None,
        QueueConfig {
            nr_ctx,
            limits: dev.queue_limits(),
            ..Default::default()
        },
    )
    .unwrap();
    let subs = (0..nr_ctx).map(|c| q.submitter(CtxIdx(c))).collect();
    Rig {
        q,
        subs,
        dev,
        now: Nanos(1_000),
    }
}

fn rig(cfg: UringConfig) -> Rig {
    rig_ctx(cfg, 1)
}

fn file_cfg(path: PathBuf, size: u64, direct: bool) -> UringConfig {
    UringConfig {
        path,
        direct,
        size_bytes: Some(size),
        ..Default::default()
    }
}

fn write_bio(sector: u64, data: &[u8]) -> Bio {
    let mut buf = IoBuf::new(data.len());
    buf.as_mut_slice().copy_from_slice(data);
    Bio::new(ReqOp::Write, sector, (data.len() / 512) as u32).with_buf(buf)
}

fn read_bio(sector: u64, nr_sectors: u32) -> Bio {
    let mut buf = IoBuf::new(nr_sectors as usize * 512);
    // Poison, so a read that leaves the buffer alone cannot pass for zeroes or old data.
    buf.as_mut_slice().fill(0x5a);
    Bio::new(ReqOp::Read, sector, nr_sectors).with_buf(buf)
}

/// Polls submitter `c` until `n` bios are back in its `done`, advancing a virtual clock
/// (so the core's delayed runs come due) and failing after `DEADLINE` of real time.
fn wait_for(q: &RequestQueue, sub: &mut Submitter, now: &mut Nanos, n: usize) {
    let start = Instant::now();
    while sub.done.len() < n {
        assert!(
            start.elapsed() < DEADLINE,
            "{} of {n} bios back after {DEADLINE:?}:\n{}",
            sub.done.len(),
            q.debug_state()
        );
        *now = now.saturating_add(Nanos::from_micros(10));
        q.poll(sub, *now);
        std::thread::yield_now();
    }
}

/// Submits every bio from submitter `c` (reaping to make room when no tag is free), waits
/// for all of them, and returns them in submission order. Each must come back exactly once.
fn submit_all(q: &RequestQueue, sub: &mut Submitter, now: &mut Nanos, bios: Vec<Bio>) -> Vec<Bio> {
    let n = bios.len();
    assert!(sub.done.is_empty(), "submitter has unclaimed bios");
    for (i, bio) in bios.into_iter().enumerate() {
        let start = Instant::now();
        let mut next = q.submit_bio(sub, bio.with_private(i as u64), *now);
        // No tag free: reap completions to free one, then try again.
        while let Submit::Busy(bio) = next {
            assert!(start.elapsed() < DEADLINE, "no tag for {DEADLINE:?}");
            *now = now.saturating_add(Nanos::from_micros(10));
            q.poll(sub, *now);
            next = q.submit_bio(sub, *bio, *now);
        }
    }
    if sub.plug.is_started() {
        q.finish_plug(sub, *now);
    }
    wait_for(q, sub, now, n);
    let mut slots: Vec<Option<Bio>> = (0..n).map(|_| None).collect();
    for bio in sub.done.drain(..) {
        let i = bio.private as usize;
        assert!(i < n, "a bio that was never submitted came back");
        assert!(slots[i].is_none(), "bio {i} came back twice");
        slots[i] = Some(bio);
    }
    slots.into_iter().map(|b| b.unwrap()).collect()
}

impl Rig {
    fn sub(&mut self) -> &mut Submitter {
        &mut self.subs[0]
    }

    fn run(&mut self, bios: Vec<Bio>) -> Vec<Bio> {
        submit_all(&self.q, &mut self.subs[0], &mut self.now, bios)
    }

    fn io(&mut self, bio: Bio) -> Bio {
        self.run(vec![bio]).pop().unwrap()
    }

    fn write(&mut self, sector: u64, data: &[u8]) -> BlkStatus {
        self.io(write_bio(sector, data)).status
    }

    fn read_status(&mut self, sector: u64, nr_sectors: u32) -> (BlkStatus, Vec<u8>) {
        let bio = self.io(read_bio(sector, nr_sectors));
        (bio.status, bio.buf.unwrap().as_slice().to_vec())
    }

    fn read(&mut self, sector: u64, nr_sectors: u32) -> Vec<u8> {
        let (status, data) = self.read_status(sector, nr_sectors);
        assert_eq!(status, BlkStatus::Ok, "read {sector}+{nr_sectors}");
        data
    }

    /// Reads `nr_sectors` from `sector` in pieces the queue accepts (at most 1 MiB each).
    fn read_span(&mut self, sector: u64, nr_sectors: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity((nr_sectors * 512) as usize);
        let mut s = sector;
        while s < sector + nr_sectors {
            let n = (sector + nr_sectors - s).min(2048);
            out.extend(self.read(s, n as u32));
            s += n;
        }
        out
    }

    fn op(&mut self, op: ReqOp, sector: u64, nr_sectors: u32) -> BlkStatus {
        self.io(Bio::new(op, sector, nr_sectors)).status
    }

    fn flush(&mut self) -> BlkStatus {
        self.op(ReqOp::Flush, 0, 0)
    }

    /// Sectors in one logical block.
    fn lbs_sectors(&self) -> u64 {
        self.dev.logical_block_size() as u64 / 512
    }

    /// The queue and the device hold nothing, and the queue tears down cleanly.
    fn assert_drained(&self) {
        assert_eq!(self.q.nr_allocated(), 0, "{}", self.q.debug_state());
        assert!(self.q.tag_set().all_free());
        for h in 0..self.q.nr_hw_queues() {
            assert_eq!(
                self.dev.inflight_all(HctxIdx(h as u16)),
                0,
                "hctx {h} still holds requests"
            );
        }
        for sub in &self.subs {
            assert!(sub.done.is_empty(), "unclaimed completions");
        }
        self.q.teardown();
    }
}

/// Writes random data in random aligned pieces over `span_bytes`, reads every piece back,
/// and checks it against a model of the whole span.
fn random_round_trip(r: &mut Rig, seed: u64, span_bytes: u64, pieces: usize) {
    let mut rng = Rng(seed);
    let lbs = r.lbs_sectors();
    let span = span_bytes / 512;
    let mut model = r.read_span(0, span);
    for _ in 0..pieces {
        let nr = (1 + rng.below(32)) * lbs;
        let sector = rng.below((span - nr) / lbs + 1) * lbs;
        let data = rng.bytes((nr * 512) as usize);
        assert_eq!(r.write(sector, &data), BlkStatus::Ok, "write {sector}+{nr}");
        model[(sector * 512) as usize..((sector + nr) * 512) as usize].copy_from_slice(&data);
        let back = r.read(sector, nr as u32);
        assert!(back == data, "piece {sector}+{nr} reads back different");
    }
    assert!(
        r.read_span(0, span) == model,
        "the span differs from the model"
    );
}

// ----- data integrity ----------------------------------------------------------------------------

#[test]
fn direct_file_reads_back_what_was_written() {
    let dir = TempDir::new("direct");
    let mut r = rig(file_cfg(dir.file("dev.img"), 4 * MIB, true));
    assert_eq!(r.dev.kind(), BackingKind::RegularFile);
    assert_eq!(r.dev.capacity_sectors(), 4 * MIB / 512);
    assert!(r.dev.logical_block_size() >= 512);
    // A fresh sparse file reads as zeroes.
    assert!(r.read(0, 64).iter().all(|&b| b == 0));
    random_round_trip(&mut r, 0x1234, MIB, 40);
    // Reads of the last block, at the very end of the device, work.
    let last = r.dev.capacity_sectors() - r.lbs_sectors();
    let data = Rng(9).bytes(r.dev.logical_block_size() as usize);
    assert_eq!(r.write(last, &data), BlkStatus::Ok);
    assert!(r.read(last, r.lbs_sectors() as u32) == data);
    r.assert_drained();
}

#[test]
fn buffered_file_reads_back_what_was_written() {
    let dir = TempDir::new("buffered");
    let mut r = rig(file_cfg(dir.file("dev.img"), 2 * MIB, false));
    assert_eq!(r.dev.logical_block_size(), 512);
    random_round_trip(&mut r, 0x9876, 2 * MIB, 60);
    r.assert_drained();
}

#[test]
fn existing_file_keeps_its_size_and_data() {
    let dir = TempDir::new("existing");
    let path = dir.file("dev.img");
    let data = Rng(5).bytes(64 * KIB as usize);
    std::fs::write(&path, &data).unwrap();
    let mut r = rig(UringConfig {
        path,
        direct: false,
        ..Default::default()
    });
    assert_eq!(r.dev.capacity_sectors(), 128);
    assert!(r.read(0, 128) == data);
    r.assert_drained();
}

/// A device of several files (a fio file set): each holds its part of the address space,
/// data lands at the file's own offsets, a bio in the gap between files is an I/O error,
/// and a flush (synchronous here, one fdatasync per file) succeeds.
#[test]
fn a_device_of_several_files_puts_each_bio_in_its_file() {
    // Once with descriptors, once with the files registered (fio's `registerfiles`).
    for registered in [false, true] {
        several_files(registered);
    }
}

fn several_files(register_files: bool) {
    use mqblk_drivers::{Extend, UringFile};
    let dir = TempDir::new("files");
    let second = dir.file("b");
    let third = dir.file("c");
    let mut r = rig(UringConfig {
        more_files: vec![
            UringFile {
                path: second.clone(),
                base: 2 * MIB,
                size_bytes: Some(64 * KIB),
                extend: Extend::Sparse,
            },
            UringFile {
                path: third.clone(),
                base: 4 * MIB,
                size_bytes: Some(128 * KIB),
                extend: Extend::Allocate,
            },
        ],
        register_files,
        ..file_cfg(dir.file("a"), MIB, false)
    });
    assert_eq!(r.dev.capacity_sectors(), (4 * MIB + 128 * KIB) / 512);
    let b = Rng(21).bytes(8192);
    let c = Rng(22).bytes(4096);
    assert_eq!(r.write(2 * MIB / 512 + 8, &b), BlkStatus::Ok);
    assert_eq!(r.write(4 * MIB / 512, &c), BlkStatus::Ok);
    assert_eq!(r.flush(), BlkStatus::Ok);
    assert!(r.read(2 * MIB / 512 + 8, 16) == b);
    let on_disk = std::fs::read(&second).unwrap();
    assert_eq!(on_disk.len() as u64, 64 * KIB);
    assert!(
        on_disk[4096..4096 + 8192] == b[..],
        "the bio lands at 4 KiB of b"
    );
    assert!(std::fs::read(&third).unwrap()[..4096] == c[..]);
    // Past the first file's megabyte, in the gap, and straddling b's end.
    assert_eq!(r.read_status(MIB / 512, 8).0, BlkStatus::IoErr);
    assert_eq!(
        r.read_status((2 * MIB + 60 * KIB) / 512, 16).0,
        BlkStatus::IoErr
    );
    r.assert_drained();
    // Files must not overlap.
    let e = UringDevice::open(UringConfig {
        more_files: vec![UringFile {
            path: second,
            base: MIB / 2,
            size_bytes: None,
            extend: Extend::Sparse,
        }],
        ..file_cfg(dir.file("a"), MIB, false)
    })
    .unwrap_err();
    assert!(matches!(e, UringError::FileOverlap { .. }), "{e}");
}

#[test]
fn several_hardware_queues_from_several_threads() {
    let dir = TempDir::new("multiq");
    let nr = 4u16;
    let (q, _) = round_trips_per_thread(
        UringConfig {
            nr_hw_queues: nr,
            queue_depth: 16,
            ..file_cfg(dir.file("dev.img"), 8 * MIB, true)
        },
        nr,
        16,
        32,
    );
    for h in 0..nr {
        assert!(
            // 64 bios; fewer requests if some merged while waiting on the software queue.
            q.hctx(HctxIdx(h)).stats.total().completed > 0,
            "hctx {h} served nothing"
        );
    }
    assert_eq!(q.nr_allocated(), 0);
    q.teardown();
}

/// `threads` threads, each on a software queue of its own, writing `n` chunks of
/// `chunk_lbs` blocks into its own 2 MiB region and reading them back; every byte must
/// match and nothing stay in flight. With as many threads as hardware queues, each thread
/// has a queue of its own.
fn round_trips_per_thread(
    cfg: UringConfig,
    threads: u16,
    chunk_lbs: u64,
    n: usize,
) -> (Arc<RequestQueue>, Arc<UringDevice>) {
    let nr = cfg.nr_hw_queues;
    let r = rig_ctx(cfg, threads);
    let lbs = r.lbs_sectors();
    let Rig { q, subs, dev, .. } = r;
    std::thread::scope(|s| {
        for (c, mut sub) in subs.into_iter().enumerate() {
            let q = &q;
            s.spawn(move || {
                if threads == nr {
                    assert_eq!(sub.hctxs(), &[HctxIdx(c as u16)], "one queue per submitter");
                }
                let mut rng = Rng(0xabc + c as u64);
                let mut now = Nanos(1_000);
                let region = c as u64 * 2 * MIB / 512;
                let chunk = chunk_lbs * lbs;
                let datas: Vec<Vec<u8>> =
                    (0..n).map(|_| rng.bytes((chunk * 512) as usize)).collect();
                let writes = datas
                    .iter()
                    .enumerate()
                    .map(|(i, d)| write_bio(region + i as u64 * chunk, d))
                    .collect();
                for bio in submit_all(q, &mut sub, &mut now, writes) {
                    assert_eq!(bio.status, BlkStatus::Ok);
                }
                let reads = (0..n)
                    .map(|i| read_bio(region + i as u64 * chunk, chunk as u32))
                    .collect();
                for (i, bio) in submit_all(q, &mut sub, &mut now, reads)
                    .into_iter()
                    .enumerate()
                {
                    assert_eq!(bio.status, BlkStatus::Ok);
                    assert!(
                        bio.buf.unwrap().as_slice() == &datas[i][..],
                        "thread {c} chunk {i}"
                    );
                }
            });
        }
    });
    for h in 0..nr {
        assert_eq!(dev.inflight_all(HctxIdx(h)), 0, "hctx {h}");
    }
    assert!(q.tag_set().all_free());
    (q, dev)
}

/// Rings owned by the threads that reap them (`single_issuer`): each thread's hardware
/// queue is its own, as `mqblk bench` sets it up; every byte comes back as written.
#[test]
fn single_issuer_rings_serve_the_thread_that_owns_each() {
    let dir = TempDir::new("owned");
    let (q, dev) = round_trips_per_thread(
        UringConfig {
            nr_hw_queues: 2,
            queue_depth: 16,
            single_issuer: true,
            ..file_cfg(dir.file("dev.img"), 4 * MIB, true)
        },
        2,
        8,
        48,
    );
    for h in 0..2 {
        assert_eq!(dev.owned_rings(HctxIdx(h)), 1, "hctx {h}");
    }
    q.teardown();
}

/// Threads sharing one hardware queue each get a ring of their own on it, up to
/// `OWNED_RINGS`; the threads past them share the queue's ring. Every byte comes back
/// as written, with the tags of one queue shared by all.
#[test]
fn threads_sharing_a_queue_get_rings_of_their_own_and_the_rest_share_one() {
    let dir = TempDir::new("owned-shared");
    let threads = OWNED_RINGS as u16 + 2;
    let cfg = UringConfig {
        nr_hw_queues: 1,
        queue_depth: 32,
        single_issuer: true,
        ..file_cfg(dir.file("dev.img"), threads as u64 * 2 * MIB, true)
    };
    let (q, dev) = round_trips_per_thread(cfg, threads, 4, 24);
    assert_eq!(dev.owned_rings(HctxIdx(0)), OWNED_RINGS);
    q.teardown();
    // Without `single_issuer` no thread has a ring of its own.
    let dir = TempDir::new("shared-only");
    let cfg = UringConfig {
        single_issuer: false,
        ..file_cfg(dir.file("dev.img"), 4 * 2 * MIB, true)
    };
    let (q, dev) = round_trips_per_thread(cfg, 4, 4, 8);
    assert_eq!(dev.owned_rings(HctxIdx(0)), 0);
    q.teardown();
}

/// Contiguous bios in a plug merge into multi-bio requests; each bio moves its own data.
#[test]
fn merged_requests_move_every_bio() {
    let dir = TempDir::new("merged");
    let mut r = rig(file_cfg(dir.file("dev.img"), 4 * MIB, true));
    let lbs = r.lbs_sectors();
    let chunk = 8 * lbs;
    let mut rng = Rng(77);
    let datas: Vec<Vec<u8>> = (0..24).map(|_| rng.bytes((chunk * 512) as usize)).collect();
    r.sub().plug.start();
    let mut merged = 0;
    for (i, d) in datas.iter().enumerate() {
        let bio = write_bio(64 + i as u64 * chunk, d).with_private(i as u64);
        let now = r.now;
        match r.q.submit_bio(&mut r.subs[0], bio, now) {
            Submit::Merged => merged += 1,
            Submit::Queued => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(merged >= 20, "only {merged} of 24 bios merged");
    let now = r.now;
    r.q.finish_plug(&mut r.subs[0], now);
    let mut now = r.now;
    wait_for(&r.q, &mut r.subs[0], &mut now, 24);
    r.now = now;
    let mut seen = [false; 24];
    for bio in r.sub().done.drain(..) {
        assert_eq!(bio.status, BlkStatus::Ok);
        assert!(
            !std::mem::replace(&mut seen[bio.private as usize], true),
            "twice"
        );
    }
    // Read back through merged reads as well.
    r.sub().plug.start();
    let reads = (0..24)
        .map(|i| read_bio(64 + i as u64 * chunk, chunk as u32))
        .collect();
    for (i, bio) in r.run(reads).into_iter().enumerate() {
        assert_eq!(bio.status, BlkStatus::Ok);
        assert!(bio.buf.unwrap().as_slice() == &datas[i][..], "chunk {i}");
    }
    r.assert_drained();
}

/// More merged bios in one batch than the ring can have in flight: the driver answers
/// `Resource`, the core parks the rest and issues it when completions make room. (The bios
/// use registered buffers, which go as one submission each; plain buffers of a merged
/// request would go as one vectored submission.)
#[test]
fn a_batch_larger_than_the_ring_is_issued_in_turns() {
    let dir = TempDir::new("bigbatch");
    let mut r = rig(UringConfig {
        fixed_buffers: true,
        fixed_buf_count: 1024,
        fixed_buf_size: 4096,
        ..file_cfg(dir.file("dev.img"), 8 * MIB, false)
    });
    let pool = r.dev.buf_pool().expect("a pool").clone();
    let mut rng = Rng(31);
    let bios: Vec<Bio> = (0..1024)
        .map(|i| {
            let mut buf = pool.alloc(4096).expect("a free pooled buffer");
            buf.as_mut_slice().copy_from_slice(&rng.bytes(4096));
            Bio::new(ReqOp::Write, i * 8, 8).with_buf(buf)
        })
        .collect();
    let model: Vec<u8> = bios
        .iter()
        .flat_map(|b| b.buf.as_ref().unwrap().as_slice().to_vec())
        .collect();
    r.sub().plug.start();
    for bio in r.run(bios) {
        assert_eq!(bio.status, BlkStatus::Ok);
    }
    assert!(
        r.q.hctx(HctxIdx(0)).stats.total().busy > 0,
        "the ring never ran out of room; the test no longer covers Resource"
    );
    for i in 0..4u64 {
        let got = r.read(i * 2048, 2048);
        assert!(
            got == model[(i * MIB) as usize..((i + 1) * MIB) as usize],
            "MiB {i}"
        );
    }
    r.assert_drained();
}

#[test]
fn flush_fua_and_preflush_succeed_and_keep_data() {
    for direct in [true, false] {
        let dir = TempDir::new("flush");
        let mut r = rig(file_cfg(dir.file("dev.img"), MIB, direct));
        let lbs = r.lbs_sectors();
        let a = Rng(1).bytes((8 * lbs * 512) as usize);
        let b = Rng(2).bytes((8 * lbs * 512) as usize);
        assert_eq!(r.write(0, &a), BlkStatus::Ok);
        assert_eq!(r.flush(), BlkStatus::Ok);
        let fua = r.io(write_bio(8 * lbs, &b).with_flags(ReqFlags::FUA));
        assert_eq!(fua.status, BlkStatus::Ok);
        let pre = r.io(write_bio(16 * lbs, &a).with_flags(ReqFlags::PREFLUSH.union(ReqFlags::FUA)));
        assert_eq!(pre.status, BlkStatus::Ok);
        assert_eq!(
            r.io(Bio::new(ReqOp::WriteZeroes, 24 * lbs, 8 * lbs as u32).with_flags(ReqFlags::FUA))
                .status,
            BlkStatus::Ok
        );
        assert!(r.read(0, 8 * lbs as u32) == a);
        assert!(r.read(8 * lbs, 8 * lbs as u32) == b);
        assert!(r.read(16 * lbs, 8 * lbs as u32) == a);
        assert!(r.read(24 * lbs, 8 * lbs as u32).iter().all(|&x| x == 0));
        r.assert_drained();
    }
}

/// Writes a pattern over `span` sectors, discards one range and write-zeroes another, and
/// checks that exactly those read back as zeroes.
fn discard_and_zeroes(r: &mut Rig, unit: u64) {
    let span = 64 * unit;
    let pattern = Rng(3).bytes((span * 512) as usize);
    assert_eq!(r.write(0, &pattern), BlkStatus::Ok);
    assert_eq!(
        r.op(ReqOp::Discard, 8 * unit, 8 * unit as u32),
        BlkStatus::Ok
    );
    assert_eq!(
        r.op(ReqOp::WriteZeroes, 32 * unit, 4 * unit as u32),
        BlkStatus::Ok
    );
    let got = r.read_span(0, span);
    let zero = |s: u64| (8 * unit..16 * unit).contains(&s) || (32 * unit..36 * unit).contains(&s);
    for s in 0..span {
        let (lo, hi) = ((s * 512) as usize, ((s + 1) * 512) as usize);
        if zero(s) {
            assert!(got[lo..hi].iter().all(|&b| b == 0), "sector {s} not zeroed");
        } else {
            assert!(got[lo..hi] == pattern[lo..hi], "sector {s} lost its data");
        }
    }
}

#[test]
fn discard_and_write_zeroes_read_back_zeroes_on_files() {
    for direct in [true, false] {
        let dir = TempDir::new("zeroes");
        let mut r = rig(file_cfg(dir.file("dev.img"), 2 * MIB, direct));
        // Whole 4 KiB pages, so hole punching frees blocks rather than zeroing in place.
        let unit = 8.max(r.lbs_sectors());
        discard_and_zeroes(&mut r, unit);
        r.assert_drained();
    }
}

#[test]
fn write_zeroes_falls_back_to_punching_a_hole_on_tmpfs() {
    let t = "write_zeroes_falls_back_to_punching_a_hole_on_tmpfs";
    let fs = match Tmpfs::mount("zr-tmpfs", "4m") {
        Ok(fs) => fs,
        Err(why) => return skip(t, &why),
    };
    let mut r = rig(file_cfg(fs.dir.file("dev.img"), MIB, false));
    discard_and_zeroes(&mut r, 8);
    r.assert_drained();
}

#[test]
fn sqpoll_ring_reads_back_what_was_written() {
    let dir = TempDir::new("sqpoll");
    let mut r = rig(UringConfig {
        sqpoll: true,
        ..file_cfg(dir.file("dev.img"), MIB, true)
    });
    random_round_trip(&mut r, 0x5151, MIB, 20);
    assert_eq!(r.flush(), BlkStatus::Ok);
    r.assert_drained();
}

// ----- loop devices ------------------------------------------------------------------------------

#[test]
fn loop_device_reads_back_what_was_written() {
    let t = "loop_device_reads_back_what_was_written";
    let dir = TempDir::new("loop");
    let lo = match loop_device(&dir, 4 * MIB) {
        Ok(lo) => lo,
        Err(why) => return skip(t, &why),
    };
    let mut r = rig(UringConfig {
        path: lo.path(),
        nr_hw_queues: 2,
        ..Default::default()
    });
    assert_eq!(r.dev.kind(), BackingKind::BlockDevice);
    assert_eq!(r.dev.capacity_sectors(), 4 * MIB / 512);
    random_round_trip(&mut r, 0x600d, 2 * MIB, 30);
    assert_eq!(r.flush(), BlkStatus::Ok);
    // Discard and write-zeroes are ioctls here; on a loop device over a file both read
    // back as zeroes.
    let unit = 8.max(r.lbs_sectors());
    discard_and_zeroes(&mut r, unit);
    // Merged requests on the block device.
    let lbs = r.lbs_sectors();
    let datas: Vec<Vec<u8>> = (0..16)
        .map(|i| Rng(100 + i).bytes((8 * lbs * 512) as usize))
        .collect();
    r.sub().plug.start();
    let writes = datas
        .iter()
        .enumerate()
        .map(|(i, d)| write_bio(4096 + i as u64 * 8 * lbs, d))
        .collect();
    assert!(r.run(writes).iter().all(|b| b.status == BlkStatus::Ok));
    for (i, d) in datas.iter().enumerate() {
        assert!(
            r.read(4096 + i as u64 * 8 * lbs, 8 * lbs as u32) == *d,
            "chunk {i}"
        );
    }
    r.assert_drained();
}

/// The loop device shrinks under us (its file is truncated and its capacity re-read):
/// requests beyond the new end fail with errors, those inside keep working.
#[test]
fn loop_device_shrunk_under_us_fails_requests_beyond_its_end() {
    let t = "loop_device_shrunk_under_us_fails_requests_beyond_its_end";
    let dir = TempDir::new("loopshrink");
    let lo = match loop_device(&dir, 4 * MIB) {
        Ok(lo) => lo,
        Err(why) => return skip(t, &why),
    };
    let mut r = rig(UringConfig {
        path: lo.path(),
        ..Default::default()
    });
    let data = Rng(4).bytes(64 * KIB as usize);
    assert_eq!(r.write(0, &data), BlkStatus::Ok);
    assert_eq!(r.write(3 * MIB / 512, &data), BlkStatus::Ok);
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.file("backing.img"))
        .and_then(|f| f.set_len(MIB))
        .unwrap();
    if let Err(why) = run("losetup", &["-c", &lo.dev]) {
        return skip(t, &why);
    }
    // Reading at or past the device's end returns no bytes: an I/O error for a bio.
    let (status, _) = r.read_status(3 * MIB / 512, 128);
    assert_eq!(status, BlkStatus::IoErr);
    // Writing there: the block device refuses with ENOSPC.
    assert_eq!(r.write(3 * MIB / 512, &data), BlkStatus::NoSpc);
    // A request straddling the new end moves what it can, then fails.
    let (status, _) = r.read_status(MIB / 512 - 64, 128);
    assert_eq!(status, BlkStatus::IoErr);
    // The queue keeps serving what is still there.
    assert!(r.read(0, 128) == data);
    assert_eq!(r.flush(), BlkStatus::Ok);
    r.assert_drained();
}

/// `losetup -d` while we hold the device open only marks it for automatic detach on last
/// close (the kernel's `LO_FLAGS_AUTOCLEAR`): our I/O goes on undisturbed, and the device
/// goes away once we let go of it.
#[test]
fn loop_device_detached_mid_run_serves_until_closed() {
    let t = "loop_device_detached_mid_run_serves_until_closed";
    let dir = TempDir::new("loopdetach");
    let mut lo = match loop_device(&dir, 2 * MIB) {
        Ok(lo) => lo,
        Err(why) => return skip(t, &why),
    };
    let mut r = rig(UringConfig {
        path: lo.path(),
        ..Default::default()
    });
    let data = Rng(6).bytes(32 * KIB as usize);
    assert_eq!(r.write(0, &data), BlkStatus::Ok);
    // Leave requests in flight across the detach.
    for i in 0..8u64 {
        let now = r.now;
        let bio = write_bio(1024 + i * 64, &data).with_private(i);
        assert!(matches!(
            r.q.submit_bio(&mut r.subs[0], bio, now),
            Submit::Queued
        ));
    }
    if let Err(why) = lo.detach() {
        return skip(t, &why);
    }
    let mut now = r.now;
    wait_for(&r.q, &mut r.subs[0], &mut now, 8);
    r.now = now;
    for bio in r.sub().done.drain(..) {
        assert_eq!(bio.status, BlkStatus::Ok, "in flight across the detach");
    }
    assert!(r.read(0, 64) == data);
    assert!(r.read(1024 + 7 * 64, 64) == data);
    r.assert_drained();
    drop(r);
    // The kernel runs the automatic detach from a work item after the last close: give it
    // a moment.
    let backing = dir.file("backing.img");
    let start = Instant::now();
    loop {
        let attached = run("losetup", &["-j", backing.to_str().unwrap()]).unwrap_or_default();
        if attached.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "still attached after the last close: {attached}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ----- errors are values -------------------------------------------------------------------------

#[test]
fn read_only_file_refuses_changes_with_protection() {
    let dir = TempDir::new("ro");
    let path = dir.file("dev.img");
    let data = Rng(8).bytes(256 * KIB as usize);
    std::fs::write(&path, &data).unwrap();
    for direct in [true, false] {
        let mut r = rig(UringConfig {
            path: path.clone(),
            read_only: true,
            direct,
            ..Default::default()
        });
        let lbs = r.lbs_sectors() as u32;
        assert_eq!(r.write(0, &Rng(9).bytes(4096)), BlkStatus::Protection);
        assert_eq!(r.op(ReqOp::Discard, 0, 8 * lbs), BlkStatus::Protection);
        assert_eq!(r.op(ReqOp::WriteZeroes, 0, 8 * lbs), BlkStatus::Protection);
        // Flushing a read-only file is fine, and reads on the same queue still work.
        assert_eq!(r.flush(), BlkStatus::Ok);
        assert!(r.read(0, 512) == data);
        r.assert_drained();
    }
}

#[test]
fn full_file_system_fails_writes_with_nospc() {
    let t = "full_file_system_fails_writes_with_nospc";
    let fs = match Tmpfs::mount("nospc", "1m") {
        Ok(fs) => fs,
        Err(why) => return skip(t, &why),
    };
    // A 4 MiB sparse file on a 1 MiB file system: writes fill it up.
    let mut r = rig(file_cfg(fs.dir.file("dev.img"), 4 * MIB, false));
    let chunk = Rng(10).bytes(64 * KIB as usize);
    let writes: Vec<Bio> = (0..32).map(|i| write_bio(i * 128, &chunk)).collect();
    let statuses: Vec<BlkStatus> = r.run(writes).iter().map(|b| b.status).collect();
    let ok = statuses.iter().filter(|s| **s == BlkStatus::Ok).count();
    let nospc = statuses.iter().filter(|s| **s == BlkStatus::NoSpc).count();
    assert_eq!(ok + nospc, 32, "only Ok and NoSpc expected: {statuses:?}");
    assert!(
        (8..=16).contains(&ok),
        "{ok} writes of 64 KiB in 1 MiB: {statuses:?}"
    );
    assert!(nospc >= 16);
    // Once full, it stays full: no write succeeds after the first failure.
    let first_err = statuses
        .iter()
        .position(|s| *s == BlkStatus::NoSpc)
        .unwrap();
    assert!(
        statuses[first_err..].iter().all(|s| *s == BlkStatus::NoSpc),
        "{statuses:?}"
    );
    // Whatever was written reads back, on the same queue, after the errors.
    let first_ok = statuses.iter().position(|s| *s == BlkStatus::Ok).unwrap();
    assert!(r.read(first_ok as u64 * 128, 128) == chunk);
    r.assert_drained();
}

/// A file truncated under us: reads past its new end fail with an I/O error (no bytes
/// came back), reads inside it work, and a write past the end extends the file again, as
/// it would for any writer of a regular file.
#[test]
fn file_truncated_under_us_fails_reads_beyond_its_end() {
    for direct in [true, false] {
        let dir = TempDir::new("trunc");
        let path = dir.file("dev.img");
        let mut r = rig(file_cfg(path.clone(), MIB, direct));
        let data = Rng(11).bytes(64 * KIB as usize);
        assert_eq!(r.write(0, &data), BlkStatus::Ok);
        assert_eq!(r.write(1536, &data), BlkStatus::Ok);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(256 * KIB))
            .unwrap();
        let (status, _) = r.read_status(1536, 128);
        assert_eq!(status, BlkStatus::IoErr);
        // Straddling the end: the first part comes back, the rest is missing.
        let (status, _) = r.read_status(448, 128);
        assert_eq!(status, BlkStatus::IoErr);
        assert!(r.read(0, 128) == data);
        assert_eq!(r.write(1536, &data), BlkStatus::Ok);
        assert!(r.read(1536, 128) == data);
        r.assert_drained();
    }
}

/// The file is unlinked under us: our descriptor keeps it alive, so I/O goes on.
#[test]
fn file_removed_under_us_keeps_working_through_the_open_descriptor() {
    let dir = TempDir::new("unlinked");
    let path = dir.file("dev.img");
    let mut r = rig(file_cfg(path.clone(), MIB, true));
    let data = Rng(12).bytes(64 * KIB as usize);
    assert_eq!(r.write(0, &data), BlkStatus::Ok);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.write(128, &data), BlkStatus::Ok);
    assert!(r.read(0, 128) == data);
    assert!(r.read(128, 128) == data);
    assert_eq!(r.flush(), BlkStatus::Ok);
    r.assert_drained();
}

/// Bios the queue accepts but this device cannot carry out (a data bio without a buffer)
/// end with `Invalid`, and the queue goes on.
#[test]
fn data_bio_without_buffer_is_invalid() {
    let dir = TempDir::new("nobuf");
    let mut r = rig(file_cfg(dir.file("dev.img"), MIB, false));
    assert_eq!(r.op(ReqOp::Read, 0, 8), BlkStatus::Invalid);
    assert_eq!(r.op(ReqOp::Write, 0, 8), BlkStatus::Invalid);
    assert!(r.read(0, 8).iter().all(|&b| b == 0));
    r.assert_drained();
}

// ----- configuration -----------------------------------------------------------------------------

fn open_err(cfg: UringConfig) -> UringError {
    match UringDevice::open(cfg) {
        Ok(_) => panic!("opened a device that should have been refused"),
        Err(e) => e,
    }
}

#[test]
fn defaults_match_the_documentation() {
    let c = UringConfig::default();
    assert_eq!(c.nr_hw_queues, 1);
    assert_eq!(c.queue_depth, 64);
    assert!(c.direct);
    assert!(!c.read_only && !c.sqpoll && !c.iopoll && !c.fixed_buffers);
    assert_eq!(c.size_bytes, None);
    let ts = UringConfig {
        nr_hw_queues: 3,
        queue_depth: 32,
        ..c
    }
    .tag_set_config();
    assert_eq!(ts.maps.default, 3);
    assert_eq!(ts.queue_depth, 32);
}

#[test]
fn invalid_configs_name_the_knob_in_one_line() {
    let dir = TempDir::new("cfg");
    let file = dir.file("dev.img");
    let base = file_cfg(file.clone(), MIB, true);
    let cases: Vec<(UringConfig, &str)> = vec![
        (
            UringConfig {
                path: PathBuf::new(),
                ..base.clone()
            },
            "path",
        ),
        (
            UringConfig {
                nr_hw_queues: 0,
                ..base.clone()
            },
            "nr_hw_queues",
        ),
        (
            UringConfig {
                queue_depth: 0,
                ..base.clone()
            },
            "queue_depth",
        ),
        (
            UringConfig {
                queue_depth: 20_000,
                ..base.clone()
            },
            "queue_depth",
        ),
        (
            UringConfig {
                size_bytes: Some(0),
                ..base.clone()
            },
            "size_bytes",
        ),
        (
            UringConfig {
                size_bytes: Some(1000),
                ..base.clone()
            },
            "size_bytes",
        ),
        (
            UringConfig {
                iopoll: true,
                direct: false,
                ..base.clone()
            },
            "iopoll",
        ),
        (
            UringConfig {
                fixed_buffers: true,
                fixed_buf_size: 100,
                ..base.clone()
            },
            "fixed_buf_size",
        ),
        (
            UringConfig {
                fixed_buffers: true,
                fixed_buf_count: 20_000,
                ..base.clone()
            },
            "fixed_buf_count",
        ),
    ];
    for (cfg, knob) in cases {
        let msg = cfg.validate().unwrap_err().to_string();
        assert!(msg.starts_with("uring: ") && msg.contains(knob), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
        // `open` checks the same first, before touching the file system.
        assert_eq!(open_err(cfg).to_string(), msg);
    }
    assert!(!file.exists(), "a refused configuration created the file");

    // Checks that need the file system.
    let msg = open_err(UringConfig {
        iopoll: true,
        ..base.clone()
    })
    .to_string();
    assert!(
        msg.contains("iopoll") && msg.contains("regular file"),
        "{msg}"
    );
    assert!(!file.exists(), "iopoll on a file to be created created it");
    let missing = UringConfig {
        size_bytes: None,
        ..base.clone()
    };
    assert!(matches!(open_err(missing), UringError::Open { .. }));
    std::fs::write(&file, b"").unwrap();
    let empty = UringConfig {
        size_bytes: None,
        ..base.clone()
    };
    let e = open_err(empty);
    assert!(matches!(e, UringError::Empty(_)), "{e}");
    assert!(e.to_string().contains("size_bytes"), "{e}");
    let ro = UringConfig {
        read_only: true,
        ..base.clone()
    };
    let e = open_err(ro);
    assert!(matches!(e, UringError::ReadOnlyTooShort { .. }), "{e}");
    let not_file = UringConfig {
        path: dir.0.clone(),
        read_only: true,
        size_bytes: None,
        direct: false,
        ..base.clone()
    };
    let e = open_err(not_file);
    assert!(matches!(e, UringError::NotFileOrBlock(_)), "{e}");
    for e in [
        open_err(UringConfig {
            iopoll: true,
            ..base.clone()
        }),
        open_err(UringConfig {
            path: dir.file("nope/x"),
            ..base.clone()
        }),
    ] {
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

#[test]
fn iopoll_on_a_block_device_opens_or_names_the_problem() {
    let t = "iopoll_on_a_block_device_opens_or_names_the_problem";
    let dir = TempDir::new("iopoll");
    let lo = match loop_device(&dir, MIB) {
        Ok(lo) => lo,
        Err(why) => return skip(t, &why),
    };
    // A loop device has no poll queues: the ring opens, and the kernel refuses polled
    // reads with EOPNOTSUPP, which comes back as a status rather than a hang or a panic.
    let mut r = rig(UringConfig {
        path: lo.path(),
        iopoll: true,
        ..Default::default()
    });
    let (status, _) = r.read_status(0, 8);
    println!("{t}: polled read on {}: {status:?}", lo.dev);
    assert!(
        matches!(status, BlkStatus::Ok | BlkStatus::NotSupp),
        "polled read on a loop device: {status:?}"
    );
    // Flushes run synchronously on an IOPOLL ring.
    assert_eq!(r.flush(), BlkStatus::Ok);
    r.assert_drained();
}

// ----- registered buffers ------------------------------------------------------------------------

fn fixed_cfg(path: PathBuf, size: u64) -> UringConfig {
    UringConfig {
        fixed_buffers: true,
        fixed_buf_count: 8,
        fixed_buf_size: 64 * 1024,
        nr_hw_queues: 2,
        ..file_cfg(path, size, true)
    }
}

#[test]
fn registered_buffers_carry_reads_and_writes() {
    let dir = TempDir::new("fixed");
    let mut r = rig(fixed_cfg(dir.file("dev.img"), 4 * MIB));
    let pool = r.dev.buf_pool().expect("a pool").clone();
    assert_eq!((pool.len(), pool.buf_size()), (8, 64 * 1024));
    let mut rng = Rng(77);
    for i in 0..24u64 {
        let len = 4096 * (1 + rng.below(16)) as usize;
        let sector = i * 128;
        let data = rng.bytes(len);
        let mut wbuf = pool.alloc(len).expect("a free pooled buffer");
        assert!(wbuf.is_pooled());
        wbuf.as_mut_slice().copy_from_slice(&data);
        let w = Bio::new(ReqOp::Write, sector, (len / 512) as u32).with_buf(wbuf);
        assert_eq!(r.io(w).status, BlkStatus::Ok);
        let mut rbuf = pool.alloc(len).unwrap();
        rbuf.as_mut_slice().fill(0x5a);
        let back = r.io(Bio::new(ReqOp::Read, sector, (len / 512) as u32).with_buf(rbuf));
        assert_eq!(back.status, BlkStatus::Ok);
        assert!(back.buf.as_ref().unwrap().as_slice() == data, "block {i}");
        // Read back through an ordinary buffer too: the same bytes are on the file.
        assert!(r.read(sector, (len / 512) as u32) == data);
    }
    let (fixed, plain) = r.dev.fixed_stats();
    assert_eq!(fixed, 48, "every pooled I/O went as READ_FIXED/WRITE_FIXED");
    assert_eq!(plain, 24, "the ordinary read-backs went as plain reads");
    assert_eq!(pool.lent(), 0, "every pooled buffer came back to the pool");
    r.assert_drained();
}

#[test]
fn pool_exhaustion_and_growth_fall_back_to_plain_buffers() {
    let dir = TempDir::new("fixed-fallback");
    let mut r = rig(fixed_cfg(dir.file("dev.img"), 2 * MIB));
    let pool = r.dev.buf_pool().unwrap().clone();
    assert!(
        pool.alloc(128 * 1024).is_none(),
        "larger than a pooled buffer"
    );
    let mut held: Vec<IoBuf> = (0..8).map(|_| pool.alloc(4096).unwrap()).collect();
    assert!(pool.alloc(4096).is_none(), "all eight are lent");
    assert_eq!(pool.lent(), 8);
    assert!(!held[0].clone().is_pooled(), "a clone has pages of its own");
    held.pop();
    // A pooled buffer grown past its pages gives them back and keeps its bytes.
    let mut grown = pool.alloc(4096).expect("the one given back");
    assert!(grown.is_pooled());
    grown.as_mut_slice().fill(7);
    grown.set_len(256 * 1024);
    assert!(!grown.is_pooled());
    assert_eq!(
        pool.lent(),
        7,
        "the grown buffer's pages are back in the pool"
    );
    assert!(grown.as_slice()[..4096].iter().all(|&b| b == 7));
    let data = Rng(3).bytes(256 * 1024);
    grown.as_mut_slice().copy_from_slice(&data);
    let w = Bio::new(ReqOp::Write, 0, 512).with_buf(grown);
    assert_eq!(r.io(w).status, BlkStatus::Ok);
    assert!(r.read(0, 512) == data);
    let (fixed, _) = r.dev.fixed_stats();
    assert_eq!(fixed, 0);
    drop(held);
    assert_eq!(pool.lent(), 0);
    r.assert_drained();
}

#[test]
fn pooled_buffers_outlive_the_device_soundly() {
    let dir = TempDir::new("fixed-outlive");
    let r = rig(fixed_cfg(dir.file("dev.img"), MIB));
    let pool = r.dev.buf_pool().unwrap().clone();
    let mut kept = pool.alloc(8192).unwrap();
    kept.as_mut_slice().fill(1);
    r.q.teardown();
    drop(r);
    // The rings are gone; the buffer and the pool are still ours to use and drop.
    assert!(kept.as_slice().iter().all(|&b| b == 1));
    kept.as_mut_slice().fill(2);
    drop(kept);
    assert_eq!(pool.lent(), 0);
    let again = pool.alloc(4096).unwrap();
    assert!(again.is_pooled());
}

/// A virtio-blk ring without indirect descriptors (`virtqueue_size`): each request holds one
/// descriptor per 4 KiB page plus two while in flight, and one that does not fit waits in
/// the queue (`virtio_queue_rq` answers `BLK_STS_DEV_RESOURCE`) until a completion makes
/// room; requests have no more segments than the ring holds.
#[test]
fn a_virtqueue_without_indirect_descriptors_limits_what_is_in_flight() {
    let dir = TempDir::new("virtqueue");
    // 16 KiB writes take 4 + 2 descriptors: three fit in 20.
    let mut r = rig(UringConfig {
        virtqueue_size: Some(20),
        ..file_cfg(dir.file("dev.img"), 4 * MIB, false)
    });
    assert_eq!(r.dev.virtqueue_size(), Some(20));
    assert_eq!(
        r.q.limits().max_segments,
        18,
        "a request must fit in the ring: 18 segments"
    );
    let mut rng = Rng(5);
    let datas: Vec<Vec<u8>> = (0..48).map(|_| rng.bytes(16 * 1024)).collect();
    let mut most = 0;
    let mut now = r.now;
    for (i, d) in datas.iter().enumerate() {
        // Every other 16 KiB, so no two merge.
        let bio = write_bio(i as u64 * 64, d).with_private(i as u64);
        let mut next = r.q.submit_bio(&mut r.subs[0], bio, now);
        while let Submit::Busy(bio) = next {
            now = now.saturating_add(Nanos::from_micros(10));
            r.q.poll(&mut r.subs[0], now);
            next = r.q.submit_bio(&mut r.subs[0], *bio, now);
        }
        most = most.max(r.dev.inflight(HctxIdx(0)));
        assert!(
            most <= 3,
            "{most} requests of 6 descriptors in a ring of 20"
        );
    }
    wait_for(&r.q, &mut r.subs[0], &mut now, datas.len());
    r.now = now;
    assert_eq!(most, 3, "the ring was never full");
    assert!(r.q.hctx(HctxIdx(0)).stats.total().busy > 0);
    for bio in r.sub().done.drain(..) {
        assert_eq!(bio.status, BlkStatus::Ok);
    }
    for (i, d) in datas.iter().enumerate() {
        assert!(r.read(i as u64 * 64, 32) == *d, "write {i}");
    }
    // A request as large as the ring allows still goes, alone.
    let big = rng.bytes(18 * 4096);
    assert_eq!(r.write(4096, &big), BlkStatus::Ok);
    assert!(r.read(4096, 18 * 8) == big);
    r.assert_drained();
}

/// On a ring without indirect descriptors a request holds a descriptor per segment of its
/// buffer, counted over how the buffer lies in memory (`blk_rq_map_sg`): 128 KiB of heap
/// pages are 32 segments, more than a ring of 20 takes at once, so the bio goes as two
/// requests; from a huge-page buffer (`iomem=shmhuge`) the same bio is one segment and one
/// request. Both land intact.
#[test]
fn a_huge_page_buffer_is_one_segment_on_the_ring() {
    let test = "a_huge_page_buffer_is_one_segment_on_the_ring";
    let reserved = match mqblk_drivers::hugemem::reserve(2 << 20, 1) {
        Ok(r) => r,
        Err(e) => {
            mqblk_testkit::missing(test, &format!("no huge pages to map: {e}"));
            return;
        }
    };
    let dir = TempDir::new("huge-ring");
    let mut r = rig(UringConfig {
        virtqueue_size: Some(20),
        ..file_cfg(dir.file("dev.img"), 4 * MIB, false)
    });
    assert_eq!(r.q.limits().max_segments, 18);
    let data = Rng(11).bytes(128 * 1024);
    let issued = |r: &Rig| r.q.hctx(HctxIdx(0)).stats.total().issued;
    let before = issued(&r);
    assert_eq!(r.write(0, &data), BlkStatus::Ok);
    assert_eq!(
        issued(&r) - before,
        2,
        "32 heap pages in a ring of 18 segments"
    );
    let arena = mqblk_drivers::hugemem::HugeArena::new("t", 1, 128 * 1024, 2 << 20, None)
        .expect("a huge page");
    let mut buf = arena.take(128 * 1024).unwrap();
    buf.as_mut_slice().copy_from_slice(&data);
    let before = issued(&r);
    let bio = Bio::new(ReqOp::Write, 1024, 256).with_buf(buf);
    assert_eq!(r.io(bio).status, BlkStatus::Ok);
    assert_eq!(issued(&r) - before, 1, "one segment of a huge page");
    assert!(r.read(1024, 256) == data);
    assert!(r.read(0, 256) == data);
    r.assert_drained();
    drop(r);
    assert_eq!(arena.free(), 1);
    drop(arena);
    drop(reserved);
}
