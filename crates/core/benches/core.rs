//! Micro-benchmarks of the core's hot paths: tag allocation, and one bio's trip from submit
//! to completion on a `none` queue with a driver that completes inline.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mqblk_core::tag::Sbitmap;
use mqblk_core::{
    Bio, BlkStatus, CompletionBatch, CtxIdx, Driver, HctxIdx, Nanos, QueueConfig, ReqOp, Request,
    RequestQueue, TagSet, TagSetConfig, Tags,
};
use std::hint::black_box;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

/// Completes every request at once, with no locks and no bookkeeping.
struct InlineDriver;

impl Driver for InlineDriver {
    fn name(&self) -> &'static str {
        "bench-inline"
    }
    fn capacity_sectors(&self) -> u64 {
        1 << 30
    }
    fn queue_rq(
        &self,
        _h: HctxIdx,
        rq: &mut Request,
        _last: bool,
        _now: Nanos,
        done: &mut CompletionBatch,
    ) -> BlkStatus {
        done.complete(rq.id, BlkStatus::Ok);
        BlkStatus::Ok
    }
}

fn config(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group("core");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20);
    g
}

fn tags(c: &mut Criterion) {
    let mut g = config(c);
    g.throughput(Throughput::Elements(1));
    let t = Tags::new(64, 0, false);
    let hint = AtomicU32::new(0);
    g.bench_function("tags_get_put_depth64", |b| {
        b.iter(|| {
            let tag = t.get(&hint, false, u32::MAX).expect("free tag");
            t.put(black_box(tag), &hint);
        })
    });
    // With half the map held, so the search has to skip taken bits.
    let held: Vec<u32> = (0..32)
        .map(|_| t.get(&hint, false, u32::MAX).unwrap())
        .collect();
    g.bench_function("tags_get_put_depth64_half_full", |b| {
        b.iter(|| {
            let tag = t.get(&hint, false, u32::MAX).expect("free tag");
            t.put(black_box(tag), &hint);
        })
    });
    for tag in held {
        t.put(tag, &hint);
    }
    let sb = Sbitmap::new(64, false);
    let hint = AtomicU32::new(0);
    g.bench_function("sbitmap_get_clear_depth64", |b| {
        b.iter(|| {
            let bit = sb.get(&hint, u32::MAX).expect("free bit");
            sb.clear(black_box(bit));
        })
    });
    g.finish();
}

fn queue() -> Arc<RequestQueue> {
    let set = TagSet::new(TagSetConfig::new(1, 64)).expect("tag set");
    RequestQueue::new(set, Arc::new(InlineDriver), None, QueueConfig::default()).expect("queue")
}

fn submit_complete(c: &mut Criterion) {
    let mut g = config(c);
    let q = queue();
    let mut sub = q.submitter(CtxIdx(0));
    let mut now = 0u64;
    let mut sector = 0u64;
    g.throughput(Throughput::Elements(1));
    g.bench_function("submit_complete_4k_read", |b| {
        b.iter(|| {
            now += 1_000;
            sector = (sector + 8) & ((1 << 20) - 1);
            q.submit_bio(&mut sub, Bio::new(ReqOp::Read, sector, 8), Nanos(now));
            debug_assert_eq!(sub.done.len(), 1);
            black_box(sub.done.pop());
        })
    });

    // 32 scattered reads under a plug: the 32nd flushes it as one batch.
    g.throughput(Throughput::Elements(32));
    g.bench_function("submit_complete_4k_read_plug32", |b| {
        b.iter(|| {
            now += 1_000;
            sub.plug.start();
            for _ in 0..32 {
                sector = (sector + 16) & ((1 << 20) - 1);
                q.submit_bio(&mut sub, Bio::new(ReqOp::Read, sector, 8), Nanos(now));
            }
            q.finish_plug(&mut sub, Nanos(now));
            debug_assert_eq!(sub.done.len(), 32);
            sub.done.clear();
        })
    });
    g.finish();
    q.teardown();
}

criterion_group!(benches, tags, submit_complete);
criterion_main!(benches);
