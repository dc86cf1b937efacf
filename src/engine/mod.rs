//! Engines are data plus small functions: what an engine is (its [`Spec`]: name, limits,
//! hints, defaults), how to build the command line, environment and stdin for a turn, and how to
//! decode what the program prints. Adding an engine touches one file: `engine/NAME.rs` with its
//! `SPEC`, listed in [`BUILTIN`].
//!
//! Nothing here spawns (that is `run`'s job). Files an engine needs (a system prompt file, a
//! history file, a home of its own) are described as [`Arg::File`] and [`Arg::Home`] and
//! created by the caller; what an engine leaves behind is removed through `store`
//! ([`Spec::tidy`]).

pub(crate) mod acp_agent;
pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod command;
pub(crate) mod gemini;
pub(crate) mod home;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use crate::frame::{self, Piece};
use crate::media::Image;
use crate::transcript::{self, Live};

/// What cca knows about one kind of engine program. Each engine file has one, as `SPEC`.
pub struct Spec {
    /// The kind's name: `claude`, `gemini`, `codex`, `command`.
    pub name: &'static str,
    /// Built-in engines: the variable that names the program's path (`CCA_CLAUDE`).
    pub program_var: Option<&'static str>,
    /// Built-in engines: how to install the program.
    pub install: Option<&'static str>,
    /// The keys of `[engines.NAME]` that do something for this kind of engine: any other set
    /// there is refused (`config`), and `cca config` lists these only. A kind with `model_arg`
    /// takes a model only when that is set; one without `model` takes none.
    pub keys: &'static [&'static str],
    /// The models the program takes by name, for an editor's model choice (config adds more).
    pub models: &'static [&'static str],
    /// The context given to the engine, in tokens, below the model's window so an answer fits.
    pub context_budget: u64,
    /// The largest stdin the program takes whole (measured); larger turns are refused.
    pub max_input_bytes: Option<u64>,
    /// The tools the engine may use unless the config says otherwise.
    pub default_tools: Option<&'static str>,
    /// What to tell the user when the engine failed, beyond its own message.
    pub failure_hint: Option<&'static str>,
    /// Why an empty answer may have come, and what to do.
    pub empty_answer_hint: &'static str,
    /// What to do when the API refused the engine's credentials ([`Output::Refused`]).
    pub refused_hint: Option<&'static str>,
    /// Engines that read input while they run (claude with `--input-format stream-json`): how
    /// to write one user message on the running engine's stdin (the framed prompt is the first).
    /// `None`: the engine reads its stdin once, and a steer waits for the next turn. The first
    /// message carries the turn's images ([`Invocation::images`]); steers carry none.
    pub streams_input: Option<fn(&str, &[Image]) -> String>,
    /// How a front end that outlives a turn (`cca chat`, `cca acp`) keeps the engine running
    /// between turns (`run::kept`, docs/DESIGN.md "Warm engines"); `None`: it cannot.
    pub keeps: Option<Keeping>,
    /// Whether the engine answers one turn and ends (`claude -p`, `gemini -p`, a command); an
    /// ACP agent does not: a one-shot turn runs on it kept for that turn, then ended.
    pub one_shot: bool,
    /// Whether the engine can be given images with a question (claude, gemini); a question
    /// with an image for one that cannot is refused before anything is recorded.
    pub takes_images: bool,
    pub invocation: fn(&EngineConfig, PathBuf, &Request) -> anyhow::Result<Invocation>,
    /// Makes the decoder of a run, given the model cca asked for, if it named one (codex
    /// prices its usage by it).
    pub decoder: fn(Option<&str>) -> Box<dyn Decoder>,
    /// Removes the files the program left for a run (its own session copy), given the id it
    /// reported for the run; says what they told that its output did not ([`Tidied`]).
    pub tidy: fn(&Leftovers) -> Tidied,
    /// The files the program reads as it starts (its context files, its settings), found or
    /// not: an engine started before one of them changed is not the one a cold start would
    /// be now, so a warm or waiting engine is used only while they are as they were.
    pub reads_at_start: fn(&StartPlace) -> Vec<PathBuf>,
    /// The variable that gives the program (this path) its home, and the home cca gives it,
    /// for a turn and when it runs outside one (asked its version): it writes there even then.
    /// `None`: it needs none.
    pub home: fn(&std::path::Path) -> Option<(&'static str, home::Home)>,
    /// Lines the program writes on stderr that tell the user nothing (gemini's start-up
    /// chatter): not shown, and not taken for its error. `None`: every line is shown as it comes.
    pub stderr_noise: Option<fn(&[u8]) -> bool>,
}

