//! What a trace says about its device: how long requests sat in the scheduler and in the
//! driver, and how the time divides between a device with requests on it, a device left idle
//! while requests wait to be dispatched (a scheduler plugging it, as BFQ does while it idles
//! for the queue in service), and nothing to do at all. btt reports the first two as I2D
//! and D2C; the division of time is what it does not give, and what tells a simulated twin
//! whose device is faster or slower than the kernel's from one whose scheduler differs.
//!
//! Requests are followed by start sector and direction, first in first out: an insert (`I`)
//! waits until an issue (`D`) of the same sector, which is in the driver until its
//! completion (`C`). A front merge (`F`) moves a waiting request's start to the bio's
//! sector; a requeue (`R`) puts an issued request back to wait. An issue with no insert
//! before it (a request dispatched directly, or an insert the trace missed) counts in the
//! driver but not in the scheduler's times. Flushes without data are followed as one
//! stream, in order. A waiting request that another absorbed (a request merge, which
//! blktrace records no event for) leaves the wait when a request covering its start sector
//! is issued; an insert in the same microsecond as an issue of its sector that came first
//! (two CPUs' events tied in a capture read as text) is taken as issued.

use crate::format::{ta, tc};
use crate::Record;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A request's identity while it waits or runs: write (or flush) or read, and start sector
/// (in that order, so that the requests an issued one covers are a range).
type Key = (bool, u64);

/// The key every flush without data shares: the kernel's tracepoints give a flush's issue
/// sector 0 and its completion -1.
const FLUSH: Key = (true, u64::MAX);

/// Requests by key, each key's in the order they came: the time each came.
type Queue = BTreeMap<Key, VecDeque<u64>>;

/// The time of the first request under `key`, taken out.
fn take(map: &mut Queue, key: Key) -> Option<u64> {
    let q = map.get_mut(&key)?;
    let t = q.pop_front();
    if q.is_empty() {
        map.remove(&key);
    }
    t
}

/// One device's figures, in the trace's time span (first event to last).
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct DeviceStats {
    /// `dev_t` as blktrace records it (major << 20 | minor).
    pub device: u32,
    pub span_ns: u64,
    /// Requests issued to the driver (`D`), and of them reads and writes.
    pub issued: u64,
    pub issued_reads: u64,
    pub issued_writes: u64,
    /// Mean size of an issued request that carries data, KiB.
    pub mean_kib: f64,
    /// Mean time from issue to completion (btt's D2C), microseconds: reads, writes, and
    /// flushes with FUA writes (a journal's commit records: what a cache flush costs).
    pub d2c_read_us: Option<f64>,
    pub d2c_write_us: Option<f64>,
    pub d2c_flush_fua_us: Option<f64>,
    /// Of the issued requests, flushes and FUA writes.
    pub issued_flush_fua: u64,
    /// Mean time from insert to issue (btt's I2D), microseconds.
    pub i2d_us: Option<f64>,
    /// Requests in the driver: time-weighted mean, and the most at once.
    pub mean_in_driver: f64,
    pub max_in_driver: u32,
    /// Shares of the span: some request in the driver; none in the driver while some
    /// inserted request waits; neither.
    pub busy: f64,
    pub waiting: f64,
    pub empty: f64,
    /// Whether the device holds completions back until later commands are done too: of
    /// the data requests still in the driver when another was issued at least
    /// [`HELD_STAGGER_NS`] after them, the share that completed less than
    /// [`HELD_WINDOW_NS`] apart from that one ([`held_share`]); `None` with fewer than
    /// [`HELD_MIN_PAIRS`] such pairs.
    pub held: Option<f64>,
    /// How many such pairs there were.
    pub held_pairs: u64,
}

/// A later command counts in [`held_share`] when issued at least this long after the
/// earlier one: longer than the completions one interrupt reports together (within a few
/// microseconds of each other) and than two commands issued back to back are apart.
pub const HELD_STAGGER_NS: u64 = 30_000;
/// The earlier command was held if it completed less than this apart from the later one
/// (before or after it): the completions one interrupt reports, a few microseconds apart.
pub const HELD_WINDOW_NS: u64 = 10_000;
/// Fewer pairs than this give no figure.
pub const HELD_MIN_PAIRS: u64 = 50;

