//! Steering sessions: --session, CCA_SESSION, sessions, show, path, fork, clear, rm, restore, chat.

use rexpect::session::spawn_command;

use crate::common::*;

#[test]
fn two_terminals_follow_their_own_sessions() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "alpha-1"]).ok();
    env.run_with(&["search", "-q", "beta-1"], None, &[("CCA_NOW", "2026-11-21T10:16:00Z")]).ok();
    let (a, b) = ("20261121-101500", "20261121-101600");
    for round in 2..=3 {
        env.run_with(&[",", &format!("alpha-{round}")], None, &[("CCA_SESSION", a)]).ok();
        assert_eq!(env.last_users().first().map(String::as_str), Some("alpha-1"));
        env.run_with(&[",", &format!("beta-{round}")], None, &[("CCA_SESSION", b)]).ok();
        assert_eq!(env.last_users().first().map(String::as_str), Some("beta-1"));
    }
    assert_eq!(env.last_users(), ["beta-1", "beta-2"]);
    let a_text = std::fs::read_to_string(env.session_path(a)).unwrap();
    assert!(a_text.contains("alpha-3") && !a_text.contains("beta"), "{a_text}");
    // A unique prefix works; an ambiguous one lists the candidates.
    env.run(&["search", "-s", "20261121-1016", "-q", "beta-4"]).ok();
    assert_eq!(env.last_users(), ["beta-1", "beta-2", "beta-3"]);
    env.run(&["search", "-s", "20261121-10", "q"])
        .code(2)
        .stderr_has("matches 2 sessions")
        .stderr_has(a)
        .stderr_has(b);
}

#[test]
fn sessions_lists_newest_first_with_details() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first topic"]).ok();
    env.run_with(&["search", "-q", "second topic"], None, &[("CCA_NOW", "2026-11-21T11:00:00Z")])
        .ok();
    env.run_with(
        &["search", "-q", "-r", "more on it"],
        None,
        &[("CCA_NOW", "2026-11-21T11:05:00Z")],
    )
    .ok();
    let run = env.run(&["sessions"]);
    run.ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{run}");
    assert!(
        lines[0]
            .starts_with("* 20261121-110000  2026-11-21 11:05    2 turns  claude  second topic"),
        "{run}"
    );
    assert!(
        lines[1].starts_with("  20261121-101500  2026-11-21 10:15    1 turn   claude  first topic"),
        "{run}"
    );
    let run = env.run(&["sessions", "-n", "1"]);
    assert_eq!(run.stdout.lines().count(), 1);
    // An empty list says why, blaming only what was given.
    let run = env.run(&["sessions", "-n", "0"]);
    run.ok();
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr, "cca: `-n 0` lists no sessions; `-n N` lists the newest N\n");
    let unused = "cca: no session kept was held with the engine `gemini`; the sessions kept were held with claude\n";
    let run = env.run(&["sessions", "--engine", "gemini"]);
    assert_eq!(
        run.stderr,
        format!("{unused}cca: none of the 2 sessions matches the filter --engine\n")
    );
    let run = env.run(&["sessions", "--engine", "gemini", "--here"]);
    assert_eq!(
        run.stderr,
        format!("{unused}cca: none of the 2 sessions matches the filters --here, --engine\n")
    );

    let run = env.run(&["sessions", "--json"]);
    run.ok();
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v[0]["id"], "20261121-110000");
    assert_eq!(v[0]["turns"], 2);
    assert_eq!(v[0]["title"], "second topic");
    assert_eq!(v[0]["engine"], "claude");
    assert_eq!(v[0]["followed"], true);
    assert!(v[0]["live_bytes"].as_u64().unwrap() > 0);
    assert!(v[0]["full_bytes"].as_u64().unwrap() > v[0]["live_bytes"].as_u64().unwrap());
    assert_eq!(v[1]["last_activity"], "2026-11-21T10:15:00Z");
}

#[test]
fn sessions_reads_the_index_not_the_transcripts() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "cached title"]).ok();
    env.run(&["sessions"]).ok();
    assert!(env.cca_home.join("index.json").is_file());
    // Same size, same time, different bytes: a listing that re-read transcripts would notice.
    let path = env.session_path(STAMP);
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    std::fs::write(&path, "x".repeat(len)).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
    let run = env.run(&["sessions"]);
    assert!(run.stdout.contains("cached title"), "{run}");
    // A real change (a hand edit) is noticed.
    std::fs::write(&path, "still nonsense").unwrap();
    let run = env.run(&["sessions"]);
    assert!(run.stdout.contains("unreadable"), "{run}");
}

