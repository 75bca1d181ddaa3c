//! Zoned devices: `zns` (a ZNS SSD) and `smr` (a host-managed SMR disk).
//!
//! A [`ZonedModel`] is a device model with zones in front of it: the zones' state machine is
//! the core's [`ZonedDev`] (null_blk's `zoned.c`: writes only at a sequential zone's write
//! pointer, implicit and explicit open, close, finish, reset, the open and active limits),
//! reads and writes that it lets through are timed by the model behind, and zone management
//! commands take what the device's measurements say. A write the zones refuse for not
//! starting at the write pointer is a write the kernel's zone write plugging must never let
//! through: it fails with an I/O error, as a real device fails it, and the simulator ends
//! the run on it ([`DeviceModel::take_zone_violation`]).
//!
//! - `zns`: the model fitted to a Western Digital Ultrastar DC ZN540's published measurements
//!   (`profiles/zn540.toml`), with its zones: 2 GiB zones of which 1077 MiB are writable, 14
//!   open and 14 active at most, and its zone resets and finishes timed by the same source's
//!   measurements (a reset takes 1.6 ms on an empty zone and 16 ms on a full one, a finish
//!   up to 0.9 s on a nearly empty one, which the drive fills).
//! - `smr`: the `hdd` model with 256 MiB zones (the zone size of host-managed SMR disks the
//!   kernel's dm-zoned documentation names), `nr_conv` conventional zones first; its zone
//!   commands change the drive's zone metadata only, one command's overhead (`cmd_us`).
//!
//! Where we differ: zone append is left to the block layer's emulation
//! (`max_zone_append_sectors` 0), though the ZN540 has it natively. Parameters and sources:
//! `crates/models/DEVICES.md`.

use crate::{Cmd, DevCompletion, DeviceModel, DriverCost, ModelError, Params, SimRng};
use mqblk_core::zoned::{Zone, ZoneFault, ZoneMgmt, ZonedDev, ZonedDevConfig};
use mqblk_core::{BlkStatus, Nanos, QueueLimits, ReqOp};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const MIB_SECTORS: u64 = (1 << 20) >> 9;

/// How long a zone command takes, by the written share of the zone's capacity: points
/// `(share, ns)` with straight lines between them.
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneCost {
    pub reset: Vec<(f64, f64)>,
    pub finish: Vec<(f64, f64)>,
    /// An explicit open or close.
    pub open_close_ns: f64,
}

impl ZoneCost {
    fn flat(ns: f64) -> ZoneCost {
        ZoneCost {
            reset: vec![(0.0, ns)],
            finish: vec![(0.0, ns)],
            open_close_ns: ns,
        }
    }
}

/// The value at `x` of the line through `points` (sorted by `x`), held beyond the ends.
fn interpolate(points: &[(f64, f64)], x: f64) -> f64 {
    match points.iter().position(|&(px, _)| px >= x) {
        None => points.last().map_or(0.0, |p| p.1),
        Some(0) => points[0].1,
        Some(i) => {
            let (x0, y0) = points[i - 1];
            let (x1, y1) = points[i];
            y0 + (y1 - y0) * (x - x0) / (x1 - x0).max(f64::MIN_POSITIVE)
        }
    }
}

/// A zoned device: zones in front of a model (see the module's description).
pub struct ZonedModel {
    name: &'static str,
    inner: Box<dyn DeviceModel>,
    zones: ZonedDev,
    cost: ZoneCost,
    cfg: ZonedDevConfig,
    /// Zone commands being served, the first to finish on top (time, order, queue, id),
    /// and how each ends, by its order.
    pending: BinaryHeap<Reverse<(u64, u64, u16, u64)>>,
    ends: std::collections::HashMap<u64, BlkStatus>,
    seq: u64,
    violation: Option<String>,
    resets: u64,
    finishes: u64,
}

impl ZonedModel {
    /// Zones of `cfg` in front of `inner`, named `name`, their commands costing `cost`.
    pub fn new(
        name: &'static str,
        inner: Box<dyn DeviceModel>,
        cfg: ZonedDevConfig,
        cost: ZoneCost,
    ) -> Result<ZonedModel, ModelError> {
        let zones = ZonedDev::new(inner.capacity_sectors(), cfg)
            .map_err(|e| ModelError::Invalid(format!("device {name}: {e}")))?;
        Ok(ZonedModel {
            name,
            inner,
            zones,
            cost,
            cfg,
            pending: BinaryHeap::new(),
            ends: Default::default(),
            seq: 0,
            violation: None,
            resets: 0,
            finishes: 0,
        })
    }

