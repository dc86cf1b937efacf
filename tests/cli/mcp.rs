//! `cca mcp` driven by the official MCP TypeScript SDK's client (tests/mcp/client.mjs,
//! installed pinned by `make mcp-clients`): every tool, bad arguments, unknown tools and ids,
//! and shutdown; and, for what no well-behaved client sends (lines that are not JSON or not
//! UTF-8, a huge line, batches, unknown versions), raw JSON-RPC lines.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::common::{self, NOW, STAMP, TIMEOUT, TestEnv};
use crate::grep::{LATER_ID, two_sessions};

const THIRD: &str = "2026-11-23T08:00:00Z";
const THIRD_ID: &str = "20261123-080000";

fn clients() -> PathBuf {
    common::real_program("CCA_TEST_MCP_CLIENTS", "mcp-clients")
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.mjs")
}

fn isolate(cmd: &mut Command, env: &TestEnv) {
    cmd.env_clear()
        .env("HOME", &env.home)
        .env("CCA_HOME", &env.cca_home)
        .env("PATH", env.path_var())
        .env("CCA_NOW", NOW)
        .env("CCA_TEST_MCP_CLIENTS", clients())
        .current_dir(&env.work);
}

/// Runs a plan of the SDK client against `cca mcp` (see tests/mcp/client.mjs).
fn sdk(env: &TestEnv, steps: &[Value]) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg(script()).arg(common::cca_exe()).arg(Value::Array(steps.to_vec()).to_string());
    isolate(&mut cmd, env);
    let run = common::run_command(cmd, None);
    assert_eq!(run.code, Some(0), "the client failed\n{run}");
    let out: Value = serde_json::from_str(run.stdout.trim()).expect("the client's JSON");
    assert_eq!(out["exit"], 0, "cca mcp exits 0 by itself when stdin closes\n{run}");
    assert_eq!(out["signal"], Value::Null, "{run}");
    out
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({"call": tool, "arguments": arguments})
}

/// A tool result's text, and whether it is an error.
fn text(result: &Value) -> (String, bool) {
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{result}"));
    (text.to_string(), result["isError"] == true)
}

/// Three sessions: `cca grep`'s two (one at NOW about file locking, two exchanges, here named
/// `rust-locks`; one a day later about tokio), and a third, later still, in another folder.
fn three_sessions(env: &TestEnv) -> PathBuf {
    two_sessions(env);
    env.run(&["name", STAMP, "rust-locks"]).ok();
    let other = env.root.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut cmd = env.command();
    cmd.args(["search", "-q", "what causes deadlocks?"])
        .env("CCA_NOW", THIRD)
        .env("FAKE_SCRIPT", "say Taking two locks in different orders.")
        .current_dir(&other);
    common::run_command(cmd, None).ok();
    other
}

fn transcripts(env: &TestEnv) -> Vec<(String, Vec<u8>)> {
    env.session_files()
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(env.sessions_dir().join(&f)).unwrap();
            (f, bytes)
        })
        .collect()
}

