//! Tag allocation: the sbitmap allocator, tag maps, tag sets and fair sharing.

mod common;

use common::{bio4k, Mode, TestDriver};
use mqblk_core::tag::{Sbitmap, SbitmapQueue, MAX_DEPTH};
use mqblk_core::{
    CtxIdx, Nanos, QueueConfig, ReqOp, RequestQueue, Submit, TagSet, TagSetConfig, TagSetError,
    TagSetFlags, Tags,
};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier};

/// Something tags are taken from and given back to.
trait Alloc: Sync {
    fn depth(&self) -> u32;
    fn get(&self, hint: &AtomicU32, shallow: u32) -> Option<u32>;
    fn put(&self, tag: u32);
}

impl Alloc for Tags {
    fn depth(&self) -> u32 {
        self.nr_tags
    }
    fn get(&self, hint: &AtomicU32, shallow: u32) -> Option<u32> {
        Tags::get(self, hint, false, shallow)
    }
    fn put(&self, tag: u32) {
        Tags::put(self, tag, &AtomicU32::new(0))
    }
}

impl Alloc for Sbitmap {
    fn depth(&self) -> u32 {
        Sbitmap::depth(self)
    }
    fn get(&self, hint: &AtomicU32, shallow: u32) -> Option<u32> {
        Sbitmap::get(self, hint, shallow)
    }
    fn put(&self, tag: u32) {
        self.clear(tag)
    }
}

/// `threads` threads take and give back tags `iters` times each, holding a few at once. A
/// shared ownership map checks every tag handed out was free and every tag given back was
/// owned. Returns how many allocations succeeded.
fn hammer(a: &dyn Alloc, threads: usize, iters: usize, seed: u64) -> u64 {
    let depth = a.depth();
    let owned: Vec<AtomicBool> = (0..depth).map(|_| AtomicBool::new(false)).collect();
    let got = std::sync::atomic::AtomicU64::new(0);
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (owned, got, start) = (&owned, &got, &start);
            s.spawn(move || {
                let mut rng = common::Rng::new(seed ^ (t as u64 * 0x1234_5678));
                let hint = AtomicU32::new(t as u32 * 16);
                let mut mine: Vec<u32> = Vec::new();
                let hold = 1 + rng.below(4) as usize;
                start.wait();
                for _ in 0..iters {
                    if mine.len() < hold && rng.chance(700) {
                        // Sometimes under a shallow limit, which must still never hand out
                        // a tag twice.
                        let shallow = if rng.chance(200) {
                            1 + rng.below(depth as u64) as u32
                        } else {
                            u32::MAX
                        };
                        if let Some(tag) = a.get(&hint, shallow) {
                            assert!(tag < depth, "tag {tag} beyond depth {depth}");
                            let was = owned[tag as usize].swap(true, Ordering::AcqRel);
                            assert!(!was, "tag {tag} (depth {depth}) handed out while held");
                            mine.push(tag);
                            got.fetch_add(1, Ordering::Relaxed);
                        }
                    } else if !mine.is_empty() {
                        let tag = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                        let was = owned[tag as usize].swap(false, Ordering::AcqRel);
                        assert!(was, "tag {tag} freed while not owned");
                        a.put(tag);
                    }
                }
                for tag in mine {
                    assert!(owned[tag as usize].swap(false, Ordering::AcqRel));
                    a.put(tag);
                }
            });
        }
    });
    got.load(Ordering::Relaxed)
}

/// Takes every tag it can and checks they are exactly `0..n` once each.
fn drain_all(a: &dyn Alloc, shallow: u32, hint: u32) -> Vec<u32> {
    let hint = AtomicU32::new(hint);
    let mut v = Vec::new();
    while let Some(t) = a.get(&hint, shallow) {
        v.push(t);
        assert!(v.len() as u32 <= a.depth(), "more tags than the depth");
    }
    v
}

