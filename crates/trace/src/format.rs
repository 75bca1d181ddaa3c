//! The blktrace record: `struct blk_io_trace` (version 7, 48 bytes) and `blk_io_trace2`
//! (version 8, 64 bytes), each followed by `pdu_len` bytes of payload, in the byte order of
//! the host that traced. Both versions and both byte orders are read and written; the
//! default for writing is version 7 in this host's order, the one every blkparse reads
//! (blkparse before 1.3 refuses version 8).

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
    /// A zone write plug held a bio (version 8 traces).
    pub const ZONE_PLUG: u32 = 18;
    /// A zone write plug released its bios (version 8 traces).
    pub const ZONE_UNPLUG: u32 = 19;
    /// Set in the action when the payload starts with an 8-byte cgroup id.
    pub const CGROUP: u32 = 1 << 8;
}

/// `BLK_TC_*`: the category bits. The first 16 sit in the action's bits 16..31 (both
/// versions); the zone and write-zeroes categories exist only in version 8, in bits 32..38.
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
    pub const ZONE_APPEND: u32 = 1 << 16;
    pub const ZONE_RESET: u32 = 1 << 17;
    pub const ZONE_RESET_ALL: u32 = 1 << 18;
    pub const ZONE_FINISH: u32 = 1 << 19;
    pub const ZONE_OPEN: u32 = 1 << 20;
    pub const ZONE_CLOSE: u32 = 1 << 21;
    pub const WRITE_ZEROES: u32 = 1 << 22;
    /// Shifts one of the first 16 categories into place (`BLK_TC_ACT`).
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

/// Byte order of a record, detected from its magic when reading.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    /// This host's.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
}

/// How records are laid out in a file: the version (7 or 8) and the byte order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Encoding {
    pub version: u8,
    pub order: ByteOrder,
}

impl Encoding {
    /// Version 7 in this host's byte order: what blktrace writes and every blkparse reads.
    pub const NATIVE: Encoding = Encoding {
        version: VERSION_1,
        order: ByteOrder::NATIVE,
    };
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
    /// `__BLK_TA_*` in the low 16 bits (the cgroup bit stripped into [`Record::cgroup`]),
    /// the first 16 `BLK_TC_*` categories above.
    pub action: u32,
    /// The action's bits 32..63, version 8 only: the zone and write-zeroes categories
    /// ([`tc::ZONE_APPEND`] and up, shifted down by 16). Version 7 has no room for them and
    /// drops them when writing.
    pub action_high: u32,
    pub pid: u32,
    /// `dev_t` in the kernel's encoding: major << 20 | minor.
    pub device: u32,
    pub cpu: u32,
    /// A completion's error: 0, or an errno (see [`Record::errno`]).
    pub error: u16,
    /// The cgroup id the kernel put in front of the payload (`__BLK_TA_CGROUP`), if any.
    pub cgroup: Option<u64>,
    /// The payload, without the cgroup id.
    pub pdu: Vec<u8>,
}

impl Record {
    /// A record with every field zero: the base for `Record { ..Record::empty() }`.
    pub const fn empty() -> Record {
        Record {
            sequence: 0,
            time: 0,
            sector: 0,
            bytes: 0,
            action: 0,
            action_high: 0,
            pid: 0,
            device: 0,
            cpu: 0,
            error: 0,
            cgroup: None,
            pdu: Vec::new(),
        }
    }

    /// A `BLK_TN_PROCESS` notify record naming `pid` (blkparse prints the name after
    /// every event of that pid).
    pub fn process_name(pid: u32, name: &str, device: u32, cpu: u32, time: u64) -> Record {
        let mut pdu = name.as_bytes().to_vec();
        pdu.push(0);
        Record {
            time,
            action: tn::PROCESS | tc::act(tc::NOTIFY),
            pid,
            device,
            cpu,
            pdu,
            ..Record::empty()
        }
    }

