//! What a job's writes carry, as fio 3.33 fills its buffers (`fill_io_buffer`,
//! `small_content_scramble` in io_u.c, `fill_random_buf*` in lib/rand.c): random data from
//! the job's own stream, zeroes, a pattern, data that compresses by a given share, and
//! buffers that repeat earlier ones (deduplication). A device that compresses or
//! deduplicates, or a backend that skips zeroes, sees what fio's writes would give it:
//! with `refill_buffers` and no scrambling, byte for byte the same data.
//!
//! fio fills each of its `iodepth` buffers once when a writing job starts, then per write
//! either fills the buffer again (`refill_buffers`, on by default with compression or
//! verification) or scrambles a few bytes of each 512-byte block with the write's offset
//! and time (`scramble_buffers`, on by default), so that no two writes carry the same
//! blocks. Random data is seeded per buffer (or per `buffer_compress_chunk` with
//! compression or deduplication) from the job's buffer stream (`slot::BUF`).

use crate::pattern::frand::{hash_u64, slot, FRand, Seeds};

/// `dedupe_mode`: where a buffer that repeats another takes its data.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum DedupeMode {
    /// The buffer stream as it stood after the last buffer of new data.
    #[default]
    Repeat,
    /// One of a working set of streams (`dedupe_working_set_percentage` of the job's size
    /// in `min_bs`-sized pages), drawn at random.
    WorkingSet,
}

/// The buffer options of a job as written (the job model's; fio's fix-ups are applied
/// when the job is resolved, [`BufferOptions::resolved`]).
#[derive(Clone, Debug, PartialEq)]
pub struct BufferOptions {
    /// `zero_buffers`, if given.
    pub zero_buffers: Option<bool>,
    /// `refill_buffers`, if given.
    pub refill_buffers: Option<bool>,
    /// `scramble_buffers` (fio's default: on).
    pub scramble_buffers: bool,
    /// `buffer_compress_percentage`: the share of each chunk that is zeroes (or the
    /// buffer pattern).
    pub compress_percentage: u32,
    /// `buffer_compress_chunk` in bytes.
    pub compress_chunk: u32,
    /// `dedupe_percentage`: the share of buffers that repeat another's data.
    pub dedupe_percentage: u32,
    pub dedupe_mode: DedupeMode,
    /// `dedupe_working_set_percentage`.
    pub dedupe_working_set_percentage: u32,
    /// `dedupe_global`: the working set is the run's, shared by the jobs that ask for it.
    pub dedupe_global: bool,
}

impl Default for BufferOptions {
    fn default() -> BufferOptions {
        BufferOptions {
            zero_buffers: None,
            refill_buffers: None,
            scramble_buffers: true,
            compress_percentage: 0,
            compress_chunk: 512,
            dedupe_percentage: 0,
            dedupe_mode: DedupeMode::Repeat,
            dedupe_working_set_percentage: 5,
            dedupe_global: false,
        }
    }
}

/// A job's buffer options after fio's fix-ups (`fixup_options`, `td_set_flags`).
#[derive(Clone, Debug, PartialEq)]
pub struct BufferPlan {
    pub zero: bool,
    pub refill: bool,
    pub scramble: bool,
    pub compress_percentage: u32,
    pub compress_chunk: u32,
    pub dedupe_percentage: u32,
    pub dedupe_mode: DedupeMode,
    /// Pages of the working set (0 without `dedupe_mode=working_set`).
    pub unique_pages: u64,
    pub dedupe_global: bool,
}

impl BufferOptions {
    /// fio's fix-ups for a job that verifies (`verify`), is `size` bytes large and writes
    /// at least `min_write` bytes at a time: full compression is zeroes; compression and
    /// verification refill every write unless `refill_buffers` was given; scrambling is
    /// off where `zero_buffers` was asked for.
    pub fn resolved(&self, verify: bool, size: u64, min_write: u32) -> BufferPlan {
        let mut zero = self.zero_buffers.unwrap_or(false);
        let mut compress = self.compress_percentage;
        let mut refill = self.refill_buffers.unwrap_or(false);
        if verify && self.refill_buffers.is_none() {
            refill = true;
        }
        if compress == 100 {
            zero = true;
            compress = 0;
        } else if compress > 0 && self.refill_buffers.is_none() {
            refill = true;
        }
        let working_set = self.dedupe_percentage > 0 && self.dedupe_mode == DedupeMode::WorkingSet;
        BufferPlan {
            zero,
            refill,
            scramble: self.scramble_buffers && self.zero_buffers != Some(true),
            compress_percentage: compress,
            compress_chunk: self.compress_chunk,
            dedupe_percentage: self.dedupe_percentage,
            dedupe_mode: self.dedupe_mode,
            unique_pages: if working_set {
                size * u64::from(self.dedupe_working_set_percentage)
                    / 100
                    / u64::from(min_write.max(1))
            } else {
                0
            },
            dedupe_global: self.dedupe_global,
        }
    }
}

