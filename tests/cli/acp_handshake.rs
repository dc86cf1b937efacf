//! `cca acp`'s handshake with a client that does not wait: requests sent right behind
//! `initialize`, before its response arrived, are served as if the client had waited.

use std::process::Command;

use serde_json::{Value, json};

use crate::common::{self, TestEnv};

#[test]
fn a_session_new_sent_before_the_initialize_reply_is_served() {
    let env = TestEnv::new();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
               "params": {"cwd": env.work, "mcpServers": []}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut cmd = Command::new(common::cca_exe());
    cmd.arg("acp")
        .env_clear()
        .env("HOME", &env.home)
        .env("CCA_HOME", &env.cca_home)
        .env("PATH", env.path_var())
        .env("CCA_NOW", common::NOW)
        .current_dir(&env.work);
    let run = common::run_command(cmd, Some(input.as_bytes()));
    assert_eq!(run.code, Some(0), "{run}");
    let responses: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("id").is_some())
        .collect();
    let ids: Vec<&Value> = responses.iter().map(|v| &v["id"]).collect();
    assert_eq!(ids, [&json!(0), &json!(1), &json!(2)], "{run}");
    for v in &responses {
        assert!(v.get("error").is_none(), "{v}\n{run}");
    }
    assert!(responses[1]["result"]["sessionId"].is_string(), "{run}");
}
