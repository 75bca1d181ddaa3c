//! `mqblk serve`: exports devices over NBD (one software queue per connection) or to virtual
//! machines over vhost-user-blk (one software queue per virtqueue).

use crate::args::ServeArgs;
use crate::CliError;
use mqblk_core::{Bio, CtxIdx, ReqOp};
use mqblk_nbd::{Export, Listener, Server};
use mqblk_runtime::{MonotonicClock, SubmitterHandle};
use std::net::TcpListener;
use std::path::PathBuf;

mod export;
use export::read_config;
pub use export::{ExportCfg, ExportDriver, ExportOptions, Size};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub fn main(args: ServeArgs) -> i32 {
    match run(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mqblk serve: {e}");
            2
        }
    }
}

/// `mqblk tls-certs DIR`: a private CA, a server and a client certificate for `--tls`.
pub fn tls_certs_main(a: crate::args::TlsCertsArgs) -> i32 {
    match mqblk_nbd::tls::make_certificates(&a.dir, &a.hostname) {
        Ok(()) => {
            let hosts = if a.hostname.is_empty() {
                "localhost".to_string()
            } else {
                a.hostname.join(", ")
            };
            println!(
                "mqblk tls-certs: a private CA, a server certificate for {hosts} and a client certificate in {}",
                a.dir.display()
            );
            0
        }
        Err(e) => {
            eprintln!("mqblk tls-certs: {e}");
            2
        }
    }
}

/// `--stats`: one export's figures at exit.
#[derive(serde::Serialize)]
struct ExportStats {
    export: String,
    size: u64,
    per_connection: Vec<mqblk_nbd::server::ConnStats>,
    connections: u64,
    requests: u64,
    bytes_read: u64,
    bytes_written: u64,
    errors: u64,
    /// The export's queue: settings, hardware queue counters and the scheduler's
    /// statistics, as `mqblk bench` and `mqblk sim` report theirs.
    queue: mqblk_device::QueueReport,
    /// A vhost-user-blk export's virtqueues.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    virtqueues: Vec<mqblk_vhost::VqStats>,
}

/// TLS settings from the flags or `[server]`: `tls`, `tls-certificates`, `tls-verify-peer`.
#[derive(Default, Clone)]
struct TlsCfg {
    mode: Option<String>,
    certificates: Option<PathBuf>,
    verify_peer: bool,
}

impl TlsCfg {
    /// What the server offers; `None` when TLS is off.
    fn build(&self) -> Result<Option<mqblk_nbd::tls::Tls>, CliError> {
        use mqblk_nbd::tls::TlsMode;
        let mode = match &self.mode {
            Some(m) => m.parse::<TlsMode>().map_err(|e| format!("--tls={e}"))?,
            None if self.certificates.is_some() => TlsMode::On,
            None => TlsMode::Off,
        };
        if mode == TlsMode::Off {
            return Ok(None);
        }
        let Some(dir) = &self.certificates else {
            return Err(format!(
                "--tls={}: needs --tls-certificates=DIR (server-cert.pem, server-key.pem; mqblk tls-certs DIR makes one)",
                self.mode.as_deref().unwrap_or("on")
            ).into());
        };
        let config = mqblk_nbd::tls::server_config(dir, self.verify_peer)
            .map_err(|e| format!("--tls-certificates: {e}"))?;
        Ok(Some(mqblk_nbd::tls::Tls { mode, config }))
    }
}

