//! `cca grep`: finds what was said in any session. Chooses the transcripts (every session, the
//! ones named, or the trash), searches them on a few threads with `crate::grep`, and prints
//! the matches grouped by session, in session order, as they are found.
//!
//! Exit codes are grep's: 0 a match, 1 none, 2 an error. A transcript that cannot be read is
//! reported and skipped, and makes the exit 2, as in grep.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use anyhow::Result;
use serde_json::json;

use crate::cli::{GrepArgs, GrepRole};
use crate::config::Flags;
use crate::error::{Failure, exit};
use crate::grep::{Case, Matcher, Options, PatternOptions, Role, Searcher, Shown, Sink};
use crate::session::settings;
use crate::store::{self, Store};
use crate::transcript::{Header, Kind};

/// A session's output is held until its turn to print, up to this much; past it, its thread
/// waits for its turn and prints as it goes.
const HOLD: usize = 1 << 20;
/// All held output of sessions that finished before their turn, together.
const PARKED: usize = 8 << 20;

/// `cca grep`
pub(crate) fn run(args: &GrepArgs) -> Result<u8> {
    grep(args).map_err(|e| {
        // grep's convention: an error is exit 2, whatever it is.
        let hint = crate::error::hint_of(&e);
        let failure = Failure::new(exit::USAGE, format!("{e:#}"));
        match hint {
            Some(hint) => failure.hint(hint).into(),
            None => failure.into(),
        }
    })
}

/// How matches are printed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `clean`: on a terminal, what a transcript holds is shown by the one rule
    /// ([`crate::render::clean_text`]); piped, its lines are their exact bytes.
    Lines {
        color: bool,
        clean: bool,
    },
    Json,
    Ids,
    /// `-c`: `ID:N` for each session with N matching lines.
    Count,
}

fn grep(args: &GrepArgs) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let case = match (args.ignore_case, args.case_sensitive) {
        (true, _) => Case::Insensitive,
        (_, true) => Case::Sensitive,
        _ => Case::Smart,
    };
    let pattern = PatternOptions { case, fixed: args.fixed_strings, word: args.word_regexp };
    let matcher = Matcher::new(&args.pattern, &pattern).map_err(|why| {
        Failure::usage(format!("cannot search for `{}`: {why}", args.pattern)).hint(
            "patterns are Rust regular expressions (https://docs.rs/regex/#syntax); \
             -F searches for the text as it is",
        )
    })?;
    let now = settings.now();
    let (since, until) = args.span.parse(now)?;
    let opts = Options {
        context: args.context.unwrap_or(0),
        role: args.role.map(|r| match r {
            GrepRole::User => Role::User,
            GrepRole::Assistant => Role::Assistant,
        }),
        since,
        until,
        first_only: args.list,
        positions: false,
    };
    let here = if args.here { Some(crate::session::current_dir()?) } else { None };
    let format = if args.list {
        Format::Ids
    } else if args.count {
        Format::Count
    } else if args.json {
        Format::Json
    } else {
        let terminal = std::io::stdout().is_terminal();
        Format::Lines { color: settings.color && terminal, clean: terminal }
    };
    // Line numbers and match ranges only where they are printed.
    let opts = Options {
        positions: matches!(format, Format::Json | Format::Lines { color: true, .. }),
        ..opts
    };

    let mut ids: Vec<String> = match (args.trash, args.ids.is_empty()) {
        (false, true) => store.session_ids()?,
        (true, true) => store.trash_ids(),
        (false, false) => args.ids.iter().map(|id| store.resolve_id(id)).collect::<Result<_>>()?,
        (true, false) => {
            args.ids.iter().map(|id| store.resolve_trashed(id)).collect::<Result<_>>()?
        }
    };
    ids.sort_by_cached_key(|id| store::sort_key(id));
    ids.dedup();
    let targets: Vec<(String, PathBuf)> = ids
        .into_iter()
        .map(|id| {
            let path = if args.trash { store.trashed_path(&id) } else { store.session_path(&id) };
            (id, path)
        })
        .collect();

    let (engine, note) = crate::session::engine_filter(&store, args.engine.as_deref());
    if let Some(note) = note {
        crate::front::terminal::say(&format!("cca: {note}"));
    }
    let job = Job {
        store: &store,
        matcher: &matcher,
        opts: &opts,
        format,
        engine: engine.as_deref(),
        here: here.as_deref(),
        printer: Printer::new(format),
        next: AtomicUsize::new(0),
        matched: AtomicBool::new(false),
        errors: AtomicBool::new(false),
    };
    // Files are searched in parallel; the printer keeps their output in session order.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(targets.len()).max(1) {
            scope.spawn(|| job.work(&targets));
        }
    });
    let state = job.printer.state.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = state.failed {
        return Err(e);
    }
    Ok(if state.closed {
        // Whoever closed our stdout (`| head`) has what they wanted.
        exit::OK
    } else if job.errors.load(Ordering::Relaxed) {
        exit::USAGE
    } else if job.matched.load(Ordering::Relaxed) {
        exit::OK
    } else {
        exit::ERROR
    })
}