/// Where an engine starts, for [`Spec::reads_at_start`].
pub struct StartPlace<'a> {
    /// The folder it runs in.
    pub folder: &'a std::path::Path,
    /// As in [`Leftovers`].
    pub gemini_home: Option<&'a std::path::Path>,
    pub claude_home: Option<&'a std::path::Path>,
}

impl StartPlace<'_> {
    /// `names` in the folder and in each folder above it.
    pub(crate) fn upward(&self, names: &[&str]) -> Vec<PathBuf> {
        self.folder.ancestors().flat_map(|dir| names.iter().map(|name| dir.join(name))).collect()
    }
}

/// What [`Spec::tidy`] needs to find and read what a run left.
pub struct Leftovers<'a> {
    /// Where the engine kept its files for the run: the home cca gave it for the session
    /// ([`Spec::home`]), if it has one.
    pub home: Option<&'a std::path::Path>,
    /// claude's folder (`CLAUDE_CONFIG_DIR`, else `~/.claude`): it keeps its sessions under
    /// `projects`.
    pub claude_home: Option<&'a std::path::Path>,
    /// The id the engine reported for the run.
    pub engine_session: &'a str,
    /// The session's engine notes before the run ([`Request::notes`]).
    pub notes: Option<&'a str>,
    /// How many live exchanges the run's history held: the run's question comes after them.
    pub newest: usize,
    /// What the run used, as its output said.
    pub usage: &'a Usage,
}

/// What the files a run left told ([`Spec::tidy`]).
#[derive(Debug, Default, PartialEq)]
pub struct Tidied {
    /// The session's engine notes to keep, when they changed (claude's environment notes,
    /// [`Request::notes`]).
    pub notes: Option<String>,
    /// The model the run used, when its output did not say (`codex exec` does not).
    pub model: Option<String>,
    /// What the run cost, when its output did not say and the model's price is known.
    pub cost_usd: Option<f64>,
}

impl Spec {
    /// claude, gemini and codex, known to cca by name; the rest are `[engines.NAME]` commands.
    pub fn is_builtin(&self) -> bool {
        self.program_var.is_some()
    }
}

impl PartialEq for Spec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The engines cca knows by name, in the order new sessions try them.
pub(crate) const BUILTIN: [&Spec; 3] = [&claude::SPEC, &gemini::SPEC, &codex::SPEC];

/// Every kind of engine: the built-in ones, and the two a config file declares.
pub(crate) const KINDS: [&Spec; 5] =
    [&claude::SPEC, &gemini::SPEC, &codex::SPEC, &command::SPEC, &acp_agent::SPEC];

/// How an engine receives the system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SystemPromptMode {
    /// In `<system_instructions>` at the top of stdin (works with any engine).
    #[default]
    Inline,
    /// Through the engine's own system prompt mechanism.
    Native,
}

/// How an engine receives the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum HistoryMode {
    /// In `<conversation_history>` on stdin (works with any engine).
    #[default]
    Inline,
    /// As the engine's own session file, so it sees real turns.
    Structured,
}

/// A fully resolved engine: what to run and how to talk to it.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub name: String,
    pub spec: &'static Spec,
    /// The program: a path, or a name looked up on PATH.
    pub program: OsString,
    /// Where `program` came from, for messages (`default`, `config file`, `CCA_CLAUDE`).
    pub program_source: String,
    /// The variable that named `program`, if one did (`CCA_CLAUDE`): it is what to fix when
    /// the program is not there.
    pub program_from_var: Option<&'static str>,
    pub args: Vec<String>,
    pub model_arg: Option<String>,
    /// What makes the program print its version, if anything is known to (`cca doctor`).
    pub version_args: Option<Vec<String>>,
    pub system_prompt: SystemPromptMode,
    pub system_prompt_arg: Option<String>,
    pub history: HistoryMode,
    pub tools: Option<String>,
    pub max_input_bytes: Option<u64>,
    /// The model from `[engines.NAME] model`, used when no other is chosen.
    pub model: Option<String>,
    pub retries: Option<u32>,
    pub policy: Option<String>,
    pub context_budget: u64,
    pub model_budgets: BTreeMap<String, u64>,
    pub bytes_per_token: f64,
    /// How long `cca chat` and `cca acp` keep the engine running between turns; `None`: they
    /// start it for every turn.
    pub keep_warm: Option<std::time::Duration>,
    /// How long an engine started for the next one-shot turn waits for it (docs/DESIGN.md,
    /// "Standby"); `None`: none is started.
    pub standby: Option<std::time::Duration>,
}

