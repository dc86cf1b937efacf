//! gemini (`@google/gemini-cli`), with the prompt on stdin and `-o stream-json` output.
//!
//! It reads stdin only if data arrives within 500 ms of its start (cca writes at once), cuts
//! stdin at 8 MiB without a word (cca refuses larger turns before spawning), and answers a
//! prompt larger than the model's window with no output and exit 0 (an empty answer is a
//! failure). Its errors go to stderr, and the final `result` line says `status`.
//!
//! With tools, its stream has `tool_use` and `tool_result` events between the text deltas; the
//! text after a tool call is the model's next message, so it starts a new paragraph. Its
//! `tool_result` for a search says only that results returned: the sources stay inside gemini.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{
    Arg, EngineConfig, HistoryMode, Invocation, LineBuffer, Output, Paragraphs, Request, Spec,
    SystemPromptMode, ToolCall, ToolCalls, ToolStatus, Usage, json_line,
};
use crate::frame;

/// Measured with gemini-cli 0.61.0 (docs/DESIGN.md, "Engines").
pub(crate) const SPEC: Spec = Spec {
    name: "gemini",
    program_var: Some(crate::vars::GEMINI),
    keys: &[
        "program",
        "args",
        "model",
        "system_prompt",
        "history",
        "policy",
        "retries",
        "keep_warm",
        "standby",
        "max_input_bytes",
        "context_budget",
        "model_budgets",
        "bytes_per_token",
    ],
    install: Some("npm install -g @google/gemini-cli"),
    // The current models (gemini-cli 0.61.0's model list).
    models: &["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"],
    context_budget: 800_000,
    // gemini cuts stdin at 8 MiB without a word.
    max_input_bytes: Some(8 * 1024 * 1024),
    default_tools: None,
    failure_hint: None,
    empty_answer_hint: "gemini answers nothing when the prompt is larger than the model's context window; \
             try `cca search` for a new session, or a model with a larger window",
    refused_hint: Some(
        "check GEMINI_API_KEY (or GOOGLE_API_KEY), or log in again by running `gemini` on its own",
    ),
    streams_input: None,
    // Its `-p` mode reads one prompt; `gemini --acp` takes one after another.
    keeps: Some(super::Keeping::Acp),
    one_shot: true,
    // In `-p` mode an `@PATH` in the prompt makes gemini read the file; an image becomes
    // inline data in the model request (measured, gemini-cli 0.61.0).
    takes_images: true,
    invocation,
    decoder: |_| Box::new(Decoder::default()),
    tidy,
    reads_at_start,
    home: |_| Some((crate::vars::GEMINI_CLI_HOME, home(None))),
    stderr_noise: Some(noise),
};

/// What gemini says on stderr of itself at every start that tells the user nothing: its start-up
/// timing (`[STARTUP] ...`) and the grep tool it falls back to. (Its warnings about the terminal,
/// which cca's pipes are not, are turned off in the settings file.)
fn noise(line: &[u8]) -> bool {
    line.starts_with(b"[STARTUP] ") || line.starts_with(b"Ripgrep is not available.")
}

/// gemini records its own copy of every run (it has no switch), in the home cca gives it for the
/// session; cca is the memory, so the one file each turn leaves is removed, found by the id
/// gemini reported.
fn tidy(left: &super::Leftovers) -> super::Tidied {
    if let Some(home) = left.home {
        let root = home.join(".gemini").join("tmp");
        crate::store::remove_engine_session_files(&root, |path| {
            session_file_matches(path, left.engine_session)
        });
    }
    super::Tidied::default()
}

/// Where gemini writes its copy of a run: `<home>/.gemini/tmp/<project>/chats/`, named
/// `session-<time>-<first 8 of the id>.jsonl`.
fn session_file_matches(path: &Path, session_id: &str) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let short: String = session_id.chars().take(8).collect();
    short.len() == 8
        && name.starts_with("session-")
        && name.ends_with(&format!("-{short}.jsonl"))
        && path.parent().and_then(|p| p.file_name()).is_some_and(|d| d == "chats")
}

/// Whether a program is gemini, by its name (an ACP agent in the config may be).
pub(crate) fn is_gemini(program: &Path) -> bool {
    program.file_name().is_some_and(|name| name == "gemini")
}

