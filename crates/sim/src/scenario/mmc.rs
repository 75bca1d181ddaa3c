//! `mmc-blk-mq`: the MMC/SD stack on blk-mq. An eMMC card (queue depth 2) runs `dd` (1 GiB
//! sequential read) and `find` (a walk of small metadata reads), first the way the legacy
//! stack did (one queue with a scheduler in front), then on blk-mq with `none`, each with the
//! driver's asynchronous pre/post request hooks (DMA mapping overlapped with the previous
//! transfer) on and off.

use super::ScenarioError;
use super::{device, run_sim, Evidence, ScenarioOpts, ScenarioReport};
use crate::engine::SimConfig;
use crate::plot::{BarChart, BarSeries};
use crate::workload::{DdSource, FindSource, Limit, SimJob};
use crate::QueueSettings;
use std::fmt::Write;

/// The seed's dd figures in MB/s (before, after a refactoring step, with parallel issue,
/// with blk-mq) and find times in seconds (before, with blk-mq).
const SEED_DD: [(&str, f64); 4] = [
    ("before", 22.7),
    ("refactored", 19.6),
    ("parallel issue", 20.8),
    ("blk-mq", 22.1),
];
const SEED_FIND: [(&str, f64); 2] = [("before", 3.61), ("blk-mq", 4.13)];

#[derive(serde::Serialize)]
struct Row {
    #[serde(rename = "config")]
    name: &'static str,
    dd_mbs: f64,
    find_s: f64,
}

