//! Tags: the lock-free sbitmap allocator, tag maps, and the tag set (`lib/sbitmap.c`,
//! `block/blk-mq-tag.c`).
//!
//! A tag map is an `Sbitmap` of per-word atomics, each word on its own cache line. Submitters
//! start their search at a per-`Ctx` hint so different submitters work in different words, and
//! freed bits are parked in a per-word `cleared` mask that the next allocator folds back with
//! one atomic (the kernel's deferred clear). Waiting for a tag is sans-I/O: a submitter that
//! found the map full takes a wake token and retries once the map has freed a batch of tags.

use crate::status::BlkStatus;
use crate::sync::{self, Confinement};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use thiserror::Error;

/// `BLK_MQ_MAX_DEPTH`.
pub const MAX_DEPTH: u32 = 10240;
/// `SBQ_WAKE_BATCH`: the most frees that are collected before waiters are woken.
pub const WAKE_BATCH_MAX: u32 = 8;

struct SbWord {
    /// Number of usable bits in this word.
    depth: u32,
    word: AtomicU64,
    /// Bits freed but not yet folded back into `word`.
    cleared: AtomicU64,
}

/// A bitmap of `depth` bits split over cache-line-sized words.
pub struct Sbitmap {
    depth: u32,
    shift: u32,
    round_robin: bool,
    words: Box<[CachePadded<SbWord>]>,
    /// Shared between threads, or one simulation's (its bit updates then take no locked
    /// instruction).
    confinement: Confinement,
}

impl Sbitmap {
    /// The kernel's default word size: shrink words until the map spans at least 4 of them,
    /// so concurrent allocators spread over several cache lines.
    fn default_shift(depth: u32) -> u32 {
        let mut shift = 6u32;
        while shift > 0 && (4u32 << shift) > depth {
            shift -= 1;
        }
        shift
    }

    /// A map of `depth` bits; `round_robin` allocates in order (`BLK_MQ_F_TAG_RR`) rather than from each submitter's hint.
    pub fn new(depth: u32, round_robin: bool) -> Sbitmap {
        let shift = Self::default_shift(depth);
        let per_word = 1u32 << shift;
        let nr_words = depth.div_ceil(per_word).max(1);
        let words = (0..nr_words)
            .map(|w| {
                let start = w * per_word;
                let d = depth.saturating_sub(start).min(per_word);
                CachePadded::new(SbWord {
                    depth: d,
                    word: AtomicU64::new(0),
                    cleared: AtomicU64::new(0),
                })
            })
            .collect();
        Sbitmap {
            depth,
            shift,
            round_robin,
            words,
            confinement: Confinement::new(),
        }
    }

    /// Its number of bits.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Usable bits of word `w` under a shallow limit. The limit is spread over the words in
    /// proportion to their size so that the whole map yields at most `shallow` bits (the
    /// whole-map semantics of recent kernels, rather than the older per-word cap).
    fn word_limit(&self, w: usize, shallow: u32) -> u32 {
        let wd = self.words[w].depth;
        if shallow >= self.depth {
            return wd;
        }
        let start = (w as u64) << self.shift;
        let end = start + wd as u64;
        let lim = |bit: u64| bit * shallow as u64 / self.depth as u64;
        (lim(end) - lim(start)) as u32
    }

    /// Folds deferred frees back into the word. Returns false if there were none.
    fn deferred_clear(&self, w: usize, one: bool) -> bool {
        let sw = &self.words[w];
        if sw.cleared.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mask = sync::swap_u64(&sw.cleared, 0, Ordering::Acquire, one);
        sync::fetch_and_u64(&sw.word, !mask, Ordering::Release, one);
        true
    }

    fn get_from_word(&self, w: usize, limit: u32, start: u32, one: bool) -> Option<u32> {
        if limit == 0 {
            return None;
        }
        let sw = &self.words[w];
        let mask = if limit >= 64 {
            u64::MAX
        } else {
            (1u64 << limit) - 1
        };
        loop {
            let cur = sw.word.load(Ordering::Relaxed);
            let free = !cur & mask;
            if free == 0 {
                if self.deferred_clear(w, one) {
                    continue;
                }
                return None;
            }
            // Round-robin maps search from the hint; others from bit 0 of the hinted word.
            let above = if start > 0 && start < 64 {
                free & !((1u64 << start) - 1)
            } else {
                free
            };
            let bit = if above != 0 {
                above.trailing_zeros()
            } else {
                free.trailing_zeros()
            };
            let prev = sync::fetch_or_u64(&sw.word, 1u64 << bit, Ordering::Acquire, one);
            if prev & (1u64 << bit) == 0 {
                return Some(bit);
            }
        }
    }

