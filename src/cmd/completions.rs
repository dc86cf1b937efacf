//! `cca completions`: the shell code that registers completions; the shell then asks `cca`
//! for candidates (`crate::complete`).

use anyhow::{Context, Result};

use super::print;
use crate::cli::{CompletionShell, CompletionsArgs};
use crate::error::exit;

/// `cca completions SHELL`
pub(crate) fn run(args: &CompletionsArgs) -> Result<u8> {
    print(&completions(args.shell)?)?;
    Ok(exit::OK)
}

/// The shell code that registers completions; the shell then asks `cca` for candidates.
fn completions(shell: CompletionShell) -> Result<String> {
    let shells = clap_complete::env::Shells::builtins();
    let completer = shells.completer(shell.name()).context("a built-in shell")?;
    let mut out = Vec::new();
    completer
        .write_registration(crate::cli::COMPLETE_VAR, "cca", "cca", "cca", &mut out)
        .context("cannot write completions")?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
