//! fio's steady-state detection (`steadystate`/`ss`, `ss_dur`, `ss_ramp`): once a job's
//! (or, with `group_reporting`, its group's) IOPS or bandwidth has held steady over a
//! rolling window of one-second samples, the job ends.
//!
//! Follows fio 3.33's `steadystate.c`: every second (fio's helper thread,
//! `STEADYSTATE_MSEC`) [`SteadyMonitor::tick`] takes each running job's completed I/Os and
//! bytes, turns what changed since the last tick into a rate, sums the rates of a reporting
//! group's running jobs, and feeds the window of the group's last job (or of each job on its
//! own without `group_reporting`). The criteria are the largest deviation from the window's
//! mean (`iops`, `bw`) or the slope of the least-squares line through it (`iops_slope`,
//! `bw_slope`), either absolute or as a percentage of the mean. Plain data driven by calls
//! with time passed in: `mqblk bench` ticks it from its clock, `mqblk sim` from virtual time.

/// How often fio's helper thread checks for steady state (`STEADYSTATE_MSEC`).
pub const TICK_NS: u64 = 1_000_000_000;

/// What is measured and how it is judged (fio's `ss_state` bits and `ss_limit`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Criterion {
    /// IOPS (else bandwidth, bytes/s).
    pub iops: bool,
    /// The slope of the window's least-squares line (else the largest deviation from its
    /// mean).
    pub slope: bool,
    /// The limit is a percentage of the window's mean.
    pub pct: bool,
    pub limit: f64,
}

impl Default for Criterion {
    /// fio's default, `iops_slope:0.01%`.
    fn default() -> Criterion {
        Criterion {
            iops: true,
            slope: true,
            pct: true,
            limit: 0.01,
        }
    }
}

impl Criterion {
    /// Parses fio's `steadystate=` value: `iops`, `iops_slope`, `bw` or `bw_slope`, a
    /// colon, and the limit (a float with `%` for a percentage; a bandwidth limit takes
    /// fio's size suffixes).
    pub fn parse(v: &str) -> Result<Criterion, String> {
        let (kind, limit) = v.split_once(':').ok_or_else(|| {
            "steadystate threshold must be specified in addition to criterion (e.g. iops:10%)"
                .to_string()
        })?;
        let (iops, slope) = match kind.trim().to_ascii_lowercase().as_str() {
            "iops" => (true, false),
            "iops_slope" => (true, true),
            "bw" => (false, false),
            "bw_slope" => (false, true),
            other => {
                return Err(format!(
                    "unknown steady state criterion '{other}' (iops, iops_slope, bw, bw_slope)"
                ))
            }
        };
        let limit = limit.trim();
        let (pct, limit) = match limit.strip_suffix('%') {
            Some(l) => (true, parse_float(l.trim())?),
            None if iops => (false, parse_float(limit)?),
            None => (
                false,
                crate::job::parse_size(limit)
                    .ok_or_else(|| format!("bad steadystate BW threshold '{limit}'"))?
                    as f64,
            ),
        };
        Ok(Criterion {
            iops,
            slope,
            pct,
            limit,
        })
    }

    /// fio's `criterion` string in its JSON report for the value `v`: `0.033311%`.
    pub fn describe_value(&self, v: f64) -> String {
        format!("{:.6}{}", v as f32, if self.pct { "%" } else { "" })
    }

    /// fio's `ss` string in its JSON report: `iops_slope:0.010000%`.
    pub fn describe(&self) -> String {
        format!(
            "{}{}:{:.6}{}",
            if self.iops { "iops" } else { "bw" },
            if self.slope { "_slope" } else { "" },
            self.limit as f32,
            if self.pct { "%" } else { "" }
        )
    }
}

fn parse_float(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .ok_or_else(|| format!("bad steadystate threshold '{s}'"))
}

/// A job's steady-state settings: the criterion, the window in whole seconds (fio's
/// `ss_dur`, 0: off) and the time after the job's start before samples count (`ss_ramp`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SteadySpec {
    pub criterion: Criterion,
    pub dur_s: u32,
    pub ramp_ns: u64,
}

