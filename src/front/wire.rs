//! stdin and stdout as `cca acp`'s protocol transport: newline-delimited JSON-RPC lines, read
//! and written by threads of their own so the protocol loop never blocks on either.
//!
//! The crate's own stdio transport writes and flushes each message on its own, through a thread
//! pool: a wake-up, a context switch and a `write` per message. Replaying a long session is
//! 20,000 messages, and that cost was nine tenths of the time. Here a message is appended to a
//! buffer and the writer thread writes whatever has gathered in one call, so a burst of
//! messages costs a few writes. Order is kept: one buffer, one writer. This module must not
//! know the protocol: it moves lines. One exception, the handshake ([`Handshake`]): the line
//! after an `initialize` request waits for that request's response to be on its way out.
//!
//! It does know what a line must be to be handed on: UTF-8 text, of a size that can be held.
//! A line that is not (see [`read_line`]) becomes a short stand-in that is not JSON, so the
//! client gets a parse error (-32700) for it and serving goes on; the crate's error quotes the
//! line it was given, so a stand-in also takes the place of any long line that is not JSON.

use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;

use futures::channel::mpsc;

/// How much may wait for the writer before a sender waits too: a client that does not read
/// makes the agent wait instead of filling memory.
const BACKLOG: usize = 4 << 20;

/// The receiving end: the lines the client sends, as the crate's `Lines` transport reads them.
pub type Incoming = mpsc::UnboundedReceiver<std::io::Result<String>>;

/// The longest line taken: a prompt with files and images well past any engine's input limit
/// (gemini's 8 MiB is the largest). The rest of a longer line is read and dropped, never held.
pub const MAX_LINE: usize = 64 << 20;

/// How much of a line that cannot be taken is quoted back, in bytes.
pub const QUOTED: usize = 100;

/// A line longer than this is checked to be JSON before it is handed on: the crate quotes a
/// line that is not whole in its error.
const CHECKED: usize = 1024;

/// The crate refuses any request that arrives before it has answered `initialize`, and a client
/// may send `session/new` right behind `initialize` without waiting (the protocol lets it): so
/// the reader holds the line after an `initialize` request until the response with its id has
/// been handed to the writer, or `HANDSHAKE_WAIT` has passed (an answer the crate never gives
/// must not stop serving).
#[derive(Default)]
pub struct Handshake {
    /// The id of the `initialize` request whose response is awaited.
    awaited: Mutex<Option<serde_json::Value>>,
    answered: Condvar,
}

/// How long the line after `initialize` waits for its response at most.
const HANDSHAKE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Handshake {
    fn awaited(&self) -> MutexGuard<'_, Option<serde_json::Value>> {
        self.awaited.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id of `line` when it is an `initialize` request (read only for lines that name it).
    fn initialize_id(line: &str) -> Option<serde_json::Value> {
        if !line.contains("\"initialize\"") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let id = v.get("id").filter(|id| !id.is_null())?;
        (v["method"] == "initialize").then(|| id.clone())
    }

    /// An outgoing line: the awaited response lets the reader go on.
    fn sent(&self, line: &str) {
        let mut awaited = self.awaited();
        let Some(id) = awaited.as_ref() else { return };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { return };
        if v.get("id") == Some(id) && (v.get("result").is_some() || v.get("error").is_some()) {
            *awaited = None;
            self.answered.notify_all();
        }
    }

    /// Waits until the awaited response is out, or the time is up.
    fn wait(&self) {
        let awaited = self.awaited();
        let (mut awaited, _) = self
            .answered
            .wait_timeout_while(awaited, HANDSHAKE_WAIT, |a| a.is_some())
            .unwrap_or_else(|e| e.into_inner());
        *awaited = None;
    }
}

/// Starts the thread that reads stdin, line by line, until it closes.
pub fn incoming(handshake: Arc<Handshake>) -> std::io::Result<Incoming> {
    let (tx, rx) = mpsc::unbounded();
    std::thread::Builder::new().name("acp stdin".into()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            match read_line(&mut stdin) {
                Ok(None) => break,
                Ok(Some(line)) => {
                    let initialize = Handshake::initialize_id(&line);
                    let waits = initialize.is_some();
                    if waits {
                        *handshake.awaited() = initialize;
                    }
                    if tx.unbounded_send(Ok(line)).is_err() {
                        break;
                    }
                    if waits {
                        handshake.wait();
                    }
                }
                Err(e) => {
                    let _ = tx.unbounded_send(Err(e));
                    break;
                }
            }
        }
    })?;
    Ok(rx)
}

