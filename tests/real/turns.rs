//! Turns through the real engines: history inline and structured, streaming, system prompts,
//! the tools offered, failures, `llm`, `cca doctor`.

use super::*;

pub(crate) fn three_turns(engine: &str, history: &str) {
    let r = Real::new();
    r.env.write_config(&format!("[engines.{engine}]\nhistory = \"{history}\"\n"));
    r.run(&["search", "-q", "-e", engine, "first question"]).ok();
    r.run(&["search", "-q", "-r", "second question"]).ok();
    let run = r.run(&["search", "-r", "third question"]);
    run.ok();
    assert_eq!(run.stdout, "ECHO: third question");
    let turns = r.api.turns();
    assert_eq!(turns.len(), 3, "{engine} made {} answer requests", turns.len());
    let body = &turns[2].body;
    assert_eq!(sent_questions(body), ["first question", "second question", "third question"]);
    let framed = framed_message(body);
    let system = tag(&framed, "system_instructions").expect("the system prompt, framed");
    assert!(system.starts_with("You are a web research assistant"), "{system}");
    if history == "inline" {
        let history = tag(&framed, "conversation_history").expect("the history, framed");
        assert!(history.contains("<user_turn>\nfirst question\n</user_turn>\n<assistant_turn>\nECHO: first question\n</assistant_turn>"), "{history}");
        assert!(history.contains("<user_turn>\nsecond question\n</user_turn>\n<assistant_turn>\nECHO: second question\n</assistant_turn>"), "{history}");
        assert_eq!(tag(&framed, "user_query"), Some("third question"));
    } else {
        // The system prompt rides in the first question, as it was sent on the first turn.
        assert_eq!(tag(&framed, "user_query"), Some("first question"));
        assert_eq!(framed, framed_message(&turns[0].body), "{engine}: the first question as sent");
    }
    assert_eq!(
        answers(&r.transcript()),
        ["ECHO: first question", "ECHO: second question", "ECHO: third question"]
    );
    assert!(r.env.latest().contains(&format!("\"engine\":\"{engine}\"")));
}

#[test]
fn three_turns_through_claude() {
    three_turns("claude", "structured");
}

#[test]
fn three_turns_through_gemini() {
    three_turns("gemini", "structured");
}

#[test]
fn three_turns_framed_inline_through_claude() {
    three_turns("claude", "inline");
}

#[test]
fn three_turns_framed_inline_through_gemini() {
    three_turns("gemini", "inline");
}

