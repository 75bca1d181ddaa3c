//! The transmission phase: a session's reader thread parses requests and checks them
//! against the export and what was negotiated, handing them to the I/O side.

use super::*;

/// What the reader hands to the I/O thread.
pub(super) enum Item {
    Req(Request, Option<IoBuf>),
    /// Answer with this error without touching the device: (cookie, offset, error).
    Fail(u64, u64, u32),
    /// Answer success at once (CACHE, zero-length requests): (cookie, offset).
    Ok(u64, u64),
    /// BLOCK_STATUS: (cookie, offset, length, only one extent wanted).
    Status(u64, u64, u64, bool),
    /// The client is gone or said goodbye.
    End,
    /// Nothing: wakes the I/O thread to reap what the reader submitted itself.
    Kick,
}

pub(super) fn serve_connection(
    mut s: Stream,
    exports: &[Arc<Export>],
    handshaking: &AtomicUsize,
    idle: Option<Duration>,
    tls: Option<&Tls>,
) -> io::Result<()> {
    // A client may not stall the handshake, nor leave replies unread, for long.
    s.set_timeouts(Some(HANDSHAKE_TIMEOUT), Some(IO_TIMEOUT));
    let chosen = handshake(&mut s, exports, tls);
    handshaking.fetch_sub(1, Ordering::AcqRel);
    match chosen {
        Ok(Some((export, session, ctx))) => {
            // Whatever way the session ends, its software queue is free again after it.
            let res = serve_session(s, &export, session, ctx, idle);
            export.put_ctx(ctx);
            res
        }
        Ok(None) => {
            s.shutdown();
            Ok(())
        }
        Err(e) => {
            s.shutdown();
            Err(e)
        }
    }
}

/// Serves one session on software queue `ctx` of `export` until it ends.
pub(super) fn serve_session(
    s: Stream,
    export: &Arc<Export>,
    session: Session,
    ctx: u16,
    idle: Option<Duration>,
) -> io::Result<()> {
    // Between requests a client may stay idle up to `idle`: the reader wakes every
    // `IDLE_POLL` to look.
    s.set_timeouts(idle.map(|_| IDLE_POLL), Some(IO_TIMEOUT));
    export.stats.connections.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = sync_channel::<Item>(MAX_INFLIGHT);
    let mut rd = s.try_clone()?;
    let ex = export.clone();
    let shared = Arc::new(Shared::default());
    let shared_r = shared.clone();
    let cs = ConnStats {
        ctx,
        hctx: export
            .queue
            .map_queue(CtxIdx(ctx), mqblk_core::HctxType::Default)
            .0,
        ..ConnStats::default()
    };
    let state = Arc::new(Mutex::new(IoState::new(
        s.try_clone()?,
        export.clone(),
        ctx,
        session.framing,
        cs,
    )));
    let state_r = state.clone();
    let reader = std::thread::Builder::new()
        .name("nbd-read".into())
        .spawn(move || {
            let mut patient = Patient {
                s: &mut rd,
                idle,
                last: std::time::Instant::now(),
                busy: &shared_r.busy,
            };
            // Buffered: a pipelining client's requests come many to a `recv`, and the
            // replies of those served here go out together once the buffer runs dry.
            let mut buffered = io::BufReader::with_capacity(READ_BUFFER, &mut patient);
            let end = read_requests(&mut buffered, &ex, session, &tx, &shared_r, &state_r);
            if let Err(e) = end {
                // A client that closes without NBD_CMD_DISC (fio's engine does) is normal,
                // and so is a reader told to stop because the I/O side is done.
                if !shared_r.closing.load(Ordering::Acquire)
                    && !matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                    )
                    && e.kind() != io::ErrorKind::TimedOut
                {
                    eprintln!("mqblk serve: {}: {e}", ex.name);
                }
            }
            let _ = tx.send(Item::End);
        })?;
    let res = io_loop(&state, &rx, &shared);
    // Every way out of the I/O side (client gone, unread replies past the timeout, DISC)
    // must also end the reader, wherever it waits: on the socket (shut down), on a full
    // request channel (its receiver dropped) or for payload room (`closing`).
    shared.closing.store(true, Ordering::Release);
    s.shutdown();
    drop(rx);
    let _ = reader.join();
    let cs = std::mem::take(&mut state.lock().cs);
    let mut log = export.stats.per_connection.lock();
    let t = &export.stats;
    t.requests
        .fetch_add(shared.parsed.load(Ordering::Relaxed), Ordering::Relaxed);
    t.bytes_read.fetch_add(cs.bytes_read, Ordering::Relaxed);
    t.bytes_written
        .fetch_add(cs.bytes_written, Ordering::Relaxed);
    t.errors.fetch_add(cs.errors, Ordering::Relaxed);
    if log.len() >= 1024 {
        log.remove(0);
    }
    log.push(cs);
    res
}

