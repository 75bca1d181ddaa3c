//! The vhost-user-blk backend: each virtqueue is a submitter of its own.
//!
//! A virtqueue is served by one thread (rust-vmm's `vhost-user-backend` runs one epoll loop
//! per entry of [`VhostUserBackend::queues_per_thread`]): by default every virtqueue has a
//! thread of its own; with fewer threads virtqueue i goes to thread i mod T, and T = 1 is
//! QEMU's dataplane, one I/O thread for every virtqueue of the device.
//! That thread owns one software queue (Ctx) of the device's `RequestQueue`, which maps it to
//! a hardware queue, so a guest's N virtqueues spread over the hardware queues as the guest's
//! own blk-mq spreads its CPUs over the virtqueues. On a kick the thread takes every
//! available descriptor chain, submits its bios, reaps, copies read data into the guest's
//! buffers, writes the status byte and returns the chain to the used ring, notifying the
//! guest as event-idx allows; it keeps taking chains while any are in flight and returns only
//! when nothing is in flight and the ring is empty with notifications re-enabled. So nothing
//! of a virtqueue outlives one `handle_event` call: a guest that resets a ring, stops it
//! (`GET_VRING_BASE` waits for the thread, [`VhostUserBackend::stop_vring`]) or disconnects
//! leaves no request and no tag behind.
//!
//! Guest memory is only touched through `vm-memory`'s checked accessors: a descriptor that
//! points outside guest memory fails its request with IOERR (or, if not even the status byte
//! can be written, is returned with nothing written), never a fault in the server.

use crate::virtio_blk::{self as vblk, Geometry, Plan};
use mqblk_core::{Bio, BlkStatus, CtxIdx, ReqOp, RequestQueue, SpareBufs};
use mqblk_runtime::{MonotonicClock, SubmitterHandle};
use parking_lot::Mutex;
use std::io;
use std::sync::Arc;
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::{VhostUserBackend, VringRwLock, VringT};
use virtio_queue::{DescriptorChain, QueueT};
use vm_memory::{
    Bytes, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryLoadGuard,
    GuestMemoryMmap,
};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};

/// Buffers a virtqueue keeps for reuse.
const SPARE_BUFFERS: usize = 64;

/// Guest memory as the backend sees it.
pub type GuestMem = GuestMemoryAtomic<GuestMemoryMmap>;
type Mem = GuestMemoryLoadGuard<GuestMemoryMmap>;

/// One virtqueue's figures.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct VqStats {
    pub queue: u16,
    /// The hardware queue its software queue maps to.
    pub hctx: u16,
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Requests answered with a status other than OK (or not answerable at all).
    pub errors: u64,
    /// Interrupts sent to the guest (used-buffer notifications event-idx let through).
    pub notifications: u64,
    /// Kicks that found the thread idle (`handle_event` calls).
    pub kicks: u64,
    pub max_inflight: u64,
}

/// A request whose bios are in flight.
#[derive(Default)]
struct Slot {
    busy: bool,
    head: u16,
    /// Bytes of read data to copy into the writable part at completion (0: not a read).
    read_len: u32,
    /// Bytes a write carries (for the figures).
    write_len: u32,
    /// A zone append: the sector it went to is written before the status.
    append: bool,
    /// The device-writable segments (guest address, length); the status byte is the last
    /// byte of the last non-empty one.
    wr: Vec<(u64, u32)>,
    bios: u32,
    status: u8,
    /// Answered, and waiting for the requests made available before it (in order only):
    /// the bytes written into the guest.
    answered: Option<u32>,
}

/// One virtqueue's submitter and its requests in flight.
struct VqState {
    h: SubmitterHandle,
    slots: Vec<Slot>,
    free: Vec<usize>,
    inflight: usize,
    /// Data buffers kept for reuse, by reads and writes alike.
    spare: SpareBufs,
    /// Device-readable segments of the chain being started (scratch).
    rd: Vec<(u64, u32)>,
    /// Chains finished and not yet in the used ring: (head, bytes written into the guest).
    ready: Vec<(u16, u32)>,
    /// In order: the slots of the chains taken and not yet in `ready`, in the order the
    /// guest made them available.
    order: Option<std::collections::VecDeque<usize>>,
    stats: VqStats,
}