pub(crate) fn streams_live(engine: &str) {
    let r = Real::new();
    // The server holds the answer's last chunk until the first one is on cca's stdout: the
    // answer streams, or this waits for ever (the command's guard ends it).
    let go = r.env.root.path().join("go");
    r.api.set(Behavior { chunks: Some(3), hold: Some(go.clone()), ..Behavior::default() });
    let mut cmd = r.command();
    cmd.args(["search", "-e", engine, "stream please"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Guard(cmd.spawn().unwrap());
    let mut stdout = child.0.stdout.take().unwrap();
    let mut first = [0u8; 4];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"ECHO");
    let sent = r.api.chunk_times().last().map_or(0, Vec::len);
    assert!(
        sent < 3,
        "{engine}: the first chunk reached stdout only after the server sent the last"
    );
    std::fs::write(&go, "").unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(format!("ECHO{rest}"), "ECHO: stream please");
}

#[test]
fn claude_output_streams_live() {
    streams_live("claude");
}

#[test]
fn gemini_output_streams_live() {
    streams_live("gemini");
}

#[test]
fn native_system_prompts() {
    let r = Real::new();
    r.env.write_config("[engines.claude]\nsystem_prompt = \"native\"\n[engines.gemini]\nsystem_prompt = \"native\"\n");
    for engine in ["claude", "gemini"] {
        r.run(&["search", "-q", "-e", engine, "-p", "general", "hello"]).ok();
        let body = r.api.turns().last().unwrap().body.clone();
        let system = if engine == "claude" {
            mock_api::content_text(&body["system"])
        } else {
            mock_api::content_text(&body["systemInstruction"]["parts"])
        };
        assert!(system.contains("You are a concise, careful assistant"), "{engine}: {system}");
        let framed = framed_message(&body);
        assert!(tag(&framed, "system_instructions").is_none(), "{engine}: sent twice: {framed}");
    }
    assert_eq!(engine_files_left(&r), 0, "temporary files are removed");
}

pub(crate) fn structured_history(engine: &str) {
    let r = Real::new();
    r.env.write_config(&format!("[engines.{engine}]\nhistory = \"structured\"\n"));
    r.run(&["search", "-q", "-e", engine, "first"]).ok();
    r.run(&["search", "-q", "-r", "second"]).ok();
    r.run(&["search", "-q", "-r", "third"]).ok();
    let body = r.api.turns().last().unwrap().body.clone();
    let framed = framed_message(&body);
    assert!(
        tag(&framed, "conversation_history").is_none(),
        "{engine}: history was framed: {framed}"
    );
    // Real turns: user and assistant messages carrying the earlier exchanges.
    let (list, assistant, text_of): (&str, &str, fn(&Value) -> String) = if engine == "claude" {
        ("messages", "assistant", |m| mock_api::content_text(&m["content"]))
    } else {
        ("contents", "model", |c| mock_api::content_text(&c["parts"]))
    };
    let turns: Vec<(String, String)> = body[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap_or("").to_string(), text_of(m)))
        .collect();
    let answers: Vec<&str> =
        turns.iter().filter(|(role, _)| role == assistant).map(|(_, t)| t.as_str()).collect();
    assert_eq!(answers, ["ECHO: first", "ECHO: second"], "{engine}: {turns:?}");
    // (gemini puts its own session context before the first user message.)
    assert_eq!(sent_questions(&body), ["first", "second", "third"], "{engine}: {turns:?}");
    assert_eq!(answers_of(&r), ["ECHO: first", "ECHO: second", "ECHO: third"]);
    assert_eq!(engine_files_left(&r), 0, "temporary files are removed");
}

/// Folders of files cca made for an engine (prompt, history) still in CCA_HOME.
pub(crate) fn engine_files_left(r: &Real) -> usize {
    let entries = r.env.cca_home.read_dir().unwrap().flatten();
    entries.filter(|e| e.file_name().to_string_lossy().starts_with(".engine-")).count()
}

pub(crate) fn answers_of(r: &Real) -> Vec<String> {
    answers(&r.transcript())
}

#[test]
fn structured_history_through_claude() {
    structured_history("claude");
}

#[test]
fn structured_history_through_gemini() {
    structured_history("gemini");
}

/// Files an engine keeps of its own sessions under the test's HOME.
pub(crate) fn engine_session_files(r: &Real) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![r.env.home.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let p = path.to_string_lossy().into_owned();
                let claude_session = p.contains("/.claude/projects/") && p.ends_with(".jsonl");
                let gemini_session = p.contains("/.gemini/tmp/") && p.contains("/chats/");
                if claude_session || gemini_session {
                    found.push(p);
                }
            }
        }
    }
    found
}

#[test]
fn engines_keep_no_sessions_of_their_own() {
    let r = Real::new();
    for engine in ["claude", "gemini"] {
        r.run(&["search", "-q", "-e", engine, "one"]).ok();
        r.run(&["search", "-q", "-r", "two"]).ok();
    }
    r.env.write_config("[engines.gemini]\nhistory = \"structured\"\n");
    r.run(&["search", "-q", "-e", "gemini", "three"]).ok();
    r.run(&["search", "-q", "-r", "four"]).ok();
    assert_eq!(r.api.turns().len(), 6);
    assert_eq!(engine_session_files(&r), Vec::<String>::new());
}

