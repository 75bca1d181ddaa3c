//! The parsed form of one job: [`JobSpec`] and its small enums.

use super::engine::{classify, EngineKind, FIO_DEFAULT};
use crate::logs::LogConfig;
use crate::pattern::{BlockSizes, Distribution, SplitEntry};
use crate::Ddir;

/// fio's default `percentile_list` (`options.c`).
pub const DEFAULT_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// fio's default `filename_format`.
pub const FILENAME_FORMAT: &str = "$jobname.$jobnum.$filenum";

/// How a job with several files picks the file of its next I/O (`file_service_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileServiceKind {
    /// Each open file in turn (fio's default).
    RoundRobin,
    /// One file to its end, then the next.
    Sequential,
    /// A file drawn at random among the open ones.
    Random,
    /// A file drawn by `zipf`, `pareto` or `normal`/`gauss` over all of them; a file
    /// whose pass is done starts over (fio's `fio_file_reset`) until the job's I/O is done.
    Skewed,
}

/// `file_service_type=KIND[:N]`: N I/Os go to a file before the next is picked (for the
/// skewed kinds the number is the distribution's parameter, held in `dist`).
#[derive(Debug, Clone, PartialEq)]
pub struct FileService {
    pub kind: FileServiceKind,
    pub nr: u64,
    pub dist: crate::pattern::Distribution,
}

impl Default for FileService {
    fn default() -> FileService {
        FileService {
            kind: FileServiceKind::RoundRobin,
            nr: 1,
            dist: crate::pattern::Distribution::Uniform,
        }
    }
}

/// `fallocate=`: how fio makes a file its jobs only write (one they read is written out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallocate {
    /// `none` (or `0`): the file is extended sparse.
    None,
    /// `native`, `posix`, `keep` (or `1`): its blocks are allocated (fio's default).
    Native,
    /// `truncate`: extended with `ftruncate`, sparse.
    Truncate,
}

/// The I/O pattern (`rw=`). fio's `rw` and `readwrite` values are the same mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwMode {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    RandRead,
    /// Random writes.
    RandWrite,
    /// Random mixed reads and writes (`rwmixread` decides the mix).
    RandRw,
    /// Sequential mixed reads and writes (`rw=rw` or `rw=readwrite`).
    ReadWrite,
    /// Sequential trims (discards).
    Trim,
    /// Random trims.
    RandTrim,
    /// Sequential trim+write: each block trimmed, then written (`trimwrite`).
    TrimWrite,
    /// The same at random offsets (`randtrimwrite`).
    RandTrimWrite,
}

impl RwMode {
    /// Whether offsets are chosen at random.
    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead
                | RwMode::RandWrite
                | RwMode::RandRw
                | RwMode::RandTrim
                | RwMode::RandTrimWrite
        )
    }

    /// Whether the job issues reads.
    pub fn does_read(self) -> bool {
        matches!(
            self,
            RwMode::Read | RwMode::RandRead | RwMode::RandRw | RwMode::ReadWrite
        )
    }

    /// Whether the job issues writes.
    pub fn does_write(self) -> bool {
        matches!(
            self,
            RwMode::Write
                | RwMode::RandWrite
                | RwMode::RandRw
                | RwMode::ReadWrite
                | RwMode::TrimWrite
                | RwMode::RandTrimWrite
        )
    }

    /// Whether the job issues trims (discards).
    pub fn does_trim(self) -> bool {
        matches!(
            self,
            RwMode::Trim | RwMode::RandTrim | RwMode::TrimWrite | RwMode::RandTrimWrite
        )
    }

    /// Whether reads and writes are mixed (so `rwmixread` matters).
    pub fn is_mixed(self) -> bool {
        matches!(self, RwMode::RandRw | RwMode::ReadWrite)
    }

    /// fio's spelling of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::RandRw => "randrw",
            RwMode::ReadWrite => "readwrite",
            RwMode::Trim => "trim",
            RwMode::RandTrim => "randtrim",
            RwMode::TrimWrite => "trimwrite",
            RwMode::RandTrimWrite => "randtrimwrite",
        }
    }
}

/// How the emulated device completes requests (null_blk's `irqmode`).
pub use mqblk_core::IrqMode;

/// Which I/O errors a job goes on after (`continue_on_error`, `ignore_error`), as fio 3.33's
/// `td_non_fatal_error`: an error's type is verify for `EILSEQ`, read for a read, write for
/// anything else; it is not fatal when `continue_on_error` covers its type and its errno is
/// in the type's list (`ignore_error`'s, or `EIO` and `EILSEQ`). A fatal one ends the job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorPolicy {
    /// Bits 0 read, 1 write, 2 verify.
    pub continue_on: u8,
    /// `ignore_error`'s errno lists per type (`None`: fio's `EIO`, `EILSEQ`).
    pub ignore: [Option<Vec<i32>>; 3],
    /// Every error of a covered type is non-fatal, whatever its errno: for jobs built in
    /// code (the simulator's scenarios and fuzzer) that exercise error paths, which no job
    /// file can ask for.
    pub any_errno: bool,
}

/// The errnos the job model reports: `EIO` (an I/O error; fio's for a missed `rate_min`),
/// `ETIMEDOUT` (fio's for `max_latency` or `latency_target` missed), `EILSEQ` (fio's verify
/// error); and `ENOSPC` and `EDQUOT`, which end a `fill_device` job.
pub const EIO: i32 = 5;
pub const ETIMEDOUT: i32 = 110;
pub const EILSEQ: i32 = 84;
pub const ENOSPC: i32 = 28;
pub const EDQUOT: i32 = 122;

impl ErrorPolicy {
    /// Whether an error `errno` on a read (`read`) or another I/O lets the job go on.
    pub fn non_fatal(&self, read: bool, errno: i32) -> bool {
        let ty = if errno == EILSEQ {
            2
        } else if read {
            0
        } else {
            1
        };
        self.continue_on & (1 << ty) != 0
            && (self.any_errno
                || match &self.ignore[ty] {
                    Some(list) => list.contains(&errno),
                    None => errno == EIO || errno == EILSEQ,
                })
    }

    /// Whether the job goes on after some errors (`continue_on_error` for some type): its
    /// report then carries `total_err` and `first_error`.
    pub fn continues(&self) -> bool {
        self.continue_on != 0
    }

    /// Goes on after every error.
    pub fn go_on_after_any() -> ErrorPolicy {
        ErrorPolicy {
            continue_on: 7,
            any_errno: true,
            ..ErrorPolicy::default()
        }
    }
}

/// fio's reporting group (`groupid`) of each job section: from 0, one more at each section
/// after the first with `stonewall` or `new_group`.
pub fn reporting_groups(specs: &[JobSpec]) -> Vec<u32> {
    let mut group = 0;
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if i > 0 && (s.stonewall || s.new_group) {
                group += 1;
            }
            group
        })
        .collect()
}

