//! The virtio-blk device's side of the protocol, as pure functions over bytes: the feature
//! bits offered, the configuration space, and what one request asks for (VIRTIO 1.2, 5.2
//! "Block Device"). Nothing here touches guest memory or a queue; [`crate::backend`] moves
//! the bytes.
//!
//! Where the specification leaves a choice the device makes it as QEMU's vhost-user-blk
//! export does (`block/export/virtio-blk-handler.c`, read for this: `virtio_blk_process_req`,
//! `virtio_blk_sect_range_ok`, `virtio_blk_discard_write_zeroes`), so a guest sees the same
//! device from either host: a request outside the capacity or not starting on a logical
//! block is IOERR; a DISCARD or WRITE_ZEROES range longer than the limit or outside the
//! device is IOERR, checked before its flags (an unknown flag, or UNMAP on a DISCARD, is
//! UNSUPP); writes to a read-only device are IOERR; the barrier bit of the type is ignored.
//!
//! Where we differ, and why:
//! - QEMU only asks a READ or WRITE's length to be whole 512-byte sectors and lets its block
//!   layer refuse a partial logical block; we refuse it here, with the same IOERR.
//! - QEMU takes one DISCARD/WRITE_ZEROES range per request (`max_discard_seg` 1, more is
//!   UNSUPP); we offer and take [`MAX_RANGES`], which lets the guest merge discards.
//! - GET_ID: QEMU copies the serial and its NUL (at most 20 bytes); we pad it with zeroes to
//!   20 bytes: the same string to a guest, which reads up to the first NUL.
//! - The used length: QEMU reports every device-writable byte; we report the bytes written
//!   (data and status). Linux's driver does not read it for block requests.
//! - A chain without a header or a status byte: QEMU fails the request without a status
//!   (`-EINVAL`); we answer IOERR where a status byte exists and return the chain empty
//!   otherwise, so the guest gets it back either way.

use virtio_bindings::virtio_blk as vb;

/// The request header every request starts with (`struct virtio_blk_outhdr`).
pub const HEADER_BYTES: u64 = 16;
/// One DISCARD or WRITE_ZEROES range (`struct virtio_blk_discard_write_zeroes`).
pub const RANGE_BYTES: usize = 16;
/// Ranges one DISCARD or WRITE_ZEROES request may carry (`max_discard_seg`,
/// `max_write_zeroes_seg`).
pub const MAX_RANGES: u32 = 32;
/// The most sectors one DISCARD or WRITE_ZEROES range may cover (`max_discard_sectors`):
/// 1 GiB, split into bios of the queue's `max_sectors` on the way down.
pub const MAX_RANGE_SECTORS: u32 = 1 << 21;
/// The largest READ or WRITE served; a bigger one fails with IOERR instead of making the
/// server allocate what a guest asks. Linux guests send at most `max_sectors_kb` (1280 KiB by
/// default, `BLK_DEF_MAX_SECTORS_CAP`).
pub const MAX_DATA_BYTES: u64 = 32 << 20;

pub const S_OK: u8 = vb::VIRTIO_BLK_S_OK as u8;
pub const S_IOERR: u8 = vb::VIRTIO_BLK_S_IOERR as u8;
pub const S_UNSUPP: u8 = vb::VIRTIO_BLK_S_UNSUPP as u8;
pub const S_ZONE_INVALID_CMD: u8 = vb::VIRTIO_BLK_S_ZONE_INVALID_CMD as u8;
pub const S_ZONE_OPEN_RESOURCE: u8 = vb::VIRTIO_BLK_S_ZONE_OPEN_RESOURCE as u8;
pub const S_ZONE_ACTIVE_RESOURCE: u8 = vb::VIRTIO_BLK_S_ZONE_ACTIVE_RESOURCE as u8;
/// A zone report's header (`struct virtio_blk_zone_report` without its descriptors), and
/// each descriptor (`struct virtio_blk_zone_descriptor`).
pub const ZONE_REPORT_HEADER: usize = 64;
pub const ZONE_DESCRIPTOR: usize = 64;
/// A zone append's device-writable part: the sector it was written at, then the status.
pub const APPEND_IN_HDR: u64 = 9;

