//! Zone write plugging (`block/blk-zoned.c`, Linux 6.18): the block layer keeps writes to
//! each sequential zone in order, so a zoned device never sees one out of place however many
//! a user has in flight.
//!
//! Every write, write-zeroes and emulated zone append to a sequential zone goes through the
//! zone's *write plug* (`blk_zone_plug_bio`), which tracks the zone's write pointer
//! (`wp_offset`). The first write to an idle zone passes at once and plugs the zone
//! (`BLK_ZONE_WPLUG_PLUGGED`); writes that come while it is plugged wait on the plug's list in
//! submission order (`disk_zone_wplug_add_bio`). A bio that passes is checked against the
//! write pointer and advances it (`blk_zone_wplug_prepare_bio`): a write that does not start
//! there, or one to a full zone, fails at once without reaching the device. When the
//! zone's request ends (`blk_zone_write_plug_finish_request`), the next plugged bio is
//! submitted (`blk_zone_wplug_bio_work`), and the request made for it takes the plugged
//! bios that follow it as back merges (`blk_zone_write_plug_init_request`). So one write
//! per zone is in flight below the plug, and the plugged ones gather behind it.
//!
//! Zone append on a device without it (`max_zone_append_sectors` 0) becomes a regular write
//! at the write pointer, never merged, and is given back as a zone append that says where
//! it went (`BIO_EMULATES_ZONE_APPEND`); a device with native zone append gets it as it is,
//! and a zone it is used on loses its plug (`blk_zone_wplug_handle_native_zone_append`).
//! A failed write aborts the plugged ones and leaves the write pointer unknown
//! (`BLK_ZONE_WPLUG_NEED_WP_UPDATE`): writes fail until a zone report, reset or finish
//! says where it is. A completed reset, reset-all or finish sets the write pointer
//! (`blk_zone_mgmt_bio_endio`, which handles them at completion since 6.13), aborting what
//! was plugged.
//!
//! Where we differ: one lock guards every plug rather than a lock per plug and RCU for the
//! hash; the next plugged bio is submitted by whoever ends the request, on its issuer's
//! software queue, where the kernel queues `bio_work` on the disk's `zone_wplugs_wq`
//! (run on the completing CPU). The dedicated worker for rotational devices
//! (`zoned_qd1_writes`) came after 6.18 and is not here. A plug lives from the first write to
//! a zone until the zone is empty or full and nothing of it is in flight, as the kernel's
//! reference count keeps it.

use super::*;
use crate::zoned::ZonedLimits;
use std::collections::{HashMap, VecDeque};

/// Zone write plugging's marks on a bio.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ZoneBio(u8);

impl ZoneBio {
    pub(crate) const NONE: ZoneBio = ZoneBio(0);
    /// Went through a zone write plug and holds a reference on it (`BIO_ZONE_WRITE_PLUGGING`).
    const PLUGGING: u8 = 1 << 0;
    /// A zone append turned into a write at the write pointer (`BIO_EMULATES_ZONE_APPEND`).
    const EMULATES_APPEND: u8 = 1 << 1;
    fn has(self, f: u8) -> bool {
        self.0 & f != 0
    }
}

/// `BLK_ZONE_WPLUG_PLUGGED`: a write of the zone is on its way below the plug.
const PLUGGED: u8 = 1 << 0;
/// `BLK_ZONE_WPLUG_NEED_WP_UPDATE`: a write failed and the write pointer is not known.
const NEED_WP_UPDATE: u8 = 1 << 1;
/// `BLK_ZONE_WPLUG_DEAD`: the zone became empty or full; the plug goes once unused.
const DEAD: u8 = 1 << 2;

/// One zone's write plug (`struct blk_zone_wplug`).
#[derive(Debug, Default)]
struct Wplug {
    flags: u8,
    /// Sectors from the zone's start to its write pointer, as the host knows it.
    wp_offset: u64,
    /// Writes waiting for the one in flight, in submission order (`bio_list`).
    bios: VecDeque<Bio>,
    /// Bios and requests holding the plug (the kernel's references beyond the hash's).
    refs: u32,
}

#[derive(Debug, Default)]
struct State {
    plugs: HashMap<u32, Wplug>,
    /// Zones whose next plugged bio is to be submitted (`bio_work` queued).
    work: VecDeque<u32>,
    /// Bios failed by the plug (aborted, or refused when their turn came), to be ended.
    failed: Vec<Bio>,
    /// Writes the plugs failed before they reached the device, for statistics.
    refused: u64,
}

