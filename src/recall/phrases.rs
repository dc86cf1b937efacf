//! The best exchanges for a question that quotes a phrase. A phrase is scored where all its
//! words are: their positions are read for each such exchange to see whether they stand side
//! by side. For a phrase of rarer words that is cheap, and it is scored in the one query with
//! the words. A phrase whose every word is common ("function value" in code talk) is in most
//! exchanges by its words, and reading their positions took three times as long as the
//! question unquoted (46 ms of search over 10,000 sessions). Such a phrase re-ranks the best
//! [`WINDOW`] by words (and any rarer phrase) instead (15 ms, and 2 to score the phrase on
//! them), a phrase in a field being common when each of its words is there: each of those
//! that holds it scores it as the one query would; an exchange past them is left out even if
//! the phrase would have lifted it. On the benchmark's store, eight questions quoting common
//! words found the same ten first both ways (with 2,000, three of them did not).

use anyhow::Result;
use tantivy::collector::TopDocs;
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, EnableScoring, Occur, PhraseQuery, Query,
    Scorer,
};
use tantivy::{DocAddress, DocSet, Score, Searcher, SeekDangerResult};

/// A question as tantivy queries: its words with the filters, and each quoted phrase in one
/// field with its boost.
pub(super) struct Asked {
    pub(super) words: Box<dyn Query>,
    pub(super) phrases: Vec<(PhraseQuery, Score)>,
}

/// How many of the best by words a phrase of common words re-ranks.
const WINDOW: usize = 5_000;
/// A phrase is of common words when each is in more than this share of the exchanges.
const COMMON: f64 = 0.1;

/// The `want` best exchanges of `searcher` for `asked`, best first, with the statistics of
/// `stats`.
pub(super) fn best(
    searcher: &Searcher,
    asked: &Asked,
    want: usize,
    stats: &dyn Bm25StatisticsProvider,
) -> Result<Vec<(Score, DocAddress)>> {
    best_within(searcher, asked, want, stats, WINDOW)
}

/// [`best`], with phrases of common words re-ranking the best `window` by words.
fn best_within(
    searcher: &Searcher,
    asked: &Asked,
    want: usize,
    stats: &dyn Bm25StatisticsProvider,
    window: usize,
) -> Result<Vec<(Score, DocAddress)>> {
    let top = |query: &dyn Query, k: usize| {
        let collector = TopDocs::with_limit(k).order_by_score();
        searcher.search_with_statistics_provider(query, &collector, stats)
    };
    let mut rare = Vec::new();
    let mut common = Vec::new();
    let exchanges = stats.total_num_docs()? as f64;
    for phrase in &asked.phrases {
        let mut least = u64::MAX;
        for term in phrase.0.phrase_terms() {
            least = least.min(stats.doc_freq(&term)?);
        }
        let of_common_words = least as f64 > COMMON * exchanges;
        if of_common_words { &mut common } else { &mut rare }.push(phrase);
    }
    let first = one_query(&asked.words, &rare);
    if common.is_empty() {
        return Ok(top(&first, want)?);
    }
    // No more than there are: the number sizes tantivy's buffers (an overlay holds a few).
    let found = top(&first, want.max(window.min(searcher.num_docs() as usize)))?;
    let mut scored = with_phrases(searcher, &common, stats, found)?;
    // Best first; on a tie, the index's order, as tantivy's own.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(want);
    Ok(scored)
}

