//! What a device's storage holds, and what a power cut leaves of it.
//!
//! A [`Media`] follows every data command from its arrival at the device to its end, and
//! keeps the data as *stamps*: each sector holds the stamp of the bio whose data it last
//! took (the simulator's bio cookie), never the bytes. That is enough to tell, after a cut,
//! which write a sector holds, and so whether the block layer kept its promises:
//!
//! - A write the device finishes goes to its **volatile write cache** if it has one
//!   (`write_cache`), unless it carries FUA; a FUA write, or any write to a device without a
//!   cache, is **durable** when it finishes (NVMe's FUA bit, SCSI's FUA, a write-through
//!   disk).
//! - A **flush** (`REQ_OP_FLUSH`: NVMe Flush, SCSI SYNCHRONIZE CACHE, virtio
//!   `VIRTIO_BLK_T_FLUSH`) makes durable what the cache held when it *arrived*, once it
//!   finishes. What lands in the cache meanwhile is not covered: the block layer's promise
//!   (`REQ_PREFLUSH`, Documentation/block/writeback_cache_control.rst) is only for writes
//!   that completed before the flush was submitted, which are in the cache by its arrival,
//!   so this is the least a device may do and keep it.
//! - A **power cut** keeps what is durable. Of what the cache holds and of the writes in
//!   flight, each atomic write unit (the device's `physical_block_size`: a unit is written
//!   whole or not at all) independently survives or not, as a cache may write back any part
//!   of itself at any time and a write in progress may have reached the medium in part.
//!   Nothing else changes: a sector never holds data no write carried.
//!
//! Commands the device ends with an error or hands back for requeue leave nothing (their
//! data is sent again, or the submitter was told it failed).
//!
//! Planted bugs ([`MediaPlant`]) make the device break those rules, for the tests that prove
//! the simulator's crash oracle notices.

use crate::SimRng;
use mqblk_core::ReqOp;
use std::collections::BTreeMap;

/// Values over sector ranges: each sector holds at most one value.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtentMap<V> {
    /// First sector -> (end, exclusive; value); extents never overlap.
    map: BTreeMap<u64, (u64, V)>,
}

impl<V> Default for ExtentMap<V> {
    fn default() -> Self {
        ExtentMap {
            map: BTreeMap::new(),
        }
    }
}

impl<V: Copy> ExtentMap<V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sectors `start..end` hold `v`.
    pub fn set(&mut self, start: u64, end: u64, v: V) {
        if start >= end {
            return;
        }
        self.clear(start, end);
        self.map.insert(start, (end, v));
    }

    /// Sectors `start..end` hold nothing.
    pub fn clear(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // An extent that begins before `start` and reaches into the range keeps its head,
        // and its tail if it reaches past the range.
        if let Some((&s, &(e, v))) = self.map.range(..start).next_back() {
            if e > start {
                self.map.insert(s, (start, v));
                if e > end {
                    self.map.insert(end, (e, v));
                }
            }
        }
        let inside: Vec<u64> = self.map.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some((e, v)) = self.map.remove(&s) {
                if e > end {
                    self.map.insert(end, (e, v));
                }
            }
        }
    }

    /// The pieces of `start..end`, in order, each with what it holds (`None`: nothing).
    pub fn segments(&self, start: u64, end: u64) -> Vec<(u64, u64, Option<V>)> {
        let mut out = Vec::new();
        let mut at = start;
        let before = self
            .map
            .range(..start)
            .next_back()
            .filter(|(_, &(e, _))| e > start)
            .map(|(&s, &(e, v))| (s, e, v));
        for (s, e, v) in before
            .into_iter()
            .chain(self.map.range(start..end).map(|(&s, &(e, v))| (s, e, v)))
        {
            let s = s.max(start);
            if s > at {
                out.push((at, s, None));
            }
            let e = e.min(end);
            out.push((s, e, Some(v)));
            at = e;
        }
        if at < end {
            out.push((at, end, None));
        }
        out
    }

    /// Every extent, in sector order: (start, end, value).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, V)> + '_ {
        self.map.iter().map(|(&s, &(e, v))| (s, e, v))
    }

    /// Extents held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Part of a data command: sectors and the stamp of the bio that carries their data.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub sector: u64,
    pub nr_sectors: u32,
    /// The bio's stamp (never 0: 0 is a sector nothing was written to).
    pub stamp: u64,
}

