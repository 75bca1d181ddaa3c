//! `mqblk sim --crash`: power cuts, and an oracle that says what must have survived one.
//!
//! A run is a fuzz configuration ([`crate::fuzz`]) whose device keeps its storage
//! ([`mqblk_models::media`]: a volatile write cache where the model has one, durable
//! sectors, writes in flight), cut off at an instant drawn from the seed: the moment the
//! device finishes its `cut_after`th command, or the run's end if that comes first. What
//! the medium holds afterwards is checked against what the submitters were told, by the
//! rule CrashMonkey and dm-log-writes check file systems with, applied to the block layer:
//!
//! - every write that completed before a flush was submitted, where that flush completed,
//!   is there (Documentation/block/writeback_cache_control.rst: `REQ_PREFLUSH` "guarantees
//!   that previously completed write requests are on non-volatile storage" before the
//!   flagged bio starts);
//! - every completed FUA write is there (the same document: a `REQ_FUA` bio's completion
//!   is signalled only once its data is committed to non-volatile storage);
//! - nothing is there that was never written, and no sector holds a write older than one
//!   it must hold (a write that completed before the one it must hold was submitted).
//!
//! "There" allows for later writes: a sector may hold any write to it not ordered before
//! the one it must hold (submitted before that one completed, or after). Sectors a discard
//! touched are not judged (their content after a discard is the device's choice).
//!
//! Order is the submitters': a write "completed before" a flush if its completion reached
//! its job before the flush was submitted, whichever job submitted either.

use crate::driver::Plant;
use crate::engine::{Sim, SimError};
use crate::fuzz::{self, FuzzCase};
use crate::workload::{FioSource, Limit, SimJob};
use crate::SimRng;
use mqblk_core::{ReqFlags, ReqOp};
use mqblk_device::DriverConfig;
use mqblk_models::media::Content;
use mqblk_workload::{JobSpec, RwMode};
use std::collections::HashMap;

/// The bit every stamp carries, so that no bio's stamp is 0 (a sector never written).
const STAMP_BIT: u64 = 1 << 63;

/// The stamp a bio's data carries to the device: its submitter's cookie, never 0.
pub fn stamp(private: u64) -> u64 {
    private | STAMP_BIT
}

/// Where and when a power cut falls.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Crash {
    /// Cut the power when the device has finished this many commands (the run's end, if
    /// it finishes fewer).
    pub cut_after: u64,
    /// Draws which atomic units of the cache and of the writes in flight survive.
    pub seed: u64,
}

/// One data write as its submitter saw it.
#[derive(Clone, Debug)]
struct WriteRec {
    sector: u64,
    end: u64,
    /// Order of its submission and, if it succeeded, of its completion.
    submitted: u64,
    completed: Option<u64>,
    fua: bool,
    discard: bool,
    job: usize,
    /// The job's I/O number.
    index: u64,
}

/// A flush (an empty one, or a write's `REQ_PREFLUSH`) as its submitter saw it.
#[derive(Clone, Debug)]
struct FlushRec {
    submitted: u64,
    completed: Option<u64>,
    job: usize,
    index: u64,
}

/// What the submitters were told, in the order they were told it.
#[derive(Default, Debug)]
pub struct Oracle {
    order: u64,
    writes: HashMap<u64, WriteRec>,
    flushes: HashMap<u64, FlushRec>,
}

impl Oracle {
    /// Job `job` submitted its I/O number `index` as a bio of `op` with `flags` and stamp
    /// `stamp` over `nr_sectors` from `sector`.
    #[allow(clippy::too_many_arguments)]
    pub fn submitted(
        &mut self,
        stamp: u64,
        op: ReqOp,
        flags: ReqFlags,
        sector: u64,
        nr_sectors: u32,
        job: usize,
        index: u64,
    ) {
        self.order += 1;
        let order = self.order;
        if op == ReqOp::Flush || flags.contains(ReqFlags::PREFLUSH) {
            self.flushes.insert(
                stamp,
                FlushRec {
                    submitted: order,
                    completed: None,
                    job,
                    index,
                },
            );
        }
        if op.is_write() && op != ReqOp::Flush && nr_sectors > 0 {
            self.writes.insert(
                stamp,
                WriteRec {
                    sector,
                    end: sector + nr_sectors as u64,
                    submitted: order,
                    completed: None,
                    fua: flags.contains(ReqFlags::FUA),
                    discard: op == ReqOp::Discard,
                    job,
                    index,
                },
            );
        }
    }

