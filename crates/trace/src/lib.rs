//! blktrace: the binary trace format, read and written.
//!
//! - [`format`]: the record layout (versions 7 and 8, either byte order), action and
//!   category codes, decoding with errors that name the file and offset.
//! - [`writer`]: [`TraceWriter`], a core [`mqblk_core::Tracer`] that writes the queue's
//!   events as `NAME.blktrace.N` files blkparse and btt read.
//! - [`reader`]: [`TraceSet`], the per-CPU files of a trace merged by time.
//! - [`capture`]: a block device's requests from the tracefs block tracepoints, written as
//!   blktrace files (for kernels whose lockdown stops `blktrace` itself).

pub mod capture;
pub mod format;
pub mod reader;
pub mod writer;

pub use format::{FormatError, Record};
pub use reader::TraceSet;
pub use writer::{Counts, TraceWriter};
