//! The machine's CPUs: how logical CPUs sit in cores, last-level caches (LLCs) and sockets,
//! and what moving a cache line from one to another costs.
//!
//! Without a topology every CPU is as far from every other as the cost table's `line_ns`
//! says. With one, a lock or counter line last touched on CPU `a` costs CPU `b` the
//! measured one-way transfer between them: next to nothing between SMT siblings, tens of ns
//! within an LLC, more across LLCs of one socket and most across sockets. That is what
//! makes dispatching from many CPUs through one scheduler lock cost on a large machine what
//! it costs there (a spinlock hand-off moves the lock's line to the next holder).
//!
//! Logical CPUs are numbered as Linux numbers them on the machines measured: first thread
//! of every core, socket 0's cores first, then the second threads in the same order (CPU
//! `c`'s core is `c % cores`, its sibling `c + cores`).
//!
//! The presets' figures are measured core-to-core latencies, never fitted to a result:
//! nviennot/core-to-core-latency's tables (two threads pinned to two CPUs bounce one line
//! with compare-and-exchange; a round trip halved), the median over every pair of CPUs in
//! each class.

use serde::{Deserialize, Serialize};

/// A machine's CPU layout and its cache-line transfer costs (one way, ns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// The preset it was made from (`custom` for none).
    pub name: String,
    pub sockets: u16,
    pub llcs_per_socket: u16,
    pub cores_per_llc: u16,
    pub threads_per_core: u16,
    /// Between the hardware threads of one core (they share its L1 and L2).
    pub smt_ns: u64,
    /// Between cores sharing a last-level cache.
    pub llc_ns: u64,
    /// Between cores of one socket under different last-level caches.
    pub socket_ns: u64,
    /// Between sockets.
    pub remote_ns: u64,
    /// Where the figures come from.
    pub source: String,
}

/// A `--topology` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("--topology={0}: unknown machine (known: {known})", known = Topology::PRESETS.join(", "))]
    Unknown(String),
    #[error("--topology {spec}: '{item}' is not key=value")]
    NotAssignment { spec: String, item: String },
    #[error("--topology {spec}: unknown key '{key}' (known: {known})", known = Topology::KEYS.join(", "))]
    UnknownKey { spec: String, key: String },
    #[error("--topology {spec}: {key}='{value}' is not a whole number")]
    NotNumber {
        spec: String,
        key: String,
        value: String,
    },
    #[error("--topology {spec}: {key} must be 1..=1024")]
    OutOfRange { spec: String, key: String },
    #[error("--topology {spec}: {cpus} CPUs is more than the simulator's 1024")]
    TooManyCpus { spec: String, cpus: u32 },
}

