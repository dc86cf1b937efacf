//! An engine kept running between turns (docs/DESIGN.md, "Warm engines"): started once, given
//! each turn's new message on its stdin, and read until that message's answer ends, not until
//! the process does. This is part of `run`, the only place that spawns.
//!
//! The launcher's parent-death signal fires when the *thread* that started it ends, so a kept
//! engine is started by a keeper thread of its own that waits for it: the thread lives exactly as
//! long as the engine, whatever thread runs its turns. When cca ends, however it ends, the
//! thread ends with it and the launcher kills the engine's group.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::process::Pid;

use super::{
    Cancel, Ending, LINGER, Outcome, PIPE_GRACE, Pipe, Progress, SpawnError, Turn, outcome, pump,
    spawn_engine, stop_leftovers, terminate,
};
use crate::engine::Decoder;
use crate::frame::{self, Piece};
use crate::media::Image;
use crate::steer::Inbox;

/// How a kept engine takes a message and tells that its answer ended. One variant per way.
#[derive(Debug, Clone, Copy)]
pub enum Transport {
    /// One JSON line per user message on stdin (claude's `--input-format stream-json`); the
    /// answer ends at the engine's end of answer (claude's `result`), and stdin stays open.
    StreamJson(fn(&str, &[Image]) -> String),
}

/// What to start.
pub struct Start {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// How long the group has between SIGTERM and SIGKILL.
    pub grace: Duration,
    pub transport: Transport,
    pub decoder: Box<dyn Decoder>,
}

/// One turn's message: the framed text (its [`Piece::Stored`] parts read from `transcript`)
/// and the images it carries.
pub struct Message {
    pub pieces: Vec<Piece>,
    pub transcript: File,
    pub images: Vec<Image>,
}

/// A running engine that takes one message per turn. Dropping it ends the engine's group.
pub struct Kept {
    group: Pid,
    transport: Transport,
    /// Lines for the engine's stdin; dropping the sender closes it.
    lines: Option<Sender<String>>,
    pipes: Receiver<Pipe>,
    /// What came from the pipes between turns, for the next one.
    waiting: VecDeque<Pipe>,
    /// One decoder for the engine's life: claude counts its cost over the whole process.
    decoder: Box<dyn Decoder>,
    grace: Duration,
    /// The engine ended, or was told to.
    ended: bool,
}

