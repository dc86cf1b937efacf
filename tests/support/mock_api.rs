//! A loopback test server speaking the two APIs the real engines call: Anthropic Messages with
//! server-sent events (`POST /v1/messages`) and Gemini (`POST /v1beta/models/M:streamGenerateContent
//! ?alt=sse`, and `:generateContent` for gemini's model router), and the OpenAI Responses API
//! codex calls (`POST /v1/responses`: answers, web searches and commands).
//!
//! It answers `ECHO: ` plus the last user text (the `<user_query>` part of it, when cca framed
//! it), records every request, and can be told to fail with an HTTP status, to split the answer
//! into chunks with delays between them, or to answer nothing.
//!
//! It can also play a scripted turn with tool calls ([`Behavior::script`]), in the request flows
//! measured from the real programs (DESIGN.md, "Tool calls"): the model asks for a tool; the
//! engine runs it (claude's WebSearch and gemini's google_web_search each make a search request
//! of their own, answered here with sources the way the APIs answer); the engine sends the
//! result back, and the model goes on with the next message of the script.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub body: Value,
}

/// How to answer: set on the server, applied to every request until changed.
#[derive(Debug, Clone, Default)]
pub struct Behavior {
    /// Fail with this HTTP status instead of answering.
    pub status: Option<u16>,
    /// Split the answer into this many chunks (default 3).
    pub chunks: Option<usize>,
    /// Wait this long before each chunk after the first.
    pub delay: Duration,
    /// Answer this text instead of the echo.
    pub answer: Option<String>,
    /// Before the last chunk of an answer (or a scripted message's first tool call, or its end
    /// when it calls none), wait until this file exists: a test holds an answer open until it
    /// says so. (claude starts a tool as soon as its call is streamed, before the message ends.)
    pub hold: Option<std::path::PathBuf>,
    /// The model's messages in a turn with tools: the first answers the question, each next one
    /// answers the tool results the engine sent back. Empty: the echo.
    pub script: Vec<Vec<Block>>,
}

/// One piece of a scripted model message.
#[derive(Debug, Clone)]
pub enum Block {
    /// A text block (claude) or part (gemini).
    Text(String),
    /// A text block carrying a citation of this URL (claude streams it with `citations_delta`;
    /// gemini has no citations in its stream, so there it is plain text).
    Cited { text: String, url: String, title: String },
    /// A tool call: claude's `tool_use` (input streamed as `input_json_delta`), gemini's
    /// `functionCall`.
    Tool { name: String, input: Value },
}

impl Block {
    pub fn text(text: &str) -> Block {
        Block::Text(text.to_string())
    }

    pub fn cited(text: &str, url: &str, title: &str) -> Block {
        Block::Cited { text: text.into(), url: url.into(), title: title.into() }
    }

    pub fn tool(name: &str, input: Value) -> Block {
        Block::Tool { name: name.to_string(), input }
    }
}

/// The sources the search request for `query` returns: two, title and URL derived from it.
pub fn sources(query: &str) -> Vec<(String, String)> {
    let slug: String = query
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    ["guide", "notes"]
        .iter()
        .map(|kind| (format!("{query}: the {kind}"), format!("https://{kind}.example.org/{slug}")))
        .collect()
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    behavior: Behavior,
    /// When each answer chunk was written, per streamed answer.
    chunk_times: Vec<Vec<Instant>>,
}

pub struct MockApi {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl MockApi {
    pub fn start() -> MockApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        MockApi { port, state }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn set(&self, behavior: Behavior) {
        self.state.lock().unwrap().behavior = behavior;
    }

    /// The requests that asked the model for an answer (not gemini's model routing, not the
    /// engines' own search requests).
    pub fn turns(&self) -> Vec<Received> {
        self.received(|r| {
            !is_search(&r.body)
                && (r.path.contains("/v1/messages")
                    || r.path.contains(":streamGenerateContent")
                    || r.path.contains("/v1/responses"))
        })
    }

    /// The bodies of [`MockApi::turns`], a request the engine sent again with the same
    /// conversation (its own retry, say of a stream that came too slowly on a loaded machine,
    /// whose settings may differ) counted once, as the last of them: what each answer asked,
    /// for the tests that compare one request with the next.
    pub fn answer_requests(&self) -> Vec<Value> {
        let conversation = |body: &Value| {
            ["contents", "messages", "input"].iter().find_map(|k| body.get(*k).cloned())
        };
        let mut bodies: Vec<Value> = Vec::new();
        for turn in self.turns() {
            let again = bodies.last().is_some_and(|last| {
                conversation(last).is_some() && conversation(last) == conversation(&turn.body)
            });
            if again {
                bodies.pop();
            }
            bodies.push(turn.body);
        }
        bodies
    }

