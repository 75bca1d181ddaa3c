//! fio's `random_generator=lfsr` (`lib/lfsr.c`): a maximal-length linear feedback shift
//! register over the blocks of a file, which visits every block once per pass without a
//! random map. The register is the smallest of the table's widths that holds the block
//! count; values past the last block are stepped over.

/// Feedback taps per register width, from the published table of maximal-length LFSRs
/// fio uses (index = width; widths below 3 do not exist).
const TAPS: [&[u8]; 64] = [
    &[],
    &[],
    &[],
    &[3, 2],
    &[4, 3],
    &[5, 3],
    &[6, 5],
    &[7, 6],
    &[8, 6, 5, 4],
    &[9, 5],
    &[10, 7],
    &[11, 9],
    &[12, 6, 4, 1],
    &[13, 4, 3, 1],
    &[14, 5, 3, 1],
    &[15, 14],
    &[16, 15, 13, 4],
    &[17, 14],
    &[18, 11],
    &[19, 6, 2, 1],
    &[20, 17],
    &[21, 19],
    &[22, 21],
    &[23, 18],
    &[24, 23, 22, 17],
    &[25, 22],
    &[26, 6, 2, 1],
    &[27, 5, 2, 1],
    &[28, 25],
    &[29, 27],
    &[30, 6, 4, 1],
    &[31, 28],
    &[32, 31, 29, 1],
    &[33, 20],
    &[34, 27, 2, 1],
    &[35, 33],
    &[36, 25],
    &[37, 5, 4, 3, 2, 1],
    &[38, 6, 5, 1],
    &[39, 35],
    &[40, 38, 21, 19],
    &[41, 38],
    &[42, 41, 20, 19],
    &[43, 42, 38, 37],
    &[44, 43, 18, 17],
    &[45, 44, 42, 41],
    &[46, 45, 26, 25],
    &[47, 42],
    &[48, 47, 21, 20],
    &[49, 40],
    &[50, 49, 24, 23],
    &[51, 50, 36, 35],
    &[52, 49],
    &[53, 52, 38, 37],
    &[54, 53, 18, 17],
    &[55, 31],
    &[56, 55, 35, 34],
    &[57, 50],
    &[58, 39],
    &[59, 58, 38, 37],
    &[60, 59],
    &[61, 60, 46, 45],
    &[62, 61, 6, 5],
    &[63, 62],
];

/// fio's `struct fio_lfsr` with no spin (the only one fio's offsets use).
#[derive(Clone, Debug)]
pub(crate) struct Lfsr {
    xormask: u64,
    last: u64,
    top_bit: u64,
    max_val: u64,
    drawn: u64,
    /// fio's `prepare_spin(0)` leaves a cycle length of 1, so the very first value after
    /// `lfsr_init` is two steps on; it is 0 from then on, resets included.
    first_double: bool,
}

impl Lfsr {
    /// fio's `lfsr_init(nums, seed, 0)`: `None` where no register fits (over 2^63 blocks)
    /// or the seed gives the register's forbidden all-ones state.
    pub(crate) fn new(nums: u64, seed: u64) -> Option<Lfsr> {
        let width = (3..64).find(|&w| (1u64 << w) > nums)?;
        let taps = TAPS[width];
        let xormask = taps.iter().fold(0u64, |m, &t| m | 1 << (t - 1));
        let mut l = Lfsr {
            xormask,
            last: 0,
            top_bit: 1 << (taps[0] - 1),
            max_val: nums.saturating_sub(1),
            drawn: 0,
            first_double: true,
        };
        l.reset(seed).then_some(l)
    }

    /// fio's `lfsr_reset`: a new pass from `seed`; false for the all-ones state.
    pub(crate) fn reset(&mut self, seed: u64) -> bool {
        let mask = (self.top_bit << 1) - 1;
        self.drawn = 0;
        self.last = seed & mask;
        self.last != mask
    }

    fn step(&mut self) {
        let v = self.last;
        self.last = ((v >> 1) | self.top_bit) ^ ((v & 1).wrapping_sub(1) & self.xormask);
    }

    /// Whether the pass has given every block.
    pub(crate) fn exhausted(&self) -> bool {
        self.drawn > self.max_val
    }

    /// fio's `lfsr_next`: the next block, `None` once the pass has given every block.
    pub(crate) fn next(&mut self) -> Option<u64> {
        let n = self.drawn;
        self.drawn += 1;
        if n > self.max_val {
            return None;
        }
        loop {
            if std::mem::take(&mut self.first_double) {
                self.step();
            }
            self.step();
            if self.last <= self.max_val {
                return Some(self.last);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_gives_every_block_once() {
        for n in [5u64, 8, 100, 1000, 4096] {
            let mut l = Lfsr::new(n, 0xb189_9bed).unwrap();
            let mut seen = vec![false; n as usize];
            for _ in 0..n {
                let b = l.next().unwrap() as usize;
                assert!(!seen[b], "block {b} of {n} twice");
                seen[b] = true;
            }
            assert_eq!(l.next(), None, "{n} blocks, then the pass is over");
        }
    }
}
