//! One turn of a conversation, from the question to the appended exchange: the flow of
//! DESIGN.md, tying the pure modules to `store` (files) and `run` (the engine).
//!
//! The order matters for "never lose a word": the question is appended (under the session lock)
//! before the engine starts, and the outcome after it ends. Only a complete, non-empty answer
//! becomes part of the live context; anything else is recorded as a failed or interrupted attempt.

use std::ffi::OsString;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::config::{EngineConfig, EngineKind, PromptChoice, Settings, Source};
use crate::engine::{self, Arg, Invocation, Request, Usage};
use crate::error::{Failure, exit};
use crate::frame;
use crate::prompt::{self, Prompt};
use crate::run::{self, Display, SignalWatch, Spawn};
use crate::store::{Appender, Store};
use crate::transcript::{self, BodyWriter, Header, Kind, Meta, Record, Summary};

/// Which session a turn goes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A new session.
    New,
    /// `--resume`: the session `CCA_SESSION` names, or `latest`.
    Resume,
    /// `--session ID`: this one (an id or unique prefix).
    Session(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Stream the answer, with a spinner and the engine's stderr.
    Normal,
    /// Stream the answer only.
    Quiet,
    /// One JSON object at the end.
    Json,
}

/// One question.
#[derive(Debug, Clone)]
pub struct Ask {
    pub target: Target,
    pub query: String,
    pub attachment: Option<String>,
    pub output: OutputMode,
    pub wait: bool,
    /// Whether stderr is a terminal (for the spinner).
    pub stderr_is_terminal: bool,
}

/// How a turn ended, for the caller (chat goes on; search exits with `exit_code`).
#[derive(Debug)]
pub struct TurnResult {
    pub session: String,
    pub exit_code: u8,
}

