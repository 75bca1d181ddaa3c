//! Device models: what a modelled device does with the commands it is given, with the time
//! passed in.
//!
//! A model is a sans-I/O state machine like everything else here. Two adapters put one
//! behind the core's `Driver`: the simulator's `SimDriver` (virtual time, in `mqblk-sim`)
//! and [`RealtimeDriver`] (the wall clock: `mqblk serve --driver=sim`, `mqblk bench
//! --driver=sim`). Either hands it commands with [`DeviceModel::submit`], the engine
//! asks when its next internal event is ([`DeviceModel::next_event`]) and lets time pass with
//! [`DeviceModel::advance`], which reports the commands that finished. Models never see
//! requests, tags or schedulers, only what a real device sees: an opcode, a range, a queue.
//!
//! Each model documents its parameters and where their defaults come from (datasheets, the
//! seeds). Randomness (seek jitter, program-time variation) comes from the [`SimRng`] it was
//! built with, so runs are reproducible.

pub mod emmc;
pub mod hdd;
pub mod media;
pub mod null;
pub mod port;
pub mod profile;
pub mod raid;
pub mod realtime;
pub mod replay;
pub mod rng;
pub mod ssd;
pub mod virtio;
pub mod zoned;

use mqblk_core::{BlkStatus, Nanos, QueueLimits, ReqOp};
pub use null::NullModel;
pub use realtime::RealtimeDriver;
pub use rng::SimRng;

/// One command as the device sees it. `id` is opaque to the model and comes back on
/// completion.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    pub id: u64,
    pub op: ReqOp,
    pub sector: u64,
    pub nr_sectors: u32,
    /// Forced unit access: the write is durable before it completes (no write cache).
    pub fua: bool,
    /// The cgroup of its issuer (the request's `group`; 0 the root): a loop device hands
    /// each group's commands to a worker of its own (`loop_queue_work`).
    pub group: u32,
}

impl Cmd {
    pub fn bytes(&self) -> u64 {
        self.nr_sectors as u64 * 512
    }
}

/// A finished command: its hardware queue, its id, and the outcome.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DevCompletion {
    pub hw: u16,
    pub id: u64,
    pub status: BlkStatus,
}

/// CPU work the *driver* does per command on the submitting CPU, which the engine charges
/// like core work. `hw_lock` says the driver serialises `queue_rq` per hardware queue with a
/// lock of its own (virtio-blk's per-virtqueue lock, the multi-virtqueue virtio-blk series), so two CPUs issuing to the
/// same hardware queue contend.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct DriverCost {
    /// Building and posting one command (`queue_rq`), in ns.
    pub queue_rq_ns: u64,
    /// Ringing the doorbell once per batch (`commit_rqs`, or `last`): an MMIO write, or a
    /// VM exit for a virtqueue kick.
    pub doorbell_ns: u64,
    /// Interrupt entry and completion handling per interrupt, in ns.
    pub irq_ns: u64,
    pub hw_lock: bool,
    /// Extra hand-off delay per CPU waiting on that lock (0: the cost table's `waiter_ns`).
    /// In a VM a spinning vCPU is trapped by pause-loop exiting and rescheduled, so each
    /// waiter costs microseconds, not a cache miss.
    pub lock_waiter_ns: u64,
    /// The CPU that handles the driver's completions.
    pub completions: CompletionCpu,
    /// CPU time per completed command on that CPU beyond the interrupt's, in ns: a loop
    /// device's worker reading the data and completing the request there.
    pub complete_ns: u64,
    /// CPU time to wake a [`CompletionCpu::Worker`] that had nothing to do, on the CPU it
    /// wakes on, in ns (the scheduler's wake-up and context switch).
    pub worker_wake_ns: u64,
}

