//! What the sections share: a home with its fake engines, an ACP client, timings, transcripts
//! written for a section, and the probes `main` runs in a child (peak memory, first code line).

use super::*;

/// One `CCA_HOME` with its fake engines.
pub(crate) struct Home {
    pub(crate) dir: PathBuf,
    pub(crate) cca: PathBuf,
}

impl Home {
    pub(crate) fn config(&self, extra: &str) {
        let dir = self.dir.join("cca");
        std::fs::create_dir_all(&dir).unwrap();
        let text =
            format!("engine = \"plain\"\n[engines.plain]\ncommand = [\"plain-engine\"]\n{extra}");
        std::fs::write(dir.join("config.toml"), text).unwrap();
    }

    pub(crate) fn env(&self, cmd: &mut Command, script: &str) {
        cmd.env_clear()
            .env("HOME", &self.dir)
            .env("CCA_HOME", self.dir.join("cca"))
            .env("PATH", format!("{}:/usr/bin:/bin", self.dir.join("bin").display()))
            .env("FAKE_SCRIPT", script)
            .env("TERM", "dumb")
            .current_dir(&self.dir)
            .stdin(Stdio::null());
    }

    pub(crate) fn command(&self, args: &[&str], script: &str) -> Command {
        let mut cmd = Command::new(&self.cca);
        cmd.args(args);
        self.env(&mut cmd, script);
        cmd
    }

    pub(crate) fn cca(&self, args: &[&str], script: &str) -> std::process::ExitStatus {
        self.command(args, script).stdout(Stdio::null()).status().unwrap()
    }
}

/// `cca acp` spoken to line by line.
pub(crate) struct AcpClient {
    pub(crate) child: std::process::Child,
    pub(crate) stdin: std::process::ChildStdin,
    pub(crate) lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    pub(crate) next: u64,
}

impl AcpClient {
    /// Opens a session in `cwd` and asks `count` questions in it, one after another, each
    /// timed from its request to its first `agent_message_chunk`, in ms: the first's in
    /// `first`, the others' in `later`.
    pub(crate) fn time_prompts(
        &mut self,
        cwd: &Path,
        count: usize,
        first: &mut Vec<f64>,
        later: &mut Vec<f64>,
    ) {
        self.call("initialize", json!({"protocolVersion": 1}));
        let id =
            self.call("session/new", json!({"cwd": cwd, "mcpServers": []}))["result"]["sessionId"]
                .clone();
        for n in 0..count {
            let text = format!("question {n}");
            let prompt = json!({"sessionId": id, "prompt": [{"type": "text", "text": text}]});
            let start = Instant::now();
            let sent = self.send("session/prompt", prompt);
            self.until(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
            let ms = start.elapsed().as_secs_f64() * 1000.0;
            if n == 0 {
                first.push(ms)
            } else {
                later.push(ms)
            }
            let reply = self.until(|m| m["id"] == sent);
            assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
        }
    }

    pub(crate) fn start(home: &Home, script: &str) -> AcpClient {
        let mut client = AcpClient::over(home.command(&["acp"], script));
        client.call("initialize", json!({"protocolVersion": 1}));
        client
    }

    /// A JSON-RPC line client of any cca server (`cca mcp` too), not yet initialized.
    pub(crate) fn over(mut cmd: Command) -> AcpClient {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        AcpClient { child, stdin, lines, next: 0 }
    }

    pub(crate) fn send(&mut self, method: &str, params: serde_json::Value) -> u64 {
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        self.next
    }

    pub(crate) fn until(
        &mut self,
        wanted: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        loop {
            let line = self.lines.next().expect("cca acp answers").unwrap();
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if wanted(&message) {
                return message;
            }
        }
    }

    pub(crate) fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.send(method, params);
        self.until(|m| m["id"] == id && m.get("method").is_none())
    }

