//! What a command works on: the settings and the store, which session (`--session`, a prefix,
//! `CCA_SESSION`, `latest`), and the engine, model and system prompt that answer in it; and
//! the operations on a session every front end offers (clear, fork, the repair of a cut-off
//! record). Shared by every front end; prints nothing: the front end words what happened.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::config::{self, Env, Flags, PromptChoice, Settings, Source};
use crate::engine::{self, EngineConfig};
use crate::error::Failure;
use crate::prompt::{self, Prompt};
use crate::run::locate;
use crate::store::{Appender, Store};
use crate::transcript::{self, Header, Kind, Meta, Record, Summary};
use crate::vars;

/// Resolves the settings for a command, given its flags: the one place the process's
/// environment and the config file are read.
pub(crate) fn settings(flags: &Flags) -> Result<(Settings, Store)> {
    let env = Env::from_process();
    let home = config::home(&env)?;
    let store = Store::new(home.value.clone());
    store.check_home()?;
    let file = store.read_config()?;
    let settings = config::resolve(&env, flags, home, store.config_path(), file.as_deref())?;
    Ok((settings, store))
}

/// The settings for reading other tools' conversations (`cca import`, its hooks), which take
/// nothing from the engine settings: a config file or an engine variable that cannot be used
/// (an engine misspelt, or removed) does not stop an import, which then reads neither, and
/// `noted` is told why. (A hook's import stopped by it lost the conversation, in silence.)
pub(crate) fn settings_for_import(noted: impl FnOnce(&anyhow::Error)) -> Result<(Settings, Store)> {
    let error = match settings(&Flags::default()) {
        Ok(found) => return Ok(found),
        Err(e) => e,
    };
    let without = || -> Result<(Settings, Store)> {
        let env = Env::from_process().without(&[vars::ENGINE, vars::MODEL, vars::PROMPT]);
        let home = config::home(&env)?;
        let store = Store::new(home.value.clone());
        store.check_home()?;
        let settings = config::resolve(&env, &Flags::default(), home, store.config_path(), None)?;
        Ok((settings, store))
    };
    match without() {
        Ok(found) => {
            noted(&error);
            Ok(found)
        }
        Err(_) => Err(error),
    }
}

/// Creates a session file with its header: the engine, model and prompt from the settings, the
/// first line of `title` (at most 80 characters), and `cwd`. Returns its id.
pub(crate) fn create(
    settings: &Settings,
    store: &Store,
    now: &chrono::DateTime<chrono::Utc>,
    title: &str,
    cwd: &str,
) -> Result<String> {
    let header = new_header(settings, store, now, title, cwd)?;
    let stamp = now.format("%Y%m%d-%H%M%S").to_string();
    store.create_session(&stamp, |id| {
        transcript::render_header(&Header { id: id.to_string(), ..header.clone() })
    })
}

/// The header of a new session (its id left empty): the engine, model and prompt the
/// settings choose now.
pub(crate) fn new_header(
    settings: &Settings,
    store: &Store,
    now: &chrono::DateTime<chrono::Utc>,
    title: &str,
    cwd: &str,
) -> Result<Header> {
    let engine = choose_engine(settings, None);
    let prompt = load_prompt(settings, store, None)?;
    let model = settings.engines.get(&engine).and_then(|e| new_session_model(settings, e));
    let header = Header {
        format: transcript::FORMAT,
        id: String::new(),
        created: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        engine,
        model,
        prompt: prompt.name.clone(),
        prompt_hash: prompt.hash(),
        cwd: cwd.to_string(),
        title: transcript::one_line(transcript::title_line(title), 80),
        forked_from: None,
        name: None,
        imported: None,
        other: Default::default(),
    };
    Ok(header)
}

/// A session and the engine (and model) that answers in it.
#[derive(Clone, Copy)]
pub(crate) struct Session<'a> {
    pub settings: &'a Settings,
    pub store: &'a Store,
    /// The session's id: its transcript holds the live context.
    pub id: &'a str,
    pub engine: &'a EngineConfig,
    pub model: Option<&'a str>,
}

