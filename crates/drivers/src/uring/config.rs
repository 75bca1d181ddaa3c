//! The uring driver's configuration, its errors, and the errno to block status mapping.

use super::*;

/// What the device's path turned out to be.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BackingKind {
    RegularFile,
    BlockDevice,
    /// A character device such as `/dev/zero` or `/dev/null`, which fio reads and writes
    /// like a file: it has no size of its own, so the run gives one.
    CharDevice,
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
    /// Left as it is (made empty if missing): a job's writes extend it until the file
    /// system is full (fio's `fill_device`); the size is the most it may take.
    Grow,
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
    #[error("uring: {0} is a host-managed zoned block device, whose zones the uring driver does not manage; use the null device's zoned mode (driver=null, zoned=1) or a zns or smr model")]
    Zoned(PathBuf),
    #[error("uring: {0} is neither a regular file nor a block or character device")]
    NotFileOrBlock(PathBuf),
    #[error("uring: {0} is a character device, which has no size; give size=")]
    CharDeviceSize(PathBuf),
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

pub(super) fn io_status(e: &io::Error) -> BlkStatus {
    e.raw_os_error().map_or(BlkStatus::IoErr, errno_to_status)
}
