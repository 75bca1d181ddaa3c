//! fio's random numbers, bit for bit: its generators (`lib/rand.h`, `lib/rand.c`), its
//! per-purpose seeds (`setup_random_seeds` and `td_fill_rand_seeds` in `init.c`) and the
//! hashes its distributions use (`hash.h`), so that a job's offsets, sizes and read/write
//! mix are the very ones fio 3.33 issues for the same job file.
//!
//! fio gives every job (every clone too) its own seeds, made from `randseed` (default
//! `0x89`) and the job's thread number (its place among all jobs and clones of the file,
//! from 1); with `randrepeat=1` (the default) the offsets' seed is
//! `0xb1899bed * thread_number` whatever `randseed` says (fio 3.33 keeps `randrepeat`
//! on when `randseed` is given, though its `fixup_options` means to turn it off: the
//! offsets of `--randseed=1234` are those of no `randseed` at all). Each purpose (offsets, sizes per
//! direction, the read/write mix, percentage_random, zones, file choice, start delay) draws
//! from its own generator seeded from its own slot, so one purpose never shifts another.

/// The offsets' seed per thread number under `randrepeat=1` (fio's `FIO_RANDSEED`).
pub const FIO_RANDSEED: u64 = 0xb189_9bed;

/// fio's default `randseed` (the option's default in `options.c`), which seeds every
/// other purpose.
pub const DEFAULT_RANDSEED: u64 = 0x89;

/// The slots of fio's `rand_seeds[]` (`FIO_RAND_*_OFF` in `fio.h`), in its order.
pub mod slot {
    pub const BS: usize = 0;
    pub const BS1: usize = 1;
    pub const BS2: usize = 2;
    pub const VER: usize = 3;
    pub const MIX: usize = 4;
    pub const FILE: usize = 5;
    pub const BLOCK: usize = 6;
    pub const FILE_SIZE: usize = 7;
    pub const TRIM: usize = 8;
    pub const BUF: usize = 9;
    pub const SEQ_RAND_READ: usize = 10;
    pub const SEQ_RAND_WRITE: usize = 11;
    pub const SEQ_RAND_TRIM: usize = 12;
    pub const START_DELAY: usize = 13;
    pub const DEDUPE: usize = 14;
    pub const POISSON: usize = 15;
    pub const ZONE: usize = 16;
    pub const POISSON2: usize = 17;
    pub const POISSON3: usize = 18;
    pub const PRIO_CMDS: usize = 19;
    pub const DEDUPE_WORKING_SET_IX: usize = 20;
    /// How many there are (`FIO_RAND_NR_OFFS`).
    pub const NR: usize = 21;
}

/// fio's `random_generator=`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RandomGenerator {
    /// L'Ecuyer's 32-bit combined Tausworthe generator (fio's default).
    #[default]
    Tausworthe,
    /// A maximal-period linear feedback shift register over the blocks: every block once
    /// per pass without a random map.
    Lfsr,
    /// The 64-bit combined Tausworthe generator, for regions of more than 2^32 blocks.
    Tausworthe64,
}

/// One job's seeds, one per purpose, as fio makes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seeds {
    pub slots: [u64; slot::NR],
    /// Offsets, sizes and files draw 64-bit numbers (`random_generator=tausworthe64`).
    pub use64: bool,
    pub generator: RandomGenerator,
    /// fio's `randrepeat` as it stands after `randseed` (which turns it off): whether the
    /// skewed distributions seed from the file's name and loops start from the same seeds.
    pub repeatable: bool,
    /// The job's thread number (1 for the first job of a file, counting every clone).
    pub thread_number: u32,
}

