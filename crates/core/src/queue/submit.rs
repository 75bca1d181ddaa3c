//! The submission path (`blk_mq_submit_bio` in blk-mq.c): a bio checked against the device,
//! merged into a plugged, queued or scheduled request where it can be, else given a request
//! of its own (tags, `limit_depth`), then plugged, inserted into the scheduler or a software
//! queue, or issued directly; and the plug's flush (`blk_mq_flush_plug_list`).

use super::*;
use crate::driver::QueueRqs;

impl QueueInner {
    /// Checks a bio against the device: range, alignment, size (`bio_check_eod` and friends).
    pub(super) fn check_bio(&self, bio: &Bio) -> Result<(), BlkStatus> {
        let lbs_mask = (self.limits.logical_block_size as u64 / SECTOR_SIZE).max(1) - 1;
        if bio.op == ReqOp::Flush {
            return if bio.nr_sectors == 0 {
                Ok(())
            } else {
                Err(BlkStatus::Invalid)
            };
        }
        if bio.op.is_zone_mgmt() || bio.op == ReqOp::ZoneAppend {
            return self.check_zone_bio(bio);
        }
        if bio.nr_sectors == 0
            || bio.sector & lbs_mask != 0
            || bio.nr_sectors as u64 & lbs_mask != 0
            || bio.end_sector() > self.limits.capacity_sectors
        {
            return Err(BlkStatus::Invalid);
        }
        if let Some(buf) = &bio.buf {
            if bio.op.has_data() && (buf.len() as u64) < bio.bytes() {
                return Err(BlkStatus::Invalid);
            }
        }
        Ok(())
    }

    /// `blk_check_zone_append` and `submit_bio_noacct`'s zone management cases: zone
    /// operations need a zoned device; a zone append starts at a sequential zone's start
    /// and fits the zone and the append limit unsplit (it is never merged); a zone reset,
    /// open, close or finish names a sequential zone by its start and moves no data.
    fn check_zone_bio(&self, bio: &Bio) -> Result<(), BlkStatus> {
        let Some(z) = &self.limits.zoned else {
            return Err(BlkStatus::NotSupp);
        };
        // Zone append emulation is part of zone write plugging (Linux 6.10); without the
        // plugs only a device's own zone append serves it.
        if bio.op == ReqOp::ZoneAppend && z.emulates_zone_append() && self.zones.is_none() {
            return Err(BlkStatus::NotSupp);
        }
        if bio.op == ReqOp::ZoneResetAll {
            return if bio.nr_sectors == 0 {
                Ok(())
            } else {
                Err(BlkStatus::Invalid)
            };
        }
        if bio.sector >= self.limits.capacity_sectors || z.offset_in_zone(bio.sector) != 0 {
            return Err(if bio.op == ReqOp::ZoneAppend {
                BlkStatus::IoErr
            } else {
                BlkStatus::Invalid
            });
        }
        if !z.is_seq(z.zone_no(bio.sector)) {
            // `blk_zone_wplug_handle_zone_mgmt`, `blk_zone_wplug_handle_write`: not on a
            // conventional zone.
            return Err(BlkStatus::IoErr);
        }
        if bio.op.is_zone_mgmt() {
            return if bio.nr_sectors == 0 {
                Ok(())
            } else {
                Err(BlkStatus::Invalid)
            };
        }
        let lbs_mask = (self.limits.logical_block_size as u64 / SECTOR_SIZE).max(1) - 1;
        let append_max = if z.emulates_zone_append() {
            self.limits.max_sectors.min(z.zone_sectors)
        } else {
            z.max_zone_append_sectors
        };
        if bio.nr_sectors == 0
            || bio.nr_sectors as u64 & lbs_mask != 0
            || bio.nr_sectors > z.zone_sectors
            || bio.nr_sectors > append_max
        {
            return Err(BlkStatus::IoErr);
        }
        if let Some(buf) = &bio.buf {
            if (buf.len() as u64) < bio.bytes() {
                return Err(BlkStatus::Invalid);
            }
        }
        Ok(())
    }

