//! `cca import --auto on|off` with the tools' settings files (the real tools run the hooks in
//! tests/real/auto.rs): the user's hooks kept, `off` giving the bytes back, files cca cannot
//! edit safely refused; and `cca import --hook` handing the conversation over and returning.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

const CLAUDE: &str = r#"{
    "model": "opus",
    "hooks": {
        "SessionEnd": [
            {"hooks": [{"type": "command", "command": "echo bye >> ~/ended"}]}
        ]
    }
}
"#;
const CODEX: &str =
    "# mine\nnotify = [\"notify-send\", \"codex\"]\nmodel = \"o3\"\n\n[tui]\nx = 1\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `PROGRAM ARGS`, a copy of cca somewhere else, in the environment `env` gives cca.
fn run_as(env: &TestEnv, program: &Path, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear().current_dir(&env.work).args(args);
    cmd.envs(env.command().get_envs().filter_map(|(key, value)| Some((key, value?))));
    run_command(cmd, None)
}

fn files(env: &TestEnv) -> [PathBuf; 3] {
    [".claude/settings.json", ".gemini/settings.json", ".codex/config.toml"]
        .map(|f| env.home.join(f))
}

#[test]
fn on_keeps_the_users_hooks_and_off_gives_each_file_back_byte_for_byte() {
    let env = TestEnv::new();
    let [claude, gemini, codex] = files(&env);
    write(&claude, CLAUDE);
    std::fs::create_dir_all(gemini.parent().unwrap()).unwrap();
    write(&codex, CODEX);
    let before_mode = std::fs::metadata(&claude).unwrap();

    env.run(&["import", "--auto", "on"]).ok().stderr_has("claude: on").stderr_has("codex: on");
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(&claude).unwrap()).unwrap();
    let commands: Vec<&str> = settings["hooks"]["SessionEnd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["hooks"][0]["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands[0], "echo bye >> ~/ended");
    // CCA_HOME is set here, so the hook carries it: the tool may start without it.
    let ours = format!(
        "CCA_HOME='{}' '{}' import --hook claude",
        env.cca_home.display(),
        cca_exe().display()
    );
    assert_eq!(commands[1], ours);
    assert_eq!(settings["model"], "opus");
    // gemini had no settings file: one is made with the hook alone.
    let made: Value = serde_json::from_str(&std::fs::read_to_string(&gemini).unwrap()).unwrap();
    assert_eq!(
        made,
        json!({"hooks": {"SessionEnd": [{"hooks": [{"type": "command", "command": ours.replace("claude", "gemini")}]}]}})
    );
    let toml: toml::Table = std::fs::read_to_string(&codex).unwrap().parse().unwrap();
    let notify: Vec<&str> =
        toml["notify"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    let exe = cca_exe();
    let home = format!("CCA_HOME={}", env.cca_home.display());
    let expected = [
        "/usr/bin/env",
        &home,
        exe.to_str().unwrap(),
        "import",
        "--hook",
        "codex",
        "--",
        "notify-send",
        "codex",
    ];
    assert_eq!(notify, expected);
    assert!(std::fs::read_to_string(&codex).unwrap().starts_with("# mine\nnotify = ["));
    assert_eq!(
        std::fs::metadata(&claude).unwrap().permissions(),
        before_mode.permissions(),
        "the file keeps its permissions"
    );

    // Again: nothing changes.
    let with = files(&env).map(|f| std::fs::read(f).unwrap());
    env.run(&["import", "--auto", "on"]).ok().stderr_has("on already");
    assert_eq!(files(&env).map(|f| std::fs::read(f).unwrap()), with);
    let doctor = env.run(&["doctor"]);
    assert!(doctor.stdout.contains("claude on, gemini on, codex on"), "{doctor}");

    env.run(&["import", "--auto", "off"]).ok();
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), CLAUDE);
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), CODEX);
    assert!(!gemini.exists(), "the file cca made is gone");
    let doctor = env.run(&["doctor"]);
    assert!(doctor.stdout.contains("claude off, gemini off, codex off"), "{doctor}");
}

