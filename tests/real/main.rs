//! The real `claude` and `gemini` programs (and `llm`, a third-party engine) under cca, against a
//! loopback server that speaks their APIs. `make test` installs the pinned programs into build/.

// Shared with tests/cli; each binary uses part of it.
mod auth;
#[allow(dead_code)]
#[path = "../support/env.rs"]
mod common;
mod files;
mod import;
mod manners;
#[path = "../support/mock_api.rs"]
mod mock_api;
mod standby;
mod warm;
mod warm_gemini;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::*;
use mock_api::{Behavior, Block, MockApi, Received};
use serde_json::{Value, json};

struct Real {
    env: TestEnv,
    api: MockApi,
    claude: PathBuf,
    gemini: PathBuf,
}

impl Real {
    fn new() -> Real {
        let env = TestEnv::in_dir(&secure_base(), &[]);
        let gemini_dir = env.home.join(".gemini");
        std::fs::create_dir_all(&gemini_dir).unwrap();
        std::fs::write(
            gemini_dir.join("settings.json"),
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
        )
        .unwrap();
        Real {
            env,
            api: MockApi::start(),
            claude: real_program("CCA_TEST_CLAUDE", "engines/node_modules/.bin/claude"),
            gemini: real_program("CCA_TEST_GEMINI", "engines/node_modules/.bin/gemini"),
        }
    }

    fn vars(&self, base_url: &str) -> Vec<(String, String)> {
        [
            ("CCA_CLAUDE", self.claude.to_str().unwrap()),
            ("CCA_GEMINI", self.gemini.to_str().unwrap()),
            ("ANTHROPIC_BASE_URL", base_url),
            ("ANTHROPIC_API_KEY", "dummy"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("GOOGLE_GEMINI_BASE_URL", base_url),
            ("GEMINI_API_KEY", "dummy"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = self.env.command();
        cmd.envs(self.vars(&self.api.url()));
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        self.run_at(&self.api.url(), args, None)
    }

    fn run_at(&self, base_url: &str, args: &[&str], input: Option<&[u8]>) -> Run {
        let mut cmd = self.env.command();
        cmd.args(args).envs(self.vars(base_url));
        run_command(cmd, input)
    }

    fn transcript(&self) -> cca::transcript::Transcript {
        let (t, problems) = cca::transcript::parse(&self.env.latest()).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        t
    }
}

/// A folder for test homes that gemini trusts: it ignores a settings file (which `--fail-fast`
/// uses) below any folder that others can write to, such as /tmp. target/tmp qualifies unless the
/// checkout itself lies below such a folder; then a private folder in ~/.cache does.
fn secure_base() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let secure = |dir: &Path| {
        dir.ancestors()
            .all(|a| std::fs::metadata(a).map_or(true, |m| m.permissions().mode() & 0o022 == 0))
    };
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if secure(&target) {
        return target;
    }
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let cache = home.join(".cache").join("cca-tests");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(secure(&cache), "no folder for the real engines' tests that others cannot write to");
    cache
}

fn answers(t: &cca::transcript::Transcript) -> Vec<String> {
    t.records
        .iter()
        .filter(|r| r.kind == cca::transcript::Kind::Assistant)
        .map(|r| r.content.clone())
        .collect()
}

/// The user message cca sent (the last one holding a `<user_query>`).
fn framed_message(body: &Value) -> String {
    let mut found = String::new();
    for m in body["messages"].as_array().into_iter().flatten().filter(|m| m["role"] == "user") {
        let t = mock_api::content_text(&m["content"]);
        if t.contains("<user_query>") {
            found = t;
        }
    }
    for c in body["contents"].as_array().into_iter().flatten().filter(|c| c["role"] == "user") {
        let t = mock_api::content_text(&c["parts"]);
        if t.contains("<user_query>") {
            found = t;
        }
    }
    found
}

/// The questions a request sent, oldest first (the last is the newest), whichever way cca laid
/// out the history: framed in one message (`history = "inline"`, and the first prompt of a
/// kept gemini), or as real turns whose first opens with cca's framing (structured, the
/// default). The engines' own context is left out.
fn sent_questions(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().or(body["contents"].as_array());
    let texts: Vec<String> = messages
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            mock_api::own_text(if m["content"].is_null() { &m["parts"] } else { &m["content"] })
        })
        .filter(|t| !t.is_empty())
        .collect();
    // A message may frame the history before it (inline history; a kept engine's first).
    let mut questions = Vec::new();
    for text in &texts {
        questions.extend(history_users(text));
        questions.push(tag(text, "user_query").unwrap_or(text).to_string());
    }
    questions
}

