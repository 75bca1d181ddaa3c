//! The options whose values need more than a number or a name: `rw`, `bs` and its ranges
//! and splits, file sets, distributions, the engine, CPU masks, percentile lists.

use super::*;
use crate::job::IoMem;

/// `rw=MODE[:N]`: a pattern and fio's modifier (a gap after each sequential I/O, or I/Os
/// per random offset).
pub(super) fn set_rw(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let (mode, modifier, backward) = match text.split_once(':') {
        Some((m, n)) => {
            // `read:-8k`: each I/O starts 8k before the end of the one before.
            let (n, back) = match n.trim().strip_prefix('-') {
                Some(rest) => (rest, true),
                None => (n.trim(), false),
            };
            let n = parse_size(n).ok_or_else(|| {
                bad_named(
                    option,
                    text,
                    "MODE or MODE:N (N a size for sequential modes, a count for random ones)",
                )
            })?;
            (m.trim(), n, back)
        }
        None => (text, 0, false),
    };
    job.rw_modifier = modifier;
    job.rw_backward = backward;
    job.rw = match mode.to_ascii_lowercase().as_str() {
        "read" => RwMode::Read,
        "write" => RwMode::Write,
        "randread" => RwMode::RandRead,
        "randwrite" => RwMode::RandWrite,
        "randrw" => RwMode::RandRw,
        "readwrite" | "rw" => RwMode::ReadWrite,
        "trim" => RwMode::Trim,
        "randtrim" => RwMode::RandTrim,
        "trimwrite" => RwMode::TrimWrite,
        "randtrimwrite" => RwMode::RandTrimWrite,
        _ => {
            return Err(JobErrorKind::NotOneOf {
                option: option.to_string(),
                value: text.to_string(),
                allowed: "read, write, randread, randwrite, randrw, readwrite, rw, trim, randtrim, trimwrite, randtrimwrite".to_string(),
            })
        }
    };
    if backward && job.rw.is_random() {
        return Err(bad_named(
            option,
            text,
            "a negative N only for sequential modes (random ones take a count)",
        ));
    }
    Ok(())
}

/// `bs=`: one size for all directions or a `read,write,trim` list.
pub(super) fn set_bs(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    match parse_bs_list(text, DEFAULT_BS) {
        BsList::Sizes(sizes) => {
            job.bs = sizes;
            // bs and bsrange set the same thing in fio: the later one counts.
            job.bsrange = None;
            Ok(())
        }
        BsList::BadSlot(slot) => Err(bad_named(option, &slot, SIZE_SYNTAX)),
        BsList::Unsupported(reason) => Err(JobErrorKind::Unsupported {
            option: option.to_string(),
            value: text.to_string(),
            reason: reason.to_string(),
        }),
    }
}

/// fio's `str2error`: the names of errnos 1 to 34, in order.
const ERRNO_NAMES: [&str; 34] = [
    "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC", "EBADF", "ECHILD",
    "EAGAIN", "ENOMEM", "EACCES", "EFAULT", "ENOTBLK", "EBUSY", "EEXIST", "EXDEV", "ENODEV",
    "ENOTDIR", "EISDIR", "EINVAL", "ENFILE", "EMFILE", "ENOTTY", "ETXTBSY", "EFBIG", "ENOSPC",
    "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE",
];

/// `ignore_error=READ,WRITE,VERIFY`: per type, errnos joined by `:` (a name of fio's
/// `str2error`, or a number, its sign dropped); a non-empty list replaces that type's
/// default and sets its `continue_on_error` bit (fio's `ignore_error_type`).
pub(super) fn ignore_error(p: &mut ErrorPolicy, text: &str) -> Result<(), String> {
    for (ty, list) in text.split(',').enumerate() {
        if ty >= 3 {
            return Err("at most three lists: read, write, verify".into());
        }
        let mut errs = Vec::new();
        for name in list.split(':').map(str::trim) {
            if name.is_empty() {
                break;
            }
            let e = if name.starts_with('E') {
                ERRNO_NAMES
                    .iter()
                    .position(|n| *n == name)
                    .map(|i| i as i32 + 1)
            } else {
                name.parse::<i32>().ok().map(i32::abs).filter(|&e| e != 0)
            };
            errs.push(e.ok_or_else(|| format!("unknown error {name}, please use a number"))?);
        }
        if !errs.is_empty() {
            p.continue_on |= 1 << ty;
            p.ignore[ty] = Some(errs);
        }
    }
    Ok(())
}

