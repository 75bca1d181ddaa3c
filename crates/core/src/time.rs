//! Time as the core sees it: a number of nanoseconds handed in by the caller.
//!
//! Nothing in the core or in an elevator reads a clock. Every entry point that needs the time
//! takes `now: Nanos`; the threaded runtime passes a monotonic clock reading and the simulator
//! passes virtual time. That is what lets both drive the very same code.

use std::fmt;

/// The kernel's tick rate (`CONFIG_HZ`): 250, this machine's kernel's (`/proc/config.gz`) and
/// Debian's and openSUSE's default on x86. Timers (delayed work, BFQ's jiffy-counted windows)
/// run in whole ticks of it.
pub const HZ: u64 = 250;
/// One tick (`1 / HZ` s).
pub const JIFFY: Nanos = Nanos(1_000_000_000 / HZ);

/// A point in time or a duration, in nanoseconds. The origin is the caller's clock's.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Time zero.
    pub const ZERO: Nanos = Nanos(0);
    /// "Never": used for deadlines that are not armed.
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    /// `s` seconds.
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    /// The sum, at most `u64::MAX` nanoseconds.
    pub const fn saturating_add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }
    /// The difference, at least zero.
    pub const fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// A source of `now` for runtimes. The core never holds one; runtimes read it and pass the
/// value down.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Nanos;
}
