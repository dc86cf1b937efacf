//! `cca chat`: an interactive loop on a session. Each message is one turn (`turn::ask`), saved as
//! it completes; Ctrl-C (or Ctrl-Z) stops an answer, or the wait for a busy session, and returns
//! to the prompt; Ctrl-D leaves. SIGTERM, SIGHUP and SIGQUIT end chat as they end `cca search`:
//! during a turn once it is recorded, at the prompt at once (see `front::signals`).
//!
//! While an answer streams, the line editor is not reading: a [`Typed`] thread reads the lines
//! the terminal delivers (it is in its ordinary line mode then, without echo, so that typing does
//! not break into the answer's lines) and queues each as a steer of the running turn, which the
//! terminal front end shows on a line of its own (`steer queued: ...`).

use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal, Read};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rustyline::error::ReadlineError;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Cmd, Editor, KeyCode, KeyEvent, Modifiers};
use signal_hook::consts::{SIGINT, SIGTSTP};

use crate::cli::ChatArgs;
use crate::error::{Failure, exit};
use crate::front::signals;
use crate::front::slash::{Input, command_or_message};
use crate::front::terminal::{Mode, Terminal, say, say_waiting};
use crate::run::{Cancel, Stop};
use crate::session;
use crate::steer::{self, Inbox};
use crate::turn::{self, Ask, Target};

const HELP: &str = "\
Type a message and press Enter; the answer streams, and the exchange is saved.
  a line ending in \\   continues on the next line (so does Alt-Enter)
  \"\"\" ... \"\"\"           everything between two \"\"\" lines is one message
  Ctrl-C              stop the answer (kept as interrupted); at the prompt, clear the line
  typing + Enter      while an answer streams: steer it (queued, then taken by the engine)
  Ctrl-D, /quit       leave
  /clear              clear the context: later turns send nothing from before
  /compact [N]        summarise older turns now, keeping the last N verbatim (default 4)
  /fork [N]           continue in a new session made of the first N exchanges (default all)
  /session [ID]       show this session, or switch to another
  /help               this text
Any other /word (/new-session too) is refused, not sent; // sends a message that starts with /, and a path
(/etc/hosts) at the start of a message is sent as typed.";

pub(crate) fn run(args: &ChatArgs) -> Result<u8> {
    let (settings, store) = session::settings(&super::flags(&args.answering))?;
    let mut session: Option<String> = match (&args.session, args.resume) {
        (Some(id), _) => Some(store.resolve_id(id)?),
        (None, true) => Some(session::followed(&settings, &store)?),
        (None, false) => None,
    };

    let mut editor: Editor<MultiLine, rustyline::history::DefaultHistory> =
        Editor::new().context("cannot start the line editor")?;
    editor.set_helper(Some(MultiLine));
    editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
    let history = store.chat_history_path();
    let _ = editor.load_history(&history);
    signals::listen()?;

    match &session {
        Some(id) => say(&format!("cca chat · session {id} · /help for help, Ctrl-D to leave")),
        None => say(
            "cca chat · a new session starts with your first message · /help for help, Ctrl-D to leave",
        ),
    }
    // The session's engine, kept between messages; ended when the chat ends.
    let warm = crate::warm::Warm::new();
    // Commands typed while an answer streamed, run once it is saved.
    let mut deferred: VecDeque<String> = VecDeque::new();
    let (piped, cap) = (!std::io::stdin().is_terminal(), settings.input_cap());
    // A turn that failed, for a script's exit status (on a terminal, the person saw it).
    let mut failed = false;
    loop {
        let line = match deferred.pop_front() {
            Some(line) => line,
            None if piped => match piped_message(&mut std::io::stdin().lock(), cap)? {
                Some(Piped::Message(message)) => message,
                Some(Piped::Refused(e)) => {
                    crate::front::terminal::report_in_chat(&e);
                    continue;
                }
                None => break,
            },
            None => match editor.readline("> ") {
                Ok(line) => line,
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(e).context("cannot read from the terminal"),
            },
        };
        let message = unfold(&line);
        if message.trim().is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line.as_str());
        let message = match command_or_message(message) {
            Input::Command(command) => {
                match slash(&command, &settings, &store, &mut session) {
                    Ok(Flow::Leave) => break,
                    Ok(Flow::Stay) => {}
                    Err(e) => {
                        crate::front::terminal::report_in_chat(&e);
                    }
                }
                continue;
            }
            Input::Message(message) => message,
        };
        let ask = Ask {
            target: session.clone().map_or(Target::New, Target::Session),
            query: message,
            attachments: Vec::new(),
            wait: true,
        };
        let mut terminal = Terminal::new(Mode::Normal, &settings).in_chat();
        // A cancel of its own for each turn: a Ctrl-C at the prompt belongs to no turn.
        let cancel = Cancel::new();
        let route = signals::route_to(&cancel)?;
        let inbox = Inbox::new();
        let typed = std::io::stdin().is_terminal().then(|| Typed::start(&inbox));
        let asked = turn::ask_warm(&settings, &store, &ask, &inbox, &warm, &mut terminal, &cancel);
        deferred.extend(typed.map(Typed::finish).unwrap_or_default());
        let shown = match asked {
            Ok(outcome) => {
                session = Some(outcome.session.clone());
                terminal.finish(&outcome).and_then(|code| {
                    failed |= code != exit::OK;
                    super::print("\n")
                })
            }
            Err(e) => {
                failed = true;
                terminal.not_recorded(e, &ask.query).map(|_| ())
            }
        };
        drop(route);
        if let Err(e) = shown {
            crate::front::terminal::report_in_chat(&e);
        }
        // Asked to end, not only to stop the answer: leave as `cca search` would.
        if let Some(why @ Stop::Signal(signal)) = cancel.requested()
            && signal != SIGINT
            && signal != SIGTSTP
        {
            if editor.save_history(&history).is_ok() {
                store.make_private(&history);
            }
            return Ok(why.exit_code());
        }
    }
    if editor.save_history(&history).is_ok() {
        store.make_private(&history);
    }
    // Piped, its status says whether every turn was answered, as `cca search`'s does.
    Ok(if piped && failed { exit::ERROR } else { exit::OK })
}

