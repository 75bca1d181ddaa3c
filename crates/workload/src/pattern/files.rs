//! A job's files: one [`Generator`] per file and fio's choice of the file each I/O goes to
//! (`file_service_type`, `openfiles`).
//!
//! What fio 3.33 does, read off its `write_iolog` on this machine (`--nrfiles=3
//! --filesize=64k --bs=4k --ioengine=null`): `roundrobin` (the default) sends one I/O to
//! each open file in turn (`:N`, N to each); `sequential` finishes a file before the next;
//! `random` draws an open file for every I/O (every N). A file whose pass is done is closed
//! and the next unopened file is opened, so with `openfiles=1` round robin goes through the
//! files one after another, and with `openfiles=2` of 4 it alternates between the first two,
//! then between the last two. Once every file is done a pass over the set is done; a
//! `time_based` job (or a further `loops` pass) opens them all again. The skewed kinds
//! (`zipf`, `pareto`, `normal`/`gauss`) draw among all the files by that law, and a file
//! whose pass is done starts over (fio's `fio_file_reset`) until the set's bytes are done.

use super::dist::Sampler;
use super::frand::slot;
use super::{Generator, Io, Shape, Streams};
use crate::job::{FileService, FileServiceKind};

/// fio's `FIO_FSERVICE_SHIFT`: a skewed file choice draws among 1024 ranges a file.
const FSERVICE_SHIFT: u32 = 10;

/// The generators of a job's files and the choice between them; see the module
/// documentation.
#[derive(Clone, Debug)]
pub struct FileSet {
    files: Vec<Generator>,
    /// The first block number (over the whole set) of each file, and the total.
    first_block: Vec<u64>,
    nr_blocks: u64,
    service: FileService,
    open_max: usize,
    /// Open files, in the order they were opened.
    open: Vec<usize>,
    /// The next file (by number) to open.
    next_closed: usize,
    /// Files closed mid-pass since [`FileSet::take_closed`] last looked.
    closed: Vec<usize>,
    /// Position in `open` of the file being served, and I/Os left for it.
    cur: usize,
    left: u64,
    /// The job's random streams (every file draws from them, as fio's do).
    streams: Streams,
    verify: bool,
    trimwrite: bool,
    /// A skewed choice (`file_service_type=zipf:1.2`): the sampler over the files, and the
    /// bytes issued against one pass over all of them.
    skew: Option<Sampler>,
    issued: u64,
    total: u64,
}

impl FileSet {
    /// One generator per shape (a file's region on the device), at most `openfiles` (0:
    /// all) open at once.
    ///
    /// `verify` and `trimwrite` seed the size generators as fio does for such jobs (writes
    /// like reads, trims like writes).
    pub fn new(shapes: &[Shape], service: FileService, openfiles: u32, verify: bool) -> FileSet {
        assert!(!shapes.is_empty(), "a job has at least one file");
        let files: Vec<Generator> = shapes.iter().map(Generator::new).collect();
        let mut first_block = Vec::with_capacity(files.len());
        let mut nr_blocks = 0;
        for g in &files {
            first_block.push(nr_blocks);
            nr_blocks += g.nr_blocks();
        }
        let seeds = &shapes[0].seeds;
        let trimwrite = matches!(
            shapes[0].rw,
            super::Pattern::TrimWrite | super::Pattern::RandTrimWrite
        );
        let streams = Streams::new(seeds, verify, trimwrite);
        // A skewed choice draws among all the files (fio keeps them open and resets a
        // finished one): fio's `init_rand_file_service`, 1024 ranges a file, unhashed.
        let skew = if service.kind == FileServiceKind::Skewed {
            let nranges = (files.len() as u64) << FSERVICE_SHIFT;
            Sampler::new(&service.dist, nranges, seeds.slots[slot::FILE] as u32)
                .map(Sampler::without_hash)
        } else {
            None
        };
        let open_max = match openfiles as usize {
            _ if skew.is_some() => files.len(),
            0 => files.len(),
            n => n.min(files.len()),
        };
        let total = shapes.iter().map(|s| s.size).sum();
        let mut set = FileSet {
            files,
            first_block,
            nr_blocks,
            service,
            open_max,
            open: Vec::new(),
            next_closed: 0,
            closed: Vec::new(),
            cur: 0,
            left: 0,
            streams,
            verify,
            trimwrite,
            skew,
            issued: 0,
            total,
        };
        set.open_files();
        set
    }

