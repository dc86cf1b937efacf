//! `cca recall`: ranked exchanges from an index that is a cache of the transcripts. Whatever
//! changed the store is in the next search; the index survives deletion, damage, another
//! version, concurrent writers and a kill during an update.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::common::{self, Guard, STAMP, TestEnv};
use super::grep::{LATER_ID, two_sessions};

/// `cca recall --json -n N QUESTION`'s array, checked for the contract scripts rely on.
fn recall(env: &TestEnv, question: &str) -> Vec<Value> {
    let found = printed(env.run(&["recall", "--json", "-n", "5", question]).ok());
    for f in &found {
        assert!(f["session"].is_string() && f["exchange"].as_u64().unwrap() >= 1, "{f}");
        assert!(f["score"].is_number() && f["excerpt"].is_string(), "{f}");
        assert!(f["at"].is_string() || f["at"].is_null(), "{f}");
    }
    found
}

/// The array a `cca recall --json` run printed.
fn printed(run: &common::Run) -> Vec<Value> {
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}\n{run}"))
}

/// The (session, exchange) of each result, best first.
fn places(found: &[Value]) -> Vec<(String, u64)> {
    found
        .iter()
        .map(|f| (f["session"].as_str().unwrap().to_string(), f["exchange"].as_u64().unwrap()))
        .collect()
}

/// Results as a comparison sees them: each place, excerpt and score (to 3 places: a score is
/// a float sum whose last bits may depend on how the index happened to be cut in segments).
fn results(found: &[Value]) -> Vec<(String, u64, String, String)> {
    found
        .iter()
        .map(|f| {
            let (session, exchange) = (f["session"].as_str().unwrap(), f["exchange"].as_u64());
            let score = format!("{:.3}", f["score"].as_f64().unwrap());
            (session.to_string(), exchange.unwrap(), f["excerpt"].to_string(), score)
        })
        .collect()
}

fn first(found: &[Value]) -> (String, u64) {
    places(found).into_iter().next().unwrap_or_else(|| panic!("nothing found"))
}

#[test]
fn plain_words_find_the_right_exchange_and_the_index_is_a_cache() {
    let env = TestEnv::new();
    assert!(recall(&env, "anything at all").is_empty());
    assert!(!env.cca_home.join("recall").exists(), "no index is made for nothing");
    two_sessions(&env);
    let found = recall(&env, "what did we say about locks on windows?");
    assert_eq!(first(&found), (STAMP.to_string(), 2), "{found:?}");
    assert!(found[0]["excerpt"].as_str().unwrap().contains("LockFileEx"), "{found:?}");
    assert_eq!(found[0]["at"], common::NOW);
    let tokio = recall(&env, "which async runtime was it");
    assert_eq!(first(&tokio), (LATER_ID.to_string(), 1), "{tokio:?}");

    // Deleted, it is built again, with the same results.
    std::fs::remove_dir_all(env.cca_home.join("recall")).unwrap();
    assert_eq!(results(&recall(&env, "what did we say about locks on windows?")), results(&found));

    // Nothing found is an empty array, and success.
    assert!(recall(&env, "zebra giraffe").is_empty());
    // A person gets the session, exchange and excerpt.
    let run = env.run(&["recall", "windows", "locking"]);
    run.ok();
    assert!(run.stdout.starts_with(&format!("{STAMP} · exchange 2")), "{run}");
    assert!(run.stdout.contains("LockFileEx"), "{run}");
    assert!(
        run.stdout.contains(&format!("[all of it: exchange 2 of `cca show {STAMP}`]")),
        "{run}"
    );
    assert!(!run.stdout.contains("not answered"), "{run}");
    assert!(found.iter().all(|f| f["answered"] == true), "{found:?}");

    // A failed attempt is found, marked as what it is.
    let script = [("FAKE_SCRIPT", "say partial walrus output;exit 3")];
    env.run_with(&["search", "-q", "-r", "about the walrus"], None, &script).code(1);
    let found = recall(&env, "walrus");
    assert_eq!(found[0]["answered"], false, "{found:?}");
    let run = env.run(&["recall", "walrus"]);
    assert!(run.ok().stdout.lines().next().unwrap().contains(" · not answered · "), "{run}");
}

/// Accents are how a word is written, not what it is: `cafe` finds `Café` and the other way
/// round, and the excerpt shows the line that holds it.
#[test]
fn a_word_is_found_with_or_without_its_accents() {
    let env = TestEnv::new();
    let script =
        [("FAKE_SCRIPT", "say intro line;say Meet at the Café Müller near the naïve façade")];
    env.run_with(&["search", "-q", "where do we meet"], None, &script).ok();
    env.run_with(&["search", "-q", "something else"], None, &[("FAKE_SCRIPT", "say nothing here")])
        .ok();
    for question in ["cafe muller", "CAFÉ", "naive facade", "müller"] {
        let found = recall(&env, question);
        assert_eq!(found.len(), 1, "{question}: {found:?}");
        let excerpt = found[0]["excerpt"].as_str().unwrap();
        assert!(excerpt.contains("Café Müller"), "{question}: {excerpt}");
    }
}