impl Topology {
    /// The machines `--topology` knows by name.
    pub const PRESETS: &'static [&'static str] = &["xeon-gold-6242-2s", "epyc-7773x"];
    /// The keys a spec may set after the machine's name.
    pub const KEYS: &'static [&'static str] = &[
        "sockets",
        "llcs_per_socket",
        "cores_per_llc",
        "threads_per_core",
        "smt_ns",
        "llc_ns",
        "socket_ns",
        "remote_ns",
    ];

    /// A machine by name.
    pub fn preset(name: &str) -> Option<Topology> {
        Some(match name {
            // A 2019 two-socket server with 64 logical CPUs: 2 x 16 Cascade Lake cores, one
            // LLC (the mesh's L3) per socket, 2 threads a core.
            "xeon-gold-6242-2s" => Topology {
                name: name.into(),
                sockets: 2,
                llcs_per_socket: 1,
                cores_per_llc: 16,
                threads_per_core: 2,
                smt_ns: 7,
                llc_ns: 48,
                socket_ns: 48,
                remote_ns: 141,
                source: "nviennot/core-to-core-latency, results/Dual Intel(R) Xeon Gold 6242 \
                         @ 2.8GHz.csv: medians over CPU pairs, SMT siblings 7.4 ns (32 \
                         pairs), one socket 48.0 ns (960), across sockets 141.4 ns (1024)"
                    .into(),
            },
            // One socket of 64 Zen 3 cores in 8 CCXs of 8 cores, each CCX its own L3.
            "epyc-7773x" => Topology {
                name: name.into(),
                sockets: 1,
                llcs_per_socket: 8,
                cores_per_llc: 8,
                threads_per_core: 2,
                smt_ns: 10,
                llc_ns: 26,
                socket_ns: 117,
                remote_ns: 117,
                source: "nviennot/core-to-core-latency, results/AMD EPYC 7773X.csv: medians \
                         over CPU pairs, SMT siblings 10.1 ns (64 pairs), one CCX 26.1 ns \
                         (896), across CCXs 116.6 ns (7168)"
                    .into(),
            },
            _ => return None,
        })
    }

    /// `NAME[,key=value...]`: a preset, its figures or shape overridden, or `custom,...`
    /// from scratch (every count 1 and every cost 0 until set).
    pub fn parse(spec: &str) -> Result<Topology, TopologyError> {
        let mut items = spec.split(',').map(str::trim);
        let name = items.next().unwrap_or_default();
        let mut t = match name {
            "custom" => Topology {
                name: "custom".into(),
                sockets: 1,
                llcs_per_socket: 1,
                cores_per_llc: 1,
                threads_per_core: 1,
                smt_ns: 0,
                llc_ns: 0,
                socket_ns: 0,
                remote_ns: 0,
                source: "given on the command line".into(),
            },
            _ => Topology::preset(name).ok_or_else(|| TopologyError::Unknown(spec.into()))?,
        };
        let mut changed = false;
        for item in items.filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| TopologyError::NotAssignment {
                    spec: spec.into(),
                    item: item.into(),
                })?;
            let (k, v) = (k.trim(), v.trim());
            let n: u64 = v.parse().map_err(|_| TopologyError::NotNumber {
                spec: spec.into(),
                key: k.into(),
                value: v.into(),
            })?;
            let count = |n: u64| -> Result<u16, TopologyError> {
                if (1..=1024).contains(&n) {
                    Ok(n as u16)
                } else {
                    Err(TopologyError::OutOfRange {
                        spec: spec.into(),
                        key: k.into(),
                    })
                }
            };
            match k {
                "sockets" => t.sockets = count(n)?,
                "llcs_per_socket" => t.llcs_per_socket = count(n)?,
                "cores_per_llc" => t.cores_per_llc = count(n)?,
                "threads_per_core" => t.threads_per_core = count(n)?,
                "smt_ns" => t.smt_ns = n,
                "llc_ns" => t.llc_ns = n,
                "socket_ns" => t.socket_ns = n,
                "remote_ns" => t.remote_ns = n,
                _ => {
                    return Err(TopologyError::UnknownKey {
                        spec: spec.into(),
                        key: k.into(),
                    })
                }
            }
            changed = true;
        }
        if changed && name != "custom" {
            t.source = format!("{} (changed on the command line)", t.source);
        }
        if t.cpus() > 1024 {
            return Err(TopologyError::TooManyCpus {
                spec: spec.into(),
                cpus: t.cpus(),
            });
        }
        Ok(t)
    }

    /// Physical cores.
    pub fn cores(&self) -> u32 {
        self.sockets as u32 * self.llcs_per_socket as u32 * self.cores_per_llc as u32
    }

    /// Logical CPUs.
    pub fn cpus(&self) -> u32 {
        self.cores() * self.threads_per_core as u32
    }

    /// Where logical CPU `c` sits: (socket, LLC, core), each numbered machine-wide.
    pub fn place(&self, c: u16) -> (u32, u32, u32) {
        let core = c as u32 % self.cores();
        let llc = core / self.cores_per_llc as u32;
        (llc / self.llcs_per_socket as u32, llc, core)
    }

    /// The CPUs in the order busy tasks are placed on them: a physical core each before
    /// any core's second thread, alternating sockets and then LLCs. Our assumption of where
    /// a load balancer leaves a few busy tasks on an idle machine, not a model of Linux's
    /// scheduler (which also weighs wake-up affinity and NUMA memory placement).
    pub fn spread_order(&self) -> Vec<u16> {
        let (sockets, llcs, cores) = (
            self.sockets as u32,
            self.llcs_per_socket as u32,
            self.cores_per_llc as u32,
        );
        let mut order = Vec::with_capacity(self.cpus() as usize);
        for thread in 0..self.threads_per_core as u32 {
            for core in 0..cores {
                for llc in 0..llcs {
                    for socket in 0..sockets {
                        let physical = (socket * llcs + llc) * cores + core;
                        order.push((thread * self.cores() + physical) as u16);
                    }
                }
            }
        }
        order
    }

    /// What moving a cache line last written on CPU `from` costs CPU `to`, in ns.
    pub fn line_ns(&self, from: u16, to: u16) -> u64 {
        if from == to {
            return 0;
        }
        let (a, b) = (self.place(from), self.place(to));
        if a.2 == b.2 {
            self.smt_ns
        } else if a.1 == b.1 {
            self.llc_ns
        } else if a.0 == b.0 {
            self.socket_ns
        } else {
            self.remote_ns
        }
    }

    /// One line for run summaries.
    pub fn describe(&self) -> String {
        format!(
            "{}: {} socket(s) x {} LLC(s) x {} cores x {} threads = {} CPUs; a line moves in \
             {} ns (SMT), {} (LLC), {} (socket), {} (across sockets)",
            self.name,
            self.sockets,
            self.llcs_per_socket,
            self.cores_per_llc,
            self.threads_per_core,
            self.cpus(),
            self.smt_ns,
            self.llc_ns,
            self.socket_ns,
            self.remote_ns
        )
    }
}