/// A per-direction rate option's three values (`rate`, `rate_min`: sizes; `rate_iops`,
/// `rate_iops_min`: counts, which take the same suffixes), 0 where one is not given.
pub(super) fn rates(option: &str, text: &str, what: &str) -> Result<[u64; 3], JobErrorKind> {
    per_direction(text, 0, |v| {
        parse_size(v).ok_or_else(|| format!("'{v}' is not {what}"))
    })
    .map_err(|r| unsupported(option, text, r))
}

/// Splits fio's per-direction list `r,w,t`: one value applies to all, fewer than three
/// repeat the last, an empty slot keeps `default`.
pub(super) fn per_direction<T: Clone>(
    text: &str,
    default: T,
    mut parse: impl FnMut(&str) -> Result<T, String>,
) -> Result<[T; 3], String> {
    let slots: Vec<&str> = text.split(',').map(str::trim).collect();
    if slots.len() > 3 {
        return Err("at most three values (read,write,trim) are allowed".into());
    }
    let mut out = [default.clone(), default.clone(), default.clone()];
    let mut last = default.clone();
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = match slots.get(i) {
            Some(&"") => default.clone(),
            Some(s) => parse(s)?,
            None => last.clone(),
        };
        last = slot.clone();
    }
    Ok(out)
}

/// fio's `int[,int]` for reads and writes (its cmdprio options): one value is both.
pub(super) fn read_write_ints(
    option: &str,
    text: &str,
    min: u32,
    max: u32,
) -> Result<[u32; 2], JobErrorKind> {
    let slots: Vec<&str> = text.split(',').map(str::trim).collect();
    if slots.len() > 2 {
        return Err(unsupported(option, text, "at most two values (read,write)"));
    }
    let one = |v: &str| {
        v.parse::<u32>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                unsupported(
                    option,
                    text,
                    format!("'{v}' is not a whole number in {min}..={max}"),
                )
            })
    };
    let read = one(slots[0])?;
    let write = match slots.get(1) {
        Some(w) => one(w)?,
        None => read,
    };
    Ok([read, write])
}

/// `cmdprio_bssplit=bs/pct[/class/level]:...[,...]`, read as fio's
/// `parse_cmdprio_bssplit_entry`: a share over 100 counts as 100, a class over 3 as 3, a
/// level over 7 as 7; `bs/` alone is a 0% entry (left out). A third (trim) list is
/// ignored, as fio ignores it.
pub(super) fn set_cmdprio_bssplit(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    use crate::cmdprio::BssplitEntry;
    let entry = |part: &str| -> Result<BssplitEntry, String> {
        let fields: Vec<&str> = part.split('/').map(str::trim).collect();
        let bs = parse_size(fields[0])
            .filter(|&b| b > 0)
            .ok_or_else(|| format!("'{}' is not a block size", fields[0]))?;
        let num = |v: &str| {
            // fio's `%u`: the digits it starts with.
            let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
            digits
                .parse::<u32>()
                .map_err(|_| format!("'{v}' in '{part}' is not a whole number"))
        };
        let perc = match fields.get(1) {
            None | Some(&"") => 0,
            Some(p) => num(p)?.min(100),
        };
        let prio = match fields.len() {
            1 | 2 => None,
            4 => Some((num(fields[2])?.min(3) as u8, num(fields[3])?.min(7) as u8)),
            _ => return Err(format!("'{part}' is not bs/pct or bs/pct/class/level")),
        };
        Ok(BssplitEntry { bs, perc, prio })
    };
    let lists = per_direction(text, Vec::new(), |slot| {
        slot.split(':')
            .map(str::trim)
            .take_while(|p| !p.is_empty())
            .map(entry)
            .collect::<Result<Vec<_>, String>>()
    })
    .map_err(|reason| unsupported(option, text, reason))?;
    let [read, write, _trim] = lists;
    job.cmdprio.bssplit = Some([read, write]);
    Ok(())
}

/// A block size: a nonzero multiple of 512.
pub(super) fn block_size(text: &str) -> Result<u64, String> {
    parse_size(text)
        .filter(|&v| v > 0 && v % 512 == 0 && v <= u64::from(u32::MAX / 2))
        .ok_or_else(|| format!("'{text}' is not a block size (a nonzero multiple of 512)"))
}

pub(super) fn unsupported(option: &str, text: &str, reason: impl ToString) -> JobErrorKind {
    JobErrorKind::Unsupported {
        option: option.to_string(),
        value: text.to_string(),
        reason: reason.to_string(),
    }
}