    fn open_files(&mut self) {
        while self.open.len() < self.open_max && self.next_closed < self.files.len() {
            self.open.push(self.next_closed);
            self.next_closed += 1;
        }
    }

    /// Blocks in one pass over every file.
    pub fn nr_blocks(&self) -> u64 {
        self.nr_blocks
    }

    /// Whether every file keeps fio's random map (its random offsets each once a pass).
    pub fn keeps_random_map(&self) -> bool {
        self.files.iter().all(Generator::keeps_random_map)
    }

    /// How many files the set has.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Always false: a job has at least one file.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// True once every file's pass is done.
    pub fn pass_done(&self) -> bool {
        match self.files.as_slice() {
            // One file: exactly the generator's own end (the common case stays as it was).
            [only] => only.pass_done(),
            _ if self.skew.is_some() => self.issued >= self.total,
            _ => {
                self.next_closed >= self.files.len()
                    && self.open.iter().all(|&f| self.files[f].pass_done())
            }
        }
    }

    /// Whether the set's pass ended because its files ran out ([`Generator::ran_out`]).
    pub fn ran_out(&self) -> bool {
        self.files.iter().all(Generator::ran_out)
    }

    /// Starts another pass: every file rewound and the first `openfiles` open again. A
    /// `new_loop` (a further `loops` or `io_size` pass, not a time-based wrap) also starts
    /// the random streams over, as fio's `clear_io_state` does with `randrepeat`, when the
    /// files ran out; a random set without a map that only issued its bytes draws on.
    pub fn rewind(&mut self, new_loop: bool) {
        if new_loop && !self.ran_out() {
            for g in &mut self.files {
                g.continue_pass();
            }
            self.issued = 0;
            return;
        }
        if new_loop {
            self.streams.new_loop(self.verify, self.trimwrite);
        }
        for g in &mut self.files {
            g.rewind();
        }
        self.open.clear();
        self.next_closed = 0;
        self.cur = 0;
        self.left = 0;
        self.issued = 0;
        self.open_files();
    }

    /// Closes open file `f` (its pass is done) and opens the next unopened one in its place
    /// (at the end of the open list, as fio appends a newly opened file).
    fn close(&mut self, f: usize) {
        let Some(i) = self.open.iter().position(|&o| o == f) else {
            return;
        };
        self.open.remove(i);
        self.closed.push(f);
        match i.cmp(&self.cur) {
            std::cmp::Ordering::Less => self.cur -= 1,
            // The file being served is gone: its successor, now in its place, is next.
            std::cmp::Ordering::Equal => self.left = 0,
            std::cmp::Ordering::Greater => {}
        }
        self.open_files();
        if self.cur >= self.open.len() {
            self.cur = 0;
        }
    }

    /// What fio's `rate_ddir` sees when the next I/O of a mixed job picks its direction.
    pub fn set_rate(&mut self, rate: Option<super::RateView>) {
        self.streams.set_rate(rate);
    }