/// A job of the run as the monitor sees it at a tick.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Started and not yet finished (fio's run states between set-up and exit).
    pub running: bool,
    /// When the job started (fio's `epoch`), on the monitor's clock.
    pub started_at: u64,
    /// I/Os and bytes completed so far (reads, writes and trims).
    pub ios: u64,
    pub bytes: u64,
}

/// One job (clone) of the run.
#[derive(Debug, Clone)]
struct Member {
    spec: Option<SteadySpec>,
    /// Its reporting group, and whether its group reports as one.
    group: u32,
    group_reporting: bool,
    /// The window it feeds, if it holds one (the group's last job, or every job without
    /// `group_reporting`).
    window: Option<usize>,
    ramp_over: bool,
    attained: bool,
    /// The last tick it was looked at (its start before the first), and its counts then
    /// (fio's `prev_time`, `prev_iops`, `prev_bytes`).
    prev_at: Option<u64>,
    prev_ios: u64,
    prev_bytes: u64,
}

/// fio's `steadystate_data` of the job that holds the window.
#[derive(Debug, Clone)]
struct Window {
    crit: Criterion,
    dur: u64,
    iops: Vec<u64>,
    bw: Vec<u64>,
    head: u64,
    tail: u64,
    full: bool,
    attained: bool,
    sum_y: u64,
    sum_xy: u64,
    sum_x: u64,
    sum_x_sq: u64,
    oldest_y: u64,
    slope: f64,
    deviation: f64,
    criterion: f64,
}

impl Window {
    fn new(s: &SteadySpec) -> Window {
        let d = u64::from(s.dur_s);
        Window {
            crit: s.criterion,
            dur: d,
            iops: vec![0; d as usize],
            bw: vec![0; d as usize],
            head: 0,
            tail: 0,
            full: false,
            attained: false,
            sum_y: 0,
            sum_xy: 0,
            sum_x: d * d.saturating_sub(1) / 2,
            sum_x_sq: d.saturating_sub(1) * d * (2 * d).saturating_sub(1) / 6,
            oldest_y: 0,
            slope: 0.0,
            deviation: 0.0,
            criterion: 0.0,
        }
    }

    fn y(&self, i: u64) -> u64 {
        if self.crit.iops {
            self.iops[i as usize]
        } else {
            self.bw[i as usize]
        }
    }

    /// Takes one sample; true when the criterion is met (fio's `steadystate_slope` and
    /// `steadystate_deviation`).
    fn add(&mut self, iops: u64, bw: u64) -> bool {
        let t = self.tail as usize;
        self.bw[t] = bw;
        self.iops[t] = iops;
        let new = if self.crit.iops { iops } else { bw };
        if self.full || self.tail.wrapping_sub(self.head) == self.dur - 1 {
            if !self.full {
                self.sum_y = 0;
                for i in 0..self.dur {
                    self.sum_y = self.sum_y.wrapping_add(self.y(i));
                    if self.crit.slope {
                        let j = (self.head + i) % self.dur;
                        self.sum_xy = self.sum_xy.wrapping_add(i.wrapping_mul(self.y(j)));
                    }
                }
                self.full = true;
            } else {
                self.sum_y = self.sum_y.wrapping_sub(self.oldest_y).wrapping_add(new);
                if self.crit.slope {
                    self.sum_xy = self
                        .sum_xy
                        .wrapping_sub(self.sum_y)
                        .wrapping_add(self.dur.wrapping_mul(new));
                }
            }
            self.oldest_y = self.y(self.head);
            let n = self.dur as f64;
            let met = if self.crit.slope {
                self.slope = (self.sum_xy as f64 - self.sum_x as f64 * self.sum_y as f64 / n)
                    / (self.sum_x_sq as f64 - self.sum_x as f64 * self.sum_x as f64 / n);
                self.criterion = if self.crit.pct {
                    100.0 * self.slope / (self.sum_y as f64 / n)
                } else {
                    self.slope
                };
                self.criterion.abs() < self.crit.limit
            } else {
                let mean = self.sum_y as f64 / n;
                self.deviation = (0..self.dur)
                    .map(|i| (self.y(i) as f64 - mean).abs())
                    .fold(0.0, f64::max);
                self.criterion = if self.crit.pct {
                    100.0 * self.deviation / mean
                } else {
                    self.deviation
                };
                self.criterion < self.crit.limit
            };
            if met {
                return true;
            }
        }
        self.tail = (self.tail + 1) % self.dur;
        if self.tail <= self.head {
            self.head = (self.head + 1) % self.dur;
        }
        false
    }

