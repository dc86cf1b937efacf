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
        .env("CCA_TEST_ACP_SCHEMA", common::real_program("CCA_TEST_ACP_SCHEMA", "acp-schema"))
        .current_dir(&env.work);
    for (k, v) in vars {
        cmd.env(k, v);
    }
}

/// Runs a plan of the SDK client against `cca acp` (see tests/acp/client.mjs); the `initialize`
/// step comes first.
pub(crate) fn sdk(env: &TestEnv, steps: &[Value], vars: &[(&str, &str)]) -> Value {
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
    assert_eq!(out["invalid"], json!([]), "every message passes the ACP schema");
    out
}

pub(crate) fn new_session(name: &str, cwd: &Path) -> Value {
    json!({"call": "session/new", "params": {"cwd": cwd, "mcpServers": []}, "as": name})
}

pub(super) fn prompt(name: &str, session: &str, text: &str) -> Value {
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

pub(super) fn updates(out: &Value, session: &str, kind: &str) -> Vec<Value> {
    out["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionId"] == session && u["update"]["sessionUpdate"] == kind)
        .map(|u| u["update"].clone())
        .collect()
}

pub(crate) fn id_of(out: &Value, name: &str) -> String {
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
    // One engine run per turn, each checked: a kept claude would take them all.
    env.write_config("[engines.claude]\nkeep_warm = \"off\"\n");
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
fn a_terminal_session_loads_with_its_history_clears_summaries_and_failed_attempts() {
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
    // The failed attempt is replayed as the user saw it: the question, then that it was not
    // answered.
    assert_eq!(users, ["one", "two", "three", "four", "five"].map(String::from));
    let thoughts = texts(&out, &id, "agent_thought_chunk");
    assert_eq!(thoughts.len(), 1, "{thoughts:?}");
    assert!(
        thoughts[0].starts_with("Not answered (") && thoughts[0].contains("overloaded"),
        "{thoughts:?}"
    );
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
    // The call is announced as it starts, then updated with its outcome.
    let tools = updates(&out, &id, "tool_call");
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["kind"], "search");
    assert_eq!(tools[0]["status"], "in_progress");
    assert!(tools[0]["title"].as_str().unwrap().contains("acp editors"), "{}", tools[0]);
    let settled = updates(&out, &id, "tool_call_update");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["toolCallId"], tools[0]["toolCallId"]);
    assert_eq!(settled[0]["status"], "completed");
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
        Raw::start_with(env, &[])
    }

    fn start_with(env: &TestEnv, vars: &[(&str, &str)]) -> Raw {
        let mut cmd = Command::new(common::cca_exe());
        cmd.arg("acp");
        isolate(&mut cmd, env, vars);
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

    /// A new session with a prompt (request 2) whose answer has begun; its id.
    fn answering(&mut self, env: &TestEnv) -> String {
        let created = self.call(1, "session/new", json!({"cwd": env.work, "mcpServers": []}));
        let id = created["result"]["sessionId"].as_str().expect("a session").to_string();
        self.send(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                    "params": {"sessionId": id, "prompt": [{"type": "text", "text": "long one"}]}})
            .to_string(),
        );
        self.until_update("agent_message_chunk");
        id
    }

    /// Waits for a notification of this session update kind.
    fn until_update(&mut self, kind: &str) -> Value {
        loop {
            let line = self.lines.recv_timeout(TIMEOUT).expect("an update in time");
            let message: Value = serde_json::from_str(&line).expect("stdout carries JSON only");
            if message["params"]["update"]["sessionUpdate"] == kind {
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
fn linked_files_are_read_when_shared_and_images_refused_by_a_text_engine() {
    use base64::Engine as _;
    let env = TestEnv::new();
    env.add_engine("echo-engine");
    env.write_config("engine = \"echo\"\n[engines.echo]\ncommand = [\"echo-engine\"]\n");
    let outside = env.root.path().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("shared.txt"), "ON DISK: shared\n").unwrap();
    std::fs::write(outside.join("other.txt"), "ON DISK: other\n").unwrap();
    std::fs::write(env.work.join("here.txt"), "ON DISK: here\n").unwrap();
    let uri = |p: &Path| format!("file://{}", p.display());
    let png =
        base64::engine::general_purpose::STANDARD.encode(include_bytes!("../fixtures/pixel.png"));
    let ask = |name: &str, blocks: Value| {
        json!({"call": "session/prompt", "as": name,
               "params": {"sessionId": "$s.sessionId", "prompt": blocks}})
    };
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            ask(
                "image",
                json!([{"type": "text", "text": "what is it?"},
                                {"type": "image", "data": png, "mimeType": "image/png"}]),
            ),
            ask(
                "embed",
                json!([{"type": "text", "text": "first"},
                                {"type": "resource", "resource":
                                    {"uri": uri(&outside.join("shared.txt")), "text": "EMBEDDED"}}]),
            ),
            ask(
                "links",
                json!([{"type": "text", "text": "second"},
                                {"type": "resource_link", "name": "shared.txt",
                                 "uri": uri(&outside.join("shared.txt"))},
                                {"type": "resource_link", "name": "other.txt",
                                 "uri": uri(&outside.join("other.txt"))},
                                {"type": "resource_link", "name": "here.txt",
                                 "uri": uri(&env.work.join("here.txt"))}]),
            ),
        ],
        &[],
    );
    let error = &out["results"]["image"]["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("engine echo cannot take images"),
        "{error}"
    );
    assert!(!env.cca_home.join("files").exists(), "nothing was kept of the refused image");
    let calls = env.calls();
    assert_eq!(calls.len(), 2, "the refused prompt reached no engine");
    let first = common::stdin_of(&calls[0]);
    assert!(first.contains("EMBEDDED"), "{first}");
    let second = common::stdin_of(&calls[1]).to_string();
    assert!(second.contains("ON DISK: shared"), "sent embedded before, so shared: {second}");
    assert!(second.contains("ON DISK: here"), "under the session's folder: {second}");
    assert!(!second.contains("ON DISK: other"), "neither: not read: {second}");
    let other = format!("[other.txt]({})", uri(&outside.join("other.txt")));
    assert!(second.contains(&other), "a link not read is named in the question: {second}");
    // The transcript keeps the files' text, not URIs labelled with their length.
    let text = env.latest();
    let here = env.work.join("here.txt").canonicalize().unwrap();
    assert!(text.contains(&format!("#### Attached: {} (14 bytes)", here.display())), "{text}");
}

