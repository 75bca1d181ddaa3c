//! The seed scenarios in their quick form: each runs, prints the same bytes for the same
//! seed, and (where the model reproduces it) points the way the seed's result does.

use mqblk_sim::cost::CostProfile;
use mqblk_sim::scenario::{find, ScenarioOpts, SCENARIOS};

fn quick(name: &str, seed: u64) -> mqblk_sim::scenario::ScenarioReport {
    let sc = find(name).expect("scenario exists");
    (sc.run)(&ScenarioOpts {
        seed,
        quick: true,
        schedulers: Vec::new(),
        ..ScenarioOpts::default()
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_scenario_is_reproducible() {
    for sc in SCENARIOS {
        let a = quick(sc.name, 5);
        let b = quick(sc.name, 5);
        assert_eq!(a.table, b.table, "{}: same seed, different table", sc.name);
        assert_eq!(a.svg, b.svg, "{}: same seed, different chart", sc.name);
        // A line chart over a quantity (clients), bars over categories.
        assert!(
            a.svg.starts_with("<svg") && (a.svg.contains("polyline") || a.svg.contains("<rect x=")),
            "{}",
            sc.name
        );
    }
}

#[test]
fn seed_002_o1_counter_beats_per_cpu_sums() {
    // The seed: 1.41 and 1.50. Under both cost profiles the O(1) count must win by at
    // least 1.2x. The kernel profile overshoots (2.0): it charges the whole measured cost
    // of mq-deadline's insert and dispatch over `none` under `dd->lock`, where the kernel
    // runs part of that path outside, so the per-CPU sums queue behind a longer-held lock
    // than in the seed's kernel.
    for profile in [CostProfile::Kernel, CostProfile::Mqblk] {
        let sc = find("deadline-nr-queued").unwrap();
        let r = (sc.run)(&ScenarioOpts {
            seed: 1,
            quick: true,
            profile,
            ..ScenarioOpts::default()
        })
        .unwrap();
        assert!(r.direction_holds, "{}\n{}", r.table, r.comparison);
        let before = r.json["before_iops"].as_f64().unwrap();
        let after = r.json["after_iops"].as_f64().unwrap();
        let ratio = after / before;
        eprintln!("`deadline-nr-queued`, {profile:?} profile: after/before {ratio:.2}");
        // The mechanism: the per-CPU sums are what kept the CPUs waiting for `dd->lock`.
        let wait = |k: &str| r.json[k].as_f64().unwrap();
        assert!(
            wait("before_lock_wait_ns") > 5.0 * wait("after_lock_wait_ns"),
            "{profile:?}: lock wait {} ns before, {} after",
            wait("before_lock_wait_ns"),
            wait("after_lock_wait_ns")
        );
        assert!(
            ratio >= 1.2,
            "{profile:?}: after/before {ratio:.2}\n{}",
            r.table
        );
    }
}

#[test]
fn seed_003_two_virtqueues_win_more_at_four_jobs() {
    let r = quick("virtio-multi-vq", 1);
    assert!(r.direction_holds, "{}\n{}", r.table, r.comparison);
}

#[test]
fn seed_001_async_pre_post_and_blk_mq_keep_dd_speed() {
    let r = quick("mmc-blk-mq", 1);
    assert!(r.direction_holds, "{}\n{}", r.table, r.comparison);
    let rows = r.json["rows"].as_array().unwrap();
    for row in rows {
        let mbs = row["dd_mbs"].as_f64().unwrap();
        // `mmc-blk-mq`: 19.6 to 22.7 MB/s across its configurations.
        assert!((17.0..26.0).contains(&mbs), "{row}");
    }
}

#[test]
fn seed_000_runs_all_three_modes() {
    let r = quick("single-hctx-dispatch", 1);
    for mode in ["MQ", "SQ", "MQ-patched"] {
        assert!(r.table.contains(mode), "{}", r.table);
    }
    let rows = r.json["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    // The seed's named mechanism, as modelled: in MQ mode BFQ is dispatched from every
    // hardware queue, whose runs contend on its lock; SQ has one queue and MQ-patched runs
    // one. At 8 clients the lock wait is at least five times either's (quick run, dbench's
    // clients on XFS: 11.9 ms against 0.009 and 1.3; 38 ms against 0.15 and 1.1 with the
    // earlier made-up client mix, which read and so idled BFQ more).
    let wait = |mode: &str| {
        rows.iter()
            .find(|x| x["scheduler"] == "bfq" && x["mode"] == mode && x["clients"] == 8)
            .unwrap_or_else(|| panic!("no bfq {mode} row at 8 clients\n{}", r.table))
            ["elevator_lock_wait_ns"]
            .as_u64()
            .unwrap()
    };
    let (mq, sq, patched) = (wait("MQ"), wait("SQ"), wait("MQ-patched"));
    assert!(
        mq >= 5 * sq.max(1) && mq >= 5 * patched.max(1),
        "lock wait MQ {mq} SQ {sq} MQ-patched {patched}\n{}",
        r.evidence
    );
    // On the seed's machine (two sockets, 64 CPUs, a line across them 141 ns) that lock
    // costs MQ's requests a small fraction of their latency, far from the 69% the seed's
    // MQ lost: the model rules the mail's named cost out as the cause on a rotating disk
    // (quick run: 32 us a request, 0.083% of its latency; 29.9 us and 0.081% in the full one).
    let lock = &r.json["mq_lock_cost"];
    let share = lock["share_of_latency"].as_f64().unwrap();
    let (us, needed_ms) = (
        lock["us_per_request"].as_f64().unwrap(),
        lock["needed_ms"].as_f64().unwrap(),
    );
    assert!(
        us > 1.0 && share < 0.01 && needed_ms * 1000.0 > 100.0 * us,
        "{lock}
{}",
        r.evidence
    );
    assert!(r.evidence.contains("rules out"), "{}", r.evidence);
    assert_eq!(r.json["fast_device"].as_array().unwrap().len(), 3);
    // dbench on XFS as captured, on the same device: the same contention in MQ mode (2.8 s
    // of lock waits against none), and the three modes within 2% of each other in MB/s:
    // what the model gives today (docs/results/seeds.md, `single-hctx-dispatch`'s twin paragraph); a mechanism that
    // moves it changes that paragraph and this bound together.
    let raid = r.json["captured_raid"].as_array().unwrap();
    let field = |mode: &str, k: &str| {
        raid.iter()
            .find(|x| x["mode"] == mode)
            .unwrap_or_else(|| panic!("no captured row {mode}\n{}", r.evidence))[k]
            .as_f64()
            .unwrap()
    };
    let w = |m: &str| field(m, "elevator_lock_wait_ms");
    assert!(
        w("MQ") >= 100.0 && w("MQ") >= 10.0 * w("SQ").max(1.0),
        "{}",
        r.evidence
    );
    let mbs = |m: &str| field(m, "mb_per_s");
    for m in ["SQ", "MQ-patched"] {
        assert!(
            (mbs("MQ") / mbs(m) - 1.0).abs() <= 0.02,
            "{m}\n{}",
            r.evidence
        );
    }
}

#[test]
fn seed_000_twin_gives_the_kernels_figures_at_two_queues() {
    // The kernel twin (scripts/guest-seed000.sh: the stock 5.10 and the patched 6.1 in a
    // guest, dbench on XFS over scsi_debug with 2 hardware queues or 1): BFQ's throughput
    // with two queues over one, over none's, 1.016 and 0.924. Ours on the same shape, with
    // dbench on XFS captured here and replayed and with the scenario's own clients playing
    // dbench's loadfile on XFS as measured in the twin's guest: the median over seeds 1-5
    // within 0.1 of each (0.98-1.02 at every seed). Before the clients were XFS's
    // (2026-11-27), a made-up mix of reads and writes scattered to 0.15-1.82.
    let r = quick("single-hctx-dispatch", 1);
    let t = &r.json["twin"];
    for (ours, kernel) in [
        ("ours_captured_stock", "kernel_5_10"),
        ("ours_captured_patched", "kernel_6_1"),
        ("ours_stock", "kernel_5_10"),
        ("ours_patched", "kernel_6_1"),
    ] {
        let mut v: Vec<f64> = t[ours]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(v.len(), 5, "{t}");
        v.sort_by(f64::total_cmp);
        let k = t[kernel].as_f64().unwrap();
        assert!(
            (v[2] - k).abs() <= 0.1,
            "{ours} median {} against {kernel} {k}\n{}",
            v[2],
            r.comparison
        );
    }
}

#[test]
fn seed_004_bfq_merges_queues_only_when_told_to_on_a_queueing_ssd() {
    let r = quick("bfq-no-merge", 1);
    let rows = r.json["rows"].as_array().unwrap();
    let row = |mode: &str| {
        rows.iter()
            .find(|x| x["mode"].as_str().unwrap().starts_with(mode))
            .unwrap_or_else(|| panic!("no row {mode}\n{}", r.table))
    };
    // Before the patch `bfq-no-merge` reruns, BFQ merged the clients' and the journal's interleaved queues on any
    // device; now it does not on an SSD that queues commands once BFQ has seen it queue
    // (`bfq_update_hw_tag`, which keeps `hw_tag` for good once it is 1; until then a merge
    // may happen, as in the kernel). At least ten times fewer.
    let with = row("bfq, merging")["queue_merges"].as_u64().unwrap();
    let without = row("bfq, no merging")["queue_merges"].as_u64().unwrap();
    assert!(
        with > 0 && without * 10 <= with,
        "{with} vs {without}\n{}",
        r.table
    );
    for mode in ["bfq, merging", "bfq, no merging", "mq-deadline", "none"] {
        let mbs = row(mode)["clients_mbs_mean"].as_f64().unwrap();
        assert!(mbs > 0.0, "{mode}: no throughput\n{}", r.table);
    }
    // The captured dbench (testdata/traces/dbench6) replays under every mode; its journal
    // keeps BFQ idling without merging, and with merging forced its queues do merge.
    let captured = r.json["captured"].as_array().unwrap();
    assert_eq!(captured.len(), 4, "{}", r.table);
    let cap = |mode: &str| {
        captured
            .iter()
            .find(|x| x["mode"].as_str().unwrap().starts_with(mode))
            .unwrap()
    };
    assert!(cap("bfq, merging")["queue_merges"].as_u64().unwrap() > 0);
    assert_eq!(cap("bfq, no merging")["queue_merges"].as_u64(), Some(0));
    assert!(cap("bfq, no merging")["idles"].as_u64().unwrap() > 0);
    for x in captured {
        assert!(x["clients_mbs"].as_f64().unwrap() > 5.0, "{x}");
    }
    let mbs = |mode: &str, key: &str| cap(mode)[key].as_f64().unwrap();
    // Queues merge as the kernel's source has it (a redirection of one issuer, never of a
    // seeky queue, not with one queue busy, within 100 ms of a queue's first service since
    // it became busy, at bio-merge time too), a queue that runs dry out of service has its
    // budget and service reset, and an empty dispatch sets no RESTART, as in the kernel,
    // each process's bios go under a plug where the trace shows one, and a queue shared by
    // cooperators starts no raising: then merging helps the captured dbench's clients (0.77
    // in full runs since B-WF2Q+'s idle tree and the replay's waits on commit records, 0.80
    // before; 1.32 with BFQ's think-time state the kernel's flag, held 2 s after a split,
    // 0.99 once a split queue also took its shared queue's waker, 1.90 once it resumed its
    // injection state, 0.79 once the think time was sampled before the waker check, 0.83
    // once a queue back in service with nothing to do ended its turn at once: it
    // swings with every split rule; the seed 1.33; 1.00 before the raising rule, 0.77 without the plugs, 1.19
    // before the two fixes). Asserted: the scenario's verdict is the ratio's.
    let (with, without) = (
        mbs("bfq, merging", "clients_mbs"),
        mbs("bfq, no merging", "clients_mbs"),
    );
    assert_eq!(
        r.direction_holds,
        without >= 1.1 * with,
        "{without} vs {with}\n{}",
        r.comparison
    );
    // The seed's general mechanism, in the counters: shared queues stay non-empty, so with
    // merging BFQ's turns end with the budget spent far more often, and with the queue
    // empty less (the full run: 21 and 29 against 2 and 56), whether or not it costs the
    // clients. Every merge is counted by the weights of the queues it joins.
    let count = |mode: &str, key: &str| cap(mode)[key].as_u64().unwrap();
    assert!(
        count("bfq, merging", "expired_budget")
            >= 5 * count("bfq, no merging", "expired_budget").max(1)
            && count("bfq, merging", "expired_empty") < count("bfq, no merging", "expired_empty"),
        "{}",
        r.evidence
    );
    assert!(
        count("bfq, merging", "merges_into_heavier") + count("bfq, merging", "merges_into_lighter")
            <= count("bfq, merging", "queue_merges"),
        "{}",
        r.evidence
    );
    // On the seed's drive, which queues, BFQ without merging keeps up with mq-deadline when
    // the journal's weight is the clients' and falls well behind when it is higher, because
    // it idles for the heavier queue.
    let same = mbs("bfq, no merging", "journal_be4_clients_mbs")
        / mbs("mq-deadline", "journal_be4_clients_mbs");
    let higher = without / mbs("mq-deadline", "clients_mbs");
    assert!((0.9..=1.1).contains(&same), "be/4: {same}\n{}", r.table);
    assert!(higher < 0.8, "be/0: {higher}\n{}", r.table);
    // The kernel twin (scripts/dbench-twin.sh, a loop device marked non-rotational; the
    // kernel's BFQ merged only dbench's clients, made together, at their start: BFQ over
    // mq-deadline 0.89-1.01 with jbd2 at the clients' priority, 0.56-0.77 at a higher one).
    // The simulator with every BFQ rule as the kernel's: BFQ merges the same way (stable
    // merging), keeps up at be/4 and falls behind at be/0, by far less than the kernel's
    // (0.93; 0.90 while the replay took a client that went on after jbd2's commit record to
    // have waited for whichever client's write completed last: open, docs/results/seeds.md).
    let twin = &r.json["sim_twin"];
    let be4 = twin["bfq_over_deadline_be4"].as_f64().unwrap();
    let be0 = twin["bfq_over_deadline_be0"].as_f64().unwrap();
    assert!(twin["bfq_queue_merges_be0"].as_u64().unwrap() > 0, "{twin}");
    assert!((0.9..=1.1).contains(&be4), "twin be/4: {twin}");
    assert!(be0 > 0.5 && be0 <= 0.95 * be4, "twin be/0: {twin}");
    // Marked rotational, the kernel's BFQ merges and splits queues by position and keeps
    // level with mq-deadline at both priorities (0.99, 0.98). Ours keeps level at be/4 and
    // not at be/0 (0.80 since a queue back in service empty ends its turn at once;
    // 0.53 with an earlier set of BFQ rules of 2026-11-27; 0.48 before):
    // open, docs/results/seeds.md. Here: the case runs, BFQ merges by
    // position, and be/4 is the kernel's.
    let rot = &r.json["sim_twin_rotational"];
    assert!(rot["bfq_queue_merges_be0"].as_u64().unwrap() > 10, "{rot}");
    let rot_be4 = rot["bfq_over_deadline_be4"].as_f64().unwrap();
    assert!((0.9..=1.1).contains(&rot_be4), "{rot}");
    assert!(rot["kernel_be0"].as_f64().unwrap() > 0.9, "{rot}");
    // dbench's clients and jbd2 on ext4 as measured here (`Ext4DbenchClient`, `Jbd2`), each
    // waiting for the other as ext4 makes them, give the kernel's pattern where the replay
    // does not: BFQ well behind mq-deadline at be/0 on the device marked non-rotational
    // (the kernel 0.66; full runs, seeds 1-5, 0.43-0.58; this quick run 0.67), level with it
    // marked rotational (the kernel 0.98; full runs 0.97-0.99; quick 0.90).
    let model = |t: &serde_json::Value| t["model_bfq_over_deadline_be0"].as_f64().unwrap();
    assert!(
        model(twin) <= 0.8 && model(rot) >= 0.85 && model(rot) >= model(twin) + 0.15,
        "non-rotational {twin}\nrotational {rot}"
    );
    // The seed's own question asked of one kernel, with and without its patch
    // (scripts/guest-seed004.sh: Debian's 6.1 under TCG, BFQ built as it is and with
    // `nonrot_with_queueing` held false), and of the simulator on the guest's shape (the
    // dbench model with the loadfile captured in that guest, scsi_debug's command and flush
    // times): the kernel finds every case within 3% of every other (its emulated CPUs set
    // dbench's pace), and so must ours, within 0.06 of each of the kernel's ratios (full
    // runs, seeds 1-3: 0.00-0.06 off); the clients' `fsync`s a second within 30% (ours 41-44
    // against 54-55; 116-124 before the null model took scsi_debug's 48 ms flush).
    let g = &r.json["guest_twin"];
    let v = |k: &str, p: usize, c: usize| g[k][p][c].as_f64().unwrap();
    for p in 0..2 {
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            let (kernel, ours) = (
                v("kernel_mbs", p, a) / v("kernel_mbs", p, b),
                v("ours_mbs", p, a) / v("ours_mbs", p, b),
            );
            assert!((ours - kernel).abs() <= 0.06, "{p} {a}/{b}: {g}");
        }
    }
    for c in 0..3 {
        let (k, o) = (
            g["kernel_fsyncs_per_s_be0"][c].as_f64().unwrap(),
            g["ours_fsyncs_per_s_be0"][c].as_f64().unwrap(),
        );
        assert!((0.7..=1.3).contains(&(o / k)), "{c}: {g}");
    }
}

/// A perturbation reaches the model: the eMMC read at 0.7x its speed gives dd about 0.7x
/// the throughput, and scaling a cost table entry or the scheduler's costs runs.
#[test]
fn a_perturbed_parameter_changes_what_it_should() {
    use mqblk_sim::scenario::Perturb;
    let sc = find("mmc-blk-mq").unwrap();
    let run = |perturb: Option<Perturb>| {
        (sc.run)(&ScenarioOpts {
            quick: true,
            perturb,
            ..ScenarioOpts::default()
        })
        .unwrap()
    };
    let dd =
        |r: &mqblk_sim::scenario::ScenarioReport| r.json["rows"][3]["dd_mbs"].as_f64().unwrap();
    let base = run(None);
    let slow = run(Some(Perturb {
        param: "read_mbs".into(),
        factor: 0.7,
    }));
    let ratio = dd(&slow) / dd(&base);
    assert!(
        (0.65..0.85).contains(&ratio),
        "read_mbs x0.7: dd x{ratio:.3}"
    );
    // Asynchronous preparation hides the preparation time (for dd's 128 KiB reads mostly
    // its per-KiB part), so the longer it is, the more async wins over sync.
    let prep = |f: f64| {
        run(Some(Perturb {
            param: "prep_ns_per_kb".into(),
            factor: f,
        }))
        .key_ratio
    };
    let (short, long) = (prep(0.7), prep(1.3));
    assert!(
        long > short * 1.02,
        "async/sync at prep x0.7 {short:.3}, x1.3 {long:.3}"
    );
}

/// The sweep lists every physical parameter of the scenario's model, every cost, the
/// scheduler's cost and five seeds, and its verdict is the runs' own.
#[test]
fn the_sensitivity_sweep_covers_every_parameter_and_seed() {
    use mqblk_sim::scenario::sensitivity;
    let sc = find("mmc-blk-mq").unwrap();
    let s = sensitivity::run(
        sc,
        &ScenarioOpts {
            quick: true,
            ..ScenarioOpts::default()
        },
        &|_, _| {},
    )
    .unwrap();
    let params = sensitivity::params(sc).unwrap();
    for p in ["read_mbs", "prep_us", "access_us", "wake_ns", "sched_cost"] {
        assert!(
            params.iter().any(|(k, _)| k == p),
            "{p} missing: {params:?}"
        );
    }
    for p in ["size", "au_kb", "async_prep"] {
        assert!(!params.iter().any(|(k, _)| k == p), "{p} is not physical");
    }
    assert_eq!(s.runs.len(), params.len() * 2 + 5);
    assert_eq!(s.runs.iter().filter(|r| r.param.is_none()).count(), 5);
    let table = s.table();
    assert!(
        table.contains("prep_us") && table.contains("seed 5"),
        "{table}"
    );
    let holding = s.runs.iter().filter(|r| r.holds).count();
    assert!(
        table.contains(&format!("direction holds in {holding} of {}", s.runs.len())),
        "{table}"
    );
}

/// Each scenario shows the counters of its mechanism: `mmc-blk-mq`'s asynchronous hooks hide
/// preparation time behind the card's transfers only when they are asynchronous, and
/// `virtio-multi-vq`'s single virtqueue makes the vCPUs wait for its lock, longer at 4 jobs.
#[test]
fn scenarios_print_the_counters_of_their_mechanism() {
    let r = quick("mmc-blk-mq", 1);
    let hidden = |line: &str| -> u64 {
        let v = line.split("prep_hidden_ms ").nth(1).expect(line);
        v.split_whitespace().next().unwrap().parse().unwrap()
    };
    let lines: Vec<&str> = r
        .evidence
        .lines()
        .filter(|l| l.starts_with("dd,"))
        .collect();
    assert_eq!(lines.len(), 4, "{}", r.evidence);
    for l in lines {
        if l.contains("async pre/post") {
            assert!(hidden(l) > 0, "{l}");
        } else {
            assert_eq!(hidden(l), 0, "{l}");
        }
    }
    assert!(r.evidence.contains("mechanism:"), "{}", r.evidence);
    let v = quick("virtio-multi-vq", 1);
    let wait = |jobs: u32, q: u32| -> f64 {
        let l = v
            .evidence
            .lines()
            .find(|l| l.starts_with(&format!("{jobs} jobs, {q} virtqueue")))
            .expect("line");
        let w = l.split("driver lock wait ").nth(1).unwrap();
        w.split(' ').next().unwrap().parse().unwrap()
    };
    assert!(
        wait(4, 1) > wait(2, 1) && wait(2, 1) > 10.0 * wait(2, 2).max(0.1),
        "{}",
        v.evidence
    );
}

/// A scenario on a measured machine has its line costs among the swept parameters, and
/// scaling them reaches its runs: BFQ's lock costs MQ mode more per request when every
/// line moves 1.3x slower (quick run: 32.4 us to 33.9). A scenario on the flat cost
/// table has no such parameter.
#[test]
fn the_machine_s_line_costs_are_swept_where_a_scenario_has_a_machine() {
    use mqblk_sim::scenario::{sensitivity, Perturb, TOPOLOGY_NS};
    let has = |name: &str| {
        sensitivity::params(find(name).unwrap())
            .unwrap()
            .iter()
            .any(|(k, _)| k == TOPOLOGY_NS)
    };
    assert!(has("single-hctx-dispatch"));
    assert!(!has("mmc-blk-mq"));
    let lock_us = |factor: Option<f64>| {
        let r = (find("single-hctx-dispatch").unwrap().run)(&ScenarioOpts {
            quick: true,
            schedulers: vec!["bfq".into()],
            perturb: factor.map(|factor| Perturb {
                param: TOPOLOGY_NS.into(),
                factor,
            }),
            ..ScenarioOpts::default()
        })
        .unwrap();
        r.json["mq_lock_cost"]["us_per_request"].as_f64().unwrap()
    };
    let (base, slow) = (lock_us(None), lock_us(Some(1.3)));
    eprintln!("BFQ's lock per MQ request: {base:.2} us, lines x1.3 {slow:.2} us");
    assert!(
        slow > base * 1.02,
        "lock wait per request {base:.2} us, lines x1.3 {slow:.2} us"
    );
}

/// `zone-write-plugging`: on both zoned models, under mq-deadline's zone write locking and
/// under zone write plugging, the writers write and the reader reads, and no write reaches a
/// zone off its write pointer (a run that saw one would have failed); the writers' bandwidth
/// is the device's either way.
#[test]
fn zone_write_locking_and_plugging_keep_zoned_writes_in_order_on_both_models() {
    let r = quick("zone-write-plugging", 1);
    let devices = r.json["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for d in devices {
        let mbs = |mode: &str| d[mode]["writers_mbs"].as_f64().unwrap();
        for mode in ["locking", "plugging"] {
            assert!(mbs(mode) > 0.0, "{d}");
            assert!(d[mode]["reader_iops"].as_f64().unwrap() > 0.0, "{d}");
        }
        let ratio = mbs("plugging") / mbs("locking");
        assert!(
            (0.8..1.25).contains(&ratio),
            "{}: writers {ratio:.2}",
            d["device"]
        );
    }
    assert!(
        r.table.contains("off its write pointer: none"),
        "{}",
        r.table
    );
}
