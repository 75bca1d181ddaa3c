//! The null driver's zoned mode under the block layer's zone write plugging: writes to a
//! sequential zone reach the device in order at the write pointer whatever the queue depth
//! and scheduler, zone append (native and emulated) says where it went, misplaced writes
//! fail before the device where the host knows the write pointer, and resets, finishes
//! and failed writes move the write pointer as `blk-zoned.c` moves it.

use mqblk_core::{
    zoned::ZonedDevConfig, Bio, BlkStatus, CtxIdx, Driver, HctxIdx, IoBuf, Nanos, QueueConfig,
    ReqOp, RequestQueue, Submit, Submitter, TagSet, ZoneCond,
};
use mqblk_drivers::{IrqMode, NullConfig, NullDevice};
use std::sync::Arc;

/// Sectors per zone with `zone_size_mb: 1`.
const ZONE: u64 = 2048;
/// `completion_nsec` of the rigs: every command takes this long.
const LATENCY: Nanos = Nanos(10_000);

struct Rig {
    q: Arc<RequestQueue>,
    sub: Submitter,
    dev: Arc<NullDevice>,
    now: Nanos,
    /// The most requests the device held at once during the last `run`.
    max_inflight: usize,
}

fn zoned(f: impl FnOnce(&mut NullConfig)) -> NullConfig {
    let mut c = NullConfig {
        zoned: true,
        zone: ZonedDevConfig {
            zone_sectors: 2048,
            ..Default::default()
        },
        size_bytes: 8 << 20,
        memory_backed: true,
        irqmode: IrqMode::Timer,
        completion_nsec: LATENCY.0,
        hw_queue_depth: 32,
        ..NullConfig::default()
    };
    f(&mut c);
    c
}

fn rig(cfg: NullConfig, sched: Option<&str>) -> Rig {
    let set = TagSet::new(cfg.tag_set_config()).unwrap();
    let limits = cfg.queue_limits();
    let dev = NullDevice::new(cfg).unwrap();
    let elv = sched.map(|name| mqblk_sched::lookup(name).expect("a built-in scheduler"));
    let q = RequestQueue::new(
        set,
        dev.clone(),
        elv,
        QueueConfig {
            limits,
            ..Default::default()
        },
    )
    .unwrap();
    let sub = q.submitter(CtxIdx(0));
    Rig {
        q,
        sub,
        dev,
        now: Nanos(1_000),
        max_inflight: 0,
    }
}

fn data(sector: u64, n: u32) -> IoBuf {
    let mut b = IoBuf::new(n as usize * 512);
    for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
        *x = (sector as usize * 7 + i / 512) as u8;
    }
    b
}

fn write(sector: u64, n: u32) -> Bio {
    Bio::new(ReqOp::Write, sector, n).with_buf(data(sector, n))
}

fn append(zone_start: u64, n: u32) -> Bio {
    Bio::new(ReqOp::ZoneAppend, zone_start, n).with_buf(data(zone_start, n))
}

impl Rig {
    /// Submits every bio at once, then polls until all are back; returns them in
    /// submission order.
    fn run(&mut self, bios: Vec<Bio>) -> Vec<Bio> {
        let n = bios.len();
        self.max_inflight = 0;
        for (i, mut bio) in bios.into_iter().enumerate() {
            bio.private = i as u64;
            let now = self.now;
            if let Submit::Busy(_) = self.q.submit_bio(&mut self.sub, bio, now) {
                panic!("no tag for bio {i}");
            }
            self.max_inflight = self.max_inflight.max(self.dev.inflight(HctxIdx(0)));
        }
        let mut out = Vec::new();
        for _ in 0..10_000 {
            out.append(&mut self.sub.done);
            if out.len() == n {
                break;
            }
            self.now = self.now.saturating_add(Nanos::from_micros(1));
            let now = self.now;
            self.q.poll(&mut self.sub, now);
            self.q.timer(&mut self.sub, now);
            self.max_inflight = self.max_inflight.max(self.dev.inflight(HctxIdx(0)));
        }
        assert_eq!(out.len(), n, "{}", self.q.debug_state());
        out.sort_by_key(|b| b.private);
        out
    }

