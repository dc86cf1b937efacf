//! The real engines under cca keep to cca's terms: they use only what cca gives them of the
//! user's own configuration where it would change a turn, leave none of their files behind,
//! give up at once when the key is wrong, and say on stderr only what tells the user something.

use std::path::Path;

use serde_json::json;

use super::{MCP_SERVER, Real};

fn python() -> &'static str {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("python3 for the MCP server")
}

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
/// start-up timing and its warning about cca's own settings file say nothing to the user.
#[test]
fn gemini_says_nothing_of_its_own_on_stderr() {
    let r = Real::new();
    for args in [&["search", "-e", "gemini", "one"][..], &["search", "-r", "--fail-fast", "two"]] {
        let run = r.run(args);
        run.ok();
        let noise: Vec<&str> =
            run.stderr.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("cca:")).collect();
        assert_eq!(noise, Vec::<&str>::new(), "{args:?}\n{run}");
    }
}