/// What a session's reader and I/O thread share.
pub(super) struct Shared {
    /// Payload bytes (write data read in, read data to come) held against `MAX_CONN_BYTES`.
    pub(super) held: AtomicU64,
    /// Requests handed to the I/O side and not yet answered: a session waiting for them is
    /// not idle.
    pub(super) busy: AtomicUsize,
    /// The I/O side is done: a reader waiting for payload room gives up.
    pub(super) closing: AtomicBool,
    /// Requests read (DISC, CACHE and BLOCK_STATUS too), for the export's total.
    pub(super) parsed: AtomicU64,
    /// Buffers of answered writes, which the reader reads the next payloads into: no fresh
    /// pages allocated and zeroed per WRITE. Its own lock, so the reader never waits for the
    /// session's state to get one.
    pub(super) write_bufs: Mutex<SpareBufs>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            held: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            parsed: AtomicU64::new(0),
            write_bufs: Mutex::new(
                SpareBufs::new(MAX_INFLIGHT).bytes_at_most(MAX_CONN_BYTES as usize),
            ),
        }
    }
}

/// The reader's side of the socket, which waits out read timeouts (`IDLE_POLL`) while the
/// session is busy or has not been idle for `idle`, and then ends it with `TimedOut`.
pub(super) struct Patient<'a> {
    pub(super) s: &'a mut Stream,
    pub(super) idle: Option<Duration>,
    pub(super) last: std::time::Instant,
    pub(super) busy: &'a AtomicUsize,
}

