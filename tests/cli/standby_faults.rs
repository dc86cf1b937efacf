//! What hostile testing found in standby: a client that holds it, a standby not yet listening,
//! escapes in what it reports, context files edited while it waits, descriptors it inherits,
//! a script's turn left for a typed one, and what it leaves behind.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use super::standby::{claude_waiting, ended, ready, waiting};
use crate::common::*;

/// The pid of the standby (`cca __standby`) whose engine's group is `group`.
fn standby_pid(group: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{group}/stat")).unwrap();
    stat.rsplit(')').next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn socket(env: &TestEnv) -> UnixStream {
    UnixStream::connect(env.cca_home.join("standby/claude.sock")).unwrap()
}

/// A command in `bash -c SCRIPT` with the test's environment, `$CCA` in the script standing
/// for cca (replaced, not a variable: that would be one more in the environment cca sees).
fn bash(env: &TestEnv, script: &str) -> Command {
    let cca = env.command();
    let mut cmd = Command::new("bash");
    cmd.env_clear();
    for (key, value) in cca.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let script = script.replace("$CCA", &cca_exe().display().to_string());
    cmd.current_dir(&env.work).args(["-c", &script]);
    cmd
}

/// Every run of a test gives the engine this script for its `n`-th call, so that the answer
/// tells whether the engine on standby (started as call `n`) took the turn: then it is
/// `taken`. The same in every run, the variable does not change what the standby is for.
fn taken_if_call(n: u32) -> (String, &'static str) {
    (format!("FAKE_SCRIPT_{n}"), "say taken")
}

fn run(env: &TestEnv, args: &[&str], marker: &(String, &str)) -> String {
    let run = env.run_with(args, None, &[(marker.0.as_str(), marker.1)]);
    run.ok().stdout.trim_end().to_string()
}

#[test]
fn clients_that_drip_or_never_end_a_line_do_not_hold_it() {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    let marker = taken_if_call(2);
    run(&env, &["search", "first"], &marker);
    let group = ready(&env);
    // One that sends a byte every so often, and one that streams bytes with no newline.
    let mut dripping = socket(&env);
    dripping.write_all(b"{").unwrap();
    let mut streaming = socket(&env);
    streaming.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < 64 * 1024 * 1024 && streaming.write_all(&chunk).is_ok() {
        sent += chunk.len();
    }
    assert!(sent < 64 * 1024 * 1024, "the standby stopped reading a line that never ends");
    dripping.write_all(b" ").unwrap();
    // Still answering, and still taken by the next turn.
    assert!(waiting(&env).is_some(), "{}", env.run(&["standby"]).stdout);
    assert_eq!(run(&env, &["search", "-r", "second"], &marker), "taken");
    assert!(ended(group));
    // Each was let go: the dripping one when its time was up, the other at once.
    let mut rest = Vec::new();
    dripping.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(dripping.read_to_end(&mut rest).unwrap_or(0), 0, "closed by the standby");
    env.run(&["standby", "--end"]).ok();
}

#[test]
fn a_standby_is_reached_from_its_launch() {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    // The engines on standby do not finish starting until `go` exists: each is still
    // starting when asked, however quick or slow the machine.
    let go = env.root.path().join("go");
    let vars = [("FAKE_INIT_AWAIT", go.to_str().unwrap())];
    env.run_with(&["search", "first"], None, &vars).ok();
    let listed = env.run(&["standby"]).ok().stdout.clone();
    assert!(listed.starts_with("claude") && listed.contains("starting"), "{listed}");
    assert_eq!(env.run(&["standby", "--end"]).ok().stdout, "ended: claude\n");
    assert!(env.run(&["standby"]).ok().stdout.contains("nothing waits"));

    // The next turn does not wait for one still starting that another turn left: it ends it.
    env.run_with(&["search", "-r", "second"], None, &vars).ok();
    assert!(env.run(&["standby"]).ok().stdout.contains("starting"));
    env.run_with(&["search", "third"], None, &vars).ok();
    std::fs::write(&go, "").unwrap();
    let group = ready(&env);
    let out = env.run(&["standby"]).ok().stdout.clone();
    assert_eq!(out.lines().count(), 1, "one waits: {out}");
    env.run(&["standby", "--end"]).ok();
    assert!(ended(group));
}

/// The next turn of the session asks for a standby still starting its engine: it waits for it,
/// as a cold start would, and is answered by it, where the standby let it go and ended.
#[test]
fn a_standby_still_starting_is_waited_for_and_taken() {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    let go = env.root.path().join("go");
    let vars = [("FAKE_INIT_AWAIT", go.to_str().unwrap())];
    env.run_with(&["search", "first"], None, &vars).ok();
    assert!(env.run(&["standby"]).ok().stdout.contains("starting"));
    let started = std::thread::scope(|scope| {
        let second = scope.spawn(|| env.run_with(&["search", "-r", "second"], None, &vars));
        // Its engine finishes starting once the turn has asked for it.
        std::thread::sleep(Duration::from_millis(500));
        std::fs::write(&go, "").unwrap();
        second.join().unwrap()
    });
    assert_eq!(started.ok().stdout.trim_end(), "ECHO: second");
    // The engine the standby started (the second call) answered it. (One killed before it
    // read its question leaves no record: a cold start would have been the third.)
    let call = std::fs::read_to_string(env.log.join("call-2.json")).unwrap_or_default();
    let call: serde_json::Value = serde_json::from_str(&call).unwrap_or_default();
    assert!(stdin_of(&call).contains("<user_query>\nsecond\n"), "{:?}", env.calls());
    env.run(&["standby", "--end"]).ok();
}

#[test]
fn what_a_standby_reports_is_shown_cleaned() {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    let folder = env.work.join("w\u{1b}]52;c;aGk=\u{7}\u{1b}[2J");
    std::fs::create_dir(&folder).unwrap();
    let mut cmd = env.command();
    cmd.current_dir(&folder).args(["search", "first"]);
    run_command(cmd, None).ok();
    ready(&env);
    for args in [&["standby"][..], &["doctor"][..]] {
        let out = env.run(args).stdout.clone();
        assert!(out.contains("w\u{fffd}]52;c;aGk="), "{out}");
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    }
    env.run(&["standby", "--end"]).ok();
}

/// A context file the engine reads as it starts, created or edited after the engine on standby
/// started, is read by the next turn's engine: that one starts cold. (gemini's files are in
/// `engine::gemini`'s unit tests: the fake gemini on standby speaks ACP only with its default
/// script, which the marker here replaces.)
#[test]
fn a_context_file_edited_while_it_waits_reaches_the_next_turn() {
    for (engine, file) in [("claude", "CLAUDE.md"), ("claude", ".claude/settings.json")] {
        let env = TestEnv::new();
        env.write_config(&format!("engine = \"{engine}\"\nstandby = \"1m\"\n"));
        // The engines on standby are calls 2 and 4.
        let marker = (taken_if_call(2).0, "say taken");
        let later = (taken_if_call(4).0, "say taken");
        let both = [(marker.0.as_str(), marker.1), (later.0.as_str(), later.1)];
        env.run_with(&["search", "first"], None, &both).ok();
        let first = ready_any(&env);
        let path = env.work.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "Answer in French.\n").unwrap();
        let run = env.run_with(&["search", "-r", "second"], None, &both);
        // The waiting one was stale: ended, and the turn started its own engine.
        assert_eq!(run.ok().stdout.trim_end(), "ECHO: second", "{engine}");
        assert!(ended(first), "{engine}");
        // Untouched since, the next one is taken.
        ready_any(&env);
        let run = env.run_with(&["search", "-r", "third"], None, &both);
        assert_eq!(run.ok().stdout.trim_end(), "taken", "{engine}");
        env.run(&["standby", "--end"]).ok();
    }
}

