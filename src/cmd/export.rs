//! `cca export claude|gemini|codex ID`: writes a session where that tool keeps its own, in its
//! own format, so the tool's resume opens it; prints the id to resume with on stdout.
//!
//! - claude: `~/.claude/projects/<folder, every character but letters and digits as ->/
//!   <uuid>.jsonl`, one line per message (`type`, `uuid`, `parentUuid`, `sessionId`, `cwd`,
//!   `timestamp`, `message`), as Claude Code 2.1.329 writes them; `claude --resume UUID`.
//! - gemini: `~/.gemini/tmp/<project>/chats/session-<time>-<uuid start>.jsonl`, the project's
//!   short name from gemini's `projects.json` (registered there if the folder is new to it); a
//!   metadata line, then a line per message; `gemini --resume UUID`.
//! - codex: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`, a `session_meta` line,
//!   then a `response_item` per message; `codex resume UUID`.
//!
//! Each exchange becomes a question (with its attachments, as cca frames them) and an answer
//! (the record's text, tool lines included). A session that was never answered exports nothing.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::print;
use crate::cli::{ExportArgs, ExportTool};
use crate::config::{Flags, Settings};
use crate::error::{Failure, exit};
use crate::render::shown_id;
use crate::session::{self, settings};
use crate::store::Store;
use crate::transcript::{self, Kind};

/// One exchange, as the tools take it.
struct Turn {
    question: String,
    asked: Time,
    answer: String,
    answered: Time,
    model: Option<String>,
}

type Time = chrono::DateTime<chrono::Utc>;

/// `cca export`
pub(crate) fn run(args: &ExportArgs) -> Result<u8> {
    let tool = args.tool;
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, args.session.id.as_deref())?;
    let text = crate::store::read_text(&store.session_path(&id))?;
    let (t, _) = transcript::parse(&text)
        .map_err(|e| crate::store::not_transcript(&store.session_path(&id), &id, e))?;
    let turns = turns(&t).map_err(|(n, at)| {
        Failure::new(
            exit::ERROR,
            format!(
                "exchange {n} of session {id} has {} for its time (its `at`, or the session's `created` when it has none), not a time the tools read",
                shown_id(&at)
            ),
        )
        .hint(format!(
            "fix it in {} (as 2026-01-31T09:15:00Z, a year from 1970 to 9999), then export again",
            store.session_path(&id).display()
        ))
    })?;
    if turns.is_empty() {
        return Err(Failure::usage(format!("session {id} has no answered question to export"))
            .hint(format!("ask something in it first: cca search -s {id} QUESTION"))
            .into());
    }
    // The tools file a conversation under its folder, and resume it from there.
    let Some(folder) = folder(&t.header.cwd) else {
        return Err(Failure::usage(format!(
            "session {id} has no folder to export it under ({} is not an absolute path of a folder)",
            shown_id(&t.header.cwd)
        ))
        .hint("the tools keep conversations per folder: continue it in cca instead")
        .into());
    };
    let cwd = PathBuf::from(&folder);
    let uuid = uuid(&id, &settings);
    // What gemini must be told of a folder new to it, once its conversation is written.
    let mut registration = None;
    let (path, contents) = match tool {
        ExportTool::Claude => {
            let root = match &settings.claude_home {
                Some(root) => root.clone(),
                None => user_home(&settings)?.join(".claude"),
            };
            let name = claude_folder(&folder);
            let path = root
                .join("projects")
                .join(component(&name, "the folder's name for claude", OURS)?)
                .join(component(&format!("{uuid}.jsonl"), "the file's name", OURS)?);
            (path, claude_lines(&uuid, &folder, &turns))
        }
        ExportTool::Gemini => {
            let root = match &settings.gemini_home {
                Some(home) => home.join(".gemini"),
                None => user_home(&settings)?.join(".gemini"),
            };
            let (project, new) = gemini_project(&root, &cwd)?;
            registration = new;
            // gemini names its files by the minute the conversation started.
            let minute = turns[0].asked.format("%Y-%m-%dT%H-%M");
            let name = format!("session-{minute}-{}.jsonl", &uuid[..8]);
            let path = root.join("tmp").join(project).join("chats").join(component(
                &name,
                "the file's name",
                OURS,
            )?);
            // Updated now, not at the last answer: gemini deletes a session last updated over
            // 30 days ago as it starts (`sessionRetention`, on by default), and this one was
            // just written to be resumed.
            let updated = settings.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            (path, gemini_lines(&uuid, &project_hash(&folder), &turns, &updated))
        }
        ExportTool::Codex => {
            // Where `cca import codex` reads, and codex keeps its sessions.
            let root = match &settings.codex_home {
                Some(root) => root.join("sessions"),
                None => user_home(&settings)?.join(".codex/sessions"),
            };
            let started = turns[0].asked;
            let name = format!("rollout-{}-{uuid}.jsonl", started.format("%Y-%m-%dT%H-%M-%S"));
            let path = root.join(started.format("%Y/%m/%d").to_string()).join(component(
                &name,
                "the file's name",
                OURS,
            )?);
            (path, codex_lines(&uuid, &folder, &turns))
        }
    };
    let tool_of = match tool {
        ExportTool::Claude => crate::import::Tool::Claude,
        ExportTool::Gemini => crate::import::Tool::Gemini,
        ExportTool::Codex => crate::import::Tool::Codex,
    };
    // Noted first: an import that finds the file then knows it for cca's own. Then the
    // conversation, then (gemini) the folder registered: an export that fails leaves nothing
    // of it in the tool's folder, and takes its note back.
    super::import::exported(&store, tool_of, &uuid, &id)?;
    let written = store.write_beside(&path, contents.as_bytes()).and_then(|()| match registration
        .map(|r| r.write(&store))
    {
        Some(Err(e)) => {
            store.remove_beside(&path);
            Err(e)
        }
        _ => Ok(()),
    });
    if let Err(e) = written {
        // A note left behind (its removal failing too) names a file that is not there: it
        // finds nothing.
        let _ = super::import::not_exported(&store, tool_of, &uuid);
        return Err(e);
    }
    crate::front::terminal::say(&format!(
        "cca: exported {id} to {}; resume it from {} with: {} {uuid}",
        path.display(),
        cwd.display(),
        match tool {
            ExportTool::Claude => "claude --resume",
            ExportTool::Gemini => "gemini --resume",
            ExportTool::Codex => "codex resume",
        }
    ));
    print(&format!("{uuid}\n"))?;
    Ok(exit::OK)
}