impl Piece {
    fn end(&self) -> u64 {
        self.sector + self.nr_sectors as u64
    }
}

/// A stamp and when it landed (the order of landings in the device), so that a flush
/// writing back an older copy never covers a newer one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Landed {
    stamp: u64,
    order: u64,
}

/// A command the device holds.
#[derive(Clone, Debug)]
struct Held {
    op: ReqOp,
    fua: bool,
    pieces: Vec<Piece>,
    /// For a flush: what the cache held when it arrived.
    covers: Vec<(u64, u64, Landed)>,
}

/// A broken device, for the crash oracle's own tests. Each applies from its `n`th
/// occurrence on (1 = every one).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MediaPlant {
    /// Flushes complete without writing the cache back: a flush completed before the
    /// writes it covers were durable.
    FlushEarly(u64),
    /// A finished write is reported finished but kept back, and reaches the cache only
    /// after the next flush has finished: a write reordered behind a later flush.
    ReorderPastFlush(u64),
}

/// Counts of what the media saw, for reports.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MediaStats {
    /// Writes (and write-zeroes, discards) that landed in the cache.
    pub cached: u64,
    /// Writes durable when they landed (FUA, or no cache).
    pub durable_writes: u64,
    /// Flushes that finished.
    pub flushes: u64,
    /// Data commands that ended without landing (errors, requeues).
    pub dropped: u64,
}

/// The device's storage: durable sectors, its volatile cache, and what is in flight.
#[derive(Clone, Debug)]
pub struct Media {
    write_cache: bool,
    /// The atomic write unit, in sectors (at least 1).
    unit: u64,
    durable: ExtentMap<Landed>,
    cache: ExtentMap<Landed>,
    /// Commands arrived and not finished, by command id (ordered, so a cut is a pure
    /// function of the run).
    held: BTreeMap<u64, Held>,
    /// Landings so far.
    order: u64,
    plant: Option<MediaPlant>,
    nth_flush: u64,
    nth_write: u64,
    /// Writes a [`MediaPlant::ReorderPastFlush`] keeps back.
    kept_back: Vec<Piece>,
    pub stats: MediaStats,
}

/// What a power cut left: each sector's stamp (sectors never written are absent).
pub type Content = ExtentMap<u64>;

impl Media {
    /// Storage with (`write_cache`) or without a volatile cache, written in atomic units of
    /// `unit_bytes` (the device's `physical_block_size`).
    pub fn new(write_cache: bool, unit_bytes: u32, plant: Option<MediaPlant>) -> Media {
        Media {
            write_cache,
            unit: (unit_bytes as u64 / 512).max(1),
            durable: ExtentMap::new(),
            cache: ExtentMap::new(),
            held: BTreeMap::new(),
            order: 0,
            plant,
            nth_flush: 0,
            nth_write: 0,
            kept_back: Vec::new(),
            stats: MediaStats::default(),
        }
    }

    /// Command `id` reached the device: `pieces` is its data for a write (empty for reads
    /// and flushes). A flush notes what the cache holds now: that is what it covers.
    pub fn arrive(&mut self, id: u64, op: ReqOp, fua: bool, pieces: Vec<Piece>) {
        let covers = if op == ReqOp::Flush {
            self.cache.iter().collect()
        } else {
            Vec::new()
        };
        self.held.insert(
            id,
            Held {
                op,
                fua,
                pieces,
                covers,
            },
        );
    }

