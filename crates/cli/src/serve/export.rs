//! An export's settings: [`ExportOptions`], read by clap from `mqblk serve`'s flags and by
//! serde from a config file's `[export.NAME]` tables, and the [`ExportCfg`] they describe,
//! whose device is a [`DeviceConfig`] as every other front end's.

use crate::CliError;
use mqblk_device::{DeviceConfig, DriverConfig, ModelConfig, QueueSettings};
use mqblk_drivers::{NullConfig, UringConfig};
use std::path::PathBuf;

/// What backs an export (`--driver`, `driver = "..."`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportDriver {
    /// The null driver keeping what is written in memory.
    #[default]
    Memory,
    /// The null driver: writes vanish, reads return zeroes.
    Null,
    /// A file or block device through io_uring (`filename`).
    Uring,
    /// A simulator device model running in real time (`device`): its timing, no data.
    Sim,
}

/// A size in bytes: a number, or text with fio's suffixes (`16m`, `1g`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        mqblk_workload::parse_size(s)
            .map(Size)
            .ok_or_else(|| format!("'{s}' is not a size (e.g. 64m, 1g)"))
    }
}

impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bytes(n) => Ok(Size(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A config file's `sched = { NAME = VALUE, ... }` table as tunables (`16m` and `16` alike,
/// `true` as `1`).
fn tunable_table<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, String)>, D::Error> {
    let table: toml::Table = serde::Deserialize::deserialize(d)?;
    Ok(table
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                toml::Value::String(s) => s,
                toml::Value::Boolean(b) => if b { "1" } else { "0" }.into(),
                other => other.to_string(),
            };
            (k, v)
        })
        .collect())
}

/// One export's options: `mqblk serve`'s flags and a config file's `[export.NAME]` keys are
/// this one struct (the flags' names without their dashes are the keys).
#[derive(clap::Args, serde::Deserialize, Clone, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ExportOptions {
    /// Export description
    #[arg(long)]
    pub description: Option<String>,
    /// memory (data kept in RAM; the default), null (reads zeroes, writes dropped), uring
    /// (--filename), sim (a device model in real time, --device; timing only, no data)
    #[arg(long, value_enum)]
    pub driver: Option<ExportDriver>,
    /// The device model for --driver=sim (hdd, ssd,... with parameters; default hdd)
    #[arg(long)]
    pub device: Option<String>,
    /// File or block device for --driver=uring
    #[arg(long)]
    pub filename: Option<String>,
    /// Export size (memory/null, default 1g; creates or extends a --filename file)
    #[arg(long)]
    pub size: Option<Size>,
    /// Scheduler: none, mq-deadline, kyber, bfq (or an alias; default: the kernel's for the
    /// device)
    #[arg(long, alias = "scheduler")]
    #[serde(alias = "scheduler")]
    pub ioscheduler: Option<String>,
    /// A scheduler tunable, written --sched.NAME=VALUE (repeatable)
    #[arg(long = "sched", value_name = "NAME=VALUE", value_parser = crate::args::tunable_pair)]
    #[serde(rename = "sched", default, deserialize_with = "tunable_table")]
    pub tunables: Vec<(String, String)>,
    /// Hardware queues (default 1, or --num-queues over vhost-user-blk)
    #[arg(long)]
    pub hw_queues: Option<u16>,
    /// Tags per hardware queue (default 128)
    #[arg(long)]
    pub queue_depth: Option<u32>,
    /// Refuse writes (EPERM)
    #[arg(long)]
    #[serde(default)]
    pub read_only: bool,
    /// Sessions at once, per export (default 16); a client past them is refused in its
    /// handshake with an NBD error (NBD_REP_ERR_POLICY) and may try again
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Serve the export to a virtual machine as a vhost-user-blk device on this Unix socket
    /// (QEMU: -chardev socket,path=SOCKET -device vhost-user-blk-pci) instead of over NBD
    #[arg(long, value_name = "SOCKET", conflicts_with = "listen")]
    pub vhost_user_blk: Option<PathBuf>,
    /// With --vhost-user-blk: virtqueues offered to the guest, each served by its own thread
    /// and software queue (default 1; --hw-queues defaults to the same number)
    #[arg(long, requires = "vhost_user_blk")]
    pub num_queues: Option<u16>,
    /// With --vhost-user-blk: threads serving the virtqueues, virtqueue i on thread i mod N
    /// (default: one per virtqueue; 1 is QEMU's dataplane, one I/O thread for them all)
    #[arg(long, requires = "vhost_user_blk")]
    pub vq_threads: Option<u16>,
    /// With --vhost-user-blk: return each virtqueue's requests to the guest in the order it
    /// made them available (VIRTIO_F_IN_ORDER's rule), so that a server killed and started
    /// again takes up what was in flight: QEMU resumes the ring from its used index
    #[arg(long, requires = "vhost_user_blk")]
    #[serde(default)]
    pub in_order: bool,
    /// A host-managed zoned device (memory and null drivers; null_blk's zoned mode): over
    /// vhost-user-blk the guest sees it zoned (VIRTIO_BLK_F_ZONED)
    #[arg(long)]
    #[serde(default)]
    pub zoned: bool,
    /// With --zoned: zone size, a power of two (null_blk's zone_size; default 256m)
    #[arg(long, requires = "zoned")]
    pub zone_size: Option<Size>,
    /// With --zoned: writable bytes of each zone (zone_capacity; default the zone size)
    #[arg(long, requires = "zoned")]
    pub zone_capacity: Option<Size>,
    /// With --zoned: conventional zones at the start (zone_nr_conv; default 0)
    #[arg(long, requires = "zoned")]
    pub zone_nr_conv: Option<u32>,
    /// With --zoned: zones open at once, 0 for no limit (zone_max_open; default 0)
    #[arg(long, requires = "zoned")]
    pub zone_max_open: Option<u32>,
    /// With --zoned: zones open or closed at once, 0 for no limit (zone_max_active)
    #[arg(long, requires = "zoned")]
    pub zone_max_active: Option<u32>,
}

