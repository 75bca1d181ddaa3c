//! A thread that ends must first bring back what only it can: requests its queue runs
//! issued for other submitters on an io_uring it owns (`SubmitterHandle::retire`). While
//! such a request is in flight, the device counts it, so that submitters sleeping on their
//! own rings keep a timeout (`UringDevice::foreign_inflight`).

use mqblk_core::{Bio, BlkStatus, CtxIdx, Driver, HctxIdx, IoBuf, ReqOp};
use mqblk_device::{DeviceConfig, DriverConfig, UringConfig};
use mqblk_runtime::{MonotonicClock, SubmitterHandle};
use std::time::{Duration, Instant};

/// Thread A's write fills the device's ring (a virtio ring of three descriptors: header,
/// one page, status), so thread B's read waits on the hardware queue's dispatch list. When
/// A reaps its write, the queue run that follows dispatches B's read from A's thread, onto
/// A's own ring, where only A can bring it back. A retires; B then finds its read done,
/// with the data A wrote.
#[test]
fn a_retiring_thread_brings_back_what_it_issued_for_another() {
    let dir = std::env::temp_dir().join(format!("mqblk-retire-{}", std::process::id()));
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
    let dev = mqblk_device::build(&cfg, 2).unwrap();
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
