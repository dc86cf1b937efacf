//! The real engines under cca keep to cca's terms: they use only what cca gives them of the
//! user's own configuration where it would change a turn, leave none of their files behind,
//! give up at once when the key is wrong, and say on stderr only what tells the user something.

use std::path::Path;

use serde_json::json;

use super::common::*;
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