#[test]
fn a_loaded_session_shows_an_image_by_its_stored_copy() {
    let env = TestEnv::new();
    std::fs::write(env.work.join("pic.png"), include_bytes!("../fixtures/pixel.png")).unwrap();
    env.run(&["search", "-e", "claude", "-f", "pic.png", "what is it?"]).ok();
    let id = session_id(&env);
    let out = sdk(
        &env,
        &[json!({"call": "session/load", "as": "load",
                 "params": {"sessionId": id, "cwd": env.work, "mcpServers": []}})],
        &[],
    );
    let asked = texts(&out, &id, "user_message_chunk");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let files = env.cca_home.join("files");
    let stored = std::fs::read_dir(&files).unwrap().next().unwrap().unwrap().path();
    assert_eq!(asked[0], format!("what is it?\n\n![pic.png](file://{})", stored.display()));
}

/// `cca acp` in the middle of an answer: the engine said something, started a helper of its
/// own, and hangs. Gives the agent, the session, and the pids of the engine and its helper.
fn mid_answer(env: &TestEnv) -> (Raw, String, i32, i32) {
    let (engine, helper) = (env.root.path().join("engine.pid"), env.root.path().join("helper.pid"));
    let script = format!(
        "say the beginning; pid {}; grandchild {}; hang",
        engine.display(),
        helper.display()
    );
    let mut raw = Raw::start_with(env, &[("FAKE_SCRIPT", &script)]);
    let id = raw.answering(env);
    let pid = |path: &Path| -> i32 {
        assert!(common::wait_until(TIMEOUT, || path.exists()), "no pid in {}", path.display());
        assert!(common::wait_until(TIMEOUT, || std::fs::read_to_string(path)
            .is_ok_and(|p| p.trim().parse::<i32>().is_ok())));
        std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
    };
    let (engine, helper) = (pid(&engine), pid(&helper));
    assert!(common::alive(engine) && common::alive(helper));
    (raw, id, engine, helper)
}

fn gone_in_time(pids: &[i32]) {
    for &pid in pids {
        assert!(
            common::wait_until(TIMEOUT, || !common::alive(pid)),
            "process {pid} of the engine outlived cca acp"
        );
    }
}

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

#[test]
fn session_new_writes_nothing_until_the_first_prompt() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("left", &env.work),
            new_session("used", &env.work),
            json!({"call": "session/set_config_option", "as": "set",
                   "params": {"sessionId": "$left.sessionId", "configId": "model", "value": "default"}}),
        ],
        &[],
    );
    let (left, used) = (id_of(&out, "left"), id_of(&out, "used"));
    assert_ne!(left, used, "two new sessions in the same second have ids of their own");
    assert!(out["results"]["set"]["configOptions"].is_array(), "{}", out["results"]);
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
    let out = sdk(&env, &[new_session("s", &env.work), prompt("p", "$s.sessionId", "hello")], &[]);
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{}", out["results"]);
    let id = id_of(&out, "s");
    assert_eq!(env.session_files().len(), 1, "{:?}", env.session_files());
    let text = std::fs::read_to_string(env.session_path(&id)).unwrap();
    assert!(text.contains("ECHO: hello"), "{text}");
}