#[test]
fn concurrent_get_put_never_hands_out_a_tag_twice() {
    for (i, &depth) in [1u32, 7, 64, 1000].iter().enumerate() {
        for threads in [2usize, 4] {
            let iters = 20_000;
            let tags = Tags::new(depth, 0, false);
            let n = hammer(&tags, threads, iters, 7 + i as u64);
            assert!(n > 0, "depth {depth}: nothing was ever allocated");
            assert_eq!(tags.busy(), 0, "depth {depth}: tags left busy");
            // Every tag comes back: the map is whole after the storm.
            let mut all = drain_all(&tags, u32::MAX, 0);
            all.sort_unstable();
            assert_eq!(
                all,
                (0..depth).collect::<Vec<_>>(),
                "depth {depth}: map not whole"
            );
            for t in all {
                tags.put(t, &AtomicU32::new(0));
            }

            let rr = Tags::new(depth + 2, 2, true);
            hammer(&rr, threads, iters, 99 + i as u64);
            assert_eq!(rr.busy(), 0);

            let sb = Sbitmap::new(depth, false);
            hammer(&sb, threads, iters, 1000 + i as u64);
            assert_eq!(sb.weight(), 0, "sbitmap depth {depth}: bits left set");
            let mut all = drain_all(&sb, u32::MAX, depth / 2);
            all.sort_unstable();
            assert_eq!(all, (0..depth).collect::<Vec<_>>());
        }
    }
}

#[test]
fn sbitmap_is_exact_single_threaded() {
    // Every bit once, from any hint, in both modes; a freed bit is reused; double free panics.
    for depth in [1u32, 2, 3, 5, 7, 8, 63, 64, 65, 127, 200, 1000, MAX_DEPTH] {
        for rr in [false, true] {
            let sb = Sbitmap::new(depth, rr);
            let mut all = drain_all(&sb, u32::MAX, depth.saturating_sub(1));
            assert_eq!(sb.weight(), depth);
            all.sort_unstable();
            assert_eq!(all, (0..depth).collect::<Vec<_>>(), "depth {depth} rr {rr}");
            let victim = depth / 3;
            assert!(sb.test(victim));
            sb.clear(victim);
            assert!(!sb.test(victim), "a freed bit must read as free");
            assert_eq!(sb.weight(), depth - 1);
            let hint = AtomicU32::new(0);
            assert_eq!(
                sb.get(&hint, u32::MAX),
                Some(victim),
                "the one free bit must be found"
            );
            assert_eq!(sb.get(&hint, u32::MAX), None);
        }
    }
}

#[test]
#[should_panic(expected = "freed twice")]
fn sbitmap_double_free_panics() {
    let sb = Sbitmap::new(16, false);
    let hint = AtomicU32::new(0);
    let t = sb.get(&hint, u32::MAX).unwrap();
    sb.clear(t);
    sb.clear(t);
}

#[test]
fn round_robin_hint_advances() {
    // Round-robin maps hand out tags in order from the hint, wrapping at the depth.
    let sb = Sbitmap::new(16, true);
    let hint = AtomicU32::new(5);
    let got: Vec<u32> = (0..4).map(|_| sb.get(&hint, u32::MAX).unwrap()).collect();
    assert_eq!(got, vec![5, 6, 7, 8]);
    for t in got {
        sb.clear(t);
    }
    // The freed bits are not taken again until the hint comes round.
    assert_eq!(sb.get(&hint, u32::MAX), Some(9));
}

#[test]
fn a_submitter_reallocates_where_it_last_freed() {
    // lib/sbitmap.c: `sbitmap_queue_clear` points the freeing CPU's hint at the freed bit,
    // and `sbitmap_get` moves a hint only when it handed out the hinted bit itself (to the
    // next bit) or found the map full (to 0).
    let tags = Tags::new(64, 0, false);
    let (a, b) = (AtomicU32::new(0), AtomicU32::new(48));
    let mine: Vec<u32> = (0..4)
        .map(|_| tags.get(&a, false, u32::MAX).unwrap())
        .collect();
    assert_eq!(mine, vec![0, 1, 2, 3], "from the hinted word's first bit");
    assert_eq!(
        a.load(Ordering::Relaxed),
        4,
        "each grant of the hinted bit moves it on"
    );
    let d = AtomicU32::new(1);
    assert_eq!(tags.get(&d, false, u32::MAX), Some(4));
    assert_eq!(
        d.load(Ordering::Relaxed),
        1,
        "another bit's grant leaves the hint"
    );
    tags.put(4, &d);
    let theirs = tags.get(&b, false, u32::MAX).unwrap();
    assert_eq!(theirs, 48, "another submitter starts in its own word");
    assert_eq!(b.load(Ordering::Relaxed), 49);
    // A free points the freeing submitter's hint at the tag, so its next tag comes from that
    // word (16 bits here), not from wherever it last allocated. The freed bit itself is
    // parked until its word fills (the deferred clear), as in the kernel.
    let c = AtomicU32::new(0);
    let far = tags.get(&AtomicU32::new(40), false, u32::MAX).unwrap();
    assert_eq!(far, 32, "the hinted word's first free bit");
    tags.put(far, &c);
    assert_eq!(c.load(Ordering::Relaxed), 32);
    assert_eq!(
        tags.get(&c, false, u32::MAX),
        Some(33),
        "next to its own freed tag"
    );
    tags.put(theirs, &b);
    assert_eq!(b.load(Ordering::Relaxed), 48);
    assert_eq!(tags.get(&b, false, u32::MAX), Some(49));
    // A full map resets the hint.
    let e = AtomicU32::new(33);
    while tags.get(&e, false, u32::MAX).is_some() {}
    assert_eq!(
        e.load(Ordering::Relaxed),
        0,
        "a full map leaves the hint at 0"
    );
    // Round-robin maps keep their own order: a free does not move the hint.
    let rr = Tags::new(16, 0, true);
    let h = AtomicU32::new(3);
    let t = rr.get(&h, false, u32::MAX).unwrap();
    assert_eq!((t, h.load(Ordering::Relaxed)), (3, 4));
    rr.put(t, &h);
    assert_eq!(h.load(Ordering::Relaxed), 4);
}

