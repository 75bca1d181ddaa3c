//! Trace replay: the waits a trace shows (a process idle until another's I/O completed) are
//! found, and the simulator honours them, without stalling when the awaited I/O never comes.

use mqblk_core::Nanos;
use mqblk_sim::replay::{IoRef, Mode, Replayable, Wait};
use mqblk_sim::workload::{FioSource, Gate, IoReq, JobIo, Limit, Next, SimJob, Source};
use mqblk_sim::{DeviceSpec, Sim, SimConfig, SimRng};
use mqblk_trace::format::{ta, tc, Record};
use mqblk_trace::TraceSet;
use mqblk_workload::RwMode;
use std::sync::Arc;

const US: u64 = 1000;

fn queue(pid: u32, t_us: u64, sector: u64, bytes: u32, cats: u32) -> Record {
    Record {
        time: t_us * US,
        sector,
        bytes,
        action: ta::QUEUE | tc::act(tc::QUEUE) | tc::act(tc::WRITE) | cats,
        pid,
        ..Record::empty()
    }
}

fn complete(t_us: u64, sector: u64, bytes: u32, cats: u32) -> Record {
    Record {
        time: t_us * US,
        sector,
        bytes,
        action: ta::COMPLETE | tc::act(tc::COMPLETE) | tc::act(tc::WRITE) | cats,
        ..Record::empty()
    }
}

fn set(mut records: Vec<Record>) -> TraceSet {
    records.insert(0, Record::process_name(10, "client", 0, 0, 0));
    records.insert(1, Record::process_name(20, "jbd2", 0, 0, 0));
    TraceSet {
        records,
        files: Vec::new(),
    }
}

/// A client's fsync as ext4 does it: the client's data write, then jbd2's commit (journal
/// blocks, then the commit record with PREFLUSH and FUA, completed again after its
/// post-flush), then the client goes on; a flush of its own in between.
#[test]
fn the_waits_a_trace_shows_are_found() {
    let sync = tc::act(tc::SYNC);
    let fua = tc::act(tc::FUA) | tc::act(tc::FLUSH) | sync;
    let rep = Replayable::from_trace(&set(vec![
        queue(10, 0, 100, 4096, sync),
        complete(100, 100, 4096, sync),
        // jbd2 woken by the client's write 50 us later; two journal blocks at once.
        queue(20, 150, 1000, 4096, sync),
        queue(20, 151, 1008, 4096, sync),
        complete(300, 1000, 8192, sync),
        // The commit record once its blocks are done: its own completion woke it.
        queue(20, 310, 1016, 4096, fua),
        complete(380, 1016, 4096, sync),
        complete(400, 1016, 0, sync),
        // The client again, 50 us after the commit record's final completion.
        queue(10, 450, 200, 4096, sync),
        complete(500, 200, 4096, sync),
        // A flush of the client's: a flush completion has no range.
        Record {
            bytes: 0,
            ..queue(10, 520, 0, 0, tc::act(tc::FLUSH) | sync)
        },
        complete(600, u64::MAX, 0, tc::act(tc::FLUSH)),
        queue(10, 610, 300, 4096, sync),
    ]));
    assert_eq!(rep.processes.len(), 2);
    let (client, jbd2) = (&rep.processes[0], &rep.processes[1]);
    assert_eq!(
        (client.name.as_str(), jbd2.name.as_str()),
        ("client", "jbd2")
    );
    let waits = |p: &mqblk_sim::replay::ProcessIo| p.ios.iter().map(|t| t.wait).collect::<Vec<_>>();
    assert_eq!(
        waits(jbd2),
        vec![
            Wait {
                drain: false,
                after: Some(IoRef {
                    process: 0,
                    index: 0
                }),
                think_ns: 50 * US,
            },
            Wait::default(),
            Wait {
                drain: true,
                after: None,
                think_ns: 10 * US,
            },
        ]
    );
    assert_eq!(
        waits(client),
        vec![
            Wait::default(),
            Wait {
                drain: true,
                after: Some(IoRef {
                    process: 1,
                    index: 2
                }),
                think_ns: 50 * US,
            },
            Wait {
                drain: true,
                after: None,
                think_ns: 20 * US,
            },
            // The flush completed: nothing of the client's was in flight.
            Wait {
                drain: true,
                after: None,
                think_ns: 10 * US,
            },
        ]
    );
    // The flush's completion took it out of flight: the client never had two.
    assert_eq!((client.max_inflight, jbd2.max_inflight), (1, 2));
    assert_eq!((rep.drains, rep.cross_waits), (4, 2));
}