/// The process group of whichever engine waits, once one is ready.
fn ready_any(env: &TestEnv) -> i32 {
    let mut group = None;
    wait_until(Duration::from_secs(20), || {
        let out = env.run(&["standby"]).stdout.clone();
        group = out
            .lines()
            .find(|l| !l.contains("starting"))
            .and_then(|l| l.rsplit_once("process group ")?.1.trim_end_matches(')').parse().ok());
        group.is_some()
    });
    group.expect("an engine waits")
}

/// A pipeline waiting for a descriptor cca was given to close is not held up by the standby.
#[test]
fn a_standby_keeps_none_of_its_callers_descriptors() {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    let mut cmd = bash(&env, "\"$CCA\" search first 3>&1 | cat");
    cmd.stdin(std::process::Stdio::null());
    let child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    // Before the fix the pipeline ended with the standby, a minute later.
    let out = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), "ECHO: first");
    // And the standby still waits, holding no more than its own.
    let group = ready(&env);
    let fds = std::fs::read_dir(format!("/proc/{}/fd", standby_pid(group))).unwrap().count();
    assert!(fds < 12, "{fds} descriptors");
    env.run(&["standby", "--end"]).ok();
}

/// A standby left by a script's `$(cca ...)` serves the `,` typed next: bash's SHLVL differs.
#[test]
fn a_standby_left_by_a_script_serves_a_typed_turn() {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    // The script's turn starts cold (call 1); the standby it leaves is call 2.
    let marker = taken_if_call(2);
    let script = "answer=$(\"$CCA\" search -q first); echo \"$answer\"";
    let mut cmd = bash(&env, script);
    cmd.env(&marker.0, marker.1);
    assert_eq!(run_command(cmd, None).ok().stdout.trim_end(), "ECHO: first");
    ready(&env);
    let typed = [(marker.0.as_str(), marker.1), ("SHLVL", "1"), ("PWD", "/elsewhere")];
    let run = env.run_with(&["search", "-r", "second"], None, &typed);
    assert_eq!(run.ok().stdout.trim_end(), "taken", "the typed turn took it");
    env.run(&["standby", "--end"]).ok();
}