pub(crate) fn offered_tools(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            // claude: {name}; gemini: {functionDeclarations: [{name}]}
            let mut v: Vec<Value> =
                t["functionDeclarations"].as_array().cloned().unwrap_or_default();
            v.push(t.clone());
            v
        })
        .filter_map(|f| f["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

#[test]
fn tools_are_limited_to_search_and_configurable() {
    let r = Real::new();
    r.run(&["search", "-q", "-e", "claude", "q"]).ok();
    let tools = offered_tools(&r.api.turns()[0].body);
    assert!(tools.contains(&"WebSearch".into()) && tools.contains(&"WebFetch".into()), "{tools:?}");
    for other in ["Bash", "Write", "Edit", "Read"] {
        assert!(!tools.contains(&other.into()), "claude offered {other}: {tools:?}");
    }
    // Even when the user lets gemini approve everything, cca's policy keeps shell and writes out.
    r.env.write_config("[engines.gemini]\nargs = [\"--approval-mode\", \"yolo\"]\n");
    r.run(&["search", "-q", "-e", "gemini", "q"]).ok();
    let tools = offered_tools(&r.api.turns()[1].body);
    assert!(
        tools.contains(&"google_web_search".into()) && tools.contains(&"web_fetch".into()),
        "{tools:?}"
    );
    for denied in ["run_shell_command", "write_file", "replace"] {
        assert!(!tools.contains(&denied.into()), "gemini offered {denied}: {tools:?}");
    }
    // Configurable: without cca's policy, the user's approval mode decides.
    r.env.write_config("[engines.gemini]\nargs = [\"--approval-mode\", \"yolo\"]\npolicy = \"\"\n[engines.claude]\ntools = \"WebSearch,Read\"\n");
    r.run(&["search", "-q", "-e", "gemini", "q"]).ok();
    assert!(offered_tools(&r.api.turns()[2].body).contains(&"run_shell_command".into()));
    r.run(&["search", "-q", "-e", "claude", "q"]).ok();
    let tools = offered_tools(&r.api.turns()[3].body);
    assert!(tools.contains(&"Read".into()) && !tools.contains(&"WebFetch".into()), "{tools:?}");
}

pub(crate) fn fails_clearly(
    engine: &str,
    behavior: Option<Behavior>,
    base_url: Option<&str>,
    input: Option<&[u8]>,
    expect: &[&str],
) {
    let r = Real::new();
    if let Some(b) = behavior {
        r.api.set(b);
    }
    let url = base_url.map(str::to_string).unwrap_or_else(|| r.api.url());
    // A chosen model: with gemini's default (auto) its model router retries on its own first.
    let model = if engine == "gemini" { "gemini-2.5-pro" } else { "claude-sonnet-4-5" };
    let run = r.run_at(
        &url,
        &["search", "-e", engine, "-m", model, "--fail-fast", "doomed question"],
        input,
    );
    run.code(1);
    let error_line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("cca: error: "))
        .unwrap_or_else(|| panic!("{run}"));
    for e in expect {
        assert!(run.stderr.contains(e), "{engine}: stderr lacks {e:?}\n{run}");
    }
    assert!(error_line.len() < 400, "one line: {error_line}");
    let t = r.transcript();
    assert_eq!(t.records.last().unwrap().kind, cca::transcript::Kind::Failed, "{}", r.env.latest());
}

#[test]
fn claude_http_401() {
    fails_clearly(
        "claude",
        Some(Behavior { status: Some(401), ..Behavior::default() }),
        None,
        None,
        &["claude was refused by its API", "401", "ANTHROPIC_API_KEY"],
    );
}

#[test]
fn claude_http_500() {
    fails_clearly(
        "claude",
        Some(Behavior { status: Some(500), ..Behavior::default() }),
        None,
        None,
        &["claude failed (exit status 1)", "500"],
    );
}

#[test]
fn claude_server_down() {
    fails_clearly(
        "claude",
        None,
        Some("http://127.0.0.1:9"),
        None,
        &["claude failed (exit status 1)"],
    );
}

#[test]
fn gemini_http_401() {
    fails_clearly(
        "gemini",
        Some(Behavior { status: Some(401), ..Behavior::default() }),
        None,
        None,
        &["gemini was refused by its API", "401", "GEMINI_API_KEY"],
    );
}

#[test]
fn gemini_http_500() {
    fails_clearly(
        "gemini",
        Some(Behavior { status: Some(500), ..Behavior::default() }),
        None,
        None,
        &["gemini failed", "500"],
    );
}

#[test]
fn gemini_server_down() {
    fails_clearly("gemini", None, Some("http://127.0.0.1:9"), None, &["gemini failed"]);
}

#[test]
fn gemini_prompt_too_large_for_the_model() {
    // Over a million tokens of estimate, under the 8 MiB stdin limit: gemini sends nothing and
    // exits 0 with no output.
    let big = "lorem ipsum dolor sit amet ".repeat(250_000);
    fails_clearly(
        "gemini",
        None,
        None,
        Some(big.as_bytes()),
        &["gemini returned an empty answer", "context window"],
    );
}

#[test]
fn retries_are_visible_and_can_be_stopped() {
    let r = Real::new();
    r.api.set(Behavior { status: Some(500), ..Behavior::default() });
    let mut cmd = r.command();
    cmd.args(["search", "-e", "claude", "will retry"]).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = Guard(cmd.spawn().unwrap());
    let mut stderr = child.0.stderr.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains("retrying") {
        let n = stderr.read(&mut buf).unwrap();
        assert!(n > 0, "claude's retries were not shown: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.contains("the API answered 500") && seen.contains("--fail-fast"), "{seen}");
    child.signal(rustix::process::Signal::INT);
    let status = child.finish().status;
    assert_eq!(shell_status(status), 130);
}

#[test]
fn llm_from_pypi_is_an_engine_too() {
    let r = Real::new();
    let llm = real_program("CCA_TEST_LLM", "llm-venv/bin/llm");
    r.env.write_config(&format!(
        "[engines.echo]\ncommand = [\"{}\", \"-m\", \"echo\", \"--no-log\"]\nsystem_prompt = \"native\"\nsystem_prompt_arg = \"-s\"\n",
        llm.display()
    ));
    let vars = [("LLM_USER_PATH", r.env.root.path().join("llm").to_string_lossy().into_owned())];
    let run_llm = |args: &[&str]| {
        let mut cmd = r.env.command();
        cmd.args(args);
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        run_command(cmd, None)
    };
    let run = run_llm(&["search", "-e", "echo", "-p", "general", "hello llm"]);
    run.ok();
    let echoed: Value = serde_json::from_str(&run.stdout).expect("llm-echo answers with JSON");
    assert!(echoed["system"].as_str().unwrap().starts_with("You are a concise"), "{echoed}");
    assert_eq!(tag(echoed["prompt"].as_str().unwrap(), "user_query"), Some("hello llm"));
    run_llm(&["search", "-r", "and again"]).ok();
    let run = run_llm(&["search", "-r", "third"]);
    let echoed: Value = serde_json::from_str(&run.stdout).unwrap();
    let history =
        tag(echoed["prompt"].as_str().unwrap(), "conversation_history").unwrap().to_string();
    assert!(
        history.contains("<user_turn>\nhello llm\n</user_turn>")
            && history.contains("<user_turn>\nand again\n</user_turn>"),
        "{history}"
    );
    assert_eq!(answers_of(&r).len(), 3);
}

#[test]
fn doctor_finds_the_real_engines() {
    let r = Real::new();
    let mut cmd = r.command();
    cmd.arg("doctor");
    let run = run_command(cmd, None);
    run.ok();
    assert!(run.stdout.contains("2.1.329 (Claude Code)"), "{run}");
    assert!(run.stdout.contains("0.61.0"), "{run}");
}

// Tool calls: the real programs run their real tool flows against the loopback server's script
// (DESIGN.md, "Tool calls"), and cca shows the answer exactly as the engine wrote it.
