//! Where the next I/O goes and what it is: fio's `rw` (with its `:N` modifier),
//! `rwmixread`, `bs`/`bsrange`/`bssplit`, `blockalign`, `offset`, `size`,
//! `random_distribution`, `norandommap` and `randrepeat`/`randseed`, as a deterministic
//! generator shared by `mqblk bench` and the simulator.

mod bs;
mod dist;
mod files;
pub mod frand;
mod lfsr;
mod map;

use crate::Ddir;

pub use bs::{parse_split, BlockSizes, SplitEntry};
pub use dist::Distribution;
use dist::Sampler;
pub use files::FileSet;
use frand::{slot, FRand, Seeds};
use map::RandomMap;

/// Why a `bssplit` list or a `random_distribution` (or `file_service_type`'s skew) is
/// refused: one line saying what is wrong with which part.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    /// A `bssplit` entry's size.
    #[error("'{0}' is not a block size (a nonzero multiple of 512)")]
    NotBlockSize(String),
    /// A `bssplit` entry's share.
    #[error("'{0}' is not a percentage from 0 to 100")]
    NotPercentage(String),
    #[error("'{0}' is not a number")]
    NotNumber(String),
    #[error("'{0}' is not a size")]
    NotSize(String),
    /// `zipf`, `pareto` or `normal` without its parameter.
    #[error("{0} needs a value ({0}:VALUE)")]
    NeedsValue(String),
    #[error("center {0} is outside 0.0..=1.0")]
    Center(f64),
    #[error("zipf theta must be above 0 and other than 1")]
    ZipfTheta,
    #[error("pareto h must lie between 0 and 1")]
    ParetoH,
    #[error("normal deviation must be at least 0 and below 100")]
    NormalDeviation,
    /// `zoned` or `zoned_abs` without zones.
    #[error("{0} needs zones ({0}:A/S:...)")]
    NeedsZones(String),
    #[error("one zone list for all directions is supported")]
    ZonesPerDirection,
    #[error("zone '{0}' is not ACCESS/SIZE")]
    NotZone(String),
    #[error("zone access shares add up to {0}%, not 100%")]
    AccessShares(f64),
    #[error("zone sizes add up to {0}%, not 100%")]
    ZoneSizes(f64),
    #[error(
        "expected random, zipf:THETA, pareto:H, normal:DEV, zoned:A/S:... or zoned_abs:A/SIZE:..."
    )]
    UnknownDistribution,
}

/// The access pattern is fio's `rw=`, as parsed.
pub use crate::RwMode as Pattern;

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
    /// `grid` is the job's `blockalign` (random offsets in its units, as fio's `ba`).
    pub blockalign: bool,
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
    /// fio's `rw_sequencer=identical`: the I/Os of a random `:N` job between its random
    /// ones start where the one before started.
    pub identical: bool,
    /// fio's `bs_is_seq_rand`: an I/O at a random offset takes the write sizes, any other
    /// the read sizes.
    pub bs_is_seq_rand: bool,
    /// Draw random blocks independently instead of each once per pass.
    pub norandommap: bool,
    /// The job's random streams' seeds (fio's `rand_seeds[]`), the same for every file of
    /// the job.
    pub seeds: Seeds,
    /// The seed of this file's skewed distribution: fio's `jhash(file_name) *
    /// thread_number` with `randrepeat`, else the offsets' seed.
    pub dist_seed: u32,
    /// `zonemode=strided`, when on.
    pub zones: Option<Zones>,
    /// `zonemode=zbd`, when on.
    pub zbd: Option<crate::zbd::GenZbd>,
}

/// A job's random streams, one per purpose as fio keeps them in its `thread_data`, with
/// the read/write mix's state: shared by every file of the job.
#[derive(Clone, Debug)]
pub struct Streams {
    seeds: Seeds,
    /// Offsets (`random_state`).
    random: FRand,
    /// Sizes per direction (`bsrange_state[]`).
    bsrange: [FRand; 3],
    /// The read/write mix (`rwmix_state`).
    rwmix: FRand,
    /// percentage_random's coin per direction (`seq_rand_state[]`).
    seq_rand: [FRand; 3],
    /// The zone of a zoned distribution (`zone_state`).
    zone: FRand,
    /// The file of `file_service_type=random` (`next_file_state`).
    pub(crate) next_file: FRand,
    /// fio's `rwmix_ddir`, `rwmix_issues` and `io_issues[]`.
    rwmix_ddir: usize,
    rwmix_issues: u64,
    io_issues: [u64; 3],
    /// fio's `td->ddir_seq_nr`: I/Os left until a random `:N` job draws a new offset.
    ddir_seq_nr: u64,
    /// A rate-limited job's time and when each direction may issue next (fio's
    /// `rate_next_io_time`), for [`Streams::mixed_ddir`]'s `rate_ddir`.
    rate: Option<RateView>,
}

