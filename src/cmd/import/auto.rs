//! `cca import --auto on|off`: cca's end-of-session hook put into, and taken out of, the
//! settings of Claude Code, gemini-cli and codex; and what `cca doctor` says of it.
//!
//! The edit itself is `import::auto`'s (text in, text out); the files go through `store`. Before
//! a file is changed, `store` keeps a record of it as it was and as cca wrote it: `off` on a
//! file still as cca left it writes the original back byte for byte (or removes the file, if
//! there was none), and on a file changed since takes out cca's entry alone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::cli::{HookTool, Switch};
use crate::config::{Settings, Source};
use crate::error::{Failure, exit};
use crate::front::terminal::say;
use crate::import::Tool;
use crate::import::auto::{self as edit, Refusal};
use crate::store::{self, Store};

/// A tool whose hook cca can be, and where its settings are.
pub(crate) struct Target {
    pub tool: HookTool,
    /// The tool's own folder: the tool counts as found when it exists.
    pub dir: PathBuf,
    pub file: PathBuf,
}

impl Target {
    pub(crate) fn name(&self) -> &'static str {
        name(self.tool)
    }
}

pub(crate) fn name(tool: HookTool) -> &'static str {
    match tool {
        HookTool::Claude => "claude",
        HookTool::Gemini => "gemini",
        HookTool::Codex => "codex",
    }
}

/// What `store` keeps of a settings file cca changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    file: PathBuf,
    /// The file before cca's hook went in; `None`: there was no file.
    original: Option<String>,
    written: String,
}

/// The three tools' settings files: Claude Code's in `$CLAUDE_CONFIG_DIR` (else ~/.claude),
/// gemini's in `$GEMINI_CLI_HOME/.gemini` (else ~/.gemini), codex's in `$CODEX_HOME` (else
/// ~/.codex).
pub(crate) fn targets(settings: &Settings) -> Vec<Target> {
    let mut found = Vec::new();
    if let Some(dir) = settings.claude_home.clone() {
        found.push(Target { tool: HookTool::Claude, file: dir.join("settings.json"), dir });
    }
    if let Some(home) = &settings.gemini_home {
        let dir = home.join(".gemini");
        found.push(Target { tool: HookTool::Gemini, file: dir.join("settings.json"), dir });
    }
    if let Some(dir) = settings.codex_home.clone() {
        found.push(Target { tool: HookTool::Codex, file: dir.join("config.toml"), dir });
    }
    found
}

/// `cca import --auto on|off`
pub(crate) fn switch(settings: &Settings, store: &Store, switch: Switch) -> Result<u8> {
    let exe = std::env::current_exe().context("cannot tell where cca's own program is")?;
    // A home set other than by default goes into the hook: the tool may be started where
    // CCA_HOME is not set (from an editor, a desktop launcher).
    let home = match settings.home.source {
        Source::Default => None,
        _ => Some(settings.home.value.as_path()),
    };
    let hook = Hook { exe: &exe, home };
    // A hook is known for cca's by its program's name: one cca would not know again could
    // never be replaced or taken out.
    if switch == Switch::On && exe.file_name().is_none_or(|n| n != "cca") {
        bail!(
            Failure::usage(format!(
                "cca's program is {}: a hook is known for cca's by the name `cca`, and this one would not be",
                exe.display()
            ))
            .hint("run `cca import --auto on` from cca installed as `cca` (`make install` puts it so)")
        );
    }
    let targets = targets(settings);
    // No home to find the tools' settings in (HOME unset, and none in the password file).
    if targets.is_empty() {
        bail!(
            Failure::usage(
                "cannot tell where your home folder is, so where the tools keep their settings"
            )
            .hint("set HOME (or CLAUDE_CONFIG_DIR, GEMINI_CLI_HOME), then run it again")
        );
    }
    let mut failed: Vec<(&str, anyhow::Error)> = Vec::new();
    for target in targets {
        let done = match switch {
            Switch::On if !target.dir.is_dir() => {
                say(&format!(
                    "cca: {}: not found ({}), left alone",
                    target.name(),
                    no_folder(&target.dir)
                ));
                continue;
            }
            Switch::On => on(store, &target, &hook),
            Switch::Off => off(store, &target),
        };
        match done {
            Ok(what) => say(&format!("cca: {}: {what}", target.name())),
            Err(e) => failed.push((target.name(), e)),
        }
    }
    // Each failure is said once: one alone as the error, several each with its hint, then
    // how many.
    if failed.len() == 1 {
        let (name, e) = failed.remove(0);
        return Err(e.context(name));
    }
    for (name, e) in &failed {
        say(&format!("cca: {name}: {e:#}"));
        if let Some(hint) = crate::error::hint_of(e) {
            say(&format!("hint: {hint}"));
        }
    }
    match failed.len() {
        0 => Ok(exit::OK),
        n => Err(Failure::new(
            exit::ERROR,
            format!("{n} tools' settings were left as they were (above)"),
        )
        .into()),
    }
}

