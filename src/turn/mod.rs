//! One turn of a conversation, from the question to the recorded outcome: the flow of
//! docs/DESIGN.md as a library call. [`ask`] takes the session, the question and its attachments,
//! reports what happens to an [`Observer`], and stops when its [`Cancel`] says so. It prints
//! nothing and decides no exit code: the front ends (terminal, `--json`, chat) do.
//!
//! The order matters for "never lose a word": the question is appended (under the session lock)
//! before the engine starts, and the outcome after it ends. Only a complete, non-empty answer
//! becomes part of the live context; anything else is recorded as a failed or interrupted attempt.
//! Turns on different sessions may run at once, each on its own thread with its own `Cancel`.

use std::cell::RefCell;
use std::fs::File;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

pub(crate) use crate::call::Attachment;
use crate::call::{self, Verdict};
use crate::compact::{self, Compaction};
use crate::config::Settings;
use crate::engine::{EngineConfig, ToolCall, Usage};
use crate::error::{Failure, exit};
use crate::human::human_bytes;
use crate::prompt::Prompt;
use crate::run::{self, Cancel, Progress};
use crate::session::{self, Session};
use crate::steer::{self, Inbox, Steered};
use crate::store::Store;
use crate::transcript::{self, Header, Summary, Totals};
use crate::warm::{Slot, Warm};

mod record;
use record::{Attempt, Recorder, ended};

/// Which session a turn goes to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    /// A new session.
    New,
    /// `--resume`: the session `CCA_SESSION` names, or `latest`.
    Resume,
    /// `--session ID`: this one (an id or unique prefix).
    Session(String),
}

/// One question.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub target: Target,
    pub query: String,
    /// Context handed over with the question: stdin, files.
    pub attachments: Vec<Attachment>,
    /// Wait for a session that another cca is answering in (else fail with exit 75).
    pub wait: bool,
}

/// How widely a notice is worth showing: a front end that is asked to be quiet shows less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Only when the user sees everything (a changed system prompt).
    Detail,
    /// Worth knowing (a problem in the file, a large context, a compaction).
    Info,
    /// Always shown (a compaction failed).
    Warning,
}

