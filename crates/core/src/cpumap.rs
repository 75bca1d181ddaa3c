//! Queue maps: which hardware queue serves each software queue, per map type
//! (`block/blk-mq-cpumap.c`, `blk_mq_map_queue`).

use crate::bio::{ReqFlags, ReqOp};
use crate::tag::MapQueues;
use crate::{CtxIdx, HctxIdx};

/// `enum hctx_type`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum HctxType {
    /// Every request not mapped elsewhere (`HCTX_TYPE_DEFAULT`).
    Default = 0,
    /// Reads, where the driver gives them queues of their own (`HCTX_TYPE_READ`).
    Read = 1,
    /// Polled I/O (`HCTX_TYPE_POLL`).
    Poll = 2,
}

/// The number of map types (`HCTX_MAX_TYPES`).
pub const HCTX_MAX_TYPES: usize = 3;

impl HctxType {
    /// `blk_mq_get_hctx_type`: polled I/O to POLL, reads to READ, the rest to DEFAULT.
    pub fn of(op: ReqOp, flags: ReqFlags) -> HctxType {
        if flags.contains(ReqFlags::POLLED) {
            HctxType::Poll
        } else if op == ReqOp::Read {
            HctxType::Read
        } else {
            HctxType::Default
        }
    }
    /// The type's name in reports (`default`, `read`, `poll`).
    pub fn name(self) -> &'static str {
        match self {
            HctxType::Default => "default",
            HctxType::Read => "read",
            HctxType::Poll => "poll",
        }
    }
}

/// The CPU → hctx tables of one queue.
#[derive(Clone, Debug)]
pub struct QueueMap {
    /// `map[type][ctx]`: the hardware queue for that software queue.
    map: [Vec<HctxIdx>; HCTX_MAX_TYPES],
}

impl QueueMap {
    /// The default spread (`blk_mq_map_queues` / `group_cpus_evenly` without topology): the
    /// software queues are cut into `nr_queues` contiguous groups of nearly equal size, one
    /// group per hardware queue. With fewer software queues than hardware queues, software
    /// queue `i` takes hardware queue `i` and the rest stay idle, as with more hardware
    /// queues than CPUs in the kernel. A map with no queues falls back to DEFAULT.
    pub fn new(nr_ctx: u16, maps: MapQueues) -> QueueMap {
        let spread = |nr_queues: u16, offset: u16| -> Vec<HctxIdx> {
            (0..nr_ctx)
                .map(|c| {
                    let q = if nr_ctx >= nr_queues {
                        (c as u32 * nr_queues as u32 / nr_ctx as u32) as u16
                    } else {
                        c
                    };
                    HctxIdx(offset + q)
                })
                .collect()
        };
        let default = spread(maps.default, 0);
        let read = if maps.read > 0 {
            spread(maps.read, maps.default)
        } else {
            default.clone()
        };
        let poll = if maps.poll > 0 {
            spread(maps.poll, maps.default + maps.read)
        } else {
            default.clone()
        };
        QueueMap {
            map: [default, read, poll],
        }
    }

    /// The hardware queue software queue `ctx` maps to for type `ty`.
    pub fn hctx(&self, ty: HctxType, ctx: CtxIdx) -> HctxIdx {
        self.map[ty as usize][ctx.0 as usize]
    }

    /// The number of software queues mapped.
    pub fn nr_ctx(&self) -> usize {
        self.map[0].len()
    }
}
