//! Claude Code's session files (`~/.claude/projects/<cwd>/<uuid>.jsonl`, measured with 2.1.329):
//! one JSON object a line. Messages (`user`, `assistant`, `attachment`, `system`) carry `uuid`
//! and `parentUuid`; an edited question or a retried answer starts a branch, and the
//! conversation is the chain that ends at the last message in the file. One answer spans
//! several `assistant` lines (a content block each, sharing `message.id`), and tool results come
//! back as `user` lines: the same shapes as `claude -p --output-format stream-json`, so cca's
//! own decoder for that output reads them, and an imported answer is kept exactly as cca would
//! have kept it.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{
    Conversation, Exchange, Figures, LeftOut, Problem, answer_text, content_text, json_lines,
};
use crate::engine::{Decoder as _, Output};
use crate::render::shown_id;

/// How Claude Code's note of an answer stopped by the user starts (`[Request interrupted by
/// user]`, `... for tool use]`).
const INTERRUPTED: &str = "[Request interrupted by user";
/// The model claude names on the messages it makes itself (an error shown as an answer).
const SYNTHETIC: &str = "<synthetic>";
/// The model `cca export claude` names on an answer whose model the transcript does not say
/// (claude wants one): not a model, so an import of the export does not take it for one.
pub(crate) const NO_MODEL: &str = "cca-import";

/// Claude Code versions whose files cca was measured against (their major version).
const KNOWN_MAJOR: [&str; 2] = ["1", "2"];

pub(crate) fn parse(bytes: &[u8]) -> Conversation {
    let mut conv = Conversation::default();
    let (values, lines, read) = json_lines(bytes, &mut conv.problems);
    (conv.lines, conv.bytes) = (lines, read);
    if let Some((line, version)) =
        values.iter().find_map(|(n, v)| v["version"].as_str().map(|s| (*n, s)))
        && !KNOWN_MAJOR.contains(&version.split('.').next().unwrap_or(""))
    {
        conv.problems.push(Problem {
            line,
            message: format!(
                "written by Claude Code {}, a version cca does not know; read as 2.x",
                shown_id(version)
            ),
        });
    }
    let is_message = |v: &Value| {
        matches!(v["type"].as_str(), Some("user" | "assistant" | "attachment" | "system"))
            && v["uuid"].is_string()
    };
    // Every line with a uuid, messages or not: a message's parent may be a line of another
    // type (a hook's `progress`), which the chain passes through.
    let by_uuid: HashMap<&str, usize> = values
        .iter()
        .enumerate()
        .filter_map(|(i, (_, v))| Some((v["uuid"].as_str()?, i)))
        .collect();
    let main = |v: &Value| v["isSidechain"].as_bool() != Some(true);
    let side_chains = values
        .iter()
        .filter(|(_, v)| !main(v) && is_message(v) && v["parentUuid"].is_null())
        .count();
    // The conversation: the chain of parents from the last question or answer in the file.
    let leaf = values.iter().rposition(|(_, v)| {
        main(v) && matches!(v["type"].as_str(), Some("user" | "assistant")) && v["uuid"].is_string()
    });
    if leaf.is_none() {
        nothing_read(&values, &mut conv.problems);
    }
    let mut chain = Vec::new();
    let mut visited = HashSet::new();
    let mut at = leaf;
    while let Some(i) = at {
        if !visited.insert(i) {
            // A message's parent is one already in the chain: the chain is cut where the loop
            // closes, so that nothing in it is imported twice.
            let last = chain.last().map_or(i, |&j| j);
            conv.problems.push(Problem {
                line: values[last].0,
                message: format!(
                    "the parent of this message is one after it (line {}): a loop, cut here",
                    values[i].0
                ),
            });
            break;
        }
        chain.push(i);
        let v = &values[i].1;
        let parent = v["parentUuid"].as_str().or(v["logicalParentUuid"].as_str());
        at = match parent.map(|p| by_uuid.get(p).copied()) {
            None => None,
            Some(Some(parent)) => Some(parent),
            // A parent not in the file (a line lost or cut short): the conversation goes on
            // from the message before this one in the file, and is not cut here.
            Some(None) => {
                let before = values[..i].iter().rposition(|(_, v)| main(v) && is_message(v));
                conv.problems.push(Problem {
                    line: values[i].0,
                    message: match before {
                        Some(b) => format!(
                            "the parent of this message is not in the file; read on from the message before it (line {})",
                            values[b].0
                        ),
                        None => "the parent of this message is not in the file".into(),
                    },
                });
                before
            }
        };
    }
    chain.reverse();
    // The conversation's own id: a stray line of another session elsewhere in the file does
    // not name it.
    conv.id = chain
        .iter()
        .map(|&i| &values[i].1)
        .chain(values.iter().map(|(_, v)| v))
        .find_map(|v| v["sessionId"].as_str())
        .unwrap_or("")
        .to_string();
    conv.cwd = chain.iter().find_map(|&i| values[i].1["cwd"].as_str()).map(str::to_string);
    conv.created = chain
        .iter()
        .copied()
        .chain(0..values.len())
        .find_map(|i| values[i].1["timestamp"].as_str().and_then(super::rfc3339));

    let mut turn: Option<Turn> = None;
    for &i in &chain {
        let v = &values[i].1;
        let question = v["type"] == "user"
            && v["isMeta"].as_bool() != Some(true)
            && v["isCompactSummary"].as_bool() != Some(true)
            && !has_block(&v["message"]["content"], "tool_result");
        // Claude Code writes a stop (Esc) as a user message of its own.
        if question && content_text(&v["message"]["content"]).starts_with(INTERRUPTED) {
            if let Some(t) = turn.as_mut() {
                t.interrupted = true;
            }
            continue;
        }
        if question {
            if let Some(t) = turn.take() {
                t.finish(&mut conv);
            }
            let content = &v["message"]["content"];
            let mut t = Turn::new(content_text(content), v);
            t.left_out.images = count_blocks(content, "image");
            turn = Some(t);
        } else if let Some(t) = turn.as_mut()
            && matches!(v["type"].as_str(), Some("user" | "assistant"))
        {
            t.message(v);
        }
    }
    if let Some(mut t) = turn.take() {
        t.left_out.side_chains = side_chains;
        t.finish(&mut conv);
    }
    conv.title = conv.exchanges.first().map(|e| e.question.clone());
    conv
}

