//! claude (`@anthropic-ai/claude-code`), driven as `claude -p` with the prompt on stdin.
//!
//! Its plain text output arrives all at once at the end, so cca asks for `stream-json` with
//! partial messages and prints the text deltas as they come. Errors arrive on stdout, in the
//! final `result` line (`is_error`). With tools, one answer spans several API messages; the
//! text of all of them is the answer, and each tool call becomes a one-line [`Output::Tool`].

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{
    Arg, EngineConfig, HistoryMode, Invocation, LineBuffer, Output, Request, Spec,
    SystemPromptMode, Usage, note_line,
};
use crate::frame;

/// Measured with claude-code 2.1.329 (docs/DESIGN.md, "Engines").
pub const SPEC: Spec = Spec {
    name: "claude",
    program_var: Some(crate::vars::CLAUDE),
    install: Some("npm install -g @anthropic-ai/claude-code"),
    context_budget: 160_000,
    // Stdin up to about 2.5 MB is taken whole; an argument over 128 KiB fails to exec.
    max_input_bytes: Some(2_500_000),
    default_tools: Some("WebSearch,WebFetch"),
    failure_hint: Some("for claude's own diagnosis, run `claude doctor`"),
    empty_answer_hint: "try again; if it keeps happening, run the engine by hand to see what it does",
    invocation,
    decoder: || Box::new(Decoder::default()),
    // `--no-session-persistence` keeps claude from writing session files of its own.
    tidy: |_, _| {},
};

pub fn invocation(
    engine: &EngineConfig,
    program: PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    let mut args: Vec<Arg> = [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        // cca is the memory: claude must not pile up session files of its own.
        "--no-session-persistence",
    ]
    .into_iter()
    .map(Arg::plain)
    .collect();
    if let Some(tools) = &engine.tools {
        // `--tools` takes several values; the `=` form keeps it from swallowing what follows.
        args.push(Arg::plain(format!("--tools={tools}")));
        if !tools.is_empty() {
            // In -p mode a tool that needs permission is refused unless it is also allowed.
            args.push(Arg::plain(format!("--allowedTools={tools}")));
        }
    }
    if let Some(model) = request.model {
        args.push(Arg::plain("--model"));
        args.push(Arg::plain(model));
    }
    let inline_system = match engine.system_prompt {
        SystemPromptMode::Inline => Some(request.system),
        SystemPromptMode::Native => {
            args.push(Arg::plain("--append-system-prompt-file"));
            args.push(Arg::File { name: "system-prompt.md", contents: request.system.to_string() });
            None
        }
    };
    let stdin = match engine.history {
        HistoryMode::Inline => {
            frame::inline(inline_system, request.live, request.attachment, request.query)
        }
        HistoryMode::Structured => {
            let session_id = uuid_like(request.query, request.live.exchanges.len() as u64);
            let history = history_jsonl(&session_id, request)?;
            if !history.is_empty() {
                args.push(Arg::plain("--resume"));
                args.push(Arg::File { name: "history.jsonl", contents: history });
            }
            let summary_only = std::sync::Arc::new(crate::transcript::Live {
                summary: request.live.summary.clone(),
                summary_turns: request.live.summary_turns,
                exchanges: Vec::new(),
            });
            frame::inline(inline_system, &summary_only, request.attachment, request.query)
        }
    };
    args.extend(engine.args.iter().map(Arg::plain));
    let mut env = Vec::new();
    if let Some(retries) = engine.retries {
        env.push(("CLAUDE_CODE_MAX_RETRIES".to_string(), Arg::plain(retries.to_string())));
    }
    Ok(Invocation { program, args, env, stdin })
}

/// The live exchanges as claude's own session file: one JSON object per message.
fn history_jsonl(session_id: &str, request: &Request) -> std::io::Result<String> {
    let mut out = String::new();
    let mut parent: Option<String> = None;
    let mut n = 0u64;
    for exchange in &request.live.exchanges {
        let user = request.user_text(exchange)?;
        let assistant = (request.stored)(&exchange.assistant)?;
        for (role, content) in
            [("user", json!(user)), ("assistant", json!([{ "type": "text", "text": assistant }]))]
        {
            n += 1;
            let uuid = uuid_like(session_id, n);
            let line = json!({
                "type": role,
                "sessionId": session_id,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "uuid": uuid,
                "parentUuid": parent,
                "message": { "role": role, "content": content },
            });
            out.push_str(&line.to_string());
            out.push('\n');
            parent = Some(uuid);
        }
    }
    Ok(out)
}

