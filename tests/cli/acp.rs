//! `cca acp` driven by real ACP clients written by others: `acpx` and the official TypeScript SDK
//! (tests/acp/client.mjs), both installed pinned by `make acp-clients`; and, for what no
//! well-behaved client sends (malformed JSON, unknown methods, bad params), raw JSON-RPC lines.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::common::{self, NOW, TIMEOUT, TestEnv};

pub(super) fn clients() -> PathBuf {
    common::real_program("CCA_TEST_ACP_CLIENTS", "acp-clients")
}

pub(super) fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.mjs")
}

/// The environment `cca acp` runs in, as for every other test.
pub(super) fn isolate(cmd: &mut Command, env: &TestEnv, vars: &[(&str, &str)]) {
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
pub(super) fn texts(out: &Value, session: &str, kind: &str) -> Vec<String> {
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
pub(super) fn acpx_exec_asks_in_a_new_session_that_the_terminal_continues() {
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
pub(super) fn new_prompt_list_load_resume_and_config_through_the_sdk() {
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
pub(super) fn a_terminal_session_loads_with_its_history_clears_summaries_and_failed_attempts() {
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
pub(super) fn two_sessions_answer_at_once_and_closing_stdin_records_the_running_turn() {
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
pub(super) fn an_engine_failure_is_an_error_with_the_hint_and_the_question_is_kept() {
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
pub(super) fn tool_calls_resources_and_slash_commands() {
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
            // A mistyped command is refused as chat refuses it, never asked; `//` sends a `/`.
            prompt("typo", "$s.sessionId", "/cleaar"),
            prompt("slash", "$s.sessionId", "//cleaar is not a command"),
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
    let typo = &out["results"]["typo"]["error"];
    assert_eq!(typo["code"], -32602, "{typo}");
    assert!(typo["message"].as_str().unwrap().contains("no command `/cleaar`"), "{typo}");
    assert!(typo["data"]["hint"].as_str().unwrap().contains("/clear, /compact"), "{typo}");
    let asked = common::questions(&std::fs::read_to_string(env.session_path(&id)).unwrap());
    assert_eq!(asked.last().map(String::as_str), Some("/cleaar is not a command"), "{asked:?}");
    assert!(!asked.iter().any(|q| q == "/cleaar"), "{asked:?}");
    // The /fork made a session of its own, from the first exchange.
    assert_eq!(env.session_files().len(), 3, "{:?}", env.session_files());
}

/// `cca acp` spoken to line by line, for what no SDK sends.
pub(super) struct Raw {
    pub(super) child: Child,
    pub(super) stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Raw {
    pub(super) fn start(env: &TestEnv) -> Raw {
        Raw::start_with(env, &[])
    }

    pub(super) fn start_with(env: &TestEnv, vars: &[(&str, &str)]) -> Raw {
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

    pub(super) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    pub(super) fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        self.response(id)
    }

    /// The response with this id (`null` for a parse error); every stdout line must be JSON-RPC.
    pub(super) fn response(&mut self, id: impl Into<Value>) -> Value {
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
    pub(super) fn answering(&mut self, env: &TestEnv) -> String {
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
    pub(super) fn until_update(&mut self, kind: &str) -> Value {
        loop {
            let line = self.lines.recv_timeout(TIMEOUT).expect("an update in time");
            let message: Value = serde_json::from_str(&line).expect("stdout carries JSON only");
            if message["params"]["update"]["sessionUpdate"] == kind {
                return message;
            }
        }
    }

    pub(super) fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let output = common::wait_with_timeout(self.child, TIMEOUT);
        output.status.code()
    }
}

pub(super) fn session_id(env: &TestEnv) -> String {
    env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string()
}

pub(super) fn async_prompt(name: &str, session: &str, text: &str) -> Value {
    let mut step = prompt(name, session, text);
    step["async"] = json!(true);
    step
}

/// `cca acp` in the middle of an answer: the engine said something, started a helper of its
/// own, and hangs. Gives the agent, the session, and the pids of the engine and its helper.
pub(super) fn mid_answer(env: &TestEnv) -> (Raw, String, i32, i32) {
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

pub(super) fn gone_in_time(pids: &[i32]) {
    for &pid in pids {
        assert!(
            common::wait_until(TIMEOUT, || !common::alive(pid)),
            "process {pid} of the engine outlived cca acp"
        );
    }
}
