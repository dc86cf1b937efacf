//! The turn sections: overhead, version, rendering, streaming, long transcripts, `cca acp`
//! against the command line, after a clear, many sessions, memory, `llm`, compaction.

use super::*;

impl Bench {
    pub(crate) fn overhead(&self) {
        println!("## Overhead: cca versus the engine alone\n");
        println!("An instant engine (the fake engine answering `hi`), the same input on stdin.\n");
        let home = self.home("overhead");
        home.cca(&["search", "-q", "first"], "say hi").checked();
        let input = framed_input(&home);
        let direct = time_runs(60, || {
            let mut engine = Command::new(home.dir.join("bin/plain-engine"));
            engine.env("FAKE_SCRIPT", "say hi");
            run_with_input(engine, input.as_bytes());
        });
        let resume = time_runs(60, || {
            home.cca(&["search", "-q", "-r", "--no-compact", "next"], "say hi").checked()
        });
        let new = time_runs(60, || home.cca(&["search", "-q", "new"], "say hi").checked());
        println!("{TABLE}");
        println!("{}", direct.row("engine alone"));
        println!("{}", resume.row("`cca search -r` (a short session)"));
        println!("{}", new.row("`cca search` (a new session)"));
        println!(
            "\nAdded by cca at the median: {:.2} ms continuing a session, {:.2} ms starting one (target: 5 ms).\n",
            resume.median() - direct.median(),
            new.median() - direct.median()
        );
    }

    /// Where cca's share of a turn goes: starting a cca process at all (`--version`), and the
    /// rest, the turn's own work, the guard that keeps the engine from outliving cca among it.
    pub(crate) fn turn_costs(&self) {
        println!("## Where a turn's milliseconds go\n");
        let home = self.home("turn-costs");
        home.cca(&["search", "-q", "first"], "say hi").checked();
        let input = framed_input(&home);
        let direct = time_runs(100, || {
            let mut engine = Command::new(home.dir.join("bin/plain-engine"));
            engine.env("FAKE_SCRIPT", "say hi");
            run_with_input(engine, input.as_bytes());
        });
        let version = time_runs(100, || {
            let status =
                Command::new(&self.cca).arg("--version").stdout(Stdio::null()).status().unwrap();
            assert!(status.success());
        });
        let turn = time_runs(100, || {
            home.cca(&["search", "-q", "-r", "--no-compact", "next"], "say hi").checked()
        });
        println!("{TABLE}");
        println!("{}", direct.row("the engine alone"));
        println!("{}", version.row("`cca --version` (a cca process, start to end)"));
        println!("{}", turn.row("`cca search -r` (a short session)"));
        let added = turn.median() - direct.median();
        println!(
            "\nA turn adds {added:.2} ms to the engine at the median: {:.2} ms starting a cca process, {:.2} ms the rest (the guard's fork, the turn's own work).\n",
            version.median(),
            added - version.median()
        );
    }

    pub(crate) fn version(&self) {
        println!("## `cca --version`\n");
        let stats = time_runs(100, || {
            let status =
                Command::new(&self.cca).arg("--version").stdout(Stdio::null()).status().unwrap();
            assert!(status.success());
        });
        println!("{TABLE}\n{}\n\nTarget: under 3 ms.\n", stats.row("cca --version"));
    }

