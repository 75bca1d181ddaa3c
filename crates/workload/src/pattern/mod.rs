//! Where the next I/O goes and what it is: fio's `rw` (with its `:N` modifier),
//! `rwmixread`, `bs`/`bsrange`/`bssplit`, `blockalign`, `offset`, `size`,
//! `random_distribution`, `norandommap` and `randrepeat`/`randseed`, as a deterministic
//! generator shared by `mqblk bench` and the simulator.

mod bs;
mod dist;
mod files;
mod map;

use crate::Ddir;

pub use bs::{parse_split, BlockSizes, SplitEntry};
pub use dist::Distribution;
use dist::Sampler;
pub use files::FileSet;
use map::RandomMap;

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
        affine_mod(i, self.mul, self.add, self.n)
    }
}

/// `(i * mul + add) mod n` for `i`, `mul`, `add` below `n`. In 64 bits where that cannot
/// overflow (`n` below 2^32: every file under 16 TiB of 4 KiB blocks), as a 128-bit
/// remainder (a call to `__umodti3`, several times slower) only beyond.
#[inline]
pub(crate) fn affine_mod(i: u64, mul: u64, add: u64, n: u64) -> u64 {
    debug_assert!(i < n && mul < n.max(2) && add < n.max(1));
    if n <= u64::from(u32::MAX) {
        (i * mul + add) % n
    } else {
        ((i as u128 * mul as u128 + add as u128) % n as u128) as u64
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
    pub dir: Ddir,
    /// Byte offset on the device.
    pub offset: u64,
    pub len: u32,
}

/// fio's `zonemode=strided`: `size` bytes of I/O in a zone of `range` bytes, then the next
/// zone `range + skip` further on, back to the first past the region's end.
///
/// As fio 3.33 does it (`--rw=read --size=1m --bs=4k --zonemode=strided --zonerange=256k
/// --zonesize=16k`, its `write_iolog`): each visit starts at the zone's start (blocks 0-3,
/// 64-67, 128-131, 192-195, then 0-3 again, until `size` bytes are done), and a random job
/// draws anywhere in the zone, with no random map (161 distinct blocks of 256 I/Os).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zones {
    pub range: u64,
    pub size: u64,
    pub skip: u64,
}

/// Everything that shapes a job's offsets and sizes (a resolved job's pattern options).
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub rw: Pattern,
    pub rwmixread: u32,
    /// Sizes of reads, writes and trims.
    pub sizes: [BlockSizes; 3],
    /// Offsets are multiples of this from `offset` (fio's `blockalign`, or the job's grid).
    pub grid: u32,
    /// Start and length of the region.
    pub offset: u64,
    pub size: u64,
    /// fio's `rw=...:N`: for sequential patterns a gap of N bytes after each I/O, for
    /// random ones a new random offset every N I/Os with sequential ones between (0: none).
    pub modifier: u64,
    /// A negative sequential modifier (`read:-8k`): each I/O `modifier` bytes before the
    /// end of the one before; fio starts such a job at the region's start when it begins
    /// at its file's start, else `modifier` before the region's end (`from_end`).
    pub backward: bool,
    pub from_end: bool,
    pub dist: Distribution,
    /// fio's `percentage_random` per direction (100: every I/O at a random offset).
    pub percentage_random: [u32; 3],
    /// Draw random blocks independently instead of each once per pass.
    pub norandommap: bool,
    pub seed: u64,
    /// `zonemode=strided`, when on.
    pub zones: Option<Zones>,
}

/// Generates the I/Os of one job over `[offset, offset + size)`.
#[derive(Clone, Debug)]
pub struct Generator {
    pattern: Pattern,
    rwmixread: u32,
    sizes: [BlockSizes; 3],
    grid: u64,
    base: u64,
    /// Bytes of the region that whole grid blocks cover: one pass is this many bytes.
    span: u64,
    nr_blocks: u64,
    modifier: u64,
    backward: bool,
    /// I/Os and bytes issued in the current pass.
    pos: u64,
    bytes: u64,
    /// Random blocks come from the permutation (each once per pass).
    use_map: bool,
    perm: Permutation,
    /// fio's random map, for sizes that vary (see [`map`]).
    map: Option<RandomMap>,
    sampler: Option<Sampler>,
    rng: Rng,
    /// Sequential cursors (bytes into the region), one per direction when mixed.
    read_cursor: u64,
    write_cursor: u64,
    /// Random with a `:N` modifier: where each direction's last I/O ended, and how many
    /// sequential I/Os follow before the next random offset.
    last_end: [u64; 3],
    seq_left: [u64; 3],
    pct_random: [u32; 3],
    /// `trimwrite`: the block just trimmed, to be written next.
    then_write: Option<(u64, u64)>,
    /// Strided zones: the current zone's start and the bytes done in this visit.
    zones: Option<Zones>,
    zone_start: u64,
    zone_pos: u64,
}