/// The session a terminal follows, which `--resume` and `,` continue: `CCA_SESSION`, else `latest`.
pub(crate) fn followed(settings: &Settings, store: &Store) -> Result<String> {
    if let Some(session) = &settings.session {
        return store.resolve_id(&session.value).map_err(|e| {
            let var = crate::vars::SESSION;
            Failure::usage(format!("{var} names `{}`, which is no session here: {e:#}", session.value))
                .hint(format!(
                    "`unset {var}` to follow `latest`, or `export {var}=ID` with an id from `cca sessions`"
                ))
                .into()
        });
    }
    if let Some(id) = store.latest()? {
        return Ok(id);
    }
    // Sessions without `latest`: it was deleted. Never a silent pick of another conversation.
    let newest = store.session_ids()?.into_iter().max_by_key(|id| crate::store::sort_key(id));
    Err(match newest {
        None => Failure::usage("there is no session to continue yet")
            .hint("start one with `cca search \"your question\"`"),
        Some(newest) => Failure::usage(format!(
            "there is no `latest` link in {}, so cca does not know which session to continue",
            store.sessions_dir().display()
        ))
        .hint(format!(
            "continue the newest with `cca search -s {newest} ...`, or choose one from `cca sessions`; the next session started makes `latest` again"
        )),
    }
    .into())
}

/// What to tell a terminal that follows a session through `CCA_SESSION` when another session
/// (`new`, just created or forked) becomes `latest`: `,` there still continues the variable's,
/// and how to follow the new one. None without the variable.
pub(crate) fn still_followed_note(settings: &Settings, new: &str) -> Option<String> {
    let followed = settings.session.as_ref()?;
    let var = crate::vars::SESSION;
    Some(format!(
        "`,` here still continues {} (${var} names it); `export {var}={new}` to follow {new}",
        followed.value
    ))
}

/// The session a command is about: the id given (or a unique start of one), else the followed one.
pub(crate) fn chosen(settings: &Settings, store: &Store, id: Option<&str>) -> Result<String> {
    match id {
        Some(id) => store.resolve_id(id),
        None => followed(settings, store),
    }
}

/// The engine and model that answer in a session: a flag wins; otherwise what the session
/// started with (a session just `created` has them from the settings already).
pub(crate) fn engine_and_model<'a>(
    settings: &'a Settings,
    header: &Header,
    created: bool,
) -> Result<(&'a EngineConfig, Option<String>)> {
    let name = choose_engine(settings, Some(header));
    let engine = settings
        .engines
        .get(&name)
        .ok_or_else(|| config::unknown_engine(&name, &settings.engines))?;
    let (model, from) = match &settings.model {
        Some(m) if m.source == Source::Flag => (Some(m.value.clone()), "chosen for this turn"),
        _ if created => (new_session_model(settings, engine), "from the settings"),
        // A session's model belongs to the engine it names beside it.
        _ if header.engine == name && header.model.is_some() => {
            (header.model.clone(), "named by the session's header")
        }
        _ => (engine.model.clone(), "from the engine's `model` in config.toml"),
    };
    if let Some(model) = &model {
        engine::check_model(model, from)?;
    }
    Ok((engine, model))
}

/// The model a new session on `engine` starts with: `--model`; else the model at the top of
/// the settings (`model` in config.toml, `CCA_MODEL`) when it belongs to this engine; else the
/// engine's own (`[engines.NAME] model`), else none (the engine's default).
pub(crate) fn new_session_model(settings: &Settings, engine: &EngineConfig) -> Option<String> {
    let top = settings.model.as_ref().filter(|m| {
        // A top-level model belongs to the engine named beside it (`engine`, `CCA_ENGINE`),
        // else to the default engine: `-e gemini` never runs gemini with claude's model.
        m.source == Source::Flag
            || settings.model_engine.clone().unwrap_or_else(|| first_found(settings)) == engine.name
    });
    top.map(|m| m.value.clone()).or_else(|| engine.model.clone())
}