/// What a cache line's move costs between two CPUs: the cost table's one figure for every
/// pair (`line_ns`), or a machine's topology.
#[derive(Clone, Copy, Debug)]
pub enum LineCost<'a> {
    Flat(u64),
    Machine(&'a Topology),
}

impl LineCost<'_> {
    #[inline]
    pub fn between(self, from: u16, to: u16) -> u64 {
        match self {
            LineCost::Flat(_) if from == to => 0,
            LineCost::Flat(ns) => ns,
            LineCost::Machine(t) => t.line_ns(from, to),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_placed_as_linux_numbers_them_and_distance_sets_the_cost() {
        let t = Topology::preset("xeon-gold-6242-2s").unwrap();
        assert_eq!(t.cpus(), 64);
        // CPU 0 and 32 are one core's two threads; 0..15 socket 0, 16..31 socket 1.
        assert_eq!(t.line_ns(0, 32), 7);
        assert_eq!(t.line_ns(0, 15), 48);
        assert_eq!(t.line_ns(0, 16), 141);
        assert_eq!(t.line_ns(47, 31), 141);
        assert_eq!(t.line_ns(5, 5), 0);
        let e = Topology::preset("epyc-7773x").unwrap();
        assert_eq!(e.cpus(), 128);
        assert_eq!(e.line_ns(0, 7), 26);
        assert_eq!(e.line_ns(0, 8), 117);
        assert_eq!(e.line_ns(3, 67), 10);
        // Busy tasks fill a core each, alternating sockets (and LLCs), before second threads.
        assert_eq!(&t.spread_order()[..4], &[0, 16, 1, 17]);
        assert_eq!(t.spread_order()[32], 32);
        assert_eq!(&e.spread_order()[..3], &[0, 8, 16]);
        let mut all = e.spread_order();
        all.sort_unstable();
        assert_eq!(all, (0..128).collect::<Vec<u16>>());
        assert_eq!(LineCost::Flat(100).between(1, 2), 100);
        assert_eq!(LineCost::Flat(100).between(2, 2), 0);
    }

    #[test]
    fn specs_set_or_override_and_bad_ones_name_what_is_wrong() {
        let t = Topology::parse("xeon-gold-6242-2s,remote_ns=200").unwrap();
        assert_eq!(t.line_ns(0, 16), 200);
        assert!(t.source.contains("changed"));
        let c = Topology::parse(
            "custom,sockets=4,cores_per_llc=8,llc_ns=30,socket_ns=30,remote_ns=180",
        )
        .unwrap();
        assert_eq!((c.cpus(), c.line_ns(0, 7), c.line_ns(0, 8)), (32, 30, 180));
        for (bad, says) in [
            ("vax", "unknown machine"),
            ("custom,sockets", "not key=value"),
            ("custom,cores=4", "unknown key 'cores'"),
            ("custom,smt_ns=fast", "not a whole number"),
            ("custom,sockets=0", "sockets must be 1..=1024"),
            (
                "custom,sockets=64,cores_per_llc=32",
                "more than the simulator's 1024",
            ),
        ] {
            let e = Topology::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
