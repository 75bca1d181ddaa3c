//! The `mqblk` command as a function of its arguments: `main.rs` calls it, and so does a
//! program that adds schedulers of its own first (`mqblk_sched::register`; the example in
//! `examples/mqfq`), so that every subcommand takes them by name.

use crate::args::{self, Cli, Cmd};
use crate::{admin, bench, profile, replay, serve, sim, trace_cmd, twin};
use clap::Parser;

/// Runs the `mqblk` command line `argv` (the program's name first); returns the exit code.
pub fn run(argv: Vec<String>) -> i32 {
    let mut argv = argv;
    // Outside the fio option syntax of bench and sim, scheduler tunables are written as
    // `--sched.NAME=VALUE` too.
    if matches!(argv.get(1).map(String::as_str), Some("replay" | "serve")) {
        argv = args::sched_args(argv);
    }
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            eprintln!("{}", args::one_line_error(&argv, &e));
            return 2;
        }
        Err(e) => {
            // --help and --version: clap prints them.
            let _ = e.print();
            return 0;
        }
    };
    match cli.cmd {
        Some(Cmd::Bench(a)) => bench::main(&a.args),
        Some(Cmd::Sim(a)) => sim::main(&a.args),
        Some(Cmd::Scenario(a)) => sim::scenario_main(a),
        Some(Cmd::Replay(a)) => replay::main(a),
        Some(Cmd::Trace(a)) => trace_cmd::main(a),
        Some(Cmd::Serve(a)) => serve::main(*a),
        Some(Cmd::Ctl(a)) => admin::ctl_main(a),
        Some(Cmd::Twin(a)) => twin::main(a),
        Some(Cmd::Profile(a)) => profile::main(a),
        Some(Cmd::Sweep(a)) => sweep(&a.args),
        Some(Cmd::TlsCerts(a)) => serve::tls_certs_main(a),
        Some(Cmd::Schedulers) => {
            print_schedulers();
            0
        }
        Some(Cmd::Version) => {
            println!("mqblk {}", env!("CARGO_PKG_VERSION"));
            0
        }
        None => {
            use clap::CommandFactory;
            let _ = Cli::command().print_help();
            0
        }
    }
}

/// `mqblk sweep`: the sweep lives in the Python package (one implementation, with its Ray
/// backend), run by the interpreter `MQBLK_PYTHON` names (default `python3`).
fn sweep(args: &[String]) -> i32 {
    use std::process::{Command, Stdio};
    let py = std::env::var("MQBLK_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = Command::new(&py)
        .args(["-c", "import mqblk"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !found.is_ok_and(|s| s.success()) {
        eprintln!(
            "mqblk sweep: the mqblk Python package is not importable by {py} (set MQBLK_PYTHON, or install it as docs/python.md shows)"
        );
        return 2;
    }
    match Command::new(&py)
        .args(["-m", "mqblk", "sweep"])
        .args(args)
        .status()
    {
        Ok(s) => s.code().unwrap_or(1),
        Err(e) => {
            eprintln!("mqblk sweep: {py}: {e}");
            2
        }
    }
}

fn print_schedulers() {
    for e in mqblk_sched::all() {
        let alias = e.alias.map(|a| format!(" (alias {a})")).unwrap_or_default();
        let mq = if e.features.contains(mqblk_core::ElvFeatures::MQ_AWARE) {
            ", MQ_AWARE"
        } else {
            ""
        };
        println!("{}{alias}{mq}", e.name);
        for t in e.tunables {
            println!(
                "  {:<20} default {:<10} {:<10} range {}..={}  {}",
                t.name, t.default, t.unit, t.min, t.max, t.help
            );
        }
        for a in e.aliases {
            println!("  {:<20} the same as {} in {}", a.name, a.target, a.unit);
        }
    }
}
