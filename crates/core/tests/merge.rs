//! Merge rules: the pure functions of `merge.rs` on requests taken from a queue's table, and
//! merging end to end through the plug, the software queue and insertion.

mod common;

use common::{bio4k, simple_queue, submit_ok, take_done, Mode, TestDriver};
use mqblk_core::merge::{bio_attempt_merge, merge_requests, req_merge_ok, rq_merge_ok, try_merge};
use mqblk_core::sync::MutexGuard;
use mqblk_core::tag::MapQueues;
use mqblk_core::{
    Bio, BvecLayout, CtxIdx, ElvMerge, HctxIdx, IoPrio, IoPrioClass, Nanos, NoMerges, QueueConfig,
    QueueLimits, ReqFlags, ReqOp, Request, RequestQueue, RequestTable, RequestsRef, RqId, RqState,
    Submit, TagSet, TagSetConfig,
};
use std::sync::Arc;

const NOW: Nanos = Nanos(1_000);

/// A queue whose request table serves as a pool of requests to try the rules on.
fn scratch() -> RequestsRef {
    simple_queue(&TestDriver::new(Mode::Inline), 1, 16, 1).requests()
}

/// Makes slot `i` an allocated, idle request holding one bio of `op` at `sector`.
fn rq_at(
    q: &RequestTable,
    i: u32,
    op: ReqOp,
    sector: u64,
    nr_sectors: u32,
) -> MutexGuard<'_, Request> {
    let mut rq = q.lock(RqId(i));
    let bio = Bio::new(op, sector, nr_sectors).with_private(1000 + i as u64);
    rq.allocated = true;
    rq.state = RqState::Idle;
    rq.op = op;
    rq.cmd_flags = bio.flags;
    rq.ioprio = bio.ioprio;
    rq.group = 0;
    rq.sector = sector;
    rq.nr_sectors = nr_sectors;
    rq.nr_segments = u16::from(op.has_data());
    rq.alloc_ns = Nanos(500 + i as u64);
    rq.bios.clear();
    rq.bios.push(bio);
    rq
}

/// The defaults with the 1280 KiB `max_sectors` the size refusals below are written for.
fn limits() -> QueueLimits {
    QueueLimits {
        max_sectors: 2560,
        ..QueueLimits::default()
    }
}

fn privates(rq: &Request) -> Vec<u64> {
    rq.bios.iter().map(|b| b.private).collect()
}

#[test]
fn back_and_front_merge() {
    let q = scratch();
    let mut rq = rq_at(&q, 0, ReqOp::Write, 100, 8);

    let back = Bio::new(ReqOp::Write, 108, 8).with_private(1);
    assert_eq!(try_merge(&rq, &back), ElvMerge::Back);
    assert_eq!(
        bio_attempt_merge(&mut rq, back, &limits()).unwrap(),
        ElvMerge::Back
    );
    assert_eq!((rq.sector, rq.nr_sectors, rq.nr_segments), (100, 16, 2));

    let front = Bio::new(ReqOp::Write, 92, 8).with_private(2);
    assert_eq!(try_merge(&rq, &front), ElvMerge::Front);
    assert_eq!(
        bio_attempt_merge(&mut rq, front, &limits()).unwrap(),
        ElvMerge::Front
    );
    assert_eq!((rq.sector, rq.nr_sectors, rq.nr_segments), (92, 24, 3));
    assert_eq!(
        privates(&rq),
        vec![2, 1000, 1],
        "bios must stay in sector order"
    );
    assert_eq!(rq.end_sector(), 116);
}

#[test]
fn gaps_and_overlaps_do_not_merge() {
    let q = scratch();
    let mut rq = rq_at(&q, 0, ReqOp::Read, 100, 8);
    for (sector, len) in [
        (109u64, 8u32),
        (107, 8),
        (100, 8),
        (104, 2),
        (91, 8),
        (93, 8),
        (0, 8),
    ] {
        let bio = Bio::new(ReqOp::Read, sector, len).with_private(7);
        assert_eq!(try_merge(&rq, &bio), ElvMerge::None, "{sector}+{len}");
        let back = bio_attempt_merge(&mut rq, bio, &limits()).expect_err("must not merge");
        assert_eq!(
            (back.sector, back.nr_sectors, back.private),
            (sector, len, 7),
            "the bio comes back whole"
        );
        assert_eq!(
            (rq.sector, rq.nr_sectors, rq.bios.len()),
            (100, 8, 1),
            "the request is untouched"
        );
    }
}

