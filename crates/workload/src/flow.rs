//! fio's flow control between jobs (`flow`, `flow_id`, `flow_sleep`): the jobs of one
//! `flow_id` issue in proportion to their `flow` weights.
//!
//! As fio 3.33's `flow.c` does it: the group keeps a shared count of the I/Os its jobs
//! issued (starting at 1) and the sum of the weights of its jobs that are running; before an
//! I/O, a job whose share of the group's count exceeds its share of the weight is held back
//! (it waits for what it has in flight, then `flow_sleep`; without one fio spins, mqblk looks
//! again after [`RETRY_NS`]); otherwise both counts go up by one. A job leaves the group when
//! it ends, taking its count and weight with it.
//!
//! The group is shared state between job drivers; the simulator runs them on one thread and
//! the threaded runner on several, so the counts are atomics (fio's are too).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How long a held job without `flow_sleep` waits before looking again: fio spins on the
/// check, which a simulation in virtual time cannot do.
pub const RETRY_NS: u64 = 10_000;

/// The shared counts of one `flow_id`.
#[derive(Debug)]
pub struct FlowGroup {
    issued: AtomicU64,
    weight: AtomicU64,
}

impl Default for FlowGroup {
    fn default() -> FlowGroup {
        FlowGroup {
            issued: AtomicU64::new(1),
            weight: AtomicU64::new(0),
        }
    }
}

/// A job's place in its flow group: the group, its weight and its `flow_sleep`.
#[derive(Debug, Clone)]
pub struct Flow {
    pub group: Arc<FlowGroup>,
    pub weight: u64,
    pub sleep_ns: u64,
}

impl PartialEq for Flow {
    fn eq(&self, o: &Flow) -> bool {
        Arc::ptr_eq(&self.group, &o.group) && self.weight == o.weight && self.sleep_ns == o.sleep_ns
    }
}

impl Flow {
    /// The job starts: its weight joins the group's.
    pub fn join(&self) {
        self.group.weight.fetch_add(self.weight, Ordering::Relaxed);
    }

    /// The job ends, having issued `mine` of the group's I/Os.
    pub fn leave(&self, mine: u64) {
        self.group.issued.fetch_sub(mine, Ordering::Relaxed);
        self.group.weight.fetch_sub(self.weight, Ordering::Relaxed);
    }

    /// Whether a job that issued `mine` I/Os may issue another (fio's
    /// `flow_threshold_exceeded`, negated); if so, both counts go up.
    pub fn admit(&self, mine: &mut u64) -> bool {
        let issued = self.group.issued.load(Ordering::Relaxed).max(1) as f64;
        let weight = self.group.weight.load(Ordering::Relaxed).max(1) as f64;
        if *mine as f64 / issued > self.weight as f64 / weight {
            return false;
        }
        self.group.issued.fetch_add(1, Ordering::Relaxed);
        *mine += 1;
        true
    }
}
