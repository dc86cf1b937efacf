//! One request to an engine: build the invocation, refuse what is too large, create the files
//! the engine needs, run it, and tidy up after it. Used for turns and for compaction.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::engine::home::{HomeArg, UserFolder};
use crate::engine::{Arg, EngineConfig, Invocation, Keeping, Request};
use crate::error::{Failure, exit};
use crate::frame;
use crate::human::human_bytes;
use crate::media::Image;
use crate::run::{self, Cancel, Interrupted, Progress, Spawn, Stop, locate};
use crate::session::Session;
use crate::store::Store;
use crate::transcript::{self, Live};
use crate::warm;

/// What to send, in which session.
pub(crate) struct Call<'a> {
    pub session: &'a Session<'a>,
    pub system: &'a str,
    pub live: &'a std::sync::Arc<Live>,
    pub attachments: &'a [Attachment],
    pub query: &'a str,
    /// Steers for the turn, if it takes any.
    pub inbox: Option<&'a crate::steer::Inbox>,
    /// A front end that keeps the session's engine between turns: where it is kept (taken and
    /// put back here, see `warm`).
    pub warm: Option<&'a std::cell::RefCell<Option<warm::Slot>>>,
}

/// Context handed over with a question, kept in the transcript and sent in its own tag.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attachment {
    /// `stdin`, or the file's path as given.
    pub name: String,
    /// The text; for an image, the transcript's link to its stored copy.
    pub text: String,
    /// An image, sent to the engine beside the text (engines that take images only).
    pub image: Option<Image>,
}

impl Attachment {
    pub(crate) fn text(name: impl Into<String>, text: String) -> Attachment {
        Attachment { name: name.into(), text, image: None }
    }

    pub(crate) fn image(name: impl Into<String>, image: Image) -> Attachment {
        let name = name.into();
        Attachment { text: image.link(&name), name, image: Some(image) }
    }
}

