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

pub use mqblk_core::ElevatorType;

/// The built-in schedulers, in the order `mqblk schedulers` prints them.
pub static REGISTRY: &[&ElevatorType] = &[
    &none::NONE,
    &mq_deadline::MQ_DEADLINE,
    &kyber::KYBER,
    &bfq::BFQ,
];

/// Schedulers registered at run time ([`register`]), after the built-in ones.
static REGISTERED: parking_lot::RwLock<Vec<&'static ElevatorType>> =
    parking_lot::RwLock::new(Vec::new());

/// Adds a scheduler at run time (`elv_register`): from then on `ioscheduler=NAME` (and its
/// alias) finds it wherever a built-in one is found: `mqblk bench`, `sim`, `twin`, `serve`,
/// the fuzzer. Refused with one line if its name or alias is taken, as the kernel refuses a
/// second `elevator_type` of the same name.
pub fn register(t: &'static ElevatorType) -> Result<(), String> {
    if t.name.is_empty() || t.name.contains(char::is_whitespace) {
        return Err(format!(
            "scheduler name '{}': must be one word, not empty",
            t.name
        ));
    }
    let mut extra = REGISTERED.write();
    let taken = |n: &str| {
        REGISTRY
            .iter()
            .chain(extra.iter())
            .any(|e| e.name == n || e.alias == Some(n))
    };
    for n in std::iter::once(t.name).chain(t.alias) {
        if taken(n) {
            return Err(format!("scheduler '{n}' is already registered"));
        }
    }
    if t.init.is_none() {
        return Err(format!(
            "scheduler '{}': no init (only `none` goes without an elevator object)",
            t.name
        ));
    }
    extra.push(t);
    Ok(())
}

/// Removes a scheduler registered at run time (`elv_unregister`), so that its name can be
/// registered again (a Python class redefined under its name). Queues already built with
/// it keep it; a built-in scheduler, or a name never registered, is refused.
pub fn unregister(name: &str) -> Result<(), String> {
    if REGISTRY
        .iter()
        .any(|e| e.name == name || e.alias == Some(name))
    {
        return Err(format!("scheduler '{name}' is built in"));
    }
    let mut extra = REGISTERED.write();
    let before = extra.len();
    extra.retain(|e| e.name != name);
    if extra.len() == before {
        return Err(format!("scheduler '{name}' is not registered"));
    }
    Ok(())
}

/// Every scheduler: the built-in ones, then those registered at run time.
pub fn all() -> Vec<&'static ElevatorType> {
    REGISTRY
        .iter()
        .copied()
        .chain(REGISTERED.read().iter().copied())
        .collect()
}

/// Finds a scheduler by name or alias.
pub fn lookup(name: &str) -> Option<&'static ElevatorType> {
    all()
        .into_iter()
        .find(|e| e.name == name || e.alias == Some(name))
}

/// Any scheduler's statistics, taken from a queue's elevator: the built-in ones typed, a
/// scheduler registered at run time as the named counts its [`Elevator::stats`] gives.
///
/// [`Elevator::stats`]: mqblk_core::Elevator::stats
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "scheduler", rename_all = "kebab-case")]
pub enum SchedStats {
    /// No scheduler (`none`).
    #[default]
    None,
    /// mq-deadline's.
    MqDeadline(DdStats),
    /// Kyber's.
    Kyber(KyberStats),
    /// BFQ's.
    Bfq(BfqStats),
    /// A scheduler registered at run time ([`register`]): its name and its counts.
    Other {
        /// Its name.
        name: &'static str,
        /// Its counts by name, in its order.
        figures: Vec<(&'static str, u64)>,
    },
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
            let e = elv.expect("an elevator was given");
            SchedStats::Other {
                name: e.name(),
                figures: e.stats(),
            }
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
            SchedStats::Other { figures, .. } => figures.clone(),
        }
    }
}

/// Names of all schedulers, for error messages and `--help`.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|e| e.name).collect()
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
