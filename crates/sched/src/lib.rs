//! The I/O schedulers and their registry (`elv_register` / `elevator_find`).
//!
//! Each scheduler lives in one file and ends with its `ElevatorType` descriptor; `lookup`
//! resolves `ioscheduler=NAME` by name or alias.

pub mod bfq;
pub mod kyber;
pub mod mq_deadline;
pub mod none;

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

/// Names of all schedulers, for error messages and `--help`.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// The README's code blocks, compiled and run as doctests so the documented library usage
/// stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
