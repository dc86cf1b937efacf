//! Warm engines (docs/DESIGN.md, "Warm engines"): `cca chat` and `cca acp` keep the session's
//! real claude between turns and send it only the new message, while the transcript stays the
//! truth.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::common::*;
use super::mock_api::{self, Behavior};
use super::{Real, acp, acp_prompt, extends};

/// Puts a wrapper around the real claude that notes each start in a file; returns the file.
fn count_starts(r: &mut Real) -> PathBuf {
    count_starts_of(r, "claude")
}

/// [`count_starts`] for `engine` (claude or gemini).
pub(super) fn count_starts_of(r: &mut Real, engine: &str) -> PathBuf {
    let log = r.env.root.path().join(format!("{engine}-starts.log"));
    let wrapper = r.env.root.path().join(format!("{engine}-counted"));
    let real = if engine == "claude" { &mut r.claude } else { &mut r.gemini };
    let script =
        format!("#!/bin/sh\necho start >> '{}'\nexec '{}' \"$@\"\n", log.display(), real.display());
    std::fs::write(&wrapper, script).unwrap();
    let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wrapper, perms).unwrap();
    *real = wrapper;
    log
}

pub(super) fn starts(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().count()
}

pub(super) fn bodies(r: &Real) -> Vec<Value> {
    r.api.answer_requests()
}

/// Each follow-up's request extends the one before it, and the prompt cache could serve most of
/// it: the shares, request by request.
pub(super) fn assert_follow_ups_extend(bodies: &[Value], what: &str) -> Vec<f64> {
    bodies
        .windows(2)
        .enumerate()
        .map(|(n, pair)| {
            assert!(
                extends(&pair[0], &pair[1]),
                "{what}: request {} changed the one before it",
                n + 2
            );
            let share = mock_api::cacheable_share(&pair[0], &pair[1]);
            assert!(share > 0.8, "{what}: request {}: {share:.2} cacheable", n + 2);
            share
        })
        .collect()
}

#[test]
fn one_claude_start_per_acp_session_across_prompts() {
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config(
        "engine = \"claude\"\n[engines.claude]\nmodel_budgets = { \"claude-opus-5-5\" = 123456 }\n",
    );
    r.api.set(Behavior::default());
    let mut steps = vec![
        json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
    ];
    for n in 1..=5 {
        steps.push(acp_prompt(&format!("p{n}"), "$s.sessionId", &format!("question {n}"), true));
    }
    let out = acp(&r, &steps);
    for n in 1..=5 {
        assert_eq!(out["results"][format!("p{n}")]["stopReason"], "end_turn", "{}", out["results"]);
    }
    assert_eq!(starts(&log), 1, "five prompts in one session start claude once");
    let bodies = bodies(&r);
    assert_eq!(bodies.len(), 5);
    assert_follow_ups_extend(&bodies, "acp");
    // Only the new question went to the kept engine: the last request holds each once.
    let last = serde_json::to_string(&bodies[4]["messages"]).unwrap();
    assert_eq!(last.matches(r#""text":"question 2""#).count(), 1, "{last}");
    let answers = super::answers_of(&r);
    assert_eq!(answers.len(), 5, "{answers:?}");
    assert_eq!(answers[4], "ECHO: question 5");
    // The kept claude names its model for every answer: the editor is told that model's
    // context size every time.
    let sizes: Vec<u64> = super::acp_updates(&out, "usage_update", usize::MAX)
        .iter()
        .map(|u| u["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [123_456; 5], "the budget of claude's model");
    // As ACP means them: the context in use grows with each exchange, and the cost is the
    // session's running total (never one prompt's share, which would go down).
    let figures = super::acp_updates(&out, "usage_update", usize::MAX);
    let used: Vec<u64> = figures.iter().map(|u| u["used"].as_u64().unwrap()).collect();
    assert!(used.windows(2).all(|w| w[1] > w[0]), "{used:?}");
    let costs: Vec<f64> = figures.iter().filter_map(|u| u["cost"]["amount"].as_f64()).collect();
    assert!(costs.windows(2).all(|w| w[1] >= w[0]), "{costs:?}");
}

#[test]
fn a_turn_from_another_terminal_reaches_the_next_acp_prompt() {
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config("engine = \"claude\"\n");
    let first = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
            acp_prompt("p1", "$s.sessionId", "first from the editor", true),
            // The client's own step runs `cca search -r` between the two prompts.
            json!({"run": [cca_exe(), "search", "-q", "-r", "zq from another terminal"]}),
            acp_prompt("p2", "$s.sessionId", "second from the editor", true),
            acp_prompt("p3", "$s.sessionId", "third from the editor", true),
        ],
    );
    assert_eq!(first["results"]["p3"]["stopReason"], "end_turn", "{}", first["results"]);
    let bodies = bodies(&r);
    assert_eq!(bodies.len(), 4);
    let second = serde_json::to_string(&bodies[2]["messages"]).unwrap();
    assert!(second.contains("zq from another terminal"), "the other turn reached claude: {second}");
    // The stale engine was ended and a fresh one started; the one after it is warm again.
    assert_eq!(starts(&log), 3, "editor, other terminal, fresh start");
    assert_follow_ups_extend(&bodies[2..], "after a stale transcript");
}

/// `cca acp` with claude answered and kept warm: the agent, its stdin (the client is there as
/// long as it is held), its stdout lines and the session.
fn acp_warm(
    r: &Real,
) -> (Guard, std::process::ChildStdin, std::sync::mpsc::Receiver<Value>, String) {
    let (child, mut stdin, lines, id) = super::acp_session(r);
    super::acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
               "params": {"sessionId": id, "prompt": [{"type": "text", "text": "keep warm"}]}}),
    );
    let answered = super::acp_next(&lines, &|m| m["id"] == 2);
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    (child, stdin, lines, id)
}

