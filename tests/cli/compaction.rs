//! Context that stays affordable: token estimates, automatic and manual compaction, and the
//! visible size of what is sent.

use cca::transcript::Kind;

use crate::common::*;

/// A small budget and a tiny prompt, so that a few exchanges cross the threshold.
fn small_budget(env: &TestEnv) {
    std::fs::create_dir_all(env.cca_home.join("prompts")).unwrap();
    std::fs::write(env.cca_home.join("prompts/tiny.md"), "be brief").unwrap();
    env.write_config(
        "prompt = \"tiny\"\n\
         [compaction]\nthreshold = 0.5\nkeep_recent = 1\nwarn_tokens = 100000\n\
         [engines.claude]\ncontext_budget = 500\n",
    );
}

fn records(env: &TestEnv) -> Vec<cca::transcript::Record> {
    let (t, problems) = cca::transcript::parse(&env.latest()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    t.records
}

/// Questions `prefix-1` to `prefix-n`.
fn questions(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}-{i}")).collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn compactions(env: &TestEnv) -> Vec<cca::transcript::Record> {
    records(env).into_iter().filter(|r| r.kind == Kind::Compaction).collect()
}

#[test]
fn crossing_the_threshold_twice_folds_the_first_summary_in() {
    let env = TestEnv::new();
    small_budget(&env);
    let script = [("FAKE_SCRIPT", "echo-pad 300")];
    env.run_with(&["search", "-q", "c-1"], None, &script).ok();
    let mut first_compaction_at = None;
    for n in 2..=9 {
        let run = env.run_with(&["search", "-r", &format!("c-{n}")], None, &script);
        run.ok();
        if run.stderr.contains("summarising turns") && first_compaction_at.is_none() {
            first_compaction_at = Some(n);
            assert!(run.stderr.contains("are now a summary"), "{run}");
        }
    }
    let compactions = compactions(&env);
    assert!(compactions.len() >= 2, "{} compactions", compactions.len());
    let (one, two) = (&compactions[0], &compactions[1]);
    assert_eq!(one.meta.first, Some(1));
    assert!(one.content.starts_with("SUMMARY[c-1"), "{}", one.content);
    assert!(one.meta.bytes_after < one.meta.bytes_before, "{:?}", one.meta);
    assert_eq!(one.meta.engine.as_deref(), Some("claude"));
    // The second stands for everything from turn 1 and carries the first summary inside it.
    assert_eq!(two.meta.first, Some(1));
    assert!(two.meta.through > one.meta.through);
    assert!(two.content.contains(&format!("folded{{{}}}", one.content)), "{}", two.content);

    // Every turn after a compaction sends the summary and only the recent exchanges.
    let calls = env.calls();
    let last = stdin_of(calls.last().unwrap());
    let history = tag(last, "conversation_history").unwrap();
    let summary = tag(history, "conversation_summary").expect("a summary in the context");
    assert!(summary.starts_with("SUMMARY["), "{summary}");
    let folded = compactions.last().unwrap().meta.through.unwrap();
    for n in 1..=folded {
        assert!(
            !history.contains(&format!("<user_turn>\nc-{n}\n")),
            "turn {n} was folded: {history}"
        );
    }
    assert!(history.matches("<user_turn>").count() <= 3, "{history}");
    // The file keeps every turn.
    let users = records(&env).iter().filter(|r| r.kind == Kind::User).count();
    assert_eq!(users, 9);
}

#[test]
fn bytes_per_turn_stay_bounded() {
    let env = TestEnv::new();
    small_budget(&env);
    env.converse(&strs(&questions("b", 20)), &[("FAKE_SCRIPT", "echo-pad 300")]);
    let sizes: Vec<usize> = env
        .calls()
        .iter()
        .map(stdin_of)
        .filter(|s| !s.contains("You condense"))
        .map(str::len)
        .collect();
    let budget_bytes = 500.0 * 3.5;
    for (n, size) in sizes.iter().enumerate() {
        assert!((*size as f64) < budget_bytes, "turn {} sent {size} bytes", n + 1);
    }
}

/// One turn is "turn 1", not "turns 1-1": in the message, in `cca show` (which says after which
/// turn the summary was made, as it is drawn there) and in the transcript.
#[test]
fn a_summary_of_one_turn_says_turn_1() {
    let env = TestEnv::new();
    // Answers long enough that a summary is shorter than the turn it stands for.
    env.converse(&strs(&questions("m", 2)), &[("FAKE_SCRIPT", "echo-pad 400")]);
    let run = env.run(&["compact", "--keep", "1"]);
    run.ok().stderr_has("turn 1 of 20261121-101500 is now a summary");
    let show = env.run(&["show"]);
    assert!(
        show.stdout.contains("── summary of turn 1, made after turn 2, sent in their place"),
        "{show}"
    );
    let file = std::fs::read_to_string(env.session_path(STAMP)).unwrap();
    assert!(file.contains("### Summary of turn 1 (sent in their place)"), "{file}");
    assert!(!file.contains("turns 1-1") && !show.stdout.contains("turns 1-1"), "{file}");
}

/// A summary no shorter than what it would stand for is refused, nothing changed; a session
/// whose engine is no longer declared is summarised by another, said so.
#[test]
fn a_summary_that_would_grow_the_context_is_refused() {
    let env = TestEnv::new();
    env.converse(&strs(&questions("m", 3)), &[]);
    let before = std::fs::read_to_string(env.session_path(STAMP)).unwrap();
    env.run_with(&["compact", "--keep", "1"], None, &[("FAKE_SCRIPT", "echo-pad 100000")])
        .code(1)
        .stderr_has("no shorter, so nothing was changed")
        .stderr_has("cca clear");
    assert_eq!(std::fs::read_to_string(env.session_path(STAMP)).unwrap(), before);

    let gone = before.replacen("\"engine\":\"claude\"", "\"engine\":\"gone\"", 1);
    assert_ne!(gone, before);
    std::fs::write(env.session_path(STAMP), gone).unwrap();
    // (The summary is refused again, the turns being short: the note comes first.)
    env.run_with(&["compact", "--keep", "1"], None, &[("FAKE_SCRIPT", "echo-pad 400")])
        .code(1)
        .stderr_has("written by gone, which is no engine here: claude summarises");
}

