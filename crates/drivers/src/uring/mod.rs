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
//! Each hardware queue keeps its ring and tracker behind its own lock on its own cache line.
//!
//! Two io_uring rules reach the caller. A submission belongs to the thread that entered it:
//! if that thread exits while the kernel still holds the submission, the kernel may cancel
//! it (the request then ends with `IoErr`), so threads that issue I/O should outlive it.
//! And a request cannot be aborted: the timeout handler re-arms it (the default), since
//! its buffers must stay put until the kernel gives them back.

#[allow(unsafe_code)]
mod engine;
mod pool;
mod tracker;

pub use pool::{FixedPool, MAX_FIXED_BUFFERS};

use crossbeam_utils::CachePadded;
use engine::{Ring, RingConfig};
use mqblk_core::hctx::thread_number;
use mqblk_core::tag::MAX_DEPTH;
use mqblk_core::{
    Bio, BlkStatus, CompletionBatch, Driver, HctxIdx, MapQueues, Nanos, QueueLimits, ReqFlags,
    ReqOp, Request, RqId, TagSetConfig, TagSetFlags, SECTOR_SHIFT,
};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use thiserror::Error;
use tracker::{FlushPlan, OpKind, SegSpec, Tracker};

/// The most hardware queues (rings) a device may ask for; as for `null`, a fixed bound keeps
/// configurations portable between machines.
pub const MAX_HW_QUEUES: u16 = 1024;
/// Bios per request (`max_segments` in [`UringDevice::queue_limits`]). Bios contiguous on
/// disk go as one vectored submission; in the worst case (registered buffers, or gaps) each
/// is one, and a request's submissions must fit in its ring at once.
pub const MAX_SEGMENTS: u16 = 128;
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

/// What the device's path turned out to be.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BackingKind {
    RegularFile,
    BlockDevice,
}

/// How a regular file is grown to [`UringConfig::size_bytes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extend {
    /// `ftruncate`: the new part is a hole (a disk image, as `qemu-img create` makes).
    Sparse,
    /// `fallocate`: blocks are reserved, unwritten (fio's default `fallocate=native` for a
    /// file its jobs only write).
    Allocate,
    /// Written with data, as fio lays out a file a job will read ("Laying out IO file"),
    /// so reads reach written blocks instead of holes the file system answers itself.
    Write,
}

/// A further file of a device made of several (a fio file set laid out on one device):
/// it holds the device's bytes from `base` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UringFile {
    pub path: PathBuf,
    /// Byte address on the device of the file's offset 0: past the end of the file before
    /// it, a multiple of 512.
    pub base: u64,
    /// As [`UringConfig::size_bytes`], for this file.
    pub size_bytes: Option<u64>,
    pub extend: Extend,
}