#[test]
fn off_after_the_user_changed_the_file_takes_out_cca_s_entry_alone() {
    let env = TestEnv::new();
    let [claude, _, codex] = files(&env);
    write(&claude, CLAUDE);
    write(&codex, "model = \"o3\"\n");
    env.run(&["import", "--auto", "on"]).ok();
    let edited = std::fs::read_to_string(&claude).unwrap().replace("opus", "sonnet");
    std::fs::write(&claude, &edited).unwrap();
    std::fs::write(&codex, std::fs::read_to_string(&codex).unwrap() + "# later\n").unwrap();
    env.run(&["import", "--auto", "off"]).ok().stderr_has("changed since");
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), CLAUDE.replace("opus", "sonnet"));
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), "model = \"o3\"\n# later\n");
}

#[test]
fn a_settings_file_with_comments_is_refused_and_left_alone() {
    let env = TestEnv::new();
    let [_, gemini, _] = files(&env);
    let commented = "{\n  // my theme\n  \"ui\": {\"theme\": \"x\"}\n}\n";
    write(&gemini, commented);
    let run = env.run(&["import", "--auto", "on"]);
    run.code(1).stderr_has("has comments").stderr_has("hint: add cca's hook by hand");
    assert_eq!(run.stderr.matches("has comments").count(), 1, "said once: {run}");
    assert_eq!(std::fs::read_to_string(&gemini).unwrap(), commented);
    // A trailing comma is not a comment, though a URL in the file has `//`.
    let comma = "{\"url\": \"https://example.org\",}\n";
    write(&gemini, comma);
    let run = env.run(&["import", "--auto", "on"]);
    run.code(1).stderr_has("cannot be read");
    assert!(!run.stderr.contains("has comments"), "{run}");
    assert!(run.stderr.contains("not found"), "claude and codex have no folder: {run}");
}

fn only_session(env: &TestEnv) -> String {
    let files = env.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(env.sessions_dir().join(&files[0])).unwrap()
}

/// A Claude Code session file of one exchange.
fn claude_session(dir: &Path) -> PathBuf {
    let file = dir.join("0199-claude.jsonl");
    let lines = [
        json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "0199-claude", "cwd": "/w", "timestamp": "2026-11-20T08:00:00Z", "version": "2.1.329", "message": {"role": "user", "content": "hello"}}),
        json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "0199-claude", "timestamp": "2026-11-20T08:00:01Z", "message": {"id": "m1", "role": "assistant", "model": "claude-x", "content": [{"type": "text", "text": "hi"}]}}),
    ];
    write(&file, &lines.iter().map(|l| format!("{l}\n")).collect::<String>());
    file
}

#[test]
fn the_hook_returns_at_once_silently_and_the_conversation_arrives_once() {
    let env = TestEnv::new();
    let file = claude_session(&env.home.join(".claude/projects/-w"));
    let event = json!({"session_id": "0199-claude", "transcript_path": file, "cwd": "/w", "hook_event_name": "SessionEnd", "reason": "other"});
    for _ in 0..2 {
        let run =
            env.run_with(&["import", "--hook", "claude"], Some(event.to_string().as_bytes()), &[]);
        run.ok();
        assert_eq!(
            (run.stdout.as_str(), run.stderr.as_str()),
            ("", ""),
            "nothing reaches the tool"
        );
    }
    let log = env.cca_home.join("auto/hooks.log");
    let both_done =
        || std::fs::read_to_string(&log).unwrap_or_default().matches("cca: imported").count() == 2;
    assert!(
        wait_until(Duration::from_secs(20), both_done),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(env.session_files().len(), 1, "imported once");
    assert!(only_session(&env).contains("hello"));

    // Broken JSON: still exit 0 and silent; the log says why.
    let run = env.run_with(&["import", "--hook", "claude"], Some(b"{nope"), &[]);
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (Some(0), "", ""));
    let said = || std::fs::read_to_string(&log).unwrap_or_default().contains("JSON cannot be read");
    assert!(wait_until(Duration::from_secs(20), said));
}

