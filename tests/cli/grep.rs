//! Finding conversations: `cca grep` (patterns, output forms, filters, exit codes, hostile
//! input), session names wherever an id goes, and `cca sessions` filters.

use rexpect::session::spawn_command;
use serde_json::Value;

use crate::common::*;

pub(crate) const LATER: &str = "2026-11-22T09:00:00Z";
pub(crate) const LATER_ID: &str = "20261122-090000";

/// Two sessions: one at NOW about file locking (two exchanges), one a day later about tokio.
pub(crate) fn two_sessions(env: &TestEnv) {
    let answer =
        "say Rust 1.89 stabilised File::lock.\\nIt has try_lock too.\\nLocks are advisory.";
    env.run_with(
        &["search", "-q", "how does file locking work?"],
        None,
        &[("FAKE_SCRIPT", answer)],
    )
    .ok();
    env.run_with(
        &["search", "-q", "-r", "and on Windows?"],
        None,
        &[("FAKE_SCRIPT", "say LockFileEx, mandatory there.")],
    )
    .ok();
    env.run_with(
        &["search", "-q", "what is tokio?"],
        None,
        &[("CCA_NOW", LATER), ("FAKE_SCRIPT", "say An async runtime, with its own lock types.")],
    )
    .ok();
}

fn json_lines(run: &Run) -> Vec<Value> {
    run.stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON object per line")).collect()
}

#[test]
fn a_transcript_saved_with_crlf_endings_is_searched_as_it_was() {
    let env = TestEnv::new();
    two_sessions(&env);
    let lf = env.run(&["grep", "lock|windows"]);
    lf.ok();
    // An editor saves it with CRLF line endings: the same lines match, questions included.
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace('\n', "\r\n")).unwrap();
    let crlf = env.run(&["grep", "lock|windows"]);
    assert_eq!(crlf.ok().stdout, lf.stdout, "{crlf}");
    assert!(crlf.stdout.contains("2. You: and on Windows?"), "{crlf}");
}

#[test]
fn matches_are_grouped_by_session_with_the_exchange_and_who_said_it() {
    let env = TestEnv::new();
    two_sessions(&env);
    let run = env.run(&["grep", "lock"]);
    run.ok();
    assert_eq!(
        run.stdout,
        format!(
            "{STAMP} · how does file locking work?\n\
             1. You: how does file locking work?\n\
             1. claude: Rust 1.89 stabilised File::lock.\n\
             1. claude: It has try_lock too.\n\
             1. claude: Locks are advisory.\n\
             2. claude: LockFileEx, mandatory there.\n\
             \n\
             {LATER_ID} · what is tokio?\n\
             1. claude: An async runtime, with its own lock types.\n"
        ),
        "{run}"
    );
    assert_eq!(run.stderr, "");
}

#[test]
fn cca_own_lines_never_match_and_escaped_content_matches_as_written() {
    let env = TestEnv::new();
    env.run_with(
        &["search", "-q", "q"],
        None,
        &[("FAKE_SCRIPT", "say <!-- cca:end -->\\n## 2. You\\nplain")],
    )
    .ok();
    let text = std::fs::read_to_string(env.session_path(STAMP)).unwrap();
    assert!(text.contains("\n\\<!-- cca:end -->\n"), "{text}");
    // The header, markers and headings hold these words; none of them is content.
    for pattern in
        ["cca:session", "cca:user", "cca:assistant", "^## 1\\.", "prompt_hash", "^\\*cca"]
    {
        env.run(&["grep", pattern]).code(1);
    }
    let run = env.run(&["grep", "-F", "<!-- cca:end -->"]);
    run.ok();
    assert!(run.stdout.contains("1. claude: <!-- cca:end -->\n"), "{run}");
    let run = env.run(&["grep", "^## 2"]);
    assert!(run.stdout.contains("1. claude: ## 2. You\n"), "{run}");
}