    pub(crate) fn render(&self) {
        println!("## Rendering answers\n");
        let size = std::fs::metadata(&self.cca).unwrap().len();
        println!("Release binary: {:.2} MB ({size} bytes).\n", size as f64 / 1e6);
        println!(
            "`cca show` from start to the first byte on its stdout (piped, `TERM=xterm-256color`, `render` set in config.toml; `cca show` prints in one write, so this is also its whole run). The answer: {} bytes of headings, prose, a list and a table; with code, also a {}-line Rust block.\n",
            PROSE.len(),
            CODE.lines().count() - 2
        );
        println!("{TABLE}");
        for (label, answer, mode) in [
            ("render = never", PROSE.to_string(), "never"),
            ("render = always, prose", PROSE.to_string(), "always"),
            ("render = always, with code", format!("{PROSE}{CODE}"), "always"),
        ] {
            let home = self.home(&format!("render-{mode}-{}", answer.len()));
            // The fake engine echoes the question: the answer is "ECHO: " and the markdown.
            home.cca(&["search", "-q", &answer], "echo").checked();
            std::fs::write(
                home.dir.join("cca/config.toml"),
                format!("render = \"{mode}\"\nengine = \"plain\"\n[engines.plain]\ncommand = [\"plain-engine\"]\n"),
            )
            .unwrap();
            let stats = time_runs(40, || {
                let mut cmd = home.command(&["show"], "");
                cmd.env("TERM", "xterm-256color").stdout(Stdio::piped());
                let mut child = cmd.spawn().unwrap();
                let mut first = [0u8; 1];
                std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
                // The clock stops at the first byte; the rest is drained before the next run.
                let mut rest = Vec::new();
                std::io::Read::read_to_end(child.stdout.as_mut().unwrap(), &mut rest).unwrap();
                assert!(child.wait().unwrap().success());
            });
            println!("{}", stats.row(label));
        }

        println!(
            "\nThe renderer in process (what `cca search` and `cca chat` will pay per line as an answer streams), in microseconds. The first code line of a process loads the syntaxes: measured in a fresh process each run.\n"
        );
        println!(
            "| what | median µs | p10 | p90 | max | runs |\n| --- | ---: | ---: | ---: | ---: | ---: |"
        );
        let style = cca::render::Style { color: true, hyperlinks: true, width: 100, live: true };
        let micros = |n: usize, mut f: Box<dyn FnMut()>| {
            let stats = time_runs(n, &mut *f);
            Stats::new(stats.samples.iter().map(|ms| ms * 1000.0).collect())
        };
        let first_words = micros(
            200,
            Box::new(move || {
                let mut out = String::new();
                cca::render::Renderer::new(style).push("The answer starts", &mut out);
                assert!(!out.is_empty());
            }),
        );
        println!("{}", first_words.row("first words of an unfinished line, shown raw"));
        let first_line = micros(
            200,
            Box::new(move || {
                let mut out = String::new();
                cca::render::Renderer::new(style)
                    .push("Use **bold**, `code` and [a link](https://x.y).\n", &mut out);
                assert!(out.contains('\x1b'));
            }),
        );
        println!("{}", first_line.row("a finished line of prose, rendered"));
        let cold: Vec<f64> = (0..20)
            .map(|_| {
                let out = Command::new(std::env::current_exe().unwrap())
                    .arg("__first_code_line")
                    .output()
                    .unwrap();
                String::from_utf8(out.stdout).unwrap().trim().parse::<f64>().unwrap()
            })
            .collect();
        println!("{}", Stats::new(cold).row("first code line of a process (loads the syntaxes)"));
        let mut renderer = cca::render::Renderer::new(style);
        let mut out = String::new();
        renderer.push("```rust\n", &mut out);
        let lines: Vec<&str> = CODE.lines().skip(1).filter(|l| !l.starts_with("```")).collect();
        let mut k = 0;
        let warm = micros(
            400,
            Box::new(move || {
                out.clear();
                renderer.push(lines[k % lines.len()], &mut out);
                renderer.push("\n", &mut out);
                k += 1;
            }),
        );
        println!("{}", warm.row("a code line, highlighted (syntaxes loaded)"));
        let answer = format!("{PROSE}{CODE}").repeat(20);
        let whole = time_runs(10, || {
            let _ = cca::render::render(&answer, style);
        });
        println!(
            "\nA whole answer of {} KB (prose, tables and code) renders in {:.2} ms at the median ({:.1} MB/s).\n",
            answer.len() / 1000,
            whole.median(),
            answer.len() as f64 / 1e6 / (whole.median() / 1000.0)
        );
    }

