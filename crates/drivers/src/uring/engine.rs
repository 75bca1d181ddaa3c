//! The one place that hands memory and file descriptors to the kernel: an io_uring per
//! hardware queue, and the synchronous block-device ioctls and `statx`.
//!
//! Every `unsafe` block below relies on these clauses, each upheld where stated:
//!
//! 1. **`user_data` names one submission until its completion.** It is
//!    `tag << 32 | segment` (see `tracker.rs`). The core gives a driver tag to one request at
//!    a time, and the tracker keeps the tag's slot busy until every submission of the request
//!    has come back, so no two submissions in the kernel share a `user_data`.
//! 2. **The file descriptor stays open while the kernel may use it.** Each [`Ring`] holds
//!    an `Arc<File>`, and dropping a ring waits for its submissions (see `Drop for Ring`).
//! 3. **Data buffers stay valid, and untouched by us, until their completion.** Addresses
//!    come from the `IoBuf`s of the bios of the request being issued. An `IoBuf`'s pages are
//!    one heap allocation that does not move when the `Bio`, or the request's `bios` vector,
//!    moves; it is freed only when the `IoBuf` is dropped. The core owns the `Request` and
//!    its bios; between `queue_rq` returning `Ok` and the driver pushing that request's
//!    completion into a `CompletionBatch`, the core neither reads nor writes, moves out,
//!    resizes or drops the request's bios: merges only join requests that are not started
//!    (`rq_merge_ok` wants `RqState::Idle`), the bios are handed back only by
//!    `end_request` on completion, and the timeout handler (ours keeps the default,
//!    `ResetTimer`) leaves them alone. The tracker pushes the completion only once the last
//!    CQE of the request was reaped. What remains the caller's duty: not to drop a
//!    `RequestQueue` while requests are in flight (it frees its request table before its
//!    driver). `Drop for Ring` still waits for the kernel, to keep that window short.
//! 4. **Registered buffers stay allocated while registered.** A ring registers the buffers
//!    of its device's [`super::pool::FixedPool`] and holds the pool (`Ring::fixed`, declared
//!    after `uring` so the ring is closed, which unregisters them, before the pool can go).
//!    The pool's memory is freed only when the pool is dropped: lent buffers return their
//!    pages to it (`BufHome`), never free them. A fixed submission names buffer `i` only when
//!    its whole range lies inside buffer `i` (`PoolInner::index_of`).
//! 5. **An iovec array stays put while its submission is in flight.** A vectored op's
//!    `iov` points at a segment's `live` vector in the tracker, rebuilt only when that
//!    segment is submitted again (after its CQE), and dropped only when the request
//!    completes (after every CQE of it); each iovec spans part of a bio's `IoBuf`, valid as
//!    in clause 3.

use super::pool::PoolInner;
use super::tracker::{Op, OpKind, Tracker};
use io_uring::{opcode, register::Probe, types, IoUring};
use mqblk_core::hctx::thread_number;
use mqblk_core::CompletionBatch;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

