//! Parsed jobs → resolved job clones: the one place where fio's options turn into what a
//! run issues (block sizes per direction, the region, limits, seeds, priority, cgroup, CPU).
//!
//! `mqblk bench`, `mqblk sim` and everything else that runs fio jobs go through
//! [`resolve`], so a job means the same thing whichever of them runs it.

use super::error::{JobError, JobErrorKind, Location};
use super::files::{FileLayout, LayoutFile};
use super::spec::{FileService, JobSpec, RwMode, VerifyMode};
use crate::flow::{Flow, FlowGroup};
use crate::logs::LogConfig;
use crate::pattern::frand::{jhash, slot, Seeds, DEFAULT_RANDSEED};
use crate::pattern::{BlockSizes, Distribution, Shape, Zones};
use crate::Ddir;
use std::sync::Arc;

/// One of a clone's files, and the clone's region of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile {
    /// The name fio gives it (its path, or `NAME.CLONE.0` for a job without files).
    pub name: String,
    /// Where the file's offset 0 lies on the device.
    pub base: u64,
    /// Start of the region on the device, and its bytes.
    pub offset: u64,
    pub size: u64,
    /// The region ends where the file does when the job starts (a file a job above fills,
    /// used without a size): `size` is then the most it can be ([`Job::sized_at_start`]).
    pub to_eof: bool,
}

/// Which of the files whose offset 0 lies at `bases` device offset `at` is in (the one
/// starting last at or before it; a job's files need not come in device order), and the
/// offset in it.
pub fn file_at(bases: impl IntoIterator<Item = u64>, at: u64) -> Option<(usize, u64)> {
    bases
        .into_iter()
        .enumerate()
        .filter(|&(_, b)| b <= at)
        .max_by_key(|&(_, b)| b)
        .map(|(i, b)| (i, at - b))
}

/// fio's think-time triggers (`handle_thinktime`): `thinktime_blocks` I/Os completed
/// (or issued with `thinktime_blocks_type=issue`) since the last think, and with
/// `thinktime_iotime` that much time since it (where `thinktime_blocks` is not given, time
/// alone); `rate_ignore_thinktime` credits the time thought to the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThinkRule {
    pub by_blocks: bool,
    pub count_issued: bool,
    pub iotime_ns: u64,
    pub rate_ignore: bool,
}

