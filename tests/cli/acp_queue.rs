//! `cca acp`: prompts sent while one answers, a session busy elsewhere, compaction.

use std::process::Stdio;

use serde_json::{Value, json};

use super::acp::*;
use crate::common::{self, TIMEOUT, TestEnv};

#[test]
fn prompts_sent_while_one_answers_are_queued_and_answered_in_order() {
    let env = TestEnv::new();
    // One engine run per turn, each checked: a kept claude would take them all.
    env.write_config("[engines.claude]\nkeep_warm = \"off\"\n");
    let go = env.root.path().join("go");
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            async_prompt("p1", "$s.sessionId", "first"),
            async_prompt("p2", "$s.sessionId", "second"),
            async_prompt("p3", "$s.sessionId", "third"),
            // Both later prompts are told they wait while the first is still answering.
            json!({"until": "agent_thought_chunk", "session": "$s.sessionId",
                   "containing": "Queued", "count": 2}),
            json!({"touch": go}),
            json!({"await": "p1"}),
            json!({"await": "p2"}),
            json!({"await": "p3"}),
        ],
        &[("FAKE_SCRIPT_1", &format!("await {};echo", go.display()))],
    );
    let id = id_of(&out, "s");
    for p in ["p1", "p2", "p3"] {
        assert_eq!(out["results"][p]["stopReason"], "end_turn", "{}", out["results"]);
    }
    // Each prompt its own response, in the order they were sent.
    let answered: Vec<&str> = out["answered"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|n| n.starts_with('p'))
        .collect();
    assert_eq!(answered, ["p1", "p2", "p3"]);
    assert_eq!(
        texts(&out, &id, "agent_message_chunk").concat(),
        "ECHO: firstECHO: secondECHO: third"
    );
    let mut queued = texts(&out, &id, "agent_thought_chunk");
    queued.sort();
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(
        queued[0].contains("1 earlier prompt") && queued[1].contains("2 earlier"),
        "{queued:?}"
    );
    // The transcript holds them in that order, each answered with the ones before as history.
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    let (t, _) = cca::transcript::parse(&text).unwrap();
    let records: Vec<(cca::transcript::Kind, &str)> =
        t.records.iter().map(|r| (r.kind, r.content.as_str())).collect();
    use cca::transcript::Kind::{Assistant, User};
    assert_eq!(
        records,
        [
            (User, "first"),
            (Assistant, "ECHO: first"),
            (User, "second"),
            (Assistant, "ECHO: second"),
            (User, "third"),
            (Assistant, "ECHO: third"),
        ]
    );
    assert_eq!(common::history_users(common::stdin_of(&env.calls()[2])), ["first", "second"]);
}

#[test]
fn a_queued_prompt_cancelled_before_its_turn_records_nothing() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            async_prompt("p1", "$s.sessionId", "first"),
            async_prompt("p2", "$s.sessionId", "second"),
            json!({"until": "agent_thought_chunk", "session": "$s.sessionId", "containing": "Queued"}),
            // The first one's engine is answering.
            json!({"until": "agent_message_chunk", "session": "$s.sessionId"}),
            json!({"notify": "session/cancel", "params": {"sessionId": "$s.sessionId"}}),
            json!({"await": "p1"}),
            json!({"await": "p2"}),
            prompt("p3", "$s.sessionId", "third"),
        ],
        &[("FAKE_SCRIPT_1", &format!("say started;await {};echo", go.display()))],
    );
    let id = id_of(&out, "s");
    assert_eq!(out["results"]["p1"]["stopReason"], "cancelled", "{}", out["results"]);
    assert_eq!(out["results"]["p2"]["stopReason"], "cancelled", "{}", out["results"]);
    assert_eq!(out["results"]["p3"]["stopReason"], "end_turn", "{}", out["results"]);
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    assert!(text.contains("Interrupted (not sent again): cancelled"), "{text}");
    assert!(!text.contains("second"), "the queued prompt never ran: {text}");
    assert_eq!(env.calls().len(), 2, "the engine ran for the first and the third");
}

