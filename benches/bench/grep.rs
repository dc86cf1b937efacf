//! `cca grep` beside ripgrep, and a search through `cca mcp` beside `cca grep`.

use super::*;

impl Bench {
    pub(crate) fn grep(&self) {
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
    pub(crate) fn rss_status(
        &self,
        home: &Home,
        args: &[&str],
        script: &str,
        codes: &[i32],
    ) -> f64 {
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
    pub(crate) fn mcp(&self) {
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

pub(crate) fn rg_command(rg: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(rg);
    cmd.args(["-S", "-n"]).args(args).arg(dir).stdin(Stdio::null());
    cmd
}

/// Runs a search with its output on a pipe (so neither program can see it is thrown away), and
/// counts what it printed: (lines that are cca's matches, all lines).
pub(crate) fn pipe_lines(mut cmd: Command) -> (usize, usize) {
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
pub(crate) fn write_grep_corpus(dir: &Path, sessions: u64, bytes_each: usize) -> u64 {
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
