//! Claude Code's session files (`~/.claude/projects/<cwd>/<uuid>.jsonl`, measured with 2.1.329):
//! one JSON object a line. Messages (`user`, `assistant`, `attachment`, `system`) carry `uuid`
//! and `parentUuid`; an edited question or a retried answer starts a branch, and the
//! conversation is the chain that ends at the last message in the file. One answer spans
//! several `assistant` lines (a content block each, sharing `message.id`), and tool results come
//! back as `user` lines: the same shapes as `claude -p --output-format stream-json`, so cca's
//! own decoder for that output reads them, and an imported answer is kept exactly as cca would
//! have kept it.

use std::collections::HashMap;

use serde_json::Value;

use super::{Conversation, Exchange, LeftOut, Problem, answer_text, content_text, json_lines};
use crate::engine::{Decoder as _, Output};

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
                "written by Claude Code {version}, a version cca does not know; read as 2.x"
            ),
        });
    }
    let is_message = |v: &Value| {
        matches!(v["type"].as_str(), Some("user" | "assistant" | "attachment" | "system"))
            && v["uuid"].is_string()
    };
    let by_uuid: HashMap<&str, usize> = values
        .iter()
        .enumerate()
        .filter(|(_, (_, v))| is_message(v))
        .map(|(i, (_, v))| (v["uuid"].as_str().unwrap_or(""), i))
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
    let mut chain = Vec::new();
    let mut at = leaf;
    while let Some(i) = at {
        if chain.len() > values.len() {
            conv.problems.push(Problem { line: values[i].0, message: "a loop of parents".into() });
            break;
        }
        chain.push(i);
        let v = &values[i].1;
        let parent = v["parentUuid"].as_str().or(v["logicalParentUuid"].as_str());
        at = parent.and_then(|p| by_uuid.get(p).copied());
    }
    chain.reverse();
    conv.id = values.iter().find_map(|(_, v)| v["sessionId"].as_str()).unwrap_or("").to_string();
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
        if question {
            if let Some(t) = turn.take() {
                t.finish(&mut conv.exchanges);
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
        t.finish(&mut conv.exchanges);
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
        }
    }

    fn message(&mut self, v: &Value) {
        let message = &v["message"];
        if v["type"] == "assistant" {
            self.left_out.thinking += count_blocks(&message["content"], "thinking")
                + count_blocks(&message["content"], "redacted_thinking");
            if let Some(model) = message["model"].as_str().filter(|m| *m != "<synthetic>") {
                self.exchange.model = Some(model.to_string());
            }
            let usage = &message["usage"];
            if let Some(input) = usage["input_tokens"].as_u64() {
                let cached = usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
                    + usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                self.exchange.input_tokens = Some(input + cached);
            }
            if let (Some(id), Some(out)) = (message["id"].as_str(), usage["output_tokens"].as_u64())
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

    /// The exchange, if the question was answered.
    fn finish(mut self, exchanges: &mut Vec<Exchange>) {
        self.decoder.finish(&mut self.outputs);
        let answered = self.outputs.iter().any(|o| matches!(o, Output::Text(_) | Output::Tool(_)));
        if !answered {
            return;
        }
        if !self.outputs_by_message.is_empty() {
            self.exchange.output_tokens = Some(self.outputs_by_message.iter().map(|m| m.1).sum());
        }
        self.exchange.answer = answer_text(self.outputs, &self.left_out);
        exchanges.push(self.exchange);
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
    fn an_unknown_version_is_named_and_read() {
        let mut first = user("u1", None, json!("q"));
        first["version"] = json!("9.0.1");
        let lines = [first, assistant("a1", "u1", "m1", json!([{"type": "text", "text": "a"}]))];
        let c = parse(&file(&lines));
        assert_eq!(c.exchanges.len(), 1);
        assert_eq!(c.problems.len(), 1);
        assert!(c.problems[0].message.contains("9.0.1"), "{:?}", c.problems);
    }
}