/// What fio's `rate_ddir` looks at: now, and when reads and writes are next due (ns since
/// the job's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateView {
    pub now: u64,
    pub due: [u64; 2],
}

impl Streams {
    /// fio's `td_fill_rand_seeds` for a job whose verify and trimwrite settings are given.
    pub fn new(seeds: &Seeds, verify: bool, trimwrite: bool) -> Streams {
        let mut bs_seed = [
            seeds.slots[slot::BS],
            seeds.slots[slot::BS1],
            seeds.slots[slot::BS2],
        ];
        if verify {
            bs_seed[1] = bs_seed[0];
        }
        if trimwrite {
            bs_seed[2] = bs_seed[1];
        }
        let use64 = seeds.use64;
        let seq = FRand::new(seeds.slots[slot::SEQ_RAND_READ], false);
        Streams {
            random: seeds.state(slot::BLOCK),
            bsrange: bs_seed.map(|s| FRand::new(s, use64)),
            rwmix: seeds.state32(slot::MIX),
            seq_rand: [seq.clone(), seq.clone(), seq],
            zone: seeds.state32(slot::ZONE),
            next_file: seeds.state(slot::FILE),
            seeds: seeds.clone(),
            rwmix_ddir: 0,
            rwmix_issues: 0,
            io_issues: [0; 3],
            ddir_seq_nr: 1,
            rate: None,
        }
    }

    /// A new loop of a job that is not time based (fio's `clear_io_state`): the counters
    /// start over and, with `randrepeat`, every stream from its seed again.
    pub fn new_loop(&mut self, verify: bool, trimwrite: bool) {
        let fresh = Streams::new(&self.seeds, verify, trimwrite);
        let keep = !self.seeds.repeatable;
        let old = std::mem::replace(self, fresh);
        self.io_issues = old.io_issues;
        if keep {
            self.random = old.random;
            self.bsrange = old.bsrange;
            self.rwmix = old.rwmix;
            self.seq_rand = old.seq_rand;
            self.zone = old.zone;
            self.next_file = old.next_file;
        }
        self.rwmix_ddir = old.rwmix_ddir;
        self.ddir_seq_nr = old.ddir_seq_nr;
        self.rate = old.rate;
    }

    /// Sets what the next mixed direction's `rate_ddir` sees (`None`: no rate limit).
    pub fn set_rate(&mut self, rate: Option<RateView>) {
        self.rate = rate;
    }

    /// fio's `get_rw_ddir` for a mixed job: a new direction is drawn only once the current
    /// one has issued its run (`rwmix_issues`, set by `set_rwmix_bytes` at a switch).
    fn mixed_ddir(&mut self, rwmixread: u32) -> usize {
        if self.io_issues[self.rwmix_ddir] >= self.rwmix_issues {
            let v = self.rwmix.between(1, 100);
            let ddir = if v <= u64::from(rwmixread) { 0 } else { 1 };
            if ddir != self.rwmix_ddir {
                let share = if ddir == 0 {
                    rwmixread
                } else {
                    100 - rwmixread
                };
                self.rwmix_issues = self.io_issues[self.rwmix_ddir] * u64::from(share) / 100;
            }
            self.rwmix_ddir = ddir;
        }
        // fio's `rate_ddir`: a direction ahead of its rate gives way to the other when that
        // one is due, or, both ahead, to whichever is due first (the caller then waits for
        // it); the choice becomes the mix's direction.
        if let Some(r) = self.rate {
            let d = self.rwmix_ddir;
            let o = d ^ 1;
            let other_share = if o == 0 { rwmixread } else { 100 - rwmixread };
            if r.due[d] > r.now && other_share > 0 && (r.due[o] <= r.now || r.due[o] < r.due[d]) {
                self.rwmix_ddir = o;
            }
        }
        self.rwmix_ddir
    }
}

