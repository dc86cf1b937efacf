//! The terminal front end: the answer on stdout as it streams, a spinner while the engine is
//! silent, the engine's stderr and cca's notices on stderr, and at the end either one JSON object
//! (`--json`) or the error with its hints; the exit code follows from the outcome.
//!
//! stdout carries the answer only. The spinner shows only when stderr is a terminal (and neither
//! `NO_COLOR` nor `TERM=dumb` is set) in the normal mode, and is cleared before the first byte of
//! the answer.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::call::Verdict;
use crate::config::{Render, Settings};
use crate::error::{Failure, exit};
use crate::render::{self, Renderer};
use crate::run::Interrupted;
use crate::steer::Steered;
use crate::transcript::Totals;
use crate::turn::{Event, Level, Observer, TurnResult};

/// How much a terminal turn shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Stream the answer, with a spinner, the engine's stderr and every notice.
    Normal,
    /// Stream the answer only; warnings and errors still go to stderr.
    Quiet,
    /// One JSON object at the end.
    Json,
}

/// Whether a spinner may be shown: stderr is a terminal that can draw one, and escape codes
/// are welcome (not `NO_COLOR`, not `TERM=dumb`: a spinner redraws its line with them).
pub(crate) fn spinner_wanted(settings: &Settings) -> bool {
    io::stderr().is_terminal() && settings.color
}

/// An [`Observer`] that shows a turn in the terminal.
pub(crate) struct Terminal {
    mode: Mode,
    spinner_wanted: bool,
    spinner: Spinner,
    stdout_gone: bool,
    /// A write to stdout failed for another reason than a closed reader (a full disk).
    stdout_failed: Option<io::Error>,
    printed_newline: bool,
    /// Some answer text was shown.
    answered: bool,
    /// `--json`: the answer as it would have been printed, and the tool calls.
    answer: String,
    tools: Vec<serde_json::Value>,
    /// In `cca chat`: say which session a new one is as soon as it has the question, and name
    /// chat's own commands in hints.
    chat: bool,
    /// The question is in the transcript.
    recorded: bool,
    /// With `CCA_SESSION` set: what to say when a turn creates a session (`{new}` stands for it).
    still_followed: Option<String>,
    /// Answers rendered as markdown for the terminal, as they stream (see [`rendering`]).
    renderer: Option<Renderer>,
    /// After an answer, a dim line with its cost and the session's (normal mode, on a terminal).
    cost_line: bool,
    color: bool,
}

/// How answers are drawn, when they are rendered: on a terminal (or always, when the config
/// says so), in the normal mode only; `-q`, `--json` and a pipe get the answer byte for byte.
pub(crate) fn rendering(settings: &Settings, mode: Mode) -> Option<render::Style> {
    let on_terminal = io::stdout().is_terminal();
    let wanted = match settings.render.value {
        Render::Auto => on_terminal,
        Render::Always => true,
        Render::Never => false,
    };
    (mode == Mode::Normal && wanted).then(|| render::Style {
        color: settings.color,
        hyperlinks: settings.hyperlinks,
        width: terminal_width().unwrap_or(80),
        // Redrawing a finished line takes escape codes and a screen to redraw on.
        live: settings.color && on_terminal,
    })
}

impl Terminal {
    pub(crate) fn new(mode: Mode, settings: &Settings) -> Terminal {
        Terminal {
            mode,
            spinner_wanted: mode == Mode::Normal && spinner_wanted(settings),
            spinner: Spinner::default(),
            stdout_gone: false,
            stdout_failed: None,
            printed_newline: true,
            answered: false,
            answer: String::new(),
            tools: Vec::new(),
            chat: false,
            renderer: rendering(settings, mode).map(Renderer::new),
            cost_line: mode == Mode::Normal && io::stderr().is_terminal(),
            color: settings.color,
            recorded: false,
            still_followed: crate::session::still_followed_note(settings, "{new}"),
        }
    }

    /// Says which session a turn created, once its question is recorded.
    pub(crate) fn in_chat(mut self) -> Terminal {
        self.chat = true;
        self
    }

