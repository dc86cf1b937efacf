//! The command line, as clap definitions and nothing else: no I/O here.
//!
//! Doc comments are the help: the first line is `-h`, the rest is `--help`.

// The doc comments are help text written for a terminal (`[N]`, `<folder>`), not rustdoc.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

/// The variable that makes `cca` answer a completion request instead of running.
pub const COMPLETE_VAR: &str = "CCA_COMPLETE";

// Completion candidates are looked up when the shell asks, through `crate::complete`.
fn session_candidates() -> ArgValueCandidates {
    ArgValueCandidates::new(|| candidates(crate::complete::session_ids()))
}

fn trash_candidates() -> ArgValueCandidates {
    ArgValueCandidates::new(|| candidates(crate::complete::trash_ids()))
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
        (claude, gemini, codex, or any program that reads stdin and writes stdout), streams the \
        answer, and keeps the exchange in a markdown file under $CCA_HOME/sessions (default ~/.cca). \
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

    /// Continue the session this terminal follows: latest, or $CCA_SESSION (`cca search -r`)
    #[command(name = ",")]
    Comma(AskArgs),

    /// Talk in a loop: each message is a turn, saved as it completes
    ///
    /// Starts a new session, or continues one with --resume or --session. A line ending in `\`
    /// continues on the next line, as does everything between two `"""` lines; Alt-Enter
    /// inserts a newline. Ctrl-C stops an answer (kept as interrupted) and returns to the
    /// prompt; Ctrl-D leaves. Commands: /clear, /compact [N], /fork [N], /session [ID], /help,
    /// /quit; any other /word is refused, and // sends a message that starts with /.
    Chat(ChatArgs),

    /// Steer the answer being written: send a message to the turn running in a session
    ///
    /// The message goes to the cca answering in the session (default: the one `,` continues,
    /// $CCA_SESSION, else latest), from any terminal. claude takes it while it works: after its
    /// next tool call, or right after the current answer; other engines answer it as the next
    /// turn, asked at once by the running cca. The transcript records it where the engine saw
    /// it. Exits 0 once the running cca has the message, 1 when no turn runs in the session.
    #[command(after_long_help = STEER_EXAMPLES)]
    Steer(SteerArgs),

    /// Serve editors over the Agent Client Protocol (ACP) on stdin and stdout
    ///
    /// For Zed, JetBrains, Neovim and any client that speaks ACP (see "Editors" in the
    /// README): each ACP session is a cca session, the same file `,` and `cca show` use. The
    /// options choose the engine, model and prompt as they do for `cca search`; an editor can
    /// change them per session. stdout carries protocol messages only; diagnostics
    /// and the engines' stderr go to stderr. Exits 0 when the client closes stdin, after the
    /// turns still running are stopped and recorded as interrupted.
    Acp(AnswerArgs),

    /// Serve agents every kept conversation over the Model Context Protocol (MCP)
    ///
    /// For Claude Code (`claude mcp add cca -- cca mcp`), gemini-cli, codex and any MCP client
    /// (see "Memory for agents" in the README): tools to search what was said in every
    /// session, read a session or some of its exchanges, and list recent sessions. Read-only:
    /// nothing an agent does through it changes a transcript. stdout carries protocol messages
    /// only. Exits 0 when the client closes stdin.
    Mcp(McpArgs),
    /// Keeps an engine on standby for the next one-shot turn (internal: cca starts it so)
    #[command(name = "__standby", hide = true)]
    StandbyServe(StandbyServeArgs),

    /// List sessions, newest first: id, last activity, turns, engine, name and title
    ///
    /// `*` marks the session `--resume` and `,` continue. Fast with thousands of sessions: the
    /// details are cached in $CCA_HOME/index.json and re-read only from changed files.
    Sessions(SessionsArgs),

    /// Search what was said in every session: questions, answers, attachments, summaries
    ///
    /// PATTERN is a regular expression (Rust syntax, as ripgrep's; -F for plain text), matched
    /// against each line of content as it was written; cca's own markers and headings never
    /// match. Smart case: a pattern with no upper-case letter ignores case (-i always, -S
    /// never). Matches are grouped by session (id, name, title), oldest session first, each
    /// line with its exchange number and who said it. Colour only on a terminal (NO_COLOR and
    /// TERM=dumb turn it off).
    ///
    /// Exit status, as grep's: 0 when something matched, 1 when nothing did, 2 on an error (a
    /// bad pattern, or a transcript that cannot be read, which is reported and skipped).
    #[command(after_long_help = GREP_EXAMPLES)]
    Grep(GrepArgs),

    /// Find past exchanges by what they were about: the best first, ranked
    ///
    /// QUESTION is asked in plain words ("when did we move the retry into the client?"): no
    /// word is required, words are matched by their stem, and "quoted words" count more when
    /// found together. Each exchange found is shown with its session (id, name), date, rank
    /// and an excerpt (through $PAGER on a terminal). Ranked from an index in
    /// $CCA_HOME/recall, a cache of the transcripts brought up to date at each search (the
    /// first one builds it); deleting it loses nothing. `cca grep` finds exact patterns.
    /// Exits 0, with or without anything found.
    #[command(after_long_help = RECALL_EXAMPLES)]
    Recall(RecallArgs),

    /// Give a session a short name, usable wherever an id is
    ///
    /// `cca name rust-locks` names the session `--resume` continues; `cca name ID rust-locks`
    /// names another. Names are unique, made of letters, digits, `.`, `-` and `_`, with at
    /// least one letter, and are kept in the transcript's header. `--clear` takes a name away.
    Name(NameArgs),

    /// Show a session's conversation (through $PAGER on a terminal)
    ///
    /// Without an id, the session `--resume` would continue ($CCA_SESSION, else latest). On a
    /// terminal the answers are rendered: headings, lists, highlighted code, aligned tables
    /// (`render` in config.toml: "auto", "always" also when piped, "never"). Piped, each
    /// record is its exact text.
    Show(ShowArgs),

    /// Print a session's file path, for `$EDITOR "$(cca path)"`
    ///
    /// Hand edits are honoured: the next turn sends the edited history.
    Path(PathArgs),

    /// Start a new session from the first N exchanges of another; it becomes latest
    ///
    /// The new session records where it came from (`forked_from`); both continue independently.
    Fork(ForkArgs),

    /// Clear a session's context: the next turn sends nothing from before
    ///
    /// The file keeps everything; `cca show` marks where the clear happened.
    Clear(ClearArgs),

    /// Summarise a session's older turns now, keeping the most recent ones verbatim
    ///
    /// The session's engine writes the summary (with the `compaction` prompt); it is recorded
    /// in the transcript and sent in place of those turns from then on. The file keeps every
    /// turn. cca also does this on its own before a turn that would pass a share of the
    /// engine's context budget ([compaction] in config.toml; --no-compact to skip).
    Compact(CompactArgs),

    /// Move sessions to the trash ($CCA_HOME/trash), or delete them with --purge
    Rm(RmArgs),

    /// Bring sessions back from the trash; with no id, list what the trash holds
    Restore(RestoreArgs),

    /// Import conversations from Claude Code, gemini, codex or llm as cca sessions
    ///
    /// Reads the tool's own store (claude: ~/.claude/projects; gemini: ~/.gemini/tmp/*/chats;
    /// codex: ~/.codex/sessions or $CODEX_HOME/sessions; llm: its logs.db), or the files and folders given. One session
    /// per conversation, with its times, folder, title, engine and model; tool calls as cca's
    /// tool lines; what cca cannot carry (thinking, images, subagent side chains) is named in
    /// the answer. Importing again adds only what is new: a conversation that went on gets its
    /// new exchanges appended, or, if the session was continued in cca or the source changed
    /// its past, a fork. Prints a line per session written. Exits 1 when a file could not be
    /// read whole (each problem is named with its line; the rest is imported).
    #[command(after_long_help = IMPORT_EXAMPLES)]
    Import(ImportArgs),

    /// Every conversation on every machine: sync the sessions through a git remote
    ///
    /// `cca sync init REMOTE` sets this machine up (a new remote, or one another machine set
    /// up, joined with --key); then `cca sync` sends what is new here and takes what is new
    /// there, and says what changed. REMOTE is anything git can push to: a bare repository over
    /// SSH, a private repository on a forge, a folder. Records are encrypted (age, X25519) with
    /// a key kept in $CCA_HOME/sync/key that never leaves your machines; --plain opts out.
    /// Nothing ever conflicts: a session continued on two machines at once keeps both, the
    /// other machine's continuation as a fork named after it. `sync = "after-turn"` in
    /// config.toml syncs in the background after each answered turn.
    #[command(after_long_help = SYNC_EXAMPLES)]
    Sync(SyncArgs),

    /// Write a session where claude, gemini or codex keeps its own, to resume it there
    ///
    /// claude: ~/.claude/projects/<folder>/<uuid>.jsonl, then `claude --resume UUID`; gemini:
    /// ~/.gemini/tmp/<project>/chats/, then `gemini --resume UUID`; codex:
    /// ~/.codex/sessions/YYYY/MM/DD/ (or under $CODEX_HOME), then `codex resume UUID`; each from the session's folder. Prints the id to resume on stdout. Questions, answers (with their tool lines)
    /// and their times are carried; attachments go with their question.
    Export(ExportArgs),

    /// Print shell code that defines the `,` shortcut
    ///
    /// Add to your shell's startup file:
    ///   bash: eval "$(cca init bash)"
    ///   zsh:  eval "$(cca init zsh)"
    ///   fish: cca init fish | source
    ///
    /// Then `, and on windows?` continues the latest session.
    #[command(verbatim_doc_comment)]
    Init(InitArgs),

    /// Print shell completions (session ids and prompt names complete too)
    ///
    /// Load them at shell start-up:
    ///   bash: source <(cca completions bash)
    ///   zsh:  source <(cca completions zsh)
    ///   fish: cca completions fish | source
    ///
    /// `make install` puts them where bash-completion, zsh and fish find them.
    #[command(verbatim_doc_comment)]
    Completions(CompletionsArgs),

    /// Print the effective settings and where each came from
    ///
    /// Sources, lowest to highest: default, config file ($CCA_HOME/config.toml), environment
    /// (CCA_*), flag.
    ///
    /// Config file keys: engine, model, prompt, render ("auto": answers rendered on a terminal,
    /// "always", "never"), and per engine in [engines.NAME]: program, command, acp (an ACP
    /// agent's program and arguments), args, model,
    /// model_arg, version_args (how `cca doctor` asks the version), system_prompt ("inline" or
    /// "native"), system_prompt_arg, history ("inline" or "structured"), tools, max_input_bytes, retries,
    /// policy, context_budget (tokens), model_budgets ({ "model" = tokens }), bytes_per_token.
    /// keep_warm ("10m"; "off"; top level or per engine): how long chat and acp keep an engine.
    /// standby ("10m"; "off", the default; top level or per engine): how long an engine left
    /// started after a one-shot turn waits for the next (`cca standby`). sync ("after-turn";
    /// "off", the default): `cca sync` in the background after each answered turn.
    /// Under [compaction]: enabled, threshold (a share of the budget, 0.75), keep_recent (4),
    /// warn_tokens (30000).
    ///
    /// Environment: CCA_HOME, CCA_ENGINE, CCA_MODEL, CCA_PROMPT, CCA_SESSION, CCA_CLAUDE,
    /// CCA_GEMINI, CCA_CODEX, CCA_NOW (a fixed clock, for tests), CCA_GRACE_MS (for tests), CCA_COMPLETE (used by completions),
    /// GEMINI_CLI_HOME, CLAUDE_CONFIG_DIR and CODEX_HOME (where gemini, claude and codex keep
    /// their files), and the
    /// standard NO_COLOR, TERM, PAGER,
    /// PATH, HOME. Links in rendered answers are terminal hyperlinks where the terminal is known
    /// to show them (TERM_PROGRAM, VTE_VERSION, WT_SESSION, KONSOLE_VERSION, TERM; not inside
    /// tmux or screen, TMUX and STY), else the URL follows the text; FORCE_HYPERLINK=1 or 0
    /// decides.
    Config(ConfigArgs),

    /// Check the setup: engines found (path, version), the default, and CCA_HOME's state
    ///
    /// Also reports transcripts that cannot be read, and files others can read. Lists the engines
    /// waiting on standby, and times each claude, gemini or ACP agent with standby off as a
    /// standby would start it (no question is asked), suggesting standby for one slow to start.
    /// Says what to do about each problem. Exits 0 when an engine is usable (the other problems
    /// are listed), 1 when none is.
    Doctor(DoctorArgs),

    /// List the engines waiting on standby for the next `,`, or end them
    ///
    /// With `standby = "10m"` in config.toml (top level, or under [engines.NAME]), each answered
    /// one-shot turn (`cca search`, `,`) leaves one engine started and waiting, and the next
    /// turn takes it over instead of starting one. It is used only where a cold start would be
    /// the same (engine program, arguments, folder, environment, context) and ends after its idle
    /// time, when its engine program changes, and with `--end`. Off by default.
    Standby(StandbyArgs),

    /// Print the man page (roff)
    ///
    /// Read it with `cca man | man -l -`; `make install` installs it as cca(1).
    Man(ManArgs),
}