#[test]
fn every_tool_through_the_sdk_and_no_transcript_changes() {
    let env = TestEnv::new();
    let other = three_sessions(&env);
    let before = transcripts(&env);
    let out = sdk(
        &env,
        &[
            call("search", json!({"query": "WINDOWS lock"})),
            call("search", json!({"query": "File::lock|tokio", "regex": true})),
            call("search", json!({"query": "lock", "engine": "claude", "cwd": other})),
            call("search", json!({"query": "lock", "since": "2026-11-22"})),
            call("search", json!({"query": "lock", "limit": 1})),
            call("read", json!({"id": "rust-locks", "from": 2, "to": 2})),
            call("read", json!({"id": THIRD_ID})),
            call("list", json!({})),
            call("list", json!({"cwd": "here"})),
            call("search", json!({"query": "no such words anywhere"})),
            call("search", json!({"query": "what was it and when"})),
        ],
    );
    assert_eq!(out["server"]["name"], "cca");
    // The SDK asks for its newest version, which cca speaks.
    assert_eq!(out["protocolVersion"], "2025-11-25");
    assert!(out["instructions"].as_str().unwrap().contains("search"));
    let names: Vec<&str> =
        out["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search", "read", "list"]);
    for tool in out["tools"].as_array().unwrap() {
        assert!(tool["description"].as_str().unwrap().len() > 100, "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert_eq!(tool["annotations"]["readOnlyHint"], true);
    }
    let r = |i: usize| text(&out["results"][i]);

    // Ranked: the exchange with both words (any case, by their stem) first, with its score.
    let (found, error) = r(0);
    assert!(!error, "{found}");
    assert!(found.contains(&format!("Conversation {STAMP} · name rust-locks")), "{found}");
    assert!(found.contains("\n#1 · score ") && found.contains("best first"), "{found}");
    assert!(found.contains("Exchange 2 (") && found.contains("> LockFileEx, mandatory there."));
    assert!(found.contains("Question:\nand on Windows?\nAnswer (claude):\nLockFileEx"), "{found}");
    assert!(found.contains(&format!("read id={STAMP} from=2 to=2")), "{found}");
    let second = found.find("Exchange 2 (").unwrap();
    assert!(found.find("Exchange 1 (").is_none_or(|first| second < first), "{found}");

    // A pattern: newest first, one exchange from each session.
    let (found, _) = r(1);
    let tokio = found.find(LATER_ID).expect("the tokio session");
    let locks = found.find(STAMP).expect("the locking session");
    assert!(tokio < locks, "newest first: {found}");
    assert!(found.contains("> Rust 1.89 stabilised File::lock."), "{found}");

    // Filters: folder and engine; since.
    let (found, _) = r(2);
    assert!(found.contains(THIRD_ID), "{found}");
    assert!(!found.contains(LATER_ID) && !found.contains(STAMP), "{found}");
    let (found, _) = r(3);
    assert!(found.contains(LATER_ID) && !found.contains(STAMP), "{found}");
    // A limit, and a note of what was left out.
    let (found, _) = r(4);
    assert_eq!(found.matches("\nExchange ").count(), 1, "{found}");
    assert!(found.contains("More matching exchanges than the limit of 1"), "{found}");

    // Read by name, one exchange; read by id, all of it.
    let (read, error) = r(5);
    assert!(!error, "{read}");
    assert!(read.contains("2 exchanges in all"), "{read}");
    assert!(read.contains("── 2. Question (") && read.contains("\nand on Windows?\n"), "{read}");
    assert!(read.contains("── 2. Answer (claude") && read.contains("LockFileEx, mandatory there."));
    assert!(!read.contains("how does file locking work?\n──"), "only exchange 2: {read}");
    let (read, _) = r(6);
    assert!(read.contains("what causes deadlocks?") && read.contains("different orders"));
    assert!(read.contains(&format!("folder {}", other.display())), "{read}");

    // Lists: newest activity first; `here` is the folder cca mcp runs in.
    let (list, _) = r(7);
    let (first, second) = (list.find(LATER_ID).unwrap(), list.find(STAMP).unwrap());
    assert!(first < second, "{list}");
    assert!(list.contains("name rust-locks") && list.contains("2 exchanges"), "{list}");
    let (list, _) = r(8);
    assert!(list.contains(STAMP) && list.contains(LATER_ID), "{list}");
    assert!(!list.contains(THIRD_ID), "{list}");

    let (nothing, error) = r(9);
    assert!(!error && nothing.starts_with("Nothing found"), "{nothing}");
    assert!(!nothing.contains("too common"), "{nothing}");
    // A question of common words alone can find nothing, and says why.
    let (common, error) = r(10);
    assert!(!error && common.contains("every word of the question is too common"), "{common}");

    assert_eq!(transcripts(&env), before, "cca mcp changes no transcript");
}

