//! Settings: defaults < `$CCA_HOME/config.toml` < `CCA_*` environment < flags, resolved once into
//! one [`Settings`] value that remembers where each value came from. Nothing downstream reads
//! the environment again.
//!
//! Pure: the environment arrives as an [`Env`] snapshot and the config file as text, so that
//! precedence is unit-tested without touching the process.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Deserialize;

use crate::engine::{self, EngineConfig, HistoryMode, SystemPromptMode};
use crate::error::Failure;
use crate::vars;

mod engines;
pub use engines::KEEP_WARM;
use engines::engines;

/// A snapshot of the environment variables cca reads.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<&'static str, OsString>,
}

impl Env {
    pub fn from_process() -> Env {
        let vars = vars::ALL
            .iter()
            .filter_map(|&name| std::env::var_os(name).map(|v| (name, v)))
            .collect();
        Env { vars }
    }

    /// This environment without the variables `names`.
    pub fn without(mut self, names: &[&str]) -> Env {
        self.vars.retain(|name, _| !names.contains(name));
        self
    }

    /// For tests: an environment made of these pairs only.
    #[cfg(any(test, feature = "testing"))]
    pub fn from_pairs(pairs: &[(&'static str, &str)]) -> Env {
        Env { vars: pairs.iter().map(|(k, v)| (*k, OsString::from(v))).collect() }
    }

    pub fn os(&self, name: &str) -> Option<&OsString> {
        self.vars.get(name).filter(|v| !v.is_empty())
    }

    fn text(&self, name: &'static str) -> Result<Option<String>> {
        match self.os(name) {
            None => Ok(None),
            Some(v) => v
                .to_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| Failure::usage(format!("{name} is not valid UTF-8")).into()),
        }
    }
}

/// Where a setting's value came from, for `cca config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    Env(&'static str),
    Flag,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File => f.write_str("config file"),
            Source::Env(name) => f.write_str(name),
            Source::Flag => f.write_str("flag"),
        }
    }
}

impl Source {
    /// A failure about a value from here: one from a variable names the variable, and says how
    /// to be rid of it, whatever the value was refused for.
    pub fn blame(&self, failure: Failure) -> Failure {
        let Source::Env(var) = self else { return failure };
        let unset = format!("`unset {var}`");
        Failure {
            code: failure.code,
            message: format!("{var}: {}", failure.message),
            hint: Some(failure.hint.map_or(unset.clone(), |h| format!("{unset}, or {h}"))),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

/// When answers are rendered (markdown styled for the terminal) instead of printed as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Render {
    /// When stdout is a terminal.
    #[default]
    Auto,
    /// Also when piped (for `less -R`).
    Always,
    Never,
}

/// When `cca sync` runs without being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SyncWhen {
    /// Only when asked.
    #[default]
    Off,
    /// In the background after each answered turn.
    AfterTurn,
}

/// Every key the config file takes, for the docs and their test.
#[cfg(any(test, feature = "testing"))]
pub const FILE_KEYS: &[&str] =
    &["engine", "model", "prompt", "render", "keep_warm", "standby", "sync"];
#[cfg(any(test, feature = "testing"))]
pub const COMPACTION_KEYS: &[&str] = &["enabled", "threshold", "keep_recent", "warn_tokens"];
#[cfg(any(test, feature = "testing"))]
pub const ENGINE_KEYS: &[&str] = &[
    "program",
    "command",
    "acp",
    "args",
    "model",
    "model_arg",
    "version_args",
    "system_prompt",
    "system_prompt_arg",
    "history",
    "tools",
    "max_input_bytes",
    "retries",
    "policy",
    "context_budget",
    "model_budgets",
    "bytes_per_token",
    "keep_warm",
    "standby",
];

/// One `[engines.NAME]` table of the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    /// claude/gemini: the program to run instead of the one on PATH.
    pub program: Option<PathBuf>,
    /// Other engines: the program and its arguments.
    pub command: Option<Vec<String>>,
    /// Other engines: an ACP agent's program and its arguments, spoken to over ACP.
    pub acp: Option<Vec<String>>,
    /// Extra arguments for claude/gemini.
    #[serde(default)]
    pub args: Vec<String>,
    pub model: Option<String>,
    /// Other engines: the flag that takes a model name (`-m`).
    pub model_arg: Option<String>,
    /// The arguments that make the program print its version (`["--version"]`), for `cca
    /// doctor`. Other engines are not run to find out unless this says how.
    pub version_args: Option<Vec<String>>,
    pub system_prompt: Option<SystemPromptMode>,
    /// Other engines: the flag that takes the system prompt's text (`-s`), for `native`.
    pub system_prompt_arg: Option<String>,
    pub history: Option<HistoryMode>,
    /// claude: the built-in tools allowed (`WebSearch,WebFetch`); empty for none.
    pub tools: Option<String>,
    /// The largest input cca sends, in bytes; larger turns are refused before spawning.
    pub max_input_bytes: Option<u64>,
    /// claude/gemini: how often the engine retries a failing API (its own default otherwise).
    pub retries: Option<u32>,
    /// gemini: a policy file for its tools (cca's own denies shell and file writes); "" for none.
    pub policy: Option<String>,
    /// The context the engine is given, in tokens; compaction keeps below a share of it.
    pub context_budget: Option<u64>,
    /// Budgets for particular models, by model name.
    #[serde(default)]
    pub model_budgets: BTreeMap<String, u64>,
    /// How many bytes make a token, for estimates (default 3.5).
    pub bytes_per_token: Option<f64>,
    /// How long `cca chat` and `cca acp` keep the engine running between turns (`"10m"`;
    /// `"off"`), over the top-level `keep_warm`.
    pub keep_warm: Option<String>,
    /// How long an engine started for the next one-shot turn waits for it (`"10m"`; `"off"`),
    /// over the top-level `standby`.
    pub standby: Option<String>,
}

