//! Capturing a block device's requests from the kernel's block tracepoints (tracefs) and
//! writing them as blktrace files, for kernels where `blktrace` itself cannot run (integrity
//! lockdown forbids its debugfs relay files, but tracefs works).
//!
//! The capture uses its own tracefs instance (`instances/mqblk-PID`), so the global tracing
//! state is never touched: the instance gets its own clock (`mono`, the clock blktrace
//! stamps records with), buffer size and output options, and only the block events below,
//! each filtered to the device (and, for a partition, to its sectors on the whole disk, as
//! blktrace does). On the way out (normal end, error or Ctrl-C) it disables them, removes the
//! instance, and unmounts tracefs if it mounted it. Instances left by a capture that was
//! killed outright are removed by the next one.
//!
//! Events are read as text from the instance's `trace_pipe` (one line per event, already in
//! time order across CPUs) and converted as they arrive, so a long capture holds no more
//! than the write buffers in memory.

use crate::format::{mkdev, ta, tc, Record};
use crate::writer::{Counts, TraceWriter};
use crate::TraceError;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The tracepoints a capture enables (those the kernel has), the blktrace action each
/// stands for, and that action's category.
pub const EVENTS: &[(&str, u32, u32)] = &[
    ("block_bio_queue", ta::QUEUE, tc::QUEUE),
    ("block_bio_backmerge", ta::BACKMERGE, tc::QUEUE),
    ("block_bio_frontmerge", ta::FRONTMERGE, tc::QUEUE),
    ("block_getrq", ta::GETRQ, tc::QUEUE),
    ("block_rq_insert", ta::INSERT, tc::QUEUE),
    ("block_rq_issue", ta::ISSUE, tc::ISSUE),
    ("block_rq_requeue", ta::REQUEUE, tc::REQUEUE),
    ("block_rq_complete", ta::COMPLETE, tc::COMPLETE),
    ("block_split", ta::SPLIT, 0),
    ("block_bio_remap", ta::REMAP, tc::QUEUE),
];

pub const TRACEFS: &str = "/sys/kernel/tracing";
/// Per-CPU ring buffer of the instance, in KiB (the default, 1.4 MiB, overflows under a
/// fast device; the memory is freed with the instance).
const BUFFER_KB: u32 = 8192;
/// `O_NONBLOCK` on Linux.
const O_NONBLOCK: i32 = 0o4000;

/// One tracepoint line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpEvent {
    /// The task's name: the one the event recorded (`[comm]`) where it has one, else the
    /// header's (which tracefs may print as `<...>`).
    pub comm: String,
    pub pid: u32,
    pub cpu: u32,
    pub time_ns: u64,
    /// `__BLK_TA_*` with its category and the RWBS categories, shifted into place.
    pub action: u32,
    pub major: u32,
    pub minor: u32,
    pub rwbs: String,
    pub sector: u64,
    pub nr_sectors: u32,
    pub error: i32,
    /// What blktrace puts after the record: a split's new sector, a remap's origin.
    pub pdu: Vec<u8>,
}

/// What one line of `trace_pipe` is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PipeLine {
    Event(TpEvent),
    /// `CPU:N [LOST M EVENTS]`: the ring buffer overflowed.
    Lost {
        cpu: u32,
        events: u64,
    },
    Blank,
    /// Anything else (another event, a changed output format).
    Other,
}

/// The category bits an RWBS string stands for (the kernel's `blk_fill_rwbs`, read back).
pub fn rwbs_categories(rwbs: &str) -> u32 {
    let mut c = 0;
    let mut chars = rwbs.chars().peekable();
    if chars.peek() == Some(&'F') {
        c |= tc::FLUSH;
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
            // 'N' (no data), 'E' (secure erase), 'Z' (write zeroes) have no v7 category.
            _ => 0,
        };
    }
    // A flush carries no data but is a write (REQ_OP_FLUSH is one).
    if c & tc::FLUSH != 0 && c & (tc::READ | tc::DISCARD) == 0 {
        c |= tc::WRITE;
    }
    c
}

/// Parses one line of `trace_pipe`:
///
/// `  fio-22925   [001] .....  3060.151988: block_rq_issue: 7,0 R 4096 () 252968 + 8 be,0,4 [fio]`
///
/// The header may lack the flags column (`irq-info` off) or carry a tgid column
/// (`record-tgid` on); the bodies are those of every kernel since 4.x (with or without the
/// ioprio field).
pub fn parse_pipe_line(line: &str) -> PipeLine {
    // Searches below go by one character (memchr) first: a busy device gives hundreds of
    // thousands of lines a second.
    let line = line.trim_start();
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.is_empty() {
        return PipeLine::Blank;
    }
    if line.starts_with("CPU:") {
        if let Some(lost) = parse_lost(line) {
            return lost;
        }
    }
    parse_event(line).map_or(PipeLine::Other, PipeLine::Event)
}