    fn report(&self) -> SteadyReport {
        // fio's `show_thread_status_json`: once attained, or before the window filled, the
        // oldest sample is at `head`; otherwise `head` already moved past it.
        let start = if self.attained || !self.full {
            self.head
        } else if self.head == 0 {
            self.dur - 1
        } else {
            self.head - 1
        };
        let order = (0..self.dur).map(|l| ((start + l) % self.dur) as usize);
        let iops: Vec<u64> = order.clone().map(|k| self.iops[k]).collect();
        let bw: Vec<u64> = order.map(|k| self.bw[k]).collect();
        let mean = |v: &[u64]| v.iter().sum::<u64>() / self.dur.max(1);
        SteadyReport {
            crit: self.crit,
            duration: self.dur,
            attained: self.attained,
            criterion: self.criterion,
            max_deviation: self.deviation,
            slope: self.slope,
            bw_mean: mean(&bw),
            iops_mean: mean(&iops),
            iops,
            bw,
        }
    }
}

/// What fio reports of a window (its JSON `steadystate` object and the text report's
/// `steadystate  :` line).
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyReport {
    /// What was judged and against what (fio's `ss`).
    pub crit: Criterion,
    pub duration: u64,
    pub attained: bool,
    /// The criterion's last value (a percentage of the mean with `crit.pct`).
    pub criterion: f64,
    pub max_deviation: f64,
    pub slope: f64,
    pub bw_mean: u64,
    pub iops_mean: u64,
    /// The window's samples, oldest first (bytes/s and IOPS).
    pub iops: Vec<u64>,
    pub bw: Vec<u64>,
}

/// Steady-state detection for a whole run: one entry per job clone, in run order.
#[derive(Debug, Clone)]
pub struct SteadyMonitor {
    members: Vec<Member>,
    windows: Vec<Window>,
}

/// Settings of a job clone, as [`SteadyMonitor::new`] takes them.
#[derive(Debug, Clone, Copy)]
pub struct MemberSpec {
    pub steady: Option<SteadySpec>,
    pub group: u32,
    pub group_reporting: bool,
}

impl MemberSpec {
    /// A resolved job clone's settings.
    pub fn of(job: &crate::job::Job) -> MemberSpec {
        MemberSpec {
            steady: job.steady,
            group: job.exit.groupid,
            group_reporting: job.group_reporting,
        }
    }
}

impl SteadyMonitor {
    /// The monitor of a run whose clones are `jobs` (in run order), or `None` when no job
    /// asks for steady state. Jobs of one reporting group must agree on their settings
    /// (fio's `td_steadystate_init`); the error names the job that does not.
    pub fn new(jobs: &[MemberSpec]) -> Result<Option<SteadyMonitor>, String> {
        let on = |s: &Option<SteadySpec>| s.filter(|s| s.dur_s > 0);
        if jobs.iter().all(|j| on(&j.steady).is_none()) {
            return Ok(None);
        }
        for (i, j) in jobs.iter().enumerate() {
            if let Some(k) = jobs[..i]
                .iter()
                .position(|o| o.group == j.group && on(&o.steady) != on(&j.steady))
            {
                return Err(format!(
                    "job {} and job {} of reporting group {}: steadystate options must be consistent within reporting groups",
                    k + 1,
                    i + 1,
                    j.group
                ));
            }
        }
        let mut members: Vec<Member> = jobs
            .iter()
            .map(|j| Member {
                spec: on(&j.steady),
                group: j.group,
                group_reporting: j.group_reporting,
                window: None,
                ramp_over: on(&j.steady).is_some_and(|s| s.ramp_ns == 0),
                attained: false,
                prev_at: None,
                prev_ios: 0,
                prev_bytes: 0,
            })
            .collect();
        // fio's `steadystate_setup`: each job's own window, or with `group_reporting` one
        // held by the group's last job.
        let mut windows = Vec::new();
        for i in 0..members.len() {
            let Some(s) = members[i].spec else { continue };
            let last_of_group = members
                .get(i + 1)
                .is_none_or(|n| n.group != members[i].group || n.spec.is_none());
            if !members[i].group_reporting || last_of_group {
                members[i].window = Some(windows.len());
                windows.push(Window::new(&s));
            }
        }
        Ok(Some(SteadyMonitor { members, windows }))
    }

