//! `cca import` with the fake engines: codex rollout files (built from the format measured from
//! codex 0.169.0; the real claude, gemini and llm are in tests/real), continuing an imported
//! session with another engine, the imports' index as a cache, and usage errors.

use serde_json::{Value, json};

use crate::common::*;

/// A codex rollout: the session's metadata, an environment preamble, then `exchanges`
/// questions each answered after a shell call.
fn rollout(exchanges: usize) -> String {
    let at = "2026-11-20T08:00:00.000Z";
    let item =
        |payload: Value| json!({"timestamp": at, "type": "response_item", "payload": payload});
    let mut lines = vec![
        json!({"timestamp": at, "type": "session_meta", "payload": {"id": "0199-codex", "cwd": "/home/me/src", "timestamp": at, "cli_version": "0.169.0"}}),
        json!({"timestamp": at, "type": "turn_context", "payload": {"cwd": "/home/me/src", "model": "gpt-5-codex"}}),
        item(
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/home/me/src</cwd>\n</environment_context>"}]}),
        ),
    ];
    for n in 1..=exchanges {
        lines.push(item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("question {n}")}]})));
        lines.push(item(json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": format!("c{n}")})));
        lines.push(item(
            json!({"type": "function_call_output", "call_id": format!("c{n}"), "output": "a b"}),
        ));
        lines.push(item(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("answer {n}")}]})));
        lines.push(
            json!({"timestamp": at, "type": "event_msg", "payload": {"type": "task_complete"}}),
        );
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A rollout of `exchanges` in codex's own store, where `cca import codex` looks: its path.
fn codex_rollout(env: &TestEnv, exchanges: usize) -> std::path::PathBuf {
    let dir = env.home.join(".codex/sessions/2026/11/20");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rollout-2026-11-20T08-00-00-0199-codex.jsonl");
    std::fs::write(&file, rollout(exchanges)).unwrap();
    file
}

#[test]
fn codex_rollouts_import_go_on_and_continue_with_any_engine() {
    let env = TestEnv::new();
    let file = codex_rollout(&env, 2);
    let run = env.run(&["import", "codex"]);
    assert!(
        run.ok()
            .stdout
            .starts_with("20261120-080000\tnew\t2 exchanges\tcodex:0199-codex\tquestion 1"),
        "{run}"
    );
    let text = std::fs::read_to_string(env.session_path("20261120-080000")).unwrap();
    let (t, _) = cca::transcript::parse(&text).unwrap();
    assert_eq!((t.header.engine.as_str(), t.header.cwd.as_str()), ("codex", "/home/me/src"));
    assert_eq!(t.records[1].content, "> shell: ls\n\nanswer 1");

    // The index is a cache: without it, the headers say what was imported.
    std::fs::remove_file(env.cca_home.join("imports.json")).unwrap();
    assert_eq!(env.run(&["import", "codex"]).ok().stdout, "");
    std::fs::write(&file, rollout(3)).unwrap();
    let run = env.run(&["import", "codex", "--dry-run"]);
    assert_eq!(
        run.ok().stdout,
        "-\tgoing on in 20261120-080000\t+1 exchange\tcodex:0199-codex\tquestion 1\n"
    );
    let run = env.run(&["import", "codex", file.to_str().unwrap()]);
    assert!(run.ok().stdout.starts_with("20261120-080000\tgoing on"), "{run}");

    // Continued with another engine: it gets the imported history.
    let run = env.run(&["search", "-e", "claude", "-s", "20261120-080000", "question 4"]);
    assert!(!run.ok().stderr.contains("no engine here"), "{run}");
    assert_eq!(env.last_users(), ["question 1", "question 2", "question 3"]);
    // Without `-e`, codex answers, a built-in engine: not on PATH here, then on it.
    env.run(&["search", "-s", "20261120-080000", "question 5"])
        .code(1)
        .stderr_has("engine codex not found");
    env.add_engine("codex");
    let run = env.run(&["search", "-s", "20261120-080000", "question 5"]);
    assert!(!run.ok().stderr.contains("no engine here"), "{run}");
    assert_eq!(env.last_users().len(), 4);
}

