//! `uring`: a block device backed by a regular file or a real block device, doing its I/O
//! with io_uring, one ring per hardware queue (as ublk and fio's `io_uring` engine do).
//!
//! A request becomes one submission per bio: a read or write at the bio's byte offset
//! (`RWF_DSYNC` for FUA), an `fallocate` for discard (`PUNCH_HOLE | KEEP_SIZE`) and
//! write-zeroes (`ZERO_RANGE | KEEP_SIZE`) on regular files, and one `fsync(DATASYNC)` for a
//! flush. `REQ_PREFLUSH` becomes an fsync that finishes before the data is submitted (the
//! block layer's flush state machine, `core/src/queue/flush.rs`, normally hands the driver
//! flush requests and FUA writes only: the driver reports a write cache and FUA). On a
//! block device discard and write-zeroes are the `BLKDISCARD` and `BLKZEROOUT` ioctls, run
//! synchronously inside `queue_rq` (io_uring has no portable discard before 6.12's
//! `IORING_OP_URING_CMD` block commands, and these are rare and cheap to wait for).
//!
//! `queue_rq` with `last == false` only fills the SQ; `last` or `commit_rqs` rings the
//! doorbell, one `io_uring_enter` per batch. `poll` reaps the CQ, entering the kernel only
//! when it is empty while something is in flight. A request completes once all its
//! submissions have; the first error is its status, mapped from the errno by
//! [`errno_to_status`]. Errors are values: nothing here panics on an errno.
//!
//! All `unsafe` code lives in `engine.rs`, behind the safe tag-keyed tracker (`tracker.rs`).
//! This file holds the device and its `Driver` operations; beside it: `config` (the
//! configuration, errors and errno mapping), `open` (files, sizes and layout), `rings`
//! (which ring a thread issues on), `issue` (requests into submissions) and `pool`
//! (registered buffers).
//! Each hardware queue keeps its ring and tracker behind its own lock on its own cache line.
//!
//! Two io_uring rules reach the caller. A submission belongs to the thread that entered it:
//! if that thread exits while the kernel still holds the submission, the kernel may cancel
//! it (the request then ends with `IoErr`), so threads that issue I/O should outlive it.
//! And a request cannot be aborted: the timeout handler re-arms it (the default), since
//! its buffers must stay put until the kernel gives them back.

mod config;
#[allow(unsafe_code)]
mod engine;
mod issue;
mod open;
mod pool;
mod rings;
mod tracker;

use config::*;
pub use config::{errno_to_status, BackingKind, Extend, UringConfig, UringError, UringFile};
pub use engine::fs_available;
pub use pool::{FixedPool, MAX_FIXED_BUFFERS};

use crossbeam_utils::CachePadded;
use engine::{Ring, RingConfig};
use mqblk_core::hctx::thread_number;
use mqblk_core::tag::MAX_DEPTH;
use mqblk_core::{
    Bio, BlkStatus, CompletionBatch, Driver, HctxIdx, MapQueues, Nanos, QueueLimits, QueueRqs,
    ReqFlags, ReqOp, Request, RqId, TagSetConfig, TagSetFlags, SECTOR_SHIFT,
};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use thiserror::Error;
use tracker::{FlushPlan, OpKind, SegSpec, Tracker};

