//! The threaded runtime's errors: why a plan cannot be made or run, why a thread cannot be
//! pinned, why a Unix socket cannot be bound. Each prints as one line naming what failed.

use std::io;
use std::path::PathBuf;

/// Why a run plan cannot be made or run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A job's huge-page buffers could not be mapped.
    #[error(transparent)]
    HugeMem(#[from] mqblk_drivers::HugeMemError),
    /// No job to run.
    #[error("no jobs given")]
    NoJobs,
    /// Fewer software queues than job clones (each clone needs its own).
    #[error("nr_ctx={nr_ctx}: fewer software queues than job clones ({clones}); each clone needs its own")]
    TooFewCtx {
        /// The software queues configured.
        nr_ctx: usize,
        /// The job clones to run.
        clones: usize,
    },
    /// The jobs could not be resolved against the device.
    #[error(transparent)]
    Job(#[from] mqblk_workload::JobError),
    /// A verifying job with blocks smaller than a sector.
    #[error("job '{job}': verify= needs bs of at least 512")]
    VerifyBlockSize {
        /// The job.
        job: String,
    },
    /// The device could not be described or built.
    #[error(transparent)]
    Device(#[from] mqblk_device::DeviceError),
    /// Steady-state settings that differ within a reporting group.
    #[error("{0}")]
    Steady(String),
    /// A job's software queue is not on the device it is run on.
    #[error("job '{job}': no software queue {ctx} on this device")]
    NoCtx {
        /// The job.
        job: String,
        /// Its software queue.
        ctx: u16,
    },
    /// A job's cgroup could not be joined.
    #[error(transparent)]
    Cgroup(#[from] mqblk_workload::CgroupError),
}

/// Why the calling thread could not be pinned to CPUs.
#[derive(Debug, thiserror::Error)]
#[error("pinning to cpus {cpus:?}: {source}")]
pub struct PinError {
    /// The CPUs asked for.
    pub cpus: Vec<usize>,
    /// What the kernel said.
    pub source: nix::Error,
}

/// Why a Unix socket could not be bound; `what` names the option (`--listen=unix:/tmp/x`).
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Something that is not a socket is at the path.
    #[error("{what}: {} exists and is not a socket; refusing to replace it", path.display())]
    NotASocket {
        /// The option.
        what: String,
        /// The path.
        path: PathBuf,
    },
    /// A server listens on the path.
    #[error("{what}: a server is listening on {} already", path.display())]
    InUse {
        /// The option.
        what: String,
        /// The path.
        path: PathBuf,
    },
    /// A socket nothing listens on, and replacing it was not asked for.
    #[error("{what}: {} is a stale socket (nothing listens on it); remove it or pass --replace-stale-socket", path.display())]
    Stale {
        /// The option.
        what: String,
        /// The path.
        path: PathBuf,
    },
    /// The socket at the path could not be checked.
    #[error("{what}: {} exists and cannot be checked ({source}); refusing to replace it", path.display())]
    Unchecked {
        /// The option.
        what: String,
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Looking at the path or binding it failed.
    #[error("{what}: {source}")]
    Io {
        /// The option.
        what: String,
        /// Why.
        source: io::Error,
    },
    /// The stale socket could not be removed.
    #[error("{what}: removing the stale socket: {source}")]
    RemoveStale {
        /// The option.
        what: String,
        /// Why.
        source: io::Error,
    },
}