impl EngineConfig {
    /// Whether a model can be passed to it (see [`Spec::keys`]).
    pub fn takes_model(&self) -> bool {
        let keys = self.spec.keys;
        keys.contains(&"model") && (!keys.contains(&"model_arg") || self.model_arg.is_some())
    }

    /// The context budget, in tokens, for a model of this engine.
    pub fn budget(&self, model: Option<&str>) -> u64 {
        model.and_then(|m| self.model_budgets.get(m)).copied().unwrap_or(self.context_budget)
    }

    /// An estimate of the tokens `bytes` of text make for this engine.
    pub fn tokens(&self, bytes: u64) -> u64 {
        (bytes as f64 / self.bytes_per_token).ceil() as u64
    }

    /// How to get the program when it was not found.
    pub fn install_hint(&self) -> String {
        match (self.spec.install, self.spec.program_var) {
            (Some(install), Some(var)) => {
                format!("install it with `{install}`, or set {var} to its path")
            }
            _ => format!(
                "check `command` in [engines.{}] of config.toml, or install the program",
                self.name
            ),
        }
    }

    /// What to do when the engine (or something it ran) wanted the terminal: answer its
    /// prompt once by hand, so that it needs none when cca runs it.
    pub fn terminal_hint(&self) -> String {
        format!(
            "run `{}` by hand once and answer what it asks (log it in), or set up ssh keys \
             (`ssh-add`) for what it runs, so that nothing needs a password",
            self.program.to_string_lossy()
        )
    }

    /// What to tell the user when the API refused the engine's credentials.
    pub fn refused_hint(&self) -> String {
        match self.spec.refused_hint {
            Some(hint) => hint.to_string(),
            None => format!("check the key or the login {} uses", self.name),
        }
    }

    /// What to tell the user when the engine failed, beyond its own message.
    pub fn failure_hint(&self) -> String {
        match self.spec.failure_hint {
            Some(hint) => hint.to_string(),
            None => format!("run {} by hand to see more", self.name),
        }
    }
}

/// Refuses a model name an engine could read as one of its options (`--yolo`), or as several
/// words: wherever it comes from (a flag, the environment, the config file, a transcript's
/// header, an editor), it reaches the engine's command line.
pub(crate) fn check_model(model: &str, from: &str) -> anyhow::Result<()> {
    /// A model's name goes into the transcript's header, one line: far longer is no name.
    const LONGEST_MODEL: usize = 256;
    if model.chars().count() > LONGEST_MODEL {
        let start: String = model.chars().take(40).collect();
        return Err(crate::error::Failure::usage(format!(
            "the model name {start:?}... ({from}) is not a model name: it is over {LONGEST_MODEL} characters; it was not used"
        ))
        .hint("name a model as the engine does (`sonnet`, `gemini-2.5-pro`), and fix the place it came from")
        .into());
    }
    let why = match () {
        _ if model.is_empty() => "it is empty",
        _ if model.starts_with('-') => {
            "it starts with `-`, so an engine could read it as an option"
        }
        _ if model.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            "it holds spaces or control characters, so an engine could read it as several words"
        }
        _ => return Ok(()),
    };
    Err(crate::error::Failure::usage(format!(
        "the model name {model:?} ({from}) is not a model name: {why}; it was not used"
    ))
    .hint("name a model as the engine does (`sonnet`, `gemini-2.5-pro`), and fix the place it came from")
    .into())
}

/// The model on an engine's command line: `FLAG=NAME` for a long option, so that no name can
/// be read as an option of its own (a short one takes the next argument, a checked name).
pub(crate) fn model_args(flag: &str, model: &str) -> anyhow::Result<Vec<Arg>> {
    check_model(model, "for the engine's command line")?;
    Ok(match flag.starts_with("--") {
        true => vec![Arg::plain(format!("{flag}={model}"))],
        false => vec![Arg::plain(flag), Arg::plain(model)],
    })
}