/// What happens during a turn, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event<'a> {
    /// Another cca is answering in the session; the turn waits for it.
    Waiting { session: &'a str },
    /// The question is in the transcript: from here on nothing typed can be lost.
    Recorded { session: &'a str, created: bool },
    /// Something to tell the user, in a sentence (without the `cca: ` prefix).
    Notice { level: Level, text: &'a str },
    /// The engine is starting on the answer (a front end may show that it waits).
    Started { engine: &'a str },
    /// Answer text, as it streams.
    Text(&'a str),
    /// A tool call the engine starts (its [`Event::Tool`] follows, in the same order).
    ToolStarted(&'a ToolCall),
    /// A tool call the engine made, once its result is in (ran, refused or failed).
    Tool(&'a ToolCall),
    /// What the engine wrote on stderr, or a line of its output that is not the answer.
    EngineOutput(&'a [u8]),
    /// The engine is retrying a failing API (a sentence).
    Retry(&'a str),
    /// The turn was asked to stop; the engine is being ended.
    Stopping,
    /// A steer arrived, was taken by the engine, or was not taken before the turn ended.
    Steer(Steered<'a>),
}

/// Receives a turn's events. Called on the turn's own thread.
pub(crate) trait Observer {
    fn event(&mut self, event: Event<'_>);
}

/// A closure is an observer: for a front end that handles a few events in place.
impl<F: FnMut(Event<'_>)> Observer for F {
    fn event(&mut self, event: Event<'_>) {
        self(event)
    }
}

/// How a turn ended, once its question was recorded.
#[derive(Debug)]
pub(crate) struct TurnResult {
    pub session: String,
    pub path: PathBuf,
    /// The exchange the last answer belongs to (steers taken during the turn add exchanges).
    pub turn: u64,
    pub engine: String,
    pub model: Option<String>,
    pub verdict: Verdict,
    pub duration: Duration,
    pub usage: Usage,
    /// What every answer in the session has cost so far, this turn's included, as reported.
    pub session_totals: Totals,
    /// The end of what the engine wrote on stderr, for a front end that did not show it live.
    pub stderr_tail: String,
}

impl TurnResult {
    /// The exit code a command-line front end ends with.
    pub(crate) fn exit_code(&self) -> u8 {
        match &self.verdict {
            Verdict::Answered => exit::OK,
            Verdict::Failed { code, .. } => *code,
            Verdict::Interrupted { why } => why.exit_code(),
        }
    }
}

/// Asks the question and records the exchange. `Err` means nothing was recorded (bad input, a
/// session that cannot be read, a cancel while waiting for it); once the question is recorded,
/// every ending is an `Ok(TurnResult)`, unless the outcome itself cannot be saved.
pub(crate) fn ask(
    settings: &Settings,
    store: &Store,
    ask: &Ask,
    observer: &mut dyn Observer,
    cancel: &Cancel,
) -> Result<TurnResult> {
    ask_steered(settings, store, ask, &Inbox::new(), observer, cancel)
}

/// [`ask`], with steers: while the turn runs it listens for `cca steer` (see `steer`), and
/// takes messages a front end puts in `inbox` itself. An engine that reads input while it runs
/// gets each steer at once; otherwise the steers are asked as the next turn, as soon as the
/// answer is recorded, by this same call. Every answer is recorded, each steer before the
/// answer to it, in the order the engine saw them. Steers the engine never took (the answer was
/// interrupted or failed) are kept as attempts that were not answered.
pub(crate) fn ask_steered(
    settings: &Settings,
    store: &Store,
    ask: &Ask,
    inbox: &Inbox,
    observer: &mut dyn Observer,
    cancel: &Cancel,
) -> Result<TurnResult> {
    ask_kept(settings, store, ask, inbox, None, observer, cancel)
}

/// [`ask_steered`] for a front end that outlives the turn: the session's engine is kept in
/// `warm` between turns, and a turn it fits gets only the new message (docs/DESIGN.md, "Warm
/// engines"). Whatever the kept engine, the turn is recorded as any other.
pub(crate) fn ask_warm(
    settings: &Settings,
    store: &Store,
    ask: &Ask,
    inbox: &Inbox,
    warm: &Warm,
    observer: &mut dyn Observer,
    cancel: &Cancel,
) -> Result<TurnResult> {
    ask_kept(settings, store, ask, inbox, Some(warm), observer, cancel)
}

fn ask_kept(
    settings: &Settings,
    store: &Store,
    ask: &Ask,
    inbox: &Inbox,
    warm: Option<&Warm>,
    observer: &mut dyn Observer,
    cancel: &Cancel,
) -> Result<TurnResult> {
    let now = settings.now();
    let (id, created) = open_session(settings, store, ask, &now)?;
    let _lock = store.lock_unless(
        &id,
        ask.wait,
        || observer.event(Event::Waiting { session: &id }),
        || cancel.check(),
    )?;
    // Taken before anything changes the transcript: it fits only the file cca left.
    let kept = RefCell::new(warm.and_then(|w| w.take(store, &id)));
    let settled = settle(settings, store, &id, created, ask, observer)?;
    let engine = settled.engine;
    let session = Session { settings, store, id: &id, engine, model: settled.model.as_deref() };

    // From here on, nothing the user typed may be lost.
    cancel.check()?;
    let mut recorder = Recorder::start(session, ask, &now, &settled)?;
    observer.event(Event::Recorded { session: &id, created });
    let mut listener = listen(store, &id, inbox, observer);
    let (mut summary, mut this) = (settled.summary, ask.clone());
    let mut not_taken = Vec::new();
    let last = loop {
        let answering = Answering {
            session,
            prompt: &settled.prompt,
            ask: &this,
            inbox,
            kept: warm.map(|_| &kept),
        };
        let (attempt, answer, earlier) =
            answering.attempt(summary, &mut not_taken, observer, cancel);
        recorder.follow_replacement(observer)?;
        recorder.answers(answer, &earlier, &attempt, observer)?;
        if !matches!(attempt.verdict, Verdict::Answered) || cancel.requested().is_some() {
            break attempt;
        }
        // Steers that came too late for the engine: the next turn, at once.
        let Some(text) = late_steers(inbox, listener.as_mut()) else { break attempt };
        recorder.steer(&text)?;
        observer.event(Event::Steer(Steered::Taken(&text)));
        summary = store.summarize(&id)?;
        this = Ask { query: text, attachments: Vec::new(), ..ask.clone() };
    };
    drop(listener);
    not_taken.append(&mut inbox.take_all());
    recorder.not_taken(&not_taken, &last.verdict, observer)?;
    if let (Some(warm), Some(kept)) = (warm, kept.into_inner()) {
        // Still under the lock: the transcript as cca left it.
        warm.keep(store, &id, kept);
    }
    let answered = matches!(last.verdict, Verdict::Answered);
    if warm.is_none() && answered {
        // Still under the lock: the context as the next turn will find it.
        leave_standby(&session, &settled.prompt, observer);
    }
    drop(_lock);
    if answered && settings.sync_after_turn {
        crate::sync::after_turn(store);
    }
    Ok(TurnResult {
        session: id.clone(),
        path: store.session_path(&id),
        turn: recorder.turn,
        engine: engine.name.clone(),
        // What ran: the model the engine reported, else the one cca asked for.
        model: last.model.or_else(|| settled.model.clone()),
        verdict: last.verdict,
        duration: last.duration,
        usage: last.usage,
        session_totals: recorder.spent,
        stderr_tail: last.stderr_tail,
    })
}

/// Keeps a question that was stopped before its turn recorded it, not by the user (an editor's
/// prompt still in line when the client went, or a signal came): recorded as asked and
/// interrupted for `why`, the engine never run, so nothing a user sent is lost; a session with
/// no title yet takes the question's first line. Waits for the session's lock at most
/// `patience` (a turn elsewhere may hold it for minutes).
pub(crate) fn keep_unasked(
    settings: &Settings,
    store: &Store,
    ask: &Ask,
    why: run::Stop,
    patience: Duration,
    observer: &mut dyn Observer,
) -> Result<()> {
    let now = settings.now();
    let (id, created) = open_session(settings, store, ask, &now)?;
    let deadline = std::time::Instant::now() + patience;
    let _lock = store.lock_unless(
        &id,
        true,
        || observer.event(Event::Waiting { session: &id }),
        || match std::time::Instant::now() < deadline {
            true => Ok(()),
            false => Err(Failure::new(exit::BUSY, format!("session {id} stayed busy")).into()),
        },
    )?;
    let settled = settle(settings, store, &id, created, ask, observer)?;
    if settled.summary.header.title.is_empty() {
        // An editor's new session is titled by its first question, asked or not.
        store.set_title(&id, transcript::title_line(&ask.query))?;
    }
    let (engine, model) = (settled.engine, settled.model.as_deref());
    let session = Session { settings, store, id: &id, engine, model };
    let mut recorder = Recorder::start(session, ask, &now, &settled)?;
    let stopped = Attempt::error(&run::Interrupted(why).into(), Duration::ZERO);
    recorder.answers(None, &[], &stopped, observer)
}

/// Leaves an engine on standby for the next one-shot turn, where the engine has one configured
/// (docs/DESIGN.md, "Standby"). It only saves time: failing to leave one is a detail.
fn leave_standby(session: &Session, prompt: &Prompt, observer: &mut dyn Observer) {
    if session.engine.standby.is_none() {
        // Turned off since one was left (if one was): it is not welcome any more.
        crate::run::standby::end(&session.store.standby_dir(), Some(&session.engine.name));
        return;
    }
    let left = session
        .store
        .summarize(session.id)
        .and_then(|summary| call::leave_standby(session, &prompt.text, &summary.live));
    if let Err(e) = left {
        let text = format!("note: no engine was left on standby: {e:#}");
        observer.event(Event::Notice { level: Level::Detail, text: &text });
    }
}

/// A session ready for a turn's question: read (a record cut off at its end repaired), its
/// engine, model and system prompt settled, the question checked.
struct Settled<'a> {
    summary: Summary,
    engine: &'a EngineConfig,
    model: Option<String>,
    prompt: Prompt,
    /// A question in the transcript had no answer (see [`left_without_answer`]).
    left_without_answer: bool,
}

/// Reads the session for a turn, under its lock, and says what the user should know about it
/// (a repair, problems in the file, a changed system prompt, a question left without answer);
/// makes it `latest`, and keeps the question's images. Nothing of the question is recorded yet.
fn settle<'a>(
    settings: &'a Settings,
    store: &Store,
    id: &str,
    created: bool,
    ask: &Ask,
    observer: &mut dyn Observer,
) -> Result<Settled<'a>> {
    let mut summary = store.summarize(id)?;
    if let Some(text) = repair_cut_off(settings, store, id, &summary)? {
        observer.event(Event::Notice { level: Level::Info, text: &text });
        summary = store.summarize(id)?;
    }
    for p in &summary.problems {
        let path = store.session_path(id);
        let text = format!("warning: {}: line {}: {}", path.display(), p.line, p.message);
        observer.event(Event::Notice { level: Level::Info, text: &text });
    }
    let header = &summary.header;
    let (engine, model) = session::engine_and_model(settings, header, created)?;
    if let Some(text) =
        other_engine(settings, header, id, &engine.name, "answers").filter(|_| !created)
    {
        observer.event(Event::Notice { level: Level::Info, text: &text });
    }
    let prompt = session::load_prompt(settings, store, Some(header))?;
    if !created {
        let session = Session { settings, store, id, engine, model: model.as_deref() };
        check_ready(&session, &prompt, Some(&summary), ask)?;
    }
    if (created || store.latest().ok().flatten().as_deref() != Some(id))
        && let Err(e) = store.set_latest(id)
    {
        // Not worth losing the question over: the session is named in the warning.
        let text = format!(
            "warning: {e:#}; `latest` does not point at this session: continue it with \
             `--session {id}`"
        );
        observer.event(Event::Notice { level: Level::Warning, text: &text });
    }
    let switched = !created
        && settings.prompt.source == crate::config::Source::Flag
        && (prompt.name != header.prompt || prompt.hash() != header.prompt_hash);
    if switched {
        // A prompt chosen on a follow-up is the session's from now on: its header says so.
        let was = header.prompt.clone();
        let header =
            Header { prompt: prompt.name.clone(), prompt_hash: prompt.hash(), ..header.clone() };
        store.rewrite_header(id, &header, summary.header_end)?;
        summary = store.summarize(id)?;
        let text = format!(
            "this session's system prompt is now `{}` (it was `{was}`), for this turn and the next",
            prompt.name
        );
        observer.event(Event::Notice { level: Level::Info, text: &text });
    } else if prompt.hash() != header.prompt_hash && !created {
        let text = format!(
            "note: the system prompt `{}` has changed since this session started",
            prompt.name
        );
        observer.event(Event::Notice { level: Level::Detail, text: &text });
    }
    let left = left_without_answer(store, id, &summary);
    if let Some(text) = &left {
        observer.event(Event::Notice { level: Level::Warning, text });
    }
    for image in ask.attachments.iter().filter_map(|a| a.image.as_ref()) {
        store.save_image(image)?;
    }
    Ok(Settled { summary, engine, model, prompt, left_without_answer: left.is_some() })
}

/// Listens for `cca steer` while the turn runs; a turn that cannot be steered still runs.
fn listen(
    store: &Store,
    id: &str,
    inbox: &Inbox,
    observer: &mut dyn Observer,
) -> Option<steer::Listener> {
    match steer::Listener::start(store, id, inbox) {
        Ok(listener) => Some(listener),
        Err(e) => {
            let text = format!("warning: this turn cannot be steered: {e:#}");
            observer.event(Event::Notice { level: Level::Info, text: &text });
            None
        }
    }
}

/// The steers that arrived once the engine could no longer take them, as one message: those
/// in the inbox, else those still on their way (the listener is closed to let them in).
fn late_steers(inbox: &Inbox, listener: Option<&mut steer::Listener>) -> Option<String> {
    let mut next = inbox.take_all();
    if next.is_empty() {
        if let Some(listener) = listener {
            listener.close();
        }
        next = inbox.take_all();
    }
    (!next.is_empty()).then(|| next.join("\n\n"))
}

/// The session a turn goes to: a new one (created here, with its header), or an existing one.
fn open_session(
    settings: &Settings,
    store: &Store,
    ask: &Ask,
    now: &chrono::DateTime<chrono::Utc>,
) -> Result<(String, bool)> {
    match &ask.target {
        Target::Resume => Ok((session::followed(settings, store)?, false)),
        Target::Session(wanted) => Ok((store.resolve_id(wanted)?, false)),
        Target::New => {
            // A session is created only for a question that can be sent.
            let name = session::choose_engine(settings, None);
            let engine = settings
                .engines
                .get(&name)
                .ok_or_else(|| crate::config::unknown_engine(&name, &settings.engines))?;
            let model = session::new_session_model(settings, engine);
            let prompt = session::load_prompt(settings, store, None)?;
            let session = Session { settings, store, id: "", engine, model: model.as_deref() };
            check_ready(&session, &prompt, None, ask)?;
            let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
            let title = transcript::title_line(&ask.query);
            Ok((session::create(settings, store, now, title, &cwd)?, true))
        }
    }
}

pub(crate) use crate::session::repair_cut_off;

/// Everything about a turn that can be checked before its question is recorded (the model's
/// name is, by `session::engine_and_model`): text without NUL bytes, images only for an engine
/// that takes them, the engine's program, and the size of what the engine would receive. A turn that could
/// not reach an engine records nothing (the front end repeats the question). `summary` is the
/// session's, when it has one: its live context counts unless a compaction would fold it first.
/// The sizes are a lower bound of what is sent (tags and escapes add to them), so a question
/// refused here would be refused later too; the exact check is `call`'s.
fn check_ready(
    session: &Session,
    prompt: &Prompt,
    summary: Option<&Summary>,
    ask: &Ask,
) -> Result<()> {
    for (what, text) in std::iter::once(("the question", &ask.query))
        .chain(ask.attachments.iter().map(|a| (a.name.as_str(), &a.text)))
    {
        refuse_nul(what, text.as_bytes())?;
    }
    let engine = session.engine;
    refuse_images(engine, &ask.attachments)?;
    refuse_model(session)?;
    run::locate(session.settings, engine)?;
    let Some(limit) = engine.max_input_bytes else { return Ok(()) };
    let new_bytes = new_bytes(ask);
    let mut bytes = new_bytes as u64;
    if engine.system_prompt == crate::engine::SystemPromptMode::Inline {
        bytes += prompt.text.len() as u64;
    }
    let mut history = 0;
    if engine.history == crate::engine::HistoryMode::Inline
        && let Some(summary) = summary
        && compact::needed(session, summary, &prompt.text, new_bytes).is_none()
    {
        history = summary.live.bytes();
        bytes += history;
    }
    match bytes > limit {
        true => Err(call::over_limit(bytes, history, engine, limit)),
        false => Ok(()),
    }
}

/// What to do with data that is not text: images are taken as they are, the rest as text.
pub(crate) const BINARY_HINT: &str = "images (PNG, JPEG, GIF, WebP) are attached as images with \
    `-f`; for other binary data, attach a text form of it (`xxd FILE | cca search ...`)";

/// Refuses text with a NUL byte: engines take text, and a NUL byte cuts it short in some.
pub(crate) fn refuse_nul(what: &str, bytes: &[u8]) -> Result<()> {
    match memchr::memchr(0, bytes) {
        None => Ok(()),
        Some(at) => Err(Failure::usage(format!(
            "{what} holds a NUL byte (at byte {at}): cca takes text only"
        ))
        .hint(BINARY_HINT)
        .into()),
    }
}

/// The bytes a question brings: its text and its attachments.
fn new_bytes(ask: &Ask) -> usize {
    ask.query.len() + ask.attachments.iter().map(|a| a.text.len()).sum::<usize>()
}

/// The engines that take images, as `-e` flags: from their descriptions, not a list here.
fn image_takers() -> String {
    let flags: Vec<String> = crate::engine::KINDS
        .iter()
        .filter(|kind| kind.takes_images)
        .map(|kind| format!("`-e {}`", kind.name))
        .collect();
    match flags.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "none is built in".to_string(),
    }
}

/// Refuses images for an engine that cannot take them, before anything is recorded or sent.
pub(crate) fn refuse_images(engine: &EngineConfig, attachments: &[Attachment]) -> Result<()> {
    if let Some(first) = attachments.iter().find(|a| a.image.is_some())
        && !engine.spec.takes_images
    {
        return Err(Failure::usage(format!(
            "engine {} cannot take images ({} is one); nothing was sent",
            engine.name, first.name
        ))
        .hint(format!("ask with an engine that takes images: {}", image_takers()))
        .into());
    }
    Ok(())
}

/// Refuses a model for an engine that takes none ([`EngineConfig::takes_model`]): dropped, it
/// would leave the user believing that model answered. A model from a variable names it.
fn refuse_model(session: &Session) -> Result<()> {
    let (Some(model), engine) = (session.model, session.engine) else { return Ok(()) };
    if engine.takes_model() {
        return Ok(());
    }
    let how = if engine.spec.keys.contains(&"model_arg") {
        format!(
            "set model_arg in [engines.{}] to the flag that takes a model, or ask without one",
            engine.name
        )
    } else {
        "an ACP agent's model is chosen in its own settings: ask without one".to_string()
    };
    let failure = Failure::usage(format!(
        "engine {} takes no model, and `{model}` was chosen; nothing was sent",
        engine.name
    ))
    .hint(how);
    match session.settings.model.as_ref().filter(|m| m.value == model) {
        Some(from) => Err(from.source.blame(failure).into()),
        None => Err(failure.into()),
    }
}

/// Says which question the transcript holds without an outcome, if one: its turn was cut off
/// (cca was killed, or the answer could not be saved). It is no part of the live context, so the
/// turn about to be asked leaves it out, and the user should know which one that is; the turn
/// records it as interrupted ([`cut_question_record`]) before its own question.
fn left_without_answer(store: &Store, id: &str, summary: &Summary) -> Option<String> {
    let range = summary.pending_question.as_ref()?;
    // The start is enough to name it (a question may be hundreds of MiB).
    let mut start = vec![0u8; (range.end - range.start).min(4096) as usize];
    let read = store.open_session(id).and_then(|file| {
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut start, range.start)
            .context("cannot read the question")
    });
    let gist = match read {
        Ok(()) => transcript::one_line(&transcript::unescape(&String::from_utf8_lossy(&start)), 72),
        Err(_) => "(unreadable)".to_string(),
    };
    Some(format!(
        "warning: turn {}'s question has no answer in the transcript (its turn was cut off, or \
         its answer could not be saved): it is recorded as interrupted and left out of this \
         turn: {gist}",
        summary.exchanges + 1
    ))
}

/// Everything a turn needs to get its answer, once the session is settled.
struct Answering<'a> {
    session: Session<'a>,
    prompt: &'a Prompt,
    ask: &'a Ask,
    inbox: &'a Inbox,
    /// The session's kept engine, for a front end that keeps one (`None` inside otherwise).
    kept: Option<&'a RefCell<Option<Slot>>>,
}

impl Answering<'_> {
    /// Gets an answer (see [`Answering::answer`]) and says how it ended, with the answer's
    /// scratch file and the answers the engine ended by taking a steer; steers the engine was
    /// sent and never took go to `not_taken`.
    fn attempt(
        &self,
        summary: Summary,
        not_taken: &mut Vec<String>,
        observer: &mut dyn Observer,
        cancel: &Cancel,
    ) -> (Attempt, Option<File>, Vec<run::Earlier>) {
        let started = std::time::Instant::now();
        match self.answer(summary, observer, cancel) {
            Ok(mut run) => {
                let earlier = std::mem::take(&mut run.earlier);
                not_taken.append(&mut run.untaken);
                let (attempt, answer) = ended(self.session.engine, run);
                attempt.note_left_out(&self.session.engine.name, observer);
                (attempt, answer, earlier)
            }
            Err(e) => (Attempt::error(&e, started.elapsed()), None, Vec::new()),
        }
    }

    /// Compacts first if needed, says how large the context is if it is large, and runs the
    /// engine. An error means the engine did not run to an end.
    fn answer(
        &self,
        summary: Summary,
        observer: &mut dyn Observer,
        cancel: &Cancel,
    ) -> Result<run::EngineRun> {
        let (settings, ask, engine) = (self.session.settings, self.ask, self.session.engine);
        let new_bytes = new_bytes(ask);
        let summary = self.compact_if_needed(summary, new_bytes, observer, cancel)?;
        let bytes = summary.live.bytes() + (self.prompt.text.len() + new_bytes) as u64;
        let tokens = engine.tokens(bytes);
        if tokens > settings.compaction.warn_tokens {
            let size = human_bytes(bytes);
            let text =
                format!("sending about {tokens} tokens ({size}) of context to {}", engine.name);
            observer.event(Event::Notice { level: Level::Info, text: &text });
        }
        observer.event(Event::Started { engine: &engine.name });
        let call = call::Call {
            session: &self.session,
            system: &self.prompt.text,
            live: &summary.live,
            attachments: &ask.attachments,
            query: &ask.query,
            inbox: Some(self.inbox),
            warm: self.kept,
        };
        call::call(&call, cancel, &mut |progress| {
            observer.event(match progress {
                Progress::Text(text) => Event::Text(text),
                Progress::ToolStarted(call) => Event::ToolStarted(call),
                Progress::Tool(call) => Event::Tool(call),
                Progress::Stderr(bytes) => Event::EngineOutput(bytes),
                Progress::Retry(note) => Event::Retry(note),
                Progress::Stopping => Event::Stopping,
                Progress::Steer(steered) => Event::Steer(steered),
            })
        })
    }

    /// When the turn about to be sent would pass the threshold, the same engine first folds
    /// the older exchanges into a summary. A compaction that fails changes nothing and says so;
    /// the turn then goes ahead as it is.
    fn compact_if_needed(
        &self,
        summary: Summary,
        new_bytes: usize,
        observer: &mut dyn Observer,
        cancel: &Cancel,
    ) -> Result<Summary> {
        let ctx = &self.session;
        let Some(need) = compact::needed(ctx, &summary, &self.prompt.text, new_bytes) else {
            return Ok(summary);
        };
        let text = format!(
            "the context (~{} tokens) passes {:.0}% of {}'s budget of {}; \
             summarising {} first",
            need.tokens,
            ctx.settings.compaction.threshold * 100.0,
            ctx.engine.name,
            need.budget,
            crate::human::turns(need.first, need.through),
        );
        observer.event(Event::Notice { level: Level::Info, text: &text });
        let keep = ctx.settings.compaction.keep_recent;
        let compacted = compact::compact(ctx, keep, cancel, &mut summariser_progress(observer));
        match compacted {
            Ok(folded @ Compaction::Folded(_)) => {
                // The kept engine holds the turns now summarised.
                self.kept.map(|kept| kept.borrow_mut().take());
                let text = folded.sentence(None);
                observer.event(Event::Notice { level: Level::Info, text: &text });
                ctx.store.summarize(ctx.id)
            }
            Ok(Compaction::Nothing { .. }) => Ok(summary),
            Err(e) if e.downcast_ref::<run::Interrupted>().is_some() => Err(e),
            Err(e) => {
                let text = format!("warning: compaction failed, nothing changed: {e:#}");
                observer.event(Event::Notice { level: Level::Warning, text: &text });
                Ok(summary)
            }
        }
    }
}

/// Compacts a session now, as a front end asks for it (`cca compact`, `/compact` in chat or an
/// editor): waits for the session's lock, repairs a record cut off at its end, and folds all
/// live exchanges but the last `keep` into a summary (see `compact`). `Err` means nothing
/// changed; an [`run::Interrupted`] error says it was stopped.
pub(crate) fn compact(
    settings: &Settings,
    store: &Store,
    id: &str,
    keep: u64,
    observer: &mut dyn Observer,
    cancel: &Cancel,
) -> Result<Compaction> {
    let _lock = store.lock_unless(
        id,
        true,
        || observer.event(Event::Waiting { session: id }),
        || cancel.check(),
    )?;
    let summary = store.summarize(id)?;
    if let Some(text) = repair_cut_off(settings, store, id, &summary)? {
        observer.event(Event::Notice { level: Level::Info, text: &text });
    }
    let (engine, model) = session::engine_and_model(settings, &summary.header, false)?;
    if let Some(text) = other_engine(settings, &summary.header, id, &engine.name, "summarises") {
        observer.event(Event::Notice { level: Level::Info, text: &text });
    }
    let ctx = Session { settings, store, id, engine, model: model.as_deref() };
    observer.event(Event::Started { engine: &engine.name });
    compact::compact(&ctx, keep, cancel, &mut summariser_progress(observer))
}

/// When a session (an imported one, one whose engine left config.toml) names an engine not
/// declared here and no `-e` chose one, another `does` the work: the user hears which.
fn other_engine(
    settings: &Settings,
    header: &Header,
    id: &str,
    used: &str,
    does: &str,
) -> Option<String> {
    let chosen = settings.engine.as_ref().is_some_and(|e| e.source == crate::config::Source::Flag);
    (!chosen && !settings.engines.contains_key(&header.engine)).then(|| {
        format!(
            "session {id} was written by {}, which is no engine here: {used} {does} (declare \
             `[engines.{}]` in config.toml, or choose one with `-e`)",
            header.engine, header.engine
        )
    })
}

/// What a compaction shows of its engine: the summary is not the answer, so only what the
/// engine says on stderr, its retries, and that it is being stopped.
fn summariser_progress(observer: &mut dyn Observer) -> impl FnMut(Progress) + '_ {
    move |progress| match progress {
        Progress::Stderr(bytes) => observer.event(Event::EngineOutput(bytes)),
        Progress::Retry(note) => observer.event(Event::Retry(note)),
        Progress::Stopping => observer.event(Event::Stopping),
        Progress::Text(_) | Progress::ToolStarted(_) | Progress::Tool(_) | Progress::Steer(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Env, Flags, Source, Sourced};

    /// Records what a turn reports.
    #[derive(Default)]
    struct Seen {
        text: String,
        recorded: bool,
        stopping: bool,
        /// Told when the engine starts.
        started: Option<std::sync::mpsc::Sender<()>>,
    }

    impl Observer for Seen {
        fn event(&mut self, event: Event<'_>) {
            match event {
                Event::Recorded { .. } => self.recorded = true,
                Event::Text(text) => self.text.push_str(text),
                Event::Stopping => self.stopping = true,
                Event::Started { .. } => {
                    if let Some(started) = &self.started {
                        let _ = started.send(());
                    }
                }
                _ => {}
            }
        }
    }

    fn settings(home: &std::path::Path, engine: &str) -> Settings {
        // Two command engines from the system: `cat` answers with what it is sent, `sleep`
        // answers nothing until it is stopped.
        let config = "[engines.cat]\ncommand = [\"cat\"]\n\
                      [engines.sleep]\ncommand = [\"sleep\", \"60\"]\n";
        let env = Env::from_pairs(&[("PATH", "/usr/bin:/bin"), ("CCA_GRACE_MS", "100")]);
        let flags = Flags { engine: Some(engine.into()), ..Flags::default() };
        let home = Sourced { value: home.to_path_buf(), source: Source::Env("CCA_HOME") };
        let path = home.value.join("config.toml");
        crate::config::resolve(&env, &flags, home, path, Some(config)).unwrap()
    }

    fn question(query: &str) -> Ask {
        Ask { target: Target::New, query: query.into(), attachments: Vec::new(), wait: true }
    }

    #[test]
    fn turns_on_two_sessions_run_at_once_and_cancel_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        let (answering, sleeping) = (settings(&store.home, "cat"), settings(&store.home, "sleep"));
        let stop_this = Cancel::new();
        let (started, slow_started) = std::sync::mpsc::channel();
        let (slow, fast) = std::thread::scope(|s| {
            let slow = s.spawn(|| {
                let mut seen = Seen { started: Some(started), ..Seen::default() };
                let outcome = ask(&sleeping, &store, &question("wait"), &mut seen, &stop_this);
                (outcome.unwrap(), seen)
            });
            // The other turn answers while this one's engine runs, and this one is stopped
            // only then: both were running at once.
            slow_started.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
            let mut seen = Seen::default();
            let outcome = ask(&answering, &store, &question("hello"), &mut seen, &Cancel::new());
            stop_this.stop(run::Stop::Signal(signal_hook::consts::SIGINT));
            (slow.join().unwrap(), (outcome.unwrap(), seen))
        });
        let ((slow, slow_seen), (fast, fast_seen)) = (slow, fast);
        assert!(matches!(fast.verdict, Verdict::Answered), "{:?}", fast.verdict);
        assert!(fast_seen.recorded && fast_seen.text.contains("hello"), "{}", fast_seen.text);
        assert!(matches!(slow.verdict, Verdict::Interrupted { .. }), "{:?}", slow.verdict);
        assert!(slow_seen.recorded && slow_seen.stopping);
        assert_ne!(slow.session, fast.session);
        let kept = std::fs::read_to_string(&slow.path).unwrap();
        assert!(kept.contains("Interrupted (not sent again)"), "{kept}");
    }

    #[test]
    fn a_cancel_before_the_question_is_saved_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        let cancel = Cancel::new();
        cancel.stop(run::Stop::Signal(signal_hook::consts::SIGTERM));
        let mut seen = Seen::default();
        let err = ask(&settings(&store.home, "cat"), &store, &question("q"), &mut seen, &cancel)
            .unwrap_err();
        assert!(err.downcast_ref::<run::Interrupted>().is_some(), "{err:#}");
        assert!(!seen.recorded);
    }
}