/// What the hook runs: cca's program, and its home when one was set.
struct Hook<'a> {
    exe: &'a Path,
    home: Option<&'a Path>,
}

fn on(store: &Store, target: &Target, hook: &Hook) -> Result<String> {
    let said = on_unwarned(store, target, hook)?;
    Ok(match hooks_turned_off(target) {
        Some(setting) => format!(
            "{said}; but its settings turn every hook off (`{setting}`), so nothing is imported until that is taken out"
        ),
        None => said,
    })
}

/// The setting of a tool's that keeps every hook from running (Claude Code's
/// `disableAllHooks`, gemini's `hooksConfig.enabled` false), if its settings hold it (read
/// with their comments aside).
fn hooks_turned_off(target: &Target) -> Option<&'static str> {
    let text = store::read_settings(&target.file).ok()??;
    let settings = crate::import::auto::settings_value(&text)?;
    match target.tool {
        HookTool::Claude => {
            (settings["disableAllHooks"] == true).then_some("\"disableAllHooks\": true")
        }
        HookTool::Gemini => (settings["hooksConfig"]["enabled"] == false)
            .then_some("\"hooksConfig\": {\"enabled\": false}"),
        HookTool::Codex => None,
    }
}

fn on_unwarned(store: &Store, target: &Target, hook: &Hook) -> Result<String> {
    let text = store::read_settings(&target.file)?;
    let edited = match target.tool {
        HookTool::Codex => edit::codex_on(text.as_deref(), &codex_argv(hook)?),
        tool => edit::json_on(text.as_deref(), name(tool), &hook_command(hook, tool)?),
    };
    let Some(new) = edited.map_err(|r| refused(target, r, Switch::On))? else {
        return Ok(format!("on already ({})", target.file.display()));
    };
    // Before the record is kept: a file that cannot be changed leaves no trace. (One that
    // has the hook already, read-only, is on: above.)
    store::settings_writable(&target.file)?;
    // Replacing a hook of cca's (cca moved) in a file as cca left it: the user's original is
    // still the one kept. A file changed since, or with a hook this home did not write
    // (another CCA_HOME's, or one whose record was lost), has the user's latest in it: the
    // original is the file without cca's hooks, so that `off` keeps those changes and takes
    // every hook of cca's.
    let mut records = records(store, target.tool)?;
    let kept = records.iter().position(|r| r.file == target.file);
    let original = match kept.map(|i| records.remove(i)) {
        Some(record) if text.as_deref() == Some(record.written.as_str()) => record.original,
        _ => text.map(|text| match without_ours(target.tool, &text) {
            Ok(Some(without)) => without,
            _ => text,
        }),
    };
    // The record first: a file with cca's hook never lacks the way back. One record for each
    // file: the tool's folder may be elsewhere for a while (CLAUDE_CONFIG_DIR).
    records.push(Record { file: target.file.clone(), original, written: new.clone() });
    keep_records(store, target.tool, &records)?;
    store::write_settings(&target.file, &new)?;
    Ok(format!("on: each conversation is imported as it ends ({})", target.file.display()))
}