/// Reads the next line (without its `\n` or `\r\n`); `None` at the end of the input. A line
/// that is not UTF-8, is longer than [`MAX_LINE`], or is long and not JSON comes back as
/// [`stand_in`] for it, holding at most [`MAX_LINE`] bytes of it meanwhile.
pub fn read_line(input: &mut impl BufRead) -> std::io::Result<Option<String>> {
    // Room for the longest line with its `\r`, and one byte to tell a longer one.
    let mut line = Vec::new();
    let Some(length) = read_bounded(input, MAX_LINE + 2, &mut line)? else { return Ok(None) };
    let whole = line.len() == length;
    if whole && line.last() == Some(&b'\r') {
        line.pop();
    }
    if !whole || line.len() > MAX_LINE {
        return Ok(Some(stand_in(&line)));
    }
    Ok(Some(match String::from_utf8(line) {
        Ok(text) if text.len() <= CHECKED || is_json(&text) => text,
        Ok(text) => stand_in(text.as_bytes()),
        Err(e) => stand_in(e.as_bytes()),
    }))
}

/// Reads the next line into `line`, without its `\n`, keeping at most `room` bytes of it (the
/// rest is read and dropped); returns the line's whole length, or `None` at the end of the input.
pub fn read_bounded(
    input: &mut impl BufRead,
    room: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    line.clear();
    let (mut length, mut ended) = (0usize, false);
    while !ended {
        let buf = match input.fill_buf() {
            Ok([]) => break,
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let (take, used) = match memchr::memchr(b'\n', buf) {
            Some(at) => {
                ended = true;
                (at, at + 1)
            }
            None => (buf.len(), buf.len()),
        };
        let kept = take.min(room.saturating_sub(line.len()));
        line.extend_from_slice(&buf[..kept]);
        length = length.saturating_add(take);
        input.consume(used);
    }
    Ok((ended || length > 0).then_some(length))
}

fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// What is handed on in place of a line that cannot be: its first [`QUOTED`] bytes as text
/// (a byte that is not UTF-8 shown as U+FFFD), then `…`, which no JSON text can end with
/// outside a string, nor a string without its closing quote.
pub fn stand_in(line: &[u8]) -> String {
    let mut quoted = String::from_utf8_lossy(&line[..line.len().min(QUOTED)]).into_owned();
    quoted.push('…');
    quoted
}

/// The sending end: a `futures::Sink` of lines, written to stdout by a thread of its own.
pub struct Outgoing {
    shared: Arc<Shared>,
}

/// Joined once the connection is over, so every line is written before cca exits.
pub struct Writer(Option<JoinHandle<()>>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// The writer waits on it for lines (or the end).
    gathered: Condvar,
    /// A [`Direct`] sender waits on it for the backlog to drain.
    drained: Condvar,
    /// Told of each line the crate sends (see [`Handshake`]).
    handshake: Arc<Handshake>,
}

#[derive(Default)]
struct State {
    pending: Vec<u8>,
    closed: bool,
    failed: Option<std::io::ErrorKind>,
    /// A sender waiting for the backlog to drain.
    waiting: Option<Waker>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Starts the thread that writes to stdout.
pub fn outgoing(handshake: Arc<Handshake>) -> std::io::Result<(Outgoing, Writer)> {
    let shared = Arc::new(Shared { handshake, ..Shared::default() });
    let writer = shared.clone();
    let handle =
        std::thread::Builder::new().name("acp stdout".into()).spawn(move || write(&writer))?;
    Ok((Outgoing { shared }, Writer(Some(handle))))
}

impl Outgoing {
    /// A second way into the same queue, for lines made without the crate.
    pub fn direct(&self) -> Direct {
        Direct { shared: self.shared.clone() }
    }
}

/// Writes ready-made lines into the queue the crate's messages go through, so they keep their
/// place among them: a line given here is written before any message the crate hands over
/// later. Messages the crate took earlier may still be on their way to the queue, inside the
/// crate; whoever writes here must not need to follow them.
pub struct Direct {
    shared: Arc<Shared>,
}

impl Direct {
    /// Queues `lines` (whole lines, each ending in a newline), waiting while the backlog is full.
    pub fn send(&self, lines: &[u8]) -> std::io::Result<()> {
        let mut state = self.shared.state();
        loop {
            if let Some(kind) = state.failed {
                return Err(kind.into());
            }
            if state.pending.len() < BACKLOG {
                break;
            }
            state = self.shared.drained.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let idle = state.pending.is_empty();
        state.pending.extend_from_slice(lines);
        drop(state);
        if idle {
            self.shared.gathered.notify_one();
        }
        Ok(())
    }
}

impl Writer {
    /// Waits until every line given to [`Outgoing`] is written (or stdout failed).
    pub fn finish(mut self) {
        if let Some(handle) = self.0.take() {
            let _ = handle.join();
        }
    }
}

fn write(shared: &Shared) {
    let mut batch = Vec::new();
    loop {
        {
            let mut state = shared.state();
            while state.pending.is_empty() && !state.closed {
                state = shared.gathered.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            if state.pending.is_empty() {
                return;
            }
            std::mem::swap(&mut batch, &mut state.pending);
            if let Some(waker) = state.waiting.take() {
                waker.wake();
            }
            shared.drained.notify_all();
        }
        let mut stdout = std::io::stdout().lock();
        let written = stdout.write_all(&batch).and_then(|()| stdout.flush());
        batch.clear();
        if let Err(e) = written {
            let mut state = shared.state();
            state.failed = Some(e.kind());
            if let Some(waker) = state.waiting.take() {
                waker.wake();
            }
            shared.drained.notify_all();
            return;
        }
    }
}

impl futures::Sink<String> for Outgoing {
    type Error = std::io::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let mut state = self.shared.state();
        if let Some(kind) = state.failed {
            return Poll::Ready(Err(kind.into()));
        }
        if state.pending.len() >= BACKLOG {
            state.waiting = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, line: String) -> Result<(), Self::Error> {
        self.shared.handshake.sent(&line);
        let mut state = self.shared.state();
        if let Some(kind) = state.failed {
            return Err(kind.into());
        }
        let idle = state.pending.is_empty();
        state.pending.extend_from_slice(line.as_bytes());
        state.pending.push(b'\n');
        drop(state);
        // A writer busy with a batch takes this line with the next one, unasked.
        if idle {
            self.shared.gathered.notify_one();
        }
        Ok(())
    }

    /// The line is the writer's: it is written in order, before cca exits ([`Writer::finish`]).
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self.shared.state().failed {
            Some(kind) => Poll::Ready(Err(kind.into())),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.shared.state().closed = true;
        self.shared.gathered.notify_one();
        Poll::Ready(Ok(()))
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.gathered.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Read};

    use super::*;

    fn lines(input: impl Read) -> Vec<String> {
        let mut input = BufReader::new(input);
        std::iter::from_fn(|| read_line(&mut input).unwrap()).collect()
    }

    #[test]
    fn lines_are_read_without_their_ends() {
        let read = lines(&b"{\"a\":1}\n\r\n{\"b\":2}\r\n[3]"[..]);
        assert_eq!(read, ["{\"a\":1}", "", "{\"b\":2}", "[3]"]);
    }

    #[test]
    fn a_line_that_is_not_utf8_becomes_a_short_stand_in_that_is_not_json() {
        let read = lines(&b"{\"text\":\"caf\xe9\"}\n{}\n"[..]);
        assert_eq!(read, ["{\"text\":\"caf\u{fffd}\"}…", "{}"]);
        assert!(serde_json::from_str::<serde_json::Value>(&read[0]).is_err());
    }

    #[test]
    fn a_long_line_that_is_not_json_is_quoted_by_its_start_only() {
        let json = format!("\"{}\"", "y".repeat(2000));
        let input = format!("{}\n{json}\n", "x".repeat(10_000));
        let read = lines(input.as_bytes());
        assert_eq!(read, [format!("{}…", "x".repeat(QUOTED)), json], "long JSON is taken whole");
    }

    #[test]
    fn a_line_past_the_limit_is_dropped_unheld_and_the_next_is_read() {
        let huge = std::io::repeat(b'{').take(MAX_LINE as u64 + 10);
        let read = lines(huge.chain(&b"\n{\"next\":true}\n"[..]));
        assert_eq!(read, [format!("{}…", "{".repeat(QUOTED)), "{\"next\":true}".to_string()]);
    }
}
