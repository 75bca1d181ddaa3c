//! The static table of every supported option, and how a value is applied to a job.

use super::error::JobErrorKind;
use super::spec::{
    Fallocate, FileService, FileServiceKind, IrqMode, JobSpec, RwMode, VerifyMode, DEFAULT_BS,
};
use super::value::{
    parse_bool, parse_bs_list, parse_cpu_list, parse_percent, parse_percentile_list, parse_size,
    parse_time_ns, BsList,
};
use crate::pattern::{parse_split, Distribution, SplitEntry};

/// Nanoseconds per second: the implicit unit of fio's `runtime` and `ramp_time`.
const SEC: u64 = 1_000_000_000;

/// What `help` text says a size looks like; also the tail of the "is not a size" error.
const SIZE_SYNTAX: &str = "a size (expected a number with an optional k/m/g/t/p suffix)";
const INT_SYNTAX: &str = "an integer";
const TIME_SYNTAX: &str = "a time (expected a number with an optional d/h/m/s/ms/us/ns suffix)";
const BOOL_SYNTAX: &str = "a boolean (expected 0/1, true/false, yes/no or on/off)";
const PERCENT_SYNTAX: &str = "a percentage (expected a number from 0 to 100)";

/// An option's value type together with the setter that stores a parsed value.
///
/// Keeping the setter inside the kind means a table entry cannot pair, say, an integer
/// range with a boolean field: the types would not line up.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// An integer (fio's suffixes allowed) within `min..=max`.
    Int {
        min: u64,
        max: u64,
        set: fn(&mut JobSpec, u64),
    },
    /// A byte count.
    Size { set: fn(&mut JobSpec, u64) },
    /// A duration; a plain number is in units of `unit_ns`.
    Time {
        unit_ns: u64,
        set: fn(&mut JobSpec, u64),
    },
    /// A flag; a bare key means true.
    Bool { set: fn(&mut JobSpec, bool) },
    /// Free text.
    Str { set: fn(&mut JobSpec, &str) },
    /// One of a fixed list; the setter gets the index into `values`.
    Enum {
        values: &'static [&'static str],
        set: fn(&mut JobSpec, usize),
    },
    /// A percentage in 0..=100 (fractions allowed).
    Percent { set: fn(&mut JobSpec, f64) },
    /// Anything with its own syntax; the setter parses and reports errors itself.
    Custom {
        syntax: &'static str,
        set: fn(&mut JobSpec, &str, &str) -> Result<(), JobErrorKind>,
    },
}

/// One entry of the option table.
pub struct OptDef {
    /// The canonical (fio) name.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// The default as it would be written in a job file ("" when unset by default).
    pub default: &'static str,
    /// One line of help.
    pub help: &'static str,
    pub(crate) kind: Kind,
}

impl OptDef {
    /// A short description of the value syntax, e.g. `int 1..=65536` or `size`.
    pub fn kind_description(&self) -> String {
        match self.kind {
            Kind::Int { min, max, .. } if max == u64::MAX => format!("int >= {min}"),
            Kind::Int { min, max, .. } => format!("int {min}..={max}"),
            Kind::Size { .. } => "size".to_string(),
            Kind::Time { unit_ns, .. } if unit_ns == SEC => "time (s)".to_string(),
            Kind::Time { .. } => "time (ns)".to_string(),
            Kind::Bool { .. } => "bool".to_string(),
            Kind::Str { .. } => "str".to_string(),
            Kind::Enum { values, .. } => values.join("|"),
            Kind::Percent { .. } => "percent".to_string(),
            Kind::Custom { syntax, .. } => syntax.to_string(),
        }
    }

    /// Whether this is a boolean option (which may be written as a bare key).
    pub fn is_bool(&self) -> bool {
        matches!(self.kind, Kind::Bool { .. })
    }

    /// Whether `key` names this option (canonical name or alias, ASCII case-insensitive).
    pub fn matches(&self, key: &str) -> bool {
        self.name.eq_ignore_ascii_case(key)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(key))
    }
}

/// Saturating conversion for setters whose range is already bounded by the table.
fn to_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Saturating conversion for small-range setters.
fn to_u8(v: u64) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

/// Empty text means "unset" for optional string options.
fn opt_string(v: &str) -> Option<String> {
    (!v.is_empty()).then(|| v.to_string())
}

