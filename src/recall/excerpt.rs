//! What is shown of an exchange found: its question on one line, and the lines of its answer
//! around the words of the question it holds.
//!
//! Pure: text in, text out.

use super::analysis::{is_cjk, is_stop_word, pieces};
use super::exchanges::Exchange;

/// The question, cut to this many characters.
const QUESTION_CHARS: usize = 160;
/// Lines of the answer shown, and the characters of each.
const ANSWER_LINES: usize = 3;
const LINE_CHARS: usize = 200;

/// How many of `words` (stop words aside) the exchange holds.
pub(crate) fn matched(exchange: &Exchange, words: &[String]) -> usize {
    let text = folded(&format!("{}\n{}", exchange.question, exchange.answer));
    stems(words).iter().filter(|w| text.contains(w.as_str())).count()
}

/// A stem's worth of each word, so `locking` finds `locks`; stop words left out; accents
/// folded, as the index folds them.
fn stems(words: &[String]) -> Vec<String> {
    words
        .iter()
        .filter(|w| !is_stop_word(w))
        .map(|w| folded(w))
        .flat_map(|w| match w.chars().any(is_cjk) {
            // Text written without spaces, in the pairs the index holds it as.
            true => pieces(&w).into_iter().map(|r| w[r].to_string()).collect(),
            false => vec![w.chars().take(5).collect()],
        })
        .collect()
}

/// Lower-cased, accents folded (`Café` is `cafe`), as the index reads words.
fn folded(text: &str) -> String {
    use tantivy::tokenizer::{AsciiFoldingFilter, RawTokenizer, TextAnalyzer};
    thread_local! {
        static FOLD: std::cell::RefCell<TextAnalyzer> = std::cell::RefCell::new(
            TextAnalyzer::builder(RawTokenizer::default()).filter(AsciiFoldingFilter).build(),
        );
    }
    let lower = text.to_lowercase();
    if lower.is_ascii() {
        return lower;
    }
    FOLD.with_borrow_mut(|fold| fold.token_stream(&lower).next().map(|t| t.text.clone()))
        .unwrap_or(lower)
}

/// The question, then the answer's lines that hold most of `words` (a line before and after the
/// best), each on a line of its own.
pub(crate) fn excerpt(exchange: &Exchange, words: &[String]) -> String {
    let words = stems(words);
    let lines: Vec<&str> = exchange.answer.lines().filter(|l| !l.trim().is_empty()).collect();
    let holds = |line: &str| {
        let lower = folded(line);
        words.iter().filter(|w| lower.contains(w.as_str())).count()
    };
    let best = (0..lines.len()).max_by_key(|&i| (holds(lines[i]), std::cmp::Reverse(i)));
    let start = best.map_or(0, |i| i.saturating_sub(1));
    let question: Vec<&str> = exchange.question.split_whitespace().collect();
    let mut out = cut(&question.join(" "), QUESTION_CHARS);
    for (i, line) in lines.iter().enumerate().skip(start).take(ANSWER_LINES) {
        out.push('\n');
        match best {
            Some(best) if best == i => out.push_str(&around(line.trim(), &words, LINE_CHARS)),
            _ => out.push_str(&cut(line.trim(), LINE_CHARS)),
        }
    }
    out
}

/// At most `max` characters of `line` around the first of `words` it holds, with `…` where
/// it was cut: a long line (a paragraph written as one) shows the word found, not its start.
fn around(line: &str, words: &[String], max: usize) -> String {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= max {
        return line.to_string();
    }
    // The line folded, each of its bytes with the character of `line` it comes from (folding
    // may change a character's length: `É` is `e`, `æ` is `ae`).
    let (mut lower, mut from) = (String::new(), Vec::new());
    let mut one = [0u8; 4];
    for (i, c) in chars.iter().enumerate() {
        let l = folded(c.encode_utf8(&mut one));
        lower.push_str(&l);
        from.extend(std::iter::repeat_n(i, l.len()));
    }
    let at = words.iter().filter_map(|w| lower.find(w.as_str())).min().map_or(0, |byte| from[byte]);
    let start = at.saturating_sub(max / 3).min(chars.len() - (max - 2));
    let end = (start + max - 2).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
}

/// At most `max` characters, with `…` when cut. The text is kept as written, control
/// characters and all: each front end cleans what it shows its way (`cca recall` on a
/// terminal as `cca show` does; `cca mcp` takes whole escape sequences out).
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_excerpt_shows_the_answer_lines_that_hold_the_words() {
        let answer = (0..20).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n")
            + "\nthe retry moved into the client\nlast";
        let exchange = Exchange {
            number: 1,
            at: None,
            question: "where is the\nretry?".into(),
            answer,
            answered: true,
            span: 0..0,
        };
        let words = ["where".to_string(), "retry".into(), "client".into()];
        let got = excerpt(&exchange, &words);
        assert_eq!(got, "where is the retry?\nline 19\nthe retry moved into the client\nlast");
    }

    #[test]
    fn a_long_line_is_shown_around_the_word_found() {
        let answer = format!("{} İSTANBUL needleword {}", "数据".repeat(5_000), "é".repeat(5_000));
        let exchange = Exchange {
            number: 1,
            at: None,
            question: "q".into(),
            answer,
            answered: true,
            span: 0..0,
        };
        let got = excerpt(&exchange, &["needleword".to_string()]);
        let line = got.lines().nth(1).unwrap();
        assert!(line.contains("needleword"), "{line}");
        assert!(line.starts_with('…') && line.ends_with('…'), "{line}");
        assert_eq!(line.chars().count(), LINE_CHARS);
        // Short lines are as they were; a word in none of them shows the line's start.
        assert_eq!(around("a short line", &["short".into()], LINE_CHARS), "a short line");
        let start = around(&"x".repeat(500), &["absent".into()], 10);
        assert_eq!(start, "xxxxxxxx…");
    }

    #[test]
    fn accents_are_folded_as_the_index_folds_them() {
        let answer =
            format!("intro\n{} the CAFÉ on the corner {}\nend", "ü".repeat(300), "x".repeat(300));
        let exchange = Exchange {
            number: 1,
            at: None,
            question: "where?".into(),
            answer,
            answered: true,
            span: 0..0,
        };
        assert_eq!(matched(&exchange, &["cafe".to_string()]), 1);
        assert_eq!(matched(&exchange, &["café".to_string()]), 1);
        let got = excerpt(&exchange, &["cafe".to_string()]);
        assert!(got.lines().nth(2).unwrap().contains("CAFÉ on the corner"), "{got}");
    }
}
