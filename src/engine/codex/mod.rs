//! codex (`@openai/codex`), driven as `codex exec --json` with the prompt on stdin.
//!
//! It prints one JSON event a line: `thread.started` (its id for the run), `item.started` and
//! `item.completed` for each item of the turn (the answer as whole `agent_message`s, web searches
//! and commands as their own items), `turn.completed` with the usage, or `turn.failed`. An
//! `item.completed` of type `error` is a warning (an unknown model's metadata), not a failure:
//! the turn goes on. A top-level `error` event saying `Reconnecting...` is a retry.
//!
//! It runs read-only and never asks for an approval (`sandbox_mode`, `approval_policy`), so a
//! command that would write is refused by the sandbox and the model is told; codex 0.169.0 prints
//! no item for it, or (on a loaded machine) the command's failure, which cca shows as refused.
//! It runs in a home of cca's (`CODEX_HOME`, see [`home`]). With structured history (the
//! default) the live exchanges are a rollout cca writes there and codex resumes (`exec resume
//! ID -`), with what codex noted of its own in earlier runs where it put it, so that each request
//! repeats the one before; codex's rollout of the run is read for those notes and removed
//! ([`tidy`]). With inline history it runs `--ephemeral`, the history framed on stdin.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{
    Arg, EngineConfig, HistoryMode, Invocation, LineBuffer, Notes, Output, Paragraphs, Request,
    Spec, SystemPromptMode, ToolCall, ToolCalls, ToolStatus, Usage, json_line,
};
use crate::frame;

mod app_server;
mod price;

pub(crate) use app_server::APP_SERVER;

/// Measured with codex 0.169.0 (docs/DESIGN.md, "codex").
pub(crate) const SPEC: Spec = Spec {
    name: "codex",
    program_var: Some(crate::vars::CODEX),
    install: Some("npm install -g @openai/codex"),
    keys: &[
        "program",
        "args",
        "model",
        "system_prompt",
        "history",
        "keep_warm",
        "standby",
        "max_input_bytes",
        "context_budget",
        "model_budgets",
        "bytes_per_token",
    ],
    // The models codex 0.169.0's bundled catalog lists (its hidden ones left out).
    models: &[
        "gpt-6-astra",
        "gpt-6.1-sol",
        "gpt-6.1-terra",
        "gpt-6-sol",
        "gpt-6-luna",
        "gpt-5.6-sol",
        "gpt-5.6-terra",
        "gpt-5.6-luna",
        "gpt-5.5",
    ],
    // Below the 272,000-token window of most of them, so that an answer fits.
    context_budget: 200_000,
    // Measured: codex refuses a prompt over 1,048,576 characters ("Input exceeds the maximum
    // length"); as bytes, that is never more.
    max_input_bytes: Some(1_048_576),
    default_tools: None,
    failure_hint: None,
    empty_answer_hint: "try again; if it keeps happening, run `codex exec` by hand to see what it does",
    refused_hint: Some(
        "check OPENAI_API_KEY (or the key of the provider in ~/.codex/config.toml), or log in \
         again with `codex login`",
    ),
    streams_input: None,
    // Kept between turns (`cca chat`, `cca acp`) and on standby, it runs as `codex app-server`.
    keeps: Some(super::Keeping::Rpc(&APP_SERVER)),
    one_shot: true,
    // `-i FILE` attaches an image to the prompt.
    takes_images: true,
    invocation,
    decoder: |model| Box::new(Decoder::priced(model)),
    tidy,
    reads_at_start,
    home: |_| Some((crate::vars::CODEX_HOME, home())),
    stderr_noise: Some(noise),
};

/// What codex says on stderr that tells the user nothing: that it reads stdin (cca writes the
/// prompt there), and that it makes no helper links in a temporary folder.
fn noise(line: &[u8]) -> bool {
    line.starts_with(b"Reading additional input from stdin")
        || line.starts_with(b"Reading prompt from stdin")
        || line.starts_with(b"WARNING: proceeding, even though we could not create PATH aliases")
}

/// codex's home: its folder (`CODEX_HOME`, given the `.codex` in it) with links to the user's
/// sign-in, settings, instructions and rules in `~/.codex`, and nothing else of the user's: what
/// codex writes of itself as it runs (its databases, logs, shell snapshots, skills it installs)
/// stays in cca's folder, whatever new names a new version gives them.
pub(crate) fn home() -> super::home::Home {
    super::home::Home {
        engine: "codex",
        config_dir: ".codex",
        links: super::home::Links::Only(&[
            "auth.json",
            "config.toml",
            "AGENTS.md",
            "AGENTS.override.md",
            "rules",
            "prompts",
        ]),
        home_files: &[],
        settings: None,
        arg: super::home::HomeArg::ConfigDir,
        user: super::home::UserFolder::CodexHome,
    }
}