    /// The bio with `stamp` completed to its submitter, successfully (`ok`) or not.
    pub fn completed(&mut self, stamp: u64, ok: bool) {
        self.order += 1;
        if !ok {
            return;
        }
        let order = self.order;
        if let Some(w) = self.writes.get_mut(&stamp) {
            w.completed = Some(order);
        }
        if let Some(f) = self.flushes.get_mut(&stamp) {
            f.completed = Some(order);
        }
    }

    /// Writes that completed successfully.
    pub fn writes_completed(&self) -> usize {
        self.writes
            .values()
            .filter(|w| w.completed.is_some())
            .count()
    }

    /// Flushes that completed successfully.
    pub fn flushes_completed(&self) -> usize {
        self.flushes
            .values()
            .filter(|f| f.completed.is_some())
            .count()
    }

    /// The completed flush submitted last: every write completed before its submission
    /// must be durable.
    fn last_flush(&self) -> Option<&FlushRec> {
        self.flushes
            .values()
            .filter(|f| f.completed.is_some())
            .max_by_key(|f| f.submitted)
    }

    /// Writes that must have survived the cut, in submission order: the FUA ones, and those
    /// completed before `fence` (the last completed flush) was submitted.
    fn required(&self, fence: Option<&FlushRec>) -> Vec<(u64, &WriteRec)> {
        let fence = fence.map_or(0, |f| f.submitted);
        let mut req: Vec<(u64, &WriteRec)> = self
            .writes
            .iter()
            .filter(|(_, w)| !w.discard && w.completed.is_some_and(|c| w.fua || c < fence))
            .map(|(&s, w)| (s, w))
            .collect();
        req.sort_by_key(|(_, w)| w.submitted);
        req
    }

    fn name(&self, stamp: u64) -> String {
        match self.writes.get(&stamp) {
            Some(w) => format!(
                "job{}'s write #{} (sectors {}..{})",
                w.job, w.index, w.sector, w.end
            ),
            None => format!("stamp {stamp:#x}"),
        }
    }

    /// Checks what the medium holds after the cut: how many writes had to survive it, and
    /// each violation found, in sector order.
    pub fn check(&self, content: &Content) -> Verdict {
        let fence = self.last_flush();
        let required = self.required(fence);
        let mut bad = Vec::new();
        let mut trimmed = Content::new();
        for w in self.writes.values().filter(|w| w.discard) {
            trimmed.set(w.sector, w.end, 1);
        }
        let untrimmed = |s: u64, e: u64| -> Vec<(u64, u64)> {
            trimmed
                .segments(s, e)
                .into_iter()
                .filter(|(_, _, t)| t.is_none())
                .map(|(a, b, _)| (a, b))
                .collect()
        };
        // Nothing that was never written.
        for (s, e, c) in content.iter() {
            match self.writes.get(&c) {
                None => bad.push(format!(
                    "sectors {s}..{e} hold data no bio carried (stamp {c:#x})"
                )),
                Some(w) if s < w.sector || e > w.end => bad.push(format!(
                    "sectors {s}..{e} hold the data of {}, which was not written there",
                    self.name(c)
                )),
                Some(_) => {}
            }
        }
        // What must be there: per sector, the last required write submitted.
        let mut must = Content::new();
        for &(stamp, w) in &required {
            must.set(w.sector, w.end, stamp);
        }
        // Each required write not there, once: where it is first missing, and how much.
        let mut lost: HashMap<u64, (u64, u64, u64, String)> = HashMap::new();
        for (s, e, r) in must.iter() {
            let rw = &self.writes[&r];
            for (a, b) in untrimmed(s, e) {
                for (x, y, c) in content.segments(a, b) {
                    let held = match c {
                        None => "nothing".to_string(),
                        Some(c) if c == r => continue,
                        Some(c) => match self.writes.get(&c) {
                            // Written and completed before the required write was
                            // submitted: older than what must be there.
                            Some(o) if o.completed.is_some_and(|oc| oc < rw.submitted) => {
                                format!("the older {}", self.name(c))
                            }
                            _ => continue,
                        },
                    };
                    let e = lost.entry(r).or_insert((x, y, 0, held));
                    e.2 += y - x;
                }
            }
        }
        let mut lost: Vec<(u64, (u64, u64, u64, String))> = lost.into_iter().collect();
        lost.sort_by_key(|(r, (x, ..))| (*x, *r));
        for (r, (x, y, n, held)) in lost {
            let rw = &self.writes[&r];
            let why = if rw.fua {
                "a FUA write that completed".to_string()
            } else {
                match fence {
                    Some(f) => format!(
                        "completed before job{}'s flush #{} was submitted, and that flush completed",
                        f.job, f.index
                    ),
                    None => "completed".into(),
                }
            };
            bad.push(format!(
                "{} ({why}) is lost from {n} of its sectors: sectors {x}..{y} hold {held}",
                self.name(r)
            ));
        }
        Verdict {
            required: required.len(),
            violations: bad,
        }
    }
}