/// Text written without spaces (Chinese, Japanese) is found by any of its words, not only by
/// the whole run of characters it was written in; a quoted phrase of it too.
#[test]
fn text_written_without_spaces_is_found_by_its_words() {
    let env = TestEnv::new();
    let script = [("FAKE_SCRIPT", "say intro line;say 我们决定把重试逻辑移到客户端里面。")];
    env.run_with(&["search", "-q", "重试放在哪里"], None, &script).ok();
    let other = [("FAKE_SCRIPT", "say 東京都の天気は晴れです")];
    env.run_with(&["search", "-q", "天気"], None, &other).ok();
    for (question, holds) in [
        ("客户端", "客户端"),
        ("重试逻辑", "重试"),
        ("\"重试逻辑\"", "重试"),
        ("東京の天気", "東京都"),
    ] {
        let found = recall(&env, question);
        assert!(!found.is_empty(), "{question}");
        let excerpt = found[0]["excerpt"].as_str().unwrap();
        assert!(excerpt.contains(holds), "{question}: {excerpt}");
    }
    // A quoted run counts more where its characters are in order than where they are apart.
    let scattered =
        [("FAKE_SCRIPT", "say 昨日は東京と京都と都庁の写真を見ました。景色がきれいでした。")];
    env.run_with(&["search", "-q", "地名"], None, &scattered).ok();
    let exact = [("FAKE_SCRIPT", "say 昨日は東京都庁の展望台に行きました。景色がきれいでした。")];
    env.run_with(&["search", "-q", "昨日"], None, &exact).ok();
    let found = recall(&env, "\"東京都庁\"");
    assert!(found[0]["excerpt"].as_str().unwrap().contains("展望台"), "{found:?}");
    // A word in capitals is found as written (Greek's final sigma).
    env.run_with(&["search", "-q", "greek"], None, &[("FAKE_SCRIPT", "say Ο ΔΡΟΜΟΣ ΚΑΙ Ο ΝΟΜΟΣ")])
        .ok();
    assert!(!recall(&env, "ΔΡΟΜΟΣ").is_empty());
}

#[test]
fn a_limit_of_nothing_or_an_empty_question_is_a_usage_error_and_any_larger_limit_is_all() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["recall", "-n", "0", "lock"]).code(2).stderr_has("`-n 0` shows no exchanges");
    for empty in ["", "   "] {
        env.run(&["recall", empty]).code(2).stderr_has("the question is empty");
    }
    // A question that can find nothing, whatever the store holds, says why.
    for (question, why) in [
        ("what was it and when?", "every word of the question is too common"),
        ("?! ...", "the question has no word to search for"),
    ] {
        let run = env.run(&["recall", "--json", question]);
        run.ok().stderr_has(why).stderr_has("cca grep");
        assert!(printed(&run).is_empty(), "{run}");
    }
    let run = env.run(&["recall", "the lock"]);
    assert!(run.ok().stderr.is_empty(), "{run}");
    // A limit past every exchange there is gives them all, not a failed allocation.
    for huge in ["1000000000000", &u64::MAX.to_string()] {
        let run = env.run(&["recall", "--json", "-n", huge, "lock"]);
        let found: Vec<Value> = printed(run.ok());
        assert_eq!(found.len(), 3, "{run}");
    }
}

