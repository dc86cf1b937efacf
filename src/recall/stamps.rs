//! The stamps file, beside the index: what the index holds of each session, its file's stamp
//! when it was read, written just after each commit, whose payload holds the stamps' digest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use crate::store::Stamp;

/// What the index holds of each session: its file's stamp when it was read.
pub(crate) type Stamps = BTreeMap<String, Stamp>;

/// The stamps file's text: the digest, then a line per session, `ID STAMP`, numbers in hex.
/// (Plain lines, each number written by hand: JSON, then `format!` per line, took milliseconds
/// to write and read at 10,000 sessions, paid by the search after each new turn.)
pub(super) fn stamps_text(digest: u64, stamps: &Stamps) -> String {
    let mut text = String::with_capacity(40 * (stamps.len() + 1));
    push_hex(&mut text, digest);
    text.push('\n');
    for (id, stamp) in stamps {
        text.push_str(id);
        text.push(' ');
        push_hex(&mut text, *stamp);
        text.push('\n');
    }
    text
}

/// `n` as 16 lowercase hex digits.
fn push_hex(text: &mut String, n: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    text.extend((0..16).rev().map(|i| char::from(DIGITS[(n >> (4 * i)) as usize & 0xf])));
}

/// The stamps a stamps file holds, when they have the digest it names; `None` for anything
/// else (a file cut short, damaged, or not one).
fn parse_stamps(text: &str) -> Option<(u64, Stamps)> {
    let mut lines = text.lines();
    let digest = u64::from_str_radix(lines.next()?, 16).ok()?;
    let pairs = lines
        .map(|line| {
            let (id, stamp) = line.split_once(' ')?;
            Some((id.to_string(), u64::from_str_radix(stamp, 16).ok()?))
        })
        .collect::<Option<Vec<_>>>()?;
    // Built at once from the pairs (they are in order), not one insert at a time.
    let stamps = Stamps::from_iter(pairs);
    let held = self::digest(stamps.iter().map(|(id, s)| (id.as_str(), *s)));
    (held == digest && text.ends_with('\n')).then_some((digest, stamps))
}

/// A digest of sessions and stamps, whatever their order: the store's ([`crate::store::digest`]),
/// so that the index's commit names the store as a search stamps it.
pub(crate) use crate::store::digest;

/// The stamps the last commit holds (its digest is `digest`), from the stamps file beside
/// the index; `Err` when that file is not the last commit's.
pub(crate) fn read(dir: &Path, digest: u64) -> Result<Stamps> {
    let path = stamps_path(dir);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let (held, stamps) =
        parse_stamps(&text).ok_or_else(|| anyhow!("{} cannot be read", path.display()))?;
    if held != digest {
        return Err(anyhow!("{} is not the index's last commit's", path.display()));
    }
    Ok(stamps)
}

/// The stamps the last commit holds (its digest is `digest`) of sessions `ids`, each
/// `None` when it holds none, looked up in the stamps file (its lines are in the order of
/// their ids) without reading each. A damaged line gives a stamp no file has, or none: the
/// search that asked finds the store's digest not what it expected, and goes the usual way.
pub(crate) fn held_of(dir: &Path, digest: u64, ids: &[String]) -> Result<Vec<Option<Stamp>>> {
    let path = stamps_path(dir);
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let (head, lines) =
        bytes.split_at(memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |n| n + 1));
    let head = std::str::from_utf8(head).ok().map(|h| h.trim_end_matches('\n'));
    if head.and_then(|h| u64::from_str_radix(h, 16).ok()) != Some(digest) {
        return Err(anyhow!("{} is not the index's last commit's", path.display()));
    }
    Ok(ids.iter().map(|id| stamp_in(lines, id)).collect())
}