    /// The queries of the engines' own search requests (claude's WebSearch, gemini's
    /// google_web_search), in order.
    pub fn searches(&self) -> Vec<String> {
        let found = self.received(|r| is_search(&r.body));
        found.iter().map(|r| search_query(&r.path, &r.body)).collect()
    }

    fn received(&self, keep: impl Fn(&Received) -> bool) -> Vec<Received> {
        self.state.lock().unwrap().received.iter().filter(|r| keep(r)).cloned().collect()
    }

    pub fn chunk_times(&self) -> Vec<Vec<Instant>> {
        self.state.lock().unwrap().chunk_times.clone()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (behavior, request) = {
        let mut s = state.lock().unwrap();
        s.received.push(Received { path: path.clone(), body: body.clone() });
        (s.behavior.clone(), s.received.len())
    };
    let mut out = stream;
    if behavior.status.is_none() && is_search(&body) {
        let query = search_query(&path, &body);
        return if path.contains("/v1/messages") {
            claude_search(&mut out, &query)
        } else {
            gemini_search(&mut out, &query)
        };
    }
    if path.contains("/v1/responses") {
        return responses(&mut out, &body, &behavior);
    }
    if path.contains(":generateContent") {
        // gemini's router asks which model fits the request: any valid answer will do.
        let text = json!({"complexity_reasoning": "simple", "complexity_score": 10}).to_string();
        let reply = json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}]});
        return respond(&mut out, 200, "application/json", &reply.to_string());
    }
    if let Some(status) = behavior.status {
        let message = format!("mock forced HTTP {status}");
        let reply = if path.contains("/v1/messages") {
            json!({"type": "error", "error": {"type": if status == 401 { "authentication_error" } else { "api_error" }, "message": message}})
        } else {
            json!({"error": {"code": status, "message": message, "status": if status == 401 { "UNAUTHENTICATED" } else { "INTERNAL" }}})
        };
        return respond(&mut out, status, "application/json", &reply.to_string());
    }
    if !behavior.script.is_empty() {
        let step = model_messages_since_question(&path, &body);
        let message = behavior.script.get(step).or(behavior.script.last()).unwrap();
        return if path.contains("/v1/messages") {
            claude_message(&mut out, message, step, request, &behavior)
        } else {
            gemini_message(&mut out, message)
        };
    }
    let answer = behavior
        .answer
        .clone()
        .unwrap_or_else(|| format!("ECHO: {}", last_user_text(&path, &body)));
    let chunks = split(&answer, behavior.chunks.unwrap_or(3));
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )?;
    let mut times = Vec::new();
    if path.contains("/v1/messages") {
        let event = |out: &mut TcpStream, name: &str, data: Value| -> std::io::Result<()> {
            write!(out, "event: {name}\ndata: {data}\n\n")?;
            out.flush()
        };
        event(
            &mut out,
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message", "role": "assistant", "model": "claude-mock", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        )?;
        event(
            &mut out,
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        )?;
        for (i, chunk) in chunks.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(behavior.delay);
            }
            if i + 1 == chunks.len() {
                hold(&behavior);
            }
            event(
                &mut out,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": chunk}}),
            )?;
            times.push(Instant::now());
        }
        event(&mut out, "content_block_stop", json!({"type": "content_block_stop", "index": 0}))?;
        event(
            &mut out,
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": chunks.len()}}),
        )?;
        event(&mut out, "message_stop", json!({"type": "message_stop"}))?;
    } else {
        let last = chunks.len().saturating_sub(1);
        for (i, chunk) in chunks.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(behavior.delay);
            }
            if i == last {
                hold(&behavior);
            }
            let mut data = json!({"candidates": [{"content": {"parts": [{"text": chunk}], "role": "model"}, "index": 0}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": i + 1, "totalTokenCount": 11 + i}});
            if i == last {
                data["candidates"][0]["finishReason"] = json!("STOP");
            }
            write!(out, "data: {data}\r\n\r\n")?;
            out.flush()?;
            times.push(Instant::now());
        }
    }
    state.lock().unwrap().chunk_times.push(times);
    Ok(())
}

fn respond(out: &mut TcpStream, status: u16, kind: &str, body: &str) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status} Mock\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

