//! BFQ's behaviour in the simulator, each a ratio with a stated tolerance over fixed seeds:
//! service in proportion to queue and group weights (nested too), the IDLE class not starved,
//! idling for synchronous readers, low latency for a new reader under a writer and for a
//! periodic one (soft real-time), strict guarantees, injection and its adaptive limit, the
//! waker of a queue, the automatic max_budget, and cooperating queues merged on a disk, not
//! on a queueing SSD, and split when they stop cooperating. `-- --nocapture` prints figures.

use mqblk_core::{Blkcg, IoPrio, IoPrioClass, Nanos};
use mqblk_sim::workload::{FioSource, InterleavedSource, Limit, SimJob, Source};
use mqblk_sim::{DeviceSpec, Sim, SimConfig, SimResult};
use mqblk_workload::RwMode;
use std::sync::Arc;

const SEEDS: [u64; 3] = [1, 2, 3];

/// A 64 KiB fio reader or writer at `offset` bytes, issuer `cpu + 1`, at priority `prio`.
fn reader(
    name: &str,
    cpu: u16,
    rw: RwMode,
    qd: u32,
    prio: IoPrio,
    offset: u64,
    secs: u64,
) -> SimJob {
    let src = FioSource::new(rw, 100, 65536, offset, 8 << 30, cpu as u64 + 7, 0);
    let mut j = job(name, cpu, qd, 0, Box::new(src), secs);
    j.ioprio = prio;
    j.kind = "fio".into();
    j
}

/// A best-effort random reader at QD8 beside an IDLE-class one at QD32 whose region starts
/// `idle_offset` bytes in, both for `secs` seconds.
fn be_beside_idle(idle_offset: u64, secs: u64) -> Vec<SimJob> {
    vec![
        reader("be", 0, RwMode::RandRead, 8, IoPrio::DEFAULT, 0, secs),
        reader(
            "idle",
            1,
            RwMode::RandRead,
            32,
            IoPrio::new(IoPrioClass::Idle, 0),
            idle_offset,
            secs,
        ),
    ]
}

fn run(device: &str, tunables: &[(&str, &str)], jobs: Vec<SimJob>) -> SimResult {
    run_with(device, tunables, jobs, Arc::new(Blkcg::new()), 1)
}

fn run_with(
    device: &str,
    tunables: &[(&str, &str)],
    jobs: Vec<SimJob>,
    blkcg: Arc<Blkcg>,
    seed: u64,
) -> SimResult {
    let mut cfg = SimConfig {
        seed,
        nr_cpus: jobs.len() as u16,
        device: mqblk_sim::DeviceConfig::model(
            DeviceSpec::parse(device).unwrap(),
            mqblk_sim::QueueSettings {
                scheduler: Some("bfq".into()),
                sched_tunables: tunables
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..mqblk_sim::QueueSettings::default()
            },
        ),
        check_every: 50,
        ..SimConfig::default()
    };
    cfg.device.blkcg = blkcg;
    Sim::new(cfg, jobs)
        .and_then(Sim::run)
        .unwrap_or_else(|e| panic!("{e}\n{}", e.dump()))
}

/// BFQ's typed statistics at the end of a run.
fn bfq(r: &SimResult) -> mqblk_sched::BfqStats {
    *r.queue.sched.bfq()
}

#[test]
fn ioprio_weights_split_a_disk_proportionally() {
    // Level 0 weighs 80 and level 4 weighs 40: two always-busy sequential readers get 2:1.
    // On a disk BFQ idles for both. On a queueing SSD it does not idle for the queue of
    // the lowest weight (the kernel's `bfq_asymmetric_scenario`: idling for it protects
    // nobody else), so there the lighter reader gets less than its share; between
    // cgroups (below) both devices keep the ratio. Budgets grow and the light reader's
    // interactive raising (it has the default weight) ends during the first seconds
    // (after `max_service_from_wr`, 120000 sectors): the first 3 s are not counted.
    for seed in SEEDS {
        let mut jobs = vec![
            reader(
                "heavy",
                0,
                RwMode::Read,
                8,
                IoPrio::new(IoPrioClass::Be, 0),
                0,
                10,
            ),
            reader(
                "light",
                1,
                RwMode::Read,
                8,
                IoPrio::new(IoPrioClass::Be, 4),
                100 << 30,
                10,
            ),
        ];
        for j in &mut jobs {
            j.ramp = Nanos::from_secs(3);
        }
        let r = run_with("hdd", &[], jobs, Arc::new(Blkcg::new()), seed);
        let (a, b) = (r.jobs[0].bytes as f64, r.jobs[1].bytes as f64);
        let ratio = a / b;
        eprintln!("ioprio 0 vs 4 on hdd, seed {seed}: heavy/light {ratio:.2}");
        assert!(
            (1.8..2.2).contains(&ratio),
            "seed {seed}: heavy/light = {ratio:.2} ({a} / {b})"
        );
    }
}

#[test]
fn readers_of_two_weights_on_a_queueing_ssd_do_not_preempt_each_other_back_and_forth() {
    // Priorities 0 and 7 weigh 80 and 10. On a queueing SSD BFQ does not idle for the
    // lighter queue (the smallest weight: no asymmetry for it) but does for the heavier.
    // When the lighter reader's request arrives with budget left from a turn cut short, it
    // preempts the heavier one to recover that "service hole"; the heavier queue, which
    // must be idled for, then stays busy (`__bfq_bfqq_expire`), so its next request is not
    // a new arrival and cannot preempt back. Otherwise the two preempt each other at almost
    // every request and come nearer even shares (68% here before that rule, 97% with it). On
    // this machine's virtio disk the kernel gave the heavier reader 88.5% (88.4-88.5, three
    // repeats of `mqblk twin --schedulers=bfq examples/twin/prio-seq-readers.fio`).
    for seed in SEEDS {
        let be = |level| IoPrio::new(IoPrioClass::Be, level);
        let jobs = vec![
            reader("prio0", 0, RwMode::Read, 4, be(0), 0, 2),
            reader("prio7", 1, RwMode::Read, 4, be(7), 100 << 30, 2),
        ];
        let r = run_with("ssd", &[], jobs, Arc::new(Blkcg::new()), seed);
        let (a, b) = (r.jobs[0].bytes as f64, r.jobs[1].bytes as f64);
        let share = a / (a + b);
        let s = bfq(&r).counters;
        eprintln!(
            "prio 0 vs 7 on ssd, seed {seed}: share {share:.3}, {} preemptions in {} dispatches",
            s.preempted, s.dispatched
        );
        assert!(share > 0.8, "seed {seed}: prio0's share {share:.3}");
        assert!(s.preempted * 20 < s.dispatched, "seed {seed}: {s:?}");
    }
}

