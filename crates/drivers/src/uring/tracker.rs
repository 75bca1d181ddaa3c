//! The per-hardware-queue record of submissions in flight, keyed by the request's driver tag.
//!
//! Safe code only: the tracker decides *what* to submit and what a completion means; the
//! engine (`engine.rs`) is the only place that hands those decisions to the kernel.
//!
//! A request becomes one or more segments, one submission each: a read, write, discard or
//! write-zeroes per bio, or one fsync for a flush. Segments run in up to three phases, each
//! starting only once the one before finished without error:
//!
//! ```text
//! PreFlush (REQ_PREFLUSH: fsync) --> Data (one SQE per bio) --> PostFlush (FUA without RWF_DSYNC)
//! ```
//!
//! The request completes once every submission of its last phase has come back, so no CQE
//! for a tag can arrive after its request was handed back and the tag reused. A submission
//! that comes back short, or with one `EAGAIN`, is described again for the rest of its
//! range; the first error of any segment is the request's status.

use super::errno_to_status;
use mqblk_core::{BlkStatus, RqId, Tag};
use std::collections::VecDeque;

/// What one submission does. `Fsync` is always a data sync (`IORING_FSYNC_DATASYNC`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    Read,
    Write,
    Fsync,
    /// `fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)`: discard on a regular file.
    PunchHole,
    /// `fallocate(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)`: write-zeroes on a regular
    /// file. A file system without it (tmpfs) gets a hole punched instead, as the loop
    /// driver does for write-zeroes without `REQ_NOUNMAP`.
    ZeroRange,
}

/// One submission, described as plain data: the engine turns it into an SQE.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub user_data: u64,
    pub kind: OpKind,
    /// Which of the device's files (0 unless it has several).
    pub file: u16,
    /// Byte offset in the file or device.
    pub offset: u64,
    /// Address of the data (its provenance exposed), 0 for operations without data.
    pub addr: usize,
    /// Bytes to move, or the range length for `fallocate`; 0 for `Fsync`.
    pub len: u64,
    /// `preadv2`/`pwritev2` flags (`RWF_DSYNC` for FUA writes).
    pub rw_flags: i32,
    /// The registered buffer the data lies in (`READ_FIXED`/`WRITE_FIXED`), if any.
    pub buf_index: Option<u16>,
    /// For a vectored read or write (`READV`/`WRITEV`): the address of `iov_cnt` iovecs,
    /// kept alive by the tracker until this submission completes; 0 otherwise (`addr` and
    /// `len` then describe the one buffer).
    pub iov: usize,
    pub iov_cnt: u32,
}

/// One `struct iovec` (`void *iov_base; size_t iov_len`), as plain integers so the tracker
/// stays `Send` and free of raw pointers; the engine hands the array to the kernel as is.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct IoVec {
    pub base: usize,
    pub len: usize,
}

/// One data-phase segment of a request, as the device builds it from a bio.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegSpec {
    pub kind: OpKind,
    /// The file it goes to, and the byte offset in it.
    pub file: u16,
    pub offset: u64,
    pub addr: usize,
    pub len: u64,
    pub rw_flags: i32,
    pub buf_index: Option<u16>,
}

/// The flushes the tracker must submit around a request's data.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlushPlan {
    /// An fsync that must finish before the data is submitted (`REQ_PREFLUSH`).
    pub preflush: bool,
    /// An fsync after the data (`REQ_FUA` on an operation without `RWF_DSYNC`).
    pub postflush: bool,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    PreFlush,
    #[default]
    Data,
    PostFlush,
}

#[derive(Clone, Debug)]
struct Seg {
    kind: OpKind,
    phase: Phase,
    file: u16,
    offset: u64,
    addr: usize,
    len: u64,
    /// Bytes already moved by earlier, short, completions.
    done: u64,
    rw_flags: i32,
    buf_index: Option<u16>,
    /// An `EAGAIN` or `EINTR` was already retried once.
    retried: bool,
    /// Several bios' buffers moved as one vectored read or write, in file order: a merged
    /// request goes to the kernel as one I/O of its full size, as a device gets one command
    /// for it (empty: the one buffer at `addr`).
    parts: Vec<IoVec>,
    /// The iovecs of the submission in flight (`parts` past `done`).
    live: Vec<IoVec>,
}