/// One clone of a job (`numjobs` makes several), with every option the I/O loop needs
/// resolved against the device it runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The job's name; fio reports every clone of a job under it.
    pub name: String,
    /// The job section this clone came from (an index into the parsed jobs).
    pub spec: usize,
    /// Which clone of its job this is (0-based).
    pub clone: u32,
    /// This clone's position among all clones of the run (0-based); its issuer id is
    /// `index + 1`.
    pub index: usize,
    pub rw: RwMode,
    pub rwmixread: u32,
    /// The largest block of reads and of writes (buffers are this large).
    pub bs: [u32; 2],
    /// How reads, writes and trims are sized (`bs`, `bsrange`, `bssplit`).
    pub sizes: [BlockSizes; 3],
    /// `blockalign` of the directions the job issues (the larger), if given.
    pub align: Option<u32>,
    /// `rw=MODE:N`'s N (0: none), and whether it was negative (`read:-8k`).
    pub rw_modifier: u64,
    pub rw_backward: bool,
    pub random_distribution: Distribution,
    /// `percentage_random` of reads, writes and trims.
    pub percentage_random: [u32; 3],
    /// `rw_sequencer=identical`.
    pub rw_identical: bool,
    /// `bs_is_seq_rand`.
    pub bs_is_seq_rand: bool,
    pub norandommap: bool,
    /// `zonemode=strided`'s zones, when on.
    pub zones: Option<Zones>,
    /// `zonemode=zbd`, when on: its options, and once [`crate::zbd::setup`] ran, the zone
    /// tables of the job's files.
    pub zbd: Option<crate::zbd::ZbdJob>,
    /// Stop after this many I/Os (0: no limit): `number_ios` times `loops`, as fio counts.
    pub number_ios: u64,
    /// Without `time_based`: bytes to issue before the job ends (`io_size` times `loops`,
    /// passing over the region as often as it takes), or `None` for `loops` passes.
    pub io_bytes: Option<u64>,
    /// `loops`: passes over the region when `io_bytes` is `None`.
    pub loops: u32,
    /// The job's place among `stonewall` barriers: it starts once every job of a lower
    /// number has finished (0 for jobs before the first stonewall).
    pub barrier: u32,
    /// Which jobs its end terminates, and its reporting group (`exitall`, `exit_what`,
    /// `exitall_on_error`).
    pub exit: super::spec::Exit,
    /// Which I/O errors it goes on after (`continue_on_error`, `ignore_error`).
    pub errors: super::spec::ErrorPolicy,
    /// `wait_for`: the job section (an index into the parsed jobs) whose clones must all
    /// have finished before this one starts.
    pub wait_for: Option<usize>,
    /// fio's flow control: the job's weight in its group (shared by the run's clones of one
    /// `flow_id`), if it has one.
    pub flow: Option<Flow>,
    /// fio's `latency_target` search as `(target, window, percentile, latency_run)` (ns,
    /// ns, percent), if asked for, and `max_latency` (0: none).
    pub latency_target: Option<(u64, u64, f64, bool)>,
    pub max_latency_ns: u64,
    /// fio's steady-state detection (`ss`, `ss_dur` in whole seconds, `ss_ramp`), when on,
    /// and whether the job's group reports (and so reaches steady state) as one.
    pub steady: Option<crate::steadystate::SteadySpec>,
    pub group_reporting: bool,
    /// Wait this long after the start before the first I/O (`startdelay`, drawn for this
    /// clone from its range).
    pub start_delay_ns: u64,
    /// `thinktime` after every `thinktime_blocks` I/Os (0: none), and its spinning part.
    pub thinktime_ns: u64,
    pub thinktime_spin_ns: u64,
    pub thinktime_blocks: u64,
    /// How think times are triggered and what they do to a rate (see [`ThinkRule`]).
    pub think: ThinkRule,
    /// `write_iolog`: where to log the clone's I/O.
    pub write_iolog: Option<String>,
    /// `write_lat_log`, `write_bw_log`, `write_iops_log`, `log_avg_msec`; the files carry
    /// `index + 1` as fio's job number.
    pub logs: LogConfig,
    /// The clone's files and its region of each (one pass covers them all); a job without
    /// files has one, fio's `NAME.CLONE.0`, spanning the device.
    pub files: Vec<JobFile>,
    /// How the next I/O's file is picked, and how many files are open at once (0: all).
    pub file_service: FileService,
    pub openfiles: u32,
    pub iodepth: u32,
    pub batch_submit: u32,
    pub batch_complete_min: u32,
    /// `create_only`: the job issues nothing (its files are laid out with the run's).
    pub create_only: bool,
    /// `exec_prerun` and `exec_postrun` ([`crate::exec::run_hook`]).
    pub exec_prerun: Option<String>,
    pub exec_postrun: Option<String>,
    /// `bwavgtime` and `iopsavgtime`, ms.
    pub bw_avg_ms: u64,
    pub iops_avg_ms: u64,
    /// fio's `iodepth_low` (at most `iodepth`): a full queue is reaped down to it.
    pub iodepth_low: u32,
    pub batch_complete_max: u32,
    /// Run-time cap after the ramp, in nanoseconds.
    pub runtime_ns: Option<u64>,
    pub time_based: bool,
    /// Warm-up before statistics count, in nanoseconds.
    pub ramp_ns: u64,
    /// `rate_iops` and `rate` per direction (0: none), counted from the job's start.
    pub rate_iops: [u64; 3],
    pub rate: [u64; 3],
    /// `rate_min` and `rate_iops_min` per direction (0: none), judged every
    /// `rate_cycle_ns` once 2 s have passed after the ramp.
    pub rate_min: [u64; 3],
    pub rate_iops_min: [u64; 3],
    pub rate_cycle_ns: u64,
    /// `rate_process=poisson` and `io_submit_mode=offload` (see [`JobSpec`]).
    pub rate_poisson: bool,
    pub submit_offload: bool,
    /// The smallest block size per direction (fio's `min_bs`: the Poisson process turns a
    /// byte rate into I/Os with it).
    pub min_bs: [u32; 3],
    /// A seed for what fio does not draw from its per-purpose streams (verify data).
    pub seed: u64,
    /// The clone's random streams' seeds, as fio 3.33 makes them (see
    /// [`crate::pattern::frand`]).
    pub seeds: Seeds,
    /// Verify headers in written blocks (`verify=`, any algorithm).
    pub verify: bool,
    /// Which checksum they carry.
    pub verify_mode: VerifyMode,
    /// `verify_pattern`: the data verified blocks carry; `buffer_pattern`: that of other
    /// written buffers.
    pub verify_pattern: Option<Vec<u8>>,
    pub buffer_pattern: Option<Vec<u8>>,
    /// What its writes carry otherwise (fio's buffer options, fixed up).
    pub buffers: crate::buffers::BufferPlan,
    /// Read back what the job wrote once its writing ends (`do_verify`).
    pub do_verify: bool,
    /// `verify_backlog` and `verify_backlog_batch` (0: off, and all).
    pub verify_backlog: u64,
    pub verify_backlog_batch: u64,
    /// `verify_interval` (0: a header per block), `verify_fatal`, `verify_dump`.
    pub verify_interval: u32,
    /// `verify_offset` ([`JobSpec::verify_offset`]).
    pub verify_offset: u32,
    pub verify_fatal: bool,
    /// `experimental_verify` ([`JobSpec::experimental_verify`]).
    pub experimental_verify: bool,
    pub verify_dump: bool,
    /// `verify_only` ([`JobSpec::verify_only`]) and `verify_state_save`.
    pub verify_only: bool,
    pub verify_state_save: bool,
    /// `fill_device`: ENOSPC (or EDQUOT) ends the job, not as an error.
    pub fill_device: bool,
    /// `read_iolog`'s log ([`JobSpec::replay`]), which is then the job's I/O.
    pub replay: Option<Arc<crate::iolog_replay::ReplayLog>>,
    /// `fsync_on_close` ([`JobSpec::fsync_on_close`]) and `serialize_overlap`.
    pub fsync_on_close: bool,
    pub serialize_overlap: bool,
    /// `nowait` ([`JobSpec::nowait`]).
    pub nowait: bool,
    /// `unlink_each_loop` ([`JobSpec::unlink_each_loop`]).
    pub unlink_each_loop: bool,
    /// With `verify_state_load`: the state a writing run left, which bounds the verify
    /// pass.
    pub verify_state: Option<Arc<crate::verify_state::VerifyState>>,
    /// A flush after every this many writes (`fsync=N`; 0 = never).
    pub fsync: u64,
    /// `fdatasync`: a flush every this many writes, logged as fio's `datasync`.
    pub fdatasync: u64,
    /// A flush when the job ends.
    pub end_fsync: bool,
    /// Writes carry `REQ_FUA` (`sync=1` or `sync=dsync`).
    pub sync_writes: bool,
    /// `O_DIRECT`: writes go to the device from the issuing task, not from writeback.
    pub direct: bool,
    /// `(class, level)` of `prioclass`/`prio` (1 RT, 2 BE, 3 IDLE; level 0..7), `None`
    /// when neither is set (the issuer's default priority).
    pub ioprio: Option<(u8, u8)>,
    /// `cmdprio_*`: the priority a share of the I/Os carries instead.
    pub cmdprio: Option<crate::cmdprio::CmdPrio>,
    /// `lat_percentiles`: each priority's total latencies are kept apart, not its
    /// completion latencies (fio's `clat_prio` under `lat_percentiles=1`).
    pub lat_percentiles: bool,
    /// The cgroup the clone's I/O is charged to, and that group's weight if given.
    pub cgroup: Option<String>,
    pub cgroup_weight: Option<u32>,
    /// The CPU the clone runs on (`cpus_allowed`, clones spread over the list).
    pub cpu: Option<usize>,
    /// With `cpus_allowed_policy=shared`: every CPU of `cpus_allowed`, any of which the
    /// clone may run on (the simulator, whose CPUs are the jobs' own, keeps `cpu`).
    pub cpus_shared: Vec<usize>,
}