#[test]
fn a_kept_claude_that_died_while_it_waited_is_replaced_by_a_fresh_one() {
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config("engine = \"claude\"\n");
    let (child, mut stdin, lines, id) = super::acp_session(&r);
    for (n, text) in [(2, "before it died"), (3, "after it died")] {
        if n == 3 {
            let engine = super::descendants(child.0.id() as i32);
            assert!(!engine.is_empty(), "claude is kept between prompts");
            for p in &engine {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(*p).unwrap(),
                    rustix::process::Signal::KILL,
                );
            }
            assert!(wait_until(TIMEOUT, || engine.iter().all(|p| wholly_ended(*p))), "claude died");
        }
        super::acp_send(
            &mut stdin,
            json!({"jsonrpc": "2.0", "id": n, "method": "session/prompt",
                   "params": {"sessionId": id, "prompt": [{"type": "text", "text": text}]}}),
        );
        let answered = super::acp_next(&lines, &|m| m["id"] == n);
        assert_eq!(answered["result"]["stopReason"], "end_turn", "{text}: {answered}");
    }
    assert_eq!(starts(&log), 2);
    let answers = super::answers_of(&r);
    assert_eq!(answers, ["ECHO: before it died", "ECHO: after it died"]);
}

#[test]
fn sigkill_of_cca_acp_leaves_no_warm_claude() {
    let r = Real::new();
    r.env.write_config("engine = \"claude\"\n");
    let (child, _stdin, _lines, _id) = acp_warm(&r);
    let engine = super::descendants(child.0.id() as i32);
    assert!(!engine.is_empty(), "claude is kept between prompts");
    child.signal(rustix::process::Signal::KILL);
    for p in &engine {
        assert!(wait_until(TIMEOUT, || !alive(*p)), "process {p} of claude outlived cca acp");
    }
}

#[test]
fn an_idle_warm_claude_is_ended() {
    let r = Real::new();
    r.env.write_config("engine = \"claude\"\nkeep_warm = \"1s\"\n");
    let (child, _stdin, _lines, _id) = acp_warm(&r);
    let engine = super::descendants(child.0.id() as i32);
    assert!(!engine.is_empty(), "claude is kept between prompts");
    for p in &engine {
        assert!(wait_until(TIMEOUT, || !alive(*p)), "process {p} of claude outlived its idle time");
    }
    assert!(alive(child.0.id() as i32), "cca acp goes on serving");
}

#[test]
fn session_close_ends_the_kept_claude() {
    let r = Real::new();
    r.env.write_config("engine = \"claude\"\n");
    let (child, mut stdin, lines, id) = acp_warm(&r);
    let engine = super::descendants(child.0.id() as i32);
    assert!(!engine.is_empty(), "claude is kept between prompts");
    super::acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 9, "method": "session/close", "params": {"sessionId": id}}),
    );
    super::acp_next(&lines, &|m| m["id"] == 9);
    for p in &engine {
        assert!(wait_until(TIMEOUT, || !alive(*p)), "process {p} of claude outlived its session");
    }
    assert!(alive(child.0.id() as i32), "cca acp goes on serving");
}

