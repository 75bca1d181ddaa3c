//! `none`: no scheduler. There is no elevator object, as in the kernel: requests go to the
//! per-submitter software queues or straight to the driver (see `queue.rs`, `issue_list`).

use mqblk_core::{ElevatorType, ElvCost, ElvFeatures};

/// No scheduler: registered so `queue/scheduler` can name it; it builds no elevator.
pub const NONE: ElevatorType = ElevatorType {
    name: "none",
    alias: None,
    features: ElvFeatures::empty(),
    tunables: &[],
    aliases: &[],
    init: None,
    cost: ElvCost::NONE,
};
