//! The rankings the recall-quality section computes inside the bench: plain BM25 (the baseline
//! the issue names) and variants with one more feature each, to tell the ranking's implementer
//! which features earn their keep on the evaluation. Pure: exchanges and questions in, ranked
//! exchange indexes out; it never runs cca.

use std::collections::HashMap;

/// One exchange as the rankings see it.
pub(crate) struct Doc {
    /// The session's index among all, and its id.
    pub(crate) session: usize,
    pub(crate) session_id: String,
    pub(crate) exchange: u64,
    pub(crate) question: String,
    pub(crate) answer: String,
    /// The session's title and name, the same for each of its exchanges.
    pub(crate) title: String,
    /// Days before the evaluation's "now" the exchange was asked.
    pub(crate) age_days: f64,
}

/// Which features a ranking uses. `Features::default()` is plain BM25.
#[derive(Clone, Copy)]
pub(crate) struct Features {
    /// BM25's term-frequency saturation and length normalisation.
    pub(crate) k1: f64,
    pub(crate) b: f64,
    pub(crate) stop_words: bool,
    pub(crate) stemming: Stemming,
    /// Weights of the question, answer and title fields (BM25F-style: each field scored on its
    /// own, then summed). `None`: one field, question and answer together.
    pub(crate) fields: Option<[f64; 3]>,
    /// How much a recent exchange is preferred: the score is multiplied by
    /// `1 + recency * 0.5^(age / 30 days)`.
    pub(crate) recency: f64,
    /// Added, per pair of query words next to each other in the question, when the exchange has
    /// them within three words of each other; scaled by the pair's IDF.
    pub(crate) proximity: f64,
    /// Query words are joined by their synonyms from a small general list, at half weight.
    pub(crate) synonyms: bool,
    /// A share of the best score of the exchange's session is added to it: a question names its
    /// project while the exchange that answers it may not.
    pub(crate) session_context: f64,
    /// A share of the BM25 score of the whole session (title, name, every exchange), as one
    /// document, is added to each of its exchanges.
    pub(crate) session_document: f64,
    /// Pseudo-relevance feedback's weight (0: none); see `Ranker::expand`.
    pub(crate) feedback: f64,
}

/// How words are reduced before they are compared.
#[derive(Clone, Copy, Default, PartialEq, Debug)]
pub(crate) enum Stemming {
    #[default]
    None,
    /// Plural endings only: "retries" is "retry", "invoices" is "invoice".
    Plurals,
    /// The suffix stripper below: plurals, -ing, -ed, -ly and a few derivational endings.
    Suffixes,
}

impl Default for Features {
    /// Plain BM25 with the usual parameters (tantivy's and Lucene's defaults).
    fn default() -> Features {
        Features {
            k1: 1.2,
            b: 0.75,
            stop_words: false,
            stemming: Stemming::None,
            fields: None,
            recency: 0.0,
            proximity: 0.0,
            synonyms: false,
            session_context: 0.0,
            session_document: 0.0,
            feedback: 0.0,
        }
    }
}

/// Function words of English questions and answers; a query's content is what is left.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does",
    "doing", "done", "for", "from", "get", "got", "had", "has", "have", "he", "her", "here", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "not",
    "now", "of", "on", "one", "or", "our", "out", "over", "she", "should", "so", "some", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too",
    "up", "us", "use", "used", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "why", "will", "with", "would", "you", "your", "s", "t", "ll", "ve", "re", "d",
    "m", "don", "didn", "doesn", "isn", "wasn", "aren", "end", "ended", "way", "thing", "things",
    "again", "ever", "last", "time", "said", "say", "tell", "remind", "recall", "remember", "back",
    "actually", "still", "ok", "okay",
];

// Synonyms a developer's words commonly have (the list recall uses: general, written before
// looking at which questions miss), used only in the variant that says so.
use cca::SYNONYMS;

/// Whether the rankings' stop-word list holds `word`.
pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word)
}

