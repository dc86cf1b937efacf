//! Standby (docs/DESIGN.md, "Standby") with the fake claude: what waits, which turn takes it,
//! and what ends it. The real engines' takeovers are in tests/real/standby.rs.

use std::time::Duration;

use crate::common::*;

/// The process group of the claude waiting on standby, once it is ready; `None` when none is.
pub(super) fn waiting(env: &TestEnv) -> Option<i32> {
    let out = env.run(&["standby"]).ok().stdout.clone();
    let line = out.lines().find(|l| l.starts_with("claude") && !l.contains("starting"))?;
    line.rsplit_once("process group ")?.1.trim_end_matches(')').parse().ok()
}

pub(super) fn ready(env: &TestEnv) -> i32 {
    let mut group = None;
    let found = wait_until(Duration::from_secs(20), || {
        group = waiting(env);
        group.is_some()
    });
    assert!(found, "a claude waits: {}", env.run(&["standby"]).stdout);
    group.unwrap()
}

/// A fake claude on standby after a first answered turn, and its process group.
pub(super) fn claude_waiting() -> (TestEnv, i32) {
    let env = TestEnv::new();
    env.write_config("standby = \"1m\"\n");
    env.run(&["search", "first"]).ok();
    let group = ready(&env);
    (env, group)
}

pub(super) fn ended(group: i32) -> bool {
    let pid = rustix::process::Pid::from_raw(group).unwrap();
    wait_until(Duration::from_secs(10), || rustix::process::test_kill_process_group(pid).is_err())
}

#[test]
fn nothing_waits_unless_asked_and_the_next_turn_takes_what_does() {
    let env = TestEnv::new();
    env.run(&["search", "first"]).ok();
    let out = env.run(&["standby"]).ok().stdout.clone();
    assert!(out.contains("nothing waits on standby") && out.contains("standby is off"), "{out}");
    assert!(!env.cca_home.join("standby").exists(), "off leaves nothing behind");

    env.write_config("standby = \"1m\"\n");
    let config = env.run(&["config"]).ok().stdout.clone();
    assert!(config.contains("engines.claude.standby") && config.contains("1m"), "{config}");
    env.run(&["search", "-r", "second"]).ok();
    let group = ready(&env);
    let run = env.run(&["search", "-r", "third"]);
    assert_eq!(run.ok().stdout.trim_end(), "ECHO: third");
    // The waiting claude took it: started before the question, given it as its first line.
    let taken = env.last_call();
    // (The fake engines' history is inline: the first message holds it, as a cold start's stdin.)
    let first_message = stdin_of(&taken);
    assert!(first_message.ends_with("<user_query>\nthird\n</user_query>\n"), "{first_message}");
    assert!(first_message.contains("<user_turn>\nsecond\n</user_turn>"), "{first_message}");
    assert!(argv_of(&taken).contains(&"--no-session-persistence"), "{taken}");
    assert!(ended(group), "the taken claude ended with its turn");
    let next = ready(&env);
    assert_ne!(next, group, "the turn left a new one");
    assert_eq!(env.run(&["standby", "--end"]).ok().stdout, "ended: claude\n");
    assert!(ended(next));
    assert!(env.run(&["standby"]).stdout.contains("nothing waits on standby"));
    assert_eq!(env.run(&["standby", "--end"]).ok().stdout, "nothing waited on standby\n");
}

/// A turn another start would serve (another model) starts its own engine, and the one waiting
/// ends; so does one whose engine program changed on disk.
#[test]
fn a_turn_it_does_not_fit_and_an_upgraded_engine_end_it() {
    let (env, group) = claude_waiting();
    env.run(&["search", "-r", "-m", "opus", "second"]).ok();
    assert!(ended(group), "the stale one ended");
    let call = env.last_call();
    assert!(argv_of(&call).contains(&"--model=opus"), "a cold start: {call}");
    assert!(stdin_of(&call).contains("second"), "{call}");

    let group = ready(&env);
    // Another file where the program was (an upgrade in place).
    let program = env.bin.join("claude");
    std::fs::remove_file(&program).unwrap();
    std::fs::copy(fake_engine(), &program).unwrap();
    assert!(ended(group), "an upgraded engine is not kept waiting");
    assert!(waiting(&env).is_none());
}

/// One waits per engine: a turn in another session (another context for claude) ends the one
/// waiting and leaves its own.
#[test]
fn at_most_one_waits_per_engine() {
    let (env, group) = claude_waiting();
    env.run(&["search", "another session"]).ok();
    assert!(ended(group), "replaced");
    // Left detached: the new one is listed once it is ready.
    assert_ne!(ready(&env), group);
    let out = env.run(&["standby"]).ok().stdout.clone();
    assert_eq!(out.lines().filter(|l| l.starts_with("claude")).count(), 1, "{out}");
    // An engine named for one: a name no engine has is a usage error, not "nothing waits".
    assert!(env.run(&["standby", "--engine", "gemini"]).ok().stdout.contains("nothing waits"));
    for args in [&["standby", "--engine", "claud"][..], &["standby", "--end", "--engine", "claud"]]
    {
        env.run(args).code(2).stderr_has("unknown engine `claud`");
    }
    assert!(env.run(&["standby"]).ok().stdout.starts_with("claude"), "not ended");
    assert_eq!(env.run(&["standby", "--end", "--engine", "claude"]).ok().stdout, "ended: claude\n");
}

/// Turned off, it is not welcome any more: the next turn ends the one left waiting.
#[test]
fn a_turn_with_standby_off_ends_the_one_waiting() {
    let (env, group) = claude_waiting();
    env.write_config("");
    env.run(&["search", "-r", "second"]).ok();
    assert!(ended(group), "ended by a turn with standby off");
    assert!(env.run(&["standby"]).stdout.contains("nothing waits on standby"));
}
