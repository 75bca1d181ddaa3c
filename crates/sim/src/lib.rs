//! mqblk-sim: the deterministic simulator.
//!
//! The same core and schedulers that serve real I/O run here in virtual time, against device
//! models, with virtual CPUs whose every core and elevator operation is charged from a cost
//! table and whose locks are modelled, so contention shows in virtual time. One `u64` seed
//! fixes every random choice: the same seed and configuration print the same bytes.

pub mod cost;
pub mod crash;
pub mod driver;
pub mod engine;
pub mod fuzz;
pub mod jobs;
pub use mqblk_workload::plot;
pub mod replay;
pub mod scenario;
pub mod topology;
pub mod workload;

pub use device::{Cmd, DevCompletion, DeviceModel, DeviceSpec, DriverCost};
pub use engine::{JobResult, Sim, SimConfig, SimError, SimResult};
pub use mqblk_device::{DeviceConfig, DriverConfig, ModelConfig, QueueSettings};
/// The device models (moved to `mqblk-models`, which the real-time paths use too).
pub use mqblk_models as device;
pub use mqblk_models::SimRng;