    /// One check at `now` (every [`TICK_NS`]) with every job's sample, in run order;
    /// returns the jobs to end now (fio's `fio_mark_td_terminate`).
    pub fn tick(&mut self, now: u64, samples: &[Sample]) -> Vec<usize> {
        let mut end = Vec::new();
        let mut prev_group: Option<u32> = None;
        let (mut g_iops, mut g_bw, mut g_over) = (0u64, 0u64, 0u32);
        for i in 0..self.members.len() {
            let s = samples.get(i).copied().unwrap_or_default();
            let m = &mut self.members[i];
            let Some(spec) = m.spec else { continue };
            if !s.running || m.attained {
                continue;
            }
            if !m.group_reporting || prev_group != Some(m.group) {
                (g_iops, g_bw, g_over) = (0, 0, 0);
            }
            prev_group = Some(m.group);
            // Samples count from one second after the ramp. fio's helper thread starts
            // before the jobs, so its ticks fall a little short of whole seconds of a
            // job's time: a tick exactly at the bound is taken as just before it.
            if spec.ramp_ns > 0
                && !m.ramp_over
                && now.saturating_sub(s.started_at) > spec.ramp_ns + TICK_NS
            {
                m.ramp_over = true;
            }
            if m.ramp_over {
                // The first interval runs from the job's start (fio's `prev_time` is its
                // `epoch`). fio zeroes a job's counters when its `ramp_time` ends, which
                // makes its next sample wrap around; the counts here run on through the
                // ramp, so that sample is the job's rate.
                let at = m.prev_at.unwrap_or(s.started_at);
                let ms = (now.saturating_sub(at) / 1_000_000).max(1);
                g_bw += 1000 * s.bytes.saturating_sub(m.prev_bytes) / ms;
                g_iops += 1000 * s.ios.saturating_sub(m.prev_ios) / ms;
                g_over += 1;
            }
            m.prev_at = Some(now);
            m.prev_ios = s.ios;
            m.prev_bytes = s.bytes;
            let Some(w) = m.window else { continue };
            if g_over == 0 {
                continue;
            }
            if self.windows[w].add(g_iops, g_bw) {
                self.windows[w].attained = true;
                let (group, grouped) = (m.group, m.group_reporting);
                for (k, o) in self.members.iter_mut().enumerate() {
                    if (grouped && o.group == group && o.spec.is_some()) || k == i {
                        o.attained = true;
                        end.push(k);
                    }
                }
            }
        }
        end
    }