impl Generator {
    pub fn new(shape: &Shape) -> Generator {
        let grid = u64::from(shape.grid.max(512));
        let nr_blocks = (shape.size / grid).max(1);
        let mut rng = Rng::new(shape.seed);
        let perm = Permutation::new(nr_blocks, &mut rng);
        let issued = [
            shape.rw.does_read(),
            shape.rw.does_write(),
            shape.rw.does_trim(),
        ];
        let mut sizes = shape.sizes.iter().zip(issued).filter(|(_, on)| *on);
        let first = sizes.next().map(|(s, _)| s.clone());
        // One size for every I/O the job issues.
        let fixed = first
            .as_ref()
            .is_some_and(|f| f.is_fixed() && sizes.all(|(s, _)| s == f));
        // fio 3.33, `--rw=write:-192k --bs=64k --offset=16m --size=8m`: the first write at
        // 16m + 8m - 192k.
        let first_cursor = if shape.backward && shape.from_end {
            (nr_blocks * grid).saturating_sub(shape.modifier)
        } else {
            0
        };
        let sampler = shape
            .dist
            .is_skewed()
            .then(|| Sampler::new(&shape.dist, nr_blocks, grid, &mut rng));
        Generator {
            pattern: shape.rw,
            rwmixread: shape.rwmixread,
            sizes: shape.sizes.clone(),
            grid,
            base: shape.offset,
            span: nr_blocks * grid,
            nr_blocks,
            modifier: shape.modifier,
            backward: shape.backward,
            pos: 0,
            bytes: 0,
            // fio's random map: each block once per pass, reads and writes of a mixed job
            // sharing it (fio 3.33, `rw=randrw --size=4m --bs=4k`: 1024 I/Os on 1024
            // blocks; with norandommap on 639). Variable sizes draw independently (fio
            // shrinks an I/O to the free run it lands in; we do not), as do skewed
            // distributions (fio uses no map for them either).
            use_map: !shape.norandommap && fixed && sampler.is_none() && shape.zones.is_none(),
            map: (shape.rw.is_random()
                && !shape.norandommap
                && !fixed
                && sampler.is_none()
                && shape.zones.is_none())
            .then(|| RandomMap::new(nr_blocks)),
            perm,
            sampler,
            rng,
            read_cursor: first_cursor,
            write_cursor: first_cursor,
            last_end: [0; 3],
            seq_left: [0; 3],
            pct_random: shape.percentage_random,
            then_write: None,
            zones: shape.zones,
            zone_start: 0,
            zone_pos: 0,
        }
    }

    /// Blocks in one pass.
    pub fn nr_blocks(&self) -> u64 {
        self.nr_blocks
    }

    /// True once one pass over the region is complete (`size` bytes issued).
    pub fn pass_done(&self) -> bool {
        // A trimwrite's write still follows its trim.
        self.then_write.is_none() && self.bytes >= self.span
    }

    /// Starts another pass (time_based jobs loop over the region).
    pub fn rewind(&mut self) {
        self.pos = 0;
        self.bytes = 0;
        self.zone_start = 0;
        self.zone_pos = 0;
        if let Some(m) = &mut self.map {
            m.clear();
        }
    }

    #[inline]
    fn direction(&mut self) -> Ddir {
        match self.pattern {
            Pattern::Read | Pattern::RandRead => Ddir::Read,
            Pattern::Write | Pattern::RandWrite => Ddir::Write,
            Pattern::RandRw | Pattern::ReadWrite => {
                if self.rng.below(100) >= self.rwmixread as u64 {
                    Ddir::Write
                } else {
                    Ddir::Read
                }
            }
            // A trimwrite's write follows its trim (`next_io`).
            Pattern::Trim | Pattern::RandTrim | Pattern::TrimWrite | Pattern::RandTrimWrite => {
                Ddir::Trim
            }
        }
    }

