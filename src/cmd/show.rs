//! Steering sessions: `sessions`, `show`, `path`, `fork`, `clear`, `name`, `rm`, `restore`.
//! Everything is recorded in the transcripts themselves; nothing here talks to an engine.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;

use anyhow::{Context, Result};
use serde_json::json;

use super::{print, print_with};
use crate::config::{Flags, Settings};
use crate::error::{Failure, exit};
use crate::front::signals;
use crate::front::terminal::{
    Mode, Spinner, cost_line, rendering, say, say_waiting, spinner_wanted,
};
use crate::human::human_bytes;
use crate::render;
use crate::run::{Cancel, Interrupted, Progress};
use crate::session::{self, settings};
use crate::store::{self, Appender, Repointed, Store};
use crate::transcript::{
    self, Direction, Event, Header, Kind, MarkerEscaper, Meta, Record, Summary, Totals,
};

/// `cca sessions`
pub fn list(
    json_output: bool,
    limit: Option<usize>,
    here: bool,
    engine: Option<&str>,
    since: Option<&str>,
) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let since = since.map(|d| super::parse_date(d, settings.now(), false)).transpose()?;
    let here = if here { Some(super::current_dir()?) } else { None };
    let mut listed = store.listing()?;
    let stored = listed.len();
    if here.is_some() || engine.is_some() || since.is_some() {
        // A transcript that cannot be read has no folder, engine or time to match.
        listed.retain(|l| {
            l.unreadable.is_none()
                && here.as_ref().is_none_or(|here| std::path::Path::new(&l.cwd).starts_with(here))
                && engine.is_none_or(|e| l.engine == e)
                && since.is_none_or(|since| {
                    chrono::DateTime::parse_from_rfc3339(&l.last_activity)
                        .is_ok_and(|t| t.to_utc() >= since)
                })
        });
    }
    listed.sort_by_cached_key(|l| {
        std::cmp::Reverse((l.last_activity.clone(), store::sort_key(&l.id)))
    });
    listed.truncate(limit.unwrap_or(usize::MAX));
    let followed = session::followed(&settings, &store).ok();
    if json_output {
        let items: Vec<_> = listed
            .iter()
            .map(|l| {
                json!({
                    "id": l.id,
                    "path": store.session_path(&l.id).to_string_lossy(),
                    "title": l.title,
                    "name": l.name,
                    "cwd": l.cwd,
                    "created": l.created,
                    "last_activity": l.last_activity,
                    "turns": l.turns,
                    "engine": l.engine,
                    "model": l.model,
                    "prompt": l.prompt,
                    "forked_from": l.forked_from,
                    "usage": {
                        "input_tokens": l.totals.input_tokens,
                        "output_tokens": l.totals.output_tokens,
                        "cost_usd": l.totals.cost_usd,
                        "left_out": l.totals.left_out,
                    },
                    "live_bytes": l.live_bytes,
                    "live_tokens_estimate": estimate_tokens(&settings, &l.engine, l.live_bytes),
                    "full_bytes": l.full_bytes,
                    "problems": l.problems,
                    "unreadable": l.unreadable,
                    "followed": followed.as_deref() == Some(l.id.as_str()),
                })
            })
            .collect();
        print(&format!("{}\n", serde_json::Value::Array(items)))?;
        return Ok(exit::OK);
    }
    if listed.is_empty() && stored > 0 {
        say(&format!(
            "cca: none of the {stored} sessions matches the filters (--here, --engine, --since)"
        ));
        return Ok(exit::OK);
    }
    if listed.is_empty() {
        say("cca: no sessions yet; start one with `cca search \"your question\"`");
        return Ok(exit::OK);
    }
    let width = listed.iter().map(|l| l.id.len()).max().unwrap_or(0);
    let when =
        chrono::format::StrftimeItems::new("%Y-%m-%d %H:%M").parse().expect("a valid format");
    let mut out = String::new();
    for l in &listed {
        let mark = if followed.as_deref() == Some(l.id.as_str()) { '*' } else { ' ' };
        let line = match &l.unreadable {
            Some(why) => format!("{mark} {:<width$}  unreadable: {why}\n", l.id),
            None => format!(
                "{mark} {:<width$}  {}  {:>3} {}  {:<7} {}\n",
                l.id,
                local_time_with(&l.last_activity, &when),
                l.turns,
                if l.turns == 1 { "turn " } else { "turns" },
                transcript::one_line(&l.engine, 40),
                match &l.name {
                    Some(name) => format!(
                        "{} · {}",
                        transcript::one_line(name, 40),
                        transcript::one_line(&l.title, 70)
                    ),
                    None => transcript::one_line(&l.title, 70),
                }
            ),
        };
        out.push_str(&line);
    }
    print(&out)?;
    Ok(exit::OK)
}

