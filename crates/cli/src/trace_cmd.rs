//! `mqblk trace`: capture a real block device's requests as blktrace files, and print trace
//! files one event per line.

use mqblk_trace::capture;
use mqblk_trace::TraceSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "\
usage: mqblk trace capture --device=DEV [--duration=SECONDS] -o NAME
       mqblk trace dump NAME|FILE...

capture  records DEV's requests from the kernel's block tracepoints (tracefs; root) until
         the duration passes or Ctrl-C, and writes NAME.blktrace.CPU files that blkparse,
         btt and `mqblk replay` read. It uses a tracefs instance of its own and leaves the
         tracing state as it found it. A partition is traced on its disk, limited to its
         sectors there, as blktrace does.
dump     prints the events of one or more traces (merged by time) one per line, as
         blkparse prints them, then the count of each action.
";

pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mqblk trace: {e}");
            2
        }
    }
}

fn run(args: &[String]) -> Result<i32, String> {
    match args.first().map(String::as_str) {
        Some("capture") => capture_cmd(&args[1..]),
        Some("dump") => dump(&args[1..]),
        Some("-h" | "--help") | None => {
            print!("{USAGE}");
            Ok(0)
        }
        Some(other) => Err(format!("unknown subcommand '{other}'\n{USAGE}")),
    }
}

fn capture_cmd(args: &[String]) -> Result<i32, String> {
    let mut device = None;
    let mut duration = None;
    let mut out = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| format!("{flag} needs a value"))
                }
            }
        };
        match flag {
            "--device" => device = Some(PathBuf::from(value()?)),
            "--duration" => {
                let v = value()?;
                let s: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("--duration={v}: expected seconds > 0"))?;
                duration = Some(Duration::from_secs_f64(s));
            }
            "-o" | "--output" => out = Some(PathBuf::from(value()?)),
            _ => return Err(format!("capture: unknown option '{a}'")),
        }
        i += 1;
    }
    let device = device.ok_or("capture: --device=DEV is required")?;
    let out = out.ok_or("capture: -o NAME is required")?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("installing the signal handler: {e}"))?;
    }
    eprintln!(
        "capturing {} {}; Ctrl-C to stop",
        device.display(),
        duration.map_or("until interrupted".to_string(), |d| format!(
            "for {:.1} s",
            d.as_secs_f64()
        ))
    );
    let c = capture::capture(&device, duration, &out, &stop)?;
    let total: u64 = c.counts.values().sum();
    println!(
        "captured {total} events ({}) into {} file(s): {}",
        mqblk_trace::writer::summary(&c.counts),
        c.files.len(),
        c.files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
    );
    if c.lost > 0 {
        eprintln!(
            "warning: the kernel dropped {} events (its trace buffer was full); the trace is incomplete",
            c.lost
        );
    }
    if c.unparsed > 0 {
        eprintln!(
            "warning: {} lines of trace_pipe were not block events (filter: {})",
            c.unparsed, c.filter
        );
    }
    Ok(0)
}

fn dump(args: &[String]) -> Result<i32, String> {
    if args.is_empty() {
        return Err(format!("dump: give a trace name or file\n{USAGE}"));
    }
    let set = TraceSet::open_all(args)?;
    let mut out = String::new();
    let mut events = 0u64;
    for line in set.blkparse_lines() {
        out.push_str(&line);
        out.push('\n');
        events += 1;
    }
    out.push_str(&format!(
        "{events} events: {}\n",
        mqblk_trace::writer::summary(&set.counts())
    ));
    // A reader that goes away early (`| head`) is not an error.
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(0)
}
