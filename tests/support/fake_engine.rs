//! A fake engine for cca's tests and benchmarks: a small program driven by a script.
//!
//! Linked or copied as `claude` it speaks claude's stream-json, as `gemini` gemini's stream-json,
//! under any other name plain text. The script comes from `FAKE_SCRIPT_<N>` (for the N-th call)
//! or `FAKE_SCRIPT`, steps separated by `;` (default: `echo`); `FAKE_INIT_AWAIT=PATH` makes a
//! claude asked to `initialize` (as a standby's engine is) wait for PATH before it answers:
//!
//! ```text
//! echo              answer "ECHO: " + the question (the last <user_query>, or all of stdin);
//!                   asked to summarise (cca's compaction prompt), answer "SUMMARY[...]" instead,
//!                   naming the turns it saw and any earlier summary it folds in
//! echo-pad N        like echo, with the answer padded to N bytes
//! no-summary        when asked to summarise, fail (stderr "summariser down", exit 1)
//! say TEXT          answer TEXT (`\n` is a newline)
//! bytes N           answer N bytes of text, in lines
//! raw TEXT          write TEXT to stdout as is, outside any format
//! rawbytes HEX      write these bytes to stdout as is
//! err TEXT          write TEXT to stderr
//! sleep MS          wait
//! note-term PATH    ignore SIGTERM, and write PATH when one arrives
//! await PATH        wait until PATH exists (a test says when to go on; gives up after 60 s, exit 3)
//! fail TEXT         fail the way the engine does (claude: an is_error result; others: stderr), exit 1
//! tool NAME ARG     claude/gemini: report a tool call (ARG is its query) and its result
//! refused NAME ARG  claude/gemini: report a tool call the engine refused
//! exit N            stop here with this status (after finishing the format's last lines if 0)
//! hang              sleep forever
//! tty               ask for a password on /dev/tty and read the reply, as ssh does (exit 4 if
//!                   there is no terminal, 5 if the read fails)
//! ignore-term       ignore SIGTERM from now on
//! pid FILE          write this process's pid to FILE
//! grandchild FILE   start a child that ignores SIGTERM and hangs, holding stdout; its pid goes to FILE
//! detach FILE       start a helper outside the engine's process group (as `setsid` would) that
//!                   hangs holding stdout and stderr; its pid is added to FILE as a line
//! nostdin           do not read stdin (by default it is read whole before the first step)
//! drain             read stdin to its end in small pieces, keeping none of it (implies nostdin)
//! eof-stamp FILE    write the wall-clock time (ns) to FILE: after `drain`, when stdin ended
//! stamps N MS       answer N lines `T<ns>`, each stamped with the time it is written, MS apart
//! usage JSON        claude: report these figures in the next `result` line instead of 12 tokens
//!                   in, 34 out, $0.0015 an answer (JSON: input_tokens, output_tokens, total_cost_usd)
//! take [N]          claude with `--input-format stream-json`: wait for the next N user lines
//!                   (default 1) and take them inside this answer, as one message (as claude
//!                   does after a tool call with the lines that waited)
//! ```
//!
//! As `claude` with `--input-format stream-json` it reads user lines as the real one does: the
//! first is the prompt (its text is "stdin" above); with `--replay-user-messages` each line is
//! echoed when taken; after the script's answer, each further line gets an answer of its own,
//! `ECHO: ` + its text, with its own `result`, until stdin ends.
//!
//! As `gemini` with `--acp` and the default script, it is an ACP agent: it opens a session and
//! answers each prompt `ECHO: ` + its question, until stdin ends.
//!
//! With `FAKE_LOG_DIR` set, each call writes `call-N.json` there: argv, stdin, and the
//! environment variables whose names start with `GEMINI_`, `CLAUDE_` or `CCA_`.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let name = Path::new(&argv[0]).file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
    let format = match name.as_str() {
        "claude" => Format::Claude,
        "gemini" => Format::Gemini,
        "codex" => Format::Codex,
        _ => Format::Text,
    };
    let (call, log_dir) = match std::env::var_os("FAKE_LOG_DIR") {
        Some(dir) => (claim_call_number(Path::new(&dir)), Some(dir)),
        None => (1, None),
    };
    let script = std::env::var(format!("FAKE_SCRIPT_{call}"))
        .or_else(|_| std::env::var("FAKE_SCRIPT"))
        .unwrap_or_else(|_| "echo".to_string());
    let steps: Vec<&str> = script.split(';').map(str::trim).filter(|s| !s.is_empty()).collect();

    let streaming = format == Format::Claude
        && argv.windows(2).any(|w| w[0] == "--input-format" && w[1] == "stream-json");
    let replay = argv.iter().any(|a| a == "--replay-user-messages");
    // The default script as `gemini --acp`: an ACP agent (see `acp_agent`).
    let acp = format == Format::Gemini && argv.iter().any(|a| a == "--acp") && script == "echo";
    let mut lines = std::io::BufReader::new(std::io::stdin());
    let mut stdin = Vec::new();
    if streaming {
        stdin = user_line(&mut lines).unwrap_or_default().into_bytes();
    } else if acp {
    } else if !steps.contains(&"nostdin") && !steps.contains(&"drain") {
        std::io::stdin().read_to_end(&mut stdin).expect("read stdin");
    }
    let stdin = String::from_utf8_lossy(&stdin).into_owned();
    let mut log = Log { path: None, record: serde_json::Value::Null };
    if let Some(dir) = log_dir {
        // vars_os: CCA_HOME may be any bytes.
        let env: serde_json::Map<String, serde_json::Value> = std::env::vars_os()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
            .filter(|(k, _)| {
                k.starts_with("GEMINI_") || k.starts_with("CLAUDE_") || k.starts_with("CCA_")
            })
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        // Files named in arguments (system prompt, history) are gone after the call: keep them.
        let mut named: Vec<String> =
            argv[1..].iter().filter(|a| a.starts_with('/')).cloned().collect();
        named.extend(std::env::var("GEMINI_SYSTEM_MD").ok());
        let files: serde_json::Map<String, serde_json::Value> = named
            .into_iter()
            .filter(|a| Path::new(a).is_file())
            .map(|a| {
                let text = std::fs::read_to_string(&a).unwrap_or_default();
                (a, serde_json::Value::String(text))
            })
            .collect();
        let record = serde_json::json!({ "argv": argv, "stdin": stdin, "env": env, "files": files, "steers": [] });
        log = Log { path: Some(Path::new(&dir).join(format!("call-{call}.json"))), record };
        log.write();
    }

    if acp {
        return acp_agent(&mut lines);
    }
    let mut out =
        Out { format, in_message: false, tools: 0, text: String::new(), answers: 0, usage: None };
    out.start();
    if replay {
        out.replay(&stdin);
    }
    for step in steps {
        let (word, arg) = step.split_once(' ').unwrap_or((step, ""));
        let arg_text = arg.replace("\\n", "\n");
        match word {
            "echo" | "echo-pad" => {
                let mut answer = match summary_of(&stdin) {
                    Some(summary) => summary,
                    None => format!("ECHO: {}", last_query(&stdin)),
                };
                if word == "echo-pad" {
                    // A summary is about as long as a few answers would be... when they are long.
                    let size: usize = arg.parse().expect("echo-pad N");
                    let size = if answer.starts_with("SUMMARY") {
                        // ...and condensed: it never grows past an answer's length.
                        let mut cut = size.min(answer.len());
                        while !answer.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        answer.truncate(cut);
                        (size / 2).max(answer.len())
                    } else {
                        size
                    };
                    let filler = " Some more words to make the answer as long as a real one.";
                    while answer.len() < size {
                        answer.push_str(&filler[..filler.len().min(size - answer.len())]);
                    }
                }
                out.say(&answer);
            }
            "say" => out.say(&arg_text),
            "usage" => out.usage = Some(serde_json::from_str(arg).expect("usage JSON")),
            "bytes" => {
                let mut left: usize = arg.parse().expect("bytes N");
                let line = "The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs.\n";
                let mut chunk = String::new();
                while left > 0 {
                    chunk.clear();
                    while chunk.len() < 64 * 1024 && left > 0 {
                        let take = left.min(line.len());
                        chunk.push_str(&line[..take]);
                        left -= take;
                    }
                    out.say(&chunk);
                }
            }
            "raw" => write_stdout(arg_text.as_bytes()),
            "rawbytes" => {
                let bytes: Vec<u8> = (0..arg.len() / 2)
                    .map(|i| u8::from_str_radix(&arg[2 * i..2 * i + 2], 16).expect("hex"))
                    .collect();
                write_stdout(&bytes);
            }
            "err" => {
                let mut e = std::io::stderr();
                let _ = e.write_all(format!("{arg_text}\n").as_bytes());
            }
            "sleep" => std::thread::sleep(Duration::from_millis(arg.parse().expect("sleep MS"))),
            "await" => {
                let path = std::path::Path::new(arg);
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while !path.exists() {
                    if std::time::Instant::now() > deadline {
                        std::process::exit(3);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            "fail" => {
                out.fail(&arg_text);
                std::process::exit(1);
            }
            "tool" | "refused" => {
                let (tool, input) = arg.split_once(' ').unwrap_or((arg, ""));
                out.tool(tool, input, word == "refused");
            }
            "exit" => {
                let code: i32 = arg.parse().expect("exit N");
                if code == 0 {
                    out.end();
                }
                std::process::exit(code);
            }
            // Dies by signal N, as a crashed engine does.
            "kill-self" => {
                let signal: i32 = arg.parse().expect("kill-self N");
                signal_hook::low_level::raise(signal).expect("raise");
            }
            "tty" => {
                let Ok(mut tty) =
                    std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty")
                else {
                    std::process::exit(4);
                };
                let _ = tty.write_all(b"password: ");
                let mut reply = [0u8; 256];
                if tty.read(&mut reply).is_err() {
                    std::process::exit(5);
                }
            }
            "hang" => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            // A handler that does nothing: TERM no longer ends this process.
            "ignore-term" => {
                let ignored = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                signal_hook::flag::register(signal_hook::consts::SIGTERM, ignored)
                    .expect("a TERM handler");
            }
            // Like ignore-term, and writes PATH when a TERM arrives (a test waits for it).
            "note-term" => {
                let got = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                signal_hook::flag::register(signal_hook::consts::SIGTERM, got.clone())
                    .expect("a TERM handler");
                let path = arg.to_string();
                std::thread::spawn(move || {
                    while !got.load(std::sync::atomic::Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    std::fs::write(path, "TERM").expect("write the note");
                });
            }
            "pid" => std::fs::write(arg, std::process::id().to_string()).expect("write pid"),
            // The descriptors the process that started this one holds open, a line each.
            "group-leader" => {
                // This process's group, and the parents of its leader and of this process.
                let parent_of = |pid: &str| {
                    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
                    let rest = stat.rsplit_once(')').unwrap().1.to_string();
                    let fields: Vec<String> = rest.split_whitespace().map(String::from).collect();
                    (fields[1].clone(), fields[2].clone())
                };
                let (parent, group) = parent_of("self");
                let (leader_parent, _) = parent_of(&group);
                let line = format!("{} {group} {leader_parent} {parent}", std::process::id());
                std::fs::write(arg, line).expect("write the group");
            }
            "grandchild" => {
                let me = std::env::current_exe().expect("current exe");
                let child = std::process::Command::new(me)
                    .env("FAKE_SCRIPT", format!("nostdin;ignore-term;pid {arg};hang"))
                    .env_remove("FAKE_LOG_DIR")
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .expect("spawn a grandchild");
                // Wait until it has written its pid, so the test knows it exists.
                while !Path::new(arg).exists() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::mem::forget(child);
            }
            "detach" => {
                use std::os::unix::process::CommandExt;
                let me = std::env::current_exe().expect("current exe");
                let child = std::process::Command::new(me)
                    .env("FAKE_SCRIPT", "nostdin;hang")
                    .env_remove("FAKE_LOG_DIR")
                    .stdin(std::process::Stdio::null())
                    .process_group(0)
                    .spawn()
                    .expect("spawn a helper");
                // Added, not written over: an engine started twice leaves two helpers to end.
                let mut pids = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(arg)
                    .expect("open the helpers' pid file");
                pids.write_all(format!("{}\n", child.id()).as_bytes()).expect("add a pid");
                std::mem::forget(child);
            }
            "no-summary" => {
                if summary_of(&stdin).is_some() {
                    let _ = std::io::stderr().write_all(b"summariser down\n");
                    std::process::exit(1);
                }
            }
            "nostdin" => {}
            // Streaming, the prompt was one line, read whole; stdin stays open for steers.
            "drain" if streaming => {}
            "drain" => {
                let mut buf = vec![0u8; 64 * 1024];
                let mut input = std::io::stdin().lock();
                while input.read(&mut buf).expect("read stdin") > 0 {}
            }
            "eof-stamp" => std::fs::write(arg, now_ns().to_string()).expect("write the stamp"),
            "stamps" => {
                let (n, ms) = arg.split_once(' ').expect("stamps N MS");
                let (n, ms): (u32, u64) = (n.parse().unwrap(), ms.parse().unwrap());
                for i in 0..n {
                    if i > 0 {
                        std::thread::sleep(Duration::from_millis(ms));
                    }
                    out.say(&format!("T{}\n", now_ns()));
                }
            }
            "take" => {
                let n: usize = if arg.is_empty() { 1 } else { arg.parse().expect("take N") };
                let texts: Vec<String> = (0..n).map_while(|_| user_line(&mut lines)).collect();
                for text in &texts {
                    log.steer(text);
                }
                if replay && !texts.is_empty() {
                    out.replay_all(&texts);
                }
                out.in_message = false;
                out.tools += 1;
            }
            other => panic!("fake engine: unknown step `{other}`"),
        }
    }
    out.end();
    // Like claude: each further user line is a new answer in the same process.
    while let Some(text) = streaming.then(|| user_line(&mut lines)).flatten() {
        log.steer(&text);
        out.text.clear();
        out.in_message = false;
        out.tools += 1;
        if replay {
            out.replay(&text);
        }
        out.say(&format!("ECHO: {text}"));
        out.end();
    }
}

/// As `gemini --acp` with the default script: opens a session and answers each prompt `ECHO: `
/// + its question, until stdin ends.
fn acp_agent(lines: &mut impl std::io::BufRead) {
    use serde_json::json;
    let mut line = String::new();
    while lines.read_line(&mut line).unwrap_or(0) > 0 {
        let request: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        line.clear();
        let result = match request["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": 1, "agentCapabilities": {}}),
            Some("session/new") => json!({"sessionId": "fake"}),
            Some("session/prompt") => {
                let prompt = request["params"]["prompt"].as_array().cloned().unwrap_or_default();
                let text: String = prompt.iter().filter_map(|b| b["text"].as_str()).collect();
                let chunk = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                    "sessionId": "fake", "update": {"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": format!("ECHO: {}", last_query(&text))}}}});
                write_stdout(format!("{chunk}\n").as_bytes());
                json!({"stopReason": "end_turn"})
            }
            _ => continue,
        };
        let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        write_stdout(format!("{reply}\n").as_bytes());
    }
}