/// Reads the lines typed while a turn runs and queues each as a steer, until dropped. It polls,
/// so that it stops before the line editor reads again and never takes a line meant for it.
/// A `/command` is not a steer: it is kept for the chat to run after the turn.
struct Typed {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    commands: Arc<Mutex<Vec<String>>>,
    /// The terminal's modes before echo was turned off, put back when reading stops.
    modes: Option<rustix::termios::Termios>,
}

impl Typed {
    fn start(inbox: &Inbox) -> Typed {
        let modes = rustix::termios::tcgetattr(std::io::stdin()).ok();
        if let Some(modes) = &modes {
            let mut quiet = modes.clone();
            quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                &quiet,
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let commands = Arc::new(Mutex::new(Vec::new()));
        let (stopped, inbox, kept) = (stop.clone(), inbox.clone(), commands.clone());
        let thread = std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut line = Vec::new();
            let mut buf = [0u8; 4096];
            let tick = rustix::event::Timespec { tv_sec: 0, tv_nsec: 50_000_000 };
            while !stopped.load(Ordering::SeqCst) {
                let mut fds = [rustix::event::PollFd::new(&stdin, rustix::event::PollFlags::IN)];
                match rustix::event::poll(&mut fds, Some(&tick)) {
                    Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                    Ok(_) => {}
                    Err(_) => return,
                }
                // In line mode a read returns at most the line that was just completed.
                let n = match rustix::io::read(stdin.as_fd(), &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                line.extend_from_slice(&buf[..n]);
                while let Some(end) = memchr::memchr(b'\n', &line) {
                    let typed: Vec<u8> = line.drain(..=end).collect();
                    let Ok(text) = steer::validate(typed) else { continue };
                    let text = text.trim_end_matches(['\r', '\n']).to_string();
                    match command_or_message(text) {
                        Input::Command(command) => {
                            kept.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(format!("/{command}"));
                        }
                        Input::Message(text) => inbox.push(text),
                    }
                }
            }
        });
        Typed { stop, thread: Some(thread), commands, modes }
    }