/// The device's knobs, named after fio's `io_uring` engine options where it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UringConfig {
    /// A regular file or a block device.
    pub path: PathBuf,
    /// Hardware queues, one io_uring each.
    pub nr_hw_queues: u16,
    /// Driver tags per hardware queue.
    pub queue_depth: u32,
    /// Open with `O_DIRECT` (fio `direct=1`): bypass the page cache.
    pub direct: bool,
    /// Open read-only. Writes, discards and write-zeroes then fail with `Protection` (the
    /// kernel's `EBADF`); flushes still succeed.
    pub read_only: bool,
    /// A kernel thread polls the SQ (`IORING_SETUP_SQPOLL`, fio `sqthread_poll`), on this
    /// CPU if given (`IORING_SETUP_SQ_AFF`, fio `sqthread_poll_cpu`).
    pub sqpoll: bool,
    pub sqpoll_cpu: Option<u32>,
    /// Register the device's files with every ring (`IORING_REGISTER_FILES`, fio
    /// `registerfiles`): submissions name a file by index instead of a descriptor the
    /// kernel looks up each time.
    pub register_files: bool,
    /// Completions are polled from the device (`IORING_SETUP_IOPOLL`, fio `hipri`). Needs
    /// `direct` and a block device whose driver supports polling; flushes then run
    /// synchronously, as an IOPOLL ring takes only reads and writes.
    pub iopoll: bool,
    /// Regular file: create it if missing and extend it to this size if shorter, as fio
    /// does; only the first `size_bytes` are used. Block device: use the first `size_bytes`
    /// (it must not exceed the device). `None`: the whole file or device.
    pub size_bytes: Option<u64>,
    /// How the part of a regular file that `size_bytes` adds is made.
    pub extend: Extend,
    /// Registered buffers (fio's `fixedbufs`): the device makes a pool of `fixed_buf_count`
    /// buffers of `fixed_buf_size` bytes, registers it with every ring, and issues reads and
    /// writes whose buffer comes from the pool ([`UringDevice::buf_pool`]) as
    /// `IORING_OP_READ_FIXED`/`WRITE_FIXED`. Others go as plain reads and writes.
    pub fixed_buffers: bool,
    /// Buffers in the pool (0: `queue_depth` per hardware queue).
    pub fixed_buf_count: u32,
    /// Bytes per pooled buffer.
    pub fixed_buf_size: u32,
    /// What the queue reports as `rotational`; `None` reads sysfs: a block device's own
    /// `queue/rotational` (its disk's for a partition), or for a regular file that of the
    /// disk its file system is on (`st_dev`), as BFQ in the kernel sees the disk under it.
    pub rotational: Option<bool>,
    /// Descriptors in each hardware queue's ring on the device, for a virtio-blk disk whose
    /// rings lack indirect descriptors: a request holds one per 4 KiB page of its data plus
    /// two while in flight (`virtblk_add_req`), and one that does not fit waits
    /// (`virtio_queue_rq` answers `BLK_STS_DEV_RESOURCE`), so large requests back up in the
    /// scheduler above as they do in the kernel. `None` reads it from sysfs for the disk
    /// under the path ([`crate::sysfs::QueueShape::virtqueue_size`]); `Some(0)` turns the
    /// limit off.
    pub virtqueue_size: Option<u32>,
    /// Files after `path` (which holds the device from byte 0), each at its own place;
    /// empty for a device of one file. A request must lie inside one file (the block
    /// layer never merges across the gaps between them); a flush syncs them all.
    pub more_files: Vec<UringFile>,
    /// Each thread that reaps a hardware queue gets a ring of its own on it, made at its
    /// first poll of the queue and owned by it (`IORING_SETUP_SINGLE_ISSUER |
    /// IORING_SETUP_DEFER_TASKRUN`, as fio's engine sets up its rings); it issues what it
    /// dispatches there from then on. Up to [`OWNED_RINGS`] per queue; further threads, and
    /// a thread before its first poll, use the queue's shared ring. Completions wait in the
    /// kernel until the owner asks for them, instead of waking it or kicking it with task
    /// work at every one (on tmpfs, 8.6% of the time went to waking the kernel's idle io-wq
    /// workers alone), and submitters sharing a queue neither wait on one ring's lock nor
    /// wake each other at every completion. The price: a request on a thread's ring
    /// completes only when that thread polls or waits, and that includes other threads'
    /// requests that its queue runs dispatched. So set it only where every thread that
    /// issues keeps polling while it has anything in flight and, before it ends, polls
    /// until [`Driver::inflight_owned`] is zero on every queue (`SubmitterHandle::retire`
    /// in the runtime), as `mqblk bench`'s jobs do. Ignored with `sqpoll`, whose kernel
    /// thread submits.
    pub single_issuer: bool,
}

impl Default for UringConfig {
    fn default() -> UringConfig {
        UringConfig {
            path: PathBuf::new(),
            nr_hw_queues: 1,
            queue_depth: 64,
            direct: true,
            read_only: false,
            sqpoll: false,
            sqpoll_cpu: None,
            register_files: false,
            iopoll: false,
            size_bytes: None,
            extend: Extend::Sparse,
            fixed_buffers: false,
            fixed_buf_count: 0,
            fixed_buf_size: 1 << 20,
            rotational: None,
            virtqueue_size: None,
            more_files: Vec::new(),
            single_issuer: false,
        }
    }
}