/// A UUID-shaped id derived from text and a number: unique enough for a throwaway file.
fn uuid_like(seed: &str, n: u64) -> String {
    let h1 = crate::prompt::hash(&format!("{seed}\0{n}"));
    let h2 = crate::prompt::hash(&format!("{n}\0{seed}\0"));
    let hex = format!("{}{}", &h1[8..], &h2[8..]);
    format!("{}-{}-4{}-8{}-{}", &hex[0..8], &hex[8..12], &hex[13..16], &hex[17..20], &hex[20..32])
}

/// Decodes `--output-format stream-json --verbose --include-partial-messages`.
#[derive(Debug, Default)]
pub struct Decoder {
    lines: LineBuffer,
    /// Text has been printed; the next text block needs a paragraph break before it.
    text_seen: bool,
    new_block: bool,
    /// Messages whose text arrived as deltas (their full copy must not be printed again).
    streamed: Vec<String>,
    result_seen: bool,
    /// The text of an API error message, if claude reported one.
    api_error: Option<String>,
}

impl super::Decoder for Decoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.feed(chunk, |line| self.line(line, out));
        self.lines = lines;
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.finish(|line| self.line(line, out));
        if !self.result_seen
            && let Some(error) = self.api_error.take()
        {
            out.push(Output::Error(error));
        }
    }
}

