//! The command line: every subcommand's options as `clap` definitions.
//!
//! fio's options stay fio's: `mqblk bench` and `mqblk sim` hand them, in order, to the fio
//! parser of `mqblk-workload` (options before the first `--name=` are global, job files
//! are positional). mqblk's own options of a subcommand may appear anywhere among them;
//! [`split_known`] picks them out for clap by the names clap knows.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "mqblk",
    version,
    about = "The Linux multi-queue block layer and its I/O schedulers in userspace: fio-compatible benchmarks, a deterministic simulator, blktrace capture and replay, and an NBD server.",
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run fio-compatible jobs through the block layer (mqblk bench --help)
    #[command(disable_help_flag = true)]
    Bench(Passthrough),
    /// Run the same jobs in the deterministic simulator (mqblk sim --help)
    #[command(disable_help_flag = true)]
    Sim(Passthrough),
    /// Reproduce a seed mail's experiment in the simulator (mqblk scenario list)
    Scenario(ScenarioArgs),
    /// Replay a blktrace capture through the stack
    Replay(ReplayArgs),
    /// Capture a block device's requests as blktrace files; print trace files
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Export devices over NBD, one software queue per connection
    Serve(Box<ServeArgs>),
    /// Read or change a running server's queues through its --admin socket: the scheduler,
    /// nr_requests and tunables, by their sysfs paths (mqblk ctl --help)
    Ctl(CtlArgs),
    /// Run one fio job file on a real block device through the kernel's schedulers (with
    /// fio) and through mqblk's of the same names (kernel set to none), alternating, and
    /// print each scheduler's effect over none in both stacks side by side (root)
    Twin(TwinArgs),
    /// Measure a device for the simulator (reads and writes by size, depth and pattern, the
    /// throughput ceilings, reads beside writes, flushes, the queue's shape) and write a
    /// profile that --device=profile:FILE.toml fits a model to
    Profile(ProfileArgs),
    /// Run a grid of simulations from a TOML file (GRID.toml [--backend=local|ray]
    /// [--output=FILE.csv|.json|.parquet]); runs in the Python package (python -m mqblk sweep)
    #[command(disable_help_flag = true)]
    Sweep(Passthrough),
    /// Make a private CA and server and client certificates for TLS in DIR (ca-cert.pem,
    /// server-cert.pem, server-key.pem, client-cert.pem, ...): for tests and private setups
    TlsCerts(TlsCertsArgs),
    /// List the I/O schedulers and their tunables
    Schedulers,
    /// Print the version
    Version,
}

