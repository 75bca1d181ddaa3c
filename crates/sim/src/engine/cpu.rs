//! A virtual CPU's step: interrupt entry, reaping completions into its jobs (and checking
//! each is the bio it should be), then submitting what its jobs issue next.

use super::*;

impl Sim {
    /// One step of CPU `c`: interrupts, reaping, completions to jobs, new submissions.
    pub(super) fn cpu_step(&mut self, c: u16, t: u64) -> Result<(), SimError> {
        let ci = c as usize;
        let mut cur = t;
        let irqs = std::mem::take(&mut self.cpus[ci].irqs);
        cur += irqs as u64 * self.dcost.irq_ns;
        // Only the CPU the completions were handed to reaps them, where a worker does.
        let gated = self.gate_polls && irqs == 0;
        if gated {
            self.driver.set_may_reap(false);
        }
        let woken = std::mem::take(&mut self.cpus[ci].woken_remote);
        if std::mem::take(&mut self.cpus[ci].worker_woken) {
            cur += self.dcost.worker_wake_ns;
        }
        cur = self.op(c, cur, |q, sub, now| {
            q.poll(sub, now);
        });
        // A worker that completed here switches to each task it completed for, as a
        // wake-up from another CPU does.
        if woken || (self.gate_polls && irqs > 0 && !self.cpus[ci].sub.done.is_empty()) {
            // Each task woken for its completions (at least the one the wake-up was for).
            let mut tasks = std::mem::take(&mut self.woken_jobs);
            tasks.clear();
            tasks.extend(self.cpus[ci].sub.done.iter().map(|b| uncookie(b.private).0));
            tasks.sort_unstable();
            tasks.dedup();
            cur += self.cfg.cost.wake_ns * tasks.len().max(1) as u64;
            self.woken_jobs = tasks;
        }
        cur = self.reap(c, cur)?;
        let submitted = self.submit_all(c, cur);
        if gated {
            self.driver.set_may_reap(true);
        }
        cur = submitted?;
        let cpu = &mut self.cpus[ci];
        cpu.busy_ns += cur - t;
        cpu.busy_until = cur;
        // The worker runs here until the completions it handled are done.
        if let Some((w, until)) = &mut self.worker {
            if *w == c && irqs > 0 {
                *until = cur;
            }
        }
        // Anything the operations left for this CPU (inline completions) is handled next.
        if !self.cpus[ci].sub.done.is_empty() || self.cpus[ci].irqs > 0 {
            self.wake(c, cur);
        }
        Ok(())
    }