#[test]
fn exit_codes_are_greps() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["grep", "lock"]).code(0);
    env.run(&["grep", "no such words anywhere"]).code(1);
    env.run(&["grep", "("]).code(2).stderr_has("cannot search for `(`").stderr_has("hint: ");
    env.run(&["grep"]).code(2);
    env.run(&["grep", "lock", "--since", "someday"]).code(2).stderr_has("not a date");
    // A span that ends before it starts finds nothing by construction: said, as recall says it.
    for command in ["grep", "recall"] {
        env.run(&[command, "lock", "--since", "2026-11-22", "--until", "2026-11-21"])
            .code(2)
            .stderr_has("--since `2026-11-22` is later than --until `2026-11-21`")
            .stderr_has("hint: swap them");
    }
    env.run(&["grep", "lock", "nosuchname"]).code(2).stderr_has("no session `nosuchname`");
    // No sessions at all: nothing matched.
    TestEnv::new().run(&["grep", "x"]).code(1);
}

#[test]
fn hostile_patterns_are_refused_at_once() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["grep", r"\w{1000}{1000}"]).code(2).stderr_has("too large");
    let deep = format!("{}a{}", "(".repeat(2000), ")".repeat(2000));
    env.run(&["grep", &deep]).code(2).stderr_has("nest");
    env.run(&["grep", r"lock\nIt"]).code(2).stderr_has("line break");
    env.run(&["grep", "-F", "lock\nIt"]).code(2).stderr_has("line break");
    // Huge but fine: a long literal just finds nothing.
    env.run(&["grep", "-F", &"x".repeat(100_000)]).code(1);
    // A pattern that matches everywhere, even the empty string, is content only.
    let run = env.run(&["grep", "x*"]);
    run.ok();
    assert!(!run.stdout.contains("cca:") && !run.stdout.contains("## "), "{run}");
}

#[test]
fn unreadable_transcripts_are_reported_and_skipped() {
    let env = TestEnv::new();
    two_sessions(&env);
    std::fs::write(env.session_path("20261120-000000"), "lock, but not a transcript\n").unwrap();
    std::fs::create_dir(env.session_path("20261120-000001")).unwrap();
    let run = env.run(&["grep", "LockFileEx"]);
    run.code(2);
    assert!(run.stdout.contains("2. claude: LockFileEx"), "{run}");
    assert!(run.stderr.contains("session_20261120-000000.md is not a transcript"), "{run}");
    assert!(run.stderr.contains("session_20261120-000001.md"), "{run}");
    assert_eq!(run.stderr.matches("skipped").count(), 2, "{run}");
}

#[test]
fn an_answer_whose_figures_were_spoiled_by_hand_is_still_found_and_sent() {
    let env = TestEnv::new();
    two_sessions(&env);
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path).unwrap();
    // Each answer's data spoiled by hand: a figure of the wrong type and a key twice, then a
    // number out of range.
    let mut spoiled = String::new();
    let mut rest = text.as_str();
    for spoil in [r#"{"output_tokens":-5,"engine":"x","#, r#"{"cost_usd":1e400,"#] {
        let at = rest.find("<!-- cca:assistant {").unwrap() + "<!-- cca:assistant ".len();
        spoiled.push_str(&rest[..at]);
        spoiled.push_str(spoil);
        rest = &rest[at + 1..];
    }
    spoiled.push_str(rest);
    std::fs::write(&path, &spoiled).unwrap();
    let run = env.run(&["grep", "stabilised|LockFileEx"]);
    assert!(run.ok().stdout.contains("1. claude: Rust 1.89 stabilised"), "{run}");
    assert!(run.stdout.contains("2. claude: LockFileEx"), "{run}");
    let found = env.run(&["recall", "--json", "mandatory locks on Windows"]);
    assert!(found.ok().stdout.contains("LockFileEx"), "{found}");
    // The next turn sends both answers, and says what it could not read.
    let next = env.run(&["search", "--session", STAMP, "and on macOS?"]);
    assert!(next.ok().stderr.contains("the record is kept"), "{next}");
    let sent = serde_json::to_string(env.calls().last().unwrap()).unwrap();
    assert!(sent.contains("stabilised File::lock") && sent.contains("LockFileEx"), "{sent}");
}

