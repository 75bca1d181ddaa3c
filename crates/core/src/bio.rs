//! `Bio`: the unit of I/O a frontend submits, and `IoBuf`, the buffer that travels with it.
//!
//! A bio owns its data buffer while it is in flight and hands it back on completion, so no
//! copy and no shared ownership is needed between the submitter, the core and the driver.

use crate::status::BlkStatus;
use crate::CtxIdx;
use crate::Nanos;

/// 512-byte sectors, the block layer's unit of position and length.
pub const SECTOR_SHIFT: u32 = 9;
/// Bytes in a sector, the unit of `sector` and `nr_sectors` (`SECTOR_SIZE`).
pub const SECTOR_SIZE: u64 = 1 << SECTOR_SHIFT;

/// The operation, as the kernel's `REQ_OP_*`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReqOp {
    /// Read data from the device (`REQ_OP_READ`).
    Read,
    /// Write data to the device (`REQ_OP_WRITE`).
    Write,
    /// Write the device's volatile cache back (`REQ_OP_FLUSH`; no data).
    Flush,
    /// Tell the device a range is no longer in use (`REQ_OP_DISCARD`; no data).
    Discard,
    /// Make a range read back as zeroes without sending them (`REQ_OP_WRITE_ZEROES`).
    WriteZeroes,
    /// Write at a zone's write pointer, wherever it is; the bio's sector names the zone
    /// and comes back as where the data went (`REQ_OP_ZONE_APPEND`).
    ZoneAppend,
    /// Rewind a sequential zone's write pointer to its start (`REQ_OP_ZONE_RESET`; no data).
    ZoneReset,
    /// Reset every sequential zone (`REQ_OP_ZONE_RESET_ALL`; no data).
    ZoneResetAll,
    /// Open a zone explicitly (`REQ_OP_ZONE_OPEN`; no data).
    ZoneOpen,
    /// Close an open zone (`REQ_OP_ZONE_CLOSE`; no data).
    ZoneClose,
    /// Make a zone full (`REQ_OP_ZONE_FINISH`; no data).
    ZoneFinish,
}

/// `op_is_sync`: reads, and anything flagged SYNC, FUA or PREFLUSH (the kernel counts a
/// PREFLUSH write as synchronous even without REQ_SYNC).
#[inline]
pub fn op_is_sync(op: ReqOp, flags: ReqFlags) -> bool {
    op.is_read()
        || flags.intersects(
            ReqFlags::SYNC
                .union(ReqFlags::FUA)
                .union(ReqFlags::PREFLUSH),
        )
}

impl ReqOp {
    /// True for operations that move data from the device to memory.
    pub fn is_read(self) -> bool {
        self == ReqOp::Read
    }
    /// True for operations that change the device (the kernel's `op_is_write`).
    pub fn is_write(self) -> bool {
        !self.is_read()
    }
    /// True for operations that carry a data buffer.
    pub fn has_data(self) -> bool {
        matches!(self, ReqOp::Read | ReqOp::Write | ReqOp::ZoneAppend)
    }
    /// True for the zone management operations (`op_is_zone_mgmt`).
    pub fn is_zone_mgmt(self) -> bool {
        matches!(
            self,
            ReqOp::ZoneReset
                | ReqOp::ZoneResetAll
                | ReqOp::ZoneOpen
                | ReqOp::ZoneClose
                | ReqOp::ZoneFinish
        )
    }
    /// The operation's name in reports and traces (`read`, `write`, `flush`, `discard`,
    /// `write-zeroes`, `zone-append`, `zone-reset`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReqOp::Read => "read",
            ReqOp::Write => "write",
            ReqOp::Flush => "flush",
            ReqOp::Discard => "discard",
            ReqOp::WriteZeroes => "write-zeroes",
            ReqOp::ZoneAppend => "zone-append",
            ReqOp::ZoneReset => "zone-reset",
            ReqOp::ZoneResetAll => "zone-reset-all",
            ReqOp::ZoneOpen => "zone-open",
            ReqOp::ZoneClose => "zone-close",
            ReqOp::ZoneFinish => "zone-finish",
        }
    }
}

