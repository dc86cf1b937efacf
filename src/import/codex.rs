//! codex's rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-<date>-<uuid>.jsonl`, measured
//! with 0.169.0): `{"timestamp", "type", "payload"}` lines. `session_meta` holds the id and
//! folder, `turn_context` the model; `response_item`s are what the model saw: `message`s
//! (role `user` with `input_text`, `assistant` with `output_text`; the first user items are
//! `<environment_context>` and instruction preambles, not questions), `function_call` /
//! `function_call_output`, `web_search_call` and `reasoning`. `event_msg` lines repeat the same
//! for codex's interface and are skipped. The file is only appended to, so an exchange's key is
//! the line its last item is on.

use serde_json::Value;

use super::{Conversation, Exchange, LeftOut, Problem, answer_text, content_text, json_lines};
use crate::engine::{Output, Paragraphs, ToolCall, ToolStatus};
use crate::render::shown_id;

/// User items codex adds itself, before the first question.
const PREAMBLES: [&str; 4] =
    ["<environment_context>", "<user_instructions>", "# AGENTS.md", "<permissions"];

pub(crate) fn parse(bytes: &[u8]) -> Conversation {
    let mut conv = Conversation::default();
    let (values, lines, read) = json_lines(bytes, &mut conv.problems);
    (conv.lines, conv.bytes) = (lines, read);
    let mut model = None;
    let mut turn: Option<Turn> = None;
    for (line, v) in &values {
        let p = &v["payload"];
        let at = v["timestamp"].as_str().and_then(super::rfc3339);
        match v["type"].as_str() {
            // The file's own thread is the first: a fork's rollout (`codex fork`) goes on with
            // a copy of its parent's, `session_meta` included.
            Some("session_meta") if conv.id.is_empty() => {
                conv.id = p["id"].as_str().unwrap_or("").to_string();
                conv.cwd = p["cwd"].as_str().map(str::to_string);
                conv.created = p["timestamp"].as_str().and_then(super::rfc3339).or(at);
            }
            Some("session_meta") => {}
            Some("turn_context") => {
                model = p["model"].as_str().map(str::to_string);
                if conv.cwd.is_none() {
                    conv.cwd = p["cwd"].as_str().map(str::to_string);
                }
            }
            Some("response_item") => {
                let role = p["role"].as_str();
                let kind = p["type"].as_str();
                let skipped =
                    |what: &str| Problem { line: *line, message: format!("{what}; skipped") };
                if kind.is_none() {
                    conv.problems.push(skipped("an item with no type cca can read"));
                } else if kind == Some("message") && role == Some("user") {
                    let text = content_text_of(&p["content"]);
                    if PREAMBLES.iter().any(|pre| text.trim_start().starts_with(pre)) {
                        continue;
                    }
                    let images = count(&p["content"], "input_image");
                    if text.trim().is_empty() && images == 0 {
                        conv.problems.push(skipped("a question with no text cca can read"));
                        continue;
                    }
                    if let Some(t) = turn.take() {
                        t.finish(&mut conv);
                    }
                    let mut t = Turn::new(text, at, *line);
                    t.left_out.images = images;
                    turn = Some(t);
                } else if let Some(t) = turn.as_mut() {
                    t.item(p, at, *line, model.as_deref());
                }
            }
            // codex notes an answer the user stopped among its interface's events.
            Some("event_msg") if p["type"] == "turn_aborted" => {
                if let Some(t) = turn.as_mut() {
                    t.interrupted = true;
                }
            }
            Some("event_msg" | "world_state" | "token_usage_record" | "compacted") => {}
            kind => conv.problems.push(Problem {
                line: *line,
                message: format!(
                    "a line of a kind cca does not know ({}); skipped",
                    kind.map_or("no type".into(), shown_id)
                ),
            }),
        }
    }
    if let Some(t) = turn.take() {
        t.finish(&mut conv);
    }
    conv.title = conv.exchanges.first().map(|e| e.question.clone());
    conv
}

/// The text of `input_text` / `output_text` parts.
fn content_text_of(content: &Value) -> String {
    content_text(content)
}

fn count(content: &Value, kind: &str) -> usize {
    content.as_array().map_or(0, |parts| parts.iter().filter(|p| p["type"] == kind).count())
}

struct Turn {
    exchange: Exchange,
    paragraphs: Paragraphs,
    outputs: Vec<Output>,
    calls: Vec<(String, usize)>,
    left_out: LeftOut,
    /// The user stopped the answer.
    interrupted: bool,
}

impl Turn {
    fn new(question: String, at: Option<String>, line: u64) -> Turn {
        Turn {
            exchange: Exchange {
                question,
                asked: at,
                key: line.to_string(),
                ..Exchange::default()
            },
            paragraphs: Paragraphs::default(),
            outputs: Vec::new(),
            calls: Vec::new(),
            left_out: LeftOut::default(),
            interrupted: false,
        }
    }