/// Takes cca's hook out of every file of the tool's it was put in (each has its record, even
/// if the tool's folder was set elsewhere since) and out of the tool's file now.
fn off(store: &Store, target: &Target) -> Result<String> {
    let mut records = records(store, target.tool)?;
    // The tool's file now, if no record names it: cca's entry alone is taken out of it.
    if !records.iter().any(|r| r.file == target.file) {
        records.insert(
            0,
            Record { file: target.file.clone(), original: None, written: String::new() },
        );
    }
    let mut said = Vec::new();
    while let Some(record) = records.last() {
        // A failure leaves this record and those after it kept: no way back is lost.
        let done = off_in(target, record)?;
        records.pop();
        let left: Vec<Record> = records.iter().filter(|r| !r.written.is_empty()).cloned().collect();
        keep_records(store, target.tool, &left)?;
        said.extend(done);
    }
    Ok(match said.is_empty() {
        true => "off".into(),
        false => format!("off: {}", said.join("; ")),
    })
}

/// cca's hook out of the file `record` is of: the original back when the file is as cca left
/// it, else cca's entry alone taken out. What was done, or `None` when there was nothing to do.
fn off_in(target: &Target, record: &Record) -> Result<Option<String>> {
    let file = &record.file;
    let Some(text) = store::read_settings(file)? else { return Ok(None) };
    if !record.written.is_empty() && record.written == text {
        match &record.original {
            Some(original) => store::write_settings(file, original)?,
            None => store::remove_settings(file)?,
        }
        return Ok(Some(format!("{} is back as it was", file.display())));
    }
    // A file that names no hook of cca's is not read (it may have comments cca cannot keep).
    let names_ours = match target.tool {
        HookTool::Codex => text.contains("\"--hook\"") || edit::codex_has_ours(&text),
        tool => text.contains(&format!("--hook {}", name(tool))),
    };
    if !names_ours {
        return Ok(None);
    }
    let Some(new) =
        without_ours(target.tool, &text).map_err(|r| refused(target, r, Switch::Off))?
    else {
        return Ok(None);
    };
    store::write_settings(file, &new)?;
    Ok(Some(format!("cca's hook taken out of {} (changed since; the rest kept)", file.display())))
}

/// What cca noted of the files of `tool` it put its hook in: one record each (an older cca
/// kept one record alone).
fn records(store: &Store, tool: HookTool) -> Result<Vec<Record>> {
    let Some(text) = store.auto_record(name(tool))? else { return Ok(Vec::new()) };
    Ok(serde_json::from_str::<Vec<Record>>(&text)
        .or_else(|_| serde_json::from_str::<Record>(&text).map(|r| vec![r]))
        .unwrap_or_default())
}

fn keep_records(store: &Store, tool: HookTool, records: &[Record]) -> Result<()> {
    match records.is_empty() {
        true => store.forget_auto_record(name(tool)),
        false => store.keep_auto_record(name(tool), &serde_json::to_string(records)?),
    }
}

/// The settings' text with cca's hook taken out; `None` when it has none.
fn without_ours(tool: HookTool, text: &str) -> Result<Option<String>, Refusal> {
    match tool {
        HookTool::Codex => edit::codex_off(text),
        tool => edit::json_off(text, name(tool)),
    }
}

/// Why `dir` is no tool's folder: it is not there, or it is something else (a file named by
/// `CODEX_HOME`, say).
fn no_folder(dir: &Path) -> String {
    match std::fs::metadata(dir) {
        Ok(_) => format!("{} is not a folder", dir.display()),
        Err(_) => format!("{} does not exist", dir.display()),
    }
}

