//! `null`: a block device that does no I/O, modelled on Linux's null_blk.
//!
//! It accepts every request and completes it, either at once, when the hardware queue is
//! polled, or after a fixed delay, so the block layer above it can be measured and tested
//! without a device in the way. Optionally it keeps written data in memory (`memory_backed`),
//! so data paths can be verified end to end, and it can inject failures, lost requests
//! (timeouts) and requeues to drive the core's error paths.
//!
//! Each hardware queue keeps its own state behind its own lock on its own cache line; the
//! default configuration (inline completion, no data, no faults) touches none of it.

use crossbeam_utils::CachePadded;
use mqblk_core::tag::MAX_DEPTH;
pub use mqblk_core::IrqMode;
use mqblk_core::{
    BlkStatus, CompletionBatch, Driver, EhReturn, Extent, HctxIdx, MapQueues, Nanos, QueueLimits,
    ReqOp, Request, RqId, TagSetConfig, TagSetFlags, Zone, ZoneFault, ZoneMgmt, ZonedDev,
    ZonedDevConfig, MAX_EXTENTS, SECTOR_SHIFT,
};
use mqblk_core::{FaultConfig, FaultError, FaultInjector, Injected};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use thiserror::Error;

/// The kernel's default capacity, `gb=250`. Without `memory_backed` a large device costs
/// nothing, and with it only pages that were written take memory.
pub const DEFAULT_SIZE_BYTES: u64 = 250 << 30;
/// The most hardware queues of either kind a device may ask for. The kernel bounds them by
/// the CPU count; a fixed bound keeps configurations portable between machines.
pub const MAX_HW_QUEUES: u16 = 1024;
/// The largest logical block size: the memory store works in 4 KiB pages, and a block must
/// not straddle two of them.
pub const MAX_BLOCK_SIZE: u32 = 4096;

/// The device's knobs, named and defaulted as null_blk's module parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct NullConfig {
    /// Hardware queues in the DEFAULT map.
    pub submit_queues: u16,
    /// Hardware queues in the POLL map. Completions on them always wait for a poll,
    /// whatever `irqmode` says, as polled I/O never raises an interrupt. The kernel's
    /// default is 1; ours is 0 so that nothing needs polling by default.
    pub poll_queues: u16,
    /// Driver tags per hardware queue.
    pub hw_queue_depth: u32,
    pub irqmode: IrqMode,
    /// Delay from issue to completion with `IrqMode::Timer`.
    pub completion_nsec: u64,
    /// Several devices share one tag set (`TAG_QUEUE_SHARED` fairness). The device itself
    /// does nothing different: the caller builds one `TagSet` from one configuration and
    /// hands it to the queue of every device.
    pub shared_tags: bool,
    /// One tag space for all hardware queues of the device (`TAG_HCTX_SHARED`).
    pub shared_tag_bitmap: bool,
    /// Declare that `queue_rq` may block (`BLOCKING`). Ours never does; the flag exists to
    /// exercise runtimes that must honour it.
    pub blocking: bool,
    /// Keep written data in memory, so reads return it.
    pub memory_backed: bool,
    /// `cache_size` in MiB: non-zero declares a volatile write cache that honours FUA, as
    /// null_blk does (`BLK_FEAT_WRITE_CACHE | BLK_FEAT_FUA`), so flushes reach the driver.
    /// The data is not held back: a flush has nothing to write.
    pub cache_size_mb: u64,
    /// Capacity in bytes: a non-zero multiple of `bs`.
    pub size_bytes: u64,
    /// Logical block size in bytes.
    pub bs: u32,
    pub rotational: bool,
    /// Largest request in 512-byte sectors; 0 keeps the block layer default.
    pub max_sectors: u32,
    pub faults: FaultConfig,
    /// `zoned`: the device is zoned (host-managed), its zones kept as null_blk's
    /// `zoned.c` keeps them ([`ZonedDev`]), with null_blk's `zone_*` parameters (`zone`;
    /// null_blk takes the sizes in MB, this in sectors).
    pub zoned: bool,
    pub zone: ZonedDevConfig,
}