    #[inline]
    pub(super) fn reap(&mut self, c: u16, mut cur: u64) -> Result<u64, SimError> {
        let ci = c as usize;
        if self.cpus[ci].sub.done.is_empty() {
            return Ok(cur);
        }
        let done = std::mem::take(&mut self.cpus[ci].sub.done);
        let mut done = done;
        for bio in done.drain(..) {
            cur += self.cfg.cost.app_reap_ns;
            let (j, slot, seq) = uncookie(bio.private);
            let Some(job) = self.jobs.get_mut(j) else {
                return Err(self.invariant(format!(
                    "a completed bio carries an unknown job cookie {:#x}",
                    bio.private
                )));
            };
            let Some(Slot {
                submit_start: s0,
                submit_end: s1,
                bytes,
                op,
                index,
                ..
            }) = job.outstanding.take(slot, seq)
            else {
                return Err(self.invariant(format!(
                    "job {j} bio {seq} (sector {}) completed twice, or was never submitted",
                    bio.sector
                )));
            };
            if let Some(o) = &mut self.oracle {
                o.completed(stamp(bio.private), bio.status == BlkStatus::Ok);
            }
            if op != bio.op || bytes != bio.bytes() {
                return Err(self.invariant(format!(
                    "job {j} bio {seq}: completed as {:?} {} bytes, submitted as {op:?} {bytes}",
                    bio.op,
                    bio.bytes()
                )));
            }
            let measured = cur >= job.start + job.def.ramp.0;
            let d = Ddir::of_op(op);
            // Flushes and zone resets (`zonemode=zbd`'s) are not I/Os a job counts.
            let counted = !matches!(op, ReqOp::Flush | ReqOp::ZoneReset);
            if bio.status == BlkStatus::Ok && counted {
                job.done_ios += 1;
                job.done_bytes += bytes;
                // During the ramp the job's source still counts its completions (think
                // times); after it, the completion is reported below with its latency.
                if !measured && d != Ddir::Trim {
                    let at = Nanos(cur.saturating_sub(job.start));
                    job.def.source.completed(
                        at,
                        cur.saturating_sub(s0),
                        d,
                        bytes,
                        bio.sector << mqblk_core::SECTOR_SHIFT,
                    );
                }
            }
            if bio.status != BlkStatus::Ok {
                job.errors += 1;
                let errno = bio.status.to_errno();
                if matches!(op, ReqOp::Read | ReqOp::Write) {
                    let at = bio.sector << mqblk_core::SECTOR_SHIFT;
                    job.def.source.rw_failed(op == ReqOp::Write, at, bytes);
                }
                let goes_on = job.def.source.io_failed(op == ReqOp::Read, errno);
                job.stats.io_error(errno, !goes_on);
            } else if op == ReqOp::Flush && measured {
                // fio's `sync` latency: the flushes of `fsync=N` and `end_fsync`.
                job.stats.sync.record(cur.saturating_sub(s0));
            } else if counted && measured {
                job.ios += 1;
                job.bytes += bytes;
                let ioprio = job.def.source.counted_ioprio(bio.ioprio);
                // The windows that ended before this completion are sampled first.
                job.sampler
                    .tick(cur.saturating_sub(job.start), &mut job.stats);
                job.stats
                    .dir_mut(d)
                    .record_io_prio(bytes, s1 - s0, cur.saturating_sub(s1), ioprio);
                if d != Ddir::Trim {
                    // fio's latency_target and max_latency judge the total latency.
                    let at = Nanos(cur.saturating_sub(job.start));
                    job.def.source.completed(
                        at,
                        cur.saturating_sub(s0),
                        d,
                        bytes,
                        bio.sector << mqblk_core::SECTOR_SHIFT,
                    );
                    if job.def.source.take_stats_reset() {
                        job.stats.restart();
                        job.sampler.restart();
                        job.ios = 0;
                        job.bytes = 0;
                        job.restarted_at = Some(cur);
                    }
                    if let Some((errno, e)) = job.def.source.take_error() {
                        job.errors += 1;
                        job.stats.io_error(errno, true);
                        job.error_text.get_or_insert(e);
                    }
                }
                if let Some(logs) = &mut job.def.logs {
                    let at = cur.saturating_sub(job.start);
                    logs.io(
                        at,
                        d,
                        bytes,
                        bio.sector << 9,
                        s1 - s0,
                        cur.saturating_sub(s1),
                        ioprio,
                    );
                }
            }
            job.end = cur;
            job.completed.mark(index);
            self.total_outstanding -= 1;
            if counted {
                job.reaped += 1;
            }
        }
        self.cpus[ci].sub.done = done;
        self.wake_waiters(cur);
        Ok(cur)
    }

    #[inline]
    pub(super) fn submit_all(&mut self, c: u16, mut cur: u64) -> Result<u64, SimError> {
        let ci = c as usize;
        let n = self.cpus[ci].jobs.len();
        if n == 0 {
            return Ok(cur);
        }
        let first = self.cpus[ci].rr % n;
        self.cpus[ci].rr = self.cpus[ci].rr.wrapping_add(1);
        for k in 0..n {
            let j = self.cpus[ci].jobs[(first + k) % n] as usize;
            cur = self.submit_job(c, j, cur)?;
        }
        Ok(cur)
    }