/// A blank engine (an unset variable in a script) would narrow nothing, silently: refused by
/// every command that narrows by engine. A folder that is not there is said to be not there.
#[test]
fn a_blank_engine_to_narrow_by_is_refused_and_a_folder_not_there_said() {
    let env = TestEnv::new();
    two_sessions(&env);
    for args in [
        &["grep", "--engine", "", "lock"][..],
        &["recall", "--engine", " ", "lock"],
        &["sessions", "--engine", ""],
        &["standby", "--engine", ""],
    ] {
        env.run(args).code(2).stderr_has("it is empty: give an engine's name");
    }
    env.run(&["recall", "--folder", "/no/such/folder", "lock"])
        .ok()
        .stderr_has("/no/such/folder is not a folder here (a typo?)");
}

#[test]
fn fifos_and_devices_named_like_sessions_are_skipped_not_read() {
    let env = TestEnv::new();
    two_sessions(&env);
    make_fifo(env.session_path("20261120-000000"));
    std::os::unix::fs::symlink("/dev/zero", env.session_path("20261120-000001")).unwrap();
    // Without the check, opening the FIFO waits for a writer and /dev/zero never ends: the
    // run outlives its timeout.
    let run = env.run(&["grep", "LockFileEx"]);
    run.code(2);
    assert!(run.stdout.contains("2. claude: LockFileEx"), "{run}");
    assert!(run.stderr.contains("session_20261120-000000.md: it is a FIFO"), "{run}");
    assert!(run.stderr.contains("session_20261120-000001.md: it is a device"), "{run}");
    assert_eq!(run.stderr.matches("skipped").count(), 2, "{run}");
}

#[test]
fn case_text_and_words() {
    let env = TestEnv::new();
    two_sessions(&env);
    let count = |args: &[&str]| {
        let mut all = vec!["grep"];
        all.extend_from_slice(args);
        // Match lines start with the exchange number and a dot; headings with an id.
        let is_match = |l: &&str| l.split_once(". ").is_some_and(|(n, _)| n.parse::<u64>().is_ok());
        env.run(&all).stdout.lines().filter(is_match).count()
    };
    // Smart case: no capital, no case; a capital, exact case.
    assert_eq!(count(&["lockfileex"]), 1);
    assert_eq!(count(&["Lockfileex"]), 0);
    assert_eq!(count(&["-i", "Lockfileex"]), 1);
    assert_eq!(count(&["-S", "lockfileex"]), 0);
    assert_eq!(count(&["--case-sensitive", "lockfileex"]), 0);
    assert_eq!(count(&["-S", "-i", "lockfileex"]), 1, "the last of -S and -i wins");
    // One flag, one meaning: -s is a session in every command, never case sensitivity.
    env.run(&["grep", "-s", "lockfileex"]).code(2);
    // -F: text, not a pattern.
    assert_eq!(count(&["File::lock."]), 1);
    assert_eq!(count(&["-F", "File::lock."]), 1);
    assert_eq!(count(&["-F", "File.:lock"]), 0);
    assert_eq!(count(&["File.:lock"]), 1);
    assert_eq!(count(&["Fil."]), 2);
    assert_eq!(count(&["-F", "Fil."]), 0);
    // -w: whole words.
    assert_eq!(count(&["lock"]), 6);
    assert_eq!(count(&["-w", "lock"]), 2);
    assert_eq!(count(&["-w", "-F", "File::lock"]), 1);
}

#[test]
fn context_lines_come_from_the_same_record() {
    let env = TestEnv::new();
    env.run_with(
        &["search", "-q", "list"],
        None,
        &[("FAKE_SCRIPT", "say one\\ntwo\\nthree!\\nfour\\nfive\\nsix\\nseven!\\neight")],
    )
    .ok();
    let run = env.run(&["grep", "-C", "1", "!$"]);
    run.ok();
    let body: Vec<&str> = run.stdout.lines().skip(1).collect();
    assert_eq!(
        body,
        [
            "1. claude- two",
            "1. claude: three!",
            "1. claude- four",
            "--",
            "1. claude- six",
            "1. claude: seven!",
            "1. claude- eight",
        ],
        "{run}"
    );
    // Context never reaches into the question or past the answer.
    let run = env.run(&["grep", "-C", "5", "^one$"]);
    let body: Vec<&str> = run.stdout.lines().skip(1).collect();
    assert_eq!(body.first(), Some(&"1. claude: one"), "{run}");
    assert_eq!(body.len(), 6, "{run}");
}

