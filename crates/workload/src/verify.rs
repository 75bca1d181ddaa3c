//! fio's `verify=`: every written block carries a header with its offset, length, the job's
//! seed and a checksum of the block by the chosen algorithm; reading it back checks them
//! all. A block that was never written, was written elsewhere, or was corrupted is reported
//! with its offset.
//!
//! Algorithms: fio's `crc32c` (`crc32c-intel`), `crc32`, `crc64`, `crc16`, `crc7`, `md5`,
//! `sha1`, `sha256`, `sha512`, `xxhash`, and `meta` (the header alone, no checksum). The
//! header is mqblk's own (fio's differs), so a file is verified by the tool that wrote it.

use crate::job::VerifyMode;
use md5::Digest as _;

/// Header layout: magic, offset, length, seed, algorithm, then the checksum (up to 64
/// bytes); the payload follows at `HEADER_LEN`.
const MAGIC: u32 = 0x6d71_626b; // "mqbk"
const DIGEST_AT: usize = 28;
const MAX_DIGEST: usize = 64;
pub const HEADER_LEN: usize = DIGEST_AT + MAX_DIGEST;

/// The smallest block verify can fill.
pub const MIN_BLOCK: usize = HEADER_LEN + 4;

/// fio's `verify_offset`: the header swapped with the bytes `at` into the piece (as fio's
/// `memswp`), before it is written and again before it is checked; 0 leaves it in front.
/// The two ranges never overlap (`at >= HEADER_LEN`, checked with the job).
fn swap_header(piece: &mut [u8], at: usize) {
    if at == 0 || at + HEADER_LEN > piece.len() || at < HEADER_LEN {
        return;
    }
    let (head, rest) = piece.split_at_mut(at);
    head[..HEADER_LEN].swap_with_slice(&mut rest[..HEADER_LEN]);
}

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_ECMA_182);
const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);
const CRC7: crc::Crc<u8> = crc::Crc::<u8>::new(&crc::CRC_7_MMC);

/// The algorithm's id in the header.
fn id(mode: VerifyMode) -> u8 {
    match mode {
        VerifyMode::None => 0,
        VerifyMode::Crc32c => 1,
        VerifyMode::Crc32 => 2,
        VerifyMode::Crc64 => 3,
        VerifyMode::Crc16 => 4,
        VerifyMode::Crc7 => 5,
        VerifyMode::Md5 => 6,
        VerifyMode::Sha1 => 7,
        VerifyMode::Sha256 => 8,
        VerifyMode::Sha512 => 9,
        VerifyMode::Xxhash => 10,
        VerifyMode::Meta => 11,
        VerifyMode::Pattern => 12,
    }
}

/// Every algorithm a header can name.
const ALGORITHMS: [VerifyMode; 11] = [
    VerifyMode::Crc32c,
    VerifyMode::Crc32,
    VerifyMode::Crc64,
    VerifyMode::Crc16,
    VerifyMode::Crc7,
    VerifyMode::Md5,
    VerifyMode::Sha1,
    VerifyMode::Sha256,
    VerifyMode::Sha512,
    VerifyMode::Xxhash,
    VerifyMode::Meta,
];

fn mode_of(id: u8) -> Option<VerifyMode> {
    ALGORITHMS.into_iter().find(|&m| self::id(m) == id)
}

/// The checksum of a block's header fields (before the algorithm byte) and payload.
fn digest(mode: VerifyMode, buf: &[u8]) -> Vec<u8> {
    let (head, payload) = (&buf[..24], &buf[HEADER_LEN..]);
    match mode {
        VerifyMode::None | VerifyMode::Meta | VerifyMode::Pattern => Vec::new(),
        VerifyMode::Crc32c => crc32c::crc32c_append(crc32c::crc32c(head), payload)
            .to_le_bytes()
            .to_vec(),
        VerifyMode::Crc32 => {
            let mut d = CRC32.digest();
            d.update(head);
            d.update(payload);
            d.finalize().to_le_bytes().to_vec()
        }
        VerifyMode::Crc64 => {
            let mut d = CRC64.digest();
            d.update(head);
            d.update(payload);
            d.finalize().to_le_bytes().to_vec()
        }
        VerifyMode::Crc16 => {
            let mut d = CRC16.digest();
            d.update(head);
            d.update(payload);
            d.finalize().to_le_bytes().to_vec()
        }
        VerifyMode::Crc7 => {
            let mut d = CRC7.digest();
            d.update(head);
            d.update(payload);
            vec![d.finalize()]
        }
        VerifyMode::Md5 => md5::Md5::new()
            .chain_update(head)
            .chain_update(payload)
            .finalize()
            .to_vec(),
        VerifyMode::Sha1 => sha1::Sha1::new()
            .chain_update(head)
            .chain_update(payload)
            .finalize()
            .to_vec(),
        VerifyMode::Sha256 => sha2::Sha256::new()
            .chain_update(head)
            .chain_update(payload)
            .finalize()
            .to_vec(),
        VerifyMode::Sha512 => sha2::Sha512::new()
            .chain_update(head)
            .chain_update(payload)
            .finalize()
            .to_vec(),
        VerifyMode::Xxhash => {
            let mut h = xxhash_rust::xxh64::Xxh64::new(0);
            h.update(head);
            h.update(payload);
            h.digest().to_le_bytes().to_vec()
        }
    }
}

