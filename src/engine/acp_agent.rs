//! An ACP agent kept as an engine (`gemini --acp`, [`super::Keeping::Acp`]): what it writes on
//! stdout, JSON-RPC lines, as the outputs of an answer. Pure; `run::kept` writes the requests.
//!
//! A prompt's answer is its `session/update` notifications (`agent_message_chunk` text,
//! `tool_call` and `tool_call_update`), and ends with the response to the `session/prompt`
//! request: its `stopReason`, and gemini's token counts in `_meta.quota`. An error response
//! fails the turn with its message. A request from the agent gets its answer line as
//! [`Output::Reply`]: a permission asked for is refused (cca's tool policy already allows what
//! the search agent may do), anything else is a method cca does not offer.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{
    EngineConfig, Invocation, Keeping, LineBuffer, Output, Request, Spec, ToolCall, ToolStatus,
    Usage, json_line,
};
use crate::error::Failure;
use crate::frame;

/// Any `[engines.NAME]` with `acp = [...]`: an ACP agent, kept for a one-shot turn and ended
/// after it, kept between turns by `cca chat` and `cca acp`.
pub(crate) const SPEC: Spec = Spec {
    name: "acp",
    program_var: None,
    // ACP has no way to choose an agent's model: no `model`.
    keys: &[
        "acp",
        "version_args",
        "system_prompt",
        "history",
        "keep_warm",
        "standby",
        "max_input_bytes",
        "context_budget",
        "model_budgets",
        "bytes_per_token",
    ],
    install: None,
    models: &[],
    context_budget: 100_000,
    max_input_bytes: None,
    default_tools: None,
    failure_hint: None,
    empty_answer_hint: "try again; if it keeps happening, ask the agent by hand (an ACP client such as acpx) to see what it does",
    refused_hint: None,
    streams_input: None,
    keeps: Some(Keeping::Acp),
    one_shot: false,
    // An agent says in `initialize` whether it takes images; cca does not ask.
    takes_images: false,
    invocation,
    decoder: |_| Box::<Decoder>::default(),
    tidy: |_| super::Tidied::default(),
    // gemini as an agent writes its own copy of each session as it runs: in a home of its own
    // (its settings the user's, as they are), that copy goes with the home.
    home: |program| {
        super::gemini::is_gemini(program)
            .then(|| (crate::vars::GEMINI_CLI_HOME, super::gemini::home(None)))
    },
    stderr_noise: None,
    // Any program: what it reads is its own affair.
    reads_at_start: |_| Vec::new(),
};

/// The agent as configured; its first prompt frames the system prompt and the live history
/// (an agent takes no session file), each later one is the question alone.
fn invocation(
    engine: &EngineConfig,
    program: std::path::PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    if let Some(model) = request.model {
        let message = format!(
            "{} is an ACP agent, and ACP has no way to choose its model ({model}); choose it in the agent's own settings",
            engine.name
        );
        return Err(Failure::new(crate::error::exit::USAGE, message).into());
    }
    let args = engine.args.iter().map(super::Arg::plain).collect();
    let stdin =
        frame::inline(Some(request.system), request.live, &request.attachments, request.query);
    let follow_up = frame::follow_up(&request.attachments, request.query);
    let env = (SPEC.home)(&program)
        .map(|(var, home)| (var.to_string(), super::Arg::Home(home)))
        .into_iter()
        .collect();
    Ok(Invocation { program, args, env, stdin, images: Vec::new(), follow_up, resume: None })
}

/// The first request id `run::kept` gives to prompts (0 and 1 are `initialize` and
/// `session/new`).
pub(crate) const FIRST_PROMPT_ID: u64 = 2;

/// The `initialize` and `session/new` requests that open a session in `cwd`.
pub(crate) fn opening_lines(cwd: &std::path::Path) -> [String; 2] {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
    }});
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    [format!("{initialize}\n"), format!("{new}\n")]
}

/// What the agent answered to `session/new`: the session's id, or its error.
pub(crate) fn session_of(line: &[u8]) -> Option<Result<String, String>> {
    let message: Value = serde_json::from_slice(line).ok()?;
    if message["id"] != 1 || message.get("method").is_some() {
        return None;
    }
    match message["result"]["sessionId"].as_str() {
        Some(id) => Some(Ok(id.to_string())),
        None => Some(Err(error_text(&message["error"]))),
    }
}

/// A `session/prompt` request: the text, then each image as an image block.
pub(crate) fn prompt_line(
    id: u64,
    session: &str,
    text: &str,
    images: &[crate::media::Image],
) -> String {
    let mut prompt = vec![json!({"type": "text", "text": text})];
    prompt.extend(images.iter().map(
        |image| json!({"type": "image", "mimeType": image.media_type, "data": image.base64()}),
    ));
    let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": prompt}});
    format!("{line}\n")
}