fn user_home(settings: &Settings) -> Result<PathBuf> {
    settings.user_home.clone().ok_or_else(|| {
        Failure::new(exit::ERROR, "cannot tell where your home folder is").hint("set HOME").into()
    })
}

/// A fresh UUID (version 4 in form) from the session id and the time: a second export of a
/// session that went on is a new conversation for the tool, and never overwrites the first.
fn uuid(id: &str, settings: &Settings) -> String {
    let seed = format!(
        "{id}\0{}\0{}",
        settings.now().timestamp_nanos_opt().unwrap_or(0),
        std::process::id()
    );
    let h1 = crate::prompt::hash(&format!("{seed}\0a"));
    let h2 = crate::prompt::hash(&format!("{seed}\0b"));
    let hex = format!("{}{}", &h1[h1.len() - 16..], &h2[h2.len() - 16..]);
    format!("{}-{}-4{}-8{}-{}", &hex[0..8], &hex[8..12], &hex[13..16], &hex[17..20], &hex[20..32])
}

/// A name that becomes one component of a path: not empty, not `.` or `..`, without `/` or
/// NUL, so that the path stays in the folder it is joined to. `what` names it for the error,
/// and `hint` says what to do (nothing is written).
fn component<'a>(name: &'a str, what: &str, hint: &str) -> Result<&'a str> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Failure::new(
            exit::ERROR,
            format!(
                "{what} would be {}, which is not a file name; nothing was written",
                shown_id(name)
            ),
        )
        .hint(hint)
        .into());
    }
    Ok(name)
}

/// The hint for a name cca made itself: it cannot be a bad one.
const OURS: &str = "this is a fault in cca: please report it, with the session's folder";