/// Everything the searching threads share.
struct Job<'a> {
    store: &'a Store,
    matcher: &'a Matcher,
    opts: &'a Options,
    format: Format,
    engine: Option<&'a str>,
    here: Option<&'a Path>,
    printer: Printer,
    /// The next transcript to take.
    next: AtomicUsize,
    matched: AtomicBool,
    errors: AtomicBool,
}

impl Job<'_> {
    fn work(&self, targets: &[(String, PathBuf)]) {
        let mut searcher = Searcher::new();
        // A regex of its own: a shared one hands its scratch space around through a lock.
        let matcher = self.matcher.clone();
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some((id, path)) = targets.get(index) else { return };
            let mut out = Output {
                job: self,
                index,
                id,
                path,
                header: None,
                buf: Vec::new(),
                started: false,
                streaming: false,
            };
            if !self.printer.stopped() {
                out.search(&mut searcher, &matcher);
            }
            let buf = std::mem::take(&mut out.buf);
            self.printer.finish(index, buf, out.streaming);
        }
    }
}

/// One transcript's search and its output.
struct Output<'j, 'a> {
    job: &'j Job<'a>,
    index: usize,
    id: &'j str,
    path: &'j Path,
    header: Option<Header>,
    buf: Vec<u8>,
    /// The session's heading has been written.
    started: bool,
    /// It is this transcript's turn, and its output goes straight out.
    streaming: bool,
}

impl Output<'_, '_> {
    fn search(&mut self, searcher: &mut Searcher, matcher: &Matcher) {
        let job = self.job;
        let path = self.path.display();
        let why = match job.store.open_transcript(self.path) {
            Err(e) => format!("{e:#}"),
            Ok(file) => match searcher.search(&file, matcher, job.opts, self) {
                Ok(Ok(0)) => return,
                Ok(Ok(n)) => {
                    if job.format == Format::Count {
                        let _ = writeln!(self.buf, "{}:{n}", self.id);
                    }
                    job.matched.store(true, Ordering::Relaxed);
                    return;
                }
                Ok(Err(not)) => format!("{path} is not a transcript cca can read ({not})"),
                Err(e) => format!("cannot read {path}: {e}"),
            },
        };
        job.errors.store(true, Ordering::Relaxed);
        crate::front::terminal::say(&format!("cca: error: {why}; skipped"));
    }

    /// Hands output over once there is enough of it (or it is this transcript's turn).
    fn flush_if_full(&mut self) -> bool {
        if !self.streaming && self.buf.len() < HOLD {
            return true;
        }
        if !self.streaming {
            self.job.printer.wait_turn(self.index);
            self.streaming = true;
        }
        let buf = std::mem::take(&mut self.buf);
        self.job.printer.write_now(&buf)
    }

