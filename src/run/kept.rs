//! An engine kept running between turns (docs/DESIGN.md, "Warm engines"): started once, given
//! each turn's new message on its stdin, and read until that message's answer ends, not until
//! the process does. This is part of `run`, the only place that spawns.
//!
//! The guard's parent-death signal (`run::guard`) fires when the *thread* that started it ends,
//! so a kept engine is started by a keeper thread of its own that waits for it: the thread lives
//! exactly as long as the engine, whatever thread runs its turns. When cca ends, however it ends,
//! the thread ends with it and the guard kills the engine's group.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::process::Pid;

use super::decoding::Decoding;
use super::{
    Cancel, Ending, Engine, EngineRun, LINGER, PIPE_GRACE, Pipe, Progress, SpawnError, pump,
    spawn_engine, stop_leftovers, terminate,
};
use crate::engine::{Decoder, Keeping, acp_agent};
use crate::error::{Failure, exit};
use crate::frame::{self, Piece};
use crate::media::Image;
use crate::steer::Inbox;

/// How long an ACP agent may take to open its session (gemini takes about 2.5 s).
pub(super) const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// What to start.
pub(crate) struct Start {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// How long the group has between SIGTERM and SIGKILL.
    pub grace: Duration,
    pub transport: Keeping,
    pub decoder: Box<dyn Decoder>,
    /// The engine's own session its opening resumes ([`crate::engine::Invocation::resume`]).
    pub resume: Option<String>,
}

/// An engine started elsewhere, handed over with what [`Kept::adopt`] needs.
pub(crate) struct Adopted {
    pub group: Pid,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// What it wrote before it was handed over, not yet read by anyone.
    pub said: Vec<Pipe>,
    pub acp_session: Option<String>,
    /// Waits until the engine ends and says how.
    pub exit: Box<dyn FnOnce() -> io::Result<std::process::ExitStatus> + Send>,
}

/// One turn's message: the framed text (its stored parts read from `transcript`)
/// and the images it carries.
pub(crate) struct Message {
    pub pieces: Vec<Piece>,
    pub transcript: File,
    pub images: Vec<Image>,
}

/// A running engine that takes one message per turn. Dropping it ends the engine's group.
pub(crate) struct Kept {
    /// Its group, pipes and stdin; `ending` and `inbox` are the current turn's.
    engine: Engine,
    /// What came from the pipes between turns, for the next one.
    waiting: VecDeque<Pipe>,
    /// One decoder for the engine's life: claude counts its cost over the whole process.
    decoder: Option<Box<dyn Decoder>>,
    /// The engine ended, or was told to.
    ended: bool,
    /// A second handle on the engine's stdout, to see it hang up before its reader says so.
    output: Option<OwnedFd>,
    /// A session's id (an ACP agent's, an engine's own JSON-RPC one), the id of its next prompt
    /// request, and how to write one.
    acp: Option<(String, u64, PromptLine)>,
}

/// How a session's prompt request is written: its id, the session, the text, the images.
type PromptLine = fn(u64, &str, &str, &[crate::media::Image]) -> String;

/// How a session is opened and spoken: its opening requests, how the answer to them is known,
/// the first prompt's id, and how a prompt is written; `None` for a transport without one.
fn session_protocol(transport: Keeping) -> Option<(Opening, SessionOf, u64, PromptLine)> {
    match transport {
        Keeping::StreamJson(_) => None,
        Keeping::Acp => Some((
            |cwd, _| acp_agent::opening_lines(cwd).to_vec(),
            acp_agent::session_of,
            acp_agent::FIRST_PROMPT_ID,
            acp_agent::prompt_line,
        )),
        Keeping::Rpc(rpc) => {
            Some((rpc.opening_lines, rpc.session_of, rpc.first_prompt_id, rpc.prompt_line))
        }
    }
}

/// Whether a line answers a session's opening: then its id, or why it opened none.
type SessionOf = fn(&[u8]) -> Option<Result<String, String>>;

/// The requests that open a session, for the folder the engine runs in, resuming one of the
/// engine's own if given.
type Opening = fn(&std::path::Path, Option<&str>) -> Vec<String>;