/// What `cca doctor` says of a tool's hook: `on`, `off`, or `not found` (with the folder looked
/// for); and, for a hook that is there but would import nothing here, the problem: its
/// program gone, another home's, or every hook of the tool's turned off.
pub(crate) fn state(
    settings: &Settings,
    store: &Store,
    target: &Target,
) -> (String, Option<String>) {
    if !target.dir.is_dir() {
        return (format!("not found ({})", no_folder(&target.dir)), None);
    }
    let text = store::read_settings(&target.file).ok().flatten().unwrap_or_default();
    let Some((program, home)) = edit::hook_runs(&text, target.name()) else {
        return ("off".into(), None);
    };
    let again = "`cca import --auto on` puts it right";
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    let home =
        home.map(PathBuf::from).or_else(|| settings.user_home.as_ref().map(|h| h.join(".cca")));
    // A program named as a person might write it by hand: found on PATH, or in the home.
    let path = match program.strip_prefix("~/") {
        Some(rest) => settings.user_home.as_ref().map_or(PathBuf::from(&program), |h| h.join(rest)),
        None if !program.contains('/') => which::which(&program).unwrap_or(PathBuf::from(&program)),
        None => PathBuf::from(&program),
    };
    let problem = if !is_program(&path) {
        Some(format!(
            "{}'s hook runs {program}, which is not there: the tool's conversations are not imported; {again}",
            target.name()
        ))
    } else if home.as_deref().is_some_and(|home| !same(home, &store.home)) {
        Some(format!(
            "{}'s hook imports into {}, not this cca home ({}); {again} from this home, if this is the one meant",
            target.name(),
            home.unwrap_or_default().display(),
            store.home.display()
        ))
    } else {
        hooks_turned_off(target).map(|setting| {
            format!("{}'s settings turn every hook off (`{setting}`): nothing is imported until that is taken out", target.name())
        })
    };
    let said = if problem.is_some() { "on, but see problems" } else { "on" };
    (said.into(), problem)
}

/// Whether `path` is a program this user can run.
fn is_program(path: &Path) -> bool {
    path.is_file() && rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
}

/// The hook's command for Claude Code and gemini, which run it with `sh -c` (bash): cca's
/// path (and home) quoted for that shell.
fn hook_command(hook: &Hook, tool: HookTool) -> Result<String> {
    let quoted = |p: &Path| -> Result<String> {
        let text = p.to_str().context("a path that is not UTF-8 cannot go in a hook")?;
        Ok(format!("'{}'", text.replace('\'', r"'\''")))
    };
    let home = match hook.home {
        Some(home) => format!("CCA_HOME={} ", quoted(home)?),
        None => String::new(),
    };
    Ok(format!("{home}{} import --hook {}", quoted(hook.exe)?, name(tool)))
}

/// codex's notify: a program and its arguments, run without a shell; codex adds its JSON last.
fn codex_argv(hook: &Hook) -> Result<Vec<String>> {
    let text = |p: &Path| {
        p.to_str().map(String::from).context("a path that is not UTF-8 cannot go in a hook")
    };
    let mut argv = Vec::new();
    if let Some(home) = hook.home {
        argv.extend(["/usr/bin/env".to_string(), format!("CCA_HOME={}", text(home)?)]);
    }
    argv.push(text(hook.exe)?);
    argv.extend(["import", "--hook", "codex"].map(String::from));
    Ok(argv)
}