#[test]
fn the_idle_class_is_served_every_200ms_and_preempted_by_best_effort() {
    // `bfq_lookup_next_entity`: once 200 ms passed since the IDLE class was last served
    // (`BFQ_CL_IDLE_TIMEOUT`), the next selection serves it; the queue in service keeps its
    // turn (at most `timeout_sync`, 125 ms), so the wait is bounded by their sum.
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
    assert!(bfq(&r).counters.idle_class_served >= 10);
    // The IDLE class never preempts; the best-effort queue preempts it whenever it gets
    // requests again while the idle one is served (`bfq_bfqq_higher_class_or_weight`), so
    // the idle reader gets about one request per 200 ms window.
    assert!(
        idle.ios <= 3 * bfq(&r).counters.idle_class_served,
        "the idle reader got {} I/Os in {} turns",
        idle.ios,
        bfq(&r).counters.idle_class_served
    );
    assert!(
        idle.max_lat_ns() < 360_000_000,
        "idle reader waited {} ms",
        idle.max_lat_ns() / 1_000_000
    );
}

#[test]
fn a_reader_that_keeps_requests_queued_lets_nothing_be_injected_while_it_is_idled_for() {
    // The injection limit of the queue in service starts at 0 and is raised only from
    // measured service times, and a request is measured only when its issuer has no other
    // one outstanding (`bfq_add_request`: `RQ_BIC(rq)->requests <= 1`). A random reader at
    // QD8 never is, so while BFQ idles for it (an IDLE-class queue is busy too: two classes
    // make the scenario asymmetric) nothing of the IDLE-class reader's is injected, and
    // that reader gets little beyond its turn every 200 ms. On this machine's virtio disk
    // the kernel gave it 0.1% of the bandwidth (0.0-18.6, three repeats of `mqblk twin
    // --schedulers=bfq examples/twin/idle-class.fio`); measuring every arrival instead,
    // mqblk gave it 13-18% there, and injected 32 of its requests here.
    for seed in SEEDS {
        let r = run_with(
            "virtio",
            &[],
            be_beside_idle(10 << 30, 2),
            Arc::new(Blkcg::new()),
            seed,
        );
        let (be, idle) = (r.jobs[0].bytes as f64, r.jobs[1].bytes as f64);
        let share = idle / (be + idle);
        let c = bfq(&r).counters;
        eprintln!(
            "seed {seed}: idle share {share:.4}, injected {}",
            c.injected
        );
        assert_eq!(c.injected, 0, "seed {seed}: {c:?}");
        assert!(
            share < 0.02,
            "seed {seed}: the idle reader's share {share:.4}: {c:?}"
        );
    }
}

#[test]
fn an_idle_class_queue_gets_one_request_per_turn_while_others_wait() {
    // `bfq_dispatch_rq_from_bfqq`: an IDLE-class queue in service is expired after each
    // request while another queue is busy, so a deep idle-class reader beside a best-effort
    // one on a disk gets a few requests a second (the kernel starved it to about 5 IOPS
    // against a QD8 reader in the audit's measurement), not a share of the disk.
    let r = run("hdd", &[], be_beside_idle(100 << 30, 5));
    let (be, idle) = (r.jobs[0].ios, r.jobs[1].ios);
    assert!(
        idle >= 5,
        "the idle reader was starved outright: {idle} I/Os in 5 s"
    );
    assert!(
        (idle as f64) < 0.1 * be as f64,
        "the idle reader got {idle} I/Os against the best-effort reader's {be}"
    );
}

#[test]
fn synchronous_readers_are_idled_for_and_it_pays_on_a_disk() {
    // Two sequential readers at depth 1 on a disk: idling keeps each one's stream going
    // instead of seeking between them after every request. Without weight raising: new
    // readers are raised as interactive for their first seconds, and no queue is idled for
    // its throughput while one is raised (below).
    let jobs = || {
        vec![
            reader("a", 0, RwMode::Read, 1, IoPrio::DEFAULT, 0, 3),
            reader("b", 1, RwMode::Read, 1, IoPrio::DEFAULT, 400 << 30, 3),
        ]
    };
    let idling = run("hdd", &[("low_latency", "0")], jobs());
    let none = run("hdd", &[("low_latency", "0"), ("slice_idle", "0")], jobs());
    assert!(bfq(&idling).counters.idles > 0 && bfq(&none).counters.idles == 0);
    let (t1, t0) = (idling.total_bw_mbs(), none.total_bw_mbs());
    assert!(t1 > 1.5 * t0, "idling {t1:.1} MB/s vs none {t0:.1} MB/s");
}

#[test]
fn no_queue_is_idled_for_its_throughput_while_queues_are_raised() {
    // `idling_boosts_thr_without_issues` ends in `&& bfqd->wr_busy_queues == 0`: while any
    // queue is raised, idling for throughput stops, so raised queues get the device's
    // requests sooner. The same two new sequential readers, both raised as interactive
    // (`low_latency`, the default) for longer than this second: neither is the only busy
    // queue, the weights tree holds no raised queue (no asymmetry), and neither is raised
    // while others are not (`idling_needed_for_service_guarantees`), so they are not idled
    // for and the disk seeks between them.
    let jobs = || {
        vec![
            reader("a", 0, RwMode::Read, 1, IoPrio::DEFAULT, 0, 1),
            reader("b", 1, RwMode::Read, 1, IoPrio::DEFAULT, 400 << 30, 1),
        ]
    };
    let raised = run("hdd", &[], jobs());
    let plain = run("hdd", &[("low_latency", "0")], jobs());
    let (i1, i0) = (bfq(&raised).counters.idles, bfq(&plain).counters.idles);
    assert!(
        i0 > 20 && i1 * 10 < i0,
        "idles raised {i1}, not raised {i0}"
    );
    let (t1, t0) = (raised.total_bw_mbs(), plain.total_bw_mbs());
    assert!(
        t0 > 1.5 * t1,
        "raised {t1:.1} MB/s vs not raised {t0:.1} MB/s"
    );
}

/// A job of `source` on CPU `cpu` for issuer `cpu + 1` in cgroup `group`.
fn job(name: &str, cpu: u16, qd: u32, group: u32, source: Box<dyn Source>, secs: u64) -> SimJob {
    SimJob {
        group,
        ..SimJob::new(
            name.into(),
            cpu,
            qd,
            cpu as u32 + 1,
            Limit {
                time: Some(Nanos::from_secs(secs)),
                ..Limit::default()
            },
            source,
            name,
        )
    }
}