#[test]
fn show_path_and_hand_edits() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "original question"]).ok();
    let run = env.run(&["show"]);
    run.ok();
    assert!(run.stdout.starts_with("original question\nsession 20261121-101500 · claude"), "{run}");
    assert!(run.stdout.contains("\n── 1. You ──\noriginal question\n\n── 1. claude"), "{run}");
    assert!(!run.stdout.contains("<!--"), "{run}");
    let raw = env.run(&["show", "--raw"]);
    assert_eq!(raw.stdout, env.latest());

    let run = env.run(&["path"]);
    run.ok();
    let path = run.stdout.trim().to_string();
    assert_eq!(path, env.session_path(STAMP).to_str().unwrap());
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("ECHO: original question", "a better answer, by hand");
    std::fs::write(&path, edited).unwrap();
    env.run(&["search", "-q", "-r", "next"]).ok();
    let stdin = stdin_of(&env.last_call()).to_string();
    assert!(
        tag(&stdin, "conversation_history")
            .unwrap()
            .contains("<assistant_turn>\na better answer, by hand\n</assistant_turn>"),
        "{stdin}"
    );
}

#[test]
fn fork_at_turn_two_sends_exactly_two_exchanges() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "t1"]).ok();
    for t in ["t2", "t3", "t4"] {
        env.run(&["search", "-q", "-r", t]).ok();
    }
    let run = env.run_with(&["fork", "--at", "2"], None, &[("CCA_NOW", "2026-11-21T12:00:00Z")]);
    run.ok();
    assert_eq!(run.stdout.trim(), "20261121-120000");
    let forked = env.latest();
    assert!(
        forked.contains("\"forked_from\":{\"session\":\"20261121-101500\",\"turn\":2}"),
        "{forked}"
    );
    assert!(forked.contains("forked from `20261121-101500` at turn 2"), "{forked}");
    env.run(&["search", "-q", "-r", "t5 in the fork"]).ok();
    assert_eq!(env.last_users(), ["t1", "t2"]);
    // The original goes on with all four.
    env.run(&["search", "-q", "-s", "20261121-101500", "t5 in the original"]).ok();
    assert_eq!(env.last_users(), ["t1", "t2", "t3", "t4"]);
    env.run(&["fork", "--at", "9"])
        .code(2)
        .stderr_has("has 5 exchanges")
        .stderr_has("fork at 5 or less");
    let before = env.session_files();
    env.run(&["fork", "--at", "0"]).code(2).stderr_has("a fork at 0 would keep nothing");
    assert_eq!(env.session_files(), before, "no empty session is made");

    // A whole session forks whole: a clear after its last exchange goes with it.
    env.run(&["clear", "20261121-101500"]).ok();
    env.run_with(&["fork", "20261121-101500"], None, &[("CCA_NOW", "2026-11-21T13:00:00Z")]).ok();
    env.run(&["search", "-q", "-r", "after the clear"]).ok();
    assert_eq!(env.last_users(), Vec::<String>::new(), "the fork starts after the clear too");
    // ... and one with no answered exchange is no fork at all.
    let failing = [("CCA_NOW", "2026-11-21T14:00:00Z"), ("FAKE_SCRIPT", "fail down")];
    env.run_with(&["search", "-q", "x"], None, &failing).code(1);
    let before = env.session_files();
    // Whatever --at says, the one thing said is that there is nothing to fork.
    for at in [&["fork"][..], &["fork", "--at", "1"], &["fork", "--at", "0"]] {
        let run = env.run(at);
        run.code(2).stderr_has("has no answered exchange, so there is nothing to fork");
        assert!(!run.stderr.contains("--at"), "no hint leads to another refusal: {run}");
    }
    assert_eq!(env.session_files(), before);
}