/// The transcript's exchanges, attachments with their question; a time that is not one is
/// `Err((exchange, the text))`.
fn turns(t: &transcript::Transcript) -> std::result::Result<Vec<Turn>, (usize, String)> {
    let mut out = Vec::new();
    for (n, e) in framed(t).into_iter().enumerate() {
        let parsed = |at: String| time(&at).ok_or((n + 1, at));
        out.push(Turn {
            asked: parsed(e.asked)?,
            answered: parsed(e.answered)?,
            question: e.question,
            answer: e.answer,
            model: e.model,
        });
    }
    Ok(out)
}

/// Each answered exchange's question (with its attachments, framed as the tools are given
/// them) and answer: what an exported session reads as in the tool, and so what an import of
/// it is compared with.
pub(crate) fn question_answer_pairs(t: &transcript::Transcript) -> Vec<(String, String)> {
    framed(t).into_iter().map(|e| (e.question, e.answer)).collect()
}

/// An answered exchange as the tools take it, its times as the transcript gives them.
struct Framed {
    question: String,
    asked: String,
    answer: String,
    answered: String,
    model: Option<String>,
}

fn framed(t: &transcript::Transcript) -> Vec<Framed> {
    let mut out = Vec::new();
    // The question waiting for its answer: text, time, attachments (name, content).
    type Asked = (String, String, Vec<(String, String)>);
    let mut question: Option<Asked> = None;
    for r in &t.records {
        let at = r.meta.at.clone().unwrap_or_else(|| t.header.created.clone());
        match r.kind {
            Kind::User => question = Some((r.content.clone(), at, Vec::new())),
            Kind::Attachment => {
                if let Some((_, _, attachments)) = question.as_mut() {
                    attachments.push((r.meta.name.clone().unwrap_or_default(), r.content.clone()));
                }
            }
            Kind::Assistant => {
                if let Some((text, asked, attachments)) = question.take() {
                    let refs: Vec<(&str, String)> =
                        attachments.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
                    out.push(Framed {
                        question: crate::frame::user_with_attachments(text, &refs),
                        asked,
                        answer: r.content.clone(),
                        answered: at,
                        model: r.meta.model.clone(),
                    });
                }
            }
            Kind::Failed | Kind::Interrupted => question = None,
            Kind::Clear | Kind::Compaction => {}
        }
    }
    out
}

/// A time the tools read: a leap second is written as the second before it (no tool reads
/// `:60`), and a year outside 1970 to 9999 is none (written, it is `+10000` or `-0001`).
fn time(at: &str) -> Option<Time> {
    use chrono::{Datelike, Timelike};
    let t = chrono::DateTime::parse_from_rfc3339(at).ok()?.to_utc();
    let t = match t.nanosecond() {
        n if n >= 1_000_000_000 => t.with_nanosecond(n - 1_000_000_000)?,
        _ => t,
    };
    (1970..=9999).contains(&t.year()).then_some(t)
}

