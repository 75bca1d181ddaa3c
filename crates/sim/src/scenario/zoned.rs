//! `zone-write-plugging`: what zone write plugging (Linux 6.10) changed against mq-deadline's
//! zone write locking before it, on the `zns` and `smr` models.
//!
//! Four fio writers (`zonemode=zbd`) each write their own zone sequentially, 64 KiB at a
//! depth of 128, beside a reader of what they wrote (4 KiB at random below the write
//! pointers, one at a time, from 100 ms on), under mq-deadline. With locking, a zone's
//! writes wait in the scheduler as requests, one at a time let through to the device; with
//! plugging they wait as bios in the zone's plug, holding no scheduler tag, and one at a time
//! becomes a request. The series' cover letter ("Zone write plugging", v4) names the
//! difference it expects: plugged bios "do not hold scheduling tags and thus do not prevent
//! other BIOs from being submitted to the device (reads or writes to other zones)". It gives
//! no figure for it. Every run checks that no write reaches the device off its zone's write
//! pointer (`SimConfig::zoned_in_order`): a run that saw one fails.

use super::{device, run_sim, Evidence, ScenarioError, ScenarioOpts, ScenarioReport};
use crate::engine::{SimConfig, SimResult};
use crate::plot::{BarChart, BarSeries};
use crate::QueueSettings;
use mqblk_workload::Ddir;

/// The devices, as `--device` spells them, and their zone sizes in bytes.
const DEVICES: [(&str, u64); 2] = [("zns", 2 << 30), ("smr", 256 << 20)];

/// One run's figures.
#[derive(serde::Serialize, Clone, Copy, Default)]
struct Row {
    writers_mbs: f64,
    reader_iops: f64,
    reader_mean_us: f64,
    reader_p99_us: f64,
    writer_mean_ms: f64,
}

#[derive(serde::Serialize)]
struct Device {
    device: &'static str,
    /// mq-deadline's zone write locking (before 6.10), then zone write plugging (6.10 on).
    locking: Row,
    plugging: Row,
}

/// The job file each run takes, for a device of zones of `zone` bytes.
fn jobs_text(zone: u64, runtime_ms: u64) -> String {
    format!(
        "[global]\nzonemode=zbd\ndirect=1\ntime_based\nruntime={runtime_ms}ms\n\
         [writers]\nrw=write\nbs=64k\niodepth=128\nnumjobs=4\noffset_increment={zone}\nsize={zone}\n\
         [reader]\nrw=randread\nbs=4k\niodepth=1\nsize={}\nstartdelay=100ms\n",
        4 * zone
    )
}

fn row(r: &SimResult) -> Row {
    let writers: Vec<_> = r.jobs.iter().filter(|j| j.name == "writers").collect();
    let reader = r.jobs.iter().find(|j| j.name == "reader");
    let rd = reader.map(|j| j.stats.dir(Ddir::Read));
    Row {
        writers_mbs: writers.iter().map(|j| j.bw_mbs()).sum(),
        reader_iops: reader.map_or(0.0, |j| j.iops()),
        reader_mean_us: rd.map_or(0.0, |d| d.lat.mean() / 1e3),
        reader_p99_us: rd
            .and_then(|d| d.clat.percentile(99.0))
            .map_or(0.0, |ns| ns as f64 / 1e3),
        writer_mean_ms: writers.iter().map(|j| j.mean_lat_ns()).sum::<f64>()
            / writers.len().max(1) as f64
            / 1e6,
    }
}