/// A fork is active from its creation: `cca sessions` lists it first, marked as a fork, and
/// removing the latest moves `latest` to the session listed first.
#[test]
fn a_fresh_fork_lists_first_and_latest_moves_in_the_listed_order() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "parent"]).ok();
    let at = |t: &'static str| [("CCA_NOW", t)];
    env.run_with(&["search", "-q", "other"], None, &at("2026-11-21T11:00:00Z")).ok();
    let run =
        env.run_with(&["fork", "--at", "1", "20261121-101500"], None, &at("2026-11-21T12:00:00Z"));
    assert_eq!(run.ok().stdout.trim(), "20261121-120000");
    let listed = env.run(&["sessions"]);
    let ids: Vec<&str> =
        listed.ok().stdout.lines().map(|l| l[2..].split(' ').next().unwrap()).collect();
    assert_eq!(ids, ["20261121-120000", "20261121-110000", "20261121-101500"], "{listed}");
    let first = listed.stdout.lines().next().unwrap();
    assert!(first.contains("(fork of 20261121-101500 at 1) parent"), "{listed}");
    let json = env.run(&["sessions", "--json"]);
    assert!(json.ok().stdout.find("20261121-120000") < json.stdout.find("20261121-110000"));
    // The parent, continued now, is the newest again; removing it moves `latest` to the fork,
    // which `cca sessions` lists next.
    env.run_with(
        &["search", "-q", "-s", "20261121-101500", "more"],
        None,
        &at("2026-11-21T13:00:00Z"),
    )
    .ok();
    env.run_with(
        &["search", "-q", "-s", "20261121-110000", "more"],
        None,
        &at("2026-11-21T14:00:00Z"),
    )
    .ok();
    let listed = env.run(&["sessions"]);
    let second = listed.ok().stdout.lines().nth(1).unwrap().to_string();
    env.run(&["rm", "20261121-110000"])
        .ok()
        .stderr_has(&format!("it now points at {}", second[2..].split(' ').next().unwrap()));
    assert!(second.contains("20261121-101500"), "{listed}");
}

#[test]
fn clear_sends_no_history_but_keeps_the_file() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "before the clear"]).ok();
    env.run(&["clear"]).ok();
    env.run(&["search", "-q", "-r", "after the clear"]).ok();
    assert!(tag(stdin_of(&env.last_call()), "conversation_history").is_none());
    env.run(&["search", "-q", "-r", "later"]).ok();
    assert_eq!(env.last_users(), ["after the clear"]);
    let text = env.latest();
    assert!(text.contains("before the clear") && text.contains("<!-- cca:clear"), "{text}");
    let show = env.run(&["show"]);
    assert!(
        show.stdout.contains("── context cleared here: nothing above is sent again ──"),
        "{show}"
    );
}

/// The home cca keeps for a session's gemini (its settings, and the files gemini writes of its
/// own) goes with the session.
#[test]
fn rm_removes_the_home_kept_for_the_session_s_gemini() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "-e", "gemini", "one"]).ok();
    let home = env.cca_home.join("engines/gemini/20261121-101500");
    assert!(home.join(".gemini/settings.json").is_file());
    let call = std::fs::read_to_string(env.log.join("call-1.json")).unwrap();
    assert!(call.contains(&home.display().to_string()), "GEMINI_CLI_HOME: {call}");
    env.run(&["rm", "20261121-101500"]).ok();
    assert!(!home.exists());
}

