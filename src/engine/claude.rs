//! claude (`@anthropic-ai/claude-code`), driven as `claude -p` with the prompt on stdin.
//!
//! Its plain text output arrives all at once at the end, so cca asks for `stream-json` with
//! partial messages and prints the text deltas as they come. Errors arrive on stdout, in the
//! final `result` line (`is_error`). With tools, one answer spans several API messages; the
//! text of all of them is the answer, and each tool call becomes an [`Output::Tool`] once its
//! result (a `user` event with a `tool_result`) tells how it went.
//!
//! The API splits one message's text into several blocks (at every citation): they are one text
//! and are passed on exactly, with nothing between them. Only a new message gets a break.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{
    Arg, EngineConfig, HistoryMode, Invocation, LineBuffer, Notes, Output, Paragraphs, Request,
    Source, Spec, SystemPromptMode, ToolCall, ToolCalls, ToolStatus, Usage, json_line,
};
use crate::frame;
use crate::media::Image;

/// Measured with claude-code 2.1.329 (docs/DESIGN.md, "Engines").
pub(crate) const SPEC: Spec = Spec {
    name: "claude",
    program_var: Some(crate::vars::CLAUDE),
    install: Some("npm install -g @anthropic-ai/claude-code"),
    keys: &[
        "program",
        "args",
        "model",
        "system_prompt",
        "history",
        "tools",
        "retries",
        "keep_warm",
        "standby",
        "max_input_bytes",
        "context_budget",
        "model_budgets",
        "bytes_per_token",
    ],
    // Its aliases, which follow the current model of each family.
    models: &["sonnet", "opus", "haiku"],
    context_budget: 160_000,
    // Stdin up to about 2.5 MB is taken whole; an argument over 128 KiB fails to exec.
    max_input_bytes: Some(2_500_000),
    default_tools: Some("WebSearch,WebFetch"),
    failure_hint: Some("for claude's own diagnosis, run `claude doctor`"),
    empty_answer_hint: "try again; if it keeps happening, run the engine by hand to see what it does",
    refused_hint: Some(
        "check ANTHROPIC_API_KEY (or the key in `claude`'s settings), or log in again with `claude /login`",
    ),
    // Measured: a user line sent while an answer streams is taken after the next tool result
    // in the same answer, or as a new answer (with its own `result`) right after it.
    streams_input: Some(user_line),
    keeps: Some(super::Keeping::StreamJson(user_line)),
    one_shot: true,
    // Measured: image blocks beside the text of a stream-json user message reach the model
    // request as they are.
    takes_images: true,
    invocation,
    decoder: |_| Box::new(Decoder::default()),
    tidy,
    reads_at_start,
    home: |_| None,
    stderr_noise: None,
};

