//! Where the next I/O goes and what it is: fio's `rw`, `rwmixread`, `bs`, `offset`, `size`
//! and `randrepeat`/`randseed`, as a deterministic generator shared by `mqblk bench` and the
//! simulator.

/// The access pattern is fio's `rw=`, as parsed.
pub use crate::RwMode as Pattern;

/// A small, fast, seedable generator (xorshift64*); the same seed gives the same offsets,
/// as fio's `randrepeat=1` does.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 scrambles the seed so that nearby seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is negligible for block counts).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// A full-period permutation of `0..n` (an affine map modulo `n` with a multiplier coprime to
/// `n`), so a random pass touches every block exactly once, like fio's random map.
#[derive(Clone, Debug)]
struct Permutation {
    n: u64,
    mul: u64,
    add: u64,
}

impl Permutation {
    fn new(n: u64, rng: &mut Rng) -> Permutation {
        let n = n.max(1);
        let mut mul = (rng.below(n) | 1).max(1);
        while gcd(mul, n) != 1 {
            mul += 1;
        }
        Permutation {
            n,
            mul: mul % n.max(2),
            add: rng.below(n),
        }
    }
    #[inline]
    fn at(&self, i: u64) -> u64 {
        ((i as u128 * self.mul as u128 + self.add as u128) % self.n as u128) as u64
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// One planned I/O.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Io {
    pub write: bool,
    /// Byte offset on the device.
    pub offset: u64,
    pub len: u32,
}

/// Generates the I/Os of one job over `[offset, offset + size)` in `bs` blocks.
#[derive(Clone, Debug)]
pub struct Generator {
    pattern: Pattern,
    rwmixread: u32,
    bs: u32,
    base: u64,
    nr_blocks: u64,
    /// I/Os issued in the current pass.
    pos: u64,
    perm: Permutation,
    rng: Rng,
    /// True when sequential readwrite alternates by mix; each direction has its own cursor.
    read_cursor: u64,
    write_cursor: u64,
}

impl Generator {
    pub fn new(
        pattern: Pattern,
        rwmixread: u32,
        bs: u32,
        offset: u64,
        size: u64,
        seed: u64,
    ) -> Generator {
        let nr_blocks = (size / bs as u64).max(1);
        let mut rng = Rng::new(seed);
        let perm = Permutation::new(nr_blocks, &mut rng);
        Generator {
            pattern,
            rwmixread,
            bs,
            base: offset,
            nr_blocks,
            pos: 0,
            perm,
            rng,
            read_cursor: 0,
            write_cursor: 0,
        }
    }

    /// Blocks in one pass.
    pub fn nr_blocks(&self) -> u64 {
        self.nr_blocks
    }

    /// True once one pass over the region is complete (`size` bytes issued).
    pub fn pass_done(&self) -> bool {
        self.pos >= self.nr_blocks
    }

    /// Starts another pass (time_based jobs loop over the region).
    pub fn rewind(&mut self) {
        self.pos = 0;
    }

    #[inline]
    fn direction(&mut self) -> bool {
        match self.pattern {
            Pattern::Read | Pattern::RandRead => false,
            Pattern::Write | Pattern::RandWrite => true,
            Pattern::RandRw | Pattern::ReadWrite => self.rng.below(100) >= self.rwmixread as u64,
        }
    }

    #[inline]
    pub fn next_io(&mut self) -> Io {
        let write = self.direction();
        let block = if self.pattern.is_random() {
            // Random passes without a mix use the permutation (each block once per pass);
            // mixed random I/O draws independently, as fio does with norandommap.
            if self.pattern.is_mixed() {
                self.rng.below(self.nr_blocks)
            } else {
                self.perm.at(self.pos)
            }
        } else {
            let cursor = if write && self.pattern.is_mixed() {
                &mut self.write_cursor
            } else {
                &mut self.read_cursor
            };
            let b = *cursor % self.nr_blocks;
            *cursor += 1;
            b
        };
        self.pos += 1;
        Io {
            write,
            offset: self.base + block * self.bs as u64,
            len: self.bs,
        }
    }

    /// The block at permutation position `i` of the first pass (used by verify to walk the
    /// written blocks again in the same order).
    pub fn block_offset(&self, i: u64) -> u64 {
        let b = if self.pattern.is_random() {
            self.perm.at(i)
        } else {
            i % self.nr_blocks
        };
        self.base + b * self.bs as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_pass_touches_every_block_once() {
        for n in [1u64, 2, 7, 64, 1000, 4096] {
            let mut g = Generator::new(Pattern::RandRead, 100, 4096, 0, n * 4096, 42);
            let mut seen = vec![false; n as usize];
            while !g.pass_done() {
                let io = g.next_io();
                let b = (io.offset / 4096) as usize;
                assert!(!seen[b], "block {b} of {n} issued twice in one pass");
                seen[b] = true;
            }
            assert!(seen.iter().all(|&s| s), "a block of {n} was skipped");
        }
    }

    #[test]
    fn same_seed_same_offsets_and_different_seed_differs() {
        let a: Vec<_> = (0..100)
            .scan(
                Generator::new(Pattern::RandRead, 100, 4096, 0, 1 << 30, 7),
                |g, _| Some(g.next_io()),
            )
            .collect();
        let b: Vec<_> = (0..100)
            .scan(
                Generator::new(Pattern::RandRead, 100, 4096, 0, 1 << 30, 7),
                |g, _| Some(g.next_io()),
            )
            .collect();
        let c: Vec<_> = (0..100)
            .scan(
                Generator::new(Pattern::RandRead, 100, 4096, 0, 1 << 30, 8),
                |g, _| Some(g.next_io()),
            )
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rwmixread_splits_directions() {
        let mut g = Generator::new(Pattern::RandRw, 70, 4096, 0, 1 << 30, 1);
        let reads = (0..100_000).filter(|_| !g.next_io().write).count();
        assert!(
            (68_000..72_000).contains(&reads),
            "70% reads expected, got {reads}"
        );
    }

    #[test]
    fn sequential_read_wraps_at_size_and_respects_offset() {
        let mut g = Generator::new(Pattern::Read, 100, 4096, 1 << 20, 3 * 4096, 1);
        let offs: Vec<u64> = (0..4).map(|_| g.next_io().offset).collect();
        assert_eq!(
            offs,
            vec![1 << 20, (1 << 20) + 4096, (1 << 20) + 8192, 1 << 20]
        );
    }
}