#[test]
fn filters_narrow_by_engine_time_and_folder() {
    let env = TestEnv::new();
    two_sessions(&env);
    let run = env.run(&["recall", "--json", "--since", "2026-11-22", "lock"]);
    let found: Vec<Value> = printed(run.ok());
    assert_eq!(places(&found), [(LATER_ID.to_string(), 1)]);
    let run = env.run(&["recall", "--json", "--until", "2026-11-21", "lock"]);
    let found: Vec<Value> = printed(run.ok());
    assert!(found.iter().all(|f| f["session"] == STAMP) && found.len() == 2, "{found:?}");
    let run = env.run(&["recall", "--json", "--engine", "gemini", "lock"]);
    assert_eq!(run.ok().stdout.trim(), "[]");
    // An engine no session was held with is said, with those there are; an empty one is none.
    env.run(&["recall", "--json", "--engine", "Claude", "lock"]).ok().stderr_has(
        "no session kept was held with the engine `Claude`; the sessions kept were held with claude",
    );
    for listing in
        [&["sessions", "--engine", "Claude"][..], &["grep", "--engine", "Claude", "lock"]]
    {
        env.run(listing).stderr_has("the sessions kept were held with claude");
    }
    env.run(&["recall", "--json", "--engine", "", "lock"]).code(2).stderr_has("it is empty");
    // A session that cannot be read (a folder in its place) names no engine.
    let folder = env.sessions_dir().join("session_20260101-000000.md");
    std::fs::create_dir(&folder).unwrap();
    let run = env.run(&["recall", "--json", "--engine", "Claude", "lock"]);
    run.ok().stderr_has("the sessions kept were held with claude\n");
    std::fs::remove_dir(&folder).unwrap();
    let run = env.run(&["recall", "--json", "--here", "lock"]);
    let found: Vec<Value> = printed(run.ok());
    assert_eq!(found.len(), 3, "{run}");
    let run = env.run(&["recall", "--json", "--folder", "/nowhere", "lock"]);
    assert_eq!(run.ok().stdout.trim(), "[]");
    // Nothing within the filters is said, with what they were.
    run.stderr_has("nothing found within --folder; without them");
    let run = env.run(&["recall", "--since", "2030-01-01", "--engine", "claude", "lock"]);
    run.ok().stderr_has("nothing found within --engine, --since");
    // The folder as a person names it: a trailing slash, `.`, `..`, a link to it.
    std::fs::create_dir_all(env.work.join("sub")).unwrap();
    let link = env.root.path().join("link-to-work");
    std::os::unix::fs::symlink(&env.work, &link).unwrap();
    let work = env.work.display().to_string();
    let link = link.display().to_string();
    for folder in [format!("{work}/"), ".".into(), format!("{work}/sub/.."), format!("{link}/.")] {
        let run = env.run(&["recall", "--json", "--folder", &folder, "lock"]);
        let found: Vec<Value> = printed(run.ok());
        assert_eq!(found.len(), 3, "{folder}: {run}");
    }
    // A transcript that gives no times (written by hand): its exchanges are as old as the
    // session, as `cca grep` takes them, not left out by every span.
    let path = env.session_path(LATER_ID);
    let text = std::fs::read_to_string(&path).unwrap();
    let timeless =
        regex::Regex::new(r#","at":"[^"]*"|"at":"[^"]*",?"#).unwrap().replace_all(&text, "");
    assert_ne!(timeless, text);
    std::fs::write(&path, timeless.as_ref()).unwrap();
    let run = env.run(&["recall", "--json", "--since", "2026-11-22", "lock"]);
    let found: Vec<Value> = printed(run.ok());
    assert_eq!(places(&found), [(LATER_ID.to_string(), 1)], "{run}");
    assert!(found[0]["at"].is_null(), "{run}");
    env.run(&["grep", "-c", "--since", "2026-11-22", "lock"]).ok();
}

/// `--here` from a folder deleted since the shell went into it: an error that says so, with
/// what to do, by recall and grep alike (each with its own exit code for an error).
#[test]
fn here_in_a_deleted_folder_says_what_happened() {
    let env = TestEnv::new();
    two_sessions(&env);
    let gone = env.root.path().join("gone");
    for (words, code) in [("recall --here lock", 1), ("grep --here lock", 2)] {
        std::fs::create_dir(&gone).unwrap();
        let cca = env.command();
        let mut sh = std::process::Command::new("sh");
        let script = format!("cd \"$1\" && rmdir \"$1\" && exec \"$0\" {words}");
        sh.args(["-c", &script]).arg(common::cca_exe()).arg(&gone);
        sh.env_clear().envs(cca.get_envs().filter_map(|(k, v)| Some((k, v?))));
        sh.current_dir(env.root.path()).stdin(Stdio::null());
        let run = common::run_command(sh, None);
        run.code(code).stderr_has("cannot tell which folder this is").stderr_has("deleted");
    }
}

#[test]
fn a_session_that_cannot_be_read_is_said_at_each_search_and_found_again_when_mended() {
    let env = TestEnv::new();
    two_sessions(&env);
    assert!(!recall(&env, "locks on windows").is_empty());
    let path = env.session_path(STAMP);
    let whole = std::fs::read(&path).unwrap();
    // A line in another encoding keeps a turn from going on there, not its exchanges from
    // being found (as `cca grep` finds them).
    std::fs::write(&path, [whole.as_slice(), b"caf\xe9 locks\n"].concat()).unwrap();
    let run = env.run(&["recall", "--json", "locks on windows"]);
    assert!(!run.ok().stderr.contains("cannot be read"), "{run}");
    assert_eq!(first(&printed(&run)).0, STAMP, "{run}");
    // Its header gone: not a transcript.
    std::fs::write(&path, [b"a line put first\n".as_slice(), &whole].concat()).unwrap();
    let run = env.run(&["recall", "--json", "locks on windows"]);
    run.ok()
        .stderr_has(&format!("session {STAMP} cannot be read"))
        .stderr_has(&format!("cca show --raw {STAMP}"));
    assert!(run.stdout.contains(LATER_ID) || run.stdout.trim() == "[]", "{run}");
    assert!(!run.stdout.contains(STAMP), "{run}");
    // Said by every search while it is so, not by the one that read it alone.
    let run = env.run(&["recall", "--json", "locks on windows"]);
    run.ok().stderr_has(&format!("session {STAMP} cannot be read"));
    std::fs::write(&path, &whole).unwrap();
    assert_eq!(first(&recall(&env, "locks on windows")).0, STAMP);
    assert_eq!(std::fs::read(&path).unwrap(), whole, "a search never writes a transcript");
    // A link that leads nowhere in its place is said too, as `cca grep` says it.
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(env.root.path().join("nowhere.md"), &path).unwrap();
    let run = env.run(&["recall", "--json", "locks on windows"]);
    run.ok().stderr_has(&format!("session {STAMP} cannot be read"));
}

#[test]
fn an_index_that_cannot_be_written_still_finds_what_it_holds_and_says_so() {
    let env = TestEnv::new();
    two_sessions(&env);
    // With no index yet, nothing to search: an error that says what to do.
    env.run_on_full_disk(1_000, &["recall", "locks on windows"])
        .code(1)
        .stderr_has("the recall index in")
        .stderr_has("cannot be brought up to date")
        .stderr_has("removing it loses nothing");
    assert_eq!(first(&recall(&env, "locks on windows")).0, STAMP);
    // A turn's exchange is read beside the index: found, with nothing written.
    env.run(&["search", "-q", "-r", "and the locks on linux?"]).ok();
    let run = env.run_on_full_disk(1_000, &["recall", "--json", "-n", "5", "locks on linux"]);
    assert!(run.ok().stderr.is_empty(), "{run}");
    assert!(excerpts(&printed(&run)).contains("linux"), "{run}");
    // A hand edit it must write to take in: what it holds is found, with a note.
    hand_edit(&env, "LockFileEx", "zebrafish");
    let run = env.run_on_full_disk(1_000, &["recall", "--json", "zebrafish"]);
    run.ok().stderr_has("leave out the latest changes");
    assert!(printed(&run).is_empty(), "{run}");
    // Room again: the next search takes it in.
    assert_eq!(first(&recall(&env, "zebrafish")), (STAMP.to_string(), 2));
}

/// Every excerpt found, one after another.
fn excerpts(found: &[Value]) -> String {
    found.iter().map(|f| f["excerpt"].as_str().unwrap()).collect()
}

/// Replaces `was` with `is` in the first session's transcript, as an editor would.
fn hand_edit(env: &TestEnv, was: &str, is: &str) {
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(was));
    std::fs::write(&path, text.replace(was, is)).unwrap();
}