pub(crate) fn invocation(
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
        // The prompt, and any steer after it, are user lines; claude echoes each one when it
        // takes it, which tells cca where a steer went into the answer.
        "--input-format",
        "stream-json",
        "--replay-user-messages",
        // The MCP servers cca gives it and no others: one in the user's own configuration
        // (`claude mcp add --scope user`) would be started and offered to the search agent.
        "--strict-mcp-config",
    ]
    .into_iter()
    .map(Arg::plain)
    .collect();
    if engine.history == HistoryMode::Inline || request.kept {
        // cca is the memory: claude must not pile up session files of its own. (A structured
        // history's run keeps one, which `tidy` reads and removes.)
        args.push(Arg::plain("--no-session-persistence"));
    }
    if let Some(tools) = &engine.tools {
        // `--tools` takes several values; the `=` form keeps it from swallowing what follows.
        args.push(Arg::plain(format!("--tools={tools}")));
        // In -p mode a tool that needs permission is refused unless it is also allowed; the
        // tools of an MCP server the editor gave are allowed with it (`mcp__NAME`).
        let allowed: Vec<String> = (!tools.is_empty())
            .then(|| tools.clone())
            .into_iter()
            .chain(request.mcp_servers.iter().map(|s| format!("mcp__{}", s.name())))
            .collect();
        if !allowed.is_empty() {
            args.push(Arg::plain(format!("--allowedTools={}", allowed.join(","))));
        }
    }
    if !request.mcp_servers.is_empty() {
        // `--mcp-config` takes several values: the `=` form makes this one.
        let config = json!({ "mcpServers": super::mcp_servers(request.mcp_servers, mcp_server) });
        args.push(Arg::plain(format!("--mcp-config={config}")));
    }
    if let Some(model) = request.model {
        args.extend(super::model_args("--model", model)?);
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
            frame::inline(inline_system, request.live, &request.attachments, request.query)
        }
        HistoryMode::Structured => {
            // claude keeps this run's session (a fork of the history resumed), so that `tidy`
            // learns from it where claude put its environment notes; then it is removed.
            // Not from the question: an engine on standby is started with this history
            // before the question is known, and must be started as a cold start would be.
            let session_id = uuid_like("history", request.live.exchanges.len() as u64);
            let history = history_jsonl(&session_id, request, inline_system)?;
            if !history.is_empty() {
                args.push(Arg::plain("--resume"));
                args.push(Arg::File { name: "history.jsonl", contents: history });
                args.push(Arg::plain("--fork-session"));
            }
            request.newest(inline_system)?
        }
    };
    args.extend(engine.args.iter().map(Arg::plain));
    let mut env = Vec::new();
    if let Some(retries) = engine.retries {
        env.push(("CLAUDE_CODE_MAX_RETRIES".to_string(), Arg::plain(retries.to_string())));
    }
    let images = request.images.iter().map(|i| (*i).clone()).collect();
    let follow_up = frame::follow_up(&request.attachments, request.query);
    Ok(Invocation { program, args, env, stdin, images, follow_up, resume: None })
}

/// An MCP server as claude's `--mcp-config` describes it.
fn mcp_server(server: &super::McpServer) -> Value {
    use super::{McpServer, pairs};
    match server {
        McpServer::Stdio { command, args, env, .. } => {
            json!({ "command": command, "args": args, "env": pairs(env) })
        }
        McpServer::Http { url, headers, .. } => {
            json!({ "type": "http", "url": url, "headers": pairs(headers) })
        }
        McpServer::Sse { url, headers, .. } => {
            json!({ "type": "sse", "url": url, "headers": pairs(headers) })
        }
    }
}

/// One user message, as `--input-format stream-json` takes it: a JSON line, the text first,
/// then an image block per image (the Messages API's base64 source).
pub(crate) fn user_line(text: &str, images: &[Image]) -> String {
    let mut content = vec![json!({ "type": "text", "text": text })];
    content.extend(images.iter().map(|image| {
        json!({
            "type": "image",
            "source": { "type": "base64", "media_type": image.media_type, "data": image.base64() },
        })
    }));
    let line = json!({
        "type": "user",
        "message": { "role": "user", "content": content },
        "parent_tool_use_id": null,
    });
    format!("{line}\n")
}

/// A control request that makes claude do its start-up work before the first message arrives
/// (the Agent SDK sends it first): an engine on standby is sent it while it waits. Measured with
/// claude 2.1.329: a first message then takes 110 ms to reach the API, not 145 ms.
pub(crate) fn initialize_line() -> String {
    let line = json!({
        "type": "control_request",
        "request_id": "cca-initialize",
        "request": { "subtype": "initialize" },
    });
    format!("{line}\n")
}

/// Whether a line claude wrote answers [`initialize_line`]: it is done starting.
pub(crate) fn initialized(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line).is_ok_and(|v| {
        v["type"] == "control_response" && v["response"]["request_id"] == "cca-initialize"
    })
}

/// The live exchanges as claude's own session file: one JSON object per message, and claude's
/// notes after the question they followed when claude wrote them (see [`Notes`]: claude's
/// environment notes make claude add nothing after the newest question, so each request repeats
/// the previous one; docs/DESIGN.md, Framing, Prompt caching).
fn history_jsonl(
    session_id: &str,
    request: &Request,
    system: Option<&str>,
) -> std::io::Result<String> {
    let notes = Notes::read(request.notes);
    let mut out = String::new();
    let mut parent: Option<String> = None;
    let mut n = 0u64;
    let mut push = |mut line: Value| {
        n += 1;
        let uuid = uuid_like(session_id, n);
        line["sessionId"] = json!(session_id);
        line["uuid"] = json!(uuid);
        line["parentUuid"] = json!(parent);
        out.push_str(&line.to_string());
        out.push('\n');
        parent = Some(uuid);
    };
    let message = |role: &str, content: Value| {
        json!({
            "type": role,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": { "role": role, "content": content },
        })
    };
    for (i, exchange) in request.live.exchanges.iter().enumerate() {
        push(message("user", json!(request.user_message(i, system)?)));
        for note in notes.after(i) {
            push(note.clone());
        }
        let assistant = (request.stored)(&exchange.assistant)?;
        push(message("assistant", json!([{ "type": "text", "text": assistant }])));
    }
    Ok(out)
}

