//! gemini-cli's chat files (`~/.gemini/tmp/<project>/chats/session-*.jsonl`, measured with
//! 0.61.0): a metadata line (`sessionId`, `startTime`, ...), then message lines (`id`,
//! `timestamp`, `type` `user` or `gemini`, `content`, `thoughts`, `tokens`, `model`,
//! `toolCalls`) and `{"$set": {...}}` lines that patch the record. A message written again
//! under the same id replaces the earlier copy (an answer's text, then the same with its tool
//! calls); `$set` of `messages` replaces them all (gemini does so on `--resume`). Older versions
//! wrote one JSON object per file with a `messages` array; both are read.

use std::collections::HashMap;

use serde_json::Value;

use super::{
    Conversation, Exchange, Figures, LeftOut, Problem, answer_text, content_text, json_lines,
};
use crate::engine::{Output, Paragraphs, ToolCall, ToolStatus};

/// The preamble gemini sends as the first user message: not a question.
const CONTEXT: &str = "<session_context>";

/// `cwd_hint`: the project's folder, from `.project_root` beside the chats folder, if known.
pub(crate) fn parse(bytes: &[u8], cwd_hint: Option<&str>) -> Conversation {
    let mut conv = Conversation::default();
    let mut messages: Vec<Value> = Vec::new();
    let mut meta = Value::Null;
    let whole = serde_json::from_slice::<Value>(bytes);
    match whole {
        // The older form: the whole session in one object.
        Ok(v) if v["messages"].is_array() => {
            messages = v["messages"].as_array().cloned().unwrap_or_default();
            conv.lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
            conv.bytes = bytes.len() as u64;
            meta = v;
        }
        Ok(v) if v.get("messages").is_some() => {
            conv.problems.push(Problem {
                line: 1,
                message: "the file is one JSON object whose `messages` is not a list: not a \
                          gemini session as cca knows them; nothing read"
                    .into(),
            });
        }
        whole => {
            // One whole object without a line end is a line read whole, not one cut off.
            let ended: std::borrow::Cow<[u8]> = match whole {
                Ok(v) if v.is_object() && !bytes.ends_with(b"\n") => [bytes, b"\n"].concat().into(),
                _ => bytes.into(),
            };
            let (values, lines, read) = json_lines(&ended, &mut conv.problems);
            (conv.lines, conv.bytes) = (lines, read.min(bytes.len() as u64));
            let mut by_id: HashMap<String, usize> = HashMap::new();
            for (line, v) in values {
                if let Some(set) = v.get("$set") {
                    if let Some(all) = set["messages"].as_array() {
                        messages = all.clone();
                        by_id = ids(&messages);
                    }
                } else if let Some(to) = v["$rewindTo"].as_str() {
                    // The user went back to this message: it and all after it are gone.
                    let at = by_id.get(to).copied().unwrap_or(0);
                    messages.truncate(at);
                    by_id = ids(&messages);
                } else if v["type"].is_string() && v["id"].is_string() {
                    let id = v["id"].as_str().unwrap_or("").to_string();
                    match by_id.get(&id) {
                        Some(&i) => messages[i] = v,
                        None => {
                            by_id.insert(id, messages.len());
                            messages.push(v);
                        }
                    }
                } else if v["sessionId"].is_string() && v.get("type").is_none() {
                    if meta.is_null() {
                        meta = v;
                    }
                } else if v.get("$unset").is_none() {
                    conv.problems.push(Problem {
                        line,
                        message: "a line of a kind cca does not know (not a message, metadata or \
                                  $set); skipped"
                            .into(),
                    });
                }
            }
        }
    }
    conv.id = meta["sessionId"].as_str().unwrap_or("").to_string();
    conv.created = meta["startTime"].as_str().and_then(super::rfc3339);
    conv.cwd = cwd_hint.map(str::to_string).or_else(|| messages.iter().find_map(workspace));

    let mut turn: Option<Turn> = None;
    for m in &messages {
        match m["type"].as_str() {
            Some("user") => {
                let text = content_text(&m["content"]);
                if text.starts_with(CONTEXT) || is_tool_response(&m["content"]) {
                    continue;
                }
                if let Some(t) = turn.take() {
                    t.finish(&mut conv);
                }
                let mut t = Turn::new(text, m);
                t.left_out.images = count_parts(&m["content"], "inlineData");
                turn = Some(t);
            }
            Some("gemini") => {
                if let Some(t) = turn.as_mut() {
                    t.answer(m);
                }
            }
            _ => {}
        }
    }
    if let Some(t) = turn.take() {
        t.finish(&mut conv);
    }
    if conv.created.is_none() {
        conv.created = conv.exchanges.first().and_then(|e| e.asked.clone());
    }
    conv.title = conv.exchanges.first().map(|e| e.question.clone());
    conv
}

