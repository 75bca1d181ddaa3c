//! CPU affinity and per-thread CPU time.

use nix::sched::{sched_setaffinity, CpuSet};
use nix::sys::resource::{getrusage, UsageWho};
use nix::unistd::Pid;

use crate::error::PinError;

/// Pins the calling thread to `cpu` (fio's `cpus_allowed` for one CPU per job).
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    pin_current_thread_to(&[cpu])
}

/// Lets the calling thread run on any of `cpus` (fio's `cpus_allowed_policy=shared`).
pub fn pin_current_thread_to(cpus: &[usize]) -> Result<(), PinError> {
    let fail = |source| PinError {
        cpus: cpus.to_vec(),
        source,
    };
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(fail)?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(fail)
}

/// Clock `id`'s time (`clock_gettime`) in ms; `None` where the kernel has no such clock.
pub fn clock_ms(id: i32) -> Option<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::from_raw(id)).ok()?;
    Some(t.tv_sec() as u64 * 1000 + t.tv_nsec() as u64 / 1_000_000)
}

/// User and system CPU time of a thread or process, with context switches and faults.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTime {
    pub user_ns: u64,
    pub sys_ns: u64,
    pub ctx_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
}

impl CpuTime {
    pub fn since(self, start: CpuTime) -> CpuTime {
        CpuTime {
            user_ns: self.user_ns.saturating_sub(start.user_ns),
            sys_ns: self.sys_ns.saturating_sub(start.sys_ns),
            ctx_switches: self.ctx_switches.saturating_sub(start.ctx_switches),
            minor_faults: self.minor_faults.saturating_sub(start.minor_faults),
            major_faults: self.major_faults.saturating_sub(start.major_faults),
        }
    }
    pub fn total_ns(self) -> u64 {
        self.user_ns + self.sys_ns
    }
}

fn read(who: UsageWho) -> CpuTime {
    match getrusage(who) {
        Ok(u) => {
            let ns = |tv: nix::sys::time::TimeVal| {
                tv.tv_sec() as u64 * 1_000_000_000 + tv.tv_usec() as u64 * 1_000
            };
            CpuTime {
                user_ns: ns(u.user_time()),
                sys_ns: ns(u.system_time()),
                ctx_switches: (u.voluntary_context_switches() + u.involuntary_context_switches())
                    as u64,
                minor_faults: u.minor_page_faults() as u64,
                major_faults: u.major_page_faults() as u64,
            }
        }
        // getrusage cannot fail for these arguments; report zero rather than panic.
        Err(_) => CpuTime::default(),
    }
}

/// CPU time of the calling thread.
pub fn thread_cpu_time() -> CpuTime {
    read(UsageWho::RUSAGE_THREAD)
}

/// CPU time of the whole process.
pub fn process_cpu_time() -> CpuTime {
    read(UsageWho::RUSAGE_SELF)
}