#[test]
fn rm_moves_to_the_trash_and_restore_brings_back() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "one"]).ok();
    env.run_with(&["search", "-q", "two"], None, &[("CCA_NOW", "2026-11-21T10:20:00Z")]).ok();
    let (one, two) = ("20261121-101500", "20261121-102000");
    // `two` was the followed session: the switch to `one` is said, never silent.
    env.run(&["rm", two])
        .ok()
        .stderr_has("cca restore")
        .stderr_has(&format!("`latest` pointed at {two}; it now points at {one} (one)"));
    assert!(env.cca_home.join(format!("trash/session_{two}.md")).is_file());
    assert!(env.latest().contains("# one"), "latest moved to the remaining session");
    // The trash lists what each session was, and when it started.
    assert_eq!(env.run(&["restore"]).stdout, format!("{two}  2026-11-21 10:20:00  two\n"));
    env.run(&["restore", two]).ok();
    assert!(env.session_path(two).is_file());
    // Both in the trash: one that cannot be restored restores none; all back, `latest` is
    // the newest, whatever their order.
    env.run(&["rm", one, two]).ok().stderr_has("no session is left");
    env.run(&["restore", two, "20261121-000000"]).code(2).stderr_has("the trash holds no session");
    assert!(!env.session_path(two).exists(), "nothing was restored");
    // A unique start of an id and a name find sessions in the trash, as they find live ones.
    env.run(&["restore", "20261121-10"]).code(2).stderr_has("matches 2 sessions in the trash");
    env.run(&["restore", "two-name"]).code(2).stderr_has("the trash holds no session `two-name`");
    env.run(&["name", two, "two-name"]).code(2);
    env.run(&["restore", two]).ok();
    env.run(&["name", two, "two-name"]).ok();
    env.run(&["rm", two]).ok();
    env.run(&["restore", "20261121-1015", "two-name"]).ok();
    assert!(env.latest().contains("# two"), "{}", env.latest());
    env.run(&["rm", "--purge", one, two]).ok();
    assert!(env.session_files().is_empty());
    assert!(
        !env.sessions_dir().join("latest").exists()
            && std::fs::symlink_metadata(env.sessions_dir().join("latest")).is_err()
    );
    env.run(&["search", "-r", "q"]).code(2).stderr_has("no session to continue");
    env.run(&["rm", "nope"]).code(2).stderr_has("no session `nope`");
    env.run(&["restore", "nope"]).code(2).stderr_has("the trash holds no session `nope`");

    // The trash can be emptied: --purge finds sessions there too.
    env.run(&["search", "-q", "three"]).ok();
    let three =
        env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    env.run(&["rm", &three]).ok().stderr_has("no session is left");
    env.run(&["rm", "--purge", &three])
        .ok()
        .stderr_has(&format!("deleted {three} (it was in the trash)"));
    assert!(!env.cca_home.join(format!("trash/session_{three}.md")).exists());
    env.run(&["restore"]).ok().stderr_has("the trash is empty");

    // `latest` naming a session removed by hand (as the README says to do with one that cannot
    // be read): a restore succeeds, says so, and the restored session is latest.
    env.run_with(&["search", "-q", "four"], None, &[("CCA_NOW", "2026-11-21T10:30:00Z")]).ok();
    env.run_with(&["search", "-q", "five"], None, &[("CCA_NOW", "2026-11-21T10:40:00Z")]).ok();
    let (four, five) = ("20261121-103000", "20261121-104000");
    env.run(&["rm", four]).ok();
    std::fs::remove_file(env.session_path(five)).unwrap();
    env.run(&["restore", four]).ok().stderr_has(&format!("restored {four}"));
    assert!(env.latest().contains("# four"), "{}", env.latest());
}

/// An id in the trash is still that session's: a new session in the same second takes
/// another, so `restore` and sync never meet two conversations under one id. A session named
/// twice is removed, or restored, once.
#[test]
fn an_id_in_the_trash_is_never_given_again_and_a_session_named_twice_is_taken_once() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "old conversation"]).ok();
    let old = "20261121-101500";
    env.run(&["rm", old, old]).ok();
    // The same second (CCA_NOW), a new conversation.
    env.run(&["search", "-q", "new conversation"]).ok();
    let new = format!("{old}-2");
    assert!(env.session_path(&new).is_file(), "{:?}", env.session_files());
    assert!(!env.session_path(old).exists());
    env.run(&["restore", old, old]).ok();
    assert!(std::fs::read_to_string(env.session_path(old)).unwrap().contains("old conversation"));
    assert!(std::fs::read_to_string(env.session_path(&new)).unwrap().contains("new conversation"));
    env.run(&["rm", &new]).ok();
    assert!(env.cca_home.join(format!("trash/session_{new}.md")).is_file());

    // `latest` deleted by hand: `,` does not guess which conversation to go on with.
    std::fs::remove_file(env.sessions_dir().join("latest")).unwrap();
    env.run(&["search", "-r", "q"])
        .code(2)
        .stderr_has("no `latest` link")
        .stderr_has(&format!("cca search -s {old}"));
    assert_eq!(env.calls().len(), 2, "nothing was asked");
}