/// Every option `mqblk bench` understands, fio's first and then the device and tool ones.
static OPTIONS: &[OptDef] = &[
    OptDef {
        name: "name",
        aliases: &[],
        default: "",
        help: "Job name; a job file's section name sets it too.",
        kind: Kind::Str {
            set: |j, v| j.name = v.to_string(),
        },
    },
    OptDef {
        name: "description",
        aliases: &[],
        default: "",
        help: "Free-form description printed with the job's results.",
        kind: Kind::Str {
            set: |j, v| j.description = v.to_string(),
        },
    },
    OptDef {
        name: "rw",
        aliases: &["readwrite"],
        default: "read",
        help: "I/O pattern: sequential or random reads, writes, or a mix.",
        kind: Kind::Custom {
            syntax: "read|write|randread|randwrite|randrw|readwrite|rw|trim|randtrim|trimwrite|randtrimwrite[:N]",
            set: set_rw,
        },
    },
    OptDef {
        name: "rwmixread",
        aliases: &[],
        default: "50",
        help: "Percentage of a mixed workload that is reads.",
        kind: Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.rwmixread = to_u32(v),
        },
    },
    OptDef {
        name: "rwmixwrite",
        aliases: &[],
        default: "50",
        help: "Percentage of a mixed workload that is writes (sets rwmixread to 100 minus it).",
        kind: Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.rwmixread = to_u32(100u64.saturating_sub(v)),
        },
    },
    OptDef {
        name: "bs",
        aliases: &["blocksize"],
        default: "4096",
        help: "Block size; 'r,w,t' gives one per direction, an empty slot keeps the default.",
        kind: Kind::Custom {
            syntax: "size[,size[,size]]",
            set: set_bs,
        },
    },
    OptDef {
        name: "bsrange",
        aliases: &["blocksize_range"],
        default: "",
        help: "Block sizes drawn from min-max (multiples of min, as fio); 'r,w,t' per direction.",
        kind: Kind::Custom {
            syntax: "min-max[,min-max[,min-max]]",
            set: set_bsrange,
        },
    },
    OptDef {
        name: "bssplit",
        aliases: &[],
        default: "",
        help: "Block sizes with their shares, e.g. 4k/10:64k/50:32k/40; ',' separates read,write,trim.",
        kind: Kind::Custom {
            syntax: "size/pct:size/pct...[,...]",
            set: set_bssplit,
        },
    },
    OptDef {
        name: "blockalign",
        aliases: &["ba"],
        default: "",
        help: "Random offsets are multiples of this (default: the job's block grid).",
        kind: Kind::Custom {
            syntax: "size[,size[,size]]",
            set: set_blockalign,
        },
    },
    OptDef {
        name: "random_distribution",
        aliases: &[],
        default: "random",
        help: "Where random I/O lands: random, zipf:THETA, pareto:H, normal:DEV, zoned:A/S:..., zoned_abs:A/SIZE:...",
        kind: Kind::Custom {
            syntax: "random|zipf:t|pareto:h|normal:dev|zoned:...|zoned_abs:...",
            set: set_random_distribution,
        },
    },
    OptDef {
        name: "percentage_random",
        aliases: &[],
        default: "100",
        help: "Share of a random job's I/Os at random offsets, the rest sequential; 'r,w,t' per direction.",
        kind: Kind::Custom {
            syntax: "pct[,pct[,pct]]",
            set: |j, t, o| {
                j.percentage_random = per_direction(t, 100, |v| {
                    v.parse::<u32>()
                        .ok()
                        .filter(|p| *p <= 100)
                        .ok_or_else(|| format!("'{v}' is not a percentage from 0 to 100"))
                })
                .map_err(|r| unsupported(o, t, r))?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "number_ios",
        aliases: &[],
        default: "0",
        help: "Stop after this many I/Os (0: no limit); never extends the job.",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.number_ios = v,
        },
    },
    OptDef {
        name: "io_size",
        aliases: &["io_limit"],
        default: "",
        help: "Bytes of I/O to do within the region of size (more than size loops over it), or N% of size.",
        kind: Kind::Custom {
            syntax: "size|N%",
            set: |j, t, o| {
                let (bytes, pct) = match in_zones(j, "io_size", t) {
                    true => (None, None),
                    false => size_or_percent(t, o)?,
                };
                j.io_size = bytes;
                j.io_size_pct = pct;
                Ok(())
            },
        },
    },
    OptDef {
        name: "loops",
        aliases: &[],
        default: "1",
        help: "Run the job this many times over.",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as u64,
            set: |j, v| j.loops = to_u32(v),
        },
    },
    OptDef {
        name: "startdelay",
        aliases: &[],
        default: "0",
        help: "Wait this long before starting (plain number = seconds); a range 1-5 draws per clone.",
        kind: Kind::Custom {
            syntax: "time[-time]",
            set: set_startdelay,
        },
    },
    OptDef {
        name: "thinktime",
        aliases: &[],
        default: "0",
        help: "After every thinktime_blocks I/Os, wait for them to complete, then this long (plain number = us).",
        kind: Kind::Time {
            unit_ns: 1_000,
            set: |j, v| j.thinktime_ns = v,
        },
    },
    OptDef {
        name: "thinktime_spin",
        aliases: &[],
        default: "0",
        help: "The part of thinktime spent spinning on the CPU (plain number = us).",
        kind: Kind::Time {
            unit_ns: 1_000,
            set: |j, v| j.thinktime_spin_ns = v,
        },
    },
    OptDef {
        name: "write_iolog",
        aliases: &[],
        default: "",
        help: "Log every I/O the job issues to this file, in fio's iolog version 3 format.",
        kind: Kind::Str {
            set: |j, v| j.write_iolog = opt_string(v),
        },
    },
    OptDef {
        name: "write_lat_log",
        aliases: &[],
        default: "",
        help: "Write PREFIX_lat/clat/slat.N.log: every I/O's latency in ns (or window means with log_avg_msec).",
        kind: Kind::Str {
            set: |j, v| j.logs.lat = opt_string(v),
        },
    },
    OptDef {
        name: "write_bw_log",
        aliases: &[],
        default: "",
        help: "Write PREFIX_bw.N.log: bandwidth in KiB/s.",
        kind: Kind::Str {
            set: |j, v| j.logs.bw = opt_string(v),
        },
    },
    OptDef {
        name: "write_iops_log",
        aliases: &[],
        default: "",
        help: "Write PREFIX_iops.N.log: I/Os per second.",
        kind: Kind::Str {
            set: |j, v| j.logs.iops = opt_string(v),
        },
    },
    OptDef {
        name: "log_avg_msec",
        aliases: &[],
        default: "0",
        help: "Average log entries over windows of this many ms (0: a line per I/O).",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.logs.avg_ms = v,
        },
    },
    OptDef {
        name: "gtod_reduce",
        aliases: &[],
        default: "0",
        help: "Leave out slat, clat, lat and bandwidth measurements (all four disable_* options).",
        kind: Kind::Bool {
            set: |j, v| {
                j.disable_slat = v;
                j.disable_clat = v;
                j.disable_lat = v;
                j.disable_bw = v;
            },
        },
    },
    OptDef {
        name: "disable_slat",
        aliases: &[],
        default: "0",
        help: "Leave submission latency out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_slat = v,
        },
    },
    OptDef {
        name: "disable_clat",
        aliases: &[],
        default: "0",
        help: "Leave completion latency (and its percentiles) out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_clat = v,
        },
    },
    OptDef {
        name: "disable_lat",
        aliases: &[],
        default: "0",
        help: "Leave total latency out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_lat = v,
        },
    },
    OptDef {
        name: "disable_bw_measurement",
        aliases: &["disable_bw"],
        default: "0",
        help: "Leave the bandwidth and IOPS samples out of the report.",
        kind: Kind::Bool {
            set: |j, v| j.disable_bw = v,
        },
    },
    OptDef {
        name: "cpus_allowed_policy",
        aliases: &[],
        default: "split",
        help: "split: each clone on its own CPU of cpus_allowed; shared: every clone on any of them.",
        kind: Kind::Enum {
            values: &["split", "shared"],
            set: |j, i| j.cpus_allowed_shared = i == 1,
        },
    },
    OptDef {
        name: "sqthread_poll",
        aliases: &[],
        default: "0",
        help: "io_uring: a kernel thread polls each ring's submission queue (IORING_SETUP_SQPOLL).",
        kind: Kind::Bool {
            set: |j, v| j.sqthread_poll = v,
        },
    },
    OptDef {
        name: "sqthread_poll_cpu",
        aliases: &[],
        default: "",
        help: "io_uring with sqthread_poll: the CPU the polling kernel threads run on (IORING_SETUP_SQ_AFF).",
        kind: Kind::Int {
            min: 0,
            max: 4095,
            set: |j, v| j.sqthread_poll_cpu = Some(v as u32),
        },
    },
    OptDef {
        name: "registerfiles",
        aliases: &[],
        default: "0",
        help: "io_uring: the driver registers its files with each ring (IORING_REGISTER_FILES) and submits by index.",
        kind: Kind::Bool {
            set: |j, v| j.registerfiles = v,
        },
    },
    OptDef {
        name: "thinktime_blocks",
        aliases: &[],
        default: "1",
        help: "I/Os issued between think times.",
        kind: Kind::Int {
            min: 1,
            max: u64::MAX,
            set: |j, v| j.thinktime_blocks = v,
        },
    },
    OptDef {
        name: "size",
        aliases: &[],
        default: "",
        help: "Bytes of I/O per job, or N% of the device; unset (or 0) means the device from offset to its end.",
        kind: Kind::Custom {
            syntax: "size|N%",
            set: |j, t, o| {
                let (bytes, pct) = match in_zones(j, "size", t) {
                    true => (None, None),
                    false => size_or_percent(t, o)?,
                };
                j.size = bytes.filter(|&v| v != 0);
                j.size_pct = pct;
                Ok(())
            },
        },
    },
    OptDef {
        name: "offset",
        aliases: &[],
        default: "0",
        help: "Byte offset where the job's I/O region starts, or N% of the device (aligned up to the block size).",
        kind: Kind::Custom {
            syntax: "size|N%",
            set: |j, t, o| {
                let (bytes, pct) = match in_zones(j, "offset", t) {
                    true => (None, None),
                    false => size_or_percent(t, o)?,
                };
                j.offset = bytes.unwrap_or(0);
                j.offset_pct = pct;
                Ok(())
            },
        },
    },
    OptDef {
        name: "iodepth",
        aliases: &[],
        default: "1",
        help: "Number of I/Os kept in flight per job.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.iodepth = to_u32(v),
        },
    },
    OptDef {
        name: "iodepth_batch_submit",
        aliases: &["iodepth_batch"],
        default: "1",
        help: "Number of I/Os submitted at once.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.iodepth_batch_submit = to_u32(v),
        },
    },
    OptDef {
        name: "iodepth_batch_complete_min",
        aliases: &["iodepth_batch_complete"],
        default: "1",
        help: "Minimum completions to wait for when reaping (0 = never wait).",
        kind: Kind::Int {
            min: 0,
            max: 65536,
            set: |j, v| j.iodepth_batch_complete_min = to_u32(v),
        },
    },
    OptDef {
        name: "iodepth_batch_complete_max",
        aliases: &[],
        default: "iodepth_batch_complete_min",
        help: "Maximum completions reaped at once (defaults to iodepth_batch_complete_min, as in fio).",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.iodepth_batch_complete_max = to_u32(v),
        },
    },
    OptDef {
        name: "numjobs",
        aliases: &[],
        default: "1",
        help: "Number of identical clones of this job, each a thread.",
        kind: Kind::Int {
            min: 1,
            max: 4096,
            set: |j, v| j.numjobs = to_u32(v),
        },
    },
    OptDef {
        name: "runtime",
        aliases: &["timeout"],
        default: "0",
        help: "Stop the job after this long (plain number = seconds; 0 = no limit).",
        kind: Kind::Time {
            unit_ns: SEC,
            set: |j, v| j.runtime_ns = v,
        },
    },
    OptDef {
        name: "time_based",
        aliases: &[],
        default: "0",
        help: "Loop over the region until runtime expires instead of stopping after size.",
        kind: Kind::Bool {
            set: |j, v| j.time_based = v,
        },
    },
    OptDef {
        name: "ramp_time",
        aliases: &[],
        default: "0",
        help: "Run this long before statistics start (plain number = seconds).",
        kind: Kind::Time {
            unit_ns: SEC,
            set: |j, v| j.ramp_time_ns = v,
        },
    },
    OptDef {
        name: "ioscheduler",
        aliases: &[],
        default: "",
        help: "I/O scheduler for the device queue (none, mq-deadline, kyber, ...).",
        kind: Kind::Str {
            set: |j, v| j.ioscheduler = opt_string(v),
        },
    },
    OptDef {
        name: "prioclass",
        aliases: &[],
        default: "",
        help: "I/O priority class: 1 realtime, 2 best-effort, 3 idle.",
        kind: Kind::Int {
            min: 1,
            max: 3,
            set: |j, v| j.prioclass = Some(to_u8(v)),
        },
    },
    OptDef {
        name: "prio",
        aliases: &[],
        default: "",
        help: "I/O priority level within the class, 0 (highest) to 7.",
        kind: Kind::Int {
            min: 0,
            max: 7,
            set: |j, v| j.prio = Some(to_u8(v)),
        },
    },
    OptDef {
        name: "cgroup",
        aliases: &[],
        default: "",
        help: "Charge the job's I/O to this cgroup (a path: grp or grp/sub); BFQ shares between groups by weight.",
        kind: Kind::Str {
            set: |j, v| j.cgroup = (!v.trim().is_empty()).then(|| v.trim().to_string()),
        },
    },
    OptDef {
        name: "cgroup_weight",
        aliases: &[],
        default: "",
        help: "Weight of the job's cgroup for BFQ (io.bfq.weight), 1 to 1000; default 100.",
        kind: Kind::Int {
            min: 1,
            max: 1000,
            set: |j, v| j.cgroup_weight = Some(v as u32),
        },
    },
    OptDef {
        name: "rate_iops",
        aliases: &[],
        default: "0",
        help: "Cap each direction at this many IOPS; 'r,w,t' per direction (0 or empty = unlimited).",
        kind: Kind::Custom {
            syntax: "int[,int[,int]]",
            set: |j, t, o| {
                j.rate_iops = per_direction(t, 0, |v| {
                    parse_size(v).ok_or_else(|| format!("'{v}' is not an integer"))
                })
                .map_err(|r| unsupported(o, t, r))?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "rate",
        aliases: &[],
        default: "0",
        help: "Cap each direction's bandwidth in bytes/s; 'r,w,t' per direction (rate=1m,500k).",
        kind: Kind::Custom {
            syntax: "size[,size[,size]]",
            set: |j, t, o| {
                j.rate = per_direction(t, 0, |v| {
                    parse_size(v).ok_or_else(|| format!("'{v}' is not a size"))
                })
                .map_err(|r| unsupported(o, t, r))?;
                Ok(())
            },
        },
    },
    OptDef {
        name: "offset_increment",
        aliases: &[],
        default: "0",
        help: "Each clone's region starts this much after the previous clone's (offset + increment * clone number).",
        kind: Kind::Size {
            set: |j, v| j.offset_increment = v,
        },
    },
    OptDef {
        name: "randrepeat",
        aliases: &[],
        default: "1",
        help: "Seed the random generators predictably so runs repeat.",
        kind: Kind::Bool {
            set: |j, v| j.randrepeat = v,
        },
    },
    OptDef {
        name: "randseed",
        aliases: &[],
        default: "",
        help: "Explicit seed for the random generators.",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.randseed = Some(v),
        },
    },
    OptDef {
        name: "random_generator",
        aliases: &[],
        default: "tausworthe",
        help: "The generator of random offsets, as fio's: tausworthe (32-bit), lfsr (every block once without a map) or tausworthe64.",
        kind: Kind::Enum {
            values: &["tausworthe", "lfsr", "tausworthe64"],
            set: |j, i| {
                use crate::pattern::frand::RandomGenerator as G;
                j.random_generator = [G::Tausworthe, G::Lfsr, G::Tausworthe64][i];
            },
        },
    },
    OptDef {
        name: "norandommap",
        aliases: &[],
        default: "0",
        help: "Pick random offsets without tracking coverage (blocks may repeat).",
        kind: Kind::Bool {
            set: |j, v| j.norandommap = v,
        },
    },
    OptDef {
        name: "verify",
        aliases: &[],
        default: "0",
        help: "Verify written data with a header and checksum per block (0/null = off; meta: the header alone).",
        kind: Kind::Enum {
            values: &[
                "crc32c", "crc32c-intel", "crc32", "crc64", "crc16", "crc7", "md5", "sha1",
                "sha256", "sha512", "xxhash", "meta", "0", "null", "pattern",
            ],
            set: |j, i| {
                j.verify = match i {
                    0 | 1 => VerifyMode::Crc32c,
                    2 => VerifyMode::Crc32,
                    3 => VerifyMode::Crc64,
                    4 => VerifyMode::Crc16,
                    5 => VerifyMode::Crc7,
                    6 => VerifyMode::Md5,
                    7 => VerifyMode::Sha1,
                    8 => VerifyMode::Sha256,
                    9 => VerifyMode::Sha512,
                    10 => VerifyMode::Xxhash,
                    11 => VerifyMode::Meta,
                    14 => VerifyMode::Pattern,
                    _ => VerifyMode::None,
                }
            },
        },
    },
    OptDef {
        name: "verify_pattern",
        aliases: &[],
        default: "",
        help: "The bytes verified blocks repeat after their header (checked on read); without verify=, a header and this pattern; with verify=pattern, the pattern alone. 0x hex, decimal, \"text\", 'file', concatenated.",
        kind: Kind::Custom {
            syntax: "0xHEX|N|\"text\"|'file'...",
            set: |j, t, o| {
                j.verify_pattern = Some(parse_pattern(t).map_err(|r| unsupported(o, t, r))?);
                Ok(())
            },
        },
    },
    OptDef {
        name: "buffer_pattern",
        aliases: &[],
        default: "",
        help: "The bytes written buffers repeat (when not verifying). 0x hex, decimal, \"text\", 'file', concatenated.",
        kind: Kind::Custom {
            syntax: "0xHEX|N|\"text\"|'file'...",
            set: |j, t, o| {
                j.buffer_pattern = Some(parse_pattern(t).map_err(|r| unsupported(o, t, r))?);
                Ok(())
            },
        },
    },
    OptDef {
        name: "do_verify",
        aliases: &[],
        default: "1",
        help: "Run the verify phase after the write phase when verify is set.",
        kind: Kind::Bool {
            set: |j, v| j.do_verify = v,
        },
    },
    OptDef {
        name: "verify_backlog",
        aliases: &[],
        default: "0",
        help: "With verify: after this many writes, wait for them and read them back before writing on (0: only at the end).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.verify_backlog = v,
        },
    },
    OptDef {
        name: "verify_backlog_batch",
        aliases: &[],
        default: "0",
        help: "How many of the backlog's oldest blocks each read-back checks (0: all of them).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.verify_backlog_batch = v,
        },
    },
    OptDef {
        name: "fsync",
        aliases: &[],
        default: "0",
        help: "Issue a flush after every this many writes (0 = never).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fsync = v,
        },
    },
    OptDef {
        name: "end_fsync",
        aliases: &[],
        default: "0",
        help: "Issue a flush when the job ends.",
        kind: Kind::Bool {
            set: |j, v| j.end_fsync = v,
        },
    },
    OptDef {
        name: "sync",
        aliases: &[],
        default: "none",
        help: "Open for synchronous writes, as fio does: none/0, sync/1 (O_SYNC) or dsync (O_DSYNC); either way every write carries FUA, as the kernel's block-device writes do.",
        kind: Kind::Enum {
            values: &["none", "0", "sync", "1", "dsync"],
            set: |j, i| j.sync_writes = i >= 2,
        },
    },
    OptDef {
        name: "group_reporting",
        aliases: &[],
        default: "0",
        help: "Report all jobs of a group as one.",
        kind: Kind::Bool {
            set: |j, v| j.group_reporting = v,
        },
    },
    OptDef {
        name: "stonewall",
        aliases: &["wait_for_previous"],
        default: "0",
        help: "Wait for earlier jobs to finish before starting; starts a new group.",
        kind: Kind::Bool {
            set: |j, v| j.stonewall = v,
        },
    },
    OptDef {
        name: "wait_for",
        aliases: &[],
        default: "",
        help: "Start once every clone of the named job (defined above this one) has finished.",
        kind: Kind::Str {
            set: |j, v| j.wait_for = opt_string(v),
        },
    },
    OptDef {
        name: "flow",
        aliases: &[],
        default: "0",
        help: "Weight in flow control: the jobs of one flow_id issue in proportion to their weights (0: not in a flow).",
        kind: Kind::Int {
            min: 0,
            max: 1000,
            set: |j, v| j.flow = v as u32,
        },
    },
    OptDef {
        name: "flow_id",
        aliases: &[],
        default: "0",
        help: "The flow group of a job with flow=.",
        kind: Kind::Int {
            min: 0,
            max: u32::MAX as u64,
            set: |j, v| j.flow_id = v as u32,
        },
    },
    OptDef {
        name: "flow_sleep",
        aliases: &[],
        default: "0",
        help: "How long a job held back by flow control waits before trying again (microseconds; 0: retry at once).",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.flow_sleep_ns = v,
        },
    },
    OptDef {
        name: "latency_target",
        aliases: &[],
        default: "0",
        help: "Find the deepest queue whose I/Os complete within this total latency (microseconds unless given a unit): from depth 1 up to iodepth, a window at each.",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.latency_target_ns = v,
        },
    },
    OptDef {
        name: "latency_window",
        aliases: &[],
        default: "0",
        help: "How long each depth of the latency_target search runs (microseconds unless given a unit).",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.latency_window_ns = v,
        },
    },
    OptDef {
        name: "latency_percentile",
        aliases: &[],
        default: "100",
        help: "The share of a window's I/Os that must meet latency_target.",
        kind: Kind::Percent {
            set: |j, v| j.latency_percentile = v,
        },
    },
    OptDef {
        name: "latency_run",
        aliases: &[],
        default: "0",
        help: "Keep adjusting the depth to latency_target instead of ending once it is found.",
        kind: Kind::Bool {
            set: |j, v| j.latency_run = v,
        },
    },
    OptDef {
        name: "max_latency",
        aliases: &[],
        default: "0",
        help: "End the job with an error at the first I/O whose total latency exceeds this (microseconds unless given a unit; 0: no limit).",
        kind: Kind::Time {
            unit_ns: 1000,
            set: |j, v| j.max_latency_ns = v,
        },
    },
    OptDef {
        name: "new_group",
        aliases: &[],
        default: "0",
        help: "Start a new reporting group at this job.",
        kind: Kind::Bool {
            set: |j, v| j.new_group = v,
        },
    },
    OptDef {
        name: "cpus_allowed",
        aliases: &[],
        default: "",
        help: "CPUs the job's threads may run on, e.g. 0-3,6.",
        kind: Kind::Custom {
            syntax: "cpu list",
            set: set_cpus_allowed,
        },
    },
    OptDef {
        name: "filename",
        aliases: &[],
        default: "",
        help: "The file or block device the job reads and writes (through mqblk's block layer, the uring driver); without it jobs run on the null device.",
        kind: Kind::Str {
            set: |j, v| j.filename = opt_string(v),
        },
    },
    OptDef {
        name: "directory",
        aliases: &[],
        default: "",
        help: "Directory of the job's file: filename= inside it, or fio's NAME.0.0 without filename= (one file per run).",
        kind: Kind::Str {
            set: |j, v| j.directory = opt_string(v),
        },
    },
    OptDef {
        name: "nrfiles",
        aliases: &["nr_files"],
        default: "1",
        help: "Files per job clone (a file set), named by filename_format, laid out one after another on the device.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.nrfiles = v as u32,
        },
    },
    OptDef {
        name: "filesize",
        aliases: &[],
        default: "",
        help: "Size of each file of the set (a range lo-hi is drawn per file); size= then caps the job's I/O.",
        kind: Kind::Custom {
            syntax: "size[-size]",
            set: set_filesize,
        },
    },
    OptDef {
        name: "filename_format",
        aliases: &[],
        default: "$jobname.$jobnum.$filenum",
        help: "Names of a file set's files: $jobname, $jobnum (the clone) and $filenum are replaced.",
        kind: Kind::Str {
            set: |j, v| j.filename_format = v.to_string(),
        },
    },
    OptDef {
        name: "file_service_type",
        aliases: &[],
        default: "roundrobin",
        help: "Which file of a set the next I/O goes to: roundrobin, sequential (each file to its end) or random (:N keeps N I/Os on a file); zipf:THETA, pareto:H, normal:DEV (gauss) skew the choice.",
        kind: Kind::Custom {
            syntax: "roundrobin|sequential|random[:N]|zipf:T|pareto:H|normal:D",
            set: set_file_service,
        },
    },
    OptDef {
        name: "openfiles",
        aliases: &[],
        default: "",
        help: "Files of a set open at once (unset: all): I/O goes to the open ones, and a finished file makes room for the next.",
        kind: Kind::Int {
            min: 1,
            max: 65536,
            set: |j, v| j.openfiles = v as u32,
        },
    },
    OptDef {
        name: "fallocate",
        aliases: &[],
        default: "native",
        help: "How a file the job only writes is made: native/posix/keep/1 allocate its blocks, none/0/truncate leave it sparse (a file a job reads is written out).",
        kind: Kind::Enum {
            values: &["none", "native", "posix", "keep", "truncate", "0", "1"],
            set: |j, i| {
                j.fallocate = match i {
                    0 | 5 => Fallocate::None,
                    4 => Fallocate::Truncate,
                    _ => Fallocate::Native,
                }
            },
        },
    },
    OptDef {
        name: "create_on_open",
        aliases: &[],
        default: "0",
        help: "fio creates each file when it opens it; mqblk makes every file before the run starts.",
        kind: Kind::Bool {
            set: |j, v| j.create_on_open = v,
        },
    },
    OptDef {
        name: "zonemode",
        aliases: &[],
        default: "none",
        help: "strided: zonesize bytes of I/O in each zone of zonerange bytes, then the next zone (zoneskip further on); none: no zones.",
        kind: Kind::Custom {
            syntax: "none|strided",
            set: |j, t, o| match t {
                "none" => {
                    j.zonemode_strided = false;
                    Ok(())
                }
                "strided" => {
                    j.zonemode_strided = true;
                    Ok(())
                }
                "zbd" => Err(unsupported(
                    o,
                    t,
                    "zoned block devices (host-managed SMR, ZNS) are not modelled; zonemode=strided visits zones of a conventional device".into(),
                )),
                _ => Err(unsupported(o, t, "not none, strided or zbd".into())),
            },
        },
    },
    OptDef {
        name: "zonerange",
        aliases: &[],
        default: "0",
        help: "zonemode=strided: the size of one zone.",
        kind: Kind::Size {
            set: |j, v| j.zonerange = v,
        },
    },
    OptDef {
        name: "zonesize",
        aliases: &[],
        default: "0",
        help: "zonemode=strided: bytes of I/O in a zone before the next (each visit starts at the zone's start, as fio's); sizes written Nz count these.",
        kind: Kind::Size {
            set: |j, v| j.zonesize = v,
        },
    },
    OptDef {
        name: "zoneskip",
        aliases: &[],
        default: "0",
        help: "zonemode=strided: bytes skipped after each zone, before the next.",
        kind: Kind::Size {
            set: |j, v| j.zoneskip = v,
        },
    },
    OptDef {
        name: "direct",
        aliases: &[],
        default: "0",
        help: "fio's O_DIRECT flag: the file is opened O_DIRECT, and writes are synchronous (REQ_SYNC) as the kernel's direct I/O writes are.",
        kind: Kind::Bool {
            set: |j, v| j.direct = v,
        },
    },
    OptDef {
        name: "buffered",
        aliases: &[],
        default: "1",
        help: "The inverse of direct.",
        kind: Kind::Bool {
            set: |j, v| j.direct = !v,
        },
    },
    OptDef {
        name: "ioengine",
        aliases: &[],
        default: "",
        help: "fio I/O engine: block I/O engines run through mqblk's block layer on filename= (sync ones, psync by default, with one I/O in flight); null is the null device.",
        kind: Kind::Custom {
            syntax: "libaio|io_uring|posixaio|psync|sync|pvsync|pvsync2|vsync|mmap|splice|null",
            set: set_ioengine,
        },
    },
    OptDef {
        name: "thread",
        aliases: &[],
        default: "0",
        help: "Accepted for fio compatibility; jobs always run as threads.",
        kind: Kind::Bool {
            set: |j, v| j.thread = v,
        },
    },
    OptDef {
        name: "percentile_list",
        aliases: &[],
        default: "1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9:99.95:99.99",
        help: "Latency percentiles to report, colon separated, at most 20.",
        kind: Kind::Custom {
            syntax: "p:p:...",
            set: set_percentile_list,
        },
    },
    OptDef {
        name: "clat_percentiles",
        aliases: &[],
        default: "1",
        help: "Report completion-latency percentiles.",
        kind: Kind::Bool {
            set: |j, v| j.clat_percentiles = v,
        },
    },
    OptDef {
        name: "lat_percentiles",
        aliases: &[],
        default: "0",
        help: "Report total-latency percentiles.",
        kind: Kind::Bool {
            set: |j, v| j.lat_percentiles = v,
        },
    },
    OptDef {
        name: "slat_percentiles",
        aliases: &[],
        default: "0",
        help: "Report submission-latency percentiles.",
        kind: Kind::Bool {
            set: |j, v| j.slat_percentiles = v,
        },
    },
    OptDef {
        name: "driver",
        aliases: &[],
        default: "",
        help: "Block driver that serves the job's device (null, uring, sim); unset, ioengine= and filename= decide (the null device without them).",
        kind: Kind::Str {
            set: |j, v| j.driver = opt_string(v),
        },
    },
    OptDef {
        name: "device",
        aliases: &[],
        default: "",
        help: "Device model and its parameters (hdd, ssd, emmc, virtio, raid, null; e.g. hdd,ncq=32): what driver=sim serves and what mqblk sim simulates.",
        kind: Kind::Str {
            set: |j, v| j.device = (!v.is_empty()).then(|| v.to_string()),
        },
    },
    OptDef {
        name: "nr_hw_queues",
        aliases: &[],
        default: "1",
        help: "Number of hardware queues of the device.",
        kind: Kind::Int {
            min: 1,
            max: 1024,
            set: |j, v| j.nr_hw_queues = to_u32(v),
        },
    },
    OptDef {
        name: "queue_depth",
        aliases: &["hw_queue_depth"],
        default: "64",
        help: "Tags per hardware queue (null_blk's hw_queue_depth).",
        kind: Kind::Int {
            min: 1,
            max: 10240,
            set: |j, v| j.queue_depth = to_u32(v),
        },
    },
    OptDef {
        name: "nr_requests",
        aliases: &[],
        default: "0",
        help: "Scheduler request limit per queue (0 = kernel default).",
        kind: Kind::Int {
            min: 0,
            max: 65536,
            set: |j, v| j.nr_requests = to_u32(v),
        },
    },
    OptDef {
        name: "nr_ctx",
        aliases: &[],
        default: "0",
        help: "Number of software contexts (0 = one per job thread).",
        kind: Kind::Int {
            min: 0,
            max: 4096,
            set: |j, v| j.nr_ctx = to_u32(v),
        },
    },
    OptDef {
        name: "shared_tags",
        aliases: &[],
        default: "0",
        help: "Share one tag set among all hardware queues.",
        kind: Kind::Bool {
            set: |j, v| j.shared_tags = v,
        },
    },
    OptDef {
        name: "blocking",
        aliases: &[],
        default: "0",
        help: "The driver may sleep while queueing (BLK_MQ_F_BLOCKING).",
        kind: Kind::Bool {
            set: |j, v| j.blocking = v,
        },
    },
    OptDef {
        name: "irqmode",
        aliases: &[],
        default: "none",
        // null_blk defaults to softirq, but a userspace device has no interrupt cost to
        // model, so completing inline is the honest default; softirq/timer are opt-in.
        help: "Completion mode: none/0 inline, softirq/1 deferred, timer/2 after completion_nsec.",
        kind: Kind::Enum {
            values: &["none", "softirq", "timer", "0", "1", "2"],
            set: |j, i| {
                j.irqmode = match i % 3 {
                    0 => IrqMode::None,
                    1 => IrqMode::Softirq,
                    _ => IrqMode::Timer,
                }
            },
        },
    },
    OptDef {
        name: "completion_nsec",
        aliases: &[],
        default: "10000",
        help: "Completion delay for irqmode=timer (plain number = nanoseconds).",
        kind: Kind::Time {
            unit_ns: 1,
            set: |j, v| j.completion_nsec = v,
        },
    },
    OptDef {
        name: "memory_backed",
        aliases: &[],
        default: "0",
        help: "Store written data so that reads return it.",
        kind: Kind::Bool {
            set: |j, v| j.memory_backed = v,
        },
    },
    OptDef {
        name: "cache_size",
        aliases: &[],
        default: "0",
        help: "null_blk's cache_size in MiB: non-zero gives the null device a volatile write cache (write_cache \"write back\", FUA honoured), so flushes reach it; 0, the default, has none and the block layer completes flushes itself.",
        kind: Kind::Int {
            min: 0,
            max: 1 << 20,
            set: |j, v| j.cache_size_mb = v,
        },
    },
    OptDef {
        name: "rotational",
        aliases: &[],
        default: "auto",
        help: "Whether the device is rotational, as /sys/block/DEV/queue/rotational (auto: what sysfs says for a file's or device's disk under driver=uring, 0 for null).",
        kind: Kind::Enum {
            values: &["auto", "0", "1"],
            set: |j, i| j.rotational = [None, Some(false), Some(true)][i],
        },
    },
    OptDef {
        name: "virtqueue_size",
        aliases: &[],
        default: "auto",
        help: "driver=uring: descriptors in each ring of a virtio-blk disk under the file that lacks indirect descriptors; a request holds one per 4 KiB page plus two, and waits in the queue while the ring is full, as in virtio_queue_rq (auto: derived from sysfs, none for other disks; 0: no limit).",
        kind: Kind::Custom {
            syntax: "auto|N",
            set: set_virtqueue_size,
        },
    },
    OptDef {
        name: "dev_size",
        aliases: &[],
        default: "",
        help: "Device capacity (default: offset+size when size is set, else 1 GiB).",
        kind: Kind::Size {
            set: |j, v| j.dev_size = Some(v),
        },
    },
    OptDef {
        name: "fail_nth",
        aliases: &[],
        default: "0",
        help: "Fail every Nth request (0 = off).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fail_nth = v,
        },
    },
    OptDef {
        name: "timeout_nth",
        aliases: &[],
        default: "0",
        help: "Let every Nth request time out (0 = off).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.timeout_nth = v,
        },
    },
    OptDef {
        name: "requeue_nth",
        aliases: &[],
        default: "0",
        help: "Requeue every Nth request (0 = off).",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.requeue_nth = v,
        },
    },
    OptDef {
        name: "fail_prob",
        aliases: &[],
        default: "0",
        help: "Percent chance that a request fails.",
        kind: Kind::Percent {
            set: |j, v| j.fail_prob = v,
        },
    },
    OptDef {
        name: "timeout_prob",
        aliases: &[],
        default: "0",
        help: "Percent chance that a request times out.",
        kind: Kind::Percent {
            set: |j, v| j.timeout_prob = v,
        },
    },
    OptDef {
        name: "requeue_prob",
        aliases: &[],
        default: "0",
        help: "Percent chance that a request is requeued.",
        kind: Kind::Percent {
            set: |j, v| j.requeue_prob = v,
        },
    },
    OptDef {
        name: "fault_seed",
        aliases: &[],
        default: "",
        help: "Seed for fault injection's random generator.",
        kind: Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fault_seed = Some(v),
        },
    },
    OptDef {
        name: "max_sectors_kb",
        aliases: &[],
        default: "0",
        help: "Largest request in KiB (0 = driver default).",
        kind: Kind::Int {
            min: 0,
            max: 1 << 20,
            set: |j, v| j.max_sectors_kb = to_u32(v),
        },
    },
    OptDef {
        name: "max_segments",
        aliases: &[],
        default: "0",
        help: "Most data segments per request (0 = driver default).",
        kind: Kind::Int {
            min: 0,
            max: 65535,
            set: |j, v| j.max_segments = to_u32(v),
        },
    },
    OptDef {
        name: "nomerges",
        aliases: &[],
        default: "0",
        help: "Merging: 0 all, 1 only simple one-hit merges, 2 none.",
        kind: Kind::Int {
            min: 0,
            max: 2,
            set: |j, v| j.nomerges = to_u8(v),
        },
    },
    OptDef {
        name: "sq_sched_dispatch",
        aliases: &[],
        default: "1",
        help: "For a scheduler that is not MQ-aware, run only the submitter's hardware queue (seed 000); 0 runs them all.",
        kind: Kind::Bool {
            set: |j, v| j.sq_sched_dispatch = v,
        },
    },
    OptDef {
        name: "flush_via_sched",
        aliases: &[],
        default: "1",
        help: "PREFLUSH and FUA writes (a journal's commit records, NBD and vhost clients' FUA writes) go through the I/O scheduler, as since Linux 6.5; 0 sends them past it to the dispatch list, as before.",
        kind: Kind::Bool {
            set: |j, v| j.flush_via_sched = v,
        },
    },
    OptDef {
        name: "hctx_workers",
        aliases: &[],
        default: "0",
        help: "One completion worker thread per hardware queue reaps the driver and routes completions to submitters.",
        kind: Kind::Bool {
            set: |j, v| j.hctx_workers = v,
        },
    },
    OptDef {
        name: "fixedbufs",
        aliases: &[],
        default: "0",
        help: "io_uring registered buffers: the driver registers a buffer pool and the job's I/O uses READ_FIXED/WRITE_FIXED (driver=uring).",
        kind: Kind::Bool {
            set: |j, v| j.fixedbufs = v,
        },
    },
    OptDef {
        name: "hipri",
        aliases: &[],
        default: "0",
        help: "Use polled queues and poll for completions.",
        kind: Kind::Bool {
            set: |j, v| j.hipri = v,
        },
    },
];

