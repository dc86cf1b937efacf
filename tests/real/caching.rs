//! What the real engines send turn after turn: each request extending the one before.

use super::*;

/// Varied text of about `count` sentences, the `n`th of its kind: gemini stops on text that
/// repeats itself ("Loop detected").
pub(crate) fn filler(n: usize, what: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "{what} {n} sentence {i} weighs item {} against {}. ",
                i * 7919 % 1013,
                i * 104_729 % 997
            )
        })
        .collect()
}

/// `turns` one-shot turns of `cca search -r` through `engine` (about 2,800 tokens each: a long
/// question and a long answer); returns the answer requests as recorded.
pub(crate) fn long_turns(r: &Real, engine: &str, turns: usize) -> Vec<Value> {
    for n in 0..turns {
        r.api.set(Behavior { answer: Some(filler(n, "Answer", 110)), ..Behavior::default() });
        let question = filler(n, "Question", 105);
        let mut args = vec!["search", "-q", "-e", engine];
        if n > 0 {
            args.push("-r");
        }
        args.push(&question);
        r.run(&args).ok();
    }
    r.api.answer_requests()
}

/// Whether `later` repeats `earlier` as its prefix, block by block, as the API reads them: the
/// same system prompt and tools, and every earlier message unchanged at its place. For claude,
/// `cache_control` aside (claude moves it to the newest message), and a string content the same
/// as one text block of it (claude sends a message as either).
pub(crate) fn extends(earlier: &Value, later: &Value) -> bool {
    differences(earlier, later).is_empty()
}

/// What keeps `later` from extending `earlier` ([`extends`]), in words; empty when it does.
pub(crate) fn differences(earlier: &Value, later: &Value) -> String {
    let list = |body: &Value| -> Vec<Value> {
        let key = if body["messages"].is_array() { "messages" } else { "contents" };
        let mut messages = body[key].as_array().cloned().unwrap_or_default();
        for m in &mut messages {
            if let Value::String(text) = &m["content"] {
                m["content"] = json!([{ "type": "text", "text": text }]);
            }
            for block in m["content"].as_array_mut().into_iter().flatten() {
                block.as_object_mut().map(|o| o.remove("cache_control"));
            }
        }
        messages
    };
    let (old, new) = (list(earlier), list(later));
    let mut why: Vec<String> = ["system", "systemInstruction", "tools"]
        .iter()
        .filter(|k| earlier[**k] != later[**k])
        .map(|k| format!("{k} changed"))
        .collect();
    if new.len() <= old.len() {
        why.push(format!("{} messages after {}", new.len(), old.len()));
    } else if let Some(at) = (0..old.len()).find(|&i| new[i] != old[i]) {
        let shown = |v: &Value| v.to_string().chars().take(300).collect::<String>();
        why.push(format!("message {at} changed: {} became {}", shown(&old[at]), shown(&new[at])));
    }
    why.join("; ")
}

#[test]
fn gemini_follow_ups_extend_the_previous_request() {
    // The defaults.
    let r = Real::new();
    long_turns(&r, "gemini", 3);
    r.env.command().arg("clear").output().unwrap();
    r.run(&["search", "-q", "-r", "after the clear"]).ok();
    r.run(&["search", "-q", "-r", "and once more"]).ok();
    // A turn by another engine in the session: the next gemini request starts afresh (it holds
    // claude's exchange), and the one after it extends that one.
    r.run(&["search", "-q", "-r", "-e", "claude", "a word from claude"]).ok();
    r.run(&["search", "-q", "-r", "-e", "gemini", "gemini again"]).ok();
    r.run(&["search", "-q", "-r", "and gemini once more"]).ok();
    let later: Vec<Value> = r.api.answer_requests().into_iter().skip(5).collect();
    assert!(later[0]["messages"].is_array(), "claude answered the sixth turn");
    let text = serde_json::to_string(&later[1]["contents"]).unwrap();
    assert!(text.contains("a word from claude"), "{text}");
    assert!(
        extends(&later[1], &later[2]),
        "after claude's turn: {}",
        differences(&later[1], &later[2])
    );
    assert_eq!(answers_of(&r).len(), 8);
    let bodies: Vec<Value> = r.api.answer_requests().into_iter().take(5).collect();
    assert_eq!(bodies.len(), 5);
    for (n, pair) in bodies.windows(2).enumerate() {
        let share = mock_api::cacheable_share(&pair[0], &pair[1]);
        if n == 2 {
            // The clear starts afresh: nothing from before it is sent.
            assert!(!extends(&pair[0], &pair[1]), "request {} sent what was cleared", n + 2);
            let text = serde_json::to_string(&pair[1]["contents"]).unwrap();
            assert!(!text.contains("Question 2"), "{text}");
        } else {
            let why = differences(&pair[0], &pair[1]);
            assert!(why.is_empty(), "request {} changed the one before it: {why}", n + 2);
            assert!(share > 0.5, "request {}: {share:.2} cacheable", n + 2);
        }
    }
}

