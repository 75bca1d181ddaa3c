//! Fault injection for drivers: which requests to fail, lose or give back, decided per
//! hardware queue from every-Nth counters and seeded random draws (null_blk's `timeout`,
//! `requeue` and failure knobs over the kernel's `lib/fault-inject.c`).
//!
//! The decision is sans-I/O and deterministic for a seed, so the null driver serving real
//! threads and the simulator's driver serving virtual time inject the same faults from the
//! same job options; each driver carries the decision out its own way.

/// When one kind of fault fires. The two triggers are independent: a request is hit if it
/// is the `every_nth` request issued to its hardware queue, or if the random draw falls
/// under `probability_pct`. Retries count as new requests, as they do in the kernel.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct FaultSpec {
    /// Hit every Nth request of each hardware queue; 0 turns this trigger off.
    pub every_nth: u64,
    /// Hit each request with this chance, in percent (0..=100); 0 turns this trigger off.
    pub probability_pct: f64,
}

impl FaultSpec {
    /// No faults.
    pub const OFF: FaultSpec = FaultSpec {
        every_nth: 0,
        probability_pct: 0.0,
    };

    /// A fault on every Nth request of each hardware queue.
    pub fn every(n: u64) -> FaultSpec {
        FaultSpec {
            every_nth: n,
            probability_pct: 0.0,
        }
    }
    /// A fault on each request with probability `pct` percent.
    pub fn probability(pct: f64) -> FaultSpec {
        FaultSpec {
            every_nth: 0,
            probability_pct: pct,
        }
    }
    /// True when either trigger is on.
    pub fn is_enabled(&self) -> bool {
        self.every_nth != 0 || self.probability_pct != 0.0
    }
}

/// Fault injection: null_blk's `timeout` and `requeue` strings, plus plain failures.
///
/// When several kinds hit one request, requeue wins over timeout, and timeout over failure:
/// a request that is given back never reached the device, and one that is lost cannot also
/// report an error.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Complete the request with `BlkStatus::IoErr`.
    pub fail: FaultSpec,
    /// Never complete the request; the core's timeout handler ends it with
    /// `BlkStatus::Timeout` once its deadline passes.
    pub timeout: FaultSpec,
    /// Give the request back, alternating between refusing it with `BlkStatus::Resource`
    /// (the core's busy path) and accepting it and then asking for a requeue (the
    /// driver-driven path), as null_blk does.
    pub requeue: FaultSpec,
    /// Seed of the per-hardware-queue random generators, so a run can be reproduced.
    pub seed: u64,
}

/// Why a fault configuration cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FaultError {
    /// A probability outside 0..=100 (or not a number).
    #[error("faults.{knob}.probability_pct {value} out of range 0..=100")]
    Probability {
        /// Which fault (`fail`, `timeout`, `requeue`).
        knob: &'static str,
        /// The probability given, in percent.
        value: f64,
    },
    /// Requeues that would hit every attempt, so a request could never complete.
    #[error("faults.requeue every_nth 1 or probability_pct 100 requeues forever; use every_nth 0 or >= 2 and probability_pct < 100")]
    RequeueForever,
}

impl FaultConfig {
    /// True when any fault is configured.
    pub fn is_enabled(&self) -> bool {
        self.fail.is_enabled() || self.timeout.is_enabled() || self.requeue.is_enabled()
    }

    /// Checks the probabilities' range, and that requeues cannot repeat forever (a request
    /// hit on every attempt alternates between refused and requeued and never completes).
    pub fn validate(&self) -> Result<(), FaultError> {
        for (knob, spec) in [
            ("fail", &self.fail),
            ("timeout", &self.timeout),
            ("requeue", &self.requeue),
        ] {
            // Written so that NaN fails too.
            if !(spec.probability_pct >= 0.0 && spec.probability_pct <= 100.0) {
                return Err(FaultError::Probability {
                    knob,
                    value: spec.probability_pct,
                });
            }
        }
        if self.requeue.every_nth == 1 || self.requeue.probability_pct >= 100.0 {
            return Err(FaultError::RequeueForever);
        }
        Ok(())
    }
}

/// What fault injection decided for one request.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Injected {
    /// Issue it as usual.
    None,
    /// Refuse it with `Resource`.
    Busy,
    /// Accept it and hand it back for requeue.
    Requeue,
    /// Accept it and never complete it.
    Timeout,
    /// Carry it out and complete it with an I/O error.
    Fail,
}