bitflags::bitflags! {
    /// Request flags carried by the bio into the request (`REQ_FUA`, `REQ_PREFLUSH`, ...).
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ReqFlags: u8 {
        /// Forced unit access: the data is durable when the request completes.
        const FUA = 1 << 0;
        /// Flush the volatile cache before this request.
        const PREFLUSH = 1 << 1;
        /// Synchronous: a task waits for it (reads are always sync).
        const SYNC = 1 << 2;
        /// Filesystem metadata.
        const META = 1 << 3;
        /// Never merge this bio or request.
        const NOMERGE = 1 << 4;
        /// Completed by polling a POLL hardware queue (`REQ_POLLED`).
        const POLLED = 1 << 5;
        /// The issuer has nothing more to send right away (`REQ_IDLE`; O_DIRECT writes).
        const IDLE = 1 << 6;
        /// Fail with `BLK_STS_AGAIN` rather than wait (`REQ_NOWAIT`, from `RWF_NOWAIT`):
        /// where no tag is free (`blk_mq_get_new_requests`) or the bio would need
        /// splitting (`bio_split_rw_at`).
        const NOWAIT = 1 << 7;
    }
}

impl ReqFlags {
    /// The flags that forbid merging, as the kernel's `REQ_NOMERGE_FLAGS`.
    pub const NOMERGE_FLAGS: ReqFlags = ReqFlags::NOMERGE
        .union(ReqFlags::PREFLUSH)
        .union(ReqFlags::FUA);
}

/// The I/O priority class (`IOPRIO_CLASS_*`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoPrioClass {
    /// No class set: the block layer treats it as best effort.
    None = 0,
    /// Real time: served before every best-effort request (`IOPRIO_CLASS_RT`).
    Rt = 1,
    /// Best effort, the default class (`IOPRIO_CLASS_BE`).
    Be = 2,
    /// Idle: served only when nothing else wants the device (`IOPRIO_CLASS_IDLE`).
    Idle = 3,
}

/// An I/O priority: class and level 0..=7 (0 is the highest), packed as the kernel's
/// `IOPRIO_PRIO_VALUE(class, level)` = `class << 13 | level`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct IoPrio(pub u16);

impl IoPrio {
    /// Where the class sits in the 16-bit value (`IOPRIO_CLASS_SHIFT`).
    pub const CLASS_SHIFT: u16 = 13;
    /// Best effort, level 4: the kernel's default for a task without an explicit priority.
    pub const DEFAULT: IoPrio = IoPrio::new(IoPrioClass::Be, 4);

    /// The priority of `class` at `level` (0 highest, 7 lowest; `IOPRIO_PRIO_VALUE`).
    pub const fn new(class: IoPrioClass, level: u8) -> IoPrio {
        assert!(level < 8, "ioprio level must be 0..=7");
        IoPrio(((class as u16) << Self::CLASS_SHIFT) | level as u16)
    }
    /// The class (`IOPRIO_PRIO_CLASS`); a value without one reads as best effort.
    pub fn class(self) -> IoPrioClass {
        match self.0 >> Self::CLASS_SHIFT {
            1 => IoPrioClass::Rt,
            2 => IoPrioClass::Be,
            3 => IoPrioClass::Idle,
            _ => IoPrioClass::None,
        }
    }
    /// The level within the class, 0 (highest) to 7 (`IOPRIO_PRIO_LEVEL`).
    pub fn level(self) -> u8 {
        (self.0 & 0x7) as u8
    }
}

/// One 4 KiB page, aligned so that buffers built from pages satisfy O_DIRECT alignment.
#[derive(Copy, Clone, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
pub struct Page(pub [u8; 4096]);

/// Where a pooled buffer's pages go back to when the buffer is dropped.
///
/// A driver that registers memory with a device (io_uring's registered buffers) must keep
/// that memory alive for as long as it is registered, yet the memory travels inside bios it
/// does not own. A pool hands out [`IoBuf`]s whose pages come from it and return to it on
/// drop instead of being freed, so registered memory is only ever freed by the pool itself.
pub trait BufHome: Send + Sync {
    /// Takes back the pages of a dropped buffer.
    fn give_back(&self, pages: HomePages);
}

/// The pages a buffer hands back to its [`BufHome`].
pub enum HomePages {
    /// Pages of the heap the home gave as a vector ([`IoBuf::pooled`]).
    Heap(Vec<Page>),
    /// Pages of memory the home mapped itself and lent ([`IoBuf::lent`]).
    Lent(Box<dyn LentPages>),
}