impl Kept {
    /// Starts the engine, on a keeper thread that owns it and waits for it.
    pub fn start(start: Start) -> Result<Kept> {
        let Start { program, args, env, grace, transport, decoder } = start;
        // Bounded, as for a cold run: between turns nothing reads, and an engine has nothing
        // to say then.
        let (tx, pipes) = mpsc::sync_channel(16);
        let (ready_tx, ready) = mpsc::channel();
        let shown = program.clone();
        let feed_tx = tx.clone();
        thread::Builder::new()
            .name("kept engine".into())
            .spawn(move || {
                let mut child = match spawn_engine(&program, &args, &env) {
                    Ok(child) => child,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                pump(
                    child.stdout.take().expect("piped"),
                    tx.clone(),
                    Pipe::Stdout,
                    Pipe::StdoutEnd,
                );
                pump(
                    child.stderr.take().expect("piped"),
                    tx.clone(),
                    Pipe::Stderr,
                    Pipe::StderrEnd,
                );
                let stdin = child.stdin.take().expect("piped");
                let _ = ready_tx.send(Ok((Pid::from_child(&child), stdin)));
                let _ = tx.send(Pipe::Exited(child.wait()));
            })
            .context("cannot start a thread for the engine")?;
        let (group, stdin) = ready
            .recv()
            .context("the engine's thread ended before the engine started")?
            .map_err(|error| SpawnError { program: shown, error })?;
        let (lines, feed) = mpsc::channel::<String>();
        thread::spawn(move || {
            let mut stdin = stdin;
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
        Ok(Kept {
            group,
            transport,
            lines: Some(lines),
            pipes,
            waiting: VecDeque::new(),
            decoder,
            grace,
            ended: false,
        })
    }

    /// Whether the engine ended, or was told to: it takes no more turns.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Whether the engine is still there to take a turn: not ended, and it neither exited nor
    /// closed its output while it waited (it would fail the turn a fresh one answers). What it
    /// said meanwhile is kept for the next turn.
    pub fn running(&mut self) -> bool {
        while let Ok(pipe) = self.pipes.try_recv() {
            if matches!(pipe, Pipe::Exited(_) | Pipe::StdoutEnd) {
                self.end();
            }
            self.waiting.push_back(pipe);
        }
        !self.ended
    }

    /// Sends the message and reads the engine until its answer ends (with any steers from
    /// `inbox` it took on the way). A stop asked for, a failure writing the answer, or the
    /// engine ending ends the kept engine too: see [`Kept::ended`].
    pub fn turn(
        &mut self,
        message: Message,
        inbox: Option<&Inbox>,
        mut answer: File,
        cancel: &Cancel,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Outcome> {
        let started = Instant::now();
        let Transport::StreamJson(line) = self.transport;
        let mut framed = Vec::new();
        frame::write(&message.pieces, &frame::Windowed::new(message.transcript), &mut framed)
            .context("cannot read the transcript")?;
        self.send(line(&String::from_utf8_lossy(&framed), &message.images));
        let mut state = Turn { split_at: Some(started), ..Turn::default() };
        let mut ending = Ending::default();
        loop {
            if let Some(inbox) = inbox {
                let lines = self.lines.as_ref().filter(|_| ending.interrupted.is_none());
                let send = lines.map(|l| move |text: String| drop(l.send(line(&text, &[]))));
                state.steers(inbox, send, progress);
            }
            if ending.feed_error.is_some() && ending.stopped_at.is_none() {
                // The message may be half written: nothing more can be sent on that stdin.
                ending.stop(self.group, self.grace);
            }
            // Every message taken and answered, none waiting: the turn is over, the engine
            // waits for the next one.
            if ending.stopped_at.is_none()
                && state.stream.done()
                && inbox.is_none_or(Inbox::is_empty)
            {
                break;
            }
            ending.watch(self.group, self.grace, cancel, &mut state, progress);
            if ending.status.is_some() && ending.out_done && ending.err_done {
                break;
            }
            // Gone, but something holds its pipes; or told to stop and still not done.
            let since = ending.exited_at.or(ending.stopped_at.map(|at| at + self.grace));
            if since.is_some_and(|at| at.elapsed() > LINGER + PIPE_GRACE) {
                break;
            }
            let next = match self.waiting.pop_front() {
                Some(pipe) => Ok(pipe),
                None => self.pipes.recv_timeout(Duration::from_millis(50)),
            };
            let pipe = match next {
                Ok(pipe) => pipe,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    ending.out_done = true;
                    ending.err_done = true;
                    break;
                }
            };
            state.pipe(pipe, &mut *self.decoder, &mut ending, progress, &mut answer)?;
        }
        if ending.stopped_at.is_some() || ending.exited_at.is_some() || ending.out_done {
            self.end();
            stop_leftovers(self.group, true, self.grace);
        }
        outcome(state, ending, answer, started)
    }

    fn send(&mut self, line: String) {
        // A send fails only when the feeder is gone (the engine stopped reading): the turn then
        // sees the engine end.
        if let Some(lines) = &self.lines {
            let _ = lines.send(line);
        }
    }

    /// Closes the engine's stdin and asks its group to end; the launcher's parent-death signal
    /// and [`stop_leftovers`] see to the rest.
    fn end(&mut self) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        self.lines = None;
        terminate(self.group);
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.end();
        let (group, grace) = (self.group, self.grace);
        thread::spawn(move || stop_leftovers(group, true, grace));
    }
}
