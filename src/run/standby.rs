//! An engine on standby for the next one-shot turn (docs/DESIGN.md, "Standby"). A small process
//! of its own, `cca __standby`, starts the engine as the next turn would start it cold, lets it
//! do its start-up work (an ACP agent opens its session), and waits. The cca that takes it over
//! is handed the engine's pipes over a Unix socket in `$CCA_HOME/standby/`, the descriptors
//! passed along (`SCM_RIGHTS`), and runs the turn on them as on an engine it started itself.
//! The standby stays the engine's parent: it tells the taker how the engine ended, and ends the
//! engine when the taker goes away first, as a cold start's engine ends with its cca.
//!
//! One per kind (an engine's name): the cca that launches it binds the kind's socket before it
//! starts the standby, so that it is reached from that moment on, and a standby whose socket
//! was replaced by a newer one's ends. It serves only a turn whose cold start would be the same
//! ([`Order::key`]); any other request for it ends it. It ends after its idle time, when the
//! engine ends, when the engine program's file changes, on a signal, and on request. Only this
//! user reaches it: the folder is 0700, and each side checks its peer. No client holds it up:
//! each is heard out within its own time and line length, beside the others.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use rustix::process::Pid;
use serde::{Deserialize, Serialize};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

use super::kept::{Adopted, OPEN_TIMEOUT};
use super::{
    Cancel, Guard, Pipe, group_members, own_program, spawn_engine, stop_leftovers, terminate,
};
use crate::engine::{acp_agent, claude};
use crate::store::socket::{self, Socket, peer_allowed};

/// How long a client may take to say what it wants, and to be answered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How long `cca standby`, `--end` and `cca rm` wait for a standby's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a taker waits for a standby's first word before it starts the engine cold.
const TAKE_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest request a client may send.
const MAX_REQUEST: usize = 4096;

/// How often the standby looks at what it does not hear of (its idle time, its socket, the
/// engine program's file).
const TICK: Duration = Duration::from_millis(200);

/// What a waiting engine may write before a turn takes it; more, and it is not waiting.
const MAX_SAID: usize = 1024 * 1024;

/// What a standby starts, and for which turns.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Order {
    /// One standby per kind: the engine's name.
    pub kind: String,
    /// What a cold start of the next turn depends on: a turn with another key starts cold.
    pub key: String,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// How long the engine's group has between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// How long it waits for a turn.
    pub idle: Duration,
    /// What the engine does before it waits.
    pub opening: Opening,
    /// Files the engine was started with (its history, a system prompt): removed when it ends.
    pub files: Option<PathBuf>,
    /// `$CCA_HOME/standby/`: its socket and lock.
    pub dir: PathBuf,
    /// The session whose conversation it holds: removing the session ends it.
    pub session: String,
    /// Its socket file, as [`launch`] bound it (inode): when the file is another, a newer
    /// standby took the kind's place, and this one ends.
    #[serde(default)]
    pub socket: u64,
}

/// The start-up work an engine does before it waits, and how the standby knows it is done.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Opening {
    /// claude: asked to initialize; done when it answers.
    Initialize,
    /// An ACP agent: done when its session is open.
    AcpSession,
    /// The JSON-RPC session of the engine of this kind (`engine::Keeping::Rpc`, codex's app
    /// server): done when it is open. It resumes the engine's own session `resume`, if given.
    Rpc {
        kind: String,
        #[serde(default)]
        resume: Option<String>,
    },
}