/// Which jobs a job's end terminates (`exit_what`, with `exitall` or `exitall_on_error`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExitWhat {
    /// The jobs of its reporting group (fio's `groupid`), fio's default.
    #[default]
    Group,
    /// Every job running now, whatever its group; the next stonewall's jobs still run.
    Stonewall,
    /// Every job, and none of the jobs still to start runs.
    All,
}

/// fio's `exitall`, `exit_what` and `exitall_on_error` for one job clone, and where it
/// stands (its reporting group).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exit {
    /// Some job of the run sets `exitall`: then every job's end terminates others (fio's
    /// global `exitall_on_terminate`, which `exitall` anywhere sets).
    pub on_end: bool,
    /// `exitall_on_error`: this job's end in error terminates others.
    pub on_error: bool,
    pub what: ExitWhat,
    /// fio's `groupid`: from 0, one more at each job section with `stonewall` or
    /// `new_group`.
    pub groupid: u32,
}

impl Exit {
    /// Whether this job's end (`failed`: in error) terminates the job of `other`, which
    /// `other_running` says had started when this one ended (fio's
    /// `fio_terminate_threads`).
    pub fn ends(&self, failed: bool, other: &Exit, other_running: bool) -> bool {
        if !(self.on_end || (self.on_error && failed)) {
            return false;
        }
        match self.what {
            ExitWhat::Group => other.groupid == self.groupid,
            ExitWhat::Stonewall => other_running,
            ExitWhat::All => true,
        }
    }
}

/// Data verification (`verify=`): the checksum each written block's header carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyMode {
    /// No verification (`verify=0` or `verify=null`).
    None,
    /// `crc32c` (or `crc32c-intel`).
    Crc32c,
    Crc32,
    Crc64,
    Crc16,
    Crc7,
    Md5,
    Sha1,
    Sha256,
    Sha512,
    /// `xxhash` (64-bit here; fio's is 32-bit).
    Xxhash,
    /// `meta`: the header alone (offset, length, seed), no checksum of the data.
    Meta,
    /// `pattern`: no header; every byte is `verify_pattern`'s, checked as such.
    Pattern,
}

impl VerifyMode {
    /// fio's name of the algorithm.
    pub fn name(self) -> &'static str {
        match self {
            VerifyMode::None => "null",
            VerifyMode::Crc32c => "crc32c",
            VerifyMode::Crc32 => "crc32",
            VerifyMode::Crc64 => "crc64",
            VerifyMode::Crc16 => "crc16",
            VerifyMode::Crc7 => "crc7",
            VerifyMode::Md5 => "md5",
            VerifyMode::Sha1 => "sha1",
            VerifyMode::Sha256 => "sha256",
            VerifyMode::Sha512 => "sha512",
            VerifyMode::Xxhash => "xxhash",
            VerifyMode::Meta => "meta",
            VerifyMode::Pattern => "pattern",
        }
    }
}

/// fio's `hugepage-size` default on x86 (its HOWTO: "2 or 4MiB depending on the
/// platform"; x86's huge page is 2 MiB).
pub const DEFAULT_HUGEPAGE_SIZE: u64 = 2 << 20;

/// `iomem=` (`mem=`): what a job's I/O buffers are made of, as fio names it. fio allocates
/// them as one area of `iodepth` buffers of the largest block size; so does mqblk.
///
/// What the kind changes is how the buffers lie in physical memory, which the kernel sees:
/// it counts a request's segments (`max_segments`, a virtio ring's descriptors) over runs of
/// adjoining pages. Ordinary memory (`malloc`, `shm`, `mmap`, `mmapshared`) is 4 KiB pages
/// that adjoin only as the page allocator happens to hand them out; huge pages (`shmhuge`,
/// `mmaphuge`) adjoin within each huge page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum IoMem {
    /// `malloc`: the heap (fio's default).
    #[default]
    Malloc,
    /// `shm`, `mmap[:FILE]`, `mmapshared[:FILE]`: other 4 KiB pages, which mqblk takes
    /// from its heap (they lie in memory as the heap's do); the name as given.
    OtherPages(String),
    /// `shmhuge`, or `mmaphuge[:FILE]` (a file on hugetlbfs, created and removed by mqblk):
    /// huge pages of `hugepage-size`.
    Huge {
        /// The file to map, `None` for anonymous huge pages (`shmhuge`).
        file: Option<String>,
    },
}

/// As a job file writes it (`malloc`, `shmhuge`, `mmaphuge:FILE`, ...).
impl std::fmt::Display for IoMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoMem::Malloc => f.write_str("malloc"),
            IoMem::OtherPages(t) => f.write_str(t),
            IoMem::Huge { file: None } => f.write_str("shmhuge"),
            IoMem::Huge { file: Some(p) } => write!(f, "mmaphuge:{p}"),
        }
    }
}

impl IoMem {
    /// Whether the buffers are huge pages.
    pub fn is_huge(&self) -> bool {
        matches!(self, IoMem::Huge { .. })
    }
}

