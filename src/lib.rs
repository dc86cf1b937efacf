//! cca: durable, readable, resumable conversations with LLM command-line engines.
//!
//! The flow of a turn, and the module that owns each step (DESIGN.md):
//! args (`cli`) -> settings (`config`) -> system prompt (`prompt`) -> session file and lock
//! (`store`) -> transcript and live context (`transcript`) -> framing (`frame`) -> argv, env and
//! output decoding (`engine`) -> spawn, stream, signals (`run`) -> append (`store`).
//! `turn` ties one turn together; `app` runs each command.

pub mod call;
pub mod cli;
pub mod cmd;
pub mod compact;
pub mod complete;
pub mod config;
pub mod engine;
pub mod error;
pub mod frame;
pub mod grep;
pub mod prompt;
pub mod run;
pub mod shell;
pub mod store;
pub mod transcript;
pub mod turn;

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the command, and turns the result into an exit code.
pub fn main() -> ExitCode {
    // A completion request from the shell (see `cca completions`) is answered and exits here.
    clap_complete::CompleteEnv::with_factory(<cli::Cli as clap::CommandFactory>::command)
        .var(cli::COMPLETE_VAR)
        .completer("cca")
        .complete();
    // A file-size limit (ulimit -f) must make a write fail with EFBIG, reported like a full
    // disk, instead of killing cca in the middle of an append.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let cli = cli::Cli::parse();
    match cmd::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => ExitCode::from(error::report(&err)),
    }
}