/// An index in a folder this user may not write (made read-only, or left by a `sudo cca
/// recall`) is searched as it is: as another user when the tests run as root, since root may
/// write anywhere.
#[test]
fn an_index_in_a_folder_this_user_may_not_write_is_searched_as_it_is() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    two_sessions(&env);
    let root = rustix::process::geteuid().is_root();
    let nobody = "65534";
    if root {
        // Everything the other user's, but the index, which the first search (root's) makes.
        let owner = format!("{nobody}:{nobody}");
        let status = std::process::Command::new("chown")
            .args(["-R", &owner, env.root.path().to_str().unwrap()])
            .status();
        assert!(status.unwrap().success());
    }
    let before = recall(&env, "locks on windows");
    assert_eq!(first(&before).0, STAMP);
    let index = env.cca_home.join("recall");
    let shut = |mode: u32| {
        for entry in walk(&index) {
            let dir_mode = if entry.is_dir() { mode | 0o111 } else { mode };
            std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(dir_mode)).unwrap();
        }
    };
    let run_as_user = |args: &[&str]| {
        if !root {
            return env.run(args);
        }
        let mut command = std::process::Command::new("setpriv");
        command.args([
            &format!("--reuid={nobody}"),
            &format!("--regid={nobody}"),
            "--clear-groups",
        ]);
        command.arg(common::cca_exe()).args(args).current_dir(&env.work);
        command.env_clear().envs(env.command().get_envs().filter_map(|(k, v)| Some((k, v?))));
        common::run_command(command, None)
    };
    shut(0o444);
    // Nothing changed: the same results, nothing said.
    let run = run_as_user(&["recall", "--json", "-n", "5", "locks on windows"]);
    assert!(run.ok().stderr.is_empty(), "{run}");
    assert_eq!(places(&printed(&run)), places(&before));
    // A turn's exchange is read beside the index: found, with nothing written.
    shut(0o755);
    env.run(&["search", "-q", "-r", "and the locks on linux?"]).ok();
    shut(0o444);
    let run = run_as_user(&["recall", "--json", "-n", "5", "locks on linux"]);
    assert!(run.ok().stderr.is_empty(), "{run}");
    assert!(excerpts(&printed(&run)).contains("linux"), "{run}");
    // A hand edit it must write to take in: what it holds, with a note that says why.
    hand_edit(&env, "LockFileEx", "zebrafish");
    let run = run_as_user(&["recall", "--json", "zebrafish"]);
    run.ok().stderr_has("leave out the latest changes").stderr_has("denied");
    assert!(!run.stderr.contains("already an `IndexWriter`"), "{run}");
    assert!(printed(&run).is_empty(), "{run}");
    shut(0o755);
    assert_eq!(first(&recall(&env, "zebrafish")), (STAMP.to_string(), 2));
}

/// Every file and folder under `dir`, `dir` included.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                all.extend(walk(&path));
            } else {
                all.push(path);
            }
        }
    }
    all
}