/// With `CLAUDE_CONFIG_DIR` claude keeps its session files there: cca learns its notes from the
/// turn's file there, and removes it.
#[test]
fn claude_s_own_folder_is_where_claude_config_dir_says() {
    let r = Real::new();
    let dir = r.env.root.path().join("claude-config");
    let run = |args: &[&str]| {
        let mut cmd = r.command();
        cmd.args(args).env("CLAUDE_CONFIG_DIR", &dir);
        run_command(cmd, None).ok();
    };
    run(&["search", "-q", "-e", "claude", "first"]);
    run(&["search", "-q", "-r", "second"]);
    let id = r.transcript().header.id;
    let notes = r.env.cca_home.join(format!("live/{id}.claude-notes.json"));
    assert!(notes.is_file(), "claude's notes are learned from its file");
    let mut left = Vec::new();
    let mut stack = vec![dir.join("projects")];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            match entry.path() {
                p if p.is_dir() => stack.push(p),
                p if p.extension().is_some_and(|e| e == "jsonl") => left.push(p),
                _ => {}
            }
        }
    }
    assert_eq!(left, Vec::<PathBuf>::new(), "claude's own copies are removed");
    assert_eq!(engine_session_files(&r), Vec::<String>::new());
}

/// The share of requests `from` on (counted from 1) that the cache could serve after each one's
/// predecessor, over the bytes of all of them.
pub(crate) fn cacheable_from(bodies: &[Value], from: usize) -> f64 {
    let (mut cached, mut total) = (0.0, 0.0);
    for pair in bodies.windows(2).skip(from - 2) {
        let size = serde_json::to_string(&pair[1]).unwrap().len() as f64;
        cached += mock_api::cacheable_share(&pair[0], &pair[1]) * size;
        total += size;
    }
    cached / total
}

#[test]
fn claude_follow_ups_extend_the_previous_request() {
    // The defaults.
    let r = Real::new();
    let bodies = long_turns(&r, "claude", 10);
    assert_eq!(bodies.len(), 10);
    for (n, pair) in bodies.windows(2).enumerate() {
        assert!(extends(&pair[0], &pair[1]), "request {} changed the one before it", n + 2);
    }
    let share = cacheable_from(&bodies, 3);
    let each: Vec<String> = bodies
        .windows(2)
        .map(|pair| format!("{:.3}", mock_api::cacheable_share(&pair[0], &pair[1])))
        .collect();
    assert!(share >= 0.85, "{share:.3} of requests 3 to 10 cacheable (2 to 10: {each:?})");
    // A fresh start (a clear; a turn by another engine) costs one request, then they extend again.
    r.env.command().arg("clear").output().unwrap();
    r.run(&["search", "-q", "-r", "after the clear"]).ok();
    r.run(&["search", "-q", "-r", "and once more"]).ok();
    r.run(&["search", "-q", "-r", "-e", "gemini", "a word from gemini"]).ok();
    r.run(&["search", "-q", "-r", "-e", "claude", "claude again"]).ok();
    r.run(&["search", "-q", "-r", "and claude once more"]).ok();
    let claude: Vec<Value> = r
        .api
        .turns()
        .into_iter()
        .filter(|t| t.path.contains("/v1/messages"))
        .map(|t| t.body)
        .collect();
    assert_eq!(claude.len(), 14);
    let text = serde_json::to_string(&claude[10]["messages"]).unwrap();
    assert!(!text.contains("Question 9"), "the clear was not honoured: {text}");
    assert!(extends(&claude[10], &claude[11]), "after the clear");
    assert!(extends(&claude[12], &claude[13]), "after gemini's turn");
    let gemini_turn = serde_json::to_string(&claude[12]["messages"]).unwrap();
    assert!(gemini_turn.contains("a word from gemini"), "{gemini_turn}");
    assert_eq!(answers_of(&r).len(), 15);
    assert_eq!(engine_session_files(&r), Vec::<String>::new(), "claude's own copies are removed");
}