impl Opening {
    /// The session of the kind named, as its engine describes it.
    fn rpc(kind: &str) -> Result<&'static crate::engine::RpcSession> {
        let spec = crate::engine::KINDS.iter().find(|spec| spec.name == kind);
        match spec.and_then(|spec| spec.keeps) {
            Some(crate::engine::Keeping::Rpc(rpc)) => Ok(rpc),
            _ => anyhow::bail!("{kind} has no session of its own to open"),
        }
    }

    /// The requests that start the work.
    fn lines(&self) -> Result<Vec<String>> {
        Ok(match self {
            Opening::Initialize => vec![claude::initialize_line()],
            Opening::AcpSession => acp_agent::opening_lines(&std::env::current_dir()?).to_vec(),
            Opening::Rpc { kind, resume } => {
                (Opening::rpc(kind)?.opening_lines)(&std::env::current_dir()?, resume.as_deref())
            }
        })
    }

    /// Whether a line the engine wrote says the work is done: then, an ACP agent's session (or
    /// why it opened none).
    fn done(&self, line: &[u8]) -> Option<Result<Option<String>>> {
        let session_of = match self {
            Opening::Initialize => return claude::initialized(line).then_some(Ok(None)),
            Opening::AcpSession => acp_agent::session_of,
            Opening::Rpc { kind, .. } => match Opening::rpc(kind) {
                Ok(rpc) => rpc.session_of,
                Err(e) => return Some(Err(e)),
            },
        };
        session_of(line).map(|opened| opened.map(Some).map_err(anyhow::Error::msg))
    }
}

/// What a client asks a standby.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Request {
    /// The engine, for a turn whose cold start has this key.
    Take {
        key: String,
    },
    Status,
    End,
    /// Ends it if it holds this session's conversation.
    EndSession {
        session: String,
    },
}

/// What a standby answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    /// The engine's group (its pipes go with this line), what it wrote meanwhile, its session.
    Handover {
        group: i32,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        session: Option<String>,
    },
    /// The engine is still starting: the handover follows when it is ready.
    Starting,
    /// Started for another turn than this one: it ends.
    Stale,
    Status(Status),
    Ended,
    /// The taken engine ended: its raw wait status.
    Exit {
        status: i32,
    },
}

/// An engine waiting for a turn, as `cca doctor` and `cca standby` show it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Status {
    pub kind: String,
    pub program: PathBuf,
    pub folder: PathBuf,
    /// Its process group (the guard's pid); 0 before the engine is started.
    pub group: i32,
    /// The session whose conversation it holds.
    pub session: String,
    /// The files the engine was started with: in use, not left over.
    pub files: Option<PathBuf>,
    /// Done with its start-up (an ACP agent's session is open).
    pub ready: bool,
    pub idle_left: Duration,
    /// The resident memory of its processes, in bytes.
    pub memory: u64,
}

/// Starts `cca __standby` for `order`, detached, and returns at once; nothing when cca's own
/// binary is not known (unit tests). The kind's socket is bound here, before the standby runs,
/// and handed to it as its stdout: from now on `cca standby`, `--end` and the next turn reach
/// it, and the one before, finding its socket replaced, ends.
pub(crate) fn launch(mut order: Order) -> Result<()> {
    let Some(cca) = own_program() else { return Ok(()) };
    let name = socket_name(&order.kind);
    let socket = Socket::listen(&order.dir, &name)?;
    order.socket = socket_inode(&order.dir.join(&name)).unwrap_or_default();
    let listener = socket.keep()?;
    let text = serde_json::to_string(&order)?;
    let mut child = Command::new(cca)
        .arg("__standby")
        .stdin(Stdio::piped())
        .stdout(Stdio::from(OwnedFd::from(listener)))
        .stderr(Stdio::null())
        .spawn()
        .inspect_err(|_| remove_socket(&order))
        .with_context(|| format!("cannot run {}", cca.display()))?;
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(text.as_bytes()).context("cannot hand the standby its order")?;
    // Not waited for: it outlives this cca.
    Ok(())
}

/// `cca __standby`: reads its order on stdin, takes its socket from stdout, and serves until
/// it ends. (It was started with no descriptor but these three: see `main.rs`.)
pub(crate) fn serve_stdin() -> Result<()> {
    let mut text = String::new();
    io::stdin().read_to_string(&mut text).context("cannot read the order")?;
    let order: Order = serde_json::from_str(&text).context("cannot read the order")?;
    // Its engine's files are in use as long as it runs (`cca doctor` does not call them left
    // over).
    let _in_use = order.files.as_deref().and_then(crate::store::EngineFiles::lock);
    let listener = UnixListener::from(io::stdout().as_fd().try_clone_to_owned()?);
    let _ = File::open("/dev/null").map(|null| rustix::stdio::dup2_stdout(&null));
    // Out of the terminal's session: the Ctrl-C typed for the next turn, or a closed terminal,
    // is not for it. A signal sent to it ends it as an end request does, files removed.
    let _ = rustix::process::setsid();
    let signalled = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&signalled));
    }
    let served = serve(&order, listener, &signalled);
    if let Some(files) = &order.files {
        let _ = std::fs::remove_dir_all(files);
    }
    served
}

