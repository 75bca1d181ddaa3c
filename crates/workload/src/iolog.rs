//! fio's I/O log (`write_iolog=FILE`): every I/O a job issued, in fio's version 3 format,
//! so that a run can be compared with fio's own log of the same job, or replayed by fio.
//!
//! ```text
//! fio version 3 iolog
//! 0 job.0.0 add
//! 0 job.0.0 open
//! 3120 job.0.0 read 0 4096
//! 5004 job.0.0 sync 65536 0
//! 9310 job.0.0 close
//! ```
//! Times are microseconds since the job started (fio 3.33's `log_io_u` writes
//! `utime_since_now`). A flush (`fsync=N`, `end_fsync`) is
//! logged as fio logs one, `sync` at the offset of the write before it.

use crate::job_driver::IoKind;
use std::fmt::Write as _;

/// One logged I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoLogEntry {
    /// When it was issued, in nanoseconds since the job started.
    pub at_ns: u64,
    pub kind: IoKind,
    /// The job's file (an index into [`CloneLog::files`]), and the byte offset in it.
    pub file: u32,
    pub offset: u64,
    pub len: u32,
}

/// One job clone's log: its files (the names fio prints) and what it issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneLog {
    pub files: Vec<String>,
    pub entries: Vec<IoLogEntry>,
}

impl CloneLog {
    /// The log of `job`'s clone with `entries`.
    pub fn of(job: &crate::Job, entries: Vec<IoLogEntry>) -> CloneLog {
        CloneLog {
            files: job.files.iter().map(|f| f.name.clone()).collect(),
            entries,
        }
    }
}

/// The text of one log file holding `clones` (fio writes each clone's lines under its own
/// file name; several clones sharing a log follow each other).
pub fn render(clones: &[CloneLog]) -> String {
    let mut out = String::from("fio version 3 iolog\n");
    for c in clones {
        let names: Vec<String> = c
            .files
            .iter()
            .map(|name| name.replace(char::is_whitespace, "_"))
            .collect();
        for name in &names {
            let _ = writeln!(out, "0 {name} add");
        }
        for name in &names {
            let _ = writeln!(out, "0 {name} open");
        }
        for e in &c.entries {
            let us = e.at_ns / 1000;
            let action = match e.kind {
                IoKind::Read => "read",
                IoKind::Write => "write",
                IoKind::Flush => "sync",
                IoKind::Datasync => "datasync",
                IoKind::Trim => "trim",
                // fio's log has no zone resets (an ioctl, not an I/O).
                IoKind::ZoneReset => continue,
            };
            let name = &names[(e.file as usize).min(names.len().saturating_sub(1))];
            let _ = writeln!(out, "{us} {name} {action} {} {}", e.offset, e.len);
        }
        let end = c.entries.last().map_or(0, |e| e.at_ns / 1000);
        for name in &names {
            let _ = writeln!(out, "{end} {name} close");
        }
    }
    out
}

/// Writes every log: `logs` pairs a `write_iolog` path with a clone's log, in job order.
pub fn write_all(logs: &[(String, CloneLog)]) -> Result<(), crate::WriteError> {
    let mut paths: Vec<&str> = Vec::new();
    for (p, _) in logs {
        if !paths.contains(&p.as_str()) {
            paths.push(p);
        }
    }
    for path in paths {
        let clones: Vec<CloneLog> = logs
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, c)| c.clone())
            .collect();
        std::fs::write(path, render(&clones))
            .map_err(|e| crate::WriteError::new(format!("write_iolog={path}"), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_fios_version_3_format() {
        let log = CloneLog {
            files: vec!["j.0.0".into()],
            entries: vec![
                IoLogEntry {
                    at_ns: 2_500_000,
                    kind: IoKind::Write,
                    file: 0,
                    offset: 65536,
                    len: 4096,
                },
                IoLogEntry {
                    at_ns: 3_000_000,
                    kind: IoKind::Flush,
                    file: 0,
                    offset: 65536,
                    len: 0,
                },
            ],
        };
        assert_eq!(
            render(&[log]),
            "fio version 3 iolog\n0 j.0.0 add\n0 j.0.0 open\n2500 j.0.0 write 65536 4096\n\
             3000 j.0.0 sync 65536 0\n3000 j.0.0 close\n"
        );
    }
}