/// fio's `__get_next_seed`: two draws multiplied (on a 64-bit host).
fn next_seed(fs: &mut FRand) -> u64 {
    let r = fs.rand();
    r.wrapping_mul(fs.rand())
}

/// fio's `__fill_random_buf` with its default 4 seed buckets: interleaved word streams,
/// each a hash chain from `seed` times a small prime; the tail from the first bucket.
fn fill_random(buf: &mut [u8], seed: u64) {
    const PRIMES: [u64; 4] = [1, 2, 3, 5];
    let words = buf.len() / 8 / 4 * 4;
    let mut s = PRIMES.map(|p| seed.wrapping_mul(p));
    let (body, tail) = buf.split_at_mut(words * 8);
    for group in body.chunks_exact_mut(32) {
        for (p, w) in group.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&s[p].to_le_bytes());
            s[p] = hash_u64(s[p]);
        }
    }
    // `__fill_random_buf_small`.
    let mut seed = s[0];
    let mut words = tail.chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&seed.to_le_bytes());
        seed = hash_u64(seed);
    }
    let rest = words.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&seed.to_le_bytes()[..n]);
}

/// `pattern` repeated from its first byte over `buf` (zeroes without one): fio's
/// `cpy_pattern`, or `memset`.
fn fill_pattern(buf: &mut [u8], pattern: Option<&[u8]>) {
    match pattern {
        Some(p) if !p.is_empty() => crate::verify::fill_pattern(buf, p),
        _ => buf.fill(0),
    }
}

/// fio's `__fill_random_buf_percentage`: each `segment` random for `100 - percentage` of
/// it, the rest the pattern (or zeroes).
fn fill_random_percentage(
    buf: &mut [u8],
    seed: u64,
    percentage: u32,
    segment: usize,
    pattern: Option<&[u8]>,
) {
    if percentage == 100 {
        fill_pattern(buf, pattern);
        return;
    }
    let segment = segment.min(buf.len()).max(1);
    let mut at = 0;
    let mut len = buf.len();
    while len > 0 {
        let mut this = (segment as u64 * u64::from(100 - percentage) / 100) as usize;
        this = this.min(len);
        fill_random(&mut buf[at..at + this], seed);
        len -= this;
        if len == 0 {
            break;
        }
        at += this;
        this = segment - this;
        if this > len || len - this <= 8 {
            this = len;
        }
        fill_pattern(&mut buf[at..at + this], pattern);
        len -= this;
        at += this;
    }
}

/// Fills a job's write buffers as fio does; see the module documentation.
#[derive(Clone, Debug)]
pub struct BufferFiller {
    plan: BufferPlan,
    pattern: Option<Vec<u8>>,
    /// `min_bs` of writes: fio's chunk when compressing or deduplicating.
    min_write: usize,
    buf_state: FRand,
    prev: FRand,
    dedupe_state: FRand,
    working_set_ix: FRand,
    working_set: Vec<FRand>,
}

impl BufferFiller {
    /// The filler of a job clone with `seeds`, writing at least `min_write` bytes at a
    /// time. `run`: every clone's seeds in fio's thread order, and this clone's place
    /// among them, for a working set shared by the run (`dedupe_global`).
    pub fn new(
        plan: &BufferPlan,
        pattern: Option<&[u8]>,
        seeds: &Seeds,
        min_write: u32,
        run: (&[&Seeds], usize),
    ) -> BufferFiller {
        let buf_state = seeds.state(slot::BUF);
        let working_set = if plan.dedupe_global && run.0.len() > 1 {
            let streams: Vec<FRand> = run.0.iter().map(|s| s.state(slot::BUF)).collect();
            Self::working_set_of(&streams, run.1, plan, min_write)
        } else {
            Self::working_set_of(std::slice::from_ref(&buf_state), 0, plan, min_write)
        };
        BufferFiller {
            plan: plan.clone(),
            pattern: pattern.map(<[u8]>::to_vec),
            min_write: min_write.max(1) as usize,
            prev: buf_state.clone(),
            buf_state,
            dedupe_state: seeds.state32(slot::DEDUPE),
            working_set_ix: seeds.state(slot::DEDUPE_WORKING_SET_IX),
            working_set,
        }
    }