    /// Allocates a bit, starting at `hint`, with at most `shallow` usable bits in the whole
    /// map (pass `u32::MAX` for no limit), and moves the hint as `sbitmap_get` does
    /// (`update_alloc_hint_after_get`): past the bit taken if it was the hinted one (always,
    /// for a round-robin map), to 0 when the map is full, and otherwise not at all, so a
    /// submitter keeps allocating where its own tags were last freed ([`SbitmapQueue::clear`]).
    pub fn get(&self, hint: &AtomicU32, shallow: u32) -> Option<u32> {
        let mut h = hint.load(Ordering::Relaxed);
        if h >= self.depth {
            // `update_alloc_hint_before_get` draws a random bit; we start the map over, so
            // runs stay deterministic.
            h = 0;
        }
        let one = self.confinement.confined();
        let nr_words = self.words.len();
        let mut w = (h >> self.shift) as usize;
        for i in 0..nr_words {
            if i > 0 {
                // The next word, wrapping (no `%`: a division on every allocation).
                w += 1;
                if w == nr_words {
                    w = 0;
                }
            }
            let start = if self.round_robin && i == 0 {
                h & ((1 << self.shift) - 1)
            } else {
                0
            };
            if let Some(bit) = self.get_from_word(w, self.word_limit(w, shallow), start, one) {
                let nr = ((w as u32) << self.shift) + bit;
                if nr == h || self.round_robin {
                    // The kernel wraps at `depth - 1`, so the last bit is never a hint.
                    let next = nr + 1;
                    let next = if next >= self.depth.saturating_sub(1) {
                        0
                    } else {
                        next
                    };
                    hint.store(next, Ordering::Relaxed);
                }
                return Some(nr);
            }
        }
        // "If the map is full, a hint won't do us much good."
        hint.store(0, Ordering::Relaxed);
        None
    }

    /// Frees a bit. The bit is parked in the word's `cleared` mask until an allocator needs it.
    pub fn clear(&self, nr: u32) {
        assert!(
            nr < self.depth,
            "sbitmap: clearing bit {nr} beyond depth {}",
            self.depth
        );
        let sw = &self.words[(nr >> self.shift) as usize];
        let bit = 1u64 << (nr & ((1 << self.shift) - 1));
        debug_assert!(
            sw.word.load(Ordering::Relaxed) & bit != 0,
            "sbitmap: bit {nr} freed twice"
        );
        let one = self.confinement.confined();
        let prev = sync::fetch_or_u64(&sw.cleared, bit, Ordering::Release, one);
        assert!(prev & bit == 0, "sbitmap: bit {nr} freed twice");
    }

    /// True if `nr` is allocated.
    pub fn test(&self, nr: u32) -> bool {
        let sw = &self.words[(nr >> self.shift) as usize];
        let bit = 1u64 << (nr & ((1 << self.shift) - 1));
        sw.word.load(Ordering::Acquire) & !sw.cleared.load(Ordering::Acquire) & bit != 0
    }

    /// Number of allocated bits (`sbitmap_weight`), deferred frees counted as free.
    pub fn weight(&self) -> u32 {
        self.words
            .iter()
            .map(|w| {
                (w.word.load(Ordering::Acquire) & !w.cleared.load(Ordering::Acquire)).count_ones()
            })
            .sum()
    }
}

/// An `Sbitmap` with batched wake-ups for waiters (`sbitmap_queue`).
pub struct SbitmapQueue {
    /// The bits.
    pub sb: Sbitmap,
    wake_batch: u32,
    /// Submitters currently waiting for a bit.
    ws_active: AtomicU32,
    completion_cnt: AtomicU32,
    wakeup_cnt: AtomicU32,
    /// Bumped once per wake-up; a waiter retries when it changes.
    wake_seq: AtomicU64,
}