    /// Shows how the turn ended (the JSON object, or the error and its hints) and returns the
    /// exit code.
    pub(crate) fn finish(mut self, outcome: &TurnResult) -> Result<u8> {
        self.spinner.clear();
        if let Some(mut renderer) = self.renderer.take() {
            let mut rest = String::new();
            renderer.finish(&mut rest);
            self.print(&rest);
        }
        let error = match &outcome.verdict {
            Verdict::Answered => None,
            Verdict::Failed { reason, hint, .. } => Some((reason.clone(), hint.clone())),
            Verdict::Interrupted { why } => Some((
                format!("interrupted ({})", why.name()),
                // Only an answer that began has a part to keep.
                self.answered.then(|| "the partial answer is kept in the transcript too".into()),
            )),
        };
        if self.mode == Mode::Json {
            // The session's figures are numbers wherever this turn's are: none answered yet is 0.
            let session = |total: Option<u64>, this: Option<u64>| total.or(this.map(|_| 0));
            let value = json!({
                "session": outcome.session,
                // A path that is not UTF-8 (CCA_HOME may be any bytes) cannot be JSON text.
                "path": outcome.path.to_string_lossy(),
                "turn": outcome.turn,
                "ok": error.is_none(),
                // Exactly what stdout shows in the other modes; the tool calls come apart.
                "answer": self.answer,
                "tools": self.tools,
                "error": error.as_ref().map(|(reason, _)| reason),
                // As for a turn that recorded nothing: what to do, and how cca exits.
                "hint": error.as_ref().and_then(|(_, hint)| hint.as_ref()),
                "exit_code": outcome.exit_code(),
                "engine": outcome.engine,
                "model": outcome.model,
                "duration_ms": outcome.duration.as_millis() as u64,
                "usage": {
                    "input_tokens": outcome.usage.input_tokens,
                    "cached_tokens": outcome.usage.cached_tokens,
                    "output_tokens": outcome.usage.output_tokens,
                },
                "cost_usd": outcome.usage.cost_usd,
                "session_usage": {
                    "input_tokens": session(outcome.session_totals.input_tokens, outcome.usage.input_tokens),
                    "output_tokens": session(outcome.session_totals.output_tokens, outcome.usage.output_tokens),
                    "cost_usd": outcome.session_totals.cost_usd.or(outcome.usage.cost_usd.map(|_| 0.0)),
                    "left_out": outcome.session_totals.left_out,
                },
            });
            if let Err(e) = write_stdout(format!("{value}\n").as_bytes()) {
                self.stdout_failed.get_or_insert(e);
            }
        } else if !self.printed_newline && !self.stdout_gone && io::stdout().is_terminal() {
            self.answer_text("\n");
        }
        if self.cost_line && error.is_none() {
            let this = Totals::default().add(
                outcome.usage.input_tokens,
                outcome.usage.output_tokens,
                outcome.usage.cost_usd,
            );
            if let Some(line) = cost_line(&this, &outcome.session_totals) {
                let (dim, off) = if self.color { ("\x1b[2m", "\x1b[0m") } else { ("", "") };
                say_styled(&format!("{dim}{}{off}", render::clean_text(&line)));
            }
        }
        if let Some((reason, hint)) = error {
            if self.mode == Mode::Quiet && !outcome.stderr_tail.trim().is_empty() {
                let tail = outcome.stderr_tail.trim_end();
                let lines: Vec<&str> = tail.lines().collect();
                let from = lines.len().saturating_sub(BRIEF_LINES);
                say(&lines[from..]
                    .iter()
                    .map(|l| cut_chars(l, BRIEF_LINE_CHARS))
                    .collect::<Vec<_>>()
                    .join("\n"));
            }
            // An engine's error can be a whole web page: a few lines here, all of it in the
            // transcript.
            let reason = match brief(&reason) {
                Some(start) => format!(
                    "{start}\n[...] (the whole error is in the transcript: {})",
                    outcome.path.display()
                ),
                None => reason,
            };
            let kept = "your question is kept in the transcript, marked as not answered, and will \
                        not be sent again; ask again with `cca search --resume`";
            let hints: Vec<String> =
                hint.iter().flat_map(|h| h.lines()).chain([kept]).map(|h| self.hint(h)).collect();
            print_error(&reason, hints.iter().map(String::as_str));
        }
        if let Some(e) = &self.stdout_failed {
            let id = &outcome.session;
            print_error(
                &format!("cannot write the answer to stdout: {e}"),
                [format!("the exchange is kept in the transcript; `cca show {id}` prints it")
                    .as_str()],
            );
            return Ok(outcome.exit_code().max(exit::ERROR));
        }
        Ok(outcome.exit_code())
    }

