//! One request to an engine: build the invocation, refuse what is too large, create the files
//! the engine needs, run it, and tidy up after it. Used for turns and for compaction.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::config::{EngineConfig, EngineKind, Settings};
use crate::engine::{self, Arg, Invocation, Request};
use crate::error::{Failure, exit};
use crate::frame;
use crate::run::{self, Display, SignalWatch, Spawn};
use crate::store::Store;
use crate::transcript::{self, Live};
use crate::turn::human_bytes;

/// A session and the engine (and model) that answers in it.
pub struct Session<'a> {
    pub settings: &'a Settings,
    pub store: &'a Store,
    /// The session's id: its transcript holds the live context.
    pub id: &'a str,
    pub engine: &'a EngineConfig,
    pub model: Option<&'a str>,
}

/// What to send, in which session, and how to show it.
pub struct Call<'a> {
    pub session: &'a Session<'a>,
    pub system: &'a str,
    pub live: &'a std::sync::Arc<Live>,
    pub attachment: Option<&'a str>,
    pub query: &'a str,
    pub display: Display,
}

/// Stopped by a signal before the engine started.
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by signal {}", self.0)
    }
}

impl std::error::Error for Interrupted {}

/// Runs the call. Errors mean the engine did not run (or its output could not be kept).
pub fn call(c: &Call, signals: &SignalWatch) -> Result<run::Outcome> {
    if let Some(signal) = signals.pending() {
        return Err(Interrupted(signal).into());
    }
    let s = c.session;
    let transcript = s.store.open_session(s.id)?;
    let stored = |range: &std::ops::Range<u64>| -> io::Result<String> {
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        std::os::unix::fs::FileExt::read_exact_at(&transcript, &mut buf, range.start)?;
        let text =
            String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(transcript::unescape(&text))
    };
    let request = Request {
        system: c.system,
        live: c.live,
        stored: &stored,
        attachment: c.attachment.map(|text| frame::Attachment { name: "stdin", text }),
        query: c.query,
        model: s.model,
    };
    let program = locate(s.settings, s.engine)?;
    let invocation = engine::invocation(s.engine, program, &request)?;
    if let Some(limit) = s.engine.max_input_bytes {
        // The measured limits are those of stdin.
        let input_bytes =
            frame::write(&invocation.stdin, &frame::Windowed::new(&transcript), &mut io::sink())
                .context("cannot read the transcript")?;
        if input_bytes > limit {
            return Err(Failure::new(
                exit::ERROR,
                format!(
                    "this turn is {} for {}, over its limit of {}; it was not sent",
                    human_bytes(input_bytes),
                    s.engine.name,
                    human_bytes(limit)
                ),
            )
            .hint("start a new session, or `cca clear` or `cca compact` this one, or raise max_input_bytes in config.toml")
            .into());
        }
    }
    let (args, env, scratch) = materialize(s.store, &invocation)?;
    let spawn = Spawn {
        program: invocation.program.clone(),
        args,
        env,
        stdin: invocation.stdin,
        transcript,
    };
    let decoder = engine::decoder(s.engine.kind);
    let outcome = run::run(spawn, decoder, s.store.scratch_file()?, &c.display, signals)?;
    drop(scratch);
    // cca is the memory: gemini's own copy of the turn must not pile up.
    if let (EngineKind::Gemini, Some(id), Some(home)) =
        (s.engine.kind, &outcome.engine_session, &s.settings.gemini_home)
    {
        crate::store::remove_engine_session_files(&engine::gemini::sessions_root(home), |path| {
            engine::gemini::session_file_matches(path, id)
        });
    }
    Ok(outcome)
}

/// How a call ended.
pub enum Verdict {
    Answered,
    Failed { reason: String, hint: Option<String>, code: u8 },
    Interrupted { signal: i32 },
}

/// Decides whether the engine answered (docs/DESIGN.md: only a successful, non-empty answer
/// counts).
pub fn verdict(engine: &EngineConfig, outcome: &run::Outcome) -> Verdict {
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

/// Creates the files an invocation asks for and returns plain arguments and environment. The
/// files go in a private folder, made only when there is one to write and removed when the
/// returned guard is dropped.
fn materialize(
    store: &Store,
    inv: &Invocation,
) -> Result<(Vec<OsString>, EnvVars, Option<tempfile::TempDir>)> {
    let mut dir: Option<tempfile::TempDir> = None;
    let mut resolve = |arg: &Arg| -> Result<OsString> {
        match arg {
            Arg::Plain(s) => Ok(s.clone()),
            Arg::File { name, contents } => {
                let dir = match &mut dir {
                    Some(dir) => dir,
                    empty => empty.insert(store.engine_scratch_dir()?),
                };
                let path = dir.path().join(name);
                store.write_private(&path, contents.as_bytes())?;
                Ok(path.into_os_string())
            }
        }
    };
    let args = inv.args.iter().map(&mut resolve).collect::<Result<_>>()?;
    let env =
        inv.env.iter().map(|(k, v)| Ok((OsString::from(k), resolve(v)?))).collect::<Result<_>>()?;
    Ok((args, env, dir))
}