/// The token estimate of the session's engine (its `bytes_per_token`), or the default one for
/// an engine no longer configured.
fn estimate_tokens(settings: &Settings, engine: &str, bytes: u64) -> u64 {
    match settings.engines.get(engine) {
        Some(engine) => engine.tokens(bytes),
        None => (bytes as f64 / crate::engine::BYTES_PER_TOKEN).ceil() as u64,
    }
}

fn local_time(rfc3339: &str) -> String {
    let when =
        chrono::format::StrftimeItems::new("%Y-%m-%d %H:%M").parse().expect("a valid format");
    local_time_with(rfc3339, &when)
}

/// An RFC 3339 time as local `YYYY-MM-DD HH:MM`, with the format parsed once by the caller.
fn local_time_with(rfc3339: &str, format: &[chrono::format::Item]) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.with_timezone(&chrono::Local).format_with_items(format.iter()).to_string())
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// `cca show`
pub fn show(id: Option<&str>, raw: bool) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, id)?;
    let path = store.session_path(&id);
    let cannot_read = || format!("cannot read {}", path.display());
    let file = store.open_session(&id)?;
    // Shown in pieces, so that memory does not grow with the file: a first read checks all of
    // it (nothing is shown of a file that cannot be), a second shows the same bytes. `--raw`
    // shows any file as its bytes: this is how to look at one cca cannot read.
    let size = file.metadata().with_context(cannot_read)?.len();
    let checked = if raw { Ok(None) } else { check(&file, size, true) };
    let summary = match checked {
        Ok(None) => None,
        Ok(Some(Ok(summary))) => Some(summary),
        // The scanner names the line that is not UTF-8.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let reader = BufReader::new(ReadAt { file: &file, at: 0, end: size });
            return Err(match transcript::summarize(reader) {
                Ok(Err(e)) => store::not_transcript(&path, &id, e),
                _ => anyhow::anyhow!("{} is not UTF-8", path.display()),
            });
        }
        Err(e) => return Err(e).with_context(cannot_read),
        Ok(Some(Err(e))) => {
            return Err(Failure::new(
                exit::ERROR,
                format!("{} is not a transcript cca can read ({e})", path.display()),
            )
            .hint("`cca show --raw` prints it as it is")
            .into());
        }
    };
    let on_terminal = std::io::stdout().is_terminal();
    // Answers are rendered whole, line by line: no live redrawing.
    let style = rendering(&settings, Mode::Normal).map(|s| render::Style { live: false, ..s });
    let bold = settings.color && (on_terminal || style.is_some());
    let shown = Shown { bold, style, clean: on_terminal };
    let write = |out: &mut dyn Write| -> Result<()> {
        match &summary {
            None => copy(&file, 0..size, out).with_context(cannot_read),
            Some(summary) => {
                let tokens =
                    estimate_tokens(&settings, &summary.header.engine, summary.live.bytes());
                write_readable(&file, size, summary, tokens, shown, out, &cannot_read)
            }
        }
    };
    // A dumb terminal cannot run less; a pager the user named is still theirs to choose.
    if std::io::stdout().is_terminal() && (!settings.dumb_terminal || settings.pager.is_some()) {
        crate::run::page(settings.pager.as_deref(), write)?;
    } else {
        print_with(write)?;
    }
    Ok(exit::OK)
}

/// Reads the first `size` bytes of a transcript through, failing as reading them into a string
/// would if they are not UTF-8; with `summarize`, the summary of what they hold.
fn check(
    file: &File,
    size: u64,
    summarize: bool,
) -> io::Result<Option<Result<Summary, transcript::NotTranscript>>> {
    let mut reader =
        BufReader::with_capacity(256 * 1024, Utf8Checked::new(ReadAt { file, at: 0, end: size }));
    let summary = if summarize { Some(transcript::summarize(&mut reader)?) } else { None };
    // The summary may have stopped early (not a transcript): the rest is checked all the same.
    io::copy(&mut reader, &mut io::sink())?;
    Ok(summary)
}

/// Copies bytes of the file to `out`.
fn copy(file: &File, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
    let mut reader = ReadAt { file, at: range.start, end: range.end };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n])?;
    }
}