#[test]
fn list_prints_the_matching_session_ids() {
    let env = TestEnv::new();
    two_sessions(&env);
    let run = env.run(&["grep", "-l", "lock"]);
    run.ok();
    assert_eq!(run.stdout, format!("{STAMP}\n{LATER_ID}\n"));
    let run = env.run(&["grep", "-l", "tokio"]);
    assert_eq!(run.stdout, format!("{LATER_ID}\n"));
    env.run(&["grep", "-l", "--json", "x"]).code(2);
}

#[test]
fn json_has_one_object_per_match() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["name", STAMP, "rust-locks"]).ok();
    let run = env.run(&["grep", "--json", "try_lock|LockFileEx|tokio"]);
    run.ok();
    let objects = json_lines(&run);
    assert_eq!(objects.len(), 3, "{run}");
    let first = &objects[0];
    assert_eq!(first["session"], STAMP);
    assert_eq!(first["name"], "rust-locks");
    assert_eq!(first["title"], "how does file locking work?");
    assert_eq!(first["turn"], 1);
    assert_eq!(first["role"], "assistant");
    assert_eq!(first["kind"], "assistant");
    assert_eq!(first["who"], "claude");
    assert_eq!(first["text"], "It has try_lock too.");
    assert_eq!(first["matches"], serde_json::json!([[7, 15]]));
    assert_eq!(first["at"], NOW);
    let path = first["path"].as_str().unwrap();
    let line = first["line"].as_u64().unwrap() as usize;
    assert_eq!(
        std::fs::read_to_string(path).unwrap().lines().nth(line - 1),
        Some("It has try_lock too.")
    );
    assert_eq!(objects[1]["turn"], 2);
    assert_eq!(objects[2]["session"], LATER_ID);
    assert_eq!(objects[2]["role"], "user");
    assert_eq!(objects[2]["who"], "You");
    assert_eq!(objects[2]["name"], Value::Null);
    assert_eq!(objects[2]["at"], LATER);
}

#[test]
fn filters_by_role_engine_time_folder_and_session() {
    let env = TestEnv::new();
    two_sessions(&env);
    let ids = |args: &[&str]| {
        let mut all = vec!["grep", "-l"];
        all.extend_from_slice(args);
        env.run(&all).stdout.lines().map(String::from).collect::<Vec<_>>()
    };
    let sessions = |args: &[&str]| {
        let mut all = vec!["grep", "--json"];
        all.extend_from_slice(args);
        json_lines(&env.run(&all))
            .iter()
            .map(|o| o["text"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        sessions(&["--role", "user", "lock|tokio"]),
        ["how does file locking work?", "what is tokio?"]
    );
    assert_eq!(
        sessions(&["--role", "assistant", "-w", "lock"]),
        ["Rust 1.89 stabilised File::lock.", "An async runtime, with its own lock types."]
    );
    // Time: when each thing was said.
    assert_eq!(ids(&["--since", "2026-11-22T00:00:00Z", "lock"]), [LATER_ID]);
    assert_eq!(ids(&["--until", "2026-11-22T00:00:00Z", "lock"]), [STAMP]);
    assert_eq!(ids(&["--since", "1d", "lock"]), [STAMP, LATER_ID]);
    env.run(&["grep", "--since", "2026-11-23T00:00:00Z", "lock"]).code(1);
    // Engine.
    env.run_with(
        &["search", "-q", "-e", "gemini", "gemini on locks"],
        None,
        &[("CCA_NOW", "2026-11-23T00:00:00Z")],
    )
    .ok();
    assert_eq!(ids(&["--engine", "gemini", "lock"]), ["20261123-000000"]);
    assert_eq!(ids(&["--engine", "claude", "lock"]), [STAMP, LATER_ID]);
    // Named sessions only, by id, prefix or name.
    assert_eq!(ids(&["lock", LATER_ID]), [LATER_ID]);
    assert_eq!(ids(&["lock", "20261121"]), [STAMP]);
    env.run(&["name", LATER_ID, "tokio-intro"]).ok();
    assert_eq!(ids(&["lock", "tokio-intro", STAMP]), [STAMP, LATER_ID]);
    // Folder: started here or below.
    let sub = env.work.join("project/deeper");
    std::fs::create_dir_all(&sub).unwrap();
    let mut cmd = env.command();
    cmd.args(["search", "-q", "locks in a project"])
        .env("CCA_NOW", "2026-11-24T00:00:00Z")
        .current_dir(&sub);
    run_command(cmd, None).ok();
    let mut cmd = env.command();
    cmd.args(["grep", "-l", "--here", "lock"]).current_dir(env.work.join("project"));
    assert_eq!(run_command(cmd, None).stdout, "20261124-000000\n");
    assert_eq!(ids(&["--here", "lock"]).len(), 4);
}

#[test]
fn the_trash_is_searched_on_request() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["rm", LATER_ID]).ok();
    env.run(&["grep", "tokio"]).code(1);
    let run = env.run(&["grep", "--trash", "tokio"]);
    run.ok();
    assert!(run.stdout.starts_with(&format!("{LATER_ID} · what is tokio?\n")), "{run}");
    env.run(&["grep", "--trash", "tokio", "2026112"]).ok();
    env.run(&["grep", "--trash", "tokio", STAMP]).code(2).stderr_has("trash holds no session");
}

