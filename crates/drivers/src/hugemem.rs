//! I/O buffers in huge pages (fio's `iomem=shmhuge` and `mmaphuge`): one mapping per job,
//! carved into `iodepth` buffers of the largest block size as fio carves its area, each lent
//! out as an [`IoBuf`] whose memory comes back to the arena when the buffer is dropped.
//!
//! Huge pages matter to the kernel beneath because it counts a request's segments over
//! physically adjoining memory (`blk_rq_map_sg`): a 128 KiB buffer in a huge page is one
//! segment, where heap pages are up to 32. Each buffer says where it starts inside its huge
//! page ([`IoBuf::bvecs`]), so the core counts the same segments.
//!
//! The `unsafe` here maps the memory and turns the mapping into byte slices: a buffer's memory is used by
//! that buffer alone until it comes home, and the mapping lives until the last buffer has.

use mqblk_core::{BufHome, BvecLayout, HomePages, IoBuf, LentPages};
use parking_lot::Mutex;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// `HUGETLBFS_MAGIC`: the `f_type` statfs gives a hugetlbfs mount.
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// Why an arena could not be made.
#[derive(Debug, Error)]
pub enum HugeMemError {
    #[error(
        "{what}: {bytes} bytes of {page_kb} KiB huge pages are not free ({source}); \
         reserve them with `sysctl vm.nr_hugepages=N` (HugePages_Free in /proc/meminfo)"
    )]
    NoPages {
        what: String,
        bytes: usize,
        page_kb: u64,
        source: std::io::Error,
    },
    #[error("{what}: {path}: {message}")]
    File {
        what: String,
        path: String,
        message: String,
    },
}

/// A job's buffers in huge pages. Cheap to clone; every clone is the same mapping.
#[derive(Clone)]
pub struct HugeArena {
    inner: Arc<Arena>,
}

struct Arena {
    /// Start of the mapping, as an address (the buffers reach it through [`Piece`]s).
    base: usize,
    len: usize,
    huge: u64,
    /// Bytes from one buffer's start to the next's.
    stride: usize,
    /// Buffers not lent out, by index.
    free: Mutex<Vec<usize>>,
    /// The hugetlbfs file mapped, which the arena created and removes.
    file: Option<PathBuf>,
}

impl std::fmt::Debug for HugeArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HugeArena({} x {} bytes in {} KiB pages)",
            self.inner.len / self.inner.stride.max(1),
            self.inner.stride,
            self.inner.huge >> 10
        )
    }
}

/// One buffer's memory while it is lent.
struct Piece {
    addr: usize,
    len: usize,
}