/// The conversation for a person: no markers, clear separators, every record visible. Reads
/// the records, and their content, from the file as it writes them.
fn write_readable(
    file: &File,
    size: u64,
    summary: &Summary,
    live_tokens: u64,
    shown: Shown,
    out: &mut dyn Write,
    cannot_read: &dyn Fn() -> String,
) -> Result<()> {
    let live = (summary.live.bytes(), live_tokens);
    let head = readable_head(&summary.header, live, size, &summary.totals);
    out.write_all(head.as_bytes())?;
    // Once writing fails (the reader quit), reading stops too.
    let stop = std::cell::Cell::new(false);
    let mut failed: Option<anyhow::Error> = None;
    let mut done = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let mut unescaped = Vec::with_capacity(70 * 1024);
    let records = Until { inner: ReadAt { file, at: 0, end: size }, stop: &stop };
    let reader = BufReader::with_capacity(256 * 1024, records);
    let scanned = transcript::Scanner::scan(reader, |event| {
        let Event::Record(r) = event else { return };
        if stop.get() {
            return;
        }
        let (on, off) = if shown.bold { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
        let title = record_title(r.kind, &r.meta, &mut done);
        // What the user typed and attached is shown as it is, markdown or not (but cleaned).
        let style = shown.style.filter(|_| matches!(r.kind, Kind::Assistant | Kind::Compaction));
        let written = out
            .write_all(format!("\n{on}── {title} ──{off}\n").as_bytes())
            .map_err(anyhow::Error::from)
            .and_then(|()| {
                let content = Content { file, range: &r.content, style, clean: shown.clean };
                write_content(content, &mut buf, &mut unescaped, out, cannot_read)
            });
        if let Err(e) = written {
            failed = Some(e);
            stop.set(true);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    // These bytes were read once already: an error now means the file changed in between, and
    // what was shown is all there is to show.
    let _ = scanned.with_context(cannot_read)?;
    for p in &summary.problems {
        out.write_all(format!("\n(line {}: {})\n", p.line, p.message).as_bytes())?;
    }
    Ok(())
}

/// A record's content, unescaped, with a newline after it if it has none of its own.
fn write_content(
    content: Content,
    buf: &mut [u8],
    unescaped: &mut Vec<u8>,
    out: &mut dyn Write,
    cannot_read: &dyn Fn() -> String,
) -> Result<()> {
    let Content { file, range, style, clean } = content;
    if range.is_empty() {
        return Ok(());
    }
    let mut escaper = MarkerEscaper::new(Direction::Unescape);
    let mut renderer = style.map(render::Renderer::new);
    let mut rendered = String::new();
    // The start of a character split across two reads, for the renderer (which takes text).
    let mut carry: Vec<u8> = Vec::new();
    let mut last = 0u8;
    let mut at = range.start;
    while at < range.end {
        let n = ((range.end - at) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], at).with_context(cannot_read)?;
        at += n as u64;
        unescaped.clear();
        escaper.push(&buf[..n], unescaped);
        if at == range.end {
            escaper.finish(unescaped);
        }
        if let Some(&b) = unescaped.last() {
            last = b;
        }
        if renderer.is_none() && !clean {
            out.write_all(unescaped)?;
            continue;
        }
        carry.extend_from_slice(unescaped);
        let mut whole = match std::str::from_utf8(&carry) {
            Ok(text) => text.len(),
            Err(e) => e.valid_up_to(),
        };
        // A carriage return that ends a piece may start a CRLF: it waits for the next one.
        if at < range.end && carry[..whole].ends_with(b"\r") {
            whole -= 1;
        }
        let text = std::str::from_utf8(&carry[..whole]).with_context(cannot_read)?;
        rendered.clear();
        match &mut renderer {
            Some(renderer) => renderer.push(text, &mut rendered),
            None => rendered.push_str(&render::clean_text(text)),
        }
        carry.drain(..whole);
        out.write_all(rendered.as_bytes())?;
    }
    if let Some(mut renderer) = renderer {
        // The file was checked to be UTF-8 before anything was shown: nothing is left over.
        rendered.clear();
        renderer.finish(&mut rendered);
        out.write_all(rendered.as_bytes())?;
        return Ok(());
    }
    if last != b'\n' {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// How `cca show` draws records: bold titles, answers rendered in this style, and, on a
/// terminal, the rest cleaned ([`render::clean_text`]).
#[derive(Clone, Copy)]
struct Shown {
    bold: bool,
    style: Option<render::Style>,
    clean: bool,
}

/// A record's content in the file, and the style to render it in, if any, or whether to clean
/// it.
struct Content<'a> {
    file: &'a File,
    range: &'a Range<u64>,
    style: Option<render::Style>,
    clean: bool,
}

/// What `cca show` prints above the records.
fn readable_head(
    h: &Header,
    (live_bytes, live_tokens): (u64, u64),
    full_bytes: u64,
    totals: &Totals,
) -> String {
    // Header fields are any text a file holds: no terminal escapes reach the screen.
    let field = |text: &str| transcript::one_line(text, 200);
    let title = if h.title.is_empty() { "(untitled)".to_string() } else { field(&h.title) };
    let mut out = format!("{title}\n");
    out.push_str(&format!(
        "session {}{} · {}{} · prompt {} · started {}\n",
        field(&h.id),
        h.name.as_ref().map(|n| format!(" ({})", field(n))).unwrap_or_default(),
        field(&h.engine),
        h.model.as_ref().map(|m| format!(" ({})", field(m))).unwrap_or_default(),
        field(&h.prompt),
        field(&local_time(&h.created))
    ));
    if let Some(f) = &h.forked_from {
        out.push_str(&format!("forked from {} at turn {}\n", field(&f.session), f.turn));
    }
    out.push_str(&format!(
        "context sent next turn: {} (~{} tokens); the file: {}\n",
        human_bytes(live_bytes),
        live_tokens,
        human_bytes(full_bytes)
    ));
    if let Some(cost) = cost_line(totals, totals) {
        out.push_str(&format!("the answers so far: {cost}\n"));
    }
    out
}

/// A record's title in `cca show`; `done` counts the answers so far, for turn numbers.
/// Marker fields are any text a file holds: each is flattened to one line (no control
/// character), as the header's are.
fn record_title(kind: Kind, meta: &Meta, done: &mut u64) -> String {
    let field = |text: &str| transcript::one_line(text, 200);
    let turn = *done + 1;
    match kind {
        Kind::User => format!("{turn}. You"),
        Kind::Attachment => {
            format!("attached: {}", field(meta.name.as_deref().unwrap_or("context")))
        }
        Kind::Assistant => {
            *done += 1;
            let mut t = format!("{turn}. {}", field(meta.engine.as_deref().unwrap_or("answer")));
            if let Some(m) = &meta.model {
                t.push_str(&format!(" ({})", field(m)));
            }
            if let Some(ms) = meta.duration_ms {
                t.push_str(&format!(" · {:.1} s", ms as f64 / 1000.0));
            }
            t
        }
        Kind::Failed => format!(
            "not answered, not sent again: {}",
            transcript::one_line(meta.reason.as_deref().unwrap_or("failed"), 120)
        ),
        Kind::Interrupted => format!(
            "interrupted, not sent again: {}",
            transcript::one_line(meta.reason.as_deref().unwrap_or("stopped"), 120)
        ),
        Kind::Clear => "context cleared here: nothing above is sent again".to_string(),
        Kind::Compaction => format!(
            "summary of {}, sent in their place ({} → {})",
            crate::human::turns(meta.first.unwrap_or(1), meta.through.unwrap_or(0)),
            human_bytes(meta.bytes_before.unwrap_or(0)),
            human_bytes(meta.bytes_after.unwrap_or(0))
        ),
    }
}

/// Reads part of a file by offset, leaving the file's position alone.
struct ReadAt<'a> {
    file: &'a File,
    at: u64,
    end: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min((self.end - self.at) as usize);
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads on until `stop` is set, then ends as if at the end.
struct Until<'a, R> {
    inner: R,
    stop: &'a std::cell::Cell<bool>,
}

impl<R: Read> Read for Until<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.get() { Ok(0) } else { self.inner.read(buf) }
    }
}

/// Passes bytes through, failing as `read_to_string` does when they are not UTF-8.
struct Utf8Checked<R> {
    inner: R,
    /// The start of a character split across two reads.
    carry: Vec<u8>,
}

impl<R: Read> Utf8Checked<R> {
    fn new(inner: R) -> Self {
        Utf8Checked { inner, carry: Vec::with_capacity(4) }
    }
}

impl<R: Read> Read for Utf8Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let invalid =
            || io::Error::new(io::ErrorKind::InvalidData, "stream did not contain valid UTF-8");
        let n = self.inner.read(buf)?;
        if n == 0 {
            return if self.carry.is_empty() { Ok(0) } else { Err(invalid()) };
        }
        let mut rest = &buf[..n];
        // A character split across reads is completed first, a byte at a time (three at most).
        while !self.carry.is_empty() && !rest.is_empty() {
            self.carry.push(rest[0]);
            rest = &rest[1..];
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                Err(e) if e.error_len().is_some() => return Err(invalid()),
                Err(_) => {}
            }
        }
        match std::str::from_utf8(rest) {
            Ok(_) => {}
            Err(e) if e.error_len().is_some() => return Err(invalid()),
            Err(e) => self.carry.extend_from_slice(&rest[e.valid_up_to()..]),
        }
        Ok(n)
    }
}

