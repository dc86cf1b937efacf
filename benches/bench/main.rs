//! `make bench`: cca's overhead, streaming latency, long transcripts (whole, and after a clear or a
//! compaction), many sessions, memory, a side-by-side with `llm`, the bytes compaction saves,
//! rendering, `cca acp` against the command line, `cca grep` beside ripgrep, and a search through
//! `cca mcp` beside `cca grep`, the share of a follow-up's input a prompt cache could serve, and
//! how often `cca recall` finds the exchange that answers a question (beside plain BM25), and
//! `cca sync` of 10,000 sessions through a git remote.
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

mod engines;
mod grep;
mod import;
mod recall;
mod recall_background;
mod recall_quality;
mod recall_rank;
mod recall_semantic;
mod support;
mod sync;
mod turns;

use support::*;

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
    let sections: [Section; 23] = [
        ("overhead", Bench::overhead),
        ("version", Bench::version),
        ("turn-costs", Bench::turn_costs),
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
        ("recall-speed", Bench::recall),
        ("import", Bench::import),
        ("caching", Bench::caching),
        ("codex-caching", Bench::codex_caching),
        ("warm", Bench::warm),
        ("codex-warm", Bench::codex_warm),
        ("standby", Bench::standby),
        ("recall-quality", Bench::recall_quality),
        ("sync", Bench::sync),
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
        let mut root = tempfile::tempdir_in(base).unwrap();
        // CCA_BENCH_KEEP: leave the sections' homes (their stores and indexes) to look at after.
        if std::env::var_os("CCA_BENCH_KEEP").is_some() {
            root.disable_cleanup(true);
            eprintln!("keeping the benchmark's homes in {}", root.path().display());
        }
        Bench { cca, fake, root }
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
}

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

#[allow(dead_code)]
#[path = "../../tests/support/mock_api.rs"]
mod mock_api;
