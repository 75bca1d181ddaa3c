//! Changing a running queue from a thread of the runtime: freeze it, wait (sleeping) until
//! it drains while the submitters keep reaping, make the change, unfreeze. The core's
//! freeze never waits (`RequestQueue::freeze_start`, `freeze_drained`); this is the waiting
//! half the kernel's `blk_mq_freeze_queue` does in process context.

use mqblk_core::{ElevatorType, FreezeError, RequestQueue};
use std::time::{Duration, Instant};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ControlError {
    #[error("the queue did not drain within {0:?} (a submitter that stopped reaping, or a plug never flushed); nothing was changed")]
    NotDrained(Duration),
    #[error(transparent)]
    Refused(#[from] FreezeError),
}

/// Freezes `q`, waits up to `timeout` for it to drain, runs `change` and unfreezes, whatever
/// `change` returned. Someone must be reaping the queue meanwhile: the runtime's submitters
/// do, their bios coming back busy until the queue is unfrozen.
pub fn with_frozen<T>(
    q: &RequestQueue,
    timeout: Duration,
    change: impl FnOnce(&RequestQueue) -> Result<T, FreezeError>,
) -> Result<T, ControlError> {
    q.freeze_start();
    let deadline = Instant::now() + timeout;
    while !q.freeze_drained() {
        if Instant::now() >= deadline {
            q.unfreeze();
            return Err(ControlError::NotDrained(timeout));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let r = change(q);
    q.unfreeze();
    Ok(r?)
}

/// `echo NAME > queue/scheduler` on a running queue (`None` for `none`).
pub fn elevator_switch(
    q: &RequestQueue,
    elv: Option<&ElevatorType>,
    timeout: Duration,
) -> Result<(), ControlError> {
    with_frozen(q, timeout, |q| q.elevator_switch(elv))
}

/// `echo N > queue/nr_requests` on a running queue.
pub fn set_nr_requests(q: &RequestQueue, nr: u32, timeout: Duration) -> Result<(), ControlError> {
    with_frozen(q, timeout, |q| q.set_nr_requests(nr))
}