/// What one completion means for its segment.
enum SegOutcome {
    /// Submit the rest of the segment again.
    Resubmit,
    Finished(BlkStatus),
}

impl Seg {
    /// The next submission for this segment (the rest of it after a short transfer).
    fn op(&mut self, user_data: u64) -> Op {
        let (iov, iov_cnt) = if self.parts.is_empty() {
            (0, 0)
        } else {
            // Rebuilt only between submissions: the array the kernel reads stays put while
            // one is in flight.
            self.live.clear();
            let mut skip = self.done as usize;
            for p in &self.parts {
                if skip >= p.len {
                    skip -= p.len;
                    continue;
                }
                self.live.push(IoVec {
                    base: p.base + skip,
                    len: p.len - skip,
                });
                skip = 0;
            }
            (
                self.live.as_ptr().expose_provenance(),
                self.live.len() as u32,
            )
        };
        Op {
            user_data,
            kind: self.kind,
            file: self.file,
            offset: self.offset + self.done,
            addr: if self.addr == 0 || iov != 0 {
                0
            } else {
                self.addr + self.done as usize
            },
            len: self.len - self.done,
            rw_flags: self.rw_flags,
            buf_index: self.buf_index,
            iov,
            iov_cnt,
        }
    }

    /// Applies a CQE result: bytes moved (reads and writes), 0 (the others), or `-errno`.
    fn advance(&mut self, res: i32) -> SegOutcome {
        if res < 0 {
            let errno = -res;
            if (errno == libc::EAGAIN || errno == libc::EINTR) && !self.retried {
                self.retried = true;
                return SegOutcome::Resubmit;
            }
            if errno == libc::EOPNOTSUPP && self.kind == OpKind::ZeroRange {
                self.kind = OpKind::PunchHole;
                return SegOutcome::Resubmit;
            }
            return SegOutcome::Finished(errno_to_status(errno));
        }
        if !matches!(self.kind, OpKind::Read | OpKind::Write) {
            return SegOutcome::Finished(BlkStatus::Ok);
        }
        let moved = res as u64;
        if moved == 0 {
            // No progress: a read at the end of the file or device, or a write that cannot
            // go on. The core refuses ranges beyond the capacity it was given, so the file
            // or device shrank under us.
            return SegOutcome::Finished(BlkStatus::IoErr);
        }
        self.done = (self.done + moved).min(self.len);
        if self.done < self.len {
            SegOutcome::Resubmit
        } else {
            SegOutcome::Finished(BlkStatus::Ok)
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// The request holding this tag, while it is in flight.
    rq: Option<RqId>,
    /// Kept between requests so the issue path reuses the allocation.
    segs: Vec<Seg>,
    phase: Phase,
    /// Segments of the current phase that have not finished.
    outstanding: u32,
    status: BlkStatus,
    /// Device ring descriptors the request holds (see [`Tracker::hold_descs`]).
    descs: u32,
}

/// The most iovecs one vectored submission takes (`UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// How many of `data`'s segments, from the first, go as one submission: plain reads or
/// writes (no registered buffer) of one kind and flags, each starting where the one before
/// ends on disk, at most `IOV_MAX` of them; 1 otherwise.
fn run_len(data: &[SegSpec]) -> usize {
    let first = &data[0];
    if !matches!(first.kind, OpKind::Read | OpKind::Write) || first.buf_index.is_some() {
        return 1;
    }
    let mut end = first.offset + first.len;
    let mut n = 1;
    while let Some(s) = data.get(n) {
        if n == IOV_MAX
            || s.kind != first.kind
            || s.rw_flags != first.rw_flags
            || s.buf_index.is_some()
            || s.file != first.file
            || s.offset != end
        {
            break;
        }
        end += s.len;
        n += 1;
    }
    n
}

/// How many submissions the data segments `data` make once contiguous ones are joined.
fn data_sqes(data: &[SegSpec]) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < data.len() {
        i += run_len(&data[i..]);
        n += 1;
    }
    n
}

/// `user_data` is `tag << 32 | segment index`: unique while the request is in flight.
fn user_data(tag: usize, seg: usize) -> u64 {
    ((tag as u64) << 32) | seg as u64
}

fn decode(user_data: u64) -> (usize, usize) {
    (
        (user_data >> 32) as usize,
        (user_data & 0xffff_ffff) as usize,
    )
}

/// The submissions of one hardware queue, by driver tag.
#[derive(Debug)]
pub(crate) struct Tracker {
    slots: Box<[Slot]>,
    nr_rqs: usize,
    /// Submissions described and not yet reaped: waiting in `ready`, in the SQ, or in the
    /// kernel. Bounds what the CQ must be able to hold.
    nr_sqes: usize,
    /// Submissions described but not yet pushed to the SQ, oldest first.
    ready: VecDeque<Op>,
    /// Device ring descriptors held by the requests in flight.
    descs: u32,
}

impl Tracker {
    pub(crate) fn new(nr_tags: u32) -> Tracker {
        Tracker {
            slots: (0..nr_tags).map(|_| Slot::default()).collect(),
            nr_rqs: 0,
            nr_sqes: 0,
            ready: VecDeque::new(),
            descs: 0,
        }
    }

