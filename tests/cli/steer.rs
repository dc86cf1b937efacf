//! Steering a running turn (`cca steer`): the message reaches the engine (claude on its stdin,
//! the others as the next turn), the transcript keeps everything in the order the engine saw
//! it, and no endpoint outlives its turn.

use std::process::Stdio;

use cca::transcript::Kind;
use rustix::process::Signal;

use crate::common::*;

/// `(kind, content)` of every record in the session `latest` points at.
fn records(env: &TestEnv) -> Vec<(Kind, String)> {
    let (t, problems) = cca::transcript::parse(&env.latest()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    t.records.into_iter().map(|r| (r.kind, r.content)).collect()
}

fn sockets(env: &TestEnv) -> Vec<String> {
    sockets_in(&env.cca_home)
}

/// The sockets that take steers under a `CCA_HOME` (one is put there once it listens).
fn sockets_in(home: &std::path::Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(home.join("run")) else { return Vec::new() };
    dir.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sock"))
        .collect()
}

/// Starts `cca ARGS` in the background with this engine script, and waits until its turn
/// listens for steers.
fn start(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> Guard {
    let mut cmd = env.command();
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let cca = Guard(cmd.spawn().unwrap());
    assert!(wait_until(TIMEOUT, || !sockets(env).is_empty()), "the turn listens for steers");
    cca
}

fn steer(env: &TestEnv, message: &str) -> Run {
    env.run(&["steer", message])
}

struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn finish(cca: Guard) -> Finished {
    let out = cca.finish();
    Finished {
        // As a shell sees it: 128 + the signal when cca dies by one (Ctrl-C).
        code: Some(shell_status(out.status)),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn user(text: &str) -> (Kind, String) {
    (Kind::User, text.to_string())
}

fn answer(text: &str) -> (Kind, String) {
    (Kind::Assistant, text.to_string())
}

#[test]
fn steer_with_no_running_turn_says_so() {
    let env = TestEnv::new();
    env.run(&["steer", "hello"]).code(2).stderr_has("no session to continue");
    env.run(&["search", "q"]).ok();
    let run = env.run(&["steer", "focus", "on", "JWT"]);
    run.code(1)
        .stderr_has("no turn is running in session ")
        .stderr_has("hint: to ask in it, use `, ");
    // With `-s`, `,` would ask in the followed session, not the one named.
    env.run(&["name", "other"]).ok();
    env.run(&["search", "another"]).ok();
    let run = env.run(&["steer", "-s", "other", "focus"]);
    run.code(1).stderr_has("hint: to ask in it, use `cca search -s other focus`");
    assert!(!run.stderr.contains("`, "), "{run}");
    // Pasted back, the hint runs nothing of the message.
    let run = env.run(&["steer", "-s", "other", "x $(touch pwned) `id` it's"]);
    run.code(1).stderr_has(r#"use `cca search -s other 'x $(touch pwned) `id` it'\''s'`"#);
    let run = env.run(&["steer", "-s", "other", "--", "-v is what"]);
    run.code(1).stderr_has("use `cca search -s other -- '-v is what'`");
    env.run_with(&["steer"], Some(b"a\0b"), &[]).code(2).stderr_has("NUL");
    env.run_with(&["steer"], Some(b"  \n"), &[]).code(2).stderr_has("empty");
    assert!(sockets(&env).is_empty());
}

#[test]
fn a_steer_during_a_claude_answer_is_answered_next_by_the_same_process() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let script = format!("say answer one;await {}", go.display());
    let cca = start(&env, &["search", "q1"], &[("FAKE_SCRIPT", &script)]);
    steer(&env, "focus on JWT").ok().stderr_has("steer sent");
    std::fs::write(&go, "").unwrap();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "answer one\n\nECHO: focus on JWT");
    assert!(out.stderr.contains("cca: steer queued: focus on JWT"), "{}", out.stderr);
    assert!(out.stderr.contains("cca: steer taken: focus on JWT"), "{}", out.stderr);

    // One claude process took both messages, the steer on its stdin.
    let calls = env.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["steers"], serde_json::json!(["focus on JWT"]));
    assert_eq!(
        records(&env),
        [user("q1"), answer("answer one"), user("focus on JWT"), answer("ECHO: focus on JWT")]
    );
    assert!(sockets(&env).is_empty(), "{:?}", sockets(&env));
    // Each answer is recorded with its own cost (claude reports the process's running total).
    assert_eq!(env.latest().matches("\"cost_usd\":0.0015}").count(), 2, "{}", env.latest());

    // The next turn's history is the conversation as the engine saw it.
    env.run(&["search", "-r", "next"]).ok();
    assert_eq!(env.last_users(), ["q1", "focus on JWT"]);
}

#[test]
fn claude_takes_a_steer_inside_an_answer() {
    let env = TestEnv::new();
    // The engine waits for the steer after its first words, as claude takes one after a tool call.
    let cca = start(&env, &["search", "q1"], &[("FAKE_SCRIPT", "say part one;take;say part two")]);
    steer(&env, "shorter please").ok();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "part one\n\npart two");
    assert_eq!(
        records(&env),
        [user("q1"), answer("part one"), user("shorter please"), answer("part two")]
    );
    assert_eq!(env.calls().len(), 1);
}

#[test]
fn two_steers_are_taken_in_order() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let script = format!("say answer one;await {}", go.display());
    let cca = start(&env, &["search", "q1"], &[("FAKE_SCRIPT", &script)]);
    steer(&env, "first steer").ok();
    steer(&env, "second steer").ok();
    std::fs::write(&go, "").unwrap();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        records(&env),
        [
            user("q1"),
            answer("answer one"),
            user("first steer"),
            answer("ECHO: first steer"),
            user("second steer"),
            answer("ECHO: second steer"),
        ]
    );
    assert_eq!(env.calls()[0]["steers"], serde_json::json!(["first steer", "second steer"]));
}