/// One export: how it is offered and the device behind it.
#[derive(Clone, Debug)]
pub struct ExportCfg {
    pub name: String,
    pub description: String,
    pub read_only: bool,
    pub max_conns: usize,
    /// Served over vhost-user-blk on this socket instead of NBD.
    pub vhost: Option<PathBuf>,
    pub num_queues: u16,
    /// `None`: one thread per virtqueue.
    pub vq_threads: Option<u16>,
    /// Requests go back to the guest in the order it made them available.
    pub in_order: bool,
    pub device: DeviceConfig,
}

impl ExportCfg {
    /// The export `o` describes under `name`; a refusal is one line naming the export and
    /// the option.
    pub fn new(name: &str, o: &ExportOptions) -> Result<ExportCfg, CliError> {
        let bad = |m: String| format!("export '{}': {m}", short(name));
        if name.len() > 4096 {
            return Err(bad("names are at most 4096 bytes".into()).into());
        }
        let max_conns = o.max_connections.unwrap_or(16);
        if !(1..=1024).contains(&max_conns) {
            return Err(bad(format!("max-connections={max_conns} must be 1..=1024")).into());
        }
        let num_queues = o.num_queues.unwrap_or(1);
        if !(1..=64).contains(&num_queues) {
            return Err(bad(format!("num-queues={num_queues} must be 1..=64")).into());
        }
        let driver = o.driver.unwrap_or_default();
        if o.filename.is_some() && driver != ExportDriver::Uring {
            return Err(bad("filename applies only to the uring driver".into()).into());
        }
        if o.device.is_some() && driver != ExportDriver::Sim {
            return Err(bad("device applies only to the sim driver".into()).into());
        }
        let vhost = o.vhost_user_blk.clone();
        let nr_hw_queues = o
            .hw_queues
            .unwrap_or(if vhost.is_some() { num_queues } else { 1 });
        let queue_depth = o.queue_depth.unwrap_or(128);
        let size = o.size.map(|s| s.0);
        let zoned_set = o.zone_size.is_some()
            || o.zone_capacity.is_some()
            || o.zone_nr_conv.is_some()
            || o.zone_max_open.is_some()
            || o.zone_max_active.is_some();
        if zoned_set && !o.zoned {
            return Err(bad("zone-* options need zoned".into()).into());
        }
        if o.zoned && o.vhost_user_blk.is_none() {
            return Err(bad(
                "zoned needs vhost-user-blk (NBD has no zone commands to offer)".into(),
            )
            .into());
        }
        if o.zoned && !matches!(driver, ExportDriver::Memory | ExportDriver::Null) {
            return Err(bad("zoned applies to the memory and null drivers".into()).into());
        }
        let dflt = mqblk_core::ZonedDevConfig::default();
        let zone = mqblk_core::ZonedDevConfig {
            zone_sectors: o.zone_size.map_or(dflt.zone_sectors, |s| s.0 >> 9),
            zone_capacity: o.zone_capacity.map_or(0, |s| s.0 >> 9),
            nr_conv: o.zone_nr_conv.unwrap_or(0),
            max_open: o.zone_max_open.unwrap_or(0),
            max_active: o.zone_max_active.unwrap_or(0),
            ..dflt
        };
        let driver = match driver {
            ExportDriver::Memory | ExportDriver::Null => {
                let cfg = NullConfig {
                    submit_queues: nr_hw_queues,
                    hw_queue_depth: queue_depth,
                    memory_backed: driver == ExportDriver::Memory,
                    size_bytes: size.unwrap_or(1 << 30),
                    zoned: o.zoned,
                    zone,
                    ..NullConfig::default()
                };
                // null_blk's own checks (`null_init_zoned_dev`): one line naming the flag.
                if let Some(Err(e)) = cfg.zoned_dev() {
                    return Err(bad(e.to_string()).into());
                }
                DriverConfig::Null(cfg)
            }
            ExportDriver::Uring => DriverConfig::Uring(UringConfig {
                path: o
                    .filename
                    .as_ref()
                    .ok_or_else(|| bad("--driver=uring needs --filename=PATH".into()))?
                    .into(),
                nr_hw_queues,
                queue_depth,
                direct: true,
                size_bytes: size,
                ..UringConfig::default()
            }),
            ExportDriver::Sim => DriverConfig::Model(ModelConfig {
                spec: mqblk_models::DeviceSpec::parse(o.device.as_deref().unwrap_or("hdd"))
                    .map_err(|e| bad(e.to_string()))?,
                faults: Default::default(),
            }),
        };
        let sessions = if vhost.is_some() {
            num_queues as usize
        } else {
            max_conns
        };
        let device = DeviceConfig {
            queue: QueueSettings {
                scheduler: o.ioscheduler.clone(),
                sched_tunables: o.tunables.clone(),
                // NBD clients send up to 32 MiB in one request.
                max_sectors_kb: 32 * 1024,
                ..QueueSettings::default()
            },
            // One software queue per connection or virtqueue, and one for the server's
            // own final flush.
            nr_ctx: sessions as u16 + 1,
            ..DeviceConfig::new(driver)
        };
        Ok(ExportCfg {
            name: name.to_string(),
            description: o.description.clone().unwrap_or_default(),
            read_only: o.read_only,
            max_conns,
            vhost,
            num_queues,
            vq_threads: o.vq_threads,
            in_order: o.in_order,
            device,
        })
    }