/// A client that goes (closes stdin) takes back nothing it asked: a prompt still in line, and
/// one sent just before the close, are kept in the transcript as interrupted, as the running
/// one is.
#[test]
fn prompts_in_line_or_sent_as_the_client_goes_are_kept_as_interrupted() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            new_session("t", &env.work),
            async_prompt("p1", "$s.sessionId", "first"),
            async_prompt("p2", "$s.sessionId", "//second"),
            json!({"until": "agent_thought_chunk", "session": "$s.sessionId", "containing": "Queued"}),
            json!({"until": "agent_message_chunk", "session": "$s.sessionId"}),
            // Sent with nothing between it and the close.
            async_prompt("q", "$t.sessionId", "last words"),
            json!({"close": true}),
        ],
        &[("FAKE_SCRIPT_1", "say started; hang"), ("FAKE_SCRIPT_2", "hang")],
    );
    let (s, t) = (id_of(&out, "s"), id_of(&out, "t"));
    let first = std::fs::read_to_string(env.session_path(&s)).unwrap();
    // `//` stands for a `/`, kept as it would have been asked.
    assert_eq!(common::questions(&first), ["first", "/second"], "{first}");
    assert_eq!(first.matches("Interrupted (not sent again): client gone").count(), 2, "{first}");
    let last = std::fs::read_to_string(env.session_path(&t))
        .unwrap_or_else(|e| panic!("the last prompt's session was never written: {e}"));
    assert!(last.contains("last words"), "{last}");
    assert!(last.contains("Interrupted (not sent again): client gone"), "{last}");
    assert!(last.contains("\"title\":\"last words\""), "a new session takes its title: {last}");

    // The same on the bare wire: the prompt's line, then stdin closed at once.
    let mut raw = Raw::start_with(&env, &[("FAKE_SCRIPT", "hang")]);
    let prompt = json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                        "params": {"sessionId": t, "prompt": [{"type": "text", "text": "//bare"}]}});
    raw.send(&prompt.to_string());
    assert_eq!(raw.finish(), Some(0));
    let last = std::fs::read_to_string(env.session_path(&t)).unwrap();
    assert!(last.contains("\n/bare\n"), "{last}");
    assert_eq!(last.matches("Interrupted (not sent again): client gone").count(), 2, "{last}");
}