#[test]
fn what_cannot_be_imported_is_said() {
    let env = TestEnv::new();
    env.run(&["import", "claude", "/nonexistent/file.jsonl"])
        .code(2)
        .stderr_has("/nonexistent/file.jsonl does not exist");
    let bad = env.root.path().join("broken.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let run = env.run(&["import", "claude", bad.to_str().unwrap()]);
    run.code(1).stderr_has(&format!("{}: line 1: not JSON", bad.display()));
    assert_eq!(env.session_files(), Vec::<String>::new());
    // A file of another kind altogether: a few lines named, the rest counted.
    std::fs::write(&bad, "not json\n".repeat(300)).unwrap();
    let run = env.run(&["import", "claude", bad.to_str().unwrap()]);
    run.code(1).stderr_has("line 5: not JSON").stderr_has("295 more lines could not be read");
    assert!(run.stderr.lines().count() < 10, "{run}");

    // Another tool's file given to claude is said, and the right tool still reads it after.
    let other = env.root.path().join("backup");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("rollout-a.jsonl"), rollout(1)).unwrap();
    env.run(&["import", "claude", other.to_str().unwrap()])
        .code(1)
        .stderr_has("no line of this file is Claude Code's")
        .stderr_has("cca import codex");
    let run = env.run(&["import", "codex", other.to_str().unwrap()]);
    assert!(run.ok().stdout.contains("\tnew\t1 exchange\t"), "{run}");
    env.run(&["import", "claude", other.to_str().unwrap()]).code(1);
    assert_eq!(env.run(&["import", "codex", other.to_str().unwrap()]).ok().stdout, "");
}

/// A progress bar for many files, on a terminal only.
#[test]
fn a_progress_bar_on_a_terminal() {
    let env = TestEnv::new();
    let dir = env.root.path().join("rollouts");
    std::fs::create_dir_all(&dir).unwrap();
    for n in 0..60 {
        let text = rollout(1).replace("0199-codex", &format!("0199-codex-{n}"));
        std::fs::write(dir.join(format!("rollout-{n}.jsonl")), text).unwrap();
    }
    let run = env.run(&["import", "codex", "--dry-run", dir.to_str().unwrap()]);
    assert!(!run.ok().stderr.contains("/60 files"), "{run}");
    let mut cmd = env.pty_command();
    cmd.args(["import", "codex", dir.to_str().unwrap()]);
    let mut session =
        rexpect::session::spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
    session.exp_string("/60 files").unwrap();
    let all = session.exp_eof().unwrap();
    assert!(all.contains("60 new"), "{all:?}");
}

/// A conversation that went on in its tool, imported while cca works in the imported session
/// (a compaction, whose engine is held): the import plans to go on in the session, waits for
/// its lock, then finds it changed by cca and imports the source as a fork instead of appending
/// after cca's record.
#[test]
fn an_import_that_waited_for_the_session_forks_instead_of_appending_after_cca() {
    use std::process::Stdio;
    let env = TestEnv::new();
    env.add_engine("codex");
    let file = codex_rollout(&env, 2);
    env.run(&["import", "codex"]).ok();
    let id = "20261120-080000";
    std::fs::write(&file, rollout(3)).unwrap();

    // A compaction holds the session's lock while its engine waits; the file is unchanged.
    let go = env.root.path().join("go");
    let script = format!(
        "pid {};await {};say the summary",
        env.root.path().join("pid").display(),
        go.display()
    );
    let mut compact = env.command();
    compact.args(["compact", "--keep", "1", id]).env("FAKE_SCRIPT", &script);
    let compact = Guard(compact.stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap());
    assert!(wait_until(TIMEOUT, || env.root.path().join("pid").exists()), "the engine runs");
    let said = env.root.path().join("import.err");
    let mut import = env.command();
    import.args(["import", "codex"]).stdin(Stdio::null()).stdout(Stdio::piped());
    let import = Guard(import.stderr(std::fs::File::create(&said).unwrap()).spawn().unwrap());
    let waiting = || std::fs::read_to_string(&said).unwrap().contains("is busy");
    assert!(wait_until(TIMEOUT, waiting), "the import waits for the session");
    std::fs::write(&go, "").unwrap();
    assert_eq!(compact.finish().status.code(), Some(0));
    let out = import.finish();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(&format!("fork of {id} at 2")), "{stdout}");
    // The session is as cca left it: its compaction last, nothing imported after it.
    let text = std::fs::read_to_string(env.session_path(id)).unwrap();
    let (t, _) = cca::transcript::parse(&text).unwrap();
    assert_eq!(t.records.last().unwrap().kind, cca::transcript::Kind::Compaction, "{text}");
    assert!(!text.contains("question 3"), "{text}");
    assert_eq!(env.session_files().len(), 2, "the source went on in a fork");
}

