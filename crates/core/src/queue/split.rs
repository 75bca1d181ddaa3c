//! Splitting a bio larger than the queue's limits (blk-merge.c's `bio_split_to_limits` and
//! `bio_split_rw`, with bio.c's `bio_chain` for the completion).
//!
//! The kernel splits the front of a bio at `max_sectors` (aligned down to the logical block
//! size), chains the piece to what remains, carries on with the piece and resubmits the rest,
//! which splits again; the original bio completes once every piece has, with the first
//! error any of them had. Here the original bio waits in a table (its buffer with it) while
//! its pieces, each a bio of its own marked with the table slot, go through the normal path
//! (merging, allocation, plugging, the scheduler): a piece's completion is counted against
//! the original instead of being handed to the submitter, and the original is handed over
//! when the last piece ends. The trace shows one `Q` for the original, as the kernel traces
//! `block_bio_queue` once (`BIO_TRACE_COMPLETION`), then the pieces' `G`/`I`/`D`/`C`.
//!
//! Where a piece ends is `bio_split_to_limits`'s rule ([`crate::QueueLimits::split_sectors`]):
//! reads and writes at `max_sectors` (ending on a physical block, not across `chunk_sectors`)
//! or at `max_segments` physical segments of at most `max_segment_size`, whichever comes
//! first, aligned down to the logical block; discards at `max_discard_sectors` ending on the
//! granularity; write-zeroes at `max_write_zeroes_sectors`. A bio's segments come from how
//! its buffer lies in memory ([`crate::BvecLayout`]): the simulator's submitters use 4 KiB
//! pages, as a process's buffers lie; the threaded runtime's bios are one segment each.
//!
//! Where we differ: the kernel's `block_split` (`X`) event is not traced, and a bio whose
//! pages leave a gap inside it at a virtual boundary is not split there (runs here start
//! page-aligned, so none does).
//!
//! A piece that finds no free tag comes back from `submit_bio` as [`Submit::Busy`] carrying
//! the rest of the original (its slot, no buffer, the original's cookie): submit it again as
//! it is, as a task sleeping in `blk_mq_get_tag` would carry on. If not even the first piece
//! got a tag, the original itself comes back untouched.

use super::{QueueInner, Submit, Submitter};
use crate::bio::{Bio, BvecLayout, ReqOp, SpareBufs, SECTOR_SHIFT};
use crate::status::BlkStatus;
use crate::{CtxIdx, Nanos};

/// An original bio waiting for its pieces.
#[derive(Debug)]
pub(crate) struct SplitParent {
    bio: Bio,
    /// Pieces submitted and not yet completed.
    in_flight: u32,
    /// Sectors not yet submitted as pieces.
    left: u32,
}

/// The originals of split bios, in slots named by the pieces' `split` field, and the
/// pieces' buffers kept for the next split.
#[derive(Debug)]
pub(crate) struct SplitTable {
    slots: Vec<Option<SplitParent>>,
    free: Vec<u32>,
    /// A piece's buffer, once its data is back in the original's, waits here for the next
    /// piece: allocating and zeroing a fresh one per piece cost 1 MiB reads on a loop
    /// device over tmpfs four fifths of their throughput. The kernel's pieces share the
    /// original's pages (`bio_split` clones the bio with `bio_alloc_clone`, which points at
    /// the same bvec table); here each holds its own, see `split_piece`.
    spare: SpareBufs,
}

/// Piece buffers kept at most: a deep queue of split bios, and no more than this many bytes.
const SPARE_PIECES: usize = 256;
const SPARE_PIECE_BYTES: usize = 64 << 20;

impl Default for SplitTable {
    fn default() -> SplitTable {
        SplitTable {
            slots: Vec::new(),
            free: Vec::new(),
            spare: SpareBufs::new(SPARE_PIECES).bytes_at_most(SPARE_PIECE_BYTES),
        }
    }
}