#[test]
fn max_sectors_limit() {
    let q = scratch();
    let lim = QueueLimits {
        max_sectors: 24,
        ..limits()
    };
    let mut rq = rq_at(&q, 0, ReqOp::Write, 0, 8);
    assert!(bio_attempt_merge(&mut rq, Bio::new(ReqOp::Write, 8, 8), &lim).is_ok());
    assert!(
        bio_attempt_merge(&mut rq, Bio::new(ReqOp::Write, 16, 8), &lim).is_ok(),
        "exactly max_sectors is fine"
    );
    assert_eq!(rq.nr_sectors, 24);
    assert!(
        bio_attempt_merge(&mut rq, Bio::new(ReqOp::Write, 24, 1), &lim).is_err(),
        "one sector too many"
    );
    let mut rq2 = rq_at(&q, 1, ReqOp::Write, 1000, 8);
    assert!(
        bio_attempt_merge(&mut rq2, Bio::new(ReqOp::Write, 984, 17), &lim).is_err(),
        "front merge too big"
    );
    assert!(bio_attempt_merge(&mut rq2, Bio::new(ReqOp::Write, 992, 8), &lim).is_ok());
}

/// `blk_rq_get_max_sectors`: a request grows to the next `chunk_sectors` boundary and no
/// further, from its own start or a front-merging bio's; a discard grows to
/// `max_discard_sectors`, not `max_sectors`, and across chunks.
#[test]
fn chunk_boundaries_and_the_discard_limit_bound_a_merge() {
    let q = scratch();
    let lim = QueueLimits {
        max_sectors: 64,
        max_discard_sectors: 256,
        chunk_sectors: 32,
        ..limits()
    };
    let mut rq = rq_at(&q, 0, ReqOp::Write, 16, 8);
    assert!(bio_attempt_merge(&mut rq, Bio::new(ReqOp::Write, 24, 8), &lim).is_ok());
    assert!(
        bio_attempt_merge(&mut rq, Bio::new(ReqOp::Write, 32, 8), &lim).is_err(),
        "the request would cross sector 32"
    );
    // A front merge from sector 8 gives 24 sectors from 8: within the chunk.
    assert!(bio_attempt_merge(&mut rq, Bio::new(ReqOp::Write, 8, 8), &lim).is_ok());
    let mut d = rq_at(&q, 1, ReqOp::Discard, 0, 64);
    assert!(
        bio_attempt_merge(&mut d, Bio::new(ReqOp::Discard, 64, 128), &lim).is_ok(),
        "a discard takes max_discard_sectors and ignores chunks"
    );
    assert!(bio_attempt_merge(&mut d, Bio::new(ReqOp::Discard, 192, 65), &lim).is_err());
}

#[test]
fn max_segments_limit() {
    let q = scratch();
    let lim = QueueLimits {
        max_segments: 2,
        ..limits()
    };
    let mut rq = rq_at(&q, 0, ReqOp::Read, 0, 8);
    assert!(bio_attempt_merge(&mut rq, Bio::new(ReqOp::Read, 8, 8), &lim).is_ok());
    assert_eq!(rq.nr_segments, 2);
    assert!(
        bio_attempt_merge(&mut rq, Bio::new(ReqOp::Read, 16, 8), &lim).is_err(),
        "third segment"
    );
    // Discards carry no data segments, so the segment limit never stops them.
    let mut d = rq_at(&q, 1, ReqOp::Discard, 0, 8);
    assert_eq!(d.nr_segments, 0);
    for i in 1..5u64 {
        assert!(
            bio_attempt_merge(&mut d, Bio::new(ReqOp::Discard, i * 8, 8), &lim).is_ok(),
            "discard {i}"
        );
    }
    assert_eq!((d.nr_sectors, d.nr_segments, d.bios.len()), (40, 0, 5));
}