/// What claude reads as it starts: its memory files (`CLAUDE.md` and `CLAUDE.local.md` in this
/// folder and each above it, the user's and the managed ones) and its settings (the user's,
/// the project's, the managed ones).
fn reads_at_start(place: &super::StartPlace) -> Vec<PathBuf> {
    let mut paths = place.upward(&["CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md"]);
    paths.extend(
        [".claude/settings.json", ".claude/settings.local.json"].map(|f| place.folder.join(f)),
    );
    if let Some(home) = place.claude_home {
        paths.extend(["CLAUDE.md", "settings.json"].map(|f| home.join(f)));
    }
    let managed = std::path::Path::new("/etc/claude-code");
    paths.extend(["CLAUDE.md", "managed-settings.json"].map(|f| managed.join(f)));
    paths
}

/// Removes the session file claude kept of a structured-history run, and returns the notes to
/// keep when claude wrote new ones after the run's question (the one after `newest` live
/// exchanges): those replace any kept for that place or later.
fn tidy(left: &super::Leftovers) -> super::Tidied {
    super::Tidied { notes: take_session(left), ..Default::default() }
}

/// [`tidy`]'s work: the notes to keep, if any.
fn take_session(left: &super::Leftovers) -> Option<String> {
    // A UUID, as claude names its sessions: nothing read from its output may name another file.
    let id = left.engine_session;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    let root = left.claude_home?.join("projects");
    let name = format!("{id}.jsonl");
    let text = crate::store::take_engine_session_file(&root, &name)?;
    let found = notes_after_question(&text, left.newest);
    if found.is_empty() {
        return None;
    }
    Some(Notes::replaced_from(left.notes, left.newest, found))
}