/// A block device offered to virtual machines: its queue, what the guest is told, and one
/// submitter per virtqueue. It outlives connections (a guest that reconnects finds the same
/// software queues).
pub struct BlkDevice {
    pub name: String,
    pub queue: Arc<RequestQueue>,
    pub geometry: Geometry,
    /// Threads serving the virtqueues (virtqueue i on thread i mod `threads`).
    pub threads: u16,
    /// GET_ID's answer.
    pub serial: String,
    config: Vec<u8>,
    vqs: Vec<Mutex<VqState>>,
    /// A front end has been told it left a zoned device's feature out (said once).
    warned_unzoned: std::sync::atomic::AtomicBool,
}

impl BlkDevice {
    /// A device over `queue` with `num_queues` virtqueues of up to `queue_size` descriptors.
    /// Virtqueue i submits through a software queue of its own that maps to hardware queue
    /// `i % nr_hw_queues` where one does ([`pick_ctxs`]); the others are left to the caller
    /// ([`BlkDevice::spare_ctx`]).
    pub fn new(
        name: &str,
        queue: Arc<RequestQueue>,
        num_queues: u16,
        queue_size: u16,
        read_only: bool,
    ) -> Result<BlkDevice, String> {
        if num_queues == 0 || num_queues > 64 {
            return Err(format!("num-queues={num_queues}: must be 1..=64"));
        }
        if !queue_size.is_power_of_two() || !(2..=32768).contains(&queue_size) {
            return Err(format!(
                "queue-size={queue_size}: must be a power of two in 2..=32768"
            ));
        }
        let ctxs = pick_ctxs(&queue, num_queues).ok_or_else(|| {
            format!(
                "{num_queues} virtqueues need as many software queues; the device has {}",
                queue.nr_ctx()
            )
        })?;
        let limits = *queue.limits();
        let geometry = Geometry {
            sectors: limits.capacity_sectors,
            block_size: limits.logical_block_size,
            num_queues,
            queue_size,
            read_only,
            zoned: limits.zoned.map(|z| vblk::ZonedGeometry {
                zone_sectors: z.zone_sectors,
                max_open_zones: z.max_open_zones,
                max_active_zones: z.max_active_zones,
                // The device's own, or what the block layer's emulation takes in one bio;
                // never more than the largest request served (`MAX_DATA_BYTES`), so a
                // guest cannot make the server allocate a whole zone's worth at once.
                max_append_sectors: if z.emulates_zone_append() {
                    limits.max_sectors.min(z.zone_sectors)
                } else {
                    z.max_zone_append_sectors
                }
                .min((vblk::MAX_DATA_BYTES >> 9) as u32),
                write_granularity: limits.logical_block_size,
            }),
        };
        let vqs = (0..num_queues)
            .zip(ctxs)
            .map(|(i, ctx)| {
                let hctx = queue.map_queue(ctx, mqblk_core::HctxType::Default).0;
                Mutex::new(VqState {
                    h: SubmitterHandle::new(queue.clone(), ctx, MonotonicClock::new()),
                    slots: Vec::new(),
                    free: Vec::new(),
                    inflight: 0,
                    spare: SpareBufs::new(SPARE_BUFFERS),
                    rd: Vec::new(),
                    ready: Vec::new(),
                    order: None,
                    stats: VqStats {
                        queue: i,
                        hctx,
                        ..VqStats::default()
                    },
                })
            })
            .collect();
        let mut serial = format!("mqblk-{name}");
        serial.truncate(20);
        Ok(BlkDevice {
            name: name.to_string(),
            threads: num_queues,
            config: vblk::config_space(&geometry),
            geometry,
            serial,
            queue,
            vqs,
            warned_unzoned: Default::default(),
        })
    }

    /// Serves the virtqueues with `threads` threads (1..=num_queues), virtqueue i on thread
    /// i mod `threads`.
    pub fn with_threads(mut self, threads: u16) -> Result<BlkDevice, String> {
        if !(1..=self.geometry.num_queues).contains(&threads) {
            return Err(format!(
                "vq-threads={threads}: must be 1..={} (the virtqueues)",
                self.geometry.num_queues
            ));
        }
        self.threads = threads;
        Ok(self)
    }