impl Seeds {
    /// fio's `setup_random_seeds` for a job with `randseed=rand_seed` ([`DEFAULT_RANDSEED`]
    /// when none is given) and `randrepeat=repeatable`, then
    /// `td_fill_rand_seeds_internal`'s override of the offsets' seed.
    pub fn fio(
        rand_seed: u64,
        thread_number: u32,
        repeatable: bool,
        generator: RandomGenerator,
    ) -> Seeds {
        let mut seed = rand_seed;
        for _ in 0..4 {
            seed = seed.wrapping_mul(0x9e37_0001);
        }
        let mut slots = [0u64; slot::NR];
        for (i, s) in slots.iter_mut().enumerate() {
            *s = seed
                .wrapping_mul(u64::from(thread_number))
                .wrapping_add(i as u64);
            seed = seed.wrapping_mul(0x9e37_0001);
        }
        if repeatable {
            slots[slot::BLOCK] = FIO_RANDSEED.wrapping_mul(u64::from(thread_number));
        }
        Seeds {
            slots,
            use64: generator == RandomGenerator::Tausworthe64,
            generator,
            repeatable,
            thread_number,
        }
    }

    /// fio's `allrandrepeat=1` (`td_fill_rand_seeds`): every stream seeded from the thread
    /// number alone, `FIO_RANDSEED * thread + slot`, the offsets' stream then as
    /// `randrepeat` says.
    pub fn all_repeatable(mut self, on: bool) -> Seeds {
        if !on {
            return self;
        }
        let thread = u64::from(self.thread_number);
        for (i, s) in self.slots.iter_mut().enumerate() {
            *s = FIO_RANDSEED.wrapping_mul(thread).wrapping_add(i as u64);
        }
        if self.repeatable {
            self.slots[slot::BLOCK] = FIO_RANDSEED.wrapping_mul(thread);
        }
        self
    }

    /// A generator for `purpose` (a [`slot`]), 64-bit when the job asked for it.
    pub fn state(&self, purpose: usize) -> FRand {
        FRand::new(self.slots[purpose], self.use64)
    }

    /// A 32-bit generator for `purpose`: fio seeds the read/write mix, zones and the
    /// percentage_random coin this way whatever `random_generator` says.
    pub fn state32(&self, purpose: usize) -> FRand {
        FRand::new(self.slots[purpose], false)
    }
}

impl Default for Seeds {
    fn default() -> Seeds {
        Seeds::fio(DEFAULT_RANDSEED, 1, true, RandomGenerator::Tausworthe)
    }
}

/// fio's `struct frand_state`: a combined Tausworthe generator, 32-bit (taus88) or 64-bit
/// (taus258).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FRand {
    Taus88([u32; 3]),
    Taus258([u64; 5]),
}

/// fio's `__seed`: a state word below its minimum is lifted past it.
fn lift(x: u64, min: u64) -> u64 {
    if x < min {
        x + min
    } else {
        x
    }
}

impl FRand {
    /// fio's `init_rand_seed` (`__init_rand32`/`__init_rand64`: an LCG from the seed, six
    /// cranks). The 32-bit generator takes the seed's low 32 bits, as fio's cast does.
    pub fn new(seed: u64, use64: bool) -> FRand {
        // fio writes the LCG's start as `(2^31) + (2^17) + (2^7)`: C's `^` is XOR, so 53.
        const START: u64 = 29 + 19 + 5;
        let mut r = if use64 {
            let lcg = |x: u64| x.wrapping_mul(6_906_969_069) ^ seed;
            let s1 = lift(lcg(START), 1);
            let s2 = lift(lcg(s1), 7);
            let s3 = lift(lcg(s2), 15);
            let s4 = lift(lcg(s3), 33);
            let s5 = lift(lcg(s4), 49);
            FRand::Taus258([s1, s2, s3, s4, s5])
        } else {
            let seed = seed as u32;
            let lcg = |x: u32| x.wrapping_mul(69_069) ^ seed;
            let lift32 = |x: u32, m: u32| if x < m { x + m } else { x };
            let s1 = lift32(lcg(START as u32), 1);
            let s2 = lift32(lcg(s1), 7);
            let s3 = lift32(lcg(s2), 15);
            FRand::Taus88([s1, s2, s3])
        };
        for _ in 0..6 {
            r.rand();
        }
        r
    }

