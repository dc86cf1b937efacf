//! `cca acp` on the wire: malformed input, lines that are not UTF-8 or too long, paging, bad
//! parameters; the agent keeps serving.

use std::io::Write;

use serde_json::{Value, json};

use super::acp::*;
use crate::common::TestEnv;

#[test]
fn every_malformed_input_is_an_error_and_the_agent_keeps_serving() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env);
    raw.send("this is not json {");
    assert_eq!(raw.response(Value::Null)["error"]["code"], -32700);
    assert_eq!(raw.call(1, "no/such_method", json!({}))["error"]["code"], -32601);
    assert_eq!(raw.call(2, "session/new", json!({"cwd": 42}))["error"]["code"], -32602);
    assert_eq!(raw.call(3, "session/prompt", json!({"sessionId": "x"}))["error"]["code"], -32602);
    let unknown = raw.call(
        4,
        "session/prompt",
        json!({"sessionId": "19990101-000000", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    let escape = raw.call(
        5,
        "session/load",
        json!({"sessionId": "../../etc/passwd", "cwd": "/", "mcpServers": []}),
    );
    assert_eq!(escape["error"]["code"], -32002, "{escape}");
    let session = raw.call(6, "session/new", json!({"cwd": env.work, "mcpServers": []}));
    let id = session["result"]["sessionId"].as_str().unwrap().to_string();
    let empty = raw.call(7, "session/prompt", json!({"sessionId": id, "prompt": []}));
    assert_eq!(empty["error"]["code"], -32602, "{empty}");
    let bad_option = raw.call(
        8,
        "session/set_config_option",
        json!({"sessionId": id, "configId": "engine", "value": "nope"}),
    );
    assert_eq!(bad_option["error"]["code"], -32602, "{bad_option}");
    let cursor = raw.call(9, "session/list", json!({"cursor": "not-a-cursor"}));
    assert_eq!(cursor["error"]["code"], -32602, "{cursor}");
    // Still serving.
    let answer = raw.call(
        10,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "still there?"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(raw.finish(), Some(0));
}

#[test]
fn list_pages_through_a_thousand_sessions_newest_first() {
    let env = TestEnv::new();
    let dir = env.sessions_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for n in 0..1000u32 {
        let id = format!("20260101-{:06}", n);
        let at = format!("2026-01-01T{:02}:{:02}:{:02}Z", n / 3600, n / 60 % 60, n % 60);
        let cwd = if n % 2 == 0 { "/even" } else { "/odd" };
        let header = json!({"format": 1, "id": id, "created": at, "engine": "claude",
            "prompt": "general", "prompt_hash": "fnv1a64:0000000000000000", "cwd": cwd,
            "title": format!("question {n}")});
        std::fs::write(
            dir.join(format!("session_{id}.md")),
            format!("<!-- cca:session {header} -->\n# question {n}\n<!-- cca:end -->\n"),
        )
        .unwrap();
    }
    let mut raw = Raw::start(&env);
    let (mut seen, mut cursor, mut pages) = (Vec::new(), Value::Null, 0);
    loop {
        let page = raw.call(pages + 1, "session/list", json!({"cursor": cursor}));
        let result = &page["result"];
        seen.extend(
            result["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["title"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match result.get("nextCursor") {
            Some(Value::String(next)) => cursor = Value::String(next.clone()),
            _ => break,
        }
    }
    assert!(pages > 1, "paged");
    assert_eq!(seen.len(), 1000);
    assert_eq!(seen[0], "question 999");
    assert_eq!(seen[999], "question 0");
    let odd = raw.call(100, "session/list", json!({"cwd": "/odd"}));
    let odd = odd["result"]["sessions"].as_array().unwrap().clone();
    assert!(odd.iter().all(|s| s["cwd"] == "/odd"), "filtered by cwd");
    assert_eq!(odd[0]["title"], "question 999");
    assert_eq!(raw.finish(), Some(0));
}

#[test]
fn a_line_that_is_not_utf8_or_huge_is_a_parse_error_quoted_briefly() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env);
    let stdin = raw.stdin.as_mut().unwrap();
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"caf\xe9\"}\n").unwrap();
    stdin.flush().unwrap();
    let error = raw.response(Value::Null);
    assert_eq!(error["error"]["code"], -32700, "{error}");
    // A 100 MB line that is not JSON comes back as its first bytes only.
    let stdin = raw.stdin.as_mut().unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..100 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    let error = raw.response(Value::Null);
    assert_eq!(error["error"]["code"], -32700);
    let quoted = error["error"]["data"]["line"].as_str().unwrap();
    assert!(quoted.starts_with("xxxx") && quoted.len() < 200, "{}", quoted.len());
    // Still serving.
    let session = raw.call(2, "session/new", json!({"cwd": env.work, "mcpServers": []}));
    let id = session["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = json!({"sessionId": id, "prompt": [{"type": "text", "text": "still there?"}]});
    let answer = raw.call(3, "session/prompt", prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(raw.finish(), Some(0));
}

#[test]
fn a_line_that_is_not_utf8_leaves_a_running_prompt_answering() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let script = format!("say part one|;await {};say and part two", go.display());
    // `{"jsonrpc":"2.0","id":99,"method":"caf\xe9"}` and a newline.
    let bad = "eyJqc29ucnBjIjoiMi4wIiwiaWQiOjk5LCJtZXRob2QiOiJjYWbpIn0K";
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            json!({"call": "session/prompt", "as": "p", "async": true,
                   "params": {"sessionId": "$s.sessionId", "prompt": [{"type": "text", "text": "q"}]}}),
            json!({"until": "agent_message_chunk", "session": "$s.sessionId"}),
            json!({"raw": bad}),
            json!({"touch": go}),
            json!({"await": "p"}),
            prompt("again", "$s.sessionId", "still there?"),
        ],
        &[("FAKE_SCRIPT_1", &script), ("FAKE_SCRIPT_2", "echo")],
    );
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{}", out["results"]);
    let id = id_of(&out, "s");
    assert_eq!(
        texts(&out, &id, "agent_message_chunk").concat(),
        "part one|and part twoECHO: still there?"
    );
    assert_eq!(out["results"]["again"]["stopReason"], "end_turn");
}

#[test]
fn a_relative_or_missing_cwd_is_invalid_params() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env);
    let missing = env.work.join("not-there");
    for (n, cwd) in [json!("relative/dir"), json!(missing)].into_iter().enumerate() {
        let id = 1 + n as u64;
        let created = raw.call(id, "session/new", json!({"cwd": cwd, "mcpServers": []}));
        assert_eq!(created["error"]["code"], -32602, "{created}");
    }
    let loaded = raw.call(
        9,
        "session/load",
        json!({"sessionId": "20261121-101500", "cwd": "relative", "mcpServers": []}),
    );
    assert_eq!(loaded["error"]["code"], -32602, "{loaded}");
    // resume and fork name a working directory too.
    for (n, method) in ["session/resume", "session/fork"].into_iter().enumerate() {
        let params = json!({"sessionId": "20261121-101500", "cwd": "relative", "mcpServers": []});
        let answer = raw.call(10 + n as u64, method, params);
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
    }
    assert_eq!(raw.finish(), Some(0));
}