    /// The files closed (their pass done) since the last call, in the order closed: fio's
    /// `fsync_on_close` syncs each as it closes.
    pub fn take_closed(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.closed)
    }

    /// The file the next I/O goes to, as `file_service_type` picks it. fio picks a file
    /// for every I/O unit, a flush too (`fsync=N`'s flush takes the turn of the file it
    /// lands on: `--nrfiles=2 --fsync=3` logs write 0.0, write 0.1, write 0.0, sync 0.1,
    /// write 0.0, ...), so a flush asks here as well. A file is found done only when an
    /// I/O is asked of it ([`FileSet::next_io`]), as fio finds it when it has no next
    /// offset: a flush may still land on a file whose last block was just written.
    pub fn pick(&mut self) -> usize {
        if self.files.len() == 1 {
            return 0;
        }
        if self.left == 0 {
            match self.service.kind {
                // The next open file after the one served last (a closed one's successor
                // has moved into its place).
                FileServiceKind::RoundRobin => {}
                FileServiceKind::Sequential => self.cur = 0,
                // fio's `__get_next_fileno_rand`: a file drawn among all of them, again
                // while the one drawn is closed.
                FileServiceKind::Random => {
                    let n = self.files.len() as u64;
                    self.cur = loop {
                        let f = self.streams.next_file.scaled(n) as usize;
                        if let Some(i) = self.open.iter().position(|&o| o == f) {
                            break i;
                        }
                        if self.open.len() == 1 {
                            break 0;
                        }
                    };
                }
                // Every file stays open, in file order.
                FileServiceKind::Skewed => {
                    let s = self.skew.as_mut().expect("a skewed set has its sampler");
                    self.cur = ((s.next() >> FSERVICE_SHIFT) as usize).min(self.open.len() - 1);
                }
            }
            self.left = self.service.nr;
        }
        let f = self.open[self.cur];
        self.left -= 1;
        if self.left == 0 && self.service.kind == FileServiceKind::RoundRobin {
            self.cur = (self.cur + 1) % self.open.len();
        }
        f
    }

    /// The next I/O and the number of the file it goes to: a picked file whose pass is
    /// done is closed and another picked, unless it is the last one left. `None` once the
    /// last file's pass ended early (fio found no next I/O in it).
    #[inline]
    pub fn next_io(&mut self) -> Option<(usize, Io)> {
        loop {
            let f = self.pick();
            if self.skew.is_some() {
                // fio's `fio_file_reset`: a finished file starts over.
                if self.files[f].pass_done() {
                    self.files[f].draw_on_done(&mut self.streams);
                    self.files[f].rewind();
                }
                let io = match self.files[f].next_io(&mut self.streams) {
                    Some(io) => io,
                    None => {
                        self.files[f].rewind();
                        self.files[f].next_io(&mut self.streams)?
                    }
                };
                self.issued += u64::from(io.len);
                return Some((f, io));
            }
            let last = self.open.len() == 1 && self.next_closed >= self.files.len();
            if self.files[f].pass_done() && !last {
                self.files[f].draw_on_done(&mut self.streams);
                self.close(f);
                continue;
            }
            match self.files[f].next_io(&mut self.streams) {
                Some(io) => return Some((f, io)),
                None if last => return None,
                None => {
                    self.close(f);
                    continue;
                }
            }
        }
    }

    /// `zonemode=zbd` found no I/O to make in file `file`: its pass ends.
    pub fn end_pass(&mut self, file: usize) {
        if let Some(g) = self.files.get_mut(file) {
            g.end_pass();
        }
    }

    /// `zonemode=zbd` moved or cut the I/O just drawn from file `file` (see
    /// [`Generator::zbd_issued`]).
    pub fn zbd_issued(
        &mut self,
        file: usize,
        dir: crate::Ddir,
        offset: u64,
        drawn: u64,
        len: u64,
    ) -> u64 {
        match self.files.get_mut(file) {
            Some(g) => g.zbd_issued(dir, offset, drawn, len),
            None => len,
        }
    }

    /// The number (over the whole set) of the block at `offset` of file `file`.
    pub fn block_index(&self, file: usize, offset: u64) -> u64 {
        self.first_block[file] + self.files[file].block_of(offset)
    }

    /// The file and device offset of block `i` of the first pass, in the order the
    /// verify pass reads them back.
    pub fn block_offset(&self, i: u64) -> (usize, u64) {
        let f = self.first_block.partition_point(|&b| b <= i) - 1;
        (f, self.files[f].block_offset(i - self.first_block[f]))
    }
}