/// Fills `buf` with `pattern` repeated from its start (`buffer_pattern`).
pub fn fill_pattern(buf: &mut [u8], pattern: &[u8]) {
    for (b, p) in buf.iter_mut().zip(pattern.iter().cycle()) {
        *b = *p;
    }
}

/// Fills `buf` (one block at `offset`) with data, `pattern` repeated (`verify_pattern`) or
/// bytes derived from `seed` and the offset, and the header for `mode`; with
/// `VerifyMode::Pattern` the pattern alone, no header.
pub fn fill(buf: &mut [u8], offset: u64, seed: u64, mode: VerifyMode, pattern: Option<&[u8]>) {
    if let (VerifyMode::Pattern, Some(p)) = (mode, pattern) {
        fill_pattern(buf, p);
        return;
    }
    assert!(
        buf.len() >= MIN_BLOCK,
        "verify needs blocks of at least {MIN_BLOCK} bytes"
    );
    match pattern {
        Some(p) => fill_pattern(&mut buf[HEADER_LEN..], p),
        None => {
            let mut x = seed ^ offset.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for chunk in buf[HEADER_LEN..].chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let bytes = x.to_le_bytes();
                chunk.copy_from_slice(&bytes[..chunk.len()]);
            }
        }
    }
    buf[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    buf[4..12].copy_from_slice(&offset.to_le_bytes());
    let len = buf.len() as u32;
    buf[12..16].copy_from_slice(&len.to_le_bytes());
    buf[16..24].copy_from_slice(&seed.to_le_bytes());
    buf[24] = id(mode);
    buf[25..HEADER_LEN].fill(0);
    let d = digest(mode, buf);
    buf[DIGEST_AT..DIGEST_AT + d.len()].copy_from_slice(&d);
}

/// How a block read back differs from what was written. One line each, naming the
/// device offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A byte of the data does not repeat `verify_pattern`.
    #[error("verify: pattern mismatch at offset {at}: read {read:#04x}, expected {expected:#04x}")]
    Pattern { at: u64, read: u8, expected: u8 },
    /// The block is shorter than a header.
    #[error("verify: block at offset {offset} is too short ({len} bytes)")]
    TooShort { offset: u64, len: usize },
    /// The header's magic is not ours: never written by a verifying job, or overwritten.
    #[error(
        "verify: bad magic {magic:#x} at offset {offset} (block never written or overwritten)"
    )]
    BadMagic { offset: u64, magic: u32 },
    /// The header names another offset: the write landed in the wrong place.
    #[error("verify: block at offset {offset} holds data written for offset {written_for}")]
    Misplaced { offset: u64, written_for: u64 },
    /// The header's length is not the block's.
    #[error("verify: block at offset {offset} has length {header} in its header, read {read}")]
    Length {
        offset: u64,
        header: u32,
        read: usize,
    },
    /// The header names a checksum this build does not know.
    #[error("verify: block at offset {offset} names checksum {id} in its header, not one of ours")]
    UnknownChecksum { offset: u64, id: u8 },
    /// The data's digest is not the header's.
    #[error("verify: {algorithm} mismatch at offset {offset}: header {header}, data {data}")]
    Digest {
        algorithm: &'static str,
        offset: u64,
        /// The digests in hexadecimal.
        header: String,
        data: String,
    },
}

/// The first byte of `data` that does not repeat `pattern` (from `data`'s start), as a
/// mismatch at device offset `at + index`.
fn check_pattern(data: &[u8], pattern: &[u8], at: u64) -> Result<(), VerifyError> {
    match data
        .iter()
        .zip(pattern.iter().cycle())
        .position(|(d, p)| d != p)
    {
        None => Ok(()),
        Some(i) => Err(VerifyError::Pattern {
            at: at + i as u64,
            read: data[i],
            expected: pattern[i % pattern.len()],
        }),
    }
}