/// The first place `pat` occurs in `h`.
fn find(h: &str, pat: &str) -> Option<usize> {
    let first = pat.chars().next()?;
    let mut from = 0;
    while let Some(i) = h.get(from..)?.find(first) {
        let at = from + i;
        if h[at..].starts_with(pat) {
            return Some(at);
        }
        from = at + first.len_utf8();
    }
    None
}

fn parse_lost(line: &str) -> Option<PipeLine> {
    let rest = line.strip_prefix("CPU:")?;
    let (cpu, rest) = rest.split_once(' ')?;
    let n = rest
        .trim()
        .strip_prefix("[LOST ")?
        .strip_suffix(" EVENTS]")?;
    Some(PipeLine::Lost {
        cpu: cpu.parse().ok()?,
        events: n.parse().ok()?,
    })
}

fn parse_event(line: &str) -> Option<TpEvent> {
    let at = find(line, ": block_")?;
    let (head, rest) = (&line[..at], &line[at + 2..]);
    let colon = find(rest, ": ")?;
    let (event, body) = (&rest[..colon], &rest[colon + 2..]);
    let &(_, what, cat) = EVENTS.iter().find(|(n, ..)| *n == event)?;
    // The header: "<comm>-<pid> [(<tgid>)] [cpu] [flags] secs.usecs".
    let lb = head.rfind('[')?;
    let (task, after) = (head[..lb].trim_end(), &head[lb + 1..]);
    let (cpu, after) = after.split_once(']')?;
    let time_ns = parse_time(after.trim_end().rsplit(' ').next()?)?;
    let task = match task.strip_suffix(')') {
        Some(t) => t.rsplit_once('(')?.0.trim_end(),
        None => task,
    };
    let (head_comm, pid) = task.rsplit_once('-')?;
    let b = parse_body(what, body)?;
    let comm = match b.comm {
        Some(c) if !c.is_empty() => c,
        _ => head_comm,
    };
    Some(TpEvent {
        comm: comm.to_string(),
        pid: pid.parse().ok()?,
        cpu: cpu.trim_start().parse().ok()?,
        time_ns,
        action: what | tc::act(cat | rwbs_categories(b.rwbs)),
        major: b.major,
        minor: b.minor,
        rwbs: b.rwbs.to_string(),
        sector: b.sector,
        nr_sectors: b.nr_sectors,
        error: b.error,
        pdu: b.pdu,
    })
}

/// `secs.usecs` (or a bare count of nanoseconds, from a counter clock).
fn parse_time(ts: &str) -> Option<u64> {
    let ts = ts.strip_suffix(':').unwrap_or(ts);
    match ts.split_once('.') {
        Some((secs, frac)) if !frac.is_empty() && frac.len() <= 9 => {
            let scale = 10u64.pow(9 - frac.len() as u32);
            let frac: u64 = frac.parse().ok()?;
            secs.parse::<u64>()
                .ok()?
                .checked_mul(1_000_000_000)?
                .checked_add(frac * scale)
        }
        Some(_) => None,
        None => ts.parse().ok(),
    }
}

struct Body<'a> {
    major: u32,
    minor: u32,
    rwbs: &'a str,
    sector: u64,
    nr_sectors: u32,
    comm: Option<&'a str>,
    error: i32,
    pdu: Vec<u8>,
}

/// `7,0` into (7, 0).
fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let s = s.strip_prefix('(').unwrap_or(s);
    let s = s.strip_suffix(')').unwrap_or(s);
    let (ma, mi) = s.split_once(',')?;
    Some((ma.parse().ok()?, mi.parse().ok()?))
}

/// What is inside the last `[...]` of `tail`.
fn bracketed(tail: &str) -> Option<&str> {
    let open = tail.find('[')?;
    let close = tail.rfind(']')?;
    tail.get(open + 1..close)
}