/// A run cca started as its own engine (a turn with claude, gemini or a codex command engine)
/// is in cca already: its hook imports nothing.
#[test]
fn the_hook_of_a_run_cca_started_imports_nothing() {
    let env = TestEnv::new();
    let file = claude_session(&env.home.join(".claude/projects/-w"));
    let event = json!({"session_id": "0199-claude", "transcript_path": file, "cwd": "/w", "hook_event_name": "SessionEnd", "reason": "other"});
    let hook = |marked: &[(&str, &str)]| {
        let input = event.to_string();
        let run = env.run_with(&["import", "--hook", "claude"], Some(input.as_bytes()), marked);
        assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (Some(0), "", ""));
    };
    hook(&[("CCA_ENGINE_RUN", "1")]);
    // The same conversation's hook from a run of the user's own: the one import there is.
    hook(&[]);
    let log = env.cca_home.join("auto/hooks.log");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(wait_until(Duration::from_secs(20), || text().contains("cca: imported")), "{}", text());
    assert_eq!(text().matches("claude ended").count(), 1, "{}", text());
    assert_eq!(env.session_files().len(), 1);
    // cca marks the engines it starts so.
    env.run(&["search", "-q", "a turn"]).ok();
    assert_eq!(env.last_call()["env"]["CCA_ENGINE_RUN"], "1", "{}", env.last_call());
}

/// A codex rollout of one answered question (thread `0199-codex`), where codex keeps it.
fn codex_rollout(env: &TestEnv) {
    let dir = env.home.join(".codex/sessions/2026/11/20");
    let at = "2026-11-20T08:00:00.000Z";
    let lines = [
        json!({"timestamp": at, "type": "session_meta", "payload": {"id": "0199-codex", "cwd": "/w", "timestamp": at, "cli_version": "0.169.0"}}),
        json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "question"}]}}),
        json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer"}]}}),
    ];
    write(
        &dir.join("rollout-2026-11-20T08-00-00-0199-codex.jsonl"),
        &lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    );
}

#[test]
fn codex_s_notify_imports_the_thread_and_runs_the_users_own_notify() {
    let env = TestEnv::new();
    codex_rollout(&env);
    let mine = env.root.path().join("mine.sh");
    write(&mine, "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$HOME/notified\"\n");
    std::fs::set_permissions(&mine, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let event = json!({"type": "agent-turn-complete", "thread-id": "0199-codex", "turn-id": "1", "cwd": "/w"}).to_string();
    let run =
        env.run(&["import", "--hook", "codex", "--", mine.to_str().unwrap(), "first", &event]);
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (Some(0), "", ""));
    let notified = env.home.join("notified");
    assert!(
        wait_until(Duration::from_secs(20), || env.session_files().len() == 1 && notified.exists())
    );
    assert!(only_session(&env).contains("answer"));
    assert_eq!(std::fs::read_to_string(&notified).unwrap(), format!("first\n{event}\n"));
}

/// The hook's import depends on nothing it does not use: a config naming an engine that is
/// not there, or an engine variable misspelt, is noted in the log and the conversation
/// arrives; a notify of the user's that cannot start is logged and codex's thread arrives.
#[test]
fn the_hook_imports_whatever_the_engine_settings_say_and_a_notify_that_cannot_start_is_logged() {
    let env = TestEnv::new();
    write(&env.cca_home.join("config.toml"), "engine = \"ghost\"\n");
    let file = claude_session(&env.home.join(".claude/projects/-w"));
    let event = json!({"session_id": "0199-claude", "transcript_path": file, "cwd": "/w", "hook_event_name": "SessionEnd", "reason": "other"});
    let input = event.to_string();
    let run = env.run_with(&["import", "--hook", "claude"], Some(input.as_bytes()), &[]);
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (Some(0), "", ""));
    let log = env.cca_home.join("auto/hooks.log");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(wait_until(Duration::from_secs(20), || text().contains("cca: imported")), "{}", text());
    assert!(text().contains("`ghost`") && text().contains("importing without them"), "{}", text());
    assert_eq!(env.session_files().len(), 1);
    // By hand too, with an engine variable that names no engine.
    codex_rollout(&env);
    std::fs::remove_file(env.cca_home.join("config.toml")).unwrap();
    let event = json!({"type": "agent-turn-complete", "thread-id": "0199-codex", "turn-id": "1", "cwd": "/w"}).to_string();
    let gone = env.root.path().join("uninstalled-notify");
    let run = env.run_with(
        &["import", "--hook", "codex", "--", gone.to_str().unwrap(), &event],
        None,
        &[("CCA_ENGINE", "nope")],
    );
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (Some(0), "", ""));
    assert!(wait_until(Duration::from_secs(20), || env.session_files().len() == 2), "{}", text());
    assert!(text().contains("codex hook: your notify:"), "{}", text());
}

