//! blktrace: the binary trace format, read and written, and capture from tracefs.