    #[inline]
    pub fn next_io(&mut self) -> Io {
        // fio's trimwrite: the blocks are trimmed, then the same blocks written; a pass is
        // `size` bytes trimmed (and as many written).
        if let Some((rel, len)) = self.then_write.take() {
            return Io {
                dir: Ddir::Write,
                offset: self.base + rel,
                len: len as u32,
            };
        }
        let d = self.direction();
        let write = d == Ddir::Write;
        let dir = d.index();
        let mut len = u64::from(self.sizes[dir].pick(&mut self.rng)).min(self.span);
        let rel = if let Some(z) = self.zones {
            self.zoned_offset(z, len)
        } else if self.pattern.is_random() {
            let (at, cut) = self.random_offset(dir, len);
            len = cut;
            at
        } else {
            let (hole, back, span, grid) = (self.modifier, self.backward, self.span, self.grid);
            let cursor = if write && self.pattern.is_mixed() {
                &mut self.write_cursor
            } else {
                &mut self.read_cursor
            };
            if *cursor + len > span {
                *cursor = if back { (span - len) / grid * grid } else { 0 };
            }
            let at = *cursor;
            *cursor = match (back, at + len) {
                (false, end) => end + hole,
                // fio's get_next_seq_offset going backwards: `hole` before the end of
                // this I/O, or from the end of the region when that falls below its start
                // (`--rw=read:-8k --bs=4k --size=64k`: 0, 56k, 52k, ..., 4k, 0).
                (true, end) if end >= hole => end - hole,
                (true, _) => span.saturating_sub(hole),
            };
            at
        };
        self.pos += 1;
        self.bytes += len;
        if matches!(self.pattern, Pattern::TrimWrite | Pattern::RandTrimWrite) {
            self.then_write = Some((rel, len));
        }
        Io {
            dir: d,
            offset: self.base + rel,
            len: len as u32,
        }
    }

    /// The offset of the next I/O of `len` bytes in strided zones (see [`Zones`]).
    fn zoned_offset(&mut self, z: Zones, len: u64) -> u64 {
        let start = self.zone_start;
        let mut at = if self.pattern.is_random() {
            let blocks = (z.range.min(self.span - start) / self.grid).max(1);
            start + self.rng.below(blocks) * self.grid
        } else {
            start + self.zone_pos
        };
        if at + len > self.span {
            at = (self.span - len) / self.grid * self.grid;
        }
        self.zone_pos += len;
        if self.zone_pos >= z.size {
            self.zone_pos = 0;
            self.zone_start = start.saturating_add(z.range).saturating_add(z.skip);
            if self.zone_start >= self.span {
                self.zone_start = 0;
            }
        }
        at
    }

    /// A random I/O's offset in the region and its length (cut short by the random map);
    /// with a `:N` modifier, N-1 sequential ones follow each random one (fio's
    /// `rw_sequencer=sequential`), unless that would run past the end.
    #[inline]
    fn random_offset(&mut self, dir: usize, len: u64) -> (u64, u64) {
        // fio's percentage_random: the rest of the I/Os follow on from the last one (a
        // draw only where it is below 100, so fully random jobs keep their sequence).
        let pct = self.pct_random[dir];
        if pct < 100 && self.rng.below(100) >= u64::from(pct) {
            let next = self.last_end[dir];
            if next + len <= self.span {
                self.last_end[dir] = next + len;
                return (next, len);
            }
        }
        if self.modifier > 0 {
            let next = self.last_end[dir];
            if self.seq_left[dir] > 0 && next + len <= self.span {
                self.seq_left[dir] -= 1;
                self.last_end[dir] = next + len;
                return (next, len);
            }
            self.seq_left[dir] = self.modifier - 1;
        }
        if let Some(map) = &mut self.map {
            let drawn = self.rng.below(self.nr_blocks);
            if let Some((first, n)) = map.take(drawn, len.div_ceil(self.grid)) {
                let at = first * self.grid;
                let len = (n * self.grid).min(len).min(self.span - at);
                self.last_end[dir] = at + len;
                return (at, len);
            }
        }
        let block = match &self.sampler {
            Some(s) => s.next(&mut self.rng),
            None if self.use_map => self.perm.at(self.pos % self.nr_blocks),
            None => self.rng.below(self.nr_blocks),
        };
        let mut at = block * self.grid;
        if at + len > self.span {
            at = (self.span - len) / self.grid * self.grid;
        }
        self.last_end[dir] = at + len;
        (at, len)
    }

    /// The number of the grid block at device offset `offset` of the region.
    pub fn block_of(&self, offset: u64) -> u64 {
        (offset - self.base) / self.grid
    }

    /// The block at permutation position `i` of the first pass (used by verify to walk the
    /// written blocks again in the same order).
    pub fn block_offset(&self, i: u64) -> u64 {
        let b = if self.pattern.is_random() && self.use_map {
            self.perm.at(i)
        } else {
            i % self.nr_blocks
        };
        self.base + b * self.grid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rw: Pattern, rwmixread: u32, bs: u32, offset: u64, size: u64, seed: u64) -> Shape {
        Shape {
            rw,
            rwmixread,
            sizes: [
                BlockSizes::Fixed(bs),
                BlockSizes::Fixed(bs),
                BlockSizes::Fixed(bs),
            ],
            grid: bs,
            offset,
            size,
            modifier: 0,
            backward: false,
            from_end: false,
            dist: Distribution::Uniform,
            percentage_random: [100; 3],
            norandommap: false,
            seed,
            zones: None,
        }
    }