impl SbitmapQueue {
    /// A queue over a map of `depth` bits (see [`Sbitmap::new`]).
    pub fn new(depth: u32, round_robin: bool) -> SbitmapQueue {
        SbitmapQueue {
            sb: Sbitmap::new(depth, round_robin),
            // `clamp(depth / 8, 1, SBQ_WAKE_BATCH)`: small maps wake after every free so a
            // waiter never waits for a batch that cannot fill.
            wake_batch: (depth / 8).clamp(1, WAKE_BATCH_MAX),
            ws_active: AtomicU32::new(0),
            completion_cnt: AtomicU32::new(0),
            wakeup_cnt: AtomicU32::new(0),
            wake_seq: AtomicU64::new(0),
        }
    }

    /// Bits freed per wake-up (`sbq_calc_wake_batch`).
    pub fn wake_batch(&self) -> u32 {
        self.wake_batch
    }

    /// Registers a waiter and returns the wake token to compare against later.
    pub fn prepare_to_wait(&self) -> u64 {
        self.ws_active.fetch_add(1, Ordering::AcqRel);
        self.wake_seq.load(Ordering::Acquire)
    }

    /// Unregisters a waiter (`sbitmap_finish_wait`).
    pub fn finish_wait(&self) {
        let prev = self.ws_active.fetch_sub(1, Ordering::AcqRel);
        assert!(
            prev > 0,
            "sbitmap_queue: finish_wait without prepare_to_wait"
        );
    }

    /// True once a wake-up happened after `token` was taken.
    pub fn woken_since(&self, token: u64) -> bool {
        self.wake_seq.load(Ordering::Acquire) != token
    }

    /// The wake-up sequence number, which moves at every wake-up.
    pub fn wake_seq(&self) -> u64 {
        self.wake_seq.load(Ordering::Acquire)
    }

    /// Frees `nr` and, when a batch of frees has gathered and someone waits, wakes them
    /// (`sbitmap_queue_clear`). The freeing submitter's `hint` then points at `nr`
    /// (`sbitmap_update_cpu_hint`, for the CPU the request was allocated on): its next
    /// allocation starts in the word it just freed into, whose lines it already holds.
    pub fn clear(&self, nr: u32, hint: &AtomicU32) {
        self.free(nr);
        if !self.sb.round_robin {
            hint.store(nr, Ordering::Relaxed);
        }
    }

    /// Frees `nr` and counts it towards a wake-up, leaving every hint alone.
    fn free(&self, nr: u32) {
        self.sb.clear(nr);
        self.note_frees(1);
    }