/// Where a device's completions are handled: the CPU its interrupt entry, the core's
/// completion work and the scheduler's completion hook are charged to.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompletionCpu {
    /// The first CPU mapped to the completing hardware queue: an interrupt vector per
    /// queue, affine to the queue's CPUs (managed interrupts, `blk_mq_map_hw_queues`).
    #[default]
    Mapped,
    /// Always this one (wrapped to the CPUs there are): a single interrupt line whose
    /// effective affinity is one CPU, as measured.
    Cpu(u16),
    /// A worker thread's CPU. A loop device reads and completes in one kworker at a time
    /// (`loop_queue_work` onto the loop's unbound workqueue; `loop_process_work` goes
    /// through its list until it is empty): while the worker has commands it stays where
    /// it runs, unless it shares that CPU with a job and a CPU without one is idle (load
    /// balancing moves it); asleep, the CPU scheduler wakes it on an idle CPU
    /// (`select_idle_sibling`): its previous one, else the queue's, else the first idle
    /// one, else its previous. Only that CPU reaps the device's completions.
    /// Where we differ: the kernel places the worker when `loop_queue_rq` queues the work
    /// and the worker reads the data before it completes the request; the model places
    /// the completion when the device finishes and charges the worker's CPU time there
    /// with the completion ([`DriverCost::complete_ns`]).
    Worker,
}

impl Default for DriverCost {
    fn default() -> DriverCost {
        DriverCost {
            queue_rq_ns: 100,
            doorbell_ns: 50,
            irq_ns: 500,
            hw_lock: false,
            lock_waiter_ns: 0,
            completions: CompletionCpu::Mapped,
            complete_ns: 0,
            worker_wake_ns: 0,
        }
    }
}

/// A simulated storage device.
pub trait DeviceModel: Send {
    /// The model's name as `--device` spells it (`hdd`, `ssd`, ...).
    fn name(&self) -> &'static str;
    fn capacity_sectors(&self) -> u64;
    fn rotational(&self) -> bool;
    /// The device has a volatile write cache a flush writes back (`BLK_FEAT_WRITE_CACHE`);
    /// without one the block layer never sends it flushes.
    fn write_cache(&self) -> bool {
        false
    }
    /// The device honours FUA writes (`BLK_FEAT_FUA`); without it the block layer follows a
    /// FUA write with a flush.
    fn fua(&self) -> bool {
        false
    }
    /// Hardware queues the device exposes (each becomes one hctx).
    fn nr_hw_queues(&self) -> u16;
    /// Commands each hardware queue accepts at once (driver tags per hctx).
    fn queue_depth(&self) -> u32;
    /// Commands the device accepts at once over all its queues (the SCSI host's `can_queue`,
    /// an eMMC host's two slots). The driver refuses `queue_rq` with `DEV_RESOURCE` beyond it.
    fn max_outstanding(&self) -> u32 {
        self.nr_hw_queues() as u32 * self.queue_depth()
    }
    /// The queue limits the device's Linux driver declares (`max_segments`,
    /// `max_segment_size`, `virt_boundary_mask`, `physical_block_size`, ...), which decide
    /// how the block layer splits bios for it. The capacity is filled in from
    /// [`DeviceModel::capacity_sectors`].
    fn queue_limits(&self) -> QueueLimits {
        QueueLimits::default()
    }
    /// Descriptors in each hardware queue's ring, for a virtio-blk disk whose rings lack
    /// indirect descriptors: `virtblk_add_req` adds the request header, one descriptor per
    /// data segment (`blk_rq_map_sg`) and the status byte, so a command holds its segments
    /// plus two while in flight; one that does not fit gets `-ENOSPC`, which
    /// `virtio_queue_rq` turns into `BLK_STS_DEV_RESOURCE` after stopping the queue until
    /// `virtblk_done` frees room. We count a segment per 4 KiB page (a process's buffers
    /// are seldom physically contiguous), as the uring driver's ring model does. `None`: no
    /// such limit.
    fn ring_descriptors(&self) -> Option<u32> {
        None
    }
    /// The driver's per-command CPU costs.
    fn driver_cost(&self) -> DriverCost {
        DriverCost::default()
    }
    /// A command arrives on hardware queue `hw` at `now` (the doorbell has been rung).
    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos);
    /// When the model next has something to do (a command finishing, a seek ending), if
    /// anything is outstanding.
    fn next_event(&self) -> Option<Nanos>;
    /// Lets time pass up to `now`, pushing every command finished by then onto `out`, in
    /// completion order. Called at or after [`DeviceModel::next_event`].
    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>);
    /// Commands accepted and not yet completed.
    fn outstanding(&self) -> u32;
    /// Model counters for reports (seeks, cache hits, busy time), name and value.
    fn stats(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// A zoned device's zones, with null_blk's parameter names (`None`: not zoned); its
    /// [`DeviceModel::queue_limits`] then carry them.
    fn zoned(&self) -> Option<mqblk_core::zoned::ZonedDevConfig> {
        None
    }
    /// A zoned device's report of `nr` zones from the one holding `sector`.
    fn report_zones(&self, _sector: u64, _nr: usize) -> Option<Vec<mqblk_core::zoned::Zone>> {
        None
    }
    /// A write a zoned device refused for not starting at its zone's write pointer, which
    /// the block layer's zone write plugging must never send; taken once.
    fn take_zone_violation(&mut self) -> Option<String> {
        None
    }
}