    fn one(&mut self, bio: Bio) -> Bio {
        self.run(vec![bio]).pop().unwrap()
    }

    fn read_back(&mut self, sector: u64, n: u32) -> Vec<u8> {
        let b = self.one(Bio::new(ReqOp::Read, sector, n).with_buf(IoBuf::new(n as usize * 512)));
        assert_eq!(b.status, BlkStatus::Ok);
        b.buf.unwrap().as_slice().to_vec()
    }

    fn zone(&self, sector: u64) -> mqblk_core::Zone {
        self.q.report_zones(sector, 1).unwrap()[0]
    }
}

#[test]
fn deep_sequential_writes_reach_each_zone_in_order_under_every_scheduler() {
    for sched in [None, Some("mq-deadline"), Some("kyber"), Some("bfq")] {
        let mut r = rig(zoned(|_| {}), sched);
        // 24 writes of 4 KiB into zone 1 and 8 into zone 2, interleaved, all submitted
        // before any completes.
        let mut bios = Vec::new();
        for i in 0..24u64 {
            bios.push(write(ZONE + i * 8, 8));
            if i % 3 == 0 {
                bios.push(write(2 * ZONE + i / 3 * 8, 8));
            }
        }
        let done = r.run(bios);
        for b in &done {
            assert_eq!(b.status, BlkStatus::Ok, "{sched:?}: write at {}", b.sector);
        }
        assert_eq!(r.zone(ZONE).wp, ZONE + 24 * 8, "{sched:?}");
        assert_eq!(r.zone(2 * ZONE).wp, 2 * ZONE + 8 * 8, "{sched:?}");
        // One request per zone below the plugs.
        assert!(
            r.max_inflight <= 2,
            "{sched:?}: {} in flight",
            r.max_inflight
        );
        assert_eq!(r.q.zone_plug_stats(), Some((0, 0)));
        let got = r.read_back(ZONE, 24 * 8);
        let want: Vec<u8> = (0..24u64)
            .flat_map(|i| data(ZONE + i * 8, 8).as_slice().to_vec())
            .collect();
        assert!(
            got == want,
            "{sched:?}: zone 1 holds what was written, in order"
        );
    }
}

#[test]
fn plugged_writes_gather_into_the_request_after_the_one_in_flight() {
    let mut r = rig(zoned(|_| {}), None);
    let t0 = r.now;
    let done = r.run((0..16u64).map(|i| write(i * 8, 8)).collect());
    assert!(done.iter().all(|b| b.status == BlkStatus::Ok));
    assert_eq!(r.max_inflight, 1);
    // The first write goes alone; the fifteen plugged behind it join one request, so the
    // batch takes two command times, not sixteen.
    let took = r.now.0 - t0.0;
    assert!(
        took <= 3 * LATENCY.0,
        "16 writes took {took} ns: plugged writes were not merged"
    );
    assert_eq!(r.zone(0).wp, 128);
}

#[test]
fn zone_append_says_where_it_went_native_and_emulated() {
    for native in [true, false] {
        let mut r = rig(
            zoned(|c| c.zone.append_max_sectors = if native { 1024 } else { 0 }),
            None,
        );
        let done = r.run((0..6).map(|_| append(ZONE, 8)).collect());
        let mut at: Vec<u64> = done
            .iter()
            .map(|b| {
                assert_eq!(b.status, BlkStatus::Ok);
                assert_eq!(b.op, ReqOp::ZoneAppend, "given back as an append");
                b.sector
            })
            .collect();
        if !native {
            // Emulated appends are writes in submission order.
            assert_eq!(at, (0..6).map(|i| ZONE + i * 8).collect::<Vec<_>>());
        }
        at.sort_unstable();
        at.dedup();
        assert_eq!(
            at.len(),
            6,
            "native={native}: every append has its own place"
        );
        assert_eq!(r.zone(ZONE).wp, ZONE + 48);
        // An append to a conventional zone, or not at a zone's start, fails.
        let mut r2 = rig(zoned(|c| c.zone.nr_conv = 1), None);
        assert_eq!(r2.one(append(0, 8)).status, BlkStatus::IoErr);
        assert_eq!(r2.one(append(ZONE + 8, 8)).status, BlkStatus::IoErr);
    }
}