/// The session's folder as the tools key it: `.`, `..` and doubled `/` resolved as text (a
/// project is its folder's text to them); `None` for one that is not an absolute path, or that
/// holds a control character (a NUL, a line end), which no folder the tools were run in has.
fn folder(cwd: &str) -> Option<String> {
    if !cwd.starts_with('/') || cwd.chars().any(char::is_control) {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in cwd.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// Milliseconds, as the tools write their times.
fn js_time(at: &Time) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn claude_lines(uuid: &str, cwd: &str, turns: &[Turn]) -> String {
    let mut out = String::new();
    let mut parent = Value::Null;
    let mut n = 0u64;
    let mut line = |kind: &str, at: &Time, message: Value, out: &mut String| {
        n += 1;
        let me = format!("{}{:012x}", &uuid[..24], n);
        let v = json!({
            "parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": cwd,
            "sessionId": uuid, "version": "2.1.329", "type": kind, "message": message,
            "uuid": me, "timestamp": js_time(at),
        });
        out.push_str(&v.to_string());
        out.push('\n');
        parent = Value::String(me);
    };
    for (i, t) in turns.iter().enumerate() {
        line("user", &t.asked, json!({"role": "user", "content": t.question}), &mut out);
        let message = json!({
            "id": format!("msg_cca_{i}"), "type": "message", "role": "assistant",
            "model": t.model.clone().unwrap_or_else(|| crate::import::claude::NO_MODEL.into()),
            "content": [{"type": "text", "text": t.answer}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        });
        line("assistant", &t.answered, message, &mut out);
    }
    out
}

/// gemini's `projectHash`: the SHA-256 of the project's folder, in hex (it skips a chat
/// without one).
fn project_hash(cwd: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(cwd.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn gemini_lines(uuid: &str, project_hash: &str, turns: &[Turn], updated: &str) -> String {
    let first = js_time(&turns[0].asked);
    let mut out = json!({
        "sessionId": uuid, "projectHash": project_hash, "startTime": first, "lastUpdated": updated,
        "kind": "main",
    })
    .to_string();
    out.push('\n');
    for (i, t) in turns.iter().enumerate() {
        let user = json!({"id": format!("{uuid}-u{i}"), "timestamp": js_time(&t.asked), "type": "user", "content": [{"text": t.question}]});
        let mut answer = json!({"id": format!("{uuid}-g{i}"), "timestamp": js_time(&t.answered), "type": "gemini", "content": t.answer});
        if let Some(model) = &t.model {
            answer["model"] = json!(model);
        }
        for v in [user, answer] {
            out.push_str(&v.to_string());
            out.push('\n');
        }
    }
    out
}

/// codex's rollout (0.169.0), as cca writes it for codex's own turns (`engine::codex`): a
/// `session_meta` line, then a `response_item` per message; `codex resume UUID` (and `codex exec
/// resume UUID`) sends them as the conversation's turns (measured). codex adds its own context
/// after them when it resumes.
fn codex_lines(uuid: &str, cwd: &str, turns: &[Turn]) -> String {
    use crate::engine::codex::{rollout_message, rollout_meta};
    let mut lines = vec![rollout_meta(uuid, &js_time(&turns[0].asked), cwd)];
    for t in turns {
        lines.push(rollout_message(&js_time(&t.asked), "user", &t.question));
        lines.push(rollout_message(&js_time(&t.answered), "assistant", &t.answer));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A folder new to gemini, to be registered in its `projects.json` (with `.project_root`
/// beside its chats, as gemini does) once its conversation is written.
struct Registration {
    registry: PathBuf,
    text: String,
    project_root: PathBuf,
    folder: String,
}

impl Registration {
    fn write(&self, store: &Store) -> Result<()> {
        // gemini's own file keeps its permissions (and a link stays a link).
        crate::store::write_settings(&self.registry, &self.text)?;
        store.write_beside(&self.project_root, self.folder.as_bytes())
    }
}

/// The characters of a project's name cca makes from its folder's: a file name has at most
/// 255 bytes, and a `-2` may follow.
const PROJECT_NAME: usize = 200;

/// gemini's short name for the project in `cwd` (its `projects.json`), and what to register if
/// gemini has not seen the folder yet.
fn gemini_project(root: &Path, cwd: &Path) -> Result<(String, Option<Registration>)> {
    let registry = root.join("projects.json");
    let mut projects: Value = match std::fs::read_to_string(&registry) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", registry.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({"projects": {}}),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", registry.display())),
    };
    let wrong_shape = || {
        Failure::new(
            exit::ERROR,
            format!("{} is not gemini's list of projects: nothing was written", registry.display()),
        )
        .hint(r#"gemini writes it as {"projects": {"/the/folder": "name", ...}}: fix it, or move it away and let the export write it anew"#)
    };
    let Some(object) = projects.as_object_mut() else { return Err(wrong_shape().into()) };
    let Some(names) = object.entry("projects").or_insert_with(|| json!({})).as_object_mut() else {
        return Err(wrong_shape().into());
    };
    let key = cwd.to_string_lossy().into_owned();
    match names.get(&key) {
        Some(Value::String(name)) => {
            let what = format!("gemini's name for {key} in {}", registry.display());
            let hint = format!(
                "fix that name in {}, or remove its entry: the export then registers the folder \
                 anew",
                registry.display()
            );
            return component(name, &what, &hint).map(|name| (name.to_string(), None));
        }
        Some(_) => return Err(wrong_shape().into()),
        None => {}
    }
    let base: String = cwd
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(PROJECT_NAME)
        .collect();
    // The folder `/` has no name of its own.
    let base = if base.is_empty() { "root".to_string() } else { base };
    let taken =
        |name: &str| names.values().any(|v| v == name) || root.join("tmp").join(name).exists();
    let name = (1..)
        .map(|n| if n == 1 { base.clone() } else { format!("{base}-{n}") })
        .find(|name| !taken(name))
        .expect("some name is free");
    component(&name, "the project's name for gemini", OURS)?;
    names.insert(key.clone(), json!(name));
    let text = serde_json::to_string_pretty(&projects).context("projects.json")?;
    let project_root = root.join("tmp").join(&name).join(".project_root");
    Ok((name, Some(Registration { registry, text, project_root, folder: key })))
}

/// The folder Claude Code keeps a project's sessions in, under `projects/` (its own rule, read
/// from the pinned Claude Code): each UTF-16 unit of the path that is not an ASCII letter or
/// digit becomes `-` (an emoji two); past 200, the first 200, `-`, and a hash of the whole path
/// in base 36 (Java's string hash, made positive).
fn claude_folder(cwd: &str) -> String {
    const LONGEST: usize = 200;
    let units: Vec<u16> = cwd.encode_utf16().collect();
    let name: String = units
        .iter()
        .map(|&u| match u8::try_from(u) {
            Ok(b) if b.is_ascii_alphanumeric() => char::from(b),
            _ => '-',
        })
        .collect();
    if name.len() <= LONGEST {
        return name;
    }
    let hash = units
        .iter()
        .fold(0i32, |h, &u| h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u)));
    let mut left = u64::from(hash.unsigned_abs());
    let mut digits = Vec::new();
    loop {
        digits.push(char::from_digit((left % 36) as u32, 36).unwrap_or('0'));
        left /= 36;
        if left == 0 {
            break;
        }
    }
    format!("{}-{}", &name[..LONGEST], digits.iter().rev().collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_keyed_as_text_and_times_the_tools_cannot_read_are_none() {
        assert_eq!(folder("/"), Some("/".into()));
        assert_eq!(folder("//"), Some("/".into()));
        assert_eq!(folder("/./"), Some("/".into()));
        assert_eq!(folder("/tmp/../../etc/x/.."), Some("/etc".into()));
        assert_eq!(folder("/home/me/"), Some("/home/me".into()));
        for bad in ["", "relative/x", "/a\nb", "/a\0b", "~/x"] {
            assert_eq!(folder(bad), None, "{bad:?}");
        }
        assert_eq!(js_time(&time("2026-06-30T23:59:60Z").unwrap()), "2026-06-30T23:59:59.000Z");
        assert!(time("9999-12-31T23:59:59-01:00").is_none());
        assert!(time("0000-01-01T00:00:00+01:00").is_none());
        assert!(time("1969-12-31T23:59:59Z").is_none());
        assert!(time("2026-11-21T10:15:00+01:00").is_some());
    }

    #[test]
    fn claude_names_a_project_folder_as_it_does() {
        // Each expected name is what Claude Code's own function gives for the path.
        let long = format!(
            "/tmp/{}/{}/{}",
            "abcdefghij".repeat(10),
            "klmnopqrst".repeat(10),
            "uvwxyzabcd".repeat(10)
        );
        let kept = format!("-tmp-{}-{}", "abcdefghij".repeat(10), &"klmnopqrst".repeat(10)[..94]);
        assert_eq!(claude_folder(&long), format!("{kept}-rob4ft"));
        assert_eq!(claude_folder("/home/me/😀 café"), "-home-me----caf-");
        let accents = claude_folder(&format!("/x/{}", "é".repeat(250)));
        assert_eq!(accents, format!("-x-{}-9cs5s6", "-".repeat(197)));
    }
}
