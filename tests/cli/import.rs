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

#[test]
fn codex_rollouts_import_go_on_and_continue_with_any_engine() {
    let env = TestEnv::new();
    let dir = env.home.join(".codex/sessions/2026/11/20");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rollout-2026-11-20T08-00-00-0199-codex.jsonl");
    std::fs::write(&file, rollout(2)).unwrap();
    let run = env.run(&["import", "codex"]);
    assert!(
        run.ok()
            .stdout
            .starts_with("20261120-080000\tnew\t2 exchange(s)\tcodex:0199-codex\tquestion 1"),
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
        "-\tgoing on in 20261120-080000\t+1 exchange(s)\tcodex:0199-codex\tquestion 1\n"
    );
    let run = env.run(&["import", "codex", file.to_str().unwrap()]);
    assert!(run.ok().stdout.starts_with("20261120-080000\tgoing on"), "{run}");

    // Continued with another engine: it gets the imported history.
    env.run(&["search", "-q", "-e", "claude", "-s", "20261120-080000", "question 4"]).ok();
    assert_eq!(env.last_users(), ["question 1", "question 2", "question 3"]);
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
    env.add_engine("codex-engine");
    env.write_config("[engines.codex]\ncommand = [\"codex-engine\"]\n");
    let dir = env.home.join(".codex/sessions/2026/11/20");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rollout-2026-11-20T08-00-00-0199-codex.jsonl");
    std::fs::write(&file, rollout(2)).unwrap();
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