#[test]
fn colour_only_on_a_terminal_that_allows_it() {
    let env = TestEnv::new();
    two_sessions(&env);
    let in_pty = |vars: &[(&str, &str)]| {
        let mut cmd = env.pty_command();
        cmd.args(["grep", "try_lock"]);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut session = spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
        session.exp_eof().unwrap()
    };
    let all = in_pty(&[]);
    assert!(all.contains("\u{1b}[1;31mtry_lock\u{1b}[0m"), "{all:?}");
    assert!(all.contains("\u{1b}[1;35m"), "{all:?}");
    for vars in [[("NO_COLOR", "1")], [("TERM", "dumb")]] {
        let all = in_pty(&vars);
        assert!(
            all.contains("It has try_lock too.") && !all.contains('\u{1b}'),
            "{vars:?}: {all:?}"
        );
    }
    let run = env.run_with(&["grep", "try_lock"], None, &[("TERM", "xterm-256color")]);
    assert!(!run.stdout.contains('\u{1b}'), "{run}");
}

#[test]
fn many_sessions_print_in_order() {
    let env = TestEnv::new();
    let dir = env.sessions_dir();
    std::fs::create_dir_all(&dir).unwrap();
    // Far more output than one session may hold before its turn, in a middle session.
    let big = format!("needle {}\n", "x".repeat(200)).repeat(8_000);
    for i in 0..40 {
        env.run_with(
            &["search", "-q", &format!("needle {i}")],
            None,
            &[
                ("CCA_NOW", &format!("2026-11-21T10:{:02}:00Z", i)),
                ("FAKE_SCRIPT", if i == 7 { "say BIG" } else { "echo" }),
            ],
        )
        .ok();
    }
    let path = env.session_path("20261121-100700");
    let text = std::fs::read_to_string(&path).unwrap().replace("BIG", &big);
    std::fs::write(&path, text).unwrap();
    let run = env.run(&["grep", "-l", "needle"]);
    let expected: String = (0..40).map(|i| format!("20261121-10{i:02}00\n")).collect();
    assert_eq!(run.stdout, expected);
    let run = env.run(&["grep", "needle"]);
    run.ok();
    let headings: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("2026")).collect();
    assert_eq!(headings.len(), 40);
    assert!(headings.windows(2).all(|w| w[0] < w[1]), "sessions in order");
    assert_eq!(run.stdout.lines().filter(|l| l.contains("needle xxx")).count(), 8_000);
}