/// Arguments handed on as they are: fio options, job files and the subcommand's own
/// options, parsed in a second step.
#[derive(Args, Debug)]
pub struct Passthrough {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// `mqblk sim`'s own options (everything else is fio's).
#[derive(Parser, Debug)]
#[command(
    name = "mqblk sim",
    about = "Runs fio-style jobs (the same options and job files as `mqblk bench`) through the \
             real core and schedulers in virtual time, against a device model (the job option \
             --device=SPEC, e.g. hdd,ncq=32; default: null with the jobs' queues, depth and \
             size), on virtual CPUs whose every step is charged from a cost table. The same \
             seed and options print the same output.",
    override_usage = "mqblk sim [OPTIONS] [FIO OPTIONS | JOBFILE...]\n       mqblk sim --fuzz [--seed N] [--runs N] [--ioscheduler=NAME] [-v]\n       mqblk sim --crash [--seed N] [--runs N] [--ioscheduler=NAME] [-v]"
)]
pub struct SimOpts {
    /// Virtual CPUs, one software queue each (default: enough for the jobs)
    #[arg(long)]
    pub cpus: Option<u16>,
    /// The run's seed
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Override one entry of the CPU cost table, NAME=NS (repeatable; --cost=help lists them)
    #[arg(long = "cost", value_name = "NAME=NS")]
    pub costs: Vec<String>,
    /// Whose scheduler costs to charge: mqblk's own hooks (to predict mqblk) or the
    /// kernel's, measured by scripts/kernel-cost.sh (to predict the kernel)
    #[arg(long = "cost-profile", default_value = "mqblk", value_parser = ["kernel", "mqblk"])]
    pub cost_profile: String,
    /// With --cost-profile=kernel: the kernel's scheduler costs as measured on the machine
    /// to predict (bash scripts/kernel-cost.sh --json > FILE; repeatable, the median of the
    /// runs), instead of the built-in ones
    #[arg(long = "kernel-costs", value_name = "FILE")]
    pub kernel_costs: Vec<PathBuf>,
    /// The machine's CPUs: a measured machine (xeon-gold-6242-2s, epyc-7773x) whose
    /// cache-line transfers between cores, LLCs and sockets cost what they cost there,
    /// NAME,key=value to change one figure, or custom,key=value... (--topology=help lists
    /// them); default: one line_ns between any two CPUs. --cpus defaults to its CPUs
    #[arg(long, value_name = "NAME[,KEY=VALUE...]")]
    pub topology: Option<String>,
    /// Check the queue's invariants every N events (1 = always)
    #[arg(long = "check-every", default_value_t = 1000)]
    pub check_every: u64,
    /// Random configurations from consecutive seeds, invariants checked after every event;
    /// prints `reproduce with:` for each failure
    #[arg(long)]
    pub fuzz: bool,
    /// Random configurations from consecutive seeds, each with a power cut at an instant
    /// drawn from its seed; checks that every write completed before a completed flush, and
    /// every completed FUA write, survived; prints `reproduce with:` for each violation
    #[arg(long, conflicts_with = "fuzz")]
    pub crash: bool,
    /// Runs of --fuzz or --crash (--ioscheduler=NAME runs only that scheduler)
    #[arg(long, default_value_t = 1000)]
    pub runs: u64,
    /// Plant a bug to see the checker catch it: with --fuzz drop-completion:N or
    /// double-completion:N (the Nth completion), zone-skip:N (the Nth write to a zoned
    /// device one block past its place); with --crash flush-early:N,
    /// fua-split-drop:N or reorder-past-flush:N (from the Nth flush, split piece or write on)
    #[arg(long, value_name = "BUG:N")]
    pub plant: Option<String>,
    /// With --fuzz or --crash: print the state dump of failures and every violation
    #[arg(short)]
    pub v: bool,
}

#[derive(Args, Debug)]
pub struct ScenarioArgs {
    /// The scenario, or `list`
    pub name: Option<String>,
    /// A shorter run (for a first look; figures are noisier)
    #[arg(long)]
    pub quick: bool,
    /// Results as JSON
    #[arg(long)]
    pub json: bool,
    /// The simulation seed
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Only these schedulers (repeatable), where the scenario compares several
    #[arg(long = "scheduler")]
    pub schedulers: Vec<String>,
    /// Where the chart goes (default NAME.svg; - for none)
    #[arg(long)]
    pub svg: Option<String>,
    /// Whose scheduler costs to charge: the kernel's (measured by scripts/kernel-cost.sh)
    /// or mqblk's own hooks
    #[arg(long = "cost-profile", default_value = "kernel", value_parser = ["kernel", "mqblk"])]
    pub cost_profile: String,
    /// Rerun with every physical model parameter and every cost scaled by 0.7 and 1.3 (one
    /// at a time) and with seeds 1..5, on all cores; print where the direction holds and the
    /// ratio it rests on (exit 3 if it fails anywhere)
    #[arg(long)]
    pub sensitivity: bool,
    /// Write each simulated run's events as blktrace files, run N (in the order runs start)
    /// as PREFIX.N.blktrace.* (stderr says which device and scheduler each ran), for
    /// `mqblk trace stats`, blkparse or btt
    #[arg(long, value_name = "PREFIX")]
    pub trace: Option<PathBuf>,
}