/// The text of the next user line on stdin (`--input-format stream-json`); `None` at its end.
fn user_line(lines: &mut impl std::io::BufRead) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).expect("read stdin") == 0 {
            return None;
        }
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON user line");
        if v["type"] == "control_request" && v["request"]["subtype"] == "initialize" {
            // Still starting until a test says otherwise.
            if let Ok(path) = std::env::var("FAKE_INIT_AWAIT") {
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while !Path::new(&path).exists() && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            // As the real one answers it (the Agent SDK's first request).
            let id = &v["request_id"];
            let reply = serde_json::json!({"type": "control_response",
                "response": {"subtype": "success", "request_id": id, "response": {}}});
            write_stdout(format!("{reply}\n").as_bytes());
            continue;
        }
        assert_eq!(v["type"], "user", "{line}");
        let blocks = v["message"]["content"].as_array().expect("content blocks");
        return Some(blocks.iter().filter_map(|b| b["text"].as_str()).collect());
    }
}

/// The call's log file: rewritten as steers arrive.
struct Log {
    path: Option<std::path::PathBuf>,
    record: serde_json::Value,
}

impl Log {
    fn write(&self) {
        if let Some(path) = &self.path {
            // Whole or not at all: a test may read it at any moment.
            let temp = path.with_extension("tmp");
            std::fs::write(&temp, self.record.to_string()).expect("write the call log");
            std::fs::rename(&temp, path).expect("write the call log");
        }
    }

