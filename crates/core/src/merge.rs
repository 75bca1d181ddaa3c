//! Merge rules (`block/blk-merge.c`, `block/elevator.c`): when a bio may join a request, and
//! when two requests may become one.
//!
//! These are pure functions on locked requests; the caller decides where to look for a
//! candidate (the plug's last request, the software queue's tail, an elevator's index).

use crate::bio::{Bio, BvecLayout, ReqOp};
use crate::request::{Request, RqState};

/// Queue limits that bound merging and splitting (`struct queue_limits`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Largest request in sectors (`max_sectors`; sysfs `max_sectors_kb` * 2).
    pub max_sectors: u32,
    /// Most physical segments in one request (`max_segments`).
    pub max_segments: u16,
    /// Largest segment in bytes (`max_segment_size`).
    pub max_segment_size: u32,
    /// A segment may not cross an address where these bits roll over
    /// (`seg_boundary_mask`).
    pub seg_boundary_mask: u64,
    /// Segments after the first must start, and those before the last end, on this boundary
    /// (`virt_boundary_mask`, NVMe's PRP rule); 0: no rule.
    pub virt_boundary_mask: u32,
    /// `logical_block_size` in bytes; bios must be aligned to it.
    pub logical_block_size: u32,
    /// `physical_block_size` in bytes: a split piece ends on it where it can
    /// (`get_max_io_size`).
    pub physical_block_size: u32,
    /// A request may not cross a multiple of this many sectors (`chunk_sectors`, RAID
    /// stripes); 0: no boundary.
    pub chunk_sectors: u32,
    /// Largest discard in sectors (`max_discard_sectors`).
    pub max_discard_sectors: u32,
    /// Discards split on this many bytes (`discard_granularity`; 0 counts as a sector).
    pub discard_granularity: u32,
    /// Largest write-zeroes in sectors (`max_write_zeroes_sectors`; 0: not split).
    pub max_write_zeroes_sectors: u32,
    /// Device capacity in sectors.
    pub capacity_sectors: u64,
    /// The device has a volatile write cache (`BLK_FEAT_WRITE_CACHE`); set from the driver.
    pub write_cache: bool,
    /// The device honours FUA writes (`BLK_FEAT_FUA`); set from the driver.
    pub fua: bool,
    /// The device is zoned (`BLK_FEAT_ZONED`) with these zones; `chunk_sectors` is then its
    /// zone size. `None` for a regular device.
    pub zoned: Option<crate::zoned::ZonedLimits>,
}

/// `BLK_DEF_MAX_SECTORS_CAP` as Linux 6.18 has it (`SZ_4M >> SECTOR_SHIFT`; 2560 sectors,
/// 1280 KiB, in older kernels; this machine's `vda` reports `max_sectors_kb` 4096): the
/// most sectors a request takes by default whatever the driver allows.
pub const BLK_DEF_MAX_SECTORS_CAP: u32 = 8192;
/// `BLK_MAX_SEGMENT_SIZE`: a driver's segments unless it says otherwise.
pub const BLK_MAX_SEGMENT_SIZE: u32 = 65536;
/// `BLK_MAX_SEGMENTS`.
pub const BLK_MAX_SEGMENTS: u16 = 128;
/// `BLK_SEG_BOUNDARY_MASK`.
pub const BLK_SEG_BOUNDARY_MASK: u64 = 0xFFFF_FFFF;
/// `UINT_MAX >> SECTOR_SHIFT`: the largest discard a bio can describe (null_blk's
/// `max_hw_discard_sectors`).
pub const UINT_MAX_SECTORS: u32 = u32::MAX >> 9;

impl Default for QueueLimits {
    /// The limits of a driver that declares no hardware bounds of its own
    /// (`blk_validate_limits` fills in the defaults, and `max_sectors` is capped at
    /// [`BLK_DEF_MAX_SECTORS_CAP`]); discards and write-zeroes as null_blk offers them.
    fn default() -> QueueLimits {
        QueueLimits {
            max_sectors: BLK_DEF_MAX_SECTORS_CAP,
            max_segments: BLK_MAX_SEGMENTS,
            max_segment_size: BLK_MAX_SEGMENT_SIZE,
            seg_boundary_mask: BLK_SEG_BOUNDARY_MASK,
            virt_boundary_mask: 0,
            logical_block_size: 512,
            physical_block_size: 512,
            chunk_sectors: 0,
            max_discard_sectors: UINT_MAX_SECTORS,
            discard_granularity: 0,
            max_write_zeroes_sectors: UINT_MAX_SECTORS,
            capacity_sectors: 1 << 21,
            write_cache: false,
            fua: false,
            zoned: None,
        }
    }
}

