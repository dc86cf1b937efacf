//! Tool calls: the real programs run their real tool flows against the loopback server's
//! script (DESIGN.md, "Tool calls"), and cca shows the answer exactly as the engine wrote it.

use super::*;

pub(crate) const FIRST_QUERY: &str = "rust 1.89 file locking";
pub(crate) const SECOND_QUERY: &str = "file locking on windows";

/// The engine's names for its web search and its shell.
pub(crate) fn tool_names(engine: &str) -> (&'static str, &'static str) {
    if engine == "claude" {
        ("WebSearch", "Bash")
    } else {
        ("google_web_search", "run_shell_command")
    }
}

/// A turn with two searches: text and a search; text and another search; then the answer in
/// three text blocks, the middle one citing a source (the API splits text at each citation).
pub(crate) fn two_searches(engine: &str) -> Behavior {
    let (search, _) = tool_names(engine);
    let (title, url) = mock_api::sources(FIRST_QUERY).remove(0);
    Behavior {
        script: vec![
            vec![
                Block::text("I'll search for that."),
                Block::tool(search, json!({"query": FIRST_QUERY})),
            ],
            vec![
                Block::text("Checking one more thing."),
                Block::tool(search, json!({"query": SECOND_QUERY})),
            ],
            vec![
                Block::text("According to the results, "),
                Block::cited("Rust 1.89 stabilised File::lock", &url, &title),
                Block::text(&format!(". Sources: [the guide]({url})")),
            ],
        ],
        ..Behavior::default()
    }
}

/// What stdout shows of [`two_searches`]: each message's text exactly, a break between messages.
pub(crate) fn two_searches_printed() -> String {
    let url = &mock_api::sources(FIRST_QUERY)[0].1;
    format!(
        "I'll search for that.\n\nChecking one more thing.\n\nAccording to the results, Rust 1.89 \
         stabilised File::lock. Sources: [the guide]({url})"
    )
}

/// What the transcript keeps of [`two_searches`]: the printed text with a block per search,
/// holding every source where the engine reports them (claude does, gemini does not).
pub(crate) fn two_searches_kept(engine: &str) -> String {
    let (search, _) = tool_names(engine);
    let block = |query: &str| {
        let mut block = format!("> {search}: {query}\n");
        if engine == "claude" {
            for (title, url) in mock_api::sources(query) {
                block.push_str(&format!("> - [{title}]({url})\n"));
            }
        }
        block
    };
    let url = &mock_api::sources(FIRST_QUERY)[0].1;
    format!(
        "I'll search for that.\n\n{}\nChecking one more thing.\n\n{}\nAccording to the results, \
         Rust 1.89 stabilised File::lock. Sources: [the guide]({url})",
        block(FIRST_QUERY),
        block(SECOND_QUERY)
    )
}

/// The `· ...` lines cca wrote on stderr for tool calls.
pub(crate) fn tool_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("· ")).collect()
}