fn seq(rw: RwMode, offset_gib: u64, seed: u64) -> Box<dyn Source> {
    Box::new(FioSource::new(
        rw,
        100,
        65536,
        offset_gib << 30,
        8 << 30,
        seed,
        0,
    ))
}

#[test]
fn cgroup_weights_200_100_give_2_to_1() {
    // Two always-busy sequential readers, each in a cgroup of its own, weights 200 and 100.
    for device in ["ssd", "hdd"] {
        for seed in SEEDS {
            let cg = Arc::new(Blkcg::new());
            let a = cg.set_weight("heavy", 200).unwrap();
            let b = cg.set_weight("light", 100).unwrap();
            let r = run_with(
                device,
                &[],
                vec![
                    job("heavy", 0, 8, a, seq(RwMode::Read, 0, seed), 4),
                    job("light", 1, 8, b, seq(RwMode::Read, 100, seed + 1), 4),
                ],
                cg,
                seed,
            );
            let ratio = r.jobs[0].bytes as f64 / r.jobs[1].bytes as f64;
            eprintln!("cgroups 200:100 {device} seed {seed}: {ratio:.3}");
            assert!(
                (1.8..=2.2).contains(&ratio),
                "{device} seed {seed}: 200:100 gave {ratio:.2}"
            );
        }
    }
}

#[test]
fn groups_share_by_group_weight_whatever_their_number_of_issuers() {
    // Group "one" has a single reader, group "many" three; the groups' shares follow the
    // groups' weights (2:1, then 1:1), not the number of queues.
    for (w_one, w_many, want) in [(200, 100, 2.0), (100, 100, 1.0)] {
        for seed in SEEDS {
            let cg = Arc::new(Blkcg::new());
            let one = cg.set_weight("one", w_one).unwrap();
            let many = cg.set_weight("many", w_many).unwrap();
            let mut jobs = vec![job("one", 0, 8, one, seq(RwMode::Read, 0, seed), 4)];
            for i in 1..4u16 {
                let src = seq(RwMode::Read, 100 * i as u64, seed + i as u64);
                jobs.push(job("many", i, 8, many, src, 4));
            }
            let r = run_with("ssd", &[], jobs, cg, seed);
            let a = r.jobs[0].bytes as f64;
            let b: f64 = r.jobs[1..].iter().map(|j| j.bytes as f64).sum();
            let ratio = a / b;
            eprintln!("groups {w_one}:{w_many}, 1 vs 3 issuers, seed {seed}: {ratio:.3}");
            assert!(
                (ratio / want - 1.0).abs() <= 0.10,
                "seed {seed}: weights {w_one}:{w_many} gave {ratio:.2} ({a} vs {b})"
            );
        }
    }
}

#[test]
fn a_new_reader_gets_low_latency_under_a_heavy_writer_with_low_latency_on() {
    // A sequential writer keeps the disk busy; a reader starts a second later and reads
    // small random blocks one at a time. Weight raising serves it first. Not by much
    // more than 2x: its raised turn (twice the minimum budget, 30 budget timeouts) holds
    // the writer's arrivals off for over 500 ms, so the writer is raised too
    // (`bfq_add_request`'s async raising); with both raised the reader is no longer idled
    // for (`idling_needed_for_service_guarantees`) and waits behind writes in the disk.
    // The writer's requests grow by merging to 168 pages (libahci's `max_segments`, 672
    // KiB), so a read waits behind one for ~10 ms without raising and ~7 ms with it (at
    // 1280 KiB the wait without raising was 25 ms).
    for seed in SEEDS {
        let jobs = || {
            let mut reader = job(
                "reader",
                1,
                1,
                0,
                Box::new(FioSource::new(
                    RwMode::RandRead,
                    100,
                    4096,
                    0,
                    64 << 30,
                    seed,
                    0,
                )),
                2,
            );
            reader.start_at = Nanos::from_secs(1);
            vec![
                job("writer", 0, 32, 0, seq(RwMode::Write, 200, seed), 3),
                reader,
            ]
        };
        let on = run_with("hdd", &[], jobs(), Arc::new(Blkcg::new()), seed);
        let off = run_with(
            "hdd",
            &[("low_latency", "0")],
            jobs(),
            Arc::new(Blkcg::new()),
            seed,
        );
        assert!(bfq(&on).counters.wr_interactive > 0 && bfq(&off).counters.wr_interactive == 0);
        let (l_on, l_off) = (on.jobs[1].mean_lat_ns(), off.jobs[1].mean_lat_ns());
        eprintln!(
            "new reader under a writer, seed {seed}: {:.2} ms with low_latency, {:.2} ms without",
            l_on / 1e6,
            l_off / 1e6
        );
        assert!(
            l_on * 1.3 < l_off,
            "seed {seed}: reader mean latency {:.1} ms with low_latency, {:.1} ms without",
            l_on / 1e6,
            l_off / 1e6
        );
    }
}

/// `ways` issuers at depth 1 reading one 2 GiB file in interleaved stripes of `stripe`
/// sectors, for 3 s.
fn interleaved(
    device: &str,
    tunables: &[(&str, &str)],
    ways: u64,
    stripe: u32,
    switch_after: Option<u64>,
    seed: u64,
) -> SimResult {
    let jobs = (0..ways as u16)
        .map(|part| {
            let mut src = InterleavedSource::new(1 << 20, 1 << 22, stripe, ways, part as u64);
            src.switch_after = switch_after;
            job("part", part, 1, 0, Box::new(src), 3)
        })
        .collect();
    run_with(device, tunables, jobs, Arc::new(Blkcg::new()), seed)
}