impl Job {
    /// The grid offsets lie on: `blockalign` if given; with one size per direction the
    /// larger block size of the directions the job issues (so a random pass covers each
    /// block once); with variable sizes the smallest size, as fio aligns to its minimum
    /// block size.
    pub fn grid(&self) -> u32 {
        if let Some(a) = self.align {
            return a.max(512);
        }
        let issued = [
            self.rw.does_read(),
            self.rw.does_write(),
            self.rw.does_trim(),
        ];
        let sizes = self.sizes.iter().zip(issued).filter(|(_, on)| *on);
        if self.sizes.iter().all(BlockSizes::is_fixed) {
            sizes.map(|(s, _)| s.max()).max().unwrap_or(512).max(512)
        } else {
            sizes.map(|(s, _)| s.min()).min().unwrap_or(512).max(512)
        }
    }

    /// The job as it starts: the region of a file a job above filled, used without a size
    /// ([`JobFile::to_eof`]), ends where the file does now (`len_of`: its length, `None`
    /// where it cannot be read), in whole blocks, as fio sizes a job's files as it starts.
    /// The error says which file is too short for a block.
    pub fn sized_at_start(&self, len_of: impl Fn(&str) -> Option<u64>) -> Result<Job, String> {
        let mut job = self.clone();
        let block = u64::from(self.max_bs().max(1));
        for f in job.files.iter_mut().filter(|f| f.to_eof) {
            let Some(len) = len_of(&f.name) else {
                continue;
            };
            let room = len.saturating_sub(f.offset - f.base);
            let size = f.size.min(room) / block * block;
            if size == 0 {
                return Err(format!(
                    "file {} holds {len} bytes as the job starts, less than a block ({block}) past its offset",
                    f.name
                ));
            }
            f.size = size;
        }
        Ok(job)
    }

