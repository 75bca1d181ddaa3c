//! Fault storms: thousands of bios through several submitters and hardware queues (with
//! `none` and with a FIFO scheduler) while the driver answers Resource, DevResource, I/O
//! errors, requeues and loses requests (timeouts) at seeded random points, and hardware queues
//! are stopped and started. Every bio must come back exactly once, to its own submitter, with
//! the status the driver (or the timeout handler) gave it; the queue must end empty and whole.

mod common;

use common::{bios_in_queue, Chaos, Mode, Rng, TestDriver};
use mqblk_core::queue::DEFAULT_TIMEOUT;
use mqblk_core::tag::MapQueues;
use mqblk_core::{
    Bio, BlkStatus, CtxIdx, ElevatorType, IoPrio, IoPrioClass, Nanos, QueueConfig, ReqFlags, ReqOp,
    RequestQueue, Submit, Submitter, TagSet, TagSetConfig, TagSetFlags,
};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn chaos(seed: u64) -> Chaos {
    Chaos {
        rng: Rng::new(seed),
        resource: 40,
        dev_resource: 30,
        io_err: 20,
        requeue: 30,
        timeout: 8,
        hold: 600,
    }
}

/// Makes random bios for one submitter: mostly sequential runs (so plugs and software queues
/// merge), some random, a few flushes, FUA and odd priorities.
struct BioGen {
    rng: Rng,
    base: u64,
    next_block: u64,
    tag: u64,
    count: u64,
}

impl BioGen {
    fn new(seed: u64, who: u64) -> BioGen {
        BioGen {
            rng: Rng::new(seed ^ ((who + 1) * 0x9e37)),
            base: who * 100_000,
            next_block: 0,
            tag: who << 40,
            count: 0,
        }
    }

    fn next(&mut self) -> Bio {
        let r = &mut self.rng;
        self.count += 1;
        let private = self.tag | self.count;
        let kind = r.below(100);
        if kind < 3 {
            return Bio::new(ReqOp::Flush, 0, 0).with_private(private);
        }
        let op = match kind {
            3..=7 => ReqOp::Discard,
            8..=49 => ReqOp::Read,
            _ => ReqOp::Write,
        };
        if !r.chance(600) {
            self.next_block = r.below(4096);
        }
        let blocks = if r.chance(20) { 32 } else { 1 + r.below(8) };
        let sector = (self.base + self.next_block) * 8;
        self.next_block += blocks;
        let mut bio = Bio::new(op, sector, blocks as u32 * 8).with_private(private);
        if op == ReqOp::Write {
            match r.below(40) {
                0 => bio = bio.with_flags(ReqFlags::FUA),
                1 => bio = bio.with_flags(ReqFlags::PREFLUSH),
                2 => bio = bio.with_flags(ReqFlags::NOMERGE),
                _ => {}
            }
        }
        if r.chance(30) {
            bio = bio.with_ioprio(IoPrio::new(IoPrioClass::Rt, 0));
        }
        bio
    }
}

/// Book-keeping for the bios of one or more submitters.
#[derive(Default)]
struct Ledger {
    outstanding: HashSet<u64>,
    finished: HashMap<u64, BlkStatus>,
    accepted: u64,
}

impl Ledger {
    fn accept(&mut self, private: u64) {
        assert!(
            self.outstanding.insert(private),
            "cookie {private:#x} accepted twice"
        );
        self.accepted += 1;
    }