/// How many bytes make a token, for estimates, unless an engine's config says otherwise.
pub(crate) const BYTES_PER_TOKEN: f64 = 3.5;

/// A command-line argument or environment value.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Plain(OsString),
    /// Written to a private temporary file; the argument is that file's path.
    File {
        name: &'static str,
        contents: String,
    },
    /// As [`Arg::File`], the argument being `prefix` and the file's path (codex's
    /// `model_instructions_file=PATH`).
    FileAfter {
        prefix: &'static str,
        name: &'static str,
        contents: String,
    },
    /// A home folder of the engine's own, in cca's folder (see [`home`]); the argument is its
    /// path.
    Home(home::Home),
    /// A file written at `path` in the configuration folder of the engine's home (made as for
    /// [`Arg::Home`]), replacing any there; the argument is `value` (codex's rollout, which
    /// `codex exec resume` finds by its id).
    HomeFile {
        home: home::Home,
        path: String,
        contents: String,
        value: String,
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
    /// Images sent beside the text of the first message of an engine that streams input.
    pub images: Vec<Image>,
    /// What a kept engine that already holds the live context is sent: the newest question
    /// alone, as the engine takes it (docs/DESIGN.md, "Warm engines").
    pub follow_up: Vec<Piece>,
    /// A kept engine's own session its opening resumes, holding the live context (codex's
    /// rollout, [`RpcSession::opening_lines`]); `None`: it opens a new one.
    pub resume: Option<String>,
}