    fn item(&mut self, p: &Value, at: Option<String>, line: u64, model: Option<&str>) {
        match (p["type"].as_str(), p["role"].as_str()) {
            (Some("message"), Some("assistant")) => {
                self.paragraphs.new_message();
                self.paragraphs.text(&content_text(&p["content"]), &mut self.outputs);
            }
            (Some("function_call" | "custom_tool_call"), _) => {
                let input = match &p["arguments"] {
                    Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
                    _ => p["input"].clone(),
                };
                // codex's shell takes its command as a list of words.
                let input = match input["command"].as_array() {
                    Some(words) => {
                        let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
                        serde_json::json!({"command": words.join(" ")})
                    }
                    None => input,
                };
                let call = ToolCall::new(p["name"].as_str().unwrap_or("tool"), &input);
                self.calls
                    .push((p["call_id"].as_str().unwrap_or("").to_string(), self.outputs.len()));
                self.outputs.push(Output::Tool(call));
            }
            (Some("function_call_output" | "custom_tool_call_output"), _) => {
                let id = p["call_id"].as_str().unwrap_or("");
                if let Some(&(_, i)) = self.calls.iter().find(|(c, _)| c == id)
                    && let Output::Tool(call) = &mut self.outputs[i]
                {
                    (call.status, call.reason) = (ToolStatus::Ran, None);
                }
            }
            (Some("web_search_call"), _) => {
                let mut call = ToolCall::new("web_search", &p["action"]);
                (call.status, call.reason) = (ToolStatus::Ran, None);
                self.outputs.push(Output::Tool(call));
            }
            (Some("reasoning"), _) => self.left_out.thinking += 1,
            _ => return,
        }
        self.exchange.answered = at;
        self.exchange.key = line.to_string();
        self.exchange.model = model.map(str::to_string);
    }

    fn finish(self, conv: &mut Conversation) {
        if self.outputs.is_empty() {
            conv.not_answered(&self.exchange, self.interrupted);
            return;
        }
        let answer = answer_text(self.outputs, &self.left_out);
        conv.answered(Exchange { answer, ..self.exchange });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_question_stopped_before_its_answer_is_kept_as_interrupted() {
        let at = "2026-11-23T10:00:00.000Z";
        let ask = |text: &str| json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}});
        let lines = [
            json!({"timestamp": at, "type": "session_meta", "payload": {"id": "x1", "cwd": "/w"}}),
            ask("stopped"),
            json!({"timestamp": at, "type": "event_msg", "payload": {"type": "turn_aborted", "reason": "interrupted"}}),
            ask("answered"),
            json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yes"}]}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes());
        assert_eq!(c.problems, []);
        assert_eq!(c.exchanges.len(), 1);
        let a = &c.exchanges[0].attempts;
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].question.as_str(), a[0].interrupted), ("stopped", true));
    }

    #[test]
    fn a_fork_s_rollout_is_its_own_thread_though_it_holds_its_parent_s() {
        let meta = |id: &str, cwd: &str, at: &str| json!({"timestamp": at, "type": "session_meta", "payload": {"id": id, "cwd": cwd, "timestamp": at}});
        let lines = [
            meta("f2", "/fork", "2026-11-23T11:00:00.000Z"),
            meta("x1", "/w", "2026-11-23T10:00:00.000Z"),
            json!({"timestamp": "2026-11-23T11:00:00.000Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes());
        assert_eq!((c.id.as_str(), c.cwd.as_deref()), ("f2", Some("/fork")));
        assert_eq!(c.created, super::super::rfc3339("2026-11-23T11:00:00.000Z"));
    }

    #[test]
    fn preambles_are_not_questions_and_calls_are_tool_blocks() {
        let item = |payload: Value| json!({"timestamp": "2026-11-23T10:00:00.000Z", "type": "response_item", "payload": payload});
        let lines = [
            json!({"timestamp": "2026-11-23T10:00:00.000Z", "type": "session_meta", "payload": {"id": "x1", "cwd": "/w", "timestamp": "2026-11-23T10:00:00.000Z"}}),
            json!({"timestamp": "2026-11-23T10:00:00.000Z", "type": "turn_context", "payload": {"cwd": "/w", "model": "gpt-x"}}),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n</environment_context>"}]}),
            ),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]}),
            ),
            item(json!({"type": "reasoning", "summary": []})),
            item(
                json!({"type": "function_call", "name": "shell", "arguments": "{\"command\": \"ls\"}", "call_id": "c1"}),
            ),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "a b"})),
            item(
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files."}]}),
            ),
            json!({"timestamp": "2026-11-23T10:00:00.000Z", "type": "event_msg", "payload": {"type": "task_complete"}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes());
        assert_eq!(c.problems, []);
        assert_eq!((c.id.as_str(), c.cwd.as_deref()), ("x1", Some("/w")));
        assert_eq!(c.exchanges.len(), 1);
        let e = &c.exchanges[0];
        assert_eq!(e.question, "list files");
        assert_eq!(
            e.answer,
            "> shell: ls\n\nTwo files.\n\n> Left out by cca import: 1 thinking block\n"
        );
        assert_eq!((e.key.as_str(), e.model.as_deref()), ("8", Some("gpt-x")));
    }

    #[test]
    fn items_of_the_wrong_shape_and_empty_questions_are_said_and_skipped() {
        let item = |payload: Value| json!({"timestamp": "2026-11-23T10:00:00.000Z", "type": "response_item", "payload": payload});
        let lines = [
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}),
            ),
            item(json!("not an object")),
            item(json!({"type": "message", "role": "user", "content": 42})),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "  "}]}),
            ),
            item(
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}),
            ),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = parse(text.as_bytes());
        let said: Vec<(u64, &str)> =
            c.problems.iter().map(|p| (p.line, p.message.as_str())).collect();
        assert_eq!(
            said,
            [
                (2, "an item with no type cca can read; skipped"),
                (3, "a question with no text cca can read; skipped"),
                (4, "a question with no text cca can read; skipped"),
            ]
        );
        assert_eq!(c.exchanges.len(), 1);
        assert_eq!((c.exchanges[0].question.as_str(), c.exchanges[0].answer.as_str()), ("q", "a"));
    }
}