#[test]
fn keep_warm_off_starts_claude_for_every_prompt() {
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config("engine = \"claude\"\n[engines.claude]\nkeep_warm = \"off\"\n");
    let out = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
            acp_prompt("p1", "$s.sessionId", "one", true),
            acp_prompt("p2", "$s.sessionId", "two", true),
        ],
    );
    assert_eq!(out["results"]["p2"]["stopReason"], "end_turn", "{}", out["results"]);
    assert_eq!(starts(&log), 2);
}

#[test]
fn a_model_change_in_acp_starts_claude_afresh() {
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config("engine = \"claude\"\n");
    let out = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
            acp_prompt("p1", "$s.sessionId", "on the default model", true),
            acp_prompt("p2", "$s.sessionId", "still warm", true),
            json!({"call": "session/set_config_option", "as": "set",
                   "params": {"sessionId": "$s.sessionId", "configId": "model", "value": "haiku"}}),
            acp_prompt("p3", "$s.sessionId", "on haiku", true),
        ],
    );
    assert_eq!(out["results"]["p3"]["stopReason"], "end_turn", "{}", out["results"]);
    assert_eq!(starts(&log), 2, "the model change started claude again");
    let bodies = bodies(&r);
    assert!(bodies[2]["model"].as_str().unwrap_or("").contains("haiku"), "{}", bodies[2]["model"]);
    // The fresh start has the whole conversation from the transcript.
    let third = serde_json::to_string(&bodies[2]["messages"]).unwrap();
    assert!(
        third.contains("still warm") && third.contains("ECHO: on the default model"),
        "{third}"
    );
}

/// `cca chat` on the real claude with `lines` typed (through a pipe), to its end.
pub(super) fn chat(r: &Real, args: &[&str], lines: &[&str]) -> Run {
    let mut cmd = r.command();
    cmd.arg("chat").args(args);
    let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    run_command(cmd, Some(input.as_bytes()))
}

#[test]
fn one_claude_start_per_chat_and_clear_and_compact_start_afresh() {
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config("engine = \"claude\"\n");
    chat(&r, &[], &["c1", "c2", "c3"]).ok();
    assert_eq!(starts(&log), 1, "three messages in one chat start claude once");
    let before = bodies(&r);
    assert_follow_ups_extend(&before, "chat");

    // A chat on the same session: a clear, then a compaction (claude writes the summary in a
    // run of its own), each starts afresh from the transcript. The turn folded is long enough
    // that its summary (the loopback server's echo of the request) is shorter than it.
    let c5 = format!("c5 {}", "and some more words to make it long ".repeat(20));
    chat(&r, &["--resume"], &["c4", "/clear", &c5, "c6", "/compact 1", "c7"]).ok();
    let bodies = bodies(&r);
    let text = |n: usize| serde_json::to_string(&bodies[n]["messages"]).unwrap();
    let asked =
        |n: usize, question: &str| crate::sent_questions(&bodies[n]).iter().any(|q| q == question);
    assert_eq!(bodies.len(), 8, "seven questions and a summary");
    assert!(asked(3, "c3"), "the second chat went on from the transcript: {}", text(3));
    assert!(!asked(4, "c4") && asked(4, &c5), "the clear: {}", text(4));
    assert!(extends(&bodies[4], &bodies[5]), "warm again after the clear");
    assert!(text(6).contains("Write the summary"), "{}", text(6));
    assert!(!extends(&bodies[5], &bodies[7]), "the compaction started afresh: {}", text(7));
    // chat 2: c4; c5 after the clear; the summary; c7 after the compaction.
    assert_eq!(starts(&log), 5);
}