/// `VIRTIO_F_VERSION_1`: the device is a modern (1.0+) one.
const F_VERSION_1: u32 = 32;
/// `VIRTIO_RING_F_INDIRECT_DESC`.
const F_INDIRECT_DESC: u32 = 28;
/// `VIRTIO_RING_F_EVENT_IDX`.
const F_EVENT_IDX: u32 = 29;

/// What the device is, as the guest will see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Capacity in 512-byte sectors (virtio's unit, whatever the block size).
    pub sectors: u64,
    /// `blk_size`: the logical block size in bytes.
    pub block_size: u32,
    pub num_queues: u16,
    /// Descriptors per virtqueue (the largest the guest may choose).
    pub queue_size: u16,
    pub read_only: bool,
    /// A host-managed zoned device (`VIRTIO_BLK_F_ZONED`, virtio 1.2).
    pub zoned: Option<ZonedGeometry>,
}

/// What a zoned device tells the guest (`struct virtio_blk_zoned_characteristics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZonedGeometry {
    /// Sectors per zone (a power of two: Linux refuses others).
    pub zone_sectors: u32,
    /// 0: no limit.
    pub max_open_zones: u32,
    /// 0: no limit.
    pub max_active_zones: u32,
    /// The largest zone append in sectors (non-zero: Linux refuses a device without).
    pub max_append_sectors: u32,
    /// The write granularity in bytes (the logical block size).
    pub write_granularity: u32,
}

/// The device's feature bits (virtio's and virtio-blk's; the vhost-user protocol bit is the
/// backend's to add).
pub fn features(g: &Geometry) -> u64 {
    let mut bits = [
        F_VERSION_1,
        F_INDIRECT_DESC,
        F_EVENT_IDX,
        vb::VIRTIO_BLK_F_SEG_MAX,
        vb::VIRTIO_BLK_F_BLK_SIZE,
        vb::VIRTIO_BLK_F_FLUSH,
        vb::VIRTIO_BLK_F_MQ,
        vb::VIRTIO_BLK_F_DISCARD,
        vb::VIRTIO_BLK_F_WRITE_ZEROES,
    ]
    .iter()
    .fold(0u64, |a, &b| a | 1 << b);
    if g.read_only {
        bits |= 1 << vb::VIRTIO_BLK_F_RO;
    }
    if g.zoned.is_some() {
        // Zoned, without discard, as QEMU's virtio-blk offers a host-managed device
        // (`virtio_blk_device_realize`; Linux ignores discard on one). Where we differ:
        // QEMU keeps write-zeroes; we drop it, since our ranges (up to `MAX_RANGES` per
        // request, split into bios) would reach a sequential zone off its write pointer.
        bits |= 1 << vb::VIRTIO_BLK_F_ZONED;
        bits &= !(1 << vb::VIRTIO_BLK_F_DISCARD | 1 << vb::VIRTIO_BLK_F_WRITE_ZEROES);
    }
    bits
}