#[test]
fn every_change_to_the_store_is_in_the_next_search() {
    let env = TestEnv::new();
    two_sessions(&env);
    assert!(recall(&env, "zebrafish").is_empty());

    // A hand edit, found at once.
    hand_edit(&env, "LockFileEx", "zebrafish");
    assert_eq!(first(&recall(&env, "zebrafish")), (STAMP.to_string(), 2));

    // A new exchange.
    env.run_with(
        &["search", "-q", "-r", "and macOS?"],
        None,
        &[("FAKE_SCRIPT", "say flock, with a quokka.")],
    )
    .ok();
    assert_eq!(first(&recall(&env, "quokka")), (LATER_ID.to_string(), 2));

    // A name.
    env.run(&["name", STAMP, "pelican-notes"]).ok();
    assert_eq!(places(&recall(&env, "pelican")).len(), 2);

    // rm and restore.
    env.run(&["rm", STAMP]).ok();
    assert!(recall(&env, "zebrafish").is_empty());
    env.run(&["restore", STAMP]).ok();
    assert_eq!(first(&recall(&env, "zebrafish")), (STAMP.to_string(), 2));

    // A fork: the same exchange, word for word, in a new session too. It is one result,
    // which names the fork (for a person too); what the fork says next is its own.
    env.run(&["fork", STAMP]).ok();
    let fork = format!("{STAMP}-2");
    assert!(env.session_path(&fork).exists());
    let forked = recall(&env, "zebrafish");
    assert_eq!(forked.len(), 1, "{forked:?}");
    let (shown, other) = match forked[0]["session"] == STAMP {
        true => (STAMP.to_string(), fork.clone()),
        false => (fork.clone(), STAMP.to_string()),
    };
    assert_eq!(first(&forked), (shown, 2), "{forked:?}");
    assert_eq!(forked[0]["also_in"], json!([other]), "{forked:?}");
    let run = env.run(&["recall", "zebrafish"]);
    assert!(run.ok().stdout.contains(&format!("the same exchange is also in {other}")), "{run}");
    env.run_with(
        &["search", "-q", "-r", "and zebrafish on BSD?"],
        None,
        &[("FAKE_SCRIPT", "say no.")],
    )
    .ok();
    let forked = places(&recall(&env, "zebrafish"));
    assert!(forked.contains(&(fork.clone(), 3)), "{forked:?}");

    // A clear and a compaction keep what was said findable.
    env.run(&["clear", STAMP]).ok();
    let found = recall(&env, "zebrafish");
    let kept =
        |f: &&Value| f["exchange"] == 2 && (f["session"] == STAMP || f["also_in"][0] == STAMP);
    assert!(found.iter().any(|f| kept(&f)), "{found:?}");

    // An import: another tool's conversation (a codex rollout, as codex 0.169 writes it).
    let dir = env.home.join(".codex/sessions/2026/11/20");
    std::fs::create_dir_all(&dir).unwrap();
    let at = "2026-11-20T08:00:00.000Z";
    let message = |role: &str, kind: &str, text: &str| json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}});
    let lines = [
        json!({"timestamp": at, "type": "session_meta", "payload": {"id": "0199-codex", "cwd": "/home/me/src", "timestamp": at, "cli_version": "0.169.0"}}),
        message("user", "input_text", "how do we rotate the narwhal keys?"),
        message("assistant", "output_text", "With the keyring tool, monthly."),
        json!({"timestamp": at, "type": "event_msg", "payload": {"type": "task_complete"}}),
    ];
    let rollout: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("rollout-2026-11-20T08-00-00-0199-codex.jsonl"), rollout).unwrap();
    env.run(&["import", "codex"]).ok();
    assert_eq!(first(&recall(&env, "rotating narwhal keys")), ("20261120-080000".to_string(), 1));
}

/// A turn leaves word of the session it changed (`recall/changed`), and the next search takes
/// that session in while it stats the rest: whatever else changed is found too, as a rebuild
/// finds it, and the hint is only a hint (one that names nothing, or what the index holds
/// already, changes nothing; one already done is removed).
#[test]
fn a_turns_hint_is_taken_in_first_and_never_trusted() {
    let env = TestEnv::new();
    two_sessions(&env);
    let hint = env.cca_home.join("recall/changed");
    assert!(!env.cca_home.join("recall").exists(), "a turn makes no folder for recall");
    assert_eq!(first(&recall(&env, "locks on windows")).0, STAMP);

    // A turn, and a hand edit of another session: both are in the next search.
    env.run_with(
        &["search", "-q", "-r", "and macOS?"],
        None,
        &[("FAKE_SCRIPT", "say flock, with a quokka.")],
    )
    .ok();
    assert_eq!(std::fs::read_to_string(&hint).unwrap(), format!("{LATER_ID}\n"));
    hand_edit(&env, "LockFileEx", "zebrafish");
    assert_eq!(first(&recall(&env, "zebrafish")), (STAMP.to_string(), 2));
    assert_eq!(first(&recall(&env, "quokka")), (LATER_ID.to_string(), 2));
    let question = "locks quokka zebrafish";
    let settled = results(&recall(&env, question));
    std::fs::remove_dir_all(env.cca_home.join("recall/index")).unwrap();
    assert_eq!(results(&recall(&env, question)), settled, "as a rebuild finds it");

    // Hints newer than the index that it needs nothing for.
    let newer = |text: &str| {
        std::fs::write(&hint, text).unwrap();
        let later = std::time::SystemTime::now() + Duration::from_secs(60);
        std::fs::File::options().write(true).open(&hint).unwrap().set_modified(later).unwrap();
        let run = env.run(&["recall", "--json", "-n", "5", question]);
        assert!(run.ok().stderr.is_empty(), "{run}");
        assert_eq!(results(&printed(&run)), settled, "{text:.40}");
    };
    newer(&format!("{LATER_ID}\n"));
    assert!(!hint.exists(), "a hint already done is removed");
    for text in ["20990101-000000\n", "../../etc/passwd\n", "\0\u{1b}[2J", &"x".repeat(100_000)] {
        newer(text);
    }
}

