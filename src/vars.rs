//! Every environment variable cca reads, in one place, documented. `config` reads them once
//! into a snapshot; nothing else reads the environment.

/// Where sessions, prompts and config live (default `~/.cca`). Must be absolute.
pub const HOME: &str = "CCA_HOME";
/// The engine for new sessions: `claude`, `gemini`, `codex`, or a name from `[engines.NAME]`.
pub const ENGINE: &str = "CCA_ENGINE";
/// The model passed to the engine.
pub const MODEL: &str = "CCA_MODEL";
/// The system prompt's name for new sessions.
pub const PROMPT: &str = "CCA_PROMPT";
/// The session this terminal follows: `--resume` and `,` continue it instead of `latest`.
pub const SESSION: &str = "CCA_SESSION";
/// Path of the `claude` program.
pub const CLAUDE: &str = "CCA_CLAUDE";
/// Path of the `gemini` program.
pub const GEMINI: &str = "CCA_GEMINI";
/// Path of the `codex` program.
pub const CODEX: &str = "CCA_CODEX";
/// For tests: a fixed clock, as an RFC 3339 time (`2026-11-21T10:15:00Z`).
pub const NOW: &str = "CCA_NOW";
/// For tests: how long an engine has after SIGTERM before SIGKILL, in milliseconds (3000).
pub const GRACE_MS: &str = "CCA_GRACE_MS";
/// Standard: turn colour off.
pub const NO_COLOR: &str = "NO_COLOR";
/// Standard: `dumb` turns the spinner and colour off.
pub const TERM: &str = "TERM";
/// gemini's own: where it keeps its files (else `$HOME`): what cca imports and exports, and the
/// settings and sign-in the home cca gives its gemini links to.
pub const GEMINI_CLI_HOME: &str = "GEMINI_CLI_HOME";
/// claude's own: its folder (else `$HOME/.claude`), where it keeps its sessions: cca reads there
/// the session file of a structured-history turn (and removes it), imports and exports.
pub const CLAUDE_CONFIG_DIR: &str = "CLAUDE_CONFIG_DIR";
/// codex's own: its folder (else `$HOME/.codex`), where it keeps its sessions and settings:
/// what cca imports, exports and hooks into, and what the home cca gives its codex links to.
pub const CODEX_HOME: &str = "CODEX_HOME";
/// Standard: the pager for `cca show` on a terminal (default `less -FRX`); a command with spaces
/// or shell syntax runs through `sh -c`, as git runs it.
pub const PAGER: &str = "PAGER";
/// Standard: where engines are looked for.
pub const PATH: &str = "PATH";
/// Standard: the default `CCA_HOME` is `$HOME/.cca`.
pub const USER_HOME: &str = "HOME";

/// Links in rendered answers: `1` as terminal hyperlinks (OSC 8), `0` with the URL shown.
pub const FORCE_HYPERLINK: &str = "FORCE_HYPERLINK";
/// Set by terminals; those known to show hyperlinks get them (`FORCE_HYPERLINK` decides).
pub const TERM_PROGRAM: &str = "TERM_PROGRAM";
pub const VTE_VERSION: &str = "VTE_VERSION";
pub const WT_SESSION: &str = "WT_SESSION";
pub const KONSOLE_VERSION: &str = "KONSOLE_VERSION";
/// Set by tmux and screen: inside them, links are hyperlinks only with `FORCE_HYPERLINK=1`.
pub const TMUX: &str = "TMUX";
pub const STY: &str = "STY";

pub const ALL: [&str; 25] = [
    HOME,
    ENGINE,
    MODEL,
    PROMPT,
    SESSION,
    CLAUDE,
    GEMINI,
    CODEX,
    NOW,
    GRACE_MS,
    NO_COLOR,
    TERM,
    PAGER,
    PATH,
    USER_HOME,
    GEMINI_CLI_HOME,
    CLAUDE_CONFIG_DIR,
    CODEX_HOME,
    FORCE_HYPERLINK,
    TERM_PROGRAM,
    VTE_VERSION,
    WT_SESSION,
    KONSOLE_VERSION,
    TMUX,
    STY,
];