/// `found` with each exchange's score from `phrases` added, in the index's order.
fn with_phrases(
    searcher: &Searcher,
    phrases: &[&(PhraseQuery, Score)],
    stats: &dyn Bm25StatisticsProvider,
    mut found: Vec<(Score, DocAddress)>,
) -> Result<Vec<(Score, DocAddress)>> {
    found.sort_unstable_by_key(|(_, address)| *address);
    let scoring = EnableScoring::enabled_from_statistics_provider(stats, searcher);
    for (phrase, boost) in phrases {
        let weight = phrase.weight(scoring)?;
        for segment in found.chunk_by_mut(|a, b| a.1.segment_ord == b.1.segment_ord) {
            let reader = searcher.segment_reader(segment[0].1.segment_ord);
            let mut scorer: Option<Box<dyn Scorer>> = None;
            // No exchange below this and after the last asked holds the phrase (the bound
            // tantivy gives, below which the scorer must not be asked again).
            let mut lowest = 0;
            for (score, address) in segment.iter_mut() {
                let doc = address.doc_id;
                if doc < lowest {
                    continue;
                }
                // Asked of each exchange in turn, without reading the positions of those
                // between (a plain seek goes on to the next that holds the phrase).
                let sought = match scorer.as_mut() {
                    Some(scorer) => scorer.seek_danger(doc),
                    None => {
                        let (sought, started) = weight.scorer_danger(reader, doc, *boost)?;
                        scorer = Some(started);
                        sought
                    }
                };
                match sought {
                    SeekDangerResult::Found => {
                        *score += scorer.as_mut().map_or(0.0, |s| s.score());
                        lowest = doc + 1;
                    }
                    SeekDangerResult::SeekLowerBound(bound) => lowest = bound,
                }
            }
        }
    }
    Ok(found)
}

/// The words, and `phrases` scored beside them, as one query. (A phrase's words are words of
/// the question: an exchange that holds it matches them.)
fn one_query(words: &dyn Query, phrases: &[&(PhraseQuery, Score)]) -> Box<dyn Query> {
    if phrases.is_empty() {
        return words.box_clone();
    }
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, words.box_clone())];
    for (phrase, boost) in phrases {
        let boosted = BoostQuery::new(Box::new(phrase.clone()), *boost);
        clauses.push((Occur::Should, Box::new(boosted)));
    }
    Box::new(BooleanQuery::new(clauses))
}

#[cfg(test)]
mod tests {
    use tantivy::schema::{IndexRecordOption, Schema, TEXT};
    use tantivy::{Index, TantivyDocument, Term};

    use super::*;

    /// An index of `segments`, each of bodies, one exchange each, and its one field.
    fn index_of(segments: &[Vec<String>]) -> (Searcher, tantivy::schema::Field) {
        let mut schema = Schema::builder();
        let body = schema.add_text_field("body", TEXT);
        let index = Index::create_in_ram(schema.build());
        let mut writer: tantivy::IndexWriter =
            index.writer_with_num_threads(1, 15_000_000).unwrap();
        writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        for bodies in segments {
            for text in bodies {
                let mut doc = TantivyDocument::default();
                doc.add_text(body, text);
                writer.add_document(doc).unwrap();
            }
            writer.commit().unwrap();
        }
        let searcher = index.reader().unwrap().searcher();
        assert_eq!(searcher.segment_readers().len(), segments.len());
        (searcher, body)
    }

    fn asked(body: tantivy::schema::Field, words: &[&str], phrase: &[&str]) -> Asked {
        // The tests' phrases are common: each word in more than a tenth of the exchanges.
        let term = |w: &str| Term::from_field_text(body, w);
        let clauses = words.iter().map(|w| {
            let query = tantivy::query::TermQuery::new(term(w), IndexRecordOption::WithFreqs);
            (Occur::Should, Box::new(query) as Box<dyn Query>)
        });
        let phrase = PhraseQuery::new(phrase.iter().map(|w| term(w)).collect());
        Asked {
            words: Box::new(BooleanQuery::new(clauses.collect())),
            phrases: vec![(phrase, 2.0)],
        }
    }

    /// Exchanges holding `alpha beta` side by side every `apart`th, the two words apart in
    /// the rest, and `gamma` in a few of each.
    fn bodies(count: usize, apart: usize) -> Vec<String> {
        let filler = |i: usize| "delta ".repeat(i % 7);
        (0..count)
            .map(|i| {
                let gamma = if i % 5 == 0 { "gamma gamma" } else { "" };
                match i % apart {
                    0 => format!("alpha beta {} {gamma}", filler(i)),
                    _ => format!("beta {} alpha {gamma}", filler(i)),
                }
            })
            .collect()
    }

