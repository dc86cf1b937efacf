//! A refused key or login (the API answers 401 or 403) fails the turn at once, with a hint
//! about the key or the login, where the engines would retry it for minutes as an outage.

use super::mock_api::Behavior;
use super::*;

fn refused_at_once(engine: &str, status: u16) {
    let r = Real::new();
    r.api.set(Behavior { status: Some(status), ..Behavior::default() });
    let model = if engine == "gemini" { "gemini-2.5-pro" } else { "claude-sonnet-4-5" };
    // No --fail-fast: the engines' own retries are on.
    let run = r.run(&["search", "-e", engine, "-m", model, "who are you?"]);
    run.code(1);
    let hint = if engine == "gemini" { "GEMINI_API_KEY" } else { "ANTHROPIC_API_KEY" };
    assert!(run.stderr.contains(&status.to_string()) && run.stderr.contains(hint), "{run}");
    assert!(!run.stderr.contains("retrying"), "{engine}: not retried\n{run}");
    let t = r.transcript();
    assert_eq!(t.records.last().unwrap().kind, cca::transcript::Kind::Failed);
    // The model requests made: the first, and no retry of it.
    let asked = r.api.turns().len();
    assert!(asked <= 2, "{engine}: {asked} requests\n{run}");
}

#[test]
fn claude_refused_key_fails_at_once() {
    refused_at_once("claude", 401);
}

#[test]
fn claude_forbidden_fails_at_once() {
    refused_at_once("claude", 403);
}

#[test]
fn gemini_refused_key_fails_at_once() {
    refused_at_once("gemini", 401);
}