pub(crate) fn invocation(
    engine: &EngineConfig,
    program: PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    let structured = engine.history == HistoryMode::Structured && !request.kept;
    // Kept between turns, it runs as its app server (`Keeping::Rpc`), everything else as for
    // one turn.
    let mode: &[&str] = match request.kept {
        true => &["app-server"],
        // cca asks in any folder, a repository or not.
        false => &["exec", "--json", "--skip-git-repo-check"],
    };
    let mut args: Vec<Arg> = mode.iter().copied().map(Arg::plain).collect();
    args.extend(
        [
            // A search agent reads; it never writes or asks for approval (no one could answer:
            // stdin is the prompt). Later `-c` in the config's `args` override these.
            "-c",
            "sandbox_mode=\"read-only\"",
            "-c",
            "approval_policy=\"never\"",
        ]
        .map(Arg::plain),
    );
    if !structured && !request.kept {
        // cca is the memory: no session file of codex's own. (A structured history's run
        // keeps one, which `tidy` reads and removes.)
        args.push(Arg::plain("--ephemeral"));
    }
    if let Some(model) = request.model {
        match request.kept {
            false => args.extend(super::model_args("--model", model)?),
            true => {
                super::check_model(model, "for the engine's command line")?;
                args.extend([
                    Arg::plain("-c"),
                    Arg::plain(format!("model={}", toml_string(model))),
                ]);
            }
        }
    }
    let inline_system = match engine.system_prompt {
        SystemPromptMode::Inline => Some(request.system),
        SystemPromptMode::Native => {
            // In place of codex's own instructions (its first `developer` message).
            args.push(Arg::plain("-c"));
            args.push(Arg::FileAfter {
                prefix: "model_instructions_file=",
                name: "system-prompt.md",
                contents: request.system.to_string(),
            });
            None
        }
    };
    if !request.mcp_servers.is_empty() {
        // Added to the user's own in `config.toml`, which start as in codex's own runs (a `-c`
        // table is merged into the file's: measured, `mcp_servers={}` removes none). One table
        // with quoted names: codex takes `mcp_servers."NAME"` with the quotes in the name.
        let servers: Vec<String> = request
            .mcp_servers
            .iter()
            .map(|server| format!("{} = {}", toml_string(server.name()), mcp_server(server)))
            .collect();
        args.push(Arg::plain("-c"));
        args.push(Arg::plain(format!("mcp_servers={{{}}}", servers.join(", "))));
    }
    for image in &request.images {
        // The `=` form: `--image` takes several values, and would take the prompt's `-` too.
        let path = request.image_dir.join(image.file_name());
        args.push(Arg::plain(format!("--image={}", path.display())));
    }
    args.extend(engine.args.iter().map(Arg::plain));
    if request.kept {
        return kept(engine, program, args, request, inline_system);
    }
    // The prompt is stdin: `-`, after `--` so that nothing reads it as an option's value.
    let stdin = match structured {
        true if !request.live.exchanges.is_empty() => {
            // The live context as a rollout in codex's home, resumed by its id.
            let id = fresh_rollout_id(request.live.exchanges.len());
            let contents = history_rollout(&id, request, inline_system)?;
            let path = format!("sessions/{HISTORY_DAY}/rollout-{HISTORY_TIME}-{id}.jsonl");
            args.extend([Arg::plain("resume"), Arg::plain("--")]);
            args.push(Arg::HomeFile { home: home(), path, contents, value: id });
            request.newest(inline_system)?
        }
        true => {
            args.push(Arg::plain("--"));
            request.newest(inline_system)?
        }
        false => {
            args.push(Arg::plain("--"));
            frame::inline(inline_system, request.live, &request.attachments, request.query)
        }
    };
    args.push(Arg::plain("-"));
    let env = vec![(crate::vars::CODEX_HOME.to_string(), Arg::Home(home()))];
    let follow_up = frame::follow_up(&request.attachments, request.query);
    Ok(Invocation { program, args, env, stdin, images: Vec::new(), follow_up, resume: None })
}