    /// The offsets and sizes this clone issues, for its generators: one shape per file
    /// (each file's offsets drawn from their own seed; the first
    /// file's is the clone's).
    pub fn shapes(&self) -> Vec<Shape> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| self.shape_of(i, f))
            .collect()
    }

    fn shape_of(&self, i: usize, f: &JobFile) -> Shape {
        Shape {
            rw: self.rw,
            rwmixread: self.rwmixread,
            sizes: self.sizes.clone(),
            grid: self.grid(),
            blockalign: self.align.is_some(),
            offset: f.offset,
            size: f.size,
            modifier: self.rw_modifier,
            backward: self.rw_backward,
            from_end: f.offset > f.base,
            dist: self.random_distribution.clone(),
            percentage_random: self.percentage_random,
            identical: self.rw_identical,
            bs_is_seq_rand: self.bs_is_seq_rand,
            norandommap: self.norandommap,
            seeds: self.seeds.clone(),
            // fio's `__init_rand_distribution`: with randrepeat the file's name hashed times
            // the thread number, else the offsets' seed.
            dist_seed: if self.seeds.repeatable {
                jhash(f.name.as_bytes(), 0).wrapping_mul(self.seeds.thread_number)
            } else {
                self.seeds.slots[slot::BLOCK] as u32
            },
            zones: self.zones,
            zbd: self.zbd.as_ref().and_then(|z| {
                let jf = z.files.get(i)?;
                Some(crate::zbd::GenZbd {
                    shared: jf.shared.clone(),
                    opts: z.opts.clone(),
                    region: jf.file_offset,
                    mixed: self.rw.does_read() && self.rw.does_write(),
                })
            }),
        }
    }

    /// The largest block this job may issue.
    pub fn max_bs(&self) -> u32 {
        self.bs[0].max(self.bs[1])
    }
}

