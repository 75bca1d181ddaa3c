//! The record format: round trips in both byte orders and versions, and one-line errors
//! naming the file and offset for damaged traces.

use mqblk_trace::format::{
    decode_all, detect, mkdev, ta, tc, tn, ByteOrder, Encoding, VERSION_1, VERSION_2,
};
use mqblk_trace::{FormatError, Record, TraceSet};

fn rec(seq: u32, time: u64, what: u32, cats: u32) -> Record {
    Record {
        sequence: seq,
        time,
        sector: 1000 + seq as u64 * 8,
        bytes: 4096,
        action: what | tc::act(cats),
        pid: 42,
        device: mkdev(8, 16),
        cpu: 1,
        ..Record::empty()
    }
}

const ENCODINGS: [Encoding; 4] = [
    Encoding {
        version: VERSION_1,
        order: ByteOrder::Little,
    },
    Encoding {
        version: VERSION_1,
        order: ByteOrder::Big,
    },
    Encoding {
        version: VERSION_2,
        order: ByteOrder::Little,
    },
    Encoding {
        version: VERSION_2,
        order: ByteOrder::Big,
    },
];

/// One of each kind: plain events, a failed completion, a cgroup id, payloads (split,
/// remap, unplug), a process name.
fn sample() -> Vec<Record> {
    let mut recs = vec![
        Record::process_name(42, "fio", mkdev(8, 16), 1, 0),
        rec(2, 10, ta::QUEUE, tc::QUEUE | tc::READ | tc::SYNC),
        rec(3, 20, ta::ISSUE, tc::ISSUE | tc::WRITE | tc::FUA),
        rec(4, 30, ta::COMPLETE, tc::COMPLETE | tc::WRITE),
        rec(5, 31, ta::SPLIT, tc::READ),
        rec(6, 32, ta::REMAP, tc::QUEUE | tc::WRITE),
        rec(7, 33, ta::UNPLUG_IO, tc::QUEUE),
        rec(8, 34, ta::BACKMERGE, tc::QUEUE | tc::WRITE | tc::META),
    ];
    recs[3].error = 5;
    recs[2].cgroup = Some(0x0102_0304_0506_0708);
    recs[4].pdu = 5000u64.to_be_bytes().to_vec();
    let mut remap = Vec::new();
    remap.extend_from_slice(&mkdev(259, 1).to_be_bytes());
    remap.extend_from_slice(&mkdev(8, 16).to_be_bytes());
    remap.extend_from_slice(&77u64.to_be_bytes());
    recs[5].pdu = remap;
    recs[6].pdu = 3u64.to_be_bytes().to_vec();
    recs
}

#[test]
fn every_version_and_byte_order_round_trips() {
    let recs = sample();
    for enc in ENCODINGS {
        let mut bytes = Vec::new();
        for r in &recs {
            r.encode_as(enc, &mut bytes);
        }
        assert_eq!(detect(&bytes), Some(enc));
        let len = if enc.version == VERSION_2 { 64 } else { 48 };
        let payloads: usize = recs
            .iter()
            .map(|r| r.pdu.len() + 8 * usize::from(r.cgroup.is_some()))
            .sum();
        assert_eq!(bytes.len(), recs.len() * len + payloads, "{enc:?}");
        assert_eq!(decode_all("t", &bytes).unwrap(), recs, "{enc:?}");
    }
    // The two byte orders differ (the test would pass trivially otherwise).
    let (mut le, mut be) = (Vec::new(), Vec::new());
    recs[1].encode_as(ENCODINGS[0], &mut le);
    recs[1].encode_as(ENCODINGS[1], &mut be);
    assert_ne!(le, be);
    assert_eq!(&be[..4], &[0x65, 0x61, 0x74, 0x07]);
}

#[test]
fn the_payload_helpers_read_what_blktrace_puts_there() {
    let recs = sample();
    assert_eq!(recs[0].comm().as_deref(), Some("fio"));
    assert!(recs[0].is_notify() && recs[0].what() == tn::PROCESS);
    assert_eq!(recs[4].pdu_u64(), Some(5000));
    assert_eq!(recs[5].remap(), Some((mkdev(259, 1), mkdev(8, 16), 77)));
    assert_eq!(recs[6].pdu_u64(), Some(3));
    assert_eq!(recs[1].remap(), None);
    let letters: String = recs.iter().map(Record::letter).collect();
    assert_eq!(letters, "NQDCXAUM");
    assert_eq!(recs[1].rwbs(), "RS");
    assert_eq!(recs[2].rwbs(), "WF");
    assert_eq!(recs[7].rwbs(), "WM");
    let timer = rec(9, 40, ta::UNPLUG_TIMER, tc::QUEUE);
    assert_eq!((timer.letter(), timer.code()), ('T', "UT"));
    let flush = Record {
        bytes: 0,
        ..rec(
            9,
            40,
            ta::QUEUE,
            tc::QUEUE | tc::WRITE | tc::FLUSH | tc::SYNC,
        )
    };
    assert_eq!(flush.rwbs(), "FWS");
    let mut failed = rec(10, 50, ta::COMPLETE, tc::COMPLETE | tc::READ);
    failed.error = 5u16.wrapping_neg();
    assert_eq!(failed.errno(), 5, "the kernel's negated errno");
    failed.error = 5;
    assert_eq!(failed.errno(), 5);
}