#[test]
fn a_whole_id_names_that_session_only_never_the_one_of_the_same_second_after_it() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "old conversation"]).ok();
    let old = "20261121-101500";
    let fork = format!("{old}-2");
    env.run(&["fork", old]).ok();
    env.run(&["rm", old]).ok();
    // Its id, in the trash: said so, and the fork it begins is not taken in its place.
    for words in
        [&["rm", old][..], &["show", old], &["search", "-s", old, "q"], &["name", old, "x"]]
    {
        env.run(words)
            .code(2)
            .stderr_has(&format!("`{old}` is in the trash"))
            .stderr_has("cca restore");
    }
    // Its name too.
    env.run(&["restore", old]).ok();
    env.run(&["name", old, "old-talk"]).ok();
    env.run(&["rm", old]).ok();
    env.run(&["show", "old-talk"])
        .code(2)
        .stderr_has(&format!("`old-talk` names {old}, which is in the trash"))
        .stderr_has(&format!("cca restore {old}"));
    env.run(&["rm", "--purge", old])
        .ok()
        .stderr_has(&format!("deleted {old} (it was in the trash)"));
    assert!(env.session_path(&fork).is_file(), "the live fork is kept");
    // Gone for good, the whole id still names nothing else; the start of one is a prefix.
    env.run(&["rm", "--purge", old]).code(2).stderr_has(&format!("did you mean {fork}?"));
    env.run(&["show", old]).code(2).stderr_has(&format!("no session `{old}`"));
    assert!(env.run(&["show", "20261121-1015"]).ok().stdout.contains(&format!("session {fork}")));
    // So in the trash: with the fork moved there, `--purge` of the whole id finds nothing.
    env.run(&["rm", &fork]).ok();
    env.run(&["rm", "--purge", old]).code(2);
    assert!(env.cca_home.join(format!("trash/session_{fork}.md")).is_file());
    assert_eq!(env.calls().len(), 1, "nothing else was asked");
}

#[test]
fn chat_in_a_terminal_with_ctrl_c_in_the_middle() {
    let env = TestEnv::new();
    // One engine run per turn, each checked: a kept claude would take them all.
    env.write_config("[engines.claude]\nkeep_warm = \"off\"\n");
    let mut cmd = env.pty_command();
    cmd.args(["chat"]).env("FAKE_SCRIPT_2", "say partial second;hang");
    let mut chat = spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
    chat.exp_string("Ctrl-D to leave").unwrap();
    chat.exp_string("> ").unwrap();
    chat.send_line("chat-one").unwrap();
    chat.exp_string("ECHO: chat-one").unwrap();
    chat.exp_string("> ").unwrap();
    chat.send_line("chat-two").unwrap();
    chat.exp_string("partial second").unwrap();
    chat.send_control('c').unwrap();
    chat.exp_string("interrupted (Ctrl-C)").unwrap();
    chat.exp_string("> ").unwrap();
    chat.send_line("chat-three").unwrap();
    chat.exp_string("ECHO: chat-three").unwrap();
    chat.exp_string("> ").unwrap();
    chat.send_line("/session").unwrap();
    chat.exp_string(&format!("session {STAMP}")).unwrap();
    chat.send_line(&format!("/session {STAMP}")).unwrap();
    chat.exp_string(&format!("now talking in {STAMP}")).unwrap();
    chat.send_control('d').unwrap();
    chat.exp_eof().unwrap();

    let (t, problems) = cca::transcript::parse(&env.latest()).unwrap();
    assert!(problems.is_empty());
    use cca::transcript::Kind::*;
    let kinds: Vec<_> = t.records.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [User, Assistant, User, Interrupted, User, Assistant]);
    assert_eq!(t.records[3].content, "partial second");
    let calls = env.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(history_users(stdin_of(&calls[2])), ["chat-one"]);
    // The line editor keeps its history for the next chat.
    let history = std::fs::read_to_string(env.cca_home.join("chat_history")).unwrap();
    assert!(history.contains("chat-one") && history.contains("chat-three"), "{history}");
}