/// The engine's group, ended however the standby ends, and then its guard.
struct Group {
    group: Pid,
    grace: Duration,
    _guard: Guard,
}

impl Drop for Group {
    fn drop(&mut self) {
        terminate(self.group);
        stop_leftovers(self.group, true, self.grace);
    }
}

fn serve(order: &Order, listener: UnixListener, signalled: &AtomicBool) -> Result<()> {
    listener.set_nonblocking(true)?;
    let started = Instant::now();
    let program = file_id(&order.program);
    let mut lock = None;
    let mut engine: Option<(Waiting, Child, Group)> = None;
    let mut clients: Vec<Client> = Vec::new();
    let mut taker: Option<UnixStream> = None;
    let ended = loop {
        if signalled.load(Ordering::Relaxed) {
            break Ok(());
        }
        if lock.is_none() {
            // Placed once the one before has let go of the kind's lock (it ends as it finds
            // its socket replaced); then the engine starts.
            lock = try_lock_kind(order)?;
            if lock.is_some() {
                engine = Some(start_engine(order)?);
            } else if started.elapsed() > OPEN_TIMEOUT {
                break Err(anyhow::anyhow!("the standby before this one did not end"));
            }
        }
        let ready = engine.as_ref().is_some_and(|(w, ..)| w.ready);
        // `taker` is taken only when ready: a tuple of `(ready, taker.take())` took it out
        // (and closed it) whenever the engine was still starting.
        if ready && let Some(conn) = taker.take() {
            let (mut waiting, child, group) = engine.take().expect("ready");
            waiting.hand_over(&conn)?;
            // The next standby may start now; the taker holds the pipes.
            drop((listener, lock, waiting, clients));
            remove_socket(order);
            let exited = report_exit(child, conn);
            drop(group);
            return exited;
        }
        let too_slow = !ready && started.elapsed() > OPEN_TIMEOUT;
        let idle = order.idle.saturating_sub(started.elapsed()).is_zero();
        let replaced =
            socket_inode(&order.dir.join(socket_name(&order.kind))) != Some(order.socket);
        if idle || too_slow || replaced || file_id(&order.program) != program {
            break Ok(());
        }
        let mut fds = vec![PollFd::new(&listener, PollFlags::IN)];
        if let Some((waiting, ..)) = &engine {
            fds.push(PollFd::new(&waiting.stdout, PollFlags::IN));
            fds.push(PollFd::new(&waiting.stderr, PollFlags::IN));
        }
        fds.extend(clients.iter().map(|c| PollFd::new(&c.conn, PollFlags::IN)));
        let tick = Timespec { tv_sec: 0, tv_nsec: TICK.as_nanos() as i64 };
        match rustix::event::poll(&mut fds, Some(&tick)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => break Err(io::Error::from(e).into()),
        }
        let heard: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        let (said, rest) = heard.split_at(if engine.is_some() { 3 } else { 1 });
        if let (Some((waiting, ..)), [_, out, err]) = (&mut engine, said)
            && (*out || *err)
            && !waiting.read(*out, *err)?
        {
            break Ok(());
        }
        // Heard out: a request read whole, or a client gone, too slow or too long-winded.
        let mut heard_out = Vec::new();
        for (i, client) in clients.iter_mut().enumerate() {
            match rest.get(i).copied().unwrap_or(false).then(|| client.read()) {
                Some(Some(request)) => heard_out.push((i, Some(request))),
                _ if client.deadline < Instant::now() => heard_out.push((i, None)),
                Some(None) if client.closed => heard_out.push((i, None)),
                _ => {}
            }
        }
        let mut end = false;
        for (i, request) in heard_out.into_iter().rev() {
            let client = clients.swap_remove(i);
            let Some(request) = request else { continue };
            let status = || status(order, engine.as_ref().map(|(w, ..)| w), started);
            match answer(order, request, &client.conn, taker.is_some(), ready, status) {
                Some(Served::Taker) => taker = Some(client.conn),
                Some(Served::End) => end = true,
                None => {}
            }
        }
        if end {
            break Ok(());
        }
        if heard[0] {
            while let Ok((conn, _)) = listener.accept() {
                let allowed = peer_allowed(&conn, rustix::process::geteuid().as_raw());
                if allowed && conn.set_nonblocking(true).is_ok() {
                    clients.push(Client::new(conn));
                }
            }
        }
    };
    remove_socket(order);
    ended
}