/// Runs the call. Errors mean the engine did not run (or its output could not be kept).
pub(crate) fn call(
    c: &Call,
    cancel: &Cancel,
    progress: &mut dyn FnMut(Progress),
) -> Result<run::EngineRun> {
    cancel.check()?;
    let s = c.session;
    let transcript = s.store.open_session(s.id)?;
    let stored = stored_text(&transcript);
    let notes = s.store.engine_notes(s.id, &s.engine.name);
    // An ACP agent is sent no image (a turn with one starts the engine for itself, as the
    // one-shot turns do: gemini reads an image from the file its prompt names).
    let transport = s.engine.spec.keeps.filter(|transport| match transport {
        Keeping::StreamJson(_) => true,
        Keeping::Acp | Keeping::Rpc(_) => c.attachments.iter().all(|a| a.image.is_none()),
    });
    // An engine with no one-shot mode (an `acp` engine) is kept for this turn alone where no
    // front end keeps it.
    let keeps = (c.warm.is_some() && s.engine.keep_warm.is_some() || !s.engine.spec.one_shot)
        && transport.is_some();
    // A one-shot turn takes the engine waiting on standby, if one waits for it.
    let standby = c.warm.is_none() && s.engine.standby.is_some() && transport.is_some();
    let mut request = Request {
        notes: notes.as_deref(),
        kept: keeps || standby,
        system: c.system,
        live: c.live,
        stored: &stored,
        attachments: c
            .attachments
            .iter()
            .map(|a| frame::Attachment { name: &a.name, text: &a.text })
            .collect(),
        images: c.attachments.iter().filter_map(|a| a.image.as_ref()).collect(),
        image_dir: &s.store.image_dir(),
        query: c.query,
        model: s.model,
        mcp_servers: &s.settings.mcp_servers,
    };
    let program = locate(s.settings, s.engine)?;
    let mut invocation = (s.engine.spec.invocation)(s.engine, program.clone(), &request)?;
    let taken = match standby {
        true => {
            let key = invocation_key(s, &invocation, c.system);
            match run::standby::take(&s.store.standby_dir(), &s.engine.name, &key, cancel) {
                Ok(taken) => taken,
                Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                // A standby that fails to hand its engine over only costs the time it saved.
                Err(_) => None,
            }
        }
        false => None,
    };
    if standby && taken.is_none() && !keeps {
        // Nothing waits for this turn: it starts cold, as with no standby.
        request.kept = false;
        invocation = (s.engine.spec.invocation)(s.engine, program, &request)?;
    }
    drop(request);
    drop(stored);
    if let Some(limit) = s.engine.max_input_bytes {
        // The measured limits are those of stdin's text. Images are not counted: claude took a
        // 5 MB image (6.7 MB of base64 in its stdin line) and re-encoded it smaller itself.
        let input_bytes =
            frame::write(&invocation.stdin, &frame::Windowed::new(&transcript), &mut io::sink())
                .context("cannot read the transcript")?;
        if input_bytes > limit {
            // Structured history is the engine's session file, not stdin's.
            let inline = s.engine.history == crate::engine::HistoryMode::Inline;
            let history = if inline { c.live.bytes() } else { 0 };
            return Err(over_limit(input_bytes, history, s.engine, limit));
        }
    }
    if let (Some(transport), true) = (transport, keeps || taken.is_some()) {
        let decoder: Box<dyn crate::engine::Decoder> = match transport {
            Keeping::StreamJson(_) => (s.engine.spec.decoder)(s.model),
            Keeping::Acp => {
                Box::new(crate::engine::acp_agent::Decoder::quiet(s.engine.spec.stderr_noise))
            }
            Keeping::Rpc(rpc) => (rpc.decoder)(s.model),
        };
        let fresh = match taken {
            // Its files are the standby's.
            Some(engine) => {
                let grace = s.settings.grace;
                Fresh::Taken(Box::new(run::kept::Kept::adopt(engine, grace, transport, decoder)))
            }
            None => Fresh::Start { transport, decoder },
        };
        // Kept for this turn alone (dropped, and so ended, when the call returns) where no
        // front end keeps it.
        let this_turn = std::cell::RefCell::new(None);
        let slot = match (c.warm, s.engine.keep_warm) {
            (Some(slot), Some(_)) => slot,
            _ => &this_turn,
        };
        let idle = s.engine.keep_warm.unwrap_or_default();
        let cold = Cold { invocation, fresh, idle };
        return kept(c, slot, cold, transcript, notes.as_deref(), cancel, progress);
    }
    let (args, env, scratch) = materialize(s.store, s.settings, s.id, &invocation)?;
    let spawn = Spawn {
        program: invocation.program.clone(),
        args,
        env,
        stdin: invocation.stdin,
        transcript,
        grace: s.settings.grace,
        stream_line: s.engine.spec.streams_input,
        images: invocation.images.clone(),
        inbox: c.inbox.cloned(),
    };
    let decoder = (s.engine.spec.decoder)(s.model);
    let mut outcome = run::run(spawn, decoder, s.store.scratch_file()?, cancel, progress)?;
    drop(scratch);
    tidy(c, notes.as_deref(), &mut outcome);
    Ok(outcome)
}

/// cca is the memory: an engine's own copy of the turn must not pile up; what the engine noted
/// in it is kept for the next turn's history (a cache: failing to keep it is no error), and the
/// model and cost it names join the outcome where the engine's output did not say them.
fn tidy(c: &Call, notes: Option<&str>, outcome: &mut run::EngineRun) {
    let s = c.session;
    if let Some(id) = &outcome.engine_session {
        let program = std::path::Path::new(&s.engine.program);
        let home = (s.engine.spec.home)(program)
            .map(|(_, home)| s.store.engine_home_dir(home.engine, s.id));
        let left = crate::engine::Leftovers {
            home: home.as_deref(),
            claude_home: s.settings.claude_home.as_deref(),
            engine_session: id,
            notes,
            newest: c.live.exchanges.len(),
            usage: &outcome.usage,
        };
        let tidied = (s.engine.spec.tidy)(&left);
        if let Some(kept) = tidied.notes {
            let _ = s.store.keep_engine_notes(s.id, &s.engine.name, &kept);
        }
        outcome.model = outcome.model.take().or(tidied.model);
        outcome.usage.cost_usd = outcome.usage.cost_usd.or(tidied.cost_usd);
    }
}