#[test]
fn a_question_in_plain_words_gets_the_right_exchange_first() {
    let env = TestEnv::new();
    three_sessions(&env);
    let out = sdk(
        &env,
        &[call("search", json!({"query": "Which kind of file locking is mandatory on Windows?"}))],
    );
    let (found, error) = text(&out["results"][0]);
    assert!(!error, "{found}");
    let first = found.split("\n#2 ").next().unwrap();
    assert!(first.contains("\n#1 · score "), "{found}");
    assert!(first.contains(&format!("Conversation {STAMP}")), "{found}");
    assert!(first.contains("Exchange 2 (") && first.contains("LockFileEx"), "{found}");
    // A folder given with a trailing slash, `..` or through a link: the same for the ranked
    // search as for the pattern search and the list.
    let link = env.root.path().join("link-to-work");
    std::os::unix::fs::symlink(&env.work, &link).unwrap();
    let work = env.work.display().to_string();
    for cwd in [
        format!("{work}/"),
        format!("{work}/../{}/", env.work.file_name().unwrap().to_string_lossy()),
        link.display().to_string(),
    ] {
        let out = sdk(
            &env,
            &[
                call("search", json!({"query": "file locking on Windows", "cwd": cwd})),
                call("search", json!({"query": "LockFileEx", "regex": true, "cwd": cwd})),
                call("list", json!({"cwd": cwd})),
            ],
        );
        for result in out["results"].as_array().unwrap() {
            let (found, error) = text(result);
            assert!(!error && found.contains(STAMP), "{cwd}: {found}");
        }
    }
    // A fork repeats the exchange word for word: one result, which names the other session.
    env.run(&["fork", STAMP]).ok();
    let out = sdk(&env, &[call("search", json!({"query": "mandatory locking on Windows"}))]);
    let (found, error) = text(&out["results"][0]);
    assert!(!error && found.contains("is also in 20261121-101500]"), "{found}");
    assert!(!found.contains("Conversation 20261121-101500 ·"), "{found}");

    // A session that cannot be read is not searched, and the agent is told so.
    let path = env.session_path(LATER_ID);
    let whole = std::fs::read(&path).unwrap();
    std::fs::write(&path, [b"a line put before its header\n".as_slice(), &whole].concat()).unwrap();
    // Every search says so, the second of one server's too.
    let question = json!({"query": "mandatory locking on Windows"});
    let out = sdk(&env, &[call("search", question.clone()), call("search", question)]);
    let said = format!("[Note: recall: session {LATER_ID} cannot be read");
    for result in [&out["results"][0], &out["results"][1]] {
        let (found, error) = text(result);
        assert!(!error && found.starts_with(&said) && found.contains(STAMP), "{found}");
    }
}

