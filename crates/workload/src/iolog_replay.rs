//! fio's `read_iolog=FILE`: a job whose I/O is an I/O log's, in the log's order and, unless
//! `replay_no_stall`, at its pace (fio 3.33's `read_iolog` and `read_iolog_get`).
//!
//! Both of fio's text formats are read: version 2 (`FILE ACTION [OFFSET LENGTH]`, with
//! `FILE wait USEC` pauses) and version 3 (each line led by its time in microseconds since
//! the job started, which fio replays as the gap to the line before, scaled by
//! `replay_time_scale`). Actions: `add`, `open` and `close` name the job's files (the
//! order of `add` is their order); `read`, `write`, `trim`, `sync` and `datasync` are I/O.
//! `replay_redirect` sends every line to one file, `replay_scale` divides each offset and
//! `replay_align` then aligns it down. A line fio would pass over with a complaint
//! (an unknown action, a malformed line) is refused here with its line number, as a job
//! file's are. fio also takes a blktrace capture here; mqblk refuses one with a pointer to
//! `mqblk replay`.

use crate::job_driver::IoKind;

/// One step of a replayed log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// An I/O of the log's file `file` (an index into [`ReplayLog::files`]).
    Io {
        kind: IoKind,
        file: u32,
        offset: u64,
        len: u32,
    },
    /// A file action (`add`, `open`, `close`): nothing to issue, but its time counts.
    File,
    /// Version 2's `wait`: nothing before this many microseconds since the job started.
    Until(u64),
}

/// A line of the log: what it does, and how long after the line before it may go (in
/// microseconds, already scaled; 0 where the log has no times or `replay_no_stall`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub delay_us: u64,
    pub step: Step,
}

/// A log read for replay.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayLog {
    /// The files it names, in the order first named (with `replay_redirect`, that one).
    pub files: Vec<String>,
    pub entries: Vec<Entry>,
}

/// Where a replay is (fio's `io_log_list` and `last_issue`): the next line, and when the
/// line before went, in nanoseconds since the job started.
#[derive(Debug, Clone)]
pub struct Cursor {
    log: std::sync::Arc<ReplayLog>,
    at: usize,
    last_ns: Option<u64>,
    /// The next line was waited for: it counts as gone at its due time, not when asked
    /// again (fio's `iolog_delay` takes a sleep's overshoot off the next delay).
    waited: bool,
}

/// What a replay does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing before this time (ns since the job started).
    Wait(u64),
    /// This I/O now.
    Io {
        kind: IoKind,
        file: u32,
        offset: u64,
        len: u32,
    },
    /// The log is done.
    End,
}

impl Cursor {
    pub fn new(log: std::sync::Arc<ReplayLog>) -> Cursor {
        Cursor {
            log,
            at: 0,
            last_ns: None,
            waited: false,
        }
    }

    /// The next I/O at `now`, or how long to wait for it (file actions and version 2's
    /// waits pass as their time comes).
    pub fn next(&mut self, now: u64) -> Due {
        loop {
            let Some(e) = self.log.entries.get(self.at).copied() else {
                return Due::End;
            };
            let due = match e.step {
                Step::Until(us) => us.saturating_mul(1000),
                _ => self
                    .last_ns
                    .map_or(0, |l| l.saturating_add(e.delay_us.saturating_mul(1000))),
            };
            if now < due {
                self.waited = true;
                return Due::Wait(due);
            }
            self.at += 1;
            if !matches!(e.step, Step::Until(_)) {
                self.last_ns = Some(if std::mem::take(&mut self.waited) {
                    due
                } else {
                    now
                });
            }
            self.waited = false;
            if let Step::Io {
                kind,
                file,
                offset,
                len,
            } = e.step
            {
                return Due::Io {
                    kind,
                    file,
                    offset,
                    len,
                };
            }
        }
    }
}

/// How the log is replayed: fio's `replay_*` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayOptions {
    pub no_stall: bool,
    /// Percent of the log's pace (100: as logged; 200: twice as fast).
    pub time_scale: u64,
    pub redirect: Option<String>,
    pub scale: u64,
    pub align: u64,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            no_stall: false,
            time_scale: 100,
            redirect: None,
            scale: 0,
            align: 0,
        }
    }
}