#[test]
fn doctor_warns_of_sessions_near_their_tools_deletion_age_that_cca_has_not_imported() {
    let env = TestEnv::new();
    let file = claude_session(&env.home.join(".claude/projects/-w"));
    let days_ago = |days: u64| std::time::SystemTime::now() - Duration::from_secs(days * 86_400);
    let set_age = |days| {
        let f = std::fs::File::options().append(true).open(&file).unwrap();
        f.set_modified(days_ago(days)).unwrap();
    };
    set_age(20);
    let warned = |run: &Run| run.stdout.contains("claude session(s) not in cca");
    assert!(!warned(&env.run(&["doctor"])), "20 days: not yet");
    set_age(25);
    let run = env.run(&["doctor"]);
    assert!(run.stdout.contains("1 claude session(s) not in cca are 23 days old or more"), "{run}");
    write(&env.home.join(".claude/settings.json"), "{\"cleanupPeriodDays\": 90}");
    assert!(!warned(&env.run(&["doctor"])), "kept for 90 days");
    std::fs::remove_file(env.home.join(".claude/settings.json")).unwrap();
    env.run(&["import", "claude"]).ok();
    assert!(!warned(&env.run(&["doctor"])), "imported");
}

#[test]
fn on_replaces_a_hook_of_cca_from_an_old_place_and_off_still_gives_the_original() {
    let env = TestEnv::new();
    let [claude, _, _] = files(&env);
    write(&claude, CLAUDE);
    env.run(&["import", "--auto", "on"]).ok();
    let exe = cca_exe().display().to_string();
    let moved = std::fs::read_to_string(&claude).unwrap().replace(&exe, "/old/place/cca");
    std::fs::write(&claude, &moved).unwrap();
    env.run(&["import", "--auto", "on"]).ok().stderr_has("claude: on:");
    let now = std::fs::read_to_string(&claude).unwrap();
    assert!(!now.contains("/old/place") && now.matches("--hook claude").count() == 1, "{now}");
    env.run(&["import", "--auto", "off"]).ok();
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), CLAUDE);
}

/// `on` from a second CCA_HOME replaces the first's hook; its `off` then gives the file back
/// without either (the first's hook is not the user's original).
#[test]
fn off_after_on_from_two_homes_leaves_no_hook_of_cca() {
    let env = TestEnv::new();
    let [claude, _, _] = files(&env);
    write(&claude, CLAUDE);
    env.run(&["import", "--auto", "on"]).ok();
    let other = env.root.path().join("other-home");
    let other = other.to_str().unwrap();
    env.run_with(&["import", "--auto", "on"], None, &[("CCA_HOME", other)]).ok();
    env.run_with(&["import", "--auto", "off"], None, &[("CCA_HOME", other)]).ok();
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), CLAUDE);
    let doctor = env.run(&["doctor"]);
    assert!(doctor.stdout.contains("claude off"), "{doctor}");
}

