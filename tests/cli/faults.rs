//! Faults that hostile testing found: failing stdout and stderr, engines that leave helpers
//! behind, odd files where transcripts should be, hand-edited transcripts. Each test shows the
//! behaviour cca must keep.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::{Command, Stdio};

use crate::common::*;

/// How a test connects one of cca's output streams.
#[derive(Clone, Copy)]
enum Sink {
    /// A pipe the test reads.
    Piped,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
    /// A pipe whose reader is already closed: every write fails with EPIPE.
    Closed,
}

impl Sink {
    fn stdio(self) -> Stdio {
        match self {
            Sink::Piped => Stdio::piped(),
            Sink::Full => std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap().into(),
            Sink::Closed => {
                let (reader, writer) = std::io::pipe().unwrap();
                drop(reader);
                writer.into()
            }
        }
    }
}

/// Runs `cmd` with its stdout and stderr connected as given (with the usual timeout).
fn run_into(mut cmd: Command, stdout: Sink, stderr: Sink) -> Run {
    cmd.stdout(stdout.stdio()).stderr(stderr.stdio());
    let output = wait_with_timeout(cmd.spawn().expect("spawn"), TIMEOUT);
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn cca(env: &TestEnv, args: &[&str]) -> Command {
    let mut cmd = env.command();
    cmd.args(args);
    cmd
}

#[test]
fn an_answer_that_cannot_be_written_to_stdout_exits_1_and_is_kept() {
    let env = TestEnv::new();
    let run = run_into(cca(&env, &["search", "full disk"]), Sink::Full, Sink::Piped);
    run.code(1).stderr_has("cannot write the answer to stdout").stderr_has("cca show");
    assert!(env.latest().contains("ECHO: full disk"), "the exchange is kept");
    assert!(!env.latest().contains("cca:failed"), "the answer itself is not a failure");
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    let env = TestEnv::new();
    let run = run_into(cca(&env, &["search", "closed reader"]), Sink::Closed, Sink::Piped);
    run.ok();
    assert!(env.latest().contains("ECHO: closed reader"));
}

#[test]
fn json_to_a_full_stdout_exits_1_without_a_panic() {
    let env = TestEnv::new();
    let run = run_into(cca(&env, &["search", "--json", "full disk"]), Sink::Full, Sink::Piped);
    run.code(1).stderr_has("cannot write the answer to stdout");
    assert!(!run.stderr.contains("panicked"), "{run}");
    assert!(env.latest().contains("ECHO: full disk"));
    // The same for the listings.
    let run = run_into(cca(&env, &["sessions", "--json"]), Sink::Full, Sink::Piped);
    run.code(1).stderr_has("cannot write to stdout");
}

#[test]
fn a_failing_stderr_never_panics() {
    for sink in [Sink::Full, Sink::Closed] {
        let env = TestEnv::new();
        let mut failing = cca(&env, &["search", "doomed"]);
        failing.env("FAKE_SCRIPT", "err engine trouble;fail boom");
        run_into(failing, Sink::Piped, sink).code(1);
        assert!(env.latest().contains("doomed"), "the question is kept");
        // Errors before any turn, and notices, the same.
        run_into(cca(&env, &["show", "nosuchsession"]), Sink::Piped, sink).code(2);
        run_into(cca(&env, &["clear"]), Sink::Piped, sink).ok();
    }
}

#[test]
fn rm_removes_every_session_when_stderr_is_closed() {
    let env = TestEnv::new();
    for q in ["one", "two", "three"] {
        env.run(&["search", "-q", q]).ok();
    }
    let ids: Vec<String> = env
        .session_files()
        .iter()
        .map(|f| f.trim_start_matches("session_").trim_end_matches(".md").to_string())
        .collect();
    assert_eq!(ids.len(), 3);
    let mut args = vec!["rm"];
    args.extend(ids.iter().map(String::as_str));
    run_into(cca(&env, &args), Sink::Piped, Sink::Closed).ok();
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
}

#[test]
fn json_with_a_cca_home_that_is_not_utf8() {
    let env = TestEnv::new();
    let mut home = env.root.path().join("home").into_os_string().into_vec();
    home.extend_from_slice(b"/caf\xe9");
    let home = OsString::from_vec(home);
    let mut ask = cca(&env, &["search", "--json", "latin"]);
    ask.env("CCA_HOME", &home);
    let run = run_into(ask, Sink::Piped, Sink::Piped);
    run.ok();
    let value: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    assert_eq!(value["answer"], "ECHO: latin");
    assert!(value["path"].as_str().unwrap().contains("caf\u{fffd}"), "{value}");
    let mut list = cca(&env, &["sessions", "--json"]);
    list.env("CCA_HOME", &home);
    let run = run_into(list, Sink::Piped, Sink::Piped);
    run.ok();
    assert!(run.stdout.contains("caf\u{fffd}"), "{run}");
}

/// The pid a fake engine wrote to `path`, once it is there.
fn pid_in(path: &std::path::Path) -> i32 {
    assert!(wait_until(TIMEOUT, || std::fs::read_to_string(path).is_ok_and(|s| !s.is_empty())));
    let pids = std::fs::read_to_string(path).unwrap();
    pids.lines().next().unwrap().parse().unwrap()
}

/// Kills the helpers a fake engine left behind (their pids a line each), when the test ends.
struct Helper(std::path::PathBuf);

impl Drop for Helper {
    fn drop(&mut self) {
        let pids = std::fs::read_to_string(&self.0).unwrap_or_default();
        for pid in
            pids.lines().filter_map(|l| l.parse().ok()).filter_map(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

#[test]
fn a_helper_left_holding_the_pipes_does_not_hold_the_answer() {
    let env = TestEnv::new();
    let helper = Helper(env.root.path().join("helper.pid"));
    let script = format!("detach {};say the whole answer", helper.0.display());
    let run =
        env.run_with(&["search", "q"], None, &[("FAKE_SCRIPT", &script), ("CCA_GRACE_MS", "100")]);
    run.ok();
    assert_eq!(run.stdout.trim_end(), "the whole answer");
    let text = env.latest();
    assert!(text.contains("\n\nthe whole answer\n<!-- cca:end -->"), "{text}");
    assert!(!text.contains("cca:interrupted"), "it was answered: {text}");
    assert!(alive(pid_in(&helper.0)), "the helper is not cca's to end");
}

#[test]
fn a_signal_ends_cca_while_a_helper_holds_the_pipes() {
    let env = TestEnv::new();
    let helper = Helper(env.root.path().join("helper.pid"));
    let script = format!("detach {};say the whole answer", helper.0.display());
    let mut cmd = env.command();
    // A grace this long would outlast the test's timeout: only the signal can end the wait.
    cmd.args(["search", "q"])
        .env("FAKE_SCRIPT", script)
        .env("CCA_GRACE_MS", "600000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut cca = Guard(cmd.spawn().unwrap());
    pid_in(&helper.0);
    let mut stdout = cca.0.stdout.take().unwrap();
    let mut seen = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut seen).unwrap();
    assert_eq!(&seen, b"the whole answer");
    cca.signal(rustix::process::Signal::TERM);
    let output = cca.finish();
    assert_eq!(output.status.code(), Some(143), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(env.latest().contains("the whole answer"));
}

#[test]
fn doctor_does_not_wait_for_a_helper_of_the_version_probe() {
    let env = TestEnv::with_engines(&["claude"]);
    let helper = Helper(env.root.path().join("helper.pid"));
    let script = format!("nostdin;detach {};raw 9.9.9\\n", helper.0.display());
    let run = env.run_with(&["doctor"], None, &[("FAKE_SCRIPT", &script)]);
    assert!(run.stdout.contains("claude"), "{run}");
}

/// An engine that gives no version is said to, with why; one that does not answer within
/// 15 s is a problem (a turn would likely hang as well), where doctor said only "version
/// unknown" after a silent wait.
#[test]
fn doctor_says_why_an_engine_gave_no_version_and_names_one_that_hangs() {
    // The only engine: each engine's version is asked in turn.
    let env = TestEnv::with_engines(&[]);
    env.add_engine("probe");
    env.write_config("[engines.probe]\ncommand = [\"probe\"]\nversion_args = [\"--version\"]\n");
    let run = env.run_with(&["doctor"], None, &[("FAKE_SCRIPT", "nostdin;exit 3")]);
    assert!(run.stdout.contains("--version`: it failed (exit status 3))"), "{run}");
    let run = env.run_with(&["doctor"], None, &[("FAKE_SCRIPT", "nostdin;exit 0")]);
    assert!(run.stdout.contains("--version`: it printed nothing)"), "{run}");
    let run = env.run_with(&["doctor"], None, &[("FAKE_SCRIPT", "nostdin;hang")]);
    run.ok();
    assert!(run.stdout.contains("--version`: it did not answer within 15 s)"), "{run}");
    assert!(run.stdout.contains("a turn with it may hang too"), "{run}");
}

#[test]
fn fifos_and_devices_named_like_sessions_are_reported_not_read() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "real one"]).ok();
    let dir = env.sessions_dir();
    make_fifo(dir.join("session_fifo.md"));
    std::os::unix::fs::symlink("/dev/zero", dir.join("session_zero.md")).unwrap();
    let run = env.run(&["sessions"]);
    run.ok();
    assert!(run.stdout.contains("fifo") && run.stdout.contains("unreadable"), "{run}");
    assert!(run.stdout.contains("not a regular file"), "{run}");
    env.run(&["show", "fifo"]).code(1).stderr_has("FIFO");
    env.run(&["show", "zero"]).code(1).stderr_has("device");
    env.run(&["search", "-q", "-s", "fifo", "more"]).code(1).stderr_has("not a regular file");
    let doctor = env.run(&["doctor"]);
    assert!(doctor.stdout.contains("it is a FIFO, not a regular file"), "{doctor}");
    // Under a whole id: found by it, said to be what it is, and removed as `doctor` advises.
    make_fifo(dir.join("session_20250101-000000.md"));
    std::fs::create_dir(dir.join("session_20250101-000001.md")).unwrap();
    std::os::unix::fs::symlink("/nowhere", dir.join("session_20250101-000002.md")).unwrap();
    env.run(&["show", "20250101-000000"]).code(1).stderr_has("FIFO");
    let run = env.run(&["show", "20250101-000001"]);
    assert!(!run.code(1).stderr.contains("no session"), "{run}");
    let run = env.run(&["path", "20250101-000002"]);
    assert!(run.ok().stdout.contains("session_20250101-000002.md"), "{run}");
    for n in 0..3 {
        env.run(&["rm", &format!("20250101-00000{n}")]).ok();
    }
    assert!(!dir.join("session_20250101-000000.md").exists());
    // ... brought back as `rm` says, and deleted for good.
    env.run(&["restore", "20250101-000001"]).ok();
    assert!(dir.join("session_20250101-000001.md").is_dir());
    for n in 0..3 {
        env.run(&["rm", "--purge", &format!("20250101-00000{n}")]).ok();
    }
    let trash = env.cca_home.join("trash");
    assert!(std::fs::read_dir(&trash).unwrap().next().is_none(), "the trash is empty");
    // `latest` as a FIFO: reported, never read.
    std::fs::remove_file(dir.join("latest")).unwrap();
    make_fifo(dir.join("latest"));
    env.run(&["search", "-q", "-r", "more"]).code(1).stderr_has("not a regular file");
}

#[test]
fn a_fifo_config_or_index_does_not_hang_and_a_link_to_nothing_is_named() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "one"]).ok();
    std::fs::remove_file(env.cca_home.join("index.json")).ok();
    make_fifo(env.cca_home.join("index.json"));
    env.run(&["sessions"]).ok();
    std::fs::remove_file(env.cca_home.join("config.toml")).unwrap();
    make_fifo(env.cca_home.join("config.toml"));
    env.run(&["sessions"]).code(1).stderr_has("not a regular file");
    // A file the user writes that is a link to nothing (a config, a prompt, a sync key kept
    // elsewhere) is named as such, never taken for no file at all.
    std::fs::remove_file(env.cca_home.join("config.toml")).unwrap();
    std::os::unix::fs::symlink("/nowhere/cca.toml", env.cca_home.join("config.toml")).unwrap();
    env.run(&["sessions"])
        .code(2)
        .stderr_has("is a link to /nowhere/cca.toml, which does not exist");
    let doctor = env.run(&["doctor"]);
    assert!(doctor.stdout.contains("which does not exist"), "{doctor}");
    std::fs::remove_file(env.cca_home.join("config.toml")).unwrap();
    std::fs::create_dir_all(env.cca_home.join("prompts")).unwrap();
    std::os::unix::fs::symlink("/nowhere/mine.md", env.cca_home.join("prompts/mine.md")).unwrap();
    env.run(&["search", "-q", "--prompt", "mine", "two"])
        .code(2)
        .stderr_has("mine.md is a link to");
}