/// Which of `words` (a question's or a message's, after its first) are options of cca's
/// `command` as typed (`--json`, `-r`): they are the question's, since options go before it,
/// and a person who typed them after it may have meant them for cca.
pub fn options_among<'a>(command: &str, words: &'a [String]) -> Vec<&'a str> {
    let after_first = || words.iter().skip(1).filter(|w| w.starts_with('-'));
    if after_first().next().is_none() {
        return Vec::new();
    }
    let options = options_of(command);
    after_first().filter(|w| options.contains(w)).map(String::as_str).collect()
}

/// Every option `command` takes, as `--long` and `-s`, `--help` and `-h` included; none for a
/// command there is not.
fn options_of(command: &str) -> Vec<String> {
    use clap::CommandFactory;
    let cli = Cli::command();
    let Some(command) = cli.find_subcommand(command) else { return Vec::new() };
    let mut options = vec!["--help".to_string(), "-h".to_string()];
    for arg in command.get_arguments() {
        options.extend(arg.get_long().map(|long| format!("--{long}")));
        options.extend(arg.get_short().map(|short| format!("-{short}")));
    }
    options
}

/// `cca steer`'s options.
#[derive(Debug, Args)]
pub struct SteerArgs {
    /// The session: an id, or any unique start of one [default: $CCA_SESSION, else latest]
    #[arg(short, long, value_name = "ID", add = session_candidates())]
    pub session: Option<String>,
    /// The message; read from stdin when not given. Options go before it: every word from its
    /// first on is the message's
    #[arg(value_name = "MESSAGE", trailing_var_arg = true)]
    pub message: Vec<String>,
}

