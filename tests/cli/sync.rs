//! `cca sync` with the real `git` against remotes the tests make: a bare repository in a
//! folder stands for the remote, and each `TestEnv` (its own `CCA_HOME`) for a machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

/// A bare repository in a folder of its own, as a remote.
pub(super) fn bare_remote(env: &TestEnv) -> PathBuf {
    let remote = env.root.path().join("remote.git");
    bare_remote_at(&remote);
    remote
}

/// An empty bare repository at `path`, made by git.
pub(super) fn bare_remote_at(path: &std::path::Path) {
    let out = Command::new("git").args(["init", "-q", "--bare"]).arg(path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A machine: its own home, with the fake engines, asking at `now`.
pub(super) struct Machine {
    pub(super) env: TestEnv,
    pub(super) name: &'static str,
    /// How git reaches the remote over SSH, when it does.
    pub(super) ssh: Option<String>,
}

impl Machine {
    pub(super) fn new(name: &'static str) -> Machine {
        Machine { env: TestEnv::new(), name, ssh: None }
    }

    pub(super) fn run(&self, args: &[&str]) -> Run {
        self.run_at(args, crate::common::NOW)
    }

    pub(super) fn run_at(&self, args: &[&str], now: &str) -> Run {
        let mut vars = vec![("CCA_NOW", now)];
        if let Some(ssh) = &self.ssh {
            vars.push(("GIT_SSH_COMMAND", ssh.as_str()));
        }
        self.env.run_with(args, None, &vars)
    }

    /// Asks a question at `now` (a new session unless `resume`).
    pub(super) fn ask(&self, now: &str, question: &str, resume: bool) {
        let args: &[&str] =
            if resume { &["search", "-q", "-r", question] } else { &["search", "-q", question] };
        self.run_at(args, now).ok();
    }

    pub(super) fn init(&self, remote: &Path, key: Option<&str>) -> Run {
        self.init_at(remote.to_str().unwrap(), key)
    }

    pub(super) fn init_at(&self, remote: &str, key: Option<&str>) -> Run {
        let mut args = vec!["sync", "init", remote, "--name", self.name];
        if let Some(key) = key {
            args.extend(["--key", key]);
        }
        self.run(&args)
    }

    pub(super) fn key(&self) -> String {
        self.run(&["sync", "key"]).ok().stdout.trim().to_string()
    }

    pub(super) fn sync(&self) -> Run {
        self.run(&["sync"])
    }

    /// Every session file here (name and text), the trash apart.
    pub(super) fn sessions(&self) -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = self
            .env
            .session_files()
            .into_iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.env.sessions_dir().join(&name)).unwrap();
                (name, text)
            })
            .collect();
        found.sort();
        found
    }

    pub(super) fn text(&self, id: &str) -> String {
        std::fs::read_to_string(self.env.session_path(id)).unwrap()
    }

    pub(super) fn trash(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.env.cca_home.join("trash"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// Two machines syncing through one encrypted remote, the first holding a session.
pub(super) fn two_machines() -> (Machine, Machine, PathBuf) {
    let a = Machine::new("laptop");
    let b = Machine::new("desktop");
    let remote = bare_remote(&a.env);
    a.ask("2026-11-21T10:15:00Z", "where does the retry live", false);
    a.init(&remote, None).ok().stderr_has("now syncs with");
    let key = a.key();
    assert!(key.starts_with("AGE-SECRET-KEY-1"), "{key}");
    b.init(&remote, Some(&key)).ok().stderr_has("new here: 20261121-101500");
    (a, b, remote)
}

pub(super) const ID: &str = "20261121-101500";

#[test]
fn a_session_started_on_one_machine_is_continued_on_another_and_back_again() {
    let (a, b, _remote) = two_machines();
    assert_eq!(a.sessions(), b.sessions());
    // B continues it with `,` as a local one: the engine gets A's exchange as history.
    b.run(&[",", "-q", "and who calls it"]).ok();
    assert_eq!(b.env.last_users(), ["where does the retry live"]);
    b.sync().ok().stderr_has("sent 1 change");
    a.sync().ok().stderr_has(&format!("continued elsewhere: {ID}"));
    assert_eq!(a.sessions(), b.sessions());
    assert!(a.text(ID).contains("and who calls it"));
    a.run(&[",", "-q", "move it into the client"]).ok();
    assert_eq!(a.env.last_users(), ["where does the retry live", "and who calls it"]);
    a.sync().ok();
    b.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
    b.sync().ok().stderr_has("up to date");
}

#[test]
fn a_session_continued_on_two_machines_at_once_keeps_both_as_a_fork_named_after_the_other() {
    let (a, b, _remote) = two_machines();
    a.run(&["name", ID, "retry"]).ok();
    a.sync().ok();
    b.sync().ok();
    a.run(&[",", "-q", "asked on the laptop"]).ok();
    b.run(&[",", "-q", "asked on the desktop"]).ok();
    a.sync().ok();
    b.sync()
        .ok()
        .stderr_has(&format!("{ID} was continued both here and on laptop"))
        .stderr_has(&format!("{ID}-laptop"));
    let run = a.sync();
    run.ok().stderr_has(&format!("{ID}-desktop"));
    assert!(!run.stderr.contains("both named"), "the name still finds the session\n{run}");
    // Each machine's own continuation stays the session; the other's is the fork.
    assert!(
        a.text(ID).contains("asked on the laptop") && !a.text(ID).contains("asked on the desktop")
    );
    assert!(
        b.text(ID).contains("asked on the desktop") && !b.text(ID).contains("asked on the laptop")
    );
    assert_eq!(a.text(&format!("{ID}-desktop")), b.text(ID));
    assert_eq!(b.text(&format!("{ID}-laptop")), a.text(ID));
    // The fork holds the other machine's transcript, its header too: it is shown under its
    // own id, and the session's name still names the session here, not the fork.
    let shown = b.run(&["show", &format!("{ID}-laptop")]).ok().stdout.clone();
    assert!(shown.contains(&format!("session {ID}-laptop (from {ID}) (retry)")), "{shown}");
    for machine in [&a, &b] {
        let shown = machine.run(&["show", "retry"]).ok().stdout.clone();
        assert!(shown.contains(&format!("session {ID} (retry)")), "{shown}");
    }
    // The fork goes on like any session, and its turns reach the machine whose it was.
    b.run(&["search", "-q", "-s", &format!("{ID}-laptop"), "more on the fork"]).ok();
    b.sync().ok();
    a.sync().ok().stderr_has(&format!("continued elsewhere: {ID}"));
    assert!(a.text(ID).contains("more on the fork"));
    assert_eq!(a.text(ID), b.text(&format!("{ID}-laptop")));
    b.sync().ok().stderr_has("up to date");
    a.sync().ok().stderr_has("up to date");
    // The fork here saved in another encoding: the laptop's next turn waits, said to be for
    // that file, not for a busy session.
    let fork = b.env.session_path(&format!("{ID}-laptop"));
    let good = std::fs::read(&fork).unwrap();
    std::fs::write(&fork, [good.as_slice(), b"caf\xe9\n"].concat()).unwrap();
    a.run(&[",", "-q", "-s", ID, "one more on the laptop"]).ok();
    a.sync().ok();
    let run = b.sync();
    run.ok().stderr_has(&format!("not synced: {ID}-laptop"));
    assert!(!run.stderr.contains("busy"), "{run}");
}

#[test]
fn latest_moved_because_another_machine_removed_its_session_is_said() {
    let (a, b, _remote) = two_machines();
    a.ask("2026-11-22T09:00:00Z", "a newer conversation", false);
    a.sync().ok();
    b.sync().ok();
    b.run(&["rm", "20261122-090000"]).ok();
    b.sync().ok();
    a.sync().ok().stderr_has(&format!(
        "`latest` pointed at 20261122-090000, moved to the trash elsewhere; it now points at {ID}"
    ));
}

#[test]
fn a_clone_that_cannot_be_written_is_said_to_be_here_not_the_remote() {
    let (a, b, _remote) = two_machines();
    // A turn of text that does not compress, so git's pack of it is larger than the limit.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let noise: String = (0..30_000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'a' + (seed % 26) as u8)
        })
        .collect();
    a.ask("2026-11-22T09:00:00Z", &noise, true);
    a.sync().ok();
    let run = b.env.run_on_full_disk(5_000, &["sync"]);
    run.code(1).stderr_has("cannot write what the remote sent").stderr_has("free space");
    assert!(!run.stderr.contains("cannot reach"), "{run}");
    b.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
}