/// Of `done` (each data request's issue and completion time, ns), taken in the order they
/// were issued: for each, the first request issued [`HELD_STAGGER_NS`] or more after it, if
/// that came while it was still in the driver and within the median request's time there
/// of it; the share of those pairs whose two requests completed less than
/// [`HELD_WINDOW_NS`] apart, and the number of pairs. A device that serves each command on
/// its own completes them apart (the earlier about the stagger sooner, or, where service
/// times vary, either first), a serial one about one command's time apart; one that reports
/// completions in batches once the last command in it is done (as this machine's virtio
/// disk does) completes both together. The median bounds the stagger so that only a request
/// still within its usual time counts: one held up past it (a loop device's worker waiting
/// for a CPU, then completing what waited one after another) says nothing of the device.
pub fn held_share(done: &mut [(u64, u64)]) -> (Option<f64>, u64) {
    let mut times: Vec<u64> = done.iter().map(|&(d, c)| c - d).collect();
    let median = match times.len() {
        0 => return (None, 0),
        n => *times.select_nth_unstable(n / 2).1,
    };
    done.sort_unstable();
    let (mut pairs, mut held) = (0u64, 0u64);
    let mut j = 0;
    for i in 0..done.len() {
        let (issued, completed) = done[i];
        j = j.max(i + 1);
        while j < done.len() && done[j].0 < issued + HELD_STAGGER_NS {
            j += 1;
        }
        let Some(&(later_issued, later_completed)) = done.get(j) else {
            break;
        };
        if later_issued >= completed || later_issued >= issued + median {
            continue;
        }
        pairs += 1;
        held += u64::from(completed.abs_diff(later_completed) < HELD_WINDOW_NS);
    }
    let share = (pairs >= HELD_MIN_PAIRS).then(|| held as f64 / pairs as f64);
    (share, pairs)
}

#[derive(Default)]
struct Follow {
    waiting: Queue,
    in_driver: Queue,
    // The last issue of each key with no insert before it: its time.
    uninserted: HashMap<Key, u64>,
    n_waiting: u64,
    n_driver: u32,
    first: Option<u64>,
    last: u64,
    // Time spent in each state, and the in-driver count integrated over time.
    busy_ns: u64,
    waiting_ns: u64,
    empty_ns: u64,
    driver_area: u128,
    max_driver: u32,
    issued: [u64; 2],
    data_bytes: u64,
    data_issued: u64,
    d2c: [(u64, u64); 3],
    flush_fua: u64,
    i2d: (u64, u64),
    // Each completed data request's issue and completion time.
    done: Vec<(u64, u64)>,
}

impl Follow {
    fn advance(&mut self, t: u64) {
        let Some(first) = self.first else {
            self.first = Some(t);
            self.last = t;
            return;
        };
        let t = t.max(first).max(self.last);
        let dt = t - self.last;
        if self.n_driver > 0 {
            self.busy_ns += dt;
        } else if self.n_waiting > 0 {
            self.waiting_ns += dt;
        } else {
            self.empty_ns += dt;
        }
        self.driver_area += u128::from(dt) * u128::from(self.n_driver);
        self.last = t;
    }

    fn wait(&mut self, key: Key, t: u64) {
        self.waiting.entry(key).or_default().push_back(t);
        self.n_waiting += 1;
    }

    fn take_waiting(&mut self, key: Key) -> Option<u64> {
        let t = take(&mut self.waiting, key);
        self.n_waiting -= u64::from(t.is_some());
        t
    }

    /// Requests waiting that start inside `sectors` after `key`'s: merged into it.
    fn absorbed(&mut self, (write, sector): Key, sectors: u64) {
        let inside: Vec<_> = self
            .waiting
            .range((write, sector + 1)..(write, sector + sectors))
            .map(|(k, q)| (*k, q.len() as u64))
            .collect();
        for (k, n) in inside {
            self.waiting.remove(&k);
            self.n_waiting -= n;
        }
    }