/// Sessions turns changed are read beside the index rather than committed: the index is not
/// written, what was read is kept for the next search, and they are committed when they are
/// too many, or when anything else changed; the results are a rebuild's throughout.
#[test]
fn turns_sessions_are_searched_beside_the_index_until_a_commit() {
    let env = TestEnv::new();
    two_sessions(&env);
    assert_eq!(first(&recall(&env, "locks on windows")).0, STAMP);
    let recall_dir = env.cca_home.join("recall");
    let meta = recall_dir.join("index/meta.json");
    let committed = || std::fs::read(&meta).unwrap();
    let before = committed();
    let turn = |args: &[&str], answer: &str| {
        let script = format!("say {answer}");
        env.run_with(args, None, &[("FAKE_SCRIPT", script.as_str())]).ok();
    };
    let rebuilt = |question: &str| {
        let found = recall(&env, question);
        let kept = env.root.path().join("kept-recall");
        std::fs::rename(&recall_dir, &kept).unwrap();
        assert_eq!(results(&recall(&env, question)), results(&found), "as a rebuild finds it");
        std::fs::remove_dir_all(&recall_dir).unwrap();
        std::fs::rename(&kept, &recall_dir).unwrap();
        found
    };
    turn(&["search", "-q", "-r", "and macOS?"], "flock, with a quokka.");
    turn(&["search", "-q", "what about axolotls?"], "they regrow limbs.");
    assert_eq!(first(&rebuilt("quokka")).0, LATER_ID);
    assert_eq!(places(&rebuilt("axolotls")).len(), 1);
    assert_eq!(committed(), before, "nothing committed");
    assert!(recall_dir.join("overlay").is_file(), "what was read is kept");
    // What was kept is what is found, whatever the file holds: damaged, it is read again.
    std::fs::write(recall_dir.join("overlay"), "cca-overlay 1 0 0 x\nmeta.json 3\nabc").unwrap();
    assert_eq!(first(&rebuilt("quokka")).0, LATER_ID);
    // A hand edit is not a turn's: everything is committed, and the hint goes.
    hand_edit(&env, "LockFileEx", "zebrafish");
    assert_eq!(first(&rebuilt("zebrafish")), (STAMP.to_string(), 2));
    assert_ne!(committed(), before);
    assert!(!recall_dir.join("changed").exists());
    // More sessions than are read at each search are committed at once.
    let before = committed();
    for n in 0..17 {
        turn(&["search", "-q", &format!("note {n} on pangolins")], "scales.");
    }
    assert_eq!(places(&rebuilt("pangolins")).len(), 5);
    assert_ne!(committed(), before);
}

/// The caches cca rewrites in place at every append (recall's hint, the live index) are never
/// written through a link (it would overwrite what the link names, a transcript included) and
/// never waited on (a FIFO): what is found there is replaced by the cache.
#[test]
fn caches_rewritten_in_place_are_never_written_through_a_link_or_waited_on() {
    let env = TestEnv::new();
    two_sessions(&env);
    assert_eq!(first(&recall(&env, "locks on windows")).0, STAMP);
    let hint = env.cca_home.join("recall/changed");
    let live = env.cca_home.join("live").join(format!("{LATER_ID}.json"));
    let transcript = env.session_path(STAMP);
    let kept = std::fs::read(&transcript).unwrap();
    let outside = env.root.path().join("outside.txt");
    std::fs::write(&outside, "mine").unwrap();
    for (cache, victim) in [(&hint, &transcript), (&live, &outside)] {
        let _ = std::fs::remove_file(cache);
        std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(victim, cache).unwrap();
    }
    let turn = |question: &str| {
        env.run_with(&["search", "-q", "-r", question], None, &[("FAKE_SCRIPT", "say quokka.")])
            .ok();
    };
    turn("and on macOS?");
    assert_eq!(std::fs::read(&transcript).unwrap(), kept, "a link's target is left alone");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine");
    assert!(std::fs::symlink_metadata(&hint).unwrap().is_file(), "the hint is made anew");
    assert_eq!(first(&recall(&env, "quokka")).0, LATER_ID);
    // A FIFO (nothing ever writes to it) is not waited on, by a turn or a search.
    for cache in [&hint, &live] {
        std::fs::remove_file(cache).unwrap();
        common::make_fifo(cache);
    }
    turn("and on BSD?");
    assert_eq!(places(&recall(&env, "quokka")).len(), 2);
    std::fs::remove_file(&hint).unwrap();
    common::make_fifo(&hint);
    assert_eq!(places(&recall(&env, "quokka")).len(), 2, "a FIFO as the hint is passed over");
    // Nor is a FIFO, a link to a device or a folder in place of the index's own files (its
    // head, the list of its files, a segment's, a lock, its stamps): the index is rebuilt,
    // with a note.
    let index = env.cca_home.join("recall/index");
    let segment = std::fs::read_dir(&index)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .unwrap();
    let fifo = |path: &std::path::Path| {
        let _ = std::fs::remove_file(path);
        common::make_fifo(path);
    };
    let zero = |path: &std::path::Path| {
        let _ = std::fs::remove_file(path);
        std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    };
    let folder = |path: &std::path::Path| {
        let _ = std::fs::remove_file(path);
        std::fs::create_dir(path).unwrap();
    };
    type Attack = fn(&std::path::Path);
    let attacks: [(&str, Attack); 6] = [
        ("meta.json", fifo),
        // Beside the index: its stamps, written over at each commit.
        ("../index.stamps", folder),
        (".managed.json", zero),
        (segment.file_name().unwrap().to_str().unwrap(), fifo),
        (".tantivy-meta.lock", fifo),
        (".tantivy-writer.lock", folder),
    ];
    for (turns, (file, attack)) in attacks.into_iter().enumerate() {
        // A turn first, so that both the search's update and its rebuild meet the file.
        turn(&format!("and about {file}?"));
        attack(&index.join(file));
        let run = env.run(&["recall", "--json", "-n", "50", "quokka"]);
        let found: Vec<Value> = serde_json::from_str(&run.ok().stdout).unwrap();
        assert_eq!(places(&found).len(), 3 + turns, "{file}: {run}");
    }
}