    /// fio's `__rand`: the next raw number (32 bits wide for taus88).
    #[inline]
    pub fn rand(&mut self) -> u64 {
        match self {
            FRand::Taus88(s) => {
                #[inline]
                fn taus(s: u32, a: u32, b: u32, c: u32, d: u32) -> u32 {
                    ((s & c) << d) ^ (((s << a) ^ s) >> b)
                }
                s[0] = taus(s[0], 13, 19, 4_294_967_294, 12);
                s[1] = taus(s[1], 2, 25, 4_294_967_288, 4);
                s[2] = taus(s[2], 3, 11, 4_294_967_280, 17);
                u64::from(s[0] ^ s[1] ^ s[2])
            }
            FRand::Taus258(s) => {
                #[inline]
                fn step(s: u64, a: u32, b: u32, mask: u64, d: u32) -> u64 {
                    let x = ((s << a) ^ s) >> b;
                    ((s & mask) << d) ^ x
                }
                s[0] = step(s[0], 1, 53, 18_446_744_073_709_551_614, 10);
                s[1] = step(s[1], 24, 50, 18_446_744_073_709_551_104, 5);
                s[2] = step(s[2], 3, 23, 18_446_744_073_709_547_520, 29);
                s[3] = step(s[3], 5, 24, 18_446_744_073_709_420_544, 23);
                s[4] = step(s[4], 3, 33, 18_446_744_073_701_163_008, 8);
                s[0] ^ s[1] ^ s[2] ^ s[3] ^ s[4]
            }
        }
    }

    /// fio's `rand_max`: the largest number [`FRand::rand`] gives.
    #[inline]
    pub fn max(&self) -> u64 {
        match self {
            FRand::Taus88(_) => u64::from(u32::MAX),
            FRand::Taus258(_) => u64::MAX,
        }
    }

    /// fio's `__rand_0_1`: in `(0, 1]`, `(r + 1) / (rand_max + 1)`.
    #[inline]
    pub fn rand_0_1(&mut self) -> f64 {
        let max = self.max() as f64 + 1.0;
        (self.rand() as f64 + 1.0) / max
    }

    /// A number scaled into `0..n` as fio scales offsets and sizes:
    /// `n * (r / (rand_max + 1.0))`, in doubles.
    #[inline]
    pub fn scaled(&mut self, n: u64) -> u64 {
        let max = self.max() as f64 + 1.0;
        let r = self.rand() as f64;
        (n as f64 * (r / max)) as u64
    }

    /// fio's `rand_between`: uniform in `start..=end`.
    #[inline]
    pub fn between(&mut self, start: u64, end: u64) -> u64 {
        match self {
            FRand::Taus88(_) => {
                let r = self.rand() as u32;
                let end = ((end - start) as u32).wrapping_add(1);
                // fio converts through `int` (rand32_upto).
                let v = (f64::from(end) * (f64::from(r) / 4_294_967_296.0)) as i32;
                start + u64::from(v as u32)
            }
            FRand::Taus258(_) => {
                let r = self.rand();
                let end = (end - start).wrapping_add(1);
                let two64 = 4_294_967_296.0 * 4_294_967_296.0;
                start + (end as f64 * (r as f64 / two64)) as u64
            }
        }
    }
}

/// fio's `__hash_u64`: a multiply by the 64-bit golden ratio.
#[inline]
pub fn hash_u64(v: u64) -> u64 {
    v.wrapping_mul(0x61C8_8646_80B5_83EB)
}