/// Lowercase runs of letters and digits: the baseline's tokens.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A small suffix stripper (no stemmer crate is in Cargo.lock): plurals, -ing, -ed, -ly and a
/// few derivational endings, enough to join "retries"/"retry" and "deciding"/"decided"/"decide".
pub(crate) fn stem(word: &str) -> String {
    if word.len() <= 3 || word.chars().any(|c| c.is_ascii_digit()) {
        return word.to_string();
    }
    let mut w = word.to_string();
    for (suffix, replace) in [
        ("ational", "ate"),
        ("ization", "ize"),
        ("fulness", "ful"),
        ("iveness", "ive"),
        ("ations", "ate"),
        ("ation", "ate"),
        ("ments", ""),
        ("ment", ""),
        ("ness", ""),
        ("ities", ""),
        ("ity", ""),
        ("ingly", ""),
        ("edly", ""),
        ("ies", "y"),
        ("ied", "y"),
        ("sses", "ss"),
        ("ing", ""),
        ("ed", ""),
        ("ly", ""),
        ("es", "e"),
        ("s", ""),
    ] {
        if let Some(stem) = w.strip_suffix(suffix)
            && stem.len() >= 3
            && !(suffix == "s" && (stem.ends_with('s') || stem.ends_with('u')))
        {
            w = format!("{stem}{replace}");
            break;
        }
    }
    // "stopp" -> "stop", "retri" stays: doubled consonants left by -ing/-ed.
    let bytes = w.as_bytes();
    if w.len() > 3 {
        let (a, b) = (bytes[w.len() - 1], bytes[w.len() - 2]);
        if a == b && !b"lsz".contains(&a) && !b"aeiou".contains(&a) {
            w.pop();
        }
    }
    // "decide"/"decid", "cache"/"cach": a final e is dropped so both forms meet.
    if w.len() > 4 && w.ends_with('e') {
        w.pop();
    }
    w
}

