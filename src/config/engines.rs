//! The engines of the settings: the built-in ones (claude, gemini, codex) with what the config file and
//! environment change of them, and the engines the file declares (`command`, `acp`); which key
//! applies to which kind, and how long one is kept between turns.

use std::collections::BTreeMap;
use std::ffi::OsString;

use anyhow::Result;

use super::{EngineFile, Env, File, Place, Source};
use crate::engine::{self, BYTES_PER_TOKEN, EngineConfig, HistoryMode, SystemPromptMode};

/// The most characters an engine's name (or a model's) may have.
pub(crate) const LONGEST_NAME: usize = 64;

fn bytes_per_token(engine: &str, value: Option<f64>, place: &Place) -> Result<f64> {
    match value {
        None => Ok(BYTES_PER_TOKEN),
        Some(v) if (0.5..=20.0).contains(&v) => Ok(v),
        Some(v) => Err(place.error(
            &format!("engines.{engine}"),
            Some("bytes_per_token"),
            format!("[engines.{engine}] bytes_per_token must be between 0.5 and 20, not {v:?}"),
        )),
    }
}

/// The keys of an `[engines.NAME]` table, each with whether it is set there.
pub(super) fn keys_set(f: &EngineFile) -> [(&'static str, bool); 19] {
    [
        ("program", f.program.is_some()),
        ("command", f.command.is_some()),
        ("acp", f.acp.is_some()),
        ("args", !f.args.is_empty()),
        ("model", f.model.is_some()),
        ("model_arg", f.model_arg.is_some()),
        ("version_args", f.version_args.is_some()),
        ("system_prompt", f.system_prompt.is_some()),
        ("system_prompt_arg", f.system_prompt_arg.is_some()),
        ("history", f.history.is_some()),
        ("tools", f.tools.is_some()),
        ("max_input_bytes", f.max_input_bytes.is_some()),
        ("retries", f.retries.is_some()),
        ("policy", f.policy.is_some()),
        ("context_budget", f.context_budget.is_some()),
        ("model_budgets", !f.model_budgets.is_empty()),
        ("bytes_per_token", f.bytes_per_token.is_some()),
        ("keep_warm", f.keep_warm.is_some()),
        ("standby", f.standby.is_some()),
    ]
}

/// Refuses a key of `[engines.NAME]` that does nothing for its kind of engine (the kind's
/// [`Spec::keys`](engine::Spec::keys)): set and ignored, it would only mislead (`cca config`
/// would show it as set). A command engine's `model` needs `model_arg` to reach it.
fn check_applies(name: &str, spec: &engine::Spec, f: &EngineFile, place: &Place) -> Result<()> {
    let section = format!("engines.{name}");
    let kind = spec.name;
    if let Some((key, _)) = keys_set(f).into_iter().find(|(k, set)| *set && !spec.keys.contains(k))
    {
        let whose: Vec<String> = engine::KINDS
            .iter()
            .filter(|other| other.keys.contains(&key))
            .map(|other| match other.name {
                "command" | "acp" => format!("engines declared with `{}`", other.name),
                builtin => builtin.to_string(),
            })
            .collect();
        let whose = match whose.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => "no engine".to_string(),
        };
        let instead = match (key, kind) {
            ("command" | "acp", _) => format!("; {name} is built in: use `program` and `args`"),
            ("program" | "args", "command" | "acp") => {
                format!("; put the program and its arguments in `{kind}`")
            }
            ("model", "acp") => "; ACP has no way to choose an agent's model: choose it in the \
                                 agent's own settings"
                .to_string(),
            _ => String::new(),
        };
        let message = format!(
            "[engines.{name}] `{key}` does not apply to {name}: it is for {whose}{instead}"
        );
        return Err(place.error(&section, Some(key), message));
    }
    if spec.keys.contains(&"model_arg") && f.model.is_some() && f.model_arg.is_none() {
        let message = format!(
            "[engines.{name}] `model` needs `model_arg`, the flag that passes it to the program \
             (`model_arg = \"-m\"`): without it the model would not reach {name}"
        );
        return Err(place.error(&section, Some("model"), message));
    }
    Ok(())
}

