//! A session's I/O: requests submitted through the connection's software queue, completions
//! reaped and replies written in completion order, within the connection's memory bound.

use super::*;

/// A request in flight: its cookie, whether it returns data, how many bios are out, and the
/// first error among them.
pub(super) struct Pending {
    pub(super) cookie: u64,
    pub(super) offset: u64,
    /// Payload bytes it holds against the connection's bound.
    pub(super) cost: u64,
    pub(super) read: bool,
    pub(super) bios: u32,
    pub(super) error: u32,
}

/// The I/O side of a session: its software queue, the requests in flight and the replies
/// being gathered. The I/O thread holds it to serve what the reader queued and to reap; the
/// reader holds it to serve a request itself when nobody else does ([`deliver`]), which
/// saves the hand-over (a wake-up and two context switches) whenever the device completes
/// at submission (memory, null). Whoever lets it go with replies gathered sends them first,
/// unless it is the reader with more requests already buffered.
pub(super) struct IoState {
    pub(super) s: Stream,
    pub(super) e: Arc<Export>,
    pub(super) framing: Framing,
    pub(super) h: SubmitterHandle,
    pub(super) slots: Vec<Option<Pending>>,
    pub(super) free: Vec<usize>,
    pub(super) inflight: usize,
    /// The client is gone: replies are dropped, requests still run to completion.
    pub(super) dead: bool,
    /// No more requests are taken (the reader ended, or the client is gone).
    pub(super) ended: bool,
    /// The I/O thread has returned: nothing may be submitted any more.
    pub(super) closed: bool,
    pub(super) out: Vec<u8>,
    /// Read buffers kept for reuse.
    pub(super) spare: SpareBufs,
    pub(super) chunk: u64,
    pub(super) cs: ConnStats,
}

impl IoState {
    pub(super) fn new(
        s: Stream,
        e: Arc<Export>,
        ctx: u16,
        framing: Framing,
        cs: ConnStats,
    ) -> IoState {
        let chunk = (e.queue.limits().max_sectors as u64).min(1 << 16) * 512;
        IoState {
            s,
            h: SubmitterHandle::new(e.queue.clone(), CtxIdx(ctx), MonotonicClock::new()),
            e,
            framing,
            slots: Vec::new(),
            free: Vec::new(),
            inflight: 0,
            dead: false,
            ended: false,
            closed: false,
            out: Vec::with_capacity(1 << 16),
            spare: SpareBufs::new(MAX_INFLIGHT).bytes_at_most(MAX_CONN_BYTES as usize),
            chunk,
            cs,
        }
    }

    /// Serves one item from the reader: an answer gathered in `out`, or requests submitted.
    pub(super) fn take(&mut self, item: Item, shared: &Shared) {
        let (held, busy) = (&shared.held, &shared.busy);
        let (framing, chunk) = (self.framing, self.chunk);
        let IoState {
            e,
            h,
            slots,
            free,
            inflight,
            ended,
            out,
            spare,
            cs,
            ..
        } = self;
        let e: &Export = e;
        match item {
            Item::End => *ended = true,
            Item::Kick => {}
            Item::Ok(cookie, offset) => {
                proto::reply_no_data(framing, cookie, offset, 0, out);
            }
            Item::Status(cookie, offset, len, one) => {
                let extents = allocation(e, offset, len, one);
                proto::block_status_reply(framing, cookie, offset, &extents, out);
            }
            Item::Fail(cookie, offset, code) => {
                cs.tally(Tally::Error);
                proto::reply_no_data(framing, cookie, offset, code, out);
            }
            Item::Req(r, data) if !aligned(e, &r) => {
                // Only from a client that did not negotiate block sizes (`check`).
                let (code, bytes) = serve_unaligned(h, e, &r, data);
                held.fetch_sub(held_bytes(&r), Ordering::AcqRel);
                busy.fetch_sub(1, Ordering::AcqRel);
                if code != 0 {
                    cs.tally(Tally::Error);
                    proto::reply_no_data(framing, r.cookie, r.offset, code, out);
                } else if let Some(b) = bytes {
                    cs.tally(Tally::Read(b.len() as u64));
                    proto::read_reply_header(framing, r.cookie, r.offset, b.len() as u64, out);
                    out.extend_from_slice(&b);
                } else {
                    cs.tally(if r.kind == cmd::WRITE {
                        Tally::Written(r.length)
                    } else {
                        Tally::Other
                    });
                    proto::reply_no_data(framing, r.cookie, r.offset, 0, out);
                }
            }
            Item::Req(r, data) => {
                let slot = free.pop().unwrap_or_else(|| {
                    slots.push(None);
                    slots.len() - 1
                });
                // Reads reuse the buffers of earlier reads: no allocation and no zeroing
                // of fresh pages per request.
                let data = if r.kind == cmd::READ {
                    Some(spare.take(r.length as usize))
                } else {
                    data
                };
                let bios = submit(h, e, &r, data, slot as u64, chunk);
                slots[slot] = Some(Pending {
                    cookie: r.cookie,
                    offset: r.offset,
                    cost: held_bytes(&r),
                    read: r.kind == cmd::READ,
                    bios,
                    error: 0,
                });
                *inflight += 1;
            }
        }
    }