#[test]
fn version_8_keeps_the_zone_categories_and_version_7_drops_them() {
    let mut r = rec(1, 1, ta::COMPLETE, tc::COMPLETE | tc::WRITE);
    r.action_high = (tc::ZONE_APPEND | tc::WRITE_ZEROES) >> 16;
    assert!(r.has(tc::ZONE_APPEND) && r.has(tc::WRITE_ZEROES) && !r.has(tc::ZONE_RESET));
    let mut v8 = Vec::new();
    r.encode_as(ENCODINGS[3], &mut v8);
    assert_eq!(decode_all("z", &v8).unwrap(), vec![r.clone()]);
    let mut v7 = Vec::new();
    r.encode_as(ENCODINGS[0], &mut v7);
    let back = &decode_all("z", &v7).unwrap()[0];
    assert_eq!(back.action_high, 0);
    assert_eq!(back.action, r.action);
}

#[test]
fn cgroup_ids_are_split_from_the_payload() {
    let mut r = rec(1, 1, ta::QUEUE, tc::QUEUE | tc::READ);
    r.cgroup = Some(99);
    r.pdu = b"xy".to_vec();
    let mut b = Vec::new();
    r.encode(&mut b);
    // On disk: the cgroup flag in the action, the id in front of the payload.
    let action = u32::from_ne_bytes(b[28..32].try_into().unwrap());
    assert_eq!(action & ta::CGROUP, ta::CGROUP);
    assert_eq!(u16::from_ne_bytes(b[46..48].try_into().unwrap()), 10);
    let got = &decode_all("cg", &b).unwrap()[0];
    assert_eq!(got.what(), ta::QUEUE);
    assert_eq!((got.cgroup, got.pdu.as_slice()), (Some(99), &b"xy"[..]));
    // A cgroup flag without room for the id is damage, not a panic.
    let mut bad = Vec::new();
    Record {
        action: ta::QUEUE | ta::CGROUP | tc::act(tc::QUEUE),
        pdu: vec![1, 2, 3],
        ..rec(2, 2, 0, 0)
    }
    .encode(&mut bad);
    let e = decode_all("cg.blktrace.0", &bad).unwrap_err().to_string();
    assert_eq!(
        e,
        "cg.blktrace.0: offset 0: cgroup flag set but the payload has 3 bytes (needs 8 for the id)"
    );
}

#[test]
fn damage_is_reported_with_file_and_offset() {
    for enc in ENCODINGS {
        let len = if enc.version == VERSION_2 { 64 } else { 48 };
        let mut b = Vec::new();
        rec(1, 1, ta::QUEUE, tc::QUEUE).encode_as(enc, &mut b);
        rec(2, 2, ta::QUEUE, tc::QUEUE).encode_as(enc, &mut b);
        let cut = &b[..b.len() - 5];
        let e = decode_all("x.blktrace.0", cut).unwrap_err();
        assert_eq!(
            e,
            FormatError::Truncated {
                file: "x.blktrace.0".into(),
                offset: len as u64,
                have: len - 5,
                need: len
            },
            "{enc:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "x.blktrace.0: offset {len}: truncated record ({} of {len} bytes)",
                len - 5
            )
        );
        // A payload cut short.
        let mut p = Vec::new();
        Record {
            pdu: vec![7; 20],
            ..rec(1, 1, ta::QUEUE, tc::QUEUE)
        }
        .encode_as(enc, &mut p);
        let e = decode_all("p", &p[..p.len() - 1]).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "p: offset 0: truncated record ({} of {} bytes)",
                len + 19,
                len + 20
            )
        );
        let mut bad = b.clone();
        bad[len + 2] ^= 0xff;
        let e = decode_all("x.blktrace.0", &bad).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("x.blktrace.0: offset {len}: bad magic")),
            "{e}"
        );
        let mut ver = b.clone();
        let at = if enc.order == ByteOrder::Little { 0 } else { 3 };
        ver[at] = 0x09;
        let e = decode_all("x.blktrace.0", &ver).unwrap_err().to_string();
        assert_eq!(
            e,
            "x.blktrace.0: offset 0: unsupported blktrace version 0x09 (7 and 8 are known)"
        );
    }
    let e = decode_all("tiny", &[0x00, 0x74]).unwrap_err().to_string();
    assert_eq!(e, "tiny: offset 0: truncated record (2 of 48 bytes)");
}

