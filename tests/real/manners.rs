//! The real engines under cca keep to cca's terms: they use only what cca gives them of the
//! user's own configuration where it would change a turn, leave none of their files behind,
//! give up at once when the key is wrong, and say on stderr only what tells the user something.

use std::path::Path;

use serde_json::json;

use super::acp_mcp::python;
use super::common::run_command;
use super::mock_api::Behavior;
use super::{MCP_SERVER, Real};

/// An MCP server in the user's own claude configuration (`claude mcp add --scope user`, which
/// writes ~/.claude.json) is not started for a cca turn: claude gets cca's servers and no others.
#[test]
fn claude_starts_no_mcp_server_of_the_user_s_own() {
    let r = Real::new();
    let script = r.env.root.path().join("mcp_server.py");
    std::fs::write(&script, MCP_SERVER).unwrap();
    let marker = r.env.root.path().join("mcp-started");
    let server = json!({"type": "stdio", "command": python(), "args": [script, "--user"],
                        "env": {"MARKER": marker}});
    let config = json!({"mcpServers": {"marker": server}});
    std::fs::write(r.env.home.join(".claude.json"), config.to_string()).unwrap();
    r.run(&["search", "-q", "-e", "claude", "a question"]).ok();
    assert_eq!(r.api.turns().len(), 1);
    assert!(!marker.exists(), "claude started the user's own MCP server");
}

/// A gemini answer costs no lines of gemini's own on stderr: its true-colour warning, its
/// start-up timing and a warning about cca's own settings say nothing to the user, wherever
/// `CCA_HOME` is (below /tmp too).
#[test]
fn gemini_says_nothing_of_its_own_on_stderr() {
    for r in [Real::new(), Real::in_dir(&std::env::temp_dir())] {
        for args in
            [&["search", "-e", "gemini", "one"][..], &["search", "-r", "--fail-fast", "two"]]
        {
            let run = r.run(args);
            run.ok();
            let noise: Vec<&str> = run
                .stderr
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with("cca:"))
                .collect();
            assert_eq!(noise, Vec::<&str>::new(), "{args:?}\n{run}");
        }
    }
}

/// Every file under `dir` with its size, but cca's own folder: what a run left there.
fn files_under(dir: &Path, skip: &Path) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if path == skip {
                continue;
            } else if meta.is_dir() {
                stack.push(path);
            } else {
                found.push((path.display().to_string(), meta.len()));
            }
        }
    }
    found.sort();
    found
}

/// gemini records a copy of every run, adds the folder to its project list and keeps a folder
/// of its own per project, and cannot be told not to: under cca it runs in a home of its own
/// for the run, so nothing of its own is left in the user's home, whether for a turn, a
/// follow-up, `cca doctor` (which times its start), `cca chat` and `cca acp` (which keep it
/// as an ACP agent), or an ACP agent declared in the config that is gemini. The user's settings
/// and sign-in still reach it through that home.
#[test]
fn gemini_leaves_nothing_of_its_own_behind() {
    let r = Real::new();
    let gemini_dir = r.env.home.join(".gemini");
    std::fs::write(gemini_dir.join("GEMINI.md"), "The user's own memory: say MEMORY-SEEN.\n")
        .unwrap();
    // (`cca doctor` runs claude too, which keeps its own configuration in ~/.claude.json.)
    let gemini_files = || files_under(&r.env.home.join(".gemini"), &r.env.cca_home);
    let before = gemini_files();
    r.env.write_config("engine = \"gemini\"\n[engines.gemini]\nhistory = \"structured\"\n");
    r.run(&["search", "-q", "one"]).ok();
    r.run(&["search", "-q", "-r", "two"]).ok();
    r.run(&["doctor"]);
    super::warm::chat(&r, &["--resume"], &["c1", "c2"]).ok();
    let new =
        json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}});
    super::acp(&r, &[new, super::acp_prompt("p", "$s.sessionId", "in an editor", true)]);
    let agent = format!("[{:?}, \"--acp\", \"--skip-trust\"]", r.gemini.display().to_string());
    r.env.write_config(&format!("[engines.agent]\nacp = {agent}\n"));
    r.run(&["search", "-q", "-e", "agent", "three"]).ok();
    assert_eq!(gemini_files(), before, "gemini left files of its own");
    assert_eq!(files_under(&r.env.work, Path::new("")), vec![], "in the folder it ran in");
    // Nor in cca's own folder, once the runs are over.
    let engine_dirs: Vec<_> = std::fs::read_dir(&r.env.cca_home)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".engine-"))
        .collect();
    assert!(engine_dirs.is_empty(), "{engine_dirs:?}");
    // The user's memory file reached every run through its home.
    let bodies = super::warm::bodies(&r);
    assert!(bodies.len() >= 6, "{}", bodies.len());
    for body in &bodies {
        assert!(body.to_string().contains("MEMORY-SEEN"), "{body}");
    }
}

/// gemini takes a settings file other than the user's own only from a file and folders that
/// root owns, and skips any other with a "Security Warning" (0.61.0): for every user but root,
/// cca's settings would never reach it. Here the test's folders belong to a user who is not root
/// (the test runs as root in CI, so they are given to uid 65534), which is what gemini looks at:
/// cca's settings (one attempt with `--fail-fast`, no terminal warnings) still reach it, and
/// gemini says nothing of them.
#[test]
fn gemini_takes_cca_s_settings_in_folders_that_are_not_root_s() {
    let r = Real::new();
    r.api.set(Behavior { status: Some(500), ..Behavior::default() });
    if rustix::process::getuid().is_root() {
        let chown = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(r.env.root.path())
            .status()
            .unwrap();
        assert!(chown.success());
    }
    let mut cmd = r.command();
    cmd.args(["search", "-e", "gemini", "-m", "gemini-2.5-pro", "--fail-fast", "doomed"]);
    let run = run_command(cmd, None);
    run.code(1);
    assert!(!run.stderr.contains("Security Warning"), "{run}");
    assert!(!run.stderr.contains("256-color"), "{run}");
    assert_eq!(r.api.turns().len(), 1, "one attempt\n{run}");
}