#[test]
fn a_prompt_on_a_session_busy_in_a_terminal_waits_and_says_so() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "start"]).ok();
    let id = session_id(&env);
    let go = env.root.path().join("go");
    let mut cmd = env.command();
    cmd.args(["search", "-q", "-r", "from the terminal"])
        .env("FAKE_SCRIPT", format!("await {};echo", go.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let terminal = common::Guard(cmd.spawn().unwrap());
    assert!(
        common::wait_until(TIMEOUT, || env.log.join("call-2.json").exists()),
        "the terminal's turn started"
    );
    let out = sdk(
        &env,
        &[
            async_prompt("p", &id, "from the editor"),
            json!({"until": "agent_thought_chunk", "session": id, "containing": "is busy"}),
            json!({"touch": go}),
            json!({"await": "p"}),
        ],
        &[],
    );
    assert!(terminal.finish().status.success());
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{}", out["results"]);
    let thoughts = texts(&out, &id, "agent_thought_chunk");
    assert!(thoughts[0].contains("another cca is answering in it"), "{thoughts:?}");
    assert_eq!(texts(&out, &id, "agent_message_chunk"), ["ECHO: from the editor"]);
    // The editor's turn came after the terminal's, with it as history.
    assert_eq!(env.last_users(), ["start", "from the terminal"]);
}

#[test]
fn a_compaction_before_a_turn_is_reported_and_slash_compact_works() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.cca_home.join("prompts")).unwrap();
    std::fs::write(env.cca_home.join("prompts/tiny.md"), "be brief").unwrap();
    env.write_config(
        "prompt = \"tiny\"\n[compaction]\nthreshold = 0.5\nkeep_recent = 1\n\
         warn_tokens = 100000\n[engines.claude]\ncontext_budget = 500\n",
    );
    let pad = [("FAKE_SCRIPT", "echo-pad 300")];
    env.converse(&["c-1", "c-2", "c-3"], &pad);
    let id = session_id(&env);
    let out = sdk(&env, &[prompt("p", &id, "c-4")], &pad);
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{}", out["results"]);
    let thoughts = texts(&out, &id, "agent_thought_chunk").concat();
    assert!(thoughts.contains("summarising turns 1-"), "{thoughts}");
    assert!(thoughts.contains("are now a summary"), "{thoughts}");
    let kinds = |env: &TestEnv| -> Vec<cca::transcript::Kind> {
        let (t, _) = cca::transcript::parse(&env.latest()).unwrap();
        t.records.iter().map(|r| r.kind).collect()
    };
    let compactions = |env: &TestEnv| {
        kinds(env).into_iter().filter(|k| *k == cca::transcript::Kind::Compaction).count()
    };
    assert_eq!(compactions(&env), 1);

    // `/compact` over ACP folds what is left now, and says so.
    let out = sdk(
        &env,
        &[
            prompt("more", &id, "c-5"),
            prompt("compact", &id, "/compact"),
            prompt("after", &id, "c-6"),
        ],
        &[("FAKE_SCRIPT", "echo")],
    );
    for p in ["more", "compact", "after"] {
        assert_eq!(out["results"][p]["stopReason"], "end_turn", "{}", out["results"]);
    }
    let said = texts(&out, &id, "agent_message_chunk");
    assert!(said[1].contains("are now a summary"), "{said:?}");
    assert_eq!(compactions(&env), 2);
    // The turn after it was sent the summary and only the kept exchange.
    let last = common::stdin_of(env.calls().last().unwrap()).to_string();
    assert!(common::tag(&last, "conversation_summary").is_some(), "{last}");
    assert_eq!(common::history_users(&last), ["c-5"]);
}

#[test]
fn a_prompt_sent_as_the_last_one_ends_is_not_told_it_was_queued() {
    let env = TestEnv::new();
    let mut steps = vec![new_session("s", &env.work)];
    for n in 0..8 {
        steps.push(prompt(&format!("p{n}"), "$s.sessionId", &format!("question {n}")));
    }
    let out = sdk(&env, &steps, &[]);
    let id = id_of(&out, "s");
    for n in 0..8 {
        assert_eq!(out["results"][format!("p{n}")]["stopReason"], "end_turn", "{}", out["results"]);
    }
    let thoughts = texts(&out, &id, "agent_thought_chunk");
    assert!(thoughts.iter().all(|t| !t.contains("Queued")), "{thoughts:?}");
}

/// `/compact` over ACP on a session whose last record was cut off sets that record aside first,
/// as a turn does: the compaction is a record of its own, and read as one. One turn folded is
/// "turn 1", as the terminal says.
#[test]
fn slash_compact_after_a_cut_off_record_repairs_it_first() {
    let env = TestEnv::new();
    env.write_config("[compaction]\nkeep_recent = 1\n");
    env.converse(&["c-1", "c-2"], &[("FAKE_SCRIPT", "echo-pad 400")]);
    let id = session_id(&env);
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\n<!-- cca:user {\"at\":\"2026-11-21T10:16:00Z\"} -->\n## 3. You\n\nhalf writ");
    std::fs::write(&path, &text).unwrap();
    let out = sdk(&env, &[prompt("compact", &id, "/compact")], &[("FAKE_SCRIPT", "echo-pad 400")]);
    assert_eq!(out["results"]["compact"]["stopReason"], "end_turn", "{}", out["results"]);
    let said = texts(&out, &id, "agent_message_chunk").concat();
    assert!(said.starts_with("Turn 1 is now a summary: "), "{said}");
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(!file.contains("half writ"), "{file}");
    let (t, problems) = cca::transcript::parse(&file).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(t.records.last().unwrap().kind, cca::transcript::Kind::Compaction);
}