#[test]
fn bad_arguments_unknown_tools_and_ids_get_answers_a_model_can_act_on() {
    let env = TestEnv::new();
    three_sessions(&env);
    let out = sdk(
        &env,
        &[
            call("no_such_tool", json!({})),
            call("search", json!({})),
            call("search", json!({"query": "   "})),
            call("search", json!({"query": "(", "regex": true})),
            call("search", json!({"query": "lock", "limit": 1000})),
            call("search", json!({"query": "lock", "colour": "red"})),
            call("search", json!({"query": "x".repeat(5000)})),
            call("read", json!({"id": "19990101-000000"})),
            call("read", json!({"id": "../../etc/passwd"})),
            call("read", json!({"id": STAMP, "from": "two"})),
            call("read", json!({"id": STAMP, "from": 3, "to": 2})),
            call("list", json!({"since": "tomorrow"})),
            call("list", json!({"cwd": "relative/path"})),
            call("search", json!({"query": "lock", "since": "2026-11-22", "until": "2026-11-21"})),
            call("search", json!({"query": "lock", "regex": true, "since": "1d", "until": "3d"})),
            call("search", json!({"query": 5})),
            call("search", json!({"query": "lock", "limit": "ten"})),
            call("list", json!({"limit": 0})),
            call("search", json!({"query": "lock", "limit": null, "regex": null, "engine": ""})),
            // Still serving.
            call("list", json!({})),
            call("list", json!({"engine": "Claude"})),
            // A control character would be searched for and not shown back.
            call("search", json!({"query": "ret\u{0}ry", "regex": true})),
            call("list", json!({"cwd": "/w\u{1b}[2J"})),
            // A whole number written with a fraction is the integer it is; 2.5 is none.
            call("list", json!({"limit": 1.0})),
            call("list", json!({"limit": 2.5})),
        ],
    );
    let results = out["results"].as_array().unwrap();
    assert_eq!(results[0]["error"]["code"], -32602, "{}", results[0]);
    assert!(results[0]["error"]["message"].as_str().unwrap().contains("search, read and list"));
    let expected = [
        (1, "`query` is missing; it takes `query`, `regex`"),
        (2, "`query` is empty"),
        (3, "cannot search for `(`"),
        (4, "`limit` is at most 30"),
        (5, "`colour` is not one of its arguments; it takes `query`"),
        (6, "longer than 1000 characters"),
        (7, "no session `19990101-000000`"),
        (8, "is not a session id or name"),
        (9, "`from` must be an integer, not a string"),
        (10, "before `from`"),
        (11, "not a date cca understands"),
        (12, "not an absolute path"),
        (13, "since `2026-11-22` is later than until `2026-11-21`"),
        (14, "since `1d` is later than until `3d`"),
        (15, "`query` must be a string, not an integer"),
        (16, "`limit` must be an integer, not a string"),
        (17, "`limit` must be at least 1, not 0"),
    ];
    for (i, says) in expected {
        let (message, error) = text(&results[i]);
        assert!(error, "result {i} is an error: {message}");
        assert!(message.contains(says), "result {i} says {says:?}: {message}");
    }
    // Nulls are arguments not given, as models send them.
    let (found, error) = text(&results[18]);
    assert!(!error && found.contains(STAMP), "{found}");
    let (list, error) = text(&results[19]);
    assert!(!error && list.contains(STAMP), "{list}");
    let (listed, _) = text(&results[20]);
    assert!(listed.contains("no session kept was held with the engine `Claude`"), "{listed}");
    for (i, says) in [
        (21, "search: `query` holds a control character (U+0000)"),
        (22, "list: `cwd` holds a control character (U+001B)"),
    ] {
        let (message, error) = text(&results[i]);
        assert!(error && message.contains(says), "result {i} says {says:?}: {message}");
    }
    let (one, error) = text(&results[23]);
    assert!(!error && one.matches(" exchange").count() == 1, "{one}");
    let (message, error) = text(&results[24]);
    assert!(error && message.contains("`limit` must be an integer"), "{message}");
}

/// A question whose answer failed after the last answered exchange: search names it by the
/// next number, and `read` of that number gives it.
#[test]
fn every_exchange_search_names_can_be_read() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first question"]).ok();
    let script = [("FAKE_SCRIPT", "say partial baboonword;exit 1")];
    env.run_with(&["search", "-q", "-r", "second baboonword"], None, &script).code(1);
    let out = sdk(
        &env,
        &[
            call("search", json!({"query": "baboonword"})),
            call("read", json!({"id": STAMP, "from": 2, "to": 2})),
        ],
    );
    let results = out["results"].as_array().unwrap();
    let (found, _) = text(&results[0]);
    assert!(found.contains(&format!("read id={STAMP} from=2 to=2")), "{found}");
    let (read, error) = text(&results[1]);
    assert!(!error && read.contains("partial baboonword"), "{read}");
    assert!(!read.contains("There is no exchange 2"), "{read}");
    // Answered next, that exchange shares the number 2: each search shows the one it found,
    // ranked or by pattern, not the other.
    env.run(&["search", "-q", "-r", "third cherryword"]).ok();
    let out = sdk(
        &env,
        &[
            call("search", json!({"query": "baboonword"})),
            call("search", json!({"query": "baboonword", "regex": true})),
            call("search", json!({"query": "cherryword"})),
        ],
    );
    for (result, shown, not) in [
        (0, "baboonword", "cherryword"),
        (1, "baboonword", "cherryword"),
        (2, "cherryword", "baboonword"),
    ] {
        let (found, _) = text(&out["results"][result]);
        let question = found.split("Question:\n").nth(1).unwrap_or_default();
        assert!(
            question.starts_with(&format!("second {shown}"))
                || question.starts_with(&format!("third {shown}")),
            "{found}"
        );
        assert!(!found.contains(not), "{found}");
    }
}

