//! fio's `ioengine=`: which engines mqblk runs, and what each one means for a job.
//!
//! An engine only decides how fio hands I/O to the kernel; the block I/O itself is what
//! mqblk's block layer does. So every engine that reads and writes a file or block device
//! runs here as block I/O through mqblk's queues on the named file (the uring driver), and
//! what the engine changes is kept: a synchronous engine (`psync`, `sync`, ...) has one
//! I/O in flight per job whatever `iodepth` says, as in fio, where each of its I/Os
//! completes before the next is queued. Engines that do no block I/O are refused, one line
//! each saying what they do instead.

/// fio's default engine on Linux (`fio --name=x --filename=f` runs `ioengine=psync`).
pub const FIO_DEFAULT: &str = "psync";

/// What an engine is to mqblk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// fio's `null` engine: I/O that goes nowhere (mqblk's null device).
    Null,
    /// Block I/O with up to `iodepth` in flight (`libaio`, `io_uring`, `posixaio`).
    Async,
    /// Block I/O with one I/O in flight (`sync`, `psync`, `vsync`, `pvsync`, `pvsync2`,
    /// `mmap`, `splice`).
    Sync,
}

const ASYNC: &[&str] = &["libaio", "io_uring", "uring", "posixaio"];
const SYNC: &[&str] = &[
    "sync", "psync", "vsync", "pvsync", "pvsync2", "mmap", "splice",
];

/// Engines that do not do block I/O to a file, and what they do instead.
const NOT_BLOCK_IO: &[(&str, &str)] = &[
    ("cpuio", "burns CPU cycles and does no I/O"),
    ("net", "sends data over a network socket"),
    ("netsplice", "sends data over a network socket"),
    ("rdma", "moves data over RDMA"),
    ("http", "talks HTTP/S3/Swift to a web server"),
    ("rados", "talks to a Ceph cluster"),
    ("rbd", "talks to a Ceph cluster"),
    ("gfapi", "talks to a GlusterFS volume"),
    ("gfapi_async", "talks to a GlusterFS volume"),
    ("nfs", "talks to an NFS server from user space"),
    ("libnfs", "talks to an NFS server from user space"),
    ("dfs", "talks to a DAOS file system"),
    (
        "nbd",
        "is an NBD client (serve a device with `mqblk serve` and point fio at it)",
    ),
    ("exec", "runs a program"),
    ("ftruncate", "calls ftruncate(2)"),
    ("falloc", "calls fallocate(2)"),
    ("filecreate", "creates files"),
    ("filestat", "stats files"),
    ("filedelete", "deletes files"),
    ("dircreate", "creates directories"),
    ("dirstat", "stats directories"),
    ("dirdelete", "deletes directories"),
    ("e4defrag", "defragments an ext4 file"),
    ("mtd", "erases and writes raw flash"),
    ("sg", "sends SCSI commands past the block layer's scheduler"),
    (
        "io_uring_cmd",
        "sends NVMe passthrough commands past the block layer's scheduler",
    ),
    ("xnvme", "drives NVMe from user space"),
    ("spdk", "drives NVMe from user space"),
    ("spdk_bdev", "drives NVMe from user space"),
    ("libzbc", "sends zoned-disk commands past the block layer"),
    (
        "pmemblk",
        "writes persistent memory, which has no block layer",
    ),
    (
        "dev-dax",
        "writes persistent memory, which has no block layer",
    ),
    (
        "libpmem",
        "writes persistent memory, which has no block layer",
    ),
    ("libcufile", "moves data to GPU memory"),
    ("windowsaio", "is Windows' asynchronous I/O"),
    ("solarisaio", "is Solaris' asynchronous I/O"),
];

/// The block I/O engines mqblk runs, as a refusal names them.
const RUNS: &str = "mqblk runs the block I/O engines (libaio, io_uring, posixaio, psync, sync, \
                    pvsync, pvsync2, vsync, mmap, splice) and null";

/// Why an `ioengine` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// A fio engine that does something other than block I/O (`what` says what).
    #[error("the {name} engine {what}, not block I/O; {RUNS}")]
    NotBlockIo { name: String, what: &'static str },
    /// `external:PATH`: a plugin fio would load.
    #[error("external engines are not loaded; {RUNS}")]
    External,
    /// No fio engine has this name.
    #[error("not a fio engine; {RUNS}")]
    Unknown,
}

/// What `name` is, or why it is refused.
pub fn classify(name: &str) -> Result<EngineKind, EngineError> {
    let lower = name.trim().to_ascii_lowercase();
    if lower == "null" {
        return Ok(EngineKind::Null);
    }
    if ASYNC.contains(&lower.as_str()) {
        return Ok(EngineKind::Async);
    }
    if SYNC.contains(&lower.as_str()) {
        return Ok(EngineKind::Sync);
    }
    if let Some((_, what)) = NOT_BLOCK_IO.iter().find(|(n, _)| *n == lower) {
        return Err(EngineError::NotBlockIo { name: lower, what });
    }
    if lower.starts_with("external") {
        return Err(EngineError::External);
    }
    Err(EngineError::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_fall_into_their_kind_and_others_are_named() {
        assert_eq!(classify("libaio"), Ok(EngineKind::Async));
        assert_eq!(classify("IO_URING"), Ok(EngineKind::Async));
        assert_eq!(classify(FIO_DEFAULT), Ok(EngineKind::Sync));
        assert_eq!(classify("pvsync2"), Ok(EngineKind::Sync));
        assert_eq!(classify("null"), Ok(EngineKind::Null));
        let net = classify("net").unwrap_err().to_string();
        assert!(
            net.starts_with("the net engine sends data over a network socket"),
            "{net}"
        );
        assert_eq!(classify("libaoi"), Err(EngineError::Unknown));
        assert!(classify("libaoi")
            .unwrap_err()
            .to_string()
            .starts_with("not a fio engine"));
    }
}