/// The answer in `n` pieces (fewer if it is short); never an empty piece.
fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The text of the last user message; when cca framed it, just the `<user_query>` part.
pub fn last_user_text(path: &str, body: &Value) -> String {
    let text = if path.contains("/v1/messages") {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| own_text(&m["content"]))
            .unwrap_or_default()
    } else {
        let contents = body["contents"].as_array().cloned().unwrap_or_default();
        contents
            .iter()
            .rev()
            .find(|c| {
                c["role"] == "user"
                    && c["parts"]
                        .as_array()
                        .is_some_and(|p| p.iter().any(|p| p["text"].is_string()))
            })
            .map(|c| content_text(&c["parts"]))
            .unwrap_or_default()
    };
    match (text.rfind("<user_query>\n"), text.rfind("\n</user_query>")) {
        (Some(start), Some(end)) if end >= start + 13 => text[start + 13..end].to_string(),
        _ => text,
    }
}

/// The text of a user message the user wrote: the context an engine adds to a session's first
/// message (claude's `<system-reminder>`s, gemini's `<session_context>`), as parts of their own
/// or in front of the text, left out.
pub fn own_text(content: &Value) -> String {
    const ADDED: [&str; 2] = ["system-reminder", "session_context"];
    let added = |t: &str| ADDED.iter().any(|tag| t.trim_start().starts_with(&format!("<{tag}>")));
    let mut text = match content {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .filter(|t| !added(t))
            .collect::<Vec<_>>()
            .join(""),
        other => content_text(other),
    };
    while let Some(tag) =
        ADDED.iter().find(|tag| text.trim_start().starts_with(&format!("<{tag}>")))
    {
        let close = format!("</{tag}>");
        let Some(end) = text.find(&close) else { break };
        text = text[end + close.len()..].trim_start_matches('\n').to_string();
    }
    text
}

/// All text in a message's content (a string, or a list of parts or blocks).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")
        }
        _ => String::new(),
    }
}

/// Whether a request is an engine's own web search: claude's carries the `web_search_20250305`
/// server tool, gemini's the `googleSearch` tool.
fn is_search(body: &Value) -> bool {
    body["tools"].as_array().into_iter().flatten().any(|t| {
        t["type"].as_str().is_some_and(|k| k.starts_with("web_search_"))
            || t["googleSearch"].is_object()
    })
}

/// The query of a search request: claude asks `Perform a web search for the query: Q`; gemini
/// sends the bare query.
fn search_query(path: &str, body: &Value) -> String {
    let text = last_user_text(path, body);
    let text = text.trim();
    text.strip_prefix("Perform a web search for the query: ").unwrap_or(text).to_string()
}

/// How many model messages the request holds after the last question (a user message that is
/// not a tool result): the step of the script to answer with.
fn model_messages_since_question(path: &str, body: &Value) -> usize {
    let (list, items, model, is_result): (&str, &str, &str, fn(&Value) -> bool) =
        if path.contains("/v1/messages") {
            ("messages", "content", "assistant", |b| b["type"] == "tool_result")
        } else {
            ("contents", "parts", "model", |p| p["functionResponse"].is_object())
        };
    let messages = body[list].as_array().cloned().unwrap_or_default();
    let question = messages.iter().rposition(|m| {
        m["role"] == "user" && !m[items].as_array().is_some_and(|parts| parts.iter().any(is_result))
    });
    let after = question.map_or(0, |q| q + 1);
    messages[after..].iter().filter(|m| m["role"] == model).count()
}

fn sse_header(out: &mut TcpStream) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )
}

fn event(out: &mut TcpStream, data: Value) -> std::io::Result<()> {
    let name = data["type"].as_str().unwrap_or("message").to_string();
    write!(out, "event: {name}\ndata: {data}\n\n")?;
    out.flush()
}

fn message_start(out: &mut TcpStream, id: &str) -> std::io::Result<()> {
    event(
        out,
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": "claude-mock", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )
}

fn message_end(out: &mut TcpStream, stop: &str, usage: Value) -> std::io::Result<()> {
    event(
        out,
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": usage}),
    )?;
    event(out, json!({"type": "message_stop"}))
}

/// Streams a JSON input in two pieces, as the API does (`input_json_delta`).
fn input_deltas(out: &mut TcpStream, index: usize, input: &Value) -> std::io::Result<()> {
    let json = input.to_string();
    let cut = json.char_indices().nth(json.chars().count() / 2).map_or(0, |(i, _)| i);
    for part in [&json[..cut], &json[cut..]] {
        event(
            out,
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}),
        )?;
    }
    Ok(())
}

