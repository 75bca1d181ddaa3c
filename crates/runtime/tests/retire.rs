//! A thread that ends must first bring back what only it can: requests its queue runs
//! issued for other submitters on an io_uring it owns (`SubmitterHandle::retire`). While
//! such a request is in flight, the device counts it, so that submitters sleeping on their
//! own rings keep a timeout (`UringDevice::foreign_inflight`).

use mqblk_core::{Bio, BlkStatus, CtxIdx, Driver, HctxIdx, IoBuf, ReqOp};
use mqblk_device::{Device, DeviceConfig, DriverConfig, UringConfig};
use mqblk_runtime::{MonotonicClock, SubmitterHandle};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A 1 MiB file through io_uring with rings of their own for two software queues on one
/// hardware queue, whose virtio ring of three descriptors (header, one page, status)
/// holds one 4 KiB request at a time.
fn two_submitters_one_slot(name: &str) -> (PathBuf, Device) {
    let dir = std::env::temp_dir().join(format!("mqblk-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = DeviceConfig {
        nr_ctx: 2,
        ..DeviceConfig::new(DriverConfig::Uring(UringConfig {
            path: dir.join("dev.img"),
            size_bytes: Some(1 << 20),
            direct: true,
            virtqueue_size: Some(3),
            single_issuer: true,
            ..UringConfig::default()
        }))
    };
    (dir, mqblk_device::build(&cfg, 2).unwrap())
}

/// Thread A's write fills the device's ring (a virtio ring of three descriptors: header,
/// one page, status), so thread B's read waits on the hardware queue's dispatch list. When
/// A reaps its write, the queue run that follows dispatches B's read from A's thread, onto
/// A's own ring, where only A can bring it back. A retires; B then finds its read done,
/// with the data A wrote.
#[test]
fn a_retiring_thread_brings_back_what_it_issued_for_another() {
    let (dir, dev) = two_submitters_one_slot("retire");
    let uring = dev.uring.clone().expect("a uring device");
    assert!(uring.config().single_issuer, "rings of their own granted");
    let (q, h0) = (dev.queue.clone(), HctxIdx(0));
    let clock = MonotonicClock::new();
    let mut a = SubmitterHandle::new(q.clone(), CtxIdx(0), clock.clone());
    let mut b = SubmitterHandle::new(q.clone(), CtxIdx(1), clock.clone());
    assert_eq!(q.nr_hw_queues(), 1, "one hardware queue for both");
    let mut data = IoBuf::new(4096);
    data.as_mut_slice().fill(0xa7);
    // A, on this thread: its first poll makes its ring; its write holds the device ring.
    a.poll();
    a.submit(Bio::new(ReqOp::Write, 8, 8).with_buf(data));
    assert_eq!(uring.inflight_owned(h0), 1, "A's write on A's ring");
    assert_eq!(
        uring.foreign_inflight(),
        0,
        "A's own write is nobody else's"
    );
    // B, on a thread of its own: its read finds the device ring full.
    let b = std::thread::scope(|s| {
        s.spawn(|| {
            b.poll();
            b.submit(Bio::new(ReqOp::Read, 8, 8).with_buf(IoBuf::new(4096)));
            assert_eq!(uring.inflight_owned(h0), 0, "B's read waits");
            b
        })
        .join()
        .unwrap()
    });
    // A reaps its write; the queue run that follows issues B's read on A's ring.
    assert_eq!(a.reap(1, 5_000_000_000), 1, "A's write is back");
    let start = Instant::now();
    while uring.inflight_owned(h0) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "B's read was never issued"
        );
        a.poll();
        std::thread::yield_now();
    }
    // While B's read is on A's ring, every wait on an own ring keeps its 1 ms backstop:
    // B, asleep on its own ring, would look again within a millisecond.
    assert_eq!(uring.foreign_inflight(), 1, "B's read, issued on A's ring");
    let back = std::mem::take(a.done());
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].status, BlkStatus::Ok);
    a.retire();
    assert_eq!(uring.inflight_owned(h0), 0, "A's ring is empty");
    assert_eq!(uring.foreign_inflight(), 0, "B's read reaped by A");
    // B, on yet another thread, finds its read done.
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut b = b;
            assert_eq!(b.reap(1, 5_000_000_000), 1, "B's read is back");
            let bio = b.done().pop().unwrap();
            assert_eq!(bio.status, BlkStatus::Ok);
            assert!(bio.buf.unwrap().as_slice().iter().all(|&x| x == 0xa7));
        });
    });
    assert_eq!(q.nr_allocated(), 0);
    q.teardown();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// B's read waits on the dispatch list behind A's write; A's queue run issues it on A's
/// own ring. B sleeps in `Driver::wait` with nothing of its own in the kernel and a
/// minute to spare; when A reaps B's read and hands it over, the device posts B a wake-up
/// (`Driver::wake_submitter`, the kernel's IPI to the submitting CPU), and B is back long
/// before its minute, with the data A wrote.
#[test]
fn a_submitter_asleep_is_woken_when_another_thread_reaps_its_request() {
    let (dir, dev) = two_submitters_one_slot("wake");
    let uring = dev.uring.clone().expect("a uring device");
    let (q, h0) = (dev.queue.clone(), HctxIdx(0));
    let clock = MonotonicClock::new();
    let mut a = SubmitterHandle::new(q.clone(), CtxIdx(0), clock.clone());
    let mut b = SubmitterHandle::new(q.clone(), CtxIdx(1), clock.clone());
    let mut data = IoBuf::new(4096);
    data.as_mut_slice().fill(0x5c);
    a.poll();
    a.submit(Bio::new(ReqOp::Write, 8, 8).with_buf(data));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let (uring, q) = (&uring, &q);
        let sleeper = s.spawn(move || {
            b.poll();
            b.submit(Bio::new(ReqOp::Read, 8, 8).with_buf(IoBuf::new(4096)));
            assert_eq!(uring.inflight_owned(h0), 0, "B's read waits");
            tx.send(()).unwrap();
            let ctx = q.ctx(CtxIdx(1));
            let start = Instant::now();
            assert!(
                uring.wait(h0, &|| ctx.has_remote(), Some(Duration::from_secs(60))),
                "B sleeps on its own ring"
            );
            let slept = start.elapsed();
            assert!(ctx.has_remote(), "woken for its read, after {slept:?}");
            assert!(slept < Duration::from_secs(30), "slept {slept:?}");
            assert_eq!(b.reap(1, 5_000_000_000), 1, "B's read is back");
            let bio = b.done().pop().unwrap();
            assert_eq!(bio.status, BlkStatus::Ok);
            assert!(bio.buf.unwrap().as_slice().iter().all(|&x| x == 0x5c));
        });
        rx.recv().unwrap();
        let start = Instant::now();
        while uring.sleepers() == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "B never slept");
            std::thread::yield_now();
        }
        // A's write back; the run that follows issues B's read on A's ring, and A reaps it.
        assert_eq!(a.reap(1, 5_000_000_000), 1, "A's write is back");
        a.retire();
        assert_eq!(uring.foreign_inflight(), 0, "B's read reaped by A");
        sleeper.join().unwrap();
    });
    assert!(uring.wakeups() >= 1, "B was sent a wake-up");
    assert_eq!(q.nr_allocated(), 0);
    q.teardown();
    std::fs::remove_dir_all(&dir).unwrap();
}
