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

/// The driver tags hardware queue 0 of disk `name` hands out now: the `depth=` of the
/// `bitmap_tags` in debugfs (`/sys/kernel/debug/block/NAME/hctx0/tags`, `blk_mq_debugfs_tags_show`),
/// which can be lower than `mq/0/nr_tags`. `None` where debugfs is not mounted or readable.
pub fn driver_tag_depth(name: &str) -> Option<u32> {
    let text =
        std::fs::read_to_string(format!("/sys/kernel/debug/block/{name}/hctx0/tags")).ok()?;
    // The first `depth=` is the bitmap's (`nr_tags=` and `nr_reserved_tags=` come before).
    text.lines()
        .find_map(|l| l.trim().strip_prefix("depth="))
        .and_then(|v| v.trim().parse().ok())
}

/// Gives disk `dir`, whose scheduler must be `none`, all its driver tags again: writes
/// `queue/nr_requests` = `mq/0/nr_tags`. Writing `nr_requests` under `none` resizes the
/// driver tags' bitmap (`blk_mq_update_nr_requests` → `blk_mq_tag_update_depth` on
/// `hctx->tags` when there are no scheduler tags); switching to a scheduler and back resets
/// the `nr_requests` sysfs shows but, measured on this machine's 6.18, not the bitmap, so
/// a device once set to 4 under `none` (a test of the minimum) keeps 4 tags under every
/// scheduler, even after `losetup -d`, while sysfs reads 128 or 256. `queue_requests_store`
/// returns early on a write of the value `q->nr_requests` holds, so one below goes first.
/// Returns `mq/0/nr_tags`.
pub fn restore_driver_tags(dir: &Path) -> std::io::Result<u32> {
    use std::io::{Error, ErrorKind};
    let read = |rel: &str| -> std::io::Result<u32> {
        let f = dir.join(rel);
        let text = std::fs::read_to_string(&f)?;
        text.trim().parse().map_err(|_| {
            Error::new(
                ErrorKind::InvalidData,
                format!("{}: not a number: {:?}", f.display(), text.trim()),
            )
        })
    };
    let nr_tags = read("mq/0/nr_tags")?;
    let file = dir.join("queue/nr_requests");
    if read("queue/nr_requests")? == nr_tags && nr_tags > 4 {
        std::fs::write(&file, (nr_tags - 1).to_string())?;
    }
    std::fs::write(&file, nr_tags.to_string())?;
    Ok(nr_tags)
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

/// The sysfs directory of the disk a path's I/O lands on: a block device's (a partition's
/// disk), a regular file's file system's, or for a directory (where a file is to be made)
/// its file system's. `NotFound` where that device has no block queue (tmpfs, overlay).
pub fn disk_dir_of_path(path: &Path) -> std::io::Result<PathBuf> {
    use std::io::{Error, ErrorKind};
    let m = std::fs::metadata(path)?;
    let dev = if m.is_dir() {
        m.dev()
    } else {
        backing_dev(&m).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                "not a block device, a regular file or a directory",
            )
        })?
    };
    disk_dir(dev).ok_or_else(|| {
        let (major, minor) = dev_numbers(dev);
        Error::new(
            ErrorKind::NotFound,
            format!("on device {major}:{minor}, which has no block queue in sysfs (tmpfs, overlay?); use a file on a disk or the disk itself"),
        )
    })
}

/// The schedulers a disk's queue offers (`queue/scheduler` of its sysfs directory `dir`),
/// and the one in use (in brackets there).
pub fn schedulers(dir: &Path) -> std::io::Result<(Vec<String>, String)> {
    let text = std::fs::read_to_string(dir.join("queue/scheduler"))?;
    let mut all = Vec::new();
    let mut current = String::new();
    for w in text.split_whitespace() {
        let name = w.trim_start_matches('[').trim_end_matches(']');
        if w.starts_with('[') {
            current = name.to_string();
        }
        all.push(name.to_string());
    }
    Ok((all, current))
}

