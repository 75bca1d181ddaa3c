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
            IoKind::Flush | IoKind::Datasync => ReqOp::Flush,
            IoKind::Trim => ReqOp::Discard,
            IoKind::ZoneReset => ReqOp::ZoneReset,
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
    /// The operation and flags of the job's I/O `io` as its bio carries them
    /// ([`JobIo::op_flags`]), with `REQ_NOWAIT` on reads and writes of a `nowait` job (fio
    /// sets `RWF_NOWAIT`, which direct I/O turns into `REQ_NOWAIT`).
    #[inline]
    pub fn bio_flags(&self, io: &JobIo) -> (ReqOp, ReqFlags) {
        let (op, flags) = io.op_flags();
        if self.nowait && matches!(op, ReqOp::Read | ReqOp::Write) {
            return (op, flags.union(ReqFlags::NOWAIT));
        }
        (op, flags)
    }

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

    /// The priority value fio gives the job's I/Os (`td->ioprio`): `class << 13 | level`
    /// of `prioclass`/`prio`, 0 without either.
    pub fn ioprio_value(&self) -> u16 {
        self.ioprio.map_or(0, |(class, level)| {
            crate::cmdprio::ioprio_value(class, level)
        })
    }

    /// The priority value fio counts an I/O under (`io_u->ioprio`), given the priority
    /// `carried` by its bio: the one `cmdprio_*` gave it, else the job's
    /// ([`Self::ioprio_value`]). An I/O whose share named the job's own bio priority
    /// counts as the job's (the value fio gives it then is the same, but for a job
    /// without `prioclass`/`prio` whose share names best-effort level 4).
    pub fn counted_ioprio(&self, carried: IoPrio) -> u16 {
        if carried == self.bio_ioprio() {
            self.ioprio_value()
        } else {
            carried.0
        }
    }

    /// Keeps each priority's latencies apart in `stats` where the job has `cmdprio_*`
    /// shares (fio's `init_ts_clat_prio`): for reads and writes with one, the job's own
    /// priority first, then each its shares name; with a histogram when `hist`.
    pub fn track_prios(&self, stats: &mut crate::JobStats, hist: bool) {
        let Some(c) = &self.cmdprio else { return };
        for d in [crate::Ddir::Read, crate::Ddir::Write] {
            let others = c.prios(d);
            if others.is_empty() {
                continue;
            }
            let mut prios = vec![self.ioprio_value()];
            prios.extend(others.into_iter().filter(|&p| p != self.ioprio_value()));
            stats
                .dir_mut(d)
                .track_prios(&prios, self.lat_percentiles, hist);
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
