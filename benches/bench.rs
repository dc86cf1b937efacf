//! `make bench`: cca's overhead, streaming latency, long transcripts (whole, and after a clear or a
//! compaction), many sessions, memory, a side-by-side with `llm`, the bytes compaction saves,
//! rendering, `cca acp` against the command line, `cca grep` beside ripgrep, and a search through
//! `cca mcp` beside `cca grep`, and the share of a follow-up's input a prompt cache could serve.
//! Prints markdown for BENCHMARKS.md.
//!
//! Runs the release `cca` against the release fake engine (tests/support/fake_engine.rs); the
//! prompt caching section runs the real claude and gemini against tests/support/mock_api.rs.
//! `cargo bench -- NAME...` runs only the sections whose names contain one of the words.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use cca::transcript::{self, Header, Kind, Meta, Record};
use serde_json::json;

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(String::as_str) == Some("__rss") {
        return measure_rss(&all[1..]);
    }
    if all.first().map(String::as_str) == Some("__first_code_line") {
        return first_code_line();
    }
    // cargo passes `--bench`; the rest are section names.
    let args: Vec<String> = all.into_iter().filter(|a| !a.starts_with("--")).collect();
    let wanted = |name: &str| args.is_empty() || args.iter().any(|a| name.contains(a.as_str()));
    let bench = Bench::new();
    println!("# cca benchmarks\n");
    println!("{}\n", machine());
    type Section = (&'static str, fn(&Bench));
    let sections: [Section; 17] = [
        ("overhead", Bench::overhead),
        ("version", Bench::version),
        ("streaming", Bench::streaming),
        ("long-transcripts", Bench::long_transcripts),
        ("after-clear", Bench::after_clear),
        ("sessions", Bench::sessions),
        ("memory", Bench::memory),
        ("llm", Bench::llm),
        ("compaction", Bench::compaction),
        ("render", Bench::render),
        ("acp", Bench::acp),
        ("grep", Bench::grep),
        ("mcp", Bench::mcp),
        ("import", Bench::import),
        ("caching", Bench::caching),
        ("warm", Bench::warm),
        ("standby", Bench::standby),
    ];
    for (name, run) in sections {
        if wanted(name) {
            run(&bench);
        }
    }
}

struct Bench {
    cca: PathBuf,
    fake: PathBuf,
    root: tempfile::TempDir,
}

/// Timings, in milliseconds.
struct Stats {
    samples: Vec<f64>,
}

impl Stats {
    fn new(mut samples: Vec<f64>) -> Stats {
        samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
        Stats { samples }
    }

    fn pct(&self, p: f64) -> f64 {
        let i = ((self.samples.len() - 1) as f64 * p).round() as usize;
        self.samples[i]
    }

    fn median(&self) -> f64 {
        self.pct(0.5)
    }

    fn row(&self, what: &str) -> String {
        format!(
            "| {what} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            self.median(),
            self.pct(0.1),
            self.pct(0.9),
            self.samples.last().unwrap(),
            self.samples.len()
        )
    }
}

const TABLE: &str =
    "| what | median ms | p10 | p90 | max | runs |\n| --- | ---: | ---: | ---: | ---: | ---: |";

impl Bench {
    fn new() -> Bench {
        let cca = PathBuf::from(env!("CARGO_BIN_EXE_cca"));
        let fake = cca.parent().unwrap().join("examples").join("fake-engine");
        assert!(fake.is_file(), "build the fake engine first: cargo build --release --examples");
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("bench-tmp");
        std::fs::create_dir_all(&base).unwrap();
        Bench { cca, fake, root: tempfile::tempdir_in(base).unwrap() }
    }

    /// A fresh home with the fake engine on PATH as `claude` and as `plain`.
    fn home(&self, name: &str) -> Home {
        let dir = self.root.path().join(name);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for engine in ["claude", "plain-engine"] {
            let _ = std::os::unix::fs::symlink(&self.fake, bin.join(engine));
        }
        let home = Home { dir, cca: self.cca.clone() };
        home.config("");
        home
    }

