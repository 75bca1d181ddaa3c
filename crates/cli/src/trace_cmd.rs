//! `mqblk trace`: capture a real block device's requests as blktrace files, print trace
//! files one event per line, and sum up what they say of each device.

use crate::args::TraceCmd;
use crate::CliError;
use mqblk_trace::capture;
use mqblk_trace::TraceSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub fn main(cmd: TraceCmd) -> i32 {
    let r = match cmd {
        TraceCmd::Capture {
            device,
            duration,
            output,
        } => capture_cmd(device, duration.map(Duration::from_secs_f64), output),
        TraceCmd::Dump { traces } => dump(&traces),
        TraceCmd::Stats {
            traces,
            output_format,
        } => stats(&traces, output_format == "json"),
    };
    match r {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mqblk trace: {e}");
            2
        }
    }
}

fn capture_cmd(device: PathBuf, duration: Option<Duration>, out: PathBuf) -> Result<i32, CliError> {
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

fn dump(args: &[PathBuf]) -> Result<i32, CliError> {
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

fn stats(args: &[PathBuf], json: bool) -> Result<i32, CliError> {
    let set = TraceSet::open_all(args)?;
    let devices = mqblk_trace::stats::device_stats(&set.records);
    if devices.is_empty() {
        return Err(format!(
            "{}: no request events (I, D, C) to follow",
            args.iter()
                .map(|a| a.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        )
        .into());
    }
    if json {
        let v = serde_json::json!({ "devices": devices });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for d in &devices {
        println!(
            "device {},{}: {} requests issued in {:.3} s ({} reads, {} writes, {:.1} KiB each)",
            d.device >> 20,
            d.device & 0xfffff,
            d.issued,
            d.span_ns as f64 / 1e9,
            d.issued_reads,
            d.issued_writes,
            d.mean_kib
        );
        println!(
            "  in the scheduler (I2D) {} us; on the device (D2C) reads {} us, writes {} us, flushes and FUA writes ({}) {} us",
            us(d.i2d_us),
            us(d.d2c_read_us),
            us(d.d2c_write_us),
            d.issued_flush_fua,
            us(d.d2c_flush_fua_us)
        );
        println!(
            "  in the driver {:.2} on average, {} at most; time busy {:.1}%, idle with requests waiting {:.1}%, empty {:.1}%",
            d.mean_in_driver,
            d.max_in_driver,
            100.0 * d.busy,
            100.0 * d.waiting,
            100.0 * d.empty
        );
        if let Some(h) = d.held {
            println!(
                "  completions held back: {:.0}% of {} requests still in the driver when another came 30 us or more later completed less than 10 us apart from it",
                100.0 * h,
                d.held_pairs
            );
        }
    }
    Ok(0)
}

/// A `--trace=NAME` output of bench, sim, replay or serve: the writer the queue's tracer
/// hook feeds, and its summary line when the run ends.
pub struct TraceOut {
    writer: Arc<mqblk_trace::TraceWriter>,
    path: PathBuf,
}

impl TraceOut {
    /// The output `--trace` asks for, if any.
    pub fn open(path: Option<&std::path::Path>) -> Option<TraceOut> {
        path.map(|p| TraceOut {
            writer: Arc::new(mqblk_trace::TraceWriter::new(p)),
            path: p.to_path_buf(),
        })
    }

    /// The queue's tracer.
    pub fn tracer(&self) -> Arc<dyn mqblk_core::Tracer> {
        self.writer.clone()
    }

    /// Flushes the files and prints what they hold.
    pub fn finish(&self) -> Result<(), CliError> {
        let counts = self
            .writer
            .finish()
            .map_err(|e| format!("--trace={}: {e}", self.path.display()))?;
        eprintln!(
            "trace: {} ({})",
            self.path.display(),
            mqblk_trace::writer::summary(&counts)
        );
        Ok(())
    }
}

/// The tracer of an optional `--trace` output.
pub fn tracer_of(out: &Option<TraceOut>) -> Option<Arc<dyn mqblk_core::Tracer>> {
    out.as_ref().map(TraceOut::tracer)
}

/// Finishes an optional `--trace` output.
pub fn finish(out: &Option<TraceOut>) -> Result<(), CliError> {
    out.as_ref().map_or(Ok(()), TraceOut::finish)
}
