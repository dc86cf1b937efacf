//! `cca recall` over the grep section's 10,000 sessions (1 GB): the first build of the index,
//! its size, ranked queries right after a new turn through `cca recall` and through `cca mcp`,
//! beside `cca grep` and ripgrep on the same store, and what a new exchange costs the next
//! search.

use super::grep::{pipe_lines, rg_command, write_grep_corpus};
use super::*;

/// Plain-words questions, as a person or an agent asks: common words, a phrase, a rare word.
const QUESTIONS: [&str; 6] = [
    "when did we fix the lock error in that function",
    "what value did the file have after the error",
    "the note on xyzzyplugh",
    "\"function value\" error in rust",
    "how do I unlock a file that another process locks",
    "kalo mine rune error",
];

pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

pub(crate) fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

impl Bench {
    pub(crate) fn recall(&self) {
        println!("## Recall: ranked search over 10,000 sessions\n");
        let home = self.home("recall");
        let dir = home.dir.join("cca/sessions");
        let bytes = write_grep_corpus(&dir, 10_000, 100_000);
        // Warm the page cache, as the grep section does.
        pipe_lines(home.command(&["grep", "xyzzyplugh"], ""));

        let start = Instant::now();
        let out = home.command(&["recall", "--json", "lock"], "").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let build = start.elapsed().as_secs_f64();
        let index = dir_bytes(&home.dir.join("cca/recall"));
        println!(
            "The grep section's 10,000 generated sessions ({:.2} GB). First build (the first `cca recall`, index made from nothing): **{build:.1} s**; index **{:.0} MB, {:.1}% of the transcripts**. Targets: at most 60 s and 30%.\n",
            bytes as f64 / 1e9,
            index as f64 / 1e6,
            index as f64 * 100.0 / bytes as f64
        );

        let rg = std::env::var_os("CCA_BENCH_RG")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("build/tools/bin/rg"));
        let mut client = AcpClient::over(home.command(&["mcp"], ""));
        client.call("initialize", json!({"protocolVersion": "2025-06-18"}));
        let (mut recall_ms, mut mcp_ms, mut fresh_ms, mut grep_ms, mut rg_ms) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut turn_ms, mut mcp_fresh_ms) = (Vec::new(), Vec::new());
        let mut turn = |label: String| {
            let start = Instant::now();
            home.cca(&["search", "-q", &label], "say ok").checked();
            turn_ms.push(ms(start));
        };
        for round in 0..5 {
            for question in QUESTIONS {
                // One new turn, then the question: the index takes in the new exchange first.
                turn(format!("new turn {round} about locks"));
                let start = Instant::now();
                let out = home.command(&["recall", "--json", question], "").output().unwrap();
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                fresh_ms.push(ms(start));
                // Nothing new since: what a search costs on its own.
                let start = Instant::now();
                let out = home.command(&["recall", "--json", question], "").output().unwrap();
                assert!(out.status.success());
                recall_ms.push(ms(start));
                // The same two through the MCP server, which stays up between searches.
                let mut search = |samples: &mut Vec<f64>| {
                    let start = Instant::now();
                    let response = client.call(
                        "tools/call",
                        json!({"name": "search", "arguments": {"query": question}}),
                    );
                    samples.push(ms(start));
                    assert_ne!(response["result"]["isError"], true, "{response}");
                };
                turn(format!("another turn {round} about locks"));
                search(&mut mcp_fresh_ms);
                search(&mut mcp_ms);
                // grep and ripgrep for any of the question's words: what an exact search must read.
                let words: Vec<&str> = question
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 3)
                    .collect();
                let pattern = words.join("|");
                let start = Instant::now();
                pipe_lines(home.command(&["grep", "-l", "-i", &pattern], ""));
                grep_ms.push(ms(start));
                if rg.is_file() {
                    let start = Instant::now();
                    pipe_lines(rg_command(&rg, &dir, &["-l", "-i", &pattern]));
                    rg_ms.push(ms(start));
                }
            }
        }
        client.finish();
        let row = |what: &str, samples: Vec<f64>| {
            if samples.is_empty() {
                return format!("| {what} | (skipped: `make bench` installs ripgrep) | | |");
            }
            let s = Stats::new(samples);
            format!("| {what} | {:.1} | {:.1} | {} |", s.median(), s.pct(0.95), s.samples.len())
        };
        println!("| per query | p50 ms | p95 ms | runs |\n| --- | ---: | ---: | ---: |");
        println!("{}", row("`cca recall --json` right after a new turn", fresh_ms.clone()));
        println!("{}", row("`cca recall --json`, nothing new", recall_ms.clone()));
        println!("{}", row("`cca mcp` `search` right after a new turn", mcp_fresh_ms));
        println!(
            "{}",
            row("`cca mcp` `search`, nothing new (one server, a `tools/call` each)", mcp_ms)
        );
        println!("{}", row("`cca grep -l -i WORD|WORD…` (exact, unranked)", grep_ms));
        println!("{}", row("`rg -l -i WORD|WORD…` (exact, unranked)", rg_ms));
        let (fresh, settled) = (Stats::new(fresh_ms), Stats::new(recall_ms));
        println!(
            "\nQuestions: {}. Each round runs one new turn (`cca search`, median {:.1} ms, which does no index work but leave the id of the session it changed in `recall/changed`), then the question through `cca recall` (which reads that session while it stats the rest, and searches it beside the index, uncommitted) and again with nothing new; then a second new turn and the question twice through `cca mcp`; then an exact search of its words. The cost of a new exchange to the next search: {:.1} ms at the median (the first two rows' difference). Targets: p50 at most 20 ms, p95 at most 50 ms.\n",
            QUESTIONS.map(|q| format!("`{q}`")).join(", "),
            Stats::new(turn_ms).median(),
            fresh.median() - settled.median(),
        );
    }
}