    /// Returns each virtqueue's requests to the guest in the order it made them available
    /// (`in_order`), the rule of `VIRTIO_F_IN_ORDER` (virtio 1.1, 2.6.9), without offering
    /// the feature. Its use is a restart: a vhost-user front end that loses its back end
    /// cannot ask where the ring stood (`GET_VRING_BASE`), so QEMU takes the used index as
    /// the next available one (`virtio_queue_restore_last_avail_idx`, which reads the split
    /// ring's `used->idx` from guest memory; for a packed ring it keeps nothing, so this holds
    /// for split rings, Linux's and QEMU's default) and sends it with `SET_VRING_BASE` to the
    /// back end that connects next. Answered in order, the chains
    /// from there on are exactly those not answered, and the new server takes them again;
    /// answered out of order, it would take some answered ones twice and never see
    /// others. The cost: a request answered early waits for the ones before it.
    pub fn with_in_order(self, in_order: bool) -> BlkDevice {
        for v in &self.vqs {
            v.lock().order = in_order.then(std::collections::VecDeque::new);
        }
        self
    }

    /// The virtqueues thread `t` serves, as a bit mask.
    fn thread_mask(&self, t: u16) -> u64 {
        (0..self.geometry.num_queues)
            .filter(|q| q % self.threads == t)
            .fold(0, |m, q| m | 1 << q)
    }

    /// A software queue no virtqueue submits through (for the server's own requests).
    pub fn spare_ctx(&self) -> Option<CtxIdx> {
        let used: Vec<CtxIdx> = self.vqs.iter().map(|v| v.lock().h.ctx()).collect();
        (0..self.queue.nr_ctx() as u16)
            .map(CtxIdx)
            .find(|c| !used.contains(c))
    }

    /// Each virtqueue's figures so far.
    pub fn stats(&self) -> Vec<VqStats> {
        self.vqs.iter().map(|v| v.lock().stats.clone()).collect()
    }

    /// Requests in flight on any virtqueue (0 whenever no `handle_event` is running).
    pub fn inflight(&self) -> usize {
        self.vqs.iter().map(|v| v.lock().inflight).sum()
    }
}

/// Software queues for `n` virtqueues: for virtqueue i an unused one that maps to hardware
/// queue `i % nr_hw_queues` (the kernel's CPU map groups software queues, so the first ones
/// need not cover every hardware queue), else any unused one; `None` if there are too few.
pub fn pick_ctxs(queue: &RequestQueue, n: u16) -> Option<Vec<CtxIdx>> {
    let nr_hw = queue.nr_hw_queues();
    let mut free: Vec<CtxIdx> = (0..queue.nr_ctx() as u16).map(CtxIdx).collect();
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        let want = (i % nr_hw) as u16;
        let at = free
            .iter()
            .position(|&c| queue.map_queue(c, mqblk_core::HctxType::Default).0 == want)
            .or((!free.is_empty()).then_some(0))?;
        out.push(free.remove(at));
    }
    Some(out)
}

/// One connection's view of a [`BlkDevice`]: the device and the guest's memory.
#[derive(Clone)]
pub struct Backend {
    dev: Arc<BlkDevice>,
    mem: GuestMem,
}

impl Backend {
    /// `mem` is the memory handed to the daemon; the daemon swaps new tables into it.
    pub fn new(dev: Arc<BlkDevice>, mem: GuestMem) -> Backend {
        Backend { dev, mem }
    }