#[test]
fn names_work_wherever_an_id_does() {
    let env = TestEnv::new();
    two_sessions(&env);
    // The latest is the tokio session; name the first one by id, the latest by default.
    env.run(&["name", STAMP, "rust-locks"]).ok().stderr_has("named rust-locks");
    env.run(&["name", "tokio.intro"]).ok();
    let header = std::fs::read_to_string(env.session_path(STAMP)).unwrap();
    assert!(header.lines().next().unwrap().contains("\"name\":\"rust-locks\""), "{header}");
    assert!(header.contains("named `rust-locks`"));
    assert!(header.contains("It has try_lock too."), "the rest of the file is kept");
    // --session, CCA_SESSION and `,`.
    env.run(&["search", "-q", "-s", "rust-locks", "third"]).ok();
    assert_eq!(env.last_users(), ["how does file locking work?", "and on Windows?"]);
    env.run_with(&[",", "fourth"], None, &[("CCA_SESSION", "rust-locks")]).ok();
    assert_eq!(env.last_users().len(), 3);
    // show, path, fork, clear, compact, rm.
    let run = env.run(&["show", "rust-locks"]);
    assert!(run.stdout.contains(&format!("session {STAMP} (rust-locks)")), "{run}");
    let run = env.run(&["path", "tokio.intro"]);
    assert_eq!(run.stdout.trim(), env.session_path(LATER_ID).display().to_string());
    let run = env.run_with(
        &["fork", "rust-locks", "--at", "1"],
        None,
        &[("CCA_NOW", "2026-11-25T00:00:00Z")],
    );
    run.ok();
    let fork = std::fs::read_to_string(env.session_path("20261125-000000")).unwrap();
    assert!(!fork.lines().next().unwrap().contains("\"name\""), "a fork starts without the name");
    env.run(&["clear", "rust-locks"]).ok();
    assert!(std::fs::read_to_string(env.session_path(STAMP)).unwrap().contains("<!-- cca:clear"));
    env.run(&["compact", "--keep", "0", "tokio.intro"]).ok();
    env.run(&["rm", "tokio.intro"]).ok();
    assert!(!env.session_path(LATER_ID).exists());
    env.run(&["show", "tokio.intro"])
        .code(2)
        .stderr_has(&format!("`tokio.intro` names {LATER_ID}, which is in the trash"));
    // Completions offer names.
    let run = env.run_with(
        &["--", "cca", "show", ""],
        None,
        &[("CCA_COMPLETE", "bash"), ("_CLAP_COMPLETE_INDEX", "2"), ("_CLAP_IFS", "\n")],
    );
    assert!(run.stdout.lines().any(|l| l == "rust-locks"), "{run}");
}

#[test]
fn names_are_unique_and_plain() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["name", STAMP, "locks"]).ok();
    env.run(&["name", LATER_ID, "locks"])
        .code(2)
        .stderr_has(&format!("the name `locks` is taken by session {STAMP}"))
        .stderr_has(&format!("cca name --clear {STAMP}"));
    // Naming the same session again, or renaming it, is fine.
    env.run(&["name", STAMP, "locks"]).ok();
    env.run(&["name", STAMP, "file-locks"]).ok();
    env.run(&["name", LATER_ID, "locks"]).ok();
    for bad in
        ["2026", "20261121-101500", "a/b", "-x", ".hidden", "two words", "naïve", &"a".repeat(65)]
    {
        env.run(&["name", STAMP, "--", bad]).code(2).stderr_has("cannot be a session name");
    }
    // Clearing.
    env.run(&["name", "--clear", "file-locks"]).ok().stderr_has("has no name now");
    env.run(&["show", "file-locks"]).code(2);
    assert!(!std::fs::read_to_string(env.session_path(STAMP)).unwrap().contains("\"name\""));
    env.run(&["name", "--clear", STAMP, "extra"]).code(2);
    env.run(&["name"]).code(2).stderr_has("give the session a name");
    // A name made twice by hand is refused where it is used, with the sessions it could be.
    let text = std::fs::read_to_string(env.session_path(STAMP)).unwrap();
    std::fs::write(
        env.session_path(STAMP),
        text.replacen("\"title\"", "\"name\":\"locks\",\"title\"", 1),
    )
    .unwrap();
    env.run(&["show", "locks"]).code(2).stderr_has("2 sessions are named `locks`");
}

