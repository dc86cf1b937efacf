//! The test environment, shared by the test binaries: each test runs the built `cca` in its own temp HOME and CCA_HOME, with
//! fake engines first on PATH, a fixed clock, and a timeout on every process it starts.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// No test process may run longer than this: a hang fails the test instead of stalling CI.
pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const NOW: &str = "2026-11-21T10:15:00Z";
pub const STAMP: &str = "20261121-101500";

/// A real engine installed by `make engines` / `make llm`: from the variable the Makefile sets,
/// else from where the Makefile puts it.
pub fn real_program(var: &str, under_build: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("build").join(under_build));
    let target = make_target(under_build);
    assert!(
        path.exists(),
        "{} is missing: a plain `cargo test` needs the pinned tools the Makefile installs into \
         build/: run `make {target}` once (or `make test`, which installs them all and runs every \
         test)",
        path.display()
    );
    path
}

/// The Makefile target that installs what lives at `under_build` in build/.
fn make_target(under_build: &str) -> &'static str {
    match under_build.split('/').next().unwrap_or("") {
        "engines" => "engines",
        "llm-venv" => "llm",
        "acp-clients" => "acp-clients",
        "acp-schema" => "acp-schema",
        "mcp-clients" => "mcp-clients",
        "codex" => "codex",
        "sshd-venv" => "sshd",
        _ => "test",
    }
}

/// Puts back the default action of every signal the test process was started ignoring, once,
/// so that what the tests spawn starts as it would from a terminal, whoever ran the tests: a
/// background job (`make test &`) ignores SIGINT and SIGQUIT, `nohup` SIGHUP, and a child
/// inherits that (a shell cannot even trap a signal ignored when it started, so a shell loop
/// around cca went on after Ctrl-C). Handlers the runtime set (SIGPIPE ignored, which spawned
/// programs get back as default anyway) are left alone. Called by every [`TestEnv`].
pub fn default_signals() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        for signal in 1..32 {
            if [libc::SIGKILL, libc::SIGSTOP, libc::SIGPIPE].contains(&signal) {
                continue;
            }
            // No safe wrapper in the crates cca uses; these calls only read and reset a
            // disposition; every test waits here (`Once`) before it spawns anything.
            #[allow(unsafe_code)]
            // SAFETY: `sigaction` with a null new action only reads the disposition into
            // `old`, a zeroed `sigaction` that it fills; `signal` with `SIG_DFL` installs no
            // handler.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                    && old.sa_sigaction == libc::SIG_IGN
                {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
        }
    });
}

pub fn cca_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cca"))
}

/// The fake engine, the `fake-engine` example target. `cargo test` builds it; a filtered run
/// (`cargo test --test cli`) does not, so it is built here, once, when missing.
pub fn fake_engine() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            let profile_dir =
                exe.parent().and_then(Path::parent).expect("target/<profile>/deps/..");
            let path = profile_dir.join("examples").join("fake-engine");
            if !path.is_file() {
                let target_dir = profile_dir.parent().expect("target/<profile>");
                let mut build = std::process::Command::new(env!("CARGO"));
                build.args(["build", "--example", "fake-engine", "--target-dir"]);
                build.arg(target_dir).current_dir(env!("CARGO_MANIFEST_DIR"));
                if profile_dir.file_name().is_some_and(|p| p == "release") {
                    build.arg("--release");
                }
                let status = build.status().expect("cargo runs");
                assert!(status.success() && path.is_file(), "cannot build {}", path.display());
            }
            path
        })
        .clone()
}

pub struct TestEnv {
    /// Config files get what the fake engines need ([`with_fake_defaults`]).
    fake_defaults: bool,
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub cca_home: PathBuf,
    pub bin: PathBuf,
    pub log: PathBuf,
    pub work: PathBuf,
}

impl TestEnv {
    /// An environment with fake `claude` and `gemini` on PATH.
    pub fn new() -> TestEnv {
        Self::with_engines(&["claude", "gemini"])
    }

