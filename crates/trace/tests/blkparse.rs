//! What we write, read back by us and by Debian's blkparse: the writer's per-action counts,
//! every event line, both byte orders. The blkparse checks skip, saying so, where blkparse
//! is not installed (`apt-get install blktrace`).

use mqblk_core::{BlkStatus, CtxIdx, HctxIdx, Nanos, ReqFlags, ReqOp, RqId};
use mqblk_core::{TraceAction, TraceEvent, Tracer};
use mqblk_trace::format::{ta, tc, ByteOrder, Encoding, VERSION_1};
use mqblk_trace::{Counts, Record, TraceSet, TraceWriter};
use std::path::{Path, PathBuf};
use std::process::Command;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mqblk-blkparse-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// blkparse's event lines for trace `base` (its summary cut off), or `None` without it.
fn blkparse(base: &Path) -> Option<Vec<String>> {
    if !mqblk_testkit::need_tools("the blkparse checks", &["blkparse"]) {
        return None;
    }
    let out = Command::new("blkparse")
        .arg("-i")
        .arg(base.file_name().unwrap())
        .arg("-D")
        .arg(base.parent().unwrap())
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "blkparse failed on {}",
        base.display()
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Some(
        text.lines()
            .take_while(|l| !l.starts_with("CPU") && !l.is_empty())
            // blkparse prints a process it has no name for as "(null)".
            .map(|l| l.replace("[(null)]", "[]"))
            .collect(),
    )
}

/// Per-action counts of blkparse's event lines (the action is the sixth column).
fn counts_of(lines: &[String]) -> Counts {
    let mut c = Counts::new();
    for l in lines {
        let code = l.split_whitespace().nth(5).expect("an action column");
        let letter = if code == "UT" {
            'T'
        } else {
            code.chars().next().unwrap()
        };
        *c.entry(letter).or_insert(0) += 1;
    }
    c
}

/// Our blkparse-style lines for every event of a trace.
fn our_lines(set: &TraceSet) -> Vec<String> {
    set.blkparse_lines().collect()
}

fn ev(action: TraceAction, t: u64, ctx: u16, issuer: u32, op: ReqOp, sector: u64) -> TraceEvent {
    TraceEvent {
        action,
        time: Nanos(t),
        op,
        flags: ReqFlags::empty(),
        sector,
        nr_sectors: 8,
        issuer,
        ctx: CtxIdx(ctx),
        hctx: Some(HctxIdx(0)),
        rq: Some(RqId(sector as u32)),
        sched: true,
        status: BlkStatus::Ok,
    }
}

/// The life of a few requests as the core reports them: every action the writer records,
/// from three submitters (1 never submits: its file must still exist for blkparse).
fn events() -> Vec<TraceEvent> {
    use TraceAction::*;
    let mut v = Vec::new();
    let mut t = 1_000_000u64;
    for (ctx, issuer, op, base) in [
        (0u16, 100u32, ReqOp::Read, 0u64),
        (2, 200, ReqOp::Write, 1 << 20),
    ] {
        for i in 0..20u64 {
            let s = base + i * 16;
            t += 1000;
            v.push(ev(Queue, t, ctx, issuer, op, s));
            v.push(ev(GetRq, t + 1, ctx, issuer, op, s));
            v.push(ev(Queue, t + 2, ctx, issuer, op, s + 8));
            v.push(ev(BackMerge, t + 3, ctx, issuer, op, s + 8));
            v.push(ev(Insert, t + 4, ctx, issuer, op, s));
            if i % 5 == 0 {
                v.push(ev(Requeue, t + 5, ctx, issuer, op, s));
            }
            v.push(ev(Issue, t + 6, ctx, issuer, op, s));
            let mut c = ev(Complete, t + 500, ctx, issuer, op, s);
            c.nr_sectors = 16;
            if i == 7 {
                c.status = BlkStatus::IoErr;
            }
            v.push(c);
            v.push(ev(Run, t + 501, ctx, issuer, op, 0));
        }
        // A front merge and a flush.
        t += 1000;
        v.push(ev(Queue, t, ctx, issuer, op, base + 4000));
        v.push(ev(FrontMerge, t + 1, ctx, issuer, op, base + 4000));
        let mut f = ev(Queue, t + 2, ctx, issuer, ReqOp::Flush, 0);
        f.nr_sectors = 0;
        f.flags = ReqFlags::SYNC.union(ReqFlags::PREFLUSH);
        v.push(f);
    }
    v
}

