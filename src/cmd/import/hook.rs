//! What the tools' hooks run. `cca import --hook TOOL` is the hook itself: it must never slow or
//! fail the tool, so it reads nothing, starts `cca import TOOL --hooked` in the background (its
//! own process group, output to `$CCA_HOME/auto/hooks.log`, the tool's stdin handed over) and
//! exits 0 at once, whatever happened. `--hooked` reads the tool's JSON, waits for the
//! conversation's file to stop growing, and imports that one file as `cca import` would: by
//! the conversation's id, under the imports' lock, so it is never imported twice.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::cli::{HookTool, ImportSource};
use crate::config::Settings;
use crate::error::exit;
use crate::front::terminal::say;

/// `cca import --hook TOOL [-- NOTIFY... JSON]`: always exit 0, errors to the log.
pub(crate) fn hand_over(tool: HookTool, args: &[OsString]) -> u8 {
    let _ = (|| -> Result<()> {
        // The log does not depend on the settings: a config file that cannot be used is said
        // there by the import this starts.
        let (_, store) = crate::session::settings_for_import(|_| {})?;
        let mut log = store.hook_log()?;
        if let Err(e) = start(tool, args, &log) {
            let _ = writeln!(log, "{} {} hook: {e:#}", now(), super::auto::name(tool));
        }
        Ok(())
    })();
    exit::OK
}

fn start(tool: HookTool, args: &[OsString], log: &std::fs::File) -> Result<()> {
    let exe = std::env::current_exe().context("cannot tell where cca's own program is")?;
    let name = super::auto::name(tool);
    let mut import: Vec<OsString> = ["import", name, "--hooked"].map(OsString::from).to_vec();
    // A run cca started as its engine is in cca already: only the user's own notify runs.
    let cca_s_own = std::env::var_os(crate::run::ENGINE_RUN).is_some();
    if tool == HookTool::Codex {
        // codex runs one notify program: a notify of the user's comes after `--`, and is run
        // first, with codex's JSON last as codex would have given it.
        let (json, theirs) = args.split_last().context("codex gave its hook no JSON")?;
        if let Some((program, rest)) = theirs.split_first() {
            let with_json: Vec<OsString> = rest.iter().chain([json]).cloned().collect();
            // Their notify not starting (uninstalled, say) is logged; the import goes on.
            if let Err(e) = crate::run::detach(Path::new(program), &with_json, false, log) {
                let mut log = log;
                let _ = writeln!(log, "{} codex hook: your notify: {e:#}", now());
            }
        }
        import.extend([OsString::from("--"), json.clone()]);
    }
    if cca_s_own {
        return Ok(());
    }
    // Claude Code and gemini write their JSON to the hook's stdin: the import reads it.
    crate::run::detach(&exe, &import, tool != HookTool::Codex, log)
}

/// `cca import TOOL --hooked [-- JSON]`, in the background: imports the conversation the
/// tool's JSON names.
pub(crate) fn import_ended(source: ImportSource, args: &[OsString]) -> Result<u8> {
    let (settings, _) = crate::session::settings_for_import(|_| {})?;
    let event: Value = match args.last() {
        Some(json) => serde_json::from_str(&json.to_string_lossy()),
        // One JSON value, read up to its end: the tool need not close the pipe.
        None => serde_json::Deserializer::from_reader(std::io::stdin())
            .into_iter::<Value>()
            .next()
            .unwrap_or(Ok(Value::Null)),
    }
    .context("the hook's JSON cannot be read")?;
    let file = match source {
        ImportSource::Codex => {
            let thread = event["thread-id"].as_str().context("codex's JSON has no thread-id")?;
            rollout_of(&settings, thread)
        }
        _ => event["transcript_path"].as_str().filter(|p| !p.is_empty()).map(PathBuf::from),
    };
    say(&format!("{} {} ended: {}", now(), tool_name(source), event_summary(&event)));
    let Some(file) = file else {
        say("cca: nothing to import: the hook names no conversation file");
        return Ok(exit::OK);
    };
    settled(&file);
    super::import(source, &[file], false)
}

/// Waits (a few seconds at most) until `file` stops growing: a tool may still be writing its
/// last line when its hook starts.
fn settled(file: &Path) {
    let size = || std::fs::metadata(file).map(|m| m.len()).ok();
    let mut last = size();
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(150));
        let now = size();
        if now == last && now.is_some() {
            return;
        }
        last = now;
    }
}

/// codex's rollout file of a thread: `~/.codex/sessions/YYYY/MM/DD/rollout-...-THREAD.jsonl`.
fn rollout_of(settings: &Settings, thread: &str) -> Option<PathBuf> {
    let suffix = format!("-{thread}.jsonl");
    let files = super::sources(settings, crate::import::Tool::Codex, &[]).ok()?;
    files.into_iter().rev().find(|f| f.to_string_lossy().ends_with(&suffix))
}

fn tool_name(source: ImportSource) -> &'static str {
    match source {
        ImportSource::Claude => "claude",
        ImportSource::Gemini => "gemini",
        ImportSource::Codex => "codex",
        ImportSource::Llm => "llm",
    }
}

/// The conversation's id and why the hook ran, as the tool said.
fn event_summary(event: &Value) -> String {
    let field = |k: &str| event[k].as_str().unwrap_or("");
    let id = [field("session_id"), field("thread-id")].concat();
    let why = [field("reason"), field("type")].concat();
    format!("{id} ({why})")
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
