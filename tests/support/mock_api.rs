//! A loopback test server speaking the two APIs the real engines call: Anthropic Messages with
//! server-sent events (`POST /v1/messages`) and Gemini (`POST /v1beta/models/M:streamGenerateContent
//! ?alt=sse`, and `:generateContent` for gemini's model router).
//!
//! It answers `ECHO: ` plus the last user text (the `<user_query>` part of it, when cca framed
//! it), records every request, and can be told to fail with an HTTP status, to split the answer
//! into chunks with delays between them, or to answer nothing.

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

    /// The requests that asked for an answer (not gemini's model routing).
    pub fn turns(&self) -> Vec<Received> {
        self.state
            .lock()
            .unwrap()
            .received
            .iter()
            .filter(|r| {
                r.path.contains("/v1/messages") || r.path.contains(":streamGenerateContent")
            })
            .cloned()
            .collect()
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
    let behavior = {
        let mut s = state.lock().unwrap();
        s.received.push(Received { path: path.clone(), body: body.clone() });
        s.behavior.clone()
    };
    let mut out = stream;
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
            .map(|m| content_text(&m["content"]))
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