fn refused(target: &Target, refusal: Refusal, switch: Switch) -> anyhow::Error {
    let file = target.file.display();
    let by_hand = match target.tool {
        HookTool::Codex => {
            "notify = [\"/path/to/cca\", \"import\", \"--hook\", \"codex\", \"--\"] \
                            (your own notify program, if any, after the --)"
                .to_string()
        }
        tool => format!(
            "\"hooks\": {{\"SessionEnd\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": \
             \"/path/to/cca import --hook {}\"}}]}}]}}",
            name(tool)
        ),
    };
    let problem = match refusal {
        Refusal::Comments => {
            format!("{file} has comments, which cca cannot keep when it edits the file; left alone")
        }
        Refusal::NotParsed(why) => format!("{file} cannot be read ({why}); left alone"),
        Refusal::Shape(why) => format!("{file}: {why}; left alone"),
    };
    let hint = match switch {
        Switch::On => format!(
            "add cca's hook by hand ({by_hand}), or fix the file and run `cca import --auto on` again"
        ),
        Switch::Off => format!(
            "take cca's hook out by hand (the entry that runs `import --hook {}`), or fix the file and run `cca import --auto off` again",
            name(target.tool)
        ),
    };
    Failure::new(exit::ERROR, problem).hint(hint).into()
}

/// Warn this long before a tool's own deletion age.
const MARGIN_DAYS: u64 = 7;

/// Sessions Claude Code or gemini will soon delete (within [`MARGIN_DAYS`] of their deletion
/// age) that cca has not imported: one line per tool, for `cca doctor`.
pub(crate) fn at_risk(settings: &Settings, store: &Store) -> Vec<String> {
    let mut lines = Vec::new();
    for target in targets(settings) {
        let (tool, days, setting) = match target.tool {
            HookTool::Claude => (Tool::Claude, claude_days(&target.file), "cleanupPeriodDays"),
            HookTool::Gemini => match gemini_days(&target.file) {
                Some(days) => (Tool::Gemini, days, "general.sessionRetention.maxAge"),
                None => continue,
            },
            // codex deletes nothing.
            HookTool::Codex => continue,
        };
        let oldest_kept = Duration::from_secs(days.saturating_sub(MARGIN_DAYS) * 86_400);
        let files = super::sources(settings, tool, &[]).unwrap_or_default();
        let old: Vec<PathBuf> = files
            .into_iter()
            .filter(|f| {
                std::fs::metadata(f)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age >= oldest_kept))
            })
            .collect();
        let Ok(left) = super::not_imported(store, tool, old) else { continue };
        if !left.is_empty() {
            lines.push(format!(
                "{} {} session(s) not in cca are {} days old or more, and {} deletes them at {days} \
                 days ({setting}): `cca import {}` keeps them, `cca import --auto on` keeps the \
                 next ones as they end",
                left.len(),
                target.name(),
                days.saturating_sub(MARGIN_DAYS),
                target.name(),
                target.name()
            ));
        }
    }
    lines
}

/// Claude Code's `cleanupPeriodDays` (30 unless set).
fn claude_days(file: &Path) -> u64 {
    let settings = store::read_settings(file).ok().flatten();
    let value = settings.and_then(|t| crate::import::auto::settings_value(&t));
    value.and_then(|v| v["cleanupPeriodDays"].as_u64()).unwrap_or(30)
}

/// gemini's `general.sessionRetention.maxAge` in days ("30d" unless set: gemini-cli 0.61's
/// default), or `None` when retention is off.
fn gemini_days(file: &Path) -> Option<u64> {
    let settings = store::read_settings(file).ok().flatten();
    let value = settings.and_then(|t| crate::import::auto::settings_value(&t));
    let retention = value.map(|v| v["general"]["sessionRetention"].clone()).unwrap_or_default();
    if retention["enabled"] == false {
        return None;
    }
    let age = retention["maxAge"].as_str().unwrap_or("30d");
    let (number, unit) = age.split_at(age.find(|c: char| !c.is_ascii_digit()).unwrap_or(age.len()));
    let n: u64 = number.parse().ok()?;
    match unit {
        "d" => Some(n),
        "w" => Some(n * 7),
        "h" => Some(n / 24),
        "m" => Some(n * 30),
        _ => None,
    }
}