/// The answers a request sent back as the model's own turns (structured history).
fn sent_answers(body: &Value) -> Vec<String> {
    let (list, role, content) = match body["messages"].as_array() {
        Some(list) => (list, "assistant", "content"),
        None => (body["contents"].as_array().unwrap(), "model", "parts"),
    };
    list.iter()
        .filter(|m| m["role"] == role)
        .map(|m| mock_api::content_text(&m[content]))
        .filter(|t| !t.is_empty())
        .collect()
}

fn three_turns(engine: &str, history: &str) {
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

fn streams_live(engine: &str) {
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

fn structured_history(engine: &str) {
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
fn engine_files_left(r: &Real) -> usize {
    let entries = r.env.cca_home.read_dir().unwrap().flatten();
    entries.filter(|e| e.file_name().to_string_lossy().starts_with(".engine-")).count()
}

fn answers_of(r: &Real) -> Vec<String> {
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
fn engine_session_files(r: &Real) -> Vec<String> {
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

fn offered_tools(body: &Value) -> Vec<String> {
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

fn fails_clearly(
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

const FIRST_QUERY: &str = "rust 1.89 file locking";
const SECOND_QUERY: &str = "file locking on windows";

/// The engine's names for its web search and its shell.
fn tool_names(engine: &str) -> (&'static str, &'static str) {
    if engine == "claude" {
        ("WebSearch", "Bash")
    } else {
        ("google_web_search", "run_shell_command")
    }
}

/// A turn with two searches: text and a search; text and another search; then the answer in
/// three text blocks, the middle one citing a source (the API splits text at each citation).
fn two_searches(engine: &str) -> Behavior {
    let (search, _) = tool_names(engine);
    let (title, url) = mock_api::sources(FIRST_QUERY).remove(0);
    Behavior {
        script: vec![
            vec![
                Block::text("I'll search for that."),
                Block::tool(search, json!({"query": FIRST_QUERY})),
            ],
            vec![
                Block::text("Checking one more thing."),
                Block::tool(search, json!({"query": SECOND_QUERY})),
            ],
            vec![
                Block::text("According to the results, "),
                Block::cited("Rust 1.89 stabilised File::lock", &url, &title),
                Block::text(&format!(". Sources: [the guide]({url})")),
            ],
        ],
        ..Behavior::default()
    }
}

/// What stdout shows of [`two_searches`]: each message's text exactly, a break between messages.
fn two_searches_printed() -> String {
    let url = &mock_api::sources(FIRST_QUERY)[0].1;
    format!(
        "I'll search for that.\n\nChecking one more thing.\n\nAccording to the results, Rust 1.89 \
         stabilised File::lock. Sources: [the guide]({url})"
    )
}

/// What the transcript keeps of [`two_searches`]: the printed text with a block per search,
/// holding every source where the engine reports them (claude does, gemini does not).
fn two_searches_kept(engine: &str) -> String {
    let (search, _) = tool_names(engine);
    let block = |query: &str| {
        let mut block = format!("> {search}: {query}\n");
        if engine == "claude" {
            for (title, url) in mock_api::sources(query) {
                block.push_str(&format!("> - [{title}]({url})\n"));
            }
        }
        block
    };
    let url = &mock_api::sources(FIRST_QUERY)[0].1;
    format!(
        "I'll search for that.\n\n{}\nChecking one more thing.\n\n{}\nAccording to the results, \
         Rust 1.89 stabilised File::lock. Sources: [the guide]({url})",
        block(FIRST_QUERY),
        block(SECOND_QUERY)
    )
}

/// The `· ...` lines cca wrote on stderr for tool calls.
fn tool_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("· ")).collect()
}

fn searches_then_follow_up(engine: &str) {
    let r = Real::new();
    r.api.set(two_searches(engine));
    let run = r.run(&["search", "-e", engine, "what changed in file locking?"]);
    run.ok();
    // 1, 2: the text of one message exactly as it came; a break only between messages.
    assert_eq!(run.stdout, two_searches_printed(), "{engine}\n{run}");
    // The engine really searched, twice, in order, with its own search requests.
    assert_eq!(r.api.searches(), [FIRST_QUERY, SECOND_QUERY], "{engine}");
    // ... and gave the model what they found: every source, in the request for the answer.
    let turns = r.api.turns();
    assert_eq!(turns.len(), 3, "{engine}: one request per message of the model");
    let last = turns[2].body.to_string();
    for (_, url) in
        mock_api::sources(FIRST_QUERY).into_iter().chain(mock_api::sources(SECOND_QUERY))
    {
        assert!(last.contains(&url), "{engine}: the model was not given {url}");
    }
    let (search, _) = tool_names(engine);
    let sources = if engine == "claude" { " · 2 sources" } else { "" };
    assert_eq!(
        tool_lines(&run.stderr),
        [
            format!("· {search}: {FIRST_QUERY}{sources}"),
            format!("· {search}: {SECOND_QUERY}{sources}")
        ],
        "{engine}\n{run}"
    );
    // 5, 6: the transcript keeps both searches in order with every source, one blank line
    // around each block, and the answer's own bytes.
    let kept = two_searches_kept(engine);
    assert_eq!(answers_of(&r), std::slice::from_ref(&kept), "{engine}");
    assert!(!kept.contains("\n\n\n"), "{kept}");
    // Nothing of the search's own summary reaches the answer: it went to the model only.
    assert!(!run.stdout.contains("search found") && !run.stdout.contains("Search summary"));

    // 3: --json's answer is what stdout printed; the tool calls come apart.
    let run = r.run(&["search", "-r", "--json", "and once more?"]);
    let json: Value = serde_json::from_str(&run.ok().stdout).unwrap();
    assert_eq!(json["answer"], two_searches_printed(), "{engine}");
    let tools = json["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{json}");
    for (tool, query) in tools.iter().zip([FIRST_QUERY, SECOND_QUERY]) {
        assert_eq!(
            (&tool["name"], &tool["input"], &tool["status"]),
            (&json!(search), &json!(query), &json!("ran"))
        );
        let sources = tool["sources"].as_array().unwrap().len();
        assert_eq!(sources, if engine == "claude" { 2 } else { 0 }, "{json}");
    }

    // The follow-up's history holds both answers as kept, byte for byte.
    r.api.set(Behavior::default());
    let run = r.run(&["search", "-r", "and on windows?"]);
    assert_eq!(run.ok().stdout, "ECHO: and on windows?");
    let body = &r.api.turns().last().unwrap().body.clone();
    let sent = sent_answers(body);
    assert_eq!(sent, [kept.clone(), kept], "{engine}: {body}");
}

#[test]
fn claude_searches_then_follow_up() {
    searches_then_follow_up("claude");
}

#[test]
fn gemini_searches_then_follow_up() {
    searches_then_follow_up("gemini");
}

/// The model asks for the shell, which cca's settings keep out: the engine refuses, and the
/// model answers without it.
fn refused_shell(engine: &str) {
    let r = Real::new();
    let (_, shell) = tool_names(engine);
    let marker = r.env.root.path().join("the-shell-ran");
    let command = format!("touch {}", marker.display());
    r.api.set(Behavior {
        script: vec![
            vec![Block::tool(shell, json!({"command": command}))],
            vec![Block::text("I cannot run commands here.")],
        ],
        ..Behavior::default()
    });
    let run = r.run(&["search", "-e", engine, "list the files"]);
    run.ok();
    assert!(!marker.exists(), "{engine} ran the command");
    assert_eq!(run.stdout, "I cannot run commands here.");
    // 4: refused, on stderr with the engine's reason, and in the transcript.
    let lines = tool_lines(&run.stderr);
    assert_eq!(lines.len(), 1, "{run}");
    assert!(lines[0].starts_with(&format!("· {shell} (refused): {command} · ")), "{run}");
    let reason = if engine == "claude" { "No such tool available: Bash" } else { "not found" };
    assert!(lines[0].contains(reason), "{run}");
    assert_eq!(
        answers_of(&r),
        [format!("> {shell} (refused): {command}\n\nI cannot run commands here.")]
    );
    // The model was told, and went on.
    assert_eq!(r.api.turns().len(), 2, "{engine}");

    let run = r.run(&["search", "-r", "--json", "list them again"]);
    let json: Value = serde_json::from_str(&run.ok().stdout).unwrap();
    assert_eq!(json["answer"], "I cannot run commands here.");
    assert_eq!(json["tools"][0]["status"], "refused", "{json}");
    assert_eq!(json["tools"][0]["input"], json!(command));
    assert!(json["tools"][0]["reason"].as_str().unwrap().contains(reason), "{json}");
    assert!(!marker.exists(), "{engine} ran the command");
}

#[test]
fn claude_refuses_its_shell() {
    refused_shell("claude");
}

#[test]
fn gemini_refuses_its_shell() {
    refused_shell("gemini");
}

/// Starts `cca search` through a real engine with the answer held open by the server, steers
/// it once the model is answering, then lets the answer end once cca has passed the steer on.
/// `cca steer` returns when the steer is in the turn's inbox; cca writes it to claude's stdin a
/// moment later (it says `steer queued` as it does). Let go before that, and claude may start
/// the tool (or end the answer) with nothing queued and take the steer as an answer of its own.
/// `cca search ARGS` with `steer` sent while claude (or gemini) is held answering.
fn steer_real(r: &Real, args: &[&str], behavior: Behavior, steer: &str) -> Run {
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

fn records_of(r: &Real) -> Vec<(cca::transcript::Kind, String)> {
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

/// Runs a plan of the SDK client against `cca acp` in this environment (after `initialize`).
fn acp(r: &Real, steps: &[Value]) -> Value {
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

fn acp_prompt(name: &str, session: &str, text: &str, wait: bool) -> Value {
    json!({"call": "session/prompt", "as": name, "async": !wait,
           "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
}

/// A session's updates of one kind, the first `limit` updates only.
fn acp_updates(out: &Value, kind: &str, limit: usize) -> Vec<Value> {
    let all = out["updates"].as_array().unwrap();
    all[..limit.min(all.len())]
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == kind)
        .map(|u| u["update"].clone())
        .collect()
}

fn acp_texts(out: &Value, kind: &str) -> Vec<String> {
    acp_updates(out, kind, usize::MAX)
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

fn acp_through(engine: &str) {
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
/// gemini: `mcpServers` in its settings.json), calls cca's search when the model asks, and the
/// model's next request carries what cca found in a conversation kept earlier (itself answered
/// through the real claude). The transcript is not changed.
fn agent_calls_cca_mcp_search(engine: &str) {
    let r = Real::new();
    let kept = "Use File::lock from Rust 1.89; the lock is advisory on Linux.";
    r.api.set(Behavior { answer: Some(kept.into()), ..Behavior::default() });
    r.run(&["search", "-q", "-e", "claude", "how do I lock a file in rust?"]).ok();
    let id =
        r.env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    let before = std::fs::read(r.env.session_path(&id)).unwrap();

    // How each agent names an MCP server's tool to the model.
    let tool = if engine == "claude" { "mcp__cca__search" } else { "mcp_cca_search" };
    r.api.set(Behavior {
        script: vec![
            vec![
                Block::text("Let me look in your past conversations."),
                Block::tool(tool, json!({"query": "lock file rust"})),
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
fn descendants(pid: i32) -> Vec<i32> {
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
fn acp_session(
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

fn acp_send(stdin: &mut std::process::ChildStdin, message: Value) {
    use std::io::Write;
    writeln!(stdin, "{message}").unwrap();
}

/// The next line from `cca acp` that `what` wants.
fn acp_next(lines: &std::sync::mpsc::Receiver<Value>, what: &dyn Fn(&Value) -> bool) -> Value {
    loop {
        let message = lines.recv_timeout(TIMEOUT).expect("cca acp answers in time");
        if what(&message) {
            return message;
        }
    }
}

/// `cca acp` with the real engine in the middle of an answer (the API holds the rest until
/// `go` exists): the agent, its stdout lines, and the session.
fn acp_mid_answer(
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

fn acp_signalled(engine: &str, signal: rustix::process::Signal) {
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
fn acp_model_choice(
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

/// A minimal stdio MCP server: it writes the file `MARKER` names when started, then answers
/// `initialize` and `tools/list` (no tools).
const MCP_SERVER: &str = r#"import json, os, sys
with open(os.environ["MARKER"], "w") as f:
    f.write(" ".join(sys.argv[1:]))
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        version = msg.get("params", {}).get("protocolVersion", "2024-11-05")
        result = {"protocolVersion": version, "capabilities": {"tools": {}},
                  "serverInfo": {"name": "marker", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": []}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// An MCP server given in session/new (or in session/fork, to the fork of a written session)
/// is started by the real engine for the session's turn, with its arguments and environment.
fn acp_mcp_server(engine: &str, fork: bool) {
    let r = Real::new();
    r.env.write_config(&format!("engine = \"{engine}\"\n"));
    let script = r.env.root.path().join("mcp_server.py");
    std::fs::write(&script, MCP_SERVER).unwrap();
    let marker = r.env.root.path().join("mcp-started");
    let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("python3 for the MCP server");
    let server = json!({"name": "marker", "command": python, "args": [script, "--flag"],
                        "env": [{"name": "MARKER", "value": marker}]});
    let steps = if fork {
        vec![
            json!({"call": "session/new", "as": "first", "params": {"cwd": r.env.work, "mcpServers": []}}),
            acp_prompt("p0", "$first.sessionId", "without a server", true),
            json!({"call": "session/fork", "as": "s", "params":
                   {"sessionId": "$first.sessionId", "cwd": r.env.work, "mcpServers": [server]}}),
        ]
    } else {
        vec![json!({"call": "session/new", "as": "s",
                    "params": {"cwd": r.env.work, "mcpServers": [server]}})]
    };
    let out =
        acp(&r, &[steps, vec![acp_prompt("p", "$s.sessionId", "with a server", true)]].concat());
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", out["results"]);
    let started = std::fs::read_to_string(&marker)
        .unwrap_or_else(|_| panic!("{engine} did not start the MCP server: {}", out["results"]));
    assert_eq!(started, "--flag", "{engine}");
}

#[test]
fn acp_mcp_server_started_by_claude() {
    acp_mcp_server("claude", false);
}

#[test]
fn acp_mcp_server_given_to_a_fork_started_by_claude() {
    acp_mcp_server("claude", true);
}

#[test]
fn acp_mcp_server_started_by_gemini() {
    acp_mcp_server("gemini", false);
}

#[test]
fn sigterm_of_cca_acp_stops_and_records_gemini() {
    acp_signalled("gemini", rustix::process::Signal::TERM);
}

/// A minimal MCP server over streamable HTTP: prints its port, appends each method it is
/// sent to the file `MARKER` names, and answers `initialize` and `tools/list` (no tools).
const MCP_HTTP_SERVER: &str = r#"import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        self.send_response(405)
        self.end_headers()
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with open(os.environ["MARKER"], "a") as f:
            f.write(msg.get("method", "") + " " + self.headers.get("X-Token", "") + "\n")
        if "id" not in msg:
            self.send_response(202)
            self.end_headers()
            return
        if msg["method"] == "initialize":
            version = msg.get("params", {}).get("protocolVersion", "2025-03-26")
            result = {"protocolVersion": version, "capabilities": {"tools": {}},
                      "serverInfo": {"name": "marker", "version": "1"}}
        elif msg["method"] == "tools/list":
            result = {"tools": []}
        else:
            result = {}
        body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// An MCP server over HTTP given in session/new is reached by the real engine, with its headers.
fn acp_mcp_http_server(engine: &str) {
    use std::io::BufRead;
    let r = Real::new();
    r.env.write_config(&format!("engine = \"{engine}\"\n"));
    let marker = r.env.root.path().join("mcp-http");
    let mut server = std::process::Command::new("python3");
    server.arg("-c").arg(MCP_HTTP_SERVER).env("MARKER", &marker);
    server.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut server = Guard(server.spawn().expect("python3 for the MCP server"));
    let mut port = String::new();
    std::io::BufReader::new(server.0.stdout.take().unwrap()).read_line(&mut port).unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", port.trim());
    let given = json!({"type": "http", "name": "marker", "url": url,
                       "headers": [{"name": "X-Token", "value": "secret"}]});
    let out = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s",
                   "params": {"cwd": r.env.work, "mcpServers": [given]}}),
            acp_prompt("p", "$s.sessionId", "with a server", true),
        ],
    );
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", out["results"]);
    let seen = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(seen.contains("initialize secret"), "{engine} did not reach the MCP server: {seen:?}");
}

#[test]
fn acp_mcp_http_server_reached_by_claude() {
    acp_mcp_http_server("claude");
}

#[test]
fn acp_mcp_http_server_reached_by_gemini() {
    acp_mcp_http_server("gemini");
}

/// `turns` one-shot turns of `cca search -r` through `engine` (about 2,800 tokens each: a long
/// question and a long answer); returns the answer requests as recorded.
fn long_turns(r: &Real, engine: &str, turns: usize) -> Vec<Value> {
    // Varied text: gemini stops on text that repeats itself ("Loop detected").
    let filler = |n: usize, what: &str, count: usize| -> String {
        (0..count)
            .map(|i| {
                format!(
                    "{what} {n} sentence {i} weighs item {} against {}. ",
                    i * 7919 % 1013,
                    i * 104_729 % 997
                )
            })
            .collect()
    };
    for n in 0..turns {
        r.api.set(Behavior { answer: Some(filler(n, "Answer", 110)), ..Behavior::default() });
        let question = filler(n, "Question", 105);
        let mut args = vec!["search", "-q", "-e", engine];
        if n > 0 {
            args.push("-r");
        }
        args.push(&question);
        r.run(&args).ok();
    }
    r.api.turns().into_iter().map(|t| t.body).collect()
}

/// Whether `later` repeats `earlier` as its prefix, block by block, as the API reads them: the
/// same system prompt and tools, and every earlier message unchanged at its place. For claude,
/// `cache_control` aside (claude moves it to the newest message), and a string content the same
/// as one text block of it (claude sends a message as either).
fn extends(earlier: &Value, later: &Value) -> bool {
    let list = |body: &Value| -> Vec<Value> {
        let key = if body["messages"].is_array() { "messages" } else { "contents" };
        let mut messages = body[key].as_array().cloned().unwrap_or_default();
        for m in &mut messages {
            if let Value::String(text) = &m["content"] {
                m["content"] = json!([{ "type": "text", "text": text }]);
            }
            for block in m["content"].as_array_mut().into_iter().flatten() {
                block.as_object_mut().map(|o| o.remove("cache_control"));
            }
        }
        messages
    };
    let (old, new) = (list(earlier), list(later));
    earlier["system"] == later["system"]
        && earlier["systemInstruction"] == later["systemInstruction"]
        && earlier["tools"] == later["tools"]
        && new.len() > old.len()
        && new[..old.len()] == old[..]
}

#[test]
fn gemini_follow_ups_extend_the_previous_request() {
    // The defaults.
    let r = Real::new();
    long_turns(&r, "gemini", 3);
    r.env.command().arg("clear").output().unwrap();
    r.run(&["search", "-q", "-r", "after the clear"]).ok();
    r.run(&["search", "-q", "-r", "and once more"]).ok();
    // A turn by another engine in the session: the next gemini request starts afresh (it holds
    // claude's exchange), and the one after it extends that one.
    r.run(&["search", "-q", "-r", "-e", "claude", "a word from claude"]).ok();
    r.run(&["search", "-q", "-r", "-e", "gemini", "gemini again"]).ok();
    r.run(&["search", "-q", "-r", "and gemini once more"]).ok();
    let later: Vec<Value> = r.api.turns().into_iter().skip(5).map(|t| t.body).collect();
    assert!(later[0]["messages"].is_array(), "claude answered the sixth turn");
    let text = serde_json::to_string(&later[1]["contents"]).unwrap();
    assert!(text.contains("a word from claude"), "{text}");
    assert!(extends(&later[1], &later[2]), "after claude's turn");
    assert_eq!(answers_of(&r).len(), 8);
    let bodies: Vec<Value> = r.api.turns().into_iter().take(5).map(|t| t.body).collect();
    assert_eq!(bodies.len(), 5);
    for (n, pair) in bodies.windows(2).enumerate() {
        let share = mock_api::cacheable_share(&pair[0], &pair[1]);
        if n == 2 {
            // The clear starts afresh: nothing from before it is sent.
            assert!(!extends(&pair[0], &pair[1]), "request {} sent what was cleared", n + 2);
            let text = serde_json::to_string(&pair[1]["contents"]).unwrap();
            assert!(!text.contains("Question 2"), "{text}");
        } else {
            assert!(extends(&pair[0], &pair[1]), "request {} changed the one before it", n + 2);
            assert!(share > 0.5, "request {}: {share:.2} cacheable", n + 2);
        }
    }
}

/// With `CLAUDE_CONFIG_DIR` claude keeps its session files there: cca learns its notes from the
/// turn's file there, and removes it.
#[test]
fn claude_s_own_folder_is_where_claude_config_dir_says() {
    let r = Real::new();
    let dir = r.env.root.path().join("claude-config");
    let run = |args: &[&str]| {
        let mut cmd = r.command();
        cmd.args(args).env("CLAUDE_CONFIG_DIR", &dir);
        run_command(cmd, None).ok();
    };
    run(&["search", "-q", "-e", "claude", "first"]);
    run(&["search", "-q", "-r", "second"]);
    let id = r.transcript().header.id;
    let notes = r.env.cca_home.join(format!("live/{id}.claude-notes.json"));
    assert!(notes.is_file(), "claude's notes are learned from its file");
    let mut left = Vec::new();
    let mut stack = vec![dir.join("projects")];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            match entry.path() {
                p if p.is_dir() => stack.push(p),
                p if p.extension().is_some_and(|e| e == "jsonl") => left.push(p),
                _ => {}
            }
        }
    }
    assert_eq!(left, Vec::<PathBuf>::new(), "claude's own copies are removed");
    assert_eq!(engine_session_files(&r), Vec::<String>::new());
}

/// The share of requests `from` on (counted from 1) that the cache could serve after each one's
/// predecessor, over the bytes of all of them.
fn cacheable_from(bodies: &[Value], from: usize) -> f64 {
    let (mut cached, mut total) = (0.0, 0.0);
    for pair in bodies.windows(2).skip(from - 2) {
        let size = serde_json::to_string(&pair[1]).unwrap().len() as f64;
        cached += mock_api::cacheable_share(&pair[0], &pair[1]) * size;
        total += size;
    }
    cached / total
}

#[test]
fn claude_follow_ups_extend_the_previous_request() {
    // The defaults.
    let r = Real::new();
    let bodies = long_turns(&r, "claude", 10);
    assert_eq!(bodies.len(), 10);
    for (n, pair) in bodies.windows(2).enumerate() {
        assert!(extends(&pair[0], &pair[1]), "request {} changed the one before it", n + 2);
    }
    let share = cacheable_from(&bodies, 3);
    let each: Vec<String> = bodies
        .windows(2)
        .map(|pair| format!("{:.3}", mock_api::cacheable_share(&pair[0], &pair[1])))
        .collect();
    assert!(share >= 0.85, "{share:.3} of requests 3 to 10 cacheable (2 to 10: {each:?})");
    // A fresh start (a clear; a turn by another engine) costs one request, then they extend again.
    r.env.command().arg("clear").output().unwrap();
    r.run(&["search", "-q", "-r", "after the clear"]).ok();
    r.run(&["search", "-q", "-r", "and once more"]).ok();
    r.run(&["search", "-q", "-r", "-e", "gemini", "a word from gemini"]).ok();
    r.run(&["search", "-q", "-r", "-e", "claude", "claude again"]).ok();
    r.run(&["search", "-q", "-r", "and claude once more"]).ok();
    let claude: Vec<Value> = r
        .api
        .turns()
        .into_iter()
        .filter(|t| t.path.contains("/v1/messages"))
        .map(|t| t.body)
        .collect();
    assert_eq!(claude.len(), 14);
    let text = serde_json::to_string(&claude[10]["messages"]).unwrap();
    assert!(!text.contains("Question 9"), "the clear was not honoured: {text}");
    assert!(extends(&claude[10], &claude[11]), "after the clear");
    assert!(extends(&claude[12], &claude[13]), "after gemini's turn");
    let gemini_turn = serde_json::to_string(&claude[12]["messages"]).unwrap();
    assert!(gemini_turn.contains("a word from gemini"), "{gemini_turn}");
    assert_eq!(answers_of(&r).len(), 15);
    assert_eq!(engine_session_files(&r), Vec::<String>::new(), "claude's own copies are removed");
}