/// `cca path`
pub fn path(id: Option<&str>) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, id)?;
    print(&format!("{}\n", store.session_path(&id).display()))?;
    Ok(exit::OK)
}

/// `cca fork`
pub fn fork(id: Option<&str>, at: Option<u64>) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let source = session::chosen(&settings, &store, id)?;
    let new = fork_session(&settings, &store, &source, at)?;
    print(&format!("{new}\n"))?;
    say(&format!("cca: forked {source} into {new}; it is now the latest session"));
    Ok(exit::OK)
}

/// Creates a session from the first `at` exchanges of `source` (all by default); returns its id.
pub fn fork_session(
    settings: &Settings,
    store: &Store,
    source: &str,
    at: Option<u64>,
) -> Result<String> {
    let _lock = store.lock(source, true, || say_waiting(source))?;
    let (summary, exchange_ends) = store.summarize_with_ends(source)?;
    let n = at.unwrap_or(summary.exchanges);
    if at == Some(0) {
        return Err(Failure::usage("a fork at 0 would keep nothing of the session")
            .hint("keep at least one exchange (`--at 1`), or start anew with `cca search \"...\"`")
            .into());
    }
    if n > summary.exchanges {
        return Err(Failure::usage(format!(
            "session {source} has {} exchange(s); cannot fork at {n}",
            summary.exchanges
        ))
        .into());
    }
    let end = match n {
        0 => summary.header_end,
        n => exchange_ends[n as usize - 1],
    };
    let mut body = vec![0u8; (end - summary.header_end) as usize];
    std::os::unix::fs::FileExt::read_exact_at(
        &store.open_session(source)?,
        &mut body,
        summary.header_end,
    )
    .with_context(|| format!("cannot read {}", store.session_path(source).display()))?;
    let body = String::from_utf8(body).context("the transcript is not UTF-8")?;
    let now = settings.now();
    let header = Header {
        created: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        forked_from: Some(transcript::ForkedFrom { session: source.to_string(), turn: n }),
        // A name belongs to one session: the fork starts without one.
        name: None,
        // The fork is cca's own: importing again never writes into it.
        imported: None,
        ..summary.header
    };
    let stamp = now.format("%Y%m%d-%H%M%S").to_string();
    let id = store.create_session(&stamp, |id| {
        transcript::render_header(&Header { id: id.to_string(), ..header.clone() }) + &body
    })?;
    store.set_latest(&id)?;
    Ok(id)
}