/// gemini's home: its folder `.gemini` with the user's files in it but those it writes of
/// itself as it runs (its copies of runs and their projects' folders under `tmp`, its shell
/// history, its project list), which stay in cca's folder.
pub(crate) fn home(settings: Option<super::home::Settings>) -> super::home::Home {
    super::home::Home {
        engine: "gemini",
        config_dir: ".gemini",
        links: super::home::Links::AllBut(&["tmp", "history", "projects.json"]),
        home_files: &[".env"],
        settings,
        arg: super::home::HomeArg::Home,
        user: super::home::UserFolder::GeminiCliHome,
    }
}

/// cca's default tool policy for gemini: a search agent searches and reads the web; it never
/// runs commands or changes files, whatever the user's own approval mode.
const POLICY: &str = r#"# cca: the search agent searches and reads; it never runs commands or changes files.
[[rule]]
toolName = ["run_shell_command", "write_file", "replace", "save_memory"]
decision = "deny"
priority = 900

[[rule]]
toolName = ["google_web_search", "web_fetch"]
decision = "allow"
priority = 900
"#;

pub(crate) fn invocation(
    engine: &EngineConfig,
    program: PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    // Without --skip-trust, gemini refuses an untrusted folder (exit 55). Kept between turns,
    // it runs as an ACP agent (`Keeping::Acp`), everything else as for one turn.
    let output: &[&str] = if request.kept { &["--acp"] } else { &["-o", "stream-json"] };
    let mut args: Vec<Arg> =
        output.iter().chain(&["--skip-trust"]).copied().map(Arg::plain).collect();
    if let Some(model) = request.model {
        args.extend(super::model_args("--model", model)?);
    }
    match engine.policy.as_deref() {
        None => {
            args.push(Arg::plain("--policy"));
            args.push(Arg::File { name: "policy.toml", contents: POLICY.to_string() });
        }
        Some("") => {}
        Some(path) => {
            args.push(Arg::plain("--policy"));
            args.push(Arg::plain(path));
        }
    }
    let mut env = Vec::new();
    // Only a settings file sets gemini's attempts and adds MCP servers, and gemini writes its
    // own copy of every run: it runs in a home of its own for the run (see `home`), where its
    // settings are the user's with cca's put over them.
    let mut general = serde_json::Map::new();
    if let Some(retries) = engine.retries {
        general.insert("maxAttempts".into(), json!(retries + 1));
    }
    let merged = json!({
        "general": general,
        // Its warnings about the terminal (colours, TERM=dumb) are about its own interface,
        // which cca does not show: they are not the user's to act on.
        "ui": { "showCompatibilityWarnings": false },
    });
    // The MCP servers of a turn are cca's, and no others (the user's own would be started).
    let servers = super::mcp_servers(request.mcp_servers, mcp_server);
    let replaced = json!({ "mcpServers": servers });
    let settings = super::home::Settings { file: "settings.json", merged, replaced };
    env.push((crate::vars::GEMINI_CLI_HOME.to_string(), Arg::Home(home(Some(settings)))));
    let inline_system = match engine.system_prompt {
        SystemPromptMode::Inline => Some(request.system),
        SystemPromptMode::Native => {
            env.push((
                "GEMINI_SYSTEM_MD".to_string(),
                Arg::File { name: "system.md", contents: request.system.to_string() },
            ));
            None
        }
    };
    let stdin = match engine.history {
        // An ACP agent takes no session file: a kept gemini's first prompt holds the history
        // framed (for a live context with no exchange yet, the same text as the opening one).
        HistoryMode::Structured if !request.kept => {
            if !request.live.exchanges.is_empty() {
                args.push(Arg::plain("--session-file"));
                args.push(Arg::File {
                    name: "history.jsonl",
                    contents: history_jsonl(request, inline_system)?,
                });
            }
            request.newest(inline_system)?
        }
        HistoryMode::Structured | HistoryMode::Inline => {
            frame::inline(inline_system, request.live, &request.attachments, request.query)
        }
    };
    // No `@` in the text may name a file: only cca's own image line below does.
    let mut stdin: Vec<frame::Piece> =
        std::iter::once(frame::Piece::EscapeAtSigns).chain(stdin).collect();
    if !request.images.is_empty() {
        // gemini reads only files inside its workspace: the folder of the stored copies joins it.
        let dir = request.image_dir.display();
        args.push(Arg::plain(format!("--include-directories={dir}")));
        stdin.push(frame::Piece::Verbatim(image_references(request)));
    }
    args.extend(engine.args.iter().map(Arg::plain));
    let follow_up = std::iter::once(frame::Piece::EscapeAtSigns)
        .chain(frame::follow_up(&request.attachments, request.query))
        .collect();
    Ok(Invocation { program, args, env, stdin, images: Vec::new(), follow_up, resume: None })
}

