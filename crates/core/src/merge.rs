//! Merge rules (`block/blk-merge.c`, `block/elevator.c`): when a bio may join a request, and
//! when two requests may become one.
//!
//! These are pure functions on locked requests; the caller decides where to look for a
//! candidate (the plug's last request, the software queue's tail, an elevator's index).

use crate::bio::Bio;
use crate::request::{Request, RqState};

/// Queue limits that bound merging (`struct queue_limits`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Largest request in sectors (`max_sectors`; sysfs `max_sectors_kb` * 2).
    pub max_sectors: u32,
    /// Most bios (segments) in one request (`max_segments`).
    pub max_segments: u16,
    /// `logical_block_size` in bytes; bios must be aligned to it.
    pub logical_block_size: u32,
    /// Device capacity in sectors.
    pub capacity_sectors: u64,
    /// The device has a volatile write cache (`BLK_FEAT_WRITE_CACHE`); set from the driver.
    pub write_cache: bool,
    /// The device honours FUA writes (`BLK_FEAT_FUA`); set from the driver.
    pub fua: bool,
}

impl Default for QueueLimits {
    fn default() -> QueueLimits {
        // BLK_DEF_MAX_SECTORS_CAP (2560 sectors = 1280 KiB) and BLK_MAX_SEGMENTS (128).
        QueueLimits {
            max_sectors: 2560,
            max_segments: 128,
            logical_block_size: 512,
            capacity_sectors: 1 << 21,
            write_cache: false,
            fua: false,
        }
    }
}

/// Where a bio attaches (`enum elv_merge`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ElvMerge {
    None,
    Front,
    Back,
}

/// `nomerges` queue knob: 0 all merges, 1 only the cheap one-hit checks, 2 none.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum NoMerges {
    #[default]
    All = 0,
    Simple = 1,
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

/// `ll_back_merge_fn` / `ll_front_merge_fn`: size and segment limits.
fn fits(rq: &Request, extra_sectors: u32, extra_segments: u16, limits: &QueueLimits) -> bool {
    rq.nr_sectors as u64 + extra_sectors as u64 <= limits.max_sectors as u64
        && rq.nr_segments as u32 + extra_segments as u32 <= limits.max_segments as u32
}

/// Segments a bio adds: one per buffer; discards carry none (as in `ll_new_hw_segment`).
fn bio_segments(bio: &Bio) -> u16 {
    u16::from(bio.op.has_data())
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
    if kind == ElvMerge::None || !fits(rq, bio.nr_sectors, bio_segments(&bio), limits) {
        return Err(bio);
    }
    rq.nr_sectors += bio.nr_sectors;
    rq.nr_segments += bio_segments(&bio);
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
        && fits(rq, next.nr_sectors, next.nr_segments, limits)
}

/// Folds `next` into `rq` (`attempt_merge`): bios are spliced, the earlier allocation time
/// kept. The caller frees `next` afterwards.
pub fn merge_requests(rq: &mut Request, next: &mut Request) {
    rq.nr_sectors += next.nr_sectors;
    rq.nr_segments += next.nr_segments;
    rq.cmd_flags = rq.cmd_flags.union(next.cmd_flags);
    rq.alloc_ns = rq.alloc_ns.min(next.alloc_ns);
    rq.bios.append(&mut next.bios);
    next.nr_sectors = 0;
    next.nr_segments = 0;
}