/// The submission entry for one op on `fd`: a plain descriptor (`types::Fd`) or the index of
/// a registered file (`types::Fixed`). A macro, as the two have no trait in common that the
/// io-uring crate lets us name.
macro_rules! entry {
    ($fd:expr, $op:expr) => {{
        let (fd, op): (_, &Op) = ($fd, $op);
        let rw_len = || {
            u32::try_from(op.len).expect("uring: reads and writes over 4 GiB are refused at issue")
        };
        let keep = libc::FALLOC_FL_KEEP_SIZE;
        let e = match op.kind {
            OpKind::Read if op.iov != 0 => {
                opcode::Readv::new(fd, std::ptr::with_exposed_provenance(op.iov), op.iov_cnt)
                    .offset(op.offset)
                    .rw_flags(op.rw_flags)
                    .build()
            }
            OpKind::Write if op.iov != 0 => {
                opcode::Writev::new(fd, std::ptr::with_exposed_provenance(op.iov), op.iov_cnt)
                    .offset(op.offset)
                    .rw_flags(op.rw_flags)
                    .build()
            }
            OpKind::Read => match op.buf_index {
                Some(i) => opcode::ReadFixed::new(
                    fd,
                    std::ptr::with_exposed_provenance_mut(op.addr),
                    rw_len(),
                    i,
                )
                .offset(op.offset)
                .rw_flags(op.rw_flags)
                .build(),
                None => {
                    opcode::Read::new(fd, std::ptr::with_exposed_provenance_mut(op.addr), rw_len())
                        .offset(op.offset)
                        .rw_flags(op.rw_flags)
                        .build()
                }
            },
            OpKind::Write => match op.buf_index {
                Some(i) => opcode::WriteFixed::new(
                    fd,
                    std::ptr::with_exposed_provenance(op.addr),
                    rw_len(),
                    i,
                )
                .offset(op.offset)
                .rw_flags(op.rw_flags)
                .build(),
                None => {
                    opcode::Write::new(fd, std::ptr::with_exposed_provenance(op.addr), rw_len())
                        .offset(op.offset)
                        .rw_flags(op.rw_flags)
                        .build()
                }
            },
            OpKind::Fsync => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
            OpKind::PunchHole => opcode::Fallocate::new(fd, op.len)
                .offset(op.offset)
                .mode(libc::FALLOC_FL_PUNCH_HOLE | keep)
                .build(),
            OpKind::ZeroRange => opcode::Fallocate::new(fd, op.len)
                .offset(op.offset)
                .mode(libc::FALLOC_FL_ZERO_RANGE | keep)
                .build(),
        };
        e.user_data(op.user_data)
    }};
}

/// How long an SQPOLL kernel thread spins without work before it sleeps (and the next
/// submission needs a wakeup syscall), in milliseconds. One second, as fio's default.
pub(crate) const SQPOLL_IDLE_MS: u32 = 1000;

/// `BLKGETSIZE64`: `_IOR(0x12, 114, size_t)`; the kernel writes a `u64` whatever the size
/// in the number says.
const BLKGETSIZE64: libc::Ioctl = libc::_IOR::<libc::size_t>(0x12, 114);
/// `BLKDISCARD`: `_IO(0x12, 119)`, argument `u64 range[2] = { start, len }` in bytes.
const BLKDISCARD: libc::Ioctl = libc::_IO(0x12, 119);
/// `BLKZEROOUT`: `_IO(0x12, 127)`, argument as `BLKDISCARD`.
const BLKZEROOUT: libc::Ioctl = libc::_IO(0x12, 127);

/// The opcodes the driver may submit, with the names a missing one is reported by.
pub(crate) const OP_READ: (u8, &str) = (opcode::Read::CODE, "IORING_OP_READ");
pub(crate) const OP_WRITE: (u8, &str) = (opcode::Write::CODE, "IORING_OP_WRITE");
pub(crate) const OP_FSYNC: (u8, &str) = (opcode::Fsync::CODE, "IORING_OP_FSYNC");
pub(crate) const OP_FALLOCATE: (u8, &str) = (opcode::Fallocate::CODE, "IORING_OP_FALLOCATE");
pub(crate) const OP_READ_FIXED: (u8, &str) = (opcode::ReadFixed::CODE, "IORING_OP_READ_FIXED");
pub(crate) const OP_WRITE_FIXED: (u8, &str) = (opcode::WriteFixed::CODE, "IORING_OP_WRITE_FIXED");

#[derive(Copy, Clone, Debug)]
pub(crate) struct RingConfig {
    /// SQ entries; the CQ gets twice as many.
    pub entries: u32,
    pub sqpoll: bool,
    /// The CPU the SQPOLL thread runs on (`IORING_SETUP_SQ_AFF`), if pinned.
    pub sqpoll_cpu: Option<u32>,
    pub iopoll: bool,
    /// Register the files with the ring (`IORING_REGISTER_FILES`) and submit by index.
    pub register_files: bool,
    /// The ring is entered by one thread only, the first to use it (see
    /// `UringConfig::single_issuer`).
    pub single_issuer: bool,
}