impl Default for NullConfig {
    fn default() -> NullConfig {
        NullConfig {
            submit_queues: 1,
            poll_queues: 0,
            hw_queue_depth: 64,
            irqmode: IrqMode::None,
            completion_nsec: 10_000,
            shared_tags: false,
            shared_tag_bitmap: false,
            blocking: false,
            memory_backed: false,
            cache_size_mb: 0,
            size_bytes: DEFAULT_SIZE_BYTES,
            bs: 512,
            rotational: false,
            max_sectors: 0,
            faults: FaultConfig::default(),
            zoned: false,
            zone: ZonedDevConfig::default(),
        }
    }
}

/// A configuration the device refuses. Each message is one line naming the knob.
#[derive(Debug, Error, PartialEq)]
pub enum NullError {
    #[error("null: submit_queues {0} out of range 1..={MAX_HW_QUEUES}")]
    SubmitQueues(u16),
    #[error("null: poll_queues {0} out of range 0..={MAX_HW_QUEUES}")]
    PollQueues(u16),
    #[error("null: hw_queue_depth {0} out of range 1..={MAX_DEPTH}")]
    HwQueueDepth(u32),
    #[error("null: bs {0} must be a power of two in 512..={MAX_BLOCK_SIZE}")]
    BlockSize(u32),
    #[error("null: size_bytes {size} must be a non-zero multiple of bs ({bs})")]
    Size { size: u64, bs: u32 },
    #[error("null: max_sectors {0} must be 0 (block layer default) or at least 8")]
    MaxSectors(u32),
    #[error("null: {0}")]
    Faults(#[from] FaultError),
    #[error("null: {0}")]
    Zoned(#[from] mqblk_core::ZonedConfigError),
}

impl NullConfig {
    /// Checks every knob against its range.
    pub fn validate(&self) -> Result<(), NullError> {
        if !(1..=MAX_HW_QUEUES).contains(&self.submit_queues) {
            return Err(NullError::SubmitQueues(self.submit_queues));
        }
        if self.poll_queues > MAX_HW_QUEUES {
            return Err(NullError::PollQueues(self.poll_queues));
        }
        if !(1..=MAX_DEPTH).contains(&self.hw_queue_depth) {
            return Err(NullError::HwQueueDepth(self.hw_queue_depth));
        }
        if !self.bs.is_power_of_two() || !(512..=MAX_BLOCK_SIZE).contains(&self.bs) {
            return Err(NullError::BlockSize(self.bs));
        }
        if self.size_bytes == 0 || self.size_bytes % self.bs as u64 != 0 {
            return Err(NullError::Size {
                size: self.size_bytes,
                bs: self.bs,
            });
        }
        if self.max_sectors != 0 && self.max_sectors < 8 {
            return Err(NullError::MaxSectors(self.max_sectors));
        }
        self.faults.validate()?;
        self.zoned_dev().transpose()?;
        Ok(())
    }

    /// The zones of a zoned device, fresh (`null_init_zoned_dev`); `None` unless `zoned`.
    pub fn zoned_dev(&self) -> Option<Result<ZonedDev, mqblk_core::ZonedConfigError>> {
        self.zoned
            .then(|| ZonedDev::new(self.capacity_sectors(), self.zone))
    }

    /// All hardware queues: DEFAULT first, then POLL, as the tag set numbers them.
    pub fn nr_hw_queues(&self) -> u16 {
        self.submit_queues + self.poll_queues
    }

    pub fn capacity_sectors(&self) -> u64 {
        self.size_bytes >> SECTOR_SHIFT
    }

    /// The tag set this device wants (`blk_mq_alloc_tag_set` input).
    pub fn tag_set_config(&self) -> TagSetConfig {
        let mut flags = TagSetFlags::default();
        if self.shared_tag_bitmap {
            flags = flags.union(TagSetFlags::TAG_HCTX_SHARED);
        }
        if self.blocking {
            flags = flags.union(TagSetFlags::BLOCKING);
        }
        TagSetConfig {
            maps: MapQueues {
                default: self.submit_queues,
                read: 0,
                poll: self.poll_queues,
            },
            queue_depth: self.hw_queue_depth,
            reserved_tags: 0,
            flags,
        }
    }

    /// Queue limits matching the device: its block size, its request size limit, and its
    /// capacity. Put them in `QueueConfig::limits` so the queue checks bios against them.
    pub fn queue_limits(&self) -> QueueLimits {
        let defaults = QueueLimits::default();
        let zoned = self.zoned_dev().and_then(Result::ok).map(|z| z.limits());
        QueueLimits {
            zoned,
            chunk_sectors: zoned.map_or(defaults.chunk_sectors, |z| z.zone_sectors),
            logical_block_size: self.bs,
            max_sectors: if self.max_sectors == 0 {
                defaults.max_sectors
            } else {
                self.max_sectors
            },
            capacity_sectors: self.capacity_sectors(),
            ..defaults
        }
    }
}

// ----- fault injection -----------------------------------------------------------------------

// ----- hardware queues -----------------------------------------------------------------------

/// How a hardware queue hands completions back; fixed when the device is built.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Completion {
    /// Into the batch, from `queue_rq`.
    Inline,
    /// Onto `ready`, for the next poll (softirq mode, and every POLL queue).
    Deferred,
    /// Onto `timed`, for the first poll at or after the due time.
    Timer,
}

/// The mutable state of one hardware queue.
#[derive(Debug)]
struct HctxState {
    /// Finished requests waiting for a poll.
    ready: Vec<(RqId, BlkStatus)>,
    /// Requests finishing at a time. The delay is the same for every request, so pushing at
    /// the back keeps the queue in due order.
    timed: VecDeque<(Nanos, RqId, BlkStatus)>,
    /// This hardware queue's fault injection.
    faults: FaultInjector,
    /// Requests accepted and deliberately never completed, ended by the timeout handler.
    /// Few, so a vector beats a hash set and keeps iteration order out of the picture.
    lost: Vec<RqId>,
}

impl HctxState {
    fn inflight(&self) -> usize {
        self.ready.len() + self.timed.len() + self.lost.len()
    }
}

struct NullHctx {
    mode: Completion,
    /// Nothing to decide or record for any request: complete inline, leave `state` alone.
    trivial: bool,
    state: Mutex<HctxState>,
}

// ----- memory store --------------------------------------------------------------------------

const PAGE_SIZE: usize = 4096;
const PAGE_BYTES: u64 = PAGE_SIZE as u64;
/// Stripes of the page map. Pages go to stripes by index, so sequential I/O from several
/// queues spreads over all of them.
const NR_SHARDS: usize = 64;
/// Above this many whole pages, zeroing a range sweeps the stored pages instead of looking
/// up every page of the range, which for a large discard are mostly absent.
const ZERO_SWEEP_PAGES: u64 = 4096;
/// Pages one allocation query looks at (1 GiB): a larger range is answered in parts.
const BLOCK_STATUS_PAGES: u64 = 1 << 18;

type Page = Box<[u8; PAGE_SIZE]>;
/// One stripe of the page map.
type Shard = Mutex<PageMap>;

/// Page slots per leaf of a stripe's page table: 512 pointers, one 4 KiB leaf.
const LEAF_PAGES: u64 = 512;
type Leaf = [Option<Page>; LEAF_PAGES as usize];

/// One stripe's pages, by their index within the stripe: a two-level table (as nbdkit's
/// sparse array) whose leaves hold 512 page pointers each and are found through a small map
/// with a multiplicative hash. A lookup touches the leaf map (a few entries per GiB, cached),
/// one line of a leaf and the page, where a map of pages hashed every index with SipHash and
/// probed a table far larger than the caches (a tenth of the NBD server's samples on random
/// 4 KiB writes).
#[derive(Default)]
struct PageMap {
    leaves: HashMap<u64, Box<Leaf>, std::hash::BuildHasherDefault<LeafHasher>>,
    len: usize,
}

/// Fibonacci hashing of a leaf number: leaf numbers are small and dense, and need no
/// defence against chosen keys.
#[derive(Default)]
struct LeafHasher(u64);

impl std::hash::Hasher for LeafHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl PageMap {
    fn split(k: u64) -> (u64, usize) {
        (k / LEAF_PAGES, (k % LEAF_PAGES) as usize)
    }
    fn get(&self, k: u64) -> Option<&Page> {
        let (leaf, slot) = Self::split(k);
        self.leaves.get(&leaf)?[slot].as_ref()
    }
    fn get_mut(&mut self, k: u64) -> Option<&mut Page> {
        let (leaf, slot) = Self::split(k);
        self.leaves.get_mut(&leaf)?[slot].as_mut()
    }
    fn contains(&self, k: u64) -> bool {
        self.get(k).is_some()
    }
    /// The page, created zeroed if absent.
    fn get_or_insert(&mut self, k: u64) -> &mut Page {
        let (leaf, slot) = Self::split(k);
        let leaf = self
            .leaves
            .entry(leaf)
            .or_insert_with(|| Box::new(std::array::from_fn(|_| None)));
        let e = &mut leaf[slot];
        if e.is_none() {
            self.len += 1;
        }
        e.get_or_insert_with(|| Box::new([0; PAGE_SIZE]))
    }
    /// Drops the page, and its leaf if that was the leaf's last page (a discard path, not
    /// the request path: the check reads the leaf's 4 KiB of pointers).
    fn remove(&mut self, k: u64) {
        let (leaf, slot) = Self::split(k);
        if let Some(l) = self.leaves.get_mut(&leaf) {
            if l[slot].take().is_some() {
                self.len -= 1;
                if l.iter().all(Option::is_none) {
                    self.leaves.remove(&leaf);
                }
            }
        }
    }
    /// Drops every page with an index in `lo..hi`, and the leaves left empty.
    fn remove_range(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let mut removed = 0;
        self.leaves.retain(|&leaf, l| {
            let base = leaf * LEAF_PAGES;
            if base + LEAF_PAGES <= lo || base >= hi {
                return true;
            }
            let from = lo.saturating_sub(base) as usize;
            let to = (hi - base).min(LEAF_PAGES) as usize;
            for e in &mut l[from..to] {
                removed += usize::from(e.take().is_some());
            }
            l.iter().any(Option::is_some)
        });
        self.len -= removed;
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// The data of a memory-backed device: 4 KiB pages created on first write. A page that was
/// never written, or was discarded, reads as zeroes.
struct Store {
    shards: Box<[CachePadded<Shard>]>,
}

/// The pages a byte range touches: for each, its index, the offset inside it, and the
/// offset and length of the piece inside the range.
fn pages(start: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut done = 0u64;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = start + done;
        let off = (pos % PAGE_BYTES) as usize;
        let n = (PAGE_BYTES - off as u64).min(len - done);
        let piece = (pos / PAGE_BYTES, off, done as usize, n as usize);
        done += n;
        Some(piece)
    })
}

impl Store {
    fn new() -> Store {
        Store {
            shards: (0..NR_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(PageMap::default())))
                .collect(),
        }
    }