/// A text block, in two deltas; with a citation first (`citations_delta`) when it is cited.
fn text_block(
    out: &mut TcpStream,
    index: usize,
    text: &str,
    citation: Option<Value>,
) -> std::io::Result<()> {
    let mut start = json!({"type": "text", "text": ""});
    if citation.is_some() {
        start["citations"] = json!([]);
    }
    event(out, json!({"type": "content_block_start", "index": index, "content_block": start}))?;
    if let Some(citation) = citation {
        event(
            out,
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "citations_delta", "citation": citation}}),
        )?;
    }
    for part in split(text, 2) {
        event(
            out,
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": part}}),
        )?;
    }
    event(out, json!({"type": "content_block_stop", "index": index}))
}

/// One scripted message of the model, as the Messages API streams it. Its tool calls' ids
/// carry the number of the request, unique in the conversation as the API's are: claude drops a
/// tool call whose id it has already seen (the call and its result become `(no content)`), and
/// the script, finding no model message after the question, would start over, without end.
fn claude_message(
    out: &mut TcpStream,
    message: &[Block],
    step: usize,
    request: usize,
    behavior: &Behavior,
) -> std::io::Result<()> {
    sse_header(out)?;
    message_start(out, &format!("msg_mock_step{step}"))?;
    let mut stop = "end_turn";
    for (index, block) in message.iter().enumerate() {
        if matches!(block, Block::Tool { .. }) && stop != "tool_use" {
            hold(behavior);
        }
        match block {
            Block::Text(text) => text_block(out, index, text, None)?,
            Block::Cited { text, url, title } => {
                let citation = json!({"type": "web_search_result_location", "cited_text": text, "url": url, "title": title, "encrypted_index": "bW9jaw=="});
                text_block(out, index, text, Some(citation))?;
            }
            Block::Tool { name, input } => {
                stop = "tool_use";
                event(
                    out,
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_mock_{request}_{index}"), "name": name, "input": {}}}),
                )?;
                input_deltas(out, index, input)?;
                event(out, json!({"type": "content_block_stop", "index": index}))?;
            }
        }
    }
    if stop != "tool_use" {
        hold(behavior);
    }
    message_end(out, stop, json!({"output_tokens": 5}))
}

