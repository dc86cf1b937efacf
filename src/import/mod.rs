//! Other tools' conversations in cca's terms: pure parsers (bytes in, conversations out) for
//! Claude Code, gemini-cli, codex and llm, and the transcript records a conversation becomes.
//!
//! Nothing here touches a file or spawns: `cmd::import` finds the sources, `store` writes the
//! sessions, and llm's database is read by `llm logs --json` through `run`. An answer is kept
//! the way cca keeps its own (`answer::Kept`): the text as the tool showed it, a `> Tool: input`
//! block per tool call with its sources. What cca cannot carry (thinking, images, subagent side
//! chains) is named in a last `> Left out by cca import: ...` line of the answer.

pub(crate) mod auto;
#[cfg(any(test, feature = "testing"))]
mod check;
pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod gemini;
pub(crate) mod llm;

use serde_json::Value;

use crate::answer::Kept;
use crate::engine::Output;
use crate::transcript::{self, Kind, Meta, Record};

#[cfg(any(test, feature = "testing"))]
pub use check::check_import;

/// The tools cca imports from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tool {
    Claude,
    Gemini,
    Codex,
    Llm,
}

impl Tool {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tool::Claude => "claude",
            Tool::Gemini => "gemini",
            Tool::Codex => "codex",
            Tool::Llm => "llm",
        }
    }
}

/// One conversation of a tool, as far as its source could be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Conversation {
    /// The tool's own id of the conversation.
    pub id: String,
    pub cwd: Option<String>,
    /// When it started, RFC 3339.
    pub created: Option<String>,
    pub title: Option<String>,
    pub exchanges: Vec<Exchange>,
    /// What could not be read, by line; the rest is imported.
    pub problems: Vec<Problem>,
    /// Complete lines and bytes read (a line cut off at the end of the file is not read).
    pub lines: u64,
    pub bytes: u64,
    /// Token counts that made no sense, left out.
    pub figures: Figures,
    /// Questions with no answer since the last exchange: they go with the next one (a question
    /// with no answer yet is imported once one follows).
    pub unanswered: Vec<Attempt>,
}

impl Conversation {
    /// An answered exchange, with the questions before it that got no answer.
    pub(crate) fn answered(&mut self, exchange: Exchange) {
        let attempts = std::mem::take(&mut self.unanswered);
        self.exchanges.push(Exchange { attempts, ..exchange });
    }

    /// A question that got no answer: kept, as cca keeps a failed or interrupted attempt of its
    /// own, before the exchange that follows it.
    pub(crate) fn not_answered(&mut self, exchange: &Exchange, interrupted: bool) {
        self.unanswered.push(Attempt {
            question: exchange.question.clone(),
            asked: exchange.asked.clone(),
            interrupted,
        });
    }
}

/// A question that got no answer: interrupted, or given up for the next one.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Attempt {
    pub question: String,
    pub asked: Option<String>,
    pub interrupted: bool,
}

/// Token counts read from a file, taken as an engine's are (`transcript::tokens_figure`): a
/// count that makes no sense (above 2^40, negative, not a whole number) is left out and
/// counted, for a note; sums of counts saturate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Figures {
    pub left_out: u64,
}

impl Figures {
    /// The count in `v`, if there is one and it makes sense.
    pub(crate) fn tokens(&mut self, v: &Value) -> Option<u64> {
        if v.is_null() {
            return None;
        }
        let n = v.as_u64().map(crate::transcript::tokens_figure).and_then(Result::ok);
        if n.is_none() {
            self.left_out = self.left_out.saturating_add(1);
        }
        n
    }

    pub(crate) fn add(&mut self, other: Figures) {
        self.left_out = self.left_out.saturating_add(other.left_out);
    }
}

/// A question and its answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Exchange {
    pub question: String,
    pub asked: Option<String>,
    /// The answer as cca keeps one: text, tool blocks, and what was left out.
    pub answer: String,
    pub answered: Option<String>,
    pub model: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// The tool's id of the last message of the exchange: where a later import goes on from.
    pub key: String,
    /// Questions asked just before this one that got no answer.
    pub attempts: Vec<Attempt>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Problem {
    pub line: u64,
    pub message: String,
}

/// What an answer could not carry, counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LeftOut {
    pub thinking: usize,
    pub images: usize,
    pub side_chains: usize,
    pub other: Vec<String>,
}