    fn overhead(&self) {
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

    fn version(&self) {
        println!("## `cca --version`\n");
        let stats = time_runs(100, || {
            let status =
                Command::new(&self.cca).arg("--version").stdout(Stdio::null()).status().unwrap();
            assert!(status.success());
        });
        println!("{TABLE}\n{}\n\nTarget: under 3 ms.\n", stats.row("cca --version"));
    }

    fn render(&self) {
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

    fn streaming(&self) {
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

    fn long_transcripts(&self) {
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

    fn acp(&self) {
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

    fn after_clear(&self) {
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

    fn sessions(&self) {
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

    fn memory(&self) {
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

    fn rss(&self, home: &Home, args: &[&str], script: &str) -> f64 {
        let me = std::env::current_exe().unwrap();
        let mut cmd = Command::new(me);
        cmd.arg("__rss").arg(&self.cca).args(args);
        home.env(&mut cmd, script);
        let out = cmd.stdout(Stdio::piped()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().unwrap() / 1024.0
    }

    fn llm(&self) {
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

    fn compaction(&self) {
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

impl Bench {
    fn grep(&self) {
        println!("## Side by side: searching every session, `cca grep` and ripgrep\n");
        let rg = std::env::var_os("CCA_BENCH_RG")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("build/tools/bin/rg"));
        if !rg.is_file() {
            println!("(skipped: `make bench` installs ripgrep into build/tools)\n");
            return;
        }
        let version = Command::new(&rg).arg("--version").output().unwrap();
        let version = String::from_utf8_lossy(&version.stdout);
        let version = version.lines().next().unwrap_or("ripgrep").to_string();
        let home = self.home("grep");
        let dir = home.dir.join("cca/sessions");
        let started = Instant::now();
        let bytes = write_grep_corpus(&dir, 10_000, 100_000);
        let generated = started.elapsed().as_secs_f64();
        println!(
            "10,000 generated sessions, {:.2} GB (questions, answers of 20 to 150 lines, code, attachments; written in {generated:.0} s), read from the page cache. cca runs `cca grep PATTERN` (smart case, every session); ripgrep ({version}) runs `rg -S -n PATTERN` (its smart case) on the sessions folder. Both write to a pipe the bench reads and discards; matching lines are counted from the output (cca never matches its own markers and headings, ripgrep does).\n",
            bytes as f64 / 1e9
        );
        println!(
            "| pattern | rg median ms | cca median ms | cca / rg | rg lines | cca lines | rg peak MB | cca peak MB |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        let patterns: [(&str, &[&str]); 4] = [
            ("literal, rare: `xyzzyplugh`", &["xyzzyplugh"]),
            ("literal, common: `lock`", &["lock"]),
            ("regex: `fn \\w+\\(`", &["fn \\w+\\("]),
            ("`-i Error`", &["-i", "Error"]),
        ];
        // Warm the page cache (and ripgrep's and cca's own first runs).
        for _ in 0..2 {
            pipe_lines(home.command(&["grep", "xyzzyplugh"], ""));
            pipe_lines(rg_command(&rg, &dir, &["xyzzyplugh"]));
        }
        let mut worst: f64 = 0.0;
        for (label, args) in patterns {
            let (mut rg_ms, mut cca_ms) = (Vec::new(), Vec::new());
            let (mut rg_lines, mut cca_lines) = (0, 0);
            for _ in 0..5 {
                let start = Instant::now();
                rg_lines = pipe_lines(rg_command(&rg, &dir, args)).1;
                rg_ms.push(start.elapsed().as_secs_f64() * 1000.0);
                let mut cca_args = vec!["grep"];
                cca_args.extend_from_slice(args);
                let start = Instant::now();
                cca_lines = pipe_lines(home.command(&cca_args, "")).0;
                cca_ms.push(start.elapsed().as_secs_f64() * 1000.0);
            }
            let (rg_ms, cca_ms) = (Stats::new(rg_ms), Stats::new(cca_ms));
            let ratio = cca_ms.median() / rg_ms.median();
            worst = worst.max(ratio);
            let mut cca_args = vec!["grep"];
            cca_args.extend_from_slice(args);
            let cca_rss = self.rss_status(&home, &cca_args, "", &[0, 1]);
            let rg_rss = {
                let me = std::env::current_exe().unwrap();
                let mut cmd = Command::new(me);
                cmd.arg("__rss").arg(&rg).args(["-S", "-n"]).args(args).arg(&dir);
                cmd.env("BENCH_RSS_OK", "0,1");
                let out = cmd.stdout(Stdio::piped()).output().unwrap();
                String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().unwrap() / 1024.0
            };
            println!(
                "| {label} | {:.0} | {:.0} | {ratio:.2} | {rg_lines} | {cca_lines} | {rg_rss:.1} | {cca_rss:.1} |",
                rg_ms.median(),
                cca_ms.median(),
            );
        }
        println!(
            "\nMedians of 5 runs each, alternating. Target: cca at most 1.5 times ripgrep's time; the largest ratio here is {worst:.2}. Memory does not grow with the data: each thread holds one 256 KB buffer (grown only for a longer line) and up to 1 MB of its session's output, and sessions that finish before their turn to print wait with at most 8 MB between them.\n"
        );
    }

    /// Peak RSS (MB) of `cca ARGS`, which must exit with one of `codes`.
    fn rss_status(&self, home: &Home, args: &[&str], script: &str, codes: &[i32]) -> f64 {
        let me = std::env::current_exe().unwrap();
        let mut cmd = Command::new(me);
        cmd.arg("__rss").arg(&self.cca).args(args);
        home.env(&mut cmd, script);
        cmd.env("BENCH_RSS_OK", codes.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","));
        let out = cmd.stdout(Stdio::piped()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().unwrap() / 1024.0
    }
}

impl Bench {
    /// A search through `cca mcp` (one server, each search a `tools/call`) beside `cca grep`
    /// (a process per search), over the grep section's corpus.
    fn mcp(&self) {
        println!("## Searching every session through `cca mcp`, beside `cca grep`\n");
        let home = self.home("mcp");
        let dir = home.dir.join("cca/sessions");
        let bytes = write_grep_corpus(&dir, 10_000, 100_000);
        println!(
            "The grep section's 10,000 generated sessions ({:.2} GB), from the page cache. One `cca mcp` serves every search of a row as a `tools/call` of `search` (the time is from the request written to the response read, through pipes); `cca grep` is a new process per search, its output read from a pipe and discarded. `cca mcp` searches newest first and stops once it has more matching exchanges than the limit (8), so a common word reads a few sessions; a word found nowhere reads them all, as grep does.\n",
            bytes as f64 / 1e9
        );
        println!(
            "| search | cca grep median ms | cca mcp median ms | mcp / grep | sessions searched | answer chars |\n| --- | ---: | ---: | ---: | ---: | ---: |"
        );
        let searches: [(&str, &[&str], serde_json::Value); 5] = [
            (
                "a word in no session `zqxjwvnowhere`",
                &["zqxjwvnowhere"],
                json!({"query": "zqxjwvnowhere"}),
            ),
            ("rare word `xyzzyplugh`", &["xyzzyplugh"], json!({"query": "xyzzyplugh"})),
            ("common word `lock`", &["lock"], json!({"query": "lock"})),
            ("regex `fn \\w+\\(`", &["fn \\w+\\("], json!({"query": "fn \\w+\\(", "regex": true})),
            (
                "two words `lock error`",
                &["-i", "lock.*error|error.*lock"],
                json!({"query": "lock error"}),
            ),
        ];
        let started = Instant::now();
        let mut client = AcpClient::over(home.command(&["mcp"], ""));
        client.call("initialize", json!({"protocolVersion": "2025-06-18"}));
        let ready = started.elapsed().as_secs_f64() * 1000.0;
        // Warm the page cache.
        for _ in 0..2 {
            pipe_lines(home.command(&["grep", "xyzzyplugh"], ""));
        }
        for (label, grep_args, arguments) in searches {
            let (mut grep_ms, mut mcp_ms) = (Vec::new(), Vec::new());
            let mut text = String::new();
            for _ in 0..5 {
                let mut args = vec!["grep"];
                args.extend_from_slice(grep_args);
                let start = Instant::now();
                pipe_lines(home.command(&args, ""));
                grep_ms.push(start.elapsed().as_secs_f64() * 1000.0);
                let start = Instant::now();
                let response = client
                    .call("tools/call", json!({"name": "search", "arguments": arguments.clone()}));
                mcp_ms.push(start.elapsed().as_secs_f64() * 1000.0);
                text = response["result"]["content"][0]["text"].as_str().unwrap().to_string();
                assert_ne!(response["result"]["isError"], true, "{text}");
            }
            let searched = text
                .split("[Searched the newest ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .unwrap_or("10000")
                .to_string();
            let (grep_ms, mcp_ms) = (Stats::new(grep_ms), Stats::new(mcp_ms));
            println!(
                "| {label} | {:.0} | {:.0} | {:.2} | {searched} | {} |",
                grep_ms.median(),
                mcp_ms.median(),
                mcp_ms.median() / grep_ms.median(),
                text.chars().count()
            );
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", client.child.id()))
            .unwrap_or_default();
        let peak = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or("?".to_string(), |kb| format!("{:.1}", kb / 1024.0));
        client.finish();
        println!(
            "\nMedians of 5 runs each, alternating. `cca mcp` started and answered `initialize` in {ready:.0} ms; its peak RSS after every search above: {peak} MB. The two-word row runs grep with a pattern for both words on one line, which is narrower than what `search` matches (both words anywhere in one exchange).\n"
        );
    }
}

fn rg_command(rg: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(rg);
    cmd.args(["-S", "-n"]).args(args).arg(dir).stdin(Stdio::null());
    cmd
}

/// Runs a search with its output on a pipe (so neither program can see it is thrown away), and
/// counts what it printed: (lines that are cca's matches, all lines).
fn pipe_lines(mut cmd: Command) -> (usize, usize) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let reader = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let (mut matches, mut all) = (0, 0);
    for line in reader.split(b'\n') {
        let line = line.unwrap();
        all += 1;
        // cca's match lines start with the exchange number and a dot.
        let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && line[digits..].starts_with(b". ") {
            matches += 1;
        }
    }
    let status = child.wait().unwrap();
    assert!(status.code().is_some_and(|c| c <= 1), "{cmd:?}: {status}");
    (matches, all)
}

/// Writes `sessions` transcripts of about `bytes_each` bytes into `dir`; returns the total size.
/// Deterministic: the same files every run.
fn write_grep_corpus(dir: &Path, sessions: u64, bytes_each: usize) -> u64 {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let syllables = [
        "ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "ve", "den", "gar", "ith", "on", "el",
        "str", "ux", "qua", "bre",
    ];
    let mut words: Vec<String> = (0..4000)
        .map(|_| (0..1 + next(4)).map(|_| syllables[next(18) as usize]).collect())
        .collect();
    for common in [
        "the", "of", "and", "to", "in", "is", "that", "it", "for", "with", "file", "rust",
        "function", "value", "error", "Error",
    ] {
        for _ in 0..20 {
            words.push(common.to_string());
        }
    }
    words.extend(["lock", "locks", "locking", "unlock"].iter().map(|w| w.to_string()));
    let mut total = 0u64;
    for i in 0..sessions {
        let id = format!("2026{:04}-{:06}", i / 1000 + 101, i % 1000);
        let mut h = header(&id);
        h.title = format!("question {i} about {}", words[next(words.len() as u64) as usize]);
        let mut text = transcript::render_header(&h);
        let mut turn = 0;
        while text.len() < bytes_each {
            turn += 1;
            let line = |next: &mut dyn FnMut(u64) -> u64| {
                let n = 3 + next(20);
                let mut l = String::new();
                for k in 0..n {
                    if k > 0 {
                        l.push(' ');
                    }
                    l.push_str(&words[next(words.len() as u64) as usize]);
                }
                l
            };
            let mut question = line(&mut next);
            question.push('?');
            let at = Some(format!("2026-11-21T10:{:02}:00Z", turn % 60));
            text.push_str(&transcript::render_record(
                &Record {
                    kind: Kind::User,
                    meta: Meta { at: at.clone(), ..Meta::default() },
                    content: question,
                },
                turn,
            ));
            if next(10) == 0 {
                let diff: Vec<String> =
                    (0..5 + next(20)).map(|_| format!("+ {}", line(&mut next))).collect();
                text.push_str(&transcript::render_record(
                    &Record {
                        kind: Kind::Attachment,
                        meta: Meta { name: Some("stdin".into()), ..Meta::default() },
                        content: diff.join("\n"),
                    },
                    turn,
                ));
            }
            let mut answer = Vec::new();
            for _ in 0..20 + next(130) {
                answer.push(match next(20) {
                    0 => format!(
                        "    fn {}(value: u64) -> Result<()> {{",
                        words[next(4000) as usize]
                    ),
                    1 => "```".to_string(),
                    _ => line(&mut next),
                });
            }
            // The rare word: in about one exchange in 5,000 (a few dozen in all).
            if next(5_000) == 0 {
                answer.push("a note on xyzzyplugh".into());
            }
            text.push_str(&transcript::render_record(
                &Record {
                    kind: Kind::Assistant,
                    meta: Meta {
                        at,
                        engine: Some("plain".into()),
                        duration_ms: Some(1000),
                        ..Meta::default()
                    },
                    content: answer.join("\n"),
                },
                turn,
            ));
        }
        total += text.len() as u64;
        std::fs::write(dir.join(format!("session_{id}.md")), text).unwrap();
    }
    total
}

/// One `CCA_HOME` with its fake engines.
struct Home {
    dir: PathBuf,
    cca: PathBuf,
}

impl Home {
    fn config(&self, extra: &str) {
        let dir = self.dir.join("cca");
        std::fs::create_dir_all(&dir).unwrap();
        let text =
            format!("engine = \"plain\"\n[engines.plain]\ncommand = [\"plain-engine\"]\n{extra}");
        std::fs::write(dir.join("config.toml"), text).unwrap();
    }

    fn env(&self, cmd: &mut Command, script: &str) {
        cmd.env_clear()
            .env("HOME", &self.dir)
            .env("CCA_HOME", self.dir.join("cca"))
            .env("PATH", format!("{}:/usr/bin:/bin", self.dir.join("bin").display()))
            .env("FAKE_SCRIPT", script)
            .env("TERM", "dumb")
            .current_dir(&self.dir)
            .stdin(Stdio::null());
    }

    fn command(&self, args: &[&str], script: &str) -> Command {
        let mut cmd = Command::new(&self.cca);
        cmd.args(args);
        self.env(&mut cmd, script);
        cmd
    }

    fn cca(&self, args: &[&str], script: &str) -> std::process::ExitStatus {
        self.command(args, script).stdout(Stdio::null()).status().unwrap()
    }
}

/// `cca acp` spoken to line by line.
struct AcpClient {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    next: u64,
}

impl AcpClient {
    /// Opens a session in `cwd` and asks `count` questions in it, one after another, each
    /// timed from its request to its first `agent_message_chunk`, in ms: the first's in
    /// `first`, the others' in `later`.
    fn time_prompts(
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

    fn start(home: &Home, script: &str) -> AcpClient {
        let mut client = AcpClient::over(home.command(&["acp"], script));
        client.call("initialize", json!({"protocolVersion": 1}));
        client
    }

    /// A JSON-RPC line client of any cca server (`cca mcp` too), not yet initialized.
    fn over(mut cmd: Command) -> AcpClient {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        AcpClient { child, stdin, lines, next: 0 }
    }

    fn send(&mut self, method: &str, params: serde_json::Value) -> u64 {
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        self.next
    }

    fn until(&mut self, wanted: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        loop {
            let line = self.lines.next().expect("cca acp answers").unwrap();
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if wanted(&message) {
                return message;
            }
        }
    }

    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.send(method, params);
        self.until(|m| m["id"] == id && m.get("method").is_none())
    }

    /// The response to request `id`, found without parsing the lines before it: a notification
    /// has no `"id":`, and a line is parsed only if it has one, so the time is cca's, not the
    /// parsing of every notification.
    fn response(&mut self, id: u64) -> serde_json::Value {
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

    fn finish(self) {
        drop(self.stdin);
        let mut child = self.child;
        assert!(child.wait().unwrap().success());
    }
}

trait Checked {
    fn checked(self);
}

impl Checked for std::process::ExitStatus {
    fn checked(self) {
        assert!(self.success(), "cca failed: {self}");
    }
}

fn time_runs(n: usize, mut run: impl FnMut()) -> Stats {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        run();
        samples.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    Stats::new(samples)
}

fn run_with_input(mut cmd: Command, input: &[u8]) {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    assert!(child.wait().unwrap().success());
}

/// What cca sends on a resume in this home: captured once through the fake engine's log.
fn framed_input(home: &Home) -> String {
    let log = home.dir.join("framed-log");
    std::fs::create_dir_all(&log).unwrap();
    let mut cmd = home.command(&["search", "-q", "-r", "--no-compact", "next"], "say hi");
    cmd.env("FAKE_LOG_DIR", &log).stdout(Stdio::null());
    assert!(cmd.status().unwrap().success());
    let call: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(log.join("call-1.json")).unwrap()).unwrap();
    call["stdin"].as_str().unwrap().to_string()
}

fn header(id: &str) -> Header {
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
    }
}

fn session_text(id: &str, exchanges: u64, answer_bytes: usize) -> String {
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
fn write_long_session(home: &Home, exchanges: u64) -> u64 {
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

fn truncate_to(home: &Home, size: u64) {
    let path = home.dir.join("cca/sessions/session_20261121-101500.md");
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(size).unwrap();
}

fn now_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// `bench __rss PROGRAM ARGS...`: runs it and prints the peak RSS (KB) of it and its children.
// getrusage has no safe wrapper in the crates cca uses; this is the one unsafe call, in a bench.
#[allow(unsafe_code)]
fn measure_rss(args: &[String]) {
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
fn first_code_line() {
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
const PROSE: &str = "## What changed\n\nRust 1.89 adds **file locking** to `std::fs::File`: \
`lock`, `lock_shared`, `try_lock` and `unlock`, with the platform's advisory locks \
(`flock` on Unix, `LockFileEx` on Windows). See [the release notes](https://blog.rust-lang.org/).\n\n\
- `lock()` blocks until the lock is free\n- `try_lock()` returns at once\n  - `Err(TryLockError::WouldBlock)` when held\n\
- locks are released when the file is closed\n\n\
| method | blocks | shared |\n|---|:-:|---|\n| `lock` | yes | no |\n| `lock_shared` | yes | yes |\n\
| `try_lock` | no | no |\n\n\
> Advisory locks only keep out processes that also lock: a plain `open` is not stopped.\n\n\
These locks are *advisory* on every platform Rust supports, which means that cooperation is \
required, and that a process which ignores them can still read and write the file as it likes.\n\n";

const CODE: &str = "```rust\nuse std::fs::File;\nuse std::io::{self, Write};\n\n\
/// Appends a line under an exclusive lock.\nfn append(path: &str, line: &str) -> io::Result<()> {\n\
    let mut file = File::options().append(true).create(true).open(path)?;\n    file.lock()?; // waits\n\
    writeln!(file, \"{line}\")?;\n    file.unlock()\n}\n\nfn main() -> io::Result<()> {\n\
    for i in 0..3 {\n        append(\"log.txt\", &format!(\"entry {i}\"))?;\n    }\n\
    let n: u64 = 42;\n    println!(\"{n} done\");\n    Ok(())\n}\n```\n";

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<u64>().unwrap_or(0))
        })
        .unwrap_or(0);
    let date = chrono::Utc::now().format("%Y-%m-%d");
    format!(
        "Machine: {cpu}, {cores} cores, {:.0} GiB; measured {date}; release build.",
        mem as f64 / 1048576.0
    )
}

/// `cca import claude` on 10,000 generated Claude Code sessions.
impl Bench {
    fn import(&self) {
        println!("## Importing 10,000 Claude Code sessions: `cca import claude`\n");
        let home = self.home("import");
        let sessions = 10_000u64;
        let bytes = write_claude_store(&home.dir.join(".claude/projects"), sessions);
        let import = || {
            let out = home.command(&["import", "claude"], "").stdout(Stdio::null()).status();
            assert!(out.unwrap().success());
        };
        let first = time_runs(1, import);
        let again = time_runs(10, import);
        let list = time_runs(10, || {
            let out = home.command(&["sessions"], "").stdout(Stdio::null()).status().unwrap();
            assert!(out.success());
        });
        println!("{TABLE}");
        println!("{}", first.row("first import (reads and writes every session)"));
        println!("{}", again.row("again, nothing new (a size and time check per file)"));
        println!("{}", list.row("`cca sessions` of the same 10,000, for scale"));
        println!(
            "\n{sessions} files of 3 exchanges in the shapes Claude Code 2.1.329 writes (attachment and \
             bookkeeping lines, an answer spanning lines, a web search), {:.1} MB in all.\n",
            bytes as f64 / 1e6
        );
    }
}

/// Claude Code session files, `sessions` of them in 100 project folders; returns their size.
fn write_claude_store(root: &Path, sessions: u64) -> u64 {
    let mut total = 0;
    for i in 0..sessions {
        let dir = root.join(format!("-home-me-src-project{}", i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        let sid = format!("00000000-0000-4000-8000-{i:012}");
        let mut parent = serde_json::Value::Null;
        let mut text = String::new();
        let mut n = 0u64;
        let line = |v: serde_json::Value, text: &mut String| {
            text.push_str(&v.to_string());
            text.push('\n');
        };
        for turn in 0..3 {
            let mut next = || {
                n += 1;
                format!("{i:08x}-0000-4000-8000-{n:012}")
            };
            let at = format!("2026-11-{:02}T10:{:02}:{:02}.000Z", 1 + i % 28, turn, i % 60);
            let common = |uuid: &str, parent: &serde_json::Value| {
                json!({"parentUuid": parent, "isSidechain": false, "uuid": uuid, "timestamp": at,
                       "cwd": format!("/home/me/src/project{}", i % 100), "sessionId": sid,
                       "version": "2.1.329", "userType": "external"})
            };
            line(
                json!({"type": "queue-operation", "operation": "enqueue", "sessionId": sid}),
                &mut text,
            );
            let u = next();
            let mut user = common(&u, &parent);
            user["type"] = json!("user");
            user["message"] = json!({"role": "user", "content": format!("question {turn} of session {i}: what changed in file locking?")});
            line(user, &mut text);
            let a = next();
            let mut attachment = common(&a, &json!(u));
            attachment["type"] = json!("attachment");
            attachment["attachment"] = json!({"type": "date", "date": "2026-11-23"});
            line(attachment, &mut text);
            let mut last = a;
            let blocks = [
                json!({"type": "text", "text": "Let me search."}),
                json!({"type": "tool_use", "id": format!("toolu_{turn}"), "name": "WebSearch", "input": {"query": "rust file locking"}}),
            ];
            for block in blocks {
                let id = next();
                let mut m = common(&id, &json!(last));
                m["type"] = json!("assistant");
                m["message"] = json!({"id": format!("msg_{turn}a"), "role": "assistant", "model": "claude-opus-5-5",
                                      "content": [block], "usage": {"input_tokens": 1200, "output_tokens": 40}});
                line(m, &mut text);
                last = id;
            }
            let r = next();
            let mut result = common(&r, &json!(last));
            result["type"] = json!("user");
            result["message"] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{turn}"),
                "content": "Web search results for query: \"rust file locking\"\n\nLinks: [{\"title\":\"The guide\",\"url\":\"https://guide.example.org/locks\"}]\n\nA summary."}]});
            line(result, &mut text);
            let f = next();
            let mut answer = common(&f, &json!(r));
            answer["type"] = json!("assistant");
            answer["message"] = json!({"id": format!("msg_{turn}b"), "role": "assistant", "model": "claude-opus-5-5",
                "content": [{"type": "text", "text": "Rust 1.89 stabilised File::lock. ".repeat(20)}],
                "usage": {"input_tokens": 1500, "output_tokens": 200}});
            line(answer, &mut text);
            parent = json!(f);
        }
        total += text.len() as u64;
        std::fs::write(dir.join(format!("{sid}.jsonl")), text).unwrap();
    }
    total
}

// Prompt caching: the share of each follow-up's input the provider's cache could serve, through
// the real claude and gemini against the loopback server of tests/support/mock_api.rs.
// Warm engines (docs/DESIGN.md, "Warm engines"): the real claude against the loopback server of
// the tests, run only where `make engines` installed it (CCA_TEST_CLAUDE).
#[allow(dead_code)]
#[path = "../tests/support/mock_api.rs"]
mod mock_api;

/// What the real engines need to talk to the loopback server at `url`, and nothing else.
/// Prints a table row for each set of timings, and returns their medians.
fn print_rows(rows: impl IntoIterator<Item = (String, Vec<f64>)>) -> Vec<f64> {
    rows.into_iter()
        .map(|(what, samples)| {
            let stats = Stats::new(samples);
            println!("{}", stats.row(&what));
            stats.median()
        })
        .collect()
}

/// The resident memory of a process group's processes, in MiB (VmRSS summed).
fn group_rss_mb(group: i32) -> f64 {
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

fn engine_vars(url: &str) -> Vec<(&'static str, String)> {
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

/// A real engine run by hand in `dir` (its home too), talking to the loopback server at `url`,
/// on pipes.
fn engine_command(program: &Path, dir: &Path, url: &str) -> Command {
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
enum CacheRoute {
    Cca(&'static str),
    Chat,
    Acp,
    Own,
}

/// A front end that outlives the turns: its process, and how to give it one question.
enum Front {
    Chat { child: std::process::Child, stdin: std::process::ChildStdin },
    Acp { client: AcpClient, session: serde_json::Value },
}

impl Front {
    /// Asks and returns once the answer ends and is saved (chat: its last words in the
    /// transcript; ACP: the prompt's reply, sent after saving).
    fn ask(&mut self, question: &str, last_words: &str, transcript: &Path) {
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

    fn finish(self) {
        match self {
            Front::Chat { mut child, stdin } => {
                drop(stdin);
                assert!(child.wait().unwrap().success());
            }
            Front::Acp { client, .. } => client.finish(),
        }
    }
}

impl Bench {
    fn caching(&self) {
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
        println!(
            "| engine, route | request 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 3-10 | not cached, KB |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        let native = "system_prompt = \"native\"\n";
        let inline = "history = \"inline\"\n";
        let routes: [(&str, &Path, CacheRoute); 12] = [
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
        ];
        for (i, (label, program, route)) in routes.iter().enumerate() {
            let bodies = self.cache_turns(&format!("caching-{i}"), program, route);
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

    /// Ten long turns through `program` by `route`; the answer requests as the server got them.
    fn cache_turns(
        &self,
        name: &str,
        program: &Path,
        route: &CacheRoute,
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
            let answer = filler(n, "Answer", 110);
            api.set(mock_api::Behavior {
                answer: Some(answer.clone()),
                ..mock_api::Behavior::default()
            });
            let question = filler(n, "Question", 105);
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
    fn warm(&self) {
        println!("## Warm engines: a follow-up's first chunk through the real claude and gemini\n");
        println!(
            "The real programs (`CCA_TEST_CLAUDE`, `CCA_TEST_GEMINI`) against the loopback server of tests/support/mock_api.rs, which answers at once. Over ACP, from writing `session/prompt` to reading the first `agent_message_chunk`; in `cca chat` (lines on a pipe), from writing the line to reading the answer's first byte. Five prompts per session: the first starts the engine; the follow-ups find it kept (`keep_warm`, default), or start it again (`keep_warm = \"off\"`, cold as every turn was before). Beside them, the engine's own multi-turn session fed the same five messages (claude: one process on stream-json input; gemini: `gemini --acp` spoken to directly).\n"
        );
        self.each_real_engine(Bench::warm_engine);
    }

    fn warm_engine(&self, engine: &str, program: &Path) {
        let api = mock_api::MockApi::start();
        let home = |name: &str, keep: &str| {
            self.engine_home(engine, name, &format!("keep_warm = \"{keep}\"\n"))
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
    fn each_real_engine(&self, run: fn(&Bench, &str, &Path)) {
        for (engine, var) in [("claude", "CCA_TEST_CLAUDE"), ("gemini", "CCA_TEST_GEMINI")] {
            match std::env::var_os(var).map(PathBuf::from).filter(|p| p.exists()) {
                Some(program) => run(self, engine, &program),
                None => println!("{engine}: skipped, not installed (`make engines`).\n"),
            }
        }
    }

    /// A home for cca on a real engine (gemini's API key auth chosen), its config `engine = `
    /// this one and `config`.
    fn engine_home(&self, engine: &str, name: &str, config: &str) -> PathBuf {
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
    fn cca_on_engine(
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
            .env(if engine == "claude" { "CCA_CLAUDE" } else { "CCA_GEMINI" }, program);
        cmd
    }

    fn standby(&self) {
        println!(
            "## Standby: the first byte of a `,` follow-up through the real claude and gemini\n"
        );
        println!(
            "The real programs against the loopback server of tests/support/mock_api.rs, which answers at once. Each follow-up is `cca search -r` (what `,` runs), timed from starting cca to the answer's first byte on its stdout. With `standby = \"10m\"` the follow-up takes the engine the turn before left waiting (each waits until `cca standby` says it is ready, unmeasured, as while a user types); with standby off (the default) it starts the engine. Beside them, a follow-up in the engine's own multi-turn session (one process; claude on stream-json input, `gemini --acp`). Memory: the resident set of a waiting engine's processes (VmRSS summed over its process group).\n"
        );
        self.each_real_engine(Bench::standby_engine);
    }

    fn standby_engine(&self, engine: &str, program: &Path) {
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
    fn own_session(&self, engine: &str, program: &Path, url: &str) -> (Vec<f64>, Vec<f64>) {
        if engine == "gemini" {
            return self.gemini_own_session(program, url);
        }
        self.claude_own_session(program, url)
    }

    /// gemini's own multi-turn session: `gemini --acp` spoken to directly, five prompts in one
    /// session.
    fn gemini_own_session(&self, gemini: &Path, url: &str) -> (Vec<f64>, Vec<f64>) {
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

    /// claude's own multi-turn session: one process taking the messages on stream-json input,
    /// each timed from writing its line to the first text delta.
    fn claude_own_session(&self, claude: &Path, url: &str) -> (Vec<f64>, Vec<f64>) {
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
