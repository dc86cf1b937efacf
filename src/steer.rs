//! Steering: messages for the turn running in a session, sent while its answer is being written.
//!
//! A running turn keeps an [`Inbox`]. Its [`Listener`] takes messages from other processes
//! (`cca steer`) on a Unix socket under `$CCA_HOME/run/` (the socket itself is `store`'s), one
//! message per connection, answered with one line: `accepted` or `refused: REASON`. Only the
//! same user can steer: the folder is 0700, and the peer's uid is checked (`SO_PEERCRED`).
//! A front end in the same process (chat) puts messages in the inbox directly; `run` hands them
//! to an engine that reads input while it runs, and `turn` asks the rest as the next turn.
//!
//! Nothing here prints or decides what the transcript says.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::error::{Failure, exit};
use crate::store::{SteerSocket, Store};

/// The largest steer message, in bytes (a steer is guidance, not a document).
pub const MAX_BYTES: usize = 256 * 1024;

/// How long a connection may take to send its message.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What became of a steer, as a turn reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steered<'a> {
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
pub struct Inbox(Arc<Mutex<InboxState>>);

#[derive(Debug, Default)]
struct InboxState {
    /// Arrived, not yet reported as queued.
    fresh: usize,
    waiting: VecDeque<String>,
}

impl Inbox {
    pub fn new() -> Inbox {
        Inbox::default()
    }

    /// Queues a message (already validated) for the running turn.
    pub fn push(&self, text: String) {
        let mut state = self.lock();
        state.waiting.push_back(text);
        state.fresh += 1;
    }

    /// The messages that arrived since the last call, to report as queued (they stay queued).
    pub fn fresh(&self) -> Vec<String> {
        let mut state = self.lock();
        let n = std::mem::take(&mut state.fresh);
        let skip = state.waiting.len() - n.min(state.waiting.len());
        state.waiting.iter().skip(skip).cloned().collect()
    }

    /// Takes every queued message, oldest first.
    pub fn take_all(&self) -> Vec<String> {
        let mut state = self.lock();
        state.fresh = 0;
        state.waiting.drain(..).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().waiting.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Checks a message as a question is checked: text (UTF-8, no NUL byte), not empty, not huge.
pub fn validate(bytes: Vec<u8>) -> std::result::Result<String, String> {
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

/// Whether a connection comes from this user. Another user cannot reach the socket through
/// its 0700 folder; this holds even if the folder's mode was changed.
pub fn peer_allowed(stream: &UnixStream, uid: u32) -> bool {
    rustix::net::sockopt::socket_peercred(stream).is_ok_and(|cred| cred.uid.as_raw() == uid)
}

/// The socket of a running turn, taking messages into its inbox until dropped (then the socket
/// is removed).
pub struct Listener {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
    socket: Option<SteerSocket>,
}

impl Listener {
    /// Listens for steers to the turn in session `id`.
    pub fn start(store: &Store, id: &str, inbox: &Inbox) -> Result<Listener> {
        let socket = store.listen_steer(id)?;
        let listener = socket.listener.try_clone().context("cannot share the steer socket")?;
        let stop = Arc::new(AtomicBool::new(false));
        let (inbox, stopped) = (inbox.clone(), stop.clone());
        let uid = rustix::process::geteuid().as_raw();
        // Accept blocks: `close` wakes it with a connection of its own, so that ending a turn
        // waits for nothing.
        let thread = thread::spawn(move || {
            while let Ok((stream, _)) = listener.accept() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                // One at a time, in order: two steers sent one after the other are queued in
                // that order.
                let _ = serve(stream, uid, &inbox, &stopped);
            }
        });
        Ok(Listener { stop, thread: Some(thread), socket: Some(socket) })
    }

    /// Stops taking messages and removes the socket; a message accepted before is in the inbox.
    pub fn close(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            // Wake the blocked accept; if the connection cannot be made, the thread is left to
            // end with the process rather than waited for.
            let woken = self.socket.as_ref().is_some_and(|s| UnixStream::connect(&s.path).is_ok());
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

/// Reads one message from a connection and answers it.
fn serve(mut stream: UnixStream, uid: u32, inbox: &Inbox, stopped: &AtomicBool) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    if !peer_allowed(&stream, uid) {
        return stream.write_all(b"refused: only the user running the turn can steer it\n");
    }
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut bytes = Vec::new();
    (&mut stream).take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    let reply = match validate(bytes) {
        Err(reason) => format!("refused: {reason}\n"),
        // The turn stopped taking messages while this one was read.
        Ok(_) if stopped.load(Ordering::SeqCst) => "refused: the turn has ended\n".to_string(),
        Ok(text) => {
            inbox.push(text);
            "accepted\n".to_string()
        }
    };
    stream.write_all(reply.as_bytes())
}

/// What the running turn said to a steer.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    Accepted,
    Refused(String),
    /// No turn is running in the session.
    NoTurn,
}

/// Sends a message to the turn running in session `id` (from any process, the running one
/// included: a front end can queue a prompt on a turn it runs itself this way).
pub fn send(store: &Store, id: &str, text: &str) -> Result<Reply> {
    let Some(mut stream) = store.connect_steer(id)? else { return Ok(Reply::NoTurn) };
    let path = store.steer_socket_path(id);
    let failed = || format!("cannot send the message to {}", path.display());
    stream.set_read_timeout(Some(READ_TIMEOUT * 2)).with_context(failed)?;
    stream.write_all(text.as_bytes()).with_context(failed)?;
    stream.shutdown(std::net::Shutdown::Write).with_context(failed)?;
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

    #[test]
    fn the_run_folder_must_be_this_users() {
        let dir = tempfile::tempdir().unwrap();
        let meta = std::fs::metadata(dir.path()).unwrap();
        let me = rustix::process::geteuid().as_raw();
        assert!(crate::store::check_private_dir(dir.path(), &meta, me).is_ok());
        let err = crate::store::check_private_dir(dir.path(), &meta, me.wrapping_add(1));
        assert!(format!("{:#}", err.unwrap_err()).contains("not a folder of this user"));
    }
}
