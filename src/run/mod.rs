//! The only place cca spawns a process: the engine, in its own process group, with three
//! threads for the three pipes (feed stdin, pump stdout, pump stderr) and the calling thread
//! decoding, teeing the answer to a file, reporting progress, and watching its [`Cancel`].
//!
//! No shell is involved. Stderr is always drained (an engine blocked on a full stderr pipe would
//! never finish its stdout). When the turn is cancelled (Ctrl-C in a terminal, `session/cancel`
//! from an editor) the whole group gets SIGTERM, then SIGKILL after a grace period or a second
//! cancel; nothing of the group outlives a turn. cca ends the group itself in the same way
//! ([`Halted`]) when the answer's scratch file cannot be written, or when the system stopped a
//! process of the group for using the terminal, which an engine cannot have: it runs in a
//! background process group. Nothing here prints: what happens is reported through a callback,
//! and the front end decides what the user sees.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Range;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::process::{Pid, Signal};

use crate::config::Settings;
use crate::engine::{Decoder, EngineConfig, ToolCall, Usage};
use crate::error::{Failure, exit};
use crate::frame::{self, Piece};
use crate::media::Image;

mod decoding;
// A process sharing cca's memory, and signals waited for: no safe call does either.
#[allow(unsafe_code)]
mod guard;
pub(crate) use guard::Guard;
pub(crate) mod kept;
mod pager;
pub(crate) mod standby;
use crate::steer::{Inbox, Steered};
use decoding::Decoding;
pub(crate) use pager::{DEFAULT_PAGER, page, written};

/// How much of the engine's stderr is kept for error messages.
const STDERR_TAIL: usize = 8 * 1024;

/// How long the pipes may stay open once the engine has exited and its group was told to stop
/// (or a stop was asked for). Then only a process outside the group (a helper in a session of its own: `setsid`, ssh's ControlPersist
/// master) still holds them then, and it may live for hours: what it would write is not the
/// engine's answer.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// How long the engine's group may keep its pipes open after the engine exited before it gets
/// SIGTERM.
const LINGER: Duration = Duration::from_millis(500);

/// How often the loop looks for a process of the group stopped by the system.
const STOPPED_CHECK: Duration = Duration::from_millis(500);

/// Why cca ended the engine's group itself, when nobody asked it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Halted {
    /// The answer's scratch file could not be written (a full disk): nothing more could be kept,
    /// so the engine is stopped and what was kept is recorded.
    Scratch(String),
    /// A process of the group was stopped by the system (SIGTTIN or SIGTTOU: it read the
    /// terminal, or set its modes, from a background process group, as an ssh password prompt
    /// does); it would wait for ever.
    NeedsTerminal,
    /// The API refused the engine's credentials: it would retry for minutes to no end.
    Refused(String),
}

/// Why a turn was stopped before its end. Front ends other than the terminal add their own
/// reasons here (an editor's cancel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A signal reached a terminal front end (Ctrl-C is SIGINT).
    Signal(i32),
    /// A client asked for it (an editor's `session/cancel`).
    Request,
    /// The client went away (an editor closed cca's stdin) while the turn ran.
    Closed,
}

impl Stop {
    /// How the transcript and messages name it: `Ctrl-C`, `SIGTERM`.
    pub(crate) fn name(self) -> String {
        match self {
            Stop::Signal(signal) => crate::human::signal_name(signal),
            Stop::Request => "cancelled".into(),
            Stop::Closed => "client gone".into(),
        }
    }

    /// The conventional exit code: 128 + the signal (130 for Ctrl-C).
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Stop::Signal(signal) => signal_exit_code(signal),
            // As for Ctrl-C: the person asked for it.
            Stop::Request | Stop::Closed => signal_exit_code(signal_hook::consts::SIGINT),
        }
    }
}

/// Stopped before the engine started (or while waiting for the session), so nothing ran.
#[derive(Debug)]
pub(crate) struct Interrupted(pub Stop);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted ({})", self.0.name())
    }
}