/// SplitMix64: a small seeded generator, one stream per hardware queue.
#[derive(Copy, Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64, hctx: u16) -> SplitMix64 {
        // Spread the queue index over the seed so neighbouring queues get unrelated streams.
        SplitMix64(seed ^ (hctx as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03))
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A `FaultSpec` turned into integers once, so the issue path does no float work.
#[derive(Copy, Clone, Debug)]
struct Trigger {
    every_nth: u64,
    /// The chance scaled to 2^53: a 53-bit draw below it hits. 0 never hits, 2^53 always.
    threshold: u64,
}

impl Trigger {
    fn new(spec: &FaultSpec) -> Trigger {
        let threshold = (spec.probability_pct / 100.0 * (1u64 << 53) as f64) as u64;
        Trigger {
            every_nth: spec.every_nth,
            threshold,
        }
    }

    /// Whether call number `n` (from 1) of a hardware queue is hit. The generator is drawn
    /// whenever the probability is armed, hit or not, so one knob's outcome never shifts
    /// another knob's random sequence.
    fn fires(&self, n: u64, rng: &mut SplitMix64) -> bool {
        let nth = self.every_nth != 0 && n % self.every_nth == 0;
        let chance = self.threshold != 0 && (rng.next_u64() >> 11) < self.threshold;
        nth || chance
    }
}

/// One hardware queue's fault injection: its request count, random stream and the
/// alternation of requeue faults.
#[derive(Clone, Debug)]
pub struct FaultInjector {
    fail: Trigger,
    timeout: Trigger,
    requeue: Trigger,
    enabled: bool,
    /// Requests seen, for the every-Nth triggers.
    nr_issued: u64,
    rng: SplitMix64,
    /// The next requeue fault refuses the request (`Resource`) when false and requeues it
    /// when true; it flips on every requeue fault.
    requeue_by_driver: bool,
}

impl FaultInjector {
    /// The injector of hardware queue `hctx`.
    pub fn new(cfg: &FaultConfig, hctx: u16) -> FaultInjector {
        FaultInjector {
            fail: Trigger::new(&cfg.fail),
            timeout: Trigger::new(&cfg.timeout),
            requeue: Trigger::new(&cfg.requeue),
            enabled: cfg.is_enabled(),
            nr_issued: 0,
            rng: SplitMix64::new(cfg.seed, hctx),
            requeue_by_driver: false,
        }
    }

    /// Whether any fault can fire.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The fault, if any, for the next request issued to this hardware queue.
    pub fn inject(&mut self) -> Injected {
        if !self.enabled {
            return Injected::None;
        }
        self.nr_issued += 1;
        let n = self.nr_issued;
        let requeue = self.requeue.fires(n, &mut self.rng);
        let timeout = self.timeout.fires(n, &mut self.rng);
        let fail = self.fail.fires(n, &mut self.rng);
        if requeue {
            let by_driver = self.requeue_by_driver;
            self.requeue_by_driver = !by_driver;
            return if by_driver {
                Injected::Requeue
            } else {
                Injected::Busy
            };
        }
        if timeout {
            return Injected::Timeout;
        }
        if fail {
            return Injected::Fail;
        }
        Injected::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nth_and_the_requeue_alternation() {
        let cfg = FaultConfig {
            fail: FaultSpec::every(3),
            requeue: FaultSpec::every(4),
            ..FaultConfig::default()
        };
        let mut f = FaultInjector::new(&cfg, 0);
        let got: Vec<Injected> = (0..8).map(|_| f.inject()).collect();
        use Injected::*;
        assert_eq!(got, vec![None, None, Fail, Busy, None, Fail, None, Requeue]);
    }

    #[test]
    fn probabilities_are_seeded_and_validated() {
        let cfg = FaultConfig {
            timeout: FaultSpec::probability(10.0),
            seed: 7,
            ..FaultConfig::default()
        };
        let run = |hctx| {
            let mut f = FaultInjector::new(&cfg, hctx);
            (0..10_000)
                .filter(|_| f.inject() == Injected::Timeout)
                .count()
        };
        assert_eq!(run(0), run(0));
        assert!((800..1200).contains(&run(0)), "{}", run(0));
        assert_ne!(run(0), run(1));
        let bad = FaultConfig {
            fail: FaultSpec::probability(f64::NAN),
            ..cfg
        };
        assert!(bad.validate().is_err());
        let forever = FaultConfig {
            requeue: FaultSpec::every(1),
            ..cfg
        };
        assert_eq!(forever.validate(), Err(FaultError::RequeueForever));
    }
}