/// A line after the question naming each image as `@PATH`, which gemini replaces by the file's
/// content. Its parser ends a path at a space and at any of `,;!?()[]{}`, and takes a
/// backslash as an escape: every character but letters, digits and `/-_` is escaped.
fn image_references(request: &Request) -> String {
    let mut line = String::from("\n\nThe attached images:");
    for image in &request.images {
        let path = request.image_dir.join(image.file_name());
        line.push_str(" @");
        for c in path.display().to_string().chars() {
            if !(c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_')) {
                line.push('\\');
            }
            line.push(c);
        }
    }
    line.push('\n');
    line
}

/// An MCP server as gemini's settings describe it (`mcpServers`).
fn mcp_server(server: &super::McpServer) -> Value {
    use super::{McpServer, pairs};
    match server {
        McpServer::Stdio { command, args, env, .. } => {
            json!({ "command": command, "args": args, "env": pairs(env) })
        }
        McpServer::Http { url, headers, .. } => {
            json!({ "httpUrl": url, "headers": pairs(headers) })
        }
        McpServer::Sse { url, headers, .. } => json!({ "url": url, "headers": pairs(headers) }),
    }
}

/// The live exchanges as gemini's own session file: a metadata line, then one line per message.
fn history_jsonl(request: &Request, system: Option<&str>) -> std::io::Result<String> {
    let stamp = "2026-01-01T00:00:00.000Z";
    let mut lines = vec![json!({
        "sessionId": "00000000-0000-4000-8000-000000000000",
        "projectHash": "cca",
        "startTime": stamp,
        "lastUpdated": stamp,
        "kind": "main",
    })];
    for (n, exchange) in request.live.exchanges.iter().enumerate() {
        // As gemini got it on stdin: with no `@` that names a file.
        let user = request.user_message(n, system)?;
        let user =
            frame::to_string(&[frame::Piece::EscapeAtSigns, frame::Piece::Frame(user)], &b""[..])?;
        let answer = (request.stored)(&exchange.assistant)?;
        for (role, text) in [("user", user), ("gemini", answer)] {
            lines.push(json!({
                "id": format!("cca-{n}-{role}"),
                "timestamp": stamp,
                "type": role,
                "content": [{ "text": text }],
            }));
        }
    }
    Ok(lines.iter().map(|l| format!("{l}\n")).collect())
}

/// What gemini reads as it starts (gemini-cli 0.61.0): its context files (`GEMINI.md` in its
/// folder, in this folder and each above it), its settings (the user's, the project's, the
/// system's) and the `.env` files it loads its environment from. Files it reads later, as its
/// tools reach a folder, are read fresh by a waiting engine too.
fn reads_at_start(place: &super::StartPlace) -> Vec<PathBuf> {
    let mut paths = place.upward(&["GEMINI.md", ".env", ".gemini/.env"]);
    paths.push(place.folder.join(".gemini/settings.json"));
    if let Some(home) = place.gemini_home {
        paths.extend(["GEMINI.md", "settings.json", ".env"].map(|f| home.join(".gemini").join(f)));
    }
    paths.extend(
        ["settings.json", "system-defaults.json"].map(|f| Path::new("/etc/gemini-cli").join(f)),
    );
    paths
}

/// Decodes `-o stream-json`: assistant message deltas, tool calls, and the final result.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    lines: LineBuffer,
    paragraphs: Paragraphs,
    tools: ToolCalls,
}

impl super::Decoder for Decoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        LineBuffer::feed_to(self, |d| &mut d.lines, chunk, Self::line, out);
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        LineBuffer::finish_to(self, |d| &mut d.lines, Self::line, out);
        self.tools.flush(out);
    }

    fn stderr_noise(&self) -> Option<fn(&[u8]) -> bool> {
        SPEC.stderr_noise
    }
}

/// gemini's words for a call it did not run (`ToolErrorType` in its source); other errors mean
/// the tool ran and failed.
const REFUSALS: [&str; 3] = ["tool_not_registered", "policy_violation", "invalid_tool_params"];