    /// Stops reading, and gives the commands typed meanwhile.
    fn finish(mut self) -> Vec<String> {
        self.stop_reading();
        std::mem::take(&mut *self.commands.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn stop_reading(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Some(modes) = self.modes.take() {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                &modes,
            );
        }
    }
}

impl Drop for Typed {
    fn drop(&mut self) {
        self.stop_reading();
    }
}

enum Flow {
    Stay,
    Leave,
}

fn slash(
    command: &str,
    settings: &crate::config::Settings,
    store: &crate::store::Store,
    session: &mut Option<String>,
) -> Result<Flow> {
    let (name, arg) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
    let arg = arg.trim();
    let current = || {
        session.clone().ok_or_else(|| {
            anyhow::Error::from(Failure::usage("no session yet: send a message first"))
        })
    };
    match name {
        "help" | "?" => say(HELP),
        "quit" | "exit" | "q" => return Ok(Flow::Leave),
        "clear" => {
            let id = current()?;
            let cleared = crate::session::clear(
                settings,
                store,
                &id,
                || say_waiting(&id),
                super::clear::said_note,
            )?;
            match cleared {
                true => say(
                    "cca: context cleared; the next message starts afresh (the file keeps everything)",
                ),
                false => say("cca: nothing to clear: the next message starts afresh already"),
            }
        }
        "compact" => {
            let id = current()?;
            let keep = match arg {
                "" => None,
                n => Some(n.parse::<u64>().map_err(|_| {
                    Failure::usage(format!("/compact takes a number, not `{n}`"))
                        .hint("/compact 2 keeps the last two exchanges verbatim")
                })?),
            };
            super::compact::compact_session(settings, store, &id, keep)?;
        }
        "fork" => {
            let id = current()?;
            let at = match arg {
                "" => None,
                n => Some(
                    n.parse::<u64>()
                        .map_err(|_| Failure::usage(format!("/fork takes a number, not `{n}`")))?,
                ),
            };
            let new = crate::session::fork(settings, store, &id, at, || say_waiting(&id))?;
            say(&format!("cca: forked {id} into {new}; now talking in {new}"));
            if let Some(note) = crate::session::still_followed_note(settings, &new) {
                say(&format!("cca: after this chat, {note}"));
            }
            *session = Some(new);
        }
        "session" => {
            let switched = !arg.is_empty();
            if switched {
                *session = Some(store.resolve_id(arg)?);
            }
            match session {
                Some(id) if switched => {
                    say(&format!("cca: now talking in {id}: {}", store.session_path(id).display()))
                }
                Some(id) => {
                    say(&format!("cca: session {id}: {}", store.session_path(id).display()))
                }
                None => say("cca: no session yet: your first message starts one"),
            }
        }
        other => {
            return Err(Failure::usage(format!("unknown command /{other}; nothing was sent"))
                .hint(
                    "/help lists the commands; // at the start sends a message that starts with /",
                )
                .into());
        }
    }
    Ok(Flow::Stay)
}

/// The message typed: `\` line continuations joined, `"""` fences removed.
fn unfold(input: &str) -> String {
    let text = input.replace("\\\n", "\n");
    let trimmed = text.trim();
    match trimmed.strip_prefix("\"\"\"").and_then(|t| t.strip_suffix("\"\"\"")) {
        Some(inner) => inner.trim_matches('\n').to_string(),
        None => text,
    }
}

/// Keeps reading lines while the input asks for more: a trailing `\`, or an open `"""`.
struct MultiLine;

impl Validator for MultiLine {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        if asks_for_more(ctx.input()) {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}

/// Whether what was typed so far goes on: a trailing `\`, or an open `"""`.
fn asks_for_more(input: &str) -> bool {
    let open_quotes = input.trim_start().starts_with("\"\"\"")
        && (input.trim().len() < 6 || !input.trim_end().ends_with("\"\"\""));
    input.ends_with('\\') || open_quotes
}

/// A message read from piped stdin, or one refused whole: the chat goes on after it.
enum Piped {
    Message(String),
    Refused(anyhow::Error),
}

/// The next message from stdin when it is not a terminal, read here rather than by the line
/// editor, which reads a line of any length whole and drops a message still open when the
/// input ends: lines joined while one asks for more, as the editor joins them; at most `cap`
/// bytes, more refused before it is read (that ends the chat: the rest of it is not read); a
/// message left open at the end sent as if closed; one that is not UTF-8 refused alone.
/// `None` at the end of the input.
fn piped_message(input: &mut impl BufRead, cap: u64) -> Result<Option<Piped>> {
    let mut message = String::new();
    let mut not_text = false;
    loop {
        let mut line = Vec::new();
        let room = (cap + 1).saturating_sub(message.len() as u64);
        input.take(room).read_until(b'\n', &mut line).context("cannot read stdin")?;
        if line.is_empty() {
            if asks_for_more(&message) && message.trim_start().starts_with("\"\"\"") {
                // An open `"""` closed, so that its fence is not taken for words.
                message.push_str("\"\"\"");
            }
            return Ok(match () {
                _ if not_text => Some(refused_not_text()),
                _ if message.trim().is_empty() => None,
                _ => Some(Piped::Message(message)),
            });
        }
        if (message.len() + line.len()) as u64 > cap {
            return Err(Failure::usage(format!(
                "a message on stdin is over {}, more than any engine takes",
                crate::human::human_bytes(cap)
            ))
            .hint("send a long text as one turn: `cca search < FILE`")
            .into());
        }
        // Bytes that are not text stand in as U+FFFD until the message ends, so that its end is
        // found as for any other; then it is refused.
        not_text |= std::str::from_utf8(&line).is_err();
        let line = String::from_utf8_lossy(&line);
        let line = line.strip_suffix('\n').unwrap_or(&line);
        message.push_str(line.strip_suffix('\r').unwrap_or(line));
        if !asks_for_more(&message) {
            return Ok(Some(if not_text { refused_not_text() } else { Piped::Message(message) }));
        }
        message.push('\n');
    }
}

fn refused_not_text() -> Piped {
    Piped::Refused(
        Failure::usage("a message on stdin is not UTF-8 text: it was not sent")
            .hint("the chat goes on with the next message; send a file with `cca search -f FILE`")
            .into(),
    )
}

impl rustyline::completion::Completer for MultiLine {
    type Candidate = String;
}

impl rustyline::hint::Hinter for MultiLine {
    type Hint = String;
}

impl rustyline::highlight::Highlighter for MultiLine {}

impl rustyline::Helper for MultiLine {}

#[cfg(test)]
mod tests {
    use super::{Piped, piped_message, unfold};