/// The full option table, in the order `options_help` lists it.
pub fn option_table() -> &'static [OptDef] {
    OPTIONS
}

/// The table index of the option `key` names, if any.
pub(crate) fn find(key: &str) -> Option<usize> {
    OPTIONS.iter().position(|d| d.matches(key))
}

/// The table entry at `index` (an index from [`find`]).
pub(crate) fn def(index: usize) -> Option<&'static OptDef> {
    OPTIONS.get(index)
}

/// Prefix of scheduler tunables, which are passed through unvalidated.
pub(crate) const SCHED_PREFIX: &str = "sched.";

/// A human-readable list of every option: names, syntax, default and help, two lines
/// per option so that it stays readable in an 80-column terminal.
pub fn options_help() -> String {
    let mut out = String::from(
        "Job options (fio syntax: sizes take k/m/g/t/p suffixes, times d/h/m/s/ms/us/ns):\n",
    );
    for d in OPTIONS {
        let names = std::iter::once(d.name)
            .chain(d.aliases.iter().copied())
            .collect::<Vec<_>>()
            .join(" | ");
        let default = if d.default.is_empty() {
            "unset"
        } else {
            d.default
        };
        out.push_str(&format!(
            "  {names}  ({}, default {default})\n      {}\n",
            d.kind_description(),
            d.help
        ));
    }
    out.push_str("  sched.NAME=VALUE  (str)\n      Scheduler tunable, checked by the scheduler.\n");
    out
}