    /// With the fake engines, whose tests read cca's framing on stdin (the tags around the
    /// history and the question): the config file gets what they need ([`with_fake_defaults`]).
    /// The defaults themselves are tested through the real engines (tests/real) and by the
    /// tests that set them.
    pub fn with_engines(names: &[&str]) -> TestEnv {
        let mut env = Self::in_dir(&std::env::temp_dir(), names);
        env.fake_defaults = true;
        env.write_config("");
        env
    }

    /// An environment in a folder of `base`. (gemini ignores settings files below a folder
    /// others can write to, such as /tmp, so the real engines run under target/tmp.)
    pub fn in_dir(base: &Path, names: &[&str]) -> TestEnv {
        default_signals();
        std::fs::create_dir_all(base).unwrap();
        let root = tempfile::tempdir_in(base).expect("a temp dir");
        let r = root.path();
        let (home, bin, log, work) = (r.join("home"), r.join("bin"), r.join("log"), r.join("work"));
        for d in [&home, &bin, &log, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        let env = TestEnv {
            fake_defaults: false,
            cca_home: home.join(".cca"),
            root,
            home,
            bin,
            log,
            work,
        };
        for name in names {
            env.add_engine(name);
        }
        env
    }

    /// Puts the fake engine on PATH under this name.
    pub fn add_engine(&self, name: &str) -> PathBuf {
        let path = self.bin.join(name);
        std::os::unix::fs::symlink(fake_engine(), &path).unwrap();
        path
    }

    pub fn path_var(&self) -> String {
        format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin.display())
    }

    /// A `cca` command in this environment, with nothing of the test process's environment.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(cca_exe());
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("CCA_HOME", &self.cca_home)
            .env("PATH", self.path_var())
            .env("CCA_NOW", NOW)
            .env("TERM", "dumb")
            .env("FAKE_LOG_DIR", &self.log)
            .current_dir(&self.work)
            .stdin(Stdio::null());
        cmd
    }

    /// A `cca` command for a pty (rexpect): the pty is its stdin, and the terminal is capable.
    pub fn pty_command(&self) -> Command {
        let mut cmd = self.command();
        cmd.stdin(Stdio::inherit()).env("TERM", "xterm-256color");
        cmd
    }

    /// Runs `cca ARGS` to completion (with a timeout), stdin from `input` if given.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, None, &[])
    }

    /// Runs `cca ARGS` allowed to write no file larger than `bytes`: a full disk, as a write
    /// sees it.
    pub fn run_on_full_disk(&self, bytes: u64, args: &[&str]) -> Run {
        let base = self.command();
        let mut command = Command::new("prlimit");
        command.env_clear().current_dir(&self.work);
        command.envs(base.get_envs().filter_map(|(key, value)| Some((key, value?))));
        command.arg(format!("--fsize={bytes}")).arg(cca_exe()).args(args);
        run_command(command, None)
    }

    /// Runs `cca ARGS` as a user whom file modes bind: this one, or (as root, whom none
    /// binds) `nobody`, given the test's whole folder first; `keep_roots` stay root's.
    pub fn run_bound_by_modes(&self, args: &[&str], keep_roots: &[&Path]) -> Run {
        if !rustix::process::geteuid().is_root() {
            return self.run(args);
        }
        let nobody = "65534";
        let chown = |args: &[&str]| {
            let status = Command::new("chown").args(args).status().unwrap();
            assert!(status.success());
        };
        chown(&["-R", &format!("{nobody}:{nobody}"), self.root.path().to_str().unwrap()]);
        for path in keep_roots {
            chown(&["0:0", path.to_str().unwrap()]);
        }
        let base = self.command();
        let mut command = Command::new("setpriv");
        command.args([
            &format!("--reuid={nobody}"),
            &format!("--regid={nobody}"),
            "--clear-groups",
        ]);
        command.env_clear().current_dir(&self.work);
        command.envs(base.get_envs().filter_map(|(key, value)| Some((key, value?))));
        command.arg(cca_exe()).args(args);
        run_command(command, None)
    }

    pub fn run_with(&self, args: &[&str], input: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command();
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        run_command(cmd, input)
    }

    /// What each engine call received, in order: argv, stdin, env.
    /// (A call that ended before it read its input, an engine on standby ended unused, leaves
    /// no record: its number is skipped.)
    pub fn calls(&self) -> Vec<Value> {
        let mut numbered: Vec<(u64, PathBuf)> = std::fs::read_dir(&self.log)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|path| {
                let name = path.file_name()?.to_str()?;
                let n = name.strip_prefix("call-")?.strip_suffix(".json")?.parse().ok()?;
                Some((n, path))
            })
            .collect();
        numbered.sort();
        numbered
            .into_iter()
            .map(|(_, path)| serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
            .collect()
    }

    pub fn last_call(&self) -> Value {
        self.calls().pop().expect("the engine was called")
    }

    /// The user turns the last engine call received as history.
    pub fn last_users(&self) -> Vec<String> {
        history_users(stdin_of(&self.last_call()))
    }

    /// Starts a session with the first question and continues it with the others (`-q`),
    /// each with these variables; every turn must succeed.
    pub fn converse(&self, questions: &[&str], vars: &[(&str, &str)]) {
        for (i, q) in questions.iter().enumerate() {
            let args: &[&str] =
                if i == 0 { &["search", "-q", q] } else { &["search", "-q", "-r", q] };
            self.run_with(args, None, vars).ok();
        }
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.cca_home.join("sessions")
    }

    pub fn session_path(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(format!("session_{id}.md"))
    }

    /// The transcript `latest` points at.
    pub fn latest(&self) -> String {
        std::fs::read_to_string(self.sessions_dir().join("latest")).expect("a latest session")
    }

    pub fn session_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.sessions_dir())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("session_"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Writes config.toml. In an environment of fake engines ([`TestEnv::with_engines`]) it
    /// gets what they need ([`with_fake_defaults`]).
    pub fn write_config(&self, text: &str) {
        // Private, as cca makes it.
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.cca_home).unwrap();
        let text = if self.fake_defaults { with_fake_defaults(text) } else { text.to_string() };
        std::fs::write(self.cca_home.join("config.toml"), text).unwrap();
    }
}