/// The kind's lock, if this standby may have it now.
fn try_lock_kind(order: &Order) -> Result<Option<File>> {
    socket::open_private_dir(&order.dir)?;
    let path = order.dir.join(format!("{}.lock", order.kind));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Starts the engine and sends it its opening requests.
fn start_engine(order: &Order) -> Result<(Waiting, Child, Group)> {
    let (mut child, guard) = spawn_engine(&order.program, &order.args, &order.env)
        .with_context(|| format!("cannot run {}", order.program.display()))?;
    let group = guard.group_of(&child);
    let guard = Group { group, grace: order.grace, _guard: guard };
    let mut engine = Waiting {
        group,
        opening: order.opening.clone(),
        stdin: child.stdin.take().expect("piped"),
        stdout: child.stdout.take().expect("piped"),
        stderr: child.stderr.take().expect("piped"),
        said: Vec::new(),
        said_err: Vec::new(),
        session: None,
        ready: false,
    };
    for line in order.opening.lines()? {
        engine.stdin.write_all(line.as_bytes())?;
    }
    Ok((engine, child, guard))
}

/// A client being heard out: what it said so far, and until when it may speak.
struct Client {
    conn: UnixStream,
    line: Vec<u8>,
    deadline: Instant,
    /// It closed its end, or said more than a request holds.
    closed: bool,
}

impl Client {
    fn new(conn: UnixStream) -> Client {
        Client { conn, line: Vec::new(), deadline: Instant::now() + REQUEST_TIMEOUT, closed: false }
    }

    /// Reads what it sent; its request once the line is whole.
    fn read(&mut self) -> Option<Request> {
        let mut buf = [0u8; 1024];
        match (&self.conn).read(&mut buf) {
            Ok(0) => self.closed = true,
            Ok(n) => self.line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => self.closed = true,
        }
        let end = memchr::memchr(b'\n', &self.line);
        if end.is_none() && self.line.len() > MAX_REQUEST {
            self.closed = true;
        }
        let request = serde_json::from_slice(&self.line[..end?]).ok();
        // A line that is no request: the client is done.
        self.closed |= request.is_none();
        request
    }
}

/// An engine started, waiting for a turn, and what it said meanwhile.
struct Waiting {
    group: Pid,
    opening: Opening,
    stdin: std::process::ChildStdin,
    stdout: std::process::ChildStdout,
    stderr: std::process::ChildStderr,
    /// What it wrote after its opening work, for the taker.
    said: Vec<u8>,
    said_err: Vec<u8>,
    /// An ACP agent's session.
    session: Option<String>,
    /// Done with its opening work.
    ready: bool,
}

/// What a client's request comes to.
enum Served {
    /// A taker, to be handed the engine once it is ready.
    Taker,
    /// The standby ends.
    End,
}

/// The standby as `cca standby` shows it.
fn status(order: &Order, engine: Option<&Waiting>, started: Instant) -> Status {
    Status {
        kind: order.kind.clone(),
        program: order.program.clone(),
        folder: std::env::current_dir().unwrap_or_default(),
        group: engine.map_or(0, |w| w.group.as_raw_nonzero().get()),
        session: order.session.clone(),
        files: order.files.clone(),
        ready: engine.is_some_and(|w| w.ready),
        idle_left: order.idle.saturating_sub(started.elapsed()),
        memory: engine.map_or(0, |w| group_memory(w.group)),
    }
}

/// Answers a client's request: its status, or an end; a taker waits for the handover
/// (`promised`: another already does), told so at once when the engine is not ready.
fn answer(
    order: &Order,
    request: Request,
    conn: &UnixStream,
    promised: bool,
    ready: bool,
    status: impl Fn() -> Status,
) -> Option<Served> {
    // Each answer is a line or two, which a socket's buffer takes whole: never waited for.
    match request {
        Request::Take { key } if key == order.key && !promised => {
            if !ready {
                let _ = send(conn, &Reply::Starting);
            }
            Some(Served::Taker)
        }
        Request::Take { .. } => {
            let _ = send(conn, &Reply::Stale);
            // Started for another turn: it ends, unless promised to the one it fits.
            (!promised).then_some(Served::End)
        }
        Request::Status => {
            let _ = send(conn, &Reply::Status(status()));
            None
        }
        Request::End => {
            let _ = send(conn, &Reply::Ended);
            Some(Served::End)
        }
        Request::EndSession { session } => {
            let mine = session == order.session && !promised;
            let _ = send(conn, &if mine { Reply::Ended } else { Reply::Status(status()) });
            mine.then_some(Served::End)
        }
    }
}

impl Waiting {
    /// Reads what the engine wrote (on stdout: `out`, on stderr: `err`); `false` when it can no
    /// longer take a turn: it ended, closed its output, or says too much for one waiting.
    fn read(&mut self, out: bool, err: bool) -> Result<bool> {
        let mut buf = [0u8; 64 * 1024];
        if out {
            let n = self.stdout.read(&mut buf)?;
            if n == 0 {
                return Ok(false);
            }
            self.said.extend_from_slice(&buf[..n]);
            // The replies to the opening requests are the standby's; what follows them waits
            // for the turn.
            while let (false, Some(end)) = (self.ready, memchr::memchr(b'\n', &self.said)) {
                let line: Vec<u8> = self.said.drain(..=end).collect();
                if let Some(opened) = self.opening.done(&line) {
                    self.session = opened?;
                    self.ready = true;
                }
            }
        }
        if err {
            // An engine closes its stderr only as it ends.
            match self.stderr.read(&mut buf) {
                Ok(0) | Err(_) => return Ok(false),
                Ok(n) => self.said_err.extend_from_slice(&buf[..n]),
            }
        }
        Ok(self.said.len() + self.said_err.len() <= MAX_SAID)
    }

    /// Sends the taker the engine: its group, what it said, its session, and its pipes.
    fn hand_over(&mut self, conn: &UnixStream) -> Result<()> {
        conn.set_nonblocking(false)?;
        conn.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        let fds = [self.stdin.as_fd(), self.stdout.as_fd(), self.stderr.as_fd()];
        let reply = Reply::Handover {
            group: self.group.as_raw_nonzero().get(),
            stdout: std::mem::take(&mut self.said),
            stderr: std::mem::take(&mut self.said_err),
            session: self.session.take(),
        };
        send_with_fds(conn, &reply, &fds)
    }
}

/// The socket's file name for `kind`.
fn socket_name(kind: &str) -> String {
    format!("{kind}.sock")
}

/// The inode of the file at `path`, if there is one.
fn socket_inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

/// Removes the order's socket file, unless a newer standby's has taken its place.
fn remove_socket(order: &Order) {
    let path = order.dir.join(socket_name(&order.kind));
    if socket_inode(&path) == Some(order.socket) {
        let _ = std::fs::remove_file(path);
    }
}

/// How long the engine takes to start and do its opening work, as a standby starts it (for
/// `cca doctor`): an error when it ends first, or takes longer than `limit`.
pub(crate) fn time_start(
    program: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    opening: Opening,
    limit: Duration,
) -> Result<Duration> {
    let started = Instant::now();
    let (mut child, guard) = spawn_engine(program, args, env)
        .with_context(|| format!("cannot run {}", program.display()))?;
    let _group = Group { group: guard.group_of(&child), grace: Duration::ZERO, _guard: guard };
    let mut stdin = child.stdin.take().expect("piped");
    for line in opening.lines()? {
        stdin.write_all(line.as_bytes())?;
    }
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    thread::spawn(move || {
        for line in BufReader::new(stdout).split(b'\n') {
            if line.map(|line| tx.send(line)).is_err() {
                return;
            }
        }
    });
    // Drained, so that an engine with much to say there does not stall.
    let mut stderr = child.stderr.take().expect("piped");
    thread::spawn(move || io::copy(&mut stderr, &mut io::sink()));
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if let Some(opened) = opening.done(&line) {
                    opened?;
                    let took = started.elapsed();
                    // Told there is nothing to answer, as an engine ends its run, before its
                    // group is ended.
                    drop(stdin);
                    let deadline = Instant::now() + Duration::from_secs(2);
                    while child.try_wait()?.is_none() && Instant::now() < deadline {
                        thread::sleep(Duration::from_millis(20));
                    }
                    return Ok(took);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => bail!("it did not start within {limit:?}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("it ended before it started"),
        }
    }
}

/// After the handover: waits for the engine, and tells the taker how it ended; ends it when the
/// taker goes away first.
fn report_exit(mut child: std::process::Child, conn: UnixStream) -> Result<()> {
    let (tx, exited) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    loop {
        match exited.recv_timeout(Duration::from_millis(100)) {
            Ok(status) => {
                let status = status.map_or(-1, ExitStatus::into_raw);
                let _ = send(&conn, &Reply::Exit { status });
                return Ok(());
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let mut fds = [PollFd::new(&conn, PollFlags::IN)];
        let now = Timespec { tv_sec: 0, tv_nsec: 0 };
        if rustix::event::poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0) {
            let mut byte = [0u8; 1];
            // The taker says nothing more: readable means it is gone.
            if matches!(
                rustix::net::recv(&conn, &mut byte, RecvFlags::DONTWAIT),
                Ok((0, _)) | Err(_)
            ) {
                return Ok(());
            }
        }
    }
}

/// Takes the standby of `kind` for a turn whose cold start has `key`: its engine, handed over,
/// or `None` when there is none, or it was started for another turn (then it ends).
pub(crate) fn take(dir: &Path, kind: &str, key: &str, cancel: &Cancel) -> Result<Option<Adopted>> {
    let Some(conn) = connect(dir, kind)? else { return Ok(None) };
    send(&conn, &Request::Take { key: key.to_string() })?;
    conn.set_read_timeout(Some(Duration::from_millis(100)))?;
    // A standby answers at once; one that does not is not waited for. One still starting its
    // engine says so, and is waited for as a cold start would be.
    let mut deadline = Instant::now() + TAKE_TIMEOUT;
    let mut received = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let end = loop {
        cancel.check()?;
        if let Some(end) = memchr::memchr(b'\n', &received) {
            if !matches!(serde_json::from_slice(&received[..end]), Ok(Reply::Starting)) {
                break end;
            }
            received.drain(..=end);
            deadline = Instant::now() + OPEN_TIMEOUT + REQUEST_TIMEOUT;
            continue;
        }
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut buf)];
        match rustix::net::recvmsg(&conn, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC) {
            Ok(got) if got.bytes == 0 => {
                bail!("the standby engine ended before it was handed over")
            }
            Ok(got) => {
                fds.extend(control.drain().flat_map(|m| match m {
                    RecvAncillaryMessage::ScmRights(fds) => fds.collect(),
                    _ => Vec::new(),
                }));
                received.extend_from_slice(&buf[..got.bytes]);
            }
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR)
                if Instant::now() < deadline => {}
            Err(e) => return Err(io::Error::from(e)).context("the standby engine did not answer"),
        }
    };
    conn.set_read_timeout(None)?;
    let reply: Reply =
        serde_json::from_slice(&received[..end]).context("the standby engine did not answer")?;
    let rest = received.split_off(end + 1);
    let mut reader = BufReader::new(io::Cursor::new(rest).chain(conn));
    let Reply::Handover { group, stdout, stderr, session } = reply else { return Ok(None) };
    let (Some(group), Ok([stdin_fd, stdout_fd, stderr_fd])) =
        (Pid::from_raw(group), <[OwnedFd; 3]>::try_from(fds))
    else {
        bail!("the standby engine was handed over without its pipes");
    };
    let said = [(stdout, Pipe::Stdout as fn(Vec<u8>) -> Pipe), (stderr, Pipe::Stderr)]
        .into_iter()
        .filter(|(bytes, _)| !bytes.is_empty())
        .map(|(bytes, pipe)| pipe(bytes))
        .collect();
    let exit = Box::new(move || match read_line::<Reply>(&mut reader) {
        Ok(Reply::Exit { status }) => Ok(ExitStatus::from_raw(status)),
        _ => Err(io::Error::other("the standby that started the engine ended first")),
    });
    Ok(Some(Adopted {
        group,
        stdin: stdin_fd,
        stdout: stdout_fd,
        stderr: stderr_fd,
        said,
        acp_session: session,
        exit,
    }))
}

