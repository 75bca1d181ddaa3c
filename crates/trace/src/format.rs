//! The blktrace record: `struct blk_io_trace` (version 7, 48 bytes) and `blk_io_trace2`
//! (version 8, 64 bytes), each followed by `pdu_len` bytes of payload, in the byte order of
//! the host that traced. Written here in this host's order, version 7, which every blkparse
//! reads.

use thiserror::Error;

pub const MAGIC: u32 = 0x6561_7400;
pub const VERSION_1: u8 = 0x07;
pub const VERSION_2: u8 = 0x08;
const V1_LEN: usize = 48;
const V2_LEN: usize = 64;

/// `__BLK_TA_*`: what happened.
pub mod ta {
    pub const QUEUE: u32 = 1;
    pub const BACKMERGE: u32 = 2;
    pub const FRONTMERGE: u32 = 3;
    pub const GETRQ: u32 = 4;
    pub const SLEEPRQ: u32 = 5;
    pub const REQUEUE: u32 = 6;
    pub const ISSUE: u32 = 7;
    pub const COMPLETE: u32 = 8;
    pub const PLUG: u32 = 9;
    pub const UNPLUG_IO: u32 = 10;
    pub const UNPLUG_TIMER: u32 = 11;
    pub const INSERT: u32 = 12;
    pub const SPLIT: u32 = 13;
    pub const BOUNCE: u32 = 14;
    pub const REMAP: u32 = 15;
    pub const ABORT: u32 = 16;
    pub const DRV_DATA: u32 = 17;
    /// Set in the action when the payload starts with an 8-byte cgroup id.
    pub const CGROUP: u32 = 1 << 8;
}

/// `BLK_TC_*`: the category bits, in the action's high 16 bits.
pub mod tc {
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const FLUSH: u32 = 1 << 2;
    pub const SYNC: u32 = 1 << 3;
    pub const QUEUE: u32 = 1 << 4;
    pub const REQUEUE: u32 = 1 << 5;
    pub const ISSUE: u32 = 1 << 6;
    pub const COMPLETE: u32 = 1 << 7;
    pub const FS: u32 = 1 << 8;
    pub const PC: u32 = 1 << 9;
    pub const NOTIFY: u32 = 1 << 10;
    pub const AHEAD: u32 = 1 << 11;
    pub const META: u32 = 1 << 12;
    pub const DISCARD: u32 = 1 << 13;
    pub const DRV_DATA: u32 = 1 << 14;
    pub const FUA: u32 = 1 << 15;
    /// Shifts a category into place (`BLK_TC_ACT`).
    pub const fn act(c: u32) -> u32 {
        c << 16
    }
}

/// `BLK_TN_*`: notify records (category NOTIFY).
pub mod tn {
    /// The payload is the process name of `pid`.
    pub const PROCESS: u32 = 0;
    /// The payload is the wall-clock time of the trace's start.
    pub const TIMESTAMP: u32 = 1;
    /// The payload is a text message.
    pub const MESSAGE: u32 = 2;
}

/// One record, decoded into this host's byte order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub sequence: u32,
    /// Nanoseconds from the start of the trace.
    pub time: u64,
    /// 512-byte sectors.
    pub sector: u64,
    pub bytes: u32,
    /// `__BLK_TA_*` in the low 16 bits (the cgroup bit already stripped), `BLK_TC_*` above.
    pub action: u32,
    pub pid: u32,
    /// `dev_t` in the kernel's encoding: major << 20 | minor.
    pub device: u32,
    pub cpu: u32,
    pub error: u16,
    /// The payload, with a cgroup id prefix already removed.
    pub pdu: Vec<u8>,
}

impl Record {
    /// The `__BLK_TA_*` part.
    pub fn what(&self) -> u32 {
        self.action & 0xffff
    }
    /// True for a category bit (`tc::*`).
    pub fn has(&self, category: u32) -> bool {
        self.action & tc::act(category) != 0
    }
    pub fn is_notify(&self) -> bool {
        self.has(tc::NOTIFY)
    }
    /// blkparse's action letter, or `?` for one it has none for.
    pub fn letter(&self) -> char {
        if self.is_notify() {
            return 'N';
        }
        match self.what() {
            ta::QUEUE => 'Q',
            ta::BACKMERGE => 'M',
            ta::FRONTMERGE => 'F',
            ta::GETRQ => 'G',
            ta::SLEEPRQ => 'S',
            ta::REQUEUE => 'R',
            ta::ISSUE => 'D',
            ta::COMPLETE => 'C',
            ta::PLUG => 'P',
            ta::UNPLUG_IO => 'U',
            ta::UNPLUG_TIMER => 'T',
            ta::INSERT => 'I',
            ta::SPLIT => 'X',
            ta::BOUNCE => 'B',
            ta::REMAP => 'A',
            _ => '?',
        }
    }
    /// blkparse's RWBS string.
    pub fn rwbs(&self) -> String {
        let mut s = String::new();
        if self.has(tc::FLUSH) {
            s.push('F');
        }
        if self.has(tc::DISCARD) {
            s.push('D');
        } else if self.has(tc::WRITE) {
            s.push('W');
        } else if self.bytes > 0 {
            s.push('R');
        } else {
            s.push('N');
        }
        if self.has(tc::FUA) {
            s.push('F');
        }
        if self.has(tc::AHEAD) {
            s.push('A');
        }
        if self.has(tc::SYNC) {
            s.push('S');
        }
        if self.has(tc::META) {
            s.push('M');
        }
        s
    }

