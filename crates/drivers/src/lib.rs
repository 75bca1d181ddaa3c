//! Block drivers.

pub mod null;
pub mod sysfs;
pub mod uring;

pub use mqblk_core::{FaultConfig, FaultSpec};
pub use null::{IrqMode, NullConfig, NullDevice, NullError};
pub use uring::{
    errno_to_status, fs_available, BackingKind, Extend, FixedPool, UringConfig, UringDevice,
    UringError, UringFile, MAX_FIXED_BUFFERS, OWNED_RINGS,
};
