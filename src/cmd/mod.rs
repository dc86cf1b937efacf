//! Runs each command: gathers input, resolves settings, and hands off to `turn` or `store`.
//! One file per group of commands; this one dispatches.

// The commands talk to the user directly.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod ask;
mod chat;
mod doctor;
mod sessions;
mod show_settings;
mod steer;

use anyhow::{Context, Result};

use clap::CommandFactory;

use crate::cli::{Cli, Command, CompletionShell};
use crate::config::Flags;
use crate::error::exit;
pub(crate) use crate::front::terminal::print_stdout as print;
use crate::turn::Target;

pub fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Search(args) => {
            let target = match (&args.ask.session, args.resume) {
                (Some(id), _) => Target::Session(id.clone()),
                (None, true) => Target::Resume,
                (None, false) => Target::New,
            };
            ask::search(&args.ask, target)
        }
        Command::Comma(ask) => {
            let target = ask.session.clone().map_or(Target::Resume, Target::Session);
            ask::search(&ask, target)
        }
        Command::Init { shell } => {
            print(crate::shell::init(shell))?;
            Ok(exit::OK)
        }
        Command::Completions { shell } => {
            print(&completions(shell)?)?;
            Ok(exit::OK)
        }
        Command::Doctor => doctor::run(),
        Command::Config => show_settings::run(),
        Command::Chat(args) => chat::run(&args),
        Command::Steer { session, message } => steer::run(session.as_deref(), &message),
        Command::Sessions { json, limit } => sessions::list(json, limit),
        Command::Show { id, raw } => sessions::show(id.as_deref(), raw),
        Command::Path { id } => sessions::path(id.as_deref()),
        Command::Fork { id, at } => sessions::fork(id.as_deref(), at),
        Command::Clear { id } => sessions::clear(id.as_deref()),
        Command::Compact { id, keep, fail_fast } => {
            sessions::compact(id.as_deref(), keep, fail_fast)
        }
        Command::Rm { ids, purge } => sessions::remove(&ids, purge),
        Command::Restore { ids } => sessions::restore(&ids),
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

/// The settings a turn's options choose.
fn flags(a: &crate::cli::AnswerArgs) -> Flags {
    Flags {
        engine: a.engine.clone(),
        model: a.model.clone(),
        prompt: a.prompt.clone(),
        prompt_file: a.prompt_file.clone(),
        fail_fast: a.fail_fast,
        no_compact: a.no_compact,
    }
}
