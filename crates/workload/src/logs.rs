//! fio's per-job logs (`write_lat_log`, `write_bw_log`, `write_iops_log`, `log_avg_msec`)
//! and the time series `--plot` draws.
//!
//! `write_hist_log=PREFIX` with `log_hist_msec=N` writes fio's `PREFIX_clat_hist.N.log`:
//! every N ms of a direction's completions (judged at a completion, as fio's
//! `add_clat_sample`) a line `time (ms), direction, block size, bins...` holding how many
//! completions fell in each of fio's 1856 latency bins since the direction's last line,
//! neighbouring bins summed in groups of 2^`log_hist_coarseness`. `per_job_logs=0` drops
//! the job number from every log's name, the clones of a run appending to one file;
//! `log_unix_epoch=1` counts time in ms since the Unix epoch; `log_max_value=1` puts the
//! largest latency of an averaged window in place of its mean.
//!
//! The files are fio's: `PREFIX_lat.N.log`, `PREFIX_clat.N.log`, `PREFIX_slat.N.log`,
//! `PREFIX_bw.N.log`, `PREFIX_iops.N.log`, N the job's number in the run (from 1), each line
//! `time (ms), value, direction (0 read, 1 write, 2 trim), block size[, offset], priority`
//! (the offset with `log_offset=1`; the priority 1 for a real-time I/O and 0 otherwise, or
//! with `log_prio=1` the I/O's whole priority value in hex, `0x4003` for be/3, as fio 3.33's
//! `flush_samples` writes them). Latencies are in
//! nanoseconds, bandwidth in KiB/s, IOPS in I/Os per second. With `log_avg_msec=0` every
//! I/O is a line (for bandwidth, its bytes over the time since the previous completion in
//! its direction; for IOPS, 1, as fio writes them); otherwise a line per direction per
//! window holds the window's mean (bandwidth and IOPS over the window), with block size
//! and offset 0, as fio's averaged logs.

use crate::Ddir;
use std::fmt::Write as _;

/// Which logs a job writes, and how they are averaged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogConfig {
    /// `write_lat_log=PREFIX` (lat, clat and slat logs).
    pub lat: Option<String>,
    /// `write_bw_log=PREFIX`.
    pub bw: Option<String>,
    /// `write_iops_log=PREFIX`.
    pub iops: Option<String>,
    /// `log_avg_msec` (0: a line per I/O).
    pub avg_ms: u64,
    /// `log_offset`: each line carries the I/O's offset.
    pub offset: bool,
    /// `log_prio`: the priority column holds the I/O's priority value, not whether it is
    /// real-time.
    pub prio: bool,
    /// `write_hist_log=PREFIX`, `log_hist_msec` (0: no lines) and `log_hist_coarseness`.
    pub hist: Option<String>,
    pub hist_msec: u64,
    pub hist_coarseness: u32,
    /// `per_job_logs=0`: files named without the job number, one per prefix for the run.
    pub shared_files: bool,
    /// `log_unix_epoch`: times in ms since the Unix epoch instead of since the job's start;
    /// `log_alternate_epoch`: since the epoch of clock `epoch_clock`
    /// (`log_alternate_epoch_clock_id`, a `clock_gettime` clock, which `log_unix_epoch`
    /// reads too: 0, `CLOCK_REALTIME`, by default).
    pub unix_epoch: bool,
    pub alternate_epoch: bool,
    pub epoch_clock: i32,
    /// `log_max_value`: an averaged latency line holds the window's largest.
    pub max_value: bool,
}

impl LogConfig {
    /// Whether log times count from a clock's epoch (`log_unix_epoch`,
    /// `log_alternate_epoch`) rather than from the job's start.
    pub fn epoch_based(&self) -> bool {
        self.unix_epoch || self.alternate_epoch
    }

    /// Whether any log is asked for.
    pub fn any(&self) -> bool {
        self.lat.is_some() || self.bw.is_some() || self.iops.is_some() || self.hist.is_some()
    }
}

/// One line of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    pub ms: u64,
    pub value: u64,
    pub dir: u8,
    pub bs: u32,
    pub offset: u64,
    /// The I/O's priority value (`class << 13 | level`); 0 on an averaged line.
    pub ioprio: u16,
}