impl Read for Patient<'_> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.s.read(b) {
                Ok(n) => {
                    self.last = std::time::Instant::now();
                    return Ok(n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    let Some(idle) = self.idle else {
                        return Err(e);
                    };
                    if self.busy.load(Ordering::Acquire) > 0 {
                        self.last = std::time::Instant::now();
                    } else if self.last.elapsed() >= idle {
                        eprintln!(
                            "mqblk serve: a session idle for {} s closed (--idle-timeout)",
                            idle.as_secs()
                        );
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "idle"));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Reads requests until DISC, EOF or a protocol error.
pub(super) fn read_requests<R: Read>(
    s: &mut io::BufReader<R>,
    e: &Export,
    session: Session,
    tx: &std::sync::mpsc::SyncSender<Item>,
    shared: &Shared,
    state: &Mutex<IoState>,
) -> io::Result<()> {
    let (held, closing, busy) = (&shared.held, &shared.closing, &shared.busy);
    let extended = session.framing == Framing::Extended;
    loop {
        if s.buffer().is_empty() {
            // The next read may wait for the client: what was served here goes out first.
            // (If the I/O thread holds the state, it sends everything before letting go.)
            if let Some(mut st) = state.try_lock() {
                st.flush();
            }
        }
        let r = if extended {
            let mut h = [0u8; 32];
            s.read_exact(&mut h)?;
            proto::parse_ext_request(&h).map_err(protocol)?
        } else {
            let mut h = [0u8; 28];
            s.read_exact(&mut h)?;
            proto::parse_request(&h).map_err(protocol)?
        };
        shared.parsed.fetch_add(1, Ordering::Relaxed);
        let send = |item| deliver(item, tx, shared, state);
        if r.kind == cmd::DISC {
            return Ok(());
        }
        // A payload must be consumed whatever we answer, to stay in step: a compact WRITE
        // carries `length` bytes, an extended request carries them iff PAYLOAD_LEN is set.
        let has_payload = if extended {
            r.flags & cflag::PAYLOAD_LEN != 0
        } else {
            r.kind == cmd::WRITE
        };
        if extended && r.kind == cmd::WRITE && !has_payload {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "extended WRITE without PAYLOAD_LEN",
            ));
        }
        // Hold back while this connection's payload bytes are at their bound.
        let cost = held_bytes(&r);
        while cost > 0
            && held.load(Ordering::Acquire) > 0
            && held.load(Ordering::Acquire) + cost > MAX_CONN_BYTES
        {
            if closing.load(Ordering::Acquire) {
                return Err(io::Error::other("connection closing"));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        let mut data = None;
        if has_payload {
            if r.kind != cmd::WRITE || r.length > MAX_REQUEST_BYTES {
                io::copy(&mut s.take(r.length), &mut io::sink())?;
                send(Item::Fail(r.cookie, r.offset, err::EINVAL))?;
                continue;
            }
            let mut buf = shared.write_bufs.lock().take(r.length as usize);
            s.read_exact(buf.as_mut_slice())?;
            data = Some(buf);
        }
        match check(e, session, &r) {
            Some(code) => send(Item::Fail(r.cookie, r.offset, code))?,
            None if r.kind == cmd::BLOCK_STATUS => send(Item::Status(
                r.cookie,
                r.offset,
                r.length,
                r.flags & cflag::REQ_ONE != 0,
            ))?,
            None if r.kind == cmd::CACHE || (r.length == 0 && r.kind != cmd::FLUSH) => {
                send(Item::Ok(r.cookie, r.offset))?
            }
            None => {
                held.fetch_add(cost, Ordering::AcqRel);
                busy.fetch_add(1, Ordering::AcqRel);
                send(Item::Req(r, data))?
            }
        }
    }
}

/// Payload bytes a request holds against the connection's bound (`MAX_CONN_BYTES`) while it
/// is served: a READ's data to come or a WRITE's data read in. Taken when the reader hands
/// it over and given back when it is answered, so both sides compute it here.
pub(super) fn held_bytes(r: &Request) -> u64 {
    if matches!(r.kind, cmd::READ | cmd::WRITE) && r.length <= MAX_REQUEST_BYTES {
        r.length
    } else {
        0
    }
}

/// The request starts and ends on the export's block boundaries.
pub(super) fn aligned(e: &Export, r: &Request) -> bool {
    let b = e.min_block as u64;
    r.offset % b == 0 && r.length % b == 0
}

/// The error a request gets without reaching the device, if any.
pub(super) fn check(e: &Export, session: Session, r: &Request) -> Option<u32> {
    if r.flags & !cflag::KNOWN != 0 {
        return Some(err::EINVAL);
    }
    let allowed = match r.kind {
        cmd::READ => {
            cflag::FUA
                | if session.framing != Framing::Simple {
                    cflag::DF
                } else {
                    0
                }
        }
        cmd::WRITE_ZEROES => cflag::FUA | cflag::NO_HOLE | cflag::FAST_ZERO,
        cmd::BLOCK_STATUS => cflag::FUA | cflag::REQ_ONE,
        _ => cflag::FUA,
    } | if session.framing == Framing::Extended {
        cflag::PAYLOAD_LEN
    } else {
        0
    };
    if r.flags & !allowed != 0 {
        return Some(err::EINVAL);
    }
    match r.kind {
        cmd::READ | cmd::WRITE | cmd::TRIM | cmd::WRITE_ZEROES | cmd::CACHE => {}
        cmd::BLOCK_STATUS if session.meta => {}
        cmd::FLUSH => return (r.offset != 0 || r.length != 0).then_some(err::EINVAL),
        _ => return Some(err::EINVAL),
    }
    let writes = matches!(r.kind, cmd::WRITE | cmd::TRIM | cmd::WRITE_ZEROES);
    if writes && e.read_only {
        return Some(err::EPERM);
    }
    if r.offset.saturating_add(r.length) > e.size {
        // Writing past the end is out of space (the spec's ENOSPC for WRITE and
        // WRITE_ZEROES); anything else there is an invalid request.
        return Some(if matches!(r.kind, cmd::WRITE | cmd::WRITE_ZEROES) {
            err::ENOSPC
        } else {
            err::EINVAL
        });
    }
    if session.sizes && !aligned(e, r) {
        return Some(err::EINVAL);
    }
    if r.kind == cmd::READ && r.length > MAX_REQUEST_BYTES {
        return Some(err::EINVAL);
    }
    None
}

pub(super) fn nbd_error(s: BlkStatus) -> u32 {
    match s {
        BlkStatus::Ok => 0,
        BlkStatus::NoSpc => err::ENOSPC,
        BlkStatus::Protection => err::EPERM,
        BlkStatus::Invalid => err::EINVAL,
        BlkStatus::NotSupp => err::ENOTSUP,
        _ => err::EIO,
    }
}