pub fn run(o: &ScenarioOpts) -> Result<ScenarioReport, ScenarioError> {
    let runtime_ms = if o.quick { 300 } else { 2000 };
    let mut out = Vec::new();
    let mut evidence = String::new();
    for (spec, zone) in DEVICES {
        let mut rows = [Row::default(); 2];
        for (i, plugging) in [false, true].into_iter().enumerate() {
            let specs =
                mqblk_workload::parse_job_text("zone-write-plugging", &jobs_text(zone, runtime_ms))
                    .map_err(|e| ScenarioError::Invalid(e.to_string()))?;
            let model = crate::device::build(
                &crate::device::DeviceSpec::parse(spec)?,
                crate::SimRng::new(0),
            )?;
            let zones = crate::jobs::zones_of(model.as_ref());
            let capacity = model.capacity_sectors() * 512;
            let cfg = SimConfig {
                seed: o.seed,
                nr_cpus: 5,
                device: device(
                    spec,
                    QueueSettings {
                        scheduler: Some("mq-deadline".into()),
                        zone_write_plugging: plugging,
                        ..QueueSettings::default()
                    },
                ),
                zoned_in_order: true,
                profile: o.profile,
                ..SimConfig::default()
            };
            let jobs = crate::jobs::from_specs(
                &specs,
                cfg.nr_cpus,
                capacity,
                o.seed,
                &cfg.device.blkcg,
                zones.as_ref(),
            )?;
            let r = run_sim(o, cfg, jobs)?;
            rows[i] = row(&r);
            evidence += &format!(
                "{spec}, {}: {}\n",
                if plugging { "plugging" } else { "locking" },
                Evidence::of(&r).line(&["zone_resets", "seeks", "merged", "dispatched"])
            );
        }
        out.push(Device {
            device: spec,
            locking: rows[0],
            plugging: rows[1],
        });
    }
    let mut table = String::from(
        "device  ordering   writers MB/s  write lat ms  reader IOPS  reader mean us  reader p99 us\n",
    );
    for d in &out {
        for (name, r) in [("locking", d.locking), ("plugging", d.plugging)] {
            table += &format!(
                "{:<7} {:<9} {:>12.1} {:>13.1} {:>12.0} {:>15.0} {:>14.0}\n",
                d.device,
                name,
                r.writers_mbs,
                r.writer_mean_ms,
                r.reader_iops,
                r.reader_mean_us,
                r.reader_p99_us
            );
        }
    }
    table += "writes that reached a zone off its write pointer: none (every run checks it)\n";
    // The cover letter's claim: plugging frees the reader from the writers' tags.
    let ratio = |d: &Device| {
        let (l, p) = (d.locking.reader_iops, d.plugging.reader_iops);
        if l > 0.0 {
            p / l
        } else {
            0.0
        }
    };
    let ratios: Vec<f64> = out.iter().map(ratio).collect();
    let key = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let comparison = format!(
        "the cover letter: plugged bios hold no scheduler tag, so reads and other zones' writes are not held back (no figure given)\nours: reader IOPS plugging/locking {} (the benefit counts where it is 1.1 or more on both devices: here each writer's queued writes merge into few requests under both, so locking never runs the scheduler out of tags)\n",
        out.iter()
            .zip(&ratios)
            .map(|(d, r)| format!("{} x{r:.2}", d.device))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let chart = BarChart {
        title: "zone write locking vs plugging, mq-deadline: the reader".into(),
        y_label: "reader IOPS".into(),
        categories: out.iter().map(|d| d.device.to_string()).collect(),
        series: vec![
            BarSeries::ours(
                "locking (before 6.10)",
                0,
                out.iter().map(|d| Some(d.locking.reader_iops)).collect(),
            ),
            BarSeries::ours(
                "plugging (6.10 on)",
                1,
                out.iter().map(|d| Some(d.plugging.reader_iops)).collect(),
            ),
        ],
    };
    Ok(ScenarioReport {
        name: "zone-write-plugging",
        title: "Zone write plugging against mq-deadline's zone write locking".into(),
        table,
        comparison,
        evidence,
        json: serde_json::json!({ "devices": out }),
        svg: chart.svg(),
        // The letter expects the reader to gain; counted with a margin.
        direction_holds: key >= 1.1,
        key_ratio: key,
        key_label: "reader IOPS, plugging over locking (the lower of the two devices)".into(),
    })
}
