//! The block layer's sysfs view of a device: which disk holds a file or a device node, and
//! what that disk's queue says. The uring driver reads its rotational flag here; `mqblk
//! twin` finds the disk whose scheduler it sets.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The device a path's I/O lands on: a block device's own number (`st_rdev`), or for a
/// regular file that of the device its file system is on (`st_dev`); `None` for anything
/// else.
pub fn backing_dev(meta: &std::fs::Metadata) -> Option<u64> {
    if meta.file_type().is_block_device() {
        Some(meta.rdev())
    } else if meta.is_file() {
        Some(meta.dev())
    } else {
        None
    }
}

/// Major and minor of device number `dev` (glibc's `gnu_dev_major` / `gnu_dev_minor`).
pub fn dev_numbers(dev: u64) -> (u32, u32) {
    (libc::major(dev), libc::minor(dev))
}

/// The sysfs directory of the disk holding device `dev` (a partition's parent disk), or
/// `None` where sysfs has no block device for it (tmpfs, overlay).
pub fn disk_dir(dev: u64) -> Option<PathBuf> {
    let (major, minor) = dev_numbers(dev);
    let mut dir = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    if dir.join("partition").exists() {
        dir.pop();
    }
    Some(dir)
}

/// `queue/write_cache` of the disk holding `dev`: true for "write back", false for "write
/// through"; `None` when sysfs does not say.
pub fn write_cache(dev: u64) -> Option<bool> {
    let d = disk_dir(dev)?;
    let s = std::fs::read_to_string(d.join("queue/write_cache")).ok()?;
    Some(s.trim() == "write back")
}

/// `queue/rotational` of the disk holding `dev`; false when sysfs does not say.
pub fn rotational(dev: u64) -> bool {
    disk_dir(dev)
        .and_then(|d| std::fs::read_to_string(Path::new(&d).join("queue/rotational")).ok())
        .is_some_and(|s| s.trim() == "1")
}