    /// Serves one virtqueue until nothing is in flight and its ring is empty.
    fn process(&self, vring: &VringRwLock, st: &mut VqState) -> io::Result<()> {
        let mem = self.mem.memory();
        loop {
            // Kicks are not needed while this loop looks at the ring itself.
            vring.disable_notification().map_err(io::Error::other)?;
            let mut started = 0;
            st.h.start_plug();
            loop {
                let chain = vring
                    .get_mut()
                    .get_queue_mut()
                    .pop_descriptor_chain(mem.clone());
                let Some(chain) = chain else { break };
                self.start(&mem, chain, st);
                started += 1;
            }
            st.h.finish_plug();
            st.stats.max_inflight = st.stats.max_inflight.max(st.inflight as u64);
            if st.inflight > 0 {
                if st.ready.is_empty() && started == 0 {
                    st.h.reap(1, 200_000);
                } else {
                    st.h.poll();
                }
                st.complete(&mem);
            }
            if !st.ready.is_empty() {
                for &(head, len) in &st.ready {
                    vring.add_used(head, len).map_err(io::Error::other)?;
                }
                st.ready.clear();
                if vring.needs_notification().map_err(io::Error::other)? {
                    vring.signal_used_queue()?;
                    st.stats.notifications += 1;
                }
            }
            if st.inflight == 0 && started == 0 {
                // Re-enable kicks; a chain added meanwhile is served now rather than missed.
                if !vring.enable_notification().map_err(io::Error::other)? {
                    return Ok(());
                }
            }
        }
    }

    /// Takes one chain: answers it at once or submits its bios.
    fn start(&self, mem: &Mem, chain: DescriptorChain<Mem>, st: &mut VqState) {
        let head = chain.head_index();
        let slot = st.free.pop().unwrap_or_else(|| {
            st.slots.push(Slot::default());
            st.slots.len() - 1
        });
        st.stats.requests += 1;
        let mut rd = std::mem::take(&mut st.rd);
        rd.clear();
        if let Some(order) = &mut st.order {
            order.push_back(slot);
        }
        let s = &mut st.slots[slot];
        s.busy = true;
        s.answered = None;
        s.head = head;
        s.read_len = 0;
        s.write_len = 0;
        s.append = false;
        s.bios = 0;
        s.status = vblk::S_OK;
        s.wr.clear();
        let (mut rd_len, mut wr_len) = (0u64, 0u64);
        for d in chain {
            if d.is_write_only() {
                s.wr.push((d.addr().0, d.len()));
                wr_len += u64::from(d.len());
            } else {
                rd.push((d.addr().0, d.len()));
                rd_len += u64::from(d.len());
            }
        }
        let mut header = [0u8; 16];
        let plan = if wr_len == 0 {
            // No room for a status byte: nothing can be answered.
            Plan::Done(vblk::S_IOERR)
        } else if rd_len < vblk::HEADER_BYTES || gather(mem, &rd, 0, &mut header).is_err() {
            Plan::Done(vblk::S_IOERR)
        } else {
            vblk::plan(&self.dev.geometry, &header, rd_len, wr_len)
        };
        let dev = &self.dev;
        let chunk = dev.queue.limits().max_sectors.max(8);
        let bio = |op: ReqOp, sector: u64, sectors: u32| Bio::new(op, sector, sectors);
        match plan {
            Plan::Done(status) => st.finish(mem, slot, status, 0),
            Plan::Read { len: 0, .. } | Plan::Write { len: 0, .. } => {
                st.finish(mem, slot, vblk::S_OK, 0)
            }
            Plan::Read { sector, len } => {
                let buf = st.spare.take(len as usize);
                st.slots[slot].read_len = len;
                st.submit(slot, bio(ReqOp::Read, sector, len / 512).with_buf(buf));
            }
            Plan::Write { sector, len } => {
                let mut buf = st.spare.take(len as usize);
                if gather(mem, &rd, vblk::HEADER_BYTES, buf.as_mut_slice()).is_err() {
                    st.finish(mem, slot, vblk::S_IOERR, 0);
                } else {
                    st.slots[slot].write_len = len;
                    st.submit(slot, bio(ReqOp::Write, sector, len / 512).with_buf(buf));
                }
            }
            Plan::ZoneAppend { sector, len } => {
                let mut buf = st.spare.take(len as usize);
                if gather(mem, &rd, vblk::HEADER_BYTES, buf.as_mut_slice()).is_err() {
                    st.finish(mem, slot, vblk::S_IOERR, 0);
                } else {
                    let s = &mut st.slots[slot];
                    s.write_len = len;
                    s.append = true;
                    st.submit(
                        slot,
                        bio(ReqOp::ZoneAppend, sector, len / 512).with_buf(buf),
                    );
                }
            }
            Plan::ZoneReport { sector, nr } => {
                // The zones' state as the block layer has it (`blkdev_report_zones`),
                // answered at once: a report moves no data through the queue.
                let (status, n) = match dev.queue.report_zones(sector, nr) {
                    Some(zones) => {
                        let bytes = vblk::zone_report(&zones[..zones.len().min(nr)]);
                        match scatter(mem, &st.slots[slot].wr, 0, &bytes) {
                            Ok(()) => (vblk::S_OK, bytes.len() as u32),
                            Err(()) => (vblk::S_IOERR, 0),
                        }
                    }
                    None => (vblk::S_IOERR, 0),
                };
                st.finish(mem, slot, status, n);
            }
            Plan::ZoneMgmt { op, sector } => st.submit(slot, bio(op, sector, 0)),
            Plan::Flush => st.submit(slot, bio(ReqOp::Flush, 0, 0)),
            Plan::GetId => {
                let id = vblk::id_bytes(&dev.serial, wr_len - 1);
                let ok = scatter(mem, &st.slots[slot].wr, 0, &id).is_ok();
                let (status, n) = if ok {
                    (vblk::S_OK, id.len() as u32)
                } else {
                    (vblk::S_IOERR, 0)
                };
                st.finish(mem, slot, status, n);
            }
            Plan::Ranges { zeroes, count } => {
                let mut raw = vec![0u8; count as usize * vblk::RANGE_BYTES];
                let ranges = gather(mem, &rd, vblk::HEADER_BYTES, &mut raw)
                    .map_err(|_| vblk::S_IOERR)
                    .and_then(|_| vblk::parse_ranges(&dev.geometry, zeroes, &raw));
                match ranges {
                    Err(status) => st.finish(mem, slot, status, 0),
                    Ok(ranges) => {
                        let op = if zeroes {
                            ReqOp::WriteZeroes
                        } else {
                            ReqOp::Discard
                        };
                        // Count every bio before the first is submitted: one may complete
                        // while the next waits for a tag.
                        let bios: Vec<Bio> = ranges
                            .iter()
                            .flat_map(|r| {
                                let end = r.sector + u64::from(r.sectors);
                                (r.sector..end)
                                    .step_by(chunk as usize)
                                    .map(move |s| (s, (end - s).min(u64::from(chunk)) as u32))
                            })
                            .map(|(s, n)| bio(op, s, n))
                            .collect();
                        if bios.is_empty() {
                            st.finish(mem, slot, vblk::S_OK, 0);
                        } else {
                            st.slots[slot].bios = bios.len() as u32;
                            st.inflight += 1;
                            for b in bios {
                                st.h.submit(b.with_private(slot as u64));
                            }
                        }
                    }
                }
            }
        }
        st.rd = rd;
    }
}

