//! The threaded runtime: application threads are the CPUs.
//!
//! Each submitting thread owns a software queue through a [`SubmitterHandle`] and runs its
//! hardware queues inline, as the kernel runs them from the submitting CPU. Optionally each
//! hardware queue also gets a completion worker ([`CompletionMode::Worker`]), the userspace
//! stand-in for the interrupt handler and kblockd: it reaps the driver, routes completions
//! back to their submitters and services delayed runs and timeouts. This is the only layer
//! that reads the wall clock, spawns threads or sleeps; the core below it never does.

pub mod admin;
mod clock;
pub mod control;
mod cpu;
mod error;
pub mod job;
pub mod replay;
pub mod run;
mod submitter;
pub mod unix_socket;
mod workers;

pub use clock::MonotonicClock;
pub use cpu::{
    children_cpu_time, machine_busy_ns, pin_current_thread, pin_current_thread_to,
    process_cpu_time, thread_cpu_time, CpuTime,
};
pub use error::{PinError, RunError, SocketError};
pub use job::{run_job, Completed, JobOutcome, LatSink, Progress, RunJob};
pub use run::{build_device, execute, execute_on, Execution, Plan, Sink};
pub use submitter::SubmitterHandle;
pub use workers::{CompletionMode, CompletionWorkers};