/// One io_uring of a hardware queue and the tracker of what it has in flight.
pub(crate) struct Ring {
    uring: IoUring,
    /// The files submissions target (`Op::file` picks one); kept open by this reference
    /// (clause 2).
    files: Arc<[File]>,
    /// The files are registered: submissions name them by index (`IOSQE_FIXED_FILE`).
    registered: bool,
    /// Made with `IORING_SETUP_SINGLE_ISSUER`: only `owner` may enter it.
    single_issuer: bool,
    /// The thread ([`thread_number`]) that enabled the ring (`IORING_REGISTER_ENABLE_RINGS`)
    /// and so is its submitter task; 0 until a thread first enters it.
    owner: u64,
    pub(crate) tracker: Tracker,
    sq_entries: usize,
    cq_entries: usize,
    /// The registered buffers, kept alive for as long as the ring (clause 4). Declared after
    /// `uring`, so it is dropped after the ring is closed.
    fixed: Option<Arc<PoolInner>>,
}

impl Ring {
    pub(crate) fn new(files: Arc<[File]>, cfg: RingConfig, nr_tags: u32) -> io::Result<Ring> {
        let mut b = IoUring::builder();
        // Tests and tools fork (losetup, mount); the child must not share our rings.
        b.dontfork();
        b.setup_cqsize(2 * cfg.entries);
        // Completions from the kernel's io-wq workers are handed to the submitting task as
        // task work. By default that interrupts the task wherever it runs (a signal-like
        // kick per completion); cooperatively, they wait for our next `io_uring_enter`,
        // which a busy submitter makes for every batch and `wait` makes when idle. Without
        // it one submitter reached 0.37 of fio's IOPS on tmpfs (randread 4k QD32), with it
        // 0.97. The kernel refuses it with SQPOLL, whose own thread submits.
        //
        // A single-issuer ring is made disabled, so that the thread that first enters it,
        // not the one building the device, becomes the task the kernel lets enter it; its
        // completions are then deferred task work, run only when that thread enters with
        // GETEVENTS (the TASKRUN flag tells it when some is pending).
        if cfg.sqpoll {
            b.setup_sqpoll(SQPOLL_IDLE_MS);
            if let Some(cpu) = cfg.sqpoll_cpu {
                b.setup_sqpoll_cpu(cpu);
            }
        } else if cfg.single_issuer {
            b.setup_r_disabled();
            b.setup_single_issuer();
            b.setup_defer_taskrun();
            b.setup_taskrun_flag();
        } else {
            b.setup_coop_taskrun();
        }
        if cfg.iopoll {
            b.setup_iopoll();
        }
        let uring = b.build(cfg.entries)?;
        if cfg.register_files {
            let fds: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
            uring.submitter().register_files(&fds)?;
        }
        let sq_entries = uring.params().sq_entries() as usize;
        let cq_entries = uring.params().cq_entries() as usize;
        Ok(Ring {
            uring,
            files,
            registered: cfg.register_files,
            single_issuer: cfg.single_issuer,
            owner: 0,
            tracker: Tracker::new(nr_tags),
            sq_entries,
            cq_entries,
            fixed: None,
        })
    }

    /// Registers the pool's buffers with this ring (`IORING_REGISTER_BUFFERS`).
    pub(crate) fn register_buffers(&mut self, pool: &Arc<PoolInner>) -> io::Result<()> {
        let iovecs: Vec<libc::iovec> = pool
            .regions()
            .iter()
            .map(|&(addr, len)| libc::iovec {
                iov_base: std::ptr::with_exposed_provenance_mut(addr),
                iov_len: len,
            })
            .collect();
        // SAFETY: each iovec spans one buffer of the pool, allocated and not freed for as
        // long as the pool lives; this ring keeps the pool alive (`self.fixed`, dropped after
        // `self.uring`) so the memory outlives the registration (clause 4).
        unsafe { self.uring.submitter().register_buffers(&iovecs) }?;
        self.fixed = Some(pool.clone());
        Ok(())
    }