/// The running sums of one direction in the current window.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    n: u64,
    bytes: u64,
    lat: u64,
    clat: u64,
    slat: u64,
    /// The largest of each (for `log_max_value`).
    max_lat: u64,
    max_clat: u64,
    max_slat: u64,
}

/// One line of the histogram log: when, which direction, the block size of the completion
/// that closed it, and the completions per (coarsened) bin since the direction's last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistLine {
    pub ms: u64,
    pub dir: u8,
    pub bs: u32,
    pub bins: Vec<u64>,
}

/// A direction's histogram-log state: the completion-latency histogram so far, its counts
/// at the last line, and when that was (fio's `io_hist`).
#[derive(Debug, Clone, Default)]
struct HistWindow {
    now: Option<crate::stats::LatHist>,
    last: Vec<u64>,
    last_ms: u64,
}

/// What a job logged: lines per log kind, and the windows' series for plots.
#[derive(Debug, Clone, Default)]
pub struct JobLogs {
    cfg: LogConfig,
    /// The window of averaged logs and of the plotted series, in nanoseconds.
    window_ns: u64,
    window_end: u64,
    open: [Window; 3],
    last_done: [u64; 3],
    pub lat: Vec<Line>,
    pub clat: Vec<Line>,
    pub slat: Vec<Line>,
    pub bw: Vec<Line>,
    pub iops: Vec<Line>,
    pub hist: Vec<HistLine>,
    hist_windows: [HistWindow; 3],
    /// For `--plot`: the job's I/O in time buckets of `bucket_ns` (from 1 ms, doubled
    /// whenever the job outgrows [`MAX_BUCKETS`]), per direction.
    buckets: Vec<[Window; 3]>,
    bucket_ns: u64,
    end_ns: u64,
}

/// Time buckets kept for plots; a longer job doubles the bucket width.
const MAX_BUCKETS: usize = 4096;

/// Points a plotted time line aims at.
const PLOT_POINTS: u64 = 60;

/// One plotted point: (end of its span in s, direction, IOPS, MiB/s, mean clat in us).
pub type Point = (f64, u8, f64, f64, f64);

/// The window kept while a job logs every I/O (`log_avg_msec=0`); nothing is averaged
/// over it then, it only paces the bookkeeping. fio's `bwavgtime` default.
const DEFAULT_WINDOW_MS: u64 = 500;

impl JobLogs {
    pub fn new(cfg: LogConfig) -> JobLogs {
        let ms = if cfg.avg_ms > 0 {
            cfg.avg_ms
        } else {
            DEFAULT_WINDOW_MS
        };
        JobLogs {
            cfg,
            window_ns: ms * 1_000_000,
            window_end: ms * 1_000_000,
            bucket_ns: 1_000_000,
            ..JobLogs::default()
        }
    }