/// `struct virtio_blk_config` as the guest reads it, little-endian, up to and including
/// `write_zeroes_may_unmap` and its padding (60 bytes), and for a zoned device on to the end
/// of `zoned` (96 bytes; the secure-erase fields between are zero, not offered).
pub fn config_space(g: &Geometry) -> Vec<u8> {
    let mut c = vec![0u8; if g.zoned.is_some() { 96 } else { 60 }];
    let put = |c: &mut Vec<u8>, at: usize, v: &[u8]| c[at..at + v.len()].copy_from_slice(v);
    // Not offered: size_max (8, any segment size), geometry (16), topology (24) and
    // writeback (32, only with CONFIG_WCE).
    put(&mut c, 0, &g.sectors.to_le_bytes()); // capacity
                                              // seg_max: `queue_size - 2`, the header and the status taking two descriptors (QEMU's
                                              // virtio-blk with seg-max-adjust).
    put(
        &mut c,
        12,
        &(u32::from(g.queue_size).max(3) - 2).to_le_bytes(),
    );
    put(&mut c, 20, &g.block_size.to_le_bytes()); // blk_size
    put(&mut c, 34, &g.num_queues.to_le_bytes()); // num_queues
    let lbs_sectors = (g.block_size / 512).max(1);
    put(&mut c, 36, &MAX_RANGE_SECTORS.to_le_bytes()); // max_discard_sectors
    put(&mut c, 40, &MAX_RANGES.to_le_bytes()); // max_discard_seg
    put(&mut c, 44, &lbs_sectors.to_le_bytes()); // discard_sector_alignment
    put(&mut c, 48, &MAX_RANGE_SECTORS.to_le_bytes()); // max_write_zeroes_sectors
    put(&mut c, 52, &MAX_RANGES.to_le_bytes()); // max_write_zeroes_seg
    c[56] = 1; // write_zeroes_may_unmap
    if let Some(z) = g.zoned {
        put(&mut c, 72, &z.zone_sectors.to_le_bytes());
        put(&mut c, 76, &z.max_open_zones.to_le_bytes());
        put(&mut c, 80, &z.max_active_zones.to_le_bytes());
        put(&mut c, 84, &z.max_append_sectors.to_le_bytes());
        put(&mut c, 88, &z.write_granularity.to_le_bytes());
        c[92] = vb::VIRTIO_BLK_Z_HM as u8; // model
    }
    c
}

/// `len` bytes of the configuration space from `offset`; past its end reads as zeroes.
pub fn config_read(space: &[u8], offset: u32, len: u32) -> Vec<u8> {
    (offset as usize..offset as usize + len as usize)
        .map(|i| space.get(i).copied().unwrap_or(0))
        .collect()
}

/// What one request asks the block layer for, decided from its header and the sizes of its
/// device-readable and device-writable parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Read `len` bytes from `sector` into the writable part.
    Read {
        sector: u64,
        len: u32,
    },
    /// Write the `len` bytes after the header to `sector`.
    Write {
        sector: u64,
        len: u32,
    },
    Flush,
    /// Write the device's serial into the writable part.
    GetId,
    /// DISCARD (`zeroes` false) or WRITE_ZEROES: the ranges follow the header
    /// ([`parse_ranges`]).
    Ranges {
        zeroes: bool,
        count: u32,
    },
    /// A zone append of the `len` bytes after the header to the zone starting at `sector`;
    /// the sector written goes before the status ([`APPEND_IN_HDR`]).
    ZoneAppend {
        sector: u64,
        len: u32,
    },
    /// Report at most `nr` zones from the one holding `sector` (as many descriptors as the
    /// writable part holds after the report's header, [`zone_report`]).
    ZoneReport {
        sector: u64,
        nr: usize,
    },
    /// Open, close, finish or reset the zone starting at `sector`, or reset every zone
    /// (`ReqOp::ZoneResetAll`, `sector` 0).
    ZoneMgmt {
        op: mqblk_core::ReqOp,
        sector: u64,
    },
    /// Nothing to do but answer with this status.
    Done(u8),
}

