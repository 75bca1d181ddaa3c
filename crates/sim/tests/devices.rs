//! Device models through the whole simulator: each behaves as its datasheet says it should.

use mqblk_core::{IoPrio, Nanos};
use mqblk_sim::workload::{FioSource, Limit, SimJob};
use mqblk_sim::{DeviceSpec, Sim, SimConfig, SimResult};
use mqblk_workload::RwMode;

fn job(cpu: u16, rw: RwMode, bs: u32, qd: u32, ios: u64, span: u64) -> SimJob {
    SimJob {
        name: format!("j{cpu}"),
        cpu,
        iodepth: qd,
        batch: 1,
        issuer: cpu as u32 + 1,
        group: 0,
        ioprio: IoPrio::DEFAULT,
        start_at: Nanos::ZERO,
        limit: Limit {
            ios: Some(ios),
            ..Limit::default()
        },
        source: Box::new(FioSource::new(rw, 100, bs, 0, span, 9, 0)),
        kind: "fio".into(),
    }
}

fn run(dev: &str, cpus: u16, jobs: Vec<SimJob>) -> SimResult {
    let cfg = SimConfig {
        nr_cpus: cpus,
        device: DeviceSpec::parse(dev).unwrap(),
        check_every: 100,
        ..SimConfig::default()
    };
    Sim::new(cfg, jobs)
        .and_then(Sim::run)
        .unwrap_or_else(|e| panic!("{dev}: {e}\n{}", e.dump()))
}

fn mean_lat_us(r: &SimResult) -> f64 {
    r.jobs[0].mean_lat_ns() / 1e3
}

fn stat(r: &SimResult, key: &str) -> u64 {
    r.model_stats
        .iter()
        .find(|(k, _)| *k == key)
        .map(|s| s.1)
        .unwrap()
}

#[test]
fn hdd_sequential_is_far_faster_than_random_and_uses_readahead() {
    let seq = run("hdd", 1, vec![job(0, RwMode::Read, 4096, 1, 2000, 1 << 30)]);
    let rnd = run(
        "hdd",
        1,
        vec![job(0, RwMode::RandRead, 4096, 1, 200, 900 << 30)],
    );
    let ratio = seq.total_iops() / rnd.total_iops();
    assert!(ratio > 10.0, "seq/random {ratio:.1}");
    assert!(stat(&seq, "readahead_hits") > 1500);
    // A 7200 rpm disk: ~8.8 ms average seek plus ~4.2 ms rotation.
    let lat = mean_lat_us(&rnd);
    assert!(
        (9_000.0..17_000.0).contains(&lat),
        "random read latency {lat:.0} us"
    );
}

#[test]
fn hdd_ncq_reorders_random_reads() {
    let plain = run(
        "hdd,ncq=1",
        1,
        vec![job(0, RwMode::RandRead, 4096, 32, 400, 100 << 30)],
    );
    let ncq = run(
        "hdd,ncq=32",
        1,
        vec![job(0, RwMode::RandRead, 4096, 32, 400, 100 << 30)],
    );
    let gain = ncq.total_iops() / plain.total_iops();
    assert!(gain > 1.5, "NCQ gain {gain:.2}");
}

#[test]
fn ssd_latency_and_parallelism() {
    let qd1 = run(
        "ssd",
        1,
        vec![job(0, RwMode::RandRead, 4096, 1, 2000, 64 << 30)],
    );
    let lat = mean_lat_us(&qd1);
    assert!((60.0..100.0).contains(&lat), "QD1 read latency {lat:.1} us");
    let qd128 = run(
        "ssd",
        4,
        (0..4)
            .map(|c| job(c, RwMode::RandRead, 4096, 128, 20_000, 64 << 30))
            .collect(),
    );
    let iops = qd128.total_iops();
    // Seed 002's SSDs: 258K IOPS.
    assert!((200e3..270e3).contains(&iops), "QD128 IOPS {iops:.0}");
    let serial = run(
        "ssd,queueing=0",
        1,
        vec![job(0, RwMode::RandRead, 4096, 32, 2000, 64 << 30)],
    );
    assert!(serial.total_iops() < iops / 10.0, "queueing=0 serialises");
}

#[test]
fn emmc_async_pre_post_beats_sync() {
    let a = run(
        "emmc,async_prep=1",
        1,
        vec![job(0, RwMode::Read, 131072, 2, 200, 1 << 30)],
    );
    let s = run(
        "emmc,async_prep=0",
        1,
        vec![job(0, RwMode::Read, 131072, 2, 200, 1 << 30)],
    );
    let (ma, ms) = (a.total_bw_mbs(), s.total_bw_mbs());
    assert!(ma > ms * 1.05, "async {ma:.1} MB/s vs sync {ms:.1}");
    assert!((19.0..26.0).contains(&ma), "{ma:.1} MB/s");
}

#[test]
fn raid_respects_can_queue() {
    let r = run(
        "raid,submit_queues=8,can_queue=16",
        8,
        (0..8)
            .map(|c| job(c, RwMode::RandRead, 4096, 8, 100, 10 << 30))
            .collect(),
    );
    assert!(stat(&r, "peak_outstanding") <= 16);
    assert!(r.driver.budget_denied > 0, "the host limit was reached");
    assert_eq!(r.completed, 800);
}

#[test]
fn virtio_two_queues_beat_one_with_four_jobs() {
    let go = |q: u32| {
        run(
            &format!("virtio,num_queues={q}"),
            4,
            (0..4)
                .map(|c| job(c, RwMode::RandRead, 4096, 64, 5000, 8 << 30))
                .collect(),
        )
        .total_iops()
    };
    let (one, two) = (go(1), go(2));
    assert!(two > one * 1.3, "1 queue {one:.0}, 2 queues {two:.0}");
}

#[test]
fn bad_parameters_name_the_key() {
    for (spec, key) in [
        ("hdd,rpm=0", "rpm"),
        ("ssd,channels=0", "channels"),
        ("virtio,num_queues=0", "num_queues"),
        ("emmc,read_mbs=x", "read_mbs"),
        ("raid,bogus=1", "bogus"),
    ] {
        let e =
            mqblk_sim::device::build(&DeviceSpec::parse(spec).unwrap(), mqblk_sim::SimRng::new(1))
                .err()
                .unwrap_or_else(|| panic!("{spec} accepted"));
        assert!(e.contains(key), "{spec}: {e}");
    }
}