impl ReplayLog {
    /// Reads the log at `path`; the error is one line naming the file (and the line).
    pub fn read(path: &str, o: &ReplayOptions) -> Result<ReplayLog, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("read_iolog={path}: {e}"))?;
        // blktrace's binary events begin with its magic, 0x65617400 | version, little-endian.
        if bytes.len() >= 4 && bytes[1..4] == [0x74, 0x61, 0x65] {
            return Err(format!(
                "read_iolog={path}: a blktrace capture; replay it with `mqblk replay`"
            ));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("read_iolog={path}: not a fio I/O log (not text)"))?;
        ReplayLog::parse(&text, o).map_err(|e| format!("read_iolog={path}{e}"))
    }

    /// Parses a log's text; the error starts with `:LINE: `.
    pub fn parse(text: &str, o: &ReplayOptions) -> Result<ReplayLog, String> {
        let mut lines = text.lines().enumerate();
        let version = match lines.next().map(|(_, l)| l.trim()) {
            Some("fio version 2 iolog") => 2,
            Some("fio version 3 iolog") => 3,
            _ => {
                return Err(
                    ":1: not a fio I/O log (its first line is not `fio version 2 iolog` or `fio version 3 iolog`)"
                        .into(),
                )
            }
        };
        let mut log = ReplayLog::default();
        let mut last_time: Option<u64> = None;
        for (i, line) in lines {
            let at = i + 1;
            let bad = |m: &str| format!(":{at}: {m}: {line}");
            let mut f = line.split_whitespace();
            if line.trim().is_empty() {
                continue;
            }
            // fio's `delay_since_ttime`: the gap to the line before, none for the first
            // or for a time that goes back.
            let mut delay_us = 0;
            if version == 3 {
                let t: u64 = f
                    .next()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| bad("a version 3 line starts with its time"))?;
                if let Some(last) = last_time.filter(|&l| t >= l && !o.no_stall) {
                    delay_us = (t - last) * 100 / o.time_scale.max(1);
                }
                last_time = Some(t);
            }
            let (Some(name), Some(action)) = (f.next(), f.next()) else {
                return Err(bad("expected FILE ACTION"));
            };
            let name = o.redirect.as_deref().unwrap_or(name);
            let file = match log.files.iter().position(|n| n == name) {
                Some(k) => k,
                None => {
                    log.files.push(name.to_string());
                    log.files.len() - 1
                }
            } as u32;
            let mut num = |what: &str| -> Result<u64, String> {
                f.next()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad(&format!("{action} needs its {what}")))
            };
            let step = match action {
                "add" | "open" | "close" => Step::File,
                "wait" if version == 3 => {
                    // fio ignores it, with a complaint.
                    continue;
                }
                "wait" => {
                    let us = num("time")?;
                    if o.no_stall {
                        continue;
                    }
                    Step::Until(us)
                }
                "read" | "write" | "trim" | "sync" | "datasync" => {
                    let offset = num("offset")?;
                    let len = num("length")?;
                    let len = u32::try_from(len).map_err(|_| bad("length too large"))?;
                    if len % 512 != 0 {
                        return Err(bad(
                            "a length the block layer cannot move (not whole 512-byte sectors)",
                        ));
                    }
                    let kind = match action {
                        "read" => IoKind::Read,
                        "write" => IoKind::Write,
                        "trim" => IoKind::Trim,
                        "sync" => IoKind::Flush,
                        _ => IoKind::Datasync,
                    };
                    let mut offset = match o.scale {
                        0 => offset,
                        s => offset / s,
                    };
                    if o.align > 0 {
                        offset &= !(o.align - 1);
                    }
                    Step::Io {
                        kind,
                        file,
                        offset,
                        len,
                    }
                }
                _ => return Err(bad(&format!("unknown action '{action}'"))),
            };
            log.entries.push(Entry { delay_us, step });
        }
        if !log
            .entries
            .iter()
            .any(|e| matches!(e.step, Step::Io { .. }))
        {
            return Err(":1: the log holds no I/O".into());
        }
        Ok(log)
    }

    /// Per file, the bytes its I/O reaches (the largest offset plus length).
    pub fn extents(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.files.len()];
        for e in &self.entries {
            if let Step::Io {
                kind: IoKind::Read | IoKind::Write | IoKind::Trim,
                file,
                offset,
                len,
            } = e.step
            {
                let end = offset + u64::from(len);
                out[file as usize] = out[file as usize].max(end);
            }
        }
        out
    }

    /// The largest I/O of each direction (read, write), for the job's buffers.
    pub fn max_len(&self) -> [u32; 2] {
        let mut out = [0u32; 2];
        for e in &self.entries {
            if let Step::Io { kind, len, .. } = e.step {
                match kind {
                    IoKind::Read => out[0] = out[0].max(len),
                    IoKind::Write | IoKind::Trim => out[1] = out[1].max(len),
                    _ => {}
                }
            }
        }
        out
    }

    /// Whether it reads, and whether it writes (or trims).
    pub fn directions(&self) -> (bool, bool) {
        let [r, w] = self.max_len();
        (r > 0, w > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_parse_with_their_times_and_the_options_apply() {
        let v3 = "fio version 3 iolog\n0 a add\n0 a open\n100 a write 8192 4096\n\
                  1100 a read 4096 512\n1000 a sync 0 0\n3100 b trim 65536 4096\n3100 a close\n";
        let log = ReplayLog::parse(v3, &ReplayOptions::default()).unwrap();
        assert_eq!(log.files, ["a", "b"]);
        let delays: Vec<u64> = log.entries.iter().map(|e| e.delay_us).collect();
        // A time that goes back counts as no gap, as fio's does.
        assert_eq!(delays, [0, 0, 100, 1000, 0, 2100, 0]);
        assert_eq!(log.extents(), [12288, 69632]);
        assert_eq!(log.max_len(), [512, 4096]);
        let fast = ReplayOptions {
            time_scale: 200,
            redirect: Some("dev".into()),
            scale: 2,
            align: 4096,
            ..ReplayOptions::default()
        };
        let log = ReplayLog::parse(v3, &fast).unwrap();
        assert_eq!(log.files, ["dev"]);
        assert_eq!(log.entries[3].delay_us, 500);
        assert_eq!(
            log.entries[2].step,
            Step::Io {
                kind: IoKind::Write,
                file: 0,
                offset: 4096,
                len: 4096
            }
        );
        // 2048 aligned down to 0.
        assert!(matches!(log.entries[3].step, Step::Io { offset: 0, .. }));
        let v2 = "fio version 2 iolog\nx add\nx open\nx write 0 4096\nx wait 5000\nx read 0 4096\n";
        let log = ReplayLog::parse(v2, &ReplayOptions::default()).unwrap();
        assert_eq!(log.entries[3].step, Step::Until(5000));
        let no_stall = ReplayOptions {
            no_stall: true,
            ..ReplayOptions::default()
        };
        assert_eq!(ReplayLog::parse(v2, &no_stall).unwrap().entries.len(), 4);
    }

    #[test]
    fn a_bad_log_is_named_with_its_line() {
        let o = ReplayOptions::default();
        let e = ReplayLog::parse("hello\n", &o).unwrap_err();
        assert!(e.starts_with(":1: not a fio I/O log"), "{e}");
        let e = ReplayLog::parse("fio version 3 iolog\n0 a add\n5 a erase 0 1\n", &o).unwrap_err();
        assert_eq!(e, ":3: unknown action 'erase': 5 a erase 0 1");
        let e = ReplayLog::parse("fio version 2 iolog\na read 0\n", &o).unwrap_err();
        assert!(e.starts_with(":2: read needs its length"), "{e}");
        let e = ReplayLog::parse("fio version 2 iolog\na add\n", &o).unwrap_err();
        assert!(e.contains("no I/O"), "{e}");
    }
}
