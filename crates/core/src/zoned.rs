//! Zoned block devices: zones as `include/uapi/linux/blkzoned.h` describes them, the queue
//! limits a zoned device declares, and [`ZonedDev`], the zone state machine of the device
//! itself, as null_blk's `drivers/block/null_blk/zoned.c` keeps it (the ZBC/ZNS rules:
//! writes only at a zone's write pointer, implicit and explicit open, close, finish,
//! reset, and the open and active zone limits).
//!
//! The host side, zone write plugging (`block/blk-zoned.c`), lives with the queue in
//! `queue/zoned.rs`. The device side is here so that every driver and device model that
//! offers zones keeps them by the same rules: the null driver, and the simulator's models.

use crate::status::BlkStatus;

/// `enum blk_zone_type`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ZoneType {
    /// Written anywhere, like a regular device (`BLK_ZONE_TYPE_CONVENTIONAL`).
    Conventional,
    /// Written only at its write pointer (`BLK_ZONE_TYPE_SEQWRITE_REQ`).
    SeqWriteReq,
}

/// `enum blk_zone_cond`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ZoneCond {
    /// A conventional zone: no write pointer (`BLK_ZONE_COND_NOT_WP`).
    NotWp,
    /// Nothing written (`BLK_ZONE_COND_EMPTY`).
    Empty,
    /// Opened by a write (`BLK_ZONE_COND_IMP_OPEN`).
    ImpOpen,
    /// Opened by a zone open command (`BLK_ZONE_COND_EXP_OPEN`).
    ExpOpen,
    /// Partly written, not open (`BLK_ZONE_COND_CLOSED`).
    Closed,
    /// Read only (`BLK_ZONE_COND_READONLY`).
    ReadOnly,
    /// Written to its capacity, or finished (`BLK_ZONE_COND_FULL`).
    Full,
    /// Neither read nor written (`BLK_ZONE_COND_OFFLINE`).
    Offline,
}

/// One zone as a report gives it (`struct blk_zone`), in 512-byte sectors.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    /// First sector.
    pub start: u64,
    /// Sectors from `start` to the next zone.
    pub len: u64,
    /// Sectors that may be written (`capacity`, at most `len`).
    pub capacity: u64,
    /// The write pointer: where the next write must start (`start + len` for a
    /// conventional zone, as null_blk reports it; `u64::MAX` where there is none).
    pub wp: u64,
    /// Its type.
    pub ty: ZoneType,
    /// Its condition.
    pub cond: ZoneCond,
}

/// What a zoned device declares to the block layer (`BLK_FEAT_ZONED` with `chunk_sectors`,
/// `max_open_zones`, `max_active_zones`, `max_hw_zone_append_sectors`), and what
/// `blk_revalidate_disk_zones` learns from its first report (`nr_zones`, the zone capacity,
/// which zones are conventional).
///
/// Where we differ: the kernel keeps a bitmap of conventional zones from the report; here
/// they are the first `nr_conv_zones`, as null_blk lays them out and host-managed SMR disks
/// do (their conventional zones come first).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ZonedLimits {
    /// Sectors per zone, a power of two (`chunk_sectors`; sysfs `chunk_sectors`).
    pub zone_sectors: u32,
    /// Zones on the device (sysfs `nr_zones`).
    pub nr_zones: u32,
    /// The leading zones that are conventional.
    pub nr_conv_zones: u32,
    /// Writable sectors of each sequential zone but the last (`disk->zone_capacity`).
    pub zone_capacity: u32,
    /// Writable sectors of the last zone (`disk->last_zone_capacity`).
    pub last_zone_capacity: u32,
    /// Zones that may be open at once; 0: no limit (sysfs `max_open_zones`).
    pub max_open_zones: u32,
    /// Zones that may be open or closed at once; 0: no limit (sysfs `max_active_zones`).
    pub max_active_zones: u32,
    /// Largest native zone append in sectors; 0: the device has none and the block layer
    /// emulates it with writes (`max_hw_zone_append_sectors`, `queue_emulates_zone_append`).
    pub max_zone_append_sectors: u32,
}