/// Bob Jenkins' hash as fio's `hash.h` has it (`jhash`), which fio seeds a file's skewed
/// distribution with (the file's name times the thread number).
pub fn jhash(key: &[u8], initval: u32) -> u32 {
    // One step of `__jhash_mix`: x -= z; x ^= z <<< r; z += y.
    fn mix(x: &mut u32, y: u32, z: &mut u32, r: u32) {
        *x = x.wrapping_sub(*z) ^ z.rotate_left(r);
        *z = z.wrapping_add(y);
    }
    // One step of `__jhash_final`: x ^= y; x -= y <<< r.
    fn fin(x: &mut u32, y: u32, r: u32) {
        *x = (*x ^ y).wrapping_sub(y.rotate_left(r));
    }
    let init = 0x61C8_8647u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = key;
    // fio adds single bytes here, not words (`a += *k` with `k` a byte pointer).
    while k.len() > 12 {
        a = a.wrapping_add(u32::from(k[0]));
        b = b.wrapping_add(u32::from(k[4]));
        c = c.wrapping_add(u32::from(k[8]));
        mix(&mut a, b, &mut c, 4);
        mix(&mut b, c, &mut a, 6);
        mix(&mut c, a, &mut b, 8);
        mix(&mut a, b, &mut c, 16);
        mix(&mut b, c, &mut a, 19);
        mix(&mut c, a, &mut b, 4);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    // The last block, little-endian into a, b and c.
    let word = |at: usize| {
        (0..4).fold(0u32, |w, i| {
            w.wrapping_add(k.get(at + i).map_or(0, |&x| u32::from(x) << (8 * i)))
        })
    };
    a = a.wrapping_add(word(0));
    b = b.wrapping_add(word(4));
    c = c.wrapping_add(word(8));
    fin(&mut c, b, 14);
    fin(&mut a, c, 11);
    fin(&mut b, a, 25);
    fin(&mut c, b, 16);
    fin(&mut a, c, 4);
    fin(&mut b, a, 14);
    fin(&mut c, b, 24);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_number_and_purpose_has_its_own_seed() {
        let a = Seeds::fio(DEFAULT_RANDSEED, 1, true, RandomGenerator::Tausworthe);
        let b = Seeds::fio(DEFAULT_RANDSEED, 2, true, RandomGenerator::Tausworthe);
        assert_eq!(a.slots[slot::BLOCK], FIO_RANDSEED);
        assert_eq!(b.slots[slot::BLOCK], FIO_RANDSEED * 2);
        assert_ne!(a.slots[slot::BS], b.slots[slot::BS]);
        // randrepeat=0: the offsets' seed follows randseed.
        let c = Seeds::fio(5, 1, false, RandomGenerator::Tausworthe);
        assert_ne!(c.slots[slot::BLOCK], FIO_RANDSEED);
    }

    #[test]
    fn taus88_never_repeats_early_and_stays_in_32_bits() {
        let mut r = FRand::new(FIO_RANDSEED, false);
        let first: Vec<u64> = (0..1000).map(|_| r.rand()).collect();
        assert!(first.iter().all(|&v| v <= u64::from(u32::MAX)));
        let mut sorted = first.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 1000);
        let mut r64 = FRand::new(FIO_RANDSEED, true);
        assert!((0..100).any(|_| r64.rand() > u64::from(u32::MAX)));
    }

    #[test]
    fn between_covers_both_ends_evenly() {
        let mut r = FRand::new(7, false);
        let mut count = [0u32; 101];
        for _ in 0..101_000 {
            count[r.between(1, 100) as usize] += 1;
        }
        assert_eq!(count[0], 0);
        assert!(
            count[1..].iter().all(|&c| (800..1200).contains(&c)),
            "{count:?}"
        );
    }

    #[test]
    fn jhash_matches_fios_own() {
        // fio 3.33's hash.h compiled as is: jhash(key, strlen(key), 0).
        for (key, want) in [
            ("ab", 2_543_859_065u32),
            ("hi.0.0", 487_659_418),
            ("/tmp/x/rand-read.0.0", 2_885_461_885),
            ("Four score and seven years ago", 320_063_261),
        ] {
            assert_eq!(jhash(key.as_bytes(), 0), want, "{key}");
        }
    }
}
