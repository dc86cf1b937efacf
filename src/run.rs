//! The only place cca spawns a process: the engine, in its own process group, with three
//! threads for the three pipes (feed stdin, pump stdout, pump stderr) and the main thread
//! decoding, printing, teeing the answer to a file, and handling signals.
//!
//! No shell is involved. Stderr is always drained (an engine blocked on a full stderr pipe would
//! never finish its stdout). On Ctrl-C, SIGTERM or SIGHUP the whole group gets SIGTERM, then
//! SIGKILL after a grace period or a second Ctrl-C; nothing of the group outlives a turn.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::process::{Pid, Signal};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::engine::{Decoder, Output, Usage};
use crate::frame::{self, Piece};

/// How long the engine's group has to exit after SIGTERM before it gets SIGKILL.
pub const GRACE: Duration = Duration::from_secs(3);
/// How much of the engine's stderr is kept for error messages.
const STDERR_TAIL: usize = 8 * 1024;

/// Watches for Ctrl-C, SIGTERM and SIGHUP once cca has something to protect. From the first
/// [`SignalWatch::get`] on, these signals no longer kill cca; they are handled where the turn
/// can record them.
pub struct SignalWatch {
    rx: std::sync::Mutex<Receiver<i32>>,
}

impl SignalWatch {
    /// The process's watch, started on first use.
    pub fn get() -> Result<&'static SignalWatch> {
        static WATCH: std::sync::OnceLock<SignalWatch> = std::sync::OnceLock::new();
        if let Some(watch) = WATCH.get() {
            return Ok(watch);
        }
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            .context("cannot install signal handlers")?;
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for signal in signals.forever() {
                if tx.send(signal).is_err() {
                    break;
                }
            }
        });
        Ok(WATCH.get_or_init(|| SignalWatch { rx: std::sync::Mutex::new(rx) }))
    }

    /// A signal that arrived since the last call, if any.
    pub fn pending(&self) -> Option<i32> {
        self.rx.lock().ok()?.try_recv().ok()
    }

    /// Forgets signals that arrived while nothing was running (a late second Ctrl-C).
    pub fn drain(&self) {
        while self.pending().is_some() {}
    }
}

/// What to run.
pub struct Spawn {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Vec<Piece>,
    /// The transcript, for [`Piece::Stored`] content.
    pub transcript: File,
}

/// How the turn shows itself.
pub struct Display {
    /// Print the answer to stdout as it streams.
    pub print: bool,
    /// Show a spinner with this engine name on stderr until the first output.
    pub spinner: Option<String>,
    /// Show the engine's stderr as it comes; otherwise it is kept and shown only on failure.
    pub live_stderr: bool,
}

/// What happened.
pub struct Outcome {
    /// The answer as streamed (text and tool lines), rewound to its start.
    pub answer: File,
    pub answer_bytes: u64,
    /// Whether the answer holds anything but whitespace.
    pub answer_has_text: bool,
    /// Whether the last byte printed to stdout was a newline (or nothing was printed).
    pub printed_newline: bool,
    pub status: Option<ExitStatus>,
    pub engine_error: Option<String>,
    /// The engine's own id for the run, if it told.
    pub engine_session: Option<String>,
    pub usage: Usage,
    /// The end of what the engine wrote on stderr (and on stdout outside its answer).
    pub stderr_tail: String,
    /// The signal that stopped the turn, if one did.
    pub interrupted: Option<i32>,
    pub duration: Duration,
    /// Feeding stdin failed for a reason other than the engine closing it.
    pub feed_error: Option<String>,
}

enum Event {
    Stdout(Vec<u8>),
    StdoutEnd,
    Stderr(Vec<u8>),
    StderrEnd,
    Exited(io::Result<ExitStatus>),
    FeedFailed(io::Error),
}

/// The engine could not be started at all.
#[derive(Debug)]
pub struct SpawnError {
    pub program: PathBuf,
    pub error: io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot run {}: {}", self.program.display(), self.error)
    }
}