    /// Command `id` finished, successfully (`ok`) or not (an error, or handed back for
    /// requeue): a write's data lands, a flush writes back what it covers.
    pub fn finish(&mut self, id: u64, ok: bool) {
        let Some(h) = self.held.remove(&id) else {
            return;
        };
        if !ok {
            if !h.pieces.is_empty() {
                self.stats.dropped += 1;
            }
            return;
        }
        match h.op {
            // No zoned model keeps media yet: zone commands change nothing here.
            ReqOp::Read
            | ReqOp::ZoneReset
            | ReqOp::ZoneResetAll
            | ReqOp::ZoneOpen
            | ReqOp::ZoneClose
            | ReqOp::ZoneFinish => {}
            ReqOp::Flush => {
                self.nth_flush += 1;
                self.stats.flushes += 1;
                let early =
                    matches!(self.plant, Some(MediaPlant::FlushEarly(n)) if self.nth_flush >= n);
                if !early {
                    for (s, e, l) in h.covers {
                        self.write_back(s, e, l);
                    }
                }
                // Writes kept back behind this flush reach the cache now.
                for p in std::mem::take(&mut self.kept_back) {
                    self.land(p, false);
                }
            }
            ReqOp::Write | ReqOp::WriteZeroes | ReqOp::Discard | ReqOp::ZoneAppend => {
                self.nth_write += 1;
                let keep = matches!(self.plant, Some(MediaPlant::ReorderPastFlush(n)) if self.nth_write >= n);
                for p in h.pieces {
                    if keep && !h.fua {
                        self.kept_back.push(p);
                    } else {
                        self.land(p, h.fua);
                    }
                }
            }
        }
    }

    /// A piece's data reaches the cache, or the medium (`fua`, or no cache).
    fn land(&mut self, p: Piece, fua: bool) {
        self.order += 1;
        let l = Landed {
            stamp: p.stamp,
            order: self.order,
        };
        if fua || !self.write_cache {
            self.stats.durable_writes += 1;
            self.durable.set(p.sector, p.end(), l);
            // The cache's older copy is stale now.
            self.cache.clear(p.sector, p.end());
        } else {
            self.stats.cached += 1;
            self.cache.set(p.sector, p.end(), l);
        }
    }

    /// A flush writes back a cached extent it covers, where nothing newer is durable.
    fn write_back(&mut self, s: u64, e: u64, l: Landed) {
        for (a, b, d) in self.durable.segments(s, e) {
            if d.is_none_or(|d| d.order < l.order) {
                self.durable.set(a, b, l);
            }
        }
    }

    /// Data commands in the device.
    pub fn in_flight(&self) -> usize {
        self.held.values().filter(|h| !h.pieces.is_empty()).count()
    }