    /// Submits a bio (`blk_mq_submit_bio`): merge if possible, else allocate a request and
    /// plug it, insert it, or issue it directly. Completions that happen at once land in
    /// `sub.done`.
    pub fn submit_bio(&self, sub: &mut Submitter, mut bio: Bio, now: Nanos) -> Submit {
        debug_assert!(
            !self.torn_down.load(Ordering::Relaxed),
            "submit after teardown"
        );
        bio.ctx = sub.ctx;
        // Stamped once: a bio handed back for want of a tag keeps the time it was first
        // submitted, so the wait counts in its latency as the submitter's sleep in
        // `blk_mq_get_tag` counts in the system call's; and traced as queued once.
        let first = !std::mem::replace(&mut bio.queued, true);
        if first {
            bio.submit_ns = now;
        }
        if let Err(status) = self.check_bio(&bio) {
            bio.status = status;
            sub.done.push(bio);
            return Submit::Failed;
        }
        if self.strip_flush_flags(&mut bio) {
            bio.status = BlkStatus::Ok;
            sub.done.push(bio);
            return Submit::Done;
        }
        let tracer = self.cfg.tracer.get();
        // The rest of a split bio was traced when it first came (`BIO_TRACE_COMPLETION`).
        if let (Some(t), None, true) = (tracer, bio.split, first) {
            t.event(&TraceEvent::of_bio(TraceAction::Queue, &bio, sub.ctx, now));
        }
        if self.needs_split(&bio) {
            // `bio_split_rw_at`: a REQ_NOWAIT bio is not split, it ends with EAGAIN.
            if bio.flags.contains(ReqFlags::NOWAIT) && bio.split.is_none() {
                bio.status = BlkStatus::Again;
                sub.done.push(bio);
                return Submit::Failed;
            }
            return self.submit_split(sub, bio, now);
        }
        self.submit_one(sub, bio, now)
    }

    /// A checked, traced bio that fits one request: merge it, or allocate a request for it
    /// and queue, plug or issue that.
    pub(super) fn submit_one(&self, sub: &mut Submitter, mut bio: Bio, now: Nanos) -> Submit {
        let tracer = self.cfg.tracer.get();
        if self.cfg.nomerges != NoMerges::None
            && bio.mergeable()
            && self.merge_candidates(sub, &bio)
        {
            let ev = tracer.map(|_| TraceEvent::of_bio(TraceAction::BackMerge, &bio, sub.ctx, now));
            let (sector, nr, op) = (bio.sector, bio.nr_sectors, bio.op);
            match self.attempt_bio_merge(sub, bio) {
                Ok(front) => {
                    if let Some(z) = &self.zones {
                        if !front && op == ReqOp::Write {
                            z.bio_merged(sector, nr);
                        }
                    }
                    if let (Some(t), Some(mut ev)) = (tracer, ev) {
                        if front {
                            ev.action = TraceAction::FrontMerge;
                        }
                        t.event(&ev);
                    }
                    self.ctxs[sub.ctx.0 as usize].stats.merged.add(1);
                    return Submit::Merged;
                }
                Err(b) => bio = b,
            }
        }
        let mut plugging = false;
        if let Some(z) = &self.zones {
            if matches!(
                bio.op,
                ReqOp::Write | ReqOp::WriteZeroes | ReqOp::ZoneAppend
            ) {
                bio = match z.plug_bio(bio) {
                    zoned::PlugOutcome::Go(b) => b,
                    zoned::PlugOutcome::Plugged => {
                        // A bio plugged on an idle zone (REQ_NOWAIT) made its work due.
                        self.end_sub_batch(sub, now);
                        return Submit::Queued;
                    }
                    zoned::PlugOutcome::Failed(b) => {
                        sub.done.push(b);
                        return Submit::Failed;
                    }
                };
                plugging = bio.zone != zoned::ZoneBio::NONE;
                // A native zone append may have aborted a plug's bios.
                self.end_plug_failures(Some(sub.ctx), &mut sub.done);
            }
        }
        let rq = match self.alloc_request(sub.ctx, bio, now) {
            Ok(rq) => {
                if plugging {
                    let z = self.zones.as_ref().expect("plugging needs zones");
                    let mut r = self.rqs.lock(rq.id);
                    z.init_request(&mut r, &self.limits, self.cfg.nomerges == NoMerges::None);
                }
                rq
            }
            // `blk_mq_get_new_requests`: no tag for a REQ_NOWAIT bio ends it with
            // `bio_wouldblock_error` (the rest of a split bio, already in flight, waits).
            Err(mut bio) if bio.flags.contains(ReqFlags::NOWAIT) && bio.split.is_none() => {
                bio.status = BlkStatus::Again;
                sub.done.push(bio);
                return Submit::Failed;
            }
            // A bio that passed its zone's plug holds the zone's turn: it waits at the head
            // of the plug, for the work a freed tag runs (the kernel's task would sleep for
            // the tag holding it).
            Err(bio) if plugging => {
                self.zones
                    .as_ref()
                    .expect("plugging needs zones")
                    .put_back(bio);
                return Submit::Queued;
            }
            Err(bio) => return Submit::Busy(Box::new(bio)),
        };
        self.queue_new_request(sub, rq, now);
        Submit::Queued
    }