/// Applies `value` (None for a bare key) of option `d` to `job`.
pub(crate) fn apply(
    d: &OptDef,
    job: &mut JobSpec,
    value: Option<&str>,
) -> Result<(), JobErrorKind> {
    if let Kind::Bool { set } = d.kind {
        let on = match value {
            None => true,
            Some(text) => parse_bool(text).ok_or_else(|| bad_value(d, text, BOOL_SYNTAX))?,
        };
        set(job, on);
        return Ok(());
    }
    let text = value.ok_or_else(|| JobErrorKind::MissingValue {
        option: d.name.to_string(),
    })?;
    apply_text(d, job, text.trim())
}

/// Applies the text value of a non-boolean option.
fn apply_text(d: &OptDef, job: &mut JobSpec, text: &str) -> Result<(), JobErrorKind> {
    match d.kind {
        Kind::Int { min, max, set } => {
            let v = parse_size(text).ok_or_else(|| bad_value(d, text, INT_SYNTAX))?;
            check_range(d, text, v, min, max)?;
            set(job, v);
        }
        Kind::Size { set } => set(
            job,
            parse_size(text).ok_or_else(|| bad_value(d, text, SIZE_SYNTAX))?,
        ),
        Kind::Time { unit_ns, set } => set(
            job,
            parse_time_ns(text, unit_ns).ok_or_else(|| bad_value(d, text, TIME_SYNTAX))?,
        ),
        Kind::Bool { set } => set(
            job,
            parse_bool(text).ok_or_else(|| bad_value(d, text, BOOL_SYNTAX))?,
        ),
        Kind::Str { set } => set(job, text),
        Kind::Enum { values, set } => set(job, enum_index(d, values, text)?),
        Kind::Percent { set } => set(job, percent(d, text)?),
        Kind::Custom { set, .. } => set(job, text, d.name)?,
    }
    Ok(())
}