/// `[compaction]` of the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionFile {
    pub enabled: Option<bool>,
    pub threshold: Option<f64>,
    pub keep_recent: Option<u64>,
    pub warn_tokens: Option<u64>,
}

/// When and how a session's older turns are summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    pub enabled: Sourced<bool>,
    /// Compact when the live context would pass this share of the engine's budget.
    pub threshold: f64,
    /// Exchanges kept verbatim after the summary.
    pub keep_recent: u64,
    /// Before a turn larger than this many tokens, say so on stderr.
    pub warn_tokens: u64,
}

/// The config file, `$CCA_HOME/config.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub engine: Option<String>,
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub render: Option<Render>,
    /// How long `cca chat` and `cca acp` keep an engine running between turns.
    pub keep_warm: Option<String>,
    /// How long an engine started for the next one-shot turn waits for it; off by default.
    pub standby: Option<String>,
    /// When `cca sync` runs by itself.
    pub sync: Option<SyncWhen>,
    #[serde(default)]
    pub compaction: CompactionFile,
    #[serde(default)]
    pub engines: BTreeMap<String, EngineFile>,
}

impl File {
    /// Parses the config file; errors name the file, line and column.
    pub fn parse(path: &Path, text: &str) -> Result<File> {
        toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|span| {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                    format!(":{line}:{col}")
                })
                .unwrap_or_default();
            Failure::usage(format!("{}{at}: {}", path.display(), e.message()))
                .hint("fix the file, or move it aside to use the defaults")
                .into()
        })
    }
}

/// The config file's text, to name the line of a problem found after it was parsed (a value out
/// of range, a key that does not apply): every config error names the file and the line.
struct Place<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Place<'_> {
    /// An error at `key` of `[section]` (`""`: the top; no key: the section's own line).
    fn error(&self, section: &str, key: Option<&str>, message: String) -> anyhow::Error {
        let at = self.line(section, key).map_or(String::new(), |n| format!(":{n}"));
        Failure::usage(format!("{}{at}: {message}", self.path.display()))
            .hint("fix the file, or move it aside to use the defaults")
            .into()
    }

    /// The line (from 1) where `key` is set in `[section]`, read the simple way TOML is
    /// written by hand: `[section]` lines and `key = value` lines.
    fn line(&self, section: &str, key: Option<&str>) -> Option<usize> {
        let mut current = String::new();
        for (i, line) in self.text.lines().enumerate() {
            let line = line.trim();
            if let Some(header) = line.strip_prefix('[') {
                current = header.trim_end_matches(']').replace(['"', '\'', ' '], "");
                if key.is_none() && current == section {
                    return Some(i + 1);
                }
                continue;
            }
            let name = line.split('=').next().unwrap_or("").trim().trim_matches(['"', '\'']);
            if current == section && key == Some(name) && line.contains('=') {
                return Some(i + 1);
            }
        }
        None
    }
}

/// How long an engine's process group has to exit after SIGTERM before it gets SIGKILL.
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// What the user chose on the command line; `None` where they chose nothing.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub engine: Option<String>,
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub prompt_file: Option<PathBuf>,
    /// No API retries for claude and gemini.
    pub fail_fast: bool,
    /// No automatic compaction.
    pub no_compact: bool,
    /// How answers are drawn, over `render` in the config file (`--raw`: never rendered).
    pub render: Option<Render>,
}

/// Which system prompt to use.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptChoice {
    Name(String),
    File(PathBuf),
}