    fn steer(&mut self, text: &str) {
        if let Some(steers) = self.record["steers"].as_array_mut() {
            steers.push(serde_json::Value::String(text.to_string()));
        }
        self.write();
    }
}

/// Wall-clock nanoseconds: comparable between processes on one machine.
fn now_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// Claims the next call number in the log folder, race-free across concurrent calls.
fn claim_call_number(dir: &Path) -> u64 {
    for n in 1.. {
        let claim = dir.join(format!(".claim-{n}"));
        if std::fs::OpenOptions::new().write(true).create_new(true).open(&claim).is_ok() {
            return n;
        }
    }
    unreachable!()
}

/// When cca asks for a compaction: `SUMMARY[q1 | q2 | ...]`, with `folded{...}` holding the
/// earlier summary it was given.
fn summary_of(stdin: &str) -> Option<String> {
    if !stdin.contains("<system_instructions>\nYou condense the earlier part of a conversation") {
        return None;
    }
    let between = |text: &str, open: &str, close: &str| -> Vec<String> {
        text.split(open).skip(1).filter_map(|p| p.split(close).next()).map(String::from).collect()
    };
    let users = between(stdin, "<user_turn>\n", "\n</user_turn>");
    let mut summary = format!("SUMMARY[{}]", users.join(" | "));
    if let Some(earlier) =
        between(stdin, "<conversation_summary>\n", "\n</conversation_summary>").first()
    {
        summary.push_str(&format!(" folded{{{earlier}}}"));
    }
    Some(summary)
}