/// `cca mcp` takes no options: its arguments are this empty struct, as every command's are.
#[derive(Debug, Args)]
pub struct McpArgs {}

/// `cca sessions`'s options.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Print a JSON array for scripts
    #[arg(long)]
    pub json: bool,
    /// Show at most N sessions
    #[arg(short = 'n', long, value_name = "N")]
    pub limit: Option<usize>,
    /// Only sessions started in this folder or below it
    #[arg(long)]
    pub here: bool,
    /// Only sessions started with this engine
    #[arg(long, value_name = "NAME", add = engine_candidates(), value_parser = not_blank)]
    pub engine: Option<String>,
    /// Only sessions active since DATE: 2026-11-21, today, yesterday, "2026-11-21 10:15", RFC
    /// 3339, or a time ago such as 30m (minutes), 12h, 3d, 2w, 2mo, 1y
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
}

/// The session a command is about, when it is about one: `cca show`, `path`, `fork`, `clear`,
/// `compact` and `export` take it alike.
#[derive(Debug, Args)]
pub struct SessionArg {
    /// The session: an id, any unique start of one, or its name [default: $CCA_SESSION, else
    /// latest]
    #[arg(value_name = "ID", add = session_candidates())]
    pub id: Option<String>,
}

/// `cca name`'s options.
#[derive(Debug, Args)]
pub struct NameArgs {
    /// The session (an id, any unique start of one, or its name), when two words are given
    /// [default: $CCA_SESSION, else latest]
    #[arg(value_name = "ID", add = session_candidates())]
    pub id: Option<String>,
    /// The name to give it
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Take the session's name away instead
    #[arg(long)]
    pub clear: bool,
}

