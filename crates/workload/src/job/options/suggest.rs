//! A close option name for a misspelt one.

use super::*;

/// Levenshtein distance, used only to suggest a close option name.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            let best = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
            cur.push(best);
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// Longest unknown name worth comparing; longer input is clearly not a typo of an
/// option, and skipping it keeps hostile input from costing quadratic time.
pub(super) const MAX_SUGGEST_LEN: usize = 64;

/// The closest known name within edit distance 2 of `key`, among the table's names and
/// aliases plus `extra` (e.g. the tool's own command-line options).
pub(crate) fn suggest(key: &str, extra: &[&str]) -> Option<String> {
    if key.len() > MAX_SUGGEST_LEN {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    let table_names = all().flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied()));
    table_names
        .chain(extra.iter().copied())
        .map(|name| (edit_distance(&lower, name), name))
        .filter(|(dist, _)| *dist <= 2)
        .min_by_key(|(dist, _)| *dist)
        .map(|(_, name)| name.to_string())
}
