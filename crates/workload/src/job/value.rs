//! fio's value syntax: sizes, times, booleans, percentages and lists.
//!
//! Every parser returns `None` on bad input (never panics, never overflows silently);
//! the option layer turns that into a message naming the option.

/// Parses fio's integer/size syntax with `kb_base=1024`.
///
/// A decimal number may carry a case-insensitive suffix `k`, `m`, `g`, `t` or `p` meaning
/// a power of 1024, or `ki`, `mi`, ... meaning a power of 1000 (fio's deliberately
/// inverted convention, kept for old job files), each with an optional trailing `b`;
/// a bare `b` means bytes. `0x` introduces a hexadecimal number without suffix.
/// Returns `None` for anything else, including values that overflow `u64`.
pub fn parse_size(text: &str) -> Option<u64> {
    let s = text.trim();
    // fio's arithmetic: `(4*1024)`, `(2^20)k`.
    if let Some((value, suffix)) = super::expr::split(s) {
        let v = value * size_multiplier(suffix)? as f64;
        return (v >= 0.0 && v < u64::MAX as f64).then_some(v.round() as u64);
    }
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return parse_hex(hex);
    }
    let (digits, suffix) = split_digits(s)?;
    let number: u64 = digits.parse().ok()?;
    number.checked_mul(size_multiplier(suffix)?)
}

/// Parses a time: a decimal number with an optional case-insensitive suffix `d`, `h`,
/// `m`/`min`, `s`/`sec`, `ms`/`msec`, `us`/`usec` or `ns`/`nsec`. A plain number is in
/// units of `default_unit_ns` (seconds for `runtime`, nanoseconds for `completion_nsec`).
/// Returns nanoseconds, or `None` for bad syntax or overflow.
pub fn parse_time_ns(text: &str, default_unit_ns: u64) -> Option<u64> {
    // fio's arithmetic: a time expression without a unit is in microseconds.
    if let Some((value, suffix)) = super::expr::split(text) {
        let unit = if suffix.is_empty() {
            1_000
        } else {
            time_multiplier(suffix)?
        };
        let v = value * unit as f64;
        return (v >= 0.0 && v < u64::MAX as f64).then_some(v.round() as u64);
    }
    let (digits, suffix) = split_digits(text.trim())?;
    let number: u64 = digits.parse().ok()?;
    let unit = if suffix.is_empty() {
        default_unit_ns
    } else {
        time_multiplier(suffix)?
    };
    number.checked_mul(unit)
}

/// Parses a boolean the way job files write them.
pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Parses a percentage: a finite decimal number with an optional trailing `%`.
/// The range check is the caller's, so that it can report the range.
pub(crate) fn parse_percent(text: &str) -> Option<f64> {
    let s = text.trim();
    let s = s.strip_suffix('%').unwrap_or(s);
    parse_finite(s)
}

/// Highest CPU index accepted in a CPU list; it bounds the list's length so that a
/// range like `0-99999999999` cannot allocate without limit.
const MAX_CPU: usize = 65_535;