pub(crate) fn searches_then_follow_up(engine: &str) {
    let r = Real::new();
    r.api.set(two_searches(engine));
    let run = r.run(&["search", "-e", engine, "what changed in file locking?"]);
    run.ok();
    // 1, 2: the text of one message exactly as it came; a break only between messages.
    assert_eq!(run.stdout, two_searches_printed(), "{engine}\n{run}");
    // The engine really searched, twice, in order, with its own search requests.
    assert_eq!(r.api.searches(), [FIRST_QUERY, SECOND_QUERY], "{engine}");
    // ... and gave the model what they found: every source, in the request for the answer.
    let turns = r.api.turns();
    assert_eq!(turns.len(), 3, "{engine}: one request per message of the model");
    let last = turns[2].body.to_string();
    for (_, url) in
        mock_api::sources(FIRST_QUERY).into_iter().chain(mock_api::sources(SECOND_QUERY))
    {
        assert!(last.contains(&url), "{engine}: the model was not given {url}");
    }
    let (search, _) = tool_names(engine);
    let sources = if engine == "claude" { " · 2 sources" } else { "" };
    assert_eq!(
        tool_lines(&run.stderr),
        [
            format!("· {search}: {FIRST_QUERY}{sources}"),
            format!("· {search}: {SECOND_QUERY}{sources}")
        ],
        "{engine}\n{run}"
    );
    // 5, 6: the transcript keeps both searches in order with every source, one blank line
    // around each block, and the answer's own bytes.
    let kept = two_searches_kept(engine);
    assert_eq!(answers_of(&r), std::slice::from_ref(&kept), "{engine}");
    assert!(!kept.contains("\n\n\n"), "{kept}");
    // Nothing of the search's own summary reaches the answer: it went to the model only.
    assert!(!run.stdout.contains("search found") && !run.stdout.contains("Search summary"));

    // 3: --json's answer is what stdout printed; the tool calls come apart.
    let run = r.run(&["search", "-r", "--json", "and once more?"]);
    let json: Value = serde_json::from_str(&run.ok().stdout).unwrap();
    assert_eq!(json["answer"], two_searches_printed(), "{engine}");
    let tools = json["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{json}");
    for (tool, query) in tools.iter().zip([FIRST_QUERY, SECOND_QUERY]) {
        assert_eq!(
            (&tool["name"], &tool["input"], &tool["status"]),
            (&json!(search), &json!(query), &json!("ran"))
        );
        let sources = tool["sources"].as_array().unwrap().len();
        assert_eq!(sources, if engine == "claude" { 2 } else { 0 }, "{json}");
    }

    // The follow-up's history holds both answers as kept, byte for byte.
    r.api.set(Behavior::default());
    let run = r.run(&["search", "-r", "and on windows?"]);
    assert_eq!(run.ok().stdout, "ECHO: and on windows?");
    let body = &r.api.turns().last().unwrap().body.clone();
    let sent = sent_answers(body);
    assert_eq!(sent, [kept.clone(), kept], "{engine}: {body}");
}

#[test]
fn claude_searches_then_follow_up() {
    searches_then_follow_up("claude");
}

#[test]
fn gemini_searches_then_follow_up() {
    searches_then_follow_up("gemini");
}

/// The model asks for the shell, which cca's settings keep out: the engine refuses, and the
/// model answers without it.
pub(crate) fn refused_shell(engine: &str) {
    let r = Real::new();
    let (_, shell) = tool_names(engine);
    let marker = r.env.root.path().join("the-shell-ran");
    let command = format!("touch {}", marker.display());
    r.api.set(Behavior {
        script: vec![
            vec![Block::tool(shell, json!({"command": command}))],
            vec![Block::text("I cannot run commands here.")],
        ],
        ..Behavior::default()
    });
    let run = r.run(&["search", "-e", engine, "list the files"]);
    run.ok();
    assert!(!marker.exists(), "{engine} ran the command");
    assert_eq!(run.stdout, "I cannot run commands here.");
    // 4: refused, on stderr with the engine's reason, and in the transcript.
    let lines = tool_lines(&run.stderr);
    assert_eq!(lines.len(), 1, "{run}");
    assert!(lines[0].starts_with(&format!("· {shell} (refused): {command} · ")), "{run}");
    let reason = if engine == "claude" { "No such tool available: Bash" } else { "not found" };
    assert!(lines[0].contains(reason), "{run}");
    assert_eq!(
        answers_of(&r),
        [format!("> {shell} (refused): {command}\n\nI cannot run commands here.")]
    );
    // The model was told, and went on.
    assert_eq!(r.api.turns().len(), 2, "{engine}");

    let run = r.run(&["search", "-r", "--json", "list them again"]);
    let json: Value = serde_json::from_str(&run.ok().stdout).unwrap();
    assert_eq!(json["answer"], "I cannot run commands here.");
    assert_eq!(json["tools"][0]["status"], "refused", "{json}");
    assert_eq!(json["tools"][0]["input"], json!(command));
    assert!(json["tools"][0]["reason"].as_str().unwrap().contains(reason), "{json}");
    assert!(!marker.exists(), "{engine} ran the command");
}

#[test]
fn claude_refuses_its_shell() {
    refused_shell("claude");
}

#[test]
fn gemini_refuses_its_shell() {
    refused_shell("gemini");
}