    pub(crate) fn streaming(&self) {
        println!("## Streaming: engine write to cca's stdout\n");
        println!(
            "The engine writes 200 lines 5 ms apart, each stamped with the wall clock as it is written; the bench stamps each as it reads it from cca's stdout.\n"
        );
        let home = self.home("streaming");
        let mut lags = Vec::new();
        for (engine, script) in [("plain", "stamps 200 5"), ("claude", "stamps 200 5")] {
            let mut cmd = home.command(&["search", "-q", "-e", engine, "go"], script);
            cmd.stdout(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            let reader = BufReader::new(child.stdout.take().unwrap());
            let mut these = Vec::new();
            for line in reader.lines() {
                let line = line.unwrap();
                let now = now_ns();
                if let Some(stamp) = line.strip_prefix('T').and_then(|t| t.parse::<u128>().ok()) {
                    these.push((now - stamp) as f64 / 1e6);
                }
            }
            assert!(child.wait().unwrap().success());
            let stats = Stats::new(these.clone());
            lags.push((engine, stats));
        }
        println!("{TABLE}");
        for (engine, stats) in &lags {
            let label = if *engine == "claude" {
                "claude's stream-json (decoded)"
            } else {
                "plain text engine"
            };
            println!("{}", stats.row(label));
        }
        println!("\nTarget: under 1 ms at the median.\n");
    }

    pub(crate) fn long_transcripts(&self) {
        println!("## Long transcripts: `--resume` until the engine has its input\n");
        println!(
            "From starting `cca search -r` to the engine reading the end of its stdin (`--no-compact`: the whole history is sent). Answers of 2 KB; 1,000 exchanges per 2 MB.\n"
        );
        println!(
            "| transcript | exchanges | median ms | p10 | p90 | MB/s | runs |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for (mb, exchanges, runs) in
            [(2u64, 1_000u64, 15usize), (20, 10_000, 10), (200, 100_000, 5)]
        {
            let home = self.home(&format!("long-{mb}"));
            let size = write_long_session(&home, exchanges);
            let stamp = home.dir.join("eof");
            let script = format!("drain;eof-stamp {};say ok", stamp.display());
            let mut samples = Vec::new();
            for _ in 0..runs {
                let _ = std::fs::remove_file(&stamp);
                let start = now_ns();
                home.cca(&["search", "-q", "-r", "--no-compact", "next"], &script).checked();
                let end: u128 = std::fs::read_to_string(&stamp).unwrap().parse().unwrap();
                samples.push((end - start) as f64 / 1e6);
                // Keep the file as it was: drop the exchange just appended.
                truncate_to(&home, size);
            }
            let s = Stats::new(samples);
            println!(
                "| {:.0} MB | {exchanges} | {:.1} | {:.1} | {:.1} | {:.0} | {runs} |",
                size as f64 / 1e6,
                s.median(),
                s.pct(0.1),
                s.pct(0.9),
                size as f64 / 1e6 / (s.median() / 1000.0)
            );
        }
        println!(
            "\nTarget: under 50 ms for 20 MB, growing linearly. (For reference: aichat takes about 0.9 s to load a session of that size, llm about 1.5 s to continue a long one.)\n"
        );
    }

    pub(crate) fn acp(&self) {
        println!("## ACP: `cca acp` against the command line\n");
        println!(
            "The instant engine answering `hi`. The command line's time to first byte is from starting `cca search -r` to the first byte on its stdout; over ACP, from writing `session/prompt` to a running `cca acp` to reading the first `agent_message_chunk`. `session/load` replays a 10,000-exchange session (20 MB): from writing the request to reading its response, which comes after all 20,000 replayed updates; the client reads every line but parses only lines with an `\"id\":` (the response), so the time is cca's reading, replaying and writing, not the client's JSON parsing.\n"
        );
        let home = self.home("acp");
        home.cca(&["search", "-q", "start"], "say hi").checked();
        let cli = time_runs(30, || {
            let mut child = home
                .command(&["search", "-q", "-r", "go"], "say hi")
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut first = [0u8; 1];
            child.stdout.take().unwrap().read_exact(&mut first).unwrap();
            assert!(child.wait().unwrap().success());
        });
        let mut acp = AcpClient::start(&home, "say hi");
        let id = acp.call("session/new", json!({"cwd": home.dir, "mcpServers": []}))["result"]
            ["sessionId"]
            .clone();
        let prompt = json!({"sessionId": id, "prompt": [{"type": "text", "text": "go"}]});
        let mut first_chunk = Vec::new();
        for _ in 0..30 {
            let start = Instant::now();
            let n = acp.send("session/prompt", prompt.clone());
            acp.until(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
            first_chunk.push(start.elapsed().as_secs_f64() * 1000.0);
            acp.until(|m| m["id"] == n);
        }
        acp.finish();
        let long = self.home("acp-load");
        write_long_session(&long, 10_000);
        let mut acp = AcpClient::start(&long, "say hi");
        let load = time_runs(10, || {
            let params = json!({"sessionId": "20261121-101500", "cwd": long.dir, "mcpServers": []});
            let n = acp.send("session/load", params);
            let reply = acp.response(n);
            assert!(reply["result"].is_object(), "{reply}");
        });
        acp.finish();
        println!("{TABLE}");
        println!("{}", cli.row("command line: start to first byte (`cca search -r`)"));
        println!("{}", Stats::new(first_chunk).row("ACP: `session/prompt` to first chunk"));
        println!("{}", load.row("ACP: `session/load` of 10,000 exchanges"));
        println!(
            "\nTargets: the first chunk within 1 ms of the command line's first byte; the load at the transcript scan's speed (the long-transcripts table).\n"
        );
    }

    pub(crate) fn after_clear(&self) {
        println!("## Long transcripts after a clear or a compaction: `--resume`\n");
        println!(
            "`cca search -r` start to finish (an instant engine), each run the first turn after a `cca clear` or a `cca compact` (4 exchanges kept), on a long session and, in between, on a session of one exchange (so both see the same machine). Answers of 2 KB; 1,000 exchanges per 2 MB.\n"
        );
        println!(
            "| transcript | after | median ms | p10 | p90 | one exchange, median ms | ratio | runs |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        let resume = |home: &Home| home.cca(&["search", "-q", "-r", "next"], "say ok").checked();
        let one = self.home("after-one");
        let one_size = write_long_session(&one, 1);
        let mut worst: f64 = 0.0;
        for (mb, exchanges, runs) in
            [(2u64, 1_000u64, 30usize), (20, 10_000, 30), (200, 100_000, 20)]
        {
            for after in ["clear", "compact"] {
                let home = self.home(&format!("after-{after}-{mb}"));
                let size = write_long_session(&home, exchanges);
                let (mut long, mut short) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    let script = "drain;say the summary of the conversation so far";
                    let mut cmd = home.command(&[after], script);
                    assert!(cmd.stderr(Stdio::null()).status().unwrap().success());
                    long.push(time_runs(1, || resume(&home)).median());
                    short.push(time_runs(1, || resume(&one)).median());
                    // Keep it one exchange: drop the exchange just appended.
                    truncate_to(&one, one_size);
                }
                let (long, short) = (Stats::new(long), Stats::new(short));
                let ratio = long.median() / short.median();
                worst = worst.max(ratio);
                println!(
                    "| {:.0} MB | {after} | {:.2} | {:.2} | {:.2} | {:.2} | {ratio:.2} | {runs} |",
                    size as f64 / 1e6,
                    long.median(),
                    long.pct(0.1),
                    long.pct(0.9),
                    short.median(),
                );
            }
        }
        println!(
            "\nTarget: at most 1.5x as long as continuing the one-exchange session; the largest ratio here is {worst:.2}.\n"
        );
    }

    pub(crate) fn sessions(&self) {
        println!("## Many sessions: `cca sessions`\n");
        let home = self.home("sessions");
        let dir = home.dir.join("cca/sessions");
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..10_000u64 {
            let id = format!("2026{:04}-{:06}", i / 1000 + 101, i % 1000);
            let text = session_text(&id, 3, 1500);
            std::fs::write(dir.join(format!("session_{id}.md")), text).unwrap();
        }
        let list = || {
            let out = home.command(&["sessions"], "").stdout(Stdio::null()).status().unwrap();
            assert!(out.success());
        };
        let cold = time_runs(1, list);
        let warm = time_runs(20, list);
        println!("{TABLE}");
        println!("{}", cold.row("first listing (reads every transcript, writes the index)"));
        println!("{}", warm.row("later listings (index)"));
        println!("\n10,000 sessions of 3 exchanges. Target: under 100 ms.\n");
    }

    pub(crate) fn memory(&self) {
        println!("## Memory: peak RSS\n");
        println!(
            "Peak resident set of cca and the (lean) fake engine it runs, from `getrusage(RUSAGE_CHILDREN)` in a fresh process.\n"
        );
        println!("| case | peak RSS MB |\n| --- | ---: |");
        let home = self.home("memory-answer");
        home.cca(&["search", "-q", "start"], "say hi").checked();
        let answer =
            self.rss(&home, &["search", "-q", "-r", "--no-compact", "big"], "bytes 200000000");
        println!(
            "| a 200 MB answer streamed through cca (and teed to the transcript) | {:.1} |",
            answer
        );
        let home = self.home("memory-transcript");
        write_long_session(&home, 100_000);
        let transcript =
            self.rss(&home, &["search", "-q", "-r", "--no-compact", "next"], "drain;say ok");
        println!("| `--resume` on a 200 MB transcript (all of it sent) | {:.1} |", transcript);
        let raw = self.rss(&home, &["show", "--raw"], "");
        println!("| `cca show --raw` on a 200 MB transcript | {:.1} |", raw);
        let readable = self.rss(&home, &["show"], "");
        println!("| `cca show` on a 200 MB transcript | {:.1} |", readable);
        let home = self.home("memory-small");
        home.cca(&["search", "-q", "start"], "say hi").checked();
        let small = self.rss(&home, &["search", "-q", "-r", "--no-compact", "next"], "say hi");
        println!("| `--resume` on a short session, for scale | {:.1} |", small);

        println!("\nTarget: under 16 MB.\n");
    }

    pub(crate) fn rss(&self, home: &Home, args: &[&str], script: &str) -> f64 {
        let me = std::env::current_exe().unwrap();
        let mut cmd = Command::new(me);
        cmd.arg("__rss").arg(&self.cca).args(args);
        home.env(&mut cmd, script);
        let out = cmd.stdout(Stdio::piped()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().unwrap() / 1024.0
    }

    pub(crate) fn llm(&self) {
        println!("## Side by side: continuing a conversation, cca and llm\n");
        let llm = Path::new(env!("CARGO_MANIFEST_DIR")).join("build/llm-venv/bin/llm");
        if !llm.is_file() {
            println!("(skipped: `make llm` installs llm with llm-echo into build/)\n");
            return;
        }
        println!(
            "Both continue a 20-exchange conversation with an instant model: llm 0.36 with `-c -m echo` (its SQLite log), cca with `-r` and the fake engine (its markdown transcript).\n"
        );
        let home = self.home("llm");
        let llm_home = home.dir.join("llm-home");
        std::fs::create_dir_all(&llm_home).unwrap();
        let llm_cmd = |args: &[&str]| {
            let mut c = Command::new(&llm);
            c.args(args).env("LLM_USER_PATH", &llm_home).stdout(Stdio::null()).stdin(Stdio::null());
            c
        };
        assert!(llm_cmd(&["-m", "echo", "turn 1"]).status().unwrap().success());
        home.cca(&["search", "-q", "turn 1"], "say hi").checked();
        for i in 2..=20 {
            assert!(
                llm_cmd(&["-c", "-m", "echo", &format!("turn {i}")]).status().unwrap().success()
            );
            home.cca(&["search", "-q", "-r", &format!("turn {i}")], "say hi").checked();
        }
        let llm_stats = time_runs(15, || {
            assert!(llm_cmd(&["-c", "-m", "echo", "and then?"]).status().unwrap().success());
        });
        let cca_stats = time_runs(15, || {
            home.cca(&["search", "-q", "-r", "--no-compact", "and then?"], "say hi").checked()
        });
        println!("{TABLE}");
        println!("{}", llm_stats.row("llm -c -m echo"));
        println!("{}", cca_stats.row("cca search -r (fake engine)"));
        println!(
            "\nllm takes {:.0}x as long as cca at the median.\n",
            llm_stats.median() / cca_stats.median()
        );
    }

    pub(crate) fn compaction(&self) {
        println!("## Compaction: bytes sent over a 100-exchange conversation\n");
        println!(
            "Questions of about 120 bytes, answers of 4,000 bytes (the fake engine; its summaries are 2,000 bytes), the default system prompt (2.6 KB). Total bytes the engine received: stdin plus any history file.\n"
        );
        println!(
            "| mode | total MB | largest turn KB | last turn KB | compactions |\n| --- | ---: | ---: | ---: | ---: |"
        );
        let modes: [(&str, &str, &[&str]); 4] = [
            ("naive replay (`--no-compact`)", "", &["--no-compact"]),
            ("compaction, a 16k-token budget", "[engines.claude]\ncontext_budget = 16000\n", &[]),
            ("compaction, claude's default budget (160k tokens)", "", &[]),
            (
                "structured history (`history = \"structured\"`, `--no-compact`)",
                "[engines.claude]\nhistory = \"structured\"\n",
                &["--no-compact"],
            ),
        ];
        let mut totals = Vec::new();
        for (i, (label, config, flags)) in modes.iter().enumerate() {
            let home = self.home(&format!("compaction-{i}"));
            home.config(config);
            let log = home.dir.join("log");
            std::fs::create_dir_all(&log).unwrap();
            for n in 1..=100 {
                let question = format!(
                    "question {n}: what about the part of the answer that covers the details of step {n}?"
                );
                let mut args = vec!["search", "-q", "-e", "claude"];
                if n > 1 {
                    args.push("-r");
                }
                args.extend_from_slice(flags);
                args.push(&question);
                let mut cmd = home.command(&args, "echo-pad 4000");
                cmd.env("FAKE_LOG_DIR", &log).stdout(Stdio::null());
                assert!(cmd.status().unwrap().success());
            }
            let (mut total, mut largest, mut last, mut compactions) = (0u64, 0u64, 0u64, 0);
            for n in 1.. {
                let path = log.join(format!("call-{n}.json"));
                let Ok(text) = std::fs::read_to_string(&path) else { break };
                let call: serde_json::Value = serde_json::from_str(&text).unwrap();
                let stdin = call["stdin"].as_str().unwrap();
                let files: u64 = call["files"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|v| v.as_str().unwrap().len() as u64)
                    .sum();
                let bytes = stdin.len() as u64 + files;
                total += bytes;
                if stdin.contains("You condense the earlier part") {
                    compactions += 1;
                } else {
                    largest = largest.max(bytes);
                    last = bytes;
                }
            }
            totals.push(total);
            println!(
                "| {label} | {:.2} | {:.1} | {:.1} | {compactions} |",
                total as f64 / 1e6,
                largest as f64 / 1e3,
                last as f64 / 1e3
            );
        }
        println!(
            "\nWith compaction (16k-token budget) the total is {:.1}x smaller than naive replay, and no turn sends more than the threshold allows (75% of the budget).\n",
            totals[0] as f64 / totals[1] as f64
        );
    }
}
