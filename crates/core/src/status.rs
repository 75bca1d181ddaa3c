//! `BlkStatus`: the outcome of a request, shaped like the kernel's `blk_status_t`.
//!
//! "Busy" outcomes (`Resource`, `DevResource`) are normal flow with a restart rule, not errors:
//! the core puts the request back and runs the queue again later (see `dispatch.rs`).

use std::fmt;

/// How a request ended, or why a driver turned it away (`blk_status_t`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum BlkStatus {
    /// Success (`BLK_STS_OK`).
    #[default]
    Ok,
    /// The driver is out of a resource shared with other queues: requeue and re-run the
    /// hardware queue after `BLK_MQ_RESOURCE_DELAY`.
    Resource,
    /// Out of a device resource; the driver promises to re-run the queue when it frees up.
    DevResource,
    /// The operation is not supported by this device or driver.
    NotSupp,
    /// A generic I/O error.
    IoErr,
    /// The request timed out.
    Timeout,
    /// The device is out of space.
    NoSpc,
    /// The target is read-only or the access is not permitted.
    Protection,
    /// The request was malformed (out of range, misaligned).
    Invalid,
    /// The submitter asked not to wait and no tag was free.
    Again,
    /// The device went away.
    Offline,
    /// A zoned device has no open zone left for a write or a zone open
    /// (`BLK_STS_ZONE_OPEN_RESOURCE`).
    ZoneOpenResource,
    /// A zoned device has no active zone left (`BLK_STS_ZONE_ACTIVE_RESOURCE`).
    ZoneActiveResource,
}

impl BlkStatus {
    /// True for success.
    pub fn is_ok(self) -> bool {
        self == BlkStatus::Ok
    }

    /// The errno a frontend would report for this status, as the kernel's
    /// `blk_status_to_errno` does.
    pub fn to_errno(self) -> i32 {
        match self {
            BlkStatus::Ok => 0,
            BlkStatus::Resource | BlkStatus::DevResource | BlkStatus::Again => 11, // EAGAIN
            BlkStatus::NotSupp => 95,                                              // EOPNOTSUPP
            BlkStatus::IoErr => 5,                                                 // EIO
            BlkStatus::Timeout => 110,                                             // ETIMEDOUT
            BlkStatus::NoSpc => 28,                                                // ENOSPC
            BlkStatus::Protection => 1,                                            // EPERM
            BlkStatus::Invalid => 22,                                              // EINVAL
            BlkStatus::Offline => 19,                                              // ENODEV
            BlkStatus::ZoneOpenResource => 109,                                    // ETOOMANYREFS
            BlkStatus::ZoneActiveResource => 75,                                   // EOVERFLOW
        }
    }
}

impl fmt::Display for BlkStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            BlkStatus::Ok => "ok",
            BlkStatus::Resource => "resource busy",
            BlkStatus::DevResource => "device resource busy",
            BlkStatus::NotSupp => "operation not supported",
            BlkStatus::IoErr => "I/O error",
            BlkStatus::Timeout => "timeout",
            BlkStatus::NoSpc => "no space left on device",
            BlkStatus::Protection => "protection error (read-only or not permitted)",
            BlkStatus::Invalid => "invalid request",
            BlkStatus::Again => "no tag available (nowait)",
            BlkStatus::Offline => "device offline",
            BlkStatus::ZoneOpenResource => "no open zone left",
            BlkStatus::ZoneActiveResource => "no active zone left",
        };
        f.write_str(s)
    }
}