    /// The best as the one query of words and phrases scores every exchange.
    fn by_one_query(searcher: &Searcher, asked: &Asked, want: usize) -> Vec<(Score, DocAddress)> {
        let phrases: Vec<&(PhraseQuery, Score)> = asked.phrases.iter().collect();
        let query = one_query(&*asked.words, &phrases);
        let collector = TopDocs::with_limit(want).order_by_score();
        searcher.search_with_statistics_provider(&*query, &collector, searcher).unwrap()
    }

    fn addresses(found: &[(Score, DocAddress)]) -> Vec<DocAddress> {
        found.iter().map(|(_, address)| *address).collect()
    }

    #[test]
    fn a_phrase_of_common_words_scores_the_best_by_words_as_the_one_query_would() {
        // Both words in every exchange: common. Holders every third.
        let (searcher, body) = index_of(&[bodies(60, 3)]);
        let asked = asked(body, &["alpha", "beta", "gamma"], &["alpha", "beta"]);
        let want = 25;
        let exact = by_one_query(&searcher, &asked, want);
        let found = best_within(&searcher, &asked, want, &searcher, 60).unwrap();
        assert_eq!(addresses(&found), addresses(&exact));
        for ((a, _), (b, _)) in found.iter().zip(&exact) {
            assert!((a - b).abs() <= 1e-5 * b.abs(), "{a} against {b}");
        }
        // A holder comes first.
        assert_eq!(found[0].1.doc_id % 3, 0);
        // Re-ranking only the best 10 by words: what those hold is scored, the rest left out.
        let narrow = best_within(&searcher, &asked, 5, &searcher, 10).unwrap();
        let words = by_one_query(&searcher, &Asked { phrases: Vec::new(), ..asked }, 10);
        assert!(narrow.iter().all(|(_, address)| addresses(&words).contains(address)));
    }

    #[test]
    fn a_phrase_of_a_rarer_word_is_scored_in_the_one_query() {
        // `alpha` in one exchange of twenty (under a tenth of them): every holder is found,
        // however low its words alone would rank it.
        let mut texts = vec!["beta gamma gamma gamma".to_string(); 40];
        texts.push("alpha beta".to_string());
        texts.push("beta alpha".to_string());
        let (searcher, body) = index_of(&[texts]);
        let asked = asked(body, &["alpha", "beta", "gamma"], &["alpha", "beta"]);
        let found = best_within(&searcher, &asked, 3, &searcher, 1).unwrap();
        let exact = by_one_query(&searcher, &asked, 3);
        assert_eq!(addresses(&found), addresses(&exact));
        assert_eq!(found[0].1.doc_id, 40, "the holder first");
    }

    #[test]
    fn a_phrase_of_three_common_words_is_scored_across_segments_even_where_one_lacks_a_word() {
        let side_by_side = |i: usize| match i % 4 {
            0 => format!("alpha beta gamma {}", "delta ".repeat(i % 5)),
            1 => format!("gamma beta alpha {}", "delta ".repeat(i % 3)),
            _ => format!("alpha beta {} gamma", "delta ".repeat(i % 6)),
        };
        let segments = [
            (0..30).map(side_by_side).collect(),
            // No `gamma` here: the phrase's scorer for this segment is empty.
            (0..20).map(|i| format!("alpha beta {}", "delta ".repeat(i % 4))).collect(),
            (30..70).map(side_by_side).collect(),
        ];
        let (searcher, body) = index_of(&segments);
        let asked = asked(body, &["alpha", "beta", "gamma"], &["alpha", "beta", "gamma"]);
        for want in [1, 7, 90] {
            let exact = by_one_query(&searcher, &asked, want);
            let found = best_within(&searcher, &asked, want, &searcher, 90).unwrap();
            assert_eq!(addresses(&found), addresses(&exact), "{want}");
            for ((a, _), (b, _)) in found.iter().zip(&exact) {
                assert!((a - b).abs() <= 1e-5 * b.abs(), "{a} against {b}");
            }
        }
        let first = best_within(&searcher, &asked, 1, &searcher, 90).unwrap()[0].1;
        assert_ne!(first.segment_ord, 1, "a holder first");
    }
}