impl std::error::Error for SpawnError {}

/// Runs one turn through the engine.
pub fn run(
    spawn: Spawn,
    mut decoder: Box<dyn Decoder>,
    mut answer: File,
    display: &Display,
    signals: &SignalWatch,
) -> Result<Outcome> {
    let started = Instant::now();
    let mut child = Command::new(&spawn.program)
        .args(&spawn.args)
        .envs(spawn.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|error| SpawnError { program: spawn.program.clone(), error })?;
    let group = Pid::from_child(&child);
    // Bounded: an engine that writes faster than the terminal reads waits, instead of its
    // output piling up in memory.
    let (tx, rx) = mpsc::sync_channel(16);

    let stdin = child.stdin.take().expect("piped");
    let transcript = spawn.transcript;
    let pieces = spawn.stdin;
    let feed_tx = tx.clone();
    thread::spawn(move || {
        let mut stdin = io::BufWriter::with_capacity(64 * 1024, stdin);
        let source = frame::Windowed::new(transcript);
        let result = frame::write(&pieces, &source, &mut stdin).and_then(|_| stdin.flush());
        match result {
            // The engine may stop reading early (it failed, or it needs no more): not ours to report.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
            Err(e) => {
                let _ = feed_tx.send(Event::FeedFailed(e));
            }
            Ok(()) => {}
        }
    });
    pump(child.stdout.take().expect("piped"), tx.clone(), Event::Stdout, Event::StdoutEnd);
    pump(child.stderr.take().expect("piped"), tx.clone(), Event::Stderr, Event::StderrEnd);
    let wait_tx = tx;
    thread::spawn(move || {
        let _ = wait_tx.send(Event::Exited(child.wait()));
    });

    let spinner = display.spinner.as_ref().map(|name| spinner(name));
    let mut screen =
        Screen { spinner, print: display.print, stdout_gone: false, printed_newline: true };
    let mut state = Turn {
        answer_bytes: 0,
        answer_has_text: false,
        last_answer_byte: b'\n',
        usage: Usage::default(),
        engine_error: None,
        engine_session: None,
        stderr_tail: Vec::new(),
        live_stderr: display.live_stderr,
    };
    let mut outputs = Vec::new();
    let (mut out_done, mut err_done, mut status) = (false, false, None);
    let mut interrupted: Option<i32> = None;
    let mut kill_at: Option<Instant> = None;
    let mut exited_at: Option<Instant> = None;
    let mut feed_error = None;

    loop {
        if let Some(signal) = signals.pending() {
            if interrupted.is_none() {
                interrupted = Some(signal);
                signal_group(group, Signal::TERM);
                kill_at = Some(Instant::now() + GRACE);
                screen.clear_spinner();
            } else if signal == SIGINT {
                // A second Ctrl-C: stop waiting.
                signal_group(group, Signal::KILL);
            }
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            signal_group(group, Signal::KILL);
            kill_at = None;
        }
        if status.is_some() && out_done && err_done {
            break;
        }
        // The engine is gone but something it started still holds the pipes: stop the group.
        if exited_at.is_some_and(|at| at.elapsed() > Duration::from_millis(500))
            && kill_at.is_none()
        {
            signal_group(group, Signal::TERM);
            kill_at = Some(Instant::now() + GRACE);
            exited_at = None;
        }
        let event = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match event {
            Event::Stdout(chunk) => {
                decoder.feed(&chunk, &mut outputs);
                state.handle(&mut outputs, &mut screen, &mut answer)?;
            }
            Event::StdoutEnd => {
                decoder.finish(&mut outputs);
                state.handle(&mut outputs, &mut screen, &mut answer)?;
                out_done = true;
            }
            Event::Stderr(chunk) => state.engine_stderr(&chunk, &mut screen),
            Event::StderrEnd => err_done = true,
            Event::Exited(result) => {
                status = Some(result.context("cannot wait for the engine")?);
                exited_at = Some(Instant::now());
            }
            Event::FeedFailed(e) => feed_error = Some(e.to_string()),
        }
    }
    screen.clear_spinner();
    stop_leftovers(group, interrupted.is_some());

    answer.flush().context("cannot write the answer's scratch file")?;
    io::Seek::rewind(&mut answer).context("cannot read back the answer")?;
    Ok(Outcome {
        answer,
        answer_bytes: state.answer_bytes,
        answer_has_text: state.answer_has_text,
        printed_newline: screen.printed_newline,
        status,
        engine_error: state.engine_error,
        engine_session: state.engine_session,
        usage: state.usage,
        stderr_tail: String::from_utf8_lossy(&state.stderr_tail).into_owned(),
        interrupted,
        duration: started.elapsed(),
        feed_error,
    })
}