    /// Where a task's system call returns on CPU `c` at `cur`: a kblockd worker woken here
    /// for requeue work the call kicked runs before the task goes on. kblockd's workers
    /// are high priority (`blk_dev_init` makes kblockd `WQ_HIGHPRI`: nice -20 workers per
    /// CPU), and the requeue work is queued on the kicking CPU
    /// (`blk_mq_kick_requeue_list`), so its worker preempts the task at once.
    /// The task's next bios then find the requeued requests back in the software queue,
    /// where they merge (`blk_bio_list_merge`) while a stopped queue keeps them there:
    /// traced on this machine's virtio disk under `none`, fio's sequential 128 KiB writes
    /// went out as 896 KiB requests that way, the kworker running between fio's
    /// submissions. Only after a requeue an operation on this CPU traced is the work
    /// looked for (a flush sequence's step onto the requeue list runs when the CPU is
    /// free, as before), so that a run without requeues pays nothing here.
    pub(super) fn kblockd_preempts(&mut self, c: u16, cur: u64) -> u64 {
        let ci = c as usize;
        if !std::mem::take(&mut self.cpus[ci].requeued) {
            return cur;
        }
        if !self
            .queue
            .take_due_requeue_here(&self.cpus[ci].sub, Nanos(cur))
        {
            return cur;
        }
        let start = cur + self.cfg.cost.timer_ns;
        self.op(c, start, |q, sub, now| q.requeue_work(sub, now))
    }