    /// Where a freshly allocated request goes: the plug, the elevator, the hardware queue's
    /// dispatch list (flushes), or straight to the driver.
    pub(super) fn queue_new_request(&self, sub: &mut Submitter, rq: NewRq, now: Nanos) {
        let (id, h) = (rq.id, rq.hctx);
        // `blk_mq_rq_ctx_init` prepares a request for the elevator when it is allocated,
        // before the flush state machine sees it.
        if let Some(snap) = &rq.sched {
            self.elevator
                .as_ref()
                .expect("USE_SCHED without elevator")
                .prepare_request(snap);
        }
        if rq.flush {
            let mut ends = Vec::new();
            if self.insert_flush(id, now, &mut ends) {
                if !ends.is_empty() {
                    let mut runs = std::mem::take(&mut sub.runs);
                    runs.clear();
                    self.end_flush_seqs(&mut ends, Some(sub.ctx), &mut sub.done, &mut runs, now);
                    for &h in &runs {
                        self.run_hw_queue(h, now, &mut sub.batch);
                    }
                    sub.runs = runs;
                    self.end_sub_batch(sub, now);
                }
                return;
            }
        }
        if sub.plug.is_started() {
            sub.plug.has_elevator |= rq.sched.is_some();
            if sub.plug.add(id, h, rq.bytes, rq.mergeable) {
                self.flush_plug(sub, now);
            }
            return;
        }
        if rq.bypass {
            self.bypass_insert(h, id, true, now);
            self.run_hw_queue(h, now, &mut sub.batch);
        } else if rq.sched.is_some() {
            // `blk_mq_submit_bio` inserts an unplugged request into the scheduler and runs
            // the queue asynchronously (5.10: `blk_mq_sched_insert_request(rq, false, true,
            // true)`; today `blk_mq_insert_request` and `blk_mq_run_hw_queue(hctx, true)`):
            // kblockd work under `kblockd_runs`, which a concurrent
            // `blk_mq_delay_run_hw_queues` may push back; inline otherwise.
            self.insert_sched(h, &[id], false, now);
            self.run_hw_queue_async(h, now, &mut sub.batch);
        } else {
            self.issue_new(sub, h, id, now);
        }
        self.end_sub_batch(sub, now);
    }

    /// Whether `blk_mq_attempt_bio_merge` has anything to look at: a plugged request, an
    /// elevator, or a non-empty software queue list. Asked before the bio is handed over by
    /// value, so the common case (`none`, direct issue) does not move it there and back.
    pub(super) fn merge_candidates(&self, sub: &Submitter, bio: &Bio) -> bool {
        sub.plug.last().is_some() || self.elevator.is_some() || self.ctx_list_pending(sub.ctx, bio)
    }

    /// `blk_mq_attempt_bio_merge`: the plug's last request, then the elevator or the software
    /// queue's tail.
    /// `Ok(true)` for a front merge.
    pub(super) fn attempt_bio_merge(&self, sub: &mut Submitter, mut bio: Bio) -> Result<bool, Bio> {
        if let Some(last) = sub.plug.last() {
            let mut rq = self.rqs.lock(last);
            match merge::bio_attempt_merge(&mut rq, bio, &self.limits) {
                Ok(kind) => return Ok(kind == crate::merge::ElvMerge::Front),
                Err(b) => bio = b,
            }
        }
        if let Some(elv) = &self.elevator {
            let h = self.ctxs[sub.ctx.0 as usize].hctxs[HctxType::of(bio.op, bio.flags) as usize];
            return match elv.bio_merge(&self.elv_ctx(), h, bio) {
                BioMerge::Merged { freed } => {
                    if let Some(next) = freed {
                        self.free_merged(next);
                    }
                    Ok(false)
                }
                BioMerge::NotMerged(b) => Err(b),
            };
        }
        self.ctx_list_merge(sub.ctx, bio)
    }