#[test]
fn steers_claude_takes_together_are_one_question() {
    let env = TestEnv::new();
    let cca =
        start(&env, &["search", "q1"], &[("FAKE_SCRIPT", "say part one;take 2;say part two")]);
    steer(&env, "first steer").ok();
    steer(&env, "second steer").ok();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        records(&env),
        [user("q1"), answer("part one"), user("first steer\n\nsecond steer"), answer("part two"),]
    );
}

/// gemini and command engines read their stdin once: a steer is the next turn, asked by the
/// running cca with the full history.
fn next_turn(env: &TestEnv, args: &[&str]) {
    let go = env.root.path().join("go");
    let first = format!("say answer one;await {}", go.display());
    let cca = start(env, args, &[("FAKE_SCRIPT_1", &first)]);
    steer(env, "focus on JWT").ok();
    std::fs::write(&go, "").unwrap();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "answer one\n\nECHO: focus on JWT");
    assert!(out.stderr.contains("cca: steer queued: focus on JWT"), "{}", out.stderr);
    assert!(out.stderr.contains("cca: steer taken: focus on JWT"), "{}", out.stderr);
    assert_eq!(
        records(env),
        [user("q1"), answer("answer one"), user("focus on JWT"), answer("ECHO: focus on JWT")]
    );
    assert_eq!(env.calls().len(), 2);
    assert_eq!(env.last_users(), ["q1"]);
    assert_eq!(tag(stdin_of(&env.last_call()), "user_query"), Some("focus on JWT"));
    assert!(sockets(env).is_empty());
}

#[test]
fn gemini_answers_a_steer_as_the_next_turn() {
    let env = TestEnv::new();
    next_turn(&env, &["search", "--engine", "gemini", "q1"]);
}

#[test]
fn a_command_engine_answers_a_steer_as_the_next_turn() {
    let env = TestEnv::new();
    env.add_engine("plain");
    env.write_config("[engines.plain]\ncommand = [\"plain\"]\n");
    next_turn(&env, &["search", "--engine", "plain", "q1"]);
}

#[test]
fn ctrl_c_keeps_a_pending_steer_as_not_answered() {
    for engine in ["claude", "gemini"] {
        let env = TestEnv::new();
        let mut cca = start(
            &env,
            &["search", "--engine", engine, "q1"],
            &[("FAKE_SCRIPT", "say partial;hang")],
        );
        // The partial answer is out before the steer and the Ctrl-C.
        let mut seen = [0u8; 7];
        std::io::Read::read_exact(cca.0.stdout.as_mut().unwrap(), &mut seen).unwrap();
        assert_eq!(&seen, b"partial");
        steer(&env, "never taken").ok();
        cca.signal(Signal::INT);
        let out = finish(cca);
        assert_eq!(out.code, Some(130), "{}", out.stderr);
        assert!(
            out.stderr.contains(
                "cca: steer not taken (kept in the transcript as not answered): never taken"
            ),
            "{}",
            out.stderr
        );
        assert_eq!(
            records(&env),
            [
                user("q1"),
                (Kind::Interrupted, "partial".into()),
                user("never taken"),
                (Kind::Failed, String::new()),
            ]
        );
        let text = env.latest();
        assert!(
            text.contains("## 1. You\n\nnever taken\n")
                && text.contains(
                    "### 1. No answer (not sent again): a steer not taken: interrupted (Ctrl-C)"
                ),
            "{text}"
        );
        assert!(sockets(&env).is_empty());
        // Never replayed.
        env.run(&["search", "-r", "next"]).ok();
        assert!(env.last_users().is_empty(), "{:?}", env.last_users());
    }
}

