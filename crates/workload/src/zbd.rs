//! fio's `zonemode=zbd` (fio 3.33, `zbd.c`): a job's I/O moved to where a zoned device
//! takes it.
//!
//! Every file a `zonemode=zbd` job uses has one zone table, shared by all the jobs naming
//! that file, and by all jobs without files, which address the whole device (fio's
//! `zoned_block_device_info`, shared by file name): the zones of a zoned
//! device as its report gives them (a host-managed device), or zones of `zonesize` bytes
//! emulated on a conventional device or a regular file, all sequential and empty at the
//! start. Then, for each I/O the job draws (`zbd_adjust_block`):
//! - a write goes to the write pointer of its zone, or of an open zone when
//!   `max_open_zones` limits them (`zbd_convert_to_open_zone`); a full zone is reset first
//!   (after the job's I/O in flight completes, `io_u_quiesce`), and the write is cut to
//!   what the zone can still take;
//! - a read goes below its zone's write pointer, or to the nearest zone holding data
//!   (`zbd_find_zone`), unless `read_beyond_wp`;
//! - a mixed job's first reads become writes until something was written
//!   (`zbd_adjust_ddir`);
//! - a sequential job skips to the next zone at a zone's capacity, and with `zoneskip` after
//!   `zonesize` bytes (`setup_zbd_zone_mode`).
//!
//! The write pointer moves as a write is issued (`zbd_queue_io`), and a zone written to its
//! capacity is closed as the write completes (`zbd_end_zone_io`). A reset on a zoned device
//! is a `REQ_OP_ZONE_RESET` the job issues and waits for (fio's `BLKRESETZONE` ioctl); on an
//! emulated one it only moves the table's write pointer, as fio's does for a regular file.
//!
//! A zone is locked by the job that aims an I/O at it until that I/O completes (fio's
//! recursive zone mutex, held from `zbd_adjust_block` to `zbd_put_io`): another job
//! wanting it first lets its own I/O complete, then waits. So writes from several jobs to
//! one zone reach the block layer in write-pointer order.
//!
//! Where we differ: fio locks every zone it looks at on the way (candidates in
//! `zbd_convert_to_open_zone` and `zbd_find_zone`); here only the zone an I/O is drawn to
//! and the one it is finally aimed at. Trims (fio turns a trim of a sequential zone into a
//! zone reset) are refused.

use crate::job::{Job, JobError, JobErrorKind, JobSpec, Location, RwMode};
use mqblk_core::zoned::{Zone, ZoneCond, ZoneType};
use std::sync::{Arc, Mutex, MutexGuard};

/// fio's `ZBD_MAX_OPEN_ZONES`: the most open zones it tracks.
pub const ZBD_MAX_OPEN_ZONES: u32 = 4096;

/// How long a job waits before looking again at a zone another job holds (fio's thread
/// sleeps on the zone's mutex and is woken as it is let go) or when every open zone is being
/// filled by other jobs' writes in flight (fio's thread spins: `zbd_convert_to_open_zone`
/// retries while `any_io_in_flight`). Nothing tells a job here when another lets go, so it
/// looks again this much later: a wake-up a few microseconds late, and few enough looks that
/// a simulation of many writers on few zones stays fast.
pub const SPIN_NS: u64 = 5_000;

/// The zones of a zoned device, as its report gives them, and its open-zone limit (0: none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceZones {
    pub zones: Vec<Zone>,
    pub max_open: u32,
}

/// A job's `zonemode=zbd` options, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ZbdOptions {
    pub zone_size: u64,
    pub zone_capacity: u64,
    pub zone_skip: u64,
    pub read_beyond_wp: bool,
    pub max_open_zones: u32,
    pub job_max_open_zones: u32,
    pub ignore_zone_limits: bool,
    pub reset_threshold: f64,
    pub reset_frequency: f64,
}

impl ZbdOptions {
    pub fn of(s: &JobSpec) -> Option<ZbdOptions> {
        s.zonemode_zbd.then_some(ZbdOptions {
            zone_size: s.zonesize,
            zone_capacity: s.zonecapacity,
            zone_skip: s.zoneskip,
            read_beyond_wp: s.read_beyond_wp,
            max_open_zones: s.max_open_zones,
            job_max_open_zones: s.job_max_open_zones,
            ignore_zone_limits: s.ignore_zone_limits,
            reset_threshold: s.zone_reset_threshold,
            reset_frequency: s.zone_reset_frequency,
        })
    }
}

/// What `zonemode=zbd` needs of a job section that can be told before the run: the checks
/// of fio's option parsing and `zbd_verify_bs` that need no device.
pub fn check_spec(s: &JobSpec) -> Result<(), String> {
    if s.rw.does_trim() {
        return Err(
            "trims with zonemode=zbd are not supported (fio turns each into a zone reset)".into(),
        );
    }
    if s.zonecapacity > 0 && s.zonesize > 0 && s.zonecapacity > s.zonesize {
        return Err(format!(
            "zonecapacity {} is larger than zonesize {} (fio refuses it)",
            s.zonecapacity, s.zonesize
        ));
    }
    Ok(())
}

/// Before jobs are resolved: a `zonemode=zbd` job without `zonesize` takes the zoned
/// device's (`zone_bytes`), and sizes written in zones (`size=4z`) become bytes, as fio's
/// `zbd_recalc_options_with_zone_granularity`. A job on a conventional device needs
/// `zonesize`, and one on a zoned device may not name another.
pub fn apply_zone_size(specs: &mut [JobSpec], zone_bytes: Option<u64>) -> Result<(), JobError> {
    for s in specs.iter_mut().filter(|s| s.zonemode_zbd) {
        let bad = |m: String| {
            JobError::new(
                Location::Job {
                    name: s.name.clone(),
                },
                JobErrorKind::Invalid(m),
            )
        };
        match zone_bytes {
            Some(z) if s.zonesize == 0 => s.zonesize = z,
            Some(z) if s.zonesize != z => {
                return Err(bad(format!(
                    "zonesize {} does not match the device's zone size {z}",
                    s.zonesize
                )))
            }
            Some(_) => {}
            None if s.zonesize == 0 => return Err(bad(
                "zonemode=zbd on a device that is not zoned needs zonesize (the zones to emulate)"
                    .into(),
            )),
            None if s.zonesize < 512 => {
                return Err(bad(
                    "zonesize must be at least 512 bytes for zonemode=zbd".into()
                ))
            }
            None => {}
        }
        if s.zonecapacity > s.zonesize {
            return Err(bad(format!(
                "zonecapacity {} is larger than zonesize {}",
                s.zonecapacity, s.zonesize
            )));
        }
        for (option, n) in std::mem::take(&mut s.zone_counts) {
            let bytes = n.saturating_mul(s.zonesize);
            match option {
                "size" => s.size = Some(bytes).filter(|&b| b > 0),
                "offset" => s.offset = bytes,
                _ => s.io_size = Some(bytes),
            }
        }
    }
    Ok(())
}