    /// Requests in flight.
    pub(crate) fn nr_requests(&self) -> usize {
        self.nr_rqs
    }

    /// Submissions whose completion has not been reaped, those not yet pushed included.
    pub(crate) fn nr_sqes(&self) -> usize {
        self.nr_sqes
    }

    /// Device ring descriptors the requests in flight hold.
    pub(crate) fn descs_held(&self) -> u32 {
        self.descs
    }

    /// The request just started on `tag` holds `n` descriptors of the device's ring until
    /// it completes.
    pub(crate) fn hold_descs(&mut self, tag: Tag, n: u32) {
        let slot = &mut self.slots[tag.0 as usize];
        debug_assert!(slot.rq.is_some() && slot.descs == 0);
        slot.descs = n;
        self.descs += n;
    }

    /// Submissions described but not yet pushed to the SQ.
    pub(crate) fn nr_ready(&self) -> usize {
        self.ready.len()
    }

    pub(crate) fn front_ready(&self) -> Option<Op> {
        self.ready.front().copied()
    }

    pub(crate) fn pop_ready(&mut self) {
        self.ready.pop_front();
    }

    /// Submissions the first phase of a request needs: what must fit in the SQ now.
    pub(crate) fn first_phase_sqes(data: &[SegSpec], plan: FlushPlan) -> usize {
        if plan.preflush {
            1
        } else if !data.is_empty() {
            data_sqes(data)
        } else {
            usize::from(plan.postflush)
        }
    }