    /// Submitters the export's queue serves: its NBD sessions or its virtqueues.
    pub fn sessions(&self) -> usize {
        if self.vhost.is_some() {
            self.num_queues as usize
        } else {
            self.max_conns
        }
    }

    /// Builds the export's device.
    pub fn build(
        &self,
        tracer: Option<std::sync::Arc<dyn mqblk_core::Tracer>>,
    ) -> Result<std::sync::Arc<mqblk_core::RequestQueue>, CliError> {
        let dev = mqblk_device::build_traced(&self.device, self.sessions() + 1, tracer).map_err(
            |source| CliError::Export {
                export: self.name.clone(),
                source,
            },
        )?;
        Ok(dev.queue)
    }
}

/// A name as an error shows it: at most 16 characters, then an ellipsis.
fn short(name: &str) -> String {
    match name.char_indices().nth(16) {
        Some((i, _)) => format!("{}…", &name[..i]),
        None => name.to_string(),
    }
}

/// A config file's exports and its `[server]` settings; a flag given on the command line
/// wins over the file's value.
pub struct Config {
    pub exports: Vec<ExportCfg>,
    pub listen: Vec<String>,
    pub stats: Option<PathBuf>,
    pub admin: Option<PathBuf>,
    pub tls: super::TlsCfg,
}

/// A config file in TOML: `[server]` with `listen` (a list), `stats`, `admin` and the TLS
/// keys, and one `[export.NAME]` table of [`ExportOptions`] per export (`sched = {
/// fifo_batch = 8 }` for tunables).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    server: ServerTable,
    #[serde(default)]
    export: std::collections::BTreeMap<String, ExportOptions>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ServerTable {
    #[serde(default)]
    listen: Vec<String>,
    stats: Option<PathBuf>,
    admin: Option<PathBuf>,
    tls: Option<String>,
    tls_certificates: Option<PathBuf>,
    #[serde(default)]
    tls_verify_peer: bool,
}

/// Reads a config file: exports and `[server]` settings (listen addresses, stats file,
/// control socket, TLS).
pub fn read_config(path: &std::path::Path) -> Result<Config, CliError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--config={shown}: {e}"))?;
    if text
        .lines()
        .any(|l| l.trim_start().starts_with("[export ") || l.trim_start().starts_with("[export\t"))
    {
        return Err(format!(
            "{shown}: [export NAME] is the INI syntax mqblk no longer reads; write [export.NAME] tables in TOML (mqblk serve --help)"
        ).into());
    }
    let file: ConfigFile = toml::from_str(&text).map_err(|e| {
        let line = e.span().map_or(0, |s| {
            text[..s.start.min(text.len())].matches('\n').count() + 1
        });
        format!(
            "{shown}:{line}: {}",
            e.message().trim_end().replace('\n', "; ")
        )
    })?;
    let exports = file
        .export
        .iter()
        .map(|(name, o)| ExportCfg::new(name, o).map_err(|e| format!("{shown}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if exports.is_empty() {
        return Err(format!("--config={shown}: no [export.NAME] table").into());
    }
    Ok(Config {
        exports,
        listen: file.server.listen,
        stats: file.server.stats,
        admin: file.server.admin,
        tls: super::TlsCfg {
            mode: file.server.tls,
            certificates: file.server.tls_certificates,
            verify_peer: file.server.tls_verify_peer,
        },
    })
}