#[derive(Args, Debug)]
#[command(
    about = "Replays the queue (Q) events of a blktrace capture (TRACE.blktrace.N files, or one such file) through the block layer in the simulator: each traced process becomes a job on the CPU it was traced on, keeping its process id as the issuer id (so BFQ sees the same processes)."
)]
pub struct ReplayArgs {
    /// The trace: a name (NAME.blktrace.N files) or one file
    pub trace: PathBuf,
    /// Device model, as for mqblk sim
    #[arg(long, default_value = "hdd")]
    pub device: String,
    /// Scheduler (a name or alias)
    #[arg(long, default_value = "mq-deadline")]
    pub ioscheduler: String,
    /// A scheduler tunable, written --sched.NAME=VALUE (repeatable)
    #[arg(long = "sched", value_name = "NAME=VALUE", value_parser = tunable_pair)]
    pub tunables: Vec<(String, String)>,
    /// open: original timing (scaled by --speed); closed: as fast as possible with each
    /// process's original concurrency
    #[arg(long, default_value = "closed", value_parser = ["open", "closed"])]
    pub mode: String,
    /// Open loop: replay F times faster than traced
    #[arg(long, default_value_t = 1.0, value_parser = positive_f64)]
    pub speed: f64,
    /// Closed loop: inferred: a process that queued an I/O with none of its own in flight
    /// waits for its I/O to finish and for another process's completion since: the newest
    /// flush or PREFLUSH/FUA write (an fsync waiting on the journal's commit), else the
    /// newest; then thinks as long as it did in the trace; none: only its concurrency holds
    /// it back
    #[arg(long, default_value = "inferred", value_parser = ["inferred", "none"])]
    pub waits: String,
    /// Virtual CPUs (default: enough for the traced CPUs)
    #[arg(long)]
    pub cpus: Option<u16>,
    /// Simulator seed
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the replay's own events as blktrace files NAME.blktrace.N (simulator)
    #[arg(long = "trace", value_name = "NAME")]
    pub out_trace: Option<PathBuf>,
    /// Replay through the threaded runtime on a real driver instead of the simulator (one
    /// thread per traced process); uring needs --filename
    #[arg(long, value_parser = ["sim", "null", "uring"])]
    pub driver: Option<String>,
    /// File or block device for --driver=uring (with --size to create one)
    #[arg(long)]
    pub filename: Option<String>,
    /// Device size for --driver=null, or to create or extend --filename
    #[arg(long, value_parser = size_arg)]
    pub size: Option<u64>,
    /// normal or json
    #[arg(long = "output-format", default_value = "normal", value_parser = ["normal", "json"])]
    pub output_format: String,
}

#[derive(Subcommand, Debug)]
pub enum TraceCmd {
    /// Record DEV's requests from the kernel's block tracepoints (tracefs; root) until the
    /// duration passes or Ctrl-C, as NAME.blktrace.CPU files that blkparse, btt and `mqblk
    /// replay` read. A partition is traced on its disk, limited to its sectors there.
    Capture {
        /// The block device
        #[arg(long)]
        device: PathBuf,
        /// Seconds to capture (default: until interrupted)
        #[arg(long, value_parser = positive_f64)]
        duration: Option<f64>,
        /// Output name: NAME.blktrace.CPU files
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
    },
    /// Print the events of one or more traces (merged by time) one per line, as blkparse
    /// prints them, then the count of each action
    Dump {
        /// Trace names or files
        #[arg(required = true)]
        traces: Vec<PathBuf>,
    },
    /// What each traced device did: requests issued, mean time in the scheduler (I2D) and on
    /// the device (D2C), requests in the driver, and the share of time the device was busy,
    /// idle while requests waited in the scheduler, or empty
    Stats {
        /// Trace names or files (merged by time)
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        /// normal or json
        #[arg(long = "output-format", default_value = "normal", value_parser = ["normal", "json"])]
        output_format: String,
    },
}