    /// A turn that ended with an error: before its question was recorded, that is said
    /// plainly and the question repeated, so nothing typed is lost (a cancel gets its signal's
    /// exit code); after it (the outcome could not be saved), an ordinary error for `main`.
    pub(crate) fn not_recorded(mut self, error: anyhow::Error, question: &str) -> Result<u8> {
        self.spinner.clear();
        if self.recorded {
            return Err(error);
        }
        let code = match error.downcast_ref::<Interrupted>() {
            Some(Interrupted(why)) => {
                let text = format!("interrupted ({}) before the question was saved", why.name());
                say(&format!("cca: {text}"));
                if self.mode == Mode::Json {
                    json_failure(&text, None, why.exit_code());
                }
                why.exit_code()
            }
            None if self.mode == Mode::Json => json_error(&error),
            None => report_with(&error, self.chat),
        };
        say(&format!("cca: nothing was recorded; your question was:\n{question}"));
        Ok(code)
    }

    fn hint(&self, hint: &str) -> String {
        if self.chat { chat_hint(hint) } else { hint.to_string() }
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
                self.aside(format!("cca: steer queued: {}\n", gist(text)).as_bytes());
            }
            Steered::Taken(text) => {
                if self.shows(Level::Info) {
                    self.aside(format!("cca: steer taken: {}\n", gist(text)).as_bytes());
                }
                // The answer to it is a new answer: a blank line sets it apart.
                if self.answered {
                    let gap = if self.printed_newline { "\n" } else { "\n\n" };
                    self.answer_text(gap);
                }
            }
            Steered::NotTaken(text) => self.aside(
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
        match &mut self.renderer {
            Some(renderer) => {
                let mut shown = String::new();
                renderer.push(text, &mut shown);
                self.print(&shown);
            }
            None => self.print(text),
        }
    }

    fn print(&mut self, text: &str) {
        if self.stdout_gone || text.is_empty() {
            return;
        }
        match write_stdout(text.as_bytes()) {
            Ok(()) => self.printed_newline = text.ends_with('\n'),
            // The reader went away (`| head`): keep recording the answer, stop printing it.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => self.stdout_gone = true,
            // Anything else (a full disk) loses output: keep recording, and fail at the end.
            Err(e) => {
                self.stdout_gone = true;
                self.stdout_failed = Some(e);
            }
        }
    }
}

impl Terminal {
    /// Writes to stderr around the spinner, and around an unfinished rendered line (taken off
    /// the screen first; the next text shows it again).
    fn aside(&mut self, bytes: &[u8]) {
        if let Some(renderer) = &mut self.renderer {
            let mut hidden = String::new();
            renderer.hide(&mut hidden);
            self.print(&hidden);
            // Hiding leaves the cursor at the start of a line.
            self.printed_newline = true;
        } else if !self.printed_newline && self.mode != Mode::Json && io::stdout().is_terminal() {
            // The answer as it is (not rendered) stopped inside a line: the notice starts on a
            // line of its own, and stdout keeps the exact answer.
            self.spinner.stderr(b"\n");
            self.printed_newline = true;
        }
        self.spinner.stderr(bytes);
    }
}