/// A store of many sessions, written directly, so that an update takes a while.
fn many_sessions(env: &TestEnv, n: usize) {
    use cca::transcript::{self, Kind, Meta, Record};
    std::fs::create_dir_all(env.sessions_dir()).unwrap();
    for i in 0..n {
        let id = format!("20260{}-{:06}", 101 + i / 1000, i % 1000);
        let mut header = transcript::Header {
            format: transcript::FORMAT,
            id: id.clone(),
            created: "2026-01-01T10:00:00Z".into(),
            engine: "claude".into(),
            model: None,
            prompt: "search_agents/haiku45".into(),
            prompt_hash: "fnv1a64:0123456789abcdef".into(),
            cwd: "/home/u".into(),
            title: format!("session {i}"),
            forked_from: None,
            name: None,
            imported: None,
            other: Default::default(),
        };
        header.title = format!("session number {i}");
        let mut text = transcript::render_header(&header);
        for turn in 1..=5u64 {
            let at = Some("2026-01-01T10:00:00Z".to_string());
            let question = format!(
                "question {turn} of session {i} about word{}",
                (i * 7 + turn as usize) % 97
            );
            let answer = format!("answer {turn}: {}", "some filler words here ".repeat(200));
            text.push_str(&transcript::render_record(
                &Record {
                    kind: Kind::User,
                    meta: Meta { at: at.clone(), ..Meta::default() },
                    content: question,
                },
                turn,
            ));
            text.push_str(&transcript::render_record(
                &Record {
                    kind: Kind::Assistant,
                    meta: Meta { at, engine: Some("claude".into()), ..Meta::default() },
                    content: answer,
                },
                turn,
            ));
        }
        std::fs::write(env.session_path(&id), text).unwrap();
    }
}

#[test]
fn a_kill_or_ctrl_c_during_an_update_leaves_an_index_that_gives_the_right_results() {
    let env = TestEnv::new();
    many_sessions(&env, 300);
    // SIGINT as Ctrl-C sends it during a first build; SIGKILL as a crash.
    use rustix::process::Signal;
    for (wait, signal) in [(30, Signal::KILL), (100, Signal::INT), (300, Signal::KILL)] {
        std::fs::remove_dir_all(env.cca_home.join("recall")).ok();
        let mut cmd = env.command();
        cmd.args(["recall", "--json", "word13"]).stdout(Stdio::null()).stderr(Stdio::null());
        let child = Guard(cmd.spawn().unwrap());
        std::thread::sleep(Duration::from_millis(wait));
        child.signal(signal);
        child.finish();
        let after = recall(&env, "word13 session");
        std::fs::remove_dir_all(env.cca_home.join("recall")).unwrap();
        assert_eq!(
            results(&after),
            results(&recall(&env, "word13 session")),
            "killed after {wait} ms"
        );
    }
}

#[test]
fn a_damaged_or_foreign_index_is_rebuilt_with_a_note() {
    let env = TestEnv::new();
    two_sessions(&env);
    let right = recall(&env, "locking on windows");
    let meta = env.cca_home.join("recall/index/meta.json");

    // The commit's payload names the index's format, whatever this cca's is: another's.
    let text = std::fs::read_to_string(&meta).unwrap();
    let at = text.find("\\\"version\\\":").expect("the payload names a version") + 12;
    let digits = text[at..].chars().take_while(char::is_ascii_digit).count();
    std::fs::write(&meta, format!("{}99{}", &text[..at], &text[at + digits..])).unwrap();
    let run = env.run(&["recall", "--json", "-n", "5", "locking on windows"]);
    run.ok().stderr_has("cannot be used").stderr_has("rebuilding");
    let found: Vec<Value> = printed(&run);
    assert_eq!(results(&found), results(&right), "{run}");
    assert_eq!(run.stderr.lines().count(), 1, "{run}");

    std::fs::write(&meta, "{ this is not json").unwrap();
    let run = env.run(&["recall", "--json", "-n", "5", "locking on windows"]);
    run.ok().stderr_has("rebuilding");
    let found: Vec<Value> = printed(&run);
    assert_eq!(results(&found), results(&right), "{run}");

    // Then quiet again.
    let run = env.run(&["recall", "--json", "-n", "5", "locking on windows"]);
    assert_eq!(run.ok().stderr, "");

    // Stamps that are not the last commit's (a crash between the two writes): rebuilt.
    std::fs::remove_file(env.cca_home.join("recall/index.stamps")).unwrap();
    env.run_with(&["search", "-q", "-r", "and BSD?"], None, &[("FAKE_SCRIPT", "say flock.")]).ok();
    let run = env.run(&["recall", "--json", "flock"]);
    run.ok().stderr_has("rebuilding");
    let found: Vec<Value> = printed(&run);
    assert_eq!(first(&found), (LATER_ID.to_string(), 2), "{run}");
}