fn pump(
    mut from: impl Read + Send + 'static,
    tx: SyncSender<Event>,
    data: fn(Vec<u8>) -> Event,
    end: Event,
) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(data(buf[..n].to_vec())).is_err() {
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

fn signal_group(group: Pid, signal: Signal) {
    // ESRCH (the group is already gone) is the outcome we want.
    let _ = rustix::process::kill_process_group(group, signal);
}

/// After the engine exits, nothing it started may keep running: TERM what is left of its
/// group, and KILL it after the grace period.
fn stop_leftovers(group: Pid, already_termed: bool) {
    if rustix::process::test_kill_process_group(group).is_err() {
        return;
    }
    if !already_termed {
        signal_group(group, Signal::TERM);
    }
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if rustix::process::test_kill_process_group(group).is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    signal_group(group, Signal::KILL);
}

/// What the user sees on their terminal.
struct Screen {
    spinner: Option<indicatif::ProgressBar>,
    print: bool,
    stdout_gone: bool,
    printed_newline: bool,
}

impl Screen {
    fn clear_spinner(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.finish_and_clear();
        }
    }

    fn answer(&mut self, text: &str) {
        self.clear_spinner();
        if !self.print || self.stdout_gone || text.is_empty() {
            return;
        }
        let mut out = io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => self.printed_newline = text.ends_with('\n'),
            // The reader went away (`| head`): keep recording the answer, stop printing it.
            Err(_) => self.stdout_gone = true,
        }
    }

    fn stderr(&mut self, bytes: &[u8]) {
        let write = || {
            let mut err = io::stderr().lock();
            let _ = err.write_all(bytes).and_then(|()| err.flush());
        };
        match &self.spinner {
            Some(s) => s.suspend(write),
            None => write(),
        }
    }
}

fn spinner(engine: &str) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} waiting for {msg} · {elapsed}")
            .expect("a valid template"),
    );
    bar.set_message(engine.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// The turn's running state, fed by the decoder's outputs.
struct Turn {
    answer_bytes: u64,
    answer_has_text: bool,
    last_answer_byte: u8,
    usage: Usage,
    engine_error: Option<String>,
    engine_session: Option<String>,
    stderr_tail: Vec<u8>,
    live_stderr: bool,
}

impl Turn {
    fn handle(
        &mut self,
        outputs: &mut Vec<Output>,
        screen: &mut Screen,
        answer: &mut File,
    ) -> Result<()> {
        for output in outputs.drain(..) {
            match output {
                Output::Text(text) => {
                    screen.answer(&text);
                    self.keep(answer, text.as_bytes())?;
                    self.answer_has_text |= text.chars().any(|c| !c.is_whitespace());
                }
                Output::Tool(line) => {
                    let sep = if self.last_answer_byte == b'\n' || self.answer_bytes == 0 {
                        ""
                    } else {
                        "\n\n"
                    };
                    self.keep(answer, format!("{sep}> {line}\n\n").as_bytes())?;
                    self.engine_stderr(format!("· {line}\n").as_bytes(), screen);
                }
                Output::Note(note) => self.engine_stderr(format!("{note}\n").as_bytes(), screen),
                Output::Error(e) => self.engine_error = Some(e),
                Output::Usage(u) => self.usage = u,
                Output::Session(id) => self.engine_session = Some(id),
            }
        }
        Ok(())
    }

    fn keep(&mut self, answer: &mut File, bytes: &[u8]) -> Result<()> {
        if let Some(&last) = bytes.last() {
            answer.write_all(bytes).context("cannot write the answer's scratch file")?;
            self.answer_bytes += bytes.len() as u64;
            self.last_answer_byte = last;
        }
        Ok(())
    }

    fn engine_stderr(&mut self, bytes: &[u8], screen: &mut Screen) {
        if self.live_stderr {
            screen.stderr(bytes);
        }
        self.stderr_tail.extend_from_slice(bytes);
        if self.stderr_tail.len() > 2 * STDERR_TAIL {
            self.stderr_tail.drain(..self.stderr_tail.len() - STDERR_TAIL);
        }
    }
}

/// `128 + signal`, the conventional exit code for a process stopped by a signal.
pub fn signal_exit_code(signal: i32) -> u8 {
    (128 + signal).clamp(0, 255) as u8
}

/// Describes how the engine ended: `exit status 1`, `killed by signal 9`.
pub fn describe_status(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "an unknown status".to_string(),
    }
}

