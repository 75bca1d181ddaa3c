//! The `mqblk` command's modules, also a library: the Python bindings (`python/`) call the
//! same functions the subcommands do (`sim::simulate_args`, `sim::scenario_json`), so a
//! simulation asked from Python is the one `mqblk sim` runs.

pub mod admin;
pub mod args;
pub mod bench;
mod error;
pub mod profile;
pub mod replay;
pub mod report;
mod run;
pub mod serve;
pub mod sim;
pub mod trace_cmd;
pub mod twin;

pub use error::CliError;
pub use run::run;