pub fn run(o: &ScenarioOpts) -> Result<ScenarioReport, ScenarioError> {
    let dd_bytes: u64 = if o.quick { 32 << 20 } else { 1 << 30 };
    let find_reads: u64 = if o.quick { 1000 } else { 12_000 };
    let configs: [(&'static str, &str, &str); 4] = [
        ("legacy: mq-deadline, async pre/post", "mq-deadline", "1"),
        ("legacy: mq-deadline, sync pre/post", "mq-deadline", "0"),
        ("blk-mq: none, sync pre/post", "none", "0"),
        ("blk-mq: none, async pre/post", "none", "1"),
    ];
    let mut rows = Vec::new();
    let mut evidence = String::new();
    for (name, sched, async_prep) in configs {
        let cfg = || SimConfig {
            seed: o.seed,
            nr_cpus: 2,
            device: device(
                &format!("emmc,async_prep={async_prep}"),
                QueueSettings {
                    scheduler: Some(sched.into()),
                    // The seed's kernel predates 6.5: flushes bypassed the scheduler.
                    flush_via_sched: false,
                    // The mail's kernel sent a lone bio down `blk_mq_submit_bio`'s unplugged path.
                    submit_bio_plugs: false,
                    ..QueueSettings::default()
                },
            ),
            profile: o.profile,
            ..SimConfig::default()
        };
        // dd: the page cache's read-ahead keeps two 128 KiB reads in flight.
        let dd = SimJob::new(
            "dd".into(),
            0,
            2,
            1,
            Limit::default(),
            Box::new(DdSource {
                next_sector: 0,
                bs_sectors: 256,
                end: dd_bytes / 512,
            }),
            "dd",
        );
        let r = run_sim(o, cfg(), vec![dd])?;
        let _ = writeln!(
            evidence,
            "dd, {name}: {}",
            Evidence::of(&r).line(&["card_busy_ms", "prep_hidden_ms"])
        );
        let dd_mbs = r.jobs[0].bytes as f64 / 1e6 / (r.jobs[0].runtime().0 as f64 / 1e9);
        // find: directory and inode blocks, one read at a time: each block is read before
        // the next is known. Measured on the kernel (scripts/find-twin.sh, ext4 with 100,000
        // files on a loop device, nr_requests 4): 0.69-0.71 reads in flight on average,
        // under every scheduler.
        let find = SimJob::new(
            "find".into(),
            0,
            1,
            2,
            Limit {
                ios: Some(find_reads),
                ..Limit::default()
            },
            Box::new(FindSource::new(1 << 11, 1 << 20)),
            "find",
        );
        let r = run_sim(o, cfg(), vec![find])?;
        let find_s = r.jobs[0].runtime().0 as f64 / 1e9;
        rows.push(Row {
            name,
            dd_mbs,
            find_s,
        });
    }
    let mut table = format!(
        "{:<38} {:>10} {:>14}\n",
        "configuration",
        "dd MB/s",
        format!("find {}k s", find_reads / 1000)
    );
    for r in &rows {
        let _ = writeln!(
            table,
            "{:<38} {:>10.1} {:>14.2}",
            r.name, r.dd_mbs, r.find_s
        );
    }
    let mut cmp = String::from("seed dd MB/s: ");
    cmp += &SEED_DD
        .iter()
        .map(|(n, v)| format!("{n} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    cmp += "\nseed find s:  ";
    cmp += &SEED_FIND
        .iter()
        .map(|(n, v)| format!("{n} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = write!(
        cmp,
        "\nseed blk-mq/before: dd {:.2}, find time {:.2}\nours blk-mq (async) / legacy (async): dd {:.2}, find time {:.2}; async/sync pre-post on blk-mq: dd {:.2}\n",
        SEED_DD[3].1 / SEED_DD[0].1,
        SEED_FIND[1].1 / SEED_FIND[0].1,
        rows[3].dd_mbs / rows[0].dd_mbs,
        rows[3].find_s / rows[0].find_s,
        rows[3].dd_mbs / rows[2].dd_mbs,
    );
    // The seed's direction: blk-mq keeps dd within 10% once requests are prepared
    // asynchronously (the seed: 0.97), and async beats sync by at least 5% (the seed's
    // synchronous post-processing step lost 14%). The seed's find also got slower without a
    // scheduler; find reads one block at a time, so a scheduler has nothing to order, and the
    // kernel agrees (scripts/find-twin.sh: the same reads, no faster with any scheduler): that
    // part is not claimed.
    let holds = rows[3].dd_mbs >= 0.9 * rows[0].dd_mbs && rows[3].dd_mbs >= 1.05 * rows[2].dd_mbs;
    cmp += "find: not reproduced; on the kernel no scheduler makes find faster either (scripts/find-twin.sh)\n";
    // The seed's four kernels and our four configurations are different steps, so each
    // gets its own group; the seed's bars sit where its step compares with ours.
    let chart = BarChart {
        title: "eMMC dd throughput".into(),
        y_label: "MB/s".into(),
        categories: rows.iter().map(|r| r.name.to_string()).collect(),
        series: vec![
            BarSeries::ours(
                "mqblk sim",
                0,
                rows.iter().map(|r| Some(r.dd_mbs)).collect(),
            ),
            // "before" is the legacy stack with asynchronous pre/post, the step moving
            // post-processing after completion made it synchronous, and the last is blk-mq.
            BarSeries::seed(
                "seed (before, post-processing moved, blk-mq)",
                0,
                vec![
                    Some(SEED_DD[0].1),
                    Some(SEED_DD[1].1),
                    None,
                    Some(SEED_DD[3].1),
                ],
            ),
        ],
    };
    Ok(ScenarioReport {
        name: "mmc-blk-mq",
        title: "MMC/SD on blk-mq".into(),
        table,
        comparison: cmp,
        json: serde_json::json!({ "rows": rows }),
        svg: chart.svg(),
        evidence: evidence
            + "mechanism: with asynchronous pre/post hooks the next request's DMA preparation runs while the card transfers the current one (prep_hidden_ms), so the card idles less between requests; the scheduler adds nothing a depth-2 card could use\n",
        direction_holds: holds,
        key_ratio: rows[3].dd_mbs / rows[2].dd_mbs,
        key_label: "dd MB/s on blk-mq, async pre/post over sync".into(),
    })
}