    /// What job `i`'s report shows: its own window, or its group's with
    /// `group_reporting`.
    pub fn report(&self, i: usize) -> Option<SteadyReport> {
        let m = self.members.get(i)?;
        m.spec?;
        let w = match m.window {
            Some(w) => w,
            None => self.members[i..]
                .iter()
                .take_while(|o| o.group == m.group)
                .find_map(|o| o.window)?,
        };
        Some(self.windows[w].report())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = TICK_NS;

    fn spec(c: &str, dur_s: u32, ramp_s: u64) -> MemberSpec {
        MemberSpec {
            steady: Some(SteadySpec {
                criterion: Criterion::parse(c).unwrap(),
                dur_s,
                ramp_ns: ramp_s * S,
            }),
            group: 0,
            group_reporting: false,
        }
    }

    /// Ticks a job whose rate per second is `rates[k]` in second k, until it attains.
    fn attains_at(m: &mut SteadyMonitor, rates: &[u64]) -> Option<usize> {
        let mut ios = 0;
        for (k, r) in rates.iter().enumerate() {
            ios += r;
            let s = Sample {
                running: true,
                started_at: 0,
                ios,
                bytes: ios * 4096,
            };
            if !m.tick((k as u64 + 1) * S, &[s]).is_empty() {
                return Some(k + 1);
            }
        }
        None
    }

    #[test]
    fn criteria_parse_as_fio_writes_them() {
        let c = Criterion::parse("iops:10%").unwrap();
        assert!(c.iops && !c.slope && c.pct && c.limit == 10.0);
        let c = Criterion::parse("bw_slope:1%").unwrap();
        assert!(!c.iops && c.slope && c.pct);
        let c = Criterion::parse("bw:2m").unwrap();
        assert!(!c.pct && c.limit == 2.0 * 1024.0 * 1024.0);
        assert_eq!(Criterion::default().describe(), "iops_slope:0.010000%");
        assert!(Criterion::parse("iops").is_err());
        assert!(Criterion::parse("lat:1%").is_err());
        assert!(Criterion::parse("iops:x%").is_err());
    }

    #[test]
    fn a_steady_rate_ends_the_job_once_the_window_is_full() {
        let mut m = SteadyMonitor::new(&[spec("iops:5%", 3, 0)])
            .unwrap()
            .unwrap();
        assert_eq!(attains_at(&mut m, &[1000; 10]), Some(3));
        let r = m.report(0).unwrap();
        assert!(r.attained);
        assert_eq!(r.iops, vec![1000, 1000, 1000]);
        assert_eq!(r.bw_mean, 1000 * 4096);
        assert_eq!(r.crit.describe_value(r.criterion), "0.000000%");
    }

    #[test]
    fn a_rate_that_keeps_moving_never_attains_and_reports_the_last_window() {
        let mut m = SteadyMonitor::new(&[spec("iops:5%", 3, 0)])
            .unwrap()
            .unwrap();
        let rates: Vec<u64> = (0..10).map(|k| 1000 + 200 * k).collect();
        assert_eq!(attains_at(&mut m, &rates), None);
        let r = m.report(0).unwrap();
        assert!(!r.attained);
        assert_eq!(r.iops, vec![2400, 2600, 2800]);
        assert_eq!(r.duration, 3);
        assert!(r.criterion > 5.0);
    }

    #[test]
    fn the_slope_criterion_takes_a_ramp_and_a_flat_line() {
        // A rising rate (slope 100 IOPS a second on 1000: 10%) fails 1%; once it is flat
        // the slope over the window drops to 0.
        let mut m = SteadyMonitor::new(&[spec("iops_slope:1%", 4, 2)])
            .unwrap()
            .unwrap();
        let rates = [
            100, 200, 300, 1000, 1100, 1200, 1300, 1300, 1300, 1300, 1300, 1300,
        ];
        let at = attains_at(&mut m, &rates).unwrap();
        // Samples start after 3 s (ramp 2 s + 1 s), at tick 4; the window holds [1300; 4]
        // at tick 10.
        assert_eq!(at, 10);
        assert_eq!(m.report(0).unwrap().slope, 0.0);
    }

    #[test]
    fn a_group_reporting_window_sums_its_jobs_and_ends_them_all() {
        let mut a = spec("iops:1%", 2, 0);
        a.group_reporting = true;
        let mut m = SteadyMonitor::new(&[a, a]).unwrap().unwrap();
        let mut ended = Vec::new();
        let mut ios = [0u64; 2];
        for k in 1..=6u64 {
            // One job's rate moves, the other makes up for it: the sum is steady.
            let x = if k % 2 == 0 { 300 } else { 700 };
            ios[0] += x;
            ios[1] += 1000 - x;
            let s = |n: u64| Sample {
                running: true,
                started_at: 0,
                ios: n,
                bytes: n * 512,
            };
            ended = m.tick(k * S, &[s(ios[0]), s(ios[1])]);
            if !ended.is_empty() {
                assert_eq!(
                    k, 2,
                    "a 2 s window of a steady sum is met at its second sample"
                );
                break;
            }
        }
        assert_eq!(ended, vec![0, 1]);
        assert_eq!(m.report(0), m.report(1));
    }

    #[test]
    fn jobs_of_one_group_must_agree() {
        let mut b = spec("iops:1%", 2, 0);
        b.steady = None;
        let e = SteadyMonitor::new(&[spec("iops:1%", 2, 0), b]).unwrap_err();
        assert!(e.contains("consistent within reporting groups"), "{e}");
        b.group = 1;
        assert!(SteadyMonitor::new(&[spec("iops:1%", 2, 0), b]).is_ok());
    }
}
