//! From a request to submissions: the synchronous operations (flushes, block-device
//! zeroing), the flush plan of a PREFLUSH or FUA request, each bio's submission, and the ring
//! descriptors a request takes on a virtio disk.

use super::*;

impl UringDevice {
    /// Runs the request at once if this device does it synchronously: discard and
    /// write-zeroes on a block device (ioctls), and flushes on an IOPOLL ring, which takes
    /// no fsync. Returns its status, or `None` if it goes to the ring.
    pub(super) fn issue_sync(&self, rq: &Request) -> Option<BlkStatus> {
        let status = match rq.op {
            ReqOp::Discard | ReqOp::WriteZeroes if self.kind == BackingKind::BlockDevice => {
                self.zero_block_device(rq)
            }
            ReqOp::Flush if self.sync_flushes() => self.sync_data(),
            _ => return None,
        };
        Some(status)
    }

    /// `fdatasync` of every file, synchronously.
    pub(super) fn sync_data(&self) -> BlkStatus {
        for f in self.files.iter() {
            if let Err(e) = f.sync_data() {
                return io_status(&e);
            }
        }
        BlkStatus::Ok
    }

    /// Whether flushes run synchronously in `queue_rq`: an IOPOLL ring takes no fsync, and
    /// a device of several files needs one per file.
    pub(super) fn sync_flushes(&self) -> bool {
        self.cfg.iopoll || self.files.len() > 1
    }

    /// Discard or write-zeroes on a block device, flushes around it as its flags ask.
    pub(super) fn zero_block_device(&self, rq: &Request) -> BlkStatus {
        if rq.cmd_flags.contains(ReqFlags::PREFLUSH) {
            let s = self.sync_data();
            if !s.is_ok() {
                return s;
            }
        }
        for bio in &rq.bios {
            let Some((file, offset)) = self.locate(bio.sector << SECTOR_SHIFT, bio.bytes()) else {
                return BlkStatus::IoErr;
            };
            let (file, len) = (&self.files[file as usize], bio.bytes());
            let r = if rq.op == ReqOp::Discard {
                engine::blk_discard(file, offset, len)
            } else {
                engine::blk_zeroout(file, offset, len)
            };
            if let Err(e) = r {
                return io_status(&e);
            }
        }
        if rq.cmd_flags.contains(ReqFlags::FUA) {
            return self.sync_data();
        }
        BlkStatus::Ok
    }

    /// The flushes the tracker submits around the data.
    pub(super) fn flush_plan(&self, rq: &Request) -> FlushPlan {
        FlushPlan {
            // Where flushes are synchronous the preflush ran already.
            preflush: rq.cmd_flags.contains(ReqFlags::PREFLUSH)
                && rq.op != ReqOp::Flush
                && !self.sync_flushes(),
            // Writes carry FUA as RWF_DSYNC; the fallocate-based operations need an fsync.
            postflush: rq.cmd_flags.contains(ReqFlags::FUA)
                && matches!(rq.op, ReqOp::Discard | ReqOp::WriteZeroes),
        }
    }

    /// The submission of one bio, or `Invalid` for a bio this device cannot carry out.
    pub(super) fn bio_spec(
        &self,
        op: ReqOp,
        fua: bool,
        bio: &mut Bio,
    ) -> Result<SegSpec, BlkStatus> {
        let offset = bio.sector << SECTOR_SHIFT;
        let len = bio.bytes();
        let (kind, addr, rw_flags) = match op {
            ReqOp::Read | ReqOp::Write => {
                if len == 0 || u32::try_from(len).is_err() {
                    return Err(BlkStatus::Invalid);
                }
                let Some(buf) = bio.buf.as_mut() else {
                    return Err(BlkStatus::Invalid);
                };
                if (buf.len() as u64) < len {
                    return Err(BlkStatus::Invalid);
                }
                let addr = buf.as_mut_slice().as_mut_ptr().expose_provenance();
                if op == ReqOp::Read {
                    (OpKind::Read, addr, 0)
                } else {
                    (OpKind::Write, addr, if fua { libc::RWF_DSYNC } else { 0 })
                }
            }
            ReqOp::Discard => (OpKind::PunchHole, 0, 0),
            ReqOp::WriteZeroes => (OpKind::ZeroRange, 0, 0),
            ReqOp::Flush => (OpKind::Fsync, 0, 0),
            // This driver never declares zones, so the block layer refuses zone operations
            // before they get here (the kernel here has CONFIG_BLK_DEV_ZONED off: a zoned
            // device could not be opened anyway).
            ReqOp::ZoneAppend
            | ReqOp::ZoneReset
            | ReqOp::ZoneResetAll
            | ReqOp::ZoneOpen
            | ReqOp::ZoneClose
            | ReqOp::ZoneFinish => return Err(BlkStatus::NotSupp),
        };
        let mut buf_index = None;
        if matches!(kind, OpKind::Read | OpKind::Write) {
            buf_index = self
                .pool
                .as_ref()
                .and_then(|p| p.inner().index_of(addr, len as usize));
        }
        // The file the bio lies in; one that straddles two, or the gap between them, is an
        // I/O error (the block layer never builds one from a file set's jobs).
        let (file, offset) = if kind == OpKind::Fsync {
            (0, 0)
        } else {
            self.locate(offset, len).ok_or(BlkStatus::IoErr)?
        };
        Ok(SegSpec {
            kind,
            file,
            offset,
            addr,
            len: if kind == OpKind::Fsync { 0 } else { len },
            rw_flags,
            buf_index,
        })
    }