/// Decides a request. `header` is its first 16 bytes; `readable` and `writable` are the byte
/// counts of its two parts (the writable part ends in the status byte, counted here).
pub fn plan(g: &Geometry, header: &[u8; 16], readable: u64, writable: u64) -> Plan {
    // Legacy drivers may set the barrier bit; QEMU ignores it, as do we.
    let kind =
        u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) & !vb::VIRTIO_BLK_T_BARRIER;
    let sector = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    let data_in = writable.saturating_sub(1);
    let data_out = readable.saturating_sub(HEADER_BYTES);
    let range = |len: u64| -> Result<u32, u8> {
        if len > MAX_DATA_BYTES || !range_ok(g, sector, len) {
            return Err(S_IOERR);
        }
        Ok(len as u32)
    };
    match kind {
        vb::VIRTIO_BLK_T_IN => match range(data_in) {
            Ok(len) => Plan::Read { sector, len },
            Err(s) => Plan::Done(s),
        },
        vb::VIRTIO_BLK_T_OUT if g.read_only => Plan::Done(S_IOERR),
        vb::VIRTIO_BLK_T_OUT => match range(data_out) {
            Ok(len) => Plan::Write { sector, len },
            Err(s) => Plan::Done(s),
        },
        vb::VIRTIO_BLK_T_FLUSH => Plan::Flush,
        vb::VIRTIO_BLK_T_GET_ID => Plan::GetId,
        vb::VIRTIO_BLK_T_DISCARD | vb::VIRTIO_BLK_T_WRITE_ZEROES => {
            let count = data_out / RANGE_BYTES as u64;
            if g.read_only || count == 0 || data_out % RANGE_BYTES as u64 != 0 {
                Plan::Done(S_IOERR)
            } else if count > u64::from(MAX_RANGES) {
                Plan::Done(S_UNSUPP)
            } else {
                Plan::Ranges {
                    zeroes: kind == vb::VIRTIO_BLK_T_WRITE_ZEROES,
                    count: count as u32,
                }
            }
        }
        vb::VIRTIO_BLK_T_ZONE_APPEND
        | vb::VIRTIO_BLK_T_ZONE_REPORT
        | vb::VIRTIO_BLK_T_ZONE_OPEN
        | vb::VIRTIO_BLK_T_ZONE_CLOSE
        | vb::VIRTIO_BLK_T_ZONE_FINISH
        | vb::VIRTIO_BLK_T_ZONE_RESET
        | vb::VIRTIO_BLK_T_ZONE_RESET_ALL => zone_plan(g, kind, sector, data_out, writable),
        _ => Plan::Done(S_UNSUPP),
    }
}

/// A zone request, checked as QEMU's virtio-blk checks one (`check_zoned_request`,
/// `virtio_blk_handle_zone_*`): UNSUPP on a device that is not zoned; ZONE_INVALID_CMD for
/// a zone named by a sector that is not a zone's start or lies past the capacity, and for a
/// zone append longer than `max_append_sectors`. What the zone's state allows is the block
/// layer's and the device's to answer (`crate::backend`'s statuses). Where we differ: QEMU
/// lets a report start at the capacity (and answers no zone) and leaves a management
/// command's alignment to its block layer, whose refusal is the same ZONE_INVALID_CMD.
fn zone_plan(g: &Geometry, kind: u32, sector: u64, data_out: u64, writable: u64) -> Plan {
    use mqblk_core::ReqOp;
    let Some(z) = g.zoned else {
        return Plan::Done(S_UNSUPP);
    };
    let zone_start = sector % u64::from(z.zone_sectors.max(1)) == 0 && sector < g.sectors;
    let mgmt = |op: ReqOp| {
        if g.read_only {
            Plan::Done(S_IOERR)
        } else if !zone_start {
            Plan::Done(S_ZONE_INVALID_CMD)
        } else {
            Plan::ZoneMgmt { op, sector }
        }
    };
    match kind {
        vb::VIRTIO_BLK_T_ZONE_REPORT => {
            if sector >= g.sectors {
                Plan::Done(S_ZONE_INVALID_CMD)
            } else if writable < ZONE_REPORT_HEADER as u64 + 1 {
                Plan::Done(S_IOERR)
            } else {
                let room = (writable - 1) as usize - ZONE_REPORT_HEADER;
                Plan::ZoneReport {
                    sector,
                    nr: room / ZONE_DESCRIPTOR,
                }
            }
        }
        vb::VIRTIO_BLK_T_ZONE_APPEND => {
            let lbs = u64::from(g.block_size.max(512));
            if g.read_only || writable != APPEND_IN_HDR || data_out == 0 || data_out % lbs != 0 {
                Plan::Done(S_IOERR)
            } else if !zone_start || data_out > u64::from(z.max_append_sectors) * 512 {
                Plan::Done(S_ZONE_INVALID_CMD)
            } else {
                Plan::ZoneAppend {
                    sector,
                    len: data_out as u32,
                }
            }
        }
        vb::VIRTIO_BLK_T_ZONE_RESET_ALL if g.read_only => Plan::Done(S_IOERR),
        vb::VIRTIO_BLK_T_ZONE_RESET_ALL => Plan::ZoneMgmt {
            op: ReqOp::ZoneResetAll,
            sector: 0,
        },
        vb::VIRTIO_BLK_T_ZONE_OPEN => mgmt(ReqOp::ZoneOpen),
        vb::VIRTIO_BLK_T_ZONE_CLOSE => mgmt(ReqOp::ZoneClose),
        vb::VIRTIO_BLK_T_ZONE_FINISH => mgmt(ReqOp::ZoneFinish),
        _ => mgmt(ReqOp::ZoneReset),
    }
}