#[test]
fn a_session_that_arrives_with_its_continuations_is_said_new_once() {
    let (a, _b, remote) = two_machines();
    a.ask("2026-11-21T10:20:00Z", "and the backoff?", true);
    a.sync().ok();
    let c = Machine::new("tablet");
    let run = c.init(&remote, Some(&a.key()));
    run.ok().stderr_has(&format!("new here: {ID}"));
    assert!(!run.stderr.contains("continued elsewhere"), "{run}");
    assert_eq!(c.sessions(), a.sessions());
}

#[test]
fn a_session_deleted_here_for_good_and_continued_elsewhere_comes_back_here() {
    let (a, b, _remote) = two_machines();
    // Deleted here is not gone everywhere, and is said so.
    a.run(&["rm", "--purge", ID])
        .ok()
        .stderr_has("moves these sessions to the trash on your other machines");
    a.sync().ok();
    b.sync().ok();
    assert!(b.trash().iter().any(|name| name.contains(ID)), "{:?}", b.trash());
    b.run(&["restore", ID]).ok();
    b.run(&["search", "-q", "-s", ID, "asked after the restore"]).ok();
    b.sync().ok();
    // It was waiting for a file that would never come back: "busy" at every sync.
    let run = a.sync();
    run.ok().stderr_has(&format!("new here: {ID}"));
    assert!(!run.stderr.contains("busy"), "{run}");
    assert_eq!(a.sessions(), b.sessions());
    assert!(a.text(ID).contains("asked after the restore"));
    a.sync().ok().stderr_has("up to date");
    b.sync().ok().stderr_has("up to date");
    // Deleted for good here again, and removed there: nothing comes back.
    a.run(&["rm", "--purge", ID]).ok();
    a.sync().ok();
    b.sync().ok();
    b.run(&["rm", "--purge", ID]).ok();
    b.sync().ok();
    a.sync().ok();
    assert!(a.sessions().is_empty() && b.sessions().is_empty());
}