#[test]
fn op_priority_group_and_flags_must_match() {
    let q = scratch();
    let rq = rq_at(&q, 0, ReqOp::Write, 0, 8);
    let ok = Bio::new(ReqOp::Write, 8, 8);
    assert!(rq_merge_ok(&rq, &ok));
    let cases: Vec<(&str, Bio)> = vec![
        ("op", Bio::new(ReqOp::Read, 8, 8)),
        ("discard", Bio::new(ReqOp::Discard, 8, 8)),
        (
            "ioprio",
            Bio::new(ReqOp::Write, 8, 8).with_ioprio(IoPrio::new(IoPrioClass::Rt, 0)),
        ),
        (
            "ioprio level",
            Bio::new(ReqOp::Write, 8, 8).with_ioprio(IoPrio::new(IoPrioClass::Be, 5)),
        ),
        ("group", Bio::new(ReqOp::Write, 8, 8).with_issuer(0, 3)),
        (
            "nomerge",
            Bio::new(ReqOp::Write, 8, 8).with_flags(ReqFlags::NOMERGE),
        ),
        (
            "fua",
            Bio::new(ReqOp::Write, 8, 8).with_flags(ReqFlags::FUA),
        ),
        (
            "preflush",
            Bio::new(ReqOp::Write, 8, 8).with_flags(ReqFlags::PREFLUSH),
        ),
    ];
    drop(rq);
    for (what, bio) in cases {
        let mut rq = rq_at(&q, 0, ReqOp::Write, 0, 8);
        assert!(!rq_merge_ok(&rq, &bio), "{what}: must not merge");
        assert!(
            bio_attempt_merge(&mut rq, bio, &limits()).is_err(),
            "{what}"
        );
        assert_eq!(rq.bios.len(), 1);
    }
    // A different issuer in the same group merges: only the group matters.
    let rq = rq_at(&q, 0, ReqOp::Write, 0, 8);
    assert!(rq_merge_ok(
        &rq,
        &Bio::new(ReqOp::Write, 8, 8).with_issuer(9, 0)
    ));
    drop(rq);
    // Flags on the request forbid merging just the same.
    for f in [ReqFlags::NOMERGE, ReqFlags::FUA, ReqFlags::PREFLUSH] {
        let mut rq = rq_at(&q, 0, ReqOp::Write, 0, 8);
        rq.cmd_flags = rq.cmd_flags.union(f);
        assert!(!rq_merge_ok(&rq, &ok), "{f:?} on the request");
    }
    // Mergeable flags are carried over to the request.
    let mut rq = rq_at(&q, 0, ReqOp::Write, 0, 8);
    assert!(bio_attempt_merge(
        &mut rq,
        Bio::new(ReqOp::Write, 8, 8).with_flags(ReqFlags::META),
        &limits()
    )
    .is_ok());
    assert!(rq.cmd_flags.contains(ReqFlags::META));
}

#[test]
fn flush_and_write_zeroes_never_merge() {
    let q = scratch();
    let fl = rq_at(&q, 0, ReqOp::Flush, 0, 0);
    assert!(!fl.mergeable());
    assert!(!rq_merge_ok(&fl, &Bio::new(ReqOp::Flush, 0, 0)));
    assert!(!Bio::new(ReqOp::Flush, 0, 0).mergeable());
    drop(fl);
    let w = rq_at(&q, 0, ReqOp::Write, 0, 8);
    assert!(!rq_merge_ok(&w, &Bio::new(ReqOp::Flush, 8, 0)));
    drop(w);
    let wz = rq_at(&q, 0, ReqOp::WriteZeroes, 0, 8);
    assert!(!rq_merge_ok(&wz, &Bio::new(ReqOp::WriteZeroes, 8, 8)));
}

#[test]
fn only_idle_allocated_requests_take_bios() {
    let q = scratch();
    let bio = || Bio::new(ReqOp::Read, 8, 8);
    let mut rq = rq_at(&q, 0, ReqOp::Read, 0, 8);
    rq.state = RqState::InFlight;
    assert!(!rq_merge_ok(&rq, &bio()), "in flight");
    rq.state = RqState::Complete;
    assert!(!rq_merge_ok(&rq, &bio()), "complete");
    rq.state = RqState::Idle;
    rq.allocated = false;
    assert!(!rq_merge_ok(&rq, &bio()), "free");
    rq.allocated = true;
    assert!(rq_merge_ok(&rq, &bio()));
}