/// A zone report for the guest (`virtio_blk_zone_report_complete`'s layout): `nr_zones`,
/// then a descriptor per zone of `zones` (the device's from the zone asked for on, as many
/// as the request's [`Plan::ZoneReport`] `nr` allows).
pub fn zone_report(zones: &[mqblk_core::zoned::Zone]) -> Vec<u8> {
    use mqblk_core::zoned::{ZoneCond, ZoneType};
    let mut out = vec![0u8; ZONE_REPORT_HEADER + zones.len() * ZONE_DESCRIPTOR];
    out[0..8].copy_from_slice(&(zones.len() as u64).to_le_bytes());
    for (z, d) in zones
        .iter()
        .zip(out[ZONE_REPORT_HEADER..].chunks_exact_mut(ZONE_DESCRIPTOR))
    {
        d[0..8].copy_from_slice(&z.capacity.to_le_bytes());
        d[8..16].copy_from_slice(&z.start.to_le_bytes());
        d[16..24].copy_from_slice(&z.wp.to_le_bytes());
        d[24] = match z.ty {
            ZoneType::Conventional => vb::VIRTIO_BLK_ZT_CONV,
            ZoneType::SeqWriteReq => vb::VIRTIO_BLK_ZT_SWR,
        } as u8;
        d[25] = match z.cond {
            ZoneCond::NotWp => vb::VIRTIO_BLK_ZS_NOT_WP,
            ZoneCond::Empty => vb::VIRTIO_BLK_ZS_EMPTY,
            ZoneCond::ImpOpen => vb::VIRTIO_BLK_ZS_IOPEN,
            ZoneCond::ExpOpen => vb::VIRTIO_BLK_ZS_EOPEN,
            ZoneCond::Closed => vb::VIRTIO_BLK_ZS_CLOSED,
            ZoneCond::ReadOnly => vb::VIRTIO_BLK_ZS_RDONLY,
            ZoneCond::Full => vb::VIRTIO_BLK_ZS_FULL,
            ZoneCond::Offline => vb::VIRTIO_BLK_ZS_OFFLINE,
        } as u8;
    }
    out
}

/// `virtio_blk_sect_range_ok`: whole logical blocks, inside the device.
fn range_ok(g: &Geometry, sector: u64, len: u64) -> bool {
    let lbs = u64::from(g.block_size.max(512));
    len % lbs == 0
        && sector.checked_mul(512).is_some_and(|b| b % lbs == 0)
        && sector
            .checked_add(len / 512)
            .is_some_and(|end| end <= g.sectors)
}