impl VqState {
    /// Submits a request's one bio.
    fn submit(&mut self, slot: usize, bio: Bio) {
        self.slots[slot].bios = 1;
        self.inflight += 1;
        self.h.submit(bio.with_private(slot as u64));
    }

    /// Takes the completed bios; a request whose last bio completed gets its data and
    /// status written and goes to the ready list.
    fn complete(&mut self, mem: &Mem) {
        let mut done = std::mem::take(self.h.done());
        for mut bio in done.drain(..) {
            let slot = bio.private as usize;
            let s = &mut self.slots[slot];
            debug_assert!(s.busy && s.bios > 0, "a completion for no request");
            s.bios -= 1;
            if s.status == vblk::S_OK && !bio.status.is_ok() {
                s.status = status_of(bio.op, bio.status);
            }
            if bio.op == ReqOp::Read && s.status == vblk::S_OK {
                let buf = bio.buf.as_ref().expect("a read carries its buffer");
                let n = (s.read_len as usize).min(buf.len());
                if scatter(mem, &s.wr, 0, &buf.as_slice()[..n]).is_err() {
                    s.status = vblk::S_IOERR;
                }
            }
            // Its data has been copied out or written: the buffer serves the next request
            // (a write's is filled whole from guest memory, a read's by the driver).
            if let Some(b) = bio.buf.take() {
                self.spare.give(b);
            }
            if s.append && s.status == vblk::S_OK {
                // Where the data went: `in_hdr.zone_append.sector`, before the status.
                let room: u64 = s.wr.iter().map(|&(_, l)| u64::from(l)).sum();
                let at = room.saturating_sub(vblk::APPEND_IN_HDR);
                if scatter(mem, &s.wr, at, &bio.sector.to_le_bytes()).is_err() {
                    s.status = vblk::S_IOERR;
                }
            }
            if s.bios > 0 {
                continue;
            }
            self.inflight -= 1;
            let s = &self.slots[slot];
            let (status, read, written) = (s.status, s.read_len, s.write_len);
            if status == vblk::S_OK {
                self.stats.bytes_read += u64::from(read);
                self.stats.bytes_written += u64::from(written);
            }
            let data = match (status, s.append) {
                (vblk::S_OK, true) => vblk::APPEND_IN_HDR as u32 - 1,
                (vblk::S_OK, false) => read,
                _ => 0,
            };
            self.finish(mem, slot, status, data);
        }
        *self.h.done() = done;
    }