/// The oracle's judgement of one cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Completed writes that had to survive it.
    pub required: usize,
    /// Each broken promise, in sector order.
    pub violations: Vec<String>,
}

/// What a power cut left, and what the oracle made of it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CrashReport {
    /// When the power failed (virtual time, ns).
    pub cut_at_ns: u64,
    /// The run had not finished (false: it ended first, and was cut at its end).
    pub mid_run: bool,
    pub writes_completed: usize,
    /// Of those, the ones that had to survive (FUA, or covered by a completed flush).
    pub writes_required: usize,
    pub flushes_completed: usize,
    /// Data commands the device held when the power failed.
    pub in_flight: usize,
    /// Extents of the medium after the cut.
    pub extents: usize,
    /// What the media saw (cached, durable on landing, flushes, dropped).
    pub media: mqblk_models::media::MediaStats,
    /// Each broken promise, in sector order.
    pub violations: Vec<String>,
}

/// The crash case for `seed`: the fuzz configuration of the same seed (the scheduler
/// forced to `scheduler` if given; never a zoned one, [`fuzz::case_unzoned`]), its device
/// keeping its storage, a write cache drawn
/// on for the models where it is a parameter, and a cut drawn from the seed.
pub fn case(
    seed: u64,
    plant: Option<Plant>,
    scheduler: Option<&str>,
) -> Result<FuzzCase, SimError> {
    let mut c = fuzz::case_unzoned(seed, plant, scheduler)?;
    let mut rng = SimRng::new(seed ^ 0xc7a5);
    let mut extra = Vec::new();
    if let DriverConfig::Model(m) = &mut c.cfg.device.driver {
        // A cache where the model has one to switch on (the others have theirs fixed, or
        // drawn by the fuzz case already): null_blk's `cache_size`, the eMMC's cache.
        let param = match m.spec.model.as_str() {
            "null" => Some(("cache_size", "16")),
            "emmc" => Some(("cache", "1")),
            _ => None,
        };
        if let Some((k, v)) = param.filter(|_| rng.below(4) != 0) {
            m.spec.params.push((k.to_string(), v.to_string()));
            extra.push(format!("{k}={v}"));
        }
    }
    // Half the cases get a writer with O_DSYNC (fio's `sync=dsync`: every write FUA) in
    // large blocks, so that FUA writes are split, merged and requeued too.
    if rng.below(2) == 0 {
        let bs = *rng.pick(&[4096u32, 65536, 262144]);
        let rw = *rng.pick(&[RwMode::Write, RwMode::RandWrite]);
        let spec = JobSpec {
            sync_writes: true,
            ..FioSource::spec(rw, 0, bs, 0, 64 << 20, seed ^ 0xd5, 0)
        };
        let cpu = rng.below(c.cfg.nr_cpus as u64) as u16;
        let issuer = c.jobs.len() as u32 + 1;
        let ios = rng.range(50, 400);
        let limit = Limit {
            ios: Some(ios),
            ..Limit::default()
        };
        let depth = *rng.pick(&[1u32, 4, 32]);
        c.jobs.push(SimJob::new(
            "dsync".into(),
            cpu,
            depth,
            issuer,
            limit,
            Box::new(FioSource::of_spec(spec)),
            "fio-dsync",
        ));
        extra.push(format!("dsync-writer(bs={bs},{rw:?},iodepth={depth})"));
    }
    let planned: u64 = c
        .jobs
        .iter()
        .map(|j| j.limit.ios.unwrap_or(200))
        .sum::<u64>()
        .max(1);
    let cut_after = rng.range(1, planned);
    c.cfg.crash = Some(Crash {
        cut_after,
        seed: rng.below(u64::MAX),
    });
    // The queue's invariants are the fuzzer's to check after every event; a crash run
    // checks them at the cut, and its durability there.
    c.cfg.check_every = 0;
    c.summary = format!(
        "{}{} cut_after={cut_after}",
        c.summary,
        if extra.is_empty() {
            String::new()
        } else {
            format!(" +{}", extra.join(","))
        }
    );
    Ok(c)
}