/// The engine for a turn: a flag wins; then the session's own; then settings; then the first
/// built-in engine found on PATH.
pub(crate) fn choose_engine(settings: &Settings, header: Option<&Header>) -> String {
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

/// The engine new sessions use: the one configured, else the first built-in engine found on
/// PATH (the first of them if none is, so that the error names it).
pub(crate) fn default_engine(settings: &Settings) -> String {
    if let Some(e) = &settings.engine {
        return e.value.clone();
    }
    first_found(settings)
}

/// The first built-in engine found on PATH; with none, the first engine declared in the
/// config file that is found (a machine with no built-in engine, where the user declared one
/// and wrote no `engine =`); else the first built-in, whose error says how to install it.
fn first_found(settings: &Settings) -> String {
    let found = |e: &&EngineConfig| locate(settings, e).is_ok();
    let builtin = engine::BUILTIN.iter().map(|spec| &settings.engines[spec.name]);
    let declared = settings.engines.values().filter(|e| !e.spec.is_builtin());
    builtin
        .clone()
        .find(found)
        .or_else(|| declared.clone().find(found))
        .map_or(engine::BUILTIN[0].name, |e| e.name.as_str())
        .to_string()
}

/// The system prompt: a flag wins; a session keeps its own; else settings.
pub(crate) fn load_prompt(
    settings: &Settings,
    store: &Store,
    header: Option<&Header>,
) -> Result<Prompt> {
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
    // A file named by a header, not by the user: transcripts are shared and copied, and a
    // header saying `"prompt": "/home/me/.ssh/id_rsa"` must not make cca send that file.
    let from_header = header.filter(|_| settings.prompt.source != Source::Flag);
    match choice {
        PromptChoice::File(path) => {
            let path = std::path::absolute(&path).unwrap_or(path);
            let Some(h) = from_header else {
                let cap = settings.input_cap();
                let text = crate::store::read_text_at_most(&path, cap).map_err(|e| {
                    Failure::usage(format!("the prompt file {} cannot be used: {e:#}", path.display()))
                        .hint("--prompt-file takes the path of a text file: `--prompt-file ./reviewer.md`")
                })?;
                return Ok(Prompt { name: path.display().to_string(), text });
            };
            let refuse = |why: &str| -> anyhow::Error {
                Failure::usage(format!(
                    "the session's header names the prompt file {}, {why}; it is not sent",
                    path.display()
                ))
                .hint(
                    "give the session a prompt for good: `--prompt-file FILE` (that file as it is \
                     now, or another) or `--prompt NAME` (`cca config` shows the default) on the \
                     next turn makes it this session's prompt from then on",
                )
                .into()
            };
            let text = crate::store::read_text_at_most(&path, settings.input_cap())
                .map_err(|e| refuse(&format!("which cannot be read ({e:#})")))?;
            let prompt = Prompt { name: path.display().to_string(), text };
            if prompt.hash() != h.prompt_hash {
                return Err(refuse("whose text is not the prompt this session started with"));
            }
            Ok(prompt)
        }
        PromptChoice::Name(name) => {
            named_prompt(store, &name).map_err(|e| match (from_header, e.downcast::<Failure>()) {
                (None, Ok(f)) => settings.prompt.source.blame(f).into(),
                (_, Ok(f)) => f.into(),
                (_, Err(e)) => e,
            })
        }
    }
}

/// A prompt by name: the user's `$CCA_HOME/prompts/NAME.md`, else the built-in.
pub(crate) fn named_prompt(store: &Store, name: &str) -> Result<Prompt> {
    prompt::validate_name(name).map_err(Failure::usage)?;
    if let Some(text) = store.read_prompt_override(name)? {
        return Ok(Prompt { name: name.to_string(), text });
    }
    match prompt::builtin(name) {
        Some(text) => Ok(Prompt { name: name.to_string(), text: text.to_string() }),
        None => Err(Failure::usage(format!("there is no prompt named `{name}`"))
            .hint(format!(
                "built-in prompts: {}; add your own as {}",
                prompt::choices(Vec::new()).join(", "),
                store.home.join("prompts").join(format!("{name}.md")).display()
            ))
            .into()),
    }
}

/// The folder cca runs in, for `--here` and an MCP client's `cwd`.
pub(crate) fn current_dir() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| {
        crate::error::Failure::new(
            crate::error::exit::ERROR,
            format!("cannot tell which folder this is: {e}"),
        )
        .hint("the folder may have been deleted since this shell went into it: `cd` to one that exists")
        .into()
    })
}

