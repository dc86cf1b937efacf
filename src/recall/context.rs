//! The question of the exchange before, as context: a follow-up ("and on Windows?") leans on
//! it for what it is about. It is scored for the candidates only, once tantivy found them by
//! their own fields: as a field of the one query, its scorers (one per word of the question,
//! on a field as long as the questions) were more than half of tantivy's search of the best
//! 200, for what moves a candidate's rank rather than which exchanges are candidates. The
//! score is BM25's, as tantivy gives it, with the statistics of every searcher taken as one.

use anyhow::Result;
use tantivy::postings::Postings;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocSet, Searcher, TERMINATED, Term};

use super::sessions::{B, K1};

/// What `field` adds to each candidate's score (`(score, searcher, address)`) for `terms`,
/// each with its weight, times `boost`.
pub(super) fn add(
    candidates: &mut [(f32, usize, DocAddress)],
    searchers: &[&Searcher],
    together: &dyn Bm25StatisticsProvider,
    field: Field,
    terms: &[(String, f32)],
    boost: f32,
) -> Result<()> {
    let docs = together.total_num_docs()?.max(1) as f32;
    let average = (together.total_num_tokens(field)? as f32 / docs).max(1.0);
    // Each segment's candidates in the order of their documents, so that a word's postings
    // are walked forward once.
    let place = |c: &(f32, usize, DocAddress)| (c.1, c.2.segment_ord, c.2.doc_id);
    let places: Vec<(usize, u32, u32)> = candidates.iter().map(place).collect();
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_unstable_by_key(|&c| places[c]);
    for (word, weight) in terms {
        let term = Term::from_field_text(field, word);
        let held = together.doc_freq(&term)?;
        if held == 0 {
            continue;
        }
        let n = held as f32;
        let idf = (1.0 + (docs - n + 0.5) / (n + 0.5)).ln();
        let scale = boost * weight * idf * (1.0 + K1);
        for segment in
            order.chunk_by(|&a, &b| places[a].0 == places[b].0 && places[a].1 == places[b].1)
        {
            let (searcher, segment_ord, _) = places[segment[0]];
            let reader = searchers[searcher].segment_reader(segment_ord);
            let Some(mut postings) =
                reader.inverted_index(field)?.read_postings(&term, IndexRecordOption::WithFreqs)?
            else {
                continue;
            };
            let norms = reader.get_fieldnorms_reader(field)?;
            for &c in segment {
                let doc = places[c].2;
                let at = if postings.doc() < doc { postings.seek(doc) } else { postings.doc() };
                if at == TERMINATED {
                    break;
                }
                if at == doc {
                    let tf = postings.term_freq() as f32;
                    let length = norms.fieldnorm(doc) as f32;
                    let norm = K1 * (1.0 - B + B * length / average);
                    candidates[c].0 += scale * tf / (tf + norm);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::index::tests::{exchange, index_of, search};

    /// A follow-up that names only what is new ("and on Windows?") is found for the words of
    /// the question before it, above an exchange that holds its one word more often.
    #[test]
    fn a_follow_up_is_found_by_the_question_before_it() {
        let locks = [
            exchange(1, "how does file locking work in rust?", "File::lock, advisory."),
            exchange(2, "and on windows?", "LockFileEx, mandatory there."),
        ];
        let terminals = [exchange(
            1,
            "which terminal on windows?",
            "Windows Terminal, with a dark theme, a large font and a tab for each shell and profile.",
        )];
        let (_temp, index) = index_of(&[("locks", "", &locks), ("terminals", "", &terminals)]);
        let places: Vec<(String, u64)> = search(&index, "file locking on windows", 5)
            .into_iter()
            .map(|hit| (hit.session, hit.number))
            .collect();
        let at = |place: (&str, u64)| places.iter().position(|p| (p.0.as_str(), p.1) == place);
        assert!(at(("locks", 2)) < at(("terminals", 1)), "{places:?}");
    }
}