#[test]
fn chat_commands_clear_and_fork() {
    let env = TestEnv::new();
    // One engine run per turn, each checked: a kept claude would take them all.
    env.write_config("[engines.claude]\nkeep_warm = \"off\"\n");
    let mut cmd = env.pty_command();
    cmd.args(["chat"]);
    let mut chat = spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
    chat.exp_string("> ").unwrap();
    chat.send_line("c-one").unwrap();
    chat.exp_string("ECHO: c-one").unwrap();
    chat.send_line("/clear").unwrap();
    chat.exp_string("context cleared").unwrap();
    chat.send_line("c-two").unwrap();
    chat.exp_string("ECHO: c-two").unwrap();
    // A fork keeps at least one exchange; the hint names chat's own command.
    chat.send_line("/fork 0").unwrap();
    chat.exp_string("a fork at 0 would keep nothing").unwrap();
    chat.exp_string("`/fork 1`").unwrap();
    chat.send_line("/fork 1").unwrap();
    chat.exp_string("now talking in").unwrap();
    chat.send_line("c-three \\").unwrap();
    chat.send_line("continued").unwrap();
    // The answer is rendered on the terminal (a finished line is redrawn, its trailing space
    // gone); the message itself reaches the engine whole, as the calls below show.
    chat.exp_string("ECHO: c-three").unwrap();
    chat.exp_string("continued\r\n").unwrap();
    // Not a command: a message (a path, say); `//` escapes a leading slash.
    chat.send_line("/etc/hosts?").unwrap();
    chat.exp_string("ECHO: /etc/hosts?").unwrap();
    chat.send_line("//quit").unwrap();
    chat.exp_string("ECHO: /quit").unwrap();
    // A mistyped command is refused, never sent to the engine as a question.
    chat.send_line("/cleaar").unwrap();
    chat.exp_string("unknown command /cleaar; nothing was sent").unwrap();
    chat.exp_string("// at the start sends a message").unwrap();
    chat.send_line("/quit").unwrap();
    chat.exp_eof().unwrap();
    let calls = env.calls();
    assert!(tag(stdin_of(&calls[1]), "conversation_history").is_none(), "cleared");
    assert_eq!(history_users(stdin_of(&calls[2])), ["c-one"], "forked at 1");
    assert_eq!(tag(stdin_of(&calls[2]), "user_query"), Some("c-three \ncontinued"));
    assert_eq!(env.session_files().len(), 2);
    assert_eq!(calls.len(), 5, "nothing sent for /cleaar: {calls:?}");
}

/// In chat, a hint names what to do in chat, not the shell's commands.
#[test]
fn chat_hints_name_chat_s_own_commands() {
    let env = TestEnv::new();
    let mut cmd = env.pty_command();
    cmd.args(["chat"]).env("FAKE_SCRIPT", "fail the api is down");
    let mut chat = spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
    chat.exp_string("> ").unwrap();
    chat.send_line("h-1").unwrap();
    let shown = chat.exp_string("send it again (Up recalls it)").unwrap();
    assert!(!shown.contains("cca search --resume"), "{shown}");
    chat.send_control('d').unwrap();
    chat.exp_eof().unwrap();
}

/// `/compact` in chat does what `cca compact` and ACP's `/compact` do.
#[test]
fn chat_compacts_with_slash_compact() {
    let env = TestEnv::new();
    let mut cmd = env.pty_command();
    cmd.args(["chat"]);
    let mut chat = spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
    for n in 1..=3 {
        chat.exp_string("> ").unwrap();
        chat.send_line(&format!("k-{n}")).unwrap();
        chat.exp_string(&format!("ECHO: k-{n}")).unwrap();
    }
    chat.send_line("/compact 1").unwrap();
    chat.exp_string(&format!("turns 1-2 of {STAMP} are now a summary")).unwrap();
    chat.send_line("/compact x").unwrap();
    chat.exp_string("/compact takes a number").unwrap();
    chat.send_line("k-4").unwrap();
    chat.exp_string("ECHO: k-4").unwrap();
    chat.send_control('d').unwrap();
    chat.exp_eof().unwrap();
    let history = tag(stdin_of(&env.last_call()), "conversation_history").unwrap().to_string();
    assert!(history.contains("<conversation_summary>\nSUMMARY[k-1 | k-2]"), "{history}");
}

/// A gemini kept between turns runs as an ACP agent: a program that does not speak it fails the
/// turn with what to do (this one ends at once), and the question is kept.
#[test]
fn a_kept_gemini_that_opens_no_acp_session_fails_the_turn_with_a_hint() {
    let env = TestEnv::new();
    env.write_config("[engines.gemini]\nkeep_warm = \"5m\"\n");
    let mut cmd = env.command();
    cmd.args(["chat", "-e", "gemini"]).env("FAKE_SCRIPT", "nostdin;raw no acp here\\n");
    let run = run_command(cmd, Some(b"hello\n"));
    // Piped, the chat's status says a turn failed, as `cca search`'s would.
    run.code(1)
        .stderr_has("gemini ended before it opened a session")
        .stderr_has("keep_warm = \"off\"");
    let argv = argv_of(&env.last_call()).join(" ");
    assert!(argv.contains("--acp"), "{argv}");
    assert!(env.latest().contains("hello"), "the question is kept");
}