    /// `blk_bio_list_merge` over the last few requests of the software queue. As
    /// `blk_mq_sched_bio_merge` looks at the list (`list_empty_careful`) before taking the
    /// Ctx's lock, we look at its pending bit: with direct issue the list is nearly always
    /// empty, and the lock would be taken for nothing on every bio.
    pub(super) fn ctx_list_merge(&self, ctx: CtxIdx, mut bio: Bio) -> Result<bool, Bio> {
        if !self.ctx_list_pending(ctx, &bio) {
            return Err(bio);
        }
        let c = &self.ctxs[ctx.0 as usize];
        let ty =
            self.hctxs[c.hctxs[HctxType::of(bio.op, bio.flags) as usize].0 as usize].ty as usize;
        let lists = c.lists.lock();
        for &id in lists[ty].iter().rev().take(CTX_MERGE_SCAN) {
            let mut rq = self.rqs.lock(id);
            match merge::bio_attempt_merge(&mut rq, bio, &self.limits) {
                Ok(kind) => return Ok(kind == crate::merge::ElvMerge::Front),
                Err(b) => bio = b,
            }
        }
        Err(bio)
    }

    /// Whether the software queue list `bio` would merge into holds anything: the list of the
    /// hardware queue the bio maps to, by that queue's type (a READ map without queues of its
    /// own falls back to the default one).
    pub(super) fn ctx_list_pending(&self, ctx: CtxIdx, bio: &Bio) -> bool {
        let c = &self.ctxs[ctx.0 as usize];
        let hctx = &self.hctxs[c.hctxs[HctxType::of(bio.op, bio.flags) as usize].0 as usize];
        hctx.ctx_pending(c.index_hw[hctx.ty as usize])
    }

    /// Allocates and initialises a request for `bio` (`__blk_mq_alloc_requests` +
    /// `blk_mq_bio_to_request`). On failure the bio comes back.
    pub(super) fn alloc_request(&self, ctx: CtxIdx, bio: Bio, now: Nanos) -> Result<NewRq, Bio> {
        let c = &self.ctxs[ctx.0 as usize];
        let ty = HctxType::of(bio.op, bio.flags);
        let h = c.hctxs[ty as usize];
        let am = &self.alloc_maps[self.hctx_alloc[h.0 as usize] as usize];
        let sched = self.elevator.as_ref();
        // Every request takes scheduler tags with an elevator; which go through it
        // (`RQF_USE_SCHED`, and `limit_depth`): since 6.5 all but the flush request itself
        // (`__blk_mq_alloc_requests`: `(opf & REQ_OP_MASK) != REQ_OP_FLUSH`); before, none
        // that `op_is_flush`.
        let flush = flush::op_is_flush(bio.op, bio.flags);
        let bypasses = if self.cfg.flush_via_sched {
            bio.op == ReqOp::Flush
        } else {
            flush
        };
        let use_sched = sched.is_some() && !bypasses;
        let tag = match sched {
            Some(e) => {
                let shallow = if use_sched {
                    e.limit_depth(&bio)
                } else {
                    u32::MAX
                };
                am.tags.get(&c.sched_hint, false, shallow)
            }
            None => {
                if !self.may_queue(h) {
                    return Err(bio);
                }
                // `nr_requests` below the driver tags' depth limits them (the kernel
                // resizes the tags, `blk_mq_tag_update_depth`); by default it is above.
                let t = am.tags.get(&c.tag_hint, false, self.nr_requests);
                if t.is_some() {
                    self.driver_tag_busy(h);
                }
                t
            }
        };
        let Some(tag) = tag else { return Err(bio) };
        let id = RqId(am.base + tag);
        let mut rq = self.rqs.lock(id);
        assert!(
            !rq.allocated,
            "{id:?}: tag {tag} handed out while still held"
        );
        assert_eq!(rq.state, RqState::Idle);
        assert!(rq.bios.is_empty(), "{id:?}: stale bios in a free request");
        rq.allocated = true;
        rq.rq_flags = RqFlags::default();
        if sched.is_some() {
            rq.internal_tag = Tag(tag as u16);
            rq.tag = Tag::NONE;
            rq.rq_flags.insert(RqFlags::SCHED_TAGS);
            if use_sched {
                rq.rq_flags.insert(RqFlags::USE_SCHED);
            }
        } else {
            rq.tag = Tag(tag as u16);
            rq.internal_tag = Tag::NONE;
            self.set_drv_rq(self.set.map_index(h.0 as usize), tag, id);
        }
        rq.op = bio.op;
        rq.cmd_flags = bio.flags;
        rq.ioprio = bio.ioprio;
        rq.issuer = bio.issuer;
        rq.group = bio.group;
        rq.sector = bio.sector;
        rq.nr_sectors = bio.nr_sectors;
        rq.nr_segments = crate::merge::bio_segments(&bio, &self.limits).min(u16::MAX as u32) as u16;
        rq.ctx = ctx;
        rq.hctx = h;
        rq.submitter = crate::hctx::thread_number();
        self.ctxs[ctx.0 as usize].note_owner(rq.submitter);
        rq.init_life(now);
        rq.bios.push(bio);
        if let Some(t) = self.cfg.tracer.get() {
            t.rq_event(TraceAction::GetRq, &rq, now);
        }
        Ok(NewRq {
            id,
            hctx: h,
            bytes: rq.bytes(),
            mergeable: rq.mergeable(),
            bypass: !use_sched && sched.is_some(),
            flush,
            sched: use_sched.then(|| rq.elv()),
        })
    }