impl ZonedLimits {
    /// The zone `sector` lies in (`disk_zone_no`).
    #[inline]
    pub fn zone_no(&self, sector: u64) -> u32 {
        (sector >> self.zone_sectors.trailing_zeros()) as u32
    }
    /// The first sector of zone `zno`.
    #[inline]
    pub fn zone_start(&self, zno: u32) -> u64 {
        (zno as u64) << self.zone_sectors.trailing_zeros()
    }
    /// Sectors from the start of its zone to `sector` (`bdev_offset_from_zone_start`).
    #[inline]
    pub fn offset_in_zone(&self, sector: u64) -> u64 {
        sector & (self.zone_sectors as u64 - 1)
    }
    /// Whether zone `zno` must be written sequentially (`bdev_zone_is_seq`).
    #[inline]
    pub fn is_seq(&self, zno: u32) -> bool {
        zno >= self.nr_conv_zones && zno < self.nr_zones
    }
    /// The writable sectors of zone `zno`.
    pub fn capacity_of(&self, zno: u32) -> u64 {
        if zno + 1 < self.nr_zones {
            self.zone_capacity as u64
        } else {
            self.last_zone_capacity as u64
        }
    }
    /// Whether zone append is emulated with regular writes (`queue_emulates_zone_append`).
    pub fn emulates_zone_append(&self) -> bool {
        self.max_zone_append_sectors == 0
    }
}

/// A zoned device's configuration, with null_blk's parameter names and defaults (sizes in
/// sectors here; null_blk takes MB).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ZonedDevConfig {
    /// `zone_size`: sectors per zone, a power of two (null_blk: 256 MB).
    pub zone_sectors: u64,
    /// `zone_capacity`: writable sectors per zone; 0 means the zone size.
    pub zone_capacity: u64,
    /// `zone_nr_conv`: conventional zones at the start of the device (default 0).
    pub nr_conv: u32,
    /// `zone_max_open` (default 0: no limit).
    pub max_open: u32,
    /// `zone_max_active` (default 0: no limit).
    pub max_active: u32,
    /// `zone_append_max_sectors`: 0 makes the block layer emulate zone append (null_blk's
    /// default is `INT_MAX`, trimmed to the zone capacity).
    pub append_max_sectors: u32,
}

impl Default for ZonedDevConfig {
    fn default() -> ZonedDevConfig {
        ZonedDevConfig {
            zone_sectors: (256 << 20) >> 9,
            zone_capacity: 0,
            nr_conv: 0,
            max_open: 0,
            max_active: 0,
            append_max_sectors: i32::MAX as u32,
        }
    }
}

/// Why a zoned device refused a command, beyond the status it answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ZoneFault {
    /// A write to a sequential zone that did not start at its write pointer, or would pass
    /// its capacity. A block layer that plugs zone writes never sends one for a user who
    /// writes at the write pointer: the simulator counts it as a broken invariant.
    Unaligned {
        /// The zone.
        zone: u32,
        /// Where the write started.
        sector: u64,
        /// Its length.
        nr_sectors: u64,
        /// The zone's write pointer then.
        wp: u64,
    },
    /// Another refusal (a full or offline zone, no open or active zone left, zone append
    /// to a conventional zone, ...): the status says which.
    Other(BlkStatus),
}

impl ZoneFault {
    /// The status the command ends with.
    pub fn status(self) -> BlkStatus {
        match self {
            ZoneFault::Unaligned { .. } => BlkStatus::IoErr,
            ZoneFault::Other(s) => s,
        }
    }
}

impl std::fmt::Display for ZoneFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZoneFault::Unaligned {
                zone,
                sector,
                nr_sectors,
                wp,
            } => write!(
                f,
                "write of {nr_sectors} sectors at {sector} to sequential zone {zone} whose write pointer is at {wp}"
            ),
            ZoneFault::Other(s) => write!(f, "{s}"),
        }
    }
}