#[test]
fn shallow_depth_is_respected() {
    for depth in [1u32, 4, 7, 16, 64, 100, 256, 1000] {
        let mut shallows: Vec<u32> =
            vec![1, 2, 3, depth / 4, depth / 2, depth - 1, depth, depth + 5];
        shallows.retain(|&d| d >= 1);
        shallows.dedup();
        for &d in &shallows {
            for hint in [0, depth / 2, depth.saturating_sub(1)] {
                let sb = Sbitmap::new(depth, false);
                let got = drain_all(&sb, d, hint);
                assert_eq!(
                    got.len() as u32,
                    d.min(depth),
                    "depth {depth} shallow {d} hint {hint}: wrong count"
                );
                // Free one and take one: still capped.
                sb.clear(got[0]);
                let h = AtomicU32::new(hint);
                assert!(
                    sb.get(&h, d).is_some(),
                    "depth {depth} shallow {d}: freed tag not reusable"
                );
                assert!(
                    sb.get(&h, d).is_none(),
                    "depth {depth} shallow {d}: cap exceeded after reuse"
                );
                // The full map still yields the rest.
                let rest = drain_all(&sb, u32::MAX, 0);
                assert_eq!(got.len() + rest.len(), depth as usize);
            }
        }
    }
}

#[test]
fn shallow_depth_holds_under_churn() {
    // Random gets and puts under one shallow limit never hold more than the limit.
    let mut rng = common::Rng::new(42);
    for depth in [8u32, 64, 333] {
        for d in [1u32, 3, depth / 2] {
            let tags = Tags::new(depth, 0, false);
            let hints: Vec<AtomicU32> = (0..4).map(|i| AtomicU32::new(i * depth / 4)).collect();
            let mut held: Vec<u32> = Vec::new();
            let mut max_held = 0;
            for _ in 0..3000 {
                if rng.chance(600) {
                    if let Some(t) = tags.get(&hints[rng.below(4) as usize], false, d) {
                        held.push(t);
                    }
                } else if !held.is_empty() {
                    tags.put(
                        held.swap_remove(rng.below(held.len() as u64) as usize),
                        &AtomicU32::new(0),
                    );
                }
                assert!(
                    held.len() as u32 <= d,
                    "depth {depth} shallow {d}: {} held",
                    held.len()
                );
                max_held = max_held.max(held.len());
            }
            assert_eq!(
                max_held as u32, d,
                "depth {depth} shallow {d}: the limit was never reached"
            );
        }
    }
}

#[test]
fn reserved_tags_come_first() {
    for (depth, reserved) in [(8u32, 2u32), (64, 1), (100, 37), (5, 4)] {
        let tags = Tags::new(depth, reserved, false);
        let mut r = drain_reserved(&tags);
        r.sort_unstable();
        assert_eq!(
            r,
            (0..reserved).collect::<Vec<_>>(),
            "{depth}/{reserved}: reserved tags"
        );
        let mut n = drain_all(&tags, u32::MAX, 0);
        n.sort_unstable();
        assert_eq!(
            n,
            (reserved..depth).collect::<Vec<_>>(),
            "{depth}/{reserved}: normal tags"
        );
        assert_eq!(tags.busy(), depth);
        // Putting a reserved tag frees the reserved pool, not the normal one.
        let hint = AtomicU32::new(0);
        tags.put(0, &hint);
        assert_eq!(tags.get(&hint, false, u32::MAX), None);
        assert_eq!(tags.get(&hint, true, u32::MAX), Some(0));
        tags.put(depth - 1, &hint);
        assert_eq!(tags.get(&hint, true, u32::MAX), None);
        assert_eq!(tags.get(&hint, false, u32::MAX), Some(depth - 1));
    }
    // No reserved pool: reserved allocations fail.
    let tags = Tags::new(4, 0, false);
    assert_eq!(tags.get(&AtomicU32::new(0), true, u32::MAX), None);
    assert_eq!(tags.busy(), 0);
}