impl LentPages for Piece {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr..addr + len` lies in the arena's mapping, which outlives every
        // piece (a buffer holds the arena as its home), and only this piece uses it until
        // it is given back.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u8, self.len) }
    }
}

impl HugeArena {
    /// `count` buffers of `buf_bytes` (rounded up to 4 KiB) in huge pages of `huge` bytes,
    /// anonymous or in `file` on hugetlbfs (which must not exist yet: the arena creates it
    /// and removes it when the last buffer is gone). `what` names the job in errors.
    pub fn new(
        what: &str,
        count: usize,
        buf_bytes: usize,
        huge: u64,
        file: Option<&Path>,
    ) -> Result<HugeArena, HugeMemError> {
        let stride = buf_bytes.max(1).next_multiple_of(4096);
        let len = arena_pages(count, buf_bytes, huge) as usize * huge as usize;
        let (base, file) = map(what, len, huge, file)?;
        Ok(HugeArena {
            inner: Arc::new(Arena {
                base,
                len,
                huge,
                stride,
                free: Mutex::new((0..count.max(1)).rev().collect()),
                file,
            }),
        })
    }

    /// A buffer of `len` bytes, or `None` when `len` is larger than the arena's buffers or
    /// every buffer is lent out.
    pub fn take(&self, len: usize) -> Option<IoBuf> {
        let a = &self.inner;
        if len > a.stride {
            return None;
        }
        let i = a.free.lock().pop()?;
        let offset = i * a.stride;
        let piece = Piece {
            addr: a.base + offset,
            len: a.stride,
        };
        let bvecs = BvecLayout {
            run: a.huge.min(1 << 30) as u32,
            skip: (offset as u64 % a.huge) as u32,
        };
        let home: Arc<dyn BufHome> = a.clone();
        Some(IoBuf::lent(Box::new(piece), len, home, bvecs))
    }

    /// Buffers not lent out.
    pub fn free(&self) -> usize {
        self.inner.free.lock().len()
    }
}

impl BufHome for Arena {
    fn give_back(&self, pages: HomePages) {
        if let HomePages::Lent(p) = pages {
            let addr = p.bytes().as_ptr() as usize;
            if (self.base..self.base + self.len).contains(&addr) {
                self.free.lock().push((addr - self.base) / self.stride);
            }
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: every piece has come home (each buffer held the arena), so nothing uses
        // the mapping any more.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
        if let Some(f) = &self.file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Huge pages of `huge` bytes an arena of `count` buffers of `buf_bytes` takes.
pub fn arena_pages(count: usize, buf_bytes: usize, huge: u64) -> u64 {
    let stride = buf_bytes.max(1).next_multiple_of(4096) as u64;
    (stride * count.max(1) as u64).div_ceil(huge.max(4096))
}

/// Huge pages of one size made free for a run by raising the size's `nr_hugepages`, put
/// back when dropped.
#[derive(Debug)]
pub struct HugeReservation {
    nr: PathBuf,
    before: u64,
}

impl Drop for HugeReservation {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.nr, self.before.to_string()) {
            eprintln!("mqblk: putting back {}: {e}", self.nr.display());
        }
    }
}

/// Makes `pages` huge pages of `huge` bytes free: `None` when that many are free already,
/// else a reservation (raising `/sys/kernel/mm/hugepages/hugepages-<kB>kB/nr_hugepages`,
/// which needs root) that gives them back when dropped; an error when the kernel could not
/// find the memory or the size is not one it offers.
pub fn reserve(huge: u64, pages: u64) -> Result<Option<HugeReservation>, String> {
    let dir = PathBuf::from(format!(
        "/sys/kernel/mm/hugepages/hugepages-{}kB",
        huge >> 10
    ));
    let read = |name: &str| -> Result<u64, String> {
        let f = dir.join(name);
        std::fs::read_to_string(&f)
            .map_err(|e| {
                format!(
                    "{}: {e} (not a huge page size this kernel offers?)",
                    f.display()
                )
            })?
            .trim()
            .parse()
            .map_err(|e| format!("{}: {e}", f.display()))
    };
    let free = read("free_hugepages")?;
    if free >= pages {
        return Ok(None);
    }
    let nr = dir.join("nr_hugepages");
    let before = read("nr_hugepages")?;
    std::fs::write(&nr, (before + pages - free).to_string()).map_err(|e| {
        format!(
            "{}: raising it to {}: {e}",
            nr.display(),
            before + pages - free
        )
    })?;
    let got = HugeReservation { nr, before };
    let now = read("free_hugepages")?;
    if now < pages {
        return Err(format!(
            "only {now} of the {pages} huge pages of {} kB needed could be reserved (memory too fragmented?)",
            huge >> 10
        ));
    }
    Ok(Some(got))
}

/// Maps `len` bytes of huge pages: anonymous, or the new file `file` on hugetlbfs. Pages
/// are taken at once (`MAP_POPULATE`), so a shortage is an error here, not a fault later.
fn map(
    what: &str,
    len: usize,
    huge: u64,
    file: Option<&Path>,
) -> Result<(usize, Option<PathBuf>), HugeMemError> {
    let no_pages = |source| HugeMemError::NoPages {
        what: what.to_string(),
        bytes: len,
        page_kb: huge >> 10,
        source,
    };
    let file_err = |path: &Path, message: String| HugeMemError::File {
        what: what.to_string(),
        path: path.display().to_string(),
        message,
    };
    let Some(path) = file else {
        // MAP_HUGE_* encodes log2 of the page size above MAP_HUGE_SHIFT.
        let size_flag = (huge.trailing_zeros() as i32) << libc::MAP_HUGE_SHIFT;
        // SAFETY: a fresh anonymous mapping; nothing else refers to its range.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_HUGETLB
                    | libc::MAP_POPULATE
                    | size_flag,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(no_pages(std::io::Error::last_os_error()));
        }
        return Ok((p as usize, None));
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            file_err(
                path,
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    "exists; mqblk maps only a file it creates (and removes)".to_string()
                } else {
                    e.to_string()
                },
            )
        })?;
    let created = path.to_path_buf();
    let fail = |message: String| {
        let _ = std::fs::remove_file(&created);
        file_err(&created, message)
    };
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| fail(e.to_string()))?;
    // SAFETY: `statfs` writes the struct it is given and reads a NUL-terminated path.
    let (fs_type, fs_page) = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut st) != 0 {
            return Err(fail(std::io::Error::last_os_error().to_string()));
        }
        (st.f_type as i64, st.f_bsize as u64)
    };
    if fs_type == HUGETLBFS_MAGIC && fs_page != huge {
        return Err(fail(format!(
            "hugetlbfs mounted with {} KiB pages where hugepage-size is {} KiB",
            fs_page >> 10,
            huge >> 10
        )));
    }
    if fs_type != HUGETLBFS_MAGIC {
        return Err(fail(
            "not on hugetlbfs (mount one: mount -t hugetlbfs none DIR)".to_string(),
        ));
    }
    if let Err(e) = f.set_len(len as u64) {
        return Err(fail(e.to_string()));
    }
    use std::os::fd::AsRawFd;
    // SAFETY: a shared mapping of a file only this arena knows; nothing else refers to the
    // range.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            f.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_file(&created);
        return Err(no_pages(e));
    }
    Ok((p as usize, Some(created)))
}
