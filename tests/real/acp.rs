//! `cca acp` through the real programs, driven by the official ACP SDK client, and agents
//! calling `cca mcp`; signals and model choice.

use super::*;

/// Runs a plan of the SDK client against `cca acp` in this environment (after `initialize`).
pub(crate) fn acp(r: &Real, steps: &[Value]) -> Value {
    let clients = real_program("CCA_TEST_ACP_CLIENTS", "acp-clients");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.mjs");
    let mut plan = vec![
        json!({"call": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    ];
    plan.extend_from_slice(steps);
    let mut cmd = std::process::Command::new("node");
    cmd.env_clear();
    // The same environment as `cca search` here, for the client to pass on to `cca acp`.
    let template = r.command();
    for (k, v) in template.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.env("CCA_TEST_ACP_CLIENTS", clients).current_dir(&r.env.work);
    cmd.env("CCA_TEST_ACP_SCHEMA", real_program("CCA_TEST_ACP_SCHEMA", "acp-schema"));
    cmd.arg(script).arg(cca_exe()).arg(Value::Array(plan).to_string());
    let run = run_command(cmd, None);
    assert_eq!(run.code, Some(0), "the client failed\n{run}");
    let out: Value = serde_json::from_str(run.stdout.trim()).expect("the client's JSON");
    assert_eq!(out["results"]["exit"], 0, "cca acp exits 0 when stdin closes\n{run}");
    assert_eq!(out["invalid"], json!([]), "every message passes the ACP schema");
    out
}

pub(crate) fn acp_prompt(name: &str, session: &str, text: &str, wait: bool) -> Value {
    json!({"call": "session/prompt", "as": name, "async": !wait,
           "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
}

/// A session's updates of one kind, the first `limit` updates only.
pub(crate) fn acp_updates(out: &Value, kind: &str, limit: usize) -> Vec<Value> {
    let all = out["updates"].as_array().unwrap();
    all[..limit.min(all.len())]
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == kind)
        .map(|u| u["update"].clone())
        .collect()
}

pub(crate) fn acp_texts(out: &Value, kind: &str) -> Vec<String> {
    acp_updates(out, kind, usize::MAX)
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

pub(crate) fn acp_through(engine: &str) {
    use cca::transcript::Kind::{Assistant, Interrupted, User};
    let r = Real::new();
    let go = r.env.root.path().join("go");
    let cfg = format!("engine = \"{engine}\"\n");
    r.env.write_config(&cfg);

    // New, a prompt streamed in several chunks, then one cancelled mid-answer.
    r.api.set(Behavior {
        chunks: Some(3),
        delay: Duration::from_millis(700),
        ..Behavior::default()
    });
    let first = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
            acp_prompt("p", "$s.sessionId", "stream please", true),
        ],
    );
    let id = first["results"]["s"]["sessionId"].as_str().expect("a session id").to_string();
    assert_eq!(first["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", first["results"]);
    let seen = first["before"]["p"].as_u64().unwrap() as usize;
    let chunks = acp_updates(&first, "agent_message_chunk", seen);
    assert!(chunks.len() > 1, "{engine}: the answer came in {} chunk(s)", chunks.len());
    let streamed: String =
        chunks.iter().map(|c| c["content"]["text"].as_str().unwrap()).collect::<String>();
    assert_eq!(streamed, "ECHO: stream please", "{engine}");

    r.api.set(Behavior { hold: Some(go.clone()), ..Behavior::default() });
    let second = acp(
        &r,
        &[
            acp_prompt("p", &id, "never finished", false),
            json!({"until": "agent_message_chunk", "session": id}),
            json!({"notify": "session/cancel", "params": {"sessionId": id}}),
            json!({"await": "p"}),
        ],
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(
        second["results"]["p"]["stopReason"], "cancelled",
        "{engine}: {}",
        second["results"]
    );
    let records = records_of(&r);
    assert_eq!(records.len(), 4, "{engine}: {records:?}");
    assert_eq!(records[2], (User, "never finished".to_string()));
    assert_eq!(records[3].0, Interrupted, "{engine}: {records:?}");
    assert!(r.env.latest().contains("Interrupted (not sent again): cancelled"), "{engine}");

    // A new connection loads it (the interrupted attempt as the user saw it), then two turns
    // with a tool call each.
    let search = tool_names(engine).0;
    r.api.set(Behavior {
        script: vec![
            vec![Block::text("I'll search."), Block::tool(search, json!({"query": FIRST_QUERY}))],
            vec![Block::text("Found it.")],
        ],
        ..Behavior::default()
    });
    let third = acp(
        &r,
        &[
            json!({"call": "session/load", "as": "load",
                   "params": {"sessionId": id, "cwd": r.env.work, "mcpServers": []}}),
            acp_prompt("p", &id, "look it up", true),
            acp_prompt("p2", &id, "and again", true),
        ],
    );
    assert!(third["results"]["load"]["configOptions"].is_array(), "{engine}: {}", third["results"]);
    let loaded = third["before"]["load"].as_u64().unwrap() as usize;
    let replayed = |kind: &str| -> Vec<String> {
        acp_updates(&third, kind, loaded)
            .iter()
            .map(|u| u["content"]["text"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(replayed("user_message_chunk"), ["stream please", "never finished"], "{engine}");
    assert_eq!(replayed("agent_message_chunk")[0], "ECHO: stream please", "{engine}");
    assert!(replayed("agent_thought_chunk")[0].starts_with("Interrupted (cancelled)"), "{engine}");
    assert_eq!(third["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", third["results"]);
    assert_eq!(third["results"]["p2"]["stopReason"], "end_turn", "{engine}: {}", third["results"]);
    // Each call is announced when it starts, before the text after it, then settled; ids are
    // unique over the two turns.
    let all = third["updates"].as_array().unwrap();
    let mut ids = Vec::new();
    for (n, (from, to)) in [
        (loaded, third["before"]["p"].as_u64().unwrap() as usize),
        (
            third["before"]["p"].as_u64().unwrap() as usize,
            third["before"]["p2"].as_u64().unwrap() as usize,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let turn: Vec<&Value> = all[from..to].iter().map(|u| &u["update"]).collect();
        let kinds: Vec<&str> = turn.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
        let started = kinds.iter().position(|k| *k == "tool_call").expect("a tool call");
        let settled = kinds.iter().position(|k| *k == "tool_call_update").expect("an update");
        let after: String = turn[settled..]
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str())
            .collect();
        assert!(after.contains("Found it."), "{engine} turn {n}: the answer after the search");
        assert!(started < settled, "{engine} turn {n}: {kinds:?}");
        let before: String = turn[..started]
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str())
            .collect();
        assert!(!before.contains("Found it."), "{engine} turn {n}: announced before the answer");
        let (call, update) = (turn[started], turn[settled]);
        assert_eq!(call["kind"], "search", "{engine}");
        assert_eq!(call["status"], "in_progress", "{engine}");
        assert!(call["title"].as_str().unwrap().contains(FIRST_QUERY), "{engine}: {call}");
        assert_eq!(update["toolCallId"], call["toolCallId"], "{engine}");
        assert_eq!(update["status"], "completed", "{engine}: {update}");
        if engine == "claude" {
            // claude reports the sources its search returned: they come as links.
            let links: Vec<&str> = update["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["content"]["uri"].as_str().unwrap())
                .collect();
            let expected: Vec<String> =
                mock_api::sources(FIRST_QUERY).into_iter().map(|(_, url)| url).collect();
            assert_eq!(links, expected, "{engine}: {update}");
        }
        ids.push(call["toolCallId"].as_str().unwrap().to_string());
    }
    assert_ne!(ids[0], ids[1], "{engine}: tool call ids are unique within the session");
    assert_eq!(
        r.api.searches(),
        [FIRST_QUERY, FIRST_QUERY],
        "{engine}: the engine really searched"
    );
    let records = records_of(&r);
    assert_eq!(records.last().unwrap().0, Assistant, "{engine}: {records:?}");
    // The engine was sent the answered exchanges as history, not the interrupted one: as the
    // turns of the kept engine (docs/DESIGN.md, "Warm engines"), which a kept gemini got framed
    // in its first prompt.
    let last = r.api.turns().last().unwrap().body.clone();
    if engine == "claude" {
        let sent = serde_json::to_string(&last["messages"]).unwrap();
        assert!(sent.contains("stream please") && sent.contains("look it up"), "{sent}");
        assert!(!sent.contains("never finished"), "{sent}");
    } else {
        let sent = sent_questions(&last);
        assert_eq!(sent[..2], ["stream please", "look it up"], "{engine}: {sent:?}");
    }

    // A later load replays both turns' tool calls as they ended.
    let fourth = acp(
        &r,
        &[json!({"call": "session/load", "as": "load",
                 "params": {"sessionId": id, "cwd": r.env.work, "mcpServers": []}})],
    );
    let tools = acp_updates(&fourth, "tool_call", usize::MAX);
    assert_eq!(tools.len(), 2, "{engine}: {tools:?}");
    for tool in &tools {
        assert_eq!(tool["status"], "completed", "{engine}: {tool}");
        assert!(tool["title"].as_str().unwrap().contains(FIRST_QUERY), "{engine}: {tool}");
    }
    assert_ne!(tools[0]["toolCallId"], tools[1]["toolCallId"], "{engine}");
    assert_eq!(
        acp_texts(&fourth, "user_message_chunk"),
        ["stream please", "never finished", "look it up", "and again"],
        "{engine}"
    );
}

#[test]
fn acp_through_claude() {
    acp_through("claude");
}

#[test]
fn acp_through_gemini() {
    acp_through("gemini");
}

/// Both engines take the model as `--model=NAME`, the form no name can turn into an option of
/// its own: the request goes to the model named.
#[test]
fn the_model_reaches_each_engine_in_the_equals_form() {
    let r = Real::new();
    r.run(&["search", "-e", "gemini", "-m", "gemini-2.5-flash", "q"]).ok();
    let turns = r.api.turns();
    assert!(turns.last().unwrap().path.contains("/models/gemini-2.5-flash:"), "{turns:?}");
    r.run(&["search", "-e", "claude", "-m", "claude-haiku-4-5", "q"]).ok();
    let body = r.api.turns().last().unwrap().body.clone();
    assert_eq!(body["model"], "claude-haiku-4-5", "{body}");
    // Without a model, --json says which one ran: the engine reports its default.
    for engine in ["claude", "gemini"] {
        let run = r.run(&["search", "--json", "-e", engine, "q"]);
        let json: Value = serde_json::from_str(&run.ok().stdout).unwrap();
        let model = json["model"].as_str().unwrap_or_else(|| panic!("{engine}: {json}"));
        assert!(!model.is_empty(), "{engine}: {json}");
    }
}

/// A shared transcript whose header names the model `--yolo` would turn gemini's option on:
/// it is refused before anything is recorded or run.
#[test]
fn a_header_model_that_reads_as_an_option_is_refused() {
    let r = Real::new();
    r.run(&["search", "-e", "gemini", "first"]).ok();
    // `latest` is a link to the transcript: reading and writing it reach the file.
    let path = r.env.sessions_dir().join("latest");
    let text = std::fs::read_to_string(&path).unwrap();
    let hostile =
        text.replacen("\"engine\":\"gemini\"", "\"engine\":\"gemini\",\"model\":\"--yolo\"", 1);
    assert_ne!(hostile, text);
    std::fs::write(&path, &hostile).unwrap();
    let turns = r.api.turns().len();
    r.run(&["search", "-r", "go on"])
        .code(2)
        .stderr_has("the model name \"--yolo\" (named by the session's header)")
        .stderr_has("nothing was recorded");
    assert_eq!(r.api.turns().len(), turns, "gemini was not run");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), hostile, "nothing was recorded");
}

/// A real agent, started by hand with `cca mcp` as its MCP server (claude: `--mcp-config`;
/// gemini: `mcpServers` in its settings.json), calls cca's search with a question in plain
/// words when the model asks, and the model's next request carries what cca found, the right
/// conversation of two kept earlier (each answered through the real claude) first. The
/// transcript is not changed.
pub(crate) fn agent_calls_cca_mcp_search(engine: &str) {
    let r = Real::new();
    let other = "Tokio is an async runtime for Rust, with its own file and lock types.";
    r.api.set(Behavior { answer: Some(other.into()), ..Behavior::default() });
    r.run(&["search", "-q", "-e", "claude", "what is tokio?"]).ok();
    let kept = "Use File::lock from Rust 1.89; the lock is advisory on Linux.";
    r.api.set(Behavior { answer: Some(kept.into()), ..Behavior::default() });
    r.run(&["search", "-q", "-e", "claude", "how do I lock a file in rust?"]).ok();
    let id = r
        .env
        .session_files()
        .iter()
        .max()
        .unwrap()
        .trim_start_matches("session_")
        .trim_end_matches(".md")
        .to_string();
    let before = std::fs::read(r.env.session_path(&id)).unwrap();

    // How each agent names an MCP server's tool to the model.
    let tool = if engine == "claude" { "mcp__cca__search" } else { "mcp_cca_search" };
    r.api.set(Behavior {
        script: vec![
            vec![
                Block::text("Let me look in your past conversations."),
                Block::tool(tool, json!({"query": "what did we decide about locking files?"})),
            ],
            vec![Block::text("You settled on File::lock.")],
        ],
        ..Behavior::default()
    });
    let server =
        json!({"command": cca_exe(), "args": ["mcp"], "env": {"CCA_HOME": r.env.cca_home}});
    let cca = r.command();
    let mut agent =
        std::process::Command::new(if engine == "claude" { &r.claude } else { &r.gemini });
    agent
        .env_clear()
        .envs(cca.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .current_dir(&r.env.work)
        .stdin(Stdio::null());
    if engine == "claude" {
        let config = json!({"mcpServers": {"cca": server}});
        agent.args(["-p", "--mcp-config", &config.to_string(), "--allowedTools", tool, "--"]);
    } else {
        // A trusted server's tools run without asking, as `-p` cannot ask.
        let mut server = server;
        server["trust"] = json!(true);
        let settings = json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
            "mcpServers": {"cca": server}});
        std::fs::write(r.env.home.join(".gemini/settings.json"), settings.to_string()).unwrap();
        agent.env("GEMINI_CLI_TRUST_WORKSPACE", "true").arg("-p");
    }
    agent.arg("what did we decide about locking files?");
    let run = run_command(agent, None);
    assert_eq!(run.code, Some(0), "{engine}: {run}");
    assert!(run.stdout.contains("You settled on File::lock."), "{engine}: {run}");

    let turns = r.api.turns();
    let first = turns.iter().find(|t| t.body.to_string().contains("what did we decide")).unwrap();
    // The agent names cca's tools to the model (as tools, or as deferred ones it can load).
    assert!(first.body.to_string().contains(tool), "{engine}: cca's tools are offered");
    // The request after the tool call carries cca's result: the exchange kept earlier.
    let last = &turns.last().unwrap().body;
    let results: Vec<&Value> = if engine == "claude" {
        let messages = last["messages"].as_array().unwrap().iter();
        let blocks = messages.flat_map(|m| m["content"].as_array().into_iter().flatten());
        blocks.filter(|b| b["type"] == "tool_result").collect()
    } else {
        let contents = last["contents"].as_array().unwrap().iter();
        let parts = contents.flat_map(|c| c["parts"].as_array().into_iter().flatten());
        parts.filter(|p| p["functionResponse"].is_object()).collect()
    };
    assert_eq!(results.len(), 1, "{engine}: {run}");
    let result = results[0].to_string();
    assert!(result.contains(kept) && result.contains(&id), "{engine}: {result}");
    // Ranked: the conversation about locking files comes before the one that only mentions locks.
    let (right, wrong) =
        (result.find(kept).unwrap(), result.find("Tokio is").unwrap_or(usize::MAX));
    assert!(right < wrong, "{engine}: the right exchange first: {result}");
    assert!(result.contains("how do I lock a file in rust?"), "{engine}: {result}");
    assert_ne!(results[0]["is_error"], true, "{engine}: {result}");
    assert_eq!(std::fs::read(r.env.session_path(&id)).unwrap(), before, "read-only");
}

#[test]
fn claude_calls_cca_mcp_search_and_the_model_gets_what_it_found() {
    agent_calls_cca_mcp_search("claude");
}

#[test]
fn gemini_calls_cca_mcp_search_and_the_model_gets_what_it_found() {
    agent_calls_cca_mcp_search("gemini");
}

/// Every process below `pid` (its children, theirs, and so on).
pub(crate) fn descendants(pid: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}

/// `cca acp` started in this environment, initialized, with a new session: the agent, its
/// stdin, its stdout lines, and the session.
pub(crate) fn acp_session(
    r: &Real,
) -> (Guard, std::process::ChildStdin, std::sync::mpsc::Receiver<Value>, String) {
    use std::io::BufRead;
    let mut cmd = r.command();
    cmd.arg("acp").current_dir(&r.env.work);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = Guard(cmd.spawn().expect("cca acp starts"));
    let mut stdin = child.0.stdin.take().unwrap();
    let stdout = child.0.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&line).expect("JSON-RPC on stdout"));
        }
    });
    acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
    );
    acp_next(&lines, &|m| m["id"] == 0);
    acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
               "params": {"cwd": r.env.work, "mcpServers": []}}),
    );
    let created = acp_next(&lines, &|m| m["id"] == 1);
    let id =
        created["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    (child, stdin, lines, id)
}