/// Asks the question and records the exchange.
pub fn ask(settings: &Settings, store: &Store, ask: &Ask) -> Result<TurnResult> {
    let now = now(settings);
    let notices = ask.output == OutputMode::Normal;

    // The session, its lock, and what it says about engine, model and prompt.
    let (id, created) = match &ask.target {
        Target::New => {
            let engine = choose_engine(settings, None);
            let prompt = load_prompt(settings, store, None)?;
            let model = settings
                .model
                .as_ref()
                .map(|m| m.value.clone())
                .or_else(|| settings.engines.get(&engine).and_then(|e| e.model.clone()));
            let header = Header {
                format: transcript::FORMAT,
                id: String::new(),
                created: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                engine,
                model,
                prompt: prompt.name.clone(),
                prompt_hash: prompt.hash(),
                cwd: std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
                title: transcript::one_line(ask.query.lines().next().unwrap_or(""), 80),
                forked_from: None,
            };
            let stamp = now.format("%Y%m%d-%H%M%S").to_string();
            let id = store.create_session(&stamp, |id| {
                transcript::render_header(&Header { id: id.to_string(), ..header.clone() })
            })?;
            (id, true)
        }
        Target::Resume => (followed_session(settings, store)?, false),
        Target::Session(wanted) => (store.resolve_id(wanted)?, false),
    };
    let _lock = store.lock(&id, ask.wait, || {
        eprintln!(
            "cca: session {id} is busy: another cca is answering in it; waiting for it to finish…"
        );
    })?;
    if created || store.latest().ok().flatten().as_deref() != Some(id.as_str()) {
        store.set_latest(&id)?;
    }
    let summary = store.summarize(&id)?;
    if ask.output != OutputMode::Quiet {
        for p in &summary.problems {
            eprintln!(
                "cca: warning: {}: line {}: {}",
                store.session_path(&id).display(),
                p.line,
                p.message
            );
        }
    }
    let header = &summary.header;
    let engine_name = choose_engine(settings, Some(header));
    let engine = settings
        .engines
        .get(&engine_name)
        .ok_or_else(|| crate::config::unknown_engine(&engine_name, &settings.engines))?;
    let model = match &settings.model {
        Some(m) if m.source == Source::Flag || created => Some(m.value.clone()),
        _ => header.model.clone().or_else(|| engine.model.clone()),
    };
    let prompt = load_prompt(settings, store, Some(header))?;
    if prompt.hash() != header.prompt_hash && notices && !created {
        eprintln!(
            "cca: note: the system prompt `{}` has changed since this session started",
            prompt.name
        );
    }

    // From here on, nothing the user typed may be lost.
    let signals = SignalWatch::get()?;
    let turn = summary.exchanges + 1;
    let mut appender = Appender::open(store, &id)?;
    let at = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut question = transcript::render_record(
        &Record {
            kind: Kind::User,
            meta: Meta { at: Some(at.clone()), ..Meta::default() },
            content: ask.query.clone(),
        },
        turn,
    );
    if let Some(text) = &ask.attachment {
        question.push_str(&transcript::render_record(
            &Record {
                kind: Kind::Attachment,
                meta: Meta { name: Some("stdin".into()), ..Meta::default() },
                content: text.clone(),
            },
            turn,
        ));
    }
    appender.append(question.as_bytes())?;

    let attempt = Attempt {
        settings,
        store,
        id: &id,
        engine,
        model: model.as_deref(),
        prompt: &prompt,
        summary: &summary,
        ask,
    };
    let finished = attempt.run(signals);
    let meta_base = Meta {
        at: Some(now_string(settings)),
        engine: Some(engine.name.clone()),
        model: model.clone(),
        ..Meta::default()
    };
    let (ended, answer) = match finished {
        Ok(outcome) => {
            let verdict = verdict(engine, &outcome);
            (
                Ended {
                    verdict,
                    duration: outcome.duration,
                    usage: outcome.usage.clone(),
                    stderr_tail: outcome.stderr_tail.clone(),
                    printed_newline: outcome.printed_newline,
                },
                Some(outcome.answer),
            )
        }
        Err(e) => {
            let hint =
                e.chain().find_map(|c| c.downcast_ref::<Failure>()).and_then(|f| f.hint.clone());
            let reason = format!("{e:#}");
            (
                Ended {
                    verdict: Verdict::Failed { reason, hint, code: failure_code(&e) },
                    duration: Duration::ZERO,
                    usage: Usage::default(),
                    stderr_tail: String::new(),
                    printed_newline: true,
                },
                None,
            )
        }
    };

    let (kind, meta) = match &ended.verdict {
        Verdict::Answered => (
            Kind::Assistant,
            Meta {
                duration_ms: Some(ended.duration.as_millis() as u64),
                input_tokens: ended.usage.input_tokens,
                output_tokens: ended.usage.output_tokens,
                cost_usd: ended.usage.cost_usd,
                ..meta_base
            },
        ),
        Verdict::Failed { reason, .. } => (
            Kind::Failed,
            Meta {
                duration_ms: Some(ended.duration.as_millis() as u64),
                reason: Some(reason.clone()),
                ..meta_base
            },
        ),
        Verdict::Interrupted { signal } => (
            Kind::Interrupted,
            Meta {
                reason: Some(signal_name(*signal)),
                duration_ms: Some(ended.duration.as_millis() as u64),
                ..meta_base
            },
        ),
    };
    let mut answer = answer;
    appender.append_with(|file| {
        use std::io::Write;
        file.write_all(transcript::open_record(kind, &meta, turn).as_bytes())?;
        let mut body = BodyWriter::new();
        let mut out = Vec::with_capacity(72 * 1024);
        if let Some(answer) = answer.as_mut() {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = answer.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                out.clear();
                body.push(&buf[..n], &mut out);
                file.write_all(&out)?;
            }
        }
        out.clear();
        body.finish(&mut out);
        file.write_all(&out)
    })
    .map_err(|e| {
        let what = match kind {
            Kind::Assistant => "the answer was shown but could not be saved",
            _ => "the outcome of this attempt could not be saved",
        };
        e.context(Failure::new(exit::ERROR, what).hint(
            "free some disk space; your question is in the transcript, and the next turn will not send it",
        ))
    })?;

    report(settings, store, &id, turn, engine, model.as_deref(), ask, &ended, answer)
}

/// The parts of a turn that run the engine; any error here becomes a failed attempt.
struct Attempt<'a> {
    settings: &'a Settings,
    store: &'a Store,
    id: &'a str,
    engine: &'a EngineConfig,
    model: Option<&'a str>,
    prompt: &'a Prompt,
    summary: &'a Summary,
    ask: &'a Ask,
}

