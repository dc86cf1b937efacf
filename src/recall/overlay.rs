//! Sessions read beside the index rather than committed into it: a commit costs a search over
//! thousands of sessions more than reading a few short ones again (see `super`'s
//! `OVERLAY_SESSIONS`).

use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::Field;
use tantivy::{Searcher, Term};

/// A few sessions as their files hold them now, indexed in memory ([`super::index::Index::overlay`]) and
/// searched beside the index in place of what it holds of them, with the two's statistics
/// taken as one: the scores a commit of them would give (an exchange a commit takes out still
/// counts in tantivy's statistics until its segment is merged, as one hidden here does),
/// without the commit's cost.
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