/// The index of `text` among an enum option's values (ASCII case-insensitive).
fn enum_index(d: &OptDef, values: &[&str], text: &str) -> Result<usize, JobErrorKind> {
    values
        .iter()
        .position(|v| v.eq_ignore_ascii_case(text))
        .ok_or_else(|| JobErrorKind::NotOneOf {
            option: d.name.to_string(),
            value: text.to_string(),
            allowed: values.join(", "),
        })
}

/// Parses and range-checks a percentage.
fn percent(d: &OptDef, text: &str) -> Result<f64, JobErrorKind> {
    let v = parse_percent(text).ok_or_else(|| bad_value(d, text, PERCENT_SYNTAX))?;
    if v > 100.0 {
        return Err(out_of_range(d.name, text, "0", "100"));
    }
    Ok(v)
}

/// Refuses integers outside `min..=max`.
fn check_range(d: &OptDef, text: &str, v: u64, min: u64, max: u64) -> Result<(), JobErrorKind> {
    if v < min || v > max {
        return Err(out_of_range(
            d.name,
            text,
            &min.to_string(),
            &max.to_string(),
        ));
    }
    Ok(())
}

fn out_of_range(option: &str, text: &str, min: &str, max: &str) -> JobErrorKind {
    JobErrorKind::OutOfRange {
        option: option.to_string(),
        value: text.to_string(),
        min: min.to_string(),
        max: max.to_string(),
    }
}

