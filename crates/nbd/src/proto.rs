//! The NBD wire format (fixed newstyle handshake, simple replies), as plain functions over
//! bytes. Everything is big-endian on the wire. Nothing here does I/O; malformed input comes
//! back as an error value, never a panic.

use thiserror::Error;

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const EXT_REQUEST_MAGIC: u32 = 0x21e4_1c71;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;
pub const EXT_REPLY_MAGIC: u32 = 0x6e8a_278c;

/// The meta context BLOCK_STATUS reports, and the id we give it.
pub const BASE_ALLOCATION: &str = "base:allocation";
pub const BASE_ALLOCATION_ID: u32 = 1;

/// Structured reply chunk types and flags.
pub mod chunk {
    pub const FLAG_DONE: u16 = 1 << 0;
    pub const NONE: u16 = 0;
    pub const OFFSET_DATA: u16 = 1;
    pub const BLOCK_STATUS: u16 = 5;
    pub const BLOCK_STATUS_EXT: u16 = 6;
    pub const ERROR: u16 = 0x8001;
}

/// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Options.
pub mod opt {
    pub const EXPORT_NAME: u32 = 1;
    pub const ABORT: u32 = 2;
    pub const LIST: u32 = 3;
    pub const STARTTLS: u32 = 5;
    pub const INFO: u32 = 6;
    pub const GO: u32 = 7;
    pub const STRUCTURED_REPLY: u32 = 8;
    pub const LIST_META_CONTEXT: u32 = 9;
    pub const SET_META_CONTEXT: u32 = 10;
    pub const EXTENDED_HEADERS: u32 = 11;
}

/// Option reply types.
pub mod rep {
    pub const ACK: u32 = 1;
    pub const SERVER: u32 = 2;
    pub const INFO: u32 = 3;
    pub const META_CONTEXT: u32 = 4;
    pub const ERR_UNSUP: u32 = 0x8000_0001;
    pub const ERR_POLICY: u32 = 0x8000_0002;
    pub const ERR_INVALID: u32 = 0x8000_0003;
    pub const ERR_TLS_REQD: u32 = 0x8000_0005;
    pub const ERR_UNKNOWN: u32 = 0x8000_0006;
    pub const ERR_SHUTDOWN: u32 = 0x8000_0007;
}

/// Info types in `NBD_REP_INFO`.
pub mod info {
    pub const EXPORT: u16 = 0;
    pub const NAME: u16 = 1;
    pub const DESCRIPTION: u16 = 2;
    pub const BLOCK_SIZE: u16 = 3;
}

/// Transmission flags.
pub mod tflag {
    pub const HAS_FLAGS: u16 = 1 << 0;
    pub const READ_ONLY: u16 = 1 << 1;
    pub const SEND_FLUSH: u16 = 1 << 2;
    pub const SEND_DF: u16 = 1 << 7;
    pub const SEND_FUA: u16 = 1 << 3;
    pub const ROTATIONAL: u16 = 1 << 4;
    pub const SEND_TRIM: u16 = 1 << 5;
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
    pub const SEND_CACHE: u16 = 1 << 10;
    pub const SEND_FAST_ZERO: u16 = 1 << 11;
}

/// Commands.
pub mod cmd {
    pub const READ: u16 = 0;
    pub const WRITE: u16 = 1;
    pub const DISC: u16 = 2;
    pub const FLUSH: u16 = 3;
    pub const TRIM: u16 = 4;
    pub const CACHE: u16 = 5;
    pub const WRITE_ZEROES: u16 = 6;
    pub const BLOCK_STATUS: u16 = 7;
}

/// Command flags.
pub mod cflag {
    pub const FUA: u16 = 1 << 0;
    pub const NO_HOLE: u16 = 1 << 1;
    pub const DF: u16 = 1 << 2;
    pub const REQ_ONE: u16 = 1 << 3;
    pub const FAST_ZERO: u16 = 1 << 4;
    pub const PAYLOAD_LEN: u16 = 1 << 5;
    pub const KNOWN: u16 = FUA | NO_HOLE | DF | REQ_ONE | FAST_ZERO | PAYLOAD_LEN;
}

