//! BFQ's behaviour in the simulator: service in proportion to weight, the IDLE class not
//! starved, idling for synchronous readers.

use mqblk_core::{IoPrio, IoPrioClass, Nanos};
use mqblk_sim::workload::{FioSource, Limit, SimJob};
use mqblk_sim::{DeviceSpec, Sim, SimConfig, SimResult};
use mqblk_workload::RwMode;

fn reader(
    name: &str,
    cpu: u16,
    rw: RwMode,
    qd: u32,
    prio: IoPrio,
    offset: u64,
    secs: u64,
) -> SimJob {
    SimJob {
        name: name.into(),
        cpu,
        iodepth: qd,
        batch: 1,
        issuer: cpu as u32 + 1,
        group: 0,
        ioprio: prio,
        start_at: Nanos::ZERO,
        limit: Limit {
            time: Some(Nanos::from_secs(secs)),
            ..Limit::default()
        },
        source: Box::new(FioSource::new(
            rw,
            100,
            65536,
            offset,
            8 << 30,
            cpu as u64 + 7,
            0,
        )),
        kind: "fio".into(),
    }
}

fn run(device: &str, tunables: &[(&str, &str)], jobs: Vec<SimJob>) -> SimResult {
    let cfg = SimConfig {
        nr_cpus: jobs.len() as u16,
        device: DeviceSpec::parse(device).unwrap(),
        scheduler: "bfq".into(),
        sched_tunables: tunables
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        check_every: 50,
        ..SimConfig::default()
    };
    Sim::new(cfg, jobs)
        .and_then(Sim::run)
        .unwrap_or_else(|e| panic!("{e}\n{}", e.dump()))
}

fn stat(r: &SimResult, k: &str) -> u64 {
    r.elv_stats.iter().find(|(n, _)| *n == k).map_or(0, |s| s.1)
}

#[test]
fn weights_split_bandwidth_proportionally() {
    // Level 0 weighs 80 and level 4 weighs 40: two always-busy sequential readers get 2:1.
    for device in ["ssd", "hdd"] {
        let r = run(
            device,
            &[],
            vec![
                reader(
                    "heavy",
                    0,
                    RwMode::Read,
                    8,
                    IoPrio::new(IoPrioClass::Be, 0),
                    0,
                    4,
                ),
                reader(
                    "light",
                    1,
                    RwMode::Read,
                    8,
                    IoPrio::new(IoPrioClass::Be, 4),
                    100 << 30,
                    4,
                ),
            ],
        );
        let (a, b) = (r.jobs[0].bytes as f64, r.jobs[1].bytes as f64);
        let ratio = a / b;
        assert!(
            (1.8..2.2).contains(&ratio),
            "{device}: heavy/light = {ratio:.2} ({a} / {b})"
        );
    }
}

#[test]
fn the_idle_class_is_served_at_least_every_200ms() {
    let r = run(
        "ssd",
        &[],
        vec![
            reader("busy", 0, RwMode::Read, 16, IoPrio::DEFAULT, 0, 3),
            reader(
                "idle",
                1,
                RwMode::RandRead,
                1,
                IoPrio::new(IoPrioClass::Idle, 0),
                10 << 30,
                3,
            ),
        ],
    );
    let idle = &r.jobs[1];
    assert!(
        idle.ios >= 10,
        "the idle reader got {} I/Os in 3 s",
        idle.ios
    );
    assert!(stat(&r, "idle_class_served") >= 10);
    // No wait much longer than the 200 ms guarantee (plus a budget's worth of service).
    assert!(
        idle.max_lat_ns() < 400_000_000,
        "idle reader waited {} ms",
        idle.max_lat_ns() / 1_000_000
    );
}

#[test]
fn synchronous_readers_are_idled_for_and_it_pays_on_a_disk() {
    // Two sequential readers at depth 1 on a disk: idling keeps each one's stream going
    // instead of seeking between them after every request.
    let jobs = || {
        vec![
            reader("a", 0, RwMode::Read, 1, IoPrio::DEFAULT, 0, 3),
            reader("b", 1, RwMode::Read, 1, IoPrio::DEFAULT, 400 << 30, 3),
        ]
    };
    let idling = run("hdd", &[], jobs());
    let none = run("hdd", &[("slice_idle", "0")], jobs());
    assert!(stat(&idling, "idles") > 0 && stat(&none, "idles") == 0);
    let (t1, t0) = (idling.total_bw_mbs(), none.total_bw_mbs());
    assert!(t1 > 1.5 * t0, "idling {t1:.1} MB/s vs none {t0:.1} MB/s");
}
