//! `cca import` and `cca export` against session files the real `claude` and `gemini` wrote
//! (their own session persistence on), and the engines' own resume of what cca exported.

use super::*;

/// Runs the real engine itself (not through cca), as a person would, with its session files on.
fn engine(r: &Real, engine: &str, args: &[&str]) -> Run {
    let program = if engine == "claude" { &r.claude } else { &r.gemini };
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear()
        .env("HOME", &r.env.home)
        .env("PATH", r.env.path_var())
        .envs(r.vars(&r.api.url()))
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .current_dir(&r.env.work)
        .args(args)
        .stdin(Stdio::null());
    run_command(cmd, None)
}

/// The engine's own session files under the test's home.
fn own_sessions(r: &Real) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = engine_session_files(r).into_iter().map(PathBuf::from).collect();
    found.sort();
    found
}

/// Three turns in the engine's own sessions, the first with two web searches.
fn record(r: &Real, name: &str) {
    let (search, _) = tool_names(name);
    r.api.set(two_searches(name));
    let tools: Vec<&str> = if name == "claude" {
        vec!["-p", "--tools", search, "--allowedTools", search, "--"]
    } else {
        vec!["--skip-trust", "-p"]
    };
    let first = [tools.as_slice(), &["what changed in file locking?"]].concat();
    engine(r, name, &first).ok();
    r.api.set(Behavior::default());
    let more: Vec<&str> = if name == "claude" {
        vec!["-p", "-c", "--"]
    } else {
        vec!["--skip-trust", "--resume", "latest", "-p"]
    };
    engine(r, name, &[more.as_slice(), &["and on windows?"]].concat()).ok();
    engine(r, name, &[more.as_slice(), &["and on macOS?"]].concat()).ok();
}

#[test]
fn record_for_inspection() {
    for name in ["claude", "gemini"] {
        let r = Real::new();
        record(&r, name);
        let out = PathBuf::from(format!("/tmp/import-samples/{name}"));
        std::fs::create_dir_all(&out).unwrap();
        for f in own_sessions(&r) {
            std::fs::copy(&f, out.join(f.file_name().unwrap())).unwrap();
            eprintln!("{}", f.display());
        }
    }
}
