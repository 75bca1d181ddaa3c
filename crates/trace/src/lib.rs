//! blktrace: the binary trace format, read and written.
//!
//! - [`format`](mod@format): the record layout (versions 7 and 8, either byte order), action and
//!   category codes, decoding with errors that name the file and offset.
//! - [`writer`]: [`TraceWriter`], a core [`mqblk_core::Tracer`] that writes the queue's
//!   events as `NAME.blktrace.N` files blkparse and btt read.
//! - [`reader`]: [`TraceSet`], the per-CPU files of a trace merged by time.
//! - [`capture`]: a block device's requests from the tracefs block tracepoints, written as
//!   blktrace files (for kernels whose lockdown stops `blktrace` itself).
//! - [`stats`]: what a trace says of its device: times in the scheduler and the driver, and
//!   how the time divides between busy, idle with requests waiting, and empty.

pub mod capture;
pub mod format;
pub mod reader;
pub mod replay;
pub mod stats;
pub mod writer;

pub use format::{FormatError, Record};

/// Why a trace cannot be read, written or captured: one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A file could not be read, written or created.
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A record is damaged (the file and byte offset are named).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A trace name with no `NAME.blktrace.N` files beside it.
    #[error("{}: no trace files ({prefix}N) in {}", name.display(), dir.display())]
    NoFiles {
        name: std::path::PathBuf,
        prefix: String,
        dir: std::path::PathBuf,
    },
    /// What is not a trace name at all.
    #[error("{}: not a trace name", .0.display())]
    NotAName(std::path::PathBuf),
    /// Capturing from tracefs failed (the message names the device or tracefs file).
    #[error("{0}")]
    Capture(String),
}

impl TraceError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

pub use reader::TraceSet;
pub use writer::{Counts, TraceWriter};
