//! gemini kept warm (docs/DESIGN.md, "Warm engines"): `cca chat` and `cca acp` keep the real
//! `gemini --acp` between turns as an ACP agent and send it only the new message, while the
//! transcript stays the truth.

use serde_json::json;

use super::common::*;
use super::warm::{assert_follow_ups_extend, bodies, chat, count_starts_of, starts};
use super::{Real, acp, acp_prompt};

#[test]
fn three_prompts_in_one_acp_session_start_gemini_once() {
    let mut r = Real::new();
    let log = count_starts_of(&mut r, "gemini");
    r.env.write_config("engine = \"gemini\"\n");
    let mut steps = vec![
        json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
    ];
    for n in 1..=3 {
        steps.push(acp_prompt(&format!("p{n}"), "$s.sessionId", &format!("question {n}"), true));
    }
    let out = acp(&r, &steps);
    for n in 1..=3 {
        assert_eq!(out["results"][format!("p{n}")]["stopReason"], "end_turn", "{}", out["results"]);
    }
    assert_eq!(starts(&log), 1, "three prompts in one session start gemini once");
    let bodies = bodies(&r);
    assert_eq!(bodies.len(), 3);
    assert_follow_ups_extend(&bodies, "acp");
    assert_eq!(super::sent_questions(&bodies[2]), ["question 1", "question 2", "question 3"]);
    let answers = super::answers_of(&r);
    assert_eq!(answers, ["ECHO: question 1", "ECHO: question 2", "ECHO: question 3"]);
    // gemini's token counts reach the transcript as for a turn of its own.
    assert!(r.env.latest().contains("\"input_tokens\":"), "{}", r.env.latest());
}

#[test]
fn one_gemini_start_per_chat_and_a_turn_between_starts_it_afresh() {
    let mut r = Real::new();
    let log = count_starts_of(&mut r, "gemini");
    r.env.write_config("engine = \"gemini\"\n");
    chat(&r, &[], &["c1", "c2", "c3"]).ok();
    assert_eq!(starts(&log), 1, "three messages in one chat start gemini once");
    assert_follow_ups_extend(&bodies(&r), "chat");
    // A turn from another terminal changes the transcript: the next chat's gemini is a fresh
    // one, sent the whole conversation, and kept again after it.
    r.run(&["search", "-q", "-r", "from another terminal"]).ok();
    chat(&r, &["--resume"], &["c4", "c5"]).ok();
    assert_eq!(starts(&log), 3, "chat, the other terminal, a fresh start");
    let bodies = bodies(&r);
    assert_eq!(bodies.len(), 6);
    let sent = super::sent_questions(&bodies[4]);
    assert_eq!(sent, ["c1", "c2", "c3", "from another terminal", "c4"], "{}", bodies[4]);
    assert_follow_ups_extend(&bodies[4..], "after a stale transcript");
    let answers = super::answers_of(&r);
    assert_eq!(answers.len(), 6, "{answers:?}");
    assert_eq!(answers[5], "ECHO: c5");
}

/// `cca acp` with gemini answered and kept warm, and gemini's processes.
fn acp_warm(r: &Real) -> (Guard, std::process::ChildStdin, Vec<i32>) {
    let (child, mut stdin, lines, id) = super::acp_session(r);
    super::acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
               "params": {"sessionId": id, "prompt": [{"type": "text", "text": "keep warm"}]}}),
    );
    let answered = super::acp_next(&lines, &|m| m["id"] == 2);
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let engine = super::descendants(child.0.id() as i32);
    assert!(!engine.is_empty(), "gemini is kept between prompts");
    (child, stdin, engine)
}

#[test]
fn sigkill_of_cca_acp_leaves_no_warm_gemini() {
    let r = Real::new();
    r.env.write_config("engine = \"gemini\"\n");
    let (child, _stdin, engine) = acp_warm(&r);
    child.signal(rustix::process::Signal::KILL);
    for p in &engine {
        assert!(wait_until(TIMEOUT, || !alive(*p)), "process {p} of gemini outlived cca acp");
    }
}

#[test]
fn an_idle_warm_gemini_is_ended() {
    let r = Real::new();
    r.env.write_config("engine = \"gemini\"\n[engines.gemini]\nkeep_warm = \"1s\"\n");
    let (child, _stdin, engine) = acp_warm(&r);
    for p in &engine {
        assert!(wait_until(TIMEOUT, || !alive(*p)), "process {p} of gemini outlived its idle time");
    }
    assert!(alive(child.0.id() as i32), "cca acp goes on serving");
}

/// Any ACP agent is an engine with `acp = [...]` (here the real gemini as one): a one-shot turn
/// starts it, opens a session, asks and ends it; a follow-up frames the history in its first
/// prompt; `cca chat` keeps it between messages.
#[test]
fn an_acp_agent_declared_in_config_answers_one_shot_turns_and_chats() {
    let mut r = Real::new();
    let log = count_starts_of(&mut r, "gemini");
    let agent = format!("[{:?}, \"--acp\", \"--skip-trust\"]", r.gemini.display().to_string());
    r.env.write_config(&format!("engine = \"agent\"\n[engines.agent]\nacp = {agent}\n"));
    let run = r.run(&["search", "-q", "first"]);
    assert_eq!(run.ok().stdout, "ECHO: first");
    let run = r.run(&["search", "-q", "-r", "second"]);
    assert_eq!(run.ok().stdout, "ECHO: second");
    assert_eq!(starts(&log), 2, "one agent a one-shot turn");
    let sent = super::sent_questions(&bodies(&r)[1]);
    assert_eq!(sent, ["first", "second"]);
    chat(&r, &["--resume"], &["c1", "c2", "c3"]).ok();
    assert_eq!(starts(&log), 3, "three chat messages start it once");
    assert_follow_ups_extend(&bodies(&r)[2..], "chat");
    let answers = super::answers_of(&r);
    assert_eq!(answers.len(), 5, "{answers:?}");
    assert!(r.env.latest().contains("\"engine\":\"agent\""));
    // A model cannot be chosen over ACP: refused before anything is asked.
    r.run(&["search", "-q", "-r", "-m", "some-model", "third"]).code(2).stderr_has("ACP agent");
}
