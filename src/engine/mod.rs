//! Engines are data plus small functions: how to build the command line, environment and stdin
//! for a turn, and how to decode what the program prints. Adding an engine touches one file.
//!
//! Nothing here spawns (that is `run`'s job) or touches the file system: files an engine needs
//! (a system prompt file, a history file) are described as [`Arg::File`] and created by the caller.

pub mod claude;
pub mod command;
pub mod gemini;

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::Value;

use crate::config::{EngineConfig, EngineKind};
use crate::frame::{self, Piece};
use crate::transcript::{self, Live};

/// A command-line argument or environment value.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Plain(OsString),
    /// Written to a private temporary file; the argument is that file's path.
    File {
        name: &'static str,
        contents: String,
    },
}

impl Arg {
    pub fn plain(text: impl Into<OsString>) -> Arg {
        Arg::Plain(text.into())
    }
}

/// Everything needed to run one turn through an engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<Arg>,
    pub env: Vec<(String, Arg)>,
    pub stdin: Vec<Piece>,
}

/// One turn, as the engine module sees it.
pub struct Request<'a> {
    pub system: &'a str,
    pub live: &'a std::sync::Arc<Live>,
    /// Stored content of the live context, for engines that need it as text (structured history).
    pub stored: &'a dyn Fn(&std::ops::Range<u64>) -> std::io::Result<String>,
    pub attachment: Option<frame::Attachment<'a>>,
    pub query: &'a str,
    pub model: Option<&'a str>,
}

impl Request<'_> {
    /// An exchange's user message with its attachments, read from the transcript.
    pub fn user_text(
        &self,
        exchange: &crate::transcript::ExchangeSpans,
    ) -> std::io::Result<String> {
        let attachments = exchange
            .attachments
            .iter()
            .map(|(name, range)| Ok((name.as_str(), (self.stored)(range)?)))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(frame::user_with_attachments((self.stored)(&exchange.user)?, &attachments))
    }
}

/// What a decoder found in the engine's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Answer text, to show and keep.
    Text(String),
    /// A tool call the engine made for the model, once its outcome is known.
    Tool(ToolCall),
    /// Something the engine printed that is not the answer; shown on stderr.
    Note(String),
    /// The engine said the turn failed, and why.
    Error(String),
    Usage(Usage),
    /// The engine's own id for this run (gemini: to find the session file it wrote).
    Session(String),
}

/// A tool call, as cca shows it on stderr, keeps it in the transcript and reports it in `--json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The engine's name for the tool: `WebSearch`, `google_web_search`.
    pub name: String,
    /// What it was asked, in a few words on one line: the query, the URL, the command.
    pub input: String,
    pub status: ToolStatus,
    /// Why it was refused or failed, in the engine's words.
    pub reason: Option<String>,
    /// What a search returned, where the engine says (claude's WebSearch lists its links).
    pub sources: Vec<Source>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// The engine ran it and gave the model its result.
    Ran,
    /// The engine did not run it: the tool is not allowed or not there.
    Refused,
    /// The engine ran it and it failed, or the turn ended before it gave a result.
    Failed,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ran => "ran",
            ToolStatus::Refused => "refused",
            ToolStatus::Failed => "failed",
        }
    }
}

/// A page a search returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub title: String,
    pub url: String,
}

impl ToolCall {
    /// A call whose outcome is not known yet; the decoder settles it when the result arrives.
    pub fn new(name: &str, input: &Value) -> ToolCall {
        ToolCall {
            name: transcript::one_line(name, 100),
            input: gist(input),
            status: ToolStatus::Failed,
            reason: Some("the turn ended before the tool gave a result".into()),
            sources: Vec::new(),
        }
    }

    /// `WebSearch: rust 1.89`, `Bash (refused): ls -la`: the call in one line.
    pub fn line(&self) -> String {
        let status = match self.status {
            ToolStatus::Ran => String::new(),
            other => format!(" ({})", other.as_str()),
        };
        match self.input.as_str() {
            "" => format!("{}{status}", self.name),
            input => format!("{}{status}: {input}", self.name),
        }
    }

