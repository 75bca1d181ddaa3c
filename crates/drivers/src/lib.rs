//! Block drivers.

pub mod null;

pub use null::{FaultConfig, FaultSpec, IrqMode, NullConfig, NullDevice, NullError};