/// The built-in engines plus those declared in the config file, with env overrides applied.
pub(super) fn engines(
    env: &Env,
    file: &File,
    place: &Place,
) -> Result<BTreeMap<String, EngineConfig>> {
    let mut engines = BTreeMap::new();
    for spec in engine::BUILTIN {
        let (name, var) = (spec.name, spec.program_var.expect("built in"));
        let f = file.engines.get(name).cloned().unwrap_or_default();
        check_applies(name, spec, &f, place)?;
        let keep_warm = idle(name, "keep_warm", (&f.keep_warm, &file.keep_warm), place)?;
        let standby = idle(name, "standby", (&f.standby, &file.standby), place)?;
        let (program, program_source) = match (env.os(var), &f.program) {
            (Some(p), _) => (p.clone(), Source::Env(var)),
            (None, Some(p)) => (p.clone().into_os_string(), Source::File),
            (None, None) => (OsString::from(name), Source::Default),
        };
        engines.insert(
            name.to_string(),
            EngineConfig {
                name: name.to_string(),
                spec,
                program,
                program_source: program_source.to_string(),
                program_from_var: match program_source {
                    Source::Env(var) => Some(var),
                    _ => None,
                },
                args: f.args,
                model_arg: None,
                version_args: Some(vec!["--version".into()]),
                system_prompt: f.system_prompt.unwrap_or_default(),
                system_prompt_arg: None,
                // Real turns: each request repeats the previous one, which the provider's prompt
                // cache serves (docs/DESIGN.md, "Prompt caching"), for an engine that takes them.
                history: f.history.unwrap_or(match spec.keys.contains(&"history") {
                    true => HistoryMode::Structured,
                    false => HistoryMode::Inline,
                }),
                tools: f.tools.or(spec.default_tools.map(str::to_string)),
                max_input_bytes: f.max_input_bytes.or(spec.max_input_bytes),
                model: f.model,
                retries: f.retries,
                policy: f.policy,
                context_budget: f.context_budget.unwrap_or(spec.context_budget),
                model_budgets: f.model_budgets,
                bytes_per_token: bytes_per_token(name, f.bytes_per_token, place)?,
                // Only an engine that can be kept between turns is (its `Spec::keeps`).
                keep_warm: keep_warm.unwrap_or(Some(KEEP_WARM)).filter(|_| spec.keeps.is_some()),
                standby: standby.flatten().filter(|_| spec.keeps.is_some()),
            },
        );
    }
    for (name, f) in &file.engines {
        if engines.contains_key(name) {
            continue;
        }
        let section = format!("engines.{name}");
        // A name goes into transcripts' headers and every listing: a line of its own, short.
        if name.is_empty()
            || name.contains(['/', '\\'])
            || name.starts_with('.')
            || name.chars().any(char::is_control)
            || name.chars().count() > LONGEST_NAME
        {
            let shown: String = name
                .chars()
                .take(LONGEST_NAME)
                .map(|c| if c.is_control() { '?' } else { c })
                .collect();
            let message = format!(
                "`{shown}` is not a usable engine name (at most {LONGEST_NAME} characters, no control characters, `/` or leading `.`)"
            );
            return Err(place.error(&section, None, message));
        }
        // A program that reads a prompt on stdin, or an ACP agent.
        let (command, kind, spec) = match (&f.command, &f.acp) {
            (Some(command), None) if !command.is_empty() => {
                (command, "command", &engine::command::SPEC)
            }
            (None, Some(agent)) if !agent.is_empty() => (agent, "acp", &engine::acp_agent::SPEC),
            (Some(_), Some(_)) => {
                let message = format!(
                    "[engines.{name}] takes `command` (a program that reads the prompt on stdin) \
                     or `acp` (an ACP agent), not both"
                );
                return Err(place.error(&section, Some("acp"), message));
            }
            _ => {
                let message = format!(
                    "[engines.{name}] needs `command`, the program and its arguments, for example \
                     command = [\"llm\", \"-m\", \"echo\"]; or `acp`, an ACP agent's, for \
                     example acp = [\"gemini\", \"--acp\"]"
                );
                let key = match (&f.command, &f.acp) {
                    (Some(_), _) => Some("command"),
                    (None, Some(_)) => Some("acp"),
                    (None, None) => None,
                };
                return Err(place.error(&section, key, message));
            }
        };
        check_applies(name, spec, f, place)?;
        let system_prompt = f.system_prompt.unwrap_or_default();
        if system_prompt == SystemPromptMode::Native && kind == "acp" {
            let message = format!(
                "[engines.{name}] system_prompt = \"native\": ACP gives an agent no system prompt; \
                 cca sends it inline"
            );
            return Err(place.error(&section, Some("system_prompt"), message));
        }
        if system_prompt == SystemPromptMode::Native && f.system_prompt_arg.is_none() {
            let message = format!(
                "[engines.{name}] system_prompt = \"native\" needs system_prompt_arg, the flag that takes it"
            );
            return Err(place.error(&section, Some("system_prompt"), message));
        }
        if f.history == Some(HistoryMode::Structured) {
            let takers: Vec<&str> = crate::engine::KINDS
                .iter()
                .filter(|kind| kind.keys.contains(&"history") && kind.is_builtin())
                .map(|kind| kind.name)
                .collect();
            let message = format!(
                "[engines.{name}] history = \"structured\" works only with {} (their own session \
                 files); {name} takes the history inline, in its first message: drop the line, or \
                 write history = \"inline\"",
                takers.join(", ")
            );
            return Err(place.error(&section, Some("history"), message));
        }
        engines.insert(
            name.clone(),
            EngineConfig {
                name: name.clone(),
                spec,
                program: OsString::from(&command[0]),
                program_source: Source::File.to_string(),
                program_from_var: None,
                args: command[1..].to_vec(),
                model_arg: f.model_arg.clone(),
                version_args: f.version_args.clone(),
                system_prompt,
                system_prompt_arg: f.system_prompt_arg.clone(),
                history: HistoryMode::Inline,
                tools: f.tools.clone(),
                max_input_bytes: f.max_input_bytes,
                model: f.model.clone(),
                retries: None,
                policy: None,
                context_budget: f.context_budget.unwrap_or(spec.context_budget),
                model_budgets: f.model_budgets.clone(),
                bytes_per_token: bytes_per_token(name, f.bytes_per_token, place)?,
                keep_warm: idle(name, "keep_warm", (&f.keep_warm, &file.keep_warm), place)?
                    .unwrap_or(Some(KEEP_WARM)),
                standby: idle(name, "standby", (&f.standby, &file.standby), place)?.flatten(),
            },
        );
    }
    Ok(engines)
}

