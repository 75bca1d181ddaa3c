//! Number and date formatting the way fio prints them.

/// Unit appended by [`num2str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// No unit (counts such as IOPS).
    None,
    /// Bytes: `B`.
    Byte,
    /// Bytes per second: `B/s`.
    BytePerSec,
    /// Bits per second: `bit/s`, of a number given in bytes (fio's `N2S_BITPERSEC`).
    BitPerSec,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::Byte => "B",
            Unit::BytePerSec => "B/s",
            Unit::BitPerSec => "bit/s",
        }
    }
}

/// fio's significant-figure setting (`sig_figs`, default 4).
pub(crate) const SIG_FIGS: usize = 4;

/// fio's `num2str`: divides by 1000 (or 1024 when `pow2`) until at most `maxlen` digits
/// remain, then spends any room left on decimals, and appends the prefix and unit.
///
/// It deliberately keeps fio's quirks (decimals are truncated from the remainder of the
/// last division only, and there is no carry into the integer part when decimals are
/// shown) so that numbers read exactly like fio's.
pub(crate) fn num2str(num: u64, maxlen: usize, pow2: bool, unit: Unit) -> String {
    num2str_from(num, maxlen, 0, pow2, unit)
}

/// [`num2str`] of a number already in units of the `first`th prefix (fio's `base`
/// argument: 1024 makes `first` 1 whether the prefixes are binary or decimal).
pub(crate) fn num2str_from(
    num: u64,
    maxlen: usize,
    first: usize,
    pow2: bool,
    unit: Unit,
) -> String {
    const SI: [&str; 6] = ["", "k", "M", "G", "T", "P"];
    const IEC: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let prefixes = if pow2 { IEC } else { SI };
    let thousand: u64 = if pow2 { 1024 } else { 1000 };
    let mut num = match unit {
        Unit::BitPerSec => num.saturating_mul(8),
        _ => num,
    };
    let mut post = first;
    let mut modulo: Option<u64> = None;
    while post < prefixes.len() && digits(num) > maxlen {
        modulo = Some(num % thousand);
        num /= thousand;
        post += 1;
    }
    let prefix = prefixes.get(post).copied().unwrap_or("");
    let Some(modulo) = modulo else {
        return format!("{num}{prefix}{}", unit.suffix());
    };
    let room = maxlen.saturating_sub(digits(num));
    if room <= 1 {
        let carry = u64::from(modulo >= thousand / 2);
        return format!("{}{prefix}{}", num + carry, unit.suffix());
    }
    let fraction = format!("{:.*}", room - 1, modulo as f64 / thousand as f64);
    let decimals = fraction.get(2..).unwrap_or("0");
    format!("{num}.{decimals}{prefix}{}", unit.suffix())
}

/// Number of decimal digits of `n`.
fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A count the way fio prints IOPS: `312k`, `1234`, `12.3k`.
pub fn format_count(n: u64) -> String {
    num2str(n, SIG_FIGS, false, Unit::None)
}

/// A byte count in fio's binary form: `11.9GiB`, `4096B`.
pub fn format_bytes(bytes: u64) -> String {
    num2str(bytes, SIG_FIGS, true, Unit::Byte)
}

/// A bandwidth the way fio's `BW=` prints it: `1219MiB/s (1278MB/s)`.
pub fn format_rate(bytes_per_sec: u64) -> String {
    format!(
        "{} ({})",
        num2str(bytes_per_sec, SIG_FIGS, true, Unit::BytePerSec),
        num2str(bytes_per_sec, SIG_FIGS, false, Unit::BytePerSec)
    )
}

/// A latency value the way fio prints min/max: up to 6 digits, then a `k` prefix.
pub(crate) fn format_latency_value(v: u64) -> String {
    num2str(v, 6, false, Unit::None)
}

/// `ctime`-style text for seconds since the epoch, in UTC: `Tue Nov 14 22:13:20 2023`.
/// (fio uses local time; a fixed zone keeps output reproducible and needs no libc.)
pub(crate) fn ctime(epoch_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = epoch_secs / 86_400;
    let secs = epoch_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = DAYS
        .get(((days + 4) % 7) as usize)
        .copied()
        .unwrap_or("Sun");
    let month_name = MONTHS
        .get(month.saturating_sub(1) as usize)
        .copied()
        .unwrap_or("Jan");
    format!(
        "{weekday} {month_name} {day:>2} {:02}:{:02}:{:02} {year}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Converts days since 1970-01-01 to a (year, month, day) civil date (proleptic
/// Gregorian), using the era-based method so it is exact for any u64 day count that
/// fits the year in a u64.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num2str_matches_fio_examples() {
        assert_eq!(format_count(312_345), "312k");
        assert_eq!(format_count(12_345), "12.3k");
        assert_eq!(format_count(1234), "1234");
        assert_eq!(format_count(0), "0");
        assert_eq!(format_rate(1_278_000_000), "1219MiB/s (1278MB/s)");
        assert_eq!(format_bytes(12_800_000_000), "11.9GiB");
        assert_eq!(format_bytes(4096), "4096B");
        assert_eq!(format_latency_value(123_456), "123456");
        assert_eq!(format_latency_value(1_234_567), "1234.6k");
        assert_eq!(format_count(u64::MAX), "18.4");
    }

    #[test]
    fn ctime_formats_utc() {
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime(1_700_000_000), "Tue Nov 14 22:13:20 2023");
        assert_eq!(ctime(951_782_400), "Tue Feb 29 00:00:00 2000");
    }
}
