//! Sync's faults on the remote's side (tests/cli/sync.rs has the machines): a remote that
//! cannot be reached, named relative to here, tampered with (links pushed to it), changed by
//! hand, set back, or emptied and made again, its description changed; a machine restored
//! from a backup; names and remotes that are not.

use std::process::Command;

use super::sync::{
    ID, Machine, bare_remote, bare_remote_at, clone_and_find_log_of_two, find_logs, git,
    two_machines,
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

#[test]
fn links_pushed_to_the_remote_are_never_followed_and_hold_back_no_other_session() {
    let (a, b, remote) = two_machines();
    b.ask("2026-11-22T09:00:00Z", "a question of the desktop's", false);
    b.sync().ok();
    a.sync().ok();
    let machine = |m: &Machine| {
        let state = std::fs::read_to_string(m.env.cca_home.join("sync/state.json")).unwrap();
        let state: serde_json::Value = serde_json::from_str(&state).unwrap();
        state["machine"].as_str().unwrap().to_string()
    };
    let (a_machine, b_machine) = (machine(&a), machine(&b));
    // Someone with write access to the remote puts links where the laptop will write (its log
    // of the desktop's session: a file outside its clone) and where every machine reads (a
    // folder, a device).
    let work = a.env.root.path().join("attacker");
    git(&["clone", "-q", "-b", "cca", remote.to_str().unwrap(), work.to_str().unwrap()]);
    let b_log = find_logs(&work)
        .into_iter()
        .find(|p| p.file_stem().unwrap() == b_machine.as_str())
        .unwrap();
    let outside = a.env.root.path().join("outside.txt");
    std::fs::write(&outside, "mine").unwrap();
    let folder = b_log.parent().unwrap();
    std::os::unix::fs::symlink(&outside, folder.join(format!("{a_machine}.log"))).unwrap();
    let elsewhere = work.join("sessions/00/000000000000");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink("/etc", elsewhere.join("aaaaaaaaaaaa.log")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", elsewhere.join("bbbbbbbbbbbb.log")).unwrap();
    let work_dir = work.to_str().unwrap();
    git(&["-C", work_dir, "add", "-A"]);
    git(&["-C", work_dir, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "x"]);
    git(&["-C", work_dir, "push", "-q", "origin", "cca"]);
    // The laptop takes that in, continues the desktop's session and sends it; the desktop
    // goes on too.
    let run = a.sync();
    assert_eq!(run.code, Some(0), "{run}");
    let desktops = "20261122-090000";
    a.run(&["search", "-q", "-s", desktops, "-r", "the laptop's turn"]).ok();
    let run = a.sync();
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine", "nothing written through");
    let run = b.sync();
    assert_eq!(run.code, Some(0), "{run}");
    assert!(b.text(desktops).contains("the laptop's turn"), "{run}");
    b.run(&["search", "-q", "-s", ID, "-r", "the desktop's turn"]).ok();
    b.sync().ok();
    a.sync().ok();
    assert!(a.text(ID).contains("the desktop's turn"));
    assert_eq!(a.sessions(), b.sessions());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine");
}

#[test]
fn a_machine_restored_from_a_backup_is_told_to_set_up_again_and_then_syncs() {
    let (a, b, remote) = two_machines();
    let home = a.env.cca_home.to_str().unwrap().to_string();
    let backup = format!("{home}.backup");
    let cp = |from: &str, to: &str| {
        let status = Command::new("cp").args(["-a", from, to]).status().unwrap();
        assert!(status.success());
    };
    cp(&home, &backup);
    a.ask("2026-11-21T10:20:00Z", "a turn the backup lacks", true);
    a.sync().ok();
    std::fs::remove_dir_all(&home).unwrap();
    cp(&backup, &home);
    a.ask("2026-11-21T10:25:00Z", "a turn after the restore", true);
    let run = a.sync();
    run.code(1).stderr_has("set this one up again").stderr_has("cca sync init REMOTE --key");
    // As the hint says: the sync folder aside, then set up again with the remote's key.
    std::fs::rename(a.env.cca_home.join("sync"), a.env.root.path().join("sync.aside")).unwrap();
    a.init(&remote, Some(&b.key())).ok();
    a.sync().ok();
    b.sync().ok();
    // Nothing is lost: both turns are on both machines (one of them in a fork).
    for m in [&a, &b] {
        let all: String = m.sessions().into_iter().map(|(_, text)| text).collect();
        assert!(all.contains("a turn the backup lacks"), "{all}");
        assert!(all.contains("a turn after the restore"), "{all}");
    }
}

#[test]
fn a_machine_name_or_a_remote_that_is_not_one_is_refused() {
    let a = Machine::new("laptop");
    let remote = bare_remote(&a.env);
    a.ask("2026-11-21T10:15:00Z", "where does the retry live", false);
    let long = "x".repeat(65);
    for name in ["", " ", "two\nlines", "\u{1b}[31mred", long.as_str()] {
        let run = a.run(&["sync", "init", remote.to_str().unwrap(), "--name", name]);
        run.code(2).stderr_has("is not a machine name").stderr_has("--name laptop");
    }
    // A remote that looks like an option of git's is taken as an address, and not reached.
    let witness = a.env.root.path().join("ran");
    let option = format!("--upload-pack=touch {}", witness.display());
    a.run(&["sync", "init", "--", &option]).code(1).stderr_has("cannot reach the remote");
    assert!(!witness.exists());
    a.init(&remote, None).ok();
}

/// Anyone who can push can make the remote's description name another key: a machine is not
/// told its key is wrong (copying another over it would be the harm), but that the description
/// changed since the remote was set up, and how to put it back.
#[test]
fn a_description_changed_on_the_remote_is_said_to_be_changed_not_the_key_here() {
    let (a, _b, remote) = two_machines();
    let work = a.env.root.path().join("attacker");
    git(&["clone", "-q", "-b", "cca", remote.to_str().unwrap(), work.to_str().unwrap()]);
    let description = work.join("cca-sync.json");
    let text = std::fs::read_to_string(&description).unwrap();
    let mut changed: serde_json::Value = serde_json::from_str(&text).unwrap();
    changed["recipient"] = "age1someoneelse".into();
    std::fs::write(&description, changed.to_string()).unwrap();
    let work_dir = work.to_str().unwrap();
    git(&["-C", work_dir, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "x"]);
    git(&["-C", work_dir, "push", "-q", "origin", "cca"]);
    a.sync();
    let run = a.sync();
    run.code(1).stderr_has("was changed since the remote was set up: it names another key");
    run.stderr_has("log -p -- cca-sync.json");
    assert!(!run.stderr.contains("is not the key this remote is sealed for"), "{run}");
}