pub(crate) fn acp_send(stdin: &mut std::process::ChildStdin, message: Value) {
    use std::io::Write;
    writeln!(stdin, "{message}").unwrap();
}

/// The next line from `cca acp` that `what` wants.
pub(crate) fn acp_next(
    lines: &std::sync::mpsc::Receiver<Value>,
    what: &dyn Fn(&Value) -> bool,
) -> Value {
    loop {
        let message = lines.recv_timeout(TIMEOUT).expect("cca acp answers in time");
        if what(&message) {
            return message;
        }
    }
}

/// `cca acp` with the real engine in the middle of an answer (the API holds the rest until
/// `go` exists): the agent, its stdout lines, and the session.
pub(crate) fn acp_mid_answer(
    r: &Real,
    engine: &str,
    go: &Path,
) -> (Guard, std::sync::mpsc::Receiver<Value>, String) {
    r.env.write_config(&format!("engine = \"{engine}\"\n"));
    r.api.set(Behavior { hold: Some(go.to_path_buf()), ..Behavior::default() });
    let (child, mut stdin, lines, id) = acp_session(r);
    acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
               "params": {"sessionId": id, "prompt": [{"type": "text", "text": "a long answer"}]}}),
    );
    acp_next(&lines, &|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    // stdin stays open: the client is still there when the signal comes.
    std::mem::forget(stdin);
    (child, lines, id)
}

