//! Turning tracefs block tracepoint lines into blktrace records: the line formats of current
//! and older kernels and header options, names, payloads, and bad lines that must not panic.

use mqblk_trace::capture::{parse_pipe_line, Converter, PipeLine, Target, TpEvent};
use mqblk_trace::format::{mkdev, ta, tc};
use mqblk_trace::{Record, TraceSet, TraceWriter};

/// Lines as this machine's kernel (6.18) printed them, plus the variants other kernels and
/// options give.
const LINES: &[&str] = &[
    "              dd-2444    [001] .....  8239.435975: block_bio_queue: 7,0 WS 0 + 128 [dd]",
    "              dd-2444    [001] .....  8239.435978: block_split: 7,0 WS 0 / 16 [dd]",
    "              dd-2444    [001] .....  8239.435981: block_getrq: 7,0 WS 0 + 16 [dd]",
    "              dd-2444    [001] ...1.  8239.435982: block_rq_insert: 7,0 WS 8192 () 0 + 16 be,0,4 [dd]",
    "              dd-2444    [001] .....  8239.435984: block_rq_issue: 7,0 WS 8192 () 0 + 16 be,0,4 [dd]",
    "     ksoftirqd/1-22      [001] ..s1.  8239.436100: block_rq_complete: 7,0 WS () 0 + 16 be,0,4 [0]",
    "              cp-2402    [000] .....  8239.500000: block_bio_remap: 7,0 RM 10662 + 2 <- (259,0) 8614",
    "              cp-2402    [000] .....  8239.500002: block_bio_backmerge: 7,0 RM 10664 + 2 [cp]",
    // irq-info off: no flags column; an older kernel: no ioprio field.
    "  kworker/u4:2-105   [000]  8239.600000: block_rq_issue: 7,0 FWS 0 () 0 + 0 [kworker/u4:2]",
    // record-tgid on: a tgid column; a name with a dash and a space.
    "   my-app th-3001  (   3000) [001] .....  8239.700000: block_bio_queue: 8,16 R 2048 + 8 [my-app th]",
    // A name tracefs forgot in its header; the event's own [comm] still has it.
    "           <...>-3002    [000] .....  8239.800000: block_bio_queue: 8,16 WFS 4096 + 8 [jbd2/sda1-8]",
    // A failed completion, from the idle task.
    "          <idle>-0       [000] d.h1.  8239.900000: block_rq_complete: 8,16 R () 2048 + 8 be,0,4 [-5]",
    // A passthrough request: its command bytes have spaces.
    "           sg_io-3003    [001] .....  8239.950000: block_rq_issue: 8,16 N 36 (12 00 00 00 24 00) 0 + 0 none,0,0 [sg_io]",
    "           sg_io-3003    [001] .....  8239.950001: block_rq_requeue: 8,16 W () 77 + 8 be,0,4 [0]",
];

fn event(i: usize) -> TpEvent {
    match parse_pipe_line(LINES[i]) {
        PipeLine::Event(e) => e,
        other => panic!("line {i}: {other:?}"),
    }
}

#[test]
fn every_line_format_parses() {
    let e = event(0);
    assert_eq!(
        e,
        TpEvent {
            comm: "dd".into(),
            pid: 2444,
            cpu: 1,
            time_ns: 8_239_435_975_000,
            action: ta::QUEUE | tc::act(tc::QUEUE | tc::WRITE | tc::SYNC),
            major: 7,
            minor: 0,
            rwbs: "WS".into(),
            sector: 0,
            nr_sectors: 128,
            error: 0,
            pdu: Vec::new(),
        }
    );
    let e = event(1);
    assert_eq!((e.action & 0xffff, e.sector), (ta::SPLIT, 0));
    assert_eq!(e.pdu, 16u64.to_be_bytes());
    let e = event(3);
    assert_eq!(
        (e.action & 0xffff, e.sector, e.nr_sectors),
        (ta::INSERT, 0, 16)
    );
    let e = event(5);
    assert_eq!(
        (e.comm.as_str(), e.pid, e.cpu, e.action & 0xffff, e.error),
        ("ksoftirqd/1", 22, 1, ta::COMPLETE, 0)
    );
    let e = event(6);
    assert_eq!(
        (e.action & 0xffff, e.sector, e.nr_sectors),
        (ta::REMAP, 10662, 2)
    );
    let mut remap = mkdev(259, 0).to_be_bytes().to_vec();
    remap.extend_from_slice(&mkdev(7, 0).to_be_bytes());
    remap.extend_from_slice(&8614u64.to_be_bytes());
    assert_eq!(e.pdu, remap);
    let e = event(8);
    assert_eq!(
        (e.comm.as_str(), e.pid, e.time_ns, e.nr_sectors),
        ("kworker/u4:2", 105, 8_239_600_000_000, 0)
    );
    assert_eq!(
        e.action >> 16,
        tc::ISSUE | tc::FLUSH | tc::WRITE | tc::SYNC,
        "a flush is a write"
    );
    let e = event(9);
    assert_eq!(
        (e.comm.as_str(), e.pid, e.cpu, e.major, e.minor),
        ("my-app th", 3001, 1, 8, 16)
    );
    let e = event(10);
    assert_eq!((e.comm.as_str(), e.pid), ("jbd2/sda1-8", 3002));
    assert_eq!(e.action >> 16, tc::QUEUE | tc::WRITE | tc::FUA | tc::SYNC);
    let e = event(11);
    assert_eq!((e.comm.as_str(), e.pid, e.error), ("<idle>", 0, -5));
    let e = event(12);
    assert_eq!((e.sector, e.nr_sectors, e.comm.as_str()), (0, 0, "sg_io"));
    let e = event(13);
    assert_eq!((e.action & 0xffff, e.sector), (ta::REQUEUE, 77));
}