    /// Issues a request to ring `q` of hardware queue `hq`: everything but the synchronous
    /// cases.
    pub(super) fn issue_ring(
        &self,
        hq: &UringHctx,
        q: &mut HctxRing,
        rq: &mut Request,
    ) -> BlkStatus {
        let plan = self.flush_plan(rq);
        q.specs.clear();
        let mut data_descs = 0u32;
        if rq.op == ReqOp::Flush {
            q.specs.push(SegSpec {
                kind: OpKind::Fsync,
                file: 0,
                offset: 0,
                addr: 0,
                len: 0,
                rw_flags: 0,
                buf_index: None,
            });
        } else {
            let fua = rq.cmd_flags.contains(ReqFlags::FUA);
            for bio in rq.bios.iter_mut() {
                match self.bio_spec(rq.op, fua, bio) {
                    Ok(spec) => {
                        if self.virtqueue_size.is_some() {
                            data_descs += match spec.kind {
                                // The segments the core counted over the buffer's layout
                                // (`blk_rq_map_sg` joins adjoining pages as it does).
                                OpKind::Read | OpKind::Write if bio.bvecs.run > 0 => {
                                    self.limits.phys_segments(bio.bvecs, spec.len)
                                }
                                _ => descriptors(&spec),
                            };
                        }
                        if spec.buf_index.is_some() {
                            q.fixed_ios += 1;
                        } else if matches!(spec.kind, OpKind::Read | OpKind::Write) {
                            q.plain_ios += 1;
                        }
                        q.specs.push(spec);
                    }
                    Err(status) => return status,
                }
            }
        }
        let descs = self.virtqueue_size.map(|size| {
            // Besides its data a virtio-blk request has a header and a status byte
            // (`virtblk_add_req`); a discard or write-zeroes carries one range descriptor.
            // One that could never fit takes the whole ring when it is empty.
            (2 + data_descs).min(size)
        });
        let n = Tracker::first_phase_sqes(&q.specs, plan);
        if !q.ring.fits(n) {
            // More bios than the ring holds: the queue limits were not ours.
            return BlkStatus::Invalid;
        }
        if !q.ring.has_room(n) {
            // Hand what is queued to the kernel to make room, then look again.
            q.ring.push_ready();
            q.ring.submit();
            if !q.ring.has_room(n) {
                return BlkStatus::Resource;
            }
        }
        if let (Some(size), Some(d)) = (self.virtqueue_size, descs) {
            // Taken on the queue's count, which every ring of the queue shares, as one
            // virtqueue's descriptors are (`virtqueue_add` under the queue's lock).
            let took = hq
                .descs
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                    (held + d <= size).then_some(held + d)
                });
            if took.is_err() {
                // The ring is full (`virtblk_add_req` fails with -ENOSPC). From a queue run
                // (`virtio_queue_rq`) the request waits on the dispatch list and the queue
                // stops until a completion starts it (`virtblk_done`); from a plug
                // (`virtio_queue_rqs`) the core requeues it instead and the queue runs on
                // (`Driver::queue_rqs`). `queue_rq` asks for the stop.
                return BlkStatus::DevResource;
            }
        }
        if self.sync_flushes() && rq.cmd_flags.contains(ReqFlags::PREFLUSH) && rq.op != ReqOp::Flush
        {
            let s = self.sync_data();
            if !s.is_ok() {
                if let Some(d) = descs {
                    hq.descs.fetch_sub(d, Ordering::Relaxed);
                }
                return s;
            }
        }
        q.ring.tracker.start(rq.tag, rq.id, plan, &q.specs);
        if let Some(d) = descs {
            q.ring.tracker.hold_descs(rq.tag, d);
        }
        let pushed = q.ring.push_ready();
        assert_eq!(
            pushed, n,
            "uring: room was checked before the request started"
        );
        BlkStatus::Ok
    }
}

/// Ring descriptors a submission's data takes on a virtio-blk device without indirect
/// descriptors when its bio does not say how its buffer lies in memory: one per 4 KiB page
/// the buffer spans, as pages of a process's memory seldom adjoin physically (the kernel
/// joins those that do, `blk_rq_map_sg`, so it may need fewer); one range for a discard or
/// write-zeroes; none for a flush.
pub(super) fn descriptors(spec: &SegSpec) -> u32 {
    const PAGE: u64 = 4096;
    match spec.kind {
        OpKind::Read | OpKind::Write => {
            let (start, end) = (spec.addr as u64, spec.addr as u64 + spec.len.max(1));
            ((end - 1) / PAGE - start / PAGE + 1) as u32
        }
        OpKind::PunchHole | OpKind::ZeroRange => 1,
        OpKind::Fsync => 0,
    }
}