/// Damage the index's reader does not check for (tantivy keeps no sums: random bytes in a term
/// dictionary make its FST panic), and a file where the index's folder, or recall's, should
/// be: each is a note and a rebuild, never a crash.
#[test]
fn an_index_damaged_past_what_opening_checks_or_a_file_in_its_place_is_rebuilt() {
    let env = TestEnv::new();
    two_sessions(&env);
    let index = env.cca_home.join("recall/index");
    // 200 bytes of noise at each eighth of the term dictionary in turn, in an index built
    // afresh, then a search with nothing changed and one after a new turn (which updates the
    // index first): some windows fail opening, some pass unseen, and some made tantivy panic
    // mid-search or mid-update.
    let mut rebuilt = 0;
    for (eighth, turn) in (0..8).flat_map(|e| [(e, false), (e, true)]) {
        let _ = std::fs::remove_dir_all(&index);
        recall(&env, "locking on windows");
        let term = std::fs::read_dir(&index)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "term"))
            .expect("a term dictionary");
        let mut bytes = std::fs::read(&term).unwrap();
        let start = bytes.len() * eighth / 8;
        let end = (start + 200).min(bytes.len() - 24);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for byte in &mut bytes[start..end] {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *byte = seed as u8;
        }
        std::fs::write(&term, bytes).unwrap();
        if turn {
            let script = format!("say zebrafish {eighth}");
            env.run_with(
                &["search", "-q", "-s", STAMP, "and fish?"],
                None,
                &[("FAKE_SCRIPT", &script)],
            )
            .ok();
        }
        let run = env.run(&["recall", "--json", "-n", "5", "locking on windows"]);
        run.ok();
        assert!(!run.stderr.contains("panicked"), "eighth {eighth}, turn {turn}: {run}");
        if run.stderr.contains("rebuilding") {
            rebuilt += 1;
            let found: Vec<Value> = printed(&run);
            std::fs::remove_dir_all(&index).unwrap();
            let fresh = recall(&env, "locking on windows");
            assert_eq!(results(&found), results(&fresh), "eighth {eighth}, turn {turn}: {run}");
        }
    }
    assert!(rebuilt > 0, "no damage was seen: the test damages nothing any more");
    let right = recall(&env, "locking on windows");

    for (place, file) in [(&index, "index"), (&env.cca_home.join("recall"), "recall")] {
        std::fs::remove_dir_all(place).unwrap();
        std::fs::write(place, "not a folder").unwrap();
        let run = env.run(&["recall", "--json", "-n", "5", "locking on windows"]);
        let found: Vec<Value> = printed(run.ok());
        assert_eq!(results(&found), results(&right), "{file}: {run}");
        assert!(place.is_dir(), "{file}");
    }
    // recall/ as a link to a folder elsewhere (a faster disk): kept, and used.
    let recall_dir = env.cca_home.join("recall");
    let elsewhere = env.root.path().join("fast-disk");
    std::fs::rename(&recall_dir, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &recall_dir).unwrap();
    env.run(&["search", "-q", "-s", STAMP, "one more"]).ok();
    let found = recall(&env, "one more");
    assert_eq!(found[0]["session"], STAMP, "{found:?}");
    assert!(std::fs::symlink_metadata(&recall_dir).unwrap().file_type().is_symlink());
    assert!(elsewhere.join("index/meta.json").is_file());
}

#[test]
fn two_writers_and_a_searcher_at_once() {
    let env = TestEnv::new();
    two_sessions(&env);
    let writer = |session: &'static str, word: &'static str| {
        let env = &env;
        move || {
            for i in 0..4 {
                let script = format!("say the {word}{i} answer");
                env.run_with(
                    &["search", "-q", "-s", session, &format!("tell me about {word}{i}")],
                    None,
                    &[("FAKE_SCRIPT", &script)],
                )
                .ok();
            }
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(writer(STAMP, "alpaca"));
        scope.spawn(writer(LATER_ID, "bison"));
        scope.spawn(|| {
            for _ in 0..6 {
                recall(&env, "alpaca0 bison0 windows");
            }
        });
    });
    for (session, word) in [(STAMP, "alpaca"), (LATER_ID, "bison")] {
        for i in 0..4 {
            let found = recall(&env, &format!("{word}{i}"));
            assert_eq!(found[0]["session"], session, "{word}{i}: {found:?}");
        }
    }
}

/// `--json` on a listing says a failure as one JSON object on stdout too, whether clap or the
/// command itself refuses, as `cca search --json` does: a script reading stdout gets JSON.
#[test]
fn a_listing_in_json_says_its_failure_in_json() {
    let env = TestEnv::new();
    two_sessions(&env);
    for args in [
        &["recall", "--json", "-n", "0", "locks"][..],
        &["recall", "--json", "--since", "tomorrow", "locks"],
        &["recall", "--json", "--bogus", "locks"],
        &["grep", "--json", "("],
        &["sessions", "--json", "--since", "never"],
    ] {
        let run = env.run(args);
        assert_eq!(run.code, Some(2), "{args:?}: {run}");
        let said: serde_json::Value = serde_json::from_str(run.stdout.trim())
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {run}"));
        assert_eq!((said["ok"].clone(), said["exit_code"].clone()), (false.into(), 2.into()));
        assert!(said["error"].as_str().is_some_and(|e| !e.is_empty()), "{args:?}: {said}");
        assert!(!run.stderr.is_empty(), "{args:?}: said on stderr too");
    }
}

/// An index this user may not look into is not taken for none: it is said, and left as it is
/// (a search never removes what it cannot read for want of permission).
#[test]
fn an_index_this_user_may_not_look_into_is_said_and_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    two_sessions(&env);
    assert_eq!(first(&recall(&env, "locks on windows")).0, STAMP);
    let index = env.cca_home.join("recall/index");
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o000)).unwrap();
    let run = env.run_bound_by_modes(&["recall", "--json", "locks on windows"], &[&index]);
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o700)).unwrap();
    run.code(1).stderr_has("Permission denied");
    assert!(!run.stderr.contains("cannot remove"), "{run}");
    assert!(index.join("meta.json").exists(), "the index is still there");
}