#[test]
fn request_to_request_merge() {
    let q = scratch();
    let lim = limits();
    {
        let mut a = rq_at(&q, 0, ReqOp::Write, 0, 8);
        let mut b = rq_at(&q, 1, ReqOp::Write, 8, 16);
        b.cmd_flags = b.cmd_flags.union(ReqFlags::META);
        assert!(req_merge_ok(&a, &b, &lim));
        assert!(
            !req_merge_ok(&b, &a, &lim),
            "only back merges: the caller orders the pair"
        );
        merge_requests(&mut a, &mut b);
        assert_eq!((a.sector, a.nr_sectors, a.nr_segments), (0, 24, 2));
        assert_eq!(privates(&a), vec![1000, 1001]);
        assert!(b.bios.is_empty() && b.nr_sectors == 0);
        assert!(a.cmd_flags.contains(ReqFlags::META));
        assert_eq!(
            a.alloc_ns,
            Nanos(500),
            "the earlier allocation time is kept"
        );
    }
    {
        // The later request may be the older one.
        let mut a = rq_at(&q, 3, ReqOp::Write, 0, 8);
        let mut b = rq_at(&q, 2, ReqOp::Write, 8, 8);
        merge_requests(&mut a, &mut b);
        assert_eq!(a.alloc_ns, Nanos(502));
    }
    type Tweak = fn(&mut Request);
    let refusals: [(&str, Tweak); 9] = [
        ("gap", |b| b.sector = 9),
        ("op", |b| b.op = ReqOp::Read),
        ("ioprio", |b| b.ioprio = IoPrio::new(IoPrioClass::Idle, 7)),
        ("group", |b| b.group = 1),
        ("nomerge", |b| b.cmd_flags = ReqFlags::NOMERGE),
        ("fua", |b| b.cmd_flags = ReqFlags::FUA),
        ("in flight", |b| b.state = RqState::InFlight),
        ("free", |b| b.allocated = false),
        ("too big", |b| b.nr_sectors = 2553),
    ];
    for (what, tweak) in refusals {
        let a = rq_at(&q, 0, ReqOp::Write, 0, 8);
        let mut b = rq_at(&q, 1, ReqOp::Write, 8, 8);
        tweak(&mut b);
        assert!(!req_merge_ok(&a, &b, &lim), "{what}: must not merge");
    }
    let a = rq_at(&q, 0, ReqOp::Write, 0, 8);
    let mut b = rq_at(&q, 1, ReqOp::Write, 8, 8);
    b.nr_sectors = 2552;
    assert!(req_merge_ok(&a, &b, &lim), "exactly max_sectors");
    b.nr_sectors = 8;
    b.nr_segments = 128;
    assert!(!req_merge_ok(&a, &b, &lim), "too many segments");
    b.nr_segments = 127;
    assert!(req_merge_ok(&a, &b, &lim));
}

// ----- end to end ----------------------------------------------------------------------------

fn plugged_writes(cfg: QueueConfig, blocks: &[u64]) -> (Arc<TestDriver>, Arc<RequestQueue>) {
    let d = TestDriver::new(Mode::Inline);
    let q = common::queue(&d, 1, 64, cfg);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    for (i, &b) in blocks.iter().enumerate() {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, b, i as u64), NOW);
    }
    assert_eq!(d.nr_issues(), 0, "nothing reaches the driver while plugged");
    q.finish_plug(&mut sub, NOW);
    let done = take_done(&mut sub);
    let mut cookies: Vec<u64> = done.iter().map(|d| d.0).collect();
    cookies.sort_unstable();
    assert_eq!(
        cookies,
        (0..blocks.len() as u64).collect::<Vec<_>>(),
        "every bio completes once"
    );
    assert!(done.iter().all(|d| d.1.is_ok()));
    common::assert_whole(&q);
    (d, q)
}

#[test]
fn plugged_contiguous_writes_become_one_request() {
    let (d, _q) = plugged_writes(QueueConfig::default(), &[0, 1, 2, 3, 4, 5, 6, 7]);
    let is = d.issues();
    assert_eq!(is.len(), 1, "{is:?}");
    assert_eq!(
        (is[0].op, is[0].sector, is[0].nr_sectors, is[0].nr_bios),
        (ReqOp::Write, 0, 64, 8)
    );
    assert_eq!(is[0].privates, (0..8).collect::<Vec<_>>());
    assert!(is[0].last);
}

#[test]
fn plugged_descending_writes_front_merge() {
    let (d, _q) = plugged_writes(QueueConfig::default(), &[17, 16, 15, 14]);
    let is = d.issues();
    assert_eq!(is.len(), 1, "{is:?}");
    assert_eq!((is[0].sector, is[0].nr_sectors), (14 * 8, 32));
    assert_eq!(is[0].privates, vec![3, 2, 1, 0], "bios in sector order");
}

#[test]
fn plugged_scattered_writes_stay_apart() {
    let blocks = [0, 2, 4, 6, 8, 10, 12, 14];
    let (d, _q) = plugged_writes(QueueConfig::default(), &blocks);
    let is = d.issues();
    assert_eq!(is.len(), 8);
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(
            (is[i].sector, is[i].nr_sectors, is[i].nr_bios),
            (b * 8, 8, 1)
        );
        assert_eq!(is[i].last, i == 7);
    }
}

