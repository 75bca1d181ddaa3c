//! fio's random map for I/O of varying sizes: which blocks of the region this pass has
//! covered, so a random I/O lands on blocks not yet touched.
//!
//! As fio does it (`get_next_rand_block`, `mark_random_map`): a random block already
//! covered moves on to the next free one (wrapping at the end), and the I/O is cut short
//! at the first covered block after it, so a pass covers each block exactly once and ends
//! when the region is covered. The cutting makes small sizes more common than the job's
//! `bsrange` or `bssplit` alone would (fio 3.33, `bsrange=512-8k` over 16 MiB: 14% of the
//! I/Os are 512 bytes with the map, 7% with `norandommap`).

/// One bit per block, and one bit per word of blocks that is full, so that finding the
/// next free block skips full stretches 4096 blocks at a time.
#[derive(Clone, Debug)]
pub(crate) struct RandomMap {
    used: Vec<u64>,
    full: Vec<u64>,
    blocks: u64,
}

impl RandomMap {
    pub(crate) fn new(blocks: u64) -> RandomMap {
        let words = blocks.div_ceil(64) as usize;
        RandomMap {
            used: vec![0; words],
            full: vec![0; words.div_ceil(64)],
            blocks,
        }
    }

    /// Whether every block is done.
    pub(crate) fn is_full(&self) -> bool {
        self.next_free(0).is_none()
    }

    /// Forgets the pass.
    pub(crate) fn clear(&mut self) {
        self.used.iter_mut().for_each(|w| *w = 0);
        self.full.iter_mut().for_each(|w| *w = 0);
    }

    fn is_used(&self, b: u64) -> bool {
        self.used[(b / 64) as usize] & (1 << (b % 64)) != 0
    }

    fn mark(&mut self, b: u64) {
        let w = (b / 64) as usize;
        self.used[w] |= 1 << (b % 64);
        let word_full = if w + 1 == self.used.len() && self.blocks % 64 != 0 {
            self.used[w].count_ones() as u64 == self.blocks % 64
        } else {
            self.used[w] == u64::MAX
        };
        if word_full {
            self.full[w / 64] |= 1 << (w % 64);
        }
    }

    /// The first free block at or after `b`, wrapping; `None` when every block is used.
    fn next_free(&self, b: u64) -> Option<u64> {
        self.first_free_in(b, self.blocks)
            .or_else(|| self.first_free_in(0, b))
    }

    /// The first free block in `from..to`.
    fn first_free_in(&self, from: u64, to: u64) -> Option<u64> {
        if from >= to {
            return None;
        }
        let last = ((to - 1) / 64) as usize;
        let mut w = (from / 64) as usize;
        // In the first word, only the bits at or after `from`.
        let mut mask = u64::MAX << (from % 64);
        while w <= last {
            let free = !self.used[w] & mask;
            if free != 0 {
                let bit = w as u64 * 64 + u64::from(free.trailing_zeros());
                return (bit < to).then_some(bit);
            }
            mask = u64::MAX;
            w += 1;
            // Over the words that are full, 64 at a time.
            while w <= last {
                let g = w / 64;
                let open = !self.full[g] & (u64::MAX << (w % 64));
                if open != 0 {
                    w = g * 64 + open.trailing_zeros() as usize;
                    break;
                }
                w = (g + 1) * 64;
            }
        }
        None
    }

    /// fio's check-then-`axmap_next_free`: `b` if it is free, else the next free block
    /// after it (wrapping); `None` when every block is done.
    pub(crate) fn free_from(&self, b: u64) -> Option<u64> {
        self.next_free(b % self.blocks)
    }

    /// fio's `axmap_set_nr`: marks up to `want` blocks from `start`, stopping at the first
    /// one already done or at the end; returns how many it marked.
    pub(crate) fn set_run(&mut self, start: u64, want: u64) -> u64 {
        let mut n = 0;
        while n < want.max(1) && start + n < self.blocks && !self.is_used(start + n) {
            self.mark(start + n);
            n += 1;
        }
        n
    }

    /// Takes up to `want` blocks starting at `b` (or the next free block after it): returns
    /// the first block and how many were free in a row (at least one), now marked used.
    #[cfg(test)]
    fn take(&mut self, b: u64, want: u64) -> Option<(u64, u64)> {
        let start = self.free_from(b)?;
        Some((start, self.set_run(start, want)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_free_runs_and_covers_every_block_once() {
        let mut m = RandomMap::new(200);
        assert_eq!(m.take(10, 4), Some((10, 4)));
        // Landing in the run just taken moves on to the next free block, and a run stops
        // at the first used block.
        assert_eq!(m.take(11, 2), Some((14, 2)));
        assert_eq!(m.take(8, 5), Some((8, 2)));
        assert_eq!(m.take(199, 4), Some((199, 1)));
        let mut covered = 9;
        let mut b = 0;
        while let Some((_, n)) = m.take(b, 3) {
            covered += n;
            b = (b * 7 + 13) % 200;
        }
        assert_eq!(covered, 200);
    }

    #[test]
    fn the_next_free_block_is_found_across_full_stretches_and_wraps() {
        // 64 words of blocks full, one free block beyond them, one before the start.
        let mut m = RandomMap::new(64 * 64 * 3 + 10);
        for b in 5..(64 * 64 * 2 + 7) {
            m.mark(b);
        }
        assert_eq!(m.free_from(5), Some(64 * 64 * 2 + 7));
        for b in (64 * 64 * 2 + 7)..m.blocks {
            m.mark(b);
        }
        // Past the end it wraps to the blocks before the start, and then none is left.
        assert_eq!(m.free_from(100), Some(0));
        for b in 0..5 {
            m.mark(b);
        }
        assert_eq!(m.free_from(100), None);
        assert!(m.is_full());
    }
}