/// A question and what followed it, until the next question.
struct Turn {
    exchange: Exchange,
    decoder: crate::engine::claude::Decoder,
    outputs: Vec<Output>,
    left_out: LeftOut,
    /// Output tokens per answer message (an answer spans several lines per message).
    outputs_by_message: Vec<(String, u64)>,
    figures: Figures,
    /// The user stopped the answer.
    interrupted: bool,
}

impl Turn {
    fn new(question: String, v: &Value) -> Turn {
        let exchange = Exchange {
            question,
            asked: v["timestamp"].as_str().and_then(super::rfc3339),
            key: v["uuid"].as_str().unwrap_or("").to_string(),
            ..Exchange::default()
        };
        Turn {
            exchange,
            decoder: Default::default(),
            outputs: Vec::new(),
            left_out: LeftOut::default(),
            outputs_by_message: Vec::new(),
            figures: Figures::default(),
            interrupted: false,
        }
    }

    fn message(&mut self, v: &Value) {
        let message = &v["message"];
        if v["type"] == "assistant" {
            self.left_out.thinking += count_blocks(&message["content"], "thinking")
                + count_blocks(&message["content"], "redacted_thinking");
            if let Some(model) =
                message["model"].as_str().filter(|m| ![SYNTHETIC, NO_MODEL].contains(m))
            {
                self.exchange.model = Some(model.to_string());
            }
            let usage = &message["usage"];
            let figures = &mut self.figures;
            if let Some(input) = figures.tokens(&usage["input_tokens"]) {
                let cached = figures.tokens(&usage["cache_read_input_tokens"]).unwrap_or(0);
                let created = figures.tokens(&usage["cache_creation_input_tokens"]).unwrap_or(0);
                self.exchange.input_tokens =
                    Some(input.saturating_add(cached).saturating_add(created));
            }
            if let (Some(id), Some(out)) =
                (message["id"].as_str(), figures.tokens(&usage["output_tokens"]))
            {
                match self.outputs_by_message.iter_mut().find(|(m, _)| m == id) {
                    Some(entry) => entry.1 = out,
                    None => self.outputs_by_message.push((id.to_string(), out)),
                }
            }
        } else {
            self.left_out.images += count_blocks(&message["content"], "image");
        }
        self.exchange.answered = v["timestamp"].as_str().and_then(super::rfc3339);
        self.exchange.key = v["uuid"].as_str().unwrap_or("").to_string();
        let mut line = serde_json::to_vec(v).unwrap_or_default();
        line.push(b'\n');
        self.decoder.feed(&line, &mut self.outputs);
    }