/// How the zones are known (fio's `zbd_zoned_model`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Model {
    /// Emulated on a conventional device or a file (`ZBD_NONE`): resets move the table's
    /// write pointer only.
    Emulated,
    /// A host-managed zoned device: resets go to the device.
    HostManaged,
}

/// One zone of the table (fio's `fio_zone_info`), in bytes from the file's start.
#[derive(Clone, Debug, PartialEq)]
struct ZoneInfo {
    start: u64,
    capacity: u64,
    wp: u64,
    has_wp: bool,
    offline: bool,
    /// Open (implicitly or explicitly) when the run started.
    was_open: bool,
    /// In the open-zone list.
    open: bool,
    reset_zone: bool,
    /// fio's zone mutex: the job holding it, and how many of its I/Os aimed here are not
    /// done (the lock is recursive; it is let go as the last completes).
    owner: Option<usize>,
    holds: u32,
}

/// A file's zone table, shared by the jobs that use the file (fio's
/// `zoned_block_device_info`).
#[derive(Debug)]
pub struct ZbdFile {
    model: Model,
    zone_size: u64,
    zones: Vec<ZoneInfo>,
    /// The sentinel's start: where the last zone ends.
    end: u64,
    /// 0: open zones are not tracked.
    max_open_zones: u32,
    /// fio's `open_zones[]`: a fixed array whose first `num_open` entries are the open
    /// zones (entries past them keep stale values, which fio reads when none is open).
    open_zones: Vec<u32>,
    num_open: u32,
    sectors_with_data: u64,
    wp_sectors_with_data: u64,
    write_cnt: u32,
    /// Writes in flight to the file from any job (fio's `any_io_in_flight`, for writes:
    /// only they fill and close zones).
    writes_in_flight: u64,
}

impl ZbdFile {
    fn zone_idx(&self, offset: u64) -> u32 {
        ((offset / self.zone_size) as u32).min(self.zones.len() as u32)
    }
    fn zone_end(&self, z: u32) -> u64 {
        self.zones.get(z as usize + 1).map_or(self.end, |n| n.start)
    }
    fn cap_end(&self, z: u32) -> u64 {
        let zi = &self.zones[z as usize];
        zi.start + zi.capacity
    }
    fn full(&self, z: u32, required: u64) -> bool {
        let zi = &self.zones[z as usize];
        zi.has_wp && zi.wp + required > self.cap_end(z)
    }
    fn has_wp(&self, z: u32) -> bool {
        self.zones.get(z as usize).is_some_and(|zi| zi.has_wp)
    }
}

/// A file's shared zone table; equal when it is the same table.
#[derive(Clone, Debug)]
pub struct ZbdShared(Arc<Mutex<ZbdFile>>);

impl PartialEq for ZbdShared {
    fn eq(&self, o: &ZbdShared) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}

impl ZbdShared {
    fn lock(&self) -> MutexGuard<'_, ZbdFile> {
        // A job that panicked holding it left nothing half-done that matters more than
        // the run's report.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether any zone holds data (reads can be made).
    pub fn has_data(&self) -> bool {
        self.lock().sectors_with_data > 0
    }

    /// The file's model.
    pub fn model(&self) -> Model {
        self.lock().model
    }

    /// Zone `z`'s start, end and write pointer (a test's view).
    pub fn zone(&self, z: u32) -> Option<(u64, u64, u64)> {
        let f = self.lock();
        f.zones
            .get(z as usize)
            .map(|zi| (zi.start, f.zone_end(z), zi.wp))
    }
}

/// A job's `zonemode=zbd`: its options and, once [`setup`] ran, each of its files' table
/// and the zones the job covers in it.
#[derive(Clone, Debug, PartialEq)]
pub struct ZbdJob {
    pub opts: ZbdOptions,
    pub files: Vec<ZbdJobFile>,
}

/// A job's view of one file's table (fio's `f->zbd_info`, `min_zone`, `max_zone`).
#[derive(Clone, Debug, PartialEq)]
pub struct ZbdJobFile {
    pub shared: ZbdShared,
    /// Where the file's offset 0 lies on the device.
    pub base: u64,
    /// The job's region in the file: its start and bytes (fio's `file_offset`, `io_size`).
    pub file_offset: u64,
    pub io_size: u64,
    pub min_zone: u32,
    pub max_zone: u32,
    /// Open zones over the limit when the run started: reset before the job's first I/O.
    pub start_resets: Vec<u32>,
}

/// After jobs are resolved: one zone table per file, from the zoned device's report
/// (`device`; `None` emulates zones of `zonesize` over the file, `layout`'s, or the whole
/// device of `capacity` bytes for jobs without files), each job's region aligned to zones
/// as `zbd_zone_align_file_sizes` does, and the checks of `zbd_setup_files`.
pub fn setup(
    jobs: &mut [Job],
    device: Option<&DeviceZones>,
    layout: &crate::job::FileLayout,
    capacity: u64,
) -> Result<(), JobError> {
    // Keyed by where the file lies on the device: jobs naming one file share it, and jobs
    // without files all address the whole device from 0.
    let mut tables: Vec<(u64, ZbdShared)> = Vec::new();
    let any_writer_buffered = jobs
        .iter()
        .any(|j| j.zbd.is_some() && j.rw.does_write() && !j.direct);
    for j in jobs.iter_mut() {
        let Some(zbd) = &mut j.zbd else { continue };
        let bad = |m: String| {
            JobError::new(
                Location::Job {
                    name: j.name.clone(),
                },
                JobErrorKind::Invalid(m),
            )
        };
        if device.is_some() && any_writer_buffered {
            return Err(bad(
                "writing to a zoned device with zonemode=zbd needs direct=1 (fio: direct I/O is mandatory for writing to ZBD drives)".into(),
            ));
        }
        zbd.files.clear();
        for f in j.files.iter_mut() {
            let shared = match tables.iter().find(|(b, _)| *b == f.base) {
                Some((_, s)) => s.clone(),
                None => {
                    let file_size = layout
                        .files
                        .iter()
                        .find(|l| l.base == f.base)
                        .map_or(capacity.saturating_sub(f.base), |l| l.len)
                        .max(f.size + (f.offset - f.base));
                    let t = ZbdShared(Arc::new(Mutex::new(new_table(
                        &j.name, &zbd.opts, device, file_size, f.base,
                    )?)));
                    tables.push((f.base, t.clone()));
                    t
                }
            };
            let mut t = shared.lock();
            set_max_open(&mut t, &zbd.opts, device).map_err(&bad)?;
            if zbd.opts.job_max_open_zones > 0 && t.max_open_zones == 0 {
                return Err(bad(
                    "job_max_open_zones needs max_open_zones or a device limit (fio: it cannot be used without a global open zones limit)".into(),
                ));
            }
            if zbd.opts.max_open_zones > 0 && t.max_open_zones != zbd.opts.max_open_zones {
                return Err(bad("different max_open_zones values on one file".into()));
            }
            // zbd_zone_align_file_sizes: a writer's region starts and ends on zones.
            let mut off = f.offset - f.base;
            let mut size = f.size;
            if t.zone_size == 0 {
                return Err(bad("zone size 0".into()));
            }
            if zbd.opts.zone_skip % t.zone_size != 0 {
                return Err(bad(format!(
                    "zoneskip {} is not a multiple of the zone size {}",
                    zbd.opts.zone_skip, t.zone_size
                )));
            }
            let seq =
                size > 0 && (t.zone_idx(off)..=t.zone_idx(off + size - 1)).any(|z| t.has_wp(z));
            if seq && j.rw != RwMode::Read && j.rw != RwMode::RandRead && off < t.end {
                let z = t.zone_idx(off);
                if off != t.zones[z as usize].start {
                    let new_off = t.zone_end(z);
                    if new_off >= off + size {
                        return Err(bad("io_size must be at least one zone".into()));
                    }
                    size -= new_off - off;
                    off = new_off;
                }
                let z = t.zone_idx(off + size);
                let new_end = t.zones.get(z as usize).map_or(t.end, |zi| zi.start);
                if off + size != new_end {
                    if new_end <= off {
                        return Err(bad("io_size must be at least one zone".into()));
                    }
                    size = new_end - off;
                }
            }
            if j.verify {
                let bs = [j.bs[0], j.bs[1]];
                if let Some(b) = bs.iter().find(|&&b| t.zone_size % u64::from(b) != 0) {
                    return Err(bad(format!(
                        "block size {b} is not a divisor of the zone size {}",
                        t.zone_size
                    )));
                }
            }
            f.offset = f.base + off;
            f.size = size;
            let min_zone = t.zone_idx(off);
            let max_zone = t.zone_idx(off + size);
            // Zones open at the start count against the limit; those over it are reset.
            let mut start_resets = Vec::new();
            for z in min_zone..max_zone {
                if t.zones[z as usize].was_open && !open_zone(&mut t, z, None, 0, false, 0) {
                    start_resets.push(z);
                }
            }
            drop(t);
            zbd.files.push(ZbdJobFile {
                shared,
                base: f.base,
                file_offset: off,
                io_size: size,
                min_zone,
                max_zone,
                start_resets,
            });
        }
    }
    Ok(())
}