    /// Encodes as a version-7 record in this host's byte order.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(MAGIC | VERSION_1 as u32).to_ne_bytes());
        out.extend_from_slice(&self.sequence.to_ne_bytes());
        out.extend_from_slice(&self.time.to_ne_bytes());
        out.extend_from_slice(&self.sector.to_ne_bytes());
        out.extend_from_slice(&self.bytes.to_ne_bytes());
        out.extend_from_slice(&self.action.to_ne_bytes());
        out.extend_from_slice(&self.pid.to_ne_bytes());
        out.extend_from_slice(&self.device.to_ne_bytes());
        out.extend_from_slice(&self.cpu.to_ne_bytes());
        out.extend_from_slice(&self.error.to_ne_bytes());
        out.extend_from_slice(&(self.pdu.len() as u16).to_ne_bytes());
        out.extend_from_slice(&self.pdu);
    }
}

/// A trace file that cannot be read, with where.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("{file}: offset {offset}: truncated record ({have} of {need} bytes)")]
    Truncated {
        file: String,
        offset: u64,
        have: usize,
        need: usize,
    },
    #[error("{file}: offset {offset}: bad magic {magic:#010x} (not a blktrace record)")]
    Magic {
        file: String,
        offset: u64,
        magic: u32,
    },
    #[error(
        "{file}: offset {offset}: unsupported blktrace version {version:#04x} (7 and 8 are known)"
    )]
    Version {
        file: String,
        offset: u64,
        version: u8,
    },
}

/// Byte order of a record, from its magic.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    order: Order,
}

impl Reader<'_> {
    fn u16(&mut self) -> u16 {
        let v: [u8; 2] = self.b[self.at..self.at + 2].try_into().expect("2 bytes");
        self.at += 2;
        match self.order {
            Order::Little => u16::from_le_bytes(v),
            Order::Big => u16::from_be_bytes(v),
        }
    }
    fn u32(&mut self) -> u32 {
        let v: [u8; 4] = self.b[self.at..self.at + 4].try_into().expect("4 bytes");
        self.at += 4;
        match self.order {
            Order::Little => u32::from_le_bytes(v),
            Order::Big => u32::from_be_bytes(v),
        }
    }
    fn u64(&mut self) -> u64 {
        let v: [u8; 8] = self.b[self.at..self.at + 8].try_into().expect("8 bytes");
        self.at += 8;
        match self.order {
            Order::Little => u64::from_le_bytes(v),
            Order::Big => u64::from_be_bytes(v),
        }
    }
}

/// Decodes every record of one per-CPU file's bytes. `file` names it in errors.
pub fn decode_all(file: &str, bytes: &[u8]) -> Result<Vec<Record>, FormatError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let (rec, len) = decode_one(file, &bytes[at..], at as u64)?;
        out.push(rec);
        at += len;
    }
    Ok(out)
}

/// Decodes the record at the start of `b` (found at `offset` in `file`); returns it and the
/// bytes it took, payload included.
pub fn decode_one(file: &str, b: &[u8], offset: u64) -> Result<(Record, usize), FormatError> {
    let truncated = |need: usize| FormatError::Truncated {
        file: file.to_string(),
        offset,
        have: b.len(),
        need,
    };
    if b.len() < 4 {
        return Err(truncated(V1_LEN));
    }
    let raw = [b[0], b[1], b[2], b[3]];
    let (order, magic) = if u32::from_le_bytes(raw) & 0xffff_ff00 == MAGIC {
        (Order::Little, u32::from_le_bytes(raw))
    } else if u32::from_be_bytes(raw) & 0xffff_ff00 == MAGIC {
        (Order::Big, u32::from_be_bytes(raw))
    } else {
        return Err(FormatError::Magic {
            file: file.to_string(),
            offset,
            magic: u32::from_le_bytes(raw),
        });
    };
    let version = (magic & 0xff) as u8;
    let len = match version {
        VERSION_1 => V1_LEN,
        VERSION_2 => V2_LEN,
        _ => {
            return Err(FormatError::Version {
                file: file.to_string(),
                offset,
                version,
            })
        }
    };
    if b.len() < len {
        return Err(truncated(len));
    }
    let mut r = Reader { b, at: 4, order };
    let sequence = r.u32();
    let time = r.u64();
    let sector = r.u64();
    let bytes = r.u32();
    let (action, pid, device, cpu, error, pdu_len);
    if version == VERSION_1 {
        action = r.u32();
        pid = r.u32();
        device = r.u32();
        cpu = r.u32();
        error = r.u16();
        pdu_len = r.u16();
    } else {
        pid = r.u32();
        // Bits 32 and up carry zone categories we do not use.
        action = r.u64() as u32;
        device = r.u32();
        cpu = r.u32();
        error = r.u16();
        pdu_len = r.u16();
    }
    let total = len + pdu_len as usize;
    if b.len() < total {
        return Err(truncated(total));
    }
    let mut pdu = &b[len..total];
    let mut action = action;
    if action & ta::CGROUP != 0 {
        action &= !ta::CGROUP;
        pdu = pdu.get(8..).unwrap_or(&[]);
    }
    Ok((
        Record {
            sequence,
            time,
            sector,
            bytes,
            action,
            pid,
            device,
            cpu,
            error,
            pdu: pdu.to_vec(),
        },
        total,
    ))
}

/// `MKDEV` as the kernel encodes `dev_t` in records.
pub const fn mkdev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}