/// How a kept engine takes a message and tells that its answer ended. One variant per way.
#[derive(Debug, Clone, Copy)]
pub enum Keeping {
    /// One JSON line per user message on stdin (claude's `--input-format stream-json`, written
    /// by this function); the answer ends at the engine's end of answer (claude's `result`),
    /// and stdin stays open.
    StreamJson(fn(&str, &[Image]) -> String),
    /// An ACP agent on stdio (`gemini --acp`, started with the arguments the invocation gives
    /// for a kept engine): `initialize` and `session/new` once, then one `session/prompt`
    /// request per message, whose response ends the answer ([`acp_agent`] decodes it).
    Acp,
    /// A JSON-RPC session of the engine's own on stdio (codex's `app-server`), as the engine
    /// describes it: opened once, then one prompt request per message.
    Rpc(&'static RpcSession),
}

/// How to speak an engine's own JSON-RPC session on stdio ([`Keeping::Rpc`]).
#[derive(Debug)]
pub struct RpcSession {
    /// The requests that open the session, for the folder it runs in, resuming the engine's own
    /// session of that id if there is one ([`Invocation::resume`]).
    pub opening_lines: fn(&std::path::Path, Option<&str>) -> Vec<String>,
    /// Whether a line answers the opening: then the session's id, or why it opened none.
    pub session_of: fn(&[u8]) -> Option<Result<String, String>>,
    /// The request that sends a message (its id, the session, the text, its images).
    pub prompt_line: fn(u64, &str, &str, &[Image]) -> String,
    /// The id of the first prompt request (those before are the opening's).
    pub first_prompt_id: u64,
    /// Decodes what the session writes, given the model cca asked for (as [`Spec::decoder`]);
    /// the answer ends with the engine's end of turn.
    pub decoder: fn(Option<&str>) -> Box<dyn Decoder>,
}

/// An MCP server the engine starts for a turn, with its tools for the model.
#[derive(Debug, Clone, PartialEq)]
pub enum McpServer {
    /// A program the engine runs, speaking MCP on its stdin and stdout.
    Stdio { name: String, command: String, args: Vec<String>, env: Vec<(String, String)> },
    /// A server over streamable HTTP.
    Http { name: String, url: String, headers: Vec<(String, String)> },
    /// A server over HTTP with server-sent events.
    Sse { name: String, url: String, headers: Vec<(String, String)> },
}

impl McpServer {
    pub fn name(&self) -> &str {
        match self {
            McpServer::Stdio { name, .. }
            | McpServer::Http { name, .. }
            | McpServer::Sse { name, .. } => name,
        }
    }
}

/// `{"NAME": {...}, ...}`: the servers as an `mcpServers` object, each described by `describe`.
pub(crate) fn mcp_servers(servers: &[McpServer], describe: fn(&McpServer) -> Value) -> Value {
    let map: serde_json::Map<String, Value> =
        servers.iter().map(|s| (s.name().to_string(), describe(s))).collect();
    Value::Object(map)
}

/// Pairs as a JSON object (environment variables, HTTP headers).
pub(crate) fn pairs(pairs: &[(String, String)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

/// One turn, as the engine module sees it.
pub struct Request<'a> {
    pub system: &'a str,
    pub live: &'a std::sync::Arc<Live>,
    /// Stored content of the live context, for engines that need it as text (structured history).
    pub stored: &'a dyn Fn(&std::ops::Range<u64>) -> std::io::Result<String>,
    pub attachments: Vec<frame::Attachment<'a>>,
    /// The question's images (their attachments' text, a link, is framed like any other).
    pub images: Vec<&'a Image>,
    /// The folder of the images' stored copies (`Image::file_name` in it), for engines that
    /// read an image from its file.
    pub image_dir: &'a std::path::Path,
    pub query: &'a str,
    pub model: Option<&'a str>,
    /// MCP servers to start for the turn.
    pub mcp_servers: &'a [McpServer],
    /// What the engine noted of its own in earlier turns of the session, for a structured
    /// history to repeat where the engine put it (claude's environment notes); kept by cca
    /// from what [`Spec::tidy`] returned.
    pub notes: Option<&'a str>,
    /// The engine is kept between turns (docs/DESIGN.md, "Warm engines"): it must keep no
    /// session files of its own, as nothing would remove them while it runs.
    pub kept: bool,
}

impl Request<'_> {
    /// The newest message, for structured history: the live context's opening message while it
    /// has no exchange yet, else a follow-up ([`frame::opening`]). `system` is the system prompt
    /// when the engine takes it inline.
    pub fn newest(&self, system: Option<&str>) -> std::io::Result<Vec<frame::Piece>> {
        if !self.live.exchanges.is_empty() {
            return Ok(frame::follow_up(&self.attachments, self.query));
        }
        let summary = self.summary()?;
        Ok(frame::opening(system, summary.as_deref(), &self.attachments, self.query))
    }

    /// The question of the live context's `n`th exchange with its attachments, read from the
    /// transcript, as [`Request::newest`] sent it when it was the newest.
    pub fn user_message(&self, n: usize, system: Option<&str>) -> std::io::Result<String> {
        let exchange = &self.live.exchanges[n];
        let stored = exchange
            .attachments
            .iter()
            .map(|(name, range)| Ok((name.as_str(), (self.stored)(range)?)))
            .collect::<std::io::Result<Vec<_>>>()?;
        let attachments: Vec<frame::Attachment> =
            stored.iter().map(|(name, text)| frame::Attachment { name, text }).collect();
        let user = (self.stored)(&exchange.user)?;
        let pieces = match n {
            0 => frame::opening(system, self.summary()?.as_deref(), &attachments, &user),
            _ => frame::follow_up(&attachments, &user),
        };
        frame::to_string(&pieces, &b""[..])
    }

    /// The summary of the compacted turns, read from the transcript.
    fn summary(&self) -> std::io::Result<Option<String>> {
        self.live.summary.as_ref().map(|range| (self.stored)(range)).transpose()
    }
}

/// What a decoder found in the engine's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Answer text, to show and keep.
    Text(String),
    /// A tool call the engine is making for the model (its outcome not known yet). Each is
    /// followed, in the same order, by its [`Output::Tool`].
    ToolStarted(ToolCall),
    /// A tool call the engine made for the model, once its outcome is known.
    Tool(ToolCall),
    /// Something the engine printed that is not the answer; shown on stderr.
    Note(String),
    /// The engine is retrying a failing API, in a sentence (`API error 500; retrying in 1s`).
    Retry(String),
    /// The engine said the turn failed, and why.
    Error(String),
    /// The API refused the engine's credentials (a wrong key, a login expired): no retry can
    /// help, so the engine is stopped at once. Why, in the engine's words.
    Refused(String),
    Usage(Usage),
    /// The engine's own id for this run (gemini: to find the session file it wrote).
    Session(String),
    /// The model the engine says it runs (its default, or what the name given stands for).
    Model(String),
    /// The engine took this many user messages sent while it ran (a replay of them); the first
    /// it takes is the prompt itself.
    Taken(usize),
    /// One answer is complete (claude's `result` line); an engine reading input may go on.
    AnswerEnd,
    /// A line to write back on the engine's stdin: the answer to a request it made (an ACP
    /// agent asking for a permission).
    Reply(String),
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
pub(crate) struct ToolCalls {
    pending: Vec<(String, ToolCall, bool)>,
}

impl ToolCalls {
    /// A call the model made: announced now, handed out settled later (see [`Output::ToolStarted`]).
    pub(crate) fn started(&mut self, id: &str, call: ToolCall, out: &mut Vec<Output>) {
        out.push(Output::ToolStarted(call.clone()));
        self.pending.push((id.to_string(), call, false));
    }