    /// Writes the status byte, frees the slot and queues the chain for the used ring with
    /// `data` bytes written before the status.
    fn finish(&mut self, mem: &Mem, slot: usize, status: u8, data: u32) {
        let s = &mut self.slots[slot];
        s.busy = false;
        let at =
            s.wr.iter()
                .rev()
                .find(|&&(_, l)| l > 0)
                .map(|&(a, l)| a + u64::from(l) - 1);
        let written = match at {
            Some(a) if mem.write_slice(&[status], GuestAddress(a)).is_ok() => data + 1,
            _ => 0,
        };
        if status != vblk::S_OK || written == 0 {
            self.stats.errors += 1;
        }
        match &mut self.order {
            None => {
                self.ready.push((s.head, written));
                self.free.push(slot);
            }
            Some(order) => {
                // Every answered chain at the front goes to the used ring, in order.
                s.answered = Some(written);
                while let Some(&first) = order.front() {
                    let Some(n) = self.slots[first].answered.take() else {
                        break;
                    };
                    order.pop_front();
                    self.ready.push((self.slots[first].head, n));
                    self.free.push(first);
                }
            }
        }
    }
}

/// The status a guest gets for a failed bio of `op`. A zone command the block layer or the
/// device refuses is ZONE_INVALID_CMD, as QEMU's virtio-blk answers any failure of one
/// (`virtio_blk_zone_mgmt_complete`, `virtio_blk_zone_append_complete`); where we differ,
/// the open and active limits keep their own statuses, which Linux's `virtblk_result` turns
/// into `BLK_STS_ZONE_OPEN_RESOURCE` and `_ACTIVE_RESOURCE`.
fn status_of(op: ReqOp, s: BlkStatus) -> u8 {
    match s {
        BlkStatus::Ok => vblk::S_OK,
        BlkStatus::ZoneOpenResource => vblk::S_ZONE_OPEN_RESOURCE,
        BlkStatus::ZoneActiveResource => vblk::S_ZONE_ACTIVE_RESOURCE,
        _ if op.is_zone_mgmt() || op == ReqOp::ZoneAppend => vblk::S_ZONE_INVALID_CMD,
        BlkStatus::NotSupp => vblk::S_UNSUPP,
        _ => vblk::S_IOERR,
    }
}

/// Walks `len` bytes of the segments from `skip` bytes in, calling `f` with each piece's
/// guest address and its range in the caller's buffer; fails if the segments are shorter.
fn walk(
    segs: &[(u64, u32)],
    mut skip: u64,
    len: usize,
    mut f: impl FnMut(GuestAddress, std::ops::Range<usize>) -> Result<(), ()>,
) -> Result<(), ()> {
    let mut at = 0;
    for &(addr, seg) in segs {
        if at == len {
            break;
        }
        let seg = u64::from(seg);
        if skip >= seg {
            skip -= seg;
            continue;
        }
        let n = ((seg - skip) as usize).min(len - at);
        f(GuestAddress(addr.checked_add(skip).ok_or(())?), at..at + n)?;
        at += n;
        skip = 0;
    }
    if at == len {
        Ok(())
    } else {
        Err(())
    }
}