    /// Reaps completions (waiting up to 200 us for one with `wait`) and answers the requests
    /// they finish.
    pub(super) fn reap(&mut self, wait: bool, shared: &Shared) {
        if self.inflight == 0 {
            return;
        }
        if wait {
            self.h.reap(1, 200_000);
        } else {
            self.h.poll();
        }
        let (held, busy) = (&shared.held, &shared.busy);
        let framing = self.framing;
        let IoState {
            s,
            h,
            slots,
            free,
            inflight,
            dead,
            ended,
            out,
            spare,
            cs,
            ..
        } = self;
        let mut done = std::mem::take(h.done());
        for mut bio in done.drain(..) {
            let slot = bio.private as usize;
            let Some(p) = slots[slot].as_mut() else {
                continue;
            };
            p.bios -= 1;
            if p.error == 0 {
                p.error = nbd_error(bio.status);
            }
            if p.bios > 0 {
                continue;
            }
            let p = slots[slot].take().expect("pending");
            free.push(slot);
            *inflight -= 1;
            held.fetch_sub(p.cost, Ordering::AcqRel);
            busy.fetch_sub(1, Ordering::AcqRel);
            if p.error != 0 {
                cs.tally(Tally::Error);
                proto::reply_no_data(framing, p.cookie, p.offset, p.error, out);
            } else if p.read {
                let buf = bio.buf.as_ref().expect("a read carries its buffer");
                cs.tally(Tally::Read(buf.len() as u64));
                proto::read_reply_header(framing, p.cookie, p.offset, buf.len() as u64, out);
                if buf.len() >= 64 * 1024 {
                    // Large data goes straight from the bio's buffer to the socket.
                    if !*dead && (s.write_all(out).is_err() || s.write_all(buf.as_slice()).is_err())
                    {
                        *dead = true;
                        *ended = true;
                    }
                    out.clear();
                } else {
                    out.extend_from_slice(buf.as_slice());
                }
            } else {
                cs.tally(if bio.op == ReqOp::Write {
                    Tally::Written(bio.bytes())
                } else {
                    Tally::Other
                });
                proto::reply_no_data(framing, p.cookie, p.offset, 0, out);
            }
            // Its data has been copied out or written: the buffer can serve the next read,
            // or take the next write's payload.
            if let Some(b) = bio.buf.take() {
                if p.read {
                    spare.give(b);
                } else if bio.op == ReqOp::Write {
                    shared.write_bufs.lock().give(b);
                }
            }
        }
        *h.done() = done;
    }

    /// Sends the replies gathered; a client that cannot take them is gone.
    pub(super) fn flush(&mut self) {
        if !self.out.is_empty() {
            if !self.dead && self.s.write_all(&self.out).is_err() {
                self.dead = true;
                self.ended = true;
            }
            self.out.clear();
        }
    }
}

/// The reader's hand-over of one item: served here at once when the I/O state is free and
/// the I/O thread has not returned, else queued for the I/O thread (woken by a `Kick` when
/// something served here is still in flight).
pub(super) fn deliver(
    item: Item,
    tx: &std::sync::mpsc::SyncSender<Item>,
    shared: &Shared,
    state: &Mutex<IoState>,
) -> io::Result<()> {
    let gone = || io::Error::other("I/O thread gone");
    let Some(mut st) = state.try_lock() else {
        return tx.send(item).map_err(|_| gone());
    };
    if st.closed || st.ended {
        // The client stopped taking replies, or the session is over: not worth a line.
        return Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "the session is over",
        ));
    }
    st.take(item, shared);
    st.reap(false, shared);
    let pending = st.inflight > 0;
    drop(st);
    if pending {
        tx.send(Item::Kick).map_err(|_| gone())?;
    }
    Ok(())
}

/// The I/O thread: serves what the reader queued, reaps, and sends replies, until the reader
/// has ended and nothing is in flight.
pub(super) fn io_loop(
    state: &Mutex<IoState>,
    rx: &Receiver<Item>,
    shared: &Shared,
) -> io::Result<()> {
    loop {
        let mut st = state.lock();
        if st.ended && st.inflight == 0 {
            st.flush();
            st.closed = true;
            return Ok(());
        }
        if st.inflight == 0 {
            // Nothing to reap: wait for the reader without holding the state.
            st.flush();
            drop(st);
            let item = match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(i) => i,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => Item::End,
            };
            st = state.lock();
            st.take(item, shared);
        }
        let mut got = 0;
        while !st.ended && got < MAX_INFLIGHT {
            match rx.try_recv() {
                Ok(i) => st.take(i, shared),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => st.take(Item::End, shared),
            }
            got += 1;
        }
        let wait = st.out.is_empty();
        st.reap(wait, shared);
        st.flush();
    }
}

/// The `base:allocation` extents of `len` bytes from `offset`: the driver's holes and data
/// (`Driver::block_status`), or one data extent where it cannot tell or the range is not
/// in whole sectors (a client that did not negotiate block sizes). With `one`
/// (`NBD_CMD_FLAG_REQ_ONE`) only the first.
pub(super) fn allocation(e: &Export, offset: u64, len: u64, one: bool) -> Vec<(u64, u32)> {
    let whole = offset % 512 == 0 && len % 512 == 0;
    let found = whole
        .then(|| e.queue.driver().block_status(offset / 512, len / 512))
        .flatten()
        .filter(|x| !x.is_empty());
    let Some(extents) = found else {
        return vec![(len, 0)];
    };
    let take = if one { 1 } else { extents.len() };
    extents
        .iter()
        .take(take)
        .map(|x| {
            let flags = if x.hole { proto::state::HOLE } else { 0 }
                | if x.zero { proto::state::ZERO } else { 0 };
            (x.sectors * 512, flags)
        })
        .collect()
}