impl Observer for Terminal {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Waiting { session } => say_waiting(session),
            Event::Recorded { session, created } => {
                self.recorded = true;
                if created && self.chat {
                    self.aside(format!("cca: session {session}\n").as_bytes());
                }
                if created
                    && self.mode == Mode::Normal
                    && let Some(note) = &self.still_followed
                {
                    let after = if self.chat { "after this chat, " } else { "" };
                    let note = note.replace("{new}", session);
                    self.aside(format!("cca: {after}{note}\n").as_bytes());
                }
            }
            Event::Notice { level, text } => {
                if self.shows(level) {
                    self.aside(format!("cca: {text}\n").as_bytes());
                }
            }
            Event::Started { engine } => {
                if self.spinner_wanted {
                    self.spinner.start(&format!("waiting for {engine}"));
                }
            }
            Event::Text(text) => self.answer_text(text),
            Event::Tool(call) => match self.mode {
                Mode::Normal => self.aside(format!("· {}\n", call.summary()).as_bytes()),
                Mode::Json => self.tools.push(call.to_json()),
                Mode::Quiet => {}
            },
            Event::EngineOutput(bytes) => {
                if self.mode == Mode::Normal {
                    self.aside(bytes);
                }
            }
            Event::Retry(note) => {
                if self.mode == Mode::Normal {
                    self.aside(format!("{note}\n").as_bytes());
                }
            }
            Event::Stopping => self.spinner.clear(),
            // A terminal shows a tool call once, with what came of it.
            Event::ToolStarted(_) => {}
            Event::Steer(steered) => self.steered(steered),
        }
    }
}

/// How much of a long error the terminal shows: lines, and characters per line.
const BRIEF_LINES: usize = 6;
const BRIEF_LINE_CHARS: usize = 200;

/// The start of a long text, if it is longer than a few lines' worth: a short error is shown
/// whole, one long line or not (the terminal wraps it).
fn brief(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= BRIEF_LINES && text.chars().count() <= BRIEF_LINES * BRIEF_LINE_CHARS {
        return None;
    }
    let shown: Vec<String> =
        lines.iter().take(BRIEF_LINES).map(|l| cut_chars(l, BRIEF_LINE_CHARS)).collect();
    Some(shown.join("\n"))
}

/// At most `max` characters of a line, cut after a word where one ends in the last fifth
/// (never inside an address or a number when it can be helped), else on a character boundary.
fn cut_chars(line: &str, max: usize) -> String {
    let Some((at, _)) = line.char_indices().nth(max) else { return line.to_string() };
    let head = &line[..at];
    let word_end = head
        .char_indices()
        .rev()
        .take(max / 5)
        .find(|(_, c)| c.is_whitespace())
        .map(|(i, _)| head[..i].trim_end());
    format!("{} …", word_end.filter(|w| !w.is_empty()).unwrap_or(head))
}

/// Prints an error the way every cca error is printed, and returns its exit code: the
/// outermost message, then the causes that add something, then the hint of a [`Failure`].
pub(crate) fn report(err: &anyhow::Error) -> u8 {
    report_with(err, false)
}

/// [`report`], in `cca chat`: the hints name chat's commands.
pub(crate) fn report_in_chat(err: &anyhow::Error) -> u8 {
    report_with(err, true)
}

/// A hint as `cca chat` says it: chat's own commands instead of the shell's.
fn chat_hint(hint: &str) -> String {
    const IN_CHAT: [(&str, &str); 6] = [
        ("ask again with `cca search --resume`", "send it again (Up recalls it)"),
        ("ask again with `,`", "send it again (Up recalls it)"),
        ("`cca clear`", "`/clear`"),
        ("`cca compact`", "`/compact`"),
        ("`cca fork`", "`/fork`"),
        ("(`--at 1`)", "(`/fork 1`)"),
    ];
    IN_CHAT.iter().fold(hint.to_string(), |hint, (shell, chat)| hint.replace(shell, chat))
}

fn report_with(err: &anyhow::Error, chat: bool) -> u8 {
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
    let hints = failure.and_then(|f| f.hint.as_deref()).into_iter().flat_map(str::lines);
    let hints: Vec<String> =
        hints.map(|h| if chat { chat_hint(h) } else { h.to_string() }).collect();
    print_error(&message, hints.iter().map(String::as_str));
    failure.map_or(exit::ERROR, |f| f.code)
}

/// `--json` with no turn to report (bad arguments or settings, a turn that recorded nothing):
/// the error on stderr as always, and as one JSON object on stdout, so that a script reading
/// stdout always gets JSON. Returns the exit code.
pub(crate) fn json_error(err: &anyhow::Error) -> u8 {
    let code = report(err);
    let failure = err.chain().find_map(|e| e.downcast_ref::<Failure>());
    json_failure(&format!("{err:#}"), failure.and_then(|f| f.hint.as_deref()), code);
    code
}