    /// The first of `ops` the kernel does not support, if any (`IORING_REGISTER_PROBE`).
    pub(crate) fn unsupported(
        &self,
        ops: &[(u8, &'static str)],
    ) -> io::Result<Option<&'static str>> {
        let mut probe = Probe::new();
        self.uring.submitter().register_probe(&mut probe)?;
        Ok(ops
            .iter()
            .find(|&&(code, _)| !probe.is_supported(code))
            .map(|&(_, name)| name))
    }

    /// Whether a request needing `n` submissions at once could ever be issued here.
    pub(crate) fn fits(&self, n: usize) -> bool {
        n <= self.sq_entries && n <= self.cq_entries
    }

    /// Whether `n` more submissions can be pushed now: nothing older is waiting, the SQ has
    /// room, and the CQ can hold every completion outstanding (so it never overflows).
    pub(crate) fn has_room(&mut self, n: usize) -> bool {
        if self.tracker.nr_ready() > 0 || self.tracker.nr_sqes() + n > self.cq_entries {
            return false;
        }
        let sq = self.uring.submission();
        sq.capacity() - sq.len() >= n
    }

    /// Pushes the tracker's described submissions into the SQ, oldest first, as far as it
    /// has room. Returns how many were pushed.
    pub(crate) fn push_ready(&mut self) -> usize {
        let mut sq = self.uring.submission();
        let mut n = 0;
        while let Some(op) = self.tracker.front_ready() {
            let entry = if self.registered {
                entry!(types::Fixed(u32::from(op.file)), &op)
            } else {
                entry!(types::Fd(self.files[op.file as usize].as_raw_fd()), &op)
            };
            // SAFETY: the entry's `user_data` names one submission until it completes
            // (clause 1); `fd` is kept open by `self.files` for as long as this ring lives and
            // the ring outlives every submission (clause 2); `op.addr..op.addr + op.len` lies
            // inside the `IoBuf` of a bio of the request the tracker holds under this tag,
            // which stays allocated and untouched until the tracker reports that request
            // complete, after this submission's CQE (clause 3); a fixed op's range lies inside
            // the registered buffer it names, registered with this ring (clause 4); a
            // vectored op's iovec array and the buffers it spans stay put until its CQE
            // (clause 5). Ops without data carry no address.
            if unsafe { sq.push(&entry) }.is_err() {
                break;
            }
            self.tracker.pop_ready();
            n += 1;
        }
        n
    }

    /// Whether this thread may enter the ring: always, unless it is a single-issuer ring
    /// that another thread owns. The first thread to ask owns it from then on.
    fn may_enter(&mut self) -> bool {
        if !self.single_issuer {
            return true;
        }
        let me = thread_number();
        match self.owner {
            0 => {
                // A failure leaves the ring disabled: every enter then fails and requests
                // time out, so say it; it cannot fail on a ring made disabled here.
                if let Err(e) = self.uring.submitter().register_enable_rings() {
                    eprintln!("mqblk: uring: enabling a single-issuer ring failed: {e}");
                }
                self.owner = me;
                true
            }
            o => o == me,
        }
    }

    /// Hands the pushed submissions to the kernel: one `io_uring_enter`, or none with
    /// SQPOLL while its thread is awake. A failure (`EAGAIN`, `EBUSY`, `EINTR`) leaves
    /// them in the SQ, and the next poll tries again.
    pub(crate) fn submit(&mut self) {
        if self.uring.submission().is_empty() || !self.may_enter() {
            return;
        }
        // Deliberately ignored, see above: nothing is lost, and the caller cannot act on it.
        let _ = self.uring.submit();
    }

    /// What is pushed and not yet handed to the kernel, for a submitter to hand over
    /// without the hardware queue's lock ([`enter_submit`]): the ring's fd, the count, and
    /// whether to post deferred completions on the way ([`Due`]). With SQPOLL the kernel's
    /// thread takes them (woken here if it sleeps), under the lock.
    pub(crate) fn submit_due(&mut self) -> Option<Due> {
        if self.uring.params().is_setup_sqpoll() {
            self.submit();
            return None;
        }
        if !self.may_enter() {
            return None;
        }
        let n = self.uring.submission().len() as u32;
        (n > 0).then(|| Due {
            fd: self.uring.as_raw_fd(),
            n,
            getevents: self.single_issuer,
        })
    }

    /// Whether a submitter with nothing else to do should sleep until a completion is
    /// posted: submissions are in the kernel and none is posted yet. Returns the ring's fd
    /// and the pushed entries the wait hands over in the same entry, as [`submit_due`]
    /// does (none with SQPOLL, whose thread is woken here). The wait itself
    /// ([`wait_for_cqe`]) is made without the hardware queue's lock, so the other
    /// submitters sharing the ring keep submitting and reaping meanwhile, as the kernel's
    /// submitters share a hardware queue without sleeping under `hctx->lock`.
    ///
    /// [`submit_due`]: Self::submit_due
    pub(crate) fn wait_due(&mut self) -> Option<(RawFd, u32)> {
        let in_kernel = self.tracker.nr_sqes() - self.tracker.nr_ready();
        if in_kernel == 0 || !self.uring.completion().is_empty() || !self.may_enter() {
            return None;
        }
        let pushed = self.submit_due().map_or(0, |d| d.n);
        Some((self.uring.as_raw_fd(), pushed))
    }

    /// Like [`Self::wait_due`] for a ring with nothing in the kernel, whose owner waits for
    /// a wake-up ([`wake_ring`]) and not for a submission's completion: the ring's fd, once
    /// the ring is enabled (a wake-up to a disabled ring is refused), if its CQ is empty.
    pub(crate) fn idle_due(&mut self) -> Option<(RawFd, u32)> {
        if !self.uring.completion().is_empty() || !self.may_enter() {
            return None;
        }
        Some((self.uring.as_raw_fd(), 0))
    }

    /// Moves every posted completion into the tracker, and finished requests into `done`.
    /// Returns the CQEs seen and the requests finished.
    fn reap(&mut self, done: &mut CompletionBatch) -> (usize, usize) {
        let (mut cqes, mut rqs) = (0, 0);
        for cqe in self.uring.completion() {
            cqes += 1;
            if cqe.user_data() == WAKE_USER_DATA {
                continue;
            }
            if let Some((id, status)) = self.tracker.complete(cqe.user_data(), cqe.result()) {
                done.complete(id, status);
                rqs += 1;
            }
        }
        (cqes, rqs)
    }

    /// Reaps finished requests into `done` and returns how many. Reads the CQ without a
    /// syscall when it holds entries; enters the kernel only when it is empty while
    /// submissions are outstanding (that submits anything still queued, runs this task's
    /// pending completion work, and with IOPOLL polls the device), or to submit what the
    /// completions asked for (the rest of a short transfer, a retry, a request's next phase).
    pub(crate) fn poll(&mut self, done: &mut CompletionBatch) -> usize {
        if self.tracker.nr_sqes() == 0 {
            // Nothing in flight; a wake-up posted late is all the CQ may hold.
            for _ in self.uring.completion() {}
            return 0;
        }
        let (cqes, mut rqs) = self.reap(done);
        if cqes == 0 && self.may_enter() {
            self.push_ready();
            // `submit` with nothing to submit still enters: what we want here. Errors as in
            // `Self::submit`.
            let _ = self.uring.submit();
            rqs += self.reap(done).1;
        }
        if self.tracker.nr_ready() > 0 {
            self.push_ready();
        }
        self.submit();
        rqs
    }
}

impl Drop for Ring {
    /// Waits until the kernel is done with every submission that reached the SQ: it may
    /// still write into request buffers (clause 3). Submissions only described stay unsent.
    ///
    /// A single-issuer ring can only be waited for by its owner: dropped elsewhere with
    /// submissions in the kernel, it says so (the contract of `UringConfig::single_issuer`
    /// was broken) and the kernel cancels them when the ring closes.
    fn drop(&mut self) {
        let mut in_kernel = self.tracker.nr_sqes() - self.tracker.nr_ready();
        if in_kernel > 0 && !self.may_enter() {
            eprintln!(
                "mqblk: uring: a single-issuer ring dropped by another thread with {in_kernel} submissions in the kernel"
            );
            return;
        }
        while in_kernel > 0 {
            match self.uring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) => {}
                // The ring itself is broken; nothing more can come back.
                Err(_) => break,
            }
            in_kernel = in_kernel.saturating_sub(self.uring.completion().count());
        }
    }
}