#[test]
fn a_killed_cca_leaves_a_stale_endpoint_that_is_ignored_then_removed() {
    let env = TestEnv::new();
    let engine_pid = env.root.path().join("engine.pid");
    let script = format!("pid {};hang", engine_pid.display());
    let cca = start(&env, &["search", "q1"], &[("FAKE_SCRIPT", &script)]);
    assert!(
        wait_until(TIMEOUT, || std::fs::read_to_string(&engine_pid).is_ok_and(|s| !s.is_empty()))
    );
    cca.signal(Signal::KILL);
    drop(cca);
    // The engine dies with cca (see `run::guard`).
    let engine: i32 = std::fs::read_to_string(&engine_pid).unwrap().trim().parse().unwrap();
    assert!(wait_until(TIMEOUT, || !crate::common::alive(engine)), "the engine outlived cca");
    assert_eq!(sockets(&env).len(), 1, "kill -9 leaves the socket");

    steer(&env, "anyone?").code(1).stderr_has("no turn is running");
    env.run(&["search", "-r", "next"]).ok();
    assert!(sockets(&env).is_empty(), "the next turn removed it: {:?}", sockets(&env));
}

#[test]
fn the_endpoint_folder_is_private() {
    let env = TestEnv::new();
    let run_dir = env.cca_home.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let go = env.root.path().join("go");
    let script = format!("say answer one;await {}", go.display());
    let cca = start(&env, &["search", "q1"], &[("FAKE_SCRIPT", &script)]);
    let mode = std::fs::metadata(&run_dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let sock = run_dir.join(&sockets(&env)[0]);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::write(&go, "").unwrap();
    assert_eq!(finish(cca).code, Some(0));
}

#[test]
fn stalled_connections_hold_up_neither_a_steer_nor_the_end_of_the_turn() {
    use std::io::{Read, Write};
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let script = format!("say answer one;await {}", go.display());
    let cca = start(&env, &["search", "q1"], &[("FAKE_SCRIPT", &script)]);
    let socket = env.cca_home.join("run").join(&sockets(&env)[0]);
    let silent = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut trickling = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let trickle = std::thread::spawn(move || {
        while trickling.write_all(b"x").is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
    // A real steer is taken while both are open.
    steer(&env, "focus on JWT").ok().stderr_has("steer sent");
    std::fs::write(&go, "").unwrap();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "answer one\n\nECHO: focus on JWT");
    // The turn ended while the silent connection was open: cca went without answering it.
    silent.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut reply = String::new();
    (&silent).read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "", "the connection was answered before the turn ended");
    trickle.join().unwrap();
    assert!(sockets(&env).is_empty(), "{:?}", sockets(&env));
}

#[test]
fn a_steer_is_taken_whatever_the_length_of_cca_home() {
    let env = TestEnv::new();
    let home = env.root.path().join("a-home-folder-with-a-rather-long-name-".repeat(4));
    assert!(home.join("run/20261121-101500.sock").as_os_str().len() > 150);
    let go = env.root.path().join("go");
    let script = format!("say answer one;await {}", go.display());
    let mut cmd = env.command();
    cmd.args(["search", "q1"])
        .env("CCA_HOME", &home)
        .env("FAKE_SCRIPT", script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let cca = Guard(cmd.spawn().unwrap());
    assert!(wait_until(TIMEOUT, || !sockets_in(&home).is_empty()), "the turn listens for steers");
    let home_var = home.to_str().unwrap();
    let run = env.run_with(&["steer", "focus on JWT"], None, &[("CCA_HOME", home_var)]);
    run.ok().stderr_has("steer sent");
    std::fs::write(&go, "").unwrap();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("cannot be steered"), "{}", out.stderr);
    assert_eq!(out.stdout, "answer one\n\nECHO: focus on JWT");
}

/// An editor that saves over the transcript in place while a steer is answered, a version
/// loaded before the steer was recorded: the steer is recorded again, before its answer.
#[test]
fn an_editor_saving_in_place_while_a_steer_is_answered_loses_no_question() {
    let env = TestEnv::new();
    // An engine that reads its stdin once: the steer is asked as the next exchange.
    env.add_engine("plain");
    env.write_config("[engines.plain]\ncommand = [\"plain\"]\n");
    let dir = env.root.path();
    let (go1, go2, started) = (dir.join("go1"), dir.join("go2"), dir.join("started"));
    let first = format!("say answer one;await {}", go1.display());
    let second = format!("pid {};await {};echo", started.display(), go2.display());
    let scripts = [("FAKE_SCRIPT_1", first.as_str()), ("FAKE_SCRIPT_2", second.as_str())];
    let cca = start(&env, &["search", "--engine", "plain", "q1"], &scripts);
    steer(&env, "focus on JWT").ok();
    std::fs::write(&go1, "").unwrap();
    assert!(wait_until(TIMEOUT, || started.exists()), "the steer is being answered");
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let steer_at = text.rfind("<!-- cca:user").unwrap();
    assert!(text[steer_at..].contains("focus on JWT"), "{text}");
    std::fs::write(&path, &text[..steer_at]).unwrap();
    std::fs::write(&go2, "").unwrap();
    let out = finish(cca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("was saved over"), "{}", out.stderr);
    assert_eq!(
        records(&env),
        [user("q1"), answer("answer one"), user("focus on JWT"), answer("ECHO: focus on JWT")]
    );
}
