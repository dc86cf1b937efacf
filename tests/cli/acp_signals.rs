//! `cca acp` stopped: cancels, and signals to the agent mid-answer.

use serde_json::json;

use super::acp::*;
use crate::common::{self, TIMEOUT, TestEnv};

#[test]
fn sigterm_hup_and_int_stop_every_running_turn_record_it_and_exit() {
    use rustix::process::Signal;
    for (signal, name, code) in
        [(Signal::TERM, "SIGTERM", 143), (Signal::HUP, "SIGHUP", 129), (Signal::INT, "Ctrl-C", 130)]
    {
        let env = TestEnv::new();
        let (raw, id, engine, helper) = mid_answer(&env);
        let pid = rustix::process::Pid::from_raw(raw.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let output = common::wait_with_timeout(raw.child, TIMEOUT);
        assert_eq!(common::shell_status(output.status), code, "{name}");
        gone_in_time(&[engine, helper]);
        let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
        assert!(text.contains(&format!("Interrupted (not sent again): {name}")), "{name}: {text}");
        assert!(text.contains("the beginning"), "{name}: what arrived is kept\n{text}");
    }
}

#[test]
fn after_sigkill_no_engine_is_left_and_the_next_turn_records_the_cut_question() {
    let env = TestEnv::new();
    let (mut raw, id, engine, helper) = mid_answer(&env);
    raw.child.kill().unwrap();
    let _ = raw.child.wait();
    gone_in_time(&[engine, helper]);
    // The question has no outcome in the file: the next turn records it as interrupted, and
    // does not send it as history.
    let out = sdk(
        &env,
        &[
            json!({"call": "session/load", "as": "l",
                   "params": {"sessionId": id, "cwd": env.work, "mcpServers": []}}),
            prompt("p", &id, "after the crash"),
        ],
        &[("FAKE_SCRIPT", "echo")],
    );
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{}", out["results"]);
    // The load shows the cut question, and that it was interrupted.
    assert_eq!(texts(&out, &id, "user_message_chunk")[0], "long one");
    let thoughts = texts(&out, &id, "agent_thought_chunk");
    assert!(thoughts[0].starts_with("Interrupted (cca ended before the answer"), "{thoughts:?}");
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    let records = cca::transcript::parse(&text).unwrap().0.records;
    let kinds: Vec<_> = records.iter().map(|r| r.kind).collect();
    use cca::transcript::Kind::{Assistant, Interrupted, User};
    assert_eq!(kinds, [User, Interrupted, User, Assistant], "{records:?}");
    assert_eq!(records[1].meta.reason.as_deref(), Some("cca ended before the answer was recorded"));
    assert!(env.last_users().is_empty(), "{:?}", env.last_users());
}

#[test]
fn cancel_request_for_a_running_prompt_cancels_it() {
    let env = TestEnv::new();
    let mut raw = Raw::start_with(&env, &[("FAKE_SCRIPT", "say the beginning; hang")]);
    let id = raw.answering(&env);
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 2}})
            .to_string(),
    );
    let answered = raw.response(2);
    let cancelled =
        answered["result"]["stopReason"] == "cancelled" || answered["error"]["code"] == -32800;
    assert!(cancelled, "{answered}");
    assert_eq!(raw.finish(), Some(0));
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    assert!(text.contains("Interrupted (not sent again): cancelled"), "{text}");
    assert!(text.contains("the beginning"), "{text}");
}

#[test]
fn cancel_mid_answer_stops_the_engine_and_keeps_the_attempt_as_interrupted() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            json!({"call": "session/prompt", "as": "p", "async": true,
                   "params": {"sessionId": "$s.sessionId", "prompt": [{"type": "text", "text": "long one"}]}}),
            json!({"until": "agent_message_chunk", "session": "$s.sessionId"}),
            json!({"notify": "session/cancel", "params": {"sessionId": "$s.sessionId"}}),
            json!({"await": "p"}),
            prompt("again", "$s.sessionId", "short one"),
        ],
        &[("FAKE_SCRIPT_1", "say the beginning; hang"), ("FAKE_SCRIPT_2", "echo")],
    );
    let id = id_of(&out, "s");
    assert_eq!(out["results"]["p"]["stopReason"], "cancelled", "{}", out["results"]);
    assert_eq!(out["results"]["again"]["stopReason"], "end_turn");
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    assert!(text.contains("Interrupted (not sent again): cancelled"), "{text}");
    assert!(text.contains("the beginning"), "{text}");
    // The interrupted attempt is never sent again, nor replayed.
    assert!(env.last_users().is_empty(), "{:?}", env.last_users());
}