/// Memory a [`BufHome`] mapped itself (huge pages, say) and lends to one buffer at a time.
/// Its length is a whole number of pages and it starts on a page.
pub trait LentPages: Send + Sync {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The bytes, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

/// A buffer's pages: its own heap allocation, or memory its home lends it.
enum Store {
    Heap(Vec<Page>),
    Lent(Box<dyn LentPages>),
}

impl Store {
    fn bytes(&self) -> &[u8] {
        match self {
            Store::Heap(v) => bytemuck::cast_slice::<Page, u8>(v),
            Store::Lent(l) => l.bytes(),
        }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Store::Heap(v) => bytemuck::cast_slice_mut::<Page, u8>(v),
            Store::Lent(l) => l.bytes_mut(),
        }
    }
    fn into_home(self) -> HomePages {
        match self {
            Store::Heap(v) => HomePages::Heap(v),
            Store::Lent(l) => HomePages::Lent(l),
        }
    }
}

/// Data buffers one submitter keeps for reuse: a request's buffer comes from here when one
/// is large enough, and a finished request's goes back, so the request path allocates and
/// zeroes no fresh pages. A buffer's old bytes are never shown: its next user overwrites
/// all of its length (a read's data by the driver, a write's by the caller). Holds at most
/// `max` buffers and [`SpareBufs::bytes_at_most`] bytes of them; more are dropped.
#[derive(Debug)]
pub struct SpareBufs {
    bufs: Vec<IoBuf>,
    max: usize,
    max_bytes: usize,
    /// The capacity of the buffers kept.
    bytes: usize,
}

impl SpareBufs {
    /// Keeps at most `max` buffers for reuse.
    pub fn new(max: usize) -> SpareBufs {
        SpareBufs {
            bufs: Vec::new(),
            max,
            max_bytes: usize::MAX,
            bytes: 0,
        }
    }
    /// Keeps no more than `n` bytes of buffers (a burst of large requests does not stay
    /// allocated after it).
    pub fn bytes_at_most(mut self, n: usize) -> SpareBufs {
        self.max_bytes = n;
        self
    }
    /// A buffer of `len` bytes: a kept one with room for it, else a new one.
    pub fn take(&mut self, len: usize) -> IoBuf {
        let mut b = match self.bufs.iter().position(|b| b.capacity() >= len) {
            Some(i) => {
                let b = self.bufs.swap_remove(i);
                self.bytes -= b.capacity();
                b
            }
            None => IoBuf::new(len),
        };
        b.set_len(len);
        b
    }
    /// Keeps `b` for a later request, unless that would pass the bounds.
    pub fn give(&mut self, b: IoBuf) {
        if self.bufs.len() < self.max && self.bytes + b.capacity() <= self.max_bytes {
            self.bytes += b.capacity();
            self.bufs.push(b);
        }
    }
}

/// A page-aligned data buffer. Its length need not be a multiple of the page size.
///
/// The pages are one allocation that does not move when the buffer moves. A buffer may
/// come from a pool ([`IoBuf::pooled`]) or over memory a home mapped itself
/// ([`IoBuf::lent`]): its pages then go back to their home when it is dropped, and a clone
/// is an ordinary buffer with pages of its own. The buffer knows how its pages lie in
/// physical memory ([`IoBuf::bvecs`]), which is what the kernel's segment count sees.
pub struct IoBuf {
    store: Store,
    len: usize,
    home: Option<std::sync::Arc<dyn BufHome>>,
    bvecs: BvecLayout,
}

