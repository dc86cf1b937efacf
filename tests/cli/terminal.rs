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
    // The engine answers only once the spinner was seen: no race with the spinner's delay.
    let go = env.work.join("go");
    let script = format!("await {};echo", go.display());
    let mut session = in_pty(&env, &["search", "q"], &[("FAKE_SCRIPT", script.as_str())]);
    session.exp_string("waiting for claude").unwrap();
    std::fs::write(&go, "").unwrap();
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

/// PAGER is a shell command, as git runs it: quotes and pipes work, not only words.
#[test]
fn show_runs_pager_through_the_shell() {
    let env = TestEnv::new();
    env.run(&["search", "q"]).ok();
    let pager = "sed 's/^/PAGED> /' | cat";
    let mut session = in_pty(&env, &["show"], &[("PAGER", pager), ("NO_COLOR", "1")]);
    let all = session.exp_eof().unwrap();
    assert!(all.contains("PAGED> ECHO: q"), "{all:?}");
}

/// A pager that fails (one that exits at once with an error) is said to have failed: what it
/// was given may not have been shown.
#[test]
fn a_pager_that_fails_is_said_to() {
    let env = TestEnv::new();
    env.run(&["search", "q"]).ok();
    for pager in ["false", "cat >/dev/null; exit 3"] {
        let mut session = in_pty(&env, &["show"], &[("PAGER", pager), ("NO_COLOR", "1")]);
        let all = session.exp_eof().unwrap();
        assert!(all.contains(&format!("the pager `{pager}` failed")), "{all:?}");
        assert!(all.contains("PAGER=cat"), "{all:?}");
    }
    // One that quits early, and well, is not.
    let mut session = in_pty(&env, &["show"], &[("PAGER", "head -c 1"), ("NO_COLOR", "1")]);
    let all = session.exp_eof().unwrap();
    assert!(!all.contains("failed"), "{all:?}");
}