/// Piped into chat: a message that is not UTF-8 is refused alone and the chat goes on; a
/// `"""` left open at the end is sent without its fence.
#[test]
fn a_piped_chat_refuses_a_message_that_is_not_text_alone_and_sends_an_open_block_unfenced() {
    let env = TestEnv::new();
    env.write_config("[engines.claude]\nkeep_warm = \"off\"\n");
    let mut cmd = env.command();
    cmd.args(["chat"]);
    let run = run_command(cmd, Some(b"hello \xff\xfe world\nsecond\n\"\"\"\nopen block\n"));
    run.ok().stderr_has("a message on stdin is not UTF-8 text: it was not sent");
    assert_eq!(questions(&env.latest()), ["second", "open block"]);
}

/// With `CCA_SESSION` set, a new session or a fork becomes `latest` while `,` in that terminal
/// still continues the variable's: the terminal is told so, and how to follow the new one.
#[test]
fn a_terminal_that_follows_cca_session_hears_that_a_new_session_is_not_followed() {
    let env = TestEnv::new();
    env.run(&["search", "first"]).ok();
    let run_in_pty = |args: &[&str], now: &str| {
        let mut cmd = env.pty_command();
        cmd.args(args).env("CCA_SESSION", STAMP).env("CCA_NOW", now);
        let mut session = spawn_command(cmd, Some(TIMEOUT.as_millis() as u64)).unwrap();
        session.exp_eof().unwrap().replace("\r\n", "\n")
    };
    let all = run_in_pty(&["search", "new", "question"], "2026-11-21T11:00:00Z");
    assert!(
        all.contains(&format!(
            "cca: `,` here still continues {STAMP} ($CCA_SESSION names it); \
             `export CCA_SESSION=20261121-110000` to follow 20261121-110000\n"
        )),
        "{all:?}"
    );
    let all = run_in_pty(&["fork", STAMP], "2026-11-21T12:00:00Z");
    assert!(all.contains("it is now the latest session\n"), "{all:?}");
    assert!(all.contains("`export CCA_SESSION=20261121-120000` to follow"), "{all:?}");
    // A follow-up in the followed session says nothing of the kind; nor does a terminal
    // without the variable.
    assert!(!run_in_pty(&[",", "more"], "2026-11-21T13:00:00Z").contains("still continues"));
    let run = env.run(&["search", "another"]);
    assert!(!run.ok().stderr.contains("still continues"), "{run}");
}

/// A header field a newer cca wrote stays when this one writes the header again (a name given,
/// taken away): DESIGN.md's readers ignore what they do not know, and so never drop it.
#[test]
fn a_header_field_this_cca_does_not_know_is_kept_when_the_header_is_written_again() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "one"]).ok();
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path).unwrap();
    let newer = text.replacen("{\"format\":1,", "{\"format\":1,\"x_newer\":{\"k\":[1]},", 1);
    assert_ne!(newer, text);
    std::fs::write(&path, newer).unwrap();
    env.run(&["name", "nn"]).ok();
    env.run(&["name", "--clear", "nn"]).ok();
    let first = std::fs::read_to_string(&path).unwrap().lines().next().unwrap().to_string();
    assert!(first.contains("\"x_newer\":{\"k\":[1]}"), "{first}");
    env.run(&["search", "-q", "-r", "two"]).ok();
    assert_eq!(env.last_users(), ["one"]);
}

/// A question that opens with blank lines titles its session by its first line with words.
#[test]
fn a_question_opening_with_blank_lines_titles_its_session_by_its_words() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "\n  \nwhat is rust\nand more"]).ok();
    let run = env.run(&["sessions"]);
    assert!(run.ok().stdout.contains("what is rust"), "{run}");
}