    /// The `__BLK_TA_*` part.
    pub fn what(&self) -> u32 {
        self.action & 0xffff
    }
    /// True for a category bit (`tc::*`), in either half of the action.
    pub fn has(&self, category: u32) -> bool {
        if category <= tc::FUA {
            self.action & tc::act(category) != 0
        } else {
            self.action_high & (category >> 16) != 0
        }
    }
    pub fn is_notify(&self) -> bool {
        self.has(tc::NOTIFY)
    }
    /// The one-letter action code (`?` for one blkparse has none for, `N` for a notify
    /// record): the key of per-action counts.
    pub fn letter(&self) -> char {
        match self.what() {
            _ if self.is_notify() => 'N',
            ta::UNPLUG_TIMER => 'T',
            what => action_code(what).chars().next().unwrap_or('?'),
        }
    }
    /// The action code blkparse prints (`UT` for a timer unplug, `ZP`/`ZU` for the zone
    /// plug actions, `N` for a notify record).
    pub fn code(&self) -> &'static str {
        if self.is_notify() {
            return "N";
        }
        action_code(self.what())
    }
    /// The errno of a failed completion, positive: the kernel stores it negated in the
    /// 16-bit field (blkparse prints -EIO as 65531), mqblk stores it positive.
    pub fn errno(&self) -> u16 {
        if self.error > i16::MAX as u16 {
            self.error.wrapping_neg()
        } else {
            self.error
        }
    }
    /// The line blkparse prints for this record by default (`None` for a notify record),
    /// given the name of the record's process and the time blkparse counts from (its first
    /// event's; see [`crate::TraceSet::blkparse_lines`]).
    pub fn blkparse_line(&self, comm: Option<&str>, genesis: u64) -> Option<String> {
        if self.is_notify() {
            return None;
        }
        let (major, minor) = dev_parts(self.device);
        let comm = comm.unwrap_or("");
        let n = self.bytes >> 9;
        let time = self.time.saturating_sub(genesis);
        let body = match self.what() {
            ta::COMPLETE | ta::REQUEUE if self.bytes > 0 => {
                format!("{} + {n} [{}]", self.sector, self.error)
            }
            ta::COMPLETE | ta::REQUEUE => format!("{} [{}]", self.sector, self.error),
            ta::PLUG => format!("[{comm}]"),
            ta::UNPLUG_IO | ta::UNPLUG_TIMER => {
                format!("[{comm}] {}", self.pdu_u64().unwrap_or(0))
            }
            ta::SPLIT => format!("{} / {} [{comm}]", self.sector, self.pdu_u64().unwrap_or(0)),
            ta::REMAP => {
                let (from, _, from_sector) = self.remap().unwrap_or((0, 0, 0));
                let (fma, fmi) = dev_parts(from);
                format!("{} + {n} <- ({fma},{fmi}) {from_sector}", self.sector)
            }
            _ if self.bytes > 0 => format!("{} + {n} [{comm}]", self.sector),
            _ => format!("[{comm}]"),
        };
        Some(format!(
            "{major:3},{minor:<3} {:2} {:8} {:5}.{:09} {:5} {:>2} {:>3} {body}",
            self.cpu,
            self.sequence,
            time / 1_000_000_000,
            time % 1_000_000_000,
            self.pid,
            self.code(),
            self.rwbs(),
        ))
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

    /// The process name a `BLK_TN_PROCESS` record carries.
    pub fn comm(&self) -> Option<String> {
        if !self.is_notify() || self.what() != tn::PROCESS {
            return None;
        }
        let end = self
            .pdu
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.pdu.len());
        Some(String::from_utf8_lossy(&self.pdu[..end]).into_owned())
    }

    /// The payload as one big-endian 64-bit number: the new sector of a split (`X`), the
    /// requests an unplug (`U`, `T`) let go.
    pub fn pdu_u64(&self) -> Option<u64> {
        let b: [u8; 8] = self.pdu.get(..8)?.try_into().ok()?;
        Some(u64::from_be_bytes(b))
    }

    /// A remap's (`A`) payload, always big-endian: (device it came from, device it went
    /// to, sector on the device it came from).
    pub fn remap(&self) -> Option<(u32, u32, u64)> {
        let p = self.pdu.get(..16)?;
        let u32_at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let sector: [u8; 8] = p[8..16].try_into().ok()?;
        Some((u32_at(0), u32_at(4), u64::from_be_bytes(sector)))
    }

    /// Encodes as a version-7 record in this host's byte order.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_as(Encoding::NATIVE, out);
    }

    /// Encodes in the given version and byte order.
    pub fn encode_as(&self, enc: Encoding, out: &mut Vec<u8>) {
        let mut w = Writer {
            out,
            order: enc.order,
        };
        let v2 = enc.version == VERSION_2;
        let (action, id_len) = match self.cgroup {
            Some(_) => (self.action | ta::CGROUP, 8),
            None => (self.action, 0),
        };
        // pdu_len is 16 bits: a longer payload is cut.
        let data = &self.pdu[..self.pdu.len().min(u16::MAX as usize - id_len)];
        w.u32(MAGIC | if v2 { VERSION_2 } else { VERSION_1 } as u32);
        w.u32(self.sequence);
        w.u64(self.time);
        w.u64(self.sector);
        w.u32(self.bytes);
        if v2 {
            w.u32(self.pid);
            w.u64(u64::from(self.action_high) << 32 | u64::from(action));
        } else {
            w.u32(action);
            w.u32(self.pid);
        }
        w.u32(self.device);
        w.u32(self.cpu);
        w.u16(self.error);
        w.u16((data.len() + id_len) as u16);
        if v2 {
            w.out.extend_from_slice(&[0; V2_LEN - 52]);
        }
        if let Some(id) = self.cgroup {
            w.u64(id);
        }
        w.out.extend_from_slice(data);
    }
}