/// codex kept as its app server. With structured history and exchanges in the live context, its
/// thread is a copy of the rollout a cold turn would resume (`thread/fork`, [`APP_SERVER`]), so
/// that its first request extends the cold one before it, and its first message is the newest
/// question alone; else it opens a new thread, whose first message frames the live context.
/// Later messages are the question alone.
fn kept(
    engine: &EngineConfig,
    program: PathBuf,
    args: Vec<Arg>,
    request: &Request,
    system: Option<&str>,
) -> anyhow::Result<Invocation> {
    let mut env = vec![(crate::vars::CODEX_HOME.to_string(), Arg::Home(home()))];
    let follow_up = frame::follow_up(&request.attachments, request.query);
    let images = Vec::new();
    if engine.history == HistoryMode::Inline || request.live.exchanges.is_empty() {
        let stdin = frame::inline(system, request.live, &request.attachments, request.query);
        return Ok(Invocation { program, args, env, stdin, images, follow_up, resume: None });
    }
    // Named by its contents, so that a standby started with it serves the turn that would
    // start it so (the start's key holds the rollout).
    let id = rollout_id(&history_rollout("", request, system)?);
    let mut contents = history_rollout(&id, request, system)?;
    // Its last turn complete: else the fork takes it for one the user interrupted, and tells the
    // model so (a `<turn_aborted>` message after the history).
    contents.push_str(&format!("{}\n", turn_complete(&contents, &id)));
    let path = format!("sessions/{HISTORY_DAY}/rollout-{HISTORY_TIME}-{id}.jsonl");
    // The app server takes no file on its command line: the rollout is written as the value of
    // a variable codex does not read, which names it for whoever looks.
    let file = Arg::HomeFile { home: home(), path, contents, value: id.clone() };
    env.push((RESUMED_VAR.to_string(), file));
    let stdin = request.newest(system)?;
    Ok(Invocation { program, args, env, stdin, images, follow_up, resume: Some(id) })
}

/// The event that ends a rollout's last turn: `task_complete` with the turn's id (that of the
/// last `turn_context` codex noted, else any: measured with codex 0.169.0, one without an id
/// leaves the turn unfinished).
fn turn_complete(rollout: &str, id: &str) -> Value {
    let mut lines = rollout.lines().rev().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let last = lines.find(|l| l["type"] == "turn_context");
    let turn = last.and_then(|l| l["payload"]["turn_id"].as_str().map(str::to_string));
    let done = json!({"type": "task_complete", "turn_id": turn.as_deref().unwrap_or(id)});
    json!({"timestamp": HISTORY_AT, "type": "event_msg", "payload": done})
}

/// The variable a kept codex is given the id of the rollout it forks in (see [`kept`]).
const RESUMED_VAR: &str = "CCA_CODEX_RESUMES";

/// The folder (under `sessions`) and the time in the name of the rollouts cca writes: codex
/// finds a rollout by the id in its name, wherever it is.
const HISTORY_DAY: &str = "2026/01/01";
const HISTORY_TIME: &str = "2026-01-01T00-00-00";
/// The time of every line of them (codex requires one).
const HISTORY_AT: &str = "2026-01-01T00:00:00.000Z";

/// A fresh UUID-shaped id for a rollout cca writes: never one codex has seen (its databases in
/// the home remember the threads it ran, and their files, which `tidy` removes).
fn fresh_rollout_id(exchanges: usize) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    rollout_id(&format!("{exchanges}\0{now}\0{}", std::process::id()))
}

/// A UUID-shaped id made from `seed`.
fn rollout_id(seed: &str) -> String {
    let h1 = crate::prompt::hash(&format!("{seed}\0a"));
    let h2 = crate::prompt::hash(&format!("{seed}\0b"));
    let hex = format!("{}{}", &h1[h1.len() - 16..], &h2[h2.len() - 16..]);
    format!("{}-{}-4{}-8{}-{}", &hex[0..8], &hex[8..12], &hex[13..16], &hex[17..20], &hex[20..32])
}

/// The `session_meta` line a rollout opens with (codex 0.169.0 resumes one with no more).
pub(crate) fn rollout_meta(id: &str, at: &str, cwd: &str) -> Value {
    let meta = json!({"id": id, "timestamp": at, "cwd": cwd, "originator": "cca",
                      "cli_version": env!("CARGO_PKG_VERSION"), "source": "cli"});
    json!({"timestamp": at, "type": "session_meta", "payload": meta})
}

/// A message of a rollout: the user's as `input_text`, the assistant's as `output_text`, as
/// codex writes them and sends them again when it resumes.
pub(crate) fn rollout_message(at: &str, role: &str, text: &str) -> Value {
    let kind = if role == "assistant" { "output_text" } else { "input_text" };
    let item = json!({"type": "message", "role": role, "content": [{"type": kind, "text": text}]});
    json!({"timestamp": at, "type": "response_item", "payload": item})
}

/// The live exchanges as a rollout codex resumes: each question as it was sent, with what codex
/// noted before it (its context messages, `world_state` and `turn_context`, see [`Notes`]) in
/// front of it, and its answer. So codex adds nothing before the newest question, and each
/// request repeats the previous one.
fn history_rollout(id: &str, request: &Request, system: Option<&str>) -> std::io::Result<String> {
    let notes = Notes::read(request.notes);
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut lines = vec![rollout_meta(id, HISTORY_AT, &cwd.to_string_lossy())];
    for (i, exchange) in request.live.exchanges.iter().enumerate() {
        lines.extend(notes.after(i).cloned());
        lines.push(rollout_message(HISTORY_AT, "user", &request.user_message(i, system)?));
        let answer = (request.stored)(&exchange.assistant)?;
        lines.push(rollout_message(HISTORY_AT, "assistant", &answer));
    }
    Ok(lines.iter().map(|l| format!("{l}\n")).collect())
}