/// fio's `setup_random_seeds` inputs for job section `i`: `randseed` (default 0x89) and
/// whether `randrepeat` holds; `randrepeat=0` without `randseed` takes fresh seeds (here from
/// `entropy`). fio 3.33 leaves `randrepeat` on when `randseed` is given.
pub(crate) fn rand_seed_of(s: &JobSpec, i: usize, entropy: u64) -> (u64, bool) {
    match (s.randseed, s.randrepeat) {
        (Some(seed), r) => (seed, r),
        (None, true) => (DEFAULT_RANDSEED, true),
        (None, false) => (
            entropy ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
            false,
        ),
    }
}

/// fio's thread number of clone `clone` of a job whose first clone has `first`: fio makes
/// clones counting down (`add_job`), so the first made is named NAME.{numjobs-1} and takes
/// the number after the job's own; clone k of n has the job's number plus n - k.
pub(crate) fn thread_number_of(first: u32, numjobs: u32, clone: u32) -> u32 {
    match clone {
        0 => first,
        k => first + numjobs.max(1) - k,
    }
}

/// Resolves every clone of `specs`.
///
/// `layout` places the files jobs name on the device ([`FileLayout::plan`]; the default
/// for runs without files); `capacity(spec)` is the byte size of the device a job without
/// files runs on; `entropy` seeds jobs
/// that ask for a fresh seed (`randrepeat=0` without `randseed`): a runner on real time
/// passes the clock, the simulator its run's seed, so its runs stay reproducible.
pub fn resolve(
    specs: &[JobSpec],
    layout: &FileLayout,
    mut capacity: impl FnMut(&JobSpec) -> Result<u64, JobError>,
    entropy: u64,
) -> Result<Vec<Job>, JobError> {
    let mut out = Vec::new();
    let mut barrier = 0;
    let groups = super::spec::reporting_groups(specs);
    // fio's `exitall` sets one flag for the whole run.
    let exitall = specs.iter().any(|s| s.exitall);
    let mut flows: std::collections::HashMap<u32, Arc<FlowGroup>> = Default::default();
    for (i, s) in specs.iter().enumerate() {
        // fio's `stonewall`: wait for the jobs above to exit before starting.
        if i > 0 && s.stonewall {
            barrier += 1;
        }
        let exit = super::spec::Exit {
            on_end: exitall,
            on_error: s.exitall_on_error,
            what: s.exit_what,
            groupid: groups[i],
        };
        let cap = capacity(s)?;
        let bad = |m: String| {
            JobError::new(
                Location::Job {
                    name: s.name.clone(),
                },
                JobErrorKind::Invalid(m),
            )
        };
        // fio's wait_for names a job above this one, by a name no other job has.
        let wait_for = match &s.wait_for {
            None => None,
            Some(name) => {
                let above: Vec<usize> = (0..i).filter(|&k| specs[k].name == *name).collect();
                if specs.iter().filter(|o| o.name == *name).count() > 1 {
                    return Err(bad(format!(
                        "wait_for={name}: several jobs have that name (fio needs it unique)"
                    )));
                }
                match above.as_slice() {
                    [k] => Some(*k),
                    _ => {
                        return Err(bad(format!(
                            "wait_for={name}: no job of that name above this one (fio allows no forward references)"
                        )))
                    }
                }
            }
        };
        let bs = [s.bs_for(Ddir::Read), s.bs_for(Ddir::Write)];
        if bs.iter().any(|&b| b > u32::MAX as u64 / 2) {
            return Err(bad(format!("block size {} is too large", bs[0].max(bs[1]))));
        }
        let bs = [bs[0] as u32, bs[1] as u32];
        if s.cgroup_weight.is_some() && s.cgroup.is_none() {
            return Err(bad("cgroup_weight needs cgroup (the group to weigh)".into()));
        }
        let ioprio = s.ioprio();
        let cmdprio = s
            .cmdprio
            .resolve([s.rw.does_read(), s.rw.does_write()])
            .map_err(bad)?;
        let (rand_seed, repeatable) = rand_seed_of(s, i, entropy);
        let sizes = [
            s.sizes_for(Ddir::Read),
            s.sizes_for(Ddir::Write),
            s.sizes_for(Ddir::Trim),
        ];
        let align = s.blockalign.map(|a| {
            let read = if s.rw.does_read() { a[0] } else { 0 };
            let write = if s.rw.does_write() { a[1] } else { 0 };
            let trim = if s.rw.does_trim() { a[2] } else { 0 };
            read.max(write).max(trim) as u32
        });
        for clone in 0..s.numjobs.max(1) {
            let index = out.len();
            // The clone's files (a job without files addresses the device from 0, as one
            // file the device's size), and its region of each.
            let used = layout.files_of(i, clone);
            let whole = [LayoutFile {
                path: format!("{}.{clone}.0", s.name),
                base: 0,
                len: cap,
                sized: true,
                read: false,
                fallocate: s.fallocate,
                overwrite: s.overwrite,
                grows: false,
                appended_at: None,
            }];
            let placed: Vec<&LayoutFile> = if used.is_empty() {
                whole.iter().collect()
            } else {
                used.iter().map(|&f| &layout.files[f]).collect()
            };
            let mut files = Vec::with_capacity(placed.len());
            for f in &placed {
                let (offset, size) =
                    region(s, f, clone, placed.len() as u64, used.is_empty()).map_err(&bad)?;
                if let Some(a) = align {
                    if u64::from(a) > size {
                        return Err(bad(format!("blockalign {a} is larger than size {size}")));
                    }
                }
                files.push(JobFile {
                    name: f.path.clone(),
                    base: f.base,
                    offset: f.base + offset,
                    size,
                    to_eof: f.grows && s.size.is_none() && s.filesize.is_none() && !s.fills(),
                });
            }
            // fio's io_size (or, for a file set with filesize=, its size=): the bytes the
            // clone issues over all its files.
            let set_bytes: u64 = files.iter().map(|f| f.size).sum();
            let io_size = match (s.io_size_pct, s.io_size) {
                (Some(p), _) => Some((set_bytes as f64 * p / 100.0) as u64),
                (None, Some(b)) => Some(b),
                (None, None) if s.filesize.is_some() && s.has_files() => s.size,
                (None, None) => None,
            };
            let io_bytes = io_size.map(|b| b.saturating_mul(u64::from(s.loops.max(1))));
            let first = (index - clone as usize) as u32 + 1;
            let thread_number = thread_number_of(first, s.numjobs, clone);
            let seeds = Seeds::fio(rand_seed, thread_number, repeatable, s.random_generator)
                .all_repeatable(s.allrandrepeat);
            let seed = seeds.slots[slot::VER];
            // fio's `startdelay=LOW-HIGH`: `rand_between` its delay generator, in
            // microseconds.
            let (lo, hi) = s.startdelay_ns;
            let start_delay_ns = if hi > lo {
                let mut delay = seeds.state(slot::START_DELAY);
                delay.between(lo / 1000, hi / 1000) * 1000
            } else {
                lo
            };
            out.push(Job {
                name: s.name.clone(),
                spec: i,
                clone,
                index,
                rw: s.rw,
                rwmixread: s.rwmixread,
                bs,
                sizes: sizes.clone(),
                align,
                rw_modifier: s.rw_modifier,
                rw_backward: s.rw_backward,
                random_distribution: s.random_distribution.clone(),
                percentage_random: s.percentage_random,
                rw_identical: s.rw_identical,
                bs_is_seq_rand: s.bs_is_seq_rand,
                norandommap: s.norandommap,
                zones: s.zones(),
                zbd: crate::zbd::ZbdOptions::of(s).map(|opts| crate::zbd::ZbdJob {
                    opts,
                    files: Vec::new(),
                }),
                // fio's `exceeds_number_ios`: `number_ios` I/Os for each of the `loops`.
                number_ios: s.number_ios.saturating_mul(u64::from(s.loops.max(1))),
                io_bytes,
                loops: s.loops.max(1),
                barrier,
                exit,
                errors: s.errors.clone(),
                wait_for,
                latency_target: (s.latency_target_ns > 0).then_some((
                    s.latency_target_ns,
                    s.latency_window_ns,
                    s.latency_percentile,
                    s.latency_run,
                )),
                max_latency_ns: s.max_latency_ns,
                steady: (s.ss_dur_ns >= 1_000_000_000).then_some(crate::steadystate::SteadySpec {
                    criterion: s.steadystate,
                    dur_s: (s.ss_dur_ns / 1_000_000_000).min(u32::MAX as u64) as u32,
                    ramp_ns: s.ss_ramp_ns,
                }),
                group_reporting: s.group_reporting,
                flow: (s.flow > 0).then(|| Flow {
                    group: flows.entry(s.flow_id).or_default().clone(),
                    weight: u64::from(s.flow),
                    sleep_ns: s.flow_sleep_ns,
                }),
                start_delay_ns,
                thinktime_ns: s.thinktime_ns,
                thinktime_spin_ns: s.thinktime_spin_ns,
                thinktime_blocks: s.thinktime_blocks.max(1),
                think: ThinkRule {
                    by_blocks: s.thinktime_blocks_set || s.thinktime_iotime_ns == 0,
                    count_issued: s.thinktime_blocks_issue,
                    iotime_ns: s.thinktime_iotime_ns,
                    rate_ignore: s.rate_ignore_thinktime,
                },
                write_iolog: s.write_iolog.clone(),
                logs: s.logs.clone(),
                files,
                file_service: s.file_service.clone(),
                openfiles: s.openfiles,
                iodepth: s.effective_iodepth(),
                batch_submit: s.iodepth_batch_submit.clamp(1, s.effective_iodepth()),
                batch_complete_min: s.iodepth_batch_complete_min.min(s.effective_iodepth()),
                create_only: s.create_only,
                exec_prerun: s.exec_prerun.clone(),
                exec_postrun: s.exec_postrun.clone(),
                bw_avg_ms: s.bw_avg_ms,
                iops_avg_ms: s.iops_avg_ms,
                // fio's `fixup_options`: 0 or above iodepth means iodepth.
                iodepth_low: match s.iodepth_low {
                    0 => s.effective_iodepth(),
                    l => l.min(s.effective_iodepth()),
                },
                batch_complete_max: s.iodepth_batch_complete_max.clamp(1, s.effective_iodepth()),
                runtime_ns: (s.runtime_ns > 0).then_some(s.runtime_ns),
                time_based: s.time_based,
                ramp_ns: s.ramp_time_ns,
                rate_iops: s.rate_iops,
                rate: s.rate,
                rate_min: s.rate_min,
                rate_iops_min: s.rate_iops_min,
                rate_cycle_ns: s.rate_cycle_ms.saturating_mul(1_000_000),
                rate_poisson: s.rate_poisson,
                submit_offload: s.submit_offload,
                min_bs: [Ddir::Read, Ddir::Write, Ddir::Trim].map(|d| s.sizes_for(d).min().max(1)),
                seed,
                seeds,
                verify: s.verify != VerifyMode::None,
                verify_mode: s.verify,
                verify_pattern: s.verify_pattern.clone(),
                buffer_pattern: s.buffer_pattern.clone(),
                buffers: s.buffers.resolved(
                    s.verify != VerifyMode::None,
                    set_bytes,
                    s.sizes_for(Ddir::Write).min().max(1),
                ),
                do_verify: s.do_verify,
                verify_backlog: s.verify_backlog,
                verify_backlog_batch: s.verify_backlog_batch,
                verify_interval: s.verify_interval as u32,
                verify_offset: s.verify_offset as u32,
                verify_fatal: s.verify_fatal,
                experimental_verify: s.experimental_verify,
                verify_dump: s.verify_dump,
                verify_only: s.verify_only,
                fill_device: s.fill_device,
                fsync_on_close: s.fsync_on_close,
                serialize_overlap: s.serialize_overlap,
                nowait: s.nowait,
                replay: s.replay.clone(),
                unlink_each_loop: s.unlink_each_loop,
                verify_state_save: s.verify_state_save,
                verify_state: None,
                fsync: s.fsync,
                fdatasync: s.fdatasync,
                end_fsync: s.end_fsync,
                sync_writes: s.sync_writes,
                direct: s.direct,
                ioprio,
                cmdprio: cmdprio.clone(),
                lat_percentiles: s.lat_percentiles,
                cgroup: s.cgroup.clone(),
                cgroup_weight: s.cgroup_weight,
                cpu: (!s.cpus_allowed.is_empty())
                    .then(|| s.cpus_allowed[clone as usize % s.cpus_allowed.len()]),
                cpus_shared: if s.cpus_allowed_shared {
                    s.cpus_allowed.clone()
                } else {
                    Vec::new()
                },
            });
        }
    }
    // fio's `fio_verify_load_state`: a job that asks for its verify state fails without it.
    for j in &mut out {
        if specs[j.spec].verify_state_load {
            let state =
                crate::verify_state::VerifyState::load(std::path::Path::new(""), &j.name, j.index)
                    .map_err(|m| {
                        JobError::new(
                            Location::Job {
                                name: j.name.clone(),
                            },
                            JobErrorKind::Invalid(m),
                        )
                    })?;
            j.verify_state = Some(Arc::new(state));
        }
    }
    // fio's `td_steadystate_init`: the jobs of one reporting group share one setting.
    for (i, j) in out.iter().enumerate() {
        if let Some(o) = out[..i]
            .iter()
            .find(|o| o.exit.groupid == j.exit.groupid && o.steady != j.steady)
        {
            return Err(JobError::new(
                Location::Job {
                    name: j.name.clone(),
                },
                JobErrorKind::Invalid(format!(
                    "its steadystate options differ from job '{}' of the same reporting group (fio requires them consistent within a group; start a new one with new_group)",
                    o.name
                )),
            ));
        }
    }
    Ok(out)
}