/// `off` reads no file that names no hook of cca's: a gemini settings file with comments is
/// left alone, and that is success.
#[test]
fn off_leaves_a_file_without_cca_s_hook_alone_whatever_it_holds() {
    let env = TestEnv::new();
    let [_, gemini, _] = files(&env);
    let commented = "{\n  // mine\n  \"general\": {}\n}\n";
    write(&gemini, commented);
    env.run(&["import", "--auto", "off"]).ok();
    assert_eq!(std::fs::read_to_string(&gemini).unwrap(), commented);
    // With cca's hook in it and comments, off says how to take it out by hand.
    let hooked = "{\n  // mine\n  \"hooks\": {\"SessionEnd\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"/x/cca import --hook gemini\"}]}]}\n}\n";
    write(&gemini, hooked);
    env.run(&["import", "--auto", "off"]).code(1).stderr_has("take cca's hook out by hand");
    assert_eq!(std::fs::read_to_string(&gemini).unwrap(), hooked);
}

/// A settings file this user may not write is left alone, though its folder would let a new
/// file be renamed over it; nothing of cca's is left behind.
#[test]
fn a_settings_file_this_user_may_not_write_is_left_alone() {
    let env = TestEnv::new();
    let [_, _, codex] = files(&env);
    write(&codex, CODEX);
    // Read-only for its user; as root (whom no mode binds), cca runs as another user.
    std::fs::set_permissions(&codex, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let run = env.run_bound_by_modes(&["import", "--auto", "on"], &[&codex]);
    run.code(1).stderr_has("read-only for you; left alone");
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), CODEX);
    assert!(!env.cca_home.join("auto/codex.json").exists(), "{run}");
}

#[test]
fn a_settings_file_that_is_a_link_stays_a_link_and_its_target_gets_the_hook() {
    let env = TestEnv::new();
    let [claude, _, _] = files(&env);
    let dotfiles = env.home.join("dotfiles/claude.json");
    write(&dotfiles, CLAUDE);
    std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&dotfiles, &claude).unwrap();
    env.run(&["import", "--auto", "on"]).ok();
    assert!(std::fs::symlink_metadata(&claude).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&dotfiles).unwrap().contains("--hook claude"));
    env.run(&["import", "--auto", "off"]).ok();
    assert!(std::fs::symlink_metadata(&claude).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&dotfiles).unwrap(), CLAUDE);

    // A link to a file the dotfiles repository has not made yet: made there, and taken away
    // again, the link left as it was.
    std::fs::remove_file(&dotfiles).unwrap();
    env.run(&["import", "--auto", "on"]).ok();
    assert!(std::fs::symlink_metadata(&claude).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&dotfiles).unwrap().contains("--hook claude"));
    env.run(&["import", "--auto", "off"]).ok();
    assert!(std::fs::symlink_metadata(&claude).unwrap().file_type().is_symlink());
    assert!(!dotfiles.exists());
}

/// With no home to be found (HOME unset, a user the password file does not know), there is
/// nowhere to look for the tools' settings: said, not a silent success. Only root can be such
/// a user here; as anyone else the password file gives the home.
#[test]
fn with_no_home_to_be_found_auto_says_so() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    // A CCA_HOME not made yet, where that user could make it.
    let cca_home = std::env::temp_dir().join(format!("cca-nohome-{}", std::process::id()));
    for switch in ["on", "off"] {
        let mut command = std::process::Command::new("setpriv");
        command.args(["--reuid=54321", "--regid=54321", "--clear-groups"]);
        command.env_clear().current_dir("/");
        command.env("CCA_HOME", &cca_home);
        command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command.arg(cca_exe()).args(["import", "--auto", switch]);
        run_command(command, None).code(2).stderr_has("cannot tell where your home folder is");
    }
}

#[test]
fn a_tool_whose_settings_turn_hooks_off_is_said_to() {
    let env = TestEnv::new();
    let [claude, gemini, _] = files(&env);
    write(&claude, "{\"disableAllHooks\": true}\n");
    write(&gemini, "{\"hooksConfig\": {\"enabled\": false}}\n");
    let run = env.run(&["import", "--auto", "on"]);
    run.ok()
        .stderr_has("claude: on: each conversation is imported as it ends")
        .stderr_has("turn every hook off (`\"disableAllHooks\": true`)")
        .stderr_has("(`\"hooksConfig\": {\"enabled\": false}`)");
}