#[test]
fn a_conversation_that_cannot_be_read_is_said_by_list() {
    let env = TestEnv::new();
    three_sessions(&env);
    let path = env.session_path(STAMP);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"caf\xe9\n");
    std::fs::write(&path, bytes).unwrap();
    let out = sdk(&env, &[call("list", json!({})), call("list", json!({"engine": "gemini"}))]);
    let results = out["results"].as_array().unwrap();
    for result in results {
        let (list, error) = text(result);
        assert!(!error && list.contains("1 conversation could not be read"), "{list}");
        assert!(!list.contains(STAMP), "{list}");
    }
}

#[test]
fn results_carry_no_terminal_escapes() {
    let env = TestEnv::new();
    three_sessions(&env);
    let path = env.session_path(STAMP);
    let hostile = std::fs::read_to_string(&path).unwrap().replace(
        "LockFileEx, mandatory",
        "LockFileEx\u{1b}]52;c;ZXZpbA==\u{7}, \u{1b}[2J\u{9b}31mmandatory\u{1b}]0;owned\u{1b}\\",
    );
    std::fs::write(&path, hostile).unwrap();
    let out = sdk(
        &env,
        &[
            call("search", json!({"query": "LockFileEx"})),
            call("read", json!({"id": STAMP})),
            call("search", json!({"query": "\u{1b}]52", "regex": true})),
        ],
    );
    for result in out["results"].as_array().unwrap() {
        let (text, _) = text(result);
        assert!(!text.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{text:?}");
        assert!(!text.contains("ZXZpbA") && !text.contains("owned"), "{text:?}");
    }
    let (found, _) = text(&out["results"][0]);
    assert!(found.contains("LockFileEx, mandatory there."), "{found}");
}

#[test]
fn a_long_conversation_is_read_in_parts_each_bounded() {
    let env = TestEnv::new();
    let questions: Vec<String> = (1..=12).map(|n| format!("question number {n}")).collect();
    let refs: Vec<&str> = questions.iter().map(String::as_str).collect();
    env.converse(&refs, &[("FAKE_SCRIPT", "echo-pad 4000")]);
    let out = sdk(
        &env,
        &[
            call("read", json!({"id": STAMP})),
            call("read", json!({"id": STAMP, "from": 5})),
            call("search", json!({"query": "question number", "limit": 30})),
        ],
    );
    let (first, _) = text(&out["results"][0]);
    assert!(first.chars().count() <= 20_000, "{}", first.len());
    assert!(first.contains("── 1. Question") && first.contains("12 exchanges in all"));
    let next = first
        .split("read again with from=")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .unwrap_or_else(|| panic!("a note of what is left: {first}"));
    assert!(next.parse::<u64>().unwrap() > 1);
    assert!(!first.contains(&format!("── {next}. Question")), "{first}");
    let (second, _) = text(&out["results"][1]);
    assert!(second.contains("── 5. Question") && !second.contains("── 4. Question"));
    let (search, _) = text(&out["results"][2]);
    assert!(search.chars().count() <= 20_000, "{}", search.len());
    assert!(search.contains("more matching exchanges not shown"), "{search}");

    // One answer longer than an answer may be: cut, and said so.
    let env = TestEnv::new();
    env.converse(&["one long answer"], &[("FAKE_SCRIPT", "echo-pad 200000")]);
    let out = sdk(&env, &[call("read", json!({"id": STAMP}))]);
    let (read, error) = text(&out["results"][0]);
    assert!(!error && read.chars().count() <= 20_000, "{}", read.len());
    assert!(read.contains("[cut: exchange 1 is longer than one answer may be"), "{read}");
    // ... and read on, piece by piece, to its end: every character of it, none twice.
    let transcript = std::fs::read_to_string(env.session_path(STAMP)).unwrap();
    let whole = transcript.lines().find(|l| l.starts_with("ECHO: one long answer")).unwrap();
    assert!(whole.len() >= 200_000);
    let mut shown = piece(&read);
    let mut reads = 1;
    while let Some(offset) = read_on(&shown.1) {
        let out = sdk(&env, &[call("read", json!({"id": STAMP, "from": 1, "offset": offset}))]);
        let (read, error) = text(&out["results"][0]);
        assert!(!error && read.chars().count() <= 20_000, "{}", read.len());
        assert!(read.contains(&format!("[Exchange 1, from character {offset}:]")), "{read}");
        let next = piece(&read);
        shown = (shown.0 + &next.0, next.1);
        reads += 1;
        assert!(reads < 20, "reading on gets further each time");
    }
    assert!(reads >= 10, "{reads}");
    assert!(shown.0.contains(whole), "the pieces join into the whole answer");
    // An offset past its end says so.
    let out = sdk(&env, &[call("read", json!({"id": STAMP, "offset": 10_000_000}))]);
    let (read, error) = text(&out["results"][0]);
    assert!(!error && read.contains("there is nothing from offset 10000000"), "{read}");
}

/// What a piece of one long exchange shows, without the lines `read` adds around it, and the
/// note after it.
fn piece(read: &str) -> (String, String) {
    let body = read.split_once(" in all.\n").unwrap().1;
    let body = match body.split_once(":]\n") {
        Some((said, rest)) if said.starts_with("\n[Exchange 1, from character") => rest,
        _ => body,
    };
    match body.rsplit_once("\n[cut: ") {
        Some((text, note)) => (text.to_string(), note.to_string()),
        None => (body.to_string(), String::new()),
    }
}

/// The offset a cut piece says to read on from.
fn read_on(note: &str) -> Option<u64> {
    note.split("offset=").nth(1)?.split('.').next()?.parse().ok()
}

/// `cca mcp` on raw lines, for what no well-behaved client sends.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Raw {
    fn start(env: &TestEnv) -> Raw {
        let mut cmd = Command::new(common::cca_exe());
        cmd.arg("mcp");
        isolate(&mut cmd, env);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().expect("cca mcp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        Raw { child, stdin, lines }
    }

    fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&mut self) -> Value {
        let line = self.lines.recv_timeout(TIMEOUT).expect("a response in time");
        let message: Value = serde_json::from_str(&line).expect("stdout carries JSON only");
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        message
    }

    fn call(&mut self, id: impl Into<Value>, method: &str, params: Value) -> Value {
        let id = id.into();
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(request.to_string().as_bytes());
        let response = self.next();
        assert_eq!(response["id"], id, "{response}");
        response
    }

    fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        common::wait_with_timeout(self.child, TIMEOUT).status.code()
    }
}