#[derive(Default)]
pub(crate) struct Decoder {
    lines: LineBuffer,
    /// Tool calls started and not yet ended, by the agent's id.
    tools: HashMap<String, ToolCall>,
    /// The agent's [`super::Spec::stderr_noise`] (gemini's, for `gemini --acp`).
    noise: Option<fn(&[u8]) -> bool>,
}

impl Decoder {
    /// A decoder for an agent whose stderr lines that `noise` picks are left out.
    pub(crate) fn quiet(noise: Option<fn(&[u8]) -> bool>) -> Decoder {
        Decoder { noise, ..Decoder::default() }
    }
}

impl super::Decoder for Decoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        LineBuffer::feed_to(self, |d| &mut d.lines, chunk, Self::line, out);
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        LineBuffer::finish_to(self, |d| &mut d.lines, Self::line, out);
    }

    fn stderr_noise(&self) -> Option<fn(&[u8]) -> bool> {
        self.noise
    }
}

impl Decoder {
    fn line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let Some(message) = json_line(line, out) else { return };
        match (message.get("method").and_then(Value::as_str), message.get("id")) {
            (Some("session/update"), _) => self.update(&message["params"]["update"], out),
            (Some(method), Some(id)) => out.push(Output::Reply(reply(method, id, &message))),
            (Some(_), None) => {}
            // Responses to cca's requests: only a prompt's ends an answer.
            (None, Some(id)) if id.as_u64().is_some_and(|id| id >= FIRST_PROMPT_ID) => {
                self.answered(&message, out)
            }
            (None, _) => {}
        }
    }

    fn update(&mut self, update: &Value, out: &mut Vec<Output>) {
        let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
        match update["sessionUpdate"].as_str() {
            Some("agent_message_chunk") => {
                if let Some(text) = update["content"]["text"].as_str() {
                    out.push(Output::Text(text.to_string()));
                }
            }
            Some("tool_call") => {
                let call = ToolCall {
                    name: tool_name(&id, update["kind"].as_str()),
                    input: one_line(update["title"].as_str().unwrap_or_default()),
                    status: ToolStatus::Ran,
                    reason: None,
                    sources: Vec::new(),
                };
                out.push(Output::ToolStarted(call.clone()));
                self.tools.insert(id, call);
                if let Some(status) = update["status"].as_str() {
                    self.ended(update, status, out);
                }
            }
            Some("tool_call_update") => {
                if let Some(status) = update["status"].as_str() {
                    self.ended(update, status, out);
                }
            }
            _ => {}
        }
    }

    /// A tool call's status: a call that `completed` or `failed` is reported once.
    fn ended(&mut self, update: &Value, status: &str, out: &mut Vec<Output>) {
        let id = update["toolCallId"].as_str().unwrap_or_default();
        let status = match status {
            "completed" => ToolStatus::Ran,
            "failed" => ToolStatus::Failed,
            _ => return,
        };
        if let Some(mut call) = self.tools.remove(id) {
            call.status = status;
            if status == ToolStatus::Failed {
                call.reason = update["content"][0]["content"]["text"].as_str().map(one_line);
            }
            out.push(Output::Tool(call));
        }
    }

    /// The response to a `session/prompt`: the end of its answer.
    fn answered(&mut self, message: &Value, out: &mut Vec<Output>) {
        let result = &message["result"];
        if result.is_null() {
            out.push(Output::Error(error_text(&message["error"])));
        }
        let counts = &result["_meta"]["quota"]["token_count"];
        if counts.is_object() {
            out.push(Output::Usage(Usage {
                input_tokens: counts["input_tokens"].as_u64(),
                cached_tokens: None,
                output_tokens: counts["output_tokens"].as_u64(),
                cost_usd: None,
            }));
        }
        if let Some(model) = result["_meta"]["quota"]["model_usage"][0]["model"].as_str() {
            out.push(Output::Model(model.to_string()));
        }
        match result["stopReason"].as_str() {
            Some("max_tokens") => {
                out.push(Output::Note("the answer reached the model's output limit".into()))
            }
            Some("max_turn_requests") => out.push(Output::Note(
                "the agent stopped after its most model requests for one prompt".into(),
            )),
            Some("refusal") => out.push(Output::Error("the model refused to answer".into())),
            _ => {}
        }
        out.push(Output::AnswerEnd);
    }
}

