//! The files a run's jobs name, laid out on mqblk's one device.
//!
//! fio opens each job's files (`filename`, `filename=a:b`, or `nrfiles` files named by
//! `filename_format` in `directory`) through a file system; the kernel's block layer below
//! sees one disk whose blocks belong to those files. mqblk has the block layer and no file
//! system, so it gives each distinct file a place on the device's address space, one after
//! another in the order the jobs name them: the uring driver carries a request at a device
//! offset to the file that holds it, and the simulator's device models see the same
//! addresses. Files are [`FILE_GAP`]-aligned with a [`FILE_GAP`] between them, so requests
//! of two files never merge into one (on a real disk two files' extents are not adjacent
//! either, as a rule). A run on one file has it at offset 0, the whole device.

use super::error::{JobError, JobErrorKind, Location};
use super::spec::{Fallocate, JobSpec};
use crate::pattern::frand::{slot, FRand, Seeds};

/// Alignment of, and distance between, the files on the device.
pub const FILE_GAP: u64 = 1 << 20;

/// One file of the run, where it lies on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutFile {
    pub path: String,
    /// Byte address of its offset 0 on the device.
    pub base: u64,
    /// Bytes of it the run uses.
    pub len: u64,
    /// The jobs gave its size: the run creates or extends it to `len` (fio's layout);
    /// otherwise it is used as it is.
    pub sized: bool,
    /// A job reads it: a file the run makes is written out first, as fio lays out a file
    /// that will be read; one only written is made as `fallocate` says.
    pub read: bool,
    pub fallocate: Fallocate,
    /// A job that writes it asked for `overwrite`: made like one that is read.
    pub overwrite: bool,
    /// A job fills it (`fill_device` without a size): made empty, its writes extend it
    /// until the file system is full, and `len` is the room it may take.
    pub grows: bool,
    /// Its length as the run found it, where a `file_append` job names it: that job's I/O
    /// starts there.
    pub appended_at: Option<u64>,
}

/// Every file of a run and which clone of which job uses which; see the module
/// documentation. The default is a run without files (jobs address the device itself).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileLayout {
    pub files: Vec<LayoutFile>,
    /// Per job section, per clone: its files' indices, in file-number order (empty for a
    /// job without files).
    uses: Vec<Vec<Vec<usize>>>,
}

impl FileLayout {
    /// Lays out the files of `specs`. `stat(spec, path)` gives the size of a file whose
    /// size the job does not give (`Ok(None)`: it does not exist, or the runner has no real
    /// files and the device's capacity stands for it), and for a `file_append` job the
    /// length of a regular file as it is now (0 where it is missing; `Ok(None)` for
    /// anything else, or where the runner has no real files: the I/O starts at `offset`);
    /// its error is reported as `filename=PATH: error`.
    pub fn plan(
        specs: &[JobSpec],
        mut stat: impl FnMut(&JobSpec, &str) -> std::io::Result<Option<u64>>,
    ) -> Result<FileLayout, JobError> {
        let mut layout = FileLayout::default();
        // fio's thread numbers: every job and clone of the file counts, files or not.
        let mut first_thread = 1u32;
        for (i, s) in specs.iter().enumerate() {
            let first = first_thread;
            first_thread += s.numjobs.max(1);
            let bad = |m: String| {
                JobError::new(
                    Location::Job {
                        name: s.name.clone(),
                    },
                    JobErrorKind::Invalid(m),
                )
            };
            let mut clones = Vec::new();
            if !s.has_files() {
                layout.uses.push(clones);
                continue;
            }
            let extents = s.replay.as_ref().map(|r| r.extents());
            for clone in 0..s.numjobs.max(1) {
                let names = s.file_names(clone);
                if names.is_empty() {
                    return Err(bad("filename= names no file".into()));
                }
                let n = names.len() as u64;
                let start = s
                    .offset
                    .saturating_add(s.offset_increment.saturating_mul(u64::from(clone)));
                let mut used = Vec::with_capacity(names.len());
                // fio's `file_size_state`: the clone's own stream, one draw per file.
                let (rand_seed, repeatable) = super::resolve::rand_seed_of(s, i, 0);
                let thread = super::resolve::thread_number_of(first, s.numjobs, clone);
                let mut sizes = Seeds::fio(rand_seed, thread, repeatable, s.random_generator)
                    .all_repeatable(s.allrandrepeat)
                    .state(slot::FILE_SIZE);
                for (k, path) in names.into_iter().enumerate() {
                    // fio's `file_append` (`get_start_offset`): a regular file's I/O starts
                    // at its end as the run finds it.
                    let appended = if s.file_append {
                        stat(s, &path).map_err(|e| at_files(s, format!("filename={path}: {e}")))?
                    } else {
                        None
                    };
                    // A replayed log's file (the job's files are its, in its order) is as
                    // large as its I/O reaches.
                    let replayed = extents
                        .as_ref()
                        .map(|e| e.get(k).copied().unwrap_or(0).max(512));
                    let given = match (s.filesize, s.size) {
                        _ if replayed.is_some() => replayed,
                        (Some((lo, hi)), _) => Some(draw_filesize(s, &mut sizes, lo, hi)),
                        (None, Some(size)) => {
                            Some(appended.unwrap_or(start).saturating_add(size / n))
                        }
                        (None, None) => None,
                    };
                    // A file a job above fills is sized as that job sizes it, and this
                    // job's region ends where the file does when it starts (fio sizes a
                    // job's files as it starts).
                    let grown = layout.files.iter().find(|f| f.path == path && f.grows);
                    let len = match (given, grown) {
                        (Some(len), _) => len,
                        (None, Some(f)) => f.len,
                        (None, None) => stat(s, &path)
                            .map_err(|e| at_files(s, format!("filename={path}: {e}")))?
                            .ok_or_else(|| {
                                at_files(
                                    s,
                                    format!("file {path}: does not exist; give size= or filesize= to create it"),
                                )
                            })?,
                    };
                    let i = layout.add(&path, len, given.is_some() || s.fills(), s);
                    if appended.is_some() {
                        layout.files[i].appended_at = appended;
                    }
                    used.push(i);
                }
                clones.push(used);
            }
            layout.uses.push(clones);
        }
        layout.place();
        Ok(layout)
    }

