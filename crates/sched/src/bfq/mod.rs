//! BFQ, the budget fair queueing scheduler (`block/bfq-iosched.c`, `bfq-wf2q.c`,
//! `bfq-cgroup.c`), split by concern:
//!
//! - [`engine`]: B-WF2Q+, which of the backlogged entities is served next so that each gets
//!   service in proportion to its weight;
//! - [`groups`]: the H-WF2Q+ hierarchy of cgroups, each with its own service trees;
//! - [`sched`]: the queues and the elevator operations (insert, dispatch, complete, timer);
//! - `policy`: budgets, charging, idling, weight raising, injection, device estimates;
//! - `merge`: cooperating queues, merged and split;
//! - [`pos_tree`]: the red-black tree of queue positions in which merging looks for
//!   cooperators.
//!
//! Registered as `bfq`, not `MQ_AWARE`: one lock, one in-service queue for the device.
//! Not modelled: multi-actuator drives.

pub mod engine;
pub mod groups;
mod merge;
mod policy;
pub mod pos_tree;
pub mod sched;

pub use sched::{ioprio_to_weight, Bfq, BfqCounters, BfqStats, BFQ};