fn parse_body(what: u32, body: &str) -> Option<Body<'_>> {
    let (dev, rest) = body.trim_end().split_once(' ')?;
    let (major, minor) = parse_dev(dev)?;
    let (rwbs, mut rest) = rest.split_once(' ')?;
    let mut b = Body {
        major,
        minor,
        rwbs,
        sector: 0,
        nr_sectors: 0,
        comm: None,
        error: 0,
        pdu: Vec::new(),
    };
    match what {
        ta::SPLIT => {
            // "sector / new_sector [comm]"
            let mut t = rest.split_whitespace();
            b.sector = t.next()?.parse().ok()?;
            (t.next()? == "/").then_some(())?;
            let new: u64 = t.next()?.parse().ok()?;
            b.pdu = new.to_be_bytes().to_vec();
            b.comm = bracketed(rest);
            return Some(b);
        }
        ta::REMAP => {
            // "sector + n <- (maj,min) old_sector"
            let t: Vec<&str> = rest.split_whitespace().collect();
            let [sector, "+", n, "<-", from, old] = t[..] else {
                return None;
            };
            b.sector = sector.parse().ok()?;
            b.nr_sectors = n.parse().ok()?;
            let (fma, fmi) = parse_dev(from)?;
            let old: u64 = old.parse().ok()?;
            b.pdu.extend_from_slice(&mkdev(fma, fmi).to_be_bytes());
            b.pdu.extend_from_slice(&mkdev(major, minor).to_be_bytes());
            b.pdu.extend_from_slice(&old.to_be_bytes());
            return Some(b);
        }
        _ => {}
    }
    // Request events put "[bytes] (cmd)" before the range; the command of a passthrough
    // request is hex bytes with spaces, so skip to its closing parenthesis.
    if matches!(what, ta::INSERT | ta::ISSUE | ta::COMPLETE | ta::REQUEUE) {
        if let Some(open) = rest.find('(') {
            let close = open + rest[open..].find(')')?;
            rest = &rest[close + 1..];
        }
    }
    let plus = find(rest, " + ")?;
    b.sector = rest[..plus].rsplit(' ').next()?.parse().ok()?;
    let after = rest[plus + 3..].trim_start();
    let (n, tail) = after.split_once(' ').unwrap_or((after, ""));
    b.nr_sectors = n.parse().ok()?;
    let inside = bracketed(tail);
    if matches!(what, ta::COMPLETE | ta::REQUEUE) {
        b.error = inside.and_then(|e| e.trim().parse().ok()).unwrap_or(0);
    } else {
        b.comm = inside;
    }
    Some(b)
}

/// Turns parsed events into blktrace records: times from the first event, a process-name
/// notify record before a pid's first named event, errors as positive errno values.
///
/// One name per pid, as the kernel's `__blk_add_trace` writes one `trace_note_tsk` per task
/// per trace (`tsk->btrace_seq`): a process renamed later (by `exec`, or tracefs resolving
/// the pid to another name at read time) keeps its first name, the one blkparse shows.
#[derive(Debug, Default)]
pub struct Converter {
    t0: Option<u64>,
    names: BTreeMap<u32, String>,
}

impl Converter {
    /// The records for `e`, each with the CPU whose file it goes to.
    pub fn convert(&mut self, e: &TpEvent, out: &mut Vec<Record>) {
        let t0 = *self.t0.get_or_insert(e.time_ns);
        let time = e.time_ns.saturating_sub(t0);
        let device = mkdev(e.major, e.minor);
        // pid 0 is the idle task (completions from interrupts); "<...>" is a name tracefs
        // no longer remembers.
        if e.pid != 0 && e.comm != "<...>" && !self.names.contains_key(&e.pid) {
            self.names.insert(e.pid, e.comm.clone());
            out.push(Record::process_name(e.pid, &e.comm, device, e.cpu, time));
        }
        out.push(Record {
            time,
            sector: e.sector,
            bytes: e.nr_sectors.saturating_mul(512),
            action: e.action,
            pid: e.pid,
            device,
            cpu: e.cpu,
            error: e.error.unsigned_abs().min(u16::MAX as u32) as u16,
            pdu: e.pdu.clone(),
            ..Record::empty()
        });
    }
}

/// Major and minor of a block device node (glibc's `gnu_dev_major`/`minor` encoding).
pub fn dev_numbers(dev: &Path) -> Result<(u32, u32), TraceError> {
    let m = fs::metadata(dev).map_err(|e| TraceError::io(dev, e))?;
    if !m.file_type().is_block_device() {
        return Err(TraceError::Capture(format!(
            "{}: not a block device",
            dev.display()
        )));
    }
    let r = m.rdev();
    let major = ((r >> 8) & 0xfff) | ((r >> 32) & !0xfff);
    let minor = (r & 0xff) | ((r >> 12) & !0xff);
    Ok((major as u32, minor as u32))
}