/// `cca clear`
pub fn clear(id: Option<&str>) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, id)?;
    clear_session(&settings, &store, &id)?;
    say(&format!(
        "cca: cleared {id}: its next turn starts without the history (the file keeps it)"
    ));
    Ok(exit::OK)
}

pub fn clear_session(settings: &Settings, store: &Store, id: &str) -> Result<()> {
    let _lock = store.lock(id, true, || say_waiting(id))?;
    let summary = repaired_summary(settings, store, id)?;
    let record = Record {
        kind: Kind::Clear,
        meta: Meta { at: Some(settings.now_string()), ..Meta::default() },
        content: String::new(),
    };
    Appender::open(store, id)?
        .append(transcript::render_record(&record, summary.exchanges + 1).as_bytes())
}

/// The summary of a session records are about to be appended to, its cut-off last record
/// repaired first (saying so). Call it holding the session's lock.
fn repaired_summary(settings: &Settings, store: &Store, id: &str) -> Result<Summary> {
    let summary = store.summarize_to_append(id)?;
    match crate::turn::repair_cut_off(settings, store, id, &summary)? {
        Some(note) => {
            say(&format!("cca: {note}"));
            store.summarize_to_append(id)
        }
        None => Ok(summary),
    }
}

/// `cca name [ID] NAME`, `cca name --clear [ID]`
pub fn name(first: Option<&str>, second: Option<&str>, clear: bool) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    // One word is the name (for the followed session); two are the session and the name.
    let (target, new_name) = match (first, second, clear) {
        (target, None, true) => (target, None),
        (_, Some(_), true) => {
            return Err(Failure::usage("`cca name --clear` takes only the session")
                .hint("cca name --clear ID")
                .into());
        }
        (Some(target), Some(name), false) => (Some(target), Some(name)),
        (Some(name), None, false) | (None, Some(name), false) => (None, Some(name)),
        (None, None, false) => {
            return Err(Failure::usage("give the session a name")
                .hint("cca name rust-locks (the followed session), or cca name ID rust-locks")
                .into());
        }
    };
    if let Some(name) = new_name {
        store::validate_name(name)?;
    }
    let id = session::chosen(&settings, &store, target)?;
    let _names = store.lock_names(|| say("cca: another cca is naming a session; waiting…"))?;
    let _lock = store.lock(&id, true, || say_waiting(&id))?;
    let summary = store.summarize(&id)?;
    if let Some(name) = new_name {
        if name != id && store.session_path(name).is_file() {
            return Err(Failure::usage(format!("`{name}` is the id of another session"))
                .hint("choose another name")
                .into());
        }
        let taken =
            store.listing()?.into_iter().find(|l| l.id != id && l.name.as_deref() == Some(name));
        if let Some(other) = taken {
            return Err(Failure::usage(format!(
                "the name `{name}` is taken by session {}",
                other.id
            ))
            .hint(format!(
                "take it away first (`cca name --clear {}`), or choose another",
                other.id
            ))
            .into());
        }
    }
    if summary.header.name.as_deref() != new_name {
        let header = Header { name: new_name.map(String::from), ..summary.header.clone() };
        store.rewrite_header(&id, &header, summary.header_end)?;
    }
    match new_name {
        Some(name) => say(&format!(
            "cca: {id} is named {name}; use it wherever an id goes (`cca show {name}`)"
        )),
        None => say(&format!("cca: {id} has no name now")),
    }
    Ok(exit::OK)
}