    /// The stripe holding `page`, and the page's index within it.
    fn shard(&self, page: u64) -> (&Shard, u64) {
        (
            &self.shards[(page % NR_SHARDS as u64) as usize],
            page / NR_SHARDS as u64,
        )
    }

    fn read(&self, sector: u64, out: &mut [u8]) {
        for (page, off, at, n) in pages(sector << SECTOR_SHIFT, out.len() as u64) {
            let dst = &mut out[at..at + n];
            let (shard, k) = self.shard(page);
            match shard.lock().get(k) {
                Some(p) => dst.copy_from_slice(&p[off..off + n]),
                None => dst.fill(0),
            }
        }
    }

    fn write(&self, sector: u64, data: &[u8]) {
        for (page, off, at, n) in pages(sector << SECTOR_SHIFT, data.len() as u64) {
            let (shard, k) = self.shard(page);
            shard.lock().get_or_insert(k)[off..off + n].copy_from_slice(&data[at..at + n]);
        }
    }

    /// Makes a sector range read as zeroes: whole pages are dropped, partial ones cleared.
    fn zero(&self, sector: u64, nr_sectors: u64) {
        let start = sector << SECTOR_SHIFT;
        let end = start + (nr_sectors << SECTOR_SHIFT);
        let first_whole = start.div_ceil(PAGE_BYTES);
        let end_whole = end / PAGE_BYTES;
        if end_whole <= first_whole || end_whole - first_whole <= ZERO_SWEEP_PAGES {
            self.zero_pages(start, end);
            return;
        }
        self.zero_pages(start, first_whole * PAGE_BYTES);
        self.zero_pages(end_whole * PAGE_BYTES, end);
        // Stripe `s` holds pages `k * NR_SHARDS + s`: those in `first_whole..end_whole`.
        let n = NR_SHARDS as u64;
        let local = |page: u64, s: u64| page.saturating_sub(s).div_ceil(n);
        for (s, shard) in self.shards.iter().enumerate() {
            let s = s as u64;
            shard
                .lock()
                .remove_range(local(first_whole, s), local(end_whole, s));
        }
    }