/// Reply errors (NBD's own numbers, not the host's errno).
pub mod err {
    pub const EPERM: u32 = 1;
    pub const EIO: u32 = 5;
    pub const ENOMEM: u32 = 12;
    pub const EINVAL: u32 = 22;
    pub const ENOSPC: u32 = 28;
    pub const EOVERFLOW: u32 = 75;
    pub const ENOTSUP: u32 = 95;
    pub const ESHUTDOWN: u32 = 108;
}

/// Most an option's payload may be: a malicious length must not make us allocate gigabytes.
pub const MAX_OPTION_LEN: u32 = 64 * 1024;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtoError {
    #[error("bad option magic {0:#018x}")]
    OptionMagic(u64),
    #[error("option {option} payload of {len} bytes exceeds {MAX_OPTION_LEN}")]
    OptionTooLong { option: u32, len: u32 },
    #[error("unknown client flags {0:#x}")]
    ClientFlags(u32),
    #[error("bad request magic {0:#010x}")]
    RequestMagic(u32),
    #[error("malformed {what}: {detail}")]
    Malformed { what: &'static str, detail: String },
}

/// The server's greeting.
pub fn greeting() -> [u8; 18] {
    let mut b = [0u8; 18];
    b[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    b
}

/// Checks the client's flags; returns whether it asked for no zeroes.
pub fn client_flags(f: u32) -> Result<bool, ProtoError> {
    if f & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(ProtoError::ClientFlags(f));
    }
    Ok(f & FLAG_C_NO_ZEROES != 0)
}

/// An option header: (option, payload length).
pub fn option_header(b: &[u8; 16]) -> Result<(u32, u32), ProtoError> {
    let magic = u64::from_be_bytes(b[..8].try_into().expect("8"));
    if magic != IHAVEOPT {
        return Err(ProtoError::OptionMagic(magic));
    }
    let option = u32::from_be_bytes(b[8..12].try_into().expect("4"));
    let len = u32::from_be_bytes(b[12..16].try_into().expect("4"));
    if len > MAX_OPTION_LEN {
        return Err(ProtoError::OptionTooLong { option, len });
    }
    Ok((option, len))
}

/// An option reply.
pub fn option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// The payload of `NBD_OPT_INFO`/`GO`: export name and the info types asked for.
pub fn parse_info_request(data: &[u8]) -> Result<(String, Vec<u16>), ProtoError> {
    let bad = |d: &str| ProtoError::Malformed {
        what: "NBD_OPT_GO/INFO",
        detail: d.to_string(),
    };
    if data.len() < 6 {
        return Err(bad("shorter than 6 bytes"));
    }
    let nlen = u32::from_be_bytes(data[..4].try_into().expect("4")) as usize;
    if data.len() < 4 + nlen + 2 {
        return Err(bad("name length beyond the payload"));
    }
    let name = String::from_utf8(data[4..4 + nlen].to_vec()).map_err(|_| bad("name not UTF-8"))?;
    let n = u16::from_be_bytes(data[4 + nlen..6 + nlen].try_into().expect("2")) as usize;
    let rest = &data[6 + nlen..];
    if rest.len() != 2 * n {
        return Err(bad("info request count does not match the payload"));
    }
    let infos = rest
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    Ok((name, infos))
}

/// `NBD_REP_INFO` bodies.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = info::EXPORT.to_be_bytes().to_vec();
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

pub fn info_text(kind: u16, text: &str) -> Vec<u8> {
    let mut b = kind.to_be_bytes().to_vec();
    b.extend_from_slice(text.as_bytes());
    b
}

pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut b = info::BLOCK_SIZE.to_be_bytes().to_vec();
    b.extend_from_slice(&min.to_be_bytes());
    b.extend_from_slice(&preferred.to_be_bytes());
    b.extend_from_slice(&max.to_be_bytes());
    b
}

/// `NBD_REP_SERVER` body for LIST.
pub fn rep_server(name: &str, description: &str) -> Vec<u8> {
    let mut b = (name.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(description.as_bytes());
    b
}

/// The reply to `NBD_OPT_EXPORT_NAME`.
pub fn export_name_reply(size: u64, flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut b = size.to_be_bytes().to_vec();
    b.extend_from_slice(&flags.to_be_bytes());
    if !no_zeroes {
        b.extend_from_slice(&[0u8; 124]);
    }
    b
}

/// A transmission request header (compact or extended; `length` widened to 64 bits).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub length: u64,
}

