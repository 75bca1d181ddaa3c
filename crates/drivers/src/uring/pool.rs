//! Registered buffers: a pool of page-aligned buffers that every ring of a device registers
//! with the kernel (`IORING_REGISTER_BUFFERS`), so reads and writes from them skip the
//! per-I/O page pinning (`IORING_OP_READ_FIXED` / `WRITE_FIXED`).
//!
//! Registered memory must stay allocated for as long as any ring has it registered. The pool
//! makes that so without trusting its users: the buffers it lends out are [`IoBuf`]s whose
//! pages return to the pool when they are dropped (the core's [`BufHome`]), every ring holds
//! the pool alive, and the pages are freed only when the pool itself goes, after the last ring
//! and the last lent buffer. A request whose buffer is not from the pool (or was grown out of
//! it) is simply issued as a plain read or write.

use mqblk_core::{BufHome, HomePages, IoBuf, Page};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The most buffers one pool registers (the kernel's `IORING_MAX_REG_BUFFERS`).
pub const MAX_FIXED_BUFFERS: u32 = 16384;

pub(crate) struct PoolInner {
    buf_size: usize,
    /// Start address and length of buffer `i` (its `buf_index`).
    regions: Vec<(usize, usize)>,
    /// `(start, index)` sorted by start, for address lookups.
    by_addr: Vec<(usize, u16)>,
    free: Mutex<Vec<Vec<Page>>>,
    lent: AtomicU64,
}

impl PoolInner {
    /// The registered buffer holding `addr..addr + len` entirely, if any.
    pub(crate) fn index_of(&self, addr: usize, len: usize) -> Option<u16> {
        let i = self.by_addr.partition_point(|&(start, _)| start <= addr);
        let (start, idx) = *self.by_addr.get(i.checked_sub(1)?)?;
        let (_, size) = self.regions[idx as usize];
        (addr + len <= start + size).then_some(idx)
    }

    pub(crate) fn regions(&self) -> &[(usize, usize)] {
        &self.regions
    }
}

impl BufHome for PoolInner {
    fn give_back(&self, pages: HomePages) {
        let HomePages::Heap(pages) = pages else {
            // The pool lends heap pages only.
            return;
        };
        let start = pages.as_ptr().expose_provenance();
        let ours = self
            .index_of(start, 0)
            .is_some_and(|i| self.regions[i as usize].0 == start);
        if ours {
            self.lent.fetch_sub(1, Ordering::Relaxed);
            self.free.lock().push(pages);
        }
        // Pages that are not ours are simply freed.
    }
}

/// A device's registered buffers. Cheap to clone; all clones are the same pool.
#[derive(Clone)]
pub struct FixedPool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for FixedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FixedPool({} x {} bytes, {} lent)",
            self.inner.regions.len(),
            self.inner.buf_size,
            self.lent()
        )
    }
}

impl FixedPool {
    /// `count` buffers of `buf_size` bytes (rounded up to whole pages).
    pub(crate) fn new(count: u32, buf_size: usize) -> FixedPool {
        let nr_pages = buf_size.div_ceil(4096).max(1);
        let bufs: Vec<Vec<Page>> = (0..count)
            .map(|_| vec![bytemuck_zeroed(); nr_pages])
            .collect();
        let regions: Vec<(usize, usize)> = bufs
            .iter()
            .map(|b| (b.as_ptr().expose_provenance(), nr_pages * 4096))
            .collect();
        let mut by_addr: Vec<(usize, u16)> = regions
            .iter()
            .enumerate()
            .map(|(i, r)| (r.0, i as u16))
            .collect();
        by_addr.sort_unstable();
        FixedPool {
            inner: Arc::new(PoolInner {
                buf_size: nr_pages * 4096,
                regions,
                by_addr,
                free: Mutex::new(bufs),
                lent: AtomicU64::new(0),
            }),
        }
    }

    pub(crate) fn inner(&self) -> &Arc<PoolInner> {
        &self.inner
    }

    /// A buffer of `len` bytes from the pool, or `None` when `len` is larger than the
    /// pool's buffers or every buffer is lent out.
    pub fn alloc(&self, len: usize) -> Option<IoBuf> {
        if len > self.inner.buf_size {
            return None;
        }
        let pages = self.inner.free.lock().pop()?;
        self.inner.lent.fetch_add(1, Ordering::Relaxed);
        let home: Arc<dyn BufHome> = self.inner.clone();
        Some(IoBuf::pooled(pages, len, home))
    }

    /// Buffers registered.
    pub fn len(&self) -> usize {
        self.inner.regions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.inner.regions.is_empty()
    }
    /// Bytes per buffer.
    pub fn buf_size(&self) -> usize {
        self.inner.buf_size
    }
    /// Buffers currently lent out.
    pub fn lent(&self) -> u64 {
        self.inner.lent.load(Ordering::Relaxed)
    }
}

fn bytemuck_zeroed() -> Page {
    Page([0; 4096])
}
