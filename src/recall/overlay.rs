//! Sessions read beside the index rather than committed into it: a commit costs a search over
//! thousands of sessions more than reading a few short ones again (see `super`'s
//! `OVERLAY_SESSIONS`). The overlay is kept in `recall/overlay` with what it was read from, so
//! that the next search, while those files and the index stay as they were, loads it rather
//! than reading and indexing the sessions again: a cache of a cache, never trusted past its key.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use tantivy::Directory;
use tantivy::directory::RamDirectory;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::Field;
use tantivy::{Searcher, Term};

/// The first line of the overlay's file; the key's digest follows it.
const MAGIC: &str = "cca-overlay 1";
/// More than a few short sessions' overlay ever takes.
const MOST: u64 = 64 << 20;

/// A few sessions as their files hold them now, indexed in memory
/// ([`super::index::Index::overlay`]) and searched beside the index in place of what it holds of
/// them, with the two's statistics taken as one: the scores a commit of them would give (an
/// exchange a commit takes out still counts in tantivy's statistics until its segment is merged,
/// as one hidden here does), without the commit's cost.
#[derive(Clone)]
pub(crate) struct Overlay {
    pub(super) index: tantivy::Index,
    /// The sessions the index's exchanges are hidden of: those read, and those gone.
    pub(super) ids: Vec<String>,
}

/// Searchers taken as one for BM25: how many exchanges, words and exchanges with a word.
pub(super) struct Together<'a>(pub(super) &'a [&'a Searcher]);

impl Overlay {
    /// Whether it holds session `id` (or hides it, gone).
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.ids.iter().any(|held| held == id)
    }

    /// Keeps it in `path`, with `key`, a digest of what it was read from (the index's commit,
    /// and each session's stamp). A file that cannot be written costs only what it saves.
    pub(crate) fn keep(&self, path: &Path, key: u64) {
        let _ = self.bytes(key).and_then(|bytes| crate::store::replace_cache_file(path, &bytes));
    }

    /// Its files, each as `NAME LENGTH` and its bytes, after a line with the key.
    fn bytes(&self, key: u64) -> Result<Vec<u8>> {
        let mut listed: Vec<PathBuf> =
            self.index.load_metas()?.list_segment_files().into_iter().collect();
        listed.sort();
        let files = std::iter::once(PathBuf::from("meta.json")).chain(listed);
        let mut body = Vec::new();
        for file in files {
            let Ok(data) = self.index.directory().atomic_read(&file) else { continue };
            let name = file.to_str().ok_or_else(|| anyhow!("a file name that is not UTF-8"))?;
            body.extend(format!("{name} {}\n", data.len()).into_bytes());
            body.extend(data);
        }
        // The body's own digest: tantivy checks no sums, and damaged postings could find
        // wrong exchanges without failing.
        let sum = crate::store::fnv1a(&[&body]);
        let ids = self.ids.join(" ");
        let mut bytes = format!("{MAGIC} {key:016x} {sum:016x} {ids}\n").into_bytes();
        bytes.extend(body);
        Ok(bytes)
    }

    /// The overlay kept in `path` with `key`, if there is one: `None` for any other (another
    /// key, a file cut short or damaged, an index that does not open with `schema`).
    pub(crate) fn kept(path: &Path, key: u64, schema: &tantivy::schema::Schema) -> Option<Overlay> {
        let bytes = crate::store::read_at_most(path, MOST).ok()?;
        let (head, mut rest) = split_line(&bytes)?;
        let head = std::str::from_utf8(head).ok()?;
        let (sum, ids) = head.strip_prefix(&format!("{MAGIC} {key:016x} "))?.split_once(' ')?;
        if u64::from_str_radix(sum, 16).ok()? != crate::store::fnv1a(&[rest]) {
            return None;
        }
        let ids: Vec<String> =
            ids.split(' ').filter(|id| !id.is_empty()).map(String::from).collect();
        let directory = RamDirectory::create();
        while !rest.is_empty() {
            let (line, after) = split_line(rest)?;
            let (name, length) = std::str::from_utf8(line).ok()?.rsplit_once(' ')?;
            let length: usize = length.parse().ok()?;
            let data = after.get(..length)?;
            directory.atomic_write(Path::new(name), data).ok()?;
            rest = &after[length..];
        }
        let index = tantivy::Index::open(directory).ok()?;
        (index.schema() == *schema).then_some(Overlay { index, ids })
    }
}

/// The bytes before the first newline, and those after it.
fn split_line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&b| b == b'\n')?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

impl Bm25StatisticsProvider for Together<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.0.iter().map(|s| Bm25StatisticsProvider::total_num_tokens(*s, field)).sum()
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.0.iter().map(|s| Bm25StatisticsProvider::total_num_docs(*s)).sum()
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.0.iter().map(|s| s.doc_freq(term)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::super::exchanges::Exchange;
    use super::super::index::{Filter, Index, Session};
    use super::*;

    #[test]
    fn a_kept_overlay_is_taken_back_only_whole_and_with_its_key() {
        let temp = tempfile::tempdir().unwrap();
        let (index, _) = Index::create(&temp.path().join("index")).unwrap();
        let exchanges = [Exchange {
            number: 1,
            at: None,
            question: "where do otters sleep?".into(),
            answer: "in holts".into(),
            answered: true,
            span: 0..0,
        }];
        let session = Session {
            id: "s",
            title: "",
            name: None,
            engine: "claude",
            folder: "/w",
            created: "",
            exchanges: &exchanges,
        };
        let overlay = index.overlay(&["s".into(), "gone".into()], &[session]).unwrap();
        let path = temp.path().join("overlay");
        overlay.keep(&path, 7);
        let schema = index.schema();
        let kept = Overlay::kept(&path, 7, &schema).unwrap();
        assert_eq!(kept.ids, ["s", "gone"]);
        let question = super::super::question::parse("otters");
        let found = |overlay: &Overlay| -> Vec<(String, f32)> {
            let hits = index.search(&question, &Filter::default(), 5, Some(overlay)).unwrap();
            hits.into_iter().map(|hit| (hit.session, hit.score)).collect()
        };
        assert_eq!(found(&kept).len(), 1);
        assert_eq!(found(&kept), found(&overlay));
        assert!(Overlay::kept(&path, 8, &schema).is_none(), "another key");
        let bytes = std::fs::read(&path).unwrap();
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(Overlay::kept(&path, 7, &schema).is_none(), "cut at {cut}");
        }
        let mut damaged = bytes.clone();
        let at = damaged.len() - 10;
        damaged[at] ^= 1;
        std::fs::write(&path, &damaged).unwrap();
        assert!(Overlay::kept(&path, 7, &schema).is_none(), "damaged");
    }
}