/// How replies are framed, as negotiated.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    Simple,
    Structured,
    Extended,
}

/// The queries of `NBD_OPT_LIST/SET_META_CONTEXT`: export name and context names.
pub fn parse_meta_request(data: &[u8]) -> Result<(String, Vec<String>), ProtoError> {
    let bad = |d: &str| ProtoError::Malformed {
        what: "NBD_OPT_*_META_CONTEXT",
        detail: d.to_string(),
    };
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], ProtoError> {
        let s = data
            .get(at..at.saturating_add(n))
            .ok_or_else(|| bad("shorter than its lengths say"))?;
        at += n;
        Ok(s)
    };
    let nlen = u32::from_be_bytes(take(4)?.try_into().expect("4")) as usize;
    let name = String::from_utf8(take(nlen)?.to_vec()).map_err(|_| bad("name not UTF-8"))?;
    let n = u32::from_be_bytes(take(4)?.try_into().expect("4")) as usize;
    let mut queries = Vec::new();
    for _ in 0..n.min(1024) {
        let qlen = u32::from_be_bytes(take(4)?.try_into().expect("4")) as usize;
        queries.push(String::from_utf8(take(qlen)?.to_vec()).map_err(|_| bad("query not UTF-8"))?);
    }
    if at != data.len() {
        return Err(bad("trailing bytes"));
    }
    Ok((name, queries))
}

/// `NBD_REP_META_CONTEXT` body.
pub fn rep_meta_context(id: u32, name: &str) -> Vec<u8> {
    let mut b = id.to_be_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    b
}

/// An extended request header.
pub fn parse_ext_request(b: &[u8; 32]) -> Result<Request, ProtoError> {
    let magic = u32::from_be_bytes(b[..4].try_into().expect("4"));
    if magic != EXT_REQUEST_MAGIC {
        return Err(ProtoError::RequestMagic(magic));
    }
    Ok(Request {
        flags: u16::from_be_bytes([b[4], b[5]]),
        kind: u16::from_be_bytes([b[6], b[7]]),
        cookie: u64::from_be_bytes(b[8..16].try_into().expect("8")),
        offset: u64::from_be_bytes(b[16..24].try_into().expect("8")),
        length: u64::from_be_bytes(b[24..32].try_into().expect("8")),
    })
}