/// Parses a CPU list like `0-3,6` into a sorted, duplicate-free list of CPU indices.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (parse_cpu(lo)?, parse_cpu(hi)?),
            None => (parse_cpu(part)?, parse_cpu(part)?),
        };
        if lo > hi {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// fio's limit on `percentile_list` entries (`FIO_IO_U_LIST_MAX_LEN`).
pub(crate) const MAX_PERCENTILES: usize = 20;

/// Parses `percentile_list`: up to 20 colon-separated numbers in (0, 100], returned sorted
/// ascending because fio sorts them before use.
pub(crate) fn parse_percentile_list(text: &str) -> Option<Vec<f64>> {
    let mut list = Vec::new();
    for part in text.split(':') {
        let p = parse_finite(part.trim())?;
        if p <= 0.0 || p > 100.0 {
            return None;
        }
        list.push(p);
    }
    if list.len() > MAX_PERCENTILES {
        return None;
    }
    list.sort_by(f64::total_cmp);
    Some(list)
}

/// The result of parsing `bs=r,w,t`: per-direction sizes, or which slot was bad.
pub(crate) enum BsList {
    /// Sizes for read, write and trim.
    Sizes([u64; 3]),
    /// The slot text that is not a size.
    BadSlot(String),
    /// More than three slots, or a range.
    Unsupported(&'static str),
}

/// Parses fio's per-direction size list: one value applies to all directions; with
/// fewer than three values the last one given is repeated; an empty slot means
/// `default`. Ranges (`1k-4k`) belong to `bsrange` and are refused.
pub(crate) fn parse_bs_list(text: &str, default: u64) -> BsList {
    let slots: Vec<&str> = text.split(',').map(str::trim).collect();
    if slots.len() > 3 {
        return BsList::Unsupported("at most three values (read,write,trim) are allowed");
    }
    if slots.iter().any(|s| s.contains('-') || s.contains(':')) {
        return BsList::Unsupported("a range of block sizes is bsrange's (bsrange=MIN-MAX)");
    }
    let mut sizes = [default; 3];
    let mut last = default;
    for (i, size) in sizes.iter_mut().enumerate() {
        match slots.get(i) {
            Some(&"") => *size = default,
            Some(slot) => match parse_size(slot) {
                Some(v) => *size = v,
                None => return BsList::BadSlot((*slot).to_string()),
            },
            None => *size = last,
        }
        last = *size;
    }
    BsList::Sizes(sizes)
}

/// Splits leading ASCII digits from the rest; `None` if there are no digits.
fn split_digits(s: &str) -> Option<(&str, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    // `end` is the byte index of an ASCII-digit boundary, so both halves are valid str.
    Some(s.split_at(end))
}

/// Parses hexadecimal digits only (no sign, no suffix, at least one digit).
fn parse_hex(hex: &str) -> Option<u64> {
    if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The multiplier of a size suffix, or `None` if the suffix is not one.
fn size_multiplier(suffix: &str) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    if lower.is_empty() || lower == "b" {
        return Some(1);
    }
    let stem = lower.strip_suffix('b').unwrap_or(&lower);
    let (letter, decimal) = match stem.strip_suffix('i') {
        Some(letter) => (letter, true),
        None => (stem, false),
    };
    let power = match letter {
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        _ => return None,
    };
    let base: u64 = if decimal { 1000 } else { 1024 };
    base.checked_pow(power)
}

/// The nanoseconds of one unit of a time suffix, or `None` if it is not one.
fn time_multiplier(suffix: &str) -> Option<u64> {
    const SEC: u64 = 1_000_000_000;
    match suffix.to_ascii_lowercase().as_str() {
        "d" => Some(86_400 * SEC),
        "h" => Some(3_600 * SEC),
        "m" | "min" => Some(60 * SEC),
        "s" | "sec" => Some(SEC),
        "ms" | "msec" => Some(1_000_000),
        "us" | "usec" => Some(1_000),
        "ns" | "nsec" => Some(1),
        _ => None,
    }
}

/// Parses a plain finite decimal number (Rust's `f64` parser also accepts `inf` and
/// `nan`, which are never meaningful in a job file).
fn parse_finite(s: &str) -> Option<f64> {
    let starts_ok = s.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    let v: f64 = s.parse().ok()?;
    (starts_ok && v.is_finite()).then_some(v)
}

/// Parses one CPU index of a CPU list.
fn parse_cpu(s: &str) -> Option<usize> {
    let s = s.trim();
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let cpu: usize = s.parse().ok()?;
    (cpu <= MAX_CPU).then_some(cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_suffix_table() {
        let table: &[(&str, u64)] = &[
            ("0", 0),
            ("4096", 4096),
            ("4k", 4096),
            ("4K", 4096),
            ("4kb", 4096),
            ("4KB", 4096),
            ("4ki", 4000),
            ("4KiB", 4000),
            ("1m", 1 << 20),
            ("1mi", 1_000_000),
            ("1g", 1 << 30),
            ("1Gi", 1_000_000_000),
            ("2t", 2 << 40),
            ("1p", 1 << 50),
            ("1pi", 1_000_000_000_000_000),
            ("512b", 512),
            ("512B", 512),
            ("0x1000", 4096),
            ("0XfF", 255),
            (" 8k ", 8192),
        ];
        for (text, want) in table {
            assert_eq!(parse_size(text), Some(*want), "{text}");
        }
    }

    #[test]
    fn bad_sizes() {
        for text in [
            "",
            "k",
            "4q",
            "-4k",
            "+4",
            "4 k",
            "1.5k",
            "0x",
            "0x1k",
            "0x+1",
            "4kk",
            "99999999999p",
            "18446744073709551616",
        ] {
            assert_eq!(parse_size(text), None, "{text}");
        }
    }

    #[test]
    fn time_suffix_table() {
        const S: u64 = 1_000_000_000;
        let table: &[(&str, u64)] = &[
            ("10", 10 * S),
            ("10s", 10 * S),
            ("10sec", 10 * S),
            ("2m", 120 * S),
            ("2min", 120 * S),
            ("1h", 3600 * S),
            ("1d", 86400 * S),
            ("250ms", 250_000_000),
            ("250msec", 250_000_000),
            ("7us", 7_000),
            ("7usec", 7_000),
            ("9ns", 9),
            ("9NSEC", 9),
        ];
        for (text, want) in table {
            assert_eq!(parse_time_ns(text, S), Some(*want), "{text}");
        }
        assert_eq!(parse_time_ns("10", 1), Some(10));
        assert_eq!(parse_time_ns("10x", S), None);
        assert_eq!(parse_time_ns("", S), None);
        assert_eq!(parse_time_ns("999999999999999d", S), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("6, 1,1"), Some(vec![1, 6]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("0-99999999999"), None);
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn percentile_lists() {
        assert_eq!(
            parse_percentile_list("99:50:99.9"),
            Some(vec![50.0, 99.0, 99.9])
        );
        assert_eq!(parse_percentile_list("0:50"), None);
        assert_eq!(parse_percentile_list("101"), None);
        assert_eq!(parse_percentile_list("nan"), None);
        assert_eq!(parse_percentile_list(&["1"; 21].join(":")), None);
        assert!(parse_percentile_list(&["1"; 20].join(":")).is_some());
    }

    #[test]
    fn bs_lists() {
        let sizes = |t: &str| match parse_bs_list(t, 4096) {
            BsList::Sizes(s) => Some(s),
            _ => None,
        };
        assert_eq!(sizes("8k"), Some([8192; 3]));
        assert_eq!(sizes("4k,64k"), Some([4096, 65536, 65536]));
        assert_eq!(sizes("8k,32k,"), Some([8192, 32768, 4096]));
        assert_eq!(sizes(",8k"), Some([4096, 8192, 8192]));
        assert_eq!(sizes("1k-4k"), None);
        assert_eq!(sizes("1,2,3,4"), None);
        assert_eq!(sizes("4q"), None);
    }
}