/// `cca show`'s options.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub session: SessionArg,
    /// Print the file as it is (markers and all; never rendered)
    #[arg(long)]
    pub raw: bool,
}

/// `cca path`'s options.
#[derive(Debug, Args)]
pub struct PathArgs {
    #[command(flatten)]
    pub session: SessionArg,
}

/// `cca fork`'s options.
#[derive(Debug, Args)]
pub struct ForkArgs {
    #[command(flatten)]
    pub session: SessionArg,
    /// Keep the first N exchanges [default: all]
    #[arg(long, value_name = "N")]
    pub at: Option<u64>,
}

/// `cca clear`'s options.
#[derive(Debug, Args)]
pub struct ClearArgs {
    #[command(flatten)]
    pub session: SessionArg,
}

/// `cca compact`'s options.
#[derive(Debug, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub session: SessionArg,
    /// Keep this many recent exchanges verbatim [default: keep_recent from config, 4]
    #[arg(long, value_name = "N")]
    pub keep: Option<u64>,
    /// Ask the engine not to retry a failing API
    #[arg(long)]
    pub fail_fast: bool,
}

/// `cca rm`'s options.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The sessions: ids, unique starts of them, or names
    #[arg(value_name = "ID", required = true, add = session_candidates())]
    pub ids: Vec<String>,
    /// Delete for good instead of moving to the trash (sessions in the trash too)
    #[arg(long)]
    pub purge: bool,
}