    fn zero_pages(&self, start: u64, end: u64) {
        for (page, off, _, n) in pages(start, end - start) {
            let (shard, k) = self.shard(page);
            let mut shard = shard.lock();
            if n == PAGE_SIZE {
                shard.remove(k);
            } else if let Some(p) = shard.get_mut(k) {
                p[off..off + n].fill(0);
            }
        }
    }

    /// Pages never written or discarded are holes reading as zeroes; stored ones are data.
    /// Looks at no more than [`BLOCK_STATUS_PAGES`] pages per call.
    fn block_status(&self, sector: u64, nr_sectors: u64) -> Vec<Extent> {
        let (start, end) = (
            sector << SECTOR_SHIFT,
            (sector + nr_sectors) << SECTOR_SHIFT,
        );
        let end = end.min(start + BLOCK_STATUS_PAGES * PAGE_BYTES);
        let mut out: Vec<Extent> = Vec::new();
        let mut pos = start;
        while pos < end {
            let page = pos / PAGE_BYTES;
            let next = ((page + 1) * PAGE_BYTES).min(end);
            let (shard, k) = self.shard(page);
            let hole = !shard.lock().contains(k);
            let sectors = (next - pos) >> SECTOR_SHIFT;
            let full = out.len() == MAX_EXTENTS;
            match out.last_mut() {
                Some(x) if x.hole == hole => x.sectors += sectors,
                _ if full => break,
                _ => out.push(Extent {
                    sectors,
                    hole,
                    zero: hole,
                }),
            }
            pos = next;
        }
        out
    }