/// Escape sequences a crafted file could send to the terminal: the clipboard (OSC 52), the
/// screen (CSI 2J), the window title (OSC 0).
const ESCAPES: [&str; 3] = ["\u{1b}]52;c;aGVsbG8=\u{7}", "\u{1b}[2J", "\u{1b}]0;owned\u{7}"];

fn no_escape(run: &Run) {
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains(['\u{1b}', '\u{7}']), "{text:?}");
    }
}

/// Every field of each format that import prints, holding escape sequences: ids (quoted, as
/// they are not plain), versions, unknown kinds of lines, problems, file names, models and
/// titles; nothing reaches the terminal raw, piped or not.
#[test]
fn escapes_in_imported_files_never_reach_the_terminal() {
    let env = TestEnv::new();
    let dir = env.root.path().join(format!("in{}", ESCAPES[2]));
    std::fs::create_dir_all(&dir).unwrap();
    for (n, esc) in ESCAPES.iter().enumerate() {
        let text = |s: &str| format!("{s}{esc}");
        let at = "2026-11-20T08:00:00.000Z";
        let claude = [
            json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": text("claude"),
                   "timestamp": at, "cwd": "/w", "version": text("9"),
                   "message": {"role": "user", "content": text("question")}}),
            json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": text("claude"),
                   "timestamp": at, "message": {"id": "m1", "role": "assistant", "model": text("model"),
                   "content": [{"type": "text", "text": text("answer")}],
                   "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ];
        let gemini = [
            json!({"sessionId": text("gemini"), "startTime": at}),
            json!({"id": text("u"), "timestamp": at, "type": "user", "content": text("question")}),
            json!({"id": "g1", "timestamp": at, "type": "gemini", "content": text("answer"),
                   "model": text("model")}),
            json!({"what": text("this")}),
        ];
        let codex = [
            json!({"timestamp": at, "type": "session_meta", "payload": {"id": text("codex"), "cwd": "/w"}}),
            json!({"timestamp": at, "type": "turn_context", "payload": {"model": text("model")}}),
            json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": text("question")}]}}),
            json!({"timestamp": at, "type": "response_item", "payload": {"type": "message",
                   "role": "assistant", "content": [{"type": "output_text", "text": text("answer")}]}}),
            json!({"timestamp": at, "type": text("kind"), "payload": {}}),
        ];
        let lines = |values: &[serde_json::Value]| -> String {
            values.iter().map(|v| format!("{v}\n")).collect::<String>() + "{\"cut\": "
        };
        std::fs::write(dir.join(format!("c{n}{esc}.jsonl")), lines(&claude)).unwrap();
        std::fs::write(dir.join(format!("session-{n}{esc}.jsonl")), lines(&gemini)).unwrap();
        std::fs::write(dir.join(format!("rollout-{n}{esc}.jsonl")), lines(&codex)).unwrap();
    }
    for tool in ["claude", "gemini", "codex"] {
        for dry_run in [true, false] {
            let mut args = vec!["import", tool, dir.to_str().unwrap()];
            if dry_run {
                args.push("--dry-run");
            }
            let run = env.run(&args);
            no_escape(&run);
            assert_eq!(run.stdout.lines().count(), 3, "{run}");
            let id = format!("{tool}:\"{tool}\u{fffd}[2J\"");
            assert!(run.stdout.contains(&id), "{id:?} in {run}");
            run.code(1).stderr_has("the line is cut off");
            let warnings = run.stderr.lines().filter(|l| l.starts_with("cca: warning: ")).count();
            assert!(warnings >= 6, "{run}");
        }
    }
    let run = env.run(&["import", "claude", dir.to_str().unwrap()]);
    no_escape(&run);
    run.code(1).stderr_has("written by Claude Code \"9\u{fffd}]0;owned\u{fffd}\", a version");
    let run = env.run(&["import", "codex", dir.to_str().unwrap()]);
    run.stderr_has("line 5: a line of a kind cca does not know (\"kind\u{fffd}[2J\"); skipped");
    no_escape(&env.run(&["sessions"]));

    // llm's conversations, as a crafted `llm logs` prints them.
    let llm = env.bin.join("llm");
    let logs = json!([{"id": "r1", "conversation_id": format!("llm{}", ESCAPES[0]),
                       "conversation_name": ESCAPES[1], "model": ESCAPES[2], "prompt": "q",
                       "response": "a", "datetime_utc": "2026-11-20T08:00:00"}]);
    std::fs::write(
        &llm,
        format!("#!/bin/sh\ncat <<'EOF'\n{logs}\nEOF\necho '\u{1b}[2J' >&2\nexit 3\n"),
    )
    .unwrap();
    std::fs::set_permissions(&llm, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = env.run(&["import", "llm"]);
    no_escape(&run);
    std::fs::write(&llm, format!("#!/bin/sh\ncat <<'EOF'\n{logs}\nEOF\n")).unwrap();
    let run = env.run(&["import", "llm"]);
    no_escape(&run);
    assert!(run.ok().stdout.contains("llm:\"llm\u{fffd}]52;c;aGVsbG8=\u{fffd}\""), "{run}");
}

/// Without llm there is nothing to read: said once, with what to do.
#[test]
fn import_llm_without_llm_says_what_is_missing_once() {
    let env = TestEnv::new();
    let run = env.run_with(&["import", "llm"], None, &[("PATH", env.bin.to_str().unwrap())]);
    run.code(1).stderr_has("llm is not on PATH").stderr_has("pip install llm");
    assert_eq!(run.stderr.matches("llm is not on PATH").count(), 1, "{run}");
    assert!(!run.stderr.contains("could not be read whole"), "{run}");
    assert!(!run.stderr.contains("warning"), "{run}");
}

/// Times no conversation was held at (the year 9999, none at all) and a folder that is no
/// absolute path are not taken: the file's own time dates the session, which has no folder.
#[test]
fn absurd_times_and_relative_folders_are_not_taken() {
    let env = TestEnv::new();
    let dir = env.root.path().join("odd");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rollout-odd.jsonl");
    let odd = rollout(1)
        .replace("2026-11-20T08:00:00.000Z", "9999-12-31T23:59:59Z")
        .replace("/home/me/src", "relative/dir");
    std::fs::write(&file, odd).unwrap();
    let written = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_000_000);
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(written).unwrap();
    let run = env.run(&["import", "codex", file.to_str().unwrap()]);
    // 1,795,000,000 s after the epoch: 2026-11-18 11:06:40 UTC.
    assert!(run.ok().stdout.starts_with("20261118-110640\tnew"), "{run}");
    let text = std::fs::read_to_string(env.session_path("20261118-110640")).unwrap();
    let (t, _) = cca::transcript::parse(&text).unwrap();
    assert_eq!(t.header.cwd, "");
    assert!(!text.contains("9999"), "{text}");
}