#[derive(Args, Debug, Default)]
#[command(
    about = "Exports devices over NBD (fixed newstyle; simple, structured and extended replies) to any NBD client: nbdinfo, nbdcopy, qemu-img, fio's nbd engine, the kernel's nbd driver. Each connection gets a software queue of its own, mapped onto the hardware queues. SIGINT/SIGTERM stop accepting, let in-flight requests finish, flush, and exit."
)]
pub struct ServeArgs {
    /// Where to listen: tcp:HOST:PORT or unix:PATH (repeatable; default tcp:127.0.0.1:10809)
    #[arg(long)]
    pub listen: Vec<String>,
    /// Export name (default "mqblk")
    #[arg(long, alias = "name")]
    pub export: Option<String>,
    /// The export's own options (also the keys of a config file's `[export.NAME]` tables)
    #[command(flatten)]
    pub export_opts: crate::serve::ExportOptions,
    /// Per-export and per-hardware-queue statistics as JSON on exit
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Write the requests as blktrace files NAME.blktrace.N (first export)
    #[arg(long, value_name = "NAME")]
    pub trace: Option<PathBuf>,
    /// Exports from a TOML file: `[server]` (listen, stats, admin) and `[export.NAME]` tables with the
    /// keys of the export options
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A Unix socket for runtime control (mqblk ctl): switch an export's scheduler, change
    /// its nr_requests or tunables while clients run
    #[arg(long)]
    pub admin: Option<PathBuf>,
    /// A --listen=unix: or --admin path holding a stale socket (nothing answers on it, as
    /// after a server was killed) is replaced; without this it is refused. Anything else
    /// that exists there (a file, a live server's socket) is always refused
    #[arg(long)]
    pub replace_stale_socket: bool,
    /// Close a session that has nothing in flight and sends nothing for this many seconds
    /// (default 3600; 0 keeps idle sessions forever, as a kernel nbd client mounted and left
    /// quiet may need)
    #[arg(long = "idle-timeout", value_name = "SECS")]
    pub idle_timeout: Option<u64>,
    /// TLS as nbdkit's --tls: off (STARTTLS refused), on (offered, clients choose), require
    /// (only STARTTLS or ABORT in the clear). Default: on with --tls-certificates, else off
    #[arg(long, value_name = "off|on|require")]
    pub tls: Option<String>,
    /// The TLS credentials directory as nbdkit and QEMU lay it out: server-cert.pem and
    /// server-key.pem, and ca-cert.pem for --tls-verify-peer (mqblk tls-certs DIR makes one)
    #[arg(long = "tls-certificates", value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// With TLS: clients must present a certificate signed by the directory's ca-cert.pem
    #[arg(long = "tls-verify-peer")]
    pub tls_verify_peer: bool,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// The file or block device to measure (a missing file is made with --size); a block
    /// device is only read unless --write-ok
    #[arg(long)]
    pub filename: Option<PathBuf>,
    /// Measure a simulator model instead (hdd, ssd,... with parameters): the fitted
    /// model's check against the model it was measured on
    #[arg(long)]
    pub device: Option<String>,
    /// The region the jobs cover (default: the file's size; 4g for a model)
    #[arg(long, value_parser = size_arg)]
    pub size: Option<u64>,
    /// Write the profile here (default: standard output)
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Each measurement for 1.5 s instead of 7.5 (about 30 s in all)
    #[arg(long)]
    pub quick: bool,
    /// Measure writes on a block device too (they overwrite the region)
    #[arg(long = "write-ok")]
    pub write_ok: bool,
    /// Run the measurements through this fio binary (the kernel's own path from an
    /// application to the device, as `mqblk twin` measures the kernel) instead of mqblk
    /// bench; the kernel's scheduler on the disk is left as it is
    #[arg(long, value_name = "FIO", conflicts_with = "device")]
    pub fio: Option<PathBuf>,
    /// Measure nothing: print the model fitted to this profile, its parameters in physical
    /// terms (crates/models/DEVICES.md)
    #[arg(long, value_name = "PROFILE", conflicts_with_all = ["filename", "device", "fio", "output", "quick", "write_ok", "size"])]
    pub fit: Option<PathBuf>,
    /// With --fit: normal (a line per parameter) or json
    #[arg(long = "output-format", value_parser = ["normal", "json"])]
    pub output_format: Option<String>,
}

#[derive(Args, Debug)]
pub struct TlsCertsArgs {
    /// The directory to write (created if missing; existing files are never overwritten)
    pub dir: PathBuf,
    /// A name or IP address the server certificate is valid for (repeatable; default
    /// localhost)
    #[arg(long)]
    pub hostname: Vec<String>,
}

#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The server's --admin socket
    #[arg(long)]
    pub admin: PathBuf,
    /// show or store
    #[arg(value_parser = ["show", "store"])]
    pub op: String,
    /// EXPORT/queue/scheduler, EXPORT/queue/nr_requests, EXPORT/queue/iosched[/NAME]
    pub path: String,
    /// The value to store
    pub value: Option<String>,
}