/// `{"ok": false, "error": ..., "hint": ..., "exit_code": ...}` on stdout.
fn json_failure(error: &str, hint: Option<&str>, code: u8) {
    let value = json!({"ok": false, "error": error, "hint": hint, "exit_code": code});
    let _ = write_stdout(format!("{value}\n").as_bytes());
}

/// A command line clap refused: its message (help and version are no errors), with two
/// changes. Words that are no command (`cca what is rust`) are taken for a question, and the
/// hint says how to ask it; and with `--json`, the error is also a JSON object on stdout.
pub(crate) fn argument_error(e: &clap::Error, args: &[String]) -> u8 {
    let code = e.exit_code() as u8;
    if !e.use_stderr() {
        let _ = e.print();
        return code;
    }
    let invalid = e.kind() == clap::error::ErrorKind::InvalidSubcommand;
    // Options before the first word are cca's; every word from it on is the question's, as
    // `cca search` takes them (`cca what does --json mean`).
    let leading = args.iter().take_while(|a| a.starts_with('-')).count();
    let words: Vec<&str> = args[leading..].iter().map(String::as_str).collect();
    let question = words.join(" ");
    let rendered = e.render().to_string();
    let message = rendered.lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
    let meant = words.first().filter(|_| invalid).and_then(|w| meant_command(w));
    // A typo of a command keeps its options wherever they are (`cca shwo x --json`).
    let mut options = if invalid && meant.is_none() { &args[..leading] } else { args };
    let (message, hint) = if let Some(command) = meant {
        // A typo of a command, not a question: the command as meant comes first.
        let rest = args.iter().skip(1).map(|a| crate::human::shell_word(a)).collect::<Vec<_>>();
        let fixed = std::iter::once(command.as_str()).chain(rest.iter().map(String::as_str));
        let fixed = format!("did you mean `cca {}`?", fixed.collect::<Vec<_>>().join(" "));
        let message = format!("`{}` is not a cca command", words[0]);
        let ask = (words.len() > 1).then(|| {
            format!("to ask it as a question: cca search {}", crate::human::shell_word(&question))
        });
        print_error(&message, std::iter::once(fixed.as_str()).chain(ask.as_deref()));
        (message, Some(fixed))
    } else if invalid && (words.len() > 1 || question.contains(char::is_whitespace)) {
        let shown = crate::human::shell_word(&question);
        print_error(
            &format!("`{question}` is not a cca command"),
            [format!("to ask it: cca search {shown}").as_str(), "`cca --help` lists the commands"],
        );
        (
            format!("`{question}` is not a cca command"),
            Some(format!("to ask it: cca search {shown}")),
        )
    } else if let Some(at) = search_options_before_a_question(e, args) {
        // `cca -q what is this`: options of `cca search`, before a question with no command.
        options = &args[..at];
        let all: Vec<String> = args.iter().map(|a| crate::human::shell_word(a)).collect();
        let message = format!("`{}` is an option of `cca search`, not of cca itself", args[0]);
        let ask = format!("to ask it: cca search {}", all.join(" "));
        print_error(&message, [ask.as_str()]);
        (message, Some(ask))
    } else {
        let _ = e.print();
        (message, None)
    };
    if options.iter().any(|a| a == "--json") {
        json_failure(&message, hint.as_deref(), code);
    }
    code
}

/// Where the question begins when `args` (clap's `e` about them: an argument cca itself does
/// not take) are options of `cca search` and then a question, as `cca search` would read them.
fn search_options_before_a_question(e: &clap::Error, args: &[String]) -> Option<usize> {
    if e.kind() != clap::error::ErrorKind::UnknownArgument || !args.first()?.starts_with('-') {
        return None;
    }
    let cli = <crate::cli::Cli as clap::CommandFactory>::command();
    let read = crate::complete::read_options(cli.find_subcommand("search")?, args);
    read.question_at.filter(|&at| read.all_known && at < args.len())
}