impl std::error::Error for Interrupted {}

/// A handle that stops a turn from another thread. The first [`Cancel::stop`] ends the engine's
/// group gently (TERM, then KILL after the grace period); a second one does not wait.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cancel(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    stop: Mutex<Option<Stop>>,
    force: AtomicBool,
}

impl Cancel {
    pub(crate) fn new() -> Cancel {
        Cancel::default()
    }

    pub(crate) fn stop(&self, why: Stop) {
        let mut stop = self.0.stop.lock().unwrap_or_else(|e| e.into_inner());
        if stop.is_some() {
            self.0.force.store(true, Ordering::SeqCst);
        } else {
            *stop = Some(why);
        }
    }

    /// Why the turn was asked to stop, if it was.
    pub(crate) fn requested(&self) -> Option<Stop> {
        *self.0.stop.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err(Interrupted)` once a stop was asked for: for the places that check before going on.
    pub(crate) fn check(&self) -> Result<()> {
        match self.requested() {
            Some(why) => Err(Interrupted(why).into()),
            None => Ok(()),
        }
    }

    fn forced(&self) -> bool {
        self.0.force.load(Ordering::SeqCst)
    }
}

/// What to run.
pub(crate) struct Spawn {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Vec<Piece>,
    /// The transcript, for the history's stored content.
    pub transcript: File,
    /// How long the group has between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// For an engine that reads input while it runs: how to write a user message. The framed
    /// prompt is the first; stdin then stays open for steers until every message was taken and
    /// answered.
    pub stream_line: Option<fn(&str, &[Image]) -> String>,
    /// Images the first message carries beside the framed prompt (with `stream_line` only).
    pub images: Vec<Image>,
    /// Steers for this turn, if it takes any.
    pub inbox: Option<Inbox>,
}

/// What the engine shows while it runs, as it happens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Progress<'a> {
    /// Answer text.
    Text(&'a str),
    /// A tool call the engine starts; its [`Progress::Tool`] follows, in the same order.
    ToolStarted(&'a ToolCall),
    /// A tool call, once its result is in (ran, refused or failed).
    Tool(&'a ToolCall),
    /// What the engine wrote on stderr, or a line of its output that is not the answer.
    Stderr(&'a [u8]),
    /// The engine is retrying a failing API.
    Retry(&'a str),
    /// A stop was asked for and the engine is being ended.
    Stopping,
    /// A steer arrived, or the engine took it.
    Steer(Steered<'a>),
}

/// An answer the engine ended by taking a steer: it gave more than one in this run.
#[derive(Debug)]
pub(crate) struct Earlier {
    /// Its bytes in the answer file.
    pub range: Range<u64>,
    pub has_text: bool,
    pub usage: Usage,
    pub engine_error: Option<String>,
    pub duration: Duration,
    /// The message(s) the engine took right after it, one user message for the engine.
    pub steer: String,
}

/// What one run of the engine gave: its answers, how it ended, and what it reported.
pub(crate) struct EngineRun {
    /// Answers the engine gave before the last one, each followed by the steer it took then
    /// (empty unless the engine reads input while it runs).
    pub earlier: Vec<Earlier>,
    /// Steers written to the engine that it never took (the run ended first).
    pub untaken: Vec<String>,
    /// The answer as the transcript keeps it (the printed text and a block per tool call, see
    /// `answer`), positioned at the start of the last answer (the earlier ones come before it).
    pub answer: File,
    /// Whether the answer holds anything but whitespace.
    pub answer_has_text: bool,
    pub status: Option<ExitStatus>,
    pub engine_error: Option<String>,
    /// The engine's own id for the run, if it told.
    pub engine_session: Option<String>,
    /// The model the engine said it runs, if it said.
    pub model: Option<String>,
    pub usage: Usage,
    /// The end of what the engine wrote on stderr (and on stdout outside its answer).
    pub stderr_tail: String,
    /// Why the turn was stopped, if it was.
    pub interrupted: Option<Stop>,
    pub duration: Duration,
    /// Feeding stdin failed for a reason other than the engine closing it.
    pub feed_error: Option<String>,
    /// Why cca ended the group itself, if it did.
    pub halted: Option<Halted>,
}

pub(crate) enum Pipe {
    Stdout(Vec<u8>),
    StdoutEnd,
    Stderr(Vec<u8>),
    StderrEnd,
    Exited(io::Result<ExitStatus>),
    FeedFailed(io::Error),
}

/// The engine could not be started at all.
#[derive(Debug)]
pub(crate) struct SpawnError {
    pub program: PathBuf,
    pub error: io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot run {}: {}", self.program.display(), self.error)
    }
}

impl std::error::Error for SpawnError {}

/// Finds the engine's program: a path as given, or a name on PATH.
pub(crate) fn locate(settings: &Settings, engine: &EngineConfig) -> Result<PathBuf> {
    let program = Path::new(&engine.program);
    find(settings, engine).ok_or_else(|| {
        let looked = if program.components().count() > 1 {
            format!("{} ({}) does not exist", program.display(), engine.program_source)
        } else {
            format!("`{}` is not on PATH", program.display())
        };
        let failure =
            Failure::new(exit::ERROR, format!("engine {} not found: {looked}", engine.name));
        match engine.program_from_var {
            // The variable is set already: it is the value that is wrong.
            Some(var) => failure.hint(format!(
                "set {var} to the path of the {} program, or `unset {var}`",
                engine.name
            )),
            _ => {
                // A session held elsewhere (imported, synced) keeps an engine this machine may
                // lack: one that is here answers with `-e`.
                let here = settings
                    .engines
                    .values()
                    .find(|e| e.name != engine.name && find(settings, e).is_some());
                match here {
                    Some(other) => failure.hint(format!(
                        "{}; or answer with an engine that is here: `-e {}`",
                        engine.install_hint(),
                        other.name
                    )),
                    None => failure.hint(engine.install_hint()),
                }
            }
        }
        .into()
    })
}

/// The engine's program, when it is there: a path as given, or a name on PATH.
fn find(settings: &Settings, engine: &EngineConfig) -> Option<PathBuf> {
    let program = Path::new(&engine.program);
    if program.components().count() > 1 {
        program.is_file().then(|| program.to_path_buf())
    } else {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        which::which_in(program, settings.path.as_ref(), cwd).ok()
    }
}

/// Runs a program to the end and returns its stdout (`llm logs --json` for `cca import`);
/// its stderr is kept for the error when it fails. No shell; stdin is empty.
pub(crate) fn output_of(program: &Path, args: &[&std::ffi::OsStr]) -> Result<Vec<u8>> {
    let shown =
        || format!("{} {}", program.display(), args.join(std::ffi::OsStr::new(" ")).display());
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", shown()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{} failed ({}): {}",
            shown(),
            describe_status(&out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// How a program run to its end ended, and what it printed.
pub(crate) struct Ran {
    pub success: bool,
    pub status: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs a program in `dir` to its end (`git` for `cca sync`), with `env` added and stdin
/// empty, and returns what it printed, whether it succeeded or not. No shell; nothing of it
/// outlives cca.
pub(crate) fn run_in(
    program: &Path,
    dir: &Path,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &str)],
) -> Result<Ran> {
    // Guarded, as an engine is, so that nothing of it outlives a killed cca (a git left
    // running would write to the repository under the next sync); in a process group of its
    // own, which the guard ends whole.
    let guard = Guard::start().context("cannot start the guard of a process")?;
    let out = Command::new(program)
        .process_group(guard.group())
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", program.display()))?;
    drop(guard);
    Ok(Ran {
        success: out.status.success(),
        status: describe_status(&out.status),
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

/// Starts a program and leaves it running, not waited for: in a process group of its own (so
/// that a tool ending its own group, or a terminal hanging up, does not end it), with stdout
/// and stderr to `log`, and stdin the caller's when `stdin` says so (a hook's JSON is read by
/// the program started, not by the hook), else empty. For `cca import --hook`, which must
/// return to the tool at once.
pub(crate) fn detach(program: &Path, args: &[OsString], stdin: bool, log: &File) -> Result<()> {
    let output = |log: &File| log.try_clone().context("cannot share the hooks' log");
    Command::new(program)
        .args(args)
        .stdin(if stdin { Stdio::inherit() } else { Stdio::null() })
        .stdout(output(log)?)
        .stderr(output(log)?)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot run {}", program.display()))?;
    // The child is never waited for: once this process ends, init reaps it.
    Ok(())
}

/// Set in the environment of every engine cca starts, not read from the user's: the hooks
/// `cca import --auto on` puts into Claude Code, gemini and codex import nothing for a run of
/// cca's own (its turns are in cca already).
pub(crate) const ENGINE_RUN: &str = "CCA_ENGINE_RUN";

/// cca's own binary, once the binary has said where it is (`cca __standby` and a sync after
/// a turn are started from it); unit tests of the library have none.
static OWN_PROGRAM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// cca's own binary, once it has said where it is.
pub(crate) fn own_program() -> Option<&'static Path> {
    OWN_PROGRAM.get().map(PathBuf::as_path)
}

/// Says where cca's own binary is.
pub(crate) fn set_own_program(exe: PathBuf) {
    let _ = OWN_PROGRAM.set(exe);
}

/// The engine's process with its pipes, in the process group its [`Guard`] leads, so that
/// nothing of it outlives cca; keep the guard until the process has been waited for.
fn spawn_engine(
    program: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
) -> io::Result<(std::process::Child, Guard)> {
    let guard = Guard::start()?;
    let child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(ENGINE_RUN, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(guard.group())
        .spawn()?;
    Ok((child, guard))
}

/// Runs one turn through the engine, reporting what it shows to `progress`: starts it, pumps
/// its output until the answer ends, then ends whatever is left of its group.
pub(crate) fn run(
    spawn: Spawn,
    decoder: Box<dyn Decoder>,
    answer: File,
    cancel: &Cancel,
    progress: &mut dyn FnMut(Progress),
) -> Result<EngineRun> {
    let started = Instant::now();
    let mut engine = Engine::start(spawn)?;
    let mut decoding = Decoding::new(decoder, answer, started);
    let pumped = engine.pump(&mut decoding, cancel, progress);
    let ending = engine.stop();
    pumped?;
    decoding.finish(ending, started)
}

/// The engine's process group while it runs, the pipes it reports on, and how far it is from
/// being done.
struct Engine {
    group: Pid,
    /// How long the group has between SIGTERM and SIGKILL.
    grace: Duration,
    pipes: Receiver<Pipe>,
    /// Lines for the engine's stdin, for an engine that reads input while it runs; dropping
    /// it closes stdin.
    steers: Option<mpsc::Sender<String>>,
    /// How a message becomes a line of that input.
    stream_line: Option<fn(&str, &[Image]) -> String>,
    inbox: Option<Inbox>,
    ending: Ending,
}

impl Engine {
    /// Spawns the engine, with a thread to feed its stdin, one to pump each of stdout and
    /// stderr, and one to wait for it, all reporting on one channel.
    fn start(spawn: Spawn) -> Result<Engine> {
        let (mut child, guard) = spawn_engine(&spawn.program, &spawn.args, &spawn.env)
            .map_err(|error| SpawnError { program: spawn.program.clone(), error })?;
        let group = guard.group_of(&child);
        // Bounded: an engine that writes faster than the front end reads waits, instead of its
        // output piling up in memory.
        let (tx, rx) = mpsc::sync_channel(16);
        let (steers, steers_rx) = mpsc::channel::<String>();
        let feed = Feed {
            pieces: spawn.stdin,
            transcript: spawn.transcript,
            stream_line: spawn.stream_line,
            images: spawn.images,
        };
        feed.start(child.stdin.take().expect("piped"), steers_rx, tx.clone());
        pump(child.stdout.take().expect("piped"), tx.clone(), Pipe::Stdout, Pipe::StdoutEnd);
        pump(child.stderr.take().expect("piped"), tx.clone(), Pipe::Stderr, Pipe::StderrEnd);
        thread::spawn(move || {
            let status = child.wait();
            drop(guard);
            let _ = tx.send(Pipe::Exited(status));
        });
        Ok(Engine {
            group,
            grace: spawn.grace,
            pipes: rx,
            steers: spawn.stream_line.map(|_| steers),
            stream_line: spawn.stream_line,
            inbox: spawn.inbox,
            ending: Ending::default(),
        })
    }

    /// Feeds what the engine writes to `decoding` until it has exited and closed its pipes (or
    /// something outside its group holds them too long), passing steers on and stopping the
    /// group when a stop is asked for or the run cannot go on.
    fn pump(
        &mut self,
        decoding: &mut Decoding,
        cancel: &Cancel,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        loop {
            self.pass_steers(decoding, progress);
            // Every message taken and answered, none waiting: the engine may end.
            if self.steers.is_some()
                && decoding.stream.done()
                && self.inbox.as_ref().is_none_or(Inbox::is_empty)
            {
                self.steers = None;
            }
            self.watch(cancel, decoding, progress);
            if self.ending.status.is_some() && self.ending.out_done && self.ending.err_done {
                return Ok(());
            }
            if self.pipes_held_too_long() {
                self.take_what_arrived(decoding, progress);
                return Ok(());
            }
            match self.pipes.recv_timeout(Duration::from_millis(50)) {
                Ok(pipe) => self.take(pipe, decoding, progress)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }

    /// Ends what is left of the group (nothing the engine started outlives the run) and closes
    /// its stdin; gives how the run ended.
    fn stop(mut self) -> Ending {
        let termed = self.ending.stopped_at.is_some() || self.ending.group_termed;
        stop_leftovers(self.group, termed, self.grace);
        drop(self.steers.take());
        self.ending
    }

    /// Reports steers as they arrive and writes them to an engine that reads input while it
    /// runs.
    fn pass_steers(&mut self, decoding: &mut Decoding, progress: &mut dyn FnMut(Progress)) {
        if let Some(inbox) = &self.inbox {
            for text in inbox.fresh() {
                progress(Progress::Steer(Steered::Queued(&text)));
            }
            let steers = self.steers.as_ref().filter(|_| self.ending.interrupted.is_none());
            if let (Some(steers), Some(line)) = (steers, self.stream_line) {
                for text in inbox.take_all() {
                    // A send fails only when the feeder is gone; the steer then stays untaken.
                    let _ = steers.send(line(&text, &[]));
                    decoding.stream.written.push_back(text);
                }
            }
        }
    }

    /// Stops the group when a stop is asked for (and kills it at a second one), or when cca
    /// must end it itself ([`Halted`]); kills it once its grace period is over.
    fn watch(
        &mut self,
        cancel: &Cancel,
        decoding: &mut Decoding,
        progress: &mut dyn FnMut(Progress),
    ) {
        let ending = &mut self.ending;
        if let Some(why) = cancel.requested() {
            if ending.interrupted.is_none() {
                ending.interrupted = Some(why);
                if ending.halted.is_none() {
                    ending.stop(self.group, self.grace);
                }
                progress(Progress::Stopping);
            } else if cancel.forced() {
                signal_group(self.group, Signal::KILL);
            }
        }
        if ending.interrupted.is_none() && ending.halted.is_none() {
            let halted = match decoding.scratch_error.take() {
                Some(e) => Some(Halted::Scratch(e)),
                None if decoding.refused.is_some() => decoding.refused.take().map(Halted::Refused),
                None if ending.checked_at.elapsed() >= STOPPED_CHECK => {
                    ending.checked_at = Instant::now();
                    group_stopped(self.group).then_some(Halted::NeedsTerminal)
                }
                None => None,
            };
            if halted.is_some() {
                ending.halted = halted;
                ending.stop(self.group, self.grace);
            }
        }
        if ending.kill_at.is_some_and(|at| Instant::now() >= at) {
            signal_group(self.group, Signal::KILL);
            ending.kill_at = None;
        }
    }

    /// Whether to stop waiting for the pipes: the engine exited, but something it started
    /// still holds them. The group is told to stop after [`LINGER`]; whatever holds them after
    /// that may be outside the group, out of reach of any signal, and the wait ends
    /// [`PIPE_GRACE`] later (`stop_leftovers` ends the group). A stop asked for after the
    /// engine exited ends the wait as soon.
    fn pipes_held_too_long(&mut self) -> bool {
        let ending = &mut self.ending;
        let Some(exited) = ending.exited_at else { return false };
        if exited.elapsed() > LINGER && !ending.group_termed {
            ending.group_termed = true;
            if ending.interrupted.is_none() && ending.halted.is_none() {
                terminate(self.group);
                ending.kill_at = Some(Instant::now() + self.grace);
            }
        }
        let from = ending.stopped_at.map_or(exited + LINGER, |at| at.max(exited));
        from.elapsed() > PIPE_GRACE
    }

    /// Decodes what already arrived on the pipes, without waiting for more.
    fn take_what_arrived(&mut self, decoding: &mut Decoding, progress: &mut dyn FnMut(Progress)) {
        while let Ok(pipe) = self.pipes.try_recv() {
            match pipe {
                Pipe::Stdout(chunk) => decoding.stdout(&chunk, progress),
                Pipe::Stderr(chunk) => decoding.engine_stderr(&chunk, progress),
                _ => {}
            }
        }
        if !self.ending.out_done {
            decoding.stdout_end(progress);
        }
        if !self.ending.err_done {
            decoding.engine_stderr_end(progress);
        }
    }

    /// One report from the pipes' threads.
    fn take(
        &mut self,
        pipe: Pipe,
        decoding: &mut Decoding,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        match pipe {
            Pipe::Stdout(chunk) => decoding.stdout(&chunk, progress),
            Pipe::StdoutEnd => {
                decoding.stdout_end(progress);
                self.ending.out_done = true;
            }
            Pipe::Stderr(chunk) => decoding.engine_stderr(&chunk, progress),
            Pipe::StderrEnd => {
                decoding.engine_stderr_end(progress);
                self.ending.err_done = true;
            }
            Pipe::Exited(result) => {
                self.ending.status = Some(result.context("cannot wait for the engine")?);
                self.ending.exited_at = Some(Instant::now());
            }
            Pipe::FeedFailed(e) => self.ending.feed_error = Some(e.to_string()),
        }
        Ok(())
    }
}

/// What goes to the engine's stdin.
struct Feed {
    pieces: Vec<Piece>,
    transcript: File,
    stream_line: Option<fn(&str, &[Image]) -> String>,
    images: Vec<Image>,
}

impl Feed {
    /// Writes the framed prompt on a thread of its own, then, for an engine that reads input
    /// while it runs, each steer's line from `steers` until it closes. A failure other than the
    /// engine closing its stdin is reported on `tx`.
    fn start(self, stdin: ChildStdin, steers: Receiver<String>, tx: SyncSender<Pipe>) {
        thread::spawn(move || {
            let mut stdin = io::BufWriter::with_capacity(64 * 1024, stdin);
            let source = frame::Windowed::new(self.transcript);
            let result = match self.stream_line {
                None => frame::write(&self.pieces, &source, &mut stdin).and_then(|_| stdin.flush()),
                Some(line) => (|| {
                    let mut framed = Vec::new();
                    frame::write(&self.pieces, &source, &mut framed)?;
                    let first = line(&String::from_utf8_lossy(&framed), &self.images);
                    stdin.write_all(first.as_bytes())?;
                    stdin.flush()?;
                    for line in steers {
                        stdin.write_all(line.as_bytes())?;
                        stdin.flush()?;
                    }
                    Ok(())
                })(),
            };
            match result {
                // The engine may stop reading early (it failed, or it needs no more): not ours
                // to report.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
                Err(e) => {
                    let _ = tx.send(Pipe::FeedFailed(e));
                }
                Ok(()) => {}
            }
        });
    }
}

/// How far the engine's process group is from being done.
struct Ending {
    out_done: bool,
    err_done: bool,
    status: Option<ExitStatus>,
    interrupted: Option<Stop>,
    /// When the group gets SIGKILL, if it is still there.
    kill_at: Option<Instant>,
    /// When a stop was asked for.
    stopped_at: Option<Instant>,
    /// Whether the group got SIGTERM because the engine exited without closing its pipes.
    group_termed: bool,
    /// When the engine itself exited (its pipes may still be held by something it started).
    exited_at: Option<Instant>,
    feed_error: Option<String>,
    halted: Option<Halted>,
    /// When the group was last looked at for a stopped process.
    checked_at: Instant,
}

impl Default for Ending {
    fn default() -> Ending {
        Ending {
            out_done: false,
            err_done: false,
            status: None,
            interrupted: None,
            kill_at: None,
            stopped_at: None,
            group_termed: false,
            exited_at: None,
            feed_error: None,
            halted: None,
            checked_at: Instant::now(),
        }
    }
}

impl Ending {
    /// Asks the group to end: SIGTERM now, SIGKILL after the grace period.
    fn stop(&mut self, group: Pid, grace: Duration) {
        self.stopped_at = Some(Instant::now());
        terminate(group);
        self.kill_at = Some(Instant::now() + grace);
    }
}

fn pump(
    mut from: impl Read + Send + 'static,
    tx: SyncSender<Pipe>,
    data: fn(Vec<u8>) -> Pipe,
    end: Pipe,
) {
    thread::spawn(move || {
        let mut buf = ReadBuf::new();
        loop {
            match buf.read_from(&mut from) {
                Ok([]) => break,
                Ok(read) => {
                    if tx.send(data(read.to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = tx.send(end);
    });
}

/// A buffer to read a stream through: a page at first, doubled whenever a read fills it, up to
/// a pipe's 64 KB. A short answer costs a page, not sixteen zeroed first.
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    filled: bool,
}

impl ReadBuf {
    const LEAST: usize = 4 * 1024;
    const MOST: usize = 64 * 1024;

    pub(crate) fn new() -> ReadBuf {
        ReadBuf { buf: vec![0; Self::LEAST], filled: false }
    }

    /// One read from `from`: what it gave, empty at the end.
    pub(crate) fn read_from(&mut self, from: &mut (impl Read + ?Sized)) -> io::Result<&[u8]> {
        if self.filled && self.buf.len() < Self::MOST {
            self.buf.resize(2 * self.buf.len(), 0);
        }
        let n = from.read(&mut self.buf)?;
        self.filled = n == self.buf.len();
        Ok(&self.buf[..n])
    }
}

fn signal_group(group: Pid, signal: Signal) {
    // ESRCH (the group is already gone) is the outcome we want.
    let _ = rustix::process::kill_process_group(group, signal);
}

/// SIGTERM, and SIGCONT so that a stopped process of the group (one that wanted the terminal,
/// say) gets it now rather than never.
fn terminate(group: Pid) {
    signal_group(group, Signal::TERM);
    signal_group(group, Signal::CONT);
}

/// Whether a process of the group is stopped (state `T` in /proc): in a background process
/// group, the system stops a process that reads the terminal or sets its modes, and nothing
/// would ever continue it. A process being traced (`t`) is a debugger's business.
fn group_stopped(group: Pid) -> bool {
    group_members(group).iter().any(|(_, state)| state == "T")
}

/// The processes of a group, with their state (`R`, `S`, `T`...), as /proc lists them.
fn group_members(group: Pid) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let group = group.as_raw_nonzero().get();
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the command name (which may hold anything, hence the last `)`): the state,
            // the parent's pid, the process group.
            let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let mut fields = rest.split_whitespace();
            let state = fields.next()?.to_string();
            let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
            (pgrp == Some(group)).then_some((pid, state))
        })
        .collect()
}

/// Whether anything of the group still runs: a process of it other than its guard (on Linux
/// the group's leader, [`Guard`], which only ends when cca ends it) and the dead that were not
/// waited for yet. Only a group that answers a signal is looked for in /proc.
fn group_running(group: Pid) -> bool {
    if rustix::process::test_kill_process_group(group).is_err() {
        return false;
    }
    if !cfg!(target_os = "linux") {
        return true;
    }
    let guard = group.as_raw_nonzero().get() as u32;
    group_members(group).iter().any(|(pid, state)| *pid != guard && state != "Z")
}

/// After the engine exits, nothing it started may keep running: TERM what is left of its
/// group, and KILL it after the grace period.
fn stop_leftovers(group: Pid, already_termed: bool, grace: Duration) {
    if !group_running(group) {
        return;
    }
    if !already_termed {
        terminate(group);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !group_running(group) {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    signal_group(group, Signal::KILL);
}

/// `128 + signal`, the conventional exit code for a process stopped by a signal.
pub(crate) fn signal_exit_code(signal: i32) -> u8 {
    (128 + signal).clamp(0, 255) as u8
}

/// Describes how the engine ended: `exit status 1`, `killed by signal 9`.
pub(crate) fn describe_status(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "an unknown status".to_string(),
    }
}

/// Runs a short command (`claude --version`) and returns the first line it prints; `Err` says
/// why there is none: it could not be run, failed, printed nothing, or took longer than
/// `timeout` (then its group is killed).
pub(crate) fn first_line_of(
    program: &std::path::Path,
    args: &[&str],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    timeout: Duration,
) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("it cannot be run: {e}"))?;
    let group = Pid::from_child(&child);
    let mut stdout = child.stdout.take().ok_or("it has no output")?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // What it started may hold stdout: end the group, and wait only a little for
                // the pipe to close (a helper outside the group may hold it for hours).
                signal_group(group, Signal::KILL);
                let text = rx.recv_timeout(PIPE_GRACE).unwrap_or_default();
                if !status.success() {
                    return Err(format!("it failed ({})", describe_status(&status)));
                }
                let line = text.lines().map(str::trim).find(|l| !l.is_empty());
                return line.map(str::to_string).ok_or_else(|| "it printed nothing".into());
            }
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            waited => {
                signal_group(group, Signal::KILL);
                let _ = child.wait();
                return Err(match waited {
                    Err(e) => format!("it cannot be waited for: {e}"),
                    _ => format!("it did not answer within {} s", timeout.as_secs()),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_buffer_gives_every_byte_and_grows_from_a_page_to_64_kb_only_when_filled() {
        let stream: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut from = &stream[..];
        let mut buf = ReadBuf::new();
        let (mut got, mut sizes) = (Vec::new(), Vec::new());
        loop {
            let read = buf.read_from(&mut from).unwrap();
            if read.is_empty() {
                break;
            }
            sizes.push(read.len());
            got.extend_from_slice(read);
        }
        assert_eq!(got, stream);
        assert_eq!(sizes[..6], [4096, 8192, 16384, 32768, 65536, 65536]);

        let mut short = &b"hi"[..];
        let mut buf = ReadBuf::new();
        assert_eq!(buf.read_from(&mut short).unwrap(), b"hi");
        assert!(buf.read_from(&mut short).unwrap().is_empty());
        assert_eq!(buf.buf.len(), 4096, "a read that did not fill it leaves it a page");
    }
}