/// A zone operation the device executes (the zone management `REQ_OP_ZONE_*`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ZoneMgmt {
    /// `REQ_OP_ZONE_RESET`.
    Reset,
    /// `REQ_OP_ZONE_RESET_ALL`.
    ResetAll,
    /// `REQ_OP_ZONE_OPEN`.
    Open,
    /// `REQ_OP_ZONE_CLOSE`.
    Close,
    /// `REQ_OP_ZONE_FINISH`.
    Finish,
}

/// A zoned device's zones and its open/active zone accounting (null_blk's `nullb_device`
/// zone fields, with the functions of `zoned.c` as methods).
#[derive(Clone, Debug)]
pub struct ZonedDev {
    zones: Vec<Zone>,
    cfg: ZonedDevConfig,
    nr_imp_open: u32,
    nr_exp_open: u32,
    nr_closed: u32,
    /// Where `null_close_imp_open_zone` starts looking.
    imp_close_zone_no: u32,
    need_res_mgmt: bool,
}

/// A configuration `ZonedDev::new` refused, in null_blk's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZonedConfigError {
    /// `zone_size` is not a power of two.
    #[error("zone_size must be a power of two (got {0} sectors)")]
    NotPowerOfTwo(u64),
    /// `zone_size` exceeds the capacity.
    #[error("zone_size ({zone} sectors) is larger than the device ({capacity} sectors)")]
    LargerThanDevice {
        /// The zone size.
        zone: u64,
        /// The capacity.
        capacity: u64,
    },
    /// `zone_capacity` exceeds `zone_size`.
    #[error("zone_capacity ({cap} sectors) is larger than zone_size ({zone} sectors)")]
    CapacityAboveSize {
        /// The zone capacity.
        cap: u64,
        /// The zone size.
        zone: u64,
    },
    /// A smaller last zone together with a zone capacity below the zone size.
    #[error("a smaller last zone is not allowed with zone_capacity smaller than zone_size")]
    SmallLastZone,
}

impl ZonedDev {
    /// The zones of a device of `capacity` sectors (`null_init_zoned_dev`): conventional
    /// zones first, then empty sequential ones; limits at or above the number of sequential
    /// zones are dropped, and `max_open` is brought down to `max_active`.
    pub fn new(capacity: u64, mut cfg: ZonedDevConfig) -> Result<ZonedDev, ZonedConfigError> {
        let zs = cfg.zone_sectors;
        if zs == 0 || !zs.is_power_of_two() {
            return Err(ZonedConfigError::NotPowerOfTwo(zs));
        }
        if zs > capacity {
            return Err(ZonedConfigError::LargerThanDevice { zone: zs, capacity });
        }
        if cfg.zone_capacity == 0 {
            cfg.zone_capacity = zs;
        }
        if cfg.zone_capacity > zs {
            return Err(ZonedConfigError::CapacityAboveSize {
                cap: cfg.zone_capacity,
                zone: zs,
            });
        }
        if cfg.zone_capacity != zs && capacity & (zs - 1) != 0 {
            return Err(ZonedConfigError::SmallLastZone);
        }
        let nr_zones = capacity.div_ceil(zs) as u32;
        cfg.nr_conv = cfg.nr_conv.min(nr_zones - 1);
        cfg.append_max_sectors = (cfg.append_max_sectors as u64).min(cfg.zone_capacity) as u32;
        let nr_seq = nr_zones - cfg.nr_conv;
        if cfg.max_active >= nr_seq {
            cfg.max_active = 0;
        }
        if cfg.max_active != 0 && cfg.max_open > cfg.max_active {
            cfg.max_open = cfg.max_active;
        } else if cfg.max_open >= nr_seq {
            cfg.max_open = 0;
        }
        let zones = (0..nr_zones)
            .map(|z| {
                let start = z as u64 * zs;
                let len = zs.min(capacity - start);
                if z < cfg.nr_conv {
                    Zone {
                        start,
                        len,
                        capacity: len,
                        wp: start + len,
                        ty: ZoneType::Conventional,
                        cond: ZoneCond::NotWp,
                    }
                } else {
                    Zone {
                        start,
                        len,
                        capacity: len.min(cfg.zone_capacity),
                        wp: start,
                        ty: ZoneType::SeqWriteReq,
                        cond: ZoneCond::Empty,
                    }
                }
            })
            .collect();
        Ok(ZonedDev {
            zones,
            need_res_mgmt: cfg.max_active != 0 || cfg.max_open != 0,
            imp_close_zone_no: cfg.nr_conv,
            cfg,
            nr_imp_open: 0,
            nr_exp_open: 0,
            nr_closed: 0,
        })
    }