pub(crate) fn acp_signalled(engine: &str, signal: rustix::process::Signal) {
    let r = Real::new();
    let go = r.env.root.path().join("go");
    let (child, _lines, id) = acp_mid_answer(&r, engine, &go);
    let pid = child.0.id() as i32;
    let engine_processes = descendants(pid);
    assert!(!engine_processes.is_empty(), "{engine}: the engine runs");
    child.signal(signal);
    let killed = signal == rustix::process::Signal::KILL;
    if !killed {
        let output = child.finish();
        assert_eq!(shell_status(output.status), 128 + signal.as_raw(), "{engine}");
    }
    for p in &engine_processes {
        assert!(
            wait_until(TIMEOUT, || !alive(*p)),
            "{engine}: process {p} of the engine outlived cca acp"
        );
    }
    std::fs::write(&go, "").unwrap();
    let text = std::fs::read_to_string(r.env.session_path(&id)).unwrap();
    if !killed {
        assert!(text.contains("Interrupted (not sent again): SIGTERM"), "{engine}: {text}");
        assert!(text.contains("ECHO"), "{engine}: what arrived is kept\n{text}");
    }
}

#[test]
fn sigterm_of_cca_acp_stops_and_records_claude() {
    acp_signalled("claude", rustix::process::Signal::TERM);
}