#[test]
fn merge_beyond_max_sectors_starts_a_new_request() {
    let cfg = QueueConfig {
        limits: QueueLimits {
            max_sectors: 32,
            ..QueueLimits::default()
        },
        ..Default::default()
    };
    let (d, _q) = plugged_writes(cfg, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let is = d.issues();
    assert_eq!(is.len(), 2, "{is:?}");
    assert_eq!((is[0].sector, is[0].nr_sectors, is[0].nr_bios), (0, 32, 4));
    assert_eq!((is[1].sector, is[1].nr_sectors, is[1].nr_bios), (32, 32, 4));
}

#[test]
fn max_segments_bounds_plug_merges() {
    let cfg = QueueConfig {
        limits: QueueLimits {
            max_segments: 3,
            ..QueueLimits::default()
        },
        ..Default::default()
    };
    let (d, _q) = plugged_writes(cfg, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let sizes: Vec<u32> = d.issues().iter().map(|i| i.nr_sectors).collect();
    assert_eq!(sizes, vec![24, 24, 16]);
}

#[test]
fn nomerges_none_merges_nothing() {
    let cfg = QueueConfig {
        nomerges: NoMerges::None,
        ..Default::default()
    };
    let (d, _q) = plugged_writes(cfg.clone(), &[0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(d.nr_issues(), 8);
    assert!(d
        .issues()
        .iter()
        .all(|i| i.nr_bios == 1 && i.nr_sectors == 8));

    // Nor in the software queue.
    let d = TestDriver::new(Mode::Inline);
    let q = common::queue(&d, 1, 64, cfg);
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    for b in 0..8 {
        submit_ok(&q, &mut sub, bio4k(ReqOp::Write, b, b), NOW);
    }
    q.start_hw_queue(&mut sub, HctxIdx(0), NOW);
    assert_eq!(d.nr_issues(), 8);
    assert_eq!(sub.done.len(), 8);
    common::assert_whole(&q);
}

#[test]
fn nomerge_flags_end_to_end() {
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 0), NOW);
    submit_ok(
        &q,
        &mut sub,
        bio4k(ReqOp::Write, 1, 1).with_flags(ReqFlags::FUA),
        NOW,
    );
    submit_ok(
        &q,
        &mut sub,
        bio4k(ReqOp::Write, 2, 2).with_flags(ReqFlags::NOMERGE),
        NOW,
    );
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 3, 3), NOW);
    submit_ok(
        &q,
        &mut sub,
        bio4k(ReqOp::Write, 4, 4).with_ioprio(IoPrio::new(IoPrioClass::Rt, 1)),
        NOW,
    );
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 5, 5), NOW);
    q.finish_plug(&mut sub, NOW);
    assert_eq!(d.nr_issues(), 6, "{:?}", d.issues());
    assert_eq!(take_done(&mut sub).len(), 6);
    common::assert_whole(&q);
}

#[test]
fn flush_never_merges_end_to_end() {
    // A flush bio goes to the flush state machine, never into the plug (blk_insert_flush
    // consumes it before blk_add_rq_to_plug), so the writes around it still merge there, and
    // the flush bios share flush requests of their own.
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    sub.plug.start();
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Flush, 0, 0).with_private(0),
        NOW,
    );
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Flush, 0, 0).with_private(1),
        NOW,
    );
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 2), NOW);
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Flush, 0, 0).with_private(3),
        NOW,
    );
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 1, 4), NOW);
    q.finish_plug(&mut sub, NOW);
    for _ in 0..4 {
        q.poll(&mut sub, NOW);
    }
    let ops: Vec<(ReqOp, usize)> = d.issues().iter().map(|i| (i.op, i.nr_bios)).collect();
    assert_eq!(
        ops,
        vec![(ReqOp::Write, 2), (ReqOp::Flush, 0), (ReqOp::Flush, 0)]
    );
    // A flush with a length is malformed.
    assert!(matches!(
        q.submit_bio(&mut sub, Bio::new(ReqOp::Flush, 0, 8).with_private(9), NOW),
        Submit::Failed
    ));
    let done = take_done(&mut sub);
    assert_eq!(done.len(), 6);
    assert_eq!(done.last().unwrap(), &(9, mqblk_core::BlkStatus::Invalid));
    common::assert_whole(&q);
}