    fn event(&mut self, r: &Record) {
        if r.is_notify() {
            return;
        }
        let what = r.what();
        if !matches!(
            what,
            ta::INSERT | ta::ISSUE | ta::COMPLETE | ta::REQUEUE | ta::FRONTMERGE
        ) {
            return;
        }
        self.advance(r.time);
        let write = r.has(tc::WRITE) || r.has(tc::FLUSH);
        let flush = r.bytes == 0 && r.has(tc::FLUSH);
        let key = if flush { FLUSH } else { (write, r.sector) };
        let durable = flush || r.has(tc::FUA);
        let dir = if durable { 2 } else { usize::from(write) };
        match what {
            ta::INSERT => {
                // An insert stamped with the same microsecond as an issue of its request
                // that came first in the merged order (the kernel's tracepoints, read as
                // text, have microseconds; two CPUs' events tie) has already been issued.
                let issued = self.uninserted.get(&key);
                if issued.is_some_and(|t| r.time.abs_diff(*t) <= 1_000) {
                    self.uninserted.remove(&key);
                } else {
                    self.wait(key, r.time);
                }
            }
            ta::FRONTMERGE => {
                // The bio goes in front of a waiting request that started right after it.
                let old = (write, r.sector + u64::from(r.bytes >> 9));
                if let Some(t) = self.take_waiting(old) {
                    self.wait(key, t);
                }
            }
            ta::ISSUE => {
                if let Some(t) = self.take_waiting(key) {
                    self.i2d.0 += r.time.saturating_sub(t);
                    self.i2d.1 += 1;
                } else {
                    // Only the latest matters: an insert ties with an issue or none.
                    self.uninserted.insert(key, r.time);
                }
                if !flush {
                    self.absorbed(key, u64::from(r.bytes >> 9));
                }
                self.in_driver.entry(key).or_default().push_back(r.time);
                self.n_driver += 1;
                self.max_driver = self.max_driver.max(self.n_driver);
                self.issued[usize::from(write)] += 1;
                self.flush_fua += u64::from(durable);
                if r.bytes > 0 {
                    self.data_bytes += u64::from(r.bytes);
                    self.data_issued += 1;
                }
            }
            ta::COMPLETE => {
                if let Some(t) = take(&mut self.in_driver, key) {
                    self.n_driver -= 1;
                    self.d2c[dir].0 += r.time.saturating_sub(t);
                    self.d2c[dir].1 += 1;
                    if !flush {
                        self.done.push((t, r.time.max(t)));
                    }
                }
            }
            ta::REQUEUE if take(&mut self.in_driver, key).is_some() => {
                self.n_driver -= 1;
                self.wait(key, r.time);
            }
            _ => {}
        }
    }

    fn finish(mut self, device: u32) -> DeviceStats {
        let (held, held_pairs) = held_share(&mut self.done);
        let span = self.last - self.first.unwrap_or(self.last);
        let per_ns = |x: f64| if span == 0 { 0.0 } else { x / span as f64 };
        let mean_us = |(sum, n): (u64, u64)| (n > 0).then(|| sum as f64 / n as f64 / 1e3);
        DeviceStats {
            device,
            span_ns: span,
            issued: self.issued[0] + self.issued[1],
            issued_reads: self.issued[0],
            issued_writes: self.issued[1],
            mean_kib: if self.data_issued == 0 {
                0.0
            } else {
                self.data_bytes as f64 / self.data_issued as f64 / 1024.0
            },
            d2c_read_us: mean_us(self.d2c[0]),
            d2c_write_us: mean_us(self.d2c[1]),
            d2c_flush_fua_us: mean_us(self.d2c[2]),
            issued_flush_fua: self.flush_fua,
            i2d_us: mean_us(self.i2d),
            mean_in_driver: per_ns(self.driver_area as f64),
            max_in_driver: self.max_driver,
            busy: per_ns(self.busy_ns as f64),
            waiting: per_ns(self.waiting_ns as f64),
            empty: per_ns(self.empty_ns as f64),
            held,
            held_pairs,
        }
    }
}