#[test]
fn a_session_unreadable_once_is_read_again() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "one"]).ok();
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let good = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    // The same size and mtime, unreadable for a moment (as a permission problem would be).
    let set = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    };
    set(&vec![b'x'; good.len()]);
    let run = env.run(&["sessions"]);
    assert!(run.ok().stdout.contains("unreadable"), "{run}");
    set(&good);
    let run = env.run(&["sessions"]);
    run.ok();
    assert!(!run.stdout.contains("unreadable") && run.stdout.contains("one"), "{run}");
}

#[test]
fn a_huge_engine_error_is_kept_whole_in_the_body_and_shown_briefly() {
    let env = TestEnv::new();
    let page: String =
        (1..=2000).map(|n| format!("<p>line {n} of the proxy's error page</p>\\n")).collect();
    let run = env.run_with(&["search", "q"], None, &[("FAKE_SCRIPT", &format!("fail {page}"))]);
    run.code(1).stderr_has("line 1 of").stderr_has("the whole error is in the transcript");
    assert!(run.stderr.len() < 4000, "a few lines, not the page: {} bytes", run.stderr.len());
    let text = env.latest();
    let marker = text.lines().find(|l| l.starts_with("<!-- cca:failed")).expect("a failed record");
    assert!(marker.chars().count() < 500, "the marker stays small: {} chars", marker.len());
    assert!(text.contains("line 2000 of the proxy's error page</p>"), "the whole error is kept");
    // The record reads back: the next turn has nothing to warn about, and sends no failure.
    let next = env.run(&["search", "-r", "again"]);
    next.ok();
    assert!(!next.stderr.contains("warning"), "{next}");
    assert!(!stdin_of(&env.last_call()).contains("proxy's error page"));
}