impl LeftOut {
    /// `> Left out by cca import: 2 thinking blocks, 1 image`, or nothing.
    pub(crate) fn line(&self) -> Option<String> {
        let count = |n: usize, one: &str, many: &str| match n {
            0 => None,
            1 => Some(format!("1 {one}")),
            n => Some(format!("{n} {many}")),
        };
        let mut parts: Vec<String> = [
            count(self.thinking, "thinking block", "thinking blocks"),
            count(self.images, "image", "images"),
            count(self.side_chains, "subagent side chain", "subagent side chains"),
        ]
        .into_iter()
        .flatten()
        .collect();
        parts.extend(self.other.iter().cloned());
        (!parts.is_empty()).then(|| format!("> Left out by cca import: {}\n", parts.join(", ")))
    }
}

/// The answer's text from a tool's outputs (text and tool calls, in order), as cca keeps an
/// answer of its own, with what was left out on a last line.
pub(crate) fn answer_text(outputs: Vec<Output>, left_out: &LeftOut) -> String {
    let mut kept = Kept::default();
    let mut text = String::new();
    for output in outputs {
        match output {
            Output::Text(t) => text.push_str(&kept.text(&t)),
            Output::Tool(call) => kept.tool(&call),
            _ => {}
        }
    }
    text.push_str(&kept.finish());
    if let Some(line) = left_out.line() {
        let blank = match () {
            _ if text.is_empty() => "",
            _ if text.ends_with("\n\n") => "",
            _ if text.ends_with('\n') => "\n",
            _ => "\n\n",
        };
        text.push_str(blank);
        text.push_str(&line);
    }
    text
}

/// A JSON-lines source, line by line: `(line number, value)` for each complete line that
/// parses; a line that does not parse is a problem. A last line without its newline was cut
/// off (the tool was still writing, or the file was truncated): it is a problem and not read.
pub(crate) fn json_lines(
    bytes: &[u8],
    problems: &mut Vec<Problem>,
) -> (Vec<(u64, Value)>, u64, u64) {
    let mut values = Vec::new();
    let (mut lines, mut read) = (0u64, 0u64);
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(end) = memchr::memchr(b'\n', rest) else {
            problems.push(Problem {
                line: lines + 1,
                message: "the line is cut off (the file ends in the middle of it); not read".into(),
            });
            break;
        };
        let line = &rest[..end];
        lines += 1;
        read += end as u64 + 1;
        rest = &rest[end + 1..];
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(v) if v.is_object() => values.push((lines, v)),
            Ok(_) => problems.push(Problem { line: lines, message: "not a JSON object".into() }),
            Err(e) => problems.push(Problem { line: lines, message: format!("not JSON: {e}") }),
        }
    }
    (values, lines, read)
}

