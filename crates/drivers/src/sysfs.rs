//! The block layer's sysfs view of a device: which disk holds a file or a device node, and
//! what that disk's queue says (`QueueShape`). The uring driver reads its rotational flag and
//! write cache here and reports the disk under it; `mqblk twin` finds the disk whose
//! scheduler it sets and gives mqblk's queue the same shape.

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

/// What a disk's queue looks like in sysfs: its name, hardware queues (`mq/*`), driver tags
/// per hardware queue (`mq/0/nr_tags`), largest request (`queue/max_sectors_kb`), write cache
/// and rotational flag. Fields sysfs does not give are `None` (0 hardware queues).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueShape {
    pub disk: String,
    pub nr_hw_queues: u32,
    pub nr_tags: Option<u32>,
    pub max_sectors_kb: Option<u32>,
    pub write_cache: Option<bool>,
    pub rotational: Option<bool>,
}

impl QueueShape {
    /// The shape of the disk whose sysfs directory is `dir` (`/sys/devices/.../block/vda`).
    pub fn of_dir(dir: &Path) -> QueueShape {
        let read = |rel: &str| {
            std::fs::read_to_string(dir.join(rel))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let num = |rel: &str| read(rel).and_then(|s| s.parse().ok());
        QueueShape {
            disk: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            nr_hw_queues: std::fs::read_dir(dir.join("mq")).map_or(0, |d| d.count() as u32),
            nr_tags: num("mq/0/nr_tags"),
            max_sectors_kb: num("queue/max_sectors_kb"),
            write_cache: read("queue/write_cache").map(|s| s == "write back"),
            rotational: read("queue/rotational").map(|s| s == "1"),
        }
    }

    /// The shape of the disk holding device `dev`, if sysfs has one.
    pub fn of_dev(dev: u64) -> Option<QueueShape> {
        disk_dir(dev).map(|d| QueueShape::of_dir(&d))
    }

    /// One line for reports: `vda: hw_queues=1 nr_tags=128 ...`.
    pub fn describe(&self) -> String {
        let opt = |v: Option<u32>| v.map_or("?".to_string(), |n| n.to_string());
        format!(
            "{}: hw_queues={} nr_tags={} max_sectors_kb={} write_cache={} rotational={}",
            self.disk,
            self.nr_hw_queues,
            opt(self.nr_tags),
            opt(self.max_sectors_kb),
            match self.write_cache {
                Some(true) => "write back",
                Some(false) => "write through",
                None => "?",
            },
            self.rotational.map_or("?", |r| if r { "1" } else { "0" })
        )
    }
}