/// One job, with every supported option at its parsed value (see [`option_table`] for
/// the meaning and default of each; field names follow the option names, with `_ns`
/// added where fio's unit was implicit).
///
/// [`option_table`]: super::option_table
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Job name (the section name, or `--name=`).
    pub name: String,
    /// Free-form description (`description=`).
    pub description: String,

    /// I/O pattern.
    pub rw: RwMode,
    /// Percentage of mixed I/O that is reads (`rwmixread`, or `100 - rwmixwrite`).
    pub rwmixread: u32,
    /// Block size per direction, indexed by [`Ddir`] (`bs=r,w,t`).
    pub bs: [u64; 3],
    /// `bsrange=min-max` per direction (replaces `bs`; `bs=` given later clears it).
    pub bsrange: Option<[(u64, u64); 3]>,
    /// `bssplit=` per direction (takes precedence over `bs` and `bsrange`, as in fio).
    pub bssplit: Option<[Vec<SplitEntry>; 3]>,
    /// `blockalign=` per direction: offsets of random I/O are multiples of it.
    pub blockalign: Option<[u64; 3]>,
    /// `rw=MODE:N`'s N (0: none): a gap in bytes for sequential patterns, I/Os per random
    /// offset for random ones.
    pub rw_modifier: u64,
    /// `rw=MODE:-N`: sequential I/O going backwards, each I/O N bytes before the end of
    /// the one before.
    pub rw_backward: bool,
    /// `random_distribution=`.
    pub random_distribution: Distribution,
    /// `percentage_random=` per direction: the share of a random job's I/Os at random
    /// offsets, the rest following on from the direction's previous I/O (100).
    pub percentage_random: [u32; 3],
    /// `rw_sequencer=identical`: the I/Os between a random `rw=randread:N` job's random
    /// ones repeat the offset before instead of following on from it (fio's
    /// `RW_SEQ_IDENT`).
    pub rw_identical: bool,
    /// `bs_is_seq_rand`: the read sizes are those of sequential I/Os and the write sizes
    /// those of random ones, whatever their direction.
    pub bs_is_seq_rand: bool,
    /// `unified_rw_reporting`: the directions reported apart, as one, or both.
    pub unified: crate::stats::Unified,
    /// `stats=0`: the job is left out of the report (its I/O still runs).
    pub stats: bool,
    /// `allrandrepeat=1`: every random stream of the job seeded from its thread number.
    pub allrandrepeat: bool,
    /// `exec_prerun=` / `exec_postrun=`: shell commands run as the job starts and after
    /// it ends.
    pub exec_prerun: Option<String>,
    pub exec_postrun: Option<String>,
    /// `kb_base`, `unit_base` and `significant_figures`: how the text report writes its
    /// numbers.
    pub units: crate::report::Units,
    /// `number_ios=`: stop after this many I/Os (0: no limit).
    pub number_ios: u64,
    /// `io_size=`: bytes of I/O to do, across passes over `size` (`None`: `size`).
    pub io_size: Option<u64>,
    /// `size=N%`, `offset=N%`, `io_size=N%`: shares of the device (of `size` for
    /// `io_size`), resolved against its capacity; each replaces the byte value.
    pub size_pct: Option<f64>,
    pub offset_pct: Option<f64>,
    /// `offset_align`: what a percentage offset is aligned up to (0: the smallest block
    /// size).
    pub offset_align: u64,
    pub io_size_pct: Option<f64>,
    /// `loops=`: passes of the whole job (1).
    pub loops: u32,
    /// `startdelay=`: wait this long before starting; a range draws per clone (ns).
    pub startdelay_ns: (u64, u64),
    /// `thinktime=`: after every `thinktime_blocks` I/Os, wait for them and then this long.
    pub thinktime_ns: u64,
    /// `thinktime_spin=`: the part of `thinktime` spent spinning on the CPU.
    pub thinktime_spin_ns: u64,
    /// `thinktime_blocks=` (1), and whether it was given.
    pub thinktime_blocks: u64,
    pub thinktime_blocks_set: bool,
    /// `thinktime_blocks_type=issue`: count issued I/Os (fio's default counts completed).
    pub thinktime_blocks_issue: bool,
    /// `thinktime_iotime=`: think after this much I/O time (0: by blocks only).
    pub thinktime_iotime_ns: u64,
    /// `rate_ignore_thinktime`.
    pub rate_ignore_thinktime: bool,
    /// `write_iolog=`: log every I/O issued to this file, in fio's format.
    pub write_iolog: Option<String>,
    /// `write_lat_log`, `write_bw_log`, `write_iops_log` and `log_avg_msec`.
    pub logs: LogConfig,
    /// `disable_slat`, `disable_clat`, `disable_lat`, `disable_bw_measurement` (all four
    /// set by `gtod_reduce`): measurements the report leaves out.
    pub disable_slat: bool,
    pub disable_clat: bool,
    pub disable_lat: bool,
    pub disable_bw: bool,
    /// `cpus_allowed_policy=split` (each clone on its own CPU of `cpus_allowed`, the
    /// default here) or `shared` (every clone may run on any of them).
    pub cpus_allowed_shared: bool,
    /// `sqthread_poll`: the io_uring driver's rings poll their submission queues from a
    /// kernel thread (`IORING_SETUP_SQPOLL`).
    pub sqthread_poll: bool,
    /// `sqthread_poll_cpu`: the CPU of the SQPOLL threads.
    pub sqthread_poll_cpu: Option<u32>,
    /// `registerfiles`: the uring driver registers its files with its rings.
    pub registerfiles: bool,
    /// Bytes of I/O per job; `None` means the whole device from `offset`.
    pub size: Option<u64>,
    /// Start of the I/O region in bytes.
    pub offset: u64,
    /// I/Os kept in flight per job.
    pub iodepth: u32,
    /// I/Os submitted at once.
    pub iodepth_batch_submit: u32,
    /// Minimum completions reaped at once (0 = never wait).
    pub iodepth_batch_complete_min: u32,
    /// `bwavgtime` and `iopsavgtime`: the windows of the bandwidth and IOPS samples, ms.
    pub bw_avg_ms: u64,
    pub iops_avg_ms: u64,
    /// `iodepth_low`: a full queue is reaped down to this depth before it is filled again
    /// (0: fio's default, `iodepth`).
    pub iodepth_low: u32,
    /// Maximum completions reaped at once (defaults to `iodepth_batch_complete_min`).
    pub iodepth_batch_complete_max: u32,
    /// Number of clones of this job.
    pub numjobs: u32,
    /// Run-time cap in nanoseconds (0 = none).
    pub runtime_ns: u64,
    /// Keep looping over the region until `runtime` expires.
    pub time_based: bool,
    /// Warm-up time excluded from statistics, in nanoseconds.
    pub ramp_time_ns: u64,
    /// I/O scheduler name for the device queue.
    pub ioscheduler: Option<String>,
    /// I/O priority class (1 RT, 2 BE, 3 IDLE).
    pub prioclass: Option<u8>,
    /// I/O priority level within the class (0 highest .. 7).
    pub prio: Option<u8>,
    /// `cmdprio_percentage`, `cmdprio_class`, `cmdprio`, `cmdprio_bssplit`: another
    /// priority for a share of the job's I/Os ([`crate::cmdprio`]).
    pub cmdprio: crate::cmdprio::CmdPrioOptions,
    /// The cgroup the job's I/O is charged to (a path such as `db/journal`).
    pub cgroup: Option<String>,
    /// That cgroup's weight for BFQ (`io.bfq.weight`, 1..1000).
    pub cgroup_weight: Option<u32>,
    /// `rate_iops=`: I/Os per second per direction (0: unlimited).
    pub rate_iops: [u64; 3],
    /// `rate=`: bytes per second per direction (0: unlimited).
    pub rate: [u64; 3],
    /// `rate_min=` (`ratemin`): the bandwidth per direction below which the job ends with
    /// an error, bytes per second (0: none).
    pub rate_min: [u64; 3],
    /// `rate_iops_min=`: the same in I/Os per second, judged where `rate_min` is not set.
    pub rate_iops_min: [u64; 3],
    /// `rate_cycle=` (`ratecycle`): the window `rate_min` is judged over, in ms.
    pub rate_cycle_ms: u64,
    /// `rate_process=poisson`: a rate-limited job's I/Os arrive as a Poisson process
    /// (exponential gaps of the rate's mean) instead of evenly (`linear`).
    pub rate_poisson: bool,
    /// `io_submit_mode=offload`: a rate-limited job issues at the rate's times whatever
    /// is in flight; `inline` (fio's default) first waits for what is in flight whenever it
    /// is ahead of its rate (`io_u_quiesce` in `rate_ddir`).
    pub submit_offload: bool,
    /// `offset_increment=`: clone N's region starts `N * offset_increment` after `offset`.
    pub offset_increment: u64,
    /// Seed the random generators predictably.
    pub randrepeat: bool,
    /// Explicit random seed.
    pub randseed: Option<u64>,
    /// fio's `random_generator`: which generator draws offsets.
    pub random_generator: crate::pattern::frand::RandomGenerator,
    /// Do not track coverage of random offsets.
    pub norandommap: bool,
    /// Data verification method.
    pub verify: VerifyMode,
    /// `verify_pattern`: the bytes a verified block's data repeats (checked on read), and
    /// `buffer_pattern`: the bytes other written buffers repeat.
    pub verify_pattern: Option<Vec<u8>>,
    pub buffer_pattern: Option<Vec<u8>>,
    /// `zero_buffers`, `refill_buffers`, `scramble_buffers`, `buffer_compress_*`,
    /// `dedupe_*`: what written buffers carry.
    pub buffers: crate::buffers::BufferOptions,
    /// Run the verify phase after writing.
    pub do_verify: bool,
    /// `verify_backlog`: read back what was written every this many writes (0: at the
    /// end only), `verify_backlog_batch` blocks at a time (0: all of them).
    pub verify_backlog: u64,
    pub verify_backlog_batch: u64,
    /// `verify_interval`: a header every this many bytes of a block (0: one per block);
    /// `verify_fatal`: a block's check stops at its first bad header; `verify_dump`: a
    /// block whose data is bad is written out as read and as expected.
    pub verify_interval: u64,
    /// `verify_offset`: where in each piece its verify header goes (swapped with the data
    /// there; 0: in front).
    pub verify_offset: u64,
    pub verify_fatal: bool,
    /// `experimental_verify`: the verify pass replays the job's I/O and reads back each
    /// write as it was written (its size, in its order) instead of each block written.
    pub experimental_verify: bool,
    pub verify_dump: bool,
    /// `verify_only`: the job's writes are generated but not issued (fio's dry run), and
    /// the verify pass reads back what they would have written.
    pub verify_only: bool,
    /// `verify_state_save`: a writing job with verify leaves its verify state in the
    /// current directory as it ends; `verify_state_load`: the verify pass reads no further
    /// than such a state says the writes went ([`crate::verify_state`]).
    pub verify_state_save: bool,
    pub verify_state_load: bool,
    /// Issue a flush every this many writes (0 = never).
    pub fsync: u64,
    /// `fdatasync=N`: the same as fio's `fdatasync` (logged as `datasync`); where both fall
    /// on the same write, `fsync` goes.
    pub fdatasync: u64,
    /// Issue a flush at the end of the job.
    pub end_fsync: bool,
    /// `sync=`: writes open the file `O_SYNC`/`O_DSYNC` (`sync`/`1`, `dsync`), which the
    /// kernel's block-device writes carry as `REQ_FUA` (block/fops.c, `dio_bio_write_op`).
    pub sync_writes: bool,
    /// Report the jobs of a group as one.
    pub group_reporting: bool,
    /// Wait for earlier jobs to finish before starting (starts a new group).
    pub stonewall: bool,
    /// `wait_for=NAME`: start once every clone of the job named NAME (above this one) has
    /// finished.
    pub wait_for: Option<String>,
    /// fio's flow control: this job's weight (0: none) in the group `flow_id`, and how
    /// long it sleeps when held back (`flow_sleep`).
    pub flow: u32,
    pub flow_id: u32,
    pub flow_sleep_ns: u64,
    /// fio's latency-target search: the target total latency (0: off), the window each
    /// depth runs, the share of I/Os that must meet it (percent), and whether to keep
    /// adjusting (`latency_run`); `max_latency` ends the job at the first I/O over it.
    pub latency_target_ns: u64,
    pub latency_window_ns: u64,
    pub latency_percentile: f64,
    pub latency_run: bool,
    /// fio's steady-state detection: the criterion, the window (`ss_dur`, 0: off) and the
    /// time before samples count (`ss_ramp`).
    pub steadystate: crate::steadystate::Criterion,
    pub ss_dur_ns: u64,
    pub ss_ramp_ns: u64,
    pub max_latency_ns: u64,
    /// Start a new reporting group.
    pub new_group: bool,
    /// `exitall`: when a job ends, terminate others (which: `exit_what`). fio applies it
    /// to every job of the run once any job file section sets it.
    pub exitall: bool,
    /// `exit_what`.
    pub exit_what: ExitWhat,
    /// `exitall_on_error`: when this job ends in error, terminate others.
    pub exitall_on_error: bool,
    /// `continue_on_error` and `ignore_error`.
    pub errors: ErrorPolicy,
    /// `error_dump`: every error is printed, not only the fatal one (fio's default).
    pub error_dump: bool,
    /// `unlink`: the job's files are removed when the run ends, those the run made only.
    pub unlink: bool,
    /// `unlink_each_loop`: the job's files are emptied before each loop after the first
    /// (fio unlinks and creates them again), those the run made only.
    pub unlink_each_loop: bool,
    /// CPUs the job's threads may run on (empty = all).
    pub cpus_allowed: Vec<usize>,
    /// The file or block device the job runs on (through the uring driver).
    pub filename: Option<String>,
    /// `directory=`: where `filename` (or fio's `NAME.0.0` without one) lies.
    pub directory: Option<String>,
    /// `opendir=DIR`: every regular file below `DIR` (subdirectories included, in the
    /// order the directory lists them, as fio's `recurse_dir`) joins `filename`'s files.
    pub opendir: Option<String>,
    /// Where the job's `filename` or `directory` was written (the last of them), for a
    /// problem with its files found after parsing.
    pub files_at: Option<super::error::Location>,
    /// The job came from a job file (not the command line).
    pub from_job_file: bool,
    /// fio's file set: `nrfiles` files per clone, each `filesize` (a range is drawn per
    /// file), named by `filename_format`, served as `file_service_type` says, at most
    /// `openfiles` at a time (0: all).
    pub nrfiles: u32,
    pub filesize: Option<(u64, u64)>,
    pub filename_format: String,
    pub file_service: FileService,
    pub openfiles: u32,
    /// `fallocate=`: how a file only written is made before the run.
    pub fallocate: Fallocate,
    /// `create_on_open`: fio creates a file when it opens it; mqblk makes every file
    /// before the run starts (kept for the report).
    pub create_on_open: bool,
    /// `allow_file_create=0`: a file a job names must exist.
    pub allow_file_create: bool,
    /// `allow_mounted_write=1`: a writing job may use a block device that is mounted (or
    /// one of whose partitions is); by default such a run is refused.
    pub allow_mounted_write: bool,
    /// `overwrite=1`: a file a job only writes is laid out with data first (as one it reads
    /// is), so its writes overwrite blocks rather than fill them.
    pub overwrite: bool,
    /// `fill_device` (`fill_fs`): write until the file system is full; without `size=`, a
    /// file's size is the room left for it (the device's size for a block device), the
    /// file is made empty rather than laid out, and ENOSPC ends the job without an error.
    pub fill_device: bool,
    /// `file_append`: the I/O starts at a regular file's end as the run finds it (fio:
    /// "identical to setting offset to the size of a file").
    pub file_append: bool,
    /// `fsync_on_close`: a writing job syncs each file as it closes (mid-run, once its
    /// pass is done) and at each loop's end, as `end_fsync` does.
    pub fsync_on_close: bool,
    /// `serialize_overlap`: a read or write that overlaps one in flight waits for it.
    pub serialize_overlap: bool,
    /// `nowait` (io_uring, libaio, pvsync2): reads and writes carry `REQ_NOWAIT` and fail
    /// with EAGAIN where the block layer would make them wait.
    pub nowait: bool,
    /// `read_iolog=FILE` and fio's `replay_*` options; the log as read (with the job file,
    /// [`crate::iolog_replay`]), whose files become the job's.
    pub read_iolog: Option<String>,
    pub read_iolog_chunked: bool,
    pub replay_options: crate::iolog_replay::ReplayOptions,
    pub replay: Option<std::sync::Arc<crate::iolog_replay::ReplayLog>>,
    /// `create_only=1`: the job lays out its files and issues no I/O.
    pub create_only: bool,
    /// fio's `zonemode=strided`: `zonesize` bytes of I/O in a zone of `zonerange` bytes,
    /// then the next zone, `zoneskip` bytes further on (off: 0 sizes).
    pub zonemode_strided: bool,
    pub zonerange: u64,
    pub zonesize: u64,
    pub zoneskip: u64,
    /// fio's `zonemode=zbd` and its options (see [`crate::zbd`]): I/O to a zoned device, or
    /// to zones of `zonesize` emulated on a conventional one, writes at the zones' write
    /// pointers.
    pub zonemode_zbd: bool,
    /// `zonecapacity` (0: the zone size), `read_beyond_wp`, `max_open_zones` and
    /// `job_max_open_zones` (0: no limit), `ignore_zone_limits`, and
    /// `zone_reset_threshold` / `zone_reset_frequency` (fractions, 0 to 1).
    pub zonecapacity: u64,
    pub read_beyond_wp: bool,
    pub max_open_zones: u32,
    pub job_max_open_zones: u32,
    pub ignore_zone_limits: bool,
    pub zone_reset_threshold: f64,
    pub zone_reset_frequency: f64,
    /// Options given as a number of zones (`size=2z`): fio counts them in `zonesize`
    /// units, known only once every option is read.
    pub zone_counts: Vec<(&'static str, u64)>,
    /// `O_DIRECT`: the file is opened `O_DIRECT` and writes are `REQ_SYNC`.
    pub direct: bool,
    /// fio I/O engine name, lower case, one [`engine::classify`] accepts.
    ///
    /// [`engine::classify`]: super::engine::classify
    pub ioengine: Option<String>,
    /// fio's `thread` flag (accepted; mqblk always runs jobs as threads).
    pub thread: bool,
    /// Percentiles reported for latency histograms, sorted ascending.
    pub percentile_list: Vec<f64>,
    /// Report completion-latency percentiles.
    pub clat_percentiles: bool,
    /// Report total-latency percentiles.
    pub lat_percentiles: bool,
    /// Report submission-latency percentiles.
    pub slat_percentiles: bool,

    /// Block driver name; `None` lets `ioengine`/`filename` decide (see [`JobSpec::engine`]).
    pub driver: Option<String>,
    /// Device model spec (`device=`), for `driver=sim` and the simulator.
    pub device: Option<String>,
    /// Number of hardware queues.
    pub nr_hw_queues: u32,
    /// Tags per hardware queue.
    pub queue_depth: u32,
    /// Scheduler request limit per queue (0 = kernel default).
    pub nr_requests: u32,
    /// Software contexts (0 = one per job).
    pub nr_ctx: u32,
    /// One tag set shared by all hardware queues.
    pub shared_tags: bool,
    /// The driver may sleep in `queue_rq` (`BLK_MQ_F_BLOCKING`).
    pub blocking: bool,
    /// Completion mode of the emulated device.
    pub irqmode: IrqMode,
    /// Completion delay for `irqmode=timer`, in nanoseconds.
    pub completion_nsec: u64,
    /// Keep written data in memory so reads return it.
    pub memory_backed: bool,
    /// null_blk's zoned mode (`zoned`) and its parameters (`zone_size` and `zone_capacity`,
    /// given in MB, `zone_nr_conv`, `zone_max_open`, `zone_max_active`,
    /// `zone_append_max_sectors`).
    pub zoned: bool,
    pub zone: mqblk_core::zoned::ZonedDevConfig,
    /// `rotational=`: `None` takes what the driver finds (sysfs for a real device).
    pub rotational: Option<bool>,
    /// `virtqueue_size=`: `None` derives it from sysfs (uring driver); `Some(0)` no limit.
    pub virtqueue_size: Option<u32>,
    /// `cache_size=` (MiB, null_blk's parameter): the null device has a write cache if non-zero.
    pub cache_size_mb: u64,
    /// Device capacity in bytes; `None` means [`JobSpec::device_size`]'s default.
    pub dev_size: Option<u64>,
    /// Fail every Nth request (0 = off).
    pub fail_nth: u64,
    /// Time out every Nth request (0 = off).
    pub timeout_nth: u64,
    /// Requeue every Nth request (0 = off).
    pub requeue_nth: u64,
    /// Percent chance that a request fails.
    pub fail_prob: f64,
    /// Percent chance that a request times out.
    pub timeout_prob: f64,
    /// Percent chance that a request is requeued.
    pub requeue_prob: f64,
    /// Seed for the fault-injection random generator.
    pub fault_seed: Option<u64>,
    /// Largest request in KiB (0 = driver default).
    pub max_sectors_kb: u32,
    /// Most segments per request (0 = driver default).
    pub max_segments: u32,
    /// Merge policy: 0 all merges, 1 only simple one-hit merges, 2 none.
    pub nomerges: u8,
    /// For a scheduler that is not MQ-aware, run only the submitter's hardware queue.
    pub sq_sched_dispatch: bool,
    /// PREFLUSH and FUA writes go through the scheduler (Linux 6.5 on); 0: they bypass it.
    pub flush_via_sched: bool,
    /// A zoned device's writes are plugged per zone (Linux 6.10 on); 0: mq-deadline's zone
    /// write locking keeps them in order, as before.
    pub zone_write_plugging: bool,
    /// Reap completions from one worker thread per hardware queue.
    pub hctx_workers: bool,
    /// Use polled queues.
    pub hipri: bool,
    /// io_uring registered buffers (fio's `fixedbufs`).
    pub fixedbufs: bool,
    /// `iomem=` (`mem=`): what the job's I/O buffers are made of.
    pub iomem: IoMem,
    /// `hugepage-size=`: the huge page size of `iomem=shmhuge` and `mmaphuge`, bytes.
    pub hugepage_size: u64,
    /// Scheduler tunables from `sched.NAME=VALUE`, as `(NAME, VALUE)` without the
    /// `sched.` prefix, unvalidated (the scheduler checks them). A later setting of the
    /// same NAME replaces the earlier one.
    pub sched_tunables: Vec<(String, String)>,
    /// fio options given that change nothing in mqblk, with why (`fio_only`'s second
    /// list), once each: the run says so.
    pub no_effect: Vec<(String, String)>,

    /// Options set in this job's own section (or after its `--name=`), in order, as
    /// `(canonical name, raw value)`; fio's JSON "job options". Bare keys have value "".
    pub set_options: Vec<(String, String)>,
    /// Global options in effect for this job (its file's `[global]` sections above it,
    /// then command-line globals), in the order applied; fio's JSON "global options".
    pub global_options: Vec<(String, String)>,
}