/// What the tracepoints are filtered to: requests live on the whole disk, so a partition is
/// its disk plus its sector range there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub major: u32,
    pub minor: u32,
    /// For a partition: its first sector on the disk and its length in sectors.
    pub range: Option<(u64, u64)>,
}

impl Target {
    /// The target for `dev`, using sysfs (`/sys/dev/block/MAJ:MIN`) to find a partition's
    /// disk and place.
    pub fn of(dev: &Path) -> Result<Target, TraceError> {
        let (major, minor) = dev_numbers(dev)?;
        let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        if !sys.join("partition").exists() {
            return Ok(Target {
                major,
                minor,
                range: None,
            });
        }
        let read = |p: PathBuf| -> Result<String, TraceError> {
            fs::read_to_string(&p)
                .map(|s| s.trim().to_string())
                .map_err(|e| TraceError::io(&p, e))
        };
        let num = |p: PathBuf| -> Result<u64, TraceError> {
            let s = read(p.clone())?;
            s.parse()
                .map_err(|_| TraceError::Capture(format!("{}: '{s}' is not a number", p.display())))
        };
        let start = num(sys.join("start"))?;
        let size = num(sys.join("size"))?;
        let disk = read(sys.join("../dev"))?;
        let (dma, dmi) = disk
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| {
                TraceError::Capture(format!(
                    "{}: '{disk}' is not MAJ:MIN",
                    sys.join("../dev").display()
                ))
            })?;
        Ok(Target {
            major: dma,
            minor: dmi,
            range: Some((start, size)),
        })
    }

    /// The tracefs event filter.
    pub fn filter(&self) -> String {
        let dev = format!("dev == {}", mkdev(self.major, self.minor));
        match self.range {
            None => dev,
            Some((start, len)) => {
                format!("{dev} && sector >= {start} && sector < {}", start + len)
            }
        }
    }
}

/// Undoes what a capture changed, whatever happens.
struct Session {
    root: PathBuf,
    instance: PathBuf,
    mounted: bool,
}

/// Instance options the line parser depends on, set in the instance only.
const OPTIONS: &[(&str, &str)] = &[
    ("raw", "0"),
    ("hex", "0"),
    ("bin", "0"),
    ("fields", "0"),
    ("latency-format", "0"),
    ("verbose", "0"),
    ("context-info", "1"),
    ("record-tgid", "0"),
];

impl Session {
    fn open() -> Result<Session, TraceError> {
        let root = PathBuf::from(TRACEFS);
        let mut mounted = false;
        if !root.join("instances").is_dir() {
            let st = Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status()
                .map_err(|e| TraceError::Capture(format!("mounting tracefs: {e}")))?;
            if !st.success() || !root.join("instances").is_dir() {
                return Err(TraceError::Capture(format!(
                    "tracefs is not available at {TRACEFS} (mount -t tracefs failed: {st}); run as root on a kernel with tracing"
                )));
            }
            mounted = true;
        }
        let mut s = Session {
            root,
            instance: PathBuf::new(),
            mounted,
        };
        s.remove_stale();
        let instance = s
            .root
            .join(format!("instances/mqblk-{}", std::process::id()));
        fs::create_dir(&instance).map_err(|e| {
            TraceError::Capture(format!(
                "creating the tracefs instance {}: {e}",
                instance.display()
            ))
        })?;
        s.instance = instance;
        for (opt, v) in OPTIONS {
            if s.instance.join("options").join(opt).exists() {
                s.write(&format!("options/{opt}"), v)?;
            }
        }
        // Best effort: an older kernel without `mono` keeps `local`, which prints the same.
        let _ = s.write("trace_clock", "mono");
        let _ = s.write("buffer_size_kb", &BUFFER_KB.to_string());
        Ok(s)
    }

    /// Removes the instances of captures whose process is gone (killed before cleaning up),
    /// and ours from an earlier process with this pid.
    fn remove_stale(&self) {
        let Ok(dir) = fs::read_dir(self.root.join("instances")) else {
            return;
        };
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("mqblk-")
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists() {
                disable_events(&e.path());
                let _ = fs::remove_dir(e.path());
            }
        }
    }

    fn write(&self, rel: &str, value: &str) -> Result<(), TraceError> {
        write_file(&self.instance.join(rel), value)
    }
}