fn run(args: ServeArgs) -> Result<i32, CliError> {
    let mut listens = args.listen.clone();
    let mut stats_file = args.stats.clone();
    let mut admin_path = args.admin.clone();
    let trace = args.trace.clone();
    let config = args.config.clone();
    let mut tls = TlsCfg {
        mode: args.tls.clone(),
        certificates: args.tls_certificates.clone(),
        verify_peer: args.tls_verify_peer,
    };
    let one = ExportCfg::new(args.export.as_deref().unwrap_or("mqblk"), &args.export_opts)?;
    let mut cfgs = vec![one];
    if let Some(path) = &config {
        let file = read_config(path)?;
        cfgs = file.exports;
        if listens.is_empty() {
            listens = file.listen;
        }
        stats_file = stats_file.or(file.stats);
        admin_path = admin_path.or(file.admin);
        tls = TlsCfg {
            mode: tls.mode.or(file.tls.mode),
            certificates: tls.certificates.or(file.tls.certificates),
            verify_peer: tls.verify_peer || file.tls.verify_peer,
        };
    }
    // Credentials are read before anything is bound or built, so a bad one stops nothing.
    let tls_offer = tls.build()?;
    if tls_offer.is_some() && cfgs.iter().all(|c| c.vhost.is_some()) {
        return Err("--tls: every export is served over vhost-user-blk, which has no TLS".into());
    }
    let any_nbd = cfgs.iter().any(|c| c.vhost.is_none());
    if listens.is_empty() && any_nbd {
        listens.push("tcp:127.0.0.1:10809".into());
    }
    if !listens.is_empty() && !any_nbd {
        return Err(format!(
            "--listen={}: every export is served over vhost-user-blk; nothing is left for NBD",
            listens[0]
        )
        .into());
    }
    let writer = crate::trace_cmd::TraceOut::open(trace.as_deref());
    let mut exports = Vec::new();
    for (i, c) in cfgs.iter().enumerate() {
        let tracer = (i == 0)
            .then(|| crate::trace_cmd::tracer_of(&writer))
            .flatten();
        let queue = c.build(tracer)?;
        let rotational = queue.driver().rotational();
        exports.push(Arc::new(
            Export::new(&c.name, &c.description, queue, c.read_only, rotational)
                .with_sessions(c.max_conns),
        ));
    }
    // Every export is an `Export` (the admin socket reaches them all); NBD serves those
    // without a vhost-user socket.
    let nbd_exports: Vec<Arc<Export>> = exports
        .iter()
        .zip(&cfgs)
        .filter(|(_, c)| c.vhost.is_none())
        .map(|(e, _)| e.clone())
        .collect();
    let (scheme, tls_note) = match tls_offer.as_ref().map(|t| t.mode) {
        Some(mqblk_nbd::tls::TlsMode::Require) => ("nbds", " (TLS required)"),
        Some(_) => ("nbd", " (TLS offered)"),
        None => ("nbd", ""),
    };
    let mut listeners = Vec::new();
    for l in &listens {
        if let Some(addr) = l.strip_prefix("tcp:") {
            let t = TcpListener::bind(addr).map_err(|e| format!("--listen={l}: {e}"))?;
            let at = t.local_addr().map_err(|e| e.to_string())?;
            for e in &nbd_exports {
                eprintln!(
                    "mqblk serve: export '{}' ({} bytes) on {scheme}://{at}/{}{tls_note}",
                    e.name, e.size, e.name
                );
            }
            listeners.push(Listener::Tcp(t));
        } else if let Some(path) = l.strip_prefix("unix:") {
            let (u, owned) = mqblk_runtime::unix_socket::bind(
                std::path::Path::new(path),
                &format!("--listen={l}"),
                args.replace_stale_socket,
            )?;
            for e in &nbd_exports {
                eprintln!(
                    "mqblk serve: export '{}' ({} bytes) on {scheme}+unix:///{}?socket={path}{tls_note}",
                    e.name, e.size, e.name
                );
            }
            listeners.push(Listener::Unix(u, owned));
        } else {
            return Err(format!("--listen={l}: expected tcp:HOST:PORT or unix:PATH").into());
        }
    }
    let mut server = Server::new(nbd_exports, mqblk_nbd::server::MAX_HANDSHAKES);
    server.tls = tls_offer;
    if let Some(secs) = args.idle_timeout {
        server.idle_timeout = (secs > 0).then(|| std::time::Duration::from_secs(secs));
    }
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, server.stop.clone())
            .map_err(|e| format!("installing the signal handler: {e}"))?;
    }
    let admin = match &admin_path {
        Some(path) => Some(mqblk_runtime::admin::spawn(
            path,
            args.replace_stale_socket,
            exports
                .iter()
                .map(|e| mqblk_runtime::admin::NamedQueue {
                    name: e.name.clone(),
                    queue: e.queue.clone(),
                })
                .collect(),
            server.stop.clone(),
        )?),
        None => None,
    };
    // Those started before one failed to start are stopped and joined below.
    let mut vhosts = Vec::new();
    let served = match start_vhost(
        &exports,
        &cfgs,
        &server.stop,
        args.replace_stale_socket,
        &mut vhosts,
    ) {
        Err(e) => Err(e),
        Ok(()) if any_nbd => server
            .run(listeners)
            .map_err(|e| CliError::io("serving", e)),
        Ok(()) => {
            while !server.stop.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(())
        }
    };
    server.stop.store(true, Ordering::Relaxed);
    let mut served = served;
    let mut virtqueues: Vec<Vec<mqblk_vhost::VqStats>> = vec![Vec::new(); exports.len()];
    let mut vhost_conns = vec![0u64; exports.len()];
    let mut flush_ctx: Vec<CtxIdx> = cfgs.iter().map(|c| CtxIdx(c.sessions() as u16)).collect();
    for v in vhosts {
        match v.thread.join() {
            Ok(Ok(r)) => vhost_conns[v.export] = r.connections,
            Ok(Err(e)) => served = served.and(Err(e.into())),
            Err(_) => served = served.and(Err("a vhost-user-blk server thread failed".into())),
        }
        virtqueues[v.export] = v.dev.stats();
        if let Some(c) = v.dev.spare_ctx() {
            flush_ctx[v.export] = c;
        }
        v.socket.remove();
    }
    if let Some(a) = admin {
        let _ = a.join();
    }
    served?;
    // Every connection has ended; make what was written durable before exiting.
    let mut all_ok = true;
    let mut json = Vec::new();
    for (i, (e, c)) in exports.iter().zip(&cfgs).enumerate() {
        let queue = &e.queue;
        let mut h = SubmitterHandle::new(queue.clone(), flush_ctx[i], MonotonicClock::new());
        h.submit(Bio::new(ReqOp::Flush, 0, 0));
        while h.done().is_empty() {
            h.reap(1, 1_000_000_000);
        }
        let flush_ok = h.done()[0].status.is_ok();
        drop(h);
        all_ok &= flush_ok;
        let s = &e.stats;
        let vqs = std::mem::take(&mut virtqueues[i]);
        if c.vhost.is_some() {
            let sum = |f: fn(&mqblk_vhost::VqStats) -> u64| vqs.iter().map(f).sum::<u64>();
            eprintln!(
                "mqblk serve: export '{}': {} front-end connections, {} requests, {} bytes read, {} written, {} errors; final flush {}",
                e.name,
                vhost_conns[i],
                sum(|v| v.requests),
                sum(|v| v.bytes_read),
                sum(|v| v.bytes_written),
                sum(|v| v.errors),
                if flush_ok { "ok" } else { "FAILED" }
            );
        } else {
            eprintln!(
            "mqblk serve: export '{}': {} connections, {} requests, {} bytes read, {} written, {} errors; final flush {}",
            e.name,
            s.connections.load(Ordering::Relaxed),
            s.requests.load(Ordering::Relaxed),
            s.bytes_read.load(Ordering::Relaxed),
            s.bytes_written.load(Ordering::Relaxed),
            s.errors.load(Ordering::Relaxed),
            if flush_ok { "ok" } else { "FAILED" }
        );
        }
        let per_connection = s.per_connection.lock().clone();
        json.push(ExportStats {
            export: e.name.clone(),
            size: e.size,
            per_connection,
            connections: s.connections.load(Ordering::Relaxed),
            requests: s.requests.load(Ordering::Relaxed),
            bytes_read: s.bytes_read.load(Ordering::Relaxed),
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            errors: s.errors.load(Ordering::Relaxed),
            queue: mqblk_device::QueueReport::of(queue),
            virtqueues: vqs,
        });
    }
    if let Some(p) = &stats_file {
        // One export: its object (as before); several: a list.
        let v = if json.len() == 1 {
            serde_json::json!(json.pop().expect("one"))
        } else {
            serde_json::json!(json)
        };
        std::fs::write(
            p,
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n",
        )
        .map_err(|e| format!("--stats={}: {e}", p.display()))?;
    }
    crate::trace_cmd::finish(&writer)?;
    for e in &exports {
        e.queue.teardown();
    }
    Ok(if all_ok { 0 } else { 1 })
}