/// What waits in `dir`, by kind.
pub(crate) fn waiting(dir: &Path) -> Vec<Status> {
    kinds(dir)
        .iter()
        .filter_map(|kind| match ask(dir, kind, &Request::Status) {
            Ok(Some(Reply::Status(status))) => Some(status),
            _ => None,
        })
        .collect()
}

/// Ends what waits in `dir` (of one kind, or all); returns the kinds ended.
pub(crate) fn end(dir: &Path, kind: Option<&str>) -> Vec<String> {
    kinds(dir)
        .into_iter()
        .filter(|k| kind.is_none_or(|wanted| wanted == k))
        .filter(|k| matches!(ask(dir, k, &Request::End), Ok(Some(Reply::Ended))))
        .collect()
}

/// Ends what waits in `dir` holding the conversation of `session` (which is being removed).
pub(crate) fn end_session(dir: &Path, session: &str) {
    for kind in kinds(dir) {
        let _ = ask(dir, &kind, &Request::EndSession { session: session.to_string() });
    }
}

/// The kinds with a socket in `dir`, sorted.
pub(crate) fn kinds(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut kinds: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".sock").map(str::to_string))
        .filter(|kind| !kind.starts_with('.'))
        .collect();
    kinds.sort();
    kinds
}

/// One request, one reply; `None` when nothing of that kind listens. A standby just launched
/// answers once it runs, which a busy machine may delay: it is given longer than a client.
fn ask(dir: &Path, kind: &str, request: &Request) -> Result<Option<Reply>> {
    let Some(conn) = connect(dir, kind)? else { return Ok(None) };
    conn.set_read_timeout(Some(ASK_TIMEOUT))?;
    send(&conn, request)?;
    Ok(Some(read_line(&mut BufReader::new(&conn))?))
}