impl Decoder {
    fn line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            note_line(line, out);
            return;
        };
        match v["type"].as_str() {
            Some("stream_event") => self.stream_event(&v, out),
            Some("assistant") => self.assistant(&v, out),
            Some("result") => {
                self.result_seen = true;
                let usage = &v["usage"];
                out.push(Output::Usage(Usage {
                    input_tokens: usage["input_tokens"].as_u64(),
                    output_tokens: usage["output_tokens"].as_u64(),
                    cost_usd: v["total_cost_usd"].as_f64(),
                }));
                if v["is_error"].as_bool() == Some(true) {
                    let reason = v["result"]
                        .as_str()
                        .map(str::to_string)
                        .or(self.api_error.take())
                        .unwrap_or_else(|| format!("claude reported an error ({})", v["subtype"]));
                    out.push(Output::Error(reason));
                }
            }
            Some("system") if v["subtype"] == "api_retry" => out.push(Output::Note(retry_note(&v))),
            _ => {}
        }
    }

    fn stream_event(&mut self, v: &Value, out: &mut Vec<Output>) {
        let event = &v["event"];
        match event["type"].as_str() {
            Some("message_start") => {
                if let Some(id) = event["message"]["id"].as_str() {
                    self.streamed.push(id.to_string());
                }
            }
            Some("content_block_start") => self.new_block = true,
            Some("content_block_delta") => {
                if event["delta"]["type"] == "text_delta"
                    && let Some(text) = event["delta"]["text"].as_str()
                {
                    self.text(text, out);
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, text: &str, out: &mut Vec<Output>) {
        if text.is_empty() {
            return;
        }
        if self.new_block && self.text_seen {
            out.push(Output::Text("\n\n".into()));
        }
        self.new_block = false;
        self.text_seen = true;
        out.push(Output::Text(text.to_string()));
    }

    fn assistant(&mut self, v: &Value, out: &mut Vec<Output>) {
        let message = &v["message"];
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        if v["error"].is_string() || v["is_api_error_message"].as_bool() == Some(true) {
            let text: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
            self.api_error = Some(text.join(" "));
            return;
        }
        let streamed =
            message["id"].as_str().is_some_and(|id| self.streamed.iter().any(|s| s == id));
        for block in &blocks {
            match block["type"].as_str() {
                Some("tool_use") => out.push(Output::Tool(tool_line(block))),
                // Text that did not arrive as deltas (no partial messages): show it now.
                Some("text") if !streamed => {
                    self.new_block = true;
                    if let Some(text) = block["text"].as_str() {
                        self.text(text, out);
                    }
                }
                _ => {}
            }
        }
    }
}

/// claude retries a failing API for minutes by default: say so, each time, and how to stop it.
fn retry_note(v: &Value) -> String {
    let what = match (v["error_status"].as_u64(), v["error"].as_str()) {
        (Some(status), Some(e)) => format!("the API answered {status} ({e})"),
        (None, Some(e)) => format!("the API failed ({e})"),
        _ => "the API failed".to_string(),
    };
    let wait = v["retry_delay_ms"]
        .as_f64()
        .map(|ms| format!(" in {:.1} s", ms / 1000.0))
        .unwrap_or_default();
    let attempt = match (v["attempt"].as_u64(), v["max_retries"].as_u64()) {
        (Some(a), Some(m)) => format!(" (retry {a} of {m})"),
        _ => String::new(),
    };
    format!(
        "cca: claude: {what}; retrying{wait}{attempt}; Ctrl-C stops, --fail-fast does not retry"
    )
}

/// `WebSearch: rust 1.89 file locking`, `WebFetch: https://...`: the gist of a tool call.
pub fn tool_line(block: &Value) -> String {
    let name = block["name"].as_str().unwrap_or("tool");
    let input = &block["input"];
    let gist = ["query", "url", "pattern", "command", "file_path", "prompt"]
        .iter()
        .find_map(|k| input[k].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| input.to_string());
    format!("{name}: {}", crate::transcript::one_line(&gist, 200))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Decoder as _;

    fn decode(sample: &str) -> Vec<Output> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        // Feed in awkward chunks, as a pipe would.
        for chunk in sample.as_bytes().chunks(37) {
            d.feed(chunk, &mut out);
        }
        d.finish(&mut out);
        out
    }

    fn text(out: &[Output]) -> String {
        out.iter()
            .filter_map(|o| if let Output::Text(t) = o { Some(t.as_str()) } else { None })
            .collect()
    }

    #[test]
    fn success_streams_the_deltas_once() {
        let out = decode(include_str!("../../tests/fixtures/claude-stream-json-success.jsonl"));
        assert_eq!(text(&out), "ECHO: hello there");
        assert!(!out.iter().any(|o| matches!(o, Output::Error(_))));
        let usage = out.iter().find_map(|o| if let Output::Usage(u) = o { Some(u) } else { None });
        let usage = usage.expect("the result line carries usage");
        assert_eq!((usage.input_tokens, usage.output_tokens), (Some(10), Some(4)));
        assert!((usage.cost_usd.unwrap() - 0.00012).abs() < 1e-12, "{usage:?}");
    }

    #[test]
    fn api_errors_are_errors_not_answers() {
        for (sample, expect) in [
            (
                include_str!("../../tests/fixtures/claude-stream-json-http500.jsonl"),
                "API Error: 500",
            ),
            (include_str!("../../tests/fixtures/claude-stream-json-http401.jsonl"), "401"),
        ] {
            let out = decode(sample);
            assert_eq!(text(&out), "");
            let errors: Vec<_> = out
                .iter()
                .filter_map(|o| if let Output::Error(e) = o { Some(e) } else { None })
                .collect();
            assert_eq!(errors.len(), 1, "{out:?}");
            assert!(errors[0].contains(expect), "{errors:?}");
        }
    }

    #[test]
    fn tool_calls_become_one_line_and_texts_are_separated() {
        let lines = [
            json!({"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}),
            json!({"type":"stream_event","event":{"type":"content_block_start","content_block":{"type":"text"}}}),
            json!({"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"Let me search."}}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Let me search."},{"type":"tool_use","name":"WebSearch","input":{"query":"rust 1.89"}}]}}),
            json!({"type":"stream_event","event":{"type":"message_start","message":{"id":"m2"}}}),
            json!({"type":"stream_event","event":{"type":"content_block_start","content_block":{"type":"text"}}}),
            json!({"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"Found it."}}}),
            json!({"type":"result","is_error":false,"result":"Found it.","usage":{}}),
        ];
        let sample: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let out = decode(&sample);
        assert_eq!(text(&out), "Let me search.\n\nFound it.");
        assert!(out.contains(&Output::Tool("WebSearch: rust 1.89".into())));
    }

    #[test]
    fn structured_history_is_claude_session_jsonl() {
        let live = std::sync::Arc::new(crate::transcript::Live {
            summary: None,
            summary_turns: None,
            exchanges: vec![crate::transcript::ExchangeSpans {
                number: 1,
                user: 0..2,
                attachments: vec![],
                assistant: 2..4,
            }],
        });
        let stored =
            |r: &std::ops::Range<u64>| Ok(["q1", "a1"][(r.start / 2) as usize].to_string());
        let request = Request {
            system: "sys",
            live: &live,
            stored: &stored,
            attachment: None,
            query: "q2",
            model: None,
        };
        let text = history_jsonl("sid", &request).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "user");
        assert_eq!(lines[0]["message"]["content"], "q1");
        assert_eq!(lines[1]["message"]["content"][0]["text"], "a1");
        assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
        assert!(lines[0]["timestamp"].is_string());
    }
}