/// Everything a command needs to know, resolved once.
#[derive(Debug, Clone)]
pub struct Settings {
    pub home: Sourced<PathBuf>,
    pub config_path: PathBuf,
    pub config_loaded: bool,
    /// `None`: the first of claude and gemini found on PATH.
    pub engine: Option<Sourced<String>>,
    pub model: Option<Sourced<String>>,
    /// The engine a top-level `model` (or `CCA_MODEL`) belongs to: `engine` in the file or
    /// `CCA_ENGINE`; `None`: the default engine.
    pub model_engine: Option<String>,
    pub prompt: Sourced<PromptChoice>,
    pub session: Option<Sourced<String>>,
    pub engines: BTreeMap<String, EngineConfig>,
    pub compaction: Compaction,
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// How long an engine has after SIGTERM before SIGKILL.
    pub grace: std::time::Duration,
    pub path: Option<OsString>,
    pub pager: Option<String>,
    /// Where gemini keeps its files: `GEMINI_CLI_HOME`, else the user's home.
    pub gemini_home: Option<PathBuf>,
    /// Where claude keeps its files: `CLAUDE_CONFIG_DIR`, else `.claude` in the user's home.
    pub claude_home: Option<PathBuf>,
    /// Where codex keeps its files: `CODEX_HOME`, else `.codex` in the user's home.
    pub codex_home: Option<PathBuf>,
    /// The user's home folder, where other tools keep their sessions (`cca import`, `cca export`).
    pub user_home: Option<PathBuf>,
    pub color: bool,
    pub dumb_terminal: bool,
    pub render: Sourced<Render>,
    /// `sync = "after-turn"`: a sync starts in the background after each answered turn.
    pub sync_after_turn: bool,
    /// The terminal shows OSC 8 hyperlinks.
    pub hyperlinks: bool,
    /// MCP servers for the engine to start for each turn (an editor gives them per session).
    pub mcp_servers: Vec<crate::engine::McpServer>,
}

/// What cca reads for a turn of an engine that sets no `max_input_bytes`.
const UNLIMITED_ENGINE_INPUT: u64 = 256 << 20;

impl Settings {
    /// The most input one turn can bring: as much as the engine taking the most takes
    /// (`max_input_bytes`; [`UNLIMITED_ENGINE_INPUT`] for one without a limit). Input past it
    /// is refused before it is read whole: a 3 GB file is refused by its size alone.
    pub(crate) fn input_cap(&self) -> u64 {
        let most =
            self.engines.values().map(|e| e.max_input_bytes.unwrap_or(UNLIMITED_ENGINE_INPUT));
        most.max().unwrap_or(UNLIMITED_ENGINE_INPUT)
    }