#[test]
fn sigkill_of_cca_acp_leaves_no_claude() {
    acp_signalled("claude", rustix::process::Signal::KILL);
}

#[test]
fn sigkill_of_cca_acp_leaves_no_gemini() {
    acp_signalled("gemini", rustix::process::Signal::KILL);
}

/// The model choice of a session: the engine's own models are offered, the chosen one reaches
/// the engine's request; only installed engines are offered, and cca's compaction prompt is not
/// a system prompt to choose.
pub(crate) fn acp_model_choice(
    engine: &str,
    offered: &[&str],
    chosen: &str,
    sent: &dyn Fn(&Received) -> bool,
) {
    let r = Real::new();
    r.env.write_config(&format!(
        "engine = \"{engine}\"\n[engines.elsewhere]\ncommand = [\"/nonexistent/engine\"]\n"
    ));
    let out = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
            json!({"call": "session/set_config_option", "as": "set",
                   "params": {"sessionId": "$s.sessionId", "configId": "model", "value": chosen}}),
            acp_prompt("p", "$s.sessionId", "which model?", true),
        ],
    );
    let options = out["results"]["s"]["configOptions"].as_array().unwrap().clone();
    let values = |id: &str| -> Vec<String> {
        let option = options.iter().find(|o| o["id"] == id).unwrap();
        option["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap().to_string())
            .collect()
    };
    for model in offered {
        assert!(
            values("model").iter().any(|m| m == model),
            "{engine}: {model} in {:?}",
            values("model")
        );
    }
    assert!(!values("engine").contains(&"elsewhere".to_string()), "{:?}", values("engine"));
    assert!(values("engine").contains(&engine.to_string()), "{:?}", values("engine"));
    assert!(!values("prompt").contains(&"compaction".to_string()), "{:?}", values("prompt"));
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", out["results"]);
    let turns = r.api.turns();
    let last = turns.last().expect("a request");
    assert!(sent(last), "{engine}: {} {}", last.path, last.body["model"]);
}

#[test]
fn acp_model_choice_reaches_claude() {
    acp_model_choice("claude", &["sonnet", "opus", "haiku"], "haiku", &|r| {
        r.body["model"].as_str().unwrap_or("").contains("haiku")
    });
}

#[test]
fn acp_model_choice_reaches_gemini() {
    acp_model_choice(
        "gemini",
        &["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"],
        "gemini-2.5-flash-lite",
        &|r| r.path.contains("/models/gemini-2.5-flash-lite:"),
    );
}