/// Connects to the standby of `kind`, if one listens, and checks it is this user's.
fn connect(dir: &Path, kind: &str) -> Result<Option<UnixStream>> {
    let Some(conn) = socket::connect(dir, &socket_name(kind))? else { return Ok(None) };
    let uid = rustix::process::geteuid().as_raw();
    Ok(peer_allowed(&conn, uid).then_some(conn))
}

fn send(conn: &UnixStream, message: &impl Serialize) -> Result<()> {
    send_with_fds(conn, message, &[])
}

/// Writes one JSON line, with `fds` passed along with its first byte. No SIGPIPE: a peer gone
/// is an error like any other.
fn send_with_fds(
    conn: &UnixStream,
    message: &impl Serialize,
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        bail!("cannot pass {} descriptors", fds.len());
    }
    let mut sent =
        rustix::net::sendmsg(conn, &[IoSlice::new(&line)], &mut control, SendFlags::NOSIGNAL)
            .map_err(io::Error::from)?;
    while sent < line.len() {
        sent +=
            rustix::net::send(conn, &line[sent..], SendFlags::NOSIGNAL).map_err(io::Error::from)?;
    }
    Ok(())
}

fn read_line<T: for<'de> Deserialize<'de>>(reader: &mut impl BufRead) -> Result<T> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line.is_empty() {
        bail!("the connection closed");
    }
    Ok(serde_json::from_str(&line)?)
}

/// The program's file as it is now: a reinstalled engine is another one.
pub(crate) fn file_id(program: &Path) -> Option<(u64, u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(program).ok()?;
    Some((m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// The resident memory of a group's processes, in bytes (`VmRSS` in /proc).
fn group_memory(group: Pid) -> u64 {
    group_members(group)
        .iter()
        .filter_map(|(pid, _)| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum::<u64>()
        * 1024
}