    /// The time now (`CCA_NOW` in tests).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.now.unwrap_or_else(chrono::Utc::now)
    }

    /// The time now, as the transcript records it.
    pub fn now_string(&self) -> String {
        self.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

/// Where cca keeps its files: `CCA_HOME`, or `~/.cca`.
pub fn home(env: &Env) -> Result<Sourced<PathBuf>> {
    if let Some(dir) = env.os(vars::HOME) {
        let dir = PathBuf::from(dir);
        if !dir.is_absolute() {
            return Err(Failure::usage(format!(
                "{} must be an absolute path, not `{}`",
                vars::HOME,
                dir.display()
            ))
            .hint(format!("export {}=\"$HOME/.cca\"", vars::HOME))
            .into());
        }
        return Ok(Sourced { value: dir, source: Source::Env(vars::HOME) });
    }
    let user_home = env.os(vars::USER_HOME).map(PathBuf::from).or_else(dirs::home_dir);
    match user_home {
        Some(h) if h.is_absolute() => {
            Ok(Sourced { value: h.join(".cca"), source: Source::Default })
        }
        _ => Err(Failure::usage("cannot tell where your home directory is")
            .hint(format!("set {} to an absolute path", vars::HOME))
            .into()),
    }
}

/// Resolves the settings. `file` is the config file's text, if it exists.
pub fn resolve(
    env: &Env,
    flags: &Flags,
    home: Sourced<PathBuf>,
    config_path: PathBuf,
    file: Option<&str>,
) -> Result<Settings> {
    let parsed = match file {
        Some(text) => File::parse(&config_path, text)?,
        None => File::default(),
    };
    let place = Place { path: &config_path, text: file.unwrap_or("") };

    let pick = |flag: &Option<String>,
                var: &'static str,
                from_file: &Option<String>|
     -> Result<Option<Sourced<String>>> {
        if let Some(v) = flag {
            return Ok(Some(Sourced { value: v.clone(), source: Source::Flag }));
        }
        if let Some(v) = env.text(var)? {
            return Ok(Some(Sourced { value: v, source: Source::Env(var) }));
        }
        Ok(from_file.clone().map(|v| Sourced { value: v, source: Source::File }))
    };

    let engine = pick(&flags.engine, vars::ENGINE, &parsed.engine)?;
    let model = pick(&flags.model, vars::MODEL, &parsed.model)?;
    if let Some(m) = &model {
        let from = match m.source {
            Source::Flag => "given with --model".to_string(),
            Source::Env(var) => format!("from {var}"),
            _ => "from the config file".to_string(),
        };
        engine::check_model(&m.value, &from).map_err(|e| match m.source {
            Source::File => place.error("", Some("model"), format!("{e}")),
            _ => e,
        })?;
    }
    let model_engine = pick(&None, vars::ENGINE, &parsed.engine)?.map(|e| e.value);
    let prompt = match &flags.prompt_file {
        Some(path) => Sourced { value: PromptChoice::File(path.clone()), source: Source::Flag },
        None => match pick(&flags.prompt, vars::PROMPT, &parsed.prompt)? {
            Some(Sourced { value, source }) => Sourced { value: PromptChoice::Name(value), source },
            None => Sourced {
                value: PromptChoice::Name(crate::prompt::DEFAULT.to_string()),
                source: Source::Default,
            },
        },
    };
    if let PromptChoice::Name(name) = &prompt.value {
        crate::prompt::validate_name(name).map_err(|e| match prompt.source {
            Source::File => place.error("", Some("prompt"), e),
            _ => prompt.source.blame(Failure::usage(e)).into(),
        })?;
    }
    let session = pick(&None, vars::SESSION, &None)?;

    let mut engines = engines(env, &parsed, &place)?;
    for e in engines.values() {
        if let Some(m) = &e.model {
            let from = format!("[engines.{}] model", e.name);
            engine::check_model(m, &from).map_err(|err| {
                place.error(&format!("engines.{}", e.name), Some("model"), format!("{err}"))
            })?;
        }
    }
    if flags.fail_fast {
        for engine in engines.values_mut().filter(|e| e.spec.is_builtin()) {
            engine.retries = Some(0);
        }
    }
    if let Some(name) = &engine
        && !engines.contains_key(&name.value)
    {
        let unknown = unknown_engine(&name.value, &engines);
        return Err(match name.source {
            Source::File => place.error("", Some("engine"), unknown.message),
            _ => name.source.blame(unknown).into(),
        });
    }

    let c = &parsed.compaction;
    let threshold = c.threshold.unwrap_or(0.75);
    if !(0.05..=1.0).contains(&threshold) {
        return Err(place.error(
            "compaction",
            Some("threshold"),
            format!("threshold is a share of the budget, between 0.05 and 1, not {threshold:?}"),
        ));
    }
    let enabled = match (flags.no_compact, c.enabled) {
        (true, _) => Sourced { value: false, source: Source::Flag },
        (false, Some(on)) => Sourced { value: on, source: Source::File },
        (false, None) => Sourced { value: true, source: Source::Default },
    };
    let compaction = Compaction {
        enabled,
        threshold,
        keep_recent: c.keep_recent.unwrap_or(4),
        warn_tokens: c.warn_tokens.unwrap_or(30_000),
    };

    let now = match env.text(vars::NOW)? {
        Some(text) => Some(
            chrono::DateTime::parse_from_rfc3339(&text)
                .map_err(|_| {
                    Failure::usage(format!("{} is not an RFC 3339 time: `{text}`", vars::NOW)).hint(
                        format!(
                            "unset it, or write a time such as {}=2026-11-21T10:15:00Z",
                            vars::NOW
                        ),
                    )
                })?
                .with_timezone(&chrono::Utc),
        ),
        None => None,
    };
    let grace = match env.text(vars::GRACE_MS)? {
        Some(ms) => std::time::Duration::from_millis(ms.parse().map_err(|_| {
            Failure::usage(format!("{} is a number of milliseconds, not `{ms}`", vars::GRACE_MS))
        })?),
        None => GRACE,
    };
    let dumb_terminal = env.os(vars::TERM).is_some_and(|t| t == "dumb");
    let user_home = env.os(vars::USER_HOME).map(PathBuf::from).or_else(dirs::home_dir);
    Ok(Settings {
        home,
        config_path,
        config_loaded: file.is_some(),
        engine,
        model,
        model_engine,
        prompt,
        session,
        engines,
        compaction,
        now,
        grace,
        path: env.os(vars::PATH).cloned(),
        pager: env.text(vars::PAGER)?,
        gemini_home: tool_folder(env, vars::GEMINI_CLI_HOME).or_else(|| user_home.clone()),
        claude_home: tool_folder(env, vars::CLAUDE_CONFIG_DIR)
            .or_else(|| user_home.as_ref().map(|h| h.join(".claude"))),
        codex_home: tool_folder(env, vars::CODEX_HOME)
            .or_else(|| user_home.as_ref().map(|h| h.join(".codex"))),
        user_home,
        color: env.os(vars::NO_COLOR).is_none() && !dumb_terminal,
        dumb_terminal,
        render: match (flags.render, parsed.render) {
            (Some(value), _) => Sourced { value, source: Source::Flag },
            (None, Some(value)) => Sourced { value, source: Source::File },
            (None, None) => Sourced { value: Render::default(), source: Source::Default },
        },
        sync_after_turn: parsed.sync == Some(SyncWhen::AfterTurn),
        hyperlinks: hyperlinks(env),
        mcp_servers: Vec::new(),
    })
}

/// Whether the terminal shows OSC 8 hyperlinks: only those known to, and not inside tmux or
/// screen (which drop them unless configured), so that a link's URL is never hidden where it
/// cannot be followed. `FORCE_HYPERLINK` overrides.
fn hyperlinks(env: &Env) -> bool {
    let text = |name| env.os(name).and_then(|v| v.to_str()).unwrap_or("");
    if env.os(vars::FORCE_HYPERLINK).is_some() {
        return text(vars::FORCE_HYPERLINK) != "0";
    }
    let term = text(vars::TERM);
    // A terminal multiplexer passes on its outer terminal's variables (VTE_VERSION, WT_SESSION)
    // and may even keep its TERM, but not always the links: TMUX and STY give it away.
    let multiplexed = env.os(vars::TMUX).is_some() || env.os(vars::STY).is_some();
    if multiplexed
        || term.starts_with("screen")
        || term.starts_with("tmux")
        || text(vars::TERM_PROGRAM) == "tmux"
    {
        return false;
    }
    matches!(text(vars::TERM_PROGRAM), "iTerm.app" | "WezTerm" | "vscode" | "ghostty" | "Hyper")
        || matches!(term, "xterm-kitty" | "xterm-ghostty" | "alacritty" | "foot" | "wezterm")
        || text(vars::VTE_VERSION).parse::<u32>().is_ok_and(|v| v >= 5000)
        || env.os(vars::WT_SESSION).is_some()
        || env.os(vars::KONSOLE_VERSION).is_some()
}

/// A tool's folder from its variable, made absolute (from the folder cca runs in, as the tool
/// itself takes it): cca keeps where it put a hook, and finds it again from any folder.
fn tool_folder(env: &Env, name: &str) -> Option<PathBuf> {
    let folder = PathBuf::from(env.os(name)?);
    Some(std::path::absolute(&folder).unwrap_or(folder))
}

pub fn unknown_engine(name: &str, engines: &BTreeMap<String, EngineConfig>) -> Failure {
    let known: Vec<&str> = engines.keys().map(String::as_str).collect();
    Failure::usage(format!("unknown engine `{name}`")).hint(format!(
        "choose one of: {}; or declare it in config.toml as [engines.{name}] with a command",
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(
        env: &[(&'static str, &str)],
        flags: Flags,
        file: Option<&str>,
    ) -> Result<Settings> {
        let env = Env::from_pairs(env);
        let home = Sourced { value: PathBuf::from("/h/.cca"), source: Source::Default };
        resolve(&env, &flags, home, PathBuf::from("/h/.cca/config.toml"), file)
    }

    #[test]
    fn keep_warm_is_per_engine_over_the_top_level_and_off_turns_it_off() {
        use std::time::Duration;
        let keep = |file: &str| -> Result<Vec<Option<Duration>>> {
            let s = settings(&[], Flags::default(), Some(file))?;
            Ok(["claude", "gemini"].map(|e| s.engines[e].keep_warm).to_vec())
        };
        assert_eq!(keep("").unwrap(), [Some(KEEP_WARM); 2]);
        let mixed = "keep_warm = \"off\"\n[engines.claude]\nkeep_warm = \"90s\"\n";
        assert_eq!(keep(mixed).unwrap(), [Some(Duration::from_secs(90)), None]);
        let small = "[engines.claude]\nkeep_warm = \"250ms\"\n";
        assert_eq!(keep(small).unwrap()[0], Some(Duration::from_millis(250)));
        assert_eq!(keep("keep_warm = \"0s\"\n").unwrap(), [None, None]);
        let err = keep("\n[engines.claude]\nkeep_warm = \"ten minutes\"\n").unwrap_err();
        assert!(err.to_string().starts_with("/h/.cca/config.toml:3: keep_warm must be"), "{err}");
        let gemini = keep("[engines.gemini]\nkeep_warm = \"5m\"\n").unwrap();
        assert_eq!(gemini, [Some(KEEP_WARM), Some(Duration::from_secs(300))]);
        // A command engine is started for every turn: its keep_warm would do nothing.
        let command = "[engines.plain]\ncommand = [\"plain\"]\nkeep_warm = \"5m\"\n";
        let err = settings(&[], Flags::default(), Some(command)).unwrap_err();
        assert!(err.to_string().contains("`keep_warm` does not apply to plain"), "{err}");
    }

    #[test]
    fn standby_is_off_unless_set_per_engine_or_at_the_top_level() {
        use std::time::Duration;
        let standby = |file: &str| -> Result<Vec<Option<Duration>>> {
            let s = settings(&[], Flags::default(), Some(file))?;
            Ok(["claude", "gemini"].map(|e| s.engines[e].standby).to_vec())
        };
        assert_eq!(standby("").unwrap(), [None, None], "nothing runs unless asked");
        let both = "standby = \"10m\"\n[engines.gemini]\nstandby = \"off\"\n";
        assert_eq!(standby(both).unwrap(), [Some(Duration::from_secs(600)), None]);
        let err = standby("standby = \"soon\"\n").unwrap_err();
        assert!(err.to_string().starts_with("/h/.cca/config.toml:1: standby must be"), "{err}");
        let command = "[engines.plain]\ncommand = [\"plain\"]\nstandby = \"5m\"\n";
        let err = settings(&[], Flags::default(), Some(command)).unwrap_err();
        assert!(err.to_string().contains("`standby` does not apply to plain"), "{err}");
        let acp = "[engines.a]\nacp = [\"agent\"]\nstandby = \"5m\"\n";
        let s = settings(&[], Flags::default(), Some(acp)).unwrap();
        assert_eq!(s.engines["a"].standby, Some(Duration::from_secs(300)));
    }

    #[test]
    fn an_acp_agent_is_an_engine_of_its_own_kind() {
        let s =
            settings(&[], Flags::default(), Some("[engines.a]\nacp = [\"agent\", \"--acp\"]\n"))
                .unwrap();
        let a = &s.engines["a"];
        assert_eq!(a.spec, &engine::acp_agent::SPEC);
        assert_eq!(
            (a.program.to_str(), a.args.clone()),
            (Some("agent"), vec!["--acp".to_string()])
        );
        assert_eq!(a.keep_warm, Some(KEEP_WARM));
        let error =
            |text: &str| settings(&[], Flags::default(), Some(text)).unwrap_err().to_string();
        let both = error("[engines.a]\nacp = [\"x\"]\ncommand = [\"y\"]\n");
        assert!(
            both.contains("`command` (a program that reads the prompt on stdin) or `acp`"),
            "{both}"
        );
        let native = error("[engines.a]\nacp = [\"x\"]\nsystem_prompt = \"native\"\n");
        assert!(native.contains("ACP gives an agent no system prompt"), "{native}");
        let flag = error("[engines.a]\nacp = [\"x\"]\nmodel_arg = \"-m\"\n");
        assert!(flag.contains("is for engines declared with `command`"), "{flag}");
        let built_in = error("[engines.gemini]\nacp = [\"x\"]\n");
        assert!(built_in.contains("gemini is built in: use `program` and `args`"), "{built_in}");
        let empty = error("[engines.a]\nacp = []\n");
        assert!(empty.contains("needs `command`"), "{empty}");
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let file = Some("engine = \"gemini\"\nmodel = \"file-model\"\nprompt = \"general\"\n");
        let s = settings(&[], Flags::default(), file).unwrap();
        assert_eq!(s.engine.unwrap(), Sourced { value: "gemini".into(), source: Source::File });
        assert_eq!(s.prompt.value, PromptChoice::Name("general".into()));

        let env = [(vars::ENGINE, "claude"), (vars::MODEL, "env-model")];
        let s = settings(&env, Flags::default(), file).unwrap();
        assert_eq!(s.engine.unwrap().source, Source::Env(vars::ENGINE));
        assert_eq!(s.model.unwrap().value, "env-model");

        let flags = Flags { model: Some("flag-model".into()), ..Flags::default() };
        let s = settings(&env, flags, file).unwrap();
        assert_eq!(s.model.unwrap(), Sourced { value: "flag-model".into(), source: Source::Flag });

        let s = settings(&[], Flags::default(), None).unwrap();
        assert!(s.engine.is_none());
        assert_eq!(s.prompt.value, PromptChoice::Name(crate::prompt::DEFAULT.into()));
        assert_eq!(s.prompt.source, Source::Default);
    }

    #[test]
    fn every_variable_is_read() {
        // Every constant declared in vars.rs, read from its source, must be in vars::ALL
        // (the list `Env::from_process` reads); a new variable left out of it fails here.
        let declared: Vec<&str> = include_str!("../vars.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("pub const ")?.split_once(": &str = \""))
            .map(|(_, value)| value.trim_end_matches("\";"))
            .collect();
        assert_eq!(declared.len(), vars::ALL.len(), "{declared:?}");
        for var in declared {
            assert!(vars::ALL.contains(&var), "{var} is not in vars::ALL, so it is never read");
        }
        let s = settings(
            &[
                (vars::PAGER, "most"),
                (vars::GEMINI_CLI_HOME, "/g"),
                (vars::CLAUDE_CONFIG_DIR, "/c"),
                (vars::CODEX_HOME, "/x"),
            ],
            Flags::default(),
            None,
        )
        .unwrap();
        assert_eq!(s.pager.as_deref(), Some("most"));
        assert_eq!(s.gemini_home, Some(PathBuf::from("/g")));
        assert_eq!(s.claude_home, Some(PathBuf::from("/c")));
        assert_eq!(s.codex_home, Some(PathBuf::from("/x")));
        let s = settings(&[(vars::USER_HOME, "/h")], Flags::default(), None).unwrap();
        assert_eq!(s.claude_home, Some(PathBuf::from("/h/.claude")));
        assert_eq!(s.codex_home, Some(PathBuf::from("/h/.codex")));
    }

    #[test]
    fn render_comes_from_the_file_and_hyperlinks_from_the_terminal() {
        let s = settings(&[], Flags::default(), None).unwrap();
        assert_eq!(s.render, Sourced { value: Render::Auto, source: Source::Default });
        assert!(!s.hyperlinks);
        let s = settings(&[], Flags::default(), Some("render = \"never\"\n")).unwrap();
        assert_eq!(s.render, Sourced { value: Render::Never, source: Source::File });
        // `--raw` is the flag's form of "never", over the file.
        let raw = Flags { render: Some(Render::Never), ..Flags::default() };
        let s = settings(&[], raw, Some("render = \"always\"\n")).unwrap();
        assert_eq!(s.render, Sourced { value: Render::Never, source: Source::Flag });
        assert!(settings(&[], Flags::default(), Some("render = \"sometimes\"\n")).is_err());
        let links = |env: &[(&'static str, &str)]| {
            settings(env, Flags::default(), None).unwrap().hyperlinks
        };
        assert!(links(&[(vars::TERM_PROGRAM, "iTerm.app")]));
        assert!(links(&[(vars::VTE_VERSION, "7600")]));
        assert!(!links(&[(vars::VTE_VERSION, "4000")]));
        assert!(!links(&[(vars::VTE_VERSION, "7600"), (vars::TERM, "tmux-256color")]));
        assert!(links(&[(vars::TERM, "tmux-256color"), (vars::FORCE_HYPERLINK, "1")]));
        // Inside tmux or screen with the outer terminal's variables and TERM passed through.
        let outer = (vars::TERM, "xterm-256color");
        assert!(!links(&[
            outer,
            (vars::VTE_VERSION, "7600"),
            (vars::TMUX, "/tmp/tmux-1/default,1,0")
        ]));
        assert!(!links(&[outer, (vars::WT_SESSION, "x"), (vars::STY, "123.pts-0.host")]));
        assert!(links(&[outer, (vars::TMUX, "/tmp/t,1,0"), (vars::FORCE_HYPERLINK, "1")]));
        assert!(!links(&[(vars::WT_SESSION, "x"), (vars::FORCE_HYPERLINK, "0")]));
    }

    #[test]
    fn budgets_per_engine_and_model_and_the_token_estimate() {
        let file = "[engines.claude]\ncontext_budget = 1000\nbytes_per_token = 2.0\n\
                    model_budgets = { \"big\" = 5000 }\n";
        let s = settings(&[], Flags::default(), Some(file)).unwrap();
        let claude = &s.engines["claude"];
        assert_eq!(claude.budget(None), 1000);
        assert_eq!(claude.budget(Some("other")), 1000);
        assert_eq!(claude.budget(Some("big")), 5000);
        assert_eq!(claude.tokens(1001), 501);
        let gemini = &s.engines["gemini"];
        assert_eq!(gemini.budget(None), engine::gemini::SPEC.context_budget);
        assert_eq!(gemini.tokens(35), 10);
        assert!(
            settings(&[], Flags::default(), Some("[engines.claude]\nbytes_per_token = 0\n"))
                .is_err()
        );
        assert!(settings(&[], Flags::default(), Some("[compaction]\nthreshold = 2\n")).is_err());
        // A number far out of range is named as written, not in hundreds of digits.
        for (config, named) in [
            ("[engines.claude]\nbytes_per_token = 1e-300\n", "not 1e-300"),
            ("[compaction]\nthreshold = 1e300\n", "not 1e300"),
        ] {
            let e = settings(&[], Flags::default(), Some(config)).unwrap_err();
            let e = format!("{e:#}");
            assert!(e.contains(named) && e.len() < 300, "{e}");
        }
        let s = settings(
            &[],
            Flags { no_compact: true, ..Flags::default() },
            Some("[compaction]\nenabled = true\n"),
        )
        .unwrap();
        assert!(!s.compaction.enabled.value);
    }

    #[test]
    fn the_documented_keys_are_the_keys() {
        let value = |k: &str| match k {
            "render" => "auto",
            "sync" => "after-turn",
            _ => "x",
        };
        let mut file =
            FILE_KEYS.iter().map(|k| format!("{k} = \"{}\"\n", value(k))).collect::<String>();
        file.push_str("[compaction]\n");
        for key in COMPACTION_KEYS {
            let value = if *key == "enabled" {
                "true"
            } else if *key == "threshold" {
                "0.5"
            } else {
                "1"
            };
            file.push_str(&format!("{key} = {value}\n"));
        }
        file.push_str("[engines.x]\n");
        for key in ENGINE_KEYS {
            let value = match *key {
                "command" | "acp" | "args" | "version_args" => "[\"x\"]",
                "system_prompt" | "history" => "\"inline\"",
                "max_input_bytes" | "retries" | "context_budget" => "1",
                "bytes_per_token" => "3.5",
                "model_budgets" => "{ m = 1 }",
                _ => "\"x\"",
            };
            file.push_str(&format!("{key} = {value}\n"));
        }
        File::parse(Path::new("c"), &file).unwrap();
        assert!(File::parse(Path::new("c"), "[engines.x]\nnot_a_key = 1\n").is_err());
    }

    /// A sample value of each `[engines.NAME]` key, as the file writes it.
    fn sample(key: &str) -> &'static str {
        match key {
            "command" | "acp" | "args" | "version_args" => "[\"x\"]",
            "system_prompt" | "history" => "\"inline\"",
            "max_input_bytes" | "retries" | "context_budget" => "1",
            "bytes_per_token" => "3.5",
            "model_budgets" => "{ m = 1 }",
            "keep_warm" | "standby" => "\"5m\"",
            _ => "\"x\"",
        }
    }

    #[test]
    fn which_engine_keys_apply_comes_from_each_kinds_spec() {
        // Every key the file takes applies to some kind, and each kind's keys are file keys.
        let checked: Vec<&str> =
            engines::keys_set(&EngineFile::default()).iter().map(|k| k.0).collect();
        assert_eq!(checked, ENGINE_KEYS);
        for spec in engine::KINDS {
            assert!(spec.keys.iter().all(|k| ENGINE_KEYS.contains(k)), "{}", spec.name);
        }
        for key in ENGINE_KEYS {
            assert!(engine::KINDS.iter().any(|s| s.keys.contains(key)), "{key} applies nowhere");
        }
        // A key set for an engine is taken exactly when its kind's spec lists it.
        for spec in engine::KINDS {
            let (section, base) = match spec.name {
                "command" | "acp" => ("x", format!("{} = [\"x\"]\n", spec.name)),
                builtin => (builtin, String::new()),
            };
            for key in ENGINE_KEYS.iter().filter(|k| **k != spec.name) {
                let model_arg = if *key == "model" && spec.keys.contains(&"model_arg") {
                    "model_arg = \"-m\"\n"
                } else {
                    ""
                };
                let file =
                    format!("[engines.{section}]\n{base}{model_arg}{key} = {}\n", sample(key));
                let taken = settings(&[], Flags::default(), Some(&file));
                assert_eq!(
                    taken.is_ok(),
                    spec.keys.contains(key),
                    "{}: {file}\n{taken:?}",
                    spec.name
                );
            }
        }
        // A command engine's model reaches it only by `model_arg`.
        let dropped = "[engines.x]\ncommand = [\"x\"]\nmodel = \"m\"\n";
        let err = settings(&[], Flags::default(), Some(dropped)).unwrap_err().to_string();
        assert!(err.contains(":3: [engines.x] `model` needs `model_arg`"), "{err}");
    }

    #[test]
    fn a_malformed_file_names_its_line() {
        let err =
            settings(&[], Flags::default(), Some("engine = \"claude\"\nmodel = \n")).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("/h/.cca/config.toml:2:"), "{text}");
        let err = settings(&[], Flags::default(), Some("colour = true\n")).unwrap_err();
        assert!(err.to_string().contains(":1:1"), "{err}");
    }

    #[test]
    fn errors_found_after_parsing_name_their_line() {
        let text = "engine = \"claude\"\n\n[engines.\"mine\"]\ncommand = [\"x\"]\n\
                    retries = 2\n[compaction]\n  threshold = 3\n";
        let place = Place { path: Path::new("c.toml"), text };
        assert_eq!(place.line("", Some("engine")), Some(1));
        assert_eq!(place.line("engines.mine", None), Some(3));
        assert_eq!(place.line("engines.mine", Some("retries")), Some(5));
        assert_eq!(place.line("compaction", Some("threshold")), Some(7));
        assert_eq!(place.line("compaction", Some("keep_recent")), None);
        let err = settings(&[], Flags::default(), Some(text)).unwrap_err();
        assert!(
            err.to_string().starts_with("/h/.cca/config.toml:5: [engines.mine] `retries`"),
            "{err}"
        );
    }

    #[test]
    fn engine_programs_come_from_env_then_file() {
        let file = Some("[engines.claude]\nprogram = \"/opt/claude\"\n");
        let s = settings(&[], Flags::default(), file).unwrap();
        assert_eq!(s.engines["claude"].program, "/opt/claude");
        let s = settings(&[(vars::CLAUDE, "/env/claude")], Flags::default(), file).unwrap();
        assert_eq!(s.engines["claude"].program, "/env/claude");
        assert_eq!(s.engines["gemini"].program, "gemini");
        assert_eq!(s.engines["claude"].tools.as_deref(), Some("WebSearch,WebFetch"));
    }

    #[test]
    fn command_engines_are_declared_in_the_file() {
        let file = Some("[engines.echo]\ncommand = [\"llm\", \"-m\", \"echo\"]\n");
        let s =
            settings(&[], Flags { engine: Some("echo".into()), ..Flags::default() }, file).unwrap();
        let echo = &s.engines["echo"];
        assert_eq!(echo.spec, &engine::command::SPEC);
        assert_eq!(echo.program, "llm");
        assert_eq!(echo.args, ["-m", "echo"]);
        assert!(
            settings(&[], Flags { engine: Some("nope".into()), ..Flags::default() }, None).is_err()
        );
        assert!(settings(&[], Flags::default(), Some("[engines.x]\nmodel = \"m\"\n")).is_err());
    }

    #[test]
    fn bad_names_and_homes_are_refused() {
        let flags = Flags { prompt: Some("../../etc/passwd".into()), ..Flags::default() };
        assert!(settings(&[], flags, None).is_err());
        assert!(home(&Env::from_pairs(&[(vars::HOME, "relative/dir")])).is_err());
        assert_eq!(
            home(&Env::from_pairs(&[(vars::USER_HOME, "/home/u")])).unwrap().value,
            PathBuf::from("/home/u/.cca")
        );
    }
}