#[test]
fn a_write_off_the_write_pointer_fails_before_the_device_while_the_zone_is_plugged() {
    let mut r = rig(zoned(|_| {}), None);
    let done = r.run(vec![write(0, 8), write(64, 8), write(8, 8)]);
    assert_eq!(done[0].status, BlkStatus::Ok);
    assert_eq!(
        done[1].status,
        BlkStatus::IoErr,
        "sector 64 is past the write pointer"
    );
    assert_eq!(
        done[2].status,
        BlkStatus::Ok,
        "the write at the pointer goes on"
    );
    assert_eq!(r.q.zone_plug_stats(), Some((0, 1)), "refused by the host");
    assert_eq!(r.zone(0).wp, 16);
}

#[test]
fn a_failed_write_leaves_the_write_pointer_unknown_until_a_report() {
    let mut r = rig(zoned(|_| {}), None);
    // A partly written zone keeps its plug, and the host refuses a write off its pointer.
    assert_eq!(r.one(write(0, 8)).status, BlkStatus::Ok);
    assert_eq!(r.one(write(0, 8)).status, BlkStatus::IoErr);
    assert_eq!(r.q.zone_plug_stats(), Some((0, 1)));
    // A zone never written has no plug: its first write is the device's to judge
    // (`disk_get_or_alloc_zone_wplug` takes the bio's position), and a misplaced one fails
    // there.
    assert_eq!(r.one(write(ZONE + 64, 8)).status, BlkStatus::IoErr);
    assert_eq!(
        r.q.zone_plug_stats(),
        Some((0, 1)),
        "the device refused it, not the host"
    );
    // The host no longer trusts its write pointer: even a write at the real one fails.
    assert_eq!(r.one(write(ZONE, 8)).status, BlkStatus::IoErr);
    // A zone report tells it where the pointer is.
    assert_eq!(r.zone(ZONE).wp, ZONE);
    assert_eq!(r.one(write(ZONE, 8)).status, BlkStatus::Ok);
}

#[test]
fn reset_and_finish_move_the_write_pointer_and_free_the_zone() {
    let mut r = rig(zoned(|_| {}), None);
    assert_eq!(r.one(write(ZONE, 16)).status, BlkStatus::Ok);
    assert_eq!(r.zone(ZONE).cond, ZoneCond::ImpOpen);
    assert_eq!(
        r.one(Bio::new(ReqOp::ZoneReset, ZONE, 0)).status,
        BlkStatus::Ok
    );
    let z = r.zone(ZONE);
    assert_eq!((z.wp, z.cond), (ZONE, ZoneCond::Empty));
    assert!(
        r.read_back(ZONE, 16).iter().all(|&b| b == 0),
        "reset data reads as zeroes"
    );
    assert_eq!(r.one(write(ZONE, 8)).status, BlkStatus::Ok);
    assert_eq!(
        r.one(Bio::new(ReqOp::ZoneFinish, ZONE, 0)).status,
        BlkStatus::Ok
    );
    assert_eq!(r.zone(ZONE).cond, ZoneCond::Full);
    assert_eq!(
        r.one(write(ZONE + 8, 8)).status,
        BlkStatus::IoErr,
        "full zone"
    );
    assert_eq!(
        r.one(Bio::new(ReqOp::ZoneResetAll, 0, 0)).status,
        BlkStatus::Ok
    );
    assert_eq!(r.zone(ZONE).cond, ZoneCond::Empty);
    assert_eq!(r.one(write(ZONE, 8)).status, BlkStatus::Ok);
    // Zone commands name a zone by its start; not on a conventional zone.
    assert_eq!(
        r.one(Bio::new(ReqOp::ZoneReset, ZONE + 8, 0)).status,
        BlkStatus::Invalid
    );
    let mut c = rig(zoned(|c| c.zone.nr_conv = 1), None);
    assert_eq!(
        c.one(Bio::new(ReqOp::ZoneReset, 0, 0)).status,
        BlkStatus::IoErr
    );
    // Conventional zones take writes anywhere.
    assert_eq!(c.one(write(512, 8)).status, BlkStatus::Ok);
    assert_eq!(c.one(write(8, 8)).status, BlkStatus::Ok);
}