    /// The exchange, or an attempt if the question was not answered.
    fn finish(mut self, conv: &mut Conversation) {
        conv.figures.add(self.figures);
        self.decoder.finish(&mut self.outputs);
        let answered = self.outputs.iter().any(|o| matches!(o, Output::Text(_) | Output::Tool(_)));
        if !answered {
            conv.not_answered(&self.exchange, self.interrupted);
            return;
        }
        if !self.outputs_by_message.is_empty() {
            let sum = self.outputs_by_message.iter().fold(0u64, |sum, m| sum.saturating_add(m.1));
            self.exchange.output_tokens = Some(sum);
        }
        self.exchange.answer = answer_text(self.outputs, &self.left_out);
        conv.answered(self.exchange);
    }
}

/// Why a file with lines holds no conversation, when it is not simply one without questions
/// (Claude Code writes files of summaries alone): it is not Claude Code's at all, or its
/// messages cannot be followed.
fn nothing_read(values: &[(u64, Value)], problems: &mut Vec<Problem>) {
    let claudes = |v: &Value| {
        ["sessionId", "uuid", "leafUuid", "messageId"].iter().any(|k| v.get(k).is_some())
    };
    if let Some((line, _)) = values.first()
        && !values.iter().any(|(_, v)| claudes(v))
    {
        problems.push(Problem {
            line: *line,
            message: "no line of this file is Claude Code's (none has a sessionId or uuid): \
                      if it is another tool's, `cca import codex` or `cca import gemini` reads it"
                .into(),
        });
    } else if let Some((line, _)) = values.iter().find(|(_, v)| {
        matches!(v["type"].as_str(), Some("user" | "assistant")) && !v["uuid"].is_string()
    }) {
        problems.push(Problem {
            line: *line,
            message: "a message with no uuid, which cca follows the conversation by; skipped"
                .into(),
        });
    }
}

fn count_blocks(content: &Value, kind: &str) -> usize {
    content.as_array().map_or(0, |blocks| blocks.iter().filter(|b| b["type"] == kind).count())
}