/// The answer to a request from the agent.
fn reply(method: &str, id: &Value, message: &Value) -> String {
    let line = if method == "session/request_permission" {
        let options = message["params"]["options"].as_array();
        let refuse = options
            .into_iter()
            .flatten()
            .find(|o| o["kind"] == "reject_once")
            .and_then(|o| o["optionId"].as_str());
        let outcome = match refuse {
            Some(option) => json!({"outcome": "selected", "optionId": option}),
            None => json!({"outcome": "cancelled"}),
        };
        json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}})
    } else {
        json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": format!("cca does not offer {method}")}})
    };
    format!("{line}\n")
}

fn error_text(error: &Value) -> String {
    let message = error["message"].as_str().unwrap_or("an error with no message");
    match error["data"].as_str().or(error["data"]["details"].as_str()) {
        Some(detail) if !detail.is_empty() => format!("{message}: {detail}"),
        _ => message.to_string(),
    }
}

/// The tool's name: ACP carries none, but gemini's call ids end with it and two numbers
/// (`google_web_search__google_web_search_1795491872255_0` from the model's call, measured with
/// 0.61.0; `NAME-MILLISECONDS-COUNT` for its own); else the call's kind (`search`, `fetch`).
fn tool_name(id: &str, kind: Option<&str>) -> String {
    let number = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let mut rest = id;
    for _ in 0..2 {
        match rest.rfind(['_', '-']) {
            Some(at) if number(&rest[at + 1..]) => rest = &rest[..at],
            _ => return kind.unwrap_or("tool").to_string(),
        }
    }
    match rest.rsplit("__").next() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => kind.unwrap_or("tool").to_string(),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Decoder as _;

    fn decode(lines: &[Value]) -> Vec<Output> {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        for line in lines {
            decoder.feed(format!("{line}\n").as_bytes(), &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    fn update(update: Value) -> Value {
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}})
    }

    #[test]
    fn a_prompt_s_answer_is_its_chunks_and_tool_calls_until_its_response() {
        let out = decode(&[
            json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}}),
            update(
                json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}),
            ),
            update(
                json!({"sessionUpdate": "tool_call", "toolCallId": "google_web_search__google_web_search_17_0", "status": "in_progress",
                "title": "Searching the web for:\n\"rust\"", "kind": "search"}),
            ),
            update(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "google_web_search__google_web_search_17_0", "status": "completed"}),
            ),
            update(
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Rust "}}),
            ),
            update(
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "1.89"}}),
            ),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn", "_meta": {"quota": {
                "token_count": {"input_tokens": 12, "output_tokens": 3},
                "model_usage": [{"model": "gemini-2.5-flash", "token_count": {}}]}}}}),
        ]);
        let call = ToolCall {
            name: "google_web_search".into(),
            input: "Searching the web for: \"rust\"".into(),
            status: ToolStatus::Ran,
            reason: None,
            sources: Vec::new(),
        };
        assert_eq!(
            out,
            [
                Output::ToolStarted(call.clone()),
                Output::Tool(call),
                Output::Text("Rust ".into()),
                Output::Text("1.89".into()),
                Output::Usage(Usage {
                    input_tokens: Some(12),
                    output_tokens: Some(3),
                    ..Usage::default()
                }),
                Output::Model("gemini-2.5-flash".into()),
                Output::AnswerEnd,
            ]
        );
    }

    #[test]
    fn an_error_response_fails_the_answer_and_requests_are_answered() {
        let out = decode(&[json!({"jsonrpc": "2.0", "id": 3,
            "error": {"code": 429, "message": "Rate limit exceeded. Try again later."}})]);
        assert_eq!(
            out,
            [Output::Error("Rate limit exceeded. Try again later.".into()), Output::AnswerEnd]
        );
        let asked = json!({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
            "params": {"options": [{"optionId": "yes", "kind": "allow_once"}, {"optionId": "no", "kind": "reject_once"}]}});
        let [Output::Reply(line)] = &decode(&[asked])[..] else { panic!("one reply") };
        let reply: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "selected", "optionId": "no"}}})
        );
        let read =
            json!({"jsonrpc": "2.0", "id": "r", "method": "fs/read_text_file", "params": {}});
        let [Output::Reply(line)] = &decode(&[read])[..] else { panic!("one reply") };
        assert!(line.contains("-32601") && line.ends_with('\n'), "{line}");
    }

    #[test]
    fn the_session_comes_from_the_response_to_session_new() {
        assert_eq!(
            session_of(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"abc"}}"#),
            Some(Ok("abc".into()))
        );
        assert_eq!(session_of(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#), None);
        let refused = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Authentication required"}}"#;
        assert_eq!(session_of(refused), Some(Err("Authentication required".into())));
    }
}
