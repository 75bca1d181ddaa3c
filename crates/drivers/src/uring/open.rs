//! Opening the device: the files or block device, their sizes and layout (fio's "Laying
//! out IO file"), the rings of each hardware queue, and the queue shape sysfs tells of the
//! disk beneath (as `loop_configure` sets up a loop device).

use super::*;

impl UringDevice {
    /// Opens the file or block device, sizes it, sets up one ring per hardware queue and
    /// checks that the kernel supports every opcode the device will submit.
    pub fn open(cfg: UringConfig) -> Result<Arc<UringDevice>, UringError> {
        cfg.validate()?;
        let path = cfg.path.clone();
        // Refuse IOPOLL on a regular file before `open` could create one.
        if cfg.iopoll {
            let block = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_block_device());
            if !block && cfg.size_bytes.is_some() {
                return Err(UringError::IopollNeedsBlockDevice(path));
            }
        }
        let first = Self::open_file(&cfg, &path, cfg.size_bytes, cfg.extend)?;
        let (kind, meta, mut lbs) = (first.kind, first.meta.clone(), first.lbs);
        let mut extents = vec![(0u64, first.size)];
        let mut files = vec![first.file];
        for f in &cfg.more_files {
            let o = Self::open_file(&cfg, &f.path, f.size_bytes, f.extend)?;
            let end = extents.last().map_or(0, |&(b, l)| b + l);
            if f.base < end {
                return Err(UringError::FileOverlap {
                    path: f.path.clone(),
                    base: f.base,
                    end,
                });
            }
            if o.kind != kind {
                return Err(UringError::MixedKinds(f.path.clone()));
            }
            lbs = lbs.max(o.lbs);
            extents.push((f.base, o.size));
            files.push(o.file);
        }
        if cfg.iopoll && kind != BackingKind::BlockDevice {
            return Err(UringError::IopollNeedsBlockDevice(path));
        }
        if !lbs.is_power_of_two() || !(512..=MAX_BLOCK_SIZE).contains(&lbs) {
            return Err(UringError::BlockSize { path, size: lbs });
        }
        // Each file in whole logical blocks, at a base the block size divides.
        for (i, e) in extents.iter_mut().enumerate() {
            e.1 = e.1 / lbs as u64 * lbs as u64;
            if e.0 % lbs as u64 != 0 {
                let path = cfg.more_files[i - 1].path.clone();
                return Err(UringError::BlockSize { path, size: lbs });
            }
        }
        let end = extents.last().map_or(0, |&(b, l)| b + l);
        let capacity_sectors = end >> SECTOR_SHIFT;
        if extents.iter().any(|&(_, l)| l == 0) {
            return Err(UringError::Empty(path));
        }
        let backing = crate::sysfs::backing_dev(&meta).and_then(crate::sysfs::QueueShape::of_dev);
        // A host-managed zoned disk takes writes only at its zones' write pointers, and this
        // driver neither reports its zones nor sends zone commands: refused, not corrupted.
        if let (true, Some("host-managed")) = (
            meta.file_type().is_block_device(),
            backing.as_ref().and_then(|b| b.zoned.as_deref()),
        ) {
            return Err(UringError::Zoned(path));
        }
        let rotational = cfg
            .rotational
            .unwrap_or_else(|| backing.as_ref().and_then(|b| b.rotational) == Some(true));
        let virtqueue_size = match cfg.virtqueue_size {
            Some(0) => None,
            Some(n) => Some(n),
            None => backing.as_ref().and_then(|b| b.virtqueue_size),
        };
        // A regular file has the page cache and its file system's metadata to make durable
        // whatever its disk does; a block device has a cache if its queue says "write back"
        // (assumed when sysfs does not say).
        let write_cache = !meta.file_type().is_block_device()
            || backing.as_ref().and_then(|b| b.write_cache).unwrap_or(true);
        let files: Arc<[File]> = files.into();
        let ring_cfg = RingConfig {
            entries: (cfg.queue_depth + MAX_SEGMENTS as u32 + 2)
                .next_power_of_two()
                .min(MAX_RING_ENTRIES),
            sqpoll: cfg.sqpoll,
            sqpoll_cpu: cfg.sqpoll_cpu,
            iopoll: cfg.iopoll,
            register_files: cfg.register_files,
            single_issuer: false,
        };
        let owned_cfg = RingConfig {
            single_issuer: true,
            ..ring_cfg
        };
        let owned_slots = if cfg.single_issuer && !cfg.sqpoll {
            OWNED_RINGS
        } else {
            0
        };
        let mut hctxs = Vec::with_capacity(cfg.nr_hw_queues as usize);
        for h in 0..cfg.nr_hw_queues {
            let ring = Ring::new(files.clone(), ring_cfg, cfg.queue_depth)
                .map_err(|source| UringError::Setup { hctx: h, source })?;
            hctxs.push(UringHctx {
                shared: CachePadded::new(Mutex::new(HctxRing::new(ring))),
                shared_sqes: AtomicUsize::new(0),
                owned: (0..owned_slots)
                    .map(|_| OwnedRing {
                        owner: AtomicU64::new(0),
                        ring: OnceLock::new(),
                        asleep: AtomicI32::new(-1),
                    })
                    .collect(),
                descs: CachePadded::new(AtomicU32::new(0)),
            });
        }
        let pool = if cfg.fixed_buffers {
            let (count, size) = (cfg.fixed_buf_count(), cfg.fixed_buf_size);
            let pool = FixedPool::new(count, size as usize);
            for h in hctxs.iter() {
                h.shared
                    .lock()
                    .ring
                    .register_buffers(pool.inner())
                    .map_err(|source| UringError::Register {
                        count,
                        size,
                        source,
                    })?;
            }
            Some(pool)
        } else {
            None
        };
        let mut needed = vec![engine::OP_READ, engine::OP_WRITE];
        if cfg.fixed_buffers {
            needed.push(engine::OP_READ_FIXED);
            needed.push(engine::OP_WRITE_FIXED);
        }
        if !cfg.iopoll {
            needed.push(engine::OP_FSYNC);
        }
        if kind == BackingKind::RegularFile {
            needed.push(engine::OP_FALLOCATE);
        }
        let missing = hctxs[0]
            .shared
            .lock()
            .ring
            .unsupported(&needed)
            .map_err(UringError::Probe)?;
        if let Some(name) = missing {
            return Err(UringError::MissingOpcode(name));
        }
        let limits =
            UringDevice::limits_for(backing.as_ref(), virtqueue_size, lbs, capacity_sectors);
        Ok(Arc::new(UringDevice {
            limits,
            cfg,
            kind,
            files,
            extents: extents.into(),
            capacity_sectors,
            logical_block_size: lbs,
            rotational,
            virtqueue_size,
            write_cache,
            backing,
            hctxs: hctxs.into(),
            owned_cfg,
            pool,
            foreign: CachePadded::new(AtomicU32::new(0)),
            msg_ring: std::sync::atomic::AtomicBool::new(true),
            wakeups: AtomicU64::new(0),
        }))
    }

    /// Opens one of the device's files (creating a regular file when it is sized), sizes
    /// it, and reads its kind and logical block size.
    pub(super) fn open_file(
        cfg: &UringConfig,
        path: &Path,
        size_bytes: Option<u64>,
        extend: Extend,
    ) -> Result<OpenedFile, UringError> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(!cfg.read_only);
        if size_bytes.is_some() && !cfg.read_only {
            opts.create(true);
        }
        if cfg.direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = opts.open(path).map_err(|source| UringError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let query = |what: &'static str| {
            let path = path.to_path_buf();
            move |source| UringError::Query { what, path, source }
        };
        let meta = file.metadata().map_err(query("fstat"))?;
        let kind = if meta.file_type().is_block_device() {
            BackingKind::BlockDevice
        } else if meta.is_file() {
            BackingKind::RegularFile
        } else if meta.file_type().is_char_device() {
            BackingKind::CharDevice
        } else {
            return Err(UringError::NotFileOrBlock(path.to_path_buf()));
        };
        let (size, lbs) = match kind {
            BackingKind::RegularFile => {
                let size = Self::size_file(cfg, path, size_bytes, extend, &file, meta.len())?;
                // O_DIRECT needs offsets aligned as the file system says; buffered I/O is
                // fine with the block layer's 512.
                let lbs = if cfg.direct {
                    engine::dio_offset_align(&file)
                        .map_err(query("statx(STATX_DIOALIGN)"))?
                        .unwrap_or(512)
                        .max(512)
                } else {
                    512
                };
                (size, lbs)
            }
            BackingKind::CharDevice => {
                let size =
                    size_bytes.ok_or_else(|| UringError::CharDeviceSize(path.to_path_buf()))?;
                (size, 512)
            }
            BackingKind::BlockDevice => {
                let actual = engine::blk_size_bytes(&file).map_err(query("BLKGETSIZE64"))?;
                let size = match size_bytes {
                    Some(size) if size > actual => {
                        return Err(UringError::DeviceTooSmall {
                            path: path.to_path_buf(),
                            size,
                            actual,
                        })
                    }
                    Some(size) => size,
                    None => actual,
                };
                let lbs = engine::blk_logical_block_size(&file).map_err(query("BLKSSZGET"))?;
                (size, lbs)
            }
        };
        Ok(OpenedFile {
            file,
            meta,
            kind,
            size,
            lbs,
        })
    }

    /// The bytes of a regular file the device uses, creating or extending it as asked.
    pub(super) fn size_file(
        cfg: &UringConfig,
        path: &Path,
        size_bytes: Option<u64>,
        extend: Extend,
        file: &File,
        len: u64,
    ) -> Result<u64, UringError> {
        match size_bytes {
            Some(size) if size > len && cfg.read_only => Err(UringError::ReadOnlyTooShort {
                path: path.to_path_buf(),
                size,
                actual: len,
            }),
            Some(size) if extend == Extend::Grow => Ok(size),
            Some(size) if size > len => {
                let grown = match extend {
                    Extend::Grow => Ok(()),
                    Extend::Sparse => file.set_len(size),
                    Extend::Allocate => engine::allocate(file, len, size - len),
                    Extend::Write => write_out(path, len, size),
                };
                grown.map_err(|source| UringError::Extend {
                    path: path.to_path_buf(),
                    size,
                    source,
                })?;
                Ok(size)
            }
            Some(size) => Ok(size),
            None => Ok(len),
        }
    }
}

/// Writes `from..to` of a file with data that is not zeroes (a generator's bytes, so that
/// neither the file system nor a thin disk under it can keep the range as a hole), 1 MiB at
/// a time, then syncs it: fio's layout of a file a job reads. The file is opened again
/// without `O_DIRECT`, whose alignment rules the buffer need not meet.
pub(super) fn write_out(path: &std::path::Path, from: u64, to: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    const CHUNK: u64 = 1 << 20;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for word in buf.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes());
    }
    let mut at = from;
    while at < to {
        let n = (to - at).min(CHUNK) as usize;
        file.write_all_at(buf.get(..n).unwrap_or(&buf), at)?;
        at += n as u64;
    }
    file.sync_data()
}