/// A process that waited for others' I/O is taken to have waited for the newest durability
/// point since its own last completion (a flush, or a write with PREFLUSH or FUA: what an
/// `fsync` waits for), not for whichever completion came last: another client's write
/// that completed after jbd2's commit record, just before this client went on, did not
/// wake it. With no durability point in between, the newest completion still counts.
#[test]
fn a_client_waits_for_the_commit_record_not_the_latest_completion() {
    let sync = tc::act(tc::SYNC);
    let fua = tc::act(tc::FUA) | tc::act(tc::FLUSH) | sync;
    let mut records = vec![
        queue(10, 0, 100, 4096, sync),
        complete(100, 100, 4096, sync),
        // jbd2's commit record, done at 260 after its post-flush.
        queue(20, 150, 1016, 4096, fua),
        // Another client's write, done at 300.
        queue(30, 200, 500, 4096, sync),
        complete(250, 1016, 4096, sync),
        complete(260, 1016, 0, sync),
        complete(300, 500, 4096, sync),
        // The first client goes on at 320: woken by the commit record, 60 us before.
        queue(10, 320, 200, 4096, sync),
        complete(400, 200, 4096, sync),
        // The other client's next write follows the first client's, no durability point
        // in between: the newest completion is taken as before.
        queue(30, 410, 600, 4096, sync),
    ];
    records.insert(0, Record::process_name(30, "client2", 0, 0, 0));
    let rep = Replayable::from_trace(&set(records));
    let by_name = |n: &str| rep.processes.iter().position(|p| p.name == n).unwrap();
    let (client, jbd2, other) = (by_name("client"), by_name("jbd2"), by_name("client2"));
    assert_eq!(
        rep.processes[client].ios[1].wait,
        Wait {
            drain: true,
            after: Some(IoRef {
                process: jbd2 as u32,
                index: 0
            }),
            think_ns: 60 * US,
        }
    );
    assert_eq!(
        rep.processes[other].ios[1].wait,
        Wait {
            drain: true,
            after: Some(IoRef {
                process: client as u32,
                index: 1
            }),
            think_ns: 10 * US,
        }
    );
}

/// Two processes taking turns (each woken by the other's completion) take twice as long as
/// the same I/O without the waits, where they run side by side.
#[test]
fn a_replay_waits_for_the_io_that_woke_it() {
    let mut records = Vec::new();
    for i in 0..20u64 {
        let (a, b) = (i * 200, i * 200 + 100);
        records.push(queue(10, a, 8 * i, 4096, 0));
        records.push(complete(a + 100, 8 * i, 4096, 0));
        records.push(queue(20, b, 4096 + 8 * i, 4096, 0));
        records.push(complete(b + 100, 4096 + 8 * i, 4096, 0));
    }
    let rep = Replayable::from_trace(&set(records));
    assert_eq!(rep.cross_waits, 39);
    let end = |waits: bool| {
        let cfg = SimConfig {
            nr_cpus: 2,
            device: mqblk_sim::DeviceConfig::model(
                DeviceSpec::parse("null,completion_nsec=1000000").unwrap(),
                mqblk_sim::QueueSettings::default(),
            ),
            check_every: 1,
            ..SimConfig::default()
        };
        let jobs = mqblk_sim::replay::jobs(&rep, Mode::Closed, 1.0, 2, 1 << 20, waits, 0);
        let r = Sim::new(cfg, jobs).and_then(Sim::run).unwrap();
        assert_eq!(r.jobs.iter().map(|j| j.ios).sum::<u64>(), 40);
        r.end.0
    };
    let (with, without) = (end(true), end(false));
    assert!(with >= 40_000_000, "{with} ns for 40 turns of 1 ms");
    assert!(without <= 25_000_000, "{without} ns side by side");
}

