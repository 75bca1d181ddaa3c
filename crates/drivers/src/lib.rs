//! Block drivers.

// Maps memory and lends it out as byte slices: the crate's one module with `unsafe` besides
// the io_uring engine.
#[allow(unsafe_code)]
pub mod hugemem;
pub mod null;
pub mod sysfs;
pub mod uring;

pub use hugemem::{HugeArena, HugeMemError};
pub use mqblk_core::{FaultConfig, FaultSpec};
pub use null::{IrqMode, NullConfig, NullDevice, NullError};
pub use uring::{
    errno_to_status, fs_available, BackingKind, Extend, FixedPool, UringConfig, UringDevice,
    UringError, UringFile, MAX_FIXED_BUFFERS, OWNED_RINGS,
};