/// A file's table: the device's zones from `base` on (a host-managed device), or zones of
/// `zonesize` over `file_size` bytes (`init_zone_info`).
fn new_table(
    job: &str,
    o: &ZbdOptions,
    device: Option<&DeviceZones>,
    file_size: u64,
    base: u64,
) -> Result<ZbdFile, JobError> {
    let bad = |m: String| {
        JobError::new(
            Location::Job {
                name: job.to_string(),
            },
            JobErrorKind::Invalid(m),
        )
    };
    let (model, zone_size, zones, end) = match device {
        Some(d) => {
            let first = d
                .zones
                .first()
                .ok_or_else(|| bad("the device reported no zones".into()))?;
            let zone_size = first.len << 9;
            let mut zones = Vec::new();
            for z in d.zones.iter().filter(|z| (z.start << 9) >= base) {
                let start = (z.start << 9) - base;
                let capacity = z.capacity << 9;
                let conv = z.ty == ZoneType::Conventional;
                let wp = match z.cond {
                    ZoneCond::NotWp | ZoneCond::Full => start + capacity,
                    _ if conv => start + capacity,
                    _ => (z.wp << 9).saturating_sub(base),
                };
                zones.push(ZoneInfo {
                    start,
                    capacity,
                    wp,
                    has_wp: !conv,
                    offline: z.cond == ZoneCond::Offline,
                    was_open: matches!(z.cond, ZoneCond::ImpOpen | ZoneCond::ExpOpen),
                    open: false,
                    reset_zone: false,
                    owner: None,
                    holds: 0,
                });
            }
            let end = d
                .zones
                .last()
                .map_or(0, |z| ((z.start + z.len) << 9).saturating_sub(base));
            (Model::HostManaged, zone_size, zones, end)
        }
        None => {
            let zs = o.zone_size;
            if file_size < zs {
                return Err(bad(format!(
                    "file/device size {file_size} is smaller than zone size {zs}"
                )));
            }
            let cap = if o.zone_capacity == 0 {
                zs
            } else {
                o.zone_capacity
            };
            let n = file_size.div_ceil(zs);
            let zones = (0..n)
                .map(|i| ZoneInfo {
                    start: i * zs,
                    capacity: cap,
                    wp: i * zs,
                    has_wp: true,
                    offline: false,
                    was_open: false,
                    open: false,
                    reset_zone: false,
                    owner: None,
                    holds: 0,
                })
                .collect();
            (Model::Emulated, zs, zones, n * zs)
        }
    };
    Ok(ZbdFile {
        model,
        zone_size,
        zones,
        end,
        max_open_zones: 0,
        open_zones: vec![0; ZBD_MAX_OPEN_ZONES as usize],
        num_open: 0,
        sectors_with_data: 0,
        wp_sectors_with_data: 0,
        write_cnt: 0,
        writes_in_flight: 0,
    })
}

/// `zbd_set_max_open_zones`: the user's limit, or a host-managed device's.
fn set_max_open(
    t: &mut ZbdFile,
    o: &ZbdOptions,
    device: Option<&DeviceZones>,
) -> Result<(), String> {
    let dev = match device {
        Some(d) if !o.ignore_zone_limits && t.model == Model::HostManaged => d.max_open,
        _ => 0,
    };
    let v = match (dev, o.max_open_zones) {
        (0, u) => u,
        (d, 0) => d,
        (d, u) if u <= d => u,
        (d, u) => {
            return Err(format!(
                "max_open_zones {u} is larger than the device's limit {d}"
            ))
        }
    };
    if v > ZBD_MAX_OPEN_ZONES {
        return Err(format!(
            "max_open_zones {v} is larger than {ZBD_MAX_OPEN_ZONES}"
        ));
    }
    // Every job on the file sets it; fio checks they agree.
    if t.max_open_zones == 0 || v == t.max_open_zones {
        t.max_open_zones = v;
    }
    Ok(())
}

/// `zbd_open_zone`: whether zone `z` is (now) open for the job's writes, `job_open` counting
/// the job's own open zones against `job_max` (0: no limit of its own).
fn open_zone(
    t: &mut ZbdFile,
    z: u32,
    job_open: Option<&mut u32>,
    job_max: u32,
    verify: bool,
    min_bs: u64,
) -> bool {
    let zi = &t.zones[z as usize];
    if zi.offline {
        return false;
    }
    // A full zone is never reset under verify: it would lose what is to be read back.
    if verify && t.full(z, min_bs) {
        return false;
    }
    if t.max_open_zones == 0 {
        return true;
    }
    if zi.open {
        // Filled by writes in flight: full, not open.
        return zi.wp < t.cap_end(z);
    }
    let mine = job_open.as_deref().copied().unwrap_or(0);
    if job_max > 0 && mine >= job_max {
        return false;
    }
    if t.num_open >= t.max_open_zones {
        return false;
    }
    t.open_zones[t.num_open as usize] = z;
    t.num_open += 1;
    if let Some(n) = job_open {
        *n += 1;
    }
    t.zones[z as usize].open = true;
    true
}