#[test]
fn interleaved_readers_are_merged_on_a_disk_and_not_on_a_queueing_ssd() {
    for seed in SEEDS {
        // Two issuers reading alternate 16 KiB stripes of one file.
        // The position-based merge (`bfq_setup_cooperator`) alone: stable merging, which
        // merges queues made together on any device, is off on the SSD.
        // Without weight raising, which stops idling for new readers (see
        // `no_queue_is_idled_for_its_throughput_while_queues_are_raised`).
        let hdd = interleaved("hdd", &[("low_latency", "0")], 2, 32, None, seed);
        let ssd = interleaved("ssd", &[("stable_merging", "0")], 2, 32, None, seed);
        assert!(
            bfq(&hdd).counters.queue_merges >= 1,
            "hdd seed {seed}: no merge"
        );
        assert_eq!(
            bfq(&ssd).counters.queue_merges,
            0,
            "ssd seed {seed}: merged"
        );
        assert_eq!(u64::from(bfq(&ssd).nonrot_with_queueing), 1);
        assert_eq!(u64::from(bfq(&hdd).nonrot_with_queueing), 0);
        // Four issuers with 128 KiB stripes: each one's gaps are larger than the disk's
        // read-ahead covers, so apart they seek; merged they are one sequential stream.
        let merged = interleaved("hdd", &[("low_latency", "0")], 4, 256, None, seed);
        let apart = interleaved(
            "hdd",
            &[("low_latency", "0"), ("queue_merging", "0")],
            4,
            256,
            None,
            seed,
        );
        let (m, a) = (merged.total_bw_mbs(), apart.total_bw_mbs());
        eprintln!(
            "4 interleaved readers on hdd, seed {seed}: merged {m:.1} MB/s, apart {a:.1} MB/s"
        );
        // Once one queue holds the others' neighbours, their requests join its queued ones
        // at insert (`elv_attempt_insert_merge`) instead of going on to merge queues.
        let c = bfq(&merged).counters;
        assert!(
            c.queue_merges >= 1 && c.rq_merges > c.dispatched / 2,
            "{c:?}"
        );
        assert!(
            m > 2.0 * a,
            "hdd seed {seed}: merged {m:.1} MB/s, apart {a:.1} MB/s"
        );
    }
}

#[test]
fn a_merged_queue_splits_when_the_pattern_stops() {
    for seed in SEEDS {
        // After 500 reads each, the issuers read at random places of the file.
        let r = interleaved("hdd", &[("low_latency", "0")], 2, 32, Some(500), seed);
        assert!(bfq(&r).counters.queue_merges >= 1, "seed {seed}: no merge");
        assert!(
            bfq(&r).counters.queue_splits >= 1,
            "seed {seed}: no split after the pattern stopped"
        );
        // Still cooperating: never split.
        let r = interleaved("hdd", &[("low_latency", "0")], 2, 32, None, seed);
        assert_eq!(
            bfq(&r).counters.queue_splits,
            0,
            "seed {seed}: split while cooperating"
        );
    }
}

#[test]
fn nested_groups_share_down_the_hierarchy() {
    // a (100) holds a/x (300) and a/y (100); b (100) is a's sibling. a and b get half each,
    // and a's half goes 3:1 to x and y: x 37.5%, y 12.5%, b 50%.
    for seed in SEEDS {
        let cg = Arc::new(Blkcg::new());
        let x = cg.set_weight("a/x", 300).unwrap();
        let y = cg.set_weight("a/y", 100).unwrap();
        let b = cg.set_weight("b", 100).unwrap();
        let jobs = vec![
            job("x", 0, 8, x, seq(RwMode::Read, 0, seed), 4),
            job("y", 1, 8, y, seq(RwMode::Read, 100, seed + 1), 4),
            job("b", 2, 8, b, seq(RwMode::Read, 200, seed + 2), 4),
        ];
        let r = run_with("ssd", &[], jobs, cg, seed);
        let total: f64 = r.jobs.iter().map(|j| j.bytes as f64).sum();
        for (j, want) in r.jobs.iter().zip([0.375, 0.125, 0.5]) {
            let share = j.bytes as f64 / total;
            eprintln!(
                "nested groups, seed {seed}: {} {share:.3} (want {want})",
                j.name
            );
            assert!(
                (share / want - 1.0).abs() <= 0.10,
                "seed {seed}: {} got {share:.3}, want {want}",
                j.name
            );
        }
    }
}

/// Reads the next `bs` bytes of a file every `period`, one at a time: a media player.
struct Periodic {
    period: Nanos,
    bs: u32,
    next_io: bool,
    at: u64,
}

impl Source for Periodic {
    fn next(
        &mut self,
        _now: mqblk_core::Nanos,
        rng: &mut mqblk_sim::SimRng,
    ) -> mqblk_sim::workload::Next {
        use mqblk_sim::workload::{IoReq, Next};
        self.next_io = !self.next_io;
        if !self.next_io {
            return Next::Think(self.period);
        }
        let _ = rng;
        self.at += (self.bs / 512) as u64;
        Next::Io(IoReq {
            op: mqblk_core::ReqOp::Read,
            sector: (300u64 << 21) + self.at,
            nr_sectors: self.bs / 512,
            flags: mqblk_core::ReqFlags::SYNC,
            ioprio: None,
        })
    }
}

#[test]
fn a_periodic_low_rate_reader_is_soft_real_time() {
    // 64 KiB every 40 ms is 3200 sectors/s, under the 7000 of soft real-time, beside a
    // sequential reader that would keep the disk for whole budgets.
    for seed in SEEDS {
        let jobs = || {
            let player = Periodic {
                period: Nanos::from_millis(40),
                bs: 65536,
                next_io: false,
                at: 0,
            };
            vec![
                job("reader", 0, 8, 0, seq(RwMode::Read, 0, seed), 4),
                job("player", 1, 1, 0, Box::new(player), 4),
            ]
        };
        // Two unrelated applications: started together they would count as one
        // application's flows and be merged for good (stable merging), so it is off here.
        let on = run_with(
            "hdd",
            &[("stable_merging", "0")],
            jobs(),
            Arc::new(Blkcg::new()),
            seed,
        );
        let off = run_with(
            "hdd",
            &[("low_latency", "0"), ("stable_merging", "0")],
            jobs(),
            Arc::new(Blkcg::new()),
            seed,
        );
        assert!(
            bfq(&on).counters.wr_soft_rt >= 5,
            "seed {seed}: {:?}",
            on.queue.sched
        );
        assert_eq!(bfq(&off).counters.wr_soft_rt, 0);
        let (l_on, l_off) = (on.jobs[1].mean_lat_ns(), off.jobs[1].mean_lat_ns());
        eprintln!(
            "periodic player beside a reader, seed {seed}: {:.2} ms raised, {:.2} ms not",
            l_on / 1e6,
            l_off / 1e6
        );
        assert!(
            l_on * 2.0 < l_off,
            "seed {seed}: player mean latency {:.1} ms raised, {:.1} ms not",
            l_on / 1e6,
            l_off / 1e6
        );
    }
}