/// Generates the I/Os of one file of a job over `[offset, offset + size)`, drawing from the
/// job's [`Streams`] as fio's `fill_io_u` does: the direction, then the offset, then the size.
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
    /// I/Os and bytes issued in the current pass, and whether it ended early (fio found
    /// no next I/O: see [`Generator::next_io`]).
    pos: u64,
    bytes: u64,
    ended: bool,
    /// Random offsets' unit per direction (fio's `ba[]`: blockalign, else the smallest
    /// size; the random map, kept only where that is the smallest size, has one bit per
    /// smallest size of any direction, fio's `rw_min_bs`).
    ba: [u64; 3],
    /// fio's random map (`io_axmap`), when the job keeps one.
    map: Option<RandomMap>,
    /// `random_generator=lfsr`: the register over the file's blocks, and its seed.
    lfsr: Option<lfsr::Lfsr>,
    lfsr_seed: u64,
    sampler: Option<Sampler>,
    /// A zoned distribution's index (see [`dist::zone_index`]) and whether its sizes are
    /// bytes (`zoned_abs`) rather than percent.
    zone_index: Option<Vec<(u64, u64)>>,
    zone_abs: bool,
    /// Sequential cursors (bytes into the region), one per direction when mixed.
    read_cursor: u64,
    write_cursor: u64,
    /// Where each direction's last I/O ended (fio's `last_pos[]`, relative).
    last_end: [u64; 3],
    /// Where each direction's last I/O started (fio's `last_start[]`, relative; `None`
    /// before the first), and whether the `:N` I/Os repeat it (`rw_sequencer=identical`).
    last_start: [Option<u64>; 3],
    identical: bool,
    bs_is_seq_rand: bool,
    pct_random: [u32; 3],
    /// `trimwrite`: the block just trimmed, to be written next.
    then_write: Option<(u64, u64)>,
    /// Strided zones: the current zone's start and the bytes done in this visit.
    zones: Option<Zones>,
    zone_start: u64,
    zone_pos: u64,
    /// `zonemode=zbd`: the file's zones, the bytes done in the current zone (fio's
    /// `zone_bytes`) and where a sequential job's current visit started (fio's moving
    /// `file_offset`, relative).
    zbd: Option<crate::zbd::GenZbd>,
    zbd_bytes: u64,
    zbd_visit: u64,
    /// The map block (and its unit) of the random I/O just drawn, marked once the zone
    /// adjustment has its length.
    zbd_mark: Option<(u64, u64)>,
}