#[test]
fn malformed_and_huge_lines_are_errors_and_the_server_keeps_serving() {
    let env = TestEnv::new();
    three_sessions(&env);
    let mut raw = Raw::start(&env);
    let init = |version: &str| {
        json!({"protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}})
    };
    let known = raw.call(1, "initialize", init("2025-03-26"));
    assert_eq!(known["result"]["protocolVersion"], "2025-03-26", "{known}");
    let unknown = raw.call(2, "initialize", init("1999-01-01"));
    assert_eq!(unknown["result"]["protocolVersion"], "2025-06-18", "{unknown}");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    raw.send(b"this is not json {");
    assert_eq!(raw.next()["error"]["code"], -32700);
    // A line that cannot be read whole, whose id can: the error goes to that id, for the
    // client waiting on it.
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"x\":\"\xff\xfe\"}");
    let refused = raw.next();
    assert_eq!((&refused["error"]["code"], &refused["id"]), (&json!(-32700), &json!(3)));
    raw.send(br#"{"jsonrpc":"2.0","id":"s","method":"ping","params":{"x":"\ud800"}}"#);
    let refused = raw.next();
    assert_eq!((&refused["error"]["code"], &refused["id"]), (&json!(-32700), &json!("s")));
    // A response (to a request cca never sends) is never answered: the next reply is the
    // next request's.
    raw.send(br#"{"jsonrpc":"2.0","id":13,"result":{}}"#);
    raw.send(br#"{"jsonrpc":"2.0","id":14,"error":{"code":1,"message":"x"}}"#);
    assert_eq!(raw.call(15, "ping", json!({}))["result"], json!({}));
    raw.send(br#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#);
    assert_eq!(raw.next()["error"]["code"], -32600);
    // MCP ids are strings or integers: any other is refused, and not echoed back.
    for id in [r#"{"a":1}"#, "true", "null", "[1]", "1.5"] {
        raw.send(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).as_bytes());
        let refused = raw.next();
        assert_eq!(refused["error"]["code"], -32600, "{id}: {refused}");
        assert_eq!(refused["id"], Value::Null, "{id}: {refused}");
    }
    assert_eq!(raw.call("s-1", "ping", json!({}))["result"], json!({}));
    // 8 MB of arguments: refused without being read into memory, and only a short answer.
    let huge = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "x".repeat(8 << 20)}}});
    raw.send(huge.to_string().as_bytes());
    let refused = raw.next();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused.to_string().len() < 1000);
    assert_eq!(raw.call(6, "no/such_method", json!({}))["error"]["code"], -32601);
    assert_eq!(raw.call(7, "tools/call", json!({"arguments": {}}))["error"]["code"], -32602);
    assert_eq!(raw.call(8, "ping", json!({}))["result"], json!({}));
    let found =
        raw.call(9, "tools/call", json!({"name": "search", "arguments": {"query": "tokio"}}));
    let text = found["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(LATER_ID), "{found}");
    assert_eq!(raw.finish(), Some(0), "closing stdin ends cca mcp with 0");
}