#[test]
fn other_lines_are_told_apart() {
    assert_eq!(
        parse_pipe_line("CPU:1 [LOST 5012 EVENTS]\n"),
        PipeLine::Lost {
            cpu: 1,
            events: 5012
        }
    );
    assert_eq!(parse_pipe_line("\n"), PipeLine::Blank);
    for other in [
        "# tracer: nop",
        "  bash-1 [000] ..... 1.000000: sched_switch: prev_comm=bash",
        "  fio-1 [000] ..... 1.000000: block_plug: [fio]",
        "  fio-1 [000] ..... 1.000000: block_bio_queue: 7,0 R x + 8 [fio]",
        "  fio-1 [000] ..... 1.000000: block_bio_queue: 7;0 R 8 + 8 [fio]",
        "  fio-1 [000] ..... 1.0000000000: block_bio_queue: 7,0 R 8 + 8 [fio]",
        "  fio [000] ..... 1.000000: block_bio_queue: 7,0 R 8 + 8 [fio]",
    ] {
        assert_eq!(parse_pipe_line(other), PipeLine::Other, "{other}");
    }
}

#[test]
fn cut_and_damaged_lines_never_panic() {
    for line in LINES {
        for (i, _) in line.char_indices() {
            let _ = parse_pipe_line(&line[..i]);
            let _ = parse_pipe_line(&line[i..]);
            let mut s = line.to_string();
            s.replace_range(i..i + 1, "]");
            let _ = parse_pipe_line(&s);
        }
    }
}

#[test]
fn the_converter_names_processes_once_and_times_from_the_first_event() {
    let mut conv = Converter::default();
    let mut out: Vec<Record> = Vec::new();
    for i in 0..LINES.len() {
        conv.convert(&event(i), &mut out);
    }
    let names: Vec<(u32, String)> = out
        .iter()
        .filter_map(|r| Some((r.pid, r.comm()?)))
        .collect();
    let want = [
        (2444, "dd"),
        (22, "ksoftirqd/1"),
        (2402, "cp"),
        (105, "kworker/u4:2"),
        (3001, "my-app th"),
        (3002, "jbd2/sda1-8"),
        (3003, "sg_io"),
    ];
    assert_eq!(
        names,
        want.map(|(p, n)| (p, n.to_string())),
        "no name for pid 0"
    );
    let events: Vec<&Record> = out.iter().filter(|r| !r.is_notify()).collect();
    assert_eq!(events.len(), LINES.len());
    assert_eq!(events[0].time, 0);
    assert_eq!(events[2].time, 6000);
    assert_eq!((events[0].bytes, events[0].device), (65536, mkdev(7, 0)));
    assert_eq!(events[11].error, 5, "errors are stored positive");
    assert_eq!(events[1].pdu_u64(), Some(16));
    assert_eq!(events[6].remap(), Some((mkdev(259, 0), mkdev(7, 0), 8614)));
    // A process renamed later (by exec) keeps its first name, as the kernel's blktrace
    // writes one name record per task per trace.
    let mut renamed = event(0);
    renamed.comm = "dd2".into();
    out.clear();
    conv.convert(&renamed, &mut out);
    assert_eq!(out.len(), 1, "no second name record: {out:?}");
    assert!(!out[0].is_notify());
}

#[test]
fn converted_lines_read_like_blktrace_output() {
    let d = std::env::temp_dir().join(format!("mqblk-capture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let base = d.join("c");
    let w = TraceWriter::new(&base);
    let mut conv = Converter::default();
    let mut out = Vec::new();
    for line in &LINES[..8] {
        if let PipeLine::Event(e) = parse_pipe_line(line) {
            conv.convert(&e, &mut out);
        }
    }
    for r in out {
        w.record(r.cpu as u16, r);
    }
    let counts = w.finish().unwrap();
    assert_eq!(
        mqblk_trace::writer::summary(&counts),
        "A=1 C=1 D=1 G=1 I=1 M=1 Q=1 X=1"
    );
    let set = TraceSet::open(&base).unwrap();
    let lines: Vec<String> = set.blkparse_lines().collect();
    assert_eq!(
        lines,
        [
            "  7,0    1        2     0.000000000  2444  Q  WS 0 + 128 [dd]",
            "  7,0    1        3     0.000003000  2444  X  WS 0 / 16 [dd]",
            "  7,0    1        4     0.000006000  2444  G  WS 0 + 16 [dd]",
            "  7,0    1        5     0.000007000  2444  I  WS 0 + 16 [dd]",
            "  7,0    1        6     0.000009000  2444  D  WS 0 + 16 [dd]",
            "  7,0    1        8     0.000125000    22  C  WS 0 + 16 [0]",
            "  7,0    0        2     0.064025000  2402  A  RM 10662 + 2 <- (259,0) 8614",
            "  7,0    0        3     0.064027000  2402  M  RM 10664 + 2 [cp]",
        ]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn partitions_are_traced_on_their_disk_within_their_sectors() {
    let disk = Target {
        major: 8,
        minor: 0,
        range: None,
    };
    assert_eq!(disk.filter(), format!("dev == {}", 8 << 20));
    let part = Target {
        major: 8,
        minor: 0,
        range: Some((2048, 1000)),
    };
    assert_eq!(
        part.filter(),
        format!("dev == {} && sector >= 2048 && sector < 3048", 8 << 20)
    );
    let e = Target::of(std::path::Path::new("/dev/null")).unwrap_err();
    assert_eq!(e.to_string(), "/dev/null: not a block device");
    let e = Target::of(std::path::Path::new("/nonexistent/dev")).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/dev: "), "{e}");
}