    /// What the device declares and a first report tells the block layer.
    pub fn limits(&self) -> ZonedLimits {
        let last = self.zones.last().expect("a zoned device has zones");
        ZonedLimits {
            zone_sectors: self.cfg.zone_sectors as u32,
            nr_zones: self.zones.len() as u32,
            nr_conv_zones: self.cfg.nr_conv,
            zone_capacity: self.cfg.zone_capacity as u32,
            last_zone_capacity: last.capacity as u32,
            max_open_zones: self.cfg.max_open,
            max_active_zones: self.cfg.max_active,
            max_zone_append_sectors: self.cfg.append_max_sectors,
        }
    }

    fn zone_no(&self, sector: u64) -> usize {
        (sector >> self.cfg.zone_sectors.trailing_zeros()) as usize
    }

    /// Up to `nr` zones from the one holding `sector` (`null_report_zones`).
    pub fn report(&self, sector: u64, nr: usize) -> Vec<Zone> {
        let first = self.zone_no(sector);
        self.zones.iter().skip(first).take(nr).copied().collect()
    }

    /// The zone holding `sector`.
    pub fn zone(&self, sector: u64) -> Option<&Zone> {
        self.zones.get(self.zone_no(sector))
    }

    /// Zones open and closed now: (implicitly open, explicitly open, closed).
    pub fn open_counts(&self) -> (u32, u32, u32) {
        (self.nr_imp_open, self.nr_exp_open, self.nr_closed)
    }

    /// `null_close_imp_open_zone`: closes one implicitly open zone, round robin.
    fn close_imp_open_zone(&mut self) {
        let (conv, n) = (self.cfg.nr_conv as usize, self.zones.len());
        let mut zno = self.imp_close_zone_no as usize;
        if zno >= n {
            zno = conv;
        }
        for _ in conv..n {
            let i = zno;
            zno += 1;
            if zno >= n {
                zno = conv;
            }
            let z = &mut self.zones[i];
            if z.cond == ZoneCond::ImpOpen {
                self.nr_imp_open -= 1;
                if z.wp == z.start {
                    z.cond = ZoneCond::Empty;
                } else {
                    z.cond = ZoneCond::Closed;
                    self.nr_closed += 1;
                }
                self.imp_close_zone_no = zno as u32;
                return;
            }
        }
    }

    fn check_active(&self) -> Result<(), BlkStatus> {
        if self.cfg.max_active == 0
            || self.nr_exp_open + self.nr_imp_open + self.nr_closed < self.cfg.max_active
        {
            Ok(())
        } else {
            Err(BlkStatus::ZoneActiveResource)
        }
    }

    fn check_open(&mut self) -> Result<(), BlkStatus> {
        if self.cfg.max_open == 0 || self.nr_exp_open + self.nr_imp_open < self.cfg.max_open {
            return Ok(());
        }
        if self.nr_imp_open > 0 && self.check_active().is_ok() {
            self.close_imp_open_zone();
            return Ok(());
        }
        Err(BlkStatus::ZoneOpenResource)
    }