/// How the engine would start cold for this turn.
struct Cold {
    invocation: Invocation,
    fresh: Fresh,
    idle: std::time::Duration,
}

/// An engine for the turn when the session has none kept that fits: one to start (its files
/// made only then: a rollout written for a start not made would stay), or one taken from
/// standby that was started so.
enum Fresh {
    Start { transport: Keeping, decoder: Box<dyn crate::engine::Decoder> },
    Taken(Box<run::kept::Kept>),
}

/// The call on the session's kept engine: only the new message when the kept engine was started
/// for what a cold start would be now, else a fresh engine with the whole context, kept after
/// the turn if it answered (docs/DESIGN.md, "Warm engines").
fn kept(
    c: &Call,
    slot: &std::cell::RefCell<Option<warm::Slot>>,
    cold: Cold,
    transcript: std::fs::File,
    notes: Option<&str>,
    cancel: &Cancel,
    progress: &mut dyn FnMut(Progress),
) -> Result<run::EngineRun> {
    let s = c.session;
    let key = start_key(c, &cold.invocation.program)?;
    // A kept engine that does not fit ends here, as it is dropped.
    let taken = slot.borrow_mut().take();
    let fitting = taken.and_then(|mut kept| kept.fits(&key).then_some(kept));
    let images = cold.invocation.images.clone();
    let (mut kept, pieces) = match (fitting, cold.fresh) {
        (Some(kept), _) => (kept, cold.invocation.follow_up),
        (None, fresh) => {
            let (engine, files) = match fresh {
                Fresh::Taken(engine) => (*engine, None),
                Fresh::Start { transport, decoder } => {
                    let (how, files) = start(s, &cold.invocation, transport, decoder)?;
                    (run::kept::Kept::start(how, cancel)?, files)
                }
            };
            (warm::Slot::new(engine, key, cold.idle, files), cold.invocation.stdin)
        }
    };
    let message = run::kept::Message { pieces, transcript, images };
    let answer = s.store.scratch_file()?;
    let mut outcome = kept.kept().turn(message, c.inbox, answer, cancel, progress)?;
    tidy(c, notes, &mut outcome);
    if matches!(verdict(s.engine, &outcome), Verdict::Answered) {
        *slot.borrow_mut() = Some(kept);
    }
    Ok(outcome)
}

/// How to start the engine kept for `invocation`, with the files made for it.
fn start(
    s: &Session,
    invocation: &Invocation,
    transport: Keeping,
    decoder: Box<dyn crate::engine::Decoder>,
) -> Result<(run::kept::Start, Option<crate::store::EngineFiles>)> {
    let (args, env, files) = materialize(s.store, s.settings, s.id, invocation)?;
    let start = run::kept::Start {
        program: invocation.program.clone(),
        args,
        env,
        grace: s.settings.grace,
        transport,
        decoder,
        resume: invocation.resume.clone(),
    };
    Ok((start, files))
}

/// Leaves an engine on standby for the session's next one-shot turn, started as that turn would
/// start it cold (docs/DESIGN.md, "Standby"); nothing when the engine has none. Called as
/// the turn ends, with the session's live context as the next turn will find it.
pub(crate) fn leave_standby(s: &Session, system: &str, live: &std::sync::Arc<Live>) -> Result<()> {
    let (Some(idle), Some(transport)) = (s.engine.standby, s.engine.spec.keeps) else {
        return Ok(());
    };
    let transcript = s.store.open_session(s.id)?;
    let stored = stored_text(&transcript);
    let notes = s.store.engine_notes(s.id, &s.engine.name);
    let program = locate(s.settings, s.engine)?;
    let invocation = kept_start(s, program, system, live, &stored, notes.as_deref())?;
    let key = invocation_key(s, &invocation, system);
    let opening = opening(transport, s.engine.spec, invocation.resume.clone());
    let (args, env, files) = materialize(s.store, s.settings, s.id, &invocation)?;
    // The standby removes them when it ends.
    let files = files.map(crate::store::EngineFiles::keep);
    let order = run::standby::Order {
        kind: s.engine.name.clone(),
        key,
        program: invocation.program,
        args,
        env,
        grace: s.settings.grace,
        idle,
        opening,
        files: files.clone(),
        dir: s.store.standby_dir(),
        session: s.id.to_string(),
        socket: 0,
    };
    run::standby::launch(order).inspect_err(|_| {
        if let Some(files) = files {
            let _ = std::fs::remove_dir_all(files);
        }
    })
}