/// An engine to filter by, as given (`--engine`, an MCP argument): none when empty, and with a
/// note when no session kept was held with it (a misspelt or differently cased name finds
/// nothing, and should not pass for an engine with nothing to find).
pub(crate) fn engine_filter(
    store: &crate::store::Store,
    given: Option<&str>,
) -> (Option<String>, Option<String>) {
    let Some(engine) = given.map(str::trim).filter(|e| !e.is_empty()) else { return (None, None) };
    let listed = store.listing().unwrap_or_default();
    // A session that cannot be read is listed with no engine: it names none.
    let mut used: Vec<&str> =
        listed.iter().map(|l| l.engine.as_str()).filter(|e| !e.is_empty()).collect();
    used.sort_unstable();
    used.dedup();
    let note = (!used.is_empty() && !used.contains(&engine)).then(|| {
        format!(
            "no session kept was held with the engine `{engine}`; the sessions kept were held with {}",
            used.join(", ")
        )
    });
    (Some(engine.to_string()), note)
}

/// A folder a user names to narrow a search to (`--folder`, an MCP client's `cwd`), as
/// sessions record theirs (the folder they started in, every link followed: what
/// [`current_dir`] gives): `.` and `..`, a trailing slash, a relative path and links all name
/// the folder they lead to. One that is not there (gone since) is taken as written, made
/// absolute, with `.` and `..` worked out.
pub(crate) fn named_folder(path: &Path) -> Result<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Ok(real);
    }
    let absolute = std::path::absolute(path)
        .with_context(|| format!("cannot tell which folder {} is", path.display()))?;
    let mut folder = PathBuf::new();
    for part in absolute.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                folder.pop();
            }
            part => folder.push(part),
        }
    }
    Ok(folder)
}

/// Clears a session's context: appends the marker after which nothing before is sent again.
/// `waiting` is called when another cca holds the session; `noted` is given the note of a
/// cut-off last record repaired first.
pub(crate) fn clear(
    settings: &Settings,
    store: &Store,
    id: &str,
    waiting: impl FnOnce(),
    noted: impl FnOnce(&str),
) -> Result<bool> {
    let _lock = store.lock(id, true, waiting)?;
    let summary = repaired_summary(settings, store, id, noted)?;
    // Nothing would be sent from before (a new session, one cleared already): a clear record
    // would only add noise to the file.
    if summary.live.summary.is_none() && summary.live.exchanges.is_empty() {
        return Ok(false);
    }
    let record = Record {
        kind: Kind::Clear,
        meta: Meta { at: Some(settings.now_string()), ..Meta::default() },
        content: String::new(),
    };
    Appender::open(store, id)?
        .append(transcript::render_record(&record, summary.exchanges + 1).as_bytes())?;
    Ok(true)
}