/// fio's default block size.
pub const DEFAULT_BS: u64 = 4096;

/// Device capacity when neither `dev_size` nor `size` says otherwise: 1 GiB.
pub const DEFAULT_DEV_SIZE: u64 = 1 << 30;

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            name: String::new(),
            description: String::new(),
            rw: RwMode::Read,
            rwmixread: 50,
            bs: [DEFAULT_BS; 3],
            bsrange: None,
            bssplit: None,
            blockalign: None,
            rw_modifier: 0,
            rw_backward: false,
            random_distribution: Distribution::Uniform,
            percentage_random: [100; 3],
            rw_identical: false,
            bs_is_seq_rand: false,
            unified: crate::stats::Unified::None,
            stats: true,
            allrandrepeat: false,
            exec_prerun: None,
            exec_postrun: None,
            units: crate::report::Units::default(),
            number_ios: 0,
            io_size: None,
            size_pct: None,
            offset_pct: None,
            offset_align: 0,
            io_size_pct: None,
            loops: 1,
            startdelay_ns: (0, 0),
            thinktime_ns: 0,
            thinktime_spin_ns: 0,
            thinktime_blocks: 1,
            thinktime_blocks_set: false,
            thinktime_blocks_issue: false,
            thinktime_iotime_ns: 0,
            rate_ignore_thinktime: false,
            write_iolog: None,
            logs: LogConfig::default(),
            disable_slat: false,
            disable_clat: false,
            disable_lat: false,
            disable_bw: false,
            cpus_allowed_shared: false,
            sqthread_poll: false,
            sqthread_poll_cpu: None,
            registerfiles: false,
            size: None,
            offset: 0,
            iodepth: 1,
            iodepth_batch_submit: 1,
            iodepth_batch_complete_min: 1,
            iodepth_low: 0,
            bw_avg_ms: 500,
            iops_avg_ms: 500,
            iodepth_batch_complete_max: 1,
            numjobs: 1,
            runtime_ns: 0,
            time_based: false,
            ramp_time_ns: 0,
            ioscheduler: None,
            prioclass: None,
            cmdprio: Default::default(),
            prio: None,
            cgroup: None,
            cgroup_weight: None,
            rate_iops: [0; 3],
            rate: [0; 3],
            rate_min: [0; 3],
            rate_iops_min: [0; 3],
            rate_cycle_ms: 1000,
            rate_poisson: false,
            submit_offload: false,
            offset_increment: 0,
            randrepeat: true,
            randseed: None,
            random_generator: Default::default(),
            norandommap: false,
            verify: VerifyMode::None,
            verify_pattern: None,
            buffer_pattern: None,
            buffers: Default::default(),
            do_verify: true,
            verify_backlog: 0,
            verify_backlog_batch: 0,
            verify_interval: 0,
            verify_fatal: false,
            experimental_verify: false,
            verify_only: false,
            verify_state_save: true,
            verify_state_load: false,
            verify_offset: 0,
            verify_dump: false,
            fsync: 0,
            fdatasync: 0,
            end_fsync: false,
            sync_writes: false,
            group_reporting: false,
            stonewall: false,
            wait_for: None,
            flow: 0,
            flow_id: 0,
            flow_sleep_ns: 0,
            latency_target_ns: 0,
            latency_window_ns: 0,
            latency_percentile: 100.0,
            latency_run: false,
            steadystate: crate::steadystate::Criterion::default(),
            ss_dur_ns: 0,
            ss_ramp_ns: 0,
            max_latency_ns: 0,
            new_group: false,
            exitall: false,
            exit_what: ExitWhat::Group,
            exitall_on_error: false,
            errors: ErrorPolicy::default(),
            error_dump: true,
            unlink: false,
            unlink_each_loop: false,
            fill_device: false,
            file_append: false,
            fsync_on_close: false,
            serialize_overlap: false,
            nowait: false,
            read_iolog: None,
            read_iolog_chunked: false,
            replay_options: Default::default(),
            replay: None,
            cpus_allowed: Vec::new(),
            filename: None,
            files_at: None,
            opendir: None,
            from_job_file: false,
            directory: None,
            nrfiles: 1,
            filesize: None,
            filename_format: FILENAME_FORMAT.to_string(),
            file_service: FileService::default(),
            openfiles: 0,
            fallocate: Fallocate::Native,
            allow_file_create: true,
            allow_mounted_write: false,
            overwrite: false,
            create_only: false,
            create_on_open: false,
            zonemode_strided: false,
            zonerange: 0,
            zonesize: 0,
            zoneskip: 0,
            zonemode_zbd: false,
            zonecapacity: 0,
            read_beyond_wp: false,
            max_open_zones: 0,
            job_max_open_zones: 0,
            ignore_zone_limits: false,
            zone_reset_threshold: 0.0,
            zone_reset_frequency: 0.0,
            zone_counts: Vec::new(),
            direct: false,
            ioengine: None,
            thread: false,
            percentile_list: DEFAULT_PERCENTILES.to_vec(),
            clat_percentiles: true,
            lat_percentiles: false,
            slat_percentiles: false,
            driver: None,
            device: None,
            nr_hw_queues: 1,
            queue_depth: 64,
            nr_requests: 0,
            nr_ctx: 0,
            shared_tags: false,
            blocking: false,
            irqmode: IrqMode::None,
            completion_nsec: 10_000,
            memory_backed: false,
            zoned: false,
            zone: Default::default(),
            rotational: None,
            virtqueue_size: None,
            cache_size_mb: 0,
            dev_size: None,
            fail_nth: 0,
            timeout_nth: 0,
            requeue_nth: 0,
            fail_prob: 0.0,
            timeout_prob: 0.0,
            requeue_prob: 0.0,
            fault_seed: None,
            max_sectors_kb: 0,
            max_segments: 0,
            nomerges: 0,
            sq_sched_dispatch: true,
            flush_via_sched: true,
            zone_write_plugging: true,
            hctx_workers: false,
            hipri: false,
            fixedbufs: false,
            iomem: IoMem::Malloc,
            hugepage_size: DEFAULT_HUGEPAGE_SIZE,
            sched_tunables: Vec::new(),
            no_effect: Vec::new(),
            set_options: Vec::new(),
            global_options: Vec::new(),
        }
    }
}