/// A size, or fio's `N%` (of the device, so at most 100, except `io_size`, a multiple of
/// `size`): `(Some(bytes), None)` or `(None, Some(percent))`.
pub(super) fn size_or_percent(
    text: &str,
    option: &str,
) -> Result<(Option<u64>, Option<f64>), JobErrorKind> {
    if let Some(p) = text.strip_suffix('%') {
        let max = if option == "io_size" { 1e9 } else { 100.0 };
        let pct = parse_percent(p)
            .filter(|v| *v > 0.0 && *v <= max)
            .ok_or_else(|| {
                bad_named(option, text, "a size, or a percentage from 1 to 100 with %")
            })?;
        return Ok((None, Some(pct)));
    }
    let v = parse_size(text).ok_or_else(|| bad_named(option, text, SIZE_SYNTAX))?;
    Ok((Some(v), None))
}

/// fio's data pattern (`buffer_pattern`, `verify_pattern`): `0x` hex digits (bytes in the
/// order written), a decimal number (its bytes, least significant first, as fio stores
/// `12345` as `39 30`), `"text"`, or `'file'` (its contents), one after another.
pub(super) fn parse_pattern(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(hex) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
            let n = hex
                .find(|c: char| !c.is_ascii_hexdigit())
                .unwrap_or(hex.len());
            if n == 0 {
                return Err("0x without hex digits".into());
            }
            let digits = &hex[..n];
            let padded = if n % 2 == 1 {
                format!("0{digits}")
            } else {
                digits.to_string()
            };
            for i in (0..padded.len()).step_by(2) {
                out.push(u8::from_str_radix(&padded[i..i + 2], 16).map_err(|e| e.to_string())?);
            }
            rest = &hex[n..];
        } else if let Some(q) = rest.strip_prefix('"') {
            let end = q.find('"').ok_or("a quoted text without its closing \"")?;
            out.extend_from_slice(&q.as_bytes()[..end]);
            rest = &q[end + 1..];
        } else if let Some(q) = rest.strip_prefix('\'') {
            let end = q.find('\'').ok_or("a file name without its closing '")?;
            let data = std::fs::read(&q[..end]).map_err(|e| format!("'{}': {e}", &q[..end]))?;
            if data.is_empty() {
                return Err(format!("'{}' is empty", &q[..end]));
            }
            out.extend_from_slice(&data);
            rest = &q[end + 1..];
        } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let n = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let v: u64 = rest[..n]
                .parse()
                .map_err(|_| format!("'{}' is too large", &rest[..n]))?;
            let bytes = v.to_le_bytes();
            let used = (8 - (v.leading_zeros() / 8) as usize).max(1);
            out.extend_from_slice(&bytes[..used]);
            rest = &rest[n..];
        } else if rest.starts_with("%o") {
            return Err("the %o (block offset) format is not implemented".into());
        } else {
            return Err(format!(
                "'{rest}' is not 0x hex, a number, \"text\" or 'file'"
            ));
        }
        rest = rest.trim_start();
    }
    if out.is_empty() {
        return Err("an empty pattern".into());
    }
    Ok(out)
}

/// Records `option=Nz` (N zones) for [`JobSpec::zone_counts`] and says whether the value
/// was one; any other value clears an earlier one.
pub(super) fn in_zones(job: &mut JobSpec, option: &'static str, text: &str) -> bool {
    job.zone_counts.retain(|(o, _)| *o != option);
    match text.strip_suffix('z').and_then(|n| n.parse::<u64>().ok()) {
        Some(n) => {
            job.zone_counts.push((option, n));
            true
        }
        None => false,
    }
}

/// `bsrange=min-max[,min-max[,min-max]]`.
pub(super) fn set_bsrange(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let ranges = per_direction(text, (DEFAULT_BS, DEFAULT_BS), |slot| {
        let (lo, hi) = slot
            .split_once('-')
            .ok_or_else(|| format!("'{slot}' is not a range min-max"))?;
        let (lo, hi) = (block_size(lo.trim())?, block_size(hi.trim())?);
        // fio swaps a range given high-low.
        Ok((lo.min(hi), lo.max(hi)))
    })
    .map_err(|reason| unsupported(option, text, reason))?;
    job.bsrange = Some(ranges);
    Ok(())
}

/// `filesize=size` or `filesize=lo-hi`.
pub(super) fn set_filesize(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    let size = |t: &str| {
        parse_size(t.trim())
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("'{t}' is not a size above 0"))
    };
    let range = match text.split_once('-') {
        Some((lo, hi)) => size(lo).and_then(|lo| Ok((lo, size(hi)?))),
        None => size(text).map(|v| (v, v)),
    }
    .map_err(|reason| unsupported(option, text, reason))?;
    job.filesize = Some((range.0.min(range.1), range.0.max(range.1)));
    Ok(())
}