    /// Takes the submitter's finished bios, checking each against the driver's record.
    fn reap(&mut self, sub: &mut Submitter, d: &TestDriver) {
        for bio in sub.done.drain(..) {
            let p = bio.private;
            assert!(
                self.outstanding.remove(&p),
                "bio {p:#x} completed but not outstanding (twice, or never submitted)"
            );
            assert_eq!(
                bio.ctx, sub.ctx,
                "bio {p:#x} delivered to the wrong submitter"
            );
            let outcomes = d.outcomes(p);
            // A flush bio never reaches the driver itself (the flush state machine issues a
            // flush request of its own), and a PREFLUSH write whose flush failed never does.
            let sequenced = bio.op == ReqOp::Flush || bio.flags.contains(ReqFlags::PREFLUSH);
            if sequenced && outcomes.is_empty() {
                assert!(
                    bio.op == ReqOp::Flush || !bio.status.is_ok(),
                    "bio {p:#x}: a PREFLUSH write succeeded without its data reaching the driver"
                );
            } else {
                assert_eq!(
                    outcomes,
                    vec![bio.status],
                    "bio {p:#x}: status vs what the driver ended it with"
                );
            }
            assert!(
                matches!(
                    bio.status,
                    BlkStatus::Ok | BlkStatus::IoErr | BlkStatus::Timeout
                ),
                "bio {p:#x}: unexpected status {:?}",
                bio.status
            );
            self.finished.insert(p, bio.status);
        }
    }
}

/// Single-threaded driving of several submitters over one queue.
struct World {
    q: Arc<RequestQueue>,
    d: Arc<TestDriver>,
    subs: Vec<Submitter>,
    gens: Vec<BioGen>,
    retry: Vec<VecDeque<Bio>>,
    ledger: Ledger,
    rng: Rng,
    now: Nanos,
}

impl World {
    fn new(
        tag_cfg: TagSetConfig,
        cfg: QueueConfig,
        elv: Option<&ElevatorType>,
        seed: u64,
    ) -> World {
        let d = TestDriver::new(Mode::Hold);
        d.set_chaos(Some(chaos(seed)));
        let nr_ctx = cfg.nr_ctx;
        let q = RequestQueue::new(TagSet::new(tag_cfg).unwrap(), d.clone(), elv, cfg).unwrap();
        let subs: Vec<Submitter> = (0..nr_ctx).map(|c| q.submitter(CtxIdx(c))).collect();
        World {
            gens: (0..nr_ctx as u64).map(|c| BioGen::new(seed, c)).collect(),
            retry: (0..nr_ctx).map(|_| VecDeque::new()).collect(),
            subs,
            q,
            d,
            ledger: Ledger::default(),
            rng: Rng::new(seed.wrapping_mul(31)),
            now: Nanos::from_secs(1),
        }
    }

    /// Submits one bio for submitter `s` (a retried one first). Returns false on Busy.
    fn submit(&mut self, s: usize) -> bool {
        let bio = match self.retry[s].pop_front() {
            Some(b) => b,
            None => self.gens[s].next(),
        };
        let p = bio.private;
        match self.q.submit_bio(&mut self.subs[s], bio, self.now) {
            Submit::Queued | Submit::Merged | Submit::Done => {
                self.ledger.accept(p);
                true
            }
            Submit::Busy(bio) => {
                // No tag: issue what the plug holds (the kernel flushes the plug before it
                // sleeps for a tag) and try again later.
                self.retry[s].push_front(*bio);
                self.q.flush_plug(&mut self.subs[s], self.now);
                false
            }
            Submit::Failed => panic!("valid bio {p:#x} refused: {:?}", self.subs[s].done.last()),
        }
    }

    fn reap(&mut self, s: usize) {
        self.ledger.reap(&mut self.subs[s], &self.d);
    }