/// One DISCARD or WRITE_ZEROES range: `sectors` from `sector`, `unmap` for WRITE_ZEROES
/// that may deallocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub sector: u64,
    pub sectors: u32,
    pub unmap: bool,
}

/// The ranges of a DISCARD or WRITE_ZEROES request (`bytes` follow the header), each
/// checked in the order of QEMU's `virtio_blk_discard_write_zeroes`: a range longer than the
/// device's limit, past the capacity or not in whole blocks is IOERR; then an unknown flag,
/// or the unmap flag on a DISCARD, is UNSUPP.
pub fn parse_ranges(g: &Geometry, zeroes: bool, bytes: &[u8]) -> Result<Vec<Range>, u8> {
    const UNMAP: u32 = 1;
    let mut out = Vec::with_capacity(bytes.len() / RANGE_BYTES);
    for r in bytes.chunks_exact(RANGE_BYTES) {
        let sector = u64::from_le_bytes(r[0..8].try_into().expect("8 bytes"));
        let sectors = u32::from_le_bytes(r[8..12].try_into().expect("4 bytes"));
        let flags = u32::from_le_bytes(r[12..16].try_into().expect("4 bytes"));
        if sectors > MAX_RANGE_SECTORS || !range_ok(g, sector, u64::from(sectors) * 512) {
            return Err(S_IOERR);
        }
        if flags & !UNMAP != 0 || (!zeroes && flags & UNMAP != 0) {
            return Err(S_UNSUPP);
        }
        out.push(Range {
            sector,
            sectors,
            unmap: flags & UNMAP != 0,
        });
    }
    Ok(out)
}