fn ids(messages: &[Value]) -> HashMap<String, usize> {
    messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m["id"].as_str().map(|id| (id.to_string(), i)))
        .collect()
}

/// The first workspace folder named in gemini's `<session_context>` preamble.
fn workspace(m: &Value) -> Option<String> {
    let text = content_text(&m["content"]);
    let after = text.split("**Workspace Directories:**").nth(1)?;
    let line = after.lines().map(str::trim).find(|l| l.starts_with("- "))?;
    Some(line.trim_start_matches("- ").to_string())
}

fn is_tool_response(content: &Value) -> bool {
    count_parts(content, "functionResponse") > 0
}

fn count_parts(content: &Value, key: &str) -> usize {
    content.as_array().map_or(0, |parts| parts.iter().filter(|p| p.get(key).is_some()).count())
}

struct Turn {
    exchange: Exchange,
    paragraphs: Paragraphs,
    outputs: Vec<Output>,
    left_out: LeftOut,
    /// Output tokens of the answer's messages, if any message gave a count that makes sense.
    output_tokens: Option<u64>,
    figures: Figures,
}

impl Turn {
    fn new(question: String, m: &Value) -> Turn {
        Turn {
            exchange: Exchange {
                question,
                asked: m["timestamp"].as_str().and_then(super::rfc3339),
                key: m["id"].as_str().unwrap_or("").to_string(),
                ..Exchange::default()
            },
            paragraphs: Paragraphs::default(),
            outputs: Vec::new(),
            left_out: LeftOut::default(),
            output_tokens: None,
            figures: Figures::default(),
        }
    }

    /// One message of the model: its text, then its tool calls.
    fn answer(&mut self, m: &Value) {
        self.paragraphs.new_message();
        self.paragraphs.text(&content_text(&m["content"]), &mut self.outputs);
        // A copy gemini rewrote (on `--resume`) keeps its calls as `functionCall` parts.
        let parts = m["content"].as_array().into_iter().flatten();
        let rewritten = parts.filter_map(|p| p.get("functionCall")).map(|call| {
            serde_json::json!({"name": call["name"], "args": call["args"], "status": "success"})
        });
        let calls: Vec<Value> = match m["toolCalls"].as_array() {
            Some(calls) => calls.clone(),
            None => rewritten.collect(),
        };
        for call in &calls {
            let mut tool = ToolCall::new(call["name"].as_str().unwrap_or("tool"), &call["args"]);
            (tool.status, tool.reason) = match call["status"].as_str() {
                Some("error") => (ToolStatus::Failed, Some("the tool failed".into())),
                Some("cancelled") => (ToolStatus::Refused, Some("cancelled".into())),
                _ => (ToolStatus::Ran, None),
            };
            self.outputs.push(Output::Tool(tool));
        }
        self.left_out.thinking += m["thoughts"].as_array().map_or(0, Vec::len);
        if let Some(model) = m["model"].as_str() {
            self.exchange.model = Some(model.to_string());
        }
        let tokens = &m["tokens"];
        if let Some(input) = self.figures.tokens(&tokens["input"]) {
            self.exchange.input_tokens = Some(input);
        }
        if let Some(output) = self.figures.tokens(&tokens["output"]) {
            self.output_tokens = Some(self.output_tokens.unwrap_or(0).saturating_add(output));
        }
        self.exchange.answered = m["timestamp"].as_str().and_then(super::rfc3339);
        self.exchange.key = m["id"].as_str().unwrap_or("").to_string();
    }