    /// Carries out one request's data transfer.
    fn handle(&self, rq: &mut Request) -> BlkStatus {
        match rq.op {
            // Written data is already where a flush would put it.
            ReqOp::Flush => BlkStatus::Ok,
            ReqOp::Discard | ReqOp::WriteZeroes => {
                for bio in &rq.bios {
                    self.zero(bio.sector, bio.nr_sectors as u64);
                }
                BlkStatus::Ok
            }
            // The zones were changed already; a reset's data was dropped with them.
            ReqOp::ZoneReset
            | ReqOp::ZoneResetAll
            | ReqOp::ZoneOpen
            | ReqOp::ZoneClose
            | ReqOp::ZoneFinish => BlkStatus::Ok,
            ReqOp::Read | ReqOp::Write | ReqOp::ZoneAppend => {
                // Check every bio first, so a bad one leaves the store untouched.
                let bad = rq.bios.iter().any(|b| {
                    b.buf
                        .as_ref()
                        .is_none_or(|buf| (buf.len() as u64) < b.bytes())
                });
                if bad {
                    return BlkStatus::Invalid;
                }
                for bio in &mut rq.bios {
                    let bytes = bio.bytes() as usize;
                    let Some(buf) = bio.buf.as_mut() else {
                        continue;
                    };
                    if rq.op == ReqOp::Read {
                        self.read(bio.sector, &mut buf.as_mut_slice()[..bytes]);
                    } else {
                        self.write(bio.sector, &buf.as_slice()[..bytes]);
                    }
                }
                BlkStatus::Ok
            }
        }
    }
}

// ----- the device ----------------------------------------------------------------------------

/// A null block device. Build its tag set from the same configuration
/// ([`NullConfig::tag_set_config`]) so the hardware queues agree.
pub struct NullDevice {
    cfg: NullConfig,
    capacity_sectors: u64,
    completion_delay: Nanos,
    /// Any fault knob armed; when false the issue path does no random draws.
    faults_enabled: bool,
    store: Option<Store>,
    hctxs: Box<[CachePadded<NullHctx>]>,
    /// A zoned device's zones (`zoned`).
    zones: Option<Mutex<ZonedDev>>,
}

