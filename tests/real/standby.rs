//! Standby (docs/DESIGN.md, "Standby"): with `standby` set, an answered one-shot turn leaves the
//! real engine started and waiting, and the next `cca search -r` takes it over.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::common::*;
use super::mock_api::Behavior;
use super::warm::{count_starts_of, starts};
use super::{Real, sent_questions, steer_real};

/// Waits until `cca standby` lists a ready engine of `kind`; returns its process group.
fn ready(r: &Real, kind: &str) -> i32 {
    let mut group = None;
    let listed = wait_until(Duration::from_secs(60), || {
        let out = r.run(&["standby"]).stdout;
        group = out
            .lines()
            .find(|l| l.starts_with(kind) && !l.contains("starting"))
            .and_then(|l| l.rsplit_once("process group ")?.1.trim_end_matches(')').parse().ok());
        group.is_some()
    });
    assert!(listed, "a {kind} waits on standby: {}", r.run(&["standby"]).stdout);
    group.unwrap()
}

/// Whether any process of the group is left.
fn group_alive(group: i32) -> bool {
    let pid = rustix::process::Pid::from_raw(group).unwrap();
    rustix::process::test_kill_process_group(pid).is_ok()
}

/// Runs `cca search ARGS` in `dir`.
fn search_in(r: &Real, dir: &Path, args: &[&str]) -> Run {
    let mut cmd = r.command();
    cmd.current_dir(dir).arg("search").args(args);
    run_command(cmd, None)
}

/// With standby on, a follow-up takes the engine waiting for it: no engine starts for it, it
/// leaves a new one, and its request extends the one before. (How much sooner its first byte
/// comes is measured by `cargo bench -- standby`.)
fn follow_ups_take_the_waiting(engine: &str) {
    let mut r = Real::new();
    let log = count_starts_of(&mut r, engine);
    r.api.set(Behavior::default());
    r.env.write_config(&format!("engine = \"{engine}\"\nstandby = \"5m\"\n"));
    r.run(&["search", "first question"]).ok();
    for n in 1..=3 {
        ready(&r, engine);
        assert_eq!(starts(&log), n + 1, "the first turn's engine, and each one waiting");
        let run = r.run(&["search", "-r", &format!("follow-up {n}")]);
        assert!(run.ok().stdout.contains(&format!("follow-up {n}")), "{run}");
    }
    ready(&r, engine);
    assert_eq!(starts(&log), 5, "each follow-up took the waiting engine, and left a new one");
    let bodies: Vec<_> = r.api.turns().into_iter().map(|t| t.body).collect();
    assert_eq!(bodies.len(), 4);
    let questions = ["first question", "follow-up 1", "follow-up 2", "follow-up 3"];
    assert_eq!(sent_questions(&bodies[3]), questions);
    let doctor = r.run(&["doctor"]).ok().stdout.clone();
    let listed = doctor.lines().find(|l| l.trim_start().starts_with(engine) && l.contains("left"));
    let listed =
        listed.unwrap_or_else(|| panic!("cca doctor lists the waiting {engine}: {doctor}"));
    assert!(listed.contains(r.env.work.to_str().unwrap()) && listed.contains("MiB"), "{listed}");
    assert!(r.run(&["standby", "--end"]).ok().stdout.contains(engine));
    assert!(r.run(&["standby"]).stdout.contains("nothing waits on standby"));
}

#[test]
fn claude_follow_ups_take_the_engine_on_standby() {
    follow_ups_take_the_waiting("claude");
}

#[test]
fn gemini_follow_ups_take_the_engine_on_standby() {
    follow_ups_take_the_waiting("gemini");
}

/// A claude on standby (`standby` this long) after a first answered turn, `question`: the log
/// of claude's starts, and the process group of the one waiting.
fn claude_waiting(standby: &str, question: &str) -> (Real, std::path::PathBuf, i32) {
    engine_waiting("claude", standby, question)
}

/// [`claude_waiting`] for `engine`.
fn engine_waiting(engine: &str, standby: &str, question: &str) -> (Real, std::path::PathBuf, i32) {
    let mut r = Real::new();
    let log = count_starts_of(&mut r, engine);
    r.env.write_config(&format!("engine = \"{engine}\"\nstandby = \"{standby}\"\n"));
    r.api.set(Behavior::default());
    r.run(&["search", question]).ok();
    let group = ready(&r, engine);
    (r, log, group)
}

/// A follow-up from another folder is answered by a claude working there: the one waiting in
/// the first folder ends, unused.
#[test]
fn a_follow_up_from_another_folder_starts_there() {
    let (r, log, waiting) = claude_waiting("5m", "first question");
    let other = r.env.root.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    search_in(&r, &other, &["-r", "second question"]).ok();
    assert!(wait_until(Duration::from_secs(10), || !group_alive(waiting)), "the stale one ended");
    assert_eq!(starts(&log), 4, "first turn, its standby, the follow-up's own, its standby");
    let body = &r.api.turns()[1].body;
    let other = other.canonicalize().unwrap();
    assert!(body.to_string().contains(other.to_str().unwrap()), "claude works in {other:?}");
    r.run(&["standby", "--end"]).ok();
}

