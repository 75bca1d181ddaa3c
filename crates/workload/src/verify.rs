//! `verify=crc32c`: every written block carries a header with its offset, a generation and
//! the CRC32C of its payload; reading it back checks all three. A block that was never
//! written, was written elsewhere, or was corrupted is reported with its offset.

/// Header layout at the start of each block: magic, offset, length, seed, crc.
const MAGIC: u32 = 0x6d71_626b; // "mqbk"
const HEADER_LEN: usize = 4 + 8 + 4 + 8 + 4;

/// Fills `buf` (one block at `offset`) with a pattern derived from `seed` and the offset, and
/// the header.
pub fn fill(buf: &mut [u8], offset: u64, seed: u64) {
    assert!(
        buf.len() >= HEADER_LEN + 4,
        "verify needs blocks of at least 32 bytes"
    );
    let mut x = seed ^ offset.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf[HEADER_LEN..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    buf[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    buf[4..12].copy_from_slice(&offset.to_le_bytes());
    let len = buf.len() as u32;
    buf[12..16].copy_from_slice(&len.to_le_bytes());
    buf[16..24].copy_from_slice(&seed.to_le_bytes());
    let crc = block_crc(buf);
    buf[24..28].copy_from_slice(&crc.to_le_bytes());
}

/// CRC32C of the header fields before the checksum and of the payload after it.
fn block_crc(buf: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&buf[..24]), &buf[HEADER_LEN..])
}

/// Checks a block read back from `offset`. Returns a one-line description of the mismatch.
pub fn check(buf: &[u8], offset: u64) -> Result<(), String> {
    if buf.len() < HEADER_LEN + 4 {
        return Err(format!(
            "verify: block at offset {offset} is too short ({} bytes)",
            buf.len()
        ));
    }
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4-byte slice"));
    let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8-byte slice"));
    if u32_at(0) != MAGIC {
        return Err(format!(
            "verify: bad magic {:#x} at offset {offset} (block never written or overwritten)",
            u32_at(0)
        ));
    }
    if u64_at(4) != offset {
        return Err(format!(
            "verify: block at offset {offset} holds data written for offset {}",
            u64_at(4)
        ));
    }
    if u32_at(12) as usize != buf.len() {
        return Err(format!(
            "verify: block at offset {offset} has length {} in its header, read {}",
            u32_at(12),
            buf.len()
        ));
    }
    let want = u32_at(24);
    let got = block_crc(buf);
    if want != got {
        return Err(format!(
            "verify: crc32c mismatch at offset {offset}: header {want:#010x}, data {got:#010x}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_block_checks_and_any_flipped_byte_fails() {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 8192, 99);
        check(&b, 8192).unwrap();
        for i in [0usize, 5, 20, 27, 28, 100, 4095] {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(check(&c, 8192).is_err(), "flip at byte {i} not caught");
        }
        assert!(check(&b, 4096)
            .unwrap_err()
            .contains("written for offset 8192"));
        assert!(check(&[0u8; 4096], 0).unwrap_err().contains("bad magic"));
    }
}