#[test]
fn blkparse_lines_follow_its_default_format() {
    let recs = sample();
    let lines: Vec<String> = recs
        .iter()
        .filter_map(|r| r.blkparse_line(Some("fio"), 0))
        .collect();
    assert_eq!(
        lines,
        [
            "  8,16   1        2     0.000000010    42  Q  RS 1016 + 8 [fio]",
            "  8,16   1        3     0.000000020    42  D  WF 1024 + 8 [fio]",
            "  8,16   1        4     0.000000030    42  C   W 1032 + 8 [5]",
            "  8,16   1        5     0.000000031    42  X   R 1040 / 5000 [fio]",
            "  8,16   1        6     0.000000032    42  A   W 1048 + 8 <- (259,1) 77",
            "  8,16   1        7     0.000000033    42  U   R [fio] 3",
            "  8,16   1        8     0.000000034    42  M  WM 1064 + 8 [fio]",
        ]
    );
    let flush = Record {
        bytes: 0,
        time: 12_000_000_345,
        ..rec(9, 0, ta::ISSUE, tc::ISSUE | tc::WRITE | tc::FLUSH)
    };
    assert_eq!(
        flush.blkparse_line(None, 345).unwrap(),
        "  8,16   1        9    12.000000000    42  D  FW []"
    );
}

#[test]
fn trace_sets_merge_per_cpu_files_by_time() {
    let dir = std::env::temp_dir().join(format!("mqblk-traceset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // CPU 1's file is big-endian version 8: a set may mix encodings.
    for (cpu, times, enc) in [
        (0u32, [5u64, 30, 31], Encoding::NATIVE),
        (1, [1, 10, 40], ENCODINGS[3]),
    ] {
        let mut b = Vec::new();
        for (i, t) in times.iter().enumerate() {
            let mut r = rec(i as u32 + 1, *t, ta::QUEUE, tc::QUEUE | tc::READ);
            r.cpu = cpu;
            r.encode_as(enc, &mut b);
        }
        let mut c = rec(9, 41, ta::COMPLETE, tc::COMPLETE | tc::READ);
        c.cpu = cpu;
        c.encode_as(enc, &mut b);
        std::fs::write(dir.join(format!("dev.blktrace.{cpu}")), b).unwrap();
    }
    let set = TraceSet::open(&dir.join("dev")).unwrap();
    let times: Vec<u64> = set.records.iter().map(|r| r.time).collect();
    assert_eq!(times, vec![1, 5, 10, 30, 31, 40, 41, 41]);
    let cpus_at_41: Vec<u32> = set.records[6..].iter().map(|r| r.cpu).collect();
    // CPU 1 gave 40 and goes on at 41 (blkparse's `ms_resort` moves a file on only when
    // another's next event is strictly earlier).
    assert_eq!(
        cpus_at_41,
        vec![1, 0],
        "the file giving events goes on at a tie"
    );
    assert_eq!(set.queued().count(), 6);
    assert_eq!(set.completed().count(), 2);
    assert_eq!(set.counts()[&'Q'], 6);
    // A single per-CPU file (or a merged dump) is a trace too.
    let one = TraceSet::open(&dir.join("dev.blktrace.1")).unwrap();
    assert_eq!(one.records.len(), 4);
    // Two traces read as one.
    let both = TraceSet::open_all(&[dir.join("dev"), dir.join("dev.blktrace.1")]).unwrap();
    assert_eq!(both.records.len(), 12);
    let e = TraceSet::open(&dir.join("nope")).unwrap_err();
    assert!(
        matches!(e, mqblk_trace::TraceError::NoFiles { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("no trace files (nope.blktrace.N)"),
        "{e}"
    );
    std::fs::write(dir.join("dev.blktrace.2"), [0x00, 0x74, 0x61]).unwrap();
    let e = TraceSet::open(&dir.join("dev")).unwrap_err();
    assert!(matches!(e, mqblk_trace::TraceError::Format(_)), "{e:?}");
    assert!(
        e.to_string()
            .ends_with("dev.blktrace.2: offset 0: truncated record (3 of 48 bytes)"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