/// The most hardware queues (rings) a device may ask for; as for `null`, a fixed bound keeps
/// configurations portable between machines.
pub const MAX_HW_QUEUES: u16 = 1024;
/// The most segments, and so bios, per request ([`UringDevice::queue_limits`]: fewer when
/// the disk's `max_segments` says so). Bios contiguous on disk go as one vectored
/// submission; in the worst case (registered buffers, or gaps) each is one, and a request's
/// submissions must fit in its ring at once.
pub const MAX_SEGMENTS: u16 = 256;
/// The largest logical block size a queue accepts.
pub const MAX_BLOCK_SIZE: u32 = 65536;
/// The kernel's limit on SQ entries (`IORING_MAX_ENTRIES`).
const MAX_RING_ENTRIES: u32 = 32768;
/// Rings of their own per hardware queue for the threads that reap it, with
/// [`UringConfig::single_issuer`]; threads past them share the queue's ring.
pub const OWNED_RINGS: usize = 8;
/// The longest a submitter sleeps for a completion before it looks again, when another
/// thread may finish what it waits for: on the shared ring the completion another
/// submitter reaped first, on its own ring a request of its that another thread issued on
/// that thread's ring. Short beside a disk's service time. Without either, the wait has no
/// timeout, as fio's has none: a timer armed and cancelled at every wait cost, on this
/// project's VM, a tenth of the CPU per I/O on tmpfs (2 jobs x QD32 on one hardware queue,
/// eight alternating rounds: 3.3-4.3 us an I/O with it, 3.0-3.5 without).
const WAIT_BACKSTOP: std::time::Duration = std::time::Duration::from_millis(1);

/// One file of the device as [`UringDevice::open`] found it.
struct OpenedFile {
    file: File,
    meta: std::fs::Metadata,
    kind: BackingKind,
    size: u64,
    lbs: u32,
}

/// One ring of a hardware queue (with its tracker) and scratch space for building a
/// request's submissions, so the issue path does not allocate.
struct HctxRing {
    ring: Ring,
    specs: Vec<SegSpec>,
    /// Reads and writes issued on this ring from registered buffers, and from others.
    /// Counted here, under the ring's lock, rather than on the device, whose counters every
    /// submitter wrote at every I/O next to fields every I/O reads.
    fixed_ios: u64,
    plain_ios: u64,
    /// Requests on this (owned) ring that another thread submitted: its queue run
    /// dispatched them here from the dispatch list. Their submitters are not woken by this
    /// ring's completions ([`UringDevice::foreign`]). The queue's flush requests (submitter
    /// 0) count too: what their completion ends may be any thread's.
    foreign: Vec<RqId>,
}

impl HctxRing {
    fn new(ring: Ring) -> HctxRing {
        HctxRing {
            ring,
            specs: Vec::with_capacity(MAX_SEGMENTS as usize),
            fixed_ios: 0,
            plain_ios: 0,
            foreign: Vec::new(),
        }
    }
}

/// A ring one thread owns on a hardware queue ([`UringConfig::single_issuer`]).
struct OwnedRing {
    /// The owning thread's [`thread_number`]; 0 while the slot is free.
    owner: AtomicU64,
    /// Set once by the owner; `None` if its ring could not be set up (it then uses the
    /// queue's shared ring).
    ring: OnceLock<Option<CachePadded<Mutex<HctxRing>>>>,
    /// The ring the owner sleeps on in `wait` (this one's, or the queue's shared one), -1
    /// while it does not: where `wake_submitter` posts its wake-up.
    asleep: AtomicI32,
}

/// One hardware queue: the ring any thread may use, and with `single_issuer` the rings of
/// the threads that reap it, one each.
struct UringHctx {
    shared: CachePadded<Mutex<HctxRing>>,
    /// Submissions in the shared ring (its tracker's `nr_sqes`, stored after every change
    /// under its lock), so that with owned rings a poll takes the shared lock only when the
    /// shared ring has something in flight.
    shared_sqes: AtomicUsize,
    owned: Box<[OwnedRing]>,
    /// Device ring descriptors held by requests in flight on every ring of this queue
    /// ([`UringConfig::virtqueue_size`]).
    descs: CachePadded<AtomicU32>,
}

impl UringHctx {
    /// The rings threads own on this queue (those set up; one that failed is not).
    fn owned_rings(&self) -> impl Iterator<Item = &Mutex<HctxRing>> {
        self.owned.iter().filter_map(|o| o.ring.get()?.as_deref())
    }

    /// Every ring of this queue: the owned ones, then the shared one.
    fn rings(&self) -> impl Iterator<Item = &Mutex<HctxRing>> {
        self.owned_rings().chain([&*self.shared])
    }
}