/// Edits the user made between two `on`s (from two homes of one store, or after cca moved)
/// are kept by `off`: the original kept is the file as it was before the second `on`.
#[test]
fn off_keeps_what_the_user_changed_between_two_ons() {
    let env = TestEnv::new();
    let [claude, _, codex] = files(&env);
    write(&claude, CLAUDE);
    write(&codex, CODEX);
    env.run(&["import", "--auto", "on"]).ok();
    let edit = |file: &Path, from: &str, to: &str| {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(file, text.replacen(from, to, 1)).unwrap();
    };
    edit(&claude, "{", "{\"permissions\": {\"allow\": [\"Bash(git:*)\"]},");
    std::fs::write(
        &codex,
        format!(
            "{}\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n",
            std::fs::read_to_string(&codex).unwrap()
        ),
    )
    .unwrap();
    let home = env.cca_home.to_str().unwrap().to_string();
    let same_store = format!("{home}/../{}", env.cca_home.file_name().unwrap().to_str().unwrap());
    env.run_with(&["import", "--auto", "on"], None, &[("CCA_HOME", &same_store)]).ok();
    env.run(&["import", "--auto", "off"]).ok();
    let claude_now = std::fs::read_to_string(&claude).unwrap();
    assert!(claude_now.contains("Bash(git:*)") && !claude_now.contains("--hook"), "{claude_now}");
    let codex_now = std::fs::read_to_string(&codex).unwrap();
    assert!(codex_now.contains("trust_level") && !codex_now.contains("--hook"), "{codex_now}");
    assert_eq!(codex_now, format!("{CODEX}\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n"));
}

/// `on` with Claude Code's folder set elsewhere for a while, then `off` in either place: no
/// hook of cca's is left in either file, and each is given back.
#[test]
fn off_takes_the_hook_out_of_every_file_it_was_put_in() {
    let env = TestEnv::new();
    let [claude, _, _] = files(&env);
    write(&claude, CLAUDE);
    let alt = env.root.path().join("alt");
    write(&alt.join("settings.json"), "{}\n");
    env.run(&["import", "--auto", "on"]).ok();
    env.run_with(
        &["import", "--auto", "on"],
        None,
        &[("CLAUDE_CONFIG_DIR", alt.to_str().unwrap())],
    )
    .ok();
    env.run(&["import", "--auto", "off"]).ok();
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), CLAUDE);
    assert_eq!(std::fs::read_to_string(alt.join("settings.json")).unwrap(), "{}\n");
    assert!(!env.cca_home.join("auto/claude.json").exists());
}

/// Another user's settings (cca run as root, under sudo) are left alone: a file renamed over
/// them would be root's, and the tool could no longer read it.
#[test]
fn another_user_s_settings_are_left_alone() {
    let env = TestEnv::new();
    let [claude, _, _] = files(&env);
    write(&claude, CLAUDE);
    std::os::unix::fs::chown(&claude, Some(65534), Some(65534)).expect("tests run as root");
    env.run(&["import", "--auto", "on"]).code(1).stderr_has("belongs to another user");
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), CLAUDE);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&claude).unwrap()), 65534);
}