    fn note_frees(&self, n: u32) {
        if self.ws_active.load(Ordering::Acquire) == 0 {
            return;
        }
        let done = self
            .completion_cnt
            .fetch_add(n, Ordering::AcqRel)
            .wrapping_add(n);
        let woken = self.wakeup_cnt.load(Ordering::Acquire);
        if done.wrapping_sub(woken) >= self.wake_batch
            && self
                .wakeup_cnt
                .compare_exchange(
                    woken,
                    woken.wrapping_add(self.wake_batch),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.wake_seq.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Wakes all waiters now (used when a queue is torn down or resized).
    pub fn wake_all(&self) {
        self.wake_seq.fetch_add(1, Ordering::AcqRel);
    }
}

/// One tag map (`struct blk_mq_tags`): reserved tags `0..nr_reserved`, normal tags above.
pub struct Tags {
    /// Tags in the map, reserved ones included.
    pub nr_tags: u32,
    /// Reserved tags (`0..nr_reserved`).
    pub nr_reserved: u32,
    /// The normal tags.
    pub bitmap: SbitmapQueue,
    /// The reserved tags.
    pub reserved: SbitmapQueue,
    /// Users (hardware queues, or queues with host-wide tags) that allocated recently; the
    /// fair-share limit divides the map between them.
    pub active_queues: AtomicU32,
}

impl Tags {
    /// A map of `nr_tags` tags, `nr_reserved` of them reserved.
    pub fn new(nr_tags: u32, nr_reserved: u32, round_robin: bool) -> Tags {
        assert!(
            nr_tags > nr_reserved,
            "tag map needs at least one normal tag"
        );
        Tags {
            nr_tags,
            nr_reserved,
            bitmap: SbitmapQueue::new(nr_tags - nr_reserved, round_robin),
            reserved: SbitmapQueue::new(nr_reserved.max(1), round_robin),
            active_queues: AtomicU32::new(0),
        }
    }

    /// Allocates a tag (`blk_mq_get_tag` without waiting).
    pub fn get(&self, hint: &AtomicU32, reserved: bool, shallow: u32) -> Option<u32> {
        if reserved {
            if self.nr_reserved == 0 {
                return None;
            }
            return self.reserved.sb.get(hint, u32::MAX);
        }
        self.bitmap
            .sb
            .get(hint, shallow)
            .map(|t| t + self.nr_reserved)
    }

    /// Frees a tag (`blk_mq_put_tag`); `hint` is the allocating software queue's, which
    /// the free points at the tag (see [`SbitmapQueue::clear`]).
    pub fn put(&self, tag: u32, hint: &AtomicU32) {
        if tag < self.nr_reserved {
            // The kernel's reserved map has hints of its own; ours share the normal map's,
            // so a reserved free leaves them alone.
            self.reserved.free(tag);
        } else {
            self.bitmap.clear(tag - self.nr_reserved, hint);
        }
    }

    /// True while `tag` is held (a freed tag reads as free at once).
    pub fn is_held(&self, tag: u32) -> bool {
        if tag < self.nr_reserved {
            self.reserved.sb.test(tag)
        } else {
            tag - self.nr_reserved < self.bitmap.sb.depth()
                && self.bitmap.sb.test(tag - self.nr_reserved)
        }
    }

    /// Tags currently held.
    pub fn busy(&self) -> u32 {
        let r = if self.nr_reserved > 0 {
            self.reserved.sb.weight()
        } else {
            0
        };
        r + self.bitmap.sb.weight()
    }

    /// `hctx_may_queue`'s share: `max(ceil(depth / users), 4)`, and the whole map for one user.
    pub fn fair_share(&self) -> u32 {
        let users = self.active_queues.load(Ordering::Relaxed);
        let depth = self.nr_tags - self.nr_reserved;
        if users <= 1 {
            return depth;
        }
        depth.div_ceil(users).max(4)
    }
}

bitflags::bitflags! {
    /// Tag-set flags (`BLK_MQ_F_*`).
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
    pub struct TagSetFlags: u32 {
        /// Set automatically when more than one queue uses the set.
        const TAG_QUEUE_SHARED = 1 << 1;
        /// One tag space for all hardware queues (SCSI `host_tagset`).
        const TAG_HCTX_SHARED = 1 << 3;
        /// `queue_rq` may block: the runtime must not call it from a context that cannot.
        const BLOCKING = 1 << 4;
        /// Round-robin tag allocation.
        const TAG_RR = 1 << 5;
        /// Default to `none` even for a single hardware queue.
        const NO_SCHED_BY_DEFAULT = 1 << 6;
    }
}

/// How hardware queues are split between the queue maps (DEFAULT, READ, POLL).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MapQueues {
    /// Hardware queues of the default map.
    pub default: u16,
    /// Hardware queues for reads.
    pub read: u16,
    /// Hardware queues for polled I/O.
    pub poll: u16,
}

/// What a driver asks for (`struct blk_mq_tag_set` before `blk_mq_alloc_tag_set`).
#[derive(Clone, Debug)]
pub struct TagSetConfig {
    /// How its hardware queues divide between the maps.
    pub maps: MapQueues,
    /// Tags per hardware queue.
    pub queue_depth: u32,
    /// Of those, reserved.
    pub reserved_tags: u32,
    /// Its flags (`BLK_MQ_F_*`).
    pub flags: TagSetFlags,
}

impl TagSetConfig {
    /// `nr_hw_queues` default queues of `queue_depth` tags each.
    pub fn new(nr_hw_queues: u16, queue_depth: u32) -> TagSetConfig {
        TagSetConfig {
            maps: MapQueues {
                default: nr_hw_queues,
                read: 0,
                poll: 0,
            },
            queue_depth,
            reserved_tags: 0,
            flags: TagSetFlags::default(),
        }
    }
    /// Hardware queues over every map.
    pub fn nr_hw_queues(&self) -> u16 {
        self.maps.default + self.maps.read + self.maps.poll
    }
}

/// Why a tag set cannot be made.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TagSetError {
    /// No default hardware queue.
    #[error("tag set: nr_hw_queues must be at least 1 default queue (got {0})")]
    NoQueues(u16),
    /// No normal tag beside the reserved ones.
    #[error("tag set: queue_depth {depth} must exceed reserved_tags {reserved}")]
    DepthTooSmall {
        /// Tags per hardware queue.
        depth: u32,
        /// Of those, reserved.
        reserved: u32,
    },
    /// More tags than a map holds.
    #[error("tag set: queue_depth {0} is above the maximum {MAX_DEPTH}")]
    DepthTooLarge(u32),
}

