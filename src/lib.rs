//! cca: durable, readable, resumable conversations with LLM command-line engines.
//!
//! The flow of a turn, and the module that owns each step (docs/DESIGN.md):
//! args (`cli`) -> settings (`config`) -> system prompt (`prompt`) -> session file and lock
//! (`store`) -> transcript and live context (`transcript`) -> framing (`frame`) -> argv, env and
//! output decoding (`engine`) -> spawn, stream, signals (`run`) -> the answer's record (`answer`)
//! -> append (`store`).
//! `turn` ties one turn together as a library call; the front ends (`front`, and `cmd`, which
//! runs each command) are the only code that prints.

// No unsafe code, but for the guard that keeps engines from outliving cca (src/run/guard.rs),
// with its reasons.
#![deny(unsafe_code)]
// What only the crate uses is not public: the library's outside is its tests, benchmarks and
// fuzz targets (and what only they call sits behind the `testing` feature, see Cargo.toml).
#![warn(unreachable_pub)]
// No print macros anywhere: they panic when stdout or stderr is closed or full. The front ends
// write through `front::terminal` (`say`, `print_stdout`), which handle those errors.
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub(crate) mod answer;
pub(crate) mod call;
pub mod cli;
pub(crate) mod cmd;
pub(crate) mod compact;
pub(crate) mod complete;
pub mod config;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod fence;
pub mod frame;
pub mod front;
pub(crate) mod grep;
pub(crate) mod human;
pub(crate) mod import;
/// The import parsers' checks, for the fuzz targets.
#[cfg(any(test, feature = "testing"))]
pub use import::check_import;
pub(crate) mod manpage;
pub(crate) mod media;
pub mod prompt;
pub(crate) mod recall;
/// The synonyms recall adds to a question, for the bench's rankings to use the same list.
#[cfg(any(test, feature = "testing"))]
pub const SYNONYMS: &[&[&str]] = recall::SYNONYMS;
pub mod render;
pub(crate) mod run;
pub(crate) mod session;
pub(crate) mod shell;
pub(crate) mod steer;
pub(crate) mod store;
pub(crate) mod sync;
pub mod transcript;
pub(crate) mod turn;
pub mod vars;
pub(crate) mod warm;

use std::process::ExitCode;

use clap::Parser as _;

/// Parses the command line, runs the command, and turns the result into an exit code.
pub fn main() -> ExitCode {
    // A completion request from the shell (see `cca completions`) is answered and exits here.
    if std::env::var_os(cli::COMPLETE_VAR).is_some()
        && complete::within_a_question(&<cli::Cli as clap::CommandFactory>::command())
    {
        return ExitCode::SUCCESS;
    }
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
    // `cca __standby` and a sync after a turn are started from cca's own binary.
    if let Ok(exe) = std::env::current_exe() {
        run::set_own_program(exe);
    }
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let args: Vec<String> =
                std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
            return ExitCode::from(front::terminal::argument_error(&e, &args));
        }
    };
    let code = match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => front::terminal::report(&err),
    };
    if code == error::exit::CTRL_C {
        // The shell convention: a program that cleaned up after Ctrl-C dies by SIGINT itself,
        // so that a shell loop around it stops too (the shell still reports 130). Everything
        // is recorded and flushed by now.
        let _ = signal_hook::low_level::emulate_default_handler(signal_hook::consts::SIGINT);
    }
    ExitCode::from(code)
}
