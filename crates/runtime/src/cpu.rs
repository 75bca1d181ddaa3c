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

/// CPU time of the process's children that have ended and been waited for (a `fio` run to
/// its end).
pub fn children_cpu_time() -> CpuTime {
    read(UsageWho::RUSAGE_CHILDREN)
}

/// The machine's busy CPU time since boot, all CPUs together, in ns: `/proc/stat`'s `cpu`
/// row. `None` where it cannot be read.
pub fn machine_busy_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks = stat_busy_ticks(&text)?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&hz| hz > 0)?;
    Some(ticks.saturating_mul(1_000_000_000) / hz as u64)
}

/// The busy clock ticks of `/proc/stat`'s `cpu` row: user, nice, system, irq and softirq.
/// Idle and iowait are not work, steal is another guest's, and guest time is counted in
/// user already.
pub fn stat_busy_ticks(text: &str) -> Option<u64> {
    let row = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = row
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 7 {
        return None;
    }
    Some(v[0] + v[1] + v[2] + v[5] + v[6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_row_counts_user_nice_system_irq_and_softirq() {
        let text = "cpu  100 5 40 9000 30 7 3 11 0 0\ncpu0 50 2 20 4500 15 3 1 5 0 0\n";
        assert_eq!(stat_busy_ticks(text), Some(100 + 5 + 40 + 7 + 3));
        assert_eq!(
            stat_busy_ticks("cpu0 1 2 3 4 5 6 7\n"),
            None,
            "no total row"
        );
        assert_eq!(stat_busy_ticks("cpu  1 2 x 4 5 6 7\n"), None);
        assert_eq!(stat_busy_ticks("cpu  1 2 3 4\n"), None, "too few fields");
    }

    #[test]
    fn this_machine_has_been_busy() {
        let a = machine_busy_ns().expect("/proc/stat");
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        let b = machine_busy_ns().unwrap();
        assert!(b > a && a > 0, "30 ms of spinning counted: {a} then {b}");
    }
}