impl SplitTable {
    fn insert(&mut self, p: SplitParent) -> u32 {
        match self.free.pop() {
            Some(k) => {
                self.slots[k as usize] = Some(p);
                k
            }
            None => {
                self.slots.push(Some(p));
                self.slots.len() as u32 - 1
            }
        }
    }
    fn get_mut(&mut self, k: u32) -> &mut SplitParent {
        self.slots[k as usize]
            .as_mut()
            .expect("a split piece whose original is gone")
    }
    fn remove(&mut self, k: u32) -> SplitParent {
        let p = self.slots[k as usize]
            .take()
            .expect("a split original removed twice");
        self.free.push(k);
        p
    }
    /// Originals still waiting for pieces.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

impl QueueInner {
    /// The sectors the first request takes of a bio of `op`, `nr` sectors from `sector`, laid
    /// out as `bvecs` ([`QueueLimits::split_sectors`]).
    pub(crate) fn split_len(&self, op: ReqOp, sector: u64, nr: u32, bvecs: BvecLayout) -> u32 {
        self.limits.split_sectors(op, sector, nr, bvecs)
    }

    /// True when `bio` must be split or is the rest of one that was.
    #[inline]
    pub(crate) fn needs_split(&self, bio: &Bio) -> bool {
        bio.split.is_some()
            || self.split_len(bio.op, bio.sector, bio.nr_sectors, bio.bvecs) < bio.nr_sectors
    }

    /// Submits `bio` (already checked and traced) as pieces that each fit one request
    /// ([`Self::split_len`]); see the module comment.
    pub(crate) fn submit_split(&self, sub: &mut Submitter, bio: Bio, now: Nanos) -> Submit {
        let first_try = bio.split.is_none();
        // Where the bio starts and how its buffer lies from there: a rest handed back busy
        // carries its own layout, advanced to its first sector.
        let (op, origin, layout) = (bio.op, bio.sector, bio.bvecs);
        let (key, mut sector, end) = match bio.split {
            Some(k) => (k, bio.sector, bio.end_sector()),
            None => {
                let (sector, end, nr) = (bio.sector, bio.end_sector(), bio.nr_sectors);
                let k = self.splits.lock().insert(SplitParent {
                    bio,
                    in_flight: 0,
                    left: nr,
                });
                (k, sector, end)
            }
        };
        while sector < end {
            let here = layout.advanced((sector - origin) << SECTOR_SHIFT);
            let nr = self.split_len(op, sector, (end - sector) as u32, here);
            let piece = self.split_piece(key, sector, nr, sub.ctx);
            // Counted before it goes, as a piece may complete inside `submit_one` (a driver
            // that completes inline); the last piece's completion hands the original over.
            {
                let mut t = self.splits.lock();
                let p = t.get_mut(key);
                p.in_flight += 1;
                p.left -= nr;
            }
            match self.submit_one(sub, piece, now) {
                Submit::Queued | Submit::Merged => {}
                Submit::Busy(piece) => {
                    let mut t = self.splits.lock();
                    // The piece goes; its buffer waits for the next one, as a completed
                    // piece's does.
                    if let Some(b) = piece.buf {
                        t.spare.give(b);
                    }
                    let p = t.get_mut(key);
                    p.in_flight -= 1;
                    p.left += nr;
                    if first_try && p.in_flight == 0 && p.left == p.bio.nr_sectors {
                        // Nothing went in: the original comes back as it was.
                        return Submit::Busy(Box::new(t.remove(key).bio));
                    }
                    let mut rest = Bio::new(p.bio.op, sector, (end - sector) as u32)
                        .with_flags(p.bio.flags)
                        .with_ioprio(p.bio.ioprio)
                        .with_issuer(p.bio.issuer, p.bio.group)
                        .with_private(p.bio.private);
                    rest.split = Some(key);
                    rest.bvecs = p
                        .bio
                        .bvecs
                        .advanced((sector - p.bio.sector) << SECTOR_SHIFT);
                    rest.ctx = sub.ctx;
                    rest.submit_ns = p.bio.submit_ns;
                    rest.queued = true;
                    return Submit::Busy(Box::new(rest));
                }
                // A checked bio's piece fails only in its zone's write plug
                // (`blk_zone_plug_bio` ends it, as the kernel's does after
                // `__bio_split_to_limits`): it ends as any piece does, into its original.
                Submit::Failed | Submit::Done => {
                    let i = sub
                        .done
                        .iter()
                        .rposition(|b| b.split == Some(key) && b.sector == sector)
                        .expect("a failed piece is handed back in the submitter's done list");
                    let piece = sub.done.remove(i);
                    self.split_piece_done(piece, Some(sub.ctx), &mut sub.done);
                }
            }
            sector += nr as u64;
        }
        Submit::Queued
    }