    /// Who said a line: You, or the engine that answered.
    fn who<'m>(&'m self, place: &'m crate::grep::Place) -> Cow<'m, str> {
        let meta = &place.meta;
        let engine = meta
            .engine
            .as_deref()
            .or(self.header.as_ref().map(|h| h.engine.as_str()))
            .unwrap_or("answer");
        match place.kind {
            Kind::Assistant if place.stray => {
                format!("{engine} (no question: not an exchange)").into()
            }
            Kind::User => Cow::Borrowed("You"),
            Kind::Attachment => {
                format!("You ({})", meta.name.as_deref().unwrap_or("attached")).into()
            }
            Kind::Assistant => Cow::Borrowed(engine),
            Kind::Failed => format!("{engine} (no answer)").into(),
            Kind::Interrupted => format!("{engine} (interrupted)").into(),
            Kind::Compaction => format!("{engine} (summary)").into(),
            Kind::Clear => Cow::Borrowed("cleared"),
        }
    }
}

impl Sink for Output<'_, '_> {
    fn header(&mut self, header: &Header) -> bool {
        if self.job.engine.is_some_and(|e| e != header.engine)
            || self.job.here.is_some_and(|here| !Path::new(&header.cwd).starts_with(here))
        {
            return false;
        }
        self.header = Some(header.clone());
        true
    }

    fn line(&mut self, line: &Shown) -> bool {
        let header = self.header.as_ref().expect("the header comes first");
        let mut buf = std::mem::take(&mut self.buf);
        match self.job.format {
            // Counted by the search; the total is written when it ends.
            Format::Count => {
                self.buf = buf;
                return true;
            }
            Format::Ids => {
                buf.extend_from_slice(self.id.as_bytes());
                buf.push(b'\n');
                self.buf = buf;
                return false;
            }
            Format::Json => {
                let object = json!({
                    "session": self.id,
                    "name": header.name,
                    "title": header.title,
                    "path": self.path,
                    "turn": line.place.turn,
                    "role": Role::of(line.place.kind).word(),
                    "kind": line.place.kind.word(),
                    "who": self.who(line.place),
                    "at": line.place.meta.at.as_deref().unwrap_or(header.created.as_str()),
                    "line": line.number,
                    "text": String::from_utf8_lossy(line.text),
                    "matches": line.matches.iter().map(|m| [m.start, m.end]).collect::<Vec<_>>(),
                });
                let _ = serde_json::to_writer(&mut buf, &object);
                buf.push(b'\n');
            }
            Format::Lines { color, clean } => {
                let paint = |code| if color { (code, "\x1b[0m") } else { ("", "") };
                // Names from the file are any text: one line each, no control character.
                let field = |text: &str| crate::transcript::one_line(text, 100);
                if !self.started {
                    self.started = true;
                    let (on, off) = paint("\x1b[1;35m");
                    let _ = write!(buf, "{on}{}", self.id);
                    if let Some(name) = &header.name {
                        let _ = write!(buf, " · {}", field(name));
                    }
                    if !header.title.is_empty() {
                        let _ =
                            write!(buf, " · {}", crate::transcript::one_line(&header.title, 80));
                    }
                    let _ = writeln!(buf, "{off}");
                }
                let sep = if line.context { '-' } else { ':' };
                let (on, off) = paint("\x1b[32m");
                let who = field(&self.who(line.place));
                let _ = write!(buf, "{on}{}. {who}{sep}{off} ", line.place.turn);
                let (on, off) = paint("\x1b[1;31m");
                // A CRLF line's CR is not shown on a terminal.
                let text = match clean {
                    true => line.text.strip_suffix(b"\r").unwrap_or(line.text),
                    false => line.text,
                };
                let mut at = 0;
                for m in line.matches.iter().filter(|_| color) {
                    let (start, end) = (m.start.max(at), m.end.max(at));
                    let (start, end) = (start.min(text.len()), end.min(text.len()));
                    put(&mut buf, &text[at..start], clean);
                    if end > start {
                        buf.extend_from_slice(on.as_bytes());
                        put(&mut buf, &text[start..end], clean);
                        buf.extend_from_slice(off.as_bytes());
                    }
                    at = end;
                }
                put(&mut buf, &text[at..], clean);
                buf.push(b'\n');
            }
        }
        self.buf = buf;
        self.flush_if_full()
    }

