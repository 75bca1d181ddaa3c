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
pub mod null;
pub mod raid;
pub mod realtime;
pub mod rng;
pub mod ssd;
pub mod virtio;

use mqblk_core::{BlkStatus, Nanos, ReqOp};
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
/// lock of its own (virtio-blk's per-virtqueue lock, seed 003), so two CPUs issuing to the
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
}

impl Default for DriverCost {
    fn default() -> DriverCost {
        DriverCost {
            queue_rq_ns: 100,
            doorbell_ns: 50,
            irq_ns: 500,
            hw_lock: false,
            lock_waiter_ns: 0,
        }
    }
}

/// A simulated storage device.
pub trait DeviceModel: Send {
    /// The model's name as `--device` spells it (`hdd`, `ssd`, ...).
    fn name(&self) -> &'static str;
    fn capacity_sectors(&self) -> u64;
    fn rotational(&self) -> bool;
    /// Hardware queues the device exposes (each becomes one hctx).
    fn nr_hw_queues(&self) -> u16;
    /// Commands each hardware queue accepts at once (driver tags per hctx).
    fn queue_depth(&self) -> u32;
    /// Commands the device accepts at once over all its queues (the SCSI host's `can_queue`,
    /// an eMMC host's two slots). The driver refuses `queue_rq` with `DEV_RESOURCE` beyond it.
    fn max_outstanding(&self) -> u32 {
        self.nr_hw_queues() as u32 * self.queue_depth()
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
}

/// How to build a model: its name and `key=value` parameters, as `--device hdd,rpm=5400`.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    pub model: String,
    pub params: Vec<(String, String)>,
}

impl DeviceSpec {
    /// Parses `NAME[,key=value...]`.
    pub fn parse(s: &str) -> Result<DeviceSpec, String> {
        let mut parts = s.split(',');
        let model = parts.next().unwrap_or("").trim().to_string();
        if model.is_empty() {
            return Err("device: empty model name".into());
        }
        let mut params = Vec::new();
        for p in parts {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("device {model}: parameter '{p}' is not key=value"))?;
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
}

impl<'a> Params<'a> {
    pub fn new(spec: &'a DeviceSpec) -> Params<'a> {
        Params {
            model: &spec.model,
            params: &spec.params,
            used: vec![false; spec.params.len()],
        }
    }

    fn raw(&mut self, key: &str) -> Option<&'a str> {
        let i = self.params.iter().position(|(k, _)| k == key)?;
        self.used[i] = true;
        Some(self.params[i].1.as_str())
    }

    /// An unsigned integer parameter (plain number; `k`/`m`/`g` suffixes are powers of 1024).
    pub fn u64(&mut self, key: &str, default: u64) -> Result<u64, String> {
        match self.raw(key) {
            None => Ok(default),
            Some(v) => parse_u64(v).ok_or_else(|| {
                format!(
                    "device {}: {key}={v}: not a non-negative integer",
                    self.model
                )
            }),
        }
    }

    pub fn f64(&mut self, key: &str, default: f64) -> Result<f64, String> {
        match self.raw(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    format!(
                        "device {}: {key}={v}: not a non-negative number",
                        self.model
                    )
                }),
        }
    }

    pub fn bool(&mut self, key: &str, default: bool) -> Result<bool, String> {
        match self.raw(key) {
            None => Ok(default),
            Some("1" | "true" | "on" | "yes") => Ok(true),
            Some("0" | "false" | "off" | "no") => Ok(false),
            Some(v) => Err(format!("device {}: {key}={v}: not a boolean", self.model)),
        }
    }

    /// Call last: refuses any parameter the model did not ask for.
    pub fn finish(self) -> Result<(), String> {
        match self.used.iter().position(|u| !u) {
            Some(i) => Err(format!(
                "device {}: unknown parameter '{}'",
                self.model, self.params[i].0
            )),
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
pub const MODELS: &[&str] = &["null", "hdd", "ssd", "emmc", "virtio", "raid"];

/// Builds a model from its spec, with `rng` for its random choices.
pub fn build(spec: &DeviceSpec, rng: SimRng) -> Result<Box<dyn DeviceModel>, String> {
    let mut p = Params::new(spec);
    let model: Box<dyn DeviceModel> = match spec.model.as_str() {
        "null" => Box::new(NullModel::from_params(&mut p, rng)?),
        "hdd" => Box::new(hdd::HddModel::from_params(&mut p, rng)?),
        "ssd" => Box::new(ssd::SsdModel::from_params(&mut p, rng)?),
        "emmc" => Box::new(emmc::EmmcModel::from_params(&mut p, rng)?),
        "virtio" => Box::new(virtio::VirtioModel::from_params(&mut p, rng)?),
        "raid" => Box::new(raid::RaidModel::from_params(&mut p, rng)?),
        other => {
            return Err(format!(
                "device: unknown model '{other}' (known: {})",
                MODELS.join(", ")
            ))
        }
    };
    p.finish()?;
    Ok(model)
}