/// The GET_ID answer: the serial, cut or zero-padded to `VIRTIO_BLK_ID_BYTES` and then to
/// the room the guest gave (`room`, the writable part without the status byte).
pub fn id_bytes(serial: &str, room: u64) -> Vec<u8> {
    let mut id = serial.as_bytes().to_vec();
    id.resize(vb::VIRTIO_BLK_ID_BYTES as usize, 0);
    id.truncate(room.min(u64::from(vb::VIRTIO_BLK_ID_BYTES)) as usize);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            sectors: 2048,
            block_size: 4096,
            num_queues: 2,
            queue_size: 128,
            read_only: false,
            zoned: None,
        }
    }

    fn hdr(kind: u32, sector: u64) -> [u8; 16] {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&sector.to_le_bytes());
        h
    }

    #[test]
    fn config_space_matches_the_kernels_layout() {
        use std::mem::offset_of;
        use vb::virtio_blk_config as C;
        let c = config_space(&geo());
        let at = |off: usize, n: usize| &c[off..off + n];
        assert_eq!(at(offset_of!(C, capacity), 8), &2048u64.to_le_bytes());
        assert_eq!(at(offset_of!(C, seg_max), 4), &126u32.to_le_bytes());
        assert_eq!(at(offset_of!(C, blk_size), 4), &4096u32.to_le_bytes());
        assert_eq!(at(offset_of!(C, num_queues), 2), &2u16.to_le_bytes());
        assert_eq!(at(offset_of!(C, max_discard_seg), 4), &32u32.to_le_bytes());
        assert_eq!(
            at(offset_of!(C, discard_sector_alignment), 4),
            &8u32.to_le_bytes()
        );
        assert_eq!(c[offset_of!(C, write_zeroes_may_unmap)], 1);
        assert_eq!(c.len(), offset_of!(C, max_secure_erase_sectors));
        // Reads past the end are zeroes, not a short answer.
        assert_eq!(config_read(&c, 56, 8), vec![1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn a_zoned_config_space_matches_the_kernels_layout() {
        use std::mem::offset_of;
        use vb::virtio_blk_config as C;
        use vb::virtio_blk_config_virtio_blk_zoned_characteristics as Z;
        let g = Geometry {
            zoned: Some(ZonedGeometry {
                zone_sectors: 2048,
                max_open_zones: 3,
                max_active_zones: 4,
                max_append_sectors: 256,
                write_granularity: 4096,
            }),
            sectors: 8192,
            ..geo()
        };
        let c = config_space(&g);
        assert_eq!(c.len(), std::mem::size_of::<C>());
        let z = offset_of!(C, zoned);
        let at = |off: usize| u32::from_le_bytes(c[z + off..z + off + 4].try_into().unwrap());
        assert_eq!(at(offset_of!(Z, zone_sectors)), 2048);
        assert_eq!(at(offset_of!(Z, max_open_zones)), 3);
        assert_eq!(at(offset_of!(Z, max_active_zones)), 4);
        assert_eq!(at(offset_of!(Z, max_append_sectors)), 256);
        assert_eq!(at(offset_of!(Z, write_granularity)), 4096);
        assert_eq!(c[z + offset_of!(Z, model)], vb::VIRTIO_BLK_Z_HM as u8);
        let f = features(&g);
        assert_ne!(f & 1 << vb::VIRTIO_BLK_F_ZONED, 0);
        assert_eq!(f & 1 << vb::VIRTIO_BLK_F_DISCARD, 0);
        // Zone requests: a zone's start or nothing; UNSUPP on a device without zones.
        let zr =
            |g: &Geometry, kind, sector, out: u64, wr| plan(g, &hdr(kind, sector), 16 + out, wr);
        assert_eq!(
            zr(&g, vb::VIRTIO_BLK_T_ZONE_RESET, 2048, 0, 1),
            Plan::ZoneMgmt {
                op: mqblk_core::ReqOp::ZoneReset,
                sector: 2048
            }
        );
        assert_eq!(
            zr(&g, vb::VIRTIO_BLK_T_ZONE_RESET, 8, 0, 1),
            Plan::Done(S_ZONE_INVALID_CMD)
        );
        assert_eq!(
            zr(&g, vb::VIRTIO_BLK_T_ZONE_APPEND, 0, 4096, 9),
            Plan::ZoneAppend {
                sector: 0,
                len: 4096
            }
        );
        assert_eq!(
            zr(&g, vb::VIRTIO_BLK_T_ZONE_APPEND, 0, 4096, 1),
            Plan::Done(S_IOERR),
            "no room for the sector"
        );
        assert_eq!(
            zr(&g, vb::VIRTIO_BLK_T_ZONE_APPEND, 0, 256 * 512 + 4096, 9),
            Plan::Done(S_ZONE_INVALID_CMD),
            "past max_append_sectors (QEMU's check_zoned_request)"
        );
        assert_eq!(
            zr(&geo(), vb::VIRTIO_BLK_T_ZONE_REPORT, 0, 0, 129),
            Plan::Done(S_UNSUPP)
        );
    }

    #[test]
    fn features_follow_the_device() {
        let f = features(&geo());
        assert_ne!(f & 1 << vb::VIRTIO_BLK_F_MQ, 0);
        assert_ne!(f & 1 << F_VERSION_1, 0);
        assert_eq!(f & 1 << vb::VIRTIO_BLK_F_RO, 0);
        let ro = features(&Geometry {
            read_only: true,
            ..geo()
        });
        assert_ne!(ro & 1 << vb::VIRTIO_BLK_F_RO, 0);
    }

    #[test]
    fn reads_and_writes_are_checked_against_capacity_and_blocks() {
        let g = geo();
        let rd = |sector, len: u64| plan(&g, &hdr(vb::VIRTIO_BLK_T_IN, sector), 16, len + 1);
        assert_eq!(
            rd(8, 4096),
            Plan::Read {
                sector: 8,
                len: 4096
            }
        );
        assert_eq!(
            rd(2040, 4096),
            Plan::Read {
                sector: 2040,
                len: 4096
            }
        );
        assert_eq!(rd(2048, 4096), Plan::Done(S_IOERR), "past the end");
        assert_eq!(rd(1, 4096), Plan::Done(S_IOERR), "not on a block");
        assert_eq!(rd(0, 512), Plan::Done(S_IOERR), "part of a block");
        assert_eq!(rd(u64::MAX, 4096), Plan::Done(S_IOERR), "wraps");
        assert_eq!(rd(0, 64 << 20), Plan::Done(S_IOERR), "too large");
        let wr = plan(&g, &hdr(vb::VIRTIO_BLK_T_OUT, 0), 16 + 8192, 1);
        assert_eq!(
            wr,
            Plan::Write {
                sector: 0,
                len: 8192
            }
        );
        let ro = Geometry {
            read_only: true,
            ..geo()
        };
        assert_eq!(
            plan(&ro, &hdr(vb::VIRTIO_BLK_T_OUT, 0), 16 + 4096, 1),
            Plan::Done(S_IOERR)
        );
        assert_eq!(
            plan(&g, &hdr(vb::VIRTIO_BLK_T_SECURE_ERASE, 0), 32, 1),
            Plan::Done(S_UNSUPP)
        );
        assert_eq!(plan(&g, &hdr(99, 0), 16, 1), Plan::Done(S_UNSUPP));
        // The legacy barrier bit is ignored.
        assert_eq!(
            plan(
                &g,
                &hdr(vb::VIRTIO_BLK_T_FLUSH | vb::VIRTIO_BLK_T_BARRIER, 0),
                16,
                1
            ),
            Plan::Flush
        );
    }

    #[test]
    fn ranges_are_checked_in_qemus_order() {
        let g = geo();
        let range = |sector: u64, n: u32, flags: u32| {
            let mut b = Vec::new();
            b.extend_from_slice(&sector.to_le_bytes());
            b.extend_from_slice(&n.to_le_bytes());
            b.extend_from_slice(&flags.to_le_bytes());
            b
        };
        assert_eq!(
            plan(&g, &hdr(vb::VIRTIO_BLK_T_DISCARD, 0), 16 + 32, 1),
            Plan::Ranges {
                zeroes: false,
                count: 2
            }
        );
        assert_eq!(
            plan(&g, &hdr(vb::VIRTIO_BLK_T_DISCARD, 0), 16 + 20, 1),
            Plan::Done(S_IOERR)
        );
        assert_eq!(
            plan(&g, &hdr(vb::VIRTIO_BLK_T_WRITE_ZEROES, 0), 16 + 16 * 33, 1),
            Plan::Done(S_UNSUPP)
        );
        let ok = parse_ranges(&g, true, &[range(8, 16, 1), range(64, 8, 0)].concat()).unwrap();
        assert_eq!(ok.len(), 2);
        assert!(ok[0].unmap && !ok[1].unmap);
        assert_eq!(parse_ranges(&g, false, &range(8, 16, 1)), Err(S_UNSUPP));
        assert_eq!(parse_ranges(&g, true, &range(8, 16, 2)), Err(S_UNSUPP));
        assert_eq!(parse_ranges(&g, false, &range(2040, 16, 0)), Err(S_IOERR));
        assert_eq!(parse_ranges(&g, false, &range(8, 4, 0)), Err(S_IOERR));
        // QEMU's order: the range is checked before the flags.
        assert_eq!(parse_ranges(&g, false, &range(2040, 16, 1)), Err(S_IOERR));
        assert_eq!(parse_ranges(&g, true, &range(u64::MAX, 8, 2)), Err(S_IOERR));
    }

    #[test]
    fn get_id_fits_the_room_given() {
        assert_eq!(id_bytes("mqblk", 100).len(), 20);
        assert_eq!(&id_bytes("mqblk", 100)[..6], b"mqblk\0");
        assert_eq!(id_bytes("a-very-long-serial-number-here", 20).len(), 20);
        assert_eq!(id_bytes("mqblk", 3), b"mqb");
    }
}