/// An import that caught an answer being written reads it again once it has grown, in place,
/// where it made a fork of a session nobody continued.
#[test]
fn an_answer_caught_being_written_is_read_again_in_place() {
    let env = TestEnv::new();
    let file = env.root.path().join("rollout-growing.jsonl");
    let at = "2026-11-20T08:00:00.000Z";
    let say = |role: &str, kind: &str, text: &str| {
        format!(
            "{}\n",
            json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}})
        )
    };
    let mut text = rollout(1);
    let import = || env.run(&["import", "codex", file.to_str().unwrap()]);
    std::fs::write(&file, &text).unwrap();
    import().ok();
    text += &say("user", "input_text", "question 2");
    text += &say("assistant", "output_text", "answer 2, part one");
    std::fs::write(&file, &text).unwrap();
    assert!(import().ok().stdout.contains("going on in 20261120-080000\t+1 exchange"));
    text += &say("assistant", "output_text", "part two");
    std::fs::write(&file, &text).unwrap();
    let run = import();
    assert!(
        run.ok().stdout.contains("going on in 20261120-080000, its last exchange read again\t+0"),
        "{run}"
    );
    text += &say("user", "input_text", "question 3");
    text += &say("assistant", "output_text", "answer 3");
    std::fs::write(&file, &text).unwrap();
    assert!(import().ok().stdout.contains("going on in 20261120-080000\t+1 exchange"));
    assert_eq!(env.session_files().len(), 1, "no fork");
    let session = std::fs::read_to_string(env.session_path("20261120-080000")).unwrap();
    let (t, problems) = cca::transcript::parse(&session).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let answers: Vec<&str> = t
        .records
        .iter()
        .filter(|r| r.kind == cca::transcript::Kind::Assistant)
        .map(|r| r.content.as_str())
        .collect();
    assert_eq!(answers, ["> shell: ls\n\nanswer 1", "answer 2, part one\n\npart two", "answer 3"]);
    assert_eq!(import().ok().stdout, "", "nothing left to import");
}