/// Five random 4 KiB reads on CPU 0, the run's first job.
fn reader() -> SimJob {
    SimJob::new(
        "reader".into(),
        0,
        1,
        1,
        Limit {
            ios: Some(5),
            ..Limit::default()
        },
        Box::new(FioSource::new(
            RwMode::RandRead,
            100,
            4096,
            0,
            1 << 20,
            1,
            0,
        )),
        "test",
    )
}

/// Waits once (`Next::After` another job's I/O, or `Next::Await` a gate), then issues one
/// write.
struct WaitThenWrite {
    wait: Option<Next>,
    done: bool,
}

impl Source for WaitThenWrite {
    fn next(&mut self, _now: Nanos, _rng: &mut SimRng) -> Next {
        if let Some(w) = self.wait.take() {
            return w;
        }
        if std::mem::replace(&mut self.done, true) {
            return Next::Done;
        }
        Next::Io(IoReq {
            op: mqblk_core::ReqOp::Write,
            sector: 0,
            nr_sectors: 8,
            flags: mqblk_core::ReqFlags::empty(),
            ioprio: None,
        })
    }
}

/// A job waiting for an I/O its job never issues (it stopped first) goes on when that job
/// ends; one waiting for itself, or for a job the run lacks, is an error, not a stall.
#[test]
fn a_wait_for_an_io_never_issued_ends_with_its_job() {
    let cfg = || SimConfig {
        nr_cpus: 2,
        device: mqblk_sim::DeviceConfig::model(
            DeviceSpec::parse("null").unwrap(),
            mqblk_sim::QueueSettings::default(),
        ),
        check_every: 1,
        ..SimConfig::default()
    };
    let waiter = |target: u32| {
        SimJob::new(
            "waiter".into(),
            1,
            1,
            2,
            Limit::default(),
            Box::new(WaitThenWrite {
                wait: Some(Next::After(JobIo {
                    job: target,
                    io: 100,
                })),
                done: false,
            }),
            "test",
        )
    };
    let r = Sim::new(cfg(), vec![reader(), waiter(0)])
        .and_then(Sim::run)
        .unwrap();
    assert_eq!((r.jobs[0].ios, r.jobs[1].ios), (5, 1));
    assert!(
        r.jobs[1].end >= r.jobs[0].end,
        "{:?}",
        (r.jobs[0].end, r.jobs[1].end)
    );
    for bad in [1, 7] {
        let e = Sim::new(cfg(), vec![reader(), waiter(bad)])
            .and_then(Sim::run)
            .unwrap_err()
            .to_string();
        assert!(e.contains("waits for I/O 100 of job"), "{e}");
    }
}

fn insert(pid: u32, t_us: u64, sector: u64, bytes: u32) -> Record {
    Record {
        time: t_us * US,
        sector,
        bytes,
        action: ta::INSERT | tc::act(tc::WRITE),
        pid,
        ..Record::empty()
    }
}

/// A process that queues bios back to back with no insert of its own between them held
/// them in a plug (writeback, a journal commit); one whose requests are inserted at once did
/// not. Replayed, the plugged bios merge in the plug, before the scheduler sees them; the
/// others go to the scheduler one by one.
#[test]
fn a_replay_plugs_where_the_trace_shows_a_plug() {
    let mut records = Vec::new();
    // jbd2: eight contiguous 4 KiB writes queued back to back, then inserted as one request
    // at the flush of its plug.
    for i in 0..8u64 {
        records.push(queue(20, i, 1000 + 8 * i, 4096, 0));
    }
    records.push(insert(20, 9, 1000, 8 * 4096));
    records.push(complete(100, 1000, 8 * 4096, 0));
    // The client: the same, each write inserted at once (no plug).
    for i in 0..8u64 {
        records.push(queue(10, 200 + 2 * i, 5000 + 8 * i, 4096, 0));
        records.push(insert(10, 201 + 2 * i, 5000 + 8 * i, 4096));
    }
    records.push(complete(300, 5000, 8 * 4096, 0));
    let rep = Replayable::from_trace(&set(records));
    let plugs = |name: &str| -> Vec<bool> {
        let p = rep.processes.iter().find(|p| p.name == name).unwrap();
        p.ios.iter().map(|t| t.new_plug).collect()
    };
    let mut one_plug = vec![false; 8];
    one_plug[0] = true;
    assert_eq!(plugs("jbd2"), one_plug);
    assert_eq!(plugs("client"), vec![true; 8]);
    // Replayed alone on a device that takes each request at once: the plugged writes reach
    // the device as one request, the others as eight.
    for (name, requests) in [("jbd2", 1), ("client", 8)] {
        let mut jobs = mqblk_sim::replay::jobs(&rep, Mode::Closed, 1.0, 1, 1 << 20, false, 0);
        jobs.retain(|j| j.name.starts_with(name));
        for j in &mut jobs {
            // All eight at once, as traced.
            j.iodepth = 8;
        }
        let cfg = SimConfig {
            nr_cpus: 1,
            device: mqblk_sim::DeviceConfig::model(
                DeviceSpec::parse("null,completion_nsec=1000000").unwrap(),
                mqblk_sim::QueueSettings {
                    scheduler: Some("bfq".into()),
                    ..Default::default()
                },
            ),
            check_every: 1,
            ..SimConfig::default()
        };
        let r = Sim::new(cfg, jobs).and_then(Sim::run).unwrap();
        assert_eq!(r.completed, 8, "{name}");
        let issued: u64 = r.hctx.iter().map(|h| h.issued).sum();
        assert_eq!(issued, requests, "{name}");
    }
}