#[test]
fn a_byte_order_mark_is_accepted_and_kept() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(std::fs::read(&path).unwrap());
    std::fs::write(&path, &bytes).unwrap();
    let run = env.run(&["search", "-r", "second"]);
    run.ok();
    assert!(!run.stderr.contains("warning") && !run.stderr.contains("error"), "{run}");
    assert_eq!(env.last_users(), ["first"], "the history was read");
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(b"\xef\xbb\xbf<!-- cca:session"), "the mark is kept");
    env.run(&["show"]).ok();
}

#[test]
fn a_latin1_byte_is_named_by_line_and_show_raw_shows_the_bytes() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "cafe"]).ok();
    env.run(&["search", "-q", "-r", "second"]).ok();
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let line = 1 + text.lines().position(|l| l == "cafe").expect("the question's line");
    let mut bytes = text.replacen("\ncafe\n", "\ncaf\u{1}\n", 1).into_bytes();
    let at = bytes.iter().position(|&b| b == 1).unwrap();
    bytes[at] = 0xe9; // Latin-1 é
    std::fs::write(&path, &bytes).unwrap();
    let where_ = format!("line {line}");
    // The file holds UTF-8 besides the stray byte (cca's own `·`): converting it whole would
    // garble that, so the hint is to fix the line, never `iconv`.
    let show = env.run(&["show"]);
    show.code(1).stderr_has(&where_).stderr_has(&format!("fix {where_} by hand"));
    assert!(!show.stderr.contains("iconv"), "{show}");
    env.run(&["search", "-r", "more"]).code(1).stderr_has(&where_).stderr_has("UTF-8");
    let fork = env.run(&["fork", "--at", "1"]);
    fork.code(1).stderr_has(&where_);
    assert!(!fork.stderr.contains("index"), "no byte offsets: {fork}");
    let mut raw = env.command();
    raw.args(["show", "--raw"]);
    let output = wait_with_timeout(raw.stdout(Stdio::piped()).spawn().unwrap(), TIMEOUT);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, bytes, "show --raw prints the file's bytes");
}

