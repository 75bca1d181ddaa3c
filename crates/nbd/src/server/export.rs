//! An export: its queue, its session slots, and the statistics of its connections.

use super::*;

/// One exported device.
pub struct Export {
    pub name: String,
    pub description: String,
    pub queue: Arc<RequestQueue>,
    /// Bytes.
    pub size: u64,
    pub read_only: bool,
    pub rotational: bool,
    /// Minimum block size (the queue's logical block size).
    pub min_block: u32,
    /// The largest payload clients are told (`NBD_INFO_BLOCK_SIZE`'s maximum); up to
    /// [`MAX_REQUEST_BYTES`] is served.
    pub max_payload: u32,
    /// Held while a change that does not cover whole blocks is read, patched and written
    /// back ([`serve_unaligned`]).
    pub(super) rmw: Mutex<()>,
    /// Free software queues, and connections per hardware queue. A session holds one from
    /// the moment the server says yes to its export until it ends; there are as many as the
    /// export takes sessions (`max-connections`).
    pub(super) free_ctx: Mutex<(Vec<u16>, Vec<u32>)>,
    pub stats: ExportStats,
}

/// One finished connection's figures: its software and hardware queue and what it moved.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ConnStats {
    pub ctx: u16,
    pub hctx: u16,
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub errors: u64,
}

/// What an answered request adds to a connection's and its export's figures.
pub(super) enum Tally {
    Error,
    Read(u64),
    Written(u64),
    /// Answered without data moved (FLUSH, TRIM, WRITE_ZEROES).
    Other,
}

impl ConnStats {
    /// Counts one answered request.
    pub(super) fn tally(&mut self, t: Tally) {
        self.requests += 1;
        match t {
            Tally::Error => self.errors += 1,
            Tally::Read(n) => self.bytes_read += n,
            Tally::Written(n) => self.bytes_written += n,
            Tally::Other => {}
        }
    }
}

#[derive(Default)]
pub struct ExportStats {
    /// Finished connections (the most recent 1024).
    pub per_connection: Mutex<Vec<ConnStats>>,
    /// Totals over finished sessions: each adds its own when it ends (`connections` when it
    /// starts), so no line is written by every connection per request.
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub errors: AtomicU64,
}

impl Export {
    /// An export over `queue`; its software queues are the connections' (one each).
    pub fn new(
        name: &str,
        description: &str,
        queue: Arc<RequestQueue>,
        read_only: bool,
        rotational: bool,
    ) -> Export {
        let limits = *queue.limits();
        let nr_ctx = queue.nr_ctx() as u16;
        Export {
            name: name.to_string(),
            description: description.to_string(),
            size: limits.capacity_sectors * 512,
            min_block: limits.logical_block_size,
            max_payload: 32 << 20,
            read_only,
            rotational,
            rmw: Mutex::new(()),
            free_ctx: Mutex::new(((0..nr_ctx).collect(), vec![0; queue.nr_hw_queues()])),
            queue,
            stats: ExportStats::default(),
        }
    }

    /// The transmission flags this export advertises. Every connection shares one queue and
    /// one backing device (no per-connection cache), and a flush reaches the device, so the
    /// effects of FLUSH and FUA are visible on every connection: CAN_MULTI_CONN holds.
    /// At most `n` sessions at once (software queues `0..n`; the rest of the queue's stay free
    /// for the server's own use, such as the final flush).
    pub fn with_sessions(self, n: usize) -> Export {
        let n = n.min(self.queue.nr_ctx()) as u16;
        *self.free_ctx.lock() = ((0..n).collect(), vec![0; self.queue.nr_hw_queues()]);
        self
    }

    /// A software queue for a new connection, on the hardware queue with the fewest
    /// connections (so connection i lands on hardware queue i mod N, as the kernel's nbd
    /// driver maps socket i to hardware queue i).
    pub(super) fn take_ctx(&self) -> Option<u16> {
        let mut g = self.free_ctx.lock();
        let (free, per_hctx) = &mut *g;
        let hctx_of = |c: u16| {
            self.queue
                .map_queue(CtxIdx(c), mqblk_core::HctxType::Default)
                .0 as usize
        };
        let (i, &c) = free
            .iter()
            .enumerate()
            .min_by_key(|&(_, &c)| (per_hctx[hctx_of(c)], hctx_of(c), c))?;
        free.swap_remove(i);
        per_hctx[hctx_of(c)] += 1;
        Some(c)
    }

    pub(super) fn put_ctx(&self, c: u16) {
        let h = self
            .queue
            .map_queue(CtxIdx(c), mqblk_core::HctxType::Default)
            .0 as usize;
        let mut g = self.free_ctx.lock();
        g.1[h] -= 1;
        g.0.push(c);
    }

    pub fn flags(&self, framing: Framing) -> u16 {
        let mut f = tflag::HAS_FLAGS
            | tflag::SEND_FLUSH
            | tflag::SEND_FUA
            | tflag::CAN_MULTI_CONN
            | tflag::SEND_CACHE;
        if self.read_only {
            f |= tflag::READ_ONLY;
        } else {
            // Zeroing is a hole punch or a zero-range call on files and a memset in memory:
            // never slower than writing zeroes, so FAST_ZERO requests are honoured.
            f |= tflag::SEND_TRIM | tflag::SEND_WRITE_ZEROES | tflag::SEND_FAST_ZERO;
        }
        if framing != Framing::Simple {
            // A read is always answered in one chunk.
            f |= tflag::SEND_DF;
        }
        if self.rotational {
            f |= tflag::ROTATIONAL;
        }
        f
    }
}
