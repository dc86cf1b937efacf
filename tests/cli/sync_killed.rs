//! Syncs killed part way (tests/cli/sync.rs has the machines): at any point while another
//! machine syncs, in the middle of a merge, or while the records merged are being applied.
//! The next sync completes what the killed one began, sends nothing twice and makes no fork.

use std::path::Path;
use std::process::{Command, Stdio};

use super::sync::{ID, Machine, git, two_machines};
use crate::common::*;

#[test]
fn syncs_killed_at_any_point_are_completed_by_the_next_and_race_without_loss() {
    let (a, b, _remote) = two_machines();
    for round in 0..6u64 {
        a.run(&[",", "-q", &format!("laptop question {round}")]).ok();
        b.ask(
            &format!("2026-11-2{}T08:00:00Z", 2 + round % 7),
            &format!("desktop session {round}"),
            false,
        );
        // Both at once, one of them killed part way.
        let start = |machine: &Machine| {
            let mut command = machine.env.command();
            command.args(["sync", "-q"]).stdout(Stdio::piped()).stderr(Stdio::piped());
            Guard(command.spawn().unwrap())
        };
        let (killed, racing) = (start(&a), start(&b));
        std::thread::sleep(std::time::Duration::from_millis(15 * round));
        killed.signal(rustix::process::Signal::KILL);
        let _ = killed.finish();
        let _ = racing.finish();
    }
    for machine in [&a, &b, &a, &b] {
        machine.sync().ok();
    }
    assert_eq!(a.sessions(), b.sessions());
    let all: String = a.sessions().into_iter().map(|(_, t)| t).collect();
    for round in 0..6 {
        assert!(all.contains(&format!("laptop question {round}")), "round {round}");
        assert!(all.contains(&format!("desktop session {round}")), "round {round}");
    }
    // Nothing was sent twice: no fork was made.
    assert!(
        a.sessions().iter().all(|(name, _)| !name.contains("laptop") && !name.contains("desktop"))
    );
}

/// A merge killed part way leaves the other machine's newer logs in the work tree, unrecorded:
/// a new one untracked, a grown one as a local change. The next sync merges all the same.
#[test]
fn a_sync_merges_over_what_a_killed_merge_left_in_the_work_tree() {
    let (a, b, _remote) = two_machines();
    b.ask("2026-11-22T08:00:00Z", "desktop first", false);
    b.sync().ok();
    a.sync().ok();
    b.ask("2026-11-22T09:00:00Z", "desktop grown", true);
    b.ask("2026-11-22T10:00:00Z", "desktop new", false);
    b.sync().ok();
    let repo = a.env.cca_home.join("sync/repo");
    let repo = repo.to_str().unwrap();
    git(&["-C", repo, "fetch", "-q", "origin", "+refs/heads/cca:refs/remotes/origin/cca"]);
    // What a fast-forward writes before it moves the branch: the fetched files, unrecorded.
    let out = Command::new("git")
        .args(["-C", repo, "diff", "--name-only", "HEAD", "refs/remotes/origin/cca"])
        .output()
        .unwrap();
    let changed: Vec<String> =
        String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
    let tracked = |path: &str| {
        Command::new("git")
            .args(["-C", repo, "cat-file", "-e", &format!("HEAD:{path}")])
            .status()
            .unwrap()
            .success()
    };
    assert!(changed.iter().any(|p| tracked(p)), "a grown log: {changed:?}");
    assert!(changed.iter().any(|p| !tracked(p)), "a new log: {changed:?}");
    for path in &changed {
        let out = Command::new("git")
            .args(["-C", repo, "show", &format!("refs/remotes/origin/cca:{path}")])
            .output()
            .unwrap();
        let file = Path::new(repo).join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, out.stdout).unwrap();
    }
    a.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
    let all: String = a.sessions().into_iter().map(|(_, t)| t).collect();
    assert!(all.contains("desktop grown") && all.contains("desktop new"), "{all}");
}

/// A receive killed after it made a session new here and went on with it, and after it moved
/// a session here on by two records, but before it saved what it had done: the next sync
/// finds those files at records it has not counted, counts them, and makes no fork.
#[test]
fn a_receive_killed_before_it_saved_its_state_is_counted_not_forked() {
    let (a, b, _remote) = two_machines();
    a.sync().ok();
    // Two records of each session, each sent by a sync of its own.
    b.ask("2026-11-22T08:00:00Z", "desktop one", false);
    b.run_at(&["search", "-q", "--session", ID, "desktop on the laptop's"], "2026-11-22T08:01:00Z")
        .ok();
    b.sync().ok();
    b.run_at(&["search", "-q", "--session", ID, "and again"], "2026-11-22T08:02:00Z").ok();
    b.ask("2026-11-22T08:03:00Z", "desktop two", true);
    b.sync().ok();
    let state = a.env.cca_home.join("sync/state.json");
    let before = std::fs::read_to_string(&state).unwrap();
    a.sync().ok();
    let applied = a.sessions();
    assert_eq!(applied, b.sessions());
    // What the kill leaves: the merge made and the files written, the state as it was when the
    // receive began.
    let mut killed: serde_json::Value = serde_json::from_str(&before).unwrap();
    killed["receiving"] = true.into();
    std::fs::write(&state, killed.to_string()).unwrap();
    let run = a.sync();
    run.ok();
    assert_eq!(a.sessions(), applied, "{run}");
    b.sync().ok();
    a.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
    let names: Vec<String> = a.sessions().into_iter().map(|(name, _)| name).collect();
    assert_eq!(names.len(), 2, "no fork: {names:?}");
}