/// A vhost-user-blk export being served.
struct VhostRun {
    export: usize,
    dev: Arc<mqblk_vhost::BlkDevice>,
    socket: mqblk_runtime::unix_socket::OwnedSocket,
    thread: std::thread::JoinHandle<Result<mqblk_vhost::ServeReport, String>>,
}

/// Descriptors per virtqueue offered (QEMU's vhost-user-blk asks for 128 by default; a guest
/// may use any power of two up to this).
const VHOST_QUEUE_SIZE: u16 = 1024;

/// Binds each vhost-user-blk export's socket and serves it on a thread of its own until
/// `stop`.
fn start_vhost(
    exports: &[Arc<Export>],
    cfgs: &[ExportCfg],
    stop: &Arc<std::sync::atomic::AtomicBool>,
    replace_stale: bool,
    runs: &mut Vec<VhostRun>,
) -> Result<(), CliError> {
    for (i, (e, c)) in exports.iter().zip(cfgs).enumerate() {
        let Some(path) = &c.vhost else { continue };
        let what = format!("--vhost-user-blk={}", path.display());
        let dev = mqblk_vhost::BlkDevice::new(
            &c.name,
            e.queue.clone(),
            c.num_queues,
            VHOST_QUEUE_SIZE,
            c.read_only,
        )
        .and_then(|d| d.with_threads(c.vq_threads.unwrap_or(c.num_queues)))
        .map(|d| d.with_in_order(c.in_order))
        .map_err(|m| format!("export '{}': {m}", c.name))?;
        let dev = Arc::new(dev);
        let (listener, socket) = mqblk_runtime::unix_socket::bind(path, &what, replace_stale)?;
        eprintln!(
            "mqblk serve: export '{}' ({} bytes) as vhost-user-blk on {} ({} virtqueues on {} threads over {} hardware queues)",
            e.name,
            e.size,
            path.display(),
            c.num_queues,
            dev.threads,
            e.queue.nr_hw_queues()
        );
        let (d, st) = (dev.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("vhost-{}", c.name))
            .spawn(move || mqblk_vhost::serve(d, listener, st))
            .map_err(|err| format!("{what}: {err}"))?;
        runs.push(VhostRun {
            export: i,
            dev,
            socket,
            thread,
        });
    }
    Ok(())
}