#[test]
fn a_new_session_forked_before_its_first_prompt_is_a_new_session_too() {
    let env = TestEnv::new();
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            json!({"call": "session/fork", "as": "f",
                   "params": {"sessionId": "$s.sessionId", "cwd": env.work, "mcpServers": []}}),
            prompt("p", "$f.sessionId", "hello from the fork"),
        ],
        &[],
    );
    let r = &out["results"];
    assert!(r["f"]["configOptions"].is_array(), "{r}");
    assert_eq!(r["p"]["stopReason"], "end_turn", "{r}");
    let (source, fork) = (id_of(&out, "s"), id_of(&out, "f"));
    assert_ne!(source, fork);
    // Only the fork, prompted, was written; the source still writes nothing.
    assert_eq!(env.session_files().len(), 1, "{:?}", env.session_files());
    let text = std::fs::read_to_string(env.session_path(&fork)).unwrap();
    assert!(text.contains("ECHO: hello from the fork"), "{text}");
}

#[test]
fn a_model_chosen_for_one_engine_is_not_passed_to_the_next() {
    let env = TestEnv::new();
    let set = |name: &str, option: &str, value: &str| {
        json!({"call": "session/set_config_option", "as": name,
               "params": {"sessionId": "$s.sessionId", "configId": option, "value": value}})
    };
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            set("model", "model", "opus"),
            set("engine", "engine", "gemini"),
            prompt("p", "$s.sessionId", "by gemini"),
        ],
        &[],
    );
    let r = &out["results"];
    assert_eq!(r["model"]["configOptions"][1]["currentValue"], "opus", "{r}");
    assert_eq!(r["engine"]["configOptions"][0]["currentValue"], "gemini", "{r}");
    assert_eq!(r["engine"]["configOptions"][1]["currentValue"], "default", "{r}");
    assert_eq!(r["p"]["stopReason"], "end_turn", "{r}");
    let argv = env.calls()[0]["argv"].to_string();
    assert!(argv.contains("gemini") && !argv.contains("opus"), "{argv}");
}

#[test]
fn a_first_prompt_refused_for_its_image_leaves_no_session_file() {
    use base64::Engine as _;
    let env = TestEnv::new();
    env.add_engine("echo-engine");
    env.write_config("engine = \"echo\"\n[engines.echo]\ncommand = [\"echo-engine\"]\n");
    let png =
        base64::engine::general_purpose::STANDARD.encode(include_bytes!("../fixtures/pixel.png"));
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            json!({"call": "session/prompt", "as": "image", "params": {"sessionId": "$s.sessionId",
                   "prompt": [{"type": "text", "text": "what is it?"},
                              {"type": "image", "data": png, "mimeType": "image/png"}]}}),
        ],
        &[],
    );
    let error = &out["results"]["image"]["error"];
    assert!(error["message"].as_str().unwrap_or("").contains("cannot take images"), "{error}");
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
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

/// `/compact` over ACP on a session whose last record was cut off sets that record aside first,
/// as a turn does: the compaction is a record of its own, and read as one. One turn folded is
/// "turn 1", as the terminal says.
#[test]
fn slash_compact_after_a_cut_off_record_repairs_it_first() {
    let env = TestEnv::new();
    env.write_config("[compaction]\nkeep_recent = 1\n");
    env.converse(&["c-1", "c-2"], &[]);
    let id = session_id(&env);
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\n<!-- cca:user {\"at\":\"2026-11-21T10:16:00Z\"} -->\n## 3. You\n\nhalf writ");
    std::fs::write(&path, &text).unwrap();
    let out = sdk(&env, &[prompt("compact", &id, "/compact")], &[("FAKE_SCRIPT", "echo")]);
    assert_eq!(out["results"]["compact"]["stopReason"], "end_turn", "{}", out["results"]);
    let said = texts(&out, &id, "agent_message_chunk").concat();
    assert!(said.starts_with("Turn 1 is now a summary: "), "{said}");
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(!file.contains("half writ"), "{file}");
    let (t, problems) = cca::transcript::parse(&file).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(t.records.last().unwrap().kind, cca::transcript::Kind::Compaction);
}

/// docs/DESIGN.md, "Warm engines": a follow-up goes to the claude kept from the prompt before,
/// as its next user line; `keep_warm = "off"` starts one per prompt.
#[test]
fn a_follow_up_goes_to_the_kept_claude_unless_keep_warm_is_off() {
    for (config, runs) in [("", 1), ("keep_warm = \"off\"\n", 2)] {
        let env = TestEnv::new();
        env.write_config(config);
        let out = sdk(
            &env,
            &[
                json!({"call": "session/new", "as": "s", "params": {"cwd": env.work, "mcpServers": []}}),
                prompt("p1", "$s.sessionId", "first question"),
                prompt("p2", "$s.sessionId", "second question"),
            ],
            &[],
        );
        let id = id_of(&out, "s");
        assert_eq!(
            texts(&out, &id, "agent_message_chunk").concat(),
            "ECHO: first questionECHO: second question",
            "{config}"
        );
        assert_eq!(env.calls().len(), runs, "{config}");
    }
}