impl Generator {
    pub fn new(shape: &Shape) -> Generator {
        let grid = u64::from(shape.grid.max(512));
        let nr_blocks = (shape.size / grid).max(1);
        // fio 3.33, `--rw=write:-192k --bs=64k --offset=16m --size=8m`: the first write at
        // 16m + 8m - 192k.
        let first_cursor = if shape.backward && shape.from_end {
            (nr_blocks * grid).saturating_sub(shape.modifier)
        } else {
            0
        };
        let min_bs = [0, 1, 2].map(|d| u64::from(shape.sizes[d].min().max(512)));
        // fio's `ba[]`: blockalign where given (the job's grid), else each direction's
        // smallest size; any blockalign other than the smallest size turns the map off.
        let ba = if shape.blockalign { [grid; 3] } else { min_bs };
        let map_off = ba != min_bs;
        let map_bs = min_bs.into_iter().min().unwrap_or(512);
        // fio's `init_random_map` and `init_rand_distribution`: a skewed distribution has
        // its own generator over ranges of the smallest read or write size, and no map.
        let range = min_bs[0].min(min_bs[1]);
        let sampler = if shape.rw.is_random() {
            Sampler::new(&shape.dist, shape.size.div_ceil(range), shape.dist_seed)
        } else {
            None
        };
        let zone_index = dist::zone_index(&shape.dist);
        let uniform = matches!(shape.dist, Distribution::Uniform);
        // Strided zones keep a map over one zone's range (fio's `init_random_map`).
        let map_bytes = shape.zones.map_or(shape.size, |z| z.range.min(shape.size));
        let use_lfsr = shape.seeds.generator == frand::RandomGenerator::Lfsr;
        let lfsr_seed = shape.seeds.slots[slot::BLOCK];
        let lfsr = (shape.rw.is_random() && uniform && use_lfsr)
            .then(|| lfsr::Lfsr::new((map_bytes / map_bs).max(1), lfsr_seed))
            .flatten();
        let map = (shape.rw.is_random() && !shape.norandommap && !map_off && uniform && !use_lfsr)
            .then(|| RandomMap::new((map_bytes / map_bs).max(1)));
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
            ended: false,
            ba,
            map,
            lfsr,
            lfsr_seed,
            sampler,
            zone_abs: matches!(shape.dist, Distribution::ZonedAbs(_)),
            zone_index,
            read_cursor: first_cursor,
            write_cursor: first_cursor,
            last_end: [0; 3],
            last_start: [None; 3],
            identical: shape.identical,
            bs_is_seq_rand: shape.bs_is_seq_rand,
            pct_random: shape.percentage_random,
            then_write: None,
            zones: shape.zones,
            zone_start: 0,
            zone_pos: 0,
            zbd: shape.zbd.clone(),
            zbd_bytes: 0,
            zbd_visit: 0,
            zbd_mark: None,
        }
    }

    /// Whether this file's pass ended because it has no next I/O, as fio finds it when
    /// `fill_io_u` fails: a sequential job at the region's end, a random one whose map or
    /// LFSR has given every block, or one that found no I/O that fits. A random job without
    /// either never runs out: fio draws on until the job's bytes are done (`size` times
    /// `loops`, or `io_size`), without starting its streams over.
    pub fn ran_out(&self) -> bool {
        !self.pattern.is_random()
            || self.ended
            || self.map.as_ref().is_some_and(RandomMap::is_full)
            || self.lfsr.as_ref().is_some_and(lfsr::Lfsr::exhausted)
    }

    /// Counts a new pass without touching where the file's draws stand (a random job
    /// without a map that has issued a pass's bytes, see [`Generator::ran_out`]).
    pub fn continue_pass(&mut self) {
        // What the last I/O issued past the pass's bytes counts toward this one: fio's limit
        // is the job's total, not each pass's.
        self.pos = 0;
        self.bytes = self.bytes.saturating_sub(self.span);
    }

    /// Whether random offsets go through fio's random map (or its LFSR): each block once a
    /// pass.
    pub fn keeps_random_map(&self) -> bool {
        self.map.is_some() || self.lfsr.is_some()
    }

    /// Blocks in one pass.
    pub fn nr_blocks(&self) -> u64 {
        self.nr_blocks
    }

    /// True once one pass over the region is complete (`size` bytes issued).
    pub fn pass_done(&self) -> bool {
        // A trimwrite's write still follows its trim.
        self.then_write.is_none() && (self.ended || self.bytes >= self.span)
    }

    /// Starts another pass (fio's `fio_file_reset`: the cursors back to the start, the
    /// random map emptied).
    pub fn rewind(&mut self) {
        self.pos = 0;
        self.bytes = 0;
        self.ended = false;
        self.zone_start = 0;
        self.zone_pos = 0;
        self.zbd_visit = 0;
        self.zbd_bytes = 0;
        self.zbd_mark = None;
        if self.zbd.is_some() {
            // fio's `fio_file_reset`: `last_pos` back at the region's start (a pass of a
            // zbd job can end before the region's end, as its file runs out of data).
            self.read_cursor = 0;
            self.write_cursor = 0;
        }
        self.last_end = [0; 3];
        self.last_start = [None; 3];
        if let Some(m) = &mut self.map {
            m.clear();
        }
        if let Some(l) = &mut self.lfsr {
            l.reset(self.lfsr_seed);
        }
    }

    /// The direction of the next I/O (fio's `get_rw_ddir`).
    #[inline]
    fn direction(&mut self, st: &mut Streams) -> Ddir {
        match self.pattern {
            Pattern::Read | Pattern::RandRead => Ddir::Read,
            Pattern::Write | Pattern::RandWrite => Ddir::Write,
            Pattern::RandRw | Pattern::ReadWrite => {
                if st.mixed_ddir(self.rwmixread) == 0 {
                    Ddir::Read
                } else {
                    Ddir::Write
                }
            }
            // A trimwrite's write follows its trim (`next_io`).
            Pattern::Trim | Pattern::RandTrim | Pattern::TrimWrite | Pattern::RandTrimWrite => {
                Ddir::Trim
            }
        }
    }

    /// Whose sizes an I/O of direction `dir` takes: its own, or with `bs_is_seq_rand` the
    /// reads' for one that follows on and the writes' for one at a random offset (fio's
    /// `get_next_buflen`, which also draws from that direction's size stream).
    fn size_dir(&self, dir: usize, random: bool) -> usize {
        match (self.bs_is_seq_rand, random) {
            (false, _) => dir,
            (true, false) => Ddir::Read.index(),
            (true, true) => Ddir::Write.index(),
        }
    }

    /// The next I/O, drawing from the job's streams `st`; `None` where fio finds no next
    /// I/O in the file before its pass is done, which ends the pass.
    #[inline]
    pub fn next_io(&mut self, st: &mut Streams) -> Option<Io> {
        // fio's trimwrite: the blocks are trimmed, then the same blocks written; a pass is
        // `size` bytes trimmed (and as many written).
        if let Some((rel, len)) = self.then_write.take() {
            st.io_issues[1] += 1;
            return Some(Io {
                dir: Ddir::Write,
                offset: self.base + rel,
                len: len as u32,
            });
        }
        let mut d = self.direction(st);
        if d == Ddir::Read && self.zbd.as_ref().is_some_and(|z| !z.may_read()) {
            d = Ddir::Write;
        }
        let write = d == Ddir::Write;
        let dir = d.index();
        let span = self.span;
        // fio's `io_u_fits`: an I/O ends within the region.
        let pick = |sizes: &BlockSizes, rand: &mut FRand, at: u64| -> u64 {
            u64::from(sizes.pick(rand, |len| at + len <= span)).min(span)
        };
        let (rel, len) = if let Some(z) = self.zones {
            let min = u64::from(self.sizes[dir].min());
            let (at, block) = self.zoned_offset(z, dir, min, st);
            let sd = self.size_dir(dir, self.pattern.is_random());
            let mut len = pick(&self.sizes[sd], &mut st.bsrange[sd], at);
            if let (Some(b), Some(map)) = (block, &mut self.map) {
                let ba = self.ba[dir];
                let n = map.set_run(b, len.div_ceil(ba));
                if n > 0 {
                    len = len.min(n * ba);
                }
            }
            (at, len)
        } else if self.pattern.is_random() {
            match self.random_io(dir, st) {
                Some(io) => io,
                None => {
                    self.ended = true;
                    return None;
                }
            }
        } else {
            let (hole, back, grid) = (self.modifier, self.backward, self.grid);
            let sd = self.size_dir(dir, false);
            let min = u64::from(self.sizes[sd].min());
            let cursor = if write && self.pattern.is_mixed() {
                &mut self.write_cursor
            } else {
                &mut self.read_cursor
            };
            if let Some(z) = &self.zbd {
                let visit = z.region + self.zbd_visit;
                let (moved, restart) = crate::zbd::zone_mode_position(
                    &z.shared,
                    &z.opts,
                    z.region + *cursor,
                    write,
                    self.zbd_bytes,
                    visit,
                );
                if let Some(p) = moved {
                    let mut rel = p.saturating_sub(z.region);
                    if restart {
                        self.zbd_bytes = 0;
                        if rel >= span {
                            rel = 0;
                        }
                        self.zbd_visit = rel;
                    } else {
                        // Bytes jumped over past a zone's capacity count toward the pass,
                        // which ends where fio's does, at the region's end.
                        self.bytes += rel.saturating_sub(*cursor);
                    }
                    *cursor = rel;
                }
            }
            if *cursor + min > span {
                *cursor = if back { (span - min) / grid * grid } else { 0 };
            }
            let at = *cursor;
            let len = u64::from(self.sizes[sd].pick(&mut st.bsrange[sd], |l| at + l <= span))
                .min(span - at)
                .max(1);
            *cursor = match (back, at + len) {
                (false, end) => end + hole,
                // fio's get_next_seq_offset going backwards: `hole` before the end of
                // this I/O, or from the end of the region when that falls below its start
                // (`--rw=read:-8k --bs=4k --size=64k`: 0, 56k, 52k, ..., 4k, 0).
                (true, end) if end >= hole => end - hole,
                (true, _) => span.saturating_sub(hole),
            };
            (at, len)
        };
        self.pos += 1;
        self.bytes += len;
        self.last_end[dir] = rel + len;
        self.last_start[dir] = Some(rel);
        st.io_issues[dir] += 1;
        if matches!(self.pattern, Pattern::TrimWrite | Pattern::RandTrimWrite) {
            self.then_write = Some((rel, len));
        }
        Some(Io {
            dir: d,
            offset: self.base + rel,
            len: len as u32,
        })
    }

    /// `zonemode=zbd` found no I/O to make (fio's `io_u_eof`): the pass over the file ends.
    pub fn end_pass(&mut self) {
        self.ended = true;
        self.zbd_mark = None;
    }

    /// `zonemode=zbd` moved or cut the I/O just drawn (`drawn` bytes) in direction `dir` to
    /// `len` bytes at device offset `offset`: a random one's blocks are marked in the map where it was
    /// drawn (`mark_random_map`, which may cut it further: the length it goes out with is
    /// returned), a sequential job goes on from its end (fio's `last_pos`), and the zone's
    /// byte count grows.
    pub fn zbd_issued(&mut self, dir: Ddir, offset: u64, drawn: u64, len: u64) -> u64 {
        let mut len = len;
        if let (Some((block, ba)), Some(map)) = (self.zbd_mark.take(), &mut self.map) {
            let n = map.set_run(block, len.div_ceil(ba));
            if n > 0 {
                len = len.min(n * ba);
            }
        }
        self.zbd_bytes += len;
        // The pass counts the bytes issued, as fio's `io_issue_bytes`.
        self.bytes = (self.bytes + len).saturating_sub(drawn);
        let rel = offset.saturating_sub(self.base);
        let d = dir.index();
        self.last_end[d] = rel + len;
        self.last_start[d] = Some(rel);
        if self.pattern.is_random() {
            return len;
        }
        let cursor = if dir == Ddir::Write && self.pattern.is_mixed() {
            &mut self.write_cursor
        } else {
            &mut self.read_cursor
        };
        *cursor = if self.backward {
            (rel + len).saturating_sub(self.modifier)
        } else {
            rel + len + self.modifier
        };
        len
    }

    /// The offset of the next I/O of at least `len` bytes in strided zones (see [`Zones`]),
    /// and for a random job with a map, the map block it takes. fio's
    /// `setup_strided_zone_mode`: a zone's visit starts at its start with the map empty,
    /// and a random I/O lands in the zone's range through the map.
    fn zoned_offset(
        &mut self,
        z: Zones,
        dir: usize,
        len: u64,
        st: &mut Streams,
    ) -> (u64, Option<u64>) {
        if self.zone_pos == 0 {
            if let Some(m) = &mut self.map {
                m.clear();
            }
        }
        let start = self.zone_start;
        let mut block = None;
        let mut at = if self.pattern.is_random() {
            let ba = self.ba[dir];
            let lastb = (z.range / ba).max(1);
            let b = st.random.scaled(lastb);
            let b = match &mut self.map {
                Some(map) => {
                    let free = map.free_from(b).unwrap_or(b);
                    block = Some(free);
                    free
                }
                None => b,
            };
            start + b * ba
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
        (at, block)
    }

    /// A random job's next I/O in direction `dir`: offset and length, as fio's
    /// `get_next_offset`, `get_next_buflen` and `mark_random_map` make them.
    #[inline]
    fn random_io(&mut self, dir: usize, st: &mut Streams) -> Option<(u64, u64)> {
        // fio's `rw=randread:N`: a new random offset every N I/Os, sequential ones between
        // (the first I/O draws: fio starts `ddir_seq_nr` at 1).
        let mut hit = true;
        if self.modifier > 0 {
            st.ddir_seq_nr -= 1;
            if st.ddir_seq_nr == 0 {
                st.ddir_seq_nr = self.modifier;
            } else {
                hit = false;
            }
        }
        // fio's percentage_random (`should_do_random`): a coin only where it is below 100.
        let random = hit
            && (self.pct_random[dir] >= 100
                || st.seq_rand[dir].between(1, 100) <= u64::from(self.pct_random[dir]));
        let ba = self.ba[dir];
        let mut marked = false;
        let at = match (random, self.last_end[dir]) {
            // fio's `get_next_block` with `RW_SEQ_IDENT`: an I/O between the random ones
            // starts where the one before did (0 before the first), unmarked in the map.
            (false, _) if !hit && self.identical => self.last_start[dir].unwrap_or(0),
            // fio's `get_next_seq_offset`: on from where this direction's last I/O ended,
            // unmarked in the map; past the region's end a random block instead.
            (false, next) if next < self.span => next,
            _ => {
                let (b, from_map) = self.rand_block(dir, st)?;
                marked = from_map;
                b * ba
            }
        };
        let span = self.span;
        // fio's `get_next_offset` and `get_next_buflen` fail past the region's end (a block
        // the map found beyond where this direction's I/O may start) and where not even
        // the smallest size fits: the file's pass ends there.
        if at >= span {
            return None;
        }
        let sd = self.size_dir(dir, random);
        let mut len = u64::from(self.sizes[sd].pick(&mut st.bsrange[sd], |l| at + l <= span));
        // fio's `__fill_io_u`: an I/O past the file's end ends the pass (only a size of
        // another direction than the offset's, with `bs_is_seq_rand`, can be drawn so).
        if len == 0 || at + len > span {
            return None;
        }
        if marked && self.zbd.is_some() {
            // fio marks the map after `zbd_adjust_block`, with the length it left.
            self.zbd_mark = Some((at / ba, ba));
        } else if marked {
            if let Some(map) = &mut self.map {
                // fio's `mark_random_map`: the I/O is cut at the first block already done.
                // fio counts those blocks in the direction's smallest size, though the map
                // has one bit per smallest size of any direction: with `bs=4k,16k` a write
                // marks one bit per 16 KiB. We do the same, to issue what fio issues.
                let n = map.set_run(at / ba, len.div_ceil(ba));
                if n > 0 {
                    len = len.min(n * ba);
                }
            }
        }
        Some((at, len))
    }

    /// fio's `get_next_rand_offset`: a block number in units of `ba[dir]`, and whether it
    /// came through the random map (and must be marked).
    fn rand_block(&mut self, dir: usize, st: &mut Streams) -> Option<(u64, bool)> {
        let ba = self.ba[dir];
        let min = u64::from(self.sizes[dir].min());
        // fio's `last_block`: the blocks an I/O of the smallest size may start at.
        let mut max_size = self.span;
        if min > ba {
            max_size -= min - ba;
        }
        let lastb = (max_size / ba).max(1);
        if let Some(s) = &mut self.sampler {
            return Some((s.next(), false));
        }
        if let Some(index) = &self.zone_index {
            let v = st.zone.between(1, 100) as usize;
            let (lo, hi) = index[v - 1];
            if hi != u64::MAX {
                return Some(if self.zone_abs {
                    // fio's `__get_next_rand_offset_zoned_abs`: zone bounds in bytes.
                    let (stotal, send) = (lo / ba, (hi / ba).min(lastb));
                    (
                        stotal + st.random.scaled(send.saturating_sub(stotal)),
                        false,
                    )
                } else {
                    let offset = lo * lastb / 100;
                    let part = lastb * (hi - lo) / 100;
                    (st.random.scaled(part) + offset, false)
                });
            }
        }
        // fio's LFSR: every block once a pass, then no more (the pass is over).
        if let Some(l) = &mut self.lfsr {
            return l.next().map(|b| (b, false));
        }
        let b = st.random.scaled(lastb);
        let Some(map) = &mut self.map else {
            return Some((b, false));
        };
        match map.free_from(b) {
            Some(free) => Some((free, true)),
            // A full map (a pass that only partly marked it): fio's `fio_file_reset`, then
            // a new draw.
            None => {
                map.clear();
                let b = st.random.scaled(lastb);
                Some((map.free_from(b).unwrap_or(b), true))
            }
        }
    }

    /// What fio draws when it finds this file's pass done (`fill_io_u` failing in
    /// `set_io_u_file`): the direction, and for a random job the offset that the full map
    /// refuses.
    pub fn draw_on_done(&mut self, st: &mut Streams) {
        self.direction(st);
        if self.pattern.is_random() && self.map.is_some() {
            st.random.rand();
        }
    }

    /// The number of the grid block at device offset `offset` of the region.
    pub fn block_of(&self, offset: u64) -> u64 {
        (offset - self.base) / self.grid
    }

    /// Block `i` of the region in order (verify reads the written blocks back by it).
    pub fn block_offset(&self, i: u64) -> u64 {
        self.base + (i % self.nr_blocks) * self.grid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rw: Pattern, rwmixread: u32, bs: u32, offset: u64, size: u64, seed: u64) -> Shape {
        let seeds = Seeds::fio(seed, 1, false, frand::RandomGenerator::Tausworthe);
        Shape {
            rw,
            rwmixread,
            sizes: [
                BlockSizes::Fixed(bs),
                BlockSizes::Fixed(bs),
                BlockSizes::Fixed(bs),
            ],
            grid: bs,
            blockalign: false,
            offset,
            size,
            modifier: 0,
            backward: false,
            from_end: false,
            dist: Distribution::Uniform,
            percentage_random: [100; 3],
            identical: false,
            bs_is_seq_rand: false,
            norandommap: false,
            seeds,
            dist_seed: seed as u32,
            zones: None,
            zbd: None,
        }
    }

    /// A generator over `shape` with its job's streams.
    fn gen(shape: &Shape) -> (Generator, Streams) {
        (
            Generator::new(shape),
            Streams::new(&shape.seeds, false, false),
        )
    }

    /// The next `n` I/Os.
    fn ios(shape: &Shape, n: usize) -> Vec<Io> {
        let (mut g, mut st) = gen(shape);
        (0..n).map(|_| g.next_io(&mut st).unwrap()).collect()
    }

    /// The offsets of `n` I/Os.
    fn offsets(shape: &Shape, n: usize) -> Vec<u64> {
        ios(shape, n).iter().map(|io| io.offset).collect()
    }

    #[test]
    fn sequential_holes_wrap_and_cover_size_bytes_as_fio_does() {
        // fio 3.33, `rw=read:4k --bs=4k --size=64k`: 0, 8k, ..., 56k, then again from 0.
        let s = Shape {
            modifier: 4096,
            ..shape(Pattern::Read, 100, 4096, 0, 64 << 10, 1)
        };
        let (mut g, mut st) = gen(&s);
        let mut offs = Vec::new();
        while !g.pass_done() {
            offs.push(g.next_io(&mut st).unwrap().offset / 1024);
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
        let (mut g, mut st) = gen(&s);
        for _ in 0..10_000 {
            let io = g.next_io(&mut st).unwrap();
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
        let io = ios(&s, 2);
        let (a, b) = (io[0], io[1]);
        assert_eq!(b.offset, a.offset + a.len as u64);
    }

    #[test]
    fn random_pass_touches_every_block_once() {
        for n in [1u64, 2, 7, 64, 1000, 4096] {
            let (mut g, mut st) = gen(&shape(Pattern::RandRead, 100, 4096, 0, n * 4096, 42));
            let mut seen = vec![false; n as usize];
            while !g.pass_done() {
                let io = g.next_io(&mut st).unwrap();
                let b = (io.offset / 4096) as usize;
                assert!(!seen[b], "block {b} of {n} issued twice in one pass");
                seen[b] = true;
            }
            assert!(seen.iter().all(|&s| s), "a block of {n} was skipped");
        }
    }

    #[test]
    fn same_seed_same_offsets_and_different_seed_differs() {
        let a = ios(&shape(Pattern::RandRead, 100, 4096, 0, 1 << 30, 7), 100);
        let b = ios(&shape(Pattern::RandRead, 100, 4096, 0, 1 << 30, 7), 100);
        let c = ios(&shape(Pattern::RandRead, 100, 4096, 0, 1 << 30, 8), 100);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn fios_first_offsets_for_its_default_seeds() {
        // fio 3.33, `--ioengine=null --rw=randread --size=16m --bs=4k`, its write_iolog:
        // the first job's and the second job's first offsets (thread numbers 1 and 2).
        let first = |thread| {
            let s = Shape {
                seeds: Seeds::fio(frand::DEFAULT_RANDSEED, thread, true, Default::default()),
                ..shape(Pattern::RandRead, 100, 4096, 0, 16 << 20, 0)
            };
            offsets(&s, 3)
        };
        assert_eq!(first(1), [1_011_712, 12_419_072, 14_143_488]);
        assert_ne!(first(2), first(1), "a second job draws its own offsets");
    }

    #[test]
    fn rwmixread_splits_directions() {
        let reads = ios(&shape(Pattern::RandRw, 70, 4096, 0, 1 << 30, 1), 100_000)
            .iter()
            .filter(|io| io.dir == Ddir::Read)
            .count();
        assert!(
            (68_000..72_000).contains(&reads),
            "70% reads expected, got {reads}"
        );
    }

    #[test]
    fn sequential_read_wraps_at_size_and_respects_offset() {
        let s = shape(Pattern::Read, 100, 4096, 1 << 20, 3 * 4096, 1);
        let (mut g, mut st) = gen(&s);
        let mut offs = Vec::new();
        for _ in 0..4 {
            if g.pass_done() {
                g.rewind();
            }
            offs.push(g.next_io(&mut st).unwrap().offset);
        }
        assert_eq!(
            offs,
            vec![1 << 20, (1 << 20) + 4096, (1 << 20) + 8192, 1 << 20]
        );
    }
}
