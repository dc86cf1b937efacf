//! `cca import --auto on` with the real Claude Code, gemini and codex: a conversation held in
//! the tool ends, and its end-of-session hook (codex: notify) brings it into cca, once, while
//! the user's own hook still runs; `--auto off` gives the settings back byte for byte.

use super::*;

/// Waits until `check` holds, up to 30 s (the hook imports in the background).
fn eventually(what: &str, check: impl FnMut() -> bool) {
    assert!(wait_until(Duration::from_secs(30), check), "{what} did not happen in 30 s");
}

/// The sessions cca holds, read whole.
fn cca_sessions(r: &Real) -> Vec<String> {
    r.env
        .session_files()
        .iter()
        .map(|f| std::fs::read_to_string(r.env.sessions_dir().join(f)).unwrap())
        .collect()
}

fn answer(text: &str) -> Behavior {
    Behavior { answer: Some(text.to_string()), ..Behavior::default() }
}

/// The real tool, as a person runs it: not through cca, in the test's home and work folder.
fn tool(r: &Real, program: &Path, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear()
        .env("HOME", &r.env.home)
        .env("PATH", r.env.path_var())
        .envs(r.vars(&r.api.url()))
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("MOCK_API_KEY", "dummy")
        // No CCA_HOME: the hook carries the one `--auto on` was given.
        .current_dir(&r.env.work)
        .args(args)
        .stdin(Stdio::null());
    run_command(cmd, None)
}

/// Turns auto import on and off around `converse`, checking the settings come back exactly.
fn with_auto(r: &Real, settings: &Path, converse: impl FnOnce()) {
    let before = std::fs::read(settings).unwrap();
    r.run(&["import", "--auto", "on"]).ok();
    assert_ne!(std::fs::read(settings).unwrap(), before, "the hook went in");
    converse();
    r.run(&["import", "--auto", "off"]).ok();
    assert_eq!(std::fs::read(settings).unwrap(), before, "off gives the file back");
}

/// The conversation arrived, once: one session holding it, and a full import after finds
/// nothing new.
fn arrived_once(r: &Real, tool_name: &str, question: &str, answer: &str) {
    eventually("the import", || cca_sessions(r).iter().any(|s| s.contains(answer)));
    let log = std::fs::read_to_string(r.env.cca_home.join("auto/hooks.log")).unwrap();
    let sessions = cca_sessions(r);
    assert_eq!(sessions.len(), 1, "{log}");
    assert!(sessions[0].contains(question) && sessions[0].contains(answer), "{}", sessions[0]);
    let again = r.run(&["import", tool_name]);
    assert_eq!(again.ok().stdout, "", "{again}");
    assert_eq!(r.env.session_files().len(), 1);
}

/// A user's own hook command: appends what it was given to a file in the home.
const USERS_HOOK: &str = "cat >> \\\"$HOME/users-hook\\\"";

#[test]
fn claude_p_ends_and_its_conversation_is_in_cca_once() {
    let r = Real::new();
    let settings = r.env.home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        format!(
            "{{\n  \"hooks\": {{\n    \"SessionEnd\": [{{\"hooks\": [{{\"type\": \"command\", \
             \"command\": \"{USERS_HOOK}\"}}]}}]\n  }}\n}}\n"
        ),
    )
    .unwrap();
    with_auto(&r, &settings, || {
        r.api.set(answer("Claude kept this."));
        tool(&r, &r.claude, &["-p", "--", "keep this, claude"]).ok();
        arrived_once(&r, "claude", "keep this, claude", "Claude kept this.");
        let users = std::fs::read_to_string(r.env.home.join("users-hook")).unwrap();
        assert!(users.contains("\"hook_event_name\":\"SessionEnd\""), "{users}");
        own_turns_are_not_imported(&r, "claude");
    });
}

/// A turn of cca's own through the tool runs the tool's hooks too (the user's ran), and imports
/// nothing: cca holds the turn already.
fn own_turns_are_not_imported(r: &Real, engine: &str) {
    let users_hook = r.env.home.join("users-hook");
    let ran =
        || std::fs::read_to_string(&users_hook).unwrap_or_default().matches("SessionEnd").count();
    let before = ran();
    r.run(&["search", "-q", "-e", engine, "a turn of cca's own"]).ok();
    eventually("the user's hook for cca's turn", || ran() > before);
    // The hook's import, had it started one, would be done in well under 5 s (3 s of waiting
    // for the file to settle at most).
    std::thread::sleep(Duration::from_secs(5));
    let log = std::fs::read_to_string(r.env.cca_home.join("auto/hooks.log")).unwrap_or_default();
    assert_eq!(log.matches(" ended: ").count(), 1, "{log}");
    assert_eq!(r.env.session_files().len(), 2, "the imported one and cca's own\n{log}");
}

#[test]
fn gemini_p_ends_and_its_conversation_is_in_cca_once() {
    let r = Real::new();
    let settings = r.env.home.join(".gemini/settings.json");
    std::fs::write(
        &settings,
        format!(
            "{{\"security\":{{\"auth\":{{\"selectedType\":\"gemini-api-key\"}}}},\n \"hooks\": \
             {{\"SessionEnd\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": \
             \"{USERS_HOOK}\"}}]}}]}}}}\n"
        ),
    )
    .unwrap();
    with_auto(&r, &settings, || {
        r.api.set(answer("Gemini kept this."));
        tool(&r, &r.gemini, &["--skip-trust", "-p", "keep this, gemini"]).ok();
        arrived_once(&r, "gemini", "keep this, gemini", "Gemini kept this.");
        let users = std::fs::read_to_string(r.env.home.join("users-hook")).unwrap();
        assert!(users.contains("SessionEnd"), "{users}");
        own_turns_are_not_imported(&r, "gemini");
    });
}

#[test]
fn codex_exec_ends_and_its_conversation_is_in_cca_once() {
    let r = Real::new();
    let codex = real_program("CCA_TEST_CODEX", "codex/node_modules/.bin/codex");
    let config = r.env.home.join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let users = r.env.home.join("users-notify");
    std::fs::write(
        &config,
        format!(
            "notify = [\"sh\", \"-c\", \"printf '%s' \\\"$1\\\" >> {}\", \"notify\"]\n\
             model = \"gpt-mock\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\nname = \"mock\"\n\
             base_url = \"{}/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n",
            users.display(),
            r.api.url()
        ),
    )
    .unwrap();
    with_auto(&r, &config, || {
        tool(&r, &codex, &["exec", "--skip-git-repo-check", "keep this, codex"]).ok();
        arrived_once(&r, "codex", "keep this, codex", "ECHO: keep this, codex");
        eventually("the user's notify", || users.exists());
        let said = std::fs::read_to_string(&users).unwrap();
        assert!(said.contains("agent-turn-complete"), "{said}");
    });
}