impl Kept {
    /// Starts the engine, on a keeper thread that owns it and waits for it; an ACP agent has
    /// opened its session when this returns (so a question never waits for its start-up).
    pub(crate) fn start(start: Start, cancel: &Cancel) -> Result<Kept> {
        let Start { program, args, env, grace, transport, decoder, resume } = start;
        let (ready_tx, ready) = mpsc::channel();
        let (exited_tx, exited) = mpsc::channel::<SyncSender<Pipe>>();
        let shown = program.clone();
        thread::Builder::new()
            .name("kept engine".into())
            .spawn(move || {
                let (mut child, guard) = match spawn_engine(&program, &args, &env) {
                    Ok(started) => started,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let pipes = (
                    guard.group_of(&child),
                    child.stdin.take().expect("piped"),
                    OwnedFd::from(child.stdout.take().expect("piped")),
                    child.stderr.take().expect("piped"),
                );
                let _ = ready_tx.send(Ok(pipes));
                let status = child.wait();
                drop(guard);
                if let Ok(tx) = exited.recv() {
                    let _ = tx.send(Pipe::Exited(status));
                }
            })
            .context("cannot start a thread for the engine")?;
        let (group, stdin, stdout, stderr) = ready
            .recv()
            .context("the engine's thread ended before the engine started")?
            .map_err(|error| SpawnError { program: shown.clone(), error })?;
        let (mut kept, tx) = Kept::assemble(group, stdin, stdout, stderr, grace, transport);
        kept.decoder = Some(decoder);
        let _ = exited_tx.send(tx);
        if let Some((opening, session_of, first, prompt_line)) = session_protocol(transport) {
            let cwd = std::env::current_dir().context("cannot tell which folder this is")?;
            let opening = opening(&cwd, resume.as_deref());
            let session = kept.open_session(&shown, opening, session_of, cancel)?;
            kept.acp = Some((session, first, prompt_line));
        }
        Ok(kept)
    }

    /// Takes over an engine started elsewhere (one on standby, see `run::standby`): its group,
    /// its pipes, what it wrote before (`said`), its ACP session if it opened one, and how to
    /// learn that it ended.
    pub(crate) fn adopt(
        adopted: Adopted,
        grace: Duration,
        transport: Keeping,
        decoder: Box<dyn Decoder>,
    ) -> Kept {
        let Adopted { group, stdin, stdout, stderr, said, acp_session, exit } = adopted;
        let (mut kept, tx) =
            Kept::assemble(group, File::from(stdin), stdout, File::from(stderr), grace, transport);
        kept.decoder = Some(decoder);
        kept.waiting.extend(said);
        kept.acp = acp_session
            .zip(session_protocol(transport))
            .map(|(session, (_, _, first, prompt_line))| (session, first, prompt_line));
        thread::spawn(move || {
            let _ = tx.send(Pipe::Exited(exit()));
        });
        kept
    }

    /// A kept engine over its group and pipes: their readers and the writer of its stdin
    /// started. The sender returned is for its exit status.
    fn assemble(
        group: Pid,
        mut stdin: impl Write + Send + 'static,
        stdout: OwnedFd,
        stderr: impl io::Read + Send + 'static,
        grace: Duration,
        transport: Keeping,
    ) -> (Kept, SyncSender<Pipe>) {
        // Bounded, as for a cold run: between turns nothing reads, and an engine has nothing
        // to say then.
        let (tx, pipes) = mpsc::sync_channel(16);
        let output = stdout.try_clone().ok();
        pump(File::from(stdout), tx.clone(), Pipe::Stdout, Pipe::StdoutEnd);
        pump(stderr, tx.clone(), Pipe::Stderr, Pipe::StderrEnd);
        let (lines, feed) = mpsc::channel::<String>();
        let feed_tx = tx.clone();
        thread::spawn(move || {
            for line in feed {
                if let Err(e) = stdin.write_all(line.as_bytes()).and_then(|()| stdin.flush()) {
                    // The engine may stop reading (it ended): not ours to report.
                    if e.kind() != io::ErrorKind::BrokenPipe {
                        let _ = feed_tx.send(Pipe::FeedFailed(e));
                    }
                    return;
                }
            }
        });
        let stream_line = match transport {
            Keeping::StreamJson(line) => Some(line),
            // A second prompt cannot go in while one is answered: a steer waits for the next
            // turn, as with an engine started for each.
            Keeping::Acp | Keeping::Rpc(_) => None,
        };
        let engine = Engine {
            group,
            grace,
            pipes,
            steers: Some(lines),
            stream_line,
            inbox: None,
            ending: Ending::default(),
        };
        let kept = Kept {
            engine,
            waiting: VecDeque::new(),
            decoder: None,
            ended: false,
            output,
            acp: None,
        };
        (kept, tx)
    }

    /// Opens an ACP agent's session: writes `initialize` and `session/new`, and reads the agent
    /// until it answers the latter. What it wrote after that waits for the first turn.
    fn open_session(
        &mut self,
        program: &std::path::Path,
        opening: Vec<String>,
        session_of: SessionOf,
        cancel: &Cancel,
    ) -> Result<String> {
        for line in opening {
            self.send(line);
        }
        let name = program.file_name().unwrap_or(program.as_os_str()).to_string_lossy();
        let failed = |why: String| -> anyhow::Error {
            let hint = format!(
                "kept between turns, {name} runs as a long-running agent; `keep_warm = \"off\"` under \
                 [engines.{name}] in config.toml starts it for each turn instead"
            );
            Failure::new(exit::ERROR, why).hint(hint).into()
        };
        let (mut out, mut said) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + OPEN_TIMEOUT;
        loop {
            cancel.check()?;
            match self.engine.pipes.recv_timeout(Duration::from_millis(50)) {
                Ok(Pipe::Stdout(chunk)) => {
                    out.extend_from_slice(&chunk);
                    while let Some(end) = memchr::memchr(b'\n', &out) {
                        let line: Vec<u8> = out.drain(..=end).collect();
                        if let Some(opened) = session_of(&line) {
                            if !out.is_empty() {
                                self.waiting.push_back(Pipe::Stdout(out));
                            }
                            return opened.map_err(|e| {
                                failed(format!("{name} did not open a session: {e}"))
                            });
                        }
                    }
                }
                Ok(Pipe::Stderr(chunk)) => said.extend_from_slice(&chunk),
                Ok(Pipe::Exited(_) | Pipe::StdoutEnd) | Err(RecvTimeoutError::Disconnected) => {
                    let said = String::from_utf8_lossy(&said);
                    let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
                    let why = format!("{name} ended before it opened a session: {}", last.trim());
                    return Err(failed(why));
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) if Instant::now() > deadline => {
                    let why = format!("{name} did not open a session within {OPEN_TIMEOUT:?}");
                    return Err(failed(why));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Whether the engine ended, or was told to: it takes no more turns.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// Whether the engine is still there to take a turn: not ended, and it neither exited nor
    /// closed its output while it waited (it would fail the turn a fresh one answers). What it
    /// said meanwhile is kept for the next turn.
    pub(crate) fn running(&mut self) -> bool {
        while let Ok(pipe) = self.engine.pipes.try_recv() {
            if matches!(pipe, Pipe::Exited(_) | Pipe::StdoutEnd) {
                self.end();
            }
            self.waiting.push_back(pipe);
        }
        // An engine that died a moment ago has closed its output before its reader thread
        // has said so: ask the pipe itself.
        if !self.ended && self.output.as_ref().is_some_and(hung_up) {
            self.end();
        }
        !self.ended
    }

    /// Sends the message and reads the engine until its answer ends (with any steers from
    /// `inbox` it took on the way). A stop asked for, a failure writing the answer, or the
    /// engine ending ends the kept engine too: see [`Kept::ended`].
    pub(crate) fn turn(
        &mut self,
        message: Message,
        inbox: Option<&Inbox>,
        answer: File,
        cancel: &Cancel,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<EngineRun> {
        let started = Instant::now();
        let decoder =
            self.decoder.take().context("a kept engine took a turn after a failed one")?;
        let mut decoding = Decoding::new(decoder, answer, started);
        self.engine.ending = Ending::default();
        self.engine.inbox = inbox.cloned();
        let pumped = self.pump(message, &mut decoding, cancel, progress);
        let ending = &self.engine.ending;
        if pumped.is_err()
            || ending.stopped_at.is_some()
            || ending.exited_at.is_some()
            || ending.out_done
        {
            self.end();
            stop_leftovers(self.engine.group, true, self.engine.grace);
        }
        self.engine.inbox = None;
        let ending = std::mem::take(&mut self.engine.ending);
        let (decoder, run) = decoding.finish_keeping_decoder(ending, started);
        self.decoder = Some(decoder);
        pumped?;
        run
    }

    /// Sends the message, then feeds what the engine writes to `decoding` until the message and
    /// every steer sent after it are answered (or the engine ends, or is stopped).
    fn pump(
        &mut self,
        message: Message,
        decoding: &mut Decoding,
        cancel: &Cancel,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let mut framed = Vec::new();
        frame::write(&message.pieces, &frame::Windowed::new(message.transcript), &mut framed)
            .context("cannot read the transcript")?;
        let text = String::from_utf8_lossy(&framed);
        let line = match (&mut self.acp, self.engine.stream_line) {
            (Some((session, next, prompt_line)), _) => {
                *next += 1;
                Some(prompt_line(*next - 1, session, &text, &message.images))
            }
            (None, Some(line)) => Some(line(&text, &message.images)),
            (None, None) => None,
        };
        if let Some(line) = line {
            self.send(line);
        }
        let (group, grace) = (self.engine.group, self.engine.grace);
        loop {
            self.engine.pass_steers(decoding, progress);
            let ending = &mut self.engine.ending;
            if ending.feed_error.is_some() && ending.stopped_at.is_none() {
                // The message may be half written: nothing more can be sent on that stdin.
                ending.stop(group, grace);
            }
            // Every message taken and answered, none waiting that it could take: the turn is
            // over, the engine waits for the next one.
            let steers_wait = self.engine.stream_line.is_some()
                && self.engine.inbox.as_ref().is_some_and(|inbox| !inbox.is_empty());
            if ending.stopped_at.is_none() && decoding.stream.done() && !steers_wait {
                return Ok(());
            }
            self.engine.watch(cancel, decoding, progress);
            let ending = &mut self.engine.ending;
            if ending.status.is_some() && ending.out_done && ending.err_done {
                return Ok(());
            }
            // Gone, but something holds its pipes; or told to stop and still not done.
            let since = ending.exited_at.or(ending.stopped_at.map(|at| at + grace));
            if since.is_some_and(|at| at.elapsed() > LINGER + PIPE_GRACE) {
                return Ok(());
            }
            let next = match self.waiting.pop_front() {
                Some(pipe) => Ok(pipe),
                None => self.engine.pipes.recv_timeout(Duration::from_millis(50)),
            };
            match next {
                Ok(pipe) => {
                    self.engine.take(pipe, decoding, progress)?;
                    for line in std::mem::take(&mut decoding.replies) {
                        self.send(line);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    ending.out_done = true;
                    ending.err_done = true;
                    return Ok(());
                }
            }
        }
    }

    fn send(&mut self, line: String) {
        // A send fails only when the feeder is gone (the engine stopped reading): the turn then
        // sees the engine end.
        if let Some(lines) = &self.engine.steers {
            let _ = lines.send(line);
        }
    }

    /// Closes the engine's stdin and asks its group to end; the guard's parent-death signal
    /// and [`stop_leftovers`] see to the rest.
    fn end(&mut self) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        self.engine.steers = None;
        terminate(self.engine.group);
    }
}

/// Whether every writer of a pipe has closed it (what it holds may still wait to be read).
fn hung_up(pipe: &OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(pipe, PollFlags::IN)];
    let now = Timespec { tv_sec: 0, tv_nsec: 0 };
    rustix::event::poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0)
        && fds[0].revents().contains(PollFlags::HUP)
}

impl Drop for Kept {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.end();
        let (group, grace) = (self.engine.group, self.engine.grace);
        thread::spawn(move || stop_leftovers(group, true, grace));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_hangs_up_once_its_last_writer_closes_it_even_with_bytes_unread() {
        let (reader, mut writer) = io::pipe().unwrap();
        let reader = OwnedFd::from(reader);
        let second_writer = writer.try_clone().unwrap();
        writer.write_all(b"unread").unwrap();
        assert!(!hung_up(&reader));
        drop(writer);
        assert!(!hung_up(&reader), "another writer holds it");
        drop(second_writer);
        assert!(hung_up(&reader));
    }
}
