//! Steering: messages for the turn running in a session, sent while its answer is being written.
//!
//! A running turn keeps an [`Inbox`]. Its [`Listener`] takes messages from other processes
//! (`cca steer`) on a Unix socket under `$CCA_HOME/run/` (which `store` makes), one
//! message per connection, answered with one line: `accepted` or `refused: REASON`. Only the
//! same user can steer: the folder is 0700, and the peer's uid is checked (`SO_PEERCRED`).
//! A front end in the same process (chat) puts messages in the inbox directly; `run` hands them
//! to an engine that reads input while it runs, and `turn` asks the rest as the next turn.
//!
//! Nothing here prints or decides what the transcript says.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::error::{Failure, exit};
use crate::store::Store;
use crate::store::socket::{self, Socket, peer_allowed};

/// The largest steer message, in bytes (a steer is guidance, not a document).
pub(crate) const MAX_BYTES: usize = 256 * 1024;

/// How long a connection may take to send its message, all of it.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once; more are refused at once (each holds a thread until it ends).
const MAX_CONNECTIONS: usize = 16;

/// What became of a steer, as a turn reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Steered<'a> {
    /// It arrived and waits for the engine.
    Queued(&'a str),
    /// The engine took it (several sent together are taken as one message): what the engine
    /// writes next answers it.
    Taken(&'a str),
    /// The turn ended before the engine took it; it is kept as an attempt that was not answered.
    NotTaken(&'a str),
}

/// Messages waiting for the running turn, in the order they arrived.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inbox(Arc<Mutex<InboxState>>);

#[derive(Debug, Default)]
struct InboxState {
    /// Arrived, not yet reported as queued.
    fresh: usize,
    waiting: VecDeque<String>,
}

impl Inbox {
    pub(crate) fn new() -> Inbox {
        Inbox::default()
    }

    /// Queues a message (already validated) for the running turn.
    pub(crate) fn push(&self, text: String) {
        let mut state = self.lock();
        state.waiting.push_back(text);
        state.fresh += 1;
    }

    /// The messages that arrived since the last call, to report as queued (they stay queued).
    pub(crate) fn fresh(&self) -> Vec<String> {
        let mut state = self.lock();
        let n = std::mem::take(&mut state.fresh);
        let skip = state.waiting.len() - n.min(state.waiting.len());
        state.waiting.iter().skip(skip).cloned().collect()
    }

    /// Takes every queued message, oldest first.
    pub(crate) fn take_all(&self) -> Vec<String> {
        let mut state = self.lock();
        state.fresh = 0;
        state.waiting.drain(..).collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().waiting.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Checks a message as a question is checked: text (UTF-8, no NUL byte), not empty, not huge.
pub(crate) fn validate(bytes: Vec<u8>) -> std::result::Result<String, String> {
    if bytes.len() > MAX_BYTES {
        return Err(format!("the message is over {} KiB", MAX_BYTES / 1024));
    }
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(format!("the message holds a NUL byte (at byte {at}): cca takes text only"));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!("the message is not UTF-8 text (invalid byte at {})", e.utf8_error().valid_up_to())
    })?;
    if text.trim().is_empty() {
        return Err("the message is empty".into());
    }
    Ok(text)
}

/// The socket of a running turn, taking messages into its inbox until dropped (then the socket
/// is removed).
///
/// Each connection is served on a thread of its own, with an overall deadline: one that sends
/// nothing, or a byte at a time, delays neither the steers sent beside it nor the end of the
/// turn, which never waits for a connection.
pub(crate) struct Listener {
    gate: Arc<Gate>,
    thread: Option<thread::JoinHandle<()>>,
    socket: Option<Socket>,
}

/// Whether the turn still takes messages, and how many connections are being served.
#[derive(Default)]
struct Gate {
    /// Set when the turn stops taking messages. Held while a message goes into the inbox, so
    /// that none goes in after [`Listener::close`] returns.
    closed: Mutex<bool>,
    serving: AtomicUsize,
}

impl Gate {
    fn closed(&self) -> std::sync::MutexGuard<'_, bool> {
        self.closed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Listener {
    /// Listens for steers to the turn in session `id`.
    pub(crate) fn start(store: &Store, id: &str, inbox: &Inbox) -> Result<Listener> {
        let socket = listen(store, id)?;
        let listener = socket.listener.try_clone().context("cannot share the steer socket")?;
        let gate = Arc::new(Gate::default());
        let (inbox, shared) = (inbox.clone(), gate.clone());
        let uid = rustix::process::geteuid().as_raw();
        // Accept blocks: `close` wakes it with a connection of its own, so that ending a turn
        // waits for nothing.
        let thread = thread::spawn(move || {
            while let Ok((stream, _)) = listener.accept() {
                if *shared.closed() {
                    break;
                }
                // Side by side: a steer sent after another one was answered is queued after
                // it, whatever other connections are doing.
                if shared.serving.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    shared.serving.fetch_sub(1, Ordering::SeqCst);
                    let _ = refuse_unread(stream, "too many connections at once; try again");
                    continue;
                }
                let (inbox, gate) = (inbox.clone(), shared.clone());
                let spawned =
                    thread::Builder::new().name("steer connection".into()).spawn(move || {
                        let _ = serve(stream, uid, &inbox, &gate);
                        gate.serving.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    shared.serving.fetch_sub(1, Ordering::SeqCst);
                }
            }
        });
        Ok(Listener { gate, thread: Some(thread), socket: Some(socket) })
    }

    /// Stops taking messages and removes the socket; a message accepted before is in the inbox.
    /// Connections still being read are not waited for: they are refused when they end.
    pub(crate) fn close(&mut self) {
        *self.gate.closed() = true;
        if let Some(thread) = self.thread.take() {
            // Wake the blocked accept; if the connection cannot be made, the thread is left to
            // end with the process rather than waited for.
            let woken = self.socket.as_ref().is_some_and(|s| s.connect().is_ok());
            if woken {
                let _ = thread.join();
            }
        }
        self.socket.take();
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.close();
    }
}

fn refuse(mut stream: UnixStream, reason: &str) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    stream.write_all(format!("refused: {reason}\n").as_bytes())
}

/// Refuses a connection without waiting for its message. What has arrived of it is read first:
/// a socket closed with unread data resets the connection, and the client would lose the reply.
fn refuse_unread(mut stream: UnixStream, reason: &str) -> io::Result<()> {
    stream.set_nonblocking(true)?;
    let (mut sink, mut drained) = ([0u8; 16 * 1024], 0);
    while drained <= MAX_BYTES
        && let Ok(n @ 1..) = stream.read(&mut sink)
    {
        drained += n;
    }
    refuse(stream, reason)
}

/// Reads one message from a connection, within [`READ_TIMEOUT`] in all, and answers it.
fn serve(mut stream: UnixStream, uid: u32, inbox: &Inbox, gate: &Gate) -> io::Result<()> {
    if !peer_allowed(&stream, uid) {
        return refuse(stream, "only the user running the turn can steer it");
    }
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let read_all = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || bytes.len() > MAX_BYTES {
            break false;
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                break false;
            }
            Err(e) => return Err(e),
        }
    };
    if !read_all && bytes.len() <= MAX_BYTES {
        let late = format!("the message did not end within {} s", READ_TIMEOUT.as_secs());
        return refuse(stream, &late);
    }
    let reply = match validate(bytes) {
        Err(reason) => format!("refused: {reason}\n"),
        Ok(text) => {
            let closed = gate.closed();
            if *closed {
                // The turn stopped taking messages while this one was read.
                "refused: the turn has ended\n".to_string()
            } else {
                inbox.push(text);
                "accepted\n".to_string()
            }
        }
    };
    stream.write_all(reply.as_bytes())
}

