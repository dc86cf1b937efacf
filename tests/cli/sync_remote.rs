//! Sync's faults on the remote's side (tests/cli/sync.rs has the machines): a remote that
//! cannot be reached, named relative to here, tampered with, changed by hand, set back, or
//! emptied and made again.

use super::sync::{
    ID, Machine, bare_remote_at, clone_and_find_log_of_two, find_logs, git, two_machines,
};

/// A folder named from where cca runs is made absolute (git runs in the clone, and later syncs
/// from anywhere); an empty remote is a usage error.
#[test]
fn a_remote_folder_named_relative_to_here_is_made_absolute_and_an_empty_one_refused() {
    let a = Machine::new("laptop");
    a.ask("2026-11-21T10:15:00Z", "where does the retry live", false);
    a.run(&["sync", "init", "  "]).code(2).stderr_has("the remote is empty");
    let remote = a.env.work.join("remote.git");
    bare_remote_at(&remote);
    a.run(&["sync", "init", "./remote.git"])
        .ok()
        .stderr_has(&format!("now syncs with {}", remote.display()));
    let status = a.run(&["sync", "status"]);
    assert!(status.ok().stdout.contains(&remote.display().to_string()), "{status}");
    a.sync().ok().stderr_has("up to date");
}

#[test]
fn a_tampered_record_or_a_rewritten_remote_is_an_error_and_changes_nothing_here() {
    let (a, b, remote) = two_machines();
    a.run(&[",", "-q", "a second question"]).ok();
    a.sync().ok();
    // Someone with write access to the remote changes a byte of A's new record.
    let work = a.env.root.path().join("tamper");
    let work_dir = work.to_str().unwrap();
    let log = clone_and_find_log_of_two(&remote, &work);
    let honest = std::fs::read_to_string(&log).unwrap();
    let (first, second) = honest.trim_end().split_once('\n').unwrap();
    let mut bytes = second.as_bytes().to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] = if bytes[middle] == b'A' { b'B' } else { b'A' };
    std::fs::write(&log, format!("{first}\n{}\n", String::from_utf8(bytes).unwrap())).unwrap();
    let commit = |message: &str| {
        git(&[
            "-C",
            work_dir,
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@x",
            "commit",
            "-qam",
            message,
        ]);
        git(&["-C", work_dir, "push", "-q", "-f", "origin", "cca"]);
    };
    commit("tampered");
    // Meanwhile A starts another conversation: the bad line holds back its session alone.
    a.ask("2026-11-21T11:00:00Z", "an unrelated question", false);
    a.sync().ok();
    let before = b.text(ID);
    b.sync().code(1).stderr_has("cannot be decrypted").stderr_has("new here: 20261121-110000");
    b.sync().code(1).stderr_has("cannot be decrypted").stderr_has("every other conversation");
    assert_eq!(b.text(ID), before);
    // Put right, the record is taken.
    std::fs::write(&log, &honest).unwrap();
    commit("put right");
    b.sync().ok().stderr_has("continued elsewhere");
    assert_eq!(a.sessions(), b.sessions());
    // History forced back, dropping what B took: B's push puts it back.
    git(&["-C", work_dir, "reset", "-q", "--hard", "HEAD~3"]);
    git(&["-C", work_dir, "push", "-q", "-f", "origin", "cca"]);
    let before = b.sessions();
    b.sync().ok();
    assert_eq!(b.sessions(), before);
    a.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
    let c = Machine::new("tablet");
    c.init(&remote, Some(&a.key())).ok();
    assert_eq!(c.sessions(), a.sessions());
    // A remote made anew by another machine's init (no commit in common): refused, nothing
    // changed.
    std::fs::remove_dir_all(&remote).unwrap();
    bare_remote_at(&remote);
    let d = Machine::new("phone");
    d.ask("2026-11-21T12:00:00Z", "a new start", false);
    d.init(&remote, None).ok();
    let before = b.sessions();
    b.sync().code(1).stderr_has("rewritten").stderr_has("made anew");
    assert_eq!(b.sessions(), before);
}

/// A log changed on the remote by someone else, as this machine adds to it: the merge stops on
/// the conflict, which is named, and is taken back; put right, the next sync sends everything.
#[test]
fn a_log_changed_on_the_remote_by_hand_is_named_and_the_clone_is_left_clean() {
    let (a, b, remote) = two_machines();
    let work = a.env.root.path().join("by-hand");
    let work_dir = work.to_str().unwrap();
    git(&["clone", "-q", "-b", "cca", remote.to_str().unwrap(), work_dir]);
    let log = find_logs(&work).into_iter().next().expect("the laptop's log");
    let honest = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, format!("{honest}a line no machine wrote\n")).unwrap();
    let commit = |message: &str| {
        let who = ["-c", "user.name=x", "-c", "user.email=x@x"];
        git(&[&["-C", work_dir], &who[..], &["commit", "-qam", message]].concat());
        git(&["-C", work_dir, "push", "-q", "origin", "cca"]);
    };
    commit("by hand");
    a.run(&[",", "-q", "a second question"]).ok();
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    a.sync().code(1).stderr_has(&name).stderr_has("changed there by hand").stderr_has("hint: ");
    let repo = a.env.cca_home.join("sync/repo");
    assert!(!repo.join(".git/MERGE_HEAD").exists(), "the merge was taken back");
    // Put right: the turn held back goes out, and reaches the other machine.
    std::fs::write(&log, &honest).unwrap();
    commit("put right");
    a.sync().ok().stderr_has("sent what an earlier sync had ready");
    b.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
    assert!(b.text(ID).contains("a second question"));
}

#[test]
fn an_unreachable_remote_is_an_error_and_the_next_sync_completes() {
    let (a, b, remote) = two_machines();
    a.run(&[",", "-q", "asked while offline"]).ok();
    let away = remote.with_extension("away");
    std::fs::rename(&remote, &away).unwrap();
    a.sync().code(1).stderr_has("cannot reach the remote");
    std::fs::rename(&away, &remote).unwrap();
    a.sync().ok();
    b.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
}

/// A remote emptied, or deleted and made again empty: the next sync fills it again with
/// everything synced so far, and the machines go on, where each said "up to date" forever.
#[test]
fn a_remote_made_again_empty_is_filled_again_by_the_next_sync() {
    let (a, b, remote) = two_machines();
    b.run(&[",", "-q", "asked on the desktop"]).ok();
    b.sync().ok();
    a.sync().ok();
    // B goes ahead: A, which fills the remote again, never took this.
    b.run(&[",", "-q", "asked on the desktop once more"]).ok();
    b.sync().ok();
    std::fs::remove_dir_all(&remote).unwrap();
    bare_remote_at(&remote);
    let run = a.sync();
    run.ok().stderr_has("held nothing of cca's");
    assert!(!run.stderr.contains("earlier sync"), "{run}");
    // B, ahead of what A put back, merges it and puts back what it lacked.
    b.sync().ok();
    a.sync().ok().stderr_has(&format!("continued elsewhere: {ID}"));
    assert!(a.text(ID).contains("asked on the desktop once more"));
    b.run(&[",", "-q", "asked after the remote was made again"]).ok();
    b.sync().ok();
    a.sync().ok().stderr_has(&format!("continued elsewhere: {ID}"));
    assert_eq!(a.sessions(), b.sessions());
    // A third machine joining it finds every conversation.
    let c = Machine::new("tablet");
    c.init(&remote, Some(&a.key())).ok();
    assert_eq!(c.sessions(), a.sessions());
}