/// Checks a block read back from `offset`: its header (the algorithm it names), and with
/// `pattern` the data after it (with `VerifyMode::Pattern`, the whole block).
pub fn check(
    buf: &[u8],
    offset: u64,
    mode: VerifyMode,
    pattern: Option<&[u8]>,
) -> Result<(), VerifyError> {
    if let (VerifyMode::Pattern, Some(p)) = (mode, pattern) {
        return check_pattern(buf, p, offset);
    }
    if buf.len() < MIN_BLOCK {
        return Err(VerifyError::TooShort {
            offset,
            len: buf.len(),
        });
    }
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4-byte slice"));
    let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8-byte slice"));
    if u32_at(0) != MAGIC {
        return Err(VerifyError::BadMagic {
            offset,
            magic: u32_at(0),
        });
    }
    if u64_at(4) != offset {
        return Err(VerifyError::Misplaced {
            offset,
            written_for: u64_at(4),
        });
    }
    if u32_at(12) as usize != buf.len() {
        return Err(VerifyError::Length {
            offset,
            header: u32_at(12),
            read: buf.len(),
        });
    }
    let Some(mode) = mode_of(buf[24]) else {
        return Err(VerifyError::UnknownChecksum {
            offset,
            id: buf[24],
        });
    };
    let got = digest(mode, buf);
    let want = &buf[DIGEST_AT..DIGEST_AT + got.len()];
    if want != got.as_slice() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        return Err(VerifyError::Digest {
            algorithm: mode.name(),
            offset,
            header: hex(want),
            data: hex(&got),
        });
    }
    match pattern {
        Some(p) => check_pattern(&buf[HEADER_LEN..], p, offset + HEADER_LEN as u64),
        None => Ok(()),
    }
}

/// [`fill`] with a header every `interval` bytes (fio's `verify_interval`; 0 or the whole
/// block: one): each piece is a block of its own at its own offset. With
/// `VerifyMode::Pattern` the block is the pattern alone, whatever the interval.
pub fn fill_pieces(
    buf: &mut [u8],
    offset: u64,
    seed: u64,
    mode: VerifyMode,
    pattern: Option<&[u8]>,
    interval: u32,
    header_at: u32,
) {
    let step = piece_len(buf.len(), mode, interval);
    for (i, piece) in buf.chunks_mut(step).enumerate() {
        fill(piece, offset + (i * step) as u64, seed, mode, pattern);
        if mode != VerifyMode::Pattern {
            swap_header(piece, header_at as usize);
        }
    }
}

/// A piece of a block that failed its check: where it starts in the block, its bytes,
/// and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPiece {
    pub start: usize,
    pub len: usize,
    pub error: VerifyError,
}

/// [`check`] of every piece of a block written by [`fill_pieces`]: each bad piece, in
/// order; with `fatal` (fio's `verify_fatal`) the first only, as fio stops checking a
/// block there.
pub fn check_pieces(
    buf: &[u8],
    offset: u64,
    mode: VerifyMode,
    pattern: Option<&[u8]>,
    interval: u32,
    header_at: u32,
    fatal: bool,
) -> Vec<BadPiece> {
    let step = piece_len(buf.len(), mode, interval);
    let mut bad = Vec::new();
    let mut swapped = Vec::new();
    for (i, piece) in buf.chunks(step).enumerate() {
        let start = i * step;
        let piece = if header_at > 0 && mode != VerifyMode::Pattern {
            swapped.clear();
            swapped.extend_from_slice(piece);
            swap_header(&mut swapped, header_at as usize);
            &swapped[..]
        } else {
            piece
        };
        if let Err(error) = check(piece, offset + start as u64, mode, pattern) {
            bad.push(BadPiece {
                start,
                len: piece.len(),
                error,
            });
            if fatal {
                break;
            }
        }
    }
    bad
}

/// The bytes of each piece: `interval` when it splits the block, else the whole block.
fn piece_len(len: usize, mode: VerifyMode, interval: u32) -> usize {
    let i = interval as usize;
    if mode == VerifyMode::Pattern || i == 0 || i >= len {
        len.max(1)
    } else {
        i
    }
}