impl Decoder {
    fn line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let Some(v) = json_line(line, out) else { return };
        match v["type"].as_str() {
            Some("message") if v["role"] == "assistant" => {
                if let Some(text) = v["content"].as_str() {
                    self.paragraphs.text(text, out);
                }
            }
            Some("tool_use") => {
                let name = v["tool_name"].as_str().unwrap_or("tool");
                let call = ToolCall::new(name, &v["parameters"]);
                self.tools.started(v["tool_id"].as_str().unwrap_or(""), call, out);
                // What the model says after a tool call is its next message.
                self.paragraphs.new_message();
            }
            Some("tool_result") => {
                let id = v["tool_id"].as_str().unwrap_or("");
                self.tools.settled(
                    id,
                    |call| {
                        if v["status"] != "success" {
                            let kind = v["error"]["type"].as_str().unwrap_or("");
                            call.status = if REFUSALS.contains(&kind) {
                                ToolStatus::Refused
                            } else {
                                ToolStatus::Failed
                            };
                            let reason = v["error"]["message"].as_str().or(v["output"].as_str());
                            call.reason = Some(crate::transcript::one_line(
                                reason.unwrap_or("gemini reported an error"),
                                200,
                            ));
                        }
                    },
                    out,
                );
            }
            _ => decode_line(&v, out),
        }
    }
}