/// Why a model cannot be built from its spec. Each names the model and the parameter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("device: empty model name")]
    EmptyName,
    #[error("device: unknown model '{0}' (known: null, hdd, ssd, emmc, virtio, raid, zns, smr, profile:FILE.toml)")]
    UnknownModel(String),
    #[error("device {model}: parameter '{param}' is not key=value")]
    NotKeyValue { model: String, param: String },
    #[error("device {model}: unknown parameter '{key}'")]
    UnknownParam { model: String, key: String },
    #[error("device {model}: {key}={value}: not {expected}")]
    BadValue {
        model: String,
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("device {model}: {key}={value}: must be {lo}..={hi}")]
    OutOfRange {
        model: String,
        key: String,
        value: u64,
        lo: u64,
        hi: u64,
    },
    /// A combination of parameters the model cannot have (the message names them).
    #[error("{0}")]
    Invalid(String),
}

/// How to build a model: its name and `key=value` parameters, as `--device hdd,rpm=5400`.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    pub model: String,
    pub params: Vec<(String, String)>,
}

impl DeviceSpec {
    /// Parses `NAME[,key=value...]`.
    pub fn parse(s: &str) -> Result<DeviceSpec, ModelError> {
        let mut parts = s.split(',');
        let model = parts.next().unwrap_or("").trim().to_string();
        if model.is_empty() {
            return Err(ModelError::EmptyName);
        }
        let mut params = Vec::new();
        for p in parts {
            let (k, v) = p.split_once('=').ok_or_else(|| ModelError::NotKeyValue {
                model: model.clone(),
                param: p.to_string(),
            })?;
            params.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(DeviceSpec { model, params })
    }
}

/// Reads typed parameters out of a [`DeviceSpec`], refusing unknown keys and bad values.
pub struct Params<'a> {
    model: &'a str,
    params: &'a [(String, String)],
    used: Vec<bool>,
    /// Every integer parameter the model read, with the value it got (given or default).
    read: Vec<(String, u64)>,
}

impl<'a> Params<'a> {
    pub fn new(spec: &'a DeviceSpec) -> Params<'a> {
        Params {
            model: &spec.model,
            params: &spec.params,
            used: vec![false; spec.params.len()],
            read: Vec::new(),
        }
    }

    fn raw(&mut self, key: &str) -> Option<&'a str> {
        let i = self.params.iter().position(|(k, _)| k == key)?;
        self.used[i] = true;
        Some(self.params[i].1.as_str())
    }

    /// An unsigned integer parameter (plain number; `k`/`m`/`g` suffixes are powers of 1024).
    fn bad(&self, key: &str, value: &str, expected: &'static str) -> ModelError {
        ModelError::BadValue {
            model: self.model.to_string(),
            key: key.to_string(),
            value: value.to_string(),
            expected,
        }
    }

    /// An unsigned integer parameter (plain number; `k`/`m`/`g` suffixes are powers of 1024).
    pub fn u64(&mut self, key: &str, default: u64) -> Result<u64, ModelError> {
        let value = match self.raw(key) {
            None => default,
            Some(v) => parse_u64(v).ok_or_else(|| self.bad(key, v, "a non-negative integer"))?,
        };
        self.read.push((key.to_string(), value));
        Ok(value)
    }

    /// An unsigned integer parameter that may be absent (absence means something of its own).
    pub fn opt_u64(&mut self, key: &str) -> Result<Option<u64>, ModelError> {
        match self.raw(key) {
            None => Ok(None),
            Some(_) => self.u64(key, 0).map(Some),
        }
    }