/// `file_service_type=roundrobin|sequential|random[:N]`, or `zipf|pareto|normal|gauss:P`
/// (the distribution's parameter, as `random_distribution` takes it).
pub(super) fn set_file_service(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    let (kind, nr) = match text.split_once(':') {
        Some((k, n)) => (k, Some(n)),
        None => (text, None),
    };
    let kind = match kind.trim() {
        "roundrobin" => FileServiceKind::RoundRobin,
        "sequential" => FileServiceKind::Sequential,
        "random" => FileServiceKind::Random,
        k @ ("zipf" | "pareto" | "normal" | "gauss") => {
            let name = if k == "gauss" { "normal" } else { k };
            let spec = match nr {
                Some(p) => format!("{name}:{}", p.trim()),
                None => name.to_string(),
            };
            let dist =
                Distribution::parse(&spec, parse_size).map_err(|r| unsupported(option, text, r))?;
            job.file_service = FileService {
                kind: FileServiceKind::Skewed,
                nr: 1,
                dist,
            };
            return Ok(());
        }
        other => {
            let known = "roundrobin, sequential, random, zipf, pareto, normal or gauss";
            return Err(unsupported(
                option,
                text,
                format!("'{other}' is not {known}"),
            ));
        }
    };
    let nr = match nr {
        None => 1,
        Some(n) => parse_size(n.trim())
            .filter(|&v| v > 0)
            .ok_or_else(|| unsupported(option, text, format!("':{n}' is not a count above 0")))?,
    };
    job.file_service = FileService {
        kind,
        nr,
        ..FileService::default()
    };
    Ok(())
}

/// `bssplit=size/pct:...[,...]`: one list for all directions or one per direction.
pub(super) fn set_bssplit(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let default = vec![SplitEntry {
        size: DEFAULT_BS as u32,
        share: 10_000,
    }];
    let lists = per_direction(text, default, |slot| {
        parse_split(slot, parse_size).map_err(|e| e.to_string())
    })
    .map_err(|reason| unsupported(option, text, reason))?;
    job.bssplit = Some(lists);
    Ok(())
}

/// `blockalign=size[,size[,size]]`.
pub(super) fn set_blockalign(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    let aligns = per_direction(text, 0, block_size).map_err(|r| unsupported(option, text, r))?;
    job.blockalign = Some(aligns);
    Ok(())
}

/// `random_distribution=`.
pub(super) fn set_random_distribution(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    job.random_distribution =
        Distribution::parse(text, parse_size).map_err(|r| unsupported(option, text, r))?;
    Ok(())
}

/// `startdelay=time` or `startdelay=min-max` (seconds without a unit).
pub(super) fn set_startdelay(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    let time =
        |t: &str| parse_time_ns(t.trim(), SEC).ok_or_else(|| bad_named(option, text, TIME_SYNTAX));
    job.startdelay_ns = match text.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (time(lo)?, time(hi)?);
            (lo.min(hi), lo.max(hi))
        }
        None => {
            let t = time(text)?;
            (t, t)
        }
    };
    Ok(())
}

/// `virtqueue_size=`: `auto` (sysfs) or a descriptor count, 0 for no limit.
pub(super) fn set_virtqueue_size(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    job.virtqueue_size = if text.eq_ignore_ascii_case("auto") {
        None
    } else {
        let n: u32 = text
            .parse()
            .map_err(|_| bad_named(option, text, "auto or a descriptor count (0: no limit)"))?;
        if n != 0 && !(3..=32768).contains(&n) {
            return Err(JobErrorKind::OutOfRange {
                option: option.to_string(),
                value: text.to_string(),
                min: "3".into(),
                max: "32768 (VIRTIO_BLK_MAX_SG_ELEMS)".into(),
            });
        }
        Some(n)
    };
    Ok(())
}

/// `ioengine=`: an engine mqblk runs (see [`crate::job::engine`]), or a line saying why not.
pub(super) fn set_ioengine(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    if text.is_empty() {
        job.ioengine = None;
        return Ok(());
    }
    crate::job::engine::classify(text).map_err(|e| JobErrorKind::Unsupported {
        option: option.to_string(),
        value: text.to_string(),
        reason: e.to_string(),
    })?;
    job.ioengine = Some(text.trim().to_ascii_lowercase());
    Ok(())
}