#[test]
fn the_devices_zone_limits_reach_the_writer() {
    let mut r = rig(
        zoned(|c| {
            c.zone.max_open = 1;
            c.zone.max_active = 2;
        }),
        None,
    );
    assert_eq!(r.one(write(0, 8)).status, BlkStatus::Ok);
    // A second zone opens by closing the first implicitly open one.
    assert_eq!(r.one(write(ZONE, 8)).status, BlkStatus::Ok);
    assert_eq!(r.zone(0).cond, ZoneCond::Closed);
    assert_eq!(
        r.one(write(2 * ZONE, 8)).status,
        BlkStatus::ZoneActiveResource
    );
    let lim = r.dev.config().queue_limits().zoned.unwrap();
    assert_eq!((lim.max_open_zones, lim.max_active_zones), (1, 2));
}

#[test]
fn zone_operations_on_a_regular_device_are_not_supported() {
    let mut r = rig(zoned(|c| c.zoned = false), None);
    assert_eq!(
        r.one(Bio::new(ReqOp::ZoneReset, 0, 0)).status,
        BlkStatus::NotSupp
    );
    assert_eq!(r.one(append(0, 8)).status, BlkStatus::NotSupp);
    assert!(r.q.report_zones(0, 1).is_none());
}

#[test]
fn bad_zone_parameters_get_one_line() {
    for (f, want) in [
        (
            Box::new(|c: &mut NullConfig| c.zone.zone_sectors = 3 << 11)
                as Box<dyn Fn(&mut NullConfig)>,
            "power of two",
        ),
        (
            Box::new(|c: &mut NullConfig| c.zone.zone_sectors = 64 << 11),
            "larger than the device",
        ),
        (
            Box::new(|c: &mut NullConfig| {
                c.zone.zone_capacity = 2 << 11;
            }),
            "larger than zone_size",
        ),
    ] {
        let mut c = zoned(|_| {});
        f(&mut c);
        let e = NullDevice::new(c).unwrap_err().to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{e}");
    }
}

#[test]
fn a_write_across_a_zone_boundary_is_split_and_each_piece_plugged_in_its_zone() {
    let mut r = rig(zoned(|_| {}), None);
    assert_eq!(r.one(write(0, (ZONE - 8) as u32)).status, BlkStatus::Ok);
    let b = r.one(write(ZONE - 8, 16));
    assert_eq!(b.status, BlkStatus::Ok);
    assert_eq!(r.zone(0).cond, ZoneCond::Full);
    assert_eq!(r.zone(ZONE).wp, ZONE + 8);
}

#[test]
fn a_request_never_grows_across_a_zone_boundary() {
    // Under a plug, the first write of zone 1 starts where the last write of zone 0 ends
    // and must not join its request (`blk_rq_get_max_sectors` stops a merge at
    // `chunk_sectors`): the device would refuse a write past zone 0's capacity.
    for sched in [None, Some("mq-deadline")] {
        let mut r = rig(zoned(|_| {}), sched);
        assert_eq!(r.one(write(0, (ZONE - 8) as u32)).status, BlkStatus::Ok);
        r.sub.plug.start();
        let now = r.now;
        for (i, b) in [write(ZONE - 8, 8), write(ZONE, 8)].into_iter().enumerate() {
            let b = b.with_private(i as u64);
            assert!(!matches!(
                r.q.submit_bio(&mut r.sub, b, now),
                Submit::Merged
            ));
        }
        r.q.finish_plug(&mut r.sub, now);
        let done = r.run(Vec::new());
        assert!(done.is_empty());
        let mut got = std::mem::take(&mut r.sub.done);
        for _ in 0..100 {
            r.now = r.now.saturating_add(LATENCY);
            let now = r.now;
            r.q.poll(&mut r.sub, now);
            got.append(&mut r.sub.done);
        }
        assert_eq!(got.len(), 2);
        for b in &got {
            assert_eq!(b.status, BlkStatus::Ok, "{sched:?}: write at {}", b.sector);
        }
        assert_eq!(r.zone(0).cond, ZoneCond::Full);
        assert_eq!(r.zone(ZONE).wp, ZONE + 8);
    }
}

