//! The I/O schedulers and their registry (`elv_register` / `elevator_find`).
//!
//! Each scheduler lives in one file and ends with its `ElevatorType` descriptor; `lookup`
//! resolves `ioscheduler=NAME` by name or alias.

#![warn(missing_docs)]

pub mod bfq;
pub mod kyber;
pub mod mq_deadline;
pub mod none;

pub use bfq::{BfqCounters, BfqStats};
pub use kyber::KyberStats;
pub use mq_deadline::{DdClassStats, DdStats};

use mqblk_core::ElevatorType;

/// Every registered scheduler, in the order `list` prints them.
pub static REGISTRY: &[&ElevatorType] = &[
    &none::NONE,
    &mq_deadline::MQ_DEADLINE,
    &kyber::KYBER,
    &bfq::BFQ,
];

/// Finds a scheduler by name or alias.
pub fn lookup(name: &str) -> Option<&'static ElevatorType> {
    REGISTRY
        .iter()
        .copied()
        .find(|e| e.name == name || e.alias == Some(name))
}

/// Any registered scheduler's typed statistics, taken from a queue's elevator.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "scheduler", rename_all = "kebab-case")]
pub enum SchedStats {
    /// No scheduler (`none`), or one outside this registry.
    #[default]
    None,
    /// mq-deadline's.
    MqDeadline(DdStats),
    /// Kyber's.
    Kyber(KyberStats),
    /// BFQ's.
    Bfq(BfqStats),
}

impl SchedStats {
    /// The statistics of `elv` (of `None` without a scheduler).
    pub fn of(elv: Option<&dyn mqblk_core::Elevator>) -> SchedStats {
        let Some(any) = elv.map(|e| e.as_any()) else {
            return SchedStats::None;
        };
        if let Some(d) = any.downcast_ref::<mq_deadline::MqDeadline>() {
            SchedStats::MqDeadline(d.typed_stats())
        } else if let Some(k) = any.downcast_ref::<kyber::Kyber>() {
            SchedStats::Kyber(k.typed_stats())
        } else if let Some(b) = any.downcast_ref::<bfq::Bfq>() {
            SchedStats::Bfq(b.typed_stats())
        } else {
            SchedStats::None
        }
    }

    /// BFQ's statistics; panics for another scheduler (for tests and tools that set BFQ).
    pub fn bfq(&self) -> &BfqStats {
        match self {
            SchedStats::Bfq(b) => b,
            other => panic!("BFQ statistics asked of {other:?}"),
        }
    }

    /// mq-deadline's statistics; panics for another scheduler.
    pub fn mq_deadline(&self) -> &DdStats {
        match self {
            SchedStats::MqDeadline(d) => d,
            other => panic!("mq-deadline statistics asked of {other:?}"),
        }
    }

    /// kyber's statistics; panics for another scheduler.
    pub fn kyber(&self) -> &KyberStats {
        match self {
            SchedStats::Kyber(k) => k,
            other => panic!("kyber statistics asked of {other:?}"),
        }
    }

    /// The figures by name.
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        match self {
            SchedStats::None => Vec::new(),
            SchedStats::MqDeadline(d) => d.pairs(),
            SchedStats::Kyber(k) => k.pairs(),
            SchedStats::Bfq(b) => b.pairs(),
        }
    }
}

/// Names of all schedulers, for error messages and `--help`.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// The README's code blocks, compiled and run as doctests so the documented library usage
/// stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The library guide's code blocks, likewise.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryGuideDoctests;