    /// The offsets of `n` I/Os.
    fn offsets(shape: &Shape, n: usize) -> Vec<u64> {
        let mut g = Generator::new(shape);
        (0..n).map(|_| g.next_io().offset).collect()
    }

    #[test]
    fn sequential_holes_wrap_and_cover_size_bytes_as_fio_does() {
        // fio 3.33, `rw=read:4k --bs=4k --size=64k`: 0, 8k, ..., 56k, then again from 0.
        let s = Shape {
            modifier: 4096,
            ..shape(Pattern::Read, 100, 4096, 0, 64 << 10, 1)
        };
        let mut g = Generator::new(&s);
        let mut offs = Vec::new();
        while !g.pass_done() {
            offs.push(g.next_io().offset / 1024);
        }
        assert_eq!(
            offs,
            [0, 8, 16, 24, 32, 40, 48, 56, 0, 8, 16, 24, 32, 40, 48, 56]
        );
    }

    #[test]
    fn a_random_modifier_takes_a_new_offset_every_n_ios() {
        let s = Shape {
            modifier: 4,
            ..shape(Pattern::RandRead, 100, 4096, 0, 1 << 30, 1)
        };
        let offs = offsets(&s, 400);
        let jumps = offs.windows(2).filter(|w| w[1] != w[0] + 4096).count();
        // 99 new offsets after the first (one in four), less those that land right after.
        assert!((95..=99).contains(&jumps), "{jumps} jumps in 400 I/Os");
    }

    #[test]
    fn variable_sizes_stay_in_the_region_on_the_grid_and_sequential_ones_abut() {
        let s = Shape {
            sizes: [
                BlockSizes::Range {
                    min: 4096,
                    max: 16384,
                },
                BlockSizes::Fixed(4096),
                BlockSizes::Fixed(4096),
            ],
            grid: 4096,
            ..shape(Pattern::RandRead, 100, 4096, 1 << 20, 1 << 20, 5)
        };
        let mut g = Generator::new(&s);
        for _ in 0..10_000 {
            let io = g.next_io();
            assert_eq!(io.offset % 4096, 0);
            assert!(
                io.offset >= 1 << 20 && io.offset + io.len as u64 <= 2 << 20,
                "{io:?}"
            );
        }
        let s = Shape {
            rw: Pattern::Read,
            ..s
        };
        let mut g = Generator::new(&s);
        let a = g.next_io();
        let b = g.next_io();
        assert_eq!(b.offset, a.offset + a.len as u64);
    }

    #[test]
    fn random_pass_touches_every_block_once() {
        for n in [1u64, 2, 7, 64, 1000, 4096] {
            let mut g = Generator::new(&shape(Pattern::RandRead, 100, 4096, 0, n * 4096, 42));
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
                Generator::new(&shape(Pattern::RandRead, 100, 4096, 0, 1 << 30, 7)),
                |g, _| Some(g.next_io()),
            )
            .collect();
        let b: Vec<_> = (0..100)
            .scan(
                Generator::new(&shape(Pattern::RandRead, 100, 4096, 0, 1 << 30, 7)),
                |g, _| Some(g.next_io()),
            )
            .collect();
        let c: Vec<_> = (0..100)
            .scan(
                Generator::new(&shape(Pattern::RandRead, 100, 4096, 0, 1 << 30, 8)),
                |g, _| Some(g.next_io()),
            )
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rwmixread_splits_directions() {
        let mut g = Generator::new(&shape(Pattern::RandRw, 70, 4096, 0, 1 << 30, 1));
        let reads = (0..100_000)
            .filter(|_| g.next_io().dir == Ddir::Read)
            .count();
        assert!(
            (68_000..72_000).contains(&reads),
            "70% reads expected, got {reads}"
        );
    }

    #[test]
    fn sequential_read_wraps_at_size_and_respects_offset() {
        let mut g = Generator::new(&shape(Pattern::Read, 100, 4096, 1 << 20, 3 * 4096, 1));
        let offs: Vec<u64> = (0..4).map(|_| g.next_io().offset).collect();
        assert_eq!(
            offs,
            vec![1 << 20, (1 << 20) + 4096, (1 << 20) + 8192, 1 << 20]
        );
    }
}