/// The region of file `f` clone `clone` works on: its offset in the file and its size.
/// `offset` (or `N%` of the file), moved on by `offset_increment` per clone; `size` split
/// over the clone's `nfiles` files, or with `filesize` the rest of each file (fio's
/// `size` is then the job's I/O amount), or the rest of the file (of the device, for a job
/// without files).
fn region(
    s: &JobSpec,
    f: &LayoutFile,
    clone: u32,
    nfiles: u64,
    device: bool,
) -> Result<(u64, u64), String> {
    let cap = f.len;
    let share = |pct: f64| (cap as f64 * pct / 100.0) as u64;
    // fio's percentage offset is aligned up to `offset_align`, else to the job's smallest
    // block size (`get_start_offset`).
    let align = match s.offset_align {
        0 => s.min_bs(),
        a => a,
    };
    let offset = match (s.offset_pct, f.appended_at) {
        _ if s.file_append && f.appended_at.is_some() => f.appended_at.unwrap_or(0),
        (Some(p), _) => share(p).div_ceil(align) * align,
        (None, _) => s.offset,
    };
    let size = match (s.size_pct, s.size) {
        _ if s.filesize.is_some() && !device => cap.saturating_sub(offset),
        (Some(p), _) => share(p).min(cap.saturating_sub(offset)),
        (None, Some(size)) => size / nfiles,
        (None, None) => cap.saturating_sub(offset),
    };
    let what = if device {
        format!("the device ({cap} bytes)")
    } else {
        format!("file {} ({cap} bytes)", f.path)
    };
    if offset.saturating_add(size) > cap {
        return Err(format!("offset {offset} + size {size} runs past {what}"));
    }
    // fio's offset_increment: each clone's region further on.
    let moved = offset.saturating_add(s.offset_increment.saturating_mul(u64::from(clone)));
    if moved.saturating_add(size) > cap {
        return Err(format!(
            "clone {clone}: offset {moved} + size {size} runs past {what}"
        ));
    }
    if size < s.max_bs() {
        return Err(format!("size {size} is smaller than one block"));
    }
    Ok((moved, size))
}
