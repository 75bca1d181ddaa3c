//! fio job specifications (as `mqblk bench` parses them) turned into simulated jobs.

use crate::workload::{FioSource, Limit, SimJob};
use mqblk_core::{Blkcg, IoPrio, IoPrioClass, Nanos};
use mqblk_workload::{Ddir, JobSpec};

/// One [`SimJob`] per job clone (`numjobs`), pinned by `cpus_allowed` or spread over the CPUs
/// in order. A job without `runtime` or `size` reads or writes the whole device once, as fio.
/// Jobs with `cgroup` join that group of `blkcg` (with `cgroup_weight` if given).
pub fn from_specs(
    specs: &[JobSpec],
    nr_cpus: u16,
    capacity_bytes: u64,
    seed: u64,
    blkcg: &Blkcg,
) -> Result<Vec<SimJob>, String> {
    let mut out = Vec::new();
    for s in specs {
        let group = join_cgroup(s, blkcg)?;
        let bs = if s.rw.does_read() {
            s.bs_for(Ddir::Read)
        } else {
            s.bs_for(Ddir::Write)
        } as u32;
        if bs < 512 || bs % 512 != 0 {
            return Err(format!(
                "job '{}': bs={bs} must be a multiple of 512",
                s.name
            ));
        }
        let size = s
            .size
            .unwrap_or_else(|| capacity_bytes.saturating_sub(s.offset));
        if s.offset.saturating_add(size) > capacity_bytes {
            return Err(format!(
                "job '{}': offset {} + size {size} runs past the simulated device ({capacity_bytes} bytes)",
                s.name, s.offset
            ));
        }
        if size < bs as u64 {
            return Err(format!(
                "job '{}': size {size} is smaller than one block",
                s.name
            ));
        }
        let class = match s.prioclass {
            Some(1) => IoPrioClass::Rt,
            Some(3) => IoPrioClass::Idle,
            _ => IoPrioClass::Be,
        };
        let ioprio = if s.prioclass.is_none() && s.prio.is_none() {
            IoPrio::DEFAULT
        } else {
            IoPrio::new(class, s.prio.unwrap_or(4))
        };
        let runtime = (s.runtime_ns > 0).then_some(Nanos(s.runtime_ns));
        let limit = Limit {
            ios: None,
            bytes: if s.time_based && runtime.is_some() {
                None
            } else {
                Some(size)
            },
            time: runtime,
        };
        let base_seed = s.randseed.unwrap_or(seed ^ 0x6d71_626b);
        for clone in 0..s.numjobs.max(1) {
            let idx = out.len();
            let cpu = if s.cpus_allowed.is_empty() {
                (idx % nr_cpus as usize) as u16
            } else {
                s.cpus_allowed[clone as usize % s.cpus_allowed.len()] as u16
            };
            if cpu >= nr_cpus {
                return Err(format!(
                    "job '{}': cpus_allowed names CPU {cpu}, but the simulation has {nr_cpus} (set --cpus)",
                    s.name
                ));
            }
            out.push(SimJob {
                name: if s.numjobs > 1 {
                    format!("{}.{clone}", s.name)
                } else {
                    s.name.clone()
                },
                cpu,
                iodepth: s.iodepth.max(1),
                batch: s.iodepth_batch_submit.max(1),
                issuer: idx as u32 + 1,
                group,
                ioprio,
                start_at: Nanos::ZERO,
                limit,
                source: Box::new(FioSource::new(
                    s.rw,
                    s.rwmixread,
                    bs,
                    s.offset,
                    size,
                    base_seed.wrapping_add(clone as u64),
                    s.fsync,
                )),
                kind: s.name.clone(),
            });
        }
    }
    Ok(out)
}

/// The cgroup id of job `s` in `blkcg` (0, the root, without `cgroup`).
pub fn join_cgroup(s: &JobSpec, blkcg: &Blkcg) -> Result<u32, String> {
    match (&s.cgroup, s.cgroup_weight) {
        (None, None) => Ok(0),
        (None, Some(_)) => Err(format!(
            "job '{}': cgroup_weight needs cgroup (the group to weigh)",
            s.name
        )),
        (Some(path), w) => blkcg
            .join(path, w)
            .map_err(|e| format!("job '{}': {e}", s.name)),
    }
}