    /// `null_check_zone_resources`, for an empty or closed zone about to open.
    fn check_resources(&mut self, cond: ZoneCond) -> Result<(), BlkStatus> {
        match cond {
            ZoneCond::Empty => {
                self.check_active()?;
                self.check_open()
            }
            ZoneCond::Closed => self.check_open(),
            _ => Err(BlkStatus::IoErr),
        }
    }

    /// A write of `nr_sectors` at `sector`, or a zone append to the zone holding `sector`
    /// (`null_zone_write`): the sector written is returned. A regular write to a sequential
    /// zone must start at the write pointer and end within the capacity.
    pub fn write(&mut self, sector: u64, nr_sectors: u64, append: bool) -> Result<u64, ZoneFault> {
        let zno = self.zone_no(sector);
        let Some(z) = self.zones.get(zno) else {
            return Err(ZoneFault::Other(BlkStatus::IoErr));
        };
        if z.ty == ZoneType::Conventional {
            return if append {
                Err(ZoneFault::Other(BlkStatus::IoErr))
            } else {
                Ok(sector)
            };
        }
        let mut sector = sector;
        if append {
            if self.cfg.append_max_sectors == 0 || z.wp == u64::MAX {
                return Err(ZoneFault::Other(BlkStatus::IoErr));
            }
            sector = z.wp;
        }
        if sector != z.wp || z.wp + nr_sectors > z.start + z.capacity {
            return Err(ZoneFault::Unaligned {
                zone: zno as u32,
                sector,
                nr_sectors,
                wp: z.wp,
            });
        }
        let cond = z.cond;
        if matches!(cond, ZoneCond::Closed | ZoneCond::Empty) {
            if self.need_res_mgmt {
                self.check_resources(cond).map_err(ZoneFault::Other)?;
                if cond == ZoneCond::Closed {
                    self.nr_closed -= 1;
                }
                self.nr_imp_open += 1;
            }
            self.zones[zno].cond = ZoneCond::ImpOpen;
        }
        let z = &mut self.zones[zno];
        z.wp += nr_sectors;
        if z.wp == z.start + z.capacity {
            if self.need_res_mgmt {
                match z.cond {
                    ZoneCond::ExpOpen => self.nr_exp_open -= 1,
                    ZoneCond::ImpOpen => self.nr_imp_open -= 1,
                    _ => {}
                }
            }
            z.cond = ZoneCond::Full;
        }
        Ok(sector)
    }

    /// A zone management command on the zone holding `sector` (`null_zone_mgmt`). Returns
    /// the sectors whose data a reset dropped (to discard from a memory-backed store).
    pub fn mgmt(&mut self, op: ZoneMgmt, sector: u64) -> Result<Vec<(u64, u64)>, BlkStatus> {
        let mut dropped = Vec::new();
        if op == ZoneMgmt::ResetAll {
            for i in self.cfg.nr_conv as usize..self.zones.len() {
                let c = self.zones[i].cond;
                if !matches!(c, ZoneCond::Empty | ZoneCond::ReadOnly | ZoneCond::Offline) {
                    self.reset(i)?;
                    dropped.push((self.zones[i].start, self.zones[i].len));
                }
            }
            return Ok(dropped);
        }
        let zno = self.zone_no(sector);
        let Some(z) = self.zones.get(zno) else {
            return Err(BlkStatus::IoErr);
        };
        if matches!(z.cond, ZoneCond::ReadOnly | ZoneCond::Offline) {
            return Err(BlkStatus::IoErr);
        }
        match op {
            ZoneMgmt::Reset => {
                self.reset(zno)?;
                dropped.push((self.zones[zno].start, self.zones[zno].len));
            }
            ZoneMgmt::Open => self.open(zno)?,
            ZoneMgmt::Close => self.close(zno)?,
            ZoneMgmt::Finish => self.finish(zno)?,
            ZoneMgmt::ResetAll => unreachable!("handled above"),
        }
        Ok(dropped)
    }