/// Runs a short command (`claude --version`) and returns the first line it prints, or `None` if
/// it fails or takes longer than `timeout` (then its group is killed).
pub fn first_line_of(
    program: &std::path::Path,
    args: &[&str],
    timeout: Duration,
) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()?;
    let group = Pid::from_child(&child);
    let mut stdout = child.stdout.take()?;
    let reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let text = reader.join().ok()?;
                let line = text.lines().map(str::trim).find(|l| !l.is_empty())?.to_string();
                return status.success().then_some(line);
            }
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            _ => {
                signal_group(group, Signal::KILL);
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Shows what `write` writes through a pager (`$PAGER`, else `less -FRX`), or directly on
/// stdout if none runs. `write` is handed the output in pieces, so nothing needs to be held
/// whole; when the reader quits before reading it all (q in less), writing stops, and that is
/// not an error. Other errors of `write` (reading what it shows) are.
pub fn page(pager: Option<&str>, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let command = pager.unwrap_or("less -FRX");
    let mut words = command.split_whitespace();
    let spawned = words
        .next()
        .and_then(|program| Command::new(program).args(words).stdin(Stdio::piped()).spawn().ok());
    let Some(mut child) = spawned else {
        return written(write, io::stdout().lock(), |_| Ok(()));
    };
    let shown = match child.stdin.take() {
        Some(stdin) => written(write, stdin, |_| Ok(())),
        None => Ok(()),
    };
    child.wait().context("cannot wait for the pager")?;
    shown
}

/// Runs `write` on `out` (buffered), and tells its own errors from those of `out`: an error
/// writing to `out` goes to `gone` (the reader went away, or stdout failed), and writing stops.
pub fn written<W: Write>(
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
    out: W,
    gone: impl FnOnce(io::Error) -> Result<()>,
) -> Result<()> {
    let mut out = Watched { inner: io::BufWriter::with_capacity(64 * 1024, out), failed: None };
    let result = write(&mut out).and_then(|()| out.flush().map_err(anyhow::Error::from));
    match (result, out.failed.take()) {
        (Err(_), Some(e)) => gone(e),
        (result, _) => result,
    }
}

/// A writer that remembers its first error, so that the caller can tell it from others.
struct Watched<W: Write> {
    inner: W,
    failed: Option<io::Error>,
}

impl<W: Write> Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| self.remember(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().inspect_err(|e| self.remember(e))
    }
}

impl<W: Write> Watched<W> {
    fn remember(&mut self, e: &io::Error) {
        if self.failed.is_none() {
            self.failed = Some(io::Error::new(e.kind(), e.to_string()));
        }
    }
}
