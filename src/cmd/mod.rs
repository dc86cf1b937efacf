//! Runs each command: one file per command (`cca show` is `show.rs`), each a `run` over the
//! command's arguments as `crate::cli` declares them; this one dispatches. A command gathers
//! its input, resolves settings, and hands off to `turn`, `session` or `store`.

mod acp;
mod chat;
mod clear;
mod comma;
mod compact;
mod completions;
mod config;
mod doctor;
pub(crate) mod engine;
mod export;
mod fork;
mod grep;
mod import;
mod init;
mod man;
mod mcp;
mod name;
mod path;
mod recall;
mod restore;
mod rm;
mod search;
mod sessions;
mod show;
mod standby;
mod steer;
mod sync;

use anyhow::Result;

use crate::cli::{Cli, Command};
use crate::config::Flags;
pub(crate) use crate::front::terminal::{print_stdout as print, print_with};

pub(crate) fn run(cli: Cli) -> Result<u8> {
    // A listing asked for in JSON says its failure in JSON too, as `cca search --json` and a
    // command line clap refuses do: a script reading stdout always gets JSON.
    let listed_in_json = match &cli.command {
        Command::Sessions(args) => args.json,
        Command::Grep(args) => args.json,
        Command::Recall(args) => args.json,
        _ => false,
    };
    match command(&cli) {
        Err(e) if listed_in_json => Ok(crate::front::terminal::json_error(&e)),
        done => done,
    }
}

fn command(cli: &Cli) -> Result<u8> {
    match &cli.command {
        Command::Search(args) => search::run(args),
        Command::Comma(args) => comma::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Steer(args) => steer::run(args),
        Command::Acp(args) => acp::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::StandbyServe(_) => engine::standby().map(|()| crate::error::exit::OK),
        Command::Sessions(args) => sessions::run(args),
        Command::Grep(args) => grep::run(args),
        Command::Name(args) => name::run(args),
        Command::Recall(args) => recall::run(args),
        Command::Show(args) => show::run(args),
        Command::Path(args) => path::run(args),
        Command::Fork(args) => fork::run(args),
        Command::Clear(args) => clear::run(args),
        Command::Compact(args) => compact::run(args),
        Command::Rm(args) => rm::run(args),
        Command::Restore(args) => restore::run(args),
        Command::Import(args) => import::run(args),
        Command::Export(args) => export::run(args),
        Command::Sync(args) => sync::run(args),
        Command::Init(args) => init::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Config(args) => config::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Standby(args) => standby::run(args),
        Command::Man(args) => man::run(args),
    }
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
        ..Flags::default()
    }
}