impl std::fmt::Debug for NullDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NullDevice")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl NullDevice {
    pub fn new(cfg: NullConfig) -> Result<Arc<NullDevice>, NullError> {
        cfg.validate()?;
        let faults_enabled = cfg.faults.is_enabled();
        let trivial = !faults_enabled && !cfg.memory_backed && !cfg.zoned;
        let hctxs = (0..cfg.nr_hw_queues())
            .map(|h| {
                let mode = if h >= cfg.submit_queues {
                    Completion::Deferred
                } else {
                    match cfg.irqmode {
                        IrqMode::None => Completion::Inline,
                        IrqMode::Softirq => Completion::Deferred,
                        IrqMode::Timer => Completion::Timer,
                    }
                };
                let state = HctxState {
                    ready: Vec::new(),
                    timed: VecDeque::new(),
                    faults: FaultInjector::new(&cfg.faults, h),
                    lost: Vec::new(),
                };
                CachePadded::new(NullHctx {
                    mode,
                    trivial: trivial && mode == Completion::Inline,
                    state: Mutex::new(state),
                })
            })
            .collect();
        Ok(Arc::new(NullDevice {
            capacity_sectors: cfg.capacity_sectors(),
            completion_delay: Nanos(cfg.completion_nsec),
            faults_enabled,
            store: cfg.memory_backed.then(Store::new),
            hctxs,
            zones: cfg.zoned_dev().transpose()?.map(Mutex::new),
            cfg,
        }))
    }

    pub fn config(&self) -> &NullConfig {
        &self.cfg
    }

    /// Bytes of data held by a memory-backed device (whole pages), 0 otherwise.
    pub fn stored_bytes(&self) -> u64 {
        self.store.as_ref().map_or(0, |s| {
            s.shards
                .iter()
                .map(|m| m.lock().len() as u64 * PAGE_BYTES)
                .sum()
        })
    }

    /// Flips the bits of one stored byte, behind the block layer's back: the data-corruption
    /// fault that `verify=` exists to catch. Returns false if that byte is not stored (never
    /// written, or the device is not memory-backed).
    pub fn corrupt(&self, byte_offset: u64) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        let page = byte_offset / PAGE_BYTES;
        let (shard, k) = store.shard(page);
        let mut shard = shard.lock();
        match shard.get_mut(k) {
            Some(p) => {
                p[(byte_offset % PAGE_BYTES) as usize] ^= 0xff;
                true
            }
            None => false,
        }
    }

    fn hctx(&self, hctx: HctxIdx) -> &NullHctx {
        &self.hctxs[hctx.0 as usize]
    }

    /// Executes the command (null_blk's `null_handle_cmd`): only a memory-backed device
    /// has anything to do.
    fn handle_cmd(&self, rq: &mut Request) -> BlkStatus {
        if let Some(zones) = &self.zones {
            if let Err(status) = self.zoned_cmd(zones, rq) {
                return status;
            }
        }
        let Some(store) = &self.store else {
            return BlkStatus::Ok;
        };
        if rq.end_sector() > self.capacity_sectors {
            return BlkStatus::Invalid;
        }
        store.handle(rq)
    }
}

impl NullDevice {
    /// `null_process_zoned_cmd`: the zone state changes a command makes, before its data
    /// moves. A zone append lands at the write pointer: the request's sector says where.
    fn zoned_cmd(&self, zones: &Mutex<ZonedDev>, rq: &mut Request) -> Result<(), BlkStatus> {
        let mut z = zones.lock();
        let mgmt = match rq.op {
            // Write-zeroes moves the write pointer as a write does (the block layer plugs it
            // as one, `blk_zone_plug_bio`).
            ReqOp::Write | ReqOp::WriteZeroes | ReqOp::ZoneAppend => {
                let append = rq.op == ReqOp::ZoneAppend;
                let at = z
                    .write(rq.sector, rq.nr_sectors as u64, append)
                    .map_err(ZoneFault::status)?;
                if append {
                    rq.sector = at;
                    if let Some(bio) = rq.bios.first_mut() {
                        bio.sector = at;
                    }
                }
                return Ok(());
            }
            ReqOp::ZoneReset => ZoneMgmt::Reset,
            ReqOp::ZoneResetAll => ZoneMgmt::ResetAll,
            ReqOp::ZoneOpen => ZoneMgmt::Open,
            ReqOp::ZoneClose => ZoneMgmt::Close,
            ReqOp::ZoneFinish => ZoneMgmt::Finish,
            // Reads need nothing of the zones: a reset dropped the data, and nothing is
            // ever written past a write pointer, so the store already reads zeroes there
            // (`null_zone_valid_read_len`'s effect). No zone here is ever offline.
            _ => return Ok(()),
        };
        let dropped = z.mgmt(mgmt, rq.sector)?;
        if let Some(store) = &self.store {
            for (start, len) in dropped {
                store.zero(start, len);
            }
        }
        Ok(())
    }
}