#[test]
fn a_turn_running_in_a_terminal_does_not_hold_up_search_or_read() {
    let env = TestEnv::new();
    three_sessions(&env);
    let go = env.root.path().join("go");
    let calls = env.calls().len();
    let mut cmd = env.command();
    cmd.args(["search", "-q", "-s", STAMP, "and what about NFS?"])
        .env("FAKE_SCRIPT", format!("await {};echo", go.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let terminal = common::Guard(cmd.spawn().unwrap());
    let started = env.log.join(format!("call-{}.json", calls + 1));
    assert!(common::wait_until(TIMEOUT, || started.exists()), "the terminal's turn started");
    // The session's lock is held by the running turn; the tools answer all the same.
    let out = sdk(
        &env,
        &[call("search", json!({"query": "NFS"})), call("read", json!({"id": "rust-locks"}))],
    );
    std::fs::write(&go, "").unwrap();
    assert!(terminal.finish().status.success());
    let (found, _) = text(&out["results"][0]);
    assert!(found.contains("Exchange 3") && found.contains("(no answer recorded)"), "{found}");
    let (read, _) = text(&out["results"][1]);
    assert!(read.contains("── 3. Question") && read.contains("and what about NFS?"), "{read}");
}

/// An answer added by hand with no question before it is no exchange, as the live context
/// reads the file: `cca show`, `read` and `fork` number the exchanges around it alike, and the
/// next turn's heading agrees with them.
#[test]
fn an_answer_with_no_question_is_no_exchange_wherever_exchanges_are_counted() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "the first question"]).ok();
    let path = env.session_path(STAMP);
    let mut file = std::fs::read_to_string(&path).unwrap();
    file.push_str(
        "\n<!-- cca:assistant {\"engine\":\"claude\"} -->\n## 2. claude\n\nan orphan answer\n<!-- cca:end -->\n",
    );
    std::fs::write(&path, &file).unwrap();
    env.run(&["search", "-q", "-r", "the second question"]).ok();
    assert!(std::fs::read_to_string(&path).unwrap().contains("## 2. You"));

    let shown = env.run(&["show", STAMP]).ok().stdout.clone();
    assert!(shown.contains("── 2. You ──") && shown.contains("── 2. claude"), "{shown}");
    assert!(!shown.contains("── 3."), "{shown}");
    assert!(shown.contains("an answer with no question before it"), "{shown}");

    let out = sdk(
        &env,
        &[
            call("read", json!({"id": STAMP})),
            call("search", json!({"query": "orphan", "regex": true})),
        ],
    );
    let (read, error) = text(&out["results"][0]);
    assert!(!error && read.contains("2 exchanges"), "{read}");
    assert!(!read.contains("an orphan answer"), "{read}");
    assert!(read.contains("── 2. Question") && read.contains("the second question"), "{read}");
    // Found by a pattern, it points at no exchange (there is none to read).
    let (found, _) = text(&out["results"][1]);
    assert!(!found.contains("Exchange 2"), "{found}");
    // grep finds it where it is, and says it is no exchange.
    let grep = env.run(&["grep", "orphan", STAMP]);
    assert!(grep.ok().stdout.contains("(no question: not an exchange)"), "{grep}");

    env.run(&["fork", STAMP, "--at", "2"]).ok();
    // The fork holds both exchanges (and the file's stray record, as the file had it).
    let forked = env.latest();
    assert!(forked.contains("\"turn\":2") && forked.contains("the second question"), "{forked}");
    assert!(forked.contains("ECHO: the second question"), "{forked}");
}