/// `text` with what the fake engines need, last in their sections (the lines a test's error
/// messages name stay where they are), each unless set there or the text is no TOML: claude,
/// gemini and codex frame their history inline (the tests read the framing), and gemini and
/// codex are started for each turn (kept, gemini runs as an ACP agent and codex as its app
/// server, which the fake is not; tests/real keeps the real ones).
fn with_fake_defaults(text: &str) -> String {
    let mut out = text.to_string();
    if text.parse::<toml::Table>().is_err() {
        // A test of a broken file: as it is, to the byte.
        return out;
    }
    let history = ("history", "\"inline\"");
    let cold = ("keep_warm", "\"off\"");
    let defaults =
        [("claude", &[history][..]), ("gemini", &[history, cold]), ("codex", &[history, cold])];
    for (engine, keys) in defaults {
        let header = format!("[engines.{engine}]\n");
        if !out.contains(&header) {
            out.push_str(&format!("\n{header}"));
        }
        for (key, value) in keys {
            let start = out.find(&header).expect("added") + header.len();
            let end = out[start..].find("\n[").map_or(out.len(), |end| start + end + 1);
            if !out[start..end].contains(key) {
                let line = if out[..end].ends_with('\n') { "" } else { "\n" };
                out.insert_str(end, &format!("{line}{key} = {value}\n"));
            }
        }
    }
    out
}

