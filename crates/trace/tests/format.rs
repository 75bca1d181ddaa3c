//! The record format: round trips in both byte orders and versions, and one-line errors
//! naming the file and offset for damaged traces.

use mqblk_trace::format::{decode_all, mkdev, ta, tc, tn, MAGIC, VERSION_2};
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
        error: 0,
        pdu: Vec::new(),
    }
}

/// The same record encoded big-endian (as a big-endian host's blktrace writes it).
fn encode_be(r: &Record, version: u8) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(&(MAGIC | version as u32).to_be_bytes());
    o.extend_from_slice(&r.sequence.to_be_bytes());
    o.extend_from_slice(&r.time.to_be_bytes());
    o.extend_from_slice(&r.sector.to_be_bytes());
    o.extend_from_slice(&r.bytes.to_be_bytes());
    if version == VERSION_2 {
        o.extend_from_slice(&r.pid.to_be_bytes());
        o.extend_from_slice(&(r.action as u64).to_be_bytes());
    } else {
        o.extend_from_slice(&r.action.to_be_bytes());
        o.extend_from_slice(&r.pid.to_be_bytes());
    }
    o.extend_from_slice(&r.device.to_be_bytes());
    o.extend_from_slice(&r.cpu.to_be_bytes());
    o.extend_from_slice(&r.error.to_be_bytes());
    o.extend_from_slice(&(r.pdu.len() as u16).to_be_bytes());
    if version == VERSION_2 {
        o.extend_from_slice(&[0u8; 12]);
    }
    o.extend_from_slice(&r.pdu);
    o
}

#[test]
fn native_round_trip_with_payloads() {
    let mut recs = vec![
        rec(1, 10, ta::QUEUE, tc::QUEUE | tc::READ | tc::SYNC),
        rec(2, 20, ta::ISSUE, tc::ISSUE | tc::WRITE | tc::FUA),
        rec(3, 30, ta::COMPLETE, tc::COMPLETE | tc::WRITE),
    ];
    recs[2].error = 5;
    recs.push(Record {
        pdu: b"fio\0".to_vec(),
        action: tn::PROCESS | tc::act(tc::NOTIFY),
        ..rec(4, 31, 0, 0)
    });
    let mut bytes = Vec::new();
    for r in &recs {
        r.encode(&mut bytes);
    }
    assert_eq!(decode_all("t", &bytes).unwrap(), recs);
    assert_eq!(recs[0].letter(), 'Q');
    assert_eq!(recs[0].rwbs(), "RS");
    assert_eq!(recs[1].rwbs(), "WF");
}

#[test]
fn big_endian_and_version_8_records_decode() {
    let r = rec(7, 123_456, ta::QUEUE, tc::QUEUE | tc::READ);
    for v in [0x07u8, VERSION_2] {
        let got = decode_all("be", &encode_be(&r, v)).unwrap();
        assert_eq!(got, vec![r.clone()], "version {v}");
    }
}

#[test]
fn cgroup_payload_is_stripped() {
    let mut r = rec(1, 1, ta::QUEUE | ta::CGROUP, tc::QUEUE | tc::READ);
    r.pdu = vec![1, 2, 3, 4, 5, 6, 7, 8];
    let mut b = Vec::new();
    r.encode(&mut b);
    let got = &decode_all("cg", &b).unwrap()[0];
    assert_eq!(got.what(), ta::QUEUE);
    assert!(got.pdu.is_empty());
}

#[test]
fn damage_is_reported_with_file_and_offset() {
    let mut b = Vec::new();
    rec(1, 1, ta::QUEUE, tc::QUEUE).encode(&mut b);
    rec(2, 2, ta::QUEUE, tc::QUEUE).encode(&mut b);
    let cut = &b[..b.len() - 5];
    let e = decode_all("x.blktrace.0", cut).unwrap_err();
    assert!(
        matches!(e, FormatError::Truncated { offset: 48, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "x.blktrace.0: offset 48: truncated record (43 of 48 bytes)"
    );
    let mut bad = b.clone();
    bad[50] ^= 0xff;
    let e = decode_all("x.blktrace.0", &bad).unwrap_err().to_string();
    assert!(e.starts_with("x.blktrace.0: offset 48: bad magic"), "{e}");
    let mut ver = b.clone();
    ver[0] = 0x09;
    let e = decode_all("x.blktrace.0", &ver).unwrap_err().to_string();
    assert!(
        e.contains("offset 0: unsupported blktrace version 0x09"),
        "{e}"
    );
}

#[test]
fn trace_sets_merge_per_cpu_files_by_time() {
    let dir = std::env::temp_dir().join(format!("mqblk-traceset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (cpu, times) in [(0u32, [5u64, 30, 31]), (1, [1, 10, 40])] {
        let mut b = Vec::new();
        for (i, t) in times.iter().enumerate() {
            let mut r = rec(i as u32 + 1, *t, ta::QUEUE, tc::QUEUE | tc::READ);
            r.cpu = cpu;
            r.encode(&mut b);
        }
        std::fs::write(dir.join(format!("dev.blktrace.{cpu}")), b).unwrap();
    }
    let set = TraceSet::open(&dir.join("dev")).unwrap();
    let times: Vec<u64> = set.records.iter().map(|r| r.time).collect();
    assert_eq!(times, vec![1, 5, 10, 30, 31, 40]);
    assert_eq!(set.queued().count(), 6);
    assert_eq!(set.counts()[&'Q'], 6);
    let e = TraceSet::open(&dir.join("nope")).unwrap_err();
    assert!(e.contains("no trace files (nope.blktrace.N)"), "{e}");
    std::fs::write(dir.join("dev.blktrace.2"), [0x00, 0x74, 0x61]).unwrap();
    let e = TraceSet::open(&dir.join("dev")).unwrap_err();
    assert!(e.contains("dev.blktrace.2: offset 0: truncated"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
