//! Parsed fio jobs turned into simulated jobs: the same resolution (`mqblk_workload::resolve`)
//! and the same job driver as `mqblk bench`, on virtual CPUs.

use crate::workload::{FioSource, Limit, SimJob};
use crate::SimError;
use mqblk_core::{Blkcg, Nanos};
use mqblk_workload::job::FileLayout;
use mqblk_workload::logs::JobLogs;
use mqblk_workload::{Job, JobSpec};

/// The files `specs` name, laid out on a simulated device of `capacity_bytes` (a file
/// without a size stands for the whole device, as a real file's size would).
pub fn layout(specs: &[JobSpec], capacity_bytes: u64) -> Result<FileLayout, SimError> {
    // A simulated device has no files to append to: `file_append`'s I/O starts at `offset`.
    let layout = FileLayout::plan(specs, |s, _| Ok((!s.file_append).then_some(capacity_bytes)))?;
    if layout.end() > capacity_bytes {
        return Err(SimError::Config(format!(
            "the jobs' files need {} bytes of the device (laid out one after another, {} MiB apart), and it has {capacity_bytes}",
            layout.end(),
            mqblk_workload::job::FILE_GAP >> 20
        )));
    }
    Ok(layout)
}

/// `specs` resolved on a simulated device of `capacity_bytes`, as `mqblk bench` resolves
/// them on a real one.
///
/// fio's `zonemode=zbd` jobs take the zones of a zoned model (`zones`: `zns`, `smr`), as
/// the device reports them; on any other model they emulate zones, as fio does on a
/// regular file: of their `zonesize`, or of the null device's `zone_size` where the jobs ask
/// for its zoned mode (the simulated null device is not zoned).
pub fn resolve(
    specs: &[JobSpec],
    capacity_bytes: u64,
    seed: u64,
    zones: Option<&mqblk_workload::zbd::DeviceZones>,
) -> Result<Vec<Job>, SimError> {
    let layout = layout(specs, capacity_bytes)?;
    let mut specs = specs.to_vec();
    let zone = match zones {
        Some(d) => d.zones.first().map(|z| z.len << 9),
        None => specs
            .iter()
            .find(|s| s.zoned)
            .map(|s| s.zone.zone_sectors << 9),
    };
    mqblk_workload::zbd::apply_zone_size(&mut specs, zone)?;
    let mut jobs = mqblk_workload::resolve(&specs, &layout, |_| Ok(capacity_bytes), seed)?;
    mqblk_workload::zbd::setup(&mut jobs, zones, &layout, capacity_bytes)?;
    Ok(jobs)
}

/// A zoned model's zones as it reports them new, for [`resolve`]; `None` for another.
pub fn zones_of(model: &dyn mqblk_models::DeviceModel) -> Option<mqblk_workload::zbd::DeviceZones> {
    let cfg = model.zoned()?;
    Some(mqblk_workload::zbd::DeviceZones {
        zones: model.report_zones(0, usize::MAX)?,
        max_open: cfg.max_open,
    })
}

/// One [`SimJob`] per job clone (`numjobs`), pinned by `cpus_allowed` or spread over the CPUs
/// in order. `seed` stands for the clock where a job asks for a fresh seed (`randrepeat=0`),
/// so runs stay reproducible. Jobs with `cgroup` join that group of `blkcg`.
pub fn from_specs(
    specs: &[JobSpec],
    nr_cpus: u16,
    capacity_bytes: u64,
    seed: u64,
    blkcg: &Blkcg,
    zones: Option<&mqblk_workload::zbd::DeviceZones>,
) -> Result<Vec<SimJob>, SimError> {
    let jobs = resolve(specs, capacity_bytes, seed, zones)?;
    let mut out = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let cpu = match job.cpu {
            Some(c) => c,
            None => job.index % nr_cpus as usize,
        };
        if cpu >= nr_cpus as usize {
            return Err(SimError::Config(format!(
                "job '{}': cpus_allowed names CPU {cpu}, but the simulation has {nr_cpus} (set --cpus)",
                job.name
            )));
        }
        out.push(SimJob {
            name: job.name.clone(),
            cpu: cpu as u16,
            iodepth: job.iodepth,
            batch: job.batch_submit,
            issuer: job.index as u32 + 1,
            group: job.join_cgroup(blkcg)?,
            ioprio: job.bio_ioprio(),
            // fio's `startdelay`.
            start_at: Nanos(job.start_delay_ns),
            barrier: job.barrier,
            exit: job.exit,
            // fio's `wait_for`: every clone of the named job.
            after: jobs
                .iter()
                .filter(|o| Some(o.spec) == job.wait_for)
                .map(|o| o.index as u32)
                .collect(),
            // The job driver decides when the job ends (runtime, one pass, verify).
            limit: Limit::default(),
            ramp: Nanos(job.ramp_ns),
            batch_complete_min: job.batch_complete_min.max(1),
            iodepth_low: job.iodepth_low,
            bw_avg_ms: job.bw_avg_ms,
            iops_avg_ms: job.iops_avg_ms,
            batch_complete_max: job.batch_complete_max,
            source: Box::new(FioSource::of(job)),
            kind: job.name.clone(),
            logs: job.logs.any().then(|| JobLogs::new(job.logs.clone())),
            steady: job.steady,
            group_reporting: job.group_reporting,
            exec_prerun: job.exec_prerun.clone(),
            exec_postrun: job.exec_postrun.clone(),
            bvecs: specs[job.spec].buffer_bvecs(),
        });
    }
    Ok(out)
}
