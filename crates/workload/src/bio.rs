//! How a resolved job's I/O reaches the block layer as bios: the operation and flags of each
//! I/O, the priority and the cgroup they carry. `mqblk bench` and the simulator both issue
//! through these, so the same job makes the same bios in both.

use crate::{IoKind, Job, JobIo};
use mqblk_core::{Blkcg, BlkcgError, IoPrio, IoPrioClass, ReqFlags, ReqOp};

impl JobIo {
    /// The operation and flags of this I/O as a bio carries them. A synchronous write is
    /// `REQ_OP_WRITE | REQ_SYNC | REQ_IDLE` (block/fops.c's `dio_bio_write_op`), and a FUA
    /// write (`sync=`) carries `REQ_FUA` beside its other flags, as `dio_bio_write_op` adds
    /// it.
    #[inline]
    pub fn op_flags(&self) -> (ReqOp, ReqFlags) {
        let op = match self.kind {
            IoKind::Read => ReqOp::Read,
            IoKind::Write => ReqOp::Write,
            IoKind::Flush => ReqOp::Flush,
            IoKind::Trim => ReqOp::Discard,
        };
        let flags = match (self.sync, op) {
            (false, _) => ReqFlags::empty(),
            (true, ReqOp::Write) => ReqFlags::SYNC.union(ReqFlags::IDLE),
            (true, _) => ReqFlags::SYNC,
        };
        let flags = if self.fua && op == ReqOp::Write {
            flags.union(ReqFlags::FUA)
        } else {
            flags
        };
        (op, flags)
    }
}

/// A job's `cgroup` could not be joined.
#[derive(Debug, thiserror::Error)]
#[error("job '{job}': {source}")]
pub struct CgroupError {
    /// The job.
    pub job: String,
    /// Why.
    #[source]
    pub source: BlkcgError,
}

impl Job {
    /// The priority the job's bios carry (`prioclass`/`prio`).
    pub fn bio_ioprio(&self) -> IoPrio {
        match self.ioprio {
            None => IoPrio::DEFAULT,
            Some((class, level)) => {
                let class = match class {
                    1 => IoPrioClass::Rt,
                    3 => IoPrioClass::Idle,
                    _ => IoPrioClass::Be,
                };
                IoPrio::new(class, level)
            }
        }
    }

    /// The cgroup id of the job in `blkcg` (0, the root, without `cgroup`), created with the
    /// job's `cgroup_weight` if it does not exist yet.
    pub fn join_cgroup(&self, blkcg: &Blkcg) -> Result<u32, CgroupError> {
        match &self.cgroup {
            None => Ok(0),
            Some(path) => blkcg
                .join(path, self.cgroup_weight)
                .map_err(|source| CgroupError {
                    job: self.name.clone(),
                    source,
                }),
        }
    }
}