    /// The response to request `id`, found without parsing the lines before it: a notification
    /// has no `"id":`, and a line is parsed only if it has one, so the time is cca's, not the
    /// parsing of every notification.
    pub(crate) fn response(&mut self, id: u64) -> serde_json::Value {
        loop {
            let line = self.lines.next().expect("cca acp answers").unwrap();
            if !line.contains("\"id\":") {
                continue;
            }
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    pub(crate) fn finish(self) {
        drop(self.stdin);
        let mut child = self.child;
        assert!(child.wait().unwrap().success());
    }
}

pub(crate) trait Checked {
    fn checked(self);
}

impl Checked for std::process::ExitStatus {
    fn checked(self) {
        assert!(self.success(), "cca failed: {self}");
    }
}

pub(crate) fn time_runs(n: usize, mut run: impl FnMut()) -> Stats {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        run();
        samples.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    Stats::new(samples)
}

pub(crate) fn run_with_input(mut cmd: Command, input: &[u8]) {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    assert!(child.wait().unwrap().success());
}

/// What cca sends on a resume in this home: captured once through the fake engine's log.
pub(crate) fn framed_input(home: &Home) -> String {
    let log = home.dir.join("framed-log");
    std::fs::create_dir_all(&log).unwrap();
    let mut cmd = home.command(&["search", "-q", "-r", "--no-compact", "next"], "say hi");
    cmd.env("FAKE_LOG_DIR", &log).stdout(Stdio::null());
    assert!(cmd.status().unwrap().success());
    let call: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(log.join("call-1.json")).unwrap()).unwrap();
    call["stdin"].as_str().unwrap().to_string()
}

pub(crate) fn header(id: &str) -> Header {
    Header {
        format: transcript::FORMAT,
        id: id.to_string(),
        created: "2026-11-21T10:15:00Z".into(),
        engine: "plain".into(),
        model: None,
        prompt: "search_agents/haiku45".into(),
        prompt_hash: cca::prompt::hash(cca::prompt::builtin("search_agents/haiku45").unwrap()),
        cwd: "/".into(),
        title: format!("session {id}"),
        forked_from: None,
        name: None,
        imported: None,
        other: Default::default(),
    }
}

pub(crate) fn session_text(id: &str, exchanges: u64, answer_bytes: usize) -> String {
    let mut text = transcript::render_header(&header(id));
    let answer = "The quick brown fox jumps over the lazy dog. ".repeat(answer_bytes / 45 + 1);
    for n in 1..=exchanges {
        let at = Some("2026-11-21T10:15:00Z".to_string());
        text.push_str(&transcript::render_record(
            &Record {
                kind: Kind::User,
                meta: Meta { at: at.clone(), ..Meta::default() },
                content: format!("question number {n}?"),
            },
            n,
        ));
        text.push_str(&transcript::render_record(
            &Record {
                kind: Kind::Assistant,
                meta: Meta {
                    at,
                    engine: Some("plain".into()),
                    duration_ms: Some(1000),
                    ..Meta::default()
                },
                content: answer[..answer_bytes].to_string(),
            },
            n,
        ));
    }
    text
}

/// A session of `exchanges` exchanges of about 2 KB each, as `latest`; returns its size.
pub(crate) fn write_long_session(home: &Home, exchanges: u64) -> u64 {
    let dir = home.dir.join("cca/sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let id = "20261121-101500";
    let path = dir.join(format!("session_{id}.md"));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    file.write_all(transcript::render_header(&header(id)).as_bytes()).unwrap();
    let one = session_text(id, 1, 1900);
    let body = &one[transcript::render_header(&header(id)).len()..];
    for _ in 0..exchanges {
        file.write_all(body.as_bytes()).unwrap();
    }
    file.flush().unwrap();
    drop(file);
    let _ = std::fs::remove_file(dir.join("latest"));
    std::os::unix::fs::symlink(format!("session_{id}.md"), dir.join("latest")).unwrap();
    std::fs::metadata(&path).unwrap().len()
}

pub(crate) fn truncate_to(home: &Home, size: u64) {
    let path = home.dir.join("cca/sessions/session_20261121-101500.md");
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(size).unwrap();
}

pub(crate) fn now_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// `bench __rss PROGRAM ARGS...`: runs it and prints the peak RSS (KB) of it and its children.
// getrusage has no safe wrapper in the crates cca uses; this is the one unsafe call, in a bench.
#[allow(unsafe_code)]
pub(crate) fn measure_rss(args: &[String]) {
    let status = Command::new(&args[0]).args(&args[1..]).stdout(Stdio::null()).status().unwrap();
    // Searches exit 1 when nothing matched; BENCH_RSS_OK lists the codes that are fine.
    let ok = std::env::var("BENCH_RSS_OK").unwrap_or_else(|_| "0".into());
    let code = status.code().unwrap_or(-1).to_string();
    assert!(ok.split(',').any(|c| c == code) || status.success(), "{args:?} failed: {status}");
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    println!("{}", usage.ru_maxrss);
}

/// `bench __first_code_line`: the microseconds from a new renderer to its first highlighted
/// line, in a fresh process (the syntaxes are loaded once per process).
pub(crate) fn first_code_line() {
    let style = cca::render::Style { color: true, hyperlinks: true, width: 100, live: false };
    let start = Instant::now();
    let mut renderer = cca::render::Renderer::new(style);
    let mut out = String::new();
    renderer.push("```rust\nfn main() {\n", &mut out);
    let elapsed = start.elapsed();
    assert!(out.contains("\x1b[35mfn"), "{out:?}");
    println!("{}", elapsed.as_secs_f64() * 1e6);
}

/// An answer as LLMs write them: headings, prose with inline markup, a list, a table.
pub(crate) const PROSE: &str = "## What changed\n\nRust 1.89 adds **file locking** to `std::fs::File`: \
`lock`, `lock_shared`, `try_lock` and `unlock`, with the platform's advisory locks \
(`flock` on Unix, `LockFileEx` on Windows). See [the release notes](https://blog.rust-lang.org/).\n\n\
- `lock()` blocks until the lock is free\n- `try_lock()` returns at once\n  - `Err(TryLockError::WouldBlock)` when held\n\
- locks are released when the file is closed\n\n\
| method | blocks | shared |\n|---|:-:|---|\n| `lock` | yes | no |\n| `lock_shared` | yes | yes |\n\
| `try_lock` | no | no |\n\n\
> Advisory locks only keep out processes that also lock: a plain `open` is not stopped.\n\n\
These locks are *advisory* on every platform Rust supports, which means that cooperation is \
required, and that a process which ignores them can still read and write the file as it likes.\n\n";

pub(crate) const CODE: &str = "```rust\nuse std::fs::File;\nuse std::io::{self, Write};\n\n\
/// Appends a line under an exclusive lock.\nfn append(path: &str, line: &str) -> io::Result<()> {\n\
    let mut file = File::options().append(true).create(true).open(path)?;\n    file.lock()?; // waits\n\
    writeln!(file, \"{line}\")?;\n    file.unlock()\n}\n\nfn main() -> io::Result<()> {\n\
    for i in 0..3 {\n        append(\"log.txt\", &format!(\"entry {i}\"))?;\n    }\n\
    let n: u64 = 42;\n    println!(\"{n} done\");\n    Ok(())\n}\n```\n";
