//! What only a terminal shows: the spinner, and Ctrl-C typed at the keyboard. Driven through a
//! real pty.

use rexpect::session::{PtySession, spawn_command};

use crate::common::*;

fn in_pty(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> PtySession {
    let mut cmd = env.pty_command();
    cmd.args(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).expect("spawn in a pty")
}

fn exit_code(session: &PtySession) -> String {
    format!("{:?}", session.process().wait().unwrap())
}

#[test]
fn ctrl_c_typed_in_a_terminal_stops_the_turn() {
    let env = TestEnv::new();
    let engine_pid = env.root.path().join("engine.pid");
    let script = format!("ignore-term;pid {};say partial;hang", engine_pid.display());
    let mut session = in_pty(&env, &["search", "q-typed"], &[("FAKE_SCRIPT", &script)]);
    session.exp_string("partial").unwrap();
    let engine: i32 = std::fs::read_to_string(&engine_pid).unwrap().trim().parse().unwrap();
    session.send_control('c').unwrap();
    session.exp_string("interrupted (Ctrl-C)").unwrap();
    session.exp_eof().unwrap();
    // Dead by SIGINT, after cleaning up: what a shell reports as 130.
    assert!(exit_code(&session).contains("SIGINT"), "{}", exit_code(&session));
    assert!(!alive(engine));
    assert!(env.latest().contains("<!-- cca:interrupted "));
}

#[test]
fn a_spinner_shows_on_a_terminal_until_the_answer() {
    let env = TestEnv::new();
    let mut session = in_pty(&env, &["search", "q"], &[("FAKE_SCRIPT", "sleep 1500;echo")]);
    session.exp_string("waiting for claude").unwrap();
    let before_answer = session.exp_string("ECHO: q").unwrap();
    // Cleared before the answer: the line is erased (ESC[2K or ESC[K), and the answer follows.
    assert!(before_answer.contains("\u{1b}["), "{before_answer:?}");
    session.exp_eof().unwrap();

    // Never with -q.
    let mut session = in_pty(&env, &["search", "-q", "q2"], &[("FAKE_SCRIPT", "sleep 700;echo")]);
    let all = session.exp_eof().unwrap();
    assert!(!all.contains("waiting for"), "{all:?}");
    assert!(all.contains("ECHO: q2"));
}

#[test]
fn no_spinner_or_escape_codes_when_piped() {
    let env = TestEnv::new();
    let run = env.run_with(
        &["search", "q"],
        None,
        &[("FAKE_SCRIPT", "sleep 700;echo"), ("TERM", "xterm-256color")],
    );
    run.ok();
    assert!(!run.stderr.contains('\u{1b}') && !run.stdout.contains('\u{1b}'), "{run}");
    assert!(!run.stderr.contains("waiting for"), "{run}");
}

#[test]
fn no_spinner_on_a_dumb_terminal() {
    let env = TestEnv::new();
    let mut session =
        in_pty(&env, &["search", "q"], &[("FAKE_SCRIPT", "sleep 700;echo"), ("TERM", "dumb")]);
    let all = session.exp_eof().unwrap();
    assert!(!all.contains("waiting for"), "{all:?}");
}

#[test]
fn show_uses_bold_on_a_terminal_unless_no_color() {
    let env = TestEnv::new();
    env.run(&["search", "q"]).ok();
    let mut session = in_pty(&env, &["show"], &[("PAGER", "cat")]);
    let all = session.exp_eof().unwrap();
    assert!(all.contains("\u{1b}[1m"), "{all:?}");
    let mut session = in_pty(&env, &["show"], &[("PAGER", "cat"), ("NO_COLOR", "1")]);
    let all = session.exp_eof().unwrap();
    assert!(!all.contains("\u{1b}[1m") && all.contains("1. You"), "{all:?}");
    let mut session = in_pty(&env, &["show"], &[("PAGER", "cat"), ("TERM", "dumb")]);
    let all = session.exp_eof().unwrap();
    assert!(!all.contains("\u{1b}[1m"), "{all:?}");
}