impl IoBuf {
    /// A zero-filled buffer of `len` bytes on the heap.
    pub fn new(len: usize) -> IoBuf {
        let nr_pages = len.div_ceil(4096).max(1);
        IoBuf {
            store: Store::Heap(vec![bytemuck::Zeroable::zeroed(); nr_pages]),
            len,
            home: None,
            bvecs: BvecLayout::PAGES,
        }
    }
    /// A buffer over heap pages that belong to `home`, which gets them back on drop.
    pub fn pooled(pages: Vec<Page>, len: usize, home: std::sync::Arc<dyn BufHome>) -> IoBuf {
        assert!(
            len <= pages.len() * 4096,
            "pooled buffer of {len} bytes over {} pages",
            pages.len()
        );
        IoBuf {
            store: Store::Heap(pages),
            len,
            home: Some(home),
            bvecs: BvecLayout::PAGES,
        }
    }
    /// A buffer of `len` bytes over memory `home` lends, laid out in physical memory as
    /// `bvecs` says; `home` gets the pages back on drop.
    pub fn lent(
        pages: Box<dyn LentPages>,
        len: usize,
        home: std::sync::Arc<dyn BufHome>,
        bvecs: BvecLayout,
    ) -> IoBuf {
        let have = pages.bytes().len();
        assert!(
            len <= have && have % 4096 == 0 && pages.bytes().as_ptr() as usize % 4096 == 0,
            "lent buffer of {len} bytes over {have} bytes of memory"
        );
        IoBuf {
            store: Store::Lent(pages),
            len,
            home: Some(home),
            bvecs,
        }
    }
    /// True when the pages came from a pool and will go back to it.
    pub fn is_pooled(&self) -> bool {
        self.home.is_some()
    }
    /// How the pages lie in physical memory: adjoining only by chance for heap pages
    /// ([`BvecLayout::PAGES`]), in runs of the page size for huge pages.
    pub fn bvecs(&self) -> BvecLayout {
        self.bvecs
    }
    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a buffer of no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes that can be used without reallocating.
    pub fn capacity(&self) -> usize {
        self.store.bytes().len()
    }
    /// Changes the length within the capacity, growing the allocation if needed. A pooled
    /// buffer that has to grow first gives its pages back and becomes an ordinary buffer, so
    /// the pool's memory is never reallocated behind its back.
    pub fn set_len(&mut self, len: usize) {
        let nr_pages = len.div_ceil(4096).max(1);
        if nr_pages * 4096 > self.store.bytes().len() {
            if let Some(home) = self.home.take() {
                let mut fresh: Vec<Page> = vec![bytemuck::Zeroable::zeroed(); nr_pages];
                let n = self.len.min(len);
                bytemuck::cast_slice_mut::<Page, u8>(&mut fresh)[..n]
                    .copy_from_slice(&self.as_slice()[..n]);
                let old = std::mem::replace(&mut self.store, Store::Heap(fresh));
                home.give_back(old.into_home());
                self.bvecs = BvecLayout::PAGES;
            } else if let Store::Heap(v) = &mut self.store {
                v.resize(nr_pages, bytemuck::Zeroable::zeroed());
            }
        }
        self.len = len;
    }
    /// The bytes, as far as the length goes.
    pub fn as_slice(&self) -> &[u8] {
        &self.store.bytes()[..self.len]
    }
    /// The bytes, writable, as far as the length goes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.store.bytes_mut()[..len]
    }
}

impl Clone for IoBuf {
    fn clone(&self) -> IoBuf {
        IoBuf {
            store: Store::Heap(bytemuck::cast_slice(self.store.bytes()).to_vec()),
            len: self.len,
            home: None,
            bvecs: BvecLayout::PAGES,
        }
    }
}

impl Drop for IoBuf {
    fn drop(&mut self) {
        if let Some(home) = self.home.take() {
            let store = std::mem::replace(&mut self.store, Store::Heap(Vec::new()));
            home.give_back(store.into_home());
        }
    }
}

impl std::fmt::Debug for IoBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IoBuf({} bytes)", self.len)
    }
}

/// How a bio's buffer lies in physical memory: the runs of adjoining pages the kernel's
/// multi-page bvecs describe (`bio_iov_iter_get_pages` joins a page to the bvec before it when
/// they adjoin). Segment counting and splitting (`bio_split_rw_at`) walk these runs.
///
/// Every run starts at a boundary of its own length and is `run` bytes long, the bio starting
/// `skip` bytes into its first run (the rest of a bio split off mid-run). `run == 0` is a
/// buffer the core cannot see into and counts as one segment (a bio without a buffer that
/// says nothing of one). A bio takes its buffer's layout ([`IoBuf::bvecs`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct BvecLayout {
    /// Bytes per physically contiguous run (0: the whole buffer, one segment).
    pub run: u32,
    /// Bytes into its first run where the bio's data starts.
    pub skip: u32,
}