#[test]
fn a_lost_clone_is_made_again_and_a_machine_set_up_again_finds_its_sessions_on_the_remote() {
    let (a, b, remote) = two_machines();
    let clone = a.env.cca_home.join("sync/repo");
    // Deleted after a sync: made again from the remote, and the turn since goes out.
    std::fs::remove_dir_all(&clone).unwrap();
    a.run(&[",", "-q", "asked after the clone went"]).ok();
    a.sync().ok().stderr_has("sent 1 change");
    b.sync().ok().stderr_has(&format!("continued elsewhere: {ID}"));
    assert_eq!(a.sessions(), b.sessions());
    // Deleted with a turn written to it and never pushed (the remote was away): that turn
    // is sent again, and no record reaches the remote after one it lacks.
    let away = remote.with_extension("away");
    std::fs::rename(&remote, &away).unwrap();
    a.run(&[",", "-q", "asked while the remote was away"]).ok();
    a.sync().code(1).stderr_has("cannot reach the remote");
    let status = a.run(&["sync", "status"]).ok().stdout.clone();
    assert!(status.contains("has not reached the remote"), "{status}");
    // Lost while the remote is away: the clone made again part-way is not taken for whole.
    std::fs::remove_dir_all(&clone).unwrap();
    a.sync().code(1).stderr_has("cannot reach the remote");
    assert!(clone.join(".git/HEAD").is_file(), "made part-way");
    std::fs::rename(&away, &remote).unwrap();
    a.sync().ok();
    b.sync().ok();
    let everywhere = |text: &str| {
        b.sessions().iter().any(|(_, t)| t.contains(text))
            && a.sessions().iter().any(|(_, t)| t.contains(text))
    };
    assert!(everywhere("asked while the remote was away"), "{:?}", b.sessions());
    let status = a.run(&["sync", "status"]).ok().stdout.clone();
    assert!(!status.contains("has not reached"), "{status}");
    // Sent as what it adds to the turn the remote has: the same one session on both.
    assert_eq!(a.sessions(), b.sessions());
    a.sync().ok();
    b.sync().ok().stderr_has("up to date");
    // Both go on with it at once: each holds the other's turn as a fork.
    a.run(&[",", "-q", "asked on the laptop"]).ok();
    b.run(&[",", "-q", "asked on the desktop"]).ok();
    for machine in [&a, &b, &a] {
        machine.sync().ok();
    }
    // The sync folder moved away, a turn not yet sent, and the machine set up again with the
    // key: its sessions, the fork too, are the remote's as they are, not new ones that come
    // back as copies, and the turn goes out as what it adds.
    let names = |m: &Machine| m.sessions().into_iter().map(|(name, _)| name).collect::<Vec<_>>();
    let (names_a, names_b) = (names(&a), names(&b));
    assert_eq!(names_a.len(), 2, "{names_a:?}");
    a.run(&[",", "-q", "asked before setting up again"]).ok();
    std::fs::rename(a.env.cca_home.join("sync"), a.env.root.path().join("old-sync")).unwrap();
    a.init(&remote, Some(&b.key())).ok();
    b.sync().ok();
    a.sync().ok();
    b.sync().ok().stderr_has("up to date");
    assert_eq!((names(&a), names(&b)), (names_a, names_b));
    assert!(everywhere("asked before setting up again"));
    a.run(&[",", "-q", "asked after setting up again"]).ok();
    a.sync().ok().stderr_has("sent 1 change");
    b.sync().ok();
    assert!(everywhere("asked after setting up again"));
    assert_eq!(names(&b).len(), 2);
}

#[test]
fn a_machine_joining_continues_the_conversation_held_last_not_the_first_sent() {
    let (a, b) = (Machine::new("laptop"), Machine::new("desktop"));
    let remote = bare_remote(&a.env);
    for (now, question) in [
        ("2026-11-21T10:15:00Z", "the oldest"),
        ("2026-11-21T10:20:00Z", "the middle one"),
        ("2026-11-21T10:25:00Z", "the newest started"),
    ] {
        a.ask(now, question, false);
    }
    // Neither the first sent (the oldest) nor the newest started: the one continued last.
    let middle = "20261121-102000";
    a.run_at(&["search", "-q", "-s", middle, "continued last"], "2026-11-21T10:30:00Z").ok();
    a.init(&remote, None).ok();
    b.init(&remote, Some(&a.key())).ok().stderr_has(&format!("`,` now continues {middle},"));
    b.run(&[",", "-q", "and then"]).ok();
    assert_eq!(b.env.last_users(), ["the middle one", "continued last"]);
}