/// The start-up work an engine of kind `spec` kept over `transport` does before it waits,
/// resuming the engine's own session `resume` if given ([`Invocation::resume`]).
fn opening(
    transport: Keeping,
    spec: &crate::engine::Spec,
    resume: Option<String>,
) -> run::standby::Opening {
    match transport {
        Keeping::StreamJson(_) => run::standby::Opening::Initialize,
        Keeping::Acp => run::standby::Opening::AcpSession,
        Keeping::Rpc(_) => run::standby::Opening::Rpc { kind: spec.name.to_string(), resume },
    }
}

/// How long the engine takes to start as a standby starts it, before any question (for `cca
/// doctor`); `None` for an engine never kept between turns.
pub(crate) fn time_start(
    settings: &crate::config::Settings,
    store: &Store,
    engine: &EngineConfig,
) -> Option<Result<std::time::Duration>> {
    let opening = opening(engine.spec.keeps?, engine.spec, None);
    let measure = || {
        let nothing = |_: &std::ops::Range<u64>| -> io::Result<String> { Ok(String::new()) };
        let model = engine.model.as_deref();
        let s = Session { settings, store, id: "", engine, model };
        let program = locate(settings, engine)?;
        let invocation = kept_start(&s, program, "", &Default::default(), &nothing, None)?;
        let (args, env, _files) = materialize(store, settings, "", &invocation)?;
        let limit = std::time::Duration::from_secs(20);
        run::standby::time_start(&invocation.program, &args, &env, opening, limit)
    };
    Some(measure())
}

/// Everything a start of the engine with `invocation` depends on (see `warm::key`): an engine
/// started so serves a turn that would start it so; for a standby the context it is started
/// with is among it (claude's history file).
fn invocation_key(s: &Session, invocation: &Invocation, system: &str) -> String {
    let folder = std::env::current_dir().unwrap_or_default();
    let place = crate::engine::StartPlace {
        folder: &folder,
        gemini_home: s.settings.gemini_home.as_deref(),
        claude_home: s.settings.claude_home.as_deref(),
    };
    let reads = (s.engine.spec.reads_at_start)(&place);
    let start = (&invocation.args, &invocation.env, &s.engine);
    warm::key(&invocation.program, &start, system, &reads)
}

/// Reads the stored parts of the transcript that a request quotes.
fn stored_text(
    transcript: &std::fs::File,
) -> impl Fn(&std::ops::Range<u64>) -> io::Result<String> + '_ {
    move |range| {
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        std::os::unix::fs::FileExt::read_exact_at(transcript, &mut buf, range.start)?;
        let text =
            String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(transcript::unescape(&text))
    }
}

/// What a cold start of the engine depends on besides the context: its command line and
/// environment for an empty session, the system prompt, the program's file and the folder.
fn start_key(c: &Call, program: &std::path::Path) -> Result<String> {
    let nothing = |_: &std::ops::Range<u64>| -> io::Result<String> { Ok(String::new()) };
    let bare = &Default::default();
    let start = kept_start(c.session, program.into(), c.system, bare, &nothing, None)?;
    Ok(invocation_key(c.session, &start, c.system))
}

/// How the engine starts to be kept, before any question: for `live`, its stored parts read
/// through `stored` (an empty one for a start that carries no context).
fn kept_start(
    s: &Session,
    program: std::path::PathBuf,
    system: &str,
    live: &std::sync::Arc<Live>,
    stored: &dyn Fn(&std::ops::Range<u64>) -> io::Result<String>,
    notes: Option<&str>,
) -> Result<Invocation> {
    let request = Request {
        system,
        live,
        stored,
        attachments: Vec::new(),
        images: Vec::new(),
        image_dir: &s.store.image_dir(),
        query: "",
        model: s.model,
        mcp_servers: &s.settings.mcp_servers,
        notes,
        kept: true,
    };
    (s.engine.spec.invocation)(s.engine, program, &request)
}