fn positive_f64(v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| format!("'{v}': expected a positive number"))
}

fn size_arg(v: &str) -> Result<u64, String> {
    mqblk_workload::parse_size(v).ok_or_else(|| format!("'{v}': not a size"))
}

/// Rewrites `--sched.NAME=VALUE` (the kernel's tunable names after `sched.`) as
/// `--sched=NAME=VALUE` for clap.
pub fn sched_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter()
        .map(|a| match a.strip_prefix("--sched.") {
            Some(rest) => format!("--sched={rest}"),
            None => a,
        })
        .collect()
}

/// `--sched NAME=VALUE`: one scheduler tunable.
pub(crate) fn tunable_pair(t: &str) -> Result<(String, String), String> {
    t.split_once('=')
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .ok_or_else(|| format!("'{t}': expected --sched.NAME=VALUE"))
}

/// A clap error as one line: `mqblk SUBCOMMAND...: what is wrong (mqblk SUBCOMMAND --help)`.
/// clap's own rendering spreads it over a paragraph, a usage line and a tip.
pub fn one_line_error(argv: &[String], e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text
        .split("\n\n")
        .next()
        .unwrap_or("")
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let what = first.strip_prefix("error: ").unwrap_or(&first);
    // The subcommand path: the words before the first option or value clap complained of.
    let path: Vec<&str> = argv
        .iter()
        .skip(1)
        .take_while(|a| {
            matches!(
                a.as_str(),
                "bench"
                    | "sim"
                    | "scenario"
                    | "replay"
                    | "trace"
                    | "capture"
                    | "dump"
                    | "serve"
                    | "schedulers"
                    | "version"
            )
        })
        .map(String::as_str)
        .collect();
    let cmd = std::iter::once("mqblk")
        .chain(path.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    format!("{cmd}: {what} ({cmd} --help)")
}

/// Splits `args` into the options `T`'s command knows (with their values) and the rest, in
/// order; then parses the known ones. `--help` and `-h` count as known.
pub fn split_known<T: Parser>(args: &[String]) -> Result<(T, Vec<String>), clap::Error> {
    let mut cmd = T::command();
    cmd.build();
    let takes_value = |a: &clap::Arg| a.get_num_args().is_some_and(|n| n.takes_values());
    let mut known = vec![cmd.get_name().to_string()];
    let mut rest = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let arg = if let Some(long) = a.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or("");
            cmd.get_arguments().find(|x| x.get_long() == Some(name))
        } else if a.len() == 2 && a.starts_with('-') {
            let c = a.chars().nth(1);
            cmd.get_arguments().find(|x| x.get_short() == c)
        } else {
            None
        };
        match arg {
            Some(x) => {
                known.push(a.clone());
                if takes_value(x) && !a.contains('=') && i + 1 < args.len() {
                    i += 1;
                    known.push(args[i].clone());
                }
            }
            None => rest.push(a.clone()),
        }
        i += 1;
    }
    let m = cmd.try_get_matches_from(known)?;
    Ok((T::from_arg_matches(&m)?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sim_options_anywhere_among_fio_options_with_either_value_syntax() {
        let (o, rest) = split_known::<SimOpts>(&v(&[
            "--rw=randread",
            "--seed",
            "7",
            "--name=x",
            "--cpus=4",
            "--iodepth=8",
        ]))
        .unwrap();
        assert_eq!((o.seed, o.cpus), (7, Some(4)));
        assert_eq!(rest, v(&["--rw=randread", "--name=x", "--iodepth=8"]));
    }

    #[test]
    fn every_subcommand_parses_and_has_help() {
        Cli::command().debug_assert();
        let r = Cli::try_parse_from(sched_args(v(&[
            "mqblk",
            "replay",
            "t",
            "--device",
            "ssd",
            "--sched.fifo_batch=8",
        ])))
        .unwrap();
        match r.cmd {
            Some(Cmd::Replay(a)) => {
                assert_eq!(a.device, "ssd");
                assert_eq!(a.tunables, [("fifo_batch".to_string(), "8".to_string())]);
            }
            other => panic!("{other:?}"),
        }
        for sub in [
            vec!["scenario", "--help"],
            vec!["replay", "--help"],
            vec!["trace", "--help"],
            vec!["trace", "capture", "--help"],
            vec!["trace", "dump", "--help"],
            vec!["serve", "--help"],
            vec!["ctl", "--help"],
        ] {
            let e = Cli::try_parse_from(std::iter::once("mqblk").chain(sub.iter().copied()))
                .unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{sub:?}");
        }
    }
}

/// `mqblk twin`'s options.
#[derive(Args, Debug)]
#[command(
    after_help = "The job file holds fio options both stacks accept (no filename or ioscheduler: twin sets them). Each repeat runs every scheduler in both stacks, alternating the order; the device's scheduler and its tunables are restored on every exit, Ctrl-C included. An effect is the metric under a scheduler divided by the metric under none in the same stack and repeat; the table gives the median and the range over repeats.",
    group(clap::ArgGroup::new("what").required(true).args(["jobfile", "suite", "resim"]))
)]
pub struct TwinArgs {
    /// The fio job file
    pub jobfile: Option<PathBuf>,
    /// Run the suite of a directory instead: every workload its `suite.toml` lists, each
    /// with its own schedulers, and one table judging every effect against the kernel's
    #[arg(long, value_name = "DIR")]
    pub suite: Option<PathBuf>,
    /// The block device, or a file on one (its disk's scheduler is the kernel's side)
    #[arg(long, required_unless_present = "resim")]
    pub filename: Option<PathBuf>,
    /// Schedulers to compare (none is always run, as the baseline); default
    /// mq-deadline,kyber,bfq. With --suite: only these, in the workloads that list them
    #[arg(long, value_delimiter = ',')]
    pub schedulers: Option<Vec<String>>,
    /// Repeats of the whole round (medians need at least 3)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=i64::from(mqblk_twin::MAX_REPEATS)))]
    pub repeats: u32,
    /// A tunable for one scheduler in both stacks, written SCHED:NAME=VALUE (repeatable),
    /// e.g. bfq:low_latency=0
    #[arg(long = "sched", value_name = "SCHED:NAME=VALUE")]
    pub tunables: Vec<String>,
    /// The fio binary
    #[arg(long, default_value = "fio")]
    pub fio: String,
    /// Add the simulator's prediction as a third stack: the same jobs in `mqblk sim` on a
    /// model fitted to the disk's profile (made first, quick, with the kernel at none, unless
    /// --profile gives one)
    #[arg(long)]
    pub sim: bool,
    /// The profile --sim fits its model to (mqblk profile --output=FILE); implies --sim
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// The kernel's scheduler costs the simulator charges, as measured on this machine
    /// (bash scripts/kernel-cost.sh --json > FILE; repeatable, the median of the runs);
    /// default: the built-in ones
    #[arg(long = "kernel-costs", value_name = "FILE")]
    pub kernel_costs: Vec<PathBuf>,
    /// Run only the simulator's stack of a saved result again (mqblk twin ...
    /// --output-format=json, one job file or a suite), on the model fitted to --profile, and
    /// judge it against the kernel's figures saved there: no device, no root. Give the saved
    /// run's --sched tunables too
    #[arg(
        long,
        value_name = "SAVED.json",
        requires = "profile",
        conflicts_with_all = ["jobfile", "suite", "filename", "schedulers", "fio", "sim"]
    )]
    pub resim: Option<PathBuf>,
    /// Seconds one run (fio, mqblk bench or sim, the profile) may take: one still going
    /// then is stopped (SIGTERM, SIGKILL 10 s later) and run once more; a second one that
    /// outlasts it ends the twin with a line naming it
    #[arg(long = "run-timeout", value_name = "SECONDS", default_value_t = mqblk_twin::RUN_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub run_timeout: u64,
    /// normal (a table) or json
    #[arg(long = "output-format", default_value = "normal", value_parser = ["normal", "json"])]
    pub output_format: String,
}

/// Prints a command's error on standard error, every line of it as `mqblk CMD: line`
/// (a job file's problems come one per line, all at once).
pub fn print_error(cmd: &str, e: &dyn std::fmt::Display) {
    for line in e.to_string().lines() {
        eprintln!("mqblk {cmd}: {line}");
    }
}