    /// A completed I/O, `at_ns` after the job started.
    #[allow(clippy::too_many_arguments)]
    pub fn io(
        &mut self,
        at_ns: u64,
        dir: Ddir,
        bytes: u64,
        offset: u64,
        slat: u64,
        clat: u64,
        ioprio: u16,
    ) {
        self.roll(at_ns);
        let d = dir.index();
        let add = |w: &mut Window| {
            w.n += 1;
            w.bytes += bytes;
            w.lat += slat + clat;
            w.clat += clat;
            w.slat += slat;
        };
        add(&mut self.open[d]);
        let open = &mut self.open[d];
        open.max_lat = open.max_lat.max(slat + clat);
        open.max_clat = open.max_clat.max(clat);
        open.max_slat = open.max_slat.max(slat);
        if self.cfg.hist.is_some() && self.cfg.hist_msec > 0 {
            self.hist_sample(at_ns, d, bytes, clat);
        }
        let mut b = (at_ns / self.bucket_ns) as usize;
        while b >= MAX_BUCKETS {
            self.coarsen();
            b = (at_ns / self.bucket_ns) as usize;
        }
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, [Window::default(); 3]);
        }
        add(&mut self.buckets[b][d]);
        self.end_ns = self.end_ns.max(at_ns);
        if self.cfg.avg_ms == 0 {
            let line = |value| Line {
                ms: at_ns / 1_000_000,
                value,
                dir: d as u8,
                bs: bytes as u32,
                offset,
                ioprio,
            };
            if self.cfg.lat.is_some() {
                self.lat.push(line(slat + clat));
                self.clat.push(line(clat));
                self.slat.push(line(slat));
            }
            let since = at_ns.saturating_sub(self.last_done[d]).max(1);
            if self.cfg.bw.is_some() {
                self.bw.push(line(bytes * 1_000_000_000 / 1024 / since));
            }
            if self.cfg.iops.is_some() {
                self.iops.push(line(1));
            }
        }
        self.last_done[d] = at_ns;
    }

    /// fio's `add_clat_sample` for the histogram log: the completion counts in the
    /// direction's histogram, and a line once `log_hist_msec` passed since its last.
    fn hist_sample(&mut self, at_ns: u64, d: usize, bytes: u64, clat: u64) {
        let w = &mut self.hist_windows[d];
        let hist = w.now.get_or_insert_with(crate::stats::LatHist::new);
        hist.record(clat);
        let elapsed = at_ns / 1_000_000;
        // fio takes a zero `hist_last` as unset.
        if w.last_ms == 0 {
            w.last_ms = elapsed;
        }
        let window = elapsed.saturating_sub(w.last_ms);
        if window < self.cfg.hist_msec {
            return;
        }
        let bins = hist.bins();
        if w.last.is_empty() {
            w.last = vec![0; bins.len()];
        }
        let stride = 1usize << self.cfg.hist_coarseness.min(6);
        let delta: Vec<u64> = bins
            .chunks(stride)
            .zip(w.last.chunks(stride))
            .map(|(now, before)| {
                now.iter()
                    .zip(before)
                    .map(|(a, b)| a.saturating_sub(*b))
                    .sum()
            })
            .collect();
        w.last.copy_from_slice(bins);
        w.last_ms = elapsed - (window - self.cfg.hist_msec);
        self.hist.push(HistLine {
            ms: elapsed,
            dir: d as u8,
            bs: bytes as u32,
            bins: delta,
        });
    }

    /// Closes every window that ended by `at_ns`.
    fn roll(&mut self, at_ns: u64) {
        while at_ns >= self.window_end {
            let end = self.window_end;
            self.close_window(end, false);
            self.window_end += self.window_ns;
        }
    }

    /// Halves the time resolution of the plot buckets.
    fn coarsen(&mut self) {
        let merged = self
            .buckets
            .chunks(2)
            .map(|pair| {
                let mut m = pair[0];
                if let Some(second) = pair.get(1) {
                    for d in 0..3 {
                        m[d].n += second[d].n;
                        m[d].bytes += second[d].bytes;
                        m[d].lat += second[d].lat;
                        m[d].clat += second[d].clat;
                        m[d].slat += second[d].slat;
                    }
                }
                m
            })
            .collect();
        self.buckets = merged;
        self.bucket_ns *= 2;
    }

    /// The job's time line for plots: about `PLOT_POINTS` spans of equal length over the
    /// time it ran, each with its IOPS, bandwidth and mean completion latency.
    pub fn series(&self) -> Vec<Point> {
        let span_buckets = (self.end_ns / self.bucket_ns / PLOT_POINTS).max(1) as usize;
        let span_ns = span_buckets as u64 * self.bucket_ns;
        let mut out = Vec::new();
        for (i, chunk) in self.buckets.chunks(span_buckets).enumerate() {
            let start = i as u64 * span_ns;
            let end = (start + span_ns).min(self.end_ns.max(start + 1));
            // A last span of less than half the others is too short to give a rate (a job
            // ending just after a span began would show a spike); its I/O is in the totals.
            if (end - start) * 2 < span_ns {
                continue;
            }
            let secs = (end - start) as f64 / 1e9;
            for d in 0..3 {
                let (n, bytes, clat) = chunk.iter().fold((0, 0, 0), |a, w| {
                    (a.0 + w[d].n, a.1 + w[d].bytes, a.2 + w[d].clat)
                });
                if n > 0 {
                    let mib = bytes as f64 / 1_048_576.0 / secs;
                    let lat_us = clat as f64 / n as f64 / 1e3;
                    out.push((end as f64 / 1e9, d as u8, n as f64 / secs, mib, lat_us));
                }
            }
        }
        out
    }

    /// Writes the lines of the window ending at `end_ns`; a `partial` one (the job's end)
    /// only into the latency logs: fio 3.33 (`--runtime=1100ms --log_avg_msec=250`) ends
    /// its lat and clat logs with a line at 1100 and its bw and iops logs at 1000.
    fn close_window(&mut self, end_ns: u64, partial: bool) {
        let secs = self.window_ns as f64 / 1e9;
        for d in 0..3 {
            let w = std::mem::take(&mut self.open[d]);
            if w.n == 0 || self.cfg.avg_ms == 0 {
                continue;
            }
            let iops = w.n as f64 / secs;
            let kib = w.bytes as f64 / 1024.0 / secs;
            // Averaged lines stand for no one I/O: fio gives them priority 0.
            let line = |value: u64| Line {
                ms: end_ns / 1_000_000,
                value,
                dir: d as u8,
                bs: 0,
                offset: 0,
                ioprio: 0,
            };
            if self.cfg.lat.is_some() {
                let (lat, clat, slat) = if self.cfg.max_value {
                    (w.max_lat, w.max_clat, w.max_slat)
                } else {
                    (w.lat / w.n, w.clat / w.n, w.slat / w.n)
                };
                self.lat.push(line(lat));
                self.clat.push(line(clat));
                self.slat.push(line(slat));
            }
            if self.cfg.bw.is_some() && !partial {
                self.bw.push(line(kib.round() as u64));
            }
            if self.cfg.iops.is_some() && !partial {
                self.iops.push(line(iops.round() as u64));
            }
        }
    }

    /// Closes the last, partial window at the job's end (`at_ns` after its start).
    pub fn finish(&mut self, at_ns: u64) {
        self.roll(at_ns);
        self.end_ns = self.end_ns.max(at_ns);
        let full = self.window_ns;
        let covered = at_ns.saturating_sub(self.window_end - full).max(1);
        if self.open.iter().any(|w| w.n > 0) {
            // The partial window counts over the time it covered.
            self.window_ns = covered;
            self.close_window(at_ns, true);
            self.window_ns = full;
        }
    }

    /// Writes the job's log files; `number` is the job's number in the run (from 1) and
    /// `start_ms` when it started in ms since the epoch of the log's clock (for
    /// `log_unix_epoch` and `log_alternate_epoch`). With
    /// `per_job_logs=0` the clones share a file: one named in `written` (the files this run
    /// wrote so far, which this adds to) is appended to.
    pub fn write(
        &self,
        number: usize,
        start_ms: u64,
        written: &mut std::collections::HashSet<String>,
    ) -> Result<(), crate::WriteError> {
        let files: [(&Option<String>, &str, &[Line]); 5] = [
            (&self.cfg.lat, "lat", &self.lat),
            (&self.cfg.lat, "clat", &self.clat),
            (&self.cfg.lat, "slat", &self.slat),
            (&self.cfg.bw, "bw", &self.bw),
            (&self.cfg.iops, "iops", &self.iops),
        ];
        let base = if self.cfg.epoch_based() { start_ms } else { 0 };
        let name = |prefix: &str, kind: &str| {
            if self.cfg.shared_files {
                format!("{prefix}_{kind}.log")
            } else {
                format!("{prefix}_{kind}.{number}.log")
            }
        };
        for (prefix, kind, lines) in files {
            let Some(prefix) = prefix else { continue };
            let mut text = String::with_capacity(lines.len() * 28);
            for l in lines {
                let _ = write!(text, "{}, {}, {}, {}", base + l.ms, l.value, l.dir, l.bs);
                if self.cfg.offset {
                    let _ = write!(text, ", {}", l.offset);
                }
                if self.cfg.prio {
                    let _ = writeln!(text, ", 0x{:04x}", l.ioprio);
                } else {
                    // `ioprio_value_is_class_rt`.
                    let _ = writeln!(text, ", {}", u8::from(l.ioprio >> 13 == 1));
                }
            }
            put(name(prefix, kind), &text, written)?;
        }
        if let Some(prefix) = &self.cfg.hist {
            let mut text = String::new();
            for l in &self.hist {
                let _ = write!(text, "{}, {}, {}", base + l.ms, l.dir, l.bs);
                for b in &l.bins {
                    let _ = write!(text, ", {b}");
                }
                text.push('\n');
            }
            put(name(prefix, "clat_hist"), &text, written)?;
        }
        Ok(())
    }
}