/// The `attachment` lines claude's session file holds right after its question number
/// `question` (from 0), up to the next message. `prompt_snapshot` (claude's copy of its system
/// prompt) is left out: it never reaches the model.
fn notes_after_question(session: &str, question: usize) -> Vec<Value> {
    let lines = session.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let is_question = |v: &Value| {
        v["type"] == "user"
            && !v["message"]["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    };
    let mut questions = 0;
    let mut found = Vec::new();
    for line in lines {
        if is_question(&line) {
            questions += 1;
            if questions > question + 1 {
                break;
            }
        } else if questions == question + 1 {
            match line["type"].as_str() {
                Some("attachment") if line["attachment"]["type"] != "prompt_snapshot" => {
                    found.push(line)
                }
                Some("user" | "assistant") => break,
                _ => {}
            }
        }
    }
    found
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
pub(crate) struct Decoder {
    lines: LineBuffer,
    paragraphs: Paragraphs,
    /// The message the last text or tool call came from.
    message: Option<String>,
    /// Messages whose text arrived as deltas (their full copy must not be printed again).
    streamed: Vec<String>,
    tools: ToolCalls,
    result_seen: bool,
    /// A user message was taken already (the prompt): the next one starts a new answer.
    taken_any: bool,
    /// `total_cost_usd` of the last `result`: claude adds up the answers of one process.
    cost_so_far: f64,
    /// The text of an API error message, if claude reported one.
    api_error: Option<String>,
}

impl super::Decoder for Decoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        LineBuffer::feed_to(self, |d| &mut d.lines, chunk, Self::line, out);
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        LineBuffer::finish_to(self, |d| &mut d.lines, Self::line, out);
        self.tools.flush(out);
        if !self.result_seen
            && let Some(error) = self.api_error.take()
        {
            out.push(Output::Error(error));
        }
    }
}

impl Decoder {
    fn line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let Some(v) = json_line(line, out) else { return };
        match v["type"].as_str() {
            Some("stream_event") => self.stream_event(&v, out),
            Some("assistant") => self.assistant(&v, out),
            Some("user") if v["isReplay"].as_bool() == Some(true) => {
                // Messages sent together are taken together, one text block each.
                let blocks = v["message"]["content"]
                    .as_array()
                    .map_or(0, |blocks| blocks.iter().filter(|b| b["type"] == "text").count());
                if self.taken_any {
                    // A new answer starts: no paragraph break carried over from the last one.
                    self.paragraphs = Paragraphs::default();
                    self.tools.flush(out);
                }
                self.taken_any = true;
                out.push(Output::Taken(blocks.max(1)));
            }
            Some("user") => self.tool_results(&v, out),
            Some("result") => {
                self.result_seen = true;
                self.tools.flush(out);
                let usage = &v["usage"];
                // Anthropic's `input_tokens` leave out what the cache read and what it wrote:
                // all three are the input (as `cca import claude` counts it).
                let read = usage["cache_read_input_tokens"].as_u64();
                let written = usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                let input = usage["input_tokens"]
                    .as_u64()
                    .map(|input| input.saturating_add(read.unwrap_or(0)).saturating_add(written));
                out.push(Output::Usage(Usage {
                    input_tokens: input,
                    cached_tokens: read,
                    output_tokens: usage["output_tokens"].as_u64(),
                    // The total of the process so far (measured): this answer's share is what
                    // it added since the last `result`.
                    cost_usd: v["total_cost_usd"].as_f64().map(|total| {
                        let cost = crate::transcript::round_cost(total - self.cost_so_far);
                        self.cost_so_far = total;
                        cost
                    }),
                }));
                if let Some(status @ (401 | 403)) = v["api_error_status"].as_u64() {
                    let why = v["api_error_type"].as_str().unwrap_or("refused");
                    out.push(Output::Refused(format!("the API answered {status} ({why})")));
                }
                if v["is_error"].as_bool() == Some(true) {
                    let reason = v["result"]
                        .as_str()
                        .map(str::to_string)
                        .or(self.api_error.take())
                        .unwrap_or_else(|| format!("claude reported an error ({})", v["subtype"]));
                    out.push(Output::Error(reason));
                }
                out.push(Output::AnswerEnd);
            }
            // A refused key or login is retried like an outage, for minutes, to no end.
            Some("system")
                if v["subtype"] == "api_retry"
                    && matches!(v["error_status"].as_u64(), Some(401 | 403)) =>
            {
                let status = v["error_status"].as_u64().unwrap_or_default();
                let why = v["error"].as_str().unwrap_or("refused");
                out.push(Output::Refused(format!("the API answered {status} ({why})")))
            }
            Some("system") if v["subtype"] == "api_retry" => {
                out.push(Output::Retry(retry_note(&v)))
            }
            Some("system") if v["subtype"] == "init" => {
                if let Some(id) = v["session_id"].as_str() {
                    out.push(Output::Session(id.to_string()));
                }
                if let Some(model) = v["model"].as_str() {
                    out.push(Output::Model(model.to_string()));
                }
            }
            _ => {}
        }
    }

    fn stream_event(&mut self, v: &Value, out: &mut Vec<Output>) {
        let event = &v["event"];
        match event["type"].as_str() {
            Some("message_start") => {
                if let Some(id) = event["message"]["id"].as_str() {
                    self.streamed.push(id.to_string());
                    self.message(id, out);
                }
            }
            Some("content_block_delta") => {
                if event["delta"]["type"] == "text_delta"
                    && let Some(text) = event["delta"]["text"].as_str()
                {
                    self.paragraphs.text(text, out);
                }
            }
            _ => {}
        }
    }

    /// Output from message `id` follows: a new message starts a new paragraph, and by then the
    /// tool calls of the one before have all been answered.
    fn message(&mut self, id: &str, out: &mut Vec<Output>) {
        if self.message.as_deref() != Some(id) {
            self.message = Some(id.to_string());
            self.tools.flush(out);
            self.paragraphs.new_message();
        }
    }

    fn assistant(&mut self, v: &Value, out: &mut Vec<Output>) {
        let message = &v["message"];
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        if v["error"].is_string() || v["is_api_error_message"].as_bool() == Some(true) {
            let text: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
            self.api_error = Some(text.join(" "));
            return;
        }
        let id = message["id"].as_str().unwrap_or("");
        let streamed = self.streamed.iter().any(|s| s == id);
        self.message(id, out);
        for block in &blocks {
            match block["type"].as_str() {
                Some("tool_use") => {
                    let name = block["name"].as_str().unwrap_or("tool");
                    let call = ToolCall::new(name, &block["input"]);
                    self.tools.started(block["id"].as_str().unwrap_or(""), call, out);
                }
                // Text that did not arrive as deltas (no partial messages): show it now.
                Some("text") if !streamed => {
                    if let Some(text) = block["text"].as_str() {
                        self.paragraphs.text(text, out);
                    }
                }
                _ => {}
            }
        }
    }

    /// claude's answers to the model's tool calls: what each returned, or that it was refused.
    fn tool_results(&mut self, v: &Value, out: &mut Vec<Output>) {
        let blocks = v["message"]["content"].as_array().cloned().unwrap_or_default();
        for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
            let text = result_text(&block["content"]);
            let id = block["tool_use_id"].as_str().unwrap_or("");
            self.tools.settled(
                id,
                |call| {
                    if block["is_error"].as_bool() == Some(true) {
                        call.status =
                            if refused(&text) { ToolStatus::Refused } else { ToolStatus::Failed };
                        call.reason = Some(error_reason(&text));
                    } else {
                        call.sources = links(&text);
                    }
                },
                out,
            );
        }
    }
}

