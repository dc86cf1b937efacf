//! `cca acp` driven by real ACP clients written by others: `acpx` and the official TypeScript SDK
//! (tests/acp/client.mjs), both installed pinned by `make acp-clients`; and, for what no
//! well-behaved client sends (malformed JSON, unknown methods, bad params), raw JSON-RPC lines.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::common::{self, NOW, TIMEOUT, TestEnv};

fn clients() -> PathBuf {
    common::real_program("CCA_TEST_ACP_CLIENTS", "acp-clients")
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.mjs")
}

/// The environment `cca acp` runs in, as for every other test.
fn isolate(cmd: &mut Command, env: &TestEnv, vars: &[(&str, &str)]) {
    cmd.env_clear()
        .env("HOME", &env.home)
        .env("CCA_HOME", &env.cca_home)
        .env("PATH", env.path_var())
        .env("CCA_NOW", NOW)
        .env("CCA_GRACE_MS", "200")
        .env("FAKE_LOG_DIR", &env.log)
        .env("CCA_TEST_ACP_CLIENTS", clients())
        .current_dir(&env.work);
    for (k, v) in vars {
        cmd.env(k, v);
    }
}

/// Runs a plan of the SDK client against `cca acp` (see tests/acp/client.mjs); the `initialize`
/// step comes first.
fn sdk(env: &TestEnv, steps: &[Value], vars: &[(&str, &str)]) -> Value {
    let mut plan = vec![
        json!({"call": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    ];
    plan.extend_from_slice(steps);
    let mut cmd = Command::new("node");
    cmd.arg(script()).arg(common::cca_exe()).arg(Value::Array(plan).to_string());
    isolate(&mut cmd, env, vars);
    let run = common::run_command(cmd, None);
    assert_eq!(run.code, Some(0), "the client failed\n{run}");
    let out: Value = serde_json::from_str(run.stdout.trim()).expect("the client's JSON");
    assert_eq!(out["results"]["exit"], 0, "cca acp exits 0 when stdin closes\n{run}");
    out
}

fn new_session(name: &str, cwd: &Path) -> Value {
    json!({"call": "session/new", "params": {"cwd": cwd, "mcpServers": []}, "as": name})
}

fn prompt(name: &str, session: &str, text: &str) -> Value {
    json!({"call": "session/prompt", "as": name,
           "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
}

/// The text of a session's updates of one kind, in order.
fn texts(out: &Value, session: &str, kind: &str) -> Vec<String> {
    updates(out, session, kind)
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

fn updates(out: &Value, session: &str, kind: &str) -> Vec<Value> {
    out["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionId"] == session && u["update"]["sessionUpdate"] == kind)
        .map(|u| u["update"].clone())
        .collect()
}

fn id_of(out: &Value, name: &str) -> String {
    out["results"][name]["sessionId"].as_str().expect("a session id").to_string()
}

#[test]
fn acpx_exec_asks_in_a_new_session_that_the_terminal_continues() {
    let env = TestEnv::new();
    let acpx = common::real_program("CCA_TEST_ACPX", "acp-clients/node_modules/.bin/acpx");
    let mut cmd = Command::new(acpx);
    let agent = format!("{} acp", common::cca_exe().display());
    cmd.args(["--agent", &agent, "--format", "quiet", "exec", "what is acp?"]);
    isolate(&mut cmd, &env, &[]);
    let run = common::run_command(cmd, None);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("ECHO: what is acp?"), "{run}");
    let files = env.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let id = files[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    assert!(text.contains(&format!("\"cwd\":\"{}\"", env.work.display())), "{text}");
    assert!(text.contains("\"title\":\"what is acp?\""), "{text}");
    // `,` in a terminal continues the session the editor started, with its history.
    env.run_with(&["search", "-q", "-s", &id, "and then?"], None, &[]).ok();
    assert_eq!(env.last_users(), vec!["what is acp?".to_string()]);
}

#[test]
fn new_prompt_list_load_resume_and_config_through_the_sdk() {
    let env = TestEnv::new();
    let cwd = env.work.clone();
    let first = sdk(
        &env,
        &[
            new_session("s", &cwd),
            prompt("p1", "$s.sessionId", "first question"),
            prompt("p2", "$s.sessionId", "second question"),
            json!({"call": "session/set_config_option", "as": "set",
                   "params": {"sessionId": "$s.sessionId", "configId": "engine", "value": "gemini"}}),
            prompt("p3", "$s.sessionId", "third, by gemini"),
            json!({"call": "session/list", "params": {}, "as": "list"}),
            json!({"call": "session/list", "params": {"cwd": "/elsewhere"}, "as": "none"}),
        ],
        &[],
    );
    let r = &first["results"];
    let id = id_of(&first, "s");
    let caps = &r["initialize"]["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    for cap in ["list", "resume", "fork"] {
        assert!(caps["sessionCapabilities"][cap].is_object(), "{caps}");
    }
    assert_eq!(r["initialize"]["agentInfo"]["name"], "cca");
    let options = r["s"]["configOptions"].as_array().unwrap();
    let ids: Vec<&str> = options.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["engine", "model", "prompt"]);
    assert_eq!(options[1]["category"], "model");
    for p in ["p1", "p2", "p3"] {
        assert_eq!(r[p]["stopReason"], "end_turn", "{r}");
    }
    let chunks = texts(&first, &id, "agent_message_chunk");
    assert_eq!(chunks.concat(), "ECHO: first questionECHO: second questionECHO: third, by gemini");
    assert!(!updates(&first, &id, "available_commands_update").is_empty());
    assert!(!updates(&first, &id, "usage_update").is_empty(), "usage is reported");
    assert_eq!(r["set"]["configOptions"][0]["currentValue"], "gemini");
    let calls = env.calls();
    assert!(calls[2]["argv"][0].as_str().unwrap().ends_with("gemini"), "{}", calls[2]["argv"]);
    // The second turn was sent the first as history.
    assert_eq!(common::history_users(common::stdin_of(&calls[1])), vec!["first question"]);
    let listed = r["list"]["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["sessionId"], id.as_str());
    assert_eq!(listed[0]["title"], "first question");
    assert_eq!(listed[0]["cwd"], cwd.display().to_string());
    assert_eq!(listed[0]["updatedAt"], NOW);
    assert_eq!(r["none"]["sessions"], json!([]));

    // A new connection (an editor restarted) loads it, and replays it in order.
    let second = sdk(
        &env,
        &[
            json!({"call": "session/load", "as": "load",
                   "params": {"sessionId": id, "cwd": cwd, "mcpServers": []}}),
            json!({"call": "session/resume", "as": "resume",
                   "params": {"sessionId": id, "cwd": cwd, "mcpServers": []}}),
            prompt("p4", &id, "fourth"),
        ],
        &[],
    );
    assert!(second["results"]["load"]["configOptions"].is_array(), "{}", second["results"]);
    assert!(second["results"]["resume"]["configOptions"].is_array());
    let kinds: Vec<(String, String)> = second["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["update"]["content"]["text"].is_string())
        .map(|u| {
            (
                u["update"]["sessionUpdate"].as_str().unwrap().to_string(),
                u["update"]["content"]["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("user_message_chunk", "first question"),
        ("agent_message_chunk", "ECHO: first question"),
        ("user_message_chunk", "second question"),
        ("agent_message_chunk", "ECHO: second question"),
        ("user_message_chunk", "third, by gemini"),
        ("agent_message_chunk", "ECHO: third, by gemini"),
        // resume replays nothing; the next prompt answers with the whole history.
        ("agent_message_chunk", "ECHO: fourth"),
    ];
    let expected: Vec<(String, String)> =
        expected.iter().map(|(k, t)| (k.to_string(), t.to_string())).collect();
    assert_eq!(kinds, expected);
    assert_eq!(env.last_users().len(), 3);
}

#[test]
fn a_terminal_session_loads_with_its_history_clears_and_summaries_but_no_failed_attempts() {
    let env = TestEnv::new();
    env.converse(&["one", "two"], &[]);
    env.run_with(&["search", "-q", "-r", "three"], None, &[("FAKE_SCRIPT", "fail overloaded")])
        .code(1);
    env.run(&["clear"]).ok();
    env.run(&["search", "-q", "-r", "four"]).ok();
    let id =
        env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    env.run_with(&["search", "-q", "-s", &id, "five"], None, &[]).ok();
    env.run_with(&["compact", &id, "--keep", "0"], None, &[]).ok();
    let out = sdk(
        &env,
        &[json!({"call": "session/load", "as": "load",
                 "params": {"sessionId": id, "cwd": env.work, "mcpServers": []}})],
        &[],
    );
    let users = texts(&out, &id, "user_message_chunk");
    assert_eq!(users, ["one", "two", "four", "five"].map(String::from), "`three` failed");
    let agent = texts(&out, &id, "agent_message_chunk");
    assert_eq!(agent[0], "ECHO: one");
    assert_eq!(agent[1], "ECHO: two");
    assert!(agent[2].starts_with("*Context cleared"), "{agent:?}");
    assert_eq!(agent[3], "ECHO: four");
    assert!(agent[5].starts_with("*Summary of turns"), "{agent:?}");
    assert!(agent[5].contains("SUMMARY["), "{agent:?}");
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

#[test]
fn two_sessions_answer_at_once_and_closing_stdin_records_the_running_turn() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("a", &env.work),
            new_session("b", &env.work),
            json!({"call": "session/prompt", "as": "pa", "async": true,
                   "params": {"sessionId": "$a.sessionId", "prompt": [{"type": "text", "text": "slow"}]}}),
            json!({"until": "agent_message_chunk", "session": "$a.sessionId"}),
            // While a's engine is still running, b answers.
            prompt("pb", "$b.sessionId", "fast"),
            json!({"close": true}),
        ],
        &[("FAKE_SCRIPT_1", "say a started; hang"), ("FAKE_SCRIPT_2", "echo")],
    );
    let (a, b) = (id_of(&out, "a"), id_of(&out, "b"));
    assert_eq!(out["results"]["pb"]["stopReason"], "end_turn", "{}", out["results"]);
    assert_eq!(texts(&out, &b, "agent_message_chunk"), ["ECHO: fast"]);
    let text = std::fs::read_to_string(env.session_path(&a)).unwrap();
    assert!(text.contains("Interrupted (not sent again): client gone"), "{text}");
}

#[test]
fn an_engine_failure_is_an_error_with_the_hint_and_the_question_is_kept() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[new_session("s", &env.work), prompt("p", "$s.sessionId", "will fail")],
        &[("FAKE_SCRIPT", "fail API Error: 529 overloaded")],
    );
    let error = &out["results"]["p"]["error"];
    assert_eq!(error["code"], -32603, "{error}");
    assert!(error["message"].as_str().unwrap().contains("529"), "{error}");
    assert!(error["data"]["kept"].as_str().unwrap().contains("not answered"), "{error}");
    let text = std::fs::read_to_string(env.session_path(&id_of(&out, "s"))).unwrap();
    assert!(text.contains("No answer (not sent again)"), "{text}");
}

#[test]
fn tool_calls_resources_and_slash_commands() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            json!({"call": "session/prompt", "as": "p", "params": {"sessionId": "$s.sessionId", "prompt": [
                {"type": "text", "text": "look this up"},
                {"type": "resource", "resource": {"uri": "file:///notes.txt", "text": "attached words"}},
            ]}}),
            prompt("again", "$s.sessionId", "more"),
            prompt("fork", "$s.sessionId", "/fork 1"),
            prompt("clear", "$s.sessionId", "/clear"),
            prompt("after", "$s.sessionId", "after the clear"),
            json!({"call": "session/fork", "as": "forked",
                   "params": {"sessionId": "$s.sessionId", "cwd": env.work, "mcpServers": []}}),
            json!({"call": "session/prompt", "as": "image", "params": {"sessionId": "$s.sessionId", "prompt": [
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}}),
        ],
        &[("FAKE_SCRIPT_1", "tool WebSearch acp editors; echo")],
    );
    let id = id_of(&out, "s");
    let tools = updates(&out, &id, "tool_call");
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["kind"], "search");
    assert_eq!(tools[0]["status"], "completed");
    assert!(tools[0]["title"].as_str().unwrap().contains("acp editors"), "{}", tools[0]);
    let first = common::stdin_of(&env.calls()[0]).to_string();
    assert!(first.contains("attached words") && first.contains("file:///notes.txt"), "{first}");
    let said = texts(&out, &id, "agent_message_chunk").concat();
    assert!(said.contains("Forked into session"), "{said}");
    assert!(said.contains("Context cleared"), "{said}");
    assert!(env.last_users().is_empty(), "after /clear: {:?}", env.last_users());
    let forked = id_of(&out, "forked");
    assert_ne!(forked, id);
    assert!(env.session_path(&forked).is_file());
    assert_eq!(out["results"]["image"]["error"]["code"], -32602);
    // The /fork made a session of its own, from the first exchange.
    assert_eq!(env.session_files().len(), 3, "{:?}", env.session_files());
}

/// `cca acp` spoken to line by line, for what no SDK sends.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Raw {
    fn start(env: &TestEnv) -> Raw {
        let mut cmd = Command::new(common::cca_exe());
        cmd.arg("acp");
        isolate(&mut cmd, env, &[]);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().expect("cca acp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        let mut raw = Raw { child, stdin, lines };
        raw.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}).to_string());
        raw.response(0);
        raw
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        self.response(id)
    }

    /// The response with this id (`null` for a parse error); every stdout line must be JSON-RPC.
    fn response(&mut self, id: impl Into<Value>) -> Value {
        let id = id.into();
        loop {
            let line = self.lines.recv_timeout(TIMEOUT).expect("a response in time");
            let message: Value = serde_json::from_str(&line).expect("stdout carries JSON only");
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message.get("method").is_none() && message["id"] == id {
                return message;
            }
        }
    }

    fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let output = common::wait_with_timeout(self.child, TIMEOUT);
        output.status.code()
    }
}

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

fn session_id(env: &TestEnv) -> String {
    env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string()
}

fn async_prompt(name: &str, session: &str, text: &str) -> Value {
    let mut step = prompt(name, session, text);
    step["async"] = json!(true);
    step
}

#[test]
fn prompts_sent_while_one_answers_are_queued_and_answered_in_order() {
    let env = TestEnv::new();
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