/// A conversation held on another machine earlier than the last one here, and sent only now:
/// `latest` stays here, as its record says when it was held, not when it was synced.
#[test]
fn a_conversation_held_earlier_elsewhere_and_synced_late_does_not_take_latest() {
    let (a, b, _remote) = two_machines();
    // Held twenty minutes ago there, ten minutes ago here (as the files' times say).
    let held = |machine: &Machine, id: &str, minutes: u64| {
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(60 * minutes);
        let file = std::fs::File::options().append(true).open(machine.env.session_path(id));
        file.unwrap().set_modified(at).unwrap();
    };
    b.ask("2026-11-21T11:00:00Z", "held on the desktop earlier", false);
    held(&b, "20261121-110000", 20);
    a.ask("2026-11-21T11:05:00Z", "held on the laptop last", false);
    held(&a, "20261121-110500", 10);
    b.sync().ok();
    let run = a.sync();
    run.ok().stderr_has("new here: 20261121-110000");
    assert!(!run.stderr.contains("now continues"), "{run}");
    a.run(&[",", "-q", "and then"]).ok();
    assert_eq!(a.env.last_users(), ["held on the laptop last"]);
}

#[test]
fn a_removal_a_restore_a_name_and_a_hand_edit_reach_the_other_machine() {
    let (a, b, _remote) = two_machines();
    a.run(&["name", ID, "retry-talk"]).ok();
    a.sync().ok();
    b.sync().ok().stderr_has("continued elsewhere");
    b.run(&["show", "retry-talk"]).ok();
    // A hand edit, anywhere in the file.
    let edited = a.text(ID).replace("where does the retry live", "where does the backoff live");
    std::fs::write(a.env.session_path(ID), &edited).unwrap();
    a.sync().ok();
    b.sync().ok();
    assert_eq!(b.text(ID), edited);
    a.run(&["rm", ID]).ok();
    a.sync().ok();
    b.sync().ok().stderr_has(&format!("moved to the trash elsewhere: {ID}"));
    assert!(b.sessions().is_empty());
    assert_eq!(b.trash(), [format!("session_{ID}.md")]);
    b.run(&["restore", ID]).ok();
    b.sync().ok();
    a.sync().ok().stderr_has(&format!("restored elsewhere: {ID}"));
    assert_eq!(a.sessions(), b.sessions());
}

#[test]
fn three_machines_converge_and_a_session_new_on_each_reaches_the_others() {
    let (a, b, remote) = two_machines();
    let c = Machine::new("server");
    c.init(&remote, Some(&a.key())).ok();
    b.ask("2026-11-22T09:00:00Z", "a question on the desktop", false);
    c.ask("2026-11-23T09:00:00Z", "a question on the server", false);
    for machine in [&b, &c, &a, &b, &c] {
        machine.sync().ok();
    }
    assert_eq!(a.sessions().len(), 3);
    assert_eq!(a.sessions(), b.sessions());
    assert_eq!(b.sessions(), c.sessions());
}

#[test]
fn with_a_key_no_question_or_answer_reaches_the_remote_and_plain_is_readable() {
    let (a, b, remote) = two_machines();
    b.run(&[",", "-q", "the secret plan for the migration"]).ok();
    b.sync().ok();
    let objects = all_objects(&remote);
    assert!(!objects.contains("secret plan") && !objects.contains("where does the retry live"));
    assert!(!objects.contains(ID), "session ids are not in the remote's names");
    assert!(!objects.contains("laptop") && !objects.contains("desktop"));
    let _ = a;
    let plain = Machine::new("plain");
    let open = bare_remote(&plain.env);
    plain.ask("2026-11-21T10:15:00Z", "nothing to hide here", false);
    plain.run(&["sync", "init", open.to_str().unwrap(), "--plain"]).ok();
    assert!(all_objects(&open).contains("nothing to hide here"));
    plain.run(&["sync", "key"]).code(2).stderr_has("plain");
    // Joining it without a key: said to be plain, not encrypted.
    let other = Machine::new("other");
    let run = other.init(&open, None);
    run.ok().stderr_has("records are plain");
    assert!(!run.stderr.contains("encrypted"), "{run}");
}

