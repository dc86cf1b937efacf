//! `cca search` (and `cca ,`, which continues the followed session): the question from
//! arguments and stdin, then one turn.

use std::io::{self, IsTerminal};

use anyhow::Result;

use crate::cli::{AskArgs, SearchArgs};
use crate::config::{Flags, Render};
use crate::error::Failure;
use crate::front::content::{file, read_text};
use crate::front::signals;
use crate::front::terminal::{Mode, Terminal};
use crate::run::Cancel;
use crate::session;
use crate::turn::{self, Ask, Attachment, Target};

/// `cca search`
pub(crate) fn run(args: &SearchArgs) -> Result<u8> {
    let target = match (&args.ask.session, args.resume) {
        (Some(id), _) => Target::Session(id.clone()),
        (None, true) => Target::Resume,
        (None, false) => Target::New,
    };
    search(&args.ask, target)
}

/// One turn in `target`, answered on the terminal (or in JSON): `cca search` and `cca ,`.
pub(crate) fn search(args: &AskArgs, target: Target) -> Result<u8> {
    match ask(args, target) {
        // `--json` answers in JSON, whatever stopped the turn.
        Err(e) if args.json => Ok(crate::front::terminal::json_error(&e)),
        done => done,
    }
}

fn ask(args: &AskArgs, target: Target) -> Result<u8> {
    let render = args.raw.then_some(Render::Never);
    let flags = Flags { render, ..super::flags(&args.answering) };
    let (settings, store) = session::settings(&flags)?;
    let cap = settings.input_cap();
    note_options_in_question("search", &args.query);
    let (query, stdin) = question(&args.query, cap)?;
    let mut attachments: Vec<Attachment> =
        stdin.map(|text| Attachment::text("stdin", text)).into_iter().collect();
    for path in &args.files {
        attachments.push(file(path, cap)?);
    }
    let mode = if args.json {
        Mode::Json
    } else if args.quiet {
        Mode::Quiet
    } else {
        Mode::Normal
    };
    let ask = Ask { target, query, attachments, wait: !args.no_wait };
    let mut terminal = Terminal::new(mode, &settings);
    let cancel = Cancel::new();
    let _signals = signals::route_to(&cancel)?;
    match turn::ask(&settings, &store, &ask, &mut terminal, &cancel) {
        Ok(outcome) => terminal.finish(&outcome),
        Err(e) => terminal.not_recorded(e, &ask.query),
    }
}

/// Says so when words of the question are options of `command` (`cca search what is this
/// --json`): from its first word on, every word is the question's, and the turn goes ahead
/// with them, as `, what does --json mean` wants.
pub(crate) fn note_options_in_question(command: &str, words: &[String]) {
    let options = crate::cli::options_among(command, words);
    if let Some(first) = options.first() {
        crate::front::terminal::say(&format!(
            "cca: note: `{}` {} part of the question: options go before its first word \
             (`cca {command} {first} ...`)",
            options.join(" "),
            if options.len() == 1 { "is" } else { "are" },
        ));
    }
}

/// The question from the arguments, or from stdin; with both, stdin is an attachment.
fn question(words: &[String], cap: u64) -> Result<(String, Option<String>)> {
    let stdin = io::stdin();
    let piped = !stdin.is_terminal();
    let query = words.join(" ");
    if !query.trim().is_empty() {
        let attachment = if piped { read_text(stdin, "stdin", cap)? } else { None };
        return Ok((query, attachment.filter(|a| !a.is_empty())));
    }
    if !words.is_empty() {
        return Err(Failure::usage("the question is empty")
            .hint("give it as arguments (`cca search \"what is ...\"`) or on stdin (`echo ... | cca search`)")
            .into());
    }
    if !piped {
        return Err(Failure::usage("no question")
            .hint("give it as arguments (`cca search \"what is ...\"`) or on stdin (`echo ... | cca search`)")
            .into());
    }
    match read_text(stdin, "stdin", cap)? {
        Some(text) if !text.trim().is_empty() => Ok((text, None)),
        Some(text) if !text.is_empty() => {
            Err(Failure::usage("no question: stdin held only spaces and line ends")
                .hint("give the question as arguments: `cca search \"what is ...\"`")
                .into())
        }
        _ => Err(Failure::usage("no question: stdin was empty")
            .hint("give the question as arguments: `cca search \"what is ...\"`")
            .into()),
    }
}