impl Attempt<'_> {
    fn run(&self, signals: &SignalWatch) -> Result<run::Outcome> {
        if let Some(signal) = signals.pending() {
            return Err(Interrupted(signal).into());
        }
        let transcript = self.store.open_session(self.id)?;
        let stored = |range: &std::ops::Range<u64>| -> io::Result<String> {
            let mut buf = vec![0u8; (range.end - range.start) as usize];
            std::os::unix::fs::FileExt::read_exact_at(&transcript, &mut buf, range.start)?;
            let text = String::from_utf8(buf)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            Ok(transcript::unescape(&text))
        };
        let request = Request {
            system: &self.prompt.text,
            live: &self.summary.live,
            stored: &stored,
            attachment: self
                .ask
                .attachment
                .as_deref()
                .map(|text| frame::Attachment { name: "stdin", text }),
            query: &self.ask.query,
            model: self.model,
        };
        let program = locate(self.settings, self.engine)?;
        let invocation = engine::invocation(self.engine, program, &request)?;
        let input_bytes = frame::write(&invocation.stdin, &transcript, &mut io::sink())
            .context("cannot read the transcript")?;
        if let Some(limit) = self.engine.max_input_bytes
            && input_bytes > limit
        {
            return Err(Failure::new(
                exit::ERROR,
                format!(
                    "this turn is {} for {}, over its limit of {}; it was not sent",
                    human_bytes(input_bytes),
                    self.engine.name,
                    human_bytes(limit)
                ),
            )
            .hint("start a new session, or `cca clear` this one, or raise max_input_bytes in config.toml")
            .into());
        }
        let scratch = self.store.engine_scratch_dir()?;
        let (args, env) = materialize(self.store, &invocation, scratch.path())?;
        let spinner = (self.ask.output == OutputMode::Normal
            && self.ask.stderr_is_terminal
            && !self.settings.dumb_terminal)
            .then(|| self.engine.name.clone());
        let display = Display {
            print: self.ask.output != OutputMode::Json,
            spinner,
            live_stderr: self.ask.output == OutputMode::Normal,
        };
        let spawn = Spawn {
            program: invocation.program.clone(),
            args,
            env,
            stdin: invocation.stdin,
            transcript,
        };
        let decoder = engine::decoder(self.engine.kind);
        let outcome = run::run(spawn, decoder, self.store.scratch_file()?, &display, signals)?;
        drop(scratch);
        // cca is the memory: gemini's own copy of the turn must not pile up.
        if let (EngineKind::Gemini, Some(id), Some(home)) =
            (self.engine.kind, &outcome.engine_session, &self.settings.gemini_home)
        {
            crate::store::remove_engine_session_files(
                &engine::gemini::sessions_root(home),
                |path| engine::gemini::session_file_matches(path, id),
            );
        }
        Ok(outcome)
    }
}

/// Stopped by a signal before the engine started.
#[derive(Debug)]
struct Interrupted(i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", signal_name(self.0))
    }
}

impl std::error::Error for Interrupted {}

enum Verdict {
    Answered,
    Failed { reason: String, hint: Option<String>, code: u8 },
    Interrupted { signal: i32 },
}

struct Ended {
    verdict: Verdict,
    duration: Duration,
    usage: Usage,
    stderr_tail: String,
    printed_newline: bool,
}

fn failure_code(e: &anyhow::Error) -> u8 {
    if let Some(Interrupted(signal)) = e.downcast_ref::<Interrupted>() {
        return run::signal_exit_code(*signal);
    }
    e.chain().find_map(|c| c.downcast_ref::<Failure>()).map_or(exit::ERROR, |f| f.code)
}

/// Decides whether the engine answered (DESIGN.md: only a successful, non-empty answer counts).
fn verdict(engine: &EngineConfig, outcome: &run::Outcome) -> Verdict {
    if let Some(signal) = outcome.interrupted {
        return Verdict::Interrupted { signal };
    }
    let name = &engine.name;
    let said = |fallback: &str| -> String {
        outcome
            .engine_error
            .clone()
            .or_else(|| last_line(&outcome.stderr_tail))
            .unwrap_or_else(|| fallback.to_string())
    };
    let failed =
        |reason: String, hint: Option<String>| Verdict::Failed { reason, hint, code: exit::ERROR };
    let status = outcome.status.as_ref();
    if let Some(status) = status.filter(|s| !s.success()) {
        return failed(
            format!("{name} failed ({}): {}", run::describe_status(status), said("no message")),
            Some(retry_hint(engine)),
        );
    }
    if let Some(error) = &outcome.engine_error {
        return failed(format!("{name} reported an error: {error}"), Some(retry_hint(engine)));
    }
    if let Some(e) = &outcome.feed_error {
        return failed(format!("cannot send the prompt to {name}: {e}"), None);
    }
    if !outcome.answer_has_text {
        let hint = if engine.kind == EngineKind::Gemini {
            "gemini answers nothing when the prompt is larger than the model's context window; \
             try `cca search` for a new session, or a model with a larger window"
        } else {
            "try again; if it keeps happening, run the engine by hand to see what it does"
        };
        return failed(format!("{name} returned an empty answer"), Some(hint.to_string()));
    }
    Verdict::Answered
}