#[test]
fn manual_compaction_and_a_hand_edited_summary() {
    let env = TestEnv::new();
    env.converse(&strs(&questions("m", 5)), &[]);
    let run = env.run(&["compact", "--keep", "2"]);
    run.ok().stderr_has("turns 1-3 of 20261121-101500 are now a summary");
    let c = compactions(&env);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].meta.first, c[0].meta.through), (Some(1), Some(3)));
    assert_eq!(c[0].content, "SUMMARY[m-1 | m-2 | m-3]");

    env.run(&["search", "-q", "-r", "m-6"]).ok();
    let history = tag(stdin_of(&env.last_call()), "conversation_history").unwrap().to_string();
    assert!(
        history
            .contains("<conversation_summary>\nSUMMARY[m-1 | m-2 | m-3]\n</conversation_summary>"),
        "{history}"
    );
    assert_eq!(env.last_users(), ["m-4", "m-5"]);

    // A hand edit of the summary is what the next turn sends.
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("SUMMARY[m-1 | m-2 | m-3]", "my own summary");
    std::fs::write(&path, text).unwrap();
    env.run(&["search", "-q", "-r", "m-7"]).ok();
    let history = tag(stdin_of(&env.last_call()), "conversation_history").unwrap().to_string();
    assert!(
        history.contains("<conversation_summary>\nmy own summary\n</conversation_summary>"),
        "{history}"
    );

    let show = env.run(&["show"]);
    assert!(
        show.stdout.contains("── summary of turns 1-3, made after turn 5, sent in their place"),
        "{show}"
    );
    env.run(&["compact", "--keep", "10"]).ok().stderr_has("nothing to compact");
}

#[test]
fn no_compact_and_the_config_switch() {
    for (config_off, flag) in [(false, true), (true, false)] {
        let env = TestEnv::new();
        small_budget(&env);
        if config_off {
            let config = std::fs::read_to_string(env.cca_home.join("config.toml")).unwrap();
            env.write_config(&config.replace("[compaction]\n", "[compaction]\nenabled = false\n"));
        }
        let script = [("FAKE_SCRIPT", "echo-pad 300")];
        env.run_with(&["search", "-q", "n-1"], None, &script).ok();
        for n in 2..=8 {
            let query = format!("n-{n}");
            let mut args = vec!["search", "-q", "-r"];
            if flag {
                args.push("--no-compact");
            }
            args.push(query.as_str());
            env.run_with(&args, None, &script).ok();
        }
        assert!(compactions(&env).is_empty());
        assert_eq!(env.last_users(), questions("n", 7));
    }
}

#[test]
fn a_failed_compaction_changes_nothing_and_says_so() {
    let env = TestEnv::new();
    small_budget(&env);
    let script = [("FAKE_SCRIPT", "no-summary;echo-pad 300")];
    env.run_with(&["search", "-q", "f-1"], None, &script).ok();
    let mut warned = 0;
    for n in 2..=6 {
        let run = env.run_with(&["search", "-r", &format!("f-{n}")], None, &script);
        run.ok();
        assert_eq!(
            run.stdout.lines().next().unwrap().split(' ').nth(1),
            Some(format!("f-{n}").as_str()),
            "the turn went ahead"
        );
        if run.stderr.contains("compaction failed, nothing changed") {
            warned += 1;
            assert!(run.stderr.contains("summariser down"), "{run}");
        }
    }
    assert!(warned > 0, "a compaction was attempted and failed");
    assert!(compactions(&env).is_empty());
    assert_eq!(env.last_users(), questions("f", 5));
}

#[test]
fn a_large_turn_is_announced_with_its_estimate() {
    let env = TestEnv::new();
    env.write_config("[compaction]\nwarn_tokens = 100\n");
    let big = "word ".repeat(200);
    let run = env.run(&["search", &big]);
    run.ok();
    assert!(run.stderr.contains("cca: sending about") && run.stderr.contains("tokens"), "{run}");
    let run = env.run(&["search", "-q", "-r", "again"]);
    run.ok();
    assert!(!run.stderr.contains("sending about"), "-q keeps quiet: {run}");
}

#[test]
fn show_and_sessions_report_live_and_full_sizes() {
    let env = TestEnv::new();
    env.converse(&strs(&questions("s", 5)), &[("FAKE_SCRIPT", "echo-pad 2000")]);
    let before: serde_json::Value =
        serde_json::from_str(&env.run(&["sessions", "--json"]).stdout).unwrap();
    env.run(&["compact", "--keep", "1"]).ok();
    let after: serde_json::Value =
        serde_json::from_str(&env.run(&["sessions", "--json"]).stdout).unwrap();
    let (live_before, live_after) =
        (before[0]["live_bytes"].as_u64().unwrap(), after[0]["live_bytes"].as_u64().unwrap());
    assert!(live_after * 2 < live_before, "{live_before} -> {live_after}");
    assert!(after[0]["full_bytes"].as_u64().unwrap() > before[0]["full_bytes"].as_u64().unwrap());
    assert!(after[0]["live_tokens_estimate"].as_u64().unwrap() > 0);
    let show = env.run(&["show"]);
    assert!(
        show.stdout.contains("context sent next turn:")
            && show.stdout.contains("tokens); the file:"),
        "{show}"
    );
}