/// What a disk's queue looks like in sysfs: its name, hardware queues (`mq/*`), driver tags
/// per hardware queue (`mq/0/nr_tags`), largest request (`queue/max_sectors_kb`), most
/// segments per request (`queue/max_segments`), write cache, rotational flag, and for a
/// virtio-blk disk whose rings lack indirect descriptors the size of each ring. Fields sysfs
/// does not give are `None` (0 hardware queues).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueShape {
    pub disk: String,
    pub nr_hw_queues: u32,
    pub nr_tags: Option<u32>,
    pub max_sectors_kb: Option<u32>,
    pub max_segments: Option<u32>,
    /// `queue/max_segment_size`: the most bytes of adjoining memory one segment covers.
    pub max_segment_size: Option<u32>,
    pub write_cache: Option<bool>,
    /// `queue/fua`: the disk honours FUA writes.
    pub fua: Option<bool>,
    pub rotational: Option<bool>,
    /// Descriptors in each virtqueue of a virtio-blk disk without
    /// `VIRTIO_RING_F_INDIRECT_DESC`, where every request takes one descriptor per data
    /// segment plus two (`virtblk_add_req`), so a few large requests fill the ring before
    /// the tags run out. `None` for other disks, or when the ring size cannot be known.
    pub virtqueue_size: Option<u32>,
    /// `queue/zoned`: `none`, `host-aware` or `host-managed` (a kernel built without
    /// `CONFIG_BLK_DEV_ZONED` shows `none` for every disk).
    pub zoned: Option<String>,
    /// `loop/backing_file`: the file a loop device reads and writes (its kworker does, on
    /// the machine's CPUs, `loop_queue_work`). `None` for other disks.
    pub backing_file: Option<String>,
}

/// The virtio feature bit for indirect descriptors (`VIRTIO_RING_F_INDIRECT_DESC`).
const VIRTIO_RING_F_INDIRECT_DESC: usize = 28;

/// The ring size of virtio-blk disk `dir` when its rings lack indirect descriptors. sysfs has
/// no file for it, but `virtblk_probe` sizes the tag set from it: with the module's
/// `queue_depth` parameter at 0 (the default) each hardware queue gets `num_free / 2` tags
/// when indirect descriptors are missing, so the ring holds twice `nr_tags`.
fn virtqueue_size(dir: &Path, nr_tags: Option<u32>) -> Option<u32> {
    let device = dir.join("device");
    let driver = std::fs::read_link(device.join("driver")).ok()?;
    if driver.file_name()? != "virtio_blk" {
        return None;
    }
    // One character per feature bit, bit 0 first (`features_show`).
    let features = std::fs::read_to_string(device.join("features")).ok()?;
    if features.trim().as_bytes().get(VIRTIO_RING_F_INDIRECT_DESC) != Some(&b'0') {
        return None;
    }
    let param = std::fs::read_to_string("/sys/module/virtio_blk/parameters/queue_depth");
    if param.is_ok_and(|p| p.trim() != "0") {
        return None;
    }
    nr_tags.map(|t| t * 2)
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
        let nr_tags = num("mq/0/nr_tags");
        QueueShape {
            disk: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            nr_hw_queues: std::fs::read_dir(dir.join("mq")).map_or(0, |d| d.count() as u32),
            nr_tags,
            max_sectors_kb: num("queue/max_sectors_kb"),
            max_segments: num("queue/max_segments"),
            max_segment_size: num("queue/max_segment_size"),
            write_cache: read("queue/write_cache").map(|s| s == "write back"),
            fua: read("queue/fua").map(|s| s == "1"),
            rotational: read("queue/rotational").map(|s| s == "1"),
            virtqueue_size: virtqueue_size(dir, nr_tags),
            zoned: read("queue/zoned"),
            backing_file: read("loop/backing_file"),
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
            "{}: hw_queues={} nr_tags={} max_sectors_kb={} max_segments={}{} write_cache={} rotational={}",
            self.disk,
            self.nr_hw_queues,
            opt(self.nr_tags),
            opt(self.max_sectors_kb),
            opt(self.max_segments),
            self.virtqueue_size
                .map_or(String::new(), |d| format!(" virtqueue_size={d} (no indirect descriptors)")),
            match self.write_cache {
                Some(true) => "write back",
                Some(false) => "write through",
                None => "?",
            },
            self.rotational.map_or("?", |r| if r { "1" } else { "0" })
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk's sysfs directory as the kernel lays it out, read back: the zoned model comes
    /// from `queue/zoned`, which the uring driver refuses when it says `host-managed`.
    #[test]
    fn a_disks_shape_is_read_from_its_sysfs_files() {
        let dir = std::env::temp_dir().join(format!("mqblk-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let disk = dir.join("sdz");
        for (rel, value) in [
            ("queue/zoned", "host-managed\n"),
            ("queue/rotational", "1\n"),
            ("queue/max_sectors_kb", "1280\n"),
            ("queue/write_cache", "write back\n"),
            ("mq/0/nr_tags", "32\n"),
            ("loop/backing_file", "/dev/shm/x.img\n"),
        ] {
            let p = disk.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, value).unwrap();
        }
        let q = QueueShape::of_dir(&disk);
        assert_eq!(q.disk, "sdz");
        assert_eq!(q.zoned.as_deref(), Some("host-managed"));
        assert_eq!(q.rotational, Some(true));
        assert_eq!(q.max_sectors_kb, Some(1280));
        assert_eq!(q.write_cache, Some(true));
        assert_eq!((q.nr_hw_queues, q.nr_tags), (1, Some(32)));
        assert_eq!(q.backing_file.as_deref(), Some("/dev/shm/x.img"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