/// A header naming another format is not this cca's to read or append to: a newer one says to
/// update cca, and nothing is written.
#[test]
fn a_transcript_of_another_format_is_refused_and_a_newer_one_says_to_update() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    for (format, hint, shown) in [("2", "update cca", "update cca"), ("0", "by hand", "--raw")] {
        let other = text.replacen("\"format\":1", &format!("\"format\":{format}"), 1);
        std::fs::write(&path, &other).unwrap();
        env.run(&["search", "-q", "-r", "more"])
            .code(1)
            .stderr_has(&format!("the header says format {format}; this cca reads format 1"))
            .stderr_has(hint);
        env.run(&["show"]).code(1).stderr_has(shown);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), other, "nothing written");
    }
}

/// A transcript kept elsewhere (a synced folder) behind a link in sessions/: every change goes
/// to that file, and the link stays a link.
#[test]
fn a_session_file_that_is_a_link_stays_a_link_through_every_change() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let path = env.session_path(STAMP);
    let elsewhere = env.root.path().join("elsewhere.md");
    std::fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    // Listed and found before and after a turn: what reads the file's stamp follows the link.
    assert!(env.run(&["sessions"]).ok().stdout.contains("1 turn"));
    env.run(&["recall", "first"]).ok();
    env.run(&["name", STAMP, "kept-elsewhere"]).ok();
    env.run(&["search", "-q", "-s", STAMP, "zebrafish"]).ok();
    assert!(env.run(&["sessions"]).ok().stdout.contains("2 turns"));
    assert!(env.run(&["recall", "zebrafish"]).ok().stdout.contains(STAMP));
    env.run(&["clear", STAMP]).ok();
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
    let text = std::fs::read_to_string(&elsewhere).unwrap();
    assert!(text.contains("\"name\":\"kept-elsewhere\"") && text.contains("zebrafish"), "{text}");
    assert!(text.contains("cca:clear"), "{text}");
}