/// Ctrl-C while a taken engine answers: the turn is recorded as interrupted, and nothing of the
/// engine is left running.
#[test]
fn ctrl_c_in_a_taken_turn_leaves_nothing_running() {
    use rustix::process::Signal;
    for (engine, signal) in
        [("claude", Signal::INT), ("claude", Signal::KILL), ("gemini", Signal::INT)]
    {
        let (r, _, group) = engine_waiting(engine, "5m", "first question");
        let go = r.env.root.path().join("go");
        r.api.set(Behavior { hold: Some(go), ..Behavior::default() });
        let mut cmd = r.command();
        cmd.args(["search", "-r", "second question"]);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let cca = Guard(cmd.spawn().unwrap());
        assert!(wait_until(TIMEOUT, || r.api.turns().len() == 2), "the question reached {engine}");
        cca.signal(signal);
        let out = cca.finish();
        assert!(wait_until(Duration::from_secs(10), || !group_alive(group)), "{engine} {signal:?}");
        let listed = r.run(&["standby"]).stdout.clone();
        assert!(listed.contains("nothing waits"), "no new standby, nothing answered: {listed}");
        if signal == Signal::INT {
            assert_eq!(shell_status(out.status), 130);
            let kinds: Vec<_> = r.transcript().records.into_iter().map(|rec| rec.kind).collect();
            use cca::transcript::Kind::{Assistant, Interrupted, User};
            assert_eq!(kinds, [User, Assistant, User, Interrupted], "the attempt is recorded");
        }
    }
}

/// The idle time ends a waiting engine; with standby off (the default) nothing is left at all.
#[test]
fn the_idle_time_ends_it_and_off_leaves_nothing() {
    let (r, _, group) = claude_waiting("3s", "first question");
    assert!(wait_until(Duration::from_secs(15), || !group_alive(group)), "ended when idle");
    assert!(r.run(&["standby"]).stdout.contains("nothing waits on standby"));

    r.env.write_config("engine = \"claude\"\n");
    r.run(&["search", "-r", "second question"]).ok();
    let doctor = r.run(&["doctor"]).ok().stdout.clone();
    let took: f64 = doctor
        .split_once("claude   off; it takes ")
        .and_then(|(_, rest)| rest.split_once(" s to start")?.0.parse().ok())
        .unwrap_or_else(|| panic!("cca doctor times claude's start: {doctor}"));
    // Suggested when claude takes over 0.3 s to start (the printed time is rounded).
    let suggested = doctor.contains("standby = \"10m\"") && doctor.contains("[engines.claude]");
    if (took - 0.3).abs() > 0.005 {
        assert_eq!(suggested, took > 0.3, "{doctor}");
    }
    let out = r.run(&["standby"]).ok().stdout.clone();
    assert!(out.contains("nothing waits") && out.contains("standby is off"), "{out}");
    let dir = r.env.cca_home.join("standby");
    let left = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert!(left <= 1, "only the lock of the ended one may be left in {dir:?}");
}

/// A transcript changed since the engine was started (an edit by hand) is not what it was
/// started with: the turn starts cold from the transcript, and the waiting engine ends.
#[test]
fn an_edited_transcript_starts_cold() {
    let (r, log, group) = claude_waiting("5m", "first question");
    let path = r.run(&["path"]).ok().stdout.trim().to_string();
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replace("first question", "first question, edited");
    assert_ne!(text, edited);
    std::fs::write(&path, edited).unwrap();
    r.run(&["search", "-r", "second question"]).ok();
    assert!(wait_until(Duration::from_secs(10), || !group_alive(group)), "the stale one ended");
    ready(&r, "claude");
    assert_eq!(starts(&log), 4, "the follow-up started its own claude");
    let body = &r.api.turns()[1].body;
    assert_eq!(sent_questions(body), ["first question, edited", "second question"]);
    r.run(&["standby", "--end"]).ok();
}

/// A steer reaches a taken claude while it answers, as it reaches one started for the turn.
#[test]
fn a_steer_reaches_a_taken_claude() {
    let (r, _, _) = claude_waiting("5m", "review the auth module");
    let run = steer_real(&r, &["-r", "and the session module"], Behavior::default(), "be brief");
    run.ok().stderr_has("cca: steer taken: be brief");
    assert_eq!(run.stdout, "ECHO: and the session module\n\nECHO: be brief");
    let bodies: Vec<_> = r.api.turns().into_iter().map(|t| t.body).collect();
    assert_eq!(
        sent_questions(&bodies[2]),
        ["review the auth module", "and the session module", "be brief"]
    );
    r.run(&["standby", "--end"]).ok();
}