fn drain_reserved(tags: &Tags) -> Vec<u32> {
    let hint = AtomicU32::new(0);
    std::iter::from_fn(|| tags.get(&hint, true, u32::MAX))
        .take(tags.nr_tags as usize + 1)
        .collect()
}

#[test]
fn wake_batching() {
    for depth in [4u32, 16, 64, 1000] {
        let sbq = SbitmapQueue::new(depth, false);
        let batch = sbq.wake_batch();
        assert_eq!(batch, (depth / 8).clamp(1, 8), "depth {depth}: wake batch");
        let hint = AtomicU32::new(0);
        let held: Vec<u32> = std::iter::from_fn(|| sbq.sb.get(&hint, u32::MAX)).collect();
        assert_eq!(held.len() as u32, depth);
        let mut held = held.into_iter();

        // Frees with nobody waiting do not count towards a wake-up.
        for _ in 0..batch {
            sbq.clear(held.next().unwrap(), &hint);
        }
        let token = sbq.prepare_to_wait();
        for i in 0..batch {
            assert!(
                !sbq.woken_since(token),
                "depth {depth}: woken after {i} of {batch} frees"
            );
            sbq.clear(held.next().unwrap(), &hint);
        }
        assert!(
            sbq.woken_since(token),
            "depth {depth}: not woken after {batch} frees"
        );

        // A new token needs a whole new batch.
        let token = sbq.wake_seq();
        for i in 0..batch {
            assert!(
                !sbq.woken_since(token),
                "depth {depth}: second batch woke after {i} frees"
            );
            sbq.clear(held.next().unwrap(), &hint);
        }
        assert!(sbq.woken_since(token));
        sbq.finish_wait();

        // Without waiters frees are not counted; wake_all always wakes.
        let token = sbq.wake_seq();
        for t in held {
            sbq.clear(t, &hint);
        }
        assert!(
            !sbq.woken_since(token),
            "depth {depth}: woken with nobody waiting"
        );
        sbq.wake_all();
        assert!(sbq.woken_since(token));
    }
}

#[test]
#[should_panic(expected = "finish_wait without prepare_to_wait")]
fn finish_wait_must_pair() {
    SbitmapQueue::new(8, false).finish_wait();
}

#[test]
fn tag_set_validation() {
    let cfg = |hw: u16, depth: u32, reserved: u32| {
        let mut c = TagSetConfig::new(hw, depth);
        c.reserved_tags = reserved;
        c
    };
    assert_eq!(
        TagSet::new(cfg(0, 64, 0)).err(),
        Some(TagSetError::NoQueues(0))
    );
    assert_eq!(
        TagSet::new(cfg(1, 0, 0)).err(),
        Some(TagSetError::DepthTooSmall {
            depth: 0,
            reserved: 0
        })
    );
    assert_eq!(
        TagSet::new(cfg(1, 8, 8)).err(),
        Some(TagSetError::DepthTooSmall {
            depth: 8,
            reserved: 8
        })
    );
    assert_eq!(
        TagSet::new(cfg(1, 8, 9)).err(),
        Some(TagSetError::DepthTooSmall {
            depth: 8,
            reserved: 9
        })
    );
    assert_eq!(
        TagSet::new(cfg(1, MAX_DEPTH + 1, 0)).err(),
        Some(TagSetError::DepthTooLarge(MAX_DEPTH + 1))
    );
    // A set of read queues only has no default queue.
    let mut c = cfg(0, 64, 0);
    c.maps.read = 2;
    assert_eq!(TagSet::new(c).err(), Some(TagSetError::NoQueues(0)));

    let ok = TagSet::new(cfg(3, MAX_DEPTH, 1)).expect("the maximum depth is allowed");
    assert_eq!(ok.tags.len(), 3);
    assert_eq!(ok.distinct_maps(), 3);
    assert!(
        !Arc::ptr_eq(&ok.tags[0], &ok.tags[1]),
        "per-hctx maps must be distinct"
    );
    assert!(ok.all_free());
    assert_eq!(TagSet::new(cfg(1, 9, 8)).unwrap().tags[0].nr_tags, 9);

    // Host-wide tags: one map behind every hardware queue.
    let mut c = cfg(4, 32, 0);
    c.flags = TagSetFlags::TAG_HCTX_SHARED;
    let shared = TagSet::new(c).unwrap();
    assert_eq!(shared.tags.len(), 4);
    assert_eq!(shared.distinct_maps(), 1);
    assert!(shared.tags.iter().all(|t| Arc::ptr_eq(t, &shared.tags[0])));
    assert!((0..4).all(|h| shared.map_index(h) == 0));
    assert!(shared.is_shared());
    let hint = AtomicU32::new(0);
    let t = shared.tags[3].get(&hint, false, u32::MAX).unwrap();
    assert!(!shared.all_free());
    assert_eq!(
        shared.tags[0].busy(),
        1,
        "a tag taken through hctx 3 is held in the one map"
    );
    shared.tags[1].put(t, &hint);
    assert!(shared.all_free());
}