/// `zbd_close_zone`: zone `z` leaves the open list.
fn close_zone(t: &mut ZbdFile, z: u32, job_open: &mut u32) {
    if !t.zones[z as usize].open {
        return;
    }
    let n = t.num_open as usize;
    let Some(i) = t.open_zones[..n].iter().position(|&o| o == z) else {
        return;
    };
    // fio's memmove over the whole array: the last entry stays as it was.
    t.open_zones.copy_within(i + 1.., i);
    t.num_open -= 1;
    *job_open = job_open.saturating_sub(1);
    t.zones[z as usize].open = false;
}

/// Where an adjustment stopped to wait, and goes on from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Resume {
    /// The I/O as drawn.
    Start,
    /// In `zbd_convert_to_open_zone`, at its `retry` label from zone `zone`.
    Retry { zone: u32, should_retry: bool },
    /// The write's zone `zone` needs its reset, the job's I/O having completed.
    Reset { zone: u32 },
    /// The device reset zone `zone`.
    AfterReset { zone: u32 },
}

/// What becomes of an I/O.
#[derive(Clone, Debug, PartialEq)]
pub enum Adjusted {
    /// Issue it at this device offset and length (its zone is the job's until it
    /// completes; if fio's random map cuts it, say so: [`ZbdState::cut`]).
    Accept { offset: u64, len: u32 },
    /// No I/O can be made (`io_u_eof`), with fio's error where it reports one.
    Eof(Option<String>),
    /// What the job has in flight must complete first (`io_u_quiesce`); then ask again.
    Quiesce(Resume),
    /// Other jobs' writes must complete first: ask again in [`SPIN_NS`].
    Spin(Resume),
    /// Reset the zone at this device offset and wait for it; then ask again. fio resets a
    /// zone with `BLKRESETZONE` over that zone's range, which the kernel's
    /// `blkdev_zone_mgmt` sends as one `REQ_OP_ZONE_RESET` bio per zone at the zone's start
    /// sector, no length of its own.
    Reset { offset: u64, resume: Resume },
}

/// A job's running `zonemode=zbd` state (fio's per-thread part: `num_open_zones`, the
/// zone resets it made).
#[derive(Clone, Debug)]
pub struct ZbdState {
    pub job: ZbdJob,
    /// The job's index in the run: who holds a zone lock.
    me: usize,
    pub num_open_zones: u32,
    pub resets: u64,
    random: bool,
    mixed: bool,
    verify: bool,
    writes: bool,
    min_bs: [u64; 2],
}

/// The read or write an adjustment is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ZbdIo {
    pub write: bool,
    pub file: usize,
    /// Device offset and bytes as drawn.
    pub offset: u64,
    pub len: u32,
}

impl ZbdState {
    pub fn new(job: &Job, zbd: ZbdJob) -> ZbdState {
        ZbdState {
            job: zbd,
            me: job.index,
            num_open_zones: 0,
            resets: 0,
            random: job.rw.is_random(),
            mixed: job.rw.does_read() && job.rw.does_write(),
            verify: job.verify,
            writes: job.rw.does_write(),
            min_bs: [
                u64::from(job.min_bs[0].max(512)),
                u64::from(job.min_bs[1].max(512)),
            ],
        }
    }

    /// `zbd_file_reset`, at the start of each loop: the data counts taken again over the
    /// job's zones, the reset countdown restarted, and with verify every written zone of
    /// the job's reset first (the zones to reset on the device are returned, by their
    /// device offsets, one reset each, as `blkdev_zone_mgmt` sends them).
    pub fn file_reset(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        if !self.writes {
            return out;
        }
        let verify = self.verify;
        let freq = self.job.opts.reset_frequency;
        for jf in &mut self.job.files {
            let mut t = jf.shared.lock();
            let (mut swd, mut wp_swd) = (0, 0);
            for z in jf.min_zone..jf.max_zone {
                let zi = &t.zones[z as usize];
                let d = zi.wp.saturating_sub(zi.start);
                swd += d;
                if zi.has_wp {
                    wp_swd += d;
                }
            }
            t.sectors_with_data = swd;
            t.wp_sectors_with_data = wp_swd;
            let mut resets: Vec<u32> = std::mem::take(&mut jf.start_resets);
            if verify {
                resets.extend(jf.min_zone..jf.max_zone);
                resets.sort_unstable();
                resets.dedup();
            }
            for z in resets {
                if !t.zones[z as usize].has_wp {
                    continue;
                }
                close_zone(&mut t, z, &mut self.num_open_zones);
                let zi = &t.zones[z as usize];
                if zi.wp != zi.start {
                    if t.model == Model::HostManaged {
                        out.push(jf.base + zi.start);
                    }
                    reset_zone_state(&mut t, z);
                    self.resets += 1;
                }
            }
            t.write_cnt = reset_write_cnt(freq);
        }
        out
    }

    /// `zbd_adjust_ddir`: a mixed job reads only once something was written.
    pub fn adjust_read(&self, file: usize) -> bool {
        !self.mixed
            || self.job.opts.read_beyond_wp
            || self
                .job
                .files
                .get(file)
                .is_some_and(|f| f.shared.has_data())
    }

    /// `zbd_adjust_block` for `io`, going on from `resume`; `quiet` says nothing of the
    /// job's is in flight (a quiesce would be a no-op).
    pub fn adjust(&mut self, io: ZbdIo, resume: Resume, quiet: bool) -> Adjusted {
        let Some(jf) = self.job.files.get(io.file).cloned() else {
            return Adjusted::Accept {
                offset: io.offset,
                len: io.len,
            };
        };
        let mut t = jf.shared.lock();
        let off = io.offset.saturating_sub(jf.base);
        let dir = usize::from(io.write);
        let min_bs = self.min_bs[dir];
        let z = t.zone_idx(off);
        if z as usize >= t.zones.len() {
            return Adjusted::Accept {
                offset: io.offset,
                len: io.len,
            };
        }
        let out = |o: u64, l: u64| Adjusted::Accept {
            offset: jf.base + o,
            len: l as u32,
        };
        if !t.zones[z as usize].has_wp {
            if !io.write {
                return out(off, u64::from(io.len));
            }
            // Writes to a conventional zone do not run into a sequential one.
            let next = z + 1;
            if !t.has_wp(next) || off + u64::from(io.len) <= t.zones[next as usize].start {
                return out(off, u64::from(io.len));
            }
            let ns = t.zones[next as usize].start;
            let (o, l) = if off + min_bs > ns {
                let o = t.zones[z as usize].start + ns - off;
                (o, u64::from(io.len).min(ns - o))
            } else {
                (off, ns - off)
            };
            return out(o, l / min_bs * min_bs);
        }
        if !io.write && !t.zones[z as usize].offline && self.job.opts.read_beyond_wp {
            return out(off, u64::from(io.len));
        }
        // zone_lock: another job's zone is waited for, the job's own I/O completing first.
        if let Some(wait) = self.wait_for(&t, z, resume, quiet) {
            return wait;
        }
        let a = if io.write {
            self.write(&mut t, &jf, off, u64::from(io.len), min_bs, resume, quiet)
        } else {
            self.read(&t, &jf, z, off, u64::from(io.len), min_bs, quiet)
        };
        if let Adjusted::Accept { offset, len } = a {
            self.take(&mut t, offset - jf.base, u64::from(len), io.write);
        }
        a
    }