    /// The call as `--json` reports it.
    pub fn to_json(&self) -> Value {
        let sources: Vec<Value> = self
            .sources
            .iter()
            .map(|s| serde_json::json!({"title": s.title, "url": s.url}))
            .collect();
        serde_json::json!({
            "name": self.name,
            "input": self.input,
            "status": self.status.as_str(),
            "reason": self.reason,
            "sources": sources,
        })
    }

    /// The line shown on stderr: the call, and what came of it.
    pub fn summary(&self) -> String {
        let mut line = self.line();
        match (&self.reason, self.sources.len()) {
            (Some(reason), _) if self.status != ToolStatus::Ran => {
                line.push_str(" · ");
                line.push_str(reason);
            }
            (_, 0) => {}
            (_, 1) => line.push_str(" · 1 source"),
            (_, n) => line.push_str(&format!(" · {n} sources")),
        }
        line
    }
}

/// The gist of a tool's input: the query, the URL, the command; else the input as JSON.
fn gist(input: &Value) -> String {
    let text = ["query", "url", "pattern", "command", "file_path", "prompt"]
        .iter()
        .find_map(|k| input[k].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| match input {
            Value::Null => String::new(),
            Value::Object(map) if map.is_empty() => String::new(),
            other => other.to_string(),
        });
    transcript::one_line(&text, 200)
}

/// Keeps the tool calls of an answer in the order the model made them, and hands each out once
/// its outcome is known (results of parallel calls may come back in any order).
#[derive(Debug, Default)]
pub struct ToolCalls {
    pending: Vec<(String, ToolCall, bool)>,
}

impl ToolCalls {
    pub fn started(&mut self, id: &str, call: ToolCall) {
        self.pending.push((id.to_string(), call, false));
    }

    /// Settles the call with this id (an unknown id is ignored) and hands out those now due.
    pub fn settled(&mut self, id: &str, settle: impl FnOnce(&mut ToolCall), out: &mut Vec<Output>) {
        if let Some((_, call, done)) = self.pending.iter_mut().find(|(i, _, done)| i == id && !done)
        {
            call.status = ToolStatus::Ran;
            call.reason = None;
            settle(call);
            *done = true;
        }
        while self.pending.first().is_some_and(|(_, _, done)| *done) {
            out.push(Output::Tool(self.pending.remove(0).1));
        }
    }

    /// Hands out every call left, settled or not (the model moved on, or the output ended).
    pub fn flush(&mut self, out: &mut Vec<Output>) {
        out.extend(self.pending.drain(..).map(|(_, call, _)| Output::Tool(call)));
    }
}

/// One answer can span several messages of the model (text, a tool call, more text). Within a
/// message the text is passed on exactly as it comes; between two messages that both have text
/// comes a paragraph break: as many newlines as the text so far needs to end in a blank line.
#[derive(Debug, Default)]
pub struct Paragraphs {
    /// Newlines the text so far ends with, up to two.
    trailing: usize,
    seen: bool,
    new_message: bool,
}

impl Paragraphs {
    /// The next text belongs to a new message.
    pub fn new_message(&mut self) {
        self.new_message = true;
    }

    pub fn text(&mut self, text: &str, out: &mut Vec<Output>) {
        if text.is_empty() {
            return;
        }
        if self.new_message && self.seen && self.trailing < 2 {
            out.push(Output::Text("\n".repeat(2 - self.trailing)));
        }
        self.new_message = false;
        self.seen = true;
        let newlines = text.bytes().rev().take_while(|&b| b == b'\n').count();
        self.trailing =
            if newlines == text.len() { self.trailing + newlines } else { newlines }.min(2);
        out.push(Output::Text(text.to_string()));
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
}

/// Turns an engine's stdout, in whatever chunks it arrives, into [`Output`]s.
pub trait Decoder: Send {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>);
    fn finish(&mut self, out: &mut Vec<Output>);
}

