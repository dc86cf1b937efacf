//! `cca config`: the effective settings, and where each came from.

use anyhow::Result;

use crate::cli::ConfigArgs;
use crate::config::{Flags, PromptChoice, Render, Source};
use crate::engine::{HistoryMode, SystemPromptMode};
use crate::error::exit;
use crate::session;
use crate::vars;

/// `cca config`
pub(crate) fn run(_: &ConfigArgs) -> Result<u8> {
    let (settings, store) = session::settings(&Flags::default())?;
    // Which keys the file itself sets, to tell them from defaults (the file parsed already).
    let file: toml::Table =
        store.read_config()?.and_then(|text| text.parse().ok()).unwrap_or_default();
    let from_file = |path: &[&str]| -> String {
        let mut value: Option<&toml::Value> = None;
        for (i, key) in path.iter().enumerate() {
            value = if i == 0 { file.get(*key) } else { value.and_then(|v| v.get(key)) };
        }
        if value.is_some() { Source::File } else { Source::Default }.to_string()
    };
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mut row =
        |key: &str, value: String, source: String| rows.push((key.to_string(), value, source));

    row("home", settings.home.value.display().to_string(), settings.home.source.to_string());
    row(
        "config file",
        settings.config_path.display().to_string(),
        if settings.config_loaded { "read".into() } else { "absent (defaults apply)".into() },
    );
    match &settings.engine {
        Some(e) => row("engine", e.value.clone(), e.source.to_string()),
        None => row(
            "engine",
            session::default_engine(&settings),
            "default (the first built-in engine on PATH, else the first declared one found)".into(),
        ),
    }
    match &settings.model {
        // A top-level model is the default engine's (the other engines have their own).
        Some(m) => row(
            "model",
            m.value.clone(),
            format!("{} (for {})", m.source, session::default_engine(&settings)),
        ),
        None => row("model", "(the engine's own default)".into(), Source::Default.to_string()),
    }
    let prompt = match &settings.prompt.value {
        PromptChoice::Name(name) => name.clone(),
        PromptChoice::File(path) => path.display().to_string(),
    };
    row("prompt", prompt, settings.prompt.source.to_string());
    match &settings.session {
        Some(s) => row("session", s.value.clone(), s.source.to_string()),
        None => row("session", "(latest)".into(), Source::Default.to_string()),
    }
    match &settings.pager {
        Some(p) => row("pager", p.clone(), Source::Env(vars::PAGER).to_string()),
        None => row("pager", crate::run::DEFAULT_PAGER.into(), Source::Default.to_string()),
    }
    let colour = if settings.color { "on" } else { "off (NO_COLOR or TERM=dumb)" };
    row("colour", colour.into(), "environment".into());
    let render = match settings.render.value {
        Render::Auto => "auto (answers rendered on a terminal)",
        Render::Always => "always (answers rendered, also when piped)",
        Render::Never => "never (answers printed as they are)",
    };
    row("render", render.into(), settings.render.source.to_string());
    let links = if settings.hyperlinks { "on" } else { "off (URLs shown after the text)" };
    row("hyperlinks", links.into(), "environment".into());

    let set_up = store.read_sync_state().ok().flatten().is_some();
    let sync = match (settings.sync_after_turn, set_up) {
        (true, true) => "after-turn (a sync starts in the background after each answered turn)",
        (true, false) => {
            "after-turn, but this machine is not set up to sync: nothing is synced until `cca sync init REMOTE`"
        }
        (false, _) => "by hand (`cca sync`)",
    };
    row("sync", sync.into(), from_file(&["sync"]));

    let c = &settings.compaction;
    row("compaction.enabled", c.enabled.value.to_string(), c.enabled.source.to_string());
    row("compaction.threshold", c.threshold.to_string(), from_file(&["compaction", "threshold"]));
    let keep = from_file(&["compaction", "keep_recent"]);
    row("compaction.keep_recent", c.keep_recent.to_string(), keep);
    let warn = from_file(&["compaction", "warn_tokens"]);
    row("compaction.warn_tokens", c.warn_tokens.to_string(), warn);

    for engine in settings.engines.values() {
        let prefix = format!("engines.{}", engine.name);
        let source = |key: &str| from_file(&["engines", &engine.name, key]);
        let found = crate::run::locate(&settings, engine)
            .map(|p| format!(" → {}", p.display()))
            .unwrap_or_else(|_| " (not found)".into());
        // Only the keys that apply to this kind of engine (`Spec::keys`): the file takes no other.
        let applies = |key: &str| engine.spec.keys.contains(&key);
        let builtin = engine.spec.is_builtin();
        if builtin {
            let program = format!("{}{found}", engine.program.to_string_lossy());
            row(&format!("{prefix}.program"), program, engine.program_source.clone());
        } else {
            // `command` or `acp`: the program and its arguments, as the file writes them.
            let mut words = vec![engine.program.to_string_lossy().into_owned()];
            words.extend(engine.args.iter().cloned());
            let key = engine.spec.name;
            row(&format!("{prefix}.{key}"), format!("{words:?}{found}"), source(key));
        }
        let kind_source = if builtin { "built in".into() } else { Source::File.to_string() };
        row(&format!("{prefix}.kind"), engine.spec.name.into(), kind_source);
        if builtin && !engine.args.is_empty() {
            row(&format!("{prefix}.args"), format!("{:?}", engine.args), source("args"));
        }
        let optional = |value: &Option<String>| value.clone().unwrap_or_else(|| "(none)".into());
        if applies("model") {
            row(&format!("{prefix}.model"), optional(&engine.model), source("model"));
        }
        if applies("model_arg") {
            row(&format!("{prefix}.model_arg"), optional(&engine.model_arg), source("model_arg"));
        }
        let system = match engine.system_prompt {
            SystemPromptMode::Inline => "inline",
            SystemPromptMode::Native => "native",
        };
        row(&format!("{prefix}.system_prompt"), system.into(), source("system_prompt"));
        if applies("system_prompt_arg") {
            let arg = optional(&engine.system_prompt_arg);
            row(&format!("{prefix}.system_prompt_arg"), arg, source("system_prompt_arg"));
        }
        if applies("history") {
            let history = match engine.history {
                HistoryMode::Inline => "inline",
                HistoryMode::Structured => "structured",
            };
            row(&format!("{prefix}.history"), history.into(), source("history"));
        }
        if applies("tools") {
            let tools = engine.tools.as_ref().map(|t| format!("{t:?}"));
            row(&format!("{prefix}.tools"), optional(&tools), source("tools"));
        }
        if applies("retries") {
            let retries = engine.retries.map(|r| r.to_string());
            let retries = retries.unwrap_or_else(|| "(the engine's own)".into());
            row(&format!("{prefix}.retries"), retries, source("retries"));
        }
        if applies("policy") {
            let policy = engine.policy.clone().unwrap_or_else(|| "(cca's own)".into());
            row(&format!("{prefix}.policy"), policy, source("policy"));
        }
        if applies("version_args") {
            let version = engine.version_args.as_ref().map(|a| format!("{a:?}"));
            row(&format!("{prefix}.version_args"), optional(&version), source("version_args"));
        }
        let max = engine.max_input_bytes.map_or_else(|| "(no limit)".into(), |m| m.to_string());
        row(&format!("{prefix}.max_input_bytes"), max, source("max_input_bytes"));
        let budget = engine.context_budget.to_string();
        row(&format!("{prefix}.context_budget"), budget, source("context_budget"));
        for (model, budget) in &engine.model_budgets {
            row(
                &format!("{prefix}.model_budgets.{model}"),
                budget.to_string(),
                source("model_budgets"),
            );
        }
        let per_token = engine.bytes_per_token.to_string();
        row(&format!("{prefix}.bytes_per_token"), per_token, source("bytes_per_token"));
        for (key, idle) in [("keep_warm", engine.keep_warm), ("standby", engine.standby)] {
            if applies(key) {
                let value = idle.map_or_else(|| "off".into(), idle_time);
                let own = source(key);
                let from = if own == Source::Default.to_string() { from_file(&[key]) } else { own };
                row(&format!("{prefix}.{key}"), value, from);
            }
        }
    }
    let key_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let value_width = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0).min(60);
    let mut out = String::new();
    for (key, value, source) in rows {
        let line = if source.is_empty() {
            format!("{key:<key_width$}  {value}\n")
        } else {
            format!("{key:<key_width$}  {value:<value_width$}  [{source}]\n")
        };
        out.push_str(&line);
    }
    super::print(&out)?;
    Ok(exit::OK)
}

/// A `keep_warm` time as the config file writes it: `10m`, `90s`, `250ms`.
fn idle_time(time: std::time::Duration) -> String {
    let ms = time.as_millis();
    match ms {
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}