const SYNC_EXAMPLES: &str = "\
Examples:
  cca sync init git@example.org:me/cca-sessions.git   # the first machine
  cca sync key                                        # prints the key for the others
  cca sync init git@example.org:me/cca-sessions.git --key AGE-SECRET-KEY-1...   # another machine
  cca sync                                            # send and take what is new
  cca sync status";

/// `cca sync`'s options.
#[derive(Debug, Args)]
pub struct SyncArgs {
    #[command(subcommand)]
    pub action: Option<SyncAction>,

    /// Say nothing unless something fails (for scripts); `status` and `key` print what they
    /// are asked for all the same
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Started after a turn: give up at once if another sync runs, never prompt (internal)
    #[arg(long, hide = true)]
    pub background: bool,
}

#[derive(Debug, Subcommand)]
pub enum SyncAction {
    /// Set this machine up to sync through REMOTE, then sync once
    ///
    /// A remote with nothing of cca's gets a new key (kept in $CCA_HOME/sync/key, 0600); one
    /// another machine set up is joined with that machine's key (`cca sync key` prints it).
    Init(SyncInitArgs),
    /// Where this machine stands: the remote, the last sync, sessions changed since
    Status,
    /// Print the key another machine needs to join (keep it as you keep an SSH key)
    Key,
}

/// `cca sync init`'s options.
#[derive(Debug, Args)]
pub struct SyncInitArgs {
    /// The git remote: a URL, an scp-like address (host:path) or a folder
    #[arg(value_name = "REMOTE")]
    pub remote: String,

    /// The key of a remote another machine set up: the key itself (AGE-SECRET-KEY-1...), a
    /// file holding it, or - to read it from stdin
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,