#[test]
fn sigterm_of_cca_chat_leaves_no_warm_claude() {
    use std::io::{Read, Write};
    let r = Real::new();
    r.env.write_config("engine = \"claude\"\n");
    let mut cmd = r.command();
    cmd.arg("chat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = Guard(cmd.spawn().expect("cca chat starts"));
    let mut stdin = child.0.stdin.take().unwrap();
    let mut stdout = child.0.stdout.take().unwrap();
    writeln!(stdin, "warm me").unwrap();
    let (tx, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            text.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&text).contains("ECHO: warm me") {
                let _ = tx.send(());
            }
        }
    });
    seen.recv_timeout(TIMEOUT).expect("the answer comes");
    let pid = child.0.id() as i32;
    let engine = super::descendants(pid);
    assert!(wait_until(TIMEOUT, || !super::descendants(pid).is_empty()), "claude is kept");
    let engine = if engine.is_empty() { super::descendants(pid) } else { engine };
    child.signal(rustix::process::Signal::TERM);
    let output = child.finish();
    assert_eq!(shell_status(output.status), 128 + 15);
    for p in &engine {
        assert!(wait_until(TIMEOUT, || !alive(*p)), "process {p} of claude outlived cca chat");
    }
    drop(stdin);
}

/// The start of a plan: a session, its first prompt answered (the answers are held at their
/// last chunk until `go` exists), then `go` removed, and the `second` prompt streaming, held.
fn first_answered(go: &Path, second: &str) -> Vec<Value> {
    vec![
        json!({"call": "session/new", "as": "s", "params": {"cwd": go.parent().unwrap(), "mcpServers": []}}),
        acp_prompt("p1", "$s.sessionId", "first", false),
        json!({"until": "agent_message_chunk", "session": "$s.sessionId"}),
        json!({"touch": go}),
        json!({"await": "p1"}),
        json!({"run": ["rm", go]}),
        acp_prompt("p2", "$s.sessionId", second, false),
        // Two chunks of the first answer, then the first of the second.
        json!({"until": "agent_message_chunk", "session": "$s.sessionId", "count": 3}),
    ]
}

#[test]
fn a_cancelled_warm_turn_is_recorded_and_the_next_starts_claude_afresh() {
    use cca::transcript::Kind::{Assistant, Interrupted, User};
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config("engine = \"claude\"\n");
    let go = r.env.root.path().join("go");
    r.api.set(Behavior { chunks: Some(2), hold: Some(go.clone()), ..Behavior::default() });
    let mut plan = first_answered(&go, "xq never finished");
    plan.extend([
        json!({"notify": "session/cancel", "params": {"sessionId": "$s.sessionId"}}),
        json!({"await": "p2"}),
        json!({"touch": go}),
        acp_prompt("p3", "$s.sessionId", "third", true),
    ]);
    let out = acp(&r, &plan);
    let results = &out["results"];
    assert_eq!(results["p1"]["stopReason"], "end_turn", "{results}");
    assert_eq!(results["p2"]["stopReason"], "cancelled", "{results}");
    assert_eq!(results["p3"]["stopReason"], "end_turn", "{results}");
    let records = super::records_of(&r);
    let kinds: Vec<_> = records.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(kinds, [User, Assistant, User, Interrupted, User, Assistant], "{records:?}");
    assert_eq!(starts(&log), 2, "the cancel ended the kept claude; the next prompt started one");
    let last = serde_json::to_string(&bodies(&r).last().unwrap()["messages"]).unwrap();
    assert!(last.contains("ECHO: first") && !last.contains("xq never finished"), "{last}");
}

#[test]
fn a_steer_reaches_a_warm_claude() {
    use cca::transcript::Kind::{Assistant, User};
    let mut r = Real::new();
    let log = count_starts(&mut r);
    r.env.write_config("engine = \"claude\"\n");
    let go = r.env.root.path().join("go");
    r.api.set(Behavior { chunks: Some(2), hold: Some(go.clone()), ..Behavior::default() });
    let mut plan = first_answered(&go, "second");
    plan.extend([
        json!({"run": [cca_exe(), "steer", "and a steer"]}),
        // claude reads the line on its own event loop: a margin before the answer goes on.
        json!({"run": ["sleep", "0.5"]}),
        json!({"touch": go}),
        json!({"await": "p2"}),
    ]);
    let out = acp(&r, &plan);
    assert_eq!(out["results"]["p2"]["stopReason"], "end_turn", "{}", out["results"]);
    assert_eq!(starts(&log), 1, "the steer went to the kept claude");
    let records = super::records_of(&r);
    assert_eq!(
        records,
        [
            (User, "first".to_string()),
            (Assistant, "ECHO: first".to_string()),
            (User, "second".to_string()),
            (Assistant, "ECHO: second".to_string()),
            (User, "and a steer".to_string()),
            (Assistant, "ECHO: and a steer".to_string()),
        ]
    );
}