impl JobSpec {
    /// How the job's buffers lie in physical memory, for segment counting: heap pages
    /// that seldom adjoin ([`mqblk_core::BvecLayout::PAGES`]), or runs of `hugepage-size`. A buffer
    /// that starts inside a run says so itself ([`mqblk_core::IoBuf::bvecs`]).
    pub fn buffer_bvecs(&self) -> mqblk_core::BvecLayout {
        if self.iomem.is_huge() {
            mqblk_core::BvecLayout {
                run: self.hugepage_size.min(1 << 30) as u32,
                skip: 0,
            }
        } else {
            mqblk_core::BvecLayout::PAGES
        }
    }
    /// The largest block size used for `dir` (`bs`, or the top of `bsrange`/`bssplit`).
    pub fn bs_for(&self, dir: Ddir) -> u64 {
        u64::from(self.sizes_for(dir).max())
    }

    /// How the job sizes its I/O in `dir`: `bssplit`, else `bsrange`, else `bs`.
    pub fn sizes_for(&self, dir: Ddir) -> BlockSizes {
        let i = dir.index();
        let small = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        if let Some(split) = &self.bssplit {
            return BlockSizes::Split(split[i].clone());
        }
        match self.bsrange {
            Some(r) if r[i].0 != r[i].1 => BlockSizes::Range {
                min: small(r[i].0),
                max: small(r[i].1),
            },
            Some(r) => BlockSizes::Fixed(small(r[i].0)),
            None => BlockSizes::Fixed(small(self.bs[i])),
        }
    }