/// What the running turn said to a steer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Accepted,
    Refused(String),
    /// No turn is running in the session.
    NoTurn,
}

/// Sends a message to the turn running in session `id` (from any process, the running one
/// included: a front end can queue a prompt on a turn it runs itself this way).
pub(crate) fn send(store: &Store, id: &str, text: &str) -> Result<Reply> {
    let Some(mut stream) = connect(store, id)? else { return Ok(Reply::NoTurn) };
    let path = store.steer_socket_path(id);
    let failed = || format!("cannot send the message to {}", path.display());
    stream.set_read_timeout(Some(READ_TIMEOUT * 2)).with_context(failed)?;
    match stream.write_all(text.as_bytes()) {
        // Refused at once (too many connections), without reading: the reply says why.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        written => {
            written.with_context(failed)?;
            stream.shutdown(std::net::Shutdown::Write).with_context(failed)?;
        }
    }
    let mut reply = String::new();
    stream.take(4096).read_to_string(&mut reply).with_context(failed)?;
    let reply = reply.trim_end();
    match reply.strip_prefix("refused: ") {
        _ if reply == "accepted" => Ok(Reply::Accepted),
        Some(reason) => Ok(Reply::Refused(reason.to_string())),
        // The turn ended while the message was on its way.
        None if reply.is_empty() => Ok(Reply::NoTurn),
        None => {
            Err(Failure::new(exit::ERROR, format!("unexpected reply from the turn: {reply}"))
                .into())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The socket

/// Listens for steers to the turn running in a session. Called under the session lock, so a
/// socket already there is a stale one (its cca died): it is replaced.
fn listen(store: &Store, id: &str) -> Result<Socket> {
    Socket::listen(&store.make_run_dir()?, &format!("{id}.sock"))
}

/// Connects to the turn running in a session; `None` when none runs there (no socket, or a
/// stale one whose cca died: connecting is refused; the next turn there removes it).
fn connect(store: &Store, id: &str) -> Result<Option<UnixStream>> {
    socket::connect(&store.run_dir(), &format!("{id}.sock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_checked_like_questions() {
        assert_eq!(validate(b"focus on JWT".to_vec()), Ok("focus on JWT".to_string()));
        assert!(validate(b"a\0b".to_vec()).unwrap_err().contains("NUL"));
        assert!(validate(vec![0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        assert!(validate(b"  \n".to_vec()).unwrap_err().contains("empty"));
        assert!(validate(vec![b'a'; MAX_BYTES + 1]).unwrap_err().contains("KiB"));
    }

    #[test]
    fn only_the_same_user_may_steer() {
        let (a, _b) = UnixStream::pair().unwrap();
        let me = rustix::process::geteuid().as_raw();
        assert!(peer_allowed(&a, me));
        assert!(!peer_allowed(&a, me.wrapping_add(1)));
    }

    #[test]
    fn the_inbox_reports_each_message_once_and_keeps_the_order() {
        let inbox = Inbox::new();
        inbox.push("one".into());
        assert_eq!(inbox.fresh(), ["one"]);
        inbox.push("two".into());
        assert_eq!(inbox.fresh(), ["two"]);
        assert!(inbox.fresh().is_empty());
        assert_eq!(inbox.take_all(), ["one", "two"]);
        assert!(inbox.is_empty());
    }

    #[test]
    fn a_steer_reaches_the_inbox_and_the_socket_goes_with_the_listener() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        store.ensure().unwrap();
        assert_eq!(send(&store, "s1", "hello").unwrap(), Reply::NoTurn);
        let inbox = Inbox::new();
        let mut listener = Listener::start(&store, "s1", &inbox).unwrap();
        assert_eq!(send(&store, "s1", "first").unwrap(), Reply::Accepted);
        assert_eq!(send(&store, "s1", "second").unwrap(), Reply::Accepted);
        assert!(
            matches!(send(&store, "s1", "bad\0").unwrap(), Reply::Refused(r) if r.contains("NUL"))
        );
        assert_eq!(inbox.take_all(), ["first", "second"]);
        listener.close();
        assert!(!store.steer_socket_path("s1").exists());
        assert_eq!(send(&store, "s1", "late").unwrap(), Reply::NoTurn);
    }

    #[test]
    fn stalled_connections_delay_neither_a_steer_nor_the_end_of_the_turn() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        store.ensure().unwrap();
        let inbox = Inbox::new();
        let mut listener = Listener::start(&store, "s3", &inbox).unwrap();
        let silent = connect(&store, "s3").unwrap().unwrap();
        let mut trickling = connect(&store, "s3").unwrap().unwrap();
        let trickle = thread::spawn(move || {
            // A byte at a time, until the connection is refused or closed.
            while trickling.write_all(b"x").is_ok() {
                thread::sleep(Duration::from_millis(50));
            }
        });
        assert_eq!(send(&store, "s3", "a real steer").unwrap(), Reply::Accepted);
        listener.close();
        assert_eq!(inbox.take_all(), ["a real steer"]);
        // The turn's end did not wait for the silent connection: it is still open, unanswered.
        silent.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let unanswered = (&silent).read(&mut byte).unwrap_err();
        assert_eq!(unanswered.kind(), io::ErrorKind::WouldBlock);
        // Once its deadline passes, the trickling one is refused: nothing is taken after the end.
        trickle.join().unwrap();
        assert!(inbox.is_empty());
    }

    #[test]
    fn connections_past_the_limit_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        store.ensure().unwrap();
        let inbox = Inbox::new();
        let _listener = Listener::start(&store, "s5", &inbox).unwrap();
        let _silent: Vec<UnixStream> =
            (0..MAX_CONNECTIONS).map(|_| connect(&store, "s5").unwrap().unwrap()).collect();
        let reply = send(&store, "s5", "one too many").unwrap();
        assert!(matches!(&reply, Reply::Refused(r) if r.contains("too many")), "{reply:?}");
        assert!(inbox.is_empty());
    }

    #[test]
    fn a_long_home_is_steered_through_a_short_address() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("a-rather-long-folder-name-".repeat(6));
        assert!(home.join("run/s4.sock").as_os_str().len() > 150);
        let store = Store::new(home);
        store.ensure().unwrap();
        let inbox = Inbox::new();
        let mut listener = Listener::start(&store, "s4", &inbox).unwrap();
        assert_eq!(send(&store, "s4", "long home").unwrap(), Reply::Accepted);
        assert_eq!(inbox.take_all(), ["long home"]);
        listener.close();
        assert!(!store.steer_socket_path("s4").exists());
        assert_eq!(send(&store, "s4", "late").unwrap(), Reply::NoTurn);
    }

    #[test]
    fn a_stale_socket_is_no_turn_and_the_next_listener_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        store.ensure().unwrap();
        // A socket whose process is gone: bound, then closed without being removed.
        std::fs::create_dir_all(store.run_dir()).unwrap();
        let path = store.steer_socket_path("s2");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        assert_eq!(send(&store, "s2", "hello").unwrap(), Reply::NoTurn);
        let inbox = Inbox::new();
        let _listener = Listener::start(&store, "s2", &inbox).unwrap();
        assert_eq!(send(&store, "s2", "hello").unwrap(), Reply::Accepted);
    }
}
