//! The real `claude`, `gemini` and `codex` programs (and `llm`, a third-party engine) under cca,
//! against a loopback server that speaks their APIs. `make test` installs the pinned programs
//! into build/.

// Shared with tests/cli; each binary uses part of it.
mod acp;
mod acp_mcp;
mod auth;
mod auto;
mod caching;
mod codex;
#[allow(dead_code)]
#[path = "../support/env.rs"]
mod common;
mod files;
mod import;
mod manners;
#[path = "../support/mock_api.rs"]
mod mock_api;
mod standby;
mod steers;
mod tool_calls;
mod turns;
mod warm;
mod warm_gemini;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use acp::*;
use acp_mcp::*;
use caching::*;
use common::*;
use mock_api::{Behavior, Block, MockApi, Received};
use serde_json::{Value, json};
use steers::*;
use tool_calls::*;
use turns::*;

struct Real {
    env: TestEnv,
    api: MockApi,
    claude: PathBuf,
    gemini: PathBuf,
}

impl Real {
    fn new() -> Real {
        Real::in_dir(&secure_base())
    }

    /// The test's home in a folder of `base`.
    fn in_dir(base: &Path) -> Real {
        let env = TestEnv::in_dir(base, &[]);
        let gemini_dir = env.home.join(".gemini");
        std::fs::create_dir_all(&gemini_dir).unwrap();
        std::fs::write(
            gemini_dir.join("settings.json"),
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
        )
        .unwrap();
        Real {
            env,
            api: MockApi::start(),
            claude: real_program("CCA_TEST_CLAUDE", "engines/node_modules/.bin/claude"),
            gemini: real_program("CCA_TEST_GEMINI", "engines/node_modules/.bin/gemini"),
        }
    }

    fn vars(&self, base_url: &str) -> Vec<(String, String)> {
        [
            ("CCA_CLAUDE", self.claude.to_str().unwrap()),
            ("CCA_GEMINI", self.gemini.to_str().unwrap()),
            ("ANTHROPIC_BASE_URL", base_url),
            ("ANTHROPIC_API_KEY", "dummy"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("GOOGLE_GEMINI_BASE_URL", base_url),
            ("GEMINI_API_KEY", "dummy"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = self.env.command();
        cmd.envs(self.vars(&self.api.url()));
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        self.run_at(&self.api.url(), args, None)
    }

    fn run_at(&self, base_url: &str, args: &[&str], input: Option<&[u8]>) -> Run {
        let mut cmd = self.env.command();
        cmd.args(args).envs(self.vars(base_url));
        run_command(cmd, input)
    }

    fn transcript(&self) -> cca::transcript::Transcript {
        let (t, problems) = cca::transcript::parse(&self.env.latest()).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        t
    }
}

/// A folder for test homes that no one else can write to, as a user's home is (gemini skips
/// some files of its own below a folder others can write to, such as /tmp). target/tmp
/// qualifies unless the checkout itself lies below such a folder; then a private folder in
/// ~/.cache does.
fn secure_base() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let secure = |dir: &Path| {
        dir.ancestors()
            .all(|a| std::fs::metadata(a).map_or(true, |m| m.permissions().mode() & 0o022 == 0))
    };
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if secure(&target) {
        return target;
    }
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let cache = home.join(".cache").join("cca-tests");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(secure(&cache), "no folder for the real engines' tests that others cannot write to");
    cache
}

fn answers(t: &cca::transcript::Transcript) -> Vec<String> {
    t.records
        .iter()
        .filter(|r| r.kind == cca::transcript::Kind::Assistant)
        .map(|r| r.content.clone())
        .collect()
}

/// The user message cca sent (the last one holding a `<user_query>`).
fn framed_message(body: &Value) -> String {
    let mut found = String::new();
    for m in body["messages"].as_array().into_iter().flatten().filter(|m| m["role"] == "user") {
        let t = mock_api::content_text(&m["content"]);
        if t.contains("<user_query>") {
            found = t;
        }
    }
    for c in body["contents"].as_array().into_iter().flatten().filter(|c| c["role"] == "user") {
        let t = mock_api::content_text(&c["parts"]);
        if t.contains("<user_query>") {
            found = t;
        }
    }
    found
}

/// The questions a request sent, oldest first (the last is the newest), whichever way cca laid
/// out the history: framed in one message (`history = "inline"`, and the first prompt of a
/// kept gemini), or as real turns whose first opens with cca's framing (structured, the
/// default). The engines' own context is left out.
fn sent_questions(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().or(body["contents"].as_array());
    let texts: Vec<String> = messages
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            mock_api::own_text(if m["content"].is_null() { &m["parts"] } else { &m["content"] })
        })
        .filter(|t| !t.is_empty())
        .collect();
    // A message may frame the history before it (inline history; a kept engine's first).
    let mut questions = Vec::new();
    for text in &texts {
        questions.extend(history_users(text));
        questions.push(tag(text, "user_query").unwrap_or(text).to_string());
    }
    questions
}

/// The answers a request sent back as the model's own turns (structured history).
fn sent_answers(body: &Value) -> Vec<String> {
    let (list, role, content) = match body["messages"].as_array() {
        Some(list) => (list, "assistant", "content"),
        None => (body["contents"].as_array().unwrap(), "model", "parts"),
    };
    list.iter()
        .filter(|m| m["role"] == role)
        .map(|m| mock_api::content_text(&m[content]))
        .filter(|t| !t.is_empty())
        .collect()
}
