//! `mqblk serve`: exports a device over NBD, one software queue per connection.

use crate::bench::device::{self, DeviceOpts};
use mqblk_core::{Bio, CtxIdx, HctxIdx, ReqOp};
use mqblk_nbd::{Export, Listener, Server};
use mqblk_runtime::{MonotonicClock, SubmitterHandle};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const USAGE: &str = "\
usage: mqblk serve [options]

Exports one device over NBD (fixed newstyle; simple replies) to any NBD client: nbdinfo,
nbdcopy, qemu-img, fio's nbd engine, the kernel's nbd driver. Each connection gets a software
queue of its own, mapped onto the hardware queues.

options:
  --listen=tcp:HOST:PORT | unix:PATH   where to listen (repeatable; default tcp:127.0.0.1:10809)
  --export=NAME          export name (default \"mqblk\"); --description=TEXT
  --driver=memory|null|uring           memory (default): data kept in RAM; null: reads zeroes,
                         writes dropped; uring: --filename=PATH (file or block device)
  --size=BYTES           export size (memory/null; creates or extends a --filename file)
  --ioscheduler=NAME     none (default), mq-deadline, kyber; --sched.NAME=VALUE tunables
  --hw-queues=N          hardware queues (default 1); --queue-depth=N (default 128)
  --read-only            refuse writes (EPERM)
  --max-connections=N    default 16; more are refused
  --stats=FILE           per-export and per-hardware-queue statistics as JSON on exit
  --trace=NAME           write the requests as blktrace files NAME.blktrace.N

SIGINT/SIGTERM stop accepting, let in-flight requests finish, flush, and exit.
";

pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mqblk serve: {e}");
            2
        }
    }
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}={v}: not a valid number"))
}