/// Which of a hardware queue's rings a call is about.
#[derive(Clone, Copy)]
enum Which<'a> {
    Shared,
    Owned(&'a Mutex<HctxRing>),
}

/// A block device doing its I/O through io_uring. Build its tag set from the same
/// configuration ([`UringConfig::tag_set_config`]) and its queue limits from the opened
/// device ([`UringDevice::queue_limits`]).
pub struct UringDevice {
    cfg: UringConfig,
    kind: BackingKind,
    /// The files, and where each lies on the device (`(base, bytes)`, in order).
    files: Arc<[File]>,
    extents: Box<[(u64, u64)]>,
    capacity_sectors: u64,
    logical_block_size: u32,
    rotational: bool,
    /// Descriptors per ring on the device ([`UringConfig::virtqueue_size`]), if limited.
    virtqueue_size: Option<u32>,
    /// Flushes reach the file (an fsync); see `open`.
    write_cache: bool,
    /// The disk under the file or device, as sysfs describes its queue.
    backing: Option<crate::sysfs::QueueShape>,
    /// Its queue limits ([`UringDevice::queue_limits`]), which the ring's descriptor count
    /// on the request path reads too.
    limits: QueueLimits,
    hctxs: Box<[UringHctx]>,
    /// How an owned ring is made (`single_issuer`).
    owned_cfg: RingConfig,
    pool: Option<FixedPool>,
    /// Requests in flight on owned rings whose submitter is another thread (the sum of
    /// every owned ring's `foreign`). While there are any and the kernel cannot post a
    /// wake-up (`msg_ring`), a submitter sleeping on its own ring wakes after
    /// [`WAIT_BACKSTOP`] to look for one of its own that another thread finished. Written
    /// only for such requests.
    foreign: CachePadded<AtomicU32>,
    /// The kernel takes a wake-up for a ring from outside any ring
    /// (`IORING_REGISTER_SEND_MSG_RING`); cleared at the first refusal.
    msg_ring: std::sync::atomic::AtomicBool,
    /// Wake-ups posted ([`UringDevice::wakeups`]).
    wakeups: AtomicU64,
}

impl std::fmt::Debug for UringDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringDevice")
            .field("cfg", &self.cfg)
            .field("kind", &self.kind)
            .field("capacity_sectors", &self.capacity_sectors)
            .field("logical_block_size", &self.logical_block_size)
            .finish_non_exhaustive()
    }
}

impl UringDevice {
    /// The file holding device bytes `offset..offset + len`, and the offset in it; `None`
    /// when they do not lie inside one file.
    fn locate(&self, offset: u64, len: u64) -> Option<(u16, u64)> {
        let i = self
            .extents
            .partition_point(|&(base, _)| base <= offset)
            .checked_sub(1)?;
        let (base, bytes) = self.extents[i];
        let rel = offset - base;
        (rel.checked_add(len)? <= bytes).then_some((i as u16, rel))
    }

    pub fn config(&self) -> &UringConfig {
        &self.cfg
    }

    /// The disk under the file or device, as sysfs describes its queue (`None` where sysfs
    /// has none: tmpfs, overlay).
    pub fn backing(&self) -> Option<&crate::sysfs::QueueShape> {
        self.backing.as_ref()
    }

    /// The registered buffers, with `fixed_buffers`. Reads and writes whose buffer comes
    /// from here go to the kernel as `READ_FIXED`/`WRITE_FIXED`.
    pub fn buf_pool(&self) -> Option<&FixedPool> {
        self.pool.as_ref()
    }

    /// Reads and writes issued so far from registered buffers and from others, summed over
    /// every ring of every hardware queue.
    pub fn fixed_stats(&self) -> (u64, u64) {
        self.hctxs
            .iter()
            .flat_map(UringHctx::rings)
            .fold((0, 0), |(fixed, plain), q| {
                let q = q.lock();
                (fixed + q.fixed_ios, plain + q.plain_ios)
            })
    }

    pub fn path(&self) -> &Path {
        &self.cfg.path
    }