#[test]
fn software_queue_merges_while_hctx_is_stopped() {
    // Unplugged bios wait in the software queue of a stopped hctx; contiguous ones join the
    // tail requests there (blk_bio_list_merge), up to the scan depth.
    let d = TestDriver::new(Mode::Inline);
    let q = simple_queue(&d, 1, 64, 1);
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    let mut merged = 0;
    for b in 0..8 {
        if let Submit::Merged = q.submit_bio(&mut sub, bio4k(ReqOp::Write, b, b), NOW) {
            merged += 1;
        }
    }
    assert_eq!(merged, 7);
    assert_eq!(q.nr_allocated(), 1);
    assert_eq!(d.nr_issues(), 0);
    q.start_hw_queue(&mut sub, HctxIdx(0), NOW);
    let is = d.issues();
    assert_eq!(is.len(), 1);
    assert_eq!((is[0].sector, is[0].nr_sectors, is[0].nr_bios), (0, 64, 8));
    assert_eq!(sub.done.len(), 8);
    common::assert_whole(&q);
}

#[test]
fn requests_on_the_software_queue_are_not_folded_but_take_later_bios() {
    // Writes on hctx 0, reads on hctx 1 (a READ map). A plug of [W 0..8, R, W 8..16]: the
    // second write cannot merge as a bio (the plug's last request is the read) so it gets a
    // request of its own. Inserted behind the first on the stopped hctx 0 it stays a request
    // of its own, as in the kernel (`blk_mq_insert_requests` does not merge); a bio that comes
    // later while they wait merges into the tail (`blk_bio_list_merge`).
    let mut cfg = TagSetConfig::new(1, 64);
    cfg.maps = MapQueues {
        default: 1,
        read: 1,
        poll: 0,
    };
    let d = TestDriver::new(Mode::Inline);
    let q = RequestQueue::new(
        TagSet::new(cfg).unwrap(),
        d.clone(),
        None,
        QueueConfig::default(),
    )
    .unwrap();
    let mut sub = q.submitter(CtxIdx(0));
    q.stop_hw_queue(HctxIdx(0));
    sub.plug.start();
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 0, 0), NOW);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Read, 100, 1), NOW);
    submit_ok(&q, &mut sub, bio4k(ReqOp::Write, 1, 2), NOW);
    assert_eq!(q.nr_allocated(), 3);
    q.finish_plug(&mut sub, NOW);
    // The read went straight to its hctx and completed; both writes wait on hctx 0's
    // software queue.
    assert_eq!(q.nr_allocated(), 2);
    let is = d.issues();
    assert_eq!(is.len(), 1);
    assert_eq!((is[0].hctx, is[0].op), (HctxIdx(1), ReqOp::Read));
    assert!(
        matches!(
            q.submit_bio(&mut sub, bio4k(ReqOp::Write, 2, 3), NOW),
            Submit::Merged
        ),
        "a bio merges into the software queue's tail"
    );
    assert_eq!(q.nr_allocated(), 2);
    q.start_hw_queue(&mut sub, HctxIdx(0), NOW);
    let is = d.issues();
    let writes: Vec<_> = is[1..]
        .iter()
        .map(|i| (i.hctx, i.sector, i.nr_sectors, i.privates.clone()))
        .collect();
    assert_eq!(
        writes,
        vec![(HctxIdx(0), 0, 8, vec![0]), (HctxIdx(0), 8, 16, vec![2, 3])]
    );
    assert_eq!(sub.done.len(), 4);
    common::assert_whole(&q);
}

#[test]
fn misaligned_bios_are_refused_and_oversized_ones_split() {
    let cfg = QueueConfig {
        limits: QueueLimits {
            max_sectors: 64,
            logical_block_size: 4096,
            ..QueueLimits::default()
        },
        ..Default::default()
    };
    let d = TestDriver::new(Mode::Inline);
    let q = common::queue(&d, 1, 8, cfg);
    let mut sub = q.submitter(CtxIdx(0));
    let cap = q.limits().capacity_sectors;
    for bio in [
        Bio::new(ReqOp::Write, 4, 8),
        Bio::new(ReqOp::Write, 8, 4),
        Bio::new(ReqOp::Read, 0, 0),
        Bio::new(ReqOp::Read, cap - 8, 16),
        Bio::new(ReqOp::Read, 0, 8).with_buf(mqblk_core::IoBuf::new(2048)),
    ] {
        assert!(matches!(q.submit_bio(&mut sub, bio, NOW), Submit::Failed));
    }
    assert!(sub
        .done
        .iter()
        .all(|b| b.status == mqblk_core::BlkStatus::Invalid));
    assert_eq!(sub.done.len(), 5);
    sub.done.clear();
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Read, cap - 64, 64).with_buf(mqblk_core::IoBuf::new(32768)),
        NOW,
    );
    assert_eq!(d.nr_issues(), 1);
    // Larger than max_sectors (`bio_split_to_limits`): two requests, 64 and 8 sectors, and
    // the bio back once, whole.
    submit_ok(
        &q,
        &mut sub,
        Bio::new(ReqOp::Write, 0, 72).with_private(9),
        NOW,
    );
    assert_eq!(d.nr_issues(), 3);
    let back: Vec<(u64, u32)> = sub
        .done
        .iter()
        .filter(|b| b.private == 9)
        .map(|b| (b.sector, b.nr_sectors))
        .collect();
    assert_eq!(back, [(0, 72)]);
    common::assert_whole(&q);
}