fn run(args: &[String]) -> Result<i32, String> {
    let mut listens = Vec::new();
    let mut name = "mqblk".to_string();
    let mut description = String::new();
    let mut driver = "memory".to_string();
    let mut filename = None;
    let mut size: Option<u64> = None;
    let mut sched = "none".to_string();
    let mut tunables = Vec::new();
    let mut hw_queues = 1u16;
    let mut depth = 128u32;
    let mut read_only = false;
    let mut max_conns = 16usize;
    let mut stats_file: Option<PathBuf> = None;
    let mut trace: Option<PathBuf> = None;
    for a in args {
        let (flag, v) = a.split_once('=').unwrap_or((a.as_str(), ""));
        match flag {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(0);
            }
            "--listen" => listens.push(v.to_string()),
            "--export" => name = v.to_string(),
            "--description" => description = v.to_string(),
            "--driver" => match v {
                "memory" | "null" | "uring" => driver = v.to_string(),
                _ => return Err(format!("--driver={v}: expected memory, null or uring")),
            },
            "--filename" => filename = Some(v.to_string()),
            "--size" => {
                size = Some(
                    mqblk_workload::parse_size(v)
                        .ok_or_else(|| format!("--size={v}: not a size"))?,
                )
            }
            "--ioscheduler" => sched = v.to_string(),
            "--hw-queues" => hw_queues = num(flag, v)?,
            "--queue-depth" => depth = num(flag, v)?,
            "--read-only" => read_only = true,
            "--max-connections" => max_conns = num(flag, v)?,
            "--stats" => stats_file = Some(PathBuf::from(v)),
            "--trace" => trace = Some(PathBuf::from(v)),
            f if f.starts_with("--sched.") => {
                tunables.push((f["--sched.".len()..].to_string(), v.to_string()))
            }
            _ => return Err(format!("unknown option '{a}' (mqblk serve --help)")),
        }
    }
    if name.len() > 4096 {
        return Err("--export: names are at most 4096 bytes".into());
    }
    if !(1..=1024).contains(&max_conns) {
        return Err(format!("--max-connections={max_conns}: must be 1..=1024"));
    }
    if listens.is_empty() {
        listens.push("tcp:127.0.0.1:10809".into());
    }
    let mut opts = DeviceOpts {
        scheduler: sched,
        sched_tunables: tunables,
        nr_hw_queues: hw_queues,
        queue_depth: depth,
        // One software queue per connection, and one for the server's own final flush.
        nr_ctx: max_conns as u16 + 1,
        // NBD clients send up to 32 MiB in one request.
        max_sectors_kb: 32 * 1024,
        max_segments: 0,
        ..DeviceOpts::default()
    };
    match driver.as_str() {
        "uring" => {
            opts.driver = "uring".into();
            opts.filename = Some(filename.ok_or("--driver=uring needs --filename=PATH")?);
            opts.direct = true;
            opts.create_size = size;
        }
        d => {
            opts.driver = "null".into();
            opts.memory_backed = d == "memory";
            opts.size_bytes = size.unwrap_or(1 << 30);
        }
    }
    let writer = trace
        .as_ref()
        .map(|p| Arc::new(mqblk_trace::TraceWriter::new(p)));
    let dev = device::build_traced(
        &opts,
        max_conns + 1,
        writer
            .as_ref()
            .map(|w| w.clone() as Arc<dyn mqblk_core::Tracer>),
    )?;
    let queue = dev.queue.clone();
    let rotational = queue.driver().rotational();
    let export = Arc::new(Export::new(
        &name,
        &description,
        queue.clone(),
        read_only,
        rotational,
    ));
    let mut listeners = Vec::new();
    for l in &listens {
        if let Some(addr) = l.strip_prefix("tcp:") {
            let t = TcpListener::bind(addr).map_err(|e| format!("--listen={l}: {e}"))?;
            eprintln!(
                "mqblk serve: export '{name}' ({} bytes) on nbd://{}/{name}",
                export.size,
                t.local_addr().map_err(|e| e.to_string())?
            );
            listeners.push(Listener::Tcp(t));
        } else if let Some(path) = l.strip_prefix("unix:") {
            let _ = std::fs::remove_file(path);
            let u = UnixListener::bind(path).map_err(|e| format!("--listen={l}: {e}"))?;
            eprintln!(
                "mqblk serve: export '{name}' ({} bytes) on nbd+unix:///{name}?socket={path}",
                export.size
            );
            listeners.push(Listener::Unix(u, PathBuf::from(path)));
        } else {
            return Err(format!("--listen={l}: expected tcp:HOST:PORT or unix:PATH"));
        }
    }
    let server = Server::new(vec![export.clone()], max_conns);
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, server.stop.clone())
            .map_err(|e| format!("installing the signal handler: {e}"))?;
    }
    server.run(listeners).map_err(|e| format!("serving: {e}"))?;
    // Every connection has ended; make what was written durable before exiting.
    let mut h = SubmitterHandle::new(
        queue.clone(),
        CtxIdx(max_conns as u16),
        MonotonicClock::new(),
    );
    h.submit(Bio::new(ReqOp::Flush, 0, 0));
    while h.done().is_empty() {
        h.reap(1, 1_000_000_000);
    }
    let flush_ok = h.done()[0].status.is_ok();
    drop(h);
    let s = &export.stats;
    let hctx: Vec<serde_json::Value> = (0..queue.nr_hw_queues())
        .map(|i| {
            let st = &queue.hctx(HctxIdx(i as u16)).stats;
            serde_json::json!({"hctx": i, "dispatched": st.issued.get(), "completed": st.completed.get()})
        })
        .collect();
    eprintln!(
        "mqblk serve: {} connections, {} requests, {} bytes read, {} written, {} errors; final flush {}",
        s.connections.load(Ordering::Relaxed),
        s.requests.load(Ordering::Relaxed),
        s.bytes_read.load(Ordering::Relaxed),
        s.bytes_written.load(Ordering::Relaxed),
        s.errors.load(Ordering::Relaxed),
        if flush_ok { "ok" } else { "FAILED" }
    );
    if let Some(p) = &stats_file {
        let v = serde_json::json!({
            "export": export.name, "size": export.size,
            "connections": s.connections.load(Ordering::Relaxed),
            "requests": s.requests.load(Ordering::Relaxed),
            "bytes_read": s.bytes_read.load(Ordering::Relaxed),
            "bytes_written": s.bytes_written.load(Ordering::Relaxed),
            "errors": s.errors.load(Ordering::Relaxed),
            "hctx": hctx,
        });
        std::fs::write(
            p,
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n",
        )
        .map_err(|e| format!("--stats={}: {e}", p.display()))?;
    }
    if let (Some(w), Some(p)) = (&writer, &trace) {
        let counts = w
            .finish()
            .map_err(|e| format!("--trace={}: {e}", p.display()))?;
        eprintln!(
            "trace: {} ({})",
            p.display(),
            mqblk_trace::writer::summary(&counts)
        );
    }
    queue.teardown();
    Ok(if flush_ok { 0 } else { 1 })
}