    #[test]
    fn continuations_and_quotes_unfold() {
        assert_eq!(unfold("one\\\ntwo"), "one\ntwo");
        assert_eq!(unfold("\"\"\"\nline 1\nline 2\n\"\"\""), "line 1\nline 2");
        assert_eq!(unfold("plain"), "plain");
    }

    #[test]
    fn piped_messages_join_as_typed_end_open_as_typed_and_stop_at_the_cap() {
        let messages = |text: &[u8], cap: u64| {
            let mut input = std::io::Cursor::new(text.to_vec());
            let mut all = Vec::new();
            loop {
                match piped_message(&mut input, cap) {
                    Ok(Some(Piped::Message(m))) => all.push(m),
                    Ok(Some(Piped::Refused(e))) => all.push(format!("refused: {e:#}")),
                    Ok(None) => return Ok(all),
                    Err(e) => return Err(format!("{e:#}")),
                }
            }
        };
        let messages_of = |bytes: &[u8]| messages(bytes, 100).unwrap();
        let messages = |text: &str, cap: u64| messages(text.as_bytes(), cap);
        assert_eq!(
            messages("one\r\ntwo \\\nthree\n", 100),
            Ok(vec!["one".into(), "two \\\nthree".into()])
        );
        assert_eq!(
            messages("\"\"\"\na\n\"\"\"\nnext\n", 100),
            Ok(vec!["\"\"\"\na\n\"\"\"".into(), "next".into()])
        );
        // Left open when the input ends: sent as if closed, not dropped, its fence not words.
        let open = messages("\"\"\"\nmulti line\nnever closed \\\n", 100).unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(unfold(&open[0]), "multi line\nnever closed ");
        assert_eq!(messages("cont \\\n", 100), Ok(vec!["cont \\\n".into()]));
        // Empty lines are empty messages, as from the editor (the loop skips them).
        assert_eq!(messages("\n\n", 100), Ok(vec![String::new(), String::new()]));
        // A line past the cap is refused after reading one byte more than it, never whole.
        let refused = messages(&"x".repeat(11), 10).unwrap_err();
        assert!(refused.contains("over 10 bytes"), "{refused}");
        assert_eq!(messages(&"x".repeat(10), 10), Ok(vec!["x".repeat(10)]));
        assert!(messages("caf\u{e9}\n", 100).is_ok());
        // A message that is not text is refused alone: the next one is read as ever.
        let mixed = messages_of(b"one \xff\\\ntwo\nthree\n");
        assert_eq!(mixed.len(), 2, "{mixed:?}");
        assert!(mixed[0].starts_with("refused: a message on stdin is not UTF-8"), "{mixed:?}");
        assert_eq!(mixed[1], "three");
    }
}