/// `cca compact`
pub fn compact(id: Option<&str>, keep: Option<u64>, fail_fast: bool) -> Result<u8> {
    let (settings, store) = settings(&Flags { fail_fast, ..Flags::default() })?;
    let id = session::chosen(&settings, &store, id)?;
    compact_session(&settings, &store, &id, keep)
}

/// Summarises a session's older turns now, saying how it went on stderr: `cca compact`, and
/// `/compact` in `cca chat`.
pub fn compact_session(
    settings: &Settings,
    store: &Store,
    id: &str,
    keep: Option<u64>,
) -> Result<u8> {
    let _lock = store.lock(id, true, || say_waiting(id))?;
    let summary = repaired_summary(settings, store, id)?;
    let (engine, model) = session::engine_and_model(settings, &summary.header, false)?;
    let ctx = session::Session { settings, store, id, engine, model: model.as_deref() };
    let mut spinner = Spinner::default();
    if spinner_wanted(settings) {
        spinner.start(&format!("waiting for {} to summarise", engine.name));
    }
    let keep = keep.unwrap_or(settings.compaction.keep_recent);
    let cancel = Cancel::new();
    let _signals = signals::route_to(&cancel)?;
    let compacted =
        crate::compact::compact(&ctx, &summary, keep, &cancel, &mut |progress| match progress {
            Progress::Stderr(bytes) => spinner.stderr(bytes),
            Progress::Retry(note) => spinner.stderr(format!("{note}\n").as_bytes()),
            Progress::Tool(call) => spinner.stderr(format!("· {}\n", call.summary()).as_bytes()),
            Progress::Stopping => spinner.clear(),
            Progress::Text(_) | Progress::ToolStarted(_) | Progress::Steer(_) => {}
        });
    spinner.clear();
    match compacted {
        Ok(Some(c)) => {
            say(&format!(
                "cca: {} of {id} {} now a summary: {} -> {} of context",
                crate::human::turns(c.first, c.through),
                if c.first == c.through { "is" } else { "are" },
                human_bytes(c.bytes_before),
                human_bytes(c.bytes_after)
            ));
            Ok(exit::OK)
        }
        Ok(None) => {
            say(&format!(
                "cca: nothing to compact in {id}: it has {} live exchange(s), and the last {keep} are kept",
                summary.live.exchanges.len()
            ));
            Ok(exit::OK)
        }
        Err(e) => match e.downcast_ref::<Interrupted>() {
            Some(Interrupted(why)) => {
                say("cca: interrupted; nothing changed");
                Ok(why.exit_code())
            }
            None => Err(e.context(format!("compaction of {id} failed; nothing changed"))),
        },
    }
}

