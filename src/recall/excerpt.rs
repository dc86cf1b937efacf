//! What is shown of an exchange found: its question on one line, and the lines of its answer
//! around the words of the question it holds.
//!
//! Pure: text in, text out.

use super::exchanges::Exchange;
use super::index::is_stop_word;

/// The question, cut to this many characters.
const QUESTION_CHARS: usize = 160;
/// Lines of the answer shown, and the characters of each.
const ANSWER_LINES: usize = 3;
const LINE_CHARS: usize = 200;

/// How many of `words` (stop words aside) the exchange holds.
pub(crate) fn matched(exchange: &Exchange, words: &[String]) -> usize {
    let text = format!("{}\n{}", exchange.question, exchange.answer).to_lowercase();
    stems(words).iter().filter(|w| text.contains(*w)).count()
}

/// A stem's worth of each word, so `locking` finds `locks`; stop words left out.
fn stems(words: &[String]) -> Vec<&str> {
    words
        .iter()
        .map(|w| w.as_str())
        .filter(|w| !is_stop_word(w))
        .map(|w| w.get(..w.len().min(5)).unwrap_or(w))
        .collect()
}

/// The question, then the answer's lines that hold most of `words` (a line before and after the
/// best), each on a line of its own.
pub(crate) fn excerpt(exchange: &Exchange, words: &[String]) -> String {
    let words = stems(words);
    let lines: Vec<&str> = exchange.answer.lines().filter(|l| !l.trim().is_empty()).collect();
    let holds = |line: &str| {
        let lower = line.to_lowercase();
        words.iter().filter(|w| lower.contains(*w)).count()
    };
    let best = (0..lines.len()).max_by_key(|&i| (holds(lines[i]), std::cmp::Reverse(i)));
    let start = best.map_or(0, |i| i.saturating_sub(1));
    let question: Vec<&str> = exchange.question.split_whitespace().collect();
    let mut out = cut(&question.join(" "), QUESTION_CHARS);
    for line in lines.iter().skip(start).take(ANSWER_LINES) {
        out.push('\n');
        out.push_str(&cut(line.trim(), LINE_CHARS));
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
            span: 0..0,
        };
        let words = ["where".to_string(), "retry".into(), "client".into()];
        let got = excerpt(&exchange, &words);
        assert_eq!(got, "where is the retry?\nline 19\nthe retry moved into the client\nlast");
    }
}