/// Removes the rollout codex kept of a structured-history run (in the session's home), and
/// returns the notes to keep: what codex wrote before the run's question (the one after `newest`
/// live exchanges), which replace any kept for that place or later. The rollout a kept codex
/// forked from is cca's alone, with no run of codex's in it: nothing new to keep. Any other
/// rollout cca wrote goes too.
///
/// The rollout also says which model the run used, which `codex exec --json` does not: with it,
/// what the run cost when its output had no price.
fn tidy(left: &super::Leftovers) -> super::Tidied {
    let Some(rollout) = take_rollout(left) else { return super::Tidied::default() };
    let model = run_model(&rollout);
    let cost_usd = match (&model, left.usage.cost_usd) {
        (Some(model), None) => price::cost(model, left.usage),
        _ => None,
    };
    let notes = notes_before_question(&rollout)
        .map(|found| Notes::replaced_from(left.notes, left.newest, found));
    super::Tidied { notes, model, cost_usd }
}

/// The model of the run a rollout ends with: its last `turn_context`'s.
fn run_model(rollout: &str) -> Option<String> {
    rollout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["type"] == "turn_context")
        .and_then(|l| l["payload"]["model"].as_str().map(str::to_string))
        .filter(|m| !m.is_empty())
}

/// [`tidy`]'s files: takes codex's rollout of the run (its text) and any rollout of cca's that
/// no run took.
fn take_rollout(left: &super::Leftovers) -> Option<String> {
    // A UUID, as codex names its threads: nothing read from its output may name another file.
    let id = left.engine_session;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    let sessions = left.home?.join(home().config_dir).join("sessions");
    let suffix = format!("-{id}.jsonl");
    let text = crate::store::take_file_below(&sessions, 3, |name| name.ends_with(&suffix));
    // And cca's rollouts no run took: one a standby forked and ended untaken. A kept codex
    // forks its rollout as it starts, so none still needs one once a turn has ended.
    let ours = |name: &str| name.starts_with("rollout-") && name.ends_with(".jsonl");
    crate::store::remove_files_in(&sessions.join(HISTORY_DAY), ours);
    text
}

/// What codex wrote in a run's rollout before the run's question: its context messages (its
/// skills, `<environment_context>`), `world_state` and `turn_context`. The run starts at the
/// last `task_started`; its question is the user message codex reports as a `UserMessage` item
/// right after it. `None` for a rollout with no run in it.
fn notes_before_question(rollout: &str) -> Option<Vec<Value>> {
    let lines: Vec<Value> =
        rollout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
    let started = lines
        .iter()
        .rposition(|l| l["type"] == "event_msg" && l["payload"]["type"] == "task_started")?
        + 1;
    let is_question = |at: usize| {
        let next = &lines.get(at + 1).unwrap_or(&Value::Null)["payload"];
        lines[at]["type"] == "response_item"
            && lines[at]["payload"]["role"] == "user"
            && next["type"] == "item_completed"
            && next["item"]["type"] == "UserMessage"
    };
    let Some(question) = (started..lines.len()).find(|&at| is_question(at)) else {
        return Some(Vec::new());
    };
    let noted = lines[started..question].iter().filter(|l| {
        matches!(l["type"].as_str(), Some("response_item" | "world_state" | "turn_context"))
    });
    Some(noted.cloned().collect())
}

/// An MCP server as codex's `mcp_servers` table describes it, as a TOML inline table.
fn mcp_server(server: &super::McpServer) -> String {
    use super::McpServer;
    let table = |pairs: &[(String, String)]| {
        let entries: Vec<String> =
            pairs.iter().map(|(k, v)| format!("{} = {}", toml_string(k), toml_string(v))).collect();
        format!("{{{}}}", entries.join(", "))
    };
    match server {
        McpServer::Stdio { command, args, env, .. } => {
            let args: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            format!(
                "{{command = {}, args = [{}], env = {}}}",
                toml_string(command),
                args.join(", "),
                table(env)
            )
        }
        McpServer::Http { url, headers, .. } | McpServer::Sse { url, headers, .. } => {
            format!("{{url = {}, http_headers = {}}}", toml_string(url), table(headers))
        }
    }
}

/// A TOML basic string: JSON's string escapes are TOML's, but for DEL, which TOML wants escaped.
fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string().replace('\u{7f}', "\\u007F")
}

/// What codex reads as it starts: its `AGENTS.md` files (in this folder and each above it).
fn reads_at_start(place: &super::StartPlace) -> Vec<PathBuf> {
    place.upward(&["AGENTS.md", "AGENTS.override.md"])
}

