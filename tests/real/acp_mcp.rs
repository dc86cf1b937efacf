//! MCP servers an editor gives `cca acp`, started or reached by the real engines.

use super::*;

/// A minimal stdio MCP server: it writes the file `MARKER` names when started, then answers
/// `initialize` and `tools/list` (no tools).
pub(crate) const MCP_SERVER: &str = r#"import json, os, sys
with open(os.environ["MARKER"], "w") as f:
    f.write(" ".join(sys.argv[1:]))
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        version = msg.get("params", {}).get("protocolVersion", "2024-11-05")
        result = {"protocolVersion": version, "capabilities": {"tools": {}},
                  "serverInfo": {"name": "marker", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": []}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// The python that runs [`MCP_SERVER`].
pub(crate) fn python() -> &'static str {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("python3 for the MCP server")
}

/// An MCP server given in session/new (or in session/fork, to the fork of a written session)
/// is started by the real engine for the session's turn, with its arguments and environment.
pub(crate) fn acp_mcp_server(engine: &str, fork: bool) {
    let r = Real::new();
    r.env.write_config(&format!("engine = \"{engine}\"\n"));
    let script = r.env.root.path().join("mcp_server.py");
    std::fs::write(&script, MCP_SERVER).unwrap();
    let marker = r.env.root.path().join("mcp-started");
    let python = python();
    let server = json!({"name": "marker", "command": python, "args": [script, "--flag"],
                        "env": [{"name": "MARKER", "value": marker}]});
    let steps = if fork {
        vec![
            json!({"call": "session/new", "as": "first", "params": {"cwd": r.env.work, "mcpServers": []}}),
            acp_prompt("p0", "$first.sessionId", "without a server", true),
            json!({"call": "session/fork", "as": "s", "params":
                   {"sessionId": "$first.sessionId", "cwd": r.env.work, "mcpServers": [server]}}),
        ]
    } else {
        vec![json!({"call": "session/new", "as": "s",
                    "params": {"cwd": r.env.work, "mcpServers": [server]}})]
    };
    let out =
        acp(&r, &[steps, vec![acp_prompt("p", "$s.sessionId", "with a server", true)]].concat());
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", out["results"]);
    let started = std::fs::read_to_string(&marker)
        .unwrap_or_else(|_| panic!("{engine} did not start the MCP server: {}", out["results"]));
    assert_eq!(started, "--flag", "{engine}");
}

#[test]
fn acp_mcp_server_started_by_claude() {
    acp_mcp_server("claude", false);
}

#[test]
fn acp_mcp_server_given_to_a_fork_started_by_claude() {
    acp_mcp_server("claude", true);
}

#[test]
fn acp_mcp_server_started_by_gemini() {
    acp_mcp_server("gemini", false);
}

#[test]
fn sigterm_of_cca_acp_stops_and_records_gemini() {
    acp_signalled("gemini", rustix::process::Signal::TERM);
}

/// A minimal MCP server over streamable HTTP: prints its port, appends each method it is
/// sent to the file `MARKER` names, and answers `initialize` and `tools/list` (no tools).
pub(crate) const MCP_HTTP_SERVER: &str = r#"import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        self.send_response(405)
        self.end_headers()
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with open(os.environ["MARKER"], "a") as f:
            f.write(msg.get("method", "") + " " + self.headers.get("X-Token", "") + "\n")
        if "id" not in msg:
            self.send_response(202)
            self.end_headers()
            return
        if msg["method"] == "initialize":
            version = msg.get("params", {}).get("protocolVersion", "2025-03-26")
            result = {"protocolVersion": version, "capabilities": {"tools": {}},
                      "serverInfo": {"name": "marker", "version": "1"}}
        elif msg["method"] == "tools/list":
            result = {"tools": []}
        else:
            result = {}
        body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// An MCP server over HTTP given in session/new is reached by the real engine, with its headers.
pub(crate) fn acp_mcp_http_server(engine: &str) {
    use std::io::BufRead;
    let r = Real::new();
    r.env.write_config(&format!("engine = \"{engine}\"\n"));
    let marker = r.env.root.path().join("mcp-http");
    let mut server = std::process::Command::new("python3");
    server.arg("-c").arg(MCP_HTTP_SERVER).env("MARKER", &marker);
    server.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut server = Guard(server.spawn().expect("python3 for the MCP server"));
    let mut port = String::new();
    std::io::BufReader::new(server.0.stdout.take().unwrap()).read_line(&mut port).unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", port.trim());
    let given = json!({"type": "http", "name": "marker", "url": url,
                       "headers": [{"name": "X-Token", "value": "secret"}]});
    let out = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s",
                   "params": {"cwd": r.env.work, "mcpServers": [given]}}),
            acp_prompt("p", "$s.sessionId", "with a server", true),
        ],
    );
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", out["results"]);
    let seen = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(seen.contains("initialize secret"), "{engine} did not reach the MCP server: {seen:?}");
}

#[test]
fn acp_mcp_http_server_reached_by_claude() {
    acp_mcp_http_server("claude");
}

#[test]
fn acp_mcp_http_server_reached_by_gemini() {
    acp_mcp_http_server("gemini");
}