/// The outcome of one crash run.
pub struct CrashOutcome {
    pub seed: u64,
    pub summary: String,
    /// The report, or why the run itself failed (an invariant, a stall, a panic).
    pub result: Result<CrashReport, String>,
    /// The state dump at a failure.
    pub dump: String,
}

/// Runs the crash case for `seed`; a panic counts as the run's failure.
pub fn run_one(seed: u64, plant: Option<Plant>, scheduler: Option<&str>) -> CrashOutcome {
    let (summary, result, dump) = fuzz::guarded(|| case(seed, plant, scheduler), Sim::run_to_cut);
    CrashOutcome {
        seed,
        summary,
        result,
        dump,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(ext: &[(u64, u64, u64)]) -> Content {
        let mut c = Content::new();
        for &(s, e, v) in ext {
            c.set(s, e, v);
        }
        c
    }

    /// A write, a flush after its completion, the flush's completion.
    fn flushed(o: &mut Oracle) {
        o.submitted(stamp(1), ReqOp::Write, ReqFlags::empty(), 0, 8, 0, 0);
        o.completed(stamp(1), true);
        o.submitted(stamp(2), ReqOp::Flush, ReqFlags::empty(), 0, 0, 0, 1);
        o.completed(stamp(2), true);
    }

    #[test]
    fn a_flushed_write_must_survive() {
        let mut o = Oracle::default();
        flushed(&mut o);
        assert!(o.check(&content(&[(0, 8, stamp(1))])).violations.is_empty());
        assert_eq!(o.check(&content(&[])).required, 1);
        let v = o.check(&content(&[])).violations;
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("lost from 8 of its sectors: sectors 0..8 hold nothing")
                && v[0].contains("job0's flush #1"),
            "{v:?}"
        );
    }

    #[test]
    fn a_write_completed_after_the_flush_was_submitted_may_be_lost() {
        let mut o = Oracle::default();
        o.submitted(stamp(1), ReqOp::Write, ReqFlags::empty(), 0, 8, 0, 0);
        o.submitted(stamp(2), ReqOp::Flush, ReqFlags::empty(), 0, 0, 1, 0);
        o.completed(stamp(1), true);
        o.completed(stamp(2), true);
        assert!(o.check(&content(&[])).violations.is_empty());
    }

    #[test]
    fn fua_must_survive_and_an_unflushed_write_need_not() {
        let mut o = Oracle::default();
        o.submitted(stamp(1), ReqOp::Write, ReqFlags::FUA, 0, 8, 0, 0);
        o.submitted(stamp(3), ReqOp::Write, ReqFlags::empty(), 8, 8, 0, 1);
        o.completed(stamp(1), true);
        o.completed(stamp(3), true);
        assert!(o.check(&content(&[(0, 8, stamp(1))])).violations.is_empty());
        assert_eq!(o.check(&content(&[(8, 16, stamp(3))])).violations.len(), 1);
    }

    #[test]
    fn later_writes_may_stand_in_but_older_ones_and_strangers_may_not() {
        let mut o = Oracle::default();
        o.submitted(stamp(9), ReqOp::Write, ReqFlags::empty(), 0, 8, 0, 0);
        o.completed(stamp(9), true);
        flushed(&mut o);
        // Written after the required one, never completed: allowed.
        o.submitted(stamp(5), ReqOp::Write, ReqFlags::empty(), 0, 8, 1, 0);
        assert!(o.check(&content(&[(0, 8, stamp(5))])).violations.is_empty());
        // The write before the required one: stale.
        let v = o.check(&content(&[(0, 8, stamp(9))])).violations;
        assert!(
            v.len() == 1 && v[0].contains("the older job0's write"),
            "{v:?}"
        );
        // Data nobody wrote, and a write's data at another place.
        assert!(!o
            .check(&content(&[(0, 8, stamp(1)), (64, 72, stamp(77))]))
            .violations
            .is_empty());
        assert!(!o
            .check(&content(&[(0, 8, stamp(1)), (64, 72, stamp(5))]))
            .violations
            .is_empty());
    }

    #[test]
    fn failed_writes_and_failed_flushes_promise_nothing() {
        let mut o = Oracle::default();
        o.submitted(stamp(1), ReqOp::Write, ReqFlags::FUA, 0, 8, 0, 0);
        o.completed(stamp(1), false);
        o.submitted(stamp(2), ReqOp::Write, ReqFlags::empty(), 8, 8, 0, 1);
        o.completed(stamp(2), true);
        o.submitted(stamp(3), ReqOp::Flush, ReqFlags::empty(), 0, 0, 0, 2);
        o.completed(stamp(3), false);
        assert!(o.check(&content(&[])).violations.is_empty());
    }
}