/// A word without its plural ending.
pub(crate) fn plural(word: &str) -> String {
    if word.len() <= 3 || word.chars().any(|c| c.is_ascii_digit()) {
        return word.to_string();
    }
    if let Some(stem) = word.strip_suffix("ies") {
        return format!("{stem}y");
    }
    for ending in ["sses", "xes", "ches", "shes", "zes"] {
        if word.ends_with(ending) {
            return word[..word.len() - 2].to_string();
        }
    }
    if word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
    {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

/// What a text becomes for a ranking with these features.
pub(crate) fn terms(text: &str, features: &Features) -> Vec<String> {
    tokens(text)
        .into_iter()
        .filter(|t| !features.stop_words || !STOP_WORDS.contains(&t.as_str()))
        .map(|t| match features.stemming {
            Stemming::None => t,
            Stemming::Plurals => plural(&t),
            Stemming::Suffixes => stem(&t),
        })
        .collect()
}

/// One field of every exchange, indexed: term frequencies, lengths, document frequencies.
struct Field {
    postings: HashMap<String, Vec<(usize, u32)>>,
    lengths: Vec<f64>,
    average: f64,
    positions: Vec<HashMap<String, Vec<u32>>>,
}

impl Field {
    fn new(texts: &[Vec<String>], keep_positions: bool) -> Field {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut lengths = Vec::new();
        let mut positions = Vec::new();
        for (doc, words) in texts.iter().enumerate() {
            let mut counts: HashMap<&str, u32> = HashMap::new();
            let mut at: HashMap<String, Vec<u32>> = HashMap::new();
            for (i, w) in words.iter().enumerate() {
                *counts.entry(w).or_default() += 1;
                if keep_positions {
                    at.entry(w.clone()).or_default().push(i as u32);
                }
            }
            for (w, n) in counts {
                postings.entry(w.to_string()).or_default().push((doc, n));
            }
            lengths.push(words.len() as f64);
            positions.push(at);
        }
        let average = lengths.iter().sum::<f64>() / lengths.len().max(1) as f64;
        Field { postings, lengths, average: average.max(1.0), positions }
    }

    fn idf(&self, term: &str) -> f64 {
        let n = self.lengths.len() as f64;
        let df = self.postings.get(term).map_or(0, Vec::len) as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Adds `weight` times each term's BM25 contribution to `scores`.
    fn score(&self, query: &[(String, f64)], weight: f64, f: &Features, scores: &mut [f64]) {
        let (k1, b) = (f.k1, f.b);
        for (term, term_weight) in query {
            let Some(list) = self.postings.get(term) else { continue };
            let idf = self.idf(term);
            for &(doc, tf) in list {
                let tf = tf as f64;
                let norm = k1 * (1.0 - b + b * self.lengths[doc] / self.average);
                scores[doc] += weight * term_weight * idf * tf * (k1 + 1.0) / (tf + norm);
            }
        }
    }
}

/// The exchanges' terms for one choice of stop words and stemming, computed once and shared by
/// the rankings that differ only in weights.
pub(crate) struct Terms {
    stop_words: bool,
    stemming: Stemming,
    whole: Vec<Vec<String>>,
    /// Per session (by index): its title and every exchange's terms.
    sessions: Vec<Vec<String>>,
    question: Vec<Vec<String>>,
    answer: Vec<Vec<String>>,
    title: Vec<Vec<String>>,
}

impl Terms {
    pub(crate) fn new(docs: &[Doc], features: &Features) -> Terms {
        let of = |text: &dyn Fn(&Doc) -> String| {
            docs.iter().map(|d| terms(&text(d), features)).collect()
        };
        let whole: Vec<Vec<String>> = of(&|d| format!("{}\n{}", d.question, d.answer));
        let title: Vec<Vec<String>> = of(&|d| d.title.clone());
        let count = docs.iter().map(|d| d.session + 1).max().unwrap_or(0);
        let mut sessions: Vec<Vec<String>> = vec![Vec::new(); count];
        for (i, doc) in docs.iter().enumerate() {
            let session = &mut sessions[doc.session];
            if session.is_empty() {
                session.extend(title[i].iter().cloned());
            }
            session.extend(whole[i].iter().cloned());
        }
        Terms {
            stop_words: features.stop_words,
            stemming: features.stemming,
            whole,
            sessions,
            question: of(&|d| d.question.clone()),
            answer: of(&|d| d.answer.clone()),
            title,
        }
    }
}

impl Terms {
    /// Whether these terms were made the way `features` makes them.
    pub(crate) fn fit(&self, features: &Features) -> bool {
        self.stop_words == features.stop_words && self.stemming == features.stemming
    }
}

/// The exchanges, indexed for one set of features.
pub(crate) struct Ranker<'a> {
    docs: &'a [Doc],
    terms: &'a Terms,
    features: Features,
    whole: Field,
    question: Field,
    answer: Field,
    title: Field,
    sessions: Field,
}

impl<'a> Ranker<'a> {
    /// `terms` must have been made with the same stop words and stemming as `features`.
    pub(crate) fn new(docs: &'a [Doc], terms: &'a Terms, features: Features) -> Ranker<'a> {
        assert!(terms.fit(&features));
        let whole = Field::new(&terms.whole, features.proximity > 0.0);
        let (question, answer, title) = if features.fields.is_some() {
            (
                Field::new(&terms.question, false),
                Field::new(&terms.answer, false),
                Field::new(&terms.title, false),
            )
        } else {
            (Field::new(&[], false), Field::new(&[], false), Field::new(&[], false))
        };
        let sessions = match features.session_document > 0.0 {
            true => Field::new(&terms.sessions, false),
            false => Field::new(&[], false),
        };
        Ranker { docs, terms, features, whole, question, answer, title, sessions }
    }

    /// The query's terms with their weights: each once, synonyms at half weight.
    fn query(&self, text: &str) -> Vec<(String, f64)> {
        let mut query: Vec<(String, f64)> = Vec::new();
        let mut add = |term: String, weight: f64| match query.iter_mut().find(|(t, _)| *t == term) {
            Some(found) => found.1 = found.1.max(weight),
            None => query.push((term, weight)),
        };
        for word in terms(text, &self.features) {
            add(word.clone(), 1.0);
        }
        if self.features.synonyms {
            let plain = Features { stemming: Stemming::None, ..self.features };
            for word in terms(text, &plain) {
                for group in SYNONYMS.iter().filter(|g| g.contains(&word.as_str())) {
                    for synonym in group.iter().filter(|s| **s != word) {
                        for term in terms(synonym, &self.features) {
                            add(term, 0.5);
                        }
                    }
                }
            }
        }
        query
    }

    /// Every exchange's score for the question (0: no term shared).
    pub(crate) fn score_all(&self, text: &str) -> Vec<f64> {
        let mut query = self.query(text);
        let mut scores = self.scores(&query, text);
        if self.features.feedback > 0.0 {
            self.expand(&mut query, &scores);
            scores = self.scores(&query, text);
        }
        scores
    }

    /// Exchange indexes, best first; only exchanges that share a term with the question.
    pub(crate) fn rank(&self, text: &str) -> Vec<usize> {
        let mut query = self.query(text);
        let mut scores = self.scores(&query, text);
        if self.features.feedback > 0.0 {
            self.expand(&mut query, &scores);
            scores = self.scores(&query, text);
        }
        let mut found: Vec<usize> = (0..self.docs.len()).filter(|&d| scores[d] > 0.0).collect();
        found.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        found
    }

    /// Pseudo-relevance feedback: the ten terms that best characterise the three best exchanges
    /// (term frequency there times IDF) join the query, weighted by `feedback`, so that words
    /// the answer uses and the question does not can count.
    fn expand(&self, query: &mut Vec<(String, f64)>, scores: &[f64]) {
        let mut best: Vec<usize> = (0..scores.len()).filter(|&d| scores[d] > 0.0).collect();
        best.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        let mut weights: HashMap<&str, f64> = HashMap::new();
        for &doc in best.iter().take(3) {
            let words = &self.terms.whole[doc];
            for word in words {
                *weights.entry(word).or_default() += 1.0 / words.len() as f64;
            }
        }
        let mut candidates: Vec<(&str, f64)> = weights
            .into_iter()
            .filter(|(w, _)| !query.iter().any(|(q, _)| q == w))
            .map(|(w, tf)| (w, tf * self.whole.idf(w)))
            .collect();
        candidates.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        let top = candidates.first().map_or(1.0, |c| c.1);
        for (word, weight) in candidates.into_iter().take(10) {
            query.push((word.to_string(), self.features.feedback * weight / top));
        }
    }

    fn scores(&self, query: &[(String, f64)], text: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.docs.len()];
        match self.features.fields {
            None => self.whole.score(query, 1.0, &self.features, &mut scores),
            Some([q, a, t]) => {
                self.question.score(query, q, &self.features, &mut scores);
                self.answer.score(query, a, &self.features, &mut scores);
                self.title.score(query, t, &self.features, &mut scores);
            }
        }
        if self.features.proximity > 0.0 {
            self.add_proximity(text, &mut scores);
        }
        if self.features.session_context > 0.0 {
            let mut best: HashMap<usize, f64> = HashMap::new();
            for (doc, score) in scores.iter().enumerate() {
                let entry = best.entry(self.docs[doc].session).or_default();
                *entry = entry.max(*score);
            }
            for (doc, score) in scores.iter_mut().enumerate() {
                *score += self.features.session_context * best[&self.docs[doc].session];
            }
        }
        if self.features.session_document > 0.0 {
            let mut by_session = vec![0.0; self.sessions.lengths.len()];
            self.sessions.score(query, 1.0, &self.features, &mut by_session);
            for (doc, score) in scores.iter_mut().enumerate() {
                *score += self.features.session_document * by_session[self.docs[doc].session];
            }
        }
        if self.features.recency > 0.0 {
            for (doc, score) in scores.iter_mut().enumerate() {
                *score *= 1.0 + self.features.recency * 0.5f64.powf(self.docs[doc].age_days / 30.0);
            }
        }
        scores
    }

    fn add_proximity(&self, text: &str, scores: &mut [f64]) {
        let words = terms(text, &self.features);
        for pair in words.windows(2) {
            let (first, second) = (&pair[0], &pair[1]);
            if first == second {
                continue;
            }
            let Some(list) = self.whole.postings.get(first) else { continue };
            let idf = self.whole.idf(first).min(self.whole.idf(second));
            for &(doc, _) in list {
                let at = &self.whole.positions[doc];
                let (Some(xs), Some(ys)) = (at.get(first), at.get(second)) else { continue };
                let near = xs.iter().any(|&x| ys.iter().any(|&y| x.abs_diff(y) <= 3));
                if near {
                    scores[doc] += self.features.proximity * idf;
                }
            }
        }
    }
}