/// A tool result's text: a string, or text blocks.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

/// Whether claude declined to run the tool, rather than ran it and failed: its words for a tool
/// it does not offer, a permission not granted, or an input it would not take.
fn refused(text: &str) -> bool {
    ["No such tool available", "requested permissions", "haven't granted", "InputValidationError"]
        .iter()
        .any(|words| text.contains(words))
}

/// `<tool_use_error>Error: No such tool available: Bash. ...</tool_use_error>`, in a few words.
fn error_reason(text: &str) -> String {
    let text = text.replace("<tool_use_error>", "").replace("</tool_use_error>", "");
    let text = text.trim();
    crate::transcript::one_line(text.strip_prefix("Error: ").unwrap_or(text), 200)
}

/// The sources in claude's WebSearch result: `Web search results for query: "Q"`, then a
/// `Links: [{"title":...,"url":...},...]` line per search it ran, then its summary.
fn links(text: &str) -> Vec<Source> {
    let mut found: Vec<Source> = Vec::new();
    for list in text.lines().filter_map(|l| l.strip_prefix("Links: ")) {
        let Ok(Value::Array(items)) = serde_json::from_str::<Value>(list) else { continue };
        for item in items {
            let (Some(title), Some(url)) = (item["title"].as_str(), item["url"].as_str()) else {
                continue;
            };
            if !found.iter().any(|s| s.url == url) {
                found.push(Source { title: title.to_string(), url: url.to_string() });
            }
        }
    }
    found
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

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(sample: &str) -> Vec<Output> {
        crate::engine::decoded(Decoder::default(), sample, 37)
    }

    use crate::engine::answer_text as text;

    /// Measured with claude-code 2.1.329 (`--replay-user-messages`): the prompt is echoed when
    /// taken; two steers that waited together come back as one message of two text blocks, and
    /// start a new answer with its own `result`.
    #[test]
    fn echoed_user_messages_are_taken_steers() {
        let replay = |texts: &[&str]| {
            let blocks: Vec<Value> =
                texts.iter().map(|t| json!({"type": "text", "text": t})).collect();
            json!({"type": "user", "message": {"role": "user", "content": blocks}, "isReplay": true})
        };
        let delta = |text: &str| json!({"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}});
        let start = |id: &str| json!({"type": "stream_event", "event": {"type": "message_start", "message": {"id": id}}});
        let result = |total: f64| json!({"type": "result", "is_error": false, "result": "x", "usage": {}, "total_cost_usd": total});
        let lines = [
            replay(&["the prompt"]),
            start("m1"),
            delta("one"),
            result(0.25),
            replay(&["steer one\n", "steer two"]),
            start("m2"),
            delta("two"),
            result(0.75),
        ];
        let sample: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let out = decode(&sample);
        let kept: Vec<&Output> = out
            .iter()
            .filter(|o| matches!(o, Output::Text(_) | Output::Taken(_) | Output::AnswerEnd))
            .collect();
        assert_eq!(
            kept,
            [
                &Output::Taken(1),
                &Output::Text("one".into()),
                &Output::AnswerEnd,
                &Output::Taken(2),
                // No paragraph break carried into the next answer.
                &Output::Text("two".into()),
                &Output::AnswerEnd,
            ]
        );
        let costs: Vec<Option<f64>> = out
            .iter()
            .filter_map(|o| if let Output::Usage(u) = o { Some(u.cost_usd) } else { None })
            .collect();
        assert_eq!(costs, [Some(0.25), Some(0.5)], "each answer costs what it added");
    }

    #[test]
    fn an_answer_s_cost_is_kept_rounded() {
        // 0.0002 - 0.00012 is 0.00007999999999999999 in binary floating point.
        let result = |total: f64| json!({"type": "result", "is_error": false, "result": "x", "usage": {}, "total_cost_usd": total});
        let sample = format!("{}\n{}\n", result(0.00012), result(0.0002));
        let costs: Vec<Option<f64>> = decode(&sample)
            .iter()
            .filter_map(|o| if let Output::Usage(u) = o { Some(u.cost_usd) } else { None })
            .collect();
        assert_eq!(costs, [Some(0.00012), Some(0.00008)]);
    }

    #[test]
    fn the_prompt_is_one_stream_json_user_line() {
        let line = user_line("a \"quoted\"\nquestion", &[]);
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1, "{line}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["content"][0]["text"], "a \"quoted\"\nquestion");
    }

    #[test]
    fn images_go_beside_the_text_as_base64_blocks() {
        let image = Image::new(b"GIF89a\x01\x00".to_vec()).unwrap();
        let v: Value = serde_json::from_str(&user_line("what is this?", &[image])).unwrap();
        let content = &v["message"]["content"];
        assert_eq!(content[0], json!({"type": "text", "text": "what is this?"}));
        assert_eq!(
            content[1],
            json!({"type": "image",
                   "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGODlhAQA="}})
        );
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
    fn the_input_counts_what_the_cache_read_and_wrote_too() {
        let line = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":3,"cache_creation_input_tokens":20,"cache_read_input_tokens":100,"output_tokens":4}}"#;
        let out = decode(&format!("{line}\n"));
        let usage = out.iter().find_map(|o| if let Output::Usage(u) = o { Some(u) } else { None });
        let usage = usage.expect("the result line carries usage");
        assert_eq!((usage.input_tokens, usage.cached_tokens), (Some(123), Some(100)));
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

    /// Texts run together and tool calls as their lines, in the order they came out.
    fn flow(out: &[Output]) -> Vec<String> {
        let mut flow: Vec<String> = Vec::new();
        for o in out {
            match o {
                Output::Text(t) => match flow.last_mut() {
                    Some(last) if !last.starts_with("> ") => last.push_str(t),
                    _ => flow.push(t.clone()),
                },
                Output::Tool(call) => flow.push(format!("> {}", call.line())),
                _ => {}
            }
        }
        flow
    }

    fn tools(out: &[Output]) -> Vec<&ToolCall> {
        out.iter().filter_map(|o| if let Output::Tool(t) = o { Some(t) } else { None }).collect()
    }

    #[test]
    fn a_turn_with_searches_and_a_refused_tool() {
        // Recorded from claude 2.1.329 through the loopback server's scripted tool flow: text and
        // a WebSearch; text and a second WebSearch; a Bash call claude refuses; then the answer
        // in three text blocks, the middle one cited.
        let out = decode(include_str!("../../tests/fixtures/claude-stream-json-tools.jsonl"));
        assert_eq!(
            flow(&out),
            [
                "Let me search.",
                "> WebSearch: rust 1.89 file locking",
                "\n\nOne more search.",
                "> WebSearch: file locking on windows",
                "> Bash (refused): ls -la",
                "\n\nAccording to the results, Rust 1.89 stabilised File::lock. Sources: [Guide](https://guide.example.org/x)",
            ]
        );
        let tools = tools(&out);
        assert_eq!(
            tools[0].sources,
            [
                Source {
                    title: "rust 1.89 file locking: the guide".into(),
                    url: "https://guide.example.org/rust-1-89-file-locking".into()
                },
                Source {
                    title: "rust 1.89 file locking: the notes".into(),
                    url: "https://notes.example.org/rust-1-89-file-locking".into()
                },
            ]
        );
        assert_eq!(tools[1].sources.len(), 2);
        assert_eq!((tools[0].status, tools[0].reason.as_deref()), (ToolStatus::Ran, None));
        assert_eq!(tools[2].status, ToolStatus::Refused);
        let reason = tools[2].reason.as_deref().unwrap();
        assert!(reason.starts_with("No such tool available: Bash."), "{reason}");
        assert!(!out.iter().any(|o| matches!(o, Output::Error(_))));
    }

    fn lines(values: &[Value]) -> String {
        values.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn parallel_calls_come_out_in_the_order_they_were_made() {
        let sample = lines(&[
            json!({"type":"assistant","message":{"id":"m1","content":[
                {"type":"tool_use","id":"a","name":"WebSearch","input":{"query":"first"}},
                {"type":"tool_use","id":"b","name":"WebFetch","input":{"url":"https://x.example/","prompt":"p"}}]}}),
            json!({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"page"}]}]}}),
            json!({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"Web search results for query: \"first\"\n\nLinks: [{\"title\":\"T\",\"url\":\"https://t.example/\"}]\n\nsummary"}]}}),
            json!({"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"Done."}]}}),
            json!({"type":"result","is_error":false,"result":"Done.","usage":{}}),
        ]);
        let out = decode(&sample);
        assert_eq!(flow(&out), ["> WebSearch: first", "> WebFetch: https://x.example/", "Done."]);
        assert_eq!(tools(&out)[0].sources[0].url, "https://t.example/");
    }

    #[test]
    fn blocks_of_one_message_are_one_text_and_messages_get_a_break() {
        // Without partial messages each block is its own `assistant` event of the same message.
        let sample = lines(&[
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"First, "}]}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"cited"}]}}),
            json!({"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"Second.\n"}]}}),
            json!({"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":"Third."}]}}),
        ]);
        assert_eq!(text(&decode(&sample)), "First, cited\n\nSecond.\n\nThird.");
    }

    #[test]
    fn its_answer_to_initialize_says_it_is_started() {
        let asked: Value = serde_json::from_str(&initialize_line()).unwrap();
        assert_eq!(asked["request"]["subtype"], "initialize");
        // As claude 2.1.329 answers it (its commands, agents and models elided).
        let answer = r#"{"type":"control_response","response":{"subtype":"success","request_id":"cca-initialize","response":{"commands":[]}}}"#;
        assert!(initialized(answer.as_bytes()));
        assert!(!initialized(br#"{"type":"control_response","response":{"request_id":"other"}}"#));
        assert!(!initialized(br#"{"type":"system","subtype":"init"}"#));
        assert!(!initialized(b"not json"));
    }

    #[test]
    fn a_call_without_a_result_is_kept_as_failed() {
        let sample = lines(&[
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"a","name":"WebSearch","input":{"query":"q"}}]}}),
            json!({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":"Search API unavailable"}]}}),
            json!({"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"b","name":"WebSearch","input":{"query":"r"}}]}}),
        ]);
        let out = decode(&sample);
        let tools = tools(&out);
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].status, ToolStatus::Failed);
        assert_eq!(tools[0].reason.as_deref(), Some("Search API unavailable"));
        assert_eq!(tools[1].status, ToolStatus::Failed);
        assert!(tools[1].reason.as_deref().unwrap().contains("before the tool gave a result"));
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
            kept: false,
            mcp_servers: &[],
            system: "sys",
            live: &live,
            stored: &stored,
            attachments: Vec::new(),
            images: Vec::new(),
            image_dir: std::path::Path::new("/nowhere"),
            query: "q2",
            model: None,
            notes: None,
        };
        let text = history_jsonl("sid", &request, None).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "user");
        assert_eq!(lines[0]["message"]["content"], "q1");
        assert_eq!(lines[1]["message"]["content"][0]["text"], "a1");
        assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
        assert!(lines[0]["timestamp"].is_string());
        // Kept notes go after the question they followed, chained in; others are not sent.
        let note = json!({"type": "attachment", "attachment": {"type": "date", "date": "d"}});
        let kept = json!([{"after": 0, "lines": [note]}, {"after": 5, "lines": [note]}]);
        let kept = kept.to_string();
        let request = Request { notes: Some(&kept), ..request };
        let text = history_jsonl("sid", &request, None).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "attachment", "assistant"]);
        assert_eq!(lines[1]["attachment"], note["attachment"]);
        assert_eq!(lines[1]["sessionId"], "sid");
        assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
        assert_eq!(lines[2]["parentUuid"], lines[1]["uuid"]);
    }

    use crate::engine::Leftovers;
    use std::path::Path;

    /// The lines of a session file as claude 2.1.329 writes them (abridged).
    fn session_file(lines: &[Value]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn notes_are_the_attachments_claude_wrote_after_the_run_s_question() {
        let user =
            |text: &str| json!({"type": "user", "message": {"role": "user", "content": text}});
        let note = |kind: &str| json!({"type": "attachment", "attachment": {"type": kind}});
        let file = session_file(&[
            json!({"type": "queue-operation"}),
            user("q1"),
            note("environment"),
            json!({"type": "assistant", "message": {"content": []}}),
            user("q2"),
            note("environment"),
            note("model"),
            note("prompt_snapshot"),
            json!({"type": "user", "message": {"content": [{"type": "tool_result"}]}}),
            note("late"),
            json!({"type": "assistant", "message": {"content": []}}),
        ]);
        let kinds = |found: Vec<Value>| -> Vec<String> {
            found.iter().map(|n| n["attachment"]["type"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(kinds(notes_after_question(&file, 0)), ["environment"]);
        assert_eq!(kinds(notes_after_question(&file, 1)), ["environment", "model"]);
        assert!(notes_after_question(&file, 2).is_empty());
    }

    #[test]
    fn tidy_takes_claude_s_file_and_keeps_new_notes_in_their_place() {
        let home = tempfile::tempdir().unwrap();
        let folder = home.path().join("projects/-some-folder");
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join("abc.jsonl");
        let user = json!({"type": "user", "message": {"role": "user", "content": "q"}});
        let note = json!({"type": "attachment", "attachment": {"type": "date", "date": "new"}});
        let old = json!([{"after": 0, "lines": [{"old": 0}]}, {"after": 2, "lines": [{"old": 2}]}]);
        let old = old.to_string();
        fn left<'a>(home: &'a Path, notes: Option<&'a str>, newest: usize) -> Leftovers<'a> {
            let usage = &crate::engine::Usage {
                input_tokens: None,
                cached_tokens: None,
                output_tokens: None,
                cost_usd: None,
            };
            Leftovers {
                home: None,
                claude_home: Some(home),
                engine_session: "abc",
                notes,
                newest,
                usage,
            }
        }
        let home_dir = home.path();
        // Notes after the run's question (the second): they replace those kept from there on.
        std::fs::write(&file, session_file(&[user.clone(), user.clone(), note.clone()])).unwrap();
        let kept = take_session(&left(home_dir, Some(&old), 1)).expect("new notes");
        assert!(!file.exists(), "claude's copy is removed");
        assert_eq!(
            serde_json::from_str::<Value>(&kept).unwrap(),
            json!([{"after": 0, "lines": [{"old": 0}]}, {"after": 1, "lines": [note]}])
        );
        // None written after the question: the kept notes stand.
        std::fs::write(&file, session_file(&[user.clone(), note.clone(), user])).unwrap();
        assert_eq!(take_session(&left(home_dir, Some(&old), 1)), None);
        assert!(!file.exists());
        // No file (inline history runs keep none): nothing to do.
        assert_eq!(take_session(&left(home_dir, None, 0)), None);
        // An id that is not a UUID names no file.
        std::fs::write(folder.join("x.jsonl"), session_file(std::slice::from_ref(&note))).unwrap();
        let odd = Leftovers { engine_session: "../-some-folder/x", ..left(home_dir, None, 0) };
        assert_eq!(take_session(&odd), None);
        assert!(folder.join("x.jsonl").exists());
    }
}