/// Every object of a repository, as text.
fn all_objects(repo: &Path) -> String {
    let out = Command::new("git")
        .args(["-C", repo.to_str().unwrap(), "cat-file", "--batch-all-objects", "--batch"])
        .output()
        .unwrap();
    assert!(out.status.success());
    // Packed objects are compressed in the pack, but `cat-file` prints them whole.
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_wrong_key_or_none_is_refused_before_anything_is_read() {
    let (_a, _b, remote) = two_machines();
    let c = Machine::new("server");
    c.init(&remote, None).code(2).stderr_has("encrypted").stderr_has("cca sync key");
    let other = Machine::new("other");
    other
        .run(&["sync", "init", "/nowhere/at/all.git"])
        .code(1)
        .stderr_has("cannot reach the remote");
    // A key file that is a FIFO or a device is refused, never waited on or read without end.
    let fifo = c.env.root.path().join("key.fifo");
    make_fifo(&fifo);
    for (file, why) in [(fifo.to_str().unwrap(), "FIFO"), ("/dev/zero", "device")] {
        c.init(&remote, Some(file)).code(2).stderr_has(why);
    }
    let wrong = "AGE-SECRET-KEY-1QYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSHGFEQ9";
    let run = c.init(&remote, Some(wrong));
    assert_ne!(run.code, Some(0), "{run}");
    assert!(c.sessions().is_empty());
    // A failed init leaves nothing half set up: the next one works.
    c.init(&remote, Some(&_a.key())).ok();
    assert_eq!(c.sessions().len(), 1);
}

#[test]
fn a_key_that_is_not_the_remotes_sends_nothing_and_the_other_machines_go_on() {
    let (a, b, _remote) = two_machines();
    // Another remote's key copied into the wrong machine's key file.
    let other = Machine::new("other");
    other.init(&bare_remote(&other.env), None).ok();
    let right = a.key();
    let key_file = a.env.cca_home.join("sync/key");
    std::fs::write(&key_file, format!("{}\n", other.key())).unwrap();
    a.run(&[",", "-q", "asked with the wrong key"]).ok();
    a.sync()
        .code(2)
        .stderr_has("is not the key this remote is sealed for")
        .stderr_has("nothing was sent");
    // Nothing reached the remote: the other machine syncs as before.
    b.run(&[",", "-q", "asked on the desktop"]).ok();
    b.sync().ok().stderr_has("sent 1 change");
    // Junk in the key file is named with its file.
    std::fs::write(&key_file, "not a key\n").unwrap();
    a.sync().code(1).stderr_has(&key_file.display().to_string()).stderr_has("cca sync key");
    // A sync state that cannot be read says what it is and how to start again.
    let state = a.env.cca_home.join("sync/state.json");
    let kept = std::fs::read(&state).unwrap();
    std::fs::write(&state, "{\"remote\": 7}").unwrap();
    a.sync()
        .code(1)
        .stderr_has("state.json cannot be read")
        .stderr_has("cca sync init REMOTE --key KEY");
    std::fs::write(&state, kept).unwrap();
    // The right key back: what waited is sent, and the two meet.
    std::fs::write(&key_file, format!("{right}\n")).unwrap();
    a.sync().ok();
    b.sync().ok();
    assert!(b.text(&format!("{ID}-laptop")).contains("asked with the wrong key"));
    assert!(a.text(ID).contains("asked with the wrong key"));
}

/// Two machines that each start a conversation in the same second give both one id: neither
/// is taken for a continuation of the other, and each machine keeps both.
#[test]
fn conversations_started_in_the_same_second_on_two_machines_are_both_kept_and_said_so() {
    let (a, b, _) = two_machines();
    a.ask("2026-11-21T11:00:00Z", "only on the laptop", false);
    b.ask("2026-11-21T11:00:00Z", "only on the desktop", false);
    a.sync().ok();
    let run = b.sync();
    run.ok()
        .stderr_has("laptop started another conversation in the same second as 20261121-110000")
        .stderr_has("it is 20261121-110000-laptop here");
    assert!(!run.stderr.contains("continued both"), "{run}");
    assert!(b.text("20261121-110000").contains("only on the desktop"));
    assert!(b.text("20261121-110000-laptop").contains("only on the laptop"));
}

#[test]
fn a_record_the_remote_repeats_is_taken_once() {
    let (a, b, remote) = two_machines();
    a.run(&[",", "-q", "a second question"]).ok();
    a.sync().ok();
    b.sync().ok();
    let work = a.env.root.path().join("replay");
    let work_dir = work.to_str().unwrap();
    let log = clone_and_find_log_of_two(&remote, &work);
    let honest = std::fs::read_to_string(&log).unwrap();
    let (first, second) = honest.trim_end().split_once('\n').unwrap();
    // The last record repeated (for B, who took it in already), then the first (for a machine
    // joining, who reads them all).
    for repeated in [second, first] {
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::write(&log, format!("{text}{repeated}\n")).unwrap();
        git(&["-C", work_dir, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "x"]);
        git(&["-C", work_dir, "push", "-q", "origin", "cca"]);
        let run = b.sync();
        run.ok();
        assert!(
            !run.stderr.contains("continued both") && !run.stderr.contains("same second"),
            "{run}"
        );
        assert_eq!(a.sessions(), b.sessions(), "{run}");
    }
    let c = Machine::new("tablet");
    let run = c.init(&remote, Some(&a.key()));
    run.ok().stderr_has(&format!("new here: {ID}"));
    assert_eq!(c.sessions(), a.sessions(), "{run}");
    a.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
}

/// Clones the remote's branch into `work`, as someone with write access to it would, and
/// finds there the log that holds two records (A's session and its second question).
pub(super) fn clone_and_find_log_of_two(remote: &Path, work: &Path) -> PathBuf {
    git(&["clone", "-q", "-b", "cca", remote.to_str().unwrap(), work.to_str().unwrap()]);
    find_logs(work)
        .into_iter()
        .find(|p| std::fs::read_to_string(p).unwrap().lines().count() == 2)
        .unwrap()
}

pub(super) fn git(args: &[&str]) {
    let out = Command::new("git").args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

pub(super) fn find_logs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() && entry.file_name() != ".git" {
            found.extend(find_logs(&path));
        } else if path.extension().is_some_and(|e| e == "log") {
            found.push(path);
        }
    }
    found
}

/// With `sync = "after-turn"` on `a`, a question asked there reaches `b` (which syncs until it
/// does, for at most 30 s): the turn did not wait for the sync, which finishes on its own.
fn arrives_after_turn(a: &Machine, b: &Machine, question: &str) -> bool {
    a.env.write_config("sync = \"after-turn\"\n");
    a.run(&[",", "-q", question]).ok();
    wait_until(std::time::Duration::from_secs(30), || {
        b.sync().ok();
        b.text(ID).contains(question)
    })
}

