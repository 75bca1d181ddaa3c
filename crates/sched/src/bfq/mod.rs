//! BFQ, the budget fair queueing scheduler (`block/bfq-iosched.c`, `bfq-wf2q.c`,
//! `bfq-cgroup.c`). Being built in stages (issue 6); so far the B-WF2Q+ engine that decides
//! which queue is served next in proportion to its weight ([`engine`]). It is not registered
//! as a scheduler yet.

pub mod engine;