/// A structured (20-byte) or extended (32-byte) reply chunk header; `offset` is used by the
/// extended form only.
pub fn chunk_header(
    framing: Framing,
    flags: u16,
    kind: u16,
    cookie: u64,
    offset: u64,
    len: u64,
    out: &mut Vec<u8>,
) {
    match framing {
        Framing::Extended => {
            out.extend_from_slice(&EXT_REPLY_MAGIC.to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
            out.extend_from_slice(&kind.to_be_bytes());
            out.extend_from_slice(&cookie.to_be_bytes());
            out.extend_from_slice(&offset.to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
        }
        _ => {
            out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
            out.extend_from_slice(&kind.to_be_bytes());
            out.extend_from_slice(&cookie.to_be_bytes());
            out.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }
}

/// The reply to a request without data: simple with simple framing, else one chunk (NONE on
/// success, ERROR otherwise), flagged DONE.
pub fn reply_no_data(framing: Framing, cookie: u64, offset: u64, error: u32, out: &mut Vec<u8>) {
    if framing == Framing::Simple {
        out.extend_from_slice(&simple_reply(cookie, error));
        return;
    }
    if error == 0 {
        chunk_header(
            framing,
            chunk::FLAG_DONE,
            chunk::NONE,
            cookie,
            offset,
            0,
            out,
        );
    } else {
        chunk_header(
            framing,
            chunk::FLAG_DONE,
            chunk::ERROR,
            cookie,
            offset,
            6,
            out,
        );
        out.extend_from_slice(&error.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
    }
}

/// The header of a successful read's reply; the data follows it.
pub fn read_reply_header(framing: Framing, cookie: u64, offset: u64, len: u64, out: &mut Vec<u8>) {
    match framing {
        Framing::Simple => out.extend_from_slice(&simple_reply(cookie, 0)),
        _ => {
            chunk_header(
                framing,
                chunk::FLAG_DONE,
                chunk::OFFSET_DATA,
                cookie,
                offset,
                len + 8,
                out,
            );
            out.extend_from_slice(&offset.to_be_bytes());
        }
    }
}

/// `NBD_STATE_HOLE` and `NBD_STATE_ZERO`, the `base:allocation` flags of an extent.
pub mod state {
    pub const HOLE: u32 = 1 << 0;
    pub const ZERO: u32 = 1 << 1;
}

/// A BLOCK_STATUS reply for `base:allocation`: `extents` as (bytes, `state` flags), in
/// order from the request's offset. Compact replies carry 32-bit lengths: a longer extent
/// is cut into pieces of whole 512-byte sectors.
pub fn block_status_reply(
    framing: Framing,
    cookie: u64,
    offset: u64,
    extents: &[(u64, u32)],
    out: &mut Vec<u8>,
) {
    if framing == Framing::Extended {
        chunk_header(
            framing,
            chunk::FLAG_DONE,
            chunk::BLOCK_STATUS_EXT,
            cookie,
            offset,
            8 + 16 * extents.len() as u64,
            out,
        );
        out.extend_from_slice(&BASE_ALLOCATION_ID.to_be_bytes());
        out.extend_from_slice(&(extents.len() as u32).to_be_bytes());
        for &(len, flags) in extents {
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&u64::from(flags).to_be_bytes());
        }
    } else {
        const MAX: u64 = u32::MAX as u64 & !511;
        let pieces: Vec<(u32, u32)> = extents
            .iter()
            .flat_map(|&(len, flags)| {
                let n = len.div_ceil(MAX).max(1);
                (0..n).map(move |k| ((len - k * MAX).min(MAX) as u32, flags))
            })
            .collect();
        chunk_header(
            framing,
            chunk::FLAG_DONE,
            chunk::BLOCK_STATUS,
            cookie,
            offset,
            4 + 8 * pieces.len() as u64,
            out,
        );
        out.extend_from_slice(&BASE_ALLOCATION_ID.to_be_bytes());
        for (len, flags) in pieces {
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
        }
    }
}

pub fn parse_request(b: &[u8; 28]) -> Result<Request, ProtoError> {
    let magic = u32::from_be_bytes(b[..4].try_into().expect("4"));
    if magic != REQUEST_MAGIC {
        return Err(ProtoError::RequestMagic(magic));
    }
    Ok(Request {
        flags: u16::from_be_bytes([b[4], b[5]]),
        kind: u16::from_be_bytes([b[6], b[7]]),
        cookie: u64::from_be_bytes(b[8..16].try_into().expect("8")),
        offset: u64::from_be_bytes(b[16..24].try_into().expect("8")),
        length: u32::from_be_bytes(b[24..28].try_into().expect("4")) as u64,
    })
}

/// A simple reply header (the read data, if any, follows it).
pub fn simple_reply(cookie: u64, error: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// Encodes a request (for clients and tests).
pub fn encode_request(r: &Request) -> [u8; 28] {
    let mut b = [0u8; 28];
    b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&r.flags.to_be_bytes());
    b[6..8].copy_from_slice(&r.kind.to_be_bytes());
    b[8..16].copy_from_slice(&r.cookie.to_be_bytes());
    b[16..24].copy_from_slice(&r.offset.to_be_bytes());
    b[24..28].copy_from_slice(&(r.length as u32).to_be_bytes());
    b
}

/// Encodes an extended request (for clients and tests).
pub fn encode_ext_request(r: &Request) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[..4].copy_from_slice(&EXT_REQUEST_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&r.flags.to_be_bytes());
    b[6..8].copy_from_slice(&r.kind.to_be_bytes());
    b[8..16].copy_from_slice(&r.cookie.to_be_bytes());
    b[16..24].copy_from_slice(&r.offset.to_be_bytes());
    b[24..32].copy_from_slice(&r.length.to_be_bytes());
    b
}