#[test]
fn latest_as_an_absolute_link_into_the_folder_is_followed() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let latest = env.sessions_dir().join("latest");
    let session = latest.canonicalize().unwrap();
    std::fs::remove_file(&latest).unwrap();
    std::os::unix::fs::symlink(&session, &latest).unwrap();
    env.run(&["search", "-q", "-r", "second"]).ok();
    assert_eq!(env.last_users(), ["first"]);
}

#[test]
fn a_transcript_saved_with_crlf_endings_is_continued_without_stray_returns() {
    let env = TestEnv::new();
    env.converse(&["first", "second"], &[]);
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace('\n', "\r\n")).unwrap();
    let run = env.run(&["search", "-r", "third"]);
    run.ok();
    assert!(!run.stderr.contains("warning"), "{run}");
    assert_eq!(env.last_users(), ["first", "second"]);
    let history = tag(stdin_of(&env.last_call()), "conversation_history").unwrap().to_string();
    assert!(!history.contains('\r'), "{history:?}");
}

#[test]
fn doctor_runs_a_command_engine_only_when_told_how_to_ask_its_version() {
    let env = TestEnv::new();
    env.add_engine("probe");
    env.write_config("[engines.probe]\ncommand = [\"probe\", \"--do-something\"]\n");
    let run = env.run(&["doctor"]);
    assert!(run.stdout.contains("version not asked"), "{run}");
    let probed = |env: &TestEnv| env.calls().iter().any(|c| argv_of(c)[0].ends_with("probe"));
    assert!(!probed(&env), "the command engine was run");
    env.write_config("[engines.probe]\ncommand = [\"probe\"]\nversion_args = [\"--version\"]\n");
    env.run(&["doctor"]);
    assert!(probed(&env), "version_args says how");
    let calls = env.calls();
    let probe = calls.iter().rfind(|c| argv_of(c)[0].ends_with("probe")).unwrap();
    assert_eq!(argv_of(probe)[1..], ["--version"]);
}

#[test]
fn the_size_of_a_large_single_question_is_shown_with_its_bytes() {
    let env = TestEnv::new();
    env.write_config("[compaction]\nwarn_tokens = 100\n");
    let big = "x".repeat(20_000);
    let run = env.run_with(&["search", "short"], Some(big.as_bytes()), &[]);
    run.ok().stderr_has("sending about");
    assert!(!run.stderr.contains("(0 bytes)"), "{run}");
    assert!(run.stderr.contains(" KiB) of context"), "{run}");
}