// ----- synchronous calls ---------------------------------------------------------------------

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `lseek(SEEK_DATA)` (`data`) or `lseek(SEEK_HOLE)` from `pos`: the next offset at or after
/// `pos` that starts data or a hole; `None` when no data follows (`ENXIO`). The file offset
/// it moves is not used by the rings, which carry their own offsets.
pub(crate) fn seek_data_or_hole(file: &File, pos: u64, data: bool) -> io::Result<Option<u64>> {
    let whence = if data {
        libc::SEEK_DATA
    } else {
        libc::SEEK_HOLE
    };
    let pos = libc::off_t::try_from(pos).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: lseek takes plain integers and touches no memory of ours; the fd is open for
    // the duration of the call (borrowed from `file`).
    let r = unsafe { libc::lseek(file.as_raw_fd(), pos, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok(Some(r as u64))
}

/// Allocates `len` bytes at `offset` of a regular file (`fallocate(2)` mode 0: blocks are
/// reserved and read as zeroes; the file grows if the range runs past its end).
pub(crate) fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let off =
        |v: u64| libc::off_t::try_from(v).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    let (offset, len) = (off(offset)?, off(len)?);
    // SAFETY: fallocate takes plain integers and touches no memory of ours; the fd is open
    // for the duration of the call (borrowed from `file`).
    check(unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) })?;
    Ok(())
}

