//! Which ring a request goes to: the hardware queue's shared ring, or a ring of the
//! submitting thread's own on it (`single_issuer`).

use super::*;

impl UringDevice {
    pub(super) fn hctx(&self, hctx: HctxIdx) -> &UringHctx {
        &self.hctxs[hctx.0 as usize]
    }

    /// The calling thread's own ring on `hctx`, if it has one; with `make`, one is made if
    /// it has none and a slot is free. Slots are claimed in order and never released, so
    /// the first free one ends the search.
    pub(super) fn own_ring(&self, hctx: HctxIdx, make: bool) -> Option<&Mutex<HctxRing>> {
        let q = self.hctx(hctx);
        if q.owned.is_empty() {
            return None;
        }
        let me = thread_number();
        for slot in q.owned.iter() {
            match slot.owner.load(Ordering::Acquire) {
                o if o == me => return slot.ring.get().and_then(|r| r.as_deref()),
                0 if !make => return None,
                0 => {
                    let claimed = slot
                        .owner
                        .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok();
                    if claimed {
                        return slot.ring.get_or_init(|| self.make_owned(hctx)).as_deref();
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The slot of `hctx` the calling thread owns, if any (with or without a ring in it).
    pub(super) fn own_slot(&self, hctx: HctxIdx) -> Option<&OwnedRing> {
        let me = thread_number();
        self.hctx(hctx)
            .owned
            .iter()
            .find(|s| s.owner.load(Ordering::Acquire) == me)
    }

    /// A ring for the calling thread alone, with the pool's buffers registered. `None`
    /// (said once, on standard error) when the kernel refuses one: the thread then keeps
    /// to the shared ring.
    pub(super) fn make_owned(&self, hctx: HctxIdx) -> Option<CachePadded<Mutex<HctxRing>>> {
        let made = Ring::new(self.files.clone(), self.owned_cfg, self.cfg.queue_depth).and_then(
            |mut ring| {
                if let Some(pool) = &self.pool {
                    ring.register_buffers(pool.inner())?;
                }
                Ok(ring)
            },
        );
        match made {
            Ok(ring) => Some(CachePadded::new(Mutex::new(HctxRing::new(ring)))),
            Err(e) => {
                eprintln!(
                    "mqblk: uring: hardware queue {}: a ring of the thread's own could not be set up ({e}); it shares the queue's ring",
                    hctx.0
                );
                None
            }
        }
    }

    /// The ring the calling thread issues to on `hctx`: its own if it has one, else the
    /// shared one.
    pub(super) fn issuer_ring(&self, hctx: HctxIdx) -> Which<'_> {
        self.own_ring(hctx, false)
            .map_or(Which::Shared, Which::Owned)
    }

    /// Whether the shared ring of `hctx` may hold something: always without owned rings.
    pub(super) fn shared_busy(&self, hctx: HctxIdx) -> bool {
        let q = self.hctx(hctx);
        q.owned.is_empty() || q.shared_sqes.load(Ordering::Relaxed) > 0
    }

    /// Runs `f` on one ring of `hctx` under its lock, then gives back the device
    /// descriptors its completions released and notes what the shared ring holds.
    pub(super) fn with_ring<R>(
        &self,
        hctx: HctxIdx,
        which: Which<'_>,
        f: impl FnOnce(&UringHctx, &mut HctxRing) -> R,
    ) -> R {
        let hq = self.hctx(hctx);
        let mut q = match which {
            Which::Shared => hq.shared.lock(),
            Which::Owned(r) => r.lock(),
        };
        let before = q.ring.tracker.descs_held();
        let r = f(hq, &mut q);
        let released = before.saturating_sub(q.ring.tracker.descs_held());
        if released > 0 {
            // SeqCst: `holds_requests` after a stop must see it (`stop_for_driver`).
            hq.descs.fetch_sub(released, Ordering::SeqCst);
        }
        if matches!(which, Which::Shared) && !hq.owned.is_empty() {
            hq.shared_sqes
                .store(q.ring.tracker.nr_sqes(), Ordering::Relaxed);
        }
        r
    }
}