#[test]
fn strict_guarantees_idle_even_on_a_queueing_ssd_and_never_inject() {
    let jobs = || {
        vec![
            reader("a", 0, RwMode::RandRead, 1, IoPrio::DEFAULT, 0, 1),
            reader("b", 1, RwMode::RandRead, 1, IoPrio::DEFAULT, 10 << 30, 1),
        ]
    };
    // Two queues to idle for, not one merged queue: stable merging off.
    let plain = run("ssd", &[("stable_merging", "0")], jobs());
    let strict = run(
        "ssd",
        &[("strict_guarantees", "1"), ("stable_merging", "0")],
        jobs(),
    );
    // Equal weights on a queueing SSD: idling only when the queue in service is the only
    // busy one (`idling_needed_for_service_guarantees`: `tot_busy_queues == 1`, as when the
    // other reader's one request is on the device) or while both are raised at the start;
    // strict: idling after every request.
    let plain_c = bfq(&plain).counters;
    assert!(
        plain_c.idles * 50 < plain_c.dispatched,
        "{:?}",
        plain.queue.sched
    );
    assert!(
        bfq(&strict).counters.idles > 100,
        "{:?}",
        strict.queue.sched
    );
    assert_eq!(bfq(&strict).counters.injected, 0);
    assert!(strict.total_iops() < plain.total_iops());
}

#[test]
fn strict_guarantees_serve_one_request_at_a_time() {
    // `__bfq_dispatch_request`: nothing is dispatched while a request is in the driver, so a
    // reader at depth 16 on a queueing SSD gets what it would at depth 1.
    let one = |qd: u32, strict: &str| {
        let r = run(
            "ssd",
            &[("strict_guarantees", strict)],
            vec![reader("a", 0, RwMode::RandRead, qd, IoPrio::DEFAULT, 0, 1)],
        );
        r.total_iops()
    };
    let (strict16, plain16, plain1) = (one(16, "1"), one(16, "0"), one(1, "0"));
    assert!(
        plain16 > 3.0 * plain1,
        "the SSD queues: QD16 {plain16:.0} vs QD1 {plain1:.0} IOPS"
    );
    assert!(
        (strict16 / plain1 - 1.0).abs() < 0.2,
        "strict at QD16 {strict16:.0} vs QD1 {plain1:.0} IOPS"
    );
}

/// Writes `n` blocks through the page cache (asynchronous), waits for them, then reads one
/// block synchronously: an application whose reads wait on its own writeback.
struct WriteThenRead {
    n: u32,
    step: u32,
    at: u64,
}

impl Source for WriteThenRead {
    fn next(
        &mut self,
        _now: mqblk_core::Nanos,
        _rng: &mut mqblk_sim::SimRng,
    ) -> mqblk_sim::workload::Next {
        use mqblk_sim::workload::{IoReq, Next};
        self.step += 1;
        let op = match self.step {
            s if s <= self.n => mqblk_core::ReqOp::Write,
            s if s == self.n + 1 => return Next::Drain,
            _ => {
                self.step = 0;
                mqblk_core::ReqOp::Read
            }
        };
        self.at += 8;
        Next::Io(IoReq {
            op,
            sector: self.at,
            nr_sectors: 8,
            flags: if op == mqblk_core::ReqOp::Read {
                mqblk_core::ReqFlags::SYNC
            } else {
                mqblk_core::ReqFlags::empty()
            },
            ioprio: None,
        })
    }
}

#[test]
fn a_queue_waiting_on_its_writeback_gets_it_served_while_idled_for() {
    // The issuer's sync queue runs dry while its own asynchronous writes sit in the async
    // queue; idling for it would hold those writes back. BFQ serves that queue while idling
    // (`bfq_select_queue`: the process's own async queue first, then a waker once learnt),
    // so the issuer goes about as fast as with idling off. Until later on
    // 2026-11-26 the async queue's injected service was kept against it after it ran dry,
    // so injection soon stopped and BFQ learnt it as a waker instead (one detection); the
    // kernel resets both when a queue not in service runs dry (`bfq_remove_request`). The
    // two queues are made together, so BFQ may also merge them for good (stable merging:
    // whether it does depends on the app's queue looking seeky at the moment it is
    // checked), which is not what this test is about.
    let jobs = || {
        vec![
            job(
                "app",
                0,
                16,
                0,
                Box::new(WriteThenRead {
                    n: 8,
                    step: 0,
                    at: 0,
                }),
                3,
            ),
            job("other", 1, 1, 0, seq(RwMode::Read, 100, 5), 3),
        ]
    };
    let dflt = run("hdd", &[("stable_merging", "0")], jobs());
    let no_idle = run(
        "hdd",
        &[("slice_idle", "0"), ("stable_merging", "0")],
        jobs(),
    );
    let (a, b) = (dflt.jobs[0].ios as f64, no_idle.jobs[0].ios as f64);
    eprintln!(
        "waker: app {a} I/Os with idling, {b} without; {:?}",
        dflt.queue.sched
    );
    let c = bfq(&dflt).counters;
    assert!(c.idles > 0 && c.injected > 0, "{:?}", dflt.queue.sched);
    assert!(a >= 0.7 * b, "app {a} I/Os with idling, {b} without");
}
#[test]
fn injection_on_a_queueing_device_spares_the_idled_for_reader_and_backs_off_where_it_costs() {
    // BFQ idles for the heavier sequential reader (weights differ). On an SSD that queues
    // commands, the lighter random reader's requests may be injected meanwhile: it gets some
    // I/O done without slowing the other. On an SSD without queueing, injected requests
    // delay the idled-for queue, so the injection limit falls and stays near zero.
    let jobs = || {
        vec![
            reader(
                "heavy",
                0,
                RwMode::Read,
                1,
                IoPrio::new(IoPrioClass::Be, 0),
                0,
                3,
            ),
            reader(
                "light",
                1,
                RwMode::RandRead,
                1,
                IoPrio::DEFAULT,
                400 << 30,
                3,
            ),
        ]
    };
    // Without raising: the light reader has the default weight, so at its start it is
    // raised as interactive (and as a player at times), and is then served in turns of its
    // own rather than injected.
    let plain = [("low_latency", "0")];
    let strict = [("strict_guarantees", "1"), ("low_latency", "0")];
    let inj = run("ssd", &plain, jobs());
    let none = run("ssd", &strict, jobs());
    eprintln!(
        "injection on ssd: {} injected; light {} I/Os ({} without injection), heavy {} ({})",
        bfq(&inj).counters.injected,
        inj.jobs[1].ios,
        none.jobs[1].ios,
        inj.jobs[0].ios,
        none.jobs[0].ios
    );
    // Injection happens when the queue runs while the heavy one is idled for: at the
    // arrivals of either reader and at the 3 ms re-run after an empty dispatch, not at
    // completions (an empty dispatch sets no RESTART, as in the kernel). The heavy reader
    // sends its next read at once, so the windows are short and injection is rare here
    // (18 since later on 2026-11-26, more than 1000 while completions re-ran
    // the queue); a heavy reader that thinks leaves windows the light one fills (the sim
    // CLI test of the thinking reader). The light reader still gets I/O done, within the
    // kernel's limits (`bfq_choose_bfqq_for_injection`: the limit counts every request in
    // the driver, the idled-for queue's own too), and the heavy one is not slowed.
    assert!(bfq(&inj).counters.injected > 0, "{:?}", inj.queue.sched);
    assert!(inj.jobs[1].ios > 1000, "light {} I/Os", inj.jobs[1].ios);
    assert!(inj.jobs[0].ios >= none.jobs[0].ios);
    let serial = run("ssd,queueing=0", &plain, jobs());
    let (injected, idles) = (bfq(&serial).counters.injected, bfq(&serial).counters.idles);
    eprintln!("injection on ssd without queueing: {injected} injected in {idles} idles");
    assert!(
        idles > 1000 && injected * 100 < idles,
        "{:?}",
        serial.queue.sched
    );
}