/// The bytes the file system holding `dir` has left for an unprivileged writer
/// (`statvfs`: blocks available times the fragment size), what fio's `fill_device` sizes a
/// file by.
pub fn fs_available(dir: &std::path::Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `statvfs` is a plain C struct of integers, for which all zero bytes is a value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a live NUL-terminated path and `st` a live, writable statvfs the call
    // fills in.
    check(unsafe { libc::statvfs(c.as_ptr(), &mut st) })?;
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// The size of a block device in bytes (`BLKGETSIZE64`).
pub(crate) fn blk_size_bytes(file: &File) -> io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through its argument, which points at a live local;
    // the fd is open for the duration of the call (borrowed from `file`).
    check(unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) })?;
    Ok(size)
}

/// The logical block size of a block device in bytes (`BLKSSZGET`).
pub(crate) fn blk_logical_block_size(file: &File) -> io::Result<u32> {
    let mut size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through its argument, which points at a live local;
    // the fd is open for the duration of the call.
    check(unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::BLKSSZGET,
            &mut size as *mut libc::c_int,
        )
    })?;
    u32::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Discards `len` bytes at `offset` of a block device (`BLKDISCARD`).
pub(crate) fn blk_discard(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let range: [u64; 2] = [offset, len];
    // SAFETY: BLKDISCARD reads two u64 from its argument, a live local array; the fd is open
    // for the duration of the call.
    check(unsafe { libc::ioctl(file.as_raw_fd(), BLKDISCARD, range.as_ptr()) })
}

/// Zeroes `len` bytes at `offset` of a block device (`BLKZEROOUT`).
pub(crate) fn blk_zeroout(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let range: [u64; 2] = [offset, len];
    // SAFETY: BLKZEROOUT reads two u64 from its argument, a live local array; the fd is open
    // for the duration of the call.
    check(unsafe { libc::ioctl(file.as_raw_fd(), BLKZEROOUT, range.as_ptr()) })
}

/// The file offset alignment O_DIRECT needs on this file (`statx` `STATX_DIOALIGN`), or
/// `None` if the file system does not say.
pub(crate) fn dio_offset_align(file: &File) -> io::Result<Option<u32>> {
    // SAFETY: `statx` is a plain C struct of integers, for which all zero bytes is a value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the path is a NUL-terminated empty string, which with AT_EMPTY_PATH names the
    // open fd itself; `stx` is a live, writable statx the call fills in.
    check(unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    })?;
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return Ok(None);
    }
    Ok(Some(stx.stx_dio_offset_align))
}

/// Hands `to_submit` pushed entries of ring `fd` to the kernel and sleeps in
/// `io_uring_enter(GETEVENTS)` until a completion is posted or `timeout`, if any, passes,
/// whichever is first (`IORING_ENTER_EXT_ARG`). The timeout bounds a wait whose completion
/// another submitter reaped first (the wait then needs the next one). Errors (`ETIME`,
/// `EINTR` and the like) just return: the caller polls, and entries not taken stay queued.
pub(crate) fn wait_for_cqe(fd: RawFd, to_submit: u32, timeout: Option<std::time::Duration>) {
    /// `struct io_uring_getevents_arg`.
    #[repr(C)]
    struct GeteventsArg {
        sigmask: u64,
        sigmask_sz: u32,
        min_wait_usec: u32,
        ts: u64,
    }
    const IORING_ENTER_EXT_ARG: u32 = 8;
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let arg = ts.as_ref().map(|ts| GeteventsArg {
        sigmask: 0,
        sigmask_sz: 0,
        min_wait_usec: 0,
        ts: ts as *const libc::timespec as u64,
    });
    // Without a timeout, no extended argument: a plain wait, as fio's engine makes it.
    let (flags, argp, argsz) = match &arg {
        Some(a) => (
            IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
            a as *const GeteventsArg,
            std::mem::size_of::<GeteventsArg>(),
        ),
        None => (IORING_ENTER_GETEVENTS, std::ptr::null(), 0),
    };
    // SAFETY: `arg` and the timespec it points at live on this stack until the call
    // returns (or are absent, and the kernel reads no argument). The entries it may
    // consume were pushed under the hardware queue's lock with their memory valid until
    // completion (clauses 1-5, upheld by `push_ready`), as for `enter_submit`. `fd` is a
    // ring of this device, open while the device is (clause 2).
    unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            fd,
            to_submit,
            1u32,
            flags,
            argp,
            argsz,
        );
    }
}