/// The text of the last `<user_query>`, or all of stdin when there is none.
fn last_query(stdin: &str) -> String {
    match (stdin.rfind("<user_query>\n"), stdin.rfind("\n</user_query>")) {
        (Some(start), Some(end)) if end >= start + 13 => stdin[start + 13..end].to_string(),
        _ => stdin.trim_end().to_string(),
    }
}

fn write_stdout(bytes: &[u8]) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(bytes);
    let _ = o.flush();
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Claude,
    Gemini,
    /// `codex exec --json`: the answer as whole `agent_message` items, one per `say`.
    Codex,
    Text,
}

struct Out {
    format: Format,
    /// A message of the model is open (claude: text after a tool call is a new message).
    in_message: bool,
    tools: usize,
    text: String,
    answers: u32,
    /// The next `result` line's figures (`usage JSON`).
    usage: Option<serde_json::Value>,
}

impl Out {
    fn line(&self, value: serde_json::Value) {
        write_stdout(format!("{value}\n").as_bytes());
    }

    fn start(&mut self) {
        match self.format {
            Format::Claude => self.line(serde_json::json!({"type":"system","subtype":"init","session_id":"fake","model":"fake-claude"})),
            Format::Gemini => self.line(serde_json::json!({"type":"init","session_id":"fake","model":"fake-gemini"})),
            Format::Codex => self.line(serde_json::json!({"type":"thread.started","thread_id":"fake"})),
            Format::Text => {}
        }
    }