    /// `blk_finish_plug` / `blk_mq_flush_plug_list`.
    pub fn finish_plug(&self, sub: &mut Submitter, now: Nanos) {
        self.flush_plug(sub, now);
        sub.plug.stop();
    }

    /// Issues everything in the plug (it stays started).
    pub fn flush_plug(&self, sub: &mut Submitter, now: Nanos) {
        if sub.plug.is_empty() {
            return;
        }
        let mut ids = std::mem::take(&mut sub.scratch);
        ids.clear();
        let has_elevator = sub.plug.has_elevator;
        sub.plug.take(&mut ids);
        sub.plug.has_elevator = false;
        if has_elevator || self.elevator.is_some() {
            self.insert_plugged_sched(sub, &ids, now);
        } else {
            self.issue_list(sub, &ids, now);
        }
        sub.scratch = ids;
        self.end_sub_batch(sub, now);
    }

    /// Plugged requests with a scheduler: group runs of the same hardware queue, insert each
    /// run into the elevator (flushes to the head of the dispatch list), then run the queues.
    pub(super) fn insert_plugged_sched(
        &self,
        sub: &mut Submitter,
        ids: &[(RqId, HctxIdx)],
        now: Nanos,
    ) {
        let mut group = std::mem::take(&mut sub.group);
        group.clear();
        let mut cur: Option<HctxIdx> = None;
        sub.runs.clear();
        for &(id, h) in ids {
            let use_sched = self.rqs.lock(id).rq_flags.contains(RqFlags::USE_SCHED);
            if !use_sched {
                self.bypass_insert(h, id, true, now);
                if !sub.runs.contains(&h) {
                    sub.runs.push(h);
                }
                continue;
            }
            if cur != Some(h) {
                if let Some(c) = cur {
                    self.insert_sched(c, &group, false, now);
                    group.clear();
                }
                cur = Some(h);
                if !sub.runs.contains(&h) {
                    sub.runs.push(h);
                }
            }
            group.push(id);
        }
        if let Some(c) = cur {
            self.insert_sched(c, &group, false, now);
        }
        sub.group = group;
        let runs = std::mem::take(&mut sub.runs);
        for &h in &runs {
            self.run_hw_queue(h, now, &mut sub.batch);
        }
        sub.runs = runs;
    }

    /// Hands requests to the elevator and frees any it merged away.
    pub(crate) fn insert_sched(&self, h: HctxIdx, ids: &[RqId], at_head: bool, now: Nanos) {
        let elv = self
            .elevator
            .as_ref()
            .expect("insert_sched without elevator");
        let mut freed = Vec::new();
        self.hctxs[h.0 as usize]
            .stats
            .local()
            .queued
            .add(ids.len() as u64);
        self.trace_ids(TraceAction::Insert, ids.iter().copied(), now);
        elv.insert_requests(&self.elv_ctx(), h, ids, at_head, now, &mut freed);
        for id in freed {
            self.free_merged(id);
        }
    }