#[test]
fn the_writer_counts_what_it_wrote_and_blkparse_agrees() {
    let d = tmpdir("writer");
    let base = d.join("w");
    let w = TraceWriter::new(&base);
    let evs = events();
    for e in &evs {
        w.event(e);
    }
    let counts = w.finish().unwrap();
    // What the events say, by hand: 2 submitters x (20 x (2 Q, G, M, I, D, C) + 4 R + Q, F, Q).
    let want: Counts = [
        ('Q', 2 * 42),
        ('G', 40),
        ('M', 40),
        ('F', 2),
        ('I', 40),
        ('R', 8),
        ('D', 40),
        ('C', 40),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, want);
    assert_eq!(w.files().len(), 3);
    assert_eq!(std::fs::metadata(d.join("w.blktrace.1")).unwrap().len(), 0);
    // Read back: the same counts, one file per submitter, each numbered from 1.
    let set = TraceSet::open(&base).unwrap();
    assert_eq!(set.counts(), counts);
    assert_eq!(set.files.len(), 3);
    for cpu in [0, 2] {
        let seqs: Vec<u32> = set
            .records
            .iter()
            .filter(|r| r.cpu == cpu)
            .map(|r| r.sequence)
            .collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u32).collect::<Vec<_>>(),
            "cpu {cpu}"
        );
    }
    let names = set.process_names();
    assert_eq!(names[&200], "mqblk-200");
    let failed: Vec<&Record> = set.completed().filter(|r| r.error != 0).collect();
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().all(|r| r.errno() == 5));
    let flush = set.queued().find(|r| r.bytes == 0).unwrap();
    assert_eq!(flush.rwbs(), "FWS");
    let Some(theirs) = blkparse(&base) else {
        return;
    };
    assert_eq!(counts_of(&theirs), counts, "blkparse's per-action counts");
    assert_eq!(theirs, our_lines(&set), "blkparse's lines and ours");
    assert!(theirs[0].ends_with("[mqblk-100]"), "{}", theirs[0]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn blkparse_reads_both_byte_orders_alike() {
    let d = tmpdir("orders");
    let mut recs = vec![Record::process_name(7, "dd", 8 << 20, 0, 0)];
    for (i, (what, cat)) in [
        (ta::QUEUE, tc::QUEUE),
        (ta::SPLIT, 0),
        (ta::GETRQ, tc::QUEUE),
        (ta::PLUG, tc::QUEUE),
        (ta::UNPLUG_IO, tc::QUEUE),
        (ta::UNPLUG_TIMER, tc::QUEUE),
        (ta::INSERT, tc::QUEUE),
        (ta::ISSUE, tc::ISSUE),
        (ta::REMAP, tc::QUEUE),
        (ta::COMPLETE, tc::COMPLETE),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = Record {
            sequence: i as u32 + 2,
            time: 1000 * (i as u64 + 1),
            sector: 2048,
            bytes: 65536,
            action: what | tc::act(cat | tc::WRITE | tc::SYNC),
            pid: 7,
            device: 8 << 20,
            ..Record::empty()
        };
        r.pdu = match what {
            ta::SPLIT => 2100u64.to_be_bytes().to_vec(),
            ta::UNPLUG_IO | ta::UNPLUG_TIMER => 4u64.to_be_bytes().to_vec(),
            ta::REMAP => [
                ((259u32 << 20) | 2).to_be_bytes().as_slice(),
                (8u32 << 20).to_be_bytes().as_slice(),
                0u64.to_be_bytes().as_slice(),
            ]
            .concat(),
            _ => Vec::new(),
        };
        recs.push(r);
    }
    let mut outputs = Vec::new();
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let base = d.join(format!("{order:?}"));
        let mut b = Vec::new();
        for r in &recs {
            r.encode_as(
                Encoding {
                    version: VERSION_1,
                    order,
                },
                &mut b,
            );
        }
        std::fs::write(base.with_file_name(format!("{order:?}.blktrace.0")), b).unwrap();
        let set = TraceSet::open(&base).unwrap();
        assert_eq!(set.records, recs, "{order:?}");
        let Some(theirs) = blkparse(&base) else {
            return;
        };
        assert_eq!(theirs, our_lines(&set), "{order:?}");
        outputs.push(theirs);
    }
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[0].len(), 10);
    let _ = std::fs::remove_dir_all(&d);
}

