//! Buffers in huge pages (`iomem=shmhuge`, `mmaphuge`): an arena lends each of its buffers
//! to one `IoBuf` at a time, says where in its huge page each starts, takes them back on
//! drop, and maps a hugetlbfs file only when it made it (and removes it after).

use mqblk_drivers::hugemem::{arena_pages, reserve, HugeArena, HugeReservation};
use std::sync::{Mutex, MutexGuard};

/// One test at a time reserves huge pages and maps them.
static HUGE: Mutex<()> = Mutex::new(());

/// `pages` free huge pages of 2 MiB for `test` (reserved as root, given back when the
/// reservation drops), or a missing line and `None`. The reservation comes first in the
/// pair, so that it is given back before the lock lets the next test look: the other way
/// round, the next test found this one's page still free, reserved none, and lost it to the
/// give-back before it could map it.
fn huge_pages(
    test: &str,
    pages: u64,
) -> Option<(Option<HugeReservation>, MutexGuard<'static, ()>)> {
    let lock = HUGE.lock().unwrap_or_else(|e| e.into_inner());
    match reserve(2 << 20, pages) {
        Ok(r) => Some((r, lock)),
        Err(e) => {
            mqblk_testkit::missing(test, &format!("no huge pages to map: {e}"));
            None
        }
    }
}

#[test]
fn an_arena_lends_each_buffer_once_inside_its_huge_pages() {
    let test = "an_arena_lends_each_buffer_once_inside_its_huge_pages";
    // Eight buffers of 128 KiB fill one 2 MiB page; twenty take two.
    assert_eq!(arena_pages(8, 128 << 10, 2 << 20), 1);
    assert_eq!(arena_pages(20, 128 << 10, 2 << 20), 2);
    assert_eq!(arena_pages(3, 100_000, 2 << 20), 1);
    let Some(_held) = huge_pages(test, 1) else {
        return;
    };
    let arena = HugeArena::new("t", 8, 128 << 10, 2 << 20, None).expect("an arena");
    assert!(arena.take(256 << 10).is_none(), "larger than its buffers");
    let mut bufs: Vec<_> = (0..8)
        .map(|_| arena.take(64 << 10).expect("a buffer"))
        .collect();
    assert!(arena.take(4096).is_none(), "all eight are lent");
    let mut skips: Vec<u32> = bufs.iter().map(|b| b.bvecs().skip).collect();
    skips.sort_unstable();
    assert_eq!(skips, (0..8).map(|i| i * (128 << 10)).collect::<Vec<_>>());
    for (i, b) in bufs.iter_mut().enumerate() {
        assert_eq!(b.bvecs().run, 2 << 20);
        assert_eq!(b.len(), 64 << 10);
        assert!(b.is_pooled());
        b.set_len(128 << 10);
        b.as_mut_slice().fill(i as u8 + 1);
    }
    for (i, b) in bufs.iter().enumerate() {
        assert!(
            b.as_slice().iter().all(|&x| x == i as u8 + 1),
            "buffer {i} is its own"
        );
    }
    // A clone is heap pages; one grown past its buffer leaves the arena, keeping its bytes.
    let copy = bufs[0].clone();
    assert!(!copy.is_pooled());
    assert_eq!(copy.bvecs(), mqblk_core::BvecLayout::PAGES);
    let mut grown = bufs.pop().unwrap();
    grown.set_len(512 << 10);
    assert!(!grown.is_pooled());
    assert!(grown.as_slice()[..128 << 10].iter().all(|&x| x == 8));
    assert_eq!(arena.free(), 1, "the grown buffer's memory came home");
    drop(bufs);
    assert_eq!(arena.free(), 8);
}

#[test]
fn a_shortage_of_huge_pages_is_one_line() {
    // 1 GiB pages: none are reserved on a machine that did not boot asking for them.
    let free =
        std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
    if free > 0 {
        mqblk_testkit::skip(
            "a_shortage_of_huge_pages_is_one_line",
            "1 GiB huge pages are free here",
        );
        return;
    }
    let err = HugeArena::new("job 'w': iomem=shmhuge", 2, 4096, 1 << 30, None)
        .expect_err("no 1 GiB pages")
        .to_string();
    assert!(err.starts_with("job 'w': iomem=shmhuge: "), "{err}");
    assert!(err.contains("vm.nr_hugepages"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn mmaphuge_maps_only_a_file_it_creates_and_removes_it() {
    let test = "mmaphuge_maps_only_a_file_it_creates_and_removes_it";
    if !mqblk_testkit::is_root() {
        mqblk_testkit::missing(test, "needs root to mount hugetlbfs");
        return;
    }
    let dir = std::env::temp_dir().join(format!("mqblk-hugetlbfs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A file on an ordinary file system is refused, and not left behind.
    let plain = dir.join("plain");
    let err = HugeArena::new("j", 1, 4096, 2 << 20, Some(&plain)).expect_err("not hugetlbfs");
    assert!(err.to_string().contains("not on hugetlbfs"), "{err}");
    assert!(!plain.exists(), "the refused file was removed");
    let Some(_held) = huge_pages(test, 1) else {
        return;
    };
    let ok = std::process::Command::new("mount")
        .args(["-t", "hugetlbfs", "none"])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        mqblk_testkit::missing(test, "mount -t hugetlbfs failed");
        return;
    }
    let file = dir.join("bufs");
    let arena = HugeArena::new("j", 4, 64 << 10, 2 << 20, Some(&file));
    // Another's file is never mapped (nor truncated, nor removed).
    let theirs = dir.join("theirs");
    std::fs::write(&theirs, b"").ok();
    let refused = HugeArena::new("j", 1, 4096, 2 << 20, Some(&theirs)).map(|_| ());
    let theirs_kept = theirs.exists();
    let _ = std::fs::remove_file(&theirs);
    let result = (|| {
        let arena = arena.map_err(|e| e.to_string())?;
        if !file.exists() {
            return Err("the file is not there while mapped".to_string());
        }
        let mut b = arena.take(64 << 10).ok_or("no buffer")?;
        b.as_mut_slice().fill(9);
        if !b.as_slice().iter().all(|&x| x == 9) {
            return Err("bytes did not stick".to_string());
        }
        drop(b);
        drop(arena);
        if file.exists() {
            return Err("the file outlived the arena".to_string());
        }
        Ok(())
    })();
    let _ = std::process::Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    result.unwrap();
    let err = refused.expect_err("an existing file").to_string();
    assert!(err.contains("exists"), "{err}");
    assert!(theirs_kept, "the existing file was left alone");
}
