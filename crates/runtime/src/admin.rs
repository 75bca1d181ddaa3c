//! Runtime control of a running server: a Unix socket that reads and writes the queue
//! attributes of each named queue (an export of `mqblk serve`) by their sysfs paths, as one
//! would under `/sys/block/DEV/`. Changes freeze the queue as the kernel's stores do
//! ([`crate::control`]).
//!
//! One request per line, one reply per line:
//!   `show NAME/queue/scheduler`           → `ok none mq-deadline [kyber] bfq`
//!   `store NAME/queue/scheduler bfq`      → `ok` (`elevator_switch`, under load)
//!   `show|store NAME/queue/nr_requests [N]`
//!   `show|store NAME/queue/iosched/TUNABLE [VALUE]` (the running scheduler's tunables)
//!   `show NAME/queue/iosched`              → every tunable, `TUNABLE=VALUE` separated by spaces
//!
//! Errors come back as `error: ...` naming what was refused; the queue keeps serving.

use crate::error::SocketError;
use mqblk_core::RequestQueue;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A queue the socket controls, by the name its paths start with.
#[derive(Clone)]
pub struct NamedQueue {
    /// The first component of its paths (an export's name).
    pub name: String,
    pub queue: Arc<RequestQueue>,
}

/// How long a change may wait for a queue to drain before it is given up.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// A control client that says nothing for this long is dropped.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the control socket at `path` until `stop` is set. Clients are served one at a
/// time (a change freezes a queue; two at once would only wait for each other).
pub fn spawn(
    path: &Path,
    replace_stale: bool,
    queues: Vec<NamedQueue>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, SocketError> {
    let what = format!("--admin={}", path.display());
    let (l, owned) = crate::unix_socket::bind(path, &what, replace_stale)?;
    l.set_nonblocking(true).map_err(|source| SocketError::Io {
        what: what.clone(),
        source,
    })?;
    std::thread::Builder::new()
        .name("mqblk-admin".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        if let Err(e) = client(s, &queues) {
                            eprintln!("mqblk serve: admin client: {e}");
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Err(e) => eprintln!("mqblk serve: admin socket: {e}"),
                }
            }
            owned.remove();
        })
        .map_err(|source| SocketError::Io {
            what: format!("{what}: starting its thread"),
            source,
        })
}

fn client(s: UnixStream, queues: &[NamedQueue]) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut out = s.try_clone()?;
    let mut r = BufReader::new(s).take(64 << 10);
    let mut line = String::new();
    while r.read_line(&mut line)? > 0 {
        let reply = match handle(queues, line.trim()) {
            Ok(v) if v.is_empty() => "ok".to_string(),
            Ok(v) => format!("ok {v}"),
            Err(e) => format!("error: {e}"),
        };
        out.write_all(reply.as_bytes())?;
        out.write_all(b"\n")?;
        line.clear();
    }
    Ok(())
}

/// A control request refused; the reply is `error: ` and this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// The line (or its verb) is not a request.
    #[error("'{got}': {expected}")]
    Syntax { got: String, expected: &'static str },
    /// The path does not name an attribute.
    #[error("{0}: expected EXPORT/queue/ATTRIBUTE")]
    Path(String),
    /// No queue has the path's first component as its name.
    #[error("{path}: no export '{name}' (exports: {known})")]
    NoQueue {
        path: String,
        name: String,
        known: String,
    },
    /// The attribute is unknown, or the queue refused the value (the reason says which).
    #[error("{path}: {reason}")]
    Refused { path: String, reason: String },
}

/// One request line; the reply's text without its `ok `.
pub fn handle(queues: &[NamedQueue], line: &str) -> Result<String, AdminError> {
    let syntax = |got: &str, expected| AdminError::Syntax {
        got: got.to_string(),
        expected,
    };
    let mut words = line.split_whitespace();
    let (verb, path) = match (words.next(), words.next()) {
        (Some(v), Some(p)) => (v, p),
        _ => return Err(syntax(line, "expected 'show PATH' or 'store PATH VALUE'")),
    };
    let value = words.next();
    if words.next().is_some() {
        return Err(syntax(line, "one value at most"));
    }
    let (name, attr) = path
        .split_once('/')
        .ok_or_else(|| AdminError::Path(path.to_string()))?;
    let q = &queues
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| AdminError::NoQueue {
            path: path.to_string(),
            name: name.to_string(),
            known: queues
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?
        .queue;
    let refused = |reason| AdminError::Refused {
        path: path.to_string(),
        reason,
    };
    match (verb, value) {
        ("show", None) => show(q, attr).map_err(refused),
        ("store", Some(v)) => store(q, attr, v).map_err(refused),
        ("show", Some(_)) => Err(syntax(line, "show takes no value")),
        ("store", None) => Err(syntax(line, "store needs a value")),
        _ => Err(syntax(verb, "expected show or store")),
    }
}

fn show(q: &RequestQueue, attr: &str) -> Result<String, String> {
    match attr {
        "queue/scheduler" => {
            let cur = q.elevator_name();
            Ok(mqblk_sched::names()
                .into_iter()
                .map(|n| {
                    if n == cur {
                        format!("[{n}]")
                    } else {
                        n.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" "))
        }
        "queue/nr_requests" => Ok(q.nr_requests().to_string()),
        "queue/iosched" => {
            let e = q.elevator().ok_or("none has no tunables")?;
            let t = e.tunables();
            Ok(t.descs()
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{}={}", d.name, t.get(i)))
                .collect::<Vec<_>>()
                .join(" "))
        }
        _ => {
            let name = tunable_name(attr)?;
            let e = q.elevator().ok_or("none has no tunables")?;
            e.tunables()
                .show(name)
                .map(|v| v.to_string())
                .map_err(|e| e.to_string())
        }
    }
}

fn store(q: &RequestQueue, attr: &str, v: &str) -> Result<String, String> {
    match attr {
        "queue/scheduler" => {
            let elv = mqblk_sched::lookup(v).ok_or_else(|| {
                format!(
                    "no scheduler '{v}' (known: {})",
                    mqblk_sched::names().join(", ")
                )
            })?;
            if elv.name != q.elevator_name() {
                crate::control::elevator_switch(q, Some(elv), DRAIN_TIMEOUT)
                    .map_err(|e| e.to_string())?;
            }
            Ok(String::new())
        }
        "queue/nr_requests" => {
            let n: u32 = v
                .parse()
                .map_err(|_| format!("'{v}' is not a number of requests"))?;
            crate::control::set_nr_requests(q, n, DRAIN_TIMEOUT).map_err(|e| e.to_string())?;
            Ok(String::new())
        }
        _ => {
            let name = tunable_name(attr)?;
            let e = q.elevator().ok_or("none has no tunables")?;
            e.tunables().store(name, v).map_err(|e| e.to_string())?;
            Ok(String::new())
        }
    }
}

fn tunable_name(attr: &str) -> Result<&str, String> {
    attr.strip_prefix("queue/iosched/")
        .filter(|n| !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| {
            "expected queue/scheduler, queue/nr_requests or queue/iosched/NAME".to_string()
        })
}