    fn step(&mut self) {
        let s = self.rng.below(self.subs.len() as u64) as usize;
        match self.rng.below(100) {
            0..=49 => {
                self.submit(s);
            }
            50..=57 => {
                if self.subs[s].plug.is_started() {
                    self.q.finish_plug(&mut self.subs[s], self.now);
                } else {
                    self.subs[s].plug.start();
                }
            }
            58..=72 => {
                self.d.release(1 + self.rng.below(6) as usize);
            }
            73..=89 => {
                self.q.poll(&mut self.subs[s], self.now);
            }
            90..=97 => {
                self.now = self
                    .now
                    .saturating_add(Nanos::from_micros(self.rng.below(4000)));
                // A stopped hardware queue is started again a little later.
                for h in 0..self.q.nr_hw_queues() {
                    let h = mqblk_core::HctxIdx(h as u16);
                    if self.q.hctx(h).is_stopped() && self.rng.chance(500) {
                        self.q.start_hw_queue(&mut self.subs[s], h, self.now);
                    }
                }
            }
            98 => {
                if self.rng.chance(300) {
                    let h = self.rng.below(self.q.nr_hw_queues() as u64) as u16;
                    self.q.stop_hw_queue(mqblk_core::HctxIdx(h));
                } else {
                    self.q.timer(&mut self.subs[s], self.now);
                }
            }
            _ => {
                if self.rng.chance(300) {
                    self.now = self
                        .now
                        .saturating_add(DEFAULT_TIMEOUT)
                        .saturating_add(Nanos::from_millis(1));
                }
            }
        }
        self.reap(s);
    }

    /// Every outstanding bio sits in exactly one allocated request or on a software queue's
    /// list of remote completions; nothing else holds one.
    fn check(&self) {
        self.q.check_invariants();
        let mut held = bios_in_queue(&self.q);
        for c in 0..self.q.nr_ctx() {
            held.extend(
                self.q
                    .ctx(CtxIdx(c as u16))
                    .remote_done
                    .lock()
                    .iter()
                    .map(|b| b.private),
            );
        }
        held.sort_unstable();
        let mut want: Vec<u64> = self.ledger.outstanding.iter().copied().collect();
        want.sort_unstable();
        assert_eq!(held, want, "bios in the queue vs outstanding");
    }

    /// Stops injecting faults and drives everything to completion.
    fn drain(&mut self) {
        self.d.set_chaos(None);
        self.d.set_mode(Mode::Inline);
        for h in 0..self.q.nr_hw_queues() {
            let h = mqblk_core::HctxIdx(h as u16);
            if self.q.hctx(h).is_stopped() {
                self.q.start_hw_queue(&mut self.subs[0], h, self.now);
            }
        }
        for s in 0..self.subs.len() {
            self.q.finish_plug(&mut self.subs[s], self.now);
            self.reap(s);
        }
        let mut rounds = 0;
        while !self.ledger.outstanding.is_empty() || self.retry.iter().any(|r| !r.is_empty()) {
            rounds += 1;
            assert!(
                rounds < 1000,
                "no progress draining: {} outstanding\n{}",
                self.ledger.outstanding.len(),
                self.q.debug_state()
            );
            for s in 0..self.subs.len() {
                while !self.retry[s].is_empty() && self.submit(s) {}
                self.q.finish_plug(&mut self.subs[s], self.now);
            }
            self.d.release_all();
            for s in 0..self.subs.len() {
                self.q.poll(&mut self.subs[s], self.now);
                self.reap(s);
            }
            self.now = self.now.saturating_add(if rounds % 4 == 0 {
                DEFAULT_TIMEOUT
            } else {
                Nanos::from_millis(4)
            });
        }
        self.check();
        assert_eq!(self.d.nr_held() + self.d.nr_lost(), 0);
    }