#[test]
fn write_zeroes_move_the_write_pointer_as_writes_do() {
    let mut r = rig(zoned(|_| {}), None);
    assert_eq!(r.one(write(0, 8)).status, BlkStatus::Ok);
    assert_eq!(
        r.one(Bio::new(ReqOp::WriteZeroes, 8, 16)).status,
        BlkStatus::Ok
    );
    assert_eq!(r.zone(0).wp, 24);
    assert_eq!(r.one(write(24, 8)).status, BlkStatus::Ok);
    assert!(r.read_back(8, 16).iter().all(|&b| b == 0));
}

#[test]
fn a_nowait_write_waits_on_its_zone_and_is_never_turned_away() {
    // `blk_zone_wplug_handle_write` queues REQ_NOWAIT bios on the plug and clears the flag,
    // so they never end with EAGAIN; on an idle zone the plug's work submits it at once.
    let mut r = rig(zoned(|_| {}), None);
    let mut b = write(0, 8);
    b.flags.insert(mqblk_core::ReqFlags::NOWAIT);
    let now = r.now;
    assert!(matches!(r.q.submit_bio(&mut r.sub, b, now), Submit::Queued));
    assert_eq!(
        r.dev.inflight(HctxIdx(0)),
        1,
        "issued by the plug's work at once"
    );
    let mut c = write(8, 8);
    c.flags.insert(mqblk_core::ReqFlags::NOWAIT);
    let now = r.now;
    assert!(matches!(r.q.submit_bio(&mut r.sub, c, now), Submit::Queued));
    let mut done = Vec::new();
    while done.len() < 2 {
        r.now = r.now.saturating_add(LATENCY);
        let now = r.now;
        r.q.poll(&mut r.sub, now);
        done.append(&mut r.sub.done);
        assert!(r.now.0 < 1_000_000, "{}", r.q.debug_state());
    }
    assert!(done.iter().all(|b| b.status == BlkStatus::Ok), "{done:?}");
    assert_eq!(r.zone(0).wp, 16);
}

/// A freeze waits for the bios waiting on zone write plugs, as for requests: the kernel's
/// plugged bio keeps its reference on the queue (`q_usage_counter`) until it is issued and
/// completes. Writes plugged before the freeze still go out, in order, while it waits.
#[test]
fn a_freeze_waits_for_the_writes_plugged_before_it() {
    let mut r = rig(zoned(|_| {}), Some("mq-deadline"));
    for i in 0..4u64 {
        let mut bio = write(i * 8, 8);
        bio.private = i;
        let now = r.now;
        assert!(matches!(
            r.q.submit_bio(&mut r.sub, bio, now),
            Submit::Queued | Submit::Merged
        ));
    }
    // One write at the device, three on the zone's plug.
    assert_eq!(r.q.zone_plug_stats(), Some((3, 0)));
    r.q.freeze_start();
    let mut done = Vec::new();
    let mut drained_with_plugged = false;
    for _ in 0..1_000 {
        if r.q.freeze_drained() {
            break;
        }
        r.now = r.now.saturating_add(Nanos::from_micros(1));
        let now = r.now;
        r.q.poll(&mut r.sub, now);
        r.q.timer(&mut r.sub, now);
        done.append(&mut r.sub.done);
        drained_with_plugged |= r.q.freeze_drained() && r.q.zone_plug_stats() != Some((0, 0));
    }
    assert!(r.q.freeze_drained(), "{}", r.q.debug_state());
    assert!(
        !drained_with_plugged,
        "the freeze passed with bios still plugged"
    );
    done.append(&mut r.sub.done);
    assert_eq!(done.len(), 4, "every plugged write went out and completed");
    assert!(done.iter().all(|b| b.status == BlkStatus::Ok));
    r.q.unfreeze();
    assert_eq!(r.zone(0).wp, 32);
}