    /// The I/O accepted at device offset `offset` (`len` bytes) goes out: its zone is
    /// locked until it completes, and a write moves the write pointer (`zbd_queue_io`).
    /// Done under the table's lock with the adjustment, so no other job aims at the zone
    /// in between.
    fn take(&mut self, t: &mut ZbdFile, off: u64, len: u64, write: bool) {
        let z = t.zone_idx(off);
        if (z as usize) >= t.zones.len() || !t.zones[z as usize].has_wp {
            return;
        }
        let zi = &mut t.zones[z as usize];
        zi.owner = Some(self.me);
        zi.holds += 1;
        if !write {
            return;
        }
        let end = (off + len).min(t.cap_end(z));
        let wp = t.zones[z as usize].wp;
        if wp <= end {
            t.sectors_with_data += end - wp;
            t.wp_sectors_with_data += end - wp;
        }
        t.zones[z as usize].wp = end;
        t.writes_in_flight += 1;
    }

    /// fio's random map cut the write [`Self::adjust`] accepted at device offset `offset`
    /// from `len` to `cut` bytes: the write pointer moves back by the difference (the job
    /// holds the zone, so nothing was aimed past it since).
    pub fn cut(&mut self, file: usize, offset: u64, len: u64, cut: u64) {
        let Some(jf) = self.job.files.get(file) else {
            return;
        };
        if cut >= len {
            return;
        }
        let mut t = jf.shared.lock();
        let off = offset.saturating_sub(jf.base);
        let z = t.zone_idx(off);
        if (z as usize) >= t.zones.len() || !t.zones[z as usize].has_wp {
            return;
        }
        let back = len - cut;
        let zi = &mut t.zones[z as usize];
        zi.wp = zi.wp.saturating_sub(back);
        t.sectors_with_data = t.sectors_with_data.saturating_sub(back);
        t.wp_sectors_with_data = t.wp_sectors_with_data.saturating_sub(back);
    }

    /// Whether zone `z` is locked by another job: then the job's I/O completes first
    /// (`io_u_quiesce`), and it waits ([`SPIN_NS`] at a time) with `resume` kept.
    fn wait_for(&self, t: &ZbdFile, z: u32, resume: Resume, quiet: bool) -> Option<Adjusted> {
        let zi = t.zones.get(z as usize)?;
        match zi.owner {
            Some(o) if o != self.me && zi.holds > 0 => Some(if quiet {
                Adjusted::Spin(resume)
            } else {
                Adjusted::Quiesce(resume)
            }),
            _ => None,
        }
    }

    /// The zone lock an I/O at device offset `at` took is let go (it completed or failed).
    fn release(&self, t: &mut ZbdFile, off: u64) {
        let z = t.zone_idx(off);
        if let Some(zi) = t.zones.get_mut(z as usize) {
            if zi.owner == Some(self.me) && zi.holds > 0 {
                zi.holds -= 1;
                if zi.holds == 0 {
                    zi.owner = None;
                }
            }
        }
    }