/// `cca rm`
pub fn remove(ids: &[String], purge: bool) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    // Resolve all first: one bad id removes nothing. With --purge, a session in the trash is
    // found there.
    let found: Vec<(String, bool)> = ids
        .iter()
        .map(|id| match store.resolve_id(id) {
            Ok(id) => Ok((id, false)),
            Err(e) if purge => store.resolve_trashed(id).map(|id| (id, true)).map_err(|_| e),
            Err(e) => Err(e),
        })
        .collect::<Result<_>>()?;
    for (id, trashed) in &found {
        if *trashed {
            store.purge_trashed(id)?;
            say(&format!("cca: deleted {id} (it was in the trash)"));
            continue;
        }
        let _lock = store.lock(id, true, || say_waiting(id))?;
        let repointed = store.remove(id, purge)?;
        if purge {
            say(&format!("cca: deleted {id}"));
        } else {
            say(&format!(
                "cca: moved {id} to {} (`cca restore {id}` brings it back)",
                store.trash_dir().display()
            ));
        }
        // `,` followed the removed session: never a silent switch to another conversation.
        let followed_by_env = settings.session.is_some();
        match repointed {
            Repointed::To(now) if !followed_by_env => {
                let title =
                    store.summarize_unlocked(&now).map(|s| s.header.title).unwrap_or_default();
                say(&format!(
                    "cca: `latest` pointed at {id}; it now points at {now} ({title}): `,` continues that one"
                ));
                say(
                    "hint: continue another with `cca search -s ID`, or `cca sessions` to see them",
                );
            }
            Repointed::Nowhere if !followed_by_env => {
                say("cca: no session is left: `,` has nothing to continue until a new one starts");
            }
            _ => {}
        }
    }
    Ok(exit::OK)
}