#[test]
fn after_turn_syncs_in_the_background_and_status_says_where_this_machine_stands() {
    let (a, b, _remote) = two_machines();
    let status = a.run(&["sync", "status"]).ok().stdout.clone();
    assert!(status.contains("0 changed since the last sync"), "{status}");
    assert!(
        arrives_after_turn(&a, &b, "asked with sync after each turn"),
        "the sync after the turn sent it"
    );
    let log = std::fs::read_to_string(a.env.cca_home.join("sync/sync.log")).unwrap_or_default();
    assert!(!log.contains("error"), "{log}");
    let status = a.run(&["sync", "status"]).ok().stdout.clone();
    for said in ["encrypted (age)", "laptop", "0 changed since the last sync"] {
        assert!(status.contains(said), "{status}");
    }
}

#[test]
fn turns_in_a_row_each_reach_the_other_machine_though_their_syncs_overlap() {
    let (a, b, _remote) = two_machines();
    a.env.write_config("sync = \"after-turn\"\n");
    for n in 1..=5 {
        a.run(&[",", "-q", &format!("turn number {n} in a row")]).ok();
    }
    // Each turn's sync found the one before running: one waits behind it, the rest leave
    // their turns to that one.
    let all_there = wait_until(std::time::Duration::from_secs(30), || {
        b.sync().ok();
        (1..=5).all(|n| b.text(ID).contains(&format!("turn number {n} in a row")))
    });
    assert!(all_there, "{}", b.text(ID));
    let settled = wait_until(std::time::Duration::from_secs(30), || {
        a.run(&["sync", "status"]).ok().stdout.contains("0 changed since the last sync")
    });
    assert!(settled, "the last turn's sync sent everything");
}

/// An SSH server on a loopback port (tests/sync/sshd.py, asyncssh) letting in one throwaway
/// key, and the `ssh` command line that reaches it as host `cca-test`.
struct SshServer {
    _server: Guard,
    ssh: String,
}