fn bad_value(d: &OptDef, text: &str, expected: &str) -> JobErrorKind {
    bad_named(d.name, text, expected)
}

fn bad_named(option: &str, text: &str, expected: &str) -> JobErrorKind {
    JobErrorKind::BadValue {
        option: option.to_string(),
        value: text.to_string(),
        expected: expected.to_string(),
    }
}

/// `rw=MODE[:N]`: a pattern and fio's modifier (a gap after each sequential I/O, or I/Os
/// per random offset).
fn set_rw(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let (mode, modifier, backward) = match text.split_once(':') {
        Some((m, n)) => {
            // `read:-8k`: each I/O starts 8k before the end of the one before.
            let (n, back) = match n.trim().strip_prefix('-') {
                Some(rest) => (rest, true),
                None => (n.trim(), false),
            };
            let n = parse_size(n).ok_or_else(|| {
                bad_named(
                    option,
                    text,
                    "MODE or MODE:N (N a size for sequential modes, a count for random ones)",
                )
            })?;
            (m.trim(), n, back)
        }
        None => (text, 0, false),
    };
    job.rw_modifier = modifier;
    job.rw_backward = backward;
    job.rw = match mode.to_ascii_lowercase().as_str() {
        "read" => RwMode::Read,
        "write" => RwMode::Write,
        "randread" => RwMode::RandRead,
        "randwrite" => RwMode::RandWrite,
        "randrw" => RwMode::RandRw,
        "readwrite" | "rw" => RwMode::ReadWrite,
        "trim" => RwMode::Trim,
        "randtrim" => RwMode::RandTrim,
        "trimwrite" => RwMode::TrimWrite,
        "randtrimwrite" => RwMode::RandTrimWrite,
        _ => {
            return Err(JobErrorKind::NotOneOf {
                option: option.to_string(),
                value: text.to_string(),
                allowed: "read, write, randread, randwrite, randrw, readwrite, rw, trim, randtrim, trimwrite, randtrimwrite".to_string(),
            })
        }
    };
    if backward && job.rw.is_random() {
        return Err(bad_named(
            option,
            text,
            "a negative N only for sequential modes (random ones take a count)",
        ));
    }
    Ok(())
}