/// Creates a session from the first `at` exchanges of `source` (all by default) and makes it
/// latest; returns its id. `waiting` is called when another cca holds the source.
pub(crate) fn fork(
    settings: &Settings,
    store: &Store,
    source: &str,
    at: Option<u64>,
    waiting: impl FnOnce(),
) -> Result<String> {
    let _lock = store.lock(source, true, waiting)?;
    let (summary, exchange_ends) = store.summarize_with_ends(source)?;
    let n = at.unwrap_or(summary.exchanges);
    // A session with no answered exchange has nothing a fork could keep, whatever --at says.
    if summary.exchanges == 0 {
        return Err(Failure::usage(format!(
            "session {source} has no answered exchange, so there is nothing to fork"
        ))
        .hint("start anew with `cca search QUESTION`, or continue it with `cca search -s ID QUESTION`")
        .into());
    }
    if n == 0 {
        return Err(Failure::usage("a fork at 0 would keep nothing of the session")
            .hint("keep at least one exchange (`--at 1`), or start anew with `cca search QUESTION`")
            .into());
    }
    if n > summary.exchanges {
        return Err(Failure::usage(format!(
            "session {source} has {}; cannot fork at {n}",
            crate::human::counted(summary.exchanges, "exchange", "exchanges")
        ))
        .hint(format!(
            "fork at {} or less (`cca show {source}` numbers them), or leave out --at to fork it whole",
            summary.exchanges
        ))
        .into());
    }
    let file = store.open_session(source)?;
    let cannot_read = || format!("cannot read {}", store.session_path(source).display());
    // The whole session goes on whole: a clear or a compaction after its last exchange (and a
    // failed attempt) is as much its state as the exchanges are. A question left unanswered by
    // a crash, or a record cut off, goes too: the fork's first turn deals with it as the
    // session's own would (recorded as interrupted, set aside).
    let end = match n == summary.exchanges {
        true => file.metadata().with_context(cannot_read)?.len(),
        false => exchange_ends[n as usize - 1],
    };
    let mut body = vec![0u8; (end - summary.header_end) as usize];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut body, summary.header_end)
        .with_context(cannot_read)?;
    let body = String::from_utf8(body).context("the transcript is not UTF-8")?;
    let now = settings.now();
    let header = Header {
        created: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        forked_from: Some(transcript::ForkedFrom { session: source.to_string(), turn: n }),
        // A name belongs to one session: the fork starts without one.
        name: None,
        // The fork is cca's own: importing again never writes into it.
        imported: None,
        // Fields a newer cca gave the session are that session's, as its name is.
        other: Default::default(),
        ..summary.header
    };
    let stamp = now.format("%Y%m%d-%H%M%S").to_string();
    let id = store.create_session(&stamp, |id| {
        transcript::render_header(&Header { id: id.to_string(), ..header.clone() }) + &body
    })?;
    store.set_latest(&id)?;
    Ok(id)
}

/// The summary of a session records are about to be appended to, its cut-off last record
/// repaired first (`noted` is given the note then). Call it holding the session's lock.
pub(crate) fn repaired_summary(
    settings: &Settings,
    store: &Store,
    id: &str,
    noted: impl FnOnce(&str),
) -> Result<Summary> {
    let summary = store.summarize_to_append(id)?;
    match repair_cut_off(settings, store, id, &summary)? {
        Some(note) => {
            noted(&note);
            store.summarize_to_append(id)
        }
        None => Ok(summary),
    }
}

/// Repairs a record cut off by a crash at the end of the session's file, once, before anything
/// is appended after it (a turn, a clear, a compaction): appended to it, a record would be read
/// as part of the cut one. Returns the note to show when it repaired; the caller reads the
/// summary again then. Call it holding the session's lock.
pub(crate) fn repair_cut_off(
    settings: &Settings,
    store: &Store,
    id: &str,
    summary: &Summary,
) -> Result<Option<String>> {
    let Some(at) = summary.problems.iter().find_map(|p| p.cut_off_at) else { return Ok(None) };
    let kept =
        store.set_aside_cut_off(id, at, &settings.now().format("%Y%m%d-%H%M%S").to_string())?;
    Ok(Some(format!(
        "note: the last record of session {id} was cut off (cca was stopped while writing \
         it); it is kept in {}, and the transcript says so",
        kept.display()
    )))
}