fn retry_hint(engine: &EngineConfig) -> String {
    match engine.kind {
        EngineKind::Claude => "for claude's own diagnosis, run `claude doctor`".to_string(),
        _ => format!("run {} by hand to see more", engine.name),
    }
}

fn last_line(text: &str) -> Option<String> {
    text.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
}

/// Prints the ending: the JSON object, or the error and hint; returns the exit code.
#[allow(clippy::too_many_arguments)]
fn report(
    settings: &Settings,
    store: &Store,
    id: &str,
    turn: u64,
    engine: &EngineConfig,
    model: Option<&str>,
    ask: &Ask,
    ended: &Ended,
    answer: Option<std::fs::File>,
) -> Result<TurnResult> {
    let _ = settings;
    let (code, error) = match &ended.verdict {
        Verdict::Answered => (exit::OK, None),
        Verdict::Failed { reason, hint, code } => (*code, Some((reason.clone(), hint.clone()))),
        Verdict::Interrupted { signal } => (
            run::signal_exit_code(*signal),
            Some((
                format!("interrupted ({})", signal_name(*signal)),
                Some("the partial answer is kept in the transcript too".into()),
            )),
        ),
    };
    if ask.output == OutputMode::Json {
        let mut text = String::new();
        if let Some(mut file) = answer {
            io::Seek::rewind(&mut file).context("cannot read back the answer")?;
            BufReader::new(file)
                .read_to_string(&mut text)
                .context("cannot read back the answer")?;
        }
        let value = json!({
            "session": id,
            "path": store.session_path(id),
            "turn": turn,
            "ok": error.is_none(),
            "answer": text,
            "error": error.as_ref().map(|(reason, _)| reason),
            "engine": engine.name,
            "model": model,
            "duration_ms": ended.duration.as_millis() as u64,
            "usage": {
                "input_tokens": ended.usage.input_tokens,
                "output_tokens": ended.usage.output_tokens,
            },
            "cost_usd": ended.usage.cost_usd,
        });
        println!("{value}");
    } else if !ended.printed_newline && std::io::IsTerminal::is_terminal(&io::stdout()) {
        println!();
    }
    if let Some((reason, hint)) = error {
        if ask.output == OutputMode::Quiet && !ended.stderr_tail.trim().is_empty() {
            eprintln!("{}", ended.stderr_tail.trim_end());
        }
        eprintln!("cca: error: {reason}");
        let kept = "your question is kept in the transcript, marked as not answered, and will not be \
                    sent again; ask again with `cca search --resume`";
        for line in hint.iter().flat_map(|h| h.lines()).chain(std::iter::once(kept)) {
            eprintln!("hint: {line}");
        }
    }
    Ok(TurnResult { session: id.to_string(), exit_code: code })
}

/// The session a terminal follows, which `--resume` and `,` continue: `CCA_SESSION`, else `latest`.
pub fn followed_session(settings: &Settings, store: &Store) -> Result<String> {
    if let Some(session) = &settings.session {
        return store.resolve_id(&session.value);
    }
    store.latest()?.ok_or_else(|| {
        Failure::usage("there is no session to continue yet")
            .hint("start one with `cca search \"your question\"`")
            .into()
    })
}

/// The session a command is about: the id given (or a unique start of one), else the followed one.
pub fn session_for(settings: &Settings, store: &Store, id: Option<&str>) -> Result<String> {
    match id {
        Some(id) => store.resolve_id(id),
        None => followed_session(settings, store),
    }
}

pub fn say_waiting(id: &str) {
    eprintln!(
        "cca: session {id} is busy: another cca is answering in it; waiting for it to finish…"
    );
}