    fn finish_at(&mut self, t: u64, hw: u16, id: u64, status: BlkStatus) {
        self.seq += 1;
        self.pending.push(Reverse((t, self.seq, hw, id)));
        self.ends.insert(self.seq, status);
    }

    /// The written share of the capacity of the zone holding `sector`.
    fn written(&self, sector: u64) -> f64 {
        match self.zones.zone(sector) {
            Some(z) if z.capacity > 0 && z.wp != u64::MAX => {
                (z.wp.saturating_sub(z.start).min(z.capacity)) as f64 / z.capacity as f64
            }
            _ => 0.0,
        }
    }
}

/// The zones of `zone_mb` MB (`zone_cap_mb` writable, 0: all), `nr_conv` conventional ones
/// first, and the open and active limits, from `p`.
fn zone_params(
    p: &mut Params<'_>,
    zone_mb: u64,
    cap_mb: u64,
    nr_conv: u64,
    open: u64,
    active: u64,
) -> Result<ZonedDevConfig, ModelError> {
    Ok(ZonedDevConfig {
        zone_sectors: p.ranged("zone_mb", zone_mb, 1, 1 << 20)? * MIB_SECTORS,
        zone_capacity: p.ranged("zone_cap_mb", cap_mb, 0, 1 << 20)? * MIB_SECTORS,
        nr_conv: p.ranged("nr_conv", nr_conv, 0, 1 << 20)? as u32,
        max_open: p.ranged("max_open", open, 0, 1 << 20)? as u32,
        max_active: p.ranged("max_active", active, 0, 1 << 20)? as u32,
        append_max_sectors: 0,
    })
}

/// `zns`: the ZN540 (see the module's description).
pub fn zns(p: &mut Params<'_>, rng: SimRng) -> Result<ZonedModel, ModelError> {
    let profile =
        crate::profile::Profile::parse("zn540.toml", include_str!("../profiles/zn540.toml"))
            .map_err(|e| ModelError::Invalid(e.to_string()))?;
    let inner = crate::profile::FittedModel::new(&profile, "zn540.toml", rng)?;
    let cfg = zone_params(p, 2048, 1077, 0, 14, 14)?;
    ZonedModel::new("zns", Box::new(inner), cfg, zns_cost())
}

/// The ZN540's zone commands: the medians of the source's resets and finishes of zones
/// written to a share of their capacity (data/custom/zns-a/partial_reset and
/// partial_finish; 903 to 2709 of each).
fn zns_cost() -> ZoneCost {
    const MS: f64 = 1e6;
    ZoneCost {
        reset: vec![
            (0.0, 1.587 * MS),
            (0.0625, 5.110 * MS),
            (0.125, 6.070 * MS),
            (0.25, 7.882 * MS),
            (0.5, 11.324 * MS),
            (1.0, 15.966 * MS),
        ],
        finish: vec![
            (0.0, 0.014 * MS),
            (1e-6, 908.554 * MS),
            (0.0625, 848.378 * MS),
            (0.125, 792.826 * MS),
            (0.25, 681.331 * MS),
            (0.5, 456.834 * MS),
            (1.0, 2.577 * MS),
        ],
        // An empty zone's finish: the command alone.
        open_close_ns: 0.014 * MS,
    }
}

/// `smr`: the `hdd` model with zones (see the module's description).
pub fn smr(p: &mut Params<'_>, rng: SimRng) -> Result<ZonedModel, ModelError> {
    let cfg = zone_params(p, 256, 0, 8, 0, 0)?;
    let hp = crate::hdd::HddParams::from_params(p, "smr", 1, true)?;
    let depth = p.ranged("queue_depth", 32, 1, 4096)? as u32;
    let cmd = hp.cmd_ns as f64;
    let inner = crate::hdd::HddModel::with_params(hp, depth, "smr", rng)?;
    ZonedModel::new("smr", Box::new(inner), cfg, ZoneCost::flat(cmd))
}

