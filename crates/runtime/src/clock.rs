//! The real clock, for the threaded runtime.

use mqblk_core::{Clock, Nanos};

/// Monotonic nanoseconds since the clock was made. Reads the TSC through `quanta` where it
/// is stable (a few nanoseconds a read), the OS monotonic clock otherwise: the I/O path reads
/// the clock several times per request, so its cost shows up in per-request CPU time.
#[derive(Clone)]
pub struct MonotonicClock {
    clock: quanta::Clock,
    origin: u64,
}

impl MonotonicClock {
    pub fn new() -> MonotonicClock {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        MonotonicClock { clock, origin }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos(self.clock.delta_as_nanos(self.origin, self.clock.raw()))
    }
}