/// The lines that need no state: the session id, errors, the final result.
fn decode_line(v: &Value, out: &mut Vec<Output>) {
    match v["type"].as_str() {
        Some("init") => {
            if let Some(id) = v["session_id"].as_str() {
                out.push(Output::Session(id.to_string()));
            }
            if let Some(model) = v["model"].as_str() {
                out.push(Output::Model(model.to_string()));
            }
        }
        Some("error") => {
            if let Some(message) = v["message"].as_str() {
                out.push(Output::Note(message.to_string()));
            }
        }
        Some("result") => {
            let stats = &v["stats"];
            out.push(Output::Usage(Usage {
                // All of the prompt; `cached` are among them.
                input_tokens: stats["input_tokens"].as_u64(),
                cached_tokens: stats["cached"].as_u64(),
                output_tokens: stats["output_tokens"].as_u64(),
                cost_usd: None,
            }));
            if v["status"] != "success" {
                let message = v["error"]["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("gemini reported status {}", v["status"]));
                // The API's own error, quoted in the message: a refused key or login.
                let refused =
                    ["\"code\":401", "\"code\":403", "UNAUTHENTICATED", "PERMISSION_DENIED"]
                        .iter()
                        .any(|sign| message.contains(sign));
                if refused {
                    out.push(Output::Refused(message.clone()));
                }
                out.push(Output::Error(message));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_gemini_reads_at_start_is_its_context_files_settings_and_env_files() {
        let place = crate::engine::StartPlace {
            folder: Path::new("/home/u/src/app"),
            gemini_home: Some(Path::new("/home/u")),
            claude_home: None,
        };
        let reads = reads_at_start(&place);
        for path in [
            "/home/u/src/app/GEMINI.md",
            "/home/u/src/GEMINI.md",
            "/GEMINI.md",
            "/home/u/src/app/.gemini/settings.json",
            "/home/u/src/app/.env",
            "/home/u/.gemini/GEMINI.md",
            "/home/u/.gemini/settings.json",
            "/etc/gemini-cli/settings.json",
        ] {
            assert!(reads.contains(&PathBuf::from(path)), "{path}: {reads:?}");
        }
    }

    use super::*;
    use crate::transcript::Live;

    fn decode(sample: &str) -> Vec<Output> {
        crate::engine::decoded(Decoder::default(), sample, 29)
    }

    #[test]
    fn images_are_named_as_at_paths_and_nothing_else_is() {
        let live = std::sync::Arc::new(Live::default());
        let stored = |_: &std::ops::Range<u64>| Ok(String::new());
        let image = crate::media::Image::new(b"GIF89a\x01\x00".to_vec()).unwrap();
        let dir = std::path::Path::new("/home/a b/.cca(1)/files");
        let request = Request {
            kept: false,
            system: "sys",
            live: &live,
            stored: &stored,
            attachments: Vec::new(),
            images: vec![&image],
            image_dir: dir,
            query: "what is it, someone@notes?",
            model: None,
            mcp_servers: &[],
            notes: None,
        };
        let home = crate::config::Sourced {
            value: std::path::PathBuf::from("/h/.cca"),
            source: crate::config::Source::Default,
        };
        let env = crate::config::Env::from_pairs(&[]);
        let flags = crate::config::Flags::default();
        let settings =
            crate::config::resolve(&env, &flags, home, "/h/.cca/config.toml".into(), None).unwrap();
        let engine = &settings.engines["gemini"];
        let inv = invocation(engine, "gemini".into(), &request).unwrap();
        let include = Arg::plain("--include-directories=/home/a b/.cca(1)/files");
        assert!(inv.args.contains(&include), "{:?}", inv.args);
        let stdin = frame::to_string(&inv.stdin, &b""[..]).unwrap();
        let name = image.file_name().replace('.', "\\.");
        let expected =
            format!("\n\nThe attached images: @/home/a\\ b/\\.cca\\(1\\)/files/{name}\n");
        assert!(stdin.ends_with(&expected), "{stdin}");
        // The question's `@` names no file: only cca's own line does.
        assert!(stdin.contains("<user_query>\nwhat is it, someone\\@notes?\n"), "{stdin}");
        assert!(inv.images.is_empty(), "gemini reads the files itself");
    }

    #[test]
    fn success_and_failure_samples() {
        let out = decode(include_str!("../../tests/fixtures/gemini-stream-json-success.jsonl"));
        let text: String = out
            .iter()
            .filter_map(|o| if let Output::Text(t) = o { Some(t.as_str()) } else { None })
            .collect();
        assert_eq!(text, "ECHO: hello there");
        assert!(!out.iter().any(|o| matches!(o, Output::Error(_))));

        let out = decode(include_str!("../../tests/fixtures/gemini-stream-json-http500.jsonl"));
        assert!(
            out.iter().any(|o| matches!(o, Output::Error(e) if e.contains("mock forced HTTP 500"))),
            "{out:?}"
        );
        assert!(!out.iter().any(|o| matches!(o, Output::Text(_))));
    }

    #[test]
    fn a_turn_with_searches_and_a_refused_tool() {
        // Recorded from gemini 0.61.0 through the loopback server's scripted tool flow, with
        // cca's policy: text and a google_web_search; text and a second search; a
        // run_shell_command the policy keeps out; then the answer.
        let out = decode(include_str!("../../tests/fixtures/gemini-stream-json-tools.jsonl"));
        let text: String = out
            .iter()
            .filter_map(|o| if let Output::Text(t) = o { Some(t.as_str()) } else { None })
            .collect();
        assert_eq!(
            text,
            "Let me search.\n\nOne more search.\n\nAccording to the results, Rust 1.89 stabilised \
             File::lock. Sources: [Guide](https://guide.example.org/x)"
        );
        let tools: Vec<&ToolCall> = out
            .iter()
            .filter_map(|o| if let Output::Tool(t) = o { Some(t) } else { None })
            .collect();
        let lines: Vec<String> = tools.iter().map(|t| t.line()).collect();
        assert_eq!(
            lines,
            [
                "google_web_search: rust 1.89 file locking",
                "google_web_search: file locking on windows",
                "run_shell_command (refused): ls -la",
            ]
        );
        assert!(tools[2].reason.as_deref().unwrap().contains("not found"), "{tools:?}");
        // Each call comes out when its result is in, before the text that follows it.
        let first_tool = out.iter().position(|o| matches!(o, Output::Tool(_))).unwrap();
        // ... announced when it started, right after the text before it.
        assert!(
            matches!(&out[first_tool - 1], Output::ToolStarted(t) if t.line().contains("rust 1.89"))
        );
        assert_eq!(out[first_tool - 2], Output::Text("Let me search.".into()));
        assert_eq!(out[first_tool + 1], Output::Text("\n\n".into()));
    }

    #[test]
    fn a_tool_that_ran_and_failed_is_not_refused() {
        let sample = [
            json!({"type":"tool_use","tool_name":"google_web_search","tool_id":"t1","parameters":{"query":"q"}}),
            json!({"type":"tool_result","tool_id":"t1","status":"error","output":"x","error":{"type":"web_search_failed","message":"quota"}}),
            json!({"type":"tool_use","tool_name":"web_fetch","tool_id":"t2","parameters":{"prompt":"read https://x.example/"}}),
        ];
        let out = decode(&sample.iter().map(|l| format!("{l}\n")).collect::<String>());
        let tools: Vec<&ToolCall> = out
            .iter()
            .filter_map(|o| if let Output::Tool(t) = o { Some(t) } else { None })
            .collect();
        assert_eq!(tools.len(), 2, "{out:?}");
        assert_eq!(
            (tools[0].status, tools[0].reason.as_deref()),
            (ToolStatus::Failed, Some("quota"))
        );
        // The output ended before the second call's result.
        assert_eq!(tools[1].status, ToolStatus::Failed);
        assert_eq!(tools[1].input, "read https://x.example/");
    }
}