/// Copies `out.len()` bytes from the segments, starting `skip` bytes in.
fn gather(mem: &Mem, segs: &[(u64, u32)], skip: u64, out: &mut [u8]) -> Result<(), ()> {
    walk(segs, skip, out.len(), |a, r| {
        mem.read_slice(&mut out[r], a).map_err(|_| ())
    })
}

/// Copies `data` into the segments, starting `skip` bytes in.
fn scatter(mem: &Mem, segs: &[(u64, u32)], skip: u64, data: &[u8]) -> Result<(), ()> {
    walk(segs, skip, data.len(), |a, r| {
        mem.write_slice(&data[r], a).map_err(|_| ())
    })
}

impl VhostUserBackend for Backend {
    type Bitmap = ();
    type Vring = VringRwLock;

    fn num_queues(&self) -> usize {
        self.dev.geometry.num_queues as usize
    }

    fn max_queue_size(&self) -> usize {
        self.dev.geometry.queue_size as usize
    }

    fn features(&self) -> u64 {
        vblk::features(&self.dev.geometry) | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        // CONFIG: the front-end reads capacity, num_queues and the limits from us.
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::REPLY_ACK
    }

    fn set_event_idx(&self, _enabled: bool) {
        // The library sets it on each queue (`set_queue_event_idx`); virtio-queue's
        // notification calls follow it.
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        vblk::config_read(&self.dev.config, offset, size)
    }

    fn update_memory(&self, _mem: GuestMem) -> io::Result<()> {
        // The daemon swaps the new table into the `GuestMemoryAtomic` we share with it.
        Ok(())
    }

    fn queues_per_thread(&self) -> Vec<u64> {
        (0..self.dev.threads)
            .map(|t| self.dev.thread_mask(t))
            .collect()
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        new_event_consumer_and_notifier(EventFlag::empty()).ok()
    }

    fn acked_features(&self, features: u64) {
        // A host-managed device is only usable by a driver that knows its zones (virtio
        // 1.2, 5.2.5: without the feature the device is not to be used). QEMU's
        // vhost-user-blk front end forwards a fixed list of features without it.
        let zoned = 1u64 << virtio_bindings::virtio_blk::VIRTIO_BLK_F_ZONED;
        if self.dev.geometry.zoned.is_some()
            && features & zoned == 0
            && !self
                .dev
                .warned_unzoned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            eprintln!(
                "mqblk serve: {}: the front end did not accept VIRTIO_BLK_F_ZONED (QEMU's vhost-user-blk does not forward it): its guest sees a regular disk whose writes fail off the zones' write pointers",
                self.dev.name
            );
        }
    }

    fn stop_vring(&self, queue_index: u32) -> io::Result<()> {
        // Waits for the queue's thread to leave `process`: nothing is then in flight.
        if let Some(v) = self.dev.vqs.get(queue_index as usize) {
            debug_assert_eq!(v.lock().inflight, 0);
        }
        Ok(())
    }

    fn handle_event(
        &self,
        device_event: u16,
        evset: EventSet,
        vrings: &[VringRwLock],
        thread_id: usize,
    ) -> io::Result<()> {
        if evset != EventSet::IN {
            return Err(io::Error::other(format!("unexpected event set {evset:?}")));
        }
        // The thread's vrings are its virtqueues in order: event k is its k-th.
        let mask = self.dev.thread_mask(thread_id as u16);
        let q = (0..64)
            .filter(|b| mask & 1 << b != 0)
            .nth(device_event as usize);
        let (Some(vring), Some(vq)) = (
            vrings.get(device_event as usize),
            q.and_then(|q| self.dev.vqs.get(q)),
        ) else {
            return Err(io::Error::other(format!(
                "event {device_event} on thread {thread_id}: no such virtqueue"
            )));
        };
        let mut st = vq.lock();
        st.stats.kicks += 1;
        self.process(vring, &mut st)
    }
}