impl QueueLimits {
    /// The bytes of one segment at most: `max_segment_size`, and no further than the
    /// segment boundary (`get_max_segment_size`, for a segment that starts on one).
    fn seg_unit(&self) -> u64 {
        let boundary = self.seg_boundary_mask.saturating_add(1);
        (self.max_segment_size.max(512) as u64).min(boundary.max(512))
    }

    /// Whether `bytes` laid out as `layout` (with runs) lie in one run and take no more
    /// segments than a request may have: [`QueueLimits::segment_fit`]'s one pass, taking
    /// all of them.
    #[inline]
    fn within_one_run(&self, layout: BvecLayout, bytes: u64) -> bool {
        let run = layout.run as u64;
        (layout.skip as u64 % run) + bytes <= run
            && bytes.div_ceil(self.seg_unit()) <= self.max_segments.max(1) as u64
    }

    /// Physical segments a bio of `bytes` laid out as `layout` takes (`bio_split_rw_at`'s
    /// count for a bio that needs no split).
    pub fn phys_segments(&self, layout: BvecLayout, bytes: u64) -> u32 {
        if bytes == 0 {
            return 0;
        }
        if layout.run == 0 {
            return 1;
        }
        let unit = self.seg_unit();
        let run = layout.run as u64;
        // Units are powers of two in practice (a page, a segment size): a shift, not a
        // division, on the path every request takes.
        let segs = |len: u64| {
            if unit.is_power_of_two() {
                (len + unit - 1) >> unit.trailing_zeros()
            } else {
                len.div_ceil(unit)
            }
        };
        let skip = layout.skip as u64;
        let first = bytes.min(run - if skip < run { skip } else { skip % run });
        if first == bytes {
            return segs(bytes).min(u32::MAX as u64) as u32;
        }
        let rest = bytes - first;
        let total = segs(first) + rest / run * segs(run) + segs(rest % run);
        total.min(u32::MAX as u64) as u32
    }

    /// How many bytes from the start of a bio of `bytes` laid out as `layout` fit in one
    /// request of at most `max_bytes` and `max_segments` segments (`bio_split_rw_at`,
    /// with `bvec_split_segs` taking part of a run), before the logical block alignment.
    pub fn segment_fit(&self, layout: BvecLayout, bytes: u64, max_bytes: u64) -> u64 {
        let cap = bytes.min(max_bytes);
        if layout.run == 0 {
            return cap;
        }
        let unit = self.seg_unit();
        let run = layout.run as u64;
        let max_segs = self.max_segments.max(1) as u64;
        let (mut taken, mut segs) = (0u64, 0u64);
        let mut in_run = layout.skip as u64 % run;
        while taken < cap {
            let chunk = (run - in_run).min(cap - taken);
            let need = chunk.div_ceil(unit);
            if segs + need <= max_segs {
                taken += chunk;
                segs += need;
                in_run = 0;
                continue;
            }
            // Only some of this run's segments fit.
            taken += (max_segs - segs) * unit;
            break;
        }
        taken.min(cap)
    }

    /// `get_max_io_size`: the most sectors one request takes from a bio of `op` starting at
    /// `sector`: `max_sectors` (`max_write_zeroes_sectors` for write-zeroes), not past the
    /// next chunk boundary, and ending on a physical block where that leaves anything.
    pub fn max_io_sectors(&self, op: ReqOp, sector: u64) -> u32 {
        let mut max = if op == ReqOp::WriteZeroes {
            self.max_write_zeroes_sectors
        } else {
            self.max_sectors
        };
        if self.chunk_sectors > 0 {
            let chunk = self.chunk_sectors as u64;
            max = max.min((chunk - sector % chunk) as u32);
        }
        let pbs = (self.physical_block_size >> 9).max(1) as u64;
        let lbs = (self.logical_block_size >> 9).max(1);
        let start = sector % pbs;
        let end = (start + max as u64) / pbs * pbs;
        if end > start {
            (end - start) as u32
        } else {
            max / lbs * lbs
        }
    }