    fn finish(mut self, min_bios: u64) {
        self.drain();
        let l = &self.ledger;
        assert!(
            l.accepted >= min_bios,
            "only {} bios went through",
            l.accepted
        );
        assert_eq!(
            l.finished.len() as u64,
            l.accepted,
            "every accepted bio finished once"
        );
        // The driver ended each bio exactly once and saw nothing it was not given (flush
        // bios, and PREFLUSH writes whose flush failed, it never saw: see `reap`).
        let outcomes = self.d.all_outcomes();
        assert!(outcomes.len() as u64 <= l.accepted);
        assert!(outcomes.keys().all(|p| l.finished.contains_key(p)));
        for (p, st) in outcomes {
            assert_eq!(
                st.len(),
                1,
                "bio {p:#x} ended {} times by the driver",
                st.len()
            );
            assert_eq!(l.finished.get(&p), Some(&st[0]));
        }
        let count = |st: BlkStatus| l.finished.values().filter(|&&s| s == st).count();
        // The storm must actually have exercised the error paths.
        assert!(count(BlkStatus::IoErr) > 0, "no I/O errors were injected");
        assert!(self.d.requeues() > 0, "no requeues were injected");
        let issues = self.d.issues();
        assert!(issues.iter().any(|i| i.reply == common::Reply::Resource));
        assert!(issues.iter().any(|i| i.nr_bios > 1), "nothing merged");
        assert_eq!(self.d.budget_out().0, 0, "dispatch budget tokens leaked");
        common::assert_whole(&self.q);
    }
}

fn storm(tag_cfg: TagSetConfig, nr_ctx: u16, seed: u64, steps: usize) {
    let cfg = QueueConfig {
        nr_ctx,
        ..Default::default()
    };
    storm_with(tag_cfg, cfg, None, seed, steps);
}

fn storm_with(
    tag_cfg: TagSetConfig,
    cfg: QueueConfig,
    elv: Option<&ElevatorType>,
    seed: u64,
    steps: usize,
) {
    storm_budget(tag_cfg, cfg, elv, None, seed, steps);
}

fn storm_budget(
    tag_cfg: TagSetConfig,
    cfg: QueueConfig,
    elv: Option<&ElevatorType>,
    budget: Option<usize>,
    seed: u64,
    steps: usize,
) {
    let mut w = World::new(tag_cfg, cfg, elv, seed);
    w.d.set_budget(budget);
    for i in 0..steps {
        w.step();
        if i % 64 == 0 {
            w.check();
        }
    }
    let d = w.d.clone();
    w.finish(steps as u64 / 6);
    assert!(d.timeouts() > 0, "seed {seed}: no timeouts were injected");
    if budget.is_some() {
        assert!(
            d.budget_out().1 > 0,
            "seed {seed}: the budget never ran out"
        );
    }
}

fn set(default: u16, read: u16, depth: u32, flags: TagSetFlags) -> TagSetConfig {
    let mut c = TagSetConfig::new(default, depth);
    c.maps = MapQueues {
        default,
        read,
        poll: 0,
    };
    c.flags = flags;
    c
}

#[test]
fn storm_one_submitter_one_hctx() {
    for seed in 1..=6 {
        storm(set(1, 0, 16, TagSetFlags::default()), 1, seed, 3000);
    }
}

#[test]
fn storm_several_submitters_one_hctx() {
    for seed in 10..=15 {
        storm(set(1, 0, 8, TagSetFlags::default()), 3, seed, 3000);
    }
}

#[test]
fn storm_submitter_per_hctx() {
    for seed in 20..=24 {
        storm(set(2, 0, 16, TagSetFlags::default()), 2, seed, 3000);
        storm(set(4, 0, 8, TagSetFlags::default()), 4, seed + 100, 3000);
    }
}

#[test]
fn storm_read_queues_and_shared_tags() {
    for seed in 30..=34 {
        storm(set(2, 2, 16, TagSetFlags::default()), 4, seed, 3000);
        storm(
            set(2, 0, 12, TagSetFlags::TAG_HCTX_SHARED),
            4,
            seed + 100,
            3000,
        );
        storm(set(1, 0, 64, TagSetFlags::TAG_RR), 2, seed + 200, 2000);
    }
}

