//! Serving one vhost-user socket: one front-end (a VMM such as QEMU) at a time, one after
//! another, until the stop flag is set (SIGINT/SIGTERM in `mqblk serve`).
//!
//! Each connection gets a fresh `VhostUserDaemon` (its message thread and one worker thread
//! per virtqueue) over the same [`BlkDevice`]; when the front-end goes (it quit, was killed,
//! or sent something the protocol does not allow) the daemon's threads are joined before the
//! next front-end is accepted, so the device's software queues are never served twice.

use crate::backend::{Backend, BlkDevice, GuestMem};
use nix::sys::socket::Shutdown;
use parking_lot::Mutex;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use vhost::vhost_user::{Error as VhostUserError, Listener};
use vhost_user_backend::{Error as DaemonError, ShutdownHandle, VhostUserDaemon};
use vm_memory::GuestMemoryMmap;

/// How often the stop flag is looked at.
const STOP_POLL: Duration = Duration::from_millis(50);
/// How long to wait before accepting again after an accept failed.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What one socket served.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ServeReport {
    /// Front-end connections served.
    pub connections: u64,
    /// Connections that ended with a protocol error rather than a hang-up.
    pub errors: u64,
}

/// Serves `dev` on `listener` until `stop` is set. Only a failure to set a connection's
/// daemon up at all is an error; a failed accept is retried, and a front-end's own failure
/// ends its connection with one line on stderr and the next one is accepted.
pub fn serve(
    dev: Arc<BlkDevice>,
    listener: UnixListener,
    stop: Arc<AtomicBool>,
) -> Result<ServeReport, String> {
    let listen_fd = listener.as_raw_fd();
    let mut listener = Listener::from(listener);
    let current: Arc<Mutex<Option<ShutdownHandle>>> = Arc::new(Mutex::new(None));
    let finished = Arc::new(AtomicBool::new(false));
    // The accept and the connection's message thread block; on stop this ends the
    // connection and shuts the listening socket down, which fails a blocked accept (the
    // socket's path may be gone already, so connecting to it cannot be relied on).
    let watcher = {
        let (current, finished, stop) = (current.clone(), finished.clone(), stop.clone());
        std::thread::Builder::new()
            .name("vhost-stop".into())
            .spawn(move || {
                while !finished.load(Ordering::Acquire) {
                    std::thread::sleep(STOP_POLL);
                    if stop.load(Ordering::Acquire) {
                        if let Some(h) = current.lock().as_ref() {
                            h.shutdown();
                        }
                        let _ = nix::sys::socket::shutdown(listen_fd, Shutdown::Read);
                    }
                }
            })
            .map_err(|e| format!("starting the stop watcher: {e}"))?
    };
    let name = dev.name.clone();
    let mut report = ServeReport::default();
    let mut accept_failing = false;
    let served = (|| {
        while !stop.load(Ordering::Acquire) {
            let mem = GuestMem::new(GuestMemoryMmap::new());
            let backend = Backend::new(dev.clone(), mem.clone());
            let mut daemon = VhostUserDaemon::new(format!("vhost-{name}"), backend, mem)
                .map_err(|e| format!("vhost-user-blk '{name}': {e}"))?;
            if let Err(e) = daemon.start(&mut listener) {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                // Out of file descriptors and the like: say so once, back off, keep the
                // socket served rather than end this export's service for good.
                if !accept_failing {
                    eprintln!("mqblk serve: vhost-user-blk '{name}': accepting: {e}; retrying");
                }
                accept_failing = true;
                std::thread::sleep(ACCEPT_BACKOFF);
                continue;
            }
            accept_failing = false;
            *current.lock() = daemon.shutdown_handle();
            let stopping = stop.load(Ordering::Acquire);
            if stopping {
                daemon.request_shutdown();
            } else {
                report.connections += 1;
                eprintln!("mqblk serve: vhost-user-blk '{name}': front-end connected");
            }
            let ended = daemon.wait();
            *current.lock() = None;
            // Joins the virtqueue threads: every request they took has been answered.
            drop(daemon);
            if stopping {
                continue;
            }
            match ended {
                // A guest that powers off or a VMM that quits hangs up between messages.
                Ok(())
                | Err(DaemonError::HandleRequest(
                    VhostUserError::Disconnected | VhostUserError::PartialMessage,
                )) => eprintln!("mqblk serve: vhost-user-blk '{name}': front-end disconnected"),
                Err(e) => {
                    report.errors += 1;
                    eprintln!("mqblk serve: vhost-user-blk '{name}': connection ended: {e}");
                }
            }
            debug_assert_eq!(dev.inflight(), 0, "requests left in flight");
        }
        Ok(())
    })();
    finished.store(true, Ordering::Release);
    let _ = watcher.join();
    served.map(|()| report)
}
