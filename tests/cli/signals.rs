//! Ctrl-C, SIGTERM, SIGHUP, SIGQUIT (Ctrl-\\) and SIGTSTP (Ctrl-Z): the whole engine group stops, the partial answer is recorded as
//! interrupted (never replayed), and cca exits 128 + the signal.

use std::io::Read;
use std::process::Stdio;

use rustix::process::Signal;

use crate::common::*;

fn pid_in(path: &std::path::Path) -> i32 {
    assert!(wait_until(TIMEOUT, || std::fs::read_to_string(path).is_ok_and(|s| !s.is_empty())));
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

/// Starts `cca search` with an engine that ignores SIGTERM and has a grandchild that does too,
/// sends `signal` once the partial answer is out, and checks that nothing is left running.
fn interrupt_with(signal: Signal, expected_code: i32) {
    let env = TestEnv::new();
    env.run(&["search", "first"]).ok();
    let (engine_pid, grandchild_pid) =
        (env.root.path().join("engine.pid"), env.root.path().join("grandchild.pid"));
    let script = format!(
        "ignore-term;grandchild {};pid {};say partial answer;hang",
        grandchild_pid.display(),
        engine_pid.display()
    );
    let mut cmd = env.command();
    cmd.args(["search", "-r", "q-second"])
        .env("FAKE_SCRIPT", script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut cca = Guard(cmd.spawn().unwrap());
    let engine = pid_in(&engine_pid);
    let grandchild = pid_in(&grandchild_pid);
    let mut stdout = cca.0.stdout.take().unwrap();
    let mut seen = [0u8; 14];
    stdout.read_exact(&mut seen).unwrap();
    assert_eq!(&seen, b"partial answer");

    cca.signal(signal);
    let output = cca.finish();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(shell_status(output.status), expected_code, "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!alive(engine), "the engine is still running");
    assert!(!alive(grandchild), "the engine's child is still running");

    let text = env.latest();
    assert!(text.contains("<!-- cca:interrupted "), "{text}");
    assert!(text.contains("\n\npartial answer\n<!-- cca:end -->"), "{text}");
    assert!(text.contains("## 2. You\n\nq-second\n"), "the question is kept");

    env.run(&["search", "-r", "third"]).ok();
    let stdin = stdin_of(&env.last_call()).to_string();
    assert!(!stdin.contains("partial answer") && !stdin.contains("q-second"), "{stdin}");
}

#[test]
fn ctrl_c_stops_the_engine_group_and_records_the_partial_answer() {
    interrupt_with(Signal::INT, 130);
}

#[test]
fn sigterm_exits_143() {
    interrupt_with(Signal::TERM, 143);
}

#[test]
fn sighup_exits_129() {
    interrupt_with(Signal::HUP, 129);
}

#[test]
fn sigquit_exits_131() {
    interrupt_with(Signal::QUIT, 131);
}

/// Ctrl-Z is a cancel: suspending cca alone would leave the engine running behind it.
#[test]
fn sigtstp_stops_the_turn_and_exits_148() {
    interrupt_with(Signal::TSTP, 148);
}

#[test]
fn a_second_ctrl_c_kills_at_once() {
    let env = TestEnv::new();
    let engine_pid = env.root.path().join("engine.pid");
    let mut cmd = env.command();
    // A grace period longer than any test: only the second Ctrl-C can end the engine in time.
    let termed = env.root.path().join("termed");
    cmd.args(["search", "q"])
        .env(
            "FAKE_SCRIPT",
            format!("note-term {};pid {};hang", termed.display(), engine_pid.display()),
        )
        .env("CCA_GRACE_MS", "3600000")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let cca = Guard(cmd.spawn().unwrap());
    let engine = pid_in(&engine_pid);
    cca.signal(Signal::INT);
    // The first Ctrl-C asked the engine to stop (it ignores that); only then the second.
    assert!(wait_until(TIMEOUT, || termed.exists()), "the first Ctrl-C sends SIGTERM");
    assert!(alive(engine), "the engine ignores SIGTERM, and the grace period is long");
    cca.signal(Signal::INT);
    assert!(wait_until(TIMEOUT, || !alive(engine)), "a second Ctrl-C kills at once");
    let status = cca.finish().status;
    assert_eq!(shell_status(status), 130);
}

#[test]
fn leftovers_of_a_finished_engine_are_stopped() {
    let env = TestEnv::new();
    let grandchild_pid = env.root.path().join("grandchild.pid");
    let run = env.run_with(
        &["search", "q"],
        None,
        &[("FAKE_SCRIPT", &format!("grandchild {};echo", grandchild_pid.display()))],
    );
    run.ok();
    assert_eq!(run.stdout, "ECHO: q");
    assert!(!alive(pid_in(&grandchild_pid)));
}

/// The guard (`run::guard`) leads the engine's process group, a child of cca as the engine
/// is, and is gone once the turn is: nothing of the turn is left running. The engine's exit
/// and signal reach cca.
#[test]
fn the_engine_s_guard_leads_its_group_and_ends_with_the_turn() {
    let env = TestEnv::new();
    let file = env.root.path().join("group");
    let script = format!("group-leader {};say ok", file.display());
    env.run_with(&["search", "q"], None, &[("FAKE_SCRIPT", &script)]).ok();
    let line = std::fs::read_to_string(&file).unwrap();
    let [engine, group, leader_parent, parent] = line.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{line}")
    };
    assert_ne!(engine, group, "the engine leads no group: {line}");
    assert_eq!(leader_parent, parent, "the group's leader is a child of cca: {line}");
    assert!(!std::path::Path::new(&format!("/proc/{group}")).exists(), "the guard is gone: {line}");

    let run = env.run_with(&["search", "-r", "q2"], None, &[("FAKE_SCRIPT", "say half;exit 3")]);
    assert!(run.stderr.contains("exit status 3"), "{run}");
    let run =
        env.run_with(&["search", "-r", "q3"], None, &[("FAKE_SCRIPT", "say half;kill-self 9")]);
    assert!(run.stderr.contains("killed by signal 9"), "{run}");
}