    fn open(&mut self, zno: usize) -> Result<(), BlkStatus> {
        let z = self.zones[zno];
        if z.ty == ZoneType::Conventional {
            return Err(BlkStatus::IoErr);
        }
        match z.cond {
            ZoneCond::ExpOpen => return Ok(()),
            ZoneCond::Empty | ZoneCond::ImpOpen | ZoneCond::Closed => {}
            _ => return Err(BlkStatus::IoErr),
        }
        if self.need_res_mgmt {
            match z.cond {
                ZoneCond::Empty => self.check_resources(z.cond)?,
                ZoneCond::ImpOpen => self.nr_imp_open -= 1,
                ZoneCond::Closed => {
                    self.check_resources(z.cond)?;
                    self.nr_closed -= 1;
                }
                _ => {}
            }
            self.nr_exp_open += 1;
        }
        self.zones[zno].cond = ZoneCond::ExpOpen;
        Ok(())
    }

    fn close(&mut self, zno: usize) -> Result<(), BlkStatus> {
        let z = self.zones[zno];
        if z.ty == ZoneType::Conventional {
            return Err(BlkStatus::IoErr);
        }
        match z.cond {
            ZoneCond::Closed => return Ok(()),
            ZoneCond::ImpOpen | ZoneCond::ExpOpen => {}
            _ => return Err(BlkStatus::IoErr),
        }
        if self.need_res_mgmt {
            match z.cond {
                ZoneCond::ImpOpen => self.nr_imp_open -= 1,
                ZoneCond::ExpOpen => self.nr_exp_open -= 1,
                _ => {}
            }
            if z.wp > z.start {
                self.nr_closed += 1;
            }
        }
        self.zones[zno].cond = if z.wp == z.start {
            ZoneCond::Empty
        } else {
            ZoneCond::Closed
        };
        Ok(())
    }

    fn finish(&mut self, zno: usize) -> Result<(), BlkStatus> {
        let z = self.zones[zno];
        if z.ty == ZoneType::Conventional {
            return Err(BlkStatus::IoErr);
        }
        if self.need_res_mgmt {
            match z.cond {
                ZoneCond::Full => return Ok(()),
                ZoneCond::Empty => self.check_resources(z.cond)?,
                ZoneCond::ImpOpen => self.nr_imp_open -= 1,
                ZoneCond::ExpOpen => self.nr_exp_open -= 1,
                ZoneCond::Closed => {
                    self.check_resources(z.cond)?;
                    self.nr_closed -= 1;
                }
                _ => return Err(BlkStatus::IoErr),
            }
        }
        let z = &mut self.zones[zno];
        z.cond = ZoneCond::Full;
        z.wp = z.start + z.len;
        Ok(())
    }