/// Builds the invocation for a turn. `program` is the located program.
pub fn invocation(
    engine: &EngineConfig,
    program: PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    match engine.kind {
        EngineKind::Claude => claude::invocation(engine, program, request),
        EngineKind::Gemini => gemini::invocation(engine, program, request),
        EngineKind::Command => command::invocation(engine, program, request),
    }
}

pub fn decoder(kind: EngineKind) -> Box<dyn Decoder> {
    match kind {
        EngineKind::Claude => Box::new(claude::Decoder::default()),
        EngineKind::Gemini => Box::new(gemini::Decoder::default()),
        EngineKind::Command => Box::new(TextDecoder::default()),
    }
}

/// How to install an engine that was not found.
pub fn install_hint(engine: &EngineConfig) -> String {
    match engine.kind {
        EngineKind::Claude => "install it with `npm install -g @anthropic-ai/claude-code`, \
             or set CCA_CLAUDE to its path"
            .into(),
        EngineKind::Gemini => "install it with `npm install -g @google/gemini-cli`, \
             or set CCA_GEMINI to its path"
            .into(),
        EngineKind::Command => format!(
            "check `command` in [engines.{}] of config.toml, or install the program",
            engine.name
        ),
    }
}

/// Splits stdout into complete lines for the JSON-lines decoders.
#[derive(Debug, Default)]
pub struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    pub fn feed(&mut self, chunk: &[u8], mut each: impl FnMut(&[u8])) {
        let mut rest = chunk;
        while let Some(p) = memchr::memchr(b'\n', rest) {
            if self.pending.is_empty() {
                each(&rest[..p]);
            } else {
                self.pending.extend_from_slice(&rest[..p]);
                each(&std::mem::take(&mut self.pending));
            }
            rest = &rest[p + 1..];
        }
        self.pending.extend_from_slice(rest);
    }

    pub fn finish(&mut self, mut each: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            each(&std::mem::take(&mut self.pending));
        }
    }
}

/// A non-JSON line from a JSON-lines engine: shown to the user, as they would have seen it.
pub fn note_line(line: &[u8], out: &mut Vec<Output>) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    if !text.is_empty() {
        out.push(Output::Note(text.to_string()));
    }
}

/// Plain text engines: stdout is the answer. Invalid UTF-8 becomes U+FFFD; chunks may split a
/// character anywhere.
#[derive(Debug, Default)]
pub struct TextDecoder {
    pending: Vec<u8>,
    warned: bool,
}

impl Decoder for TextDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        self.pending.extend_from_slice(chunk);
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).expect("checked"));
                    match e.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                            if !self.warned {
                                self.warned = true;
                                out.push(Output::Note(
                                    "cca: the engine wrote bytes that are not UTF-8; they are shown and kept as \u{fffd}".into(),
                                ));
                            }
                        }
                        // An incomplete character at the end: wait for the next chunk.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        if !text.is_empty() {
            out.push(Output::Text(text));
        }
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        if !self.pending.is_empty() {
            let text = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            out.push(Output::Text(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_decoder_rejoins_split_characters() {
        let mut d = TextDecoder::default();
        let mut out = Vec::new();
        let bytes = "héllo €".as_bytes();
        for b in bytes {
            d.feed(&[*b], &mut out);
        }
        d.feed(b"\xff!", &mut out);
        d.finish(&mut out);
        assert!(
            matches!(&out[out.len() - 2], Output::Note(n) if n.contains("not UTF-8")),
            "{out:?}"
        );
        let text: String = out
            .into_iter()
            .filter_map(|o| if let Output::Text(t) = o { Some(t) } else { None })
            .collect();
        assert_eq!(text, "héllo €\u{fffd}!");
    }
}
