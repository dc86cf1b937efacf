//! The command line, as clap definitions and nothing else: no I/O here.
//!
//! Doc comments are the help: the first line is `-h`, the rest is `--help`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

/// The variable that makes `cca` answer a completion request instead of running.
pub const COMPLETE_VAR: &str = "CCA_COMPLETE";

// Completion candidates are looked up when the shell asks, through `crate::complete`.
fn session_candidates() -> ArgValueCandidates {
    ArgValueCandidates::new(|| candidates(crate::complete::session_ids()))
}

fn prompt_candidates() -> ArgValueCandidates {
    ArgValueCandidates::new(|| candidates(crate::complete::prompt_names()))
}

fn engine_candidates() -> ArgValueCandidates {
    ArgValueCandidates::new(|| candidates(crate::complete::engine_names()))
}

fn candidates(values: Vec<String>) -> Vec<CompletionCandidate> {
    values.into_iter().map(CompletionCandidate::new).collect()
}

const SEARCH_EXAMPLES: &str = "\
Examples:
  cca search \"what changed in rust 1.89 file locking?\"
  cca search --resume \"and on windows?\"       # or: , and on windows?
  git diff | cca search \"review this\"          # stdin is attached as context
  echo \"a question from a script\" | cca search
  answer=$(cca search -q \"one word: capital of France?\")
  cca search --engine gemini --model gemini-2.5-pro \"...\"
  cca search --session 20261121-101500 \"back to that one\"";

#[derive(Debug, Parser)]
#[command(
    name = "cca",
    version,
    about = "Resumable LLM conversations in your terminal, kept as markdown transcripts",
    long_about = "Resumable LLM conversations in your terminal, kept as markdown transcripts.\n\n\
        cca sends your question, with a system prompt and the conversation so far, to an engine \
        (claude, gemini, or any program that reads stdin and writes stdout), streams the answer, \
        and keeps the exchange in a markdown file under $CCA_HOME/sessions (default ~/.cca). \
        Continue a conversation with `cca search --resume`, or `,` after `eval \"$(cca init bash)\"`.",
    after_help = "Start with: cca search \"your question\"",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

const STEER_EXAMPLES: &str = "\
Examples:
  cca search \"review the auth module\"      # in one terminal, while it answers:
  cca steer \"focus on JWT validation\"      # in another
  echo \"skip the tests\" | cca steer --session 20261121-101500";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ask a question: starts a new session, or continues one with --resume
    #[command(after_long_help = SEARCH_EXAMPLES)]
    Search(SearchArgs),

    /// Continue the latest session: the same as `cca search --resume`
    #[command(name = ",")]
    Comma(AskArgs),

    /// Talk in a loop: each message is a turn, saved as it completes
    ///
    /// Starts a new session, or continues one with --resume or --session. A line ending in `\`
    /// continues on the next line, as does everything between two `"""` lines; Alt-Enter
    /// inserts a newline. Ctrl-C stops an answer (kept as interrupted) and returns to the
    /// prompt; Ctrl-D leaves. Commands: /clear, /fork [N], /session [ID], /help, /quit.
    Chat(ChatArgs),

    /// Steer the answer being written: send a message to the turn running in a session
    ///
    /// The message goes to the cca answering in the session (default: the one `,` continues,
    /// $CCA_SESSION, else latest), from any terminal. claude takes it while it works: after its
    /// next tool call, or right after the current answer; other engines answer it as the next
    /// turn, asked at once by the running cca. The transcript records it where the engine saw
    /// it. Exits 0 once the running cca has the message, 1 when no turn runs in the session.
    #[command(after_long_help = STEER_EXAMPLES)]
    Steer {
        /// The session: an id, or any unique start of one [default: $CCA_SESSION, else latest]
        #[arg(short, long, value_name = "ID", add = session_candidates())]
        session: Option<String>,
        /// The message; read from stdin when not given
        #[arg(value_name = "MESSAGE")]
        message: Vec<String>,
    },

    /// List sessions, newest first: id, last activity, turns, engine, title
    ///
    /// `*` marks the session `--resume` and `,` continue. Fast with thousands of sessions: the
    /// details are cached in $CCA_HOME/index.json and re-read only from changed files.
    Sessions {
        /// Print a JSON array for scripts
        #[arg(long)]
        json: bool,
        /// Show at most N sessions
        #[arg(short = 'n', long, value_name = "N")]
        limit: Option<usize>,
    },

    /// Show a session's conversation (through $PAGER on a terminal)
    ///
    /// Without an id, the session `--resume` would continue ($CCA_SESSION, else latest).
    Show {
        /// The session: an id, or any unique start of one [default: $CCA_SESSION, else latest]
        #[arg(value_name = "ID", add = session_candidates())]
        id: Option<String>,
        /// Print the file as it is
        #[arg(long)]
        raw: bool,
    },

    /// Print a session's file path, for `$EDITOR "$(cca path)"`
    ///
    /// Hand edits are honoured: the next turn sends the edited history.
    Path {
        /// The session: an id, or any unique start of one [default: $CCA_SESSION, else latest]
        #[arg(value_name = "ID", add = session_candidates())]
        id: Option<String>,
    },

    /// Start a new session from the first N exchanges of another; it becomes latest
    ///
    /// The new session records where it came from (`forked_from`); both continue independently.
    Fork {
        /// The session: an id, or any unique start of one [default: $CCA_SESSION, else latest]
        #[arg(value_name = "ID", add = session_candidates())]
        id: Option<String>,
        /// Keep the first N exchanges [default: all]
        #[arg(long, value_name = "N")]
        at: Option<u64>,
    },

    /// Clear a session's context: the next turn sends nothing from before
    ///
    /// The file keeps everything; `cca show` marks where the clear happened.
    Clear {
        /// The session: an id, or any unique start of one [default: $CCA_SESSION, else latest]
        #[arg(value_name = "ID", add = session_candidates())]
        id: Option<String>,
    },

    /// Summarise a session's older turns now, keeping the most recent ones verbatim
    ///
    /// The session's engine writes the summary (with the `compaction` prompt); it is recorded
    /// in the transcript and sent in place of those turns from then on. The file keeps every
    /// turn. cca also does this on its own before a turn that would pass a share of the
    /// engine's context budget ([compaction] in config.toml; --no-compact to skip).
    Compact {
        /// The session: an id, or any unique start of one [default: $CCA_SESSION, else latest]
        #[arg(value_name = "ID", add = session_candidates())]
        id: Option<String>,
        /// Keep this many recent exchanges verbatim [default: keep_recent from config, 4]
        #[arg(long, value_name = "N")]
        keep: Option<u64>,
        /// Ask the engine not to retry a failing API
        #[arg(long)]
        fail_fast: bool,
    },

    /// Move sessions to the trash ($CCA_HOME/trash), or delete them with --purge
    Rm {
        /// The sessions: ids, or unique starts of them
        #[arg(value_name = "ID", required = true, add = session_candidates())]
        ids: Vec<String>,
        /// Delete for good instead of moving to the trash
        #[arg(long)]
        purge: bool,
    },

    /// Bring sessions back from the trash; with no id, list what the trash holds
    Restore {
        /// The sessions to bring back (full ids, as `cca restore` lists them)
        #[arg(value_name = "ID")]
        ids: Vec<String>,
    },

    /// Print shell code that defines the `,` shortcut
    ///
    /// Add to your shell's startup file:
    ///   bash: eval "$(cca init bash)"
    ///   zsh:  eval "$(cca init zsh)"
    ///   fish: cca init fish | source
    ///
    /// Then `, and on windows?` continues the latest session.
    Init {
        /// The shell to print code for
        #[arg(value_enum)]
        shell: InitShell,
    },

    /// Print shell completions (session ids and prompt names complete too)
    ///
    /// Load them at shell start-up:
    ///   bash: source <(cca completions bash)
    ///   zsh:  source <(cca completions zsh)
    ///   fish: cca completions fish | source
    ///
    /// `make install` puts them where bash-completion, zsh and fish find them.
    Completions {
        /// The shell to print completions for
        #[arg(value_enum)]
        shell: CompletionShell,
    },

    /// Print the effective settings and where each came from
    ///
    /// Sources, lowest to highest: default, config file ($CCA_HOME/config.toml), environment
    /// (CCA_*), flag.
    ///
    /// Config file keys: engine, model, prompt, and per engine in [engines.NAME]: program,
    /// command, args, model, model_arg, system_prompt ("inline" or "native"),
    /// system_prompt_arg, history ("inline" or "structured"), tools, max_input_bytes, retries,
    /// policy, context_budget (tokens), model_budgets ({ "model" = tokens }), bytes_per_token.
    /// Under [compaction]: enabled, threshold (a share of the budget, 0.75), keep_recent (4),
    /// warn_tokens (30000).
    ///
    /// Environment: CCA_HOME, CCA_ENGINE, CCA_MODEL, CCA_PROMPT, CCA_SESSION, CCA_CLAUDE,
    /// CCA_GEMINI, CCA_NOW (a fixed clock, for tests), CCA_GRACE_MS (for tests), CCA_COMPLETE (used by completions),
    /// GEMINI_CLI_HOME (where gemini keeps its files), and the standard NO_COLOR, TERM, PAGER,
    /// PATH, HOME.
    Config,

    /// Check the setup: engines found (path, version), the default, and CCA_HOME's state
    ///
    /// Says what to do about each problem. Exits 1 when no engine is usable.
    Doctor,

    /// Print the man page (roff)
    ///
    /// Read it with `cca man | man -l -`; `make install` installs it as cca(1).
    Man,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

impl CompletionShell {
    pub fn name(self) -> &'static str {
        match self {
            CompletionShell::Bash => "bash",
            CompletionShell::Zsh => "zsh",
            CompletionShell::Fish => "fish",
            CompletionShell::Elvish => "elvish",
            CompletionShell::Powershell => "powershell",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Continue the latest session (or $CCA_SESSION) instead of starting a new one
    #[arg(short, long)]
    pub resume: bool,

    /// Continue this session: an id, or any unique start of one
    #[arg(short, long, value_name = "ID", add = session_candidates())]
    pub session: Option<String>,

    #[command(flatten)]
    pub answering: AnswerArgs,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Continue the latest session (or $CCA_SESSION) instead of starting a new one
    #[arg(short, long)]
    pub resume: bool,

    #[command(flatten)]
    pub ask: AskArgs,
}

/// What every command that asks a question takes.
#[derive(Debug, Args, Clone, Default)]
pub struct AskArgs {
    /// The question; several words are joined with spaces
    ///
    /// Without a question, it is read from stdin. With both, stdin is attached as context
    /// (a diff, a log, a file) in its own tag, and kept in the transcript.
    #[arg(value_name = "QUESTION")]
    pub query: Vec<String>,

    /// Continue this session: an id, or any unique start of one [env: CCA_SESSION]
    #[arg(short, long, value_name = "ID", add = session_candidates())]
    pub session: Option<String>,

    #[command(flatten)]
    pub answering: AnswerArgs,

    /// Print the answer only: no spinner, no notices; the engine's stderr only if it fails
    #[arg(short, long, conflicts_with = "json")]
    pub quiet: bool,

    /// Print one JSON object when done (session, turn, answer, tools, engine, model, duration, usage)
    #[arg(long)]
    pub json: bool,

    /// Fail at once (exit 75) if another cca is answering in this session, instead of waiting
    #[arg(long)]
    pub no_wait: bool,
}

/// How a turn is answered: the options `search`, `,` and `chat` share.
#[derive(Debug, Args, Clone, Default)]
pub struct AnswerArgs {
    /// Engine: claude, gemini, or a name declared in config.toml [default: the first of claude
    /// and gemini on PATH; a session keeps its own] [env: CCA_ENGINE]
    #[arg(short, long, value_name = "NAME", add = engine_candidates())]
    pub engine: Option<String>,

    /// Model, passed to the engine as is [env: CCA_MODEL]
    #[arg(short, long, value_name = "MODEL")]
    pub model: Option<String>,

    /// System prompt: a built-in name, or NAME.md under $CCA_HOME/prompts
    /// [default: search_agents/haiku45; a session keeps its own] [env: CCA_PROMPT]
    #[arg(short, long, value_name = "NAME", add = prompt_candidates())]
    pub prompt: Option<String>,

    /// System prompt from a file
    #[arg(long, value_name = "PATH", conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,

    /// Ask claude and gemini not to retry a failing API (they retry for minutes by default);
    /// `retries = 0` in config.toml does the same for good
    #[arg(long)]
    pub fail_fast: bool,

    /// Do not summarise older turns first, even when the context has grown past the threshold
    /// (`enabled = false` under [compaction] in config.toml does it for good)
    #[arg(long)]
    pub no_compact: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }
}