/// The stamp of `id` in a stamps file's `lines` (in the order of their ids), found by a
/// binary search of the bytes: neither each line nor the whole file is read as text.
fn stamp_in(lines: &[u8], id: &str) -> Option<Stamp> {
    // The lines that start in `low..high` are those left to look at.
    let (mut low, mut high) = (0, lines.len());
    while low < high {
        let middle = low + (high - low) / 2;
        let start = memchr::memrchr(b'\n', &lines[low..middle]).map_or(low, |n| low + n + 1);
        let end = memchr::memchr(b'\n', &lines[start..]).map_or(lines.len(), |n| start + n);
        let line = &lines[start..end];
        let (held, stamp) = line.split_at(memchr::memchr(b' ', line).unwrap_or(line.len()));
        match held.cmp(id.as_bytes()) {
            std::cmp::Ordering::Equal => {
                let stamp = std::str::from_utf8(stamp.get(1..)?).ok()?;
                return u64::from_str_radix(stamp, 16).ok();
            }
            std::cmp::Ordering::Less => low = end + 1,
            std::cmp::Ordering::Greater => high = start,
        }
    }
    None
}

/// Writes the stamps file of the index in `dir`, whose commit holds `digest`. Not flushed, as
/// tantivy's files are not: a file a system crash cut short does not have the digest it
/// names, and the index is rebuilt.
pub(super) fn write(dir: &Path, digest: u64, stamps: &Stamps) -> Result<()> {
    crate::store::replace_cache_file(&stamps_path(dir), stamps_text(digest, stamps).as_bytes())
}

/// The stamps file: beside the index's folder, so that tantivy's clean-up never meets it.
pub(super) fn stamps_path(dir: &Path) -> PathBuf {
    dir.with_extension("stamps")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_stamp_is_looked_up_in_the_file_of_the_commit_only() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("index");
        let stamps: Stamps =
            [("a", 1), ("b-2", 2), ("b", 3), ("c", 4)].map(|(id, s)| (id.to_string(), s)).into();
        let held = digest(stamps.iter().map(|(id, s)| (id.as_str(), *s)));
        write(&dir, held, &stamps).unwrap();
        let ids = ["c", "b", "a", "zz", "b-2", ""].map(String::from);
        let found = held_of(&dir, held, &ids).unwrap();
        assert_eq!(found, [Some(4), Some(3), Some(1), None, Some(2), None]);
        assert!(held_of(&dir, held + 1, &ids).is_err(), "another commit's");

        // Every line of a long file is found, and nothing between them.
        for count in [0, 1, 2, 3, 1000] {
            let stamps: Stamps = (0..count).map(|n| (format!("{:05}", 2 * n), n)).collect();
            let held = digest(stamps.iter().map(|(id, s)| (id.as_str(), *s)));
            write(&dir, held, &stamps).unwrap();
            let ids: Vec<String> = (0..2 * count + 1).map(|n| format!("{n:05}")).collect();
            let expected: Vec<Option<Stamp>> = (0..2 * count + 1)
                .map(|n| (n % 2 == 0 && n < 2 * count).then_some(n / 2))
                .collect();
            assert_eq!(held_of(&dir, held, &ids).unwrap(), expected, "{count} sessions");
        }
    }

    #[test]
    fn a_stamps_file_is_read_back_only_whole() {
        let stamps: Stamps =
            [("20261121-101500".to_string(), 7), ("b".to_string(), u64::MAX)].into_iter().collect();
        let held = digest(stamps.iter().map(|(id, s)| (id.as_str(), *s)));
        let text = stamps_text(held, &stamps);
        assert_eq!(parse_stamps(&text), Some((held, stamps.clone())));
        // Cut short anywhere, or damaged: not trusted.
        for cut in 0..text.len() {
            assert_eq!(parse_stamps(&text[..cut]), None, "{:?}", &text[..cut]);
        }
        assert_eq!(parse_stamps(&text.replace(" 0000000000000007", " 0000000000000008")), None);
        assert_eq!(parse_stamps("{\"digest\": 1}"), None);
        let empty = stamps_text(digest(std::iter::empty()), &Stamps::new());
        assert_eq!(parse_stamps(&empty), Some((0, Stamps::new())));
    }
}
