//! A session's score as one document, computed at search time from its exchanges' postings.
//!
//! A question often names what a conversation was about (its project, the people in it) while
//! the exchange that answers it does not, so each exchange found is weighed with its whole
//! session's BM25 score. The session is not indexed a second time as a document of its own
//! (that doubled the words indexed: a third more build time and index); its document is the
//! sum of its exchanges: a word's frequency in the session is its frequency in every question
//! and answer plus once the title's, the session's length the sum of theirs. Only the few
//! sessions of the exchanges found are scored, by walking the postings of the question's
//! words to their exchanges.
//!
//! How rare a word is (BM25's idf) is taken over the exchanges, as for an exchange's own score:
//! how many sessions hold a word is not in the index, and an estimate of it (as if each of a
//! session's exchanges drew the word by chance) ranked a little worse on the evaluation's
//! tuning half (benches/recall; session hit@5 0.92 against 0.93). Reads the index; writes
//! nothing.

use std::collections::HashMap;

use anyhow::Result;
use tantivy::postings::Postings;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Searcher, TERMINATED, Term};

/// BM25's constants, tantivy's.
pub(super) const K1: f32 = 1.2;
pub(super) const B: f32 = 0.75;

/// Where a session's words are.
#[derive(Clone, Copy)]
pub(crate) struct SessionFields {
    pub question: Field,
    pub answer: Field,
    /// The session's title and name, the same on each of its exchanges: counted once.
    pub title: Field,
    /// The session's id, on each of its exchanges.
    pub session: Field,
}

/// Each of `ids`' BM25 score as one document for `terms` (the index's words, each with its
/// weight), over a collection of `sessions` sessions in `searchers`, each with the sessions
/// whose exchanges it hides (they count in its statistics, as a deleted exchange does). A
/// session with none of the words has no entry.
pub(crate) fn scores(
    searchers: &[(&Searcher, &[String])],
    f: SessionFields,
    terms: &[(String, f32)],
    ids: &[&str],
    sessions: u64,
) -> Result<HashMap<String, f32>> {
    let mut scores = HashMap::new();
    if terms.is_empty() || ids.is_empty() {
        return Ok(scores);
    }
    // Per session: each term's frequency, its length, whether its title was counted.
    let mut tf = vec![vec![0u32; terms.len()]; ids.len()];
    let mut length = vec![0u64; ids.len()];
    let mut titled = vec![false; ids.len()];
    let (mut exchanges, mut tokens, mut title_tokens) = (0u64, 0u64, 0u64);
    // Per term: how many exchanges hold it (in their question or their answer, the more).
    let mut held = vec![0u64; terms.len()];
    let segments = searchers.iter().flat_map(|(searcher, hidden)| {
        searcher.segment_readers().iter().map(move |segment| (segment, *hidden))
    });
    for (segment, hidden) in segments {
        exchanges += u64::from(segment.max_doc());
        let alive = segment.alive_bitset();
        let (question, answer, title) = (
            segment.inverted_index(f.question)?,
            segment.inverted_index(f.answer)?,
            segment.inverted_index(f.title)?,
        );
        tokens += question.total_num_tokens() + answer.total_num_tokens();
        title_tokens += title.total_num_tokens();
        // The candidates' exchanges in this segment, in document order, each with its session.
        let index = segment.inverted_index(f.session)?;
        let mut docs: Vec<(DocId, usize)> = Vec::new();
        for (s, id) in ids.iter().enumerate() {
            if hidden.iter().any(|h| h == id) {
                continue;
            }
            let term = Term::from_field_text(f.session, id);
            let Some(mut postings) = index.read_postings(&term, IndexRecordOption::Basic)? else {
                continue;
            };
            while postings.doc() != TERMINATED {
                let doc = postings.doc();
                if alive.is_none_or(|a| a.is_alive(doc)) {
                    docs.push((doc, s));
                }
                postings.advance();
            }
        }
        for (t, (word, _)) in terms.iter().enumerate() {
            let q = question.doc_freq(&Term::from_field_text(f.question, word))?;
            let a = answer.doc_freq(&Term::from_field_text(f.answer, word))?;
            held[t] += u64::from(q.max(a));
        }
        if docs.is_empty() {
            continue;
        }
        docs.sort_unstable();
        let norms =
            [segment.get_fieldnorms_reader(f.question)?, segment.get_fieldnorms_reader(f.answer)?];
        let title_norms = segment.get_fieldnorms_reader(f.title)?;
        // A session's title once: at its first exchange met.
        let mut title_at: Vec<DocId> = Vec::new();
        for &(doc, s) in &docs {
            length[s] += norms.iter().map(|n| u64::from(n.fieldnorm(doc))).sum::<u64>();
            if !titled[s] {
                titled[s] = true;
                length[s] += u64::from(title_norms.fieldnorm(doc));
                title_at.push(doc);
            }
        }
        for (t, (word, _)) in terms.iter().enumerate() {
            for (field, index, only) in [
                (f.question, &question, None),
                (f.answer, &answer, None),
                (f.title, &title, Some(&title_at)),
            ] {
                let term = Term::from_field_text(field, word);
                let Some(mut postings) =
                    index.read_postings(&term, IndexRecordOption::WithFreqs)?
                else {
                    continue;
                };
                for &(doc, s) in &docs {
                    if only.is_some_and(|at| !at.contains(&doc)) {
                        continue;
                    }
                    let at = if postings.doc() < doc { postings.seek(doc) } else { postings.doc() };
                    if at == TERMINATED {
                        break;
                    }
                    if at == doc {
                        tf[s][t] += postings.term_freq();
                    }
                }
            }
        }
    }
    let sessions = sessions.max(1);
    let exchanges = exchanges.max(1);
    let average =
        (tokens as f32 / sessions as f32 + title_tokens as f32 / exchanges as f32).max(1.0);
    let weights: Vec<f32> = terms
        .iter()
        .zip(&held)
        .map(|((_, weight), &held)| {
            let n = held.min(exchanges) as f32;
            let idf = (1.0 + (exchanges as f32 - n + 0.5) / (n + 0.5)).ln();
            weight * idf * (1.0 + K1)
        })
        .collect();
    for (s, id) in ids.iter().enumerate() {
        let norm = K1 * (1.0 - B + B * length[s] as f32 / average);
        let score: f32 = tf[s]
            .iter()
            .zip(&weights)
            .filter(|(tf, _)| **tf > 0)
            .map(|(&tf, w)| w * tf as f32 / (tf as f32 + norm))
            .sum();
        if score > 0.0 {
            scores.insert(id.to_string(), score);
        }
    }
    Ok(scores)
}