/// A configuration refused, or a device that could not be set up. One line each, naming the
/// knob or the step that failed.
#[derive(Debug, Error)]
pub enum UringError {
    #[error("uring: path must name a regular file or a block device")]
    NoPath,
    #[error("uring: nr_hw_queues {0} out of range 1..={MAX_HW_QUEUES}")]
    NrHwQueues(u16),
    #[error("uring: queue_depth {0} out of range 1..={MAX_DEPTH}")]
    QueueDepth(u32),
    #[error("uring: size_bytes {0} must be a non-zero multiple of 512")]
    SizeBytes(u64),
    #[error("uring: iopoll needs direct (O_DIRECT)")]
    IopollNeedsDirect,
    #[error("uring: iopoll works only on block devices, and {0} is a regular file")]
    IopollNeedsBlockDevice(PathBuf),
    #[error("uring: fixed_buf_count {0} out of range 1..={MAX_FIXED_BUFFERS}")]
    FixedBufCount(u32),
    #[error("uring: fixed_buf_size {0} out of range 4096..=1073741824")]
    FixedBufSize(u32),
    #[error("uring: registering {count} buffers of {size} bytes: {source} (raise `ulimit -l` or use fewer, smaller buffers)")]
    Register {
        count: u32,
        size: u32,
        source: io::Error,
    },
    #[error("uring: open {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("uring: {0} is neither a regular file nor a block device")]
    NotFileOrBlock(PathBuf),
    #[error("uring: size_bytes {size} exceeds the {actual} bytes of read-only {path}")]
    ReadOnlyTooShort {
        path: PathBuf,
        size: u64,
        actual: u64,
    },
    #[error("uring: extend {path} to size_bytes {size}: {source}")]
    Extend {
        path: PathBuf,
        size: u64,
        source: io::Error,
    },
    #[error("uring: size_bytes {size} exceeds the {actual} bytes of block device {path}")]
    DeviceTooSmall {
        path: PathBuf,
        size: u64,
        actual: u64,
    },
    #[error("uring: {0} holds less than one logical block; set size_bytes to create or extend it")]
    Empty(PathBuf),
    #[error("uring: {what} of {path}: {source}")]
    Query {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("uring: {path} has logical block size {size}, outside the powers of two 512..={MAX_BLOCK_SIZE}")]
    BlockSize { path: PathBuf, size: u32 },
    #[error("uring: io_uring setup for hardware queue {hctx}: {source}")]
    Setup { hctx: u16, source: io::Error },
    #[error("uring: {path} at byte {base} overlaps the file before it (which ends at {end})")]
    FileOverlap { path: PathBuf, base: u64, end: u64 },
    #[error("uring: {0}: a device's files are all regular files or all block devices")]
    MixedKinds(PathBuf),
    #[error("uring: {0}: a device of several files cannot poll (iopoll)")]
    IopollOneFile(PathBuf),
    #[error("uring: probing io_uring opcodes: {0}")]
    Probe(#[source] io::Error),
    #[error("uring: the kernel does not support io_uring opcode {0}")]
    MissingOpcode(&'static str),
}

impl UringConfig {
    /// Checks the knobs that need no file system access.
    pub fn validate(&self) -> Result<(), UringError> {
        if self.path.as_os_str().is_empty() {
            return Err(UringError::NoPath);
        }
        if !(1..=MAX_HW_QUEUES).contains(&self.nr_hw_queues) {
            return Err(UringError::NrHwQueues(self.nr_hw_queues));
        }
        if !(1..=MAX_DEPTH).contains(&self.queue_depth) {
            return Err(UringError::QueueDepth(self.queue_depth));
        }
        if let Some(size) = self.size_bytes {
            if size == 0 || size % 512 != 0 {
                return Err(UringError::SizeBytes(size));
            }
        }
        if self.iopoll && !self.direct {
            return Err(UringError::IopollNeedsDirect);
        }
        if let Some(f) = self.more_files.first() {
            if self.iopoll {
                return Err(UringError::IopollOneFile(f.path.clone()));
            }
        }
        for f in &self.more_files {
            if f.path.as_os_str().is_empty() {
                return Err(UringError::NoPath);
            }
            if let Some(size) = f.size_bytes {
                if size == 0 || size % 512 != 0 {
                    return Err(UringError::SizeBytes(size));
                }
            }
        }
        if self.fixed_buffers {
            let count = self.fixed_buf_count();
            if !(1..=MAX_FIXED_BUFFERS).contains(&count) {
                return Err(UringError::FixedBufCount(count));
            }
            if !(4096..=1 << 30).contains(&self.fixed_buf_size) {
                return Err(UringError::FixedBufSize(self.fixed_buf_size));
            }
        }
        Ok(())
    }

    /// The pool size `fixed_buf_count` stands for.
    pub fn fixed_buf_count(&self) -> u32 {
        match self.fixed_buf_count {
            0 => self.queue_depth.saturating_mul(self.nr_hw_queues as u32),
            n => n,
        }
    }

    /// The tag set this device wants. `BLOCKING`: `queue_rq` enters the kernel, and runs
    /// block-device discards and IOPOLL flushes synchronously.
    pub fn tag_set_config(&self) -> TagSetConfig {
        TagSetConfig {
            maps: MapQueues {
                default: self.nr_hw_queues,
                read: 0,
                poll: 0,
            },
            queue_depth: self.queue_depth,
            reserved_tags: 0,
            // As `loop_add`: a device over a file (or another device) defaults to `none`,
            // the scheduler of what is under it doing the ordering.
            flags: TagSetFlags::BLOCKING.union(TagSetFlags::NO_SCHED_BY_DEFAULT),
        }
    }
}

/// Maps an errno from a completion or a synchronous call to the request's status. The one
/// place errnos become statuses; unknown ones are I/O errors, and none panics.
pub fn errno_to_status(errno: i32) -> BlkStatus {
    match errno {
        libc::EIO => BlkStatus::IoErr,
        libc::ENOSPC | libc::EDQUOT => BlkStatus::NoSpc,
        // EBADF: a write to a file or device opened read-only.
        libc::EROFS | libc::EPERM | libc::EACCES | libc::EBADF => BlkStatus::Protection,
        // EFBIG: beyond the largest file the file system allows.
        libc::EINVAL | libc::EFBIG => BlkStatus::Invalid,
        // ENOTTY: an ioctl the device does not know. ENOTSUP is EOPNOTSUPP on Linux.
        libc::EOPNOTSUPP | libc::ENOTTY | libc::ENOSYS => BlkStatus::NotSupp,
        libc::ENODEV | libc::ENXIO | libc::ENOMEDIUM => BlkStatus::Offline,
        libc::ETIMEDOUT => BlkStatus::Timeout,
        // EAGAIN and EBUSY after the one retry, ECANCELED, EFAULT and anything unknown.
        _ => BlkStatus::IoErr,
    }
}

fn io_status(e: &io::Error) -> BlkStatus {
    e.raw_os_error().map_or(BlkStatus::IoErr, errno_to_status)
}

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
    hctxs: Box<[UringHctx]>,
    /// How an owned ring is made (`single_issuer`).
    owned_cfg: RingConfig,
    pool: Option<FixedPool>,
    /// Requests in flight on owned rings whose submitter is another thread (the sum of
    /// every owned ring's `foreign`). While there are any, a submitter sleeping on its own
    /// ring wakes after [`WAIT_BACKSTOP`] to look for one of its own that another thread
    /// finished; the kernel would send its CPU an IPI. Written only for such requests.
    foreign: CachePadded<AtomicU32>,
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
    /// Opens the file or block device, sizes it, sets up one ring per hardware queue and
    /// checks that the kernel supports every opcode the device will submit.
    pub fn open(cfg: UringConfig) -> Result<Arc<UringDevice>, UringError> {
        cfg.validate()?;
        let path = cfg.path.clone();
        // Refuse IOPOLL on a regular file before `open` could create one.
        if cfg.iopoll {
            let block = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_block_device());
            if !block && cfg.size_bytes.is_some() {
                return Err(UringError::IopollNeedsBlockDevice(path));
            }
        }
        let first = Self::open_file(&cfg, &path, cfg.size_bytes, cfg.extend)?;
        let (kind, meta, mut lbs) = (first.kind, first.meta.clone(), first.lbs);
        let mut extents = vec![(0u64, first.size)];
        let mut files = vec![first.file];
        for f in &cfg.more_files {
            let o = Self::open_file(&cfg, &f.path, f.size_bytes, f.extend)?;
            let end = extents.last().map_or(0, |&(b, l)| b + l);
            if f.base < end {
                return Err(UringError::FileOverlap {
                    path: f.path.clone(),
                    base: f.base,
                    end,
                });
            }
            if o.kind != kind {
                return Err(UringError::MixedKinds(f.path.clone()));
            }
            lbs = lbs.max(o.lbs);
            extents.push((f.base, o.size));
            files.push(o.file);
        }
        if cfg.iopoll && kind != BackingKind::BlockDevice {
            return Err(UringError::IopollNeedsBlockDevice(path));
        }
        if !lbs.is_power_of_two() || !(512..=MAX_BLOCK_SIZE).contains(&lbs) {
            return Err(UringError::BlockSize { path, size: lbs });
        }
        // Each file in whole logical blocks, at a base the block size divides.
        for (i, e) in extents.iter_mut().enumerate() {
            e.1 = e.1 / lbs as u64 * lbs as u64;
            if e.0 % lbs as u64 != 0 {
                let path = cfg.more_files[i - 1].path.clone();
                return Err(UringError::BlockSize { path, size: lbs });
            }
        }
        let end = extents.last().map_or(0, |&(b, l)| b + l);
        let capacity_sectors = end >> SECTOR_SHIFT;
        if extents.iter().any(|&(_, l)| l == 0) {
            return Err(UringError::Empty(path));
        }
        let backing = crate::sysfs::backing_dev(&meta).and_then(crate::sysfs::QueueShape::of_dev);
        let rotational = cfg
            .rotational
            .unwrap_or_else(|| backing.as_ref().and_then(|b| b.rotational) == Some(true));
        let virtqueue_size = match cfg.virtqueue_size {
            Some(0) => None,
            Some(n) => Some(n),
            None => backing.as_ref().and_then(|b| b.virtqueue_size),
        };
        // A regular file has the page cache and its file system's metadata to make durable
        // whatever its disk does; a block device has a cache if its queue says "write back"
        // (assumed when sysfs does not say).
        let write_cache = !meta.file_type().is_block_device()
            || backing.as_ref().and_then(|b| b.write_cache).unwrap_or(true);
        let files: Arc<[File]> = files.into();
        let ring_cfg = RingConfig {
            entries: (cfg.queue_depth + MAX_SEGMENTS as u32 + 2)
                .next_power_of_two()
                .min(MAX_RING_ENTRIES),
            sqpoll: cfg.sqpoll,
            sqpoll_cpu: cfg.sqpoll_cpu,
            iopoll: cfg.iopoll,
            register_files: cfg.register_files,
            single_issuer: false,
        };
        let owned_cfg = RingConfig {
            single_issuer: true,
            ..ring_cfg
        };
        let owned_slots = if cfg.single_issuer && !cfg.sqpoll {
            OWNED_RINGS
        } else {
            0
        };
        let mut hctxs = Vec::with_capacity(cfg.nr_hw_queues as usize);
        for h in 0..cfg.nr_hw_queues {
            let ring = Ring::new(files.clone(), ring_cfg, cfg.queue_depth)
                .map_err(|source| UringError::Setup { hctx: h, source })?;
            hctxs.push(UringHctx {
                shared: CachePadded::new(Mutex::new(HctxRing::new(ring))),
                shared_sqes: AtomicUsize::new(0),
                owned: (0..owned_slots)
                    .map(|_| OwnedRing {
                        owner: AtomicU64::new(0),
                        ring: OnceLock::new(),
                    })
                    .collect(),
                descs: CachePadded::new(AtomicU32::new(0)),
            });
        }
        let pool = if cfg.fixed_buffers {
            let (count, size) = (cfg.fixed_buf_count(), cfg.fixed_buf_size);
            let pool = FixedPool::new(count, size as usize);
            for h in hctxs.iter() {
                h.shared
                    .lock()
                    .ring
                    .register_buffers(pool.inner())
                    .map_err(|source| UringError::Register {
                        count,
                        size,
                        source,
                    })?;
            }
            Some(pool)
        } else {
            None
        };
        let mut needed = vec![engine::OP_READ, engine::OP_WRITE];
        if cfg.fixed_buffers {
            needed.push(engine::OP_READ_FIXED);
            needed.push(engine::OP_WRITE_FIXED);
        }
        if !cfg.iopoll {
            needed.push(engine::OP_FSYNC);
        }
        if kind == BackingKind::RegularFile {
            needed.push(engine::OP_FALLOCATE);
        }
        let missing = hctxs[0]
            .shared
            .lock()
            .ring
            .unsupported(&needed)
            .map_err(UringError::Probe)?;
        if let Some(name) = missing {
            return Err(UringError::MissingOpcode(name));
        }
        Ok(Arc::new(UringDevice {
            cfg,
            kind,
            files,
            extents: extents.into(),
            capacity_sectors,
            logical_block_size: lbs,
            rotational,
            virtqueue_size,
            write_cache,
            backing,
            hctxs: hctxs.into(),
            owned_cfg,
            pool,
            foreign: CachePadded::new(AtomicU32::new(0)),
        }))
    }