/// The command a first word that is none was meant to be: one edit away (a letter added,
/// dropped or changed, or two side by side swapped) from a command's name of four letters or
/// more (for shorter ones, one edit is most of the word), starting with the same letter (so
/// that a question's "what", "how" or "that" is not taken for `chat` or `show`).
fn meant_command(word: &str) -> Option<String> {
    let cli = <crate::cli::Cli as clap::CommandFactory>::command();
    let names: Vec<String> = cli
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .flat_map(|c| std::iter::once(c.get_name()).chain(c.get_visible_aliases()))
        .map(str::to_string)
        .collect();
    names.into_iter().find(|name| {
        name.chars().count() >= 4
            && word.chars().next() == name.chars().next()
            && one_edit(word, name)
    })
}

/// Whether `a` becomes `b` by one edit (see [`meant_command`]).
fn one_edit(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let (short, long) = if a.len() <= b.len() { (&a, &b) } else { (&b, &a) };
    let head = short.iter().zip(long.iter()).take_while(|(x, y)| x == y).count();
    match long.len() - short.len() {
        // Dropped or added: the rest matches once the extra letter is skipped.
        1 => short[head..] == long[head + 1..],
        0 if head == short.len() => false,
        0 => {
            short[head + 1..] == long[head + 1..]
                || (head + 1 < short.len()
                    && short[head] == long[head + 1]
                    && short[head + 1] == long[head]
                    && short[head + 2..] == long[head + 2..])
        }
        _ => false,
    }
}

/// `cca: error: MESSAGE`, then a `hint: ` line for each hint line.
fn print_error<'a>(message: &str, hints: impl IntoIterator<Item = &'a str>) {
    let mut text = format!("cca: error: {message}");
    for line in hints {
        text.push_str(&format!("\nhint: {line}"));
    }
    say(&text);
}

/// Writes a line to stderr, its control characters shown as U+FFFD (`render::clean_text`): a
/// line often names what the user typed or a file held (an id, a path, a name), and an escape
/// sequence in it must not reach the terminal. A closed or failing stderr (a closed terminal,
/// `2>/dev/full`) must not stop cca in the middle of its work, so errors are ignored: stderr is
/// where they would go.
pub(crate) fn say(line: &str) {
    say_styled(&render::clean_text(line));
}

/// [`say`] for a line cca styled itself (its escape sequences are its own), as it is.
fn say_styled(line: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(format!("{line}\n").as_bytes()).and_then(|()| err.flush());
}