impl BvecLayout {
    /// A buffer whose layout the core does not see: one segment.
    pub const WHOLE: BvecLayout = BvecLayout { run: 0, skip: 0 };
    /// A process's buffer in 4 KiB pages that adjoin only by chance, counted as never: the
    /// kernel's worst case for fio's default `iomem=malloc` (a running fio's writer buffer in
    /// `/proc/PID/pagemap` ran from one page to ten per physically contiguous run between
    /// runs on this project's VM, mostly one).
    pub const PAGES: BvecLayout = BvecLayout {
        run: PAGE_BYTES,
        skip: 0,
    };

    /// The layout of the part of a buffer laid out as `self` that starts `bytes` into it.
    pub fn advanced(self, bytes: u64) -> BvecLayout {
        if self.run == 0 {
            return self;
        }
        BvecLayout {
            run: self.run,
            skip: ((self.skip as u64 + bytes) % self.run as u64) as u32,
        }
    }
}

/// The page size segments are counted in.
pub const PAGE_BYTES: u32 = 4096;

/// A block I/O as submitted by a frontend.
///
/// Required fields are positional in [`Bio::new`]; the rest have chained setters. The core
/// fills in `ctx` and `submit_ns` when the bio is submitted and `status` when it completes.
#[derive(Debug)]
pub struct Bio {
    /// What it does (read, write, flush, ...).
    pub op: ReqOp,
    /// Its flags (`bi_opf`'s upper bits: sync, FUA, PREFLUSH, ...).
    pub flags: ReqFlags,
    /// Its I/O priority (`bi_ioprio`).
    pub ioprio: IoPrio,
    /// First sector.
    pub sector: u64,
    /// Length in sectors (0 for a flush).
    pub nr_sectors: u32,
    /// Who issued it (a process or job id); schedulers that queue per issuer use it.
    pub issuer: u32,
    /// The issuer's group (a cgroup-like id, 0 = root), for group scheduling.
    pub group: u32,
    /// The submitter's own cookie, returned untouched on completion (`bi_private`).
    pub private: u64,
    /// The data, for reads and writes. A bio without a buffer moves no data (the null
    /// driver without `memory_backed` does not need one).
    pub buf: Option<IoBuf>,
    /// The outcome, set on completion.
    pub status: BlkStatus,
    /// The software queue it was submitted from; completions are routed back to it.
    pub ctx: CtxIdx,
    /// When it was first submitted, for the latency: set by the queue on a bio's first
    /// submission and kept when it comes back busy and is submitted again.
    pub submit_ns: Nanos,
    /// For a piece of a bio the queue split (or the rest of one that came back busy): the
    /// original's slot in the queue's split table. `None` for every bio a submitter makes.
    pub split: Option<u32>,
    /// The queue has seen it (stamped `submit_ns`, traced `Q`): a bio handed back for want
    /// of a tag and submitted again is neither stamped nor traced again, as the kernel's
    /// task sleeps for the tag after `trace_block_bio_queue`.
    pub queued: bool,
    /// How the buffer lies in memory, for segment counting ([`BvecLayout::WHOLE`] unless
    /// the submitter says).
    pub bvecs: BvecLayout,
    /// Zone write plugging's marks on it (`BIO_ZONE_WRITE_PLUGGING`,
    /// `BIO_EMULATES_ZONE_APPEND`): the core's own, clear on every bio a submitter makes.
    pub(crate) zone: crate::queue::zoned::ZoneBio,
}

