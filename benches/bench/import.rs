//! `cca import` of a large Claude Code store.

use super::*;

/// `cca import claude` on 10,000 generated Claude Code sessions.
impl Bench {
    pub(crate) fn import(&self) {
        println!("## Importing 10,000 Claude Code sessions: `cca import claude`\n");
        let home = self.home("import");
        let sessions = 10_000u64;
        let bytes = write_claude_store(&home.dir.join(".claude/projects"), sessions);
        let import = || {
            let out = home.command(&["import", "claude"], "").stdout(Stdio::null()).status();
            assert!(out.unwrap().success());
        };
        let first = time_runs(1, import);
        let again = time_runs(10, import);
        let list = time_runs(10, || {
            let out = home.command(&["sessions"], "").stdout(Stdio::null()).status().unwrap();
            assert!(out.success());
        });
        println!("{TABLE}");
        println!("{}", first.row("first import (reads and writes every session)"));
        println!("{}", again.row("again, nothing new (a size and time check per file)"));
        println!("{}", list.row("`cca sessions` of the same 10,000, for scale"));
        println!(
            "\n{sessions} files of 3 exchanges in the shapes Claude Code 2.1.329 writes (attachment and \
             bookkeeping lines, an answer spanning lines, a web search), {:.1} MB in all.\n",
            bytes as f64 / 1e6
        );
    }
}

/// Claude Code session files, `sessions` of them in 100 project folders; returns their size.
pub(crate) fn write_claude_store(root: &Path, sessions: u64) -> u64 {
    let mut total = 0;
    for i in 0..sessions {
        let dir = root.join(format!("-home-me-src-project{}", i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        let sid = format!("00000000-0000-4000-8000-{i:012}");
        let mut parent = serde_json::Value::Null;
        let mut text = String::new();
        let mut n = 0u64;
        let line = |v: serde_json::Value, text: &mut String| {
            text.push_str(&v.to_string());
            text.push('\n');
        };
        for turn in 0..3 {
            let mut next = || {
                n += 1;
                format!("{i:08x}-0000-4000-8000-{n:012}")
            };
            let at = format!("2026-11-{:02}T10:{:02}:{:02}.000Z", 1 + i % 28, turn, i % 60);
            let common = |uuid: &str, parent: &serde_json::Value| {
                json!({"parentUuid": parent, "isSidechain": false, "uuid": uuid, "timestamp": at,
                       "cwd": format!("/home/me/src/project{}", i % 100), "sessionId": sid,
                       "version": "2.1.329", "userType": "external"})
            };
            line(
                json!({"type": "queue-operation", "operation": "enqueue", "sessionId": sid}),
                &mut text,
            );
            let u = next();
            let mut user = common(&u, &parent);
            user["type"] = json!("user");
            user["message"] = json!({"role": "user", "content": format!("question {turn} of session {i}: what changed in file locking?")});
            line(user, &mut text);
            let a = next();
            let mut attachment = common(&a, &json!(u));
            attachment["type"] = json!("attachment");
            attachment["attachment"] = json!({"type": "date", "date": "2026-11-23"});
            line(attachment, &mut text);
            let mut last = a;
            let blocks = [
                json!({"type": "text", "text": "Let me search."}),
                json!({"type": "tool_use", "id": format!("toolu_{turn}"), "name": "WebSearch", "input": {"query": "rust file locking"}}),
            ];
            for block in blocks {
                let id = next();
                let mut m = common(&id, &json!(last));
                m["type"] = json!("assistant");
                m["message"] = json!({"id": format!("msg_{turn}a"), "role": "assistant", "model": "claude-opus-5-5",
                                      "content": [block], "usage": {"input_tokens": 1200, "output_tokens": 40}});
                line(m, &mut text);
                last = id;
            }
            let r = next();
            let mut result = common(&r, &json!(last));
            result["type"] = json!("user");
            result["message"] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{turn}"),
                "content": "Web search results for query: \"rust file locking\"\n\nLinks: [{\"title\":\"The guide\",\"url\":\"https://guide.example.org/locks\"}]\n\nA summary."}]});
            line(result, &mut text);
            let f = next();
            let mut answer = common(&f, &json!(r));
            answer["type"] = json!("assistant");
            answer["message"] = json!({"id": format!("msg_{turn}b"), "role": "assistant", "model": "claude-opus-5-5",
                "content": [{"type": "text", "text": "Rust 1.89 stabilised File::lock. ".repeat(20)}],
                "usage": {"input_tokens": 1500, "output_tokens": 200}});
            line(answer, &mut text);
            parent = json!(f);
        }
        total += text.len() as u64;
        std::fs::write(dir.join(format!("{sid}.jsonl")), text).unwrap();
    }
    total
}