/// The error for a turn larger than the engine takes on stdin.
/// A turn too large to send: `history` of its `bytes` is the session's earlier turns, which
/// `cca clear` or `cca compact` would shrink; a turn that is too large without them (a first
/// one) can only be made smaller.
pub(crate) fn over_limit(
    bytes: u64,
    history: u64,
    engine: &EngineConfig,
    limit: u64,
) -> anyhow::Error {
    let raise = format!("raise max_input_bytes in [engines.{}] of config.toml", engine.name);
    let hint = if history == 0 || bytes.saturating_sub(history) > limit {
        format!(
            "the question and what is attached to it are too large alone: attach less, or {raise}"
        )
    } else {
        format!("start a new session, or `cca clear` or `cca compact` this one, or {raise}")
    };
    Failure::new(
        exit::ERROR,
        format!(
            "this turn is {} for {}, over its limit of {}; it was not sent",
            human_bytes(bytes),
            engine.name,
            human_bytes(limit)
        ),
    )
    .hint(hint)
    .into()
}

/// How a call ended.
#[derive(Debug)]
pub(crate) enum Verdict {
    Answered,
    Failed { reason: String, hint: Option<String>, code: u8 },
    Interrupted { why: Stop },
}

impl Verdict {
    /// How a call that did not run to an end (an error before or while running) counts.
    pub(crate) fn of_error(e: &anyhow::Error) -> Verdict {
        if let Some(Interrupted(why)) = e.downcast_ref::<Interrupted>() {
            return Verdict::Interrupted { why: *why };
        }
        let failure = e.chain().find_map(|c| c.downcast_ref::<Failure>());
        Verdict::Failed {
            reason: format!("{e:#}"),
            hint: failure.and_then(|f| f.hint.clone()),
            code: failure.map_or(exit::ERROR, |f| f.code),
        }
    }
}