/// blkparse's code for a `__BLK_TA_*` value (`?` for one it has none for).
pub fn action_code(what: u32) -> &'static str {
    match what {
        ta::QUEUE => "Q",
        ta::BACKMERGE => "M",
        ta::FRONTMERGE => "F",
        ta::GETRQ => "G",
        ta::SLEEPRQ => "S",
        ta::REQUEUE => "R",
        ta::ISSUE => "D",
        ta::COMPLETE => "C",
        ta::PLUG => "P",
        ta::UNPLUG_IO => "U",
        ta::UNPLUG_TIMER => "UT",
        ta::INSERT => "I",
        ta::SPLIT => "X",
        ta::BOUNCE => "B",
        ta::REMAP => "A",
        ta::ZONE_PLUG => "ZP",
        ta::ZONE_UNPLUG => "ZU",
        _ => "?",
    }
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
    order: ByteOrder,
}

impl Writer<'_> {
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&match self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
    }
    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&match self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
    }
    fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&match self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
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
    #[error("{file}: offset {offset}: cgroup flag set but the payload has {pdu_len} bytes (needs 8 for the id)")]
    Cgroup {
        file: String,
        offset: u64,
        pdu_len: u16,
    },
}

/// Reads fixed-width fields from a slice whose length was checked first.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    order: ByteOrder,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut v = [0u8; N];
        v.copy_from_slice(&self.b[self.at..self.at + N]);
        self.at += N;
        v
    }
    fn u16(&mut self) -> u16 {
        let v = self.take();
        match self.order {
            ByteOrder::Little => u16::from_le_bytes(v),
            ByteOrder::Big => u16::from_be_bytes(v),
        }
    }
    fn u32(&mut self) -> u32 {
        let v = self.take();
        match self.order {
            ByteOrder::Little => u32::from_le_bytes(v),
            ByteOrder::Big => u32::from_be_bytes(v),
        }
    }
    fn u64(&mut self) -> u64 {
        let v = self.take();
        match self.order {
            ByteOrder::Little => u64::from_le_bytes(v),
            ByteOrder::Big => u64::from_be_bytes(v),
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

/// The encoding of the record at the start of `b`, from its magic (`None`: not a record).
pub fn detect(b: &[u8]) -> Option<Encoding> {
    let raw: [u8; 4] = b.get(..4)?.try_into().ok()?;
    let (order, magic) = if u32::from_le_bytes(raw) & 0xffff_ff00 == MAGIC {
        (ByteOrder::Little, u32::from_le_bytes(raw))
    } else if u32::from_be_bytes(raw) & 0xffff_ff00 == MAGIC {
        (ByteOrder::Big, u32::from_be_bytes(raw))
    } else {
        return None;
    };
    Some(Encoding {
        version: (magic & 0xff) as u8,
        order,
    })
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
    let Some(enc) = detect(b) else {
        return Err(FormatError::Magic {
            file: file.to_string(),
            offset,
            magic: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        });
    };
    let len = match enc.version {
        VERSION_1 => V1_LEN,
        VERSION_2 => V2_LEN,
        version => {
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
    let mut r = Reader {
        b,
        at: 4,
        order: enc.order,
    };
    let sequence = r.u32();
    let time = r.u64();
    let sector = r.u64();
    let bytes = r.u32();
    let (action, action_high, pid);
    if enc.version == VERSION_1 {
        action = r.u32();
        action_high = 0;
        pid = r.u32();
    } else {
        pid = r.u32();
        let a = r.u64();
        action = a as u32;
        action_high = (a >> 32) as u32;
    }
    let device = r.u32();
    let cpu = r.u32();
    let error = r.u16();
    let pdu_len = r.u16();
    let total = len + pdu_len as usize;
    if b.len() < total {
        return Err(truncated(total));
    }
    let mut pdu = &b[len..total];
    let mut cgroup = None;
    let mut action = action;
    if action & ta::CGROUP != 0 {
        if pdu.len() < 8 {
            return Err(FormatError::Cgroup {
                file: file.to_string(),
                offset,
                pdu_len,
            });
        }
        let mut id = Reader {
            b: pdu,
            at: 0,
            order: enc.order,
        };
        cgroup = Some(id.u64());
        action &= !ta::CGROUP;
        pdu = &pdu[8..];
    }
    Ok((
        Record {
            sequence,
            time,
            sector,
            bytes,
            action,
            action_high,
            pid,
            device,
            cpu,
            error,
            cgroup,
            pdu: pdu.to_vec(),
        },
        total,
    ))
}

/// `MKDEV` as the kernel encodes `dev_t` in records.
pub const fn mkdev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}

/// `(major, minor)` of a record's device.
pub const fn dev_parts(device: u32) -> (u32, u32) {
    (device >> 20, device & 0xfffff)
}
