//! Capturing a block device's requests from the kernel's block tracepoints (tracefs) and
//! writing them as blktrace files, for kernels where `blktrace` itself cannot run (integrity
//! lockdown forbids its debugfs relay files, but tracefs works).
//!
//! The capture uses its own tracefs instance (`instances/mqblk-PID`), so the global tracing
//! state is never touched; it enables only the block events it needs, each filtered to the
//! device, and on the way out (normal end, error or Ctrl-C) disables them, removes the
//! instance, and unmounts tracefs if it mounted it.

use crate::format::{mkdev, ta, tc, tn, Record};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The tracepoints a capture enables and the blktrace action each stands for.
pub const EVENTS: &[(&str, u32, u32)] = &[
    ("block_bio_queue", ta::QUEUE, tc::QUEUE),
    ("block_bio_backmerge", ta::BACKMERGE, tc::QUEUE),
    ("block_bio_frontmerge", ta::FRONTMERGE, tc::QUEUE),
    ("block_getrq", ta::GETRQ, tc::QUEUE),
    ("block_rq_insert", ta::INSERT, tc::QUEUE),
    ("block_rq_issue", ta::ISSUE, tc::ISSUE),
    ("block_rq_requeue", ta::REQUEUE, tc::REQUEUE),
    ("block_rq_complete", ta::COMPLETE, tc::COMPLETE),
];

const TRACEFS: &str = "/sys/kernel/tracing";
/// `O_NONBLOCK` on Linux.
const O_NONBLOCK: i32 = 0o4000;

/// One tracepoint line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpEvent {
    pub comm: String,
    pub pid: u32,
    pub cpu: u32,
    pub time_ns: u64,
    pub action: u32,
    pub major: u32,
    pub minor: u32,
    pub rwbs: String,
    pub sector: u64,
    pub nr_sectors: u32,
    pub error: i32,
}

/// The category bits an RWBS string stands for (blkparse's encoding, read back).
pub fn rwbs_categories(rwbs: &str) -> u32 {
    let mut c = 0;
    let mut chars = rwbs.chars().peekable();
    if chars.peek() == Some(&'F') {
        c |= tc::FLUSH | tc::WRITE;
        chars.next();
    }
    for ch in chars {
        c |= match ch {
            'D' => tc::DISCARD | tc::WRITE,
            'W' => tc::WRITE,
            'R' => tc::READ,
            'F' => tc::FUA,
            'A' => tc::AHEAD,
            'S' => tc::SYNC,
            'M' => tc::META,
            _ => 0,
        };
    }
    c
}

/// Parses a `trace_pipe` line of one of [`EVENTS`]; `None` for anything else.
///
/// `  fio-22925   [001] .....  3060.151988: block_rq_issue: 7,0 R 4096 () 252968 + 8 be,0,4 [fio]`
pub fn parse_line(line: &str) -> Option<TpEvent> {
    let (head, rest) = line.split_once(": block_")?;
    let (event, body) = rest.split_once(": ")?;
    let event = format!("block_{event}");
    let &(_, what, cat) = EVENTS.iter().find(|(n, ..)| *n == event)?;
    // head: "<comm>-<pid> [cpu] flags secs.usecs"
    let head = head.trim_start();
    let lb = head.rfind(" [")?;
    let (task, after) = (&head[..lb], &head[lb + 2..]);
    let (cpu, after) = after.split_once(']')?;
    let ts = after.split_whitespace().last()?;
    let (secs, frac) = ts.split_once('.')?;
    let frac_ns = format!("{frac:0<9}");
    let time_ns = secs.parse::<u64>().ok()? * 1_000_000_000 + frac_ns[..9].parse::<u64>().ok()?;
    let (comm, pid) = task.trim_end().rsplit_once('-')?;
    let toks: Vec<&str> = body.split_whitespace().collect();
    let (major, minor) = toks.first()?.split_once(',')?;
    let rwbs = toks.get(1)?.to_string();
    let plus = toks.iter().position(|t| *t == "+")?;
    let sector = toks.get(plus.checked_sub(1)?)?.parse().ok()?;
    let nr_sectors = toks.get(plus + 1)?.parse().ok()?;
    let error = if what == ta::COMPLETE {
        toks.last()?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .unwrap_or(0)
    } else {
        0
    };
    Some(TpEvent {
        comm: comm.trim().to_string(),
        pid: pid.parse().ok()?,
        cpu: cpu.trim().parse().ok()?,
        time_ns,
        action: what | tc::act(cat | rwbs_categories(&rwbs)),
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        rwbs,
        sector,
        nr_sectors,
        error,
    })
}