#[test]
fn ctrl_c_stops_a_shell_loop_around_cca() {
    let env = TestEnv::new();
    let engine_pid = env.root.path().join("engine.pid");
    let script = format!("pid {};hang", engine_pid.display());
    let mut bash = Command::new("bash");
    bash.arg("-c")
        .arg(format!(
            "for q in one two three; do {} search \"$q\"; echo \"after $q: $?\"; done",
            cca_exe().display()
        ))
        .envs(env.command().get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("FAKE_SCRIPT", script)
        .current_dir(&env.work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut bash, 0);
    let bash = Guard(bash.spawn().unwrap());
    pid_in(&engine_pid);
    // As a terminal does: Ctrl-C goes to the whole foreground group, the shell included.
    let group = rustix::process::Pid::from_raw(bash.0.id() as i32).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::INT).unwrap();
    let output = bash.finish();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("after"), "the loop went on: {stdout}");
    assert_eq!(shell_status(output.status), 130, "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(env.calls().len(), 1, "one question, then the loop stopped");
    assert!(env.latest().contains("<!-- cca:interrupted "));
}

/// Replaces a file the way vim and `sed -i` save: a new file renamed over it.
fn save_as_new_file(path: &std::path::Path, text: &str) {
    let temp = path.with_file_name(".edited.tmp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

#[test]
fn an_editor_that_saves_during_a_turn_loses_nothing() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    // A new file renamed over the transcript (vim, `sed -i`), or the same file written over
    // (nano, VS Code, vim through the `latest` link); with the question in the editor's
    // version, or a version loaded before the question was appended.
    let cases = [(1, false, true), (2, true, true), (3, false, false), (4, true, false)];
    for (n, stale, as_new_file) in cases {
        let before = std::fs::read_to_string(&path).unwrap();
        let (pid, go) =
            (env.root.path().join(format!("pid{n}")), env.root.path().join(format!("go{n}")));
        let script = format!("pid {};await {};echo", pid.display(), go.display());
        let mut cmd = env.command();
        cmd.args(["search", "-r", &format!("question {n}")])
            .env("FAKE_SCRIPT", script)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let cca = Guard(cmd.spawn().unwrap());
        pid_in(&pid);
        let base = if stale { before } else { std::fs::read_to_string(&path).unwrap() };
        let edited = format!("{base}\nA note added by hand {n}.\n");
        if as_new_file {
            save_as_new_file(&path, &edited);
        } else {
            std::fs::write(&path, &edited).unwrap();
        }
        std::fs::write(&go, "").unwrap();
        let output = cca.finish();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        match (as_new_file, stale) {
            (true, _) => assert!(stderr.contains("was replaced"), "{stderr}"),
            (false, true) => assert!(stderr.contains("was saved over"), "{stderr}"),
            (false, false) => assert!(!stderr.contains("warning"), "{stderr}"),
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(&format!("A note added by hand {n}.")), "the editor's version");
        assert!(text.contains(&format!("ECHO: question {n}")), "the answer: {text}");
        assert_eq!(text.matches(&format!("\nquestion {n}\n")).count(), 1, "{text}");
    }
    env.run(&["search", "-q", "-r", "next"]).ok();
    let asked = ["first", "question 1", "question 2", "question 3", "question 4"];
    assert_eq!(env.last_users(), asked);
}

#[test]
fn a_header_naming_another_file_as_its_prompt_does_not_send_it() {
    let env = TestEnv::new();
    let prompt = env.root.path().join("brief.md");
    std::fs::write(&prompt, "Be brief.").unwrap();
    let secret = env.root.path().join("id_rsa");
    std::fs::write(&secret, "PRIVATE KEY").unwrap();
    env.run(&["search", "-q", "--prompt-file", prompt.to_str().unwrap(), "first"]).ok();
    env.run(&["search", "-q", "-r", "second"]).ok();
    assert!(stdin_of(&env.last_call()).contains("Be brief."), "its own prompt file is sent");
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let named = format!("\"prompt\":\"{}\"", prompt.display());
    assert!(text.contains(&named), "{text}");
    let hostile = text.replacen(&named, &format!("\"prompt\":\"{}\"", secret.display()), 1);
    std::fs::write(&path, hostile).unwrap();
    let calls = env.calls().len();
    let run = env.run(&["search", "-q", "-r", "third"]);
    run.code(2).stderr_has("--prompt-file").stderr_has("--prompt ").stderr_has("not sent");
    assert_eq!(env.calls().len(), calls, "no engine ran");
    // The user names a prompt: the turn goes ahead with it.
    env.run(&["search", "-q", "-r", "--prompt-file", prompt.to_str().unwrap(), "fourth"]).ok();
    assert!(env.calls().iter().all(|c| !stdin_of(c).contains("PRIVATE KEY")));
    // A file whose text changed since the session started is not sent either.
    std::fs::write(&path, text).unwrap();
    std::fs::write(&prompt, "PRIVATE KEY").unwrap();
    env.run(&["search", "-q", "-r", "fifth"]).code(2);
    assert!(env.calls().iter().all(|c| !stdin_of(c).contains("PRIVATE KEY")));
}

#[test]
fn show_prints_header_fields_without_terminal_escapes() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let path = env.sessions_dir().join("latest").canonicalize().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let hostile = text.replacen(
        "\"title\":\"first\"",
        "\"title\":\"\\u001b]0;owned\\u0007\\u001b[2Jfirst\",\"model\":\"m\\u001b[31m\"",
        1,
    );
    assert_ne!(hostile, text);
    std::fs::write(&path, hostile).unwrap();
    let run = env.run(&["show"]);
    run.ok();
    assert!(!run.stdout.contains('\u{1b}') && !run.stdout.contains('\u{7}'), "{:?}", run.stdout);
    assert!(run.stdout.contains("first"), "{run}");
}