#[test]
fn its_files_are_in_use_and_a_signal_or_rm_ends_it_cleanly() {
    let (env, group) = claude_waiting();
    let doctor = env.run(&["doctor"]).stdout.clone();
    assert!(!doctor.contains("left by an interrupted cca"), "{doctor}");
    let engine_dirs = || {
        std::fs::read_dir(&env.cca_home)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".engine-"))
            .count()
    };
    // A signal ends it as an end request does: the engine and its files go.
    let had_files = engine_dirs();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(standby_pid(group)).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    assert!(ended(group));
    assert!(wait_until(Duration::from_secs(10), || engine_dirs() == 0), "{had_files} left");

    // Removing the session ends the one holding its conversation.
    env.run(&["search", "-r", "second"]).ok();
    let group = ready(&env);
    let path = env.run(&["path"]).ok().stdout.trim_end().to_string();
    let id = path.rsplit_once("session_").unwrap().1.trim_end_matches(".md").to_string();
    env.run(&["rm", "--purge", &id]).ok();
    assert!(ended(group), "ended with its session");
}

/// A turn whose standby is killed while it answers fails, and its record keeps how long it ran.
#[test]
fn a_turn_failed_by_its_standby_s_end_keeps_its_duration() {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    // The standby's engine (call 2) answers slowly.
    let slow = [("FAKE_SCRIPT_2", "sleep 3000;echo")];
    env.run_with(&["search", "first"], None, &slow).ok();
    let group = ready(&env);
    let standby = standby_pid(group);
    // Killed once its engine has the turn's question (its call's log is written as it reads it).
    let asked = env.log.join("call-2.json");
    let killer = std::thread::spawn(move || {
        wait_until(Duration::from_secs(30), || asked.exists());
        std::thread::sleep(Duration::from_millis(500));
        let pid = rustix::process::Pid::from_raw(standby).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    });
    let run = env.run_with(&["search", "-r", "second"], None, &slow);
    killer.join().unwrap();
    assert_ne!(run.code, Some(0), "{run}");
    let text = env.latest();
    let not_answered =
        |l: &&str| l.starts_with("<!-- cca:failed") || l.starts_with("<!-- cca:interrupted");
    let failed = text.lines().rev().find(not_answered).expect("a failed record");
    let ms: u64 = failed
        .split("\"duration_ms\":")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .expect("a duration");
    assert!(ms >= 400, "{failed}");
    assert!(ended(group));
}