#[test]
fn a_conversation_whose_session_is_in_the_trash_stays_there_until_restored() {
    let env = TestEnv::new();
    let file = codex_rollout(&env, 2);
    env.run(&["import", "codex"]).ok();
    env.run(&["rm", "20261120-080000"]).ok();
    // The source goes on, and is imported again (as the hook does at each session's end).
    std::fs::write(&file, rollout(3)).unwrap();
    for _ in 0..2 {
        let run = env.run(&["import", "codex"]);
        run.ok()
            .stderr_has("1 conversation is in cca's trash, left there: 20261120-080000")
            .stderr_has("cca restore 20261120-080000");
        assert_eq!(run.stdout, "", "{run}");
        assert!(env.session_files().is_empty(), "{run}");
    }
    // Restored, it goes on where it was.
    env.run(&["restore", "20261120-080000"]).ok();
    let run = env.run(&["import", "codex"]);
    assert!(run.ok().stdout.starts_with("20261120-080000\tgoing on"), "{run}");
    assert_eq!(env.session_files().len(), 1);
}

#[test]
fn a_damaged_imports_index_is_kept_aside_and_said() {
    let env = TestEnv::new();
    codex_rollout(&env, 2);
    env.run(&["import", "codex"]).ok();
    let index = env.cca_home.join("imports.json");
    std::fs::write(&index, "{\"files\":").unwrap();
    // A dry run says so and changes nothing.
    let run = env.run(&["import", "codex", "--dry-run"]);
    run.ok().stderr_has("imports.json cannot be read");
    assert_eq!(std::fs::read_to_string(&index).unwrap(), "{\"files\":");
    let run = env.run(&["import", "codex"]);
    run.ok().stderr_has("it is kept as").stderr_has("imports.json.damaged");
    assert_eq!(
        std::fs::read_to_string(env.cca_home.join("imports.json.damaged")).unwrap(),
        "{\"files\":"
    );
    // The headers say what was imported: nothing new, no copy.
    assert_eq!(run.stdout, "", "{run}");
    assert_eq!(env.session_files().len(), 1);
    let run = env.run(&["import", "codex"]);
    assert!(!run.ok().stderr.contains("cannot be read"), "{run}");
}

#[test]
fn what_the_search_for_files_passes_over_is_said_and_a_whole_home_copy_is_found() {
    let env = TestEnv::new();
    let dir = env.home.join(".codex/sessions/2026/11/20");
    std::fs::create_dir_all(&dir).unwrap();
    make_fifo(dir.join("rollout-2026-11-20T09-00-00-fifo.jsonl"));
    let elsewhere = env.root.path().join("rollout-elsewhere.jsonl");
    std::fs::write(&elsewhere, rollout(1)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("rollout-2026-11-20T10-00-00-link.jsonl"))
        .unwrap();
    let run = env.run(&["import", "codex"]);
    run.ok()
        .stderr_has("rollout-2026-11-20T09-00-00-fifo.jsonl: passed over: not a regular file")
        .stderr_has("rollout-2026-11-20T10-00-00-link.jsonl: passed over: a link; give it by name");
    // A FIFO is not to be given by name either: never read.
    assert!(!run.stderr.contains("not a regular file; give it by name"), "{run}");
    // A copy of a whole home, given as a folder: its rollouts are five folders down.
    let backup = env.root.path().join("backup/.codex/sessions/2026/11/20");
    std::fs::create_dir_all(&backup).unwrap();
    std::fs::write(backup.join("rollout-2026-11-20T08-00-00-0199-codex.jsonl"), rollout(2))
        .unwrap();
    let run = env.run(&["import", "codex", env.root.path().join("backup").to_str().unwrap()]);
    assert!(run.ok().stdout.contains("new\t2 exchanges\tcodex:0199-codex"), "{run}");
}

/// With no folder of the tool's to import from, the import says so rather than a bare
/// "0 new", and still succeeds: there is nothing to lose.
#[test]
fn an_import_from_a_tool_that_kept_nothing_here_says_where_it_looked() {
    let env = TestEnv::new();
    for (tool, dir) in
        [("claude", ".claude/projects"), ("gemini", ".gemini/tmp"), ("codex", ".codex/sessions")]
    {
        env.run(&["import", tool]).ok().stderr_has(&format!(
            "{} does not exist: {tool} has kept no conversation there",
            env.home.join(dir).display()
        ));
    }
    std::fs::create_dir_all(env.home.join(".codex/sessions")).unwrap();
    let run = env.run(&["import", "codex"]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(!run.stderr.contains("does not exist"), "{run}");
}