    /// claude's echo of a user message it took (`--replay-user-messages`).
    fn replay(&self, text: &str) {
        self.replay_all(&[text.to_string()]);
    }

    /// Messages taken together are echoed as one, a text block each.
    fn replay_all(&self, texts: &[String]) {
        let blocks: Vec<serde_json::Value> =
            texts.iter().map(|t| serde_json::json!({"type":"text","text":t})).collect();
        self.line(serde_json::json!({"type":"user","message":{"role":"user","content":blocks},"parent_tool_use_id":null,"isReplay":true}));
    }

    fn say(&mut self, text: &str) {
        // claude's final lines repeat the whole answer; plain text needs no copy (and a
        // 200 MB answer must not be held).
        if self.format != Format::Text {
            self.text.push_str(text);
        }
        match self.format {
            Format::Claude => {
                if !self.in_message {
                    let id = format!("msg_fake_{}", self.tools + 1);
                    self.line(serde_json::json!({"type":"stream_event","event":{"type":"message_start","message":{"id":id,"role":"assistant","content":[]}}}));
                    self.line(serde_json::json!({"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}));
                }
                self.line(serde_json::json!({"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}}));
            }
            Format::Gemini => self.line(serde_json::json!({"type":"message","role":"assistant","content":text,"delta":true})),
            Format::Codex => self.line(serde_json::json!({"type":"item.completed","item":{"id":"item_fake","type":"agent_message","text":text}})),
            Format::Text => write_stdout(text.as_bytes()),
        }
        self.in_message = true;
    }

    /// A tool call and its result, as the engine reports them; the model's next words are a
    /// new message.
    fn tool(&mut self, name: &str, input: &str, refused: bool) {
        self.tools += 1;
        let id = format!("tool_fake_{}", self.tools);
        match self.format {
            Format::Claude => {
                self.line(serde_json::json!({"type":"assistant","message":{"id":format!("msg_fake_tool_{}", self.tools),"role":"assistant","content":[{"type":"tool_use","id":id,"name":name,"input":{"query":input}}]}}));
                let result = if refused {
                    serde_json::json!({"type":"tool_result","tool_use_id":id,"is_error":true,"content":format!("<tool_use_error>Error: No such tool available: {name}</tool_use_error>")})
                } else {
                    let links = serde_json::json!([{"title": format!("About {input}"), "url": "https://example.org/"}]);
                    serde_json::json!({"type":"tool_result","tool_use_id":id,"content":format!("Web search results for query: \"{input}\"\n\nLinks: {links}\n\nA summary.")})
                };
                self.line(
                    serde_json::json!({"type":"user","message":{"role":"user","content":[result]}}),
                );
            }
            Format::Gemini => {
                self.line(serde_json::json!({"type":"tool_use","tool_name":name,"tool_id":id,"parameters":{"query":input}}));
                let result = if refused {
                    let message = format!("Tool \"{name}\" not found.");
                    serde_json::json!({"type":"tool_result","tool_id":id,"status":"error","output":message,"error":{"type":"tool_not_registered","message":message}})
                } else {
                    serde_json::json!({"type":"tool_result","tool_id":id,"status":"success","output":format!("Search results for \"{input}\" returned.")})
                };
                self.line(result);
            }
            Format::Codex => {
                let status = if refused { "declined" } else { "completed" };
                self.line(serde_json::json!({"type":"item.completed","item":{"id":id,"type":"web_search","query":input,"status":status}}));
            }
            Format::Text => {}
        }
        self.in_message = false;
    }

    fn fail(&mut self, message: &str) {
        match self.format {
            Format::Claude => {
                self.line(serde_json::json!({"type":"assistant","message":{"id":"err","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":message}]},"error":"server_error","is_api_error_message":true}));
                self.line(serde_json::json!({"type":"result","subtype":"success","is_error":true,"result":message,"usage":{"input_tokens":0,"output_tokens":0},"total_cost_usd":0}));
            }
            Format::Gemini => {
                let _ = std::io::stderr().write_all(
                    format!(
                        "Error when talking to Gemini API: {message}\n    at fake (fake.js:1:1)\n"
                    )
                    .as_bytes(),
                );
                self.line(serde_json::json!({"type":"result","status":"error","error":{"type":"unknown","message":message}}));
            }
            Format::Codex => {
                self.line(serde_json::json!({"type":"turn.failed","error":{"message":message}}));
            }
            Format::Text => {
                let _ = std::io::stderr().write_all(format!("{message}\n").as_bytes());
            }
        }
    }

    fn end(&mut self) {
        // claude's total_cost_usd adds up the answers of one process.
        self.answers += 1;
        match self.format {
            Format::Claude => {
                if self.in_message {
                    let id = format!("msg_fake_{}", self.tools + 1);
                    self.line(serde_json::json!({"type":"assistant","message":{"id":id,"role":"assistant","content":[{"type":"text","text":self.text}]}}));
                    self.line(serde_json::json!({"type":"stream_event","event":{"type":"message_stop"}}));
                }
                let figures = self.usage.take().unwrap_or_else(|| serde_json::json!({"input_tokens":12,"output_tokens":34,"total_cost_usd":0.0015 * self.answers as f64}));
                self.line(serde_json::json!({"type":"result","subtype":"success","is_error":false,"result":self.text,"usage":{"input_tokens":figures["input_tokens"],"output_tokens":figures["output_tokens"]},"total_cost_usd":figures["total_cost_usd"]}));
            }
            Format::Gemini => self.line(serde_json::json!({"type":"result","status":"success","stats":{"input_tokens":12,"output_tokens":34}})),
            Format::Codex => self.line(serde_json::json!({"type":"turn.completed","usage":{"input_tokens":12,"cached_input_tokens":0,"output_tokens":34}})),
            Format::Text => {}
        }
    }
}