fn write_file(p: &Path, value: &str) -> Result<(), TraceError> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(p)
        .map_err(|e| TraceError::io(p, e))?;
    f.write_all(value.as_bytes())
        .map_err(|e| TraceError::Capture(format!("{}: writing '{value}': {e}", p.display())))
}

fn disable_events(instance: &Path) {
    for (ev, ..) in EVENTS {
        let p = instance.join(format!("events/block/{ev}/enable"));
        if p.exists() {
            let _ = write_file(&p, "0");
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.instance.as_os_str().is_empty() {
            disable_events(&self.instance);
            let _ = fs::remove_dir(&self.instance);
        }
        // Unmount what we mounted, unless another capture (or anyone) has made an instance
        // since: it is using tracefs.
        let others = fs::read_dir(self.root.join("instances")).map_or(0, |d| d.count());
        if self.mounted && others == 0 {
            let _ = Command::new("umount").arg(&self.root).status();
        }
    }
}

/// What a capture produced.
#[derive(Debug)]
pub struct Captured {
    /// Per-action counts of the events written, by blkparse letter.
    pub counts: Counts,
    pub files: Vec<PathBuf>,
    /// Events the kernel dropped because the ring buffer was full (`[LOST N EVENTS]`).
    pub lost: u64,
    /// Lines of the pipe that were not block events of ours (should be none).
    pub unparsed: u64,
    /// The tracefs filter used.
    pub filter: String,
}

/// Captures `device`'s block events until `duration` passes or `stop` is set, and writes
/// them as `out.blktrace.CPU` files.
pub fn capture(
    device: &Path,
    duration: Option<Duration>,
    out: &Path,
    stop: &AtomicBool,
) -> Result<Captured, TraceError> {
    out.file_name()
        .ok_or_else(|| TraceError::Capture(format!("{}: not a file name", out.display())))?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(TraceError::Capture(format!(
            "{}: the directory {} does not exist",
            out.display(),
            dir.display()
        )));
    }
    let target = Target::of(device)?;
    let s = Session::open()?;
    let filter = target.filter();
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
        return Err(TraceError::Capture(
            "tracefs has none of the block tracepoints".into(),
        ));
    }
    let pipe_path = s.instance.join("trace_pipe");
    let mut pipe: File = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(&pipe_path)
        .map_err(|e| TraceError::Capture(format!("{}: {e}", pipe_path.display())))?;
    let writer = TraceWriter::new(out);
    let mut conv = Converter::default();
    let mut recs = Vec::new();
    let (mut lost, mut unparsed) = (0u64, 0u64);
    let mut line_of = |line: &[u8]| match parse_pipe_line(&String::from_utf8_lossy(line)) {
        PipeLine::Event(e) => {
            recs.clear();
            conv.convert(&e, &mut recs);
            for r in recs.drain(..) {
                let cpu = u16::try_from(r.cpu).unwrap_or(u16::MAX);
                writer.record(cpu, r);
            }
        }
        PipeLine::Lost { events, .. } => lost += events,
        PipeLine::Blank => {}
        PipeLine::Other => unparsed += 1,
    };
    let start = Instant::now();
    let mut buf = vec![0u8; 1 << 16];
    let mut partial: Vec<u8> = Vec::new();
    let mut draining_since: Option<Instant> = None;
    loop {
        let over = stop.load(Ordering::Relaxed) || duration.is_some_and(|d| start.elapsed() >= d);
        if over && draining_since.is_none() {
            draining_since = Some(Instant::now());
        }
        match pipe.read(&mut buf) {
            Ok(n) if n > 0 => {
                partial.extend_from_slice(&buf[..n]);
                let mut used = 0;
                while let Some(i) = partial[used..].iter().position(|&c| c == b'\n') {
                    line_of(&partial[used..used + i]);
                    used += i + 1;
                }
                partial.drain(..used);
                // A device that never goes quiet: stop a second after the end anyway.
                if draining_since.is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
                    break;
                }
                continue;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(TraceError::Capture(format!("{}: {e}", pipe_path.display()))),
        }
        // After the end, keep reading until the buffer has been empty for a moment.
        if draining_since.is_some_and(|t| t.elapsed() > Duration::from_millis(200)) {
            break;
        }
    }
    if !partial.is_empty() {
        line_of(&partial);
    }
    // The pipe first: an instance with an open file cannot be removed.
    drop(pipe);
    drop(s);
    let counts = writer.finish()?;
    Ok(Captured {
        counts,
        files: writer.files(),
        lost,
        unparsed,
        filter,
    })
}