/// Thinks, then raises a gate (as it is asked again), then stops.
struct ThinkThenRaise {
    gate: Arc<Gate>,
    step: u8,
}

impl Source for ThinkThenRaise {
    fn next(&mut self, _now: Nanos, _rng: &mut SimRng) -> Next {
        self.step += 1;
        match self.step {
            1 => Next::Think(Nanos::from_millis(3)),
            2 => {
                self.gate.raise_to(1);
                Next::Done
            }
            _ => Next::Done,
        }
    }
}

/// `Next::Await`: a job asleep on a gate goes on when another job's source raises it (at
/// that moment, not at some later event), and one whose gate nobody is left to raise ends
/// with the run instead of stalling it; with a time limit it ends at its limit.
#[test]
fn a_gate_wait_ends_when_raised_or_when_nobody_is_left() {
    let cfg = || SimConfig {
        nr_cpus: 2,
        device: mqblk_sim::DeviceConfig::model(
            DeviceSpec::parse("null,completion_nsec=10000").unwrap(),
            mqblk_sim::QueueSettings::default(),
        ),
        check_every: 1,
        ..SimConfig::default()
    };
    let waiter = |gate: &Arc<Gate>, limit: Limit| {
        SimJob::new(
            "waiter".into(),
            1,
            1,
            2,
            limit,
            Box::new(WaitThenWrite {
                wait: Some(Next::Await(gate.clone(), 1)),
                done: false,
            }),
            "test",
        )
    };
    // Raised after 3 ms of the other job's thinking: the write follows at once.
    let gate = Gate::new();
    let raiser = SimJob::new(
        "raiser".into(),
        0,
        1,
        1,
        Limit::default(),
        Box::new(ThinkThenRaise {
            gate: gate.clone(),
            step: 0,
        }),
        "test",
    );
    let r = Sim::new(cfg(), vec![raiser, waiter(&gate, Limit::default())])
        .and_then(Sim::run)
        .unwrap();
    assert_eq!(r.jobs[1].ios, 1);
    let end = r.jobs[1].end.0;
    assert!(
        (3_000_000..3_500_000).contains(&end),
        "the write ended at {end} ns, the gate was raised at 3 ms"
    );
    // Nobody raises it: the waiter ends when the other job has, without its write.
    let gate = Gate::new();
    let r = Sim::new(cfg(), vec![reader(), waiter(&gate, Limit::default())])
        .and_then(Sim::run)
        .unwrap();
    assert_eq!((r.jobs[0].ios, r.jobs[1].ios), (5, 0));
    // Alone from the start, with a time limit: it ends at the limit.
    let gate = Gate::new();
    let limit = Limit {
        time: Some(Nanos::from_millis(7)),
        ..Limit::default()
    };
    let r = Sim::new(cfg(), vec![waiter(&gate, limit)])
        .and_then(Sim::run)
        .unwrap();
    assert_eq!(r.jobs[0].ios, 0);
}
