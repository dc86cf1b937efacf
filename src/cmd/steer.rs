//! `cca steer`: sends a message to the turn running in a session, and says whether it took it.

use std::io::{self, IsTerminal, Read};

use anyhow::{Context, Result};

use crate::cli::SteerArgs;
use crate::config::Flags;
use crate::error::{Failure, exit};
use crate::human::shell_word;
use crate::session;
use crate::steer::{self, Reply};

/// `cca steer`
pub(crate) fn run(args: &SteerArgs) -> Result<u8> {
    let (settings, store) = session::settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, args.session.as_deref())?;
    super::search::note_options_in_question("steer", &args.message);
    let text = message(&args.message)?;
    match steer::send(&store, &id, &text)? {
        Reply::Accepted => {
            crate::front::terminal::say(&format!(
                "cca: steer sent to the turn running in session {id}"
            ));
            Ok(exit::OK)
        }
        Reply::Refused(reason) => Err(Failure::new(
            exit::ERROR,
            format!("the turn in session {id} refused the steer: {reason}"),
        )
        .into()),
        Reply::NoTurn => {
            Err(Failure::new(exit::ERROR, format!("no turn is running in session {id}"))
                .hint(ask_hint(args.session.as_deref(), &id, &text))
                .into())
        }
    }
}

/// The message from the arguments, else from stdin, checked as a question is.
fn message(words: &[String]) -> Result<String> {
    let bytes = if words.is_empty() {
        let stdin = io::stdin();
        if stdin.is_terminal() {
            return Err(Failure::usage("no message")
                .hint("give it as arguments (`cca steer \"focus on ...\"`) or on stdin")
                .into());
        }
        let mut bytes = Vec::new();
        // One byte past the most a steer takes is enough to refuse it: never all of stdin.
        let most = steer::MAX_BYTES as u64 + 1;
        stdin.lock().take(most).read_to_end(&mut bytes).context("cannot read stdin")?;
        bytes
    } else {
        words.join(" ").into_bytes()
    };
    steer::validate(bytes).map_err(|reason| Failure::usage(reason).into())
}

/// How to ask the message in the session instead. `,` continues the session the terminal
/// follows, which is the one steered only when no `-s` chose another: after `-s`, the hint
/// names the session as it was given.
fn ask_hint(given: Option<&str>, id: &str, text: &str) -> String {
    let words = hint_words(text);
    match given {
        Some(name) => format!("to ask in it, use `cca search -s {} {words}`", shell_word(name)),
        None => format!("to ask in it, use `, {words}` (or `cca search -s {id} ...`)"),
    }
}

/// The start of the message, for a hint, quoted so that pasted back it runs nothing (`$(...)`
/// and backquotes stay as written).
fn hint_words(text: &str) -> String {
    let line = crate::transcript::one_line(text, 80);
    // Words that start with `-` would be read as an option.
    let options_end = if line.starts_with('-') { "-- " } else { "" };
    format!("{options_end}{}", shell_word(&line))
}
