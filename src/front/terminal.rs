//! The terminal front end: the answer on stdout as it streams, a spinner while the engine is
//! silent, the engine's stderr and cca's notices on stderr, and at the end either one JSON object
//! (`--json`) or the error with its hints; the exit code follows from the outcome.
//!
//! stdout carries the answer only. The spinner shows only when stderr is a terminal (and not
//! `TERM=dumb`) in the normal mode, and is cleared before the first byte of the answer.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::call::Verdict;
use crate::config::Settings;
use crate::error::{Failure, exit};
use crate::run::Interrupted;
use crate::steer::Steered;
use crate::turn::{Event, Level, Observer, Outcome};

/// How much a terminal turn shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stream the answer, with a spinner, the engine's stderr and every notice.
    Normal,
    /// Stream the answer only; warnings and errors still go to stderr.
    Quiet,
    /// One JSON object at the end.
    Json,
}

/// Whether a spinner may be shown: stderr is a terminal that can draw one.
pub fn spinner_wanted(settings: &Settings) -> bool {
    io::stderr().is_terminal() && !settings.dumb_terminal
}

/// An [`Observer`] that shows a turn in the terminal.
pub struct Terminal {
    mode: Mode,
    spinner_wanted: bool,
    spinner: Spinner,
    stdout_gone: bool,
    printed_newline: bool,
    /// Some answer text was shown.
    answered: bool,
    /// `--json`: the answer as it would have been printed, and the tool calls.
    answer: String,
    tools: Vec<serde_json::Value>,
    /// Say which session a new one is, as soon as it has the question (chat).
    announce_new_session: bool,
}

impl Terminal {
    pub fn new(mode: Mode, settings: &Settings) -> Terminal {
        Terminal {
            mode,
            spinner_wanted: mode == Mode::Normal && spinner_wanted(settings),
            spinner: Spinner::default(),
            stdout_gone: false,
            printed_newline: true,
            answered: false,
            answer: String::new(),
            tools: Vec::new(),
            announce_new_session: false,
        }
    }

    /// Says which session a turn created, once its question is recorded.
    pub fn announcing_new_sessions(mut self) -> Terminal {
        self.announce_new_session = true;
        self
    }

    /// Shows how the turn ended (the JSON object, or the error and its hints) and returns the
    /// exit code.
    pub fn finish(mut self, outcome: &Outcome) -> Result<u8> {
        self.spinner.clear();
        let error = match &outcome.verdict {
            Verdict::Answered => None,
            Verdict::Failed { reason, hint, .. } => Some((reason.clone(), hint.clone())),
            Verdict::Interrupted { why } => Some((
                format!("interrupted ({})", why.name()),
                Some("the partial answer is kept in the transcript too".into()),
            )),
        };
        if self.mode == Mode::Json {
            let value = json!({
                "session": outcome.session,
                "path": outcome.path,
                "turn": outcome.turn,
                "ok": error.is_none(),
                // Exactly what stdout shows in the other modes; the tool calls come apart.
                "answer": self.answer,
                "tools": self.tools,
                "error": error.as_ref().map(|(reason, _)| reason),
                "engine": outcome.engine,
                "model": outcome.model,
                "duration_ms": outcome.duration.as_millis() as u64,
                "usage": {
                    "input_tokens": outcome.usage.input_tokens,
                    "output_tokens": outcome.usage.output_tokens,
                },
                "cost_usd": outcome.usage.cost_usd,
            });
            print_stdout(&format!("{value}\n"))?;
        } else if !self.printed_newline && io::stdout().is_terminal() {
            print_stdout("\n")?;
        }
        if let Some((reason, hint)) = error {
            if self.mode == Mode::Quiet && !outcome.stderr_tail.trim().is_empty() {
                eprintln!("{}", outcome.stderr_tail.trim_end());
            }
            let kept = "your question is kept in the transcript, marked as not answered, and will \
                        not be sent again; ask again with `cca search --resume`";
            print_error(&reason, hint.iter().flat_map(|h| h.lines()).chain([kept]));
        }
        Ok(outcome.exit_code())
    }

    /// A turn that ended before its question was recorded: a cancel gets its signal's exit
    /// code and says that nothing was kept; anything else is an ordinary error for `main`.
    pub fn not_recorded(mut self, error: anyhow::Error) -> Result<u8> {
        self.spinner.clear();
        match error.downcast_ref::<Interrupted>() {
            Some(Interrupted(why)) => {
                eprintln!("cca: interrupted ({}) before the question was saved", why.name());
                Ok(why.exit_code())
            }
            None => Err(error),
        }
    }

    fn shows(&self, level: Level) -> bool {
        match self.mode {
            Mode::Normal => true,
            Mode::Json => level >= Level::Info,
            Mode::Quiet => level >= Level::Warning,
        }
    }

