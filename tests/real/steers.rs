//! Steers reaching the real engines while they answer.

use super::*;

/// Starts `cca search` through a real engine with the answer held open by the server, steers
/// it once the model is answering, then lets the answer end once cca has passed the steer on.
/// `cca steer` returns when the steer is in the turn's inbox; cca writes it to claude's stdin a
/// moment later (it says `steer queued` as it does). Let go before that, and claude may start
/// the tool (or end the answer) with nothing queued and take the steer as an answer of its own.
/// `cca search ARGS` with `steer` sent while claude (or gemini) is held answering.
pub(crate) fn steer_real(r: &Real, args: &[&str], behavior: Behavior, steer: &str) -> Run {
    let go = r.env.root.path().join("go");
    let before = r.api.turns().len();
    r.api.set(Behavior { hold: Some(go.clone()), ..behavior });
    let mut cmd = r.command();
    cmd.arg("search").args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let (mut pipe, stderr) = (child.stderr.take().unwrap(), stderr.clone());
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                stderr.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        })
    };
    let cca = Guard(child);
    assert!(wait_until(TIMEOUT, || r.api.turns().len() > before), "claude asked the model");
    r.env.run(&["steer", steer]).ok();
    let queued = format!("cca: steer queued: {steer}");
    let said = || String::from_utf8_lossy(&stderr.lock().unwrap()).contains(&queued);
    assert!(wait_until(TIMEOUT, said), "cca passed the steer on");
    // cca writes the steer to claude's stdin right after saying so, and claude reads it on its
    // own event loop; a tool call that starts before claude has read the line makes claude take
    // the steer after the answer instead. Nothing tells when claude has read it, so the held
    // answer waits a margin (a wait, not an assertion: a slower claude only widens it).
    thread::sleep(Duration::from_millis(500));
    std::fs::write(&go, "").unwrap();
    let out = cca.finish();
    reader.join().unwrap();
    let stderr = stderr.lock().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

pub(crate) fn records_of(r: &Real) -> Vec<(cca::transcript::Kind, String)> {
    r.transcript().records.into_iter().map(|rec| (rec.kind, rec.content)).collect()
}

#[test]
fn a_steer_reaches_the_running_claude() {
    use cca::transcript::Kind::{Assistant, User};
    let r = Real::new();
    let run = steer_real(
        &r,
        &["-e", "claude", "review the auth module"],
        Behavior::default(),
        "focus on JWT",
    );
    run.ok().stderr_has("cca: steer taken: focus on JWT");
    assert_eq!(run.stdout, "ECHO: review the auth module\n\nECHO: focus on JWT");

    // The same claude asked again, with the conversation as real turns: the steer came on its
    // stdin, not as a new process with framed history.
    let turns = r.api.turns();
    assert_eq!(turns.len(), 2, "{turns:?}");
    // (claude adds a `system` message of its own about its environment.)
    let messages: Vec<&Value> = turns[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .collect();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert!(framed_message(&turns[1].body).contains("review the auth module"));
    assert_eq!(mock_api::content_text(&messages[1]["content"]), "ECHO: review the auth module");
    assert_eq!(mock_api::content_text(&messages[2]["content"]).trim(), "focus on JWT");

    assert_eq!(
        records_of(&r),
        [
            (User, "review the auth module".to_string()),
            (Assistant, "ECHO: review the auth module".to_string()),
            (User, "focus on JWT".to_string()),
            (Assistant, "ECHO: focus on JWT".to_string()),
        ]
    );
    let run_dir = r.env.cca_home.join("run");
    assert_eq!(std::fs::read_dir(run_dir).unwrap().count(), 0, "no endpoint left behind");
}

#[test]
fn claude_takes_a_steer_after_a_tool_call() {
    use cca::transcript::Kind::{Assistant, User};
    let r = Real::new();
    let script = vec![
        vec![Block::text("Let me search."), Block::tool("WebSearch", json!({"query": "jwt"}))],
        vec![Block::text("Found it.")],
    ];
    let behavior = Behavior { script, ..Behavior::default() };
    let run = steer_real(&r, &["-e", "claude", "review the auth module"], behavior, "focus on JWT");
    run.ok().stderr_has("cca: steer taken: focus on JWT");
    assert_eq!(run.stdout, "Let me search.\n\nFound it.");

    // One answer: the model's second request carries the tool result, then the steer (claude
    // passes it on as a note that the user sent a new message while it worked).
    let turns = r.api.turns();
    assert_eq!(turns.len(), 2, "{turns:?}");
    let messages = turns[1].body["messages"].as_array().unwrap();
    let position = |found: &dyn Fn(&Value) -> bool| messages.iter().position(found);
    let result = position(&|m| {
        m["content"].as_array().is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    });
    let steer = position(&|m| mock_api::content_text(&m["content"]).contains("focus on JWT"));
    assert!(result.is_some() && steer > result, "{messages:?}");

    let records = records_of(&r);
    assert_eq!(records.len(), 4, "{records:?}");
    assert_eq!(records[0], (User, "review the auth module".to_string()));
    assert_eq!(records[1].0, Assistant);
    assert!(records[1].1.starts_with("Let me search.\n\n> WebSearch: jwt\n"), "{records:?}");
    assert_eq!(records[2], (User, "focus on JWT".to_string()));
    assert_eq!(records[3], (Assistant, "Found it.".to_string()));
}

#[test]
fn gemini_answers_a_steer_as_the_next_turn() {
    use cca::transcript::Kind::{Assistant, User};
    let r = Real::new();
    let run = steer_real(
        &r,
        &["-e", "gemini", "review the auth module"],
        Behavior::default(),
        "focus on JWT",
    );
    run.ok().stderr_has("cca: steer taken: focus on JWT");
    assert_eq!(run.stdout, "ECHO: review the auth module\n\nECHO: focus on JWT");
    // A second gemini, sent the whole conversation.
    let turns = r.api.turns();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(sent_questions(&turns[1].body), ["review the auth module", "focus on JWT"]);
    assert_eq!(
        records_of(&r),
        [
            (User, "review the auth module".to_string()),
            (Assistant, "ECHO: review the auth module".to_string()),
            (User, "focus on JWT".to_string()),
            (Assistant, "ECHO: focus on JWT".to_string()),
        ]
    );
}

// `cca acp` through the real programs, driven by the official ACP SDK client
// (tests/acp/client.mjs, installed pinned by `make acp-clients`).