/// `bio_split_rw_at` and `get_max_io_size`: where the first request of a bio ends, by its
/// buffer's pages, the segment limits, the physical block and the chunk.
#[test]
fn split_points_follow_segments_physical_blocks_and_chunks() {
    let lim = QueueLimits::default();
    let mib = 2048u32;
    // One segment the core cannot see into: only the size limit (4 MiB) applies.
    assert_eq!(
        lim.split_sectors(ReqOp::Read, 0, mib, BvecLayout::WHOLE),
        mib
    );
    // 4 KiB pages: 128 segments hold 512 KiB.
    assert_eq!(
        lim.split_sectors(ReqOp::Read, 0, mib, BvecLayout::PAGES),
        1024
    );
    assert_eq!(lim.phys_segments(BvecLayout::PAGES, 1 << 20), 256);
    // Starting half-way into a page: 2 KiB, 4 KiB, 2 KiB.
    let mid = BvecLayout {
        run: 4096,
        skip: 2048,
    };
    assert_eq!(lim.phys_segments(mid, 8192), 3);
    // A page's worth within one page goes whole; across two pages with one segment a
    // request, only what is left of the first.
    assert_eq!(lim.split_sectors(ReqOp::Read, 0, 8, BvecLayout::PAGES), 8);
    let one = QueueLimits {
        max_segments: 1,
        ..lim
    };
    assert_eq!(one.split_sectors(ReqOp::Read, 0, 8, BvecLayout::PAGES), 8);
    assert_eq!(one.split_sectors(ReqOp::Read, 0, 8, mid), 4);
    // Huge pages (2 MiB runs) cut into 64 KiB segments; four of them per request.
    let huge = BvecLayout {
        run: 2 << 20,
        skip: 0,
    };
    let four = QueueLimits {
        max_segments: 4,
        ..lim
    };
    assert_eq!(lim.phys_segments(huge, 1 << 20), 16);
    assert_eq!(four.split_sectors(ReqOp::Write, 0, mib, huge), 512);
    // The same with unbounded segments: the size limit alone.
    let unbounded = QueueLimits {
        max_segment_size: u32::MAX,
        ..four
    };
    assert_eq!(unbounded.split_sectors(ReqOp::Write, 0, mib, huge), mib);
    // A piece ends on a physical block (from sector 1 with 64-sector requests on 4 KiB
    // physical blocks, 63 sectors), and never crosses a chunk boundary.
    let pbs = QueueLimits {
        max_sectors: 64,
        physical_block_size: 4096,
        ..lim
    };
    let chunk = QueueLimits {
        chunk_sectors: 256,
        ..lim
    };
    for (limits, sector, want) in [(&pbs, 1, 63), (&pbs, 8, 64), (&chunk, 200, 56)] {
        let got = limits.split_sectors(ReqOp::Read, sector, 128, BvecLayout::WHOLE);
        assert_eq!(got, want, "from sector {sector}");
    }
    // Operations without data never split.
    assert_eq!(lim.split_sectors(ReqOp::Flush, 0, 0, BvecLayout::WHOLE), 0);
}

/// `bio_split_discard` and `bio_split_write_zeroes`: discards at `max_discard_sectors`
/// ending on the granularity, write-zeroes at their own limit; neither at `max_sectors`.
#[test]
fn discards_and_write_zeroes_split_at_their_own_limits() {
    let lim = QueueLimits {
        max_sectors: 16,
        max_discard_sectors: 100,
        discard_granularity: 4096,
        max_write_zeroes_sectors: 64,
        ..QueueLimits::default()
    };
    let none = QueueLimits {
        max_write_zeroes_sectors: 0,
        ..lim
    };
    // 100 rounds down to 96 on 8-sector granules; from sector 3 the piece ends on one.
    for (limits, op, sector, nr, want) in [
        (&lim, ReqOp::Discard, 3, 1000, 93),
        (&lim, ReqOp::Discard, 0, 1000, 96),
        (&lim, ReqOp::Discard, 0, 90, 90),
        (&lim, ReqOp::WriteZeroes, 0, 1000, 64),
        (&none, ReqOp::WriteZeroes, 0, 1000, 1000),
    ] {
        let got = limits.split_sectors(op, sector, nr, BvecLayout::WHOLE);
        assert_eq!(got, want, "{op:?} of {nr} from {sector}");
    }
}