impl SshServer {
    fn start(dir: &Path) -> SshServer {
        let python = real_program("CCA_TEST_SSHD_PYTHON", "sshd-venv/bin/python");
        for key in ["host_key", "user_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key))
                .output()
                .expect("ssh-keygen, of OpenSSH's client, runs");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sync/sshd.py");
        let mut server = Command::new(python)
            .arg(script)
            .arg(dir.join("host_key"))
            .arg(dir.join("user_key.pub"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = server.stdout.take().unwrap();
        let server = Guard(server);
        let (sender, port) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
            let _ = sender.send(line);
        });
        let port =
            port.recv_timeout(std::time::Duration::from_secs(30)).expect("the server starts");
        let port: u16 = port.trim().parse().expect("the server prints its port");
        let config = dir.join("ssh_config");
        std::fs::write(
            &config,
            format!(
                "Host cca-test\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {}\n  \
                 IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  \
                 LogLevel ERROR\n  BatchMode yes\n",
                dir.join("user_key").display()
            ),
        )
        .unwrap();
        SshServer { _server: server, ssh: format!("ssh -F {}", config.display()) }
    }
}

#[test]
fn over_ssh_a_session_goes_from_one_machine_to_another_and_back() {
    let mut a = Machine::new("laptop");
    let mut b = Machine::new("desktop");
    let server = SshServer::start(a.env.root.path());
    a.ssh = Some(server.ssh.clone());
    b.ssh = Some(server.ssh.clone());
    let remote = format!("cca-test:{}", bare_remote(&a.env).display());
    a.ask("2026-11-21T10:15:00Z", "where does the retry live", false);
    a.init_at(&remote, None).ok();
    b.init_at(&remote, Some(&a.key())).ok().stderr_has(&format!("new here: {ID}"));
    b.run(&[",", "-q", "asked over ssh"]).ok();
    b.sync().ok();
    a.sync().ok().stderr_has(&format!("continued elsewhere: {ID}"));
    assert_eq!(a.sessions(), b.sessions());
    // A sync started after a turn reaches the remote over SSH too, with no one to prompt.
    assert!(
        arrives_after_turn(&a, &b, "asked with a sync after it"),
        "the sync after the turn sent it over ssh"
    );
}

#[test]
fn a_turn_running_in_a_session_holds_its_records_back_until_the_next_sync_and_loses_none() {
    let (a, b, _remote) = two_machines();
    a.run(&[",", "-q", "asked on the laptop"]).ok();
    a.sync().ok();
    // On the desktop a turn is running in the session while it syncs.
    let go = b.env.root.path().join("go");
    let mut turn = b.env.command();
    turn.args([",", "-q", "asked on the desktop"])
        .env("FAKE_SCRIPT", format!("await {};echo", go.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let turn = Guard(turn.spawn().unwrap());
    assert!(
        wait_until(TIMEOUT, || b.text(ID).contains("asked on the desktop")),
        "the question is recorded"
    );
    b.sync().ok().stderr_has(&format!("busy (a turn is running), left for the next sync: {ID}"));
    assert!(!b.text(ID).contains("asked on the laptop"), "nothing written under the turn");
    std::fs::write(&go, "").unwrap();
    assert!(turn.finish().status.success());
    // Both continued it: the desktop's turn stays the session, the laptop's is the fork.
    b.sync().ok().stderr_has(&format!("{ID}-laptop"));
    assert!(b.text(ID).contains("ECHO: asked on the desktop"));
    assert!(b.text(&format!("{ID}-laptop")).contains("ECHO: asked on the laptop"));
    a.sync().ok();
    assert_eq!(a.sessions().len(), 2);
}

#[test]
fn a_full_disk_stops_a_sync_with_an_error_and_the_next_one_completes() {
    let (a, b, _remote) = two_machines();
    let long = "a long question ".repeat(2_000);
    a.run(&[",", "-q", &long]).ok();
    // Sending: the log cannot take the record.
    let run = a.env.run_on_full_disk(4_000, &["sync"]);
    assert_eq!(run.code, Some(1), "{run}");
    a.sync().ok().stderr_has("sent 1 change");
    // Taking: the transcript cannot take the text (nor git its objects).
    let before = b.sessions();
    let run = b.env.run_on_full_disk(4_000, &["sync"]);
    assert_eq!(run.code, Some(1), "{run}");
    assert_eq!(b.sessions(), before, "nothing half written");
    b.sync().ok().stderr_has(&format!("continued elsewhere: {ID}"));
    assert_eq!(a.sessions(), b.sessions());
}

#[test]
fn two_syncs_at_once_on_one_machine_take_turns_and_one_not_set_up_says_how() {
    let (a, b, _remote) = two_machines();
    for round in 0..3 {
        a.ask(&format!("2026-11-2{}T09:00:00Z", 2 + round), &format!("question {round}"), false);
    }
    let start = || {
        let mut command = a.env.command();
        command.args(["sync"]).stdout(Stdio::piped()).stderr(Stdio::piped());
        Guard(command.spawn().unwrap())
    };
    let (first, second) = (start(), start());
    assert!(first.finish().status.success() && second.finish().status.success());
    b.sync().ok();
    assert_eq!(a.sessions(), b.sessions());
    assert_eq!(a.sessions().len(), 4);
    let lone = Machine::new("lone");
    lone.sync().code(2).stderr_has("does not sync yet").stderr_has("cca sync init REMOTE");
    lone.run(&["sync", "status"]).code(2);
    lone.run(&["sync", "key"]).code(2);
}

#[test]
fn an_image_a_question_attached_reaches_the_other_machine_sealed() {
    let (a, b, remote) = two_machines();
    let picture = a.env.work.join("picture.gif");
    std::fs::write(&picture, b"GIF89a\x01\x00\x01\x00 a small picture").unwrap();
    a.run(&[",", "-q", "-f", picture.to_str().unwrap(), "what is in it"]).ok();
    a.sync().ok();
    b.sync().ok();
    let copies = |m: &Machine| -> Vec<(String, Vec<u8>)> {
        let mut found: Vec<_> = std::fs::read_dir(m.env.cca_home.join("files"))
            .map(|d| {
                d.flatten()
                    .map(|e| {
                        (
                            e.file_name().to_string_lossy().into_owned(),
                            std::fs::read(e.path()).unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    };
    assert_eq!(copies(&a).len(), 1);
    assert_eq!(copies(&a), copies(&b), "the copy the transcript links to is there");
    assert_eq!(a.sessions(), b.sessions());
    assert!(!all_objects(&remote).contains("a small picture"));
}

#[test]
fn an_init_stopped_after_its_push_is_taken_up_with_the_key_it_kept() {
    let a = Machine::new("laptop");
    let remote = bare_remote(&a.env);
    a.ask("2026-11-21T10:15:00Z", "where does the retry live", false);
    a.init(&remote, None).ok().stderr_has("encrypted with a new key");
    let key = a.key();
    // Stopped after the push, before the rest was written: the remote is sealed for the key,
    // which this machine alone holds.
    let sync = a.env.cca_home.join("sync");
    std::fs::remove_file(sync.join("state.json")).unwrap();
    std::fs::remove_dir_all(sync.join("repo")).unwrap();
    let again = a.init(&remote, None);
    again.ok().stderr_has("now syncs with");
    assert!(!again.stderr.contains("new key"), "the key it kept: {again}");
    assert_eq!(a.key(), key);
    let b = Machine::new("desktop");
    b.init(&remote, Some(&key)).ok().stderr_has(&format!("new here: {ID}"));
    assert_eq!(a.sessions(), b.sessions());
}

#[test]
fn a_file_emptied_or_cut_of_its_header_is_never_sent() {
    let (a, b, _remote) = two_machines();
    let good = a.text(ID);
    let headerless: String = good.lines().skip(1).map(|l| format!("{l}\n")).collect();
    for broken in [String::new(), headerless] {
        std::fs::write(a.env.session_path(ID), &broken).unwrap();
        a.sync().ok().stderr_has(&format!("not synced: {ID}")).stderr_has("not a transcript");
        b.sync().ok();
        assert_eq!(b.text(ID), good, "the other machine's copy is whole");
    }
    std::fs::write(a.env.session_path(ID), &good).unwrap();
    a.ask("2026-11-22T09:00:00Z", "and once mended?", true);
    a.sync().ok();
    b.sync().ok();
    assert!(b.text(ID).contains("and once mended?"));
    assert_eq!(a.sessions(), b.sessions());
}

#[test]
fn a_file_that_cannot_be_read_waits_and_every_other_session_syncs() {
    let (a, b, _remote) = two_machines();
    // B's copy of the shared session is saved in another encoding; A continues it, and each
    // machine starts a session of its own.
    let good = b.text(ID);
    std::fs::write(b.env.session_path(ID), [good.as_bytes(), b"caf\xe9\n"].concat()).unwrap();
    a.ask("2026-11-22T09:00:00Z", "and the backoff?", true);
    a.ask("2026-11-22T09:05:00Z", "a new one on A", false);
    a.sync().ok();
    b.ask("2026-11-22T10:00:00Z", "a new one on B", false);
    let run = b.sync();
    run.ok().stderr_has(&format!("not synced: {ID}")).stderr_has("mend the file by hand");
    assert!(!run.stderr.contains("busy"), "{run}");
    // Everything else went both ways.
    assert!(b.env.session_path("20261122-090500").exists(), "{run}");
    a.sync().ok();
    assert!(a.env.session_path("20261122-100000").exists());
    // `-q` keeps the sync quiet, not the warning: the session would wait unseen.
    let run = b.run(&["sync", "-q"]);
    run.ok().stderr_has(&format!("not synced: {ID}"));
    assert!(!run.stderr.contains("up to date"), "{run}");
    // Mended, the waiting change arrives.
    std::fs::write(b.env.session_path(ID), &good).unwrap();
    b.sync().ok();
    assert!(b.text(ID).contains("and the backoff?"));
}

#[test]
fn a_hand_edit_elsewhere_reaches_this_machine_without_moving_latest() {
    let (a, b, _remote) = two_machines();
    b.ask("2026-11-22T09:00:00Z", "a question of the desktop's", false);
    b.sync().ok();
    a.sync().ok();
    // The laptop mends a typo in the first session; the desktop goes on with its own.
    let path = a.env.session_path(ID);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("where does the retry live", "where does the retry sit", 1),
    )
    .unwrap();
    a.sync().ok();
    // The desktop's own conversation last held long before the edit.
    let desktops = b.env.session_path("20261122-090000");
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    std::fs::File::options().write(true).open(&desktops).unwrap().set_modified(old).unwrap();
    let run = b.sync();
    assert!(!run.ok().stderr.contains("now continues"), "{run}");
    assert!(b.text(ID).contains("where does the retry sit"), "{run}");
    assert!(b.env.latest().contains("a question of the desktop's"), "{}", b.env.latest());
}

/// A folder is a remote, as the help says: one not there, or empty, is made a bare
/// repository, which a second machine then joins by the same path; a folder holding other
/// things is refused with what to do, and left as it was.
#[test]
fn a_new_or_empty_folder_is_made_a_remote_and_one_holding_other_things_refused() {
    let one = Machine::new("one");
    one.ask("2026-11-21T10:00:00Z", "kept in a folder", false);
    let remote = one.env.root.path().join("not-yet-there.git");
    one.init(&remote, None).ok().stderr_has(&format!("now syncs with {}", remote.display()));
    assert!(remote.join("HEAD").is_file(), "a bare repository was made");
    let two = Machine::new("two");
    two.init(&remote, Some(&one.key())).ok();
    assert_eq!(two.sessions(), one.sessions());

    let empty = two.env.root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let three = Machine::new("three");
    three.init(&empty, None).ok();
    assert!(empty.join("objects").is_dir());

    let full = three.env.root.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("notes.txt"), "mine").unwrap();
    let four = Machine::new("four");
    four.init(&full, None)
        .code(2)
        .stderr_has("is not a git repository, and holds other things")
        .stderr_has("git init --bare");
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);
    assert!(!four.env.cca_home.join("sync/state.json").exists());
}

/// `sync = "after-turn"` on a machine not set up to sync is said to sync nothing, by `cca
/// config` and as a problem by `cca doctor`, which also says whom a machine set up syncs with.
#[test]
fn after_turn_sync_on_a_machine_not_set_up_is_said_to_sync_nothing() {
    let one = Machine::new("one");
    let config = std::fs::read_to_string(one.env.cca_home.join("config.toml")).unwrap_or_default();
    std::fs::write(
        one.env.cca_home.join("config.toml"),
        format!("sync = \"after-turn\"\n{config}"),
    )
    .unwrap();
    let config = one.run(&["config"]);
    assert!(config.stdout.contains("not set up to sync: nothing is synced"), "{config}");
    let doctor = one.run(&["doctor"]);
    assert!(doctor.stdout.contains("sync: not set up"), "{doctor}");
    assert!(doctor.stdout.contains("nothing is synced: `cca sync init REMOTE`"), "{doctor}");
    let remote = bare_remote(&one.env);
    one.init(&remote, None).ok();
    let doctor = one.run(&["doctor"]);
    assert!(doctor.stdout.contains(&format!("sync: with {}", remote.display())), "{doctor}");
    assert!(!doctor.stdout.contains("nothing is synced"), "{doctor}");
}