/// A timestamp as cca writes one: RFC 3339 UTC, whole seconds.
pub(crate) fn rfc3339(text: &str) -> Option<String> {
    use chrono::{Datelike as _, Timelike as _};
    let t = chrono::DateTime::parse_from_rfc3339(text).ok().or_else(|| {
        // llm's `2026-11-23T10:15:00.123456` (UTC, without a zone).
        chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
            .ok()
            .map(|n| n.and_utc().fixed_offset())
    })?;
    let t = t.to_utc();
    // A time no conversation was held at (the year 9999 would list its session first for
    // good) is no time: the file's own, or the import's, stands in for it.
    if !SENSIBLE_YEARS.contains(&t.year()) {
        return None;
    }
    // A leap second (`23:59:60`) would make an id of second 60: it is the second before.
    let t = t.with_nanosecond(t.nanosecond() % 1_000_000_000)?;
    Some(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// The years a time read from another tool's file can be in.
const SENSIBLE_YEARS: std::ops::RangeInclusive<i32> = 2000..=2099;

/// The text of a message's content: a string, or the `text` of its parts or blocks, joined.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The records of exchanges `from..`, as they are appended to a transcript.
pub(crate) fn records(tool: Tool, exchanges: &[Exchange]) -> Vec<Record> {
    let mut out = Vec::with_capacity(exchanges.len() * 2);
    for e in exchanges {
        for a in &e.attempts {
            out.push(Record {
                kind: Kind::User,
                meta: Meta { at: a.asked.clone(), ..Meta::default() },
                content: a.question.clone(),
            });
            let (kind, reason) = match a.interrupted {
                true => (Kind::Interrupted, format!("interrupted in {}", tool.name())),
                false => (Kind::Failed, format!("no answer in {}", tool.name())),
            };
            out.push(Record {
                kind,
                meta: Meta {
                    at: a.asked.clone(),
                    engine: Some(tool.name().to_string()),
                    reason: Some(reason),
                    ..Meta::default()
                },
                content: String::new(),
            });
        }
        out.push(Record {
            kind: Kind::User,
            meta: Meta { at: e.asked.clone(), ..Meta::default() },
            content: e.question.clone(),
        });
        out.push(Record {
            kind: Kind::Assistant,
            meta: Meta {
                at: e.answered.clone(),
                engine: Some(tool.name().to_string()),
                model: e.model.clone(),
                input_tokens: e.input_tokens,
                output_tokens: e.output_tokens,
                ..Meta::default()
            },
            content: e.answer.clone(),
        });
    }
    out
}

/// The records rendered, numbered from exchange `first` (an attempt under the number of the
/// exchange it comes before, as cca numbers its own).
pub(crate) fn render_records(tool: Tool, exchanges: &[Exchange], first: u64) -> String {
    let mut out = String::new();
    let mut turn = first;
    for r in records(tool, exchanges) {
        out.push_str(&transcript::render_record(&r, turn));
        if r.kind == Kind::Assistant {
            turn += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ToolCall;
    use serde_json::json;

    #[test]
    fn cut_off_and_broken_lines_are_problems_and_the_rest_is_read() {
        let mut problems = Vec::new();
        let (values, lines, bytes) =
            json_lines(b"{\"a\":1}\nnope\n\n{\"b\":2}\n{\"c\"", &mut problems);
        assert_eq!(values.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 4]);
        assert_eq!((lines, bytes), (4, 22));
        assert_eq!(problems.iter().map(|p| p.line).collect::<Vec<_>>(), [2, 5]);
        assert!(problems[1].message.contains("cut off"), "{problems:?}");
    }

    #[test]
    fn answers_keep_tool_blocks_and_name_what_was_left_out() {
        let call = ToolCall::new("WebSearch", &json!({"query": "q"}));
        let outputs = vec![
            Output::Text("Let me look.".into()),
            Output::Tool(call),
            Output::Text("\n\nFound it.".into()),
        ];
        let left = LeftOut { thinking: 2, images: 1, ..LeftOut::default() };
        assert_eq!(
            answer_text(outputs, &left),
            "Let me look.\n\n> WebSearch (failed): q\n\nFound it.\n\n\
             > Left out by cca import: 2 thinking blocks, 1 image\n"
        );
        assert_eq!(answer_text(vec![Output::Text("a".into())], &LeftOut::default()), "a");
    }

    #[test]
    fn an_attempt_is_kept_as_cca_keeps_its_own_and_numbered_with_the_exchange_after_it() {
        let attempt = |q: &str, interrupted| Attempt {
            question: q.into(),
            asked: Some("2026-11-23T10:00:00Z".into()),
            interrupted,
        };
        let exchanges = [
            Exchange { question: "q1".into(), answer: "a1".into(), ..Exchange::default() },
            Exchange {
                question: "q2".into(),
                answer: "a2".into(),
                attempts: vec![attempt("stopped", true), attempt("lost", false)],
                ..Exchange::default()
            },
        ];
        let text = render_records(Tool::Claude, &exchanges, 3);
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
        assert_eq!(
            headings,
            [
                "## 3. You",
                "## 3. claude",
                "## 4. You",
                "### 4. Interrupted (not sent again): interrupted in claude",
                "## 4. You",
                "### 4. No answer (not sent again): no answer in claude",
                "## 4. You",
                "## 4. claude",
            ]
        );
        // What cca reads back: the same exchanges, the attempts never sent again.
        let whole = transcript::render_header(&transcript::testing::header("q1")) + &text;
        let (t, problems) = transcript::parse(&whole).expect("a transcript");
        assert!(problems.is_empty(), "{problems:?}");
        let kinds: Vec<Kind> = t.records.iter().map(|r| r.kind).collect();
        use Kind::*;
        assert_eq!(kinds, [User, Assistant, User, Interrupted, User, Failed, User, Assistant]);
    }

    #[test]
    fn timestamps_become_whole_utc_seconds() {
        assert_eq!(rfc3339("2026-11-23T19:35:49.601Z").as_deref(), Some("2026-11-23T19:35:49Z"));
        assert_eq!(rfc3339("2026-11-23T20:35:49+01:00").as_deref(), Some("2026-11-23T19:35:49Z"));
        assert_eq!(rfc3339("2026-11-23T19:35:49.123456").as_deref(), Some("2026-11-23T19:35:49Z"));
        assert_eq!(rfc3339("yesterday"), None);
        assert_eq!(rfc3339("9999-12-31T23:59:59Z"), None);
        assert_eq!(rfc3339("0000-01-01T00:00:00Z"), None);
        assert_eq!(rfc3339("2099-12-31T23:30:00-01:00"), None);
        assert_eq!(rfc3339("2016-12-31T23:59:60Z").as_deref(), Some("2016-12-31T23:59:59Z"));
    }
}