    /// Settles the call with this id (an unknown id is ignored) and hands out those now due.
    pub(crate) fn settled(
        &mut self,
        id: &str,
        settle: impl FnOnce(&mut ToolCall),
        out: &mut Vec<Output>,
    ) {
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
    pub(crate) fn flush(&mut self, out: &mut Vec<Output>) {
        out.extend(self.pending.drain(..).map(|(_, call, _)| Output::Tool(call)));
    }
}

/// One answer can span several messages of the model (text, a tool call, more text). Within a
/// message the text is passed on exactly as it comes; between two messages that both have text
/// comes a paragraph break: as many newlines as the text so far needs to end in a blank line.
#[derive(Debug, Default)]
pub(crate) struct Paragraphs {
    /// Newlines the text so far ends with, up to two.
    trailing: usize,
    seen: bool,
    new_message: bool,
}

impl Paragraphs {
    /// The next text belongs to a new message.
    pub(crate) fn new_message(&mut self) {
        self.new_message = true;
    }

    pub(crate) fn text(&mut self, text: &str, out: &mut Vec<Output>) {
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
    /// Every token of the request's input, those the cache served included.
    pub input_tokens: Option<u64>,
    /// Of those, the ones the provider's prompt cache served (billed at a fraction).
    pub cached_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// The figures that make sense (`transcript::tokens_figure`, `cost_figure`), and a note
    /// for each one left out, saying what it was and why, never its value as a figure.
    pub fn checked(self) -> (Usage, Vec<String>) {
        fn keep<T>(
            what: &str,
            figure: Option<Result<T, &str>>,
            notes: &mut Vec<String>,
        ) -> Option<T> {
            figure?
                .map_err(|why| notes.push(format!("{what} that makes no sense ({why}): left out")))
                .ok()
        }
        let mut notes = Vec::new();
        let n = &mut notes;
        let input =
            keep("an input token count", self.input_tokens.map(transcript::tokens_figure), n);
        let cached =
            keep("a cached token count", self.cached_tokens.map(transcript::tokens_figure), n);
        let output =
            keep("an output token count", self.output_tokens.map(transcript::tokens_figure), n);
        let cost = keep("a cost", self.cost_usd.map(transcript::cost_figure), n);
        let usage = Usage {
            input_tokens: input,
            cached_tokens: cached,
            output_tokens: output,
            cost_usd: cost,
        };
        (usage, notes)
    }
}

/// What an engine noted of its own in a session's runs (claude's environment notes, codex's
/// context items): lines of its session file, each set with the number of live exchanges before
/// the question they came with. Written back into the history at the same places, they make the
/// engine add nothing after the newest question, so each request repeats the previous one
/// (docs/DESIGN.md, Framing, Prompt caching). Kept by cca per session as JSON:
/// `[{"after": N, "lines": [...]}]`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Notes(pub(crate) Vec<(usize, Vec<Value>)>);

impl Notes {
    /// Kept notes; anything unreadable is no notes (the engine then writes them anew).
    pub(crate) fn read(kept: Option<&str>) -> Notes {
        let sets = kept.and_then(|text| serde_json::from_str::<Value>(text).ok());
        let sets = sets.as_ref().and_then(Value::as_array).into_iter().flatten();
        Notes(
            sets.filter_map(|set| {
                let after = set["after"].as_u64()? as usize;
                Some((after, set["lines"].as_array()?.clone()))
            })
            .collect(),
        )
    }

    /// The lines noted with the question after `exchanges` live exchanges.
    pub(crate) fn after(&self, exchanges: usize) -> impl Iterator<Item = &Value> {
        self.0.iter().filter(move |(after, _)| *after == exchanges).flat_map(|(_, lines)| lines)
    }

