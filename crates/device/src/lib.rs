//! One device configuration and the builders of a request queue over it.
//!
//! A run's device is described once, as a [`DeviceConfig`]: the driver (null, io_uring over
//! a file or block device, or a device model), its hardware queues and depths, fault
//! injection, and the [`QueueSettings`] of the request queue above it (scheduler and
//! tunables, `nr_requests`, `nomerges`, limits). fio job options ([`DeviceConfig::from_job`]),
//! `mqblk serve`'s exports and `mqblk replay` map onto it; `mqblk bench` builds it with real
//! threads ([`build`]), and the simulator builds the same queue over the device's model
//! ([`DeviceConfig::model_spec`], [`new_queue`]).

mod build;
mod config;

pub use build::{apply_tunables, build, build_traced, new_queue, Device};
pub use config::{DeviceConfig, DriverKind, QueueSettings};