/// The per-CPU blktrace files of a capture, from parsed events (time relative to the first).
pub fn to_records(events: &[TpEvent]) -> BTreeMap<u32, Vec<Record>> {
    let mut out: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
    let t0 = events.first().map_or(0, |e| e.time_ns);
    let mut named: BTreeMap<u32, ()> = BTreeMap::new();
    for e in events {
        let recs = out.entry(e.cpu).or_default();
        let device = mkdev(e.major, e.minor);
        if named.insert(e.pid, ()).is_none() && e.pid != 0 {
            let mut comm = e.comm.clone().into_bytes();
            comm.push(0);
            recs.push(Record {
                sequence: recs.len() as u32 + 1,
                time: e.time_ns - t0,
                sector: 0,
                bytes: 0,
                action: tn::PROCESS | tc::act(tc::NOTIFY),
                pid: e.pid,
                device,
                cpu: e.cpu,
                error: 0,
                pdu: comm,
            });
        }
        recs.push(Record {
            sequence: recs.len() as u32 + 1,
            time: e.time_ns - t0,
            sector: e.sector,
            bytes: e.nr_sectors * 512,
            action: e.action,
            pid: e.pid,
            device,
            cpu: e.cpu,
            error: e.error.unsigned_abs() as u16,
            pdu: Vec::new(),
        });
    }
    out
}

/// Writes `NAME.blktrace.CPU` for each CPU; returns the files.
pub fn write_files(
    base: &Path,
    per_cpu: &BTreeMap<u32, Vec<Record>>,
) -> Result<Vec<PathBuf>, String> {
    let name = base
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", base.display()))?
        .to_string_lossy()
        .into_owned();
    let mut files = Vec::new();
    // blkparse looks for NAME.blktrace.0, .1, ... and stops at the first missing one, so a
    // CPU that saw no events still gets its (empty) file.
    let last = per_cpu.keys().next_back().copied().unwrap_or(0);
    for cpu in 0..=last {
        let path = base.with_file_name(format!("{name}.blktrace.{cpu}"));
        let mut b = Vec::new();
        for r in per_cpu.get(&cpu).map(Vec::as_slice).unwrap_or(&[]) {
            r.encode(&mut b);
        }
        fs::write(&path, b).map_err(|e| format!("{}: {e}", path.display()))?;
        files.push(path);
    }
    Ok(files)
}

/// Major and minor of a block device node (glibc's `gnu_dev_major`/`minor` encoding).
pub fn dev_numbers(dev: &Path) -> Result<(u32, u32), String> {
    let m = fs::metadata(dev).map_err(|e| format!("{}: {e}", dev.display()))?;
    if !m.file_type().is_block_device() {
        return Err(format!("{}: not a block device", dev.display()));
    }
    let r = m.rdev();
    let major = ((r >> 8) & 0xfff) | ((r >> 32) & !0xfff);
    let minor = (r & 0xff) | ((r >> 12) & !0xff);
    Ok((major as u32, minor as u32))
}

/// Undoes what a capture changed, whatever happens.
struct Session {
    root: PathBuf,
    instance: PathBuf,
    mounted: bool,
}