    /// The power fails now: what the medium holds afterwards. Each atomic unit of the cache
    /// and of every write in flight survives or not, as `rng` draws.
    pub fn power_cut(&self, rng: &mut SimRng) -> Content {
        let mut out = Content::new();
        for (s, e, l) in self.durable.iter() {
            out.set(s, e, l.stamp);
        }
        let unit = self.unit;
        let mut maybe = |out: &mut Content, s: u64, e: u64, stamp: u64| {
            let mut a = s;
            while a < e {
                let b = ((a / unit + 1) * unit).min(e);
                if rng.below(2) == 1 {
                    out.set(a, b, stamp);
                }
                a = b;
            }
        };
        // The cache is newer than the medium wherever both hold a sector.
        for (s, e, l) in self.cache.iter() {
            maybe(&mut out, s, e, l.stamp);
        }
        for h in self.held.values() {
            for p in &h.pieces {
                maybe(&mut out, p.sector, p.end(), p.stamp);
            }
        }
        for p in &self.kept_back {
            maybe(&mut out, p.sector, p.end(), p.stamp);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(sector: u64, n: u32, stamp: u64) -> Piece {
        Piece {
            sector,
            nr_sectors: n,
            stamp,
        }
    }

    #[test]
    fn extents_split_and_overwrite() {
        let mut m = ExtentMap::new();
        m.set(0, 100, 1u64);
        m.set(40, 60, 2);
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![(0, 40, 1), (40, 60, 2), (60, 100, 1)]
        );
        m.clear(30, 70);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(0, 30, 1), (70, 100, 1)]);
        assert_eq!(
            m.segments(20, 80),
            vec![(20, 30, Some(1)), (30, 70, None), (70, 80, Some(1))]
        );
        assert_eq!(m.segments(200, 208), vec![(200, 208, None)]);
    }

    /// Every cut draws each unit again; over many cuts, what must survive always does and
    /// what may not sometimes does not.
    fn cuts(m: &Media) -> (bool, bool) {
        let (mut always, mut sometimes_lost) = (true, false);
        for seed in 0..64 {
            let c = m.power_cut(&mut SimRng::new(seed));
            let s = c.segments(0, 8);
            always &= s == vec![(0, 8, Some(7))];
            sometimes_lost |= c.segments(8, 16) != vec![(8, 16, Some(9))];
        }
        (always, sometimes_lost)
    }

    #[test]
    fn a_flush_makes_what_the_cache_held_durable_and_nothing_later() {
        let mut m = Media::new(true, 4096, None);
        m.arrive(1, ReqOp::Write, false, vec![piece(0, 8, 7)]);
        m.finish(1, true);
        m.arrive(2, ReqOp::Flush, false, Vec::new());
        // Lands after the flush arrived: not covered.
        m.arrive(3, ReqOp::Write, false, vec![piece(8, 8, 9)]);
        m.finish(3, true);
        m.finish(2, true);
        assert_eq!(cuts(&m), (true, true));
    }

    #[test]
    fn fua_is_durable_on_completion_and_errors_leave_nothing() {
        let mut m = Media::new(true, 512, None);
        m.arrive(1, ReqOp::Write, true, vec![piece(0, 8, 7)]);
        m.finish(1, true);
        m.arrive(2, ReqOp::Write, false, vec![piece(8, 8, 9)]);
        m.finish(2, true);
        assert_eq!(cuts(&m), (true, true));
        m.arrive(3, ReqOp::Write, true, vec![piece(0, 8, 11)]);
        m.finish(3, false);
        assert_eq!(
            m.power_cut(&mut SimRng::new(1)).segments(0, 8)[0].2,
            Some(7)
        );
    }

    #[test]
    fn a_flush_never_writes_back_an_older_copy_over_a_newer_durable_one() {
        let mut m = Media::new(true, 4096, None);
        m.arrive(1, ReqOp::Write, false, vec![piece(0, 8, 5)]);
        m.finish(1, true);
        m.arrive(2, ReqOp::Flush, false, Vec::new());
        m.arrive(3, ReqOp::Write, true, vec![piece(0, 8, 7)]);
        m.finish(3, true);
        m.finish(2, true);
        assert!(cuts(&m).0);
    }

    #[test]
    fn without_a_cache_every_finished_write_is_durable() {
        let mut m = Media::new(false, 4096, None);
        m.arrive(1, ReqOp::Write, false, vec![piece(0, 8, 7)]);
        m.finish(1, true);
        assert!(cuts(&m).0);
    }

    #[test]
    fn a_write_in_flight_is_torn_at_the_atomic_unit() {
        let mut m = Media::new(true, 4096, None);
        m.arrive(1, ReqOp::Write, true, vec![piece(0, 64, 7)]);
        let mut torn = false;
        for seed in 0..32 {
            let c = m.power_cut(&mut SimRng::new(seed));
            for (s, e, _) in c.iter() {
                assert!(s % 8 == 0 && e % 8 == 0, "a unit split at {s}..{e}");
            }
            let held: u64 = c.iter().map(|(s, e, _)| e - s).sum();
            torn |= held > 0 && held < 64;
        }
        assert!(torn, "no cut left a write in flight in part");
    }

    #[test]
    fn planted_bugs_break_the_rules() {
        let mut m = Media::new(true, 4096, Some(MediaPlant::FlushEarly(1)));
        m.arrive(1, ReqOp::Write, false, vec![piece(0, 8, 7)]);
        m.finish(1, true);
        m.arrive(2, ReqOp::Flush, false, Vec::new());
        m.finish(2, true);
        assert!(!cuts(&m).0);

        let mut m = Media::new(true, 4096, Some(MediaPlant::ReorderPastFlush(1)));
        m.arrive(1, ReqOp::Write, false, vec![piece(0, 8, 7)]);
        m.finish(1, true);
        m.arrive(2, ReqOp::Flush, false, Vec::new());
        m.finish(2, true);
        assert!(!cuts(&m).0);
    }
}