/// `bs=`: one size for all directions or a `read,write,trim` list.
fn set_bs(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    match parse_bs_list(text, DEFAULT_BS) {
        BsList::Sizes(sizes) => {
            job.bs = sizes;
            // bs and bsrange set the same thing in fio: the later one counts.
            job.bsrange = None;
            Ok(())
        }
        BsList::BadSlot(slot) => Err(bad_named(option, &slot, SIZE_SYNTAX)),
        BsList::Unsupported(reason) => Err(JobErrorKind::Unsupported {
            option: option.to_string(),
            value: text.to_string(),
            reason: reason.to_string(),
        }),
    }
}

/// Splits fio's per-direction list `r,w,t`: one value applies to all, fewer than three
/// repeat the last, an empty slot keeps `default`.
fn per_direction<T: Clone>(
    text: &str,
    default: T,
    mut parse: impl FnMut(&str) -> Result<T, String>,
) -> Result<[T; 3], String> {
    let slots: Vec<&str> = text.split(',').map(str::trim).collect();
    if slots.len() > 3 {
        return Err("at most three values (read,write,trim) are allowed".into());
    }
    let mut out = [default.clone(), default.clone(), default.clone()];
    let mut last = default.clone();
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = match slots.get(i) {
            Some(&"") => default.clone(),
            Some(s) => parse(s)?,
            None => last.clone(),
        };
        last = slot.clone();
    }
    Ok(out)
}

/// A block size: a nonzero multiple of 512.
fn block_size(text: &str) -> Result<u64, String> {
    parse_size(text)
        .filter(|&v| v > 0 && v % 512 == 0 && v <= u64::from(u32::MAX / 2))
        .ok_or_else(|| format!("'{text}' is not a block size (a nonzero multiple of 512)"))
}

fn unsupported(option: &str, text: &str, reason: String) -> JobErrorKind {
    JobErrorKind::Unsupported {
        option: option.to_string(),
        value: text.to_string(),
        reason,
    }
}

/// A size, or fio's `N%` (of the device, so at most 100, except `io_size`, a multiple of
/// `size`): `(Some(bytes), None)` or `(None, Some(percent))`.
fn size_or_percent(text: &str, option: &str) -> Result<(Option<u64>, Option<f64>), JobErrorKind> {
    if let Some(p) = text.strip_suffix('%') {
        let max = if option == "io_size" { 1e9 } else { 100.0 };
        let pct = parse_percent(p)
            .filter(|v| *v > 0.0 && *v <= max)
            .ok_or_else(|| {
                bad_named(option, text, "a size, or a percentage from 1 to 100 with %")
            })?;
        return Ok((None, Some(pct)));
    }
    let v = parse_size(text).ok_or_else(|| bad_named(option, text, SIZE_SYNTAX))?;
    Ok((Some(v), None))
}

/// fio's data pattern (`buffer_pattern`, `verify_pattern`): `0x` hex digits (bytes in the
/// order written), a decimal number (its bytes, least significant first, as fio stores
/// `12345` as `39 30`), `"text"`, or `'file'` (its contents), one after another.
fn parse_pattern(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(hex) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
            let n = hex
                .find(|c: char| !c.is_ascii_hexdigit())
                .unwrap_or(hex.len());
            if n == 0 {
                return Err("0x without hex digits".into());
            }
            let digits = &hex[..n];
            let padded = if n % 2 == 1 {
                format!("0{digits}")
            } else {
                digits.to_string()
            };
            for i in (0..padded.len()).step_by(2) {
                out.push(u8::from_str_radix(&padded[i..i + 2], 16).map_err(|e| e.to_string())?);
            }
            rest = &hex[n..];
        } else if let Some(q) = rest.strip_prefix('"') {
            let end = q.find('"').ok_or("a quoted text without its closing \"")?;
            out.extend_from_slice(&q.as_bytes()[..end]);
            rest = &q[end + 1..];
        } else if let Some(q) = rest.strip_prefix('\'') {
            let end = q.find('\'').ok_or("a file name without its closing '")?;
            let data = std::fs::read(&q[..end]).map_err(|e| format!("'{}': {e}", &q[..end]))?;
            if data.is_empty() {
                return Err(format!("'{}' is empty", &q[..end]));
            }
            out.extend_from_slice(&data);
            rest = &q[end + 1..];
        } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let n = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let v: u64 = rest[..n]
                .parse()
                .map_err(|_| format!("'{}' is too large", &rest[..n]))?;
            let bytes = v.to_le_bytes();
            let used = (8 - (v.leading_zeros() / 8) as usize).max(1);
            out.extend_from_slice(&bytes[..used]);
            rest = &rest[n..];
        } else if rest.starts_with("%o") {
            return Err("the %o (block offset) format is not implemented".into());
        } else {
            return Err(format!(
                "'{rest}' is not 0x hex, a number, \"text\" or 'file'"
            ));
        }
        rest = rest.trim_start();
    }
    if out.is_empty() {
        return Err("an empty pattern".into());
    }
    Ok(out)
}