/// How long a front end that outlives a turn keeps an engine waiting for the next one when
/// nothing says otherwise.
pub const KEEP_WARM: std::time::Duration = std::time::Duration::from_secs(600);

/// An idle time (`keep_warm`, `standby`) of `[engines.NAME]`, else the top-level one: `None`
/// when neither sets it, `Some(None)` for off.
fn idle(
    name: &str,
    key: &str,
    (own, top): (&Option<String>, &Option<String>),
    place: &Place,
) -> Result<Option<Option<std::time::Duration>>> {
    let section = format!("engines.{name}");
    let (value, section) = match (own, top) {
        (Some(v), _) => (v, section.as_str()),
        (None, Some(v)) => (v, ""),
        (None, None) => return Ok(None),
    };
    let parsed = parse_idle(value).ok_or_else(|| {
        place.error(
            section,
            Some(key),
            format!(
                "{key} must be a time like \"10m\", \"90s\" or \"1h\", or \"off\", not {value:?}"
            ),
        )
    })?;
    Ok(Some(parsed))
}

/// `"off"`, or a whole number with a unit: `ms`, `s`, `m`, `h` (`"0s"` is off too); the
/// outer `None`: neither.
fn parse_idle(text: &str) -> Option<Option<std::time::Duration>> {
    let text = text.trim();
    if text == "off" {
        return Some(None);
    }
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = number.parse().ok()?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    }?;
    Some((ms > 0).then(|| std::time::Duration::from_millis(ms)))
}