    /// Do not encrypt: for a remote you trust as you trust this machine
    #[arg(long, conflicts_with = "key")]
    pub plain: bool,

    /// This machine's name in forks made of its continuations [default: the host name]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

/// `cca restore`'s options.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The sessions to bring back: ids as `cca restore` lists them, a unique start of one, or
    /// a name
    #[arg(value_name = "ID", add = trash_candidates())]
    pub ids: Vec<String>,
}

/// `cca export`'s options.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The tool to hand the session to
    #[arg(value_enum)]
    pub tool: ExportTool,
    #[command(flatten)]
    pub session: SessionArg,
}

/// `cca init`'s options.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The shell to print code for
    #[arg(value_enum)]
    pub shell: InitShell,
}

/// `cca completions`'s options.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to print completions for
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// `cca config` takes no options: its arguments are this empty struct, as every command's are.
#[derive(Debug, Args)]
pub struct ConfigArgs {}

/// `cca doctor` takes no options: its arguments are this empty struct, as every command's are.
#[derive(Debug, Args)]
pub struct DoctorArgs {}

/// `cca standby`'s options.
#[derive(Debug, Args)]
pub struct StandbyArgs {
    /// End what waits (of one engine with --engine)
    #[arg(long)]
    pub end: bool,
    /// Only this engine's standby
    #[arg(short, long, value_name = "ENGINE", value_parser = not_blank)]
    pub engine: Option<String>,
}

/// `cca __standby` reads its order on stdin: its arguments are this empty struct.
#[derive(Debug, Args)]
pub struct StandbyServeArgs {}

/// `cca man` takes no options: its arguments are this empty struct, as every command's are.
#[derive(Debug, Args)]
pub struct ManArgs {}

const IMPORT_EXAMPLES: &str = "\
Examples:
  cca import claude                         # every Claude Code session on this machine
  cca import gemini --dry-run               # what would be imported, writing nothing
  cca import codex ~/old/rollout-x.jsonl    # a file, or a folder of them
  cca import llm                            # llm's logs.db, found as `llm logs path` finds it
  cca import --auto on                      # from now on, each conversation as it ends
  claude --resume \"$(cca export claude)\"   # and back: the latest, in Claude Code";