fn has_block(content: &Value, kind: &str) -> bool {
    count_blocks(content, kind) > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(lines: &[Value]) -> Vec<u8> {
        lines.iter().map(|l| format!("{l}\n")).collect::<String>().into_bytes()
    }

    fn user(uuid: &str, parent: Option<&str>, content: Value) -> Value {
        json!({"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
               "timestamp": "2026-11-23T10:00:00.000Z", "cwd": "/w", "version": "2.1.329",
               "message": {"role": "user", "content": content}})
    }

    fn assistant(uuid: &str, parent: &str, id: &str, content: Value) -> Value {
        json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
               "timestamp": "2026-11-23T10:00:05.000Z",
               "message": {"id": id, "role": "assistant", "model": "claude-x", "content": content,
                           "usage": {"input_tokens": 7, "output_tokens": 3}}})
    }

    #[test]
    fn a_chain_goes_through_lines_of_other_types_and_past_a_parent_not_in_the_file() {
        let text = |t: &str| json!([{"type": "text", "text": t}]);
        let progress = json!({"type": "progress", "uuid": "p1", "parentUuid": "a1",
                              "sessionId": "s1", "data": {"type": "hook_progress"}});
        let lines = [
            user("u1", None, json!("first")),
            assistant("a1", "u1", "m1", text("one")),
            progress,
            user("u2", Some("p1"), json!("second")),
            assistant("a2", "u2", "m2", text("two")),
            user("u3", Some("lost"), json!("third")),
            assistant("a3", "u3", "m3", text("three")),
        ];
        let c = parse(&file(&lines));
        let questions: Vec<&str> = c.exchanges.iter().map(|e| e.question.as_str()).collect();
        assert_eq!(questions, ["first", "second", "third"]);
        assert_eq!(
            c.problems,
            [Problem {
                line: 6,
                message: "the parent of this message is not in the file; read on from the \
                          message before it (line 5)"
                    .into()
            }]
        );
    }

    #[test]
    fn the_branch_that_ends_last_is_the_conversation() {
        let lines = [
            user("u1", None, json!("first")),
            assistant("a1", "u1", "m1", json!([{"type": "text", "text": "one"}])),
            user("u2", Some("a1"), json!("abandoned")),
            assistant("a2", "u2", "m2", json!([{"type": "text", "text": "old"}])),
            user("u3", Some("a1"), json!([{"type": "text", "text": "edited"}, {"type": "image"}])),
            assistant("a3", "u3", "m3", json!([{"type": "thinking", "thinking": "hm"}])),
            assistant("a4", "a3", "m3", json!([{"type": "text", "text": "new"}])),
        ];
        let mut side = user("s1", None, json!("a subagent's task"));
        side["isSidechain"] = json!(true);
        let lines = [&lines[..6], &[side], &lines[6..]].concat();
        let c = parse(&file(&lines));
        assert_eq!(c.problems, []);
        assert_eq!((c.id.as_str(), c.cwd.as_deref()), ("s1", Some("/w")));
        let got: Vec<(&str, &str, &str)> = c
            .exchanges
            .iter()
            .map(|e| (e.question.as_str(), e.answer.as_str(), e.key.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("first", "one", "a1"),
                (
                    "edited",
                    "new\n\n> Left out by cca import: 1 thinking block, 1 image, 1 subagent side chain\n",
                    "a4"
                )
            ]
        );
        assert_eq!(c.exchanges[1].output_tokens, Some(3));
        assert_eq!(c.created.as_deref(), Some("2026-11-23T10:00:00Z"));
    }

    #[test]
    fn a_question_with_no_answer_is_kept_before_the_next_exchange() {
        let lines = [
            user("u1", None, json!("stopped at once")),
            user(
                "u2",
                Some("u1"),
                json!([{"type": "text", "text": "[Request interrupted by user]"}]),
            ),
            user("u3", Some("u2"), json!("given up")),
            user("u4", Some("u3"), json!("answered")),
            assistant("a4", "u4", "m4", json!([{"type": "text", "text": "yes"}])),
            user("u5", Some("a4"), json!("not answered yet")),
        ];
        let c = parse(&file(&lines));
        assert_eq!(c.problems, []);
        let got: Vec<(&str, &str)> =
            c.exchanges.iter().map(|e| (e.question.as_str(), e.answer.as_str())).collect();
        assert_eq!(got, [("answered", "yes")]);
        let attempts: Vec<(&str, bool)> =
            c.exchanges[0].attempts.iter().map(|a| (a.question.as_str(), a.interrupted)).collect();
        assert_eq!(attempts, [("stopped at once", true), ("given up", false)]);
        // The last question waits for its answer, for a later import.
        assert_eq!(c.unanswered.len(), 1);
        assert_eq!(c.unanswered[0].question, "not answered yet");
        assert_eq!(c.title.as_deref(), Some("answered"));
    }

    #[test]
    fn a_file_of_another_tool_or_with_messages_it_cannot_follow_is_said() {
        let codex = json!({"timestamp": "2026-11-20T08:00:00Z", "type": "session_meta", "payload": {"id": "r1"}});
        let c = parse(&file(&[codex, json!({"foo": 1})]));
        assert!(c.exchanges.is_empty());
        assert_eq!(c.problems.len(), 1);
        assert!(c.problems[0].message.contains("no line of this file is Claude Code's"));
        let mut numbered = user("u1", None, json!("q"));
        numbered["uuid"] = json!(7);
        let c = parse(&file(&[numbered]));
        assert!(c.problems[0].message.contains("a message with no uuid"), "{:?}", c.problems);
        // A file of summaries alone is Claude Code's, and holds nothing to import.
        let c = parse(&file(&[json!({"type": "summary", "summary": "s", "leafUuid": "x"})]));
        assert_eq!((c.problems, c.exchanges.len()), (vec![], 0));
        assert_eq!(parse(b"").problems, []);
    }

    #[test]
    fn an_unknown_version_is_named_and_read() {
        let mut first = user("u1", None, json!("q"));
        first["version"] = json!("9.0.1");
        let lines = [first, assistant("a1", "u1", "m1", json!([{"type": "text", "text": "a"}]))];
        let c = parse(&file(&lines));
        assert_eq!(c.exchanges.len(), 1);
        assert_eq!(c.problems.len(), 1);
        assert!(c.problems[0].message.contains("9.0.1"), "{:?}", c.problems);
    }

    #[test]
    fn a_loop_of_parents_is_cut_where_it_closes() {
        // u1's parent is a2, the last answer: u1 a1 u2 a2 u1 a1 ... without a cut.
        let lines = [
            user("u1", Some("a2"), json!("first")),
            assistant("a1", "u1", "m1", json!([{"type": "text", "text": "one"}])),
            user("u2", Some("a1"), json!("second")),
            assistant("a2", "u2", "m2", json!([{"type": "text", "text": "two"}])),
        ];
        let c = parse(&file(&lines));
        let questions: Vec<&str> = c.exchanges.iter().map(|e| e.question.as_str()).collect();
        assert_eq!(questions, ["first", "second"]);
        assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
        assert_eq!(c.problems[0].line, 1);
        assert!(c.problems[0].message.contains("a loop"), "{:?}", c.problems);
        // A message that is its own parent.
        let c = parse(&file(&[
            user("u1", Some("u1"), json!("q")),
            assistant("a1", "u1", "m1", json!([{"type": "text", "text": "a"}])),
        ]));
        assert_eq!(c.exchanges.len(), 1);
        // A stray line of another session first in the file: the conversation keeps its id.
        let mut stray = user("x1", Some("x1"), json!("loop"));
        stray["sessionId"] = json!("s2");
        let c = parse(&file(&[
            stray,
            user("u1", None, json!("q")),
            assistant("a1", "u1", "m1", json!([{"type": "text", "text": "a"}])),
        ]));
        assert_eq!((c.id.as_str(), c.exchanges.len()), ("s1", 1));
    }

    #[test]
    fn usage_sums_saturate_and_absurd_figures_are_left_out() {
        let mut first = assistant("a1", "u1", "m1", json!([{"type": "text", "text": "one"}]));
        first["message"]["usage"] = json!({"input_tokens": u64::MAX, "output_tokens": 1u64 << 40,
                                           "cache_read_input_tokens": 5});
        let mut second = assistant("a2", "a1", "m2", json!([{"type": "text", "text": "two"}]));
        second["message"]["usage"] = json!({"input_tokens": 3, "output_tokens": 1u64 << 40,
                                            "cache_read_input_tokens": 1u64 << 40,
                                            "cache_creation_input_tokens": 1u64 << 40});
        let mut third = assistant("a3", "a2", "m3", json!([{"type": "text", "text": "three"}]));
        third["message"]["usage"] = json!({"input_tokens": -1, "output_tokens": 1.5});
        let c = parse(&file(&[user("u1", None, json!("q")), first, second, third]));
        let e = &c.exchanges[0];
        assert_eq!(e.input_tokens, Some(3 + (2u64 << 40)), "the last message's input");
        assert_eq!(e.output_tokens, Some(2u64 << 40));
        assert_eq!(c.figures.left_out, 3);
    }
}