impl DeviceModel for ZonedModel {
    fn name(&self) -> &'static str {
        self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.inner.capacity_sectors()
    }
    fn rotational(&self) -> bool {
        self.inner.rotational()
    }
    fn write_cache(&self) -> bool {
        self.inner.write_cache()
    }
    fn fua(&self) -> bool {
        self.inner.fua()
    }
    fn nr_hw_queues(&self) -> u16 {
        self.inner.nr_hw_queues()
    }
    fn queue_depth(&self) -> u32 {
        self.inner.queue_depth()
    }
    fn max_outstanding(&self) -> u32 {
        self.inner.max_outstanding()
    }
    /// The model's limits with the zones': `chunk_sectors` is the zone size, as
    /// `blk_revalidate_disk_zones` requires.
    fn queue_limits(&self) -> QueueLimits {
        let zoned = self.zones.limits();
        QueueLimits {
            chunk_sectors: zoned.zone_sectors,
            zoned: Some(zoned),
            ..self.inner.queue_limits()
        }
    }
    fn ring_descriptors(&self) -> Option<u32> {
        self.inner.ring_descriptors()
    }
    fn driver_cost(&self) -> DriverCost {
        self.inner.driver_cost()
    }
    fn zoned(&self) -> Option<ZonedDevConfig> {
        Some(self.cfg)
    }
    fn report_zones(&self, sector: u64, nr: usize) -> Option<Vec<Zone>> {
        Some(self.zones.report(sector, nr))
    }
    fn take_zone_violation(&mut self) -> Option<String> {
        self.violation.take()
    }

    fn submit(&mut self, hw: u16, cmd: Cmd, now: Nanos) {
        let mgmt = match cmd.op {
            ReqOp::Write | ReqOp::WriteZeroes => {
                match self.zones.write(cmd.sector, cmd.nr_sectors as u64, false) {
                    Ok(_) => self.inner.submit(hw, cmd, now),
                    Err(f) => {
                        if let ZoneFault::Unaligned {
                            zone,
                            sector,
                            nr_sectors,
                            wp,
                        } = f
                        {
                            self.violation.get_or_insert_with(|| {
                                format!(
                                    "a write of {nr_sectors} sectors at sector {sector} reached zone {zone} of the {} device, whose write pointer is at sector {wp}: writes to a sequential zone must come in order",
                                    self.name
                                )
                            });
                        }
                        self.finish_at(now.0, hw, cmd.id, f.status());
                    }
                }
                return;
            }
            // Zone append is emulated by the block layer: none comes here.
            ReqOp::ZoneAppend => {
                self.finish_at(now.0, hw, cmd.id, BlkStatus::NotSupp);
                return;
            }
            ReqOp::ZoneReset => ZoneMgmt::Reset,
            ReqOp::ZoneResetAll => ZoneMgmt::ResetAll,
            ReqOp::ZoneOpen => ZoneMgmt::Open,
            ReqOp::ZoneClose => ZoneMgmt::Close,
            ReqOp::ZoneFinish => ZoneMgmt::Finish,
            _ => {
                self.inner.submit(hw, cmd, now);
                return;
            }
        };
        let share = self.written(cmd.sector);
        let ns = match mgmt {
            ZoneMgmt::Reset | ZoneMgmt::ResetAll => {
                self.resets += 1;
                interpolate(&self.cost.reset, share)
            }
            ZoneMgmt::Finish => {
                self.finishes += 1;
                interpolate(&self.cost.finish, share)
            }
            ZoneMgmt::Open | ZoneMgmt::Close => self.cost.open_close_ns,
        };
        let status = match self.zones.mgmt(mgmt, cmd.sector) {
            Ok(_) => BlkStatus::Ok,
            Err(s) => s,
        };
        self.finish_at(now.0 + ns as u64, hw, cmd.id, status);
    }

    fn next_event(&self) -> Option<Nanos> {
        let mine = self.pending.peek().map(|r| Nanos(r.0 .0));
        match (self.inner.next_event(), mine) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Nanos, out: &mut Vec<DevCompletion>) {
        self.inner.advance(now, out);
        while self.pending.peek().is_some_and(|r| r.0 .0 <= now.0) {
            let Reverse((_, seq, hw, id)) = self.pending.pop().expect("peeked");
            let status = self.ends.remove(&seq).unwrap_or(BlkStatus::IoErr);
            out.push(DevCompletion { hw, id, status });
        }
    }

    fn outstanding(&self) -> u32 {
        self.inner.outstanding() + self.pending.len() as u32
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut s = self.inner.stats();
        s.push(("zone_resets", self.resets));
        s.push(("zone_finishes", self.finishes));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceSpec;

    fn model(spec: &str) -> Box<dyn DeviceModel> {
        crate::build(&DeviceSpec::parse(spec).unwrap(), SimRng::new(1)).unwrap()
    }

    fn run(m: &mut dyn DeviceModel, cmd: Cmd, at: u64) -> (u64, BlkStatus) {
        m.submit(0, cmd, Nanos(at));
        let mut out = Vec::new();
        while out.is_empty() {
            let t = m.next_event().expect("a command is outstanding");
            m.advance(t, &mut out);
            if !out.is_empty() {
                return (t.0 - at, out[0].status);
            }
        }
        unreachable!()
    }

    fn cmd(op: ReqOp, sector: u64, nr_sectors: u32) -> Cmd {
        Cmd {
            id: 1,
            op,
            sector,
            nr_sectors,
            fua: false,
            group: 0,
        }
    }

    /// The ZN540's zones as `zbd report` shows them: 904 of 2 GiB, 1077 MiB writable, 14
    /// open at most; the queue is zoned with the zone size as its chunk.
    #[test]
    fn zns_has_the_zn540s_zones() {
        let m = model("zns");
        let l = m.queue_limits();
        let z = l.zoned.expect("zoned");
        assert_eq!(z.zone_sectors as u64, 2048 * MIB_SECTORS);
        assert_eq!(l.chunk_sectors, z.zone_sectors);
        assert_eq!(u64::from(z.zone_capacity), 1077 * MIB_SECTORS);
        assert_eq!(z.nr_zones, 904);
        assert_eq!(z.max_open_zones, 14);
        let smr = model("smr");
        let zones = smr.report_zones(0, 10).unwrap();
        assert_eq!(zones.len(), 10);
        assert_eq!(zones[0].len, 256 * MIB_SECTORS);
        assert_eq!(
            zones
                .iter()
                .filter(|z| z.ty == mqblk_core::zoned::ZoneType::Conventional)
                .count(),
            8
        );
    }

    /// Writes go at the write pointer only: one elsewhere fails and is reported once as a
    /// broken rule; a reset takes the measured time, longer for a fuller zone.
    #[test]
    fn writes_off_the_write_pointer_fail_and_resets_take_the_measured_time() {
        let mut m = model("zns");
        let (t, st) = run(m.as_mut(), cmd(ReqOp::Write, 0, 8), 0);
        assert_eq!(st, BlkStatus::Ok);
        assert!(t > 5_000 && t < 30_000, "a 4 KiB write takes {t} ns");
        let (_, st) = run(m.as_mut(), cmd(ReqOp::Write, 64, 8), 100_000);
        assert_eq!(st, BlkStatus::IoErr);
        let v = m.take_zone_violation().expect("reported");
        assert!(v.contains("write pointer is at sector 8"), "{v}");
        assert!(m.take_zone_violation().is_none(), "reported once");
        let (nearly_empty, st) = run(m.as_mut(), cmd(ReqOp::ZoneReset, 0, 0), 200_000);
        assert_eq!(st, BlkStatus::Ok);
        assert!(
            (1_500_000..1_800_000).contains(&nearly_empty),
            "{nearly_empty}"
        );
        // After the reset the zone takes writes from its start again.
        let (_, st) = run(m.as_mut(), cmd(ReqOp::Write, 0, 8), 10_000_000);
        assert_eq!(st, BlkStatus::Ok);
        // A full zone's reset, a half-written one's, a nearly empty zone's finish.
        let c = zns_cost();
        assert_eq!(interpolate(&c.reset, 1.0), 15.966e6);
        assert!((interpolate(&c.reset, 0.375) - 9.603e6).abs() < 1e3);
        assert!(interpolate(&c.finish, 0.001) > 800e6);
    }
}
