//! `cca search` and `cca ,`: the question from arguments and stdin, then one turn.

use std::io::{self, IsTerminal, Read};

use anyhow::{Context, Result};

use super::settings;
use crate::cli::AskArgs;
use crate::error::Failure;
use crate::turn::{self, Ask, OutputMode, Target};

pub fn search(args: &AskArgs, target: Target) -> Result<u8> {
    let (settings, store) = settings(&super::flags(&args.answering))?;
    let (query, attachment) = question(&args.query)?;
    let output = if args.json {
        OutputMode::Json
    } else if args.quiet {
        OutputMode::Quiet
    } else {
        OutputMode::Normal
    };
    let ask = Ask {
        target,
        query,
        attachment,
        output,
        wait: !args.no_wait,
        stderr_is_terminal: io::stderr().is_terminal(),
    };
    Ok(turn::ask(&settings, &store, &ask)?.exit_code)
}

/// The question from the arguments, or from stdin; with both, stdin is an attachment.
fn question(words: &[String]) -> Result<(String, Option<String>)> {
    let stdin = io::stdin();
    let piped = !stdin.is_terminal();
    let query = words.join(" ");
    if !query.trim().is_empty() {
        let attachment = if piped { read_text(stdin, "stdin")? } else { None };
        return Ok((query, attachment.filter(|a| !a.is_empty())));
    }
    if !query.is_empty() {
        return Err(Failure::usage("the question is empty").into());
    }
    if !piped {
        return Err(Failure::usage("no question")
            .hint("give it as arguments (`cca search \"what is ...\"`) or on stdin (`echo ... | cca search`)")
            .into());
    }
    match read_text(stdin, "stdin")? {
        Some(text) if !text.trim().is_empty() => Ok((text, None)),
        _ => Err(Failure::usage("no question: stdin was empty")
            .hint("give the question as arguments: `cca search \"what is ...\"`")
            .into()),
    }
}

/// Reads text input whole; refuses what is not text (invalid UTF-8, NUL bytes).
fn read_text(mut from: impl Read, what: &str) -> Result<Option<String>> {
    let mut bytes = Vec::new();
    from.read_to_end(&mut bytes).with_context(|| format!("cannot read {what}"))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(Failure::usage(format!(
            "{what} holds a NUL byte (at byte {at}): cca takes text only"
        ))
        .hint("for binary data, attach a text form of it (`xxd file | cca search ...`)")
        .into());
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        Failure::usage(format!(
            "{what} is not UTF-8 text (invalid byte at {})",
            e.utf8_error().valid_up_to()
        ))
        .hint("convert it first, for example with `iconv -f latin1 -t utf-8`")
        .into()
    })
}