#[test]
fn fair_share() {
    for depth in [1u32, 3, 4, 10, 64, 100, 1000] {
        let tags = Tags::new(depth, 0, false);
        for users in 0..=40u32 {
            tags.active_queues.store(users, Ordering::Relaxed);
            let want = if users <= 1 {
                depth
            } else {
                depth.div_ceil(users).max(4)
            };
            assert_eq!(tags.fair_share(), want, "depth {depth} users {users}");
        }
    }
    // Reserved tags are not shared out.
    let tags = Tags::new(68, 4, false);
    tags.active_queues.store(2, Ordering::Relaxed);
    assert_eq!(tags.fair_share(), 32);
    tags.active_queues.store(3, Ordering::Relaxed);
    assert_eq!(tags.fair_share(), 22);
}

#[test]
fn two_queues_on_one_set_share_fairly() {
    // Two queues (LUNs) on one tag set of 16 tags. While only A is active it may take every
    // tag; once B allocates too, each is limited to ceil(16 / 2) = 8 in flight.
    let set = TagSet::new(TagSetConfig::new(1, 16)).unwrap();
    let da = TestDriver::new(Mode::Hold);
    let db = TestDriver::new(Mode::Hold);
    let qa = RequestQueue::new(set.clone(), da.clone(), None, QueueConfig::default()).unwrap();
    assert!(!set.is_shared(), "one queue does not share");
    let qb = RequestQueue::new(set.clone(), db.clone(), None, QueueConfig::default()).unwrap();
    assert!(set.is_shared() && set.queue_shared());
    let mut sa = qa.submitter(CtxIdx(0));
    let mut sb = qb.submitter(CtxIdx(0));
    let now = Nanos::ZERO;
    for i in 0..12 {
        assert!(matches!(
            qa.submit_bio(&mut sa, bio4k(ReqOp::Read, 2 * i, i), now),
            Submit::Queued
        ));
    }
    assert_eq!(set.tags[0].active_queues.load(Ordering::Relaxed), 1);
    for i in 0..4 {
        assert!(matches!(
            qb.submit_bio(&mut sb, bio4k(ReqOp::Read, 2 * i, 100 + i), now),
            Submit::Queued
        ));
    }
    assert_eq!(set.tags[0].active_queues.load(Ordering::Relaxed), 2);
    assert_eq!(set.tags[0].fair_share(), 8);
    // The set is full. Free 4 of A's tags: A, now at its share of 8, may not take them back,
    // while B, at 4, may.
    da.release(4);
    qa.poll(&mut sa, now);
    assert_eq!(sa.done.len(), 4);
    assert!(
        matches!(
            qa.submit_bio(&mut sa, bio4k(ReqOp::Read, 1000, 50), now),
            Submit::Busy(_)
        ),
        "A is at 8 of 8"
    );
    for i in 4..8 {
        assert!(
            matches!(
                qb.submit_bio(&mut sb, bio4k(ReqOp::Read, 2 * i, 100 + i), now),
                Submit::Queued
            ),
            "B is under its share"
        );
    }
    assert!(
        matches!(
            qb.submit_bio(&mut sb, bio4k(ReqOp::Read, 1000, 200), now),
            Submit::Busy(_)
        ),
        "B is at 8 of 8"
    );
    da.release_all();
    db.release_all();
    qa.poll(&mut sa, now);
    qb.poll(&mut sb, now);
    assert_eq!(sa.done.len(), 12);
    assert_eq!(sb.done.len(), 8);
    common::assert_whole(&qa);
    common::assert_whole(&qb);
}