/// The engine for this turn: a flag wins; then the session's own; then settings; then the first
/// of claude and gemini found on PATH.
fn choose_engine(settings: &Settings, header: Option<&Header>) -> String {
    if let Some(e) = &settings.engine
        && (e.source == Source::Flag || header.is_none())
    {
        return e.value.clone();
    }
    if let Some(h) = header
        && settings.engines.contains_key(&h.engine)
    {
        return h.engine.clone();
    }
    default_engine(settings)
}

/// The engine new sessions use: the one configured, else the first of claude and gemini found
/// on PATH (claude if neither is, so that the error names it).
pub fn default_engine(settings: &Settings) -> String {
    if let Some(e) = &settings.engine {
        return e.value.clone();
    }
    ["claude", "gemini"]
        .into_iter()
        .find(|name| locate(settings, &settings.engines[*name]).is_ok())
        .unwrap_or("claude")
        .to_string()
}

/// The system prompt: a flag wins; a session keeps its own; else settings.
fn load_prompt(settings: &Settings, store: &Store, header: Option<&Header>) -> Result<Prompt> {
    let choice = match header {
        Some(h) if settings.prompt.source != Source::Flag => {
            if h.prompt.starts_with('/') {
                PromptChoice::File(PathBuf::from(&h.prompt))
            } else {
                PromptChoice::Name(h.prompt.clone())
            }
        }
        _ => settings.prompt.value.clone(),
    };
    match choice {
        PromptChoice::File(path) => {
            let path = std::path::absolute(&path).unwrap_or(path);
            let text = crate::store::read_text(&path)?;
            Ok(Prompt { name: path.display().to_string(), text })
        }
        PromptChoice::Name(name) => {
            prompt::validate_name(&name).map_err(Failure::usage)?;
            if let Some(text) = store.read_prompt_override(&name)? {
                return Ok(Prompt { name, text });
            }
            match prompt::builtin(&name) {
                Some(text) => Ok(Prompt { name, text: text.to_string() }),
                None => Err(Failure::usage(format!("there is no prompt named `{name}`"))
                    .hint(format!(
                        "built-in prompts: {}; add your own as {}",
                        prompt::builtin_names().collect::<Vec<_>>().join(", "),
                        store.home.join("prompts").join(format!("{name}.md")).display()
                    ))
                    .into()),
            }
        }
    }
}

/// Finds the engine's program: a path as given, or a name on PATH.
pub fn locate(settings: &Settings, engine: &EngineConfig) -> Result<PathBuf> {
    let program = Path::new(&engine.program);
    let found = if program.components().count() > 1 {
        program.is_file().then(|| program.to_path_buf())
    } else {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        which::which_in(program, settings.path.as_ref(), cwd).ok()
    };
    found.ok_or_else(|| {
        let looked = if program.components().count() > 1 {
            format!("{} ({}) does not exist", program.display(), engine.program_source)
        } else {
            format!("`{}` is not on PATH", program.display())
        };
        Failure::new(exit::ERROR, format!("engine {} not found: {looked}", engine.name))
            .hint(engine::install_hint(engine))
            .into()
    })
}

type EnvVars = Vec<(OsString, OsString)>;

/// Creates the files an invocation asks for and returns plain arguments and environment.
fn materialize(store: &Store, inv: &Invocation, dir: &Path) -> Result<(Vec<OsString>, EnvVars)> {
    let resolve = |arg: &Arg| -> Result<OsString> {
        match arg {
            Arg::Plain(s) => Ok(s.clone()),
            Arg::File { name, contents } => {
                let path = dir.join(name);
                store.write_private(&path, contents.as_bytes())?;
                Ok(path.into_os_string())
            }
        }
    };
    let args = inv.args.iter().map(resolve).collect::<Result<_>>()?;
    let env =
        inv.env.iter().map(|(k, v)| Ok((OsString::from(k), resolve(v)?))).collect::<Result<_>>()?;
    Ok((args, env))
}

pub fn now(settings: &Settings) -> chrono::DateTime<chrono::Utc> {
    settings.now.unwrap_or_else(chrono::Utc::now)
}

pub fn now_string(settings: &Settings) -> String {
    now(settings).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn signal_name(signal: i32) -> String {
    match signal {
        signal_hook::consts::SIGINT => "Ctrl-C".into(),
        signal_hook::consts::SIGTERM => "SIGTERM".into(),
        signal_hook::consts::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}