/// Decodes `codex exec --json`.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    lines: LineBuffer,
    paragraphs: Paragraphs,
    tools: ToolCalls,
    /// The ids of the items started and not completed yet.
    open: Vec<String>,
    /// The message of the last top-level `error`: `turn.failed` repeats it, so it is shown once.
    error: Option<String>,
    /// The model cca asked for, which its usage is priced by: `exec --json` names none.
    model: Option<String>,
}

impl super::Decoder for Decoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        LineBuffer::feed_to(self, |d| &mut d.lines, chunk, Self::line, out);
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        LineBuffer::finish_to(self, |d| &mut d.lines, Self::line, out);
        self.tools.flush(out);
        if let Some(error) = self.error.take() {
            out.push(Output::Note(error));
        }
    }

    fn stderr_noise(&self) -> Option<fn(&[u8]) -> bool> {
        SPEC.stderr_noise
    }
}

impl Decoder {
    /// A decoder pricing the usage by `model`, if cca names one.
    fn priced(model: Option<&str>) -> Decoder {
        Decoder { model: model.map(str::to_string), ..Decoder::default() }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let Some(v) = json_line(line, out) else { return };
        let item = &v["item"];
        match v["type"].as_str() {
            Some("thread.started") => {
                if let Some(id) = v["thread_id"].as_str() {
                    out.push(Output::Session(id.to_string()));
                }
            }
            Some("item.started") => {
                if let Some(call) = tool_call(item) {
                    let id = item["id"].as_str().unwrap_or("");
                    self.open.push(id.to_string());
                    self.tools.started(id, call, out);
                }
            }
            Some("item.completed") => self.completed(item, out),
            Some("error") => {
                let message = v["message"].as_str().unwrap_or("codex reported an error");
                if message.starts_with("Reconnecting...") {
                    out.push(Output::Retry(message.to_string()));
                } else if let Some(earlier) = self.error.replace(message.to_string()) {
                    out.push(Output::Note(earlier));
                }
            }
            Some("turn.completed") => {
                let usage = &v["usage"];
                let usage = Usage {
                    // All of the input; `cached_input_tokens` are among them.
                    input_tokens: usage["input_tokens"].as_u64(),
                    cached_tokens: usage["cached_input_tokens"].as_u64(),
                    output_tokens: usage["output_tokens"].as_u64(),
                    cost_usd: None,
                };
                out.push(Output::Usage(price::priced(self.model.as_deref(), usage)));
            }
            Some("turn.failed") => {
                let message = v["error"]["message"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| self.error.clone())
                    .unwrap_or_else(|| "codex reported a failed turn".to_string());
                self.error = None;
                // The API's status, quoted in the message: a refused key or login.
                if ["401 Unauthorized", "403 Forbidden"].iter().any(|sign| message.contains(sign)) {
                    out.push(Output::Refused(message.clone()));
                }
                out.push(Output::Error(message));
            }
            _ => {}
        }
    }

    fn completed(&mut self, item: &Value, out: &mut Vec<Output>) {
        let id = item["id"].as_str().unwrap_or("");
        match item["type"].as_str() {
            Some("agent_message") => {
                self.paragraphs.new_message();
                self.paragraphs.text(item["text"].as_str().unwrap_or(""), out);
            }
            // A warning: the turn goes on.
            Some("error") => {
                if let Some(message) = item["message"].as_str() {
                    out.push(Output::Note(message.to_string()));
                }
            }
            _ => {
                let Some(call) = tool_call(item) else { return };
                match self.open.iter().position(|open| open == id) {
                    Some(n) => drop(self.open.remove(n)),
                    // An item that completes without having started is announced now.
                    None => self.tools.started(id, call, out),
                }
                self.tools.settled(id, |call| settle(call, item), out);
            }
        }
    }
}

/// A web search or a command as a tool call; `None` for the other items.
fn tool_call(item: &Value) -> Option<ToolCall> {
    let (name, input) = match item["type"].as_str()? {
        "web_search" => ("web_search", serde_json::json!({ "query": item["query"] })),
        "command_execution" => ("command", serde_json::json!({ "command": item["command"] })),
        _ => return None,
    };
    Some(ToolCall::new(name, &input))
}

/// Whether a command's output says the sandbox refused it what it tried (Linux's words).
fn sandboxed(output: &str) -> bool {
    output.contains("Read-only file system")
}