/// A zoned queue's write plugs (the disk's `zone_wplugs_hash`).
#[derive(Debug)]
pub(crate) struct ZoneWplugs {
    pub(crate) lim: ZonedLimits,
    state: Mutex<State>,
    /// Work or failed bios wait in `state`: every completion asks, and only then locks.
    due: AtomicBool,
}

/// The plugs' state, locked; on release it records in `due` whether anything waits.
struct Locked<'a> {
    st: crate::sync::MutexGuard<'a, State>,
    due: &'a AtomicBool,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let due = !self.st.work.is_empty() || !self.st.failed.is_empty();
        self.due.store(due, Ordering::Release);
    }
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

/// What [`ZoneWplugs::plug_bio`] did with a bio.
pub(crate) enum PlugOutcome {
    /// Submit it now (it may have been changed: an emulated append is now a write).
    Go(Bio),
    /// It waits on its zone's plug.
    Plugged,
    /// It fails with the status it now carries.
    Failed(Bio),
}

thread_local! {
    /// Set while this thread submits plugged bios, so that the queue calls those
    /// submissions make do not start the same work again beneath it.
    static IN_WORK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Wplug {
    fn is_full(&self, lim: &ZonedLimits, zno: u32) -> bool {
        self.wp_offset >= lim.capacity_of(zno)
    }
    /// `disk_zone_wplug_abort`: fails every plugged bio.
    fn abort(&mut self, failed: &mut Vec<Bio>) {
        for mut bio in self.bios.drain(..) {
            bio.status = BlkStatus::IoErr;
            bio.zone = ZoneBio::NONE;
            self.refs -= 1;
            failed.push(bio);
        }
        self.flags &= !PLUGGED;
    }
    /// `disk_zone_wplug_set_wp_offset`.
    fn set_wp_offset(&mut self, lim: &ZonedLimits, zno: u32, off: u64, failed: &mut Vec<Bio>) {
        self.flags &= !NEED_WP_UPDATE;
        self.wp_offset = off;
        self.abort(failed);
        if self.wp_offset == 0 || self.is_full(lim, zno) {
            self.flags |= DEAD;
        }
    }
    /// `blk_zone_wplug_prepare_bio`: checks a write against the write pointer and advances
    /// it; an emulated append becomes a write there.
    fn prepare(&mut self, lim: &ZonedLimits, zno: u32, bio: &mut Bio) -> bool {
        if self.flags & NEED_WP_UPDATE != 0 || self.is_full(lim, zno) {
            return false;
        }
        if bio.op == ReqOp::ZoneAppend {
            // Already REQ_NOMERGE, as every zone append (`plug_bio`).
            bio.op = ReqOp::Write;
            bio.sector = lim.zone_start(zno) + self.wp_offset;
            bio.zone.0 |= ZoneBio::EMULATES_APPEND;
        } else if lim.offset_in_zone(bio.sector) != self.wp_offset {
            return false;
        }
        self.wp_offset += bio.nr_sectors as u64;
        true
    }
}

impl ZoneWplugs {
    pub(crate) fn new(lim: ZonedLimits) -> ZoneWplugs {
        ZoneWplugs {
            lim,
            state: Mutex::new(State::default()),
            due: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> Locked<'_> {
        Locked {
            st: self.state.lock(),
            due: &self.due,
        }
    }

    /// `blk_zone_plug_bio` for a write, write-zeroes or zone append (which is never merged,
    /// `blk_check_zone_append`).
    pub(crate) fn plug_bio(&self, mut bio: Bio) -> PlugOutcome {
        let lim = &self.lim;
        let zno = lim.zone_no(bio.sector);
        if bio.op == ReqOp::ZoneAppend {
            bio.flags.insert(ReqFlags::NOMERGE);
        }
        if bio.op == ReqOp::ZoneAppend && !lim.emulates_zone_append() {
            // `blk_zone_wplug_handle_native_zone_append`: the device places it; a plug left
            // from regular writes would never learn where the zone ends.
            let mut st = self.lock();
            let State { plugs, failed, .. } = &mut *st;
            if let Some(p) = plugs.get_mut(&zno) {
                p.abort(failed);
                p.flags |= DEAD;
                if p.refs == 0 {
                    plugs.remove(&zno);
                }
            }
            return PlugOutcome::Go(bio);
        }
        if !lim.is_seq(zno) {
            // Conventional zones need no plugging; zone append is refused there.
            if bio.op == ReqOp::ZoneAppend {
                bio.status = BlkStatus::IoErr;
                return PlugOutcome::Failed(bio);
            }
            return PlugOutcome::Go(bio);
        }
        let mut st = self.lock();
        // `disk_get_or_alloc_zone_wplug`: a new plug takes the bio's position as the write
        // pointer; the device judges the first write to an idle zone.
        let p = st.plugs.entry(zno).or_insert_with(|| Wplug {
            wp_offset: lim.offset_in_zone(bio.sector),
            ..Wplug::default()
        });
        if p.flags & DEAD != 0 {
            // A write to a full zone, or not synchronised with a reset or finish.
            st.refused += 1;
            bio.status = BlkStatus::IoErr;
            return PlugOutcome::Failed(bio);
        }
        bio.zone.0 |= ZoneBio::PLUGGING;
        p.refs += 1;
        // REQ_NOWAIT bios are always queued, so the caller never sees EAGAIN for them.
        if bio.flags.contains(ReqFlags::NOWAIT) {
            bio.flags.remove(ReqFlags::NOWAIT);
            return self.queue_bio(&mut st, zno, bio);
        }
        if p.flags & PLUGGED != 0 {
            return self.queue_bio(&mut st, zno, bio);
        }
        if !p.prepare(lim, zno, &mut bio) {
            p.refs -= 1;
            Self::drop_if_unused(&mut st.plugs, zno);
            st.refused += 1;
            bio.zone = ZoneBio::NONE;
            bio.status = BlkStatus::IoErr;
            return PlugOutcome::Failed(bio);
        }
        p.flags |= PLUGGED;
        PlugOutcome::Go(bio)
    }

    fn queue_bio(&self, st: &mut State, zno: u32, bio: Bio) -> PlugOutcome {
        let p = st.plugs.get_mut(&zno).expect("plug exists");
        p.bios.push_back(bio);
        if p.flags & PLUGGED == 0 {
            p.flags |= PLUGGED;
            st.work.push_back(zno);
        }
        PlugOutcome::Plugged
    }

    fn drop_if_unused(plugs: &mut HashMap<u32, Wplug>, zno: u32) {
        if let Some(p) = plugs.get(&zno) {
            if p.refs == 0 && p.bios.is_empty() && (p.flags & DEAD != 0 || p.wp_offset == 0) {
                plugs.remove(&zno);
            }
        }
    }

    /// `blk_zone_write_plug_bio_merged`: a plugged-zone write joined a request already made
    /// for its zone, at the write pointer.
    pub(crate) fn bio_merged(&self, sector: u64, nr_sectors: u32) {
        let zno = self.lim.zone_no(sector);
        let mut st = self.lock();
        if let Some(p) = st.plugs.get_mut(&zno) {
            if self.lim.offset_in_zone(sector) == p.wp_offset {
                p.wp_offset += nr_sectors as u64;
            }
        }
    }

    /// `blk_zone_write_plug_init_request`: the plugged bios that continue the new request
    /// join it as back merges while they fit.
    pub(crate) fn init_request(
        &self,
        rq: &mut crate::request::Request,
        limits: &QueueLimits,
        nomerges: bool,
    ) {
        rq.rq_flags.insert(RqFlags::ZONE_WRITE_PLUGGING);
        if nomerges || rq.cmd_flags.intersects(ReqFlags::NOMERGE_FLAGS) {
            return;
        }
        let zno = self.lim.zone_no(rq.sector);
        let mut st = self.lock();
        let Some(p) = st.plugs.get_mut(&zno) else {
            return;
        };
        while !p.is_full(&self.lim, zno) {
            let Some(bio) = p.bios.pop_front() else { break };
            let end = rq.sector + rq.nr_sectors as u64;
            if bio.sector != end || !bio.mergeable() {
                p.bios.push_front(bio);
                break;
            }
            let n = bio.nr_sectors as u64;
            match merge::bio_attempt_merge(rq, bio, limits) {
                Ok(crate::merge::ElvMerge::Back) => p.wp_offset += n,
                Ok(_) => unreachable!("a bio at a request's end merges at its back"),
                Err(bio) => {
                    p.bios.push_front(bio);
                    break;
                }
            }
        }
    }

    /// `blk_zone_write_plug_bio_endio` (for a bio that went through a plug) and
    /// `blk_zone_mgmt_bio_endio` (for a zone reset, reset-all or finish), as the bio ends.
    pub(crate) fn bio_endio(&self, bio: &mut Bio) {
        if bio.zone.has(ZoneBio::PLUGGING) {
            let zno = self.lim.zone_no(bio.sector);
            if bio.zone.has(ZoneBio::EMULATES_APPEND) {
                bio.op = ReqOp::ZoneAppend;
            }
            bio.zone = ZoneBio::NONE;
            let mut st = self.lock();
            let State { plugs, failed, .. } = &mut *st;
            if let Some(p) = plugs.get_mut(&zno) {
                if !bio.status.is_ok() {
                    p.abort(failed);
                    p.flags |= NEED_WP_UPDATE;
                }
                p.refs = p.refs.saturating_sub(1);
            }
            return;
        }
        if !bio.status.is_ok() || !bio.op.is_zone_mgmt() {
            return;
        }
        let mut st = self.lock();
        let State { plugs, failed, .. } = &mut *st;
        let lim = &self.lim;
        match bio.op {
            ReqOp::ZoneReset | ReqOp::ZoneFinish => {
                let zno = lim.zone_no(bio.sector);
                let off = if bio.op == ReqOp::ZoneReset {
                    0
                } else {
                    lim.zone_sectors as u64
                };
                if let Some(p) = plugs.get_mut(&zno) {
                    p.set_wp_offset(lim, zno, off, failed);
                }
                Self::drop_if_unused(plugs, zno);
            }
            ReqOp::ZoneResetAll => {
                let zones: Vec<u32> = plugs.keys().copied().collect();
                for zno in zones {
                    plugs
                        .get_mut(&zno)
                        .expect("listed")
                        .set_wp_offset(lim, zno, 0, failed);
                    Self::drop_if_unused(plugs, zno);
                }
            }
            _ => {}
        }
    }

    /// `blk_zone_write_plug_finish_request` + `disk_zone_wplug_unplug_bio`: the zone's
    /// request ended; its next plugged bio is due, or the plug is released.
    pub(crate) fn finish_request(&self, sector: u64) {
        let zno = self.lim.zone_no(sector);
        let mut st = self.lock();
        let Some(p) = st.plugs.get_mut(&zno) else {
            return;
        };
        p.refs = p.refs.saturating_sub(1);
        let queue_work = if p.bios.is_empty() {
            p.flags &= !PLUGGED;
            false
        } else {
            true
        };
        if p.wp_offset == 0 || p.is_full(&self.lim, zno) {
            p.flags |= DEAD;
        }
        if queue_work {
            st.work.push_back(zno);
        }
        Self::drop_if_unused(&mut st.plugs, zno);
    }

    /// `disk_zone_wplug_submit_bio`'s first half: the next plugged bio of a zone whose work
    /// is due, prepared; bios that no longer fit fail on the way. `None` when no work is
    /// due or this thread is already doing it.
    fn next_work(&self) -> Option<Bio> {
        if !self.due.load(Ordering::Acquire) || IN_WORK.with(|w| w.get()) {
            return None;
        }
        let mut st = self.lock();
        let State {
            plugs,
            work,
            failed,
            refused,
        } = &mut *st;
        while let Some(zno) = work.pop_front() {
            let Some(p) = plugs.get_mut(&zno) else {
                continue;
            };
            while let Some(mut bio) = p.bios.pop_front() {
                if p.prepare(&self.lim, zno, &mut bio) {
                    return Some(bio);
                }
                *refused += 1;
                bio.status = BlkStatus::IoErr;
                bio.zone = ZoneBio::NONE;
                p.refs -= 1;
                failed.push(bio);
            }
            p.flags &= !PLUGGED;
            Self::drop_if_unused(plugs, zno);
        }
        None
    }

    /// A plugged bio whose request could not be allocated goes back to the front of its
    /// zone, whose work stays due.
    pub(crate) fn put_back(&self, mut bio: Bio) {
        let zno = self.lim.zone_no(bio.sector);
        let mut st = self.lock();
        let p = st
            .plugs
            .get_mut(&zno)
            .expect("a plugged bio's zone has a plug");
        // Undo `prepare`: it runs again when the bio's turn comes back.
        p.wp_offset -= bio.nr_sectors as u64;
        if bio.zone.has(ZoneBio::EMULATES_APPEND) {
            bio.op = ReqOp::ZoneAppend;
            bio.sector = self.lim.zone_start(zno);
            bio.zone.0 &= !ZoneBio::EMULATES_APPEND;
        }
        p.bios.push_front(bio);
        st.work.push_front(zno);
    }

    fn take_failed(&self, out: &mut Vec<Bio>) {
        if !self.due.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.lock();
        if !st.failed.is_empty() {
            out.append(&mut st.failed);
        }
    }

    /// Plugged bios waiting, on every zone.
    pub(crate) fn plugged(&self) -> usize {
        self.lock().plugs.values().map(|p| p.bios.len()).sum()
    }

    /// Writes the plugs failed before they reached the device (not at the write pointer,
    /// to a full zone, or after a failed write).
    pub(crate) fn refused(&self) -> u64 {
        self.lock().refused
    }

    /// The write pointer the host keeps for zone `zno`, if it has a plug (for tests and
    /// reports).
    pub(crate) fn wp_offset(&self, zno: u32) -> Option<u64> {
        self.lock().plugs.get(&zno).map(|p| p.wp_offset)
    }

    /// A reported zone (`disk_report_zone` → `disk_zone_wplug_sync_wp_offset`): a plug
    /// that lost track of its zone's write pointer takes it from the report. A zone without
    /// a valid write pointer (full, read-only, offline: `blk_zone_wp_offset`'s `UINT_MAX`)
    /// leaves its plug full, so writes to it fail.
    pub(crate) fn sync_zone(&self, zone: &crate::zoned::Zone) {
        use crate::zoned::ZoneCond;
        if zone.ty != crate::zoned::ZoneType::SeqWriteReq {
            return;
        }
        let wp_offset = match zone.cond {
            ZoneCond::Empty => 0,
            ZoneCond::ImpOpen | ZoneCond::ExpOpen | ZoneCond::Closed => zone.wp - zone.start,
            _ => u64::MAX,
        };
        let zno = self.lim.zone_no(zone.start);
        let mut st = self.lock();
        let State { plugs, failed, .. } = &mut *st;
        if let Some(p) = plugs.get_mut(&zno) {
            if p.flags & NEED_WP_UPDATE != 0 {
                p.set_wp_offset(&self.lim, zno, wp_offset, failed);
            }
            Self::drop_if_unused(plugs, zno);
        }
    }
}

impl QueueInner {
    /// Ends the bios a zone write plug failed: to `done` for `local`, to their submitters
    /// otherwise (the split table counts a piece's failure against its original).
    pub(crate) fn end_plug_failures(&self, local: Option<CtxIdx>, done: &mut Vec<Bio>) {
        let Some(z) = &self.zones else { return };
        let mut failed = Vec::new();
        z.take_failed(&mut failed);
        for bio in failed {
            self.route_bio(bio, local, done);
        }
    }

    /// Runs due zone write plug work (`blk_zone_wplug_bio_work`): each zone's next plugged
    /// bio gets a request of its own, made on its issuer's software queue, and goes on as a
    /// fresh one would, but with no plug of the caller's and without a second merge attempt.
    /// Returns whether anything was submitted.
    pub(crate) fn zone_work(&self, local: Option<CtxIdx>, done: &mut Vec<Bio>, now: Nanos) -> bool {
        let Some(z) = &self.zones else { return false };
        let mut any = false;
        while let Some(bio) = z.next_work() {
            let ctx = bio.ctx;
            let mut sub = self.submitter(ctx);
            match self.alloc_request(ctx, bio, now) {
                Ok(rq) => {
                    {
                        let mut r = self.rqs.lock(rq.id);
                        z.init_request(&mut r, &self.limits, self.cfg.nomerges == NoMerges::None);
                    }
                    IN_WORK.with(|w| w.set(true));
                    self.queue_new_request(&mut sub, rq, now);
                    IN_WORK.with(|w| w.set(false));
                    any = true;
                }
                Err(bio) => {
                    z.put_back(bio);
                    break;
                }
            }
            for bio in sub.done.drain(..) {
                if Some(bio.ctx) == local {
                    done.push(bio);
                } else {
                    self.hand_remote(bio);
                }
            }
        }
        self.end_plug_failures(local, done);
        any
    }
}