    /// Opens one of the device's files (creating a regular file when it is sized), sizes
    /// it, and reads its kind and logical block size.
    fn open_file(
        cfg: &UringConfig,
        path: &Path,
        size_bytes: Option<u64>,
        extend: Extend,
    ) -> Result<OpenedFile, UringError> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(!cfg.read_only);
        if size_bytes.is_some() && !cfg.read_only {
            opts.create(true);
        }
        if cfg.direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = opts.open(path).map_err(|source| UringError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let query = |what: &'static str| {
            let path = path.to_path_buf();
            move |source| UringError::Query { what, path, source }
        };
        let meta = file.metadata().map_err(query("fstat"))?;
        let kind = if meta.file_type().is_block_device() {
            BackingKind::BlockDevice
        } else if meta.is_file() {
            BackingKind::RegularFile
        } else {
            return Err(UringError::NotFileOrBlock(path.to_path_buf()));
        };
        let (size, lbs) = match kind {
            BackingKind::RegularFile => {
                let size = Self::size_file(cfg, path, size_bytes, extend, &file, meta.len())?;
                // O_DIRECT needs offsets aligned as the file system says; buffered I/O is
                // fine with the block layer's 512.
                let lbs = if cfg.direct {
                    engine::dio_offset_align(&file)
                        .map_err(query("statx(STATX_DIOALIGN)"))?
                        .unwrap_or(512)
                        .max(512)
                } else {
                    512
                };
                (size, lbs)
            }
            BackingKind::BlockDevice => {
                let actual = engine::blk_size_bytes(&file).map_err(query("BLKGETSIZE64"))?;
                let size = match size_bytes {
                    Some(size) if size > actual => {
                        return Err(UringError::DeviceTooSmall {
                            path: path.to_path_buf(),
                            size,
                            actual,
                        })
                    }
                    Some(size) => size,
                    None => actual,
                };
                let lbs = engine::blk_logical_block_size(&file).map_err(query("BLKSSZGET"))?;
                (size, lbs)
            }
        };
        Ok(OpenedFile {
            file,
            meta,
            kind,
            size,
            lbs,
        })
    }

    /// The bytes of a regular file the device uses, creating or extending it as asked.
    fn size_file(
        cfg: &UringConfig,
        path: &Path,
        size_bytes: Option<u64>,
        extend: Extend,
        file: &File,
        len: u64,
    ) -> Result<u64, UringError> {
        match size_bytes {
            Some(size) if size > len && cfg.read_only => Err(UringError::ReadOnlyTooShort {
                path: path.to_path_buf(),
                size,
                actual: len,
            }),
            Some(size) if size > len => {
                let grown = match extend {
                    Extend::Sparse => file.set_len(size),
                    Extend::Allocate => engine::allocate(file, len, size - len),
                    Extend::Write => write_out(path, len, size),
                };
                grown.map_err(|source| UringError::Extend {
                    path: path.to_path_buf(),
                    size,
                    source,
                })?;
                Ok(size)
            }
            Some(size) => Ok(size),
            None => Ok(len),
        }
    }

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
    /// there for it from the dispatch list). While there are any, waits on own rings keep
    /// their timeout (1 ms).
    pub fn foreign_inflight(&self) -> u32 {
        self.foreign.load(Ordering::Relaxed)
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
    /// it, which O_DIRECT needs), its capacity, one bio per submission, and requests no
    /// larger than the disk under it takes of buffers in 4 KiB pages
    /// ([`crate::sysfs::QueueShape::largest_request_kb`]) or its ring holds.
    pub fn queue_limits(&self) -> QueueLimits {
        let defaults = QueueLimits::default();
        let mut max_sectors = defaults.max_sectors;
        if let Some(kb) = self.backing.as_ref().and_then(|b| b.largest_request_kb()) {
            max_sectors = max_sectors.min(kb.saturating_mul(2));
        }
        if let Some(d) = self.virtqueue_size {
            max_sectors = max_sectors.min(d.saturating_sub(2).max(1).saturating_mul(8));
        }
        QueueLimits {
            logical_block_size: self.logical_block_size,
            max_segments: MAX_SEGMENTS,
            capacity_sectors: self.capacity_sectors,
            max_sectors: max_sectors.max(self.logical_block_size >> SECTOR_SHIFT),
            ..defaults
        }
    }

    /// Descriptors per ring on the device, when the driver limits requests by them.
    pub fn virtqueue_size(&self) -> Option<u32> {
        self.virtqueue_size
    }

    fn hctx(&self, hctx: HctxIdx) -> &UringHctx {
        &self.hctxs[hctx.0 as usize]
    }

    /// The calling thread's own ring on `hctx`, if it has one; with `make`, one is made if
    /// it has none and a slot is free. Slots are claimed in order and never released, so
    /// the first free one ends the search.
    fn own_ring(&self, hctx: HctxIdx, make: bool) -> Option<&Mutex<HctxRing>> {
        let q = self.hctx(hctx);
        if q.owned.is_empty() {
            return None;
        }
        let me = thread_number();
        for slot in q.owned.iter() {
            match slot.owner.load(Ordering::Acquire) {
                o if o == me => return slot.ring.get().and_then(|r| r.as_deref()),
                0 if !make => return None,
                0 => {
                    let claimed = slot
                        .owner
                        .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok();
                    if claimed {
                        return slot.ring.get_or_init(|| self.make_owned(hctx)).as_deref();
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// A ring for the calling thread alone, with the pool's buffers registered. `None`
    /// (said once, on standard error) when the kernel refuses one: the thread then keeps
    /// to the shared ring.
    fn make_owned(&self, hctx: HctxIdx) -> Option<CachePadded<Mutex<HctxRing>>> {
        let made = Ring::new(self.files.clone(), self.owned_cfg, self.cfg.queue_depth).and_then(
            |mut ring| {
                if let Some(pool) = &self.pool {
                    ring.register_buffers(pool.inner())?;
                }
                Ok(ring)
            },
        );
        match made {
            Ok(ring) => Some(CachePadded::new(Mutex::new(HctxRing::new(ring)))),
            Err(e) => {
                eprintln!(
                    "mqblk: uring: hardware queue {}: a ring of the thread's own could not be set up ({e}); it shares the queue's ring",
                    hctx.0
                );
                None
            }
        }
    }

    /// The ring the calling thread issues to on `hctx`: its own if it has one, else the
    /// shared one.
    fn issuer_ring(&self, hctx: HctxIdx) -> Which<'_> {
        self.own_ring(hctx, false)
            .map_or(Which::Shared, Which::Owned)
    }

    /// Whether the shared ring of `hctx` may hold something: always without owned rings.
    fn shared_busy(&self, hctx: HctxIdx) -> bool {
        let q = self.hctx(hctx);
        q.owned.is_empty() || q.shared_sqes.load(Ordering::Relaxed) > 0
    }

    /// Runs `f` on one ring of `hctx` under its lock, then gives back the device
    /// descriptors its completions released and notes what the shared ring holds.
    fn with_ring<R>(
        &self,
        hctx: HctxIdx,
        which: Which<'_>,
        f: impl FnOnce(&UringHctx, &mut HctxRing) -> R,
    ) -> R {
        let hq = self.hctx(hctx);
        let mut q = match which {
            Which::Shared => hq.shared.lock(),
            Which::Owned(r) => r.lock(),
        };
        let before = q.ring.tracker.descs_held();
        let r = f(hq, &mut q);
        let released = before.saturating_sub(q.ring.tracker.descs_held());
        if released > 0 {
            hq.descs.fetch_sub(released, Ordering::Relaxed);
        }
        if matches!(which, Which::Shared) && !hq.owned.is_empty() {
            hq.shared_sqes
                .store(q.ring.tracker.nr_sqes(), Ordering::Relaxed);
        }
        r
    }

    /// Runs the request at once if this device does it synchronously: discard and
    /// write-zeroes on a block device (ioctls), and flushes on an IOPOLL ring, which takes
    /// no fsync. Returns its status, or `None` if it goes to the ring.
    fn issue_sync(&self, rq: &Request) -> Option<BlkStatus> {
        let status = match rq.op {
            ReqOp::Discard | ReqOp::WriteZeroes if self.kind == BackingKind::BlockDevice => {
                self.zero_block_device(rq)
            }
            ReqOp::Flush if self.sync_flushes() => self.sync_data(),
            _ => return None,
        };
        Some(status)
    }

    /// `fdatasync` of every file, synchronously.
    fn sync_data(&self) -> BlkStatus {
        for f in self.files.iter() {
            if let Err(e) = f.sync_data() {
                return io_status(&e);
            }
        }
        BlkStatus::Ok
    }

    /// Whether flushes run synchronously in `queue_rq`: an IOPOLL ring takes no fsync, and
    /// a device of several files needs one per file.
    fn sync_flushes(&self) -> bool {
        self.cfg.iopoll || self.files.len() > 1
    }

    /// Discard or write-zeroes on a block device, flushes around it as its flags ask.
    fn zero_block_device(&self, rq: &Request) -> BlkStatus {
        if rq.cmd_flags.contains(ReqFlags::PREFLUSH) {
            let s = self.sync_data();
            if !s.is_ok() {
                return s;
            }
        }
        for bio in &rq.bios {
            let Some((file, offset)) = self.locate(bio.sector << SECTOR_SHIFT, bio.bytes()) else {
                return BlkStatus::IoErr;
            };
            let (file, len) = (&self.files[file as usize], bio.bytes());
            let r = if rq.op == ReqOp::Discard {
                engine::blk_discard(file, offset, len)
            } else {
                engine::blk_zeroout(file, offset, len)
            };
            if let Err(e) = r {
                return io_status(&e);
            }
        }
        if rq.cmd_flags.contains(ReqFlags::FUA) {
            return self.sync_data();
        }
        BlkStatus::Ok
    }

    /// The flushes the tracker submits around the data.
    fn flush_plan(&self, rq: &Request) -> FlushPlan {
        FlushPlan {
            // Where flushes are synchronous the preflush ran already.
            preflush: rq.cmd_flags.contains(ReqFlags::PREFLUSH)
                && rq.op != ReqOp::Flush
                && !self.sync_flushes(),
            // Writes carry FUA as RWF_DSYNC; the fallocate-based operations need an fsync.
            postflush: rq.cmd_flags.contains(ReqFlags::FUA)
                && matches!(rq.op, ReqOp::Discard | ReqOp::WriteZeroes),
        }
    }

    /// The submission of one bio, or `Invalid` for a bio this device cannot carry out.
    fn bio_spec(&self, op: ReqOp, fua: bool, bio: &mut Bio) -> Result<SegSpec, BlkStatus> {
        let offset = bio.sector << SECTOR_SHIFT;
        let len = bio.bytes();
        let (kind, addr, rw_flags) = match op {
            ReqOp::Read | ReqOp::Write => {
                if len == 0 || u32::try_from(len).is_err() {
                    return Err(BlkStatus::Invalid);
                }
                let Some(buf) = bio.buf.as_mut() else {
                    return Err(BlkStatus::Invalid);
                };
                if (buf.len() as u64) < len {
                    return Err(BlkStatus::Invalid);
                }
                let addr = buf.as_mut_slice().as_mut_ptr().expose_provenance();
                if op == ReqOp::Read {
                    (OpKind::Read, addr, 0)
                } else {
                    (OpKind::Write, addr, if fua { libc::RWF_DSYNC } else { 0 })
                }
            }
            ReqOp::Discard => (OpKind::PunchHole, 0, 0),
            ReqOp::WriteZeroes => (OpKind::ZeroRange, 0, 0),
            ReqOp::Flush => (OpKind::Fsync, 0, 0),
        };
        let mut buf_index = None;
        if matches!(kind, OpKind::Read | OpKind::Write) {
            buf_index = self
                .pool
                .as_ref()
                .and_then(|p| p.inner().index_of(addr, len as usize));
        }
        // The file the bio lies in; one that straddles two, or the gap between them, is an
        // I/O error (the block layer never builds one from a file set's jobs).
        let (file, offset) = if kind == OpKind::Fsync {
            (0, 0)
        } else {
            self.locate(offset, len).ok_or(BlkStatus::IoErr)?
        };
        Ok(SegSpec {
            kind,
            file,
            offset,
            addr,
            len: if kind == OpKind::Fsync { 0 } else { len },
            rw_flags,
            buf_index,
        })
    }

    /// Issues a request to ring `q` of hardware queue `hq`: everything but the synchronous
    /// cases.
    fn issue_ring(&self, hq: &UringHctx, q: &mut HctxRing, rq: &mut Request) -> BlkStatus {
        let plan = self.flush_plan(rq);
        q.specs.clear();
        if rq.op == ReqOp::Flush {
            q.specs.push(SegSpec {
                kind: OpKind::Fsync,
                file: 0,
                offset: 0,
                addr: 0,
                len: 0,
                rw_flags: 0,
                buf_index: None,
            });
        } else {
            let fua = rq.cmd_flags.contains(ReqFlags::FUA);
            for bio in rq.bios.iter_mut() {
                match self.bio_spec(rq.op, fua, bio) {
                    Ok(spec) => {
                        if spec.buf_index.is_some() {
                            q.fixed_ios += 1;
                        } else if matches!(spec.kind, OpKind::Read | OpKind::Write) {
                            q.plain_ios += 1;
                        }
                        q.specs.push(spec);
                    }
                    Err(status) => return status,
                }
            }
        }
        let descs = self.virtqueue_size.map(|size| {
            // Besides its data a virtio-blk request has a header and a status byte
            // (`virtblk_add_req`); a discard or write-zeroes carries one range descriptor.
            // One that could never fit takes the whole ring when it is empty.
            (2 + q.specs.iter().map(descriptors).sum::<u32>()).min(size)
        });
        let n = Tracker::first_phase_sqes(&q.specs, plan);
        if !q.ring.fits(n) {
            // More bios than the ring holds: the queue limits were not ours.
            return BlkStatus::Invalid;
        }
        if !q.ring.has_room(n) {
            // Hand what is queued to the kernel to make room, then look again.
            q.ring.push_ready();
            q.ring.submit();
            if !q.ring.has_room(n) {
                return BlkStatus::Resource;
            }
        }
        if let (Some(size), Some(d)) = (self.virtqueue_size, descs) {
            // Taken on the queue's count, which every ring of the queue shares, as one
            // virtqueue's descriptors are (`virtqueue_add` under the queue's lock).
            let took = hq
                .descs
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                    (held + d <= size).then_some(held + d)
                });
            if took.is_err() {
                // The ring is full: the request waits on the dispatch list for a completion.
                // (`virtio_queue_rq` also stops the queue; `virtio_queue_rqs`, which takes
                // plugged requests, does not, and new requests then go straight to the
                // ring, as here. Stopping it here made mqblk's reader beside a write flood
                // under `none` wait behind merged writes: 780-890 IOPS against 1000-1250
                // without, the kernel's 1290-2730.)
                return BlkStatus::DevResource;
            }
        }
        if self.sync_flushes() && rq.cmd_flags.contains(ReqFlags::PREFLUSH) && rq.op != ReqOp::Flush
        {
            let s = self.sync_data();
            if !s.is_ok() {
                if let Some(d) = descs {
                    hq.descs.fetch_sub(d, Ordering::Relaxed);
                }
                return s;
            }
        }
        q.ring.tracker.start(rq.tag, rq.id, plan, &q.specs);
        if let Some(d) = descs {
            q.ring.tracker.hold_descs(rq.tag, d);
        }
        let pushed = q.ring.push_ready();
        assert_eq!(
            pushed, n,
            "uring: room was checked before the request started"
        );
        BlkStatus::Ok
    }
}

/// Ring descriptors a submission's data takes on a virtio-blk device without indirect
/// descriptors: one per 4 KiB page its buffer spans, as pages of a process's memory seldom
/// adjoin physically (the kernel joins those that do, `blk_rq_map_sg`, so it may need
/// fewer); one range for a discard or write-zeroes; none for a flush.
fn descriptors(spec: &SegSpec) -> u32 {
    const PAGE: u64 = 4096;
    match spec.kind {
        OpKind::Read | OpKind::Write => {
            let (start, end) = (spec.addr as u64, spec.addr as u64 + spec.len.max(1));
            ((end - 1) / PAGE - start / PAGE + 1) as u32
        }
        OpKind::PunchHole | OpKind::ZeroRange => 1,
        OpKind::Fsync => 0,
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
        n
    }

    /// Sleeps in `io_uring_enter` until a completion is posted (the submitter's wait for
    /// the interrupt), when something is in flight and nothing is posted yet: on the
    /// calling thread's own ring if it holds anything, else on the shared one. Without the
    /// ring's lock, which a sleeper would hold against every other submitter of the queue
    /// until the next completion. On its own ring, which no other thread reaps and which
    /// holds something that will complete, with no timeout unless some thread's request
    /// waits on another's ring (then 1 ms).
    fn wait(&self, hctx: HctxIdx) {
        let own = self.own_ring(hctx, false).and_then(|r| {
            self.with_ring(hctx, Which::Owned(r), |_, q| {
                (q.ring.tracker.nr_sqes() > 0).then(|| q.ring.wait_due())
            })
        });
        let (due, backstop) = match own {
            Some(due) => (due, self.foreign.load(Ordering::Relaxed) > 0),
            None if self.shared_busy(hctx) => (
                self.with_ring(hctx, Which::Shared, |_, q| q.ring.wait_due()),
                true,
            ),
            None => (None, false),
        };
        if let Some((fd, pushed)) = due {
            engine::wait_for_cqe(fd, pushed, backstop.then_some(WAIT_BACKSTOP));
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

/// Writes `from..to` of a file with data that is not zeroes (a generator's bytes, so that
/// neither the file system nor a thin disk under it can keep the range as a hole), 1 MiB at
/// a time, then syncs it: fio's layout of a file a job reads. The file is opened again
/// without `O_DIRECT`, whose alignment rules the buffer need not meet.
fn write_out(path: &std::path::Path, from: u64, to: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    const CHUNK: u64 = 1 << 20;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for word in buf.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes());
    }
    let mut at = from;
    while at < to {
        let n = (to - at).min(CHUNK) as usize;
        file.write_all_at(buf.get(..n).unwrap_or(&buf), at)?;
        at += n as u64;
    }
    file.sync_data()
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
