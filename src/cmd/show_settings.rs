//! `cca config`: the effective settings, and where each came from.

use anyhow::Result;

use crate::config::{
    EngineKind, Flags, HistoryMode, PromptChoice, Render, Source, SystemPromptMode, vars,
};
use crate::error::exit;
use crate::turn;

pub fn run() -> Result<u8> {
    let (settings, _) = super::settings(&Flags::default())?;
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
            turn::default_engine(&settings),
            "default (first of claude, gemini on PATH)".into(),
        ),
    }
    match &settings.model {
        Some(m) => row("model", m.value.clone(), m.source.to_string()),
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
        None => row("pager", "less -FRX".into(), Source::Default.to_string()),
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

    for engine in settings.engines.values() {
        let kind = match engine.kind {
            EngineKind::Claude => "claude",
            EngineKind::Gemini => "gemini",
            EngineKind::Command => "command",
        };
        let prefix = format!("engines.{}", engine.name);
        let found = crate::call::locate(&settings, engine)
            .map(|p| format!(" → {}", p.display()))
            .unwrap_or_else(|_| " (not found)".into());
        row(
            &format!("{prefix}.program"),
            format!("{}{found}", engine.program.to_string_lossy()),
            engine.program_source.to_string(),
        );
        row(&format!("{prefix}.kind"), kind.into(), "built in".into());
        if !engine.args.is_empty() {
            row(&format!("{prefix}.args"), format!("{:?}", engine.args), Source::File.to_string());
        }
        if let Some(m) = &engine.model {
            row(&format!("{prefix}.model"), m.clone(), Source::File.to_string());
        }
        let system = match engine.system_prompt {
            SystemPromptMode::Inline => "inline",
            SystemPromptMode::Native => "native",
        };
        row(&format!("{prefix}.system_prompt"), system.into(), String::new());
        let history = match engine.history {
            HistoryMode::Inline => "inline",
            HistoryMode::Structured => "structured",
        };
        row(&format!("{prefix}.history"), history.into(), String::new());
        if let Some(tools) = &engine.tools {
            row(&format!("{prefix}.tools"), format!("{tools:?}"), String::new());
        }
        if let Some(max) = engine.max_input_bytes {
            row(&format!("{prefix}.max_input_bytes"), max.to_string(), String::new());
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