    /// The largest block size of the directions this job actually issues.
    pub fn max_bs(&self) -> u64 {
        let read = if self.rw.does_read() {
            self.bs_for(Ddir::Read)
        } else {
            0
        };
        let write = if self.rw.does_write() {
            self.bs_for(Ddir::Write)
        } else {
            0
        };
        let trim = if self.rw.does_trim() {
            self.bs_for(Ddir::Trim)
        } else {
            0
        };
        read.max(write).max(trim)
    }

    /// `(class, level)` of `prioclass`/`prio` (best-effort and level 4 for the one not
    /// given), `None` when neither is set (the issuer's default priority).
    pub fn ioprio(&self) -> Option<(u8, u8)> {
        match (self.prioclass, self.prio) {
            (None, None) => None,
            (class, level) => Some((class.unwrap_or(2), level.unwrap_or(4))),
        }
    }

    /// The device capacity: `dev_size` if given, else `offset + size` if `size` is given
    /// (so a job never runs off the end of its own device), else 1 GiB.
    pub fn device_size(&self) -> u64 {
        match (self.dev_size, self.size) {
            (Some(dev), _) => dev,
            (None, Some(size)) => self.last_offset().saturating_add(size),
            (None, None) => DEFAULT_DEV_SIZE,
        }
    }