/// A server lives on between searches, and is told by the kernel which sessions changed (not
/// stat'ing each): every kind of change is in its next search all the same.
#[test]
fn a_running_server_finds_every_change_to_the_store_in_its_next_search() {
    let env = TestEnv::new();
    three_sessions(&env);
    let mut raw = Raw::start(&env);
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}});
    raw.call(0, "initialize", init);
    let mut id = 0;
    let mut search = |query: &str| {
        id += 1;
        let found =
            raw.call(id, "tools/call", json!({"name": "search", "arguments": {"query": query}}));
        found["result"]["content"][0]["text"].as_str().unwrap().to_string()
    };
    assert!(search("zebrafish").starts_with("Nothing found"));

    // A hand edit in place (as an editor that writes the file over does).
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all(text.replace("LockFileEx", "zebrafish").as_bytes()).unwrap();
    drop(file);
    assert!(search("zebrafish").contains(STAMP));

    // A new exchange, by a turn in a terminal.
    env.run_with(
        &["search", "-q", "-s", LATER_ID, "and macOS?"],
        None,
        &[("FAKE_SCRIPT", "say flock, with a quokka.")],
    )
    .ok();
    assert!(search("quokka").contains(LATER_ID));

    // A save through a new file renamed over the old (as most editors save).
    let later = env.session_path(LATER_ID);
    let text = std::fs::read_to_string(&later).unwrap();
    let aside = env.sessions_dir().join(".saved");
    std::fs::write(&aside, text.replace("quokka", "narwhal")).unwrap();
    std::fs::rename(&aside, &later).unwrap();
    let found = search("narwhal");
    assert!(found.contains(LATER_ID), "{found}");
    assert!(search("quokka").starts_with("Nothing found"));

    // A session file that is a link: a change to the file it leads to.
    let elsewhere = env.root.path().join("kept-elsewhere.md");
    std::fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    assert!(search("zebrafish").contains(STAMP));
    let text = std::fs::read_to_string(&elsewhere).unwrap();
    std::fs::write(&elsewhere, text.replace("zebrafish", "axolotl")).unwrap();
    assert!(search("axolotl").contains(STAMP));

    // rm.
    env.run(&["rm", LATER_ID]).ok();
    assert!(search("narwhal").starts_with("Nothing found"));
    assert_eq!(raw.finish(), Some(0));
}