/// A pid with two name records (a trace written by another tool, or a process renamed):
/// blkparse names its every event by the first (`add_ppm_hash` keeps the first), and so do we.
#[test]
fn a_pid_named_twice_keeps_its_first_name_as_in_blkparse() {
    let d = tmpdir("renamed");
    let queued = |seq: u32, time: u64| Record {
        sequence: seq,
        time,
        sector: 2048 + u64::from(seq) * 8,
        bytes: 4096,
        action: ta::QUEUE | tc::act(tc::QUEUE | tc::READ),
        pid: 7,
        device: 8 << 20,
        ..Record::empty()
    };
    let recs = vec![
        Record::process_name(7, "sh", 8 << 20, 0, 0),
        queued(1, 1000),
        Record::process_name(7, "dd", 8 << 20, 0, 1500),
        queued(2, 2000),
    ];
    let base = d.join("r");
    let mut b = Vec::new();
    for r in &recs {
        r.encode_as(
            Encoding {
                version: VERSION_1,
                order: ByteOrder::Little,
            },
            &mut b,
        );
    }
    std::fs::write(d.join("r.blktrace.0"), b).unwrap();
    let set = TraceSet::open(&base).unwrap();
    assert_eq!(set.process_names()[&7], "sh");
    let ours = our_lines(&set);
    assert_eq!(ours.len(), 2);
    assert!(ours.iter().all(|l| l.ends_with("[sh]")), "{ours:?}");
    let Some(theirs) = blkparse(&base) else {
        return;
    };
    assert_eq!(theirs, ours);
    let _ = std::fs::remove_dir_all(&d);
}

/// Events of two CPUs at the same nanosecond (tracefs' microsecond clock makes these common
/// in a capture): blkparse goes on with the file it is reading until the other's next event
/// is strictly earlier (`ms_resort`), whatever the CPUs' sequence numbers say, and so do we.
/// A CPU file whose times go backwards keeps its own order.
#[test]
fn events_at_the_same_time_come_out_as_blkparse_merges_its_files() {
    let d = tmpdir("ties");
    let base = d.join("t");
    let at = |cpu: u32, seq: u32, time: u64, what: u32, cat: u32| Record {
        sequence: seq,
        time,
        sector: 4096 + u64::from(seq) * 8 + u64::from(cpu) * 1000,
        bytes: 4096,
        action: what | tc::act(cat | tc::WRITE),
        pid: 9 + cpu,
        device: 7 << 20,
        cpu,
        ..Record::empty()
    };
    // Both CPUs have events at 3000; CPU 1, being read after its event at 2000, gives its
    // two first though its sequence numbers are higher; its file goes back to 1500 at the
    // end.
    let files = [
        vec![
            at(0, 30, 1000, ta::QUEUE, tc::QUEUE),
            at(0, 31, 3000, ta::INSERT, tc::QUEUE),
            at(0, 32, 3000, ta::ISSUE, tc::ISSUE),
            at(0, 33, 3000, ta::COMPLETE, tc::COMPLETE),
            at(0, 34, 4000, ta::QUEUE, tc::QUEUE),
        ],
        vec![
            at(1, 101, 2000, ta::QUEUE, tc::QUEUE),
            at(1, 102, 3000, ta::ISSUE, tc::ISSUE),
            at(1, 103, 3000, ta::COMPLETE, tc::COMPLETE),
            at(1, 104, 5000, ta::QUEUE, tc::QUEUE),
            at(1, 105, 1500, ta::COMPLETE, tc::COMPLETE),
        ],
    ];
    for (cpu, recs) in files.iter().enumerate() {
        let mut b = Vec::new();
        for r in recs {
            r.encode_as(Encoding::NATIVE, &mut b);
        }
        std::fs::write(d.join(format!("t.blktrace.{cpu}")), b).unwrap();
    }
    let set = TraceSet::open(&base).unwrap();
    let order: Vec<(u32, u32)> = set.records.iter().map(|r| (r.cpu, r.sequence)).collect();
    assert_eq!(
        order,
        [
            (0, 30),
            (1, 101),
            (1, 102),
            (1, 103),
            (0, 31),
            (0, 32),
            (0, 33),
            (0, 34),
            (1, 104),
            (1, 105)
        ],
        "CPU 1 holds 3000 until its next event is later; its file keeps its order"
    );
    let Some(theirs) = blkparse(&base) else {
        return;
    };
    assert_eq!(theirs, our_lines(&set));
    let _ = std::fs::remove_dir_all(&d);
}