/// `cpus_allowed=`: a CPU list like `0-3,6`.
pub(super) fn set_cpus_allowed(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    job.cpus_allowed = parse_cpu_list(text)
        .ok_or_else(|| bad_named(option, text, "a CPU list (expected e.g. 0-3,6)"))?;
    Ok(())
}

/// `cpumask=`: fio's bit mask of the CPUs the job may run on (bit N for CPU N, of the
/// low 32 as fio's `str_cpumask_cb` reads them), decimal or `0x` hexadecimal.
pub(super) fn set_cpumask(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let t = text.trim();
    let mask = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse::<u64>().ok(),
    }
    .filter(|m| m & 0xffff_ffff != 0)
    .ok_or_else(|| {
        bad_named(
            option,
            text,
            "a CPU bit mask with a CPU among the low 32 (e.g. 34 or 0x22 for CPUs 1 and 5)",
        )
    })?;
    job.cpus_allowed = (0..32).filter(|i| mask >> i & 1 == 1).collect();
    Ok(())
}

/// `create_fsync`: a file mqblk lays out is always synced once written out (fio's default,
/// 1), so 1 is taken and 0, which would leave it unsynced, is refused.
pub(super) fn set_create_fsync(
    _job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    match crate::job::value::parse_bool(text) {
        Some(true) => Ok(()),
        Some(false) => Err(unsupported(
            option,
            text,
            "a file mqblk lays out is always synced after it is written out (fio's default, 1)",
        )),
        None => Err(bad_named(option, text, "0 or 1")),
    }
}

/// `percentile_list=`: colon-separated percentiles.
pub(super) fn set_percentile_list(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    job.percentile_list = parse_percentile_list(text).ok_or_else(|| {
        bad_named(
            option,
            text,
            "a percentile list (expected up to 20 colon-separated numbers in (0, 100])",
        )
    })?;
    Ok(())
}

/// A fraction from 0 to 1 (fio's `zone_reset_threshold` and `zone_reset_frequency`).
pub(super) fn fraction(option: &str, text: &str) -> Result<f64, JobErrorKind> {
    match text.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(unsupported(option, text, "not a number from 0 to 1")),
    }
}

/// `iomem=` (`mem=`): fio's memory kinds. `cudamalloc` is for fio's RDMA engine, which
/// mqblk does not run.
pub(super) fn set_iomem(job: &mut JobSpec, text: &str, option: &str) -> Result<(), JobErrorKind> {
    let (kind, file) = match text.split_once(':') {
        Some((k, f)) => (k.trim(), Some(f.trim())),
        None => (text.trim(), None),
    };
    let file = match file {
        Some("") => return Err(bad_named(option, text, "a file after the ':'")),
        f => f.map(str::to_string),
    };
    let fileless = |job: &mut JobSpec, mem: IoMem| {
        if file.is_some() {
            return Err(bad_named(
                option,
                text,
                "no file after malloc, shm or shmhuge (only the mmap kinds take one)",
            ));
        }
        job.iomem = mem;
        Ok(())
    };
    match kind.to_ascii_lowercase().as_str() {
        "malloc" => fileless(job, IoMem::Malloc),
        "shm" => fileless(job, IoMem::OtherPages(text.to_string())),
        "shmhuge" => fileless(job, IoMem::Huge { file: None }),
        "mmap" | "mmapshared" => {
            job.iomem = IoMem::OtherPages(text.to_string());
            Ok(())
        }
        "mmaphuge" => {
            job.iomem = IoMem::Huge { file };
            Ok(())
        }
        "cudamalloc" => Err(bad_named(
            option,
            text,
            "malloc, shm, shmhuge, mmap, mmaphuge or mmapshared (cudamalloc is GPU memory for fio's rdma engine)",
        )),
        _ => Err(bad_named(
            option,
            text,
            "malloc, shm, shmhuge, mmap[:FILE], mmaphuge[:FILE] or mmapshared[:FILE]",
        )),
    }
}

/// `hugepage-size=`: a power of two the kernel could offer as a huge page.
pub(super) fn set_hugepage_size(
    job: &mut JobSpec,
    text: &str,
    option: &str,
) -> Result<(), JobErrorKind> {
    let n = parse_size(text.trim())
        .ok_or_else(|| bad_named(option, text, "a size such as 2m or 1g"))?;
    if !n.is_power_of_two() || !(64 << 10..=1 << 30).contains(&n) {
        return Err(bad_named(
            option,
            text,
            "a power of two from 64k to 1g (the huge page sizes of /sys/kernel/mm/hugepages)",
        ));
    }
    job.hugepage_size = n;
    Ok(())
}