impl Bio {
    /// A bio of `op` over `nr_sectors` from `sector`; reads are synchronous (`REQ_SYNC`), as the kernel marks them.
    #[inline]
    pub fn new(op: ReqOp, sector: u64, nr_sectors: u32) -> Bio {
        Bio {
            op,
            flags: if op.is_read() {
                ReqFlags::SYNC
            } else {
                ReqFlags::empty()
            },
            ioprio: IoPrio::DEFAULT,
            sector,
            nr_sectors,
            issuer: 0,
            group: 0,
            private: 0,
            buf: None,
            status: BlkStatus::Ok,
            ctx: CtxIdx(0),
            submit_ns: Nanos::ZERO,
            split: None,
            queued: false,
            zone: crate::queue::zoned::ZoneBio::NONE,
            bvecs: BvecLayout::WHOLE,
        }
    }
    /// Adds `flags` to the bio's.
    #[inline]
    pub fn with_flags(mut self, flags: ReqFlags) -> Bio {
        self.flags = self.flags.union(flags);
        self
    }
    /// Sets the I/O priority.
    #[inline]
    pub fn with_ioprio(mut self, ioprio: IoPrio) -> Bio {
        self.ioprio = ioprio;
        self
    }
    /// Sets who issued it and its group (see [`Bio::issuer`], [`Bio::group`]).
    #[inline]
    pub fn with_issuer(mut self, issuer: u32, group: u32) -> Bio {
        self.issuer = issuer;
        self.group = group;
        self
    }
    /// Sets the submitter's cookie, handed back on completion.
    #[inline]
    pub fn with_private(mut self, private: u64) -> Bio {
        self.private = private;
        self
    }
    /// Says how the buffer lies in memory, for segment counting.
    #[inline]
    pub fn with_bvecs(mut self, bvecs: BvecLayout) -> Bio {
        self.bvecs = bvecs;
        self
    }
    /// Gives it its data buffer; its segments are then counted over how the buffer lies in
    /// memory ([`IoBuf::bvecs`]).
    #[inline]
    pub fn with_buf(mut self, buf: IoBuf) -> Bio {
        self.bvecs = buf.bvecs();
        self.buf = Some(buf);
        self
    }
    /// The sector after its last.
    #[inline]
    pub fn end_sector(&self) -> u64 {
        self.sector + self.nr_sectors as u64
    }
    /// Its length in bytes.
    #[inline]
    pub fn bytes(&self) -> u64 {
        (self.nr_sectors as u64) << SECTOR_SHIFT
    }
    /// True if this bio may be merged with others (`bio_mergeable`).
    #[inline]
    pub fn mergeable(&self) -> bool {
        !self.flags.intersects(ReqFlags::NOMERGE_FLAGS)
            && matches!(self.op, ReqOp::Read | ReqOp::Write | ReqOp::Discard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_buffers_are_reused_within_their_bound() {
        let mut spare = SpareBufs::new(1);
        let mut a = spare.take(8192);
        a.as_mut_slice()[0] = 7;
        let pages = a.as_slice().as_ptr();
        spare.give(a);
        // Past the bound of one buffer: dropped.
        spare.give(IoBuf::new(4096));
        // A smaller request takes the kept buffer, at the length asked.
        let b = spare.take(512);
        assert_eq!(b.as_slice().as_ptr(), pages, "the same pages");
        assert_eq!(b.len(), 512);
        // Nothing is kept now: the next is a fresh, zeroed buffer.
        let c = spare.take(512);
        assert_ne!(c.as_slice().as_ptr(), pages);
        assert!(c.as_slice().iter().all(|&x| x == 0));
        // The byte bound: an 8 KiB buffer fits in 12 KiB, a second one does not.
        let mut spare = SpareBufs::new(4).bytes_at_most(12288);
        spare.give(IoBuf::new(8192));
        spare.give(IoBuf::new(8192));
        let kept = spare.take(4096);
        assert_eq!(kept.capacity(), 8192);
        assert_eq!(
            spare
                .take(4096)
                .as_slice()
                .iter()
                .filter(|&&x| x != 0)
                .count(),
            0
        );
        // Taking gave its bytes back to the bound: two 4 KiB buffers fit again, and then
        // the 8 KiB one would pass 12 KiB: dropped, so an 8 KiB request gets fresh pages.
        spare.give(IoBuf::new(4096));
        spare.give(IoBuf::new(4096));
        let kept_pages = kept.as_slice().as_ptr();
        spare.give(kept);
        assert_ne!(spare.take(8192).as_slice().as_ptr(), kept_pages);
        // Within the bound it would have been kept.
        let mut roomy = SpareBufs::new(4).bytes_at_most(16384);
        let b = IoBuf::new(8192);
        let b_pages = b.as_slice().as_ptr();
        roomy.give(IoBuf::new(4096));
        roomy.give(IoBuf::new(4096));
        roomy.give(b);
        assert_eq!(roomy.take(8192).as_slice().as_ptr(), b_pages);
    }
}
