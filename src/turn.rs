//! One turn of a conversation, from the question to the appended exchange: the flow of
//! DESIGN.md, tying the pure modules to `store` (files) and `run` (the engine).
//!
//! The order matters for "never lose a word": the question is appended (under the session lock)
//! before the engine starts, and the outcome after it ends. Only a complete, non-empty answer
//! becomes part of the live context; anything else is recorded as a failed or interrupted attempt.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::call::{self, Interrupted, Verdict, locate};
use crate::compact;
use crate::config::{EngineConfig, PromptChoice, Settings, Source};
use crate::engine::Usage;
use crate::error::{Failure, exit};
use crate::prompt::{self, Prompt};
use crate::run::{self, Display, SignalWatch};
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
    let (id, created) = open_session(settings, store, ask, &now)?;
    let _lock = store.lock(&id, ask.wait, || say_waiting(&id))?;
    if created || store.latest().ok().flatten().as_deref() != Some(id.as_str()) {
        store.set_latest(&id)?;
    }
    let summary = store.summarize(&id)?;
    if ask.output != OutputMode::Quiet {
        for p in &summary.problems {
            let path = store.session_path(&id);
            eprintln!("cca: warning: {}: line {}: {}", path.display(), p.line, p.message);
        }
    }
    let header = &summary.header;
    let (engine, model) = engine_and_model(settings, header, created)?;
    let prompt = load_prompt(settings, store, Some(header))?;
    if prompt.hash() != header.prompt_hash && ask.output == OutputMode::Normal && !created {
        let name = &prompt.name;
        eprintln!("cca: note: the system prompt `{name}` has changed since this session started");
    }

    // From here on, nothing the user typed may be lost.
    let signals = SignalWatch::get()?;
    let turn = summary.exchanges + 1;
    let mut appender = Appender::open(store, &id)?;
    appender.append(question_records(ask, &now, turn).as_bytes())?;
    let session = call::Session { settings, store, id: &id, engine, model: model.as_deref() };
    let answering = Answering { session, prompt: &prompt, ask };
    let (ended, mut answer) = ended(engine, answering.answer(summary, signals));
    record_outcome(&mut appender, &answering, &ended, answer.as_mut(), turn)?;
    report(&answering, turn, &ended, answer)
}

/// The session a turn goes to: a new one (created here, with its header), or an existing one.
fn open_session(
    settings: &Settings,
    store: &Store,
    ask: &Ask,
    now: &chrono::DateTime<chrono::Utc>,
) -> Result<(String, bool)> {
    match &ask.target {
        Target::Resume => Ok((followed_session(settings, store)?, false)),
        Target::Session(wanted) => Ok((store.resolve_id(wanted)?, false)),
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
                name: None,
            };
            let stamp = now.format("%Y%m%d-%H%M%S").to_string();
            let id = store.create_session(&stamp, |id| {
                transcript::render_header(&Header { id: id.to_string(), ..header.clone() })
            })?;
            Ok((id, true))
        }
    }
}

/// The question and its attachment, as records to append.
fn question_records(ask: &Ask, now: &chrono::DateTime<chrono::Utc>, turn: u64) -> String {
    let at = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut records = transcript::render_record(
        &Record {
            kind: Kind::User,
            meta: Meta { at: Some(at), ..Meta::default() },
            content: ask.query.clone(),
        },
        turn,
    );
    if let Some(text) = &ask.attachment {
        records.push_str(&transcript::render_record(
            &Record {
                kind: Kind::Attachment,
                meta: Meta { name: Some("stdin".into()), ..Meta::default() },
                content: text.clone(),
            },
            turn,
        ));
    }
    records
}

/// Everything a turn needs to get its answer, once the session is settled.
struct Answering<'a> {
    session: call::Session<'a>,
    prompt: &'a Prompt,
    ask: &'a Ask,
}

impl Answering<'_> {
    /// Compacts first if needed, says how large the context is if it is large, and runs the
    /// engine. An error means the engine did not run to an end.
    fn answer(&self, summary: Summary, signals: &SignalWatch) -> Result<run::Outcome> {
        let (settings, ask, engine) = (self.session.settings, self.ask, self.session.engine);
        let new_bytes = ask.query.len() + ask.attachment.as_ref().map_or(0, String::len);
        let summary = compact::if_needed(
            &self.session,
            &summary,
            &self.prompt.text,
            new_bytes,
            ask.output,
            signals,
        )?
        .unwrap_or(summary);
        let tokens =
            engine.tokens(summary.live.bytes() + (self.prompt.text.len() + new_bytes) as u64);
        if tokens > settings.compaction.warn_tokens && ask.output != OutputMode::Quiet {
            let size = human_bytes(summary.live.bytes());
            eprintln!("cca: sending about {tokens} tokens ({size}) of context to {}", engine.name);
        }
        let spinner =
            (ask.output == OutputMode::Normal && ask.stderr_is_terminal && !settings.dumb_terminal)
                .then(|| engine.name.clone());
        let display = Display {
            print: ask.output != OutputMode::Json,
            spinner,
            live_stderr: ask.output == OutputMode::Normal,
        };
        call::call(
            &call::Call {
                session: &self.session,
                system: &self.prompt.text,
                live: &summary.live,
                attachment: ask.attachment.as_deref(),
                query: &ask.query,
                display,
            },
            signals,
        )
    }
}