    fn steered(&mut self, steered: Steered) {
        let gist = |text: &str| crate::transcript::one_line(text, 72);
        match steered {
            Steered::Queued(text) if self.shows(Level::Info) => {
                self.spinner.stderr(format!("cca: steer queued: {}\n", gist(text)).as_bytes());
            }
            Steered::Taken(text) => {
                if self.shows(Level::Info) {
                    self.spinner.stderr(format!("cca: steer taken: {}\n", gist(text)).as_bytes());
                }
                // The answer to it is a new answer: a blank line sets it apart.
                if self.answered {
                    let gap = if self.printed_newline { "\n" } else { "\n\n" };
                    self.answer_text(gap);
                }
            }
            Steered::NotTaken(text) => self.spinner.stderr(
                format!(
                    "cca: steer not taken (kept in the transcript as not answered): {}\n",
                    gist(text)
                )
                .as_bytes(),
            ),
            Steered::Queued(_) => {}
        }
    }

    fn answer_text(&mut self, text: &str) {
        self.answered |= !text.is_empty();
        self.spinner.clear();
        if self.mode == Mode::Json {
            self.answer.push_str(text);
            return;
        }
        if self.stdout_gone || text.is_empty() {
            return;
        }
        let mut out = io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => self.printed_newline = text.ends_with('\n'),
            // The reader went away (`| head`): keep recording the answer, stop printing it.
            Err(_) => self.stdout_gone = true,
        }
    }
}

impl Observer for Terminal {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Waiting { session } => say_waiting(session),
            Event::Recorded { session, created } => {
                if created && self.announce_new_session {
                    self.spinner.stderr(format!("cca: session {session}\n").as_bytes());
                }
            }
            Event::Notice { level, text } => {
                if self.shows(level) {
                    self.spinner.stderr(format!("cca: {text}\n").as_bytes());
                }
            }
            Event::Started { engine } => {
                if self.spinner_wanted {
                    self.spinner.start(&format!("waiting for {engine}"));
                }
            }
            Event::Text(text) => self.answer_text(text),
            Event::Tool(call) => match self.mode {
                Mode::Normal => self.spinner.stderr(format!("· {}\n", call.summary()).as_bytes()),
                Mode::Json => self.tools.push(call.to_json()),
                Mode::Quiet => {}
            },
            Event::EngineOutput(bytes) => {
                if self.mode == Mode::Normal {
                    self.spinner.stderr(bytes);
                }
            }
            Event::Retry(note) => {
                if self.mode == Mode::Normal {
                    self.spinner.stderr(format!("{note}\n").as_bytes());
                }
            }
            Event::Stopping => self.spinner.clear(),
            Event::Steer(steered) => self.steered(steered),
        }
    }
}

/// Prints an error the way every cca error is printed, and returns its exit code: the
/// outermost message, then the causes that add something, then the hint of a [`Failure`].
pub fn report(err: &anyhow::Error) -> u8 {
    let failure = err.chain().find_map(|e| e.downcast_ref::<Failure>());
    let mut message = String::new();
    for (i, cause) in err.chain().enumerate() {
        let text = cause.to_string();
        if i > 0 && message.contains(&text) {
            continue;
        }
        if i > 0 {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    print_error(&message, failure.and_then(|f| f.hint.as_deref()).into_iter().flat_map(str::lines));
    failure.map_or(exit::ERROR, |f| f.code)
}

/// `cca: error: MESSAGE`, then a `hint: ` line for each hint line.
fn print_error<'a>(message: &str, hints: impl IntoIterator<Item = &'a str>) {
    eprintln!("cca: error: {message}");
    for line in hints {
        eprintln!("hint: {line}");
    }
}

/// Says that another cca holds the session, before waiting for it.
pub fn say_waiting(id: &str) {
    eprintln!(
        "cca: session {id} is busy: another cca is answering in it; waiting for it to finish…"
    );
}

/// A spinner on stderr, if one is running; stderr lines are printed around it.
#[derive(Default)]
pub struct Spinner(Option<indicatif::ProgressBar>);

impl Spinner {
    /// `{spinner} MESSAGE · {elapsed}` until cleared.
    pub fn start(&mut self, message: &str) {
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} · {elapsed}")
                .expect("a valid template"),
        );
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        self.0 = Some(bar);
    }

    pub fn clear(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }

    /// Writes to stderr without tearing the spinner.
    pub fn stderr(&self, bytes: &[u8]) {
        let write = || {
            let mut err = io::stderr().lock();
            let _ = err.write_all(bytes).and_then(|()| err.flush());
        };
        match &self.0 {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error, any other failure is.
pub fn print_stdout(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e).context("cannot write to stdout"),
        _ => Ok(()),
    }
}