    fn reset(&mut self, zno: usize) -> Result<(), BlkStatus> {
        let z = self.zones[zno];
        if z.ty == ZoneType::Conventional {
            return Err(BlkStatus::IoErr);
        }
        if self.need_res_mgmt {
            match z.cond {
                ZoneCond::ImpOpen => self.nr_imp_open -= 1,
                ZoneCond::ExpOpen => self.nr_exp_open -= 1,
                ZoneCond::Closed => self.nr_closed -= 1,
                ZoneCond::Empty | ZoneCond::Full => {}
                _ => return Err(BlkStatus::IoErr),
            }
        }
        let z = &mut self.zones[zno];
        z.cond = ZoneCond::Empty;
        z.wp = z.start;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(cfg: ZonedDevConfig) -> ZonedDev {
        // 8 zones of 64 sectors.
        ZonedDev::new(
            512,
            ZonedDevConfig {
                zone_sectors: 64,
                ..cfg
            },
        )
        .unwrap()
    }

    #[test]
    fn writes_only_at_the_write_pointer_and_fill_to_capacity() {
        let mut d = dev(ZonedDevConfig {
            zone_capacity: 48,
            nr_conv: 1,
            ..Default::default()
        });
        // Conventional zone 0: anywhere.
        assert_eq!(d.write(40, 8, false), Ok(40));
        assert_eq!(d.write(0, 8, true), Err(ZoneFault::Other(BlkStatus::IoErr)));
        // Zone 1 starts at 64.
        assert!(matches!(
            d.write(72, 8, false),
            Err(ZoneFault::Unaligned {
                zone: 1,
                wp: 64,
                ..
            })
        ));
        assert_eq!(d.write(64, 8, false), Ok(64));
        assert_eq!(d.zone(64).unwrap().cond, ZoneCond::ImpOpen);
        assert_eq!(
            d.write(64, 8, true),
            Ok(72),
            "append lands at the write pointer"
        );
        // Past the capacity (48) fails; up to it fills the zone.
        assert!(d.write(80, 40, false).is_err());
        assert_eq!(d.write(80, 32, false), Ok(80));
        assert_eq!(d.zone(64).unwrap().cond, ZoneCond::Full);
        d.mgmt(ZoneMgmt::Reset, 64).unwrap();
        assert_eq!(d.zone(64).unwrap().wp, 64);
        assert_eq!(d.zone(64).unwrap().cond, ZoneCond::Empty);
        assert_eq!(d.mgmt(ZoneMgmt::Reset, 0), Err(BlkStatus::IoErr));
    }

    #[test]
    fn open_limit_closes_an_implicitly_open_zone_and_active_limit_refuses() {
        let mut d = dev(ZonedDevConfig {
            max_open: 2,
            max_active: 3,
            ..Default::default()
        });
        d.write(0, 8, false).unwrap();
        d.write(64, 8, false).unwrap();
        // A third zone: zone 0 (the first implicitly open one) is closed to make room.
        d.write(128, 8, false).unwrap();
        assert_eq!(d.zone(0).unwrap().cond, ZoneCond::Closed);
        assert_eq!(d.open_counts(), (2, 0, 1));
        // Three active: a fourth zone is refused.
        assert_eq!(
            d.write(192, 8, false),
            Err(ZoneFault::Other(BlkStatus::ZoneActiveResource))
        );
        // Explicitly open both open zones: no implicitly open zone is left to close.
        d.mgmt(ZoneMgmt::Open, 64).unwrap();
        d.mgmt(ZoneMgmt::Open, 128).unwrap();
        assert_eq!(
            d.write(8, 8, false),
            Err(ZoneFault::Other(BlkStatus::ZoneOpenResource))
        );
        d.mgmt(ZoneMgmt::Finish, 64).unwrap();
        assert_eq!(d.write(8, 8, false), Ok(8));
        d.mgmt(ZoneMgmt::ResetAll, 0).unwrap();
        assert_eq!(d.open_counts(), (0, 0, 0));
    }

    #[test]
    fn refuses_what_null_blk_refuses() {
        let e = |cap, cfg| ZonedDev::new(cap, cfg).unwrap_err();
        let base = ZonedDevConfig {
            zone_sectors: 64,
            ..Default::default()
        };
        assert!(matches!(
            e(
                512,
                ZonedDevConfig {
                    zone_sectors: 48,
                    ..base
                }
            ),
            ZonedConfigError::NotPowerOfTwo(48)
        ));
        assert!(matches!(
            e(32, base),
            ZonedConfigError::LargerThanDevice { .. }
        ));
        assert_eq!(
            e(
                500,
                ZonedDevConfig {
                    zone_capacity: 32,
                    ..base
                }
            ),
            ZonedConfigError::SmallLastZone
        );
        // Limits at or above the sequential zone count are dropped.
        let d = ZonedDev::new(
            512,
            ZonedDevConfig {
                max_open: 8,
                ..base
            },
        )
        .unwrap();
        assert_eq!(d.limits().max_open_zones, 0);
    }
}