/// How the turn ended, and the answer's scratch file if the engine ran.
fn ended(engine: &EngineConfig, finished: Result<run::Outcome>) -> (Ended, Option<File>) {
    match finished {
        Ok(outcome) => (
            Ended {
                verdict: call::verdict(engine, &outcome),
                duration: outcome.duration,
                usage: outcome.usage.clone(),
                stderr_tail: outcome.stderr_tail.clone(),
                printed_newline: outcome.printed_newline,
            },
            Some(outcome.answer),
        ),
        Err(e) => {
            let failure = e.chain().find_map(|c| c.downcast_ref::<Failure>());
            let verdict = match e.downcast_ref::<Interrupted>() {
                Some(Interrupted(signal)) => Verdict::Interrupted { signal: *signal },
                None => Verdict::Failed {
                    reason: format!("{e:#}"),
                    hint: failure.and_then(|f| f.hint.clone()),
                    code: failure.map_or(exit::ERROR, |f| f.code),
                },
            };
            let ended = Ended {
                verdict,
                duration: Duration::ZERO,
                usage: Usage::default(),
                stderr_tail: String::new(),
                printed_newline: true,
            };
            (ended, None)
        }
    }
}

/// Appends the answer, or the failed or interrupted attempt with what arrived of it.
fn record_outcome(
    appender: &mut Appender,
    a: &Answering,
    ended: &Ended,
    answer: Option<&mut File>,
    turn: u64,
) -> Result<()> {
    let base = Meta {
        at: Some(now_string(a.session.settings)),
        engine: Some(a.session.engine.name.clone()),
        model: a.session.model.map(str::to_string),
        duration_ms: Some(ended.duration.as_millis() as u64),
        ..Meta::default()
    };
    let (kind, meta) = match &ended.verdict {
        Verdict::Answered => (
            Kind::Assistant,
            Meta {
                input_tokens: ended.usage.input_tokens,
                output_tokens: ended.usage.output_tokens,
                cost_usd: ended.usage.cost_usd,
                ..base
            },
        ),
        Verdict::Failed { reason, .. } => {
            (Kind::Failed, Meta { reason: Some(reason.clone()), ..base })
        }
        Verdict::Interrupted { signal } => {
            (Kind::Interrupted, Meta { reason: Some(signal_name(*signal)), ..base })
        }
    };
    appender
        .append_with(|file| {
            use std::io::Write;
            file.write_all(transcript::open_record(kind, &meta, turn).as_bytes())?;
            let mut body = BodyWriter::new();
            let mut out = Vec::with_capacity(72 * 1024);
            if let Some(answer) = answer {
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
        })
}

struct Ended {
    verdict: Verdict,
    duration: Duration,
    usage: Usage,
    stderr_tail: String,
    printed_newline: bool,
}

/// Prints the ending: the JSON object, or the error and hint; returns the exit code.
fn report(a: &Answering, turn: u64, ended: &Ended, answer: Option<File>) -> Result<TurnResult> {
    let (ask, id) = (a.ask, a.session.id);
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
            "path": a.session.store.session_path(id),
            "turn": turn,
            "ok": error.is_none(),
            "answer": text,
            "error": error.as_ref().map(|(reason, _)| reason),
            "engine": a.session.engine.name,
            "model": a.session.model,
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

/// The engine and model that answer in a session: a flag wins; otherwise what the session
/// started with (a session just `created` has them from the settings already).
pub fn engine_and_model<'a>(
    settings: &'a Settings,
    header: &Header,
    created: bool,
) -> Result<(&'a EngineConfig, Option<String>)> {
    let name = choose_engine(settings, Some(header));
    let engine = settings
        .engines
        .get(&name)
        .ok_or_else(|| crate::config::unknown_engine(&name, &settings.engines))?;
    let model = match &settings.model {
        Some(m) if m.source == Source::Flag || created => Some(m.value.clone()),
        _ => header.model.clone().or_else(|| engine.model.clone()),
    };
    Ok((engine, model))
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
        PromptChoice::Name(name) => named_prompt(store, &name),
    }
}

/// A prompt by name: the user's `$CCA_HOME/prompts/NAME.md`, else the built-in.
pub fn named_prompt(store: &Store, name: &str) -> Result<Prompt> {
    prompt::validate_name(name).map_err(Failure::usage)?;
    if let Some(text) = store.read_prompt_override(name)? {
        return Ok(Prompt { name: name.to_string(), text });
    }
    match prompt::builtin(name) {
        Some(text) => Ok(Prompt { name: name.to_string(), text: text.to_string() }),
        None => Err(Failure::usage(format!("there is no prompt named `{name}`"))
            .hint(format!(
                "built-in prompts: {}; add your own as {}",
                prompt::builtin_names().collect::<Vec<_>>().join(", "),
                store.home.join("prompts").join(format!("{name}.md")).display()
            ))
            .into()),
    }
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