/// The figures of each device in `records` (in time order, as [`crate::TraceSet`] merges
/// them), by device number.
pub fn device_stats(records: &[Record]) -> Vec<DeviceStats> {
    let mut per: HashMap<u32, Follow> = HashMap::new();
    for r in records {
        per.entry(r.device).or_default().event(r);
    }
    let mut out: Vec<DeviceStats> = per
        .into_iter()
        .filter(|(_, f)| f.first.is_some())
        .map(|(d, f)| f.finish(d))
        .collect();
    out.sort_by_key(|s| s.device);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(time_us: u64, what: u32, sector: u64, kib: u32, write: bool) -> Record {
        let dir = if write { tc::WRITE } else { tc::READ };
        Record {
            time: time_us * 1000,
            sector,
            bytes: kib * 1024,
            action: what | tc::act(dir),
            device: 7 << 20,
            ..Record::empty()
        }
    }

    /// `n` pairs of 4 KiB reads, the second issued 40 us after the first; each pair's
    /// completions at the times `done(first_issue)` gives, 1 ms apart.
    fn pairs(n: u64, done: impl Fn(u64) -> (u64, u64)) -> Vec<Record> {
        let mut t = Vec::new();
        for k in 0..n {
            let at = k * 1000;
            let (a, b) = done(at);
            t.push(rec(at, ta::ISSUE, 8 * (2 * k), 4, false));
            t.push(rec(at + 40, ta::ISSUE, 8 * (2 * k + 1), 4, false));
            t.push(rec(a, ta::COMPLETE, 8 * (2 * k), 4, false));
            t.push(rec(b, ta::COMPLETE, 8 * (2 * k + 1), 4, false));
        }
        t.sort_by_key(|r| r.time);
        t
    }

    /// Completion times for [`pairs`]: `first` (after each pair's first issue, us) for
    /// every `n`th pair, `rest` for the others.
    fn every(n: u64, first: (u64, u64), rest: (u64, u64)) -> impl Fn(u64) -> (u64, u64) {
        move |at| {
            let (a, b) = if (at / 1000) % n == 0 { first } else { rest };
            (at + a, at + b)
        }
    }

    #[test]
    fn held_completions_are_told_from_commands_served_on_their_own() {
        // Each served in 60 us: the first completes 40 us before the second.
        let own = device_stats(&pairs(60, |at| (at + 60, at + 100)))[0].clone();
        assert_eq!((own.held, own.held_pairs), (Some(0.0), 60));
        // The first held until the second is done: both at its completion, 3 us apart.
        let held = device_stats(&pairs(60, |at| (at + 97, at + 100)))[0].clone();
        assert_eq!((held.held, held.held_pairs), (Some(1.0), 60));
        // Half of each.
        let half = device_stats(&pairs(60, every(2, (97, 100), (60, 100))))[0].clone();
        assert_eq!(half.held, Some(0.5));
        // A first that completes before the second is issued makes no pair; too few pairs
        // give no figure.
        let apart = device_stats(&pairs(60, |at| (at + 30, at + 100)))[0].clone();
        assert_eq!((apart.held, apart.held_pairs), (None, 0));
        let few = device_stats(&pairs(HELD_MIN_PAIRS - 1, |at| (at + 97, at + 100)))[0].clone();
        assert_eq!(few.held, None);
        // Most served in 10 us, a few held up 50 us and completed with a later one: the
        // later one came past the usual time, so no pair counts.
        let stalled = device_stats(&pairs(60, every(5, (47, 50), (10, 50))))[0].clone();
        assert_eq!((stalled.held, stalled.held_pairs), (None, 0));
    }

    #[test]
    fn time_divides_between_busy_waiting_and_empty() {
        // 0-10 us: a read waits in the scheduler; 10-40: it is on the device; 40-100:
        // nothing; 100-150: a write on the device, another queued behind it from 120 that
        // goes to the device at 150 and completes at 200 (requeued once at 160 and issued
        // again at 170).
        let t = [
            rec(0, ta::INSERT, 8, 4, false),
            rec(10, ta::ISSUE, 8, 4, false),
            rec(40, ta::COMPLETE, 8, 4, false),
            rec(100, ta::ISSUE, 64, 16, true),
            rec(120, ta::INSERT, 128, 4, true),
            rec(150, ta::COMPLETE, 64, 16, true),
            rec(150, ta::ISSUE, 128, 4, true),
            rec(160, ta::REQUEUE, 128, 4, true),
            rec(170, ta::ISSUE, 128, 4, true),
            rec(200, ta::COMPLETE, 128, 4, true),
        ];
        let s = &device_stats(&t)[0];
        assert_eq!(s.span_ns, 200_000);
        assert_eq!((s.issued, s.issued_reads, s.issued_writes), (4, 1, 3));
        // busy: 10-40, 100-160, 170-200 = 120 us; waiting: 0-10, 160-170 = 20; empty 60.
        assert!((s.busy - 0.6).abs() < 1e-9, "{s:?}");
        assert!((s.waiting - 0.1).abs() < 1e-9, "{s:?}");
        assert!((s.empty - 0.3).abs() < 1e-9, "{s:?}");
        assert_eq!(s.d2c_read_us, Some(30.0));
        // The 16 KiB write 50 us, the 4 KiB one 30 us after its second issue.
        assert_eq!(s.d2c_write_us, Some(40.0));
        // The read waited 10 us, the second write 30 and then 10 after its requeue.
        assert_eq!(s.i2d_us, Some(50.0 / 3.0));
        assert_eq!(s.max_in_driver, 1);
        assert!((s.mean_in_driver - 0.6).abs() < 1e-9);
        assert!((s.mean_kib - 7.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn flushes_and_fua_writes_are_timed_apart_from_plain_writes() {
        let mut fua = rec(10, ta::ISSUE, 64, 4, true);
        fua.action |= tc::act(tc::FUA);
        let mut fua_done = rec(110, ta::COMPLETE, 64, 4, true);
        fua_done.action |= tc::act(tc::FUA);
        // The kernel's tracepoints give a flush without data sector 0 at issue, -1 at
        // completion.
        let flush = |t, sector| Record {
            time: t * 1000,
            sector,
            action: t_what(t) | tc::act(tc::FLUSH),
            device: 7 << 20,
            ..Record::empty()
        };
        fn t_what(t: u64) -> u32 {
            if t < 100 {
                ta::ISSUE
            } else {
                ta::COMPLETE
            }
        }
        let t = [
            rec(0, ta::ISSUE, 8, 4, true),
            flush(5, 0),
            fua,
            rec(20, ta::COMPLETE, 8, 4, true),
            flush(305, u64::MAX),
            fua_done,
        ];
        let s = &device_stats(&t)[0];
        assert_eq!(s.d2c_write_us, Some(20.0));
        // The flush 300 us, the FUA write 100.
        assert_eq!(s.d2c_flush_fua_us, Some(200.0));
        assert_eq!((s.issued, s.issued_writes, s.issued_flush_fua), (3, 3, 2));
    }

    #[test]
    fn a_waiting_request_merged_into_another_stops_waiting_when_that_one_is_issued() {
        // Two adjacent writes wait; the first absorbs the second (no event) and goes to
        // the device 8 KiB long; afterwards the device is empty, not waiting.
        let t = [
            rec(0, ta::INSERT, 8, 4, true),
            rec(1, ta::INSERT, 16, 4, true),
            rec(10, ta::ISSUE, 8, 8, true),
            rec(20, ta::COMPLETE, 8, 8, true),
            rec(100, ta::INSERT, 200, 4, false),
        ];
        let s = &device_stats(&t)[0];
        assert!((s.waiting - 0.1).abs() < 1e-9, "{s:?}");
        assert!((s.empty - 0.8).abs() < 1e-9, "{s:?}");
        assert_eq!(s.i2d_us, Some(10.0));
    }

    #[test]
    fn an_insert_tied_with_its_issue_on_another_cpu_does_not_wait() {
        let t = [
            rec(0, ta::ISSUE, 8, 4, true),
            rec(0, ta::INSERT, 8, 4, true),
            rec(10, ta::COMPLETE, 8, 4, true),
            rec(100, ta::INSERT, 64, 4, false),
        ];
        let s = &device_stats(&t)[0];
        assert_eq!(s.waiting, 0.0, "{s:?}");
        assert!((s.empty - 0.9).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn a_front_merge_moves_a_waiting_request_to_the_bios_sector() {
        let t = [
            rec(0, ta::INSERT, 16, 4, true),
            rec(5, ta::FRONTMERGE, 8, 4, true),
            rec(20, ta::ISSUE, 8, 8, true),
            rec(30, ta::COMPLETE, 8, 8, true),
        ];
        let s = &device_stats(&t)[0];
        assert_eq!(s.i2d_us, Some(20.0));
        assert_eq!(s.d2c_write_us, Some(10.0));
        assert!((s.waiting - 20.0 / 30.0).abs() < 1e-9, "{s:?}");
    }
}