/// The default pager (less) is told that what it shows is UTF-8, whatever the locale.
#[test]
fn the_default_pager_is_told_the_text_is_utf8() {
    let env = TestEnv::new();
    env.run(&["search", "q"]).ok();
    let less = env.bin.join("less");
    std::fs::write(&less, "#!/bin/sh\necho \"charset=$LESSCHARSET args=$*\"\ncat >/dev/null\n")
        .unwrap();
    std::fs::set_permissions(&less, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut session = in_pty(&env, &["show"], &[("LANG", "C"), ("LC_ALL", "C")]);
    let all = session.exp_eof().unwrap();
    assert!(all.contains("charset=utf-8 args=-FRX"), "{all:?}");
    // A pager of the user's own is run as it is.
    let mut session = in_pty(&env, &["show"], &[("PAGER", "less"), ("LC_ALL", "C")]);
    let all = session.exp_eof().unwrap();
    assert!(all.contains("charset= args="), "{all:?}");
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

/// An answer with something of everything the renderer draws.
const MARKDOWN: &str = "say # Plan\\n\\nUse **bold** and `code`.\\n\\n| k | value |\\n|---|--:|\\n\
                        | a | 1 |\\n| bb | 22 |\\n\\n```rust\\nfn main() {}\\n```\\n\\n\
                        See [the docs](https://example.com/d).";
const ANSWER: &str = "# Plan\n\nUse **bold** and `code`.\n\n| k | value |\n|---|--:|\n\
                      | a | 1 |\n| bb | 22 |\n\n```rust\nfn main() {}\n```\n\n\
                      See [the docs](https://example.com/d).";

/// A session whose answer is `ANSWER`.
fn markdown_session() -> TestEnv {
    let env = TestEnv::new();
    env.run_with(&["search", "-q", "plan it"], None, &[("FAKE_SCRIPT", MARKDOWN)]).ok();
    assert!(env.latest().contains(ANSWER), "{}", env.latest());
    env
}

/// What a pty printed, as UTF-8 (rexpect hands over one char per byte), with the terminal's
/// `\r\n` turned back into `\n`.
fn shown(session: &mut PtySession) -> String {
    let bytes: Vec<u8> = session.exp_eof().unwrap().chars().map(|c| c as u8).collect();
    String::from_utf8(bytes).expect("UTF-8 output").replace("\r\n", "\n")
}

#[test]
fn show_renders_answers_on_a_terminal() {
    let env = markdown_session();
    let mut session = in_pty(&env, &["show"], &[("PAGER", "cat")]);
    let all = shown(&mut session);
    assert!(all.contains("\u{1b}[1;4;35mPlan\u{1b}[0m"), "a styled heading: {all:?}");
    assert!(all.contains("Use \u{1b}[1mbold\u{1b}[0m and \u{1b}[36mcode\u{1b}[0m."), "{all:?}");
    assert!(all.contains("\u{1b}[35mfn\u{1b}[0m"), "highlighted code: {all:?}");
    // The code block without its fence lines, labelled with its language.
    assert!(!all.contains("```") && all.contains("\u{1b}[2mrust\u{1b}[0m"), "{all:?}");
    // The table's columns line up, the numbers to the right.
    assert!(all.contains("a \u{1b}[2m │ \u{1b}[0m    1\n"), "{all:?}");
    assert!(all.contains("bb\u{1b}[2m │ \u{1b}[0m   22\n"), "{all:?}");
    // No terminal known to show hyperlinks: the URL follows the text.
    assert!(all.contains("the docs\u{1b}[0m\u{1b}[2m (https://example.com/d)"), "{all:?}");
    assert!(!all.contains("**bold**") && !all.contains("| a | 1 |"), "{all:?}");
    // What the user typed is shown as it is.
    assert!(all.contains("plan it\n"), "{all:?}");

    let mut session = in_pty(&env, &["show"], &[("PAGER", "cat"), ("FORCE_HYPERLINK", "1")]);
    let all = shown(&mut session);
    let link = "\u{1b}]8;;https://example.com/d\u{1b}\\\u{1b}[4;34mthe docs\u{1b}]8;;\u{1b}\\";
    assert!(all.contains(link), "{all:?}");
    assert!(!all.contains("(https://example.com/d)"), "{all:?}");
}

#[test]
fn show_piped_is_the_exact_text_even_from_a_terminal() {
    let env = markdown_session();
    let piped = env.run_with(&["show"], None, &[("TERM", "xterm-256color")]);
    piped.ok();
    assert!(piped.stdout.contains(&format!("{ANSWER}\n")), "{piped}");
    assert!(!piped.stdout.contains('\u{1b}'), "{piped}");
    // In a terminal, through a pipe: stdout is not the terminal, so nothing is rendered.
    let shell = |line: String| {
        let template = env.pty_command();
        let mut cmd = std::process::Command::new("sh");
        cmd.env_clear().arg("-c").arg(line);
        for (k, v) in template.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        cmd.current_dir(&env.work);
        let mut session = spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
        shown(&mut session)
    };
    let cca = cca_exe().display().to_string();
    assert_eq!(shell(format!("'{cca}' show | cat")), piped.stdout);
    assert_eq!(shell(format!("'{cca}' show --raw | cat")), env.latest());
}

#[test]
fn no_escape_codes_with_no_color_or_a_dumb_terminal() {
    let env = markdown_session();
    for vars in [[("PAGER", "cat"), ("NO_COLOR", "1")], [("PAGER", "cat"), ("TERM", "dumb")]] {
        let mut session = in_pty(&env, &["show"], &vars);
        let all = shown(&mut session);
        assert!(!all.contains('\u{1b}'), "{vars:?}: {all:?}");
        // Still rendered: the table lines up, the link's URL is shown, markers stay.
        assert!(all.contains("a  │     1\nbb │    22\n"), "{all:?}");
        assert!(all.contains("See the docs (https://example.com/d)."), "{all:?}");
        assert!(all.contains("# Plan\n") && all.contains("**bold**"), "{all:?}");
    }
}

#[test]
fn render_never_and_always_in_the_config() {
    let env = markdown_session();
    env.write_config("render = \"never\"\n");
    let mut session = in_pty(&env, &["show"], &[("PAGER", "cat")]);
    let all = shown(&mut session);
    assert!(all.contains(&format!("{ANSWER}\n")), "the exact text: {all:?}");

    env.write_config("render = \"always\"\n");
    let piped = env.run_with(&["show"], None, &[("TERM", "xterm-256color")]);
    assert!(piped.ok().stdout.contains("\u{1b}[1;4;35mPlan"), "{piped}");
    let piped = env.run_with(&["show"], None, &[("TERM", "xterm-256color"), ("NO_COLOR", "1")]);
    assert!(!piped.ok().stdout.contains('\u{1b}'), "{piped}");
    assert!(piped.stdout.contains("a  │     1\n"), "{piped}");
    // --raw is never rendered.
    assert_eq!(env.run(&["show", "--raw"]).ok().stdout, env.latest());

    let config = env.run(&["config"]);
    assert!(config.ok().stdout.contains("always (answers rendered, also when piped)"), "{config}");
}

#[test]
fn search_renders_the_answer_as_it_streams_and_keeps_the_exact_text() {
    let env = TestEnv::new();
    let mut session = in_pty(&env, &["search", "plan it"], &[("FAKE_SCRIPT", MARKDOWN)]);
    let all = shown(&mut session);
    assert!(all.contains("\u{1b}[1;4;35mPlan\u{1b}[0m"), "a styled heading: {all:?}");
    assert!(all.contains("Use \u{1b}[1mbold\u{1b}[0m and \u{1b}[36mcode\u{1b}[0m."), "{all:?}");
    assert!(all.contains("\u{1b}[35mfn\u{1b}[0m"), "highlighted code: {all:?}");
    // The code block labelled with its language, in place of its fence line.
    assert!(all.contains("\u{1b}[2mrust\u{1b}[0m"), "{all:?}");
    assert!(all.contains("bb\u{1b}[2m │ \u{1b}[0m   22"), "an aligned table: {all:?}");
    assert!(!all.contains("**bold**"), "{all:?}");
    // The transcript keeps the answer exactly as the engine wrote it.
    assert!(env.latest().contains(ANSWER), "{}", env.latest());

    // Piped, with -q, with --json, or with render = "never": the answer byte for byte.
    let piped = env.run_with(&["search", "plan it"], None, &[("FAKE_SCRIPT", MARKDOWN)]);
    assert_eq!(piped.ok().stdout, ANSWER);
    let mut session = in_pty(&env, &["search", "-q", "plan it"], &[("FAKE_SCRIPT", MARKDOWN)]);
    assert_eq!(shown(&mut session), format!("{ANSWER}\n"));
    env.write_config("render = \"never\"\n");
    let mut session = in_pty(&env, &["search", "plan it"], &[("FAKE_SCRIPT", MARKDOWN)]);
    let all = shown(&mut session);
    assert!(all.contains(ANSWER) && !all.contains("\u{1b}[1m"), "{all:?}");
}

#[test]
fn search_raw_prints_the_answer_byte_for_byte_on_a_terminal() {
    let env = TestEnv::new();
    for args in [&["search", "--raw", "plan it"][..], &[",", "--raw", "and again"]] {
        let mut session = in_pty(&env, args, &[("FAKE_SCRIPT", MARKDOWN)]);
        let all = shown(&mut session);
        assert!(all.contains(&format!("{ANSWER}\n")), "{args:?}: {all:?}");
        assert!(!all.contains("\u{1b}[1m"), "not rendered: {all:?}");
        assert!(exit_code(&session).contains(", 0)"), "{}", exit_code(&session));
    }
}

#[test]
fn search_renders_without_escape_codes_under_no_color() {
    let env = TestEnv::new();
    let slow = format!("sleep 300;{MARKDOWN}");
    for var in [("NO_COLOR", "1"), ("TERM", "dumb")] {
        let mut session = in_pty(&env, &["search", "plan it"], &[("FAKE_SCRIPT", &slow), var]);
        let all = shown(&mut session);
        // No escape code at all, not even a spinner's redrawing while the engine is silent;
        // yet the table lines up, the link is shown, and the code block keeps its fences, the
        // only sign of it without colour.
        assert!(!all.contains('\u{1b}') && !all.contains("waiting for"), "{var:?}: {all:?}");
        let answer = &all[all.find("# Plan").expect("the answer")..];
        assert!(answer.contains("```rust\nfn main() {}\n```\n"), "{answer:?}");
        assert!(answer.contains("bb │    22\n"), "{answer:?}");
        assert!(answer.contains("the docs (https://example.com/d)"), "{answer:?}");
    }
}

#[test]
fn typing_while_a_chat_answer_streams_steers_it() {
    let env = TestEnv::new();
    // One engine run per turn, each checked: a kept claude would take them all.
    env.write_config("[engines.claude]\nkeep_warm = \"off\"\n");
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

#[test]
fn after_each_answer_a_dim_line_says_what_it_cost_and_the_session_so_far() {
    // The fake engine speaks as claude: 12 tokens in, 34 out, $0.0015 an answer.
    let env = TestEnv::new();
    let mut session = in_pty(&env, &["search", "first"], &[]);
    let all = shown(&mut session);
    assert!(all.contains("\u{1b}[2m12 tokens in · 34 out · $0.0015\u{1b}[0m"), "{all:?}");
    let mut session = in_pty(&env, &["search", "-r", "second"], &[]);
    let all = shown(&mut session);
    assert!(
        all.contains("12 tokens in · 34 out · $0.0015 (session: 24 tokens in · 68 out · $0.0030)"),
        "{all:?}"
    );
    // Not on a pipe, not with -q: stderr there is for errors.
    let piped = env.run(&["search", "-r", "third"]);
    assert!(!piped.ok().stderr.contains("tokens in"), "{piped}");

    // The session's totals, kept by the transcript: in `cca show`, `sessions --json`, `--json`.
    let show = env.run(&["show"]);
    assert!(show.ok().stdout.contains("the answers so far: 36 tokens in · 102 out · $0.0045"));
    let json = env.run(&["search", "-r", "--json", "fourth"]);
    let v: serde_json::Value = serde_json::from_str(&json.ok().stdout).unwrap();
    assert_eq!(v["session_usage"]["input_tokens"], 48);
    assert_eq!(v["session_usage"]["output_tokens"], 136);
    let list = env.run(&["sessions", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&list.ok().stdout).unwrap();
    assert_eq!(v[0]["usage"]["input_tokens"], 48, "{v}");
    assert!((v[0]["usage"]["cost_usd"].as_f64().unwrap() - 0.006).abs() < 1e-9, "{v}");
}

#[test]
fn an_engine_that_wants_the_terminal_is_ended_and_the_user_told_why() {
    let env = TestEnv::new();
    let engine_pid = env.root.path().join("engine.pid");
    // As ssh asking for a password: the engine reads /dev/tty from its background group, and
    // the system stops it.
    let script = format!("pid {};say partial;tty", engine_pid.display());
    let mut session = in_pty(&env, &["search", "q"], &[("FAKE_SCRIPT", &script)]);
    session.exp_string("partial").unwrap();
    let engine: i32 = std::fs::read_to_string(&engine_pid).unwrap().trim().parse().unwrap();
    session.exp_string("engines get no terminal").unwrap();
    session.exp_string("by hand once").unwrap();
    session.exp_eof().unwrap();
    assert!(exit_code(&session).contains(", 1)"), "{}", exit_code(&session));
    assert!(!alive(engine), "the engine is still there");
    let text = env.latest();
    assert!(text.contains("<!-- cca:failed "), "{text}");
    assert!(text.contains("engines get no terminal"), "{text}");
    assert!(text.contains("\n\npartial\n<!-- cca:end -->"), "what arrived is kept: {text}");
}

/// Runs `cca chat` in a pty inside a shell that then prints cca's status and the terminal's
/// modes; cca's pid goes to `pid_file`.
fn chat_in_a_shell(env: &TestEnv, pid_file: &std::path::Path) -> PtySession {
    let cca = cca_exe().display().to_string();
    let inner = format!("echo \\$\\$ > '{}'; exec '{cca}' chat", pid_file.display());
    let line = format!("sh -c \"{inner}\"; echo \"status $?\"; stty -a");
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c").arg(line);
    in_pty_with_env(env, cmd)
}

/// Spawns `cmd` in a pty, in the test's folder, with the environment cca gets in the tests.
fn in_pty_with_env(env: &TestEnv, mut cmd: std::process::Command) -> PtySession {
    let template = env.pty_command();
    cmd.env_clear().current_dir(&env.work);
    for (k, v) in template.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).expect("spawn in a pty")
}

#[test]
fn sigterm_and_sighup_at_the_chat_prompt_end_chat_and_restore_the_terminal() {
    for (signal, status) in
        [(rustix::process::Signal::TERM, 143), (rustix::process::Signal::HUP, 129)]
    {
        let env = TestEnv::new();
        let pid_file = env.root.path().join("cca.pid");
        let mut session = chat_in_a_shell(&env, &pid_file);
        session.exp_string("> ").unwrap();
        session.send_line("q1").unwrap();
        session.exp_string("ECHO: q1").unwrap();
        // Back at the prompt, the line editor holds the terminal in raw mode.
        session.exp_string("> ").unwrap();
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let pid = rustix::process::Pid::from_raw(pid).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        session.exp_string(&format!("status {status}")).unwrap();
        // `stty -a`: the line mode is back (`-icanon -isig` while raw). (The pty was made
        // without echo, so echo says nothing.)
        let modes = session.exp_eof().unwrap();
        let set = |flag: &str| modes.split_whitespace().any(|w| w == flag);
        assert!(set("icanon") && set("isig"), "{signal:?}: {modes}");
        assert!(env.latest().contains("ECHO: q1"));
    }
}

#[test]
fn ctrl_c_stops_a_chat_waiting_for_a_busy_session() {
    let env = TestEnv::new();
    env.run(&["search", "q0"]).ok();
    // Another cca answers in the session until the test says so.
    let go = env.root.path().join("go");
    let mut holder = env.command();
    holder
        .args(["search", "-r", "held"])
        .env("FAKE_SCRIPT", format!("say held answer;await {}", go.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let holder = Guard(holder.spawn().unwrap());
    assert!(wait_until(TIMEOUT, || env.latest().contains("held")), "the holder's question");
    let mut session = in_pty(&env, &["chat", "-r"], &[]);
    session.exp_string("> ").unwrap();
    session.send_line("q-waiting").unwrap();
    session.exp_string("is busy").unwrap();
    session.send_control('c').unwrap();
    session.exp_string("nothing was recorded").unwrap();
    session.exp_string("> ").unwrap();
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
    std::fs::write(&go, "").unwrap();
    assert_eq!(holder.finish().status.code(), Some(0));
    assert!(!env.latest().contains("q-waiting"), "{}", env.latest());
}

/// Escape sequences a hostile transcript (shared, downloaded) can hold: the clipboard (OSC 52),
/// the window title (OSC 0), a hidden link (OSC 8), a cleared screen (CSI and its C1 form).
const HOSTILE: &str = "\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}]0;owned\u{7}\u{1b}]8;;http://evil\u{1b}\\link\u{1b}[2J\u{9b}2J";

/// A session whose every record, title and name holds [`HOSTILE`], as a file could.
fn hostile_session() -> TestEnv {
    use cca::transcript::{Kind, Meta, Record, render_record};
    use std::io::Write;
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let meta = |f: &dyn Fn(&mut Meta)| {
        let mut m = Meta::default();
        f(&mut m);
        m
    };
    let records = [
        (Kind::User, Meta::default()),
        (Kind::Attachment, meta(&|m| m.name = Some(format!("a{HOSTILE}.txt")))),
        (Kind::Assistant, meta(&|m| m.model = Some(format!("m{HOSTILE}")))),
        (Kind::User, Meta::default()),
        (Kind::Failed, meta(&|m| m.reason = Some(format!("failed {HOSTILE}")))),
        (Kind::User, Meta::default()),
        (Kind::Interrupted, meta(&|m| m.reason = Some(format!("stopped {HOSTILE}")))),
    ];
    let mut text = String::new();
    for (n, (kind, meta)) in records.into_iter().enumerate() {
        let content = format!("said {HOSTILE} here\r\nand more");
        text.push('\n');
        text.push_str(&render_record(&Record { kind, meta, content }, 2 + n as u64 / 2));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    env
}

/// No escape sequence of the transcript's reached the terminal: OSC, BEL, a CSI that clears.
fn assert_defused(all: &str) {
    for bad in ["\u{1b}]", "\u{7}", "\u{1b}[2J", "\u{9b}"] {
        assert!(!all.contains(bad), "{bad:?} reached the terminal: {all:?}");
    }
}

#[test]
fn show_cleans_every_record_and_title_on_a_terminal_and_pipes_the_exact_text() {
    let env = hostile_session();
    // Rendered (through a pager that passes everything on), and not rendered: a dumb terminal
    // without a pager, and `render = "never"`.
    for vars in
        [&[("PAGER", "cat")][..], &[("TERM", "dumb")], &[("PAGER", "cat"), ("NO_COLOR", "1")]]
    {
        let mut session = in_pty(&env, &["show"], vars);
        let all = shown(&mut session);
        assert_defused(&all);
        assert!(all.contains("said \u{fffd}]52;c;ZXZpbA==\u{fffd}"), "{vars:?}: {all:?}");
        assert!(all.contains("not answered, not sent again: failed ]52;c;ZXZpbA=="), "{all:?}");
        assert!(all.contains("interrupted, not sent again: stopped ]52"), "{all:?}");
        assert!(all.contains("attached: a ]52;c;ZXZpbA=="), "{all:?}");
        assert!(all.contains("(m ]52;c;ZXZpbA=="), "{all:?}");
    }
    env.write_config("render = \"never\"\n");
    let mut session = in_pty(&env, &["show"], &[("PAGER", "cat")]);
    assert_defused(&shown(&mut session));
    // Piped, each record is its exact text.
    let piped = env.run(&["show"]);
    assert!(piped.ok().stdout.contains(&format!("said {HOSTILE} here\r\nand more")), "{piped}");
}

#[test]
fn grep_cleans_matching_lines_on_a_terminal_and_pipes_the_exact_text() {
    let env = hostile_session();
    for vars in [&[][..], &[("NO_COLOR", "1")]] {
        let mut session = in_pty(&env, &["grep", "said"], vars);
        let all = shown(&mut session);
        assert_defused(&all);
        assert!(all.contains(" \u{fffd}]52;c;ZXZpbA==\u{fffd}\u{fffd}]0;owned"), "{all:?}");
        assert!(all.contains("You (a ]52;c;ZXZpbA=="), "{all:?}");
    }
    let piped = env.run(&["grep", "said"]);
    assert!(piped.ok().stdout.contains(&format!("2. You: said {HOSTILE} here\n")), "{piped}");
}

/// 2^63 tokens: two of them summed with `+` made a session total of 0.
const HUGE: &str = "9223372036854775808";

#[test]
fn usage_figures_that_make_no_sense_are_left_out_with_a_note() {
    let env = TestEnv::new();
    let absurd = format!(
        "usage {{\"input_tokens\":{HUGE},\"output_tokens\":34,\"total_cost_usd\":-3}};echo"
    );
    for args in [&["search", "first"][..], &["search", "-r", "second"]] {
        let mut session = in_pty(&env, args, &[("FAKE_SCRIPT", &absurd)]);
        let all = shown(&mut session);
        assert!(exit_code(&session).contains(", 0)"), "{all:?}");
        assert!(
            all.contains("claude reported an input token count that makes no sense (more than 2^40 tokens): left out"),
            "{all:?}"
        );
        assert!(
            all.contains("claude reported a cost that makes no sense (negative): left out"),
            "{all:?}"
        );
        assert!(all.contains("34 tokens out"), "the figure that makes sense is kept: {all:?}");
        assert!(
            !all.contains(HUGE) && !all.contains("$-") && !all.contains("tokens in"),
            "{all:?}"
        );
    }
    // Nothing that makes no sense was recorded, so the session's totals hold only the rest.
    assert!(!env.latest().contains(HUGE) && !env.latest().contains("cost_usd"), "{}", env.latest());
    let json =
        env.run_with(&["search", "-r", "--json", "third"], None, &[("FAKE_SCRIPT", &absurd)]);
    let v: serde_json::Value = serde_json::from_str(&json.ok().stdout).unwrap();
    assert_eq!(v["usage"]["input_tokens"], serde_json::Value::Null);
    assert_eq!(v["cost_usd"], serde_json::Value::Null);
    assert_eq!(v["session_usage"]["output_tokens"], 102);
    assert!(json.stderr.contains("makes no sense"), "{json}");
}

#[test]
fn absurd_figures_in_a_transcript_are_left_out_and_sums_saturate() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    // A hand-edited or hostile file: 2^63 tokens twice, $1e308 twice (infinity summed), -$3.
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (n, figures) in [
        format!("\"input_tokens\":{HUGE},\"cost_usd\":1e308"),
        format!("\"input_tokens\":{HUGE},\"cost_usd\":1e308"),
        "\"output_tokens\":5,\"cost_usd\":-3.0".to_string(),
    ]
    .iter()
    .enumerate()
    {
        text.push_str(&format!(
            "\n<!-- cca:user -->\n## {t}. You\n\nq{n}\n<!-- cca:end -->\n\
             \n<!-- cca:assistant {{\"engine\":\"claude\",{figures}}} -->\n## {t}. claude\n\na{n}\n<!-- cca:end -->\n",
            t = n + 2
        ));
    }
    std::fs::write(&path, text).unwrap();
    let show = env.run(&["show"]);
    let head =
        show.ok().stdout.lines().find(|l| l.starts_with("the answers so far")).unwrap().to_string();
    // The first answer's own figures (12 in, 34 out, $0.0015) and the 5 tokens out; the five
    // figures that make no sense are not numbers.
    assert_eq!(
        head,
        "the answers so far: 12 tokens in · 39 out · $0.0015 · figures that made no sense left out (5)"
    );
    let listed = env.run(&["sessions", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&listed.ok().stdout).unwrap();
    let usage = &v[0]["usage"];
    assert_eq!(
        (usage["input_tokens"].as_u64(), usage["output_tokens"].as_u64()),
        (Some(12), Some(39))
    );
    assert_eq!(usage["cost_usd"].as_f64(), Some(0.0015));
    assert_eq!(usage["left_out"], 5);
    let mut session = in_pty(&env, &["search", "-r", "next"], &[]);
    let all = shown(&mut session);
    assert!(
        all.contains("12 tokens in · 34 out · $0.0015 (session: 24 tokens in · 73 out · $0.0030) · figures that made no sense left out (5)"),
        "{all:?}"
    );
}

/// Ctrl-Z at the chat prompt suspends cca; after `fg` the prompt is drawn again and the line
/// editor works as before. Driven through an interactive shell, which does the job control.
#[test]
fn ctrl_z_at_the_chat_prompt_and_fg_draw_the_prompt_again() {
    let env = TestEnv::new();
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["--norc", "--noprofile", "-i"]);
    let mut session = in_pty_with_env(&env, cmd);
    session.send_line("PS1='shell$ '; PS2='more$ '").unwrap();
    session.exp_string("shell$ ").unwrap();
    session.send_line(&format!("{} chat", cca_exe().display())).unwrap();
    session.exp_string("Ctrl-D to leave").unwrap();
    session.exp_string("> ").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    session.send_control('z').unwrap();
    // Stopped at once: the prompt is not redrawn just before the stop (and so lost), but after.
    let before_stop = session.exp_string("Stopped").unwrap();
    assert!(!before_stop.contains('>'), "{before_stop:?}");
    session.exp_string("shell$ ").unwrap();
    session.send_line("fg").unwrap();
    session.exp_string("> ").unwrap();
    session.send_line("after fg").unwrap();
    session.exp_string("ECHO: after fg").unwrap();
    session.exp_string("> ").unwrap();
    session.send_control('d').unwrap();
    session.exp_string("shell$ ").unwrap();
    session.send_line("exit").unwrap();
    session.exp_eof().unwrap();
}

/// What is typed while an answer streams is not echoed into the answer's line: it shows on a
/// line of its own once Enter sends it (`steer queued: ...`). The terminal echoes, as a user's
/// does (the test pty does not by default).
#[test]
fn typing_while_a_chat_answer_streams_stays_off_the_answer_s_line() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let mut cmd = std::process::Command::new("sh");
    let line = format!(
        "stty echo; FAKE_SCRIPT_1='say answer one;await {}' exec {} chat",
        go.display(),
        cca_exe().display()
    );
    cmd.arg("-c").arg(line);
    let mut session = in_pty_with_env(&env, cmd);
    session.exp_string("> ").unwrap();
    session.send_line("q1").unwrap();
    session.exp_string("answer one").unwrap();
    session.send_line("focus on JWT").unwrap();
    let before = session.exp_string("steer queued: focus on JWT").unwrap();
    assert!(!before.contains("focus on JWT"), "typing echoed into the answer: {before:?}");
    std::fs::write(&go, "").unwrap();
    session.exp_string("ECHO: focus on JWT").unwrap();
    // Back at the prompt, typing shows again.
    session.exp_string("> ").unwrap();
    session.send_line("q2").unwrap();
    session.exp_string("ECHO: q2").unwrap();
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
}

/// A steer's notices stand on lines of their own, even while the answer is inside a line; the
/// unfinished line is taken off the screen first and shown once, rendered, when it ends.
#[test]
fn steer_notices_stand_on_their_own_lines_mid_answer() {
    let env = TestEnv::new();
    let script = "say half a line;take;say  and the rest.\\n";
    // Rendered live, and as it is (without colour, nothing shows before its line ends).
    for args in [&["search", "q"][..], &["search", "--raw", "q"]] {
        let mut session = in_pty(&env, args, &[("FAKE_SCRIPT", script)]);
        session.exp_string("half a line").unwrap();
        let run_dir = env.cca_home.join("run");
        let listening = || {
            std::fs::read_dir(&run_dir).is_ok_and(|d| {
                d.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".sock"))
            })
        };
        assert!(wait_until(TIMEOUT, listening), "the turn listens for steers");
        env.run(&["steer", "shorter"]).ok();
        let all = format!("half a line{}", shown(&mut session));
        for notice in ["cca: steer queued: shorter", "cca: steer taken: shorter"] {
            let at = all.find(notice).unwrap_or_else(|| panic!("{args:?}: {all:?}"));
            let before = &all[..at];
            assert!(
                before.ends_with('\n') || before.ends_with("\r\u{1b}[J"),
                "{args:?}: {notice} glued to the answer: {all:?}"
            );
        }
        // The half line, taken off the screen, is never left there beside its second showing.
        let visible = all.replace("half a line\r\u{1b}[J", "");
        assert_eq!(visible.matches("half a line").count(), 1, "{args:?}: {all:?}");
    }
}