#[test]
fn the_automatic_max_budget_is_what_the_peak_rate_serves_in_timeout_sync() {
    let jobs = || {
        vec![
            reader("a", 0, RwMode::Read, 1, IoPrio::DEFAULT, 0, 2),
            reader("b", 1, RwMode::Read, 1, IoPrio::DEFAULT, 400 << 30, 2),
        ]
    };
    // Without weight raising, which would stop idling for the new readers and keep the
    // disk seeking, a pattern the peak-rate estimator does not sample.
    let plain = [("low_latency", "0")];
    let hdd = run("hdd", &plain, jobs());
    let ssd = run("ssd", &plain, jobs());
    let (peak, auto) = (bfq(&hdd).peak_rate_sectors_per_s, bfq(&hdd).max_budget);
    eprintln!(
        "max_budget: hdd {auto} sectors at {peak} sectors/s; ssd {} at {}",
        bfq(&ssd).max_budget,
        bfq(&ssd).peak_rate_sectors_per_s
    );
    // 125 ms (timeout_sync) at the measured peak rate, no longer the 16384 default.
    assert!(
        peak > 0 && auto == peak * 125 / 1000,
        "{:?}",
        hdd.queue.sched
    );
    assert_ne!(auto, 16384);
    assert!(bfq(&ssd).max_budget > 4 * auto, "{:?}", ssd.queue.sched);
    let longer = run(
        "hdd",
        &[("low_latency", "0"), ("timeout_sync", "250")],
        jobs(),
    );
    let p2 = bfq(&longer).peak_rate_sectors_per_s;
    assert_eq!(bfq(&longer).max_budget, p2 * 250 / 1000);
    let fixed = run(
        "hdd",
        &[("low_latency", "0"), ("max_budget", "1000")],
        jobs(),
    );
    assert_eq!(bfq(&fixed).max_budget, 1000);
}

#[test]
fn only_queues_of_the_default_weight_are_weight_raised() {
    // `bfq_bfqq_handle_idle_busy_switch` raises a queue (interactive or soft real-time) only
    // when its weight is the default one (`new_weight == 40`): a weight set through an I/O
    // priority is the user's choice.
    let one = |prio: IoPrio| {
        let r = run(
            "ssd",
            &[],
            vec![reader("r", 0, RwMode::RandRead, 1, prio, 0, 1)],
        );
        bfq(&r).counters.wr_interactive
    };
    assert_eq!(
        one(IoPrio::DEFAULT),
        1,
        "a new default-priority queue is interactive"
    );
    assert_eq!(
        one(IoPrio::new(IoPrioClass::Be, 0)),
        0,
        "level 0 weighs 80: not raised"
    );
    assert_eq!(
        one(IoPrio::new(IoPrioClass::Be, 7)),
        0,
        "level 7 weighs 10: not raised"
    );
}

#[test]
fn on_flash_only_small_random_requests_count_as_seeks() {
    // `BFQ_RQ_SEEKY`: on a non-rotational device a far request is a seek only when it is
    // smaller than `BFQQ_SECT_THR_NONROT` (64 sectors), and a queue is seeky past 19 seeks
    // of its last 32 (`BFQQ_SEEKY`). A seeky sync queue is charged its time
    // (`bfq_bfqq_is_slow`), a queue of large random reads its service.
    let charged = |bs: u32| {
        let jobs = (0..2u16)
            .map(|c| {
                let src = FioSource::new(RwMode::RandRead, 100, bs, 0, 8 << 30, c as u64 + 7, 0);
                let mut j = job("r", c, 1, 0, Box::new(src), 1);
                j.kind = "fio".into();
                j
            })
            .collect();
        // Each queue on its own (two readers started together would be stably merged).
        let r = run(
            "ssd",
            &[("low_latency", "0"), ("stable_merging", "0")],
            jobs,
        );
        bfq(&r).counters.charged_time
    };
    let (small, large) = (charged(4096), charged(65536));
    assert!(
        small > 100,
        "4 KiB random reads: {small} turns charged by time"
    );
    assert_eq!(large, 0, "64 KiB random reads are no seeks on flash");
}

#[test]
fn queues_made_together_are_merged_for_good_at_once_on_a_queueing_ssd() {
    // `bfq_do_or_sched_stable_merge`: the second of two sync queues made within 180 ms in one
    // group, at one priority, joins the first; on a non-rotational device with queueing at
    // once. Not across priorities, not when made 300 ms apart, not with stable merging off.
    let two = |prio_b: IoPrio, start_b_ms: u64, tunables: &[(&str, &str)]| {
        let a = reader("a", 0, RwMode::RandRead, 4, IoPrio::DEFAULT, 0, 1);
        let mut b = reader("b", 1, RwMode::RandRead, 4, prio_b, 10 << 30, 1);
        b.start_at = Nanos::from_millis(start_b_ms);
        let r = run("ssd", tunables, vec![a, b]);
        bfq(&r).counters
    };
    let together = two(IoPrio::DEFAULT, 0, &[]);
    assert_eq!(together.stable_merges, 1, "{together:?}");
    assert_eq!(together.queue_splits, 0, "a stable merge is never split");
    let other_prio = two(IoPrio::new(IoPrioClass::Be, 0), 0, &[]);
    assert_eq!(other_prio.stable_merges, 0, "{other_prio:?}");
    let later = two(IoPrio::DEFAULT, 300, &[]);
    assert_eq!(later.stable_merges, 0, "{later:?}");
    let off = two(IoPrio::DEFAULT, 0, &[("stable_merging", "0")]);
    assert_eq!(off.queue_merges, 0, "{off:?}");
}