impl Driver for NullDevice {
    fn report_zones(&self, sector: u64, nr: usize) -> Option<Vec<Zone>> {
        Some(self.zones.as_ref()?.lock().report(sector, nr))
    }

    fn name(&self) -> &'static str {
        "null"
    }

    /// Without a memory store everything reads as zeroes and nothing is stored: one hole.
    fn block_status(&self, sector: u64, nr_sectors: u64) -> Option<Vec<Extent>> {
        Some(match &self.store {
            Some(store) => store.block_status(sector, nr_sectors),
            None => vec![Extent {
                sectors: nr_sectors,
                hole: true,
                zero: true,
            }],
        })
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }

    fn rotational(&self) -> bool {
        self.cfg.rotational
    }

    fn write_cache(&self) -> bool {
        self.cfg.cache_size_mb > 0
    }

    fn fua(&self) -> bool {
        self.cfg.cache_size_mb > 0
    }

    fn init_hctx(&self, hctx: HctxIdx, nr_tags: u32) {
        assert!(
            (hctx.0 as usize) < self.hctxs.len(),
            "null: hardware queue {} beyond the {} configured; build the tag set with NullConfig::tag_set_config",
            hctx.0,
            self.hctxs.len()
        );
        // Room for every tag up front, so completions never reallocate on the issue path.
        let q = self.hctx(hctx);
        let mut st = q.state.lock();
        match q.mode {
            Completion::Inline => {}
            Completion::Deferred => st.ready.reserve(nr_tags as usize),
            Completion::Timer => st.timed.reserve(nr_tags as usize),
        }
    }

    fn queue_rq(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        _last: bool,
        now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus {
        let q = self.hctx(hctx);
        if q.trivial {
            done.complete(rq.id, BlkStatus::Ok);
            return BlkStatus::Ok;
        }
        let mut status = BlkStatus::Ok;
        if self.faults_enabled {
            let injected = {
                let mut st = q.state.lock();
                let i = st.faults.inject();
                if i == Injected::Timeout {
                    st.lost.push(rq.id);
                }
                i
            };
            match injected {
                Injected::None => {}
                Injected::Busy => return BlkStatus::Resource,
                Injected::Requeue => {
                    done.requeue(rq.id);
                    return BlkStatus::Ok;
                }
                Injected::Timeout => return BlkStatus::Ok,
                Injected::Fail => status = BlkStatus::IoErr,
            }
        }
        if status.is_ok() {
            status = self.handle_cmd(rq);
        }
        match q.mode {
            Completion::Inline => done.complete(rq.id, status),
            Completion::Deferred => q.state.lock().ready.push((rq.id, status)),
            Completion::Timer => {
                let mut st = q.state.lock();
                // Two submitters issuing to one queue may pass slightly different clocks;
                // never let a request fall due before the one queued ahead of it, so the
                // queue stays in due order and polling can stop at the first not due.
                let mut due = now.saturating_add(self.completion_delay);
                if let Some(&(last_due, _, _)) = st.timed.back() {
                    due = due.max(last_due);
                }
                st.timed.push_back((due, rq.id, status));
            }
        }
        BlkStatus::Ok
    }

    /// Only requests this device chose to lose are ended here; any other request is still
    /// on its way and gets more time.
    fn timeout(
        &self,
        hctx: HctxIdx,
        rq: &mut Request,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> EhReturn {
        if !self.faults_enabled {
            return EhReturn::ResetTimer;
        }
        let mut st = self.hctx(hctx).state.lock();
        match st.lost.iter().position(|&id| id == rq.id) {
            Some(i) => {
                st.lost.swap_remove(i);
                done.complete(rq.id, BlkStatus::Timeout);
                EhReturn::Done
            }
            None => EhReturn::ResetTimer,
        }
    }

    fn poll(&self, hctx: HctxIdx, now: Nanos, done: &mut CompletionBatch) -> usize {
        let q = self.hctx(hctx);
        match q.mode {
            Completion::Inline => 0,
            Completion::Deferred => {
                let mut st = q.state.lock();
                let n = st.ready.len();
                for (id, status) in st.ready.drain(..) {
                    done.complete(id, status);
                }
                n
            }
            Completion::Timer => {
                let mut st = q.state.lock();
                let mut n = 0;
                while let Some(&(due, id, status)) = st.timed.front() {
                    if due > now {
                        break;
                    }
                    st.timed.pop_front();
                    done.complete(id, status);
                    n += 1;
                }
                n
            }
        }
    }

    /// The due time of the next timer completion. Deferred completions have no time: they
    /// are ready now, and `inflight` tells a runtime to poll for them.
    fn next_event(&self, hctx: HctxIdx) -> Option<Nanos> {
        let q = self.hctx(hctx);
        match q.mode {
            Completion::Timer => q.state.lock().timed.front().map(|&(due, _, _)| due),
            Completion::Inline | Completion::Deferred => None,
        }
    }

    /// Requests accepted and not yet handed back, lost ones included: they stay in flight
    /// until the timeout handler ends them.
    fn inflight(&self, hctx: HctxIdx) -> usize {
        let q = self.hctx(hctx);
        if q.trivial {
            return 0;
        }
        q.state.lock().inflight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_map_keeps_counts_and_drops_emptied_leaves() {
        let mut m = PageMap::default();
        for k in 0..1500 {
            m.get_or_insert(k)[0] = k as u8;
        }
        assert_eq!((m.len(), m.leaves.len()), (1500, 3));
        m.get_or_insert(7); // present already: not counted again
        assert_eq!(m.len(), 1500);
        m.remove_range(100, 1200);
        assert_eq!(m.len(), 400);
        assert!(m.contains(99) && !m.contains(100) && !m.contains(1199) && m.contains(1200));
        assert_eq!(m.get(1200).map(|p| p[0]), Some(1200u64 as u8));
        // Leaf 1 (pages 512..1024) lost every page: gone.
        assert_eq!(m.leaves.len(), 2);
        m.remove(99);
        m.remove(99);
        assert_eq!(m.len(), 399);
        assert!(m.get_mut(99).is_none());
        // The last page of leaf 0 removed one by one: the leaf goes too.
        for k in 0..99 {
            m.remove(k);
        }
        assert_eq!((m.len(), m.leaves.len()), (300, 1));
    }

    #[test]
    fn pages_split_unaligned_ranges() {
        let v: Vec<_> = pages(3584, 5120).collect();
        assert_eq!(
            v,
            vec![(0, 3584, 0, 512), (1, 0, 512, 4096), (2, 0, 4608, 512)]
        );
        assert_eq!(pages(0, 0).count(), 0);
    }

    #[test]
    fn store_zero_sweeps_large_ranges() {
        let s = Store::new();
        let data = vec![0xabu8; 4096];
        for page in [0u64, 10, 5000, 9000] {
            s.write(page * 8, &data);
        }
        s.write(9001 * 8, &data[..512]);
        // From the middle of page 0 to the middle of page 9001: page 0 and page 9001 are
        // partial, everything between is swept.
        s.zero(4, 9001 * 8 + 1 - 4);
        let mut out = vec![0u8; 4096];
        s.read(0, &mut out);
        assert!(out[..2048].iter().all(|&b| b == 0xab) && out[2048..].iter().all(|&b| b == 0));
        for page in [10u64, 5000, 9000] {
            s.read(page * 8, &mut out);
            assert!(out.iter().all(|&b| b == 0), "page {page}");
        }
        let mut tail = vec![0u8; 1024];
        s.read(9001 * 8, &mut tail);
        assert!(tail[..512].iter().all(|&b| b == 0));
        let total: usize = s.shards.iter().map(|m| m.lock().len()).sum();
        assert_eq!(total, 2, "only the two partial pages remain");
    }
}