    /// Where the last clone's region starts (`offset_increment` moves each clone's).
    pub fn last_offset(&self) -> u64 {
        let clones = u64::from(self.numjobs.max(1) - 1);
        self.offset
            .saturating_add(self.offset_increment.saturating_mul(clones))
    }

    /// `zonemode=strided`'s zones as the generator takes them, when they are on (fio leaves
    /// a job without `zonerange` unzoned).
    pub fn zones(&self) -> Option<crate::pattern::Zones> {
        (self.zonemode_strided && self.zonerange > 0 && self.zonesize > 0).then_some(
            crate::pattern::Zones {
                range: self.zonerange,
                size: self.zonesize,
                skip: self.zoneskip,
            },
        )
    }

    /// The smallest block size of reads and writes (at least a sector): what fio aligns a
    /// percentage offset and a drawn file size to.
    pub fn min_bs(&self) -> u64 {
        [Ddir::Read, Ddir::Write]
            .iter()
            .map(|&d| u64::from(self.sizes_for(d).min()))
            .min()
            .unwrap_or(512)
            .max(512)
    }

    /// Whether the job names files (`filename`, `directory`, a file set, or a `filesize`
    /// for fio's default file): its I/O goes to them, laid out on the device by
    /// [`super::files::FileLayout`].
    pub fn has_files(&self) -> bool {
        self.filename.is_some()
            || self.directory.is_some()
            || self.nrfiles > 1
            || self.filesize.is_some()
            || self.default_files()
    }

    /// Whether the job fills its files (`fill_device` on a writing job): they are made
    /// empty rather than laid out and written until the file system is full (or `size`).
    pub fn fills(&self) -> bool {
        self.fill_device && self.rw.does_write()
    }

    /// Whether a file's size is the room its file system has for it (a filling job without
    /// `size` or `filesize`).
    pub fn fills_the_room(&self) -> bool {
        self.fills() && self.size.is_none() && self.filesize.is_none()
    }