/// `cca doctor` says a hook that is there but imports nothing here is not working: its
/// program gone, another cca home's, or every hook of the tool's turned off; and where it
/// looked for a tool it did not find.
#[test]
fn doctor_says_which_hooks_would_import_nothing_here() {
    let env = TestEnv::new();
    let [claude, gemini, _] = files(&env);
    write(&claude, "{\"disableAllHooks\": true}\n");
    write(&gemini, "{}\n");
    let old = env.root.path().join("old/cca");
    std::fs::create_dir_all(old.parent().unwrap()).unwrap();
    std::fs::copy(cca_exe(), &old).unwrap();
    // `on` from a cca that is then removed (an old install).
    run_as(&env, &old, &["import", "--auto", "on"]).ok();
    std::fs::remove_file(&old).unwrap();
    let doctor = env.run(&["doctor"]);
    let problems = doctor.stdout.split("problems:").nth(1).unwrap_or_default().to_string();
    assert!(doctor.stdout.contains("claude on, but see problems"), "{doctor}");
    assert!(
        problems.contains(&format!("claude's hook runs {}, which is not there", old.display())),
        "{doctor}"
    );
    assert!(problems.contains("gemini's hook runs"), "{doctor}");
    let codex = env.home.join(".codex");
    assert!(
        doctor.stdout.contains(&format!("codex not found ({} does not exist)", codex.display())),
        "{doctor}"
    );
    // A file in its place is no folder either, and is said to be so.
    std::fs::write(&codex, "").unwrap();
    let said = format!("codex not found ({} is not a folder)", codex.display());
    assert!(env.run(&["doctor"]).stdout.contains(&said), "{doctor}");
    env.run(&["import", "--auto", "on"])
        .ok()
        .stderr_has(&format!("({} is not a folder)", codex.display()));
    std::fs::remove_file(&codex).unwrap();
    // Put right from here: the program is there, and the home is this one.
    env.run(&["import", "--auto", "on"]).ok();
    let doctor = env.run(&["doctor"]);
    assert!(doctor.stdout.contains("gemini on,"), "{doctor}");
    assert!(doctor.stdout.contains("disableAllHooks"), "{doctor}");
    assert!(!doctor.stdout.contains("which is not there"), "{doctor}");
    // A hook of another home's imports elsewhere.
    let other = env.root.path().join("other-home");
    env.run_with(&["import", "--auto", "on"], None, &[("CCA_HOME", other.to_str().unwrap())]).ok();
    let doctor = env.run(&["doctor"]);
    assert!(
        doctor.stdout.contains(&format!("gemini's hook imports into {}", other.display())),
        "{doctor}"
    );
}

/// A hook is known for cca's by its program's name, `cca`: a cca installed under another name
/// refuses to put in a hook it could never replace or take out, and changes nothing.
#[test]
fn a_cca_not_called_cca_puts_in_no_hook() {
    let env = TestEnv::new();
    let [claude, _, _] = files(&env);
    write(&claude, CLAUDE);
    let renamed = env.root.path().join("cca2");
    std::fs::copy(cca_exe(), &renamed).unwrap();
    run_as(&env, &renamed, &["import", "--auto", "on"])
        .code(2)
        .stderr_has("a hook is known for cca's by the name `cca`");
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), CLAUDE);
}

/// A tool's folder given as a relative path (`CODEX_HOME=rel`) is the folder it names from where
/// cca ran, as the tools take it: `off` run from another folder finds the hooks `on` put there.
#[test]
fn a_relative_tool_folder_is_found_again_from_another_folder() {
    let env = TestEnv::new();
    let (a, b) = (env.root.path().join("a"), env.root.path().join("b"));
    write(&a.join("codex/config.toml"), CODEX);
    write(&a.join("claude/settings.json"), CLAUDE);
    std::fs::create_dir_all(&b).unwrap();
    let auto = |switch: &str, from: &Path| {
        let mut cmd = env.command();
        cmd.args(["import", "--auto", switch])
            .env("CODEX_HOME", "codex")
            .env("CLAUDE_CONFIG_DIR", "claude")
            .current_dir(from);
        run_command(cmd, None).ok();
    };
    auto("on", &a);
    assert_ne!(std::fs::read_to_string(a.join("codex/config.toml")).unwrap(), CODEX);
    assert_ne!(std::fs::read_to_string(a.join("claude/settings.json")).unwrap(), CLAUDE);
    auto("off", &b);
    assert_eq!(std::fs::read_to_string(a.join("codex/config.toml")).unwrap(), CODEX);
    assert_eq!(std::fs::read_to_string(a.join("claude/settings.json")).unwrap(), CLAUDE);
}