    /// fio's `init_dedupe_working_set_seeds`: `plan.unique_pages` streams, each as far
    /// along a buffer stream as the pages before it took; from `streams[start]` on, and
    /// with several streams (a global working set, every clone's in thread order) the
    /// next one's after each share of the pages.
    fn working_set_of(
        streams: &[FRand],
        start: usize,
        plan: &BufferPlan,
        min_write: u32,
    ) -> Vec<FRand> {
        let pages = plan.unique_pages;
        if pages == 0 || streams.is_empty() {
            return Vec::new();
        }
        let chunk = if plan.compress_chunk > 0 {
            min_write.min(plan.compress_chunk)
        } else {
            min_write
        };
        let advances = u64::from(min_write / chunk.max(1));
        let per_stream = (pages / streams.len() as u64).max(1);
        let mut which = start.min(streams.len() - 1);
        let mut state = streams[which].clone();
        let mut out = vec![state.clone()];
        for i in 1..pages {
            for _ in 0..advances {
                next_seed(&mut state);
            }
            if streams.len() > 1 && i % per_stream == 0 {
                which = (which + 1) % streams.len();
                state = streams[which].clone();
            }
            out.push(state.clone());
        }
        out
    }

    /// The stream the next buffer's data comes from, and whether it is the job's own
    /// (fio's `get_buf_state`).
    fn buf_state(&mut self) -> (FRand, bool) {
        let d = self.plan.dedupe_percentage;
        if d == 0 {
            return (self.buf_state.clone(), true);
        }
        if d == 100 {
            self.prev = self.buf_state.clone();
            return (self.buf_state.clone(), true);
        }
        let v = self.dedupe_state.between(1, 100);
        if v <= u64::from(d) {
            match self.plan.dedupe_mode {
                DedupeMode::Repeat => return (self.prev.clone(), false),
                DedupeMode::WorkingSet if !self.working_set.is_empty() => {
                    let n = self.working_set.len() as u64;
                    let i = self.working_set_ix.between(0, n - 1) as usize;
                    return (self.working_set[i].clone(), false);
                }
                DedupeMode::WorkingSet => {}
            }
        }
        (self.buf_state.clone(), true)
    }

    /// Fills `buf` as fio's `fill_io_buffer` does.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let (perc, chunk) = (
            self.plan.compress_percentage,
            self.plan.compress_chunk as usize,
        );
        if perc > 0 || self.plan.dedupe_percentage > 0 {
            let (mut rs, own) = self.buf_state();
            let mut at = 0;
            while at < buf.len() {
                let left = buf.len() - at;
                let min_write = self.min_write.min(left);
                let this = if chunk > 0 {
                    min_write.min(chunk)
                } else {
                    min_write
                };
                let seed = next_seed(&mut rs);
                fill_random_percentage(
                    &mut buf[at..at + this],
                    seed,
                    perc,
                    this,
                    self.pattern.as_deref(),
                );
                at += this;
                // fio's `save_buf_state`: with every buffer a repeat, each chunk starts
                // again where the stream stood (all chunks alike); else the job's own
                // stream is remembered as it now stands.
                if self.plan.dedupe_percentage == 100 {
                    rs = self.prev.clone();
                } else if own {
                    self.prev = rs.clone();
                }
            }
            if own {
                self.buf_state = rs;
            }
        } else if self.pattern.is_some() {
            fill_pattern(buf, self.pattern.as_deref());
        } else if self.plan.zero {
            buf.fill(0);
        } else {
            let seed = next_seed(&mut self.buf_state);
            fill_random(buf, seed);
        }
    }

    /// Before a write of `buf` at byte `offset` goes out at `now_ns`: filled again
    /// (`refill_buffers`), or its 512-byte blocks marked with the offset and the time
    /// (`scramble_buffers`, fio's `small_content_scramble`), unless the job compresses. A
    /// verifying job's writes carry verify data instead (`verify::fill_pieces`), so it is
    /// not called for them.
    pub fn before_write(&mut self, buf: &mut [u8], offset: u64, now_ns: u64) {
        if self.plan.refill {
            self.fill(buf);
        } else if self.plan.scramble && self.plan.compress_percentage == 0 {
            scramble(buf, offset, now_ns);
        }
    }
}