    fn finish(mut self, conv: &mut Conversation) {
        conv.figures.add(self.figures);
        if self.outputs.is_empty() {
            conv.not_answered(&self.exchange, false);
            return;
        }
        self.exchange.output_tokens = self.output_tokens;
        self.exchange.answer = answer_text(self.outputs, &self.left_out);
        conv.answered(self.exchange);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn later_copies_replace_earlier_and_the_old_form_reads_too() {
        let lines = [
            json!({"sessionId": "g1", "startTime": "2026-11-23T10:00:00.000Z", "kind": "main"}),
            json!({"$set": {"messages": [{"id": "c", "type": "user", "content": [{"text": "<session_context>\n- **Workspace Directories:**\n  - /w\n</session_context>"}]}]}}),
            json!({"id": "u1", "timestamp": "2026-11-23T10:00:01Z", "type": "user", "content": [{"text": "q"}]}),
            json!({"id": "g1", "timestamp": "2026-11-23T10:00:02Z", "type": "gemini", "content": "Looking.", "model": "gm"}),
            json!({"id": "g1", "timestamp": "2026-11-23T10:00:02Z", "type": "gemini", "content": "Looking.", "model": "gm",
                   "toolCalls": [{"name": "google_web_search", "args": {"query": "x"}, "status": "success"}]}),
            json!({"id": "r1", "type": "user", "content": [{"functionResponse": {"name": "google_web_search"}}]}),
            json!({"id": "g2", "timestamp": "2026-11-23T10:00:03Z", "type": "gemini", "content": "Found.", "thoughts": [{"subject": "s"}]}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes(), None);
        assert_eq!(c.problems, []);
        assert_eq!((c.id.as_str(), c.cwd.as_deref()), ("g1", Some("/w")));
        assert_eq!(c.exchanges.len(), 1);
        assert_eq!(
            c.exchanges[0].answer,
            "Looking.\n\n> google_web_search: x\n\nFound.\n\n> Left out by cca import: 1 thinking block\n"
        );
        assert_eq!(c.exchanges[0].key, "g2");
        let old = json!({"sessionId": "o", "startTime": "2026-01-01T00:00:00Z", "messages": [
            {"id": "1", "type": "user", "content": "hi", "timestamp": "2026-01-01T00:00:00Z"},
            {"id": "2", "type": "gemini", "content": "hello", "timestamp": "2026-01-01T00:00:01Z"}]});
        let c = parse(serde_json::to_string_pretty(&old).unwrap().as_bytes(), Some("/p"));
        assert_eq!((c.exchanges.len(), c.exchanges[0].answer.as_str()), (1, "hello"));
        assert_eq!(c.cwd.as_deref(), Some("/p"));
    }

    #[test]
    fn a_whole_object_is_never_said_to_be_cut_off() {
        // One line without its line end, but whole: read.
        let one = json!({"sessionId": "g", "startTime": "2026-11-23T10:00:00.000Z"}).to_string();
        let c = parse(one.as_bytes(), None);
        assert_eq!((c.problems.as_slice(), c.id.as_str()), (&[][..], "g"));
        assert_eq!(c.bytes, one.len() as u64);
        // The older form with `messages` that is not a list: said to be what it is.
        let odd = json!({"sessionId": "o", "messages": {"1": "hi"}}).to_string();
        let c = parse(odd.as_bytes(), None);
        assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
        assert!(c.problems[0].message.contains("`messages` is not a list"), "{:?}", c.problems);
        // A line that is cut off still is.
        let c = parse(&one.as_bytes()[..one.len() - 3], None);
        assert!(c.problems[0].message.contains("cut off"), "{:?}", c.problems);
    }

    #[test]
    fn a_question_with_no_answer_is_kept_before_the_next_exchange() {
        let lines = [
            json!({"sessionId": "g", "startTime": "2026-11-23T10:00:00.000Z"}),
            json!({"id": "u1", "type": "user", "content": "cancelled"}),
            json!({"id": "i1", "type": "info", "content": "Request cancelled."}),
            json!({"id": "u2", "type": "user", "content": "answered"}),
            json!({"id": "g2", "type": "gemini", "content": "yes"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes(), None);
        assert_eq!(c.exchanges.len(), 1);
        let a = &c.exchanges[0].attempts;
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].question.as_str(), a[0].interrupted), ("cancelled", false));
    }

    #[test]
    fn usage_sums_saturate_and_absurd_figures_are_left_out() {
        let lines = [
            json!({"sessionId": "g", "startTime": "2026-11-23T10:00:00.000Z"}),
            json!({"id": "u1", "type": "user", "content": "q"}),
            json!({"id": "g1", "type": "gemini", "content": "a", "tokens": {"input": 7, "output": 1u64 << 40}}),
            json!({"id": "g2", "type": "gemini", "content": "b", "tokens": {"input": u64::MAX, "output": u64::MAX}}),
            json!({"id": "g3", "type": "gemini", "content": "c", "tokens": {"output": 1u64 << 40}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes(), None);
        assert_eq!(c.exchanges[0].input_tokens, Some(7));
        assert_eq!(c.exchanges[0].output_tokens, Some(2u64 << 40));
        assert_eq!(c.figures.left_out, 2);
        // No count, or none that makes sense: none recorded, never a 0 that was not said.
        let lines = [
            json!({"sessionId": "g", "startTime": "2026-11-23T10:00:00.000Z"}),
            json!({"id": "u1", "type": "user", "content": "q"}),
            json!({"id": "g1", "type": "gemini", "content": "a", "tokens": {"input": 10, "output": 1.5}}),
            json!({"id": "u2", "type": "user", "content": "q2"}),
            json!({"id": "g2", "type": "gemini", "content": "b"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes(), None);
        let outputs: Vec<Option<u64>> = c.exchanges.iter().map(|e| e.output_tokens).collect();
        assert_eq!(outputs, [None, None]);
        assert_eq!(c.figures.left_out, 1);
    }
}