    /// Requests in flight on every ring of hardware queue `hctx`, whoever issued them
    /// (`Driver::inflight` counts only what the calling thread reaps).
    pub fn inflight_all(&self, hctx: HctxIdx) -> usize {
        self.hctx(hctx)
            .rings()
            .map(|r| r.lock().ring.tracker.nr_requests())
            .sum()
    }

    /// Requests in flight on a thread's own ring that another thread submitted (issued
    /// there for it from the dispatch list). While there are any, and the kernel cannot
    /// post a wake-up from outside a ring, waits on own rings keep a timeout (1 ms).
    pub fn foreign_inflight(&self) -> u32 {
        self.foreign.load(Ordering::Relaxed)
    }

    /// Threads asleep in `Driver::wait` where a wake-up reaches them (on any ring, with a
    /// ring of their own).
    pub fn sleepers(&self) -> usize {
        self.hctxs
            .iter()
            .flat_map(|q| q.owned.iter())
            .filter(|s| s.asleep.load(Ordering::SeqCst) >= 0)
            .count()
    }

    /// Wake-ups posted so far to a thread asleep in `Driver::wait` when another thread
    /// reaped a request of its ([`Driver::wake_submitter`]).
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    /// Rings of their own that threads have on hardware queue `hctx`
    /// ([`UringConfig::single_issuer`]).
    pub fn owned_rings(&self, hctx: HctxIdx) -> usize {
        self.hctx(hctx).owned_rings().count()
    }

    pub fn kind(&self) -> BackingKind {
        self.kind
    }

    /// Logical block size in bytes: 512 for a buffered file, the file system's O_DIRECT
    /// alignment for a direct one, `BLKSSZGET` for a block device.
    pub fn logical_block_size(&self) -> u32 {
        self.logical_block_size
    }

    /// Queue limits matching the opened device: its block size (bios must be aligned to
    /// it, which O_DIRECT needs), its capacity, and the disk's request bounds from sysfs
    /// (`max_sectors_kb`, `max_segments`, `max_segment_size`), which the core counts over
    /// how each bio's buffer lies in memory ([`mqblk_core::BvecLayout`]) as the kernel
    /// beneath counts them; a ring without indirect descriptors holds a request of at most
    /// its size less two segments.
    pub fn queue_limits(&self) -> QueueLimits {
        self.limits
    }

    /// [`UringDevice::queue_limits`] for a device of `logical_block_size` and
    /// `capacity_sectors` over the disk `shape`, its ring of `virtqueue_size` descriptors;
    /// worked out once, at open.
    pub(super) fn limits_for(
        shape: Option<&crate::sysfs::QueueShape>,
        virtqueue_size: Option<u32>,
        logical_block_size: u32,
        capacity_sectors: u64,
    ) -> QueueLimits {
        let defaults = QueueLimits::default();
        let max_sectors = shape
            .and_then(|b| b.max_sectors_kb)
            .map_or(defaults.max_sectors, |kb| {
                defaults.max_sectors.min(kb.saturating_mul(2))
            });
        let mut max_segments = shape
            .and_then(|b| b.max_segments)
            .map_or(MAX_SEGMENTS, |n| n.clamp(1, MAX_SEGMENTS as u32) as u16);
        if let Some(d) = virtqueue_size {
            max_segments = max_segments.min(d.saturating_sub(2).clamp(1, u16::MAX as u32) as u16);
        }
        QueueLimits {
            logical_block_size,
            max_segments,
            max_segment_size: shape
                .and_then(|b| b.max_segment_size)
                .unwrap_or(defaults.max_segment_size)
                .max(4096),
            capacity_sectors,
            max_sectors: max_sectors.max(logical_block_size >> SECTOR_SHIFT),
            ..defaults
        }
    }

    /// Descriptors per ring on the device, when the driver limits requests by them.
    pub fn virtqueue_size(&self) -> Option<u32> {
        self.virtqueue_size
    }
}