/// Records `option=Nz` (N zones) for [`JobSpec::zone_counts`] and says whether the value
/// was one; any other value clears an earlier one.
fn in_zones(job: &mut JobSpec, option: &'static str, text: &str) -> bool {
    job.zone_counts.retain(|(o, _)| *o != option);
    match text.strip_suffix('z').and_then(|n| n.parse::<u64>().ok()) {
        Some(n) => {
            job.zone_counts.push((option, n));
            true
        }
        None => false,
    }
}

/// `bsrange=min-max[,min-max[,min-max]]`.
fn set_bsrange(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let ranges = per_direction(text, (DEFAULT_BS, DEFAULT_BS), |slot| {
        let (lo, hi) = slot
            .split_once('-')
            .ok_or_else(|| format!("'{slot}' is not a range min-max"))?;
        let (lo, hi) = (block_size(lo.trim())?, block_size(hi.trim())?);
        // fio swaps a range given high-low.
        Ok((lo.min(hi), lo.max(hi)))
    })
    .map_err(|reason| unsupported(option, text, reason))?;
    job.bsrange = Some(ranges);
    Ok(())
}

/// `filesize=size` or `filesize=lo-hi`.
fn set_filesize(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let size = |t: &str| {
        parse_size(t.trim())
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("'{t}' is not a size above 0"))
    };
    let range = match text.split_once('-') {
        Some((lo, hi)) => size(lo).and_then(|lo| Ok((lo, size(hi)?))),
        None => size(text).map(|v| (v, v)),
    }
    .map_err(|reason| unsupported(option, text, reason))?;
    job.filesize = Some((range.0.min(range.1), range.0.max(range.1)));
    Ok(())
}

/// `file_service_type=roundrobin|sequential|random[:N]`, or `zipf|pareto|normal|gauss:P`
/// (the distribution's parameter, as `random_distribution` takes it).
fn set_file_service(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let (kind, nr) = match text.split_once(':') {
        Some((k, n)) => (k, Some(n)),
        None => (text, None),
    };
    let kind = match kind.trim() {
        "roundrobin" => FileServiceKind::RoundRobin,
        "sequential" => FileServiceKind::Sequential,
        "random" => FileServiceKind::Random,
        k @ ("zipf" | "pareto" | "normal" | "gauss") => {
            let name = if k == "gauss" { "normal" } else { k };
            let spec = match nr {
                Some(p) => format!("{name}:{}", p.trim()),
                None => name.to_string(),
            };
            let dist =
                Distribution::parse(&spec, parse_size).map_err(|r| unsupported(option, text, r))?;
            job.file_service = FileService {
                kind: FileServiceKind::Skewed,
                nr: 1,
                dist,
            };
            return Ok(());
        }
        other => {
            let known = "roundrobin, sequential, random, zipf, pareto, normal or gauss";
            return Err(unsupported(
                option,
                text,
                format!("'{other}' is not {known}"),
            ));
        }
    };
    let nr = match nr {
        None => 1,
        Some(n) => parse_size(n.trim())
            .filter(|&v| v > 0)
            .ok_or_else(|| unsupported(option, text, format!("':{n}' is not a count above 0")))?,
    };
    job.file_service = FileService {
        kind,
        nr,
        ..FileService::default()
    };
    Ok(())
}

/// `bssplit=size/pct:...[,...]`: one list for all directions or one per direction.
fn set_bssplit(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let default = vec![SplitEntry {
        size: DEFAULT_BS as u32,
        share: 10_000,
    }];
    let lists = per_direction(text, default, |slot| parse_split(slot, parse_size))
        .map_err(|reason| unsupported(option, text, reason))?;
    job.bssplit = Some(lists);
    Ok(())
}

/// `blockalign=size[,size[,size]]`.
fn set_blockalign(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let aligns = per_direction(text, 0, block_size).map_err(|r| unsupported(option, text, r))?;
    job.blockalign = Some(aligns);
    Ok(())
}

/// `random_distribution=`.
fn set_random_distribution(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    job.random_distribution =
        Distribution::parse(text, parse_size).map_err(|r| unsupported(option, text, r))?;
    Ok(())
}

/// `startdelay=time` or `startdelay=min-max` (seconds without a unit).
fn set_startdelay(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let time =
        |t: &str| parse_time_ns(t.trim(), SEC).ok_or_else(|| bad_named(option, text, TIME_SYNTAX));
    job.startdelay_ns = match text.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (time(lo)?, time(hi)?);
            (lo.min(hi), lo.max(hi))
        }
        None => {
            let t = time(text)?;
            (t, t)
        }
    };
    Ok(())
}

/// `virtqueue_size=`: `auto` (sysfs) or a descriptor count, 0 for no limit.
fn set_virtqueue_size(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    job.virtqueue_size = if text.eq_ignore_ascii_case("auto") {
        None
    } else {
        let n: u32 = text
            .parse()
            .map_err(|_| bad_named(option, text, "auto or a descriptor count (0: no limit)"))?;
        if n != 0 && !(3..=32768).contains(&n) {
            return Err(JobErrorKind::OutOfRange {
                option: option.to_string(),
                value: text.to_string(),
                min: "3".into(),
                max: "32768 (VIRTIO_BLK_MAX_SG_ELEMS)".into(),
            });
        }
        Some(n)
    };
    Ok(())
}

/// `ioengine=`: an engine mqblk runs (see [`super::engine`]), or a line saying why not.
fn set_ioengine(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    if text.is_empty() {
        job.ioengine = None;
        return Ok(());
    }
    super::engine::classify(text).map_err(|reason| JobErrorKind::Unsupported {
        option: option.to_string(),
        value: text.to_string(),
        reason,
    })?;
    job.ioengine = Some(text.trim().to_ascii_lowercase());
    Ok(())
}

/// `cpus_allowed=`: a CPU list like `0-3,6`.
fn set_cpus_allowed(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    job.cpus_allowed = parse_cpu_list(text)
        .ok_or_else(|| bad_named(option, text, "a CPU list (expected e.g. 0-3,6)"))?;
    Ok(())
}

/// `percentile_list=`: colon-separated percentiles.
fn set_percentile_list(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    job.percentile_list = parse_percentile_list(text).ok_or_else(|| {
        bad_named(
            option,
            text,
            "a percentile list (expected up to 20 colon-separated numbers in (0, 100])",
        )
    })?;
    Ok(())
}

/// Levenshtein distance, used only to suggest a close option name.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            let best = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
            cur.push(best);
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// Longest unknown name worth comparing; longer input is clearly not a typo of an
/// option, and skipping it keeps hostile input from costing quadratic time.
const MAX_SUGGEST_LEN: usize = 64;

/// The closest known name within edit distance 2 of `key`, among the table's names and
/// aliases plus `extra` (e.g. the tool's own command-line options).
pub(crate) fn suggest(key: &str, extra: &[&str]) -> Option<String> {
    if key.len() > MAX_SUGGEST_LEN {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    let table_names = OPTIONS
        .iter()
        .flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied()));
    table_names
        .chain(extra.iter().copied())
        .map(|name| (edit_distance(&lower, name), name))
        .filter(|(dist, _)| *dist <= 2)
        .min_by_key(|(dist, _)| *dist)
        .map(|(_, name)| name.to_string())
}