/// `ll_back_merge_fn`: a bio joins a request only while the request's segments stay within
/// `max_segments`, counted from the bio's pages, and (`req_gap_back_merge`) only when no
/// gap at the virtual boundary would open between them.
#[test]
fn merging_counts_pages_and_respects_the_virtual_boundary() {
    let q = scratch();
    let lim = QueueLimits {
        max_segments: 32,
        ..QueueLimits::default()
    };
    let pages = |sector: u64, sectors: u32| {
        Bio::new(ReqOp::Write, sector, sectors).with_bvecs(BvecLayout::PAGES)
    };
    // 64 KiB bios: 16 segments each; two fit in 32, a third does not.
    let mut rq = rq_at(&q, 0, ReqOp::Write, 0, 128);
    rq.bios[0].bvecs = BvecLayout::PAGES;
    rq.nr_segments = 16;
    assert!(bio_attempt_merge(&mut rq, pages(128, 128), &lim).is_ok());
    assert_eq!(rq.nr_segments, 32);
    assert!(bio_attempt_merge(&mut rq, pages(256, 128), &lim).is_err());
    // NVMe's rule: a request ending mid-page takes no bio after it.
    let nvme = QueueLimits {
        virt_boundary_mask: 4095,
        ..QueueLimits::default()
    };
    let mut rq = rq_at(&q, 1, ReqOp::Write, 0, 12);
    rq.bios[0].bvecs = BvecLayout::PAGES;
    rq.nr_segments = 2;
    assert!(
        bio_attempt_merge(&mut rq, pages(12, 8), &nvme).is_err(),
        "6 KiB then 4 KiB leaves a gap"
    );
    assert!(bio_attempt_merge(&mut rq, pages(12, 8), &lim).is_ok());
    let mut rq = rq_at(&q, 2, ReqOp::Write, 0, 16);
    rq.bios[0].bvecs = BvecLayout::PAGES;
    assert!(
        bio_attempt_merge(&mut rq, pages(16, 8), &nvme).is_ok(),
        "8 KiB then 4 KiB is gapless"
    );
}

/// `REQ_NOWAIT` (`bio_split_rw_at`, `blk_mq_get_new_requests`): a bio that would need
/// splitting is not split but ends with `BLK_STS_AGAIN`, and one that finds no free tag
/// ends so too instead of coming back to wait; without the flag the first is split and the
/// second waits.
#[test]
fn a_nowait_bio_fails_with_again_where_it_would_split_or_wait() {
    use mqblk_core::{BlkStatus, ReqFlags};
    let cfg = QueueConfig {
        limits: QueueLimits {
            max_sectors: 64,
            ..QueueLimits::default()
        },
        ..Default::default()
    };
    let d = TestDriver::new(Mode::Hold);
    let q = common::queue(&d, 1, 2, cfg);
    let mut sub = q.submitter(CtxIdx(0));
    let nowait = |b: Bio| b.with_flags(ReqFlags::NOWAIT);
    assert!(matches!(
        q.submit_bio(&mut sub, nowait(Bio::new(ReqOp::Write, 0, 72)), NOW),
        Submit::Failed
    ));
    assert_eq!(sub.done.pop().map(|b| b.status), Some(BlkStatus::Again));
    assert_eq!(d.nr_issues(), 0);
    // Two tags, both taken: a third bio with the flag fails, one without waits.
    for s in [0, 8] {
        assert!(matches!(
            q.submit_bio(&mut sub, nowait(Bio::new(ReqOp::Read, s, 8)), NOW),
            Submit::Queued
        ));
    }
    assert!(matches!(
        q.submit_bio(&mut sub, nowait(Bio::new(ReqOp::Read, 16, 8)), NOW),
        Submit::Failed
    ));
    assert_eq!(sub.done.pop().map(|b| b.status), Some(BlkStatus::Again));
    assert!(matches!(
        q.submit_bio(&mut sub, Bio::new(ReqOp::Read, 16, 8), NOW),
        Submit::Busy(_)
    ));
}