/// A finished run.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    #[track_caller]
    pub fn ok(&self) -> &Run {
        assert_eq!(self.code, Some(0), "expected success\n{self}");
        self
    }

    #[track_caller]
    pub fn code(&self, code: i32) -> &Run {
        assert_eq!(self.code, Some(code), "expected exit {code}\n{self}");
        self
    }

    #[track_caller]
    pub fn stderr_has(&self, text: &str) -> &Run {
        assert!(self.stderr.contains(text), "stderr lacks {text:?}\n{self}");
        self
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit: {:?}\n--- stdout\n{}\n--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Runs a command to completion, killing it if it outlives [`TIMEOUT`].
pub fn run_command(mut cmd: Command, input: Option<&[u8]>) -> Run {
    // Never the test process's own stdin: a terminal, a pipe or nothing, depending on who ran
    // the tests.
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    run_with_stdin_set(cmd, input)
}

/// As [`run_command`], for a command whose stdin the test has set itself (piped when `input`
/// is given).
pub fn run_with_stdin_set(mut cmd: Command, input: Option<&[u8]>) -> Run {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&input);
        });
    }
    let output = wait_with_timeout(child, TIMEOUT);
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Waits for a child, reading its output; kills it and fails the test after `timeout`.
pub fn wait_with_timeout(child: Child, timeout: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(output) => output.expect("wait"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the process did not finish within {timeout:?}");
        }
    }
}

/// Kills a spawned child if the test ends (or panics) before it does.
pub struct Guard(pub Child);

impl Guard {
    /// Sends the child a signal.
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.0.id() as i32).expect("a live pid");
        rustix::process::kill_process(pid, signal).expect("send a signal");
    }

    /// Waits for the child to end (failing the test after [`TIMEOUT`]), with what is left of
    /// its output.
    pub fn finish(mut self) -> Output {
        let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout =
            read(self.0.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
        let stderr =
            read(self.0.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.0.try_wait().expect("wait") {
                break status;
            }
            assert!(start.elapsed() < TIMEOUT, "the process did not finish within {TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(10));
        };
        Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The status a shell reports for a process: its exit code, or 128 + the signal that ended it
/// (cca dies by SIGINT after Ctrl-C, as the shell convention asks).
pub fn shell_status(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().expect("an exit code or a signal"))
}

/// Polls `check` until it is true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    check()
}

/// Whether a process is a zombie; `None` when it is gone.
fn zombie(pid: i32) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
}

/// Whether a process exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    zombie(pid) == Some(false)
}

/// Makes a FIFO at `path` (nothing ever writes to it): what a reader without a check waits on
/// forever.
pub fn make_fifo(path: impl AsRef<Path>) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path.as_ref(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// Whether a process has wholly ended: reaped, or a zombie none of whose threads still runs.
/// A killed multithreaded program (node) shows its first thread as a zombie while the others
/// are still closing its files, such as the pipes its parent reads.
pub fn wholly_ended(pid: i32) -> bool {
    match zombie(pid) {
        None => true,
        Some(false) => false,
        Some(true) => {
            std::fs::read_dir(format!("/proc/{pid}/task")).map_or(true, |t| t.count() <= 1)
        }
    }
}

/// The text of a call's stdin between `<tag>` and `</tag>` (the first such part).
pub fn tag<'a>(stdin: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>\n");
    let close = format!("\n</{name}>");
    let start = stdin.find(&open)? + open.len();
    let end = stdin[start..].find(&close)? + start;
    Some(&stdin[start..end])
}

/// The user turns a call's stdin carried as history, oldest first.
/// The questions a transcript holds, in order (a user record each, asked or not).
pub fn questions(transcript: &str) -> Vec<String> {
    let (t, _) = cca::transcript::parse(transcript).expect("a transcript");
    t.records
        .into_iter()
        .filter(|r| r.kind == cca::transcript::Kind::User)
        .map(|r| r.content)
        .collect()
}

pub fn history_users(stdin: &str) -> Vec<String> {
    let Some(history) = tag(stdin, "conversation_history") else { return Vec::new() };
    history
        .split("<user_turn>\n")
        .skip(1)
        .map(|part| part.split("\n</user_turn>").next().unwrap().to_string())
        .collect()
}

pub fn stdin_of(call: &Value) -> &str {
    call["stdin"].as_str().expect("stdin recorded")
}

pub fn argv_of(call: &Value) -> Vec<&str> {
    call["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect()
}
