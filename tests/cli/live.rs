//! A turn after a clear or a compaction reads only the live context (`$CCA_HOME/live/` says where
//! it starts), and still sends exactly what the file holds: edits by hand, appends by others,
//! and an index that no longer fits the file change nothing about what is sent.

use cca::transcript::{self, Kind, Meta, Record};

use crate::common::*;

fn live_index(env: &TestEnv) -> std::path::PathBuf {
    env.cca_home.join("live").join(format!("{STAMP}.json"))
}

/// A session of two exchanges, cleared, then two more.
fn cleared_session(env: &TestEnv) {
    env.converse(&["one", "two"], &[]);
    env.run(&["clear"]).ok();
    env.run(&["search", "-q", "-r", "three"]).ok();
    env.run(&["search", "-q", "-r", "four"]).ok();
    assert_eq!(env.last_users(), ["three"]);
    assert!(live_index(env).is_file(), "the clear left an index of the live context");
}

/// A clear of a session with nothing to send from before (cleared already) writes nothing.
#[test]
fn a_clear_with_nothing_to_clear_changes_nothing() {
    let env = TestEnv::new();
    env.converse(&["one"], &[]);
    env.run(&["clear"]).ok().stderr_has(&format!("cleared {STAMP}"));
    let before = std::fs::read(env.session_path(STAMP)).unwrap();
    env.run(&["clear"]).ok().stderr_has("nothing to clear");
    assert_eq!(std::fs::read(env.session_path(STAMP)).unwrap(), before);
    env.run(&["search", "-q", "-r", "two"]).ok();
    assert!(env.last_users().is_empty());
}

#[test]
fn a_hand_edit_before_the_clear_is_honoured() {
    let env = TestEnv::new();
    cleared_session(&env);
    // By hand, before the clear: an answer rewritten, and the clear taken out.
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path).unwrap();
    let clear = text.find("\n<!-- cca:clear").unwrap();
    let clear_end = clear + 1 + text[clear + 1..].find("<!-- cca:end -->\n").unwrap() + 17;
    let edited = format!("{}{}", &text[..clear], &text[clear_end..])
        .replace("ECHO: two", "the second answer, rewritten");
    std::fs::write(&path, edited).unwrap();
    env.run(&["search", "-q", "-r", "five"]).ok();
    assert_eq!(env.last_users(), ["one", "two", "three", "four"]);
    let stdin = stdin_of(&env.last_call()).to_string();
    assert!(stdin.contains("\nthe second answer, rewritten\n"), "{stdin}");

    // Put back by hand: the next turn starts after the clear again.
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find("\n<!-- cca:user").unwrap();
    let three = text[at..].find("\n## 3. You").map(|n| at + n).unwrap();
    let three = text[..three].rfind("\n<!-- cca:user").unwrap();
    let clear = transcript::render_record(
        &Record { kind: Kind::Clear, meta: Meta::default(), content: String::new() },
        3,
    );
    std::fs::write(&path, format!("{}{clear}{}", &text[..three], &text[three..])).unwrap();
    env.run(&["search", "-q", "-r", "six"]).ok();
    assert_eq!(env.last_users(), ["three", "four", "five"]);
}

#[test]
fn an_index_that_no_longer_fits_the_file_is_not_trusted() {
    let env = TestEnv::new();
    cleared_session(&env);
    let then = std::fs::read(live_index(&env)).unwrap();
    env.run(&["clear"]).ok();
    env.run(&["search", "-q", "-r", "five"]).ok();
    env.run(&["search", "-q", "-r", "six"]).ok();
    assert_eq!(env.last_users(), ["five"]);

    // An index from before the second clear: its offset is stale, and so is its stamp.
    std::fs::write(live_index(&env), &then).unwrap();
    env.run(&["search", "-q", "-r", "seven"]).ok();
    assert_eq!(env.last_users(), ["five", "six"]);

    // Not an index at all, or another session's.
    std::fs::write(live_index(&env), "{\"format\":1").unwrap();
    env.run(&["search", "-q", "-r", "eight"]).ok();
    assert_eq!(env.last_users(), ["five", "six", "seven"]);
    let other =
        std::fs::read_to_string(live_index(&env)).unwrap().replace(STAMP, "20261121-000000");
    std::fs::write(live_index(&env), other).unwrap();
    env.run(&["search", "-q", "-r", "nine"]).ok();
    assert_eq!(env.last_users(), ["five", "six", "seven", "eight"]);
}

#[test]
fn two_terminals_appending_after_a_clear_take_turns() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "start"]).ok();
    env.run(&["clear"]).ok();
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = ["left", "right"]
            .into_iter()
            .map(|q| {
                let env = &env;
                s.spawn(move || {
                    env.run_with(
                        &["search", "-q", "-r", q],
                        None,
                        &[("FAKE_SCRIPT", "sleep 150;echo")],
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in &runs {
        run.ok();
    }
    // The first saw no history; the second saw the first's exchange, complete.
    let mut seen: Vec<Vec<String>> =
        env.calls()[1..].iter().map(|c| history_users(stdin_of(c))).collect();
    seen.sort();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].is_empty(), "{seen:?}");
    assert!(seen[1] == ["left"] || seen[1] == ["right"], "{seen:?}");
    env.run(&["search", "-q", "-r", "after"]).ok();
    let mut users = env.last_users();
    users.sort();
    assert_eq!(users, ["left", "right"]);
}

#[test]
fn records_appended_by_another_program_are_read() {
    let env = TestEnv::new();
    cleared_session(&env);
    // As an older cca, or a script, would append them: without touching the index.
    let exchange = [
        Record { kind: Kind::User, meta: Meta::default(), content: "from elsewhere".into() },
        Record { kind: Kind::Assistant, meta: Meta::default(), content: "an answer".into() },
    ];
    let text: String = exchange.iter().map(|r| transcript::render_record(r, 3)).collect();
    let mut file = std::fs::OpenOptions::new().append(true).open(env.session_path(STAMP)).unwrap();
    std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    env.run(&["search", "-q", "-r", "five"]).ok();
    assert_eq!(env.last_users(), ["three", "four", "from elsewhere"]);
    let run = env.run(&["sessions", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(listed[0]["turns"], 6);
}
