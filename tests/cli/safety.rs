//! Never lose a word: concurrency, crash safety, write failures, permissions, hostile input.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;

fn parse_latest(env: &TestEnv) -> (cca::transcript::Transcript, Vec<cca::transcript::Problem>) {
    cca::transcript::parse(&env.latest()).expect("the transcript opens")
}

fn answers(t: &cca::transcript::Transcript) -> usize {
    t.records.iter().filter(|r| r.kind == cca::transcript::Kind::Assistant).count()
}

#[test]
fn sixteen_resumes_at_once_take_turns() {
    let env = TestEnv::new();
    env.run(&["search", "start"]).ok();
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let env = &env;
                s.spawn(move || {
                    env.run_with(
                        &["search", "-r", &format!("q-{i}")],
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
    assert!(runs.iter().any(|r| r.stderr.contains("is busy")), "some waited, and said so");
    let (t, problems) = parse_latest(&env);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(answers(&t), 17);
    // Each turn saw every earlier exchange complete: histories of 1, 2, ..., 16 exchanges.
    let mut sizes: Vec<usize> =
        env.calls()[1..].iter().map(|c| stdin_of(c).matches("</assistant_turn>").count()).collect();
    sizes.sort();
    assert_eq!(sizes, (1..=16).collect::<Vec<_>>());
}

#[test]
fn no_wait_fails_at_once_with_its_own_code() {
    let env = TestEnv::new();
    env.run(&["search", "start"]).ok();
    let go = env.root.path().join("go");
    let mut cmd = env.command();
    cmd.args(["search", "-r", "slow"])
        .env("FAKE_SCRIPT", format!("await {};echo", go.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut slow = Guard(cmd.spawn().unwrap());
    assert!(wait_until(TIMEOUT, || env.log.join("call-2.json").exists()), "the slow turn started");
    let run = env.run(&["search", "-r", "--no-wait", "impatient"]);
    run.code(75).stderr_has("is busy");
    // It did not wait: the slow turn is still answering (its engine waits for our word).
    assert!(slow.0.try_wait().unwrap().is_none(), "the slow turn ended first");
    std::fs::write(&go, "").unwrap();
    assert!(slow.finish().status.success());
}

#[test]
fn sixteen_new_sessions_at_once_get_sixteen_files() {
    let env = TestEnv::new();
    std::thread::scope(|s| {
        for i in 0..16 {
            let env = &env;
            s.spawn(move || env.run(&["search", &format!("new-{i}")]).ok().code);
        }
    });
    let files = env.session_files();
    assert_eq!(files.len(), 16, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(env.sessions_dir().join(f)).unwrap();
        let (t, problems) = cca::transcript::parse(&text).unwrap();
        assert!(problems.is_empty());
        assert_eq!(answers(&t), 1, "{f}");
    }
}

#[test]
fn latest_is_never_missing_or_dangling_while_sessions_are_created() {
    let env = TestEnv::new();
    env.run(&["search", "first"]).ok();
    let link = env.sessions_dir().join("latest");
    let done = std::sync::atomic::AtomicBool::new(false);
    let (checks, failures) = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..25 {
                env.run(&["search", &format!("s-{i}")]).ok();
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let (mut checks, mut failures) = (0, Vec::new());
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            checks += 1;
            match std::fs::read_link(&link) {
                Ok(target) if env.sessions_dir().join(&target).is_file() => {}
                other => failures.push(format!("{other:?}")),
            }
        }
        (checks, failures)
    });
    assert!(checks > 100, "the reader ran ({checks} checks)");
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn kill_9_at_random_moments_never_breaks_a_transcript() {
    let env = TestEnv::new();
    env.add_engine("plain-engine");
    env.write_config("engine = \"plain\"\n[engines.plain]\ncommand = [\"plain-engine\"]\n");
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let (mut path, mut previous) = (std::path::PathBuf::new(), Vec::new());
    let (mut cut_off, mut problems_before) = (0, 0);
    let turn = |i: usize, answer: &str| {
        let mut cmd = env.command();
        cmd.args(["search", "--no-compact", "-r", &format!("k-{i}")])
            .env("FAKE_SCRIPT", format!("bytes {answer}"))
            .env_remove("FAKE_LOG_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Guard(cmd.spawn().unwrap())
    };
    let read = |path: &std::path::Path, i: usize| {
        let text = std::fs::read_to_string(path).unwrap();
        cca::transcript::parse(&text).unwrap_or_else(|e| panic!("kill {i}: {e}"))
    };
    for i in 0..200 {
        // A fresh session now and then keeps each file small enough to re-read after every kill.
        if i % 20 == 0 {
            env.run(&["search", &format!("seed-{i}")]).ok();
            path = std::fs::canonicalize(env.sessions_dir().join("latest")).unwrap();
            previous = read(&path, i).0.records;
            problems_before = 0;
        }
        let child = if i % 2 == 0 {
            // Anywhere in the turn.
            let child = turn(i, "200000");
            std::thread::sleep(Duration::from_micros(random(40_000)));
            child
        } else {
            // Inside the append of the answer: cca is stopped where it is once the file has grown
            // past the question, and killed there if the answer's record is still incomplete;
            // an append that was already done is let end, and the next turn tries again.
            let mut tries = 0;
            loop {
                tries += 1;
                assert!(tries <= 20, "kill {i}: no stop landed inside an append in 20 turns");
                let size_before = std::fs::metadata(&path).unwrap().len();
                let child = turn(i, "1000000");
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while std::fs::metadata(&path).is_ok_and(|m| m.len() <= size_before + 2_000) {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "kill {i}: the answer never came"
                    );
                    std::thread::sleep(Duration::from_micros(50));
                }
                child.signal(rustix::process::Signal::STOP);
                // The question is recorded; its answer, cut off, is not a record yet.
                let (t, _) = read(&path, i);
                if t.records.last().is_some_and(|r| r.kind != cca::transcript::Kind::Assistant) {
                    break child;
                }
                child.signal(rustix::process::Signal::CONT);
                let mut child = child;
                let _ = child.0.wait();
                let (t2, problems2) = read(&path, i);
                assert!(t2.records.len() >= t.records.len(), "kill {i}: a whole turn lost records");
                problems_before = problems2.len();
                previous = t2.records;
            }
        };
        let mut child = child;
        let _ = child.0.kill();
        let _ = child.0.wait();
        let (t, problems) = read(&path, i);
        cut_off += problems.len().saturating_sub(problems_before);
        problems_before = problems.len();
        assert!(t.records.len() >= previous.len(), "kill {i} lost records");
        assert_eq!(t.records[..previous.len()], previous[..], "kill {i} changed earlier records");
        previous = t.records;
    }
    // The session still works, and sends only complete exchanges.
    env.run(&["search", "--no-compact", "-r", "after the storm"]).ok();
    let stdin = stdin_of(&env.last_call()).to_string();
    let expected = previous.iter().filter(|r| r.kind == cca::transcript::Kind::Assistant).count();
    assert_eq!(stdin.matches("</assistant_turn>").count(), expected);
    eprintln!("{cut_off} of 200 kills cut a record off; each was reported and skipped");
}

#[test]
fn a_write_that_fails_is_reported_and_changes_nothing() {
    let env = TestEnv::new();
    std::os::unix::fs::symlink(cca_exe(), env.bin.join("cca")).unwrap();
    let attachment = "x".repeat(10_000);
    env.run_with(&["search", "seed"], Some(attachment.as_bytes()), &[]).ok();
    let before = env.latest();
    // The 100 kB answer fits the scratch file but not the transcript under a 101 KiB size limit.
    let mut cca = env.command();
    cca.env("FAKE_SCRIPT", "bytes 100000");
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-c", "ulimit -f 101; exec cca search -r too-big"]);
    cmd.env_clear()
        .envs(cca.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(&env.work);
    let run = run_command(cmd, None);
    run.code(1).stderr_has("could not be saved").stderr_has("File too large");
    let after = env.latest();
    assert!(after.starts_with(&before), "earlier records changed");
    let (t, problems) = cca::transcript::parse(&after).unwrap();
    assert!(problems.is_empty(), "no half-written record: {problems:?}");
    assert_eq!(answers(&t), 1);
    assert_eq!(t.records.last().unwrap().content, "too-big", "the question is kept");
    env.run(&["search", "-r", "next"]).ok();
    assert!(!stdin_of(&env.last_call()).contains("too-big"));
}

#[test]
fn files_are_private_whatever_the_umask() {
    let env = TestEnv::new();
    // cca makes its folder itself here (the environment's config file is not needed).
    std::fs::remove_dir_all(&env.cca_home).unwrap();
    std::os::unix::fs::symlink(cca_exe(), env.bin.join("cca")).unwrap();
    let cca = env.command();
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-c", "umask 000; cca search q && exec cca recall q"]);
    cmd.env_clear()
        .envs(cca.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(&env.work);
    run_command(cmd, None).ok();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.cca_home), 0o700);
    assert_eq!(mode(&env.sessions_dir()), 0o700);
    assert_eq!(mode(&env.cca_home.join("locks")), 0o700);
    assert_eq!(mode(&env.session_path(STAMP)), 0o600);
    assert_eq!(mode(&env.cca_home.join(format!("locks/{STAMP}.lock"))), 0o600);
    // The recall index: its folders, and every file in them, tantivy's own included.
    let recall = env.cca_home.join("recall");
    assert_eq!(mode(&recall), 0o700);
    let mut files = 0;
    for entry in walk(&recall) {
        let want = if entry.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&entry), want, "{}", entry.display());
        files += 1;
    }
    assert!(files > 5, "the index was made");

    env.run(&["doctor"])
        .ok()
        .stdout
        .contains("no problems found")
        .then_some(())
        .expect("a clean bill");
    std::fs::set_permissions(&env.cca_home, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(env.session_path(STAMP), std::fs::Permissions::from_mode(0o644))
        .unwrap();
    env.write_config("");
    std::fs::set_permissions(
        env.cca_home.join("config.toml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let run = env.run(&["doctor"]);
    run.ok();
    assert!(
        run.stdout.contains(&format!(
            "can be read by others (mode 755): run `chmod 700 {}`",
            env.cca_home.display()
        )),
        "{run}"
    );
    assert!(run.stdout.contains("1 transcript can be read by others"), "{run}");
    assert!(run.stdout.contains("config.toml can be read by others (mode 644)"), "{run}");
}

#[test]
fn doctor_lists_engines_and_fails_without_one() {
    let env = TestEnv::new();
    let run = env.run(&["doctor"]);
    run.ok();
    assert!(
        run.stdout.contains(&format!("claude   {}", env.bin.join("claude").display())),
        "{run}"
    );
    assert!(run.stdout.contains("(default)"), "{run}");
    // A transcript that cannot be read is a problem it names, with what to do; an engine is
    // still usable, so the exit is 0 (the exit status is documented in `cca doctor --help`).
    env.run(&["search", "q"]).ok();
    std::fs::write(env.session_path(STAMP), "not a transcript\n").unwrap();
    let run = env.run(&["doctor"]);
    run.ok();
    assert!(run.stdout.contains(&format!("session {STAMP} cannot be read: ")), "{run}");
    assert!(run.stdout.contains(&format!("`cca rm {STAMP}`")), "{run}");
    // A session file that is a link to nothing is in no list: the doctor names it.
    let dangling = env.session_path("20261121-111111");
    std::os::unix::fs::symlink(env.root.path().join("gone.md"), &dangling).unwrap();
    let run = env.run(&["doctor"]);
    run.ok();
    assert!(run.stdout.contains("session 20261121-111111 cannot be listed: it is a link to "));
    assert!(run.stdout.contains(&format!("`rm {}`", dangling.display())), "{run}");
    let none = TestEnv::with_engines(&[]);
    let run = none.run(&["doctor"]);
    run.code(1);
    assert!(run.stdout.contains("no engine is usable"), "{run}");
    assert!(run.stdout.contains("npm install -g @anthropic-ai/claude-code"), "{run}");
}

#[test]
fn hostile_ids_names_and_links_get_clear_errors() {
    let env = TestEnv::new();
    for id in ["../x", "/etc/passwd", "a/b", ".."] {
        env.run(&["search", "-s", id, "q"]).code(2).stderr_has("is not a session id");
    }
    env.run(&["search", "-p", "/etc/passwd", "q"]).code(2).stderr_has("is not a prompt name");
    env.run(&["search", "-s", "nope", "q"]).code(2).stderr_has("no session `nope`");
    // What the user typed comes back in the message, but never an escape sequence of it.
    let typed: [&[&str]; 3] = [
        &["show", "\x1b[31mred"],
        &["name", "\x1b]0;title\x07"],
        &["search", "-s", "\x1b[2J", "q"],
    ];
    for args in typed {
        let run = env.run(args);
        assert_ne!(run.code, Some(0), "{run}");
        assert!(!run.stderr.contains('\x1b') && !run.stderr.contains('\x07'), "{run:?}");
        assert!(run.stderr.contains('\u{fffd}'), "{run}");
    }

    env.run(&["search", "first"]).ok();
    let latest = env.sessions_dir().join("latest");
    for (target, message) in [
        ("/etc/passwd", "not a session file"),
        ("../../x.md", "not a session file"),
        ("session_19990101-000000.md", "does not exist"),
    ] {
        std::fs::remove_file(&latest).unwrap();
        std::os::unix::fs::symlink(target, &latest).unwrap();
        env.run(&["search", "-r", "q"]).code(1).stderr_has(message).stderr_has("cca search");
    }

    let relative = env.run_with(&["search", "q"], None, &[("CCA_HOME", "relative/home")]);
    relative.code(2).stderr_has("CCA_HOME must be an absolute path");
    let blocker = env.root.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let blocked = blocker.join(".cca");
    env.run_with(&["search", "q"], None, &[("CCA_HOME", blocked.to_str().unwrap())])
        .code(2)
        .stderr_has("is not a folder");
}

#[test]
fn a_transcript_edited_into_nonsense_is_refused_clearly() {
    let env = TestEnv::new();
    env.run(&["search", "first"]).ok();
    std::fs::write(env.session_path(STAMP), "just some notes\n").unwrap();
    let run = env.run(&["search", "-r", "q"]);
    run.code(1)
        .stderr_has("is not a transcript cca can read")
        .stderr_has("line 1")
        .stderr_has("hint:");
    assert_eq!(env.calls().len(), 1, "nothing was sent");
}

/// A title edited by hand (or imported) with bidirectional overrides, which reorder the rest of
/// a line as a terminal shows it, is shown without them, on one line, wherever titles are.
#[test]
fn a_title_that_would_reorder_its_line_is_shown_without_the_overrides() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let path = env.session_path(STAMP);
    let text = std::fs::read_to_string(&path).unwrap();
    let hostile =
        text.replacen("\"title\":\"first\"", "\"title\":\"a \u{202e}gnp.exe\u{2066}\"", 1);
    assert_ne!(hostile, text);
    std::fs::write(&path, hostile).unwrap();
    for args in [&["sessions"][..], &["show"], &["recall", "first"]] {
        let run = env.run(args);
        run.ok();
        assert!(!run.stdout.contains(['\u{202e}', '\u{2066}']), "{args:?}: {run}");
        assert!(run.stdout.contains("a gnp.exe"), "{args:?}: {run}");
    }
    // The same in the trash's list, with an escape sequence besides.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("a \u{202e}gnp.exe", "a \u{202e}gnp\\u001b[2J.exe", 1))
        .unwrap();
    env.run(&["rm", STAMP]).ok();
    let run = env.run(&["restore"]);
    run.ok();
    assert!(!run.stdout.contains(['\u{202e}', '\u{1b}']), "{run}");
    assert!(run.stdout.contains("a gnp [2J.exe"), "{run}");
}

#[test]
fn inputs_too_large_for_the_engine_are_refused_before_sending() {
    let env = TestEnv::new();
    let big = "word ".repeat(600_000);
    let run = env.run_with(&["search", "summarise"], Some(big.as_bytes()), &[]);
    run.code(1)
        .stderr_has("for claude, over its limit of 2.4 MiB; it was not sent")
        .stderr_has("nothing was recorded; your question was:\nsummarise");
    assert!(env.calls().is_empty());
    assert!(env.session_files().is_empty(), "a question that cannot be sent starts no session");
    // More than any engine takes: refused as it is read, before it is read whole.
    let run = env.run_with(
        &["search", "-e", "gemini", "summarise"],
        Some("w".repeat(9 << 20).as_bytes()),
        &[],
    );
    run.code(2).stderr_has("stdin is more than any engine takes (8.0 MiB)");
    assert!(env.calls().is_empty());
}

#[test]
fn a_50_megabyte_question_goes_through_an_engine_without_a_limit() {
    let env = TestEnv::new();
    env.add_engine("plain-engine");
    env.write_config("[engines.plain]\ncommand = [\"plain-engine\"]\n");
    let mut query = "x".repeat(50 << 20);
    query.push_str(" end");
    let run = env.run_with(
        &["search", "-e", "plain", "-q"],
        Some(query.as_bytes()),
        &[("FAKE_SCRIPT", "say got it")],
    );
    run.ok();
    assert_eq!(run.stdout, "got it");
    assert!(std::fs::metadata(env.session_path(STAMP)).unwrap().len() > 50 << 20);
}

#[test]
fn odd_engine_output_gives_a_correct_result() {
    let env = TestEnv::new();
    env.add_engine("plain-engine");
    env.write_config("[engines.plain]\ncommand = [\"plain-engine\"]\n");
    let run = env.run_with(
        &["search", "-e", "plain", "q"],
        None,
        &[("FAKE_SCRIPT", "rawbytes 41ff42004300")],
    );
    run.ok().stderr_has("not UTF-8");
    assert_eq!(run.stdout, "A\u{fffd}B\0C\0");
    let (t, _) = parse_latest(&env);
    assert_eq!(t.records.last().unwrap().content, "A\u{fffd}B\0C\0");
    // claude's stream with a line that is not JSON: shown on stderr, not taken as the answer.
    let run = env.run_with(&["search", "q"], None, &[("FAKE_SCRIPT", "raw not json\\n;say fine")]);
    run.ok().stderr_has("not json");
    assert_eq!(run.stdout, "fine");
}

/// Every file and folder under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

#[test]
fn doctor_says_when_the_sessions_folder_cannot_be_written() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "one"]).ok();
    let sessions = env.sessions_dir();
    let mode = |m: u32| {
        std::fs::set_permissions(&sessions, std::os::unix::fs::PermissionsExt::from_mode(m))
            .unwrap()
    };
    mode(0o500);
    let run = env.run_bound_by_modes(&["doctor"], &[]);
    mode(0o700);
    let out = &run.code(1).stdout;
    assert!(out.contains("cannot be written by you") && out.contains("chmod u+rwx"), "{run}");
    assert!(out.contains(&sessions.display().to_string()), "{run}");
}