#[test]
fn a_question_is_kept_or_repeated_when_latest_or_the_transcript_is_in_the_way() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let latest = env.sessions_dir().join("latest");
    std::fs::remove_file(&latest).unwrap();
    std::fs::create_dir(&latest).unwrap();
    // A new session: the question is recorded, and the warning names the session.
    let run = env.run(&["search", "-q", "new question"]);
    run.ok().stderr_has("--session");
    let kept = env.session_files().iter().any(|f| {
        std::fs::read_to_string(env.sessions_dir().join(f)).unwrap().contains("\nnew question\n")
    });
    assert!(kept, "the question is in a transcript");
    // Continuing: nothing can be recorded, and the message says so and repeats the question.
    let run = env.run(&["search", "-q", "-r", "lost words"]);
    assert_ne!(run.code, Some(0));
    run.stderr_has("nothing was recorded").stderr_has("lost words");
}

#[test]
fn a_question_that_cannot_be_saved_is_repeated_whatever_is_in_the_way() {
    // A prompt file that is missing: nothing is recorded, and the question is given back.
    let env = TestEnv::new();
    let run = env.run(&["search", "--prompt-file", "/nonexistent/prompt.md", "words one"]);
    assert_ne!(run.code, Some(0));
    run.stderr_has("nothing was recorded").stderr_has("words one");
    assert!(env.session_files().is_empty() || !env.latest().contains("words one"));

    // A transcript that is not one cca can read.
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let file = env.sessions_dir().join(&env.session_files()[0]);
    std::fs::write(&file, "not a transcript at all\n").unwrap();
    let run = env.run(&["search", "-q", "-r", "words two"]);
    assert_ne!(run.code, Some(0));
    run.stderr_has("nothing was recorded").stderr_has("words two");

    // A lock that cannot be opened: the locks folder is a file.
    let env = TestEnv::new();
    env.run(&["search", "-q", "first"]).ok();
    let locks = env.cca_home.join("locks");
    std::fs::remove_dir_all(&locks).unwrap();
    std::fs::write(&locks, "in the way").unwrap();
    let run = env.run(&["search", "-q", "-r", "words three"]);
    assert_ne!(run.code, Some(0));
    run.stderr_has("nothing was recorded").stderr_has("words three");
    assert!(!env.latest().contains("words three"), "{}", env.latest());
}