impl Session {
    fn open() -> Result<Session, String> {
        let root = PathBuf::from(TRACEFS);
        let mut mounted = false;
        if !root.join("instances").is_dir() {
            let st = Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status()
                .map_err(|e| format!("mounting tracefs: {e}"))?;
            if !st.success() || !root.join("instances").is_dir() {
                return Err(format!(
                    "tracefs is not available at {TRACEFS} (mount -t tracefs failed: {st}); run as root on a kernel with tracing"
                ));
            }
            mounted = true;
        }
        let instance = root.join(format!("instances/mqblk-{}", std::process::id()));
        if let Err(e) = fs::create_dir(&instance) {
            let s = Session {
                root,
                instance: PathBuf::new(),
                mounted,
            };
            drop(s);
            return Err(format!("creating a tracefs instance: {e}"));
        }
        Ok(Session {
            root,
            instance,
            mounted,
        })
    }

    fn write(&self, rel: &str, value: &str) -> Result<(), String> {
        let p = self.instance.join(rel);
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        f.write_all(value.as_bytes())
            .map_err(|e| format!("{}: {e}", p.display()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.instance.as_os_str().is_empty() {
            for (ev, ..) in EVENTS {
                let _ = self.write(&format!("events/block/{ev}/enable"), "0");
            }
            let _ = fs::remove_dir(&self.instance);
        }
        if self.mounted {
            let _ = Command::new("umount").arg(&self.root).status();
        }
    }
}

/// What a capture produced.
#[derive(Debug)]
pub struct Captured {
    pub events: Vec<TpEvent>,
    pub files: Vec<PathBuf>,
    /// Lines of the pipe that were not block events of ours (should be none).
    pub unparsed: u64,
}

/// Captures `device`'s block events until `duration` passes or `stop` is set, and writes
/// them as `out.blktrace.CPU` files.
pub fn capture(
    device: &Path,
    duration: Option<Duration>,
    out: &Path,
    stop: &AtomicBool,
) -> Result<Captured, String> {
    let (major, minor) = dev_numbers(device)?;
    let s = Session::open()?;
    let filter = format!("dev == {}", mkdev(major, minor));
    let mut enabled = 0;
    for (ev, ..) in EVENTS {
        if !s.instance.join(format!("events/block/{ev}")).is_dir() {
            continue;
        }
        s.write(&format!("events/block/{ev}/filter"), &filter)?;
        s.write(&format!("events/block/{ev}/enable"), "1")?;
        enabled += 1;
    }
    if enabled == 0 {
        return Err("tracefs has none of the block tracepoints".into());
    }
    let pipe_path = s.instance.join("trace_pipe");
    let mut pipe: File = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(&pipe_path)
        .map_err(|e| format!("{}: {e}", pipe_path.display()))?;
    let start = Instant::now();
    let mut buf = vec![0u8; 1 << 16];
    let mut partial = String::new();
    let mut events = Vec::new();
    let mut unparsed = 0u64;
    let mut draining_since: Option<Instant> = None;
    loop {
        let over = stop.load(Ordering::Relaxed) || duration.is_some_and(|d| start.elapsed() >= d);
        if over && draining_since.is_none() {
            draining_since = Some(Instant::now());
        }
        match pipe.read(&mut buf) {
            Ok(0) => std::thread::sleep(Duration::from_millis(20)),
            Ok(n) => {
                partial.push_str(&String::from_utf8_lossy(&buf[..n]));
                while let Some(i) = partial.find('\n') {
                    let line: String = partial.drain(..=i).collect();
                    match parse_line(&line) {
                        Some(e) => events.push(e),
                        None if line.trim().is_empty() => {}
                        None => unparsed += 1,
                    }
                }
                // A device that never goes quiet: stop a second after the end anyway.
                if draining_since.is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
                    break;
                }
                continue;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(format!("{}: {e}", pipe_path.display())),
        }
        // After the end, keep reading until the buffer has been empty for a moment.
        if draining_since.is_some_and(|t| t.elapsed() > Duration::from_millis(200)) {
            break;
        }
    }
    // The pipe first: an instance with an open file cannot be removed.
    drop(pipe);
    drop(s);
    events.sort_by_key(|e| e.time_ns);
    let files = write_files(out, &to_records(&events))?;
    Ok(Captured {
        events,
        files,
        unparsed,
    })
}