    /// The files of every clone (what `unlink` removes, if the run made them).
    pub fn all_file_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if self.has_files() {
            for c in 0..self.numjobs.max(1) {
                for n in self.file_names(c) {
                    if !out.contains(&n) {
                        out.push(n);
                    }
                }
            }
        }
        out
    }

    /// fio's default for a job whose engine does file I/O and that names no file (nor a
    /// driver or a model to serve it): `filename_format`'s names, `NAME.CLONE.FILE`, in the
    /// current directory, made at the job's size as fio makes them.
    fn default_files(&self) -> bool {
        self.driver.is_none()
            && self.device.is_none()
            && self
                .ioengine
                .as_deref()
                .and_then(|n| classify(n).ok())
                .is_some_and(|k| k != EngineKind::Null)
    }

    /// A job file's job that names no engine, file, driver or device: mqblk runs it on its
    /// null device, where fio would run its default engine (`psync`) on `NAME.CLONE.0` in
    /// the current directory.
    pub fn null_by_default(&self) -> bool {
        self.from_job_file
            && self.ioengine.is_none()
            && self.driver.is_none()
            && self.device.is_none()
            && !self.has_files()
    }

    /// The files clone `clone` works on, in file-number order: `filename`'s ':'-separated
    /// names (`\:` keeps a colon), or `nrfiles` names made by `filename_format`; relative
    /// ones inside `directory`.
    pub fn file_names(&self, clone: u32) -> Vec<String> {
        let names = match &self.filename {
            Some(list) => split_filenames(list),
            None => (0..self.nrfiles.max(1))
                .map(|f| {
                    self.filename_format
                        .replace("$jobname", &self.name)
                        .replace("$jobnum", &clone.to_string())
                        .replace("$filenum", &f.to_string())
                })
                .collect(),
        };
        names
            .into_iter()
            .map(|n| match &self.directory {
                Some(dir) if !n.starts_with('/') => {
                    std::path::Path::new(dir).join(n).display().to_string()
                }
                _ => n,
            })
            .collect()
    }

    /// Bytes of I/O per pass: `size`, or the rest of the device after `offset`.
    pub fn io_size(&self) -> u64 {
        self.size
            .unwrap_or_else(|| self.device_size().saturating_sub(self.offset))
    }

    /// The engine the job runs as fio would name it: `ioengine` if given, fio's default
    /// (`psync`) for a job that names a file but no driver, else none (mqblk's own driver,
    /// `null` unless `driver=` says otherwise).
    pub fn engine(&self) -> Option<(&str, EngineKind)> {
        let name = match (&self.ioengine, &self.filename, &self.driver) {
            (Some(name), _, _) => name.as_str(),
            (None, _, None) if self.has_files() => FIO_DEFAULT,
            _ => return None,
        };
        // The option's setter only stores names `classify` accepts.
        classify(name).ok().map(|kind| (name, kind))
    }

    /// The I/Os the job keeps in flight: `iodepth`, or one for a synchronous engine.
    pub fn effective_iodepth(&self) -> u32 {
        match self.engine() {
            Some((_, EngineKind::Sync)) => 1,
            _ => self.iodepth.max(1),
        }
    }

    /// The value of a scheduler tunable set with `sched.NAME=VALUE`.
    pub fn sched_tunable(&self, name: &str) -> Option<&str> {
        self.sched_tunables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The cross-field checks behind [`validate`](super::validate); the message is the part
/// after the location.
pub(crate) fn check(job: &JobSpec) -> Result<(), String> {
    check_block_sizes(job)?;
    check_batches(job)?;
    let variable = [Ddir::Read, Ddir::Write]
        .iter()
        .any(|&d| !job.sizes_for(d).is_fixed());
    // The verify pass reads back blocks of the write size, unless it replays the writes
    // (`experimental_verify`, without `verify_backlog`'s block-sized reads).
    let replayed = job.experimental_verify && job.verify_backlog == 0;
    if variable && job.verify != VerifyMode::None && !replayed {
        return Err(
            "verify with bsrange or bssplit is not implemented (give one bs, or experimental_verify=1)"
                .into(),
        );
    }
    if job.verify_only && job.time_based && job.rw.does_write() {
        return Err(
            "verify_only with time_based: the writes are generated without end (fio does not support it either)"
                .into(),
        );
    }
    if job.thinktime_spin_ns > job.thinktime_ns {
        return Err(format!(
            "thinktime_spin={}us is longer than thinktime={}us",
            job.thinktime_spin_ns / 1000,
            job.thinktime_ns / 1000
        ));
    }
    if job.rwmixread > 100 {
        return Err(format!("rwmixread={} is above 100", job.rwmixread));
    }
    // fio's `fixup_options`: a floor in bytes beside a cap in I/Os (or the reverse) and a
    // floor above its cap are refused.
    for (d, dir) in ["read", "write", "trim"].iter().enumerate() {
        if (job.rate_min[d] > 0 && job.rate_iops[d] > 0)
            || (job.rate[d] > 0 && job.rate_iops_min[d] > 0)
        {
            return Err(format!(
                "rate and rate_iops are mutually exclusive ({dir}: a floor in one beside a cap in the other)"
            ));
        }
        if (job.rate[d] > 0 && job.rate[d] < job.rate_min[d])
            || (job.rate_iops[d] > 0 && job.rate_iops[d] < job.rate_iops_min[d])
        {
            return Err(format!("the minimum rate exceeds the rate ({dir})"));
        }
    }
    if job.verify != VerifyMode::None {
        // The blocks verified: those written (and read back), or those read.
        let dir = if job.rw.does_write() {
            Ddir::Write
        } else {
            Ddir::Read
        };
        let bs = u64::from(job.sizes_for(dir).min());
        let i = job.verify_interval;
        if i > 0 && (i < crate::verify::MIN_BLOCK as u64 || bs % i != 0) {
            return Err(format!(
                "verify_interval={i} must divide the block size ({bs}) and be at least {} bytes (a header and some data)",
                crate::verify::MIN_BLOCK
            ));
        }
        // fio's `verify_offset + sizeof(struct verify_header) > min_bs` check, with
        // mqblk's header, which must also not overlap the bytes it swaps with.
        let piece = if i > 0 { i.min(bs) } else { bs };
        let (at, hdr) = (job.verify_offset, crate::verify::HEADER_LEN as u64);
        if at > 0 && (at < hdr || at + hdr > piece) {
            return Err(format!(
                "verify_offset={at} must be at least the verify header's {hdr} bytes and leave room for it in a {piece}-byte piece"
            ));
        }
    }
    if job.verify == VerifyMode::Pattern && job.verify_pattern.is_none() {
        return Err("verify=pattern needs verify_pattern= (the bytes to write and check)".into());
    }
    let b = &job.buffers;
    if b.dedupe_percentage > 0 && b.dedupe_mode == crate::buffers::DedupeMode::WorkingSet {
        // fio's `fixup_options`.
        if job.size.is_none() {
            return Err(
                "dedupe_mode=working_set needs size= (its working set is a share of it)".into(),
            );
        }
        if job.nrfiles > 1 {
            return Err(format!(
                "dedupe_mode=working_set takes one file per job, not nrfiles={}",
                job.nrfiles
            ));
        }
        if b.dedupe_working_set_percentage + b.dedupe_percentage > 100 {
            return Err(format!(
                "dedupe_percentage={} cannot be reached with dedupe_working_set_percentage={} of the size kept for unique pages (their sum must be at most 100)",
                b.dedupe_percentage, b.dedupe_working_set_percentage
            ));
        }
    }
    if !job.zonemode_strided
        && !job.zonemode_zbd
        && (job.zonesize > 0 || job.zonerange > 0 || job.zoneskip > 0)
    {
        return Err(
            "zonesize, zonerange and zoneskip need zonemode=strided or zbd (fio refuses them with zonemode=none)"
                .into(),
        );
    }
    if job.zonemode_zbd {
        crate::zbd::check_spec(job)?;
    }
    Ok(())
}

/// Block sizes must be whole sectors, and a sized job must fit at least one block.
fn check_block_sizes(job: &JobSpec) -> Result<(), String> {
    for dir in Ddir::ALL {
        let bs = job.bs[dir.index()];
        if bs == 0 || bs % 512 != 0 {
            return Err(format!(
                "{} block size {bs} is not a nonzero multiple of 512",
                dir.name()
            ));
        }
    }
    if let Some(size) = job.size {
        if size < job.max_bs() {
            return Err(format!(
                "size={size} is smaller than the block size {}",
                job.max_bs()
            ));
        }
    }
    Ok(())
}

/// Batch limits only make sense within the queue depth.
fn check_batches(job: &JobSpec) -> Result<(), String> {
    if job.iodepth_batch_submit > job.iodepth {
        return Err(format!(
            "iodepth_batch_submit={} is larger than iodepth={}",
            job.iodepth_batch_submit, job.iodepth
        ));
    }
    if job.iodepth_batch_complete_min > job.iodepth_batch_complete_max {
        return Err(format!(
            "iodepth_batch_complete_min={} is larger than iodepth_batch_complete_max={}",
            job.iodepth_batch_complete_min, job.iodepth_batch_complete_max
        ));
    }
    if job.iodepth_batch_complete_max > job.iodepth {
        return Err(format!(
            "iodepth_batch_complete_max={} is larger than iodepth={}",
            job.iodepth_batch_complete_max, job.iodepth
        ));
    }
    Ok(())
}

/// fio's `filename=a:b:c`: several files; `\:` is a colon inside a name.
fn split_filenames(list: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                chars.next();
                out.last_mut().expect("never empty").push(':');
            }
            ':' => out.push(String::new()),
            c => out.last_mut().expect("never empty").push(c),
        }
    }
    out.retain(|n| !n.is_empty());
    out
}
