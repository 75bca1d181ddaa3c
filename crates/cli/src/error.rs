//! [`CliError`]: why a command could not do what was asked, typed by the layer that refused
//! it, so a caller (the Python bindings, a script through the library) can tell a bad job
//! from a device that cannot be built or a simulation that found a bug.

/// Why a command failed. Its `Display` is one line naming the option, file or step, but for
/// a failed simulation, which adds the state dump at the failure.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The job options (command line or job file).
    #[error(transparent)]
    Job(#[from] mqblk_workload::JobError),
    /// The device the options describe.
    #[error(transparent)]
    Device(#[from] mqblk_device::DeviceError),
    /// An export's device (`mqblk serve`).
    #[error("export '{export}': {source}")]
    Export {
        export: String,
        #[source]
        source: mqblk_device::DeviceError,
    },
    /// A real-time run.
    #[error(transparent)]
    Run(#[from] mqblk_runtime::RunError),
    /// A simulation failed: a violated invariant, a stall, a configuration refused; `dump`
    /// is the state at the failure (empty for a configuration).
    #[error("{source}{dump}")]
    Sim {
        source: Box<mqblk_sim::SimError>,
        dump: String,
    },
    /// A scenario or a sweep of one.
    #[error(transparent)]
    Scenario(Box<mqblk_sim::scenario::ScenarioError>),
    /// A device model's parameters.
    #[error(transparent)]
    Model(#[from] mqblk_models::ModelError),
    /// `--cost-profile` or `--cost`.
    #[error(transparent)]
    Cost(#[from] mqblk_sim::cost::CostError),
    /// `--topology`.
    #[error(transparent)]
    Topology(#[from] mqblk_sim::topology::TopologyError),
    /// A blktrace capture read or written.
    #[error(transparent)]
    Trace(#[from] mqblk_trace::TraceError),
    /// A log, chart or report file.
    #[error(transparent)]
    Write(#[from] mqblk_workload::WriteError),
    /// A Unix socket (`--listen=unix:`, `--admin`, `--vhost-user-blk`).
    #[error(transparent)]
    Socket(#[from] mqblk_runtime::SocketError),
    /// A file or socket operation, with what it was for.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A request the command refuses (a flag's value, a combination of flags) or a step it
    /// could not take, described in one line naming the flag or the step.
    #[error("{0}")]
    Invalid(String),
}

impl CliError {
    /// The error of an I/O step described by `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> CliError {
        CliError::Io {
            what: what.into(),
            source,
        }
    }
}

impl From<mqblk_sim::SimError> for CliError {
    /// A failed simulation, with its whole state dump on the lines after.
    fn from(source: mqblk_sim::SimError) -> CliError {
        let dump = match source.dump() {
            "" => String::new(),
            d => format!("\n{d}"),
        };
        CliError::Sim {
            source: Box::new(source),
            dump,
        }
    }
}

impl From<mqblk_sim::scenario::ScenarioError> for CliError {
    fn from(e: mqblk_sim::scenario::ScenarioError) -> CliError {
        CliError::Scenario(Box::new(e))
    }
}

/// The messages the command builds itself (flag checks, steps described in one line).
impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::Invalid(message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> CliError {
        CliError::Invalid(message.to_string())
    }
}
