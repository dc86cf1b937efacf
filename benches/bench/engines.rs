//! The sections through the real engines: prompt caching, warm engines and standby.

use super::*;

// Prompt caching: the share of each follow-up's input the provider's cache could serve, through
// the real claude and gemini against the loopback server of tests/support/mock_api.rs.
// Warm engines (docs/DESIGN.md, "Warm engines"): the real claude against the loopback server of
// the tests, run only where `make engines` installed it (CCA_TEST_CLAUDE).

/// What the real engines need to talk to the loopback server at `url`, and nothing else.
/// Prints a table row for each set of timings, and returns their medians.
pub(crate) fn print_rows(rows: impl IntoIterator<Item = (String, Vec<f64>)>) -> Vec<f64> {
    rows.into_iter()
        .map(|(what, samples)| {
            let stats = Stats::new(samples);
            println!("{}", stats.row(&what));
            stats.median()
        })
        .collect()
}

/// The resident memory of a process group's processes, in MiB (VmRSS summed).
pub(crate) fn group_rss_mb(group: i32) -> f64 {
    let kb: u64 = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            rest.split_whitespace().nth(2).and_then(|g| g.parse::<i32>().ok()) == Some(group)
        })
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum();
    kb as f64 / 1024.0
}

pub(crate) fn engine_vars(url: &str) -> Vec<(&'static str, String)> {
    [
        ("ANTHROPIC_BASE_URL", url),
        ("ANTHROPIC_API_KEY", "dummy"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("GOOGLE_GEMINI_BASE_URL", url),
        ("GEMINI_API_KEY", "dummy"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect()
}

/// codex's `config.toml` pointing it at the loopback Responses API at `url`.
pub(crate) fn codex_config(url: &str) -> String {
    format!(
        "model = \"gpt-mock\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
         name = \"mock\"\nbase_url = \"{url}/v1\"\nwire_api = \"responses\"\n\
         request_max_retries = 0\nstream_max_retries = 0\n"
    )
}

/// A real engine run by hand in `dir` (its home too), talking to the loopback server at `url`,
/// on pipes.
pub(crate) fn engine_command(program: &Path, dir: &Path, url: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("HOME", dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(engine_vars(url))
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// How ten turns go to an engine: one-shot through cca with a config, through one `cca chat` or
/// one `cca acp` session (the engine kept warm where it can be), or the engine's own session.
pub(crate) enum CacheRoute {
    Cca(&'static str),
    Chat,
    Acp,
    Own,
}

/// A front end that outlives the turns: its process, and how to give it one question.
pub(crate) enum Front {
    Chat { child: std::process::Child, stdin: std::process::ChildStdin },
    Acp { client: AcpClient, session: serde_json::Value },
}

impl Front {
    /// Asks and returns once the answer ends and is saved (chat: its last words in the
    /// transcript; ACP: the prompt's reply, sent after saving).
    pub(crate) fn ask(&mut self, question: &str, last_words: &str, transcript: &Path) {
        match self {
            Front::Chat { stdin, .. } => {
                writeln!(stdin, "{question}").unwrap();
                let saved =
                    || std::fs::read_to_string(transcript).is_ok_and(|t| t.contains(last_words));
                while !saved() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            Front::Acp { client, session } => {
                let prompt =
                    json!({"sessionId": session, "prompt": [{"type": "text", "text": question}]});
                let sent = client.send("session/prompt", prompt);
                let reply = client.until(|m| m["id"] == sent);
                assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
            }
        }
    }

    pub(crate) fn finish(self) {
        match self {
            Front::Chat { mut child, stdin } => {
                drop(stdin);
                assert!(child.wait().unwrap().success());
            }
            Front::Acp { client, .. } => client.finish(),
        }
    }
}

/// The size of a caching run's turns, in sentences of about 50 bytes.
#[derive(Clone, Copy)]
pub(crate) struct Turns {
    question: usize,
    answer: usize,
}

/// Turns of some 2,800 tokens: over the providers' least cacheable prefix from the first.
const LONG_TURNS: Turns = Turns { question: 105, answer: 110 };
const SHORT_TURNS: Turns = Turns { question: 10, answer: 40 };

impl Bench {
    pub(crate) fn caching(&self) {
        println!(
            "## Prompt caching: the share of a follow-up's input the provider's cache could serve\n"
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let program = |var: &str, path: &str| {
            std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| root.join(path))
        };
        let claude = program("CCA_TEST_CLAUDE", "build/engines/node_modules/.bin/claude");
        let gemini = program("CCA_TEST_GEMINI", "build/engines/node_modules/.bin/gemini");
        if !claude.is_file() || !gemini.is_file() {
            println!(
                "(skipped: `make engines` installs the pinned claude and gemini into build/)\n"
            );
            return;
        }
        println!(
            "Ten one-shot turns of `cca search -r` (a question of about 5.4 KB and an answer of about 5.6 KB: some 2,800 tokens a turn) through the real programs against the loopback server, beside the engine's own multi-turn session fed the same turns (`claude -p -c`, `gemini --resume latest -p`, one process a turn). Each pair of consecutive answer requests is scored by `mock_api::cacheable_share` (bytes of the blocks; Anthropic's breakpoint rules, gemini's common prefix); then requests 3 to 10 together, weighted by their size, and the kilobytes of them the cache could not serve (what is billed at the full price).\n"
        );
        let native = "system_prompt = \"native\"\n";
        let inline = "history = \"inline\"\n";
        self.cache_rows(
            "caching",
            LONG_TURNS,
            &[
                ("claude, cca (default: structured history)", &claude, CacheRoute::Cca("")),
                ("claude, one `cca chat` (claude kept warm)", &claude, CacheRoute::Chat),
                ("claude, one `cca acp` session (claude kept warm)", &claude, CacheRoute::Acp),
                ("claude, cca, native system prompt", &claude, CacheRoute::Cca(native)),
                ("claude, cca, inline history", &claude, CacheRoute::Cca(inline)),
                ("claude's own `claude -p -c`", &claude, CacheRoute::Own),
                ("gemini, cca (default: structured history)", &gemini, CacheRoute::Cca("")),
                ("gemini, one `cca chat`", &gemini, CacheRoute::Chat),
                ("gemini, one `cca acp` session", &gemini, CacheRoute::Acp),
                ("gemini, cca, native system prompt", &gemini, CacheRoute::Cca(native)),
                ("gemini, cca, inline history", &gemini, CacheRoute::Cca(inline)),
                ("gemini's own `gemini --resume latest -p`", &gemini, CacheRoute::Own),
            ],
        );
    }

    /// The caching section's measure for codex: cca's structured history (a rollout codex
    /// resumes) and inline history, beside codex's own `codex exec resume --last`.
    pub(crate) fn codex_caching(&self) {
        println!("## Prompt caching through codex\n");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let codex = std::env::var_os("CCA_TEST_CODEX")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("build/codex/node_modules/.bin/codex"));
        if !codex.is_file() {
            println!("(skipped: `make codex` installs the pinned codex into build/)\n");
            return;
        }
        println!(
            "The same ten one-shot turns as the section above, through the real codex (`CCA_TEST_CODEX`) against the loopback Responses API, beside codex's own `codex exec resume --last` fed the same turns (one process a turn). Each pair of consecutive requests is scored by `mock_api::cacheable_share` (the common prefix of their input items, ids aside); then requests 3 to 10 together, weighted by their size, and the kilobytes of them the cache could not serve.\n"
        );
        self.cache_rows(
            "codex-caching",
            LONG_TURNS,
            &[
                ("codex, cca (default: structured history)", &codex, CacheRoute::Cca("")),
                (
                    "codex, cca, native system prompt",
                    &codex,
                    CacheRoute::Cca("system_prompt = \"native\"\n"),
                ),
                ("codex, cca, inline history", &codex, CacheRoute::Cca("history = \"inline\"\n")),
                ("codex's own `codex exec resume --last`", &codex, CacheRoute::Own),
            ],
        );
        // A request's share is what it repeats over all it holds: long turns leave early
        // requests under a share that shorter ones, with the same history behind them, pass.
        println!(
            "The same, with turns of a more usual size: a question of about 0.5 KB and an answer of about 2.1 KB (some 650 tokens a turn).\n"
        );
        self.cache_rows(
            "codex-caching-short",
            SHORT_TURNS,
            &[
                ("codex, cca (default: structured history)", &codex, CacheRoute::Cca("")),
                ("codex's own `codex exec resume --last`", &codex, CacheRoute::Own),
            ],
        );
    }

    /// A row of the caching table per route: each follow-up's share, then requests 3 to 10's.
    fn cache_rows(&self, prefix: &str, turns: Turns, routes: &[(&str, &Path, CacheRoute)]) {
        println!(
            "| engine, route | request 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 3-10 | not cached, KB |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for (i, (label, program, route)) in routes.iter().enumerate() {
            let bodies = self.cache_turns(&format!("{prefix}-{i}"), program, route, turns);
            let shares: Vec<f64> = bodies
                .windows(2)
                .map(|pair| mock_api::cacheable_share(&pair[0], &pair[1]))
                .collect();
            let (mut cached, mut total) = (0.0, 0.0);
            for (pair, share) in bodies.windows(2).zip(&shares).skip(1) {
                let size = pair[1].to_string().len() as f64;
                cached += share * size;
                total += size;
            }
            let cells: Vec<String> = shares.iter().map(|s| format!("{s:.3}")).collect();
            let (share, new_kb) = (cached / total, (total - cached) / 1000.0);
            println!("| {label} | {} | {share:.3} | {new_kb:.0} |", cells.join(" | "));
        }
        println!();
    }

    /// Ten turns of the size `turns` says through `program` by `route`; the answer requests as
    /// the server got them.
    pub(crate) fn cache_turns(
        &self,
        name: &str,
        program: &Path,
        route: &CacheRoute,
        turns: Turns,
    ) -> Vec<serde_json::Value> {
        let engine = program.file_name().unwrap().to_string_lossy().into_owned();
        let api = mock_api::MockApi::start();
        let home = self.home(name);
        std::fs::create_dir_all(home.dir.join(".gemini")).unwrap();
        std::fs::write(
            home.dir.join(".gemini/settings.json"),
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
        )
        .unwrap();
        // codex reads its provider from its config file.
        std::fs::create_dir_all(home.dir.join(".codex")).unwrap();
        std::fs::write(home.dir.join(".codex/config.toml"), codex_config(&api.url())).unwrap();
        let work = home.dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let vars = engine_vars(&api.url());
        // Varied text: gemini stops on text that repeats itself ("Loop detected").
        let filler = |n: usize, what: &str, count: usize| -> String {
            (0..count)
                .map(|i| {
                    let (a, b) = (i * 7919 % 1013, i * 104_729 % 997);
                    format!("{what} {n} sentence {i} weighs item {a} against {b}. ")
                })
                .collect()
        };
        let mut front = match route {
            CacheRoute::Chat | CacheRoute::Acp => {
                let config =
                    format!("engine = \"{engine}\"\n[engines.{engine}]\nprogram = {program:?}\n");
                std::fs::create_dir_all(home.dir.join("cca")).unwrap();
                std::fs::write(home.dir.join("cca/config.toml"), config).unwrap();
                let mut cmd = home
                    .command(&[if matches!(route, CacheRoute::Chat) { "chat" } else { "acp" }], "");
                cmd.current_dir(&work)
                    .envs(vars.clone())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped());
                if matches!(route, CacheRoute::Chat) {
                    let mut child =
                        cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
                    let stdin = child.stdin.take().unwrap();
                    Some(Front::Chat { child, stdin })
                } else {
                    let mut client = AcpClient::over(cmd);
                    client.call("initialize", json!({"protocolVersion": 1}));
                    let new = client.call("session/new", json!({"cwd": work, "mcpServers": []}));
                    Some(Front::Acp { client, session: new["result"]["sessionId"].clone() })
                }
            }
            _ => None,
        };
        for n in 0..10 {
            let answer = filler(n, "Answer", turns.answer);
            api.set(mock_api::Behavior {
                answer: Some(answer.clone()),
                ..mock_api::Behavior::default()
            });
            let question = filler(n, "Question", turns.question);
            let mut cmd = match route {
                CacheRoute::Chat | CacheRoute::Acp => {
                    let front = front.as_mut().expect("started above");
                    let transcript = home.dir.join("cca/sessions/latest");
                    front.ask(&question, answer.trim_end(), &transcript);
                    continue;
                }
                CacheRoute::Cca(config) => {
                    home.config(&format!("[engines.{engine}]\nprogram = {:?}\n{config}", program));
                    let mut args = vec!["search", "-q", "-e", &engine];
                    if n > 0 {
                        args.push("-r");
                    }
                    args.push(&question);
                    home.command(&args, "")
                }
                CacheRoute::Own => {
                    let mut cmd = Command::new(program);
                    home.env(&mut cmd, "");
                    if engine == "claude" {
                        cmd.args(["-p", "--tools=WebSearch,WebFetch"]);
                        cmd.args(if n > 0 { &["-c"][..] } else { &[] });
                        cmd.arg(&question);
                    } else if engine == "codex" {
                        cmd.args(["exec", "--json", "--skip-git-repo-check"]);
                        cmd.args(if n > 0 { &["resume", "--last"][..] } else { &[] });
                        cmd.arg(&question);
                    } else {
                        cmd.args(["--skip-trust", "-o", "text"]);
                        cmd.args(if n > 0 { &["--resume", "latest"][..] } else { &[] });
                        cmd.args(["-p", &question]);
                    }
                    cmd
                }
            };
            // A folder of its own: gemini lists the working folder in its first message, and
            // CCA_HOME (in the bench's home) changes at every turn.
            cmd.current_dir(&work).envs(vars.clone()).stdout(Stdio::null()).stderr(Stdio::null());
            assert!(cmd.status().unwrap().success(), "{name}: turn {n} failed");
        }
        if let Some(front) = front {
            front.finish();
        }
        api.turns().into_iter().map(|t| t.body).collect()
    }
}

impl Bench {
    pub(crate) fn warm(&self) {
        println!("## Warm engines: a follow-up's first chunk through the real claude and gemini\n");
        println!(
            "The real programs (`CCA_TEST_CLAUDE`, `CCA_TEST_GEMINI`) against the loopback server of tests/support/mock_api.rs, which answers at once. Over ACP, from writing `session/prompt` to reading the first `agent_message_chunk`; in `cca chat` (lines on a pipe), from writing the line to reading the answer's first byte. Five prompts per session: the first starts the engine; the follow-ups find it kept (`keep_warm`, default), or start it again (`keep_warm = \"off\"`, cold as every turn was before). Beside them, the engine's own multi-turn session fed the same five messages (claude: one process on stream-json input; gemini: `gemini --acp` spoken to directly).\n"
        );
        self.each_real_engine(Bench::warm_engine);
    }

    /// The warm section's measure for codex, kept as its app server.
    pub(crate) fn codex_warm(&self) {
        println!("## Warm engines: a follow-up's first chunk through the real codex\n");
        match std::env::var_os("CCA_TEST_CODEX").map(PathBuf::from).filter(|p| p.exists()) {
            Some(codex) => {
                println!(
                    "codex (`CCA_TEST_CODEX`), kept as `codex app-server`; its own session is an app server spoken to directly, five `turn/start` in one thread, each timed to its first `item/agentMessage/delta`.\n"
                );
                self.warm_engine("codex", &codex);
            }
            None => println!("codex: skipped, not installed (`make codex`).\n"),
        }
    }

    pub(crate) fn warm_engine(&self, engine: &str, program: &Path) {
        let api = mock_api::MockApi::start();
        let home = |name: &str, keep: &str| {
            let dir = self.engine_home(engine, name, &format!("keep_warm = \"{keep}\"\n"));
            // codex reads its provider from its config file.
            std::fs::create_dir_all(dir.join(".codex")).unwrap();
            std::fs::write(dir.join(".codex/config.toml"), codex_config(&api.url())).unwrap();
            dir
        };
        let command =
            |dir: &Path, args: &[&str]| self.cca_on_engine(engine, program, &api.url(), dir, args);
        const SESSIONS: usize = 4;
        const PROMPTS: usize = 5;
        // (first prompts, follow-ups) in ms.
        let over_acp = |dir: &Path| {
            let (mut first, mut later) = (Vec::new(), Vec::new());
            for _ in 0..SESSIONS {
                let mut acp = AcpClient::over(command(dir, &["acp"]));
                acp.time_prompts(dir, PROMPTS, &mut first, &mut later);
                acp.finish();
            }
            (first, later)
        };
        let in_chat = |dir: &Path| {
            let (mut first, mut later) = (Vec::new(), Vec::new());
            for _ in 0..SESSIONS {
                let mut child = command(dir, &["chat"]).spawn().unwrap();
                let mut stdin = child.stdin.take().unwrap();
                let mut stdout = child.stdout.take().unwrap();
                let (tx, chunks) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = stdout.read(&mut buf) {
                        let _ = tx.send((Instant::now(), buf[..n].to_vec()));
                    }
                });
                for n in 0..PROMPTS {
                    // What is left of the last answer (its line ends) is not this one's.
                    while chunks.try_recv().is_ok() {}
                    let start = Instant::now();
                    writeln!(stdin, "message {n}").unwrap();
                    let (mut seen, mut at) = (Vec::new(), None);
                    let wanted = format!("ECHO: message {n}");
                    while !String::from_utf8_lossy(&seen).contains(&wanted) {
                        let (when, chunk) = chunks.recv().expect("cca chat answers");
                        seen.extend_from_slice(&chunk);
                        // The answer starts with it (before it: the line editor's prompt).
                        if at.is_none() && String::from_utf8_lossy(&seen).contains("ECHO") {
                            at = Some(when);
                        }
                    }
                    let ms = (at.unwrap() - start).as_secs_f64() * 1000.0;
                    if n == 0 {
                        first.push(ms)
                    } else {
                        later.push(ms)
                    }
                    // The answer is saved just after its last byte: the next line waits for
                    // that, unmeasured.
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
                drop(stdin);
                assert!(child.wait().unwrap().success());
            }
            (first, later)
        };
        let (acp_first, acp_warm) = over_acp(&home("warm-acp", "10m"));
        let (_, acp_cold) = over_acp(&home("cold-acp", "off"));
        let (chat_first, chat_warm) = in_chat(&home("warm-chat", "10m"));
        let (_, chat_cold) = in_chat(&home("cold-chat", "off"));
        let (own_first, own_later) = self.own_session(engine, program, &api.url());
        println!("{TABLE}");
        let rows = [
            (format!("{engine}, ACP: first prompt (the engine starts)"), acp_first),
            (format!("{engine}, ACP: follow-up, kept warm"), acp_warm),
            (format!("{engine}, ACP: follow-up, `keep_warm = \"off\"`"), acp_cold),
            (format!("{engine}, chat: first message (the engine starts)"), chat_first),
            (format!("{engine}, chat: follow-up, kept warm"), chat_warm),
            (format!("{engine}, chat: follow-up, `keep_warm = \"off\"`"), chat_cold),
            (format!("{engine}'s own session: first message"), own_first),
            (format!("{engine}'s own session: follow-up"), own_later),
        ];
        let medians = print_rows(rows);
        println!(
            "\nTarget ({engine}): a follow-up's first chunk at most 0.3x as long after the prompt as a cold first one: ACP {:.2}x, chat {:.2}x (medians).\n",
            medians[1] / medians[0],
            medians[4] / medians[3]
        );
    }

    /// Runs `run` for the real claude and gemini, those installed (`make engines`).
    pub(crate) fn each_real_engine(&self, run: fn(&Bench, &str, &Path)) {
        for (engine, var) in [("claude", "CCA_TEST_CLAUDE"), ("gemini", "CCA_TEST_GEMINI")] {
            match std::env::var_os(var).map(PathBuf::from).filter(|p| p.exists()) {
                Some(program) => run(self, engine, &program),
                None => println!("{engine}: skipped, not installed (`make engines`).\n"),
            }
        }
    }

    /// A home for cca on a real engine (gemini's API key auth chosen), its config `engine = `
    /// this one and `config`.
    pub(crate) fn engine_home(&self, engine: &str, name: &str, config: &str) -> PathBuf {
        let dir = self.root.path().join(format!("{engine}-{name}"));
        std::fs::create_dir_all(dir.join("cca")).unwrap();
        std::fs::create_dir_all(dir.join(".gemini")).unwrap();
        let settings = r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#;
        std::fs::write(dir.join(".gemini/settings.json"), settings).unwrap();
        let config = format!("engine = \"{engine}\"\n{config}");
        std::fs::write(dir.join("cca/config.toml"), config).unwrap();
        dir
    }

    /// cca with `args` in a home from [`Bench::engine_home`], on the real engine and the
    /// loopback server at `url`, on pipes (stderr discarded).
    pub(crate) fn cca_on_engine(
        &self,
        engine: &str,
        program: &Path,
        url: &str,
        dir: &Path,
        args: &[&str],
    ) -> Command {
        let mut cmd = engine_command(&self.cca, dir, url);
        cmd.args(args)
            .env("CCA_HOME", dir.join("cca"))
            .env("TERM", "dumb")
            .env(format!("CCA_{}", engine.to_uppercase()), program);
        cmd
    }

    pub(crate) fn standby(&self) {
        println!(
            "## Standby: the first byte of a `,` follow-up through the real claude and gemini\n"
        );
        println!(
            "The real programs against the loopback server of tests/support/mock_api.rs, which answers at once. Each follow-up is `cca search -r` (what `,` runs), timed from starting cca to the answer's first byte on its stdout. With `standby = \"10m\"` the follow-up takes the engine the turn before left waiting (each waits until `cca standby` says it is ready, unmeasured, as while a user types); with standby off (the default) it starts the engine. Beside them, a follow-up in the engine's own multi-turn session (one process; claude on stream-json input, `gemini --acp`). Memory: the resident set of a waiting engine's processes (VmRSS summed over its process group).\n"
        );
        self.each_real_engine(Bench::standby_engine);
    }

    pub(crate) fn standby_engine(&self, engine: &str, program: &Path) {
        const FOLLOW_UPS: usize = 8;
        let api = mock_api::MockApi::start();
        let url = api.url();
        let first_byte = |dir: &Path, args: &[&str]| {
            let start = Instant::now();
            let mut child = self.cca_on_engine(engine, program, &url, dir, args).spawn().unwrap();
            drop(child.stdin.take());
            let mut stdout = child.stdout.take().unwrap();
            let mut byte = [0u8; 1];
            assert_eq!(stdout.read(&mut byte).unwrap(), 1, "cca answered");
            let ms = start.elapsed().as_secs_f64() * 1000.0;
            std::io::copy(&mut stdout, &mut std::io::sink()).unwrap();
            assert!(child.wait().unwrap().success());
            ms
        };
        // The process group of the engine waiting, once it is ready.
        let waiting = |dir: &Path| -> i32 {
            for _ in 0..600 {
                let out = self.cca_on_engine(engine, program, &url, dir, &["standby"]).output();
                let out = String::from_utf8_lossy(&out.unwrap().stdout).into_owned();
                let ready = out.lines().find(|l| l.starts_with(engine) && !l.contains("starting"));
                if let Some(group) = ready.and_then(|l| l.rsplit_once("process group ")) {
                    return group.1.trim_end_matches(')').parse().unwrap();
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            panic!("no {engine} waits on standby");
        };
        let follow_ups = |dir: &Path, on: bool| {
            let mut samples = Vec::new();
            first_byte(dir, &["search", "question 0"]);
            let mut memory = Vec::new();
            for n in 1..=FOLLOW_UPS {
                if on {
                    memory.push(group_rss_mb(waiting(dir)));
                }
                samples.push(first_byte(dir, &["search", "-r", &format!("question {n}")]));
            }
            if on {
                let mut end = self.cca_on_engine(engine, program, &url, dir, &["standby", "--end"]);
                end.status().unwrap().checked();
            }
            (samples, memory)
        };
        let (off, _) = follow_ups(&self.engine_home(engine, "standby-off", ""), false);
        let (on, memory) =
            follow_ups(&self.engine_home(engine, "standby-on", "standby = \"10m\"\n"), true);
        let (_, own) = self.own_session(engine, program, &url);
        println!("{TABLE}");
        let rows = [
            (format!("{engine}: `,` follow-up, standby off (the engine starts)"), off),
            (format!("{engine}: `,` follow-up, standby on (the waiting engine)"), on),
            (format!("{engine}'s own session: follow-up"), own),
        ];
        let medians = print_rows(rows);
        let memory = Stats::new(memory);
        println!(
            "\n{engine}: standby on takes a follow-up's first byte from {:.0} ms to {:.0} ms ({:.2}x); a waiting {engine} holds {:.0} MiB resident (median of {}, max {:.0} MiB).\n",
            medians[0],
            medians[1],
            medians[1] / medians[0],
            memory.median(),
            FOLLOW_UPS,
            memory.pct(1.0),
        );
    }

    /// The engine's own multi-turn session, for comparison: five messages to one process, each
    /// timed from writing it to the first text.
    pub(crate) fn own_session(
        &self,
        engine: &str,
        program: &Path,
        url: &str,
    ) -> (Vec<f64>, Vec<f64>) {
        match engine {
            "gemini" => self.gemini_own_session(program, url),
            "codex" => self.codex_own_session(program, url),
            _ => self.claude_own_session(program, url),
        }
    }

    /// gemini's own multi-turn session: `gemini --acp` spoken to directly, five prompts in one
    /// session.
    pub(crate) fn gemini_own_session(&self, gemini: &Path, url: &str) -> (Vec<f64>, Vec<f64>) {
        let dir = self.root.path().join("gemini-own-session");
        std::fs::create_dir_all(dir.join(".gemini")).unwrap();
        let settings = r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#;
        std::fs::write(dir.join(".gemini/settings.json"), settings).unwrap();
        let (mut first, mut later) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            let mut cmd = engine_command(gemini, &dir, url);
            cmd.args(["--acp", "--skip-trust"]);
            let mut acp = AcpClient::over(cmd);
            acp.time_prompts(&dir, 5, &mut first, &mut later);
            acp.finish();
        }
        (first, later)
    }

    /// codex's own multi-turn session: `codex app-server` spoken to directly, five `turn/start`
    /// in one thread, each timed from writing it to the first delta of the answer.
    pub(crate) fn codex_own_session(&self, codex: &Path, url: &str) -> (Vec<f64>, Vec<f64>) {
        let dir = self.root.path().join("codex-own-session");
        std::fs::create_dir_all(dir.join(".codex")).unwrap();
        std::fs::write(dir.join(".codex/config.toml"), codex_config(url)).unwrap();
        let (mut first, mut later) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            let mut child = engine_command(codex, &dir, url).arg("app-server").spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let mut until = |wanted: &dyn Fn(&serde_json::Value) -> bool| loop {
                let line = lines.next().expect("codex answers").unwrap();
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                if wanted(&v) {
                    return v;
                }
            };
            let client = json!({"name": "bench", "version": "0"});
            writeln!(
                stdin,
                "{}",
                json!({"id": 0, "method": "initialize", "params": {"clientInfo": client}})
            )
            .unwrap();
            until(&|v| v["id"] == 0);
            writeln!(stdin, "{}", json!({"method": "initialized"})).unwrap();
            let start = json!({"id": 1, "method": "thread/start", "params": {"cwd": dir, "ephemeral": true}});
            writeln!(stdin, "{start}").unwrap();
            let thread = until(&|v| v["id"] == 1)["result"]["thread"]["id"].clone();
            for n in 0..5 {
                let input = [json!({"type": "text", "text": format!("message {n}")})];
                let turn = json!({"id": 2 + n, "method": "turn/start",
                                  "params": {"threadId": thread, "input": input}});
                let start = Instant::now();
                writeln!(stdin, "{turn}").unwrap();
                until(&|v| v["method"] == "item/agentMessage/delta");
                let ms = start.elapsed().as_secs_f64() * 1000.0;
                if n == 0 {
                    first.push(ms)
                } else {
                    later.push(ms)
                }
                until(&|v| v["method"] == "turn/completed");
            }
            drop(stdin);
            let _ = child.kill();
            child.wait().unwrap();
        }
        (first, later)
    }

    /// claude's own multi-turn session: one process taking the messages on stream-json input,
    /// each timed from writing its line to the first text delta.
    pub(crate) fn claude_own_session(&self, claude: &Path, url: &str) -> (Vec<f64>, Vec<f64>) {
        let dir = self.root.path().join("own-session");
        std::fs::create_dir_all(&dir).unwrap();
        let (mut first, mut later) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            let mut child = engine_command(claude, &dir, url)
                .args(["-p", "--input-format", "stream-json", "--output-format", "stream-json"])
                .args(["--verbose", "--include-partial-messages", "--tools=WebSearch,WebFetch"])
                .args(["--no-session-persistence"])
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            for n in 0..5 {
                let message = json!({"type": "user", "message": {"role": "user",
                    "content": [{"type": "text", "text": format!("message {n}")}]}});
                let start = Instant::now();
                writeln!(stdin, "{message}").unwrap();
                let mut at = None;
                for line in lines.by_ref() {
                    let line: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
                    let delta = &line["event"]["delta"];
                    if at.is_none() && delta["type"] == "text_delta" {
                        at = Some(start.elapsed().as_secs_f64() * 1000.0);
                    }
                    if line["type"] == "result" {
                        break;
                    }
                }
                let ms = at.expect("claude answered");
                if n == 0 { first.push(ms) } else { later.push(ms) }
            }
            drop(stdin);
            child.wait().unwrap();
        }
        (first, later)
    }
}