#[test]
fn on_a_disk_a_stable_merge_waits_and_is_dropped_for_sequential_readers() {
    // Off fast queueing devices the merge is scheduled and done after 600 ms
    // (`bfq_late_stable_merging`), unless idling then boosts the queue's throughput without
    // issues (`bfq_setup_stable_merge`, `idling_boosts_thr_without_issues`): sequential
    // readers on a disk keep their queues, random ones are merged. While queues are raised
    // (new ones are, as interactive) idling is not taken to boost anything, and sequential
    // readers are merged too.
    let two = |rw: RwMode, tunables: &[(&str, &str)]| {
        let jobs = vec![
            reader("a", 0, rw, 1, IoPrio::DEFAULT, 0, 2),
            reader("b", 1, rw, 1, IoPrio::DEFAULT, 100 << 30, 2),
        ];
        let r = run("hdd", tunables, jobs);
        bfq(&r).counters
    };
    let no_raising = [("low_latency", "0")];
    let random = two(RwMode::RandRead, &no_raising);
    assert_eq!(random.stable_merges, 1, "{random:?}");
    let sequential = two(RwMode::Read, &no_raising);
    assert_eq!(sequential.stable_merges, 0, "{sequential:?}");
    let raised = two(RwMode::Read, &[]);
    assert!(raised.wr_interactive > 0, "{raised:?}");
    assert_eq!(raised.stable_merges, 1, "{raised:?}");
}

#[test]
fn on_a_fast_disk_sequential_readers_lose_their_raising_before_a_stable_merge_is_due() {
    // The kernel on this project's machine (2026-11-27; `vda`, virtio, rotational, BFQ; two
    // fio jobs of 64 KiB reads at QD1 started together a second after fio forked, so no other
    // queue was made just before; BFQ's log via the `blk` tracer): two random readers were
    // stably merged ("scheduling merge"), two sequential ones were not, with `low_latency` 1
    // or 0. A sequential reader's interactive raising ends after 120,000 sectors
    // (`max_service_from_wr`), before the merge comes due at 600 ms, and then idling boosts
    // its throughput (`idling_boosts_thr_without_issues`). The simulator's virtio model
    // gives the same.
    for ll in ["1", "0"] {
        let two = |rw: RwMode| {
            let jobs = vec![
                reader("a", 0, rw, 1, IoPrio::DEFAULT, 0, 2),
                reader("b", 1, rw, 1, IoPrio::DEFAULT, 2 << 30, 2),
            ];
            bfq(&run("virtio", &[("low_latency", ll)], jobs)).counters
        };
        let random = two(RwMode::RandRead);
        assert_eq!(random.stable_merges, 1, "low_latency={ll}: {random:?}");
        let sequential = two(RwMode::Read);
        assert_eq!(
            sequential.stable_merges, 0,
            "low_latency={ll}: {sequential:?}"
        );
        if ll == "1" {
            assert!(sequential.wr_ended >= 1, "{sequential:?}");
        }
    }
}

#[test]
fn a_random_workload_on_a_disk_leaves_the_peak_rate_where_it_started() {
    // `bfq_init_queue` starts the peak rate at 2/3 of `ref_rate` (14000 sectors/us << 16 on
    // a rotational device: 142,415 sectors/s) and `max_budget` at `bfq_default_max_budget`;
    // `bfq_update_rate_reset` ignores a window that was mostly random and no faster than the
    // peak rate. So random readers on a disk keep budgets of 16 K sectors (the estimate
    // used to fall to the random rate and the budgets to 256 sectors), while a sequential
    // reader's windows measure the disk.
    let random = run(
        "hdd",
        &[],
        vec![reader("r", 0, RwMode::RandRead, 16, IoPrio::DEFAULT, 0, 3)],
    );
    let s = bfq(&random);
    assert_eq!(s.counters.peak_rate_updates, 0, "{s:?}");
    assert_eq!(s.peak_rate_sectors_per_s, 142_415);
    assert_eq!(s.max_budget, 16_384);
    let sequential = run(
        "hdd",
        &[],
        vec![reader("s", 0, RwMode::Read, 16, IoPrio::DEFAULT, 0, 3)],
    );
    let s = bfq(&sequential);
    assert!(s.counters.peak_rate_updates >= 1, "{s:?}");
    assert_ne!(s.max_budget, 16_384, "{s:?}");
}

/// Periodic 64 KiB reads every 40 ms until `until`, a pause, then back-to-back reads.
struct PlayerThenReader {
    player: Periodic,
    until: Nanos,
    paused: bool,
}

impl Source for PlayerThenReader {
    fn next(
        &mut self,
        now: mqblk_core::Nanos,
        rng: &mut mqblk_sim::SimRng,
    ) -> mqblk_sim::workload::Next {
        use mqblk_sim::workload::{IoReq, Next};
        if now < self.until {
            return self.player.next(now, rng);
        }
        if !self.paused {
            self.paused = true;
            return Next::Think(Nanos::from_millis(500));
        }
        self.player.at += 128;
        Next::Io(IoReq {
            op: mqblk_core::ReqOp::Read,
            sector: (300u64 << 21) + self.player.at,
            nr_sectors: 128,
            flags: mqblk_core::ReqFlags::SYNC,
            ioprio: None,
        })
    }
}

#[test]
fn soft_real_time_raising_that_ends_early_goes_back_to_the_interactive_one() {
    // `switch_back_to_interactive_wr`: a new queue is raised as interactive (for
    // `bfq_wr_duration`, 10.5 s on a disk at the initial peak rate); as a periodic player it
    // switches to soft real-time raising (300 ms, renewed while it stays periodic). When
    // it stops being a player, that raising runs out inside the interactive period, and the
    // queue goes back to interactive raising instead of losing it.
    for seed in SEEDS {
        let jobs = vec![
            job("reader", 0, 8, 0, seq(RwMode::Read, 0, seed), 3),
            job(
                "player",
                1,
                1,
                0,
                Box::new(PlayerThenReader {
                    player: Periodic {
                        period: Nanos::from_millis(40),
                        bs: 65536,
                        next_io: false,
                        at: 0,
                    },
                    until: Nanos::from_secs(1),
                    paused: false,
                }),
                3,
            ),
        ];
        let r = run_with(
            "hdd",
            &[("stable_merging", "0")],
            jobs,
            Arc::new(Blkcg::new()),
            seed,
        );
        let c = bfq(&r).counters;
        assert!(c.wr_soft_rt >= 5, "seed {seed}: {c:?}");
        assert!(c.wr_switched_back >= 1, "seed {seed}: {c:?}");
    }
}