/// fio's `small_content_scramble`: in each 512-byte block the block's offset at one of its
/// eight 64-byte lines (picked by the time and the offset), and the time in the last 16
/// bytes of its first line.
fn scramble(buf: &mut [u8], offset: u64, now_ns: u64) {
    let (sec, nsec) = (now_ns / 1_000_000_000, now_ns % 1_000_000_000);
    let line = (((nsec ^ offset) & 7) << 6) as usize;
    let mut boffset = offset;
    for block in buf.chunks_exact_mut(512) {
        block[line..line + 8].copy_from_slice(&boffset.to_le_bytes());
        block[48..56].copy_from_slice(&sec.to_le_bytes());
        block[56..64].copy_from_slice(&nsec.to_le_bytes());
        boffset += 512;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(o: BufferOptions) -> BufferPlan {
        o.resolved(false, 1 << 20, 4096)
    }

    fn filler(o: BufferOptions) -> BufferFiller {
        BufferFiller::new(&plan(o), None, &Seeds::default(), 4096, (&[], 0))
    }

    /// fio's defaults: random data, filled once and scrambled per write; each 512-byte
    /// block then differs from every other.
    #[test]
    fn by_default_each_write_is_random_and_scrambled() {
        let p = plan(BufferOptions::default());
        assert!(!p.refill && p.scramble && !p.zero);
        let mut f = filler(BufferOptions::default());
        let mut buf = vec![0u8; 4096];
        f.fill(&mut buf);
        let first = buf.clone();
        assert!(buf.iter().filter(|&&b| b == 0).count() < 64, "random");
        f.before_write(&mut buf, 0, 5);
        let a = buf.clone();
        f.before_write(&mut buf, 4096, 9);
        assert!(a != buf, "scrambled apart");
        for (x, y) in a.chunks(512).zip(first.chunks(512)) {
            let changed = x.iter().zip(y).filter(|(p, q)| p != q).count();
            assert!(changed <= 24, "a few bytes of each block: {changed}");
        }
    }

    #[test]
    fn fios_fixups_decide_refill_zeroes_and_scrambling() {
        let full = plan(BufferOptions {
            compress_percentage: 100,
            ..Default::default()
        });
        assert!(full.zero && full.compress_percentage == 0 && full.scramble);
        let half = plan(BufferOptions {
            compress_percentage: 50,
            ..Default::default()
        });
        assert!(half.refill);
        let kept = plan(BufferOptions {
            compress_percentage: 50,
            refill_buffers: Some(false),
            ..Default::default()
        });
        assert!(!kept.refill);
        let zero = plan(BufferOptions {
            zero_buffers: Some(true),
            ..Default::default()
        });
        assert!(zero.zero && !zero.scramble);
        assert!(
            BufferOptions::default()
                .resolved(true, 1 << 20, 4096)
                .refill
        );
    }

    /// `buffer_compress_percentage=25` with 512-byte chunks: each chunk 384 random bytes,
    /// then 128 zeroes.
    #[test]
    fn compression_leaves_the_given_share_of_each_chunk_zero() {
        let mut f = filler(BufferOptions {
            compress_percentage: 25,
            ..Default::default()
        });
        let mut buf = vec![0xffu8; 8192];
        f.fill(&mut buf);
        for chunk in buf.chunks(512) {
            assert!(chunk[384..].iter().all(|&b| b == 0));
            assert!(chunk[..384].iter().filter(|&&b| b == 0).count() < 16);
        }
    }

    /// Half the buffers repeat another's data; the rest are new.
    #[test]
    fn dedupe_repeats_the_given_share_of_buffers() {
        for mode in [DedupeMode::Repeat, DedupeMode::WorkingSet] {
            let mut f = filler(BufferOptions {
                dedupe_percentage: 50,
                dedupe_mode: mode,
                dedupe_working_set_percentage: 10,
                ..Default::default()
            });
            let mut seen = std::collections::HashSet::new();
            let n = 2000;
            for _ in 0..n {
                let mut buf = vec![0u8; 4096];
                f.fill(&mut buf);
                seen.insert(buf);
            }
            let unique = seen.len() as f64 / n as f64;
            assert!((0.4..0.62).contains(&unique), "{mode:?}: {unique}");
        }
    }
}