    /// The sectors the first request takes of a bio of `op`, `nr_sectors` long from
    /// `sector`, laid out as `layout` (`bio_split_to_limits`): all of them when it needs
    /// no split. Read and write split on size and segments (`bio_split_rw`), discard on
    /// `max_discard_sectors` ending on the granularity (`bio_split_discard`), write-zeroes
    /// on `max_write_zeroes_sectors` (`bio_split_write_zeroes`; a limit of 0 splits nothing);
    /// other operations never. `discard_alignment` is taken as 0.
    #[inline]
    pub fn split_sectors(
        &self,
        op: ReqOp,
        sector: u64,
        nr_sectors: u32,
        layout: BvecLayout,
    ) -> u32 {
        // The common case, cheaply: a read or write within one contiguous run (a buffer
        // the core cannot see into, or one page of a paged one) whose segments fit, no
        // chunk boundary, and short enough that no physical-block alignment of
        // `max_sectors` can cut it (`get_max_io_size` keeps at least `max_sectors` less a
        // physical block). `segment_fit` would take all of it.
        if op.has_data()
            && self.chunk_sectors == 0
            && nr_sectors + (self.physical_block_size >> 9) <= self.max_sectors
            && (layout.run == 0 || self.within_one_run(layout, (nr_sectors as u64) << 9))
        {
            return nr_sectors;
        }
        match op {
            ReqOp::Read | ReqOp::Write => {
                let max_bytes = (self.max_io_sectors(op, sector) as u64) << 9;
                let bytes = (nr_sectors as u64) << 9;
                let fit = self.segment_fit(layout, bytes, max_bytes);
                if fit >= bytes {
                    return nr_sectors;
                }
                // `bio_split_alignment`: the piece ends on a logical block.
                let lbs = self.logical_block_size.max(512) as u64;
                let aligned = (fit / lbs * lbs).max(lbs);
                (aligned >> 9).min(nr_sectors as u64) as u32
            }
            ReqOp::Discard => {
                let gran = (self.discard_granularity >> 9).max(1);
                let lbs = (self.logical_block_size >> 9).max(1);
                let allowed = UINT_MAX_SECTORS / lbs * lbs;
                let mut max = self.max_discard_sectors.min(allowed);
                max -= max % gran;
                if max == 0 || nr_sectors <= max {
                    return nr_sectors;
                }
                // End on the granularity when the next piece would start off it.
                let off = ((sector + max as u64) % gran as u64) as u32;
                if max > off {
                    max - off
                } else {
                    max
                }
            }
            ReqOp::WriteZeroes => {
                let max = self.max_io_sectors(op, sector);
                if max == 0 || nr_sectors <= max {
                    nr_sectors
                } else {
                    max
                }
            }
            _ => nr_sectors,
        }
    }

    /// `bio_will_gap`: would a segment ending `end_in_run` bytes into its run, followed by
    /// one starting `start_in_run` bytes into its own, leave a gap the virtual boundary
    /// forbids?
    fn will_gap(&self, end_in_run: u64, start_in_run: u64) -> bool {
        let mask = self.virt_boundary_mask as u64;
        mask != 0 && ((end_in_run & mask) != 0 || (start_in_run & mask) != 0)
    }
}

/// Where the data of `bio` ends in its last run, and where it starts in its first.
fn bio_edges(bio: &Bio) -> (u64, u64) {
    let l = bio.bvecs;
    let run = if l.run == 0 { u64::MAX } else { l.run as u64 };
    let start = l.skip as u64 % run;
    let end = (start + bio.bytes()) % run;
    // A bio ending exactly on a run boundary ends at its run's end, which is aligned.
    (end, start)
}

/// Where a bio attaches (`enum elv_merge`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ElvMerge {
    /// No merge (`ELEVATOR_NO_MERGE`).
    None,
    /// The bio goes in front of the request (`ELEVATOR_FRONT_MERGE`).
    Front,
    /// The bio goes after the request (`ELEVATOR_BACK_MERGE`).
    Back,
}

/// `nomerges` queue knob: 0 all merges, 1 only the cheap one-hit checks, 2 none.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum NoMerges {
    /// Every merge is tried.
    #[default]
    All = 0,
    /// Only the cheap one-hit checks (the last merged request, the plug).
    Simple = 1,
    /// No merging.
    None = 2,
}

/// `blk_rq_merge_ok`: may `bio` join `rq` at all, regardless of position?
pub fn rq_merge_ok(rq: &Request, bio: &Bio) -> bool {
    rq.allocated
        && rq.state == RqState::Idle
        && rq.mergeable()
        && bio.mergeable()
        && rq.op == bio.op
        && rq.ioprio == bio.ioprio
        && rq.group == bio.group
}

/// `blk_try_merge`: the position test.
pub fn try_merge(rq: &Request, bio: &Bio) -> ElvMerge {
    if rq.end_sector() == bio.sector {
        ElvMerge::Back
    } else if bio.end_sector() == rq.sector {
        ElvMerge::Front
    } else {
        ElvMerge::None
    }
}

/// `ll_back_merge_fn` / `ll_front_merge_fn` / `ll_merge_requests_fn`: size and segment
/// limits, the size as `blk_rq_get_max_sectors` gives it for a request of `rq`'s operation
/// starting at `start` (the request's start, or a front-merging bio's).
fn fits(
    rq: &Request,
    start: u64,
    extra_sectors: u32,
    extra_segments: u32,
    limits: &QueueLimits,
) -> bool {
    rq.nr_sectors as u64 + extra_sectors as u64 <= rq_max_sectors(rq.op, start, limits) as u64
        && rq.nr_segments as u32 + extra_segments <= limits.max_segments as u32
}

