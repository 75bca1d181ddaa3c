//! What the server tests share: a server over a Unix socket on a memory-backed null
//! device, and the option-haggling helpers of a client written from the spec.
#![allow(dead_code)]

use mqblk_core::{QueueConfig, RequestQueue, TagSet};
use mqblk_drivers::{NullConfig, NullDevice};
use mqblk_nbd::proto;
use mqblk_nbd::{Export, Listener, Server};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub struct Rig {
    pub sock: PathBuf,
    pub server: Arc<Server>,
    pub queue: Arc<RequestQueue>,
    pub thread: Option<std::thread::JoinHandle<()>>,
}

pub fn rig_full(
    name: &str,
    read_only: bool,
    sessions: usize,
    handshakes: usize,
    idle: Option<std::time::Duration>,
    tls: Option<mqblk_nbd::tls::Tls>,
) -> Rig {
    let cfg = NullConfig {
        submit_queues: 2,
        memory_backed: true,
        size_bytes: 64 << 20,
        ..NullConfig::default()
    };
    let set = TagSet::new(cfg.tag_set_config()).unwrap();
    let dev = NullDevice::new(cfg.clone()).unwrap();
    let mut limits = cfg.queue_limits();
    limits.max_sectors = 65536;
    let queue = RequestQueue::new(
        set,
        dev,
        mqblk_sched::lookup("mq-deadline"),
        QueueConfig {
            nr_ctx: 8,
            limits,
            ..QueueConfig::default()
        },
    )
    .unwrap();
    let export = Arc::new(
        Export::new("disk", "test disk", queue.clone(), read_only, false).with_sessions(sessions),
    );
    let mut server = Server::new(vec![export], handshakes);
    server.idle_timeout = idle;
    server.tls = tls;
    let server = Arc::new(server);
    let sock = std::env::temp_dir().join(format!("mqblk-nbd-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let (l, owned) = mqblk_runtime::unix_socket::bind(&sock, "test socket", false).unwrap();
    let s = server.clone();
    let thread = std::thread::spawn(move || s.run(vec![Listener::Unix(l, owned)]).unwrap());
    Rig {
        sock,
        server,
        queue,
        thread: Some(thread),
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.server.stop.store(true, Ordering::Release);
        if std::thread::panicking() {
            // A failed test may have left a connection stuck: report it, do not hang.
            return;
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn read_n<S: Read>(s: &mut S, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

pub fn option<S: Write>(s: &mut S, o: u32, data: &[u8]) {
    let mut b = proto::IHAVEOPT.to_be_bytes().to_vec();
    b.extend_from_slice(&o.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

/// Reads one option reply: (type, payload).
pub fn reply<S: Read>(s: &mut S) -> (u32, Vec<u8>) {
    let h = read_n(s, 20);
    assert_eq!(
        u64::from_be_bytes(h[..8].try_into().unwrap()),
        proto::OPT_REPLY_MAGIC
    );
    let t = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    (t, read_n(s, len))
}

pub fn go_payload(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}