/// How a completed item went: a command that failed (its exit code), was kept from writing by
/// the sandbox, or was declined.
fn settle(call: &mut ToolCall, item: &Value) {
    match item["status"].as_str() {
        // The sandbox's refusal is the command's own error (`touch: ... Read-only file system`).
        Some("failed") if item["aggregated_output"].as_str().is_some_and(sandboxed) => {
            call.status = ToolStatus::Refused;
            call.reason = Some("the read-only sandbox kept it from writing".to_string());
        }
        Some("failed") => {
            call.status = ToolStatus::Failed;
            call.reason = Some(match item["exit_code"].as_i64() {
                Some(code) => format!("exit code {code}"),
                None => "codex reported a failure".to_string(),
            });
        }
        Some("declined") => {
            call.status = ToolStatus::Refused;
            call.reason = Some("codex declined to run it".to_string());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(sample: &str) -> Vec<Output> {
        crate::engine::decoded(Decoder::default(), sample, 23)
    }

    use crate::engine::answer_text as text;

    fn tools(out: &[Output]) -> Vec<&ToolCall> {
        out.iter().filter_map(|o| if let Output::Tool(t) = o { Some(t) } else { None }).collect()
    }

    #[test]
    fn an_answer_its_id_and_usage_and_a_warning_that_fails_nothing() {
        // Printed by codex 0.169.0 against the loopback Responses API, for an unknown model.
        let out = decode(include_str!("../../../tests/fixtures/codex-exec-json-answer.jsonl"));
        assert_eq!(text(&out), "ECHO: hello there");
        assert_eq!(out[0], Output::Session("01a21f72-40b4-7920-972e-14668d6938df".into()));
        assert!(
            matches!(&out[1], Output::Note(n) if n.starts_with("Model metadata for `gpt-mock`"))
        );
        let usage = Usage {
            input_tokens: Some(100),
            cached_tokens: Some(40),
            output_tokens: Some(7),
            cost_usd: None,
        };
        assert!(out.contains(&Output::Usage(usage)), "{out:?}");
        assert!(!out.iter().any(|o| matches!(o, Output::Error(_))), "{out:?}");
    }

    #[test]
    fn usage_is_priced_by_the_model_cca_named_else_by_the_thread_s() {
        let usage = |out: &[Output]| {
            out.iter().find_map(|o| if let Output::Usage(u) = o { Some(u.clone()) } else { None })
        };
        let sample = include_str!("../../../tests/fixtures/codex-exec-json-answer.jsonl");
        let out = crate::engine::decoded(Decoder::priced(Some("gpt-5")), sample, 23);
        // 60 uncached, 40 cached, 7 out, at 1.25, 0.125 and 10 dollars a million.
        let expected = (60.0 * 1.25 + 40.0 * 0.125 + 7.0 * 10.0) / 1e6;
        assert_eq!(usage(&out).unwrap().cost_usd, Some(expected));
        let out = crate::engine::decoded(Decoder::priced(Some("gpt-mock")), sample, 23);
        assert_eq!(usage(&out).unwrap().cost_usd, None, "not on the price list");
        // The app server names its thread's model; the one cca named comes first.
        let lines = [
            r#"{"method":"thread/started","params":{"thread":{"id":"th","model":"gpt-5-mini"}}}"#,
            r#"{"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"last":{"inputTokens":10,"cachedInputTokens":4,"outputTokens":3}}}}"#,
            r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t1","status":"completed"}}}"#,
        ]
        .map(|l| format!("{l}\n"))
        .concat();
        let mini = (6.0 * 0.25 + 4.0 * 0.025 + 3.0 * 2.0) / 1e6;
        let out = crate::engine::decoded(app_server::ServerDecoder::priced(None), &lines, 17);
        assert_eq!(usage(&out).unwrap().cost_usd, Some(mini));
        let out = crate::engine::decoded(app_server::ServerDecoder::priced(Some("o3")), &lines, 17);
        assert_eq!(usage(&out).unwrap().cost_usd, Some((6.0 * 2.0 + 4.0 * 0.5 + 3.0 * 8.0) / 1e6));
    }

    #[test]
    fn searches_and_commands_are_tool_calls() {
        // Three turns of codex 0.169.0: a web search, a command that ran, one that failed.
        let out = decode(include_str!("../../../tests/fixtures/codex-exec-json-tools.jsonl"));
        let lines: Vec<String> = tools(&out).iter().map(|t| t.summary()).collect();
        assert_eq!(
            lines,
            [
                "web_search: rust 1.89 file locking",
                "command: /bin/bash -lc 'echo ok'",
                "command (failed): /bin/bash -lc false · exit code 1",
            ]
        );
        let started = out.iter().filter(|o| matches!(o, Output::ToolStarted(_))).count();
        assert_eq!(started, 3, "each announced once, when it started");
        // The search's answer, then two answers of later turns: each a message of its own.
        assert!(text(&out).starts_with("Found it.\n\nECHO: "), "{out:?}");
    }

    #[test]
    fn a_write_the_sandbox_refused_is_a_refused_call() {
        let sample = [
            r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'touch x'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'touch x'","aggregated_output":"touch: cannot touch 'x': Read-only file system\n","exit_code":1,"status":"failed"}}"#,
        ];
        let out = decode(&sample.map(|l| format!("{l}\n")).concat());
        let lines: Vec<String> = tools(&out).iter().map(|t| t.summary()).collect();
        assert_eq!(
            lines,
            [
                "command (refused): /bin/bash -lc 'touch x' · the read-only sandbox kept it from writing"
            ]
        );
    }

    #[test]
    fn a_refused_key_fails_the_turn_once_and_a_reconnect_is_a_retry() {
        let out = decode(include_str!("../../../tests/fixtures/codex-exec-json-401.jsonl"));
        let errors: Vec<&Output> =
            out.iter().filter(|o| matches!(o, Output::Error(_) | Output::Note(_))).collect();
        assert_eq!(errors.len(), 2, "the warning, and the failure once: {out:?}");
        assert!(out.iter().any(|o| matches!(o, Output::Refused(m) if m.contains("401"))));
        let sample = r#"{"type":"error","message":"Reconnecting... 1/5 (Connection failed)"}"#;
        assert_eq!(
            decode(&format!("{sample}\n")),
            [Output::Retry("Reconnecting... 1/5 (Connection failed)".into())]
        );
    }

    #[test]
    fn tidy_takes_the_run_s_rollout_and_prices_the_run_by_the_model_it_names() {
        let home = tempfile::tempdir().unwrap();
        let id = "0199aa-bb";
        let day = home.path().join(super::home().config_dir).join("sessions/2026/11/28");
        std::fs::create_dir_all(&day).unwrap();
        let rollout = day.join(format!("rollout-2026-11-28T08-00-00-{id}.jsonl"));
        let context = |model: &str| {
            format!(
                "{{\"type\":\"turn_context\",\"payload\":{{\"cwd\":\"/w\",\"model\":\"{model}\"}}}}\n"
            )
        };
        let usage = Usage {
            input_tokens: Some(1000),
            cached_tokens: Some(200),
            output_tokens: Some(100),
            cost_usd: None,
        };
        let left = |usage| super::super::Leftovers {
            home: Some(home.path()),
            claude_home: None,
            engine_session: id,
            notes: None,
            newest: 0,
            usage,
        };
        // An earlier run's model, then this run's: this run's prices it.
        std::fs::write(&rollout, context("o3") + &context("gpt-5-mini")).unwrap();
        let tidied = tidy(&left(&usage));
        assert!(!rollout.exists(), "codex's copy is removed");
        assert_eq!(tidied.model.as_deref(), Some("gpt-5-mini"));
        let cost = tidied.cost_usd.unwrap();
        assert!((cost - (800.0 * 0.25 + 200.0 * 0.025 + 100.0 * 2.0) / 1e6).abs() < 1e-12);
        // A model not on the price list: named, not priced.
        std::fs::write(&rollout, context("gpt-99")).unwrap();
        let tidied = tidy(&left(&usage));
        assert_eq!((tidied.model.as_deref(), tidied.cost_usd), (Some("gpt-99"), None));
        // A cost the output gave stands.
        std::fs::write(&rollout, context("gpt-5")).unwrap();
        let priced = Usage { cost_usd: Some(0.5), ..usage.clone() };
        assert_eq!(tidy(&left(&priced)).cost_usd, None);
        // No rollout: nothing told.
        assert_eq!(tidy(&left(&usage)), super::super::Tidied::default());
    }

    #[test]
    fn the_notes_are_what_codex_wrote_before_the_run_s_question() {
        // The shape of codex 0.169.0's rollout: an earlier turn resumed, then this run's.
        let lines = [
            r#"{"type":"session_meta","payload":{"id":"t"}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"old"}]}}"#,
            r#"{"type":"event_msg","payload":{"type":"task_started"}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<skills_instructions>"}]}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"}]}}"#,
            r#"{"type":"world_state","payload":{"full":true}}"#,
            r#"{"type":"turn_context","payload":{"cwd":"/w"}}"#,
            r#"{"type":"event_msg","payload":{"type":"thread_settings_applied"}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]}}"#,
            r#"{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage"}}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]}}"#,
        ];
        let notes = notes_before_question(&lines.map(|l| format!("{l}\n")).concat()).unwrap();
        let kinds: Vec<&str> = notes.iter().map(|n| n["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["response_item", "response_item", "world_state", "turn_context"]);
        assert_eq!(notes[1]["payload"]["content"][0]["text"], "<environment_context>");
        // cca's own rollout, with no run of codex's in it, notes nothing new.
        assert_eq!(notes_before_question("not a rollout\n"), None);
        let no_question = r#"{"type":"event_msg","payload":{"type":"task_started"}}"#;
        assert_eq!(notes_before_question(no_question), Some(Vec::new()));
    }

    #[test]
    fn mcp_servers_are_toml_inline_tables() {
        let stdio = crate::engine::McpServer::Stdio {
            name: "c c".into(),
            command: "/bin/cca".into(),
            args: vec!["mcp".into(), "a\"b".into()],
            env: vec![("K".into(), "v\u{7f}".into())],
        };
        assert_eq!(
            mcp_server(&stdio),
            r#"{command = "/bin/cca", args = ["mcp", "a\"b"], env = {"K" = "v\u007F"}}"#
        );
        let http = crate::engine::McpServer::Http {
            name: "h".into(),
            url: "https://x.example/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer t".into())],
        };
        let toml = mcp_server(&http);
        assert_eq!(
            toml,
            r#"{url = "https://x.example/mcp", http_headers = {"Authorization" = "Bearer t"}}"#
        );
        let parsed: toml::Table = format!("x = {toml}").parse().unwrap();
        assert_eq!(parsed["x"]["http_headers"]["Authorization"].as_str(), Some("Bearer t"));
        let parsed: toml::Table = format!("x = {}", mcp_server(&stdio)).parse().unwrap();
        assert_eq!(parsed["x"]["args"][1].as_str(), Some("a\"b"));
        assert_eq!(parsed["x"]["env"]["K"].as_str(), Some("v\u{7f}"));
        assert_eq!(toml_string("c c"), "\"c c\"");
    }

    #[test]
    fn a_turn_runs_read_only_with_the_prompt_on_stdin() {
        let live = std::sync::Arc::new(crate::transcript::Live::default());
        let stored = |_: &std::ops::Range<u64>| Ok(String::new());
        let image = crate::media::Image::new(b"GIF89a\x01\x00".to_vec()).unwrap();
        let request = Request {
            kept: false,
            system: "sys",
            live: &live,
            stored: &stored,
            attachments: Vec::new(),
            images: vec![&image],
            image_dir: std::path::Path::new("/h/.cca/files"),
            query: "q",
            model: Some("gpt-6-sol"),
            mcp_servers: &[],
            notes: None,
        };
        let mut engine = EngineConfig {
            name: "codex".into(),
            spec: &SPEC,
            program: "codex".into(),
            program_source: "default".into(),
            program_from_var: None,
            args: vec!["-c".into(), "sandbox_mode=\"workspace-write\"".into()],
            model_arg: None,
            version_args: None,
            system_prompt: SystemPromptMode::Native,
            system_prompt_arg: None,
            history: super::super::HistoryMode::Inline,
            tools: None,
            max_input_bytes: None,
            model: None,
            retries: None,
            policy: None,
            context_budget: 1,
            model_budgets: Default::default(),
            bytes_per_token: 3.5,
            keep_warm: None,
            standby: None,
        };
        let inv = invocation(&engine, "codex".into(), &request).unwrap();
        let plain: Vec<String> = inv
            .args
            .iter()
            .map(|a| match a {
                Arg::Plain(s) => s.to_string_lossy().into_owned(),
                Arg::File { name, .. } => format!("FILE:{name}"),
                Arg::FileAfter { prefix, name, .. } => format!("{prefix}FILE:{name}"),
                Arg::Home(_) => "HOME".into(),
                Arg::HomeFile { path, value, .. } => format!("{value}:{path}"),
            })
            .collect();
        let image_arg = format!("--image=/h/.cca/files/{}", image.file_name());
        let expected = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-c",
            "sandbox_mode=\"read-only\"",
            "-c",
            "approval_policy=\"never\"",
            "--ephemeral",
            "--model=gpt-6-sol",
            "-c",
            "model_instructions_file=FILE:system-prompt.md",
            &image_arg,
            "-c",
            "sandbox_mode=\"workspace-write\"",
            "--",
            "-",
        ];
        assert_eq!(plain, expected);
        assert_eq!(inv.env, [(crate::vars::CODEX_HOME.to_string(), Arg::Home(home()))]);
        let stdin = frame::to_string(&inv.stdin, &b""[..]).unwrap();
        assert!(!stdin.contains("sys"), "the system prompt is codex's instructions: {stdin}");
        engine.system_prompt = SystemPromptMode::Inline;
        let inv = invocation(&engine, "codex".into(), &request).unwrap();
        let stdin = frame::to_string(&inv.stdin, &b""[..]).unwrap();
        assert!(stdin.contains("sys") && stdin.contains("q"), "{stdin}");
        // Structured history (the default): codex keeps its rollout of the run for `tidy`.
        engine.history = HistoryMode::Structured;
        let inv = invocation(&engine, "codex".into(), &request).unwrap();
        assert!(!inv.args.contains(&Arg::plain("--ephemeral")), "{:?}", inv.args);
        assert_eq!(inv.args[inv.args.len() - 2..], [Arg::plain("--"), Arg::plain("-")]);
    }
}