    /// Plugged requests without a scheduler (`blk_mq_dispatch_queue_requests`): each run of
    /// one hardware queue is issued directly, whatever waits on the dispatch list or however
    /// busy the queue has been. A driver without `queue_rqs` gets them one by one, and while
    /// its queue is stopped they wait on their software queue (`blk_mq_request_issue_directly`);
    /// what it turns away waits on the dispatch list. A driver with `queue_rqs` gets them
    /// even while its queue is stopped: `__blk_mq_flush_list` looks only at quiescing, so on
    /// a virtio disk whose ring is full of large writes a small read that fits still goes
    /// in (`virtio_queue_rqs` never looks at the stopped state). mqblk has no quiesced
    /// state to look at: an elevator switch or depth change waits until no request is
    /// allocated (`freeze.rs`), so no plugged request meets one.
    pub(crate) fn issue_list(&self, sub: &mut Submitter, ids: &[(RqId, HctxIdx)], now: Nanos) {
        let mut i = 0;
        while i < ids.len() {
            let h = ids[i].1;
            let j = i + ids[i..].iter().take_while(|&&(_, x)| x == h).count();
            let hctx = &self.hctxs[h.0 as usize];
            let counters = hctx.stats.local();
            counters.queued.add((j - i) as u64);
            // The driver is asked only when the queue is stopped, which is seldom.
            if hctx.is_stopped() && self.driver.queue_rqs() != QueueRqs::RequeueBusy {
                self.insert_ctx(sub.ctx, h, &ids[i..j], false, now);
            } else {
                let issued = self.dispatch_rq_list(h, &ids[i..j], true, now, &mut sub.batch);
                counters.direct.add(issued as u64);
            }
            i = j;
        }
    }

    /// A new request without a plug or a scheduler (the end of `blk_mq_submit_bio`): while
    /// the hardware queue has been busy (`dispatch_busy`) and is the only one, or the request
    /// is not synchronous, it waits on its software queue and the queue runs; otherwise it is
    /// issued directly (`blk_mq_try_issue_directly`), unless the queue is stopped.
    pub(super) fn issue_new(&self, sub: &mut Submitter, h: HctxIdx, id: RqId, now: Nanos) {
        let hctx = &self.hctxs[h.0 as usize];
        let counters = hctx.stats.local();
        counters.queued.add(1);
        let sync = self.rqs.lock(id).is_sync();
        if (hctx.is_busy() && (self.hctxs.len() == 1 || !sync)) || hctx.is_stopped() {
            self.insert_ctx(sub.ctx, h, &[id], false, now);
            self.run_hw_queue(h, now, &mut sub.batch);
            return;
        }
        let issued = self.dispatch_rq_list(h, &[id], false, now, &mut sub.batch);
        counters.direct.add(issued as u64);
    }

    /// Puts requests on their software queue and marks it pending (`blk_mq_insert_requests`,
    /// `blk_mq_insert_request`). Requests are not folded into each other here, as in the
    /// kernel: later bios may still merge into them (`blk_bio_list_merge`).
    pub(crate) fn insert_ctx<T: RqRef>(
        &self,
        ctx: CtxIdx,
        h: HctxIdx,
        ids: &[T],
        at_head: bool,
        now: Nanos,
    ) {
        self.trace_ids(TraceAction::Insert, ids.iter().map(|r| r.rq()), now);
        let hctx = &self.hctxs[h.0 as usize];
        let ty = hctx.ty as usize;
        let c = &self.ctxs[ctx.0 as usize];
        {
            let mut lists = c.lists.lock();
            for id in ids.iter().map(|r| r.rq()) {
                if at_head {
                    lists[ty].push_front(id);
                } else {
                    lists[ty].push_back(id);
                }
            }
            c.stats.inserted.add(ids.len() as u64);
        }
        hctx.mark_ctx_pending(c.index_hw[ty]);
    }

    /// Puts a request on the hardware queue's dispatch list, ahead of the elevator and the
    /// software queues (`blk_mq_request_bypass_insert`).
    pub(crate) fn bypass_insert(&self, h: HctxIdx, id: RqId, at_head: bool, now: Nanos) {
        self.trace_ids(TraceAction::Insert, [id].into_iter(), now);
        let hctx = &self.hctxs[h.0 as usize];
        let mut d = hctx.dispatch.lock();
        if at_head {
            d.push_front(id);
        } else {
            d.push_back(id);
        }
        hctx.dispatch_len.store(d.len() as u32, Ordering::Release);
    }
}