#[test]
fn storm_through_a_scheduler() {
    // The scheduler path: scheduler tags (nr_requests) beyond the driver tags, driver tags
    // taken at dispatch, requeue through the elevator, flushes bypassing it.
    let cfg = |nr_ctx: u16, nr_requests: u32| QueueConfig {
        nr_ctx,
        nr_requests,
        ..Default::default()
    };
    for seed in 50..=53 {
        for elv in [&common::FIFO, &common::FIFO_MQ] {
            storm_with(
                set(1, 0, 4, TagSetFlags::default()),
                cfg(2, 16),
                Some(elv),
                seed,
                3000,
            );
            storm_with(
                set(2, 0, 4, TagSetFlags::default()),
                cfg(4, 8),
                Some(elv),
                seed + 10,
                3000,
            );
            storm_with(
                set(2, 1, 6, TagSetFlags::TAG_HCTX_SHARED),
                cfg(4, 8),
                Some(elv),
                seed + 20,
                3000,
            );
            let all_hctxs = QueueConfig {
                sq_sched_dispatch: false,
                run_all_on_complete: true,
                ..cfg(3, 12)
            };
            storm_with(
                set(3, 0, 4, TagSetFlags::default()),
                all_hctxs,
                Some(elv),
                seed + 30,
                3000,
            );
        }
    }
}

#[test]
fn storm_with_a_dispatch_budget() {
    // A device-wide dispatch budget smaller than the tag space (SCSI's per-LUN queue depth):
    // every token taken must come back, whether the request was issued or not.
    let cfg = |nr_ctx: u16| QueueConfig {
        nr_ctx,
        nr_requests: 16,
        ..Default::default()
    };
    for seed in 60..=62 {
        let tags = || set(2, 0, 8, TagSetFlags::default());
        storm_budget(tags(), cfg(2), None, Some(3), seed, 3000);
        storm_budget(
            tags(),
            cfg(4),
            Some(&common::FIFO),
            Some(3),
            seed + 10,
            3000,
        );
        storm_budget(
            tags(),
            cfg(4),
            Some(&common::FIFO_MQ),
            Some(5),
            seed + 20,
            3000,
        );
    }
}

#[test]
fn storm_two_threads() {
    // Two threads, each owning a submitter on its own hardware queue, share the queue, the
    // driver and one clock. Runs, requeue work and timeout scans cross between them; with
    // the queue-wide FIFO scheduler so do dispatches.
    let runs: [(u64, Option<&ElevatorType>); 4] = [
        (41, None),
        (42, None),
        (43, Some(&common::FIFO)),
        (44, Some(&common::FIFO_MQ)),
    ];
    for (seed, elv) in runs {
        let d = TestDriver::new(Mode::Hold);
        d.set_chaos(Some(chaos(seed)));
        let depth = if elv.is_some() { 6 } else { 16 };
        let q = RequestQueue::new(
            TagSet::new(set(2, 0, depth, TagSetFlags::default())).unwrap(),
            d.clone(),
            elv,
            QueueConfig {
                nr_ctx: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let clock = AtomicU64::new(Nanos::from_secs(1).0);
        let bios_each = 1500u64;
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (q, d, clock) = (&q, &d, &clock);
                s.spawn(move || {
                    let mut sub = q.submitter(CtxIdx(t as u16));
                    assert_eq!(sub.hctxs(), &[mqblk_core::HctxIdx(t as u16)]);
                    let mut gen = BioGen::new(seed, t);
                    let mut rng = Rng::new(seed * 7 + t);
                    let mut ledger = Ledger::default();
                    let mut retry: Option<Bio> = None;
                    let mut rounds = 0u64;
                    while ledger.accepted < bios_each
                        || !ledger.outstanding.is_empty()
                        || retry.is_some()
                    {
                        rounds += 1;
                        assert!(
                            rounds < 200_000,
                            "thread {t}: no progress\n{}",
                            q.debug_state()
                        );
                        let now = Nanos(clock.load(Ordering::Acquire));
                        let draining = ledger.accepted >= bios_each;
                        match rng.below(100) {
                            0..=44 if !draining || retry.is_some() => {
                                let bio = retry.take().unwrap_or_else(|| gen.next());
                                let p = bio.private;
                                match q.submit_bio(&mut sub, bio, now) {
                                    Submit::Queued | Submit::Merged | Submit::Done => {
                                        ledger.accept(p)
                                    }
                                    Submit::Busy(b) => {
                                        retry = Some(*b);
                                        q.flush_plug(&mut sub, now);
                                    }
                                    Submit::Failed => panic!("valid bio refused"),
                                }
                            }
                            45..=52 => {
                                if sub.plug.is_started() {
                                    q.finish_plug(&mut sub, now);
                                } else if !draining {
                                    sub.plug.start();
                                }
                            }
                            53..=69 => {
                                d.release(1 + rng.below(4) as usize);
                            }
                            70..=94 => {
                                if draining {
                                    q.finish_plug(&mut sub, now);
                                }
                                q.poll(&mut sub, now);
                            }
                            95..=98 => {
                                clock.fetch_add(rng.below(4_000_000), Ordering::AcqRel);
                            }
                            _ => {
                                let big = rng.chance(if draining { 500 } else { 100 });
                                if big {
                                    clock
                                        .fetch_add(DEFAULT_TIMEOUT.0 + 1_000_000, Ordering::AcqRel);
                                }
                                q.timer(&mut sub, Nanos(clock.load(Ordering::Acquire)));
                            }
                        }
                        ledger.reap(&mut sub, d);
                    }
                    ledger.accepted
                });
            }
        });
        q.check_invariants();
        assert_eq!(d.nr_held() + d.nr_lost(), 0);
        let outcomes = d.all_outcomes();
        // Flush bios never reach the driver themselves (a few in a hundred).
        assert!(outcomes.len() as u64 >= 2 * bios_each * 3 / 4);
        assert!(
            outcomes.values().all(|v| v.len() == 1),
            "a bio was ended twice"
        );
        assert!(d.timeouts() > 0 && d.requeues() > 0);
        common::assert_whole(&q);
    }
}

