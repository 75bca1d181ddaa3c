//! BFQ, the budget fair queueing scheduler (`block/bfq-iosched.c`, `bfq-wf2q.c`), split by
//! concern: the B-WF2Q+ engine that decides which queue is served next in proportion to its
//! weight ([`engine`]), and the queues and policy on top of it ([`sched`]): per-issuer queues,
//! classes, budgets and their feedback, idling, FIFO expiry and back seeks. Registered as
//! `bfq`. Groups, low_latency weight raising and queue merging are later stages of issue 6.

pub mod engine;
pub mod sched;

pub use sched::{ioprio_to_weight, Bfq, BFQ};