/// `cca import`'s options.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Whose conversations to import
    #[arg(value_enum, required_unless_present_any = ["auto", "hook"])]
    pub source: Option<ImportSource>,

    /// Import each conversation of Claude Code, gemini and codex as it ends (on), or stop (off)
    ///
    /// on: adds cca's hook to each tool found: Claude Code's and gemini's SessionEnd hook in
    /// their settings.json, codex's notify in ~/.codex/config.toml or $CODEX_HOME's (codex runs one notify: one of
    /// your own is kept, and cca's hook runs it). Your own hooks and the rest of the file stay as
    /// they are. off: takes out exactly cca's entry, and gives back your file byte for byte when
    /// nothing else changed. `cca doctor` says which are on.
    #[arg(long, value_enum, value_name = "SWITCH", conflicts_with_all = ["source", "paths", "dry_run", "hook"])]
    pub auto: Option<Switch>,

    /// What the hooks run (`--auto on` puts it there): hands the conversation that ended to an
    /// import in the background and returns at once; what happens goes to
    /// $CCA_HOME/auto/hooks.log
    #[arg(long, value_enum, value_name = "TOOL", conflicts_with_all = ["source", "paths", "dry_run"])]
    pub hook: Option<HookTool>,

    /// Run by --hook, in the background: imports the conversation the tool's hook names
    #[arg(long, hide = true, requires = "source")]
    pub hooked: bool,

    /// Files or folders to read instead of the tool's own store (llm: a logs.db)
    #[arg(value_name = "PATH", value_hint = clap::ValueHint::AnyPath)]
    pub paths: Vec<PathBuf>,

    /// List what would be imported, and write nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,

    /// With --hook codex: your own notify program and its arguments, then codex's JSON
    #[arg(last = true, hide = true, value_name = "ARGS")]
    pub hook_args: Vec<std::ffi::OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportSource {
    Claude,
    Gemini,
    Codex,
    Llm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// The tools whose end-of-session hooks cca can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookTool {
    Claude,
    Gemini,
    Codex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportTool {
    Claude,
    Gemini,
    Codex,
}

const GREP_EXAMPLES: &str = "\
Examples:
  cca grep 'file lock'                  # every session
  cca grep -w -C 2 lock rust-locks      # one session (by name), with context
  cca grep -F 'Vec<u8>' --role user     # plain text, in your questions only
  cca grep -l tokio --since 2w --here   # ids of recent sessions started here
  cca grep -c -i rust --since yesterday # how many lines of each session since yesterday
  cca grep --json 'https?://\\S+' | jq -r .text";

const RECALL_EXAMPLES: &str = "\
Examples:
  cca recall when did we move the retry into the client
  cca recall -n 3 '\"file lock\" on windows' --since 2w
  cca recall --here --engine claude flaky test fix
  cca recall --json -n 5 release checklist | jq -r '.[].session'";

/// From when until when, as `grep` and `recall` take it.
#[derive(Debug, Args)]
pub struct SpanArgs {
    /// Only what was said since DATE: 2026-11-21, today, yesterday, "2026-11-21 10:15", RFC
    /// 3339, or a time ago such as 30m (minutes), 12h, 3d, 2w, 2mo, 1y
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,

    /// Only what was said until DATE (a day alone counts to its end)
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
}

impl SpanArgs {
    /// The span as points in time (`human::parse_span`).
    pub fn parse(&self, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<crate::human::Span> {
        let (since, until) = (self.since.as_deref(), self.until.as_deref());
        crate::human::parse_span(since, until, now, ["--since", "--until"])
    }
}

/// `cca recall`'s options.
#[derive(Debug, Args)]
pub struct RecallArgs {
    /// What to find, in plain words; "quoted words" are a phrase
    #[arg(value_name = "QUESTION", required = true)]
    pub question: Vec<String>,

    /// Show the N best exchanges
    #[arg(short = 'n', long = "limit", value_name = "N", default_value_t = 10)]
    pub limit: usize,

    /// Print a JSON array: one object per exchange (session, name, title, exchange, at, score,
    /// excerpt), best first
    #[arg(long)]
    pub json: bool,

    /// Only sessions started with this engine
    #[arg(long, value_name = "NAME", add = engine_candidates(), value_parser = not_blank)]
    pub engine: Option<String>,

    #[command(flatten)]
    pub span: SpanArgs,

    /// Only sessions started in this folder or below it
    #[arg(long, value_name = "DIR", conflicts_with = "here")]
    pub folder: Option<PathBuf>,

    /// Only sessions started in the current folder or below it
    #[arg(long)]
    pub here: bool,
}

/// `cca grep`'s options.
#[derive(Debug, Args)]
pub struct GrepArgs {
    /// What to look for: a regular expression, or text with -F
    #[arg(value_name = "PATTERN")]
    pub pattern: String,

    /// Search only these sessions: ids, unique starts of ids, or names [default: all]
    #[arg(value_name = "ID", add = session_candidates())]
    pub ids: Vec<String>,

    /// Ignore case
    #[arg(short = 'i', long, overrides_with = "case_sensitive")]
    pub ignore_case: bool,

    /// Match case exactly (smart case is the default)
    #[arg(short = 'S', long, overrides_with = "ignore_case")]
    pub case_sensitive: bool,

    /// PATTERN is plain text, not a regular expression
    #[arg(short = 'F', long)]
    pub fixed_strings: bool,

    /// Match whole words only
    #[arg(short = 'w', long)]
    pub word_regexp: bool,

    /// Show N lines of context around each match (from the same question or answer)
    #[arg(short = 'C', long, value_name = "N")]
    pub context: Option<usize>,

    /// Print only the ids of the sessions that match
    #[arg(short = 'l', long, conflicts_with_all = ["json", "context"])]
    pub list: bool,

    /// Print only how many lines match in each session that matches, as ID:N
    #[arg(short = 'c', long, conflicts_with_all = ["json", "context", "list"])]
    pub count: bool,

    /// Print one JSON object per matching line (session, name, title, turn, role, kind, who,
    /// at, line, text, matches)
    #[arg(long, conflicts_with = "context")]
    pub json: bool,

    /// Only what this side said: user (questions, attachments) or assistant (answers,
    /// summaries)
    #[arg(long, value_enum, value_name = "WHO")]
    pub role: Option<GrepRole>,

    /// Only sessions started with this engine
    #[arg(long, value_name = "NAME", add = engine_candidates(), value_parser = not_blank)]
    pub engine: Option<String>,

    #[command(flatten)]
    pub span: SpanArgs,

    /// Only sessions started in this folder or below it
    #[arg(long)]
    pub here: bool,

    /// Search the sessions in the trash instead (ids as `cca restore` lists them)
    #[arg(long)]
    pub trash: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GrepRole {
    User,
    Assistant,
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

    /// Continue this session: an id, any unique start of one, or its name
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
    /// (a diff, a log, a file) in its own tag, and kept in the transcript. Options go before
    /// it: every word from the question's first on is the question's, so that `, what does
    /// --force do` asks about --force.
    #[arg(value_name = "QUESTION", trailing_var_arg = true)]
    pub query: Vec<String>,

    /// Continue this session: an id, any unique start of one, or its name (not $CCA_SESSION,
    /// which only `--resume` and `,` follow)
    #[arg(short, long, value_name = "ID", add = session_candidates())]
    pub session: Option<String>,

    /// Hand a file to the engine as context, text or an image; repeat for several
    ///
    /// Each is kept in the transcript as an attachment with its path and size, and sent in its
    /// own tag, named by its path. An image (PNG, JPEG, GIF or WebP, known by its first bytes;
    /// at most 5 MiB) goes to engines that take images (claude, gemini, codex), and the transcript
    /// links to a copy under $CCA_HOME/files/. A missing file, a folder, or a file that is
    /// neither UTF-8 text nor such an image is refused before anything is sent.
    #[arg(short, long = "file", value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub files: Vec<std::path::PathBuf>,

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

    /// Print the answer byte for byte, also on a terminal: not rendered (as when piped)
    #[arg(long)]
    pub raw: bool,
}

/// How a turn is answered: the options `search`, `,` and `chat` share.
#[derive(Debug, Args, Clone, Default)]
pub struct AnswerArgs {
    /// Engine: claude, gemini, codex, or a name declared in config.toml [default: `engine` in
    /// config.toml, else the first of claude, gemini and codex on PATH, else the first engine
    /// declared there; a session keeps its own] [env: CCA_ENGINE]
    #[arg(short, long, value_name = "NAME", add = engine_candidates())]
    pub engine: Option<String>,

    /// Model for this turn's engine, passed as --model=MODEL (a name starting with `-` is
    /// refused) [env: CCA_MODEL, for the default engine]
    #[arg(short, long, value_name = "MODEL")]
    pub model: Option<String>,

    /// System prompt: a built-in name, or NAME.md under $CCA_HOME/prompts; on a follow-up, the
    /// session's from then on [default: search_agents/haiku45; a session keeps its own]
    /// [env: CCA_PROMPT]
    #[arg(short, long, value_name = "NAME", add = prompt_candidates())]
    pub prompt: Option<String>,

    /// System prompt from a file; on a follow-up, the session's from then on
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

/// A name given to narrow what is shown (`--engine`): a blank one (an unset variable in a
/// script, `--engine "$E"`) would narrow nothing, silently.
fn not_blank(text: &str) -> Result<String, String> {
    match text.trim() {
        "" => Err("it is empty: give an engine's name, such as claude".into()),
        _ => Ok(text.to_string()),
    }
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