    /// Starts tracking the request holding `tag`, and describes its first phase's
    /// submissions (read them with [`Self::front_ready`]). Panics if the tag is already in
    /// flight or out of range: the core hands a driver tag to one request at a time.
    pub(crate) fn start(&mut self, tag: Tag, id: RqId, plan: FlushPlan, data: &[SegSpec]) {
        let t = tag.0 as usize;
        assert!(
            !tag.is_none() && t < self.slots.len(),
            "uring: {id:?} issued with driver tag {tag:?} outside 0..{}",
            self.slots.len()
        );
        let slot = &mut self.slots[t];
        assert!(
            slot.rq.is_none(),
            "uring: {id:?} issued with driver tag {} still held by {:?}",
            t,
            slot.rq
        );
        // A flush around the data syncs the file the data goes to.
        let file = data.first().map_or(0, |s| s.file);
        let fsync = |phase| Seg {
            kind: OpKind::Fsync,
            phase,
            file,
            offset: 0,
            addr: 0,
            len: 0,
            done: 0,
            rw_flags: 0,
            buf_index: None,
            retried: false,
            parts: Vec::new(),
            live: Vec::new(),
        };
        slot.segs.clear();
        if plan.preflush {
            slot.segs.push(fsync(Phase::PreFlush));
        }
        let mut i = 0;
        while i < data.len() {
            let n = run_len(&data[i..]);
            let run = &data[i..i + n];
            let s = &run[0];
            slot.segs.push(Seg {
                kind: s.kind,
                phase: Phase::Data,
                file: s.file,
                offset: s.offset,
                addr: s.addr,
                len: run.iter().map(|x| x.len).sum(),
                done: 0,
                rw_flags: s.rw_flags,
                buf_index: s.buf_index,
                retried: false,
                parts: if n > 1 {
                    run.iter()
                        .map(|x| IoVec {
                            base: x.addr,
                            len: x.len as usize,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                live: Vec::new(),
            });
            i += n;
        }
        if plan.postflush {
            slot.segs.push(fsync(Phase::PostFlush));
        }
        assert!(!slot.segs.is_empty(), "uring: {id:?} has nothing to submit");
        slot.rq = Some(id);
        slot.status = BlkStatus::Ok;
        slot.phase = slot.segs[0].phase;
        self.nr_rqs += 1;
        self.emit_phase(t);
    }

    /// Describes every submission of the slot's current phase.
    fn emit_phase(&mut self, t: usize) {
        let slot = &mut self.slots[t];
        let mut n = 0;
        for (i, seg) in slot.segs.iter_mut().enumerate() {
            if seg.phase == slot.phase {
                self.ready.push_back(seg.op(user_data(t, i)));
                n += 1;
            }
        }
        slot.outstanding = n;
        self.nr_sqes += n as usize;
    }

    /// Applies one CQE. Returns the request and its status once its last submission has
    /// come back; further submissions it needs (the rest of a short transfer, a retry, the
    /// next phase) are queued for the engine. Panics on a `user_data` that names nothing in
    /// flight: the kernel returns exactly what it was given, so that is our bug.
    pub(crate) fn complete(&mut self, user_data_in: u64, res: i32) -> Option<(RqId, BlkStatus)> {
        let (t, i) = decode(user_data_in);
        let slot = self
            .slots
            .get_mut(t)
            .unwrap_or_else(|| panic!("uring: completion for tag {t} beyond the tag space"));
        let Some(id) = slot.rq else {
            panic!("uring: completion for tag {t}, which has nothing in flight");
        };
        let phase = slot.phase;
        let seg = slot.segs.get_mut(i).unwrap_or_else(|| {
            panic!("uring: completion for segment {i} of {id:?}, which has fewer")
        });
        assert_eq!(
            seg.phase, phase,
            "uring: completion for a segment of {id:?} outside its current phase"
        );
        assert!(self.nr_sqes > 0, "uring: more completions than submissions");
        self.nr_sqes -= 1;
        match seg.advance(res) {
            SegOutcome::Resubmit => {
                let op = seg.op(user_data_in);
                self.ready.push_back(op);
                self.nr_sqes += 1;
                return None;
            }
            SegOutcome::Finished(status) => {
                // The first error wins; later ones are consequences or noise.
                if slot.status.is_ok() {
                    slot.status = status;
                }
                slot.outstanding -= 1;
            }
        }
        if slot.outstanding > 0 {
            return None;
        }
        if slot.status.is_ok() {
            let next = slot
                .segs
                .iter()
                .map(|s| s.phase)
                .filter(|&p| p > phase)
                .min();
            if let Some(next) = next {
                slot.phase = next;
                self.emit_phase(t);
                return None;
            }
        }
        let status = slot.status;
        slot.rq = None;
        slot.segs.clear();
        self.descs -= std::mem::take(&mut slot.descs);
        self.nr_rqs -= 1;
        Some((id, status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(kind: OpKind, offset: u64, addr: usize, len: u64) -> SegSpec {
        SegSpec {
            kind,
            file: 0,
            offset,
            addr,
            len,
            rw_flags: 0,
            buf_index: None,
        }
    }

    fn drain(t: &mut Tracker) -> Vec<Op> {
        let mut v = Vec::new();
        while let Some(op) = t.front_ready() {
            t.pop_ready();
            v.push(op);
        }
        v
    }

    #[test]
    fn request_completes_after_its_last_segment() {
        let mut t = Tracker::new(4);
        // Not contiguous on disk (contiguous ones go as one vectored write).
        let segs = [
            rw(OpKind::Write, 0, 0x1000, 4096),
            rw(OpKind::Write, 8192, 0x9000, 4096),
        ];
        t.start(Tag(2), RqId(7), FlushPlan::default(), &segs);
        let ops = drain(&mut t);
        assert_eq!(ops.len(), 2);
        assert_eq!((t.nr_requests(), t.nr_sqes()), (1, 2));
        assert_eq!(t.complete(ops[1].user_data, 4096), None);
        assert_eq!(
            t.complete(ops[0].user_data, 4096),
            Some((RqId(7), BlkStatus::Ok))
        );
        assert_eq!((t.nr_requests(), t.nr_sqes()), (0, 0));
        // The tag is free again.
        t.start(Tag(2), RqId(8), FlushPlan::default(), &segs[..1]);
        assert_eq!(t.nr_requests(), 1);
    }

    #[test]
    fn short_transfer_resubmits_the_rest() {
        let mut t = Tracker::new(1);
        t.start(
            Tag(0),
            RqId(0),
            FlushPlan::default(),
            &[rw(OpKind::Read, 512, 0x1000, 8192)],
        );
        let op = drain(&mut t)[0];
        assert_eq!(t.complete(op.user_data, 3000), None);
        let rest = drain(&mut t);
        assert_eq!(rest.len(), 1);
        assert_eq!(
            (rest[0].offset, rest[0].addr, rest[0].len),
            (3512, 0x1000 + 3000, 8192 - 3000)
        );
        assert_eq!(
            t.complete(rest[0].user_data, 0),
            Some((RqId(0), BlkStatus::IoErr))
        );
    }

    #[test]
    fn first_error_wins_and_eagain_is_retried_once() {
        let mut t = Tracker::new(1);
        let segs = [
            rw(OpKind::Write, 0, 0x1000, 512),
            rw(OpKind::Write, 1536, 0x2000, 512),
        ];
        t.start(Tag(0), RqId(3), FlushPlan::default(), &segs);
        let ops = drain(&mut t);
        assert_eq!(t.complete(ops[0].user_data, -libc::EAGAIN), None);
        let retry = drain(&mut t);
        assert_eq!(retry, vec![ops[0]]);
        assert_eq!(t.complete(retry[0].user_data, -libc::ENOSPC), None);
        assert_eq!(
            t.complete(ops[1].user_data, -libc::EIO),
            Some((RqId(3), BlkStatus::NoSpc))
        );
        // A second EAGAIN on the same segment is an error.
        t.start(Tag(0), RqId(4), FlushPlan::default(), &segs[..1]);
        let op = drain(&mut t)[0];
        assert_eq!(t.complete(op.user_data, -libc::EAGAIN), None);
        let op = drain(&mut t)[0];
        assert_eq!(
            t.complete(op.user_data, -libc::EAGAIN),
            Some((RqId(4), BlkStatus::IoErr))
        );
    }

    #[test]
    fn phases_run_in_order_and_an_error_stops_them() {
        let mut t = Tracker::new(1);
        let plan = FlushPlan {
            preflush: true,
            postflush: true,
        };
        let segs = [rw(OpKind::ZeroRange, 0, 0, 1 << 20)];
        t.start(Tag(0), RqId(1), plan, &segs);
        let pre = drain(&mut t);
        assert_eq!(pre.len(), 1);
        assert_eq!(pre[0].kind, OpKind::Fsync);
        assert_eq!(t.complete(pre[0].user_data, 0), None);
        let data = drain(&mut t);
        assert_eq!(data[0].kind, OpKind::ZeroRange);
        // No ZERO_RANGE here: fall back to punching a hole.
        assert_eq!(t.complete(data[0].user_data, -libc::EOPNOTSUPP), None);
        let data = drain(&mut t);
        assert_eq!(data[0].kind, OpKind::PunchHole);
        assert_eq!(t.complete(data[0].user_data, 0), None);
        let post = drain(&mut t);
        assert_eq!(post[0].kind, OpKind::Fsync);
        assert_eq!(
            t.complete(post[0].user_data, 0),
            Some((RqId(1), BlkStatus::Ok))
        );

        t.start(Tag(0), RqId(2), plan, &segs);
        let pre = drain(&mut t);
        assert_eq!(
            t.complete(pre[0].user_data, -libc::EIO),
            Some((RqId(2), BlkStatus::IoErr))
        );
        assert_eq!(t.nr_ready(), 0, "no data after a failed preflush");
        assert_eq!(t.nr_sqes(), 0);
    }

    #[test]
    fn contiguous_bios_go_as_one_vectored_io_and_a_short_one_resumes_inside() {
        // Three bios of a merged request, contiguous on disk, in three buffers: one READV of
        // 12 KiB, as the kernel gets one command for the request. A fourth bio elsewhere
        // (not contiguous) is a submission of its own.
        let mut t = Tracker::new(4);
        t.start(
            Tag(1),
            RqId(7),
            FlushPlan::default(),
            &[
                rw(OpKind::Read, 4096, 0x10000, 4096),
                rw(OpKind::Read, 8192, 0x30000, 4096),
                rw(OpKind::Read, 12288, 0x20000, 4096),
                rw(OpKind::Read, 65536, 0x50000, 4096),
            ],
        );
        let ops = drain(&mut t);
        assert_eq!(ops.len(), 2);
        let v = ops[0];
        assert_eq!((v.offset, v.len, v.iov_cnt, v.addr), (4096, 12288, 3, 0));
        assert_eq!((ops[1].iov, ops[1].addr, ops[1].len), (0, 0x50000, 4096));
        assert_eq!(t.complete(ops[1].user_data, 4096), None);
        // 6 KiB moved: the rest starts 2 KiB into the second buffer.
        assert_eq!(t.complete(v.user_data, 6144), None);
        let rest = drain(&mut t);
        assert_eq!(rest.len(), 1);
        assert_eq!(
            (rest[0].offset, rest[0].len, rest[0].iov_cnt),
            (10240, 6144, 2)
        );
        let seg = &t.slots[1].segs[0];
        assert_eq!(
            seg.live,
            [
                IoVec {
                    base: 0x30000 + 2048,
                    len: 2048
                },
                IoVec {
                    base: 0x20000,
                    len: 4096
                }
            ]
        );
        assert_eq!(rest[0].iov, seg.live.as_ptr().expose_provenance());
        assert_eq!(
            t.complete(rest[0].user_data, 6144),
            Some((RqId(7), BlkStatus::Ok))
        );
    }

    #[test]
    fn first_phase_sizes() {
        let pre = FlushPlan {
            preflush: true,
            postflush: false,
        };
        // Five reads, the first three contiguous on disk: three submissions.
        let data = [
            rw(OpKind::Read, 0, 0x1000, 512),
            rw(OpKind::Read, 512, 0x8000, 512),
            rw(OpKind::Read, 1024, 0x3000, 512),
            rw(OpKind::Read, 4096, 0x4000, 512),
            rw(OpKind::Write, 4608, 0x5000, 512),
        ];
        assert_eq!(Tracker::first_phase_sqes(&data, pre), 1);
        assert_eq!(Tracker::first_phase_sqes(&data, FlushPlan::default()), 3);
        let mut t = Tracker::new(1);
        t.start(Tag(0), RqId(0), FlushPlan::default(), &data);
        assert_eq!(drain(&mut t).len(), 3, "as many as it said");
    }

    #[test]
    #[should_panic(expected = "nothing in flight")]
    fn stray_completion_is_a_bug() {
        let mut t = Tracker::new(2);
        t.complete(user_data(1, 0), 0);
    }
}