    pub(super) fn submit_job(&mut self, c: u16, j: usize, mut cur: u64) -> Result<u64, SimError> {
        let ci = c as usize;
        {
            let job = &mut self.jobs[j];
            if !job.started || job.finished {
                return Ok(cur);
            }
            if job.draining {
                if job.inflight() > 0 {
                    return Ok(cur);
                }
                job.draining = false;
            }
        }
        let batch = self.jobs[j].def.batch.max(1);
        // fio's `iodepth_batch_submit` plugs a batch; otherwise the kernel's `__submit_bio`
        // plugs each bio on its own (`QueueSettings::submit_bio_plugs`).
        let plugged = batch > 1;
        let plug_each = !plugged && self.cfg.device.queue.submit_bio_plugs;
        if plugged {
            self.cpus[ci].sub.plug.start();
        }
        let mut in_batch = 0;
        let nr_jobs = self.jobs.len();
        loop {
            let job = &mut self.jobs[j];
            if job.done_issuing {
                break;
            }
            // The rest of a split bio already counts in the depth: it carries on first.
            let rest_waits = job.pending.as_ref().is_some_and(|b| b.split.is_some());
            // fio's latency_target search sets the depth as it goes.
            let depth = job.def.source.depth().unwrap_or(job.def.iodepth);
            // Full: like fio, wait for `iodepth_batch_complete_min` completions, and for
            // the depth to fall to `iodepth_low`, before issuing again.
            let refill = job
                .def
                .batch_complete_min
                .max(depth.saturating_sub(job.def.iodepth_low.min(depth)));
            if job.inflight() >= depth && !rest_waits {
                job.refilling = refill > 1;
                break;
            }
            if job.refilling && !rest_waits {
                if depth.saturating_sub(job.inflight()) < refill {
                    break;
                }
                job.refilling = false;
            }
            // fio's completion distribution: what the job collected before issuing again
            // (the threaded runner's reap call).
            // At most `iodepth_batch_complete_max` per reap, as the runner handles them.
            while job.reaped > 0 {
                let n = job.reaped.min(job.def.batch_complete_max as u64);
                job.stats.mark_complete(n);
                job.reaped -= n;
            }
            if job.think_until > cur {
                let at = job.think_until;
                self.wake(c, at);
                break;
            }
            if let Some(w) = job.waiting_for.take() {
                // Woken (by `wake_waiters`) once the awaited I/O is done or the gate open,
                // or at its run time's end (a task sleeping on a gate that no longer opens,
                // as jbd2 for commits once its clients stopped), which the check below ends.
                let end = job.def.limit.time.map(|d| job.start + d.0);
                let ended = end.is_some_and(|e| cur >= e);
                let over = self.wait_over(&w);
                if matches!(w, Awaited::Gate(..)) && !ended && !over && self.alone(j) {
                    // Nobody is left to raise the gate: the task's work is over.
                    self.wait_ended(&w);
                    self.jobs[j].done_issuing = true;
                    break;
                }
                if !ended && !over {
                    if let (Awaited::Gate(..), Some(at)) = (&w, end) {
                        // Another wake may have taken the CPU's place in line: keep the end's.
                        self.wake(c, at);
                    }
                    self.jobs[j].waiting_for = Some(w);
                    break;
                }
                self.wait_ended(&w);
            }
            let job = &mut self.jobs[j];
            let mut since = None;
            let (bio, index) = match job.pending.take() {
                Some(b) => {
                    since = job.pending_since.take();
                    (b, job.pending_index)
                }
                None => {
                    let lim = job.def.limit;
                    let over = lim.ios.is_some_and(|n| job.issued >= n)
                        || lim.bytes.is_some_and(|b| job.issued_bytes >= b)
                        || lim.time.is_some_and(|d| cur >= job.start + d.0);
                    if over {
                        job.done_issuing = true;
                        break;
                    }
                    let next = job.def.source.next(Nanos(cur - job.start), &mut job.rng);
                    if self.nr_gate_waiting > 0 {
                        // Asking a source may have raised a gate another job sleeps on.
                        self.wake_gate_waiters(cur);
                    }
                    let job = &mut self.jobs[j];
                    match next {
                        Next::Done => {
                            job.done_issuing = true;
                            break;
                        }
                        Next::Think(d) => {
                            job.think_until = cur + d.0.max(1);
                            continue;
                        }
                        Next::Compute(d) => {
                            // The CPU's user time goes to one job's work at a time, in
                            // the order they asked for it.
                            let cpu = &mut self.cpus[ci];
                            let end = cur.max(cpu.user_until) + d.0.max(1);
                            cpu.user_until = end;
                            job.think_until = end;
                            continue;
                        }
                        Next::Until(t) => {
                            let at = job.start + t.0;
                            if at > cur {
                                job.think_until = at;
                            }
                            continue;
                        }
                        Next::Drain => {
                            if job.inflight() > 0 {
                                job.draining = true;
                                break;
                            }
                            continue;
                        }
                        Next::Unplug => {
                            if plugged {
                                cur = self.op(c, cur, |q, sub, now| q.flush_plug(sub, now));
                            }
                            continue;
                        }
                        Next::After(w) => {
                            if w.job as usize >= nr_jobs || w.job as usize == j {
                                return Err(self.invariant(format!(
                                    "job {j} waits for I/O {} of job {}, which is not another job of the run",
                                    w.io, w.job
                                )));
                            }
                            job.waiting_for = Some(Awaited::Io(w));
                            self.nr_waiting += 1;
                            continue;
                        }
                        Next::Await(g, n) => {
                            if g.get() < n {
                                job.waiting_for = Some(Awaited::Gate(g, n));
                                self.nr_waiting += 1;
                                self.nr_gate_waiting += 1;
                            }
                            continue;
                        }
                        Next::Io(io) => {
                            job.issued += 1;
                            job.issued_bytes += io.nr_sectors as u64 * 512;
                            (
                                // The job's buffer, as it lies in memory (`iomem=`).
                                Bio::new(io.op, io.sector, io.nr_sectors)
                                    .with_bvecs(job.def.bvecs)
                                    .with_flags(io.flags)
                                    .with_ioprio(io.ioprio.unwrap_or(job.def.ioprio))
                                    .with_issuer(job.def.issuer, job.def.group),
                                job.issued - 1,
                            )
                        }
                    }
                }
            };
            let job = &mut self.jobs[j];
            // The rest of a bio the queue split, back for want of a tag: it belongs to the
            // bio already outstanding under its cookie and carries on where it stopped, as
            // the task sleeping in tag allocation would (no second submission).
            let rest = bio.split.is_some();
            let (slot, seq, bio) = if rest {
                let (_, slot, seq) = uncookie(bio.private);
                (slot, seq, bio)
            } else {
                let seq = job.next_seq;
                job.next_seq += 1;
                let slot = job.outstanding.insert(Slot {
                    seq,
                    index,
                    submit_start: cur,
                    submit_end: cur,
                    bytes: bio.bytes(),
                    op: bio.op,
                });
                self.total_outstanding += 1;
                cur += self.cfg.cost.app_submit_ns;
                let bio = bio.with_private(cookie(j, slot, seq));
                if let Some(o) = &mut self.oracle {
                    o.submitted(
                        stamp(bio.private),
                        bio.op,
                        bio.flags,
                        bio.sector,
                        bio.nr_sectors,
                        j,
                        index,
                    );
                }
                (slot, seq, bio)
            };
            let start = cur;
            let mut outcome = None;
            cur = self.op(c, cur, |q, sub, now| {
                outcome = Some(if plug_each {
                    q.submit_bio_plugged(sub, bio, now)
                } else {
                    q.submit_bio(sub, bio, now)
                });
            });
            match outcome.expect("submit ran") {
                Submit::Queued | Submit::Merged | Submit::Failed | Submit::Done => {
                    if let Some(e) = self.jobs[j].outstanding.get_mut(slot) {
                        if !rest {
                            e.submit_start = since.unwrap_or(start);
                        }
                        e.submit_end = cur;
                    }
                }
                Submit::Busy(bio) => {
                    // No tag: sleep until one frees (sbitmap's wait queue). A bio that was
                    // split and partly went in stays outstanding; its rest waits.
                    if bio.split.is_none() {
                        self.jobs[j].outstanding.take(slot, seq);
                        self.jobs[j].pending_since = Some(since.unwrap_or(start));
                        self.total_outstanding -= 1;
                    }
                    self.jobs[j].pending = Some(*bio);
                    self.jobs[j].pending_index = index;
                    self.cpus[ci].tag_wait = true;
                    break;
                }
            }
            if !plugged {
                // One system call per I/O (fio's `iodepth_batch_submit=1`).
                cur = self.kblockd_preempts(c, cur);
            }
            if rest {
                continue;
            }
            in_batch += 1;
            if in_batch >= batch {
                // fio's submit and depth distributions, per submission of a batch.
                let job = &mut self.jobs[j];
                job.stats.mark_submit(in_batch as u64);
                job.stats.mark_depth(job.inflight() as u64, in_batch as u64);
                if plugged {
                    cur = self.op(c, cur, |q, sub, now| q.flush_plug(sub, now));
                    cur = self.kblockd_preempts(c, cur);
                }
                in_batch = 0;
            }
        }
        if in_batch > 0 {
            let job = &mut self.jobs[j];
            job.stats.mark_submit(in_batch as u64);
            job.stats.mark_depth(job.inflight() as u64, in_batch as u64);
        }
        // A lone bio's own plug is still open if it waits for a tag.
        if plugged || (plug_each && self.cpus[ci].sub.plug.is_started()) {
            cur = self.op(c, cur, |q, sub, now| q.finish_plug(sub, now));
        }
        // Inline completions (and errors) land in `done` during submission.
        if !self.cpus[ci].sub.done.is_empty() {
            self.wake(c, cur);
        }
        let job = &mut self.jobs[j];
        if job.done_issuing && job.inflight() == 0 && job.pending.is_none() && !job.finished {
            job.finished = true;
            self.unfinished -= 1;
            job.end = job.end.max(cur);
            if let Some(cmd) = &job.def.exec_postrun {
                mqblk_workload::exec::run_hook(&job.def.name, cmd, "postrun");
            }
            self.job_finished(j, cur);
        }
        Ok(cur)
    }
}