impl Driver for UringDevice {
    fn name(&self) -> &'static str {
        "uring"
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }

    fn rotational(&self) -> bool {
        self.rotational
    }

    fn write_cache(&self) -> bool {
        self.write_cache
    }

    /// A FUA write is a write with `RWF_DSYNC`; the kernel below does what its device needs.
    fn fua(&self) -> bool {
        true
    }

    fn init_hctx(&self, hctx: HctxIdx, nr_tags: u32) {
        assert!(
            (hctx.0 as usize) < self.hctxs.len(),
            "uring: hardware queue {} beyond the {} configured; build the tag set with UringConfig::tag_set_config",
            hctx.0,
            self.hctxs.len()
        );
        assert!(
            nr_tags <= self.cfg.queue_depth,
            "uring: {nr_tags} tags on hardware queue {} but queue_depth is {}; build the tag set with UringConfig::tag_set_config",
            hctx.0,
            self.cfg.queue_depth
        );
    }

    fn queue_rq(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        last: bool,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus {
        if let Some(status) = self.issue_sync(rq) {
            done.complete(rq.id, status);
            if last {
                self.commit_rqs(hctx);
            }
            return BlkStatus::Ok;
        }
        let which = self.issuer_ring(hctx);
        let (status, due) = self.with_ring(hctx, which, |hq, q| {
            let status = self.issue_ring(hq, q, rq);
            if status == BlkStatus::Ok
                && matches!(which, Which::Owned(_))
                && rq.submitter != thread_number()
            {
                q.foreign.push(rq.id);
                self.foreign.fetch_add(1, Ordering::Relaxed);
            }
            // Also when this request was refused: earlier ones of the batch are queued.
            (status, if last { q.ring.submit_due() } else { None })
        });
        if let Some(due) = due {
            engine::enter_submit(due);
        }
        if status == BlkStatus::DevResource {
            // The device's ring is full (`issue_ring`): `virtio_queue_rq` stops the queue.
            done.stop_queue();
        }
        status
    }

    fn commit_rqs(&self, hctx: HctxIdx) {
        let which = self.issuer_ring(hctx);
        let due = self.with_ring(hctx, which, |_, q| {
            q.ring.push_ready();
            q.ring.submit_due()
        });
        if let Some(due) = due {
            engine::enter_submit(due);
        }
    }

    /// Reaps the calling thread's own ring (made here, with `single_issuer`, the first
    /// time the thread reaps this queue: the threads that reap a queue are its
    /// submitters), and the shared ring when it holds anything.
    fn poll(&self, hctx: HctxIdx, _now: Nanos, done: &mut CompletionBatch) -> usize {
        let mut n = 0;
        if let Some(own) = self.own_ring(hctx, true) {
            n += self.with_ring(hctx, Which::Owned(own), |_, q| {
                let from = done.finished().len();
                let n = q.ring.poll(done);
                if !q.foreign.is_empty() {
                    for &(id, _) in &done.finished()[from..] {
                        if let Some(i) = q.foreign.iter().position(|&f| f == id) {
                            q.foreign.swap_remove(i);
                            self.foreign.fetch_sub(1, Ordering::Relaxed);
                        }
                    }
                }
                n
            });
        }
        if self.shared_busy(hctx) {
            n += self.with_ring(hctx, Which::Shared, |_, q| q.ring.poll(done));
        }
        if n > 0 && self.virtqueue_size.is_some() {
            // `virtblk_done`: the ring has room again, so the queue `virtio_queue_rq`
            // stopped when it had none runs again.
            done.start_stopped_queues();
        }
        n
    }

    /// On a virtio disk, a plug's requests go through `virtio_queue_rqs`, which requeues
    /// each one the ring has no room for.
    fn queue_rqs(&self) -> QueueRqs {
        if self.virtqueue_size.is_some() {
            QueueRqs::RequeueBusy
        } else {
            QueueRqs::OneByOne
        }
    }

    fn holds_requests(&self, hctx: HctxIdx) -> bool {
        self.hctx(hctx).descs.load(Ordering::SeqCst) > 0
    }

    /// Sleeps in `io_uring_enter` until a completion is posted (the submitter's wait for
    /// the interrupt), when something is in flight and nothing is posted yet: on the
    /// calling thread's own ring if it holds anything, else on the shared one. Without the
    /// ring's lock, which a sleeper would hold against every other submitter of the queue
    /// until the next completion. On its own ring, which no other thread reaps and which
    /// holds something that will complete, with no timeout but `max` (a request of its own
    /// on another's ring posts a wake-up here; a kernel that cannot gets a 1 ms timeout
    /// while any such request is in flight); on the shared ring, whose completion another
    /// submitter may reap first, at most 1 ms. With nothing of its own in the kernel, a
    /// thread that has a ring sleeps on it until `max` (1 ms if not given): what it waits
    /// for is on another thread's ring or not dispatched yet, and its completion posts a
    /// wake-up there ([`Driver::wake_submitter`]); the bound is for timers this driver
    /// does not see (a scheduler's idling).
    fn wait(&self, hctx: HctxIdx, woken: &dyn Fn() -> bool, max: Option<Duration>) -> bool {
        let capped = |d: Duration| Some(max.map_or(d, |m| m.min(d)));
        let own = self.own_ring(hctx, false);
        let owned_due = own.and_then(|r| {
            self.with_ring(hctx, Which::Owned(r), |_, q| {
                (q.ring.tracker.nr_sqes() > 0).then(|| q.ring.wait_due())
            })
        });
        let wakeable = self.msg_ring.load(Ordering::Relaxed);
        let (due, timeout) = match owned_due {
            Some(due) if !wakeable && self.foreign.load(Ordering::Relaxed) > 0 => {
                (due, capped(WAIT_BACKSTOP))
            }
            Some(due) => (due, max),
            None if self.shared_busy(hctx) => (
                self.with_ring(hctx, Which::Shared, |_, q| q.ring.wait_due()),
                capped(WAIT_BACKSTOP),
            ),
            None if wakeable => (
                own.and_then(|r| self.with_ring(hctx, Which::Owned(r), |_, q| q.ring.idle_due())),
                max.or(Some(WAIT_BACKSTOP)),
            ),
            None => (None, None),
        };
        let Some((fd, pushed)) = due else {
            return false;
        };
        // Announced before `woken` is asked, as `Ctx::push_remote` parks a bio before it
        // looks for a sleeper (both `SeqCst`): a hand-over is seen here or wakes the sleep.
        let slot = self.own_slot(hctx);
        if let Some(s) = slot {
            s.asleep.store(fd, Ordering::SeqCst);
        }
        if woken() {
            if pushed > 0 {
                engine::enter_submit(engine::Due {
                    fd,
                    n: pushed,
                    getevents: true,
                });
            }
        } else {
            // No timeout unless one is due: a timed wait costs the kernel a timer per sleep
            // (QD1 readers of a tmpfs loop under `none`: 76-79K IOPS with one, 89-92K
            // without).
            engine::wait_for_cqe(fd, pushed, timeout);
        }
        if let Some(s) = slot {
            s.asleep.store(-1, Ordering::Relaxed);
        }
        true
    }

    /// Posts a wake-up to the ring `submitter` sleeps on, if it sleeps on one
    /// (`IORING_REGISTER_SEND_MSG_RING`, `engine::wake_ring`): a request of its own that
    /// another thread's ring completed. A kernel without that (before 6.13) leaves it to
    /// the sleep's 1 ms timeout.
    fn wake_submitter(&self, submitter: u64) {
        if !self.msg_ring.load(Ordering::Relaxed) {
            return;
        }
        for q in self.hctxs.iter() {
            for slot in q.owned.iter() {
                if slot.owner.load(Ordering::Relaxed) != submitter {
                    continue;
                }
                let fd = slot.asleep.load(Ordering::SeqCst);
                if fd < 0 {
                    continue;
                }
                match engine::wake_ring(fd) {
                    Ok(()) => {
                        self.wakeups.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        self.msg_ring.store(false, Ordering::Relaxed);
                        return;
                    }
                    // Refused otherwise (out of memory): the sleep ends at its timeout.
                    Err(_) => {}
                }
            }
        }
    }

    /// Requests issued to the calling thread's own ring and to the shared ring and not yet
    /// reaped: what its `poll` and `wait` look at. Synchronous ones never count.
    fn inflight(&self, hctx: HctxIdx) -> usize {
        self.inflight_owned(hctx)
            + if self.shared_busy(hctx) {
                self.hctx(hctx).shared.lock().ring.tracker.nr_requests()
            } else {
                0
            }
    }

    /// Requests in flight on the calling thread's own ring: the kernel completes them only
    /// when this thread enters it (`IORING_SETUP_DEFER_TASKRUN`).
    fn inflight_owned(&self, hctx: HctxIdx) -> usize {
        self.own_ring(hctx, false)
            .map_or(0, |r| r.lock().ring.tracker.nr_requests())
    }

    /// A regular file's holes (`SEEK_DATA`/`SEEK_HOLE`), which read as zeroes; a block
    /// device cannot tell (`None`).
    fn block_status(&self, sector: u64, nr_sectors: u64) -> Option<Vec<mqblk_core::Extent>> {
        if self.kind != BackingKind::RegularFile || self.files.len() > 1 {
            return None;
        }
        let file = &self.files[0];
        let (mut pos, end) = (
            sector << SECTOR_SHIFT,
            (sector + nr_sectors) << SECTOR_SHIFT,
        );
        let mut out: Vec<mqblk_core::Extent> = Vec::new();
        while pos < end && out.len() < mqblk_core::MAX_EXTENTS {
            let next_data = engine::seek_data_or_hole(file, pos, true).ok()?;
            let (hole, to) = match next_data {
                Some(d) if d <= pos => {
                    let h = engine::seek_data_or_hole(file, pos, false).ok()?;
                    // Data up to the next hole, in whole sectors.
                    (false, h.unwrap_or(end).min(end).next_multiple_of(512))
                }
                // A hole up to the next data (or the end), in whole sectors.
                Some(d) => (true, (d.min(end) / 512 * 512).max(pos + 512)),
                None => (true, end),
            };
            let to = to.min(end);
            out.push(mqblk_core::Extent {
                sectors: (to - pos) >> SECTOR_SHIFT,
                hole,
                zero: hole,
            });
            pos = to;
        }
        Some(out)
    }

    // `timeout` keeps the default, `ResetTimer`: a submission in the kernel cannot be taken
    // back, and its buffers must stay put until its CQE arrives, so a request can only end
    // through `poll`.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_map_to_statuses() {
        let cases = [
            (libc::EIO, BlkStatus::IoErr),
            (libc::ENOSPC, BlkStatus::NoSpc),
            (libc::EDQUOT, BlkStatus::NoSpc),
            (libc::EROFS, BlkStatus::Protection),
            (libc::EPERM, BlkStatus::Protection),
            (libc::EACCES, BlkStatus::Protection),
            (libc::EBADF, BlkStatus::Protection),
            (libc::EINVAL, BlkStatus::Invalid),
            (libc::EOPNOTSUPP, BlkStatus::NotSupp),
            (libc::ENOTSUP, BlkStatus::NotSupp),
            (libc::ENOTTY, BlkStatus::NotSupp),
            (libc::ENODEV, BlkStatus::Offline),
            (libc::ENXIO, BlkStatus::Offline),
            (libc::ETIMEDOUT, BlkStatus::Timeout),
            (libc::EAGAIN, BlkStatus::IoErr),
            (libc::EBUSY, BlkStatus::IoErr),
            (libc::ECANCELED, BlkStatus::IoErr),
            (libc::EFAULT, BlkStatus::IoErr),
            (0, BlkStatus::IoErr),
            (-1, BlkStatus::IoErr),
            (i32::MAX, BlkStatus::IoErr),
        ];
        for (errno, status) in cases {
            assert_eq!(errno_to_status(errno), status, "errno {errno}");
        }
    }
}
