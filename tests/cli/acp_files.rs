//! `cca acp`: files and images in prompts and in loaded sessions.

use std::path::Path;

use serde_json::{Value, json};

use super::acp::*;
use crate::common::{self, TestEnv};

#[test]
fn linked_files_are_read_when_shared_and_images_refused_by_a_text_engine() {
    use base64::Engine as _;
    let env = TestEnv::new();
    env.add_engine("echo-engine");
    env.write_config("engine = \"echo\"\n[engines.echo]\ncommand = [\"echo-engine\"]\n");
    let outside = env.root.path().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("shared.txt"), "ON DISK: shared\n").unwrap();
    std::fs::write(outside.join("other.txt"), "ON DISK: other\n").unwrap();
    std::fs::write(env.work.join("here.txt"), "ON DISK: here\n").unwrap();
    let uri = |p: &Path| format!("file://{}", p.display());
    let png =
        base64::engine::general_purpose::STANDARD.encode(include_bytes!("../fixtures/pixel.png"));
    let ask = |name: &str, blocks: Value| {
        json!({"call": "session/prompt", "as": name,
               "params": {"sessionId": "$s.sessionId", "prompt": blocks}})
    };
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            ask(
                "image",
                json!([{"type": "text", "text": "what is it?"},
                                {"type": "image", "data": png, "mimeType": "image/png"}]),
            ),
            ask(
                "embed",
                json!([{"type": "text", "text": "first"},
                                {"type": "resource", "resource":
                                    {"uri": uri(&outside.join("shared.txt")), "text": "EMBEDDED"}}]),
            ),
            ask(
                "links",
                json!([{"type": "text", "text": "second"},
                                {"type": "resource_link", "name": "shared.txt",
                                 "uri": uri(&outside.join("shared.txt"))},
                                {"type": "resource_link", "name": "other.txt",
                                 "uri": uri(&outside.join("other.txt"))},
                                {"type": "resource_link", "name": "here.txt",
                                 "uri": uri(&env.work.join("here.txt"))}]),
            ),
        ],
        &[],
    );
    let error = &out["results"]["image"]["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("engine echo cannot take images"),
        "{error}"
    );
    assert!(!env.cca_home.join("files").exists(), "nothing was kept of the refused image");
    let calls = env.calls();
    assert_eq!(calls.len(), 2, "the refused prompt reached no engine");
    let first = common::stdin_of(&calls[0]);
    assert!(first.contains("EMBEDDED"), "{first}");
    let second = common::stdin_of(&calls[1]).to_string();
    assert!(second.contains("ON DISK: shared"), "sent embedded before, so shared: {second}");
    assert!(second.contains("ON DISK: here"), "under the session's folder: {second}");
    assert!(!second.contains("ON DISK: other"), "neither: not read: {second}");
    let other = format!("[other.txt]({})", uri(&outside.join("other.txt")));
    assert!(second.contains(&other), "a link not read is named in the question: {second}");
    // The transcript keeps the files' text, not URIs labelled with their length.
    let text = env.latest();
    let here = env.work.join("here.txt").canonicalize().unwrap();
    assert!(text.contains(&format!("#### Attached: {} (14 bytes)", here.display())), "{text}");
}

#[test]
fn a_loaded_session_shows_an_image_by_its_stored_copy() {
    let env = TestEnv::new();
    std::fs::write(env.work.join("pic.png"), include_bytes!("../fixtures/pixel.png")).unwrap();
    env.run(&["search", "-e", "claude", "-f", "pic.png", "what is it?"]).ok();
    let id = session_id(&env);
    let out = sdk(
        &env,
        &[json!({"call": "session/load", "as": "load",
                 "params": {"sessionId": id, "cwd": env.work, "mcpServers": []}})],
        &[],
    );
    let asked = texts(&out, &id, "user_message_chunk");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let files = env.cca_home.join("files");
    let stored = std::fs::read_dir(&files).unwrap().next().unwrap().unwrap().path();
    assert_eq!(asked[0], format!("what is it?\n\n![pic.png](file://{})", stored.display()));
}

#[test]
fn a_first_prompt_refused_for_its_image_leaves_no_session_file() {
    use base64::Engine as _;
    let env = TestEnv::new();
    env.add_engine("echo-engine");
    env.write_config("engine = \"echo\"\n[engines.echo]\ncommand = [\"echo-engine\"]\n");
    let png =
        base64::engine::general_purpose::STANDARD.encode(include_bytes!("../fixtures/pixel.png"));
    let out = sdk(
        &env,
        &[
            new_session("s", &env.work),
            json!({"call": "session/prompt", "as": "image", "params": {"sessionId": "$s.sessionId",
                   "prompt": [{"type": "text", "text": "what is it?"},
                              {"type": "image", "data": png, "mimeType": "image/png"}]}}),
        ],
        &[],
    );
    let error = &out["results"]["image"]["error"];
    assert!(error["message"].as_str().unwrap_or("").contains("cannot take images"), "{error}");
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
}