/// A tag set: the driver tags of every hardware queue, shared by all queues of one host.
pub struct TagSet {
    /// What the driver asked for.
    pub cfg: TagSetConfig,
    /// One map per hardware queue, or the same map everywhere with `TAG_HCTX_SHARED`.
    pub tags: Vec<Arc<Tags>>,
    nr_queues: AtomicU32,
}

impl TagSet {
    /// Validates and builds the set (`blk_mq_alloc_tag_set`). Depths above the maximum are
    /// refused rather than silently capped, so a user sees what they asked for was wrong.
    pub fn new(cfg: TagSetConfig) -> Result<Arc<TagSet>, TagSetError> {
        if cfg.maps.default == 0 {
            return Err(TagSetError::NoQueues(cfg.maps.default));
        }
        if cfg.queue_depth <= cfg.reserved_tags {
            return Err(TagSetError::DepthTooSmall {
                depth: cfg.queue_depth,
                reserved: cfg.reserved_tags,
            });
        }
        if cfg.queue_depth > MAX_DEPTH {
            return Err(TagSetError::DepthTooLarge(cfg.queue_depth));
        }
        let rr = cfg.flags.contains(TagSetFlags::TAG_RR);
        let n = cfg.nr_hw_queues() as usize;
        let tags = if cfg.flags.contains(TagSetFlags::TAG_HCTX_SHARED) {
            let shared = Arc::new(Tags::new(cfg.queue_depth, cfg.reserved_tags, rr));
            vec![shared; n]
        } else {
            (0..n)
                .map(|_| Arc::new(Tags::new(cfg.queue_depth, cfg.reserved_tags, rr)))
                .collect()
        };
        Ok(Arc::new(TagSet {
            cfg,
            tags,
            nr_queues: AtomicU32::new(0),
        }))
    }

    /// Hardware queues over every map.
    pub fn nr_hw_queues(&self) -> u16 {
        self.cfg.nr_hw_queues()
    }

    /// True when fair sharing applies: several queues, or host-wide tags.
    pub fn is_shared(&self) -> bool {
        self.nr_queues.load(Ordering::Relaxed) > 1
            || self.cfg.flags.contains(TagSetFlags::TAG_HCTX_SHARED)
    }

    /// True once more than one queue uses the set (`BLK_MQ_F_TAG_QUEUE_SHARED`).
    pub fn queue_shared(&self) -> bool {
        self.nr_queues.load(Ordering::Relaxed) > 1
    }

    pub(crate) fn add_queue(&self) {
        self.nr_queues.fetch_add(1, Ordering::AcqRel);
    }
    pub(crate) fn del_queue(&self) {
        self.nr_queues.fetch_sub(1, Ordering::AcqRel);
    }

    /// Distinct tag maps (one with host-wide tags).
    pub fn distinct_maps(&self) -> usize {
        if self.cfg.flags.contains(TagSetFlags::TAG_HCTX_SHARED) {
            1
        } else {
            self.tags.len()
        }
    }

    /// Map index serving hardware queue `hctx`.
    pub fn map_index(&self, hctx: usize) -> usize {
        if self.cfg.flags.contains(TagSetFlags::TAG_HCTX_SHARED) {
            0
        } else {
            hctx
        }
    }

    /// Every tag of every map is free: the set is whole.
    pub fn all_free(&self) -> bool {
        (0..self.distinct_maps()).all(|m| self.tags[m].busy() == 0)
    }
}

/// A status for "no tag right now".
pub const NO_TAG_STATUS: BlkStatus = BlkStatus::Again;
