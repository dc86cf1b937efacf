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
    assert!(exit_code(&session).ends_with(", 130)"), "{}", exit_code(&session));
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

#[test]
fn typing_while_a_chat_answer_streams_steers_it() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let first = format!("say answer one;await {}", go.display());
    let mut session = in_pty(&env, &["chat"], &[("FAKE_SCRIPT_1", &first)]);
    session.exp_string("> ").unwrap();
    session.send_line("q1").unwrap();
    session.exp_string("answer one").unwrap();
    // Typed while the answer is still being written.
    session.send_line("focus on JWT").unwrap();
    session.exp_string("steer queued: focus on JWT").unwrap();
    // A command typed meanwhile is no steer: it runs once the turn is saved.
    session.send_line("/session").unwrap();
    std::fs::write(&go, "").unwrap();
    session.exp_string("steer taken: focus on JWT").unwrap();
    session.exp_string("ECHO: focus on JWT").unwrap();
    session.exp_string(&format!("cca: session {STAMP}: ")).unwrap();
    session.exp_string("> ").unwrap();
    // Back at the prompt, a line is a new turn again, not a steer.
    session.send_line("q2").unwrap();
    session.exp_string("ECHO: q2").unwrap();
    session.exp_string("> ").unwrap();
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
    let text = env.latest();
    let order: Vec<usize> = [
        "## 1. You\n\nq1",
        "answer one",
        "## 2. You\n\nfocus on JWT",
        "ECHO: focus on JWT",
        "## 3. You\n\nq2",
        "ECHO: q2",
    ]
    .iter()
    .map(|part| text.find(part).unwrap_or_else(|| panic!("{part:?} missing:\n{text}")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}\n{text}");
    let calls = env.calls();
    assert_eq!(calls.len(), 2, "the steer went to the running claude");
    assert_eq!(calls[0]["steers"], serde_json::json!(["focus on JWT"]), "/session is no steer");
}

#[test]
fn ctrl_c_still_stops_a_chat_answer() {
    let env = TestEnv::new();
    let mut session = in_pty(&env, &["chat"], &[("FAKE_SCRIPT", "say partial;hang")]);
    session.exp_string("> ").unwrap();
    session.send_line("q1").unwrap();
    session.exp_string("partial").unwrap();
    session.send_control('c').unwrap();
    session.exp_string("interrupted (Ctrl-C)").unwrap();
    session.exp_string("> ").unwrap();
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
    assert!(env.latest().contains("<!-- cca:interrupted "));
}
