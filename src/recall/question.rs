//! A question in plain words, as recall reads it: its words, and the phrases quoted in it.
//! No word is required and no syntax is special but the double quote, so a question typed as
//! one would ask it ("when did we move the retry into the client?") is a query as it is.
//!
//! Pure: text in, words out. Stemming and stop words are the index's analyzer's (`index`).

/// What a question asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Question {
    /// Every word, in order, phrases' words included (each scores on its own too).
    pub words: Vec<String>,
    /// The phrases quoted, each as its words.
    pub phrases: Vec<Vec<String>>,
    /// Words that often mean what one of `words` means ("db" for "database"), from [`SYNONYMS`],
    /// none of them in `words`: they score at a reduced weight.
    pub related: Vec<String>,
}

/// Words a developer often uses for the same thing: a general list, written before the
/// evaluation was first run (benches/recall), not fitted to its questions.
pub(crate) const SYNONYMS: &[&[&str]] = &[
    &["db", "database", "datastore"],
    &["pick", "picked", "chose", "choose", "choice", "decided", "decision", "went"],
    &["fix", "fixed", "fixes", "solve", "solved", "resolve", "resolved", "workaround"],
    &["error", "errors", "failure", "failing", "fails", "failed", "broke", "broken", "crash"],
    &["slow", "slower", "latency", "performance", "speed", "fast", "faster"],
    &["test", "tests", "spec", "ci"],
    &["flaky", "intermittent", "intermittently", "sometimes", "random", "randomly"],
    &["config", "configuration", "settings", "setting"],
    &["deploy", "deployment", "rollout", "release", "ship"],
    &["login", "signin", "auth", "authentication"],
    &["bug", "issue", "problem"],
    &["remove", "delete", "drop"],
    &["k8s", "kubernetes"],
    &["memory", "oom", "ram"],
    &["cost", "costs", "price", "pricing", "bill", "spend"],
    &["email", "emails", "mail"],
    &["library", "crate", "package", "dependency"],
];

/// Words are runs of letters and digits, lower-cased a character at a time, as the index's
/// tokenizer cuts and lower-cases them (a whole word's lower-casing makes a final `Σ` into
/// `ς`, which the index never holds for it).
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.chars().flat_map(char::to_lowercase).collect())
        .collect()
}

pub(crate) fn parse(text: &str) -> Question {
    let mut question = Question::default();
    // Between quotes (odd pieces) is a phrase; an unclosed quote runs to the end.
    for (i, piece) in text.split('"').enumerate() {
        let found = words(piece);
        // A quoted run of text written without spaces is a phrase of its pairs of characters.
        let pieces: usize = found.iter().map(|w| super::analysis::pieces(w).len()).sum();
        if i % 2 == 1 && pieces > 1 {
            question.phrases.push(found.clone());
        }
        question.words.extend(found);
    }
    for word in &question.words {
        for group in SYNONYMS.iter().filter(|g| g.contains(&word.as_str())) {
            for other in group.iter().map(|w| w.to_string()) {
                if !question.words.contains(&other) && !question.related.contains(&other) {
                    question.related.push(other);
                }
            }
        }
    }
    question
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_question_is_its_words_and_quotes_make_phrases() {
        let q = parse("When did we move the \"retry loop\" into the client's code?");
        assert_eq!(
            q.words,
            [
                "when", "did", "we", "move", "the", "retry", "loop", "into", "the", "client", "s",
                "code"
            ]
        );
        assert_eq!(q.phrases, [vec!["retry".to_string(), "loop".into()]]);
        assert_eq!(parse("\"unclosed phrase here").phrases.len(), 1);
        assert_eq!(parse("\"one\" word").phrases.len(), 0);
        assert!(parse("?!").words.is_empty());
        assert!(q.related.is_empty());
    }

    #[test]
    fn words_are_lower_cased_as_the_index_does_and_a_quoted_run_without_spaces_is_a_phrase() {
        assert_eq!(words("Ο ΔΡΟΜΟΣ"), ["ο", "δρομοσ"]);
        assert_eq!(parse("\"東京都庁\"").phrases, [vec!["東京都庁".to_string()]]);
        assert!(parse("\"東\"").phrases.is_empty());
        assert!(parse("\"word\"").phrases.is_empty());
    }

    #[test]
    fn a_word_with_synonyms_brings_them_in_once() {
        let q = parse("which db did we pick for the database?");
        assert!(q.related.contains(&"datastore".to_string()));
        assert!(q.related.contains(&"chose".to_string()));
        assert!(!q.related.contains(&"db".to_string()));
        assert!(!q.related.contains(&"database".to_string()));
        assert_eq!(q.related.iter().filter(|w| *w == "datastore").count(), 1);
    }
}