/// The `user_data` of a wake-up posted by [`wake_ring`]: no submission's (a tag beyond
/// any tag space, see the tracker's encoding), so reaping skips it.
pub(crate) const WAKE_USER_DATA: u64 = u64::MAX;

/// Posts a CQE ([`WAKE_USER_DATA`]) to ring `fd`, waking a thread asleep in it, from
/// outside any ring: a synchronous `IORING_OP_MSG_RING` (`IORING_REGISTER_SEND_MSG_RING`,
/// Linux 6.13). For a single-issuer ring the kernel queues it as its owner's task work,
/// which wakes the owner's wait. Fails on older kernels (`EINVAL`).
pub(crate) fn wake_ring(fd: RawFd) -> io::Result<()> {
    /// `IORING_REGISTER_SEND_MSG_RING` in `enum io_uring_register_op`.
    const IORING_REGISTER_SEND_MSG_RING: libc::c_long = 31;
    let sqe = opcode::MsgRingData::new(types::Fd(fd), 0, WAKE_USER_DATA, None).build();
    // SAFETY: `Entry` is `repr(C)` over `struct io_uring_sqe`, which the kernel copies
    // before it returns; `fd` is a ring of this device, open while the device is.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            -1,
            IORING_REGISTER_SEND_MSG_RING,
            &sqe as *const io_uring::squeue::Entry,
            1,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `io_uring_enter`'s flag to reap: run this task's pending completion work, post what it
/// finished, and wait for `min_complete` completions (none, when that is 0).
const IORING_ENTER_GETEVENTS: u32 = 1;

/// Pushed submissions of a ring, to be handed to the kernel without the hardware queue's
/// lock ([`enter_submit`]).
pub(crate) struct Due {
    pub(crate) fd: RawFd,
    pub(crate) n: u32,
    /// Enter with `GETEVENTS` and no minimum, as fio's engine commits its submissions
    /// (`io_uring_enter(nr, 0, IORING_ENTER_GETEVENTS)`): a single-issuer ring's
    /// completions wait as deferred task work until its owner enters so, and this posts
    /// them on the way, for the next reap to find in the CQ without a system call of
    /// its own.
    pub(crate) getevents: bool,
}

/// Hands a ring's pushed submissions to the kernel (`io_uring_enter` without waiting),
/// outside the hardware queue's lock: the kernel serialises entries on a ring
/// itself (`ctx->uring_lock`) and takes what the submission queue's tail publishes, so a
/// second submitter may push and enter meanwhile; one that finds fewer entries than it
/// counted (another took them) submits what is there. On tmpfs and the page cache the
/// kernel does the copy inside this call, which under the lock made every other
/// submitter of the queue wait for it. Errors (`EAGAIN`, `EBUSY`, `EINTR`) leave the
/// entries queued for the next poll, as [`Ring::submit`]'s do.
pub(crate) fn enter_submit(due: Due) {
    let flags = if due.getevents {
        IORING_ENTER_GETEVENTS
    } else {
        0
    };
    // SAFETY: only the ring's fd and counts go to the kernel; the entries it consumes were
    // pushed under the hardware queue's lock with their memory valid until completion
    // (clauses 1-5, upheld by `push_ready`). `fd` is open while the device is (clause 2).
    unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            due.fd,
            due.n,
            0u32,
            flags,
            std::ptr::null::<libc::c_void>(),
            0usize,
        );
    }
}