    /// Adds a use of `path` (a file already named is the same file, as large as its
    /// largest use needs) and returns its index.
    fn add(&mut self, path: &str, len: u64, sized: bool, s: &JobSpec) -> usize {
        if let Some(i) = self.files.iter().position(|f| f.path == path) {
            let f = &mut self.files[i];
            f.len = f.len.max(len);
            f.sized |= sized;
            f.read |= s.rw.does_read();
            f.overwrite |= s.overwrite;
            f.grows |= s.fills();
            return i;
        }
        self.files.push(LayoutFile {
            path: path.to_string(),
            base: 0,
            len,
            sized,
            read: s.rw.does_read(),
            fallocate: s.fallocate,
            overwrite: s.overwrite,
            grows: s.fills(),
            appended_at: None,
        });
        self.files.len() - 1
    }

    /// Gives every file its base address.
    fn place(&mut self) {
        let mut next = 0u64;
        for f in &mut self.files {
            f.base = next;
            next = f
                .base
                .saturating_add(f.len)
                .div_ceil(FILE_GAP)
                .saturating_mul(FILE_GAP)
                .saturating_add(FILE_GAP);
        }
    }

    /// The device bytes the files span (0 without files).
    pub fn end(&self) -> u64 {
        self.files.last().map_or(0, |f| f.base + f.len)
    }

    /// The files of clone `clone` of job section `spec` (empty for a job without files).
    pub fn files_of(&self, spec: usize, clone: u32) -> &[usize] {
        self.uses
            .get(spec)
            .and_then(|c| c.get(clone as usize))
            .map_or(&[], Vec::as_slice)
    }
}

/// A problem with job `s`'s files: at the line that named them (`job 'NAME': ...`), or at
/// the job where none did (fio's default files).
pub fn at_files(s: &JobSpec, m: String) -> JobError {
    match &s.files_at {
        Some(loc) => JobError::new(
            loc.clone(),
            JobErrorKind::Invalid(format!("job '{}': {m}", s.name)),
        ),
        None => JobError::new(
            Location::Job {
                name: s.name.clone(),
            },
            JobErrorKind::Invalid(m),
        ),
    }
}

/// A size from `filesize=lo-hi`, as fio's `get_rand_file_size` draws it from the clone's
/// file-size stream: a fraction of the range above `lo`, rounded down to the job's smallest
/// block size.
fn draw_filesize(s: &JobSpec, sizes: &mut FRand, lo: u64, hi: u64) -> u64 {
    if lo == hi {
        return lo;
    }
    let drawn = lo + sizes.scaled(hi - lo);
    drawn - drawn % s.min_bs().max(1)
}