/// Waits for the file `hold` names, if any (at most a minute).
fn hold(behavior: &Behavior) {
    if let Some(path) = &behavior.hold {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !path.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// claude's own search request, answered as the API answers a `web_search` server tool: the
/// search it ran, the results it found, and text citing them.
fn claude_search(out: &mut TcpStream, query: &str) -> std::io::Result<()> {
    let found = sources(query);
    sse_header(out)?;
    message_start(out, "msg_mock_search")?;
    event(
        out,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_mock", "name": "web_search", "input": {}}}),
    )?;
    input_deltas(out, 0, &json!({"query": query}))?;
    event(out, json!({"type": "content_block_stop", "index": 0}))?;
    let results: Vec<Value> = found
        .iter()
        .map(|(title, url)| json!({"type": "web_search_result", "title": title, "url": url, "encrypted_content": "bW9jaw==", "page_age": "November 20, 2026"}))
        .collect();
    event(
        out,
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_mock", "content": results}}),
    )?;
    event(out, json!({"type": "content_block_stop", "index": 1}))?;
    text_block(out, 2, "Here is what the search found: ", None)?;
    let (title, url) = &found[0];
    let cited = format!("{title} answers it.");
    let citation = json!({"type": "web_search_result_location", "cited_text": cited, "url": url, "title": title, "encrypted_index": "bW9jaw=="});
    text_block(out, 3, &cited, Some(citation))?;
    message_end(
        out,
        "end_turn",
        json!({"output_tokens": 20, "server_tool_use": {"web_search_requests": 1}}),
    )
}

/// One scripted message of the model, as gemini's stream answers it: one chunk per part.
fn gemini_message(out: &mut TcpStream, message: &[Block]) -> std::io::Result<()> {
    sse_header(out)?;
    let last = message.len().saturating_sub(1);
    for (i, block) in message.iter().enumerate() {
        let part = match block {
            Block::Text(text) | Block::Cited { text, .. } => json!({"text": text}),
            Block::Tool { name, input } => json!({"functionCall": {"name": name, "args": input}}),
        };
        let mut data = json!({"candidates": [{"content": {"parts": [part], "role": "model"}, "index": 0}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": i + 1, "totalTokenCount": 11 + i}});
        if i == last {
            data["candidates"][0]["finishReason"] = json!("STOP");
        }
        write!(out, "data: {data}\r\n\r\n")?;
        out.flush()?;
    }
    Ok(())
}

/// gemini's own search request (`tools: [{googleSearch: {}}]`), answered as the API answers
/// it: text, with `groundingMetadata` naming the sources and the part of the text each supports.
fn gemini_search(out: &mut TcpStream, query: &str) -> std::io::Result<()> {
    let found = sources(query);
    let text = format!("Search summary for {query}.");
    let chunks: Vec<Value> =
        found.iter().map(|(title, url)| json!({"web": {"uri": url, "title": title}})).collect();
    let reply = json!({"candidates": [{
        "content": {"parts": [{"text": text}], "role": "model"},
        "finishReason": "STOP",
        "index": 0,
        "groundingMetadata": {
            "webSearchQueries": [query],
            "groundingChunks": chunks,
            "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": text.len(), "text": text}, "groundingChunkIndices": [0, 1]}],
        },
    }], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}});
    respond(out, 200, "application/json", &reply.to_string())
}

/// The OpenAI Responses API as codex calls it (`POST /v1/responses`, streamed): the answer (or
/// `ECHO: ` and the last user text, its `<user_query>` when cca framed it) as one message, with
/// usage; or the error of [`Behavior::status`]; or a step of [`Behavior::script`], where a tool
/// named `web_search` is the API's own search and any other a function call codex runs
/// (`exec_command` with `{"cmd": ...}`).
fn responses(out: &mut TcpStream, body: &Value, behavior: &Behavior) -> std::io::Result<()> {
    if let Some(status) = behavior.status {
        let message = format!("mock forced HTTP {status}");
        let reply =
            json!({"error": {"message": message, "type": "invalid_request_error", "code": null}});
        return respond(out, status, "application/json", &reply.to_string());
    }
    let last_user = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["role"] == "user")
        .filter_map(|i| i["content"].as_array())
        .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect::<String>())
        // codex's own context (`<environment_context>`) is not a question; cca's framing is.
        .rfind(|t| !t.trim_start().starts_with('<') || t.contains("<user_query>"))
        .unwrap_or_default();
    let last_user = match (last_user.rfind("<user_query>\n"), last_user.rfind("\n</user_query>")) {
        (Some(start), Some(end)) if end >= start + 13 => last_user[start + 13..end].to_string(),
        _ => last_user,
    };
    let text = behavior.answer.clone().unwrap_or_else(|| format!("ECHO: {last_user}"));
    // A scripted turn: the step is how many tool results codex sent back since the question (a
    // web search is the API's own, in the same response; a command's result comes back).
    let blocks = match behavior.script.is_empty() {
        true => vec![Block::Text(text)],
        false => {
            let input = body["input"].as_array().cloned().unwrap_or_default();
            let question = input.iter().rposition(|i| i["role"] == "user").map_or(0, |q| q + 1);
            let step = input[question..].iter().filter(|i| i["type"] == "function_call_output");
            let message = behavior.script.get(step.count()).or(behavior.script.last());
            message.cloned().unwrap_or_default()
        }
    };
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )?;
    let mut events = vec![json!({"type": "response.created", "response": {"id": "resp_mock"}})];
    for (n, block) in blocks.iter().enumerate() {
        let id = format!("item_mock_{n}");
        let done = match block {
            Block::Text(text) | Block::Cited { text, .. } => {
                let item = |status: &str, content: Value| json!({"type": "message", "id": id, "role": "assistant", "status": status, "content": content});
                events.push(json!({"type": "response.output_item.added", "output_index": n, "item": item("in_progress", json!([]))}));
                events.push(json!({"type": "response.output_text.delta", "item_id": id, "output_index": n, "content_index": 0, "delta": text}));
                item("completed", json!([{"type": "output_text", "text": text, "annotations": []}]))
            }
            // The API's own web search: done when the response says so.
            Block::Tool { name, input } if name == "web_search" => {
                json!({"type": "web_search_call", "id": id, "status": "completed", "action": {"type": "search", "query": input["query"]}})
            }
            Block::Tool { name, input } => {
                json!({"type": "function_call", "id": id, "call_id": format!("call_{n}"), "name": name, "arguments": input.to_string()})
            }
        };
        events.push(json!({"type": "response.output_item.done", "output_index": n, "item": done}));
    }
    events.push(json!({"type": "response.completed", "response": {"id": "resp_mock", "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 13}}}));
    for event in events {
        if event["type"] == "response.completed" {
            // The response stays open after its items until the test says so.
            hold(behavior);
        }
        write!(out, "event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or(""))?;
        out.flush()?;
    }
    Ok(())
}

/// The share of `later`'s input (by bytes of its blocks) that the provider's prompt cache could
/// serve after `earlier`, both request bodies as recorded.
///
/// Anthropic (a body with `messages`): the prefix is tools, then system, then messages, block by
/// block. `earlier` wrote a cache entry at each block carrying `cache_control`; `later` reads the
/// longest such entry whose blocks it repeats exactly, looking back at most 20 block boundaries
/// from each of its own breakpoints. Gemini (a body with `contents`) and the Responses API (a
/// body with `input`, item ids aside): the common prefix of the two requests (system
/// instruction or instructions, tools, then the contents or input part by part).
pub fn cacheable_share(earlier: &Value, later: &Value) -> f64 {
    let (old, new) = (blocks(earlier), blocks(later));
    let total: usize = new.iter().map(|b| b.text.len()).sum();
    let prefix_bytes = |n: usize| new[..n].iter().map(|b| b.text.len()).sum::<usize>();
    let same = old.iter().zip(&new).take_while(|(a, b)| a.text == b.text).count();
    let cached = if later["messages"].is_array() {
        // Entries `earlier` wrote: prefixes ending at one of its breakpoints, as long as
        // `later` repeats them.
        let written = |end: usize| end <= same && old[end - 1].breakpoint;
        let mut best = 0;
        for (i, _) in new.iter().enumerate().filter(|(_, b)| b.breakpoint) {
            let end = i + 1;
            let lookback = end.saturating_sub(19).max(1);
            if let Some(hit) = (lookback..=end).rev().find(|&e| written(e)) {
                best = best.max(hit);
            }
        }
        prefix_bytes(best)
    } else {
        // Implicit caching reads a common prefix of tokens: whole parts, then the common
        // start of the first part that differs.
        let partial = match (old.get(same), new.get(same)) {
            (Some(a), Some(b)) => {
                a.text.bytes().zip(b.text.bytes()).take_while(|(x, y)| x == y).count()
            }
            _ => 0,
        };
        prefix_bytes(same) + partial
    };
    if total == 0 { 0.0 } else { cached as f64 / total as f64 }
}

/// One block of a request's cacheable prefix: its JSON without `cache_control`, tagged with
/// where it sits, and whether it carries a breakpoint.
struct PrefixBlock {
    text: String,
    breakpoint: bool,
}

fn blocks(body: &Value) -> Vec<PrefixBlock> {
    let block = |place: &str, v: &Value| {
        let mut v = v.clone();
        let breakpoint = v.as_object_mut().and_then(|o| o.remove("cache_control")).is_some();
        PrefixBlock { text: format!("{place}:{v}"), breakpoint }
    };
    let mut out = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        out.push(block("tool", tool));
    }
    match &body["system"] {
        Value::String(s) => out.push(block("system", &json!({ "type": "text", "text": s }))),
        system => out.extend(system.as_array().into_iter().flatten().map(|b| block("system", b))),
    }
    for part in body["systemInstruction"]["parts"].as_array().into_iter().flatten() {
        out.push(block("system", part));
    }
    if let Some(text) = body["instructions"].as_str() {
        out.push(block("system", &json!({ "type": "text", "text": text })));
    }
    let (list, items) = match (body["messages"].is_array(), body["input"].is_array()) {
        (true, _) => ("messages", "content"),
        (_, true) => ("input", "content"),
        _ => ("contents", "parts"),
    };
    for (i, message) in body[list].as_array().into_iter().flatten().enumerate() {
        let place = format!("{i}:{}", message["role"].as_str().unwrap_or(""));
        // A Responses API item's id is no part of the prompt (codex makes new ones each run).
        let mut message = message.clone();
        if list == "input" {
            message.as_object_mut().map(|o| o.remove("id"));
            if !message[items].is_array() {
                out.push(block(&place, &message));
                continue;
            }
        }
        match &message[items] {
            Value::String(s) => out.push(block(&place, &json!({ "type": "text", "text": s }))),
            parts => out.extend(parts.as_array().into_iter().flatten().map(|b| block(&place, b))),
        }
    }
    out
}