impl VerifyError {
    /// The data is not what was written (a checksum or the pattern), as opposed to a
    /// header that names another block: what fio's `verify_dump` writes out.
    pub fn is_data(&self) -> bool {
        matches!(
            self,
            VerifyError::Digest { .. } | VerifyError::Pattern { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_checks_its_blocks_and_catches_a_flipped_byte() {
        for mode in ALGORITHMS {
            let mut b = vec![0u8; 4096];
            fill(&mut b, 8192, 99, mode, None);
            check(&b, 8192, mode, None).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            // A checksum catches a change anywhere; meta checks the header's magic, offset
            // and length alone, as fio's does.
            let meta = mode == VerifyMode::Meta;
            for i in [0usize, 5, 14, 20, 100, 4095] {
                let mut c = b.clone();
                c[i] ^= 0x40;
                let caught = check(&c, 8192, mode, None).is_err();
                assert_eq!(caught, i < 16 || !meta, "{mode:?}: flip at byte {i}");
            }
            assert_eq!(
                check(&b, 4096, mode, None),
                Err(VerifyError::Misplaced {
                    offset: 4096,
                    written_for: 8192
                })
            );
        }
        assert!(check(&[0u8; 4096], 0, VerifyMode::Crc32c, None)
            .unwrap_err()
            .to_string()
            .contains("bad magic"));
    }

    #[test]
    fn a_verify_pattern_is_written_and_checked_with_or_without_a_header() {
        let p = [0xab, 0xcd, 0x01];
        // verify=pattern: the pattern alone, from the block's first byte.
        let mut b = vec![0u8; 512];
        fill(&mut b, 0, 1, VerifyMode::Pattern, Some(&p));
        assert_eq!(b[..6], [0xab, 0xcd, 0x01, 0xab, 0xcd, 0x01]);
        check(&b, 4096, VerifyMode::Pattern, Some(&p)).unwrap();
        b[300] ^= 1;
        let e = check(&b, 4096, VerifyMode::Pattern, Some(&p)).unwrap_err();
        assert!(
            e.to_string().contains("pattern mismatch at offset 4396"),
            "{e}"
        );
        // With a header (meta: no checksum), the data after it is the pattern, checked.
        let mut b = vec![0u8; 4096];
        fill(&mut b, 8192, 1, VerifyMode::Meta, Some(&p));
        check(&b, 8192, VerifyMode::Meta, Some(&p)).unwrap();
        b[4000] ^= 1;
        assert!(check(&b, 8192, VerifyMode::Meta, Some(&p)).is_err());
        assert!(
            check(&b, 8192, VerifyMode::Meta, None).is_ok(),
            "meta alone misses it"
        );
    }

    /// Four headers in a 16 KiB block: a byte flipped in the third piece is that piece's
    /// mismatch alone, at its own offset; a second bad piece is reported too unless the
    /// check is fatal, which stops at the first.
    #[test]
    fn a_header_per_interval_finds_the_bad_piece() {
        let mut buf = vec![0u8; 16384];
        fill_pieces(&mut buf, 1 << 20, 7, VerifyMode::Crc32c, None, 4096, 0);
        assert!(check_pieces(&buf, 1 << 20, VerifyMode::Crc32c, None, 4096, 0, false).is_empty());
        // Each piece is a block of its own: checked whole, the block is not one.
        assert!(check(&buf, 1 << 20, VerifyMode::Crc32c, None).is_err());
        buf[2 * 4096 + 100] ^= 1;
        let bad = check_pieces(&buf, 1 << 20, VerifyMode::Crc32c, None, 4096, 0, false);
        assert_eq!(bad.len(), 1);
        assert_eq!((bad[0].start, bad[0].len), (2 * 4096, 4096));
        assert!(bad[0].error.is_data(), "{}", bad[0].error);
        buf[3 * 4096 + 100] ^= 1;
        let all = check_pieces(&buf, 1 << 20, VerifyMode::Crc32c, None, 4096, 0, false);
        let first = check_pieces(&buf, 1 << 20, VerifyMode::Crc32c, None, 4096, 0, true);
        assert_eq!(all.len(), 2);
        assert_eq!(first, all[..1]);
        // A piece moved elsewhere names the offset it was written for: not a data error.
        let mut moved = vec![0u8; 4096];
        fill_pieces(&mut moved, 8192, 7, VerifyMode::Crc32c, None, 4096, 0);
        let e = check_pieces(&moved, 0, VerifyMode::Crc32c, None, 4096, 0, false);
        assert!(!e[0].error.is_data());
    }

    /// `verify_offset`: the header sits that far into each piece (the data it displaced in
    /// front), the piece checks out when read with the same offset and not without it.
    #[test]
    fn a_header_moved_into_the_piece_checks_out_only_where_it_was_put() {
        let mut buf = vec![0u8; 8192];
        fill_pieces(&mut buf, 4096, 9, VerifyMode::Crc32c, None, 4096, 256);
        let magic = MAGIC.to_le_bytes();
        assert_ne!(buf[..4], magic);
        assert_eq!(buf[256..260], magic);
        assert_eq!(buf[4096 + 256..4096 + 260], magic);
        assert!(check_pieces(&buf, 4096, VerifyMode::Crc32c, None, 4096, 256, false).is_empty());
        assert_eq!(
            check_pieces(&buf, 4096, VerifyMode::Crc32c, None, 4096, 0, false).len(),
            2
        );
        buf[4096 + 1000] ^= 1;
        let bad = check_pieces(&buf, 4096, VerifyMode::Crc32c, None, 4096, 256, false);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].start, 4096);
    }
}