/// `cca rm` takes a session's lock file away; a cca that had it open, waiting, and then locks
/// it after a `cca restore`, holds no lock the next cca sees: it must take the lock again, so
/// that one writer at a time stays true. Here the waiting turn is stopped while the session is
/// removed and restored (as a slow machine would leave it), then a third asks with --no-wait.
#[test]
fn a_turn_that_waited_through_rm_and_restore_is_still_the_one_writer() {
    use std::process::Stdio;
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let id =
        env.session_files()[0].trim_start_matches("session_").trim_end_matches(".md").to_string();
    let spawn = |script: &str, question: &str| {
        let mut cmd = env.command();
        cmd.args(["search", "-q", "-s", &id, question])
            .env("FAKE_SCRIPT", script)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Guard(cmd.spawn().unwrap())
    };
    let holder = spawn("say a;sleep 1500;say a-end", "turn a");
    // An engine started is a turn holding the session.
    let started = |n: usize| assert!(wait_until(TIMEOUT, || env.calls().len() >= n), "no turn");
    started(2);
    let waiting = spawn("say b;sleep 3000;say b-end", "turn b");
    std::thread::sleep(std::time::Duration::from_millis(300));
    waiting.signal(rustix::process::Signal::STOP);
    env.run(&["rm", &id]).ok();
    assert!(holder.finish().status.success());
    env.run(&["restore", &id]).ok();
    waiting.signal(rustix::process::Signal::CONT);
    // The waiting turn takes the lock again and answers; meanwhile the session is busy.
    started(3);
    env.run(&["search", "-q", "-s", &id, "--no-wait", "probe"]).code(75);
    assert!(waiting.finish().status.success());
    let shown = env.run(&["show", "--raw", &id]).ok().stdout.clone();
    assert!(!shown.contains("interrupted"), "{shown}");
    assert!(shown.contains("b-end"), "{shown}");
}

/// Naming a session never waits for a turn in another: the names' lock is taken after the
/// session's own.
#[test]
fn naming_a_session_does_not_wait_for_a_turn_in_another() {
    use std::process::Stdio;
    let env = TestEnv::new();
    env.run_with(&["search", "-q", "one"], None, &[("CCA_NOW", "2026-11-21T10:00:00Z")]).ok();
    env.run_with(&["search", "-q", "two"], None, &[("CCA_NOW", "2026-11-21T11:00:00Z")]).ok();
    let (one, two) = ("20261121-100000", "20261121-110000");
    let mut cmd = env.command();
    cmd.args(["search", "-q", "-s", one, "stuck"])
        .env("FAKE_SCRIPT", "say x;hang")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let turn = Guard(cmd.spawn().unwrap());
    assert!(wait_until(TIMEOUT, || env.calls().len() >= 3), "the turn started");
    let mut cmd = env.command();
    cmd.args(["name", one, "waits"]).stdout(Stdio::null()).stderr(Stdio::null());
    let waiting = Guard(cmd.spawn().unwrap());
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Ends while the turn in the other session still runs (or the run's timeout fails it).
    env.run(&["name", two, "free"]).ok();
    turn.signal(rustix::process::Signal::KILL);
    let _ = turn.finish();
    let _ = waiting.finish();
}

/// `latest` made by hand as an absolute link, or as `./session_ID.md`, is the session it names:
/// followed, and moved on when that session is removed.
#[test]
fn latest_however_it_names_a_session_is_moved_on_when_it_goes() {
    let env = TestEnv::new();
    env.run_with(&["search", "-q", "one"], None, &[("CCA_NOW", "2026-11-21T10:00:00Z")]).ok();
    env.run_with(&["search", "-q", "two"], None, &[("CCA_NOW", "2026-11-21T11:00:00Z")]).ok();
    let sessions = env.cca_home.join("sessions");
    let latest = sessions.join("latest");
    for target in
        [sessions.join("session_20261121-110000.md"), "./session_20261121-110000.md".into()]
    {
        std::fs::remove_file(&latest).unwrap();
        std::os::unix::fs::symlink(&target, &latest).unwrap();
        let run = env.run(&["show", "--raw"]);
        assert!(run.ok().stdout.contains("two"), "{run}");
    }
    env.run(&["rm", "20261121-110000"]).ok().stderr_has("20261121-100000");
    let run = env.run(&["show", "--raw"]);
    assert!(run.ok().stdout.contains("# one"), "{run}");
    // A `latest` that is a huge file is said to be no session's name, not echoed.
    std::fs::remove_file(&latest).unwrap();
    std::fs::write(&latest, "x".repeat(100_000)).unwrap();
    let run = env.run(&["show"]);
    run.code(1).stderr_has("is neither a link nor a session file's name");
    assert!(run.stderr.len() < 2_000, "{}", run.stderr.len());
}
