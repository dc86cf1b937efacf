//! Values the shell completes: session ids and names, prompt names, engine names; and nothing
//! within a question. Called only while answering a completion request, so errors mean "no
//! candidates", never a message.

use crate::config::{Flags, Settings};
use crate::session;
use crate::store::Store;

fn store() -> Option<(Settings, Store)> {
    session::settings(&Flags::default()).ok()
}

/// Session names, then ids newest first: both work wherever a session is asked for.
pub(crate) fn session_ids() -> Vec<String> {
    let Some((_, store)) = store() else { return Vec::new() };
    let mut ids = store.session_ids().unwrap_or_default();
    ids.sort_by(|a, b| b.cmp(a));
    let mut names: Vec<String> =
        store.listing().unwrap_or_default().into_iter().filter_map(|l| l.name).collect();
    names.sort();
    names.extend(ids);
    names
}

/// The ids of the sessions in the trash, newest first, for `cca restore`.
pub(crate) fn trash_ids() -> Vec<String> {
    let Some((_, store)) = store() else { return Vec::new() };
    let mut ids = store.trash_ids();
    ids.reverse();
    ids
}

/// Built-in prompt names and the user's own under `$CCA_HOME/prompts`.
pub(crate) fn prompt_names() -> Vec<String> {
    let own = store().map(|(_, store)| store.prompt_names().unwrap_or_default());
    let mut names = crate::prompt::choices(own.unwrap_or_default());
    names.sort();
    names.dedup();
    names
}

/// claude, gemini, and the engines declared in config.toml.
pub(crate) fn engine_names() -> Vec<String> {
    match store() {
        Some((settings, _)) => settings.engines.into_keys().collect(),
        None => crate::engine::BUILTIN.iter().map(|spec| spec.name.to_string()).collect(),
    }
}

/// Whether the word the shell asks to complete (a completion request to `cli`, the command
/// line as clap knows it) is within a question: once one has begun (`cca search what`), every
/// word after it is the question's, so nothing is offered there (clap would offer the command's
/// options, which would be asked as words).
pub(crate) fn within_a_question(cli: &clap::Command) -> bool {
    // The words completed follow `--` (the program's name first). bash and zsh say which one
    // the cursor is on; for fish and PowerShell it is the last.
    let words: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .skip_while(|a| a != "--")
        .skip(2)
        .collect();
    let at = std::env::var("_CLAP_COMPLETE_INDEX").ok().and_then(|i| i.parse::<usize>().ok());
    let before = &words[..at.unwrap_or(words.len()).saturating_sub(1).min(words.len())];
    question_begun(cli, before).is_some()
}

/// The command whose question has begun within `words` (the command's name first, then its
/// options and their values), among those whose last argument takes every word from its first
/// on (`trailing_var_arg`: `search`, `,`, `steer`).
fn question_begun(cli: &clap::Command, words: &[String]) -> Option<String> {
    let (name, rest) = words.split_first()?;
    let command = cli.find_subcommand(name)?;
    if !command.get_arguments().any(|a| a.is_trailing_var_arg_set()) {
        return None;
    }
    read_options(command, rest).question_at.map(|_| command.get_name().to_string())
}

/// A command's arguments read as far as its options go.
pub(crate) struct Options {
    /// Where the question begins (past the end when a `--` ends them), if it has.
    pub question_at: Option<usize>,
    /// Whether every option before it is one of the command's, with a value where it takes one.
    pub all_known: bool,
}

/// Reads `args` as `command` (one whose last argument takes every word from its first on)
/// reads them: options and their values (`-e gemini`, `-egemini`, `-qe gemini`,
/// `--engine=gemini`), then the question, or a `--` and then the question.
pub(crate) fn read_options(command: &clap::Command, args: &[String]) -> Options {
    let find = |found: &dyn Fn(&clap::Arg) -> bool| {
        command.get_arguments().find(|a| found(a)).map(|a| a.get_action().takes_values())
    };
    let mut all_known = true;
    let mut value_next = false;
    for (i, word) in args.iter().enumerate() {
        if std::mem::take(&mut value_next) {
            continue;
        }
        if word == "--" {
            return Options { question_at: Some(i + 1), all_known };
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            let takes = find(&|a| a.get_long() == Some(name));
            all_known &= takes.is_some_and(|takes| takes || !value) || name == "help";
            value_next = takes == Some(true) && !value;
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            // The first that takes a value takes the rest of the word, or the next word when
            // it ends there.
            let chars: Vec<char> = shorts.chars().collect();
            for (at, &c) in chars.iter().enumerate() {
                match find(&|a| a.get_short() == Some(c)) {
                    Some(true) => {
                        value_next = at + 1 == chars.len();
                        break;
                    }
                    Some(false) => {}
                    None if c == 'h' => {}
                    None => all_known = false,
                }
            }
        } else {
            return Options { question_at: Some(i), all_known };
        }
    }
    Options { question_at: None, all_known }
}