    /// The job is done: any zone lock it still holds (an I/O drawn but never issued) is let
    /// go.
    pub fn release_all(&self) {
        for jf in &self.job.files {
            let mut t = jf.shared.lock();
            for zi in t.zones.iter_mut().filter(|zi| zi.owner == Some(self.me)) {
                zi.owner = None;
                zi.holds = 0;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        t: &ZbdFile,
        jf: &ZbdJobFile,
        z: u32,
        off: u64,
        len: u64,
        min_bs: u64,
        quiet: bool,
    ) -> Adjusted {
        let orig = z;
        let mut zb = z;
        let mut off = off;
        let mut len = len;
        let zi = &t.zones[zb as usize];
        let mut range = if zi.offline { 0 } else { zi.wp - zi.start };
        if range < min_bs || (!self.random && off + min_bs > zi.wp) {
            let Some(found) = find_zone(t, jf, zb, min_bs, self.random) else {
                return Adjusted::Eof(None);
            };
            zb = found;
            let zi = &t.zones[zb as usize];
            range = zi.wp - zi.start;
            if !self.random {
                off = zi.start;
            }
        }
        if zb != orig {
            if let Some(wait) = self.wait_for(t, zb, Resume::Start, quiet) {
                return wait;
            }
        }
        let zi = &t.zones[zb as usize];
        if range <= len {
            off = zi.start;
        } else if self.random {
            let shift = (off - t.zones[orig as usize].start) % (range - len);
            off = zi.start + shift / min_bs * min_bs;
        }
        if !zi.has_wp {
            return Adjusted::Accept {
                offset: jf.base + off,
                len: len as u32,
            };
        }
        let new_len = len.min(zi.wp - off) / min_bs * min_bs;
        if new_len < len {
            len = new_len;
        }
        Adjusted::Accept {
            offset: jf.base + off,
            len: len as u32,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        t: &mut ZbdFile,
        jf: &ZbdJobFile,
        off: u64,
        len: u64,
        min_bs: u64,
        resume: Resume,
        quiet: bool,
    ) -> Adjusted {
        let job_max = self.job.opts.job_max_open_zones;
        let verify = self.verify;
        let zb = match resume {
            Resume::Start => {
                if len > t.zone_size {
                    return Adjusted::Eof(Some(format!(
                        "I/O buflen {len} exceeds zone size {}",
                        t.zone_size
                    )));
                }
                let z = t.zone_idx(off);
                if open_zone(
                    t,
                    z,
                    Some(&mut self.num_open_zones),
                    job_max,
                    verify,
                    min_bs,
                ) {
                    z
                } else {
                    match self.convert(t, jf, off, min_bs, None, quiet) {
                        Ok(z) => z,
                        Err(a) => return a,
                    }
                }
            }
            Resume::Retry { zone, should_retry } => {
                match self.convert(t, jf, off, min_bs, Some((zone, should_retry)), quiet) {
                    Ok(z) => z,
                    Err(a) => return a,
                }
            }
            Resume::Reset { zone } => return self.reset_then_write(t, jf, zone, len, min_bs),
            Resume::AfterReset { zone } => {
                if !quiet {
                    return Adjusted::Quiesce(Resume::AfterReset { zone });
                }
                reset_zone_state(t, zone);
                self.resets += 1;
                self.release(t, t.zones[zone as usize].start);
                return self.at_wp(t, jf, zone, len, min_bs);
            }
        };
        // The zone the write moved to may be another job's.
        if let Some(wait) = self.wait_for(t, zb, Resume::Start, quiet) {
            return wait;
        }
        // The zone reset threshold and frequency.
        if self.job.opts.reset_frequency > 0.0 {
            let io_size: u64 = jf.io_size;
            if t.wp_sectors_with_data as f64 >= io_size as f64 * self.job.opts.reset_threshold
                && dec_and_reset_write_cnt(t, self.job.opts.reset_frequency)
            {
                t.zones[zb as usize].reset_zone = true;
            }
        }
        if t.zones[zb as usize].reset_zone || t.full(zb, min_bs) {
            if verify {
                return Adjusted::Eof(Some(
                    "a zone to write needs a reset, which verify forbids".into(),
                ));
            }
            if !quiet {
                return Adjusted::Quiesce(Resume::Reset { zone: zb });
            }
            return self.reset_then_write(t, jf, zb, len, min_bs);
        }
        self.at_wp(t, jf, zb, len, min_bs)
    }

    /// The write's zone is reset (on the device, the caller issues it), then written.
    fn reset_then_write(
        &mut self,
        t: &mut ZbdFile,
        jf: &ZbdJobFile,
        z: u32,
        len: u64,
        min_bs: u64,
    ) -> Adjusted {
        t.zones[z as usize].reset_zone = false;
        let zi = &t.zones[z as usize];
        if zi.wp != zi.start {
            if t.model == Model::HostManaged {
                // The zone stays the job's while the device resets it.
                let zi = &mut t.zones[z as usize];
                zi.owner = Some(self.me);
                zi.holds += 1;
                let zi = &t.zones[z as usize];
                return Adjusted::Reset {
                    offset: jf.base + zi.start,
                    resume: Resume::AfterReset { zone: z },
                };
            }
            reset_zone_state(t, z);
            self.resets += 1;
        }
        self.at_wp(t, jf, z, len, min_bs)
    }

    /// The write goes to zone `z`'s write pointer, cut to what the zone takes.
    fn at_wp(&self, t: &ZbdFile, jf: &ZbdJobFile, z: u32, len: u64, min_bs: u64) -> Adjusted {
        if t.zones[z as usize].capacity < min_bs {
            return Adjusted::Eof(Some(format!(
                "zone capacity {} smaller than minimum block size {min_bs}",
                t.zones[z as usize].capacity
            )));
        }
        let off = t.zones[z as usize].wp;
        if off.wrapping_sub(jf.file_offset) >= jf.io_size {
            return Adjusted::Eof(Some("invalid write pointer".into()));
        }
        let room = t.cap_end(z).saturating_sub(off);
        let new_len = len.min(room) / min_bs * min_bs;
        if new_len < min_bs {
            return Adjusted::Eof(Some(format!(
                "zone remainder {room} smaller than min block size {min_bs}"
            )));
        }
        Adjusted::Accept {
            offset: jf.base + off,
            len: new_len as u32,
        }
    }

    /// `zbd_convert_to_open_zone`: the write moves to an open zone with room, opening
    /// another if the limits allow; `from` goes on at the `retry` label.
    fn convert(
        &mut self,
        t: &mut ZbdFile,
        jf: &ZbdJobFile,
        off: u64,
        min_bs: u64,
        from: Option<(u32, bool)>,
        quiet: bool,
    ) -> Result<u32, Adjusted> {
        let job_max = self.job.opts.job_max_open_zones;
        let verify = self.verify;
        let rel = off.saturating_sub(jf.file_offset);
        let pick = |t: &ZbdFile| (rel * u64::from(t.num_open) / jf.io_size.max(1)) as u32;
        let (mut zone_idx, mut should_retry) = match from {
            Some(r) => r,
            None => {
                let mut zi = if t.max_open_zones > 0 || job_max > 0 {
                    t.open_zones[pick(t) as usize]
                } else {
                    t.zone_idx(off)
                };
                if zi < jf.min_zone {
                    zi = jf.min_zone;
                } else if zi >= jf.max_zone {
                    zi = jf.max_zone.saturating_sub(1);
                }
                // Find a candidate: the zone itself, or one of the open zones.
                let mut open_other = false;
                loop {
                    let z = &t.zones[zi as usize];
                    if z.has_wp {
                        if !z.offline && t.max_open_zones == 0 && job_max == 0 {
                            break;
                        }
                        if t.num_open == 0 {
                            open_other = true;
                            break;
                        }
                    }
                    let start = pick(t);
                    let mut tmp = start;
                    let mut found = None;
                    for _ in 0..t.num_open {
                        if tmp >= t.num_open {
                            tmp = 0;
                        }
                        let tz = t.open_zones[tmp as usize];
                        if jf.min_zone <= tz && tz < jf.max_zone {
                            found = Some(tmp);
                            break;
                        }
                        tmp += 1;
                    }
                    let Some(i) = found else {
                        return Err(Adjusted::Eof(None));
                    };
                    let new = t.open_zones[i as usize];
                    if new == zi {
                        break;
                    }
                    zi = new;
                }
                if !open_other && t.zones[zi as usize].wp + min_bs <= t.cap_end(zi) {
                    return Ok(zi);
                }
                // open_other_zone: at a limit, the job's writes complete first.
                let span = jf.max_zone - jf.min_zone;
                let wait_close = t.num_open == span
                    || (t.max_open_zones > 0 && t.num_open == t.max_open_zones)
                    || (job_max > 0 && self.num_open_zones == job_max);
                if wait_close && !quiet {
                    return Err(Adjusted::Quiesce(Resume::Retry {
                        zone: zi,
                        should_retry: true,
                    }));
                }
                (zi, true)
            }
        };
        loop {
            // retry: the zones after this one, wrapping, for one to open.
            let n = jf.io_size / t.zone_size.max(1);
            for _ in 0..n {
                zone_idx += 1;
                let start = t.zones.get(zone_idx as usize).map_or(t.end, |z| z.start);
                if start.wrapping_sub(jf.file_offset) >= jf.io_size {
                    zone_idx = jf.min_zone;
                }
                let z = &t.zones[zone_idx as usize];
                if !z.has_wp || z.open {
                    continue;
                }
                if open_zone(
                    t,
                    zone_idx,
                    Some(&mut self.num_open_zones),
                    job_max,
                    verify,
                    min_bs,
                ) {
                    return Ok(zone_idx);
                }
            }
            // Or room in a zone already open.
            for i in 0..t.num_open {
                let zi = t.open_zones[i as usize];
                if zi < jf.min_zone || zi >= jf.max_zone {
                    continue;
                }
                if t.zones[zi as usize].wp + min_bs <= t.cap_end(zi) {
                    return Ok(zi);
                }
            }
            // Writes in flight may close zones: wait for them and look again.
            let in_flight = !quiet || t.writes_in_flight > 0;
            if in_flight || should_retry {
                should_retry = in_flight;
                let resume = Resume::Retry {
                    zone: zone_idx,
                    should_retry,
                };
                if !quiet {
                    return Err(Adjusted::Quiesce(resume));
                }
                if t.writes_in_flight > 0 {
                    return Err(Adjusted::Spin(resume));
                }
                continue;
            }
            return Err(Adjusted::Eof(None));
        }
    }

    /// A read or write (`write`) at device offset `at` of `bytes` completed, or failed
    /// (`ok` false): its zone lock is let go (`zbd_put_io`), and `zbd_end_zone_io` closes a
    /// zone a write filled.
    pub fn io_done(&mut self, write: bool, at: u64, bytes: u64, ok: bool) {
        let Some(jf) = self
            .job
            .files
            .iter()
            .filter(|f| f.base <= at)
            .max_by_key(|f| f.base)
        else {
            return;
        };
        let mut t = jf.shared.lock();
        let off = at - jf.base;
        self.release(&mut t, off);
        if !write {
            return;
        }
        t.writes_in_flight = t.writes_in_flight.saturating_sub(1);
        let z = t.zone_idx(off);
        if ok
            && (z as usize) < t.zones.len()
            && t.zones[z as usize].has_wp
            && off + bytes >= t.cap_end(z)
        {
            close_zone(&mut t, z, &mut self.num_open_zones);
        }
    }
}

/// `zbd_find_zone`: the nearest zone after `zb` (and for a random job, before it) holding
/// `min_bytes` of data.
fn find_zone(t: &ZbdFile, jf: &ZbdJobFile, zb: u32, min_bytes: u64, random: bool) -> Option<u32> {
    let zl = jf.max_zone as i64;
    let zf = jf.min_zone as i64;
    let (mut z1, mut z2) = (zb as i64 + 1, zb as i64 - 1);
    while z1 < zl || z2 >= zf {
        if z1 < zl && !t.zones[z1 as usize].offline {
            let z = &t.zones[z1 as usize];
            if z.start + min_bytes <= z.wp {
                return Some(z1 as u32);
            }
        } else if !random {
            break;
        }
        if random && z2 >= zf && !t.zones[z2 as usize].offline {
            let z = &t.zones[z2 as usize];
            if z.start + min_bytes <= z.wp {
                return Some(z2 as u32);
            }
        }
        z1 += 1;
        z2 -= 1;
    }
    None
}

/// `zbd_reset_zone`'s bookkeeping: the data counts drop and the write pointer goes back.
fn reset_zone_state(t: &mut ZbdFile, z: u32) {
    let zi = &t.zones[z as usize];
    let data = zi.wp.saturating_sub(zi.start);
    t.sectors_with_data = t.sectors_with_data.saturating_sub(data);
    t.wp_sectors_with_data = t.wp_sectors_with_data.saturating_sub(data);
    let zi = &mut t.zones[z as usize];
    zi.wp = zi.start;
}

/// `_zbd_reset_write_cnt`: writes until the next reset, one in `1/frequency`.
fn reset_write_cnt(freq: f64) -> u32 {
    if freq > 0.0 {
        (1.0 / freq).min(f64::from(u32::MAX)) as u32
    } else {
        u32::MAX
    }
}

/// `zbd_dec_and_reset_write_cnt`: whether this write's zone is due for a reset.
fn dec_and_reset_write_cnt(t: &mut ZbdFile, freq: f64) -> bool {
    let mut left = 0;
    if t.write_cnt > 0 {
        t.write_cnt -= 1;
        left = t.write_cnt;
    }
    if left == 0 {
        t.write_cnt = reset_write_cnt(freq);
    }
    left == 0
}

/// What a file's I/O generator needs of `zonemode=zbd` (the direction and sequential
/// position adjustments fio makes before it draws an offset).
#[derive(Clone, Debug, PartialEq)]
pub struct GenZbd {
    pub shared: ZbdShared,
    pub opts: ZbdOptions,
    /// The region's start in the file.
    pub region: u64,
    /// The job both reads and writes (`td_rw`).
    pub mixed: bool,
}

impl GenZbd {
    /// `zbd_adjust_ddir`: whether a read drawn now stays a read.
    pub fn may_read(&self) -> bool {
        !self.mixed || self.opts.read_beyond_wp || self.shared.has_data()
    }
}

/// `setup_zbd_zone_mode` for a sequential job's next position `pos` (bytes into the file)
/// in direction `write`: past a zone's capacity a writer skips to the zone's end, and with
/// `zoneskip` the job moves on after `zonesize` bytes of a zone (or at its end, or a
/// reader at its write pointer). Returns the new position, if it moves, and whether the
/// zone's byte count starts over.
pub fn zone_mode_position(
    shared: &ZbdShared,
    opts: &ZbdOptions,
    pos: u64,
    write: bool,
    zone_bytes: u64,
    visit_start: u64,
) -> (Option<u64>, bool) {
    let t = shared.lock();
    let z = t.zone_idx(pos);
    if z as usize >= t.zones.len() {
        return (None, false);
    }
    let mut pos = pos;
    let mut moved = None;
    if t.zones[z as usize].capacity < t.zone_size && write && pos >= t.cap_end(z) {
        pos = t.zone_end(z);
        moved = Some(pos);
    }
    if opts.zone_skip == 0 {
        return (moved, false);
    }
    let z = t.zone_idx(pos).min(t.zones.len() as u32 - 1);
    let zi = &t.zones[z as usize];
    if zone_bytes >= opts.zone_size
        || pos >= t.zone_end(z)
        || (!write && !opts.read_beyond_wp && pos >= zi.wp)
    {
        let next = visit_start + opts.zone_size + opts.zone_skip;
        return (Some(next), true);
    }
    (moved, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{parse_job_text, resolve};
    use crate::job_driver::{IoKind, JobDriver, JobIo, Next};
    use crate::Ddir;
    use mqblk_core::zoned::{ZonedDev, ZonedDevConfig};

    const MIB: u64 = 1 << 20;

    /// The jobs of `text` on a device of 16 MiB, zoned as `device` says (`None`: zones
    /// emulated), one driver each.
    fn drivers(text: &str, device: Option<&DeviceZones>) -> Result<Vec<JobDriver>, String> {
        let mut specs = parse_job_text("t", text).map_err(|e| e.to_string())?;
        let zone = device.map(|d| d.zones[0].len << 9);
        apply_zone_size(&mut specs, zone).map_err(|e| e.to_string())?;
        let mut jobs =
            resolve(&specs, &Default::default(), |_| Ok(16 * MIB), 0).map_err(|e| e.to_string())?;
        setup(&mut jobs, device, &Default::default(), 16 * MIB).map_err(|e| e.to_string())?;
        Ok(jobs.iter().map(JobDriver::new).collect())
    }

    /// A zoned device of 16 zones of 1 MiB, as null_blk's zoned mode reports it new.
    fn zoned_device() -> DeviceZones {
        let dev = ZonedDev::new(
            (16 * MIB) >> 9,
            ZonedDevConfig {
                zone_sectors: MIB >> 9,
                zone_capacity: 0,
                nr_conv: 0,
                max_open: 0,
                max_active: 0,
                append_max_sectors: 0,
            },
        )
        .unwrap();
        DeviceZones {
            zones: dev.report(0, usize::MAX),
            max_open: 0,
        }
    }

    fn io(n: Next) -> JobIo {
        match n {
            Next::Io(io) => io,
            other => panic!("expected an I/O, got {other:?}"),
        }
    }

    fn done(d: &mut JobDriver, io: &JobIo) {
        let dir = if io.kind == IoKind::Read {
            Ddir::Read
        } else {
            Ddir::Write
        };
        d.completed(0, 1, dir, u64::from(io.len), io.offset);
    }

    /// Writes go to the write pointer of their zone: a sequential writer of 64 KiB into
    /// zones of 1 MiB with 768 KiB capacity writes 12 blocks per zone and skips the rest.
    #[test]
    fn writes_fill_each_zone_to_its_capacity_then_move_on() {
        let mut d = drivers(
            "[w]\nrw=write\nbs=64k\nzonemode=zbd\nzonesize=1m\nzonecapacity=768k\nsize=4m\n",
            None,
        )
        .unwrap()
        .remove(0);
        let mut offsets = Vec::new();
        loop {
            match d.next(0) {
                Next::Io(io) => {
                    offsets.push(io.offset);
                    done(&mut d, &io);
                }
                Next::Drain => {}
                Next::Done => break,
                Next::Until(t) => panic!("until {t}"),
            }
        }
        let want: Vec<u64> = (0..4)
            .flat_map(|z| (0..12).map(move |b| z * MIB + b * 64 * 1024))
            .collect();
        assert_eq!(offsets, want);
    }

    /// On a zoned device a full zone is reset on the device before it is written again:
    /// the reset goes out alone, after the job's I/O in flight, and is waited for.
    #[test]
    fn a_full_zone_is_reset_on_the_device_before_it_is_written_again() {
        let dev = zoned_device();
        let mut d = drivers(
            "[w]\nrw=write\nbs=256k\ndirect=1\nzonemode=zbd\nsize=1m\nio_size=2m\niodepth=4\n",
            Some(&dev),
        )
        .unwrap()
        .remove(0);
        // The first pass fills zone 0 (four writes in flight at once).
        let first: Vec<JobIo> = (0..4).map(|_| io(d.next(0))).collect();
        assert_eq!(
            first.iter().map(|i| i.offset).collect::<Vec<_>>(),
            vec![0, 256 << 10, 512 << 10, 768 << 10]
        );
        // The second pass finds it full: what is in flight completes first...
        assert_eq!(
            d.next(0),
            Next::Drain,
            "the pass's end waits for its writes"
        );
        for i in &first {
            done(&mut d, i);
        }
        let mut next = d.next(0);
        while next == Next::Drain {
            next = d.next(0);
        }
        // ...then the zone is reset, and nothing else goes out until that is done.
        let reset = io(next);
        assert_eq!(
            (reset.kind, reset.offset, reset.len),
            (IoKind::ZoneReset, 0, 0)
        );
        assert_eq!(d.next(0), Next::Drain);
        let w = io(d.next(0));
        assert_eq!((w.kind, w.offset), (IoKind::Write, 0));
        assert_eq!(d.zone_resets(), 1);
    }

    /// Two jobs writing one zone take turns, as fio's zone lock has them: the second
    /// waits until the first one's write completes, then writes at the pointer it left.
    #[test]
    fn a_zone_another_job_is_writing_is_waited_for() {
        let text = "[global]\nrw=write\nbs=64k\nzonemode=zbd\nzonesize=1m\nsize=1m\n[a]\n[b]\n";
        let mut ds = drivers(text, None).unwrap();
        let (a, b) = ds.split_at_mut(1);
        let (a, b) = (&mut a[0], &mut b[0]);
        let wa = io(a.next(0));
        assert_eq!(wa.offset, 0);
        // b lets its own I/O complete (none), then looks again shortly.
        assert_eq!(b.next(0), Next::Drain);
        assert_eq!(b.next(0), Next::Until(SPIN_NS));
        assert_eq!(b.next(SPIN_NS), Next::Until(2 * SPIN_NS));
        done(a, &wa);
        let wb = io(b.next(2 * SPIN_NS));
        assert_eq!(
            wb.offset,
            64 << 10,
            "b writes where a's write left the pointer"
        );
    }

    /// A random reader reads below the write pointers only: a zone holding 128 KiB is read
    /// within those 128 KiB, and an empty region ends the job at once.
    #[test]
    fn reads_stay_below_the_write_pointer() {
        let text = "[global]\nzonemode=zbd\nzonesize=1m\nsize=4m\n\
                    [w]\nrw=write\nbs=64k\nio_size=128k\n\
                    [r]\nstonewall\nrw=randread\nbs=4k\nio_size=256k\n";
        let mut ds = drivers(text, None).unwrap();
        loop {
            match ds[0].next(0) {
                Next::Io(i) => done(&mut ds[0], &i),
                Next::Done => break,
                _ => {}
            }
        }
        let mut reads = 0;
        loop {
            match ds[1].next(0) {
                Next::Io(i) => {
                    assert!(i.offset + u64::from(i.len) <= 128 << 10, "{i:?}");
                    reads += 1;
                    done(&mut ds[1], &i);
                }
                Next::Done => break,
                _ => {}
            }
        }
        assert_eq!(reads, 64);
        let mut empty = drivers(
            "[r]\nrw=randread\nbs=4k\nzonemode=zbd\nzonesize=1m\nsize=4m\n",
            None,
        )
        .unwrap()
        .remove(0);
        assert!(
            !matches!(empty.next(0), Next::Io(_)),
            "nothing to read in empty zones"
        );
    }

    #[test]
    fn bad_zone_settings_get_one_line_each() {
        let cases = [
            (
                "[j]\nrw=randwrite\nzonemode=zbd\nsize=4m\n",
                None,
                "needs zonesize",
            ),
            (
                "[j]\nrw=write\nzonemode=zbd\nzonesize=1m\nzonecapacity=2m\nsize=4m\n",
                None,
                "zonecapacity 2097152 is larger than zonesize 1048576",
            ),
            (
                "[j]\nrw=randtrim\nzonemode=zbd\nzonesize=1m\nsize=4m\n",
                None,
                "trims with zonemode=zbd are not supported",
            ),
            (
                "[j]\nrw=write\ndirect=1\nzonemode=zbd\nzonesize=2m\nsize=4m\n",
                Some(zoned_device()),
                "zonesize 2097152 does not match the device's zone size 1048576",
            ),
            (
                "[j]\nrw=write\nzonemode=zbd\nsize=4m\n",
                Some(zoned_device()),
                "needs direct=1",
            ),
            (
                "[j]\nrw=randwrite\nzonemode=zbd\nzonesize=1m\njob_max_open_zones=2\nsize=4m\n",
                None,
                "job_max_open_zones needs max_open_zones",
            ),
        ];
        for (text, dev, want) in cases {
            let e = drivers(text, dev.as_ref()).err().unwrap_or_default();
            assert!(e.contains(want), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