    fn gap(&mut self) -> bool {
        if let Format::Lines { .. } = self.job.format {
            self.buf.extend_from_slice(b"--\n");
        }
        self.flush_if_full()
    }
}

/// Appends part of a transcript's line: cleaned for a terminal, else as it is.
fn put(buf: &mut Vec<u8>, bytes: &[u8], clean: bool) {
    if clean {
        buf.extend_from_slice(
            crate::render::clean_text(&String::from_utf8_lossy(bytes)).as_bytes(),
        );
    } else {
        buf.extend_from_slice(bytes);
    }
}

/// Prints each transcript's output whole and in order, while the threads search ahead.
struct Printer {
    state: Mutex<PrintState>,
    turn: Condvar,
    /// Stop searching: stdout was closed, or cannot be written.
    stop: AtomicBool,
    /// A blank line between sessions (the grouped form).
    blank_between: bool,
}

#[derive(Default)]
struct PrintState {
    /// The transcript whose output goes out next.
    next: usize,
    /// Output of transcripts that finished before their turn.
    parked: BTreeMap<usize, Vec<u8>>,
    parked_bytes: usize,
    wrote_any: bool,
    /// Whether the transcript printing now has printed yet.
    current_started: bool,
    closed: bool,
    failed: Option<anyhow::Error>,
}

impl Printer {
    fn new(format: Format) -> Printer {
        Printer {
            state: Mutex::new(PrintState::default()),
            turn: Condvar::new(),
            stop: AtomicBool::new(false),
            blank_between: matches!(format, Format::Lines { .. }),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PrintState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every transcript before `index` has printed.
    fn wait_turn(&self, index: usize) {
        let mut state = self.lock();
        while state.next != index {
            state = self.turn.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Writes output of the transcript whose turn it is (only its thread calls this).
    fn write_now(&self, bytes: &[u8]) -> bool {
        let mut state = self.lock();
        self.write(&mut state, bytes);
        !self.stopped()
    }

    /// A transcript is done: its output goes out now if it is its turn, or waits for it.
    fn finish(&self, index: usize, buf: Vec<u8>, streaming: bool) {
        let mut state = self.lock();
        if state.next != index && !streaming {
            if state.parked_bytes + buf.len() <= PARKED {
                state.parked_bytes += buf.len();
                state.parked.insert(index, buf);
                return;
            }
            while state.next != index {
                state = self.turn.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        }
        self.write(&mut state, &buf);
        state.next += 1;
        state.current_started = false;
        loop {
            let next = state.next;
            let Some(parked) = state.parked.remove(&next) else { break };
            state.parked_bytes -= parked.len();
            self.write(&mut state, &parked);
            state.next += 1;
            state.current_started = false;
        }
        self.turn.notify_all();
    }

    fn write(&self, state: &mut PrintState, bytes: &[u8]) {
        if bytes.is_empty() || state.closed || state.failed.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let blank = self.blank_between && state.wrote_any && !state.current_started;
        let result = if blank { out.write_all(b"\n") } else { Ok(()) }
            .and_then(|()| out.write_all(bytes))
            .and_then(|()| out.flush());
        state.wrote_any = true;
        state.current_started = true;
        match result {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                state.closed = true;
                self.stop.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                state.failed = Some(anyhow::Error::new(e).context("cannot write to stdout"));
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }
}