    pub fn f64(&mut self, key: &str, default: f64) -> Result<f64, ModelError> {
        match self.raw(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| self.bad(key, v, "a non-negative number")),
        }
    }

    pub fn bool(&mut self, key: &str, default: bool) -> Result<bool, ModelError> {
        match self.raw(key) {
            None => Ok(default),
            Some("1" | "true" | "on" | "yes") => Ok(true),
            Some("0" | "false" | "off" | "no") => Ok(false),
            Some(v) => Err(self.bad(key, v, "a boolean")),
        }
    }

    /// An integer parameter within `lo..=hi`.
    pub fn ranged(&mut self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, ModelError> {
        let value = self.u64(key, default)?;
        if !(lo..=hi).contains(&value) {
            return Err(ModelError::OutOfRange {
                model: self.model.to_string(),
                key: key.to_string(),
                value,
                lo,
                hi,
            });
        }
        Ok(value)
    }

    /// Call last: refuses any parameter the model did not ask for.
    pub fn finish(self) -> Result<(), ModelError> {
        match self.used.iter().position(|u| !u) {
            Some(i) => Err(ModelError::UnknownParam {
                model: self.model.to_string(),
                key: self.params[i].0.clone(),
            }),
            None => Ok(()),
        }
    }
}

fn parse_u64(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1u64 << 10),
        'm' | 'M' => (&v[..v.len() - 1], 1 << 20),
        'g' | 'G' => (&v[..v.len() - 1], 1 << 30),
        't' | 'T' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// The names `build` accepts.
pub const MODELS: &[&str] = &["null", "hdd", "ssd", "emmc", "virtio", "raid", "zns", "smr"];

/// Builds a model from its spec, with `rng` for its random choices.
pub fn build(spec: &DeviceSpec, rng: SimRng) -> Result<Box<dyn DeviceModel>, ModelError> {
    build_reading(spec, rng).map(|(m, _)| m)
}

/// Whether a parameter is a physical constant of the model (a time, a rate, a speed) rather
/// than part of the configuration being compared (queue counts, depths, sizes, switches):
/// the ones `mqblk scenario --sensitivity` varies. Told by the unit its name carries.
pub fn is_physical(key: &str) -> bool {
    key == "rpm"
        || ["_us", "_ns", "_nsec", "_mbs", "_ns_per_kb"]
            .iter()
            .any(|u| key.ends_with(u))
}

/// The physical parameters (see [`is_physical`]) a model built from `spec` reads, with the
/// values it gets: those given in the spec, the defaults for the rest.
pub fn physical_params(spec: &DeviceSpec) -> Result<Vec<(String, u64)>, ModelError> {
    let (_, read) = build_reading(spec, SimRng::new(0))?;
    Ok(read.into_iter().filter(|(k, _)| is_physical(k)).collect())
}

/// A built model and the integer parameters it read, with their values.
type BuiltAndRead = (Box<dyn DeviceModel>, Vec<(String, u64)>);

fn build_reading(spec: &DeviceSpec, rng: SimRng) -> Result<BuiltAndRead, ModelError> {
    let mut p = Params::new(spec);
    if let Some(path) = spec.model.strip_prefix("profile:") {
        // A profile holds all its figures: no parameters beside it.
        let m = Box::new(profile::FittedModel::from_path(path, rng)?);
        p.finish()?;
        return Ok((m, Vec::new()));
    }
    let model: Box<dyn DeviceModel> = match spec.model.as_str() {
        "null" => Box::new(NullModel::from_params(&mut p, rng)?),
        "hdd" => Box::new(hdd::HddModel::from_params(&mut p, rng)?),
        "ssd" => Box::new(ssd::SsdModel::from_params(&mut p, rng)?),
        "emmc" => Box::new(emmc::EmmcModel::from_params(&mut p, rng)?),
        "virtio" => Box::new(virtio::VirtioModel::from_params(&mut p, rng)?),
        "raid" => Box::new(raid::RaidModel::from_params(&mut p, rng)?),
        "zns" => Box::new(zoned::zns(&mut p, rng)?),
        "smr" => Box::new(zoned::smr(&mut p, rng)?),
        other => return Err(ModelError::UnknownModel(other.to_string())),
    };
    let read = std::mem::take(&mut p.read);
    p.finish()?;
    Ok((model, read))
}