#[test]
fn sessions_show_names_and_filter() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["name", STAMP, "rust-locks"]).ok();
    let run = env.run(&["sessions"]);
    assert!(run.stdout.contains("rust-locks · how does file locking work?"), "{run}");
    let run = env.run(&["sessions", "--json"]);
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list[1]["name"], "rust-locks");
    assert_eq!(list[0]["name"], Value::Null);
    assert_eq!(list[0]["cwd"], env.work.display().to_string());
    let ids = |args: &[&str]| {
        let mut all = vec!["sessions", "--json"];
        all.extend_from_slice(args);
        let v: Value = serde_json::from_str(&env.run(&all).stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&["--since", "2026-11-22T00:00:00Z"]), [LATER_ID]);
    assert_eq!(ids(&["--since", "3d"]), [LATER_ID, STAMP]);
    env.run_with(
        &["search", "-q", "-e", "gemini", "g"],
        None,
        &[("CCA_NOW", "2026-11-23T00:00:00Z")],
    )
    .ok();
    assert_eq!(ids(&["--engine", "gemini"]), ["20261123-000000"]);
    assert_eq!(ids(&["--engine", "claude"]), [LATER_ID, STAMP]);
    let sub = env.work.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let mut cmd = env.command();
    cmd.args(["search", "-q", "from sub"]).env("CCA_NOW", "2026-11-24T00:00:00Z").current_dir(&sub);
    run_command(cmd, None).ok();
    let mut cmd = env.command();
    cmd.args(["sessions", "--here"]).current_dir(&sub);
    let run = run_command(cmd, None);
    assert_eq!(run.stdout.lines().count(), 1, "{run}");
    assert!(run.stdout.contains("20261124-000000"), "{run}");
    assert_eq!(ids(&["--here"]).len(), 4);
    env.run(&["sessions", "--since", "soon"]).code(2).stderr_has("not a date");
    // A local time the clocks skip is read as a clock not yet put forward shows it: 02:30 on
    // the day New York goes from 02:00 to 03:00 is 03:30 (07:30 UTC), between these two.
    for now in ["2026-03-08T07:20:00Z", "2026-03-08T07:40:00Z"] {
        env.run_with(&["search", "-q", "at the jump"], None, &[("CCA_NOW", now)]).ok();
    }
    let run = env.run_with(
        &["sessions", "--since", "2026-03-08 02:30", "--json"],
        None,
        &[("TZ", "America/New_York")],
    );
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("20260308-074000"), "{run}");
    assert!(!run.stdout.contains("20260308-072000"), "{run}");
    // The earliest date there is, east of UTC, is no time at all: said, never a panic.
    let run =
        env.run_with(&["sessions", "--since=-262143-01-01 00:00"], None, &[("TZ", "Asia/Tokyo")]);
    run.code(2).stderr_has("not a date");
}

#[test]
fn a_restored_session_whose_name_was_taken_says_so() {
    let env = TestEnv::new();
    two_sessions(&env);
    env.run(&["name", STAMP, "locks"]).ok();
    env.run(&["rm", "locks"]).ok();
    env.run(&["name", LATER_ID, "locks"]).ok();
    env.run(&["restore", STAMP])
        .ok()
        .stderr_has(&format!("warning: {LATER_ID} is named locks too"))
        .stderr_has(&format!("cca name --clear {STAMP}"));
    env.run(&["show", "locks"]).code(2).stderr_has("2 sessions are named `locks`");
}

#[test]
fn count_prints_each_matching_sessions_number_of_lines_and_days_are_words_too() {
    let env = TestEnv::new();
    two_sessions(&env);
    let run = env.run(&["grep", "-c", "lock"]);
    run.ok();
    assert_eq!(run.stdout, format!("{STAMP}:5\n{LATER_ID}:1\n"), "{run}");
    env.run(&["grep", "--count", "nowhere"]).code(1);
    env.run(&["grep", "-c", "-l", "lock"]).code(2);
    // `today` and `yesterday` are local days, as a date is.
    let later = [("CCA_NOW", LATER)];
    let run = env.run_with(&["grep", "-c", "lock", "--since", "today"], None, &later);
    assert_eq!(run.stdout, format!("{LATER_ID}:1\n"), "{run}");
    let run = env.run_with(&["grep", "-c", "lock", "--since", "yesterday"], None, &later);
    assert_eq!(run.stdout, format!("{STAMP}:5\n{LATER_ID}:1\n"), "{run}");
    let run = env.run_with(&["grep", "-l", "lock", "--until", "yesterday"], None, &later);
    assert_eq!(run.stdout, format!("{STAMP}\n"), "{run}");
    let run = env.run_with(&["sessions", "--since", "today"], None, &later);
    assert_eq!(run.stdout.lines().count(), 1, "{run}");
}