/// `blk_rq_get_max_sectors`: the most sectors a request of `op` starting at `start` may
/// hold: `blk_queue_get_max_sectors`'s limit for the operation, and for all but discards
/// no further than the next `chunk_sectors` boundary (a RAID chunk, a zone).
fn rq_max_sectors(op: ReqOp, start: u64, limits: &QueueLimits) -> u32 {
    let max = match op {
        ReqOp::Discard => limits.max_discard_sectors.min(UINT_MAX_SECTORS),
        ReqOp::WriteZeroes => limits.max_write_zeroes_sectors,
        _ => limits.max_sectors,
    };
    if limits.chunk_sectors == 0 || op == ReqOp::Discard {
        return max;
    }
    let chunk = limits.chunk_sectors as u64;
    max.min((chunk - start % chunk) as u32)
}

/// Segments a bio adds (the count `bio_split_to_limits` leaves it with); discards carry
/// none (as in `ll_new_hw_segment`).
pub fn bio_segments(bio: &Bio, limits: &QueueLimits) -> u32 {
    if bio.op.has_data() {
        limits.phys_segments(bio.bvecs, bio.bytes()).max(1)
    } else {
        0
    }
}

/// `req_gap_back_merge` / `req_gap_front_merge`: would `next` following `prev` leave a gap
/// the queue's virtual boundary forbids?
fn bios_gap(prev: &Bio, next: &Bio, limits: &QueueLimits) -> bool {
    limits.virt_boundary_mask != 0
        && prev.op.has_data()
        && limits.will_gap(bio_edges(prev).0, bio_edges(next).1)
}

/// Tries to merge `bio` into `rq`. On success the bio is consumed and the merge direction
/// returned; otherwise the bio comes back.
pub fn bio_attempt_merge(
    rq: &mut Request,
    bio: Bio,
    limits: &QueueLimits,
) -> Result<ElvMerge, Bio> {
    if !rq_merge_ok(rq, &bio) {
        return Err(bio);
    }
    let kind = try_merge(rq, &bio);
    let segs = bio_segments(&bio, limits);
    let start = if kind == ElvMerge::Front {
        bio.sector
    } else {
        rq.sector
    };
    if kind == ElvMerge::None || !fits(rq, start, bio.nr_sectors, segs, limits) {
        return Err(bio);
    }
    let gap = match kind {
        ElvMerge::Back => rq
            .bios
            .last()
            .is_some_and(|last| bios_gap(last, &bio, limits)),
        _ => rq
            .bios
            .first()
            .is_some_and(|first| bios_gap(&bio, first, limits)),
    };
    if gap {
        return Err(bio);
    }
    rq.nr_sectors += bio.nr_sectors;
    rq.nr_segments = (rq.nr_segments as u32 + segs).min(u16::MAX as u32) as u16;
    rq.cmd_flags = rq.cmd_flags.union(bio.flags);
    if kind == ElvMerge::Front {
        rq.sector = bio.sector;
        rq.bios.insert(0, bio);
    } else {
        rq.bios.push(bio);
    }
    Ok(kind)
}

/// `blk_attempt_req_merge`: may `next` (which starts where `rq` ends) be folded into `rq`?
pub fn req_merge_ok(rq: &Request, next: &Request, limits: &QueueLimits) -> bool {
    rq.allocated
        && next.allocated
        && rq.state == RqState::Idle
        && next.state == RqState::Idle
        && rq.mergeable()
        && next.mergeable()
        && rq.op == next.op
        && rq.ioprio == next.ioprio
        && rq.group == next.group
        && rq.end_sector() == next.sector
        && fits(
            rq,
            rq.sector,
            next.nr_sectors,
            next.nr_segments as u32,
            limits,
        )
        && !match (rq.bios.last(), next.bios.first()) {
            (Some(a), Some(b)) => bios_gap(a, b, limits),
            _ => false,
        }
}

/// Folds `next` into `rq` (`attempt_merge`): bios are spliced, the earlier allocation time
/// kept. The caller frees `next` afterwards.
pub fn merge_requests(rq: &mut Request, next: &mut Request) {
    rq.nr_sectors += next.nr_sectors;
    rq.nr_segments = rq.nr_segments.saturating_add(next.nr_segments);
    rq.cmd_flags = rq.cmd_flags.union(next.cmd_flags);
    rq.alloc_ns = rq.alloc_ns.min(next.alloc_ns);
    rq.bios.append(&mut next.bios);
    next.nr_sectors = 0;
    next.nr_segments = 0;
}