/// Writes `text` to `path`, appending when this run already wrote it (fio's `flush_log`
/// opens a shared log for appending).
fn put(
    path: String,
    text: &str,
    written: &mut std::collections::HashSet<String>,
) -> Result<(), crate::WriteError> {
    use std::io::Write as _;
    let append = !written.insert(path.clone());
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(&path);
    file.and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| crate::WriteError::new(path, e))
}

/// Writes `--plot` charts of one job clone into `dir`: IOPS, bandwidth and mean completion
/// latency over time (from `logs`' windows) and the completion-latency CDF per direction
/// (from `stats`' histograms), as `NAME.N.iops.svg`, `.bw.svg`, `.lat.svg`, `.cdf.svg`.
pub fn write_charts(
    dir: &std::path::Path,
    stats: &crate::JobStats,
    number: usize,
    logs: Option<&JobLogs>,
) -> Result<(), crate::WriteError> {
    use crate::plot::{Chart, Series};
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::WriteError::new(format!("--plot={}", dir.display()), e))?;
    let name: String = stats
        .name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dirs = [
        (Ddir::Read, "read"),
        (Ddir::Write, "write"),
        (Ddir::Trim, "trim"),
    ];
    let series = logs.map(JobLogs::series).unwrap_or_default();
    // Seconds, or milliseconds for a job shorter than two seconds.
    let short = series.iter().all(|p| p.0 < 2.0);
    let (scale, unit) = if short { (1e3, "ms") } else { (1.0, "s") };
    let over_time = |pick: fn(&Point) -> f64| -> Vec<Series> {
        dirs.iter()
            .filter_map(|&(d, label)| {
                let points: Vec<(f64, f64)> = series
                    .iter()
                    .filter(|p| p.1 as usize == d.index())
                    .map(|p| (p.0 * scale, pick(p)))
                    .collect();
                (!points.is_empty()).then(|| Series {
                    name: label.to_string(),
                    points,
                })
            })
            .collect()
    };
    let charts = [
        ("iops", "IOPS", over_time(|p| p.2)),
        ("bw", "bandwidth (MiB/s)", over_time(|p| p.3)),
        ("lat", "mean completion latency (us)", over_time(|p| p.4)),
    ];
    for (file, y, series) in charts {
        let chart = Chart {
            title: format!("{} (job {number}): {y}", stats.name),
            x_label: format!("time since the job started ({unit})"),
            y_label: y.into(),
            log_x: false,
            series,
        };
        let path = dir.join(format!("{name}.{number}.{file}.svg"));
        std::fs::write(&path, chart.svg())
            .map_err(|e| crate::WriteError::new(path.display().to_string(), e))?;
    }
    let cdf: Vec<Series> = dirs
        .iter()
        .filter_map(|&(d, label)| {
            let hist = stats.dir(d).clat.hist.as_ref()?;
            let total: u64 = hist.nonzero_bins().map(|(_, c)| c).sum();
            let mut seen = 0;
            let points: Vec<(f64, f64)> = hist
                .nonzero_bins()
                .map(|(v, c)| {
                    seen += c;
                    (v as f64 / 1000.0, seen as f64 * 100.0 / total as f64)
                })
                .collect();
            (total > 0).then(|| Series {
                name: label.to_string(),
                points,
            })
        })
        .collect();
    let chart = Chart {
        title: format!("{} (job {number}): completion latency CDF", stats.name),
        x_label: "completion latency (us, log scale)".into(),
        y_label: "I/Os at or below (%)".into(),
        log_x: true,
        series: cdf,
    };
    let path = dir.join(format!("{name}.{number}.cdf.svg"));
    std::fs::write(&path, chart.svg())
        .map_err(|e| crate::WriteError::new(path.display().to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(avg_ms: u64) -> LogConfig {
        LogConfig {
            lat: Some("l".into()),
            bw: Some("b".into()),
            iops: Some("i".into()),
            avg_ms,
            ..LogConfig::default()
        }
    }

    /// The columns fio 3.33 writes: the priority last, the offset before it only with
    /// `log_offset`, the priority value in hex with `log_prio` (fio's own files, null
    /// engine, `--prioclass=2 --prio=3`: `0, 4076, 0, 4096, 1011712, 0x4003`).
    #[test]
    fn the_files_have_fio_s_columns() {
        let dir = std::env::temp_dir().join(format!("mqblk-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("j").display().to_string();
        let first_line = |cfg: LogConfig, ioprio: u16| {
            let mut l = JobLogs::new(LogConfig {
                lat: Some(prefix.clone()),
                ..cfg
            });
            l.io(1_500_000, Ddir::Read, 4096, 8192, 1_000, 20_000, ioprio);
            l.finish(3_000_000);
            l.write(1, 0, &mut Default::default()).unwrap();
            let text = std::fs::read_to_string(format!("{prefix}_clat.1.log")).unwrap();
            text.lines().next().unwrap().to_string()
        };
        assert_eq!(first_line(LogConfig::default(), 0), "1, 20000, 0, 4096, 0");
        let be3 = 2 << 13 | 3;
        assert_eq!(
            first_line(
                LogConfig {
                    offset: true,
                    prio: true,
                    ..LogConfig::default()
                },
                be3
            ),
            "1, 20000, 0, 4096, 8192, 0x4003"
        );
        // Without log_prio the column says whether the I/O is real-time.
        assert_eq!(
            first_line(LogConfig::default(), 1 << 13),
            "1, 20000, 0, 4096, 1"
        );
        assert_eq!(
            first_line(LogConfig::default(), be3),
            "1, 20000, 0, 4096, 0"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_line_per_io_without_averaging() {
        let mut l = JobLogs::new(cfg(0));
        l.io(1_500_000, Ddir::Read, 4096, 8192, 1_000, 20_000, 0);
        l.io(2_500_000, Ddir::Write, 8192, 0, 2_000, 30_000, 0);
        l.finish(3_000_000);
        assert_eq!(l.lat.len(), 2);
        assert_eq!(
            l.lat[0],
            Line {
                ms: 1,
                value: 21_000,
                dir: 0,
                bs: 4096,
                offset: 8192,
                ioprio: 0
            }
        );
        assert_eq!(l.clat[1].value, 30_000);
        assert_eq!(l.iops[1].value, 1);
        assert_eq!(l.iops[1].dir, 1);
    }

    #[test]
    fn averaged_lines_hold_each_windows_mean_and_rates() {
        let mut l = JobLogs::new(cfg(100));
        // 10 reads of 4 KiB in the first 100 ms, none in the second, 5 in the third.
        for i in 0..10 {
            l.io(i * 10_000_000, Ddir::Read, 4096, 0, 0, 1_000 * (i + 1), 0);
        }
        for i in 0..5 {
            l.io(
                200_000_000 + i * 10_000_000,
                Ddir::Read,
                4096,
                0,
                0,
                2_000,
                0,
            );
        }
        l.finish(300_000_000);
        let iops: Vec<(u64, u64)> = l.iops.iter().map(|x| (x.ms, x.value)).collect();
        assert_eq!(iops, [(100, 100), (300, 50)]);
        assert_eq!(l.clat[0].value, 5_500);
        assert_eq!(l.bw[0].value, 400);
        assert_eq!((l.bw[0].bs, l.bw[0].offset), (0, 0));
    }

    #[test]
    fn log_max_value_logs_each_windows_largest_latency() {
        let mut l = JobLogs::new(LogConfig {
            max_value: true,
            ..cfg(100)
        });
        for i in 0..10 {
            l.io(i * 10_000_000, Ddir::Read, 4096, 0, 0, 1_000 * (i + 1), 0);
        }
        l.finish(100_000_000);
        assert_eq!(l.clat[0].value, 10_000);
    }

    #[test]
    fn histogram_lines_hold_the_completions_since_the_last_in_coarsened_bins() {
        let mut l = JobLogs::new(LogConfig {
            hist: Some("h".into()),
            hist_msec: 100,
            hist_coarseness: 1,
            ..LogConfig::default()
        });
        // A completion every 10 ms from 10 ms on, 5 us each; one of 1 ms at 150 ms.
        for i in 1..=25u64 {
            let clat = if i == 15 { 1_000_000 } else { 5_000 };
            l.io(i * 10_000_000, Ddir::Read, 4096, 0, 0, clat, 0);
        }
        // The first completion (10 ms) opens the window: lines at 110 and 210 ms.
        let lines: Vec<(u64, u64)> = l.hist.iter().map(|h| (h.ms, h.bins.iter().sum())).collect();
        assert_eq!(lines, [(110, 11), (210, 10)]);
        assert_eq!(l.hist[0].bins.len(), crate::stats::PLAT_NR / 2);
        let slow = crate::stats::plat_val_to_idx(1_000_000) / 2;
        assert_eq!(l.hist[1].bins[slow], 1);
    }
}