/// `cca restore`
pub fn restore(ids: &[String]) -> Result<u8> {
    let (_, store) = settings(&Flags::default())?;
    if ids.is_empty() {
        let trash = store.trash_ids();
        if trash.is_empty() {
            say("cca: the trash is empty");
        } else {
            // Newest first, with what each was about, as `cca sessions` lists them.
            let lines: String = trash
                .iter()
                .rev()
                .map(|id| match store.trashed_header(id) {
                    Some(h) => {
                        let when = h.created.replace('T', " ").trim_end_matches('Z').to_string();
                        format!("{id}  {when}  {}\n", h.title)
                    }
                    None => format!("{id}  (cannot be read)\n"),
                })
                .collect();
            print(&lines)?;
        }
        return Ok(exit::OK);
    }
    for id in ids {
        store.restore(id)?;
        say(&format!("cca: restored {id}"));
        // Names are unique; one taken while this session was in the trash is now on two.
        let name = store.summarize(id).ok().and_then(|s| s.header.name);
        if let Some(name) = name {
            let listed = store.listing()?;
            if let Some(other) =
                listed.iter().find(|l| l.id != *id && l.name.as_deref() == Some(name.as_str()))
            {
                say(&format!(
                    "cca: warning: {} is named {name} too; the name finds neither until one is renamed",
                    other.id
                ));
                say(&format!("hint: cca name --clear {id}, or cca name {id} NEW-NAME"));
            }
        }
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::testing::any_kind;
    use proptest::prelude::*;
    use transcript::Transcript;

    fn header() -> Header {
        crate::transcript::testing::header("t")
    }

    /// `cca show` as it was when it read the whole file into memory: what streaming must give.
    fn shown_from_memory(text: &str, bold: bool) -> Option<String> {
        let (t, problems) = transcript::parse(text).ok()?;
        let summary = transcript::summarize(text.as_bytes()).unwrap().unwrap();
        let live_bytes = summary.live.bytes();
        let tokens = (live_bytes as f64 / crate::engine::BYTES_PER_TOKEN).ceil() as u64;
        let live = (live_bytes, tokens);
        let mut out = readable_head(&t.header, live, text.len() as u64, &summary.totals);
        let mut done = 0;
        for r in &t.records {
            let title = record_title(r.kind, &r.meta, &mut done);
            let (on, off) = if bold { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
            out.push_str(&format!("\n{on}── {title} ──{off}\n"));
            if !r.content.is_empty() {
                out.push_str(&r.content);
                if !r.content.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        for p in problems {
            out.push_str(&format!("\n(line {}: {})\n", p.line, p.message));
        }
        Some(out)
    }

    fn any_content() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("<!-- cca:end -->".to_string()),
            Just("\\<!-- cca:user -->".to_string()),
            Just("\\\\".to_string()),
            Just("```".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            "[a-zé ]{0,8}",
        ];
        prop::collection::vec(piece, 0..10).prop_map(|v| v.concat())
    }

    /// A pager-less reader that takes whatever it is given.
    fn streamed(text: &str, bold: bool) -> Option<String> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let size = text.len() as u64;
        let summary = check(&file, size, true).unwrap()?.ok()?;
        let mut out = Vec::new();
        let tokens = (summary.live.bytes() as f64 / crate::engine::BYTES_PER_TOKEN).ceil() as u64;
        let shown = Shown { bold, style: None, clean: false };
        write_readable(&file, size, &summary, tokens, shown, &mut out, &|| "cannot read".into())
            .unwrap();
        Some(String::from_utf8(out).unwrap())
    }

    /// Gives `data` in pieces of the sizes given, in turn.
    struct Pieces<'a> {
        data: &'a [u8],
        sizes: Vec<usize>,
        turn: usize,
    }

    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let size = self.sizes[self.turn % self.sizes.len()];
            self.turn += 1;
            let n = size.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn show_streams_what_it_showed_from_memory(
            records in prop::collection::vec((any_kind(), any_content()), 0..8),
            cut in any::<prop::sample::Index>(),
            bold in any::<bool>(),
        ) {
            let records = records
                .into_iter()
                .map(|(kind, content)| Record { kind, meta: Meta::default(), content })
                .collect();
            let text = transcript::render(&Transcript { header: header(), records });
            // Cut anywhere: a record cut off is shown among the problems.
            let at = cut.index(text.len() + 1);
            let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap();
            let text = &text[..at];
            prop_assert_eq!(streamed(text, bold), shown_from_memory(text, bold));
        }

        #[test]
        fn content_streams_in_any_pieces(
            content in prop::collection::vec(
                prop_oneof![
                    any_content(),
                    Just("\r".to_string()),
                    Just("\x1b]52;c;aGk=\x07".to_string()),
                    Just("\u{9b}2J".to_string()),
                ],
                0..4,
            )
            .prop_map(|v| v.concat()),
            chunk in 1usize..9,
            clean in any::<bool>(),
        ) {
            let stored = {
                let mut out = Vec::new();
                let mut escaper = MarkerEscaper::new(Direction::Escape);
                escaper.push(content.as_bytes(), &mut out);
                escaper.finish(&mut out);
                out
            };
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(b"--").unwrap();
            file.write_all(&stored).unwrap();
            let mut out = Vec::new();
            let (mut buf, mut unescaped) = (vec![0u8; chunk], Vec::new());
            let range = 2..2 + stored.len() as u64;
            let stored_content = Content { file: &file, range: &range, style: None, clean };
            write_content(stored_content, &mut buf, &mut unescaped, &mut out, &|| String::new())
                .unwrap();
            // Cleaned on a terminal, by the one rule, whatever the pieces; else exactly the text.
            let mut expected =
                if clean { render::clean_text(&content).into_owned() } else { content.clone() };
            if !content.is_empty() && !content.ends_with('\n') {
                expected.push('\n');
            }
            prop_assert_eq!(String::from_utf8(out).unwrap(), expected);
        }

        #[test]
        fn utf8_is_checked_across_any_reads(
            pieces in prop::collection::vec(
                prop_oneof![
                    any::<String>().prop_map(String::into_bytes),
                    prop::collection::vec(any::<u8>(), 0..3),
                ],
                0..6,
            ),
            sizes in prop::collection::vec(1usize..5, 1..4),
        ) {
            let data = pieces.concat();
            let mut through = Vec::new();
            let read = Utf8Checked::new(Pieces { data: &data, sizes, turn: 0 })
                .read_to_end(&mut through);
            match std::str::from_utf8(&data) {
                Ok(_) => {
                    prop_assert!(read.is_ok());
                    prop_assert_eq!(through, data);
                }
                Err(_) => prop_assert_eq!(
                    read.unwrap_err().to_string(),
                    "stream did not contain valid UTF-8"
                ),
            }
        }
    }

    #[test]
    fn a_file_that_is_not_utf8_or_not_a_transcript_is_refused_before_anything_is_shown() {
        let text = transcript::render(&Transcript { header: header(), records: vec![] });
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file.write_all(b"\xff\n").unwrap();
        let size = file.metadata().unwrap().len();
        assert!(check(&file, size, false).is_err());
        assert!(check(&file, size, true).is_err());
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"not a transcript\n").unwrap();
        assert!(matches!(check(&file, 17, true), Ok(Some(Err(_)))));
        file.write_all(b"\xc3").unwrap();
        assert!(check(&file, 18, true).is_err());
    }
}