#[test]
fn a_sequential_reader_that_thinks_between_requests_is_not_idled_for_on_a_queueing_disk() {
    // `idling_boosts_thr_without_issues` idles for a sequential queue on a disk that queues
    // commands only if it is also I/O bound (`bfq_update_io_intensity`: busy at least 80%
    // of the last ~200 ms). A reader that thinks 3 ms after each 4 KiB read is sequential
    // with a short think time but mostly idle: idling for it would hold the disk for
    // whole budget timeouts at 4 KiB per 3 ms, starving a greedy reader beside it.
    for seed in SEEDS {
        let jobs = |with_thinker: bool| {
            let mut v = vec![job("greedy", 0, 1, 0, seq(RwMode::Read, 0, seed), 3)];
            if with_thinker {
                let thinker = Periodic {
                    period: Nanos::from_millis(3),
                    bs: 4096,
                    next_io: false,
                    at: 0,
                };
                v.push(job("thinker", 1, 1, 0, Box::new(thinker), 3));
            }
            v
        };
        let t = [("low_latency", "0"), ("stable_merging", "0")];
        let alone = run_with("hdd", &t, jobs(false), Arc::new(Blkcg::new()), seed);
        let beside = run_with("hdd", &t, jobs(true), Arc::new(Blkcg::new()), seed);
        let (a, b) = (alone.jobs[0].bytes as f64, beside.jobs[0].bytes as f64);
        eprintln!(
            "greedy reader alone {:.1} MB, beside a thinking reader {:.1} MB (thinker {} I/Os), seed {seed}",
            a / 1e6,
            b / 1e6,
            beside.jobs[1].ios
        );
        assert!(b > 0.6 * a, "seed {seed}: greedy {b} of {a} bytes");
    }
}

/// Sequential 64 KiB reads, one pause of `pause` at `at`.
struct ReadPauseRead {
    at: Nanos,
    pause: Nanos,
    paused: bool,
    pos: u64,
}

impl Source for ReadPauseRead {
    fn next(
        &mut self,
        now: mqblk_core::Nanos,
        _rng: &mut mqblk_sim::SimRng,
    ) -> mqblk_sim::workload::Next {
        use mqblk_sim::workload::{IoReq, Next};
        if now >= self.at && !self.paused {
            self.paused = true;
            return Next::Think(self.pause);
        }
        self.pos += 128;
        Next::Io(IoReq {
            op: mqblk_core::ReqOp::Read,
            sector: self.pos,
            nr_sectors: 128,
            flags: mqblk_core::ReqFlags::SYNC,
            ioprio: None,
        })
    }
}

#[test]
fn a_raised_queue_idle_for_long_again_starts_its_interactive_raising_over() {
    // `bfq_update_bfqq_wr_on_rq_arrival`: a queue still raised as interactive that comes
    // back after more than `bfq_wr_min_idle_time` (2 s) idle is interactive again, and its
    // raising restarts (coefficient and duration) rather than running out on the old clock.
    let jobs = vec![job(
        "reader",
        0,
        1,
        0,
        Box::new(ReadPauseRead {
            at: Nanos::from_millis(500),
            pause: Nanos::from_millis(2500),
            paused: false,
            pos: 0,
        }),
        4,
    )];
    let r = run("hdd", &[], jobs);
    let c = bfq(&r).counters;
    assert_eq!(c.wr_interactive, 2, "{c:?}");
}

#[test]
fn a_burst_of_eight_new_queues_in_one_group_is_not_raised() {
    // `bfq_handle_burst`: sync queues of one group made within 180 ms of each other form a
    // burst; at the 8th (`bfq_large_burst_thresh`) it is large, its queues lose their
    // raising and later ones in it are not raised at all (a `git grep`, a boot: throughput,
    // not latency). Seven readers are no large burst; neither are eight split over groups.
    let run_readers = |n: u16, groups: u32| {
        let cg = Blkcg::new();
        let ids = [
            cg.set_weight("a", 100).unwrap(),
            cg.set_weight("b", 100).unwrap(),
        ];
        let jobs = (0..n)
            .map(|c| {
                let mut j = reader(
                    "r",
                    c,
                    RwMode::Read,
                    1,
                    IoPrio::DEFAULT,
                    (c as u64) << 30,
                    1,
                );
                j.group = ids[(c as u32 % groups) as usize];
                j
            })
            .collect();
        bfq(&run_with(
            "hdd",
            &[("stable_merging", "0")],
            jobs,
            Arc::new(cg),
            1,
        ))
        .counters
    };
    let ten = run_readers(10, 1);
    assert_eq!(ten.wr_interactive, 7, "{ten:?}");
    assert!(
        ten.wr_ended >= 7,
        "the first seven lose their raising: {ten:?}"
    );
    let seven = run_readers(7, 1);
    assert_eq!(seven.wr_interactive, 7, "{seven:?}");
    assert_eq!(seven.wr_ended, 0, "{seven:?}");
    let split = run_readers(8, 2);
    assert_eq!(split.wr_interactive, 8, "{split:?}");
    assert_eq!(split.wr_ended, 0, "{split:?}");
}

#[test]
fn a_heavier_queue_with_new_requests_preempts_the_one_in_service() {
    // `bfq_bfqq_handle_idle_busy_switch` → `bfq_bfqq_higher_class_or_weight`: with raising
    // off, a reader at ioprio 0 (eight times the weight of the ioprio-7 one) that reads a
    // block every 40 ms (beyond the three idle slices of a service hole) takes the device
    // from the light reader whenever its request comes, instead of waiting for the light
    // one's turn to end. At equal weights the same arrivals preempt nobody.
    let jobs = |heavy: u8| {
        let player = Periodic {
            period: Nanos::from_millis(40),
            bs: 4096,
            next_io: false,
            at: 0,
        };
        let mut p = job("heavy", 1, 1, 0, Box::new(player), 2);
        p.ioprio = IoPrio::new(IoPrioClass::Be, heavy);
        vec![
            reader(
                "light",
                0,
                RwMode::Read,
                16,
                IoPrio::new(IoPrioClass::Be, 7),
                0,
                2,
            ),
            p,
        ]
    };
    let r = run("hdd", &[("low_latency", "0")], jobs(0));
    let e = run("hdd", &[("low_latency", "0")], jobs(7));
    let (c, ce) = (bfq(&r).counters.preempted, bfq(&e).counters.preempted);
    assert!(c > 20, "{:?}", r.queue.sched);
    assert!(ce * 4 < c, "{ce} preemptions at equal weights, {c} at 0:7");
    // Served at once, the heavy reader's latency is about one disk access.
    let (lat, lat_e) = (r.jobs[1].mean_lat_ns(), e.jobs[1].mean_lat_ns());
    assert!(
        lat * 2.0 < lat_e,
        "heavy {lat:.0} ns, at equal weights {lat_e:.0} ns"
    );
}