#[test]
fn a_request_started_during_a_timeout_scan_still_times_out() {
    // Regression: the timeout scan used to store its result over the timer, so a request
    // started by another thread behind the scan (in a slot the scan had passed, with nothing
    // else in flight) was left with no timer: a lost request then never timed out. The map is
    // as large as allowed so the scan takes long enough for the other thread to land in it.
    let d = TestDriver::new(Mode::Inline);
    let q = RequestQueue::new(
        TagSet::new(TagSetConfig::new(1, mqblk_core::tag::MAX_DEPTH)).unwrap(),
        d.clone(),
        None,
        QueueConfig {
            nr_ctx: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let mut sa = q.submitter(CtxIdx(0));
    let mut sb = q.submitter(CtxIdx(1));
    let mut t = Nanos::from_secs(1);
    for i in 0..200u64 {
        // A request that completes at once leaves the timer armed at t + timeout with
        // nothing in flight.
        common::submit_ok(&q, &mut sa, common::bio4k(ReqOp::Read, 0, (1 << 32) | i), t);
        let now = t.saturating_add(DEFAULT_TIMEOUT);
        d.script(&[common::Reply::Timeout]);
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            let (q, start, sa, sb) = (&q, &start, &mut sa, &mut sb);
            s.spawn(move || {
                start.wait();
                q.timer(sa, now);
            });
            s.spawn(move || {
                start.wait();
                common::submit_ok(q, sb, common::bio4k(ReqOp::Read, 8, i), now);
            });
        });
        assert_eq!(d.nr_lost(), 1);
        let deadline = now.saturating_add(DEFAULT_TIMEOUT);
        assert_eq!(
            q.next_deadline(),
            Some(deadline),
            "iteration {i}: a request in flight without a timer"
        );
        q.poll(&mut sb, deadline);
        assert_eq!(common::take_done(&mut sb), vec![(i, BlkStatus::Timeout)]);
        sa.done.clear();
        t = deadline.saturating_add(Nanos::from_secs(1));
    }
    common::assert_whole(&q);
}