#[test]
fn a_scratch_file_that_cannot_be_written_stops_the_engine_and_keeps_what_arrived() {
    let env = TestEnv::new();
    let root = env.root.path();
    let (engine_pid, termed, go1, go2) =
        (root.join("engine.pid"), root.join("termed"), root.join("go1"), root.join("go2"));
    // The engine notes SIGTERM instead of dying, and ends only when told: the test lifts the
    // file-size limit between the failed write and the record, as a disk that filled up and
    // was freed would.
    let script = format!(
        "note-term {};pid {};say partial answer;await {};bytes 100000;await {}",
        termed.display(),
        engine_pid.display(),
        go1.display(),
        go2.display()
    );
    let mut cmd = env.command();
    cmd.args(["search", "q"])
        .env("FAKE_SCRIPT", script)
        .env("CCA_GRACE_MS", "600000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut cca = Guard(cmd.spawn().unwrap());
    let engine = pid_in(&engine_pid);
    let mut stdout = cca.0.stdout.take().unwrap();
    let mut seen = [0u8; 14];
    std::io::Read::read_exact(&mut stdout, &mut seen).unwrap();
    assert_eq!(&seen, b"partial answer");
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));

    // From now on no file of cca's may pass 2000 bytes: the scratch file fills up.
    let pid = rustix::process::Pid::from_raw(cca.0.id() as i32);
    let fsize = rustix::process::Resource::Fsize;
    let hard = rustix::process::getrlimit(fsize).maximum;
    let small = rustix::process::Rlimit { current: Some(2000), maximum: hard };
    let unlimited = rustix::process::prlimit(pid, fsize, small).expect("lower the limit");
    std::fs::write(&go1, "").unwrap();
    assert!(wait_until(TIMEOUT, || termed.exists()), "cca did not stop the engine");
    rustix::process::prlimit(pid, fsize, unlimited).expect("lift the limit");
    std::fs::write(&go2, "").unwrap();

    let output = cca.finish();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write the answer's scratch file: File too large"), "{stderr}");
    assert!(!alive(engine), "the engine is still running");
    let text = env.latest();
    assert!(text.contains("<!-- cca:failed "), "{text}");
    assert!(text.contains("cannot write the answer's scratch file"), "{text}");
    assert!(text.contains("partial answerThe quick brown fox"), "what arrived is kept: {text}");
}

#[test]
fn an_answer_shown_but_not_saved_fails_and_the_next_turn_names_its_question() {
    let env = TestEnv::new();
    env.run(&["search", "-q", "first question"]).ok();
    let go = env.root.path().join("go");
    let script = format!("say the lost answer;await {}", go.display());
    let mut cmd = env.command();
    cmd.args(["search", "-r", "the lost question"])
        .env("FAKE_SCRIPT", script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut cca = Guard(cmd.spawn().unwrap());
    let mut stdout = cca.0.stdout.take().unwrap();
    let mut seen = [0u8; 15];
    std::io::Read::read_exact(&mut stdout, &mut seen).unwrap();
    assert_eq!(&seen, b"the lost answer", "the answer reached the screen");
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));

    // The transcript, with the question, may not grow any more: the disk is full.
    let transcript = env.sessions_dir().join("latest").canonicalize().unwrap();
    let size = std::fs::metadata(&transcript).unwrap().len();
    let pid = rustix::process::Pid::from_raw(cca.0.id() as i32);
    let fsize = rustix::process::Resource::Fsize;
    let hard = rustix::process::getrlimit(fsize).maximum;
    let full = rustix::process::Rlimit { current: Some(size), maximum: hard };
    rustix::process::prlimit(pid, fsize, full).expect("lower the limit");
    std::fs::write(&go, "").unwrap();

    let output = cca.finish();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cca: error: the answer was shown but could not be saved"), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    let text = env.latest();
    assert!(text.contains("the lost question") && !text.contains("the lost answer"), "{text}");

    // The next turn leaves the question out, and says which.
    let run = env.run(&["search", "-q", "-r", "next question"]);
    run.ok()
        .stderr_has("turn 2's question has no answer")
        .stderr_has("it is recorded as interrupted")
        .stderr_has("the lost question");
    assert_eq!(env.last_users(), ["first question"], "the history");
    // As the warning says: the question has its outcome in the transcript, once.
    let (summary, _) = cca::transcript::parse(&env.latest()).unwrap();
    let kinds: Vec<_> = summary.records.iter().map(|r| r.kind).collect();
    use cca::transcript::Kind;
    assert_eq!(
        kinds,
        [Kind::User, Kind::Assistant, Kind::User, Kind::Interrupted, Kind::User, Kind::Assistant]
    );
    assert!(!stdin_of(&env.last_call()).contains("the lost question"));
}
