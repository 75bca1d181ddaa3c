//! Per-hardware-queue completion workers.

use crate::clock::MonotonicClock;
use mqblk_core::{Clock, CompletionBatch, HctxIdx, RequestQueue};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Who reaps the driver's completions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum CompletionMode {
    /// Each submitter polls its own hardware queues (no extra threads).
    #[default]
    Inline,
    /// One worker thread per hardware queue reaps and routes completions to submitters.
    Worker,
}

/// The worker threads of [`CompletionMode::Worker`]; stopped and joined on drop.
pub struct CompletionWorkers {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl CompletionWorkers {
    pub fn start(queue: &Arc<RequestQueue>, clock: &MonotonicClock) -> CompletionWorkers {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..queue.nr_hw_queues())
            .map(|h| {
                let (q, c, s) = (queue.clone(), clock.clone(), stop.clone());
                std::thread::Builder::new()
                    .name(format!("mqblk-hctx{h}"))
                    .spawn(move || worker_loop(&q, &c, &s, HctxIdx(h as u16)))
                    .expect("spawning a completion worker")
            })
            .collect();
        CompletionWorkers { stop, handles }
    }
}

fn worker_loop(q: &RequestQueue, clock: &MonotonicClock, stop: &AtomicBool, h: HctxIdx) {
    let mut batch = CompletionBatch::new();
    let mut idle = 0u32;
    while !stop.load(Ordering::Acquire) {
        let now = clock.now();
        let mut n = q.poll_hctx(h, &mut batch, now);
        if h.0 == 0 && q.next_deadline().is_some_and(|t| t <= now) {
            q.timer_detached(&mut batch, now);
            n += 1;
        }
        if n > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < 256 {
            std::hint::spin_loop();
        } else if idle < 512 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

impl Drop for CompletionWorkers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