/// Decides whether the engine answered (docs/DESIGN.md: only a successful, non-empty answer
/// counts).
pub(crate) fn verdict(engine: &EngineConfig, outcome: &run::EngineRun) -> Verdict {
    if let Some(why) = outcome.interrupted {
        return Verdict::Interrupted { why };
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
    // cca ended the engine itself: how it exited then says nothing more.
    match &outcome.halted {
        Some(run::Halted::Scratch(e)) => {
            return failed(
                format!("cannot write the answer's scratch file: {e}; {name} was stopped"),
                Some(
                    "free some disk space; what arrived is kept in the transcript as a failed attempt (`cca show`), ask again with `,`"
                        .into(),
                ),
            );
        }
        Some(run::Halted::Refused(why)) => {
            return failed(
                format!(
                    "{name} was refused by its API: {why}; cca stopped it rather than wait for its retries"
                ),
                Some(engine.refused_hint()),
            );
        }
        Some(run::Halted::NeedsTerminal) => {
            return failed(
                format!(
                    "{name} was stopped by the system: it tried to use the terminal (a password \
                     or login prompt?), and engines get no terminal"
                ),
                Some(engine.terminal_hint()),
            );
        }
        None => {}
    }
    let status = outcome.status.as_ref();
    if let Some(status) = status.filter(|s| !s.success()) {
        return failed(
            format!("{name} failed ({}): {}", run::describe_status(status), said("no message")),
            Some(engine.failure_hint()),
        );
    }
    if let Some(error) = &outcome.engine_error {
        return failed(format!("{name} reported an error: {error}"), Some(engine.failure_hint()));
    }
    if let Some(e) = &outcome.feed_error {
        return failed(format!("cannot send the prompt to {name}: {e}"), None);
    }
    if !outcome.answer_has_text {
        let hint = engine.spec.empty_answer_hint.to_string();
        return failed(format!("{name} returned an empty answer"), Some(hint));
    }
    Verdict::Answered
}

fn last_line(text: &str) -> Option<String> {
    text.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
}

type EnvVars = Vec<(OsString, OsString)>;

/// The environment a program is run with outside a turn (asked its version): in the home its
/// engine gives it for a turn (`Spec::home`), so that it leaves nothing of its own behind.
pub(crate) fn home_env(
    settings: &crate::config::Settings,
    store: &Store,
    engine: &EngineConfig,
    program: &std::path::Path,
) -> Result<(EnvVars, Option<crate::store::EngineFiles>)> {
    let Some((var, home)) = (engine.spec.home)(program) else {
        return Ok(Default::default());
    };
    let env = vec![(var.to_string(), Arg::Home(home))];
    let program = program.to_path_buf();
    let (stdin, images, follow_up) = (Vec::new(), Vec::new(), Vec::new());
    let inv = Invocation { program, args: Vec::new(), env, stdin, images, follow_up, resume: None };
    let (_, env, files) = materialize(store, settings, "", &inv)?;
    Ok((env, files))
}

/// Creates the files an invocation asks for and returns plain arguments and environment. The
/// files go in a private folder, made only when there is one to write and removed when the
/// returned guard is dropped.
fn materialize(
    store: &Store,
    settings: &crate::config::Settings,
    session: &str,
    inv: &Invocation,
) -> Result<(Vec<OsString>, EnvVars, Option<crate::store::EngineFiles>)> {
    let mut dir: Option<crate::store::EngineFiles> = None;
    // The engine's home, made afresh; its path.
    let make_home = |home: &crate::engine::home::Home,
                     dir: &mut dyn FnMut() -> Result<PathBuf>|
     -> Result<PathBuf> {
        // In place of the user's, where the engine says it is.
        let in_home = |home_dir: Option<&std::path::Path>| {
            (home_dir.map(std::path::Path::to_path_buf), home_dir.map(|h| h.join(home.config_dir)))
        };
        let (user_home, user_config) = match home.user {
            UserFolder::Home => in_home(settings.user_home.as_deref()),
            UserFolder::GeminiCliHome => in_home(settings.gemini_home.as_deref()),
            UserFolder::CodexHome => (settings.user_home.clone(), settings.codex_home.clone()),
        };
        let over = |user: Option<&str>| home.settings.as_ref().map(|s| s.over(user));
        let text = |user: Option<&str>| over(user).unwrap_or_default();
        let linked = |name: &std::ffi::OsStr| home.links.linked(name);
        let made = crate::store::EngineHome {
            config_dir: home.config_dir,
            linked: &linked,
            home_files: home.home_files,
            settings: home.settings.as_ref().map(|s| (s.file, &text as _)),
        };
        // The session's, so that its path stays the same from turn to turn (see
        // `store::engine_home`); a run's own where there is no session.
        let at = match session {
            "" => dir()?.join("home"),
            id => store.engine_home_dir(home.engine, id),
        };
        store.make_engine_home(&at, &made, user_home.as_deref(), user_config.as_deref())
    };
    let mut resolve = |arg: &Arg| -> Result<OsString> {
        let mut dir = || -> Result<PathBuf> {
            let dir = match &mut dir {
                Some(dir) => dir,
                empty => empty.insert(store.engine_scratch_dir()?),
            };
            Ok(dir.path().to_path_buf())
        };
        match arg {
            Arg::Plain(s) => Ok(s.clone()),
            Arg::File { name, contents } => {
                let path = dir()?.join(name);
                store.write_private(&path, contents.as_bytes())?;
                Ok(path.into_os_string())
            }
            Arg::FileAfter { prefix, name, contents } => {
                let path = dir()?.join(name);
                store.write_private(&path, contents.as_bytes())?;
                let mut arg = OsString::from(prefix);
                arg.push(path);
                Ok(arg)
            }
            Arg::Home(home) => {
                let made = make_home(home, &mut dir)?;
                Ok(match home.arg {
                    HomeArg::Home => made.into_os_string(),
                    HomeArg::ConfigDir => made.join(home.config_dir).into_os_string(),
                })
            }
            Arg::HomeFile { home, path, contents, value } => {
                let at = make_home(home, &mut dir)?.join(home.config_dir).join(path);
                store.write_beside(&at, contents.as_bytes())?;
                Ok(OsString::from(value))
            }
        }
    };
    let args = inv.args.iter().map(&mut resolve).collect::<Result<_>>()?;
    let env =
        inv.env.iter().map(|(k, v)| Ok((OsString::from(k), resolve(v)?))).collect::<Result<_>>()?;
    Ok((args, env, dir))
}