    /// The piece of original `key` covering `nr` sectors from `sector`: its own copy of the
    /// data for a write, a buffer of its own to read into for a read.
    fn split_piece(&self, key: u32, sector: u64, nr: u32, ctx: CtxIdx) -> Bio {
        let mut t = self.splits.lock();
        let p = &t.get_mut(key).bio;
        let mut piece = Bio::new(p.op, sector, nr)
            .with_ioprio(p.ioprio)
            .with_issuer(p.issuer, p.group)
            .with_private(p.private);
        piece.flags = p.flags;
        piece.ctx = ctx;
        piece.submit_ns = p.submit_ns;
        piece.queued = true;
        piece.split = Some(key);
        piece.bvecs = p.bvecs.advanced((sector - p.sector) << SECTOR_SHIFT);
        if p.buf.is_some() {
            let off = ((sector - p.sector) << SECTOR_SHIFT) as usize;
            let len = (nr as usize) << SECTOR_SHIFT;
            // A kept buffer holds an earlier piece's bytes: a read's are overwritten by the
            // device before anyone sees them, a write's by the copy.
            let mut own = t.spare.take(len);
            let (p, write) = (&t.get_mut(key).bio, piece.op.is_write());
            if write {
                let buf = p.buf.as_ref().expect("checked above");
                own.as_mut_slice()
                    .copy_from_slice(&buf.as_slice()[off..off + len]);
            }
            piece.buf = Some(own);
        }
        piece
    }

    /// A piece of a split bio ended (`bio_chain_endio`): its data goes into the original's
    /// buffer, its error (the first one) into the original's status, and the original is
    /// handed over when it was the last.
    pub(crate) fn split_piece_done(&self, piece: Bio, local: Option<CtxIdx>, done: &mut Vec<Bio>) {
        let key = piece.split.expect("a split piece");
        {
            let mut t = self.splits.lock();
            let p = t.get_mut(key);
            if let (Some(from), Some(to)) = (&piece.buf, &mut p.bio.buf) {
                if piece.op.is_read() && piece.status == BlkStatus::Ok {
                    let off = ((piece.sector - p.bio.sector) << SECTOR_SHIFT) as usize;
                    let len = from.len();
                    to.as_mut_slice()[off..off + len].copy_from_slice(from.as_slice());
                }
            }
            if p.bio.status == BlkStatus::Ok {
                p.bio.status = piece.status;
            }
            p.in_flight -= 1;
            if let Some(b) = piece.buf {
                t.spare.give(b);
            }
        }
        self.split_maybe_done(key, local, done);
    }

    /// Hands original `key` over if every piece was submitted and has ended.
    fn split_maybe_done(&self, key: u32, local: Option<CtxIdx>, done: &mut Vec<Bio>) {
        let bio = {
            let mut t = self.splits.lock();
            let p = t.get_mut(key);
            if p.in_flight > 0 || p.left > 0 {
                return;
            }
            t.remove(key).bio
        };
        if Some(bio.ctx) == local {
            done.push(bio);
        } else {
            self.hand_remote(bio);
        }
    }
}