/// The terminal's width in columns: stdout's, else stderr's (stdout piped to a pager).
pub(crate) fn terminal_width() -> Option<usize> {
    let size = rustix::termios::tcgetwinsize(io::stdout())
        .or_else(|_| rustix::termios::tcgetwinsize(io::stderr()))
        .ok()?;
    (size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// `1,234 tokens in · 56 out · $0.0123 (session: 9,876 tokens in · 543 out · $0.0456)`: what an answer
/// cost and what the session has cost so far, where the engine reports it; `None` if it does not.
pub(crate) fn cost_line(this: &Totals, session: &Totals) -> Option<String> {
    fn parts(t: &Totals) -> Vec<String> {
        let mut parts = Vec::new();
        if let Some(n) = t.input_tokens {
            parts.push(format!("{} tokens in", thousands(n)));
        }
        if let Some(n) = t.output_tokens {
            let tokens = if parts.is_empty() { " tokens" } else { "" };
            parts.push(format!("{}{tokens} out", thousands(n)));
        }
        if let Some(usd) = t.cost_usd {
            parts.push(format!("${usd:.4}"));
        }
        parts
    }
    if this.is_empty() {
        return None;
    }
    let mut line = parts(this).join(" · ");
    if !parts(session).is_empty() && session != this {
        line.push_str(&format!(" (session: {})", parts(session).join(" · ")));
    }
    // A figure that made no sense is never shown as a number: it is counted as left out.
    let left_out = this.left_out.max(session.left_out);
    if left_out > 0 {
        let sep = if line.is_empty() { "" } else { " · " };
        let figures = if left_out == 1 { "a figure" } else { "figures" };
        line.push_str(&format!("{sep}{figures} that made no sense left out ({left_out})"));
    }
    Some(line)
}

/// `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Says that another cca holds the session, before waiting for it.
pub(crate) fn say_waiting(id: &str) {
    say(&format!(
        "cca: session {id} is busy: another cca is answering in it; waiting for it to finish…"
    ));
}

/// A spinner on stderr, if one is running; stderr lines are printed around it.
#[derive(Default)]
pub(crate) struct Spinner(Option<indicatif::ProgressBar>);

impl Spinner {
    /// `{spinner} MESSAGE · {elapsed}` until cleared.
    pub(crate) fn start(&mut self, message: &str) {
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

    pub(crate) fn clear(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }

    /// Writes to stderr without tearing the spinner.
    pub(crate) fn stderr(&self, bytes: &[u8]) {
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
pub(crate) fn print_stdout(text: &str) -> Result<()> {
    print_bytes(text.as_bytes())
}

/// Like [`print_stdout`], for bytes that may not be text (`cca show --raw`).
pub(crate) fn print_bytes(bytes: &[u8]) -> Result<()> {
    write_stdout(bytes).or_else(stdout_failed)
}

/// Writes to stdout what `write` writes, in pieces (`cca show` through no pager).
pub(crate) fn print_with(write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    crate::run::written(write, io::stdout().lock(), stdout_failed)
}

/// A closed pipe (`| head`) is the reader's choice, not an error; any other failure is.
fn stdout_failed(e: io::Error) -> Result<()> {
    match e.kind() {
        io::ErrorKind::BrokenPipe => Ok(()),
        _ => Err(e).context("cannot write to stdout"),
    }
}

/// Writes to stdout and flushes, so that a failure shows here, where it can be reported.
fn write_stdout(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_short_error_is_whole_and_a_long_one_is_cut_between_words() {
        let port =
            format!("cannot reach {}http://127.0.0.1:45678/v1/messages", "the API at ".repeat(18));
        assert!(port.chars().count() > super::BRIEF_LINE_CHARS);
        assert_eq!(super::brief(&port), None, "one line of a short error is shown whole");
        let page = format!("{port} {}", "word ".repeat(400));
        let cut = super::brief(&page).unwrap();
        assert!(cut.ends_with(" …") && !cut.contains("45678/v1/messages word"), "{cut}");
        let line = format!("{} 127.0.0.1:45678 and more", "x".repeat(190));
        assert_eq!(super::cut_chars(&line, 200), format!("{} …", "x".repeat(190)));
        assert_eq!(super::cut_chars(&"y".repeat(300), 200), format!("{} …", "y".repeat(200)));
    }

    #[test]
    fn one_edit_is_a_letter_added_dropped_changed_or_two_swapped() {
        use super::one_edit;
        for (a, b) in [("serach", "search"), ("serch", "search"), ("searchh", "search")] {
            assert!(one_edit(a, b) && one_edit(b, a), "{a} {b}");
        }
        assert!(one_edit("sessins", "sessions") && one_edit("seerch", "search"));
        for (a, b) in [("search", "search"), ("sraech", "search"), ("what", "show"), ("", "show")] {
            assert!(!one_edit(a, b), "{a} {b}");
        }
        assert_eq!(super::meant_command("serach").as_deref(), Some("search"));
        for question in ["what", "how", "that", "whats"] {
            assert_eq!(super::meant_command(question), None, "{question}");
        }
        assert_eq!(super::meant_command("caht").as_deref(), Some("chat"));
        assert_eq!(super::meant_command("r"), None, "rm is too short to guess");
    }

    use super::*;

    #[test]
    fn the_cost_line_says_what_the_engine_reported() {
        let this = Totals::default().add(Some(1234), Some(56), Some(0.0123));
        let session = this.add(Some(10_000), Some(500), Some(0.1));
        assert_eq!(
            cost_line(&this, &session).unwrap(),
            "1,234 tokens in · 56 out · $0.0123 (session: 11,234 tokens in · 556 out · $0.1123)"
        );
        assert_eq!(cost_line(&this, &this).unwrap(), "1,234 tokens in · 56 out · $0.0123");
        let only_out = Totals::default().add(None, Some(7), None);
        assert_eq!(cost_line(&only_out, &only_out).unwrap(), "7 tokens out");
        assert_eq!(cost_line(&Totals::default(), &session), None, "nothing reported: no line");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
