//! Runs each command: gathers input, resolves settings, and hands off to `turn` or `store`.

use std::io::{self, IsTerminal, Read, Write};

use anyhow::{Context, Result};

use clap::CommandFactory;

use crate::cli::{AskArgs, Cli, Command, CompletionShell};
use crate::config::{self, Env, Flags, Settings};
use crate::error::{Failure, exit};
use crate::store::Store;
use crate::turn::{self, Ask, OutputMode, Target};

pub fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Search(args) => {
            let target = match (&args.ask.session, args.resume) {
                (Some(id), _) => Target::Session(id.clone()),
                (None, true) => Target::Resume,
                (None, false) => Target::New,
            };
            search(&args.ask, target)
        }
        Command::Comma(ask) => {
            let target = ask.session.clone().map_or(Target::Resume, Target::Session);
            search(&ask, target)
        }
        Command::Init { shell } => {
            print(crate::shell::init(shell))?;
            Ok(exit::OK)
        }
        Command::Completions { shell } => {
            print(&completions(shell)?)?;
            Ok(exit::OK)
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut page)
                .context("cannot render the man page")?;
            print(&String::from_utf8_lossy(&page))?;
            Ok(exit::OK)
        }
    }
}

/// The shell code that registers completions; the shell then asks `cca` for candidates.
pub fn completions(shell: CompletionShell) -> Result<String> {
    let shells = clap_complete::env::Shells::builtins();
    let completer = shells.completer(shell.name()).context("a built-in shell")?;
    let mut out = Vec::new();
    completer
        .write_registration(crate::cli::COMPLETE_VAR, "cca", "cca", "cca", &mut out)
        .context("cannot write completions")?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Resolves settings for a command, given its flags.
pub fn settings(flags: &Flags) -> Result<(Settings, Store)> {
    let env = Env::from_process();
    let home = config::home(&env)?;
    let store = Store::new(home.value.clone());
    let file = store.read_config()?;
    let settings = config::resolve(&env, flags, home, file.as_deref())?;
    Ok((settings, store))
}

fn flags(ask: &AskArgs) -> Flags {
    Flags {
        engine: ask.engine.clone(),
        model: ask.model.clone(),
        prompt: ask.prompt.clone(),
        prompt_file: ask.prompt_file.clone(),
        session: None,
    }
}

fn search(args: &AskArgs, target: Target) -> Result<u8> {
    let (settings, store) = settings(&flags(args))?;
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

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn print(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e).context("cannot write to stdout"),
        _ => Ok(()),
    }
}