    /// The kept notes with those of the run's question (after `newest` exchanges) put in place
    /// of any kept for that place or later, as JSON to keep.
    pub(crate) fn replaced_from(kept: Option<&str>, newest: usize, found: Vec<Value>) -> String {
        let mut notes = Notes::read(kept);
        notes.0.retain(|(after, _)| *after < newest);
        notes.0.push((newest, found));
        notes.to_json()
    }

    pub(crate) fn to_json(&self) -> String {
        let sets: Vec<Value> = self
            .0
            .iter()
            .map(|(after, lines)| serde_json::json!({ "after": after, "lines": lines }))
            .collect();
        Value::Array(sets).to_string()
    }
}

/// Turns an engine's stdout, in whatever chunks it arrives, into [`Output`]s.
pub trait Decoder: Send {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>);
    fn finish(&mut self, out: &mut Vec<Output>);
    /// The engine's [`Spec::stderr_noise`]: with one, its stderr is shown a line at a time.
    fn stderr_noise(&self) -> Option<fn(&[u8]) -> bool> {
        None
    }
}

/// What `decoder` makes of `sample` fed in chunks of `chunk` bytes, awkward ones, as a pipe
/// gives them: for the decoders' tests.
#[cfg(test)]
pub(crate) fn decoded(mut decoder: impl Decoder, sample: &str, chunk: usize) -> Vec<Output> {
    let mut out = Vec::new();
    for part in sample.as_bytes().chunks(chunk) {
        decoder.feed(part, &mut out);
    }
    decoder.finish(&mut out);
    out
}

/// The answer's text among a decoder's outputs: for the decoders' tests.
#[cfg(test)]
pub(crate) fn answer_text(out: &[Output]) -> String {
    out.iter()
        .filter_map(|o| if let Output::Text(t) = o { Some(t.as_str()) } else { None })
        .collect()
}

/// Splits stdout into complete lines for the JSON-lines decoders.
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    pub(crate) fn feed(&mut self, chunk: &[u8], mut each: impl FnMut(&[u8])) {
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

    pub(crate) fn finish(&mut self, mut each: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            each(&std::mem::take(&mut self.pending));
        }
    }

    /// [`Self::feed`] for a decoder that keeps its buffer in itself (`lines` finds it) and
    /// decodes each line with `line`: the buffer is out of the decoder meanwhile.
    pub(crate) fn feed_to<D>(
        decoder: &mut D,
        lines: Field<D>,
        chunk: &[u8],
        line: Line<D>,
        out: Out,
    ) {
        let mut buffer = std::mem::take(lines(decoder));
        buffer.feed(chunk, |l| line(decoder, l, out));
        *lines(decoder) = buffer;
    }

    /// [`Self::finish`], as [`Self::feed_to`] feeds.
    pub(crate) fn finish_to<D>(decoder: &mut D, lines: Field<D>, line: Line<D>, out: Out) {
        let mut buffer = std::mem::take(lines(decoder));
        buffer.finish(|l| line(decoder, l, out));
        *lines(decoder) = buffer;
    }
}

/// Where a decoder keeps its [`LineBuffer`].
type Field<D> = fn(&mut D) -> &mut LineBuffer;
/// How a decoder decodes one line.
type Line<D> = fn(&mut D, &[u8], &mut Vec<Output>);
type Out<'a> = &'a mut Vec<Output>;

/// A line of a JSON-lines engine, parsed; a line that is not JSON is shown to the user as they
/// would have seen it (a [`Output::Note`]), and gives `None`.
pub(crate) fn json_line(line: &[u8], out: &mut Vec<Output>) -> Option<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(line) {
        return Some(v);
    }
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    if !text.is_empty() {
        out.push(Output::Note(text.to_string()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keeps_the_figures_that_make_sense_and_notes_the_rest() {
        let usage = Usage {
            input_tokens: Some(1 << 63),
            output_tokens: Some(7),
            cost_usd: Some(-3.0),
            cached_tokens: Some(2),
        };
        let (kept, notes) = usage.checked();
        let left = Usage { output_tokens: Some(7), cached_tokens: Some(2), ..Usage::default() };
        assert_eq!(kept, left);
        assert_eq!(
            notes,
            [
                "an input token count that makes no sense (more than 2^40 tokens): left out",
                "a cost that makes no sense (negative): left out"
            ]
        );
        let fine = Usage { input_tokens: Some(1), cost_usd: Some(0.5), ..Usage::default() };
        assert_eq!(fine.clone().checked(), (fine, Vec::new()));
    }
}
